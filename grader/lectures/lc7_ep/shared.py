"""moe_shared_expert.c: DeepSeekMoE's layer under expert parallelism: s shared experts on
every token beside gshard's routed experts (dropless), the shared ones computed while the
dispatch is in flight; forward and backward.

Values: y (forward), dx, dwr, dexperts and dshared (backward: one case runs the forward,
then the backward) on every rank against the layer on one process in float64: nn.Moe's
dense routed layer plus the shared experts (nn.swiglu on the same parameter layout), as
shared_layer and shared_layer_grad here, the latter checked against central differences
when this module loads. dwr and dshared are this rank's tokens' (data parallelism sums them
later); dexperts the rank's experts' from every rank's tokens. The gradients arrive holding
random values (they accumulate); dy is random.

How it was computed:
  - the forward's collectives exactly, in this order, on comm: MPI_Alltoall (the counts),
    MPI_Ialltoallv (the dispatch), MPI_Alltoallv (the combine), each of the routing
    histogram's bytes (as gshard's); the backward adds two MPI_Alltoallv;
  - expert calls (the kit's log): each routed expert computed exactly its routed tokens from
    every rank, each shared expert (the bank's expert E + i) this rank's T tokens, forward
    and backward;
  - under the dispatch: every shared expert's forward ran with the dispatch in flight (one
    exchange pending, of the dispatch's bytes): started before, waited after.
"""

import numpy as np

import checked
import nn
from spec import test
from lectures.lc7_ep import ep

# (np, T, d, E, ff, k, s, skew): one and two shared experts; E/np 1, 2 and 4; skewed routing
# (a rank receiving nothing) at np 2, 4 and 8.
SHAPES = [(1, 6, 8, 4, 6, 2, 1, 0), (2, 8, 8, 4, 8, 2, 2, 1), (2, 6, 6, 8, 6, 1, 1, 0),
          (4, 8, 8, 8, 8, 2, 1, 1), (4, 6, 8, 16, 6, 2, 2, 0), (8, 4, 8, 8, 6, 2, 1, 1)]


def shared_layer(x, wr, params, shared, s, d, E, ff, k):
    """(y, cache): the routed layer (dropless, no balance loss) plus s shared experts."""
    m = nn.Moe(d, E, ff, k)
    y, _, cache = m.forward(x, wr, params)
    x = np.asarray(x, np.float64).reshape(-1, d)
    kept = []
    for i in range(s):
        out, kk = nn.swiglu_forward(x, *nn.expert_weights(shared, i, d, ff))
        y = y + out
        kept.append(kk)
    return y, (m, cache, x, kept)


def shared_layer_grad(dy, wr, params, shared, s, d, ff, cache):
    """(dx, dwr, dparams, dshared) of sum(y dy) for shared_layer's forward."""
    m, moe_cache, x, kept = cache
    dx, dwr, dparams = m.backward(dy, wr, params, moe_cache)
    dshared = np.zeros(s * 3 * d * ff)
    dy = np.asarray(dy, np.float64).reshape(-1, d)
    for i in range(s):
        dxi, *dw = nn.swiglu_backward(dy, x, *nn.expert_weights(shared, i, d, ff), kept[i])
        dx = dx + dxi
        dshared[i * 3 * d * ff:(i + 1) * 3 * d * ff] = np.concatenate([g.reshape(-1) for g in dw])
    return dx, dwr, dparams, dshared


def _check_grad():
    """shared_layer_grad against central differences of sum(y dy), at import."""
    g = np.random.default_rng(5)
    T, d, E, ff, k, s = 3, 3, 4, 2, 2, 2
    x, wr = g.normal(size=(T, d)), g.normal(size=(d, E))
    params, shared = g.normal(size=E * 3 * d * ff), g.normal(size=s * 3 * d * ff)
    dy = g.normal(size=(T, d))

    def loss():
        return float(np.sum(shared_layer(x, wr, params, shared, s, d, E, ff, k)[0] * dy))

    _, cache = shared_layer(x, wr, params, shared, s, d, E, ff, k)
    grads = shared_layer_grad(dy, wr, params, shared, s, d, ff, cache)
    for name, num, ana in zip(("x", "wr", "params", "shared"),
                              nn.numeric_gradients(loss, [x, wr, params, shared]), grads):
        err = float(np.abs(num - np.asarray(ana).reshape(num.shape)).max())
        assert err < 1e-5 * (1 + float(np.abs(ana).max())), \
            f"shared_layer_grad: d{name} off by {err:.1e}"


checked.once(_check_grad)


def cases(backward):
    return [ep.moe_case(n, T, d, E, ff, k, skew=skew, dy=int(backward), shared=s)
            for n, T, d, E, ff, k, s, skew in SHAPES]


def label(case):
    return f"{ep.label(case)} shared={case['shared']}"


def inputs(case, rng):
    """ep.layer_inputs, the shared experts' parameters (the same on every rank), and for the
    backward the gradients dwr, dexperts and dshared arriving with random values."""
    inp = ep.layer_inputs(case, rng)
    d, ff, s, n = case["d"], case["ff"], case["shared"], case.np
    per = 3 * d * ff
    inp["shared_experts"] = (rng.normal(size=s * per) / np.sqrt(d)).astype(np.float32)
    if case["fn"] == "shared_moe_backward":
        inp["dwr"] = [rng.normal(size=(d, case["E"])).astype(np.float32) for _ in range(n)]
        inp["dexperts"] = [rng.normal(size=case["E"] // n * per).astype(np.float32)
                           for _ in range(n)]
        inp["dshared"] = [rng.normal(size=s * per).astype(np.float32) for _ in range(n)]
    return inp


def reference(case, inputs):
    d, E, ff, k, s = (case[n] for n in ("d", "E", "ff", "k", "shared"))
    params, wr, shared = inputs["all_experts"], inputs["wr"], inputs["shared_experts"]
    outs, dparams = [], np.zeros(params.size)
    for r in range(case.np):
        y, cache = shared_layer(inputs["x"][r], wr, params, shared, s, d, E, ff, k)
        if case["fn"] == "shared_moe_forward":
            outs.append({"y": y.reshape(-1)})
            continue
        dx, dwr, dp, dsh = shared_layer_grad(inputs["dy"][r], wr, params, shared, s, d, ff,
                                             cache)
        dparams += dp
        outs.append({"dx": dx.reshape(-1), "dwr": (inputs["dwr"][r] + dwr).reshape(-1),
                     "dshared": inputs["dshared"][r] + dsh})
    if case["fn"] == "shared_moe_backward":
        per = 3 * d * ff
        for r in range(case.np):
            ex = ep.local_experts(case, r)
            outs[r]["dexperts"] = inputs["dexperts"][r] + dparams[ex[0] * per:(ex[-1] + 1) * per]
    return outs


def tolerance(case, inputs, name, rank):
    return ep.TOLERANCE


def locate(case, name, index, rank):
    d, ff = case["d"], case["ff"]
    if name in ("y", "dx"):
        return f"rank {rank}'s token {index // d}, column {index % d}"
    if name in ("dexperts", "dshared"):
        j, at = divmod(index, 3 * d * ff)
        part, at = divmod(at, d * ff)
        cols = d if part == 2 else ff
        whose = (f"shared expert {j}" if name == "dshared" else
                 f"expert {rank * (case['E'] // case.np) + j}")
        return f"{whose}, {('Wg', 'Wu', 'Wd')[part]}[{at // cols}][{at % cols}]"
    if name == "dwr":
        return f"row {index // case['E']} (feature), column {index % case['E']}"
    return None


def traffic(backward):
    """gshard's collectives with the dispatch nonblocking; the backward's two after them."""
    def expected(case, inputs):
        out = []
        for counts, dispatch, combine in ep.exchange_bytes(case, inputs):
            calls = [("MPI_Alltoall", counts, "the counts"),
                     ("MPI_Ialltoallv", dispatch, "the dispatch, under the shared experts"),
                     ("MPI_Alltoallv", combine, "the combine")]
            if backward:
                calls += [("MPI_Alltoallv", dispatch, "w dy to the experts"),
                          ("MPI_Alltoallv", combine, "the input gradients home")]
            out.append(calls)
        return out
    return ep.collectives_in_order(expected, "the routing histogram, d floats per row")


def expert_work(op):
    """Each routed expert computed exactly its routed tokens from every rank; each shared
    expert (the bank's E + i) exactly this rank's T tokens; nothing else."""
    what = {"F": "forward", "B": "backward"}[op]

    def rule(case, inputs, records):
        E, s, T = case["E"], case["shared"], case["T"]
        want = np.asarray(ep.histogram(case, inputs)).sum(axis=0)
        for r, rec in enumerate(records):
            got = {}
            for call in rec.experts:
                if call.op == op:
                    got[call.expert] = got.get(call.expert, 0) + call.tokens
            for e in sorted(got):
                if e < E and e not in ep.local_experts(case, r):
                    return [(r, f"rank {r} computed expert {e} ({what}), which lives on rank "
                                f"{ep.owner(case, e)}: each routed expert computes on its "
                                f"own rank")]
                if e >= E + s:
                    return [(r, f"rank {r} computed expert {e} ({what}): the bank's experts "
                                f"are the routed 0..{E - 1} and the shared {E}..{E + s - 1}")]
            for e in ep.local_experts(case, r):
                if got.get(e, 0) != want[e]:
                    return [(r, f"rank {r}'s expert {e} computed {got.get(e, 0)} tokens "
                                f"{what}; the routing sends it {want[e]}, from every rank")]
            for i in range(s):
                if got.get(E + i, 0) != T:
                    return [(r, f"rank {r}'s shared expert {i} (the bank's {E + i}) computed "
                                f"{got.get(E + i, 0)} tokens {what}; every token goes through "
                                f"every shared expert: this rank's T = {T}, once")]
        return []
    rule.__doc__ = f"expert work ({what})"
    return rule


def under_dispatch(case, inputs, records):
    """Every shared expert's forward ran with the dispatch in flight: one exchange pending,
    of the dispatch's bytes."""
    E = case["E"]
    sizes = ep.exchange_bytes(case, inputs)
    for r, rec in enumerate(records):
        dispatch = sizes[r][1]
        for c in rec.experts:
            if c.op == "F" and c.expert >= E and (c.pending != 1 or c.pending_bytes != dispatch):
                how = ("nothing was in flight" if not c.pending else
                       f"{c.pending} exchange(s) of {c.pending_bytes} B were in flight")
                return [(r, f"rank {r} computed shared expert {c.expert - E} while {how}: the "
                            f"dispatch ({dispatch} B, MPI_Ialltoallv) starts before the shared "
                            f"experts and is waited for after them, so that the rows travel "
                            f"while they compute")]
    return []


@test("moe_shared_expert", points=10, inputs=inputs, reference=reference, tolerance=tolerance,
      label=label, words=ep.WORDS, locate=locate,
      rules=[traffic(False), expert_work("F"), under_dispatch],
      hint="route; count; MPI_Alltoall the counts; MPI_Ialltoallv the rows; the shared "
           "experts on your own tokens (xt_experts_forward, first E + i, one token group of "
           "T), y = their sum; MPI_Wait; the routed experts as gshard's; MPI_Alltoallv back; "
           "y += sum_j w_tj out_tj")
def shared_moe_forward(rng):
    return cases(False)


@test("moe_shared_expert", points=10, inputs=inputs, reference=reference, tolerance=tolerance,
      label=label, words=ep.WORDS, locate=locate,
      rules=[traffic(True), expert_work("F"), expert_work("B")],
      hint="gshard's backward, and each shared expert's xt_experts_backward on your tokens "
           "with dy itself (weight 1) into dshared's block i and dx")
def shared_moe_backward(rng):
    return cases(True)
