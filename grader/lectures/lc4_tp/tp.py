"""What lecture 4's tests share: the split rule's blocks, the exact collective
budgets checked through PMPI, and bit-identical replicated outputs.

A tensor-parallel layer's communication is fully determined: which
collective, how many times, how many floats each, on which communicator. So
the rules here are exact, never "at most": one extra all-reduce is a second
layer's worth of traffic, and one on MPI_COMM_WORLD is a bug that only a
run on a sub-communicator shows.
"""

import numpy as np

import nn
from spec import amount, disagreement, hinted

# World sizes: every layer at np 1 to 4, with dimensions np does not divide and dimensions
# smaller than np (ranks holding an empty block); np 8 where heads split that far
# (attention_tp, model_tp).
NPS_LAYER = (1, 2, 3, 4)

# Calls that communicate; local queries (MPI_Comm_rank, MPI_Type_size, ...) are free.
COMMUNICATING = ("p2p", "coll", "comm", "rma")


def block(n, np_, r):
    """(lo, count) of rank r's block of n: xt_block's rule."""
    return nn.block(n, np_, r)


def blocks(n, np_):
    """Every rank's (lo, count), in rank order."""
    return [nn.block(n, np_, r) for r in range(np_)]


def columns(a, np_, r):
    """Rank r's column block of a 2-D array, contiguous."""
    lo, count = nn.block(a.shape[1], np_, r)
    return np.ascontiguousarray(a[:, lo:lo + count])


def rows_of(a, np_, r):
    """Rank r's row block of an array."""
    lo, count = nn.block(a.shape[0], np_, r)
    return np.ascontiguousarray(a[lo:lo + count])


def matmul_tolerance(magnitude):
    """The bound for a float32 result computed as sums of products: 1e-5 times
    `magnitude`, the same expression evaluated on absolute values (|x| @ |W| + |b|). A
    sum of k float32 products errs by about k 2^-24 of that, 6e-7 k, so the bound holds
    for k up to about 16 terms of slack per digit lost, and no wrong block or missing
    term fits under it (they change results by the size of a term)."""
    return (1e-5 * np.asarray(magnitude, dtype=np.float64) + 1e-30).reshape(-1)


def shape_locator(shape_of):
    """A Test.locate for 2-D outputs: shape_of(case, name, rank) -> the shape of that
    rank's output (None: not a matrix), and WRONG reports say '(row i, column j)'."""
    def locate(case, name, index, rank):
        shape = shape_of(case, name, rank)
        if not shape or len(shape) != 2 or shape[1] == 0:
            return None
        i, j = divmod(index, shape[1])
        return f"row {i}, column {j} of {shape[0]} x {shape[1]}"
    return locate


# --------------------------------------------------------------------- rules

def no_communication(what, has_comm=True):
    """No call that communicates (point-to-point, collective, communicator, one-sided).
    For a function with no communicator argument (has_comm False), no MPI call at all
    that libxt sees (MPI_Reduce_local and MPI_Abort included)."""
    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            used = sorted(fn for fn, st in rec.calls.items()
                          if st.calls and (st.kind in COMMUNICATING or not has_comm))
            if used:
                out.append((r, f"rank {r} called {', '.join(used)}: {what} " +
                               ("makes no MPI call (local queries such as MPI_Comm_rank are "
                                "fine)" if has_comm else
                                "takes no communicator and makes no MPI call")))
        return out
    return hinted(rule, f"{what} needs nothing from the other ranks: every input it reads is "
                        f"already on this rank")


def describe(calls):
    """'MPI_Allreduce of 24 floats, MPI_Allreduce of 24 floats' (or 'none'); a function
    given as a tuple of alternatives reads 'MPI_Allgatherv (or MPI_Allgather)'; a call that
    sent nothing (a barrier, a broadcast's receiving end) is named alone."""
    def name(fn):
        return fn if isinstance(fn, str) else f"{fn[0]} (or {', '.join(fn[1:])})"
    return ", ".join(name(fn) + (f" of {amount(n, ' floats')}" if n else "") +
                     ("" if comm == "case" else f" on {comm_name(comm)}")
                     for fn, n, comm in calls) or "none"


def matches(got, want):
    """A logged collective (fn, floats, comm) against an expected one, whose fn may be a
    tuple of alternatives."""
    fn, n, comm = want
    return got[1:] == (n, comm) and got[0] in ((fn,) if isinstance(fn, str) else fn)


def comm_name(comm):
    return {"world": "MPI_COMM_WORLD", "self": "MPI_COMM_SELF",
            "other": "a communicator of its own"}.get(comm, "the case's communicator")


def constructor(rec, fn):
    """Whether fn is a communicator constructor (MPI_Comm_split: kind "comm", logged as a
    collective moving nothing): a layer's set-up, counted by a rule of its own."""
    st = rec.calls.get(fn)
    return st is not None and st.kind == "comm"


def collectives_exactly(expected, formula, ordered=True):
    """Each rank's communication is exactly the collectives expected(case, inputs, rank)
    gives, a list of (MPI function or a tuple of alternatives, floats sent), on the case's
    communicator, or (function, floats, "other") on a communicator the program made
    itself, and nothing else: no other collective, no point-to-point message. In that
    order, or in any order when ordered is False. Communicator constructors (MPI_Comm_split)
    are not counted here. `formula` says where the expected list comes from ("one
    all-reduce of rows*in: dx")."""
    def same(got, want):
        if ordered:
            return len(got) == len(want) and all(map(matches, got, want))
        left = list(got)
        for w in want:
            i = next((i for i, g in enumerate(left) if matches(g, w)), None)
            if i is None:
                return False
            left.pop(i)
        return not left

    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            want = [tuple(w) if len(w) == 3 else (w[0], w[1], "case")
                    for w in expected(case, inputs, r)]
            comms = {"case"} | {c for _, _, c in want}
            got = [(e.fn, e.bytes // 4, e.comm) for e in rec.events
                   if e.dir == "C" and not constructor(rec, e.fn)]
            p2p = sorted({e.fn for e in rec.events if e.dir in "SR"})
            if same(got, want) and not p2p:
                continue
            if p2p:
                out.append((r, f"rank {r} called {', '.join(p2p)}: this layer communicates "
                               f"only through {describe(want)} ({formula})"))
            elif any(c not in comms for _, _, c in got):
                fn, n, c = next(x for x in got if x[2] not in comms)
                out.append((r, f"rank {r} called {fn} on {comm_name(c)}: use the comm "
                               f"argument, the group the layer is split over (the grader runs "
                               f"each case on a sub-communicator)"))
            else:
                out.append((r, f"rank {r} made {describe(got)}; the layer needs exactly "
                               f"{describe(want)}{'' if ordered else ' (in any order)'} "
                               f"({formula})"))
        return out[:1]
    return rule


def identical_on_ranks(names, why):
    """A check: outputs `names` (those present) are bit for bit rank 0's on every rank."""
    def check(case, inputs, outs):
        found = disagreement(outs, names, [(r, 0) for r in range(1, case.np)])
        return [(found[1], f"{found[0]}: {why}")] if found else []
    return check


def collectives_at_most(allowed, max_calls, max_floats, formula):
    """Each rank makes at most max_calls(case, inputs, rank) collectives, all of them one of
    `allowed` (MPI function names) on the case's communicator, none sending or receiving
    more than max_floats(case, inputs, rank) floats, and no point-to-point message: a
    budget for a computation whose messages are a few numbers per row, where moving the
    data itself (a gather of every rank's block) is the mistake the rule exists to catch."""
    allowed = tuple(allowed)
    names = " or ".join(allowed)

    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            calls, cap = max_calls(case, inputs, r), max_floats(case, inputs, r)
            budget = f"at most {amount(calls, ' calls')} of {names} of at most " \
                     f"{amount(cap, ' floats')} each ({formula})"
            got = [(e.fn, e.bytes // 4, e.comm) for e in rec.events if e.dir == "C"]
            p2p = sorted({e.fn for e in rec.events if e.dir in "SR"})
            other = [g for g in got if g[0] not in allowed]
            if p2p:
                out.append((r, f"rank {r} called {', '.join(p2p)}: the only communication "
                               f"allowed is {budget}"))
            elif other:
                fn, sent, _ = other[0]
                st = rec.calls.get(fn)
                recv = st.bytes_recv // 4 // max(st.calls, 1) if st else 0
                out.append((r, f"rank {r} called {fn}, sending {amount(sent, ' floats')} and "
                               f"receiving {amount(recv, ' floats')}: the only communication "
                               f"allowed is {budget}"))
            elif any(c != "case" for _, _, c in got):
                fn, n, c = next(x for x in got if x[2] != "case")
                out.append((r, f"rank {r} called {fn} on {comm_name(c)}: use the comm "
                               f"argument (the grader runs each case on a sub-communicator)"))
            elif len(got) > calls or any(n > cap for _, n, _ in got):
                out.append((r, f"rank {r} made {describe(got)}; the function needs {budget}"))
        return out[:1]
    return rule
