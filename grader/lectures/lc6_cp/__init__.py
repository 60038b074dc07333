"""Lecture 6, context parallelism: the manifest.

Every expected value is one process's computation in NumPy (float64): a
softmax, or causal attention over the whole sequence (grader/nn.py's
attention blocks), of which each rank must hold its positions' rows. How it
was computed is checked from every message (PMPI) and from the attention
blocks each rank computed (libxt logs them: their masks, the position pairs
they covered, and the receives pending while they ran).
"""

from lectures.lc6_cp.flash import flash_attention_backward, flash_attention_forward

TITLE = "context parallelism"

TESTS = [flash_attention_forward, flash_attention_backward]

DEMOS = {"flash_attention": ["every rank's tiles and values agree with the plain computation: "
                             "yes"]}
