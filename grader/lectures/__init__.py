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
import textwrap

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


def every_exercise():
    """[(lecture, exercise)] of every lecture, in order."""
    return [(lec, ex) for lec in names() for ex in exercises(lec)]


class NotFound(Exception):
    """EX= names no exercise, or more than one."""


def find(name):
    """(lecture, exercise) for an exercise or function name, or a unique substring of an
    exercise's name; NotFound says what there is."""
    all_ex = every_exercise()
    exact = [(lec, ex) for lec, ex in all_ex if ex == name]
    if not exact:
        exact = [(lec, ex) for lec, ex in all_ex if name in functions(lec, ex)]
    if not exact:
        exact = [(lec, ex) for lec, ex in all_ex if name in ex]
    if len(exact) == 1:
        return exact[0]
    if exact:
        raise NotFound(f"EX={name} matches {', '.join(ex for _, ex in exact)}: which one?")
    by_lecture = {}
    for lec, ex in all_ex:
        by_lecture.setdefault(lec, []).append(ex)
    raise NotFound(f"no exercise {name!r}; there are:\n" + "\n".join(
        textwrap.fill(", ".join(exs), 78, initial_indent=f"  {lec}: ",
                      subsequent_indent="    ") for lec, exs in by_lecture.items()))


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
