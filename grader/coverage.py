"""What the grade's cases execute of every solution's student region, measured with gcov.

    python3 grader/coverage.py [--lc N] [--keep]

Builds the solutions for gcov (make COV=1, under build/cov/), grades them (grade.py --sol
--coverage: every case of every test, as make grade runs them), and reads gcov's counts of
each solution file between its BEGIN SOLUTION and END SOLUTION lines: every line there
must have run, and every branch there must have gone both ways. A line or branch that no
case reaches is a boundary the cases never offer (or code no contract asks for), so a
student's mistake there would pass unseen.

Not counted: the statements of a refusal (XT_CHECK, xt_die), whose failing side is
graded where the contract asks for it (a refusal test) and is otherwise an out-of-memory
guard; and the exceptions in EXCEPTIONS below, each with the reason it cannot be reached
from a graded case. The CUDA exercises (.cu) are graded on the emulated device, whose
C++ build is not instrumented, and are not measured.

Exit status 0 when nothing is left unexecuted; prints one line per finding, file:line
first, then "N unexecuted" as its last line.
"""

import argparse
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join("build", "cov")

# (file, the line's text with spaces squeezed) -> why no graded case can reach it.
EXCEPTIONS = {}

REFUSAL = re.compile(r"\b(XT_CHECK|xt_die)\s*\(")
BRANCH = re.compile(r"^branch\s+(\d+)\s+(never executed|taken (\d+))")


def lectures():
    return sorted(os.path.basename(os.path.dirname(p))
                  for p in glob.glob(os.path.join(ROOT, "grader", "lectures", "lc*",
                                                  "__init__.py")))


def student_lines(path):
    """{line number: text} of the lines between BEGIN SOLUTION and END SOLUTION, less the
    statements of a refusal (from XT_CHECK( or xt_die( to its closing parenthesis)."""
    out, inside, depth = {}, False, 0
    with open(path) as f:
        for n, text in enumerate(f, 1):
            if "BEGIN SOLUTION" in text:
                inside = True
                continue
            if "END SOLUTION" in text:
                inside = False
                continue
            if not inside:
                continue
            if depth > 0 or REFUSAL.search(text):
                start = REFUSAL.search(text)
                part = text[start.start():] if depth == 0 else text
                depth += part.count("(") - part.count(")")
                depth = max(depth, 0)
                continue
            out[n] = text.rstrip("\n")
    return out


def gcov_lines(source, objdir):
    """{line: (count or None for '-', [branch taken counts])} from gcov's stdout, for the
    lines of `source` alone: the program's object is its driver compiled with it, and gcov
    writes each file of the unit under its own 'Source:' line."""
    res = subprocess.run(["gcov", "-b", "-c", "-t", "-o", objdir, source], cwd=ROOT,
                         capture_output=True, text=True)
    lines, current, mine = {}, None, True
    for ln in res.stdout.splitlines():
        head = re.match(r"^\s*-:\s*0:Source:(.*)$", ln)
        if head:
            mine = (os.path.normpath(os.path.join(ROOT, head.group(1).strip())) ==
                    os.path.normpath(os.path.join(ROOT, source)))
            current = None
            continue
        if not mine:
            continue
        m = re.match(r"^\s*([^:]+):\s*(\d+):", ln)
        if m:
            count, n = m.group(1).strip(), int(m.group(2))
            if count == "-":
                current = None
                continue
            value = 0 if count.startswith("#####") or count.startswith("=====") else \
                int(count.rstrip("*"))
            lines[n] = (value, [])
            current = n
            continue
        b = BRANCH.match(ln)
        if b and current is not None:
            lines[current][1].append(int(b.group(3)) if b.group(3) else 0)
    return lines


def findings(source, objdir):
    """["file:line: what", ...] for one solution file."""
    region = student_lines(os.path.join(ROOT, source))
    counts = gcov_lines(source, objdir)
    out = []
    for n, text in sorted(region.items()):
        if n not in counts:
            continue
        key = (source, " ".join(text.split()))
        if key in EXCEPTIONS:
            continue
        value, branches = counts[n]
        if value == 0:
            out.append(f"{source}:{n}: never executed: {text.strip()}")
        elif branches and min(branches) == 0:
            idle = [i for i, t in enumerate(branches) if t == 0]
            out.append(f"{source}:{n}: branch{'es' if len(idle) > 1 else ''} "
                       f"{', '.join(map(str, idle))} of {len(branches)} never taken: "
                       f"{text.strip()}")
    return out


CONTROL = """#include <stdlib.h>
#define XT_CHECK(c, msg) do { if (!(c)) abort(); } while (0)
int region(int n)
{
    // BEGIN SOLUTION
    int s = 0;
    XT_CHECK(n >= 0,
             "negative");
    for (int i = 0; i < n; i++)
        s += i;
    if (n > 100)
        s = -1;
    return s;
    // END SOLUTION
}
int main(void)
{
    return region(3) == 3 ? 0 : 1;
}
"""


def control(work):
    """findings() of a small program run once with n = 3: its `if (n > 100)` branch never
    taken and `s = -1` never executed are found, the XT_CHECK statement (its failing side
    unreachable) is not, nor the loop or lines outside the region."""
    os.makedirs(work, exist_ok=True)
    src = os.path.join(work, "control.c")
    with open(src, "w") as f:
        f.write(CONTROL)
    exe = os.path.join(work, "control")
    for old in glob.glob(os.path.join(work, "*.gc*")):
        os.remove(old)
    subprocess.run(["gcc", "--coverage", "-O0", "-o", exe, src], cwd=work, check=True,
                   capture_output=True)
    subprocess.run([exe], cwd=work, check=True)
    return [f.split(": ", 1)[1] for f in findings(os.path.relpath(src, ROOT), work)]


def selftest(s):
    """make test's section: the control, then every lecture's solutions."""
    s.section("coverage of the solutions' student regions by the grade's cases (gcov)")
    work = os.path.join(ROOT, BUILD, "control")
    got = control(work)
    want = ["branch 0 of 2 never taken: if (n > 100)", "never executed: s = -1;"]
    s.record("coverage control: an untaken branch and an unexecuted line are listed; a "
             "refusal's statement and the code outside the region are not", got == want,
             [repr(got)])
    res = subprocess.run([sys.executable, os.path.abspath(__file__)], cwd=ROOT,
                         capture_output=True, text=True)
    lines = res.stdout.strip().splitlines()
    s.record("every line of every solution's student region executed by its grade, every "
             "branch taken both ways", res.returncode == 0 and lines[-1:] == ["0 unexecuted"],
             lines[-20:] + res.stderr.strip().splitlines()[-5:])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lc", help="one lecture (N, lcN or its name)")
    ap.add_argument("--keep", action="store_true",
                    help="read the counts of the last run, without grading again")
    args = ap.parse_args(argv)
    lecs = lectures()
    if args.lc:
        lecs = [lc for lc in lecs if lc == args.lc or lc.split("_")[0] in (args.lc,
                                                                          f"lc{args.lc}")]
    if not args.keep:
        for old in glob.glob(os.path.join(ROOT, BUILD, "**", "*.gcda"), recursive=True):
            os.remove(old)
        for lc in lecs:
            res = subprocess.run([sys.executable, os.path.join("grader", "grade.py"), "--lc",
                                  lc, "--sol", "--coverage", "--quiet"], cwd=ROOT,
                                 capture_output=True, text=True)
            if res.returncode != 0:
                print(res.stdout + res.stderr)
                print(f"coverage: the solutions of {lc} are not at full marks")
                return 1
    found = []
    for lc in lecs:
        for source in sorted(glob.glob(os.path.join(ROOT, "solutions", lc, "*.c"))):
            rel = os.path.relpath(source, ROOT)
            found.extend(findings(rel, os.path.join(BUILD, "solutions", lc)))
    for f in found:
        print(f)
    print(f"{len(found)} unexecuted")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
