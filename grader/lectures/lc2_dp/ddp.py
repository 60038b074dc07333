"""Lecture 2's data-parallel training tests: ddp_naive, ddp_bucketed, ddp_grad_accum.

Each case trains a small MLP (grader/nn.py's twin of xt_mlp) for a few SGD
steps (grader/training.py). The grader draws one global batch per step and
gives each rank its consecutive slice of rows, and initial weights w0: rank
0's are the real ones, every other rank gets different ones, so that only a
broadcast makes them agree. The reference is single-process full-batch SGD
from rank 0's weights in float64 (nn.Mlp.sgd_steps), compared after every
step.

Tolerance: |got - expected| <= 2e-5 (1 + |expected|) per weight. A float32
step differs from the float64 one by about 1e-7 here; every mutant moves
weights by 1e-3 or more.
"""

import numpy as np

from spec import amount, Relative, test
from training import (allreduce_budget, global_batches, identical_on_all_ranks, is_loss,
                      LOSS_TOLERANCE, model_of, MODELS, step_losses, step_outputs, STEPS,
                      training_case, training_inputs, training_label)

LR = "0.1"  # a decimal that the C side parses with atof: the same float everywhere
NPS_DDP = (1, 2, 3, 4)


def ddp_label(case):
    """The training label, with the bucket cap and plan or the micro-batches."""
    p = case.params
    text = training_label(case)
    if "bucket_bytes" in p:
        n = len(plan_buckets(model_of(case), p["bucket_bytes"]))
        text += f" bucket_bytes={p['bucket_bytes']} ({amount(n, ' buckets')})"
    if "micro" in p:
        text += f" micro={p['micro']}"
    return text


def sgd_reference(case, inputs):
    """Full-batch SGD from rank 0's weights on the whole global batch of each step."""
    m = model_of(case)
    weights = m.sgd_steps(inputs["w0"][0], global_batches(case, inputs), float(LR))
    return [{**step_outputs(m, weights), **losses}
            for losses in step_losses(case, inputs, weights)]


def sgd_tolerance(case, inputs, name, rank):
    return LOSS_TOLERANCE if is_loss(name) else Relative(2e-5, 2e-5)


def plan_buckets(m, cap):
    """The bucket plan, as the plain rule states it: tensors from the last to the first,
    a bucket closed once it holds >= cap bytes. Returns [(lo, hi)] in launch order."""
    buckets, lo, hi, size = [], None, None, 0
    for name, off, shape in reversed(m.tensors):
        count = int(np.prod(shape))
        if size == 0:
            hi = off + count
        lo = off
        size += 4 * count
        if size >= cap:
            buckets.append((lo, hi))
            size = 0
    if size:
        buckets.append((lo, hi))
    return buckets


def bucket_layers(m, cap):
    """The layer whose backward completes each bucket of plan_buckets(m, cap): its lowest
    tensor's (W<l> and b<l> are layer l's)."""
    layer_at = {off: int(name[1:]) for name, off, _ in m.tensors}
    return [layer_at[lo] for lo, _ in plan_buckets(m, cap)]


def below(layer):
    """'layer 0', 'layers 2 down to 0': what backward computes after `layer`."""
    return "layer 0" if layer == 1 else f"layers {layer - 1} down to 0"


def started_in_its_hook(case, inputs, records):
    """Every bucket's MPI_Iallreduce starts in backward's hook for the layer that completes
    the bucket (libxt tags each MPI call made in a hook with backward and the layer): later,
    it overlaps less of backward, or none of it once backward has returned."""
    firsts = bucket_layers(model_of(case), case["bucket_bytes"])
    out = []
    for r, rec in enumerate(records):
        starts = [e for e in rec.events if e.fn == "MPI_Iallreduce"]
        if len(starts) != STEPS * len(firsts):
            continue  # the all-reduce budget reports it
        late = [e for e in starts if e.compute != "backward" or e.compute_at < 0]
        if late:
            out.append((r, f"rank {r} started {len(late)} of its {len(starts)} MPI_Iallreduce "
                           f"calls after backward returned: a bucket's all-reduce starts in "
                           f"backward's hook (on_layer_done) as soon as backward has filled it, "
                           f"so that it overlaps the rest of backward (the last bucket starts "
                           f"in layer 0's hook, still inside backward)"))
            break
        for i, e in enumerate(starts):
            step, k, want = i // len(firsts) + 1, i % len(firsts), firsts[i % len(firsts)]
            if e.compute_at < want:
                out.append((r, f"rank {r} started bucket {k} of step {step} in layer "
                               f"{e.compute_at}'s hook, but backward completed it at layer "
                               f"{want} (its lowest tensor's): start each bucket in the hook "
                               f"of the layer that completes it, so that it travels while "
                               f"backward computes {below(want)}"))
                break
        if out:
            break
    return out


# ------------------------------------------------------------------- tests

@test("ddp_naive", points=15,
      inputs=training_inputs, reference=sgd_reference, tolerance=sgd_tolerance,
      label=ddp_label, check=identical_on_all_ranks, check_first=True,
      rules=[allreduce_budget(lambda c: STEPS * len(model_of(c).tensors),
                              "one all-reduce per parameter tensor per step")],
      hint="each rank steps with the mean of all ranks' gradients: broadcast rank 0's weights "
           "once, then all-reduce every gradient tensor (MPI_SUM) and divide by the number of "
           "ranks")
def ddp_naive_step(rng):
    """Two models per world size."""
    return [training_case(n, MODELS[(n + k) % len(MODELS)], 1 + (n + 2 * k) % 3, LR)
            for n in NPS_DDP for k in range(2)]


@test("ddp_bucketed", points=20,
      inputs=training_inputs, reference=sgd_reference, tolerance=sgd_tolerance,
      label=ddp_label, check=identical_on_all_ranks, check_first=True,
      rules=[allreduce_budget(lambda c: STEPS * len(plan_buckets(model_of(c), c["bucket_bytes"])),
                              "one MPI_Iallreduce per bucket per step, buckets filled from the "
                              "last tensor backwards and closed once they hold >= cap bytes",
                              blocking_why="a bucket is all-reduced with MPI_Iallreduce: a "
                                           "blocking all-reduce stops backward until it is "
                                           "done, so nothing overlaps"),
             started_in_its_hook],
      hint="a bucket is tensors from the last backwards until >= cap bytes, started with "
           "MPI_Iallreduce once backward has filled it, and waited for before the update")
def ddp_bucketed_step(rng):
    """Caps of 0 (a bucket per tensor), 100 B, 1100 B and 1 MiB (one bucket)."""
    return [training_case(n, MODELS[0] if k % 2 == 0 else MODELS[(n + k) % len(MODELS)],
                          1 + (n + k) % 3, LR, bucket_bytes=cap)
            for n in NPS_DDP for k, cap in enumerate((0, 100, 1100, 1 << 20))]


@test("ddp_grad_accum", points=15,
      inputs=training_inputs, reference=sgd_reference, tolerance=sgd_tolerance,
      label=ddp_label, check=identical_on_all_ranks, check_first=True,
      rules=[allreduce_budget(lambda c: STEPS,
                              "one all-reduce of all gradients per optimizer step, after the "
                              "last micro-batch, not one per micro-batch")],
      hint="accumulate micro-batch gradients scaled by 1/micro, then all-reduce once per step")
def ddp_accum_step(rng):
    """1, 2 and 3 micro-batches of 1 or 2 rows."""
    return [training_case(n, MODELS[(n + k) % len(MODELS)], micro * (1 + (n + k) % 2), LR,
                          micro=micro)
            for n in NPS_DDP for k, micro in enumerate((1, 2, 3))]
