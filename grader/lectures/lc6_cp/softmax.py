"""online_softmax.c, softmax_backward.c and ring_online_softmax.c: the softmax pieces
that attention blocks are merged by.

References, float64, from the definitions: softmax(x)_i = e^(x_i - max x) / sum_j
e^(x_j - max x) over the whole vector (entries of -inf give 0); the merge of two
normalized results by their log-sum-exps (nn.lse_merge, the NumPy twin of libxt's
xt_lse_merge: weights e^lse / (e^lse + e^lse_blk), a -inf side weighing nothing, two
-inf sides giving o = 0, lse = -inf); the softmax backward through its Jacobian, dx =
(diag(y) - y y^T) dy per row, built whole.

Inputs, random and fresh every run:
  - online_softmax: x of n = 1 to 100 in blocks of 1 to 16 (the last shorter, a block
    of 1, a block >= n), drawn as: normal (scale 3); rising (a ramp from -20 to 20, so
    the max grows block after block and the running sum must be rescaled); high, low
    and mixed (near +1e4, -1e4, or both: e^x without the max overflows or underflows);
    deep (near -1e5) and far (-1e35 to -3e35: any finite starting max above them, such
    as -1e4 or -1e30, is never replaced); masked (entries of -inf, the whole first
    block among them, but never all of x).
  - lse_merge: rows x d of o and o_blk (normal), their lse by row, cycling through: both
    normal; both near +1e4; both near -1e4; 30 to 120 apart; and in the masked cases
    lse_blk -inf (o_blk NaN), lse -inf (o NaN), both -inf (both NaN): a -inf side's
    output may hold anything.
  - softmax_backward: y the float32 softmax of random logits per row (scale 1, 10, or
    with entries of -inf, so y holds exact zeros), dy normal.
  - ring_online_softmax: a vector of T = 1 to 40 cut by xt_block over np = 1 to 4 (ranks
    holding nothing where T < np), normal, rising, high or mixed.

Tolerances (per element; float32 roundings; measured with grade.py --margins over seeds
1 to 8, the worst passing error as a fraction of the bound):
  - y of either softmax: |got - want| <= 1e-30 + 2^-24 (16 + 2 |x_i - M| + 3 n) y_i, M the
    max and n the length of the whole vector; 1e-30 where x_i is -inf (y_i exactly 0).
    e^(x_i - M) carries the rounding of its argument, up to |x_i - M| 2^-24 relative (the
    argument reaches 40 on the ramps; the factor 2 leaves room for a program that forms
    it in two steps, e^(x - m_block) e^(m_block - M)); the sum of n terms errs by about
    n 2^-24, each rescale, the exp and the division by one rounding more. Worst: 0.32 (online, a ramp),
    0.32 (ring).
  - lse_merge: o within 2^-20 (|o| + |o_blk|) of the sides that carry weight (a convex
    combination, rounded in each weight, product and the division); lse within 1e-6 +
    2^-22 |lse| (a float's step near 1e4 is 2^-10: half a step is 2^-24 relative, and
    m + log(sum) rounds once more). Worst: 0.20 (lse; o below it).
  - softmax_backward: 2^-24 (4 + cols) y_j (|dy_j| + sum_i y_i |dy_i|): s = sum y dy errs
    by at most about cols roundings of sum |y dy|, dy_j - s and the product by one each.
    Worst: 0.33 (nearly one-hot rows).
Every defect changes a value by much more: the sum never rescaled (a factor e^(m_old -
m_new)), a block dropped (unless its weight is below float32's resolution), a finite
initial max (0 / 0: NaN), the max for the LSE (off by up to log 2), the sum of dy for the
sum of y dy.
"""

import numpy as np

import nn
from spec import Relative, hinted, test
from lectures.lc4_tp.tp import no_communication
from lectures.lc6_cp.cp import NPS, ring_messages

F32 = np.float32
EPS = 2.0 ** -24

FORBIDDEN = [(r"^xt_softmax_rows$",
              "calls {}, libxt's copy of what this exercise writes: write it yourself"),
             (r"^xt_lse_merge$",
              "calls {}, the lecture kit's copy of what this exercise writes: write it yourself")]

NO_MPI = no_communication("this function", has_comm=False)


def softmax(x):
    """The definition in float64: e^(x - max) / sum; entries of -inf give 0."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        e = np.exp(x - x.max())
    return e / e.sum()


def softmax_tolerance(x):
    """Per element of softmax(x): 1e-30 + 2^-24 (16 + 2 |x_i - max x| + 3 n) y_i (module
    docstring); 1e-30 where x_i is -inf (y_i = 0 exactly)."""
    x = np.asarray(x, dtype=np.float64)
    gap = np.abs(np.where(np.isfinite(x), x, 0.0) - x.max())
    return 1e-30 + EPS * (16 + 2 * gap + 3 * x.size) * softmax(x)


# ------------------------------------------------------------- online softmax

# (kind, [(n, block), ...]): every kind at several lengths, blocks of 1, blocks >= n,
# n not a multiple of the block, n = 1.
ONLINE = [("normal", [(1, 1), (7, 3), (10, 1), (100, 7)]),
          ("rising", [(12, 4), (37, 8), (6, 16), (5, 5)]),
          ("high", [(1, 4), (7, 3), (37, 8)]),
          ("low", [(12, 4), (10, 1)]),
          ("mixed", [(100, 7), (6, 16), (37, 8)]),
          ("deep", [(7, 3), (5, 5), (1, 1)]),
          ("far", [(12, 4), (7, 3), (1, 4)]),
          ("masked", [(7, 3), (12, 4), (10, 1), (37, 8)])]


def vector(kind, n, block, rng):
    """n float32 values of the kind (module docstring)."""
    noise = rng.normal(size=n)
    if kind == "normal":
        x = 3 * noise
    elif kind == "rising":
        x = np.linspace(-20, 20, n) + noise
    elif kind == "high":
        x = 1e4 + 5 * noise
    elif kind == "low":
        x = -1e4 + 5 * noise
    elif kind == "mixed":
        x = np.where(np.arange(n) % 2 == rng.integers(2), 1e4, -1e4) + 5 * noise
    elif kind == "deep":
        x = -1e5 + 3 * noise
    elif kind == "far":
        x = -1e35 * rng.choice([1.0, 2.0, 3.0], size=n)
        x[rng.integers(n)] = -1e35
    elif kind == "masked":
        x = 3 * noise
        x[rng.random(n) < 0.4] = -np.inf
        x[:block] = -np.inf
        if np.all(np.isinf(x)):
            x[rng.integers(block, n)] = 3 * noise[0]
    else:
        raise ValueError(kind)
    return x.astype(F32)


def online_label(case):
    return f"n={case['n']} block={case['block']} {case['values']}"


def online_facets(case):
    """Whether the last block is short, and whether there is more than one block."""
    n, b = case["n"], case["block"]
    return {"short last block": int(n % b != 0), "one block": int(n <= b)}


def online_inputs(case, rng):
    return {"x": vector(case["values"], case["n"], case["block"], rng)}


def online_reference(case, inputs):
    return [{"y": softmax(inputs["x"])}]


def online_tolerance(case, inputs, name, rank):
    return softmax_tolerance(inputs["x"])


def online_locate(case, name, index, rank):
    b = case["block"]
    return f"block {index // b}, its element {index % b}"


@test("online_softmax", points=4, inputs=online_inputs, reference=online_reference,
      tolerance=online_tolerance, label=online_label, facets=online_facets,
      locate=online_locate, rules=[NO_MPI], forbidden=FORBIDDEN,
      hint="keep (m, s) for the blocks so far, m starting at -inf and s at 0; for each block "
           "(the last may be shorter) find its max, m' = max(m, block max), s = s e^(m - m') "
           "+ sum of e^(x - m') over the block; a block of -inf only changes nothing; "
           "finally y = e^(x - m) / s")
def online_softmax(rng):
    return [{"np": 1, "n": n, "block": b, "values": kind}
            for kind, sizes in ONLINE for n, b in sizes]


# ------------------------------------------------------------------- the merge

# A row's kind: its lse and lse_blk; the masked cases add the -inf rows, first.
ROW_KINDS = ("normal", "high", "low", "apart")
MASKED_ROW_KINDS = ("lse_blk -inf", "lse -inf", "both -inf") + ROW_KINDS
MERGES = [("finite", 1, 1), ("finite", 7, 4), ("finite", 16, 3), ("finite", 5, 64),
          ("masked", 1, 2), ("masked", 3, 1), ("masked", 7, 4), ("masked", 33, 8),
          ("masked", 14, 16)]


def row_kind(case, i):
    kinds = MASKED_ROW_KINDS if case["rows_of"] == "masked" else ROW_KINDS
    return kinds[i % len(kinds)]


def merge_inputs(case, rng):
    rows, d = case["rows"], case["d"]
    o, o_blk = rng.normal(size=(2, rows, d))
    lse, lse_blk = rng.normal(size=(2, rows)) * 2
    for i in range(rows):
        kind = row_kind(case, i)
        if kind == "high":
            lse[i] += 1e4
            lse_blk[i] += 1e4
        elif kind == "low":
            lse[i] -= 1e4
            lse_blk[i] -= 1e4
        elif kind == "apart":
            gap = rng.uniform(30, 120) * rng.choice([-1.0, 1.0])
            lse_blk[i] = lse[i] + gap
        if kind in ("lse -inf", "both -inf"):
            lse[i], o[i] = -np.inf, np.nan
        if kind in ("lse_blk -inf", "both -inf"):
            lse_blk[i], o_blk[i] = -np.inf, np.nan
    return {"o": o.astype(F32).reshape(-1), "lse": lse.astype(F32),
            "o_blk": o_blk.astype(F32).reshape(-1), "lse_blk": lse_blk.astype(F32)}


def merge_label(case):
    return f"rows={case['rows']} d={case['d']} {case['rows_of']}"


def merge_facets(case):
    """Whether some row has an lse near +-1e4, and whether some row has a -inf side."""
    kinds = {row_kind(case, i) for i in range(case["rows"])}
    return {"lse near 1e4": int(bool(kinds & {"high", "low"})),
            "-inf rows": int(any("inf" in k for k in kinds))}


def merge_reference(case, inputs):
    rows, d = case["rows"], case["d"]
    o, lse = nn.lse_merge(inputs["o"].reshape(rows, d), inputs["lse"],
                          inputs["o_blk"].reshape(rows, d), inputs["lse_blk"])
    return [{"o": o.reshape(-1), "lse": lse}]


def merge_tolerance(case, inputs, name, rank):
    """o: 2^-20 (|o| + |o_blk|) over the sides with weight; lse: 1e-6 + 2^-22 |lse|."""
    if name == "lse":
        return Relative(1e-6, 2.0 ** -22)
    rows, d = case["rows"], case["d"]
    mag = np.zeros((rows, d))
    for side, lse in (("o", "lse"), ("o_blk", "lse_blk")):
        live = np.isfinite(inputs[lse])[:, None]
        mag += np.where(live, np.abs(np.nan_to_num(inputs[side].reshape(rows, d))), 0.0)
    return (2.0 ** -20 * mag + 1e-30).reshape(-1)


def merge_locate(case, name, index, rank):
    if name == "lse":
        return f"row {index}: {row_kind(case, index)}"
    i, c = divmod(index, case["d"])
    return f"row {i}, column {c}: {row_kind(case, i)}"


@test("online_softmax", points=4, inputs=merge_inputs, reference=merge_reference,
      tolerance=merge_tolerance, label=merge_label, facets=merge_facets, locate=merge_locate,
      rules=[NO_MPI], forbidden=FORBIDDEN,
      hint="per row, m = max(lse, lse_blk); the weights e^(lse - m) and e^(lse_blk - m) over "
           "their sum; lse = m + log(sum). A -inf side has weight 0, and 0 x NaN is NaN: "
           "treat a -inf side first (keep o, take o_blk, or both -inf: o = 0)")
def lse_merge(rng):
    return [{"np": 1, "rows": rows, "d": d, "rows_of": kind} for kind, rows, d in MERGES]


# ----------------------------------------------------------- softmax backward

BACKWARD = [(1, 1, "plain"), (3, 5, "plain"), (4, 17, "peaked"), (8, 33, "masked"),
            (2, 257, "plain"), (16, 8, "peaked"), (5, 12, "masked"), (1, 40, "plain"),
            (6, 64, "plain")]


def backward_inputs(case, rng):
    rows, cols = case["rows"], case["cols"]
    logits = rng.normal(size=(rows, cols)) * (10.0 if case["y"] == "peaked" else 1.0)
    if case["y"] == "masked":
        logits[rng.random((rows, cols)) < 0.3] = -np.inf
        logits[np.arange(rows), rng.integers(cols, size=rows)] = rng.normal(size=rows)
    y = np.stack([softmax(row) for row in logits]).astype(F32)
    return {"y": y.reshape(-1), "dy": rng.normal(size=rows * cols).astype(F32)}


def backward_reference(case, inputs):
    rows, cols = case["rows"], case["cols"]
    y = inputs["y"].astype(np.float64).reshape(rows, cols)
    dy = inputs["dy"].astype(np.float64).reshape(rows, cols)
    dx = np.stack([(np.diag(yi) - np.outer(yi, yi)) @ gi for yi, gi in zip(y, dy)])
    return [{"dx": dx.reshape(-1)}]


def backward_tolerance(case, inputs, name, rank):
    """2^-24 (4 + cols) y_i (|dy_i| + sum_j y_j |dy_j|)."""
    rows, cols = case["rows"], case["cols"]
    y = inputs["y"].astype(np.float64).reshape(rows, cols)
    dy = np.abs(inputs["dy"].astype(np.float64).reshape(rows, cols))
    mag = y * (dy + (y * dy).sum(axis=1, keepdims=True))
    return (EPS * (4 + cols) * mag + 1e-30).reshape(-1)


def backward_label(case):
    return f"rows={case['rows']} cols={case['cols']} y {case['y']}"


def backward_facets(case):
    """One row (a sum shared across rows cannot show), one column (y = 1, dx = 0)."""
    return {"one row": int(case["rows"] == 1), "one column": int(case["cols"] == 1)}


def backward_locate(case, name, index, rank):
    i, j = divmod(index, case["cols"])
    return f"row {i}, column {j} of {case['rows']} x {case['cols']}"


@test("softmax_backward", points=4, inputs=backward_inputs, reference=backward_reference,
      tolerance=backward_tolerance, label=backward_label, facets=backward_facets,
      locate=backward_locate, rules=[NO_MPI],
      hint="per row, s = sum over j of y_j dy_j (one number), then dx_j = y_j (dy_j - s): "
           "the Jacobian diag(y) - y y^T applied to dy without ever building it")
def softmax_backward(rng):
    return [{"np": 1, "rows": r, "cols": c, "y": kind} for r, c, kind in BACKWARD]


# ------------------------------------------------------------- the ring

RING_T = (1, 2, 5, 13, 40)
RING_VALUES = ("normal", "rising", "high", "mixed")


def ring_inputs(case, rng):
    x = vector(case["values"], case["T"], 1, rng)
    return {"x": [x[lo:lo + count] for lo, count in
                  (nn.block(case["T"], case.np, r) for r in range(case.np))]}


def ring_reference(case, inputs):
    y = softmax(np.concatenate(inputs["x"]))
    return [{"y": y[lo:lo + count]} for lo, count in
            (nn.block(case["T"], case.np, r) for r in range(case.np))]


def ring_tolerance(case, inputs, name, rank):
    lo, count = nn.block(case["T"], case.np, rank)
    return softmax_tolerance(np.concatenate(inputs["x"]))[lo:lo + count]


def ring_label(case):
    return f"np={case.np} T={case['T']} {case['values']}"


def ring_facets(case):
    """How many ranks hold nothing (T < np), and whether np divides T."""
    return {"empty ranks": max(case.np - case["T"], 0), "T%np": case["T"] % case.np}


def ring_locate(case, name, index, rank):
    lo, _ = nn.block(case["T"], case.np, rank)
    return f"element {lo + index} of the whole vector"


@test("ring_online_softmax", points=6, inputs=ring_inputs, reference=ring_reference,
      tolerance=ring_tolerance, label=ring_label, facets=ring_facets, locate=ring_locate,
      rules=[hinted(ring_messages(lambda n: n - 1, 8, "one (max, sum) pair of 2 floats"),
                    "np-1 steps, each an MPI_Sendrecv of the 2-float pair to rank+1 from "
                    "rank-1 (or an MPI_Irecv, MPI_Send, MPI_Wait); no all-reduce")],
      hint="each rank's own pair: m = max of its x (-inf if it holds nothing), s = sum of "
           "e^(x - m); np-1 times: send the pair you hold to rank+1, receive one from rank-1, "
           "and hold your own pair merged with what arrived (it covers the blocks before "
           "yours); (-inf, 0) merged with (-inf, 0) is (-inf, 0), not NaN")
def ring_online_softmax(rng):
    return [{"np": n, "T": T, "values": RING_VALUES[(k + n) % len(RING_VALUES)]}
            for n in NPS for k, T in enumerate(RING_T)]
