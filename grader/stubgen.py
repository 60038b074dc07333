#!/usr/bin/env python3
"""Writes the student tree from solutions/, and checks that it is in sync.

A solution marks what the student writes:

    void ring_allreduce(void *buf, int count, ...)
    {
        /*
         * TODO: reduce-scatter then all-gather around the ring.
         *   ... the details ...
         */
        // BEGIN SOLUTION
        ... code ...
        // END SOLUTION
    }

In the student file the marked lines become one statement,

        XT_TODO("reduce-scatter then all-gather around the ring.", buf, count, ...);

which stops every rank with file, line and the first line of the TODO
comment (the arguments are passed only so the stub compiles without
unused-parameter warnings). A marked region at column 0 (a helper the
student writes too) disappears. Everything else is copied unchanged. A
header (solutions/lcN_x/kit.h, the lecture's kit) is copied as it is: it
holds nothing for the student to write, so it may hold no marker.

    grader/stubgen.py --write    regenerate lc*/ from solutions/lc*/
    grader/stubgen.py --check    exit 1 on drift, unbalanced markers or leaked solution text
"""

import argparse
import difflib
import glob
import os
import re
import sys

MAX_COLUMNS = 100  # .clang-format's ColumnLimit
BEGIN = "// BEGIN SOLUTION"
END = "// END SOLUTION"


class MarkerError(Exception):
    pass


def function_params(lines, at):
    """Parameter names of the function whose body contains line `at`.

    Function definitions start at column 0 and open their body with a "{"
    alone on a line (the project's clang-format style).
    """
    for i in range(at, -1, -1):
        if lines[i] != "{":
            continue
        start = i - 1
        while start > 0 and (lines[start][:1].isspace() or lines[start] == ""):
            start -= 1
        m = re.search(r"\((.*)\)", " ".join(ln.strip() for ln in lines[start:i]), re.S)
        if not m:
            break
        names, depth, cur = [], 0, ""
        for ch in m.group(1) + ",":
            depth += (ch == "(") - (ch == ")")
            if ch == "," and depth == 0:
                p = cur.strip()
                cur = ""
                nm = re.search(r"(\w+)\s*(\[[^\]]*\]\s*)*$", p)
                if p not in ("", "void", "...") and nm:
                    names.append(nm.group(1))
            else:
                cur += ch
        return names
    raise MarkerError(f"line {at + 1}: no enclosing function found")


def todo_message(lines, begin):
    """The first line of the TODO comment just above a region."""
    for i in range(begin - 1, max(begin - 40, -1), -1):
        m = re.search(r"TODO:\s*(.*?)\s*(\*/)?\s*$", lines[i])
        if m:
            return m.group(1)
        if not lines[i].strip().startswith(("/*", "*", "//")):
            break
    raise MarkerError(f"line {begin + 1}: a solution region inside a function needs a "
                      f"'TODO: ...' comment right above it")


def generate(solution_text, path="?"):
    """(student text, [region lines]) for a solution file."""
    lines = solution_text.split("\n")
    out, hidden = [], []
    inside = None
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside is not None:
                raise MarkerError(f"{path}:{i + 1}: {BEGIN} inside another region "
                                  f"(opened at line {inside + 1})")
            inside = i
            indent = line[:len(line) - len(line.lstrip())]
            if indent:
                msg = todo_message(lines, i).replace("\\", "\\\\").replace('"', '\\"')
                args = "".join(", " + p for p in function_params(lines, i))
                todo = f'{indent}XT_TODO("{msg}"{args});'
                if len(todo) > MAX_COLUMNS:
                    raise MarkerError(f"{path}:{i + 1}: the stub line would be {len(todo)} "
                                      f"columns (at most {MAX_COLUMNS}): shorten the first "
                                      f"line of the TODO comment above")
                out.append(todo)
            elif out and out[-1] == "" and i + 1 < len(lines):
                out.pop()  # a removed helper leaves no double blank line
            continue
        if stripped == END:
            if inside is None:
                raise MarkerError(f"{path}:{i + 1}: {END} without a {BEGIN}")
            inside = None
            continue
        if "BEGIN SOLUTION" in line or "END SOLUTION" in line:
            raise MarkerError(f"{path}:{i + 1}: a marker must stand alone on its line: {stripped}")
        if inside is not None:
            hidden.append(line)
        else:
            out.append(line)
    if inside is not None:
        raise MarkerError(f"{path}:{inside + 1}: {BEGIN} is never closed")
    return "\n".join(out), hidden


def student_path(solution):
    return os.path.relpath(solution, "solutions")


def solutions():
    return sorted(glob.glob("solutions/lc*/*.c") + glob.glob("solutions/lc*/*.cu") +
                  glob.glob("solutions/lc*/*.h"))


def significant(line):
    """Code worth checking for leaks: not a comment, not a bare brace or keyword."""
    s = line.strip()
    comment = s.startswith(("//", "/*", "*/", "* ")) or s == "*"
    return len(s) >= 8 and re.search(r"[A-Za-z0-9]", s) and not comment


def leaks(solution_text, student_text, hidden):
    """Solution lines that appear in the student file but nowhere else in the solution."""
    outside = {ln.strip() for ln in generate(solution_text)[0].split("\n")}
    student = {ln.strip() for ln in student_text.split("\n")}
    return [ln.strip() for ln in hidden
            if significant(ln) and ln.strip() in student and ln.strip() not in outside]


def check(verbose=True):
    """Problems found, as a list of (kind, message)."""
    problems = []
    sols = solutions()
    expected_students = set()
    for sol in sols:
        stu = student_path(sol)
        expected_students.add(stu)
        with open(sol) as f:
            text = f.read()
        try:
            want, hidden = generate(text, sol)
        except MarkerError as e:
            problems.append(("markers", str(e)))
            continue
        if sol.endswith(".h") and hidden:
            problems.append(("markers", f"{sol} is a header, copied to the student as it is: it "
                                        f"may hold no {BEGIN} region"))
        elif not hidden and not sol.endswith(".h"):
            problems.append(("markers", f"{sol} has no {BEGIN} region: nothing for the student "
                                        f"to write"))
        if not os.path.exists(stu):
            problems.append(("drift", f"{stu} is missing (run: make stubs)"))
            continue
        with open(stu) as f:
            have = f.read()
        for ln in leaks(text, have, hidden):
            problems.append(("leak", f"{stu} contains solution text: {ln}"))
        if have != want:
            diff = list(difflib.unified_diff(want.split("\n"), have.split("\n"), "generated",
                                             stu, lineterm="", n=1))
            problems.append(("drift", f"{stu} differs from what {sol} generates (run: make "
                                      f"stubs):\n" + "\n".join(diff[:20])))
    for stu in sorted(glob.glob("lc*/*.c") + glob.glob("lc*/*.cu") + glob.glob("lc*/*.h")):
        if stu not in expected_students:
            problems.append(("drift", f"{stu} has no solution in solutions/{stu}"))
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    args = ap.parse_args()
    os.chdir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    if args.write:
        for sol in solutions():
            with open(sol) as f:
                try:
                    text, _ = generate(f.read(), sol)
                except MarkerError as e:
                    print(f"stubgen: {e}", file=sys.stderr)
                    return 1
            stu = student_path(sol)
            os.makedirs(os.path.dirname(stu), exist_ok=True)
            old = open(stu).read() if os.path.exists(stu) else None
            if old != text:
                with open(stu, "w") as f:
                    f.write(text)
                print(f"wrote {stu}")
        return 0
    problems = check()
    for kind, msg in problems:
        print(f"{kind}: {msg}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
