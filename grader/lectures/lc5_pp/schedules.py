"""pp_gpipe.c, pp_1f1b.c, pp_interleaved.c, pp_zero_bubble.c: one training
step of a pipeline schedule, graded on the numbers and on its shape.

The numbers: every rank's stage gradients and the last stage's loss against
one process's step on the whole batch (pp.py), and each chunk forwarded
exactly M times. The shape: each rank's logged stage calls are exactly the
schedule's definition (schedule.py), and every point-to-point message is
counted by peer and size: one activation forward and one gradient back per
micro-batch between neighbouring stages, nothing else. Every case runs in
strict send mode (MPI_Send waits for its receive), so a schedule that only
works through MPI's buffering deadlocks here.

Cases: np 1 to 4; M = 1, np - 1, np and 2 np + 1 (and M < np, where the
pipeline never fills); models of np to 2 np + 1 layers, stages unequal where
np does not divide them. Tolerance: pp.py; measured (grade.py --margins, 6
seeds): the worst gradient error was under 2% of its bound.
"""

from spec import test
from lectures.lc5_pp import pp, schedule
from lectures.lc5_pp.pp import NPS_PIPE


def schedule_cases(rng, ms=None):
    out = []
    for n in NPS_PIPE:
        for k, M in enumerate(ms(n) if ms else sorted({1, max(n - 1, 1), n, 2 * n + 1})):
            layers = (n, n + 1, 2 * n + 1)[k % 3]
            out.append(pp.model_case(n, layers, M, 1 + k % 3, rng))
    return out


GPIPE_RULES = [
    pp.stage_order(lambda c, r: schedule.gpipe(c.np, c["M"], r), "GPipe",
                   lambda c, r: f"F0..F{c['M'] - 1}, then B0..B{c['M'] - 1}"),
    pp.messages_exactly(pp.neighbour_messages,
                        "each micro-batch's activations to the next stage, its gradient back "
                        "to the previous: 2 (np-1) M messages in the pipeline"),
]


@test("pp_gpipe", points=10, inputs=pp.pipeline_inputs, reference=pp.pipeline_reference,
      tolerance=pp.pipeline_tolerance, label=pp.label, facets=pp.facets,
      locate=pp.grads_locator, rules=GPIPE_RULES,
      hint="forward m: receive rows x in floats from rank r-1 (not on rank 0), "
           "xt_stage_forward, send rows x out to rank r+1 (the last rank takes the loss "
           "with scale 1/M instead); then backward m for m = 0..M-1 the same way back")
def pp_gpipe_step(rng):
    return schedule_cases(rng)
