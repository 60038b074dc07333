"""Lecture 1, communication primitives: one entry per function a student writes.

Each entry is one decorated function (spec.test): its name is the function
under test, it returns the cases, and the decorator holds the rest.

Every expected value below is the plain single-process definition computed by
NumPy (a stack of the ranks' inputs, reduced or reindexed), never the
parallel algorithm itself. Rules state the algorithm's cost exactly.
"""

import numpy as np

from spec import (amount, bytes_sent_exactly, calls_exactly, ceil_log2, exact, heard_from,
                  itemsize, max_bytes_sent, max_messages, max_rounds, messages_exactly, NPS,
                  only_calls, point_to_point_only, random_values, reduce_ranks,
                  reduction_tolerance, test)


# (dtype, op) pairs a reduction is graded with: every built-in kind of each.
REDUCTIONS = [
    ("float32", "sum"), ("float64", "sum"), ("int32", "max"), ("int32", "min"),
    ("int64", "sum"), ("float32", "prod"), ("int32", "bxor"), ("uint8", "sum"),
    ("int16", "band"), ("int64", "bor"), ("uint8", "lor"), ("float64", "min"),
    ("int8", "land"), ("float32", "max"), ("int64", "prod"), ("int32", "lxor"),
]
BCAST_DTYPES = ["float32", "int32", "float64", "int64", "uint8", "int16"]


def counts_for(np_):
    """Counts including 0, 1, fewer than np, and not divisible by np."""
    return sorted({0, 1, max(np_ - 1, 1), np_ + 1, 7, 64, 1001})


def per_rank(case, rng, make):
    return [make(r) for r in range(case.np)]


# ------------------------------------------------------------------ p2p.c

def float_inputs(case, rng):
    """Each rank its own count floats in [-10, 10)."""
    return {"x": per_rank(case, rng, lambda r: rng.uniform(-10, 10, case["count"])
                          .astype(np.float32))}


def chain_reference(case, inputs):
    x0 = inputs["x"][0]
    return [{"x": x0 * np.float32(2.0 ** k)} for k in range(case.np)]


@test("p2p", points=5, inputs=float_inputs, reference=chain_reference, tolerance=exact,
      rules=[
          point_to_point_only,
          max_messages(lambda c, i, r: 1 if r < c.np - 1 else 0,
                       "one message to the next rank; the last rank sends none"),
          max_bytes_sent(lambda c, i, r: 4 * c["count"] if r < c.np - 1 else 0,
                         "the buffer once, to the next rank"),
      ])
def chain_pass(rng):
    return [{"np": n, "count": c} for n in NPS for c in (0, 1, 7, 1000)]


# ------------------------------------------------------------- p2p_ring.c

def ring_reference(case, inputs):
    return [{"y": inputs["x"][(r - 1) % case.np]} for r in range(case.np)]


ONE_SEND = max_messages(lambda c, i, r: 1, "one message to the right neighbour")


@test("p2p_ring", points=5, inputs=float_inputs, reference=ring_reference, tolerance=exact,
      rules=[
          point_to_point_only,
          only_calls({"MPI_Send", "MPI_Recv"},
                     "ring_shift practises blocking MPI_Send and MPI_Recv in an even/odd "
                     "order (MPI_Sendrecv is ring_shift_sendrecv's job)"),
          ONE_SEND,
      ])
def ring_shift(rng):
    return [{"np": n, "count": c} for n in NPS for c in (0, 1, 5, 1000)]


@test("p2p_ring", points=5, inputs=float_inputs, reference=ring_reference, tolerance=exact,
      rules=[
          point_to_point_only,
          only_calls({"MPI_Sendrecv"}, "ring_shift_sendrecv is one MPI_Sendrecv"),
          calls_exactly("MPI_Sendrecv", lambda c, i, r: 1 if c.np > 1 else None,
                        "one MPI_Sendrecv sends right and receives from the left"),
          ONE_SEND,
      ])
def ring_shift_sendrecv(rng):
    return [{"np": n, "count": c} for n in NPS for c in (0, 1, 5, 1000)]


# --------------------------------------------------------- fun_broadcast.c

def bcast_specs():
    """Every root at every world size, the counts and dtypes rotating."""
    specs = []
    for n in NPS:
        for root in range(n):
            specs.append({"np": n, "root": root, "count": (7, 1, 1000, 0)[root % 4],
                          "dtype": BCAST_DTYPES[(root + n) % len(BCAST_DTYPES)]})
    return specs


def bcast_inputs(case, rng):
    return {"x": per_rank(case, rng, lambda r: random_values(rng, case["dtype"], "max",
                                                             case["count"]))}


def bcast_reference(case, inputs):
    return [{"x": inputs["x"][case["root"]]} for _ in range(case.np)]


def receives_once(case, inputs, records):
    out = []
    for r, rec in enumerate(records):
        want = 0 if r == case["root"] else 1
        if rec.msgs_recv != want:
            out.append((r, f"rank {r} received {amount(rec.msgs_recv, ' messages')}; in a "
                           f"broadcast the root receives none and every other rank exactly one"))
    return out


@test("fun_broadcast", points=5, inputs=bcast_inputs, reference=bcast_reference,
      tolerance=exact,
      rules=[
          point_to_point_only,
          receives_once,
          max_messages(lambda c, i, r: c.np - 1 if r == c["root"] else 0,
                       "the root sends np-1 messages, the others none"),
      ])
def bcast_linear(rng):
    return bcast_specs()


@test("fun_broadcast", points=10, inputs=bcast_inputs, reference=bcast_reference,
      tolerance=exact,
      rules=[
          point_to_point_only,
          receives_once,
          max_messages(lambda c, i, r: ceil_log2(c.np), "a binomial tree: ceil(log2 np) rounds"),
          max_rounds(lambda c, i: ceil_log2(c.np),
                     "the binomial tree reaches every rank in ceil(log2 np)",
                     "send to the largest subtree first, v + m for m from the largest power "
                     "of two down"),
      ])
def bcast_binomial(rng):
    return bcast_specs()


# ------------------------------------------------------------------ rings

def one_neighbour(case, inputs, records):
    """A ring: every send goes to the same neighbour, r+1 (or r-1) mod np."""
    n = case.np
    out = []
    for r, rec in enumerate(records):
        peers = sorted({e.peer for e in rec.sends()})
        if peers and peers not in ([(r + 1) % n], [(r - 1) % n]):
            out.append((r, f"rank {r} sent to ranks {peers}; in a ring every rank sends only to "
                           f"its neighbour, rank {(r + 1) % n} (or always rank {(r - 1) % n})"))
    return out


# ---------------------------------------------------- fun_reduce_scatter.c

def block_counts(rng, n, pattern):
    if pattern == 0:
        return [int(rng.integers(1, 6))] * n
    if pattern == 1:
        return [int(v) for v in rng.integers(0, 10, n)]
    if pattern == 2:
        return [int(v) for v in rng.integers(0, 2, n) * rng.integers(1, 4, n)]
    if pattern == 3:
        big = int(rng.integers(0, n))
        return [100 if i == big else 1 for i in range(n)]
    if pattern == 4:
        return [0] * n
    return [int(v) for v in rng.integers(200, 400, n)]


def rs_counts(case):
    return [int(v) for v in case["recvcounts"].split(",")]


def rs_inputs(case, rng):
    counts = rs_counts(case)
    return {"x": per_rank(case, rng, lambda r: random_values(rng, case["dtype"], case["op"],
                                                             sum(counts))),
            "recvcounts": np.array(counts, dtype=np.int32)}


def rs_blocks(case):
    counts = rs_counts(case)
    starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
    return [slice(starts[r], starts[r] + counts[r]) for r in range(case.np)]


def rs_reference(case, inputs):
    full = reduce_ranks(np.stack(inputs["x"]), case["op"])
    return [{"y": full[b]} for b in rs_blocks(case)]


def rs_tolerance(case, inputs, name, rank):
    tol = reduction_tolerance(np.stack(inputs["x"]), case["op"])
    return tol[rs_blocks(case)[rank]] if np.ndim(tol) else tol


def rs_label(case):
    return f"np={case.np} {case['dtype']} {case['op']} recvcounts=[{case['recvcounts']}]"


@test("fun_reduce_scatter", points=15, inputs=rs_inputs, reference=rs_reference,
      tolerance=rs_tolerance, label=rs_label,
      rules=[
          point_to_point_only,
          max_messages(lambda c, i, r: c.np - 1, "np-1 steps around the ring"),
          max_bytes_sent(lambda c, i, r: (sum(rs_counts(c)) - rs_counts(c)[r]) * itemsize(c),
                         "every block but its own, once"),
          one_neighbour,
      ])
def reduce_scatter_ring(rng):
    """Every reduction, with block counts of every pattern of block_counts."""
    specs = []
    for n in NPS:
        for i, (dtype, op) in enumerate(REDUCTIONS):
            counts = block_counts(rng, n, (i + n) % 6)
            specs.append({"np": n, "dtype": dtype, "op": op,
                          "recvcounts": ",".join(map(str, counts))})
    return specs


# ---------------------------------------------------- fun_ring_allreduce.c

def allreduce_specs(n):
    """Every reduction at np = n, the counts of counts_for(n) rotating, and a long
    float32 sum."""
    counts = counts_for(n)
    specs = [{"np": n, "dtype": dtype, "op": op, "count": counts[(i + n) % len(counts)]}
             for i, (dtype, op) in enumerate(REDUCTIONS)]
    specs.append({"np": n, "dtype": "float32", "op": "sum", "count": 10007})
    return specs


def allreduce_inputs(case, rng):
    return {"x": per_rank(case, rng, lambda r: random_values(rng, case["dtype"], case["op"],
                                                             case["count"]))}


def allreduce_reference(case, inputs):
    full = reduce_ranks(np.stack(inputs["x"]), case["op"])
    return [{"x": full} for _ in range(case.np)]


def allreduce_tolerance(case, inputs, name, rank):
    return reduction_tolerance(np.stack(inputs["x"]), case["op"])


def ring_chunk(c):
    return -(-c["count"] // c.np)  # ceil(count / np)


def remainder(c):
    """count % np: chunk arithmetic that assumes np divides count fails where it is not 0."""
    return {"count%np": c["count"] % c.np}


@test("fun_ring_allreduce", points=15, inputs=allreduce_inputs, reference=allreduce_reference,
      tolerance=allreduce_tolerance,
      rules=[
          point_to_point_only,
          max_messages(lambda c, i, r: 2 * (c.np - 1),
                       "2(np-1): reduce-scatter, then all-gather"),
          max_bytes_sent(lambda c, i, r: 2 * (c.np - 1) * ring_chunk(c) * itemsize(c),
                         "2(np-1) chunks of at most ceil(count/np) elements"),
          one_neighbour,
      ], facets=remainder)
def ring_allreduce(rng):
    """allreduce_specs, and an int32 sum of 3 elements per rank."""
    specs = []
    for n in NPS:
        specs += allreduce_specs(n)
        specs.append({"np": n, "dtype": "int32", "op": "sum", "count": 3 * n})
    return specs


# --------------------------------------------------- fun_all2all_scratch.c

PATTERNS = ("random", "sparse", "skewed", "empty")


def a2a_splits(case, rng):
    n, p = case.np, case["pattern"]
    if p == "random":
        return rng.integers(0, 7, (n, n))
    if p == "sparse":
        return rng.integers(0, 7, (n, n)) * (rng.random((n, n)) < 0.3)
    if p == "skewed":  # one rank sends a lot to everyone, the rest little
        s = rng.integers(0, 2, (n, n))
        s[int(rng.integers(0, n))] = rng.integers(50, 100, n)
        return s
    return np.zeros((n, n), dtype=np.int64)


def a2a_inputs(case, rng):
    splits = a2a_splits(case, rng).astype(np.int32)
    return {"splits": splits,
            "sendcounts": [splits[r] for r in range(case.np)],
            "x": [random_values(rng, case["dtype"], "max", int(splits[r].sum()))
                  for r in range(case.np)]}


def a2a_reference(case, inputs):
    splits, xs = inputs["splits"], inputs["x"]
    starts = [np.concatenate([[0], np.cumsum(splits[i])]).astype(int) for i in range(case.np)]
    out = []
    for j in range(case.np):
        blocks = [xs[i][starts[i][j]:starts[i][j + 1]] for i in range(case.np)]
        y = np.concatenate(blocks) if blocks else np.zeros(0, xs[0].dtype)
        out.append({"ret": np.array([y.size], dtype=np.int64),
                    "recvcounts": splits[:, j].astype(np.int32), "y": y})
    return out


def sizes_then_pairwise(case, inputs, records):
    """First np-1 messages of one int (the sizes), then the payloads, both pairwise:
    sends go to r+1, r+2, ... (mod np)."""
    n = case.np
    out = []
    for r, rec in enumerate(records):
        sends = rec.sends()
        sizes = sends[:n - 1]
        if len(sizes) < n - 1 or any(e.bytes != 4 for e in sizes):
            out.append((r, f"rank {r}'s first {amount(n - 1, ' messages')} carried "
                           f"{[e.bytes for e in sizes]} B; the sizes go first, one int (4 B) to "
                           f"every other rank, then the payloads"))
            continue
        offsets = [(e.peer - r) % n for e in sends]
        ok = offsets[:n - 1] == list(range(1, n)) and \
            all(a < b for a, b in zip(offsets[n - 1:], offsets[n:]))
        if not ok:
            peers = [(r + o) % n for o in offsets]
            out.append((r, f"rank {r} sent to ranks {peers} in that order; the pairwise "
                           f"schedule sends to r+1, r+2, ... (mod np) = "
                           f"{[(r + k) % n for k in range(1, n)]}, the sizes first, then the "
                           f"payloads in the same order"))
    return out


def a2a_payload_bytes(c, i, r):
    """Sizes (one int per peer), then every block but its own, once."""
    splits = i["splits"]
    return (c.np - 1) * 4 + int(splits[r].sum() - splits[r][r]) * itemsize(c)


@test("fun_all2all_scratch", points=15, inputs=a2a_inputs, reference=a2a_reference,
      tolerance=exact, label=lambda c: f"np={c.np} {c['dtype']} {c['pattern']} splits",
      rules=[
          point_to_point_only,
          max_messages(lambda c, i, r: 2 * (c.np - 1), "np-1 sizes and np-1 payloads"),
          max_bytes_sent(a2a_payload_bytes,
                         "one int to each peer, then every block but its own"),
          sizes_then_pairwise,
      ])
def alltoallv_scratch(rng):
    return [{"np": n, "dtype": BCAST_DTYPES[(i + n) % len(BCAST_DTYPES)], "pattern": pattern}
            for n in NPS for i, pattern in enumerate(PATTERNS)]


# ======================================= communicators and point-to-point variants
# initial.c, group.c, p2p_async.c, p2p_probe.c. The mesh is
# arange(np).reshape(dp, tp); the halves are slices of the stack of the ranks'
# inputs.

def mesh_reference(case, inputs):
    dp, tp = case["dp"], case["tp"]
    mesh = np.arange(case.np, dtype=np.int32).reshape(dp, tp)
    return [{"coords": np.array([r // tp, r % tp], dtype=np.int32),
             "dp_group": mesh[:, r % tp], "tp_group": mesh[r // tp]} for r in range(case.np)]


@test("initial", points=5, inputs=lambda case, rng: {}, reference=mesh_reference,
      tolerance=exact, label=lambda c: f"np={c.np} dp={c['dp']} tp={c['tp']}",
      hint="coords is (rank in dp_comm, rank in tp_comm); groups are ranks of comm. Rank r "
           "sits at (r / tp, r % tp): tp is the fast axis.")
def make_mesh_2d(rng):
    """Every factorisation dp * tp = np, 1 x np and np x 1 included."""
    return [{"np": n, "dp": dp, "tp": n // dp}
            for n in NPS for dp in range(1, n + 1) if n % dp == 0]


# ------------------------------------------------------------------- group.c


def half_of(case, r):
    """The ranks of rank r's half: below (np+1)/2, or the rest."""
    h = (case.np + 1) // 2
    return np.arange(0, h) if r < h else np.arange(h, case.np)


def half_reference(case, inputs):
    out = []
    for r in range(case.np):
        members = half_of(case, r).astype(np.int32)
        out.append({"members": members,
                    "half": np.array([r - members[0], members.size], dtype=np.int32)})
    return out


@test("group", points=5, inputs=lambda case, rng: {}, reference=half_reference,
      tolerance=exact, label=lambda c: f"np={c.np}",
      hint="half is (rank in the half, size of the half); members are ranks of comm. The low "
           "half holds the ranks below (np+1)/2.")
def make_half(rng):
    return [{"np": n} for n in NPS]


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


def exact_sends(want, why):
    """A rule: rank r sends exactly the messages want(case, r), [(peer, bytes)] in order on
    the case's communicator, or the report says what it sent and why(case)."""
    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            sends = rec.sends()
            got = [(e.peer if e.comm == "case" else None, e.bytes) for e in sends]
            if got != want(case, r):
                out.append((r, f"rank {r} sent {describe_sends(sends)}; {why(case)}"))
        return out
    return rule


def leader_sends(case, r):
    """Across the halves: rank 0 and rank (np+1)/2 swap their sums, one message each."""
    h = (case.np + 1) // 2
    return [(h if r == 0 else 0, 8 * case["count"])] if r in (0, h) and h < case.np else []


leaders_exchange = exact_sends(
    leader_sends,
    lambda case: f"across the halves only the leaders, ranks 0 and {(case.np + 1) // 2}, swap "
                 f"their sums (one message of {8 * case['count']} B each), and each half shares "
                 f"the other half's sum with MPI_Bcast")


@test("group", points=5, inputs=double_inputs, reference=group_reference,
      tolerance=group_tolerance,
      rules=[sums_inside_halves, leaders_exchange],
      hint="lo holds the sum over ranks below (np+1)/2, hi over the rest (0 at np=1), on every "
           "rank.")
def group_sums(rng):
    return [{"np": n, "count": c} for n in NPS for c in (0, 1, 7, 1000)]


# --------------------------------------------------------------- p2p_async.c

NONBLOCKING = {"MPI_Isend", "MPI_Issend", "MPI_Irecv", "MPI_Wait", "MPI_Waitall", "MPI_Waitany",
               "MPI_Waitsome", "MPI_Test", "MPI_Testall", "MPI_Testany", "MPI_Testsome"}


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


k_messages_to_last = exact_sends(
    lambda case, r: [] if r == case.np - 1 else [(case.np - 1, 4 * case["count"])] * case["k"],
    lambda case: f"every rank but the last sends its k={case['k']} messages of "
                 f"count={case['count']} floats ({4 * case['count']} B) to rank {case.np - 1}, "
                 f"one MPI_Isend each, and rank {case.np - 1} sends none")


@test("p2p_async", points=5, inputs=gather_async_inputs, reference=gather_async_reference,
      tolerance=gather_async_tolerance,
      label=lambda c: f"np={c.np} k={c['k']} count={c['count']}",
      rules=[
          point_to_point_only,
          only_calls(NONBLOCKING, "gather_async posts nonblocking MPI_Isend/MPI_Irecv and "
                                  "completes them with MPI_Wait*/MPI_Test*"),
          k_messages_to_last,
      ],
      hint="The last rank's sum is the elementwise sum of the (np-1)*k messages it received, "
           "written over what sum held (0 at np=1); the other ranks leave sum alone.")
def gather_async(rng):
    return [{"np": n, "k": k, "count": c} for n in NPS
            for k, c in ((1, 5), (3, 1), (2, 0), (4, 1000), (8, 33))]


# --------------------------------------------------------------- p2p_probe.c

PAYLOADS = ("random", "empty", "some_empty", "large")


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


@test("p2p_probe", points=5, inputs=probe_inputs, reference=probe_reference, tolerance=exact,
      label=lambda c: f"np={c.np} {c['lengths']} lengths",
      rules=[probes_first],
      hint="Every rank r sends its payload to r+1 (mod np, tag 100+r) and calls "
           "recv_any_size(&y, r-1, comm); ret is what it returned.")
def recv_any_size(rng):
    return [{"np": n, "lengths": p} for n in NPS for p in PAYLOADS]


# ================================================================ rooted collectives
# fun_reduce.c, fun_gather.c, fun_scatter.c. Every root is tried at every world
# size. A rooted collective's `recv` (for scatter: `send`) matters only at the
# root; the programs pass NULL on the other ranks, as MPI allows, and only the
# root's result is checked.

# The curriculum grades reduce on these types and ops: every pair of them.
REDUCE_DTYPES = ("float32", "float64", "int32")
REDUCE_OPS = ("sum", "max", "min", "prod")
REDUCE_PAIRS = [(d, o) for o in REDUCE_OPS for d in REDUCE_DTYPES]


def rooted_cases(n, extra):
    """Every root of an np-rank group, with more cases until every count of
    counts_for(np) and every item of `extra` (a list of dicts) has come up."""
    counts = counts_for(n)
    specs = []
    for i in range(max(n, len(counts), len(extra))):
        spec = {"np": n, "root": i % n, "count": counts[i % len(counts)]}
        spec.update(extra[i % len(extra)])
        specs.append(spec)
    return specs


def block_bytes(case):
    return case["count"] * itemsize(case)


def peers(events):
    return sorted(e.peer for e in events)


# ------------------------------------------------------------ tree shapes

def relative(case, r):
    return (r - case["root"]) % case.np


def absolute(case, v):
    return (v + case["root"]) % case.np


def tree_parent(case, r):
    """The rank r sends its partial result to in the binomial tree (None: the root)."""
    v = relative(case, r)
    return None if v == 0 else absolute(case, v - (v & -v))


def tree_children(case, r):
    """The ranks r receives from: v + m for the powers of two m below v's lowest set bit."""
    v, n = relative(case, r), case.np
    low = (v & -v) if v else n
    return sorted(absolute(case, v + m) for m in (1 << k for k in range(n.bit_length()))
                  if m < low and v + m < n)


def edges_rule(senders_to, receives_from, shape):
    """Each rank sends exactly one block to each rank of senders_to(case, r) and
    receives exactly one message from each rank of receives_from(case, r)."""
    def rule(case, inputs, records):
        out = []
        want_bytes = block_bytes(case)
        for r, rec in enumerate(records):
            got_in = peers(e for e in rec.events if e.dir == "R")
            want_in = receives_from(case, r)
            if got_in != want_in:
                out.append((r, f"rank {r} received from ranks {got_in}; {shape(case, r)}"))
                continue
            sends = rec.sends()
            want_out = senders_to(case, r)
            if peers(sends) != want_out:
                out.append((r, f"rank {r} sent to ranks {peers(sends)}; {shape(case, r)}"))
                continue
            wrong = [e for e in sends if e.bytes != want_bytes]
            if wrong:
                out.append((r, f"rank {r} sent {amount(wrong[0].bytes, ' B')} to rank "
                               f"{wrong[0].peer}; every message carries one block, count "
                               f"elements ({amount(want_bytes, ' B')})"))
        return out
    rule.__doc__ = edges_rule.__doc__
    return rule


def into_root(case, r):
    return [] if r == case["root"] else [case["root"]]


def all_but_root(case, r):
    return [p for p in range(case.np) if p != case["root"]] if r == case["root"] else []


def linear_in_shape(case, r):
    return (f"in a linear {case.test.name.split('_')[0]} to root {case['root']} every other "
            f"rank sends its block to the root in one message, and the root sends nothing")


linear_into_root = edges_rule(into_root, all_but_root, linear_in_shape)


def binomial_shape(case, r):
    parent = tree_parent(case, r)
    kids = tree_children(case, r)
    up = "sends nothing" if parent is None else f"sends one message, to rank {parent}"
    return (f"in the binomial tree rooted at rank {case['root']}, rank {r} (v={relative(case, r)}) "
            f"receives one message from each of ranks {kids} and {up}")


binomial_edges = edges_rule(lambda c, r: [] if tree_parent(c, r) is None else [tree_parent(c, r)],
                            tree_children, binomial_shape)


def linear_out_shape(case, r):
    return (f"in a linear scatter from root {case['root']} the root sends block i to rank i, "
            f"one message each and none to itself, and every other rank receives one")


linear_from_root = edges_rule(all_but_root, into_root, linear_out_shape)


# ---------------------------------------------------------- fun_reduce.c

def reduce_specs():
    """Every root at every world size, with every (dtype, op) of REDUCE_PAIRS."""
    pairs = [{"dtype": d, "op": o} for d, o in REDUCE_PAIRS]
    return [s for n in NPS for s in rooted_cases(n, pairs)]


def reduce_inputs(case, rng):
    return {"x": per_rank(case, rng, lambda r: random_values(rng, case["dtype"], case["op"],
                                                             case["count"]))}


def reduce_reference(case, inputs):
    full = reduce_ranks(np.stack(inputs["x"]), case["op"])
    return [{"y": full} if r == case["root"] else {} for r in range(case.np)]


def reduce_tolerance(case, inputs, name, rank):
    return reduction_tolerance(np.stack(inputs["x"]), case["op"])


@test("fun_reduce", points=5, inputs=reduce_inputs, reference=reduce_reference,
      tolerance=reduce_tolerance,
      rules=[point_to_point_only, linear_into_root])
def reduce_linear(rng):
    return reduce_specs()


@test("fun_reduce", points=10, inputs=reduce_inputs, reference=reduce_reference,
      tolerance=reduce_tolerance,
      rules=[point_to_point_only, binomial_edges])
def reduce_binomial(rng):
    return reduce_specs()


# ---------------------------------------------------------- fun_gather.c

def typed_specs(rooted):
    """Every root (when rooted) and every count of counts_for(np), the dtypes rotating."""
    specs = []
    for n in NPS:
        dtypes = [{"dtype": BCAST_DTYPES[(k + n) % len(BCAST_DTYPES)]}
                  for k in range(len(BCAST_DTYPES))]
        if rooted:
            specs += rooted_cases(n, dtypes)
        else:
            specs += [{"np": n, "count": cnt, **dtypes[i % len(dtypes)]}
                      for i, cnt in enumerate(counts_for(n))]
    return specs


def block_inputs(case, rng):
    """Each rank its own block of count elements."""
    return {"x": per_rank(case, rng, lambda r: random_values(rng, case["dtype"], "max",
                                                             case["count"]))}


def gather_reference(case, inputs):
    full = np.concatenate(inputs["x"])
    return [{"y": full} if r == case["root"] else {} for r in range(case.np)]


def allgather_reference(case, inputs):
    full = np.concatenate(inputs["x"])
    return [{"y": full} for _ in range(case.np)]


def ring_sends(case, inputs, records):
    """Exactly np-1 messages of one block each: (np-1) count elements in all."""
    n, want = case.np, block_bytes(case)
    out = []
    for r, rec in enumerate(records):
        sizes = [e.bytes for e in rec.sends()]
        if len(sizes) != n - 1 or any(b != want for b in sizes):
            out.append((r, f"rank {r} sent {amount(len(sizes), ' messages')} carrying "
                           f"{amount(sum(sizes), ' B')}; the ring sends exactly np-1 = "
                           f"{amount(n - 1, ' messages')} of one block ({amount(want, ' B')}) "
                           f"each, {amount((n - 1) * want, ' B')} in all"))
    return out


@test("fun_gather", points=5, inputs=block_inputs, reference=gather_reference,
      tolerance=exact,
      rules=[point_to_point_only, linear_into_root])
def gather_linear(rng):
    return typed_specs(rooted=True)


@test("fun_gather", points=10, inputs=block_inputs, reference=allgather_reference,
      tolerance=exact,
      rules=[point_to_point_only, one_neighbour, ring_sends])
def allgather_ring(rng):
    return typed_specs(rooted=False)


# --------------------------------------------------------- fun_scatter.c

def scatter_inputs(case, rng):
    """The root's np blocks, one file for the group (only the root passes them)."""
    return {"x": random_values(rng, case["dtype"], "max", case.np * case["count"])}


def scatter_reference(case, inputs):
    cnt = case["count"]
    return [{"y": inputs["x"][r * cnt:(r + 1) * cnt]} for r in range(case.np)]


@test("fun_scatter", points=5, inputs=scatter_inputs, reference=scatter_reference,
      tolerance=exact,
      rules=[point_to_point_only, linear_from_root])
def scatter_linear(rng):
    return typed_specs(rooted=True)


# ========================================= recursive doubling, barrier, all-to-all-v
# fun_allreduce_rd.c, fun_barrier.c, fun_all2all.c, fun_dist_softmax.c.

def nothing_but(allowed, why):
    """No MPI communication of any kind (point-to-point, collective,
    communicator construction, one-sided) other than the call `allowed`."""
    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            extra = sorted(fn for fn, st in rec.calls.items()
                           if st.kind in ("p2p", "coll", "comm", "rma") and fn != allowed)
            if extra:
                out.append((r, f"rank {r} called {', '.join(extra)}: {why}"))
        return out
    rule.__doc__ = f"no communication but {allowed}"
    return rule


# ---------------------------------------------------- fun_allreduce_rd.c


def pow2_below(n):
    """The largest power of two <= n."""
    return 1 << (n.bit_length() - 1)


def rd_sends(case, r):
    """Messages rank r sends: log2(p2) rounds, plus the result for its folded
    partner r + p2; a folded rank (r >= p2) sends its buffer once."""
    p2 = pow2_below(case.np)
    if r >= p2:
        return 1
    return p2.bit_length() - 1 + (1 if r + p2 < case.np else 0)


def rd_why(case, r):
    p2 = pow2_below(case.np)
    if r >= p2:
        return f"it folds its buffer into rank {r - p2} and receives the result back"
    rounds = amount(p2.bit_length() - 1, " rounds")
    if r + p2 < case.np:
        return f"{rounds} among the {p2} ranks below p2 = {p2}, plus the result for rank {r + p2}"
    return f"{rounds} among the {p2} ranks below p2 = {p2}"


def rd_messages(case, inputs, records):
    """Exactly the messages of recursive doubling with the fold-in step."""
    out = []
    for r, rec in enumerate(records):
        want = rd_sends(case, r)
        # An empty buffer may be skipped altogether.
        ok = rec.msgs_sent == want or (case["count"] == 0 and rec.msgs_sent < want)
        if not ok:
            out.append((r, f"rank {r} sent {amount(rec.msgs_sent, ' messages')}; recursive "
                           f"doubling at np={case.np} has it send exactly "
                           f"{amount(want, ' messages')}: {rd_why(case, r)}"))
    return out


def rd_bytes(case, inputs, records):
    """Every message carries the whole buffer: count elements."""
    out = []
    whole = case["count"] * itemsize(case)
    for r, rec in enumerate(records):
        want = rec.msgs_sent * whole
        if rec.bytes_sent != want:
            out.append((r, f"rank {r} sent {amount(rec.bytes_sent, ' B')} in "
                           f"{amount(rec.msgs_sent, ' messages')}; in recursive doubling every "
                           f"message is the whole buffer, {whole} B, so {want} B"))
    return out


def rd_rounds(case, inputs):
    """log2(p2) exchanges, each one round when both partners send at once, and with
    a fold two more: the folded ranks' buffers in, then the result out."""
    p2 = pow2_below(case.np)
    return p2.bit_length() - 1 + (2 if case.np > p2 else 0)


def rd_rounds_formula(case):
    if case.np == pow2_below(case.np):
        return f"recursive doubling at np={case.np} takes log2 np"
    return (f"recursive doubling at np={case.np} takes log2 p2 + 2 (the fold in and the "
            f"result out)")


@test("fun_allreduce_rd", points=10, inputs=allreduce_inputs, reference=allreduce_reference,
      tolerance=allreduce_tolerance,
      rules=[point_to_point_only, rd_messages, rd_bytes,
             max_rounds(rd_rounds, rd_rounds_formula,
                        "both partners of an exchange send before they receive (MPI_Sendrecv), "
                        "so the exchange is one round; receiving first makes it two")])
def allreduce_rd(rng):
    return [s for n in NPS for s in allreduce_specs(n)]


# ------------------------------------------- fun_hierarchical_allreduce.c

# (np, ranks per node): one node, one rank a node, and nodes of 2, 3 and 4.
NODE_SHAPES = [(1, 1), (2, 1), (2, 2), (3, 1), (3, 3), (4, 1), (4, 2), (4, 4), (5, 5), (8, 2),
               (8, 4)]


def hierarchical_specs():
    """Reductions on each shape, the counts of counts_for(np) and one that L N divides (the
    exact byte budgets) rotating, and a long float32 sum that it divides too."""
    specs = []
    for k, (n, per_node) in enumerate(NODE_SHAPES):
        counts = counts_for(n) + [3 * n]
        # A quarter of the reductions on each small shape (each of them on some shape), half
        # on the 8-rank ones.
        for i, (dtype, op) in enumerate(REDUCTIONS[k % 4::4] if n != 8 else REDUCTIONS[::2]):
            specs.append({"np": n, "ranks_per_node": per_node, "dtype": dtype, "op": op,
                          "count": counts[(i + n + per_node) % len(counts)]})
        specs.append({"np": n, "ranks_per_node": per_node, "dtype": "float32", "op": "sum",
                      "count": 1250 * n})
    return specs


def splits_and_p2p_only(case, inputs, records):
    """Point-to-point messages, and MPI_Comm_split for the node and cross-node groups."""
    return point_to_point_only(case, inputs, [
        type(rec)(calls={fn: st for fn, st in rec.calls.items() if fn != "MPI_Comm_split"})
        for rec in records])


splits_and_p2p_only.__doc__ = "point-to-point messages and MPI_Comm_split only"


def on_the_groups(case, inputs, records):
    """Every message on a group of the program's own (the node's, the cross-node one), none
    on comm itself: the node-aware all-reduce's three rings each run on its group."""
    for r, rec in enumerate(records):
        stray = [e for e in rec.sends() if e.comm in ("case", "world")]
        if stray:
            e = stray[0]
            return [(r, f"rank {r} sent {len(stray)} message(s) on comm itself ({e.fn} to rank "
                        f"{e.case_peer}, {e.bytes} B): each ring runs on its group, the node's "
                        f"or the cross-node one, made with MPI_Comm_split")]
    return []


def node_bytes(case, inputs, records):
    """Bytes each rank sends to ranks of its own node and of other nodes (each message's
    peer in the case's group, whichever communicator it went on): in all, the three rings'
    2 N (L-1) S inside nodes and 2 (N-1) S across them, for any count; per rank 2 (L-1)/L S
    and 2 (N-1)/N S/L where L N divides count."""
    per_node = case["ranks_per_node"]
    nodes = case.np // per_node
    size = case["count"] * itemsize(case)
    inside, across = [], []
    for r, rec in enumerate(records):
        mine = [e for e in rec.sends() if e.case_peer >= 0]
        inside.append(sum(e.bytes for e in mine if e.case_peer // per_node == r // per_node))
        across.append(sum(e.bytes for e in mine if e.case_peer // per_node != r // per_node))
    shape = (f"{nodes} node{'s' if nodes > 1 else ''} of {per_node} rank"
             f"{'s' if per_node > 1 else ''}, S = {size} B")
    if case["count"] % (per_node * nodes) == 0:
        want_in = 2 * (per_node - 1) * size // per_node
        want_across = 2 * (nodes - 1) * size // (nodes * per_node)
        for r in range(case.np):
            if across[r] != want_across:
                return [(r, f"rank {r} sent {across[r]} B to other nodes; with {shape} the "
                            f"node-aware all-reduce sends 2 (N-1)/N S/L = {want_across} B "
                            f"across nodes: only its own block, all-reduced among the ranks "
                            f"of its local index ({inside[r]} B inside its node)")]
            if inside[r] != want_in:
                return [(r, f"rank {r} sent {inside[r]} B inside its node; with {shape} the "
                            f"reduce-scatter and all-gather rings inside a node send 2 (L-1)/L "
                            f"S = {want_in} B ({across[r]} B to other nodes)")]
        return []
    total_in, total_across = 2 * nodes * (per_node - 1) * size, 2 * (nodes - 1) * size
    r = max(range(case.np), key=lambda q: across[q])
    if sum(across) != total_across:
        return [(r, f"the ranks sent {sum(across)} B across nodes in all (rank {r} "
                    f"{across[r]} B); with {shape} the node-aware all-reduce sends 2 (N-1) S = "
                    f"{total_across} B: each rank's block crosses the network only in its "
                    f"cross-node ring")]
    if sum(inside) != total_in:
        r = max(range(case.np), key=lambda q: inside[q])
        return [(r, f"the ranks sent {sum(inside)} B inside their nodes in all (rank {r} "
                    f"{inside[r]} B); with {shape} the two rings inside each node send 2 N "
                    f"(L-1) S = {total_in} B")]
    return []


@test("fun_hierarchical_allreduce", points=10, inputs=allreduce_inputs,
      reference=allreduce_reference, tolerance=allreduce_tolerance,
      label=lambda c: f"np={c.np} ranks_per_node={c['ranks_per_node']} {c['dtype']} {c['op']} "
                      f"count={c['count']}",
      rules=[splits_and_p2p_only, on_the_groups, node_bytes])
def hierarchical_allreduce(rng):
    return hierarchical_specs()


# ----------------------------------------------- fun_double_binary_tree.c

# Tree sizes whose links are graded: every n to 17, powers of two and their neighbours (the
# trees end early at 2^k + 1), and a few larger.
TREE_SIZES = list(range(1, 18)) + [31, 32, 33, 63, 64, 65, 100, 257]
LINK_FIELDS = ("parent", "first child (the lower)", "second child", "level")


def in_order_tree(n):
    """Tree 0 over positions 0..n-1 from its definition: position 0 the root; the positions
    strictly between a and b hang under their root, a plus the largest power of two below
    b - a (the whole tree: a = 0, b = n, under position 0). {position: parent},
    {position: [children]}."""
    parent, kids = {0: -1}, {p: [] for p in range(n)}
    ranges = [(0, n, 0)]
    while ranges:
        a, b, up = ranges.pop()
        if b - a < 2:
            continue
        p = a + (1 << ((b - a - 1).bit_length() - 1))
        parent[p] = up
        kids[up].append(p)
        ranges += [(a, p, p), (p, b, p)]
    return parent, kids


def tree_rank(n, pos, t):
    """The rank at a position of tree t: tree 1 is tree 0 mirrored (np even) or shifted by
    one (np odd)."""
    if pos < 0 or t == 0:
        return pos
    return n - 1 - pos if n % 2 == 0 else (pos + 1) % n


def double_tree(n):
    """links[t, r] = (parent, lower child, higher child, level) of rank r in tree t, -1 for
    none (children after any child); a position's level the index of its lowest set bit,
    the root's ceil(log2 n)."""
    parent, kids = in_order_tree(n)
    links = np.full((2, n, 4), -1, dtype=np.int32)
    for t in (0, 1):
        for pos in range(n):
            r = tree_rank(n, pos, t)
            below = sorted(tree_rank(n, k, t) for k in kids[pos])
            level = ceil_log2(n) if pos == 0 else (pos & -pos).bit_length() - 1
            links[t, r] = [tree_rank(n, parent[pos], t)] + below + [-1] * (2 - len(below)) + [level]
    return links


def links_reference(case, inputs):
    return [{"links": double_tree(case["n"]).reshape(-1)}]


def links_locate(case, name, index, rank):
    t, rest = divmod(index, 4 * case["n"])
    r, field = divmod(rest, 4)
    return f"tree {t}, rank {r}'s {LINK_FIELDS[field]}"


@test("fun_double_binary_tree", points=4, inputs=lambda case, rng: {}, reference=links_reference,
      tolerance=exact, label=lambda c: f"trees of n={c['n']} ranks", locate=links_locate,
      hint="position p's level is the index of its lowest set bit 2^j; its parent clears that "
           "bit and sets the next (or only clears it, where that passes n); its children are "
           "p - 2^(j-1) and p + 2^(j-1), the second halved while it passes n. Tree 1 maps "
           "rank r to position n-1-r (n even) or r-1 mod n (n odd)")
def double_tree_links(rng):
    return [{"np": 1, "n": n} for n in TREE_SIZES]


def dbt_links(case):
    return double_tree(case.np)


def dbt_halves(case):
    """Elements in half 0 and half 1 (count t/2 to count (t+1)/2)."""
    return case["count"] // 2, case["count"] - case["count"] // 2


def dbt_chunks(case):
    """C: the chunks of the larger half."""
    return -(-dbt_halves(case)[1] // case["chunk"])


def dbt_neighbours(links, r):
    """{peer: [(tree, 'parent' or 'child')]} of rank r in both trees."""
    out = {}
    for t in (0, 1):
        parent, c0, c1, _ = links[t, r]
        if parent >= 0:
            out.setdefault(int(parent), []).append((t, "parent"))
        for c in (c0, c1):
            if c >= 0:
                out.setdefault(int(c), []).append((t, "child"))
    return out


def dbt_peers(case, inputs, records):
    """Every message to a tree neighbour; where count is even, the bytes to each exactly a
    half for each tree it neighbours r in (up once to the parent, down once to each child),
    otherwise the bytes of all ranks together exactly 2 (np-1) S (each tree's np-1 edges
    carry its half up and down)."""
    links = dbt_links(case)
    size = itemsize(case)
    half = case["count"] // 2 * size
    totals = 0
    for r, rec in enumerate(records):
        near = dbt_neighbours(links, r)
        sent = {}
        for e in rec.sends():
            sent.setdefault(e.case_peer, []).append(e.bytes)
        for peer, sizes in sorted(sent.items()):
            if peer not in near:
                return [(r, f"rank {r} sent {amount(len(sizes), ' messages')} to rank {peer}, "
                            f"which is neither parent nor child of rank {r} in either tree "
                            f"({dbt_describe(links, r)})")]
            totals += sum(sizes)
            if case["count"] % 2 == 0 and sum(sizes) != half * len(near[peer]):
                roles = " and ".join(f"its {role} in tree {t}" for t, role in near[peer])
                return [(r, f"rank {r} sent {sum(sizes)} B to rank {peer}, {roles}: the "
                            f"double binary tree sends a half ({half} B) once each way along "
                            f"each tree edge, {half * len(near[peer])} B")]
        if case["count"] % 2 == 0:
            for peer in near:
                if peer not in sent and half:
                    roles = " and ".join(f"its {role} in tree {t}" for t, role in near[peer])
                    return [(r, f"rank {r} sent nothing to rank {peer}, {roles}: each half "
                                f"goes up its tree to the parent and down to each child")]
    whole = 2 * (case.np - 1) * case["count"] * size
    if totals != whole:
        return [(0, f"the ranks sent {totals} B in all; the double binary tree sends each "
                    f"half up and down its tree's np-1 edges: 2 (np-1) S = {whole} B for S = "
                    f"{case['count'] * size} B")]
    return []


def dbt_describe(links, r):
    def one(t):
        parent, c0, c1, _ = (int(v) for v in links[t, r])
        kids = " ".join(str(c) for c in (c0, c1) if c >= 0) or "none"
        return f"tree {t}: parent {parent if parent >= 0 else 'none'}, children {kids}"
    return "; ".join(one(t) for t in (0, 1))


def dbt_messages(case, inputs, records):
    """Messages of at most chunk elements; where 2 chunk divides count, exactly C a tree
    edge each way: C (up + children) per tree per rank."""
    links = dbt_links(case)
    cap = case["chunk"] * itemsize(case)
    for r, rec in enumerate(records):
        big = [e for e in rec.sends() if e.bytes > cap]
        if big:
            return [(r, f"rank {r} sent {big[0].bytes} B in one message to rank "
                        f"{big[0].case_peer}: the halves go in chunks of at most chunk = "
                        f"{amount(case['chunk'], ' elements')} ({cap} B), so that the tree's levels "
                        f"work at once, each on its own chunk")]
    if case["count"] % (2 * case["chunk"]):
        return []
    C = dbt_chunks(case)
    for r, rec in enumerate(records):
        edges = sum(len(v) for v in dbt_neighbours(links, r).values())
        if rec.msgs_sent != C * edges:
            return [(r, f"rank {r} sent {amount(rec.msgs_sent, ' messages')}; with {C} "
                        f"chunk{'s' if C != 1 else ''} a half it sends exactly {C * edges}: "
                        f"each chunk once along each of its {edges} tree edges "
                        f"({dbt_describe(links, r)})")]
    return []


def dbt_rounds(case, inputs):
    return 4 * (dbt_chunks(case) + ceil_log2(case.np))


@test("fun_double_binary_tree", points=10, inputs=allreduce_inputs,
      reference=allreduce_reference, tolerance=allreduce_tolerance,
      label=lambda c: f"np={c.np} {c['dtype']} {c['op']} count={c['count']} chunk={c['chunk']}",
      rules=[point_to_point_only, dbt_peers, dbt_messages,
             max_rounds(dbt_rounds,
                        lambda c: f"C + H = {dbt_chunks(c)} + {ceil_log2(c.np)} steps up and as "
                                  f"many down, two messages a step (one a tree): 4 (C + H)",
                        "run the trees side by side, each at its own pace: at step s a rank of "
                        "level h folds in and sends up chunk s - h of each tree; going down, "
                        "chunk s - (H - h). Finishing one tree before the other, or taking in "
                        "all of a child's chunks before sending one, is slower")])
def double_tree_allreduce(rng):
    """A quarter of the reductions on each np, the counts of counts_for(np) with chunks of
    1 to 64; a float32 sum of 16 chunks a half, and an int32 sum whose chunks end short."""
    specs = []
    for n in NPS:
        counts = counts_for(n)
        for i, (dtype, op) in enumerate(REDUCTIONS[n % 4::4]):
            count = counts[(i + n) % len(counts)]
            specs.append({"np": n, "dtype": dtype, "op": op, "count": count,
                          "chunk": (1, 3, 64, 200)[(i + n) % 4]})
        specs.append({"np": n, "dtype": "float32", "op": "sum", "count": 2048, "chunk": 64})
        specs.append({"np": n, "dtype": "int32", "op": "sum", "count": 1001, "chunk": 50})
    return specs


# --------------------------------------------------------- fun_barrier.c

# The last rank's delay (s); the others arrive within EARLY. Short: whether a rank may leave
# is judged from the chains of signals it heard (nobody_leaves_early), which do not depend on
# how late the last rank is; the delays only make the clock show it too.
LATE = 0.010
EARLY = 0.004


def barrier_inputs(case, rng):
    """Each rank's delay before it enters the barrier: distinct, one rank last."""
    early = rng.permutation(case.np) * (EARLY / max(case.np, 1))
    return {"delay": [np.array([LATE if r == case["late"] else early[r]], dtype=np.float64)
                      for r in range(case.np)]}


def barrier_reference(case, inputs):
    return [{} for _ in range(case.np)]  # the check below judges the timestamps


def nobody_leaves_early(case, inputs, outs, records):
    """No rank may leave before every rank has arrived. Judged from the signals, where the
    barrier is made of point-to-point messages on its communicator: a rank that left
    without a chain of signals from some rank could, on another run, leave before that
    rank arrives, whether or not it did this time (spec.heard_from). And from the clock
    (one per node): nobody left before the last rank arrived."""
    if any("arrive" not in o or "leave" not in o for o in outs):
        return [(r, f"rank {r} wrote no 'arrive' or 'leave' timestamp")
                for r, o in enumerate(outs) if "arrive" not in o or "leave" not in o]
    arrive = [float(o["arrive"][0]) for o in outs]
    leave = [float(o["leave"][0]) for o in outs]
    t0, last = min(arrive), int(np.argmax(arrive))

    def ms(t):
        return f"+{1e3 * (t - t0):.1f} ms"

    out = []
    if not point_to_point_only(case, inputs, records):
        heard = heard_from(records)
        # Those that missed the last rank first, earliest to leave first: what the clock
        # would show on a run where it came later still.
        for r in sorted(range(case.np), key=lambda r: (last in heard[r], leave[r])):
            missing = sorted(set(range(case.np)) - heard[r])
            if missing:
                out.append((r, f"rank {r} left without a chain of signals from "
                               f"{ranks_named(missing)}: it heard, directly or through "
                               f"others, only from {ranks_named(sorted(heard[r]))}, so on "
                               f"another run it may leave before {ranks_named(missing)} "
                               f"arrive{'s' if len(missing) == 1 else ''} (this time it left "
                               f"at {ms(leave[r])}; rank {last}, the last, arrived at "
                               f"{ms(arrive[last])}): nobody may leave a barrier before the "
                               f"last rank enters it"))
    return out or [
        (r, f"rank {r} left at {ms(leave[r])}, before rank {last} arrived at "
            f"{ms(arrive[last])}: nobody may leave a barrier before the last rank enters it")
        for r in range(case.np) if leave[r] < arrive[last]]


def ranks_named(ranks):
    """'rank 3', 'ranks 0, 1 and 3'."""
    if len(ranks) == 1:
        return f"rank {ranks[0]}"
    return "ranks " + ", ".join(map(str, ranks[:-1])) + f" and {ranks[-1]}"


def one_signal_per_round(case, inputs, records):
    """ceil(log2 np) rounds: exactly one message sent and one received in each."""
    want = ceil_log2(case.np)
    out = []
    for r, rec in enumerate(records):
        if rec.msgs_sent != want or rec.msgs_recv != want:
            out.append((r, f"rank {r} sent {amount(rec.msgs_sent, ' messages')} and received "
                           f"{rec.msgs_recv}; the dissemination barrier at np={case.np} has "
                           f"ceil(log2 np) = {amount(want, ' rounds')}, one message out and one "
                           f"in per round"))
    return out


@test("fun_barrier", points=10, inputs=barrier_inputs, reference=barrier_reference,
      label=lambda c: f"np={c.np} late={c['late']} (rank {c['late']} arrives last)",
      check=nobody_leaves_early, check_records=True,
      rules=[
          point_to_point_only, one_signal_per_round,
          bytes_sent_exactly(lambda c, i, r: 0, "a barrier's messages are signals and carry "
                                                "no data: count 0"),
          max_rounds(lambda c, i: ceil_log2(c.np),
                     "the dissemination barrier takes ceil(log2 np)",
                     "in round k each rank signals r + 2^k and hears from r - 2^k in one "
                     "MPI_Sendrecv"),
      ])
def barrier_dissemination(rng):
    """The last rank, rank 0 and a random rank arriving last."""
    specs = []
    for n in NPS:
        for late in sorted({n - 1, 0, int(rng.integers(0, n))}):
            specs.append({"np": n, "late": late})
    return specs


# --------------------------------------------------------- fun_all2all.c

SPLIT_PATTERNS = ("random", "sparse", "skewed", "empty")


def splits_inputs(case, rng):
    splits = a2a_splits(case, rng).astype(np.int32)
    return {"splits": splits,
            "x": [random_values(rng, "float32", "max", int(splits[r].sum()))
                  for r in range(case.np)]}


def splits_reference(case, inputs):
    splits, xs = inputs["splits"], inputs["x"]
    starts = [np.concatenate([[0], np.cumsum(row)]).astype(int) for row in splits]
    return [{"y": np.concatenate([xs[i][starts[i][j]:starts[i][j + 1]] for i in range(case.np)])}
            for j in range(case.np)]


@test("fun_all2all", points=5, inputs=splits_inputs, reference=splits_reference,
      tolerance=exact, label=lambda c: f"np={c.np} {c['pattern']} splits",
      rules=[
          calls_exactly("MPI_Alltoallv", lambda c, i, r: 1,
                        "the exchange is one MPI_Alltoallv with counts from the split matrix"),
          nothing_but("MPI_Alltoallv", "every rank already holds the whole split matrix, so "
                      "MPI_Alltoallv needs no exchange before it"),
      ])
def alltoallv_from_splits(rng):
    return [{"np": n, "pattern": p} for n in NPS for p in SPLIT_PATTERNS]


# ---------------------------------------------------- fun_dist_softmax.c

# (how the elements are spread over the ranks, the logits' centre, their spread)
SOFTMAX_SHAPES = [("even", 1000.0, 10.0), ("uneven", -1000.0, 10.0), ("first empty", 0.0, 5.0),
                  ("one", 1e4, 10.0), ("long", 0.0, 5.0), ("uneven", 1e4, 20.0),
                  ("none", 0.0, 5.0)]


def softmax_counts(rng, n, spread):
    if spread == "even":
        return [5] * n
    if spread == "uneven":
        return [int(v) for v in rng.integers(0, 13, n)]
    if spread == "first empty":
        return [0] + [int(v) for v in rng.integers(1, 10, n - 1)]
    if spread == "one":
        at = int(rng.integers(0, n))
        return [1 if r == at else 0 for r in range(n)]
    if spread == "long":
        return [int(v) for v in rng.integers(200, 301, n)]
    return [0] * n


def softmax_inputs(case, rng):
    counts = [int(v) for v in case["counts"].split(",")]
    return {"x": [(case["centre"] + rng.uniform(-case["width"], case["width"], k))
                  .astype(np.float32) for k in counts]}


def softmax_whole(inputs):
    """The concatenated shards and their softmax, both in float64, and the shard starts."""
    xs = inputs["x"]
    x = np.concatenate(xs).astype(np.float64)
    starts = np.concatenate([[0], np.cumsum([len(s) for s in xs])]).astype(int)
    if not x.size:
        return x, x, starts
    e = np.exp(x - x.max())
    return x, e / e.sum(), starts


def softmax_reference(case, inputs):
    _, y, starts = softmax_whole(inputs)
    return [{"y": y[starts[r]:starts[r + 1]].astype(np.float32)} for r in range(case.np)]


def softmax_tolerance(case, inputs, name, rank):
    """Float32 rounding: about (|x_i - max| + the terms one rank sums + np) eps, relative.

    exp(x_i - m) inherits the rounding of x_i - m, relative |x_i - m| eps; the
    sum of exps errs by at most its number of terms times eps, relative: the
    longest shard summed locally, then np partial sums.
    """
    x, y, starts = softmax_whole(inputs)
    sl = slice(starts[rank], starts[rank + 1])
    if not x.size:
        return 0.0
    eps = float(np.finfo(np.float32).eps)
    terms = max(len(s) for s in inputs["x"]) + case.np
    rel = 2 * eps * (np.abs(x[sl] - x.max()) + terms + 4)
    return rel * y[sl] + float(np.finfo(np.float32).tiny)


def softmax_label(case):
    return (f"np={case.np} counts=[{case['counts']}] logits centre={case['centre']:g} "
            f"width={case['width']:g}")


@test("fun_dist_softmax", points=5, inputs=softmax_inputs, reference=softmax_reference,
      tolerance=softmax_tolerance, label=softmax_label,
      rules=[
          calls_exactly("MPI_Allreduce", lambda c, i, r: 2,
                        "one MPI_Allreduce for the max, one for the sum of exps"),
          nothing_but("MPI_Allreduce", "the softmax needs nothing but the two MPI_Allreduce "
                      "calls (no barrier: each all-reduce already waits for every rank)"),
      ])
def dist_softmax(rng):
    """Every shape of SOFTMAX_SHAPES at every world size."""
    specs = []
    for n in NPS:
        for spread, centre, width in SOFTMAX_SHAPES:
            specs.append({"np": n, "counts": ",".join(map(str, softmax_counts(rng, n, spread))),
                          "centre": centre, "width": width})
    return specs


# ========================================================= CUDA (DEVICE=cuda only)
# p2p_cuda_stream.cu, fun_ring_allreduce_cuda.cu. Inputs start on the host;
# each program copies them to the GPU, runs the function on device memory and
# copies the result back. Rules count the messages the staging pipeline must
# send: one per chunk (per segment of at most `chunk` floats), no more, no fewer.

# Copies, events and a CUDA context per rank (up to 8 ranks on one GPU) make the
# first case slow to start; correct cases finish in milliseconds after that.
CUDA_WATCHDOG = 30.0


def pieces(length, chunk):
    """The lengths of `length` floats cut into pieces of at most `chunk`."""
    return [min(chunk, length - off) for off in range(0, length, chunk)]


def chunk_label(c):
    return f"np={c.np} count={c['count']} chunk={c['chunk']}"


# ------------------------------------------------------------ p2p_cuda_stream.cu

# (count, chunk): empty, one float, a short last chunk, one chunk, chunk longer
# than the buffer, one float a message, and buffers of a few MB where a copy
# that is not waited for loses the race against MPI.
P2P_SIZES = [(0, 4), (1, 1), (7, 3), (7, 7), (10, 64), (1000, 1), (1000, 256), (4099, 1024),
             (1 << 18, 1 << 14), (300007, 65536)]


def p2p_reference(case, inputs):
    """Rank 2k+1 ends with rank 2k's buffer; every other rank keeps its own."""
    return [{"x": inputs["x"][r - 1] if r % 2 == 1 else inputs["x"][r]}
            for r in range(case.np)]


def one_message_per_chunk(case, inputs, records):
    """The sender (rank 2k) sends chunk i as one message, in order; nobody else sends."""
    out = []
    for r, rec in enumerate(records):
        sender = r % 2 == 0 and r + 1 < case.np
        want = [4 * n for n in pieces(case["count"], case["chunk"])] if sender else []
        got = [e.bytes for e in rec.sends()]
        if got != want:
            out.append((r, f"rank {r} sent {amount(len(got), ' messages')} of {show(got)} B; "
                           f"{case['count']} floats in chunks of {case['chunk']} are "
                           f"{amount(len(want), ' messages')} of {show(want)} B, one per "
                           f"chunk, in order"))
    return out


def show(sizes, most=6):
    """[4096, 4096, ..., 12] for a long list."""
    if len(sizes) <= most:
        return str(sizes)
    return "[" + ", ".join(map(str, sizes[:3])) + ", ..., " + \
        ", ".join(map(str, sizes[-2:])) + "]"


@test("p2p_cuda_stream", points=5, device="cuda", inputs=float_inputs, reference=p2p_reference,
      tolerance=exact, label=chunk_label, watchdog=CUDA_WATCHDOG,
      rules=[one_message_per_chunk],
      hint="the grader receives with plain MPI_Recv on host memory; stale values usually mean "
           "MPI read a pinned slot before its cudaMemcpyAsync finished (cudaEventSynchronize)")
def send_device(rng):
    return [{"np": n, "count": count, "chunk": chunk} for n in NPS for count, chunk in P2P_SIZES]


@test("p2p_cuda_stream", points=5, device="cuda", inputs=float_inputs, reference=p2p_reference,
      tolerance=exact, label=chunk_label, watchdog=CUDA_WATCHDOG,
      hint="the grader sends chunk i as one MPI_Send of MPI_FLOAT, tag 0, from host memory")
def recv_device(rng):
    return [{"np": n, "count": count, "chunk": chunk} for n in NPS for count, chunk in P2P_SIZES]


# ----------------------------------------------------- fun_ring_allreduce_cuda.cu

# Cycled over the counts so that every np meets one float a message, segments
# that do not divide a block, and segments longer than any block.
RING_CHUNKS = (1, 2, 3, 5, 64, 1000, 4096)


def ring_cuda_inputs(case, rng):
    return {"x": [random_values(rng, "float32", "sum", case["count"]) for _ in range(case.np)]}


def ring_cuda_reference(case, inputs):
    full = reduce_ranks(np.stack(inputs["x"]), "sum")
    return [{"x": full} for _ in range(case.np)]


def ring_cuda_tolerance(case, inputs, name, rank):
    return reduction_tolerance(np.stack(inputs["x"]), "sum")


def ring_segments(case, r):
    """Rank r's messages, in floats: the blocks the CPU ring sends (r-s in the
    reduce-scatter, r+1-s in the all-gather), each cut into segments."""
    n, count, chunk = case.np, case["count"], case["chunk"]
    lens = [count // n + (b < count % n) for b in range(n)]
    sent = [(r - s) % n for s in range(n - 1)] + [(r + 1 - s) % n for s in range(n - 1)]
    return [p for b in sent for p in pieces(lens[b], chunk)]


def segments_within_chunk(case, inputs, records):
    """No message carries more than chunk floats."""
    out = []
    cap = 4 * case["chunk"]
    for r, rec in enumerate(records):
        big = [e.bytes for e in rec.sends() if e.bytes > cap]
        if big:
            out.append((r, f"rank {r} sent a message of {big[0]} B; a segment carries at most "
                           f"chunk = {case['chunk']} floats ({cap} B), so that copies and "
                           f"messages can overlap"))
    return out


@test("fun_ring_allreduce_cuda", points=15, device="cuda", inputs=ring_cuda_inputs,
      reference=ring_cuda_reference, tolerance=ring_cuda_tolerance, label=chunk_label,
      watchdog=CUDA_WATCHDOG,
      rules=[
          point_to_point_only, one_neighbour, segments_within_chunk,
          messages_exactly(lambda c, i, r: len(ring_segments(c, r)),
                           "2(np-1) blocks, each in ceil(block/chunk) segments, none for an "
                           "empty block"),
          bytes_sent_exactly(lambda c, i, r: 4 * sum(ring_segments(c, r)),
                             "every block but one per phase, once, as 4-byte floats"),
      ],
      hint="stale sums usually mean MPI read or refilled a pinned slot before the copy on the "
           "stream finished: cudaEventSynchronize the slot's event first")
def ring_allreduce_cuda(rng):
    """Every count of counts_for(np), the chunks of RING_CHUNKS rotating, and a few more."""
    specs = []
    for n in NPS:
        for i, count in enumerate(counts_for(n)):
            chunk = RING_CHUNKS[(i + n) % len(RING_CHUNKS)]
            specs.append({"np": n, "count": count, "chunk": chunk})
        specs.append({"np": n, "count": 3 * n, "chunk": 1})
        specs.append({"np": n, "count": 10007, "chunk": 256})
        specs.append({"np": n, "count": (1 << 18) + 5, "chunk": 1 << 14})
    return specs


# In the order of docs/lc1_basic.md: point-to-point first, then the collectives.
TESTS = [make_mesh_2d, make_half, group_sums, chain_pass, gather_async, recv_any_size, ring_shift,
         ring_shift_sendrecv, bcast_linear, bcast_binomial, reduce_linear, reduce_binomial,
         gather_linear, allgather_ring, scatter_linear, reduce_scatter_ring, ring_allreduce,
         allreduce_rd, hierarchical_allreduce, double_tree_links, double_tree_allreduce,
         barrier_dissemination, alltoallv_from_splits, alltoallv_scratch,
         dist_softmax, send_device, recv_device, ring_allreduce_cuda]
