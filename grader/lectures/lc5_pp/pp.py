"""What lecture 5's tests share: a case's model and batch, the reference
training step, and the rules read from the stage log and the messages.

A case is a model of L MLP layers (widths random, ReLU or GELU, a mean
squared error loss over the whole batch), a batch of M micro-batches of
mb_rows rows, and a layout: which layers each rank's chunks hold. The
reference is one process's step on the whole batch (nn.Mlp, float64): the
loss, and the gradient of every parameter, of which each rank must hold its
stages' slice.

Tolerance: each gradient tensor and the loss within 1e-5 max(1, its largest
|value| over every rank) (spec.OfScale): a float32 chain of a few products
and sums per layer errs by some 1e-7 of the tensor's scale, and a gradient
scaled by 1/np instead of 1/M, or one micro-batch missing, moves it by a
whole term. Measured (grade.py --margins): see each module.
"""

import numpy as np

import nn
from lectures.lc5_pp.events import StageCall
from spec import OfScale, amount, point_to_point_only
from lectures.lc5_pp import schedule

NPS_PIPE = (1, 2, 3, 4)
TOLERANCE = OfScale(1e-5, 1.0)


# ------------------------------------------------------------------ cases

def model_case(n, nlayers, M, mb_rows, rng, **extra):
    """A case: np n, a model of nlayers layers of random widths, M micro-batches."""
    widths = [int(w) for w in rng.integers(2, 9, size=nlayers + 1)]
    act = "relu" if rng.random() < 0.5 else "gelu"
    return {"np": n, "dims": ",".join(map(str, widths)), "act": act, "loss": "mse", "M": M,
            "mb_rows": mb_rows, **extra}


def dims_of(case):
    return [int(d) for d in case["dims"].split(",")]


def nlayers(case):
    return len(dims_of(case)) - 1


def chunks(case):
    return int(case.get("v", 1))


def nstages(case):
    return case.np * chunks(case)


def stage_of(case, chunk, rank):
    """The stage chunk `chunk` of `rank` is: rank r holds stages r, r+np, ... (one chunk
    each: every schedule but DualPipe)."""
    return chunk * case.np + rank


def stage_layers(case, s):
    """(first, count) of stage s: the L layers cut into nstages consecutive stages, the
    first L % nstages one layer more (xt_block's rule)."""
    return nn.block(nlayers(case), nstages(case), s)


def layers_of(case, rank):
    """[(first, count)] of rank's chunks, in chunk order."""
    return [stage_layers(case, stage_of(case, k, rank)) for k in range(chunks(case))]


def holds(case, rank, s):
    return any(stage_of(case, k, rank) == s for k in range(chunks(case)))


def label(case):
    p = case.params
    v = f" v={p['v']}" if "v" in p else ""
    return (f"np={case.np} M={p['M']} mb_rows={p['mb_rows']} layers={nlayers(case)}{v} "
            f"dims={p['dims']} {p['act']}")


def facets(case):
    """Whether M equals np (a loss scaled by 1/np instead of 1/M is right then), and
    whether the stages are unequal."""
    M = case["M"]
    return {"M vs np": "below" if M < case.np else "equal" if M == case.np else "above",
            "uneven stages": int(nlayers(case) % nstages(case) != 0)}


# ------------------------------------------------------- inputs, reference

def model_of(case):
    return nn.Mlp(case["dims"], case["act"], case["loss"])


def pipeline_inputs(case, rng):
    """The model's parameters and one batch. A draw in which some layer's weight gradient
    is zero everywhere (a ReLU layer dead on every row, likely with one row and a width of
    2) is drawn again: there a schedule that never backpropagates into the layers below
    would match the reference by luck."""
    for _ in range(64):
        inputs = draw_pipeline_inputs(case, rng)
        _, grads = whole_step(case, inputs)
        off = layer_offsets(case)
        d = dims_of(case)
        if all(np.any(grads[o:o + a * b] != 0) for o, a, b in zip(off, d, d[1:])):
            break
    return inputs


def draw_pipeline_inputs(case, rng):
    m = model_of(case)
    f = np.float32
    params = np.zeros(m.nparams, dtype=f)
    for name, off, shape in m.tensors:
        scale = 1.0 / np.sqrt(shape[0]) if name.startswith("W") else 0.5
        params[off:off + int(np.prod(shape))] = (rng.normal(size=shape) * scale).reshape(-1)
    rows = case["M"] * case["mb_rows"]
    d = dims_of(case)
    x = rng.normal(size=(rows, d[0])).astype(f).reshape(-1)
    target = rng.normal(size=(rows, d[-1])).astype(f).reshape(-1)
    last = nstages(case) - 1
    empty = np.zeros(0, dtype=f)
    return {"params": params,
            "layers": [np.array(layers_of(case, r), dtype=np.int32).reshape(-1)
                       for r in range(case.np)],
            "x": [x if holds(case, r, 0) else empty for r in range(case.np)],
            "target": [target if holds(case, r, last) else empty for r in range(case.np)]}


def whole_step(case, inputs):
    """The loss and the whole model's gradient (flat), float64: one process, the whole
    batch, the mean loss."""
    d = dims_of(case)
    rows = case["M"] * case["mb_rows"]
    x = inputs["x"][next(r for r in range(case.np) if holds(case, r, 0))].reshape(rows, d[0])
    t = inputs["target"][next(r for r in range(case.np)
                              if holds(case, r, nstages(case) - 1))].reshape(rows, d[-1])
    return model_of(case).loss_and_grads(inputs["params"], x.astype(np.float64),
                                         t.astype(np.float64))


def layer_offsets(case):
    d = dims_of(case)
    off = [0]
    for a, b in zip(d, d[1:]):
        off.append(off[-1] + a * b + b)
    return off


def stage_slice(case, grads, first, count):
    off = layer_offsets(case)
    return grads[off[first]:off[first + count]]


def pipeline_reference(case, inputs):
    """Each rank: its chunks' gradients one after another, M forwards per chunk, and on the
    rank holding the last stage the mean loss."""
    loss, grads = whole_step(case, inputs)
    out = []
    last = nstages(case) - 1
    for r in range(case.np):
        mine = {"grads": np.concatenate([stage_slice(case, grads, f, c)
                                         for f, c in layers_of(case, r)]),
                "forwards": np.full(chunks(case), case["M"], dtype=np.int32)}
        if holds(case, r, last):
            mine["loss"] = np.array([loss])
        out.append(mine)
    return out


def pipeline_tolerance(case, inputs, name, rank):
    return 0 if name == "forwards" else TOLERANCE


def grads_locator(case, name, index, rank):
    """'layer 3's W, row 1, column 0' for an index into a rank's gradients."""
    if name != "grads":
        return None
    d = dims_of(case)
    off = layer_offsets(case)
    at = index
    for first, count in layers_of(case, rank):
        for layer in range(first, first + count):
            n = off[layer + 1] - off[layer]
            if at < n:
                a, b = d[layer], d[layer + 1]
                if at < a * b:
                    return f"layer {layer}'s W, row {at // b}, column {at % b}"
                return f"layer {layer}'s b[{at - a * b}]"
            at -= n
    return None


# ------------------------------------------------------------------ rules

def stage_order(definition, name, explain):
    """Each rank's logged stage calls are exactly definition(case, rank) (schedule Ops);
    the report draws both timelines."""
    def rule(case, inputs, records):
        for r, rec in enumerate(records):
            got = schedule.ops_of(rec.stages)
            want = definition(case, r)
            if got == want:
                continue
            i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b),
                     min(len(got), len(want)))
            what = (f"call {i + 1} is {got[i]}, {name} has {want[i]}" if i < min(len(got), len(want))
                    else f"it made {len(got)} calls, {name} has {len(want)}")
            text = (f"rank {r}'s stage calls are not {name}'s: {what} ({explain(case, r)}). "
                    f"Rank {r} ran {' '.join(map(str, got[:i + 3]))}"
                    f"{' ...' if len(got) > i + 3 else ''}")
            return [(r, text + "\n" + pictures(case, records, definition, name))]
        return []
    rule.__doc__ = f"the stage calls are {name}'s"
    return rule


def pictures(case, records, definition, name):
    """The logged calls and the schedule's, replayed, as text lines starting with '|'."""
    lines = []
    logs = {r: rec.stages for r, rec in enumerate(records)}
    rp = schedule.replay(logs, nlayers(case))
    if not rp.stuck:
        lines += schedule.text_timeline(rp, range(case.np), "what ran:").splitlines()
    want = {r: [_call(case, r, op) for op in definition(case, r)] for r in range(case.np)}
    lines += schedule.text_timeline(schedule.replay(want, nlayers(case)), range(case.np),
                                    f"{name}:").splitlines()
    return "\n".join("| " + ln for ln in lines)


def _call(case, rank, op):
    first, count = layers_of(case, rank)[op.chunk]
    return StageCall(op.op, op.mb, op.chunk, 0.0, 0.0, first, count)


def runnable(case, inputs, records):
    """The logged order can run: every call after its inputs (the unit-time replay)."""
    logs = {r: rec.stages for r, rec in enumerate(records)}
    rp = schedule.replay(logs, nlayers(case))
    if rp.stuck:
        r, op, why = rp.stuck[0]
        return [(r, f"the logged order cannot run: rank {r}'s {op} waits for {why}, which no "
                    f"rank does before it (each rank runs its calls in the order it made them)")]
    return []


def in_flight_at_most(bound, formula):
    def rule(case, inputs, records):
        for r, rec in enumerate(records):
            got, cap = schedule.in_flight(rec.stages), bound(case, r)
            if got > cap:
                return [(r, f"rank {r} had {got} micro-batches in flight (forwarded, not yet "
                            f"backward), the schedule keeps at most {cap} ({formula})")]
        return []
    return rule


def neighbour_messages(case, rank, per_mb=1):
    """What rank sends and receives when each stage passes each micro-batch's activations
    to the next stage's rank and its gradient back: {(dir, peer, bytes): count}."""
    want = {}
    d = dims_of(case)
    rows = case["mb_rows"]
    for k in range(chunks(case)):
        s = stage_of(case, k, rank)
        first, count = stage_layers(case, s)
        if s > 0:
            prev = (s - 1) % case.np
            nbytes = 4 * rows * d[first]
            for key in (("R", prev, nbytes), ("S", prev, nbytes)):
                want[key] = want.get(key, 0) + case["M"] * per_mb
        if s < nstages(case) - 1:
            nxt = (s + 1) % case.np
            nbytes = 4 * rows * d[first + count]
            for key in (("S", nxt, nbytes), ("R", nxt, nbytes)):
                want[key] = want.get(key, 0) + case["M"] * per_mb
    return want


def messages_of(rec):
    got = {}
    for e in rec.events:
        if e.dir in ("S", "R"):
            key = (e.dir, e.peer, e.bytes)
            got[key] = got.get(key, 0) + 1
    return got


def describe(key, n):
    d, peer, nbytes = key
    return (f"{amount(n, ' messages')} of {nbytes} B {'to' if d == 'S' else 'from'} "
            f"rank {peer}")


def messages_exactly(expected, why):
    """Every point-to-point message, by direction, peer and size, exactly expected(case,
    rank); nothing else: no collective, no other communicator."""
    def rule(case, inputs, records):
        broken = point_to_point_only(case, inputs, records)
        if broken:
            return broken
        for r, rec in enumerate(records):
            other = [e for e in rec.events if e.dir in ("S", "R") and e.comm != "case"]
            if other:
                e = other[0]
                return [(r, f"rank {r} made {e.fn} on {'MPI_COMM_WORLD' if e.comm == 'world' else 'another communicator'}: "
                            f"every message of the step goes on comm")]
            got, want = messages_of(rec), expected(case, r)
            for key in sorted(set(got) | set(want)):
                if got.get(key, 0) != want.get(key, 0):
                    verb = "sent" if key[0] == "S" else "received"
                    return [(r, f"rank {r} {verb} {describe(key, got.get(key, 0))}, expected "
                                f"{want.get(key, 0)} ({why})")]
        return []
    return rule


# ------------------------------------------------------------- the bubble

def replayed(case, records):
    """The logged calls of every rank, replayed in unit time (schedule.replay)."""
    return schedule.replay({r: rec.stages for r, rec in enumerate(records)}, nlayers(case))


def bubble_is(kind, name):
    """When M >= np and the logged order can run: every rank idles exactly the schedule's
    formula (schedule.bubble_formula) in the unit-time replay. Each rank that does not is
    named with both numbers."""
    def rule(case, inputs, records):
        if case["M"] < case.np:
            return []
        rp = replayed(case, records)
        if rp.stuck:
            return []
        want, formula = schedule.bubble_formula(kind, case.np, case["M"], chunks(case))
        return [(r, f"replayed in unit time (F = I = W = 1, B = 2), rank {r} idles "
                    f"{rp.idle(r)} of {rp.makespan} units; {name} idles {formula} = {want} at "
                    f"np={case.np}: this order idles {amount(abs(rp.idle(r) - want), ' units')} "
                    f"{'more' if rp.idle(r) > want else 'less'}")
                for r in range(case.np) if rp.idle(r) != want]
    rule.__doc__ = f"each rank idles {name}'s bubble (M >= np)"
    return rule


def stage_order_costed(definition, name, explain, kind):
    """stage_order, whose report also says what the wrong order costs: the replayed idle time
    against the schedule's formula (bubble_is, for the rank named, else the first whose idle
    differs), when M >= np and they differ. An order that is exactly the definition idles
    exactly the formula (selftest's schedule replay), so the bubble is checked here, where it
    explains the order's failure, and not as a rule of its own that could never fail first."""
    order = stage_order(definition, name, explain)
    bubble = bubble_is(kind, name)

    def rule(case, inputs, records):
        broken = order(case, inputs, records)
        if not broken:
            return []
        cost = dict(bubble(case, inputs, records))
        if not cost:
            return broken
        r, text = broken[0]
        head, _, pics = text.partition("\n")
        return [(r, f"{head}\n{cost.get(r, next(iter(cost.values())))}\n{pics}")]
    rule.__doc__ = order.__doc__ + ", and what a wrong one costs"
    return rule


def sent_at_once(ops, direction, what):
    """On every rank that has a neighbour that way (direction +1: the next stage, -1: the
    previous), the k-th send to it comes after the k-th call whose op is in `ops` and
    before the rank's next stage call: each result is passed on at once, not held back
    behind other work (the events each stage call logs it came after put the two lists in
    one order). One chunk per rank."""
    def rule(case, inputs, records):
        for r, rec in enumerate(records):
            peer = r + direction
            if not 0 <= peer < case.np:
                continue
            sends = [i for i, e in enumerate(rec.events) if e.dir == "S" and e.peer == peer]
            calls = rec.stages
            producing = [k for k, c in enumerate(calls) if c.op in ops]
            for n, k in enumerate(producing):
                if n >= len(sends):
                    break
                lo = calls[k].events_before
                hi = calls[k + 1].events_before if k + 1 < len(calls) else len(rec.events)
                if not lo <= sends[n] < hi:
                    if sends[n] < lo:
                        where = "before the call ran"
                    else:
                        extra = sum(1 for c in calls[k + 1:] if c.events_before <= sends[n])
                        where = (f"only after {extra} more stage call{'s' if extra > 1 else ''} "
                                 f"({calls[k + 1].op}{calls[k + 1].mb} first)")
                    return [(r, f"rank {r} sent {what} of its {calls[k].op}{calls[k].mb} to rank "
                                f"{peer} {where}: it goes on the moment it exists, so that rank "
                                f"{peer} can start on it")]
        return []
    return rule


def cross_rank_messages(case, rank, per_mb=1):
    """neighbour_messages less the boundaries between two stages of the same rank (np = 1
    with several chunks): there the output passes to the next stage by a copy, no
    message."""
    return {key: n for key, n in neighbour_messages(case, rank, per_mb).items()
            if key[1] != rank}


# ---------------------------------------------------------------- DualPipe

def dual_stage_of(case, chunk, rank):
    """DualPipe's layout: rank r's chunk 0 is stage r, its chunk 1 stage np-1-r."""
    return schedule.dualpipe_stage(case.np, chunk, rank)


def dual_layers_of(case, rank):
    """[(first, count)] of rank's two chunks (stages r and np-1-r of np)."""
    return [stage_layers(case, dual_stage_of(case, k, rank)) for k in (0, 1)]


def dual_inputs(case, rng):
    """The model and batch of pipeline_inputs; each rank's layers are its two chunks' stages;
    x and target, the whole batch, on ranks 0 and np-1 (micro-batches 0..M/2-1 enter at
    rank 0 and end at rank np-1, M/2..M-1 the other way), empty elsewhere."""
    inputs = pipeline_inputs(case, rng)
    whole = {name: next(a for a in inputs[name] if a.size) for name in ("x", "target")}
    ends = (0, case.np - 1)
    empty = np.zeros(0, dtype=np.float32)
    inputs["layers"] = [np.array(dual_layers_of(case, r), dtype=np.int32).reshape(-1)
                        for r in range(case.np)]
    for name in ("x", "target"):
        inputs[name] = [whole[name] if r in ends else empty for r in range(case.np)]
    return inputs


def dual_reference(case, inputs):
    """Each rank: chunk 0's slice of the whole model's gradient, then chunk 1's (both copies
    of a stage hold the whole batch's gradient), M/2 forwards per chunk, and on ranks 0 and
    np-1 the whole batch's mean loss."""
    d = dims_of(case)
    rows = case["M"] * case["mb_rows"]
    x = inputs["x"][0].reshape(rows, d[0]).astype(np.float64)
    t = inputs["target"][case.np - 1].reshape(rows, d[-1]).astype(np.float64)
    loss, grads = model_of(case).loss_and_grads(inputs["params"], x, t)
    out = []
    for r in range(case.np):
        mine = {"grads": np.concatenate([stage_slice(case, grads, f, c)
                                         for f, c in dual_layers_of(case, r)]),
                "forwards": np.full(2, case["M"] // 2, dtype=np.int32)}
        if r in (0, case.np - 1):
            mine["loss"] = np.array([loss])
        out.append(mine)
    return out


def dual_locator(case, name, index, rank):
    """grads_locator on DualPipe's layout: 'chunk 1 (stage 2): layer 4's W, row 1, ...'."""
    if name != "grads":
        return None
    d = dims_of(case)
    off = layer_offsets(case)
    at = index
    for k, (first, count) in enumerate(dual_layers_of(case, rank)):
        n = off[first + count] - off[first]
        if at < n:
            layer = next(lay for lay in range(first, first + count)
                         if at < off[lay + 1] - off[first])
            at -= off[layer] - off[first]
            a, b = d[layer], d[layer + 1]
            where = (f"layer {layer}'s W, row {at // b}, column {at % b}" if at < a * b
                     else f"layer {layer}'s b[{at - a * b}]")
            return f"chunk {k} (stage {dual_stage_of(case, k, rank)}): {where}"
        at -= n
    return None


def dual_messages(case, rank):
    """What rank sends and receives in DualPipe's step, {(dir, peer, bytes): count}: per
    chunk, M/2 activations to the next stage of its direction (rank+1 for chunk 0, rank-1
    for chunk 1) and M/2 gradients back, as neighbour_messages; then one message each way
    per chunk with rank np-1-r, the partner holding the other copy of its stage (the stage's
    gradients); and between ranks 0 and np-1 one float each way (a half's loss)."""
    want = {}

    def add(key, n):
        want[key] = want.get(key, 0) + n

    d = dims_of(case)
    rows, half, p = case["mb_rows"], case["M"] // 2, case.np
    off = layer_offsets(case)
    partner = p - 1 - rank
    for k in (0, 1):
        s = dual_stage_of(case, k, rank)
        first, count = stage_layers(case, s)
        up, down = (rank - 1, rank + 1) if k == 0 else (rank + 1, rank - 1)
        if s > 0:
            for key in (("R", up, 4 * rows * d[first]), ("S", up, 4 * rows * d[first])):
                add(key, half)
        if s < p - 1:
            nbytes = 4 * rows * d[first + count]
            for key in (("S", down, nbytes), ("R", down, nbytes)):
                add(key, half)
        nbytes = 4 * (off[first + count] - off[first])
        add(("S", partner, nbytes), 1)
        add(("R", partner, nbytes), 1)
    if rank in (0, p - 1):
        add(("S", p - 1 - rank, 4), 1)
        add(("R", p - 1 - rank, 4), 1)
    return want


def dual_halves(case, inputs, records):
    """Each micro-batch is on its half's chunks: 0..M/2-1 on chunks 0, M/2..M-1 on chunks 1
    (a micro-batch goes through one copy of each stage, and the replay knows the copies
    apart by that)."""
    M = case["M"]
    for r, rec in enumerate(records):
        for c in rec.stages:
            if not 0 <= c.mb < M or c.chunk != int(c.mb >= M // 2):
                want = ("no chunk: the micro-batches are 0..M-1" if not 0 <= c.mb < M else
                        f"chunk {int(c.mb >= M // 2)}")
                return [(r, f"rank {r} ran {c.op}{c.mb} on chunk "
                            f"{c.chunk} (stage {dual_stage_of(case, c.chunk, r)}): micro-batch "
                            f"{c.mb} belongs on {want} (micro-batches 0..{M // 2 - 1} enter at "
                            f"rank 0 and go down through the chunks 0, {M // 2}..{M - 1} enter "
                            f"at rank {case.np - 1} and go up through the chunks 1)")]
    return []


def dual_pictures(case, records):
    """What ran and DualPipe's definition, replayed, as '|' lines."""
    p, L = case.np, nlayers(case)
    lines = []
    rp = schedule.replay({r: rec.stages for r, rec in enumerate(records)}, L)
    if not rp.stuck:
        lines += schedule.text_timeline(rp, range(p), f"what ran (idle "
                                        f"{', '.join(str(rp.idle(r)) for r in range(p))}):"
                                        ).splitlines()
    layers = {s: stage_layers(case, s) for s in range(p)}
    want = schedule.replay(schedule.dualpipe_calls(p, case["M"], layers), L)
    lines += schedule.text_timeline(want, range(p), f"DualPipe (idle {want.idle(0)}):"
                                    ).splitlines()
    return "\n".join("| " + ln for ln in lines)


def dual_idle_at_most(case, inputs, records):
    """Replayed in unit time (F = 1, B = 2, I = W = 1), every rank idles at most np/2-1
    units (schedule.dualpipe_idle: no schedule of this layout can idle less)."""
    rp = schedule.replay({r: rec.stages for r, rec in enumerate(records)}, nlayers(case))
    if rp.stuck:
        return []  # runnable says why
    bound, why = schedule.dualpipe_idle(case.np)
    for r in range(case.np):
        if rp.idle(r) > bound:
            return [(r, f"rank {r} idles {rp.idle(r)} units of the step's {rp.makespan} in "
                        f"the unit-time replay (F=1, B=2, I=W=1); DualPipe idles {bound} "
                        f"({why}), the least any schedule of this layout can\n"
                        + dual_pictures(case, records))]
    return []
