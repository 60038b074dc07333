"""topk_gradient.c and gate_sigmoid.c: routing a token to k of E experts, on one process.

Both programs route a rank's own tokens and make no MPI call (PMPI-counted); they are
graded at np = 1, each case's inputs drawn fresh (and, in the world of several groups that
the mutant runner uses, drawn again for every group).

topk_gradient: the references are grader/nn.py's topk_route and topk_route_backward
(float64), the NumPy twins of the kit's xt_topk_route and xt_topk_route_backward, which the
exercise may not call (nor xt_softmax_rows). The logits are float32 and given as they are,
so the selection is made on the same numbers in C and in NumPy: idx is compared exactly. A
token's row is of one kind, named in a WRONG report, cycling through: its largest logit
tied (two experts), a tie across the k-th choice (the k-th chosen and one not chosen equal;
k = E: the two smallest), every logit equal, and distinct logits; distinct logits of a row
lie at least 1e-3 apart, so that no selection hangs on rounding. Every case with a token
has every kind of row from T = 4 on, and (E > 1) its first row is a tie. Values: normal
(scale 2), near 100 (100 + 2 normal: e^100 overflows a float, so a softmax without the max
subtracted gives NaN), and coarse (multiples of 0.5 in [-2, 2]: ties everywhere). The
backward gets the float32 softmax and the reference's idx of such logits, and a random dw
(T x k).

gate_sigmoid: references written here from DeepSeek-V3's definitions (float64):
  - gate_sigmoid_forward: s = sigmoid(logits); idx the top-k of s + bias by decreasing
    value, of equal ones the lower expert first; w = s of the chosen over their sum.
  - gate_bias_update: load_i = how many of the T k choices went to expert i; bias_i +=
    gamma where load_i E < k T, -= gamma where load_i E > k T. Two steps, each from its own
    routing, the bias after each compared. gamma and the biases are multiples of 1/64, so
    float32 is exact and the comparison is exact (tolerance 0).
  - seq_balance_loss: alpha sum_i f_i P_i, f_i = E/(k T) load_i, P_i = (1/T) sum_t s'_ti,
    s' = s / sum_j s_tj; dlogits its gradient through P only (seq_loss_and_grad). The
    gradient is checked against central differences of the loss in float64 when this
    module is loaded (the worst relative difference, measured: 2e-8).
The gate's rows are of one kind too: the top two experts tied (equal logits and equal bias,
the case's tie pair), steered (the bias changes the chosen experts or their order),
tied across the k-th choice, every logit equal (the bias alone chooses), steered again;
values of s + bias that are not tied lie at least 1e-4 apart. Every case with a token has
a steered row, and the check says, before any value, whether the chosen experts' weights
moved with the bias: the bias chooses, it never weighs.

Tolerances (per element; float32 roundings; measured with grade.py --margins over seeds 1
to 10, the worst passing error as a fraction of the bound):
  - probs: 1e-30 + 2^-24 (16 + 2 |z_e - max z| + 3 E) p_e (as lecture 6's softmax: the
    rounding of z - max inside the exp, a sum of E terms). w: the chosen p's bound, plus,
    when renormalised, the largest bound of the row and (k + 1) roundings, relative to w.
    Worst: 0.18 (probs), 0.10 (w).
  - dlogits of topk_backward: 2^-24 (8 + 4 k) p_e (A_e + sum_j p_j A_j), A_j the magnitude
    of the chosen probability's gradient (|dw_j|, or (|dw_j| + sum_i w_i |dw_i|) / S when
    renormalised), A_e = 0 off the chosen. Worst: 0.12.
  - scores: 8 2^-24 s; w of the gate: 2^-24 (16 + 2 k) w. Worst: 0.24 (scores), 0.14 (w).
  - the loss: 2^-24 (32 + 2 T + 4 E) |loss|; dlogits of the loss: 2^-24 ((16 + 4 E)
    s (1 - s) + 4 s) alpha/T (f_j + sum_i f_i s'_i) / S (1 - s rounded from a float s near
    1 loses digits: about one float step of 1, absolute). Worst: 0.02 (loss), 0.16
    (dlogits).
Every defect moves a value by far more: a tie to the higher expert, a w not renormalised, a
forgotten -sum term, the bias in the weights, f_i summing to k, P_i from the chosen weights.
"""

import numpy as np

import checked
import nn
import spec
from spec import Relative, hinted, test
from lectures.lc4_tp.tp import no_communication

F32 = np.float32
EPS = 2.0 ** -24

NO_MPI = no_communication("this function", has_comm=False)
FORBIDDEN = [(r"^xt_softmax_rows$",
              "calls {}, libxt's copy of what this exercise writes: write it yourself"),
             (r"^xt_(topk_route|topk_route_backward)$",
              "calls {}, the lecture kit's copy of what this exercise writes: write it yourself")]

# Distinct values of a row at least this far apart: topk's logits, the gate's s + bias.
TOPK_GAP = 1e-3
GATE_GAP = 1e-4


# --------------------------------------------------------------- top-k routing

TOPK_ROWS = ("top tie", "k-th tie", "all equal", "distinct")
TOPK_ROW_TEXT = {"top tie": "its largest logit tied", "k-th tie": "a tie at the k-th choice",
                 "all equal": "every logit equal", "distinct": "distinct logits"}

# (T, E, k, renorm, values): k = 1, 2, E; renorm 0 and 1; T = 0; E = 1; logits near 100
# early (the softmax without its max fails there).
TOPK_CASES = [(4, 4, 1, 0, "normal"), (6, 8, 2, 1, "high"), (8, 6, 2, 0, "coarse"),
              (5, 5, 5, 1, "normal"), (0, 4, 2, 1, "normal"), (32, 16, 2, 1, "normal"),
              (12, 8, 1, 1, "high"), (16, 16, 16, 0, "coarse"), (3, 1, 1, 0, "normal"),
              (9, 8, 2, 0, "high"), (7, 16, 4, 1, "coarse"), (10, 6, 3, 0, "normal")]


def topk_row_kind(t):
    return TOPK_ROWS[t % len(TOPK_ROWS)]


def draw_row(values, E, rng):
    if values == "normal":
        return rng.normal(size=E) * 2
    if values == "high":
        return 100 + rng.normal(size=E) * 2
    if values == "coarse":
        return rng.integers(-4, 5, size=E) * 0.5
    raise ValueError(values)


def gaps_ok(row, gap):
    """Values of a row that differ, differ by at least gap."""
    u = np.unique(np.asarray(row, dtype=np.float64))
    return u.size < 2 or np.diff(u).min() >= gap


def topk_row(kind, values, E, k, rng):
    """One token's float32 logits of the kind."""
    for _ in range(1000):
        z = draw_row(values, E, rng).astype(F32)
        if E > 1:
            order = np.argsort(-z.astype(np.float64), kind="stable")
            if kind == "top tie":
                a, b = rng.choice(E, 2, replace=False)
                z[a] = z[b] = z.max() + F32(0.5)
            elif kind == "k-th tie":
                if k < E:
                    z[order[k]] = z[order[k - 1]]
                else:
                    z[order[-2]] = z[order[-1]]
            elif kind == "all equal":
                z[:] = z[0]
        if gaps_ok(z, TOPK_GAP):
            return z
    raise RuntimeError("no row of logits with gaps")


def topk_logits(case, rng):
    T, E, k = case["T"], case["E"], case["k"]
    z = np.zeros((T, E), F32)
    for t in range(T):
        z[t] = topk_row(topk_row_kind(t), case["values"], E, k, rng)
    return z


def topk_forward_inputs(case, rng):
    return {"logits": topk_logits(case, rng).reshape(-1)}


def topk_forward_reference(case, inputs):
    T, E, k = case["T"], case["E"], case["k"]
    idx, w, probs = nn.topk_route(inputs["logits"].reshape(T, E), k, case["renorm"])
    return [{"idx": idx.reshape(-1), "w": w.reshape(-1), "probs": probs.reshape(-1)}]


def softmax_bound(z):
    """Per element of softmax(z) row by row: 2^-24 (16 + 2 |z - max| + 3 E) p (the module
    docstring), relative to p: the factor only."""
    z = np.asarray(z, dtype=np.float64)
    if not z.size:
        return z
    return EPS * (16 + 2 * np.abs(z - z.max(axis=1, keepdims=True)) + 3 * z.shape[1])


def topk_forward_tolerance(case, inputs, name, rank):
    T, E, k = case["T"], case["E"], case["k"]
    z = inputs["logits"].reshape(T, E)
    idx, w, probs = nn.topk_route(z, k, case["renorm"])
    rel = softmax_bound(z)
    if name == "idx":
        return 0.0
    if name == "probs":
        return (1e-30 + rel * probs).reshape(-1)
    chosen = np.take_along_axis(rel, idx, 1) if T else np.zeros((0, k))
    if case["renorm"] and T:
        chosen = chosen + chosen.max(axis=1, keepdims=True) + (k + 1) * EPS
    return (1e-30 + chosen * w).reshape(-1)


def topk_backward_inputs(case, rng):
    T, k = case["T"], case["k"]
    z = topk_logits(case, rng)
    idx, _, probs = nn.topk_route(z, k, case["renorm"])
    return {"probs": probs.astype(F32).reshape(-1), "idx": idx.astype(np.int32).reshape(-1),
            "dw": rng.normal(size=T * k).astype(F32)}


def topk_backward_parts(case, inputs):
    T, E, k = case["T"], case["E"], case["k"]
    return (inputs["probs"].astype(np.float64).reshape(T, E), inputs["idx"].reshape(T, k),
            inputs["dw"].astype(np.float64).reshape(T, k))


def topk_backward_reference(case, inputs):
    probs, idx, dw = topk_backward_parts(case, inputs)
    return [{"dlogits": nn.topk_route_backward(dw, probs, idx, case["renorm"]).reshape(-1)}]


def topk_backward_tolerance(case, inputs, name, rank):
    """2^-24 (8 + 4 k) p_e (A_e + sum_j p_j A_j) (module docstring)."""
    probs, idx, dw = topk_backward_parts(case, inputs)
    if not probs.size:
        return 0.0
    sel = np.take_along_axis(probs, idx, 1)
    mag = np.abs(dw)
    if case["renorm"]:
        S = sel.sum(axis=1, keepdims=True)
        mag = (mag + (sel / S * mag).sum(axis=1, keepdims=True)) / S
    A = np.zeros_like(probs)
    np.put_along_axis(A, idx, mag, 1)
    bound = probs * (A + (sel * mag).sum(axis=1, keepdims=True))
    return (1e-30 + EPS * (8 + 4 * case["k"]) * bound).reshape(-1)


# The 0/1 parameter written as a word, in labels and in the summary of failed cases.
TOPK_WORDS = {"renorm": "renorm"}


def topk_label(case):
    p = case.params
    return f"T={p['T']} E={p['E']} k={p['k']} {spec.word(case, 'renorm')} logits {p['values']}"


def topk_facets(case):
    """k = E (the selection is a whole sort), and logits near 100."""
    return {"every expert chosen": int(case["k"] == case["E"]),
            "near 100": int(case["values"] == "high")}


def topk_locate(case, name, index, rank):
    per = case["E"] if name in ("probs", "dlogits") else case["k"]
    t, j = divmod(index, per)
    what = "expert" if per == case["E"] else "choice"
    return f"token {t}, {what} {j}: {TOPK_ROW_TEXT[topk_row_kind(t)]}"


def topk_cases(rng):
    return [{"np": 1, "T": T, "E": E, "k": k, "renorm": r, "values": v}
            for T, E, k, r, v in TOPK_CASES]


@test("topk_gradient", points=4, inputs=topk_forward_inputs, reference=topk_forward_reference,
      tolerance=topk_forward_tolerance, label=topk_label, words=TOPK_WORDS, facets=topk_facets,
      locate=topk_locate, rules=[NO_MPI], forbidden=FORBIDDEN,
      hint="per token: m = the row's max, p_e = e^(z_e - m) / sum; then k passes, each "
           "taking the largest logit not taken yet, a strict > so that the lower expert wins "
           "a tie; w_j = p of the j-th chosen, divided by the k's sum when renorm")
def topk_forward(rng):
    return topk_cases(rng)


@test("topk_gradient", points=4, inputs=topk_backward_inputs,
      reference=topk_backward_reference, tolerance=topk_backward_tolerance, label=topk_label,
      words=TOPK_WORDS,
      facets=topk_facets, locate=topk_locate, rules=[NO_MPI], forbidden=FORBIDDEN,
      hint="dp (a vector of E, zero except at the chosen): dw_j, or with renorm (dw_j - "
           "sum_i dw_i w_i) / S, S the chosen probabilities' sum; then the softmax's "
           "backward over the whole row: dlogits_e = p_e (dp_e - sum_i p_i dp_i), written "
           "(=) for every expert, the unchosen ones included")
def topk_backward(rng):
    return topk_cases(rng)


# ------------------------------------------------------------ the sigmoid gate

GATE_ROWS = ("top tie", "steered", "k-th tie", "all equal", "steered")
GATE_ROW_TEXT = {"top tie": "its top two tied", "steered": "the bias changes its choice",
                 "k-th tie": "a tie at the k-th choice", "all equal": "every logit equal"}

# (T, E, k): k = 1, 2, E; T = 0.
GATE_CASES = [(5, 4, 1), (8, 8, 2), (10, 6, 2), (0, 4, 2), (32, 16, 2), (6, 5, 5),
              (12, 16, 4), (7, 8, 3)]


def gate_row_kind(t):
    return GATE_ROWS[t % len(GATE_ROWS)]


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-np.asarray(z, dtype=np.float64)))


def gate_select(s, bias, k):
    """idx (T x k) of the top k of s + bias, by decreasing value, of equal ones the lower
    expert first."""
    v = np.asarray(s, dtype=np.float64) + np.asarray(bias, dtype=np.float64)
    return np.argsort(-v, axis=1, kind="stable")[:, :k].astype(np.int32)


def gate_forward(logits, bias, k):
    """(scores, idx, w) of DeepSeek-V3's gate, float64."""
    s = sigmoid(logits)
    idx = gate_select(s, bias, k)
    chosen = np.take_along_axis(s, idx, 1)
    w = chosen / chosen.sum(axis=1, keepdims=True) if s.size else chosen
    return s, idx, w


def logit(p):
    return np.log(p / (1.0 - p))


def gate_bias(E, rng):
    """Biases, multiples of 1/64 in [-1/4, 1/4], and the case's tie pair (a < b), which
    shares the largest bias; every other bias is below it."""
    if E < 2:
        return (rng.integers(-16, 17, size=E) / 64.0).astype(F32), None
    top = int(rng.integers(0, 17))
    bias = rng.integers(-16, top, size=E) / 64.0
    a, b = sorted(rng.choice(E, 2, replace=False))
    bias[a] = bias[b] = top / 64.0
    return bias.astype(F32), (a, b)


def gate_row(kind, E, k, bias, pair, rng):
    """One token's float32 logits of the kind."""
    b64 = bias.astype(np.float64)
    for _ in range(1000):
        z = (rng.normal(size=E) * 1.5).astype(F32)
        if pair is not None:
            a, b = pair
            others = [e for e in range(E) if e not in pair]
            if kind == "top tie":
                z[a] = z[b] = z.max() + F32(1.0)
            elif kind == "k-th tie" and others:
                # the pair's s + bias between the others' (k-1)-th and k-th: one of the
                # two chosen, the other not (k >= E - 1: the pair below every other)
                u = np.sort(sigmoid(z[others]) + b64[others])[::-1]
                above = min(k - 1, len(u))
                hi = u[above - 1] if above else u[0] + 0.2
                lo = u[above] if above < len(u) else u[-1] - 0.2
                target = (hi + lo) / 2 - b64[a]
                if not 0.005 < target < 0.995:
                    continue
                z[a] = z[b] = F32(logit(target))
            elif kind == "all equal":
                z[:] = z[0]
        if kind == "steered" and E > 1:
            s = sigmoid(z)[None]
            if np.array_equal(gate_select(s, bias, k), gate_select(s, np.zeros(E), k)):
                continue
        if gaps_ok(sigmoid(z) + b64, GATE_GAP):
            return z
    raise RuntimeError(f"no gate row of kind {kind}")


def gate_forward_inputs(case, rng):
    T, E, k = case["T"], case["E"], case["k"]
    bias, pair = gate_bias(E, rng)
    z = np.zeros((T, E), F32)
    for t in range(T):
        z[t] = gate_row(gate_row_kind(t), E, k, bias, pair, rng)
    return {"logits": z.reshape(-1), "bias": bias}


def gate_forward_parts(case, inputs):
    T, E = case["T"], case["E"]
    return gate_forward(inputs["logits"].reshape(T, E), inputs["bias"], case["k"])


def gate_forward_reference(case, inputs):
    s, idx, w = gate_forward_parts(case, inputs)
    return [{"scores": s.reshape(-1), "idx": idx.reshape(-1), "w": w.reshape(-1)}]


def gate_forward_tolerance(case, inputs, name, rank):
    if name == "idx":
        return 0.0
    if name == "scores":
        return Relative(1e-30, 8 * EPS)
    return Relative(1e-30, (16 + 2 * case["k"]) * EPS)


def bias_never_weighs(case, inputs, outs):
    """For each token the bias steered, chosen as expected: w is the chosen scores over
    their sum, not moved by the bias."""
    T, E, k = case["T"], case["E"], case["k"]
    s, idx, w = gate_forward_parts(case, inputs)
    plain = gate_select(s, np.zeros(E), k)
    got_idx, got_w = outs[0].get("idx"), outs[0].get("w")
    if got_idx is None or got_w is None or got_idx.size != T * k or got_w.size != T * k:
        return []
    got_idx, got_w = got_idx.reshape(T, k), got_w.reshape(T, k)
    for t in range(T):
        if np.array_equal(idx[t], plain[t]) or not np.array_equal(got_idx[t], idx[t]):
            continue
        tol = (16 + 2 * k) * EPS * np.abs(w[t])
        if np.all(np.abs(got_w[t] - w[t]) <= tol):
            continue
        def show(v):
            return "[" + " ".join(f"{x:.6g}" for x in v) + "]"
        return [(0, f"token {t}: the bias changed its experts ({show(plain[t])} on the scores "
                    f"alone, {show(idx[t])} on score + bias) and got them right, but w = "
                    f"{show(got_w[t])}, where the chosen scores {show(s[t, idx[t]])} over "
                    f"their sum give {show(w[t])}: the bias chooses, it never weighs")]
    return []


def gate_label(case):
    p = case.params
    return f"T={p['T']} E={p['E']} k={p['k']}"


def gate_facets(case):
    return {"every expert chosen": int(case["k"] == case["E"])}


def gate_locate(case, name, index, rank):
    per = case["E"] if name == "scores" else case["k"]
    t, j = divmod(index, per)
    what = "expert" if name == "scores" else "choice"
    return f"token {t}, {what} {j}: {GATE_ROW_TEXT[gate_row_kind(t)]}"


@test("gate_sigmoid", points=3, inputs=gate_forward_inputs, reference=gate_forward_reference,
      tolerance=gate_forward_tolerance, label=gate_label, facets=gate_facets,
      locate=gate_locate, rules=[NO_MPI],
      check=hinted(bias_never_weighs, "the bias only ranks the experts: w_j = s_j / (sum of "
                                      "the chosen s), with s the sigmoid scores, never s + "
                                      "bias"),
      check_first=True,
      hint="s = 1 / (1 + e^-z) for every expert, on its own; k passes, each taking the "
           "largest s + bias not taken yet (a strict >, so the lower expert wins a tie); "
           "w_j = s of the j-th chosen over the sum of the chosen s")
def gate_sigmoid_forward(rng):
    return [{"np": 1, "T": T, "E": E, "k": k} for T, E, k in GATE_CASES]


# ------------------------------------------------------------ the bias update

# (T, E, k, routing, gamma): a mean k T / E that is whole (and hit exactly by some loads)
# or not; T = 0; k = E (every load the mean); experts with no token.
BIAS_CASES = [(8, 4, 2, "balanced", "0.125"), (10, 4, 1, "random", "0.125"),
              (16, 8, 2, "skewed", "0.125"), (0, 4, 2, "random", "0.125"),
              (32, 16, 2, "balanced", "0.0625"), (12, 6, 3, "random", "0.125"),
              (7, 5, 5, "random", "0.125"), (5, 16, 1, "skewed", "0.25")]


def routing_of(kind, T, E, k, rng):
    """idx (T x k, int32): k distinct experts per token. balanced: token t takes experts
    (t k + j) % E, then a few choices moved (their experts one under the mean, one over, the
    rest exactly at it when E divides k T); skewed: the low experts favoured, the top
    quarter never chosen; random: uniform."""
    idx = np.zeros((T, k), np.int32)
    for t in range(T):
        if kind == "balanced":
            idx[t] = [(t * k + j) % E for j in range(k)]
        elif kind == "skewed":
            top = max(k, E - max(1, E // 4))
            p = 0.6 ** np.arange(top)
            idx[t] = rng.choice(top, k, replace=False, p=p / p.sum())
        else:
            idx[t] = rng.choice(E, k, replace=False)
    if kind == "balanced" and T and k < E:
        for _ in range(2):
            t, j = rng.integers(T), rng.integers(k)
            free = [e for e in range(E) if e not in idx[t]]
            idx[t, j] = rng.choice(free)
    return idx


def bias_update_inputs(case, rng):
    T, E, k = case["T"], case["E"], case["k"]
    bias = (rng.integers(-32, 33, size=E) / 64.0).astype(F32)
    steps = np.stack([routing_of(case["routing"], T, E, k, rng) for _ in range(2)])
    return {"bias": bias, "idx": steps.reshape(-1)}


def bias_update_steps(case, inputs):
    """[(loads, bias before, bias after)] of the two steps, float64 (exact)."""
    T, E, k = case["T"], case["E"], case["k"]
    gamma = float(F32(case["gamma"]))
    bias = inputs["bias"].astype(np.float64)
    out = []
    for idx in inputs["idx"].reshape(2, T * k):
        load = np.bincount(idx, minlength=E)
        after = bias + gamma * np.sign(k * T - load * E)
        out.append((load, bias, after))
        bias = after
    return out


def bias_update_reference(case, inputs):
    steps = bias_update_steps(case, inputs)
    return [{"step0_bias": steps[0][2], "step1_bias": steps[1][2]}]


def bias_update_explained(case, inputs, outs):
    """The first wrong bias, with its expert's load against the mean."""
    T, E, k = case["T"], case["E"], case["k"]
    gamma = float(F32(case["gamma"]))
    for step, (load, before, after) in enumerate(bias_update_steps(case, inputs)):
        got = outs[0].get(f"step{step}_bias")
        if got is None or got.size != E:
            return []
        for i in range(E):
            if got[i] == after[i]:
                continue
            have, mean = load[i] * E, k * T
            side = ("under" if have < mean else "over" if have > mean else "exactly at")
            move = {"under": f"+ gamma = {after[i]:g}", "over": f"- gamma = {after[i]:g}",
                    "exactly at": f"unchanged, {after[i]:g}"}[side]
            sign = "<" if have < mean else ">" if have > mean else "=="
            start = (" (the bias the first step left)" if step else "")
            return [(0, f"step {step}, expert {i}: load {load[i]} of the T k = {T * k} "
                        f"choices, {side} the mean k T / E = {k * T / E:g} (load E = {have} "
                        f"{sign} k T = {mean}): its bias {before[i]:g}{start} should be "
                        f"{move} (gamma {gamma:g}), got {got[i]:.9g}")]
    return []


def bias_update_label(case):
    p = case.params
    return f"T={p['T']} E={p['E']} k={p['k']} routing {p['routing']} gamma={p['gamma']}"


def bias_update_facets(case):
    """Whether the mean load k T / E is a whole number."""
    return {"whole mean": int(case["k"] * case["T"] % case["E"] == 0)}


def bias_update_locate(case, name, index, rank):
    return f"expert {index}"


@test("gate_sigmoid", points=3, inputs=bias_update_inputs, reference=bias_update_reference,
      label=bias_update_label, facets=bias_update_facets, locate=bias_update_locate,
      rules=[NO_MPI], check=bias_update_explained, check_first=True,
      hint="count each expert's load over all T k entries of idx; compare load_i E with k T "
           "in integers (k T / E need not be whole): less, bias_i += gamma; more, bias_i -= "
           "gamma; equal, leave it. No gradient, no proportional step: a fixed gamma")
def gate_bias_update(rng):
    return [{"np": 1, "T": T, "E": E, "k": k, "routing": r, "gamma": g}
            for T, E, k, r, g in BIAS_CASES]


# ------------------------------------------------------ the sequence-wise loss

# (T, E, k, routing, alpha): uniform (the loss is alpha), the gate's own routing, skewed
# (experts with no token); k = 1, 2, E; T = 0.
LOSS_CASES = [(8, 4, 2, "gated", "0.3"), (8, 4, 2, "uniform", "0.01"),
              (16, 8, 2, "skewed", "0.3"), (0, 4, 2, "gated", "0.3"),
              (32, 16, 4, "gated", "0.01"), (12, 6, 1, "skewed", "1.5"),
              (16, 8, 8, "gated", "0.3"), (16, 16, 2, "uniform", "0.3"),
              (9, 5, 3, "gated", "1.5")]


def seq_loss_and_grad(logits, idx, E, k, alpha):
    """(loss, dlogits) of DeepSeek-V3's sequence-wise balance loss, float64: alpha sum_i f_i
    P_i, f_i = E/(k T) load_i (no gradient), P_i = (1/T) sum_t s'_ti, s' = s / sum_j s_tj,
    s = sigmoid(logits); dlogits through P: dL/ds'_ti = alpha f_i / T, then s' = s / S
    (ds_j = (g_j - sum_i g_i s'_i) / S) and the sigmoid (s (1 - s))."""
    z = np.asarray(logits, dtype=np.float64)
    T = z.shape[0]
    if T == 0:
        return 0.0, np.zeros_like(z)
    s = sigmoid(z)
    S = s.sum(axis=1, keepdims=True)
    sn = s / S
    f = np.bincount(np.asarray(idx).reshape(-1), minlength=E) * E / (k * T)
    loss = alpha * float((f * sn.mean(axis=0)).sum())
    g = alpha * f / T
    ds = (g[None] - (g[None] * sn).sum(axis=1, keepdims=True)) / S
    return loss, ds * s * (1 - s)


def _check_seq_loss_gradient():
    """seq_loss_and_grad's dlogits against central differences of its loss (float64), at
    import: a wrong reference is the grader's bug, not the student's."""
    rng = np.random.default_rng(7)
    for T, E, k in ((5, 4, 2), (3, 6, 1), (4, 3, 2)):
        z = rng.normal(size=(T, E)) * 2
        idx = np.argsort(-rng.random((T, E)), axis=1)[:, :k]
        _, grad = seq_loss_and_grad(z, idx, E, k, 0.7)
        h, num = 1e-6, np.zeros_like(z)
        for i in np.ndindex(z.shape):
            zp, zm = z.copy(), z.copy()
            zp[i] += h
            zm[i] -= h
            num[i] = (seq_loss_and_grad(zp, idx, E, k, 0.7)[0] -
                      seq_loss_and_grad(zm, idx, E, k, 0.7)[0]) / (2 * h)
        err = np.abs(num - grad).max() / np.abs(grad).max()
        assert err < 1e-6, f"seq_loss_and_grad's gradient is off by {err:.1e} (relative)"


checked.once(_check_seq_loss_gradient)


def loss_inputs(case, rng):
    T, E, k = case["T"], case["E"], case["k"]
    kind = case["routing"]
    if kind == "uniform":
        # every score of a token equal, every load the mean: f_i = 1, P_i = 1/E
        z = np.repeat(rng.normal(size=(T, 1)) * 2, E, axis=1)
        idx = np.array([[(t * k + j) % E for j in range(k)] for t in range(T)],
                       np.int32).reshape(T, k)
    else:
        z = rng.normal(size=(T, E)) * 2
        if kind == "skewed":
            z += np.where(np.arange(E) >= E - max(1, E // 4), -8.0, 0.0) - np.arange(E) * 0.3
        bias = rng.integers(-16, 17, size=E) / 64.0 if kind == "gated" else np.zeros(E)
        idx = gate_select(sigmoid(z.astype(F32)), bias, k)
    return {"logits": z.astype(F32).reshape(-1), "idx": idx.astype(np.int32).reshape(-1)}


def loss_parts(case, inputs):
    T, E, k = case["T"], case["E"], case["k"]
    alpha = float(F32(case["alpha"]))
    z = inputs["logits"].astype(np.float64).reshape(T, E)
    return z, inputs["idx"].reshape(T, k), alpha


def loss_reference(case, inputs):
    z, idx, alpha = loss_parts(case, inputs)
    loss, grad = seq_loss_and_grad(z, idx, case["E"], case["k"], alpha)
    return [{"loss": np.array([loss]), "dlogits": grad.reshape(-1)}]


def loss_tolerance(case, inputs, name, rank):
    """The loss: 2^-24 (32 + 2T + 4E) |loss|; dlogits: 2^-24 ((16 + 4E) s (1 - s) + 4 s)
    alpha/T (f_j + sum_i f_i s'_i) / S (module docstring)."""
    T, E, k = case["T"], case["E"], case["k"]
    if name == "loss":
        return Relative(1e-30, EPS * (32 + 2 * T + 4 * E))
    z, idx, alpha = loss_parts(case, inputs)
    if not T:
        return 0.0
    s = sigmoid(z)
    S = s.sum(axis=1, keepdims=True)
    f = np.bincount(idx.reshape(-1), minlength=E) * E / (k * T)
    mag = alpha / T * (f[None] + (f[None] * s / S).sum(axis=1, keepdims=True)) / S
    return (1e-30 + EPS * ((16 + 4 * E) * s * (1 - s) + 4 * s) * mag).reshape(-1)


def loss_label(case):
    p = case.params
    return f"T={p['T']} E={p['E']} k={p['k']} routing {p['routing']} alpha={p['alpha']}"


def loss_facets(case):
    return {"every expert chosen": int(case["k"] == case["E"])}


def loss_locate(case, name, index, rank):
    if name == "loss":
        return None
    t, e = divmod(index, case["E"])
    return f"token {t}, expert {e}"


@test("gate_sigmoid", points=4, inputs=loss_inputs, reference=loss_reference,
      tolerance=loss_tolerance, label=loss_label, facets=loss_facets, locate=loss_locate,
      rules=[NO_MPI],
      hint="f_i = E / (k T) times expert i's count in idx (no gradient); s' = each token's "
           "sigmoid scores over their row's sum (all E experts, not the chosen); the loss "
           "alpha sum_i f_i (mean over t of s'_ti). Backward: g_i = alpha f_i / T, ds_j = (g_j "
           "- sum_i g_i s'_i) / S, dlogits = ds s (1 - s), written (=)")
def seq_balance_loss(rng):
    return [{"np": 1, "T": T, "E": E, "k": k, "routing": r, "alpha": a}
            for T, E, k, r, a in LOSS_CASES]
