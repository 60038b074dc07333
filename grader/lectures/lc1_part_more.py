"""Lecture 1, part: recursive-doubling all-reduce, barrier, all-to-all-v from a
split matrix, distributed softmax.

As in lc1_basic.py, every expected value is the plain single-process
definition computed by NumPy, and the rules state each algorithm's cost
exactly.
"""

import numpy as np

from spec import (NPS, Test, amount, calls_exactly, ceil_log2, exact, itemsize, make_cases,
                  point_to_point_only, random_values)
from lectures.lc1_basic import (REDUCTIONS, a2a_splits, allreduce_inputs, allreduce_reference,
                                allreduce_tolerance, counts_for)


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


def rd_cases(rng):
    specs = []
    for n in NPS:
        counts = counts_for(n)
        for i, (dtype, op) in enumerate(REDUCTIONS):
            specs.append({"np": n, "dtype": dtype, "op": op,
                          "count": counts[(i + n) % len(counts)]})
        specs.append({"np": n, "dtype": "float32", "op": "sum", "count": 10007})
    return make_cases(ALLREDUCE_RD, specs)


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


ALLREDUCE_RD = Test(
    exercise="fun_allreduce_rd", name="allreduce_rd", points=10,
    cases=rd_cases, inputs=allreduce_inputs, reference=allreduce_reference,
    tolerance=allreduce_tolerance,
    rules=[point_to_point_only, rd_messages, rd_bytes],
)

# --------------------------------------------------------- fun_barrier.c

LATE = 0.060  # the last rank's delay (s); the others arrive within EARLY
EARLY = 0.020


def barrier_cases(rng):
    specs = []
    for n in NPS:
        for late in sorted({n - 1, 0, int(rng.integers(0, n))}):
            specs.append({"np": n, "late": late})
    return make_cases(BARRIER, specs)


def barrier_inputs(case, rng):
    """Each rank's delay before it enters the barrier: distinct, one rank clearly last."""
    early = rng.permutation(case.np) * (EARLY / max(case.np, 1))
    return {"delay": [np.array([LATE if r == case["late"] else early[r]], dtype=np.float64)
                      for r in range(case.np)]}


def barrier_reference(case, inputs):
    return [{} for _ in range(case.np)]  # the check below judges the timestamps


def nobody_leaves_early(case, inputs, outs):
    """No rank left the barrier before the last rank arrived (one clock per node)."""
    if any("arrive" not in o or "leave" not in o for o in outs):
        return [(r, f"rank {r} wrote no 'arrive' or 'leave' timestamp")
                for r, o in enumerate(outs) if "arrive" not in o or "leave" not in o]
    arrive = [float(o["arrive"][0]) for o in outs]
    leave = [float(o["leave"][0]) for o in outs]
    t0, last = min(arrive), int(np.argmax(arrive))

    def ms(t):
        return f"+{1e3 * (t - t0):.1f} ms"

    return [(r, f"rank {r} left at {ms(leave[r])}, before rank {last} arrived at "
                f"{ms(arrive[last])}: nobody may leave a barrier before the last rank enters it")
            for r in range(case.np) if leave[r] < arrive[last]]


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


def empty_signals(case, inputs, records):
    """A signal carries no data."""
    return [(r, f"rank {r} sent {amount(rec.bytes_sent, ' B')}; a barrier's messages are "
                f"signals and carry no data (count 0)")
            for r, rec in enumerate(records) if rec.bytes_sent != 0]


BARRIER = Test(
    exercise="fun_barrier", name="barrier_dissemination", points=10,
    cases=barrier_cases, inputs=barrier_inputs, reference=barrier_reference,
    label=lambda c: f"np={c.np}, rank {c['late']} arrives last",
    check=nobody_leaves_early,
    rules=[point_to_point_only, one_signal_per_round, empty_signals],
)

# --------------------------------------------------------- fun_all2all.c

SPLIT_PATTERNS = ("random", "sparse", "skewed", "empty")


def splits_cases(rng):
    return make_cases(ALLTOALLV_SPLITS, [{"np": n, "pattern": p}
                                         for n in NPS for p in SPLIT_PATTERNS])


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


ALLTOALLV_SPLITS = Test(
    exercise="fun_all2all", name="alltoallv_from_splits", points=5,
    cases=splits_cases, inputs=splits_inputs, reference=splits_reference, tolerance=exact,
    label=lambda c: f"np={c.np} {c['pattern']} splits",
    rules=[
        calls_exactly("MPI_Alltoallv", lambda c, i, r: 1,
                      "the exchange is one MPI_Alltoallv with counts from the split matrix"),
        nothing_but("MPI_Alltoallv", "every rank already holds the whole split matrix, so "
                    "MPI_Alltoallv needs no exchange before it"),
    ],
)

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


def softmax_cases(rng):
    specs = []
    for n in NPS:
        for spread, centre, width in SOFTMAX_SHAPES:
            specs.append({"np": n, "counts": ",".join(map(str, softmax_counts(rng, n, spread))),
                          "centre": centre, "width": width})
    return make_cases(SOFTMAX, specs)


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
    return (f"np={case.np} counts=[{case['counts']}] logits {case['centre']:g} "
            f"+- {case['width']:g}")


SOFTMAX = Test(
    exercise="fun_dist_softmax", name="dist_softmax", points=5,
    cases=softmax_cases, inputs=softmax_inputs, reference=softmax_reference,
    tolerance=softmax_tolerance, label=softmax_label,
    rules=[
        calls_exactly("MPI_Allreduce", lambda c, i, r: 2,
                      "one MPI_Allreduce for the max, one for the sum of exps"),
        nothing_but("MPI_Allreduce", "the softmax needs nothing but the two MPI_Allreduce "
                    "calls (no barrier: each all-reduce already waits for every rank)"),
    ],
)


TESTS = [ALLREDUCE_RD, BARRIER, ALLTOALLV_SPLITS, SOFTMAX]
