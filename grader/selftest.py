#!/usr/bin/env python3
"""make test: the project's own test suite, and what CI runs.

  1. build everything with -Wall -Wextra -Werror: gcc, clang, and nvcc where present; a
     bare machine: make reads the Makefile and every entry point stops at setup.sh's
     apt-get command without running anything setup.sh installs; .ci/run as a new user
  2. clang-format: every C file as .clang-format wants it; editor support: a build writes
     compile_commands.json, with which clangd --check finds no error in an exercise of
     each lecture
  3. libxt: .npy round trip, PMPI counters, strict send, watchdog, TODO, crashes, case mode,
     the process mesh, the emulated CUDA device
  4. the grader's own pieces: NumPy references, comparisons, the stub checker; CASE= and
     make debug (a rank waiting for gdb, which attaches and releases it)
  5. stubs: the student tree is what solutions/ generates, with no solution text
  6. lectures: each one unit (a throwaway lecture graded in a copy of the tree, no
     lecture named outside its places, docs' points tables, hints and TODO bounds),
     pyflakes over grader/, libxt's layers
  7. solutions: full marks (the CUDA exercises on the emulated device too), and every demo;
     make drill end to end in a copy of the tree
  8. student tree: every test TODO, none hanging or crashing
  9. benches: each lecture's, small, and a mutant each must reject
 10. mutants: each caught with its expected verdict and report (CUDA ones on the GPU, or on
     the emulated device where there is none)
 11. no process left behind

The last line is "N passed, N failed".
"""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import needs  # noqa: E402

needs.numpy()


import builds  # noqa: E402
import harness  # noqa: E402
import launch  # noqa: E402
import mutants  # noqa: E402
import stubgen  # noqa: E402
import lectures  # noqa: E402
from testkit import fresh, mpirun, sh, Suite, tail, WORK  # noqa: E402
import check_grader  # noqa: E402
import check_lectures  # noqa: E402
import check_libxt  # noqa: E402

TESTS_BIN = os.path.join("build", "common", "tests")


# ------------------------------------------------------------------ 1. build

def test_build(s, cuda):
    s.section("build (-Wall -Wextra -Werror)")
    rc, out = sh(["make", "-j2", "--no-print-directory", "all"])
    s.record("gcc: libxt, its tests, student tree, solutions, bench", rc == 0, tail(out))
    if shutil.which("clang"):
        env = dict(os.environ, OMPI_CC="clang", MPICH_CC="clang")
        rc, out = sh(["make", "-j2", "--no-print-directory", "BUILD=build/clang", "all"], env=env)
        s.record("clang: the same, warning-free", rc == 0, tail(out))
    else:
        s.record("clang: the same, warning-free", False,
                 ["clang is not installed: sudo apt-get install -y clang"])
    bad = header_problems("Makefile")
    s.record("make reads the header dependencies its goals need: a changed libxt header "
             "remakes an exercise's object, a kit's header the objects of that kit for a "
             "program of a lecture that uses it, and libxt's own", not bad, bad)
    control = os.path.join("build", "selftest", "Makefile.no-deps")
    os.makedirs(os.path.dirname(control), exist_ok=True)
    with open("Makefile") as f:
        text = f.read()
    with open(control, "w") as f:
        f.write(re.sub(r"(?m)^-include .*$", "", text))
    found = header_problems(control)
    s.record("a Makefile that reads no dependency file is reported (negative control)",
             len(found) == len(header_goals()), found)
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc or cuda:
        rc, out = sh(["make", "-j2", "--no-print-directory", "CUDA=1", f"NVCC={nvcc or 'nvcc'}",
                      "cuda"])
        s.record("nvcc: CUDA helpers and their test compile (CUDA=1)", rc == 0, tail(out))
    else:
        s.skip("nvcc: CUDA parts", "no nvcc on this machine")


def header_goals():
    """[(header, goal, an object its change must remake)]: a libxt header and the first
    lecture's first program, a used lecture's kit header and a program of the first lecture
    whose kit uses it, a libxt header and libxt. make -n -W asks what a change would do."""
    first = lectures.names()[0]
    program = os.path.join("build", "solutions", first, lectures.exercises(first)[0])
    goals = [("common/xt.h", program, program)]
    for lec in lectures.names():
        used = [u for u in builds.uses(".", lec)
                if os.path.exists(os.path.join("solutions", u, "kit.h"))]
        if used:
            goals.append((os.path.join("solutions", used[0], "kit.h"),
                          os.path.join("build", "solutions", lec, lectures.exercises(lec)[0]),
                          os.path.join("build", "grader", "lectures", used[0], "kit") + "/"))
            break
    return goals + [("common/xt.h", "build/common/libxt.a", "build/common/")]


def header_problems(makefile):
    problems = []
    for header, goal, obj in header_goals():
        rc, out = sh(["make", "-n", "--no-print-directory", "-f", makefile, "-W", header, goal])
        if not re.search(r"-o " + re.escape(obj) + r"\S*\.o\b", out):
            problems.append(f"{header} changed: make -n {goal} remakes no {obj}*.o")
    return problems


def test_format(s):
    s.section("format")
    files = sorted(glob.glob("common/*.[ch]") + glob.glob("common/*.cu") +
                   glob.glob("common/*.cpp") + glob.glob("common/tests/emu/*.cu") +
                   glob.glob("grader/lectures/*/*.[ch]") +
                   glob.glob("grader/lectures/*/kit/*.[ch]") +
                   glob.glob("grader/lectures/*/kit/tests/*.[ch]") +
                   glob.glob("grader/lectures/*/drivers/*.c") +
                   glob.glob("grader/lectures/*/drivers/*.cu") +
                   glob.glob("common/tests/*.c") + glob.glob("common/tests/*.cu") +
                   glob.glob("solutions/lc*/*.c") + glob.glob("solutions/lc*/*.cu") +
                   glob.glob("lc*/*.c") + glob.glob("lc*/*.cu"))
    if not shutil.which("clang-format"):
        s.record("clang-format: every C and CUDA file", False,
                 ["clang-format is not installed: sudo apt-get install -y clang-format"])
        return
    rc, out = sh(["clang-format", "--dry-run", "-Werror"] + files)
    bad = sorted({ln.split(":")[0] for ln in out.splitlines() if ": error:" in ln})
    s.record(f"clang-format: {len(files)} C and CUDA files as .clang-format wants them", rc == 0,
             [f"{b} (make format fixes it)" for b in bad] or tail(out))


def test_editor(s):
    """compile_commands.json: every build writes it, and clangd reads an exercise with it."""
    s.section("editor support (compile_commands.json, clangd)")
    db = "compile_commands.json"
    if os.path.exists(db):
        os.remove(db)
    lec = lectures.names()[0]
    rc, out = sh(["make", "-s", "--no-print-directory",
                  os.path.join("build", lec, lectures.exercises(lec)[0])])
    try:
        with open(db) as f:
            files = {os.path.relpath(e["file"]) for e in json.load(f)}
    except (OSError, ValueError, KeyError) as e:
        files = set()
        out += f"\n{db}: {e}"
    want = {f for f in glob.glob("common/*.c") + glob.glob("lc*/*.c") +
            glob.glob("solutions/lc*/*.c") + glob.glob("grader/lectures/*/kit/*.c") +
            glob.glob("grader/lectures/*/drivers/*.c")}
    s.record(f"a build of one exercise writes {db}: libxt, every exercise, solution, kit "
             "and driver source", rc == 0 and want <= files,
             [f"missing: {f}" for f in sorted(want - files)] or tail(out))
    if not shutil.which("clangd"):
        s.record("clangd --check: one exercise per lecture", False,
                 ["clangd is not installed: sudo apt-get install -y clangd"])
        return
    # One exercise per lecture, all at once; then the same with -Icommon taken out of the
    # database (a negative control): clangd must say it cannot find xt.h.
    neg = fresh("clangd")
    try:
        with open(db) as f:
            entries = json.load(f)
    except (OSError, ValueError):
        entries = []
    for e in entries:
        e["arguments"] = [a for a in e["arguments"] if a != "-Icommon"]
    with open(os.path.join(neg, db), "w") as f:
        json.dump(entries, f)
    checks = []
    for lec in lectures.names():
        # One that includes its lecture's kit.h where there is one: that path too.
        paths = [p for p in (f"{lec}/{ex}.c" for ex in lectures.exercises(lec))
                 if os.path.exists(p)]
        shared = [p for p in paths if '#include "kit.h"' in open(p).read()]
        checks += [(p, []) for p in (shared or paths)[:1]]
    checks.append((checks[0][0], [f"--compile-commands-dir={neg}"]))
    procs = [subprocess.Popen(["clangd", f"--check={path}"] + extra, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for path, extra in checks]
    results = [(p.communicate(timeout=120)[0], p.returncode) for p in procs]
    for (path, extra), (text, rc) in zip(checks[:-1], results):
        errors = [ln for ln in text.splitlines() if ln.startswith("E[")]
        s.record(f"clangd --check={path}: no errors (mpi.h and xt.h found)",
                 rc == 0 and not errors and "0 errors" in text, errors or tail(text, 8))
    text, rc = results[-1]
    s.record("clangd --check with a database lacking -Icommon: 'xt.h' file not found "
             "(negative control)", rc != 0 and "'xt.h' file not found" in text, tail(text, 8))


# ------------------------------------------------------------------ 2. libxt


def test_stubs(s):
    s.section("stubs")
    problems = stubgen.check()
    for kind, what in (("drift", "student tree is exactly what solutions/ generates"),
                       ("markers", "solution markers are balanced, each region has its TODO"),
                       ("leak", "no solution text in the student tree")):
        mine = [m for k, m in problems if k == kind]
        s.record(what, not mine, [ln for m in mine for ln in m.splitlines()])


# ------------------------------------------------------------ 4. grading

def grade(s, args, title, expect_all):
    report = os.path.join(WORK, title.replace(" ", "_") + ".json")
    cmd = [sys.executable, os.path.join(HERE, "grade.py")] + args + ["--json", report]
    start = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    took = time.monotonic() - start
    print("\n".join("    " + ln for ln in res.stdout.rstrip().splitlines()), flush=True)
    try:
        with open(report) as f:
            data = json.load(f)
    except (OSError, ValueError):
        s.record(f"{title}: the grader ran", False, tail(res.stdout + res.stderr))
        return None
    for lec in data["lectures"]:
        for t in lec["tests"]:
            s.record(f"{title}: {t['exercise']} {t['test']} is {expect_all}",
                     t["verdict"] == expect_all, [t["verdict"]] + t["details"])
    return took, res.returncode, data


def test_grades(s):
    for lec in lectures.names():
        n = lectures.number(lec)
        s.section(f"solutions (make grade LC={n} SOL=1)")
        got = grade(s, ["--lc", str(n), "--sol"], f"{lec} solutions", "OK")
        if got:
            took, rc, data = got
            s.record(f"{lec} solutions: full marks and exit status 0",
                     rc == 0 and data["score"] == data["max"],
                     [f"score {data['score']}/{data['max']}, exit {rc}"], f"({took:.1f} s)")
            tests = [t for t in lectures.load(lec).TESTS if t.device == "cpu"]
            want = sorted({c.np for t in tests
                           for c in harness.numbered_cases([t], data["seed"])[t.name]})
            got_nps = data["lectures"][0].get("nps")
            s.record(f"{lec} solutions: the report's header lists the world sizes graded, "
                     f"{','.join(map(str, want))}", got_nps == want, [f"header: {got_nps}"])
    for lec in lectures.names():
        if not any(t.device == "cuda" for t in lectures.load(lec).TESTS):
            continue
        n = lectures.number(lec)
        s.section(f"CUDA exercises on the emulated device (make grade LC={n} DEVICE=emu)")
        for tree, title, want in ((["--sol"], "solutions", "OK"), ([], "student tree", "TODO")):
            got = grade(s, ["--lc", str(n), "--device", "emu"] + tree, f"{lec} emu {title}",
                        want)
            if got:
                took, rc, data = got
                ok = (rc == 0 and data["score"] == data["max"] > 0) if want == "OK" else \
                    (rc != 0 and data["score"] == 0)
                s.record(f"{lec} {title} on the emulated device: "
                         f"{'full marks' if want == 'OK' else 'Score 0'}", ok,
                         [f"score {data['score']}/{data['max']}, exit {rc}"], f"({took:.1f} s)")
    s.section("demos (make demo)")
    # Two demos at a time: each is mostly starting its ranks.
    pool = concurrent.futures.ThreadPoolExecutor(2)
    for lec in lectures.names():
        # A lecture's manifest may name what an exercise's demo must show: DEMOS =
        # {exercise: [text, ...]}.
        shows = getattr(lectures.load(lec), "DEMOS", {})
        # A CUDA exercise's demo runs on the emulated device (make demo does so without a GPU).
        demos = sorted(glob.glob(os.path.join("solutions", lec, "*.c")) +
                       glob.glob(os.path.join("solutions", lec, "*.cu")))
        bad = []
        exes = [os.path.join("build", "emu" if src.endswith(".cu") else "",
                             os.path.splitext(src)[0]) for src in demos]
        cuda = [exe for src, exe in zip(demos, exes) if src.endswith(".cu")]
        if cuda:  # one make for them, before they run: they share the device's objects
            sh(["make", "-s", "--no-print-directory"] + cuda)
        runs = pool.map(lambda exe: mpirun(4, [exe], timeout=60), exes)
        for src, r in zip(demos, runs):
            wide = [ln for ln in r.output.splitlines() if len(ln) > 80]
            if r.returncode != 0 or "[r3]" not in r.output or wide:
                bad.append(f"{src}: exit {r.returncode}: " +
                           " | ".join(wide[:2] or tail(r.output, 4)))
            ex = os.path.splitext(os.path.basename(src))[0]
            for text in shows.get(ex, ()):
                if text not in r.output:
                    bad.append(f"{src}: the demo does not show {text!r}: " +
                               " | ".join(tail(r.output, 4)))
        what = "; " + ", ".join(f"{ex} shows {', '.join(repr(t) for t in v)}"
                                for ex, v in shows.items()) if shows else ""
        s.record(f"{lec} demos: all {len(demos)} solutions run in lecture mode at np=4, print "
                 f"every rank within 80 columns{what}", not bad, bad)
    pool.shutdown()
    for lec in lectures.names():
        n = lectures.number(lec)
        s.section(f"student tree (make grade LC={n})")
        got = grade(s, ["--lc", str(n)], f"{lec} stubs", "TODO")
        if got:
            took, rc, data = got
            # No wall-time bound (a shared machine's load is not the tree's fault): a TODO
            # that hung would be a DEADLOCK or TIMEOUT above, not a TODO.
            s.record(f"{lec} student tree: Score 0, non-zero exit",
                     rc != 0 and data["score"] == 0,
                     [f"score {data['score']}/{data['max']}, exit {rc}, {took:.1f} s"],
                     f"({took:.1f} s)")


# ------------------------------------------------------------ make drill

def test_drill(s):
    """make drill end to end in a copy of the tree, whose student file is one a student
    has worked on: started, graded, solved with the solution's code, recorded, its file
    back byte for byte; one function alone; a STOP=1 round trip; make drills."""
    import drill
    import throwaway
    s.section("drill (make drill, make drills)")
    # The first exercise whose file has two functions a drill can take alone, found by
    # looking; another exercise of its lecture for the refused second drill.
    lec, ex, fns = next((lec, ex, fns) for lec in lectures.names()
                        for ex in lectures.exercises(lec)
                        for fns in [drill.drillable_functions(lec, ex)] if len(fns) >= 2)
    first, second = fns[0], fns[1]
    num = lectures.number(lec)
    path = drill.source_of(lec, ex)
    root = os.path.join(fresh("drill"), "tree")
    throwaway.copy_tree(root)
    here = os.path.join(root, path)
    with open(os.path.join("solutions", path)) as f:
        solution = f.read()
    stub = stubgen.generate(solution)[0]
    a, b = drill.function_lines(stub, second)
    second_stub = "\n".join(stub.split("\n")[a:b + 1])
    # A student's own file: notes in both functions, odd bytes, no newline at the end.
    mine = stub
    for fn in (first, second):
        mine = re.sub(rf"(\n\w[^\n]*\b{fn}\([^\n;]*\n(?:[ \t][^\n]*\n)*{{\n)",
                      rf"\1    // my {fn} notes\n", mine, count=1)
    own = mine.encode() + b"// my own notes \xc3\xa9 \xff\r\n// no newline at the end"
    with open(here, "wb") as f:
        f.write(own)
    neighbour = next(e for e in lectures.exercises(lec) if e != ex)
    other = os.path.join(root, drill.source_of(lec, neighbour))
    with open(other, "rb") as f:
        other_before = f.read()

    def make(*args):
        r = subprocess.run(["make", "--no-print-directory"] + list(args), cwd=root,
                           capture_output=True, text=True, timeout=300)
        return r.returncode, r.stdout + r.stderr

    def content():
        with open(here, "rb") as f:
            return f.read()

    def last_entry():
        h = drill.history(root)
        return h[-1] if h else {}

    # One function of the file, then STOP=1.
    rc, out = make("drill", f"EX={ex}", f"FN={second}")
    text = content().decode(errors="replace")
    ok = (rc == 0 and f"// my {first} notes" in text and f"// my {second} notes" not in text
          and second_stub in text and text.endswith("at the end") and mine != stub)
    s.record(f"make drill EX={ex} FN={second}: that function a fresh stub, {first} and the "
             f"rest of the file as the student had them", ok, tail(out, 8))
    rc2, out2 = make("drill", f"EX={neighbour}")
    with open(other, "rb") as f:
        s.record("a second drill while one is under way is refused, its file untouched",
                 rc2 != 0 and "one at a time" in out2 and f.read() == other_before, tail(out2, 4))
    rc, out = make("drill", f"EX={ex}", "STOP=1")
    s.record("make drill STOP=1 gives the student's file back byte for byte (odd bytes, CR, no "
             "final newline) and records the stopped drill",
             rc == 0 and content() == own and last_entry().get("outcome") == "stopped",
             tail(out, 4) + [f"history: {last_entry()}"])

    # The whole file, end to end.
    rc, out = make("drill", f"EX={ex}")
    kept = os.path.join(root, drill.STATE, "kept", path)
    s.record("make drill: the exercise's file is its fresh stub, the student's kept aside",
             rc == 0 and content() == stub.encode() and os.path.exists(kept) and
             open(kept, "rb").read() == own, tail(out, 8))
    rc, out = make("hint", f"EX={ex}")
    s.record("make hint during the drill: hint 1 again, counted", rc == 0 and
             "hint 1 of 3" in out and "counts in the drill" in out, tail(out, 3))
    rc, out = make("grade", f"LC={num}", f"EX={ex}")
    s.record("make grade of the stub: TODO, and the time since the drill began, grade 1",
             rc != 0 and "TODO" in out and
             re.search(rf"drill of {ex}: \d+:\d\d since it began, grade 1, hints 1", out),
             tail(out, 6))
    with open(here, "w") as f:
        f.write(solution)
    rc, out = make("grade", f"LC={num}", f"EX={ex}")
    entry = last_entry()
    done = (rc == 0 and re.search(rf"drill of {ex} DONE: full marks in \d+:\d\d, 2 grade", out)
            and entry.get("outcome") == "done" and entry.get("grades") == 2 and
            entry.get("hints") == [1] and entry.get("seconds", -1) >= 0)
    s.record("solved with the solution's code: full marks end the drill and record it "
             "(exercise, time to full marks, 2 grades, hint 1)", done,
             tail(out, 6) + [f"history: {entry}"])
    s.record("the drill's end gives the student's own file back byte for byte",
             content() == own and not os.path.exists(os.path.join(root, drill.STATE,
                                                                  "active.json")), [])
    rc, out = make("grade", f"LC={num}", f"EX={ex}")
    s.record("the next grade grades the student's own file again (rebuilt: TODO), with no drill",
             rc != 0 and "TODO" in out and "drill" not in out, tail(out, 6))
    rc, out = make("drills")
    row = re.search(rf"^{ex} +1/1 +(\d+:\d\d) +\1 .* 2 +1$", out, re.M)
    s.record("make drills lists it: 1 of 1 done, best and latest time, 2 grades, hint 1; the "
             "stopped drill of one function apart",
             rc == 0 and row is not None and
             re.search(rf"^{ex} \({second}\) +0/1 ", out, re.M) is not None,
             tail(out, 8))
    rc, out = make("drill", f"LC={num}")
    m = re.search(rf"^Lecture {num}: (\w+) \((\d+) of (\d+) not yet drilled\)", out, re.M)
    s.record(f"make drill LC={num} picks an exercise of lecture {num} not yet drilled",
             rc == 0 and m is not None and m.group(1) != ex and
             m.group(1) in lectures.exercises(lec), tail(out, 4))
    make("drill", "STOP=1")
    make("clean")
    s.record("make clean keeps the history (.drills/ is outside build/)",
             len(drill.history(root)) == 3 and not os.path.exists(os.path.join(root, "build")),
             [f"{len(drill.history(root))} entries"])


def test_kits(s):
    """Each lecture's kit checks what its numeric cases (grader/nntest.py) do not, where it
    has such checks: grader/lectures/<lecture>/kit_checks.py, selftest(suite)."""
    import importlib
    for lec in lectures.names():
        if os.path.exists(os.path.join(HERE, "lectures", lec, "kit_checks.py")):
            importlib.import_module(f"lectures.{lec}.kit_checks").selftest(s)


def test_bench(s):
    """Each lecture's bench checks itself (grader/lectures/<lecture>/bench.py: selftest)."""
    import bench
    for lec in bench.benched():
        mod = bench.bench_module(lec)
        if hasattr(mod, "selftest"):
            mod.selftest(s)
        else:
            s.record(f"{lec} bench: has a selftest (a small run and a mutant it must reject)",
                     False, [f"grader/lectures/{lec}/bench.py defines no selftest(suite)"])


# ------------------------------------------------------- lectures as units


def test_mutants(s):
    s.section("mutants (grader/mutants.py): each caught with its verdict")
    caught = []
    for o in mutants.run_all(jobs=2, python=sys.executable):
        if o.skipped:
            s.skip(o.name, o.summary)
        else:
            s.record(f"{o.name}: {o.summary}"[:150], o.ok, o.details)
        if o.ok:
            caught.append(o.name)
    kept = [name for name in caught if os.path.isdir(mutants.case_files_of(name))]
    s.record(f"the case files of the {len(caught)} mutants caught as expected are gone (a "
             f"mutant not caught keeps its build/grade/ directory, to look into)", not kept,
             [f"kept: {', '.join(kept[:10])}{' ...' if len(kept) > 10 else ''}"])


# Every process make test starts inherits this variable (mpirun passes it on to the
# ranks), so the leftover check finds this run's processes and not those of a grade
# running in another terminal.
TOKEN_NAME = "XT_SELFTEST_RUN"


def leftover_processes(token):
    """This run's processes still alive, but for this one: '<pid>: <command line>'."""
    me = os.getpid()
    mark = f"{TOKEN_NAME}={token}".encode()
    left = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if mark not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{name}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state != "Z":
            left.append(f"{name}: {cmd}")
    return left


def wait_for_exec(pid, program, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0] == program:
                    return
        except OSError:
            return
        time.sleep(0.01)


def test_cleanup(s, token):
    s.section("cleanup")
    # Negative control: a process of this run is found, one started without the
    # variable (as from another terminal) is not.
    env = {k: v for k, v in os.environ.items() if k != TOKEN_NAME}
    ours = subprocess.Popen(["sleep", "30"])
    other = subprocess.Popen(["sleep", "30"], env=env)
    try:
        # Until a child has called exec, /proc shows the forked copy of this
        # process: its command line and environment, not sleep's.
        for p in (ours, other):
            wait_for_exec(p.pid, b"sleep")
        found = leftover_processes(token)
        mine, theirs = f"{ours.pid}: sleep 30", f"{other.pid}: sleep 30"
        s.record("leftover check: this run's process found, another terminal's ignored "
                 "(negative control)", mine in found and theirs not in found, found)
    finally:
        for p in (ours, other):
            p.kill()
            p.wait()
    left = leftover_processes(token)
    s.record("no mpirun or exercise process of this run left behind", not left, left)
    # The case files of a run whose every check passed only take room (in memory where
    # build/grade is: 1 GB, most of it lecture 1's CUDA exercises on the emulated device);
    # after a failure they stay, to look into.
    grades = os.path.join("build", "grade")
    if s.failed == 0 and os.path.isdir(grades):
        for name in os.listdir(grades):
            shutil.rmtree(os.path.join(grades, name), ignore_errors=True)
        print("  every check passed: this run's case files under build/grade/ removed")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cuda", action="store_true", help="require the CUDA build")
    ap.add_argument("--only", help="run the sections whose name contains this")
    args = ap.parse_args()
    os.chdir(ROOT)
    launch.install_signal_handlers()
    os.makedirs(WORK, exist_ok=True)
    s = Suite()
    start = time.monotonic()
    token = f"{os.getpid()}.{time.time_ns()}"
    os.environ[TOKEN_NAME] = token
    import baremachine
    import coverage
    sections = [("build", lambda: test_build(s, args.cuda)), ("bare", lambda: baremachine.selftest(s)),
                ("format", lambda: test_format(s)),
                ("editor", lambda: test_editor(s)),
                ("libxt", lambda: check_libxt.selftest(s)), ("kits", lambda: test_kits(s)),
                ("grader", lambda: check_grader.selftest(s)),
                ("stubs", lambda: test_stubs(s)), ("lectures", lambda: check_lectures.selftest(s)),
                ("grades", lambda: test_grades(s)), ("drill", lambda: test_drill(s)),
                ("bench", lambda: test_bench(s)), ("coverage", lambda: coverage.selftest(s)),
                ("mutants", lambda: test_mutants(s))]
    for name, run in sections:
        if args.only and args.only not in name:
            continue
        run()
    test_cleanup(s, token)
    s.end_section()
    print(f"\n({time.monotonic() - start:.0f} s)")
    if s.failures:
        print("failed: " + "; ".join(s.failures))
    print(f"{s.passed} passed, {s.failed} failed")
    return 1 if s.failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\nmake test: interrupted", file=sys.stderr)
        sys.exit(130)
