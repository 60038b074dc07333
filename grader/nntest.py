#!/usr/bin/env python3
"""libxt's numeric layer (common/nn.c) against its NumPy twin (grader/nn.py).

    python3 grader/nntest.py [--seed N] [--exe build/common/tests/test_nn]

Three checks, each of which `make test` records on its own line:

  1. C agrees with NumPy. Random cases (seeded) go to build/common/tests/test_nn
     as .npy files in one directory, one launch runs them all, and every
     output is compared with nn.py in float64. The random numbers, the
     permutation and an MLP's initial weights must be bit-exact; the rest
     within the float32 tolerances below.
  2. nn.py's gradients agree with central finite differences
     (nn.finite_difference_check).
  3. Negative control: both checks fail when nn.py is subtly wrong (a GELU
     derivative without its factor 3, a cross-entropy gradient summed over
     the rows instead of averaged), so that their passing means something.

Tolerances (float32 results against the float64 reference, elementwise):
  - GEMM and the linear layer: |got - ref| <= 1e-5 * S, S being the same
    expression with every term replaced by its absolute value
    (|alpha| |op(A)| |op(B)| + |beta C|). A float32 dot product of length k
    is off by at most about k * 2^-24 * S: 6e-6 S for the k <= 100 used here.
  - activations, losses and their gradients, SGD:
    |got - ref| <= 1e-5 |ref| + 1e-6 m, m being the size of what the result
    is computed from (1 + |x| for an activation, 1 + the largest
    |logit - max| for cross-entropy, |w| + |lr g| for SGD): float32 cancels
    where the value is small. Softmax: 1e-5 |ref| (+ 1e-38 for subnormals).
  - the MLP: the whole tensor at once, |got - ref| <= 1e-5 max(1, max |ref|):
    the error of a chain of float32 products is relative to the tensor's
    size, not to each element (a near-zero sum may lose every digit).
Buffers the C side must overwrite start as NaN; those it must not touch
(a NULL gradient) must come back as they went in.
"""

import argparse
import contextlib
import os
import shutil
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import needs  # noqa: E402

needs.numpy()

import numpy as np  # noqa: E402

import launch  # noqa: E402
import nn  # noqa: E402

SEED = 20261122
EXE = os.path.join("build", "common", "tests", "test_nn")


# ------------------------------------------------------------------ comparing

def compare(what, got, ref, tol):
    """None when |got - ref| <= tol everywhere (NaN only where ref has NaN), else why not."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return f"{what}: shape {got.shape}, expected {ref.shape}"
    tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), ref.shape)
    err = np.abs(got - ref)
    bad = ~(err <= tol) & ~(np.isnan(got) & np.isnan(ref))
    if not bad.any():
        return None
    worst = np.where(bad, np.nan_to_num(err, nan=np.inf), -1.0)
    i = np.unravel_index(int(np.argmax(worst)), ref.shape)
    return (f"{what}: [{', '.join(map(str, i))}] expected {ref[i]:.9g} got {got[i]:.9g} "
            f"(tolerance {tol[i]:.2g}; {int(bad.sum())} of {bad.size} off)")


def exact(what, got, ref):
    """None when got has ref's shape and bits, else the first difference."""
    got, ref = np.asarray(got), np.asarray(ref)
    if got.shape != ref.shape:
        return f"{what}: shape {got.shape}, expected {ref.shape}"
    if ref.dtype == np.float32:
        got, ref = got.view(np.uint32), ref.view(np.uint32)
    diff = np.flatnonzero(got.ravel() != ref.ravel())
    if not diff.size:
        return None
    i = int(diff[0])
    return f"{what}: [{i}] expected {ref.ravel()[i]} got {got.ravel()[i]} ({diff.size} differ)"


def gemm_tol(*abs_terms):
    """1e-5 of the sum of the absolute terms (see the module's docstring)."""
    return 1e-5 * sum(abs_terms)


def elem_tol(ref, size):
    return 1e-5 * np.abs(ref) + 1e-6 * size


def mlp_tol(ref):
    ref = np.asarray(ref, dtype=np.float64)
    return 1e-5 * max(1.0, float(np.abs(ref).max()) if ref.size else 1.0)


# ---------------------------------------------------------------- the cases

def f32(x):
    return np.asarray(x, dtype=np.float32)


def hexf(v):
    """A float32 as a C99 hex literal: strtof reads back the very bits."""
    return float(np.float32(v)).hex()


class Cases:
    """Writes cases.txt and the inputs; remembers each case for judging."""

    def __init__(self, d):
        self.d = d
        self.cases = []  # (id, kind, params, inputs)

    def add(self, kind, params, **inputs):
        k = len(self.cases)
        for name, arr in inputs.items():
            np.save(os.path.join(self.d, f"{k}.{name}.npy"), arr)
        self.cases.append((k, kind, params, inputs))

    def write(self):
        with open(os.path.join(self.d, "cases.txt"), "w") as f:
            f.write("# <id> <kind> key=value ...: see common/tests/test_nn.c\n")
            for k, kind, params, _ in self.cases:
                text = " ".join(f"{key}={hexf(v) if isinstance(v, float) else v}"
                                for key, v in params.items())
                f.write(f"{k} {kind} {text}\n")


SEEDS = [0, 1, 42, 0x9E3779B97F4A7C15, (1 << 64) - 1]
BELOW = [1, 2, 3, 10, 1000003, (1 << 32) + 1, (1 << 63) + 1, (1 << 64) - 1]


def generate(d, rng):
    c = Cases(d)
    seeds = SEEDS + [int(rng.integers(0, 1 << 63)) * 2 + 1]
    for i, seed in enumerate(seeds):
        # 2^63 + 1 rejects about half of all draws: the redraw path is exercised.
        lo, hi = [(0.0, 1.0), (-1.0, 1.0), (-0.37, 2.5), (5.0, 5.0), (-3.0, -2.0), (0.0, 1e-3)][i]
        c.add("rng", dict(seed=seed, count=300, below=BELOW[i % len(BELOW)], lo=lo, hi=hi))
        c.add("rng", dict(seed=seed, count=50, below=BELOW[(i + 6) % len(BELOW)], lo=lo, hi=hi))
    for n in (0, 1, 2, 3, 10, 1000, 20000):
        c.add("perm", dict(seed=seeds[n % len(seeds)], n=n))
    c.add("perm", dict(seed=seeds[-1], n=257))

    def normal(*shape):
        return f32(rng.normal(size=shape))

    shapes = [(int(rng.integers(1, 10)), int(rng.integers(1, 10)), int(rng.integers(1, 10)))
              for _ in range(3)] + [(3, 4, 0), (0, 3, 5), (37, 29, 65)]
    for ta in (0, 1):
        for tb in (0, 1):
            for beta in (0.0, 1.0, -0.5):
                for m, n, k in shapes:
                    a = normal(k, m) if ta else normal(m, k)
                    b = normal(n, k) if tb else normal(k, n)
                    # beta = 0: C is not read, as in BLAS: NaN there must not show.
                    cc = f32(np.full((m, n), np.nan)) if beta == 0.0 else normal(m, n)
                    alpha = float(rng.choice([1.0, -0.75, 2.5]))
                    c.add("gemm", dict(ta=ta, tb=tb, m=m, n=n, k=k, alpha=alpha, beta=beta),
                          a=a, b=b, c=cc)
    for t in range(24):
        rows, fin, fout = int(rng.integers(0 if t == 0 else 1, 8)), int(rng.integers(1, 10)), \
            int(rng.integers(1, 10))
        null = ",".join(n for j, n in enumerate(("dx", "dw", "db")) if t >> j & 1) or "-"
        c.add("linear", dict(rows=rows, **{"in": fin}, out=fout, bias=t // 8 % 2, null=null),
              x=normal(rows, fin), w=normal(fin, fout), b=normal(fout), dy=normal(rows, fout),
              dw0=normal(fin, fout), db0=normal(fout))
    special = [0.0, -0.0, 1e-8, -1e-8, 1.0, -1.0, 5.0, -5.0, 20.0, -20.0, 1e4, -1e4]
    for act in ("relu", "gelu"):
        x = np.concatenate([f32(special), normal(200) * 3])
        c.add("act", dict(act=act), x=x, dy=normal(x.size))
    for kind in ("mse", "ce"):
        for t in range(8):
            rows, cols = (0, 3) if t == 0 else (int(rng.integers(1, 8)), int(rng.integers(1, 10)))
            pred = normal(rows, cols) * 3
            if kind == "ce" and t == 1:  # far from zero: only subtracting the max keeps it finite
                rows, cols = 3, 4
                pred = f32([[1000, -1000, 999, 0], [-1000] * 4, [-1000, 1000, 1000, 3]])
            target = (rng.integers(0, cols, rows).astype(np.int32) if kind == "ce"
                      else normal(rows, cols))
            c.add(kind, dict(rows=rows, cols=cols), pred=pred, target=target)
    for x in (normal(5, 7) * 4, f32([[1000, -1000, 999, 0], [-1000] * 4, [88, 89, 90, 91]]),
              f32([[3.0], [-1000.0]]), normal(1, 9)):
        c.add("softmax", dict(rows=x.shape[0], cols=x.shape[1]), x=x)
    for n in (0, 1, 100):
        c.add("sgd", dict(lr=float(rng.choice([0.1, 0.01, -0.3]))), p=normal(n), g=normal(n))
    for t in range(24):
        nl = 1 + t % 3
        dims = [int(rng.integers(1, 10)) for _ in range(nl + 1)]
        act = ("relu", "gelu")[t // 3 % 2]
        loss = ("mse", "ce")[t // 6 % 2]
        batches = 1 + t // 12
        m = nn.Mlp(dims, act, loss)
        inputs = dict(g0=normal(m.nparams))
        for b in range(batches):
            rows = int(rng.integers(1, 8))
            inputs[f"x{b}"] = normal(rows, dims[0])
            inputs[f"t{b}"] = (rng.integers(0, dims[-1], rows).astype(np.int32)
                               if loss == "ce" else normal(rows, dims[-1]))
        c.add("mlp", dict(dims=",".join(map(str, dims)), act=act, loss=loss,
                          seed=int(rng.integers(0, 1 << 62)), batches=batches,
                          scale=[1.0, 0.5, 0.3, 2.0][t % 4]), **inputs)
    c.write()
    return c.cases


# ------------------------------------------------------------------- judging

def judge_rng(p, out):
    g = [nn.Rng(p["seed"]) for _ in range(3)]
    n = p["count"]
    u64 = np.array([g[0].u64() for _ in range(n)], dtype=np.uint64)
    below = np.array([g[1].below(p["below"]) for _ in range(n)], dtype=np.uint64)
    uni = np.array([g[2].uniform(np.float32(p["lo"]), np.float32(p["hi"])) for _ in range(n)],
                   dtype=np.float32)
    return [exact("xt_rng_u64", out("u64"), u64),
            exact(f"xt_rng_below(n={p['below']})", out("below"), below),
            exact(f"xt_rng_uniform({p['lo']}, {p['hi']})", out("uniform"), uni)]


def judge_perm(p, out):
    return [exact("xt_permutation", out("perm"), nn.permutation(p["seed"], p["n"]))]


def judge_gemm(p, x, out):
    a, b, c = (x[n].astype(np.float64) for n in "abc")
    a, b = (a.T if p["ta"] else a), (b.T if p["tb"] else b)
    alpha, beta = np.float32(p["alpha"]), np.float32(p["beta"])
    ref = float(alpha) * (a @ b)
    size = abs(float(alpha)) * (np.abs(a) @ np.abs(b))
    if beta != 0:
        ref = ref + float(beta) * c
        size = size + abs(float(beta)) * np.abs(c)
    return [compare("C", out("out"), ref, gemm_tol(size))]


def judge_linear(p, x, out):
    xs, w, b, dy, dw0, db0 = (x[n].astype(np.float64) for n in ("x", "w", "b", "dy", "dw0",
                                                                  "db0"))
    ax, aw, ady = np.abs(xs), np.abs(w), np.abs(dy)
    y = xs @ w + (b if p["bias"] else 0.0)
    ytol = gemm_tol(ax @ aw, np.abs(b) if p["bias"] else 0.0)
    null = p["null"].split(",")
    dx = np.full(xs.shape, np.nan) if "dx" in null else dy @ w.T
    dw = dw0 if "dw" in null else dw0 + xs.T @ dy
    db = db0 if "db" in null else db0 + dy.sum(axis=0)
    return [compare("y", out("y"), y, ytol),
            compare("dx (overwritten)", out("dx"), dx, gemm_tol(ady @ aw.T)),
            compare("dW (+=)", out("dw"), dw, gemm_tol(np.abs(dw0), ax.T @ ady)),
            compare("db (+=)", out("db"), db, gemm_tol(np.abs(db0), ady.sum(axis=0)))]


def judge_act(p, x, out):
    xs, dy = x["x"].astype(np.float64), x["dy"].astype(np.float64)
    y = nn.act_forward(p["act"], xs)
    dx = nn.act_backward(p["act"], dy, xs)
    return [compare("forward", out("y"), y, elem_tol(y, 1 + np.abs(xs))),
            compare("backward", out("dx"), dx, elem_tol(dx, np.abs(dy) * (1 + np.abs(xs)))),
            compare("backward in place (dx = dy)", out("dx_inplace"), dx,
                    elem_tol(dx, np.abs(dy) * (1 + np.abs(xs))))]


def judge_loss(kind, p, x, out):
    pred = x["pred"].astype(np.float64)
    if kind == "mse":
        target = x["target"].astype(np.float64)
        loss, d = nn.mse_loss(pred, target)
        size = float(np.square(pred - target).mean()) if pred.size else 0.0
        dsize = np.abs(pred - target) * 2 / max(pred.size, 1)
    else:
        loss, d = nn.cross_entropy_loss(pred, x["target"])
        span = pred.max(axis=1, keepdims=True) - pred if pred.size else np.zeros((0, 1))
        size = 1 + float(span.max()) if span.size else 0.0
        dsize = np.ones_like(pred) / max(pred.shape[0], 1)
    got = out("loss")
    return [compare("loss", got[:1], [loss], elem_tol(loss, size)),
            compare("loss without gradient", got[1:], [loss], elem_tol(loss, size)),
            compare("gradient", out("d"), d, elem_tol(d, dsize))]


def judge_softmax(p, x, out):
    y = nn.softmax_rows(x["x"].astype(np.float64))
    # Subnormal float32 results (e^-100) keep few digits: 1e-38 absolute covers them.
    tol = 1e-5 * np.abs(y) + 1e-38
    return [compare("y", out("y"), y, tol), compare("in place (y = x)", out("y_inplace"), y, tol)]


def judge_sgd(p, x, out):
    w, g = x["p"].astype(np.float64), x["g"].astype(np.float64)
    lr = float(np.float32(p["lr"]))
    ref = w - lr * g
    return [compare("params", out("out"), ref, elem_tol(ref, np.abs(w) + np.abs(lr * g)))]


def judge_mlp(p, x, out):
    dims = [int(v) for v in p["dims"].split(",")]
    m = nn.Mlp(dims, p["act"], p["loss"])
    L, B, scale = m.nlayers, p["batches"], float(np.float32(p["scale"]))
    problems = [exact("dims (nlayers, widths)", out("dims"), np.array([L] + dims, np.int64))]
    layout = np.array([[int(name[1:]), *(shape if len(shape) == 2 else (1, shape[0])), off,
                        int(np.prod(shape))] for name, off, shape in m.tensors], dtype=np.int64)
    names = np.zeros((len(m.tensors), 8), np.uint8)
    for t, (name, _, _) in enumerate(m.tensors):
        names[t, :len(name)] = np.frombuffer(name.encode(), np.uint8)
    problems += [exact("tensor layout (layer, rows, cols, offset, count)", out("layout"), layout),
                 exact("tensor names", out("names"), names)]
    params = m.randomize(p["seed"])
    problems.append(exact(f"xt_mlp_randomize(seed {p['seed']})", out("params"), params))
    g0 = x["g0"].astype(np.float64)
    grads, losses = [], []
    for b in range(B):
        xb, tb = x[f"x{b}"], x[f"t{b}"]
        tb = tb if p["loss"] == "ce" else tb.astype(np.float64)
        y, _ = m.forward(params, xb)
        problems.append(compare(f"batch {b} forward", out(f"y{b}"), y, mlp_tol(y)))
        loss, g = m.loss_and_grads(params, xb, tb)
        losses.append(loss)
        grads.append(g)
    problems.append(compare("losses backward returned", out("loss"), losses, mlp_tol(losses)))
    problems.append(compare("xt_mlp_loss", out("loss_only"), losses, mlp_tol(losses)))
    total = g0 + scale * sum(grads)
    problems.append(compare(f"grads: g0 + {scale:g} x the sum over {B} batch(es)",
                            out("grads"), total, mlp_tol(total)))
    problems.append(compare("grads after zero_grad, no hook, scale 1", out("grads_plain"),
                            grads[0], mlp_tol(grads[0])))
    # The hook: layers L-1 .. 0 each batch; at each call, that layer and the ones after it
    # hold this batch's gradients, the ones before it do not yet.
    want = np.array(list(range(L - 1, -1, -1)) * B, dtype=np.int32)
    problems.append(exact("hook's layers", out("hook_layers"), want))
    snaps = out("hook_grads")
    layer_of = np.concatenate([np.full(int(np.prod(shape)), int(name[1:]))
                               for name, _, shape in m.tensors])
    if problems[-1] is None:
        for i, l in enumerate(want):
            b = i // L
            before = g0 + scale * sum(grads[:b])
            after = before + scale * grads[b]
            ref = np.where(layer_of >= l, after, before)
            problems.append(compare(f"grads seen by the hook of batch {b}, layer {l}",
                                    snaps[i], ref, mlp_tol(ref)))
    return problems


def judge(cases, d, kinds=None):
    """Problems of the C outputs in d against nn.py, one line each."""
    problems = []
    for k, kind, p, x in cases:
        if kinds and kind not in kinds:
            continue

        def out(name, k=k):
            return np.load(os.path.join(d, f"{k}.{name}.npy"))

        desc = f"case {k} {kind} " + " ".join(f"{a}={v}" for a, v in p.items())
        try:
            if kind == "rng":
                got = judge_rng(p, out)
            elif kind == "perm":
                got = judge_perm(p, out)
            elif kind in ("mse", "ce"):
                got = judge_loss(kind, p, x, out)
            else:
                got = globals()[f"judge_{kind}"](p, x, out)
        except (OSError, ValueError) as e:
            got = [f"no output: {e}"]
        problems += [f"{desc}: {g}" for g in got if g]
    return problems


# -------------------------------------------------------------------- checks

def c_versus_numpy(exe=EXE, work=None, seed=SEED):
    """(ok, lines, cases, dir): every case through the C binary, judged against nn.py."""
    d = work or os.path.join("build", "selftest", "nn")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    if not os.path.exists(exe):
        return False, [f"{exe} is not built: run make"], [], d
    cases = generate(d, np.random.default_rng(seed))
    r = launch.run(launch.mpirun_command(1, [exe, d]), timeout=60)
    lines = [ln for ln in r.output.splitlines() if ln.startswith("FAIL")]
    if r.returncode != 0 and not lines:
        lines = [f"{exe} {d}: exit {r.returncode}"] + r.output.strip().splitlines()[-10:]
    lines += judge(cases, d)
    return not lines, lines, cases, d


def gradients(seed=SEED):
    """(ok, lines): nn.py's gradients against central finite differences."""
    bad = nn.finite_difference_check(np.random.default_rng(seed))
    return not bad, bad


@contextlib.contextmanager
def patched(name, wrong):
    """nn.<name> replaced by wrong(original, ...) for the duration."""
    original = getattr(nn, name)
    setattr(nn, name, lambda *a: wrong(original, *a))
    try:
        yield
    finally:
        setattr(nn, name, original)


def gelu_without_3(original, act, dy, x):
    """GELU' with d/dx (x + 0.044715 x^3) taken as 1 + 0.044715 x^2: a plausible slip."""
    if act != "gelu":
        return original(act, dy, x)
    t = np.tanh(nn.GELU_C * (x + 0.044715 * x ** 3))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * nn.GELU_C * (1.0 + 0.044715 * x * x))


def ce_summed(original, logits, labels):
    """The cross-entropy gradient of the sum over rows, while the loss is their mean."""
    loss, d = original(logits, labels)
    return loss, d * logits.shape[0]


def negative_control(cases=None, d=None, seed=SEED):
    """(ok, lines): the checks above fail on a wrong nn.py, and nn.py is restored after."""
    lines = []
    before = (nn.act_backward, nn.cross_entropy_loss)
    for name, wrong, what in (("act_backward", gelu_without_3, "GELU' without its factor 3"),
                              ("cross_entropy_loss", ce_summed, "cross-entropy gradient summed")):
        with patched(name, wrong):
            fd = nn.finite_difference_check(np.random.default_rng(seed))
            c = judge(cases, d, kinds=("act", "mlp")) if cases and name == "act_backward" else None
        if not fd:
            lines.append(f"{what}: finite_difference_check found nothing wrong")
        if c is not None and not c:
            lines.append(f"{what}: C still agrees with the wrong nn.py")
    if (nn.act_backward, nn.cross_entropy_loss) != before:
        lines.append("nn.py was not restored")
    return not lines, lines


def run(build_dir="build", seed=SEED, work=None):
    """(ok, lines): all three checks, a summary line each, then the problems."""
    exe = os.path.join(build_dir, "common", "tests", "test_nn")
    start = time.monotonic()
    ok1, bad1, cases, d = c_versus_numpy(exe, work, seed)
    t1 = time.monotonic() - start
    ok2, bad2 = gradients(seed)
    ok3, bad3 = negative_control(cases, d, seed)
    kinds = sorted({kind for _, kind, _, _ in cases})
    lines = [f"{'ok  ' if ok1 else 'FAIL'}  C agrees with nn.py: {len(cases)} cases "
             f"({', '.join(kinds)}) ({t1:.1f} s)",
             f"{'ok  ' if ok2 else 'FAIL'}  nn.py's gradients match central finite differences",
             f"{'ok  ' if ok3 else 'FAIL'}  negative control: a wrong GELU' and a wrong "
             f"cross-entropy gradient are caught"]
    lines += ["      " + ln for ln in bad1 + bad2 + bad3]
    return ok1 and ok2 and ok3, lines


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--build", default="build", help="the build directory (default: build)")
    args = ap.parse_args()
    os.chdir(ROOT)
    launch.install_signal_handlers()
    start = time.monotonic()
    ok, lines = run(args.build, args.seed)
    print("\n".join(lines))
    print(f"nntest: {'all agree' if ok else 'FAILED'} (seed {args.seed}, "
          f"{time.monotonic() - start:.1f} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
