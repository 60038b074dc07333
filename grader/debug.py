#!/usr/bin/env python3
"""make debug EX=name [CASE=i] [RANK=r] [SOL=1] [SEED=n] [SAN=1]

Runs one case of an exercise again, alone on its own np ranks, with the
watchdog off and world rank r (RANK=, default 0) waiting for a debugger: it
prints its PID and the gdb command that attaches to it, breaks in the
function under test and lets it go on. The other ranks start too and wait
for it in MPI. When the case ends, its verdict is printed as a grade prints
it.

The case is CASE=i, its number in the grade report (the report's debug line
names it); by default the first failing case of the last `make grade` of
that exercise, whose seed it takes. Without a kept grade of the exercise,
the exercise is graded first. The case's inputs are made again from the
seed, so a kept run's files are never changed. SAN=1 runs the
AddressSanitizer build (build/san/), where a report made with SAN=1 found its
bug: the sanitizer stops the rank at the bad access, inside gdb.

    python3 grader/debug.py --ex NAME [--case i] [--rank r] [--sol | --tree DIR]
                            [--seed n] [--lc N] [--san]
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import needs  # noqa: E402

needs.numpy()

import demo  # noqa: E402
import grade  # noqa: E402
import builds  # noqa: E402
import harness  # noqa: E402
import launch  # noqa: E402
import lectures  # noqa: E402


def find_exercise(name, lc):
    """(lecture, exercise) for an exercise or function name, or None."""
    for lec in ([lectures.resolve(lc)] if lc else lectures.names()):
        if lec is None:
            return None
        for t in lectures.load(lec).TESTS:
            if t.device == "cpu" and name in (t.exercise, t.name):
                return lec, t.exercise
    return None


def kept(work):
    """The summary a grade of the exercise left (harness.Runner.keep_summary), or None."""
    try:
        with open(os.path.join(work, "summary.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def grade_first(args, lec, ex):
    """Grades the exercise (its report shown), to find its first failing case."""
    cmd = [sys.executable, os.path.join(HERE, "grade.py"), "--lc", lec, "--ex", ex]
    cmd += ["--sol"] if args.sol else (["--tree", args.tree] if args.tree else [])
    cmd += ["--seed", str(args.seed)] if args.seed is not None else []
    cmd += ["--san"] if args.san else []
    print(f"debug: no kept grade of {ex}{' at seed ' + str(args.seed) if args.seed else ''}; "
          f"grading it first", flush=True)
    subprocess.run(cmd)


def function_symbol(binary, name):
    """name, if the binary defines a function of that name (gdb can break there)."""
    try:
        out = subprocess.run(["nm", binary], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "Tt" and parts[2] == name:
            return name
    return ""


def say(text):
    print("\n".join(grade.wrap(text, "")), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ex", help="the exercise (or the function under test)")
    ap.add_argument("--case", type=int, help="the case's number (default: the first failing)")
    ap.add_argument("--rank", type=int, default=0, help="the rank that waits for gdb")
    ap.add_argument("--sol", action="store_true", help="the solution, not the student's file")
    ap.add_argument("--tree", help="the sources under this directory (a mutant, say)")
    ap.add_argument("--seed", type=int, help="this seed's case, not the last grade's")
    ap.add_argument("--lc", help="the lecture (default: the one that has the exercise)")
    ap.add_argument("--san", action="store_true",
                    help="the AddressSanitizer build, under build/san/ (make debug SAN=1)")
    args = ap.parse_args()
    os.chdir(os.path.dirname(HERE))
    launch.install_signal_handlers()

    found = find_exercise(args.ex, args.lc) if args.ex else None
    if not found:
        what = f"no exercise {args.ex!r}" if args.ex else "which exercise?"
        print(f"debug: {what} (EX=name); make lectures lists them", file=sys.stderr)
        return 2
    lec, ex = found
    every = [t for t in lectures.load(lec).TESTS if t.exercise == ex and t.device == "cpu"]
    tree = "solutions" if args.sol else (args.tree or ".")
    work = grade.work_dir(grade.tree_tag(args), lec, ex)

    # The seed and the case: given, or the last grade's (graded now if there is none).
    summary = kept(work)
    if summary and args.seed is not None and summary["seed"] != args.seed:
        summary = None
    if summary is None and (args.case is None or args.seed is None):
        grade_first(args, lec, ex)
        summary = kept(work)
        if summary is None:
            print(f"debug: the grade of {ex} kept no cases (see its report above)",
                  file=sys.stderr)
            return 1
    seed = args.seed if args.seed is not None else summary["seed"]
    numbered = harness.numbered_cases(every, seed)
    cases = {c.number: (t, c) for t in every for c in numbered[t.name]}
    number = args.case
    if number is None:
        if not summary["failed"]:
            print(f"debug: no case failed in the last grade of {ex} (seed {seed}): choose one "
                  f"with CASE=i, 0 to {len(cases) - 1} ({work}/launch1/cases.txt lists them)",
                  file=sys.stderr)
            return 1
        number = summary["failed"][0]["case"]
    if number not in cases:
        print(f"debug: {ex} has no case {number} at seed {seed}; its cases are 0 to "
              f"{len(cases) - 1}", file=sys.stderr)
        return 2
    test, case = cases[number]
    if not 0 <= args.rank < case.np:
        print(f"debug: case {number} runs on {case.np} rank{'s' if case.np > 1 else ''}: "
              f"RANK=0 to {case.np - 1}", file=sys.stderr)
        return 2

    source = os.path.normpath(os.path.join(tree, lec, ex + ".c"))
    binary = os.path.join("build", *(["san"] if args.san else []), os.path.splitext(source)[0])
    failed = builds.build([binary], san=args.san)
    if failed:
        print("\n".join(builds.build_errors(failed[binary])), file=sys.stderr)
        return 1
    if shutil.which("gdb") is None:
        print("debug: gdb is not installed (sudo apt-get install -y gdb); the rank waits all "
              "the same, for kill -USR1 or another debugger", flush=True)

    runner = harness.Runner(harness.Exercise(lec, ex, source, binary, every), seed,
                            os.path.join(work, "debug"), watchdog=0, only=number, san=args.san,
                            debug=harness.Debug(args.rank, function_symbol(binary, test.name),
                                                demo.BannerFilter().line))
    say(f"debug: {ex} case {number} ({test.name}, {case.label}), seed {seed}: rank "
        f"{args.rank} waits for a debugger; no watchdog (Ctrl-C ends the run)"
        f"{'; built with AddressSanitizer' if args.san else ''}")
    world = max([c.np for t in every if not t.refusal for c in numbered[t.name]
                 if c.np <= runner.max_np])
    if world > case.np and not test.refusal:
        say(f"debug: (the grade runs it in a world of {world}, beside other groups; here it "
            f"runs alone on {case.np})")
    r = runner.run([test])[0]
    lines = r.lines or ["every check passed"]
    print(f"debug: case {number}: {r.verdict}")
    for text in lines:
        for ln in grade.wrap(text, "  "):
            print(ln)
    print(f"debug: its files are in {os.path.relpath(r.launch_dir)}/")
    return 0 if r.verdict == "OK" else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ndebug: interrupted; every process it started is gone", file=sys.stderr)
        sys.exit(130)
