"""A wrong value, explained: the comparison of an output with its expected array (how many
elements are wrong, the first, the largest error, the poison of a receive buffer read
early), the other outputs and rules of the failing case, and the relations a wrong output
may bear to the right one (a constant factor named by the case's parameters, the value the
buffer held before, another rank's expected value).
"""

import re

import numpy as np

import spec
from records import rank_arrays


def fmt_value(v):
    if isinstance(v, (float, np.floating)):
        return f"{float(v):.9g}"
    return str(v)


# The float that fills fresh memory of the emulated device (common/cuda_emu.cpp, FRESH).
EMU_FRESH = 0x7fdead00


# What fills a pending receive's buffer in strict mode, every 4 bytes (common/xt_internal.h,
# XTI_RECV_POISON): the message lands there only when its request completes.
RECV_POISON = 0x7fdeadee


POISON_READ = "this value is the poison of a receive buffer read before its wait"


def is_recv_poison(value):
    """Whether one element (a NumPy scalar of any dtype) holds the receive poison: its bytes,
    a float32 poison widened to float64, or 8 bytes of it."""
    raw = np.asarray(value).reshape(1)
    if raw.itemsize == 4:
        return int(raw.view("u4")[0]) == RECV_POISON
    if raw.itemsize == 8:
        if int(raw.view("u8")[0]) == (RECV_POISON << 32) | RECV_POISON:
            return True
        if raw.dtype == np.float64 and np.isnan(raw[0]):
            return int(raw.astype(np.float32).view("u4")[0]) == RECV_POISON
    return False


def compare(name, expected, got, tol, rank, locate=None):
    """None if got matches expected within tol, else a WRONG message. locate(name, index),
    if given, says where a flat index lies (a shard's owner), or returns None."""
    expected = np.asarray(expected)
    if got is None:
        return f"rank {rank} wrote no '{name}'"
    if got.shape != expected.shape:
        return (f"rank {rank} '{name}' has {spec.amount(got.size, ' elements')}, "
                f"expected {expected.size}")
    if expected.size == 0:
        return None
    e = expected.astype(np.float64) if spec.is_float(expected.dtype) or spec.is_float(got.dtype) \
        else expected.astype(np.int64)
    g = got.astype(e.dtype)
    if spec.is_float(e.dtype):
        # Where the two are equal (an equal infinity too) no difference is taken: no inf - inf.
        err = np.abs(np.subtract(g, e, out=np.zeros_like(e), where=g != e))
        if (err <= tol).all():  # the usual case, at once: a NaN anywhere fails this
            return None
        bad = ~(err <= tol)  # NaN counts as bad
        bad |= np.isnan(g) & ~np.isnan(e)
    else:
        err = np.abs(g - e)
        bad = g != e
    if not bad.any():
        return None
    idx = int(np.flatnonzero(bad)[0])
    nbad = int(bad.sum())
    maxerr = err[bad]
    maxerr = np.nanmax(maxerr) if np.isfinite(maxerr).any() else float("nan")
    where = f"[{idx}]" if expected.ndim <= 1 else str(np.unravel_index(idx, expected.shape))
    place = locate(name, idx) if locate else None
    if place:
        where += f" ({place})"
    msg = (f"rank {rank} '{name}'{where} expected {fmt_value(expected.flat[idx])} "
           f"got {fmt_value(got.flat[idx])} ({nbad} of {expected.size} wrong, "
           f"max error {fmt_value(maxerr)})")
    raw = np.ascontiguousarray(got).reshape(-1)[idx:idx + 1]
    if is_recv_poison(raw):
        msg += (f"; {POISON_READ}: a nonblocking receive's buffer holds the message only once "
                "MPI_Wait or MPI_Test completes it")
    elif spec.is_float(e.dtype) and np.isnan(g.flat[idx]) and not np.isnan(e.flat[idx]):
        # libxt's xt_free fills a block with 0xff bytes, a NaN as float or double; the
        # NaN of arithmetic (inf - inf, 0 x inf) has other bits.
        if raw.view(f"u{raw.itemsize}")[0] == (1 << 8 * raw.itemsize) - 1:
            msg += "; freed xt_alloc memory reads as NaN: is a buffer read after its xt_free?"
        elif raw.itemsize == 4 and raw.view("u4")[0] == EMU_FRESH:
            msg += ("; this NaN is the emulated device's fresh memory: a cudaMalloc or "
                    "cudaMallocHost block read before anything wrote it (a pinned slot sent "
                    "before its cudaMemcpyAsync had run?)")
        else:
            msg += ("; a NaN from arithmetic: 0/0 (a mean over nothing?), or inf - inf or "
                    "0 x inf, often after an exp or a square that overflowed")
    return msg


WRONG_COUNT = re.compile(r"^rank \d+ '[^']*'(\[[^\]]*\]|\([^)]*\))?.*?\((\d+) of (\d+) wrong")


def other_findings(wrong, expected):
    """Under the first wrong output: the other wrong outputs of the case (rank, name, how
    many elements, the first index), and the outputs that were right, so that fixing one
    bug of two shows as progress."""
    lines = []
    rest = []
    for r, name, msg, _, _ in wrong[1:]:
        m = WRONG_COUNT.match(msg)
        rest.append(f"rank {r} '{name}' ({m[2]} of {m[3]} elements"
                    f"{', first ' + m[1] if m[1] else ''})" if m else
                    f"rank {r} '{name}' ({msg.split(': ', 1)[-1][:60]})")
    if rest:
        shown = rest[:6] + ([f"{len(rest) - 6} more"] if len(rest) > 6 else [])
        lines.append(f"also wrong: {'; '.join(shown)}")
    bad = {name for _, name, *_ in wrong}
    right = sorted({n for per_rank in expected for n in per_rank} - bad)
    if right:
        lines.append("right on every rank: " + (", ".join(repr(n) for n in right)
                                                if len(right) <= 6 else
                                                f"the {len(right)} other outputs"))
    return lines


def broken_rules(test, case, inputs, group):
    """The first message of each rule of the test that the case also breaks, its notes of
    kind RULE first: what a wrong value would otherwise hide."""
    out = [f"rank {r} {text}" for r, rec in enumerate(group) for kind, text in rec.notes
           if kind == "RULE"][:1]
    for rule in test.rules:
        try:
            broken = rule(case, inputs, group)
        except Exception:  # a rule may assume right values; it is a remark here
            continue
        if broken:
            out.append(broken[0][1].split("\n")[0])
        if len(out) >= 3:
            break
    return out


def case_numbers(case):
    """{name: value} of the case's numeric parameters, np included."""
    out = {"np": case.np}
    for k, v in case.params.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "fn":
            out[k] = v
        elif isinstance(v, str) and re.fullmatch(r"-?\d+(\.\d+)?", v):
            out[k] = float(v)
    return out


def named_constant(c, case):
    """(c as the case's number it equals, ' (2 = M)') when c is one of the case's numbers
    (or 1/c is: ' (1/2 = 1/np)'), else (c, ''). A ratio of float32 gradients is that number
    only to rounding, so the number itself is what is shown."""
    if not np.isfinite(c) or c == 0:
        return c, ""
    for value, form in ((c, "{}"), (1 / c, "1/{}")):
        found = [(k, v) for k, v in case_numbers(case).items()
                 if v not in (0, 1) and abs(value - v) <= 1e-4 * abs(v)]
        if found:
            v = float(found[0][1])
            shown = f"{v:g}" if form == "{}" else f"1/{v:g}"
            return (v if form == "{}" else 1 / v,
                    f" ({shown} = {' = '.join(form.format(k) for k, _ in found)})")
    return c, ""


def relation(case, name, exp, got, rank, expected, inputs):
    """A line naming what the wrong output equals, where one simple relation holds on every
    element: a constant times the expected value, the expected value plus or minus what the
    buffer held before the call, or another rank's expected value. [] otherwise."""
    e = np.asarray(exp, np.float64).reshape(-1)
    try:
        g = np.asarray(got, np.float64).reshape(-1)
    except (TypeError, ValueError):
        return []
    if g.shape != e.shape or e.size == 0 or not np.isfinite(g).all() or not np.isfinite(e).all():
        return []
    scale = max(float(np.abs(e).max()), 1e-30)

    def close(a, b):
        return np.allclose(a, b, rtol=1e-4, atol=1e-6 * scale)

    # The constant is read where the expected value is large; it must then hold on every
    # element to float32's rounding of the largest, since a small element computed by a sum
    # that cancels carries an error far above its own size.
    big = np.abs(e) > 1e-3 * scale
    if big.sum() >= 2:
        c = float(np.median(g[big] / e[big]))
        if abs(c - 1) > 1e-3 and np.allclose(g, c * e, rtol=1e-4,
                                             atol=1e-5 * scale * max(abs(c), 1)):
            c, named = named_constant(c, case)
            return [f"got = {c:.6g} x expected on every element of '{name}'"
                    f"{named}: a scale applied twice, or not at all?"]
    before = inputs.get(name)
    if isinstance(before, list):
        before = before[rank] if rank < len(before) else None
    if before is not None and np.asarray(before).size == e.size:
        b = np.asarray(before, np.float64).reshape(-1)
        if np.abs(b).max() > 1e-6 * scale and close(g - e, b):
            return [f"got = expected + the value '{name}' held before the call, on every "
                    f"element: accumulated (+=) where the contract overwrites, or not zeroed "
                    f"first"]
        if np.abs(b).max() > 1e-6 * scale and close(e - g, b):
            return [f"got = expected - the value '{name}' held before the call, on every "
                    f"element: overwritten (=) where the contract accumulates (+=)"]
    for other, per_rank in enumerate(expected):
        o = per_rank.get(name)
        if other != rank and o is not None and np.asarray(o).size == e.size and \
                not close(np.asarray(o, np.float64).reshape(-1), e) and \
                close(g, np.asarray(o, np.float64).reshape(-1)):
            return [f"got = rank {other}'s expected '{name}', on every element: a block from "
                    f"the wrong rank, or ranks numbered the wrong way round?"]
    return []


def world_hint(group):
    used = sorted({e.fn for rec in group for e in rec.events if e.comm == "world"})
    if used:
        return (f"cause: {', '.join(used)} went over MPI_COMM_WORLD; the function must use "
                f"its comm argument (the grader runs it on sub-communicators)")
    return ""


def agreeing_ranks_hint(case, name, expected, cdir, g):
    """When every rank should hold the same `name` and every rank does hold the same
    wrong values, bit for bit: the communication that makes them agree works, and the
    bug is in the arithmetic around it. "" otherwise."""
    if case.np < 2 or case.test.gathered_outputs or any(name not in e for e in expected):
        return ""
    if any(not np.array_equal(np.asarray(e[name]), np.asarray(expected[0][name]))
           for e in expected):
        return ""  # not a replicated output
    got = [arrays.get(name) for arrays in rank_arrays(cdir, g, case.np)]
    if any(a is None for a in got):
        return ""
    if any(a.shape != got[0].shape or spec.bit_differences(a, got[0]) for a in got[1:]):
        return ""
    return (f"cause: all {case.np} ranks hold the same wrong '{name}', bit for bit: they agree "
            f"with each other but not with the single-process definition, so whatever makes "
            f"them agree works and the arithmetic around it does not: look for a missing or "
            f"extra scale (the mean over ranks is SUM then divide by np; a 1/micro; the loss "
            f"scale), a shard boundary, or an input every rank misreads alike")
