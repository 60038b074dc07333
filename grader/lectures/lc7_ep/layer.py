"""moe_forward.c and moe_backward.c: one mixture-of-experts layer on one process, its
forward with the Switch balance loss, and its backward.

The reference is ep.layer_reference: nn.Moe, the dense layer in float64 (every token's
k chosen experts computed one token at a time, no capacity: keep all ones), of each
rank's own tokens. The functions take no communicator: each rank of a case computes its
own layer, on its own tokens (rank-distinct x and dy; the router and the experts shared),
and each is compared with the reference of those tokens alone (at np = 2 too: dexperts
is that rank's tokens' gradient, not the sum over ranks that expert parallelism gives).

Inputs (ep.layer_inputs): random x whose k + 1 largest logits lie ep.MARGIN apart, so the
routing is the same in C and NumPy; random router and experts; random dy (never ones).
The backward's dwr and dexperts arrive holding random values (normal, scale 0.5), which
the reference adds to: a gradient that overwrites instead of accumulating fails; dx and
y arrive holding garbage (xt_case_alloc's 0xCD bytes, about -4e8).

Cases: k = 1, 2, 3 (and k = E); E from 2 to 8; T = 1 (and T = 0 forward, whose loss
the contract makes 0); a T where some expert gets
exactly one choice (the inputs are drawn again until it does, on every rank); skewed
routing (ep skew=1: an expert that gets no token, which must still work, and in the
backward get a zero gradient); alpha 0.25 to 1 forward (the loss is then far above the
tolerance) and 0.1 to 0.5 backward, with alpha = 0 in one case of each (the balance
loss's gradient path is invisible there, and must not break anything); np 1 and 2.

Rules: no MPI call at all (no_communication: the signatures take no communicator).
Forbidden: the kit's bank of experts (xt_experts_forward/_backward: grouping the tokens
and applying each expert is this exercise), and in the backward SwiGLU's backward
(xt_swiglu_backward, xt_silu_backward: the derivative of silu is the course's defect,
written by hand here). xt_swiglu_forward is allowed in both: one expert's forward on its
rows is lecture 4's SwiGLU, not this lecture's work (the solution of moe_forward spells
it out, two GEMMs, silu(g) u and one GEMM, because moe_backward differentiates exactly
those steps; the solution of moe_backward recomputes them with xt_swiglu_forward).

Tolerance: ep.TOLERANCE, each output within 3e-5 of max(1, its largest |value| over
every rank) (spec.OfScale: float32 chains of GEMMs err relative to the tensor). The
balance loss (aux, one value) is held to 3e-5 max(1, |loss|). Measured (grade.py
--margins, seeds 1 to 14): the worst error was 13.5% of the bound (dwr, skewed routing,
k = 2: logits near -30 for the starved experts); the forward's 1.4% (y). The mutants'
defects are far above the bound: the smallest, the balance loss's gradient paths, change
dx by about 8e-3 in the first case, over 100 times it.
"""

import dataclasses

import numpy as np

from spec import hinted, test
from lectures.lc4_tp.tp import no_communication
from lectures.lc7_ep import ep

# (np, T, d, E, ff, k, skew, alpha, one): one = some expert gets exactly one choice.
FORWARD = [(1, 16, 8, 4, 8, 2, 0, 0.5, 0), (1, 12, 6, 6, 4, 1, 0, 1.0, 0),
           (1, 16, 8, 8, 6, 3, 0, 0.25, 0), (1, 16, 8, 4, 8, 2, 1, 0.5, 0),
           (1, 12, 4, 8, 4, 1, 1, 1.0, 0), (1, 1, 8, 4, 8, 2, 0, 0.5, 0),
           (1, 1, 4, 2, 4, 1, 0, 1.0, 0), (1, 5, 8, 6, 4, 2, 0, 0.5, 1),
           (1, 12, 8, 3, 8, 3, 0, 0.3, 0), (1, 8, 6, 4, 6, 2, 0, 0.0, 0),
           (2, 8, 8, 2, 4, 1, 0, 0.5, 0), (2, 12, 8, 8, 8, 2, 1, 0.5, 0),
           (1, 0, 8, 4, 8, 2, 0, 0.5, 0)]

BACKWARD = [(1, 16, 8, 4, 8, 2, 0, 0.5, 0), (1, 12, 6, 6, 4, 1, 0, 0.3, 0),
            (1, 16, 8, 8, 6, 3, 0, 0.25, 0), (1, 16, 8, 4, 8, 2, 1, 0.5, 0),
            (1, 12, 4, 8, 4, 1, 1, 0.3, 0), (1, 1, 8, 4, 8, 2, 0, 0.5, 0),
            (1, 5, 8, 6, 4, 2, 0, 0.2, 1), (1, 12, 8, 3, 8, 3, 0, 0.1, 0),
            (1, 12, 6, 4, 6, 2, 0, 0.0, 0),
            (2, 8, 8, 2, 4, 1, 0, 0.5, 0), (2, 12, 8, 8, 8, 2, 1, 0.3, 0)]


def layer_cases(shapes, backward):
    return [ep.moe_case(n, T, d, E, ff, k, skew=skew, alpha=alpha, experts="all",
                        dy=int(backward), one=one)
            for n, T, d, E, ff, k, skew, alpha, one in shapes]


def facets(case):
    return {"k": case["k"], "alpha>0": int(case["alpha"] > 0),
            "one token": int(case["T"] == 1)}


def locate(case, name, index, rank):
    """'token 3, column 2'; 'Wr[1][3] (feature 1, expert 3)'; 'expert 2's Wu[0][4]'."""
    d, E, ff = case["d"], case["E"], case["ff"]
    if name in ("y", "dx"):
        return f"token {index // d}, column {index % d}"
    if name == "dwr":
        return f"Wr[{index // E}][{index % E}] (feature {index // E}, expert {index % E})"
    if name == "dexperts":
        e, i = divmod(index, 3 * d * ff)
        which, i = divmod(i, d * ff)
        cols = d if which == 2 else ff
        return f"expert {e}'s {('Wg', 'Wu', 'Wd')[which]}[{i // cols}][{i % cols}]"
    return "the balance loss" if name == "aux" else None


# ------------------------------------------------------------------ inputs

def one_choice(case, inputs):
    """Whether on every rank some expert gets exactly one of the k T choices."""
    for x in inputs["x"]:
        idx = ep.routing(case, x, inputs["wr"])[0]
        if 1 not in np.bincount(idx.reshape(-1), minlength=case["E"]):
            return False
    return True


def layer_inputs(case, rng):
    """ep.layer_inputs (every expert on every rank), drawn again where the case asks for
    an expert with one choice; the backward's dwr and dexperts arrive nonzero."""
    for _ in range(200):
        inputs = ep.layer_inputs(case, rng)
        if not case["one"] or one_choice(case, inputs):
            break
    else:
        raise RuntimeError(f"no routing with an expert of one choice for {case.params}")
    inputs = ep.program_inputs(inputs)
    if case["has_dy"]:
        n, d, E = case.np, case["d"], case["E"]
        inputs["dwr"] = [(rng.normal(size=(d, E)) * 0.5).astype(np.float32) for _ in range(n)]
        size = inputs["experts"].size
        inputs["dexperts"] = [(rng.normal(size=size) * 0.5).astype(np.float32)
                              for _ in range(n)]
    return inputs


# --------------------------------------------------------------- reference

def rank_reference(case, inputs, r):
    """ep.layer_reference of rank r's tokens alone (a one-rank case of them)."""
    one = dataclasses.replace(case, np=1)
    sub = {"x": [inputs["x"][r]], "wr": inputs["wr"], "experts": inputs["experts"],
           "all_experts": inputs["experts"]}
    if case["has_dy"]:
        sub["dy"] = [inputs["dy"][r]]
    return ep.layer_reference(one, sub, backward=bool(case["has_dy"]))[0]


def forward_reference(case, inputs):
    return [{k: np.ravel(v) for k, v in rank_reference(case, inputs, r).items()
             if k in ("y", "aux")} for r in range(case.np)]


def backward_reference(case, inputs):
    out = []
    for r in range(case.np):
        ref = rank_reference(case, inputs, r)
        out.append({"dx": ref["dx"].reshape(-1),
                    "dwr": (inputs["dwr"][r].astype(np.float64) + ref["dwr"]).reshape(-1),
                    "dexperts": inputs["dexperts"][r].astype(np.float64) + ref["dexperts"]})
    return out


def tolerance(case, inputs, name, rank):
    return ep.TOLERANCE


# ------------------------------------------------------------------- tests

MATRICES = ("Wg", "Wu", "Wd")


def routed_work(passes):
    """Each expert multiplies only the tokens routed to it: every one of its matrices
    (Wg, Wu, Wd) multiplies between 1 and `passes` times the expert's routed choices in
    rows, counted in every xt_gemm (and libxt kernel built on it) whose operand is that
    matrix (the case watches the experts array: work.c). passes = 1 in the forward
    (exact: once), 2 in the backward (the recomputed forward and the backward's own)."""
    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            idx = ep.routing(case, inputs["x"][r], inputs["wr"])[0]
            count = np.bincount(idx.reshape(-1), minlength=case["E"])
            rows = np.array([[rec.work.get(("experts", e, m), 0) for m in range(3)]
                             for e in range(case["E"])])
            low, high = rows < count[:, None], rows > passes * count[:, None]
            if not (low.any() or high.any()):
                continue
            e, m = np.argwhere(high if high.any() else low)[0]
            times = "once" if passes == 1 else f"at most {passes} times"
            text = (f"rank {r} multiplied {rows.sum()} token-rows through the experts' "
                    f"matrices; its routing sends {count.sum()} choices, each through an "
                    f"expert's 3 matrices {times} ({passes * 3 * count.sum()}): expert {e}'s "
                    f"{MATRICES[m]} multiplied {rows[e, m]} rows, {count[e]} routed to it")
            if high.any():
                text += (". An expert computes only the tokens routed to it: every expert "
                         "on every token, masked by the gates, does E/k times the work that "
                         "routing exists to avoid")
            else:
                text += (". The experts' work is counted in xt_gemm (and libxt's kernels "
                         "built on it), which the contract names: a product computed in a "
                         "loop of one's own, or through a copy of the weights, is not seen")
            out.append((r, text))
        return out
    return hinted(rule, "group the choices by expert and give each expert only its own rows "
                        "(the count of its choices), each matrix through xt_gemm")


RULES = [no_communication("one MoE layer", has_comm=False)]

BANK = (r"^xt_experts_(forward|backward)$",
        "calls {}, the lecture kit's bank of experts, which is what this exercise writes: group the "
        "choices by expert and apply each expert to its rows yourself")


@test("moe_forward", points=8, inputs=layer_inputs, reference=forward_reference,
      tolerance=tolerance, label=ep.label, words=ep.WORDS, facets=facets, locate=locate,
      rules=RULES + [routed_work(1)], forbidden=[BANK],
      hint="logits = x Wr; xt_topk_route(idx, w, probs, logits, T, E, k, 0); count each "
           "expert's choices, give choice c = t k + j a row in its expert's group; per expert "
           "with rows: g = xs Wg, u = xs Wu, h = silu(g) u, out = h Wd; y = 0, then y_t += "
           "w[c] out[row of c]; loss = alpha E sum_i (count_i / (k T)) (mean_t probs[t][i])")
def moe_forward(rng):
    return layer_cases(FORWARD, backward=False)


@test("moe_backward", points=14, inputs=layer_inputs, reference=backward_reference,
      tolerance=tolerance, label=ep.label, words=ep.WORDS, facets=facets, locate=locate,
      rules=RULES + [routed_work(2)], forbidden=[BANK, (r"^xt_(swiglu|silu)_backward$",
                        "calls {}: SwiGLU's backward is this exercise's to write by hand "
                        "(xt_gemm and an elementwise loop: dg = dh u s (1 + g (1 - s)))")],
      hint="recompute the routing and each expert's g, u, h, out; dw[c] = <dy_t, out_c>; the "
           "expert's output gradient is w[c] dy_t (the gate once); dWd += h^T do, dh = do "
           "Wd^T, du = dh silu(g), dg = dh u s (1 + g (1 - s)), dWg += xs^T dg, dWu += xs^T "
           "du, dxs = dg Wg^T + du Wu^T summed into dx; dlogits = xt_topk_route_backward(dw) "
           "+ the softmax backward of alpha E f_i / T; dwr += x^T dlogits, dx += dlogits "
           "Wr^T")
def moe_backward(rng):
    return layer_cases(BACKWARD, backward=True)
