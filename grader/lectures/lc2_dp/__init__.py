"""Lecture 2, data parallelism: the manifest.

Every expected value is single-process NumPy (grader/nn.py): the sampler's
index lists from the plain definition, and for the DDP steps, full-batch SGD
on the whole global batch in float64.
"""

from lectures.lc2_dp.sampler import distributed_sampler
from lectures.lc2_dp.ddp import ddp_accum_step, ddp_bucketed_step, ddp_naive_step

TITLE = "data parallelism"

# The report time of make grade LC=N SOL=1 on a 2-core machine (measured; the README's table).
GRADE_SECONDS = 1

TESTS = [distributed_sampler, ddp_naive_step, ddp_bucketed_step, ddp_accum_step]
