"""Lecture 3: zero_checkpoint, ZeRO-1 state saved at one world size and loaded at another.

One case runs on np = max(save_np, load_np) ranks. Phase 1: case ranks
0 .. save_np-1 broadcast rank 0's weights w0, train steps1 ZeRO-1 AdamW
steps (zero1_train_step, the lecture's kit) and call zero_checkpoint_save; then
everything is freed. Phase 2: load_np ranks in a rotated order (new rank i
is case rank (i + 1) % np) set up a fresh ZeRO-1 state, call
zero_checkpoint_load and train the remaining steps. Every rank gets every
step's whole global batch (x: steps x B x din, y) and takes its rows in the
current world's rank order, B divisible by both world sizes.

The reference is uninterrupted single-process full-batch AdamW in float64
(nn.Mlp.adam_steps) from rank 0's w0; each phase's ranks write the full
parameters after each of their steps. First of all, the grader reads the
checkpoint the saving ranks left in the case's scratch directory and holds
it against the documented layout (docs/lc3_zero.md, "The files"), byte for
byte: a save and a load that agree with each other on another layout would
pass everything else, and write files that no other reader can use (the
saved parameters are the saving rank's step<steps1> outputs). Then a check
compares what the loader produced with what was saved, bit for bit: the
saving ranks write their moments (saved_m, saved_v) just before saving, the
loading ranks their new shard of them (loaded_m, loaded_v), the Adam step
and the full parameters right after loading. NumPy re-cuts the saved moments for the new
layout and names the first element that differs and the old rank that saved
it. (The ranks of a phase need no identity check: each step of libxt's
zero1_train_step ends with an all-gather of the parameters, so they agree
whatever the loader did; what it did shows in the loaded state and the values.)

Numerics. AdamW with lr 0.01, betas 0.9 and 0.999, weight decay 0.01 and
eps = 1e-3, GELU models. Adam divides by sqrt(v) + eps, so a weight whose
gradient is near eps moves by an amount that float32 rounding of that
gradient changes up to lr / (4 eps) times over: with eps = 1e-8 that factor
is 2.5e5, and float32 training missed the float64 reference by up to
1.4e-3 (lr / 7; 2 runs of 60 beyond 5e-5); with eps = 1e-3 it is 2.5. ReLU
is left out for a like reason: a pre-activation within float32 rounding of
0 (2.7e-7, seen once in 120 runs) switches a unit on in one precision and
off in the other, an lr-sized difference. Tolerance: |got - expected| <= 5e-5 + 2e-5 |expected| per
weight. Measured over 260 seeds of these cases: at most 6.1e-6 absolute
error, 0.08 of the tolerance; the bugs it is there for (a wrong step, lost
moments) move weights by lr-sized amounts, 1e-3 or more.

The one rule: the optimizer state travels through the files, not through
MPI. Over the case, a rank may receive rank 0's weights (the broadcast in
main, 4 nparams B, phase 1) and one all-gather of the parameters after
loading (4 np shard B, phase 2), plus 64 B of metadata (a loader may
broadcast the saved world size). Moments sent over MPI, to a loader or to a
rank 0 that writes every file, exceed that. (MPI-IO is not counted: a
single shared file written with MPI_File_write_at_all is sharded I/O too.)

Case order: np = 2 first (two groups run at once, which is what the
per-group directories are for), then 4, then 3 (spec.NP_ORDER).

The checkpoint directory of a case is libxt's xt_case_scratch_dir: inside
the case's directory of the grader's launch, one per group of ranks, so it
goes with the rest of the launch's files when the grader next runs.

load_refuses_damage: the same program, a few cases in which the lecture's
zero_checkpoint_damage (the kit's, called by run_case between the save and
the load; the exercise file reaches files only through MPI-IO) cuts a
shard short, gives it another save's step or zeroes meta.bin's magic. The
loader must stop the run with an error raised in zero_checkpoint.c that
names the file; each case, ending its launch, has one of its own.
"""

import math
import os

import numpy as np

from spec import bit_differences, Relative, test
from training import model_of

LR = "0.01"
ADAM = {"beta1": "0.9", "beta2": "0.999", "eps": "1e-3", "wd": "0.01"}
SLACK = 64  # bytes of metadata a loader may share (the saved world size, the step)

# (dims, act, loss): classification and regression, and a 4-parameter model whose
# last shard is empty at np = 3 (shard 2: [0,2) [2,4) [4,4)).
MODELS = [("6,16,16,3", "gelu", "ce"), ("5,12,4", "gelu", "mse"), ("7,9,5", "gelu", "ce"),
          ("3,1", "gelu", "mse")]

# (save_np, load_np, model, steps1, steps2, batch multiple); the global batch is
# lcm(save_np, load_np) times the multiple.
PLANS = [(4, 3, 0, 3, 2, 1), (2, 4, 1, 2, 2, 1), (1, 4, 2, 2, 3, 2), (4, 1, 0, 2, 2, 1),
         (3, 2, 1, 3, 2, 2), (2, 3, 2, 2, 2, 1), (3, 3, 0, 2, 2, 1), (2, 3, 3, 2, 2, 2),
         (3, 2, 3, 2, 2, 1), (2, 1, 1, 2, 2, 2), (1, 2, 0, 2, 2, 1)]


def shards(n, world):
    """[(lo, count)] of every rank of a world: shard = ceil(n / world)."""
    shard = -(-n // world)
    return [(r * shard, max(0, min(shard, n - r * shard))) for r in range(world)]


def phase2_rank(case, r):
    """The new rank of case rank r after the restart, or None if it sits out."""
    i = (r - 1) % case.np
    return i if i < case["load_np"] else None


def label(case):
    p = case.params
    return (f"np={case.np} save_np={p['save_np']} load_np={p['load_np']}: {p['dims']} "
            f"{p['act']} {p['loss']} batch={p['batch']} steps1={p['steps1']} "
            f"steps={p['steps']}")


def inputs(case, rng):
    """Every step's whole global batch on every rank, and each rank's own w0."""
    m = model_of(case)
    steps, rows = case["steps"], case["batch"]
    din, dout = m.dims[0], m.dims[-1]
    x = rng.uniform(-1, 1, (steps, rows, din)).astype(np.float32)
    if m.loss == "ce":
        y = rng.integers(0, dout, (steps, rows)).astype(np.int32)
    else:
        y = rng.normal(0, 1, (steps, rows, dout)).astype(np.float32)
    w0 = [rng.normal(0, 0.5, m.nparams).astype(np.float32) for _ in range(case.np)]
    return {"x": x, "y": y, "w0": w0}


def reference(case, inp):
    """Uninterrupted full-batch AdamW; each rank the steps of the phases it takes part in."""
    m = model_of(case)
    hp = {"lr": LR, **ADAM}
    weights = m.adam_steps(inp["w0"][0], [(inp["x"][s], inp["y"][s])
                                          for s in range(case["steps"])], hp)
    out = []
    for r in range(case.np):
        mine = {}
        for s, w in enumerate(weights):
            in_phase = r < case["save_np"] if s < case["steps1"] else \
                phase2_rank(case, r) is not None
            if in_phase:
                for name, off, shape in m.tensors:
                    mine[f"step{s + 1}_{name}"] = w[off:off + int(np.prod(shape))]
        out.append(mine)
    return out


def tolerance(case, inp, name, rank):
    return Relative(5e-5, 2e-5)


# ------------------------------------------------------------------- checks


def first_difference(got, want):
    """Index of the first element whose bits differ (-1: the shapes differ), or None."""
    if got.shape != want.shape:
        return -1
    diff = bit_differences(got, want)
    return diff[0] if diff else None


def loaded_state(case, outs, m):
    """The loader's step, moments and parameters against what the saving ranks held."""
    a, b, s1 = case["save_np"], case["load_np"], case["steps1"]
    n = m.nparams
    old, new = shards(n, a), shards(n, b)
    saved = {}
    for key in ("m", "v"):
        pieces = []
        for q, (lo, count) in enumerate(old):
            got = outs[q].get(f"saved_{key}")
            if got is None or got.size != count:
                return [(q, f"case rank {q} wrote no saved_{key} of {count} values (the program's "
                            f"main writes it before saving)")]
            pieces.append(got)
        saved[key] = np.concatenate(pieces)
    owner = np.repeat(np.arange(a), [c for _, c in old])  # the old rank of every index

    for r in range(case.np):
        i = phase2_rank(case, r)
        if i is None:
            continue
        who = f"case rank {r} (new rank {i} of {b})"
        step = outs[r].get("loaded_step")
        if step is not None and step.size == 1 and int(step[0]) != s1:
            return [(r, f"{who} resumes at Adam step {int(step[0])}, expected {s1}: the step "
                        f"count is part of the optimizer state (bias correction 1 - beta^t "
                        f"depends on it); save it and set z->step when loading")]
        lo, count = new[i]
        for key in ("m", "v"):
            got = outs[r].get(f"loaded_{key}")
            want = saved[key][lo:lo + count]
            if got is None or got.size != count:
                continue
            j = first_difference(got, want)
            if j is not None:
                g = lo + j
                return [(r, f"{who} loaded {key}[{j}] (global index {g}) = {got[j]!r}, but old "
                            f"rank {owner[g]} of {a} saved {want[j]!r} there; its new shard is "
                            f"[{lo}, {lo + count}), old shards are {-(-n // a)} wide")]
        ref = 0  # the saved model: case rank 0's parameters after step s1
        for name, _, _ in m.tensors:
            want = outs[ref].get(f"step{s1}_{name}")
            got = outs[r].get(f"loaded_{name}")
            if want is None or got is None:
                continue
            j = first_difference(got, want)
            if j is not None:
                return [(r, f"right after loading, {who}'s {name}[{j}] is {got[j]!r} but the "
                            f"saved model's is {want[j]!r}: every rank needs the full "
                            f"parameters (read its new shard, then all-gather)")]
    return []


def check(case, inp, outs):
    m = model_of(case)
    return loaded_state(case, outs, m)


# ------------------------------------------------------------------- the files

MAGIC = 0x3154504B43545858  # "XXTCKPT1" read as a little-endian int64
FIELDS = ("magic", "nparams", "np", "r", "lo", "count", "step", "zero")
# (block, its element, where it starts)
BLOCKS = (("parameters", "w", "64"), ("m", "m", "64 + 4 count"), ("v", "v", "64 + 8 count"))
HEADER = "the documented header is 8 int64: magic, nparams, np, r, lo, count, step, 0"
LAYOUT = "the documented layout is the header, then the parameters, m, v"


def saved_params(case, outs, q, m):
    """The full parameters case rank q held when it saved (its last phase-1 step), flat."""
    flat = np.zeros(m.nparams, np.float32)
    for name, off, shape in m.tensors:
        got = outs[q].get(f"step{case['steps1']}_{name}")
        size = int(np.prod(shape))
        if got is None or got.size != size:
            return None
        flat[off:off + size] = got.reshape(-1)
    return flat


def header_problem(fname, data, want):
    """The first of the 8 header fields that is not what the layout says, or None."""
    got = [int(x) for x in np.frombuffer(data[:64], "<i8")]
    if got == list(want):
        return None
    i = next(i for i in range(8) if got[i] != want[i])
    show = (lambda x: f"{x & (2**64 - 1):#018x}") if i == 0 else str
    order = " (the right values, in another order)" if sorted(got) == sorted(want) else ""
    return (f"{fname}: bytes {8 * i}..{8 * i + 7} ({FIELDS[i]}) hold {show(got[i])}, expected "
            f"{show(want[i])}{order}: {HEADER}")


def read_file(d, fname):
    try:
        with open(os.path.join(d, fname), "rb") as f:
            return f.read()
    except OSError:
        return None


def files_on_disk(case, inp, outs, d):
    """The checkpoint the saving ranks left in d against the documented layout, byte for
    byte: meta.bin, then every shard-<r>.bin, its header and its three blocks."""
    m = model_of(case)
    n, a, s1 = m.nparams, case["save_np"], case["steps1"]
    place = os.path.join(os.path.basename(os.path.dirname(d)), os.path.basename(d))
    data = read_file(d, "meta.bin")
    if data is None:
        return [(0, f"meta.bin: no such file in the case's checkpoint directory ({place}): rank "
                    f"0 writes it once every shard is on disk")]
    if len(data) != 64:
        return [(0, f"meta.bin is {len(data)} B, expected 64 B: the header and nothing after "
                    f"it")]
    bad = header_problem("meta.bin", data, (MAGIC, n, a, -1, 0, n, s1, 0))
    if bad:
        return [(0, bad)]
    for q, (lo, count) in enumerate(shards(n, a)):
        fname = f"shard-{q}.bin"
        params = saved_params(case, outs, q, m)
        want = [params[lo:lo + count] if params is not None else None,
                outs[q].get("saved_m"), outs[q].get("saved_v")]
        if any(w is None or w.size != count for w in want):
            return []  # the loaded state's check names what is missing
        data = read_file(d, fname)
        if data is None:
            return [(q, f"{fname}: no such file in the case's checkpoint directory ({place}): "
                        f"every rank of the saving world writes its own, even one that holds no "
                        f"parameters")]
        size = 64 + 12 * count
        if len(data) >= 64:
            bad = header_problem(fname, data, (MAGIC, n, a, q, lo, count, s1, 0))
            if bad:
                return [(q, bad)]
        if len(data) != size:
            k, part = divmod(len(data) - 64, 4 * count) if count else (0, 1)
            held = LAYOUT if part or k < 0 else (
                f"after the header it holds {k} block{'s' * (k != 1)} of count float32, the "
                f"layout 3: the parameters, m, v")
            return [(q, f"{fname} is {len(data)} B, expected {size} B = 64 + 12 count (count = "
                        f"{count}): {held}")]
        for k, (what, sym, at) in enumerate(BLOCKS):
            start = 64 + 4 * k * count
            got = np.frombuffer(data[start:start + 4 * count], "<f4")
            diff = bit_differences(got, want[k])
            if diff is None:
                continue
            where = (f"{fname}: bytes {start}..{start + 4 * count - 1} ({at} .., the {what} of "
                     f"[{lo}, {lo + count}))")
            other = [BLOCKS[j][0] for j in range(3)
                     if j != k and bit_differences(got, want[j]) is None]
            if other:
                return [(q, f"{where} hold the {other[0]} that case rank {q} saved: {LAYOUT}")]
            j = diff[0]
            return [(q, f"{where}: {sym}[{lo + j}] at byte {start + 4 * j} is {str(got[j])}, "
                        f"but case rank {q} saved {str(want[k][j])} ({diff[1]} of {count} "
                        f"differ): {LAYOUT}")]
    return []


# ------------------------------------------------------------------- rules


def moments_through_files(case, inp, records):
    """Each rank receives at most the initial broadcast and one all-gather of parameters."""
    n = model_of(case).nparams
    b = case["load_np"]
    gather = 4 * b * -(-n // b)  # b blocks of one padded shard
    out = []
    for r, rec in enumerate(records):
        allowed, parts = SLACK, []
        if 0 < r < case["save_np"]:
            allowed += 4 * n
            parts.append(f"rank 0's weights, {4 * n} B")
        if phase2_rank(case, r) is not None:
            allowed += gather
            parts.append(f"one all-gather of the parameters, {gather} B")
        parts.append(f"{SLACK} B of metadata")
        got = sum(st.bytes_recv for st in rec.calls.values())
        if got > allowed:
            out.append((r, f"case rank {r} received {got} B through MPI, at most {allowed} B "
                           f"expected ({'; '.join(parts)}): the optimizer state moves through "
                           f"the files only, every rank writing its own shard and reading its "
                           f"own new one"))
    return out[:1]


@test("zero_checkpoint", points=15,
      inputs=inputs, reference=reference, tolerance=tolerance, label=label,
      files=files_on_disk, check=check, check_first=True, rules=[moments_through_files],
      hint="each rank writes its own shard (parameters, m, v, step); a loader at another world "
           "size reads, for its new shard [lo, lo + count), the overlapping slice of every old "
           "file, sets the step, and all-gathers the parameters")
def zero_checkpoint(rng):
    """One case per plan of PLANS, on max(save_np, load_np) ranks."""
    out = []
    for a, b, model, s1, s2, mult in PLANS:
        dims, act, loss = MODELS[model]
        out.append({"np": max(a, b), "save_np": a, "load_np": b, "dims": dims, "act": act,
                    "loss": loss, "steps": s1 + s2, "steps1": s1,
                    "batch": a * b // math.gcd(a, b) * mult, "lr": LR, **ADAM})
    return out


# ------------------------------------------------------------ damaged checkpoints

# (damage, save_np, load_np, model): the kit's zero_checkpoint_damage does it
# between the save and the load. np = 2 runs first, so the truncation is the
# case a loader that trusts its files is reported on.
DAMAGES = [("truncate", 2, 1, 1), ("step", 2, 3, 2), ("magic", 3, 2, 0)]
DAMAGED = {"truncate": "shard-1.bin", "step": "shard-1.bin", "magic": "meta.bin"}


def damage_label(case):
    p = case.params
    return (f"np={case.np} save_np={p['save_np']} load_np={p['load_np']} "
            f"damage={p['damage']}: {p['dims']} {p['act']} {p['loss']} batch={p['batch']}")


def damage(case, d):
    """What the case did to the checkpoint, with its numbers."""
    n, s1 = model_of(case).nparams, case["steps1"]
    _, count = shards(n, case["save_np"])[1]
    kind = case["damage"]
    if kind == "truncate":
        try:
            size = os.path.getsize(os.path.join(d, "shard-1.bin"))
        except OSError:
            size = 64 + 4 * (2 * count + count // 2)
        return (f"shard-1.bin truncated to {size} B inside its v block ({64 + 12 * count} B "
                f"expected)")
    if kind == "step":
        return f"shard-1.bin of another save (its header says step {s1 + 1}, meta.bin's {s1})"
    return "meta.bin with its magic zeroed (not XXTCKPT1: not a checkpoint file)"


def refusal(case, inp, error, d):
    what, name = damage(case, d), DAMAGED[case["damage"]]
    if error is None:
        return (f"the loader accepted {what} and went on: a loader must refuse a damaged "
                f"checkpoint")
    if name not in error:
        return (f"the loader refused {what}, but its message does not name {name}: "
                f"\"{error}\"; say which file is damaged, and how")
    return None


@test("zero_checkpoint", points=5, inputs=inputs, reference=reference, label=damage_label,
      refusal=refusal,
      hint="check every header against the documented values (the magic; a shard's rank, "
           "np, lo, count and step against meta.bin) and that every read got all it asked "
           "for; stop with xt_die or XT_CHECK naming the file")
def load_refuses_damage(rng):
    """A checkpoint damaged between the save and the load, one launch per case: the
    loader must stop with an error raised in zero_checkpoint.c that names the file."""
    out = []
    for kind, a, b, model in DAMAGES:
        dims, act, loss = MODELS[model]
        out.append({"np": max(a, b), "save_np": a, "load_np": b, "dims": dims, "act": act,
                    "loss": loss, "steps": 2, "steps1": 1, "batch": a * b // math.gcd(a, b),
                    "lr": LR, **ADAM, "damage": kind})
    return out
