"""Lecture 3 tests: mixed (being written)."""

MIXED_TESTS = []
