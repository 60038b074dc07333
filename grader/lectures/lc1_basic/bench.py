"""make bench LC=1 [NP=4] [SOL=0] [ARGS="..."]: lecture 1's hand-written collectives
beside the MPI library's own, one table per collective in the layout of
nccl-tests: time, algbw and busbw of each, their ratio, and whether the
hand-written result matched the library's. Writes the results as JSON and a
plot of busbw against message size (SVG) under build/bench/.
docs/lc1_basic.md (Bandwidth) explains the columns. Measured by
build/bench/solutions/lc1_basic/bench (grader/lectures/lc1_basic/bench.c), one
launch per collective.
"""

import math
import os
import re
import sys
import time

import launch
from benchlib import (build_bench, cores, finish, human, Launch, output_tag, parse_size, svg_plot,
                      tree_of)
from testkit import bench_results, fresh, mutant_tree, run_bench, tail

ABOUT = "bandwidth of the hand-written collectives beside the MPI library's own"

# What the Makefile links (grader/makefrag.py): the collectives' files, each
# also as a .direct.o copy whose MPI_x calls are PMPI_x, past libxt's counters.
LINK = {
    "sources": ["fun_ring_allreduce", "fun_allreduce_rd", "fun_gather", "fun_reduce_scatter",
                "fun_broadcast", "fun_all2all_scratch"],
    "functions": ["ring_allreduce", "allreduce_rd", "allgather_ring", "reduce_scatter_ring",
                  "bcast_binomial", "alltoallv_scratch"],
    "direct": True,
}

# and how the size S is defined (nccl-tests' convention, doc/PERFORMANCE.md).
COLLECTIVES = [
    ("ring_allreduce", "fun_ring_allreduce.c", "MPI_Allreduce", "2(n-1)/n",
     lambda n: 2 * (n - 1) / n, "the buffer every rank reduces"),
    ("allreduce_rd", "fun_allreduce_rd.c", "MPI_Allreduce", "2(n-1)/n",
     lambda n: 2 * (n - 1) / n, "the buffer every rank reduces"),
    ("allgather_ring", "fun_gather.c", "MPI_Allgather", "(n-1)/n",
     lambda n: (n - 1) / n, "the gathered result, n blocks"),
    ("reduce_scatter_ring", "fun_reduce_scatter.c", "MPI_Reduce_scatter", "(n-1)/n",
     lambda n: (n - 1) / n, "every rank's input, n blocks"),
    ("bcast_binomial", "fun_broadcast.c", "MPI_Bcast", "1",
     lambda n: 1.0, "the root's buffer"),
    ("alltoallv_scratch", "fun_all2all_scratch.c", "MPI_Alltoallv", "(n-1)/n",
     lambda n: (n - 1) / n, "what each rank sends, n blocks"),
]
NAMES = [c[0] for c in COLLECTIVES]
TYPE_NAMES = {"float32": "float", "float64": "double", "int32": "int32", "int64": "int64"}
REDUCES = {"ring_allreduce", "allreduce_rd", "reduce_scatter_ring"}


def add_options(g):
    g.add_argument("--coll", default="", help="comma-separated collectives (default: all)")
    g.add_argument("--min", type=parse_size, default=8, help="smallest size (default 8)")
    g.add_argument("--max", type=parse_size, default=64 << 20, help="largest size (default 64M)")
    g.add_argument("--dtype", default="float32", choices=sorted(TYPE_NAMES))
    g.add_argument("--iters", type=int, default=0, help="timed calls per size (default: by size)")
    g.add_argument("--wrapcost", type=parse_size, default=8,
                   help="size at which libxt's PMPI wrappers are timed (0: not)")
    g.add_argument("--budget", type=float, default=270,
                   help="seconds the whole bench should take at most: on a slow machine the "
                        "largest sizes get fewer timed calls (default 270)")


def run(args):
    if args.np is None:
        args.np = min(4, max(2, cores()))
    if args.rounds is None:
        args.rounds = 5
    wanted = [c for c in args.coll.split(",") if c] or NAMES
    unknown = [c for c in wanted if c not in NAMES]
    if unknown:
        print(f"bench: no collective {', '.join(unknown)}; there are: {', '.join(NAMES)}",
              file=sys.stderr)
        return 2
    if args.np < 1 or args.min < 1 or args.max < args.min:
        print("bench: need np >= 1 and 1 <= min <= max", file=sys.stderr)
        return 2

    tree = tree_of(args, "lc1_basic")
    binary = build_bench(tree)
    if binary is None:
        return 1

    flavor_version = launch.mpi_flavor()[1]
    ncores = cores()
    started = time.monotonic()
    print(f"# make bench LC=1 NP={args.np}{' SOL=0' if args.student else ''}: the hand-written "
          f"collectives of {tree}/ beside {flavor_version}'s own")
    print(f"# np {args.np} on {ncores} core{'s' if ncores != 1 else ''}, {args.dtype}, sizes "
          f"{human(args.min)} to {human(args.max)}; time: the slowest rank's average per call, "
          f"median of {args.rounds} round{'s' if args.rounds != 1 else ''}")
    if args.np > ncores:
        print(f"# oversubscribed: {args.np} ranks share {ncores} cores; a waiting rank yields "
              f"its core (mpi_yield_when_idle), so times include the scheduler's")
    print("# ratio = hand-written busbw / library busbw (= library time / hand-written time)")
    env = launch.mpi_env()
    # The grader turns Open MPI 4.1's AVX reduction kernels off because they
    # saturate 8-bit integer sums; the bench reduces 32- and 64-bit types only,
    # so it measures the library as a real job runs it (OMPI_MCA_op=... wins).
    if "OMPI_MCA_op" not in os.environ:
        env.pop("OMPI_MCA_op", None)
    results, failures, skipped = [], [], []
    for coll in COLLECTIVES:
        name, source, library, factor_text, factor, s_def = coll
        if name not in wanted:
            continue
        print()
        print(f"# {name} ({tree}/{source}) vs {library}")
        print(f"#   S = {s_def}; busbw = algbw * {factor_text} = {factor(args.np):.3g} algbw")
        if not os.path.exists(os.path.join(tree, source)):
            msg = f"{tree}/{source} does not exist: {name} skipped"
            print(f"# SKIPPED: {msg}")
            skipped.append(msg)
            results.append({"name": name, "library": library, "skipped": msg, "rows": []})
            continue
        table = Table(name, library, factor(args.np), args.np, args.dtype)
        prog = [binary, "--coll", name, "--dtype", args.dtype, "--min", str(args.min),
                "--max", str(args.max), "--wrapcost", str(args.wrapcost),
                "--rounds", str(args.rounds)]
        # The largest sizes take most of the time: cap each one's timed calls
        # (per side) so that the collectives left share what is left of the budget.
        left = [c for c in COLLECTIVES[COLLECTIVES.index(coll):] if c[0] in wanted]
        share = (args.budget - (time.monotonic() - started)) / len(left)
        prog += ["--cap", f"{min(2.0, max(0.2, share / 24)):.3f}"]
        if args.iters > 0:
            prog += ["--iters", str(args.iters)]
        if args.warmup >= 0:
            prog += ["--warmup", str(args.warmup)]
        cmd = launch.mpirun_command(args.np, prog)
        collect = CollectiveLaunch(table)
        t0 = time.monotonic()
        res = launch.run(cmd, timeout=args.timeout, env=env, on_line=collect.line)
        seconds = time.monotonic() - t0
        entry = {"name": name, "library": library, "source": f"{tree}/{source}",
                 "busbw_factor": factor(args.np), "seconds": round(seconds, 2),
                 "rows": collect.rows, "wrapcost": collect.wrap}
        if collect.skip:
            print(f"# SKIPPED: {collect.skip}")
            skipped.append(collect.skip)
            entry["skipped"] = collect.skip
        elif collect.todo:
            msg = f"{name} is not written yet (TODO in {tree}/{source}): skipped"
            print(f"# SKIPPED: {msg}")
            skipped.append(msg)
            entry["skipped"] = msg
        elif res.timed_out or res.returncode != 0:
            why = (f"stopped after {args.timeout:.0f} s" if res.timed_out
                   else f"exit status {res.returncode}")
            wrong = [r for r in collect.rows if r["check"] != "ok"]
            if wrong:
                why = f"{len(wrong)} size(s) gave a wrong result"
            print(f"# FAILED: {name}: {why}")
            print(f"#   rerun: {launch.shell_line(cmd)}")
            failures.append(f"{name}: {why}")
            entry["failed"] = why
        print(f"# {name}: {seconds:.1f} s")
        results.append(entry)

    print_summary(results)
    total = time.monotonic() - started
    os.makedirs(args.out, exist_ok=True)
    tag = output_tag(args)
    stem = os.path.join(args.out, f"lc1_basic{tag}_np{args.np}")
    meta = {"np": args.np, "cores": ncores, "mpi": flavor_version, "dtype": args.dtype,
            "tree": tree, "seconds": round(total, 1), "collectives": results}
    panels = [(r["name"], r["library"], r["rows"]) for r in results]
    svg_plot(stem + ".svg", f"make bench LC=1 NP={args.np}: busbw against size "
             f"({flavor_version}, {args.dtype}, {ncores} cores)", panels, args.min, args.max)
    print(f"# plot: {stem}.svg")
    return finish(stem, meta, f"# bench time: {total:.0f} s", skipped, failures)


def print_summary(results):
    measured = [r for r in results if r["rows"]]
    if not measured:
        return
    print()
    print("# summary: ratio of busbw (hand-written / library); above 1 the hand-written is faster")
    heads = ("below 64 KiB", "64 KiB to 8 MiB", "16 MiB and up")
    print(f"# {'collective':<20} " + " ".join(f"{h:>15}" for h in heads))

    def gmean(rows):
        vals = [x["ratio"] for x in rows if x["ratio"] > 0]
        if not vals:
            return "-"
        return f"{math.exp(sum(math.log(v) for v in vals) / len(vals)):.2f}"

    for r in measured:
        small = [x for x in r["rows"] if x["bytes"] < 64 << 10]
        mid = [x for x in r["rows"] if 64 << 10 <= x["bytes"] < 16 << 20]
        big = [x for x in r["rows"] if x["bytes"] >= 16 << 20]
        print(f"# {r['name']:<20} {gmean(small):>15} {gmean(mid):>15} {gmean(big):>15}")
    print("# (geometric means of the ratios of the sizes in each range)")
    wraps = [r for r in measured if r.get("wrapcost")]
    if wraps:
        print()
        print("# libxt's PMPI counters: the same calls through them and past them (us per call)")
        print(f"# {'collective':<20} {'size':>6}  {'hand':>8} {'direct':>8} {'+%':>6}"
              f"  {'library':>8} {'direct':>8} {'+%':>6}")
        def pct(a, b):
            return f"{(a / b - 1) * 100:+.0f}" if b > 0 else "-"

        for r in wraps:
            w = r["wrapcost"]
            print(f"# {r['name']:<20} {w['bytes']:>6}  {w['t_hand'] * 1e6:>8.2f} "
                  f"{w['t_hand_direct'] * 1e6:>8.2f} {pct(w['t_hand'], w['t_hand_direct']):>6}"
                  f"  {w['t_lib'] * 1e6:>8.2f} {w['t_lib_direct'] * 1e6:>8.2f} "
                  f"{pct(w['t_lib'], w['t_lib_direct']):>6}")


class CollectiveLaunch(Launch):
    """Collects one collective's lines from the bench program as they come."""

    def __init__(self, table):
        super().__init__()
        self.table = table
        self.rows, self.wrap = [], None

    def line(self, text):
        parts = text.split(None, 13)  # a ROW's last field, the detail, may hold spaces
        kind = parts[0] if parts else ""
        if kind == "ROW" and len(parts) >= 14:
            row = {"bytes": int(parts[1]), "count": int(parts[2]), "iters": int(parts[3]),
                   "warmup": int(parts[4]), "rounds": int(parts[5]), "t_hand": float(parts[6]),
                   "t_lib": float(parts[7]), "t_hand_mean": float(parts[8]),
                   "t_lib_mean": float(parts[9]), "check": parts[10], "nwrong": int(parts[11]),
                   "maxerr": float(parts[12]), "detail": parts[13]}
            self.rows.append(self.table.row(row))
        elif kind == "WRAP" and len(parts) >= 8:
            self.wrap = {"bytes": int(parts[1]), "count": int(parts[2]), "iters": int(parts[3]),
                         "t_hand": float(parts[4]), "t_hand_direct": float(parts[5]),
                         "t_lib": float(parts[6]), "t_lib_direct": float(parts[7])}
        else:
            super().line(text)


class Table:
    """Formats one collective's rows as nccl-tests does, plus ratio and check."""

    HEAD = ("{:>12} {:>12} {:>7} {:>6} {:>5} {:>6}  {:>9} {:>7} {:>7}  {:>9} {:>7} {:>7}"
            "  {:>6}  {}")

    def __init__(self, name, library, factor, np_, dtype):
        self.name, self.library, self.factor, self.np = name, library, factor, np_
        self.type = TYPE_NAMES[dtype]
        self.op = "sum" if name in REDUCES else "none"
        self.root = 0 if name == "bcast_binomial" else -1
        self.started = False

    def header(self):
        self.started = True
        pad = " " * 55
        print(f"#{pad}{'hand-written':>27}  {self.library:>27}")
        print(self.HEAD.format("size", "count", "type", "redop", "root", "iters", "time",
                               "algbw", "busbw", "time", "algbw", "busbw", "ratio", "check"))
        print(self.HEAD.format("(B)", "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)",
                               "(us)", "(GB/s)", "(GB/s)", "", ""), flush=True)

    def row(self, r):
        if not self.started:
            self.header()
        s = r["bytes"]
        for side in ("hand", "lib"):
            t = r[f"t_{side}"]
            r[f"algbw_{side}"] = s / t / 1e9 if t > 0 else 0.0
            r[f"busbw_{side}"] = r[f"algbw_{side}"] * self.factor
        r["ratio"] = r["t_lib"] / r["t_hand"] if r["t_hand"] > 0 else 0.0
        check = "ok" if r["check"] == "ok" else f"WRONG {r['nwrong']}"
        print(self.HEAD.format(s, r["count"], self.type, self.op, self.root, r["iters"],
                               f"{r['t_hand'] * 1e6:.2f}", f"{r['algbw_hand']:.2f}",
                               f"{r['busbw_hand']:.2f}", f"{r['t_lib'] * 1e6:.2f}",
                               f"{r['algbw_lib']:.2f}", f"{r['busbw_lib']:.2f}",
                               f"{r['ratio']:.2f}", check), flush=True)
        if r["check"] != "ok":
            print(f"  ERROR: {self.name} at {s} B differs from {self.library} in {r['nwrong']} "
                  f"element(s), max |difference| {r['maxerr']:.3g}: {r['detail']}", flush=True)
        return r

# ------------------------------------------------------------------ make test

def selftest(s):
    """make test: the bench at small sizes, and a wrong collective it must reject."""
    s.section("bench (make bench LC=1, small sizes)")
    # The collectives are named twice in this file: once for the Makefile's link
    # (LINK, a literal) and once for the tables; they must be the same ones.
    pairs = [(c[0], c[1][:-2]) for c in COLLECTIVES]
    s.record("bench: LINK links exactly the files and functions of the collectives' table",
             pairs == list(zip(LINK["functions"], LINK["sources"])),
             [f"COLLECTIVES {pairs}", f"LINK {list(zip(LINK['functions'], LINK['sources']))}"])
    out = fresh("bench")
    rc, text, took = run_bench(["--np", "3", "--max", "4K", "--wrapcost", "8"], out)
    problems = [] if rc == 0 else tail(text)
    data = bench_results(os.path.join(out, "lc1_basic_np3.json"), problems, {"collectives": []})
    names = [c["name"] for c in data["collectives"]]
    want = ["ring_allreduce", "allreduce_rd", "allgather_ring", "reduce_scatter_ring",
            "bcast_binomial", "alltoallv_scratch"]
    if sorted(names) != sorted(want):
        problems.append(f"benched {names}, expected {want}")
    for c in data["collectives"]:
        bad = [r for r in c["rows"] if r["check"] != "ok" or not r["t_hand"] > 0]
        if bad or not c["rows"]:
            problems.append(f"{c['name']}: rows {bad or 'none'}")
    if not os.path.exists(os.path.join(out, "lc1_basic_np3.svg")):
        problems.append("no plot written")
    s.record("bench: all six collectives at np=3, every timed result checked against the "
             "library's, a plot", not problems, problems, f"({took:.1f} s)")

    # The check must fail when it should: a ring all-reduce that assumes np divides count.
    tree = mutant_tree("bench_mutant", "lc1_basic", "ring_allreduce_assumes_divisible")
    rc, out, _ = run_bench(["--np", "3", "--coll", "ring_allreduce", "--max", "64", "--wrapcost",
                            "0"], os.path.join(tree, "out"), tree)
    s.record("bench: a wrong hand-written result is reported (rank, index, both values) and "
             "fails the run", rc == 1 and "WRONG" in out and
             re.search(r"ERROR: ring_allreduce at \d+ B differs .* rank \d+ \[\d+\]", out),
             tail(out))
