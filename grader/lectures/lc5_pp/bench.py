"""make bench LC=5 [NP=n] [SOL=0] [ARGS="..."]: lecture 5's pipeline
schedules on a model whose stages cost the same, at np 2 (NP=n: that one).

For each schedule whose program is written (pp_basic at M = 1, pp_gpipe,
pp_1f1b, pp_interleaved, pp_zero_bubble, pp_dualpipe) and each M, the program runs one
training step in case mode, as the grader runs it, a few rounds. From the
case records:

- step: the step's time (the slowest rank's; best and median of the rounds);
- bubble measured: the share of the step a rank spent outside its stage
  calls (the mean over ranks, from the logged start and end of every call),
  waiting or passing messages;
- unit time: the same share in the unit-time replay of the logged order
  (F = 1, B = 2, its split parts 1 each), and the schedule's formula beside
  it, which the replay must equal;
- in flight: the most micro-batches any rank had forwarded and not yet
  backward, and activations: the largest XT_MEM_ACTIVATIONS peak of a rank;
- every rank's gradients against one process's step (NumPy), so that a fast
  wrong schedule is not a result.

Writes JSON under build/bench/ and, per schedule, the measured timeline of
the largest M as an SVG under build/bench/timelines/ (time in units of the
mean forward call, so that it compares with the unit-time picture).
docs/lc5_pp.md (The bench) explains it.
"""

import os
import re
import shutil
import statistics
import sys
import textwrap

import numpy as np

import compare
import records
import launch
import spec
from benchlib import TrainingRun, build_program, ms, tree_of
from testkit import bench_results, fresh, mutant_tree, run_bench, tail
from lectures.lc5_pp import pp, schedule
from lectures.lc5_pp.events import StageCall

ABOUT = "one batch, GPipe, 1F1B, interleaved, ZB-H1 and DualPipe steps: time, bubble measured and " \
        "formula, in-flight micro-batches, activation memory"


def bubble_gpipe(p, m, v):
    return (p - 1) / (m + p - 1)


def bubble_interleaved(p, m, v):
    return (p - 1) / (v * m + p - 1)


def bubble_dual(p, m, v):
    return (p // 2 - 1) / (3 * m + p // 2 - 1)


def bubble_zb(p, m, v):
    return (p - 1) / (3 * m + p - 1) if m >= p else None


# name: (program, chunks per rank, formula of the idle share (None: none stated), its text)
SCHEDULES = {
    "basic": ("pp_basic", 1, bubble_gpipe, "(p-1)/p"),
    "gpipe": ("pp_gpipe", 1, bubble_gpipe, "(p-1)/(M+p-1)"),
    "1f1b": ("pp_1f1b", 1, bubble_gpipe, "(p-1)/(M+p-1)"),
    "interleaved": ("pp_interleaved", 2, bubble_interleaved, "(p-1)/(vM+p-1)"),
    "zb_h1": ("pp_zero_bubble", 1, bubble_zb, "(p-1)/(3M+p-1)"),
    "dualpipe": ("pp_dualpipe", 2, bubble_dual, "(p/2-1)/(3M+p/2-1)"),
}
MS = "1,2,4,8,16"
# The docs' picture: every written schedule at np 4, M 8, replayed in unit time from the
# solution's own stage log. make bench writes it; make test checks the docs' copy against it.
FIGURE = os.path.join("docs", "lc5_schedules.svg")
FIGURE_NP, FIGURE_M = 4, 8
TITLES = {"basic": "one batch, no micro-batches (pp_basic)", "gpipe": "GPipe", "1f1b": "1F1B", "interleaved": "interleaved 1F1B, v=2",
          "zb_h1": "ZB-H1", "dualpipe": "DualPipe"}




def add_options(g):
    g.add_argument("--schedules", default=",".join(SCHEDULES),
                   help=f"comma-separated, of {', '.join(SCHEDULES)} (default all written)")
    g.add_argument("--ms", default=MS, help=f"micro-batch counts (default {MS})")
    g.add_argument("--width", type=int, default=512, help="every layer's width (default 512)")
    g.add_argument("--layers-per-stage", type=int, default=2, help="(default 2)")
    g.add_argument("--mb-rows", type=int, default=64, help="rows per micro-batch (default 64)")
    g.add_argument("--no-figure", action="store_true",
                   help=f"skip the picture of every schedule at np {FIGURE_NP}, M {FIGURE_M}")


def note(text):
    print("\n".join(textwrap.wrap(text, 98, initial_indent="# ", subsequent_indent="#   ")))


def bench_case(name, np_, M, args):
    """The case's parameters and a Case: np equal stages of layers_per_stage layers of width
    (at least one layer per interleaved chunk)."""
    program, chunks, _, _ = SCHEDULES[name]
    fn = "pp_basic_step" if name == "basic" else program + "_step"
    # The same model for every schedule: np stages' worth of layers (interleaved chunks
    # hold a share of a stage's, DualPipe's copies hold a stage each).
    layers = max(np_ * args.layers_per_stage, np_ * chunks if name == "interleaved" else 1)
    params = {"fn": fn, "dims": ",".join([str(args.width)] * (layers + 1)),
              "act": "relu", "loss": "mse", "M": M, "mb_rows": args.mb_rows}
    if name == "interleaved":
        params["v"] = chunks
    return spec.Case(None, np_, params)


def valid_ms(name, np_, ms_):
    if name == "basic":
        return [1]
    if name == "interleaved":
        return [m for m in ms_ if m % np_ == 0]
    if name == "dualpipe":
        return [m for m in ms_ if np_ % 2 == 0 and m % 2 == 0 and m >= 2 * np_]
    return ms_


def write_plan(work, plan, args):
    """cases.txt and every case's inputs (pp.pipeline_inputs: one group); returns the
    inputs per case."""
    lines = ["# make bench LC=5: one pipeline step per case"]
    inputs = []
    for k, case in enumerate(plan):
        cdir = os.path.join(work, f"c{k}")
        os.makedirs(cdir)
        inp = inputs_of(case, np.random.default_rng(2026 + k))
        records.write_inputs(cdir, 0, inp)
        inputs.append(inp)
        params = " ".join(f"{key}={val}" for key, val in case.params.items())
        lines.append(f"case {k} np={case.np} {params} watchdog={args.timeout:.0f}")
    with open(os.path.join(work, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    return inputs


def inputs_of(case, rng):
    if case["fn"] == "pp_dualpipe_step":
        return pp.dual_inputs(case, rng)
    return pp.pipeline_inputs(case, rng)


def reference_of(case, inputs):
    if case["fn"] == "pp_dualpipe_step":
        return pp.dual_reference(case, inputs)
    return pp.pipeline_reference(case, inputs)


def measure(name, np_, ms_, rounds, args, tree, work, env):
    """One launch of the schedule's program: every M, `rounds` times. Returns (rows,
    skipped message or None, errors, the records of the largest M's last round)."""
    program = SCHEDULES[name][0]
    binary, why = build_program(tree, program)
    if binary is None:
        return [], why, [], None
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    plan = [bench_case(name, np_, M, args) for M in ms_ for _ in range(rounds)]
    inputs = write_plan(work, plan, args)
    # MPI_Send as a real run has it (buffered while small), not the grader's strict mode.
    cmd = launch.mpirun_command(np_, [os.path.abspath(binary), "--cases", os.path.abspath(work),
                                      "--no-strict"])
    out = []
    res = launch.run(cmd, timeout=args.timeout, env=env, on_line=out.append)
    todo = [ln for ln in out if " TODO " in ln]
    if todo:
        where = re.search(r"(\S+\.c:\d+)", todo[0])
        return [], f"{tree}/{program}.c is not written yet (TODO at " \
                   f"{where.group(1) if where else '?'})", [], None
    if res.timed_out or res.returncode != 0:
        return [], None, [f"{name} np {np_}: the launch {'timed out' if res.timed_out else 'failed'}"
                          f" (exit {res.returncode}); rerun: {launch.shell_line(cmd)}"], None
    errors, rows, last = [], [], None
    for M in ms_:
        steps, shares, unit, flights, peaks = [], [], None, 0, 0
        for k, case in enumerate(plan):
            if case["M"] != M:
                continue
            cdir = os.path.join(work, f"c{k}")
            recs = [records.read_record(records.outputs_path(cdir, 0, r))
                    for r in range(np_)]
            if any(rec is None for rec in recs):
                errors.append(f"{name} np {np_} M {M}: a rank wrote no record")
                break
            wrong = check_values(case, inputs[k], cdir)
            if wrong:
                errors.append(f"{name} np {np_} M {M}: {wrong}")
                break
            t = max(rec.seconds for rec in recs)
            steps.append(t)
            busy = [sum(c.end - c.start for c in rec.stages) for rec in recs]
            shares.append(statistics.mean(max(0.0, 1 - b / t) for b in busy) if t > 0 else 0.0)
            rp = schedule.replay({r: rec.stages for r, rec in enumerate(recs)}, pp.nlayers(case))
            unit = (statistics.mean(rp.idle(r) / rp.makespan for r in range(np_))
                    if rp.makespan and not rp.stuck else None)
            flights = max(schedule.in_flight(rec.stages) for rec in recs)
            peaks = max(rec.memory.get("activations", (0, 0))[1] for rec in recs)
            last = (case, recs)
        if len(steps) < rounds:
            continue
        formula = SCHEDULES[name][2]
        v = SCHEDULES[name][1]
        want = formula(np_, M, v) if formula else None
        if want is not None and unit is not None and abs(unit - want) > 1e-9:
            errors.append(f"{name} np {np_} M {M}: the unit-time bubble is {unit:.4f}, the "
                          f"formula {SCHEDULES[name][3]} gives {want:.4f}")
        rows.append({"schedule": name, "np": np_, "M": M, "best": min(steps),
                     "median": statistics.median(steps), "bubble": statistics.median(shares),
                     "unit": unit, "formula": want, "in_flight": flights,
                     "activations": peaks})
    return rows, None, errors, last


def check_values(case, inputs, cdir):
    """'' when every rank's outputs match one process's step, else the first difference."""
    expected = reference_of(case, inputs)
    arrays = records.rank_arrays(cdir, 0, len(expected))
    for r, want in enumerate(expected):
        for key, exp in want.items():
            got = arrays[r].get(key)
            tol = pp.pipeline_tolerance(case, inputs, key, r)
            if isinstance(tol, spec.OfScale):
                tol = tol.bound([e[key] for e in expected if key in e])
            msg = compare.compare(key, exp, got, tol, r)
            if msg:
                return msg
    return ""


def measured_svg(name, case, recs, out):
    """The last round's calls at their measured times, in units of the mean forward."""
    forwards = [c.end - c.start for rec in recs for c in rec.stages if c.op == "F"]
    unit = statistics.mean(forwards) if forwards else 1.0
    t0 = min((c.start for rec in recs for c in rec.stages), default=0.0)
    boxes = [schedule.Box(r, c.op, c.mb, c.chunk, (c.start - t0) / unit, (c.end - t0) / unit,
                          c.first, c.count)
             for r, rec in enumerate(recs) for c in rec.stages]
    span = max((b.end for b in boxes), default=0.0)
    rp = schedule.Replay(boxes, span, {}, [])
    os.makedirs(os.path.join(out, "timelines"), exist_ok=True)
    path = os.path.join(out, "timelines", f"{name}_np{case.np}_M{case['M']}.svg")
    with open(path, "w") as f:
        f.write(schedule.svg_timeline(rp, range(case.np),
                                      f"{name}, np={case.np}, M={case['M']}: measured, time in "
                                      f"mean forwards ({unit * 1e3:.2f} ms)"))
    return path


def figure(tree, work, env, timeout):
    """The schedules' timelines one above the other (an SVG's text), from one case of each
    written program at np 4, M 8 on a small model; and what was skipped."""
    panels, skipped = [], []
    args = type("Args", (), {"layers_per_stage": 1, "width": 4, "mb_rows": 1,
                             "timeout": timeout})()
    for name in SCHEDULES:
        binary, why = build_program(tree, SCHEDULES[name][0])
        if binary is None:
            skipped.append(why)
            continue
        d = os.path.join(work, f"figure_{name}")
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        case = bench_case(name, FIGURE_NP, 1 if name == "basic" else FIGURE_M, args)
        write_plan(d, [case], args)
        cmd = launch.mpirun_command(FIGURE_NP, [os.path.abspath(binary), "--cases",
                                                os.path.abspath(d)])
        res = launch.run(cmd, timeout=timeout, env=env)
        recs = [records.read_record(records.outputs_path(os.path.join(d, "c0"), 0, r))
                for r in range(FIGURE_NP)]
        if res.returncode != 0 or any(rec is None for rec in recs):
            skipped.append(f"{name}: its figure case failed (exit {res.returncode})")
            continue
        # Interleaved chunks are 1/v of a stage: their calls drawn at that scale.
        v = SCHEDULES[name][1] if name == "interleaved" else 1
        rp = schedule.replay({r: rec.stages for r, rec in enumerate(recs)}, pp.nlayers(case),
                             scale=1 / v)
        title = (f"{TITLES[name]}: idle {rp.idle(0):g} of {rp.makespan:g} units on rank 0"
                 + (f" (a chunk's call is 1/{v} of a stage's)" if v > 1 else ""))
        panels.append((rp, range(FIGURE_NP), title))
    return (schedule.svg_stack(panels) if panels else None), skipped


TABLE = "{:<12} {:>3} {:>3} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>11}"


def run(args):
    names = [n.strip() for n in args.schedules.split(",") if n.strip()]
    try:
        ms_ = sorted({int(m) for m in args.ms.split(",")})
    except ValueError:
        ms_ = []
    if (not names or set(names) - set(SCHEDULES) or not ms_ or min(ms_) < 1 or args.width < 1
            or args.layers_per_stage < 1 or args.mb_rows < 1):
        print(f"bench: --schedules of {', '.join(SCHEDULES)}; --ms positive integers; "
              f"--width, --layers-per-stage, --mb-rows positive", file=sys.stderr)
        return 2
    tree = tree_of(args, "lc5_pp")
    nps = [args.np] if args.np else [2]
    rounds = args.rounds if args.rounds is not None else 3
    trun = TrainingRun(5, args, "pipeline schedules: step time, bubble and memory", tree, nps)
    note(f"model: {args.layers_per_stage} ReLU layers of width {args.width} per stage (stages of "
         f"equal cost; the same model for every schedule: an interleaved chunk holds 1/v of a "
         f"stage's layers, each DualPipe copy a stage's), micro-batches of {args.mb_rows} rows, a mean squared error loss")
    note(f"step: ms per training step, the slowest rank's, best and median of {rounds} rounds; "
         f"bubble: the mean share of the step a rank spent outside its stage calls (measured: "
         f"waiting and passing messages), the same in the unit-time replay of the logged order "
         f"(F=1, B=2, split parts 1), and the formula; in flight: the most micro-batches "
         f"forwarded and not yet backward on a rank; act: the largest activation peak of a rank")
    note("the measured bubble also holds the time in MPI calls: a blocking send of a message "
         "above MPI's eager limit waits until its receiver takes it, so neighbours run in step; "
         "the unit-time model counts compute only")
    env = launch.mpi_env()
    env.pop("XT_TRACE", None)
    out = args.out
    results, failures, skipped = [], [], []
    print(TABLE.format("schedule", "np", "M", "best ms", "median", "bubble", "unit-time",
                       "formula", "in flight", "act KB"))
    for name in names:
        for np_ in nps:
            m_list = valid_ms(name, np_, ms_)
            if not m_list:
                skipped.append(f"{name} at np {np_}: no valid M in {args.ms}")
                continue
            work = os.path.join(out, "lc5_work", f"{name}_np{np_}")
            rows, why, errors, last = measure(name, np_, m_list, rounds, args, tree, work, env)
            if why:
                if why not in skipped:
                    skipped.append(why)
                break
            failures += errors
            for e in errors:
                print(f"ERROR: {e}")
            for row in rows:
                results.append(row)
                print(TABLE.format(name, np_, row["M"], ms(row["best"]), ms(row["median"]),
                                   f"{100 * row['bubble']:.0f}%",
                                   "-" if row["unit"] is None else f"{100 * row['unit']:.0f}%",
                                   "-" if row["formula"] is None else f"{100 * row['formula']:.0f}%",
                                   row["in_flight"], f"{row['activations'] / 1024:.0f}"))
            if last:
                print(f"#   measured timeline: {measured_svg(name, *last, out)}")
    svg = None if args.no_figure else figure(tree, os.path.join(out, "lc5_work"), env,
                                             args.timeout)[0]
    if svg:
        path = os.path.join(out, "timelines", "lc5_schedules.svg")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(svg)
        print(f"# the schedules at np {FIGURE_NP}, M {FIGURE_M}, in unit time: {path} (the docs' "
              f"copy: {FIGURE})")
    return trun.finish("lc5_pp", {"runs": results, "width": args.width,
                                  "layers_per_stage": args.layers_per_stage,
                                  "mb_rows": args.mb_rows, "rounds": rounds}, skipped, failures)


SMALL = ["--lc", "5", "--np", "2", "--ms", "2,3", "--width", "8", "--mb-rows", "2",
         "--rounds", "1", "--warmup", "0", "--schedules", "gpipe"]


def selftest(s):
    """make test: the schedule replay's own checks, the bench on a small model, and a
    schedule it must reject."""
    s.section("bench (make bench LC=5, a small model)")
    test_schedule_replay(s)
    out = fresh("bench5")
    rc, text, took = run_bench(SMALL, out)
    problems = [] if rc == 0 else tail(text)
    runs = bench_results(os.path.join(out, "lc5_pp_np2.json"), problems, {"runs": []})["runs"]
    if [(r["schedule"], r["M"]) for r in runs] != [("gpipe", 2), ("gpipe", 3)]:
        problems.append(f"rows: {runs}")
    for r in runs:
        if not (r["unit"] == r["formula"] and r["best"] > 0 and r["in_flight"] == r["M"]):
            problems.append(f"row: {r}")
    if not os.path.exists(os.path.join(out, "timelines", "gpipe_np2_M3.svg")):
        problems.append("no measured timeline")
    s.record("bench LC=5: GPipe at np=2, M 2 and 3, its values checked, the unit-time bubble "
             "equal to the formula, M in flight, a measured timeline drawn", not problems,
             problems, f"({took:.1f} s)")
    tree = mutant_tree("bench5_mutant", "lc5_pp", "gpipe_loss_over_np")
    rc, out_, took = run_bench(SMALL + ["--no-figure"], os.path.join(tree, "out"), tree)
    with open(os.path.join(out, "timelines", "lc5_schedules.svg")) as f:
        drawn = f.read()
    with open(FIGURE) as f:
        docs = f.read()
    s.record(f"bench LC=5: the docs' picture of the schedules ({FIGURE}) is the one the "
             f"solutions' stage logs draw", drawn == docs,
             [f"make bench LC=5 drew {os.path.join(out, 'timelines', 'lc5_schedules.svg')}; "
              f"copy it to {FIGURE}"])
    s.record("bench LC=5: a GPipe whose loss is divided by np is reported and fails the run",
             rc == 1 and re.search(r"ERROR: gpipe np 2 M 3: rank 0 'grads'", out_), tail(out_),
             f"({took:.1f} s)")


def test_schedule_replay(s):
    """Lecture 5's unit-time replay: each schedule's definition, replayed, idles exactly its
    formula on every rank; an order that cannot run is named (negative control)."""
    sch = schedule
    def logs(ops_of_rank, p, v=1):
        return {r: [StageCall(o.op, o.mb, o.chunk, 0.0, 0.0, o.chunk * p + r, 1)
                    for o in ops_of_rank(r)] for r in range(p)}

    bad = []
    for p in (1, 2, 3, 4):
        for m in range(1, 10):
            kinds = [("gpipe", lambda r: sch.gpipe(p, m, r), 1),
                     ("1f1b", lambda r: sch.one_f_one_b(p, m, r), 1)]
            if m >= p:
                kinds.append(("zb_h1", lambda r: sch.zb_h1(p, m, r), 1))
            if m % p == 0:
                kinds += [("interleaved", lambda r, v=v: sch.interleaved(p, m, v, r), v)
                          for v in (2, 3)]
            for kind, ops, v in kinds:
                rp = sch.replay(logs(ops, p, v), p * v)
                want = sch.bubble_formula(kind, p, m, v)[0]
                idle = {rp.idle(r) for r in range(p)}
                if rp.stuck or idle != {want}:
                    bad.append(f"{kind} p={p} M={m} v={v}: idle {sorted(idle)}, formula {want}, "
                               f"stuck {rp.stuck}")
    s.record("schedule replay: GPipe, 1F1B, interleaved (v=2, 3) and ZB-H1 idle exactly their "
             "formulas, np 1-4, M 1-9", not bad, bad[:5])
    bad = sch.dualpipe_problems()
    s.record("schedule replay: DualPipe, np 2-8, M 2np..2np+6: every micro-batch once per stage "
             "on its half's chunks, each W after its I; it runs, idles exactly np/2-1, at most "
             "np+1 in flight; full backwards idle more (negative control)", not bad, bad[:5])
    # Rank 0 runs B0 before rank 1, the last stage, has run its own: it can never start.
    wrong = {0: [StageCall("F", 0, 0, 0, 0, 0, 1), StageCall("B", 0, 0, 0, 0, 0, 1)],
             1: [StageCall("B", 0, 0, 0, 0, 1, 1), StageCall("F", 0, 0, 0, 0, 1, 1)]}
    rp = sch.replay(wrong, 2)
    s.record("schedule replay: a backward before its forward is named as an order that cannot "
             "run (negative control)",
             bool(rp.stuck) and rp.stuck[0][0] == 0 and "backward of micro-batch 0" in
             rp.stuck[0][2] and rp.stuck[1][2].startswith("its own forward"), [repr(rp.stuck)])


# ------------------------------------------------------- the page's copy of the formulas

# The page's summary table: which row is which schedule.
PAGE_ROWS = {"basic": "one batch (`pp_basic`)", "gpipe": "GPipe", "1f1b": "1F1B",
             "interleaved": "interleaved 1F1B, v chunks", "zb_h1": "ZB-H1 (M ≥ p)",
             "dualpipe": "DualPipe (p even, M ≥ 2p"}


def formula_value(text, p, m, v):
    """A bubble formula as the page and the bench write it ('(p-1)/(vM+p-1)'), evaluated."""
    expr = re.sub(r"(\d|\))([a-zA-Z(])", r"\1*\2", text.replace("vM", "v*M"))
    return eval(expr, {"__builtins__": {}}, {"p": p, "M": m, "v": v})


def page_figures(page):
    """What docs/lc5_pp.md repeats of the bench: each schedule's bubble fraction in the
    summary table is the bench's formula text, and that text is the bench's formula function
    (both evaluated where the schedule runs); the bench's defaults the page quotes. The
    measured columns are the machine's. Returns [problem]."""
    problems = []
    cells = {}
    for line in page.splitlines():
        parts = [c.strip() for c in line.strip().strip("|").split("|")]
        for key, name in PAGE_ROWS.items():
            if line.startswith("| " + name) and len(parts) >= 4:
                cells[key] = parts[3]
    for key, (_, chunks, function, text) in SCHEDULES.items():
        cell = cells.get(key)
        if cell is None:
            problems.append(f"docs/lc5_pp.md: the summary table has no row for {PAGE_ROWS[key]}")
            continue
        if not cell.startswith(text):
            problems.append(f"docs/lc5_pp.md: {PAGE_ROWS[key]}'s bubble fraction is '{cell}'; "
                            f"the bench's formula is {text}")
        for p in (2, 4, 8):
            for m in ((1,) if key == "basic" else (2 * p, 4 * p)):  # one batch: M = 1
                want = function(p, m, chunks)
                if want is not None and abs(formula_value(text, p, m, chunks) - want) > 1e-12:
                    problems.append(f"grader/lectures/lc5_pp/bench.py: {key}'s text {text} gives "
                                    f"{formula_value(text, p, m, chunks):.4f} at p={p} M={m}, its "
                                    f"function {want:.4f}")
    quoted = re.search(r'ARGS="--ms ([\d,]+) --width (\d+) --mb-rows (\d+)"', page)
    defaults = (MS, "512", "64")
    if not quoted or quoted.groups() != defaults:
        problems.append(f"docs/lc5_pp.md: the bench's defaults quoted as "
                        f"{quoted.groups() if quoted else None}; the bench's are {defaults}")
    return problems


# make test's negative control of page_figures: ZB-H1's fraction with 2M for 3M.
PAGE_BREAK = ("| (p-1)/(3M+p-1) |", "| (p-1)/(2M+p-1) |")
