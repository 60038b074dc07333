"""make test's checks of libxt (common/), through its own test programs
(common/tests/): .npy files, the PMPI counters, strict send, the watchdog, the TODO
abort, crashes, case mode (guards, requests in flight, notes, a kit's events), memory
accounting, tracing, the buffer watch, the CUDA helpers and the emulated device, and the
numeric layer against grader/nn.py (grader/nntest.py). selftest(suite) runs them all.
"""

import argparse
import glob
import json
import os
import re
import time

import numpy as np

import compare
import harness
import records
import sanitizer
import launch
import lectures
from testkit import fresh, mpirun, sh, status_lines, tail, WORK

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TESTS_BIN = os.path.join("build", "common", "tests")


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
    # Inputs as the grader writes them (one file per group), and in every other case (and
    # "peek", which must find rank 0's file there) one .npy file per rank, as benches may.
    given = {}
    for k, (np_, fn) in enumerate(plan):
        os.makedirs(os.path.join(d, f"c{k}"))
        for g in range(8 // np_):
            xs = [(np.arange(5) + 100 * g + 10 * r + 1000 * k).astype(np.float32)
                  for r in range(np_)]
            given[k, g] = xs
            if k % 2 or fn == "peek":
                for r, x in enumerate(xs):
                    np.save(os.path.join(d, f"c{k}", f"g{g}.r{r}.x.npy"), x)
            else:
                records.write_inputs(os.path.join(d, f"c{k}"), g, {"x": xs})
    r = mpirun(8, [os.path.join("build", "common", "tests", "test_cases"), "--cases", d])
    problems = [] if r.returncode == 0 else tail(r.output)

    def rec(k, g, rank):
        return records.read_record(records.outputs_path(os.path.join(d, f"c{k}"), g, rank))

    def out(k, g, rank, name):
        return records.read_pack(records.outputs_path(os.path.join(d, f"c{k}"), g,
                                                      rank)).get(name, np.zeros(0))

    for k, (np_, fn) in enumerate(plan):
        for g in range(8 // np_):
            for rank in range(np_):
                rc = rec(k, g, rank)
                if rc is None:
                    problems.append(f"case {k} group {g} rank {rank}: no record")
                    continue
                x = given[k, g][rank]
                y = out(k, g, rank, "y")
                who = out(k, g, rank, "who")
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
                    early, late = (out(k, g, 0, n) for n in ("early", "late"))
                    want = [v for r_ in range(np_) for v in (r_ + 1, r_ + 1)]
                    if not all(compare.is_recv_poison(v) for v in early) or \
                            late.tolist() != want:
                        problems.append(f"case {k} (igather): root's buffer before the wait "
                                        f"{early.tolist()} (the poison?), after "
                                        f"{late.tolist()}, not {want}")
                if fn == "icoll":
                    arrays = [out(k, g, rank, n) for n in ("early", "late_a", "late_b")]
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
                    early, late = out(k, g, 1, f"early{i}"), out(k, g, 1, f"late{i}")
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
                if fn == "peek" and list(out(k, g, rank, "refused")) != [1]:
                    problems.append(f"case {k}: rank {rank} read another rank's input file")
                if fn == "world" and not any(e.comm == "world" and e.fn == "MPI_Allreduce"
                                             for e in rc.events):
                    problems.append(f"case {k}: MPI_Allreduce on MPI_COMM_WORLD not recorded")
                # A kit's events: in call order, each start <= end, one after the other,
                # within the case (each case's log starts empty), after their description.
                got = ([q[0] for q in rc.selftest_q], rc.selftest_rr)
                times = [t for q in rc.selftest_q for t in q[1:]]
                want = ([0, 1, 2, 3, 4], [0, 1]) if fn == "event" else ([], [])
                with open(records.outputs_path(os.path.join(d, f"c{k}"), g, rank), "rb") as f:
                    text = records.record_text(f.read()) or ""
                described = "# test event: index start end\n# another kind: index\nQ 0 " in text
                if (got != want or times != sorted(times) or (fn == "event") != described
                        or (times and (times[0] < 0 or times[-1] > rc.seconds + 1e-3))
                        or rc.events_dropped or rc.unparsed):
                    problems.append(f"case {k} ({fn}) rank {rank}: kit events {got}, times "
                                    f"{times}, expected {want} in order, described first")
        idle = glob.glob(os.path.join(d, f"c{k}", f"g{8 // np_}.*.outputs"))
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
            n = int(records.read_pack(records.outputs_path(os.path.join(d, "c0"), 0,
                                                           rank))["failures"][0])
        except (KeyError, ValueError, IndexError) as e:
            problems.append(f"units, rank {rank}: no result: {e!r}")
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
            rec = records.read_record(records.outputs_path(os.path.join(d, f"c{k}"), 0, rank))
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
            rec = records.read_record(records.outputs_path(os.path.join(d, f"c{k}"), 0, rank))
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


def resident_cases(d, plan):
    """Each exercise's cases under d, for plan {exercise: (world, [(case, np)])}; the lines
    of a resident launch's list that name them."""
    lines = []
    for name, (world, cases) in plan.items():
        cdir = os.path.join(d, name)
        os.makedirs(cdir)
        with open(os.path.join(cdir, "cases.txt"), "w") as c:
            c.writelines(f"case {k} np={np_} fn={name}\n" for k, np_ in cases)
        for k, _ in cases:
            os.makedirs(os.path.join(cdir, f"c{k}"))
        lines.append(f"{name} {os.path.abspath(cdir)} {world}\n")
    return lines


def test_resident_growing_list(s):
    """The list as the grader writes it (common/resident.c): LIST.part a line at a time,
    renamed LIST once whole. The ranks run the first exercise before the second one's line
    exists, and act on no line before its end: the second line is written in two parts,
    its world last, and its exercise must still run in a world of 2."""
    d = fresh("resident_growing")
    plan = {"leak": (4, [(0, 2)]), "world": (2, [(0, 1), (1, 2)])}
    first, second = resident_cases(d, plan)
    listing = os.path.join(d, "list.txt")
    problems = []

    def write_as_it_grows():
        with open(listing + ".part", "w") as f:
            f.write("# <exercise> <cases dir> <world>\n" + first)
            f.flush()
            deadline = time.monotonic() + 30
            while not os.path.exists(os.path.join(d, "leak", "status.r0.txt")):
                if time.monotonic() > deadline:
                    problems.append("the first exercise did not start within 30 s of its "
                                    "line, before the list was whole")
                    break
                time.sleep(0.005)
            head, world = second.rsplit(" ", 1)
            f.write(head + " ")
            f.flush()
            time.sleep(0.05)
            f.write(world)
        os.replace(listing + ".part", listing)

    cmd = launch.mpirun_command(4, [os.path.join(TESTS_BIN, "test_resident"), "--out", d,
                                    "--resident", listing])
    r = launch.run(cmd, timeout=60, meanwhile=write_as_it_grows)
    if r.returncode != 0:
        problems += tail(r.output)
    got = sorted(os.path.basename(p).split(".")[0] for p in
                 glob.glob(os.path.join(d, "world", "c0", "g*.r0.outputs")))
    if got != ["g0", "g1"]:
        problems.append(f"world, case 0: groups {got}, expected g0 g1 of a world of 2 (its "
                        f"line read whole)")
    s.record("resident launch: a list read as it grows, the first exercise run before the "
             "second one's line exists, a line acted on only once whole", not problems,
             problems)


def test_resident_long_line(s):
    """A line of the list longer than the resident program reads whole ends the launch with
    its reason, rather than being acted on cut short."""
    d = fresh("resident_long_line")
    listing = os.path.join(d, "list.txt")
    with open(listing, "w") as f:
        f.write("world " + os.path.join(d, "x" * 5000) + " 2\n")
    r = mpirun(2, [os.path.join(TESTS_BIN, "test_resident"), "--out", d, "--resident",
                   listing])
    s.record("resident launch: a line of the list too long to read whole is refused with its "
             "reason", r.returncode != 0 and "a line longer than 4095 bytes" in r.output,
             tail(r.output))


def test_resident(s):
    """A resident launch (common/resident.c): two exercises of common/tests/test_resident.c
    in one 4-rank launch, the second in a world of 2. Each writes into its own directory;
    the smaller world's cases run on its groups alone, the ranks above it idle; and the
    block the first exercise leaked, counted in its own second case (the control), counts
    in none of the second's."""
    d = fresh("resident")
    plan = {"leak": (4, [(0, 2), (1, 2)]), "world": (2, [(0, 1), (1, 2)])}
    with open(os.path.join(d, "list.txt"), "w") as f:
        f.write("# <exercise> <cases dir> <world>\n")
        f.writelines(resident_cases(d, plan))
    r = mpirun(4, [os.path.join(TESTS_BIN, "test_resident"), "--out", d, "--resident",
                   os.path.join(d, "list.txt")])
    problems = [] if r.returncode == 0 else tail(r.output)

    def groups(name, k):
        return sorted(os.path.basename(p).split(".")[0] for p in
                      glob.glob(os.path.join(d, name, f"c{k}", "g*.r0.outputs")))

    def comm_bytes(name, k, g=0):
        rec = records.read_record(records.outputs_path(os.path.join(d, name, f"c{k}"), g, 0))
        return rec.memory.get("comm", (None, None))[0] if rec else None

    if groups("leak", 1) != ["g0", "g1"] or comm_bytes("leak", 1) != 128:
        problems.append(f"leak, case 1: groups {groups('leak', 1)}, comm bytes in use "
                        f"{comm_bytes('leak', 1)} (expected g0 g1 of world 4, 128: its own "
                        f"first case's block and this one's)")
    for k, want in ((0, ["g0", "g1"]), (1, ["g0"])):
        if groups("world", k) != want:
            problems.append(f"world, case {k}: groups {groups('world', k)}, expected {want} "
                            f"in a world of 2")
    for k in (0, 1):
        if comm_bytes("world", k) != 0:
            problems.append(f"world, case {k}: {comm_bytes('world', k)} comm bytes in use, "
                            f"expected 0 (the leak's blocks are not its)")
    seen = records.read_pack(records.outputs_path(os.path.join(d, "world", "c0"), 1, 0))
    if "seen" in seen and list(seen["seen"]) != [1, 4]:
        problems.append(f"world, case 0, group 1: saw {list(seen['seen'])}, expected world "
                        f"rank 1 in MPI_COMM_WORLD of 4")
    statuses = [os.path.exists(os.path.join(d, name, "status.r0.txt")) for name in plan]
    if not all(statuses):
        problems.append("each exercise's status file in its own directory: missing")
    s.record("resident launch: two exercises in one launch, each in its own directory and "
             "world (the ranks above it idle), the first one's leaked memory counted in its "
             "own cases (control) and in none of the second's", not problems, problems)
    test_resident_growing_list(s)
    test_resident_long_line(s)
    test_resident_refusal(s)


def test_resident_refusal(s):
    """Cases that end early in a resident launch (common/case_run.c's run_ending_early): a
    refusal, where the case's line names the file whose xt_die refuses (refuse=...), and an
    XT_TODO, where it says todo=1. The case ends on every rank with its ERROR or TODO on
    record and the launch goes on (the next case runs, the stopped case's block counted in
    it no more); the controls name another file, or leave todo=1 out, and the run ends."""
    source = os.path.join("common", "tests", "test_resident.c")
    problems = []
    for exercise, line, kind, text, carries_on, next_line in (
            ("refuse", f"die=7 refuse={source}", "ERROR", "refused case 7", True, ""),
            ("refuse", "die=7 refuse=another/exercise.c", "ERROR", "refused case 7", False,
             ""),
            ("todo", "stop=1 todo=1", "TODO", "not written", True, "todo=2"),
            ("todo", "stop=1", "TODO", "not written", False, "")):
        d = fresh("resident_early_end")
        cdir = os.path.join(d, exercise)
        for k in (0, 1):
            os.makedirs(os.path.join(cdir, f"c{k}"))
        with open(os.path.join(cdir, "cases.txt"), "w") as f:
            f.write(f"case 0 np=2 fn={exercise} {line}\ncase 1 np=2 fn={exercise} "
                    f"{next_line}\n")
        with open(os.path.join(d, "list.txt"), "w") as f:
            f.write(f"{exercise} {os.path.abspath(cdir)} 2\n")
        r = mpirun(2, [os.path.join(TESTS_BIN, "test_resident"), "--out", d, "--resident",
                       os.path.join(d, "list.txt")])
        stops = [ln for ln in status_lines(cdir) if ln.startswith(kind)
                 and f"{source}:" in ln and text in ln]
        after = [records.read_record(records.outputs_path(os.path.join(cdir, "c1"), 0, r_))
                 for r_ in range(2)]
        ran_on = all(a is not None and list(a.arrays.get("after", [])) == [1] for a in after)
        if carries_on:
            comm = [a.memory.get("comm", (None,))[0] if a else None for a in after]
            if r.returncode != 0 or len(stops) != 2 or not ran_on or comm != [0, 0]:
                problems.append(f"{line}: exit {r.returncode}, {len(stops)} {kind} lines (2 "
                                f"expected), case 1 ran on both ranks: {ran_on}, its comm "
                                f"bytes {comm} (0 expected)")
        elif r.returncode == 0 or ran_on or not stops:
            problems.append(f"{line} (control): exit {r.returncode}, case 1 ran: {ran_on}; "
                            f"the {kind} should have ended the run")
    s.record("resident launch: a refusal case whose line names the refusing file, and a case "
             "with todo=1 that reaches an XT_TODO, end only that case (both ranks' ERROR or "
             "TODO on record, the next case runs, the stopped case's block no longer "
             "counted); naming another file, or without todo=1, the run ends (controls)",
             not problems, problems)

    # After a case of test 1 stopped at its XT_TODO, test 1's next case is skipped on every
    # rank (its own launch would have ended), and the launch goes on; test 2's runs (above).
    d = fresh("resident_todo_skip")
    cdir = os.path.join(d, "todo")
    for k in (0, 1, 2):
        os.makedirs(os.path.join(cdir, f"c{k}"))
    with open(os.path.join(cdir, "cases.txt"), "w") as f:
        f.write("case 0 np=2 fn=todo stop=1 todo=1\ncase 1 np=2 fn=todo todo=1\n"
                "case 2 np=2 fn=todo todo=2\n")
    with open(os.path.join(d, "list.txt"), "w") as f:
        f.write(f"todo {os.path.abspath(cdir)} 2\n")
    r = mpirun(2, [os.path.join(TESTS_BIN, "test_resident"), "--out", d, "--resident",
                   os.path.join(d, "list.txt")])
    ran = [all(records.read_record(records.outputs_path(os.path.join(cdir, f"c{k}"), 0, r_))
               is not None for r_ in range(2)) for k in (1, 2)]
    s.record("resident launch: once a case of a test stopped at its XT_TODO (todo=<test>), "
             "every rank skips that test's other cases, and runs the next test's",
             r.returncode == 0 and ran == [False, True],
             [f"exit {r.returncode}, case 1 (test 1) ran: {ran[0]}, case 2 (test 2) ran: "
              f"{ran[1]}"] + tail(r.output, 6))


def selftest(s):
    s.section("libxt")
    for t in (test_npy, test_pmpi, test_strict, test_watchdog, test_todo, test_crash,
              test_heap_damage, test_cases, test_resident, test_mem, test_trace, test_watch, test_cuda,
              test_emu, test_nn):
        t(s)
