"""pp_interleaved.c: Megatron's interleaved 1F1B, rank r holding v model chunks
(stages r, r + np, ...), graded on the numbers and on its shape.

The numbers: every chunk's gradients and the last stage's loss against one
process's step on the whole batch (pp.py), and each chunk forwarded exactly
M times. The shape: each rank's logged stage calls are exactly
schedule.interleaved (Megatron's virtual micro-batch order; the warm-up
2(np-r-1) + (v-1)np forwards, all of them when M = np); every point-to-point
message counted by peer and size: one activation forward and one gradient
back per micro-batch and stage boundary, the boundary after each round
going from rank np-1 back to rank 0, and none at np = 1, where every
boundary is inside the rank. Every case runs in strict send mode, where
naive blocking exchanges deadlock. A second test offers M not a multiple of
np, which the program must refuse with its own error naming M and np.

Cases: np 1 to 4, v = 2 and 3, M = np and 2 np (and 3 np at np <= 2);
models of v np to 1.5 v np + 1 layers (at most 24), stages unequal where v np does
not divide them. Tolerance: pp.py; measured (grade.py --margins, 19 seeds):
the worst gradient error was under 4% of its bound.
"""

import re

from spec import test
from lectures.lc5_pp import pp, schedule
from lectures.lc5_pp.pp import NPS_PIPE

CHUNKS = (2, 3)


def interleaved_cases(rng):
    out = []
    for n in NPS_PIPE:
        for v in CHUNKS:
            stages = n * v
            for i, M in enumerate((n, 2 * n, 3 * n) if n <= 2 else (n, 2 * n)):
                layers = min(24, (stages, stages + 1, stages + stages // 2 + 1)[(i + v) % 3])
                out.append(pp.model_case(n, layers, M, 1 + (n + v + i) % 3, rng, v=v))
    return out


def order(case, rank):
    return schedule.interleaved(case.np, case["M"], pp.chunks(case), rank)


def explain(case, rank):
    n, M, v = case.np, case["M"], pp.chunks(case)
    w = schedule.interleaved_warmup(n, M, v, rank)
    why = ("every forward first, as M = np" if M == n else
           f"2(np-r-1) + (v-1)np = {2 * (n - rank - 1)} + {(v - 1) * n}")
    return (f"rank {rank} runs {w} of its {M * v} forwards first ({why}); virtual "
            f"micro-batch k is micro-batch (k/(np v)) np + k%np, on chunk (k%(np v))/np "
            f"forward and on chunk v-1 minus that backward")


# No pp.runnable here: an order that cannot run either deadlocks (np > 1: the messages carry
# every dependency) or reads a buffer its producer has not filled yet (np = 1), which the
# gradients show before any rule is read; stage_order names every other departure.
INTERLEAVED_RULES = [
    pp.stage_order(order, "interleaved 1F1B", explain),
    pp.messages_exactly(pp.cross_rank_messages,
                        "each micro-batch's activations to the next stage's rank, its "
                        "gradient back to the previous stage's, rank np-1 passing to rank 0 "
                        "between chunks; a copy, no message, between two stages of one rank: "
                        "2 (v np - 1) M messages in the pipeline at np > 1"),
]


@test("pp_interleaved", points=14, inputs=pp.pipeline_inputs, reference=pp.pipeline_reference,
      tolerance=pp.pipeline_tolerance, label=pp.label, facets=pp.facets,
      locate=pp.grads_locator, rules=INTERLEAVED_RULES,
      hint={"": "number the ops by virtual micro-batch k = 0 .. M v - 1: micro-batch "
                "(k/(np v)) np + k%np on chunk (k%(np v))/np forward, v-1 minus that "
                "backward; warm-up forwards, then forward warm-up+k and backward k, then the "
                "backwards left",
            "DEADLOCK": "post each direction's next receive (MPI_Irecv) before any blocking "
                        "send: under strict send mode two ranks that both send first wait "
                        "for each other for ever"})
def pp_interleaved_step(rng):
    return interleaved_cases(rng)


# ------------------------------------------------------------- the refusal

def refusal(case, inp, error, d):
    M, n = case["M"], case.np
    if error is None:
        return (f"M = {M} is not a multiple of np = {n}, and the step went on: it must stop "
                f"with XT_CHECK or xt_die, naming M and np")
    numbers = re.findall(r"\d+", error)
    if str(M) not in numbers or str(n) not in numbers:
        return (f"the step refused M = {M} at np = {n}, but its message does not name both: "
                f"\"{error}\"")
    return None


def refusal_label(case):
    return (f"np={case.np} M={case['M']} mb_rows={case['mb_rows']} v={case['v']} "
            f"dims={case['dims']} {case['act']} (M not a multiple of np)")


@test("pp_interleaved", points=3, inputs=pp.pipeline_inputs, reference=pp.pipeline_reference,
      label=refusal_label, refusal=refusal, refuses_on_every_rank=True,
      hint="check M % np == 0 first, on every rank, with XT_CHECK(cond, \"... M = %d ... "
           "np = %d\", M, np)")
def interleaved_refuses_m(rng):
    """M not a multiple of np, one launch per case: the step must stop with an error
    raised in pp_interleaved.c that names M and np. Both sides of M = np: M above np
    (3 at np 2, 6 at np 4) and below it (3 at np 4: fewer micro-batches than ranks is
    not a multiple either); M = np itself is among the graded steps."""
    return [pp.model_case(2, 5, 3, 2, rng, v=2), pp.model_case(4, 13, 6, 1, rng, v=3),
            pp.model_case(4, 9, 3, 1, rng, v=2)]
