"""mlp_tp.c: the SwiGLU MLP with the hidden dimension split (gate and up by columns,
down by rows).

The reference is nn.swiglu_forward/backward on the whole weights in float64; the
rank's weight gradients are the blocks of the whole ones by the split rule. The
backward case runs the program's own forward first (backward needs what it kept),
so its communication is the pair: one all-reduce of rows*d forward, one backward.
Weight gradients arrive holding random values; dy is random.

Shapes (rows, d, ff): ff not divisible by 3, 4 or 8, ff smaller than np (ranks with
no hidden unit, which must still take part in both all-reduces), and divisible.

Tolerance: each element within 2e-5 of the largest magnitude of its tensor's
reference (max(1, max |ref|)), as nntest.py's MLP: the error of a chain of float32
products is relative to the tensor's scale, not to each element, and a near-zero
element may lose every digit. Measured (grade.py --margins, 6 seeds): worst 4.5e-7 of
the scale, 2.3% of the bound.
A wrong block, a missing term or a missing all-reduce changes elements by the
size of a term.
"""

import numpy as np

import nn
from spec import OfScale, hinted, test
from lectures.lc4_tp.tp import (NPS_LAYER, block, collectives_exactly, columns, identical_on_ranks,
                                rows_of, shape_locator)

SHAPES = [(3, 8, 10), (1, 6, 7), (4, 12, 24), (2, 5, 3), (5, 16, 13)]
MLP_RTOL = 2e-5


def mlp_label(case):
    return f"np={case.np} rows={case['rows']} d={case['d']} ff={case['ff']}"


def mlp_cases(rng):
    return [{"np": n, "rows": rows, "d": d, "ff": ff}
            for n in NPS_LAYER for rows, d, ff in SHAPES]


def mlp_facets(case):
    return {"ff%np": case["ff"] % case.np, "empty block": int(case["ff"] < case.np)}


def whole_mlp(case, rng):
    rows, d, ff = case["rows"], case["d"], case["ff"]
    f = np.float32
    return {"x": rng.normal(size=(rows, d)).astype(f),
            "wg": (rng.normal(size=(d, ff)) / np.sqrt(d)).astype(f),
            "wu": (rng.normal(size=(d, ff)) / np.sqrt(d)).astype(f),
            "wd": (rng.normal(size=(ff, d)) / np.sqrt(ff)).astype(f),
            "dy": rng.normal(size=(rows, d)).astype(f),
            "dwg": rng.normal(size=(d, ff)).astype(f),
            "dwu": rng.normal(size=(d, ff)).astype(f),
            "dwd": rng.normal(size=(ff, d)).astype(f)}


def mlp_inputs(case, rng):
    W = whole_mlp(case, rng)
    n = case.np
    if case["fn"] == "mlp_tp_shard":
        return {"wg_full": W["wg"].reshape(-1), "wu_full": W["wu"].reshape(-1),
                "wd_full": W["wd"].reshape(-1)}
    inputs = {"x": W["x"].reshape(-1)}
    for name in ("wg", "wu"):
        inputs[name] = [columns(W[name], n, r).reshape(-1) for r in range(n)]
    inputs["wd"] = [rows_of(W["wd"], n, r).reshape(-1) for r in range(n)]
    if case["fn"] == "mlp_tp_backward":
        inputs["dy"] = W["dy"].reshape(-1)
        for name in ("dwg", "dwu"):
            inputs[name] = [columns(W[name], n, r).reshape(-1) for r in range(n)]
        inputs["dwd"] = [rows_of(W["dwd"], n, r).reshape(-1) for r in range(n)]
    return inputs


def joined(case, inputs, name, axis):
    """The whole weight, float64, from every rank's block (columns: axis 1; rows: axis 0)."""
    d = case["d"]
    parts = [inputs[name][r].astype(np.float64) for r in range(case.np)]
    if axis == 1:
        return np.concatenate([p.reshape(d, -1) for p in parts], axis=1)
    return np.concatenate([p.reshape(-1, d) for p in parts], axis=0)


def mlp_reference(case, inputs):
    n, rows, d, ff = case.np, case["rows"], case["d"], case["ff"]
    if case["fn"] == "mlp_tp_shard":
        full = {k: inputs[k + "_full"].reshape((d, ff) if k != "wd" else (ff, d))
                for k in ("wg", "wu", "wd")}
        return [{"wg": columns(full["wg"], n, r).reshape(-1),
                 "wu": columns(full["wu"], n, r).reshape(-1),
                 "wd": rows_of(full["wd"], n, r).reshape(-1)} for r in range(n)]
    x = inputs["x"].astype(np.float64).reshape(rows, d)
    wg, wu, wd = joined(case, inputs, "wg", 1), joined(case, inputs, "wu", 1), \
        joined(case, inputs, "wd", 0)
    y, kept = nn.swiglu_forward(x, wg, wu, wd)
    if case["fn"] == "mlp_tp_forward":
        return [{"y": y.reshape(-1)} for _ in range(n)]
    dy = inputs["dy"].astype(np.float64).reshape(rows, d)
    dx, dwg, dwu, dwd = nn.swiglu_backward(dy, x, wg, wu, wd, kept)
    out = []
    for r in range(n):
        out.append({"y": y.reshape(-1), "dx": dx.reshape(-1),
                    "dwg": inputs["dwg"][r] + columns(dwg, n, r).reshape(-1),
                    "dwu": inputs["dwu"][r] + columns(dwu, n, r).reshape(-1),
                    "dwd": inputs["dwd"][r] + rows_of(dwd, n, r).reshape(-1)})
    return out


def mlp_tolerance(case, inputs, name, rank):
    """2e-5 of the whole tensor's largest reference magnitude (at least 1): the scale of
    the whole layer's tensor, not of this rank's block, so that every rank is held to the
    same bound."""
    return 0.0 if case["fn"] == "mlp_tp_shard" else OfScale(MLP_RTOL)


def mlp_shapes(case, name, rank):
    d, rows = case["d"], case["rows"]
    local = block(case["ff"], case.np, rank)[1]
    return {"y": (rows, d), "dx": (rows, d), "wg": (d, local), "wu": (d, local),
            "wd": (local, d), "dwg": (d, local), "dwu": (d, local), "dwd": (local, d)}.get(name)


SAME_EVERYWHERE = hinted(
    identical_on_ranks(["y", "dx"], "the layers after (and before) the MLP run on every "
                                    "rank from the same tensor, so it must be the same "
                                    "all-reduced sum, bit for bit"),
    "cause: the ranks hold different values: each rank's down projection (forward) or input "
    "gradient (backward) is one term of a sum: all-reduce it (SUM)")


@test("mlp_tp", points=3, inputs=mlp_inputs, reference=mlp_reference, label=mlp_label,
      facets=mlp_facets, locate=shape_locator(mlp_shapes),
      hint="gate and up are cut by the same columns of ff (xt_block), down by the same rows")
def mlp_tp_shard(rng):
    return [c for c in mlp_cases(rng) if c["np"] in (1, 3, 4, 8)]


FORBIDDEN = [(r"^xt_swiglu_(forward|backward)$",
              "calls {}, libxt's copy of the MLP this exercise writes: compose it from "
              "xt_linear_*, xt_silu_* and your own product")]


@test("mlp_tp", points=5, inputs=mlp_inputs, reference=mlp_reference, tolerance=mlp_tolerance,
      label=mlp_label, facets=mlp_facets, locate=shape_locator(mlp_shapes),
      check=SAME_EVERYWHERE, check_first=True, forbidden=FORBIDDEN,
      rules=[collectives_exactly(lambda c, i, r: [("MPI_Allreduce", c["rows"] * c["d"])],
                                 "one all-reduce of rows*d floats, after the down projection")],
      hint="gate and up are column-parallel (no message), silu(g) * u is elementwise on the "
           "rank's own columns, down is row-parallel: all-reduce its output")
def mlp_tp_forward(rng):
    return mlp_cases(rng)


@test("mlp_tp", points=7, inputs=mlp_inputs, reference=mlp_reference, tolerance=mlp_tolerance,
      label=mlp_label, facets=mlp_facets, locate=shape_locator(mlp_shapes),
      check=SAME_EVERYWHERE, check_first=True, forbidden=FORBIDDEN,
      rules=[collectives_exactly(lambda c, i, r: [("MPI_Allreduce", c["rows"] * c["d"])] * 2,
                                 "one all-reduce of rows*d floats forward (y) and one "
                                 "backward (dx)")],
      hint="backward mirrors forward: down's input gradient dh = dy Wd^T is local; through "
           "silu(g) * u to dg and du; dx = dg Wg^T + du Wu^T is one rank's term of the sum: "
           "all-reduce it once")
def mlp_tp_backward(rng):
    return mlp_cases(rng)
