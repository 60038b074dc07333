"""attention_tp.c: causal grouped-query self-attention split by heads (Wq, Wk, Wv by
the columns of the own heads, Wo by their rows).

The split (the exercise's header): rank r owns query heads [r hq/np, (r+1) hq/np);
when hkv >= np the KV heads [r hkv/np, (r+1) hkv/np), otherwise KV head r hkv/np, held
by np/hkv ranks (its replicas). Cases (hq, hkv, np) cover both: KV heads split
(4,4,2), (8,2,2), (8,8,4), (12,6,3), (16,4,8), one rank (4,4,1), (2,1,1), and replicated
(4,1,2), (8,2,4), (8,1,4), (6,1,3), (8,2,8), with (6,3,3) and (8,8,8) where every rank
holds exactly one of each; two shapes each (init and shard, which read no sequence: one).
Shapes (d, hd, batch, T): d 6, 7, 9, 10, 13; hd 2 to 5 (odd ones too); T 1 (a token
attending only to itself) to 9; batch 1 and 2 (two sequences that must not see each
other).

The reference is the whole layer in float64: q, k, v = x Wq, x Wk, x Wv,
nn.attention_forward / attention_backward (libxt's twin, checked against finite
differences by nntest.py), y = o Wo; each rank's weight gradients are the blocks of the
whole ones (a replicated KV head's gradient whole on each of its replicas). The backward
case runs the program's own forward first, so its communication is forward's all-reduce,
dx's, and on replica groups dWk's and dWv's on the replicas' communicator, in any order.
Weight gradients arrive holding random values (the same on a KV head's replicas, as
training keeps them); dy is random.

Tolerance: each element within 2e-5 of the largest magnitude of its whole tensor's
reference (max(1, max |ref|)), as mlp.py: a chain of float32 products and a softmax errs
relative to the tensor's scale, not to each element. Measured (grade.py --margins, seeds
1 to 6): worst 1.8e-6 of the scale, 9.0% of the bound (backward, dwq at np=1; over the
seeds its worst ranged 3.4% to 9.0%); forward worst 2.6% (y).
A wrong head, a missing term or a missing sum changes elements by the size of a term.
"""

import numpy as np

import nn
from spec import OfScale, disagreement, hinted, test
from lectures.lc4_tp.tp import collectives_exactly, identical_on_ranks

# (hq, hkv, np)
CONFIGS = [(4, 4, 1), (2, 1, 1), (4, 4, 2), (8, 2, 2), (4, 1, 2), (8, 2, 4), (8, 1, 4),
           (8, 8, 4), (6, 3, 3), (6, 1, 3), (12, 6, 3), (8, 2, 8), (8, 8, 8), (16, 4, 8)]
# (d, hd, batch, T)
SHAPES = [(7, 3, 1, 5), (10, 4, 2, 3), (13, 5, 2, 1), (6, 2, 1, 9), (9, 3, 2, 6)]
ATTN_RTOL = 2e-5


def split(hq, hkv, np_, r):
    """Rank r's heads by the exercise's rule: (q_lo, hq_local, kv_lo, hkv_local, replicas)."""
    if hkv >= np_:
        return r * (hq // np_), hq // np_, r * (hkv // np_), hkv // np_, 1
    return r * (hq // np_), hq // np_, r * hkv // np_, 1, np_ // hkv


def layout(case, r):
    return split(case["hq"], case["hkv"], case.np, r)


def attn_label(case):
    p = case.params
    text = f"np={case.np} hq={p['hq']} hkv={p['hkv']} d={p['d']} hd={p['hd']}"
    return text + (f" batch={p['batch']} T={p['T']}" if "T" in p else "")


def attn_facets(case):
    return {"replicas": layout(case, 0)[4]}


def attn_cases(with_sequence):
    """Every configuration; forward and backward with two shapes each, init and shard
    (which read no sequence) with one."""
    out = []
    for i, (hq, hkv, n) in enumerate(CONFIGS):
        shapes = [SHAPES[i % len(SHAPES)], SHAPES[(i + 2) % len(SHAPES)]]
        for d, hd, batch, T in shapes[:2 if with_sequence else 1]:
            c = {"np": n, "hq": hq, "hkv": hkv, "d": d, "hd": hd}
            if with_sequence:
                c.update(batch=batch, T=T)
            out.append(c)
    return out


def head_columns(a, lo, count, hd):
    """The columns of heads lo .. lo+count-1 (hd each), contiguous."""
    return np.ascontiguousarray(a[:, lo * hd:(lo + count) * hd])


def head_rows(a, lo, count, hd):
    return np.ascontiguousarray(a[lo * hd:(lo + count) * hd])


def blocks_of(case, whole, r):
    """Rank r's blocks {wq, wk, wv, wo} of the whole weights (or of their gradients)."""
    q_lo, hq_l, kv_lo, hkv_l, _ = layout(case, r)
    hd = case["hd"]
    return {"wq": head_columns(whole["wq"], q_lo, hq_l, hd),
            "wk": head_columns(whole["wk"], kv_lo, hkv_l, hd),
            "wv": head_columns(whole["wv"], kv_lo, hkv_l, hd),
            "wo": head_rows(whole["wo"], q_lo, hq_l, hd)}


def whole_layer(case, rng):
    d, hq, hkv, hd = case["d"], case["hq"], case["hkv"], case["hd"]
    n = case.get("batch", 1) * case.get("T", 1)
    f = np.float32
    shapes = {"wq": (d, hq * hd), "wk": (d, hkv * hd), "wv": (d, hkv * hd), "wo": (hq * hd, d)}
    W = {k: (rng.normal(size=s) / np.sqrt(s[0])).astype(f) for k, s in shapes.items()}
    G = {k: rng.normal(size=s).astype(f) for k, s in shapes.items()}
    return W, G, rng.normal(size=(n, d)).astype(f), rng.normal(size=(n, d)).astype(f)


def attn_inputs(case, rng):
    W, G, x, dy = whole_layer(case, rng)
    fn = case["fn"]
    if fn == "attention_tp_init":
        return {}
    if fn == "attention_tp_shard":
        return {k + "_full": W[k].reshape(-1) for k in W}
    inputs = {"x": x.reshape(-1)}
    for k in W:
        inputs[k] = [blocks_of(case, W, r)[k].reshape(-1) for r in range(case.np)]
    if fn == "attention_tp_backward":
        inputs["dy"] = dy.reshape(-1)
        for k in G:
            inputs["d" + k] = [blocks_of(case, G, r)[k].reshape(-1) for r in range(case.np)]
    return inputs


def whole_from_blocks(case, inputs, prefix=""):
    """The whole weights (float64) put back from the ranks' blocks: each head from the
    first rank that holds it."""
    d, hq, hkv, hd = case["d"], case["hq"], case["hkv"], case["hd"]
    W = {"wq": np.zeros((d, hq * hd)), "wk": np.zeros((d, hkv * hd)),
         "wv": np.zeros((d, hkv * hd)), "wo": np.zeros((hq * hd, d))}
    for r in range(case.np):
        q_lo, hq_l, kv_lo, hkv_l, _ = layout(case, r)
        get = {k: inputs[prefix + k][r].astype(np.float64) for k in W}
        W["wq"][:, q_lo * hd:(q_lo + hq_l) * hd] = get["wq"].reshape(d, -1)
        W["wk"][:, kv_lo * hd:(kv_lo + hkv_l) * hd] = get["wk"].reshape(d, -1)
        W["wv"][:, kv_lo * hd:(kv_lo + hkv_l) * hd] = get["wv"].reshape(d, -1)
        W["wo"][q_lo * hd:(q_lo + hq_l) * hd] = get["wo"].reshape(-1, d)
    return W


def layer_forward(x, W, batch, T, hq, hkv, hd):
    q, k, v = x @ W["wq"], x @ W["wk"], x @ W["wv"]
    o, lse = nn.attention_forward(q, k, v, batch, T, hq, hkv, hd)
    return o @ W["wo"], (q, k, v, o, lse)


def layer_backward(dy, x, W, kept, batch, T, hq, hkv, hd):
    """(dx, {dwq, dwk, dwv, dwo}) of the whole layer."""
    q, k, v, o, lse = kept
    do = dy @ W["wo"].T
    dq, dk, dv = nn.attention_backward(do, q, k, v, o, lse, batch, T, hq, hkv, hd)
    dx = dq @ W["wq"].T + dk @ W["wk"].T + dv @ W["wv"].T
    return dx, {"wq": x.T @ dq, "wk": x.T @ dk, "wv": x.T @ dv, "wo": o.T @ dy}


def attn_reference(case, inputs):
    n, d, hq, hkv, hd = case.np, case["d"], case["hq"], case["hkv"], case["hd"]
    fn = case["fn"]
    if fn == "attention_tp_init":
        out = []
        for r in range(n):
            q_lo, hq_l, kv_lo, hkv_l, reps = layout(case, r)
            members = [s for s in range(n) if layout(case, s)[2] == kv_lo] if reps > 1 else []
            vals = {"d": d, "hq": hq, "hkv": hkv, "hd": hd, "hq_local": hq_l, "q_lo": q_lo,
                    "hkv_local": hkv_l, "kv_lo": kv_lo, "replicas": reps, "comm_is_case": 1}
            ref = {k: np.array([v], dtype=np.int32) for k, v in vals.items()}
            ref["kv_members"] = np.array(members, dtype=np.int32)
            out.append(ref)
        return out
    if fn == "attention_tp_shard":
        whole = {k: inputs[k + "_full"].reshape((d, -1) if k != "wo" else (-1, d))
                 for k in ("wq", "wk", "wv", "wo")}
        return [{k: v.reshape(-1) for k, v in blocks_of(case, whole, r).items()}
                for r in range(n)]
    batch, T = case["batch"], case["T"]
    x = inputs["x"].astype(np.float64).reshape(batch * T, d)
    W = whole_from_blocks(case, inputs)
    y, kept = layer_forward(x, W, batch, T, hq, hkv, hd)
    if fn == "attention_tp_forward":
        return [{"y": y.reshape(-1)} for _ in range(n)]
    dy = inputs["dy"].astype(np.float64).reshape(batch * T, d)
    dx, dW = layer_backward(dy, x, W, kept, batch, T, hq, hkv, hd)
    out = []
    for r in range(n):
        mine = blocks_of(case, dW, r)
        ref = {"y": y.reshape(-1), "dx": dx.reshape(-1)}
        for k in mine:
            ref["d" + k] = inputs["d" + k][r] + mine[k].reshape(-1)
        out.append(ref)
    return out


def attn_tolerance(case, inputs, name, rank):
    """2e-5 of the whole tensor's largest reference magnitude (at least 1), every rank held
    to the same bound; the init's fields and the shard's blocks are exact."""
    if case["fn"] in ("attention_tp_init", "attention_tp_shard"):
        return 0.0
    return OfScale(ATTN_RTOL)


def attn_locate(case, name, index, rank):
    """'row i, column j of 7 x 6 (query head 2)': the head an element of a weight block
    belongs to, or the token and feature of y and dx."""
    if case["fn"] == "attention_tp_init":
        return None
    d, hd = case["d"], case["hd"]
    q_lo, hq_l, kv_lo, hkv_l, _ = layout(case, rank)
    base = name[1:] if name.startswith("dw") else name
    if base in ("y", "x"):
        i, j = divmod(index, d)
        return f"token {i}, feature {j} of {case['batch'] * case['T']} x {d}"
    if base in ("wq", "wk", "wv"):
        cols = (hq_l if base == "wq" else hkv_l) * hd
        i, j = divmod(index, cols)
        head = (q_lo if base == "wq" else kv_lo) + j // hd
        kind = "query" if base == "wq" else "KV"
        return f"row {i}, column {j} of {d} x {cols}: {kind} head {head}"
    if base == "wo":
        i, j = divmod(index, d)
        return f"row {i}, column {j} of {hq_l * hd} x {d}: query head {q_lo + i // hd}"
    return None


def replicas_agree(case, inputs, outs):
    """dwk and dwv bit for bit the same on every replica of a KV head."""
    pairs = []
    for r in range(case.np):
        kv_lo, reps = layout(case, r)[2], layout(case, r)[4]
        first = next(s for s in range(case.np) if layout(case, s)[2] == kv_lo)
        if reps > 1 and first != r:
            pairs.append((r, first))
    found = disagreement(outs, ("dwk", "dwv"), pairs)
    if not found:
        return []
    r = found[1]
    kv_lo, reps = layout(case, r)[2], layout(case, r)[4]
    return [(r, f"{found[0]}; both hold KV head {kv_lo} (replicas {reps}): its gradient is "
                f"the sum of every replica's query heads' shares, the same number on each")]


SAME = identical_on_ranks(["y", "dx"], "the layers after (and before) attention run on every "
                                       "rank from the same tensor, so it must be the same "
                                       "all-reduced sum, bit for bit")


def same_everywhere(case, inputs, outs):
    return SAME(case, inputs, outs) or replicas_agree(case, inputs, outs)


SAME_EVERYWHERE = hinted(
    same_everywhere,
    "cause: ranks that must agree do not: y (forward) and dx (backward) are sums of every "
    "rank's term (all-reduce on comm, SUM); a replicated KV head's dWk and dWv sum the shares "
    "of its replicas (all-reduce a scratch on kv_comm)")


def init_communication(case, inputs, records):
    """Exactly one MPI_Comm_split of the case's communicator where KV heads are
    replicated, none otherwise, and nothing else that communicates."""
    reps = layout(case, 0)[4]
    out = []
    for r, rec in enumerate(records):
        got = [(e.fn, e.comm) for e in rec.events if e.dir in "CSR"]
        want = [("MPI_Comm_split", "case")] if reps > 1 else []
        if got == want:
            continue
        made = ", ".join(f"{fn}" + ("" if c == "case" else f" on {c}") for fn, c in got)
        need = ("exactly one MPI_Comm_split of comm (replicas " + str(reps) + ": kv_comm)"
                if reps > 1 else "no MPI call (every KV head on one rank: kv_comm is "
                                 "MPI_COMM_NULL)")
        out.append((r, f"rank {r} made {made or 'no call'}; init needs {need}"))
    return out[:1]


def kv_collectives(case, inputs, rank):
    """Backward (after the program's own forward): forward's y and dx on comm; dWk and
    dWv on kv_comm where KV heads are replicated."""
    n = case["batch"] * case["T"] * case["d"]
    _, _, _, hkv_l, reps = layout(case, rank)
    want = [("MPI_Allreduce", n)] * 2
    if reps > 1:
        want += [("MPI_Allreduce", case["d"] * hkv_l * case["hd"], "other")] * 2
    return want


@test("attention_tp", points=3, inputs=attn_inputs, reference=attn_reference,
      tolerance=attn_tolerance, label=attn_label, facets=attn_facets,
      rules=[hinted(init_communication,
                    "kv_comm exists only where KV heads are replicated: MPI_Comm_split(comm, "
                    "color = the own KV head, key = rank, &kv_comm), called by every rank")],
      hint="query heads: hq/np per rank from rank*hq/np; KV heads: a block of hkv/np when "
           "hkv >= np, else head rank*hkv/np on np/hkv ranks")
def attention_tp_init(rng):
    return attn_cases(False)


@test("attention_tp", points=3, inputs=attn_inputs, reference=attn_reference,
      tolerance=attn_tolerance, label=attn_label, facets=attn_facets, locate=attn_locate,
      rules=[collectives_exactly(lambda c, i, r: [], "the blocks are local copies")],
      hint="head j is columns j*hd .. j*hd+hd-1 of Wq (Wk, Wv for KV heads) and the same rows "
           "of Wo; the rank's heads are contiguous")
def attention_tp_shard(rng):
    return attn_cases(False)


@test("attention_tp", points=5, inputs=attn_inputs, reference=attn_reference,
      tolerance=attn_tolerance, label=attn_label, facets=attn_facets, locate=attn_locate,
      check=SAME_EVERYWHERE, check_first=True,
      rules=[collectives_exactly(
          lambda c, i, r: [("MPI_Allreduce", c["batch"] * c["T"] * c["d"])],
          "one all-reduce of batch*T*d floats on comm, after the output projection")],
      hint="q, k, v of the own heads are column-parallel (no message); attention on the own "
           "heads is local (xt_attention_forward with hq_local, hkv_local); Wo's rows are "
           "row-parallel: all-reduce its output")
def attention_tp_forward(rng):
    return attn_cases(True)


@test("attention_tp", points=9, inputs=attn_inputs, reference=attn_reference,
      tolerance=attn_tolerance, label=attn_label, facets=attn_facets, locate=attn_locate,
      check=SAME_EVERYWHERE, check_first=True,
      rules=[collectives_exactly(kv_collectives,
                                 "y forward and dx backward on comm, batch*T*d floats each; "
                                 "where KV heads are replicated, dWk and dWv on kv_comm, "
                                 "d*hd floats each", ordered=False)],
      hint="backward mirrors forward: do = dy Wo^T, attention backward on the own heads, then "
           "dx = dq Wq^T + dk Wk^T + dv Wv^T is one rank's term: all-reduce it once on comm; "
           "a replicated KV head's dWk, dWv increments are shares: all-reduce them on kv_comm")
def attention_tp_backward(rng):
    return attn_cases(True)
