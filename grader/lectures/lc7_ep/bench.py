"""make bench LC=7 [NP=n] [SOL=0] [ARGS="..."]: lecture 7's MoE layer with expert
parallelism at np 1, 2 and 4 (NP=n: that one), its two micro-batches overlapped or not.

Each program runs moe_overlap_forward in case mode, as the grader runs it: one MoE layer of
T tokens per rank (E experts of hidden ff, top-k, dropless), a few rounds, one launch per
program, np and routing:

- overlap: moe_overlap.c, each micro-batch's experts computed while the other's dispatch or
  combine is in flight;
- serial: the same layer with the micro-batches one after the other, each exchange waited
  for before the next step (the mutant ovl_serial of solutions/lc7_ep/moe_overlap.c);

under uniform routing (random tokens, a random router) and skewed routing (ep's skew: the
last rank's experts get no token, expert 0 the most).

From the case records (the lecture's kit logs every expert call, an X line, with the exchanges pending
while it ran):

- step: the case's time, the slowest rank's (best and median of the rounds);
- experts: the busiest rank's expert compute (the sum of its X lines' durations), and
  other: the step less that, the time the busiest rank was not computing experts
  (routing, packing, messages, waiting, the combine's sum, reading the case's inputs);
- under exchange: the share of the expert compute (every rank's X lines' time) that ran
  with an exchange pending: what the program let the transfers hide under;
- bytes per rank: dispatch (the rows each rank sends the others) and combine (the outputs
  it sends back), from the routing histogram of each micro-batch (ep.micro_histogram), and
  the bytes the rank sent, which must be their sum; the grader's rule ovl_traffic checks
  every message against the histogram too (one per peer and exchange, of exactly its rows).

And the dispatch across nodes (--dispatch-programs, at every np of two nodes or more, nodes of
--per-node ranks, np/2 by default): two-hop (hierarchical_dispatch.c, each token across once
per destination node, forwarded inside it) beside gshard (gshard.c, each token to the rank of
each expert) on the same layer and routing: the step's time, and the bytes each rank sends to
other nodes, by each algorithm's definition from the routing; the two-hop program's, counted
from its records (every message's peer and so its node), must be its definition's.

The bytes are exact: the bench fails if one differs. Every rank's y of every round is
checked against NumPy (one dense MoE layer, float64, lecture 7's tolerance), so that a fast
wrong result is not a result. Writes JSON under build/bench/; docs/lc7_ep.md (The bench)
explains the tables.
"""

import argparse
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
from benchlib import (TrainingRun, build_program, ms, patched_tree, slashed,
                      solutions_with_mutants, tree_of)
from testkit import bench_results, fresh, run_bench, tail
from lectures.lc7_ep import ep, hierdispatch, overlap

ABOUT = "the MoE layer's two micro-batches overlapped or serial: step time, expert compute " \
        "under an exchange, dispatch and combine bytes per rank against the histogram; the " \
        "two-hop dispatch's bytes across nodes against GShard's"

# name: what it is
PROGRAMS = {"overlap": "each micro-batch's experts under the other's exchange",
            "serial": "the micro-batches one after the other, every exchange waited for"}
SERIAL_PATCH = "ovl_serial"
# The dispatch across nodes: name: (program, its function, what it is).
DISPATCH = {"two-hop": ("hierarchical_dispatch", "hierarchical_moe_forward",
                        "each token across once per node, forwarded inside it"),
            "gshard": ("gshard", "gshard_forward", "each token to each expert's rank")}
ROUTINGS = ("uniform", "skewed")
NPS = (1, 2, 4)


def add_options(g):
    g.add_argument("--moe-programs", default=",".join(PROGRAMS),
                   help=f"comma-separated, of {', '.join(PROGRAMS)} (default both; none: skip)")
    g.add_argument("--routing", default=",".join(ROUTINGS),
                   help="comma-separated, of uniform, skewed (default both)")
    g.add_argument("--tokens", type=int, default=1024, help="tokens T per rank (default 1024)")
    g.add_argument("--hidden", type=int, default=256, help="hidden size d (default 256)")
    g.add_argument("--ffn", type=int, default=512, help="an expert's hidden ff (default 512)")
    g.add_argument("--experts", type=int, default=8, help="experts E (default 8)")
    g.add_argument("--topk", type=int, default=2, help="experts per token k (default 2)")
    g.add_argument("--dispatch-programs", default=",".join(DISPATCH),
                   help=f"comma-separated, of {', '.join(DISPATCH)} (default both; none: skip)")


def note(text):
    print("\n".join(textwrap.wrap(text, 98, initial_indent="# ", subsequent_indent="#   ")))


def make_case(n, args, routing):
    """A spec.Case of the layer (what ep's inputs and reference read)."""
    params = ep.moe_case(n, args.tokens, args.hidden, args.experts, args.ffn, args.topk,
                         skew=int(routing == "skewed"), dy=0)
    del params["np"]
    params["fn"] = "moe_overlap_forward"
    return spec.Case(test=None, np=n, params=params)


# ------------------------------------------------------------------ measures

def traffic(case, inputs):
    """Per rank: (dispatch bytes, combine bytes) from each micro-batch's histogram: the rows
    it sends the other ranks, and the outputs of the rows they send it, d x 4 bytes each."""
    n, d = case.np, case["d"]
    per_mb = [overlap.rows(ep.micro_histogram(case, inputs, m), n) for m in (0, 1)]
    out = []
    for r in range(n):
        others = [p for p in range(n) if p != r]
        out.append((sum(int(h[r][p]) for h in per_mb for p in others) * d * 4,
                    sum(int(h[p][r]) for h in per_mb for p in others) * d * 4))
    return out


def sent_bytes(rec):
    return sum(e.bytes for e in rec.events if e.dir == "S" and e.comm == "case")


def expert_seconds(rec):
    """(the rank's expert compute, the part of it with an exchange pending)."""
    calls = [c for c in rec.experts if c.op == "F"]
    return (sum(c.end - c.start for c in calls),
            sum(c.end - c.start for c in calls if c.pending))


def check_values(want, n, cdir):
    """'' when every rank's y matches the reference, else the first difference; and the
    worst error as a share of the bound."""
    bound = ep.TOLERANCE.bound([w["y"] for w in want])
    worst = 0.0
    arrays = records.rank_arrays(cdir, 0, n)
    for r in range(n):
        got = arrays[r].get("y")
        msg = compare.compare("y", want[r]["y"], got, bound, r)
        if msg:
            return msg, None
        err = float(np.abs(got.astype(np.float64) - want[r]["y"]).max()) if got.size else 0
        worst = max(worst, err / bound)
    return "", worst


def round_records(want, n, work, k, what):
    """(every rank's record of round k, the worst error of y as a share of its bound, "")
    when each rank wrote one and y matches the reference; else (None, None, what failed)."""
    cdir = os.path.join(work, f"c{k}")
    recs = [records.read_record(records.outputs_path(cdir, 0, r)) for r in range(n)]
    if any(rec is None for rec in recs):
        return None, None, f"{what}: a rank wrote no record"
    wrong, margin = check_values(want, n, cdir)
    if wrong:
        return None, None, f"{what}: {wrong}"
    return recs, margin, ""


# -------------------------------------------------------------------- launch



def launch_rounds(case, inputs, count, args, binary, work, env):
    """One launch of `count` rounds of one case, as the grader runs cases (the work
    directory's cases.txt, every round's inputs linked from one written copy): (command,
    result, the lines it printed)."""
    n = case.np
    shutil.rmtree(work, ignore_errors=True)
    shared = os.path.join(work, "inputs")
    os.makedirs(shared)
    records.write_inputs(shared, 0, ep.program_inputs(inputs))
    params = " ".join(f"{k}={v}" for k, v in case.params.items())
    lines = ["# make bench LC=7: one MoE layer forward per round"]
    for k in range(count):
        cdir = os.path.join(work, f"c{k}")
        os.makedirs(cdir)
        for f in os.listdir(shared):
            try:
                os.link(os.path.join(shared, f), os.path.join(cdir, f))
            except OSError:
                shutil.copy(os.path.join(shared, f), cdir)
        lines.append(f"case {k} np={n} {params} watchdog={args.timeout:.0f}")
    with open(os.path.join(work, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # MPI_Send as a real run has it (buffered while small), not the grader's strict mode.
    cmd = launch.mpirun_command(n, [os.path.abspath(binary), "--cases", os.path.abspath(work),
                                    "--no-strict"])
    out = []
    res = launch.run(cmd, timeout=args.timeout, env=env, on_line=out.append)
    return cmd, res, out


def measure(name, case, inputs, want, rounds, warmup, args, binary, work, env):
    """One launch: warm-up and measured rounds of one case. Returns (row or None, errors,
    skipped message or None)."""
    n = case.np
    cmd, res, out = launch_rounds(case, inputs, warmup + rounds, args, binary, work, env)
    routing = "skewed" if case["skew"] else "uniform"
    what = f"{name} np {n} {routing}"
    todo = [ln for ln in out if " TODO " in ln]
    if todo:
        where = re.search(r"(\S+\.c:\d+)", todo[0])
        return None, [], f"moe_overlap.c is not written yet (TODO at " \
                         f"{where.group(1) if where else '?'})"
    if res.timed_out or res.returncode != 0:
        return None, [f"{what}: the launch {'timed out' if res.timed_out else 'failed'} (exit "
                      f"{res.returncode}); rerun: {launch.shell_line(cmd)}"], None
    per, worst, errors = [], 0.0, []
    bytes_want = traffic(case, inputs)
    for k in range(warmup + rounds):
        recs, margin, failed = round_records(want, n, work, k, what)
        if failed:
            return None, [failed], None
        worst = max(worst, margin)
        broken = overlap.ovl_traffic(case, inputs, recs)
        sent = [sent_bytes(rec) for rec in recs]
        if broken or sent != [a + b for a, b in bytes_want]:
            why = broken[0][1] if broken else f"the ranks sent {sent} bytes"
            return None, [f"{what}: {why}; the histogram gives dispatch + combine "
                          f"{[a + b for a, b in bytes_want]}"], None
        if k < warmup:
            continue
        per.append((max(rec.seconds for rec in recs), [expert_seconds(rec) for rec in recs],
                    sent))
    steps = [p[0] for p in per]
    busiest = [max(c for c, _ in p[1]) for p in per]
    compute = sum(c for p in per for c, _ in p[1])
    under = sum(u for p in per for _, u in p[1])
    row = {"program": name, "np": n, "routing": routing, "best": min(steps),
           "median": statistics.median(steps), "experts": statistics.median(busiest),
           "other": statistics.median(s - b for s, b in zip(steps, busiest)),
           "share": under / compute if compute and n > 1 else None,
           "rank_experts": [statistics.median(p[1][r][0] for p in per) for r in range(n)],
           "dispatch": [a for a, _ in bytes_want], "combine": [b for _, b in bytes_want],
           "bytes": per[0][2], "worst_error": worst, "rounds": len(per)}
    return row, errors, None


_LAYERS = {}


def layer_of(case, args):
    """The inputs (seed 7) and the reference y of the layer at case's np and routing, drawn
    and computed once per run: every program benched on that layer shares them (the
    reference is a dense layer in float64, seconds at the default size)."""
    key = (case.np, case["skew"], args.tokens, args.hidden, args.ffn, args.experts, args.topk)
    if key not in _LAYERS:
        inputs = ep.layer_inputs(case, np.random.default_rng(7))
        _LAYERS[key] = (inputs, overlap.layer_reference(case, inputs))
    return _LAYERS[key]


def dispatch_case(n, args, routing, per_node, fn):
    """A spec.Case of the layer on nodes of per_node ranks, for the program of fn."""
    params = ep.moe_case(n, args.tokens, args.hidden, args.experts, args.ffn, args.topk,
                         skew=int(routing == "skewed"), dy=0, ranks_per_node=per_node)
    del params["np"]
    params["fn"] = fn
    return spec.Case(test=None, np=n, params=params)


def across_nodes(case, inputs):
    """Per rank, the bytes it sends to other nodes by each algorithm's definition (the
    grader counts the two-hop's exactly): (two-hop: a record of d + 2k floats per token and
    other node holding one of its experts, a row of d floats back per record received;
    GShard: a row per choice whose expert is on another node, and back per row its experts
    computed for another node's rank)."""
    d, k, L = case["d"], case["k"], case["ranks_per_node"]
    across, back = hierdispatch.plan(case, inputs)[:2]
    h = ep.histogram(case, inputs)

    def far(s, e):
        return ep.owner(case, e) // L != s // L

    out = []
    for r in range(case.np):
        rows = sum(int(h[r][e]) for e in range(case["E"]) if far(r, e))
        rows += sum(int(h[s][e]) for s in range(case.np) for e in ep.local_experts(case, r)
                    if s // L != r // L)
        out.append((across[r] * (d + 2 * k) * 4 + back[r] * d * 4, rows * d * 4))
    return out


NODES_FROM = {0: "virtual: one machine, so no byte leaves it",
              1: "from the launch (the ranks that share memory)",
              2: "virtual: the launch placed a node's ranks apart (use --map-by slot)",
              -1: "given (--per-node)"}


def measure_dispatch(name, case, inputs, want, rounds, warmup, args, binary, work, env):
    """One launch of a dispatch program: (row or None, errors, skipped message or None). A
    two-hop case of ranks_per_node 0 takes its nodes from the launch (its driver says which,
    an output "nodes"); the two-hop program's bytes to other nodes, from its records, must be
    its definition's for those nodes."""
    n = case.np
    cmd, res, out = launch_rounds(case, inputs, warmup + rounds, args, binary, work, env)
    routing = "skewed" if case["skew"] else "uniform"
    what = f"{name} np {n} {routing}"
    source = DISPATCH[name][0]
    todo = [ln for ln in out if " TODO " in ln]
    if todo:
        return None, [], f"{source}.c is not written yet"
    if res.timed_out or res.returncode != 0:
        return None, [f"{what}: the launch {'timed out' if res.timed_out else 'failed'} (exit "
                      f"{res.returncode}); rerun: {launch.shell_line(cmd)}"], None
    how = -1
    if case["ranks_per_node"] == 0:
        nodes = records.rank_arrays(os.path.join(work, "c0"), 0, n)[0].get("nodes")
        if nodes is None:
            return None, [f"{what}: no nodes written by rank 0"], None
        case.params["ranks_per_node"], how = int(nodes[0]), int(nodes[1])
    L = case["ranks_per_node"]
    defined = [a if name == "two-hop" else g for a, g in across_nodes(case, inputs)]
    steps = []
    for k in range(warmup + rounds):
        recs, _, failed = round_records(want, n, work, k, what)
        if failed:
            return None, [failed], None
        if name == "two-hop":
            sent = [sum(e.bytes for e in rec.sends() if e.case_peer >= 0 and
                        e.case_peer // L != r // L) for r, rec in enumerate(recs)]
            if sent != defined:
                return None, [f"{what}: the ranks sent {sent} bytes to other nodes; the "
                              f"two-hop dispatch's definition gives {defined}"], None
        if k >= warmup:
            steps.append(max(rec.seconds for rec in recs))
    return {"program": name, "np": n, "per_node": L, "nodes_from": NODES_FROM[how],
            "routing": routing, "best": min(steps), "median": statistics.median(steps),
            "across": defined}, [], None


def print_dispatch(rows, cores):
    if not rows:
        return
    print("\nthe dispatch across nodes: two-hop (hierarchical_dispatch.c) beside GShard's "
          "(gshard.c), the same\nlayer and routing on nodes of L ranks (whence: the lines "
          "below; on one machine no byte leaves\nit and the times are those of its memory); "
          "across: bytes a rank sends to other nodes, forward:")
    for n in sorted({r["np"] for r in rows}):
        two = next((r for r in rows if r["np"] == n and r["program"] == "two-hop"), None)
        if two:
            print(f"# np {n}: nodes of {two['per_node']} rank{'s' if two['per_node'] != 1 else ''}, "
                  f"{two['nodes_from']}")
    fmt = "{:<8} {:<8} {:>4} {:>3} {:>9} {:>9} {:>14} {:>14}"
    print(fmt.format("program", "routing", "np", "L", "best ms", "median", "across max",
                     "across all"))
    for r in sorted(rows, key=lambda r: (ROUTINGS.index(r["routing"]), r["np"],
                                         list(DISPATCH).index(r["program"]))):
        print(fmt.format(r["program"], r["routing"], f"{r['np']}{'*' if r['np'] > cores else ''}",
                         r["per_node"], ms(r["best"]), ms(r["median"]), max(r["across"]),
                         sum(r["across"])))


# --------------------------------------------------------------------- tables



def print_tables(rows, cores):
    if not rows:
        return

    def over(n):
        return "*" if n > cores else ""

    order = sorted(rows, key=lambda r: (ROUTINGS.index(r["routing"]), r["np"],
                                        list(PROGRAMS).index(r["program"])))
    print("\nthe layer's forward, micro-batches overlapped (overlap) or one after the other "
          "(serial):")
    fmt = "{:<8} {:<8} {:>4} {:>9} {:>9} {:>9} {:>9} {:>15}"
    print(fmt.format("program", "routing", "np", "best ms", "median", "experts", "other",
                     "under exchange"))
    for r in order:
        share = "-" if r["share"] is None else f"{100 * r['share']:.0f}%"
        print(fmt.format(r["program"], r["routing"], f"{r['np']}{over(r['np'])}", ms(r["best"]),
                         ms(r["median"]), ms(r["experts"]), ms(r["other"]), share))
    print("\nbytes per rank: dispatch (its rows to the other ranks) and combine (the outputs "
          "it sends\nback), from the routing histogram of each micro-batch, and what the rank "
          "sent (= their sum):")
    fmt = "{:<8} {:>4} {:>5} {:>12} {:>12} {:>12}"
    print(fmt.format("routing", "np", "rank", "dispatch", "combine", "sent"))
    seen = set()
    for r in order:
        if (r["routing"], r["np"]) in seen:
            continue
        seen.add((r["routing"], r["np"]))
        for rank in range(r["np"]):
            print(fmt.format(r["routing"], f"{r['np']}{over(r['np'])}", rank,
                             r["dispatch"][rank], r["combine"][rank], r["bytes"][rank]))
    print("\nexpert compute per rank (ms, rank 0 first): the skew's imbalance")
    fmt = "{:<8} {:<8} {:>4}  {}"
    for r in order:
        print(fmt.format(r["program"], r["routing"], f"{r['np']}{over(r['np'])}",
                         slashed([v * 1e3 for v in r["rank_experts"]], "{:.1f}")))


def keep(outcome, name, binaries, rows, skipped, failures):
    """One measurement's (row, errors, skipped) into the run's lists: a program that is not
    there (or not written) skipped for the rest of the run, errors printed and counted, the
    row kept and its time printed. Returns the row (or None)."""
    row, errors, why = outcome
    if why:
        skipped.append(why)
        binaries[name] = None
        return None
    failures += errors
    for e in errors:
        print(f"ERROR: {e}")
    if row:
        rows.append(row)
        print(f"# {name} np {row['np']} {row['routing']}: {ms(row['best'])} ms", flush=True)
    return row


def run_dispatch(names, nps, routings, rounds, warmup, args, tree, env, skipped, failures):
    """The dispatch programs at every np of two nodes or more: their rows."""
    rows, binaries = [], {}
    for name in names:
        binaries[name], why = build_program(tree, DISPATCH[name][0])
        if why:
            skipped.append(why)
    for n in nps:
        if n < 2 or args.experts % n or (args.per_node and (n % args.per_node or
                                                            n // args.per_node < 2)):
            continue
        for routing in routings:
            L = args.per_node  # 0: the two-hop program takes the launch's nodes
            for name in names:
                if binaries[name] is None:
                    continue
                if name != "two-hop" and not L:
                    L = n // 2 if n % 2 == 0 else 1
                case = dispatch_case(n, args, routing, L, DISPATCH[name][1])
                inputs, want = layer_of(case, args)
                work = os.path.join(args.out, "lc7_work", f"{name}_np{n}_{routing}")
                row = keep(measure_dispatch(name, case, inputs, want, rounds, warmup, args,
                                            binaries[name], work, env),
                           name, binaries, rows, skipped, failures)
                if row:
                    L = row["per_node"]  # GShard's bytes across the same nodes
    return rows


def run(args):
    names = [x.strip() for x in args.moe_programs.split(",") if x.strip() and x.strip() != "none"]
    dispatch = [x.strip() for x in args.dispatch_programs.split(",")
                if x.strip() and x.strip() != "none"]
    routings = [x.strip() for x in args.routing.split(",") if x.strip()]
    if (not names + dispatch or set(names) - set(PROGRAMS) or not routings or set(routings) - set(ROUTINGS)
            or min(args.tokens, args.hidden, args.ffn, args.experts, args.topk) < 1
            or args.topk > args.experts or set(dispatch) - set(DISPATCH) or args.per_node < 0):
        print(f"bench: --moe-programs of {', '.join(PROGRAMS)}; --dispatch-programs of "
              f"{', '.join(DISPATCH)} or none; --routing of "
              f"{', '.join(ROUTINGS)}; --tokens, --hidden, --ffn, --experts, --topk positive, "
              f"topk at most experts", file=sys.stderr)
        return 2
    tree = tree_of(args, "lc7_ep")
    nps = [args.np] if args.np else list(NPS)
    rounds = args.rounds if args.rounds is not None else 3
    warmup = args.warmup if args.warmup >= 0 else 1
    trun = TrainingRun(7, args, "the MoE layer: micro-batches overlapped or serial; the dispatch "
                          "across nodes", tree, nps)
    note(f"one MoE layer forward: T = {args.tokens} tokens per rank (in two micro-batches for "
         f"overlap and serial), d = "
         f"{args.hidden}, E = {args.experts} experts of ff = {args.ffn}, k = {args.topk} "
         f"(float32, dropless); per program, np and routing one launch: {warmup} warm-up and "
         f"{rounds} measured rounds, as the grader runs a case; every round's y checked "
         f"against NumPy (float64)")
    note("step: ms per case, the slowest rank's, best and median of the rounds; experts: the "
         "busiest rank's expert compute (the kit's log), median; other: step - experts, the "
         "time the busiest rank was not computing experts; under exchange: the share of "
         "every rank's expert compute that ran with an exchange pending")
    if dispatch:
        note(f"the dispatch across nodes ({', '.join(dispatch)}): at every np of two nodes or "
             f"more, nodes of --per-node ranks (default np/2)")
    if max(nps) > trun.cores:
        note(f"* np > {trun.cores} cores: ranks are oversubscribed, a rank waits for a core as "
             f"well as for messages; its times are not those of np cores. The bytes and the "
             f"shares are exact at every np")
    env = launch.mpi_env()
    env.pop("XT_TRACE", None)
    out = args.out
    binaries, skipped, results, failures = {}, [], [], []
    for name in names:
        src = serial_tree(out) if name == "serial" else tree
        binaries[name], why = build_program(src, "moe_overlap")
        if why:
            skipped.append(why)
    if "serial" in names:
        note(f"serial: solutions/lc7_ep/moe_overlap.c with the mutant {SERIAL_PATCH} applied "
             f"({serial_tree(out)}/)")
    for n in nps:
        if args.experts % n:
            skipped.append(f"np {n}: E={args.experts} experts cannot be split over {n} ranks")
            continue
        for routing in routings:
            case = make_case(n, args, routing)
            inputs, want = layer_of(case, args)
            for name in names:
                if binaries[name] is None:
                    continue
                work = os.path.join(out, "lc7_work", f"{name}_np{n}_{routing}")
                keep(measure(name, case, inputs, want, rounds, warmup, args, binaries[name],
                             work, env), name, binaries, results, skipped, failures)
    dispatch_rows = run_dispatch(dispatch, nps, routings, rounds, warmup, args, tree, env,
                                 skipped, failures)
    print_tables(results, trun.cores)
    print_dispatch(dispatch_rows, trun.cores)
    if results:
        worst = max(r["worst_error"] for r in results)
        note(f"values: every round of every run within lecture 7's tolerance ({ep.MOE_RTOL:g} "
             f"of y's largest value); the worst error {100 * worst:.1f}% of it")
    return trun.finish("lc7_ep", {"runs": results, "dispatch": dispatch_rows, "T": args.tokens, "d": args.hidden,
                                  "E": args.experts, "ff": args.ffn, "k": args.topk,
                                  "rounds": rounds, "warmup": warmup}, skipped, failures)


SMALL = ["--lc", "7", "--np", "2", "--tokens", "16", "--hidden", "8", "--ffn", "8",
         "--experts", "4", "--topk", "2", "--rounds", "1", "--warmup", "0"]
# The dispatch alone at np 4 on two nodes of 2, uniform routing.
SMALL_NODES = ["--lc", "7", "--np", "4", "--per-node", "2", "--tokens", "16", "--hidden", "8",
               "--ffn", "8", "--experts", "4", "--topk", "2", "--rounds", "1", "--warmup", "0",
               "--moe-programs", "none", "--dispatch-programs", "two-hop", "--routing",
               "uniform"]
# The bench must reject: micro-batch 1's outputs added to micro-batch 0's tokens (wrong
# values), and the own rows sent to the rank itself (bytes the histogram does not give).
MUTANTS = ("ovl_mb1_into_mb0_tokens", "ovl_own_rows_sent")


def selftest(s):
    """make test: the bench on a small layer, its bytes equal to the histogram's, the serial
    program's expert compute never under an exchange and the overlapped one's always (under
    uniform routing, where every rank sends and receives), and two mutants it must reject."""
    s.section("bench (make bench LC=7, a small layer)")
    out = fresh("bench7")
    rc, text, took = run_bench(SMALL, out)
    problems = [] if rc == 0 else tail(text)
    runs = bench_results(os.path.join(out, "lc7_ep_np2.json"), problems, {"runs": []})["runs"]
    got = {(r["program"], r["routing"]): r for r in runs}
    if sorted(got) != sorted((p, x) for p in PROGRAMS for x in ROUTINGS):
        problems.append(f"rows: {sorted(got)}")
    for (name, routing), r in got.items():
        sums = [a + b for a, b in zip(r["dispatch"], r["combine"])]
        if r["bytes"] != sums or not sum(sums) or not r["best"] > 0:
            problems.append(f"{name} {routing}: sent {r['bytes']}, dispatch + combine {sums}")
        if name == "serial" and r["share"] != 0.0:
            problems.append(f"serial {routing}: {r['share']} of the expert compute under an "
                            f"exchange, expected none")
        if name == "overlap" and routing == "uniform" and r["share"] != 1.0:
            problems.append(f"overlap uniform: {r['share']} of the expert compute under an "
                            f"exchange, expected all")
    s.record("bench LC=7: overlapped and serial layers at np=2, uniform and skewed, values "
             "checked; bytes sent equal to the histogram's dispatch + combine; the serial "
             "layer's expert compute never under an exchange, the overlapped one's always "
             "under uniform routing", not problems, problems, f"({took:.1f} s)")
    dispatch = bench_results(os.path.join(out, "lc7_ep_np2.json"), [], {"dispatch": []})
    rows = {(r["program"], r["routing"]): r for r in dispatch.get("dispatch", [])}
    problems = [] if sorted(rows) == sorted((p, x) for p in DISPATCH for x in ROUTINGS) else \
        [f"dispatch rows: {sorted(rows)}"]
    small = argparse.Namespace(tokens=16, hidden=8, ffn=8, experts=4, topk=2)
    for (name, routing), r in rows.items():
        case = dispatch_case(2, small, routing, 1, DISPATCH[name][1])
        want = [a if name == "two-hop" else g for a, g in
                across_nodes(case, ep.layer_inputs(case, np.random.default_rng(7)))]
        virtual = r["nodes_from"].startswith("virtual") if name == "two-hop" else True
        if r["across"] != want or r["per_node"] != 1 or not r["best"] > 0 or not virtual:
            problems.append(f"{name} {routing}: {r}, across by definition {want}")
    s.record("bench LC=7: the two-hop dispatch and GShard's at np=2, uniform and skewed, on the "
             "nodes the two-hop program found (one machine: two virtual nodes of 1), values "
             "checked; the two-hop's bytes to other nodes from its records equal to its "
             "definition's", not problems, problems)
    out2 = fresh("bench7_nodes")
    rc, text, took = run_bench(SMALL_NODES, out2)
    got = bench_results(os.path.join(out2, "lc7_ep_np4.json"), [], {"dispatch": []})
    two = got.get("dispatch") or [{}]
    s.record("bench LC=7: the two-hop dispatch at np=4 on two nodes of 2 (records forwarded "
             "inside the node), its bytes to other nodes equal to its definition's",
             rc == 0 and two[0].get("per_node") == 2 and len(two[0].get("across", [])) == 4,
             tail(text), f"({took:.1f} s)")
    tree = solutions_with_mutants(fresh("bench7_hd_expert_ranks_across"), "lc7_ep",
                                  ["hd_expert_ranks_across"])
    rc, text, took = run_bench(SMALL_NODES, os.path.join(tree, "out"), tree)
    s.record("bench LC=7: a two-hop dispatch that sends a token to each expert rank of another "
             "node (the mutant hd_expert_ranks_across) is reported and fails the run",
             rc == 1 and re.search(r"ERROR: two-hop np 4 uniform: the ranks sent \[[\d, ]+\] "
                                   r"bytes to other nodes; the two-hop dispatch's definition "
                                   r"gives", text), tail(text), f"({took:.1f} s)")
    for patch, want in zip(MUTANTS, (r"ERROR: overlap np 2 uniform: rank \d+ 'y'",
                                     r"ERROR: overlap np 2 uniform: rank \d+ sent \d+ bytes "
                                     r"to itself")):
        tree = solutions_with_mutants(fresh(f"bench7_{patch}"), "lc7_ep", [patch])
        rc, text, took = run_bench(SMALL + ["--moe-programs", "overlap"],
                                   os.path.join(tree, "out"), tree)
        s.record(f"bench LC=7: the mutant {patch} is reported and fails the run",
                 rc == 1 and re.search(want, text), tail(text), f"({took:.1f} s)")


def serial_tree(out):
    """solutions/lc7_ep/moe_overlap.c with the serial schedule (the mutant ovl_serial),
    under out."""
    return patched_tree(os.path.relpath(os.path.join(out, "lc7_serial", "lc7_ep")), "lc7_ep",
                        [SERIAL_PATCH])


# ------------------------------------------------------------- the page's copy

PAGE_BYTES = re.compile(r"^(uniform|skewed) +(\d+)\*? +(\d+) +(\d+) +(\d+) +(\d+)$", re.M)


def page_figures(page):
    """The bytes table docs/lc7_ep.md copies (dispatch, combine and sent per rank) against
    the routing histograms of the bench's own inputs at its default shape (seed 7, as run()
    draws them); the times are not checked. Returns [problem]."""
    defaults = argparse.Namespace(tokens=1024, hidden=256, ffn=512, experts=8, topk=2)
    want = {}
    for n in NPS:
        for routing in ROUTINGS:
            case = make_case(n, defaults, routing)
            inputs = ep.layer_inputs(case, np.random.default_rng(7))
            for r, (dispatch, combine) in enumerate(traffic(case, inputs)):
                want[(routing, n, r)] = (dispatch, combine, dispatch + combine)
    problems, seen = [], set()
    for routing, n, r, *got in PAGE_BYTES.findall(page):
        key = (routing, int(n), int(r))
        seen.add(key)
        if key in want and tuple(int(g) for g in got) != want[key]:
            problems.append(f"docs/lc7_ep.md: {routing} np {n} rank {r} shows dispatch, "
                            f"combine, sent {', '.join(got)}; the histogram gives "
                            f"{', '.join(str(w) for w in want[key])}")
    missing = sorted(set(want) - seen)
    if missing:
        problems.append(f"docs/lc7_ep.md: the bytes table has no row for {missing[:3]}")
    return problems
