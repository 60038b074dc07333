"""Lecture 1, rooted collectives from scratch: reduce, gather, all-gather, scatter.

Every expected value is the plain single-process definition computed by
NumPy (the ranks' inputs stacked, reduced, concatenated or cut), never the
parallel algorithm. Every root is tried at every world size. Rules state each
algorithm's messages exactly: who sends to whom, how many, how many bytes.

A rooted collective's `recv` (for scatter: `send`) matters only at the root;
the programs pass NULL on the other ranks, as MPI allows, and only the root's
result is checked.
"""

import numpy as np

from lectures.lc1_basic import BCAST_DTYPES, counts_for, one_neighbour, per_rank
from spec import (NPS, Test, amount, exact, itemsize, make_cases, point_to_point_only,
                  random_values, reduce_ranks, reduction_tolerance)

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

def reduce_cases(test):
    pairs = [{"dtype": d, "op": o} for d, o in REDUCE_PAIRS]
    return lambda rng: make_cases(test(), [s for n in NPS for s in rooted_cases(n, pairs)])


def reduce_inputs(case, rng):
    return {"x": per_rank(case, rng, lambda r: random_values(rng, case["dtype"], case["op"],
                                                             case["count"]))}


def reduce_reference(case, inputs):
    full = reduce_ranks(np.stack(inputs["x"]), case["op"])
    return [{"y": full} if r == case["root"] else {} for r in range(case.np)]


def reduce_tolerance(case, inputs, name, rank):
    return reduction_tolerance(np.stack(inputs["x"]), case["op"])


REDUCE_LINEAR = Test(
    exercise="fun_reduce", name="reduce_linear", points=5,
    cases=reduce_cases(lambda: REDUCE_LINEAR), inputs=reduce_inputs,
    reference=reduce_reference, tolerance=reduce_tolerance,
    rules=[point_to_point_only, linear_into_root],
)

REDUCE_BINOMIAL = Test(
    exercise="fun_reduce", name="reduce_binomial", points=10,
    cases=reduce_cases(lambda: REDUCE_BINOMIAL), inputs=reduce_inputs,
    reference=reduce_reference, tolerance=reduce_tolerance,
    rules=[point_to_point_only, binomial_edges],
)

# ---------------------------------------------------------- fun_gather.c

def typed_cases(test, rooted):
    """Every root (when rooted) and every count of counts_for(np), the dtypes rotating."""
    def cases(rng):
        specs = []
        for n in NPS:
            dtypes = [{"dtype": BCAST_DTYPES[(k + n) % len(BCAST_DTYPES)]}
                      for k in range(len(BCAST_DTYPES))]
            if rooted:
                specs += rooted_cases(n, dtypes)
            else:
                specs += [{"np": n, "count": cnt, **dtypes[i % len(dtypes)]}
                          for i, cnt in enumerate(counts_for(n))]
        return make_cases(test(), specs)
    return cases


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


GATHER_LINEAR = Test(
    exercise="fun_gather", name="gather_linear", points=5,
    cases=typed_cases(lambda: GATHER_LINEAR, rooted=True), inputs=block_inputs,
    reference=gather_reference, tolerance=exact,
    rules=[point_to_point_only, linear_into_root],
)

ALLGATHER_RING = Test(
    exercise="fun_gather", name="allgather_ring", points=10,
    cases=typed_cases(lambda: ALLGATHER_RING, rooted=False), inputs=block_inputs,
    reference=allgather_reference, tolerance=exact,
    rules=[point_to_point_only, one_neighbour, ring_sends],
)

# --------------------------------------------------------- fun_scatter.c

def scatter_inputs(case, rng):
    """The root's np blocks, one file for the group (only the root passes them)."""
    return {"x": random_values(rng, case["dtype"], "max", case.np * case["count"])}


def scatter_reference(case, inputs):
    cnt = case["count"]
    return [{"y": inputs["x"][r * cnt:(r + 1) * cnt]} for r in range(case.np)]


SCATTER_LINEAR = Test(
    exercise="fun_scatter", name="scatter_linear", points=5,
    cases=typed_cases(lambda: SCATTER_LINEAR, rooted=True), inputs=scatter_inputs,
    reference=scatter_reference, tolerance=exact,
    rules=[point_to_point_only, linear_from_root],
)

TESTS = [REDUCE_LINEAR, REDUCE_BINOMIAL, GATHER_LINEAR, ALLGATHER_RING, SCATTER_LINEAR]
