"""Lecture 1, communication primitives: the manifest.

Every expected value is the plain single-process definition computed by
NumPy (a stack of the ranks' inputs, reduced or reindexed), never the
parallel algorithm itself. Rules state the algorithm's cost exactly.
"""

from lectures.lc1_basic.tests import TESTS

TITLE = "communication primitives"

__all__ = ["TESTS", "TITLE"]
