"""Lecture 3's data-parallel Adam and the three ZeRO stages: distributed_adam,
adam_zero1, adam_zero2, adam_zero3.

Each case trains a small MLP (grader/nn.py's twin of xt_mlp) for a few AdamW
steps, with the data-parallel training inputs (grader/training.py): every
step's global batch cut into each rank's consecutive rows, and initial
weights w0 that only rank 0 has right. The reference is single-process
full-batch AdamW from rank 0's weights in float64 (nn.Mlp.adam_steps),
compared after every step; all ranks must hold bit-identical weights.

Tolerance: |got - expected| <= 1e-5 (1 + |expected|), with Adam's eps = 1e-3.
Adam divides by the gradient's own size, so a gradient that float32 gets only
to a few digits (terms that cancel) moves its weight by lr times that
relative error; with eps = 1e-8 we saw 4e-6 after 3 steps and a sign flip
could cost 2 lr. eps = 1e-3 bounds the damage by lr |dg| / eps: the largest
error over 20 seeds was under 3e-6 (most runs under 1e-6). A wrong shard
boundary leaves weights unmoved, off by about lr = 0.01 per step.

Memory: each program resets libxt's peaks after its init, so the peaks in the
case record are those of the training steps. Per rank, with PHI parameters,
shard S = ceil(PHI / np) and L the largest layer's parameter count (W and b):

    stage          params        grads         optimizer
    0 (DP Adam)    4 PHI         4 PHI         8 PHI
    1              4 np S        4 PHI         8 S
    2              4 np S        4 S + 4 L     8 S
    3              4 S + 4 L     4 S + 4 L     8 S

Each peak must be at most the formula (padding counted), and at least the
rank's real share (count = its part of PHI, so 8 count for the moments, and
4 count + 4 L where one layer is gathered or reduced at a time): a buffer
allocated with malloc instead of xt_alloc is not counted and fails that.
"""

from spec import amount, Relative, test
from training import (allreduce_budget, global_batches, identical_on_all_ranks, is_loss,
                      LOSS_TOLERANCE, model_of, MODELS, shard_locator, step_losses,
                      step_outputs, STEPS, training_case, training_inputs, training_label)

LR = "0.01"
ADAM = {"beta1": "0.9", "beta2": "0.999", "eps": "1e-3", "wd": "0.01"}
NPS = (1, 2, 3, 4)
# The four training models, a 3-parameter one (at np=4 rank 3's shard starts at the end)
# and a 5-parameter one (at np=4, shards of 2: rank 2 owns 1, rank 3's shard starts past
# the end): the empty shards on both sides of the end.
ZERO_MODELS = MODELS + [("2,1", "relu", "mse"), ("4,1", "gelu", "mse")]


def layout(case):
    """(PHI, S, L): parameters, shard length and the largest layer's parameter count."""
    m = model_of(case)
    phi = m.nparams
    shard = -(-phi // case.np)
    largest = max(m.dims[l] * m.dims[l + 1] + m.dims[l + 1] for l in range(m.nlayers))
    return phi, shard, largest


def own_count(case, rank):
    phi, shard, _ = layout(case)
    return max(0, min(shard, phi - rank * shard))


def stage_label(case):
    phi, shard, _ = layout(case)
    pad = shard * case.np - phi
    padding = f" (+{pad} padding)" if pad else ""
    return f"{training_label(case)} PHI={phi} shard={shard}{padding}"


def stage_facets(case):
    """Padding (elements added to make the shards equal): shard arithmetic that is right
    only when np divides PHI fails exactly in the cases with padding."""
    phi, shard, _ = layout(case)
    return {"padding": shard * case.np - phi}


def adam_reference(case, inputs):
    """Full-batch AdamW from rank 0's weights on the whole global batch of each step."""
    m = model_of(case)
    hp = {"lr": case["lr"], **{k: case[k] for k in ADAM}}
    weights = m.adam_steps(inputs["w0"][0], global_batches(case, inputs), hp)
    out = step_outputs(m, weights)
    return [{**out, **losses} for losses in step_losses(case, inputs, weights)]


def adam_tolerance(case, inputs, name, rank):
    return LOSS_TOLERANCE if is_loss(name) else Relative(1e-5, 1e-5)


# --------------------------------------------------------------------- memory

KIND_WHAT = {"params": "weights", "grads": "gradients", "optimizer": "Adam moments"}


def memory_budget(stage):
    """Per rank and kind, lo <= peak <= hi: stage_memory(case, rank, stage) gives
    {kind: (lo, hi, text)} in bytes, text the formula of hi."""
    name = f"ZeRO-{stage}" if stage else "data-parallel Adam"

    def rule(case, inputs, records):
        for r, rec in enumerate(records):
            for kind, (lo, hi, text) in stage_memory(case, r, stage).items():
                peak = rec.memory.get(kind, (0, 0))[1]
                if peak > hi:
                    return [(r, f"rank {r}'s {KIND_WHAT[kind]} ({kind}) peaked at {peak} B during "
                                f"the steps; {name} keeps at most {hi} B ({text})")]
                if peak < lo:
                    return [(r, f"rank {r}'s {KIND_WHAT[kind]} ({kind}) peaked at {peak} B, but "
                                f"its share needs at least {lo} B: allocate them with "
                                f"xt_alloc(XT_MEM_{kind.upper()}, ...) so that they are counted")]
        return []
    return rule


def stage_memory(case, rank, stage):
    phi, s, big = layout(case)
    n, c = case.np, own_count(case, rank)
    full = (4 * phi, 4 * phi, f"4 PHI = 4 x {phi}")
    padded = (4 * phi, 4 * n * s, f"4 np S = 4 x {n} x {s}, padding included")
    sharded = (4 * c + 4 * big, 4 * s + 4 * big, f"4 S + 4 L = 4 x {s} + 4 x {big}: the own "
               f"shard and one layer")
    moments_full = (8 * phi, 8 * phi, f"8 PHI = 8 x {phi}")
    moments = (8 * c, 8 * s, f"8 S = 8 x {s}: m and v for the own shard only")
    return {0: {"params": full, "grads": full, "optimizer": moments_full},
            1: {"params": padded, "grads": full, "optimizer": moments},
            2: {"params": padded, "grads": sharded, "optimizer": moments},
            3: {"params": sharded, "grads": sharded, "optimizer": moments}}[stage]


# ------------------------------------------------------------ communication

# What ZeRO-2 and ZeRO-3 may not call: anything that gives a rank the whole sum.
REDUCES = ("MPI_Allreduce", "MPI_Iallreduce", "MPI_Reduce", "MPI_Ireduce")
REDUCE_SCATTERS = ("MPI_Reduce_scatter", "MPI_Reduce_scatter_block", "MPI_Ireduce_scatter",
                   "MPI_Ireduce_scatter_block")
ALLGATHERS = ("MPI_Allgather", "MPI_Allgatherv", "MPI_Iallgather", "MPI_Iallgatherv")


def total(rec, fns, field="calls"):
    return sum(getattr(rec.calls[fn], field) for fn in fns if fn in rec.calls)


def no_allreduce(stage):
    def rule(case, inputs, records):
        for r, rec in enumerate(records):
            used = [fn for fn in REDUCES if fn in rec.calls and rec.calls[fn].calls]
            if used:
                return [(r, f"rank {r} called {used[0]} {amount(rec.calls[used[0]].calls, ' times')}"
                            f": {stage} reduce-scatters the gradients (MPI_Reduce_scatter), so "
                            f"that each rank receives only its shard's sum; an all-reduce gives "
                            f"every rank all of it, the traffic and the memory stage 2 removes")]
        return []
    return rule


def reduce_scatter_bytes(case, inputs, records):
    phi = layout(case)[0]
    want = 4 * phi * STEPS
    for r, rec in enumerate(records):
        got = total(rec, REDUCE_SCATTERS, "bytes_sent")
        if got != want:
            return [(r, f"rank {r} reduce-scattered {got} B in {STEPS} steps, expected {want} B: "
                        f"every gradient exactly once per step, with MPI_Reduce_scatter")]
    return []


def allgather_budget(calls, what):
    """calls(case) all-gather calls per rank over the case, sending sent(case, rank) bytes."""
    def rule(case, inputs, records):
        for r, rec in enumerate(records):
            got, want = total(rec, ALLGATHERS), calls(case)
            if got != want:
                return [(r, f"rank {r} made {got} all-gather calls in {STEPS} steps, expected "
                            f"{want}: {what}")]
        return []
    return rule


# ------------------------------------------------------------------- tests

def stage_cases():
    """Two models per world size; the 3-parameter model at np 3 and 4 and the 5-parameter
    one at np 4 (empty shards)."""
    out = [training_case(n, ZERO_MODELS[(n + k) % 4], 1 + (n + 2 * k) % 3, LR, **ADAM)
           for n in NPS for k in range(2)]
    out += [training_case(n, ZERO_MODELS[4], 2, LR, **ADAM) for n in (3, 4)]
    out += [training_case(4, ZERO_MODELS[5], 3, LR, **ADAM)]
    return out


@test("distributed_adam", points=10,
      inputs=training_inputs, reference=adam_reference, tolerance=adam_tolerance,
      label=stage_label, facets=stage_facets, check=identical_on_all_ranks, check_first=True,
      rules=[memory_budget(0),
             allreduce_budget(lambda c: STEPS, "one all-reduce of all gradients per step")],
      hint="broadcast rank 0's weights once; each step all-reduce the gradients (MPI_SUM), "
           "divide by np, and take the Adam step with moments that persist across steps")
def dp_adam_step(rng):
    return stage_cases()


@test("adam_zero1", points=15, locate=shard_locator,
      inputs=training_inputs, reference=adam_reference, tolerance=adam_tolerance,
      label=stage_label, facets=stage_facets, check=identical_on_all_ranks, check_first=True,
      rules=[memory_budget(1),
             allreduce_budget(lambda c: STEPS, "one all-reduce of all gradients per step"),
             allgather_budget(lambda c: STEPS, "one all-gather of the updated shards per step")],
      hint="shard = ceil(nparams / np), rank r owns [r shard, (r+1) shard) clipped to nparams; "
           "moments for the shard only; after the update, all-gather shard floats per rank "
           "into the padded parameters")
def zero1_step(rng):
    return stage_cases()


@test("adam_zero2", points=15, locate=shard_locator,
      inputs=training_inputs, reference=adam_reference, tolerance=adam_tolerance,
      label=stage_label, facets=stage_facets, check=identical_on_all_ranks, check_first=True,
      rules=[memory_budget(2), no_allreduce("ZeRO-2"), reduce_scatter_bytes,
             allgather_budget(lambda c: STEPS, "one all-gather of the updated shards per step")],
      hint="backward one layer at a time into a layer-sized buffer, and MPI_Reduce_scatter "
           "each layer's gradient with counts = the part of the layer inside each rank's shard")
def zero2_step(rng):
    return stage_cases()


# ZeRO-3's outputs are its shards put together by libxt, the same array on every
# rank: there is nothing for an identity check to see, so it has none.
@test("adam_zero3", points=20, locate=shard_locator, gathered_outputs=True,
      inputs=training_inputs, reference=adam_reference, tolerance=adam_tolerance,
      label=stage_label, facets=stage_facets,
      rules=[memory_budget(3), no_allreduce("ZeRO-3"), reduce_scatter_bytes,
             allgather_budget(lambda c: 2 * model_of(c).nlayers * STEPS,
                              "each layer's weights gathered twice per step, just before its "
                              "forward and again just before its backward")],
      hint="keep only the own shard of the weights; gather a layer (MPI_Allgatherv) right "
           "before its forward and again before its backward, and xt_free it right after")
def zero3_step(rng):
    return stage_cases()
