"""Lecture 2, data parallelism: the manifest.

Every expected value is single-process NumPy (grader/nn.py): the sampler's
index lists from the plain definition, and for the DDP steps, full-batch SGD
on the whole global batch in float64.
"""

from lectures.lc2_dp.sampler import SAMPLER
from lectures.lc2_dp.ddp import DDP_TESTS

TITLE = "data parallelism"

TESTS = [SAMPLER] + DDP_TESTS
