"""The vocabulary of the test tables: tests, cases, references, tolerances, rules.

A lecture's tables (grader/lectures/lcN_*/*.py) hold its Test entries, one
per function a student writes, each one function decorated with test()
(below), in the manner of MIT's gradelib; the lecture's manifest lists them.
Each says:

  cases(rng)              the decorated function, named after the function under
                          test: its cases, [{"np": n, param: value, ...}], which
                          the harness makes Cases (make_cases)
  inputs(case, rng)       each rank's input arrays, fresh and rank-distinct
  reference(case, inp)    each rank's expected outputs, computed by NumPy from
                          the plain single-process definition
  tolerance(case, inp, name, rank)   per-element absolute tolerance (0: exact), or
                          spec.Relative(atol, rtol), scaled by the expected value
  rules                   checks on how it was computed (the MPI counters)
  check(case, inp, outs)  optional: a property of the outputs that no single
                          expected array states (a barrier's timestamps, say);
                          returns [(rank, message)], each a WRONG; with
                          check_first it runs before the values are compared
  files(case, inp, outs, dir)  optional: the files the program left in the case's
                          xt_case_scratch_dir (dir), read after the launch (a
                          checkpoint against its documented layout); returns
                          [(rank, message)], each a WRONG, before check and the values
  refusal(case, inp, error, dir)  optional: makes every case one that the program
                          must refuse (a damaged checkpoint offered to a loader), by
                          stopping with an error raised in the exercise's file
                          (xt_die, XT_CHECK). That ends the launch, so each case runs
                          in a launch of its own. error: the error's text, or None if
                          the case ran to its end; returns None where the refusal is
                          right, else the WRONG message (for error None, always one)
  refuses_on_every_rank   with refusal: the contract asks every rank to refuse before
                          any communication (M % np checked first), so a resident
                          launch may run the cases with the others (each refused
                          case ends only itself there; any other outcome is graded
                          again in launches of its own)
  device                  "cpu", or "cuda" for the programs graded by
                          DEVICE=cuda (lcN/<exercise>.cu)
  forbidden               symbols this exercise may not call (libxt's own copy
                          of the function the student writes, say), [(regex,
                          message)]; an entry may also be a function (object,
                          source) -> [message], a check of the built object
  locate(case, name, i)   optional: where flat index i of output `name` lies (its
                          shard and owner), added to a WRONG report

A rule or a check may carry its own hint (hinted(rule, text)): shown under its
failure instead of the test's hint, which is about the whole exercise.
  facets(case)            optional: {name: value} derived from a case's parameters
                          ("padding": elements added to make the shards equal) that
                          may tell failing cases from passing ones in the report

The harness (grader/harness.py) runs the cases and applies these.
"""

import dataclasses
import math
from typing import Callable, Optional, Sequence

import numpy as np

# World sizes every collective is graded at, and the order cases run in: the
# sizes that tile an 8-rank world come first, so code that talks on
# MPI_COMM_WORLD meets other groups' data (a wrong answer) before it meets an
# idle rank (a hang).
NPS = (1, 2, 3, 4, 5, 8)
NP_ORDER = (2, 4, 8, 1, 3, 5)


@dataclasses.dataclass
class Case:
    test: "Test"
    np: int
    params: dict  # fn, dtype, op, count, root, ...: written to cases.txt
    index: int = 0  # position within its test
    # Its number in the exercise: the exercise's tests' cases counted in order, as
    # cases.txt, the case directories (c<number>/) and CASE= name it (harness.Runner).
    number: int = -1

    @property
    def label(self):
        return self.test.label(self)

    def __getitem__(self, key):
        return self.params[key]

    def get(self, key, default=None):
        return self.params.get(key, default)


def word(case, name):
    """The word that says a 0/1 parameter of case, as its test's `words` declares it:
    "bias" where it is set, "no bias" (or the declared other word) where it is not.
    Labels use it, so that the label and the summary of failed cases say the same."""
    on, off = flag_words(case.test, name)
    return on if case.params[name] else off


def flag_words(test, name):
    """(word when set, word when not) of a 0/1 parameter declared in test.words."""
    w = (test.words or {})[name]
    return (w, f"no {w}") if isinstance(w, str) else tuple(w)


def default_label(case):
    p = case.params
    parts = [f"np={case.np}"]
    for key in ("dtype", "op", "root", "count"):
        if key in p:
            parts.append(f"{key}={p[key]}" if key in ("root", "count") else str(p[key]))
    return " ".join(parts)


@dataclasses.dataclass
class Test:
    exercise: str  # the program: lcN_<name>/<exercise>.c
    name: str  # the function under test (cases.txt fn=)
    points: int
    cases: Callable  # (rng) -> [{"np": n, param: value, ...}]: see make_cases
    inputs: Callable  # (case, rng) -> {name: array for all ranks | [array per rank]}
    reference: Callable  # (case, inputs) -> [ {name: expected array} per rank ]
    tolerance: Callable = None  # (case, inputs, name, rank) -> float | array
    rules: Sequence[Callable] = ()
    label: Callable = default_label
    watchdog: Optional[float] = None
    # Shown under a failure: one text, or texts by verdict ({"DEADLOCK": ..., "": the rest}),
    # so that a wrong value is not followed by advice about blocking sends.
    hint: object = ""
    lecture: str = ""  # set from the table's LECTURE when the grader loads it
    check: Optional[Callable] = None  # (case, inputs, [ {name: array} per rank ]) -> [(rank, msg)]
    device: str = "cpu"  # "cuda": graded only by DEVICE=cuda, from lcN/<exercise>.cu
    check_first: bool = False  # run check before comparing values (it explains them better)
    # check takes the group's records too, a fourth argument: what their calls show (the
    # chains of signals that let a rank leave a barrier).
    check_records: bool = False
    files: Optional[Callable] = None  # (case, inputs, outs, scratch dir) -> [(rank, msg)]
    refusal: Optional[Callable] = None  # (case, inputs, error text | None, scratch dir) -> msg
    refuses_on_every_rank: bool = False  # its refusal cases may share a resident launch
    # Symbols the exercise's object must not use, beyond every exercise's list
    # (builds.FORBIDDEN_SYMBOLS): [(regex, message with {} for the symbol)], or
    # functions (object path, source path) -> [message] checking the object otherwise.
    forbidden: Sequence = ()
    # Where a flat index of an output lies, for WRONG reports of sharded buffers:
    # (case, output name, flat index, rank) -> "flat 101: the first element of rank 1's
    # shard ...", "row 2, column 5", or None.
    locate: Optional[Callable] = None
    # The program's outputs are put together by libxt, the same on every rank whatever the
    # ranks hold (ZeRO-3's shards): ranks that agree say nothing about the communication.
    gathered_outputs: bool = False
    # (case) -> {name: value}: properties derived from the parameters that may explain
    # which cases fail ({"padding": 1}), beside np and the parameters themselves, for
    # the line that says which cases failed (grader/pattern.py).
    facets: Optional[Callable] = None
    # {param: "word" or ("word", "word when off")}: a 0/1 parameter that the label and
    # the failed-case summary both write as a word ("bias" / "no bias"), see word().
    words: Optional[dict] = None


def test(exercise, points, **parts):
    """A test entry, in the manner of MIT's gradelib: the decorated function
    gives the cases, (rng) -> [{"np": n, param: value, ...}], and its name is
    the function under test; every other part (inputs, reference, tolerance,
    rules, check, hint, ...) is a keyword of Test. Returns the Test.

        @test("p2p", points=5, inputs=float_inputs, reference=chain_reference,
              tolerance=exact, rules=[point_to_point_only])
        def chain_pass(rng):
            return [{"np": n, "count": c} for n in NPS for c in (0, 1, 7, 1000)]
    """
    def entry(cases):
        return Test(exercise=exercise, name=cases.__name__, points=points, cases=cases, **parts)
    return entry


def make_cases(test, specs):
    """The Cases of test from the dicts its cases(rng) returned, each holding np and
    parameters: in NP_ORDER, numbered. Called by the harness, not by the tables."""
    for s in specs:
        if not isinstance(s, dict) or "np" not in s:
            raise TypeError(f"{test.name}: cases(rng) returns dicts holding np and the "
                            f"parameters, not {s!r}")
    cases = [Case(test, s["np"], {k: v for k, v in s.items() if k != "np"}) for s in specs]
    for c in cases:
        c.params.setdefault("fn", test.name)
    cases.sort(key=lambda c: NP_ORDER.index(c.np) if c.np in NP_ORDER else len(NP_ORDER))
    for i, c in enumerate(cases):
        c.index = i
    return cases


# --------------------------------------------------------------------- dtypes

DTYPES = {
    "float32": np.float32, "float64": np.float64, "int8": np.int8, "int16": np.int16,
    "int32": np.int32, "int64": np.int64, "uint8": np.uint8,
}


def is_float(dtype):
    return np.dtype(dtype).kind == "f"


def random_values(rng, dtype, op, shape):
    """Random values for a reduction with `op` that stays clear of overflow."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        if op == "prod":
            v = rng.uniform(0.5, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
        else:
            v = rng.uniform(-100.0, 100.0, shape)
        return v.astype(dt)
    info = np.iinfo(dt)
    if op == "sum":
        hi = 15 if dt.itemsize == 1 and dt.kind == "i" else (255 if dt.kind == "u" else 1000)
        lo = 0 if dt.kind == "u" else -hi
    elif op == "prod":
        choices = [1, 2] if dt.kind == "u" else ([-1, 1] if dt.itemsize == 1 else [-2, -1, 1, 2])
        return rng.choice(np.array(choices, dtype=dt), shape)
    elif op in ("land", "lor", "lxor"):
        return rng.choice(np.array([0, 0, 1, 3], dtype=dt), shape)
    else:
        lo, hi = max(info.min, -10**6), min(info.max, 10**6)
        if op in ("band", "bor", "bxor"):
            lo, hi = info.min, info.max
    return rng.integers(lo, hi, shape, dtype=dt, endpoint=True)


def reduce_ranks(stack, op):
    """The reduction over axis 0 (the ranks), as MPI defines each op.

    Floating-point sums and products are computed in float64; integers wrap
    in their own type, as C arithmetic does. With one rank no op is applied at
    all, so even a logical op leaves the value as it is.
    """
    dt = stack.dtype
    if stack.shape[0] == 1:
        return stack[0].copy()
    if is_float(dt) and op in ("sum", "prod"):
        wide = stack.astype(np.float64)
        return wide.sum(axis=0) if op == "sum" else wide.prod(axis=0)
    with np.errstate(over="ignore"):
        if op == "sum":
            return np.add.reduce(stack, axis=0, dtype=dt)
        if op == "prod":
            return np.multiply.reduce(stack, axis=0, dtype=dt)
    if op == "max":
        return stack.max(axis=0)
    if op == "min":
        return stack.min(axis=0)
    if op == "band":
        return np.bitwise_and.reduce(stack, axis=0)
    if op == "bor":
        return np.bitwise_or.reduce(stack, axis=0)
    if op == "bxor":
        return np.bitwise_xor.reduce(stack, axis=0)
    if op == "land":
        return np.logical_and.reduce(stack != 0, axis=0).astype(dt)
    if op == "lor":
        return np.logical_or.reduce(stack != 0, axis=0).astype(dt)
    if op == "lxor":
        return np.logical_xor.reduce(stack != 0, axis=0).astype(dt)
    raise ValueError(f"unknown op {op}")


def reduction_tolerance(stack, op):
    """Per-element bound on the rounding error of any order of reduction.

    Summing n numbers in any order errs by at most about n eps sum|x_i|;
    a product of n factors by about n eps |product|. Max, min and integer
    ops are exact.
    """
    dt = stack.dtype
    if not is_float(dt) or op not in ("sum", "prod"):
        return 0.0
    n = stack.shape[0]
    eps = float(np.finfo(dt).eps)
    wide = np.abs(stack.astype(np.float64))
    if op == "sum":
        return 2 * n * eps * wide.sum(axis=0) + np.finfo(dt).tiny
    return 2 * n * eps * wide.prod(axis=0) + np.finfo(dt).tiny


def exact(case, inputs, name, rank):
    return 0.0


@dataclasses.dataclass(frozen=True)
class Relative:
    """A tolerance that scales with the answer: |got - expected| <= atol + rtol |expected|.
    A tolerance function may return one; the harness applies it to the expected array."""
    atol: float
    rtol: float

    def bound(self, expected):
        return self.atol + self.rtol * np.abs(np.asarray(expected, dtype=np.float64))


@dataclasses.dataclass(frozen=True)
class OfScale:
    """A tolerance relative to a whole tensor's scale: |got - expected| <= rtol max(floor,
    the largest |expected| of that output over every rank). A float32 chain of products
    errs relative to the tensor, not to each element (an element near zero may lose every
    digit), and a tensor sharded over ranks has one scale: every rank is held to the whole
    tensor's. A tolerance function may return one; the harness applies it."""
    rtol: float
    floor: float = 1.0

    def bound(self, expected_per_rank):
        peak = max((float(np.abs(np.asarray(e, dtype=np.float64)).max())
                    for e in expected_per_rank if np.size(e)), default=0.0)
        return self.rtol * max(self.floor, peak)


def bit_differences(got, want):
    """Where two arrays of one shape differ bit for bit: (first flat index, how many), or
    None when every element has the same bits (a NaN equals the same NaN; 0.0 is not -0.0).
    What 'identical on all ranks' and 'exactly the rounded value' mean."""
    got, want = np.ascontiguousarray(got), np.ascontiguousarray(want)
    unsigned = f"u{got.dtype.itemsize}"
    bad = np.flatnonzero(got.reshape(-1).view(unsigned) != want.reshape(-1).view(unsigned))
    return (int(bad[0]), int(bad.size)) if bad.size else None


def disagreement(outs, names, pairs):
    """Where copies that must be bit for bit the same are not: for each output name, for
    each (rank, reference rank) of `pairs`, in order, the first whose outs[rank][name]
    differs from outs[reference][name]. Returns "rank R's NAME[I] is G but rank Q's is W (K
    of N differ)" and R, or None; a name given as (output, shown) is shown so. Outputs
    missing or of another shape are skipped: the value comparison reports them."""
    for name in names:
        name, shown = (name, name) if isinstance(name, str) else name
        for r, q in pairs:
            got, want = outs[r].get(name), outs[q].get(name)
            if got is None or want is None or got.shape != want.shape:
                continue
            diff = bit_differences(got, want)
            if diff:
                i, k = diff
                return (f"rank {r}'s {shown}[{i}] is {got.flat[i]!r} but rank {q}'s is "
                        f"{want.flat[i]!r} ({k} of {got.size} differ)"), r
    return None


# --------------------------------------------------------------------- rules
#
# A rule is called as rule(case, inputs, records): the case, one group's inputs,
# and records[r], rank r's Record (grader/harness.py). It returns a list of
# (rank, message), empty when the rule holds.

COLLECTIVE_KINDS = {"coll": "a library collective", "comm": "a communicator constructor",
                    "rma": "one-sided communication"}


def point_to_point_only(case, inputs, records):
    """No library collectives, communicator construction or one-sided calls."""
    out = []
    for r, rec in enumerate(records):
        for fn, st in rec.calls.items():
            if st.kind in COLLECTIVE_KINDS:
                out.append((r, f"rank {r} called {fn} ({COLLECTIVE_KINDS[st.kind]}): this "
                               f"exercise builds it from point-to-point messages, so only "
                               f"sends, receives and their waits are allowed"))
                break
    return out


def only_calls(allowed, why):
    """Point-to-point calls other than `allowed` are refused (with the reason why)."""
    allowed = set(allowed)

    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            extra = sorted(fn for fn, st in rec.calls.items()
                           if st.kind == "p2p" and fn not in allowed)
            if extra:
                out.append((r, f"rank {r} called {', '.join(extra)}: {why}"))
        return out
    rule.__doc__ = f"only {', '.join(sorted(allowed))}"
    return rule


def calls_exactly(fn, expected, why):
    """fn is called exactly expected(case, inputs, rank) times (None: any number)."""
    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            want = expected(case, inputs, r)
            got = rec.calls[fn].calls if fn in rec.calls else 0
            if want is not None and got != want:
                out.append((r, f"rank {r} called {fn} {got} times, expected {want}: {why}"))
        return out
    return rule


def at_most(measure, what, unit, limit, formula):
    """Each rank's measure(record) is at most limit(case, inputs, rank).

    The message reads "rank R <what> N<unit>, the algorithm needs at most M<unit> (formula)".
    """
    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            got, cap = measure(rec), limit(case, inputs, r)
            if got > cap:
                out.append((r, f"rank {r} {what} {amount(got, unit)}, the algorithm needs at "
                               f"most {amount(cap, unit)} ({formula})"))
        return out
    return rule


def amount(n, unit):
    """'1 message', '3 messages', '48 B'."""
    return f"{n}{unit[:-1] if n == 1 and unit.endswith('s') else unit}"


def exactly(measure, what, unit, expected, formula):
    """Each rank's measure(record) is exactly expected(case, inputs, rank): a budget with
    no slack, for algorithms whose every message is determined.

    The message reads "rank R <what> N<unit>, the algorithm sends exactly M<unit> (formula)".
    """
    def rule(case, inputs, records):
        out = []
        for r, rec in enumerate(records):
            got, want = measure(rec), expected(case, inputs, r)
            if got != want:
                out.append((r, f"rank {r} {what} {amount(got, unit)}, the algorithm sends "
                               f"exactly {amount(want, unit)} ({formula})"))
        return out
    return rule


def messages_exactly(expected, formula):
    """Each rank sends exactly expected(case, inputs, rank) messages."""
    return exactly(lambda rec: rec.msgs_sent, "sent", " messages", expected, formula)


def bytes_sent_exactly(expected, formula):
    """Each rank sends exactly expected(case, inputs, rank) bytes."""
    return exactly(lambda rec: rec.bytes_sent, "sent", " B", expected, formula)


def max_messages(limit, formula):
    """Each rank sends at most limit(case, inputs, rank) messages."""
    return at_most(lambda rec: rec.msgs_sent, "sent", " messages", limit, formula)


def max_bytes_sent(limit, formula):
    """Each rank sends at most limit(case, inputs, rank) bytes."""
    return at_most(lambda rec: rec.bytes_sent, "sent", " B", limit, formula)


def ceil_log2(n):
    return 0 if n <= 1 else math.ceil(math.log2(n))


def itemsize(case):
    return np.dtype(case["dtype"]).itemsize


# --------------------------------------------------------------------- rounds
#
# How deep a communication pattern is, under the telephone model: each rank
# sends one message per round, its sends one after another in program order,
# and a message leaves only after the receives logged before it on its rank.
# Receiving costs no round of its own. A broadcast that sends to its smallest
# subtree first sends the same messages as the binomial tree but is twice as
# deep at np = 8; the counters cannot tell the two apart, the rounds can.

@dataclasses.dataclass(eq=False)
class Message:
    """One send on the case's communicator, stamped with the round it goes out in."""
    src: int
    dst: int
    tag: int
    round: int
    before: Optional["Message"]  # the message whose receipt last raised src's clock, if any
    received: bool = False

    def chain(self):
        """The messages that lead to this one, first to last."""
        out, m = [], self
        while m is not None:
            out.append(m)
            m = m.before
        return out[::-1]


def replay(records, on_send, on_receive):
    """Replays the ranks' point-to-point logs on the case's communicator in an order MPI
    could have run them: on_send(rank, event) for each send, whose result travels with the
    message, and on_receive(rank, event, what on_send returned for the matching send) for
    each receive. The k-th receive on q from p with tag t is the k-th send from p to q with
    tag t (MPI's non-overtaking order); a receive waits for its send to be replayed, and
    ranks are replayed until none can go on (a receive whose send is missing stops its
    rank there). Receives are logged when they complete, so a send logged after a receive
    went out knowing what that receive brought."""
    logs = [[e for e in rec.events if e.comm == "case" and e.dir in ("S", "R")]
            for rec in records]
    at, sent, taken = [0] * len(logs), {}, {}
    progress = True
    while progress:
        progress = False
        for r, log in enumerate(logs):
            while at[r] < len(log):
                e = log[at[r]]
                if e.dir == "S":
                    sent.setdefault((r, e.peer, e.tag), []).append(on_send(r, e))
                else:
                    key = (e.peer, r, e.tag)
                    k = taken.get(key, 0)
                    if k >= len(sent.get(key, ())):
                        break
                    taken[key] = k + 1
                    on_receive(r, e, sent[key][k])
                at[r] += 1
                progress = True


def message_rounds(records):
    """Every message sent on the case's communicator, stamped with its round.

    Each rank's clock starts at 0; a send adds one to its sender's clock and carries
    it; a receive sets its rank's clock to the larger of the two (replay). A log that
    cannot be replayed to its end (a receive whose send is missing) yields the messages
    replayed so far.
    """
    n = len(records)
    clock, last_in, out = [0] * n, [None] * n, []

    def send(r, e):
        clock[r] += 1
        out.append(Message(r, e.peer, e.tag, clock[r], last_in[r]))
        return out[-1]

    def receive(r, e, m):
        m.received = True
        if m.round > clock[r]:
            clock[r], last_in[r] = m.round, m

    replay(records, send, receive)
    return out


def heard_from(records):
    """For each rank, the ranks it has heard from by the end of its log, itself included:
    those from which a chain of messages on the case's communicator reached it, each
    message sent after the receives logged before it on its rank (replay). What a rank
    did before its first call is known only to the ranks in this set."""
    known = [{r} for r in range(len(records))]

    def send(r, e):
        return frozenset(known[r])

    def receive(r, e, carried):
        known[r] |= carried

    replay(records, send, receive)
    return known


def max_rounds(bound, formula, advice):
    """The deepest message (message_rounds) goes out in round bound(case, inputs) or earlier.

    formula names the bound (a string, or a function of the case); advice says how
    the algorithm stays within it. The report follows the longest chain back.
    """
    def rule(case, inputs, records):
        msgs = message_rounds(records)
        cap = bound(case, inputs)
        if not msgs or max(m.round for m in msgs) <= cap:
            return []
        last = max(msgs, key=lambda m: m.round)
        chain = last.chain()
        path = " -> ".join(str(r) for r in [chain[0].src] + [m.dst for m in chain])
        where = (f"rank {last.dst} received in round {last.round}" if last.received else
                 f"rank {last.src} sent to rank {last.dst} in round {last.round}")
        name = formula(case) if callable(formula) else formula
        return [(last.dst if last.received else last.src,
                 f"{where}, at the end of the chain {path} (hops in rounds "
                 f"{', '.join(str(m.round) for m in chain)}: a rank's sends take one round "
                 f"each, in program order, after the receives before them); {name} = "
                 f"{amount(cap, ' rounds')}: {advice}")]
    return rule


def hint_for(test, kind):
    """The test's hint for a failure of this kind (a verdict)."""
    if isinstance(test.hint, dict):
        return test.hint.get(kind, test.hint.get("", ""))
    return test.hint


def hinted(check, text):
    """check (a rule or a test's check) with its own hint: what to try when it is the one
    that failed. Returns check."""
    check.hint = text
    return check
