"""Lecture 6, context parallelism: the manifest.

Every expected value is one process's computation in NumPy (float64): a
softmax, or causal attention over the whole sequence (grader/nn.py's
attention blocks), of which each rank must hold its positions' rows. How it
was computed is checked from every message (PMPI) and from the attention
blocks each rank computed (the lecture's kit logs them: their masks, the position pairs
they covered, and the receives pending while they ran).
"""

from lectures.lc6_cp.allgather import allgather_kv_backward, allgather_kv_forward
from lectures.lc6_cp.flash import flash_attention_backward, flash_attention_forward
from lectures.lc6_cp.gradsync import cp_train
from lectures.lc6_cp.ring import ring_attention_backward, ring_attention_forward
from lectures.lc6_cp.softmax import (lse_merge, online_softmax, ring_online_softmax,
                                     softmax_backward)
from lectures.lc6_cp.ulysses import (ulysses_attention_backward, ulysses_attention_forward,
                                     ulysses_heads_to_seq, ulysses_seq_to_heads)
from lectures.lc6_cp.zigzag import zigzag_attention_backward, zigzag_attention_forward
from lectures.lc6_cp.events import AttnCall

TITLE = "context parallelism"

# The report time of make grade LC=N SOL=1 on a 2-core machine (measured; the README's table).
GRADE_SECONDS = 1

# What the lecture's kit logs in a case record (events.py registers each kind's parser).
KIT_EVENTS = [AttnCall]

TESTS = [online_softmax, lse_merge, softmax_backward,
         flash_attention_forward, flash_attention_backward,
         ring_online_softmax,
         ring_attention_forward, ring_attention_backward,
         zigzag_attention_forward, zigzag_attention_backward,
         allgather_kv_forward, allgather_kv_backward,
         cp_train,
         ulysses_seq_to_heads, ulysses_heads_to_seq, ulysses_attention_forward,
         ulysses_attention_backward]

DEMOS = {"online_softmax": ["online and two-pass softmax agree: yes",
                            "merged halves equal the whole: yes"],
         "softmax_backward": ["dx equals the Jacobian's product: yes"],
         "flash_attention": ["every rank's tiles and values agree with the plain computation: "
                             "yes"],
         "ring_online_softmax": ["every rank's y equals the single-process softmax: yes"],
         "ring_attention": ["matches one process: yes"],
         "zigzag_attention": ["matches one process: yes"],
         "allgather_kv_attention": ["matches one process: yes"],
         "cp_grad_sync": ["every rank holds the same weights: yes"],
         "ulysses_attention": ["round trip gives every rank its input back: yes",
                               "o, the saved lse, dq, dk, dv agree with one process: yes"]}
