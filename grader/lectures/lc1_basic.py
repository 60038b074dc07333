"""Lecture 1, communication primitives: one entry per function a student writes.

Every expected value below is the plain single-process definition computed by
NumPy (a stack of the ranks' inputs, reduced or reindexed), never the
parallel algorithm itself. Rules state the algorithm's cost exactly.
"""

import numpy as np

from spec import (NPS, Test, amount, ceil_log2, exact, itemsize, make_cases, max_bytes_sent,
                  max_messages, only_calls, point_to_point_only,
                  random_values, reduce_ranks, reduction_tolerance, calls_exactly)

LECTURE = "lc1_basic"

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

def chain_cases(rng):
    return make_cases(CHAIN, [{"np": n, "count": c} for n in NPS for c in (0, 1, 7, 1000)])


def float_inputs(case, rng):
    """Each rank its own count floats in [-10, 10)."""
    return {"x": per_rank(case, rng, lambda r: rng.uniform(-10, 10, case["count"])
                          .astype(np.float32))}


def chain_reference(case, inputs):
    x0 = inputs["x"][0]
    return [{"x": x0 * np.float32(2.0 ** k)} for k in range(case.np)]


CHAIN = Test(
    exercise="p2p", name="chain_pass", points=5,
    cases=chain_cases, inputs=float_inputs, reference=chain_reference, tolerance=exact,
    rules=[
        point_to_point_only,
        max_messages(lambda c, i, r: 1 if r < c.np - 1 else 0,
                     "one message to the next rank; the last rank sends none"),
        max_bytes_sent(lambda c, i, r: 4 * c["count"] if r < c.np - 1 else 0,
                       "the buffer once, to the next rank"),
    ],
)

# ------------------------------------------------------------- p2p_ring.c

def ring_cases(test):
    return lambda rng: make_cases(test(), [{"np": n, "count": c}
                                           for n in NPS for c in (0, 1, 5, 1000)])


def ring_reference(case, inputs):
    return [{"y": inputs["x"][(r - 1) % case.np]} for r in range(case.np)]


ONE_SEND = max_messages(lambda c, i, r: 1, "one message to the right neighbour")

RING_SHIFT = Test(
    exercise="p2p_ring", name="ring_shift", points=5,
    cases=ring_cases(lambda: RING_SHIFT), inputs=float_inputs, reference=ring_reference,
    tolerance=exact,
    rules=[
        point_to_point_only,
        only_calls({"MPI_Send", "MPI_Recv"},
                   "ring_shift practises blocking MPI_Send and MPI_Recv in an even/odd "
                   "order (MPI_Sendrecv is ring_shift_sendrecv's job)"),
        ONE_SEND,
    ],
)

RING_SHIFT_SENDRECV = Test(
    exercise="p2p_ring", name="ring_shift_sendrecv", points=5,
    cases=ring_cases(lambda: RING_SHIFT_SENDRECV), inputs=float_inputs,
    reference=ring_reference, tolerance=exact,
    rules=[
        point_to_point_only,
        only_calls({"MPI_Sendrecv"}, "ring_shift_sendrecv is one MPI_Sendrecv"),
        calls_exactly("MPI_Sendrecv", lambda c, i, r: 1 if c.np > 1 else None,
                      "one MPI_Sendrecv sends right and receives from the left"),
        ONE_SEND,
    ],
)

# --------------------------------------------------------- fun_broadcast.c

def bcast_cases(test):
    def cases(rng):
        specs = []
        for n in NPS:
            for root in range(n):
                specs.append({"np": n, "root": root, "count": (7, 1, 1000, 0)[root % 4],
                              "dtype": BCAST_DTYPES[(root + n) % len(BCAST_DTYPES)]})
        return make_cases(test(), specs)
    return cases


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


BCAST_LINEAR = Test(
    exercise="fun_broadcast", name="bcast_linear", points=5,
    cases=bcast_cases(lambda: BCAST_LINEAR), inputs=bcast_inputs, reference=bcast_reference,
    tolerance=exact,
    rules=[
        point_to_point_only,
        receives_once,
        max_messages(lambda c, i, r: c.np - 1 if r == c["root"] else 0,
                     "the root sends np-1 messages, the others none"),
    ],
)

BCAST_BINOMIAL = Test(
    exercise="fun_broadcast", name="bcast_binomial", points=10,
    cases=bcast_cases(lambda: BCAST_BINOMIAL), inputs=bcast_inputs,
    reference=bcast_reference, tolerance=exact,
    rules=[
        point_to_point_only,
        receives_once,
        max_messages(lambda c, i, r: ceil_log2(c.np), "a binomial tree: ceil(log2 np) rounds"),
    ],
)

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


def rs_cases(rng):
    specs = []
    for n in NPS:
        for i, (dtype, op) in enumerate(REDUCTIONS):
            counts = block_counts(rng, n, (i + n) % 6)
            specs.append({"np": n, "dtype": dtype, "op": op,
                          "recvcounts": ",".join(map(str, counts))})
    return make_cases(REDUCE_SCATTER, specs)


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


REDUCE_SCATTER = Test(
    exercise="fun_reduce_scatter", name="reduce_scatter_ring", points=15,
    cases=rs_cases, inputs=rs_inputs, reference=rs_reference, tolerance=rs_tolerance,
    label=rs_label,
    rules=[
        point_to_point_only,
        max_messages(lambda c, i, r: c.np - 1, "np-1 steps around the ring"),
        max_bytes_sent(lambda c, i, r: (sum(rs_counts(c)) - rs_counts(c)[r]) * itemsize(c),
                       "every block but its own, once"),
        one_neighbour,
    ],
)

# ---------------------------------------------------- fun_ring_allreduce.c

def allreduce_cases(rng):
    specs = []
    for n in NPS:
        counts = counts_for(n)
        for i, (dtype, op) in enumerate(REDUCTIONS):
            specs.append({"np": n, "dtype": dtype, "op": op, "count": counts[(i + n) % len(counts)]})
        specs.append({"np": n, "dtype": "float32", "op": "sum", "count": 10007})
        specs.append({"np": n, "dtype": "int32", "op": "sum", "count": 3 * n})
    return make_cases(RING_ALLREDUCE, specs)


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


RING_ALLREDUCE = Test(
    exercise="fun_ring_allreduce", name="ring_allreduce", points=15,
    cases=allreduce_cases, inputs=allreduce_inputs, reference=allreduce_reference,
    tolerance=allreduce_tolerance,
    rules=[
        point_to_point_only,
        max_messages(lambda c, i, r: 2 * (c.np - 1), "2(np-1): reduce-scatter, then all-gather"),
        max_bytes_sent(lambda c, i, r: 2 * (c.np - 1) * ring_chunk(c) * itemsize(c),
                       "2(np-1) chunks of at most ceil(count/np) elements"),
        one_neighbour,
    ],
)

# --------------------------------------------------- fun_all2all_scratch.c

PATTERNS = ("random", "sparse", "skewed", "empty")


def a2a_cases(rng):
    specs = []
    for n in NPS:
        for i, pattern in enumerate(PATTERNS):
            specs.append({"np": n, "dtype": BCAST_DTYPES[(i + n) % len(BCAST_DTYPES)],
                          "pattern": pattern})
    return make_cases(ALLTOALLV, specs)


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


ALLTOALLV = Test(
    exercise="fun_all2all_scratch", name="alltoallv_scratch", points=15,
    cases=a2a_cases, inputs=a2a_inputs, reference=a2a_reference, tolerance=exact,
    label=lambda c: f"np={c.np} {c['dtype']} {c['pattern']} splits",
    rules=[
        point_to_point_only,
        max_messages(lambda c, i, r: 2 * (c.np - 1), "np-1 sizes and np-1 payloads"),
        max_bytes_sent(a2a_payload_bytes, "one int to each peer, then every block but its own"),
        sizes_then_pairwise,
    ],
)


TESTS = [CHAIN, RING_SHIFT, RING_SHIFT_SENDRECV, BCAST_LINEAR, BCAST_BINOMIAL, REDUCE_SCATTER,
         RING_ALLREDUCE, ALLTOALLV]

# Parts of this table still being written live in their own modules until
# they are merged here.
import importlib as _importlib  # noqa: E402

for _part in ("lc1_part_comm", "lc1_part_trees", "lc1_part_more", "lc1_part_cuda"):
    try:
        TESTS = TESTS + _importlib.import_module(f"lectures.{_part}").TESTS
    except ModuleNotFoundError as _e:
        if _e.name != f"lectures.{_part}":
            raise
