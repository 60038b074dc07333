"""make test's checks of the grader's own pieces: the NumPy references, the comparisons
and what a wrong value is said to equal, case numbers and CASE=, make debug, the
blocked-call explanations of a deadlock, sanitizer places, the record's lines, printed
patterns and rounds. selftest(suite) runs them all.
"""

import glob
import io
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import time

import numpy as np

import builds
import checked
import compare
import hangs
import harness
import launch
import records
import scratch
import sanitizer
import mutants
import spec
import stubgen
import lectures
from testkit import environment_kept, fresh, mutant_tree, tail, WORK

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS_BIN = os.path.join("build", "common", "tests")


def loop_op(op, a, b):
    """One step of a reduction, as C computes it (before wrapping to the type)."""
    if op == "sum":
        return a + b
    if op == "prod":
        return a * b
    if op == "max":
        return max(a, b)
    if op == "min":
        return min(a, b)
    if op == "band":
        return a & b
    if op == "bor":
        return a | b
    if op == "bxor":
        return a ^ b
    if op == "land":
        return int(bool(a) and bool(b))
    if op == "lor":
        return int(bool(a) or bool(b))
    return int(bool(a) != bool(b))  # lxor


def selftest(s):
    s.section("grader")
    # The references against plain Python loops with C's arithmetic.
    problems = []
    rng = np.random.default_rng(5)
    for dtype in ("float32", "float64", "int8", "int16", "int32", "int64", "uint8"):
        for op in ("sum", "prod", "max", "min", "band", "bor", "bxor", "land", "lor", "lxor"):
            if spec.is_float(dtype) and op in ("band", "bor", "bxor", "land", "lor", "lxor"):
                continue
            for n in (1, 3):
                st = spec.random_values(rng, dtype, op, (n, 4))
                got = spec.reduce_ranks(st, op)
                for j in range(4):
                    acc = st[0, j].item()
                    for i in range(1, n):
                        acc = loop_op(op, acc, st[i, j].item())
                    if not spec.is_float(dtype):
                        bits = np.dtype(dtype).itemsize * 8
                        acc &= (1 << bits) - 1
                        if np.dtype(dtype).kind == "i" and acc >= 1 << (bits - 1):
                            acc -= 1 << bits
                    ok = (abs(float(got[j]) - acc) <= 1e-9 * max(1.0, abs(acc))
                          if spec.is_float(dtype) else int(got[j]) == acc)
                    if not ok:
                        problems.append(f"{dtype} {op} n={n} [{j}]: reference {got[j]} loop {acc}")
    s.record("references: every op and dtype agrees with a plain loop in C arithmetic",
             not problems, problems[:10])
    # Comparisons: what a WRONG report says.
    msg = compare.compare("x", np.array([1, 2, 3], np.int32), np.array([1, 5, 3], np.int32), 0, 2)
    ok = msg == "rank 2 'x'[1] expected 2 got 5 (1 of 3 wrong, max error 3)"
    msg2 = compare.compare("x", np.array([1.0, 2.0]), np.array([1.0, 2.0 + 1e-12]), 1e-9, 0)
    poison = np.frombuffer(b"\xff" * 8, np.float64)[0]
    msg3 = compare.compare("x", np.array([1.0, 2.0]), np.array([1.0, poison]), 1e-9, 0)
    overflow = compare.compare("x", np.array([1.0, 2.0], np.float32),
                               np.array([1.0, float("nan")], np.float32), 1e-9, 0)
    msg4 = compare.compare("x", np.array([1, 2]), np.array([1]), 0, 0)
    # NaN where a number was expected points at a read after xt_free; a number where NaN was
    # expected does not.
    msg5 = compare.compare("x", np.array([float("nan"), 2.0]), np.array([1.0, 2.0]), 1e-9, 0)
    unwritten = np.array([1.0, 2.0], np.float32)
    unwritten.view(np.uint32)[1] = compare.EMU_FRESH
    msg6 = compare.compare("x", np.array([1.0, 2.0], np.float32), unwritten, 1e-9, 0)
    freed = "freed xt_alloc memory reads as NaN"
    s.record("comparisons: first bad index, expected, got; NaN and lengths caught; "
             "tolerance respected; a NaN got where a number was expected notes xt_free's poison "
             "(its bits), the emulated device's fresh memory (its bits), or arithmetic (other "
             "NaNs)",
             ok and msg2 is None and msg3 and freed in msg3 and msg5 and freed not in msg5
             and overflow and freed not in overflow and "from arithmetic" in overflow
             and msg4 and "has 1 element, expected 2" in msg4 and msg6 and
             "emulated device's fresh memory" in msg6 and "emulated" not in overflow,
             [msg, msg2, msg3, msg4, msg5, msg6, overflow])
    # A relative tolerance scales with each expected value, in both directions.
    rel = spec.Relative(1e-6, 1e-3).bound(np.array([1.0, 1000.0]))
    near = compare.compare("w", np.array([1.0, 1000.0]), np.array([1.0, 1000.9]), rel, 0)
    far = compare.compare("w", np.array([1.0, 1000.0]), np.array([1.01, 1000.0]), rel, 0)
    s.record("comparisons: spec.Relative(atol, rtol) allows rtol |expected| per element",
             near is None and far and "'w'[0]" in far, [near, far])
    # A tensor-scale tolerance: the largest |expected| over every rank's part, or the floor.
    scaled = (spec.OfScale(0.1).bound([np.array([1.0, -4.0]), np.array([2.0]), np.array([])]),
              spec.OfScale(0.1).bound([np.array([0.01])]),
              spec.OfScale(0.1, 1e-3).bound([np.array([0.01])]))
    s.record("comparisons: spec.OfScale(rtol, floor) allows rtol times the largest |expected| "
             "over every rank's part, at least rtol floor",
             np.allclose(scaled, (0.4, 0.1, 0.001)), [scaled])
    # The stub checker must fail when it should.
    sol = ("void f(int a, int *b)\n{\n    /*\n     * TODO: do it.\n     */\n"
           "    // BEGIN SOLUTION\n    *b = a + 12345678;\n    // END SOLUTION\n}\n")
    text, hidden = stubgen.generate(sol)
    ok1 = 'XT_TODO("do it.", a, b);' in text and "12345678" not in text
    leaked = text.replace('    XT_TODO("do it.", a, b);', "    *b = a + 12345678;")
    ok2 = stubgen.leaks(sol, leaked, hidden) == ["*b = a + 12345678;"]
    bad = []
    for broken in (sol.replace("    // END SOLUTION\n", ""),
                   sol.replace("    // BEGIN SOLUTION\n", ""),
                   sol.replace("     * TODO: do it.\n", "     * nothing to see\n")):
        try:
            stubgen.generate(broken)
            bad.append(broken)
        except stubgen.MarkerError:
            pass
    s.record("stub checker: TODO line with the arguments; catches leaks, unbalanced markers, "
             "a region without TODO", ok1 and ok2 and not bad, [text] + bad)
    # The hint parser and the TODO bound must fail when they should.
    import hints
    levels = "".join(f"<details><summary>Hint {n}: {t}</summary>\n\ntext {n}\n\n</details>\n\n"
                     for n, t in ((1, "the idea"), (2, "the structure"), (3, "near-code")))
    doc = f"# L\n\n## ex\n\n### Hints\n\n{levels}## other\n"
    bad = []
    try:
        if [t for _, _, t in hints.hints("lcx", "ex", doc)] != ["text 1", "text 2", "text 3"]:
            bad.append("three levels not read back")
    except hints.HintError as e:
        bad.append(f"a good section refused: {e}")
    for broken in (doc.replace("Hint 3: near-code", "Hint 4: near-code"),
                   doc.replace("### Hints", "### Hint"), doc.replace("\ntext 2\n", "\n\n")):
        try:
            hints.hints("lcx", "ex", broken)
            bad.append(f"accepted: {broken!r}")
        except hints.HintError:
            pass
    path = os.path.join(fresh("todo_bound"), "x.c")
    with open(path, "w") as f:
        f.write("void f(void)\n{\n    /*\n     * TODO: a.\n     *   b.\n     *   c.\n     *   d.\n"
                "     */\n    // BEGIN SOLUTION\n" + "    g();\n" * 9 + "    // END SOLUTION\n}\n")
    over = hints.todo_problems(path)
    if len(over) != 1 or "4 lines" not in over[0][1]:
        bad.append(f"a 4-line TODO over a 9-line solution: {over}")
    s.record("hints: three levels read in order; a missing or empty level, no Hints heading, and a "
             "TODO over its bound are refused", not bad, bad)
    test_event_lines(s)
    test_resident(s)
    test_shared_refusals(s)
    test_cluster_configs(s)
    test_shared_mutants(s)
    test_kept_between_grades(s)
    test_local_launch_env(s)
    test_launch_waits(s)
    test_stale_file_semaphore(s)
    test_grade_profile(s)  # first: its grade leaves the files libxt wrote that read_npy reads
    test_read_npy(s)
    test_launcher_words(s)
    test_pattern(s)
    test_printed(s)
    test_rounds(s)
    test_heard_from(s)
    test_blocked_explanations(s)
    test_asan_places(s)
    test_one_case(s)
    test_debug_san(s)
    test_relations(s)


def test_read_npy(s):
    """records.read_npy against np.load: every kind of file a grade reads, and files it does
    not expect (which np.load reads or refuses as it always did)."""
    d = fresh("read_npy")
    rng = np.random.default_rng(3)
    arrays = [np.float32(2.5), np.zeros(0, np.float32), np.arange(5, dtype=np.int16),
              rng.random((3, 4)), np.arange(12, dtype=np.int32).reshape(2, 3, 2),
              np.array([True, False]), np.arange(6, dtype=np.uint8), rng.random((300, 7)),
              np.asfortranarray(rng.random((3, 4))), np.arange(3, dtype=">i4"),
              rng.random((2, 2)).astype(np.float16), np.array(["ab", "c"])]
    bad = []
    for i, a in enumerate(arrays):
        path = os.path.join(d, f"{i}.npy")
        np.save(path, a)
        got, want = records.read_npy(path), np.load(path)
        if (got.dtype != want.dtype or got.shape != want.shape
                or not np.array_equal(got, want) or not got.flags.writeable):
            bad.append(f"{a.dtype} {a.shape}: read {got.dtype} {got.shape}")
    # What libxt writes: the outputs files of graded cases on record (common/case.c: a name
    # line, then an array in .npy form, again and again, then the record), read both ways.
    written = sorted(glob.glob(os.path.join("build", "grade", "*", "*", "*", "launch*", "c*",
                                            "g*.r*.outputs")))[:400]
    entries = 0
    for path in written:
        mine = records.read_pack(path)
        want = {}
        with open(path, "rb") as f:
            while True:
                name = f.readline()
                if not name or name == b"#record\n":  # the rank's record follows
                    break
                want[name[:-1].decode()] = np.lib.format.read_array(f, allow_pickle=False)
        entries += len(want)
        if sorted(mine) != sorted(want):
            bad.append(f"{path}: read {sorted(mine)}, np.load's reader {sorted(want)}")
            continue
        for name, a in want.items():
            got = mine[name]
            if got.dtype != a.dtype or got.shape != a.shape or got.tobytes() != a.tobytes():
                bad.append(f"{path} '{name}': read {got.dtype} {got.shape}")
    # What the grader writes (an inputs file): byte for byte what NumPy's writer writes.
    for a in arrays:
        a = np.ascontiguousarray(a)
        buf = io.BytesIO()
        np.lib.format.write_array(buf, a, allow_pickle=False)
        if a.dtype.kind != "U" and records.npy_bytes(a) != buf.getvalue():
            bad.append(f"npy_bytes of {a.dtype} {a.shape}: not NumPy's bytes")
    # An outputs file cut inside its last array (a rank that died writing it) reads as the
    # arrays before it; written by write_pack, read back whole.
    pack = os.path.join(d, "pack")
    records.write_pack(pack, [("a", arrays[2]), ("b", arrays[3]), ("a", arrays[6])])
    back = records.read_pack(pack)
    if sorted(back) != ["a", "b"] or not np.array_equal(back["a"], arrays[6]):
        bad.append(f"write_pack then read_pack: {sorted(back)} (a later 'a' replaces the first)")
    with open(pack, "rb") as f:
        data = f.read()
    with open(pack, "wb") as f:
        f.write(data[:-5])
    cut_back = records.read_pack(pack)
    if not (sorted(cut_back) == ["a", "b"] and np.array_equal(cut_back["a"], arrays[2])):
        bad.append(f"a pack cut inside its last array read as {sorted(cut_back)}")
    # Negative control: a file cut short is refused as np.load refuses it, never read short.
    cut = os.path.join(d, "cut.npy")
    with open(os.path.join(d, "7.npy"), "rb") as f:
        data = f.read()
    with open(cut, "wb") as f:
        f.write(data[:-8])
    try:
        records.read_npy(cut)
        bad.append("a file cut short was read")
    except ValueError:
        pass
    s.record(f"records.read_npy reads what np.load reads ({len(arrays)} kinds of array), and "
             f"read_pack each array of {len(written)} outputs files libxt wrote ({entries} "
             f"arrays), without np.load's header parser; npy_bytes writes NumPy's bytes; a file cut short is refused, a pack "
             f"cut short reads as the arrays before the cut (negative controls)",
             not bad and bool(written), bad[:4])


def test_launcher_words(s):
    """The report names the MPI library as the programs see it, not the launcher's version
    (Slurm's srun names itself); a launch that Open MPI's daemons end over a shared session
    directory says so, and how to fix it."""
    import launch
    d = fresh("launcher")
    fake = os.path.join(d, "srun")  # a launcher that names itself as Slurm's srun does
    with open(fake, "w") as f:
        f.write('#!/bin/sh\nif [ "$1" = --version ]; then echo "slurm-wlm 22.05.8"; exit 0; fi\n'
                'exec mpirun --oversubscribe --bind-to none "$@"\n')
    os.chmod(fake, 0o755)
    lec = lectures.names()[0]
    names = lectures.exercises(lec)
    ex = next(e for e in names if sum(e in other for other in names) == 1)  # EX= matches one
    out = os.path.join(d, "grade.json")
    env = dict(os.environ, XT_LAUNCHER=f"{fake} -np {{np}}")
    subprocess.run([sys.executable, os.path.join(HERE, "grade.py"), "--lc", lec, "--sol",
                    "--ex", ex, "--seed", "7", "--json", out], env=env,
                   capture_output=True, text=True, timeout=300)
    try:
        with open(out) as f:
            named = json.load(f)["mpi"]
    except (OSError, ValueError, KeyError):
        named = "(no JSON)"
    mpirun = launch.mpi_flavor()[1]
    said = launch.library_name(subprocess.run(
        [os.path.join("build", "solutions", lec, ex), "--mpi-library"],
        capture_output=True, text=True, timeout=30).stdout)
    s.record(f"the report names the MPI library as the programs see it ({said}), not the "
             f"launcher: under a launcher that calls itself slurm-wlm 22.05.8 it says {named}",
             named == said and said.split()[0] in mpirun, [named, said, mpirun])
    # Open MPI's words when two daemons collide on one session directory (a hostfile of two
    # names on one machine without a TMPDIR each), and a launch that ended otherwise.
    collided = ("[node1:4242] [[37652,0],1] ORTE_ERROR_LOG: File exists in file "
                "util/session_dir.c at line 107\n"
                "[node1:4242] [[37652,0],1] ORTE_ERROR_LOG: File exists in file "
                "base/ess_base_std_orted.c at line 242\n")
    other = "mpirun noticed that process rank 1 with PID 0 on node x exited on signal 9\n"
    told, quiet = harness.mpirun_reason(collided), harness.mpirun_reason(other)
    s.record("a launch that ends over a shared Open MPI session directory is explained (give "
             "each node its own TMPDIR); one that ended otherwise is not (negative control)",
             "TMPDIR" in (told[:1] or [""])[0] and not any("TMPDIR" in t for t in quiet),
             told + quiet)
    # Open MPI's warning when ranks on two nodes cannot connect over TCP (the run then hangs:
    # a DEADLOCK or TIMEOUT, whose report adds these words).
    tcp = ("WARNING: Open MPI failed to TCP connect to a peer MPI process.  This\n"
           "should not happen.\n\nYour Open MPI job may now hang or fail.\n\n"
           "  Local host: node2\n  PID:        77\n  Message:    connect() to 10.0.0.1:1024 "
           "failed\n  Error:      No route to host (113)\n")
    said = harness.launcher_causes(tcp)
    s.record("a launch whose ranks could not connect over TCP says so under its failure, with "
             "how to name the shared network; a launch that ended otherwise says nothing of it "
             "(negative control)",
             len(said) == 1 and "btl_tcp_if_include" in said[0]
             and not harness.launcher_causes(other), said)
    # Open MPI's MPI_Abort banner, which each rank prints itself under a direct launch
    # (srun), is the library's, not what the student printed; a block of the student's
    # own between dashes stays.
    dashes = "-" * 74
    banner = (f"{dashes}\nMPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD\n"
              f"with errorcode 1.\n\nNOTE: invoking MPI_ABORT causes Open MPI to kill all MPI "
              f"processes.\nYou may or may not see output from other processes, depending on\n"
              f"exactly when Open MPI kills them.\n{dashes}\n")
    cdir = os.path.join(d, "c0")
    os.makedirs(cdir)
    for r, text in ((0, "step 1: loss 2.5\n" + banner), (1, banner)):
        with open(os.path.join(cdir, f"g0.r{r}{harness.OUTPUT_SUFFIX}"), "w") as f:
            f.write(text)
    # Under srun a rank prints Open MPI's TCP warning itself, into its case's file.
    with open(os.path.join(cdir, f"g0.r1{harness.OUTPUT_SUFFIX}"), "a") as f:
        f.write(f"{dashes}\n{tcp}{dashes}\n")
    shown = harness.printed_lines(cdir, 0, 2)
    own = f"{dashes}\nmy table\n{dashes}\n"
    with open(os.path.join(cdir, f"g0.r1{harness.OUTPUT_SUFFIX}"), "w") as f:
        f.write(own)
    kept = harness.printed_lines(cdir, 0, 2)
    s.record("what the ranks printed leaves out Open MPI's MPI_Abort banner and its TCP "
             "warning, which a rank prints itself under srun; a block of the student's own "
             "between dashes stays (negative control)",
             len(shown) == 2 and "printed 1 line," in shown[0] and "loss 2.5" in shown[1]
             and "printed 4 lines" in kept[0] and any("my table" in ln for ln in kept),
             shown + kept)


def test_kept_between_grades(s):
    """What the grader keeps from one grade to the next, each proved able to miss: the
    passes of its self-checks (checked.once), the stack-scratch compile (builds.
    compile_once), nm's symbols (builds.undefined_symbols), and build/grade in memory
    (scratch)."""
    work = os.path.abspath(fresh("kept"))
    calls = []

    def passing():
        calls.append("pass")

    def failing():
        calls.append("fail")
        raise AssertionError("off by 1e-2")

    saved = checked.NOTES, list(checked._digest)
    checked.NOTES = os.path.join(work, "checks")
    raised = 0
    try:
        checked.once(passing)
        checked.once(passing)
        for _ in range(2):
            try:
                checked.once(failing)
            except AssertionError:
                raised += 1
        checked._digest[:] = ["another grader"]
        checked.once(passing)
    finally:
        checked.NOTES, checked._digest[:] = saved[0], saved[1]
    s.record("a self-check of the grader's references runs once while the grader is the same "
             "(a pass noted), again when the grader changes, and a failing one every time, "
             "raising", calls == ["pass", "fail", "fail", "pass"] and raised == 2, [calls])

    # A compiler that notes each run and warns as gcc does; FAIL=1 makes it fail.
    log, cc = os.path.join(work, "cc.log"), os.path.join(work, "cc")
    with open(cc, "w") as f:
        f.write(f"#!/bin/sh\necho run >> {log}\necho 'x.c:3:5: warning: ISO C90 forbids "
                f"variable length array [-Wvla]' >&2\n[ -z \"$FAIL\" ]\n")
    os.chmod(cc, 0o755)
    inc, src = os.path.join(work, "inc"), os.path.join(work, "x.c")
    os.makedirs(inc)
    for path, text in ((src, "int f(int n) { int a[n]; return a[0]; }\n"),
                       (os.path.join(inc, "k.h"), "#define K 1\n")):
        with open(path, "w") as f:
            f.write(text)
    saved_cache = builds.CACHE
    builds.CACHE = os.path.join(work, "cache")
    runs = []
    try:
        cmd = [cc, f"-I{inc}", "-Wvla", "-c", src]
        first = builds.compile_once(cmd, src)
        second = builds.compile_once(cmd, src)
        runs.append(open(log).read().count("run"))
        with open(os.path.join(inc, "k.h"), "a") as f:
            f.write("#define L 2\n")
        builds.compile_once(cmd, src)
        runs.append(open(log).read().count("run"))
        os.environ["FAIL"] = "1"
        failed = builds.compile_once(cmd + ["-DX"], src)
        builds.compile_once(cmd + ["-DX"], src)
        runs.append(open(log).read().count("run"))
    finally:
        os.environ.pop("FAIL", None)
        builds.CACHE = saved_cache
    s.record("the stack-scratch compile of a file is kept: the same file and headers are not "
             "compiled again, a changed header is, and a failed compile is never kept",
             first == second and first[0] == 0 and "[-Wvla]" in first[1] and failed[0] != 0
             and runs == [1, 2, 4], [first, second, failed, runs])

    # An nm that notes each run, ahead of the real one on PATH.
    bindir, obj = os.path.join(work, "bin"), os.path.join(work, "u.o")
    os.makedirs(bindir)
    nm_log, real_nm = os.path.join(work, "nm.log"), shutil.which("nm")
    with open(os.path.join(bindir, "nm"), "w") as f:
        f.write(f"#!/bin/sh\necho run >> {nm_log}\nexec {real_nm} \"$@\"\n")
    os.chmod(os.path.join(bindir, "nm"), 0o755)

    def build_object(call):
        with open(os.path.join(work, "u.c"), "w") as f:
            f.write(f"#include <stdlib.h>\nvoid u(void) {{ {call}; }}\n")
        subprocess.run(["cc", "-c", os.path.join(work, "u.c"), "-o", obj], check=True)

    def scan():  # as a new grade would: nothing in its memory
        builds._UNDEFINED.clear()
        got = builds.undefined_symbols([obj])[obj]
        return got, open(nm_log).read().count("run") if os.path.exists(nm_log) else 0

    saved_nm = builds.NM_CACHE, dict(builds._UNDEFINED)
    builds.NM_CACHE = os.path.join(work, "nm")
    scans = []
    try:
        with environment_kept("PATH"):
            os.environ["PATH"] = bindir + os.pathsep + os.environ["PATH"]
            build_object("abort()")
            scans += [scan(), scan()]
            build_object("abort()")  # the same bytes, built again
            scans.append(scan())
            build_object("exit(1)")
            scans.append(scan())
    finally:
        builds.NM_CACHE = saved_nm[0]
        builds._UNDEFINED.clear()
        builds._UNDEFINED.update(saved_nm[1])
    s.record("nm's symbols of an object are kept between grades: the same bytes (even built "
             "again) are not scanned again, another object's are",
             [(("abort" in g) + 2 * ("exit" in g), n) for g, n in scans]
             == [(1, 1), (1, 1), (1, 1), (2, 2)], [scans])

    tree, shm = os.path.join(work, "tree"), os.path.join(work, "shm")
    os.makedirs(os.path.join(tree, "build", "grade", "old"))
    link = os.path.join(tree, "build", "grade")
    seen = []
    with environment_kept("XT_SCRATCH", "MPIRUN_ARGS", "XT_LAUNCHER"):
        os.environ["XT_SCRATCH"] = shm
        os.environ.pop("MPIRUN_ARGS", None)
        os.environ.pop("XT_LAUNCHER", None)
        scratch.arrange(tree)
        target = scratch.target_of(tree, shm)
        seen.append(os.path.islink(link) and os.readlink(link) == target
                    and not os.path.exists(os.path.join(target, "old")))
        gone = os.path.join(shm, "0" * 16)  # a tree removed without make clean
        os.makedirs(os.path.join(gone, "grade"))
        with open(os.path.join(gone, scratch.OWNER), "w") as f:
            f.write(os.path.join(work, "no-such-tree") + "\n")
        os.utime(gone, (0, 0))
        os.unlink(link)
        scratch.arrange(tree)
        seen.append(not os.path.exists(gone) and os.path.islink(link))
        os.environ["MPIRUN_ARGS"] = "--hostfile hosts"
        scratch.arrange(tree)
        seen.append(not os.path.lexists(link) and not os.path.exists(target))
    s.record("build/grade is a link into memory (XT_SCRATCH here) where the ranks run on this "
             "machine, its old files gone; a tree's files whose tree is gone are removed; "
             "with a hostfile (MPIRUN_ARGS) it is on disk again, the memory freed",
             seen == [True, True, True], [seen])


def test_local_launch_env(s):
    """What a launch names for Open MPI only where every rank runs on this machine (ob1,
    hwloc without its I/O discovery), never over a hostfile or another launcher; that a
    launch one rank ends has the others killed at once, anywhere, unless it runs
    AddressSanitizer's programs (their reports take time); and never over the user's own
    choice."""
    kill = "OMPI_MCA_odls_base_sigkill_timeout"
    keys = ("MPIRUN_ARGS", "XT_LAUNCHER", "OMPI_MCA_pml", "HWLOC_COMPONENTS", kill)
    seen = []
    with environment_kept(*keys):
        for k in keys:
            os.environ.pop(k, None)
        for setting in ({}, {"MPIRUN_ARGS": "--hostfile hosts"},
                        {"XT_LAUNCHER": "srun -n {np}"}, {"HWLOC_COMPONENTS": "-cuda"},
                        {kill: "2"}):
            os.environ.update(setting)
            env = launch.mpi_env()
            seen.append((env.get("OMPI_MCA_pml"), env.get("HWLOC_COMPONENTS"), env.get(kill),
                         launch.mpi_env(launch.san_env()).get(kill)))
            for k in setting:
                os.environ.pop(k)
    want = [("ob1", "-pci,-linuxio", "0", "1"), (None, None, "0", "1"), (None, None, "0", "1"),
            ("ob1", "-cuda", "0", "1"), ("ob1", "-pci,-linuxio", "2", "2")]
    s.record("a launch on this machine names ob1 and leaves out hwloc's I/O discovery; over "
             "a hostfile or another launcher it does neither; every launch has Open MPI kill "
             "without a grace, but AddressSanitizer's (SAN=1) keeps its 1 s for the report; "
             "the user's own settings stay", seen == want, [f"got {seen}", f"expected {want}"])


def test_launch_waits(s):
    """launch.run with its output in a file (launch.wait_exact): a launch that ends is
    reported with its code and output; one that outlives its time limit is timed out and
    killed, with every process it started."""
    log = os.path.join(fresh("waits"), "output.txt")
    ended = launch.run(["sh", "-c", "echo said; exit 3"], timeout=30, log_path=log)
    hung = launch.run(["sh", "-c", "sleep 29.25 & sleep 29.25"], timeout=0.5, log_path=log)
    left = subprocess.run(["pgrep", "-f", "^sleep 29.25$"], capture_output=True,
                          text=True).stdout
    got = [(ended.returncode, ended.timed_out, ended.output), (hung.timed_out, left)]
    s.record("a launch whose output goes to a file: its end is reported with its code and "
             "output; past its time limit it is timed out, nothing it started left",
             got == [(3, False, "said\n"), (True, "")], [got])


def test_stale_file_semaphore(s):
    """A job killed inside MPI_File_open may leave Open MPI's semaphore for that file name
    locked (OMPIO's "sm" shared file pointer, /dev/shm/sem.OMPIO_<name>); the grade's
    launches do not use it (launch.mpi_env), so that the checkpoint exercise, whose files
    have fixed names, still passes with such a semaphore left locked (a zeroed sem_t)."""
    if launch.mpi_flavor()[0] != "openmpi" or not os.path.isdir("/dev/shm"):
        s.skip("a stale MPI-IO semaphore does not hang a grade", "not Open MPI here")
        return
    lec, ex = lectures.find("zero_checkpoint")
    stale = "/dev/shm/sem.OMPIO_meta.bin"
    had = os.path.exists(stale)
    try:
        if not had:
            with open(stale, "wb") as f:
                f.write(bytes(32))  # a sem_t whose value is 0: locked
        res = subprocess.run([sys.executable, os.path.join("grader", "grade.py"), "--lc", lec,
                              "--sol", "--ex", ex, "--seed", "5", "--quiet"],
                             capture_output=True, text=True, timeout=300)
    finally:
        if not had:
            os.remove(stale)
    s.record(f"a locked MPI-IO semaphore left by a killed job ({stale}) does not hang "
             f"{ex}'s grade", res.returncode == 0, tail(res.stdout + res.stderr, 12))


def test_grade_profile(s):
    """grade.py's profile (grader/clock.py), which make bench-grade prints: one exercise's
    grade counts the launches its work directory holds, and its parts fit in its time."""
    import gradebench
    lec = lectures.names()[0]
    names = lectures.exercises(lec)
    ex = next(e for e in names if sum(e in other for other in names) == 1)  # EX= matches one
    result = gradebench.grade_once(ROOT, lec, 777, ex)
    if result is None:
        s.record(f"make bench-grade: a grade of {lec} {ex} gives its profile", False,
                 ["the grade wrote no JSON"])
        return
    tag = os.path.join("build", "grade", "solutions", lec)
    dirs = len(glob.glob(os.path.join(tag, ex, "launch*")))
    found = gradebench.problems(result, dirs)
    wrong = dict(result, profile=dict(result["profile"],
                                      launch=dict(result["profile"]["launch"],
                                                  count=dirs + 1)))
    control = gradebench.problems(wrong, dirs)
    s.record(f"make bench-grade: a grade of {lec}'s {ex} counts its {dirs} launch(es) and its "
             f"parts fit in its {result['seconds']:.1f} s (negative control: a count off by "
             f"one is reported)", dirs >= 1 and not found and len(control) == 1, found + control)


def grade_json(tree, lecture, seed, extra=(), env=None):
    """grade.py's JSON of tree's lecture (None when it wrote none), and its output."""
    out = os.path.join(fresh("grade_json"), "grade.json")
    cmd = [sys.executable, os.path.join("grader", "grade.py"), "--lc", lecture, "--tree", tree,
           "--seed", str(seed), "--json", out, "--quiet"] + list(extra)
    res = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **(env or {})))
    try:
        with open(out) as f:
            return json.load(f), res.stdout + res.stderr
    except (OSError, ValueError):
        return None, res.stdout + res.stderr


def verdicts_of(data):
    """A grade's JSON without its clocks, and of a failed test its verdict and counts
    alone: what must not depend on how it was launched. (A failed test is graded in a
    launch of its own either way, and which rank's crash a report names first can differ
    from one such launch to the next. A TODO is kept whole: it may come from a shared
    launch.)"""
    data = json.loads(json.dumps(data))
    for lec in data.get("lectures", []):
        for t in lec.get("tests", []):
            if t.get("verdict") not in ("OK", "TODO"):
                for key in ("details", "cases", "case"):
                    t.pop(key, None)

    def strip(o):
        if isinstance(o, dict):
            return {k: strip(v) for k, v in o.items()
                    if k not in ("seconds", "profile", "elapsed")}
        if isinstance(o, list):
            return [strip(v) for v in o]
        if isinstance(o, str):  # how long a blocked call had waited, on a busy machine
            return re.sub(r"\bfor \d+\.\d s\b", "for _ s", o)
        return o
    return strip(data)


def test_resident(s):
    """Resident launches (grader/resident.py): lecture 7, whose exercises use four world
    sizes, with exercises written in part (their cases' XT_TODO ends only the case, todo=<test>):
    topk_gradient's backward left (OK then TODO: taken from the shared launch),
    moe_backward untouched (TODO, taken), gate_sigmoid's middle function left (OK, TODO, OK:
    graded again alone, where its last test starts afresh) and moe_overlap's TODO reached by
    rank 0 alone while the others wait for it (the shared launch ends on its short watchdog;
    graded alone); a mutant caught WRONG (moe_forward: graded again alone) and one that
    deadlocks (gshard: it ends the shared launch, is graded alone, and the exercises after it
    share a fresh launch). Every verdict and report line, the TODOs' included, must be what
    one launch per exercise gives, with the launches that design implies."""
    import drill
    lec = lecture_of_mutant("mfw_y_not_zeroed")
    tree = mutant_tree("resident_tree", lec, "mfw_y_not_zeroed", "gs_empty_rank_skips",
                       stubs=["moe_backward", "moe_overlap"])
    problems = []

    def edit(exercise, change):
        path = os.path.join(tree, lec, exercise + ".c")
        with open(path) as f:
            text = f.read()
        changed = change(text)
        if changed == text:
            problems.append(f"{exercise}.c: the change to make was not found")
        with open(path, "w") as f:
            f.write(changed)

    def stub_of(exercise, function):
        """The file with that one function as its stub has it."""
        def change(text):
            with open(os.path.join(lec, exercise + ".c")) as f:
                stub = f.read().split("\n")
            lines = text.split("\n")
            a, b = drill.function_lines(text, function) or (0, -1)
            c, d = drill.function_lines("\n".join(stub), function) or (0, -1)
            return "\n".join(lines[:a] + stub[c:d + 1] + lines[b + 1:])
        return change

    edit("topk_gradient", stub_of("topk_gradient", "topk_backward"))
    edit("gate_sigmoid", stub_of("gate_sigmoid", "gate_bias_update"))
    edit("moe_overlap", lambda text: text.replace(
        "    XT_TODO(", "    int me;\n    MPI_Comm_rank(comm, &me);\n    if (me != 0)\n"
        "        MPI_Barrier(comm); /* waits for rank 0 in vain */\n    XT_TODO(", 1))
    args = ["--watchdog", "2"]
    shared, out1 = grade_json(tree, lec, 4242, args)
    alone, out0 = grade_json(tree, lec, 4242, args, env={"XT_RESIDENT": "0"})
    if shared is None or alone is None:
        problems += ["a grade wrote no JSON:"] + tail(out1 + out0, 12)
    else:
        problems += report_differences(alone, shared)
        verdicts = {t["test"]: t["verdict"] for lec_ in shared["lectures"]
                    for t in lec_["tests"]}
        broken = {"topk_backward": "TODO", "gate_bias_update": "TODO", "moe_forward": "WRONG",
                  "moe_backward": "TODO", "gshard_forward": "DEADLOCK",
                  "moe_overlap_forward": "TODO"}
        for test, v in verdicts.items():
            want = broken.get(test, "OK")
            # gshard's backward starts from its broken forward: any verdict, either way.
            if v != want and test != "gshard_backward":
                problems.append(f"{test}: {v}, expected {want}")
        # One launch per exercise, and one more each where gate_sigmoid's TODO and gshard's
        # deadlock end one and the test after it needs another. Shared: 2 launches (the first
        # ends in gshard's deadlock, the second in moe_overlap's hang), where topk_gradient
        # and moe_backward stop at their TODOs and the others pass; then alone gate_sigmoid
        # 2, moe_forward 1, gshard 2 and moe_overlap 1.
        want = [len(lectures.exercises(lec)) + 2, 8]
        counts = [d["profile"]["launch"]["count"] for d in (alone, shared)]
        if counts != want:
            problems.append(f"launches alone, shared: {counts}, expected {want}")
        ran = sorted(os.path.basename(p) for p in glob.glob(os.path.join(
            "build", "grade", harness_tag(tree), lec, "resident", "launch*")))
        if ran != ["launch1", "launch2"]:
            problems.append(f"shared launches kept: {ran}, expected launch1 launch2")
    s.record("resident launches: a lecture with exercises written in part (a stub, one half "
             "written, one with a test OK after its TODO, one whose TODO rank 0 alone "
             "reaches), a WRONG and a DEADLOCK, in four world sizes, gets the very report one "
             "launch per exercise gives, the TODOs' lines included", not problems, problems)


def test_shared_refusals(s):
    """Refusal cases in a resident launch (spec.Test.refuses_on_every_rank): lecture 5 with
    pipeline steps that refuse on every rank (refused in the shared launch, which goes on),
    one that refuses on rank 0 only (the others wait for it in vain: the shared launch ends
    on the short watchdog, and one launch per case finds it right) and one that never
    refuses (WRONG, graded alone). The verdicts and reports are those of one launch per
    exercise."""
    lec = lecture_of_mutant("dual_no_refusal")
    tree = mutant_tree("refusal_tree", lec, "dual_no_refusal")
    path = os.path.join(tree, lec, "pp_interleaved.c")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text.replace("XT_CHECK(M % np == 0,", "XT_CHECK(rank != 0 || M % np == 0,"))
    shared, out1 = grade_json(tree, lec, 4242, [])
    alone, out0 = grade_json(tree, lec, 4242, [], env={"XT_RESIDENT": "0"})
    problems = []
    if "XT_CHECK(M % np == 0," not in text:
        problems.append("pp_interleaved.c's refusal was not found, to change")
    if shared is None or alone is None:
        problems = ["a grade wrote no JSON:"] + tail(out1 + out0, 12)
    else:
        problems = report_differences(alone, shared)
        verdicts = {t["test"]: t["verdict"] for lec_ in shared["lectures"]
                    for t in lec_["tests"]}
        if verdicts.pop("pp_dualpipe_refuses", None) != "WRONG" or \
                set(verdicts.values()) != {"OK"}:
            problems.append(f"verdicts {verdicts}: pp_dualpipe_refuses WRONG, the rest OK "
                            f"expected")
        # Alone: one launch per exercise, pp_interleaved's three refusal cases one each,
        # pp_dualpipe's three too (run at once; WRONG at the first, the two after it
        # reported NOT RUN). Shared: the first launch ends in pp_interleaved's first
        # refusal case (rank 0 refused, the others wait for it); pp_interleaved then 1 + 3
        # alone; the three exercises after it share a second, which pp_dualpipe's step
        # that never refuses ends in a hang at np = 3; pp_dualpipe then 1 + 3 alone, and
        # the exercises after it, left on their own, 1.
        want = [len(lectures.exercises(lec)) + 6, 11]
        counts = [d["profile"]["launch"]["count"] for d in (alone, shared)]
        if counts != want:
            problems.append(f"launches alone, shared: {counts}, expected {want}")
    s.record("refusal cases in a resident launch: refused on every rank there; a refusal on "
             "rank 0 alone (the shared launch ends on its watchdog) and a step that never "
             "refuses get the report one launch per exercise gives", not problems, problems)


def test_cluster_configs(s):
    """make test-cluster's configuration files (grader/cluster/) parse; negative controls:
    a slurm.conf line that is not Key=Value words, a hostfile without one node."""
    import testcluster
    problems = testcluster.check_configs()
    d = fresh("cluster_configs")
    broken = os.path.join(d, "cluster")
    shutil.copytree(testcluster.CONF, broken)
    with open(os.path.join(broken, "slurm.conf.in"), "a") as f:
        f.write("NodeName xt-node3 CPUs=8\n")
    with open(os.path.join(broken, "hosts"), "w") as f:
        f.write("xt-node1 slots=8\n")
    found = testcluster.check_configs(broken)
    if not any("slurm.conf.in: line" in p for p in found) or not any(
            p.startswith("hosts:") for p in found):
        problems.append(f"broken files not reported: {found}")
    s.record("make test-cluster's files parse: slurm.conf.in (Key=Value words, its two nodes), "
             "the hostfile (two nodes, 8 slots), the rsh agent (sh -n); a broken line and a "
             "missing node are reported (negative controls)", not problems, problems)


def test_shared_mutants(s):
    """mutants.py's shared launches: seven mutants of one exercise, one of which crashes,
    give the outcomes (verdict and report) they get graded one by one."""
    names = ["ovl_co", "ovl_ex", "ovl_s"]

    def outcomes(shared):
        mutants.SHARED = shared
        try:
            # The verdict, not the whole line: which rank's crash is reported first, and
            # where in memory, differs from run to run either way.
            return sorted((o.name, o.ok, o.summary.split(":")[0])
                          for o in mutants.run_all(names, seed=4242))
        finally:
            mutants.SHARED = True

    alone, shared = outcomes(False), outcomes(True)
    launches = sorted(os.path.basename(p) for p in glob.glob(os.path.join(
        "build", "grade", "mutants", lecture_of_mutant("ovl_serial"), "moe_overlap",
        "launch*")))
    problems = [f"alone: {a}" for a in alone if a not in shared]
    problems += [f"shared: {b}" for b in shared if b not in alone]
    problems += [f"{name}: {summary}" for name, ok, summary in shared if not ok]
    if len(shared) != 7 or launches != ["launch1", "launch2"]:
        problems.append(f"{len(shared)} mutants, shared launches {launches}: expected 7, "
                        f"launch1 (ended by the crash) and launch2 (the rest)")
    s.record("mutants: seven of one exercise, one crashing, in shared launches (two: the "
             "crash ends the first) get the outcomes they get one by one", not problems,
             problems)


def report_differences(alone, shared):
    """How two grades' reports of one tree differ (verdicts_of each, as a diff of their
    JSON, alone first): [] when they do not."""
    a, b = verdicts_of(alone), verdicts_of(shared)
    if a == b:
        return []
    import difflib
    return list(difflib.unified_diff(json.dumps(a, indent=1, sort_keys=True).splitlines(),
                                     json.dumps(b, indent=1, sort_keys=True).splitlines(),
                                     "alone", "shared", lineterm=""))[:30]


def lecture_of_mutant(name):
    """The lecture whose grader/mutants/ folder holds this mutant."""
    found = glob.glob(os.path.join(HERE, "mutants", "*", name + ".patch"))
    return os.path.basename(os.path.dirname(found[0])) if found else None


def harness_tag(tree):
    import grade
    return grade.tree_tag(grade.parse_args(["--tree", tree]))


def test_event_lines(s):
    """read_record: a kit's event lines through the kinds registered (records.event_kind),
    in order; a kind nobody registered kept as text in rec.unparsed; the SD count."""
    # A rank's outputs file: an array (whose bytes hold the record's mark: only a line
    # after an array counts), then its record.
    path = os.path.join(fresh("event_lines"), "g0.r0.outputs")
    records.write_pack(path, [("y", np.frombuffer(b"\n#record\nT 9.5\nEND\n", np.uint8))])
    with open(path, "a") as f:
        f.write("#record\n# xt case record\nT 0.01\nM activations 0 64\n# unit event: op n\n"
                "UA F 3\nUZ 1 2\nUA B 4\nSD 3\nEND\n")
    records.event_kind("UA", "unit_events", lambda w: (w[0], int(w[1])))
    rec = records.read_record(path)
    got = ((rec.unit_events, rec.unparsed, rec.events_dropped, rec.memory, rec.seconds)
           if rec else None)
    want = ([("F", 3), ("B", 4)], ["UZ 1 2"], 3, {"activations": (0, 64)}, 0.01)
    empty = records.Record().unit_events
    taken = []
    for kind, attribute in (("UA", "other_name"), ("UB", "memory")):
        try:
            records.event_kind(kind, attribute, str)
            taken.append(f"{kind} as rec.{attribute} accepted")
        except ValueError:
            pass
    s.record("read_record: the record after a rank's arrays in its outputs file (a mark inside "
             "an array is not one); a kit's event lines as its lecture registered them, in "
             "order; an "
             "unregistered kind kept as text; SD as events_dropped; a kind registered twice "
             "under another name, or as a Record field, refused",
             got == want and empty == [] and not taken, [repr(got), repr(empty)] + taken)


def test_asan_places(s):
    """Where AddressSanitizer says a bad access was, in the CRASH headline's words."""
    head = ["==1==ERROR: AddressSanitizer: stack-buffer-overflow on address 0x7f",
            "WRITE of size 4 at 0x7f thread T0"]
    cases = [
        ("0x602 is located 2 bytes to the right of 10-byte region [0x600,0x60a)",
         ", 2 bytes past the end of a 10-byte block"),
        ("0x602 is located 4 bytes inside of 16-byte region [0x600,0x610)",
         ", byte 4 of a 16-byte block"),
        ("[32, 40) 'seen' (line 63) <== Memory access at offset 40 overflows this variable",
         ", past the end of the 8-byte local variable 'seen' (declared at line 63)"),
        ("0x55 is located 0 bytes to the right of global variable 'table' defined in "
         "'x.c:3:5' (0x55) of size 16", ", next to the global 'table' (x.c:3:5)"),
    ]
    problems = []
    for about, words in cases:
        headline = "rank 0: AddressSanitizer: stack-buffer-overflow, a WRITE of size 4"
        got = sanitizer.asan_report(head + [about], "none", "none.c", headline)[0]
        if got != headline + words:
            problems.append(f"{about!r}: {got!r}")
    s.record("AddressSanitizer reports: a heap block's edge or inside, a local variable, a "
             "global, each said in the headline", not problems, problems)


def test_blocked_explanations(s):
    """What a deadlock report adds to the blocked calls, graded and in a demo."""
    import demo
    recv_cycle = [(0, "MPI_Recv(from 2, tag 0, up to 12 B) on MPI_COMM_WORLD for 3.0 s"),
                  (1, "MPI_Recv(from 0, tag 0, up to 12 B) on MPI_COMM_WORLD for 3.0 s")]
    sends = [(0, "MPI_Send(to 1, tag 0, 4 B) for 3.0 s"), (1, "MPI_Send(to 0, tag 0, 4 B) for 3.0 s")]
    problems = []
    lines, hint = hangs.blocked_explanation(recv_cycle, in_a_case=True)
    if not (hint and hint.startswith("cause: ranks 0, 1 waited on MPI_COMM_WORLD")):
        problems.append(f"a graded case blocked on MPI_COMM_WORLD: hint {hint!r}")
    lines, hint = hangs.blocked_explanation(recv_cycle, in_a_case=False)
    if hint or not lines[-1].startswith("every rank waits for a message that no rank has sent"):
        problems.append(f"a demo's receive cycle: {lines[-1]!r}, hint {hint!r}")
    lines, hint = hangs.blocked_explanation(sends, in_a_case=True)
    if hint or not lines[-1].startswith("strict send mode"):
        problems.append(f"two sends: {lines[-1]!r}")
    tags = [(0, "MPI_Recv(from 1, tag 1, up to 16 B) for 3.0 s"),
            (1, "MPI_Send(to 0, tag 0, 16 B) for 3.0 s")]
    lines, hint = hangs.blocked_explanation(tags, in_a_case=True)
    if not lines[-1].startswith("never matched: r1's message (to 0, tag 0, 16 B) and r0's "
                                "receive (from 1, tag 1): their tags differ"):
        problems.append(f"a tag mismatch: {lines[-1]!r}")
    lines, hint = hangs.blocked_explanation(
        [(0, "MPI_Wait(MPI_Irecv from 1, tag any, 16 B) for 3.0 s"), tags[1]], in_a_case=True)
    if any(ln.startswith("never matched") for ln in lines):
        problems.append(f"MPI_ANY_TAG taken for a mismatch: {lines!r}")
    # The ranks' ledgers (LEDGER status lines): what each sent and received, and the
    # receives still posted; world ranks 4, 5 are case ranks 0, 1.
    def ledger(*texts):
        lines = [records.StatusLine("LEDGER", 3, 0, r, 4 + r, t) for r, t in enumerate(texts)]
        return hangs.read_ledger(lines, {4: 0, 5: 1})
    stuck = [(0, "MPI_Recv(from 1, tag 0, up to 16 B) for 3.0 s"),
             (1, "MPI_Recv(from 0, tag 2, up to 16 B) for 3.0 s")]
    found = {
        "a nonblocking send of another tag, its sender in a receive":
            (stuck, ledger("S case 5 4 1 16 16", "S case 4 3 1 16 16;R case 4 9 1 16 16"),
             ["never matched: r0's message (to 1, tag 4, 16 B) and r1's receive (from 0, tag 2)"
              ": their tags differ", "never matched: r1's message (to 0, tag 3, 16 B) and r0's"
              " receive (from 1, tag 0): their tags differ"]),
        "a message that a posted receive will take (its wait not yet returned)":
            ([(0, "MPI_Wait(MPI_Irecv from 1, tag 7, 16 B) for 3.0 s"), (1, "finished")],
             ledger("W case 5 7 16 MPI_Irecv", "S case 4 7 1 16 16"), []),
        "a message to a rank that waits for nothing, and another communicator's":
            ([(0, "returned from the function; waiting for the other ranks"),
              (1, "MPI_Recv(from 0, tag 1, up to 8 B) on MPI_COMM_WORLD for 3.0 s")],
             ledger("S case 5 1 2 16 8;R case 5 0 1 8 8", "S case 4 0 1 8 8"),
             ["never matched: r0's 2 messages (to 1, tag 1, the last 8 B) and r1's receive (from "
              "0, tag 1, on MPI_COMM_WORLD): they are on different communicators"]),
        "a message whose receiver waits for nothing": (
            [(0, "MPI_Barrier(0 B, 2 ranks) for 3.0 s"), (1, "MPI_Barrier(0 B, 2 ranks)")],
            ledger("S other@pp 5 3 1 40 40", ""),
            ["sent and never received: r0's message (to 1, tag 3, 40 B, on the pp group)"]),
    }
    found["a send its sender is blocked in (on its line already)"] = (
        [(0, "MPI_Send(to 1, tag 0, 8 B) for 3.0 s"), (1, "MPI_Send(to 0, tag 0, 8 B) for 3.0 s")],
        ledger("S case 5 0 1 8 8", "S case 4 0 1 8 8"), [])
    for what, (blocked, led, want) in found.items():
        got = hangs.unmatched_pairs(blocked, led)
        if len(got) != len(want) or any(not g.startswith(w) for g, w in zip(got, want)):
            problems.append(f"{what}: {got!r}")
    banner = demo.BannerFilter()
    banner.line("[xt] watchdog: still running after 3.0 s; rank 1: " + recv_cycle[1][1])
    if banner.blocked != [recv_cycle[1]] or banner.limit != "3":
        problems.append(f"the demo's watchdog line read as {banner.blocked}, limit {banner.limit}")
    s.record("deadlock reports: MPI_COMM_WORLD named as the cause in a graded case, not in a demo; "
             "a receive cycle and a send cycle explained; a send and a receive of different "
             "tags named as never matched (not with MPI_ANY_TAG); from the ranks' ledgers, a "
             "nonblocking send paired with the receive of another tag or communicator, a "
             "message no receive waits for, none where a posted receive takes it; the demo "
             "reads the watchdog's lines",
             not problems, problems)
    notes = [harness.slow_start_note(t, "box", ok) for t, ok in ((1.2, False), (9.0, False),
                                                                   (9.0, True))]
    s.record("slow starts: none below 5 s; above, the unresolved host name named with its fix, "
             "else the general note", notes[0] == "" and "'127.0.1.1 box'" in notes[1] and
             "does not resolve" not in notes[2] and notes[2].startswith("note:"), notes)


def take_lines(q, seen, until=None, wait=10):
    """Lines of a running command from queue q (None marks its end) appended to seen, up
    to the first for which until(line) holds, which is returned; None when the command
    ends or prints nothing for `wait` seconds first."""
    while True:
        try:
            ln = q.get(timeout=wait)
        except queue.Empty:
            return None
        if ln is None:
            return None
        seen.append(ln)
        if until and until(ln):
            return ln


def test_case_numbers(s, lec):
    """One case number everywhere: a WRONG mutant whose test is not its exercise's first
    (so numbers counted per test would differ), graded with --verbose: the report's
    failing case (rerun line), the JSON's case and its cases' numbers, and VERBOSE's list
    all give the exercise's number."""
    found = None
    for p in sorted(glob.glob(os.path.join(HERE, "mutants", lec, "*.patch"))):
        m = mutants.parse(p)
        ex = os.path.splitext(os.path.basename(m.target))[0]
        tests = lectures.functions(lec, ex)
        if m.expect == "WRONG" and m.target.endswith(".c") and m.test in tests[1:]:
            found = m, ex
            break
    if not found:
        s.record(f"one case number: {lec} has a WRONG mutant of a second test", False)
        return
    m, ex = found
    tree = mutant_tree("case_numbers", lec, m.name)
    report = os.path.join(WORK, "case_numbers.json")
    res = subprocess.run([sys.executable, os.path.join(HERE, "grade.py"), "--lc", lec,
                          "--tree", tree, "--ex", ex, "--seed", "1", "--verbose", "--json",
                          report], capture_output=True, text=True, timeout=300)
    out = res.stdout + res.stderr
    try:
        with open(report) as f:
            t = [t for lec_ in json.load(f)["lectures"] for t in lec_["tests"]
                 if t["test"] == m.test][0]
    except (OSError, ValueError, IndexError):
        t = {"case": None, "cases": []}
    k = t["case"]
    numbers = [c["number"] for c in t["cases"] if c["verdict"] == "WRONG"]
    cdir = os.path.join("build", "grade", tree.replace("/", "_"), lec, ex, "launch1", f"c{k}")
    pairs = [(p, p.replace(".expected.npy", ".npy"))
             for p in glob.glob(os.path.join(cdir, "g*.r*.*.expected.npy"))]
    s.record(f"{m.name}: the failing case's expected arrays kept beside its outputs "
             f"(g<g>.r<r>.<name>.expected.npy), of the outputs' shapes",
             bool(pairs) and all(os.path.exists(o) and
                                 np.load(e).size == np.load(o).size for e, o in pairs),
             [cdir] + [os.path.basename(e) for e, _ in pairs][:6])
    listed = [int(n) for n in re.findall(r"^\s+#(\d+) ", out, re.M)]
    s.record(f"{m.name}: one case number (its test is the second of {ex}): the rerun line's, "
             f"the JSON's and VERBOSE's list agree",
             k is not None and f" [--case {k}]" in out and numbers[:1] == [k] and
             listed == numbers and min(c["number"] for c in t["cases"]) > 0,
             [f"k={k} json={numbers[:4]} verbose={listed[:4]}"] + out.splitlines()[-12:])


def test_one_case(s):
    """CASE= and make debug on a mutant (the first lecture's first WRONG one): its report
    numbers the failing case; CASE= grades that case alone, to the same report; make debug
    runs it again with rank 1 waiting for gdb, which attaches and lets it go (SIGUSR1 where
    gdb cannot attach)."""
    lec = lectures.names()[0]
    wrong = [m for m in (mutants.parse(p) for p in sorted(glob.glob(
             os.path.join(HERE, "mutants", lec, "*.patch")))) if m.expect == "WRONG"
             and m.target.endswith(".c")]
    m = wrong[0]
    tree = mutant_tree("one_case", lec, m.name)
    ex = os.path.splitext(os.path.basename(m.target))[0]
    kept = os.path.join("build", "grade", tree.replace("/", "_"), lec, ex)

    def grade_it(extra):
        report = os.path.join(WORK, "one_case.json")
        res = subprocess.run([sys.executable, os.path.join(HERE, "grade.py"), "--lc", lec,
                              "--tree", tree, "--ex", ex, "--seed", "1", "--json", report]
                             + extra, capture_output=True, text=True, timeout=300)
        try:
            with open(report) as f:
                t = [t for lec_ in json.load(f)["lectures"] for t in lec_["tests"]
                     if t["test"] == m.test][0]
        except (OSError, ValueError, IndexError):
            t = {"verdict": None, "case": None, "details": [], "cases_run": 0}
        return res.stdout + res.stderr, t

    out, t = grade_it(["--verbose"])
    k = t["case"]
    s.record(f"{m.name}: the report numbers its failing case (rerun line: --case k, debug line)",
             t["verdict"] == "WRONG" and k is not None and
             f" [--case {k}]" in out and f"--case {k} (rank 0 waits for gdb)" in out,
             out.splitlines())
    test_case_numbers(s, lec)
    out2, t2 = grade_it(["--case", str(k)])
    with open(os.path.join(kept, "launch1", "cases.txt")) as f:
        ran = [ln for ln in f if ln.startswith("case ")]
    s.record(f"{m.name}: CASE={k} grades that case alone, to the same report",
             t2["verdict"] == "WRONG" and t2["cases_run"] == 1 and len(ran) == 1 and
             ran[0].startswith(f"case {k} ") and t2["details"][:1] == t["details"][:1],
             out2.splitlines() + ran)

    # make debug, rank 1 (the case's first failing one, from the kept grade), no terminal.
    import threading
    cmd = [sys.executable, os.path.join(HERE, "debug.py"), "--lc", lec, "--tree", tree,
           "--ex", ex, "--rank", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = queue.Queue()
    threading.Thread(target=lambda: [lines.put(ln.rstrip("\n")) for ln in proc.stdout] +
                     [lines.put(None)], daemon=True).start()
    seen = []
    waits = r"rank 1 \(PID (\d+) on .*\) waits for a debugger"
    got = take_lines(lines, seen, until=lambda ln: re.search(waits, ln), wait=60)
    pid = int(re.search(waits, got).group(1)) if got else None
    if pid is not None:  # the command comes on the next line
        take_lines(lines, seen, until=lambda ln: True)
    command = (f"gdb -p {pid} -ex 'set var xt_debug_wait = 0' -ex 'break {m.test}' "
               "-ex continue")
    time.sleep(1.0)  # it must still be waiting, the case not run
    waiting = proc.poll() is None and pid is not None and os.path.exists(f"/proc/{pid}")
    while not lines.empty():
        seen.append(lines.get() or "")
    waiting = waiting and not any(ln.startswith("debug: case") for ln in seen)
    s.record("make debug: rank 1 waits (a second later, still), printing its PID and the gdb "
             "command that breaks in the function under test",
             waiting and any(command in ln for ln in seen), seen)
    if pid is None:
        proc.kill()
        proc.wait()
        return
    how = "gdb"
    if shutil.which("gdb") is None:
        how = "no gdb on this machine (sudo apt-get install -y gdb)"
    else:
        res = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex",
                              "set var xt_debug_wait = 0"],
                             capture_output=True, text=True, timeout=120)
        text = res.stdout + res.stderr
        if res.returncode != 0 or re.search(r"ptrace|Could not attach|No symbol", text):
            how = "gdb could not attach (ptrace not permitted here?): " + " | ".join(
                tail(text, 3))
    if how != "gdb":
        try:
            os.kill(pid, signal.SIGUSR1)
        except OSError as e:
            seen.append(f"kill -USR1 {pid}: {e}")
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.terminate()
        rc = proc.wait()
    take_lines(lines, seen)
    with open(os.path.join(kept, "debug", "launch1", "cases.txt")) as f:
        ran = [ln.strip() for ln in f if ln.startswith("case ")]
    done = (rc == 1 and f"debug: case {k}: WRONG" in seen and len(ran) == 1 and
            ran[0].startswith(f"case {k} ") and ran[0].endswith("watchdog=0"))
    if how == "gdb":
        s.record("make debug: gdb -p PID -batch -ex 'set var xt_debug_wait = 0' lets rank 1 go "
                 "on; the case ends, WRONG as graded, watchdog off", done, seen + ran)
    else:
        s.record("make debug: SIGUSR1 lets rank 1 go on; the case ends, WRONG as graded, "
                 "watchdog off", done, seen + ran)
        s.skip("make debug: gdb attaches and lets rank 1 go on", how)


def test_relations(s):
    """compare.relation: what a wrong output equals, on hand-made arrays."""
    case = spec.Case(None, 2, {"M": 3, "rows": 5, "fn": "f"})
    e = np.array([1.0, -2.0, 0.0, 4.0])
    before = [np.array([0.5, 0.5, 1.0, -1.0]), np.zeros(4)]
    other = [{"y": e}, {"y": -e + 1}]
    got = {"3 x": (3 * e, ["got = 3 x expected on every element of 'y' (3 = M)"]),
           "1/2": (e / 2, ["got = 0.5 x expected on every element of 'y' (1/2 = 1/np)"]),
           "+before": (e + before[0], ["got = expected + the value 'y' held before"]),
           "-before": (e - before[0], ["got = expected - the value 'y' held before"]),
           "rank 1's": (-e + 1, ["got = rank 1's expected 'y'"]),
           "noise": (e + np.array([0.1, -0.3, 0.2, 0.0]), [])}
    # float32 rounding on an element far smaller than the largest hides no ratio
    tiny = np.array([1.0, -2.0, 3e-5, 4.0])
    rounded = (tiny / 2 + np.array([0.0, 0.0, 2e-7, 0.0]), ["got = 0.5 x expected"])
    problems = []
    for what, (g, want) in got.items():
        lines = compare.relation(case, "y", e, g, 0, other, {"y": before})
        if len(lines) != len(want) or any(not ln.startswith(w) for ln, w in zip(lines, want)):
            problems.append(f"{what}: {lines}")
    for what, (g, want) in {"1/2, rounded": rounded}.items():
        lines = compare.relation(case, "y", tiny, g, 0, [{"y": tiny}], {})
        if len(lines) != len(want) or any(not ln.startswith(w) for ln, w in zip(lines, want)):
            problems.append(f"{what}: {lines}")
    s.record("wrong values: a constant ratio (named when it is a case's number or its inverse), "
             "the value before the call added or lost, another rank's value; nothing for noise; a "
             "ratio seen through float32 rounding of a small element",
             not problems, problems)


def test_debug_san(s):
    """make debug SAN=1: a SAN mutant's report (graded with --san) names the sanitizer's
    debug command, and that command runs the case again in the AddressSanitizer build,
    rank 0 waiting (let go by SIGUSR1 here), to the same CRASH."""
    found = [(lec, m) for lec in lectures.names()
             for m in (mutants.parse(p) for p in sorted(glob.glob(
                 os.path.join(HERE, "mutants", lec, "*.patch"))))
             if "--san" in m.args and m.expect == "CRASH" and m.target.endswith(".c")]
    if not found:
        s.record("make debug SAN=1: a CRASH mutant graded with --san to try it on", False)
        return
    lec, m = found[0]
    ex = os.path.splitext(os.path.basename(m.target))[0]
    tree = mutant_tree("debug_san", lec, m.name)
    res = subprocess.run([sys.executable, os.path.join(HERE, "grade.py"), "--lc", lec,
                          "--tree", tree, "--ex", ex, "--seed", "1", "--san"],
                         capture_output=True, text=True, timeout=600)
    out = res.stdout + res.stderr
    want = f"debug: python3 grader/debug.py --lc {lec} --tree {tree} --ex {ex} --san"
    s.record(f"{m.name}: a SAN=1 report's debug line keeps the sanitizer (make debug SAN=1)",
             "CRASH" in out and want in " ".join(out.split()), out.splitlines()[-14:])
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "debug.py"), "--lc", lec,
                             "--tree", tree, "--ex", ex, "--san"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    import threading
    lines, seen = queue.Queue(), []
    threading.Thread(target=lambda: [lines.put(ln.rstrip("\n")) for ln in proc.stdout] +
                     [lines.put(None)], daemon=True).start()
    waits = r"rank 0 \(PID (\d+) on .*\) waits for a debugger"
    got = take_lines(lines, seen, until=lambda ln: re.search(waits, ln), wait=300)
    if got:
        os.kill(int(re.search(waits, got).group(1)), signal.SIGUSR1)
    try:
        proc.wait(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    take_lines(lines, seen)
    text = "\n".join(seen)
    s.record(f"{m.name}: make debug SAN=1 runs the case in the sanitizer build, rank 0 waiting "
             "for a debugger, to the same CRASH",
             bool(got) and "built with AddressSanitizer" in " ".join(text.split()) and
             re.search(r"debug: case \d+: CRASH", text) is not None and
             "AddressSanitizer" in text.split("CRASH", 1)[-1], seen[-16:])


def test_pattern(s):
    """grader/pattern.py on hand-made outcomes: the line that says which cases failed."""
    import pattern

    def rows(cases, failed):
        return [(c, failed(c)) for c in cases]

    grid = [{"np": n, "count": c} for n in (1, 2, 3, 4) for c in (0, 1, 7)]
    typed = [{"np": n, "dtype": d} for n in (1, 2) for d in ("float32", "float64", "int32",
                                                               "int64")]
    pairs = [{"np": n, "dtype": d} for n in (1, 2, 3, 5) for d in ("float32", "int32")]
    mixed = [{"np": n, "count": c} for n in (1, 2, 3) for c in (0, 1, 7, 100)]
    checker = [{"np": n, "count": c} for n in (1, 2) for c in (0, 1, 2, 3)]
    seeded = [{"np": n, "seed": 1000 + i} for i, n in enumerate((1, 2, 2, 3, 1, 2, 3, 3))]
    tied = [{"np": n, "dims": {1: "5,3", 2: "7,2", 4: "7,2"}[n], "rows": r}
            for n in (1, 2, 4) for r in (1, 2)]
    padded = [{"np": n, "dims": d, "padding": (-p) % n} for n in (1, 2, 3)
              for d, p in (("4,2", 10), ("6,3", 21))]
    want = [
        (rows(grid, lambda c: c["np"] >= 2), (), "9 of 12 cases failed: exactly those with np>=2"),
        (rows(typed, lambda c: c["dtype"].startswith("int")), (),
         "4 of 8 cases failed: exactly those with dtype=int32,int64"),
        (rows(grid, lambda c: c["np"] != 3), (),
         "9 of 12 cases failed: all but those with np=3"),
        (rows(pairs, lambda c: c["np"] >= 3 and c["dtype"] == "int32"), (),
         "2 of 8 cases failed: exactly those with np>=3 and dtype=int32"),
        (rows(mixed, lambda c: c["np"] == 3 or (c["np"] == 2 and c["count"] == 7)), (),
         "5 of 12 cases failed: all with np=3; 1 of 4 with np=2; none with np=1"),
        (rows(checker, lambda c: (c["np"] + c["count"]) % 2 == 1), (),
         "4 of 8 cases failed: cases 0, 2, 5, 7"),
        (rows(seeded, lambda c: c["np"] == 2), (), "3 of 8 cases failed: exactly those with np=2"),
        (rows(seeded, lambda c: c["seed"] in (1000, 1002, 1005)), (),
         "3 of 8 cases failed: 1 of 2 with np=1; 2 of 3 with np=2; none with np=3"),
        (rows(mixed, lambda c: c["np"] > 1 and c["count"] != 1), (),
         "6 of 12 cases failed: exactly those with np>=2 and count!=1"),
        (rows([{"np": n, "count": c} for n in (1, 2, 3, 4, 5) for c in (0, 1)],
              lambda c: c["np"] in (2, 4, 5) and c["count"] != c["np"] % 2), (),
         "3 of 10 cases failed: 3 of 6 with np=2,4,5; none with np=1,3"),
        (rows([{"np": n, "count": c} for n in range(1, 21) for c in (0, 1)],
              lambda c: c["count"] == c["np"] % 2), (),
         "20 of 40 cases failed: cases 1, 2, 5, 6, 9, 10, 13, 14 and 12 more"),
        (rows(tied, lambda c: c["np"] >= 2), (),
         "4 of 6 cases failed: exactly those with np>=2 (or equally, with dims=[7,2])"),
        (rows(padded, lambda c: c["padding"] > 0), (),
         "2 of 6 cases failed: exactly those with padding>=1"),
        ([(c, c["np"] == 2 if c["np"] <= 2 else None) for c in grid], (),
         "3 of the 6 cases run failed: exactly those with np=2; 6 did not run, as the run "
         "had ended"),
        (rows(grid[:4], lambda c: True), ("WRONG", "WRONG", "RULE", "WRONG"),
         "all 4 cases failed, 3 WRONG and 1 RULE"),
        (rows(grid, lambda c: c["np"] == 2 and c["count"] == 1), (),
         "1 of 12 cases failed: only this one"),
        (rows([{"np": 2, "in": i, "bias": b} for i, b in ((7, 1), (9, 0), (13, 1), (2, 1),
                                                            (1, 0), (12, 1))],
              lambda c: c["bias"] == 1), (),
         "4 of 6 cases failed: exactly those with bias=1"),
        (rows([{"np": n, "M": m, "rows": 1 + m % 2} for n in (2, 4) for m in (1, 2, 3, 5, 8)],
              lambda c: c["M"] != 1), (),
         "8 of 10 cases failed: exactly those with M>=2"),
        (rows([{"np": 2, "T": t, "one token": int(t == 1)} for t in (1, 4, 6, 9)],
              lambda c: c["T"] != 1), (),
         "3 of 4 cases failed: exactly those with T>=4 (or equally, with no one token)"),
        (rows([{"np": 2, "in": i, pattern.Word("bias"): b}
               for i, b in ((7, 1), (9, 0), (13, 1), (2, 1), (1, 0), (12, 1))],
              lambda c: c["bias"] == 0), (),
         "2 of 6 cases failed: exactly those with no bias"),
        (rows([{"np": n, pattern.Word("skewed", "uniform"): k} for n in (2, 4) for k in (0, 1)],
              lambda c: c["skewed"] == 0), (),
         "2 of 4 cases failed: exactly those with uniform"),
        (rows(grid, lambda c: False), (), ""),
        ([(grid[0], True)] + [(c, None) for c in grid[1:]], (), ""),
    ]
    bad = []
    for r, kinds, expect in want:
        got = pattern.summary(r, kinds)
        if got != expect:
            bad.append(f"expected {expect!r}, got {got!r}")
    s.record("pattern of failures: one parameter, its complement, >= and lists, two parameters, "
             "a partial split, case numbers when nothing splits them (a per-case seed never "
             "does), tied parameters, facets, cases not run, mixed verdicts; the split that "
             "names the fewest values (bias=1, not in=1,9); a parameter of many values where "
             "one range splits them (M>=2); flags named in words, and a test's 0/1 parameters by the "
             "words its labels use (no bias; uniform)",
             not bad, bad)


def test_printed(s):
    """What a case's ranks printed, in the report: under a failure, the failing group's
    first lines, shared among its ranks, each line cut to the report's width; for a test
    that passed, one line saying where the lines went."""
    d = fresh("printed")
    c0, c1 = os.path.join(d, "c0"), os.path.join(d, "c1")
    os.makedirs(c0)
    os.makedirs(c1)
    files = {"g0.r0": "first\n\tsecond, \x1b[31mred\x1b[0m\n" + "x" * 200 + "\n",
             "g0.r1": "".join(f"line {i}\n" for i in range(12)),
             "g0.r2": "", "g1.r0": "other group\n", "g0.r9": "not in the case\n"}
    for name, text in files.items():
        with open(os.path.join(c0, name + harness.OUTPUT_SUFFIX), "w") as f:
            f.write(text)
    t = spec.Test(exercise="x", name="f", points=1, cases=None, inputs=None, reference=None)
    case0, case1 = spec.Case(t, 3, {}, 0), spec.Case(t, 3, {}, 1)
    r = harness.TestResult(t, cases=[harness.CaseOutcome(case0, "WRONG", "why", c0, 0),
                                     harness.CaseOutcome(case1, "OK", cdir=c1)])
    runner = harness.Runner(None, 0, d)
    where = os.path.relpath(c0)
    got = runner.printed(r, harness.Failure("WRONG", case0, ["why"], 0))
    want = [f"this case's ranks printed 15 lines, the first 8 below, all in "
            f"{where}/g0.r<rank>.out.txt:",
            "  r0| first", "  r0|     second,  [31mred [0m", "  r0| " + "x" * 63 + "...",
            "  r1| line 0", "  r1| line 1", "  r1| line 2", "  r1| line 3", "  r1| line 4"]
    other = runner.printed(r, harness.Failure("WRONG", case0, ["why"], 1))
    passed = runner.printed(r, None)
    quiet = runner.printed(harness.TestResult(t, cases=[harness.CaseOutcome(case1, "OK",
                                                                            cdir=c1)]), None)
    ok = (got == want and other[1:] == ["  r0| other group"] and quiet == [] and
          passed == [f"printed 17 lines as its cases ran (not graded), in "
                     f"{where}/g<group>.r<rank>.out.txt"])
    s.record("printed lines: a failing group's first 8, shared by its ranks, each cut to the "
             "report's width; another group's when that one failed; one line where a test "
             "passed; nothing where nothing was printed",
             ok, got + other + passed + quiet)


def test_heard_from(s):
    """spec.heard_from on hand-made logs of barriers at np = 3: dissemination (everyone
    hears from everyone), one round only (rank r hears from r - 1 alone), and a send
    posted before the receive it would pass on completed (it carries nothing from it)."""
    def ev(d, peer, tag=0):
        return records.Event("MPI_Sendrecv", d, peer, tag, 0, "case")

    def barrier(rounds):
        return [records.Record(events=[e for k, d in enumerate((1, 2)[:rounds])
                                       for e in (ev("S", (r + d) % 3, k),
                                                 ev("R", (r - d) % 3, k))])
                for r in range(3)]

    full, one = spec.heard_from(barrier(2)), spec.heard_from(barrier(1))
    # Rank 1 sends to 2 before its receive from 0 completes; rank 2 then hears of 1 only.
    early = spec.heard_from([records.Record(events=[ev("S", 1)]),
                             records.Record(events=[ev("S", 2), ev("R", 0)]),
                             records.Record(events=[ev("R", 1)])])
    s.record("heard_from: a dissemination barrier at np=3 has every rank hear from every "
             "rank; one round, each rank its left neighbour only; a send logged before a "
             "receive carries nothing of it",
             full == [{0, 1, 2}] * 3 and one == [{0, 2}, {0, 1}, {1, 2}]
             and early == [{0}, {0, 1}, {1, 2}], [full, one, early])


def test_rounds(s):
    """spec.message_rounds on hand-made logs: the binomial broadcast at np = 8 sending to
    its largest subtree first, then its smallest; and a log that stalls."""
    def bcast(largest_first):
        recs = [records.Record() for _ in range(8)]
        for v in range(8):
            low = (v & -v) or 8
            if v:
                recs[v].events.append(records.Event("MPI_Recv", "R", v - low, 0, 4, "case"))
            for m in sorted((m for m in (1, 2, 4) if m < low), reverse=largest_first):
                recs[v].events.append(records.Event("MPI_Send", "S", v + m, 0, 4, "case"))
        return recs

    def deepest(recs):
        return max((m.round for m in spec.message_rounds(recs)), default=0)

    rule = spec.max_rounds(lambda c, i: 3, "the tree takes 3", "largest first")
    big, small = bcast(True), bcast(False)
    report = rule(None, None, small)
    # Rank 1 waits for a message rank 0 never sent; rank 0's own send still counts.
    stalled = [records.Record(events=[records.Event("MPI_Send", "S", 2, 0, 4, "case")]),
               records.Record(events=[records.Event("MPI_Recv", "R", 0, 0, 4, "case"),
                                      records.Event("MPI_Send", "S", 2, 0, 4, "case")]),
               records.Record(events=[records.Event("MPI_Recv", "R", 1, 0, 4, "case")])]
    try:
        stall = [(m.src, m.dst, m.round, m.received) for m in spec.message_rounds(stalled)]
    except Exception as e:  # the point: it must not raise
        stall = repr(e)
    want = "rank 7 received in round 6, at the end of the chain 0 -> 4 -> 6 -> 7"
    s.record("rounds: the binomial broadcast at np=8 takes 3 rounds largest subtree first and 6 "
             "smallest first (reported along 0 -> 4 -> 6 -> 7); a stalled log yields what it "
             "replayed", deepest(big) == 3 and deepest(small) == 6 and not rule(None, None, big)
             and len(report) == 1 and report[0][0] == 7 and want in report[0][1]
             and stall == [(0, 2, 1, False)],
             [f"largest first {deepest(big)}, smallest first {deepest(small)}", report, stall])
