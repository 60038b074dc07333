"""Where a grade's seconds go, kept while it runs: each part of the work a grade does is
timed under one name (the launches, and inside them the cases; make; nm; the inputs the
grader writes; the references it computes; its clean-up), and what no name accounts for is
the grader's own (reading records, comparing, reports). grade.py writes it into its JSON
("profile"); make bench-grade (grader/gradebench.py) prints it per lecture.
"""

import collections
import threading
import time

# name -> [how many times, seconds]
SPENT = collections.defaultdict(lambda: [0, 0.0])

# The parts, in the order a table shows them, and what each is.
PARTS = [("launch", "mpirun launches, start to end"),
         ("cases", "inside them: the cases themselves (their ranks' own clocks)"),
         ("make", "make: the builds (nothing to do, once built)"),
         ("nm", "nm: the symbol scans of each exercise's object"),
         ("inputs", "the inputs the grader draws and writes"),
         ("references", "the NumPy references"),
         ("cleanup", "removing the previous grade's case files")]


class timed:
    """with timed("make"): ... adds the block's seconds to SPENT["make"]."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc):
        add(self.name, time.monotonic() - self.start)
        return False


def add(name, seconds, count=1):
    entry = SPENT[name]
    entry[0] += count
    # Seconds on the main thread's clock only: work it does not wait for (an exercise
    # graded on a thread meanwhile, the launches of a refusal test run at once) would
    # count twice. Each launch counts wherever it runs, and so do the cases, which are
    # the ranks' own clocks, inside the launches, wherever they are read.
    if name == "cases" or threading.current_thread() is threading.main_thread():
        entry[1] += seconds


def profile(total):
    """{part: {"count", "seconds"}} of what was timed, and "grader": the rest of total (the
    cases are inside the launches, not beside them)."""
    out = {name: {"count": n, "seconds": round(s, 3)} for name, (n, s) in SPENT.items()}
    timed_total = sum(s for name, (_, s) in SPENT.items() if name != "cases")
    out["grader"] = {"count": 1, "seconds": round(max(0.0, total - timed_total), 3)}
    return out
