"""tp_dropout.c: dropout under tensor parallelism, Megatron's model-parallel random state.

Each case runs on a dp x tp mesh of np ranks (tensor ranks consecutive; the driver makes
the tensor group past libxt's counters and names it "tp"). The expected masks come from the
exercise's stated seeds (replicated: seed + 10 dp_rank; split: that + 2718 + tp_rank) and
libxt's generator written again here in whole-array form (splitmix64: draw i of a seed
mixes seed + (i+1) 0x9E3779B97F4A7C15), checked against grader/nn.py's Rng when this module
loads. The layer's reference is the whole MLP in float64 (mlp_forward, mlp_backward: the
backward checked against central differences when this module loads), its hidden mask the
tensor ranks' split masks side by side, its output mask the data rank's replicated one;
every rank's weight gradients are the blocks of the whole ones by the split rule.

Before the values a check says what the masks' relations are, where a wrong seed shows:
the replicated mask the same on every tensor rank, the split one different on each, both
different across data ranks and from one step to the next (skipped at p = 0 and for masks
under 32 elements, where two independent masks may agree by chance).

Tolerance: the masks within 1e-6 of 1/(1-p) or exactly 0; y, dx and the weight gradients
within 2e-5 of the tensor's scale, as the MLP's (mlp.py).
"""

import numpy as np

import checked
import nn
from spec import OfScale, Relative, hinted, test
from lectures.lc4_tp.tp import (block, collectives_exactly, columns, no_communication, rows_of,
                                shape_locator)

GOLDEN = 0x9E3779B97F4A7C15
SPLIT_OFFSET = 2718  # Megatron's tensor-parallel seed offset
DP_STRIDE = 10  # data_parallel_random_init's 10 dp_rank

# (dp, tp): one rank; tensor ranks only; data ranks only; both, up to the 2 x 4 mesh.
MESHES = [(1, 1), (1, 2), (2, 1), (1, 3), (1, 4), (2, 2), (2, 4)]
# (rows, d, ff): masks of 32 elements and more (relations checked), a tiny layer, and ff below
# tp (a rank with no hidden unit, which still takes part in both all-reduces).
SHAPES = [(4, 8, 32), (3, 12, 50), (1, 6, 7), (5, 16, 3)]
PS = (0.25, 0.5, 0.125, 0.0)
RELATED = 32  # masks shorter than this are not compared with each other
RTOL = 2e-5


def uniforms(seed, start, n):
    """Draws start .. start+n-1 of xt_rng_uniform(g, 0, 1) for g = xt_rng_seed(seed), as
    float32: the top 24 bits of each splitmix64 output over 2^24."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed % 2 ** 64) + \
            np.arange(start + 1, start + n + 1, dtype=np.uint64) * np.uint64(GOLDEN)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)


def _check_uniforms():
    """uniforms against nn.Rng, one draw at a time, at import."""
    for seed in (0, 1234, 2 ** 63 + 5):
        g = nn.Rng(seed)
        want = np.array([g.uniform(0.0, 1.0) for _ in range(7)], dtype=np.float32)
        assert np.array_equal(uniforms(seed, 0, 7), want), "uniforms() is not xt_rng_uniform"
        assert np.array_equal(uniforms(seed, 3, 4), want[3:]), "uniforms() is not xt_rng_uniform"


checked.once(_check_uniforms)


def seeds(case, r):
    """(replicated seed, split seed) of rank r: Megatron's, data_parallel_random_init."""
    dp_rank, tp_rank = divmod(r, case["tp"])
    base = case["seed"] + DP_STRIDE * dp_rank
    return base, base + SPLIT_OFFSET + tp_rank


def scales(seed, start, n, p):
    """dropout_scales' n scales from draw `start` of seed: 1/(1-p) where the draw >= p."""
    p = np.float32(p)
    keep = np.float32(1.0) / (np.float32(1.0) - p)
    return np.where(uniforms(seed, start, n) >= p, keep, np.float32(0.0)).astype(np.float32)


def hidden(case, r):
    return block(case["ff"], case["tp"], r % case["tp"])[1]


def masks(case, r, step):
    """Rank r's (split, replicated) scales in forward step 1 or 2."""
    rows, d = case["rows"], case["d"]
    n, m = rows * hidden(case, r), rows * d
    repl_seed, split_seed = seeds(case, r)
    return (scales(split_seed, (step - 1) * n, n, case["p"]),
            scales(repl_seed, (step - 1) * m, m, case["p"]))


def label(case):
    return (f"np={case.np} dp={case.np // case['tp']} tp={case['tp']} rows={case['rows']} "
            f"d={case['d']} ff={case['ff']} p={case['p']} seed={case['seed']}")


def cases(rng):
    out = []
    for i, (dp, tp) in enumerate(MESHES):
        for j, (rows, d, ff) in enumerate(SHAPES):
            out.append({"np": dp * tp, "tp": tp, "rows": rows, "d": d, "ff": ff,
                        "p": PS[(i + j) % len(PS)], "seed": int(rng.integers(0, 2 ** 31))})
    return out


# ------------------------------------------------------------------- tp_rng_init

def states_inputs(case, rng):
    return {}


def states_reference(case, inputs):
    return [{"states": np.array(seeds(case, r), dtype=np.int64)} for r in range(case.np)]


def state_locate(case, name, index, rank):
    dp_rank, tp_rank = divmod(rank, case["tp"])
    which = ("replicated (the default generator: seed + 10 dp_rank)",
             "split (the tracked one: seed + 10 dp_rank + 2718 + tp_rank)")[index]
    return f"data rank {dp_rank}, tensor rank {tp_rank}: the {which}"


@test("tp_dropout", points=2, inputs=states_inputs, reference=states_reference, label=label,
      locate=state_locate, rules=[no_communication("tp_rng_init", has_comm=False)],
      hint="replicated = xt_rng_seed(seed + 10 dp_rank), split = xt_rng_seed(seed + 10 "
           "dp_rank + 2718 + tp_rank): the tensor rank in the split one only")
def tp_rng_init(rng):
    return [c for c in cases(rng) if c["rows"] == SHAPES[0][0]]


# -------------------------------------------------------------- the layer's inputs

def layer_inputs(case, rng):
    """Per data rank its own x, x2 and dy; the whole W1 and W2 shared, cut by tensor rank;
    each rank's weight gradients arriving random (they accumulate)."""
    rows, d, ff, tp = case["rows"], case["d"], case["ff"], case["tp"]
    f = np.float32
    dp = case.np // tp
    X = [rng.normal(size=(rows, d)).astype(f) for _ in range(dp)]
    X2 = [rng.normal(size=(rows, d)).astype(f) for _ in range(dp)]
    DY = [rng.normal(size=(rows, d)).astype(f) for _ in range(dp)]
    W1 = (rng.normal(size=(d, ff)) / np.sqrt(d)).astype(f)
    W2 = (rng.normal(size=(ff, d)) / np.sqrt(ff)).astype(f)
    inputs = {"x": [X[r // tp].reshape(-1) for r in range(case.np)],
              "x2": [X2[r // tp].reshape(-1) for r in range(case.np)],
              "w1": [columns(W1, tp, r % tp).reshape(-1) for r in range(case.np)],
              "w2": [rows_of(W2, tp, r % tp).reshape(-1) for r in range(case.np)]}
    if case["fn"] == "tp_dropout_backward":
        inputs["dy"] = [DY[r // tp].reshape(-1) for r in range(case.np)]
        inputs["dw1"] = [rng.normal(size=(d, hidden(case, r))).astype(f).reshape(-1)
                         for r in range(case.np)]
        inputs["dw2"] = [rng.normal(size=(hidden(case, r), d)).astype(f).reshape(-1)
                         for r in range(case.np)]
    return inputs


def whole(case, inputs, g):
    """Data rank g's whole W1 and W2 (float64) from its tensor ranks' blocks."""
    rows, d, tp = case["rows"], case["d"], case["tp"]
    ranks = range(g * tp, (g + 1) * tp)
    w1 = np.concatenate([inputs["w1"][r].astype(np.float64).reshape(d, -1) for r in ranks], 1)
    w2 = np.concatenate([inputs["w2"][r].astype(np.float64).reshape(-1, d) for r in ranks], 0)
    assert w1.shape == (d, case["ff"]) and rows >= 0
    return w1, w2


def mlp_forward(x, w1, w2, ms, mr):
    """The dropout MLP on one process, float64: y = ((silu(x W1) ms) W2) mr, and what the
    backward needs."""
    a = x @ w1
    h = nn.silu_forward(a) * ms
    return (h @ w2) * mr, (a, h)


def mlp_backward(dy, x, w1, w2, ms, mr, kept):
    """(dx, dW1, dW2) of mlp_forward for the upstream gradient dy."""
    a, h = kept
    dz = dy * mr
    da = nn.silu_backward(dz @ w2.T * ms, a)
    return da @ w1.T, x.T @ da, h.T @ dz


def _check_backward():
    """mlp_backward against central differences of sum(dy y), at import."""
    g = np.random.default_rng(7)
    x, w1, w2 = g.normal(size=(3, 4)), g.normal(size=(4, 6)), g.normal(size=(6, 4))
    ms, mr = g.choice([0.0, 2.0], size=(3, 6)), g.choice([0.0, 2.0], size=(3, 4))
    dy = g.normal(size=(3, 4))
    _, kept = mlp_forward(x, w1, w2, ms, mr)
    grads = mlp_backward(dy, x, w1, w2, ms, mr, kept)
    args = [x, w1, w2]
    for which, grad in enumerate(grads):
        num = np.zeros_like(grad)
        for i in np.ndindex(grad.shape):
            for sign in (1.0, -1.0):
                moved = [a.copy() for a in args]
                moved[which][i] += sign * 1e-6
                num[i] += sign * np.sum(dy * mlp_forward(*moved, ms, mr)[0]) / 2e-6
        err = np.max(np.abs(num - grad)) / max(1.0, np.max(np.abs(grad)))
        assert err < 1e-6, f"mlp_backward's gradient {which} is off by {err:.1e}"


checked.once(_check_backward)


def step(case, inputs, g, x, number):
    """Data rank g's forward step `number`: y, and what the backward needs (float64)."""
    rows, tp = case["rows"], case["tp"]
    ranks = range(g * tp, (g + 1) * tp)
    w1, w2 = whole(case, inputs, g)
    ms = np.concatenate([masks(case, r, number)[0].reshape(rows, -1) for r in ranks], 1)
    mr = masks(case, g * tp, number)[1].reshape(rows, -1)
    ms, mr = ms.astype(np.float64), mr.astype(np.float64)
    y, kept = mlp_forward(x, w1, w2, ms, mr)
    return y, (w1, w2, ms, mr, kept)


def layer_reference(case, inputs):
    rows, d, tp = case["rows"], case["d"], case["tp"]
    out = []
    for r in range(case.np):
        g = r // tp
        x = inputs["x"][r].astype(np.float64).reshape(rows, d)
        x2 = inputs["x2"][r].astype(np.float64).reshape(rows, d)
        y1, _ = step(case, inputs, g, x, 1)
        y2, (w1, w2, ms, mr, kept) = step(case, inputs, g, x2, 2)
        if case["fn"] == "tp_dropout_forward":
            (s1, r1), (s2, r2) = masks(case, r, 1), masks(case, r, 2)
            out.append({"y1": y1.reshape(-1), "y2": y2.reshape(-1), "split1": s1,
                        "repl1": r1, "split2": s2, "repl2": r2})
            continue
        dy = inputs["dy"][r].astype(np.float64).reshape(rows, d)
        dx, dw1, dw2 = mlp_backward(dy, x2, w1, w2, ms, mr, kept)
        out.append({"dx": dx.reshape(-1),
                    "dw1": inputs["dw1"][r] + columns(dw1, tp, r % tp).reshape(-1),
                    "dw2": inputs["dw2"][r] + rows_of(dw2, tp, r % tp).reshape(-1)})
    return out


def layer_tolerance(case, inputs, name, rank):
    if name.startswith(("split", "repl")):
        return Relative(0.0, 1e-6)
    return OfScale(RTOL)


def layer_shapes(case, name, rank):
    rows, d, n = case["rows"], case["d"], hidden(case, rank)
    return {"y1": (rows, d), "y2": (rows, d), "dx": (rows, d), "repl1": (rows, d),
            "repl2": (rows, d), "split1": (rows, n), "split2": (rows, n), "dw1": (d, n),
            "dw2": (n, d)}.get(name)


def where(case, r):
    dp_rank, tp_rank = divmod(r, case["tp"])
    return f"data rank {dp_rank}, tensor rank {tp_rank}"


def first_equal(a, b):
    """Whether two masks agree on their common prefix, when it is long enough to tell."""
    k = min(a.size, b.size)
    return k >= RELATED and np.array_equal(a[:k], b[:k])


def mask_relations(case, inputs, outs):
    """The masks' relations that the seeds decide: replicated alike across the tensor group,
    split different on each tensor rank, both different across data ranks and from step to
    step."""
    if case["p"] == 0.0 or any(o.get(k) is None for o in outs for k in ("split1", "repl1",
                                                                        "split2")):
        return []
    tp = case["tp"]
    for r in range(case.np):
        lead = r - r % tp
        if r != lead and outs[r]["repl1"].size == outs[lead]["repl1"].size and \
                not np.array_equal(outs[r]["repl1"], outs[lead]["repl1"]):
            return [(r, f"rank {r} ({where(case, r)}) dropped other positions of the replicated "
                        f"activation than rank {lead} ({where(case, lead)}): after the "
                        f"all-reduce every tensor rank holds the same y, so its mask must be "
                        f"the same too, or the replicas drift apart. Draw it from the generator "
                        f"seeded alike across the tensor group (rng->replicated)")]
        for q in range(lead, r):
            if first_equal(outs[r]["split1"], outs[q]["split1"]):
                return [(r, f"ranks {q} and {r} ({where(case, q)}; {where(case, r)}) dropped "
                            f"the same positions of their split activations: each tensor rank "
                            f"holds different columns, which one process would drop "
                            f"independently. Draw the split region's mask from the generator "
                            f"seeded with the tensor rank (rng->split)")]
        if r >= tp:
            for name, what in (("repl1", "replicated"), ("split1", "split")):
                if first_equal(outs[r][name], outs[r - tp][name]):
                    return [(r, f"ranks {r - tp} and {r} ({where(case, r - tp)}; "
                                f"{where(case, r)}) drew the same {what} mask: different data "
                                f"ranks hold different samples, and the exercise's seeds "
                                f"(data_parallel_random_init) add 10 dp_rank to both")]
        for name, what in (("split", "split"), ("repl", "replicated")):
            if first_equal(outs[r][name + "1"], outs[r][name + "2"]):
                return [(r, f"rank {r} ({where(case, r)}) drew the same {what} mask in both "
                            f"steps: a generator's state must advance with every draw; keep it "
                            f"in the tp_rng the caller passes (by pointer), not in a copy")]
    return []


ALLREDUCE = "MPI_Allreduce"


@test("tp_dropout", points=5, inputs=layer_inputs, reference=layer_reference,
      tolerance=layer_tolerance, label=label, locate=shape_locator(layer_shapes),
      check=hinted(mask_relations, "the split mask from rng->split, the replicated one from "
                                   "rng->replicated, each generator passed by pointer"),
      check_first=True,
      rules=[collectives_exactly(lambda c, i, r: [(ALLREDUCE, c["rows"] * c["d"], "other")] * 2,
                                 "one all-reduce of rows*d floats a step, after the second "
                                 "layer; the masks need no message: every rank draws its own")],
      hint="a = x W1; h = silu(a) times the split scales; y = all-reduce(h W2) times the "
           "replicated scales; act holds a, then the split scales, then the replicated ones")
def tp_dropout_forward(rng):
    return cases(rng)


@test("tp_dropout", points=5, inputs=layer_inputs, reference=layer_reference,
      tolerance=layer_tolerance, label=label, locate=shape_locator(layer_shapes),
      rules=[collectives_exactly(lambda c, i, r: [(ALLREDUCE, c["rows"] * c["d"], "other")] * 3,
                                 "one all-reduce of rows*d floats in each of the two forward "
                                 "steps (y) and one backward (dx)")],
      hint="dz = dy times the replicated scales; dW2 += h^T dz with h = silu(a) times the "
           "split scales; dh = dz W2^T times the split scales, through silu to da; dW1 += "
           "x^T da; dx = da W1^T, all-reduced")
def tp_dropout_backward(rng):
    return cases(rng)
