"""Lecture 1, communication primitives: the manifest.

Every expected value is the plain single-process definition computed by
NumPy (a stack of the ranks' inputs, reduced or reindexed), never the
parallel algorithm itself. Rules state the algorithm's cost exactly.
"""

from lectures.lc1_basic.tests import TESTS

TITLE = "communication primitives"

# The report time of make grade LC=N SOL=1 on a 2-core machine (measured; the README's table).
GRADE_SECONDS = 2

# What a lecture-mode run must show (make test runs every demo at np=4): the
# ring's step display, through its last all-gather step; the node-aware and
# the double-tree all-reduces' own checks of their results, and at np=4 no
# rank interior in both trees.
DEMOS = {"fun_ring_allreduce": ["step 6 (all-gather)"],
         "fun_hierarchical_allreduce": ["every rank holds the sum of all ranks' buffers: yes"],
         "fun_double_binary_tree": ["ranks interior in both trees: 0",
                                    "every rank holds the sum of all ranks' buffers: yes"]}

__all__ = ["DEMOS", "TESTS", "TITLE"]
