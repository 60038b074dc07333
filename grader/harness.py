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

What it leans on, one job each: records.py reads what the ranks wrote; compare.py
explains a wrong value; hangs.py explains ranks that stopped; sanitizer.py turns
backtraces and AddressSanitizer's reports into the exercise's lines; builds.py
builds and scans the programs.
"""

import concurrent.futures
import dataclasses
import glob
import hashlib
import json
import os
import re
import time
import shutil
from typing import Callable, List, Optional

import numpy as np

import builds
import clock
import launch
import pattern
import scratch
import spec
from compare import (POISON_READ, agreeing_ranks_hint, broken_rules, compare, other_findings,
                     relation, world_hint)
from hangs import blocked_explanation, read_ledger
from records import (keep_expected, outputs_path, rank_arrays, read_record, read_status,
                     write_inputs)
from sanitizer import (ZONE_NOTE, asan_in_output, asan_report, heap_damage, resolve_sites,
                       short_backtrace)

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
    todo_ended: bool = False  # it stopped at an XT_TODO in a shared launch, which went on

    @property
    def points(self):
        return self.test.points if self.verdict == "OK" else 0


# ----------------------------------------------------------------- comparisons


# -------------------------------------------------------------------- helpers

def copies(arrays):
    """Each rank's arrays copied: a test's own check may change what it is given, and the
    values are compared after it."""
    return [{name: a.copy() for name, a in per_rank.items()} for per_rank in arrays]


def scratch_dir(cdir, g):
    """Group g's xt_case_scratch_dir in case directory cdir, as common/case.c makes it:
    the files a program left there outlive the launch, for the grader to read."""
    return os.path.join(cdir, f"g{g}.scratch")


# The watchdog of a resident launch's cases that may end early on a rank (prepare's
# refuse= and todo=1): a refusal comes first thing, a stub stops at its first line, so a
# rank still waiting after this long waits for one that stopped.
EARLY_END_WATCHDOG = 3.0

# A refusal test's launches, one a case, run this many at a time (Runner.refusals).
REFUSALS_AT_ONCE = 4

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


def frozen(x):
    """x with every array in it a read-only view (dicts, lists and tuples rebuilt around
    them): what a reference computed on another thread gets, where a copy would cost as much
    as the inputs themselves (lecture 1: 0.2 s a grade)."""
    if isinstance(x, np.ndarray):
        view = x.view()
        view.flags.writeable = False
        return view
    if isinstance(x, dict):
        return {k: frozen(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(frozen(v) for v in x)
    return x


def stable_seed(*parts):
    h = hashlib.sha256("/".join(str(p) for p in parts).encode()).digest()
    return int.from_bytes(h[:8], "little")


def groups_of(world, np_):
    return world // np_


# What libxt notes of a case's requests (common/requests.c) and of device work not waited for
# (common/cuda.cu, on the emulated device), each a RULE.
REQUEST_NOTES = ("RACE", "PENDING", "INFLIGHT", "FREED", "UNWAITED")


# ---------------------------------------------------------------------- launch


class Exercise:
    def __init__(self, lecture, name, source, binary, tests):
        self.lecture = lecture
        self.name = name
        self.source = source
        self.binary = binary
        self.tests = tests
        # The files whose lines are the exercise's own in a backtrace: its file and its driver.
        driver = builds.driver_of(source)
        self.sources = (source, driver) if driver else (source,)


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
        scratch.prepare()  # build/grade, in memory where it can be
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
        self.keep_margins = False  # note_margin for each passing output (grade --margins)
        # {(test, case number, group): a future of its reference}: computed on a thread
        # while the launch runs (compute_references_ahead), taken by check_case.
        self.references_ahead = {}
        # The program the cases ran in, when not the exercise's own (a resident launch's):
        # the code addresses in its ranks' reports are that program's.
        self.ran_in = None

    @property
    def symbols(self):
        return self.ran_in or self.ex.binary


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
            with clock.timed("cleanup"):
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
        world, inputs, cmd, extra = self.prepare(plan, launch_dir)
        output = os.path.join(launch_dir, "output.txt")
        if self.debug:
            res = debug_run(cmd, output, self.debug.show, launch.mpi_env(extra))
        else:
            with clock.timed("launch"):
                res = launch.run(cmd, timeout=self.launch_timeout(plan),
                                 env=launch.mpi_env(extra), log_path=output)
        status = read_status(launch_dir, world)
        return world, inputs, res, status

    def launch_timeout(self, plan):
        """What a launch of plan may take before the grader ends it: the watchdogs inside
        end a hang sooner."""
        return 60 + 2 * max((self.watchdog_of(t) for t, _, _ in plan), default=self.watchdog)

    def prepare(self, plan, launch_dir, shared=False, todo=False):
        """Writes the inputs and cases.txt of plan, and run.sh, the command that runs them
        alone: (world size, {number: inputs per group}, that command, its environment).
        shared: for a resident launch, where a refusal case ends only itself (its line
        names the exercise's file, refuse=..., and its watchdog is short: a refusal is
        the first thing the function does); with todo (an exercise whose object still
        calls xt_todo_at), every case's XT_TODO ends only that case (todo=<its test's
        number>, from 1), on the same short watchdog: a rank left waiting for one that
        stopped there is found soon; and the ranks skip the test's other cases, which its
        own launch would not have run (case_run.c)."""
        os.makedirs(launch_dir, exist_ok=True)
        world = self.graded_world(plan)
        inputs = {}
        todo_numbers = {}  # test -> its number on the todo= of its cases' lines
        lines = ["# xt cases: case <k> np=<n> fn=<function> key=value ..."]
        for test, case, k in plan:
            cdir = os.path.join(launch_dir, f"c{k}")
            os.makedirs(cdir, exist_ok=True)
            per_group = []
            with clock.timed("inputs"):
                for g in range(groups_of(world, case.np)):
                    rng = np.random.default_rng(stable_seed(self.seed, test.exercise,
                                                            test.name, case.index, g))
                    inp = test.inputs(case, rng)
                    per_group.append(inp)
                    write_inputs(cdir, g, inp)
            inputs[k] = per_group
            params = " ".join(f"{key}={val}" for key, val in case.params.items())
            wd = 0 if self.debug else self.watchdog_of(test)
            if shared and test.refusal:
                params += f" refuse={self.ex.source}"
                wd = min(wd, EARLY_END_WATCHDOG)
            if shared and todo:
                number = todo_numbers.setdefault(test.name, len(todo_numbers) + 1)
                params += f" todo={number}"
                wd = min(wd, EARLY_END_WATCHDOG)
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
        self.last_launch_dir = launch_dir
        return world, inputs, cmd, extra

    def compute_references_ahead(self, pool, plan, inputs):
        """Submits the reference of every group of every case of plan to pool (a thread
        that works while the ranks run), each on read-only views of its inputs (frozen): a
        reference computes from its inputs and never writes them, which the views enforce,
        so that check_case, which takes it, sees the inputs as they were written."""
        for test, case, k in plan:
            if test.refusal:
                continue
            for g, inp in enumerate(inputs.get(k, [])):
                self.references_ahead[(test.name, k, g)] = pool.submit(
                    test.reference, case, frozen(inp))

    def plan_of(self, tests):
        """[(test, case, its number)]: what one launch of tests runs."""
        return [(test, case, case.number) for test in tests for case in self.cases_of(test)]

    # One mpirun for the pending tests; returns (results, tests to run again).
    def launch(self, tests, launch_dir):
        plan = self.plan_of(tests)
        world, inputs, res, status = self.start(plan, launch_dir)
        return self.evaluate(tests, plan, world, inputs, res, status, launch_dir)

    def evaluate(self, tests, plan, world, inputs, res, status, launch_dir):
        """The verdicts of a launch of plan (prepared in launch_dir) that ended as res:
        (results, the tests it never reached, to run again)."""
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
                if r.todo_ended:  # the cases its own launch would not have reached
                    outcomes.append(CaseOutcome(case, "NOT RUN"))
                    continue
                recs = self.read_case(launch_dir, k, world, case.np)
                todo = [s for s in status if s.case == k and s.kind == "TODO"] \
                    if recs is not None else []
                if todo:
                    # A shared launch's case that stopped at an XT_TODO on every rank that
                    # reached one (its line's todo=1): the test ends there as its own
                    # launch would; the launch goes on.
                    r.todo_ended = True
                    death = Failure("TODO", case, [todo[0].text])
                    # A refusal test's own launches (refusals) count every case they start.
                    r.cases_run += bool(test.refusal)
                elif recs is None:  # the launch ended inside this case
                    dead_case = k
                    died_here = True
                    death = self.classify_death(res, status, case, k, world)
                    # What the launcher or the library said of it, in words it knows.
                    death.lines += [w for w in launcher_causes(self.messages(res, k))
                                    if w not in death.lines]
                if todo or recs is None:
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
                fail = (self.refused_here(test, case, k, inputs[k], status, launch_dir)
                        if test.refusal else
                        self.check_case(test, case, k, recs, inputs[k], launch_dir))
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
        clock.add("cases", in_cases)
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
        lines = sum(own_lines(f) for fs in files.values() for f in fs.values())
        if lines == 0:  # only the MPI library's banners
            return []
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
        case that is not refused as it should be gives the verdict. The launches run at
        once (REFUSALS_AT_ONCE at a time: each is mostly its ranks' start and stop), and
        are judged in order as if one ran after the other: the cases after the first
        failure are reported NOT RUN."""
        r = TestResult(test)
        fail = None
        cases = self.cases_of(test)
        started = iter(self.start_refusals(test, cases))
        for case in cases:
            if fail:
                r.cases.append(CaseOutcome(case, "NOT RUN"))
                continue
            launch_dir, world, inputs, res, status = next(started)
            r.launch_dir = launch_dir
            k = case.number
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

    def start_refusals(self, test, cases):
        """(launch dir, world, inputs, result, status) of each case of a refusal test, in
        a launch of its own: prepared here in order and run REFUSALS_AT_ONCE at a time;
        under a debugger one at a time, each only when asked for (after a failure none
        is)."""
        if self.debug:
            return self.refusals_in_turn(test, cases)
        prepared = []
        for case in cases:
            launch_dir = self.next_launch_dir()
            world, inputs, cmd, extra = self.prepare([(test, case, case.number)], launch_dir)
            prepared.append((launch_dir, world, inputs, cmd, extra))
        timeout = self.launch_timeout([(test, c, c.number) for c in cases[:1]])

        def run(item):
            d, world, inputs, cmd, extra = item
            res = launch.run(cmd, timeout=timeout, env=launch.mpi_env(extra),
                             log_path=os.path.join(d, "output.txt"))
            return d, world, inputs, res, read_status(d, world)

        start = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(REFUSALS_AT_ONCE) as pool:
            done = list(pool.map(run, prepared))
        clock.add("launch", time.monotonic() - start, count=len(prepared))
        return done

    def refusals_in_turn(self, test, cases):
        for case in cases:
            launch_dir = self.next_launch_dir()
            yield (launch_dir, *self.start([(test, case, case.number)], launch_dir))

    def refusal_of(self, test, case, k, inputs, status, launch_dir):
        """The first error of case k raised in the exercise's file (xt_die, XT_CHECK) and
        what test.refusal says of it, (its status line, a WRONG message or None); None when
        there is no such error. An error raised elsewhere (libxt, the lecture's code) is no
        refusal."""
        mine = sorted((s for s in status if s.kind == "ERROR" and s.case == k
                       and s.text.startswith(self.ex.source + ":")), key=lambda s: s.us)
        if not mine:
            return None
        s = mine[0]
        text = s.text[len(self.ex.source) + 1:].split(": ", 1)[-1]
        g = max(s.group, 0)
        return s, test.refusal(case, inputs[g], text,
                               scratch_dir(os.path.join(launch_dir, f"c{k}"), g))

    def refused(self, test, case, k, world, inputs, res, status, launch_dir):
        """None if the launch's one case, number k, ended in a refusal (refusal_of) that
        test.refusal accepts; else the Failure: a case that ended otherwise is reported by
        classify_death."""
        found = self.refusal_of(test, case, k, inputs, status, launch_dir)
        if found:
            s, msg = found
            return (Failure("WRONG", case, [f"{case.label}: rank {s.rank}: {msg}"], s.group)
                    if msg else None)
        if status or self.read_case(launch_dir, k, world, case.np) is None:
            return self.classify_death(res, status, case, k, world)
        msg = test.refusal(case, inputs[0], None, scratch_dir(os.path.join(launch_dir,
                                                                           f"c{k}"), 0))
        return Failure("WRONG", case, [f"{case.label}: {msg}"])

    def refused_here(self, test, case, k, inputs, status, launch_dir):
        """A refusal case that ran to its end in a resident launch (prepare's shared): None
        if it was refused as it should be, else a RETRY Failure: anything else is graded
        alone (refusals), and judged as a launch of its own would judge it."""
        found = self.refusal_of(test, case, k, inputs, status, launch_dir)
        if found and not found[1]:
            return None
        return Failure("RETRY", case, [f"{case.label}: not refused as expected in a shared "
                                       f"launch; graded in launches of its own"])

    def read_case(self, launch_dir, k, world, np_):
        """Records per group per rank, or None if any rank did not finish."""
        cdir = os.path.join(launch_dir, f"c{k}")
        out = []
        for g in range(groups_of(world, np_)):
            recs = []
            for r in range(np_):
                rec = read_record(outputs_path(cdir, g, r))
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
                        text = resolve_sites(text, self.symbols, self.ex.sources)
                        return Failure("RULE", case, [f"{label}: rank {r} {text}"])
            arrays = rank_arrays(cdir, g, case.np, group)
            if test.files:
                broken = test.files(case, inp, copies(arrays), scratch_dir(cdir, g))
                if broken:
                    return Failure("WRONG", case, [f"{label}: {broken[0][1]}"])
            if test.check and test.check_first:
                fail = self.run_check(test, case, inp, arrays, group, label)
                if fail:
                    return fail
            with clock.timed("references"):
                ahead = self.references_ahead.pop((test.name, k, g), None)
                expected = ahead.result() if ahead else test.reference(case, inp)
            wrong = []  # (rank, name, message, expected, got) of every wrong output
            for r in range(case.np):
                for name, exp in expected[r].items():
                    got = arrays[r].get(name)
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
                    elif self.keep_margins:
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
                fail = self.run_check(test, case, inp, arrays, group, label)
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

    def run_check(self, test, case, inp, arrays, records, label):
        broken = (test.check(case, inp, copies(arrays), records) if test.check_records else
                  test.check(case, inp, copies(arrays)))
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
                return Failure("CRASH", case, asan_report(s.asan, self.symbols, self.ex.sources,
                                                          f"{label}: rank {s.rank}: {s.text}"),
                               s.group)
            lines = [f"{label}: rank {s.rank}: {s.text}"]
            frames = short_backtrace(s.backtrace, self.symbols, self.ex.sources)
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
            return Failure("CRASH", case, asan_report(asan, self.symbols, self.ex.sources,
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
    for name in case.test.words or {}:
        if name in features:
            # Said as the label says it: "bias" / "no bias", not "bias=1".
            features[pattern.Word(*spec.flag_words(case.test, name))] = features.pop(name)
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


# A banner the MPI library prints from inside a rank, not the student's: Open MPI's
# show_help blocks, which a rank prints itself where no mpirun gathers them (a direct
# launch: Slurm's srun), between two lines of dashes: MPI_Abort's, and the warning that
# ranks could not connect over TCP (launcher_causes explains it under the failure).
BANNER_EDGE = re.compile(r"^-{20,}$")
BANNER_FIRST = ("MPI_ABORT was invoked", "WARNING: Open MPI failed to TCP connect")


def without_banners(lines):
    """lines without the MPI library's banners (BANNER_FIRST, edged by BANNER_EDGE)."""
    out, i = [], 0
    while i < len(lines):
        if (BANNER_EDGE.match(lines[i]) and i + 1 < len(lines)
                and lines[i + 1].startswith(BANNER_FIRST)):
            end = next((j for j in range(i + 1, len(lines)) if BANNER_EDGE.match(lines[j])),
                       None)
            if end is not None:
                i = end + 1
                continue
        out.append(lines[i])
        i += 1
    return out


def own_lines(path):
    """How many lines a rank's output file holds, the MPI library's banners left out."""
    try:
        with open(path, "rb") as f:
            head = f.read(READ_LIMIT).decode(errors="replace").splitlines()
    except OSError:
        return 0
    return count_lines(path) - (len(head) - len(without_banners(head)))


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
                text[r] = without_banners(f.read(READ_LIMIT).decode(errors="replace")
                                          .splitlines())
        except OSError:
            text[r] = []
    total = sum(own_lines(files[(group, r)]) for r in ranks)
    if total <= 0:
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


# What a launcher's own words mean, where they are the reason a run ended: (its words, why).
LAUNCHER_CAUSES = [
    (re.compile(r"session_dir\.c"),
     "two Open MPI daemons share one temporary directory (their session directory, under "
     "TMPDIR, is named by host and user): give each node its own TMPDIR"),
    (re.compile(r"failed to TCP connect to a peer"),
     "Open MPI said its ranks could not open a TCP connection to each other (an address or "
     "interface one node cannot reach, or a firewall between the nodes): name the network "
     "they share, MPIRUN_ARGS=\"--mca btl_tcp_if_include <interface or a.b.c.d/n>\""),
]


def launcher_causes(output):
    """What a launch's output says, in the launcher's or the library's known words, about
    why it ended: [] when nothing known."""
    return [why for words, why in LAUNCHER_CAUSES if words.search(output)]


def mpirun_reason(output):
    """The lines of a launch's output that say why it ended without a report: what a
    launcher's known words mean, then up to four of its lines."""
    keep = []
    for line in output.splitlines():
        if re.search(r"exited on signal|returned a non-zero exit|killed|not enough slots|"
                     r"No such file|cannot|error", line, re.I):
            keep.append(line.strip())
    return launcher_causes(output) + keep[:4]


# ---------------------------------------------------------------------- build


