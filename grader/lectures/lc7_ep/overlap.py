"""all2all_async.c and moe_overlap.c: expert parallelism's exchanges hidden under the
experts' compute.

experts_exchange (all2all_async.c): every rank holds rows grouped by destination rank,
then by that rank's local expert (the rows of expert e are send_counts[e] rows, experts
in order), and the counts the others send it (recv_counts, given). The reference is each
row's expert on one process in float64: nn.experts_forward over the rank's rows with every
expert's parameters. The counts come from a random histogram counts[s][e] (the rows rank s
sends expert e) of 0 to `most` rows, a whole rank's block of it zero for some (s, p) pairs
(nothing sent from s to p), and, skewed, the last rank's experts given nothing (it
receives no row) and expert 0 the most.

moe_overlap_forward (moe_overlap.c): one MoE layer (ep's cases: rank-distinct x, shared
router, each rank its E/np experts; top-k softmax weights, not renormalised; dropless) of
T tokens per rank cut into two micro-batches, tokens xt_block(T, 2, m). The reference is
ep.layer_reference (grader/nn.py's dense nn.Moe, float64) of each rank's tokens. Cases: np
1, 2, 4; E/np 1, 2, 4; k 1 and 2; T odd and even, T = 1 (micro-batch 1 empty); skewed
routing in every np (the last rank's experts get no token: it receives nothing in either
micro-batch), and small micro-batches in which some rank receives nothing.

How it is computed (exact):
  experts_exchange
  - a2a_traffic: on comm; either form, not both. Collective: exactly two all-to-all-v calls,
    the rows first (MPI_Ialltoallv, nonblocking), sending exactly the rows bound to the
    other ranks (own block count 0), then the outputs back (MPI_Alltoallv or
    MPI_Ialltoallv), exactly the outputs of the rows received; their receive counts
    likewise. PMPI counts an all-to-all-v per call, not per peer: the split among the
    peers is what the values check. Point to point: exactly (rows to p + rows from p) d 4
    bytes sent to and received from each other rank p, nothing to itself. No other
    collective (the counts are given);
  - the experts' rows (ep.expert_tokens_from): each local expert computed exactly the rows
    the histogram sends it, and no other expert computed;
  - a2a_own_first: the first expert calls compute exactly the own rows (the shortest
    prefix of the X lines whose rows per expert equal them), and, where other ranks send
    this rank rows, they ran with an exchange pending, no point-to-point receive complete.
  moe_overlap_forward
  - ovl_traffic: on comm; exactly one MPI_Alltoall, of 2 E/np ints per rank (both
    micro-batches' counts; none accepted at np 1), then point-to-point only: between two
    ranks at most one message per exchange (dispatch 0, dispatch 1, combine 0, combine 1),
    of exactly its rows (ep.micro_histogram of its micro-batch) x d x 4 bytes, nothing to
    itself;
  - ovl_tags: no two messages from one rank to another with the same tag;
  - the experts' tokens: ep.expert_tokens("F"), both micro-batches together;
  - ovl_calls: each local expert computed twice, micro-batch 0's rows first (one call of
    each local expert, micro-batch 0's count, then micro-batch 1's);
  - ovl_pending: while micro-batch 0's experts ran, the receives pending held exactly
    micro-batch 1's rows from the other ranks and every output still to come back
    (both micro-batches' rows sent away); while micro-batch 1's ran, exactly those
    outputs: every receive is posted before the first expert compute, a micro-batch's
    rows are waited for before its experts, the combines only at the end. A rank that
    waits for micro-batch 1's rows before computing micro-batch 0, or starts it after
    micro-batch 0's combine, shows it in these bytes.

Tolerance: ep.TOLERANCE, each output within 3e-5 max(1, its largest |value| over every
rank). Both are float32 SwiGLU chains of d and ff terms, and a weighted sum of k of them.
Measured (grade.py --margins, seeds 1 to 6): the worst error was 0.8% of the bound
(experts_exchange) and 1.3% (moe_overlap_forward). A row sent to the wrong rank or
expert, or a token missing its output, moves a value by the size of the value.
"""

from collections import Counter

import numpy as np

import nn
import spec
from spec import COLLECTIVE_KINDS, test
from lectures.lc7_ep import ep

F32 = 4
ALLTOALLV = ("MPI_Ialltoallv", "MPI_Alltoallv")


def on_comm(rec, r):
    """A RULE message when rank r communicated on another communicator than comm."""
    away = next((e for e in rec.events if e.comm != "case"), None)
    if away:
        return (f"rank {r} called {away.fn} on another communicator than comm: use the comm "
                f"argument (the grader runs each case on a sub-communicator)")
    return None


def rows(hist, n):
    """rows[s][p]: the rows rank s sends rank p (its experts' block of the histogram)."""
    hist = np.asarray(hist)
    nl = hist.shape[1] // n
    return hist.reshape(n, n, nl).sum(axis=2)


def plural(n, what):
    return f"{n} {what}" + ("" if n == 1 else "s")


# ==================================================================== experts_exchange

def exchange_case(n, E, d, ff, most, skew):
    return {"np": n, "E": E, "d": d, "ff": ff, "most": most, "skew": int(skew)}


def exchange_label(case):
    p = case.params
    return (f"np={case.np} E={p['E']} (E/np={p['E'] // case.np}) d={p['d']} ff={p['ff']} "
            f"most={p['most']} {spec.word(case, 'skew')}")


def exchange_facets(case):
    return {"experts per rank": case["E"] // case.np}


def exchange_histogram(case, rng):
    """counts[s][e]: 0 to `most` rows; a rank's whole block zero for about a third of the
    (s, p) pairs; skewed, the last rank's experts none at all (np 1: the last expert) and
    expert 0 `most` more."""
    n, E, most = case.np, case["E"], case["most"]
    nl = E // n
    hist = rng.integers(0, most + 1, size=(n, E))
    for s in range(n):
        for p in range(n):
            if rng.random() < 0.3:
                hist[s, p * nl:(p + 1) * nl] = 0
    if case["skew"]:
        hist[:, ep.cold_experts(case)] = 0
        hist[:, 0] += most
    return hist


def exchange_inputs(case, rng):
    """Each rank's rows (rank-distinct) and counts, its experts' parameters; the grader's
    own: every expert's parameters and the histogram."""
    n, E, d = case.np, case["E"], case["d"]
    nl = E // n
    hist = exchange_histogram(case, rng)
    params = ep.layer_weights(case, rng)[1]
    per = 3 * d * case["ff"]
    return {"rows": [rng.normal(size=(int(hist[s].sum()), d)).astype(np.float32)
                     for s in range(n)],
            "send_counts": [hist[s].astype(np.int32) for s in range(n)],
            "recv_counts": [hist[:, r * nl:(r + 1) * nl].reshape(-1).astype(np.int32)
                            for r in range(n)],
            "experts": [params[r * nl * per:(r + 1) * nl * per] for r in range(n)],
            "all_experts": params, "histogram": hist.astype(np.int32)}


def exchange_reference(case, inputs):
    """Each rank's rows through their experts, on one process (float64)."""
    d, ff = case["d"], case["ff"]
    return [{"out": nn.experts_forward(inputs["rows"][s], inputs["histogram"][s],
                                       inputs["all_experts"], d, ff)[0].reshape(-1)}
            for s in range(case.np)]


def tolerance(case, inputs, name, rank):
    return ep.TOLERANCE


def exchange_locate(case, name, index, rank):
    """'row 5, column 2' of the rank's rows (grouped by expert, in expert order)."""
    row, col = divmod(index, case["d"])
    return f"row {row}, column {col}"


def a2a_traffic(case, inputs, records):
    """Rule: on comm; the rows to each other rank and their outputs back, exactly, by two
    all-to-all-v calls (the first nonblocking) or by point-to-point messages; nothing to
    itself; no other collective."""
    n, d = case.np, case["d"]
    R = rows(inputs["histogram"], n)
    for r, rec in enumerate(records):
        msg = on_comm(rec, r)
        if msg:
            return [(r, msg)]
        other = sorted(fn for fn, st in rec.calls.items()
                       if st.calls and st.kind in COLLECTIVE_KINDS and fn not in ALLTOALLV)
        if other:
            return [(r, f"rank {r} called {', '.join(other)}: the counts are given "
                        f"(recv_counts); the only collectives allowed are the rows' "
                        f"MPI_Ialltoallv and the outputs' all-to-all-v")]
        out = sum(int(R[r][p]) for p in range(n) if p != r)  # rows to the others
        back = sum(int(R[p][r]) for p in range(n) if p != r)  # rows from them
        own = int(R[r][r])
        calls = [e for e in rec.events if e.dir == "C" and e.fn in ALLTOALLV]
        p2p = [e for e in rec.events if e.dir in ("S", "R") and e.bytes]
        if calls and p2p:
            return [(r, f"rank {r} moved rows by {calls[0].fn} and by {p2p[0].fn}: use one "
                        f"or the other, all-to-all-v calls or point-to-point messages")]
        if calls:
            if n == 1 and not any(e.bytes for e in calls):
                continue
            if len(calls) != 2:
                shown = ", ".join(f"{e.fn} {e.bytes} B" for e in calls[:6])
                return [(r, f"rank {r} made {len(calls)} all-to-all-v calls ({shown}); "
                            f"expected two: the rows out (MPI_Ialltoallv), then their "
                            f"outputs back")]
            if calls[0].fn != "MPI_Ialltoallv":
                return [(r, f"rank {r} sent the rows with {calls[0].fn}, which returns only "
                            f"when they have arrived: nothing can be computed under it; "
                            f"start it with MPI_Ialltoallv, compute the own rows, then wait")]
            for e, want, what in ((calls[0], out, "its rows to the other ranks"),
                                  (calls[1], back, "the outputs of the rows it received")):
                if e.bytes == want * d * F32:
                    continue
                travelled = ""
                if own and e.bytes == (want + own) * d * F32:
                    travelled = (f"; its own block ({plural(own, 'row')}) travelled too: "
                                 f"those rows stay where they are (count 0 for itself)")
                return [(r, f"rank {r}'s {e.fn} sent {e.bytes} bytes, expected "
                            f"{want * d * F32}: {what}, {plural(want, 'row')} of d x 4 bytes"
                            f"{travelled}")]
            got = sum(st.bytes_recv for fn, st in rec.calls.items() if fn in ALLTOALLV)
            if got != (out + back) * d * F32:
                return [(r, f"rank {r}'s all-to-all-v calls received {got} bytes, expected "
                            f"{(out + back) * d * F32}: the {plural(back, 'row')} the "
                            f"other ranks send it and the outputs of its "
                            f"{plural(out, 'row')} to them")]
            continue
        mine = next((e for e in p2p if e.peer == r), None)
        if mine:
            return [(r, f"rank {r} {'sent' if mine.dir == 'S' else 'received'} {mine.bytes} "
                        f"bytes {'to' if mine.dir == 'S' else 'from'} itself ({mine.fn}): "
                        f"its own {plural(own, 'row')} need not travel")]
        for p in range(n):
            if p == r:
                continue
            want = int(R[r][p] + R[p][r]) * d * F32
            for way, verb in (("S", "sent rank"), ("R", "received from rank")):
                got = sum(e.bytes for e in p2p if e.dir == way and e.peer == p)
                if got != want:
                    return [(r, f"rank {r} {verb} {p} {got} bytes, expected {want}: "
                                f"its {plural(int(R[r][p]), 'row')} for rank {p}'s experts "
                                f"and the outputs of the {plural(int(R[p][r]), 'row')} "
                                f"rank {p} sends it, d x 4 bytes each")]
    return []


def a2a_own_first(case, inputs, records):
    """Rule: the first expert calls compute exactly the own rows, and where other ranks send
    this rank rows, under the exchange: with an exchange pending and no point-to-point
    receive complete."""
    n = case.np
    hist = np.asarray(inputs["histogram"])
    R = rows(hist, n)
    for r, rec in enumerate(records):
        local = list(ep.local_experts(case, r))
        own = {e: int(hist[r][e]) for e in local}
        calls = [c for c in rec.experts if c.op == "F"]
        acc = dict.fromkeys(local, 0)
        prefix = [] if not sum(own.values()) else None
        for i, c in enumerate(calls if prefix is None else ()):
            if c.expert not in acc:
                break
            acc[c.expert] += c.tokens
            if acc[c.expert] > own[c.expert]:
                break
            if acc == own:
                prefix = calls[:i + 1]
                break
        if prefix is None:
            listed = ", ".join(f"expert {e}: {own[e]}" for e in local)
            return [(r, f"rank {r}'s first expert calls did not compute exactly its own rows "
                        f"({listed}) before any received row: compute the rows that stay "
                        f"on this rank first, while the others travel")]
        incoming = sum(int(R[p][r]) for p in range(n) if p != r)
        busy = [c for c in prefix if c.tokens]
        if not incoming or not busy:
            continue
        if not any(c.pending for c in busy):
            return [(r, f"rank {r} computed its {plural(sum(own.values()), 'own row')} with no "
                        f"exchange pending, and other ranks send it "
                        f"{plural(incoming, 'row')}: start the exchange (MPI_Ialltoallv, or "
                        f"the receives) before the own rows' compute and wait for it after")]
        early = sum(e.bytes for e in rec.events[:busy[-1].events_before]
                    if e.dir == "R" and e.comm == "case")
        if early:
            return [(r, f"rank {r} had received {early} bytes before its own rows were "
                        f"computed: it waited for the rows from the other ranks first; "
                        f"compute the own rows, then wait")]
    return []


a2a_traffic.__doc__ = "the rows and their outputs, exactly, each way"
a2a_own_first.__doc__ = "the own rows first, under the exchange"

EXCHANGES = [exchange_case(2, 4, 8, 8, 3, 1), exchange_case(2, 2, 6, 4, 4, 0),
             exchange_case(2, 8, 4, 8, 2, 0),
             exchange_case(4, 4, 8, 8, 3, 1), exchange_case(4, 8, 6, 6, 2, 1),
             exchange_case(4, 16, 4, 4, 2, 0),
             exchange_case(1, 2, 8, 8, 3, 0), exchange_case(1, 4, 4, 8, 2, 1)]


@test("all2all_async", points=10, inputs=exchange_inputs, reference=exchange_reference,
      tolerance=tolerance, label=exchange_label, words=ep.WORDS, facets=exchange_facets,
      locate=exchange_locate,
      rules=[a2a_traffic,
             ep.expert_tokens_from(lambda c, i: i["histogram"], "F",
                                   "the rows bound for an expert are computed on its rank, "
                                   "once"),
             a2a_own_first],
      hint="the own block's count is 0 in both exchanges (its rows stay); the others' rows: "
           "MPI_Ialltoallv(rows, sc, sdispls, ..., in, rc, rdispls, ...); the own rows "
           "through xt_experts_forward into out while it is in flight; MPI_Wait; each "
           "peer's received rows (recv_counts[p E/np ..]) through xt_experts_forward; the "
           "outputs back with the counts and displacements swapped")
def experts_exchange(rng):
    return [dict(c) for c in EXCHANGES]


# ================================================================== moe_overlap_forward

def layer_inputs(case, rng):
    return ep.layer_inputs(case, rng)


def layer_reference(case, inputs):
    return [{"y": o["y"].reshape(-1)} for o in ep.layer_reference(case, inputs,
                                                                   backward=False)]


def layer_locate(case, name, index, rank):
    """'token 4 (micro-batch 1), column 2'."""
    t, col = divmod(index, case["d"])
    if t >= case["T"]:
        return None
    lo1 = ep.micro_batch(case, 1)[0]
    return f"token {t} (micro-batch {int(t >= lo1)}), column {col}"


def layer_facets(case):
    f = ep.facets(case)
    del f["capacity"]
    f["T%2"] = case["T"] % 2
    return f


PHASES = ("dispatch 0", "dispatch 1", "combine 0", "combine 1")


def exchanges(case, inputs):
    """Per rank r and peer p != r: the rows of each exchange r sends p, in PHASES order
    (dispatch m: micro-batch m's rows for p's experts; combine m: the outputs of the rows
    of micro-batch m that p sent r)."""
    n = case.np
    per_mb = [rows(ep.micro_histogram(case, inputs, m), n) for m in (0, 1)]
    return lambda r, p: (int(per_mb[0][r][p]), int(per_mb[1][r][p]), int(per_mb[0][p][r]),
                         int(per_mb[1][p][r]))


def ovl_traffic(case, inputs, records):
    """Rule: on comm; one MPI_Alltoall of both micro-batches' counts, then point-to-point
    only: between two ranks one message per nonempty exchange, of exactly its rows."""
    n, d, E = case.np, case["d"], case["E"]
    ex = exchanges(case, inputs)
    for r, rec in enumerate(records):
        msg = on_comm(rec, r)
        if msg:
            return [(r, msg)]
        other = sorted(fn for fn, st in rec.calls.items()
                       if st.calls and st.kind in COLLECTIVE_KINDS and fn != "MPI_Alltoall")
        if other:
            return [(r, f"rank {r} called {', '.join(other)}: after the counts' one "
                        f"MPI_Alltoall, the rows travel by point-to-point messages, a tag "
                        f"for each exchange")]
        counts = [e.bytes for e in rec.events if e.dir == "C" and e.fn == "MPI_Alltoall"]
        if counts != [2 * E * 4] and not (n == 1 and not counts):
            shown = ", ".join(f"{b} B" for b in counts[:6]) or "none"
            return [(r, f"rank {r} made {plural(len(counts), 'MPI_Alltoall')} ({shown}); "
                        f"expected exactly one, of both micro-batches' counts: 2 E/np ints "
                        f"to each rank, {2 * E * 4} bytes as PMPI counts it (its own block "
                        f"included)")]
        p2p = [e for e in rec.events if e.dir in ("S", "R") and e.bytes]
        mine = next((e for e in p2p if e.peer == r), None)
        if mine:
            return [(r, f"rank {r} {'sent' if mine.dir == 'S' else 'received'} {mine.bytes} "
                        f"bytes {'to' if mine.dir == 'S' else 'from'} itself ({mine.fn}): "
                        f"the rows whose experts are its own need not travel")]
        for p in range(n):
            if p == r:
                continue
            for way, verb, rows_of in (("S", "sent rank", ex(r, p)),
                                       ("R", "received from rank", ex(p, r))):
                got = sorted(e.bytes for e in p2p if e.dir == way and e.peer == p)
                want = sorted(k * d * F32 for k in rows_of if k)
                if got != want:
                    listed = ", ".join(f"{ph} {plural(k, 'row')}"
                                       for ph, k in zip(PHASES, rows_of))
                    shown = ", ".join(f"{b} B" for b in got[:8]) or "none"
                    return [(r, f"rank {r} {verb} {p} messages of {shown}; expected one "
                                f"message per nonempty exchange, of its rows x d x 4 bytes "
                                f"({listed}): {', '.join(f'{b} B' for b in want) or 'none'}")]
    return []


def ovl_tags(case, inputs, records):
    """Rule: no two messages from one rank to another with the same tag during the layer."""
    for r, rec in enumerate(records):
        seen = Counter((e.peer, e.tag) for e in rec.events if e.dir == "S" and e.comm == "case")
        twice = next((k for k, v in seen.items() if v > 1), None)
        if twice:
            p, t = twice
            sizes = [f"{e.bytes} B" for e in rec.events
                     if e.dir == "S" and e.comm == "case" and (e.peer, e.tag) == twice]
            return [(r, f"rank {r} sent rank {p} {len(sizes)} messages with tag {t} "
                        f"({', '.join(sizes)}): same tag for two micro-batches' exchanges; "
                        f"give dispatch 0, dispatch 1, combine 0 and combine 1 a tag each, "
                        f"or two exchanges in flight together can take each other's rows")]
    return []


def ovl_calls(case, inputs, records):
    """Rule: each local expert computed twice: micro-batch 0's rows, then micro-batch 1's
    (one call of every local expert per micro-batch, micro-batch 0's first)."""
    h = [ep.micro_histogram(case, inputs, m).sum(axis=0) for m in (0, 1)]
    for r, rec in enumerate(records):
        local = list(ep.local_experts(case, r))
        nl = len(local)
        calls = [c for c in rec.experts if c.op == "F"]
        want = ", ".join(f"expert {e}: {h[0][e]} then {h[1][e]}" for e in local)
        if len(calls) != 2 * nl:
            return [(r, f"rank {r} made {plural(len(calls), 'expert call')}, expected "
                        f"{2 * nl}: each of its {plural(nl, 'expert')} once per "
                        f"micro-batch ({want})")]
        for m in (0, 1):
            part = calls[m * nl:(m + 1) * nl]
            got = {c.expert: c.tokens for c in part}
            if sorted(got) != local or any(got[e] != h[m][e] for e in local):
                shown = ", ".join(f"expert {c.expert}: {c.tokens}" for c in part)
                return [(r, f"rank {r}'s expert calls of micro-batch {m} computed {shown}; "
                            f"expected each local expert once on micro-batch {m}'s rows, "
                            f"micro-batch 0 before 1 ({want})")]
    return []


def ovl_pending(case, inputs, records):
    """Rule: the receives pending while each micro-batch's experts ran: micro-batch 0's,
    micro-batch 1's rows and every output to come back; micro-batch 1's, those outputs."""
    n, d = case.np, case["d"]
    ex = exchanges(case, inputs)
    for r, rec in enumerate(records):
        nl = case["E"] // n
        calls = [c for c in rec.experts if c.op == "F"]
        others = [p for p in range(n) if p != r]
        rows1 = sum(ex(p, r)[1] for p in others)  # micro-batch 1's rows to receive
        back = [sum(ex(r, p)[m] for p in others) for m in (0, 1)]  # outputs to come back
        expect = [(rows1 + back[0] + back[1]) * d * F32, (back[0] + back[1]) * d * F32]
        why = [f"micro-batch 1's {plural(rows1, 'row')} from the other ranks (its dispatch "
               f"in flight) and the outputs of the {back[0]} + {back[1]} rows it sent away",
               f"the outputs of the {back[0]} + {back[1]} rows it sent away (micro-batch "
               f"0's combine in flight, and 1's receives)"]
        for m in (0, 1):
            for c in calls[m * nl:(m + 1) * nl]:
                if c.pending_bytes == expect[m]:
                    continue
                if c.pending_bytes < expect[m]:
                    how = ("nothing was pending" if not c.pending else
                           f"only {c.pending_bytes} bytes were pending")
                    fix = ("post every receive before the first expert compute, wait for "
                           "a micro-batch's rows just before its experts, and for the "
                           "combines only after both")
                else:
                    how = f"{c.pending_bytes} bytes were pending"
                    fix = ("wait for micro-batch " + str(m) + "'s rows before its experts; "
                           "each receive the size of its message")
                return [(r, f"rank {r}'s experts of micro-batch {m} ran while {how}, "
                            f"expected {expect[m]} bytes of receives: {why[m]}; {fix}")]
    return []


def ovl_sent_first(case, inputs, records):
    """Rule: traffic in flight, not only receives posted. When micro-batch 0's experts
    start, this rank has sent both micro-batches' rows (dispatch 0 and 1); when micro-batch
    1's start, micro-batch 0's outputs too (combine 0): what overlaps a compute left before
    it. Counted from the point-to-point bytes logged before each first expert call."""
    n, d = case.np, case["d"]
    ex = exchanges(case, inputs)
    nl = case["E"] // n
    for r, rec in enumerate(records):
        calls = [c for c in rec.experts if c.op == "F"]
        if len(calls) < 2 * nl:
            continue  # ovl_calls reports it
        others = [p for p in range(n) if p != r]
        rows = [sum(ex(r, p)[i] for p in others) for i in range(4)]
        want = [(rows[0] + rows[1]) * d * F32, (rows[0] + rows[1] + rows[2]) * d * F32]
        what = [f"micro-batch 0's and 1's rows ({rows[0]} + {rows[1]}): micro-batch 1's "
                f"dispatch travels under micro-batch 0's experts, so it leaves before them",
                f"both dispatches and micro-batch 0's outputs ({rows[0]} + {rows[1]} + "
                f"{rows[2]} rows): micro-batch 0's combine travels under micro-batch 1's "
                f"experts"]
        for m in (0, 1):
            before = calls[m * nl].events_before
            sent = sum(e.bytes for e in rec.events[:before] if e.dir == "S")
            if sent != want[m]:
                return [(r, f"rank {r} had sent {sent} bytes when micro-batch {m}'s experts "
                            f"started, expected {want[m]}: {what[m]}. A receive posted early "
                            f"is not an exchange in flight; its sender's send is")]
    return []


ovl_traffic.__doc__ = "one count exchange, then the rows of each exchange, exactly"
ovl_tags.__doc__ = "a tag per exchange"
ovl_calls.__doc__ = "each expert once per micro-batch, in order"
ovl_pending.__doc__ = "each micro-batch's experts under the other's exchange"
ovl_sent_first.__doc__ = "each overlapping exchange sent before the compute it hides under"

# (np, T, d, E, ff, k, skew): np 2 and 4 first (the grader's order); E/np 1, 2, 4 and k 1
# and 2 at np 2 and 4; skewed routing at every np; T = 1 (micro-batch 1 empty).
LAYERS = [(2, 7, 8, 4, 8, 2, 1), (2, 6, 6, 2, 8, 1, 0), (2, 9, 8, 8, 6, 2, 0),
          (2, 1, 4, 4, 4, 1, 1),
          (4, 5, 8, 4, 8, 2, 1), (4, 8, 4, 8, 8, 1, 1), (4, 11, 8, 16, 8, 2, 0),
          (4, 3, 6, 4, 4, 1, 0),
          (1, 6, 8, 4, 8, 2, 1), (1, 1, 4, 2, 4, 1, 0)]


@test("moe_overlap", points=16, inputs=layer_inputs, reference=layer_reference,
      tolerance=tolerance, label=ep.label, words=ep.WORDS, facets=layer_facets, locate=layer_locate,
      rules=[ovl_traffic, ovl_tags,
             ep.expert_tokens("F", "every choice computed once, on its expert's rank"),
             ovl_calls, ovl_pending, ovl_sent_first],
      hint="route all T tokens; per micro-batch m (xt_block(T, 2, m)) group its choices by "
           "expert; one MPI_Alltoall of both micro-batches' counts; post every MPI_Irecv "
           "(dispatch 0 and 1, combine 0 and 1, a tag each), then the dispatch MPI_Isends; "
           "wait dispatch 0, experts 0, send combine 0; wait dispatch 1, experts 1, send "
           "combine 1; wait for everything; y = sum of weight x output")
def moe_overlap_forward(rng):
    return [ep.moe_case(n, T, d, E, ff, k, skew=s, dy=0)
            for n, T, d, E, ff, k, s in LAYERS]
