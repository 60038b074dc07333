"""Lecture 7, mixture of experts and expert parallelism: the manifest.

Every expected value is one process's computation in NumPy (float64): the
routing, or one dense MoE layer with every token on one process (nn.Moe),
of which each rank must hold its own tokens' outputs and its own experts'
gradients. How it was computed is checked from every message (PMPI) and
from the experts' calls each rank made (libxt logs them: which expert, how
many tokens, and the exchanges pending while it ran).
"""

from lectures.lc7_ep.overlap import experts_exchange, moe_overlap_forward

TITLE = "mixture of experts and expert parallelism"

TESTS = [experts_exchange, moe_overlap_forward]

DEMOS = {"all2all_async": ["every row's output matches one process: yes"],
         "moe_overlap": ["y matches one process: yes"]}
