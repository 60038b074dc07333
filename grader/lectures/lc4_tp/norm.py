"""rms_norm.c: RMSNorm on tokens split across the ranks (sequence parallelism), its
weight gamma replicated.

References are the definition in float64 over the whole token set, written here:
rstd_i = (mean_j x_ij^2 + eps)^-1/2, y = x rstd gamma; backward dx_ij = rstd_i (dy_ij
gamma_j - x_ij rstd_i^2 s_i / d) with s_i = sum_j dy_ij gamma_j x_ij, and dgamma = dgamma0
+ the sum over all tokens of dy x rstd. The tokens are then cut into each rank's block by
the split rule (tp.rows_of); dgamma is the whole sum, on every rank. The backward's rstd
input is the reference's, rounded to float32, but its expected values use the exact one.

Inputs: x random with every token scaled by its own factor between 1e-3 and 3, so that
in some tokens mean x^2 is near eps (eps 1e-5, 1e-6 or 1e-3) and eps visibly matters,
and one token all zeros (a padding token: rstd = eps^-1/2) in half the cases; gamma and
dy random (never ones), dgamma arriving holding random values, the same on every rank as
a replicated parameter's gradient is. Shapes (tokens x d): tokens not divisible by np,
fewer than np (ranks holding no token still take part in the all-reduce), one token.

Tolerance, per element, 1e-5 times the same expression evaluated on magnitudes:
rstd: 1e-5 rstd; y: 1e-5 |x| rstd |gamma|; dx: 1e-5 rstd (|dy gamma| + |x| rstd^2
sum_j |dy_j gamma_j x_j| / d); dgamma: 1e-5 (|dgamma0| + sum over tokens of |dy x| rstd).
A float32 sum of k terms errs by about k 2^-24 of their magnitudes' sum, and rstd's own
error (d 2^-24 relative, plus the sqrt's and the division's roundings) scales every
term, so with d <= 32 and at most 13 tokens the error stays under 3e-6 of these
magnitudes. Measured over seeds 1..8, the worst error was 0.027 of the tolerance (dx;
y 0.025, rstd 0.019, dgamma 0.021), accumulating in float32. Every defect changes
results by a term's size: eps left out or moved outside the sqrt (the tokens near eps;
without eps the zero token's rstd is infinite), a sum where the mean belongs (sqrt(d)),
dgamma without rstd, the dx term through rstd.
"""

import numpy as np

import spec
from spec import hinted, test
from lectures.lc4_tp.tp import (NPS_LAYER, block, collectives_exactly, identical_on_ranks,
                                no_communication, rows_of, shape_locator)

# (tokens, d): tokens not divisible by 2, 3, 4 or 8; fewer than np; one token; 12.
SHAPES = [(7, 8), (5, 16), (2, 6), (13, 5), (1, 12), (12, 32)]
EPS = ("1e-5", "1e-6", "1e-3")

FORBIDDEN = [(r"^xt_rmsnorm_(forward|backward)$",
              "calls {}, libxt's copy of the RMSNorm this exercise writes: write it yourself")]


# The 0/1 parameters written as words, in labels and in the summary of failed cases.
NORM_WORDS = {"zero_token": ("a zero token", "no zero token")}


def norm_label(case):
    return (f"np={case.np} tokens={case['tokens']} d={case['d']} eps={case['eps']} "
            f"{spec.word(case, 'zero_token')}")


def norm_cases(rng):
    return [{"np": n, "tokens": t, "d": d, "eps": EPS[k % len(EPS)], "zero_token": k % 2}
            for n in NPS_LAYER for k, (t, d) in enumerate(SHAPES)]


def norm_facets(case):
    """Whether np divides the tokens, and whether some rank holds none of them."""
    return {"tokens%np": case["tokens"] % case.np, "empty block": int(case["tokens"] < case.np)}


# ------------------------------------------------------------ the definition

def definition_forward(x, gamma, eps):
    """float64 y and rstd of every row of x."""
    rstd = 1.0 / np.sqrt(np.mean(x * x, axis=1) + eps)
    return x * rstd[:, None] * gamma, rstd


def definition_backward(x, gamma, rstd, dy):
    """float64 dx and the sum over rows of dgamma, by the chain rule through rstd."""
    d = x.shape[1]
    s = np.sum(dy * gamma * x, axis=1)
    dx = rstd[:, None] * (dy * gamma - x * (rstd ** 2 * s / d)[:, None])
    return dx, np.sum(dy * x * rstd[:, None], axis=0)


# -------------------------------------------------------------------- inputs

def whole(case, rng):
    """Every token's x and dy, gamma, dgamma0: float32, random."""
    t, d = case["tokens"], case["d"]
    f = np.float32
    scale = 10.0 ** rng.uniform(-3.0, 0.5, size=(t, 1))
    x = (rng.normal(size=(t, d)) * scale).astype(f)
    if case["zero_token"]:
        x[rng.integers(t)] = 0.0
    return {"x": x, "gamma": rng.normal(size=d).astype(f),
            "dy": rng.normal(size=(t, d)).astype(f), "dgamma": rng.normal(size=d).astype(f)}


def eps_of(case):
    """eps as the program has it: the case's text read as float32."""
    return float(np.float32(float(case["eps"])))


def norm_inputs(case, rng):
    W = whole(case, rng)
    n = case.np
    inputs = {"x": [rows_of(W["x"], n, r).reshape(-1) for r in range(n)], "gamma": W["gamma"]}
    if case["fn"] == "rmsnorm_backward":
        _, rstd = definition_forward(W["x"].astype(np.float64), W["gamma"].astype(np.float64),
                                  eps_of(case))
        rstd = rstd.astype(np.float32)
        inputs.update(rstd=[rows_of(rstd, n, r) for r in range(n)],
                      dy=[rows_of(W["dy"], n, r).reshape(-1) for r in range(n)],
                      dgamma=W["dgamma"])
    return inputs


def joined(case, inputs, name):
    """The whole token set of a per-rank input, float64, tokens x d."""
    return np.concatenate([inputs[name][r].astype(np.float64).reshape(-1, case["d"])
                           for r in range(case.np)])


# ----------------------------------------------------------------- reference

def norm_reference(case, inputs):
    n = case.np
    x = joined(case, inputs, "x")
    gamma = inputs["gamma"].astype(np.float64)
    y, rstd = definition_forward(x, gamma, eps_of(case))
    if case["fn"] == "rmsnorm_forward":
        # rstd first: a wrong rstd explains every wrong y of its token.
        return [{"rstd": rows_of(rstd, n, r), "y": rows_of(y, n, r).reshape(-1)}
                for r in range(n)]
    dx, dgamma = definition_backward(x, gamma, rstd, joined(case, inputs, "dy"))
    dgamma = inputs["dgamma"].astype(np.float64) + dgamma
    return [{"dx": rows_of(dx, n, r).reshape(-1), "dgamma": dgamma} for r in range(n)]


def norm_tolerance(case, inputs, name, rank):
    """1e-5 times the expression on magnitudes (module docstring)."""
    n, d = case.np, case["d"]
    x = np.abs(joined(case, inputs, "x"))
    gamma = np.abs(inputs["gamma"].astype(np.float64))
    _, rstd = definition_forward(x, gamma, eps_of(case))
    if name == "rstd":
        bound = rows_of(rstd, n, rank)
    elif name == "y":
        bound = rows_of(x * rstd[:, None] * gamma, n, rank)
    else:
        dy = np.abs(joined(case, inputs, "dy"))
        if name == "dx":
            s = np.sum(dy * gamma * x, axis=1)
            bound = rows_of(rstd[:, None] * (dy * gamma + x * (rstd ** 2 * s / d)[:, None]),
                            n, rank)
        else:
            bound = np.abs(inputs["dgamma"].astype(np.float64)) + np.sum(
                dy * x * rstd[:, None], axis=0)
    return (1e-5 * bound + 1e-30).reshape(-1)


def norm_shapes(case, name, rank):
    rows = block(case["tokens"], case.np, rank)[1]
    return {"y": (rows, case["d"]), "dx": (rows, case["d"])}.get(name)


def token_locator():
    """'(token 4, feature 2)': the row of a WRONG element named by its token number in
    the whole set, which is what a student compares with a single-process run."""
    plain = shape_locator(norm_shapes)

    def locate(case, name, index, rank):
        where = plain(case, name, index, rank)
        if where is None:
            if name == "rstd":
                return f"token {block(case['tokens'], case.np, rank)[0] + index}"
            return None
        i, j = divmod(index, case["d"])
        return f"token {block(case['tokens'], case.np, rank)[0] + i}, feature {j}; {where}"
    return locate


DGAMMA_IDENTICAL = hinted(
    identical_on_ranks(["dgamma"], "gamma is replicated, so every rank must apply the same "
                                   "gradient: the sum over all tokens, bit for bit"),
    "cause: the ranks hold different dgamma: each rank's own tokens give only part of the "
    "sum; all-reduce the part (MPI_Allreduce gives every rank the same result)")


@test("rms_norm", points=4, inputs=norm_inputs, reference=norm_reference,
      tolerance=norm_tolerance, label=norm_label, words=NORM_WORDS, facets=norm_facets,
      locate=token_locator(),
      rules=[no_communication("the RMSNorm forward")], forbidden=FORBIDDEN,
      hint="rstd_i = 1/sqrt(mean over the d features of x_ij^2 + eps), eps inside the sqrt; "
           "y_ij = x_ij rstd_i gamma_j; a token needs only itself")
def rmsnorm_forward(rng):
    return norm_cases(rng)


@test("rms_norm", points=6, inputs=norm_inputs, reference=norm_reference,
      tolerance=norm_tolerance, label=norm_label, words=NORM_WORDS, facets=norm_facets,
      locate=token_locator(),
      check=DGAMMA_IDENTICAL, check_first=True, forbidden=FORBIDDEN,
      rules=[collectives_exactly(lambda c, i, r: [("MPI_Allreduce", c["d"])],
                                 "one all-reduce of d floats: the own tokens' part of dgamma")],
      hint="dx_ij = rstd_i (dy_ij gamma_j - x_ij rstd_i^2 s_i / d), s_i = sum_j dy_ij gamma_j "
           "x_ij, overwritten; sum dy x rstd over the own tokens into a zeroed buffer of d, "
           "all-reduce that buffer, then add it to dgamma")
def rmsnorm_backward(rng):
    return norm_cases(rng)
