#!/usr/bin/env python3
"""make drill EX=name: one exercise against the clock, as in an interview.

    make drill EX=name            your own file kept aside, a fresh stub (the contract
                                  TODOs, no hints), and a clock started
    make drill EX=name FN=fn      only function fn of a file that holds several: the others
                                  stay as you had them
    make drill LC=N               a drill of an exercise of lecture N not yet drilled
    make grade EX=name            shows the time since the drill began; its first full
                                  marks end the drill: recorded, and your own file back
    make hint EX=name             counts, and starts again at hint 1 for a drill
    make drill EX=name STOP=1     give up: your own file back, byte for byte
    make drills                   the history: best and latest time per exercise

Everything lives in .drills/ at the project's root, outside build/, so that
make clean keeps it:

    .drills/active.json      the drill in progress (one at a time)
    .drills/kept/<file>      your own file while the drill has its place
    .drills/solved/<file>    the code of each finished drill
    .drills/history.jsonl    one line per drill, finished or stopped
"""

import argparse
import datetime
import json
import os
import random
import re
import shutil
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import needs  # noqa: E402

needs.numpy()  # the lectures' tables, which list the exercises, use NumPy

import launch  # noqa: E402
import lectures  # noqa: E402
import stubgen  # noqa: E402

STATE = ".drills"


class DrillError(Exception):
    pass


# ------------------------------------------------------------------ where things are

def state_dir(root=None):
    return os.path.join(root or ROOT, STATE)


def active_path(root=None):
    return os.path.join(state_dir(root), "active.json")


def history_path(root=None):
    return os.path.join(state_dir(root), "history.jsonl")


def source_of(lecture, exercise, tree="."):
    """The exercise's file, relative to the root: lcN_x/name.c (or .cu)."""
    for ext in (".c", ".cu"):
        sol = os.path.join("solutions", lecture, exercise + ext)
        if os.path.exists(os.path.join(ROOT, sol)):
            return os.path.normpath(os.path.join(tree, lecture, exercise + ext))
    raise DrillError(f"no solutions/{lecture}/{exercise}.c to make a stub from")


def clock(seconds):
    """12:03, or 1:02:03 past an hour."""
    s = int(round(seconds))
    h, m = divmod(s // 60, 60)
    return f"{h}:{m:02d}:{s % 60:02d}" if h else f"{m}:{s % 60:02d}"


def now_text(t=None):
    return datetime.datetime.fromtimestamp(t or time.time()).strftime("%Y-%m-%d %H:%M")


def name_of(state):
    """fun_broadcast, or fun_broadcast (bcast_binomial) for a drill of one function."""
    fn = state.get("function")
    return f"{state['exercise']} ({fn})" if fn else state["exercise"]


def hints_text(levels):
    return "hints " + ",".join(map(str, sorted(set(levels)))) if levels else "no hint"


# ------------------------------------------------------------------ state

def load_active(root=None):
    try:
        with open(active_path(root)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise DrillError(f"{active_path(root)} cannot be read ({e}); your own file, if the "
                         f"drill had its place, is in {state_dir(root)}/kept/")


def save_active(state, root=None):
    os.makedirs(state_dir(root), exist_ok=True)
    tmp = active_path(root) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f, indent=1)
    os.replace(tmp, active_path(root))


def history(root=None):
    out = []
    try:
        with open(history_path(root)) as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue  # a line cut short by a crash: the others still count
    except FileNotFoundError:
        pass
    return out


def append_history(entry, root=None):
    os.makedirs(state_dir(root), exist_ok=True)
    with open(history_path(root), "a") as f:
        f.write(json.dumps(entry) + "\n")


# ------------------------------------------------------------------ functions of a file

DEFINITION = r"^(?:\w[\w \t*]*[\s*])?{name}\("


def function_lines(text, name):
    """(first, last) line numbers (0-based) of function `name`'s definition in a C file of
    the project's style: the head at column 0, the body from a "{" alone on a line to the
    first "}" at column 0. None when there is none."""
    lines = [ln.rstrip("\r") for ln in text.split("\n")]  # a file saved with CRLF too
    for i, line in enumerate(lines):
        if not re.match(DEFINITION.format(name=re.escape(name)), line):
            continue
        j = i
        while j < len(lines) and lines[j] != "{":
            if lines[j].rstrip().endswith(";") or (j > i and not lines[j][:1].isspace()):
                break  # a declaration, or something else at column 0
            j += 1
        if j >= len(lines) or lines[j] != "{":
            continue
        for k in range(j + 1, len(lines)):
            if lines[k] == "}":
                return i, k
        return None
    return None


def drillable_functions(lecture, exercise):
    """The functions of a file a drill can take alone: each has a test of its own name
    and a region the student writes."""
    with open(os.path.join(ROOT, "solutions", lecture,
                           os.path.basename(source_of(lecture, exercise)))) as f:
        text = f.read()
    lines = text.split("\n")
    out = []
    for name in lectures.functions(lecture, exercise):
        span = function_lines(text, name)
        if span and any(ln.strip() == stubgen.BEGIN for ln in lines[span[0]:span[1]]):
            out.append(name)
    return out


def with_function_from(student, stub, name, path):
    """The student's text with function `name` as the stub has it."""
    mine, fresh = function_lines(student, name), function_lines(stub, name)
    if mine is None:
        raise DrillError(f"{path} has no definition of {name} that a drill can replace (its "
                         f"head at column 0, its body between a '{{' and a '}}' alone on "
                         f"their lines): drill the whole file, or restore it with git checkout "
                         f"{path}")
    a, b = mine
    c, d = fresh
    s, t = student.split("\n"), stub.split("\n")
    return "\n".join(s[:a] + t[c:d + 1] + s[b + 1:])


# ------------------------------------------------------------------ finding the exercise

def find(name):
    """(lecture, exercise, function or None) for EX=: an exercise, a function that a test
    names (a drill of that function alone), or a unique part of an exercise's name."""
    try:
        lec, ex = lectures.find(name)
    except lectures.NotFound as e:
        raise DrillError(str(e))
    fn = name if name != ex and name in lectures.functions(lec, ex) else None
    return lec, ex, fn


def needs_gpu(lecture, exercise):
    return source_of(lecture, exercise).endswith(".cu")


def gpu_present():
    return launch.has_gpu()


# ------------------------------------------------------------------ the commands

def start(lecture, exercise, fn=None, root=None, out=print):
    root = root or ROOT
    state = load_active(root)
    if state:
        if state["exercise"] == exercise:
            raise DrillError(f"a drill of {name_of(state)} is already under way: "
                             f"{clock(time.time() - state['started'])} so far, "
                             f"{state['grades']} grade(s). make grade EX={state.get('function') or exercise} to go on, "
                             f"make drill EX={exercise} STOP=1 to give up")
        raise DrillError(f"a drill of {name_of(state)} is under way (begun "
                         f"{clock(time.time() - state['started'])} ago): one at a time. Finish "
                         f"it, or give it up with make drill EX={state['exercise']} STOP=1")
    # A CUDA exercise is graded on the GPU, or on the emulated device where there is none.
    device = ""
    if needs_gpu(lecture, exercise):
        device = " DEVICE=cuda" if gpu_present() else " DEVICE=emu"
    path = source_of(lecture, exercise)
    sol = os.path.join("solutions", path)
    with open(os.path.join(root, sol)) as f:
        stub = stubgen.generate(f.read(), sol)[0]
    here = os.path.join(root, path)
    tests = [t for t in lectures.functions(lecture, exercise)]
    if fn:
        allowed = drillable_functions(lecture, exercise)
        if fn not in allowed:
            raise DrillError(f"FN={fn}: a drill can take alone a function that a test grades by "
                             f"name; in {path} those are: {', '.join(allowed) or 'none'} "
                             f"(or drill the whole file: no FN)")
        if len(allowed) < 2:
            fn = None  # the file's only graded function: the whole file
    if fn:
        try:
            # Whatever bytes the student's file holds come back as they were.
            with open(here, encoding="utf-8", errors="surrogateescape", newline="") as f:
                mine = f.read()
        except OSError as e:
            raise DrillError(f"{path}: {e.strerror}: a drill of one function needs your file")
        text = with_function_from(mine, stub, fn, path)
        tests = [fn]
    else:
        text = stub
    kept = os.path.join(state_dir(root), "kept", path)
    os.makedirs(os.path.dirname(kept), exist_ok=True)
    had_file = os.path.exists(here)
    if had_file:
        shutil.copyfile(here, kept)
        shutil.copymode(here, kept)
    begun = time.time()
    state = {"lecture": lecture, "exercise": exercise, "function": fn, "file": path,
             "tests": tests, "started": begun, "grades": 0, "hints": [],
             "kept": os.path.relpath(kept, root) if had_file else None, "device": device}
    save_active(state, root)  # before the file is replaced: a crash leaves a way back
    with open(here, "w", encoding="utf-8", errors="surrogateescape", newline="") as f:
        f.write(text)
    num = lectures.number(lecture)
    what = f"{fn} in {path} is" if fn else f"{path} is"
    said = f"{what} a fresh stub: its TODO states the contract; the recipe is in the hints."
    if had_file:
        said += f" Your own file waits in {state['kept']} and comes back when the drill ends."
    out(f"Drill of {name_of(state)} begun at {now_text(begun)}.")
    out(textwrap.fill(said, 78, initial_indent="  ", subsequent_indent="  ",
                      break_long_words=False, break_on_hyphens=False))
    cmds = [(f"make grade LC={num} EX={fn or exercise}{device}", "timed; full marks end it"),
            (f"make hint EX={exercise}", "a hint (counted)"),
            (f"make drill EX={exercise} STOP=1", "give up, your file back")]
    width = max(len(c) for c, _ in cmds)
    out("")
    for c, what in cmds:
        out(f"  {c:<{width}}   {what}")
    return state


def restore(state, root):
    """Puts the student's own file back, byte for byte; returns its path."""
    here = os.path.join(root, state["file"])
    if state.get("kept"):
        kept = os.path.join(root, state["kept"])
        # Written anew rather than moved with its old time: make must see it as newer
        # than the drill's build, or the next grade would run the drill's program.
        with open(kept, "rb") as f:
            data = f.read()
        with open(here, "wb") as f:
            f.write(data)
        shutil.copymode(kept, here)
        os.remove(kept)
    elif os.path.exists(here):
        os.remove(here)
    os.remove(active_path(root))
    return state["file"]


def entry(state, outcome, ended):
    return {"exercise": state["exercise"], "lecture": state["lecture"],
            "function": state.get("function"), "outcome": outcome,
            "seconds": round(ended - state["started"], 1), "grades": state["grades"],
            "hints": sorted(set(state["hints"])), "started": now_text(state["started"]),
            "ended": now_text(ended)}


def stop(exercise=None, root=None, out=print):
    root = root or ROOT
    state = load_active(root)
    if not state:
        raise DrillError("no drill is under way" +
                         (f": {exercise}'s file is as you left it" if exercise else ""))
    if exercise and exercise not in (state["exercise"], state.get("function")):
        raise DrillError(f"the drill under way is of {name_of(state)}, not {exercise}: "
                         f"make drill EX={state['exercise']} STOP=1")
    ended = time.time()
    append_history(entry(state, "stopped", ended), root)
    path = restore(state, root)
    back = "is back, byte for byte" if state.get("kept") else "is gone again (you had none)"
    out(textwrap.fill(f"Drill of {name_of(state)} stopped after "
                      f"{clock(ended - state['started'])} and {state['grades']} grade(s). Your "
                      f"own {path} {back}.", 78, break_long_words=False, break_on_hyphens=False))


def graded(lecture, exercise, results, counted=True, root=None):
    """Called by make grade after an exercise's tests on the student tree: the lines to
    print about the drill under way, if it is this exercise's. A grade that runs every
    test of the drill counts; its full marks end the drill."""
    root = root or ROOT
    try:
        state = load_active(root)
    except DrillError as e:
        return [f"drill: {e}"]
    if not state or (state["lecture"], state["exercise"]) != (lecture, exercise):
        return []
    ran = {r.test.name: r for r in results}
    mine = [ran[t] for t in state["tests"] if t in ran]
    elapsed = time.time() - state["started"]
    if not mine or not counted:
        why = "one case is no grade" if mine else "this grade ran none of its tests"
        return [f"drill of {name_of(state)}: {clock(elapsed)} since it began ({why})"]
    state["grades"] += 1
    if len(mine) == len(state["tests"]) and all(r.verdict == "OK" for r in mine):
        return finish(state, root)
    save_active(state, root)
    return [f"drill of {name_of(state)}: {clock(elapsed)} since it began, grade "
            f"{state['grades']}, {hints_text(state['hints'])}"]


def finish(state, root):
    ended = time.time()
    rec = entry(state, "done", ended)
    here = os.path.join(root, state["file"])
    stamp = datetime.datetime.fromtimestamp(ended).strftime("%Y%m%d-%H%M%S")
    base, ext = os.path.splitext(state["file"])
    solved = os.path.join(STATE, "solved", f"{base}{'.' + state['function'] if state.get('function') else ''}."
                          f"{stamp}{ext}")
    os.makedirs(os.path.dirname(os.path.join(root, solved)), exist_ok=True)
    shutil.copyfile(here, os.path.join(root, solved))
    append_history(rec, root)
    restore(state, root)
    done = [h for h in history(root) if h["outcome"] == "done" and
            (h["exercise"], h.get("function")) == (state["exercise"], state.get("function"))]
    best = min(h["seconds"] for h in done)
    lines = [f"drill of {name_of(state)} DONE: full marks in {clock(rec['seconds'])}, "
             f"{rec['grades']} grade(s), {hints_text(rec['hints'])}"]
    if len(done) > 1:
        lines.append(f"  best {clock(best)} of {len(done)} finished drills"
                     f"{' (a new best)' if best == rec['seconds'] else ''}; make drills lists "
                     f"them all")
    own = "Your own file is back" if state.get("kept") else "The file is gone again"
    lines.append(f"  {own} ({state['file']}); this drill's code")
    lines.append(f"  is kept in {solved}")
    return lines


def drill_hints(exercise, root=None):
    """The hint levels asked for in the drill of this exercise under way (None: no such
    drill): make hint starts a drill's hints again at 1."""
    try:
        state = load_active(root)
    except DrillError:
        return None
    if not state or state["exercise"] != exercise:
        return None
    return state["hints"]


def record_hint(exercise, level, root=None):
    """make hint showed this level during the drill of this exercise: it counts."""
    state = load_active(root)
    if state and state["exercise"] == exercise:
        state["hints"].append(level)
        save_active(state, root)


def under_way(root=None):
    """A line about the drill under way, for a grade that did not run it (None: none)."""
    try:
        state = load_active(root)
    except DrillError:
        return None
    if not state:
        return None
    return (f"(a drill of {name_of(state)} is under way: {clock(time.time() - state['started'])}; "
            f"make grade LC={lectures.number(state['lecture'])} "
            f"EX={state.get('function') or state['exercise']}"
            f"{state.get('device', '')})")


def pick(lc, root=None):
    """(lecture, exercise) of lecture lc to drill: one never finished in a drill, at
    random; when every one has been, the one drilled longest ago."""
    lecture = lectures.resolve(lc)
    if not lecture:
        raise DrillError(f"no lecture {lc!r}; there are: {', '.join(lectures.names())}")
    candidates = lectures.exercises(lecture)
    last = {}
    for h in history(root):
        if h["lecture"] == lecture and h["outcome"] == "done" and not h.get("function"):
            last[h["exercise"]] = h["ended"]
    fresh = [ex for ex in candidates if ex not in last]
    if fresh:
        return lecture, random.choice(fresh), f"{len(fresh)} of {len(candidates)} not yet drilled"
    oldest = min(candidates, key=lambda ex: last[ex])
    return lecture, oldest, f"every exercise drilled; this one longest ago ({last[oldest]})"


def show_history(root=None, out=print):
    done_by, tried = {}, {}
    for h in history(root):
        key = (h["lecture"], h["exercise"], h.get("function"))
        tried[key] = tried.get(key, 0) + 1
        if h["outcome"] == "done":
            done_by.setdefault(key, []).append(h)
    state = load_active(root)
    if not tried and not state:
        out("No drill yet: make drill EX=name (or LC=N for an exercise of lecture N).")
        return
    if not tried:
        out(f"No drill finished or stopped yet. Under way: {name_of(state)}, "
            f"{clock(time.time() - state['started'])} so far.")
        return
    head = f"{'exercise':<36} {'done':>5} {'best':>8} {'latest':>8}  {'on':<16} {'grades':>6}  hints"
    out(head)
    for key in sorted(tried, key=lambda k: (lectures.number(k[0]), k[1], k[2] or "")):
        lec, ex, fn = key
        name = f"{ex} ({fn})" if fn else ex
        done = done_by.get(key, [])
        ratio = f"{len(done)}/{tried[key]}"
        if done:
            latest = done[-1]
            levels = ",".join(map(str, latest["hints"])) or "-"
            out(f"{name:<36} {ratio:>5} {clock(min(h['seconds'] for h in done)):>8} "
                f"{clock(latest['seconds']):>8}  {latest['ended']:<16} {latest['grades']:>6}  "
                f"{levels}")
        else:
            out(f"{name:<36} {ratio:>5} {'-':>8} {'-':>8}  {'(stopped)':<16}")
    out("done: drills ended by full marks / drills begun. best, latest: time to full marks.")
    out("grades, hints: the latest finished drill's.")
    if state:
        out(f"under way: {name_of(state)}, {clock(time.time() - state['started'])} so far, "
            f"{state['grades']} grade(s), {hints_text(state['hints'])}")
    counts = []
    for lec in lectures.names():
        exs = lectures.exercises(lec)
        n = len({k[1] for k in done_by if k[0] == lec and not k[2]})
        counts.append(f"LC={lectures.number(lec)} {n}/{len(exs)}")
    out(textwrap.fill("whole exercises drilled: " + ", ".join(counts), 78,
                      subsequent_indent="  "))


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ex", help="the exercise (or one of its functions)")
    ap.add_argument("--fn", help="only this function of the exercise's file")
    ap.add_argument("--lc", help="pick an exercise of this lecture not yet drilled")
    ap.add_argument("--stop", action="store_true", help="give up the drill under way")
    ap.add_argument("--history", action="store_true", help="the history (make drills)")
    args = ap.parse_args()
    os.chdir(ROOT)
    try:
        if args.history:
            show_history()
        elif args.stop:
            stop(find(args.ex)[1] if args.ex else None)
        elif args.ex:
            lec, ex, fn = find(args.ex)
            start(lec, ex, args.fn or fn)
        elif args.lc:
            lec, ex, why = pick(args.lc)
            print(f"Lecture {lectures.number(lec)}: {ex} ({why}).")
            start(lec, ex)
        else:
            state = load_active()
            if state:
                print(under_way())
            print("drill: which exercise? make drill EX=name (FN=function: one function of "
                  "its file), or LC=N for one of lecture N not yet drilled; make drills: the "
                  "history", file=sys.stderr)
            return 2
    except DrillError as e:
        print(f"drill: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
