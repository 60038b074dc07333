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
covers (k + np <= 40 here). Measured (grade.py --margins, 6 seeds): the worst
error was 1.6% of the bound.
"""

import numpy as np

import spec
from spec import hinted, test
from lectures.lc4_tp.tp import (NPS_LAYER, block, collectives_exactly, columns, identical_on_ranks,
                                matmul_tolerance, no_communication, rows_of, shape_locator)

# (rows, in, out): the split dimension (out for the column layer, in for the row layer)
# not divisible by 2, 3, 4 or 8, smaller than np, 1, and divisible.
COL_SHAPES = [(3, 5, 7), (1, 4, 9), (4, 16, 13), (2, 3, 2), (5, 6, 1), (2, 8, 12)]
ROW_SHAPES = [(3, 7, 5), (1, 9, 4), (4, 13, 16), (2, 2, 3), (5, 1, 6), (2, 12, 8)]


# The 0/1 parameters written as words, in labels and in the summary of failed cases.
LINEAR_WORDS = {"bias": "bias"}


def linear_label(case):
    p = case.params
    return (f"np={case.np} rows={p['rows']} in={p['in']} out={p['out']} "
            f"{spec.word(case, 'bias')}")


def linear_cases(shapes):
    out = []
    for n in NPS_LAYER:
        for k, (rows, inp, o) in enumerate(shapes):
            out.append({"np": n, "rows": rows, "in": inp, "out": o, "bias": int(k % 3 != 1)})
    return out


def linear_facets(case):
    """Whether np divides the split dimension, and whether some rank holds none of it."""
    split = case["in"] if case.test.exercise == "row_parallel_linear" else case["out"]
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
    elif case["fn"] in ("col_linear_backward", "col_linear_backward_async"):
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
      tolerance=col_tolerance, label=linear_label, words=LINEAR_WORDS, facets=linear_facets,
      locate=shape_locator(col_shapes),
      rules=[no_communication("the column-parallel forward")],
      hint="y_r = x W_r + b_r: the rank's own columns; x is whole on every rank")
def col_linear_forward(rng):
    return linear_cases(COL_SHAPES)


@test("col_parallel_linear", points=6, inputs=col_inputs, reference=col_reference,
      tolerance=col_tolerance, label=linear_label, words=LINEAR_WORDS, facets=linear_facets,
      locate=shape_locator(col_shapes), check=DX_IDENTICAL, check_first=True,
      rules=[collectives_exactly(lambda c, i, r: [("MPI_Allreduce", c["rows"] * c["in"])],
                                 "one all-reduce of rows*in floats: dx")],
      hint="dW_r += x^T dy_r and db_r += the column sums of dy_r stay local; "
           "dx = dy_r W_r^T is only this block's share: all-reduce it (SUM) over comm")
def col_linear_backward(rng):
    return linear_cases(COL_SHAPES)


@test("col_parallel_linear", points=4, inputs=col_inputs, reference=col_reference,
      tolerance=col_tolerance, label=linear_label, words=LINEAR_WORDS, facets=linear_facets,
      locate=shape_locator(col_shapes),
      rules=[collectives_exactly(
          lambda c, i, r: [(("MPI_Allgatherv", "MPI_Allgather"),
                            c["rows"] * block(c["out"], c.np, r)[1])],
          "one all-gather of this rank's rows*out_local floats")],
      hint="block r is rows x count_r contiguous in y_local but count_r columns every out "
           "floats in y: gather the blocks contiguously, then copy each row of each block "
           "to its columns")
def col_linear_gather(rng):
    return linear_cases(COL_SHAPES)


# ------------------------------------------------------ tp_async_linear.c

def dw_under_allreduce(case, inputs, records):
    """The weight gradient computed once, with the kit's xt_tp_weight_grad, while the
    all-reduce of dx (rows*in floats) was in flight: started before it, not yet complete
    after it."""
    want = case["rows"] * case["in"] * 4
    for r, rec in enumerate(records):
        calls = rec.weight_grads
        if len(calls) != 1:
            return [(r, f"rank {r} called xt_tp_weight_grad {len(calls)} times: dW and db in "
                        f"one call of the kit's, which the grader sees (its G line)")]
        g = calls[0]
        if g.pending != 1 or g.pending_bytes != want:
            before = [e.fn for e in rec.events[:g.events_before] if e.dir == "C"]
            started = (f"after {', '.join(before)}" if before else
                       "before any collective started")
            return [(r, f"rank {r} computed dW {started}, with {g.pending} exchange(s) of "
                        f"{g.pending_bytes} B in flight: the all-reduce of dx ({want} B) must "
                        f"be started before xt_tp_weight_grad and waited for after it, so "
                        f"that it runs under the dW work")]
    return []


@test("tp_async_linear", points=6, inputs=col_inputs, reference=col_reference,
      tolerance=col_tolerance, label=linear_label, words=LINEAR_WORDS, facets=linear_facets,
      locate=shape_locator(col_shapes), check=DX_IDENTICAL, check_first=True,
      rules=[collectives_exactly(lambda c, i, r: [("MPI_Iallreduce", c["rows"] * c["in"])],
                                 "one nonblocking all-reduce of rows*in floats: dx"),
             dw_under_allreduce],
      hint="dx = dy_r W_r^T first (xt_tp_input_grad); MPI_Iallreduce it in place; then "
           "xt_tp_weight_grad, which needs only x and dy; MPI_Wait last, and dx untouched "
           "until then")
def col_linear_backward_async(rng):
    return linear_cases(COL_SHAPES)





# -------------------------------------------------------------- row-parallel

def row_inputs(case, rng):
    """x and W of the whole layer cut into x's column blocks and W's row blocks; b, dy and
    db0 whole, shared by every rank (a replicated bias and its gradient are the same on
    every rank, and so is the output gradient each rank continues from)."""
    L = full_layer(case, rng)
    n = case.np
    inputs = {"x": [columns(L["x"], n, r).reshape(-1) for r in range(n)],
              "w": [rows_of(L["w"], n, r).reshape(-1) for r in range(n)]}
    if case["fn"] == "row_linear_forward":
        inputs["b"] = L["b"]
    else:
        inputs.update(dy=L["dy"].reshape(-1), db=L["db0"],
                      dw=[rows_of(L["dw0"], n, r).reshape(-1) for r in range(n)])
    if not case["bias"]:
        inputs.pop("b", None)
        inputs.pop("db", None)
    return inputs


def row_whole(case, inputs, absolute=False):
    """x (rows x in) and W (in x out) of the whole layer, float64, from the blocks."""
    rows, inp, out = case["rows"], case["in"], case["out"]
    f = np.abs if absolute else (lambda a: a)
    x = f(joined_columns(case, inputs, "x", rows))
    w = f(np.concatenate([inputs["w"][r].astype(np.float64).reshape(-1, out)
                          for r in range(case.np)], axis=0).reshape(inp, out))
    return x, w


def row_reference(case, inputs):
    n, out = case.np, case["out"]
    x, w = row_whole(case, inputs)
    if case["fn"] == "row_linear_forward":
        y = x @ w + (inputs["b"].astype(np.float64) if case["bias"] else 0.0)
        return [{"y": y.reshape(-1)} for _ in range(n)]
    dy = inputs["dy"].astype(np.float64).reshape(case["rows"], out)
    dx = dy @ w.T
    outs = []
    for r in range(n):
        lo, hi = span(case["in"], n, r)
        mine = {"dx": np.ascontiguousarray(dx[:, lo:hi]).reshape(-1),
                "dw": inputs["dw"][r].astype(np.float64) + (x[:, lo:hi].T @ dy).reshape(-1)}
        if case["bias"]:
            mine["db"] = inputs["db"].astype(np.float64) + dy.sum(axis=0)
        outs.append(mine)
    return outs


def row_tolerance(case, inputs, name, rank):
    x, w = row_whole(case, inputs, absolute=True)
    lo, hi = span(case["in"], case.np, rank)
    if name == "y":
        return matmul_tolerance(x @ w + (np.abs(inputs["b"]) if case["bias"] else 0.0))
    dy = np.abs(inputs["dy"].astype(np.float64)).reshape(case["rows"], case["out"])
    if name == "dx":
        return matmul_tolerance((dy @ w.T)[:, lo:hi])
    if name == "dw":
        return matmul_tolerance(np.abs(inputs["dw"][rank]) + (x[:, lo:hi].T @ dy).reshape(-1))
    return matmul_tolerance(np.abs(inputs["db"]) + dy.sum(axis=0))


def row_shapes(case, name, rank):
    rows, out = case["rows"], case["out"]
    local = block(case["in"], case.np, rank)[1]
    return {"y": (rows, out), "dx": (rows, local), "dw": (local, out)}.get(name)


Y_IDENTICAL = hinted(
    identical_on_ranks(["y"], "the next layer runs on every rank from the same y, so it "
                              "must be the same sum, bit for bit, with the bias added alike "
                              "on every rank"),
    "cause: the ranks hold different outputs: all-reduce the partial products (SUM) so that "
    "every rank has the same sum, then add the whole bias on every rank")


@test("row_parallel_linear", points=6, inputs=row_inputs, reference=row_reference,
      tolerance=row_tolerance, label=linear_label, words=LINEAR_WORDS, facets=linear_facets,
      locate=shape_locator(row_shapes), check=Y_IDENTICAL, check_first=True,
      rules=[collectives_exactly(lambda c, i, r: [("MPI_Allreduce", c["rows"] * c["out"])],
                                 "one all-reduce of rows*out floats: y")],
      hint="each rank's x_r W_r is one term of x W: all-reduce the terms (SUM), then add b "
           "once, after the sum")
def row_linear_forward(rng):
    return linear_cases(ROW_SHAPES)


@test("row_parallel_linear", points=4, inputs=row_inputs, reference=row_reference,
      tolerance=row_tolerance, label=linear_label, words=LINEAR_WORDS, facets=linear_facets,
      locate=shape_locator(row_shapes),
      rules=[no_communication("the row-parallel backward")],
      hint="dy is whole on every rank: dx_r = dy W_r^T, dW_r += x_r^T dy and db += the column "
           "sums of dy are all local")
def row_linear_backward(rng):
    return linear_cases(ROW_SHAPES)
