"""The lectures: every package grader/lectures/lc<N>_<name>/ is one, found by looking.

A lecture's package is its manifest (__init__.py): TITLE, TESTS (its test
entries, in report order), and optionally BENCH (what `make bench` links,
grader/lectures/<lecture>/bench.c and bench.py), DEMOS (what a lecture-mode
run of an exercise must show) and DEMO_AFTER (exercise, np, log directory) ->
None, which `make demo` calls after a run that logged pipeline stage calls
there (XT_STAGE_LOG), to draw them. Nothing outside the lecture's own places names
it: the Makefile, the grader, `make test`, `make bench`, `make demo`, the stub
generator and `make hint` all ask this module.
"""

import importlib
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = re.compile(r"lc(\d+)_\w+$")


def names():
    """Every lecture, in lecture order: the packages lc<N>_<name> under grader/lectures/."""
    found = [d for d in os.listdir(HERE)
             if NAME.match(d) and os.path.exists(os.path.join(HERE, d, "__init__.py"))]
    return sorted(found, key=lambda d: (int(NAME.match(d).group(1)), d))


def number(name):
    return int(NAME.match(name).group(1))


def resolve(lc):
    """'N', 'lcN' or 'lcN_name' -> 'lcN_name' (None: unknown)."""
    key = str(lc).strip()
    for name in names():
        if key in (name, name.split("_")[0], name.split("_")[0][2:]):
            return name
    return None


def load(name):
    """The lecture's manifest module; its tests know their lecture."""
    mod = importlib.import_module(f"lectures.{name}")
    for t in mod.TESTS:
        t.lecture = name
    return mod


def exercises(name):
    """The lecture's exercises (programs), in the order its tests list them."""
    out = []
    for t in load(name).TESTS:
        if t.exercise not in out:
            out.append(t.exercise)
    return out


def functions(name, exercise):
    """The functions the grader tests in one exercise."""
    return [t.name for t in load(name).TESTS if t.exercise == exercise]


def places(name):
    """Where everything a lecture owns lives, as path prefixes from the project's root;
    nothing outside them may name it."""
    return (f"{name}/", f"solutions/{name}/", f"grader/lectures/{name}/",
            f"grader/mutants/{name}/", page_path(name))


def page_path(name):
    """The lecture's page: docs/<lecture>.md, relative to the project's root."""
    return os.path.join("docs", f"{name}.md")


def page(name):
    """The text of the lecture's page (OSError when it cannot be read)."""
    with open(os.path.join(os.path.dirname(os.path.dirname(HERE)), page_path(name))) as f:
        return f.read()
