"""make bench LC=3 [NP=n] [SOL=0] [ARGS="..."]: memory, traffic and step time of
lecture 3's data-parallel Adam (dp_adam_step) and ZeRO stages 1, 2 and 3
(zero1_step, zero2_step, zero3_step), at np 1, 2 and 4 (NP=n: that one only):
per rank, the peak bytes of each memory kind over the training steps and the
bytes of the MPI calls per step, each beside lecture 3's formula and checked
against it, the step time, and the classic mixed-precision ZeRO formula for
comparison. Every stage's losses and final weights must be stage 0's. Writes
JSON under build/bench/. docs/lc3_zero.md (Memory and traffic) explains it.
Measured by build/bench/solutions/lc3_zero/bench
(grader/lectures/lc3_zero/bench.c), one launch per np.
"""

import os
import re
import sys
import time

import launch
from benchlib import build_bench, Launch, ms, TrainingRun, tree_of
from testkit import bench_results, fresh, mutant_tree, run_bench, tail

ABOUT = "ZeRO stages 0-3 at np 1, 2, 4: each rank's memory by kind and bytes per step, " \
        "beside the formulas"

# The model of bench.c.
DIMS = "256,512,512,512,512,256"


def add_options(g):
    g.add_argument("--stages", default="0,1,2,3",
                   help="comma-separated stages: 0 distributed_adam, 1 adam_zero1, 2 adam_zero2, "
                        "3 adam_zero3 (default all; without 0 nothing is compared)")
    g.add_argument("--check-steps", type=int, default=3,
                   help="training steps measured (memory, traffic) and checked against stage 0 "
                        "(default 3)")


# (number, name in the driver's lines, exercise file)
LC3_STAGES = [(0, "dp_adam", "distributed_adam"), (1, "zero1", "adam_zero1"),
              (2, "zero2", "adam_zero2"), (3, "zero3", "adam_zero3")]
LC3_KINDS = ("params", "grads", "optimizer")
# Lecture 3's formulas, per rank (grader/lectures/lc3_zero/stages.py): the bytes of each kind's peak.
LC3_MEM_TEXT = {0: ("4PHI", "4PHI", "8PHI"), 1: ("4npS", "4PHI", "8S"),
                2: ("4npS", "4S+4L", "8S"), 3: ("4S+4L", "4S+4L", "8S")}
# Bytes in the MPI calls per rank and step (c: the parameters the rank owns, S or fewer).
LC3_BYTES_TEXT = {0: "4PHI", 1: "4PHI+4S", 2: "4PHI+4S", 3: "4PHI+8c"}
# What a ring algorithm puts on the wire per rank and step (formula).
LC3_RING_TEXT = {0: "2(np-1)/np 4PHI", 1: "2(np-1)/np 4PHI + (np-1) 4S",
                 2: "(np-1)/np 4PHI + (np-1) 4S", 3: "3(np-1)/np 4PHI"}
# The ZeRO paper's mixed-precision accounting: fp16 weights 2 PHI, fp16 gradients 2 PHI,
# fp32 master weights, m and v 12 PHI; each stage divides some of it by np.
LC3_MIXED_TEXT = {0: "2PHI+2PHI+12PHI", 1: "4PHI+12PHI/np", 2: "2PHI+14PHI/np",
                  3: "16PHI/np"}
LC3_ABOUT = [
    ("0 dp_adam", "distributed_adam.c: every rank keeps everything; one all-reduce of the "
                  "gradients per step"),
    ("1 zero1", "adam_zero1.c: Adam's m and v for the own shard only; all-reduce, update the "
                "shard, all-gather the shards"),
    ("2 zero2", "adam_zero2.c: gradients too: each layer's reduce-scattered as backward makes "
                "it, into one layer-sized buffer"),
    ("3 zero3", "adam_zero3.c: weights too: each layer all-gathered before its forward and "
                "again before its backward, freed after"),
]


def lc3_ring(stage, phi, shard, n):
    if stage == 0:
        return 2 * (n - 1) / n * 4 * phi
    if stage == 1:
        return 2 * (n - 1) / n * 4 * phi + (n - 1) * 4 * shard
    if stage == 2:
        return (n - 1) / n * 4 * phi + (n - 1) * 4 * shard
    return 3 * (n - 1) / n * 4 * phi


def lc3_mixed(stage, phi, n):
    return {0: 16 * phi, 1: 4 * phi + 12 * phi / n, 2: 2 * phi + 14 * phi / n,
            3: 16 * phi / n}[stage]


class Lc3Launch(Launch):
    """Collects one np's lines from grader/lectures/lc3_zero/bench.c."""

    def __init__(self):
        super().__init__()
        self.mem, self.calls, self.bytes, self.rows, self.checks = {}, {}, {}, {}, {}
        self.skips, self.leaks = [], {}

    def line(self, text):
        parts = text.split()
        kind = parts[0] if parts else ""
        if kind == "MEM" and len(parts) == 7:
            self.mem.setdefault(parts[1], {})[parts[2]] = {
                "min": int(parts[3]), "max": int(parts[4]), "formula": int(parts[5]),
                "nbad": int(parts[6])}
        elif kind == "CALLS" and len(parts) == 6:
            self.calls.setdefault(parts[1], {})[parts[2]] = {
                "calls": float(parts[3]), "bytes_min": int(parts[4]), "bytes_max": int(parts[5])}
        elif kind == "BYTES" and len(parts) == 7:
            self.bytes[parts[1]] = {"min": int(parts[2]), "max": int(parts[3]),
                                    "formula_min": int(parts[4]), "formula_max": int(parts[5]),
                                    "nbad": int(parts[6])}
        elif kind == "ROW" and len(parts) == 7:
            self.rows[parts[1]] = {"median": float(parts[2]), "best": float(parts[3]),
                                   "worst": float(parts[4]), "rounds": int(parts[5]),
                                   "steps": int(parts[6])}
        elif kind == "CHECK" and len(parts) >= 7:
            self.checks[parts[1]] = {"what": parts[2], "status": parts[3], "ndiff": int(parts[4]),
                                     "maxdiff": float(parts[5]),
                                     "detail": text.split(None, 6)[6]}
        elif kind == "LEAK" and len(parts) == 3:
            self.leaks[parts[1]] = int(parts[2])
        elif kind == "SKIP":
            self.skips.append(text[5:])
            if text.startswith("SKIP no stage"):
                self.skip = text[5:]
        else:
            super().line(text)


def mb(nbytes):
    return f"{nbytes / 1e6:.2f}"


def span(lo, hi):
    """'N B' or 'N..M B' (a value over the ranks)."""
    return f"{lo} B" if lo == hi else f"{lo}..{hi} B"


def lc3_cell(m, text):
    """One kind's peak: 'MB = formula', or what differs."""
    if m["nbad"] == 0 and m["min"] == m["max"] == m["formula"]:
        return f"{mb(m['max'])} = {text}"
    got = mb(m["max"]) if mb(m["min"]) == mb(m["max"]) else f"{mb(m['min'])}-{mb(m['max'])}"
    return f"{got} != {text}"


LC3_MEM_HEAD = "{:>4}  {:<10} {:<15} {:<15} {:<15} {:>7} {:>7} {:>7}   {:>6} {}"
LC3_TIME_HEAD = "{:>4}  {:<10} {:<30} {:<16} {:>6}  {:>7} {:>7}  {}"
LC3_SHORT = {"MPI_Allreduce": "Allreduce", "MPI_Iallreduce": "Iallreduce",
             "MPI_Reduce_scatter": "Reduce_scatter", "MPI_Reduce_scatter_block": "RS_block",
             "MPI_Allgather": "Allgather", "MPI_Allgatherv": "Allgatherv"}


def lc3_tables(entry):
    """(memory rows, traffic and time rows) of one np, as text lines; and the problems."""
    np_ = entry["np"]
    info = entry["info"]
    phi, shard = int(info.get("nparams", 0)), int(info.get("shard", 0))
    mem_rows, time_rows, errors = [], [], []
    for k, name, source in LC3_STAGES:
        mem = entry["mem"].get(name)
        if not mem:
            continue
        cells = [lc3_cell(mem[kind], LC3_MEM_TEXT[k][i]) if kind in mem else "-"
                 for i, kind in enumerate(LC3_KINDS)]
        pgo = sum(mem[kind]["max"] for kind in LC3_KINDS if kind in mem)
        act = mem.get("activations", {}).get("max", 0)
        tot = mem.get("total", {}).get("max", 0)
        mixed = lc3_mixed(k, phi, np_)
        mem_rows.append(LC3_MEM_HEAD.format(np_, f"{k} {name}", *cells, mb(pgo), mb(act), mb(tot),
                                            mb(mixed), LC3_MIXED_TEXT[k]))
        for i, kind in enumerate(LC3_KINDS):
            m = mem.get(kind)
            if m and m["nbad"]:
                errors.append(f"np {np_}: {name}'s {kind} peaked at {span(m['min'], m['max'])} "
                              f"during the steps ({m['nbad']} of {np_} ranks off); lecture 3's "
                              f"formula {LC3_MEM_TEXT[k][i]} = {m['formula']} B "
                              f"({m['max'] - m['formula']:+d} B)")
        calls = " ".join(f"{c['calls']:g} {LC3_SHORT.get(fn, fn)}"
                         for fn, c in entry["calls"].get(name, {}).items()) or "-"
        b = entry["bytes"].get(name)
        if b:
            got = mb(b["max"]) if mb(b["min"]) == mb(b["max"]) else f"{mb(b['min'])}-{mb(b['max'])}"
            sent = f"{got} {'=' if not b['nbad'] else '!='} {LC3_BYTES_TEXT[k]}"
            if b["nbad"]:
                want = span(b["formula_min"], b["formula_max"])[:-2]
                errors.append(f"np {np_}: {name} sent {span(b['min'], b['max'])} per step in "
                              f"MPI calls ({b['nbad']} of {np_} ranks off); the formula "
                              f"{LC3_BYTES_TEXT[k]} = {want} B")
        else:
            sent = "-"
        ring = mb(lc3_ring(k, phi, shard, np_))
        r = entry["rows"].get(name)
        best, median = (ms(r["best"]), ms(r["median"])) if r else ("-", "-")
        c = entry["checks"].get(name)
        if c is None:
            check = "-"
        elif c["status"] != "ok":
            check = f"WRONG {c['ndiff']}"
            errors.append(f"np {np_}: {name} " + (
                f"differs from stage 0: {c['ndiff']} values (losses, weights; over all ranks), "
                f"max |difference| {c['maxdiff']:.3g}: {c['detail']}" if c["what"] == "stage0"
                else f"replicas differ: {c['detail']}"))
        elif k == 0:
            check = "(reference)"
        elif c["ndiff"] == 0:
            check = "= stage 0"
        else:
            check = f"~ stage 0 ({c['maxdiff']:.0e})"
        time_rows.append(LC3_TIME_HEAD.format(np_, f"{k} {name}", calls, sent, ring, best, median,
                                              check))
    return mem_rows, time_rows, errors


def lc3_print_findings(results):
    """Each stage against stage 0 at the same np: memory, bytes, best step."""
    print()
    print("# each stage against stage 0 at the same np: params+grads+optimizer / bytes in MPI "
          "calls / best step time")
    print(f"# {'':<10}" + "".join(f"{'np ' + str(e['np']):>22}" for e in results))
    for k, name, _ in LC3_STAGES[1:]:
        cells = []
        for e in results:
            mem0, mem = e["mem"].get("dp_adam"), e["mem"].get(name)
            b0, b = e["bytes"].get("dp_adam"), e["bytes"].get(name)
            r0, r = e["rows"].get("dp_adam"), e["rows"].get(name)

            def ratio(a, z):
                return f"{a / z:.2f}" if a is not None and z else "-"

            pgo = [sum(m[kd]["max"] for kd in LC3_KINDS if kd in m) if m else None
                   for m in (mem, mem0)]
            cells.append(f"{ratio(pgo[0], pgo[1])} / "
                         f"{ratio(b['max'] if b else None, b0['max'] if b0 else 0)} / "
                         f"{ratio(r['best'] if r else None, r0['best'] if r0 else 0)}")
        if any(c.replace("-", "").replace("/", "").strip() for c in cells):
            print(f"# {f'{k} {name}':<10}" + "".join(f"{c:>22}" for c in cells))


def run(args):
    args.dims = args.dims or DIMS
    args.rows = args.rows if args.rows is not None else 4
    args.steps = args.steps if args.steps is not None else 3
    tree = tree_of(args, "lc3_zero")
    nps = [args.np] if args.np else [1, 2, 4]
    rounds = args.rounds if args.rounds is not None else 9
    warmup = args.warmup if args.warmup >= 0 else 1
    stages = sorted({s.strip() for s in args.stages.split(",") if s.strip()})
    if (min(nps) < 1 or args.rows < 1 or args.steps < 1 or args.check_steps < 1 or rounds < 0
            or not stages or any(s not in ("0", "1", "2", "3") for s in stages)):
        print("bench: need np, --rows, --steps, --check-steps >= 1, --rounds >= 0 and "
              "--stages of 0, 1, 2, 3", file=sys.stderr)
        return 2

    binary = build_bench(tree)
    if binary is None:
        return 1

    run = TrainingRun(3, args, "memory, traffic and step time of the ZeRO stages", tree,
                      nps)
    for name, about in LC3_ABOUT:
        if name[0] in stages:
            print(f"#   {name:<10} {about}")
    print(f"# memory: each kind's peak bytes per rank over {args.check_steps} training steps "
          f"(libxt's xt_alloc counters, peaks reset after init), beside lecture 3's formula: "
          f"PHI parameters, S = ceil(PHI/np), L = the largest layer's parameters; checked: "
          f"'=' on every rank")
    print("# mixed precision: the ZeRO paper's per-rank bytes for the same PHI (fp16 weights "
          "and gradients, fp32 master weights and moments): a formula, not measured; these "
          "programs are fp32 throughout")
    print("# in calls: bytes of this rank's MPI calls per step (libxt's PMPI counters; c = the "
          "parameters it owns), checked against the formula; ring: what ring algorithms put "
          "on the wire per rank and step, a formula: " +
          "; ".join(f"{k}: {LC3_RING_TEXT[k]}" for k, _, _ in LC3_STAGES))
    print(f"# time: ms per step, the slowest rank's average over {args.steps} steps; best and "
          f"median of {rounds} rounds, the stages taking turns in every round; check: losses at "
          f"every step on every rank and final weights against stage 0's")

    env = launch.mpi_env()
    if "OMPI_MCA_op" not in os.environ:
        env.pop("OMPI_MCA_op", None)  # only float sums: the library's own kernels
    env.pop("XT_TRACE", None)
    prog = [binary, "--dims", args.dims, "--rows", str(args.rows), "--steps",
            str(args.check_steps), "--time_steps", str(args.steps), "--rounds", str(rounds),
            "--warmup", str(warmup), "--stages", ",".join(stages)]
    results, failures, skipped, first = [], [], [], True
    for np_ in nps:
        cmd = launch.mpirun_command(np_, prog)
        got = Lc3Launch()
        t0 = time.monotonic()
        res = launch.run(cmd, timeout=args.timeout, env=env, on_line=got.line)
        seconds = time.monotonic() - t0
        if got.skip or got.todo:
            where = re.search(r"TODO (\S+:\d+)", got.todo[0]) if got.todo else None
            if got.skip:  # no stage at all: say which files were missing
                got.skip = "; ".join(got.skips[:-1]) or got.skip
            msg = got.skip or (f"{tree}/ is not written yet (TODO at "
                               f"{where.group(1) if where else '?'})")
            done = [str(k) for k, _, source in LC3_STAGES if str(k) in stages and where and
                    f"/{source}.c:" not in where.group(1)]
            if got.todo and done:
                msg += f"; ARGS=\"--stages {','.join(done)}\" benches the other stages"
            print(f"# SKIPPED: {msg}")
            skipped.append(msg)
            break
        if first and got.info:
            first = False
            info = got.info
            dims, phi = info.get("dims", ""), int(info.get("nparams", 0))
            print(f"# model {dims}: {len(dims.split(',')) - 1} layers, PHI = {phi:,} parameters "
                  f"({mb(4 * phi)} MB in fp32), L = {int(info.get('largest_layer', 0)):,}; "
                  f"{info.get('rows')} rows per rank and step, MSE loss, AdamW; MB = 10^6 bytes")
            for msg in got.skips:
                print(f"# skipped: {msg}")
                skipped.append(msg)
        entry = {"np": np_, "seconds": round(seconds, 2), "info": got.info, "mem": got.mem,
                 "calls": got.calls, "bytes": got.bytes, "rows": got.rows,
                 "checks": got.checks}
        phi, shard = int(got.info.get("nparams", 0)), int(got.info.get("shard", 0))
        entry["formulas"] = {name: {"ring_wire_bytes": lc3_ring(k, phi, shard, np_),
                                    "mixed_precision_bytes": lc3_mixed(k, phi, np_)}
                             for k, name, _ in LC3_STAGES if str(k) in stages}
        mem_rows, time_rows, errors = lc3_tables(entry)
        entry["mem_table"], entry["time_table"] = mem_rows, time_rows
        print()
        print(f"# np {np_}: S = {shard:,}, padding {shard * np_ - phi}; "
              f"{got.info.get('steps_checked', '?')} steps measured and checked"
              + (f" (tolerance {got.info['check_tolerance']} relative)"
                 if float(got.info.get("check_tolerance", 0)) else " (bit for bit)")
              + f"; {seconds:.1f} s")
        print(LC3_MEM_HEAD.format("np", "stage", "params", "grads", "optimizer", "P+G+O",
                                  "activ.", "total", "mixed", "precision (formula)"))
        print(LC3_MEM_HEAD.format("", "", "(MB)", "(MB)", "(MB)", "(MB)", "(MB)", "(MB)", "(MB)",
                                  ""))
        for line in mem_rows:
            print(line)
        print(LC3_TIME_HEAD.format("np", "stage", "MPI calls per step", "in calls", "ring",
                                   "best", "median", "check"))
        print(LC3_TIME_HEAD.format("", "", "", "(MB)", "(MB)", "(ms)", "(ms)", ""))
        for line in time_rows:
            print(line)
        for e in errors:
            print(f"  ERROR: {e}")
        for name, nbytes in got.leaks.items():
            print(f"  note: {name} left {nbytes} B of xt_alloc memory allocated after its free "
                  f"(the stages after it are measured without it)")
        entry["leaks"] = got.leaks
        sys.stdout.flush()
        no_rows = rounds > 0 and not got.rows
        if res.timed_out or res.returncode != 0 or errors or no_rows:
            why = (f"stopped after {args.timeout:.0f} s" if res.timed_out else
                   f"{len(errors)} check(s) failed" if errors else
                   f"exit status {res.returncode}" if res.returncode else "no results")
            print(f"# FAILED: np {np_}: {why}")
            print(f"#   rerun: {launch.shell_line(cmd)}")
            failures.append(f"np {np_}: {why}")
            entry["failed"] = why
        results.append(entry)

    if results and "0" in stages:
        lc3_print_findings(results)

    return run.finish("lc3_zero", {"dims": args.dims, "rows": args.rows,
                                   "check_steps": args.check_steps, "steps": args.steps,
                                   "rounds": rounds, "warmup": warmup, "stages": stages,
                                   "runs": results}, skipped, failures)

# ------------------------------------------------------------------ make test

# make bench LC=3 on a small model at np=3 (uneven shards, padding): one launch, seconds.
SMALL = ["--lc", "3", "--np", "3", "--rounds", "1", "--steps", "1", "--warmup", "0",
         "--check-steps", "2", "--dims", "16,32,32,8"]


def selftest(s):
    """make test: the bench on a small model, and a ZeRO-3 step it must reject."""
    s.section("bench (make bench LC=3, a small model)")
    out = fresh("bench3")
    rc, text, took = run_bench(SMALL, out)
    problems = [] if rc == 0 else tail(text)
    run = bench_results(os.path.join(out, "lc3_zero_np3.json"), problems,
                        {"mem": {}, "bytes": {}, "rows": {}, "checks": {}, "calls": {}},
                        first_run=True)
    for stage in ("dp_adam", "zero1", "zero2", "zero3"):
        mem = run["mem"].get(stage, {})
        for kind in ("params", "grads", "optimizer"):
            m = mem.get(kind)
            if not m or m["nbad"] or m["max"] != m["formula"] or m["formula"] <= 0:
                problems.append(f"{stage} {kind}: {m}")
        b = run["bytes"].get(stage)
        if not b or b["nbad"] or not b["max"] > 0:
            problems.append(f"{stage} bytes per step: {b}")
        if not run["rows"].get(stage, {}).get("best", 0) > 0:
            problems.append(f"no time for {stage}")
        if run["checks"].get(stage, {}).get("status") != "ok":
            problems.append(f"check {stage}: {run['checks'].get(stage)}")
    # 1864 parameters in 3 shards of 622: rank 2 owns 620, so its stage-3 bytes differ.
    b3 = run["bytes"].get("zero3", {})
    if (b3.get("formula_min"), b3.get("formula_max")) != (4 * 1864 + 8 * 620, 4 * 1864 + 8 * 622):
        problems.append(f"zero3 bytes formula per rank: {b3}")
    if run["calls"].get("zero3", {}).get("MPI_Allgatherv", {}).get("calls") != 6.0:
        problems.append(f"zero3 calls per step: {run['calls'].get('zero3')}")
    if not re.search(r"^\s+3\s+3 zero3\s+\S+ = 4S\+4L\s+\S+ = 4S\+4L\s+\S+ = 8S\s", text,
                     re.M):
        problems.append("no memory table row: zero3 measured = formula")
    s.record("bench LC=3: the four stages at np=3, every peak (params, grads, optimizer) and the "
             "bytes of the MPI calls equal to the formulas, losses and weights equal to stage "
             "0's, timed", not problems, problems, f"({took:.1f} s)")

    # ZeRO-3 that keeps every gathered layer until backward must fail the memory check.
    tree = mutant_tree("bench3_mutant", "lc3_zero", "zero3_keep_gathered")
    rc, out, took = run_bench(SMALL, os.path.join(tree, "out"), tree)
    s.record("bench LC=3: a ZeRO-3 step that keeps the gathered layers is reported (its params "
             "peak against 4S+4L) and fails the run", rc == 1 and
             re.search(r"ERROR: np 3: zero3's params peaked at \d+ B during the steps \(3 of 3 "
                       r"ranks off\); lecture 3's formula 4S\+4L = \d+ B", out),
             tail(out), f"({took:.1f} s)")


# ------------------------------------------------------------- the page's copy

PAGE_MEM = re.compile(r"^ +(\d+) +(\d) \w+ +([\d.]+) = (\S+) +([\d.]+) = (\S+) +([\d.]+) = "
                      r"(\S+) +([\d.]+) +([\d.]+) +([\d.]+) +([\d.]+) (\S+)$", re.M)
PAGE_TRAFFIC = re.compile(r"^ +(\d+) +(\d) \w+ +((?:[\d.]+ I?[A-Z]\w* +)+)([\d.]+) = (\S+) +"
                          r"([\d.]+) +[\d.]+ +[\d.]+ ", re.M)


def page_figures(page):
    """The memory and traffic tables docs/lc3_zero.md copies (Measured), at the default
    model: every peak, byte count and formula column against lecture 3's formulas; the
    activations as measured, the total their sum; the times are not checked. [problem]."""
    dims = [int(v) for v in DIMS.split(",")]
    layers = [a * b + b for a, b in zip(dims, dims[1:])]
    phi, big = sum(layers), max(layers)
    problems, seen = [], set()

    def value(text, n):
        shard = -(-phi // n)
        return {"4PHI": 4 * phi, "8PHI": 8 * phi, "4npS": 4 * n * shard, "8S": 8 * shard,
                "4S+4L": 4 * shard + 4 * big, "4PHI+4S": 4 * phi + 4 * shard,
                "4PHI+8c": 4 * phi + 8 * shard}.get(text)
    for m in PAGE_MEM.finditer(page):
        n, k = int(m[1]), int(m[2])
        seen.add(("memory", n, k))
        want = [mb(value(t, n)) if value(t, n) is not None else None
                for t in (m[4], m[6], m[8])]
        pgo = sum(value(t, n) or 0 for t in (m[4], m[6], m[8]))
        expect = (list(LC3_MEM_TEXT[k]) == [m[4], m[6], m[8]] and [m[3], m[5], m[7]] == want
                  and m[9] == mb(pgo) and m[12] == mb(lc3_mixed(k, phi, n))
                  and m[13] == LC3_MIXED_TEXT[k]
                  and abs(float(m[11]) - float(m[9]) - float(m[10])) <= 0.011)
        if not expect:
            problems.append(f"docs/lc3_zero.md: the memory row of stage {k} at np {n} "
                            f"({m[0].strip()!r}) differs from lecture 3's formulas: "
                            f"{', '.join(w or '?' for w in want)} MB, P+G+O {mb(pgo)}, mixed "
                            f"{mb(lc3_mixed(k, phi, n))}")
    for m in PAGE_TRAFFIC.finditer(page):
        n, k = int(m[1]), int(m[2])
        seen.add(("traffic", n, k))
        sent, ring = mb(value(m[5], n) or 0), mb(lc3_ring(k, phi, -(-phi // n), n))
        if m[5] != LC3_BYTES_TEXT[k] or (m[4], m[6]) != (sent, ring):
            problems.append(f"docs/lc3_zero.md: the traffic row of stage {k} at np {n} shows "
                            f"{m[4]} = {m[5]} and ring {m[6]}; the formulas give {sent} = "
                            f"{LC3_BYTES_TEXT[k]} and ring {ring}")
    missing = [f"{t} np {n} stage {k}" for t in ("memory", "traffic") for n in (1, 2, 4)
               for k in range(4) if (t, n, k) not in seen]
    if missing:
        problems.append(f"docs/lc3_zero.md: no row of the bench's tables for {', '.join(missing)}")
    return problems
