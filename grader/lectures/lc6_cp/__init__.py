"""Lecture 6, context parallelism: the manifest.

Every expected value is one process's computation in NumPy (float64): a
softmax, or causal attention over the whole sequence (grader/nn.py's
attention blocks), of which each rank must hold its positions' rows. How it
was computed is checked from every message (PMPI) and from the attention
blocks each rank computed (libxt logs them: their masks, the position pairs
they covered, and the receives pending while they ran).
"""

from lectures.lc6_cp.softmax import (lse_merge, online_softmax, ring_online_softmax,
                                     softmax_backward)

TITLE = "context parallelism"

TESTS = [online_softmax, lse_merge,
         softmax_backward,
         ring_online_softmax]

DEMOS = {"online_softmax": ["online and two-pass softmax agree: yes",
                            "merged halves equal the whole: yes"],
         "softmax_backward": ["dx equals the Jacobian's product: yes"],
         "ring_online_softmax": ["every rank's y equals the single-process softmax: yes"]}
