#!/usr/bin/env python3
"""Mutants: plausible wrong solutions that the grader must catch.

Each grader/mutants/<lecture>/<name>.patch is a unified diff against a file
of solutions/, after a header that says what the mutant is and how it must
be caught:

    # Ring all-reduce through rank 0, like a parameter server.
    expect: RULE
    test: ring_allreduce
    detail: rank 0 sent \\d+ B

The runner applies the patch to a copy under build/mutants/<name>/, grades
that tree (only the test `test`, in the mutated exercise), and checks that it got
the verdict `expect` with a report matching the regular expression `detail`.
An optional `args:` line adds options of grader/grade.py to that grade
(`args: --san`: built and run with AddressSanitizer, as make grade SAN=1).
The grade first runs the test's cases of np <= 2 only (SMALL_WORLD), where
most mutants fail; a mutant not caught as expected there is graded in full.
The small-world grades of one exercise's mutants share resident launches
(grader/resident.py: one program per exercise, each mutant entered under its
own name, run and judged from its own files as its own grade would); a mutant
not caught as expected there, or the one that ended a shared launch, is graded
on its own. XT_RESIDENT=0 grades every mutant on its own.

    grader/mutants.py                 run them all
    grader/mutants.py NAME ...        run some (substring match)
"""

import argparse
import concurrent.futures
import dataclasses
import glob
import importlib
import json
import multiprocessing
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


class PatchError(Exception):
    pass


@dataclasses.dataclass
class Mutant:
    name: str
    lecture: str
    path: str
    about: str
    expect: str
    test: str
    detail: str
    target: str  # solutions/... the patch applies to
    hunks: list
    args: list = dataclasses.field(default_factory=list)  # more options for grade.py


def parse(path):
    with open(path) as f:
        lines = f.read().split("\n")
    meta, about, i = {}, [], 0
    while i < len(lines) and not lines[i].startswith("--- "):
        line = lines[i]
        if line.startswith("#"):
            about.append(line.lstrip("# ").strip())
        elif ":" in line:
            key, _, val = line.partition(":")
            meta[key.strip()] = val.strip()
        i += 1
    if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
        raise PatchError(f"{path}: no unified diff (--- / +++ lines) after the header")
    target = lines[i + 1][4:].split("\t")[0].strip()
    target = target[2:] if target.startswith("b/") else target
    hunks, cur = [], None
    for line in lines[i + 2:]:
        m = re.match(r"@@ -(\d+)(?:,\d+)? \+\d+(?:,\d+)? @@", line)
        if m:
            cur = {"start": int(m.group(1)), "old": [], "new": []}
            hunks.append(cur)
        elif cur is not None and line[:1] in (" ", "-", "+"):
            if line[0] in " -":
                cur["old"].append(line[1:])
            if line[0] in " +":
                cur["new"].append(line[1:])
        elif cur is not None and line == "":
            continue
        elif line.startswith("\\"):
            continue
    for key in ("expect", "test", "detail"):
        if key not in meta:
            raise PatchError(f"{path}: the header has no '{key}:' line")
    name = os.path.splitext(os.path.basename(path))[0]
    lecture = os.path.basename(os.path.dirname(path))
    return Mutant(name, lecture, path, " ".join(about), meta["expect"], meta["test"],
                  meta["detail"], target, hunks, shlex.split(meta.get("args", "")))


def apply(text, hunks):
    """Applies hunks exactly (context must match, at its line or nearby)."""
    lines = text.split("\n")
    offset = 0
    for h in hunks:
        want = h["start"] - 1 + offset
        old = h["old"]
        for delta in sorted(range(-60, 61), key=abs):
            at = want + delta
            if 0 <= at and lines[at:at + len(old)] == old:
                break
        else:
            raise PatchError(f"a hunk at line {h['start']} does not match the solution any "
                             f"more: update the patch")
        lines[at:at + len(old)] = h["new"]
        offset += len(h["new"]) - len(old)
    return "\n".join(lines)


def mutants(filters=()):
    paths = sorted(glob.glob(os.path.join(HERE, "mutants", "*", "*.patch")))
    out = []
    for p in paths:
        name = os.path.splitext(os.path.basename(p))[0]
        if filters and not any(f in name for f in filters):
            continue
        out.append(p)
    return out


@dataclasses.dataclass
class Outcome:
    name: str
    ok: bool
    summary: str
    details: list
    seconds: float
    about: str = ""
    skipped: bool = False  # a CUDA mutant on a machine without a GPU: compiled only


# XT_RESIDENT=0: every mutant graded on its own, as make grade then grades each exercise.
SHARED = os.environ.get("XT_RESIDENT", "1") != "0"

# Mutants that hang are caught sooner with a shorter watchdog; correct cases
# take milliseconds, so 5 s leaves a wide margin.
MUTANT_WATCHDOG = 5

# In the shared launches shorter still: a third of the mutants that hang (33 of them) spend
# most of their launch's time waiting for it, and one that a busy machine makes look like a
# hang there is graded again on its own, on MUTANT_WATCHDOG, anyway.
SHARED_WATCHDOG = 2


# The driver of an exercise, which a mutant may patch: (lecture, exercise file).
DRIVER = re.compile(r"grader/lectures/(lc\w+)/drivers/([\w.]+)")


def run_one(path, seed, python):
    start = time.monotonic()
    name = os.path.splitext(os.path.basename(path))[0]
    try:
        m = parse(path)
        tree, rel = write_tree(m)
    except (PatchError, OSError) as e:
        return Outcome(name, False, f"cannot apply: {e}", [], time.monotonic() - start)
    if not any(a in m.args for a in ("--case", "--max-np")):
        data, output = grade(m, tree, seed, python, SMALL_WORLD)
        if data and verdict_of(m, data) not in (None, "SKIPPED", "OK"):
            small = judge(m, tree, rel, start, (data, output))
            if small.ok:
                return small
    return judge(m, tree, rel, start, grade(m, tree, seed, python))


def tree_of(name):
    """The mutant's tree, relative to the repository: build/mutants/<name>."""
    return os.path.join("build", "mutants", name)


def case_files_of(name):
    """Where the mutant's grades keep their case files: build/grade/<its tree's tag>."""
    import grade as grader
    return os.path.join(ROOT, "build", "grade", grader.tag_of(tree_of(name)))


def write_tree(m):
    """Writes the mutant's tree; (the tree, the exercise file's path inside it)."""
    with open(os.path.join(ROOT, m.target)) as f:
        text = apply(f.read(), m.hunks)
    # The mutant tree: build/mutants/<name>/<lecture>/<exercise>.c. A mutant of an
    # exercise's driver (grader/lectures/<lecture>/drivers/<exercise>.c) is written at that
    # path inside the tree, beside the solution's unchanged exercise, where make takes it
    # instead of the lecture's own driver (the Makefile's driver_of).
    tree = tree_of(m.name)
    driver = DRIVER.fullmatch(m.target)
    rel = os.path.join(driver[1], driver[2]) if driver else os.path.relpath(m.target, "solutions")
    files = {rel: text}
    if driver:
        with open(os.path.join(ROOT, "solutions", rel)) as f:
            files = {rel: f.read(), m.target: text}
    for path, content in files.items():
        dest = os.path.join(ROOT, tree, path)
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        old = open(dest).read() if os.path.exists(dest) else None
        if old != content:
            with open(dest, "w") as f:
                f.write(content)
    return tree, rel


# Most mutants fail on a case of the smallest worlds, which come first in every grade
# (spec.NP_ORDER): a grade limited to np <= SMALL_WORLD runs those very cases (the same
# numbers, seeds and inputs) in a world of 2 ranks instead of up to 8, several times
# faster on 2 cores. A mutant it does not catch as expected is graded again in full.
SMALL_WORLD = 2


def grade(m, tree, seed, python, max_np=None):
    """Grades the mutant's test in tree; (the report's data or None, grade.py's output)."""
    report = os.path.join(ROOT, tree, "grade.json")
    cmd = [python, os.path.join(HERE, "grade.py"), "--lc", m.lecture, "--tree", tree,
           "--ex", m.test, "--seed", str(seed), "--json", report, "--quiet",
           "--watchdog", str(MUTANT_WATCHDOG)] + m.args
    if max_np:
        cmd += ["--max-np", str(max_np)]
    if m.target.endswith(".cu"):
        # On a GPU the real thing; without one, the emulated device (DEVICE=emu).
        cmd += ["--device", "cuda" if gpu_here() else "emu"]
    if IN_WORKER:
        output = grade_here(cmd[2:])
    else:
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        output = res.stdout + res.stderr
    try:
        with open(report) as f:
            data = json.load(f)
        os.remove(report)
    except (OSError, ValueError):
        data = None
    return data, output


_GPU = []


def gpu_here():
    """Whether this machine has a GPU (asked once)."""
    if not _GPU:
        import launch
        _GPU.append(launch.has_gpu())
    return _GPU[0]


# A worker of run_all's pool imports the grader once and grades each mutant in its own
# process (grade.main with the mutant's arguments): a fresh Python with NumPy and every
# lecture's tables for each of ~500 grades cost a third of a second each.
IN_WORKER = False


def start_worker():
    global IN_WORKER
    IN_WORKER = True
    importlib.import_module("grade")  # now, once, not at the first mutant


def grade_here(argv):
    """grade.main(argv) in this process; what it printed."""
    import grade
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with tempfile.TemporaryFile(mode="w+", errors="replace") as out:
        os.dup2(out.fileno(), 1)
        os.dup2(out.fileno(), 2)
        keep_argv = sys.argv
        sys.argv = ["grade.py"] + argv
        try:
            grade.main()
        except SystemExit:
            pass
        except Exception:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            sys.argv = keep_argv
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        out.seek(0)
        return out.read()


def verdict_of(m, data):
    return next((t["verdict"] for lec in data["lectures"] for t in lec["tests"]
                 if t["test"] == m.test), None)


def judge(m, tree, rel, start, graded):
    """The Outcome of one grade of the mutant: caught with its verdict and report, or not."""
    data, output = graded
    seconds = time.monotonic() - start
    name = m.name
    if data is None:
        return Outcome(name, False, "the grader wrote no report", output.splitlines()[-15:],
                       seconds, m.about)
    tests = [t for lec in data["lectures"] for t in lec["tests"] if t["test"] == m.test]
    if not tests:
        return Outcome(name, False, f"no test named {m.test}", [], seconds, m.about)
    t = tests[0]
    if t["verdict"] == "SKIPPED":
        return compiled_only(m, tree, rel, start)
    text = "\n".join(t["details"])
    if t["verdict"] != m.expect:
        return Outcome(name, False, f"expected {m.expect}, got {t['verdict']}", t["details"],
                       seconds, m.about)
    if not re.search(m.detail, text):
        return Outcome(name, False, f"{m.expect} as expected, but the report does not match "
                                    f"/{m.detail}/", t["details"], seconds, m.about)
    return Outcome(name, True, f"{m.expect}: {t['details'][0] if t['details'] else ''}",
                   t["details"], seconds, m.about)


def compiled_only(m, tree, rel, start):
    """No GPU here: a CUDA mutant can only be shown to build (or, expect: BUILD, not to)."""
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if not nvcc:
        return Outcome(m.name, True, "no GPU and no nvcc: not checked", [],
                       time.monotonic() - start, m.about, skipped=True)
    binary = os.path.join("build", tree, os.path.splitext(rel)[0])
    res = subprocess.run(["make", "-s", "--no-print-directory", f"NVCC={nvcc}", binary],
                         capture_output=True, text=True, cwd=ROOT)
    seconds = time.monotonic() - start
    builds = res.returncode == 0
    if builds == (m.expect == "BUILD"):
        what = "builds" if builds else "does not build"
        return Outcome(m.name, False, f"expected {m.expect}, but the mutant {what}",
                       (res.stdout + res.stderr).splitlines()[-10:], seconds, m.about)
    return Outcome(m.name, True, f"no GPU: {'compiled' if builds else 'fails to build'} only, "
                                 f"its {m.expect} not checked", [], seconds, m.about,
                   skipped=True)


def san_lecture(path):
    """The lecture of a mutant graded with AddressSanitizer (args: --san), else None."""
    try:
        m = parse(path)
    except (PatchError, OSError):
        return None
    return m.lecture if "--san" in m.args else None


def run_all(filters=(), seed=None, jobs=2, python=sys.executable):
    seed = seed if seed is not None else int(time.time()) % 10**8
    paths = mutants(filters)
    for p in paths:  # an earlier run's: each grade of the mutant writes them anew
        forget_case_files(p)
    # libxt first, once: parallel grades must not both rebuild it. The same for the
    # AddressSanitizer build (args: --san), with the lectures' kits.
    subprocess.run(["make", "-s", "--no-print-directory", "build/common/libxt.a"], cwd=ROOT,
                   check=False)
    # The emulated device's objects likewise, when a CUDA mutant will be graded on it.
    if any(parse(p).target.endswith(".cu") for p in paths) and not gpu_here():
        subprocess.run(["make", "-s", "--no-print-directory", "build/emu/common/cuda.o",
                        "build/emu/common/cuda_emu.o"], cwd=ROOT, check=False)
    san = {san_lecture(p) for p in paths} - {None}
    if san:
        shared = [os.path.join("build", "san", os.path.splitext(os.path.relpath(c, ROOT))[0] + ".o")
                  for lec in sorted(san)
                  for c in sorted(glob.glob(os.path.join(HERE, "lectures", lec, "kit", "*.c")))]
        subprocess.run(["make", "-s", "--no-print-directory", "SAN=1", "build/san/common/libxt.a"]
                       + shared, cwd=ROOT, check=False)
    done = set()
    if SHARED:
        for path, outcome in shared_grades(paths, seed, jobs):
            done.add(path)
            forget_case_files(path)
            yield outcome
    # Closed, not terminated, when every mutant is done: terminate would SIGTERM the
    # workers, whose handler (the grader's, installed by grade.main) raises
    # KeyboardInterrupt wherever they are, even inside the pool's own locks.
    pool = multiprocessing.get_context("fork").Pool(jobs, initializer=start_worker)
    alone = [p for p in paths if p not in done]
    try:
        for path, outcome in zip(alone, pool.imap(run_one_args,
                                                  [(p, seed, python) for p in alone])):
            if outcome.ok:
                forget_case_files(path)
            yield outcome
        pool.close()
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def forget_case_files(path):
    """Removes the case files of the mutant at path (case_files_of): they serve only to
    look into a mutant not caught as expected, whose are kept."""
    shutil.rmtree(case_files_of(os.path.splitext(os.path.basename(path))[0]),
                  ignore_errors=True)


def run_one_args(args):
    return run_one(*args)


# ---------------------------------------------------------------- shared launches

# Most mutants are caught in the small world by a grade that is mostly starting ranks, so
# the small-world grades of one exercise's mutants share resident launches (resident.py):
# each mutant's object, entered as xt_entry_<mutant>, in one program per exercise, every
# mutant's cases run and judged from its own files as its own grade would. A mutant caught
# there as expected is done; any other (its verdict or report not the expected one, or the
# one that ended a shared launch) is graded on its own, as before, small world then full.

def shareable(m):
    """A C file with no grade options of its own, expected to build."""
    return not m.target.endswith(".cu") and not m.args and m.expect != "BUILD"


def shared_grades(paths, seed, jobs):
    """Yields (path, Outcome) for each mutant of paths caught as expected in a shared
    launch: the small world's first, then, for those it did not catch, the full world's.
    The others are left out (as is a mutant that ended a shared launch)."""
    groups = shared_groups(paths, jobs)
    ended = []
    # The groups' launches `jobs` at a time, on threads: a launch mostly waits on its ranks
    # (a hanging mutant on its watchdog), and a group's Python is short.
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        below = 0
        for max_np in SHARED_WORLDS:
            running = []
            for (lec, ex), (program, group) in sorted(groups.items()):
                group[:] = [g for g in group if g[1].name not in ended]
                if not any(below < np <= (max_np or np) for np in
                           case_worlds(lec, [m.test for _, m, _ in group], seed)):
                    continue  # no case the smaller world did not run already
                running.append(pool.submit(lambda *a: list(grade_group(*a)), lec, ex,
                                           program, list(group), seed, max_np, ended))
            for future in concurrent.futures.as_completed(running):
                for path, outcome in future.result():
                    for _, group in groups.values():
                        group[:] = [g for g in group if g[0] != path]
                    yield path, outcome
            below = max_np


# The worlds of the shared launches, one after another: most mutants fail in the smallest
# (SMALL_WORLD), most of the rest at np <= 4, whose launches spare the 8-rank cases their
# time on 2 cores; then the full grade. A group's launch of a world runs only when its
# tests have cases the smaller one did not run.
SHARED_WORLDS = (SMALL_WORLD, 4, None)


def case_worlds(lecture, tests, seed):
    """The world sizes of the cases of these tests of the lecture."""
    import harness
    import lectures
    chosen = [t for t in lectures.load(lecture).TESTS if t.name in tests]
    return {c.np for cases in harness.numbered_cases(chosen, seed).values() for c in cases}


def shared_groups(paths, jobs):
    """{(lecture, exercise): (its resident program, [(path, mutant, tree)])} of the
    shareable mutants, their trees written and their programs built (one make for all; a
    group whose program does not link, a mutant that does not compile, is left out)."""
    import resident
    groups = {}
    for path in paths:
        try:
            m = parse(path)
            if not shareable(m):
                continue
            tree, rel = write_tree(m)
        except (PatchError, OSError):
            continue
        exercise = os.path.splitext(os.path.basename(rel))[0]
        groups.setdefault((m.lecture, exercise), []).append((path, m, tree))
    programs = {}
    for (lec, ex), group in groups.items():
        program = os.path.join("build", "resident", "mutants", ex, lec, "resident")
        resident.write_list(program, [binary_of(tree, lec, ex) for _, _, tree in group])
        programs[lec, ex] = program
    # The objects themselves too: the grade reads their symbols, and make leaves out an
    # intermediate file that a newer program no longer needs.
    objects = [binary_of(tree, lec, ex) + ".o" for (lec, ex), group in groups.items()
               for _, _, tree in group]
    subprocess.run(["make", "-s", "--no-print-directory", "-k", f"-j{jobs}"]
                   + sorted(programs.values()) + objects, cwd=ROOT, capture_output=True,
                   text=True)
    return {key: (programs[key], group) for key, group in groups.items()
            if built_after(programs[key], [binary_of(tree, *key) + ".o"
                                           for _, _, tree in group])}


def grade_group(lec, ex, program, group, seed, max_np, ended):
    """(path, Outcome) of each mutant of one exercise's group caught as expected in shared
    launches of its program, in a world of at most max_np ranks (None: the full grade)."""
    import grade as grader
    import lectures
    import resident
    start = time.monotonic()
    objects = [binary_of(tree, lec, ex) + ".o" for _, _, tree in group]
    scanned = grader.builds.undefined_symbols(objects)  # one nm for the group
    members, of, judged = [], {}, {}
    for path, m, tree in group:
        argv = ["--lc", lec, "--tree", tree, "--ex", m.test, "--seed", str(seed), "--watchdog",
                str(SHARED_WATCHDOG), "--quiet"] + (["--max-np", str(max_np)] if max_np else [])
        args = grader.parse_args(argv)
        req = grader.check_request(args)
        tests, exercises, every = grader.select_tests(req, lectures.load(lec))
        source = os.path.normpath(os.path.join(tree, lec, ex + ".c"))
        binary = binary_of(tree, lec, ex)
        if exercises != [ex] or binary + ".o" not in scanned:
            continue
        of[m.name] = (path, m, tree, args)
        bad = grader.forbidden(req, tests, source, binary)
        if bad:  # grade_exercise's RULE, which runs nothing
            judged[m.name] = [harness_result(t, "RULE", [f"{source} {bad[0]}"]) for t in tests]
            continue
        # A refusal test (spec.Test.refusal) is left to the mutant's own grade, even one
        # whose cases make grade shares (refuses_on_every_rank): there a case that is not
        # refused cleanly is graded again alone anyway, and a hanging one would end on the
        # short refusal watchdog, a report its own grade does not give.
        if any(t.refusal and t.name == m.test for t in tests):
            continue
        tests = [t for t in tests if not t.refusal]
        if not resident.runnable(binary, tests, linked=False):
            continue
        members.append(resident.Member(m.name, grader.runner_of(req, lec, ex, every, source,
                                                                binary), tests))
    if members:  # even one: its own grade would be two launches (small world, full)
        judged.update(resident.grade(members, program, os.path.join(
            "build", "grade", "mutants", lec, ex), accept=lambda r: True, ended=ended,
            take_ended=True, least=1))
    for name, results in judged.items():
        path, m, tree, args = of[name]
        tests = []
        for r in results:
            if r.memory_damage:
                r.lines.append(grader.memory_advice(args, lec, ex, seed))
            tests.append({"test": r.test.name, "verdict": r.verdict, "details": r.lines})
        data = {"lectures": [{"name": lec, "tests": tests}]}
        if verdict_of(m, data) in (None, "SKIPPED", "OK"):
            continue
        outcome = judge(m, tree, os.path.join(lec, ex + ".c"), start, (data, ""))
        if outcome.ok:
            yield path, outcome


def harness_result(test, verdict, lines):
    import harness
    return harness.TestResult(test, verdict=verdict, lines=lines)


def binary_of(tree, lecture, exercise):
    return os.path.join("build", tree, lecture, exercise)


def built_after(program, objects):
    """Whether program was linked after every one of its objects was built."""
    try:
        linked = os.stat(os.path.join(ROOT, program)).st_mtime_ns
        return all(os.stat(os.path.join(ROOT, o)).st_mtime_ns <= linked for o in objects)
    except OSError:
        return False


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("names", nargs="*")
    ap.add_argument("--seed", type=int)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    os.chdir(ROOT)
    failed = 0
    for o in run_all(args.names, args.seed, args.jobs):
        failed += not o.ok
        print(f"{'ok  ' if o.ok else 'FAIL'}  {o.name:<36} {o.summary}"[:160])
        if not o.ok or args.verbose:
            for line in o.details:
                print(f"        {line}")
    return 1 if failed else 0


if __name__ == "__main__":
    # Under a python without NumPy, start again under one with it now, before the pool forks:
    # a worker that did so itself would become a second runner, and the pool would replace it
    # again and again.
    import needs
    needs.numpy()
    sys.exit(main())
