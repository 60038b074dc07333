"""Lecture 3, ZeRO: the manifest.

Every expected value is single-process NumPy (grader/nn.py) in float64: Adam
on the plain definition, and full-batch training on the whole global batch;
the memory each rank reports (libxt's xt_alloc accounting) is checked against
the per-stage formulas of docs/lc3_zero.md.
"""

from lectures.lc3_zero.adam import ADAM_UPDATE, MIXED_STEP
from lectures.lc3_zero.stages import STAGE_TESTS
from lectures.lc3_zero.checkpoint import CHECKPOINT_TESTS

TITLE = "ZeRO"

TESTS = [ADAM_UPDATE] + STAGE_TESTS + [MIXED_STEP] + CHECKPOINT_TESTS
