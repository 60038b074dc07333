#!/usr/bin/env python3
"""Grades a lecture: builds its programs, runs their cases, prints the report.

    make grade LC=1 [SOL=1] [EX=substring] [SEED=n] [CASE=i] [JSON=file] [VERBOSE=1] [SAN=1]

is  python3 grader/grade.py --lc 1 [--sol] [--ex ...] [--seed n] [--case i] [--json file]
    [--verbose] [--san].
Exit status: 0 only with full marks; 1 otherwise; 2 for a usage error.
"""

import argparse
import concurrent.futures
import dataclasses
import json
import os
import random
import shutil
import socket
import sys
import textwrap
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import needs  # noqa: E402

needs.numpy()

import drill  # noqa: E402
import builds  # noqa: E402
import clock  # noqa: E402
import harness  # noqa: E402
import launch  # noqa: E402
import lectures  # noqa: E402
import resident  # noqa: E402

WIDTH = 78


def tool_problems():
    """Missing tools, each with the package that provides it."""
    need = [("mpirun", "openmpi-bin"), ("mpicc", "openmpi-bin"), ("make", "make"),
            ("nm", "binutils"), ("addr2line", "binutils")]
    return [(tool, pkg) for tool, pkg in need if shutil.which(tool) is None]


def host_resolves():
    """Whether this machine's own name resolves: MPI looks it up at every start."""
    try:
        socket.gethostbyname(socket.gethostname())
        return True
    except OSError:
        return False


def wrap(text, indent):
    if text.startswith("|"):
        return [indent + text]  # a picture (a timeline), never wrapped
    # A line that starts indented (an item of a list) keeps its continuation under itself.
    inner = " " * (len(text) - len(text.lstrip(" ")))
    return textwrap.wrap(text, WIDTH, initial_indent=indent,
                         subsequent_indent=indent + inner + "  ", break_long_words=False,
                         break_on_hyphens=False) or [indent]


class Report:
    def __init__(self, quiet=False):
        self.quiet = quiet

    def line(self, text=""):
        if not self.quiet:
            print(text, flush=True)

    def result(self, ex, r, rerun, show_dir, debug="", scored=True):
        t = r.test
        time_s = f"{r.seconds:.2f}s" if r.cases_run else ""
        pts = f"{r.points}/{t.points}" if r.verdict != "SKIPPED" and scored else "-"
        self.line(f"  {ex:<23} {t.name:<21} {r.verdict:<8} {pts:>5}  {time_s}".rstrip())
        if r.verdict in ("OK", "SKIPPED"):
            for text in r.lines:
                for ln in wrap(text, " " * 6):
                    self.line(ln)
            return
        for text in r.lines:
            for ln in wrap(text, " " * 6):
                self.line(ln)
        if r.verdict not in ("TODO", "BUILD"):
            self.line(f"      read: docs/{t.lecture}.md#{ex}")
        if r.verdict == "TODO":
            self.line(f"      stuck? make hint EX={ex} (the idea first, then more)")
        # The failing case's number: CASE= grades it alone, make debug runs it in gdb.
        case = r.case.number if r.case is not None and show_dir else None
        make = rerun.startswith("make ")
        arg = (f"CASE={case}" if make else f"--case {case}") if case is not None else ""
        alone = f" [{arg}]" if case is not None and scored else ""
        self.line(f"      rerun: {rerun}{alone}")
        if case is not None and debug:
            self.line(f"      debug: {debug} {arg} (rank 0 waits for gdb)")
        if show_dir and r.launch_dir:
            self.line(f"      cases kept in {os.path.relpath(r.launch_dir)}/")


def plain(v):
    """A parameter's value as JSON holds it."""
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if hasattr(v, "item"):
        return v.item()
    return str(v)


def case_json(o):
    """One case's outcome for --json: its number (the exercise's, as CASE= takes it), label,
    np, parameters, verdict (OK, a failure's kind, NOT RUN) and the failure's one line."""
    return {"number": o.case.number, "label": o.case.label, "np": o.case.np,
            "params": {k: plain(v) for k, v in o.case.params.items()},
            "verdict": o.verdict, "reason": o.reason}


def rerun_command(args, lecture, exercise, seed, san=None):
    san = args.san if san is None else san
    if args.tree and not args.sol:
        case = "" if args.case is None else f" --case {args.case}"
        device = getattr(args, "device", "cpu")
        dev = f" --device {device}" if device != "cpu" else ""
        return (f"python3 grader/grade.py --lc {lecture} --tree {args.tree} --ex {exercise} "
                f"--seed {seed}{case}{dev}" + (" --san" if san else ""))
    num = lecture.split("_")[0][2:]
    device = getattr(args, "device", "cpu")
    sol = (" SOL=1" if args.sol else "") + (f" DEVICE={device}" if device != "cpu" else "")
    case = "" if args.case is None else f" CASE={args.case}"
    return f"make grade LC={num} EX={exercise} SEED={seed}{case}{sol}" + (" SAN=1" if san else "")


def memory_advice(args, lecture, exercise, seed):
    """Under a report of memory damaged out of sight (a guard zone, glibc's heap): the
    command that stops at the line that did it."""
    return ("AddressSanitizer stops at the line that did it: "
            + rerun_command(args, lecture, exercise, seed, san=True))


def debug_command(args, lecture, exercise):
    """make debug for a case of this exercise's kept run (its CASE= added by the report)."""
    if args.tree and not args.sol:
        return (f"python3 grader/debug.py --lc {lecture} --tree {args.tree} --ex {exercise}"
                f"{' --san' if args.san else ''}")
    return f"make debug EX={exercise}{' SOL=1' if args.sol else ''}{' SAN=1' if args.san else ''}"


def work_dir(tree_tag, lecture, exercise):
    """Where an exercise's grade keeps its launches (and make debug finds them)."""
    return os.path.join("build", "grade", tree_tag, lecture, exercise)


def tree_tag(args):
    return "solutions" if args.sol else tag_of(args.tree)


def tag_of(tree):
    """The name under build/grade/ of a tree's grades: the student's tree (None) or
    another (--tree)."""
    return "student" if not tree else tree.strip("/").replace("/", "_")


def case_tests(args, ex_tests, numbered):
    """The tests that hold case args.case, or a usage error (a string)."""
    chosen = [t for t in ex_tests if any(c.number == args.case for c in numbered[t.name])]
    if chosen:
        return chosen
    total = sum(len(numbered[t.name]) for t in ex_tests)
    return (f"grade: {ex_tests[0].exercise} has no case {args.case} at seed {args.seed}; its "
            f"cases are 0 to {total - 1}")


def list_lectures():
    """make lectures: every lecture found, with its exercises, points and page."""
    print(f"{'LC':>3}  {'lecture':<18} {'exercises':>9} {'points':>6}  {'bench':<5}  "
          f"{'page':<24} title")
    for lec in lectures.names():
        mod = lectures.load(lec)
        cpu = [t for t in mod.TESTS if t.device == "cpu"]
        exercises = {t.exercise for t in mod.TESTS}
        bench = os.path.exists(os.path.join(HERE, "lectures", lec, "bench.py"))
        print(f"{lectures.number(lec):>3}  {lec:<18} {len(exercises):>9} "
              f"{sum(t.points for t in cpu):>6}  {'yes' if bench else '-':<5}  "
              f"{'docs/' + lec + '.md':<24} {getattr(mod, 'TITLE', '')}")
    return 0


README_BEGIN = "<!-- the lectures: written by make readme from the manifests -->"
README_END = "<!-- end of the lectures -->"


def lectures_markdown():
    """The README's table of lectures, from the manifests: programs, tests, points, and the
    grade time each manifest states (GRADE_SECONDS, measured)."""
    rows = ["| LC | lecture | programs | tests | points | grade time | page |",
            "|---|---|---|---|---|---|---|"]
    total_points = total_seconds = total_programs = total_tests = 0
    for lec in lectures.names():
        mod = lectures.load(lec)
        cpu = [t for t in mod.TESTS if t.device == "cpu"]
        programs = len({t.exercise for t in mod.TESTS})
        points = sum(t.points for t in cpu)
        seconds = getattr(mod, "GRADE_SECONDS", None)
        total_points, total_programs, total_tests = (total_points + points,
                                                     total_programs + programs,
                                                     total_tests + len(mod.TESTS))
        total_seconds += seconds or 0
        rows.append(f"| {lectures.number(lec)} | {getattr(mod, 'TITLE', lec)} | {programs} | "
                    f"{len(mod.TESTS)} | {points} | {f'{seconds} s' if seconds else '-'} | "
                    f"[{lectures.page_path(lec)}]({lectures.page_path(lec)}) |")
    rows.append(f"| | every lecture (`make grade SOL=1`) | {total_programs} | {total_tests} | "
                f"{total_points} | {total_seconds} s | |")
    return "\n".join(rows) + "\n"


def write_readme(path):
    """make readme: the README's table of lectures rewritten from the manifests."""
    with open(path) as f:
        text = f.read()
    if README_BEGIN not in text or README_END not in text:
        print(f"readme: {path} has no lines {README_BEGIN!r} and {README_END!r} to write "
              f"between", file=sys.stderr)
        return 2
    head, rest = text.split(README_BEGIN, 1)
    _, tail = rest.split(README_END, 1)
    with open(path, "w") as f:
        f.write(head + README_BEGIN + "\n" + lectures_markdown() + README_END + tail)
    return 0


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lc", help="lecture: N, lcN or lcN_name (default: every lecture)")
    ap.add_argument("--sol", action="store_true", help="grade solutions/ instead of the student tree")
    ap.add_argument("--tree", help="grade the sources under this directory (a mutant, say)")
    ap.add_argument("--ex", help="only exercises or functions whose name contains this")
    ap.add_argument("--seed", type=int, help="the inputs of an earlier run")
    ap.add_argument("--case", type=int, help="grade only this case (its number in the report; "
                                             "with --ex and --seed)")
    ap.add_argument("--json", help="also write the results to this file, every case included")
    ap.add_argument("--verbose", action="store_true",
                    help="under a failure, list every failing case of the test and why")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "emu"],
                    help="cuda: the CUDA exercises on a GPU; emu: the same tests on libxt's "
                         "emulated device (no GPU needed)")
    ap.add_argument("--watchdog", type=float, default=10.0,
                    help="seconds a case may run before it counts as hung (default 10)")
    ap.add_argument("--max-np", type=int, default=8, help="largest world size to grade at")
    ap.add_argument("--san", action="store_true",
                    help="build and run with AddressSanitizer, under build/san/ (make grade SAN=1)")
    ap.add_argument("--coverage", action="store_true",
                    help="build for gcov, under build/cov/ (grader/coverage.py's runs)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--margins", action="store_true",
                    help="after the report, each test's worst passing error as a fraction of "
                         "its tolerance (for measuring tolerances; also in the JSON)")
    ap.add_argument("--list", action="store_true", help="list the lectures (make lectures)")
    ap.add_argument("--readme", help="rewrite this README's table of lectures (make readme)")
    return ap.parse_args(argv)


class UsageError(Exception):
    """A request the grade refuses (exit status 2), with the line that says why."""


@dataclasses.dataclass
class Request:
    """What was asked, checked: the lectures, the seed, the tree, the device."""
    args: argparse.Namespace
    chosen: list
    seed: int
    tree: str
    tag: str
    version: str
    test_device: str  # the tests' device: "cuda" for DEVICE=cuda and DEVICE=emu
    gpu: bool


@dataclasses.dataclass
class Tally:
    """What the grade found so far, across lectures."""
    total: int = 0
    possible: int = 0
    matched: int = 0  # tests selected
    slowest_start: float = 0.0
    margins: dict = dataclasses.field(default_factory=dict)
    case_results: list = dataclasses.field(default_factory=list)  # with CASE=: that case's
    drill_lines: list = dataclasses.field(default_factory=list)  # what make drill's clock said
    lectures_json: list = dataclasses.field(default_factory=list)


# Who hears each exercise's results: make drill's clock (drill.graded), which times a drill
# under way and ends it at full marks. Called as listener(lecture, exercise, results,
# counted) -> lines to print; only for the student tree.
LISTENERS = [drill.graded]


def check_request(args):
    """The Request, or UsageError: tools installed, the lecture known, options that go
    together."""
    missing = tool_problems()
    if missing:
        pkgs = sorted({p for _, p in missing})
        raise UsageError(f"grade: missing {', '.join(t for t, _ in missing)}; install them "
                         f"with:\n  sudo apt-get install -y {' '.join(pkgs)}\n(or run: make deps)")
    if args.lc:
        lec = lectures.resolve(args.lc)
        if not lec:
            raise UsageError(f"grade: no lecture {args.lc!r}; there are: "
                             f"{', '.join(lectures.names())}")
        chosen = [lec]
    else:
        chosen = lectures.names()
    if args.coverage and (args.san or args.device != "cpu"):
        raise UsageError("grade: --coverage builds the CPU programs for gcov alone: no --san, "
                         "no --device")
    if args.san and args.device != "cpu":
        raise UsageError(f"grade: SAN=1 builds the CPU programs with AddressSanitizer; DEVICE="
                         f"{args.device} grades the CUDA exercises, which it does not cover: "
                         f"drop one")
    if args.case is not None and (args.seed is None or not args.ex):
        # A case's number depends on the seed (some tests draw their cases) and the exercise.
        raise UsageError("grade: CASE= names a case of one exercise's run: give its EX= and "
                         "SEED= too, as the report's rerun line does")
    seed = args.seed if args.seed is not None else random.randrange(10**7, 10**8)
    # DEVICE=emu grades the CUDA exercises' tests, their .cu files built for the emulated
    # device (build/emu/, common/xt_cuda_emu.h).
    return Request(args, chosen, seed, "solutions" if args.sol else (args.tree or "."),
                   tree_tag(args), launch.mpi_flavor()[1],
                   "cuda" if args.device == "emu" else args.device,
                   launch.has_gpu() if args.device == "cuda" else False)


def select_tests(req, mod):
    """(the tests to run, their exercises in order, {exercise: every test of it on this
    device}) for one lecture's manifest; EX= picks an exact name, else a substring."""
    args = req.args
    tests = [t for t in mod.TESTS if getattr(t, "device", "cpu") == req.test_device]
    if args.ex:
        exact = [t for t in tests if args.ex in (t.exercise, t.name)]
        tests = exact or [t for t in tests if args.ex in t.exercise or args.ex in t.name]
    exercises = []
    for t in tests:
        if t.exercise not in exercises:
            exercises.append(t.exercise)
    every = {ex: [t for t in mod.TESTS if t.exercise == ex
                  and getattr(t, "device", "cpu") == req.test_device] for ex in exercises}
    if args.case is not None and tests:
        if len(exercises) > 1:
            raise UsageError(f"grade: CASE= is a case of one exercise; EX={args.ex} matches "
                             f"{', '.join(exercises)}")
        tests = case_tests(args, tests, harness.numbered_cases(every[exercises[0]], req.seed))
        if isinstance(tests, str):
            raise UsageError(tests)
    return tests, exercises, every


def build_dir_of(args):
    if args.coverage:
        return os.path.join("build", "cov")
    if args.device == "emu":
        return os.path.join("build", "emu")
    return os.path.join("build", "san") if args.san else "build"


def grade_exercise(req, lec, ex, ex_tests, every, source, binary, failed, tally):
    """One exercise's results: BUILD (missing, or the compiler's errors), RULE (a forbidden
    call in its object), or its cases run."""
    if not os.path.exists(source):
        return [harness.TestResult(t, verdict="BUILD", lines=[f"{source} does not exist"])
                for t in ex_tests]
    if binary in failed:
        errs = (builds.driver_left_in(source, failed[binary]) +
                builds.build_errors(failed[binary]))
        return [harness.TestResult(t, verdict="BUILD", lines=list(errs)) for t in ex_tests]
    bad = forbidden(req, ex_tests, source, binary)
    if bad:
        return [harness.TestResult(t, verdict="RULE", lines=[f"{source} {bad[0]}"])
                for t in ex_tests]
    runner = runner_of(req, lec, ex, every, source, binary)
    results = runner.run(ex_tests)
    ran(runner, tally)
    return results


def forbidden(req, ex_tests, source, binary):
    """The forbidden calls the exercise's object makes (builds.forbidden_calls)."""
    extra = [f for t in ex_tests for f in t.forbidden]
    obj = ".cu.o" if req.args.device == "cuda" else ".o"
    return builds.forbidden_calls(binary + obj, extra, source)


def runner_of(req, lec, ex, every, source, binary):
    args = req.args
    runner = harness.Runner(
        harness.Exercise(lec, ex, source, binary, every[ex]),
        req.seed, work_dir(req.tag, lec, ex), watchdog=args.watchdog,
        max_np=args.max_np, only=args.case, verbose=args.verbose,
        san=args.san, test_watchdogs=args.device != "emu")
    runner.keep_margins = args.margins
    return runner


def ran(runner, tally):
    tally.slowest_start = max(tally.slowest_start, runner.start_seconds)
    tally.margins.update(runner.margins)


def shares_launches(req, exercises):
    """Whether this grade runs its lecture's exercises in resident launches (resident.py):
    not where one program per exercise is the point (CASE=, SAN=1, DEVICE=)."""
    args = req.args
    return (len(exercises) > 1 and args.case is None and not args.san
            and args.device == "cpu" and resident.enabled())


def grade_resident(req, lec, tests, exercises, every, sources, binaries, failed, program,
                   tally):
    """{exercise: results} of the exercises that passed in resident launches; the others
    are left to grade_exercise."""
    if not program or program in failed or not os.path.exists(program):
        return {}
    members = []
    for ex in exercises:
        ex_tests = [t for t in tests if t.exercise == ex]
        if (binaries[ex] in failed or not resident.runnable(binaries[ex], ex_tests)
                or forbidden(req, ex_tests, sources[ex], binaries[ex])):
            continue
        members.append(resident.Member(ex, runner_of(req, lec, ex, every, sources[ex],
                                                     binaries[ex]), ex_tests))
    passed = resident.grade(members, program, work_dir(req.tag, lec, "resident"))
    for m in members:
        if m.name in passed:
            ran(m.runner, tally)
    return passed


def grade_lecture(req, lec, report, tally):
    """One lecture: its header line, its exercises built and graded, its score line, its
    JSON entry."""
    args = req.args
    mod = lectures.load(lec)
    tests, exercises, every = select_tests(req, mod)
    if not tests:
        return
    tally.matched += len(tests)
    numbered = {}
    for ex in exercises:
        numbered.update(harness.numbered_cases(every[ex], req.seed))
    nps = sorted({c.np for t in tests for c in numbered[t.name] if c.np <= args.max_np})
    where = "solutions/" if args.sol else (args.tree or "student tree")
    alone = f"   case {args.case} alone" if args.case is not None else ""
    san = "   AddressSanitizer" if args.san else ""
    emu = "   emulated device" if args.device == "emu" else ""
    ext = ".cu" if req.test_device == "cuda" else ".c"
    sources = {ex: os.path.normpath(os.path.join(req.tree, lec, ex + ext)) for ex in exercises}
    binaries = {ex: os.path.join(build_dir_of(args), os.path.splitext(src)[0])
                for ex, src in sources.items()}
    skipped = args.device == "cuda" and not req.gpu
    program = None
    if not skipped:
        present = [ex for ex in exercises if os.path.exists(sources[ex])]
        build = build_dir_of(args)
        if shares_launches(req, present):
            program = resident.program_of(binaries[present[0]], build)
            resident.write_list(program, [binaries[ex] for ex in present], build)
        failed = builds.build([binaries[ex] for ex in present] + ([program] if program else []),
                              san=args.san, cov=args.coverage)
        if program in failed and any(binaries[ex] in failed for ex in present):
            # A file that does not compile keeps the others' resident program from linking.
            del failed[program]
            resident.write_list(program, [binaries[ex] for ex in present
                                          if binaries[ex] not in failed], build)
            failed.update(builds.build([program], cov=args.coverage))
        obj = ".cu.o" if args.device == "cuda" else ".o"
        builds.undefined_symbols([binaries[ex] + obj for ex in exercises])  # one nm for all
        # The MPI library as the programs name it (not the launcher, which may be srun).
        built = [binaries[ex] for ex in exercises if os.path.exists(binaries[ex])
                 and binaries[ex] not in failed]
        req.version = (launch.library_version(os.path.abspath(built[0])) if built else
                       "") or req.version
    report.line(f"{lec}   seed {req.seed}   np {','.join(map(str, nps))}   {req.version}   "
                f"{where}{alone}{san}{emu}")

    lec_results = []
    if skipped:
        for t in tests:
            r = harness.TestResult(t, verdict="SKIPPED", lines=["no GPU on this machine"])
            lec_results.append((t.exercise, r))
            report.result(t.exercise, r, "", False, scored=args.case is None)
    else:
        # The exercises a resident launch cannot take (a refusal that ends its launch) are
        # graded meanwhile, in their own launches as always: the ranks of both mostly wait.
        alone = [ex for ex in exercises if program and os.path.exists(sources[ex])
                 and binaries[ex] not in failed
                 and not resident.runnable(binaries[ex], [t for t in tests if t.exercise == ex])]
        with concurrent.futures.ThreadPoolExecutor(1) as meanwhile:
            ahead = {ex: meanwhile.submit(grade_exercise, req, lec, ex,
                                          [t for t in tests if t.exercise == ex], every,
                                          sources[ex], binaries[ex], failed, tally)
                     for ex in alone}
            shared = grade_resident(req, lec, tests, exercises, every, sources, binaries,
                                    failed, program, tally) if program else {}
            waited = time.monotonic()
            concurrent.futures.wait(ahead.values())
            # What is left of the launches graded meanwhile (each counted where it ran).
            clock.add("launch", time.monotonic() - waited, count=0)
        for ex in exercises:
            ex_tests = [t for t in tests if t.exercise == ex]
            results = (shared.get(ex) or (ahead[ex].result() if ex in ahead else None) or
                       grade_exercise(req, lec, ex, ex_tests, every, sources[ex],
                                      binaries[ex], failed, tally))
            tally.case_results.extend(results)
            rerun = rerun_command(args, lec, ex, req.seed)
            debug = debug_command(args, lec, ex) if args.device == "cpu" else ""
            for r in results:
                if r.memory_damage and not args.san:
                    r.lines.append(memory_advice(args, lec, ex, req.seed))
                lec_results.append((ex, r))
                report.result(ex, r, rerun, show_dir=r.verdict not in ("TODO", "BUILD"),
                              debug=debug, scored=args.case is None)
            if not args.sol and not args.tree:
                for listener in LISTENERS:
                    said = listener(lec, ex, results, counted=args.case is None)
                    tally.drill_lines += said
                    for ln in said:
                        report.line("  " + ln)

    counted = [(ex, r) for ex, r in lec_results if r.verdict != "SKIPPED"]
    got = sum(r.points for _, r in counted)
    most = sum(r.test.points for _, r in counted)
    tally.total += got
    tally.possible += most
    if args.case is None:
        report.line(f"{lec}: {got}/{most}")
        apart = [t for t in mod.TESTS if getattr(t, "device", "cpu") == "cuda"]
        if apart and args.device == "cpu" and not args.ex:
            for ln in wrap(f"(its CUDA exercises are graded apart, {len(apart)} tests: "
                           f"make grade LC={lectures.number(lec)} DEVICE=emu, or "
                           f"DEVICE=cuda on a GPU)", "  "):
                report.line(ln)
    tally.lectures_json.append({
        "name": lec, "score": got, "max": most, "nps": nps,
        "tests": [{"exercise": ex, "test": r.test.name, "verdict": r.verdict,
                   "points": r.points, "max": r.test.points, "seconds": round(r.seconds, 4),
                   "cases_run": r.cases_run, "cases_failed": r.cases_failed,
                   "case": r.case.number if r.case is not None else None,
                   "details": r.lines, "cases": [case_json(o) for o in r.cases]}
                  for ex, r in lec_results]})


def summarize(req, report, tally, elapsed):
    """The lines after the lectures: a slow start explained, a drill under way elsewhere, the
    score (or one case's verdict), the margins if asked."""
    args = req.args
    note = harness.slow_start_note(tally.slowest_start, socket.gethostname(), host_resolves())
    if note:
        for ln in wrap(note, ""):
            report.line(ln)
    if not tally.drill_lines and not args.sol and not args.tree:
        other = drill.under_way()
        if other:
            report.line(other)
    if args.case is not None:
        # One case is no grade: its verdict, not points.
        verdict = next((r.verdict for r in tally.case_results if r.verdict != "OK"), "OK")
        report.line(f"Case {args.case}: {verdict} (one case: no score)   ({elapsed:.1f} s)")
    else:
        report.line(f"Score: {tally.total}/{tally.possible}   ({elapsed:.1f} s)")
    if args.margins:
        for name, (ratio, label, output) in sorted(tally.margins.items()):
            report.line(f"margin  {name:24} {ratio:9.2e} of the tolerance   ({label}: "
                        f"'{output}')")


def write_json(req, tally, elapsed):
    with open(req.args.json, "w") as f:
        json.dump({"seed": req.seed, "tree": req.tree, "mpi": req.version,
                   "lectures": tally.lectures_json, "score": tally.total,
                   "max": tally.possible, "seconds": round(elapsed, 2), "case": req.args.case,
                   "drill": tally.drill_lines,
                   "margins": {k: v[0] for k, v in tally.margins.items()},
                   "profile": clock.profile(elapsed)}, f, indent=1)


def main(argv=None):
    """make grade: the request checked, each lecture graded, the summary, the JSON."""
    args = parse_args(argv)
    if args.list:
        return list_lectures()
    if args.readme:
        return write_readme(args.readme)
    if args.json:
        args.json = os.path.abspath(args.json)
    os.chdir(os.path.dirname(HERE))
    launch.install_signal_handlers()
    report = Report(args.quiet)
    tally = Tally()
    try:
        req = check_request(args)
        started = time.monotonic()
        for lec in req.chosen:
            grade_lecture(req, lec, report, tally)
    except UsageError as e:
        print(e, file=sys.stderr)
        return 2
    if not tally.matched:
        what = f" matching EX={args.ex}" if args.ex else ""
        dev = f" for DEVICE={args.device}" if args.device != "cpu" else ""
        print(f"grade: no tests{what}{dev}", file=sys.stderr)
        return 2
    elapsed = time.monotonic() - started
    summarize(req, report, tally, elapsed)
    if args.json:
        write_json(req, tally, elapsed)
    return 0 if tally.total == tally.possible else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("\ngrade: interrupted; every process it started is gone", file=sys.stderr)
        sys.exit(130)
