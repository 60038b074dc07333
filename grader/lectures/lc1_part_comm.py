"""Lecture 1, communicators and point-to-point variants: initial.c, group.c,
p2p_async.c, p2p_probe.c (appended to lc1_basic's table).

Expected values come from NumPy: the mesh is arange(np).reshape(dp, tp), the
halves are slices of the stack of the ranks' inputs, and so on.
"""

import numpy as np

from spec import (NPS, Test, amount, exact, make_cases, only_calls, point_to_point_only,
                  reduction_tolerance)
from lectures.lc1_basic import per_rank

# ----------------------------------------------------------------- initial.c


def mesh_cases(rng):
    """Every factorisation dp * tp = np, 1 x np and np x 1 included."""
    return make_cases(MESH, [{"np": n, "dp": dp, "tp": n // dp}
                             for n in NPS for dp in range(1, n + 1) if n % dp == 0])


def mesh_reference(case, inputs):
    dp, tp = case["dp"], case["tp"]
    mesh = np.arange(case.np, dtype=np.int32).reshape(dp, tp)
    return [{"coords": np.array([r // tp, r % tp], dtype=np.int32),
             "dp_group": mesh[:, r % tp], "tp_group": mesh[r // tp]} for r in range(case.np)]


MESH = Test(
    exercise="initial", name="make_mesh_2d", points=5,
    cases=mesh_cases, inputs=lambda case, rng: {}, reference=mesh_reference, tolerance=exact,
    label=lambda c: f"np={c.np} dp={c['dp']} tp={c['tp']}",
    hint="coords is (rank in dp_comm, rank in tp_comm); groups are ranks of comm. Rank r sits "
         "at (r / tp, r % tp): tp is the fast axis.",
)

# ------------------------------------------------------------------- group.c


def half_of(case, r):
    """The ranks of rank r's half: below (np+1)/2, or the rest."""
    h = (case.np + 1) // 2
    return np.arange(0, h) if r < h else np.arange(h, case.np)


def half_cases(rng):
    return make_cases(HALF, [{"np": n} for n in NPS])


def half_reference(case, inputs):
    out = []
    for r in range(case.np):
        members = half_of(case, r).astype(np.int32)
        out.append({"members": members,
                    "half": np.array([r - members[0], members.size], dtype=np.int32)})
    return out


HALF = Test(
    exercise="group", name="make_half", points=5,
    cases=half_cases, inputs=lambda case, rng: {}, reference=half_reference, tolerance=exact,
    label=lambda c: f"np={c.np}",
    hint="half is (rank in the half, size of the half); members are ranks of comm. The low "
         "half holds the ranks below (np+1)/2.",
)


def group_cases(rng):
    return make_cases(GROUP_SUMS, [{"np": n, "count": c} for n in NPS for c in (0, 1, 7, 1000)])


def double_inputs(case, rng):
    return {"x": per_rank(case, rng, lambda r: rng.uniform(-10, 10, case["count"]))}


def halves(case, inputs):
    """The stacks of the low and the high half's inputs (the high one may be empty)."""
    h = (case.np + 1) // 2
    stack = np.stack(inputs["x"]) if case["count"] else np.zeros((case.np, 0))
    return stack[:h], stack[h:]


def group_reference(case, inputs):
    lo, hi = halves(case, inputs)
    sums = {"lo": lo.sum(axis=0), "hi": hi.sum(axis=0)}  # an empty half sums to 0
    return [sums for _ in range(case.np)]


def group_tolerance(case, inputs, name, rank):
    lo, hi = halves(case, inputs)
    part = lo if name == "lo" else hi
    return reduction_tolerance(part, "sum") if part.shape[0] else 0.0


def sums_inside_halves(case, inputs, records):
    """The halves reduce on their own communicators, not on comm."""
    out = []
    for r, rec in enumerate(records):
        on_comm = sorted({e.fn for e in rec.events if e.dir == "C" and e.comm == "case"
                          and e.fn in rec.calls and rec.calls[e.fn].kind == "coll"})
        if on_comm:
            out.append((r, f"rank {r} called {', '.join(on_comm)} on the whole communicator: "
                           f"each half reduces on its own communicator (make_half), and only "
                           f"the two leaders talk across the halves"))
    return out


def describe_sends(sends, limit=6):
    """'no messages', or '3 messages (to 2: 8 B, to 1 of a sub-communicator: 8 B, ...)'."""
    if not sends:
        return "no messages"
    parts = [f"to {e.peer}{'' if e.comm == 'case' else ' of a sub-communicator'}: {e.bytes} B"
             for e in sends[:limit]]
    more = ", ..." if len(sends) > limit else ""
    return f"{amount(len(sends), ' messages')} ({', '.join(parts)}{more})"


def leaders_exchange(case, inputs, records):
    """Across the halves: rank 0 and rank (np+1)/2 swap their sums, one message each."""
    h = (case.np + 1) // 2
    out = []
    for r, rec in enumerate(records):
        sends = rec.sends()
        if r in (0, h) and h < case.np:
            peer = h if r == 0 else 0
            want = [(peer, 8 * case["count"])]
        else:
            want = []
        got = [(e.peer if e.comm == "case" else None, e.bytes) for e in sends]
        if got != want:
            out.append((r, f"rank {r} sent {describe_sends(sends)}; across the halves only "
                           f"the leaders, ranks 0 and {h}, swap their sums (one message of "
                           f"{8 * case['count']} B each), and each half shares the other "
                           f"half's sum with MPI_Bcast"))
    return out


GROUP_SUMS = Test(
    exercise="group", name="group_sums", points=5,
    cases=group_cases, inputs=double_inputs, reference=group_reference,
    tolerance=group_tolerance,
    rules=[sums_inside_halves, leaders_exchange],
    hint="lo holds the sum over ranks below (np+1)/2, hi over the rest (0 at np=1), on every "
         "rank.",
)

# --------------------------------------------------------------- p2p_async.c

NONBLOCKING = {"MPI_Isend", "MPI_Issend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall", "MPI_Waitany",
               "MPI_Waitsome", "MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome"}


def gather_async_cases(rng):
    specs = [{"np": n, "k": k, "count": c} for n in NPS
             for k, c in ((1, 5), (3, 1), (2, 0), (4, 1000), (8, 33))]
    return make_cases(GATHER_ASYNC, specs)


def gather_async_inputs(case, rng):
    """k messages of count floats per rank, and a sum buffer holding old values."""
    k, count = case["k"], case["count"]
    return {"msgs": per_rank(case, rng, lambda r: rng.uniform(-10, 10, k * count)
                             .astype(np.float32)),
            "sum": per_rank(case, rng, lambda r: rng.uniform(-10, 10, count).astype(np.float32))}


def received(case, inputs):
    """Every message the last rank receives, one per row."""
    rows = [m.reshape(case["k"], case["count"]) for m in inputs["msgs"][:-1]]
    return np.concatenate(rows) if rows else np.zeros((0, case["count"]), np.float32)


def gather_async_reference(case, inputs):
    out = [{"sum": inputs["sum"][r]} for r in range(case.np - 1)]
    out.append({"sum": received(case, inputs).astype(np.float64).sum(axis=0)})
    return out


def gather_async_tolerance(case, inputs, name, rank):
    rows = received(case, inputs)
    return reduction_tolerance(rows, "sum") if rank == case.np - 1 and rows.shape[0] else 0.0


def k_messages_to_last(case, inputs, records):
    """Ranks below np-1 send k messages of count floats to rank np-1; it sends none."""
    k, n, last = case["k"], 4 * case["count"], case.np - 1
    out = []
    for r, rec in enumerate(records):
        sends = rec.sends()
        got = [(e.peer if e.comm == "case" else None, e.bytes) for e in sends]
        want = [] if r == last else [(last, n)] * k
        if got != want:
            out.append((r, f"rank {r} sent {describe_sends(sends)}; every rank but the last "
                           f"sends its k={k} messages of count={case['count']} floats "
                           f"({n} B) to rank {last}, one MPI_Isend each, and rank {last} "
                           f"sends none"))
    return out


GATHER_ASYNC = Test(
    exercise="p2p_async", name="gather_async", points=5,
    cases=gather_async_cases, inputs=gather_async_inputs, reference=gather_async_reference,
    tolerance=gather_async_tolerance,
    label=lambda c: f"np={c.np} k={c['k']} count={c['count']}",
    rules=[
        point_to_point_only,
        only_calls(NONBLOCKING, "gather_async posts nonblocking MPI_Isend/MPI_Irecv and "
                                "completes them with MPI_Wait*/MPI_Test*"),
        k_messages_to_last,
    ],
    hint="The last rank's sum is the elementwise sum of the (np-1)*k messages it received, "
         "written over what sum held (0 at np=1); the other ranks leave sum alone.",
)

# --------------------------------------------------------------- p2p_probe.c

PAYLOADS = ("random", "empty", "some_empty", "large")


def probe_cases(rng):
    return make_cases(RECV_ANY_SIZE, [{"np": n, "lengths": p} for n in NPS for p in PAYLOADS])


def payload_lengths(case, rng):
    n, p = case.np, case["lengths"]
    if p == "random":
        return rng.integers(0, 2000, n)
    if p == "empty":
        return np.zeros(n, dtype=np.int64)
    if p == "some_empty":
        return rng.integers(0, 2, n) * rng.integers(1, 4, n)
    return rng.integers(100_000, 200_000, n)


def probe_inputs(case, rng):
    lengths = payload_lengths(case, rng)
    return {"x": [rng.uniform(-10, 10, int(m)).astype(np.float32) for m in lengths]}


def probe_reference(case, inputs):
    """Rank r receives rank r-1's payload (mod np)."""
    out = []
    for r in range(case.np):
        y = inputs["x"][(r - 1) % case.np]
        out.append({"ret": np.array([y.size], dtype=np.int64), "y": y})
    return out


PROBES = {"MPI_Probe", "MPI_Iprobe", "MPI_Mprobe", "MPI_Improbe"}


def probes_first(case, inputs, records):
    """The length is learnt from a probe, not from a receive into a buffer large enough."""
    out = []
    for r, rec in enumerate(records):
        if not any(fn in rec.calls for fn in PROBES):
            out.append((r, f"rank {r} received without MPI_Probe (or MPI_Mprobe): the receiver "
                           f"does not know the length, so it probes the message, reads its "
                           f"length with MPI_Get_count, then allocates exactly that"))
    return out


RECV_ANY_SIZE = Test(
    exercise="p2p_probe", name="recv_any_size", points=5,
    cases=probe_cases, inputs=probe_inputs, reference=probe_reference, tolerance=exact,
    label=lambda c: f"np={c.np} {c['lengths']} lengths",
    rules=[probes_first],
    hint="Every rank r sends its payload to r+1 (mod np, tag 100+r) and calls "
         "recv_any_size(&y, r-1, comm); ret is what it returned.",
)


TESTS = [MESH, HALF, GROUP_SUMS, GATHER_ASYNC, RECV_ANY_SIZE]
