"""col_parallel_linear.c and row_parallel_linear.c: the two halves of Megatron's
tensor-parallel linear layer.

References are the unsharded layer y = x W + b in float64 (nn.linear), cut
afterwards into the rank's block by the split rule (tp.block): the column
layer's y, dW, db are column blocks of the whole layer's; the row layer's x,
dx, dW are row blocks. Inputs are random, W different in every block, dy
random (never ones), and the gradients that accumulate arrive holding
random values, so `=` where `+=` belongs shows.

Shapes: out (or in, for the row layer) 1, fewer than np, not divisible by np
and divisible; rows 1 and more; with and without bias. At np = 8 with out = 5
three ranks hold no column at all and must still take part.

Tolerance: a float32 sum of k products is off by about k 2^-24 times the sum
of the products' magnitudes, so each element's bound is 1e-5 times the same
product with every term replaced by its absolute value (tp.matmul_tolerance);
an all-reduce adds np more roundings of terms of that size, which the factor
covers (k + np <= 40 here).
"""

import numpy as np

from spec import NPS, hinted, test
from lectures.lc4_tp.tp import (block, collectives_exactly, columns, identical_on_ranks,
                                matmul_tolerance, no_communication, shape_locator)

# (rows, in, out): out not divisible by 2, 3, 4 or 8; out < np; out = 1.
COL_SHAPES = [(3, 5, 7), (1, 4, 9), (4, 16, 13), (2, 3, 2), (5, 6, 1), (2, 8, 12)]


def linear_label(case):
    p = case.params
    return (f"np={case.np} rows={p['rows']} in={p['in']} out={p['out']}"
            f"{'' if p['bias'] else ' no bias'}")


def linear_cases(rng):
    out = []
    for n in NPS:
        if n == 5:
            continue
        for k, (rows, inp, o) in enumerate(COL_SHAPES):
            out.append({"np": n, "rows": rows, "in": inp, "out": o, "bias": int(k % 3 != 1)})
    return out


def linear_facets(case):
    """Whether np divides the split dimension, and whether some rank holds none of it."""
    split = case["out"] if case.test.exercise == "col_parallel_linear" else case["in"]
    return {"split%np": split % case.np, "empty block": int(split < case.np)}


def full_layer(case, rng):
    """x, W, b, dy of the whole layer, float32, random; dW0 and db0 to accumulate into."""
    rows, inp, out = case["rows"], case["in"], case["out"]
    f = np.float32
    return {"x": rng.normal(size=(rows, inp)).astype(f),
            "w": rng.normal(size=(inp, out)).astype(f) / f(np.sqrt(inp)),
            "b": rng.normal(size=out).astype(f),
            "dy": rng.normal(size=(rows, out)).astype(f),
            "dw0": rng.normal(size=(inp, out)).astype(f),
            "db0": rng.normal(size=out).astype(f)}


# ----------------------------------------------------------- column-parallel

def col_inputs(case, rng):
    L = full_layer(case, rng)
    n = case.np
    per_rank = {"w": [columns(L["w"], n, r) for r in range(n)],
                "b": [L["b"][slice(*span(case["out"], n, r))] for r in range(n)],
                "dy": [columns(L["dy"], n, r) for r in range(n)],
                "dw": [columns(L["dw0"], n, r) for r in range(n)],
                "db": [L["db0"][slice(*span(case["out"], n, r))] for r in range(n)]}
    inputs = {"x": L["x"].reshape(-1)}
    if case["fn"] == "col_linear_forward":
        inputs.update(w=per_rank["w"], b=per_rank["b"])
    elif case["fn"] == "col_linear_backward":
        inputs.update(w=per_rank["w"], dy=per_rank["dy"], dw=per_rank["dw"], db=per_rank["db"])
    else:
        y = L["x"] @ L["w"]
        inputs = {"y_local": [columns(y, n, r).reshape(-1) for r in range(n)]}
    if not case["bias"]:
        inputs.pop("b", None)
        inputs.pop("db", None)
    return {k: ([a.reshape(-1) for a in v] if isinstance(v, list) else v)
            for k, v in inputs.items()}


def span(n, np_, r):
    lo, count = block(n, np_, r)
    return lo, lo + count


def joined_columns(case, inputs, name, nrows):
    """The whole matrix, float64, from every rank's column block of `name` (nrows x
    count_r each, count_r possibly 0)."""
    return np.concatenate([inputs[name][r].astype(np.float64).reshape(nrows, -1)
                           for r in range(case.np)], axis=1)


def col_reference(case, inputs):
    rows, inp, out, n = case["rows"], case["in"], case["out"], case.np
    fn = case["fn"]
    if fn == "col_linear_gather":
        y = joined_columns(case, inputs, "y_local", rows)
        return [{"y": y.reshape(-1)} for _ in range(n)]
    x = inputs["x"].astype(np.float64).reshape(rows, inp)
    w = joined_columns(case, inputs, "w", inp)
    if fn == "col_linear_forward":
        y = x @ w + (np.concatenate(inputs["b"]).astype(np.float64) if case["bias"] else 0.0)
        return [{"y": columns(y, n, r).reshape(-1)} for r in range(n)]
    dy = joined_columns(case, inputs, "dy", rows)
    dx = dy @ w.T
    dw = x.T @ dy
    outs = []
    for r in range(n):
        lo, hi = span(out, n, r)
        mine = {"dx": dx.reshape(-1),
                "dw": (inputs["dw"][r].astype(np.float64) + dw[:, lo:hi].reshape(-1))}
        if case["bias"]:
            mine["db"] = inputs["db"][r].astype(np.float64) + dy[:, lo:hi].sum(axis=0)
        outs.append(mine)
    return outs


def col_tolerance(case, inputs, name, rank):
    rows, inp, out, n = case["rows"], case["in"], case["out"], case.np
    x = inputs.get("x")
    x = None if x is None else np.abs(x.astype(np.float64).reshape(rows, inp))
    fn = case["fn"]
    if fn == "col_linear_gather":
        return 0.0
    if fn == "col_linear_forward":
        w = np.abs(inputs["w"][rank].astype(np.float64).reshape(inp, -1))
        b = np.abs(inputs["b"][rank]) if case["bias"] else 0.0
        return matmul_tolerance(x @ w + b)
    w = np.abs(joined_columns(case, inputs, "w", inp))
    dy = np.abs(joined_columns(case, inputs, "dy", rows))
    lo, hi = span(out, n, rank)
    if name == "dx":
        return matmul_tolerance(dy @ w.T)
    if name == "dw":
        return matmul_tolerance(np.abs(inputs["dw"][rank]).reshape(inp, -1) + x.T @ dy[:, lo:hi])
    return matmul_tolerance(np.abs(inputs["db"][rank]) + dy[:, lo:hi].sum(axis=0))


def col_shapes(case, name, rank):
    rows, inp, out = case["rows"], case["in"], case["out"]
    local = block(out, case.np, rank)[1]
    return {"y": (rows, out if case["fn"] == "col_linear_gather" else local),
            "dx": (rows, inp), "dw": (inp, local), "db": (local,)}.get(name)


DX_IDENTICAL = hinted(
    identical_on_ranks(["dx"], "every rank continues backward from the same dx, so it must "
                               "be the all-reduced sum on every rank, bit for bit"),
    "cause: the ranks hold different input gradients: MPI_Allreduce gives every rank the "
    "same sum; MPI_Reduce leaves it on the root only")


@test("col_parallel_linear", points=5, inputs=col_inputs, reference=col_reference,
      tolerance=col_tolerance, label=linear_label, facets=linear_facets,
      locate=shape_locator(col_shapes),
      rules=[no_communication("the column-parallel forward")],
      hint="y_r = x W_r + b_r: the rank's own columns; x is whole on every rank")
def col_linear_forward(rng):
    return linear_cases(rng)


@test("col_parallel_linear", points=6, inputs=col_inputs, reference=col_reference,
      tolerance=col_tolerance, label=linear_label, facets=linear_facets,
      locate=shape_locator(col_shapes), check=DX_IDENTICAL, check_first=True,
      rules=[collectives_exactly(lambda c, i, r: [("MPI_Allreduce", c["rows"] * c["in"])],
                                 "one all-reduce of rows*in floats: dx")],
      hint="dW_r += x^T dy_r and db_r += the column sums of dy_r stay local; "
           "dx = dy_r W_r^T is only this block's share: all-reduce it (SUM) over comm")
def col_linear_backward(rng):
    return linear_cases(rng)


@test("col_parallel_linear", points=4, inputs=col_inputs, reference=col_reference,
      tolerance=col_tolerance, label=linear_label, facets=linear_facets,
      locate=shape_locator(col_shapes),
      rules=[collectives_exactly(
          lambda c, i, r: [(("MPI_Allgatherv", "MPI_Allgather"),
                            c["rows"] * block(c["out"], c.np, r)[1])],
          "one all-gather of this rank's rows*out_local floats")],
      hint="block r is rows x count_r contiguous in y_local but count_r columns every out "
           "floats in y: gather the blocks contiguously, then copy each row of each block "
           "to its columns")
def col_linear_gather(rng):
    return linear_cases(rng)



