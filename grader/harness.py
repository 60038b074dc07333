"""Running an exercise's tests and turning what the ranks wrote into verdicts.

One launch runs the cases of several tests (grader/spec.py) in one mpirun:
the program reads DIR/cases.txt, runs every case on every group of np ranks
of an 8-rank world, and writes outputs and MPI records per rank (libxt's case
mode, common/case_run.c). If the launch dies (a TODO, a crash, a deadlock), the
tests after the one that died run again in a fresh launch. A test whose cases
must end the run with the program's own error (spec.Test.refusal) runs each
case in a launch of its own, after the others.

Verdicts: OK, WRONG, RULE, TODO, CRASH, DEADLOCK, TIMEOUT, BUILD (and SKIPPED,
not counted). A test's verdict is that of its first failing case; every case
the launch ran is checked, so the report can say which cases failed
(grader/pattern.py), and what the failing case's ranks printed (each rank's
stdout and stderr during a case, c<k>/g<g>.r<r>.out.txt).

An exercise numbers its cases (numbered_cases): the same number in every launch
(case <k> in cases.txt, directory c<k>/), in the report and in CASE=, which
grades one case alone; make debug (grader/debug.py) runs one under a debugger.
"""

import dataclasses
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
from typing import Callable, List, Optional

import numpy as np

import launch
import pattern
import spec
from records import keep_expected, read_record, read_status, write_inputs

# --------------------------------------------------------------------- results

@dataclasses.dataclass
class Failure:
    kind: str
    case: Optional[spec.Case]
    lines: List[str]  # the first is the headline
    group: Optional[int] = None  # the copy of the case (sub-communicator) it was seen in
    # What to try, from the check that failed: its own hint, or the cause the grader
    # sees; None: the test's hint.
    hint: Optional[str] = None
    # Memory damaged out of sight (a libxt guard zone, glibc's heap): the line that did it is
    # AddressSanitizer's to find, and the report says how (grade.py, make grade SAN=1).
    memory_damage: bool = False


@dataclasses.dataclass
class CaseOutcome:
    """How one case of a test ended."""
    case: spec.Case
    verdict: str  # OK, a failure's kind, or NOT RUN
    reason: str = ""  # the failure's headline
    cdir: str = ""  # the case's directory (its outputs, records and printed lines)
    group: Optional[int] = None  # the group that failed, when known


@dataclasses.dataclass
class TestResult:
    test: spec.Test
    verdict: str = "OK"
    lines: List[str] = dataclasses.field(default_factory=list)
    seconds: float = 0.0
    cases_run: int = 0
    cases_failed: int = 0
    launch_dir: str = ""
    case: Optional[spec.Case] = None  # the case the verdict comes from, if one
    cases: List[CaseOutcome] = dataclasses.field(default_factory=list)
    memory_damage: bool = False  # see Failure

    @property
    def points(self):
        return self.test.points if self.verdict == "OK" else 0


# ----------------------------------------------------------------- comparisons


def fmt_value(v):
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.9g}"
    return str(v)


# The float that fills fresh memory of the emulated device (common/cuda_emu.cpp, FRESH).
EMU_FRESH = 0x7fdead00
# What fills a pending receive's buffer in strict mode, every 4 bytes (common/xt_internal.h,
# XTI_RECV_POISON): the message lands there only when its request completes.
RECV_POISON = 0x7fdeadee
POISON_READ = "this value is the poison of a receive buffer read before its wait"


def is_recv_poison(value):
    """Whether one element (a NumPy scalar of any dtype) holds the receive poison: its bytes,
    a float32 poison widened to float64, or 8 bytes of it."""
    raw = np.asarray(value).reshape(1)
    if raw.itemsize == 4:
        return int(raw.view("u4")[0]) == RECV_POISON
    if raw.itemsize == 8:
        if int(raw.view("u8")[0]) == (RECV_POISON << 32) | RECV_POISON:
            return True
        if raw.dtype == np.float64 and np.isnan(raw[0]):
            return int(raw.astype(np.float32).view("u4")[0]) == RECV_POISON
    return False


def compare(name, expected, got, tol, rank, locate=None):
    """None if got matches expected within tol, else a WRONG message. locate(name, index),
    if given, says where a flat index lies (a shard's owner), or returns None."""
    expected = np.asarray(expected)
    if got is None:
        return f"rank {rank} wrote no '{name}'"
    if got.shape != expected.shape:
        return (f"rank {rank} '{name}' has {spec.amount(got.size, ' elements')}, "
                f"expected {expected.size}")
    if expected.size == 0:
        return None
    e = expected.astype(np.float64) if spec.is_float(expected.dtype) or spec.is_float(got.dtype) \
        else expected.astype(np.int64)
    g = got.astype(e.dtype)
    if spec.is_float(e.dtype):
        with np.errstate(invalid="ignore"):  # inf - inf: an equal infinity is no error
            err = np.where(g == e, 0.0, np.abs(g - e))
        bad = ~(err <= tol)  # NaN counts as bad
        bad |= np.isnan(g) & ~np.isnan(e)
    else:
        err = np.abs(g - e)
        bad = g != e
    if not bad.any():
        return None
    idx = int(np.flatnonzero(bad)[0])
    nbad = int(bad.sum())
    maxerr = err[bad]
    maxerr = np.nanmax(maxerr) if np.isfinite(maxerr).any() else float("nan")
    where = f"[{idx}]" if expected.ndim <= 1 else str(np.unravel_index(idx, expected.shape))
    place = locate(name, idx) if locate else None
    if place:
        where += f" ({place})"
    msg = (f"rank {rank} '{name}'{where} expected {fmt_value(expected.flat[idx])} "
           f"got {fmt_value(got.flat[idx])} ({nbad} of {expected.size} wrong, "
           f"max error {fmt_value(maxerr)})")
    raw = np.ascontiguousarray(got).reshape(-1)[idx:idx + 1]
    if is_recv_poison(raw):
        msg += (f"; {POISON_READ}: a nonblocking receive's buffer holds the message only once "
                "MPI_Wait or MPI_Test completes it")
    elif spec.is_float(e.dtype) and np.isnan(g.flat[idx]) and not np.isnan(e.flat[idx]):
        # libxt's xt_free fills a block with 0xff bytes, a NaN as float or double; the
        # NaN of arithmetic (inf - inf, 0 x inf) has other bits.
        if raw.view(f"u{raw.itemsize}")[0] == (1 << 8 * raw.itemsize) - 1:
            msg += "; freed xt_alloc memory reads as NaN: is a buffer read after its xt_free?"
        elif raw.itemsize == 4 and raw.view("u4")[0] == EMU_FRESH:
            msg += ("; this NaN is the emulated device's fresh memory: a cudaMalloc or "
                    "cudaMallocHost block read before anything wrote it (a pinned slot sent "
                    "before its cudaMemcpyAsync had run?)")
        else:
            msg += ("; a NaN from arithmetic: 0/0 (a mean over nothing?), or inf - inf or "
                    "0 x inf, often after an exp or a square that overflowed")
    return msg


# -------------------------------------------------------------------- helpers


def outputs_of(cdir, g, np_):
    """Each rank's arrays by name: its outputs (an output overwrites the input file of
    the same name)."""
    return [{f[len(f"g{g}.r{r}."):-4]: np.load(os.path.join(cdir, f))
             for f in sorted(os.listdir(cdir))
             if f.startswith(f"g{g}.r{r}.") and f.endswith(".npy")
             and not f.endswith(".expected.npy")}
            for r in range(np_)]


def scratch_dir(cdir, g):
    """Group g's xt_case_scratch_dir in case directory cdir, as common/case.c makes it:
    the files a program left there outlive the launch, for the grader to read."""
    return os.path.join(cdir, f"g{g}.scratch")


# A launch that spends this long outside its cases is slow to start.
SLOW_START = 5.0


def slow_start_note(seconds, hostname, resolves):
    """The one line a report adds when launches were slow to start, or ""."""
    if seconds < SLOW_START:
        return ""
    why = (f"the usual cause is a host name that does not resolve: '{hostname}' does not "
           f"(add '127.0.1.1 {hostname}' to /etc/hosts)" if not resolves else
           "the machine may be busy, or MPI slow to find its network (docs/setup.md, Slow "
           "starts)")
    return (f"note: a launch spent {seconds:.0f} s outside its cases, starting the ranks "
            f"and MPI: {why}")


def stable_seed(*parts):
    h = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


def groups_of(world, np_):
    return world // np_


def short_backtrace(lines, binary, source):
    """The exercise's own frames of a crash backtrace, innermost first."""
    frames = []
    for line in lines:
        m = re.match(r"(.*)\((\w*)\+(0x[0-9a-f]+)\)", line)
        if not m or os.path.basename(m.group(1)) != os.path.basename(binary):
            continue
        for func, where in where_in_source(binary, m.group(2), m.group(3)):
            if where.startswith(source + ":"):
                frames.append(f"{func}() at {where}")
    return frames


# What libxt notes of a case's requests (common/requests.c) and of device work not waited for
# (common/cuda.cu, on the emulated device), each a RULE.
REQUEST_NOTES = ("RACE", "PENDING", "INFLIGHT", "FREED", "UNWAITED")
# A code address in a note, "{prefix|module(symbol+0xoff)}" (requests.c, site_token).
SITE = re.compile(r"\{([^{}|]*)\|([^{}]*)\}")


def resolve_sites(text, binary, source):
    """A note with each code address as prefix + source:line where it lies in the exercise's
    own file, or without it where it does not (libxt's code, an unknown address)."""
    def one(m):
        frame = re.fullmatch(r"(.*)\((\w*)\+(0x[0-9a-f]+)\)", m.group(2))
        if frame and os.path.basename(frame.group(1)) == os.path.basename(binary):
            for _, where in where_in_source(binary, frame.group(2), frame.group(3)):
                if where.startswith(source + ":"):
                    return m.group(1) + where
        return ""
    return SITE.sub(one, text)


def where_in_source(binary, func, off):
    """[(function, file:line)] for func+off in binary, inlined callers included."""
    try:
        base = 0
        if func:
            out = subprocess.run(["nm", binary], capture_output=True, text=True, timeout=10).stdout
            for line in out.splitlines():
                p = line.split()
                if len(p) == 3 and p[2] == func:
                    base = int(p[0], 16)
                    break
            else:
                return []
        addr = base + int(off, 16) - 1  # a return address points just after its call
        out = subprocess.run(["addr2line", "-f", "-i", "-e", binary, hex(addr)],
                             capture_output=True, text=True, timeout=10).stdout.splitlines()
        root = os.getcwd() + os.sep
        pairs = []
        for name, loc in zip(out[0::2], out[1::2]):
            if loc.startswith("??"):
                continue
            path, _, line = loc.partition(":")
            path = path[len(root):] if path.startswith(root) else path
            pairs.append((name.strip(), f"{path}:{line.split()[0]}"))
        return pairs
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return []


# ---------------------------------------------------------------------- launch


class Exercise:
    def __init__(self, lecture, name, source, binary, tests):
        self.lecture = lecture
        self.name = name
        self.source = source
        self.binary = binary
        self.tests = tests


def numbered_cases(tests, seed):
    """{test name: its Cases}, each numbered in the exercise: the cases of tests (all of one
    exercise's, in order) counted one after another. The number names a case in cases.txt,
    its directory c<number>/ and CASE=, and stays the same whatever part is graded."""
    out, n = {}, 0
    for test in tests:
        rng = np.random.default_rng(stable_seed(seed, test.exercise, test.name, "cases"))
        cases = spec.make_cases(test, test.cases(rng))
        for c in cases:
            c.number = n + c.index
        n += len(cases)
        out[test.name] = cases
    return out


@dataclasses.dataclass
class Debug:
    """make debug: one case at its own np, no watchdog, world rank `rank` waiting for a
    debugger (libxt's --debug-rank), the output shown as it comes."""
    rank: int
    breakpoint: str = ""  # the function the gdb command it prints breaks in
    show: Callable = print  # where each line of the run's output goes, as it comes


# A run under a debugger has no time limit but this one, so that nothing outlives a
# forgotten session.
DEBUG_HOURS = 24


class Runner:
    """Grades the tests of one exercise: as few launches as the failures allow.

    exercise.tests are all the exercise's tests (they number its cases); run() grades
    some. With only (CASE=), just the case of that number, in a world as large as the
    exercise's grade uses; with debug, that case under a debugger."""

    def __init__(self, exercise, seed, work_dir, watchdog=10.0, max_np=8, only=None,
                 debug=None, verbose=False, san=False, test_watchdogs=True):
        self.ex = exercise
        self.seed = seed
        self.work_dir = work_dir
        self.watchdog = watchdog
        # A test's own, longer watchdog (a GPU's slow start), unless the device is emulated.
        self.test_watchdogs = test_watchdogs
        self.max_np = max_np
        self.start_seconds = 0.0  # the most a launch spent outside its cases
        self.only = only
        self.debug = debug
        self.numbered = numbered_cases(exercise.tests, seed) if exercise else {}
        self.verbose = verbose  # list every failing case under the first
        self.checked_group = None  # the group check_case looked at last
        self.san = san  # built with AddressSanitizer: its settings in every launch
        self.last_launch_dir = ""  # where the latest launch's cases are
        # grade.py --margins: test name -> (worst |error| / tolerance, case label, output)
        self.margins = {}


    def watchdog_of(self, test):
        return (test.watchdog if self.test_watchdogs else None) or self.watchdog

    def cases_of(self, test):
        return [c for c in self.numbered[test.name]
                if c.np <= self.max_np and (self.only is None or c.number == self.only)]

    def run(self, tests):
        results = {}
        pending = [t for t in tests if not t.refusal]
        self.launches = 0
        if os.path.isdir(self.work_dir):
            shutil.rmtree(self.work_dir, ignore_errors=True)
        while pending:
            done, pending = self.launch(pending, self.next_launch_dir())
            results.update(done)
        for test in tests:
            if test.refusal:
                results[test.name] = self.refusals(test)
        out = [results[t.name] for t in tests]
        self.keep_summary(out)
        return out

    def keep_summary(self, results):
        """work_dir/summary.json: the seed and each failed test's case, for make debug."""
        failed = [{"case": r.case.number, "test": r.test.name, "verdict": r.verdict,
                   "np": r.case.np, "label": r.case.label}
                  for r in results if r.case is not None and r.verdict != "OK"]
        os.makedirs(self.work_dir, exist_ok=True)
        with open(os.path.join(self.work_dir, "summary.json"), "w") as f:
            json.dump({"seed": self.seed, "exercise": self.ex.name, "lecture": self.ex.lecture,
                       "source": self.ex.source, "only": self.only, "failed": failed}, f,
                      indent=1)

    def graded_world(self, plan):
        """The world a launch of plan runs in: its largest np; for CASE=, the world the
        exercise's whole grade starts with, so that the case meets the same neighbours
        (its other groups); under a debugger, the case's own np."""
        world = max((c.np for _, c, _ in plan), default=1)
        if self.debug is not None:
            return world
        if self.only is not None and not any(t.refusal for t, _, _ in plan):
            world = max([world] + [c.np for t in self.ex.tests if not t.refusal
                                   for c in self.numbered[t.name] if c.np <= self.max_np])
        return world

    def next_launch_dir(self):
        self.launches += 1
        return os.path.join(self.work_dir, f"launch{self.launches}")

    def start(self, plan, launch_dir):
        """Writes the inputs and cases.txt of plan, [(test, case, its number)], and runs
        them in one mpirun: (world size, {number: inputs per group}, result, status lines)."""
        os.makedirs(launch_dir, exist_ok=True)
        world = self.graded_world(plan)
        inputs = {}
        lines = ["# xt cases: case <k> np=<n> fn=<function> key=value ..."]
        for test, case, k in plan:
            cdir = os.path.join(launch_dir, f"c{k}")
            os.makedirs(cdir, exist_ok=True)
            per_group = []
            for g in range(groups_of(world, case.np)):
                rng = np.random.default_rng(stable_seed(self.seed, test.exercise, test.name,
                                                        case.index, g))
                inp = test.inputs(case, rng)
                per_group.append(inp)
                write_inputs(cdir, g, inp)
            inputs[k] = per_group
            params = " ".join(f"{key}={val}" for key, val in case.params.items())
            wd = 0 if self.debug else self.watchdog_of(test)
            lines.append(f"case {k} np={case.np} {params} watchdog={wd:g}")
        with open(os.path.join(launch_dir, "cases.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")

        argv = [os.path.abspath(self.ex.binary), "--cases", os.path.abspath(launch_dir)]
        if self.debug:
            argv += ["--watchdog", "0", "--debug-rank", str(self.debug.rank)]
            argv += ["--debug-break", self.debug.breakpoint] if self.debug.breakpoint else []
        cmd = launch.mpirun_command(world, argv)
        extra = launch.san_env() if self.san else {}
        if self.san:
            # AddressSanitizer's reports in files of their own, not among what the ranks
            # printed; libxt's callback puts each in its rank's status file too.
            extra["ASAN_OPTIONS"] += ":log_path=" + os.path.join(os.path.abspath(launch_dir),
                                                                 "asan")
        with open(os.path.join(launch_dir, "run.sh"), "w") as f:
            env = "".join(f"{k}={v} " for k, v in extra.items())
            f.write("#!/bin/sh\n# Runs these cases again, as the grader did.\n"
                    f"cd {os.getcwd()} && {env}{launch.shell_line(cmd)}\n")
        output = os.path.join(launch_dir, "output.txt")
        self.last_launch_dir = launch_dir
        if self.debug:
            res = debug_run(cmd, output, self.debug.show, launch.mpi_env(extra))
        else:
            max_wd = max((self.watchdog_of(t) for t, _, _ in plan),
                         default=self.watchdog)
            res = launch.run(cmd, timeout=60 + 2 * max_wd, env=launch.mpi_env(extra),
                             log_path=output)
        status = read_status(launch_dir, world)
        return world, inputs, res, status

    # One mpirun for the pending tests; returns (results, tests to run again).
    def launch(self, tests, launch_dir):
        plan = []  # (test, case, its number)
        for test in tests:
            for case in self.cases_of(test):
                plan.append((test, case, case.number))
        world, inputs, res, status = self.start(plan, launch_dir)

        results, rerun = {}, []
        dead_case = None  # global index of the case the launch died in
        in_cases = 0.0  # seconds the cases took, each its slowest rank's
        for test in tests:
            r = TestResult(test, launch_dir=launch_dir)
            first: Optional[Failure] = None
            died_here = False
            outcomes = []
            for t, case, k in plan:
                if t is not test:
                    continue
                cdir = os.path.join(launch_dir, f"c{k}")
                if dead_case is not None:
                    outcomes.append(CaseOutcome(case, "NOT RUN", cdir=cdir))
                    continue
                recs = self.read_case(launch_dir, k, world, case.np)
                if recs is None:  # the launch ended inside this case
                    dead_case = k
                    died_here = True
                    death = self.classify_death(res, status, case, k, world)
                    outcomes.append(CaseOutcome(case, death.kind, death.lines[0], cdir,
                                                death.group))
                    if first is None:
                        first = death
                    elif death.kind != first.kind:
                        first.lines.append(f"(then, at {case.label}: {death.kind}, which "
                                           f"ended the run)")
                    r.cases_failed += 1
                    continue
                r.cases_run += 1
                took = max((rec.seconds for g in recs for rec in g), default=0.0)
                r.seconds += took
                in_cases += took
                fail = self.check_case(test, case, k, recs, inputs[k], launch_dir)
                if fail:
                    fail.group = self.checked_group
                    r.cases_failed += 1
                    if first is None:
                        first = fail
                outcomes.append(CaseOutcome(case, fail.kind, fail.lines[0], cdir, fail.group)
                                if fail else CaseOutcome(case, "OK", cdir=cdir))
            if dead_case is not None and not died_here and r.cases_run == 0 and first is None:
                rerun.append(test)  # never reached: run it again in a new launch
                continue
            # Every case finished, yet the run failed (in MPI_Finalize, say): the
            # last test is the one whose code ran last.
            if first is None and dead_case is None and res.returncode != 0 and test is tests[-1]:
                first = self.classify_death(res, status, None, None, world)
            r.cases = outcomes
            if first:
                r.verdict = first.kind
                r.lines = first.lines
                r.case = first.case
                r.memory_damage = first.memory_damage
                r.lines += self.which_failed(r, first)
                hint = first.hint or spec.hint_for(test, first.kind)
                if hint and first.kind in ("WRONG", "RULE", "DEADLOCK"):
                    r.lines.append(hint)
            r.lines += self.printed(r, first)
            results[test.name] = r
        if dead_case is None and res.returncode == 0:
            # What no case accounts for: starting the ranks and MPI, set-up, finalize.
            # Only a launch that ran to its end says anything about starting.
            self.start_seconds = max(self.start_seconds, res.seconds - in_cases)
        return results, rerun

    def which_failed(self, r, first, not_run_why="the run had ended"):
        """The line under the first failing case that says which cases failed and which
        passed (grader/pattern.py), and with --verbose each failing case's headline."""
        if first.case is None or first.kind == "TODO" or not r.cases:
            return []
        test = r.test
        rows = [(case_features(o.case), None if o.verdict == "NOT RUN" else o.verdict != "OK")
                for o in r.cases]
        kinds = [o.verdict for o in r.cases if o.verdict not in ("OK", "NOT RUN")]
        line = pattern.summary(rows, kinds, not_run_why)
        out = [f"({line})"] if line else []
        if self.verbose and len(kinds) > 1:
            out.append(f"every failing case of {test.name} (its CASE= number, then why):")
            out += [f"  #{o.case.number} {o.reason}" for o in r.cases
                    if o.verdict not in ("OK", "NOT RUN")]
        return out

    def printed(self, r, first):
        """What the ranks printed: under a failure, the first lines the failing case's
        ranks printed and where the rest are; for a test that passed, where its cases'
        lines went. Empty when they printed nothing."""
        if first is not None and first.case is not None:
            mine = next((o for o in r.cases if o.case is first.case), None)
            if mine:
                shown = printed_lines(mine.cdir, first.group, first.case.np)
                if shown:
                    return shown
        files = {o.cdir: output_files(o.cdir) for o in r.cases if o.cdir}
        files = {d: fs for d, fs in files.items() if fs}
        if not files:
            return []
        lines = sum(count_lines(f) for fs in files.values() for f in fs.values())
        dirs = sorted(files)
        parents = {os.path.dirname(d) for d in dirs}
        where = (os.path.relpath(dirs[0]) if len(dirs) == 1 else
                 os.path.join(os.path.relpath(parents.pop()), "c<case>") if len(parents) == 1
                 else os.path.join(os.path.relpath(self.work_dir), "launch<n>", "c0"))
        return [f"printed {spec.amount(lines, ' lines')} as its cases ran (not graded), in "
                f"{where}/g<group>.r<rank>{OUTPUT_SUFFIX}"]

    def refusals(self, test):
        """A test whose cases offer input the program must refuse: each case ends its
        launch (xt_die aborts every rank), so each has a launch of its own; the first
        case that is not refused as it should be gives the verdict."""
        r = TestResult(test)
        fail = None
        for case in self.cases_of(test):
            if fail:
                r.cases.append(CaseOutcome(case, "NOT RUN"))
                continue
            r.launch_dir = self.next_launch_dir()
            k = case.number
            world, inputs, res, status = self.start([(test, case, k)], r.launch_dir)
            r.cases_run += 1
            r.seconds += res.seconds  # the case has no record when it is refused
            fail = self.refused(test, case, k, world, inputs[k], res, status, r.launch_dir)
            cdir = os.path.join(r.launch_dir, f"c{k}")
            r.cases.append(CaseOutcome(case, fail.kind, fail.lines[0], cdir, fail.group)
                           if fail else CaseOutcome(case, "OK", cdir=cdir))
            if fail:
                r.cases_failed = 1
                r.verdict, r.lines, r.case = fail.kind, fail.lines, case
                r.memory_damage = fail.memory_damage
                r.lines += self.which_failed(r, fail, "each needs a launch of its own, and "
                                                      "grading stops at the first failure")
                hint = fail.hint or spec.hint_for(test, fail.kind)
                if hint and fail.kind in ("WRONG", "RULE"):
                    r.lines.append(hint)
        r.lines += self.printed(r, fail)
        return r

    def refused(self, test, case, k, world, inputs, res, status, launch_dir):
        """None if the launch's one case, number k, ended in an error raised in the
        exercise's file (xt_die, XT_CHECK) that test.refusal accepts; else the Failure. An
        error raised elsewhere (libxt, the lecture's code) is no refusal: classify_death
        reports it."""
        cdir = os.path.join(launch_dir, f"c{k}")
        mine = sorted((s for s in status if s.kind == "ERROR" and s.case == k
                       and s.text.startswith(self.ex.source + ":")), key=lambda s: s.us)
        if mine:
            s = mine[0]
            text = s.text[len(self.ex.source) + 1:].split(": ", 1)[-1]
            msg = test.refusal(case, inputs[max(s.group, 0)], text,
                               scratch_dir(cdir, max(s.group, 0)))
            return (Failure("WRONG", case, [f"{case.label}: rank {s.rank}: {msg}"], s.group)
                    if msg else None)
        if status or self.read_case(launch_dir, k, world, case.np) is None:
            return self.classify_death(res, status, case, k, world)
        msg = test.refusal(case, inputs[0], None, scratch_dir(cdir, 0))
        return Failure("WRONG", case, [f"{case.label}: {msg}"])

    def read_case(self, launch_dir, k, world, np_):
        """Records per group per rank, or None if any rank did not finish."""
        cdir = os.path.join(launch_dir, f"c{k}")
        out = []
        for g in range(groups_of(world, np_)):
            recs = []
            for r in range(np_):
                rec = read_record(os.path.join(cdir, f"g{g}.r{r}.mpi.txt"))
                if rec is None:
                    return None
                recs.append(rec)
            out.append(recs)
        return out

    def check_case(self, test, case, k, recs, inputs, launch_dir):
        cdir = os.path.join(launch_dir, f"c{k}")
        label = case.label
        for g, group in enumerate(recs):
            self.checked_group = g
            inp = inputs[g]
            # Harness notes first: memory written out of bounds, inputs changed.
            for r, rec in enumerate(group):
                for kind, text in rec.notes:
                    if kind == "WRONG":
                        return Failure("WRONG", case, [f"{label}: rank {r} {text}"],
                                       memory_damage=bool(ZONE_NOTE.match(text)))
            # A buffer used while a request owned it, a send buffer changed in flight, a
            # request never completed or freed active: a RULE that explains wrong values,
            # so it is reported before them.
            for r, rec in enumerate(group):
                for kind, text in rec.notes:
                    if kind in REQUEST_NOTES:
                        text = resolve_sites(text, self.ex.binary, self.ex.source)
                        return Failure("RULE", case, [f"{label}: rank {r} {text}"])
            if test.files:
                broken = test.files(case, inp, outputs_of(cdir, g, case.np),
                                    scratch_dir(cdir, g))
                if broken:
                    return Failure("WRONG", case, [f"{label}: {broken[0][1]}"])
            if test.check and test.check_first:
                fail = self.run_check(test, case, inp, cdir, g, label)
                if fail:
                    return fail
            expected = test.reference(case, inp)
            wrong = []  # (rank, name, message, expected, got) of every wrong output
            for r in range(case.np):
                for name, exp in expected[r].items():
                    path = os.path.join(cdir, f"g{g}.r{r}.{name}.npy")
                    got = np.load(path) if os.path.exists(path) else None
                    tol = test.tolerance(case, inp, name, r) if test.tolerance else 0.0
                    if isinstance(tol, spec.Relative):
                        tol = tol.bound(exp)
                    elif isinstance(tol, spec.OfScale):
                        tol = tol.bound([e[name] for e in expected if name in e])
                    locate = ((lambda n, i, r=r: test.locate(case, n, i, r)) if test.locate
                              else None)
                    msg = compare(name, exp, got, tol, r, locate)
                    if msg:
                        wrong.append((r, name, msg, exp, got))
                    else:
                        self.note_margin(test, label, name, exp, got, tol)
            if wrong:
                r, name, msg, exp, got = wrong[0]
                keep_expected(cdir, g, expected)
                # The poison says why; a guess at the arithmetic would mislead.
                hint = None if POISON_READ in msg else (
                    world_hint(group) or agreeing_ranks_hint(case, name, expected, cdir, g))
                lines = [f"{label}: {msg}"]
                if POISON_READ not in msg and got is not None:
                    lines += relation(case, name, exp, got, r, expected, inp)
                lines += other_findings(wrong, expected)
                lines += [f"also: {text}" for text in broken_rules(test, case, inp, group)]
                return Failure("WRONG", case, lines, hint=hint or None)
            if test.check and not test.check_first:
                fail = self.run_check(test, case, inp, cdir, g, label)
                if fail:
                    return fail
            for r, rec in enumerate(group):
                for kind, text in rec.notes:
                    if kind == "RULE":
                        return Failure("RULE", case, [f"{label}: rank {r} {text}"])
            for rule in test.rules:
                broken = rule(case, inp, group)
                if broken:
                    # Lines after the first are shown as they are: a picture, '|' first.
                    first, *more = broken[0][1].split("\n")
                    return Failure("RULE", case, [f"{label}: {first}"] + more,
                                   hint=getattr(rule, "hint", None))
        return None

    def note_margin(self, test, label, name, exp, got, tol):
        """Keep the worst passing |error| / tolerance of a float output (grade --margins:
        how close the solutions come to each test's bound, to measure a tolerance by)."""
        exp = np.asarray(exp, dtype=np.float64)
        tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), exp.shape)
        if not exp.size or not spec.is_float(got.dtype):
            return
        use = (tol > 0) & np.isfinite(exp)
        if not use.any():
            return
        ratio = float((np.abs(got.astype(np.float64)[use] - exp[use]) / tol[use]).max())
        if ratio > self.margins.get(test.name, (-1.0,))[0]:
            self.margins[test.name] = (ratio, label, name)

    def run_check(self, test, case, inp, cdir, g, label):
        broken = test.check(case, inp, outputs_of(cdir, g, case.np))
        if broken:
            return Failure("WRONG", case, [f"{label}: {broken[0][1]}"],
                           hint=getattr(test.check, "hint", None))
        return None

    def messages(self, res, k):
        """Everything a dying launch said: mpirun's output, what case k's ranks printed
        (glibc's heap messages land there: during a case a rank's stderr is its case
        file) and AddressSanitizer's log files."""
        files = []
        if self.last_launch_dir:
            if k is not None:
                files += output_files(os.path.join(self.last_launch_dir, f"c{k}")).values()
            files += sorted(glob.glob(os.path.join(self.last_launch_dir, "asan.*")))
        return "\n".join([res.output] + [read_text(path) for path in files])

    def classify_death(self, res, status, case, k, world):
        label = case.label if case else "after the last case"
        if k is not None:
            mine = [s for s in status if s.case == k]
        else:
            mine = list(status)
        todo = [s for s in mine if s.kind == "TODO"] or [s for s in status if s.kind == "TODO"]
        if todo:
            return Failure("TODO", case, [todo[0].text])
        crash = [s for s in mine if s.kind in ("CRASH", "ERROR")] or \
                [s for s in status if s.kind in ("CRASH", "ERROR")]
        if crash:
            s = min(crash, key=lambda line: line.us)  # the first failure, usually the cause
            if s.asan:
                return Failure("CRASH", case, asan_report(s.asan, self.ex.binary, self.ex.source,
                                                          f"{label}: rank {s.rank}: {s.text}"),
                               s.group)
            lines = [f"{label}: rank {s.rank}: {s.text}"]
            frames = short_backtrace(s.backtrace, self.ex.binary, self.ex.source)
            if frames:
                lines.append("in " + " <- ".join(frames[:4]))
            glibc = heap_damage(s, self.messages(res, k))
            if glibc is not None:
                lines.append(f"glibc: {glibc or 'its allocator aborted'}: the heap was damaged "
                             f"earlier, by a write outside a malloc'd block (or a double free)")
            return Failure("CRASH", case, lines, s.group, memory_damage=glibc is not None)
        hang = [s for s in mine if s.kind == "HANG"]
        if hang:
            return self.deadlock(case, hang, self.watchdog_of(case.test) if case else
                                 self.watchdog, [s for s in mine if s.kind == "LEDGER"])
        asan = asan_in_output(self.messages(res, k))
        if asan:  # before libxt could write a status file
            return Failure("CRASH", case, asan_report(asan, self.ex.binary, self.ex.source,
                                                      f"{label}: AddressSanitizer"))
        if res.timed_out:
            return Failure("TIMEOUT", case, [f"{label}: the run did not finish within "
                                             f"{res.seconds:.0f} s and no rank reported why"])
        return Failure("CRASH", case, [f"{label}: the run ended early (exit code "
                                       f"{res.returncode}) without a report"]
                       + mpirun_reason(res.output))

    def deadlock(self, case, hang, limit, led=()):
        # Group whose ranks are still inside the function: the one that hangs.
        by_group = {}
        for s in hang:
            if s.group >= 0:
                by_group.setdefault(s.group, []).append(s)
        stuck = {g: ss for g, ss in by_group.items()
                 if any(not s.text.startswith(("done:", "idle:")) for s in ss)}
        group = min(stuck) if stuck else (min(by_group) if by_group else None)
        ranks = sorted(by_group.get(group, hang), key=lambda s: s.rank)
        in_mpi = any(s.text.startswith("mpi:") for s in ranks)
        label = case.label if case else "after the last case"
        if in_mpi:
            head = f"{label}: no progress for {limit:g} s; the ranks were blocked in:"
        else:
            head = f"{label}: still running after {limit:g} s, no rank inside MPI:"
        blocked = [(s.rank, s.text.partition(": ")[2]) for s in ranks]
        ledger = read_ledger([s for s in led if s.group == group],
                             {s.world: s.rank for s in ranks})
        if ledger and not ledger.whole:
            ledger = None  # an overflowed ledger would show received messages as missing
        lines, hint = blocked_explanation(blocked, in_a_case=True, ledger=ledger)
        return Failure("DEADLOCK" if in_mpi else "TIMEOUT", case, [head] + lines, group,
                       hint=hint)


BLOCKED_SEND = re.compile(r"MPI_(?:I?[sbr]?send|Ssend|Sendrecv(?:_replace)?)[( ]to (\d+), "
                          r"tag (\d+), (\d+ B)", re.I)
BLOCKED_RECV = re.compile(r"(?:MPI_(?:I?m?recv|I?m?probe)[( ]|B; )from (\d+|any), tag (\d+|any)",
                          re.I)


COMM_NAMES = {"case": "", "world": "MPI_COMM_WORLD", "self": "MPI_COMM_SELF",
              "other": "another communicator"}


def comm_words(kind):
    """', on MPI_COMM_WORLD' for a ledger's communicator kind; '' for the case's own."""
    name = COMM_NAMES.get(kind, f"the {kind.partition('@')[2]} group" if "@" in kind else kind)
    return f", on {name}" if name else ""


@dataclasses.dataclass
class Ledger:
    """What the ranks of a stopped case sent, received and still wait for (libxt's LEDGER
    status lines, one per rank), with peers as case ranks where they are in the case."""
    sent: dict  # (rank, comm kind, peer, tag) -> (messages, the last one's bytes)
    received: dict  # (rank, comm kind, peer, tag) -> messages
    waiting: list  # (rank, comm kind, peer | "any", tag | "any", bytes, the call)
    whole: bool  # no rank's ledger overflowed


def read_ledger(lines, ranks):
    """The Ledger of status lines `lines` (kind LEDGER), ranks: {world rank: case rank}; None
    when no rank wrote one. A peer outside the case keeps its world rank, as 'w<n>'."""
    if not lines:
        return None
    led = Ledger({}, {}, [], True)

    def peer(w):
        return "any" if w in ("any", "-1") else ranks.get(int(w), f"w{w}")
    for line in lines:
        for item in filter(None, line.text.split(";")):
            f = item.split()
            if f == ["+"]:
                led.whole = False
            elif len(f) == 7 and f[0] in "SR":
                key = (line.rank, f[1], peer(f[2]), int(f[3]))
                if f[0] == "S":
                    led.sent[key] = (int(f[4]), int(f[6]))
                else:
                    led.received[key] = int(f[4])
            elif len(f) == 6 and f[0] == "W":
                led.waiting.append((line.rank, f[1], peer(f[2]),
                                    "any" if f[3] == "any" else int(f[3]), int(f[4]), f[5]))
    return led


def unreceived(ledger):
    """[(sender, receiver, tag, comm kind, messages, the last one's bytes)]: the messages sent
    in the case that their receiver never received, by the ranks' own counts. MPI matches the
    messages of one sender, tag and communicator in the order they were sent, so those not
    received are the last ones."""
    out = []
    for (src, comm, dst, tag), (msgs, last) in sorted(ledger.sent.items(), key=str):
        if not isinstance(dst, int):
            continue  # outside the case: MPI_COMM_WORLD's own report says so
        got = ledger.received.get((dst, comm, src, tag), 0)
        if msgs > got:
            out.append((src, dst, tag, comm, msgs - got, last))
    return out


def unmatched_pairs(blocked, ledger=None):
    """Lines naming each message sent and never received, beside the receive its receiver
    waits for from that rank, if any, where their tags or communicators differ: the two can
    never meet. Without a ledger (a demo), the blocked sends stand for what was sent."""
    recvs = [(r, "world" if "on MPI_COMM_WORLD" in what else "case",
              m[1] if m[1] == "any" else int(m[1]), m[2] if m[2] == "any" else int(m[2]))
             for r, what in blocked for m in BLOCKED_RECV.finditer(what)
             if "group" not in what and "mesh's own" not in what]
    if ledger is None:
        sends = [(r, int(m[1]), int(m[2]), "case", 1, m[3]) for r, what in blocked
                 for m in BLOCKED_SEND.finditer(what)]
    else:
        sends = [(src, dst, tag, comm, n, f"{b} B")
                 for src, dst, tag, comm, n, b in unreceived(ledger)]
        # A send the sender is blocked in is on its line already.
        shown = {(r, int(m[1]), int(m[2])) for r, what in blocked
                 for m in BLOCKED_SEND.finditer(what)}
        recvs += [(r, comm, p, t) for r, comm, p, t, _, _ in ledger.waiting
                  if (r, comm, p, t) not in recvs]
    out = []
    for src, dst, tag, comm, n, size in sends:
        # The receives dst waits for from src that no message sent to it matches (a posted
        # receive whose message has arrived may still wait for its MPI_Wait).
        waits = [(c, t) for r, c, p, t in recvs if r == dst and p in (src, "any") and
                 not any(d == dst and c2 == c and (t == "any" or t2 == t) and
                         (p == "any" or s2 == src) for s2, d, t2, c2, _, _ in sends)]
        what = (f"r{src}'s message (to {dst}, tag {tag}, {size}{comm_words(comm)})" if n == 1
                else f"r{src}'s {n} messages (to {dst}, tag {tag}, the last {size}"
                     f"{comm_words(comm)})")
        if any(t in (tag, "any") and c == comm for r, c, p, t in recvs
               if r == dst and p in (src, "any")):
            continue  # it matches a receive posted now: a matter of order, not of tags
        if waits:
            c, t = waits[0]
            why = ("their tags differ, and a receive takes only a message of its own tag (or "
                   "MPI_ANY_TAG)" if c == comm else
                   "they are on different communicators, and a message is received only on "
                   "the communicator it was sent on")
            out.append(f"never matched: {what} and r{dst}'s receive (from {src}, tag {t}"
                       f"{comm_words(c)}): {why}")
        elif ledger is not None and (src, dst, tag) not in shown:
            out.append(f"sent and never received: {what}")
    return out


def blocked_explanation(blocked, in_a_case, ledger=None):
    """For ranks that made no progress, [(rank, the call they were in)]: the report's lines
    (one per rank, then why it cannot return) and the cause's hint, or None. in_a_case: the
    ranks ran a graded case, on a sub-communicator, where MPI_COMM_WORLD is the likely cause
    (a demo runs on the whole world, where it is not)."""
    lines = [f"  r{rank} {what}" for rank, what in blocked]
    on_world = [rank for rank, what in blocked if "on MPI_COMM_WORLD" in what]
    if in_a_case and on_world:
        # The usual cause, and the one that makes a matched-looking pair never meet.
        who = f"rank {on_world[0]}" if len(on_world) == 1 else \
            f"ranks {', '.join(map(str, on_world))}"
        return lines, (f"cause: {who} waited on MPI_COMM_WORLD: the function must use its comm "
                       f"argument. The grader runs each case on a sub-communicator of a larger "
                       f"world, so rank p of MPI_COMM_WORLD is another group's rank, or an idle "
                       f"one: the pair above looks matched but never meets")
    missed = unmatched_pairs(blocked, ledger)
    lines += missed
    missed = [ln for ln in missed if ln.startswith("never matched")]
    if not missed and any("MPI_Send(" in what or "MPI_Ssend(" in what for _, what in blocked):
        lines.append("strict send mode: MPI_Send returns only once the matching receive is "
                     "posted, so sends that wait on each other in a cycle never return")
    elif not missed and blocked and all(
            what.startswith(("MPI_Recv(", "MPI_Probe(", "MPI_Mprobe(")) for _, what in blocked):
        lines.append("every rank waits for a message that no rank has sent: each receives "
                     "before it sends, in a cycle; one side must send first (or use "
                     "MPI_Sendrecv, or post the receive with MPI_Irecv before the send)")
    return lines, None


def debug_run(cmd, log_path, show, env=None):
    """A launch under a debugger: its output passed to show as it comes (the waiting
    rank's gdb command among it) and kept in log_path; no time limit a person could meet."""
    lines = []

    def keep(line):
        lines.append(line)
        show(line)
    res = launch.run(cmd, timeout=DEBUG_HOURS * 3600, env=env, on_line=keep)
    res.output = "\n".join(lines)
    with open(log_path, "w") as f:
        f.write(res.output + "\n")
    return res


OUTPUT_SUFFIX = ".out.txt"  # a rank's stdout and stderr during a case (common/case_run.c)
SHOW_PRINTED = 8  # lines of a failing case's output in the report
READ_LIMIT = 1 << 20  # bytes of one output file read to show it


def case_features(case):
    """What tells a test's cases apart, for grader/pattern.py: np, the parameters, and
    the facets the test derives from them."""
    features = {"np": case.np}
    features.update(case.params)
    if case.test.facets:
        features.update(case.test.facets(case))
    return features


def output_files(cdir):
    """{(group, rank): path} of the output files in a case's directory that hold
    anything (a rank that dies inside a case leaves its file, empty or not)."""
    out = {}
    try:
        names = os.listdir(cdir)
    except OSError:
        return out
    for name in names:
        m = re.fullmatch(r"g(\d+)\.r(\d+)" + re.escape(OUTPUT_SUFFIX), name)
        path = os.path.join(cdir, name)
        if m and os.path.getsize(path) > 0:
            out[(int(m.group(1)), int(m.group(2)))] = path
    return out


def read_text(path):
    """Up to READ_LIMIT bytes of a file as text, "" if it cannot be read."""
    try:
        with open(path, errors="replace") as f:
            return f.read(READ_LIMIT)
    except OSError:
        return ""


def count_lines(path):
    n, last = 0, b"\n"
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 16), b""):
                n += chunk.count(b"\n")
                last = chunk[-1:]
    except OSError:
        return 0
    return n + (last != b"\n")


def printable(text, width):
    text = "".join(c if c.isprintable() else " " for c in text.expandtabs(4)).rstrip()
    return text if len(text) <= width else text[:width - 3] + "..."


def printed_lines(cdir, group, np_):
    """The report's lines for what one case's ranks printed: a heading with the path
    to all of it, then up to SHOW_PRINTED lines, taken from the ranks in turn and shown
    in rank order, each after its rank. The failing group's, or (group unknown) the
    first group's that printed. [] when they printed nothing."""
    files = output_files(cdir)
    if not files:
        return []
    if group is None or group < 0 or not any(g == group for g, _ in files):
        group = min(g for g, _ in files)
    ranks = sorted(r for g, r in files if g == group and r < np_)
    text = {}
    for r in ranks:
        try:
            with open(files[(group, r)], "rb") as f:
                text[r] = f.read(READ_LIMIT).decode(errors="replace").splitlines()
        except OSError:
            text[r] = []
    total = sum(count_lines(files[(group, r)]) for r in ranks)
    if total == 0:
        return []
    take = {r: 0 for r in ranks}
    shown = 0
    while shown < SHOW_PRINTED and any(take[r] < len(text[r]) for r in ranks):
        for r in ranks:
            if shown < SHOW_PRINTED and take[r] < len(text[r]):
                take[r] += 1
                shown += 1
    where = f"{os.path.relpath(cdir)}/g{group}.r<rank>{OUTPUT_SUFFIX}"
    head = (f"this case's ranks printed {spec.amount(total, ' lines')}, all in {where}:"
            if shown >= total else
            f"this case's ranks printed {total} lines, the first {shown} below, all in {where}:")
    width = 78 - 6 - len(f"  r{max(ranks)}| ")
    return [head] + [f"  r{r}| {printable(line, width)}" for r in ranks
                     for line in text[r][:take[r]]]


# libxt's notes on a block's guard zones or freed data (common/mem.c).
ZONE_NOTE = re.compile(r"wrote (past the end|before the start|to the \d+-byte) ")

# What glibc prints before it aborts on a damaged heap.
GLIBC_HEAP = re.compile(r"((?:free|malloc|realloc|calloc|munmap_chunk|malloc_consolidate|"
                        r"_int_free|_int_malloc|tcache_thread_shutdown)\(\): [^\n*]*|"
                        r"double free or corruption[^\n*]*|corrupted size vs\. prev_size[^\n*]*|"
                        r"corrupted double-linked list[^\n*]*)")
LIBC_ALLOCATOR = re.compile(r"libc\.so[^(]*\((malloc|free|calloc|realloc|cfree|posix_memalign|"
                            r"aligned_alloc|__libc_\w+)\+")


def heap_damage(crash, output):
    """For a SIGABRT raised by glibc's allocator finding its heap damaged: glibc's message
    ("free(): invalid next size (fast)"), or "" when it left none; otherwise None."""
    if "SIGABRT" not in crash.text:
        return None
    m = GLIBC_HEAP.search(output)
    if m:
        return m.group(1).strip().rstrip(":")
    if any(LIBC_ALLOCATOR.search(line) for line in crash.backtrace):
        return ""
    return None


def asan_in_output(output):
    """An AddressSanitizer report in a launch's output (one that no status file holds)."""
    lines = output.splitlines()
    start = next((i for i, ln in enumerate(lines) if "ERROR: AddressSanitizer" in ln), None)
    if start is None:
        return []
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("SUMMARY:")),
               len(lines))
    return lines[start:end]


def asan_frames(lines, binary):
    """[(function, file:line)] of each #N line of one stack in an AddressSanitizer report,
    paths relative to the tree; a frame it could not symbolize, from binary, by addr2line."""
    root = os.getcwd() + os.sep
    frames = []
    for line in lines:
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+ in (\S+) (\S+?):(\d+)(?::\d+)?$", line)
        if m:
            path = m.group(2)
            path = path[len(root):] if path.startswith(root) else path
            frames.append((m.group(1), f"{path}:{m.group(3)}"))
            continue
        m = re.match(r"\s*#\d+ 0x[0-9a-f]+\s+(?:in \S+ )?\((\S+)\+(0x[0-9a-f]+)\)", line)
        if m and os.path.basename(m.group(1)) == os.path.basename(binary):
            frames += where_in_source(binary, "", m.group(2))
    return frames


def a_or_an(n):
    """The article before a number read aloud: "an 8-byte", "an 11-byte", "a 3-byte"."""
    digits = str(n)
    return "an" if digits.startswith("8") or re.fullmatch(r"1[18](\d{3})*", digits) else "a"


def asan_report(report, binary, source, headline):
    """The CRASH lines for AddressSanitizer's report: what (the headline, with where the
    address lies), the lines that did it (the exercise's first), and where the memory was
    allocated (and freed)."""
    stacks, cur, about = {}, None, []
    for line in report:
        if re.match(r"\s*#\d+ ", line):
            if cur is not None:
                stacks.setdefault(cur, []).append(line)
            continue
        text = line.strip()
        if re.match(r"(READ|WRITE) of size", text) or "ERROR: AddressSanitizer" in text:
            cur = "access"
        elif re.search(r"(previously )?allocated by thread", text):
            cur = "allocated"
        elif "freed by thread" in text:
            cur = "freed"
        elif re.search(r"is located in stack of thread", text):
            cur = "frame"
        else:
            cur = None
            if text:
                about.append(text)

    def mine(frames):
        own = [f for f in frames if f[1].startswith(source + ":")]
        project = [f for f in frames if not f[1].startswith(("/", "..")) and
                   os.path.isfile(f[1].rsplit(":", 1)[0])]
        return own, project

    def site(frames):
        own, project = mine(frames)
        # The allocators' own frames (xt_malloc_at, xt_alloc_at) say nothing: their caller does.
        project = [f for f in project if not f[1].startswith(("common/core_err.c:",
                                                              "common/mem.c:"))]
        f = (own or project or [None])[0]
        return f"{f[0]}() at {f[1]}" if f else ""

    lines = [headline]
    # libxt names the memory when it is its own (an xt_alloc block, a case's input or
    # output): "a WRITE of size 4 past the end of ..."; otherwise ASan's words say where.
    libxt_named = re.search(r"AddressSanitizer: (a READ|a WRITE|an access) ", headline)
    if not libxt_named and re.search(r", an? (READ|WRITE) of size", headline):
        words = next((say(m) for text in about for pattern, say in ASAN_PLACES
                      for m in [re.search(pattern, text)] if m), "")
        lines[0] += words
    own, project = mine(asan_frames(stacks.get("access", []), binary))
    chain = project[:project.index(own[-1]) + 1] if own else project[:2]
    if chain:
        lines.append("in " + " <- ".join(f"{f}() at {w}" for f, w in chain[-4:]))
    if not libxt_named:
        for what in ("allocated", "freed"):
            where = site(asan_frames(stacks.get(what, []), binary))
            if where:
                lines.append(f"the block was {what} in {where}")
    return lines


# Where AddressSanitizer says the bad access was, in the headline's words: (pattern of
# its report's description, the words for a match). The first that matches is taken.
ASAN_PLACES = [
    (r"is located (\d+) bytes to the (left|right) of (\d+)-byte region",
     lambda m: (f", {m[1]} bytes {'before the start' if m[2] == 'left' else 'past the end'} "
                f"of {a_or_an(m[3])} {m[3]}-byte block")),
    (r"is located (\d+) bytes inside of (\d+)-byte region",
     lambda m: f", byte {m[1]} of {a_or_an(m[2])} {m[2]}-byte block"),
    (r"\[(\d+), (\d+)\) '(\w+)'(?: \(line (\d+)\))? <== Memory access at offset \d+ (\w+)",
     lambda m: (f", {ASAN_SIDES.get(m[5], 'at')} the {int(m[2]) - int(m[1])}-byte local "
                f"variable '{m[3]}'" + (f" (declared at line {m[4]})" if m[4] else ""))),
    (r"of global variable '(\w+)' defined in '([^']+)'",
     lambda m: f", next to the global '{m[1]}' ({m[2]})"),
]
ASAN_SIDES = {"overflows": "past the end of", "underflows": "before the start of"}


WRONG_COUNT = re.compile(r"^rank \d+ '[^']*'(\[[^\]]*\]|\([^)]*\))?.*?\((\d+) of (\d+) wrong")


def other_findings(wrong, expected):
    """Under the first wrong output: the other wrong outputs of the case (rank, name, how
    many elements, the first index), and the outputs that were right, so that fixing one
    bug of two shows as progress."""
    lines = []
    rest = []
    for r, name, msg, _, _ in wrong[1:]:
        m = WRONG_COUNT.match(msg)
        rest.append(f"rank {r} '{name}' ({m[2]} of {m[3]} elements"
                    f"{', first ' + m[1] if m[1] else ''})" if m else
                    f"rank {r} '{name}' ({msg.split(': ', 1)[-1][:60]})")
    if rest:
        shown = rest[:6] + ([f"{len(rest) - 6} more"] if len(rest) > 6 else [])
        lines.append(f"also wrong: {'; '.join(shown)}")
    bad = {name for _, name, *_ in wrong}
    right = sorted({n for per_rank in expected for n in per_rank} - bad)
    if right:
        lines.append("right on every rank: " + (", ".join(repr(n) for n in right)
                                                if len(right) <= 6 else
                                                f"the {len(right)} other outputs"))
    return lines


def broken_rules(test, case, inputs, group):
    """The first message of each rule of the test that the case also breaks, its notes of
    kind RULE first: what a wrong value would otherwise hide."""
    out = [f"rank {r} {text}" for r, rec in enumerate(group) for kind, text in rec.notes
           if kind == "RULE"][:1]
    for rule in test.rules:
        try:
            broken = rule(case, inputs, group)
        except Exception:  # a rule may assume right values; it is a remark here
            continue
        if broken:
            out.append(broken[0][1].split("\n")[0])
        if len(out) >= 3:
            break
    return out


def case_numbers(case):
    """{name: value} of the case's numeric parameters, np included."""
    out = {"np": case.np}
    for k, v in case.params.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "fn":
            out[k] = v
        elif isinstance(v, str) and re.fullmatch(r"-?\d+(\.\d+)?", v):
            out[k] = float(v)
    return out


def named_constant(c, case):
    """(c as the case's number it equals, ' (2 = M)') when c is one of the case's numbers
    (or 1/c is: ' (1/2 = 1/np)'), else (c, ''). A ratio of float32 gradients is that number
    only to rounding, so the number itself is what is shown."""
    if not np.isfinite(c) or c == 0:
        return c, ""
    for value, form in ((c, "{}"), (1 / c, "1/{}")):
        found = [(k, v) for k, v in case_numbers(case).items()
                 if v not in (0, 1) and abs(value - v) <= 1e-4 * abs(v)]
        if found:
            v = float(found[0][1])
            shown = f"{v:g}" if form == "{}" else f"1/{v:g}"
            return (v if form == "{}" else 1 / v,
                    f" ({shown} = {' = '.join(form.format(k) for k, _ in found)})")
    return c, ""


def relation(case, name, exp, got, rank, expected, inputs):
    """A line naming what the wrong output equals, where one simple relation holds on every
    element: a constant times the expected value, the expected value plus or minus what the
    buffer held before the call, or another rank's expected value. [] otherwise."""
    e = np.asarray(exp, np.float64).reshape(-1)
    try:
        g = np.asarray(got, np.float64).reshape(-1)
    except (TypeError, ValueError):
        return []
    if g.shape != e.shape or e.size == 0 or not np.isfinite(g).all() or not np.isfinite(e).all():
        return []
    scale = max(float(np.abs(e).max()), 1e-30)

    def close(a, b):
        return np.allclose(a, b, rtol=1e-4, atol=1e-6 * scale)

    nz = np.abs(e) > 1e-6 * scale
    if nz.sum() >= 2 and close(g[~nz], 0):
        ratio = g[nz] / e[nz]
        c = float(np.median(ratio))
        if abs(c - 1) > 1e-3 and np.allclose(ratio, c, rtol=1e-4):
            c, named = named_constant(c, case)
            return [f"got = {c:.6g} x expected on every element of '{name}'"
                    f"{named}: a scale applied twice, or not at all?"]
    before = inputs.get(name)
    if isinstance(before, list):
        before = before[rank] if rank < len(before) else None
    if before is not None and np.asarray(before).size == e.size:
        b = np.asarray(before, np.float64).reshape(-1)
        if np.abs(b).max() > 1e-6 * scale and close(g - e, b):
            return [f"got = expected + the value '{name}' held before the call, on every "
                    f"element: accumulated (+=) where the contract overwrites, or not zeroed "
                    f"first"]
        if np.abs(b).max() > 1e-6 * scale and close(e - g, b):
            return [f"got = expected - the value '{name}' held before the call, on every "
                    f"element: overwritten (=) where the contract accumulates (+=)"]
    for other, per_rank in enumerate(expected):
        o = per_rank.get(name)
        if other != rank and o is not None and np.asarray(o).size == e.size and \
                not close(np.asarray(o, np.float64).reshape(-1), e) and \
                close(g, np.asarray(o, np.float64).reshape(-1)):
            return [f"got = rank {other}'s expected '{name}', on every element: a block from "
                    f"the wrong rank, or ranks numbered the wrong way round?"]
    return []


def world_hint(group):
    used = sorted({e.fn for rec in group for e in rec.events if e.comm == "world"})
    if used:
        return (f"cause: {', '.join(used)} went over MPI_COMM_WORLD; the function must use "
                f"its comm argument (the grader runs it on sub-communicators)")
    return ""


def agreeing_ranks_hint(case, name, expected, cdir, g):
    """When every rank should hold the same `name` and every rank does hold the same
    wrong values, bit for bit: the communication that makes them agree works, and the
    bug is in the arithmetic around it. "" otherwise."""
    if case.np < 2 or case.test.gathered_outputs or any(name not in e for e in expected):
        return ""
    if any(not np.array_equal(np.asarray(e[name]), np.asarray(expected[0][name]))
           for e in expected):
        return ""  # not a replicated output
    got = []
    for r in range(case.np):
        path = os.path.join(cdir, f"g{g}.r{r}.{name}.npy")
        if not os.path.exists(path):
            return ""
        got.append(np.load(path))
    if any(a.shape != got[0].shape or spec.bit_differences(a, got[0]) for a in got[1:]):
        return ""
    return (f"cause: all {case.np} ranks hold the same wrong '{name}', bit for bit: they agree "
            f"with each other but not with the single-process definition, so whatever makes "
            f"them agree works and the arithmetic around it does not: look for a missing or "
            f"extra scale (the mean over ranks is SUM then divide by np; a 1/micro; the loss "
            f"scale), a shard boundary, or an input every rank misreads alike")


def mpirun_reason(output):
    keep = []
    for line in output.splitlines():
        if re.search(r"exited on signal|returned a non-zero exit|killed|not enough slots|"
                     r"No such file|cannot|error", line, re.I):
            keep.append(line.strip())
    return keep[:4]


# ---------------------------------------------------------------------- build

FORBIDDEN_SYMBOLS = [
    (r"^PMPI_", "calls {} directly, which hides the call from the grader; use the MPI_ name"),
    (r"^xti_", "calls libxt's internal {}"),
    (r"^(dlsym|dlvsym|dlopen)$", "calls {}(): only MPI may move data between ranks here"),
    (r"^(fork|vfork|system|popen|execv|execve|execvp|execl|execlp|posix_spawn|posix_spawnp)$",
     "calls {}(): no other processes here"),
    (r"^(socket|socketpair|shm_open|shmget|shmat|msgget|msgsnd|msgrcv|mq_open|mmap|mmap64|"
     r"fopen|fopen64|freopen|open|open64|openat|openat64|creat|pipe|pipe2|syscall|"
     r"process_vm_readv|process_vm_writev|ptrace)$",
     "calls {}(): only MPI may move data between ranks here"),
    (r"^MPI_T_", "calls the MPI tools interface ({})"),
]


def harness_only():
    """[(regex, message)]: libxt's functions for the runner, benches and tests, which
    common/xt_harness.h declares and an exercise's header does not (xt_rank() is the
    world's rank, never the case communicator's)."""
    try:
        with open(os.path.join("common", "xt_harness.h")) as f:
            names = sorted(set(re.findall(r"\b(xt_\w+)\s*\(", f.read())))
    except OSError:
        return []
    if not names:
        return []
    return [(rf"^({'|'.join(names)})$", "calls libxt's harness function {}(), which runs the "
                                        "grader's cases; an exercise has xt.h and xt_nn.h")]


def forbidden_calls(obj, extra=(), source=None):
    """RULE messages for symbols an exercise object must not use: every exercise's
    FORBIDDEN_SYMBOLS, libxt's harness functions and `extra`, [(regex, message)] from
    its tests. An entry of `extra` may instead be a function (obj, source) -> [message],
    a check of the object and its source that symbols cannot express (an array on the
    stack where memory is accounted)."""
    patterns = [e for e in extra if not callable(e)]
    try:
        out = subprocess.run(["nm", "-u", obj], capture_output=True, text=True, timeout=30)
    except OSError:
        return []
    msgs = []
    for line in out.stdout.splitlines():
        sym = line.split()[-1] if line.split() else ""
        sym = sym.split("@")[0]
        for pat, msg in list(FORBIDDEN_SYMBOLS) + harness_only() + patterns:
            if re.search(pat, sym):
                msgs.append(msg.format(sym))
    for check in extra:
        if callable(check):
            msgs.extend(check(obj, source))
    return msgs


def build(binaries, jobs=2, san=False, cov=False):
    """Builds binaries with make (san: with AddressSanitizer, binaries under build/san/;
    cov: for gcov, under build/cov/); returns {binary: compiler output} for failures."""
    failed = {}
    if not binaries:
        return failed
    make = (["make", "-s", "--no-print-directory"] + (["SAN=1"] if san else []) +
            (["COV=1"] if cov else []))
    cmd = make + ["-k", f"-j{jobs}"] + list(binaries)
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode == 0:
        return failed
    for b in binaries:
        one = subprocess.run(make + [b], capture_output=True, text=True)
        if one.returncode != 0:
            failed[b] = (one.stdout + one.stderr).strip()
    if not failed:  # e.g. libxt itself
        for b in binaries:
            failed[b] = (res.stdout + res.stderr).strip()
    return failed


def build_errors(text, limit=12):
    """The compiler's messages from the first error on."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    first = next((i for i, ln in enumerate(lines) if re.search(r"\berror\b:|: error", ln)), 0)
    return lines[first:first + limit]
