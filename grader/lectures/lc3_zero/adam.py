"""Lecture 3's optimizer exercises: adam.c (adam_update) and mixed_precision.c
(mixed_precision_step). Both run every rank on its own, rank-distinct problem.

adam_update. Each rank gets initial parameters p0 and the gradients of every
step, with scales from 1e-4 to 1e2 per parameter, about 10% exact zeros and
10% tiny values (1e-9 .. 1e-7, next to eps), and a last parameter whose
gradient is always zero (only weight decay moves it). The program takes
`steps` AdamW steps and writes the parameters after each; the reference is
nn.adam_update in float64, with the hyperparameters rounded to float32 as
the C side reads them.
Tolerance 1e-5 (lr + |expected|). Measured, the worst of 90 seeds: 4.4e-6
(lr + |p|), after 29 steps. The float32 decay factor 1 - lr wd and the update
are rounded every step, and those errors add up over 30 steps; one step
errs by about 1.5e-7. Every mutant is off by 1e-4 |p| or more from the
first step it differs in: weight decay as L2 loses the decay lr wd |p|
(1e-4 |p| here), and the others change a step of size about lr by 1% or
more. Rule: the peak of xt_alloc's optimizer bytes is exactly 8 n per rank,
the two moments.

mixed_precision_step. Each rank trains its own small MLP (no data
parallelism) with a bf16 compute copy, fp32 master weights, AdamW and
dynamic loss scaling. At one or two planted steps the grader sets one input
of that step's batch to 1e30: finite, and finite in float64 all through,
but the scaled gradients overflow float32. MSE squares the huge output
(1e60). GELU's backward multiplies 1 - tanh^2 = 0 by 3 * 0.044715 x^2,
which is inf for |x| > 5e19: NaN. ReLU with cross-entropy is left out on
purpose: the loss gradient of a row is bounded by 1, and it is exactly zero
when the row's label has the (huge) largest logit, so an overflow would not
be certain. The input planted is the one with the largest positive weight
into the first layer, so that ReLU passes it on.

The check goes step by step from each rank's own outputs, so that no bf16
rounding tie can make it flaky (master_0 = w0):
  a. the compute copy equals nn.bf16_round(master_{s-1}) bit for bit;
  b. a planted step is skipped and leaves the master unchanged bit for bit;
     no other step is skipped;
  c. on a clean step the gradient equals the float64 gradient of the
     program's own compute copy, times the scale in force, rounded to bf16,
     divided by the scale, within one bf16 ulp: 2^-7 |g|, plus 1e-5 of the
     largest gradient for sums that cancel. Measured (90 seeds): at most one
     ulp, where float32 and float64 fall on both sides of a rounding
     boundary. And grad x scale must be a bf16 value exactly, which catches
     gradients never rounded (they are within the ulp);
  d. the master equals float64 AdamW applied to the program's master_{s-1}
     and its gradient of step s, the float64 moments carried along from its
     earlier gradients. Tolerance 2e-6 (lr + |w|); measured, worst of 90
     seeds: 2.0e-7 (lr + |w|). A master kept in bf16 is off by up to
     2^-8 |w|, a wrong bias correction by a tenth of a step;
  e. the scale follows GradScaler's rule exactly: halved on a planted step,
     doubled after `interval` clean steps in a row, the count reset by both.
Rule: the peaks of xt_alloc's master bytes = 4 nparams and optimizer bytes =
8 nparams.
"""

import numpy as np

import nn
from spec import amount, bit_differences, Relative, test
from training import model_of


# ------------------------------------------------------------------ adam.c

# (n, steps, lr, beta1, beta2, eps, wd): Adam and AdamW, one parameter to a
# few hundred, short and long runs, defaults and unusual betas.
ADAM_CONFIGS = [
    (1, 12, "0.1", "0.9", "0.999", "1e-08", "0"),
    (5, 20, "0.01", "0.9", "0.999", "1e-08", "0.01"),
    (300, 30, "0.001", "0.9", "0.95", "1e-06", "0.1"),
    (257, 15, "0.05", "0.8", "0.99", "1e-05", "0"),
    (64, 25, "0.003", "0.5", "0.9", "1e-08", "0.1"),
]
HP_KEYS = ("lr", "beta1", "beta2", "eps", "wd")


def hyperparameters(case):
    """The case's AdamW hyperparameters as the C side reads them: atof, then float."""
    return {k: float(np.float32(float(case[k]))) for k in HP_KEYS}


def optimizer_words(p):
    """'AdamW wd=0.1 lr=0.01 beta1=0.9 beta2=0.999': every hyper-parameter by the name
    the summary of failed cases uses."""
    kind = "Adam" if float(p["wd"]) == 0 else "AdamW"
    return f"{kind} wd={p['wd']} lr={p['lr']} beta1={p['beta1']} beta2={p['beta2']}"


def adam_label(case):
    p = case.params
    return f"np={case.np} n={p['n']} steps={p['steps']} {optimizer_words(p)} eps={p['eps']}"


def adam_inputs(case, rng):
    """Each rank's p0 and gradients: scales 1e-4..1e2 per parameter, varying per step;
    about 10% exact zeros and 10% tiny values; the last parameter never gets a gradient."""
    n, steps = case["n"], case["steps"]
    p0, grads = [], []
    for _ in range(case.np):
        p0.append(rng.normal(0, 1, n).astype(np.float32))
        scale = 10.0 ** rng.uniform(-4, 2, n)
        g = rng.normal(0, 1, (steps, n)) * scale * 10.0 ** rng.uniform(-0.5, 0.5, (steps, 1))
        pick = rng.random((steps, n))
        g[pick < 0.1] = 0.0
        tiny = (pick >= 0.1) & (pick < 0.2)
        g[tiny] = rng.choice([-1.0, 1.0], int(tiny.sum())) * 10.0 ** rng.uniform(-9, -7,
                                                                                  int(tiny.sum()))
        if n > 1:
            g[:, -1] = 0.0
        grads.append(g.astype(np.float32))
    return {"p0": p0, "grads": grads}


def adam_reference(case, inputs):
    hp = hyperparameters(case)
    out = []
    for r in range(case.np):
        w = inputs["p0"][r].astype(np.float64)
        m, v = np.zeros_like(w), np.zeros_like(w)
        mine = {}
        for t in range(1, case["steps"] + 1):
            w, m, v = nn.adam_update(w, inputs["grads"][r][t - 1].astype(np.float64), m, v, t, hp)
            mine[f"step{t}_params"] = w.copy()
        out.append(mine)
    return out


def adam_tolerance(case, inputs, name, rank):
    return Relative(1e-5 * hyperparameters(case)["lr"], 1e-5)


def memory_exactly(kind, per_param, count, what):
    """A rule: each rank's peak of xt_alloc's `kind` bytes is exactly per_param x count(case)."""
    def rule(case, inputs, records):
        n = count(case)
        want = per_param * n
        formula = f"{what}, {per_param} B x {amount(n, ' parameters')}"
        for r, rec in enumerate(records):
            got = rec.memory.get(kind, (0, 0))[1]
            if got == 0 and want:
                return [(r, f"rank {r} allocated no {kind} memory through xt_alloc "
                            f"(XT_MEM_{kind.upper()}); expected exactly {want} B ({formula}): "
                            f"allocate it with xt_alloc, which counts it (malloc'd memory is "
                            f"not counted)")]
            if got != want:
                return [(r, f"rank {r}'s {kind} memory (xt_alloc XT_MEM_{kind.upper()}) "
                            f"peaked at {got} B, expected exactly {want} B ({formula})")]
        return []
    return rule


@test("adam", points=10,
      inputs=adam_inputs, reference=adam_reference, tolerance=adam_tolerance, label=adam_label,
      rules=[memory_exactly("optimizer", 8, lambda c: c["n"], "the two fp32 moments")],
      forbidden=[(r"^xt_adam_update$", "calls {}, libxt's copy of the update this exercise "
                                       "writes: write the update yourself")],
      hint="AdamW: p = p (1 - lr wd); m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2; "
           "p -= lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps), t from 1; m and v are "
           "stored back for the next step")
def adam_update(rng):
    """Every configuration of ADAM_CONFIGS, on one rank and on two."""
    specs = []
    for n, steps, lr, b1, b2, eps, wd in ADAM_CONFIGS:
        for np_ in (1, 2):
            specs.append({"np": np_, "n": n, "steps": steps, "lr": lr, "beta1": b1,
                          "beta2": b2, "eps": eps, "wd": wd})
    return specs


# ------------------------------------------------------- mixed_precision.c

PLANT = np.float32(1e30)  # finite, but its products overflow float32

# (np, (dims, act, loss), steps, interval, planted overflow steps, scale0, lr, beta2, wd)
MIXED_CONFIGS = [
    # overflow at step 1; the scale grows at 3, halves at 5, grows again at 7
    (1, ("6,16,16,3", "gelu", "ce"), 8, 2, (1, 5), "65536", "0.01", "0.999", "0.01"),
    # 2 clean steps, then an overflow resets the count: growth only at step 6
    (2, ("5,12,4", "relu", "mse"), 7, 3, (3,), "1024", "0.01", "0.95", "0"),
    # grows at 2, 4; overflow at 5; grows at 7: small lr, so the bf16 copy lags the master
    (2, ("7,20,5", "gelu", "mse"), 8, 2, (5,), "65536", "0.0005", "0.999", "0.1"),
    # two overflows in a row from the start, then growth at 4 and 6
    (1, ("4,8,8,8,2", "gelu", "ce"), 6, 2, (1, 2), "1024", "0.003", "0.999", "0"),
    # grows at 3 after 3 clean steps, then an overflow
    (2, ("6,16,16,3", "gelu", "ce"), 6, 3, (4,), "65536", "0.01", "0.999", "0.01"),
    # overflow, growth at 4, overflow again
    (1, ("5,12,4", "relu", "mse"), 7, 2, (2, 6), "65536", "0.005", "0.99", "0.1"),
]


def planted_steps(case):
    return [int(s) for s in str(case["overflow"]).split(",")]


def mixed_label(case):
    p = case.params
    return (f"np={case.np} {p['dims']} {p['act']} {p['loss']} steps={p['steps']} "
            f"{optimizer_words(p)} scale0={p['scale0']} interval={p['interval']} "
            f"overflow at step {p['overflow'].replace(',', ' and ')}")


def mixed_inputs(case, rng):
    """Each rank's own batches and w0, with PLANT in one input of each planted step."""
    m = model_of(case)
    steps, rows = case["steps"], case["rows"]
    din, dout = m.dims[0], m.dims[-1]
    xs, ys, ws = [], [], []
    for _ in range(case.np):
        x = rng.uniform(-1, 1, (steps, rows, din)).astype(np.float32)
        if m.loss == "ce":
            y = rng.integers(0, dout, (steps, rows)).astype(np.int32)
        else:
            y = rng.normal(0, 1, (steps, rows, dout)).astype(np.float32)
        w0 = rng.normal(0, 0.5, m.nparams).astype(np.float32)
        w_first = m.views(w0)["W0"]
        feature = int(np.argmax(w_first.max(axis=1)))  # ReLU lets its huge value through
        for s in planted_steps(case):
            x[s - 1, int(rng.integers(0, rows)), feature] = PLANT
        xs.append(x)
        ys.append(y)
        ws.append(w0)
    return {"x": xs, "y": ys, "w0": ws}


def no_reference(case, inputs):
    return [{} for _ in range(case.np)]


def fmt(v):
    return f"{float(v):.9g}"


def first_bad(bad):
    idx = np.flatnonzero(bad)
    return int(idx[0]), int(idx.size)


def mixed_check(case, inputs, outs):
    """Steps a-e of the module docstring, step by step, from each rank's own outputs."""
    m = model_of(case)
    n = m.nparams
    hp = hyperparameters(case)
    planted = planted_steps(case)
    interval = int(case["interval"])
    for r in range(case.np):
        o = outs[r]
        x, y = inputs["x"][r], inputs["y"][r]
        master_prev = inputs["w0"][r].astype(np.float32)
        mom_m, mom_v = np.zeros(n), np.zeros(n)
        t = 0
        scale = np.float32(float(case["scale0"]))
        clean = 0
        for s in range(1, case["steps"] + 1):
            got = {}
            for what, size in (("master", n), ("compute", n), ("grad", n), ("scale", 1),
                               ("skipped", 1), ("loss", 1)):
                key = f"step{s}_{what}"
                a = o.get(key)
                if a is None:
                    return [(r, f"rank {r} wrote no '{key}'")]
                if a.size != size:
                    return [(r, f"rank {r} '{key}' has {a.size} elements, expected {size}")]
                got[what] = a.reshape(-1)
            prev = "w0" if s == 1 else f"step {s - 1}'s master"
            where = f"rank {r} step {s}"

            # b: planted steps skipped, the others not.
            skipped = int(got["skipped"][0])
            if s in planted and skipped != 1:
                row, col = np.argwhere(x[s - 1] == PLANT)[0]
                return [(r, f"{where}: 'step{s}_skipped' expected 1 got {skipped}: the grader "
                            f"planted x[{row}][{col}] = 1e30 in this step's batch, so the scaled "
                            f"gradients overflow (inf or NaN) and the step must be skipped")]
            if s not in planted and skipped != 0:
                return [(r, f"{where}: 'step{s}_skipped' expected 0 got {skipped}: this "
                            f"step's gradients are finite, so it must not be skipped")]

            # a: the compute copy is the master rounded to bf16, bit for bit.
            want = nn.bf16_round(master_prev)
            diff = bit_differences(got["compute"], want)
            if diff:
                i, k = diff
                return [(r, f"{where}: 'step{s}_compute'[{i}] expected {fmt(want[i])} got "
                            f"{fmt(got['compute'][i])} ({k} of {n} differ): the compute copy "
                            f"must be {prev} rounded to the nearest bf16, ties to even "
                            f"(xt_bf16_round), bit for bit")]

            if skipped:
                # b: the master is untouched on a skipped step.
                diff = bit_differences(got["master"], master_prev)
                if diff:
                    i, k = diff
                    nan = int(np.isnan(got["master"]).sum())
                    nan = f", {nan} of them NaN" if nan else ""
                    return [(r, f"{where}: 'step{s}_master'[{i}] expected {fmt(master_prev[i])} "
                                f"got {fmt(got['master'][i])} ({k} of {n} differ{nan}): a "
                                f"skipped step leaves the master unchanged, bit for bit")]
                want_scale = scale * np.float32(0.5)
                clean = 0
            else:
                # c: the gradient: bf16 values at the scale in force, unscaled.
                loss, g64 = m.loss_and_grads(got["compute"].astype(np.float64), x[s - 1],
                                             y[s - 1])
                if not abs(float(got["loss"][0]) - loss) <= 1e-5 * (1 + abs(loss)):
                    return [(r, f"{where}: 'step{s}_loss' expected {fmt(loss)} got "
                                f"{fmt(got['loss'][0])}: *loss is the loss of this step's "
                                f"compute copy on the rank's rows, unscaled, as xt_mlp_backward "
                                f"returns it")]
                scaled = (g64 * float(scale)).astype(np.float32)
                want = nn.bf16_round(scaled).astype(np.float64) / float(scale)
                g = got["grad"].astype(np.float64)
                tol = (2.0 ** -7 * np.maximum(np.abs(want), np.abs(g))
                       + 1e-5 * np.abs(want).max())
                bad = ~(np.abs(g - want) <= tol)
                if bad.any():
                    i, k = first_bad(bad)
                    return [(r, f"{where}: 'step{s}_grad'[{i}] expected {fmt(want[i])} got "
                                f"{fmt(got['grad'][i])} ({k} of {n} wrong): the true "
                                f"gradient of this step's compute copy, computed at loss "
                                f"scale {fmt(scale)}, rounded to bf16, then divided by the "
                                f"scale")]
                prod = got["grad"].astype(np.float32) * scale
                bad = ~nn.is_bf16(prod)
                if bad.any():
                    i, k = first_bad(bad)
                    return [(r, f"{where}: 'step{s}_grad'[{i}] = {fmt(got['grad'][i])} times "
                                f"the scale {fmt(scale)} is {fmt(prod[i])}, not a bf16 value "
                                f"({k} of {n}): round every scaled gradient to bf16 before "
                                f"unscaling")]
                # d: AdamW on the fp32 master with the program's own gradient.
                t += 1
                w, mom_m, mom_v = nn.adam_update(master_prev.astype(np.float64), g, mom_m,
                                                 mom_v, t, hp)
                tol = 2e-6 * (hp["lr"] + np.abs(w))
                bad = ~(np.abs(got["master"] - w) <= tol)
                if bad.any():
                    i, k = first_bad(bad)
                    lost = (" (every master weight is a bf16 value: the master must stay fp32, "
                            "or small updates round away)" if nn.is_bf16(got["master"]).all()
                            else "")
                    return [(r, f"{where}: 'step{s}_master'[{i}] expected {fmt(w[i])} got "
                                f"{fmt(got['master'][i])} ({k} of {n} wrong): AdamW step {t} "
                                f"(skipped steps do not count) on the fp32 master from "
                                f"{prev}, with this step's unscaled gradient{lost}")]
                clean += 1
                want_scale = scale
                if clean == interval:
                    want_scale = scale * np.float32(2.0)
                    clean = 0

            # e: GradScaler's rule.
            if got["scale"].astype(np.float32)[0] != want_scale:
                why = ("an overflow halves it" if skipped else
                       f"it doubles after {interval} clean steps in a row, the count restarting "
                       f"after every growth and every overflow")
                return [(r, f"{where}: 'step{s}_scale' expected {fmt(want_scale)} got "
                            f"{fmt(got['scale'][0])}: the loss scale was {fmt(scale)}; {why}")]
            scale = want_scale
            master_prev = got["master"].astype(np.float32)
    return []


@test("mixed_precision", points=15,
      inputs=mixed_inputs, reference=no_reference, label=mixed_label,
      check=mixed_check, check_first=True,
      rules=[memory_exactly("master", 4, lambda c: model_of(c).nparams,
                            "one fp32 copy of the weights"),
             memory_exactly("optimizer", 8, lambda c: model_of(c).nparams,
                            "the two fp32 moments")],
      hint="compute copy = bf16(master); backward at the loss scale; gradients rounded to "
           "bf16; not all finite: skip, halve the scale; else divide by the scale, AdamW on "
           "the fp32 master, double the scale after `interval` clean steps in a row")
def mixed_precision_step(rng):
    """One case per configuration of MIXED_CONFIGS."""
    specs = []
    for np_, (dims, act, loss), steps, interval, over, scale0, lr, b2, wd in MIXED_CONFIGS:
        specs.append({"np": np_, "dims": dims, "act": act, "loss": loss, "steps": steps,
                      "rows": 3, "lr": lr, "beta1": "0.9", "beta2": b2, "eps": "1e-08",
                      "wd": wd, "scale0": scale0, "interval": interval,
                      "overflow": ",".join(map(str, over))})
    return specs
