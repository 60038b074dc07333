"""gshard.c: GShard's expert parallelism, forward and backward: counts exchanged, rows
dispatched to the experts' ranks, experts computed, outputs combined back; the backward
the mirror.

Values: y (forward), dx, dwr and dexperts (backward: one case runs the forward, then the
backward) on every rank against one dense MoE layer in float64 with every token on one
process (ep.layer_reference, grader/nn.py's Moe): rank r must hold its tokens' outputs and
input gradients, the router gradient of its own tokens (x_r^T dlogits_r; data parallelism
all-reduces it afterwards, not this function), and its E/np experts' gradients from every
rank's tokens. dwr and dexperts arrive holding random values (they accumulate); y and dx
arrive as garbage. Inputs: rank-distinct x drawn with routing margins (ep.layer_inputs: C
and NumPy route alike), a random dy (never ones).

Cases: np 1, 2, 4 and 8; E/np 1, 2 and 4; k 1 and 2; dropless (cf 0) and with a capacity
that drops choices (cf 1 under skew, cf 0.5); skewed routing at every np (ep's skew=1:
expert 0 crowded, the last rank's experts starved, so that rank receives no token and must
still take part in every all-to-all). The capacity's k T cf / E is whole (2, 4), or has a
fraction of .5 (2.5, 0.5) or .25 (2.25, with the crowded expert over 2 choices): ceiling,
floor and rounding to nearest each fail one of them.

How it was computed:
  - gshard_traffic (ep.collectives_in_order): each rank's communication is exactly, in
    this order, on comm: forward MPI_Alltoall (the counts: E/np int32 to each rank, E 4
    bytes as PMPI counts it), MPI_Alltoallv (the dispatch), MPI_Alltoallv (the combine);
    the backward case adds MPI_Alltoallv (w dy to the experts) and MPI_Alltoallv (the
    input gradients home), and no count exchange. Each all-to-all-v's bytes are the
    routing histogram's (ep.histogram, after the capacity) times d floats: the rank's
    kept choices for the dispatch, the rows its experts computed for the combine, the
    rank's own share included (PMPI sums every send count). A dropped choice sent anyway,
    a count exchange by MPI_Alltoallv, a per-peer send loop, a call on MPI_COMM_WORLD:
    each breaks it.
  - ep.expert_tokens: each rank's calls of xt_experts_forward (and _backward) computed
    each of its experts on exactly the tokens the routing sends it, from every rank.

Tolerance: ep.TOLERANCE, each output within 3e-5 of max(1, its largest |value| over every
rank). Measured (grade.py --margins, seeds 1 to 6): the worst error was 3.0% of the bound
(dwr, np=2 E=4 k=2 skewed; y at most 1.3%, dexperts 1.6%): float32 GEMMs of at most d and
ff terms and a softmax, against float64.
"""

import numpy as np

from spec import test
from lectures.lc7_ep import ep

# (np, T, d, E, ff, k, cf, skew): every np with skewed routing; E/np 1, 2 and 4; k 1 and
# 2; dropless, cf 1 under skew (expert 0 overflows) and cf 0.5 (most experts overflow);
# k T cf / E of 2.5 and 2.25 (ceiling 3, floor 2, nearest 3 and 2).
SHAPES = [(2, 8, 8, 2, 8, 1, 0.0, 0), (2, 8, 6, 4, 8, 2, 0.0, 1), (2, 10, 8, 8, 6, 2, 1.0, 1),
          (4, 8, 8, 4, 8, 2, 0.5, 0), (4, 8, 6, 8, 8, 2, 1.0, 1), (4, 6, 8, 16, 6, 1, 0.0, 1),
          (4, 8, 8, 8, 8, 1, 0.5, 1), (1, 8, 8, 4, 8, 2, 1.0, 1), (8, 4, 8, 8, 6, 2, 0.0, 1),
          (2, 9, 8, 4, 8, 1, 1.0, 1)]


def cases(backward):
    return [ep.moe_case(n, T, d, E, ff, k, cf=cf, skew=skew, dy=int(backward))
            for n, T, d, E, ff, k, cf, skew in SHAPES]


def facets(case):
    """ep's, and whether some rank receives no token (skewed, more than one rank)."""
    return {**ep.facets(case), "a rank receives none": int(case["skew"] and case.np > 1)}


def inputs(case, rng):
    """ep.layer_inputs; for the backward also the gradients dwr (d x E) and dexperts (the
    rank's experts) arriving with random values, to accumulate into."""
    inp = ep.layer_inputs(case, rng)
    if case["fn"] == "gshard_backward":
        n, per = case.np, 3 * case["d"] * case["ff"]
        inp["dwr"] = [rng.normal(size=(case["d"], case["E"])).astype(np.float32)
                      for _ in range(n)]
        inp["dexperts"] = [rng.normal(size=case["E"] // n * per).astype(np.float32)
                           for _ in range(n)]
    return inp


def reference(case, inputs):
    if case["fn"] == "gshard_forward":
        return [{"y": o["y"].reshape(-1)} for o in ep.layer_reference(case, inputs, False)]
    return [{"dx": o["dx"].reshape(-1),
             "dwr": (inputs["dwr"][r] + o["dwr"]).reshape(-1),
             "dexperts": inputs["dexperts"][r] + o["dexperts"]}
            for r, o in enumerate(ep.layer_reference(case, inputs))]


def tolerance(case, inputs, name, rank):
    return ep.TOLERANCE


def locate(case, name, index, rank):
    """'token 3 (rank 1's row 3), column 2', 'expert 5 (rank 2's 2nd), Wu[1][4]',
    'row 2 (feature), column 5 (expert)'."""
    d, ff, E = case["d"], case["ff"], case["E"]
    if name in ("y", "dx"):
        return f"rank {rank}'s token {index // d}, column {index % d}"
    if name == "dwr":
        return f"row {index // E} (feature), column {index % E} (expert {index % E})"
    if name == "dexperts":
        j, at = divmod(index, 3 * d * ff)
        e = rank * (E // case.np) + j
        part, at = divmod(at, d * ff)
        cols = d if part == 2 else ff
        return (f"expert {e} (rank {rank}'s {ep.nth(j + 1)}), {('Wg', 'Wu', 'Wd')[part]}"
                f"[{at // cols}][{at % cols}]")
    return None


def traffic(backward):
    """The collectives of a forward, or of a forward then a backward, with their bytes."""
    def expected(case, inputs):
        out = []
        for r, (counts, dispatch, combine) in enumerate(ep.exchange_bytes(case, inputs)):
            d, nl = case["d"], case["E"] // case.np
            sent, got = dispatch // (4 * d), combine // (4 * d)
            calls = [("MPI_Alltoall", counts, f"the counts: {nl} int32 to each of {case.np} "
                                              f"rank(s)"),
                     ("MPI_Alltoallv", dispatch, f"the dispatch: {sent} kept choice(s) of "
                                                 f"its tokens x d={d} floats"),
                     ("MPI_Alltoallv", combine, f"the combine: {got} row(s) its experts "
                                                f"computed x d={d} floats")]
            if backward:
                calls += [("MPI_Alltoallv", dispatch, f"w dy to the experts: {sent} row(s)"),
                          ("MPI_Alltoallv", combine, f"the input gradients home: {got} "
                                                     f"row(s)")]
            out.append(calls)
        return out
    return ep.collectives_in_order(expected, "the routing histogram after the capacity, "
                                             "d floats per row")


WHY_TOKENS = "each expert computes the rows routed to it from every rank, once"


@test("gshard", points=14, inputs=inputs, reference=reference, tolerance=tolerance,
      label=ep.label, words=ep.WORDS, facets=facets, locate=locate,
      rules=[traffic(False), ep.expert_tokens("F", WHY_TOKENS)],
      hint="route (x Wr, xt_topk_route), queue the choices (all first choices in token "
           "order, then the second ones; past C dropped), count the kept rows per expert, "
           "MPI_Alltoall those counts (E/np ints per peer), send the rows grouped by "
           "expert with MPI_Alltoallv, regroup what arrives by expert (it comes peer by "
           "peer), xt_experts_forward, regroup back, MPI_Alltoallv the outputs home with "
           "the counts transposed, y_t = sum of w_tj out_tj (y starts from zero)")
def gshard_forward(rng):
    return cases(False)


@test("gshard", points=18, inputs=inputs, reference=reference, tolerance=tolerance,
      label=ep.label, words=ep.WORDS, facets=facets, locate=locate,
      rules=[traffic(True), ep.expert_tokens("F", WHY_TOKENS),
             ep.expert_tokens("B", WHY_TOKENS)],
      hint="keep the forward's counts, displacements and regrouping; dw_tj = <dy_t, out_tj> "
           "(the combined outputs kept at home, 0 for a dropped choice); send w_tj dy_t "
           "like the forward's rows, xt_experts_backward on the regrouped rows (dexperts "
           "+=), send the input gradients back like the combine; dx = their sum per token "
           "+ dlogits Wr^T (xt_topk_route_backward from dw), dwr += x^T dlogits")
def gshard_backward(rng):
    return cases(True)
