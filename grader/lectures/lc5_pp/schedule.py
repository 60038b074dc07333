"""Pipeline schedules: what each rank's stage calls should be, a unit-time
replay of what they were, the bubble, and the timeline drawn from it.

A schedule is, per rank, a list of Ops (op, micro-batch, chunk), op being F
(forward), B (the whole backward), I (the backward's input part) or W (its
weight part). The replay knows nothing of any schedule: it runs each rank's
calls in the order logged, each as early as its inputs allow, in units of
time (F = I = W = 1, B = 2), where a call's inputs are found from the layers
its stage holds (every call is logged with its stage's first layer and
number of layers):

    F of micro-batch m on layers f..      after F of m on the layers ending at f-1
    B or I of m on layers ..g             after B or I of m on the layers from g+1
                                          (on the last stage: after its own F)
    W of m                                after I of m on the same stage

So the same replay judges GPipe, 1F1B, interleaved stages, zero bubble and
DualPipe's two directions, and a logged order that could never run (a
backward before the next stage's, a W before its I) is named as such.
"""

import collections
import dataclasses
import html
import textwrap

from lectures.lc5_pp.events import StageCall
from records import read_record


UNITS = {"F": 1, "B": 2, "I": 1, "W": 1, "N": 1}


@dataclasses.dataclass(frozen=True)
class Op:
    op: str
    mb: int
    chunk: int = 0

    def __str__(self):
        return f"{self.op}{self.mb}" + (f"/{self.chunk}" if self.chunk else "")


def ops_of(calls):
    """A rank's logged StageCalls as Ops."""
    return [Op(c.op, c.mb, c.chunk) for c in calls]


# ------------------------------------------------------------- definitions

def gpipe(p, m, r):
    """All forwards, then all backwards, in micro-batch order."""
    return [Op("F", i) for i in range(m)] + [Op("B", i) for i in range(m)]


def warmup_1f1b(p, m, r):
    return min(p - r - 1, m)


def one_f_one_b(p, m, r):
    """min(p-r-1, M) forwards; then one forward and one backward at a time; then the
    backwards left."""
    w = warmup_1f1b(p, m, r)
    out = [Op("F", i) for i in range(w)]
    for i in range(m - w):
        out += [Op("F", w + i), Op("B", i)]
    return out + [Op("B", i) for i in range(m - w, m)]


def interleaved_chunk(k, p, v, forward):
    c = (k % (p * v)) // p
    return c if forward else v - 1 - c


def interleaved_mb(k, p, v):
    return (k // (p * v)) * p + k % p


def interleaved_warmup(p, m, v, r):
    total = m * v
    if m == p:
        return total
    return min((p - r - 1) * 2 + (v - 1) * p, total)


def interleaved(p, m, v, r):
    """Megatron's interleaved 1F1B: rank r holds chunks c = 0..v-1 (stage c p + r);
    virtual micro-batch k runs micro-batch (k div pv) p + k mod p on chunk
    (k mod pv) div p forward, and on chunk v-1 minus that backward; the warm-up is
    2 (p-r-1) + (v-1) p forwards (all of them when M = p), M a multiple of p."""
    total = m * v
    w = interleaved_warmup(p, m, v, r)

    def fwd(k):
        return Op("F", interleaved_mb(k, p, v), interleaved_chunk(k, p, v, True))

    def bwd(k):
        return Op("B", interleaved_mb(k, p, v), interleaved_chunk(k, p, v, False))

    out = [fwd(k) for k in range(w)]
    for k in range(total - w):
        out += [fwd(w + k), bwd(k)]
    return out + [bwd(k) for k in range(total - w, total)]


def zb_h1(p, m, r):
    """ZB-H1: 1F1B's warm-up and order of forwards and input parts (I), each W
    run after its I; rank r holds back its first r W's, and runs one W after
    each later I (oldest first); the W's still held back end the step."""
    w = warmup_1f1b(p, m, r)
    out = [Op("F", i) for i in range(w)]
    pending = collections.deque()
    for i in range(m - w):
        out += [Op("F", w + i), Op("I", i)]
        pending.append(i)
        if i >= r:
            out.append(Op("W", pending.popleft()))
    for i in range(m - w, m):
        out.append(Op("I", i))
        pending.append(i)
        out.append(Op("W", pending.popleft()))
    return out + [Op("W", i) for i in pending]


# ------------------------------------------------------------------ replay

@dataclasses.dataclass
class Box:
    """One call placed in unit time."""
    rank: int
    op: str
    mb: int
    chunk: int
    start: int
    end: int
    first: int
    count: int


@dataclasses.dataclass
class Replay:
    boxes: list  # Box, every rank's, in each rank's order
    makespan: int
    busy: dict  # rank -> units of work
    stuck: list  # (rank, Op, what it waits for) when the order cannot run

    def idle(self, rank):
        return self.makespan - self.busy.get(rank, 0)


def replay(stages_by_rank, nlayers, scale=1):
    """Places every rank's logged calls (harness StageCalls, in order) in unit
    time. A call waits for its rank's previous call and for its inputs (module
    docstring). When some rank's next call waits for something no rank will
    ever do, stuck names each rank's waiting call. scale multiplies every duration (1/v:
    a chunk's call in units of a whole stage's, to compare interleaved schedules)."""
    queues = {r: list(calls) for r, calls in stages_by_rank.items()}
    pos = {r: 0 for r in queues}
    free = {r: 0 for r in queues}
    done = {}  # (op kind, mb, first layer) -> end
    boxes = []
    busy = collections.Counter()

    def needs(c):
        """The key of the call c waits for, or None."""
        if c.op == "F":
            return None if c.first == 0 else ("F", c.mb, "ends", c.first - 1)
        if c.op in ("B", "I"):
            if c.first + c.count >= nlayers:
                return ("F", c.mb, "starts", c.first)
            return ("BI", c.mb, "starts", c.first + c.count)
        if c.op == "W":
            return ("I", c.mb, "starts", c.first)
        return None

    def lookup(key):
        return done.get(key)

    progress = True
    while progress:
        progress = False
        for r in sorted(queues):
            while pos[r] < len(queues[r]):
                c = queues[r][pos[r]]
                key = needs(c)
                ready = 0 if key is None else lookup(key)
                if ready is None:
                    break
                start = max(free[r], ready)
                end = start + UNITS.get(c.op, 1) * scale
                free[r] = end
                busy[r] += end - start
                boxes.append(Box(r, c.op, c.mb, c.chunk, start, end, c.first, c.count))
                last = c.first + c.count - 1
                kinds = {"F": ("F",), "B": ("BI",), "I": ("BI", "I"), "W": ("W",), "N": ()}
                for kind in kinds.get(c.op, ()):
                    done[(kind, c.mb, "starts", c.first)] = end
                    done[(kind, c.mb, "ends", last)] = end
                pos[r] += 1
                progress = True
    stuck = []
    for r in sorted(queues):
        if pos[r] < len(queues[r]):
            c = queues[r][pos[r]]
            stuck.append((r, Op(c.op, c.mb, c.chunk), describe_need(needs(c), c)))
    return Replay(boxes, max(free.values(), default=0), dict(busy), stuck)


def describe_need(key, c):
    kind, mb, where, layer = key
    what = {"F": "the forward", "BI": "the backward", "I": "the input part"}[kind]
    if kind == "F" and c.op != "F":
        return f"its own forward of micro-batch {mb} (layers {c.first}..)"
    side = f"the stage ending at layer {layer}" if where == "ends" else \
        f"the stage starting at layer {layer}"
    return f"{what} of micro-batch {mb} on {side}"


# ------------------------------------------------------------------ bubble

def bubble_formula(kind, p, m, v=1):
    """Idle units per rank in the unit-time model, and the formula as text."""
    if kind in ("gpipe", "1f1b"):
        return 3 * (p - 1), "(p-1)(F+B) = 3(p-1)"
    if kind == "interleaved":
        return 3 * (p - 1), "(p-1)(F+B) = 3(p-1) units of a chunk (v times smaller than a stage's)"
    if kind == "zb_h1":
        return (p - 1), "(p-1)(F+B-2W) = p-1"
    raise ValueError(kind)


# ---------------------------------------------------------------- drawing

GLYPH = "0123456789abcdefghijklmnopqrstuvwxyz"


def glyph(mb):
    return GLYPH[mb] if 0 <= mb < len(GLYPH) else "+"


# One notation with the lecture's page: B a whole backward (two units), I its input part,
# W its weight part.
LETTER = {"F": "F", "B": "B", "I": "I", "W": "W", "N": "N"}


def text_timeline(rp, ranks, title="", columns=78):
    """The replay as text, one row per rank, '.' idle. Where it fits in
    `columns`, two characters per unit of time, each call its letter and
    micro-batch ('F3', a backward 'B3--'); otherwise one character per unit
    (F one column, B two: 'BB', W 'W') with the micro-batch under the call's
    first column. A second chunk's calls are in lower case; a backward split in two is
    drawn as its input part I and its weight part W."""
    cell = 2 if 6 + 2 * rp.makespan <= columns else 1
    lines = [title] if title else []
    lines.append("      " + "".join((str(t // 10 % 10) if t % 10 == 0 else " ").ljust(cell)
                                    for t in range(rp.makespan)).rstrip())
    for r in ranks:
        top = [" " * (cell - 1) + "."] * rp.makespan
        low = [" "] * rp.makespan
        for b in rp.boxes:
            if b.rank != r:
                continue
            letter = LETTER.get(b.op, "?")
            letter = letter.lower() if b.chunk % 2 else letter
            if cell == 2:
                text = (letter + glyph(b.mb)).ljust(2 * (b.end - b.start), "-")
                for t in range(b.start, b.end):
                    top[t] = text[2 * (t - b.start):2 * (t - b.start) + 2]
            else:
                for t in range(b.start, b.end):
                    top[t] = letter
                low[b.start] = glyph(b.mb)
        lines.append(f"  r{r:<2} " + "".join(top))
        if cell == 1:
            lines.append("      " + "".join(low).rstrip())
    return "\n".join(lines)


COLOURS = {("F", 0): "#4e79a7", ("F", 1): "#a0cbe8", ("B", 0): "#59a14f", ("B", 1): "#8cd17d",
           ("I", 0): "#499894", ("I", 1): "#86bcb6", ("W", 0): "#f28e2b", ("W", 1): "#ffbe7d",
           ("N", 0): "#bab0ac", ("N", 1): "#bab0ac"}


LEFT = 44


def svg_panel(rp, ranks, title, top, unit, row=28):
    """One timeline's SVG elements from y = top: its title, a row per rank, each call a
    box numbered with its micro-batch, and the time axis. Returns (elements, width, the y
    below it)."""
    out = [f'<text x="{LEFT}" y="{top + 14}" font-size="14">{html.escape(title)}</text>']
    top += 22
    for i, r in enumerate(ranks):
        y = top + i * row
        out.append(f'<text x="6" y="{y + row // 2 + 4}">r{r}</text>')
        out.append(f'<rect x="{LEFT}" y="{y + 2}" width="{rp.makespan * unit:.1f}" '
                   f'height="{row - 4}" fill="#f4f4f4"/>')
        for b in rp.boxes:
            if b.rank != r:
                continue
            x = LEFT + b.start * unit
            w = (b.end - b.start) * unit
            fill = COLOURS.get((b.op, b.chunk % 2), "#999999")
            out.append(f'<rect x="{x + 1:.1f}" y="{y + 3}" width="{max(w - 2, 0.5):.1f}" '
                       f'height="{row - 6}" fill="{fill}" stroke="#333" stroke-width="0.5"/>')
            if w >= 10:
                out.append(f'<text x="{x + w / 2:.1f}" y="{y + row // 2 + 4}" '
                           f'text-anchor="middle">{b.mb}</text>')
    y = top + len(ranks) * row + 8
    span = int(rp.makespan)
    step = 5 if span <= 100 else 10 * ((span // 100) + 1)
    for t in range(0, span + 1, step):
        out.append(f'<text x="{LEFT + t * unit:.1f}" y="{y + 4}" font-size="10" '
                   f'text-anchor="middle">{t}</text>')
    wide = max(LEFT + rp.makespan * unit + 16, LEFT + 8.5 * len(title) + 16)
    return out, int(wide), y + 12


def svg_legend(replays, top):
    """The colours of the ops the replays hold, in one line from y = top."""
    ops = {b.op for rp in replays for b in rp.boxes}
    legend = [("F", 0, "forward")]
    legend += [("B", 0, "backward")] if "B" in ops else []
    legend += [("I", 0, "input part of the backward"), ("W", 0, "weight part")] \
        if "I" in ops or "W" in ops else []
    legend += [("F", 1, "lighter: the second chunk")] \
        if any(b.chunk for rp in replays for b in rp.boxes) else []
    out, x = [], LEFT
    for op, chunk, name in legend:
        out.append(f'<rect x="{x}" y="{top + 2}" width="14" height="12" '
                   f'fill="{COLOURS[(op, chunk)]}"/>')
        out.append(f'<text x="{x + 18}" y="{top + 12}" font-size="11">{html.escape(name)}</text>')
        x += 26 + 7 * len(name)
    return out, x, top + 22


def svg_stack(panels, unit=None):
    """Timelines one above the other, on one time scale, with one legend: panels are
    (replay, ranks, title)."""
    longest = max((rp.makespan for rp, _, _ in panels), default=1)
    unit = unit or (22 if longest <= 60 else max(6, 22 * 60 / longest))
    body, width, y = [], 0, 6
    for rp, ranks, title in panels:
        out, w, y = svg_panel(rp, ranks, title, y, unit)
        body += out
        width = max(width, w)
        y += 10
    out, w, y = svg_legend([rp for rp, _, _ in panels], y)
    body += out
    width = max(width, w)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{y + 6}" '
            f'font-family="monospace" font-size="12">\n'
            f'<rect width="{width}" height="{y + 6}" fill="white"/>\n' + "\n".join(body) +
            "\n</svg>\n")


def svg_timeline(rp, ranks, title):
    """The replay as an SVG: ranks as rows, each call a box numbered with its
    micro-batch, coloured by op (forward blue, backward green, its input part
    teal, weight part orange; a second chunk lighter)."""
    return svg_stack([(rp, ranks, title)])


# ------------------------------------------------------------------- demo

def read_logs(directory):
    """{rank: [StageCall]} from a demo's XT_STAGE_LOG files."""
    import glob
    import os
    import re
    logs = {}
    for path in glob.glob(os.path.join(directory, "stages.r*.txt")):
        rec = read_record(path)
        if rec is not None:
            logs[int(re.search(r"stages\.r(\d+)\.txt$", path).group(1))] = rec.stages
    return logs


def legend(rp):
    ops = {b.op for b in rp.boxes}
    parts = ["F forward"] + (["B backward"] if "B" in ops else [])
    parts += ["I input part of a backward"] if "I" in ops else []
    parts += ["W weight part"] if "W" in ops else []
    parts += ["lower case: chunk 1"] if any(b.chunk for b in rp.boxes) else []
    return ", ".join(parts) + "; the digit: the micro-batch"


def idle_line(rp, ranks):
    idle = [rp.idle(r) for r in ranks]
    each = (f"{idle[0]}" if len(set(idle)) == 1 else ", ".join(map(str, idle)))
    share = sum(idle) / max(1, len(idle) * rp.makespan)
    return f"idle {each} of {rp.makespan} units per rank (bubble {100 * share:.0f}%)"


def demo_timeline(exercise, np_, directory):
    """make demo's picture: the logged calls replayed in unit time, in the
    terminal and as build/timelines/<exercise>.np<np>.svg. A demo that trains
    several steps starts its micro-batch numbers again each step, which the
    replay cannot tell apart: only each rank's first step is drawn."""
    import os
    whole = read_logs(directory)
    logs = {r: first_step(calls) for r, calls in whole.items()}
    if not logs:
        return
    cut = any(len(logs[r]) < len(whole[r]) for r in logs)
    nlayers = max(c.first + c.count for calls in logs.values() for c in calls)
    rp = replay(logs, nlayers)
    if rp.stuck:
        print("timeline: the logged order cannot run: " +
              "; ".join(f"rank {r}'s {op} waits for {why}" for r, op, why in rp.stuck))
        return
    ranks = sorted(logs)
    print(text_timeline(rp, ranks, f"the stage calls{' of step 1' if cut else ''}, replayed in "
                                   f"unit time (F=1, B=2, I=W=1):"))
    print(textwrap.fill(legend(rp), 78, initial_indent="  ", subsequent_indent="  "))
    print("  " + idle_line(rp, ranks))
    title = f"{exercise}, np={np_}{', step 1' if cut else ''}: {idle_line(rp, ranks)}"
    os.makedirs(os.path.join("build", "timelines"), exist_ok=True)
    path = os.path.join("build", "timelines", f"{exercise}.np{np_}.svg")
    with open(path, "w") as f:
        f.write(svg_timeline(rp, ranks, title))
    print(f"(drawn in {path})")


def first_step(calls):
    """A rank's logged calls up to the end of its first training step: cut before the
    first forward of a micro-batch (and chunk) that this rank has forwarded already, which
    only the next step does. A one-step log is returned whole."""
    seen = set()
    for i, c in enumerate(calls):
        if c.op == "F":
            if (c.mb, c.chunk) in seen:
                return calls[:i]
            seen.add((c.mb, c.chunk))
    return calls



# ---------------------------------------------------------------- DualPipe

def dualpipe_stage(p, chunk, r):
    """DualPipe's layout: rank r's chunk 0 is stage r, its chunk 1 stage p-1-r (every stage
    twice: on rank s's chunk 0 and on rank p-1-s's chunk 1)."""
    return r if chunk == 0 else p - 1 - r


def dualpipe(p, m, r):
    """DualPipe (DeepSeek-V3; deepseek-ai/DualPipe, dualpipe/dualpipe.py), p even, M even,
    M >= 2p. Micro-batches 0..M/2-1 enter at rank 0 and go down through the chunks 0,
    M/2..M-1 enter at rank p-1 and go up through the chunks 1. Rank r's "own" direction
    (phase 0) is the one whose start is nearer: chunk 0 for r < p/2, chunk 1 above; phase 1
    is the other. With h = min(r, p-1-r), its eight steps are

        1  nF0      2 (p/2-h-1)  forwards of phase 0
        2  nF0F1    h+1          a forward of phase 0, one of phase 1
        3  nB1W1F1  p/2-h-1      an input part (I) of phase 1, its weight part (W), a
                                 forward of phase 1
        4  main     M/2-p+h+1    F phase 0, B phase 1, F phase 1, B phase 0 (the reference
                                 overlaps each F with the B after it)
        5  nB1F1B0  p/2-h-1      B phase 1, F phase 1, B phase 0
        6  nB1B0    h+1          a backward of phase 1, one of phase 0; from the pair
                                 (h+1) div 2 on (h odd: its first; h even: its second)
                                 the backwards are split, their W's deferred
        7  nWB0     p/2-h-1      a deferred W, an input part of phase 0
        8  nW       h+1          the deferred W's left

    Forwards and backwards of each phase run in micro-batch order; the deferred W's run
    oldest first, whichever chunk they belong to."""
    half, h, second = p // 2, min(r, p - 1 - r), int(r >= p // 2)
    done = {"F": [0, 0], "B": [0, 0]}
    deferred = collections.deque()
    out = []

    def call(op, phase):
        chunk = phase ^ second
        kind = "F" if op == "F" else "B"
        mb = done[kind][phase] + (m // 2 if chunk else 0)
        done[kind][phase] += 1
        out.append(Op(op, mb, chunk))
        if op == "I":
            deferred.append(Op("W", mb, chunk))

    def weight():
        out.append(deferred.popleft())

    for _ in range(2 * (half - h - 1)):
        call("F", 0)
    for _ in range(h + 1):
        call("F", 0)
        call("F", 1)
    for _ in range(half - h - 1):
        call("I", 1)
        weight()
        call("F", 1)
    for _ in range(m // 2 - p + h + 1):
        call("F", 0)
        call("B", 1)
        call("F", 1)
        call("B", 0)
    for _ in range(half - h - 1):
        call("B", 1)
        call("F", 1)
        call("B", 0)
    split = False
    for i in range(h + 1):
        split = split or (i == (h + 1) // 2 and h % 2 == 1)
        call("I" if split else "B", 1)
        split = split or (i == (h + 1) // 2 and h % 2 == 0)
        call("I" if split else "B", 0)
    for _ in range(half - h - 1):
        weight()
        call("I", 0)
    for _ in range(h + 1):
        weight()
    return out


def dualpipe_idle(p):
    """The least idle time any schedule of DualPipe's layout can have on every rank, in unit
    time, and what it is: the middle ranks p/2-1 and p/2 wait p/2-1 forwards for their
    first input (from rank 0 through chunks 0, or from rank p-1 through chunks 1) and then
    have 3M units of work each, so the step lasts at least 3M + p/2-1 and every rank, with
    3M units of its own, idles at least p/2-1. DualPipe idles exactly that."""
    return p // 2 - 1, "np/2-1 forwards: the middle ranks' wait for their first micro-batch"


def in_flight(calls):
    """The most micro-batches forwarded and not yet backward (B, or W after I)."""
    now = most = 0
    for c in calls:
        if c.op == "F":
            now += 1
            most = max(most, now)
        elif c.op in ("B", "W"):
            now -= 1
    return most


def dualpipe_in_flight(p):
    """DualPipe's most micro-batches in flight on a rank (forwarded, not yet backward,
    both chunks together): p+1, its paper's "activation per device: PP+1"."""
    return p + 1


def dualpipe_calls(p, m, layers, ops=None):
    """{rank: [StageCall]} of DualPipe's definition (or ops(p, m, r)) on a model whose
    stages are layers[s] = (first, count)."""
    ops = ops or dualpipe
    return {r: [StageCall(o.op, o.mb, o.chunk, 0.0, 0.0, *layers[dualpipe_stage(p, o.chunk, r)])
                for o in ops(p, m, r)] for r in range(p)}


def dualpipe_problems(ps=(2, 4, 6, 8), extra=(0, 2, 4, 6)):
    """DualPipe's definition against its claims, for make test: every micro-batch forwarded
    and backward once per stage on its half's chunks, every split backward's W run after
    it; replayed in unit time it runs, idles exactly dualpipe_idle on every rank, keeps at
    most dualpipe_in_flight; and a full backward in place of every split one idles more
    at p >= 4 (the zero-bubble parts matter). [] when all hold."""
    bad = []
    for p in ps:
        for m in (2 * p + e for e in extra):
            layers = {s: (s, 1) for s in range(p)}
            logs = dualpipe_calls(p, m, layers)
            for r, calls in logs.items():
                for c in (0, 1):
                    mine = [x for x in calls if x.chunk == c]
                    want = range(m // 2 * c, m // 2 * (c + 1))
                    for op in ("F", "BI"):
                        got = sorted(x.mb for x in mine if x.op in op)
                        if got != list(want):
                            bad.append(f"p={p} M={m} rank {r} chunk {c}: {op} of {got}")
                    split = [x.mb for x in mine if x.op == "I"]
                    if sorted(x.mb for x in mine if x.op == "W") != sorted(split):
                        bad.append(f"p={p} M={m} rank {r} chunk {c}: W's do not match I's")
            rp = replay(logs, p)
            idle = sorted({rp.idle(r) for r in range(p)})
            if rp.stuck or idle != [dualpipe_idle(p)[0]]:
                bad.append(f"p={p} M={m}: idle {idle}, bound {dualpipe_idle(p)[0]}, "
                           f"stuck {rp.stuck}")
            most = max(in_flight(calls) for calls in logs.values())
            if most > dualpipe_in_flight(p):
                bad.append(f"p={p} M={m}: {most} in flight, DualPipe keeps "
                           f"{dualpipe_in_flight(p)}")

            def unsplit(p_, m_, r_):
                return [Op("B", o.mb, o.chunk) if o.op == "I" else o
                        for o in dualpipe(p_, m_, r_) if o.op != "W"]
            full = replay(dualpipe_calls(p, m, layers, unsplit), p)
            if p >= 4 and min(full.idle(r) for r in range(p)) <= dualpipe_idle(p)[0]:
                bad.append(f"p={p} M={m}: without the split backwards the idle is still "
                           f"{full.idle(0)} (negative control)")
    return bad
