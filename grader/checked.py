"""The grader's checks of its own references, run at import while the grader is new.

A lecture module whose reference has a gradient derived by hand checks that gradient
against central differences when it is imported (shared.py's layer, tied.py's tie,
...), so that no grade runs with a wrong reference. Such a check depends on nothing
but the grader's own code and NumPy, and costs up to a tenth of a second, at every
grade of its lecture. once(check) runs it unless it has passed for this very grader:
a pass is noted under build/cache/checks/, named by a digest of every .py file under
grader/ and NumPy's version, so that any change to the grader runs every check again.
"""

import glob
import hashlib
import os

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
NOTES = os.path.join(os.path.dirname(HERE), "build", "cache", "checks")
_digest = []


def grader_digest():
    """A digest of the grader's Python (every grader/**/*.py) and NumPy's version."""
    if not _digest:
        h = hashlib.sha1(np.__version__.encode())
        for path in sorted(glob.glob(os.path.join(HERE, "**", "*.py"), recursive=True)):
            h.update(b"\0" + os.path.relpath(path, HERE).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
        _digest.append(h.hexdigest()[:20])
    return _digest[0]


def once(check):
    """check(), unless it has already passed for this grader; raises as check does."""
    note = os.path.join(NOTES, f"{grader_digest()}.{check.__module__}.{check.__qualname__}")
    if os.path.exists(note):
        return
    check()
    try:
        os.makedirs(NOTES, exist_ok=True)
        for old in os.listdir(NOTES):  # an earlier grader's
            if not old.startswith(grader_digest() + "."):
                try:
                    os.remove(os.path.join(NOTES, old))
                except OSError:
                    pass
        with open(note, "w"):
            pass
    except OSError:
        pass  # a tree one cannot write to checks again next time
