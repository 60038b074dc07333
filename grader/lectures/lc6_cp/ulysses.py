"""ulysses_attention.c: DeepSpeed-Ulysses, the sequence shard turned into a head shard and
back by all-to-alls, attention computed on whole sequences of the own heads.

The two layout functions are graded with position-encoded values: element (position t,
head h, column d) of the whole T x H x hd tensor holds (t H + h) hd + d + 1, an integer
below 2^24 and so exact in float32. Each rank must hold exactly the elements of its layout
(ulysses_seq_to_heads: every position, heads r H/np ..; ulysses_heads_to_seq: positions
r c .., every head), compared exactly (tolerance 0), and a wrong element is decoded in the
report (which position, head and column it holds instead). This is what catches a wrong
permutation that undoes itself: heads reversed within each rank's block both ways, say,
gives the right attention values and a perfect round trip, and the wrong layout.

Attention is graded on its values. The forward: o on every rank against causal attention
over the whole sequence in float64 (cp.whole_attention), and the head layout it saves for
the backward (q, k, v as sent, o, lse: every position of the rank's heads, K and V with
each KV head repeated max(hkv, np)/hkv times), from random q, k, v. The backward: dq, dk,
dv against the whole sequence's gradients, from a random dout and the saved head layout of
the whole forward (q, k, v as sent, o and lse in float32), so that it is graded alone,
whatever the forward gives. Shapes: np 1, 2, 4, 8; hq = hkv (MHA), hkv >= np with hkv < hq
(KV heads split, GQA), and hkv < np (KV heads repeated np/hkv times, their gradients
summed back), with hkv 1 and hkv 2 (a tiling of the KV heads where repetition belongs
fails only there).

Communication is exact (cp.alltoalls_exactly): how many MPI_Alltoall on comm, and the
bytes of each; nothing else. Forward 4 (q, k, v, o), backward 4 (dout, dq, dk, dv), as
DeepSpeed's Ulysses: the lse never travels; K and V and their gradients max(hkv, np) heads
wide. Work (heads_work): one attention block per call on whole sequences of the own heads,
T(T+1)/2 causal pairs, and no forward in the backward.

Tolerance: the layouts, and the saved q, k, v, are copies (0). Attention: cp.TOLERANCE, each
output within 4e-5
of max(1, its largest |value| over every rank), as for the ring. Measured (grade.py
--margins, seeds 1 to 6): the worst error was 2.2% of the bound (dq, np=1; the
same error as one process: the layouts are copies).
"""

import numpy as np

from spec import test
from lectures.lc6_cp import cp

# ------------------------------------------------------------------ layouts

# (np, c, heads, hd): 1 to 4 heads per rank, hd 1 (as the lse travels), c 1.
LAYOUT_SHAPES = [(2, 3, 4, 2), (2, 2, 6, 1), (4, 2, 8, 3), (4, 3, 4, 1), (8, 1, 16, 2),
                 (8, 2, 8, 1), (1, 3, 4, 2)]


def layout_cases(rng):
    return [{"np": n, "T": n * c, "heads": h, "hd": hd} for n, c, h, hd in LAYOUT_SHAPES]


def layout_label(case):
    p = case.params
    return f"np={case.np} T={p['T']} heads={p['heads']} hd={p['hd']}"


def layout_facets(case):
    return {"heads per rank": case["heads"] // case.np}


def encoded(case):
    """The whole T x heads x hd tensor, element (t, h, d) holding (t heads + h) hd + d + 1."""
    T, H, hd = case["T"], case["heads"], case["hd"]
    return (np.arange(T * H * hd, dtype=np.float32) + 1).reshape(T, H, hd)


def seq_part(case, whole, r):
    """Rank r's positions, every head: c x (heads hd)."""
    c = case["T"] // case.np
    return np.ascontiguousarray(whole[r * c:(r + 1) * c]).reshape(c, -1)


def heads_part(case, whole, r):
    """Every position, rank r's heads: T x (heads/np hd)."""
    hl = case["heads"] // case.np
    return np.ascontiguousarray(whole[:, r * hl:(r + 1) * hl]).reshape(case["T"], -1)


def to_heads(case):
    return case.test.name == "ulysses_seq_to_heads"


def layout_inputs(case, rng):
    """Position-encoded, not random: each value is its element's identity."""
    whole = encoded(case)
    part = seq_part if to_heads(case) else heads_part
    return {"in": [part(case, whole, r) for r in range(case.np)]}


def whole_from(case, inputs):
    """The whole tensor (T x heads x hd) put together from the ranks' inputs."""
    H, hd = case["heads"], case["hd"]
    parts = [a.reshape(a.shape[0], -1, hd) for a in inputs["in"]]
    whole = np.concatenate(parts, axis=0 if to_heads(case) else 1)
    return whole.reshape(case["T"], H, hd)


def layout_reference(case, inputs):
    whole = whole_from(case, inputs)
    part = heads_part if to_heads(case) else seq_part
    return [{"out": part(case, whole, r).reshape(-1)} for r in range(case.np)]


def layout_place(case, rank, index):
    """(position, head, column, description) of flat index `index` of rank's out."""
    T, H, hd, n = case["T"], case["heads"], case["hd"], case.np
    c, hl = T // n, H // n
    if to_heads(case):
        row, col = divmod(index, hl * hd)
        t, h = row, rank * hl + col // hd
        where = f"row {row} (position {t}), local head {col // hd} (head {h})"
    else:
        row, col = divmod(index, H * hd)
        t, h = rank * c + row, col // hd
        where = f"row {row} (position {t}), head {h}"
    return t, h, col % hd, f"{where}, column {col % hd}"


def decode(case, value):
    """(position, head, column) an encoded value names, or None."""
    T, H, hd = case["T"], case["heads"], case["hd"]
    if not np.isfinite(value) or value != np.round(value) or not 1 <= value <= T * H * hd:
        return None
    i = int(value) - 1
    return i // (H * hd), (i // hd) % H, i % hd


def layout_check(case, inputs, outs):
    """The first element out of place, decoded: what it holds instead."""
    expected = layout_reference(case, inputs)
    for r in range(case.np):
        got = outs[r].get("out")
        want = expected[r]["out"]
        if got is None or got.size != want.size:
            continue
        bad = np.flatnonzero(got.reshape(-1) != want)
        if not bad.size:
            continue
        i = int(bad[0])
        t, h, d, where = layout_place(case, r, i)
        held = decode(case, float(got.reshape(-1)[i]))
        if held is None:
            what = (f"{got.reshape(-1)[i]!r}, which is no element of the input (never "
                    f"written?)")
        else:
            t2, h2, d2 = held
            what = f"position {t2}, head {h2}, column {d2}"
            if (t2, h2) == (t, h):
                what += " (the right position and head, another column)"
            elif t2 == t:
                what += " (the right position, another head)"
            elif h2 == h:
                what += " (the right head, another position)"
            else:
                what += " (heads and positions mixed)"
        return [(r, f"rank {r}'s out {where} should hold that element; it holds {what} "
                    f"({bad.size} of {want.size} elements out of place on rank {r})")]
    return []


def layout_locate(case, name, index, rank):
    return layout_place(case, rank, index)[3]


def layout_bytes(case):
    c = case["T"] // case.np
    return [("the tensor", c * case["heads"] * case["hd"] * 4)]


LAYOUT_TRAFFIC = cp.alltoalls_exactly(layout_bytes, "c heads hd floats, heads/np of them "
                                                    "to each rank")


@test("ulysses_attention", points=3, inputs=layout_inputs, reference=layout_reference,
      label=layout_label, facets=layout_facets, locate=layout_locate,
      check=layout_check, check_first=True, rules=[LAYOUT_TRAFFIC],
      hint="block s of the send buffer is this rank's c positions of rank s's heads, a "
           "column block of in: pack it; what arrives from rank p is positions p c .. of "
           "this rank's heads, rows p c .. of out")
def ulysses_seq_to_heads(rng):
    return layout_cases(rng)


@test("ulysses_attention", points=3, inputs=layout_inputs, reference=layout_reference,
      label=layout_label, facets=layout_facets, locate=layout_locate,
      check=layout_check, check_first=True, rules=[LAYOUT_TRAFFIC],
      hint="rows s c .. of in go to rank s as they are; what arrives from rank s is this "
           "rank's positions of rank s's heads: columns s heads/np hd .. of every row of out")
def ulysses_heads_to_seq(rng):
    return layout_cases(rng)


# ---------------------------------------------------------------- attention

# (np, T, hq, hkv, hd): MHA, GQA with hkv >= np, and hkv < np (1 and 2 KV heads repeated).
ATTN_SHAPES = [(2, 8, 4, 2, 3), (2, 6, 4, 1, 4), (2, 8, 4, 4, 2),
               (4, 8, 4, 2, 4), (4, 12, 8, 4, 2), (4, 8, 4, 1, 3),
               (8, 16, 8, 2, 2), (8, 8, 8, 8, 2), (1, 6, 4, 2, 4)]


def attention_cases(rng):
    return [cp.attention_case(n, T, hq, hkv, hd) for n, T, hq, hkv, hd in ATTN_SHAPES]


def attention_facets(case):
    """cp's, and whether the KV heads are repeated (fewer than np)."""
    return {**cp.facets(case), "kv repeated": int(case["hkv"] < case.np)}


def widths(case):
    """(c, floats per row of q and o, of k and v as sent: max(hkv, np) heads)."""
    c = case["T"] // case.np
    return c, case["hq"] * case["hd"], max(case["hkv"], case.np) * case["hd"]


# ------------------------------------------------------- the saved head layout

SAVED = ("q_heads", "k_heads", "v_heads", "o_heads", "lse_heads")


def head_shards(whole, heads, n):
    """Rank r's heads of a whole T x (heads w) array, every position: [T x (heads/n w)]."""
    T = whole.shape[0]
    per = whole.reshape(T, heads, -1)
    hl = heads // n
    return [np.ascontiguousarray(per[:, r * hl:(r + 1) * hl]).reshape(T, -1) for r in range(n)]


def kv_sent(whole, hkv, n):
    """K or V (T x (hkv hd)) as the all-to-all sends it: each KV head repeated
    max(hkv, n)/hkv times side by side, so that expanded head e is KV head e / rep."""
    T, rep = whole.shape[0], max(hkv, n) // hkv
    return np.repeat(whole.reshape(T, hkv, -1), rep, axis=1).reshape(T, -1)


def saved_tensors(hq, hkv, n, q, k, v, o, lse):
    """What the forward saves on each rank, from the whole sequence's q, k, v (T x heads hd),
    o and lse (T x hq): [{q_heads: T x (hq/n hd), k_heads, v_heads: T x (max(hkv, n)/n hd),
    o_heads, lse_heads: T x hq/n}], float32."""
    kvh = max(hkv, n)
    parts = {"q_heads": head_shards(q, hq, n), "k_heads": head_shards(kv_sent(k, hkv, n), kvh, n),
             "v_heads": head_shards(kv_sent(v, hkv, n), kvh, n), "o_heads": head_shards(o, hq, n),
             "lse_heads": head_shards(lse, hq, n)}
    return [{name: a[r].astype(np.float32) for name, a in parts.items()} for r in range(n)]


def ulysses_inputs(case, rng):
    """Forward: each rank's rows of q, k, v. Backward: each rank's rows of dout, and the
    saved head layout of the whole forward (its q, k, v as sent, its o and lse in float32),
    so that a backward is graded on its own, whatever the forward gives."""
    w = cp.whole_inputs(case, rng)
    if case["fn"].endswith("_forward"):
        return {name: cp.shards(case, w[name]) for name in "qkv"}
    out, lse = cp.whole_attention(case, *(w[x].astype(np.float64) for x in "qkv"))
    saved = saved_tensors(case["hq"], case["hkv"], case.np, w["q"], w["k"], w["v"],
                          out.astype(np.float32), lse.astype(np.float32))
    return {"dout": cp.shards(case, w["dout"]),
            **{name: [s[name] for s in saved] for name in SAVED}}


def forward_reference(case, inputs):
    """Each rank: its rows of the whole sequence's o, and the head layout it saves."""
    q, k, v = (cp.whole_of(case, inputs, x) for x in "qkv")
    out, lse = cp.whole_attention(case, q, k, v)
    saved = saved_tensors(case["hq"], case["hkv"], case.np, q, k, v, out, lse)
    return [{"o": o.reshape(-1), **{name: mine[name].reshape(-1) for name in SAVED}}
            for o, mine in zip(cp.shards(case, out), saved)]


def backward_reference(case, inputs):
    """Each rank: its rows of the whole sequence's dq, dk, dv, the whole q, k, v taken back
    from the saved head layout (K and V as sent: every rep-th expanded head)."""
    n, hkv, hd = case.np, case["hkv"], case["hd"]
    rep = max(hkv, n) // hkv
    q = np.concatenate([np.asarray(a, np.float64) for a in inputs["q_heads"]], axis=1)
    k, v = (np.concatenate([np.asarray(a, np.float64) for a in inputs[x]], axis=1)
            for x in ("k_heads", "v_heads"))
    T = q.shape[0]
    k, v = (a.reshape(T, hkv * rep, hd)[:, ::rep].reshape(T, -1) for a in (k, v))
    dout = cp.whole_of(case, inputs, "dout")
    dq, dk, dv = cp.whole_gradients(case, q, k, v, dout)
    return [{"dq": a.reshape(-1), "dk": b.reshape(-1), "dv": c.reshape(-1)}
            for a, b, c in zip(cp.shards(case, dq), cp.shards(case, dk), cp.shards(case, dv))]


def tolerance(case, inputs, name, rank):
    """q, k, v in the head layout are copies (0); the rest attention's."""
    return 0.0 if name in ("q_heads", "k_heads", "v_heads") else cp.TOLERANCE


def locate(case, name, index, rank):
    """cp.row_locator's place for the sequence layout; in the head layout 'position 5,
    head 3 (rank 1's local head 1), column 0'."""
    if name not in SAVED:
        return cp.row_locator(case, name, index, rank)
    p, n = case.params, case.np
    kv = name in ("k_heads", "v_heads")
    heads = max(p["hkv"], n) if kv else p["hq"]
    hl, w = heads // n, 1 if name == "lse_heads" else p["hd"]
    t, col = divmod(index, hl * w)
    j = col // w
    head = rank * hl + j
    what = (f"sent KV head {head} (a copy of KV head {head // (heads // p['hkv'])})"
            if kv and heads > p["hkv"] else f"{'KV ' if kv else ''}head {head}")
    where = f"position {t}, {what} (rank {rank}'s local head {j})"
    return where if name == "lse_heads" else f"{where}, column {col % w}"


def forward_bytes(case):
    c, wq, wkv = widths(case)
    return [("q", 4 * c * wq), ("k", 4 * c * wkv), ("v", 4 * c * wkv), ("o", 4 * c * wq)]


def backward_bytes(case):
    c, wq, wkv = widths(case)
    return [("dout", 4 * c * wq), ("dq", 4 * c * wq), ("dk", 4 * c * wkv), ("dv", 4 * c * wkv)]


def heads_work(op, what):
    """Rule: each rank runs the kit's attention op (F or B) on whole sequences of its own heads
    exactly once, T(T+1)/2 causal (query, key) pairs, and the other op never (a backward
    that recomputes the forward redoes what the saved o and lse hold)."""
    other = {"F": "B", "B": "F"}[op]

    def rule(case, inputs, records):
        T = case["T"]
        want = T * (T + 1) // 2
        for r, rec in enumerate(records):
            mine = [a for a in rec.attn if a.op == op]
            extra = [a for a in rec.attn if a.op == other]
            got = sum(a.pairs for a in mine)
            if extra:
                why = ("the saved o and lse are what a forward would give again" if op == "B"
                       else "a forward computes no gradient")
                return [(r, f"rank {r} ran {len(extra)} attention "
                            f"{'forward' if other == 'F' else 'backward'} block(s) in the "
                            f"{what}: {why}")]
            if len(mine) != 1 or got != want:
                return [(r, f"rank {r} ran {len(mine)} attention {what} block(s) covering "
                            f"{got} (query, key) pairs, expected one over all T = {T} "
                            f"positions of its heads, causal: {want} pairs")]
        return []
    return rule


KV_WIDTH = "k and v max(hkv, np) heads wide: a KV head repeated np/hkv times when hkv < np"


@test("ulysses_attention", points=8, inputs=ulysses_inputs, reference=forward_reference,
      tolerance=tolerance, label=cp.label, facets=attention_facets, locate=locate,
      rules=[cp.alltoalls_exactly(forward_bytes, "c W floats each; " + KV_WIDTH),
             heads_work("F", "forward")],
      hint="q, k, v to the head layout (ulysses_seq_to_heads) straight into saved's buffers, "
           "then one causal xt_attn_block_forward over all T positions of the own heads into "
           "saved's o and lse, then o back; rank r's query heads read KV head(s) "
           "r hq/np / (hq/hkv) ..: with hkv < np, repeat each KV head np/hkv times first")
def ulysses_attention_forward(rng):
    return attention_cases(rng)


@test("ulysses_attention", points=10, inputs=ulysses_inputs, reference=backward_reference,
      tolerance=cp.tolerance, label=cp.label, facets=attention_facets, locate=cp.row_locator,
      rules=[cp.alltoalls_exactly(backward_bytes, "c W floats each; " + KV_WIDTH),
             heads_work("B", "backward")],
      hint="dout to the head layout, one xt_attn_block_backward from the saved q, k, v, o "
           "and lse into zeroed dq, dk, dv, then those back; where KV heads were repeated, "
           "each copy holds only its query heads' share of the gradient: sum the copies")
def ulysses_attention_backward(rng):
    return attention_cases(rng)
