"""make bench LC=6 [NP=n] [SOL=0] [ARGS="..."]: lecture 6's context-parallel attention at
np 1, 2 and 4 (NP=n: that one).

Each program runs causal attention over one sequence in case mode, as the grader runs it:
a forward case, then a backward case (given the whole forward's o and lse; Ulysses' given
the head layout its forward saves), a few rounds, one launch per program and np:

- ring: ring_attention.c, each block's receive posted before the current block is computed;
- blocking: the same ring with a blocking exchange (MPI_Sendrecv of the next K/V block
  before the compute, and of the dK/dV accumulator after it: the mutants
  ring_fwd_sendrecv and ring_bwd_sendrecv of solutions/lc6_cp/ring_attention.c, applied
  together);
- zigzag: zigzag_attention.c, the ring over the zigzag layout;
- ulysses: ulysses_attention.c, all-to-alls around whole-sequence attention on the own
  heads, the backward from the head layout the forward saved.

From the case records (the lecture's kit logs every attention block a rank computes, an A line):

- step: the case's time, the slowest rank's (best and median of the rounds);
- compute: the busiest rank's attention blocks (the sum of its A lines' durations), and
  other: the step less that, the time the critical rank was not computing (messages,
  waiting, the LSE merges, reading the case's inputs);
- under compute: the share of the bytes received on comm whose receive was pending while
  an attention block ran (A lines' recv_pending and recv_bytes): what the program let the
  transfer hide under;
- pairs: the (query, key) positions each rank's blocks covered, beside r c^2 + c(c+1)/2
  (contiguous) and c'^2 (2np-1) + c'(c'+1) (zigzag), and each rank's compute time;
- bytes sent per rank, beside the formulas: ring 2 (np-1) (T/np) hkv hd 4 forward and
  (2np-1) of those blocks backward; Ulysses (np-1)/np of each all-to-all's tensor, four
  each way.

The pairs and bytes are exact: the bench fails if one differs from its formula. Every
rank's outputs of every round are checked against NumPy (causal attention over the whole
sequence, float64, lecture 6's tolerance), so that a fast wrong result is not a result.
Writes JSON under build/bench/; docs/lc6_cp.md (The bench) explains the tables.
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
import nn
from benchlib import (TrainingRun, build_program, ms, patched_tree, slashed,
                      solutions_with_mutants, tree_of)
from testkit import bench_results, fresh, run_bench, tail
from lectures.lc6_cp import cp, ulysses

ABOUT = "ring attention with and without overlap, contiguous against zigzag, Ulysses " \
        "against the ring: time, compute, receives under compute, pairs and bytes per rank"

# name: (program, layout, what it is)
PROGRAMS = {
    "ring": ("ring_attention", "contiguous", "receives posted before each block's compute"),
    "blocking": ("ring_attention", "contiguous", "the same ring, a blocking exchange"),
    "zigzag": ("zigzag_attention", "zigzag", "the ring over the zigzag layout"),
    "ulysses": ("ulysses_attention", "contiguous", "two all-to-alls, whole-sequence heads"),
}
# The blocking ring: these mutants of solutions/lc6_cp/ring_attention.c, applied together.
BLOCKING_PATCHES = ("ring_fwd_sendrecv", "ring_bwd_sendrecv")
NPS = (1, 2, 4)
OPS = (("F", "forward"), ("B", "backward"))
# Receives that are posted and completed inside one call: never pending under a block.
BLOCKING_RECEIVES = ("MPI_Recv", "MPI_Sendrecv", "MPI_Sendrecv_replace", "MPI_Mrecv")


def add_options(g):
    g.add_argument("--programs", default=",".join(PROGRAMS),
                   help=f"comma-separated, of {', '.join(PROGRAMS)} (default all)")
    g.add_argument("--seq", type=int, default=2048,
                   help="tokens T of the sequence (default 2048)")
    g.add_argument("--hq", type=int, default=8, help="query heads (default 8)")
    g.add_argument("--hkv", type=int, default=2, help="KV heads (default 2)")
    g.add_argument("--hd", type=int, default=64, help="dimensions per head (default 64)")


def note(text):
    print("\n".join(textwrap.wrap(text, 98, initial_indent="# ", subsequent_indent="#   ")))


# ------------------------------------------------------------------- formulas

def pairs_formula(layout, T, n, r):
    """(query, key) pairs rank r's blocks cover: contiguous r c^2 + c(c+1)/2, zigzag
    c'^2 (2np-1) + c'(c'+1) on every rank; Ulysses (every position, its heads) T(T+1)/2."""
    if layout == "contiguous":
        c = T // n
        return r * c * c + c * (c + 1) // 2
    if layout == "zigzag":
        h = T // (2 * n)
        return h * h * (2 * n - 1) + h * (h + 1)
    return T * (T + 1) // 2


def bytes_formula(name, op, T, n, hq, hkv, hd):
    """Bytes one rank sends: the ring's K/V blocks of 2 (T/n) hkv hd floats, n-1 of them
    forward, n-1 and n dK/dV blocks backward; Ulysses (n-1)/n of each all-to-all's tensor
    of c x W floats (W_q = hq hd, W_kv = max(hkv, n) hd): q, k, v, o forward, dout, dq, dk,
    dv backward."""
    c = T // n
    if n == 1:
        return 0
    if name != "ulysses":
        block = 2 * c * hkv * hd * 4
        return (n - 1) * block if op == "F" else (2 * n - 1) * block
    wq, wkv = hq * hd, max(hkv, n) * hd
    return (2 * wq + 2 * wkv) * c * (n - 1) // n * 4


def fits(name, T, n, hq, hkv):
    """None when the program runs this shape at n ranks, else why not."""
    if T % n:
        return f"T={T} is not a multiple of np={n}"
    if name == "zigzag" and T % (2 * n):
        return f"zigzag needs T={T} a multiple of 2 np = {2 * n}"
    if name == "ulysses" and (hq % n or (hkv % n and n % hkv)):
        return f"Ulysses needs hq={hq} a multiple of np={n}, and hkv={hkv} a multiple or a " \
               f"divisor of it"
    return None


# ------------------------------------------------------------------ measures

def sent_bytes(rec, n):
    """Bytes this rank sent on comm: its point-to-point sends, and (n-1)/n of each
    MPI_Alltoall (PMPI counts the call's whole buffer, the own block included)."""
    p2p = sum(e.bytes for e in rec.events if e.dir == "S" and e.comm == "case")
    a2a = sum(e.bytes for e in rec.events
              if e.dir == "C" and e.fn == "MPI_Alltoall" and e.comm == "case")
    return p2p + a2a * (n - 1) // n


def received_under_compute(rec):
    """(bytes received on comm, bytes of them whose receive was pending while an attention
    block ran). A block's A line holds the receives pending when it ended and their bytes;
    those still pending from the block before (its bytes less the nonblocking receives that
    completed between the two) are counted once."""
    total = sum(e.bytes for e in rec.events if e.dir == "R" and e.comm == "case")
    under, before, at = 0, 0, 0
    for a in rec.attn:
        if a.op not in ("F", "B"):
            continue
        done = sum(e.bytes for e in rec.events[at:a.events_before]
                   if e.dir == "R" and e.fn not in BLOCKING_RECEIVES)
        under += max(0, a.recv_bytes - max(0, before - done))
        before, at = a.recv_bytes, a.events_before
    return total, min(under, total)


def compute_seconds(rec, op):
    return sum(a.end - a.start for a in rec.attn if a.op == op)


# ----------------------------------------------------------------- reference

class Reference:
    """The whole sequence's inputs (float32) and its causal attention in float64: out, lse,
    dq, dk, dv, computed once, head by head (nn's attention block over T x T), whatever
    the np and layout that shard it."""

    def __init__(self, T, hq, hkv, hd, seed=6):
        case = {"T": T, "hq": hq, "hkv": hkv, "hd": hd}
        self.hq, self.hkv = hq, hkv
        self.w = cp.whole_inputs(case, np.random.default_rng(seed))
        q, k, v, dout = (self.w[x].astype(np.float64) for x in ("q", "k", "v", "dout"))
        self.out, self.dq = np.zeros((T, hq * hd)), np.zeros((T, hq * hd))
        self.lse = np.zeros((T, hq))
        self.dk, self.dv = np.zeros((T, hkv * hd)), np.zeros((T, hkv * hd))
        for j in range(hq):
            g = nn.kv_head(j, hq, hkv)
            qs, ks = slice(j * hd, (j + 1) * hd), slice(g * hd, (g + 1) * hd)
            args = (T, T, 1, 1, hd, "C")
            o, lse = nn.attn_block_forward(q[:, qs], k[:, ks], v[:, ks], *args)
            dq, dk, dv = nn.attn_block_backward(dout[:, qs], q[:, qs], k[:, ks], v[:, ks], o,
                                                lse, *args)
            self.out[:, qs], self.lse[:, j] = o, lse[:, 0]
            self.dq[:, qs] = dq
            self.dk[:, ks] += dk
            self.dv[:, ks] += dv
        self.w["o"], self.w["lse"] = self.out.astype(np.float32), self.lse.astype(np.float32)

    def saved(self, n):
        """Ulysses' saved head layout of the whole forward, per rank."""
        return ulysses.saved_tensors(self.hq, self.hkv, n, *(self.w[x] for x in
                                                             ("q", "k", "v", "o", "lse")))

    def inputs(self, op, layout, n, heads=False):
        """Each rank's rows of what the case reads, in the layout's order; heads: Ulysses'
        backward, which reads dout and the head layout its forward saved."""
        if heads and op == "B":
            saved = self.saved(n)
            return {"dout": shards(self.w["dout"], layout, n),
                    **{x: [mine[x] for mine in saved] for x in ulysses.SAVED}}
        names = ("q", "k", "v") if op == "F" else ("q", "k", "v", "dout", "o", "lse")
        return {x: shards(self.w[x], layout, n) for x in names}

    def expected(self, op, layout, n, heads=False):
        """Each rank's rows of what the case writes, flat, and the whole outputs (for the
        tolerance's scale); heads: Ulysses, whose forward returns o alone (its lse stays in
        the saved head layout)."""
        whole = ({"o": self.out} if heads else {"o": self.out, "lse": self.lse}) if op == "F" \
            else {"dq": self.dq, "dk": self.dk, "dv": self.dv}
        return [{x: shards(a, layout, n)[r].reshape(-1) for x, a in whole.items()}
                for r in range(n)], whole


def shards(whole, layout, n):
    T = whole.shape[0]
    return [np.ascontiguousarray(whole[cp.positions(layout, T, n, r)]) for r in range(n)]


def check_values(ref, op, layout, n, cdir, heads=False):
    """'' when every rank's outputs match causal attention over the whole sequence, else the
    first difference; and the worst error as a share of the bound."""
    want, whole = ref.expected(op, layout, n, heads)
    worst = 0.0
    arrays = records.rank_arrays(cdir, 0, n)
    for key, a in whole.items():
        bound = cp.TOLERANCE.bound([a])
        for r in range(n):
            got = arrays[r].get(key)
            msg = compare.compare(key, want[r][key], got, bound, r)
            if msg:
                return msg, None
            err = float(np.abs(got.astype(np.float64) - want[r][key]).max()) if got.size else 0
            worst = max(worst, err / bound)
    return "", worst


# -------------------------------------------------------------------- launch



def write_plan(work, ref, program, layout, n, shape, rounds, args, heads=False):
    """cases.txt: per round a forward case and a backward case, their inputs written once
    and linked into every case's directory."""
    T, hq, hkv, hd = shape
    lines = ["# make bench LC=6: per round one forward and one backward case"]
    shared = os.path.join(work, "inputs")
    for op, _ in OPS:
        d = os.path.join(shared, op)
        os.makedirs(d)
        records.write_inputs(d, 0, ref.inputs(op, layout, n, heads))
    plan = []
    for k in range(2 * rounds):
        op = OPS[k % 2][0]
        cdir = os.path.join(work, f"c{k}")
        os.makedirs(cdir)
        src = os.path.join(shared, op)
        for f in os.listdir(src):
            try:
                os.link(os.path.join(src, f), os.path.join(cdir, f))
            except OSError:
                shutil.copy(os.path.join(src, f), cdir)
        fn = f"{program}_{'forward' if op == 'F' else 'backward'}"
        plan.append(op)
        lines.append(f"case {k} np={n} fn={fn} T={T} hq={hq} hkv={hkv} hd={hd} layout={layout} "
                     f"watchdog={args.timeout:.0f}")
    return plan, lines


def measure(name, n, shape, ref, rounds, warmup, args, binary, work, env):
    """One launch: warm-up and measured rounds of a forward and a backward case. Returns
    (rows, errors, skipped message or None)."""
    program, layout, _ = PROGRAMS[name]
    T, hq, hkv, hd = shape
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    heads = name == "ulysses"
    plan, lines = write_plan(work, ref, program, layout, n, shape, warmup + rounds, args, heads)
    with open(os.path.join(work, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # MPI_Send as a real run has it (buffered while small), not the grader's strict mode.
    cmd = launch.mpirun_command(n, [os.path.abspath(binary), "--cases", os.path.abspath(work),
                                    "--no-strict"])
    out = []
    res = launch.run(cmd, timeout=args.timeout, env=env, on_line=out.append)
    todo = [ln for ln in out if " TODO " in ln]
    if todo:
        where = re.search(r"(\S+\.c:\d+)", todo[0])
        return [], [], f"{program}.c is not written yet (TODO at " \
                       f"{where.group(1) if where else '?'})"
    if res.timed_out or res.returncode != 0:
        return [], [f"{name} np {n}: the launch {'timed out' if res.timed_out else 'failed'} "
                    f"(exit {res.returncode}); rerun: {launch.shell_line(cmd)}"], None
    rows, errors = [], []
    for op, what in OPS:
        # per measured round: (step, and per rank: compute, (received, under compute), pairs,
        # bytes sent)
        per = []
        worst = 0.0
        for k, kind in enumerate(plan):
            if kind != op:
                continue
            cdir = os.path.join(work, f"c{k}")
            recs = [records.read_record(records.outputs_path(cdir, 0, r)) for r in range(n)]
            if any(rec is None for rec in recs):
                errors.append(f"{name} np {n} {what}: a rank wrote no record")
                break
            wrong, margin = check_values(ref, op, layout, n, cdir, heads)
            if wrong:
                errors.append(f"{name} np {n} {what}: {wrong}")
                break
            worst = max(worst, margin)
            if k < 2 * warmup:
                continue
            per.append((max(rec.seconds for rec in recs),
                        [compute_seconds(rec, op) for rec in recs],
                        [received_under_compute(rec) for rec in recs],
                        [sum(a.pairs for a in rec.attn if a.op == op) for rec in recs],
                        [sent_bytes(rec, n) for rec in recs]))
        if len(per) < rounds:
            continue
        steps = [p[0] for p in per]
        busiest = [max(p[1]) for p in per]
        pairs, sent = per[0][3], per[0][4]
        want_pairs = [pairs_formula("ulysses" if name == "ulysses" else layout, T, n, r)
                      for r in range(n)]
        want_bytes = bytes_formula(name, op, T, n, hq, hkv, hd)
        if any(p[3] != pairs for p in per) or pairs != want_pairs:
            errors.append(f"{name} np {n} {what}: the blocks covered {pairs} (query, key) pairs "
                          f"per rank, the formula gives {want_pairs}")
        if any(p[4] != sent for p in per) or any(b != want_bytes for b in sent):
            errors.append(f"{name} np {n} {what}: the ranks sent {sent} bytes, the formula "
                          f"gives {want_bytes} each")
        total = sum(t for p in per for t, _ in p[2])
        under = sum(u for p in per for _, u in p[2])
        rows.append({"program": name, "np": n, "op": op, "best": min(steps),
                     "median": statistics.median(steps), "compute": statistics.median(busiest),
                     "other": statistics.median(s - b for s, b in zip(steps, busiest)),
                     "received": total // len(per), "under_compute": under // len(per),
                     "share": under / total if total else None,
                     "rank_compute": [statistics.median(p[1][r] for p in per) for r in range(n)],
                     "pairs": pairs, "pairs_formula": want_pairs, "bytes": sent,
                     "bytes_formula": want_bytes, "worst_error": worst, "rounds": len(per)})
    return rows, errors, None


# --------------------------------------------------------------------- tables

def ratio(values):
    lo = min(values)
    return f"{max(values) / lo:.2f}" if lo > 0 else "-"




def print_tables(rows, cores):
    def over(n):
        return "*" if n > cores else ""

    def pick(names):
        return [r for r in rows if r["program"] in names]

    def order(r):
        return list(PROGRAMS).index(r["program"]), r["op"] != "F", r["np"]

    sel = sorted(pick(("ring", "blocking")), key=lambda r: (r["op"] != "F", r["np"],
                                                            r["program"] != "ring"))
    if sel:
        print("\nring attention, receives posted before the compute (ring) against a blocking "
              "exchange:")
        fmt = "{:<9} {:<8} {:>4} {:>9} {:>9} {:>9} {:>9} {:>14}"
        print(fmt.format("program", "op", "np", "best ms", "median", "compute", "other",
                         "under compute"))
        for r in sel:
            share = "-" if r["share"] is None else f"{100 * r['share']:.0f}%"
            print(fmt.format(r["program"], dict(OPS)[r["op"]], f"{r['np']}{over(r['np'])}",
                             ms(r["best"]), ms(r["median"]), ms(r["compute"]), ms(r["other"]),
                             share))
    sel = sorted(pick(("ring", "zigzag")), key=lambda r: (r["op"] != "F", r["np"],
                                                          r["program"] != "ring"))
    if sel:
        print("\ncontiguous (ring) against zigzag, (query, key) pairs and compute time per "
              "rank, rank 0 first:")
        note("formula: contiguous r c^2 + c(c+1)/2 (c = T/np), zigzag c'^2 (2np-1) + c'(c'+1) "
             "(c' = T/(2np))")
        fmt = "{:<10} {:<8} {:>4}  {:<30} {:>7}  {:<24} {:>7}"
        print(fmt.format("layout", "op", "np", "pairs per rank (= formula)", "max/min",
                         "compute ms per rank", "max/min"))
        for r in sel:
            pairs = slashed(r["pairs"])
            if r["pairs"] != r["pairs_formula"]:
                pairs += f" != {slashed(r['pairs_formula'])}"
            print(fmt.format(PROGRAMS[r["program"]][1], dict(OPS)[r["op"]],
                             f"{r['np']}{over(r['np'])}", pairs, ratio(r["pairs"]),
                             slashed([v * 1e3 for v in r["rank_compute"]], "{:.0f}"),
                             ratio(r["rank_compute"])))
    sel = sorted(pick(("ring", "zigzag", "ulysses")), key=lambda r: (r["op"] != "F", r["np"],
                                                                     order(r)))
    if sel:
        print("\nUlysses against the ring, step time and bytes sent per rank:")
        note("formula: ring and zigzag 2 (np-1) (T/np) hkv hd 4 forward, (2np-1) such blocks "
             "backward (the dK/dV rotations); Ulysses (np-1)/np of each all-to-all, q, k, v, "
             "o forward and dout, dq, dk, dv backward: (2 hq hd + 2 max(hkv,np) hd) (T/np) 4 "
             "(np-1)/np each way (the lse stays in the saved head layout)")
        fmt = "{:<9} {:<8} {:>4} {:>9} {:>9} {:>9} {:>14} {:>10}"
        print(fmt.format("program", "op", "np", "best ms", "median", "other", "bytes per rank",
                         "formula"))
        for r in sel:
            sent = slashed(sorted(set(r["bytes"])))
            print(fmt.format(r["program"], dict(OPS)[r["op"]], f"{r['np']}{over(r['np'])}",
                             ms(r["best"]), ms(r["median"]), ms(r["other"]), sent,
                             r["bytes_formula"]))


def run(args):
    names = [x.strip() for x in args.programs.split(",") if x.strip()]
    shape = (args.seq, args.hq, args.hkv, args.hd)
    if (not names or set(names) - set(PROGRAMS) or min(shape) < 1 or args.hq % args.hkv):
        print(f"bench: --programs of {', '.join(PROGRAMS)}; --seq, --hq, --hkv, --hd positive, "
              f"hkv dividing hq", file=sys.stderr)
        return 2
    tree = tree_of(args, "lc6_cp")
    nps = [args.np] if args.np else list(NPS)
    rounds = args.rounds if args.rounds is not None else 3
    warmup = args.warmup if args.warmup >= 0 else 1
    trun = TrainingRun(6, args, "context-parallel attention: time, overlap, work and traffic",
                       tree, nps)
    T, hq, hkv, hd = shape
    note(f"causal attention over T = {T} tokens, {hq} query heads, {hkv} KV heads of {hd} "
         f"dimensions (float32); per program and np one launch: {warmup} warm-up and {rounds} "
         f"measured rounds of a forward case and a backward case, as the grader runs them; "
         f"every round's outputs checked against NumPy (float64)")
    note("step: ms per case, the slowest rank's, best and median of the rounds; compute: the "
         "busiest rank's attention blocks (the kit's log), median; other: step - compute, the "
         "time the busiest rank was not computing (messages, waiting, merges, the case's "
         "inputs); under compute: the share of the bytes received whose receive was pending "
         "while a block ran")
    if max(nps) > trun.cores:
        note(f"* np > {trun.cores} cores: ranks are oversubscribed, a rank waits for a core as "
             f"well as for messages; its times (compute included, a block descheduled runs "
             f"longer) are not those of np cores. The pairs, bytes and shares are exact at "
             f"every np")
    env = launch.mpi_env()
    env.pop("XT_TRACE", None)
    out = args.out
    ref = Reference(*shape)
    binaries, skipped, results, failures = {}, [], [], []
    for name in names:
        src = blocking_tree(out) if name == "blocking" else tree
        binaries[name], why = build_program(src, PROGRAMS[name][0])
        if why:
            skipped.append(why)
    if "blocking" in names:
        note(f"blocking: solutions/lc6_cp/ring_attention.c with the mutants "
             f"{' and '.join(BLOCKING_PATCHES)} applied ({blocking_tree(out)}/)")
    for n in nps:
        for name in names:
            if binaries[name] is None:
                continue
            why = fits(name, T, n, hq, hkv)
            if why:
                skipped.append(f"{name} at np {n}: {why}")
                continue
            work = os.path.join(out, "lc6_work", f"{name}_np{n}")
            rows, errors, why = measure(name, n, shape, ref, rounds, warmup, args,
                                        binaries[name], work, env)
            if why:
                skipped.append(why)
                binaries[name] = None
                continue
            failures += errors
            for e in errors:
                print(f"ERROR: {e}")
            results += rows
            if rows:
                print(f"# {name} np {n}: " + ", ".join(
                    f"{dict(OPS)[r['op']]} {ms(r['best'])} ms" for r in rows), flush=True)
    print_tables(results, trun.cores)
    if results:
        worst = max(r["worst_error"] for r in results)
        note(f"values: every round of every run within lecture 6's tolerance "
             f"({cp.ATTN_RTOL:g} of each output's largest value); the worst error "
             f"{100 * worst:.1f}% of it")
    return trun.finish("lc6_cp", {"runs": results, "T": T, "hq": hq, "hkv": hkv, "hd": hd,
                                  "rounds": rounds, "warmup": warmup}, skipped, failures)


SMALL = ["--lc", "6", "--np", "2", "--seq", "32", "--hq", "4", "--hkv", "2", "--hd", "8",
         "--rounds", "1", "--warmup", "0"]
# At np 2, T 32, hq 4, hkv 2, hd 8 (c = 16, c' = 8), worked out by hand: the pairs per rank,
# the bytes one rank sends (forward, backward) and the share of the received bytes under
# compute (forward, backward; None: no point-to-point receive).
SMALL_PAIRS = {"contiguous": [136, 392], "zigzag": [264, 264]}
SMALL_BYTES = {"ring": (2048, 6144), "blocking": (2048, 6144), "zigzag": (2048, 6144),
               "ulysses": (3072, 3072)}
SMALL_SHARE = {"ring": (1.0, 5 / 6), "blocking": (0.0, 0.0), "zigzag": (1.0, 1.0),
               "ulysses": (None, None)}
# The bench must reject: a ring that computes every block (the later ranks' thrown away),
# whose pairs exceed the formula, and a zigzag with no causal mask, whose values are wrong.
MUTANTS = ("ring_fwd_every_block", "zz_fwd_no_causal_mask")


def selftest(s):
    """make test: the bench on a short sequence, its columns equal to the counts worked out
    by hand, and a tree of two mutants it must reject."""
    s.section("bench (make bench LC=6, a short sequence)")
    out = fresh("bench6")
    rc, text, took = run_bench(SMALL, out)
    problems = [] if rc == 0 else tail(text)
    runs = bench_results(os.path.join(out, "lc6_cp_np2.json"), problems, {"runs": []})["runs"]
    got = {(r["program"], r["op"]): r for r in runs}
    if sorted(got) != sorted((p, op) for p in PROGRAMS for op, _ in OPS):
        problems.append(f"rows: {sorted(got)}")
    for (name, op), r in got.items():
        i = [o for o, _ in OPS].index(op)
        want = (SMALL_PAIRS[PROGRAMS[name][1]] if name != "ulysses" else [528, 528],
                [SMALL_BYTES[name][i]] * 2, SMALL_SHARE[name][i])
        if (r["pairs"], r["bytes"], r["share"]) != want or r["pairs_formula"] != want[0] \
                or r["bytes_formula"] != want[1][0] or not r["best"] > 0:
            problems.append(f"{name} {op}: pairs {r['pairs']} (formula {r['pairs_formula']}), "
                            f"bytes {r['bytes']} (formula {r['bytes_formula']}), share "
                            f"{r['share']}; expected {want}")
    s.record("bench LC=6: ring, blocking ring, zigzag and Ulysses at np=2, values checked; "
             "pairs, bytes and their formulas equal to the counts worked out by hand; the "
             "blocking exchange has no receive under compute, the ring all but one (rank 0's last "
             "dK/dV, at the step where it computes nothing)",
             not problems, problems, f"({took:.1f} s)")
    tree = solutions_with_mutants(fresh("bench6_mutant"), "lc6_cp", MUTANTS)
    rc, text, took = run_bench(SMALL + ["--programs", "ring,zigzag"], os.path.join(tree, "out"),
                               tree)
    s.record("bench LC=6: a ring that computes every block (pairs above the formula) and a "
             "zigzag without the causal mask (wrong values) are reported and fail the run",
             rc == 1 and re.search(r"ERROR: ring np 2 forward: the blocks covered \[392, 392\] "
                                   r"\(query, key\) pairs per rank, the formula gives "
                                   r"\[136, 392\]", text)
             and re.search(r"ERROR: zigzag np 2 forward: rank 0 'o'", text)
             and "ERROR: ring np 2 backward" not in text, tail(text), f"({took:.1f} s)")


def blocking_tree(out):
    """solutions/lc6_cp/ring_attention.c with the blocking exchange, under out."""
    return patched_tree(os.path.relpath(os.path.join(out, "lc6_blocking", "lc6_cp")), "lc6_cp",
                        BLOCKING_PATCHES)


# ------------------------------------------------------------- the page's copy

PAGE_BYTES = re.compile(r"^(ring|blocking|zigzag|ulysses)\s+(forward|backward)\s+(\d+)\*?\s+"
                        r"[\d.]+\s+[\d.]+\s+[\d.]+\s+(\d+)\s+(\d+)$", re.M)
PAGE_PAIRS = re.compile(r"^(contiguous|zigzag)\s+(forward|backward)\s+(\d+)\*?\s+([\d/]+)\s",
                        re.M)


def page_figures(page):
    """The exact figures of the bench's output that docs/lc6_cp.md copies (bytes per rank and
    their formula, pairs per rank) against the formulas at the default shape; the times are
    the machine's and are not checked. Returns [problem]."""
    T, hq, hkv, hd = 2048, 8, 2, 64
    found, problems = 0, []
    for name, what, n, got, formula in PAGE_BYTES.findall(page):
        op = "F" if what == "forward" else "B"
        want = bytes_formula(name, op, T, int(n), hq, hkv, hd)
        found += 1
        if (int(got), int(formula)) != (want, want):
            problems.append(f"docs/lc6_cp.md: {name} {what} np {n} shows {got} bytes per rank "
                            f"(formula {formula}); the bench's formula gives {want}")
    for layout, what, n, pairs in PAGE_PAIRS.findall(page):
        want = "/".join(str(pairs_formula(layout, T, int(n), r)) for r in range(int(n)))
        found += 1
        if pairs != want:
            problems.append(f"docs/lc6_cp.md: {layout} {what} np {n} shows pairs {pairs}; the "
                            f"formula gives {want}")
    if not found:
        problems.append("docs/lc6_cp.md: no bench table rows found (bytes per rank, pairs)")
    return problems + ratio_figures(page, T, hq, hkv, hd)


def ratio_figures(page, T, hq, hkv, hd):
    """The ratios the page's reading of the table states (Ulysses' bytes against the ring's,
    forward, backward and over the step, at np 2 and 4; and with --hkv 8 the forward bytes
    at np 4), from the same formulas. Returns [problem]."""
    def sent(name, ops, n, kv=hkv):
        return sum(bytes_formula(name, op, T, n, hq, kv, hd) for op in ops)

    def ratio(ops, n):
        return sent("ulysses", ops, n) / sent("ring", ops, n)
    claims = [
        (r"Ulysses sends ([\d.]+) times the ring's bytes at np 2 and ([\d.]+) times at np 4",
         "F", "{:.1f}"),
        (r"so Ulysses sends ([\d.]+) of the ring's bytes at np 2 and ([\d.]+) at\s+np 4", "B",
         "{:.2f}"),
        (r"over the whole step ([\d.]+) times the ring's at np 2 and ([\d.]+) times at np 4", "FB",
         "{:.2f}"),
    ]
    problems = []
    for pattern, ops, form in claims:
        m = re.search(pattern, page)
        want = tuple(form.format(ratio(ops, n)) for n in (2, 4))
        got = tuple(f"{float(g):.{len(w.split('.')[1])}f}" for g, w in zip(m.groups(), want)) \
            if m else None
        if got != want:
            problems.append(f"docs/lc6_cp.md: Ulysses / ring ({ops}) quoted as "
                            f"{m.groups() if m else None}; the formulas give {want}")
    m = re.search(r"\((\d+) against (\d+) per rank forward\)", page)
    want = (str(sent("ring", "F", 4, 8)), str(sent("ulysses", "F", 4, 8)))
    if not m or m.groups() != want:
        problems.append(f"docs/lc6_cp.md: the --hkv 8 forward bytes at np 4 quoted as "
                        f"{m.groups() if m else None}; the formulas give {want}")
    return problems


# make test's negative control of page_figures: a ratio of the reading changed.
PAGE_BREAK = ("so Ulysses sends 0.83 of the ring's bytes", "so Ulysses sends 0.85 of the ring's bytes")
