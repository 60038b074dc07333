#!/usr/bin/env python3
"""make bench-grade [LC=N] [ROUNDS=3] [VS=DIR] [EX=substring]

The grader's own bench: where the seconds of `make grade LC=N SOL=1` go, per
lecture. Each round grades every lecture's solutions once, at one seed, the
programs already built (so make only finds nothing to do); a table gives, per
lecture, the medians over the rounds of the report's time and of its parts,
as grade.py's JSON profile keeps them (grader/clock.py):

    launch       mpirun launches, start to end (their number beside it)
    cases        inside them: the cases themselves, each its slowest rank
    start/stop   launch - cases: starting and ending the ranks and MPI
    make, nm     the build check and the symbol scans
    inputs       the inputs the grader draws and writes
    references   the NumPy references
    cleanup      removing the previous grade's case files
    grader       the rest: reading records, comparing, reports

VS=DIR grades another checkout (an older main, built) in the same rounds,
alternating with this one (A B A B), and adds its report times and the ratio.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import lectures  # noqa: E402

COLUMNS = ["launch", "cases", "start/stop", "make", "nm", "inputs", "references", "cleanup",
           "grader"]


def grade_once(tree, lecture, seed, ex=None):
    """One grade of a lecture's solutions in checkout `tree`: its JSON (report seconds,
    profile), or None when it did not run."""
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "grade.json")
        cmd = [sys.executable, os.path.join(tree, "grader", "grade.py"), "--lc",
               str(lectures.number(lecture)), "--sol", "--seed", str(seed), "--json", out]
        cmd += ["--ex", ex] if ex else []
        subprocess.run(cmd, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            with open(out) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None


def parts(result):
    """{column: seconds} and the number of launches of one grade's JSON."""
    prof = result.get("profile", {})
    sec = {k: v["seconds"] for k, v in prof.items()}
    row = {k: sec.get(k, 0.0) for k in COLUMNS if k != "start/stop"}
    row["start/stop"] = max(0.0, sec.get("launch", 0.0) - sec.get("cases", 0.0))
    return row, prof.get("launch", {}).get("count", 0)


def median(values):
    return statistics.median(values) if values else float("nan")


def run(args):
    chosen = [lectures.resolve(n) for n in args.lc] if args.lc else lectures.names()
    if None in chosen:
        raise KeyError(f"no lecture {args.lc[chosen.index(None)]} (make lectures lists them)")
    trees = [ROOT] + ([os.path.abspath(args.vs)] if args.vs else [])
    for t in trees:  # built first, so that no round pays for a build
        subprocess.run(["make", "-s", "--no-print-directory", "-j2"], cwd=t,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got = {(t, lec): [] for t in trees for lec in chosen}
    for _ in range(args.rounds):
        for lec in chosen:
            for t in trees:  # A B A B: the same machine state for both
                res = grade_once(t, lec, args.seed, args.ex)
                if res is not None:
                    got[(t, lec)].append(res)
    return chosen, trees, got


def table(chosen, trees, got, rounds, seed):
    lines = [f"make grade LC=N SOL=1, seed {seed}: medians of {rounds} round(s), seconds"
             + (f"; vs {trees[1]}" if len(trees) > 1 else "")]
    head = f"{'lecture':12} {'report':>7} {'launches':>8} " + " ".join(
        f"{c:>10}" for c in COLUMNS)
    if len(trees) > 1:
        head += f" {'vs report':>9} {'faster':>6}"
    lines.append(head)
    totals = {"report": 0.0, "launches": 0, "vs": 0.0}
    totals.update({c: 0.0 for c in COLUMNS})
    for lec in chosen:
        mine = got[(trees[0], lec)]
        if not mine:
            lines.append(f"{lec:12} (did not run)")
            continue
        rows = [parts(r) for r in mine]
        report = median([r["seconds"] for r in mine])
        launches = rows[0][1]
        cols = {c: median([row[c] for row, _ in rows]) for c in COLUMNS}
        line = f"{lec:12} {report:7.1f} {launches:8d} " + " ".join(
            f"{cols[c]:10.1f}" for c in COLUMNS)
        totals["report"] += report
        totals["launches"] += launches
        for c in COLUMNS:
            totals[c] += cols[c]
        if len(trees) > 1:
            other = [r["seconds"] for r in got[(trees[1], lec)]]
            vs = median(other)
            totals["vs"] += vs if other else 0.0
            line += f" {vs:9.1f} {vs / report if report else 0:6.2f}"
        lines.append(line)
    line = f"{'total':12} {totals['report']:7.1f} {totals['launches']:8d} " + " ".join(
        f"{totals[c]:10.1f}" for c in COLUMNS)
    if len(trees) > 1:
        line += f" {totals['vs']:9.1f} {totals['vs'] / max(totals['report'], 1e-9):6.2f}"
    lines.append(line)
    return lines


def problems(result, launch_dirs):
    """What disagrees between one grade's profile and its work directory: [] when its count
    of launches is the number of launch directories the grade left, and its parts fit in
    its report time."""
    row, launches = parts(result)
    out = []
    if launches != launch_dirs:
        out.append(f"the profile counts {launches} launches, the work directory holds "
                   f"{launch_dirs}")
    inside = sum(v for k, v in row.items() if k not in ("cases", "start/stop", "grader"))
    if inside > result["seconds"] + 0.05:
        out.append(f"the timed parts add up to {inside:.2f} s, more than the report's "
                   f"{result['seconds']:.2f} s")
    if row["cases"] > row["launch"] + 0.05:
        out.append(f"{row['cases']:.2f} s in cases, more than the launches' {row['launch']:.2f} s")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lc", action="append", help="a lecture (number or name); repeatable")
    ap.add_argument("--ex", help="only the exercises whose name contains this")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--vs", help="another checkout, built, graded in the same rounds")
    args = ap.parse_args(argv)
    try:
        chosen, trees, got = run(args)
    except KeyError as e:
        print(f"bench-grade: {e.args[0]}", file=sys.stderr)
        return 2
    for ln in table(chosen, trees, got, args.rounds, args.seed):
        print(ln)
    return 0 if all(got[(trees[0], lec)] for lec in chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
