"""make test's proof that a lecture is one unit.

In a copy of the tree, it adds a throwaway lecture in the lecture's own places
only (solutions/<lecture>/, grader/lectures/<lecture>/, grader/mutants/<lecture>/,
docs/<lecture>.md), lets the stub generator write its student tree, and grades
it as a user would: the solution full marks, the stub TODO, the mutants caught,
its hints found. Its exercise's driver (cases, demo, main) is its own too,
grader/lectures/<lecture>/drivers/sum_ints.c. The lecture has a kit of its
own (solutions/<lecture>/kit.h, grader/lectures/<lecture>/kit/tally.c) that
logs an event kind of its own (TW, parsed by the lecture's events.py), and a
rule on those events. Every
file outside those places must be byte for byte what it was: nothing shared
was edited to make the new lecture, its kit or its event kind known.
"""

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import lectures

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

NAME = "lc90_throwaway"
EXERCISE = "sum_ints"

SOLUTION = """\
/*
 * sum_ints.c: the one exercise of a throwaway lecture, which make test adds
 * to a copy of the tree to show that a lecture needs no shared file edited.
 */
#include "kit.h" /* tally_sums */
#include "xt.h"

void sum_ranks(const int *x, int *y, int n, MPI_Comm comm)
{
    /*
     * TODO: y = the element-wise sum of every rank's x, on every rank;
     *   then tally_sums(y, n), once.
     */
    // BEGIN SOLUTION
    MPI_Allreduce(x, y, n, MPI_INT, MPI_SUM, comm);
    tally_sums(y, n);
    // END SOLUTION
}

/* Its cases, demo and main: grader/lectures/lc90_throwaway/drivers/sum_ints.c. */
"""

DRIVER = """\
/*
 * The driver of lc90_throwaway/sum_ints.c, compiled as one unit after it.
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    int *y = xt_case_alloc(c, "y", x.count, XT_I32);
    sum_ranks(x.data, y, (int)x.count, xt_case_comm(c));
    xt_case_output(c, "y", y, XT_I32, x.count);
}

static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int x[3] = {rank, 10 * rank, 100 * rank}, y[3];
    sum_ranks(x, y, 3, comm);
    xt_print_buffer_ordered(comm, "sum: ", y, 3, MPI_INT);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
"""

KIT_HEADER = """\
/*
 * kit.h: the throwaway lecture's kit (grader/lectures/lc90_throwaway/kit/).
 */
#ifndef LC90_KIT_H
#define LC90_KIT_H

/* Logs a TW event: how many sums, and the first. */
void tally_sums(const int *y, int n);

#endif
"""

KIT_SOURCE = """\
/*
 * tally.c: the throwaway lecture's kit: one event kind of its own.
 */
#include "kit.h"
#include "xt_harness.h"

__attribute__((constructor)) static void declare_events(void)
{
    xt_event_kind("TW", "tally: count first");
}

void tally_sums(const int *y, int n)
{
    xt_event("TW", "%d %d", n, n ? y[0] : 0);
}
"""

EVENTS = '''"""The throwaway kit's TW events, as rec.tallies."""

import records


def parse_tally(words):
    return int(words[0]), int(words[1])


records.event_kind("TW", "tallies", parse_tally)
'''

MANIFEST = '''"""A throwaway lecture: its manifest and its one test."""

import numpy as np

from spec import exact, NPS, test
from lectures.lc90_throwaway.events import parse_tally

TITLE = "a throwaway lecture"

KIT_EVENTS = [parse_tally]


def tallied_once(case, inputs, records):
    """Each rank tallied its sums once, through the kit (its TW event)."""
    return [(r, f"rank {r} tallied {rec.tallies}: the kit's tally_sums, once, with "
                f"{case['count']} sums") for r, rec in enumerate(records)
            if [n for n, _ in rec.tallies] != [case["count"]]]


def inputs(case, rng):
    return {"x": [rng.integers(-1000, 1000, case["count"], dtype=np.int32)
                  for _ in range(case.np)]}


def reference(case, inputs):
    total = np.sum(np.stack(inputs["x"]), axis=0, dtype=np.int32) if case["count"] else \\
        np.zeros(0, np.int32)
    return [{"y": total} for _ in range(case.np)]


@test("sum_ints", points=5, inputs=inputs, reference=reference, tolerance=exact,
      rules=[tallied_once], hint="every rank ends with the sum over all ranks")
def sum_ranks(rng):
    return [{"np": n, "count": c} for n in NPS for c in (0, 1, 7)]


TESTS = [sum_ranks]
'''

DOC = """# A throwaway lecture

| file | function(s) you write | points |
|---|---|---|
| [`sum_ints.c`](#sum_ints) | `sum_ranks` | 5 |

All files are in `lc90_throwaway/`; the lecture is worth 5 points.

## sum_ints

### Hints

<details><summary>Hint 1: the idea</summary>

Every rank needs the same sums: an all-reduce.

</details>

<details><summary>Hint 2: the structure</summary>

One library call, with MPI_SUM over comm.

</details>

<details><summary>Hint 3: near-code</summary>

```c
MPI_Allreduce(x, y, n, MPI_INT, MPI_SUM, comm);
tally_sums(y, n);
```

</details>
"""

MUTANT_ABOUT = """\
# Copies its own x: no communication, right only on one rank.
expect: WRONG
test: sum_ranks
detail: rank \\d+ 'y'\\[\\d+\\] expected
"""


MUTANT_UNTALLIED = """\
# The sums never tallied: right values, but the kit's event is missing.
expect: RULE
test: sum_ranks
detail: rank \\d+ tallied \\[\\]: the kit's tally_sums, once
"""


def patch(about, line, new):
    """A mutant: its header `about`, then a hunk replacing the solution's `line` (with one
    line of context either side) by the lines `new`."""
    lines = SOLUTION.split("\n")
    at = lines.index(line)
    path = f"solutions/{NAME}/{EXERCISE}.c"
    return (about + f"--- a/{path}\n+++ b/{path}\n"
            f"@@ -{at},3 +{at},{2 + len(new)} @@\n"
            f" {lines[at - 1]}\n-{lines[at]}\n" + "".join(f"+{n}\n" for n in new) +
            f" {lines[at + 1]}\n")


def mutant_patch():
    return patch(MUTANT_ABOUT, "    MPI_Allreduce(x, y, n, MPI_INT, MPI_SUM, comm);",
                 ["    (void)comm;", "    for (int i = 0; i < n; i++)", "        y[i] = x[i];"])


def untallied_patch():
    return patch(MUTANT_UNTALLIED, "    tally_sums(y, n);", [])


def tree_files(root):
    """Every file of the tree but build/, caches and what every make writes for editors
    (compile_commands.json), relative to root."""
    out = []
    for d, dirs, files in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if not (rel == "." and x in ("build", ".git")) and
                   x != "__pycache__"]
        out += [os.path.normpath(os.path.join(rel, f)) for f in files
                if not (rel == "." and f == "compile_commands.json")]
    return sorted(out)


def digests(root, skip):
    out = {}
    for rel in tree_files(root):
        if rel.startswith(skip):
            continue
        with open(os.path.join(root, rel), "rb") as f:
            out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def copy_tree(dest, with_build=True):
    """The project's files (what git tracks and would track) and, with_build, libxt's
    build, so the copy builds only what is new (without it: a fresh clone)."""
    shutil.rmtree(dest, ignore_errors=True)
    try:
        files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                               cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        files = tree_files(ROOT)
    for rel in files:
        src = os.path.join(ROOT, rel)
        if rel.startswith("build/") or not os.path.isfile(src):
            continue
        os.makedirs(os.path.dirname(os.path.join(dest, rel)), exist_ok=True)
        shutil.copy2(src, os.path.join(dest, rel))
    if with_build and os.path.isdir(os.path.join(ROOT, "build", "common")):
        shutil.copytree(os.path.join(ROOT, "build", "common"),
                        os.path.join(dest, "build", "common"),
                        ignore=shutil.ignore_patterns("tests"))


def write(root, rel, text):
    path = os.path.join(root, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def run(root, args, timeout=600):
    res = subprocess.run([sys.executable] + args, cwd=root, capture_output=True, text=True,
                         timeout=timeout)
    return res.returncode, res.stdout + res.stderr


def check(work):
    """[(what, ok, details)]: the throwaway lecture graded in a copy of the tree."""
    root = os.path.join(work, "tree")
    copy_tree(root)
    places = lectures.places(NAME)
    before = digests(root, places)
    write(root, f"solutions/{NAME}/{EXERCISE}.c", SOLUTION)
    write(root, f"grader/lectures/{NAME}/__init__.py", MANIFEST)
    write(root, f"solutions/{NAME}/kit.h", KIT_HEADER)
    write(root, f"grader/lectures/{NAME}/kit/tally.c", KIT_SOURCE)
    write(root, f"grader/lectures/{NAME}/drivers/{EXERCISE}.c", DRIVER)
    write(root, f"grader/lectures/{NAME}/events.py", EVENTS)
    write(root, f"grader/mutants/{NAME}/sum_copies_own.patch", mutant_patch())
    write(root, f"grader/mutants/{NAME}/sum_untallied.patch", untallied_patch())
    write(root, f"docs/{NAME}.md", DOC)
    out = []

    rc, text = run(root, ["grader/stubgen.py", "--write"])
    stub = os.path.join(root, NAME, f"{EXERCISE}.c")
    ok = rc == 0 and os.path.exists(stub) and "XT_TODO(" in open(stub).read()
    rc2, text2 = run(root, ["grader/stubgen.py", "--check"])
    out.append(("the stub generator writes its student tree, in sync", ok and rc2 == 0,
                (text + text2).splitlines()[-10:]))

    def grade(extra, title):
        report = os.path.abspath(os.path.join(work, title + ".json"))
        rc, text = run(root, ["grader/grade.py", "--lc", "90", "--seed", "1", "--json", report]
                       + extra)
        try:
            with open(report) as f:
                data = json.load(f)
            verdicts = [t["verdict"] for lec in data["lectures"] for t in lec["tests"]]
        except (OSError, ValueError):
            data, verdicts = {"score": -1, "max": -1}, []
        return rc, data, verdicts, text.splitlines()[-12:]

    rc, data, verdicts, lines = grade(["--sol"], "solutions")
    out.append(("make grade SOL=1 finds it and gives full marks",
                rc == 0 and verdicts == ["OK"] and data["score"] == data["max"] == 5, lines))
    rc, data, verdicts, lines = grade([], "stubs")
    out.append(("make grade on its student tree: TODO", rc != 0 and verdicts == ["TODO"], lines))
    rc, text = run(root, ["grader/mutants.py", "sum_copies_own", "sum_untallied"])
    out.append(("its mutants are caught: WRONG values, and RULE from its kit's own event kind "
                "(no TW event)", rc == 0 and all(re.search(rf"^ok\s+{m}", text, re.M)
                                                 for m in ("sum_copies_own", "sum_untallied")),
                text.splitlines()[-8:]))
    rc, text = run(root, ["grader/hints.py", "--check"])
    rc1, hint1 = run(root, ["grader/hints.py", EXERCISE])
    out.append(("make hint finds its three hints", rc == 0 and "hint 1 of 3" in hint1,
                (text + hint1).splitlines()[-8:]))
    after = digests(root, places)
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    out.append(("no file outside the lecture's own places was touched", not changed, changed))
    # Negative control: a shared file edited in the copy must show.
    with open(os.path.join(root, "Makefile"), "a") as f:
        f.write("# edited\n")
    seen = sorted(k for k, v in digests(root, places).items() if after.get(k) != v)
    out.append(("an edit to a shared file (the Makefile) is seen (negative control)",
                seen == ["Makefile"], seen))
    # The copy's grades kept their files in memory (docs/setup.md): freed with the copy's build.
    subprocess.run(["make", "-s", "clean"], cwd=root, capture_output=True, timeout=120)
    return out
