"""sequence_parallel.c: the pre-norm SwiGLU block y = x + MLP(RMSNorm(x)) with Megatron
sequence parallelism (tokens split outside the MLP, hidden units inside it).

The reference is the whole block on all T tokens in float64 (nn.rmsnorm_forward/backward,
nn.swiglu_forward/backward), cut afterwards: y and dx into each rank's token block
(xt_block(T, np, r)), the weight gradients into its hidden-unit blocks (mlp_tp's split).
dgamma and the weight gradients arrive holding random values (dgamma the same on every
rank, as a replicated parameter's gradient is); dy is random. The backward case runs the
program's own forward first, so its communication and memory are the pair's.

Shapes (T, d, ff): T not divisible by 2, 3 or 4, T smaller than np (ranks with no token,
which must still take part in every collective, with a count of 0), ff not divisible by np
and smaller than np, and everything divisible.

Communication, exact and in order, on the case's communicator: forward one MPI_Allgatherv
sending the own T_local*d floats and one MPI_Reduce_scatter of T*d floats (its sent count:
the sum of the counts); backward two more all-gathers of T_local*d (dy, and the norm's
output gathered again), one reduce-scatter of T*d and one MPI_Allreduce of d floats
(dgamma). By the ring formulas an all-gather and a reduce-scatter of T*d each move
(np-1)/np T d floats per rank: together mlp_tp's all-reduce of T*d.

Memory, exact: the peak of xt_alloc's XT_MEM_ACTIVATIONS bytes over the case is
4 (T_local (d+1) + 3 T ff_local) on every rank: the own tokens' norm output and rstd, and
g, u, h of all T tokens for the own hidden units; after backward none is left.

Tolerance: each element within 2e-5 of the largest magnitude of its whole tensor's
reference (max(1, max |ref|)), as mlp_tp's: the error of a chain of float32 products is
relative to the tensor's scale. Measured (grade.py --margins, seeds 1 to 6): worst 8.8e-7
of the scale, 4.4% of the bound (dgamma, a sum over every token; y's worst 1.8%). A missing term, a wrong block or a missing sum changes
elements by the size of a term.
"""

import numpy as np

import nn
from spec import OfScale, hinted, test
from lectures.lc4_tp.tp import (NPS_LAYER, block, collectives_exactly, columns, identical_on_ranks,
                                rows_of, shape_locator)

SHAPES = [(7, 8, 10), (3, 6, 7), (8, 12, 24), (2, 5, 3), (5, 16, 13)]
SP_RTOL = 2e-5
EPS = 1e-5  # run_case's EPS


def sp_label(case):
    return f"np={case.np} T={case['T']} d={case['d']} ff={case['ff']}"


def sp_cases(rng):
    return [{"np": n, "T": T, "d": d, "ff": ff} for n in NPS_LAYER for T, d, ff in SHAPES]


def sp_facets(case):
    return {"T%np": case["T"] % case.np, "rank with no token": int(case["T"] < case.np),
            "ff%np": case["ff"] % case.np}


def whole_block(case, rng):
    T, d, ff = case["T"], case["d"], case["ff"]
    f = np.float32
    return {"x": rng.normal(size=(T, d)).astype(f),
            "gamma": rng.uniform(0.5, 1.5, size=d).astype(f),
            "wg": (rng.normal(size=(d, ff)) / np.sqrt(d)).astype(f),
            "wu": (rng.normal(size=(d, ff)) / np.sqrt(d)).astype(f),
            "wd": (rng.normal(size=(ff, d)) / np.sqrt(ff)).astype(f),
            "dy": rng.normal(size=(T, d)).astype(f),
            "dgamma": rng.normal(size=d).astype(f),
            "dwg": rng.normal(size=(d, ff)).astype(f),
            "dwu": rng.normal(size=(d, ff)).astype(f),
            "dwd": rng.normal(size=(ff, d)).astype(f)}


def packed(W, g, u, dn, n, r):
    """Rank r's w (or dw): Wg_r, Wu_r (column blocks), then Wd_r (row block), flat."""
    return np.concatenate([columns(W[g], n, r).reshape(-1), columns(W[u], n, r).reshape(-1),
                           rows_of(W[dn], n, r).reshape(-1)])


def sp_inputs(case, rng):
    W = whole_block(case, rng)
    n = case.np
    inputs = {"x": [rows_of(W["x"], n, r).reshape(-1) for r in range(n)],
              "gamma": W["gamma"],
              "w": [packed(W, "wg", "wu", "wd", n, r) for r in range(n)]}
    if case["fn"] == "seqpar_backward":
        inputs["dy"] = [rows_of(W["dy"], n, r).reshape(-1) for r in range(n)]
        inputs["dgamma"] = W["dgamma"]
        inputs["dw"] = [packed(W, "dwg", "dwu", "dwd", n, r) for r in range(n)]
    return inputs


def unpacked(case, inputs, name):
    """The whole Wg, Wu, Wd (float64) from every rank's packed `name` ('w' or 'dw')."""
    d, ff, n = case["d"], case["ff"], case.np
    gs, us, ds = [], [], []
    for r in range(n):
        fl = block(ff, n, r)[1]
        a = inputs[name][r].astype(np.float64)
        gs.append(a[:d * fl].reshape(d, fl))
        us.append(a[d * fl:2 * d * fl].reshape(d, fl))
        ds.append(a[2 * d * fl:].reshape(fl, d))
    return np.concatenate(gs, axis=1), np.concatenate(us, axis=1), np.concatenate(ds, axis=0)


def joined_rows(case, inputs, name):
    return np.concatenate([inputs[name][r].astype(np.float64).reshape(-1, case["d"])
                           for r in range(case.np)], axis=0)


def sp_reference(case, inputs):
    n = case.np
    x = joined_rows(case, inputs, "x")
    gamma = inputs["gamma"].astype(np.float64)
    wg, wu, wd = unpacked(case, inputs, "w")
    normed, rstd = nn.rmsnorm_forward(x, gamma, EPS)
    m, kept = nn.swiglu_forward(normed, wg, wu, wd)
    y = x + m
    if case["fn"] == "seqpar_forward":
        return [{"y": rows_of(y, n, r).reshape(-1)} for r in range(n)]
    dy = joined_rows(case, inputs, "dy")
    dnormed, dwg, dwu, dwd = nn.swiglu_backward(dy, normed, wg, wu, wd, kept)
    dx_norm, dgamma = nn.rmsnorm_backward(dnormed, x, gamma, rstd)
    dx = dy + dx_norm
    dwg0, dwu0, dwd0 = unpacked(case, inputs, "dw")
    return [{"y": rows_of(y, n, r).reshape(-1), "dx": rows_of(dx, n, r).reshape(-1),
             "dgamma": inputs["dgamma"] + dgamma,
             "dwg": columns(dwg0 + dwg, n, r).reshape(-1),
             "dwu": columns(dwu0 + dwu, n, r).reshape(-1),
             "dwd": rows_of(dwd0 + dwd, n, r).reshape(-1)} for r in range(n)]


def sp_tolerance(case, inputs, name, rank):
    """2e-5 of the whole tensor's largest reference magnitude (at least 1): the scale of
    the whole block's tensor, not of this rank's part, so that every rank is held to the
    same bound."""
    return OfScale(SP_RTOL)


def sp_shapes(case, name, rank):
    d = case["d"]
    tl, fl = block(case["T"], case.np, rank)[1], block(case["ff"], case.np, rank)[1]
    return {"y": (tl, d), "dx": (tl, d), "dwg": (d, fl), "dwu": (d, fl),
            "dwd": (fl, d)}.get(name)


def kept_floats(case, rank):
    """What forward keeps: the own tokens' norm output and rstd, g, u, h of all tokens."""
    tl, fl = block(case["T"], case.np, rank)[1], block(case["ff"], case.np, rank)[1]
    return tl * (case["d"] + 1) + 3 * case["T"] * fl


def activations_exactly(after_backward):
    """A rule: each rank's XT_MEM_ACTIVATIONS peak is 4 kept_floats bytes, and (after
    backward) none is left."""
    def rule(case, inputs, records):
        T, d = case["T"], case["d"]
        for r, rec in enumerate(records):
            tl, fl = block(T, case.np, r)[1], block(case["ff"], case.np, r)[1]
            want = 4 * kept_floats(case, r)
            formula = (f"4 (T_local (d+1) + 3 T ff_local) = 4 ({tl}*{d + 1} + 3*{T}*{fl}): "
                       f"the own tokens' norm output and rstd, and g, u, h of all T tokens for "
                       f"the own hidden units; the norm's part is 1/np of the 4 T (d+1) = "
                       f"{4 * T * (d + 1)} B it would be with every token on every rank")
            current, peak = rec.memory.get("activations", (0, 0))
            if peak == 0 and want:
                return [(r, f"rank {r} allocated no activations through xt_alloc "
                            f"(XT_MEM_ACTIVATIONS); forward keeps exactly {want} B ({formula}): "
                            f"allocate them with xt_alloc, which counts them (malloc'd memory "
                            f"is not counted)")]
            if peak != want:
                return [(r, f"rank {r}'s activations (xt_alloc XT_MEM_ACTIVATIONS) peaked at "
                            f"{peak} B, expected exactly {want} B ({formula}); scratch that "
                            f"backward does not need is not an activation")]
            if after_backward and current:
                return [(r, f"rank {r} still holds {current} B of activations after backward: "
                            f"backward frees act with xt_free once it is done")]
        return []
    return hinted(rule, "sequence parallelism keeps the norm's activations for the own tokens "
                        "only: backward gathers the normalized tokens again instead of keeping "
                        "the gathered copy")


def forward_calls(case, inputs, rank):
    T, d = case["T"], case["d"]
    return [("MPI_Allgatherv", block(T, case.np, rank)[1] * d), ("MPI_Reduce_scatter", T * d)]


def backward_calls(case, inputs, rank):
    own = block(case["T"], case.np, rank)[1] * case["d"]
    return forward_calls(case, inputs, rank) + [
        ("MPI_Allgatherv", own), ("MPI_Allgatherv", own),
        ("MPI_Reduce_scatter", case["T"] * case["d"]), ("MPI_Allreduce", case["d"])]


FORWARD_FORMULA = ("the own T_local*d normalized tokens all-gathered, the T*d partial sums "
                   "reduce-scattered by the token blocks: by the ring formulas (np-1)/np T d "
                   "floats each per rank, together mlp_tp's one all-reduce of T*d")
BACKWARD_FORMULA = (FORWARD_FORMULA + "; backward: dy and the normalized tokens all-gathered, "
                    "dn reduce-scattered (mlp_tp's all-reduce of dx), dgamma's d floats "
                    "all-reduced")

DGAMMA_SAME = hinted(
    identical_on_ranks(["dgamma"], "gamma is replicated: every rank applies the same update "
                                   "to it, so its gradient must be the same all-reduced sum, "
                                   "bit for bit"),
    "cause: each rank's dgamma holds its own tokens' sum only: all-reduce that sum (a "
    "scratch of d floats), then add it")


@test("sequence_parallel", points=6, inputs=sp_inputs, reference=sp_reference,
      tolerance=sp_tolerance, label=sp_label, facets=sp_facets,
      locate=shape_locator(sp_shapes),
      rules=[collectives_exactly(forward_calls, FORWARD_FORMULA),
             activations_exactly(False)],
      hint="RMSNorm on the own tokens, all-gather them (the blocks may differ by one token: "
           "MPI_Allgatherv), the MLP on all T tokens with the own hidden units, "
           "reduce-scatter the T x d partial sums by the token blocks, + x on the own tokens")
def seqpar_forward(rng):
    return sp_cases(rng)


@test("sequence_parallel", points=9, inputs=sp_inputs, reference=sp_reference,
      tolerance=sp_tolerance, label=sp_label, facets=sp_facets,
      locate=shape_locator(sp_shapes), check=DGAMMA_SAME, check_first=True,
      rules=[collectives_exactly(backward_calls, BACKWARD_FORMULA),
             activations_exactly(True)],
      hint="backward mirrors forward: all-gather dy (the reduce-scatter's mirror) and the "
           "normalized tokens, the MLP's backward on all T tokens, reduce-scatter dn (the "
           "all-gather's mirror), RMSNorm's backward on the own tokens, dx = dy + that; "
           "dgamma: all-reduce a scratch sum, then add it")
def seqpar_backward(rng):
    return sp_cases(rng)
