"""A lecture's exercises graded in one launch: ranks started once (common/resident.c).

Starting the ranks of an MPI job costs more than most exercises' cases, so grade.py hands
this module the exercises of a lecture it may run together, each with the Runner that
would grade it alone. Each exercise's cases are written as for its own first launch
(Runner.prepare: the same inputs, cases.txt and run.sh, in its own launch directory); one
launch of the lecture's resident program, in the largest world any of them needs, runs
them one after another, each in its own world (the ranks above it idle); then each is
judged from its own files (Runner.evaluate), exactly as after its own launch.

Only a clean pass (or a clean TODO, below) is taken from a shared launch: an exercise
whose every case ran and whose every test is OK. Anything else (a WRONG, a RULE, a crash or hang that ended the
launch, a launch that failed after its cases) is graded again in launches of its own, as
if there were no resident launch, so that a neighbour can never decide a verdict; the
exercises the ended launch never reached go into a fresh resident launch. An exercise
not yet written (its object still calls xt_todo_at) shares too: each of its cases' lines
says todo=1, an XT_TODO ends only that case on that rank (common/case_run.c), and the
test stops there as its own launch would; the exercise is taken when its tests are OK up
to the first that stopped so and every one after it stopped so too (the verdict TODO is
its own code's, which no neighbour raises); a rank left waiting for one that stopped is a
hang on a short watchdog (harness.EARLY_END_WATCHDOG), and the exercise is graded alone.
No exercise with a refusal test (a case whose right answer is xt_die, which ends a
launch) shares a launch unless its contract has every rank refuse first thing
(spec.Test.refuses_on_every_rank): there each refusal case's line names the exercise's
file (refuse=...), an xt_die from that file ends only the case on that rank
(common/case_run.c), and the case is taken when every rank came through it and the first
error is one the test accepts; a rank left waiting for one that refused is a hang, on a
short watchdog (harness.EARLY_END_WATCHDOG), and anything but a clean refusal is graded in
launches of its own.

grader/mutants.py shares launches among the mutants of one exercise, each entered under its
own name, and takes every verdict from them, a mutant's whose crash or hang ended a launch
included (for the tests it reached): a mutant is judged on its verdict and report, and one
not caught as expected there is graded on its own anyway.

grade.py leaves the resident launch out where one program per exercise is the point:
CASE=, SAN=1, DEVICE=, a single exercise, and XT_RESIDENT=0. Under --coverage (build/cov/)
the resident program is linked from the gcov objects, whose counts go to each object's own
.gcda file wherever it runs.
"""

import concurrent.futures
import os
import threading
import time
import shutil

import builds
import clock
import launch
from records import read_status

# The libxt function every unwritten exercise stops in (XT_TODO calls xt_todo_at).
TODO_SYMBOL = "xt_todo_at"


def enabled():
    return os.environ.get("XT_RESIDENT", "1") != "0"


def program_of(binary, build="build"):
    """The resident program of the lecture whose exercise binary this is, in make's build
    directory (build/cov/ under COV=1): <build>/<tree>/<lecture>/<exercise> ->
    <build>/resident/<tree>/<lecture>/resident."""
    return os.path.join(build, "resident", os.path.dirname(os.path.relpath(binary, build)),
                        "resident")


def write_list(program, binaries, build="build"):
    """objects.txt beside the program: which programs' objects make links into it, each
    as its path under the build directory. Rewritten only when it changes, so that make
    relinks only then."""
    path = os.path.join(os.path.dirname(program), "objects.txt")
    text = "\n".join(os.path.relpath(b, build) for b in binaries) + "\n"
    try:
        with open(path) as f:
            if f.read() == text:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


class Member:
    """One exercise of a resident launch: its runner and what its launch directory holds."""

    def __init__(self, name, runner, tests):
        self.name = name
        self.runner = runner
        self.tests = tests
        self.plan = runner.plan_of(tests)
        self.todo = has_todo(runner.ex.binary)
        self.launch_dir = self.world = self.inputs = None

    def prepare(self):
        r = self.runner
        r.launches = 0
        if os.path.isdir(r.work_dir):
            with clock.timed("cleanup"):
                shutil.rmtree(r.work_dir, ignore_errors=True)
        self.launch_dir = r.next_launch_dir()
        self.world, self.inputs, _, _ = r.prepare(self.plan, self.launch_dir, shared=True,
                                                  todo=self.todo)


def runnable(binary, tests, linked=True):
    """Whether an exercise may share a launch: built (linked: its own program too), and no
    test that must end its run on purpose (spec.Test.refusal) unless every rank is to
    refuse its cases first thing (refuses_on_every_rank: there a refused case ends only
    itself)."""
    return ((os.path.exists(binary) or not linked)
            and all(t.refuses_on_every_rank for t in tests if t.refusal))


def has_todo(binary):
    """Whether the exercise's object still calls xt_todo_at: an exercise not yet written,
    whose cases' XT_TODO ends only the case in a shared launch (todo=1)."""
    return TODO_SYMBOL in builds.undefined_symbols([binary + ".o"]).get(binary + ".o", set())


def passed(results):
    """What make grade takes from a shared launch: an exercise whose every test passed, or
    one not yet written: its tests OK up to the first that stopped at an XT_TODO, and every
    one after that stopped so too (each at the case its own launch would stop at; the
    verdict is the exercise's own code's, which no neighbour can raise). Anything else is
    graded again alone."""
    stopped = False
    for r in results:
        if r.todo_ended:
            stopped = True
        elif r.verdict != "OK" or stopped:
            return False
    return True


def grade(members, program, work_dir, accept=passed, ended=None, take_ended=False, least=2):
    """Grades members (Member, in lecture order) in shared launches of program; returns
    {name: its results} for those whose results accept takes (make grade: those that
    passed, never one that ended a launch; the mutants' runner takes any verdict, and with
    take_ended the results of the tests a mutant that ended a launch reached, see
    mutants.py). The rest are the caller's; the names of those that ended a shared launch
    are appended to ended. A launch is shared by at least `least` members."""
    taken = {}
    pending = list(members)
    launches = 0
    if os.path.isdir(work_dir):
        with clock.timed("cleanup"):
            shutil.rmtree(work_dir, ignore_errors=True)
    while len(pending) >= least:
        launches += 1
        done, ended_in = launch_once(pending, program,
                                     os.path.join(work_dir, f"launch{launches}"), take_ended)
        taken.update({name: results for name, results in done.items() if accept(results)})
        if ended_in is not None and ended is not None:
            ended.append(ended_in.name)
        if ended_in is None or not started(ended_in):
            break  # ran to its end; or never reached its first exercise (MPI itself?)
        # The exercise the launch ended in is graded alone; those it never reached, together.
        pending = pending[pending.index(ended_in) + 1:]
    return taken


def started(member):
    """Whether the resident launch reached the exercise: its ranks open their status files
    before anything else."""
    return os.path.exists(os.path.join(member.launch_dir, "status.r0.txt"))


def launch_once(members, program, launch_dir, take_ended=False):
    """One resident launch of members: ({name: results} of those whose every case ran, in
    a launch that did not fail after them, and with take_ended of the one it ended in, for
    the tests it reached; the member the launch ended in, or None when it ran to its
    end)."""
    os.makedirs(launch_dir, exist_ok=True)
    listing = os.path.join(launch_dir, "exercises.txt")
    world = max(m.runner.graded_world(m.plan) for m in members)
    cmd = launch.mpirun_command(world, [os.path.abspath(program), "--out",
                                        os.path.abspath(launch_dir), "--resident",
                                        os.path.abspath(listing)])
    with open(os.path.join(launch_dir, "run.sh"), "w") as f:
        f.write("#!/bin/sh\n# Runs these exercises again in one launch, as the grader did.\n"
                f"cd {os.getcwd()} && {launch.shell_line(cmd)}\n")
    timeout = 60 + sum(m.runner.launch_timeout(m.plan) - 60 for m in members)
    preparing = [0.0]

    def prepare():
        """Every member's cases, its line of the list after them, so that the ranks run
        each exercise as soon as its cases are whole; then the list is renamed whole
        (resident.c reads it as it grows)."""
        start = time.monotonic()
        with open(listing + ".part", "w") as f:
            f.write("# <exercise> <cases dir> <world>: what the resident program runs, in "
                    "order\n")
            for m in members:
                m.prepare()
                f.write(f"{m.name} {os.path.abspath(m.launch_dir)} {m.world}\n")
                f.flush()
        os.replace(listing + ".part", listing)
        preparing[0] = time.monotonic() - start
        for m in members:  # while the ranks run
            m.runner.compute_references_ahead(pool, m.plan, m.inputs)
        watcher.start()

    early = {}  # member's name -> the future of its judging, begun while the launch went on
    ended = threading.Event()

    def watch():
        """Judges each exercise once the launch has gone on to the next one: its ranks
        open the next one's status files only after every rank has come through the
        barrier that ends its cases, so that its files are whole by then."""
        for m, after in zip(members, members[1:]):
            while not started(after):
                if ended.wait(WATCH_SECONDS):
                    return
            early[m.name] = judging.submit(judged, m, program)

    watcher = threading.Thread(target=watch, name="watch")
    with concurrent.futures.ThreadPoolExecutor(1) as pool, \
            concurrent.futures.ThreadPoolExecutor(1) as judging:
        try:
            # The ranks start while the cases are written (both take a few tenths of a
            # second); the references are computed, and each exercise judged, as they run.
            with clock.timed("launch"):
                res = launch.run(cmd, timeout=timeout, env=launch.mpi_env(),
                                 log_path=os.path.join(launch_dir, "output.txt"),
                                 meanwhile=prepare)
        finally:
            ended.set()
            if watcher.is_alive():
                watcher.join()
        clock.add("launch", -preparing[0], count=0)  # timed as the inputs and the grader's
        results = judge(members, program, res, take_ended, early)
        for m in members:  # those of exercises not judged here (after one the launch ended in)
            for f in m.runner.references_ahead.values():
                f.cancel()
            m.runner.references_ahead.clear()
    return results


# How often the watcher looks for the next exercise's start, in seconds.
WATCH_SECONDS = 0.01


def judged(m, program):
    """(results, tests to run again) of member m from its own files, as after a launch of
    its own that ran to its end; an exercise the launch ended in or before shows cases not
    run."""
    m.runner.ran_in = program
    alone = launch.Result(0, 0.0, False, "")
    status = read_status(m.launch_dir, m.world)
    return m.runner.evaluate(m.tests, m.plan, m.world, m.inputs, alone, status, m.launch_dir)


def judge(members, program, res, take_ended, early):
    """What launch_once returns, from the members' files after the launch of program ended
    as res; early: {name: future of judged(member)} of those judged while it ran."""
    clean = res.returncode == 0 and not res.timed_out

    done, ended_in = {}, None
    in_cases = 0.0
    for m in members:
        results, rerun = (early[m.name].result() if m.name in early else judged(m, program))
        ran_all = not rerun and all(r.todo_ended or r.cases_run == len(
            [1 for t, _, _ in m.plan if t is r.test]) for r in results.values())
        if not ran_all:
            ended_in = m
            if take_ended:
                # Judged as its own launch that ended the same way: with the launch's end.
                status = read_status(m.launch_dir, m.world)
                results, _ = m.runner.evaluate(m.tests, m.plan, m.world, m.inputs, res,
                                               status, m.launch_dir)
                done[m.name] = [results[t.name] for t in m.tests if t.name in results]
            break
        in_cases += sum(r.seconds for r in results.values())
        out = [results[t.name] for t in m.tests]
        m.runner.keep_summary(out)
        done[m.name] = out
    if ended_in is None and not clean and not take_ended:
        # Every case ran and the launch still failed (in MPI_Finalize, say): no exercise of
        # it is taken from here.
        done = {}
    if clean and members:
        members[0].runner.start_seconds = max(members[0].runner.start_seconds,
                                              res.seconds - in_cases)
    return done, ended_in
