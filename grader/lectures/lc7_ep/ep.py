"""What lecture 7's tests share: MoE layer cases and their inputs, the routing
and its capacity, the reference (one dense MoE layer in float64, every token
on one process: nn.Moe), and the rules read from the experts' calls each rank
made (the kit's X lines, events.ExpertCall).

A case is T tokens on each of np ranks (rank-distinct x, T x d), a router Wr
(d x E, the same on every rank), E SwiGLU experts of hidden size ff
(xt_expert_params: Wg, Wu, Wd, expert after expert), k experts per token.
With expert parallelism rank r holds experts r E/np .. (r+1) E/np - 1.

Routing is discontinuous: a token whose k-th and (k+1)-th logits are closer
than float32 rounding could be routed one way in C and another in NumPy. The
inputs are drawn so that every token's k + 1 largest logits lie at least
MARGIN apart (a token that does not is drawn again), so the routing is the
same in any correct program, and a difference in it is a bug.

Skewed routing (skew=1): a constant first feature of x and a first row of Wr
that starve some experts (the last rank's, or expert E-1 on one rank) and
favour expert 0, so that some expert gets no token, some rank receives none,
and under a capacity expert 0 drops tokens.

Capacity (cf > 0): C = ceil(k T cf / E) choices per expert from each rank's
T tokens, queued as GShard queues them: every token's first choice in token
order, then every token's second choice, and so on; choices past C are
dropped (they add nothing to y and their weights get no gradient). cf = 0:
dropless.

Tolerance: each output within MOE_RTOL max(1, its largest |value| over every
rank) (spec.OfScale). Measured: see each module.
"""

import math

import numpy as np

import nn
import spec
from spec import OfScale

MARGIN = 2e-3
MOE_RTOL = 3e-5
TOLERANCE = OfScale(MOE_RTOL, 1.0)


# ------------------------------------------------------------------- cases

def moe_case(n, T, d, E, ff, k, cf=0.0, skew=0, renorm=0, alpha=0.0, experts="local", dy=1,
             **extra):
    """A case's parameters: T tokens per rank; experts "local" (rank r gets its E/np
    experts' parameters) or "all"; dy whether an upstream gradient is given."""
    assert E % n == 0 and 1 <= k <= E
    return {"np": n, "T": T, "d": d, "E": E, "ff": ff, "k": k, "renorm": int(renorm),
            "cf": float(cf), "alpha": float(alpha), "skew": int(skew), "experts": experts,
            "has_dy": int(dy), **extra}


def label(case):
    p = case.params
    parts = [f"np={case.np} T={p['T']} d={p['d']} E={p['E']} ff={p['ff']} k={p['k']}"]
    parts.append(f"cf={p['cf']:g} (C={capacity(case)})" if p["cf"] else "cf=0 (dropless)")
    if p["renorm"]:
        parts.append("renorm")
    parts.append(f"alpha={p['alpha']:g}")
    parts.append(spec.word(case, "skew"))
    if "one" in p:
        parts.append(spec.word(case, "one"))
    return " ".join(parts)


# The 0/1 parameters written as words, in labels and in the summary of failed cases.
WORDS = {"skew": ("skewed", "uniform"), "one": ("one-choice expert", "no one-choice expert")}


def facets(case):
    p = case.params
    return {"experts per rank": p["E"] // case.np, "capacity": int(p["cf"] > 0), "k": p["k"]}


def local_experts(case, r):
    """The experts rank r holds."""
    nl = case["E"] // case.np
    return range(r * nl, (r + 1) * nl)


def owner(case, e):
    """The rank expert e lives on."""
    return e // (case["E"] // case.np)


def capacity(case):
    """Choices each expert takes from one rank's T tokens: ceil(k T cf / E); 0 when
    dropless."""
    p = case.params
    return math.ceil(p["k"] * p["T"] * p["cf"] / p["E"]) if p["cf"] else 0


# ------------------------------------------------------------------ inputs

def cold_experts(case):
    """The experts skewed routing starves: the last rank's (one expert with one rank)."""
    E, n = case["E"], case.np
    return list(range(E - E // n, E)) if n > 1 else [E - 1]


def _margins_ok(logits, k):
    """Per token: its k + 1 largest logits (k when k = E) at least MARGIN apart."""
    top = -np.sort(-logits, axis=1)[:, :k + 1]
    return (np.diff(-top, axis=1) >= MARGIN).all(axis=1) if top.shape[1] > 1 else \
        np.ones(len(logits), bool)


def _tokens(rng, case, wr, count):
    """count tokens x (count x d, float32) whose logits keep the margin."""
    d, k = case["d"], case["k"]
    x = np.zeros((count, d), np.float32)
    todo = np.arange(count)
    for _ in range(200):
        x[todo] = rng.normal(size=(len(todo), d))
        if case["skew"]:
            x[todo, 0] = 2.0 + rng.random(len(todo))
        ok = _margins_ok(x[todo].astype(np.float64) @ wr.astype(np.float64), k)
        todo = todo[~ok]
        if not todo.size:
            return x
    raise RuntimeError(f"no tokens with routing margins for {case.params}")


def layer_weights(case, rng):
    """(Wr d x E, every expert's parameters), float32."""
    d, E, ff = case["d"], case["E"], case["ff"]
    wr = rng.normal(size=(d, E)) / math.sqrt(d)
    if case["skew"]:
        wr[0] = rng.normal(size=E) * 0.1
        wr[0, cold_experts(case)] = -12.0
        wr[0, 0] = 1.5
    params = np.concatenate([np.concatenate([rng.normal(size=d * ff) / math.sqrt(d),
                                             rng.normal(size=d * ff) / math.sqrt(d),
                                             rng.normal(size=ff * d) / math.sqrt(ff)])
                             for _ in range(E)])
    return wr.astype(np.float32), params.astype(np.float32)


def layer_inputs(case, rng):
    """Each rank's x and dy (rank-distinct, dy random), the router, and the experts'
    parameters (each rank's slice when the case's experts are "local")."""
    wr, params = layer_weights(case, rng)
    n, T, d = case.np, case["T"], case["d"]
    xs = [_tokens(rng, case, wr, T) for _ in range(n)]
    per = 3 * d * case["ff"]
    if case["experts"] == "local":
        nl = case["E"] // n
        experts = [params[r * nl * per:(r + 1) * nl * per] for r in range(n)]
    else:
        experts = params
    inputs = {"x": xs, "wr": wr, "experts": experts, "all_experts": params}
    if case["has_dy"]:
        inputs["dy"] = [rng.normal(size=(T, d)).astype(np.float32) for _ in range(n)]
    return inputs


def program_inputs(inputs):
    """What the program reads: the inputs without the grader's own (all_experts)."""
    return {k: v for k, v in inputs.items() if k != "all_experts"}


# ----------------------------------------------------------------- routing

def routing(case, x, wr):
    """(idx T x k, w T x k, probs T x E) of one rank's tokens, float64."""
    return nn.topk_route(np.asarray(x, np.float64) @ np.asarray(wr, np.float64), case["k"],
                         case["renorm"])


def keep_mask(case, idx):
    """T x k: 1 where the choice fits its expert's capacity (GShard's queue: all first
    choices in token order, then all second choices, ...), 0 where it is dropped."""
    C = capacity(case)
    keep = np.ones(idx.shape)
    if not C:
        return keep
    taken = np.zeros(case["E"], int)
    for j in range(idx.shape[1]):
        for t in range(idx.shape[0]):
            e = idx[t, j]
            taken[e] += 1
            keep[t, j] = taken[e] <= C
    return keep


def histogram(case, inputs):
    """counts[s][e]: the choices rank s's tokens send expert e (kept ones only)."""
    out = np.zeros((case.np, case["E"]), int)
    for s in range(case.np):
        idx = routing(case, inputs["x"][s], inputs["wr"])[0]
        keep = keep_mask(case, idx)
        np.add.at(out[s], idx[keep > 0], 1)
    return out


# --------------------------------------------------------------- reference

def layer(case):
    p = case.params
    return nn.Moe(p["d"], p["E"], p["ff"], p["k"], bool(p["renorm"]),
                  float(np.float32(p["alpha"])))


def layer_reference(case, inputs, backward=True):
    """Per rank: y (T x d) and aux (the balance loss of its tokens), and when backward
    dx, dwr (from its own tokens) and dexperts (the gradients of the experts it holds,
    from every rank's tokens; all experts when the case's experts are "all")."""
    m, n = layer(case), case.np
    params, wr = inputs["all_experts"], inputs["wr"]
    out, caches = [], []
    for r in range(n):
        idx = routing(case, inputs["x"][r], wr)[0]
        y, aux, cache = m.forward(inputs["x"][r], wr, params, keep_mask(case, idx))
        out.append({"y": y, "aux": np.array([aux])})
        caches.append(cache)
    if not backward:
        return out
    dparams = np.zeros(params.size)
    for r in range(n):
        dx, dwr, dp = m.backward(inputs["dy"][r], wr, params, caches[r])
        out[r].update(dx=dx, dwr=dwr)
        dparams += dp
    per = 3 * case["d"] * case["ff"]
    for r in range(n):
        ex = local_experts(case, r) if case["experts"] == "local" else range(case["E"])
        out[r]["dexperts"] = dparams[ex[0] * per:(ex[-1] + 1) * per]
    return out


# ------------------------------------------------------------------- rules

def _experts_computed(histogram_of, op, why, unit, wanted):
    """The rule of expert_tokens and expert_tokens_from: counts from histogram_of(case,
    inputs) (counts[s][e]), each rank's X lines with op summed per expert, the report
    saying `unit` and wanted(case, n) for what the expert should have had."""
    def rule(case, inputs, records):
        want = np.asarray(histogram_of(case, inputs)).sum(axis=0)
        what = {"F": "forward", "B": "backward"}[op]
        out = []
        for r, rec in enumerate(records):
            got = {}
            for call in rec.experts:
                if call.op == op:
                    got[call.expert] = got.get(call.expert, 0) + call.tokens
            stray = [e for e in sorted(got) if e not in local_experts(case, r)]
            if stray:
                out.append((r, f"rank {r} computed expert {stray[0]} ({what}), which lives on "
                               f"rank {owner(case, stray[0])}: {why}"))
                continue
            for e in local_experts(case, r):
                if got.get(e, 0) != want[e]:
                    out.append((r, f"rank {r}'s expert {e} computed {got.get(e, 0)} {unit} "
                                   f"{what}; {wanted(case, want[e])}: {why}"))
                    break
        return out
    rule.__doc__ = f"expert {unit} ({op})"
    return rule


def expert_tokens(op, why):
    """Rule: each rank's expert calls with op ("F" or "B") computed each of its local
    experts on exactly the tokens the routing sends it (the histogram's column, summed
    over the sending ranks, after the capacity), and no other expert."""
    def wanted(case, n):
        C = capacity(case)
        return f"the routing sends it {n}" + (f" (capacity {C} per expert from each rank)"
                                              if C else "")
    return _experts_computed(histogram, op, why, "tokens", wanted)


# ------------------------------------------------------- expert parallelism

def exchange_bytes(case, inputs):
    """Per rank r, (counts, dispatch, combine): what its count exchange, its dispatch and
    its combine send, in bytes as PMPI counts one all-to-all(v) (every peer's part, this
    rank's own included): E/np int32 for each of np ranks; d floats for each kept choice
    of its tokens (the histogram's row r); d floats for each row its experts computed
    (the histogram's columns of its experts, summed over the sending ranks)."""
    h, d4 = histogram(case, inputs), case["d"] * 4
    return [(case["E"] * 4, int(h[r].sum()) * d4, int(h[:, list(local_experts(case, r))].sum())
             * d4) for r in range(case.np)]


def nth(n):
    """1st, 2nd, 3rd, 4th, ... for n from 1."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


COMMUNICATING_KINDS = ("p2p", "coll", "comm", "rma")
COMPLETIONS = {"MPI_Wait", "MPI_Waitall", "MPI_Waitany", "MPI_Waitsome", "MPI_Test",
               "MPI_Testall", "MPI_Testany", "MPI_Testsome"}


def collectives_in_order(expected, why):
    """Rule: each rank's communication is exactly the collectives expected(case, inputs)[r]
    lists, [(fn, bytes, what)], in that order (nonblocking ones, MPI_Ialltoallv, by their
    start), all on comm: no other collective, no point-to-point message, nothing on another
    communicator. bytes: what the call sends, as PMPI counts it (its send counts summed
    over every peer, this rank's own included). A rank takes part in every call even when
    it sends or receives nothing."""
    def rule(case, inputs, records):
        want = expected(case, inputs)
        for r, rec in enumerate(records):
            mine = want[r]
            fns = {fn for fn, _, _ in mine}
            listing = ", ".join(f"{fn} {b} B ({what})" for fn, b, what in mine)
            budget = f"exactly, in this order, on comm: {listing}"
            calls = [e for e in rec.events if e.dir == "C"]
            away = next((e for e in calls if e.comm != "case"), None)
            if away:
                where = {"world": "MPI_COMM_WORLD", "self": "MPI_COMM_SELF"}.get(
                    away.comm, "a communicator of its own")
                return [(r, f"rank {r} called {away.fn} on {where}: use the comm argument "
                            f"(the grader runs each case on a sub-communicator)")]
            # A nonblocking collective is completed by a wait or a test.
            done = COMPLETIONS if any(fn.startswith("MPI_I") for fn in fns) else set()
            other = sorted(fn for fn, st in rec.calls.items()
                           if st.calls and st.kind in COMMUNICATING_KINDS and fn not in fns
                           and fn not in done)
            if other:
                return [(r, f"rank {r} called {', '.join(other)}; the only communication "
                            f"allowed is {budget} ({why})")]
            got = [(e.fn, e.bytes) for e in calls]
            if [fn for fn, _ in got] != [fn for fn, _, _ in mine]:
                shown = ", ".join(f"{fn} {b} B" for fn, b in got[:10]) + \
                    (", ..." if len(got) > 10 else "")
                return [(r, f"rank {r}'s collectives were {shown or 'none'}; expected "
                            f"{budget} ({why})")]
            for i, ((fn, b), (_, wb, what)) in enumerate(zip(got, mine)):
                if b != wb:
                    return [(r, f"rank {r}'s {nth(i + 1)} collective, {fn} ({what}), sent "
                                f"{b} B; expected {wb} B ({why})")]
        return []
    rule.__doc__ = f"collectives in order ({why})"
    return rule


# ------------------------------------------------ micro-batches, given histograms

def micro_batch(case, m, parts=2):
    """(lo, count): the tokens of micro-batch m of a rank's T, xt_block(T, parts, m)."""
    return nn.block(case["T"], parts, m)


def micro_histogram(case, inputs, m, parts=2):
    """counts[s][e]: the kept choices that micro-batch m's tokens (xt_block(T, parts, m))
    of rank s send expert e. A choice is kept or dropped by the whole batch's capacity
    queue (keep_mask over all T tokens); the micro-batches add up to histogram()."""
    lo, count = micro_batch(case, m, parts)
    out = np.zeros((case.np, case["E"]), int)
    for s in range(case.np):
        idx = routing(case, inputs["x"][s], inputs["wr"])[0]
        keep = keep_mask(case, idx)
        part = idx[lo:lo + count]
        np.add.at(out[s], part[keep[lo:lo + count] > 0], 1)
    return out


def expert_tokens_from(histogram_of, op, why):
    """Rule: expert_tokens() for rows whose histogram the case gives rather than the
    routing: histogram_of(case, inputs) -> counts[s][e], the rows rank s sends expert e.
    Each rank's expert calls with op computed each of its local experts on exactly the
    rows every rank sends it, and no other expert."""
    return _experts_computed(histogram_of, op, why, "rows",
                             lambda case, n: f"the ranks send it {n}")
