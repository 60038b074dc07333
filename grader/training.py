"""What the data-parallel training tests share: cases, inputs, outputs, checks, rules.

A training case trains a small MLP (grader/nn.py's twin of xt_mlp) for
STEPS steps. The grader draws one global batch per step and gives each rank
its consecutive slice of rows, and initial weights w0: rank 0's are the real
ones, every other rank gets different ones, so that only a broadcast makes
them agree. The program writes the weights after every step
("step<s>_<tensor>"), and every rank must hold the same ones, bit for bit.
The lectures' tables add the optimizer (its reference and tolerance) and
what each program may send.
"""

import numpy as np

import nn
from spec import amount, disagreement, hinted, Relative

STEPS = 3

# A returned loss against NumPy's float64 loss at the reference weights before the step.
# Measured over 6 seeds of lectures 2 and 3 (5094 losses): at most 2.8e-6 at a loss of 10,
# 8.8e-8 at 0.004. Returning the sum of two micro-batches' losses doubles it.
LOSS_TOLERANCE = Relative(1e-5, 1e-5)

# (dims, activation, loss): a deep narrow one, a wide one, regression and classification.
MODELS = [("6,16,16,3", "relu", "ce"), ("5,12,4", "gelu", "mse"), ("4,8,8,8,2", "gelu", "ce"),
          ("7,20,5", "relu", "mse")]


def model_of(case):
    return nn.Mlp(case["dims"], case["act"], case["loss"])


def training_case(n, model, rows, lr, **extra):
    """One case: np, the model (dims, act, loss), the learning rate (a decimal string,
    which the C side parses with atof), rows per rank and step, and extra params."""
    dims, act, loss = model
    return {"np": n, "dims": dims, "act": act, "loss": loss, "steps": STEPS, "lr": lr,
            "rows": rows, **extra}


def training_label(case):
    """'np=2 6,16,16,3 relu ce rows=2'."""
    p = case.params
    return f"np={case.np} {p['dims']} {p['act']} {p['loss']} rows={p['rows']}"


def training_inputs(case, rng):
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


def global_batches(case, inputs):
    """[(x, y)] of every step: the ranks' rows put back together."""
    x = np.concatenate(inputs["x"], axis=1)
    y = np.concatenate(inputs["y"], axis=1)
    return [(x[s], y[s]) for s in range(STEPS)]


def step_outputs(m, weights):
    """{"step<s>_<tensor>": values}, s from 1, for the flat weights after each step."""
    out = {}
    for s, w in enumerate(weights):
        for name, off, shape in m.tensors:
            out[f"step{s + 1}_{name}"] = w[off:off + int(np.prod(shape))]
    return out


def step_losses(case, inputs, weights):
    """Each rank's {"step<s>_loss": [loss]}: the loss a step returns, the mean over the
    rank's own rows at the weights before the step (rank 0's w0 before the first),
    from weights, the flat weights after each step."""
    m = model_of(case)
    before = [inputs["w0"][0]] + list(weights[:-1])
    return [{f"step{s + 1}_loss": np.array([m.mean_loss(before[s], inputs["x"][r][s], inputs["y"][r][s])])
             for s in range(STEPS)} for r in range(case.np)]


def is_loss(name):
    return name.endswith("_loss")


def identical_on_all_ranks(case, inputs, outs):
    """Every rank's weights bit for bit rank 0's, after every step."""
    m = model_of(case)
    for s in range(STEPS):
        found = disagreement(outs, [(f"step{s + 1}_{name}", name) for name, _, _ in m.tensors],
                             [(r, 0) for r in range(1, case.np)])
        if found:
            return [(found[1], f"after step {s + 1}, {found[0]}: data parallel ranks must "
                               f"hold identical weights; they start from rank 0's (a "
                               f"broadcast) and apply the same averaged gradient")]
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


hinted(identical_on_all_ranks,
       "cause: the ranks hold different weights: broadcast rank 0's weights before the first "
       "step, then every rank must step with the same gradient, the all-reduced one, read only "
       "after its request has completed")


def shard_locator(case, name, index, rank=None):
    """For the ZeRO stages' outputs step<s>_<tensor>: where tensor element `index` lies in
    the flat buffer and in whose shard (ceil(nparams / np) each, rank r from r * shard)."""
    tensor = name.split("_", 1)[-1]
    m = model_of(case)
    offsets = {t: off for t, off, _ in m.tensors}
    if tensor not in offsets or case.np < 2:
        return None
    flat = offsets[tensor] + index
    shard = -(-m.nparams // case.np)
    owner, pos = divmod(flat, shard)
    lo, hi = owner * shard, min(m.nparams, (owner + 1) * shard)
    which = ("the first element" if pos == 0 else "the last element" if flat == hi - 1
             else f"element {pos}")
    return f"flat {flat}: {which} of rank {owner}'s shard [{lo}, {hi})"
