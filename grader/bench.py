#!/usr/bin/env python3
"""make bench LC=1 [NP=4] [SOL=0] [ARGS="--coll ring_allreduce --max 16M"]

Times lecture 1's hand-written collectives beside the MPI library's own and
prints one table per collective in the layout of nccl-tests: time, algbw and
busbw of each, their ratio, and whether the hand-written result matched the
library's. Writes the results as JSON and a plot of busbw against message size
(SVG) under build/bench/. docs/lc1_basic.md (Bandwidth) explains the columns.

The measuring is done by build/bench/<tree>/bench (common/bench/lc1_basic.c),
one launch per collective. Exit status: 0 when every check passed, 1 when a
result was wrong or a run failed, 2 for a usage error. A collective whose
exercise file is missing or still a TODO is skipped and says so.
"""

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import launch  # noqa: E402

# name, exercise file, library call, busbw factor as text, busbw factor,
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


def parse_size(text):
    m = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(i?[bB])?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 8, 4K, 64M)")
    return int(m.group(1)) << {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]


def human(nbytes):
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if nbytes >= 1 << shift and nbytes % (1 << shift) == 0:
            return f"{nbytes >> shift} {unit}iB"
    return f"{nbytes} B"


def cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def options(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lc", default="1", help="lecture (only 1 has benchmarks)")
    ap.add_argument("--np", type=int, default=None,
                    help="ranks (default: the cores, at least 2 and at most 4)")
    ap.add_argument("--student", action="store_true", help="bench lc1_basic/, not solutions/")
    ap.add_argument("--args", default="", help="more of these options, as one string (make ARGS=)")
    ap.add_argument("--coll", default="", help="comma-separated collectives (default: all)")
    ap.add_argument("--min", type=parse_size, default=8, help="smallest size (default 8)")
    ap.add_argument("--max", type=parse_size, default=64 << 20, help="largest size (default 64M)")
    ap.add_argument("--dtype", default="float32", choices=sorted(TYPE_NAMES))
    ap.add_argument("--iters", type=int, default=0, help="timed calls per size (default: by size)")
    ap.add_argument("--warmup", type=int, default=-1, help="warm-up calls per size")
    ap.add_argument("--rounds", type=int, default=5,
                    help="timed calls run in this many rounds; the median round counts "
                         "(1: nccl-tests' plain average)")
    ap.add_argument("--wrapcost", type=parse_size, default=8,
                    help="size at which libxt's PMPI wrappers are timed (0: not)")
    ap.add_argument("--out", default=os.path.join("build", "bench"), help="where files go")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per collective")
    ap.add_argument("--budget", type=float, default=270,
                    help="seconds the whole bench should take at most: on a slow machine the "
                         "largest sizes get fewer timed calls (default 270)")
    ap.add_argument("--tree", help="bench the exercise files under TREE/lc1_basic (a mutant's "
                                   "copy, say) instead of solutions/")
    args = ap.parse_args(argv)
    if args.args:
        args = ap.parse_args(argv + shlex.split(args.args))
    if args.np is None:
        args.np = min(4, max(2, cores()))
    return args


class Launch:
    """Collects one collective's lines from the bench program as they come."""

    def __init__(self, table):
        self.table = table
        self.info, self.rows, self.wrap = {}, [], None
        self.skip, self.todo, self.messages = None, [], []
        self.in_banner = False

    def line(self, text):
        parts = text.split(None, 13)  # a ROW's last field, the detail, may hold spaces
        kind = parts[0] if parts else ""
        if kind == "INFO" and len(parts) >= 3:
            self.info[parts[1]] = text.split(None, 2)[2]
        elif kind == "SKIP":
            self.skip = text[5:]
        elif kind == "ROW" and len(parts) >= 14:
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
        elif re.fullmatch(r"-{20,}", text.strip()):
            self.in_banner = not self.in_banner  # Open MPI's boxed abort texts say nothing more
        elif not self.in_banner and text.strip() and not re.match(
                r"\[[\w.-]+:\d+\] (\d+ more process|Set MCA parameter)", text):
            if " TODO " in text:
                self.todo.append(text)
                if len(self.todo) > 1:
                    return  # every rank stops at the same TODO: once is enough
            self.messages.append(text)
            print(f"  {text}", flush=True)


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


# -------------------------------------------------------------------- plot

COLORS = {"hand": "#1f5fbf", "lib": "#d9661f"}


def nice_ticks(v):
    """(top, step): a round step (1, 2, 2.5 or 5 times a power of ten), at most 5 to the top."""
    if v <= 0:
        return 1.0, 0.25
    raw = v / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return step * math.ceil(v / step - 1e-9), step


def svg_plot(path, title, panels, lo, hi):
    """busbw against log2(size): one panel per collective, hand-written and library."""
    cols = 3
    rows_n = max(1, math.ceil(len(panels) / cols))
    pw, ph, ml, mr, mt, mb = 360, 250, 52, 14, 30, 42
    width, height = cols * pw, rows_n * ph + 56
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{esc(title)}</text>']
    lx = width / 2 - 150
    for i, (side, label) in enumerate((("hand", "hand-written"), ("lib", "MPI library"))):
        x = lx + i * 170
        dash = ' stroke-dasharray="6,3"' if side == "lib" else ""
        out.append(f'<line x1="{x}" y1="38" x2="{x + 28}" y2="38" stroke="{COLORS[side]}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 34}" y="42">{label}</text>')
    lg_lo, lg_hi = math.log2(lo), math.log2(hi)
    for k, (name, library, rows) in enumerate(panels):
        ox, oy = (k % cols) * pw, 56 + (k // cols) * ph
        x0, x1, y0, y1 = ox + ml, ox + pw - mr, oy + mt, oy + ph - mb
        top, step = nice_ticks(max([r[f"busbw_{s}"] for r in rows for s in ("hand", "lib")]
                                   or [0]))

        def px(nbytes):
            f = (math.log2(nbytes) - lg_lo) / (lg_hi - lg_lo) if lg_hi > lg_lo else 0
            return x0 + f * (x1 - x0)

        def py(v):
            return y1 - (v / top) * (y1 - y0)

        out.append(f'<text x="{(x0 + x1) / 2}" y="{oy + 16}" text-anchor="middle" '
                   f'font-size="12">{esc(name)} vs {esc(library)}</text>')
        out.append(f'<rect x="{x0}" y="{y0}" width="{x1 - x0}" height="{y1 - y0}" fill="none" '
                   f'stroke="#888"/>')
        for j in range(int(round(top / step)) + 1):
            v = j * step
            y = py(v)
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{x0 - 4}" y="{y + 4:.1f}" text-anchor="end">{v:.10g}</text>')
        p = int(math.ceil(lg_lo))
        while p <= lg_hi:
            x = px(2 ** p)
            out.append(f'<line x1="{x:.1f}" y1="{y1}" x2="{x:.1f}" y2="{y1 + 3}" stroke="#888"/>')
            if (p - 3) % 3 == 0:
                lab = human(2 ** p).replace(" iB", "").replace("iB", "").replace(" B", "")
                out.append(f'<text x="{x:.1f}" y="{y1 + 15}" text-anchor="middle">{lab}</text>')
            p += 1
        out.append(f'<text x="{(x0 + x1) / 2}" y="{y1 + 32}" text-anchor="middle" '
                   f'fill="#555">size (bytes, log2 scale)</text>')
        out.append(f'<text x="{ox + 12}" y="{(y0 + y1) / 2}" text-anchor="middle" fill="#555" '
                   f'transform="rotate(-90 {ox + 12} {(y0 + y1) / 2})">busbw (GB/s)</text>')
        if not rows:
            out.append(f'<text x="{(x0 + x1) / 2}" y="{(y0 + y1) / 2}" text-anchor="middle" '
                       f'fill="#999">not measured</text>')
            continue
        for side in ("hand", "lib"):
            pts = " ".join(f"{px(r['bytes']):.1f},{py(r[f'busbw_{side}']):.1f}" for r in rows)
            dash = ' stroke-dasharray="6,3"' if side == "lib" else ""
            out.append(f'<polyline points="{pts}" fill="none" stroke="{COLORS[side]}" '
                       f'stroke-width="2"{dash}/>')
            for r in rows:
                out.append(f'<circle cx="{px(r["bytes"]):.1f}" cy="{py(r[f"busbw_{side}"]):.1f}" '
                           f'r="2.2" fill="{COLORS[side]}"/>')
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def esc(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -------------------------------------------------------------------- main

def main(argv):
    args = options(argv)
    os.chdir(os.path.dirname(HERE))
    if str(args.lc) not in ("1", "lc1", "lc1_basic"):
        print(f"bench: lecture {args.lc} has no benchmarks; `make bench LC=1` does",
              file=sys.stderr)
        return 2
    wanted = [c for c in args.coll.split(",") if c] or NAMES
    unknown = [c for c in wanted if c not in NAMES]
    if unknown:
        print(f"bench: no collective {', '.join(unknown)}; there are: {', '.join(NAMES)}",
              file=sys.stderr)
        return 2
    if args.np < 1 or args.min < 1 or args.max < args.min:
        print("bench: need np >= 1 and 1 <= min <= max", file=sys.stderr)
        return 2

    tree = ("lc1_basic" if args.student else
            os.path.normpath(os.path.join(args.tree or "solutions", "lc1_basic")))
    binary = os.path.join("build", "bench", tree, "bench")
    build = subprocess.run(["make", "-s", "--no-print-directory", binary])
    if build.returncode != 0:
        print(f"bench: building {binary} failed", file=sys.stderr)
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
    launch.install_signal_handlers()
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
        collect = Launch(table)
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
    tag = "_student" if args.student else ("_" + re.sub(r"\W+", "_", args.tree.strip("/"))
                                           if args.tree else "")
    stem = os.path.join(args.out, f"lc1_basic{tag}_np{args.np}")
    meta = {"np": args.np, "cores": ncores, "mpi": flavor_version, "dtype": args.dtype,
            "tree": tree, "seconds": round(total, 1), "collectives": results}
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    panels = [(r["name"], r["library"], r["rows"]) for r in results]
    svg_plot(stem + ".svg", f"make bench LC=1 NP={args.np}: busbw against size "
             f"({flavor_version}, {args.dtype}, {ncores} cores)", panels, args.min, args.max)
    print(f"# plot: {stem}.svg   data: {stem}.json")
    print(f"# bench time: {total:.0f} s")
    for msg in skipped:
        print(f"# skipped: {msg}")
    if failures:
        print(f"# FAILED: {'; '.join(failures)}")
        return 1
    return 0


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


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
