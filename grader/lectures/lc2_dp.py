"""Lecture 2, data parallelism: one entry per function a student writes.

Every expected value is single-process NumPy (grader/nn.py): the sampler's
index lists from the plain definition, and for the DDP steps, full-batch SGD
on the whole global batch in float64.
"""

from lectures.lc2_sampler import SAMPLER
from lectures.lc2_ddp import DDP_TESTS

LECTURE = "lc2_dp"

TESTS = [SAMPLER] + DDP_TESTS
