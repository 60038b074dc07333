"""parallel_3d.c: data x pipeline x tensor parallelism, the capstone: lecture 4's decoder
language model trained for a few AdamW steps on a mesh of pp x dp x tp ranks.

The reference trains the whole model on one process in float64 on the whole batch
(lecture 4's DecoderLM, initial_weights and hyperparameters, by import), from the same
initial weights, on the same tokens. Rank r of the mesh (r = (pp DP + dp) TP + tp: tp
fastest, pp slowest, Megatron-LM's order) holds the blocks of its pipeline stage (nn.block over the pp stages, the first
L % pp stages one block more; the embedding on the first, the final norm and the head on
the last), each tensor cut over its tp group by lecture 4's split rules (model.shard with
np = tp). Each rank writes its shard flat, in xt_tp_stage's order: its gradients after
step 1 ("grads": the whole batch's mean loss's, after the data-parallel all-reduce) and its
parameters after the last step ("params"); the ranks of the last stage write each step's
loss.

Tolerances: lecture 4's model test's (model.py), for the same reasons: the loss within
LOSS_TOLERANCE; each gradient within GRAD_RTOL (1e-4) of its whole tensor's largest
magnitude; each parameter within PARAM_TOLERANCE (1e-4 (1 + |p|)), AdamW with eps = 1e-3
turning a float32 gradient error into an update error of up to lr/eps times it. The
pipeline and the data groups add only float32 sums over micro-batches and replicas of
terms of one scale. Measured (grade.py --margins, seeds 1 to 6, 101, 102): the worst
error, a step-1 gradient's, was 9.1% of its bound (seed 4, the mesh of dp 2, pp 1, tp 2).
Gradients are compared because AdamW hides their scale (its first step is nearly lr
sign(g)): a gradient summed over the replicas instead of averaged moves the parameters
little (AdamW divides its scale out, but for eps), and the gradients by a whole factor.

Checked before the values: the data-parallel replicas of a shard (same pp and tp
coordinates) hold it bit for bit the same after every step, and return the same loss.
Rules, each exact: every rank's stage calls are 1F1B's for its pp coordinate, step after
step; point-to-point messages only on the pp group, M activations and M gradients each way
per step of (seqs / dp / M) T d floats each; collectives only MPI_Allreduce, on the tp group
exactly the stage's (4 per block, the embedding's, the head's and the cross-entropy's 2,
per micro-batch), on the dp group exactly one of the shard's gradients per step and, on the
last stage, one of the loss (either may be left out when dp = 1); nothing on the case's
communicator, the world, the mesh's own communicator or any other.
"""

import numpy as np

import nn
from lectures.lc5_pp.events import StageCall
from spec import Case, amount, disagreement, hinted, test
from training import LOSS_TOLERANCE
from lectures.lc4_tp.model import (GRAD_RTOL, NAMES, PARAM_TOLERANCE, hyperparameters,
                                   initial_weights, model_of, shard)
from lectures.lc4_tp.tp import block
from lectures.lc5_pp import schedule

STEPS = 2

# ((dp, pp, tp), layers, M, sequences per micro-batch, ff): the meshes of 4 ranks first
# (each one dimension fewer, for debugging; pp 4 a deeper pipeline than M), then
# dp = pp = tp = 2. Every model: vocabulary 19
# (uneven over tp = 2), d 8, 4 query heads on 2 KV heads of 2, T 4.
MESHES = [((1, 2, 2), 3, 2, 1, 11), ((2, 2, 1), 2, 3, 1, 12), ((2, 1, 2), 2, 2, 1, 11),
          ((1, 4, 1), 5, 2, 1, 12), ((2, 2, 2), 3, 1, 2, 11), ((2, 2, 2), 2, 3, 1, 13)]


def description(dp, pp, tp):
    """The mesh as the program's xt_mesh_init reads it: pp outermost, then dp, tp innermost
    (Megatron-LM's default order, written fastest first as tp-dp-pp)."""
    return f"pp={pp},dp={dp},tp={tp}"


def mesh(case):
    """(dp, pp, tp) of the case."""
    sizes = dict((k, int(v)) for k, v in (kv.split("=") for kv in case["mesh"].split(",")))
    return sizes["dp"], sizes["pp"], sizes["tp"]


def coords(case, r):
    """Rank r's (dp, pp, tp) coordinates: tp varies fastest, pp slowest."""
    dp, _, tp = mesh(case)
    return r // tp % dp, r // (dp * tp), r % tp


def rank_of(case, dp, pp, tp):
    """The rank at coordinates (dp, pp, tp)."""
    DP, _, TP = mesh(case)
    return (pp * DP + dp) * TP + tp


def stage_blocks(case, p):
    """(first, count) of pipeline stage p's blocks."""
    return block(case["layers"], mesh(case)[1], p)


def tensors(case, r):
    """The names of rank r's tensors, in xt_tp_stage's order."""
    _, pp, _ = mesh(case)
    p = coords(case, r)[1]
    first, count = stage_blocks(case, p)
    names = ["embed"] if p == 0 else []
    names += [f"L{layer}_{n}" for layer in range(first, first + count) for n in NAMES]
    return names + (["final_norm", "head"] if p == pp - 1 else [])


def tp_case(case):
    """The case as lecture 4's shard() reads it: np = tp."""
    return Case(None, mesh(case)[2], case.params)


def flat_shard(case, r, views):
    """Rank r's shard of the whole model's tensors (DecoderLM.views), flat."""
    return np.concatenate([shard(tp_case(case), coords(case, r)[2], name, views[name])
                           for name in tensors(case, r)])


def p3d_label(case):
    p = case.params
    dp, pp, tp = mesh(case)
    return (f"np={case.np} mesh pp={pp} dp={dp} tp={tp} M={p['M']} layers={p['layers']} "
            f"seqs={p['seqs']} T={p['T']} ff={p['ff']} wd={p['wd']}")


def p3d_facets(case):
    dp, pp, tp = mesh(case)
    M = case["M"]
    return {"dp": dp, "pp": pp, "tp": tp,
            "M vs pp": "below" if M < pp else "equal" if M == pp else "above"}


def p3d_cases(rng):
    out = []
    for k, ((dp, pp, tp), layers, M, per_mb, ff) in enumerate(MESHES):
        out.append({"np": dp * pp * tp, "mesh": description(dp, pp, tp), "vocab": 19, "d": 8, "layers": layers,
                    "hq": 4, "hkv": 2, "hd": 2, "ff": ff, "seqs": dp * M * per_mb, "T": 4,
                    "M": M, "steps": STEPS, "lr": "0.01", "wd": "0.1" if k % 2 else "0"})
    return out


# ------------------------------------------------------------- inputs, reference

def p3d_inputs(case, rng):
    w0 = initial_weights(model_of(case), rng)
    per = case["seqs"] * case["T"]
    tokens = rng.integers(0, case["vocab"], case["steps"] * per).astype(np.int32)
    targets = rng.integers(0, case["vocab"], case["steps"] * per).astype(np.int32)
    # The first and last id of every tp rank's vocabulary block appear in every step.
    tp = mesh(case)[2]
    edges = sorted({e for q in range(tp) for e in (block(case["vocab"], tp, q)[0],
                                                   sum(block(case["vocab"], tp, q)) - 1)})
    for s in range(case["steps"]):
        for k, e in enumerate(edges[:per]):
            (tokens if k % 2 else targets)[s * per + k] = e
    return {"w0": w0, "tokens": tokens, "targets": targets}


_TRAINED = {}


def tie(case, g):
    """A tied model's gradient (case "tied"): the embedding's and the head's summed, the sum
    given to both, as one matrix used twice (E and E^T)."""
    if not case.params.get("tied"):
        return g
    views = model_of(case).views(g)
    total = views["embed"] + views["head"].T
    views["embed"][...] = total
    views["head"][...] = total.T
    return g


def trained(case, inputs):
    """(losses per step, the whole gradient of step 1, the whole parameters after the last
    step, the embedding after each step), float64: one process, the whole batch, AdamW; a
    tied model's (case "tied") with its head the embedding's transpose. Kept per inputs."""
    key = id(inputs)
    if key in _TRAINED and _TRAINED[key][0] is inputs:
        return _TRAINED[key][1]
    m = model_of(case)
    hp = hyperparameters(case)
    w = inputs["w0"].astype(np.float64)
    mom, vel = np.zeros_like(w), np.zeros_like(w)
    per = case["seqs"] * case["T"]
    losses, first, embeds = [], None, []
    for s in range(case["steps"]):
        tok = inputs["tokens"][s * per:(s + 1) * per]
        tgt = inputs["targets"][s * per:(s + 1) * per]
        loss, g = m.loss_and_grads(w, tok, tgt, case["seqs"], case["T"])
        g = tie(case, g)
        losses.append(loss)
        first = g if first is None else first
        w, mom, vel = nn.adam_update(w, g, mom, vel, s + 1, hp)
        embeds.append(m.views(w)["embed"].copy())
    if len(_TRAINED) > 16:
        _TRAINED.clear()
    _TRAINED[key] = (inputs, (losses, first, w, embeds))
    return _TRAINED[key][1]


def p3d_reference(case, inputs):
    losses, g1, w, _ = trained(case, inputs)
    m = model_of(case)
    grads, params = m.views(g1), m.views(w)
    _, pp, _ = mesh(case)
    out = []
    for r in range(case.np):
        mine = {}
        if coords(case, r)[1] == pp - 1:
            for s, loss in enumerate(losses):
                mine[f"step{s + 1}_loss"] = np.array([loss])
        mine["grads"] = flat_shard(case, r, grads)
        mine["params"] = flat_shard(case, r, params)
        out.append(mine)
    return out


def p3d_tolerance(case, inputs, name, rank):
    """The loss: LOSS_TOLERANCE; the parameters: PARAM_TOLERANCE; a gradient: GRAD_RTOL of
    its whole tensor's largest magnitude (at least 1e-3), element by element along the
    rank's flat shard."""
    if name.endswith("_loss"):
        return LOSS_TOLERANCE
    if name == "params":
        return PARAM_TOLERANCE
    _, g1, _, _ = trained(case, inputs)
    grads = model_of(case).views(g1)
    bound = []
    for t in tensors(case, rank):
        n = shard(tp_case(case), coords(case, rank)[2], t, grads[t]).size
        bound.append(np.full(n, GRAD_RTOL * max(1e-3, float(np.abs(grads[t]).max()))))
    return np.concatenate(bound)


def p3d_locator(case, name, index, rank):
    """'L1_wq[3, 5] of the whole 8 x 8 tensor' for an index into a rank's flat shard."""
    if name not in ("grads", "params"):
        return None
    at = index
    for t in tensors(case, rank):
        shape = shape_of(case, t)
        where = shard(tp_case(case), coords(case, rank)[2], t,
                      np.arange(int(np.prod(shape))).reshape(shape))
        if at < where.size:
            spot = np.unravel_index(int(where[at]), shape)
            size = " x ".join(map(str, shape))
            return f"{t}[{', '.join(map(str, spot))}] of the whole {size} tensor"
        at -= where.size
    return None


# -------------------------------------------------------------- check and rules

def replicas_agree(case, inputs, outs):
    """The data-parallel replicas of a shard (same pp and tp coordinates) hold it bit for
    bit the same, and return the same loss."""
    home = [rank_of(case, 0, c[1], c[2]) for c in (coords(case, r) for r in range(case.np))]
    pairs = [(r, home[r]) for r in range(case.np) if home[r] != r]
    names = [k for k in outs[0] if k.endswith("_loss")] + ["grads", "params"]
    names += [k for k in outs[-1] if k.endswith("_loss") and k not in names]
    found = disagreement(outs, names, pairs)
    if not found:
        return []
    text, r = found
    q = home[r]
    return [(r, f"{text}: ranks {q} and {r} are data-parallel replicas of one shard (dp "
                f"{coords(case, q)[0]} and {coords(case, r)[0]}); after the all-reduce of the "
                f"gradients over the dp group they take the same AdamW step from the same "
                f"gradients and stay bit for bit the same")]


def where(e):
    """The communicator an event went on, as a report names it."""
    if e.comm == "other" and e.group:
        return "the mesh's own communicator" if e.group == "mesh" else f"the {e.group} group"
    return {"case": "the case's communicator", "world": "MPI_COMM_WORLD",
            "self": "MPI_COMM_SELF"}.get(e.comm, "a communicator of its own")


def group_of(e):
    return e.group if e.comm == "other" else ""


def explain(case, r):
    dp, pp, tp = mesh(case)
    p = coords(case, r)[1]
    w = schedule.warmup_1f1b(pp, case["M"], p)
    return (f"rank {r} is pp stage {p} of {pp}: a warm-up of min(pp-p-1, M) = {w} "
            f"forward{'s' if w != 1 else ''}, then one forward and one backward at a time, "
            f"every step")


def wanted(case, r):
    _, pp, _ = mesh(case)
    return schedule.one_f_one_b(pp, case["M"], coords(case, r)[1]) * case["steps"]


def timelines(case, records, r):
    """What rank r's pp group ran in the first step, and 1F1B's, replayed in unit time."""
    dp, pp, tp = mesh(case)
    c = coords(case, r)
    ranks = [rank_of(case, c[0], p, c[2]) for p in range(pp)]
    per_step = 2 * case["M"]
    got = {q: records[q].stages[:per_step] for q in ranks}
    want = {}
    for q in ranks:
        first, count = stage_blocks(case, coords(case, q)[1])
        want[q] = [StageCall(op.op, op.mb, op.chunk, 0.0, 0.0, first, count)
                   for op in schedule.one_f_one_b(pp, case["M"], coords(case, q)[1])]
    lines = []
    rp = schedule.replay(got, case["layers"])
    if not rp.stuck:
        lines += schedule.text_timeline(rp, ranks, "what its pp group ran (step 1):").splitlines()
    lines += schedule.text_timeline(schedule.replay(want, case["layers"]), ranks,
                                    "1F1B:").splitlines()
    return "\n".join("| " + ln for ln in lines)


def one_f_one_b_order(case, inputs, records):
    """Every rank's stage calls are 1F1B's for its pp coordinate, step after step."""
    for r, rec in enumerate(records):
        got, want = schedule.ops_of(rec.stages), wanted(case, r)
        if got == want:
            continue
        i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                 min(len(got), len(want)))
        per = 2 * case["M"]
        what = (f"call {i + 1} (step {i // per + 1}) is {got[i]}, 1F1B has {want[i]}"
                if i < min(len(got), len(want)) else
                f"it made {len(got)} calls in {case['steps']} steps, 1F1B has {len(want)}")
        return [(r, f"rank {r}'s stage calls are not 1F1B's: {what} ({explain(case, r)}). "
                    f"Rank {r} ran {' '.join(map(str, got[:i + 3]))}"
                    f"{' ...' if len(got) > i + 3 else ''}\n" + timelines(case, records, r))]
    return []


def messages_on_pp(case, inputs, records):
    """Point-to-point messages only on the pp group: to and from each neighbouring stage,
    per step M of n d floats each way."""
    dp, pp, tp = mesh(case)
    nbytes = 4 * case["seqs"] // dp // case["M"] * case["T"] * case["d"]
    for r, rec in enumerate(records):
        p2p = [e for e in rec.events if e.dir in ("S", "R")]
        off = [e for e in p2p if group_of(e) != "pp"]
        if off:
            e = off[0]
            return [(r, f"rank {r} made {e.fn} ({'to' if e.dir == 'S' else 'from'} rank "
                        f"{e.peer}) on {where(e)}: activations and their gradients go point "
                        f"to point on the pp group only (xt_mesh_group(mesh, \"pp\"), whose "
                        f"rank is the pp coordinate)")]
        want = {}
        p = coords(case, r)[1]
        for peer in (p - 1, p + 1):
            if 0 <= peer < pp:
                for d in ("S", "R"):
                    want[(d, peer, nbytes)] = case["M"] * case["steps"]
        got = {}
        for e in p2p:
            got[(e.dir, e.peer, e.bytes)] = got.get((e.dir, e.peer, e.bytes), 0) + 1
        for key in sorted(set(got) | set(want)):
            if got.get(key, 0) != want.get(key, 0):
                d, peer, size = key
                return [(r, f"rank {r} (pp stage {p}) {'sent' if d == 'S' else 'received'} "
                            f"{amount(got.get(key, 0), ' messages')} of {size} B "
                            f"{'to' if d == 'S' else 'from'} pp rank {peer} in "
                            f"{case['steps']} steps, expected {want.get(key, 0)}: per step "
                            f"each micro-batch's activations ((seqs/dp/M) T d = {nbytes // 4} "
                            f"floats) to the next stage and its gradient back")]
    return []


def tp_allreduces(case, r):
    """The stage's all-reduces in the case, as sorted byte sizes."""
    dp, pp, tp = mesh(case)
    p = coords(case, r)[1]
    n = case["seqs"] // dp // case["M"] * case["T"]
    first, count = stage_blocks(case, p)
    per_mb = [4 * n * case["d"]] * (4 * count + (p == 0) + (p == pp - 1))
    per_mb += [4 * n, 8 * n] if p == pp - 1 else []
    return sorted(per_mb * case["M"] * case["steps"])


def dp_allreduces(case, r):
    """The data group's all-reduces in the case, as sorted byte sizes."""
    _, pp, _ = mesh(case)
    nparams = sum(shard(tp_case(case), coords(case, r)[2], t,
                        np.zeros(shape_of(case, t))).size for t in tensors(case, r))
    per_step = [4 * nparams] + ([4] if coords(case, r)[1] == pp - 1 else [])
    return sorted(per_step * case["steps"])


def shape_of(case, name):
    views = model_of(case).views(np.zeros(model_of(case).nparams))
    return views[name].shape


def collectives_on_groups(case, inputs, records):
    """Collectives only MPI_Allreduce: on the tp group exactly the stage's; on the dp
    group exactly one of the shard's gradients per step and on the last stage one of the
    loss (at dp = 1 either may be left out)."""
    dp, pp, tp = mesh(case)
    for r, rec in enumerate(records):
        coll = [e for e in rec.events if e.dir == "C"]
        off = [e for e in coll if group_of(e) not in ("dp", "tp") or e.fn != "MPI_Allreduce"]
        if off:
            e = off[0]
            return [(r, f"rank {r} made {e.fn} on {where(e)}: the step's collectives are "
                        f"MPI_Allreduce on the dp group (the gradients, the loss) and the "
                        f"stage's own on the tp group, nothing else")]
        for name, want, why in (
                ("tp", tp_allreduces(case, r), "the stage's own: per micro-batch 4 per block "
                 "of n d floats, the embedding's on the first stage, the head's and the "
                 "cross-entropy's 2 on the last"),
                ("dp", dp_allreduces(case, r), "per step one of the stage's gradients (every "
                 "float of its shard at once) and, on the last stage, one of the loss")):
            got = sorted(e.bytes for e in coll if e.group == name)
            # At dp = 1 the data group is this rank alone: its all-reduces may be left out.
            if got == want or (name == "dp" and dp == 1 and
                               all(got.count(b) in (0, want.count(b)) for b in set(got))):
                continue
            def show(sizes):
                kinds = sorted(set(sizes))
                return ", ".join(f"{sizes.count(b)} x {b // 4}" for b in kinds) or "none"
            return [(r, f"rank {r} made {amount(len(got), ' all-reduces')} on the {name} "
                        f"group in {case['steps']} steps (floats: {show(got)}), expected "
                        f"{len(want)} ({show(want)}): {why}")]
    return []


ORDER = hinted(one_f_one_b_order,
               "cause: the pipeline's order is not 1F1B's: on pp stage p a warm-up of "
               "min(pp-p-1, M) forwards, then one forward and one backward at a time, then "
               "the backwards left; every step the same")
ON_PP = hinted(messages_on_pp,
               "cause: point to point, a step sends each micro-batch's activations to the next "
               "pp stage and its gradient back, on the pp group (xt_mesh_group(mesh, \"pp\"), "
               "peers named by the pp coordinate), and nothing else: the mesh's own "
               "communicator, the case's or the world number the ranks differently")
ON_GROUPS = hinted(collectives_on_groups,
                   "cause: a step's own collectives are one all-reduce of the stage's gradients "
                   "on the dp group (xt_mesh_group(mesh, \"dp\")) and, on the last stage, one "
                   "of the loss; the stage does its tensor parallelism's on the tp group it was "
                   "built with; nothing else, on no other communicator")


@test("parallel_3d", points=20, inputs=p3d_inputs, reference=p3d_reference,
      tolerance=p3d_tolerance, label=p3d_label, facets=p3d_facets, locate=p3d_locator,
      check=hinted(replicas_agree, "cause: replicas of a shard drifted apart: every one must "
                                   "take its AdamW step from the gradients all-reduced over "
                                   "the dp group"),
      check_first=True, rules=[ORDER, ON_PP, ON_GROUPS],
      hint="zero the stage's grads; run 1F1B over the pp group on this dp share's M "
           "micro-batches (loss scale 1/M); all-reduce the grads over the dp group and "
           "divide by dp; xt_tp_stage_adam; the loss: mean over M, all-reduced over dp / dp")
def parallel_3d_step(rng):
    return p3d_cases(rng)
