"""node_limited_routing.c: DeepSeek-V3's node-limited routing, on one process.

The experts sit on `nodes` nodes of G = E / nodes consecutive experts. For a token, a node's
score is the sum of its top k/M values of s + bias (added largest first); the M best nodes
are kept (of equal ones the lower node), and idx is the top k of s + bias among their
experts (of equal ones the lower expert); w the chosen s over their sum. The backward takes
dw and gives dscores through w alone (the choice is piecewise constant).

References, written here from that definition: node_limited (float32 sums, as the contract
says, so that the choice is the program's) and node_limited_grad (float64), whose gradient
is checked against central differences of sum_j dw_j w_j when this module is loaded.

Inputs: the scores are multiples of 1/1024 in (0, 1), the biases multiples of 1/64 in
[-1/16, 1/16], the same for the experts of one place on every node (bias[e] depends on e %
G): every sum of them is exact in float32, and two nodes whose experts' scores are the same
tie exactly. A token's row is of one kind, cycling through:
  - "decoys" (nodes >= 4, k/M >= 2, M = 2): two nodes with two good experts (11/16), one
    with a single excellent one (1023/1024, the rest 1/1024) and one with all its experts
    middling (1/2): the best single expert and the sum of all of a node rank the nodes
    otherwise than the top k/M do;
  - "tie": a random row in which the node at the M-th place is copied onto the one at the
    M+1-th, so that the two tie at the limit;
  - "random": scores drawn at random.
Tolerances: idx exactly; w 2^-24 (16 + 2 k) w; dscores 2^-24 (16 + 4 k) (|dw_j| + sum_i
w_i |dw_i|) / S (one division, k-term sums); the worst passing error over seeds 1 to 5
(grade.py --margins), 0.05 of the bound for w and 0.09 for dscores. Every defect moves a value
by far more.
"""

import numpy as np

import checked
from spec import Relative, hinted, test
from lectures.lc4_tp.tp import no_communication

F32 = np.float32
EPS = 2.0 ** -24
NO_MPI = no_communication("this function", has_comm=False)

ROWS = ["decoys", "tie", "random"]


def node_limited(s, bias, k, nodes, M):
    """(idx, w) of node-limited routing; s (T x E) and bias (E) float32."""
    s = np.asarray(s, F32)
    T, E = s.shape
    G, per = E // nodes, k // M
    v = s + np.asarray(bias, F32)
    idx = np.zeros((T, k), np.int32)
    w = np.zeros((T, k), np.float64)
    for t in range(T):
        node_score = []
        for n in range(nodes):
            total = F32(0)
            for x in sorted(v[t, n * G:(n + 1) * G], reverse=True)[:per]:
                total = F32(total + x)
            node_score.append(total)
        kept = sorted(range(nodes), key=lambda n: (-node_score[n], n))[:M]
        allowed = [e for e in range(E) if e // G in kept]
        idx[t] = sorted(allowed, key=lambda e: (-v[t, e], e))[:k]
        chosen = s[t, idx[t]].astype(np.float64)
        w[t] = chosen / chosen.sum()
    return idx, w


def node_limited_grad(s, idx, dw):
    """dscores (T x E, float64) of sum_j dw_j w_j, w_j = s_j / S over the chosen."""
    s = np.asarray(s, np.float64)
    ds = np.zeros_like(s)
    for t in range(s.shape[0]):
        chosen = s[t, idx[t]]
        total = chosen.sum()
        ds[t, idx[t]] = (dw[t] - (dw[t] * chosen).sum() / total) / total
    return ds


def _check_gradient():
    """node_limited_grad against central differences (float64), at import."""
    rng = np.random.default_rng(11)
    for T, E, k in ((3, 8, 4), (2, 6, 1), (4, 5, 5)):
        s = rng.uniform(0.05, 0.95, size=(T, E))
        idx = np.argsort(-rng.random((T, E)), axis=1)[:, :k]
        dw = rng.normal(size=(T, k))
        grad = node_limited_grad(s, idx, dw)

        def loss(x):
            c = np.take_along_axis(x, idx, 1)
            return float((dw * c / c.sum(axis=1, keepdims=True)).sum())

        h, num = 1e-6, np.zeros_like(s)
        for i in np.ndindex(s.shape):
            sp, sm = s.copy(), s.copy()
            sp[i] += h
            sm[i] -= h
            num[i] = (loss(sp) - loss(sm)) / (2 * h)
        err = np.abs(num - grad).max() / (np.abs(grad).max() + 1e-3)  # k = 1: w constant
        assert err < 1e-6, f"node_limited_grad is off by {err:.1e} (relative)"


checked.once(_check_gradient)


def grid_scores(rng, size):
    return rng.integers(1, 1024, size=size) / 1024.0


def case_bias(case, rng):
    G = case["E"] // case["nodes"]
    return np.tile(rng.integers(-4, 5, size=G) / 64.0, case["nodes"]).astype(F32)


def row(kind, case, bias, rng):
    E, nodes, k, M = case["E"], case["nodes"], case["k"], case["M"]
    G = E // nodes
    r = grid_scores(rng, E)
    if kind == "decoys" and nodes >= 4 and k // M >= 2 and M == 2 and G >= 2:
        r = rng.integers(1, 128, size=E) / 1024.0  # low everywhere else
        good, star, many, good2 = rng.permutation(nodes)[:4]
        for n in (good, good2):
            r[n * G:n * G + 2] = 11 / 16
        r[star * G:(star + 1) * G] = 1 / 1024
        r[star * G] = 1023 / 1024
        r[many * G:(many + 1) * G] = 1 / 2
    elif kind == "tie" and nodes > M:
        idx_nodes = node_order(r, bias, case)
        a, b = idx_nodes[M - 1], idx_nodes[M]
        r[b * G:(b + 1) * G] = r[a * G:(a + 1) * G]
    return r


def node_order(r, bias, case):
    """The nodes by decreasing score, of equal ones the lower first."""
    E, nodes, k, M = case["E"], case["nodes"], case["k"], case["M"]
    G, per = E // nodes, k // M
    v = np.asarray(r, F32) + np.asarray(bias, F32)
    score = [float(np.sort(v[n * G:(n + 1) * G])[::-1][:per].sum()) for n in range(nodes)]
    return sorted(range(nodes), key=lambda n: (-score[n], n))


def forward_inputs(case, rng):
    bias = case_bias(case, rng)
    s = np.array([row(ROWS[t % len(ROWS)], case, bias, rng) for t in range(case["T"])],
                 F32).reshape(case["T"], case["E"])
    return {"scores": s.reshape(-1), "bias": bias}


def forward_parts(case, inputs):
    s = inputs["scores"].reshape(case["T"], case["E"])
    return node_limited(s, inputs["bias"], case["k"], case["nodes"], case["M"])


def forward_reference(case, inputs):
    idx, w = forward_parts(case, inputs)
    return [{"idx": idx.reshape(-1), "w": w.reshape(-1)}]


def forward_tolerance(case, inputs, name, rank):
    return 0.0 if name == "idx" else Relative(1e-30, (16 + 2 * case["k"]) * EPS)


def at_most_m_nodes(case, inputs, outs):
    """Every token's experts lie on at most M nodes."""
    got = outs[0].get("idx")
    if got is None or got.size != case["T"] * case["k"]:
        return []
    G = case["E"] // case["nodes"]
    for t, chosen in enumerate(np.asarray(got).reshape(case["T"], case["k"])):
        on = sorted({int(e) // G for e in chosen})
        if len(on) > case["M"]:
            return [(0, f"token {t}: experts {' '.join(map(str, chosen))} lie on nodes "
                        f"{on}, {len(on)} of them: node-limited routing reaches at most M = "
                        f"{case['M']} (experts e on node e / {G})")]
    return []


def shapes():
    """(T, E, nodes, k, M): 4 nodes of 4 as in the page, one expert a node, one node, M = 1,
    k/M = 3, and no token."""
    return [(9, 16, 4, 4, 2), (6, 8, 8, 2, 2), (5, 12, 4, 6, 2), (4, 8, 2, 4, 1),
            (6, 6, 1, 2, 1), (6, 24, 6, 6, 3), (0, 8, 4, 2, 1)]


def label(case):
    p = case.params
    return f"T={p['T']} E={p['E']} nodes={p['nodes']} k={p['k']} M={p['M']}"


def locate(case, name, index, rank):
    per = case["E"] if name == "dscores" else case["k"]
    t, j = divmod(index, per)
    what = "expert" if name == "dscores" else "choice"
    return f"token {t} ({ROWS[t % len(ROWS)]} row), {what} {j}"


@test("node_limited_routing", points=6, inputs=forward_inputs, reference=forward_reference,
      tolerance=forward_tolerance, label=label, locate=locate, rules=[NO_MPI],
      check=hinted(at_most_m_nodes, "keep the M nodes first, by the sum of each node's top "
                                    "k/M values of s + bias; then choose the k experts among "
                                    "their experts only"),
      check_first=True,
      hint="a node's score is the sum of its top k/M values of s + bias (not its best expert, "
           "not all of them); the M best nodes, a strict > so that the lower node wins a "
           "tie; then k passes over their experts; w from s alone")
def node_limited_forward(rng):
    return [{"np": 1, "T": T, "E": E, "nodes": n, "k": k, "M": M} for T, E, n, k, M in shapes()]


def backward_inputs(case, rng):
    T, k = case["T"], case["k"]
    fwd = forward_inputs(case, rng)
    idx, _ = forward_parts(case, fwd)
    return {"scores": fwd["scores"], "idx": idx.astype(np.int32).reshape(-1),
            "dw": rng.normal(size=T * k).astype(F32)}


def backward_reference(case, inputs):
    T, E, k = case["T"], case["E"], case["k"]
    s = inputs["scores"].reshape(T, E)
    ds = node_limited_grad(s, inputs["idx"].reshape(T, k), inputs["dw"].reshape(T, k))
    return [{"dscores": ds.reshape(-1)}]


def backward_tolerance(case, inputs, name, rank):
    T, E, k = case["T"], case["E"], case["k"]
    s = inputs["scores"].reshape(T, E).astype(np.float64)
    idx = inputs["idx"].reshape(T, k)
    dw = np.abs(inputs["dw"].reshape(T, k).astype(np.float64))
    bound = np.zeros((T, E))
    for t in range(T):
        chosen = s[t, idx[t]]
        total = chosen.sum()
        bound[t, idx[t]] = (16 + 4 * k) * EPS * (dw[t] + (dw[t] * chosen).sum() / total) / total
    return bound.reshape(-1) + 1e-30


@test("node_limited_routing", points=4, inputs=backward_inputs, reference=backward_reference,
      tolerance=backward_tolerance, label=label, locate=locate, rules=[NO_MPI],
      hint="w_j = s_j / S over the chosen: dL/ds_j = (dw_j - sum_i dw_i w_i) / S for a chosen "
           "expert, 0 for every other")
def node_limited_backward(rng):
    return [{"np": 1, "T": T, "E": E, "nodes": n, "k": k, "M": M} for T, E, n, k, M in shapes()]
