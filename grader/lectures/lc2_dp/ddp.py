"""Lecture 2's data-parallel training tests: ddp_naive, ddp_bucketed, ddp_grad_accum.

Each case trains a small MLP (grader/nn.py's twin of xt_mlp) for a few SGD
steps. The grader draws one global batch per step and gives each rank its
consecutive slice of rows, and initial weights w0: rank 0's are the real
ones, every other rank gets different ones, so that only a broadcast makes
them agree. The reference is single-process full-batch SGD from rank 0's
weights in float64 (nn.Mlp.sgd_steps), compared after every step.

Tolerance: |got - expected| <= 2e-5 (1 + |expected|) per weight. A float32
step differs from the float64 one by about 1e-7 here; every mutant moves
weights by 1e-3 or more.
"""

import numpy as np

import nn
from spec import amount, bit_differences, make_cases, Relative, Test

STEPS = 3
LR = "0.1"  # a decimal that the C side parses with atof: the same float everywhere
NPS_DDP = (1, 2, 3, 4)

# (dims, activation, loss): a deep narrow one, a wide one, regression and classification.
MODELS = [("6,16,16,3", "relu", "ce"), ("5,12,4", "gelu", "mse"), ("4,8,8,8,2", "gelu", "ce"),
          ("7,20,5", "relu", "mse")]


def model_of(case):
    return nn.Mlp(case["dims"], case["act"], case["loss"])


def ddp_label(case):
    p = case.params
    text = f"np={case.np} {p['dims']} {p['act']} {p['loss']} rows={p['rows']}"
    if "bucket_bytes" in p:
        n = len(plan_buckets(model_of(case), p["bucket_bytes"]))
        text += f" cap={p['bucket_bytes']}B ({amount(n, ' buckets')})"
    if "micro" in p:
        text += f" micro={p['micro']}"
    return text


def ddp_inputs(case, rng):
    """Each rank's rows of every step's global batch, and its initial weights."""
    m = model_of(case)
    n, rows = case.np, case["rows"]
    din, dout = m.dims[0], m.dims[-1]
    x = rng.uniform(-1, 1, (STEPS, n * rows, din)).astype(np.float32)
    if m.loss == "ce":
        y = rng.integers(0, dout, (STEPS, n * rows)).astype(np.int32)
    else:
        y = rng.normal(0, 1, (STEPS, n * rows, dout)).astype(np.float32)
    w0 = [(rng.normal(0, 0.5, m.nparams)).astype(np.float32) for _ in range(n)]
    return {"x": [x[:, r * rows:(r + 1) * rows] for r in range(n)],
            "y": [y[:, r * rows:(r + 1) * rows] for r in range(n)],
            "w0": w0}


def ddp_reference(case, inputs):
    """Full-batch SGD from rank 0's weights on the whole global batch of each step."""
    m = model_of(case)
    x = np.concatenate(inputs["x"], axis=1)
    y = np.concatenate(inputs["y"], axis=1)
    weights = m.sgd_steps(inputs["w0"][0], [(x[s], y[s]) for s in range(STEPS)], float(LR))
    return [step_outputs(m, weights) for _ in range(case.np)]


def step_outputs(m, weights):
    """{"step<s>_<tensor>": values}, s from 1, for the flat weights after each step."""
    out = {}
    for s, w in enumerate(weights):
        for name, off, shape in m.tensors:
            out[f"step{s + 1}_{name}"] = w[off:off + int(np.prod(shape))]
    return out


def ddp_tolerance(case, inputs, name, rank):
    return Relative(2e-5, 2e-5)


def identical_on_all_ranks(case, inputs, outs):
    """Every rank's weights bit for bit rank 0's, after every step."""
    m = model_of(case)
    for s in range(STEPS):
        for name, _, _ in m.tensors:
            key = f"step{s + 1}_{name}"
            ref = outs[0].get(key)
            for r in range(1, case.np):
                got = outs[r].get(key)
                if ref is None or got is None or got.shape != ref.shape:
                    continue  # the value comparison reports missing outputs
                diff = bit_differences(got, ref)
                if diff:
                    i, k = diff
                    return [(r, f"after step {s + 1}, rank {r}'s {name}[{i}] is {got[i]!r} but "
                                f"rank 0's is {ref[i]!r} ({k} of {got.size} differ): data "
                                f"parallel ranks must hold identical weights; they start from "
                                f"rank 0's (a broadcast) and apply the same averaged gradient")]
    return []


# --------------------------------------------------------------------- rules

ALLREDUCES = ("MPI_Allreduce", "MPI_Iallreduce")


def allreduce_budget(calls, why, blocking_why=None):
    """Exactly calls(case) all-reduces per rank over the case, moving every gradient
    exactly once per step. With blocking_why, MPI_Allreduce is refused (for that reason)
    and only MPI_Iallreduce counts."""
    allowed = [ALLREDUCES[1]] if blocking_why else list(ALLREDUCES)

    def rule(case, inputs, records):
        want = calls(case)
        grad_bytes = 4 * model_of(case).nparams * STEPS
        out = []
        for r, rec in enumerate(records):
            for fn in ALLREDUCES:
                if fn not in allowed and fn in rec.calls and rec.calls[fn].calls:
                    out.append((r, f"rank {r} called {fn} {amount(rec.calls[fn].calls, ' times')}"
                                   f": {blocking_why}"))
                    return out
            got = sum(rec.calls[fn].calls for fn in allowed if fn in rec.calls)
            sent = sum(rec.calls[fn].bytes_sent for fn in allowed if fn in rec.calls)
            if got != want:
                out.append((r, f"rank {r} made {got} all-reduce calls in {STEPS} steps, "
                               f"expected {want}: {why}"))
            elif sent != grad_bytes:
                out.append((r, f"rank {r} all-reduced {sent} B in {STEPS} steps, expected "
                               f"{grad_bytes} B: every gradient exactly once per step"))
            if out:
                return out
        return out
    return rule


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


# ------------------------------------------------------------------- tests

def training_case(n, model, rows, **extra):
    """One case: np, the model (dims, act, loss), rows per rank and step, and extra params."""
    dims, act, loss = model
    return {"np": n, "dims": dims, "act": act, "loss": loss, "steps": STEPS, "lr": LR,
            "rows": rows, **extra}


def ddp_test(exercise, name, points, specs, rule, hint):
    """A DDP test: shared inputs, reference, tolerance, labels and the identical-weights
    check; specs() gives its cases, rule its all-reduce budget."""
    test = Test(exercise=exercise, name=name, points=points,
                cases=lambda rng: make_cases(test, specs()), inputs=ddp_inputs,
                reference=ddp_reference, tolerance=ddp_tolerance, label=ddp_label,
                check=identical_on_all_ranks, check_first=True, rules=[rule], hint=hint)
    return test


# ddp_naive.c: two models per world size.
DDP_NAIVE = ddp_test(
    "ddp_naive", "ddp_naive_step", 15,
    lambda: [training_case(n, MODELS[(n + k) % len(MODELS)], 1 + (n + 2 * k) % 3)
             for n in NPS_DDP for k in range(2)],
    allreduce_budget(lambda c: STEPS * len(model_of(c).tensors),
                     "one all-reduce per parameter tensor per step"),
    hint="each rank steps with the mean of all ranks' gradients: broadcast rank 0's weights "
         "once, then all-reduce every gradient tensor (MPI_SUM) and divide by the number of "
         "ranks",
)

# ddp_bucketed.c: caps of 0 (a bucket per tensor), 100 B, 1100 B and 1 MiB (one bucket).
DDP_BUCKETED = ddp_test(
    "ddp_bucketed", "ddp_bucketed_step", 20,
    lambda: [training_case(n, MODELS[0] if k % 2 == 0 else MODELS[(n + k) % len(MODELS)],
                           1 + (n + k) % 3, bucket_bytes=cap)
             for n in NPS_DDP for k, cap in enumerate((0, 100, 1100, 1 << 20))],
    allreduce_budget(lambda c: STEPS * len(plan_buckets(model_of(c), c["bucket_bytes"])),
                     "one MPI_Iallreduce per bucket per step, buckets filled from the "
                     "last tensor backwards and closed once they hold >= cap bytes",
                     blocking_why="a bucket is all-reduced with MPI_Iallreduce: a blocking "
                                  "all-reduce stops backward until it is done, so nothing "
                                  "overlaps"),
    hint="a bucket is tensors from the last backwards until >= cap bytes, started with "
         "MPI_Iallreduce once backward has filled it, and waited for before the update",
)

# ddp_grad_accum.c: 1, 2 and 3 micro-batches of 1 or 2 rows.
DDP_ACCUM = ddp_test(
    "ddp_grad_accum", "ddp_accum_step", 15,
    lambda: [training_case(n, MODELS[(n + k) % len(MODELS)], micro * (1 + (n + k) % 2),
                           micro=micro)
             for n in NPS_DDP for k, micro in enumerate((1, 2, 3))],
    allreduce_budget(lambda c: STEPS,
                     "one all-reduce of all gradients per optimizer step, after the last "
                     "micro-batch, not one per micro-batch"),
    hint="accumulate micro-batch gradients scaled by 1/micro, then all-reduce once per step",
)

DDP_TESTS = [DDP_NAIVE, DDP_BUCKETED, DDP_ACCUM]
