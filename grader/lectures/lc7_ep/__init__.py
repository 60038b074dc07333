"""Lecture 7, mixture of experts and expert parallelism: the manifest.

Every expected value is one process's computation in NumPy (float64): the
routing, or one dense MoE layer with every token on one process (nn.Moe),
of which each rank must hold its own tokens' outputs and its own experts'
gradients. How it was computed is checked from every message (PMPI) and
from the experts' calls each rank made (libxt logs them: which expert, how
many tokens, and the exchanges pending while it ran).
"""

from lectures.lc7_ep.gshard import gshard_backward, gshard_forward

TITLE = "mixture of experts and expert parallelism"

# The report time of make grade LC=N SOL=1 on a 2-core machine (measured; the README's table).
GRADE_SECONDS = 30

TESTS = [gshard_forward, gshard_backward]

DEMOS = {"gshard": ["y, dx, dwr and dexperts: matches one process: yes"]}
