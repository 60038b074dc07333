"""pp_1f1b.c: 1F1B, one training step: a warm-up of min(np-r-1, M) forwards on
rank r, then one forward and one backward at a time, then the backwards left.

The numbers as pp_gpipe's (schedules.py): every rank's stage gradients and the
last rank's loss against one process's step on the whole batch (pp.py), each
stage forwarded exactly M times. The shape: at most min(np-r, M) micro-batches
in flight on rank r (what 1F1B is for), checked before the order, since a
warm-up too long is exactly a micro-batch too many in memory; then each rank's
stage calls exactly schedule.one_f_one_b; then every message by peer and size,
GPipe's messages and nothing else. (No pp.runnable: the values are compared
before any rule, and calls whose inputs really arrived can always be replayed.)
Every case
runs in strict send mode, where the steady phase's "send the activation, then
receive the gradient" deadlocks between neighbours: each rank sends to the
other at the same time.

Cases: schedules.schedule_cases, np 1 to 4 with M = 1, np - 1, np, 2 np + 1
(M < np: the warm-up is capped by M, and some ranks never reach the steady
phase), models of np to 2 np + 1 layers (unequal stages). Tolerance: pp.py;
measured (grade.py --margins, seeds 1 to 6): the worst error, a gradient's,
was 3.7% of its bound (seed 5, np=4 M=1).
"""

from spec import hinted, test
from lectures.lc5_pp import pp, schedule
from lectures.lc5_pp.schedules import schedule_cases


def explain(case, r):
    """The warm-up rank r should run, and what follows it."""
    M = case["M"]
    w = schedule.warmup_1f1b(case.np, M, r)
    head = f"rank {r}'s warm-up is min(np-r-1, M) = min({case.np - r - 1}, {M}) = {w} forward" \
           + ("s" if w != 1 else "")
    if w == M:
        return head + f", then the {M} backward{'s' if M != 1 else ''}: no steady phase"
    pairs = [f"F{w + b} B{b}" for b in range(M - w)]
    steady = " ".join(pairs) if len(pairs) <= 3 else f"{pairs[0]} {pairs[1]} .. {pairs[-1]}"
    left = f", then the {w} backward{'s' if w != 1 else ''} left" if w else ""
    return f"{head}, then {steady}{left}"


IN_FLIGHT = hinted(
    pp.in_flight_at_most(lambda c, r: min(c.np - r, c["M"]),
                         "min(np-r, M) on rank r: the warm-up's forwards and one more"),
    "cause: a forward ran before the backward 1F1B puts ahead of it: the warm-up is "
    "min(np-r-1, M) forwards on rank r (none on the last rank), and after it each forward is "
    "followed by the oldest micro-batch's backward")

ONE_F_ONE_B_RULES = [
    IN_FLIGHT,
    pp.stage_order(lambda c, r: schedule.one_f_one_b(c.np, c["M"], r), "1F1B", explain),
    pp.messages_exactly(pp.neighbour_messages,
                        "each micro-batch's activations to the next stage, its gradient back "
                        "to the previous: 2 (np-1) M messages in the pipeline"),
]


@test("pp_1f1b", points=12, inputs=pp.pipeline_inputs, reference=pp.pipeline_reference,
      tolerance=pp.pipeline_tolerance, label=pp.label, facets=pp.facets,
      locate=pp.grads_locator, rules=ONE_F_ONE_B_RULES,
      hint={"": "rank r: w = min(np-r-1, M) forwards; then for b = 0..M-w-1 forward w+b and "
                "backward b; then backwards M-w..M-1",
            "DEADLOCK": "where a rank sends to its neighbour while the neighbour sends to it "
                        "(the activation of w+b out, the gradient of b in), one MPI_Sendrecv "
                        "does both: two MPI_Send wait for each other for ever"})
def pp_1f1b_step(rng):
    return schedule_cases(rng)
