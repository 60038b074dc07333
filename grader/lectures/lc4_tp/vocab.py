"""embedding_tp.c and cross_entropy_tp.c: the two ends of a model whose vocabulary is
cut across the ranks (Megatron's vocab-parallel embedding and fused cross-entropy).

Both split the vocabulary V by the split rule (tp.block): rank r holds the rows
(embedding) or the columns (logits) v_lo .. v_lo + v_count - 1. References are the
unsharded definitions in float64: y = E[tokens], dE[t] += dy[i] for every i with
tokens[i] = t (np.add.at), and the mean over tokens of log sum_j exp(z_ij) - z_it with
its gradient (softmax - one-hot) / n, cut into the rank's block afterwards.

Inputs: E, dy, the gradient dE arriving (random, nonzero, so `=` where `+=` belongs
shows) and the logits are random normal; the tokens are shared by the group and hold
the first and last row of every rank's block, one token twice, and random ones. The
vocabularies are not divisible by most np, and some are smaller than np, so that a rank
holds no row at all. The cross-entropy's cases add logits offset by +-1e4 per row (an
exp without the global max overflows to inf, or underflows to a sum of 0), every target
in one rank's block, dlogits_local NULL, and n = 0.

Tolerances, measured over seeds 1 to 5 (worst error / bound in the docs):
- embedding forward: 0. Each element of y is one rank's copy of E's element plus zeros
  from every other rank, which is exact in any order.
- embedding backward: 1e-5 times the sum of the magnitudes of what is added (tp.
  matmul_tolerance of |dE0| + the |dy| rows of the token): a float32 sum of k terms errs
  by about k 2^-24 of that, and k <= 4 here.
- loss: 1e-5 (1 + |loss|) + 2^-22 max |z|. Near |z| = 1e4 float32's step is 2^-10,
  about 1e-3: a correct program that forms log S + m in float32 before subtracting the
  target's logit rounds by half a step; 2^-22 max |z| is two and a half steps, and every
  mutant misses by more than 1e-1.
- dlogits: ((1e-5 + 2^-22 max_j |z_ij|) p_ij + 1e-5 [j = t_i]) / n per element, p being the
  softmax: the probabilities are relative quantities (an exp of z - log-sum-exp carries
  the log-sum-exp's rounding, relative to |z|), and the one-hot's 1 is exact.
"""

import numpy as np

import spec
from spec import hinted, test
from lectures.lc4_tp.tp import (NPS_LAYER, block, collectives_at_most, collectives_exactly,
                                identical_on_ranks, matmul_tolerance, no_communication)


# (V, d): V not divisible by 2, 3 or 4 except 16; V = 3 leaves a rank empty at np 4.
EMB_SHAPES = [(13, 4), (7, 3), (16, 2), (3, 5), (10, 6)]


def edge_tokens(V, np_):
    """The first and last row of every non-empty block."""
    out = []
    for r in range(np_):
        lo, count = block(V, np_, r)
        if count:
            out += [lo, lo + count - 1]
    return sorted(set(out))


def vocab_facets(case):
    """Whether np divides V, and whether some rank holds no row (column) of it."""
    return {"V%np": case["V"] % case.np, "empty block": int(case["V"] < case.np)}


# ------------------------------------------------------------------ embedding

def emb_label(case):
    p = case.params
    return f"np={case.np} V={p['V']} d={p['d']} n={p['n']}"


def emb_cases(rng):
    out = []
    for n in NPS_LAYER:
        for V, d in EMB_SHAPES:
            # every edge, one token twice, two random ones
            out.append({"np": n, "V": V, "d": d, "n": len(edge_tokens(V, n)) + 3})
        out.append({"np": n, "V": 11, "d": 4, "n": 1})
    return out


def emb_tokens(case, rng):
    V, n = case["V"], case["n"]
    if n == 1:
        return rng.integers(0, V, 1).astype(np.int32)
    t = edge_tokens(V, case.np)
    t += [int(rng.integers(0, V)) for _ in range(n - len(t) - 1)]
    t.append(t[int(rng.integers(0, len(t)))])  # a repeated token
    return rng.permutation(np.array(t, dtype=np.int32))


def emb_inputs(case, rng):
    V, d, n, np_ = case["V"], case["d"], case["n"], case.np
    f = np.float32
    tokens = emb_tokens(case, rng)
    if case["fn"] == "embedding_tp_forward":
        e = rng.normal(size=(V, d)).astype(f)
        return {"tokens": tokens, "e": [rows_block(e, np_, r) for r in range(np_)]}
    de0 = rng.normal(size=(V, d)).astype(f)
    return {"tokens": tokens, "dy": rng.normal(size=(n, d)).astype(f).reshape(-1),
            "de": [rows_block(de0, np_, r) for r in range(np_)]}


def rows_block(a, np_, r):
    lo, count = block(a.shape[0], np_, r)
    return np.ascontiguousarray(a[lo:lo + count]).reshape(-1)


def emb_reference(case, inputs):
    d, n, np_ = case["d"], case["n"], case.np
    tokens = inputs["tokens"].astype(np.int64)
    if case["fn"] == "embedding_tp_forward":
        e = np.concatenate([a.astype(np.float64).reshape(-1, d) for a in inputs["e"]])
        y = e[tokens].reshape(-1)
        return [{"y": y} for _ in range(np_)]
    de = np.concatenate([a.astype(np.float64).reshape(-1, d) for a in inputs["de"]])
    np.add.at(de, tokens, inputs["dy"].astype(np.float64).reshape(n, d))
    return [{"de": rows_block(de, np_, r)} for r in range(np_)]


def emb_tolerance(case, inputs, name, rank):
    if name == "y":
        return 0.0
    d, n = case["d"], case["n"]
    mag = np.concatenate([np.abs(a.astype(np.float64)).reshape(-1, d) for a in inputs["de"]])
    np.add.at(mag, inputs["tokens"].astype(np.int64),
              np.abs(inputs["dy"].astype(np.float64)).reshape(n, d))
    return matmul_tolerance(rows_block(mag, case.np, rank))


def emb_locate(case, name, index, rank):
    i, j = divmod(index, case["d"])
    if name == "y":
        return f"row {i}, column {j}: token {i} of the batch"
    lo, count = block(case["V"], case.np, rank)
    return f"row {i}, column {j} of this rank's {count} rows: token {lo + i}"


Y_IDENTICAL = hinted(
    identical_on_ranks(["y"], "every rank continues with the same embeddings, so y must be "
                              "the all-reduced sum on every rank, bit for bit"),
    "cause: the ranks hold different y: MPI_Allreduce gives every rank the same sum")


@test("embedding_tp", points=5, inputs=emb_inputs, reference=emb_reference,
      tolerance=emb_tolerance, label=emb_label, facets=vocab_facets, locate=emb_locate,
      check=Y_IDENTICAL, check_first=True,
      rules=[collectives_exactly(lambda c, i, r: [("MPI_Allreduce", c["n"] * c["d"])],
                                 "one all-reduce of n*d floats: y")],
      hint="own token t (v_lo <= t < v_lo + v_count): row t - v_lo of e_local; any other "
           "token: a row of zeros (y arrives holding garbage); then one all-reduce (SUM) of "
           "the whole y")
def embedding_tp_forward(rng):
    return emb_cases(rng)


@test("embedding_tp", points=4, inputs=emb_inputs, reference=emb_reference,
      tolerance=emb_tolerance, label=emb_label, facets=vocab_facets, locate=emb_locate,
      rules=[no_communication("the embedding's backward", has_comm=False)],
      hint="for every i whose token t is in [v_lo, v_lo + v_count): add row i of dy to row "
           "t - v_lo of de_local (+=: a repeated token adds twice, and de_local already "
           "holds earlier gradients); skip every other token")
def embedding_tp_backward(rng):
    return emb_cases(rng)


# -------------------------------------------------------------- cross-entropy

# (n, V, logits, targets, grad): logits "small" (normal, scale 3) or "1e4" (each row offset
# by +-1e4); targets "random" or "one block" (all in one rank's block).
CE_SHAPES = [(4, 13, "small", "random", 1), (1, 7, "small", "random", 1),
             (6, 32, "1e4", "random", 1), (5, 5, "small", "random", 1),
             (5, 11, "small", "one block", 1), (3, 9, "small", "random", 0),
             (4, 13, "1e4", "one block", 0), (0, 9, "small", "random", 1)]


# The 0/1 parameters written as words, in labels and in the summary of failed cases.
CE_WORDS = {"grad": ("dlogits", "dlogits=NULL")}


def ce_label(case):
    p = case.params
    return (f"np={case.np} n={p['n']} V={p['V']} logits={p['logits']} "
            f"targets={p['targets']} {spec.word(case, 'grad')}")


def ce_cases(rng):
    return [{"np": n, "n": k, "V": V, "logits": z, "targets": t.replace(" ", "_"), "grad": g}
            for n in NPS_LAYER for k, V, z, t, g in CE_SHAPES]


def ce_inputs(case, rng):
    n, V, np_ = case["n"], case["V"], case.np
    z = 3.0 * rng.normal(size=(n, V))
    if case["logits"] == "1e4":
        z += 1e4 * rng.choice([-1.0, 1.0], size=(n, 1))
    z = z.astype(np.float32)
    if case["targets"] == "one_block":
        owner = max(r for r in range(np_) if block(V, np_, r)[1])
        lo, count = block(V, np_, owner)
        targets = rng.integers(lo, lo + count, n)
    else:
        targets = rng.integers(0, V, n)
    return {"logits": [np.ascontiguousarray(z[:, slice(*span(V, np_, r))]).reshape(-1)
                       for r in range(np_)],
            "targets": targets.astype(np.int32)}


def span(n, np_, r):
    lo, count = block(n, np_, r)
    return lo, lo + count


def ce_logits(case, inputs):
    """The whole n x V logits, float64, from every rank's column block."""
    n = case["n"]
    return np.concatenate([a.astype(np.float64).reshape(n, -1) for a in inputs["logits"]],
                          axis=1)


def ce_softmax(case, inputs):
    z = ce_logits(case, inputs)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return z, e / e.sum(axis=1, keepdims=True)


def ce_reference(case, inputs):
    n, V, np_ = case["n"], case["V"], case.np
    t = inputs["targets"].astype(np.int64)
    if n == 0:
        loss, dz = 0.0, np.zeros((0, V))
    else:
        z, p = ce_softmax(case, inputs)
        m = z.max(axis=1)
        lse = m + np.log(np.exp(z - m[:, None]).sum(axis=1))
        loss = float(np.mean(lse - z[np.arange(n), t]))
        dz = p.copy()
        dz[np.arange(n), t] -= 1.0
        dz /= n
    outs = []
    for r in range(np_):
        mine = {"loss": np.array([loss])}
        if case["grad"]:
            mine["dlogits"] = np.ascontiguousarray(dz[:, slice(*span(V, np_, r))]).reshape(-1)
        outs.append(mine)
    return outs


def ce_tolerance(case, inputs, name, rank):
    n, V = case["n"], case["V"]
    if n == 0:
        return 1e-30
    z, p = ce_softmax(case, inputs)
    if name == "loss":
        loss = ce_reference(case, inputs)[0]["loss"][0]
        return 1e-5 * (1 + abs(loss)) + 2.0**-22 * np.abs(z).max()
    onehot = np.zeros_like(p)
    onehot[np.arange(n), inputs["targets"].astype(np.int64)] = 1.0
    rowmax = np.abs(z).max(axis=1, keepdims=True)
    tol = ((1e-5 + 2.0**-22 * rowmax) * p + 1e-5 * onehot) / n + 1e-30
    return np.ascontiguousarray(tol[:, slice(*span(V, case.np, rank))]).reshape(-1)


def ce_locate(case, name, index, rank):
    if name != "dlogits":
        return None
    lo, count = block(case["V"], case.np, rank)
    i, j = divmod(index, count)
    return f"row {i}, column {j} of {case['n']} x {count}: token {i}, vocabulary entry {lo + j}"


LOSS_IDENTICAL = hinted(
    identical_on_ranks(["loss"], "the loss is one number for the whole model, so every rank "
                                 "must return the same one, bit for bit"),
    "cause: the ranks return different losses: each rank's own block gives only a part of "
    "the sum of exps and only its owner has the target's logit; all-reduce both, then "
    "compute the loss from the reduced values on every rank")


@test("cross_entropy_tp", points=10, inputs=ce_inputs, reference=ce_reference,
      tolerance=ce_tolerance, label=ce_label, words=CE_WORDS, facets=vocab_facets, locate=ce_locate,
      check=LOSS_IDENTICAL, check_first=True,
      rules=[collectives_at_most(("MPI_Allreduce",), lambda c, i, r: 3,
                                 lambda c, i, r: 2 * c["n"],
                                 "a few numbers per token: the max, the sum of exps, the "
                                 "target's logit; never the logits themselves")],
      hint="per token: the global max of the logits (all-reduce MAX), then this block's sum "
           "of exp(z - max) and, from the target's owner only, z_target - max (one "
           "all-reduce SUM of 2n floats); loss = mean of log(sum) - (z_target - max); "
           "dlogits = (softmax - 1 at the target, on its owner only) / n")
def cross_entropy_tp(rng):
    return ce_cases(rng)
