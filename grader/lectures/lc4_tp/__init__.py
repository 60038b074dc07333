"""Lecture 4, tensor parallelism: the manifest.

Every expected value is the unsharded single-process computation in NumPy
(float64: grader/nn.py and the layers' own definitions), cut into each rank's
block by the split rule afterwards; every gradient a function produces is
compared on every rank, and every collective is checked exactly (which MPI
function, how many floats, on which communicator) through PMPI.
"""

from lectures.lc4_tp.attention import (attention_tp_backward, attention_tp_forward,
                                       attention_tp_init, attention_tp_shard)
from lectures.lc4_tp.dropout import tp_dropout_backward, tp_dropout_forward, tp_rng_init
from lectures.lc4_tp.events import WeightGrad
from lectures.lc4_tp.linear import (col_linear_backward, col_linear_backward_async,
                                    col_linear_forward, col_linear_gather, row_linear_backward,
                                    row_linear_forward)
from lectures.lc4_tp.mlp import mlp_tp_backward, mlp_tp_forward, mlp_tp_shard
from lectures.lc4_tp.model import model_tp_step
from lectures.lc4_tp.norm import rmsnorm_backward, rmsnorm_forward
from lectures.lc4_tp.seqpar import seqpar_backward, seqpar_forward
from lectures.lc4_tp.vocab import cross_entropy_tp, embedding_tp_backward, embedding_tp_forward

TITLE = "tensor parallelism"

# The report time of make grade LC=N SOL=1 on a 2-core machine (measured; the README's table).
GRADE_SECONDS = 1

# What the lecture's kit logs in a case record (events.py registers each kind's parser).
KIT_EVENTS = [WeightGrad]

TESTS = [col_linear_forward, col_linear_backward, col_linear_gather,
         row_linear_forward, row_linear_backward,
         col_linear_backward_async,
         mlp_tp_shard, mlp_tp_forward, mlp_tp_backward,
         tp_rng_init, tp_dropout_forward, tp_dropout_backward,
         attention_tp_init, attention_tp_shard, attention_tp_forward, attention_tp_backward,
         embedding_tp_forward, embedding_tp_backward,
         cross_entropy_tp,
         rmsnorm_forward, rmsnorm_backward,
         seqpar_forward, seqpar_backward,
         model_tp_step]

DEMOS = {"col_parallel_linear": ["single process x W equal: yes"],
         "tp_async_linear": ["dx and dW the same both ways: yes"],
         "row_parallel_linear": ["single process x W + b equal: yes"],
         "mlp_tp": ["(agree)"],
         "tp_dropout": ["replicated masks the same on every tensor rank: yes",
                        "split masks all different across the tensor group: yes"],
         "attention_tp": ["(agree)"],
         "embedding_tp": ["single process E[tokens] equal: yes"],
         "cross_entropy_tp": ["loss and dlogits agree: yes"],
         "rms_norm": ["y, dx, dgamma agree: yes"],
         "sequence_parallel": ["(agree)"],
         "model_tp": ["step 5: loss"]}
