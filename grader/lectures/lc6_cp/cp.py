"""What lecture 6's tests share: a sequence's layout over the ranks, the
attention cases and their inputs, the reference (causal attention over the
whole sequence, float64), and the rules read from the messages and from the
attention blocks each rank computed (the kit's A lines, events.AttnCall).

A case is a sequence of T tokens, hq query heads and hkv KV heads of hd
dimensions, cut over np ranks by a layout:
  - contiguous: rank r holds positions r c .. r c + c - 1, c = T / np;
  - zigzag: 2 np chunks of c' = T / (2 np); rank r holds chunk r, then chunk
    2 np - 1 - r, one after the other (c = 2 c' rows).
Rows are token-major: q is c x (hq hd), k and v c x (hkv hd), lse c x hq.

Tolerance: each output within ATTN_RTOL max(1, its largest |value| over every
rank) (spec.OfScale). Measured: see each module.
"""

import numpy as np

import nn
from spec import COLLECTIVE_KINDS, OfScale

NPS = (1, 2, 3, 4)
ATTN_RTOL = 4e-5
TOLERANCE = OfScale(ATTN_RTOL, 1.0)


# ----------------------------------------------------------------- layout

def positions(layout, T, n, r):
    """The sequence positions rank r of n holds, in the order it stores them."""
    if layout == "contiguous":
        c = T // n
        return np.arange(r * c, (r + 1) * c)
    if layout == "zigzag":
        h = T // (2 * n)
        return np.concatenate([np.arange(r * h, (r + 1) * h),
                               np.arange((2 * n - 1 - r) * h, (2 * n - r) * h)])
    raise ValueError(f"layout {layout!r}")


def causal_pairs(layout, T, n, r):
    """The (query, key) pairs with key <= query that rank r's queries own: the work a
    skip-nothing-needed ring gives it (contiguous r c^2 + c(c+1)/2; zigzag equal)."""
    return int(sum(p + 1 for p in positions(layout, T, n, r)))


# ------------------------------------------------------------------ cases

def attention_case(n, T, hq, hkv, hd, layout="contiguous", **extra):
    return {"np": n, "T": T, "hq": hq, "hkv": hkv, "hd": hd, "layout": layout, **extra}


def label(case):
    p = case.params
    return (f"np={case.np} T={p['T']} hq={p['hq']} hkv={p['hkv']} hd={p['hd']} "
            f"{p['layout']}")


def facets(case):
    """Whether KV heads are shared (GQA) and how many rows each rank holds."""
    p = case.params
    return {"gqa": int(p["hkv"] < p["hq"]), "rows per rank": p["T"] // case.np}


def whole_inputs(case, rng):
    """The whole sequence's q, k, v and upstream gradient dout, float32."""
    T, hq, hkv, hd = (case[k] for k in ("T", "hq", "hkv", "hd"))
    f = np.float32
    return {"q": (rng.normal(size=(T, hq * hd)) * 1.5).astype(f),
            "k": (rng.normal(size=(T, hkv * hd)) * 1.5).astype(f),
            "v": rng.normal(size=(T, hkv * hd)).astype(f),
            "dout": rng.normal(size=(T, hq * hd)).astype(f)}


def whole_attention(case, q, k, v):
    """Causal attention over the whole sequence: (out T x (hq hd), lse T x hq), float64."""
    T = case["T"]
    return nn.attn_block_forward(q, k, v, T, T, case["hq"], case["hkv"], case["hd"], "C")


def whole_gradients(case, q, k, v, dout):
    """(dq, dk, dv) of the whole sequence's causal attention, float64."""
    T = case["T"]
    shape = (T, T, case["hq"], case["hkv"], case["hd"], "C")
    out, lse = nn.attn_block_forward(q, k, v, *shape)
    return nn.attn_block_backward(dout, q, k, v, out, lse, *shape)


def shards(case, whole):
    """Each rank's rows of a whole-sequence array, in the layout's order."""
    return [np.ascontiguousarray(whole[positions(case["layout"], case["T"], case.np, r)])
            for r in range(case.np)]


def attention_inputs(case, rng):
    """Each rank's rows of what the function under test reads: a forward (a function whose
    name ends in _forward) q, k, v; a backward also dout, and the whole forward's out and
    lse (float32), so that a backward is graded on its own, whatever the forward gives."""
    w = whole_inputs(case, rng)
    if case["fn"].endswith("_forward"):
        del w["dout"]
    else:
        out, lse = whole_attention(case, *(w[n].astype(np.float64) for n in "qkv"))
        w["o"], w["lse"] = out.astype(np.float32), lse.astype(np.float32)
    return {name: shards(case, a) for name, a in w.items()}


def whole_of(case, inputs, name):
    """A whole-sequence array put back together from the ranks' rows, float64."""
    T = case["T"]
    parts = inputs[name]
    out = np.zeros((T,) + parts[0].shape[1:])
    for r in range(case.np):
        out[positions(case["layout"], T, case.np, r)] = parts[r]
    return out


def forward_reference(case, inputs):
    """Each rank: its rows of the whole sequence's out and lse, flat, as a program writes
    them (xt_case_output has no shape)."""
    q, k, v = (whole_of(case, inputs, n) for n in "qkv")
    out, lse = whole_attention(case, q, k, v)
    return [{"o": o.reshape(-1), "lse": s.reshape(-1)}
            for o, s in zip(shards(case, out), shards(case, lse))]


def backward_reference(case, inputs):
    """Each rank: its rows of the whole sequence's dq, dk, dv, flat."""
    q, k, v, dout = (whole_of(case, inputs, n) for n in ("q", "k", "v", "dout"))
    dq, dk, dv = whole_gradients(case, q, k, v, dout)
    return [{"dq": a.reshape(-1), "dk": b.reshape(-1), "dv": c.reshape(-1)}
            for a, b, c in zip(shards(case, dq), shards(case, dk), shards(case, dv))]


def tolerance(case, inputs, name, rank):
    return TOLERANCE


def row_locator(case, name, index, rank):
    """'position 13 (rank 1's row 5), head 2, column 1' for an index into a rank's rows."""
    p = case.params
    heads = p["hkv"] if name in ("k", "v", "dk", "dv") else p["hq"]
    width = heads if name == "lse" else heads * p["hd"]
    row, col = divmod(index, width)
    pos = positions(p["layout"], p["T"], case.np, rank)
    if row >= len(pos):
        return None
    where = f"position {pos[row]} (rank {rank}'s row {row})"
    if name == "lse":
        return f"{where}, head {col}"
    return f"{where}, head {col // p['hd']}, column {col % p['hd']}"


# -------------------------------------------------------------- the ring

def kv_block_bytes(case):
    """One rank's K and V rows together, in bytes (float32): what one rotation moves."""
    return 2 * (case["T"] // case.np) * case["hkv"] * case["hd"] * 4


def ring_traffic(kv_rotations, grad_rotations, why):
    """Rule: only point-to-point messages on comm, each sent to rank r+1 and received
    from rank r-1 (mod np); rank r sends exactly kv_rotations(np) K/V blocks and
    grad_rotations(np) dK/dV blocks of bytes (kv_block_bytes each), however it packs
    them into messages. One rank: no message at all."""
    def rule(case, inputs, records):
        n = case.np
        blocks = kv_rotations(n) + grad_rotations(n) if n > 1 else 0
        for r, rec in enumerate(records):
            coll = sorted(fn for fn, st in rec.calls.items()
                          if st.calls and st.kind in COLLECTIVE_KINDS)
            if coll:
                return [(r, f"rank {r} called {', '.join(coll)}: the ring moves its blocks "
                            f"with point-to-point messages to its neighbours only")]
            for e in rec.events:
                if e.dir not in ("S", "R"):
                    continue
                if e.comm != "case":
                    return [(r, f"rank {r} made {e.fn} on another communicator than comm")]
                want = (r + 1) % n if e.dir == "S" else (r - 1) % n
                if e.peer != want:
                    verb = "sent to" if e.dir == "S" else "received from"
                    return [(r, f"rank {r} {verb} rank {e.peer} ({e.fn}): in the ring, "
                                f"rank r sends to r+1 and receives from r-1 only")]
            sent = sum(e.bytes for e in rec.events if e.dir == "S" and e.comm == "case")
            want = blocks * kv_block_bytes(case)
            if sent != want and n == 1:
                return [(r, f"rank {r} sent {sent} bytes at np=1: one rank holds the whole "
                            f"sequence and sends nothing")]
            if sent != want:
                return [(r, f"rank {r} sent {sent} bytes, expected {want}: "
                            f"{kv_rotations(n)} K/V rotation(s) and {grad_rotations(n)} "
                            f"dK/dV rotation(s) of {kv_block_bytes(case)} bytes each at "
                            f"np={n} ({why})")]
        return []
    return rule


def receive_under_compute(op, what):
    """Rule: a block computed (attention calls op, F or B) while the rank still has a
    ring receive to complete ran with a receive already posted: the next block's
    MPI_Irecv goes before the current block's compute, so the transfer runs under it.
    A rank's blocks after its last receive need none. And the k-th block (from 0, a
    rank computing at steps 0, 1, ... of the ring) comes after at most k steps' worth of
    received bytes (a K/V block a step forward; with its dK/dV accumulator backward): a
    rank that waits for the next block before computing the current one has received
    one step more, which the first check cannot see where no receive follows (np = 2)."""
    def rule(case, inputs, records):
        per_step = kv_block_bytes(case) * (1 if op == "F" else 2)
        for r, rec in enumerate(records):
            recvs = [i for i, e in enumerate(rec.events) if e.dir == "R" and e.comm == "case"]
            calls = [a for a in rec.attn if a.op == op]
            for k, a in enumerate(calls):
                later = sum(1 for i in recvs if i >= a.events_before)
                if later and not a.recv_pending:
                    return [(r, f"rank {r} computed its {ordinal(k + 1)} {what} block "
                                f"({a.nq} x {a.nk} positions) with no receive posted, and "
                                f"{later} receive(s) completed after it: post the next "
                                f"block's MPI_Irecv before computing the current one, so "
                                f"that the transfer runs under the compute")]
                got = sum(rec.events[i].bytes for i in recvs if i < a.events_before)
                if got > k * per_step:
                    return [(r, f"rank {r} had received {got} bytes before computing its "
                                f"{ordinal(k + 1)} {what} block, more than the {k} ring "
                                f"step(s) before it bring ({k * per_step} bytes): it waited "
                                f"for the next block before computing this one; post the "
                                f"next block's MPI_Irecv, compute, then wait")]
        return []
    return rule


def work_is(op, what, calls_per_rank=None):
    """Rule: rank r's attention calls op cover exactly the causal (query, key) pairs its
    queries own, causal_pairs(): no fully masked block computed, no masked half of a
    block, nothing missing. calls_per_rank(case, r), when given: the number of calls."""
    def rule(case, inputs, records):
        p = case.params
        for r, rec in enumerate(records):
            calls = [a for a in rec.attn if a.op == op]
            got, want = sum(a.pairs for a in calls), causal_pairs(p["layout"], p["T"],
                                                                  case.np, r)
            if calls_per_rank and len(calls) != calls_per_rank(case, r):
                return [(r, f"rank {r} computed {len(calls)} {what} blocks, expected "
                            f"{calls_per_rank(case, r)}: its own diagonal block and every "
                            f"earlier rank's, none of a later rank's (fully masked)")]
            if got != want:
                return [(r, f"rank {r}'s {what} blocks covered {got} (query, key) pairs, "
                            f"expected {want}: the causal pairs of its positions, no more "
                            f"(a masked block or half block computed) and no fewer")]
        return []
    return rule


def ordinal(n):
    """1st, 2nd, 3rd, 4th, ... 11th, 12th, 13th, 21st."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def zigzag_balance(op, what):
    """Rule: zigzag's promise, every rank's attention calls op cover the same number of
    (query, key) pairs, c'^2 (2np-1) + c'(c'+1); when they differ, the report names the
    lightest and the heaviest rank. Then work_is: exactly each rank's causal pairs."""
    exact = work_is(op, what)

    def rule(case, inputs, records):
        got = [sum(a.pairs for a in rec.attn if a.op == op) for rec in records]
        if len(set(got)) > 1:
            lo = min(range(len(got)), key=lambda r: got[r])
            hi = max(range(len(got)), key=lambda r: got[r])
            h, n = case["T"] // (2 * case.np), case.np
            return [(hi, f"rank {lo} computed {got[lo]} {what} (query, key) pairs, rank {hi} "
                         f"{got[hi]}: zigzag gives every rank the same work, c'^2 (2np-1) + "
                         f"c'(c'+1) = {h * h * (2 * n - 1) + h * (h + 1)} pairs (c'={h}, "
                         f"np={n}), half a block on every step but the first")]
        return exact(case, inputs, records)
    return rule


# -------------------------------------------------------------- all-to-all

COMMUNICATING_KINDS = ("p2p", "coll", "comm", "rma")


def comm_called(comm):
    return {"world": "MPI_COMM_WORLD", "self": "MPI_COMM_SELF"}.get(comm, "a communicator "
                                                                           "of its own")


def collectives_exactly(expected, why):
    """Rule: each rank's communication is exactly the collectives expected(case) lists, [(fn,
    what, bytes)] (fn one MPI function, or a tuple of alternatives: the first is named),
    bytes being what one call sends in all as PMPI counts it (an all-to-all: its count per
    peer x np x 4, the rank's own block included), on comm, in any order; no other
    collective, no point-to-point message. At np = 1 no call at all is accepted too (a
    collective of one rank is a copy)."""
    def names(fn):
        return fn if isinstance(fn, tuple) else (fn,)

    def counted(fns):
        """'5 MPI_Alltoall', '2 MPI_Allgather, 2 MPI_Reduce_scatter_block'."""
        order = list(dict.fromkeys(fns))
        return ", ".join(f"{fns.count(f)} {f}" for f in order)

    def rule(case, inputs, records):
        want = expected(case)
        allowed = {f for fn, _, _ in want for f in names(fn)}
        listing = ", ".join(f"{what} {b} B" for _, what, b in want)
        budget = (f"exactly {counted([names(fn)[0] for fn, _, _ in want])} on comm ({listing}: "
                  f"{why})")
        for r, rec in enumerate(records):
            other = sorted(fn for fn, st in rec.calls.items()
                           if st.calls and st.kind in COMMUNICATING_KINDS and fn not in allowed)
            if other:
                return [(r, f"rank {r} called {', '.join(other)}; the only communication "
                            f"allowed is {budget}")]
            calls = [e for e in rec.events if e.dir == "C" and e.fn in allowed]
            away = next((e for e in calls if e.comm != "case"), None)
            if away:
                return [(r, f"rank {r} called {away.fn} on {comm_called(away.comm)}: use the "
                            f"comm argument (the grader runs each case on a sub-communicator)")]
            left = list(want)
            for e in calls:
                hit = next((w for w in left if e.fn in names(w[0]) and e.bytes == w[2]), None)
                if hit is None:
                    break
                left.remove(hit)
            else:
                if not left:
                    continue
            if case.np == 1 and not calls:
                continue
            made = ", ".join(
                f"{n} {fn} ({', '.join(f'{e.bytes} B' for e in calls if e.fn == fn)[:200]})"
                for fn, n in ((f, [e.fn for e in calls].count(f))
                              for f in dict.fromkeys(e.fn for e in calls)))
            first = names(want[0][0])[0] if want else "collective"
            return [(r, f"rank {r} made {made or f'0 {first} (none)'}; expected {budget}")]
        return []
    return rule


def alltoalls_exactly(expected, why):
    """collectives_exactly of MPI_Alltoall calls only: expected(case) lists [(what, bytes)]."""
    def wanted(case):
        return [("MPI_Alltoall", what, b) for what, b in expected(case)]
    return collectives_exactly(wanted, why)


# ------------------------------------------------------ a ring of small messages

def ring_messages(steps, message_bytes, what):
    """Rule: only point-to-point messages on comm; rank r sends exactly steps(np) messages,
    each to rank r+1 and of message_bytes, and receives exactly steps(np), each from rank
    r-1 (mod np) and of message_bytes. `what` names one message ("one (max, sum) pair")."""
    def rule(case, inputs, records):
        n = case.np
        want = steps(n)
        for r, rec in enumerate(records):
            coll = sorted(fn for fn, st in rec.calls.items()
                          if st.calls and st.kind in COLLECTIVE_KINDS)
            if coll:
                return [(r, f"rank {r} called {', '.join(coll)}: the ring passes {what} to "
                            f"its neighbour with point-to-point messages, no collective")]
            mine = [e for e in rec.events if e.dir in ("S", "R")]
            for e in mine:
                if e.comm != "case":
                    return [(r, f"rank {r} made {e.fn} on another communicator than comm")]
                peer = (r + 1) % n if e.dir == "S" else (r - 1) % n
                if e.peer != peer:
                    verb = "sent to" if e.dir == "S" else "received from"
                    return [(r, f"rank {r} {verb} rank {e.peer} ({e.fn}): in the ring, "
                                f"rank r sends to r+1 and receives from r-1 only")]
            for d, verb in (("S", "sent"), ("R", "received")):
                got = [e for e in mine if e.dir == d]
                if len(got) != want:
                    return [(r, f"rank {r} {verb} {len(got)} message(s), expected exactly "
                                f"{want} at np={n}: np-1 steps of {what}")]
                odd = next((e for e in got if e.bytes != message_bytes), None)
                if odd:
                    return [(r, f"rank {r} {verb} a message of {odd.bytes} bytes ({odd.fn}): "
                                f"each message is {what}, {message_bytes} bytes")]
        return []
    return rule
