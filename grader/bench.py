#!/usr/bin/env python3
"""make bench LC=N|all [NP=4] [SOL=0] [ARGS="..."]

Runs a lecture's benchmark: grader/lectures/<lecture>/bench.py (what it
measures, its options, its tables), linked with its driver bench.c and the
exercises' own code. Every lecture that has one is found by looking; `make
bench` with no LC runs the first, LC=all runs them all, one after the other.
The lecture's docs page explains its tables.

Exit status: 0 when every check passed, 1 when a result was wrong or a run
failed, 2 for a usage error. An exercise file that is missing or still a TODO
is skipped and says so.
"""

import argparse
import importlib
import os
import shlex
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import needs  # noqa: E402

needs.numpy()  # the lecture packages hold NumPy test tables

import launch  # noqa: E402
import lectures  # noqa: E402


def benched():
    """The lectures with a benchmark, in order."""
    return [lec for lec in lectures.names()
            if os.path.exists(os.path.join(HERE, "lectures", lec, "bench.py"))]


def bench_module(lecture):
    return importlib.import_module(f"lectures.{lecture}.bench")


def options(argv):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lc", default=None,
                    help="lecture: N, lcN or lcN_name, or all (default: the first lecture "
                         "with a bench)")
    ap.add_argument("--np", type=int, default=None,
                    help="ranks (default: the lecture's, see its group below)")
    ap.add_argument("--student", action="store_true",
                    help="bench the student tree (lcN_x/), not solutions/")
    ap.add_argument("--args", default="", help="more of these options, as one string (make ARGS=)")
    ap.add_argument("--rounds", type=int, default=None,
                    help="timed calls or steps run in this many rounds (default: the lecture's)")
    ap.add_argument("--warmup", type=int, default=-1,
                    help="warm-up calls or steps (default: the lecture's)")
    ap.add_argument("--out", default=os.path.join("build", "bench"), help="where files go")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per launch")
    ap.add_argument("--per-node", type=int, default=0,
                    help="ranks a node, for what runs on nodes (LC=1's hierarchical_allreduce: "
                         "default the launch's; LC=7's dispatch across nodes: default np/2)")
    ap.add_argument("--tree", help="bench the exercise files under TREE/<lecture> (a mutant's "
                                   "copy, say) instead of solutions/")
    g = ap.add_argument_group("training benches")
    g.add_argument("--dims", default=None,
                   help="the MLP's widths, input first (default: the lecture's model)")
    g.add_argument("--rows", type=int, default=None, help="samples per rank and step")
    g.add_argument("--steps", type=int, default=None,
                   help="timed steps per round and variant or stage (default 3)")
    for lec in benched():
        mod = bench_module(lec)
        if hasattr(mod, "add_options"):
            mod.add_options(ap.add_argument_group(
                f"LC={lectures.number(lec)} ({lec}): {getattr(mod, 'ABOUT', '')}"))
    args = ap.parse_args(argv)
    if args.args:
        args = ap.parse_args(argv + shlex.split(args.args))
    return args


def main(argv):
    os.chdir(os.path.dirname(HERE))
    args = options(argv)
    have = benched()
    if args.lc is None:
        chosen = have[:1]
    elif str(args.lc).lower() == "all":
        chosen = have
    else:
        lec = lectures.resolve(args.lc)
        chosen = [lec] if lec in have else []
        if not chosen:
            print(f"bench: lecture {args.lc} has no benchmarks; these do: "
                  + ", ".join(f"LC={lectures.number(x)}" for x in have), file=sys.stderr)
            return 2
    launch.install_signal_handlers()
    status = 0
    for i, lec in enumerate(chosen):
        if i:
            print()
        status = max(status, bench_module(lec).run(argparse.Namespace(**vars(args))))
    return status


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:
        sys.exit(130)
