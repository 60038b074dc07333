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
import dataclasses
import glob
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import needs  # noqa: E402

needs.numpy()

import numpy as np  # noqa: E402

import compare  # noqa: E402
import hangs  # noqa: E402
import harness  # noqa: E402
import records  # noqa: E402
import sanitizer  # noqa: E402
import launch  # noqa: E402
import mutants  # noqa: E402
import spec  # noqa: E402
import stubgen  # noqa: E402
import lectures  # noqa: E402
from testkit import fresh, mpirun, mutant_tree, sh, status_lines, Suite, tail, WORK  # noqa: E402

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
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                    if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if nvcc or cuda:
        rc, out = sh(["make", "-j2", "--no-print-directory", "CUDA=1", f"NVCC={nvcc or 'nvcc'}",
                      "cuda"])
        s.record("nvcc: CUDA helpers and their test compile (CUDA=1)", rc == 0, tail(out))
    else:
        s.skip("nvcc: CUDA parts", "no nvcc on this machine")


def test_format(s):
    s.section("format")
    files = sorted(glob.glob("common/*.[ch]") + glob.glob("common/*.cu") +
                   glob.glob("common/*.cpp") + glob.glob("common/tests/emu/*.cu") +
                   glob.glob("grader/lectures/*/*.[ch]") +
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
            glob.glob("solutions/lc*/*.c") + glob.glob("grader/lectures/*/kit/*.c")}
    s.record(f"a build of one exercise writes {db}: libxt, every exercise, solution and "
             "kit source", rc == 0 and want <= files,
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

NPY_DTYPES = ["float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
              "uint32", "uint64", "float16"]


def test_npy(s):
    d = fresh("npy")
    for name in NPY_DTYPES:
        dt = np.dtype(name)
        base = np.arange(6) * 3 - (0 if dt.kind == "u" else 7)
        np.save(os.path.join(d, f"in_{name}.npy"), base.astype(dt).reshape(2, 3))
    r = mpirun(1, [os.path.join(TESTS_BIN, "test_npy"), "--dir", d])
    problems = [] if r.returncode == 0 else tail(r.output)
    for name in NPY_DTYPES:
        a = np.load(os.path.join(d, f"in_{name}.npy"))
        try:
            b = np.load(os.path.join(d, f"out_{name}.npy"))
        except (OSError, ValueError) as e:
            problems.append(f"NumPy cannot read out_{name}.npy: {e}")
            continue
        if b.dtype != a.dtype or b.shape != a.shape or a.tobytes() != b.tobytes():
            problems.append(f"out_{name}.npy: {b.dtype} {b.shape} differs from what NumPy wrote")
    for fname, want in (("out_scalar.npy", np.float64(2.5)),
                        ("out_empty.npy", np.zeros(0, np.float32)),
                        ("out_seq.npy", np.arange(1000, dtype=np.int32))):
        try:
            got = np.load(os.path.join(d, fname))
            if got.dtype != np.asarray(want).dtype or got.shape != np.shape(want) or \
                    not np.array_equal(got, want):
                problems.append(f"{fname}: {got.dtype} {got.shape}")
        except (OSError, ValueError) as e:
            problems.append(f"{fname}: {e}")
    s.record(".npy: every dtype written by NumPy reads in C and back, shapes (2,3) () (0,)",
             not problems, problems)


def test_pmpi(s):
    d = fresh("pmpi")
    r = mpirun(2, [os.path.join(TESTS_BIN, "test_pmpi"), "--out", d])
    ok = r.returncode == 0 and r.output.count(": ok") == 2
    problems = [] if ok else tail(r.output)
    rec = records.read_record_table(os.path.join(d, "mpi.r0.txt")) if ok else {}
    want = {"MPI_Send": (2, 1, 0, 40, 0), "MPI_Isend": (1, 1, 0, 40, 0),
            "MPI_Sendrecv": (1, 1, 1, 12, 12), "MPI_Allreduce": (1, 0, 0, 16, 16)}
    for fn, nums in want.items():
        got = rec.get(fn)
        if ok and (got is None or (got.calls, got.msgs_sent, got.msgs_recv, got.bytes_sent,
                                   got.bytes_recv) != nums):
            problems.append(f"mpi.r0.txt {fn}: {got} expected {nums}")
    s.record("PMPI counters: calls, messages and bytes per function, PROC_NULL excluded, "
             "written at finalize", not problems, problems)


def test_strict(s):
    exe = os.path.join(TESTS_BIN, "test_strict")
    r = mpirun(2, [exe, "--no-strict"])
    s.record("strict send off: the unsafe exchange completes through MPI's buffering",
             r.returncode == 0 and r.output.count("exchange completed") == 2, tail(r.output))
    d = fresh("strict")
    start = time.monotonic()
    r = mpirun(2, [exe, "--watchdog", "2", "--out", d], timeout=40)
    took = time.monotonic() - start
    lines = status_lines(d)
    ok = (r.returncode != 0 and any("MPI_Send(to 1, tag 5, 4 B)" in ln for ln in lines)
          and any("MPI_Send(to 0, tag 5, 4 B)" in ln for ln in lines) and took < 20)
    s.record("strict send on: the same exchange deadlocks and both sends are named",
             ok, lines + tail(r.output), f"({took:.1f} s)")


def test_watchdog(s):
    d = fresh("watchdog")
    start = time.monotonic()
    r = mpirun(3, [os.path.join(TESTS_BIN, "test_watchdog"), "--watchdog", "2", "--out", d],
               timeout=40)
    took = time.monotonic() - start
    lines = status_lines(d)
    want = ["MPI_Recv(from 1, tag 7, up to 32 B)", "computing, not in MPI",
            "MPI_Waitall(MPI_Irecv from 0, tag 3, 8 B; MPI_Isend to 0, tag 4, 16 B)"]
    missing = [w for w in want if not any(w in ln for ln in lines)]
    ok = r.returncode != 0 and not missing and took < 20
    s.record("watchdog: names a blocked receive, a computing rank and a wait on two requests",
             ok, [f"missing: {m}" for m in missing] + lines, f"({took:.1f} s)")


def test_todo(s):
    d = fresh("todo")
    start = time.monotonic()
    r = mpirun(2, [os.path.join(TESTS_BIN, "test_todo"), "--out", d])
    took = time.monotonic() - start
    lines = [ln for ln in status_lines(d) if ln.startswith("TODO")]
    ok = (r.returncode != 0 and lines and
          all("common/tests/test_todo.c:6: unwritten(): write unwritten() here" in ln
              for ln in lines) and took < 10)
    s.record("XT_TODO stops the run at once with file, line, function and message", ok,
             lines + tail(r.output), f"({took:.1f} s)")


def test_watch(s):
    exe = os.path.join(TESTS_BIN, "test_watch")
    out = {m: mpirun(4, [exe, f"--mode={m}"]) for m in ("blocking", "nonblocking")}
    problems = [f"--mode={m}: exit {r.returncode}: " + " | ".join(tail(r.output, 3))
                for m, r in out.items() if r.returncode != 0]
    views = {m: [ln for ln in r.output.splitlines() if ln.startswith(("step", "[r"))]
             for m, r in out.items()}
    if not problems and views["blocking"] != views["nonblocking"]:
        diff = [f"{a}  |  {b}" for a, b in zip(views["blocking"], views["nonblocking"]) if a != b]
        problems.append("the views differ (Sendrecv | Irecv, Isend, Waitall): " + "; ".join(diff[:3]))
    if not problems and "[r0] c0 -> r1      c3 <- r3               [10| 0| 0|40]" not in \
            views["nonblocking"]:
        problems.append("step 1 of rank 0 is not 'c0 -> r1, c3 <- r3, [10| 0| 0|40]': " +
                        " | ".join(views["nonblocking"][:3]))
    s.record("watch: a nonblocking ring (Irecv, Isend, Waitall) shows the steps of a blocking "
             "one: receives count when they complete", not problems, problems)
    r = mpirun(4, [exe, "--mode=values"])
    lines = [ln.rstrip() for ln in r.output.splitlines() if ln.startswith("[r")]
    want = ["[r0] [0 0] -> r1   [3 30] <- r3", "[r3] [1 10] -> r0  [0 0] <- r2"]
    missing = [w for w in want if w not in lines]
    s.record("watch: xt_watch_values shows a small message outside the buffer by its values "
             "(a pair passed around a ring)", r.returncode == 0 and not missing,
             [f"exit {r.returncode}; missing {missing}; got " + " | ".join(lines[:5])])


def test_trace(s):
    d = fresh("trace")
    path = os.path.join(d, "run.json")
    r = mpirun(3, [os.path.join(TESTS_BIN, "test_trace"), f"--trace={path}"])
    problems = [] if r.returncode == 0 else tail(r.output)
    try:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    except (OSError, ValueError, KeyError) as e:
        events = []
        problems.append(f"{path}: {e}")
    for rank in range(3):
        mine = [e for e in events if e.get("pid") == rank and e.get("ph") == "X"]
        names = [e["name"] for e in mine]
        step = [e for e in mine if e["name"] == 'step "1"']
        send = [e for e in mine if e["name"] == "MPI_Sendrecv"]
        if not (step and send and "left open" in names and "MPI_Barrier" in names):
            problems.append(f"rank {rank}: events {names}")
            continue
        # The exchange lies inside its named range, and the peer is the right neighbour.
        a, b = step[0], send[0]
        if not (a["ts"] <= b["ts"] and b["ts"] + b["dur"] <= a["ts"] + a["dur"] + 1e-3):
            problems.append(f"rank {rank}: MPI_Sendrecv {b} outside its range {a}")
        if b.get("args", {}).get("peer") != (rank + 1) % 3:
            problems.append(f"rank {rank}: MPI_Sendrecv args {b.get('args')}")
    s.record("trace: one Chrome trace JSON for all ranks, MPI calls inside named ranges",
             not problems, problems)


def test_crash(s):
    exe = os.path.join(TESTS_BIN, "test_crash")
    cases = [("segv", r"CRASH.*rank=1.*us=\d+.*signal 11 SIGSEGV", "a segfault names rank and signal"),
             ("mpierr", r"CRASH.*rank=0.*MPI_Send\(to 99, tag 0, 4 B\).*MPI_ERR_RANK",
              "an MPI error names the call and the error"),
             ("abort", r"CRASH.*rank=1.*MPI_Abort \(error code 7\)",
              "MPI_Abort names the rank and its code"),
             ("exit", r"CRASH.*rank=1.*called exit\(\) before MPI_Finalize",
              "exit() before MPI_Finalize names the rank")]
    for mode, pattern, what in cases:
        d = fresh(f"crash_{mode}")
        r = mpirun(2, [exe, "--mode", mode, "--out", d])
        lines = status_lines(d)
        ok = r.returncode != 0 and any(re.search(pattern, ln) for ln in lines)
        if mode == "segv":
            frames = sanitizer.short_backtrace(
                [ln for ln in lines if "(" in ln], exe, "common/tests/test_crash.c")
            ok = ok and any("crash_here" in f for f in frames)
            lines = lines + [f"frames: {frames}"]
        s.record(f"crash: {what}", ok, lines + tail(r.output, 8))


def test_heap_damage(s):
    """A rank that glibc aborts on a damaged heap: the CRASH quotes glibc, and the report
    gives the command that finds the write (make grade ... SAN=1)."""
    import grade
    exe = os.path.join(TESTS_BIN, "test_crash")
    d = fresh("crash_heap")
    r = mpirun(2, [exe, "--mode", "heap", "--out", d])
    lec = lectures.names()[0]
    runner = harness.Runner(harness.Exercise(lec, "test_crash", "common/tests/test_crash.c", exe,
                                             []), 1, d)
    fail = runner.classify_death(r, records.read_status(d, 2), None, None, 2)
    args = argparse.Namespace(tree=None, sol=False, san=False, case=None)
    lines = fail.lines + ([grade.memory_advice(args, lec, "ex", 1234)]
                          if fail.memory_damage else [])
    ok = (fail.kind == "CRASH" and "rank 1: signal 6 SIGABRT" in lines[0]
          and any(re.match(r"glibc: double free or corruption \(out\): the heap was damaged "
                           r"earlier", ln) for ln in lines)
          and lines[-1] == "AddressSanitizer stops at the line that did it: make grade "
                           f"LC={lectures.number(lec)} EX=ex SEED=1234 SAN=1")
    s.record("crash: glibc aborting on a damaged heap is quoted, with the SAN=1 command that "
             "finds the write", ok, lines + tail(r.output, 8))


TEST_CASES = os.path.join("build", "common", "tests", "test_cases")
TEST_CASES_SOURCE = os.path.join("common", "tests", "test_cases.c")


def source_line(text, nth=1):
    """The line number of the nth line of test_cases.c that holds text."""
    with open(TEST_CASES_SOURCE) as f:
        found = [i for i, ln in enumerate(f, 1) if text in ln]
    return found[nth - 1] if len(found) >= nth else 0


def test_cases(s):
    d = fresh("cases")
    plan = [(3, "copy"), (8, "copy"), (2, "overrun"), (2, "underrun"), (1, "modify"),
            (2, "pending"), (4, "world"), (1, "note"), (2, "peek"), (1, "nullout"),
            (2, "reuse"), (2, "print"), (2, "event"), (2, "inflight"), (2, "early"),
            (2, "freed"), (2, "persistent"), (1, "icoll"), (4, "icoll"), (2, "icoll_sent"),
            (2, "written"), (4, "igather"), (2, "iscatter_sent")]
    # A kit's events (the "event" case logs Q 0..4 and RR 0, RR 1 between them), read
    # through kinds registered here as a lecture's package registers its own.
    records.event_kind("Q", "selftest_q", lambda w: (int(w[0]), float(w[1]), float(w[2])))
    records.event_kind("RR", "selftest_rr", lambda w: int(w[0]))
    with open(os.path.join(d, "cases.txt"), "w") as f:
        f.write("# self-test cases\n")
        for k, (np_, fn) in enumerate(plan):
            f.write(f"case {k} np={np_} fn={fn} index={k} extra=ignored\n")
    for k, (np_, fn) in enumerate(plan):
        os.makedirs(os.path.join(d, f"c{k}"))
        for g in range(8 // np_):
            for r in range(np_):
                x = (np.arange(5) + 100 * g + 10 * r + 1000 * k).astype(np.float32)
                np.save(os.path.join(d, f"c{k}", f"g{g}.r{r}.x.npy"), x)
    r = mpirun(8, [os.path.join("build", "common", "tests", "test_cases"), "--cases", d])
    problems = [] if r.returncode == 0 else tail(r.output)

    def rec(k, g, rank):
        return records.read_record(os.path.join(d, f"c{k}", f"g{g}.r{rank}.mpi.txt"))

    for k, (np_, fn) in enumerate(plan):
        for g in range(8 // np_):
            for rank in range(np_):
                rc = rec(k, g, rank)
                if rc is None:
                    problems.append(f"case {k} group {g} rank {rank}: no record")
                    continue
                x = np.load(os.path.join(d, f"c{k}", f"g{g}.r{rank}.x.npy"))
                y = np.load(os.path.join(d, f"c{k}", f"g{g}.r{rank}.y.npy"))
                who = np.load(os.path.join(d, f"c{k}", f"g{g}.r{rank}.who.npy"))
                if fn == "copy" and not np.array_equal(x, y):
                    problems.append(f"case {k} group {g} rank {rank}: output is not the input")
                if list(who) != [rank, np_]:
                    problems.append(f"case {k} group {g}: rank {rank} saw rank/size {list(who)}")
                notes = " | ".join(f"{kind} {text}" for kind, text in rc.notes)
                expect = {"overrun": "WRONG wrote past the end of 'y' (5 x float32): element [5]",
                          "underrun": "WRONG wrote before the start of 'y'",
                          "modify": "WRONG modified its input 'x' (a const argument): element [1]",
                          "note": "WRONG returned 3, expected 4",
                          "nullout": "WRONG output 'lost' should hold 3 elements but its "
                                     "pointer is NULL"}.get(fn)
                if fn == "pending" and rank == 0:
                    expect = "PENDING MPI_Isend(to 1, tag 0, 4 B) was never completed"
                if fn == "reuse" and rank == 1:
                    expect = ("RACE MPI_Irecv received into memory that MPI_Irecv(from 0, "
                              "tag 0) still owns")
                if fn in ("inflight", "freed") and rank == 0:
                    # Code addresses resolved as a report resolves them: the lines of the calls.
                    notes = sanitizer.resolve_sites(notes, TEST_CASES, TEST_CASES_SOURCE)
                    at = f"at {TEST_CASES_SOURCE}:"
                    expect = (f"INFLIGHT MPI_Isend(to 1, tag 0, 256 B, posted "
                              f"{at}{source_line('MPI_Isend(v, 64')}): its buffer changed (first "
                              "at byte 12 of 256) before the request completed (in MPI_Wait "
                              f"{at}{source_line('MPI_Wait(&r, MPI_STATUS_IGNORE);')})"
                              if fn == "inflight" else
                              f"FREED MPI_Isend(to 1, tag 0, 4 B, posted "
                              f"{at}{source_line('MPI_Isend(&v, 1, MPI_INT, 1, 0, comm, &r);', 2)}"
                              "): MPI_Request_free freed its request before it completed")
                if fn == "written" and rank == 1:
                    notes = sanitizer.resolve_sites(notes, TEST_CASES, TEST_CASES_SOURCE)
                    expect = (f"INFLIGHT MPI_Irecv(from 0, tag 0, 16 B, posted at "
                              f"{TEST_CASES_SOURCE}:{source_line('MPI_Irecv(w, 4', 2)}): its "
                              "receive buffer was written (first at byte 4 of 16) before the "
                              "request completed (in MPI_Wait at "
                              f"{TEST_CASES_SOURCE}:{source_line('MPI_Wait(&r,', 4)})")
                if fn == "icoll_sent" and rank == 0:
                    notes = sanitizer.resolve_sites(notes, TEST_CASES, TEST_CASES_SOURCE)
                    expect = (f"INFLIGHT MPI_Ialltoall(8 B, posted at {TEST_CASES_SOURCE}:"
                              f"{source_line('MPI_Ialltoall(s, 1')}): its send buffer changed "
                              "(first at byte 4 of 8) before the request completed (in MPI_Wait "
                              f"at {TEST_CASES_SOURCE}:{source_line('MPI_Wait(&req,')})")
                if fn == "iscatter_sent" and rank == 0:
                    notes = sanitizer.resolve_sites(notes, TEST_CASES, TEST_CASES_SOURCE)
                    expect = (f"INFLIGHT MPI_Iscatter(8 B, posted at {TEST_CASES_SOURCE}:"
                              f"{source_line('MPI_Iscatter(s, 1')}): its send buffer changed "
                              "(first at byte 4 of 8) before the request completed (in MPI_Wait "
                              f"at {TEST_CASES_SOURCE}:"
                              f"{source_line('MPI_Wait(&req,', 3)})")
                if fn == "igather" and rank == 0:
                    early, late = (np.load(os.path.join(d, f"c{k}", f"g{g}.r0.{n}.npy"))
                                   for n in ("early", "late"))
                    want = [v for r_ in range(np_) for v in (r_ + 1, r_ + 1)]
                    if not all(compare.is_recv_poison(v) for v in early) or \
                            late.tolist() != want:
                        problems.append(f"case {k} (igather): root's buffer before the wait "
                                        f"{early.tolist()} (the poison?), after "
                                        f"{late.tolist()}, not {want}")
                if fn == "icoll":
                    arrays = [np.load(os.path.join(d, f"c{k}", f"g{g}.r{rank}.{n}.npy"))
                              for n in ("early", "late_a", "late_b")]
                    got = [a.tolist() for a in arrays]
                    n = np_ * (np_ + 1) // 2
                    want = [[n, 2 * n, 3 * np_], [n - np_, np_]]
                    # One rank: Open MPI completes both at once, with one request, so the
                    # second start finishes the first and nothing is pending to read early.
                    early_ok = np_ == 1 or all(compare.is_recv_poison(v) for v in arrays[0])
                    if not early_ok or got[1:] != want:
                        problems.append(f"case {k} (icoll, np={np_}) rank {rank}: before the "
                                        f"wait {got[0]} (the poison?), after {got[1:]}, not "
                                        f"{want}")
                rounds = {"early": [("", [5, 6, 7, 4])],
                          "persistent": [("", [5, 6, 7, 4]), ("2", [8, 9, 10, 4])]}
                for i, want in rounds.get(fn, []) if rank == 1 else []:
                    early = np.load(os.path.join(d, f"c{k}", f"g{g}.r1.early{i}.npy"))
                    late = np.load(os.path.join(d, f"c{k}", f"g{g}.r1.late{i}.npy"))
                    if not all(compare.is_recv_poison(v) for v in early):
                        problems.append(f"case {k} ({fn}): the buffer read before wait {i} "
                                        f"holds {list(early)}, not the receive poison")
                    if list(late) != want:
                        problems.append(f"case {k} ({fn}): after wait {i} the buffer holds "
                                        f"{list(late)}, not {want}: the 3 received and the "
                                        "4th as it was")
                if expect and expect not in notes:
                    problems.append(f"case {k} ({fn}) rank {rank}: notes '{notes}' lack '{expect}'")
                if not expect and notes:
                    problems.append(f"case {k} ({fn}) rank {rank}: unexpected notes '{notes}'")
                if fn == "peek" and np.load(os.path.join(
                        d, f"c{k}", f"g{g}.r{rank}.refused.npy"))[0] != 1:
                    problems.append(f"case {k}: rank {rank} read another rank's input file")
                if fn == "world" and not any(e.comm == "world" and e.fn == "MPI_Allreduce"
                                             for e in rc.events):
                    problems.append(f"case {k}: MPI_Allreduce on MPI_COMM_WORLD not recorded")
                # A kit's events: in call order, each start <= end, one after the other,
                # within the case (each case's log starts empty), after their description.
                got = ([q[0] for q in rc.selftest_q], rc.selftest_rr)
                times = [t for q in rc.selftest_q for t in q[1:]]
                want = ([0, 1, 2, 3, 4], [0, 1]) if fn == "event" else ([], [])
                text = open(os.path.join(d, f"c{k}", f"g{g}.r{rank}.mpi.txt")).read()
                described = "# test event: index start end\n# another kind: index\nQ 0 " in text
                if (got != want or times != sorted(times) or (fn == "event") != described
                        or (times and (times[0] < 0 or times[-1] > rc.seconds + 1e-3))
                        or rc.events_dropped or rc.unparsed):
                    problems.append(f"case {k} ({fn}) rank {rank}: kit events {got}, times "
                                    f"{times}, expected {want} in order, described first")
        idle = glob.glob(os.path.join(d, f"c{k}", f"g{8 // np_}.*.mpi.txt"))
        if idle:
            problems.append(f"case {k}: idle ranks wrote records: {idle}")
        # What a case printed, on stdout and stderr, is in its output files, in order;
        # libxt's own messages (the overrun's WRONG, say) are not, and an empty file goes.
        printed = harness.output_files(os.path.join(d, f"c{k}"))
        want = {(g, rank): [f"case {k} rank {rank} of {np_}", f"stderr of rank {rank}"]
                for g in range(8 // np_) for rank in range(np_)} if fn == "print" else {}
        got = {}
        for key, path in printed.items():
            with open(path) as f:
                got[key] = f.read().splitlines()
        if got != want:
            problems.append(f"case {k} ({fn}): printed {got}, expected {want}")
        left = [f for f in os.listdir(os.path.join(d, f"c{k}"))
                if f.endswith(harness.OUTPUT_SUFFIX) and (fn != "print" or
                                                          os.path.getsize(os.path.join(
                                                              d, f"c{k}", f)) == 0)]
        if left:
            problems.append(f"case {k} ({fn}): empty output files left: {left}")
    s.record("case mode: groups of np ranks on an 8-rank world, idle ranks, per-case records, "
             "other ranks' input files refused, what each rank printed in its case's file, "
             "a kit's events (xt_event) in order, each kind described once",
             not [p for p in problems if "notes" not in p], problems)
    s.record("case mode: guard bytes, const inputs, pending requests and notes reported",
             not [p for p in problems if "notes" in p], [p for p in problems if "notes" in p])


# ---------------------------------------------------------------- 3. grader

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


def test_grader_units(s):
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
    test_pattern(s)
    test_printed(s)
    test_rounds(s)
    test_blocked_explanations(s)
    test_asan_places(s)
    test_one_case(s)
    test_debug_san(s)
    test_relations(s)


def test_event_lines(s):
    """read_record: a kit's event lines through the kinds registered (records.event_kind),
    in order; a kind nobody registered kept as text in rec.unparsed; the SD count."""
    path = os.path.join(fresh("event_lines"), "g0.r0.mpi.txt")
    with open(path, "w") as f:
        f.write("# xt case record\nT 0.01\nM activations 0 64\n# unit event: op n\n"
                "UA F 3\nUZ 1 2\nUA B 4\nSD 3\nEND\n")
    records.event_kind("UA", "unit_events", lambda w: (w[0], int(w[1])))
    rec = records.read_record(path)
    got = (rec.unit_events, rec.unparsed, rec.events_dropped, rec.memory) if rec else None
    want = ([("F", 3), ("B", 4)], ["UZ 1 2"], 3, {"activations": (0, 64)})
    empty = records.Record().unit_events
    taken = []
    for kind, attribute in (("UA", "other_name"), ("UB", "memory")):
        try:
            records.event_kind(kind, attribute, str)
            taken.append(f"{kind} as rec.{attribute} accepted")
        except ValueError:
            pass
    s.record("read_record: a kit's event lines as its lecture registered them, in order; an "
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
             "one range splits them (M>=2); flags named in words",
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
    for lec in lectures.names():
        # A lecture's manifest may name what an exercise's demo must show: DEMOS =
        # {exercise: [text, ...]}.
        shows = getattr(lectures.load(lec), "DEMOS", {})
        # A CUDA exercise's demo runs on the emulated device (make demo does so without a GPU).
        demos = sorted(glob.glob(os.path.join("solutions", lec, "*.c")) +
                       glob.glob(os.path.join("solutions", lec, "*.cu")))
        bad = []
        for src in demos:
            exe = os.path.join("build", os.path.splitext(src)[0])
            if src.endswith(".cu"):
                exe = os.path.join("build", "emu", os.path.splitext(src)[0])
                sh(["make", "-s", "--no-print-directory", exe])
            r = mpirun(4, [exe], timeout=60)
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

LECTURE_NAME = re.compile(r"lc\d_")  # one digit: not the throwaway lecture


def project_files():
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        import throwaway
        out = throwaway.tree_files(".")
    return [f for f in out if os.path.isfile(f)]


def points_table(doc_text):
    """{file: (functions, points text)} of a lecture page's table of exercises."""
    rows = {}
    for m in re.finditer(r"^\| \[`([\w.]+)`\]\(#[\w-]+\) \| (.*?) \| (.*?) \|$", doc_text, re.M):
        rows[m.group(1)] = (re.findall(r"`(\w+)`", m.group(2)), m.group(3).strip())
    return rows


def docs_problems(lec, text=None):
    """The page's table of exercises and its total against the manifest's tests."""
    path = lectures.page_path(lec)
    if text is None:
        try:
            text = lectures.page(lec)
        except OSError as e:
            return [f"{path}: {e.strerror}"]
    tests = lectures.load(lec).TESTS
    rows = points_table(text)
    out = []
    seen = set()
    for t in tests:
        fname = None
        for ext in (".c", ".cu"):
            if os.path.exists(os.path.join("solutions", lec, t.exercise + ext)):
                fname = t.exercise + ext
        if fname in seen:
            continue
        seen.add(fname)
        mine = [x for x in tests if x.exercise == t.exercise]
        if fname not in rows:
            out.append(f"{path}: the table of exercises has no row for {fname}")
            continue
        fns, pts = rows[fname]
        with open(os.path.join("solutions", lec, fname)) as f:
            source = f.read()

        def defined(name):
            return re.search(rf"^\w[\w \t*]*\b{name}\(", source, re.M) is not None

        # A test named after a function of the file must be listed; every function
        # listed must be defined there (a test may also cover two, as save and load).
        missing = [x.name for x in mine if defined(x.name) and x.name not in fns]
        unknown = [fn for fn in fns if not defined(fn)]
        if missing or unknown:
            out.append(f"{path}: {fname} lists {fns}; " +
                       (f"its tests grade {missing} too" if missing else
                        f"{unknown} are not defined in solutions/{lec}/{fname}"))
        if all(x.device == "cpu" for x in mine):
            want = (" + ".join(str(x.points) for x in mine), str(sum(x.points for x in mine)))
            if pts not in want:
                out.append(f"{path}: {fname} is worth {pts} in the table; its tests give "
                           f"{want[0]}")
        elif "DEVICE=" not in pts:
            out.append(f"{path}: {fname} is graded with DEVICE=cuda; the table says {pts}")
    for fname in rows:
        if fname not in seen:
            out.append(f"{path}: the table lists {fname}, which no test grades")
    total = sum(t.points for t in tests if t.device == "cpu")
    m = re.search(r"the lecture is worth (\d+) points", text)
    if not m or int(m.group(1)) != total:
        out.append(f"{path}: should say \"the lecture is worth {total} points\" "
                   f"(found {m.group(0) if m else 'no such sentence'})")
    return out


def anchors(path):
    """The anchors of a markdown page's headings, as GitHub makes them: lower case,
    punctuation dropped, spaces as hyphens, -1, -2 ... for repeats."""
    out, seen, fence = set(), {}, False
    with open(path) as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"^#{1,6}\s+(.*?)\s*$", line)
            if m:
                slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
                n = seen.get(slug, 0)
                seen[slug] = n + 1
                out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def link_problems(page, text=None):
    """Each relative link of a markdown page whose file or heading does not exist."""
    if text is None:
        with open(page) as f:
            text = f.read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    out = []
    for target in re.findall(r"\[[^\]]*\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        name, _, anchor = target.partition("#")
        path = os.path.normpath(os.path.join(os.path.dirname(page), name)) if name else page
        if not os.path.exists(path):
            out.append(f"{page}: a link to {target}: no file {path}")
        elif anchor and path.endswith(".md") and anchor not in anchors(path):
            out.append(f"{page}: a link to {target}: {path} has no such heading")
    return out


# What a reader of torch.distributed code meets, each of which docs/from_torch.md must
# give a row: start-up and launch, groups, point-to-point, collectives, CUDA, profiling,
# autograd and the parallel wrappers.
TORCH_APIS = """
dist.init_process_group | init_method="env://" | init_method="tcp://" | init_method="file://"
dist.destroy_process_group | dist.is_available | dist.is_initialized | dist.is_mpi_available
dist.is_gloo_available | dist.is_nccl_available | dist.get_backend | dist.get_rank
dist.get_world_size | torch.multiprocessing.spawn | torchrun | torchrun --nproc-per-node
torchrun --nnodes | torchrun --node-rank | torchrun --master-addr | torchrun --standalone
MASTER_ADDR | MASTER_PORT | RANK | WORLD_SIZE | LOCAL_RANK | --local-rank | dist.TCPStore
store.set | store.get | store.multi_set | store.multi_get | store.add | store.compare_set
store.append | store.wait | store.check | store.delete_key | store.num_keys | dist.FileStore
dist.HashStore | dist.PrefixStore | dist.monitored_barrier | backend="gloo" | backend="nccl"
backend="mpi" | dist.new_group | group= | dist.get_group_rank | dist.get_global_rank
dist.distributed_c10d.get_global_rank | dist.get_process_group_ranks | dist.ProcessGroup
group.rank() | group.size() | dist.distributed_c10d._get_default_group | dist.init_device_mesh
dist.device_mesh.init_device_mesh | dist.device_mesh.DeviceMesh | dist.send | dist.recv
dist.isend | dist.irecv | work.wait() | work.is_completed() | dist.P2POp
dist.batch_isend_irecv | tag= | dist.send_object_list | dist.recv_object_list | dist.broadcast
dist.broadcast_object_list | dist.reduce | dist.all_reduce | async_op=True | dist.ReduceOp
dist.reduce_op | dist.ReduceOp.SUM | dist.ReduceOp.MAX | dist.ReduceOp.AVG
dist.ReduceOp.PRODUCT | dist.ReduceOp.MIN | dist.gather | dist.all_gather
dist.all_gather_into_tensor | dist.all_gather_object | dist.scatter | dist.scatter_object_list
dist.reduce_scatter | dist.reduce_scatter_tensor | dist.all_to_all | dist.all_to_all_single
dist.barrier | torch.cuda.Stream | torch.cuda.Event | torch.cuda.current_device
torch.profiler.profile | torch.profiler.record_function | torch.autograd.Function
tensor.backward(gradient=) | torch.autograd.backward | Variable._execution_engine.run_backward
torch.utils.checkpoint.checkpoint
torch.save | torch.load | DistributedDataParallel | DistributedSampler
""".replace("\n", " | ").split(" | ")
TORCH_APIS = [a.strip() for a in TORCH_APIS if a.strip()]


def bridge_problems(text):
    """docs/from_torch.md: a row for each of TORCH_APIS, each row naming an exercise (a
    link to a lecture page) or saying why none."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            first = line.split(" | ")[0][2:]
            for name in re.findall(r"`([^`]+)`", first):
                rows[name] = line
    out = [f"no row for `{a}`" for a in TORCH_APIS if a not in rows]
    for name, line in rows.items():
        last = line.rstrip(" |").rsplit(" | ", 1)[-1]
        if not re.search(r"\]\(lc\d+_\w+\.md#[\w-]+\)", last) and "no exercise" not in last:
            out.append(f"the row of `{name}` neither links an exercise nor says why none")
    return out


def names_outside(files, owned):
    """'file:line: text' for each line naming a lecture in a file outside `owned`."""
    bad = []
    for f in files:
        if f.startswith(owned) or f.endswith((".png", ".svg")):
            continue
        try:
            with open(f, errors="replace") as fh:
                for k, line in enumerate(fh, 1):
                    if LECTURE_NAME.search(line):
                        bad.append(f"{f}:{k}: {line.strip()[:100]}")
        except OSError:
            continue
    return bad


def unlabelled_parameters(test, cases):
    """The parameters of test's cases that its label does not carry: those that vary among
    the cases and where some case, given another of the test's values for it (the rest
    unchanged), keeps its label. A report names the failing case by its label, and the
    line that says which cases failed names these parameters: each must be readable there."""
    varying = {k for c in cases for k in c.params if k != "fn" and
               len({repr(x.params.get(k)) for x in cases}) > 1}
    if len({c.np for c in cases}) > 1:
        varying.add("np")
    found = []
    for name in sorted(varying):
        values = list(dict.fromkeys(c.np if name == "np" else c.params.get(name)
                                    for c in cases))
        for c in cases:
            other = next((v for v in values
                          if repr(v) != repr(c.np if name == "np" else c.params.get(name))),
                         None)
            twin = dataclasses.replace(c, params=dict(c.params))
            if name == "np":
                twin.np = other
            else:
                twin.params[name] = other
            try:
                same = test.label(twin) == test.label(c)
            except Exception:
                continue  # a value this case's shape cannot take: another case decides
            if same:
                found.append(f"{test.lecture} {test.name}: the label '{test.label(c)}' does not "
                             f"change with {name} ({c.np if name == 'np' else c.params[name]}"
                             f" or {other})")
                break
    return found


def test_lectures(s):
    s.section("lectures: each one unit, found by looking")
    names = lectures.names()
    s.record(f"lectures found: {', '.join(names)}", bool(names), [])
    # Prose may name lectures: the README and the docs; code only in its lecture's places.
    owned = tuple(p for lec in names for p in lectures.places(lec)) + ("README.md", "docs/")
    bad = names_outside(project_files(), owned)
    s.record("no file outside a lecture's own places (and README/docs prose) names a lecture",
             not bad, bad)
    import grade
    with open(os.path.join(ROOT, "README.md")) as f:
        readme = f.read()

    def in_sync(text):
        table = text.split(grade.README_BEGIN, 1)[-1].split(grade.README_END, 1)[0]
        return table.strip() == grade.lectures_markdown().strip()
    s.record("the README's table of lectures is the manifests' (make readme writes it)",
             in_sync(readme),
             ["the README's table differs from what the manifests give: run make readme"])
    stale = re.sub(r"(?m)^\| 1 \|.*\n", "", readme, count=1)
    s.record("a README whose table lacks a lecture's row is reported (negative control)",
             stale != readme and not in_sync(stale), [])
    stray = os.path.join(fresh("names"), "x.py")
    with open(stray, "w") as f:
        f.write("# harmless\nfrom lectures." + "lc2" + "_dp import ddp\n")
    found = names_outside([stray, lectures.places(names[0])[1] + "x.c"], owned)
    s.record("a file outside the lectures' places that names one is reported, with its line "
             "(negative control)", len(found) == 1 and ":2:" in found[0], found)
    bad = [p for lec in names for p in docs_problems(lec)]
    s.record("docs: every lecture page's table of exercises and total points match its tests",
             not bad, bad)
    # Negative control: a page whose table gives an exercise one point too many and
    # whose total is gone must be reported twice.
    lec = names[0]
    page = lectures.page(lec)
    row = re.search(r"^(\| \[`[\w.]+`\]\(#[\w-]+\) \| .*? \| )(\d+)( \|)$", page, re.M)
    broken = page.replace(row.group(0), row.group(1) + str(int(row.group(2)) + 1) + row.group(3))
    broken = re.sub(r"the lecture is worth \d+ points", "the lecture is worth a lot", broken)
    found = docs_problems(lec, broken)
    s.record("docs: a points table off by one and a missing total are reported (negative "
             "control)", len(found) == 2, found)
    pages = ["README.md"] + sorted(glob.glob("docs/*.md"))
    bad = [p for page in pages for p in link_problems(page)]
    s.record(f"docs: every relative link of the README and docs/ ({len(pages)} pages) leads to "
             f"a file and heading that exist", not bad, bad)
    with open("docs/from_torch.md") as f:
        bridge = f.read()
    bad = bridge_problems(bridge)
    s.record(f"docs/from_torch.md: a row for each of {len(TORCH_APIS)} torch.distributed calls, "
             f"each linking the exercise that teaches it or saying why none", not bad, bad)
    row = next(ln for ln in bridge.splitlines() if ln.startswith("| `dist.all_reduce` |"))
    link = re.search(r"\]\((\w+\.md)#[\w-]+\)", bridge)
    broken = bridge.replace(row + "\n", "").replace(link.group(0),
                                                      f"]({link.group(1)}#no_such_heading)")
    found = bridge_problems(broken) + link_problems("docs/from_torch.md", broken)
    s.record("docs: a bridge missing a call's row, and a link to a heading that does not "
             "exist, are reported (negative control)",
             any("dist.all_reduce" in p for p in found) and
             any("no_such_heading" in p for p in found), found)
    with open("README.md") as f:
        s.record("the README points to docs/from_torch.md", "(docs/from_torch.md)" in f.read(),
                 [])
    bad = []
    for lec in names:
        tests = lectures.load(lec).TESTS
        for ex in dict.fromkeys(t.exercise for t in tests):
            mine = [t for t in tests if t.exercise == ex]
            numbered = harness.numbered_cases(mine, 1)
            bad += [p for t in mine for p in unlabelled_parameters(t, numbered[t.name])]
    s.record("labels: each case's label carries every parameter its test's cases vary in",
             not bad, bad)
    # Negative control: the same label, shown each case's first varying parameter
    # as the first case has it, must be reported for that parameter.
    test = lectures.load(names[-1]).TESTS[0]
    cases = harness.numbered_cases([test], 1)[test.name]
    key = next(k for k in cases[0].params
               if k != "fn" and len({repr(c.params[k]) for c in cases}) > 1)

    def frozen(c):
        return test.label(dataclasses.replace(c, params={**c.params, key: cases[0][key]}))
    found = unlabelled_parameters(dataclasses.replace(test, label=frozen), cases)
    s.record(f"labels: a label of {test.name} that leaves out {key} is reported (negative "
             f"control)", len(found) == 1 and f"with {key} " in found[0], found)
    import bench
    checked, bad = [], []
    for lec in bench.benched():
        figures = getattr(bench.bench_module(lec), "page_figures", None)
        if figures:
            checked.append(lec)
            bad += figures(lectures.page(lec))
    s.record(f"docs: the bench figures the pages copy that are exact (bytes, pairs, memory) "
             f"equal the benches' formulas ({', '.join(checked)})", bool(checked) and not bad,
             bad)
    # Negative control: a copied row whose last figure is off by one must be reported.
    lec = checked[-1]
    page = lectures.page(lec)
    row = re.search(r"^\w+ +\w+ +\d\*? .* \d+ +\d+$", page, re.M).group(0)
    broken = page.replace(row, row[:-1] + str((int(row[-1]) + 1) % 10), 1)
    found = bench.bench_module(lec).page_figures(broken)
    s.record(f"docs: a bench row of docs/{lec}.md off by one digit is reported (negative "
             f"control)", len(found) == 1, found)
    import hints
    bad = hints.check()
    s.record("hints: every exercise has its three (the idea, the structure, near-code); every "
             "TODO within max(3, ceil(n/3)) lines of an n-line solution", not bad, bad)
    # pyflakes as python3-pyflakes provides it, a module (grader/setup.sh looks the same way).
    flakes = next((py for py in (sys.executable, "/usr/bin/python3")
                   if os.path.exists(py) and sh([py, "-m", "pyflakes", "--version"])[0] == 0),
                  None)
    if flakes:
        rc, out = sh([flakes, "-m", "pyflakes", "grader"])
        s.record("pyflakes: grader/ has no warning", rc == 0 and not out.strip(), tail(out, 25))
    else:
        s.record("pyflakes: grader/ has no warning", False,
                 ["pyflakes is not installed: sudo apt-get install -y python3-pyflakes"])
    import imports
    found = imports.circles()
    s.record("grader/: no modules import each other round (imports inside functions too)",
             not found, [", ".join(c) for c in found])
    root = fresh("imports")
    for name, text in (("a.py", "import b\n"), ("b.py", "def f():\n    import a\n"),
                       ("c.py", "import a\n")):
        with open(os.path.join(root, name), "w") as f:
            f.write(text)
    found = imports.circles(root)
    s.record("grader/: a circle through an import inside a function is reported, a module "
             "that only joins it is not (negative control)", found == [["a", "b"]], found)
    import libxt_layers
    bad = libxt_layers.check(".")
    layers = libxt_layers.layers(".")
    s.record("libxt: files call each other in one direction, as xt_internal.h's layers say ("
             + " < ".join(" ".join(f) for _, f in layers) + ")", not bad, bad)
    used = libxt_layers.usage(".")
    single = libxt_layers.single_lecture(used)
    shared = sorted(f for f, lecs in used.items() if len(lecs) >= 2)
    s.record(f"libxt: each of its files is used by two lectures or more ({len(shared)} files, "
             "measured on the symbols the lectures' objects use), lecture code is in kits",
             not single and len(shared) >= len(used) - len(libxt_layers.DEVICE_LAYER), single)
    # Negative control: measured on one lecture's programs alone, every file it uses is one
    # lecture's, and must be reported.
    one = lectures.names()[-1]
    alone = libxt_layers.single_lecture(libxt_layers.usage(".", [one]))
    want = sorted(f for f, lecs in used.items()
                  if one in lecs and f not in libxt_layers.DEVICE_LAYER)
    got = sorted(p.split()[0][len("common/"):] for p in alone)
    s.record(f"libxt: a file only one lecture's programs use is reported (negative control: "
             f"the usage of {one}'s programs alone names all {len(want)} files they use)",
             want and got == want, alone[:3])
    # Negative control: the same objects against layers that swap init.c's with the base, and
    # a comment naming a lecture, must both be reported.
    root = fresh("layers")
    shutil.copytree("common", os.path.join(root, "common"))
    os.makedirs(os.path.join(root, "build"))
    os.symlink(os.path.abspath(os.path.join("build", "common")),
               os.path.join(root, "build", "common"))
    internal = os.path.join(root, "common", "xt_internal.h")
    with open(internal) as f:
        text = f.read()
    lines = text.split("\n")
    start = next(i for i, ln in enumerate(lines) if "LAYERS" in ln)
    layer = {}
    for i in range(start + 1, len(lines)):
        if "*/" in lines[i]:
            break
        m = re.match(r"( \*\s+\d+ )(.*)", lines[i])
        if m:
            layer[i] = m
    first, last = min(layer), max(k for k in layer if "init.c" in layer[k].group(2))
    lines[first] = layer[first].group(1) + layer[last].group(2)  # init.c at the bottom
    lines[last] = layer[last].group(1) + layer[first].group(2)
    text = "\n".join(lines)
    with open(internal, "w") as f:
        f.write(text)
    with open(os.path.join(root, "common", "mem.c"), "a") as f:
        f.write("/* as " + "lc" + "3_zero wants */\n")
    found = libxt_layers.check(root)
    ok = (any("init.c" in p for p in found) and
          any("names a lecture" in p for p in found))
    s.record("libxt layers: a file above its layer, or a lecture's name, is reported "
             "(negative control)", ok, found[:6])
    import throwaway
    start = time.monotonic()
    for what, ok, details in throwaway.check(fresh("throwaway")):
        s.record(f"a throwaway lecture in a copy of the tree: {what}", ok, details)
    print(f"  ({time.monotonic() - start:.1f} s)")


def test_mutants(s):
    s.section("mutants (grader/mutants.py): each caught with its verdict")
    for o in mutants.run_all(jobs=2, python=sys.executable):
        if o.skipped:
            s.skip(o.name, o.summary)
        else:
            s.record(f"{o.name}: {o.summary}"[:150], o.ok, o.details)


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
                ("libxt", lambda: libxt(s)), ("kits", lambda: test_kits(s)),
                ("grader", lambda: test_grader_units(s)),
                ("stubs", lambda: test_stubs(s)), ("lectures", lambda: test_lectures(s)),
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


def test_cuda(s):
    exe = os.path.join(TESTS_BIN, "test_cuda")
    if not os.path.exists(exe):
        s.skip("CUDA helpers on a GPU", "not built (no nvcc)")
        return
    if not launch.has_gpu():
        s.skip("CUDA helpers on a GPU", "no GPU on this machine (compiled only)")
        return
    r = mpirun(2, [exe], timeout=120)
    s.record("CUDA helpers: a device buffer staged through pinned memory arrives intact",
             r.returncode == 0 and r.output.count(": ok") == 2, tail(r.output))


EMU_TESTS = os.path.join("build", "emu", "common", "tests")


def test_emu(s):
    """The emulated device (DEVICE=emu): what it keeps of a GPU, and libxt's CUDA helpers
    on it."""
    emu_test = os.path.join(EMU_TESTS, "emu", "test_emu")
    emu_cuda = os.path.join(EMU_TESTS, "test_cuda")
    rc, out = sh(["make", "-s", "--no-print-directory", emu_test, emu_cuda])
    if rc != 0:
        s.record("emulated device: its tests build (make emu)", False, tail(out))
        return
    r = mpirun(2, [emu_test, "order"], timeout=60)
    s.record("emulated device: queued work runs only when waited for, in stream order; "
             "cudaStreamWaitEvent orders streams, unordered streams stay apart; the legacy "
             "default stream waits for blocking streams only; every thread of a 3-D grid once; "
             "bad copies and launches are errors",
             r.returncode == 0 and r.output.count(": ok") == 2, tail(r.output))
    r = mpirun(1, [emu_test, "touch"], timeout=60)
    s.record("emulated device: the host reading device memory is a crash that says so",
             r.returncode != 0 and "CRASH" in r.output and
             "the host touched device memory: byte 12 of a 256 B block" in r.output,
             tail(r.output, 6))
    r = mpirun(2, [emu_test, "mpi"], timeout=60)
    s.record("emulated device: MPI_Send of a device pointer is a crash inside MPI_Send, "
             "explained", r.returncode != 0 and
             "inside MPI_Send: the host touched device memory" in r.output, tail(r.output, 6))
    r = mpirun(1, [emu_test, "hang"], timeout=60)
    s.record("emulated device: a hang report names the device work still queued",
             r.returncode != 0 and re.search(r"MPI_Recv\(.*device work queued and not yet "
                                             r"waited for \(1 operation\): cudaMemcpyAsync "
                                             r"DeviceToHost 256 B at [\w/]+test_emu\.cu:\d+",
                                             r.output) is not None, tail(r.output, 6))
    r = mpirun(2, [emu_cuda], timeout=120)
    s.record("emulated device: libxt's CUDA helpers (a kernel, staged send and receive, "
             "xt_cuda_gemm) on it", r.returncode == 0 and r.output.count(": ok") == 2,
             tail(r.output))


def test_nn(s):
    import nntest  # the numeric layer's checks live beside nn.py; see its docstring

    start = time.monotonic()
    ok, bad, cases, d = nntest.c_versus_numpy(os.path.join(TESTS_BIN, "test_nn"),
                                              os.path.join(WORK, "nn"))
    kits = sorted(os.path.relpath(e, "build") for e in nntest.kit_programs())
    s.record(f"nn: C agrees with grader/nn.py on {len(cases)} cases: rng, permutation, GEMM "
             "(4 transposes, beta 0/1, k=0), linear (+=, NULL), ReLU/GELU, MSE, CE, softmax, "
             "SGD, MLP (init, forward, backward, hook order), bf16, Adam, layer API (bit-identical, "
             "out of order dies), RMSNorm, SiLU, SwiGLU, causal GQA attention, embedding "
             "(a token out of range dies), decoder block; and the kits' pieces through their own "
             f"programs ({', '.join(kits)}): pipeline stages (split backward bit-identical to "
             "full, activations per micro-batch, misuse dies), attention blocks, top-k routing, "
             "experts",
             ok, bad, f"({time.monotonic() - start:.1f} s)")
    start = time.monotonic()
    ok, bad = nntest.gradients()
    s.record("nn: grader/nn.py's gradients match central finite differences", ok, bad,
             f"({time.monotonic() - start:.1f} s)")
    start = time.monotonic()
    ok, bad = nntest.negative_control(cases, d)
    s.record("nn: negative control: a wrong GELU', cross-entropy gradient, bf16 rounding, "
             "Adam, attention (scale, mask, KV head, dQ as dS^T K), RMSNorm's dgamma, SiLU' or embedding "
             "gradient in nn.py fails those checks", ok, bad, f"({time.monotonic() - start:.1f} s)")


def test_mem(s):
    exe = os.path.join(TESTS_BIN, "test_mem")
    d = fresh("mem")
    plan = ["units", "grow", "after", "overrun", "underrun", "uaf"]
    with open(os.path.join(d, "cases.txt"), "w") as f:
        for k, fn in enumerate(plan):
            f.write(f"case {k} np=2 fn={fn}\n")
            os.makedirs(os.path.join(d, f"c{k}"))
    start = time.monotonic()
    r = mpirun(2, [exe, "--cases", d])
    # What the cases print goes to their output files (c<k>/g<g>.r<r>.out.txt).
    printed = ""
    for path in sorted(glob.glob(os.path.join(d, "c*", "*" + harness.OUTPUT_SUFFIX))):
        with open(path) as f:
            printed += f.read()
    problems = [ln for ln in (r.output + printed).splitlines() if ln.startswith("FAIL")]
    if r.returncode != 0 and not problems:
        problems = tail(r.output)
    for rank in range(2):
        try:
            n = int(np.load(os.path.join(d, "c0", f"g0.r{rank}.failures.npy"))[0])
        except (OSError, ValueError, IndexError) as e:
            problems.append(f"units, rank {rank}: no result: {e}")
            continue
        if n:
            problems.append(f"units, rank {rank}: {n} failures")
    s.record("memory: xt_alloc zeroes and counts per kind, current and peak; xt_free, "
             "xt_mem_reset_peak, xt_alloc_size, NULL and 0 bytes; the MLP's buffers by kind",
             not problems, problems, f"({time.monotonic() - start:.1f} s)")

    # The case records: "M kind current peak", peaks restarting from what is in use.
    problems = []
    zero = {k: (0, 0) for k in ("params", "grads", "optimizer", "master", "activations", "comm")}
    for rank in range(2):
        want = {1: dict(zero, params=(500, 1500 + 8 * rank), optimizer=(0, 3000),
                        total=(500, 4500 + 8 * rank)),
                2: dict(zero, params=(0, 500), grads=(0, 100), total=(0, 600))}
        for k, mem in want.items():
            rec = records.read_record(os.path.join(d, f"c{k}", f"g0.r{rank}.mpi.txt"))
            if rec is None:
                problems.append(f"case {k} ({plan[k]}) rank {rank}: no complete record")
            elif rec.memory != mem:
                problems.append(f"case {k} ({plan[k]}) rank {rank}: memory {rec.memory}, "
                                f"expected {mem}")
    # xt_mem_print: each rank's peaks in that case (the columns of unused kinds may be left
    # out), printed by rank 0 into the case's output file.
    try:
        with open(os.path.join(d, "c2", "g0.r0" + harness.OUTPUT_SUFFIX)) as f:
            table = f.read()
    except OSError:
        table = ""
    rows = {ln.split()[0]: [int(v) for v in ln.split()[1:] if v != "0"]
            for ln in table.splitlines() if re.match(r"\[r\d\]( +\d+)+$", ln)}
    if ("after: peak bytes per rank" not in table or
            not re.search(r"^ +params +grads .*total$", table, re.M) or
            rows != {"[r0]": [500, 100, 600], "[r1]": [500, 100, 600]}):
        problems.append("xt_mem_print: no table of both ranks' peaks: " +
                        " | ".join(tail(table, 4)))
    s.record("memory: case records hold each kind's bytes now and at peak (Record.memory), "
             "peaks restart at each case; xt_mem_print", not problems, problems)

    # Guard zones and poison: each case's WRONG notes, all of them, in order.
    at = r"common/tests/test_mem\.c:\d+"
    want = {3: [rf"wrote past the end of the 40-byte grads block allocated at {at}: 8 bytes "
                rf"changed in bytes 40\.\.47 \(found at its xt_free at {at}\)$"],
            4: [rf"wrote before the start of the 16-byte comm block allocated at {at}: 3 bytes "
                rf"changed in bytes -3\.\.-1$"],
            5: [rf"wrote to the 400-byte params block allocated at {at} after it was freed at "
                rf"{at}: 4 bytes changed in bytes 20\.\.23$",
                rf"wrote past the end of the 12-byte optimizer block allocated at {at} after it "
                rf"was freed at {at}: 4 bytes changed in bytes 12\.\.15$",
                rf"wrote to the 12-byte optimizer block allocated at {at} after it was freed at "
                rf"{at}: 4 bytes changed in bytes 8\.\.11$"]}
    problems = []
    for k in range(len(plan)):
        for rank in range(2):
            rec = records.read_record(os.path.join(d, f"c{k}", f"g0.r{rank}.mpi.txt"))
            notes = [text for kind, text in rec.notes if kind == "WRONG"] if rec else []
            expected = want.get(k, [])
            if len(notes) != len(expected) or not all(
                    re.match(p, n) for p, n in zip(expected, notes)):
                problems.append(f"case {k} ({plan[k]}) rank {rank}: notes {notes}, expected "
                                f"{expected}")
    s.record("memory: a write past either end of an xt_alloc block (found at its xt_free, or "
             "at the end of the case, once) and a write to a freed block (leaving the "
             "quarantine, or at the end of the case) are WRONG notes naming kind, size, sites",
             not problems, problems)

    # Outside a case the program dies, naming the call; one rank, no mpirun.
    modes = [("badfree", rf"ERROR.*{at}: xt_free: \S+ was not allocated by xt_alloc",
              "xt_free of a pointer from malloc dies, naming the caller's file and line"),
             ("doublefree", rf"ERROR.*{at}: xt_free: the 24-byte comm block allocated at {at} "
              rf"was freed already, at {at}$", "a second xt_free of a block dies, naming both"),
             ("overrun", rf"ERROR.*{at}: wrote past the end of the 16-byte params block "
              rf"allocated at {at}: 4 bytes changed in bytes 16\.\.19 \(found at its xt_free "
              rf"at {at}\)$", "outside a case, a write past a block's end dies at its xt_free"),
             ("leak", rf"ERROR.*{at}: wrote past the end of the 16-byte params block allocated "
              rf"at {at}: 4 bytes changed in bytes 20\.\.23$",
              "a write past the end of a block never freed dies at xt_finalize")]
    for mode, pattern, what in modes:
        d = fresh(f"mem_{mode}")
        start = time.monotonic()
        r = launch.run([exe, "--mode", mode, "--out", d], timeout=60)
        lines = status_lines(d)
        ok = r.returncode != 0 and any(re.search(pattern, ln) for ln in lines)
        s.record(f"memory: {what}", ok, lines + tail(r.output, 8),
                 f"({time.monotonic() - start:.1f} s)")


def libxt(s):
    s.section("libxt")
    for t in (test_npy, test_pmpi, test_strict, test_watchdog, test_todo, test_crash,
              test_heap_damage, test_cases, test_mem, test_trace, test_watch, test_cuda,
              test_emu, test_nn):
        t(s)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\nmake test: interrupted", file=sys.stderr)
        sys.exit(130)
