#!/usr/bin/env python3
"""make bench LC=1|2|3|all [NP=4] [SOL=0] [ARGS="..."]

make bench LC=1: lecture 1's hand-written collectives beside the MPI library's
own, one table per collective in the layout of nccl-tests: time, algbw and
busbw of each, their ratio, and whether the hand-written result matched the
library's. Writes the results as JSON and a plot of busbw against message size
(SVG) under build/bench/. docs/lc1_basic.md (Bandwidth) explains the columns.
Measured by build/bench/solutions/lc1_basic/bench (common/bench/lc1_basic.c), one
launch per collective.

make bench LC=2: the step time of lecture 2's data-parallel training, naive
(ddp_naive_step) against bucketed (ddp_bucketed_step), beside the same step
without communication, at np 1, 2 and 4 (NP=n: that one only), on a model
large enough that communication matters; the bucketed step also without its
MPI_Testall progress calls, and with libnbc's ring algorithm. Then one traced
launch at np 2 (build/trace/) and a summary of it: when each bucket's
all-reduce started and finished against backward's layers. Writes JSON under
build/bench/. docs/lc2_dp.md (Step time) explains it. Measured by
build/bench/solutions/lc2_dp/bench (common/bench/lc2_dp.c), one launch per np.

make bench LC=3: memory, traffic and step time of lecture 3's data-parallel
Adam (dp_adam_step) and ZeRO stages 1, 2 and 3 (zero1_step, zero2_step,
zero3_step), at np 1, 2 and 4 (NP=n: that one only): per rank, the peak bytes
of each memory kind over the training steps and the bytes of the MPI calls per
step, each beside lecture 3's formula and checked against it, the step time,
and the classic mixed-precision ZeRO formula for comparison. Every stage's
losses and final weights must be stage 0's. Writes JSON under build/bench/.
docs/lc3_zero.md (Memory and traffic) explains it. Measured by
build/bench/solutions/lc3_zero/bench (common/bench/lc3_zero.c), one launch
per np.

make bench with no LC runs lecture 1's only (as before lecture 2 existed);
LC=all runs them all, one after the other.

Exit status: 0 when every check passed, 1 when a result was wrong or a run
failed, 2 for a usage error. An exercise file that is missing or still a TODO
is skipped and says so.
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


# LC=2: the model, and the variants of common/bench/lc2_dp.c.
LC2_DIMS = "1024,1024,1024,1024,1024,1024,1024,16"
# LC=3: the model of common/bench/lc3_zero.c.
LC3_DIMS = "256,512,512,512,512,256"
LC2_VARIANTS = ("compute", "naive", "onebucket", "bucketed", "noprogress", "onebucket_ring",
                "bucketed_ring", "noprogress_ring")
LC2_DEFAULT_VARIANTS = LC2_VARIANTS[:-1]


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


def build_bench(tree):
    """make the bench of a tree (build/bench/<tree>/bench); None, with a message, on failure."""
    binary = os.path.join("build", "bench", tree, "bench")
    build = subprocess.run(["make", "-s", "--no-print-directory", binary])
    if build.returncode != 0:
        print(f"bench: building {binary} failed", file=sys.stderr)
        return None
    return binary

def output_tag(args):
    """What tells this run's files apart: '', '_student' or the --tree path."""
    if args.student:
        return "_student"
    return "_" + re.sub(r"\W+", "_", args.tree.strip("/")) if args.tree else ""


def finish(stem, meta, timing, skipped, failures):
    """Writes <stem>.json, prints the closing lines; the exit status."""
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(f"# data: {stem}.json")
    print(timing)
    for msg in skipped:
        print(f"# skipped: {msg}")
    if failures:
        print(f"# FAILED: {'; '.join(failures)}")
        return 1
    return 0


class TrainingRun:
    """What the training benches (LC=2, LC=3) print first and record last: the MPI
    library, the cores, the load before and after, the time taken."""

    def __init__(self, lc, args, what, tree, nps):
        self.args, self.tree, self.nps = args, tree, nps
        self.mpi = launch.mpi_flavor()[1]
        self.cores = cores()
        self.load0 = os.getloadavg()[0]
        self.started = time.monotonic()
        print(f"# make bench LC={lc}{f' NP={args.np}' if args.np else ''}"
              f"{' SOL=0' if args.student else ''}: {what} of {tree}/ with {self.mpi}")
        over = (" (more ranks than cores: oversubscribed, a waiting rank yields its core)"
                if max(nps) > self.cores else "")
        print(f"# np {', '.join(map(str, nps))} on {self.cores} "
              f"core{'s' if self.cores != 1 else ''}{over}; load average {self.load0:.1f} at "
              f"the start")
        if self.load0 > self.cores - 0.5:
            print(f"# the machine is busy (load {self.load0:.1f} on {self.cores} cores): other "
                  f"jobs add time to some rounds; the best round is the steadier number")

    def finish(self, lecture, meta, skipped, failures):
        """Writes <out>/<lecture><tag>[_np<N>].json with meta; the exit status."""
        total = time.monotonic() - self.started
        os.makedirs(self.args.out, exist_ok=True)
        np_tag = f"_np{self.args.np}" if self.args.np else ""
        stem = os.path.join(self.args.out, f"{lecture}{output_tag(self.args)}{np_tag}")
        load1 = os.getloadavg()[0]
        meta = {"nps": self.nps, "cores": self.cores, "mpi": self.mpi, "tree": self.tree,
                **meta, "load_average": [round(self.load0, 2), round(load1, 2)],
                "seconds": round(total, 1)}
        return finish(stem, meta, f"# bench time: {total:.0f} s; load average {load1:.1f} at "
                                  f"the end", skipped, failures)

def cores():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def options(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lc", default="1",
                    help="lecture: 1, 2, 3 or all (default 1: `make bench` without LC is "
                         "lecture 1's)")
    ap.add_argument("--np", type=int, default=None,
                    help="ranks (LC=1 default: the cores, at least 2 and at most 4; LC=2 and 3 "
                         "default: 1, 2 and 4, one launch each)")
    ap.add_argument("--student", action="store_true",
                    help="bench the student tree (lc1_basic/, lc2_dp/, lc3_zero/), not solutions/")
    ap.add_argument("--args", default="", help="more of these options, as one string (make ARGS=)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="timed calls (LC=1) or steps (LC=2, 3) run in this many rounds "
                         "(default 5, 11 and 9); LC=1: the median round counts (1: nccl-tests' "
                         "plain average); LC=2, 3: the best and the median round are shown")
    ap.add_argument("--warmup", type=int, default=-1,
                    help="warm-up calls per size (LC=1, default: by size), warm-up steps per "
                         "variant (LC=2, default 2) or stage (LC=3, default 1)")
    ap.add_argument("--out", default=os.path.join("build", "bench"), help="where files go")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per launch")
    ap.add_argument("--tree", help="bench the exercise files under TREE/lc1_basic, TREE/lc2_dp "
                                   "or TREE/lc3_zero (a mutant's copy, say) instead of "
                                   "solutions/")
    g1 = ap.add_argument_group("LC=1 (collectives)")
    g1.add_argument("--coll", default="", help="comma-separated collectives (default: all)")
    g1.add_argument("--min", type=parse_size, default=8, help="smallest size (default 8)")
    g1.add_argument("--max", type=parse_size, default=64 << 20, help="largest size (default 64M)")
    g1.add_argument("--dtype", default="float32", choices=sorted(TYPE_NAMES))
    g1.add_argument("--iters", type=int, default=0, help="timed calls per size (default: by size)")
    g1.add_argument("--wrapcost", type=parse_size, default=8,
                    help="size at which libxt's PMPI wrappers are timed (0: not)")
    g1.add_argument("--budget", type=float, default=270,
                    help="seconds the whole bench should take at most: on a slow machine the "
                         "largest sizes get fewer timed calls (default 270)")
    g2 = ap.add_argument_group("LC=2 (data-parallel step time); --dims, --rows, --steps: LC=3 too")
    g2.add_argument("--dims", default=None,
                    help=f"the MLP's widths, input first (LC=2 default {LC2_DIMS}: 7 layers, "
                         f"6.3 M parameters, 25 MB of gradients; LC=3 default {LC3_DIMS}: 5 "
                         "layers, 1.05 M parameters)")
    g2.add_argument("--rows", type=int, default=None,
                    help="samples per rank and step (default 16; LC=3: 4)")
    g2.add_argument("--steps", type=int, default=None,
                    help="timed steps per round and variant or stage (default 3)")
    g2.add_argument("--bucket_bytes", type=parse_size, default=4 << 20,
                    help="ddp_bucketed_step's cap (default 4M: one 1024x1024 layer per bucket, "
                         "6 buckets)")
    g2.add_argument("--variants", default="",
                    help="comma-separated, of " + ", ".join(LC2_VARIANTS) +
                         " (default: all but noprogress_ring)")
    g2.add_argument("--trace-np", type=int, default=None,
                    help="ranks of the traced launch (default 2; 0: no trace)")
    g3 = ap.add_argument_group("LC=3 (ZeRO memory, traffic and step time)")
    g3.add_argument("--stages", default="0,1,2,3",
                    help="comma-separated stages: 0 distributed_adam, 1 adam_zero1, 2 adam_zero2, "
                         "3 adam_zero3 (default all; without 0 nothing is compared)")
    g3.add_argument("--check-steps", type=int, default=3,
                    help="training steps measured (memory, traffic) and checked against stage 0 "
                         "(default 3)")
    args = ap.parse_args(argv)
    if args.args:
        args = ap.parse_args(argv + shlex.split(args.args))
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

LECTURES = {"1": "lc1_basic", "lc1": "lc1_basic", "lc1_basic": "lc1_basic",
            "2": "lc2_dp", "lc2": "lc2_dp", "lc2_dp": "lc2_dp",
            "3": "lc3_zero", "lc3": "lc3_zero", "lc3_zero": "lc3_zero"}


def main(argv):
    args = options(argv)
    os.chdir(os.path.dirname(HERE))
    lc = str(args.lc).lower()
    if lc == "all":
        lectures = ["lc1_basic", "lc2_dp", "lc3_zero"]
    elif lc in LECTURES:
        lectures = [LECTURES[lc]]
    else:
        print(f"bench: lecture {args.lc} has no benchmarks; `make bench LC=1`, "
              f"`make bench LC=2` and `make bench LC=3` do", file=sys.stderr)
        return 2
    launch.install_signal_handlers()
    status = 0
    for i, lecture in enumerate(lectures):
        if i:
            print()
        run = {"lc1_basic": main_lc1, "lc2_dp": main_lc2, "lc3_zero": main_lc3}[lecture]
        status = max(status, run(argparse.Namespace(**vars(args))))
    return status


def main_lc1(args):
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

    tree = ("lc1_basic" if args.student else
            os.path.normpath(os.path.join(args.tree or "solutions", "lc1_basic")))
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


# ------------------------------------------------------------------ lecture 2

LC2_ABOUT = [
    ("compute", "forward, backward, update on every rank at once; no MPI"),
    ("naive", "ddp_naive_step: after backward, one MPI_Allreduce per tensor"),
    ("onebucket", "ddp_bucketed_step with a cap of all the gradients: one MPI_Iallreduce, "
                  "started when backward has finished (nothing can overlap)"),
    ("bucketed", "ddp_bucketed_step: an MPI_Iallreduce per bucket from backward's hook, "
                 "MPI_Testall at every later hook, MPI_Waitall"),
    ("noprogress", "ddp_bucketed_step with its MPI_Testall calls skipped: MPI only at the "
                   "Iallreduce starts and the Waitall"),
    ("*_ring", "the same with libnbc's ring for MPI_Iallreduce instead of its binomial tree"),
]
BUCKETED = LC2_VARIANTS[2:]


class Lc2Launch(Launch):
    """Collects one np's lines from common/bench/lc2_dp.c."""

    def __init__(self):
        super().__init__(None)
        self.buckets, self.rows, self.calls, self.checks = [], {}, {}, []

    def line(self, text):
        parts = text.split()
        kind = parts[0] if parts else ""
        if kind == "BUCKET" and len(parts) == 6:
            self.buckets.append({"index": int(parts[1]), "first": parts[2], "last": parts[3],
                                 "bytes": int(parts[4]), "first_layer": int(parts[5])})
        elif kind == "ROW" and len(parts) == 7:
            self.rows[parts[1]] = {"median": float(parts[2]), "best": float(parts[3]),
                                   "worst": float(parts[4]), "rounds": int(parts[5]),
                                   "steps": int(parts[6])}
        elif kind == "CALLS" and len(parts) == 5:
            self.calls.setdefault(parts[1], {})[parts[2]] = float(parts[3])
        elif kind == "CHECK" and len(parts) >= 6:
            self.checks.append({"what": parts[1], "status": parts[2], "ndiff": int(parts[3]),
                                "maxdiff": float(parts[4]), "detail": text.split(None, 5)[5]})
        elif text.startswith("xt: trace of "):
            pass  # the traced launch's own note; the summary names the file
        else:
            super().line(text)


def ms(seconds):
    return f"{seconds * 1e3:.1f}"


def lc2_derive(rows, np_):
    """exposed (best and median) per variant, and hidden: the share of naive's exposed time."""
    out = {}
    comp = rows.get("compute")
    naive = rows.get("naive")
    for name, r in rows.items():
        d = {}
        if comp and name != "compute":
            for stat in ("best", "median"):
                d[f"exposed_{stat}"] = r[stat] - comp[stat]
            if naive and name in BUCKETED:
                for stat in ("best", "median"):
                    ne = naive[stat] - comp[stat]
                    # One rank has nothing to hide: a share of noise would mean nothing.
                    if np_ > 1 and ne > 5e-4:
                        d[f"hidden_{stat}"] = (ne - (r[stat] - comp[stat])) / ne
        out[name] = d
    return out


def lc2_calls_text(calls):
    short = {"MPI_Allreduce": "Allreduce", "MPI_Iallreduce": "Iallreduce",
             "MPI_Testall": "Testall", "MPI_Waitall": "Waitall", "MPI_Wait": "Wait"}
    return " ".join(f"{v:g} {short.get(k, k)}" for k, v in calls.items()) or "-"


LC2_HEAD = "{:>4}  {:<16} {:>8} {:>8} {:>8} {:>7}  {:<32} {}"


def lc2_print_rows(np_, got, derived):
    checks = {c["what"].split("=", 1)[1]: c for c in got.checks if "=" in c["what"]}
    for name in LC2_VARIANTS:
        r = got.rows.get(name)
        if not r:
            continue
        d = derived.get(name, {})
        exposed = f"{d['exposed_best'] * 1e3:.1f}" if "exposed_best" in d else "-"
        hidden = f"{d['hidden_best'] * 100:.0f}%" if "hidden_best" in d else "-"
        c = checks.get(name)
        if name in ("compute", "naive") or not c:
            check = "-" if name != "naive" else "(reference)"
        elif c["status"] != "ok":
            check = f"WRONG {c['ndiff']}"
        elif c["ndiff"] == 0:
            check = "= naive"
        else:
            check = f"~ naive ({c['maxdiff']:.0e})"
        print(LC2_HEAD.format(np_, name, ms(r["best"]), ms(r["median"]), exposed, hidden,
                              lc2_calls_text(got.calls.get(name, {})), check), flush=True)
    for c in got.checks:
        if c["status"] != "ok":
            print(f"  ERROR: np {np_}: {c['what']} fails: {c['ndiff']} weight values differ "
                  f"(over all ranks), max |difference| {c['maxdiff']:.3g}: {c['detail']}",
                  flush=True)


def main_lc2(args):
    args.dims = args.dims or LC2_DIMS
    args.rows = args.rows if args.rows is not None else 16
    args.steps = args.steps if args.steps is not None else 3
    tree = ("lc2_dp" if args.student else
            os.path.normpath(os.path.join(args.tree or "solutions", "lc2_dp")))
    nps = [args.np] if args.np else [1, 2, 4]
    rounds = args.rounds or 11
    warmup = args.warmup if args.warmup >= 0 else 2
    variants = [v for v in args.variants.split(",") if v] or list(LC2_DEFAULT_VARIANTS)
    unknown = [v for v in variants if v not in LC2_VARIANTS]
    if unknown or min(nps) < 1 or args.rows < 1 or args.steps < 1 or rounds < 1:
        print(f"bench: need np, --rows, --steps, --rounds >= 1 and variants of "
              f"{', '.join(LC2_VARIANTS)}" + (f" (not {', '.join(unknown)})" if unknown else ""),
              file=sys.stderr)
        return 2
    trace_np = args.trace_np if args.trace_np is not None else (args.np or 2)

    binary = build_bench(tree)
    if binary is None:
        return 1

    run = TrainingRun(2, args, "data-parallel step time", tree, nps)
    for name, about in LC2_ABOUT:
        if name in variants or (name == "*_ring" and any(v.endswith("_ring") for v in variants)):
            print(f"#   {name:<16} {about}")
    print(f"# time: ms per step, the slowest rank's average over {args.steps} steps; best and "
          f"median of {rounds} rounds, the variants taking turns in every round")
    print("# exposed = best step - best compute step: what communication adds to a step; hidden = "
          "the part of naive's exposed time that a bucketed variant does not expose")

    env = launch.mpi_env()
    # Every element of a DDP sum is a float: no need for the grader's plain C kernels,
    # and the timed launches are not traced (tracing has its own launch below).
    if "OMPI_MCA_op" not in os.environ:
        env.pop("OMPI_MCA_op", None)
    env.pop("XT_TRACE", None)
    common = [binary, "--dims", args.dims, "--rows", str(args.rows),
              "--bucket_bytes", str(args.bucket_bytes)]
    results, failures, skipped, first = [], [], [], True
    for np_ in nps:
        prog = common + ["--steps", str(args.steps), "--rounds", str(rounds),
                         "--warmup", str(warmup), "--variants", ",".join(variants)]
        cmd = launch.mpirun_command(np_, prog)
        got = Lc2Launch()
        t0 = time.monotonic()
        res = launch.run(cmd, timeout=args.timeout, env=env, on_line=got.line)
        seconds = time.monotonic() - t0
        if got.skip or got.todo:
            where = re.search(r"TODO (\S+:\d+)", got.todo[0]) if got.todo else None
            msg = got.skip or (f"{tree}/ is not written yet (TODO at "
                               f"{where.group(1) if where else '?'})")
            print(f"# SKIPPED: {msg}")
            skipped.append(msg)
            break
        if first and got.info:
            first = False
            info = got.info
            print(f"# model {info.get('dims')}: {len(info.get('dims', '').split(',')) - 1} layers, "
                  f"{int(info.get('nparams', 0)):,} parameters, "
                  f"{int(info.get('grad_bytes', 0)) / 1e6:.1f} MB of gradients; "
                  f"{info.get('rows')} rows per rank and step, MSE loss, SGD")
            plan = ", ".join(f"{b['first']}..{b['last']} {b['bytes'] / (1 << 20):.1f}"
                             for b in got.buckets)
            print(f"# buckets of at least {human(args.bucket_bytes)}: {len(got.buckets)} "
                  f"(MiB, filled in this order): {plan}")
            alg = info.get("iallreduce_algorithm", "-")
            if alg != "-":
                print(f"# MPI_Iallreduce algorithm: {alg} (libnbc takes a binomial tree for every "
                      f"in-place call; the _ring rows set its ring through MPI_T)")
            print()
            print(LC2_HEAD.format("np", "variant", "best", "median", "exposed", "hidden",
                                  "MPI calls per step", "check"))
            print(LC2_HEAD.format("", "", "(ms)", "(ms)", "(ms)", "", "", ""), flush=True)
        derived = lc2_derive(got.rows, np_)
        lc2_print_rows(np_, got, derived)
        entry = {"np": np_, "seconds": round(seconds, 2), "info": got.info,
                 "buckets": got.buckets, "rows": got.rows, "derived": derived,
                 "calls": got.calls, "checks": got.checks}
        wrong = [c for c in got.checks if c["status"] != "ok"]
        if res.timed_out or res.returncode != 0 or wrong or not got.rows:
            why = (f"stopped after {args.timeout:.0f} s" if res.timed_out else
                   f"{len(wrong)} check(s) failed" if wrong else
                   f"exit status {res.returncode}" if res.returncode else "no results")
            print(f"# FAILED: np {np_}: {why}")
            print(f"#   rerun: {launch.shell_line(cmd)}")
            failures.append(f"np {np_}: {why}")
            entry["failed"] = why
        results.append(entry)

    if results:
        lc2_print_findings(results)

    trace = None
    if trace_np > 1 and results and not failures and not skipped:
        trace = lc2_trace(args, common, trace_np, tree, env)
        if trace and trace.get("failed"):
            failures.append(trace["failed"])

    return run.finish("lc2_dp", {"dims": args.dims, "rows": args.rows,
                                 "bucket_bytes": args.bucket_bytes, "steps": args.steps,
                                 "rounds": rounds, "warmup": warmup, "runs": results,
                                 "trace": trace}, skipped, failures)


LC2_CHANGES = [
    ("onebucket", "bucketed", "overlap: buckets from the hook, not one after backward"),
    ("noprogress", "bucketed", "the MPI_Testall progress calls in the hook"),
    ("bucketed", "bucketed_ring", "libnbc's ring instead of its binomial tree"),
    ("onebucket_ring", "bucketed_ring", "overlap, both with the ring"),
]


def lc2_print_findings(results):
    """What each change to the bucketed step saves, per np: the differences the table is about."""
    rows = []
    for slow, fast, what in LC2_CHANGES:
        cells = []
        for e in results:
            r = e["rows"]
            if slow in r and fast in r:
                gain = {st: (r[slow][st] - r[fast][st]) * 1e3 for st in ("best", "median")}
                cells.append(f"{gain['best']:+.1f} ({gain['median']:+.1f})")
            else:
                cells.append("-")
        if any(c != "-" for c in cells):
            rows.append((what, cells))
    if not rows:
        return
    print()
    print("# what each change saves per step, ms: best rounds (medians); negative: it costs")
    print(f"# {'':<56}" + "".join(f"{'np ' + str(e['np']):>15}" for e in results))
    for what, cells in rows:
        print(f"# {what:<56}" + "".join(f"{c:>15}" for c in cells))


# --------------------------------------------------------------- LC=2 trace

def lc2_trace(args, common, np_, tree, base_env):
    """One traced launch (naive, bucketed and noprogress steps) and a summary of it."""
    tag = output_tag(args)
    os.makedirs(os.path.join("build", "trace"), exist_ok=True)
    path = os.path.join("build", "trace", f"lc2_dp{tag}_np{np_}.trace.json")
    prog = common + ["--steps", "3", "--variants", "naive,bucketed,noprogress",
                     "--trace", path]
    cmd = launch.mpirun_command(np_, prog)
    got = Lc2Launch()
    res = launch.run(cmd, timeout=args.timeout, env=base_env, on_line=got.line)
    print()
    if res.timed_out or res.returncode != 0 or not os.path.exists(path):
        print(f"# FAILED: the traced launch (np {np_}): "
              f"{'timed out' if res.timed_out else f'exit status {res.returncode}'}")
        print(f"#   rerun: {launch.shell_line(cmd)}")
        return {"path": path, "failed": f"trace np {np_}"}
    try:
        with open(path) as f:
            events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    except (OSError, ValueError, KeyError) as e:
        print(f"# FAILED: cannot read the trace {path}: {e}")
        return {"path": path, "failed": f"trace np {np_} unreadable"}
    out = {"path": path, "np": np_, "ranks": {}}
    print(f"# trace of np {np_}: {path} (XT_TRACE=1 timeline; open it in https://ui.perfetto.dev)")
    print("#   the last traced step of each kind; times in ms from the step's start. A bucket is "
          "'in flight' from its MPI_Iallreduce until it is known complete; it moves only inside "
          "MPI calls (MPI_Iallreduce, MPI_Testall, MPI_Wait)")
    for rank in range(np_):
        mine = [e for e in events if e["pid"] == rank]
        s = lc2_trace_rank(mine)
        if s is None:
            print(f"#   rank {rank}: no complete bucketed step in the trace")
            continue
        out["ranks"][rank] = s
        if rank < 2:
            lc2_print_trace_rank(rank, s)
    return out


def last_step(events, kind):
    steps = [e for e in events if e["name"].startswith(kind + " step ")]
    if not steps:
        return None, []
    s = max(steps, key=lambda e: e["ts"])
    t0, t1 = s["ts"], s["ts"] + s["dur"]
    inside = sorted((e for e in events if e is not s and t0 <= e["ts"] <= t1),
                    key=lambda e: (e["ts"], -e["dur"]))
    return s, inside


def lc2_trace_rank(events):
    """Per bucket of the last bucketed step: started, finished, in flight beside compute."""
    step, inside = last_step(events, "bucketed")
    if step is None:
        return None
    t0 = step["ts"]

    def rel(t):
        return (t - t0) / 1e3

    layers = [(int(e["name"].rsplit(" ", 1)[1]), e["ts"], e["ts"] + e["dur"])
              for e in inside if e["name"].startswith("backward layer ")]
    fwd = [e for e in inside if e["name"] == "forward"]
    starts = [e for e in inside if e["name"] == "MPI_Iallreduce"]
    if not layers or not starts:
        return None
    b0, b1 = min(l[1] for l in layers), max(l[2] for l in layers)
    waits = {int(e["name"].rsplit(" ", 1)[1]): e for e in inside
             if e["name"].startswith("wait bucket ")}
    marks = [(int(e["name"].split()[1]), e["ts"]) for e in inside if e["name"].startswith("done ")]
    tests = [e for e in inside if e["name"] == "MPI_Testall"]
    wait_from = min((w["ts"] for w in waits.values()), default=b1)
    wait_to = max((w["ts"] + w["dur"] for w in waits.values()), default=b1)
    buckets = []
    for i, st in enumerate(starts):
        after = [l for l in layers if l[2] <= st["ts"]]
        layer = min(after, key=lambda l: l[0])[0] if after else None
        known = [t for n, t in marks if n > i]
        w = waits.get(i)
        if known:
            done, how = min(known), "Testall"
        elif w and w["dur"] > 20:  # over 20 us in its MPI_Wait: it finished there
            done, how = w["ts"] + w["dur"], "Wait"
        elif w and w["ts"] - wait_from > 20:  # done when its wait began, after others' waits
            done, how = w["ts"], "by"
        else:  # complete before the waits began: sometime during backward's MPI calls
            done, how = wait_from, "before"
        beside = sum(max(0, min(done, l[2]) - max(st["ts"], l[1])) for l in layers)
        buckets.append({"index": i, "bytes": st.get("args", {}).get("bytes", 0),
                        "start": rel(st["ts"]), "start_ms_in_call": st["dur"] / 1e3,
                        "after_layer": layer, "done": rel(done), "done_how": how,
                        "in_flight_beside_compute": beside / 1e3})
    s = {"step": step["dur"] / 1e3, "step_name": step["name"],
         "forward": [rel(fwd[0]["ts"]), rel(fwd[0]["ts"] + fwd[0]["dur"])] if fwd else None,
         "backward": [rel(b0), rel(b1)], "layers": len(layers),
         "testall_in_backward": [len(tests), sum(e["dur"] for e in tests) / 1e3],
         "iallreduce_calls": [len(starts), sum(e["dur"] for e in starts) / 1e3],
         "waits": [rel(wait_from), rel(wait_to)], "buckets": buckets}
    # naive: what follows its backward; noprogress: how long its waits take.
    nstep, ninside = last_step(events, "naive")
    if nstep is not None:
        nl = [e for e in ninside if e["name"].startswith("backward layer ")]
        ar = [e for e in ninside if e["name"] == "MPI_Allreduce"]
        if nl and ar:
            nb1 = max(e["ts"] + e["dur"] for e in nl)
            s["naive"] = {"step": nstep["dur"] / 1e3, "backward_end": (nb1 - nstep["ts"]) / 1e3,
                          "allreduce_calls": len(ar),
                          "allreduce_ms": sum(e["dur"] for e in ar) / 1e3}
    pstep, pinside = last_step(events, "noprogress")
    if pstep is not None:
        pl = [e for e in pinside if e["name"].startswith("backward layer ")]
        pw = [e for e in pinside if e["name"].startswith("wait bucket ")]
        if pl and pw:
            s["noprogress"] = {
                "step": pstep["dur"] / 1e3,
                "backward_end": (max(e["ts"] + e["dur"] for e in pl) - pstep["ts"]) / 1e3,
                "wait_ms": sum(e["dur"] for e in pw) / 1e3,
                "buckets_finished_in_wait": sum(1 for e in pw if e["dur"] > 20)}
    return s


def lc2_print_trace_rank(rank, s):
    b0, b1 = s["backward"]
    fwd = f"forward {s['forward'][0]:.1f}-{s['forward'][1]:.1f}, " if s["forward"] else ""
    nt, tt = s["testall_in_backward"]
    ni, ti = s["iallreduce_calls"]
    print(f"#   rank {rank}, {s['step_name']} ({s['step']:.1f} ms): {fwd}backward "
          f"{b0:.1f}-{b1:.1f} ({s['layers']} layers); inside backward's hooks {ni} "
          f"MPI_Iallreduce {ti:.1f} ms and {nt} MPI_Testall {tt:.1f} ms; waits for the buckets "
          f"{s['waits'][0]:.1f}-{s['waits'][1]:.1f}")
    print(f"#     {'bucket':>6} {'MiB':>5} {'started':>8}  {'after':<8}  {'known complete':<38}"
          f"  in flight beside backward compute")
    for b in s["buckets"]:
        layer = f"layer {b['after_layer']}" if b["after_layer"] is not None else "-"
        if b["done_how"] in ("before", "by"):
            done = (f"by {b['done']:.1f}, before the waits" if b["done_how"] == "before" else
                    f"by {b['done']:.1f}, when its wait began")
            beside = f"at most {b['in_flight_beside_compute']:.1f} ms"
        else:
            how = "in its MPI_Wait" if b["done_how"] == "Wait" else "in an MPI_Testall"
            after = b["done"] - b1
            done = f"{b['done']:.1f} {how}" + (f", {after:.1f} after bwd" if after > 0 else "")
            beside = f"{b['in_flight_beside_compute']:.1f} ms"
        print(f"#     {b['index']:>6} {b['bytes'] / (1 << 20):>5.1f} {b['start']:>8.1f}  "
              f"{layer:<8}  {done:<38}  {beside}")
    if "naive" in s:
        n = s["naive"]
        waited = s["waits"][1] - s["waits"][0]
        print(f"#     time in MPI per step: bucketed {ti + tt:.1f} ms inside backward's hooks + "
              f"{waited:.1f} ms waiting after it = {ti + tt + waited:.1f} ms; naive ("
              f"{n['step']:.1f} ms step) {n['allreduce_ms']:.1f} ms in {n['allreduce_calls']} "
              f"MPI_Allreduce calls after its backward")
    if "noprogress" in s:
        p = s["noprogress"]
        print(f"#     noprogress ({p['step']:.1f} ms): {p['buckets_finished_in_wait']} of "
              f"{len(s['buckets'])} buckets finish only in the waits after backward, "
              f"{p['wait_ms']:.1f} ms")


# ------------------------------------------------------------------ lecture 3

# (number, name in the driver's lines, exercise file)
LC3_STAGES = [(0, "dp_adam", "distributed_adam"), (1, "zero1", "adam_zero1"),
              (2, "zero2", "adam_zero2"), (3, "zero3", "adam_zero3")]
LC3_KINDS = ("params", "grads", "optimizer")
# Lecture 3's formulas, per rank (grader/lectures/lc3_stages.py): the bytes of each kind's peak.
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
    """Collects one np's lines from common/bench/lc3_zero.c."""

    def __init__(self):
        super().__init__(None)
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


def main_lc3(args):
    args.dims = args.dims or LC3_DIMS
    args.rows = args.rows if args.rows is not None else 4
    args.steps = args.steps if args.steps is not None else 3
    tree = ("lc3_zero" if args.student else
            os.path.normpath(os.path.join(args.tree or "solutions", "lc3_zero")))
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

if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
