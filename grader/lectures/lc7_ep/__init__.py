"""Lecture 7, mixture of experts and expert parallelism: the manifest.

Every expected value is one process's computation in NumPy (float64): the
routing, or one dense MoE layer with every token on one process (nn.Moe),
of which each rank must hold its own tokens' outputs and its own experts'
gradients. How it was computed is checked from every message (PMPI) and
from the experts' calls each rank made (libxt logs them: which expert, how
many tokens, and the exchanges pending while it ran).
"""

from lectures.lc7_ep.layer import moe_backward, moe_forward

TITLE = "mixture of experts and expert parallelism"

TESTS = [moe_forward, moe_backward]

DEMOS = {"moe_forward": ["y agrees with a dense computation: yes"],
         "moe_backward": ["gradients agree with finite differences: yes"]}
