"""cp_grad_sync.c: SGD on one attention block under context parallelism inside data
parallelism, the weights' gradients all-reduced over the data x context ranks.

Each case is a dp x cp mesh (cp consecutive ranks a context group): data rank j trains on
its own sequence X_j of T = cp c tokens with the upstream gradient G_j (its loss sum_t y_t .
g_t), cut over its context ranks in the zigzag layout (cp.positions). The reference trains
the block on one process in float64 (attention_step, its gradient checked against central
differences when this module loads): at every step the mean over the data ranks of each
sequence's whole gradient, W -= lr times it. Every rank must end with those weights.

How it was computed:
  - each step exactly one MPI_Allreduce of the four gradients (packed) on comm, all dp cp
    ranks: an all-reduce on a group of the data ranks only fails the values first (each
    context rank keeps its chunk's part), this rule second;
  - the attention's collectives on the context group: per step two MPI_Allgather (K, V)
    forward, and two more or none backward (gathered again, or kept), two
    MPI_Reduce_scatter_block (dK, dV); nothing else but the group's making and freeing.

Tolerance: every weight within 2e-5 of its tensor's scale (max(1, the largest |value|)):
float32 attention and products over two steps against float64. Measured (grade.py --margins,
seeds 1 to 5): the worst error 4.3e-7 of the scale, 2% of the bound; a wrong gradient moves a
weight by lr times a gradient's term, far above it.
"""

import numpy as np

import checked
import nn
from spec import OfScale, test
from lectures.lc6_cp.cp import positions

# (dp, cp, c', d, hq, hkv, hd): one rank; context only; data only; both, up to 2 x 2 and 1 x 4.
SHAPES = [(1, 1, 2, 4, 1, 1, 2), (1, 2, 1, 6, 2, 1, 3), (2, 1, 2, 4, 2, 2, 2),
          (1, 3, 2, 4, 2, 1, 2), (2, 2, 2, 6, 4, 2, 2), (1, 4, 1, 8, 2, 2, 4),
          (4, 1, 3, 4, 1, 1, 3), (2, 2, 3, 4, 2, 1, 4)]
STEPS, LR = 2, 0.05
RTOL = 2e-5


def attention_step(x, g, w, hq, hkv, hd):
    """The loss sum(y g) of y = attention(x Wq, x Wk, x Wv) Wo (causal, the whole sequence)
    and its gradients (dWq, dWk, dWv, dWo), float64."""
    wq, wk, wv, wo = w
    T = x.shape[0]
    q, k, v = x @ wq, x @ wk, x @ wv
    o, lse = nn.attn_block_forward(q, k, v, T, T, hq, hkv, hd, "C")
    y = o @ wo
    do = g @ wo.T
    dq, dk, dv = nn.attn_block_backward(do, q, k, v, o, lse, T, T, hq, hkv, hd, "C")
    return float(np.sum(y * g)), (x.T @ dq, x.T @ dk, x.T @ dv, o.T @ g)


def _check_grad():
    """attention_step's gradient against central differences, at import."""
    rng = np.random.default_rng(3)
    T, d, hq, hkv, hd = 4, 3, 2, 1, 2
    x, g = rng.normal(size=(T, d)), rng.normal(size=(T, d))
    w = [rng.normal(size=(d, hq * hd)), rng.normal(size=(d, hkv * hd)),
         rng.normal(size=(d, hkv * hd)), rng.normal(size=(hq * hd, d))]
    _, grads = attention_step(x, g, w, hq, hkv, hd)
    nums = nn.numeric_gradients(lambda: attention_step(x, g, w, hq, hkv, hd)[0], w)
    for name, num, ana in zip(("Wq", "Wk", "Wv", "Wo"), nums, grads):
        err = float(np.abs(num - ana).max())
        assert err < 1e-5 * (1 + float(np.abs(ana).max())), \
            f"attention_step: d{name} off by {err:.1e}"


checked.once(_check_grad)


def cases(rng):
    return [{"np": dp * cp, "cp": cp, "c": 2 * h, "d": d, "hq": hq, "hkv": hkv, "hd": hd,
             "steps": STEPS, "lr": LR} for dp, cp, h, d, hq, hkv, hd in SHAPES]


def label(case):
    p = case.params
    return (f"np={case.np} dp={case.np // p['cp']} cp={p['cp']} c={p['c']} (T={p['cp'] * p['c']}) "
            f"d={p['d']} hq={p['hq']} hkv={p['hkv']} hd={p['hd']} steps={p['steps']} "
            f"lr={p['lr']}")


def rows(case, r):
    """Rank r's positions in its data rank's sequence."""
    cp = case["cp"]
    return positions("zigzag", cp * case["c"], cp, r % cp)


def inputs(case, rng):
    """Each data rank's sequence and upstream gradient (rank r gets its zigzag rows), the
    weights (the same everywhere, scaled so that the softmax is far from uniform)."""
    cp, c, d, hq, hkv, hd = (case[k] for k in ("cp", "c", "d", "hq", "hkv", "hd"))
    dp, T, f = case.np // cp, cp * c, np.float32
    X = [rng.normal(size=(T, d)).astype(f) for _ in range(dp)]
    G = [rng.normal(size=(T, d)).astype(f) for _ in range(dp)]
    w = {"wq": rng.normal(size=(d, hq * hd)) * 1.2 / np.sqrt(d),
         "wk": rng.normal(size=(d, hkv * hd)) * 1.2 / np.sqrt(d),
         "wv": rng.normal(size=(d, hkv * hd)) / np.sqrt(d),
         "wo": rng.normal(size=(hq * hd, d)) / np.sqrt(hq * hd)}
    out = {name: a.astype(f).reshape(-1) for name, a in w.items()}
    out["x"] = [np.ascontiguousarray(X[r // cp][rows(case, r)]) for r in range(case.np)]
    out["g"] = [np.ascontiguousarray(G[r // cp][rows(case, r)]) for r in range(case.np)]
    return out


def sequences(case, inputs, name):
    """Each data rank's whole sequence of `name` (x or g), float64, from its ranks' rows."""
    cp, T = case["cp"], case["cp"] * case["c"]
    out = []
    for j in range(case.np // cp):
        whole = np.zeros((T, case["d"]))
        for r in range(j * cp, (j + 1) * cp):
            whole[rows(case, r)] = inputs[name][r]
        out.append(whole)
    return out


def reference(case, inputs):
    cp, d, hq, hkv, hd = (case[k] for k in ("cp", "d", "hq", "hkv", "hd"))
    X, G = sequences(case, inputs, "x"), sequences(case, inputs, "g")
    shapes = [(d, hq * hd), (d, hkv * hd), (d, hkv * hd), (hq * hd, d)]
    w = [inputs[n].astype(np.float64).reshape(s) for n, s in zip(("wq", "wk", "wv", "wo"),
                                                                  shapes)]
    for _ in range(case["steps"]):
        grads = [np.zeros_like(a) for a in w]
        for x, g in zip(X, G):
            _, gr = attention_step(x, g, w, hq, hkv, hd)
            grads = [a + b for a, b in zip(grads, gr)]
        w = [a - case["lr"] * b / len(X) for a, b in zip(w, grads)]
    return [dict(zip(("wq", "wk", "wv", "wo"), (a.reshape(-1) for a in w)))
            for _ in range(case.np)]


def tolerance(case, inputs, name, rank):
    return OfScale(RTOL)


def locate(case, name, index, rank):
    width = {"wq": case["hq"] * case["hd"], "wk": case["hkv"] * case["hd"],
             "wv": case["hkv"] * case["hd"], "wo": case["d"]}[name]
    return f"row {index // width}, column {index % width}"


def grad_sync(case, inputs, records):
    """Exactly one MPI_Allreduce a step, of the four gradients packed, on comm; the
    attention's collectives on a group of the program's own (the context group) once there
    is more than one data rank; nothing else."""
    d, hq, hkv, hd, cp, steps = (case[k] for k in ("d", "hq", "hkv", "hd", "cp", "steps"))
    floats = d * (hq + 2 * hkv) * hd + hq * hd * d
    kv = case["c"] * hkv * hd * 4
    for r, rec in enumerate(records):
        coll = [e for e in rec.events if e.dir == "C"]
        sums = [e for e in coll if e.fn == "MPI_Allreduce"]
        if len(sums) != steps or any(e.bytes != 4 * floats or e.comm != "case" for e in sums):
            shown = ", ".join(f"{e.bytes // 4} floats on "
                              f"{'comm' if e.comm == 'case' else 'a group of its own'}"
                              for e in sums[:6]) or "none"
            return [(r, f"rank {r} made {len(sums)} MPI_Allreduce ({shown}); the weights' "
                        f"gradients go in exactly one a step ({steps} in all), {floats} floats "
                        f"(Wq, Wk, Wv, Wo packed), over comm: every data rank and every "
                        f"context rank, since each context rank's gradient is a part of its "
                        f"sequence's")]
        other = [e for e in coll if e.fn not in ("MPI_Allreduce", "MPI_Allgather",
                                                 "MPI_Reduce_scatter_block", "MPI_Comm_split",
                                                 "MPI_Comm_free")]
        p2p = [e for e in rec.events if e.dir in "SR"]
        if other or p2p:
            e = (other or p2p)[0]
            return [(r, f"rank {r} called {e.fn}: the step's communication is the attention's "
                        f"all-gathers and reduce-scatters on the context group and one "
                        f"all-reduce of the gradients")]
        gathers = [e for e in coll if e.fn == "MPI_Allgather"]
        scatters = [e for e in coll if e.fn == "MPI_Reduce_scatter_block"]
        if len(scatters) != 2 * steps or len(gathers) not in (2 * steps, 4 * steps) or \
                any(e.bytes != kv for e in gathers) or any(e.bytes != cp * kv for e in scatters):
            return [(r, f"rank {r} made {len(gathers)} MPI_Allgather and {len(scatters)} "
                        f"MPI_Reduce_scatter_block; a step's attention gathers K and V "
                        f"({kv} B each) once or twice and reduce-scatters dK and dV "
                        f"({cp * kv} B each) once: {2 * steps} or {4 * steps} all-gathers and "
                        f"{2 * steps} reduce-scatters in {steps} steps")]
        if case.np > cp and any(e.comm == "case" for e in gathers + scatters):
            return [(r, f"rank {r} ran the attention's collectives on comm: K and V come "
                        f"from the ranks of its context group only (cp = {cp} consecutive "
                        f"ranks), the other data ranks hold other sequences")]
    return []


@test("cp_grad_sync", points=12, inputs=inputs, reference=reference, tolerance=tolerance,
      label=label, locate=locate, rules=[grad_sync],
      hint="the context group by MPI_Comm_split(comm, rank / cp, rank % cp); the forward and "
           "backward of allgather_kv_attention on it; Wo's and the projections' gradients "
           "from your rows; one MPI_Allreduce of the four over comm, divided by np / cp; "
           "W -= lr gradient")
def cp_train(rng):
    return cases(rng)
