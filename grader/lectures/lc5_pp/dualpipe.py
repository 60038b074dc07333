"""pp_dualpipe.c: DualPipe (DeepSeek-V3), one pipeline fed from both ends,
graded on the numbers, on the schedule's bubble and memory, and on every
message.

Layout (pp.dual_*, schedule.dualpipe_stage): np even, p = np stages; rank r
holds chunk 0 = stage r and chunk 1 = stage p-1-r. Micro-batches 0..M/2-1
enter at rank 0 and go down through the chunks 0, M/2..M-1 enter at rank p-1
and go up through the chunks 1. x and target hold the whole batch on ranks 0
and p-1.

The numbers: every rank's two chunks' gradients against their slices of one
process's step on the whole batch (both copies of a stage must hold the
whole batch's gradient: the sum of the two halves, exchanged between r and
p-1-r), each chunk forwarded exactly M/2 times, and the batch's mean loss
on ranks 0 and p-1 (they swap their halves' sums).

The shape, read from the logged stage calls. The order is not compared with
DeepSeek's call for call: its eight steps carry choices that change neither
the bubble nor the memory (where in step 6 the split backwards begin, that
the deferred W's run oldest first across both chunks), and the exercise's
signature is free. What is checked instead, and what DualPipe is for:

- each micro-batch on its half's chunks (0..M/2-1 on chunks 0);
- the order can run (schedule.replay: every call after its inputs);
- at most p+1 micro-batches in flight on every rank (DualPipe's published
  "activation per device: PP+1");
- the bubble: replayed in unit time (F = 1, B = 2, I = W = 1), every rank
  idles at most p/2-1 units. DualPipe's published bubble is
  (PP/2-1)(F&B + B - 3W), F&B a forward and a backward run overlapped, B a
  full backward. This model has no overlap (F&B = F + B = 3), which makes the
  formula 2(p/2-1) with B = 2 (or p/2-1 reading B as the input part). The
  definition, replayed, idles exactly p/2-1 on every rank at every M (3M
  units of work in a step of 3M + p/2-1), and no schedule of this layout
  can idle less: the middle ranks p/2-1 and p/2 cannot start before the first
  micro-batch has been forwarded through p/2-1 stages, and then have 3M
  units of work, so the step lasts at least 3M + p/2-1 and every rank, with
  3M of its own, idles at least p/2-1. The rule is that bound, exact: a
  schedule without the split backwards (full B everywhere) idles 3 at
  p = 4, more than the published 2 as well;
- every message, by peer and size: per chunk M/2 activations to the next
  stage of its direction and M/2 gradients back; one message each way per
  chunk between r and p-1-r (the stage's gradients); one float each way
  between 0 and p-1 (the loss). Nothing else, no collective.

Every case runs in strict send mode: a bidirectional pipeline whose sends
wait for each other (rank r sending down while r+1 sends up) deadlocks here.

Cases: np 2 and 4 (DualPipe needs np even); M = 2np, 2np+2, 3np (rounded up
to even); models of np to 2np+1 layers, stages unequal where np does not
divide them. A second test offers odd np, odd M and M < 2np, each of which
the step must refuse. Tolerance: pp.py; measured (grade.py --margins, 4
seeds): the worst error, gradient or loss, was under 2% of its bound.
"""

import re

from spec import test
from lectures.lc5_pp import pp, schedule

NPS_DUAL = (2, 4)


def dual_ms(n):
    return sorted({2 * n, 2 * n + 2, 3 * n + (3 * n) % 2})


def dual_cases(rng):
    out = []
    for n in NPS_DUAL:
        for k, M in enumerate(dual_ms(n)):
            layers = (n + 1, 2 * n, 2 * n + 1)[k % 3]
            out.append(pp.model_case(n, layers, M, 1 + k % 2, rng))
    return out


def dual_facets(case):
    M, n = case["M"], case.np
    return {"M vs 2np": "equal" if M == 2 * n else "above",
            "uneven stages": int(pp.nlayers(case) % n != 0)}


DUAL_RULES = [
    pp.dual_halves,
    pp.runnable,
    pp.in_flight_at_most(lambda c, r: schedule.dualpipe_in_flight(c.np),
                         "np+1, DualPipe's activation memory"),
    pp.dual_idle_at_most,
    pp.messages_exactly(pp.dual_messages,
                        "per chunk one activation on and one gradient back per micro-batch, "
                        "one message each way per chunk with rank np-1-r, one float between "
                        "ranks 0 and np-1"),
]


@test("pp_dualpipe", points=16, inputs=pp.dual_inputs, reference=pp.dual_reference,
      tolerance=pp.pipeline_tolerance, label=pp.label, facets=dual_facets,
      locate=pp.dual_locator, rules=DUAL_RULES,
      hint="rank r: chunk 0 is stage r (micro-batches 0..M/2-1, from rank r-1 to r+1), "
           "chunk 1 stage np-1-r (M/2..M-1, from rank r+1 to r-1); DeepSeek's 8 steps "
           "(make hint EX=pp_dualpipe); then add the partner np-1-r's copy of each stage's "
           "gradients, and swap the halves' loss sums between ranks 0 and np-1")
def pp_dualpipe_step(rng):
    return dual_cases(rng)


# ------------------------------------------------------------------ refusal

WHY = {"odd_np": "np odd", "odd_M": "M odd", "few_M": "M < 2 np"}


def refusal_label(case):
    return (f"np={case.np} M={case['M']} dims={case['dims']} {case['act']} "
            f"why={case['why']} ({WHY[case['why']]})")


def refusal(case, inp, error, d):
    n, M = case.np, case["M"]
    if error is None:
        return (f"the step ran to its end with np={n}, M={M}: DualPipe needs np even, M even "
                f"and M >= 2 np; stop with xt_die")
    if not (re.search(rf"\b{n}\b", error) and re.search(rf"\b{M}\b", error)):
        return (f"the step refused np={n}, M={M}, but its message does not give both: "
                f"\"{error}\"; say what was wrong, with the values")
    return None


@test("pp_dualpipe", points=3, inputs=pp.dual_inputs, reference=pp.dual_reference,
      label=refusal_label, refusal=refusal, refuses_on_every_rank=True,
      hint="check np % 2, M % 2 and M >= 2 np first, on every rank, and stop with "
           "xt_die(\"... np = %d, M = %d\", np, M)")
def pp_dualpipe_refuses(rng):
    """Each case one the step must refuse, in a launch of its own."""
    return [pp.model_case(3, 3, 6, 1, rng, why="odd_np"),
            pp.model_case(2, 3, 5, 1, rng, why="odd_M"),
            pp.model_case(4, 4, 6, 1, rng, why="few_M")]
