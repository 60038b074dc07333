"""model_tp.c: a decoder language model trained with tensor parallelism.

The reference trains the whole model on one process in float64 (DecoderLM below:
the embedding, lecture 4's decoder blocks from nn.Decoder, a final RMSNorm, a
linear head, the mean cross-entropy), with AdamW (nn.adam_update) from the same
initial weights, on the same tokens, for `steps` steps. After every step the
program writes its loss and every tensor it holds; each is compared with the
rank's block of the reference's (the split rule over the vocabulary and the
hidden units; query heads in blocks of hq/np; KV heads in blocks, or one KV head
shared by np/hkv ranks).

Cases: np 1, 2, 3, 4 and 8; vocabularies and hidden sizes that np does not
divide; KV heads in blocks (hkv >= np) and replicated (hkv < np, up to 4
replicas at np = 8); one and two blocks; batches of one and two sequences.

Tolerances (model_tolerance): the loss within LOSS_TOLERANCE (1e-5 (1 + |loss|));
each gradient within GRAD_RTOL (1e-4) of its whole tensor's largest magnitude in
step 1 and LATER_GRAD_RTOL (2e-3) after, when the weights it is computed from have
drifted within their own bound; each parameter within 1e-4 (1 + |p|): AdamW with
eps = 1e-3 turns a float32 gradient error into an update error of up to lr/eps
times it, and that adds up over the steps. Measured (grade.py --margins, seeds 1
to 6 and 101 to 106): step-1 gradients at most 8.3% of their bound, parameters at
most 7.8% of theirs. Gradients are compared because AdamW hides their scale (its
first step is nearly lr sign(g)); every mutant's gradient is off by the size of a
term.

Communication, per step and rank (n = batch T tokens): exactly 2 + 4L
all-reduces of n d floats on the case's communicator (the embedding's and
2 per block forward, the head's and 2 per block backward); at most 3 more
for the cross-entropy, each of at most 2n floats; 2L all-reduces of d hd
hkv_local floats on a communicator of the KV replicas where hkv < np (dWk
and dWv of each block), none otherwise; nothing else: no point-to-point
message, no gather of the logits.
"""

import numpy as np

import nn
from spec import OfScale, Relative, amount, disagreement, hinted, test
from training import LOSS_TOLERANCE
from lectures.lc4_tp.tp import COMMUNICATING, block, identical_on_ranks

STEPS = 2
EPS = 1e-5
HP = {"beta1": 0.9, "beta2": 0.95, "eps": 1e-3}
PARAM_TOLERANCE = Relative(1e-4, 1e-4)
GRAD_RTOL = 1e-4
LATER_GRAD_RTOL = 2e-3
NAMES = ("norm1", "wq", "wk", "wv", "wo", "norm2", "wg", "wu", "wd")

# (vocab, d, layers, hq, hkv, hd, ff, batch, T) per world size.
CONFIGS = {
    1: [(23, 8, 1, 2, 1, 4, 12, 1, 5), (37, 12, 2, 4, 2, 3, 20, 2, 4)],
    2: [(23, 8, 1, 2, 1, 4, 13, 1, 5), (37, 12, 2, 4, 2, 3, 20, 2, 4)],
    3: [(29, 9, 1, 6, 3, 3, 16, 2, 3), (31, 12, 2, 3, 1, 4, 10, 1, 6)],
    4: [(37, 12, 2, 4, 2, 3, 26, 2, 4), (41, 16, 1, 8, 8, 2, 30, 1, 5)],
    8: [(61, 16, 1, 8, 2, 2, 36, 1, 4)],
}


def model_label(case):
    p = case.params
    return (f"np={case.np} vocab={p['vocab']} d={p['d']} layers={p['layers']} hq={p['hq']} "
            f"hkv={p['hkv']} hd={p['hd']} ff={p['ff']} batch={p['batch']} T={p['T']} "
            f"wd={p['wd']}")


def model_cases(rng):
    out = []
    for n, configs in CONFIGS.items():
        for k, (v, d, layers, hq, hkv, hd, ff, batch, T) in enumerate(configs):
            out.append({"np": n, "vocab": v, "d": d, "layers": layers, "hq": hq, "hkv": hkv,
                        "hd": hd, "ff": ff, "batch": batch, "T": T, "steps": STEPS,
                        "lr": "0.01", "wd": "0.1" if k % 2 else "0"})
    return out


def model_facets(case):
    return {"kv replicas": max(1, case.np // case["hkv"]), "vocab%np": case["vocab"] % case.np}


# ------------------------------------------------------------- the model

class DecoderLM:
    """The whole model in float64: embedding E (V x d), `layers` nn.Decoder blocks, a
    final RMSNorm, a head (d x V), the mean cross-entropy. Parameters flat, in that
    order (the blocks in xt_decoder_layout's)."""

    def __init__(self, vocab, d, layers, hq, hkv, hd, ff):
        self.vocab, self.d, self.layers = vocab, d, layers
        self.block = nn.Decoder(d, hq, hkv, hd, ff, EPS)
        self.nparams = 2 * vocab * d + layers * self.block.nparams + d

    def views(self, flat):
        V, d, nb = self.vocab, self.d, self.block.nparams
        out = {"embed": flat[:V * d].reshape(V, d)}
        at = V * d
        for layer in range(self.layers):
            for name, view in self.block.views(flat[at:at + nb]).items():
                out[f"L{layer}_{name}"] = view
            at += nb
        out["final_norm"] = flat[at:at + d]
        out["head"] = flat[at + d:].reshape(d, V)
        return out

    def loss_and_grads(self, flat, tokens, targets, batch, T):
        p = self.views(flat)
        nb = self.block.nparams
        x = p["embed"][tokens]
        caches = []
        for layer in range(self.layers):
            x, cache = self.block.forward(flat[self.vocab * self.d + layer * nb:][:nb], x,
                                          batch, T)
            caches.append(cache)
        hf, rstd = nn.rmsnorm_forward(x, p["final_norm"], EPS)
        loss, dlogits = nn.cross_entropy_loss(hf @ p["head"], targets)
        grads = np.zeros_like(flat)
        g = self.views(grads)
        g["head"][...] = hf.T @ dlogits
        dx, g["final_norm"][...] = nn.rmsnorm_backward(dlogits @ p["head"].T, x,
                                                       p["final_norm"], rstd)
        for layer in reversed(range(self.layers)):
            dx, dblock = self.block.backward(dx, caches[layer])
            at = self.vocab * self.d + layer * nb
            grads[at:at + nb] = dblock
        np.add.at(g["embed"], tokens, dx)
        return loss, grads


def model_of(case):
    p = case.params
    return DecoderLM(p["vocab"], p["d"], p["layers"], p["hq"], p["hkv"], p["hd"], p["ff"])


def split_of(case, rank):
    """This rank's (lo, count) per split dimension, as model_tp.c's init cuts them."""
    n, p = case.np, case.params
    hq_local = p["hq"] // n
    if p["hkv"] >= n:
        kv = (rank * p["hkv"] // n, p["hkv"] // n)
    else:
        kv = (rank // (n // p["hkv"]), 1)
    return {"vocab": block(p["vocab"], n, rank), "q": (rank * hq_local, hq_local), "kv": kv,
            "ff": block(p["ff"], n, rank)}


def shard(case, rank, name, full):
    """Rank `rank`'s block of the whole tensor `name` (as model_tp.c holds it), flat."""
    s, hd = split_of(case, rank), case["hd"]
    base = name.split("_", 1)[1] if name.startswith("L") else name

    def cols(a, lo, count):
        return a[:, lo:lo + count]

    if base == "embed":
        lo, c = s["vocab"]
        out = full[lo:lo + c]
    elif base == "head":
        out = cols(full, *s["vocab"])
    elif base == "wq":
        out = cols(full, s["q"][0] * hd, s["q"][1] * hd)
    elif base in ("wk", "wv"):
        out = cols(full, s["kv"][0] * hd, s["kv"][1] * hd)
    elif base == "wo":
        out = full[s["q"][0] * hd:(s["q"][0] + s["q"][1]) * hd]
    elif base in ("wg", "wu"):
        out = cols(full, *s["ff"])
    elif base == "wd":
        lo, c = s["ff"]
        out = full[lo:lo + c]
    else:  # the norms: whole on every rank
        out = full
    return np.ascontiguousarray(out).reshape(-1)


def initial_weights(m, rng):
    """Whole initial weights of DecoderLM m, float32, flat: the norms' gains near 1, every
    matrix normal with variance 1/fan-in."""
    w0 = np.zeros(m.nparams)
    for name, view in m.views(w0).items():
        if "norm" in name:
            view[...] = 1.0 + 0.1 * rng.normal(size=view.shape)
        else:
            view[...] = rng.normal(size=view.shape) / np.sqrt(view.shape[0])
    return w0.astype(np.float32)


def model_inputs(case, rng):
    w0 = initial_weights(model_of(case), rng)
    n = case["batch"] * case["T"] * case["steps"]
    tokens = rng.integers(0, case["vocab"], n).astype(np.int32)
    targets = rng.integers(0, case["vocab"], n).astype(np.int32)
    # The first and last id of every rank's vocabulary block appear in every step.
    edges = sorted({e for r in range(case.np) for e in
                    (block(case["vocab"], case.np, r)[0],
                     sum(block(case["vocab"], case.np, r)) - 1) if e >= 0})
    per = case["batch"] * case["T"]
    for s in range(case["steps"]):
        for k, e in enumerate(edges[:per]):
            (tokens if k % 2 else targets)[s * per + k] = e
    return {"w0": w0, "tokens": tokens, "targets": targets}


def hyperparameters(case):
    return dict({k: float(np.float32(v)) for k, v in HP.items()},
                lr=float(np.float32(float(case["lr"]))), wd=float(np.float32(float(case["wd"]))))


def model_reference(case, inputs):
    m = model_of(case)
    hp = hyperparameters(case)
    w = inputs["w0"].astype(np.float64)
    mom, vel = np.zeros_like(w), np.zeros_like(w)
    per = case["batch"] * case["T"]
    out = [{} for _ in range(case.np)]
    for s in range(case["steps"]):
        tok = inputs["tokens"][s * per:(s + 1) * per]
        tgt = inputs["targets"][s * per:(s + 1) * per]
        loss, g = m.loss_and_grads(w, tok, tgt, case["batch"], case["T"])
        w, mom, vel = nn.adam_update(w, g, mom, vel, s + 1, hp)
        views, grads = m.views(w), m.views(g)
        for r in range(case.np):  # compared in this order: the cause before its effects
            out[r][f"step{s + 1}_loss"] = np.array([loss])
            for name, full in grads.items():
                out[r][f"step{s + 1}_grad_{name}"] = shard(case, r, name, full)
            for name, full in views.items():
                out[r][f"step{s + 1}_{name}"] = shard(case, r, name, full)
    return out


def model_tolerance(case, inputs, name, rank):
    """The loss: LOSS_TOLERANCE. A gradient: a fraction of its whole tensor's largest
    magnitude (float32 errors in a chain of products scale with the tensor, and a
    near-zero element may lose every digit): GRAD_RTOL in step 1, from the very
    weights the reference starts from, LATER_GRAD_RTOL after, from weights that have
    drifted within their tolerance. A parameter: PARAM_TOLERANCE."""
    if name.endswith("_loss"):
        return LOSS_TOLERANCE
    if "_grad_" in name:
        return OfScale(GRAD_RTOL if name.startswith("step1_") else LATER_GRAD_RTOL, 1e-3)
    return PARAM_TOLERANCE


# --------------------------------------------------------- checks and rules

def replicated(case, inputs, outs):
    """The loss and the norms on every rank, and each KV head's weights on its replicas,
    bit for bit: every copy of a replicated tensor must take the same step."""
    names = [k for k in outs[0] if k.endswith(("_loss", "norm1", "norm2", "final_norm"))]
    bad = identical_on_ranks(names, "the loss and the RMSNorm gains are the same on every "
                                    "rank: every rank computes them from the same whole "
                                    "activations and takes the same AdamW step")(case, inputs,
                                                                                  outs)
    if bad or case["hkv"] >= case.np:
        return bad
    reps = case.np // case["hkv"]
    found = disagreement(outs, [k for k in outs[0] if k.endswith(("_wk", "_wv"))],
                         [(r, r - r % reps) for r in range(case.np) if r % reps])
    return [(found[1], f"{found[0]}: they hold the same KV head, so their gradients must be "
                       f"summed over the replicas (each saw only its own query heads) before "
                       f"the same AdamW step")] if found else []


def communication(case, inputs, records):
    """The exact all-reduces of a step, counted over all steps."""
    n, d, L, S = case["batch"] * case["T"], case["d"], case["layers"], case["steps"]
    reps = max(1, case.np // case["hkv"])
    kv_floats = d * case["hd"] * (1 if reps > 1 else case["hkv"] // case.np)
    out = []
    for r, rec in enumerate(records):
        used = sorted(fn for fn, st in rec.calls.items() if st.kind in COMMUNICATING and
                      st.calls and fn not in ("MPI_Allreduce", "MPI_Comm_split", "MPI_Comm_free"))
        if used:
            out.append((r, f"rank {r} called {', '.join(used)}: a tensor-parallel step "
                           f"communicates only through all-reduces (the logits are never "
                           f"gathered)"))
            break
        ars = [e for e in rec.events if e.fn == "MPI_Allreduce"]
        act = [e for e in ars if e.comm == "case" and e.bytes == 4 * n * d]
        ce = [e for e in ars if e.comm == "case" and e.bytes != 4 * n * d]
        kv = [e for e in ars if e.comm == "other"]
        elsewhere = [e for e in ars if e.comm not in ("case", "other")]
        if elsewhere:
            out.append((r, f"rank {r} all-reduced on {elsewhere[0].comm}: use the model's comm "
                           f"(and the KV replicas' communicator made from it)"))
        elif len(act) != S * (2 + 4 * L):
            out.append((r, f"rank {r} made {amount(len(act), ' all-reduces')} of n d = {n * d} "
                           f"floats in {S} steps, expected {S * (2 + 4 * L)}: per step the "
                           f"embedding's, 2 per block forward (after Wo and after Wd), the "
                           f"head's input gradient and 2 per block backward (before the QKV "
                           f"and the gate/up projections)"))
        elif len(ce) > 3 * S or any(e.bytes > 4 * 2 * n for e in ce):
            big = max((e.bytes // 4 for e in ce), default=0)
            out.append((r, f"rank {r} made {len(ce)} other all-reduces on comm in {S} steps "
                           f"(the largest {big} floats): the fused cross-entropy needs at most "
                           f"3 per step, of at most 2n = {2 * n} floats"))
        elif len(kv) != (2 * L * S if reps > 1 else 0) or any(e.bytes != 4 * kv_floats
                                                               for e in kv):
            want = (f"{2 * L * S} of {kv_floats} floats (dWk and dWv of each block, every step)"
                    if reps > 1 else "none: no KV head is replicated")
            out.append((r, f"rank {r} made {amount(len(kv), ' all-reduces')} on a communicator "
                           f"of its own; expected {want}"))
        if out:
            break
    return out


@test("model_tp", points=20, inputs=model_inputs, reference=model_reference,
      tolerance=model_tolerance, label=model_label, facets=model_facets,
      check=hinted(replicated, "cause: copies of a replicated tensor drifted apart: the norms "
                               "see the same whole activations on every rank; a shared KV "
                               "head's weight gradients must be summed over its replicas"),
      check_first=True, rules=[communication],
      hint="embedding: own rows, zeros elsewhere, all-reduce; each block: f in front of "
           "QKV and gate/up (all-reduce of dx backward), g after Wo and Wd (all-reduce "
           "forward); head column-parallel over the vocabulary with the fused "
           "cross-entropy; then AdamW on every tensor the rank holds")
def model_tp_step(rng):
    return model_cases(rng)
