"""What the lectures' benchmarks share (grader/lectures/<lecture>/bench.py).

A lecture's bench module gives:
  ABOUT                 one line for `make bench`'s help
  add_options(group)    its own options (optional)
  run(args)             the bench; returns the exit status
  selftest(suite)       make test's checks of it, a must-fail mutant among them

(What the Makefile links into build/bench/<tree>/bench with the lecture's driver,
grader/lectures/<lecture>/bench.c, is the lecture's bench.mk, which the Makefile
includes as it is: make must read it before Python is installed. bench_link reads it.)
"""

import argparse
import json
import math
import os
import re
import subprocess
import sys
import time

import launch


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


def bench_link(lecture):
    """grader/lectures/<lecture>/bench.mk as the Makefile reads it: {"sources",
    "functions", "renames": [words], "direct": bool}. Only the `NAME := words` lines
    (continued with a backslash) that bench.mk may hold."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lectures", lecture,
                        "bench.mk")
    with open(path) as f:
        text = re.sub(r"\\\n", " ", f.read())
    values = {}
    for _, line in launch.config_lines(text):
        m = re.fullmatch(r"(BENCH_[A-Z]+)\s*:=\s*(.*)", line)
        if not m:
            raise ValueError(f"{path}: not a `BENCH_NAME := words` line: {line!r}")
        values[m.group(1)] = m.group(2).split()
    return {"sources": values.get("BENCH_SOURCES", []),
            "functions": values.get("BENCH_FUNCTIONS", []),
            "renames": values.get("BENCH_RENAMES", []),
            "direct": values.get("BENCH_DIRECT", []) == ["1"]}


def tree_of(args, lecture):
    """The exercise files a bench measures: the student tree, a --tree copy or solutions/."""
    if args.student:
        return lecture
    return os.path.normpath(os.path.join(args.tree or "solutions", lecture))


def build_bench(tree):
    """make the bench of a tree (build/bench/<tree>/bench); None, with a message, on failure."""
    binary = os.path.join("build", "bench", tree, "bench")
    build = subprocess.run(["make", "-s", "--no-print-directory", binary])
    if build.returncode != 0:
        print(f"bench: building {binary} failed", file=sys.stderr)
        return None
    return binary


def build_program(tree, name):
    """An exercise program of tree (lcN_x, solutions/lcN_x, a mutant's copy) built as the
    grader builds it: (binary, None), or (None, why not)."""
    binary = os.path.join("build", tree, name)
    if not os.path.exists(os.path.join(tree, name + ".c")):
        return None, f"{tree}/{name}.c is not in this tree"
    res = launch.run(["make", "-s", "--no-print-directory", binary], timeout=600)
    if res.returncode != 0:
        return None, f"building {binary} failed"
    return binary, None


def patched_solution(lecture, patches):
    """(its file name, text): a solution file with the mutants `patches` applied in order
    (all of them to that one file)."""
    import mutants
    target = text = None
    for name in patches:
        m = mutants.parse(os.path.join("grader", "mutants", lecture, name + ".patch"))
        if text is None:
            target = m.target
            with open(target) as f:
                text = f.read()
        text = mutants.apply(text, m.hunks)
    return os.path.basename(target), text


def patched_tree(tree, lecture, patches):
    """tree/<file>: the solution file with the mutants applied (patched_solution), written
    only when its text changes, so that make keeps its build. Returns tree."""
    name, text = patched_solution(lecture, patches)
    os.makedirs(tree, exist_ok=True)
    path = os.path.join(tree, name)
    old = open(path).read() if os.path.exists(path) else None
    if old != text:
        with open(path, "w") as f:
            f.write(text)
    return tree


def solutions_with_mutants(tree, lecture, patches):
    """tree/<lecture>/: a copy of solutions/<lecture>/ with each mutant applied to its own
    file (a bench's selftest grades it and must see the mutant rejected). Returns tree."""
    import shutil
    lec = os.path.join(tree, lecture)
    shutil.copytree(os.path.join("solutions", lecture), lec)
    for patch in patches:
        name, text = patched_solution(lecture, [patch])
        with open(os.path.join(lec, name), "w") as f:
            f.write(text)
    return tree


def slashed(values, fmt="{}"):
    """Per-rank values in one column: 1/2/3."""
    return "/".join(fmt.format(v) for v in values)


def ms(seconds):
    return f"{seconds * 1e3:.1f}"


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



class Launch:
    """Collects a bench program's lines as they come: SKIP and INFO lines, and the
    program's own messages (a TODO once, Open MPI's boxed abort texts not at all).
    A lecture's collector subclasses it and handles its own kinds of line first."""

    def __init__(self):
        self.info = {}
        self.skip, self.todo, self.messages = None, [], []
        self.in_banner = False

    def line(self, text):
        parts = text.split(None, 2)
        kind = parts[0] if parts else ""
        if kind == "INFO" and len(parts) >= 3:
            self.info[parts[1]] = parts[2]
        elif kind == "SKIP":
            self.skip = text[5:]
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


# -------------------------------------------------------------------- plot

COLORS = {"hand": "#1f5fbf", "lib": "#d9661f", "ceiling": "#333333"}


def nice_ticks(v):
    """(top, step): a round step (1, 2, 2.5 or 5 times a power of ten), at most 5 to the top."""
    if v <= 0:
        return 1.0, 0.25
    raw = v / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    return step * math.ceil(v / step - 1e-9), step


def svg_plot(path, title, panels, lo, hi, ceilings=None):
    """busbw against log2(size): one panel per collective (name, library, rows), hand-written
    and library. ceilings: a busbw (GB/s) or None per panel, drawn as a labelled dashed line
    (the y axis reaches it)."""
    ceilings = list(ceilings or []) + [None] * (len(panels) - len(ceilings or []))
    cols = 3
    rows_n = max(1, math.ceil(len(panels) / cols))
    pw, ph, ml, mr, mt, mb = 360, 250, 52, 14, 30, 42
    width, height = cols * pw, rows_n * ph + 56
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">{esc(title)}</text>']
    legend = [("hand", "hand-written"), ("lib", "MPI library")]
    if any(ceilings):
        legend.append(("ceiling", "ceiling (this machine)"))
    lx = width / 2 - 85 * len(legend) + 20
    for i, (side, label) in enumerate(legend):
        x = lx + i * 170
        dash = {"lib": ' stroke-dasharray="6,3"',
                "ceiling": ' stroke-dasharray="2,3"'}.get(side, "")
        out.append(f'<line x1="{x}" y1="38" x2="{x + 28}" y2="38" stroke="{COLORS[side]}" '
                   f'stroke-width="2"{dash}/>')
        out.append(f'<text x="{x + 34}" y="42">{label}</text>')
    lg_lo, lg_hi = math.log2(lo), math.log2(hi)
    for k, (name, library, rows) in enumerate(panels):
        ox, oy = (k % cols) * pw, 56 + (k // cols) * ph
        x0, x1, y0, y1 = ox + ml, ox + pw - mr, oy + mt, oy + ph - mb
        ceiling = ceilings[k]
        top, step = nice_ticks(max([r[f"busbw_{s}"] for r in rows for s in ("hand", "lib")]
                                   # room above the ceiling for its line and label
                                   + ([ceiling * 1.08] if ceiling else []) or [0]))

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
        if ceiling:
            y = py(ceiling)
            # The label sits above the line, or below it where the line is the frame's top.
            ty = y - 4 if y - y0 > 14 else y + 12
            out.append(f'<line x1="{x0}" y1="{y:.1f}" x2="{x1}" y2="{y:.1f}" '
                       f'stroke="{COLORS["ceiling"]}" stroke-width="1.5" stroke-dasharray="2,3"/>')
            out.append(f'<text x="{x0 + 4}" y="{ty:.1f}" fill="{COLORS["ceiling"]}">ceiling '
                       f'{ceiling:.2f} GB/s</text>')
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

