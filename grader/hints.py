#!/usr/bin/env python3
"""make hint EX=name [N=level]: an exercise's hints, one level at a time.

Every exercise has three hints, written once, in the "### Hints" part of its
section of docs/<lecture>.md (the section headed "## <exercise>"):

    ### Hints

    <details><summary>Hint 1: the idea</summary>

    ...markdown...

    </details>

and likewise "Hint 2: the structure" and "Hint 3: near-code". On the web page
they stay folded until opened; `make hint` prints the next level each time it
is asked (build/hints/<exercise> remembers how far a student has read), and
N=2 prints a given level.

The stubs' TODO comments state the contract, not the recipe: each TODO
comment has at most max(3, ceil(n / 3)) lines, n being the lines of the
solution region it stands for (see todo_problems).

    grader/hints.py EX            the next hint of exercise EX
    grader/hints.py EX --level 2  hint 2
    grader/hints.py --check       every exercise has its three hints, every TODO its bound
"""

import argparse
import glob
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import needs  # noqa: E402

needs.numpy()  # the lectures' tables, which list the exercises, use NumPy

import drill  # noqa: E402
import lectures  # noqa: E402

LEVELS = ("the idea", "the structure", "near-code")
STATE = os.path.join("build", "hints")
DETAILS = re.compile(r"<details><summary>Hint (\d+): ([^<]*)</summary>\s*\n(.*?)\n</details>",
                     re.S)


class HintError(Exception):
    pass


def section(doc_text, exercise):
    """The text of the "## <exercise>" section of a lecture page ('' if none)."""
    m = re.search(rf"^## {re.escape(exercise)}[ \t]*\n(.*?)(?=^## |\Z)", doc_text, re.S | re.M)
    return m.group(1) if m else ""


def hints(lecture, exercise, doc_text=None):
    """[(level, title, text)] of an exercise; HintError says what is wrong."""
    doc = lectures.page_path(lecture)
    if doc_text is None:
        try:
            doc_text = lectures.page(lecture)
        except OSError as e:
            raise HintError(f"{doc}: {e.strerror}")
    sec = section(doc_text, exercise)
    if not sec:
        raise HintError(f"{doc} has no section '## {exercise}'")
    m = re.search(r"^### Hints[ \t]*\n(.*?)(?=^##|\Z)", sec, re.S | re.M)
    if not m:
        raise HintError(f"{doc}, section {exercise}: no '### Hints'")
    found = [(int(n), title.strip(), text.strip()) for n, title, text in DETAILS.findall(m.group(1))]
    want = [(i + 1, t) for i, t in enumerate(LEVELS)]
    if [(n, t) for n, t, _ in found] != want:
        raise HintError(f"{doc}, section {exercise}: hints "
                        f"{[f'{n}: {t}' for n, t, _ in found]}; expected "
                        f"{[f'{n}: {t}' for n, t in want]} in that order")
    empty = [n for n, _, text in found if not text]
    if empty:
        raise HintError(f"{doc}, section {exercise}: hint {empty[0]} is empty")
    return found


# ------------------------------------------------------------------ TODO bound

def todo_bound(region_lines):
    return max(3, math.ceil(region_lines / 3))


def todo_problems(path):
    """A TODO comment longer than its bound, for each solution region of a file that
    has one: [(line, message)]."""
    with open(path) as f:
        lines = f.read().split("\n")
    out = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "// BEGIN SOLUTION" or not lines[i][:1].isspace():
            i += 1
            continue
        begin = i
        end = begin + 1
        while end < len(lines) and lines[end].strip() != "// END SOLUTION":
            end += 1
        region = [ln for ln in lines[begin + 1:end] if ln.strip()]
        # The comment right above the region: from its "/*" (or first "//") down.
        j = begin - 1
        if lines[j].strip().endswith("*/"):
            while j > 0 and "/*" not in lines[j]:
                j -= 1
        else:
            while j > 0 and lines[j - 1].strip().startswith("//"):
                j -= 1
        comment = [ln.strip() for ln in lines[j:begin]]
        text = [ln for ln in comment if ln not in ("/*", "*/", "*")]
        bound = todo_bound(len(region))
        if len(text) > bound:
            out.append((j + 1, f"{path}:{j + 1}: the TODO has {len(text)} lines; the contract "
                               f"for a {len(region)}-line solution fits in {bound} (the recipe "
                               f"goes into the hints)"))
        i = end + 1
    return out


# ------------------------------------------------------------------ the command

def state_path(exercise):
    return os.path.join(STATE, exercise)


def seen(exercise):
    try:
        with open(state_path(exercise)) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def show(name, level=None):
    try:
        lec, ex = lectures.find(name)
    except lectures.NotFound as e:
        raise HintError(str(e))
    found = hints(lec, ex)
    last = seen(ex)
    drilled = drill.drill_hints(ex)
    if drilled is not None:
        last = max(drilled, default=0)  # a drill starts again at hint 1
    if level is None:
        level = min(last + 1, len(found))
    if not 1 <= level <= len(found):
        raise HintError(f"N={level}: {ex} has hints 1 to {len(found)}")
    n, title, text = found[level - 1]
    # Remembered before printing: a reader who pipes it into head still moves on.
    os.makedirs(STATE, exist_ok=True)
    with open(state_path(ex), "w") as f:
        f.write(str(max(seen(ex), n)))
    if drilled is not None:
        drill.record_hint(ex, n)
    print(f"{ex}, hint {n} of {len(found)}: {title}   (docs/{lec}.md#{ex}, Hints)\n")
    text = re.sub(r"^```\w*\n|^```\n?", "", text, flags=re.M)  # a terminal shows code as is
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)  # links: their text
    print(text.rstrip() + "\n")
    if drilled is not None:
        print(f"(hint {n} counts in the drill's record)")
    if n < len(found):
        print(f"(make hint EX={ex} again for hint {n + 1})")
    elif last >= len(found):
        print("(that was the last hint; N=1 shows the first again)")


def check():
    """Every problem with hints and TODO bounds: [str]."""
    problems = []
    for lec, ex in lectures.every_exercise():
        try:
            hints(lec, ex)
        except HintError as e:
            problems.append(str(e))
    for path in sorted(glob.glob("solutions/*/*.c") + glob.glob("solutions/*/*.cu")):
        problems += [msg for _, msg in todo_problems(path)]
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exercise", nargs="?")
    ap.add_argument("--level", type=int)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    os.chdir(ROOT)
    if args.check:
        problems = check()
        for p in problems:
            print(p)
        return 1 if problems else 0
    if not args.exercise:
        print("hint: which exercise? make hint EX=name (N=level for a given hint)",
              file=sys.stderr)
        return 2
    try:
        show(args.exercise, args.level)
    except HintError as e:
        print(f"hint: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # make hint | head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(0)
