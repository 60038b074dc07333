"""pp_zero_bubble.c: ZB-H1, 1F1B with each backward split into its input part
(B, logged I) and its weight part (W), the W's deferred into the bubbles.

The numbers: every rank's stage gradients and the last stage's loss against
one process's step on the whole batch (pp.py), each stage forwarded exactly M
times. The shape, from the logged stage calls: the order can run (every W
after its I, every I after the next stage's); at most min(np, M)
micro-batches in flight (forwarded, W not yet run) on every rank, 1F1B's
peak; each rank's calls exactly schedule.zb_h1's (so every W runs), and
when they are not, with M >= np, what the wrong order costs: its replayed
idle time against ZB-H1's (p-1)(F+B-2W) = p-1 units; every point-to-point
message by peer and size, 2 (np-1) M in the pipeline. Every case runs in
strict send mode (MPI_Send waits for its receive): the steady state's send
of an activation and receive of a gradient, made as two blocking calls,
deadlock here.

Each B's dx is sent on before the rank's next stage call (pp.sent_at_once:
every stage call records how many MPI events came before it, which puts
calls and messages in one order): a dx held back behind its W costs the
previous stage that W's time.

Cases: np 1 to 4; M = 1, np - 1, np and 2 np + 1 (M < np: the pipeline never
fills and no W is held back past the cool-down); models of np to 2 np + 1
layers, stages unequal where np does not divide them. Tolerance: pp.py;
measured (grade.py --margins, 4 seeds): the worst gradient error was 2.7%
of its bound.
"""

from spec import test
from lectures.lc5_pp import pp, schedule
from lectures.lc5_pp.pp import NPS_PIPE


def zb_cases(rng):
    """Per np, M = 2 np + 1, np, np - 1, 1: the case with a steady state first (the
    grader reports a test's first failing case), then the pipelines that never fill."""
    out = []
    for n in NPS_PIPE:
        for k, M in enumerate(sorted({1, max(n - 1, 1), n, 2 * n + 1}, reverse=True)):
            layers = (2 * n + 1, n, n + 1)[k % 3]
            out.append(pp.model_case(n, layers, M, 1 + k % 3, rng))
    return out


def explain(case, r):
    w = schedule.warmup_1f1b(case.np, case["M"], r)
    held = ("runs each W right after its I" if r == 0 else
            f"holds back its first {'W' if r == 1 else f'{r} W' + chr(39) + 's'}, then runs "
            f"one after each I, oldest first")
    return f"{w} forward{'s' if w != 1 else ''}, then F and I in turn; rank {r} {held}"


ZB_RULES = [
    pp.runnable,
    pp.in_flight_at_most(lambda c, r: min(c.np, c["M"]),
                         "a micro-batch is in flight until its W; ZB-H1 keeps 1F1B's "
                         "peak, its first rank's: min(np, M)"),
    pp.stage_order_costed(lambda c, r: schedule.zb_h1(c.np, c["M"], r), "ZB-H1", explain,
                          "zb_h1"),
    pp.messages_exactly(pp.neighbour_messages,
                        "each micro-batch's activations to the next stage, its input gradient "
                        "back to the previous: 2 (np-1) M messages in the pipeline"),
    pp.sent_at_once(("I",), -1, "the input gradient"),
]


@test("pp_zero_bubble", points=14, inputs=pp.pipeline_inputs, reference=pp.pipeline_reference,
      tolerance=pp.pipeline_tolerance, label=pp.label, facets=pp.facets,
      locate=pp.grads_locator, rules=ZB_RULES,
      hint={"": "1F1B's loop with the backward split: warm-up min(np-r-1, M) forwards; then "
                "forward m, and xt_stage_backward_input of m - warm with its dx sent to rank "
                "r-1 at once; count the I's and run xt_stage_backward_weight of the oldest "
                "held back once rank r holds r of them; in the cool-down one W after each I; "
                "the rest at the end",
            "DEADLOCK": "send y and receive dy with one MPI_Sendrecv in the steady state: "
                        "two MPI_Send between neighbours wait for each other for ever"})
def pp_zero_bubble_step(rng):
    return zb_cases(rng)
