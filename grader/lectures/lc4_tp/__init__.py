"""Lecture 4, tensor parallelism: the manifest.

Every expected value is the unsharded single-process computation in NumPy
(float64: grader/nn.py and the layers' own definitions), cut into each rank's
block by the split rule afterwards; every gradient a function produces is
compared on every rank, and every collective is checked exactly (which MPI
function, how many floats, on which communicator) through PMPI.
"""

from lectures.lc4_tp.linear import col_linear_backward, col_linear_forward, col_linear_gather
from lectures.lc4_tp.vocab import cross_entropy_tp, embedding_tp_backward, embedding_tp_forward

TITLE = "tensor parallelism"

TESTS = [col_linear_forward, col_linear_backward, col_linear_gather,
         embedding_tp_forward, embedding_tp_backward,
         cross_entropy_tp]

DEMOS = {"col_parallel_linear": ["single process x W equal: yes"],
         "embedding_tp": ["single process E[tokens] equal: yes"],
         "cross_entropy_tp": ["loss and dlogits agree: yes"]}
