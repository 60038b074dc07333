"""make bench LC=4 [NP=n] [SOL=0] [ARGS="..."]: lecture 4's tensor parallelism
at np 1, 2 and 4 (NP=n: that one only).

1. The SwiGLU MLP block (mlp_tp_forward + mlp_tp_backward) of T tokens, width
   d, ff hidden units, and the same block with a pre-norm under sequence
   parallelism (seqpar_forward + seqpar_backward): time per forward+backward,
   the MPI calls of each phase and the bytes of each call (libxt's PMPI
   counters) beside what a ring algorithm puts on the wire, and the check
   against the same functions on one rank.
2. The decoder step (model_tp_step) of a small model: time per step, the
   all-reduces per step against 2 + 4L + the cross-entropy's 2 (+ 2L on the
   KV replicas), and the losses of every step against np = 1's.
3. Activation memory per rank: mlp_tp's act (plus the norm's tensors, whole
   on every rank under tensor parallelism alone) against sequence_parallel's
   peak (libxt's XT_MEM_ACTIVATIONS), beside Korthikanti et al.'s formulas.

Writes JSON under build/bench/. docs/lc4_tp.md (Bench) explains it. Parts 1
and 3 are measured by build/bench/solutions/lc4_tp/bench
(grader/lectures/lc4_tp/bench.c), one launch per np. Part 2 runs model_tp's
own program (build/solutions/lc4_tp/model_tp) in case mode, as the grader
does: its model type and init are private to model_tp.c, so the driver
cannot build a model itself; the step's time is read from the case records.
"""

import os
import re
import shutil
import sys
import textwrap
import time

import numpy as np

import records
import launch
from benchlib import build_bench, Launch, ms, output_tag, TrainingRun, tree_of
from testkit import bench_results, fresh, mutant_tree, run_bench, tail
from lectures.lc4_tp.model import DecoderLM, initial_weights

ABOUT = "TP MLP block, sequence parallelism and the decoder step at np 1, 2, 4: time, " \
        "all-reduces, bytes, activation memory"

MLP = "512,512,1408"  # T, d, ff
# vocab, d, layers, hq, hkv, hd, ff, batch, T: KV heads in blocks at np 1, 2; replicated at 4.
MODEL = "512,256,2,8,2,32,704,2,128"
MODEL_KEYS = ("vocab", "d", "layers", "hq", "hkv", "hd", "ff", "batch", "T")
PARTS = ("mlp", "seqpar", "model")
LOSS_TOL = 1e-4  # relative, np = n against np = 1: float32 sums in another order


def add_options(g):
    g.add_argument("--mlp", default=None,
                   help=f"the MLP block: T,d,ff (tokens, width, hidden units; default {MLP})")
    g.add_argument("--model", default=None,
                   help=f"the decoder: {','.join(MODEL_KEYS)} (default {MODEL})")
    g.add_argument("--parts", default=",".join(PARTS),
                   help="comma-separated, of mlp, seqpar, model (default all)")
    g.add_argument("--model-steps", type=int, default=3,
                   help="decoder steps timed per round, beyond a first step (default 3)")


class Lc4Launch(Launch):
    """Collects one np's lines from grader/lectures/lc4_tp/bench.c."""

    def __init__(self):
        super().__init__()
        self.calls, self.act, self.rows, self.checks, self.skips = {}, {}, {}, {}, []

    def line(self, text):
        parts = text.split()
        kind = parts[0] if parts else ""
        if kind == "CALLS" and len(parts) == 8:
            self.calls.setdefault(parts[1], {}).setdefault(parts[2], {})[parts[3]] = {
                "calls_min": int(parts[4]), "calls_max": int(parts[5]),
                "bytes_min": int(parts[6]), "bytes_max": int(parts[7])}
        elif kind == "ACT" and len(parts) == 7:
            self.act[parts[1]] = {"min": int(parts[2]), "max": int(parts[3]),
                                  "formula_min": int(parts[4]), "formula_max": int(parts[5]),
                                  "nbad": int(parts[6])}
        elif kind == "ROW" and len(parts) == 6:
            self.rows[parts[1]] = {"median": float(parts[2]), "best": float(parts[3]),
                                   "worst": float(parts[4]), "rounds": int(parts[5])}
        elif kind == "CHECK" and len(parts) >= 6:
            self.checks[parts[1]] = {"status": parts[2], "maxdiff": float(parts[3]),
                                     "ndiff": int(parts[4]), "detail": text.split(None, 5)[5]}
        elif kind == "SKIP":
            self.skips.append(text[5:])
            if text.startswith("SKIP no block"):
                self.skip = text[5:]
        else:
            super().line(text)


def note(text):
    """A comment line of the report, wrapped to 100 columns."""
    print("\n".join(textwrap.wrap(text, 98, initial_indent="# ", subsequent_indent="#   ")))


def mb(nbytes):
    return f"{nbytes / 1e6:.2f}"


def ring_allreduce(n, nbytes):
    """What a ring all-reduce puts on the wire per rank: 2(np-1)/np of the buffer."""
    return 2 * (n - 1) / n * nbytes


def ring_half(n, nbytes):
    """A ring all-gather or reduce-scatter of nbytes in all: (np-1)/np of it per rank."""
    return (n - 1) / n * nbytes


SHORT = {"MPI_Allreduce": "AR", "MPI_Allgatherv": "AGv", "MPI_Allgather": "AG",
         "MPI_Reduce_scatter": "RS", "MPI_Reduce_scatter_block": "RSb"}

# What each block may call, per phase: {function: calls}; nothing else.
EXPECTED = {"mlp": {"fwd": {"MPI_Allreduce": 1}, "bwd": {"MPI_Allreduce": 1}},
            "seqpar": {"fwd": {"MPI_Allgatherv": 1, "MPI_Reduce_scatter": 1},
                       "bwd": {"MPI_Allgatherv": 2, "MPI_Reduce_scatter": 1,
                               "MPI_Allreduce": 1}}}


def block_checks(entry, errors):
    """The MLP blocks' calls against EXPECTED, each all-reduce's buffer against 4Td (mlp)."""
    np_, info = entry["np"], entry["info"]
    td4 = 4 * int(info.get("T", 0)) * int(info.get("d", 0))
    for block, phases in EXPECTED.items():
        got = entry["calls"].get(block)
        if not got:
            continue
        for phase, want in phases.items():
            calls = got.get(phase, {})
            for fn, c in calls.items():
                if fn == "all":
                    continue
                if (c["calls_min"], c["calls_max"]) != (want.get(fn, 0),) * 2:
                    errors.append(f"np {np_}: {block} {phase} made {c['calls_min']}"
                                  f"{'..' + str(c['calls_max']) if c['calls_max'] != c['calls_min'] else ''}"
                                  f" {fn} per call of the block; expected {want.get(fn, 0)}")
            total = calls.get("all", {}).get("calls_max", 0)
            if total != sum(want.values()):
                errors.append(f"np {np_}: {block} {phase}: {total} MPI calls in all; expected "
                              f"exactly {sum(want.values())} "
                              f"({', '.join(f'{v} {k}' for k, v in want.items())})")
            if block == "mlp":
                ar = calls.get("MPI_Allreduce")
                if ar and ar["calls_max"] == 1 and not ar["bytes_min"] == ar["bytes_max"] == td4:
                    errors.append(f"np {np_}: mlp {phase}'s all-reduce of {ar['bytes_max']} B; "
                                  f"expected T d floats = {td4} B")


def calls_text(calls):
    return " ".join(f"{c['calls_max']}{SHORT.get(fn, fn)}" for fn, c in calls.items()
                    if fn != "all") or "none"


TABLE = "{:>3}  {:<7} {:<22} {:>16} {:>9} {:>9} {:>8} {:>8}  {}"


def block_rows(entry):
    """The MLP blocks' rows of the traffic and time table."""
    np_, info, rows = entry["np"], entry["info"], []
    T, d = int(info.get("T", 0)), int(info.get("d", 0))
    td4 = 4 * T * d
    for block in ("mlp", "seqpar"):
        calls = entry["calls"].get(block)
        if not calls:
            continue
        fwd, bwd = calls.get("fwd", {}), calls.get("bwd", {})
        if block == "mlp":
            ar = fwd.get("MPI_Allreduce", {})
            per_call = f"{mb(ar.get('bytes_max', 0))}{' = 4Td' if ar.get('bytes_max') == td4 else ''}"
            ring = mb(ring_allreduce(np_, td4))
            wire = 2 * ring_allreduce(np_, td4)
        else:
            rs = fwd.get("MPI_Reduce_scatter", {})
            per_call = f"RS {mb(rs.get('bytes_max', 0))}"
            ring = mb(ring_half(np_, td4))
            wire = 5 * ring_half(np_, td4) + ring_allreduce(np_, 4 * d)
        r = entry["rows"].get(block)
        c = entry["checks"].get(block)
        check = "-" if not c else (f"= 1 rank ({c['maxdiff']:.0e})" if c["status"] == "ok"
                                   else f"WRONG {c['ndiff']}")
        rows.append(TABLE.format(np_, block, f"{calls_text(fwd)} | {calls_text(bwd)}", per_call,
                                 ring, mb(wire), ms(r["best"]) if r else "-",
                                 ms(r["median"]) if r else "-", check))
    return rows


# ----------------------------------------------------------- the decoder step

def model_config(text):
    vals = [int(v) for v in text.split(",")]
    if len(vals) != len(MODEL_KEYS) or min(vals) < 1:
        raise ValueError(f"--model {text}: {len(MODEL_KEYS)} positive integers, "
                         f"{','.join(MODEL_KEYS)}")
    return dict(zip(MODEL_KEYS, vals))


def decoder_of(c):
    """The whole model of a --model configuration, as the tests define it."""
    return DecoderLM(c["vocab"], c["d"], c["layers"], c["hq"], c["hkv"], c["hd"], c["ff"])


def model_inputs(c, steps, seed=2026):
    """Whole initial weights (as model_tp.c orders them), tokens and targets for `steps`."""
    rng = np.random.default_rng(seed)
    V = c["vocab"]
    w0 = initial_weights(decoder_of(c), rng)
    n = c["batch"] * c["T"] * steps
    tokens = rng.integers(0, V, n).astype(np.int32)
    targets = ((tokens.astype(np.int64) * 5 + 3) % V).astype(np.int32)  # a rule worth learning
    return {"w0": w0, "tokens": tokens, "targets": targets}


def build_program(tree, name):
    binary = os.path.join("build", tree, name)
    res = launch.run(["make", "-s", "--no-print-directory", binary], timeout=600)
    if res.returncode != 0:
        print(f"bench: building {binary} failed", file=sys.stderr)
        return None
    return binary


def run_model(args, tree, np_, cfg, rounds, warmup, env, work):
    """model_tp's own program in case mode, one launch: a reference at np = 1, then the
    timed cases at np = np_. Returns (entry or None, todo/skip message or None, errors)."""
    steps = 1 + args.model_steps
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    inputs = model_inputs(cfg, steps)
    for name, a in inputs.items():
        np.save(os.path.join(work, name + ".npy"), a)
    head = " ".join(f"{k}={cfg[k]}" for k in MODEL_KEYS)
    plan = [(1, steps, "reference")] + [(np_, 1, "warmup")] * warmup
    for _ in range(rounds):
        plan += [(np_, 1, "one"), (np_, steps, "more")]
    lines = ["# make bench LC=4: model_tp_step, a reference at np=1, then the timed cases"]
    for k, (n, s, _) in enumerate(plan):
        lines.append(f"case {k} np={n} fn=model_tp_step {head} steps={s} lr=0.01 wd=0.1 "
                     f"watchdog={args.timeout:.0f}")
        os.makedirs(os.path.join(work, f"c{k}"))
        for name in inputs:
            os.link(os.path.join(work, name + ".npy"), os.path.join(work, f"c{k}", name + ".npy"))
    with open(os.path.join(work, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    binary = build_program(tree, "model_tp")
    if binary is None:
        return None, None, ["building model_tp failed"]
    cmd = launch.mpirun_command(np_, [os.path.abspath(binary), "--cases", os.path.abspath(work)])
    got = Launch()
    res = launch.run(cmd, timeout=args.timeout, env=env, on_line=got.line)
    if got.todo:
        where = re.search(r"TODO (\S+:\d+)", got.todo[0])
        return None, f"{tree}/model_tp.c is not written yet (TODO at " \
                     f"{where.group(1) if where else '?'})", []
    if res.timed_out or res.returncode != 0:
        return None, None, [f"model_tp's launch {'timed out' if res.timed_out else 'failed'} "
                            f"(exit {res.returncode}); rerun: {launch.shell_line(cmd)}"]

    def case_records(k, n):
        return [records.read_record(records.outputs_path(os.path.join(work, f"c{k}"), 0, r))
                for r in range(n)]

    def losses(k, n, s):
        arrays = records.rank_arrays(os.path.join(work, f"c{k}"), 0, n)
        return np.array([[float(arrays[r][f"step{i + 1}_loss"][0]) for i in range(s)]
                         for r in range(n)])

    errors = []
    ntok, d, L = cfg["batch"] * cfg["T"], cfg["d"], cfg["layers"]
    replicas = np_ // cfg["hkv"] if cfg["hkv"] < np_ else 1
    one = [k for k, p in enumerate(plan) if p[2] == "one"]
    more = [k for k, p in enumerate(plan) if p[2] == "more"]
    # The all-reduces of one step (the first "one" case), on every rank.
    big, small, kv, other, small_bytes = set(), set(), set(), set(), 0
    rec1 = case_records(one[0], np_)
    act_peak = []
    for r, rec in enumerate(rec1):
        if rec is None:
            errors.append(f"np {np_}: rank {r} wrote no record of the step")
            continue
        evs = [e for e in rec.events if e.fn == "MPI_Allreduce"]
        big.add(sum(1 for e in evs if e.comm == "case" and e.bytes == 4 * ntok * d))
        sm = [e for e in evs if e.comm == "case" and e.bytes != 4 * ntok * d]
        small.add(len(sm))
        small_bytes = max([small_bytes] + [e.bytes for e in sm])
        kv.add(sum(1 for e in evs if e.comm != "case"))
        other.add(sum(1 for e in rec.events
                      if e.fn != "MPI_Allreduce" and not e.fn.startswith("MPI_Comm_")))
        act_peak.append(rec.memory.get("activations", (0, 0))[1])
    want_kv = 2 * L if replicas > 1 else 0
    if big != {2 + 4 * L}:
        errors.append(f"np {np_}: the decoder step made {'/'.join(map(str, sorted(big)))} "
                      f"all-reduces of n d floats; expected 2 + 4L = {2 + 4 * L}")
    if len(small) != 1 or max(small) > 3 or small_bytes > 8 * ntok:
        errors.append(f"np {np_}: the cross-entropy's all-reduces: {sorted(small)} of up to "
                      f"{small_bytes} B; expected at most 3 of at most 2n floats")
    if kv != {want_kv}:
        errors.append(f"np {np_}: {sorted(kv)} all-reduces on the KV replicas' communicator; "
                      f"expected {want_kv}")
    if other != {0}:
        errors.append(f"np {np_}: {max(other)} MPI messages or calls other than all-reduces")
    # Time per step: (a (1+K)-step case - a 1-step case) / K, the slowest rank's records.
    per = []
    for a, b in zip(one, more):
        ra, rb = case_records(a, np_), case_records(b, np_)
        if None in ra or None in rb:
            continue
        per.append((max(x.seconds for x in rb) - max(x.seconds for x in ra)) / args.model_steps)
    dropped = sum(1 for p in per if p <= 0)  # a busy machine can make a difference negative
    per = sorted(p for p in per if p > 0)
    # Losses against np = 1's, every step, every rank.
    ref = losses(0, 1, steps)[0]
    got = losses(more[-1], np_, steps) if more else ref[None, :]
    diff = np.abs(got - ref[None, :]) / (1 + np.abs(ref[None, :]))
    worst = float(diff.max())
    if not np.all(got == got[0:1]):
        errors.append(f"np {np_}: the ranks returned different losses: {got.tolist()}")
    if worst > LOSS_TOL:
        s = int(np.argmax(diff.max(axis=0)))
        errors.append(f"np {np_}: the decoder's loss at step {s + 1} is {got[0][s]:.6f}, np = 1's "
                      f"{ref[s]:.6f} (relative difference {worst:.1e} > {LOSS_TOL:g})")
    entry = {"allreduce_nd": sorted(big), "allreduce_ce": sorted(small),
             "ce_bytes_max": small_bytes, "allreduce_kv": sorted(kv), "replicas": replicas,
             "bytes_per_allreduce": 4 * ntok * d, "losses": got[0].tolist(),
             "losses_np1": ref.tolist(), "loss_maxdiff": worst,
             "step_seconds": per, "median": per[len(per) // 2] if per else None,
             "best": per[0] if per else None, "rounds_dropped": dropped,
             "activations_peak": act_peak,
             "params_per_rank_max": None}
    return entry, None, errors


def model_row(np_, cfg, m):
    ntok, d, L = cfg["batch"] * cfg["T"], cfg["d"], cfg["layers"]
    nd4 = 4 * ntok * d
    calls = f"{m['allreduce_nd'][-1]}+{m['allreduce_ce'][-1]}AR" + (
        f" +{m['allreduce_kv'][-1]}kv" if m["allreduce_kv"][-1] else "")
    formula = "2+4L+2" + ("+2L" if m["replicas"] > 1 else "")
    wire = (2 + 4 * L) * ring_allreduce(np_, nd4)
    check = (f"= np 1 ({m['loss_maxdiff']:.0e})" if m["loss_maxdiff"] <= LOSS_TOL else "WRONG")
    return TABLE.format(np_, "decoder", f"{calls} = {formula}", f"{mb(nd4)} = 4nd",
                        mb(ring_allreduce(np_, nd4)), mb(wire),
                        ms(m["best"]) if m["best"] is not None else "-",
                        ms(m["median"]) if m["median"] is not None else "-", check)


# -------------------------------------------------------------- memory table

MEM = "{:>3}  {:<15} {:>8} {:<27} {:>8} {:>8}  {}"


def memory_rows(entry):
    if not entry["act"]:
        return [], []
    np_, info = entry["np"], entry["info"]
    T, d = int(info.get("T", 0)), int(info.get("d", 0))
    s, h, a, t = T, d, max(1, d // 64), np_
    rows, errors = [], []
    # Bytes in fp16, as the paper counts them (both columns alike; the runs here are fp32).
    korth_mlp_tp = 5 * s * h + 16 * s * h / t  # the MLP and its norm
    korth_sp = 21 * s * h / t
    layer_tp = s * h * (10 + 24 / t + 5 * a * s / (h * t))
    layer_sp = s * h / t * (34 + 5 * a * s / h)
    act = entry["act"]
    if "mlp" in act:
        m = act["mlp"]
        kept = m["max"] + 4 * T * (d + 1)
        rows.append(MEM.format(np_, "mlp_tp  (TP)", mb(kept),
                               f"{mb(m['max'])} + {mb(4 * T * (d + 1))} = 4(3T f + T(d+1))",
                               mb(korth_mlp_tp), mb(layer_tp), "5sbh+16sbh/t | sbh(10+24/t+5as/ht)"))
    if "seqpar" in act:
        m = act["seqpar"]
        ok = m["nbad"] == 0
        got = mb(m["max"]) if m["min"] == m["max"] else f"{mb(m['min'])}-{mb(m['max'])}"
        rows.append(MEM.format(np_, "seqpar (TP+SP)", got,
                               f"{'=' if ok else '!='} 4(T_l(d+1) + 3T f)", mb(korth_sp),
                               mb(layer_sp), "21sbh/t | sbh/t(34+5as/h)"))
        if not ok:
            errors.append(f"np {np_}: sequence_parallel kept {m['min']}..{m['max']} B of "
                          f"activations at its peak ({m['nbad']} of {np_} ranks off); the formula "
                          f"4(T_local (d+1) + 3 T ff_local) = {m['formula_min']}..{m['formula_max']} B")
    return rows, errors


# ----------------------------------------------------------------------- run

def run(args):
    try:
        T, d, ff = (int(v) for v in (args.mlp or MLP).split(","))
        cfg = model_config(args.model or MODEL)
    except ValueError as e:
        print(f"bench: {e} (--mlp T,d,ff; --model {','.join(MODEL_KEYS)})", file=sys.stderr)
        return 2
    parts = {p.strip() for p in args.parts.split(",") if p.strip()}
    tree = tree_of(args, "lc4_tp")
    nps = [args.np] if args.np else [1, 2, 4]
    rounds = args.rounds if args.rounds is not None else 7
    warmup = args.warmup if args.warmup >= 0 else 1
    bad_np = [n for n in nps if "model" in parts and (cfg["hq"] % n or cfg["hq"] % cfg["hkv"] or
                                                       (cfg["hkv"] % n and n % cfg["hkv"]))]
    if (min(nps) < 1 or min(T, d, ff) < 1 or rounds < 1 or args.model_steps < 1 or not parts
            or parts - set(PARTS) or bad_np):
        print("bench: need np >= 1, --rounds >= 1, --model-steps >= 1, --parts of mlp, seqpar, "
              "model" + (f"; the decoder's hq {cfg['hq']} must be a multiple of np and of hkv "
                         f"{cfg['hkv']}, and hkv a multiple or a divisor of np (np "
                         f"{', '.join(map(str, bad_np))})" if bad_np else ""), file=sys.stderr)
        return 2
    blocks = [p for p in ("mlp", "seqpar") if p in parts]
    binary = build_bench(tree) if blocks else None
    if blocks and binary is None:
        return 1

    trun = TrainingRun(4, args, "tensor parallelism: time, traffic and activation memory", tree,
                       nps)
    note(f"MLP block: T = {T} tokens, d = {d}, ff = {ff} (SwiGLU: Wg, Wu d x ff, Wd ff x d), "
          f"fp32; MB = 10^6 bytes")
    note("  mlp     mlp_tp.c: forward + backward, tokens whole on every rank, hidden units "
         "split")
    note("  seqpar  sequence_parallel.c: RMSNorm + the same MLP, tokens split outside it")
    note(f"decoder: model_tp.c, vocab {cfg['vocab']}, d {cfg['d']}, L = {cfg['layers']} "
          f"blocks, {cfg['hq']} query / {cfg['hkv']} KV heads of {cfg['hd']}, ff {cfg['ff']}, "
          f"n = {cfg['batch']}x{cfg['T']} tokens, {decoder_of(cfg).nparams:,} parameters")
    note("MPI calls: per call of the block, fwd | bwd (per step for the decoder), from libxt's "
          "PMPI counters, checked: mlp exactly 1 AR each way; decoder 2+4L of n d floats, the "
          "cross-entropy's 2 (at most 3, of at most 2n), +2L on the KV replicas' communicator "
          "where np > hkv")
    note("per call: the bytes of the call's buffer (what the counter measures, the same at "
          "any np); ring/call: what a ring algorithm puts on the wire per rank for it, "
          "2(np-1)/np of it for an all-reduce, (np-1)/np for RS or AG; ring/step: per "
          "fwd+bwd or decoder step")
    note(f"time: ms per forward+backward (per step for the decoder), the slowest rank's; best "
          f"and median of {rounds} rounds after {warmup} warm-up; the decoder's from model_tp's "
          f"case records ((1+{args.model_steps})-step case - 1-step case) / {args.model_steps}, "
          f"which includes writing each step's tensors as .npy")
    note("check: y and dx against the same functions on one rank (MPI_COMM_SELF, whole "
          "weights); the decoder's loss at every step against np = 1's")

    env = launch.mpi_env()
    env.pop("XT_TRACE", None)
    results, failures, skipped = [], [], []
    for np_ in nps:
        entry = {"np": np_, "info": {}, "calls": {}, "act": {}, "rows": {}, "checks": {}}
        errors, stop = [], None
        t0 = time.monotonic()
        if blocks:
            prog = [binary, "--T", str(T), "--d", str(d), "--ff", str(ff), "--rounds",
                    str(rounds), "--warmup", str(warmup), "--blocks", ",".join(blocks)]
            cmd = launch.mpirun_command(np_, prog)
            got = Lc4Launch()
            res = launch.run(cmd, timeout=args.timeout, env=env, on_line=got.line)
            entry.update(info=got.info, calls=got.calls, act=got.act, rows=got.rows,
                         checks=got.checks)
            for msg in got.skips:
                if msg not in skipped:
                    skipped.append(msg)
            if got.todo:
                where = re.search(r"TODO (\S+:\d+)", got.todo[0])
                stop = (f"{tree}/ is not written yet (TODO at "
                        f"{where.group(1) if where else '?'})")
                left = [p for p in PARTS if p in parts and not (
                    where and p != "model" and {"mlp": "/mlp_tp.c:", "seqpar":
                                                "/sequence_parallel.c:"}[p] in where.group(1))]
                if left != sorted(parts, key=PARTS.index):
                    stop += f"; ARGS=\"--parts {','.join(left)}\" benches the others"
            elif res.timed_out or res.returncode != 0:
                errors.append(f"the MLP launch {'timed out' if res.timed_out else 'failed'} "
                              f"(exit {res.returncode}); rerun: {launch.shell_line(cmd)}")
            for c in got.checks.values():
                if c["status"] != "ok":
                    errors.append(f"np {np_}: {[k for k, v in got.checks.items() if v is c][0]} "
                                  f"differs from one rank's: {c['ndiff']} values over "
                                  f"tolerance {got.info.get('tolerance', '?')}, max |difference| {c['maxdiff']:.3g}: "
                                  f"{c['detail']}")
            block_checks(entry, errors)
        if stop is None and "model" in parts:
            work = os.path.join(args.out, f"lc4_tp{output_tag(args)}_model_cases", f"np{np_}")
            m, stop, errs = run_model(args, tree, np_, cfg, rounds, warmup, env, work)
            errors += errs
            if m:
                entry["model"] = m
        if stop:
            note(f"SKIPPED: {stop}")
            skipped.append(stop)
            break
        seconds = time.monotonic() - t0
        entry["seconds"] = round(seconds, 2)
        info = entry["info"]
        print()
        note(f"np {np_}: ff_local {info.get('ff_local', '-')}, T_local "
              f"{info.get('T_local', '-')}; {seconds:.1f} s")
        print(TABLE.format("np", "block", "MPI calls fwd | bwd", "per call", "ring/call",
                           "ring/step", "best", "median", "check"))
        print(TABLE.format("", "", "", "(MB)", "(MB)", "(MB)", "(ms)", "(ms)", ""))
        for line in block_rows(entry):
            print(line)
        if "model" in entry:
            print(model_row(np_, cfg, entry["model"]))
        mem_rows, mem_errors = memory_rows(entry)
        errors += mem_errors
        if mem_rows:
            print(MEM.format("np", "activations", "kept", "per rank (MB): measured, formula",
                             "K. MLP", "K. layer", "Korthikanti (fp16, whole layer)"))
            for line in mem_rows:
                print(line)
        for e in errors:
            print(f"  ERROR: {e}")
        sys.stdout.flush()
        if errors:
            failures.append(f"np {np_}: {len(errors)} check(s) failed")
            entry["failed"] = errors
        results.append(entry)

    if results and any(e["act"] for e in results):
        print_memory_notes(results)
    return trun.finish("lc4_tp", {"mlp": {"T": T, "d": d, "ff": ff}, "model": cfg,
                                  "rounds": rounds, "warmup": warmup,
                                  "model_steps": args.model_steps, "parts": sorted(parts),
                                  "runs": results}, skipped, failures)



def print_memory_notes(results):
    print()
    note("activations: what forward keeps for backward, bytes per rank. mlp_tp: its act "
          "(3 T ff/np floats: g, u, silu(g) u; allocated by the driver, as the contract fixes "
          "it) plus a pre-norm's output and rstd, T(d+1) floats, whole on every rank as in "
          "Megatron without SP (formula). seqpar: libxt's XT_MEM_ACTIVATIONS peak over its "
          "forward and backward, checked to the byte: T_l = T/np tokens of the norm, the MLP's "
          "3 T ff/np unchanged: SP divides only the norm's share")
    note("Korthikanti et al. 2022 (Table 2), bytes per transformer layer in fp16 with dropout "
          "masks, s = T, b = 1, h = d, a = d/64, t = np: TP sbh(10+24/t+5as/(ht)), TP+SP "
          "sbh/t(34+5as/h). 'K. MLP' keeps its MLP and MLP-norm terms only: the norm's input "
          "2sbh, the first linear's input 2sbh, the 4h-wide GeLU input and output 16sbh/t, "
          "the dropout mask sbh: TP 5sbh+16sbh/t, TP+SP 21sbh/t. Here: no dropout, no "
          "attention (its 11sbh+5as^2b are in 'K. layer' only), and fp32: the measured "
          "columns are twice what an fp16 run keeps, so halve them to compare; SwiGLU keeps 3 "
          "ff-wide tensors where GeLU keeps 2 of 4h, and the norm's input is the residual the "
          "caller keeps (not counted), its output is the linear's input (counted once). The "
          "layer's sbh(10 + ...) not divided by t is the two norms' inputs (4sbh), the QKV and "
          "first MLP linear's inputs (4sbh) and the two dropout masks (2sbh)")


# ------------------------------------------------------------------ make test

# Small sizes at np = 3 (uneven token and hidden-unit blocks; KV heads replicated 3 times):
# one launch of the driver and one of model_tp, seconds.
SMALL = ["--lc", "4", "--np", "3", "--rounds", "2", "--warmup", "0", "--model-steps", "1",
         "--mlp", "30,16,40", "--model", "41,12,1,6,1,4,20,1,8"]


def selftest(s):
    """make test: the bench on small sizes, and an mlp_tp it must reject."""
    s.section("bench (make bench LC=4, small sizes)")
    out = fresh("bench4")
    rc, text, took = run_bench(SMALL, out)
    problems = [] if rc == 0 else tail(text)
    run_ = bench_results(os.path.join(out, "lc4_tp_np3.json"), problems,
                         {"calls": {}, "act": {}, "rows": {}, "checks": {}}, first_run=True)
    for block in ("mlp", "seqpar"):
        if run_["checks"].get(block, {}).get("status") != "ok":
            problems.append(f"check {block}: {run_['checks'].get(block)}")
        if not run_["rows"].get(block, {}).get("best", 0) > 0:
            problems.append(f"no time for {block}")
    ar = run_["calls"].get("mlp", {}).get("fwd", {}).get("MPI_Allreduce", {})
    if (ar.get("calls_max"), ar.get("bytes_max")) != (1, 4 * 30 * 16):
        problems.append(f"mlp fwd all-reduce: {ar}")
    sp = run_["act"].get("seqpar", {})
    # 30 tokens in 3 blocks of 10, 40 hidden units in blocks of 14, 13, 13.
    if (sp.get("nbad"), sp.get("min"), sp.get("max")) != (
            0, 4 * (10 * 17 + 3 * 30 * 13), 4 * (10 * 17 + 3 * 30 * 14)):
        problems.append(f"seqpar activations: {sp}")
    m = run_.get("model", {})
    if (m.get("allreduce_nd"), m.get("allreduce_ce"), m.get("allreduce_kv")) != ([6], [2], [2]):
        problems.append(f"decoder all-reduces per step: {m}")
    if not (m.get("loss_maxdiff", 1) <= LOSS_TOL and m.get("best", 0) and m["best"] > 0):
        problems.append(f"decoder loss or time: {m.get('loss_maxdiff')} {m.get('best')}")
    if not re.search(r"^\s+3\s+seqpar \(TP\+SP\)\s+\S+ = 4\(T_l\(d\+1\) \+ 3T f\)", text, re.M):
        problems.append("no memory row: seqpar measured = formula")
    s.record("bench LC=4: mlp_tp and sequence_parallel at np=3 (uneven blocks) against one rank, "
             "their calls and bytes, the activations to the byte; the decoder's all-reduces "
             "(2+4L, 2, 2L on the KV replicas) and losses against np=1, timed", not problems,
             problems, f"({took:.1f} s)")

    # An mlp_tp whose backward all-reduces twice must fail the count; a decoder whose
    # loss is summed over the ranks must fail the loss check.
    tree = mutant_tree("bench4_mutant", "lc4_tp", "mlp_backward_two_allreduces")
    rc, out_, took = run_bench(SMALL + ["--parts", "mlp"], os.path.join(tree, "out"), tree)
    s.record("bench LC=4: an mlp_tp backward with two all-reduces is reported and fails the run",
             rc == 1 and re.search(r"ERROR: np 3: mlp bwd made 2 MPI_Allreduce per call of the "
                                   r"block; expected 1", out_), tail(out_), f"({took:.1f} s)")
    tree = mutant_tree("bench4_mutant_loss", "lc4_tp", "model_loss_allreduced")
    rc, out_, took = run_bench(SMALL + ["--parts", "model"], os.path.join(tree, "out"), tree)
    s.record("bench LC=4: a decoder whose loss is summed over the ranks is reported and fails",
             rc == 1 and re.search(r"ERROR: np 3: the decoder's loss at step 1 is \S+, np = 1's",
                                   out_), tail(out_), f"({took:.1f} s)")


# ------------------------------------------------------------- the page's copy

def page_figures(page):
    """The activation-memory table of docs/lc4_tp.md (The bench), every figure of it exact:
    the measured columns are counts (libxt's XT_MEM_ACTIVATIONS, checked to the byte by the
    bench), the others formulas, all at the default MLP shape. Returns [problem]."""
    T, d, ff = (int(v) for v in MLP.split(","))
    s, h, a = T, d, max(1, d // 64)
    problems = []
    for t in (1, 2, 4):
        act, norm = 4 * 3 * T * ff // t, 4 * T * (d + 1)
        sp = 4 * (T // t * (d + 1) + 3 * T * ff // t)
        mlp = f"{mb(5 * s * h + 16 * s * h / t)} / {mb(21 * s * h / t)}"
        layer = (f"{mb(s * h * (10 + 24 / t + 5 * a * s / (h * t)))} / "
                 f"{mb(s * h / t * (34 + 5 * a * s / h))}")
        row = f"| {t} | {mb(act)} + {mb(norm)} = {mb(act + norm)} | {mb(sp)} | {mlp} | {layer} |"
        if row not in page:
            problems.append(f"docs/lc4_tp.md: the activation table has no row {row!r}")
    return problems + traffic_figures(page)


# A row of the traffic table the page copies: np, block, the calls, per call, ring/call,
# ring/step (MB); the times and the check after them are the machine's.
PAGE_TRAFFIC = re.compile(r"^ +(\d) +(mlp|seqpar|decoder) +(.+?) +(?:RS )?([\d.]+)(?: = 4[Tn]d)? +"
                          r"([\d.]+) +([\d.]+) +[\d.]+ +[\d.]+ +.*$", re.M)


def traffic_figures(page):
    """The traffic table of docs/lc4_tp.md and the prose figures read from it: the calls per
    step (the decoder's 2 + 4L + 2, and 2L on the KV replicas' communicator where np > hkv),
    the bytes per call and on the wire per rank, from the ring formulas at the default
    shapes. Returns [problem]."""
    T, d, _ = (int(v) for v in MLP.split(","))
    cfg = dict(zip(MODEL_KEYS, (int(v) for v in MODEL.split(","))))
    td4, nd4, L = 4 * T * d, 4 * cfg["batch"] * cfg["T"] * cfg["d"], cfg["layers"]
    problems, seen = [], 0
    for n, block, calls, per_call, ring, step in PAGE_TRAFFIC.findall(page):
        n, seen = int(n), seen + 1
        if block == "mlp":
            want = (td4, ring_allreduce(n, td4), 2 * ring_allreduce(n, td4), "1AR | 1AR")
        elif block == "seqpar":
            want = (td4, ring_half(n, td4), 5 * ring_half(n, td4) + ring_allreduce(n, 4 * d),
                    "1AGv 1RS | 1AR 2AGv 1RS")
        else:
            kv = 2 * L if n > cfg["hkv"] else 0
            want = (nd4, ring_allreduce(n, nd4), (2 + 4 * L) * ring_allreduce(n, nd4),
                    f"{2 + 4 * L}+2AR" + (f" +{kv}kv" if kv else "") + " = 2+4L+2" +
                    ("+2L" if kv else ""))
        got = (per_call, ring, step, " ".join(calls.split()))
        if got != (mb(want[0]), mb(want[1]), mb(want[2]), want[3]):
            problems.append(f"docs/lc4_tp.md: np {n} {block} shows calls '{got[3]}', per call "
                            f"{per_call}, ring {ring}, {step} MB per step; the formulas give "
                            f"'{want[3]}', {mb(want[0])}, {mb(want[1])}, {mb(want[2])}")
    if seen != 9:
        problems.append(f"docs/lc4_tp.md: {seen} rows of the traffic table found, not 9 "
                        f"(np 1, 2, 4 x mlp, seqpar, decoder)")
    prose = re.search(r"\(([\d.]+) MB at np = 2, ([\d.]+) MB at np = 4\)", page)
    want = (mb(ring_allreduce(2, td4)), mb(ring_allreduce(4, td4)))
    if not prose or prose.groups() != want:
        problems.append(f"docs/lc4_tp.md: the all-reduce's bytes per rank at np 2 and 4 are "
                        f"quoted as {prose.groups() if prose else None}; the ring gives {want}")
    return problems


# make test's negative control of page_figures: the decoder's bytes per step at np 4 changed.
PAGE_BREAK = ("0.26 = 4nd      0.39      3.93", "0.26 = 4nd      0.39      3.94")
