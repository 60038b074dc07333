"""pp_basic.c: the layers of each stage (pp_layers), and one batch through the
pipeline without micro-batches (pp_basic_step).

pp_layers is plain arithmetic, graded in one process over many model sizes
and stage counts: every stage of every (L, np) with 1 <= np <= 8 and
np <= L, against xt_block's rule (nn.block). L < np is not graded: a stage
with no layers cannot exist in a pipeline, and the contract excludes it.
libxt's xt_block is refused here, since it is the answer.

pp_basic_step's program builds each rank's stage from the student's own
pp_layers (run_case, through the kit's pp_case_stage), so a wrong split
fails here too: the layers each rank's stage holds are checked first
against the model's split, then every rank's stage gradients and the last
rank's loss against one process's step on the whole batch (pp.py with M = 1,
mb_rows = rows), then every point-to-point message by peer and size: one
activation forward and one gradient back per stage boundary, 2 (np-1) in the
pipeline, nothing else. Every case runs in strict send mode (MPI_Send waits
for its receive). Cases: np 1 to 4, models of np to 2 np + 1 layers (stages
unequal where np does not divide them), 1 to 3 rows. Tolerance: pp.py;
measured (grade.py --margins, 6 seeds): the worst gradient error was under
4% of its bound.
"""

import numpy as np

import nn
from spec import exact, test
from lectures.lc5_pp import pp
from lectures.lc5_pp.pp import NPS_PIPE

# ------------------------------------------------------------------ pp_layers

MOST_STAGES = 8


def layers_cases(rng):
    """One case per number of stages: model sizes from np to 3 np + 4 layers, and 40."""
    return [{"np": 1, "stages": s} for s in range(1, MOST_STAGES + 1)]


def sizes(case):
    s = case["stages"]
    return list(range(s, 3 * s + 5)) + [40]


def layers_inputs(case, rng):
    return {"nlayers": np.array(sizes(case), dtype=np.int32)}


def layers_reference(case, inputs):
    s = case["stages"]
    blocks = [nn.block(int(n), s, r) for n in inputs["nlayers"] for r in range(s)]
    return [{"first": np.array([b[0] for b in blocks], dtype=np.int32),
             "count": np.array([b[1] for b in blocks], dtype=np.int32)}]


def layers_label(case):
    s = case["stages"]
    return f"stages={s}, L={s}..{3 * s + 4} and 40"


def layers_locator(case, name, index, rank):
    s = case["stages"]
    return f"L={sizes(case)[index // s]}, stage {index % s} of {s}"


FORBIDDEN = [(r"^xt_block$", "calls {}, libxt's copy of the split pp_layers writes")]


@test("pp_basic", points=3, inputs=layers_inputs, reference=layers_reference,
      tolerance=exact, label=layers_label, locate=layers_locator,
      forbidden=FORBIDDEN,
      hint="L layers over np stages: base = L / np, extra = L % np; stage r < extra holds "
           "base + 1 layers, the others base; stage r starts after the layers of stages "
           "0..r-1: r base + min(r, extra)")
def pp_layers(rng):
    return layers_cases(rng)


# -------------------------------------------------------------- pp_basic_step

def basic_cases(rng):
    out = []
    for n in NPS_PIPE:
        for k, L in enumerate((n, n + 1, 2 * n + 1)):
            out.append(pp.model_case(n, L, 1, 1 + (k + n) % 3, rng))
    return out


def basic_inputs(case, rng):
    """pp.py's inputs without the layout: the program takes it from pp_layers."""
    inputs = pp.pipeline_inputs(case, rng)
    del inputs["layers"]
    return inputs


def basic_label(case):
    return (f"np={case.np} mb_rows={case['mb_rows']} layers={pp.nlayers(case)} "
            f"dims={case['dims']} {case['act']}")


def basic_facets(case):
    return {"uneven stages": int(pp.nlayers(case) % case.np != 0)}


def layout_check(case, inputs, outs):
    """Each rank's stage holds the layers of the model's split (its "layers" output: the
    first layer and the count pp_layers gave it)."""
    for r in range(case.np):
        got = outs[r].get("layers")
        want = pp.stage_layers(case, r)
        if got is None or got.size != 2:
            continue
        if (int(got[0]), int(got[1])) != want:
            return [(r, f"rank {r}'s stage holds layers {got[0]}..{got[0] + got[1] - 1} "
                        f"(pp_layers({pp.nlayers(case)}, {case.np}, {r}) gave first {got[0]}, "
                        f"count {got[1]}); the model's split gives it layers {want[0]}.."
                        f"{want[0] + want[1] - 1}: the stage is built from your pp_layers, "
                        f"so fix pp_layers first")]
    return []


BASIC_RULES = [
    pp.messages_exactly(pp.neighbour_messages,
                        "the batch's activations to the next stage, its gradient back to the "
                        "previous: 2 (np-1) messages in the pipeline"),
]


@test("pp_basic", points=7, inputs=basic_inputs, reference=pp.pipeline_reference,
      tolerance=pp.pipeline_tolerance, label=basic_label, facets=basic_facets,
      locate=pp.grads_locator, rules=BASIC_RULES, check=layout_check, check_first=True,
      hint="forward: receive rows x in floats from rank r-1 (not on rank 0), "
           "xt_stage_forward(stage, 0, ...), send rows x out floats to rank r+1, or on the "
           "last rank take the loss with scale 1; backward: receive dy from rank r+1 (not on "
           "the last), xt_stage_backward, send dx to rank r-1 (not on rank 0)")
def pp_basic_step(rng):
    return basic_cases(rng)
