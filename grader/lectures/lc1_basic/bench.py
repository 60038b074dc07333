"""make bench LC=1 [NP=4] [SOL=0] [ARGS="..."]: lecture 1's hand-written collectives
beside the MPI library's own, one table per collective in the layout of
nccl-tests: time, algbw and busbw of each, their ratio, and whether the
hand-written result matched the library's; and each side's busbw against a
ceiling, this machine's limit for that collective, from the copy and reduce
bandwidth every rank gets when all of them copy or reduce at once (one short
launch first, measured once per run). Writes the results as JSON and a plot of
busbw against message size (SVG) under build/bench/. docs/lc1_basic.md
(Bandwidth) explains the columns and the ceiling. Measured by
build/bench/solutions/lc1_basic/bench (grader/lectures/lc1_basic/bench.c), one
launch per collective.
"""

import json
import math
import itertools
import os
import re
import statistics
import sys
import time

import launch
from benchlib import (bench_link, build_bench, cores, finish, human, Launch, output_tag, parse_size, svg_plot,
                      tree_of)
from testkit import bench_results, fresh, mutant_tree, run_bench, tail

ABOUT = "bandwidth of the hand-written collectives beside the MPI library's own"

# Each collective benched: its function and file, the library call it is measured
# against, its bus-bandwidth factor (as text and as a function of n), and how the
# size S is defined (nccl-tests' convention, doc/PERFORMANCE.md).
COLLECTIVES = [
    ("ring_allreduce", "fun_ring_allreduce.c", "MPI_Allreduce", "2(n-1)/n",
     lambda n: 2 * (n - 1) / n, "the buffer every rank reduces"),
    ("allreduce_rd", "fun_allreduce_rd.c", "MPI_Allreduce", "2(n-1)/n",
     lambda n: 2 * (n - 1) / n, "the buffer every rank reduces"),
    ("hierarchical_allreduce", "fun_hierarchical_allreduce.c", "MPI_Allreduce", "2(n-1)/n",
     lambda n: 2 * (n - 1) / n, "the buffer every rank reduces"),
    ("double_tree_allreduce", "fun_double_binary_tree.c", "MPI_Allreduce", "2(n-1)/n",
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

# The ceiling of each collective's busbw on one shared-memory machine, from C
# and R, what one rank copies and reduces per second while every rank does the
# same (docs/lc1_basic.md, "The ceiling"): every byte busbw counts is at least
# one copy, and every reduced byte also a reduce pass. An all-reduce's busbw
# counts 2 bytes moved per byte reduced (reduce-scatter, then all-gather).
# It bounds the operation, not the algorithm: the same for both sides.
CEILINGS = {
    "ring_allreduce": ("2/(2/C + 1/R)", lambda c, r: 2 / (2 / c + 1 / r)),
    "allreduce_rd": ("2/(2/C + 1/R)", lambda c, r: 2 / (2 / c + 1 / r)),
    "hierarchical_allreduce": ("2/(2/C + 1/R)", lambda c, r: 2 / (2 / c + 1 / r)),
    "double_tree_allreduce": ("2/(2/C + 1/R)", lambda c, r: 2 / (2 / c + 1 / r)),
    "allgather_ring": ("C", lambda c, r: c),
    "reduce_scatter_ring": ("1/(1/C + 1/R)", lambda c, r: 1 / (1 / c + 1 / r)),
    "bcast_binomial": ("C", lambda c, r: c),
    "alltoallv_scratch": ("C", lambda c, r: c),
}
# The buffers the limit is measured on: large enough to leave the caches, but
# no larger than the run's largest size (so that a short run stays short).
LIMIT_BYTES = (1 << 20, 64 << 20)
TYPE_NAMES = {"float32": "float", "float64": "double", "int32": "int32", "int64": "int64"}
REDUCES = {"ring_allreduce", "allreduce_rd", "hierarchical_allreduce", "double_tree_allreduce",
           "reduce_scatter_ring"}


def add_options(g):
    g.add_argument("--coll", default="", help="comma-separated collectives (default: all)")
    g.add_argument("--min", type=parse_size, default=8, help="smallest size (default 8)")
    g.add_argument("--max", type=parse_size, default=64 << 20, help="largest size (default 64M)")
    g.add_argument("--dtype", default="float32", choices=sorted(TYPE_NAMES))
    g.add_argument("--iters", type=int, default=0, help="timed calls per size (default: by size)")
    g.add_argument("--wrapcost", type=parse_size, default=8,
                   help="size at which libxt's PMPI wrappers are timed (0: not)")
    g.add_argument("--chunk", type=parse_size, default=64 << 10,
                   help="bytes a message for double_tree_allreduce's pipeline (default 64K)")
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
    limit = measure_limit(binary, args, env, failures)
    for coll in COLLECTIVES:
        name, source, library, factor_text, factor, s_def = coll
        if name not in wanted:
            continue
        print()
        print(f"# {name} ({tree}/{source}) vs {library}")
        print(f"#   S = {s_def}; busbw = algbw * {factor_text} = {factor(args.np):.3g} algbw")
        formula, ceiling_of = CEILINGS[name]
        ceiling = ceiling_of(limit["copy_GBps"], limit["reduce_GBps"]) if limit else None
        if ceiling:
            print(f"#   ceiling of busbw = {formula} = {ceiling:.2f} GB/s on this machine; "
                  f"%ceil = busbw / ceiling")
        if not os.path.exists(os.path.join(tree, source)):
            msg = f"{tree}/{source} does not exist: {name} skipped"
            print(f"# SKIPPED: {msg}")
            skipped.append(msg)
            results.append({"name": name, "library": library, "skipped": msg, "rows": [],
                            "ceiling_GBps": ceiling, "ceiling_formula": formula})
            continue
        table = Table(name, library, factor(args.np), args.dtype, ceiling)
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
        if args.per_node > 0:
            prog += ["--per-node", str(args.per_node)]
        if name == "double_tree_allreduce":
            prog += ["--chunk", str(args.chunk)]
        if args.warmup >= 0:
            prog += ["--warmup", str(args.warmup)]
        cmd = launch.mpirun_command(args.np, prog)
        collect = CollectiveLaunch(table)
        t0 = time.monotonic()
        res = launch.run(cmd, timeout=args.timeout, env=env, on_line=collect.line)
        seconds = time.monotonic() - t0
        entry = {"name": name, "library": library, "source": f"{tree}/{source}",
                 "busbw_factor": factor(args.np), "ceiling_GBps": ceiling,
                 "ceiling_formula": formula, "seconds": round(seconds, 2),
                 "rows": collect.rows, "wrapcost": collect.wrap}
        if name == "hierarchical_allreduce" and "nodes" in collect.info and collect.rows:
            entry["nodes"] = print_nodes(collect.info["nodes"], args.np, collect.rows)
        if name == "double_tree_allreduce" and "chunk" in collect.info and collect.rows:
            entry["trees"] = print_trees(int(collect.info["chunk"].split()[0]), args.np,
                                         collect.rows)
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
            "tree": tree, "seconds": round(total, 1),
            "copy_GBps": limit["copy_GBps"] if limit else None,
            "reduce_GBps": limit["reduce_GBps"] if limit else None,
            "limit": limit, "collectives": results}
    panels = [(r["name"], r["library"], r["rows"]) for r in results]
    svg_plot(stem + ".svg", f"make bench LC=1 NP={args.np}: busbw against size "
             f"({flavor_version}, {args.dtype}, {ncores} cores)", panels, args.min, args.max,
             ceilings=[r["ceiling_GBps"] for r in results])
    print(f"# plot: {stem}.svg")
    return finish(stem, meta, f"# bench time: {total:.0f} s", skipped, failures)


def across_nodes(np_, per_node, size):
    """Bytes a rank sends to other nodes, by the algorithms' definitions (the grader counts
    them exactly): (the node-aware all-reduce's, every rank's; a flat ring's, on the one rank
    of each node whose neighbour is on the next)."""
    nodes = np_ // per_node
    hier = 2 * (nodes - 1) * size / (nodes * per_node)
    flat = 2 * (np_ - 1) * size / np_ if nodes > 1 else 0.0
    return hier, flat


def print_nodes(info, np_, rows):
    """The nodes hierarchical_allreduce ran on (INFO nodes N L how) and, at the largest size,
    the bytes a rank sends across nodes against a flat ring's: {nodes, per_node, from,
    bytes, across_hier, across_flat}."""
    count, per_node, how = info.split()[:3]
    count, per_node = int(count), int(per_node)
    where = {"given": "given (--per-node)", "launch": "from the launch (the ranks that share "
             "memory)", "launch-renumbered": "from the launch, its ranks renumbered node by "
             "node (it placed them round-robin)",
             "virtual": "virtual: one machine, so no byte leaves it"}.get(how, how)
    size = max(r["bytes"] for r in rows)
    hier, flat = across_nodes(np_, per_node, size)
    print(f"# nodes: {count} of {per_node} rank{'s' if per_node != 1 else ''}, {where}")
    print(f"#   bytes a rank sends across nodes at S = {human(size)}: {human(round(hier))} "
          f"(2 (N-1)/N S/L), against {human(round(flat))} from")
    print("#   the one rank a node at a flat ring's node boundary (2 (np-1)/np S)")
    return {"nodes": count, "per_node": per_node, "from": how, "bytes": size,
            "across_hier": hier, "across_flat": flat}


def print_trees(chunk, np_, rows):
    """The double tree's pipeline at the largest size: chunk bytes, chunks a half, steps
    against the ring's, and the busiest rank's bytes (every rank at most 2 S):
    {chunk, bytes, chunks, steps, ring_steps}."""
    size = max(r["bytes"] for r in rows)
    chunks = max(1, -(-(size // 2) // chunk))
    height = (np_ - 1).bit_length()
    steps, ring = 2 * (chunks + height), 2 * (np_ - 1)
    print(f"# trees: chunks of {human(chunk)}; at S = {human(size)}, {chunks} a half: "
          f"2 (C + H) = {steps} steps of at most two messages")
    print(f"#   against the ring's 2 (np-1) = {ring} steps of S/np; the busiest rank sends "
          f"2 S = {human(2 * size)}, a ring's every rank 2 (np-1)/np S = "
          f"{human(round(2 * (np_ - 1) * size / np_))}")
    return {"chunk": chunk, "bytes": size, "chunks": chunks, "steps": steps, "ring_steps": ring}


def measure_limit(binary, args, env, failures):
    """This machine's limit, measured once per run by one launch of every rank at once:
    C and R (copy_GBps, reduce_GBps), each the median over the ranks of a rank's median
    round; None, with a failure noted, when the launch fails."""
    nbytes = min(LIMIT_BYTES[1], max(LIMIT_BYTES[0], args.max))
    cmd = launch.mpirun_command(args.np, [binary, "--calibrate", "--dtype", args.dtype,
                                          "--bytes", str(nbytes), "--rounds", str(args.rounds)])
    collect = LimitLaunch()
    t0 = time.monotonic()
    res = launch.run(cmd, timeout=args.timeout, env=env, on_line=collect.line)
    seconds = time.monotonic() - t0
    if (res.timed_out or res.returncode != 0 or set(collect.rates) != {"copy", "reduce"}
            or len(collect.rates["copy"]) != args.np
            or not all(v > 0 for k in collect.rates for v in collect.rates[k])):
        why = (f"stopped after {args.timeout:.0f} s" if res.timed_out
               else f"exit status {res.returncode}" if res.returncode else "no rates printed")
        print(f"# FAILED: measuring this machine's limit: {why}; no ceilings this run")
        print(f"#   rerun: {launch.shell_line(cmd)}")
        failures.append(f"the machine's limit: {why}")
        return None
    per_rank = {k: [v / 1e9 for v in collect.rates[k]] for k in ("copy", "reduce")}
    limit = {"copy_GBps": statistics.median(per_rank["copy"]),
             "reduce_GBps": statistics.median(per_rank["reduce"]),
             "copy_per_rank_GBps": per_rank["copy"], "reduce_per_rank_GBps": per_rank["reduce"],
             "bytes": collect.nbytes, "rounds": collect.rounds, "seconds": round(seconds, 2)}
    c, r = limit["copy_GBps"], limit["reduce_GBps"]

    rounds = f"{collect.rounds} round{'s' if collect.rounds != 1 else ''}"
    print(f"# this machine's limit per rank: copy C = {c:.2f} GB/s, reduce R = {r:.2f} GB/s "
          f"({TYPE_NAMES[args.dtype]} sum)")
    print(f"#   {f'all {args.np} ranks at once' if args.np > 1 else 'one rank'} on "
          f"{human(collect.nbytes)}: memcpy, and MPI_Reduce_local in bytes of its inout buffer;")
    if args.np > 1:
        print(f"#   each rank's median of {rounds}, the median over ranks (C "
              f"{min(per_rank['copy']):.2f} to {max(per_rank['copy']):.2f}, R "
              f"{min(per_rank['reduce']):.2f} to {max(per_rank['reduce']):.2f}); {seconds:.1f} s")
    else:
        print(f"#   the median of {rounds}; {seconds:.1f} s")
    print("# ceiling of busbw, the same for both sides: C for allgather, bcast and alltoall; "
          "1/(1/C + 1/R) for")
    print("#   reduce-scatter; 2/(2/C + 1/R) for allreduce (docs/lc1_basic.md, \"The ceiling\")")
    return limit


def print_summary(results):
    measured = [r for r in results if r["rows"]]
    if not measured:
        return
    print()
    print("# summary: ratio of busbw (hand-written / library), above 1 the hand-written is "
          "faster; and from")
    print("#   16 MiB up, each side's busbw in % of the collective's ceiling on this machine")
    heads = ("below 64 KiB", "64 KiB to 8 MiB", "16 MiB and up")
    print(f"# {'collective':<22} " + " ".join(f"{h:>15}" for h in heads)
          + f" {'ceiling':>9} {'hand %':>7} {'lib %':>7}")

    def gmean(rows, key, fmt):
        vals = [x[key] for x in rows if x.get(key) is not None and x[key] > 0]
        if not vals:
            return "-"
        return fmt.format(math.exp(sum(math.log(v) for v in vals) / len(vals)))

    for r in measured:
        small = [x for x in r["rows"] if x["bytes"] < 64 << 10]
        mid = [x for x in r["rows"] if 64 << 10 <= x["bytes"] < 16 << 20]
        big = [x for x in r["rows"] if x["bytes"] >= 16 << 20]
        ceiling = f"{r['ceiling_GBps']:.2f}" if r.get("ceiling_GBps") else "-"
        print(f"# {r['name']:<22} {gmean(small, 'ratio', '{:.2f}'):>15} "
              f"{gmean(mid, 'ratio', '{:.2f}'):>15} {gmean(big, 'ratio', '{:.2f}'):>15} "
              f"{ceiling:>9} {gmean(big, 'ceil_hand', '{:.0%}'):>7} "
              f"{gmean(big, 'ceil_lib', '{:.0%}'):>7}")
    print("# (geometric means over the sizes in each range; the ceiling in GB/s)")
    wraps = [r for r in measured if r.get("wrapcost")]
    if wraps:
        print()
        print("# libxt's PMPI counters: the same calls through them and past them (us per call)")
        print(f"# {'collective':<22} {'size':>6}  {'hand':>8} {'direct':>8} {'+%':>6}"
              f"  {'library':>8} {'direct':>8} {'+%':>6}")
        def pct(a, b):
            return f"{(a / b - 1) * 100:+.0f}" if b > 0 else "-"

        for r in wraps:
            w = r["wrapcost"]
            print(f"# {r['name']:<22} {w['bytes']:>6}  {w['t_hand'] * 1e6:>8.2f} "
                  f"{w['t_hand_direct'] * 1e6:>8.2f} {pct(w['t_hand'], w['t_hand_direct']):>6}"
                  f"  {w['t_lib'] * 1e6:>8.2f} {w['t_lib_direct'] * 1e6:>8.2f} "
                  f"{pct(w['t_lib'], w['t_lib_direct']):>6}")


class LimitLaunch(Launch):
    """Collects the --calibrate launch's LIMIT lines: every rank's rates, bytes per second."""

    def __init__(self):
        super().__init__()
        self.rates, self.nbytes, self.rounds = {}, 0, 0

    def line(self, text):
        parts = text.split()
        if parts[:1] == ["LIMIT"] and len(parts) >= 5:
            self.nbytes, self.rounds = int(parts[2]), int(parts[3])
            self.rates[parts[1]] = [float(v) for v in parts[4:]]
        else:
            super().line(text)


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
    """Formats one collective's rows as nccl-tests does, plus each side's busbw against the
    ceiling (the table's header line states it), the ratio and the check."""

    HEAD = ("{:>12} {:>12} {:>7} {:>6} {:>5} {:>6}  {:>9} {:>7} {:>7} {:>5}  {:>9} {:>7} {:>7} "
            "{:>5}  {:>6}  {}")

    def __init__(self, name, library, factor, dtype, ceiling):
        self.name, self.library, self.factor, self.ceiling = name, library, factor, ceiling
        self.type = TYPE_NAMES[dtype]
        self.op = "sum" if name in REDUCES else "none"
        self.root = 0 if name == "bcast_binomial" else -1
        self.started = False

    def header(self):
        self.started = True
        pad = " " * 54
        print(f"#{pad}{'hand-written':>31}  {self.library:>31}")
        print(self.HEAD.format("size", "count", "type", "redop", "root", "iters", "time", "algbw", "busbw", "%ceil", "time", "algbw", "busbw",
                               "%ceil", "ratio", "check"))
        print(self.HEAD.format("(B)", "(elements)", "", "", "", "", "(us)", "(GB/s)",
                               "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", "", ""), flush=True)

    def row(self, r):
        if not self.started:
            self.header()
        s = r["bytes"]
        for side in ("hand", "lib"):
            t = r[f"t_{side}"]
            r[f"algbw_{side}"] = s / t / 1e9 if t > 0 else 0.0
            r[f"busbw_{side}"] = r[f"algbw_{side}"] * self.factor
            # busbw as a fraction of the ceiling (the table shows it in %)
            r[f"ceil_{side}"] = r[f"busbw_{side}"] / self.ceiling if self.ceiling else None
        r["ratio"] = r["t_lib"] / r["t_hand"] if r["t_hand"] > 0 else 0.0
        check = "ok" if r["check"] == "ok" else f"WRONG {r['nwrong']}"

        def pct(v):
            return "-" if v is None else f"{v * 100:.0f}"

        print(self.HEAD.format(s, r["count"], self.type, self.op, self.root, r["iters"],
                               f"{r['t_hand'] * 1e6:.2f}", f"{r['algbw_hand']:.2f}",
                               f"{r['busbw_hand']:.2f}", pct(r["ceil_hand"]),
                               f"{r['t_lib'] * 1e6:.2f}", f"{r['algbw_lib']:.2f}",
                               f"{r['busbw_lib']:.2f}", pct(r["ceil_lib"]), f"{r['ratio']:.2f}",
                               check), flush=True)
        if r["check"] != "ok":
            print(f"  ERROR: {self.name} at {s} B differs from {self.library} in {r['nwrong']} "
                  f"element(s), max |difference| {r['maxerr']:.3g}: {r['detail']}", flush=True)
        return r

# ------------------------------------------------------------------ make test

# Per byte of busbw, the bytes a rank copies and the bytes it reduces (one copy per
# byte moved, one reduce pass per byte reduced): the ceilings worked out apart from
# CEILINGS, to check them against.
COPIES_AND_REDUCES = {"ring_allreduce": (2, 1), "allreduce_rd": (2, 1),
                      "hierarchical_allreduce": (2, 1), "double_tree_allreduce": (2, 1),
                      "allgather_ring": (1, 0),
                      "reduce_scatter_ring": (1, 1), "bcast_binomial": (1, 0),
                      "alltoallv_scratch": (1, 0)}


def check_ceilings(data):
    """What is wrong with a run's ceilings (its JSON): C and R must be positive, every
    collective's ceiling m / (m/C + k/R) with its m copies and k reduces per byte, every
    row's busbw against it busbw / ceiling on both sides."""
    c, r = data.get("copy_GBps"), data.get("reduce_GBps")
    if not (isinstance(c, float) and isinstance(r, float) and c > 0 and r > 0):
        return [f"C {c!r} and R {r!r} GB/s: not both positive"]
    problems = []
    for coll in data["collectives"]:
        copies, reduces = COPIES_AND_REDUCES[coll["name"]]
        want = copies / (copies / c + reduces / r)
        got = coll.get("ceiling_GBps")
        if not isinstance(got, float) or not math.isclose(got, want, rel_tol=1e-12):
            problems.append(f"{coll['name']}: ceiling {got!r} GB/s, expected {want!r} from C and R")
            continue
        for row in coll["rows"]:
            for side in ("hand", "lib"):
                frac = row.get(f"ceil_{side}")
                if not isinstance(frac, float) or not math.isclose(
                        frac, row[f"busbw_{side}"] / got, rel_tol=1e-12, abs_tol=1e-15):
                    problems.append(f"{coll['name']} at {row['bytes']} B: ceil_{side} {frac!r}, "
                                    f"busbw_{side} / ceiling = {row[f'busbw_{side}'] / got!r}")
    return problems

def selftest(s):
    """make test: the bench at small sizes, and a wrong collective it must reject."""
    s.section("bench (make bench LC=1, small sizes)")
    # The collectives are named twice: in bench.mk, for the Makefile's link, and in
    # this file's table; they must be the same ones.
    pairs = [(c[0], c[1][:-2]) for c in COLLECTIVES]
    link = bench_link("lc1_basic")
    linked = list(zip(link["functions"], link["sources"]))
    s.record("bench: bench.mk links exactly the files and functions of the collectives' "
             "table, each with its copy past libxt's counters", pairs == linked and link["direct"],
             [f"COLLECTIVES {pairs}", f"bench.mk {linked}, direct {link['direct']}"])
    out = fresh("bench")
    rc, text, took = run_bench(["--np", "3", "--max", "4K", "--wrapcost", "8"], out)
    problems = [] if rc == 0 else tail(text)
    data = bench_results(os.path.join(out, "lc1_basic_np3.json"), problems, {"collectives": []})
    names = [c["name"] for c in data["collectives"]]
    want = ["ring_allreduce", "allreduce_rd", "hierarchical_allreduce", "double_tree_allreduce",
            "allgather_ring", "reduce_scatter_ring", "bcast_binomial", "alltoallv_scratch"]
    if sorted(names) != sorted(want):
        problems.append(f"benched {names}, expected {want}")
    for c in data["collectives"]:
        bad = [r for r in c["rows"] if r["check"] != "ok" or not r["t_hand"] > 0]
        if bad or not c["rows"]:
            problems.append(f"{c['name']}: rows {bad or 'none'}")
    trees = next((c.get("trees") for c in data["collectives"]
                  if c["name"] == "double_tree_allreduce"), None) or {}
    if (trees.get("chunk"), trees.get("chunks"), trees.get("steps")) != (64 << 10, 1, 6):
        problems.append(f"double_tree_allreduce's pipeline at 4 KiB, np 3: {trees}, expected "
                        f"chunks of 64 KiB, 1 a half, 2 (1 + 2) = 6 steps")
    svg = os.path.join(out, "lc1_basic_np3.svg")
    if not os.path.exists(svg):
        problems.append("no plot written")
    s.record("bench: all eight collectives at np=3, every timed result checked against the "
             "library's, the double tree's chunks and steps, a plot", not problems, problems,
             f"({took:.1f} s)")

    # The node-aware all-reduce on nodes given by hand: its values checked at every size, and
    # the nodes it ran on with the bytes a rank sends across them (np 4, 2 a node: S/2 a
    # rank, against 3/2 S from a flat ring's rank at a node boundary).
    out2 = fresh("bench_nodes")
    rc, text2, took2 = run_bench(["--np", "4", "--per-node", "2", "--coll",
                                  "hierarchical_allreduce", "--max", "4K", "--wrapcost", "0"],
                                 out2)
    problems = [] if rc == 0 else tail(text2)
    got = bench_results(os.path.join(out2, "lc1_basic_np4.json"), problems, {"collectives": []})
    hier = next((c for c in got["collectives"] if c["name"] == "hierarchical_allreduce"), {})
    nodes = hier.get("nodes") or {}
    size = nodes.get("bytes", 0)
    if not hier.get("rows") or any(r["check"] != "ok" for r in hier["rows"]):
        problems.append(f"rows: {hier.get('rows')}")
    if (nodes.get("nodes"), nodes.get("per_node"), nodes.get("from")) != (2, 2, "given") or \
            (nodes.get("across_hier"), nodes.get("across_flat")) != (size / 2, 1.5 * size):
        problems.append(f"nodes: {nodes}")
    if "# nodes: 2 of 2 ranks, given (--per-node)" not in text2:
        problems.append("no nodes line in the table")
    s.record("bench: hierarchical_allreduce at np=4 on nodes of 2 (--per-node), every size's "
             "values checked; the nodes and the bytes a rank sends across them, S/2 against a "
             "flat ring's 3/2 S", not problems, problems, f"({took2:.1f} s)")

    # The ceilings: measured once, each collective's from C and R by its formula, every
    # row's busbw against it, a line in every panel; and a wrong ceiling must be caught.
    ceiling_problems = []
    if text.count("# this machine's limit per rank: copy C = ") != 1:
        ceiling_problems.append("the header line with C and R is not printed once")
    if sorted(CEILINGS) != sorted(NAMES):
        ceiling_problems.append(f"CEILINGS has {sorted(CEILINGS)}, the table {sorted(NAMES)}")
    ceiling_problems += check_ceilings(data)
    plot = open(svg).read() if os.path.exists(svg) else ""
    for c in data["collectives"]:
        if c.get("ceiling_GBps") and f"ceiling {c['ceiling_GBps']:.2f} GB/s" not in plot:
            ceiling_problems.append(f"{c['name']}: no labelled ceiling line in the plot")
    wrong = json.loads(json.dumps(data))
    for c in wrong["collectives"]:
        if c["name"] == "ring_allreduce" and c.get("ceiling_GBps"):
            # The reduce-scatter's formula where the all-reduce's belongs.
            c["ceiling_GBps"] = 1 / (1 / wrong["copy_GBps"] + 1 / wrong["reduce_GBps"])
    if not any("ring_allreduce: ceiling" in p for p in check_ceilings(wrong)):
        ceiling_problems.append("a ring_allreduce with the reduce-scatter's ceiling passes the "
                                "check (negative control)")
    s.record("bench: this machine's limit measured once, C and R > 0; every collective's "
             "ceiling its formula of them, every row's busbw against it, a labelled line per "
             "panel; a wrong ceiling is caught", not ceiling_problems, ceiling_problems,
             f"(C {data.get('copy_GBps') or 0:.2f}, R {data.get('reduce_GBps') or 0:.2f} GB/s)")

    # The check must fail when it should: a ring all-reduce that assumes np divides count.
    tree = mutant_tree("bench_mutant", "lc1_basic", "ring_allreduce_assumes_divisible")
    rc, out, _ = run_bench(["--np", "3", "--coll", "ring_allreduce", "--max", "64", "--wrapcost",
                            "0"], os.path.join(tree, "out"), tree)
    s.record("bench: a wrong hand-written result is reported (rank, index, both values) and "
             "fails the run", rc == 1 and "WRONG" in out and
             re.search(r"ERROR: ring_allreduce at \d+ B differs .* rank \d+ \[\d+\]", out),
             tail(out))


# ------------------------------------------------------- the page's copy of a run

# "Reading the table"'s rows: size, count, type, op, root, iters, then time, algbw, busbw,
# %ceil for the hand-written side and the library's, the ratio, the check.
PAGE_ROW = re.compile(r"^ +(\d+) +(\d+) +float +sum +-1 +\d+ +([\d.]+) +([\d.]+) +([\d.]+) +(\d+) +"
                      r"([\d.]+) +([\d.]+) +([\d.]+) +(\d+) +([\d.]+) +ok$", re.M)


def page_figures(page):
    """What docs/lc1_basic.md derives from one measured run, checked against the bench's own
    arithmetic (the times and C, R themselves are the machine's): the ceilings from C and R
    (CEILINGS), the ceiling the table's header states, and in the copied rows count = size / 4,
    algbw = size / time, busbw = algbw 2(n-1)/n at n = 4, %ceil = busbw / ceiling and the ratio
    of the two times; each within the rounding of the figures it is computed from. Returns
    [problem]."""
    problems = []

    def near(got, lo, hi, digits):
        slack = 0.5 * 10 ** -digits + 1e-9
        return lo - slack <= got <= hi + slack

    def spread(f, *values):
        """f's range over the values each rounded to 2 decimals."""
        outs = [f(*[v + d for v, d in zip(values, ds)])
                for ds in itertools.product((-0.005, 0.005), repeat=len(values))]
        return min(outs), max(outs)
    rows = re.findall(r"^\| C, R \(GB/s per rank\) \| ([\d.]+), ([\d.]+) \| ([\d.]+), ([\d.]+) \|$",
                      page, re.M)
    ceils = re.findall(r"^\| ceiling: C / reduce-scatter / all-reduce \(GB/s\) \| ([\d.]+) / "
                       r"([\d.]+) / ([\d.]+) \| ([\d.]+) / ([\d.]+) / ([\d.]+) \|$", page, re.M)
    if not rows or not ceils:
        return ["docs/lc1_basic.md: the table of C, R and the ceilings is missing"]
    cr = [float(x) for x in rows[0]]
    shown = [float(x) for x in ceils[0]]
    for k, (c, r) in enumerate(((cr[0], cr[1]), (cr[2], cr[3]))):
        for j, name in enumerate(("allgather_ring", "reduce_scatter_ring", "ring_allreduce")):
            lo, hi = spread(CEILINGS[name][1], c, r)
            if not near(shown[3 * k + j], lo, hi, 2):
                problems.append(f"docs/lc1_basic.md: ceiling {CEILINGS[name][0]} with C = {c}, "
                                f"R = {r} shown as {shown[3 * k + j]}; it is {lo:.3f} .. {hi:.3f}")
    header = re.search(r"ceiling of busbw = 2/\(2/C \+ 1/R\) = ([\d.]+) GB/s", page)
    limit = re.search(r"copy C = ([\d.]+) GB/s, reduce R = ([\d.]+) GB/s", page)
    ceiling = float(header.group(1)) if header else None
    if not (header and limit):
        problems.append("docs/lc1_basic.md: the table header's ceiling or C and R is missing")
    else:
        lo, hi = spread(CEILINGS["ring_allreduce"][1], *(float(x) for x in limit.groups()))
        if not near(ceiling, lo, hi, 2):
            problems.append(f"docs/lc1_basic.md: ceiling {ceiling} from C, R = {limit.groups()}; "
                            f"it is {lo:.3f} .. {hi:.3f}")
    found = PAGE_ROW.findall(page)
    if not found:
        problems.append("docs/lc1_basic.md: no row of the copied table found")
    for size, count, *rest in found:
        size, count = int(size), int(count)
        t1, a1, b1, p1, t2, a2, b2, p2, ratio = (float(x) for x in rest)
        if count * 4 != size:
            problems.append(f"docs/lc1_basic.md: {count} floats are not {size} B")
        for t, a, b, p in ((t1, a1, b1, p1), (t2, a2, b2, p2)):
            algbw = size / t / 1e3
            if not near(a, algbw, algbw, 2) or not near(b, 1.5 * a - 0.0075, 1.5 * a + 0.0075, 2):
                problems.append(f"docs/lc1_basic.md: size {size} time {t} us shows algbw {a}, "
                                f"busbw {b}; size/time = {algbw:.3f}, busbw = 1.5 algbw")
            if ceiling and not near(p, 100 * (b - 0.005) / ceiling, 100 * (b + 0.005) / ceiling, 0):
                problems.append(f"docs/lc1_basic.md: %ceil {p:g} for busbw {b} and ceiling "
                                f"{ceiling}")
        if not near(ratio, t2 / t1, t2 / t1, 2):
            problems.append(f"docs/lc1_basic.md: ratio {ratio} for times {t1} and {t2}: "
                            f"{t2 / t1:.3f}")
    return problems


# make test's negative control of page_figures: an all-reduce ceiling changed.
PAGE_BREAK = ("3.86 / 1.86 / 2.51 |", "3.86 / 1.86 / 2.61 |")
