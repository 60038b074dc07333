#!/usr/bin/env python3
"""libxt's numeric layer (common/nn.c) and the lecture kits' numeric pieces against
their NumPy twins (grader/nn.py).

    python3 grader/nntest.py [--seed N] [--build DIR]

Three checks, each of which `make test` records on its own line:

  1. C agrees with NumPy. Random cases (seeded) go as .npy files into one
     directory, which build/common/tests/test_nn (libxt's layers) and each
     kit's build/grader/lectures/<lecture>/kit/tests/test_kit (its pieces: a
     pipeline stage, attention blocks, routing and experts) run, one launch
     each, every program the kinds it knows; every output is compared with
     nn.py in float64. The random numbers, the
     permutation and an MLP's initial weights must be bit-exact; the rest
     within the float32 tolerances below.
  2. nn.py's gradients agree with central finite differences
     (nn.finite_difference_check).
  3. Negative control: both checks fail when nn.py is subtly wrong (a GELU
     derivative without its factor 3, a cross-entropy gradient summed over
     the rows instead of averaged), so that their passing means something;
     and the comparison with C fails on a bf16 rounding with ties away from
     zero or with NaN rounded like a number, on Adam without its bias
     correction, and on AdamW's decay applied after the update. The
     transformer pieces' slips (TRANSFORMER_SLIPS), each with the check that
     catches it: attention's backward without 1/sqrt(hd) in dQ and dK
     (finite differences and C), attention without the causal mask and query
     head j on KV head j % hkv (C only: made the same way forward and
     backward, the gradients stay consistent), RMSNorm's dgamma without rstd,
     SiLU' taken as sigmoid, and the embedding's gradient assigned instead of
     added for repeated tokens (finite differences and C).

Beside the comparisons, test_nn checks in C that the layer-by-layer MLP API
(own buffers per layer) gives the bits of xt_mlp_forward/backward, and
check 1 runs `PROGRAM --die MODE` to see the layer API called out of order,
a token outside the embedding table, hkv not dividing hq and a pipeline
stage misused (a backward with no forward, the weight part first, the loss
on a stage that is not the last, a micro-batch forwarded twice) stop with
their messages (OUT_OF_ORDER). bf16 rounding must be bit-exact, and
nn.bf16_round is itself checked against rounding done by arithmetic
(bf16_reference).

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
  - Adam: 1e-6 of what the weight has been through, see ADAM_RTOL.
  - the transformer pieces (TRANSFORMER_RTOL), each tensor at once:
    |got - ref| <= rtol max(1, max |ref|), rtol ten times the worst
    measured over 31 seeds: RMSNorm 3e-6 (measured 2.9e-7), SwiGLU 4e-6
    (3.8e-7), attention 4e-5 (4.1e-6: dS = P (dP - D) cancels where P is
    nearly one-hot), the decoder block 2e-5 (2.0e-6). SiLU as the
    activations above (measured at most 0.04 of that tolerance); the
    embedding's rows bit-exact, its gradient 1e-6 of |dtable0| + the sum of
    |dy| over the token's positions (measured at most 0.1 of it).
    Accumulated gradients (dgamma, dW*, dtable, dparams) start from random
    nonzero values and must come back plus the gradient; dq, dk, dv, dx and
    every forward output start as NaN.
  - pipeline stages (STAGE_RTOL), each tensor at once as the MLP: 1e-5
    max(1, max |ref|) for each stage's gradients (the slice of the whole
    model's, summed over the micro-batches with 1/M), the losses, the
    outputs and the first stage's dx; measured at most 6.7e-7 over 23 seeds.
    In C, test_nn checks that the split backward gives the full backward's
    bits, the activations each micro-batch keeps (xt_nn.h's formula) and the
    forward counter.
Buffers the C side must overwrite start as NaN; those it must not touch
(a NULL gradient) must come back as they went in.
"""

import argparse
import concurrent.futures
import glob
import contextlib
import os
import re
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
    """None when |got - ref| <= tol everywhere (NaN only where ref has NaN, an infinity only
    where ref has the same one), else why not."""
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        return f"{what}: shape {got.shape}, expected {ref.shape}"
    tol = np.broadcast_to(np.asarray(tol, dtype=np.float64), ref.shape)
    with np.errstate(invalid="ignore"):
        err = np.abs(got - ref)
    bad = ~(err <= tol) & ~(np.isnan(got) & np.isnan(ref)) & ~(np.isinf(ref) & (got == ref))
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
            f.write("# <id> <kind> key=value ...: see common/tests/nn_case.h\n")
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
    generate_bf16(c, rng)
    generate_adam(c, rng, normal)
    generate_layers(c, rng, normal)
    generate_transformer(c, rng, normal)
    generate_stages(c, rng, normal)
    c.write()
    return c.cases


def bits(*words):
    return np.array(words, dtype=np.uint32).view(np.float32)


# Float32 bit patterns around bf16's rounding cases: the low 16 bits are what is dropped,
# 0x8000 of them an exact tie, decided by the lowest kept bit (bit 16: even 0, odd 1).
BF16_SPECIAL = [
    0x3f800000, 0x3f808000, 0x3f818000,  # 1.0; 1 + 2^-8 (tie, even: down); tie, odd: up
    0x3f807fff, 0x3f808001, 0x3f817fff, 0x3f818001,  # just below and above both ties
    0xbf808000, 0xbf818000, 0xbf808001, 0xbf807fff,  # the same, negative
    0x00000000, 0x80000000,  # +0, -0
    0x00000001, 0x80000001, 0x00008000, 0x00018000, 0x00007fff, 0x00008001,  # subnormals
    0x007f8000, 0x007fffff, 0x807fffff,  # subnormals that round up to the smallest normal
    0x7f7f0000, 0x7f7f7fff, 0x7f7f8000, 0x7f7fffff,  # largest bf16; ties past it: infinity
    0xff7f7fff, 0xff7f8000, 0xff7fffff, 0x7f7e8000,  # ... negative; an even tie below it
    0x7f800000, 0xff800000,  # +-inf
    0x7fc00000, 0xffc00000, 0x7f800001, 0x7fbfffff, 0x7fffffff, 0xffffffff,  # NaNs, quiet
    0x7f808000, 0xff80ffff,  # and signalling ones whose payload is only in the dropped bits
]


def generate_bf16(c, rng):
    c.add("bf16", {}, x=bits(*BF16_SPECIAL))
    # Any bits at all (NaNs, subnormals, infinities included), then normals of every
    # magnitude, then the same with their low 16 bits set to a tie and its neighbours.
    c.add("bf16", {}, x=rng.integers(0, 1 << 32, 20000, dtype=np.uint64).astype(
        np.uint32).view(np.float32))
    x = f32(rng.normal(size=6000) * 10.0 ** rng.uniform(-45, 37.5, 6000))
    c.add("bf16", {}, x=x)
    hi = x.view(np.uint32) & np.uint32(0xffff0000)
    low = rng.choice(np.array([0x8000, 0x7fff, 0x8001, 0x0000, 0xffff], np.uint32), x.size)
    c.add("bf16", {}, x=(hi | low).view(np.float32))
    c.add("bf16", {}, x=f32([]))


def generate_adam(c, rng, normal):
    for t in range(16):
        n = [1, 0, 7][t] if t < 3 else int(rng.integers(1, 300))
        steps = [1, 20][t % 2] if t < 4 else int(rng.integers(1, 21))
        hp = dict(lr=float(rng.choice([1e-3, 0.01, 0.1, 0.5])),
                  beta1=float(rng.choice([0.9, 0.9, 0.5, 0.0])),
                  beta2=float(rng.choice([0.999, 0.999, 0.95, 0.5])),
                  eps=float(rng.choice([1e-8, 1e-6, 1e-3, 0.1])),
                  wd=0.0 if t % 2 else float(rng.choice([0.01, 0.1, 0.5])))
        # Gradients of every size, some exactly zero; a resumed run starts from moments.
        g = normal(steps, n) * f32(10.0 ** rng.uniform(-6, 2, (steps, n)))
        g[rng.random((steps, n)) < 0.05] = 0
        resumed = t % 3 == 2
        m0 = normal(n) * 0.1 if resumed else f32(np.zeros(n))
        v0 = np.abs(normal(n)) * 0.01 if resumed else f32(np.zeros(n))
        c.add("adam", dict(steps=steps, step0=int(rng.integers(2, 1000)) if resumed else 1, **hp),
              p=normal(n), g=g, m0=m0, v0=v0)


def generate_layers(c, rng, normal):
    for t in range(8):
        nl = 1 + t % 4
        dims = [int(rng.integers(1, 10)) for _ in range(nl + 1)]
        act, loss = ("relu", "gelu")[t // 2 % 2], ("mse", "ce")[t // 4 % 2]
        inputs = dict(g0=normal(sum(dims[i] * dims[i + 1] + dims[i + 1] for i in range(nl))))
        for b, rows in enumerate((int(rng.integers(1, 5)), int(rng.integers(5, 9)))):
            inputs[f"x{b}"] = normal(rows, dims[0])
            inputs[f"t{b}"] = (rng.integers(0, dims[-1], rows).astype(np.int32)
                               if loss == "ce" else normal(rows, dims[-1]))
        c.add("layers", dict(dims=",".join(map(str, dims)), act=act, loss=loss,
                             seed=int(rng.integers(0, 1 << 62)), drop=(t + t // 4) % 2,
                             scale=[1.0, 0.5, 2.0, 0.3][t % 4]), **inputs)


def generate_stages(c, rng, normal):
    """Pipeline stages: a random MLP of 2-5 layers cut into 1-3 stages, M = 1-4 micro-batches
    in a scrambled order (micro-batch b's forward before its backward, other forwards in
    between), some stages' backward split into its input and weight parts."""
    for t in range(12):
        nl = 2 + t % 4
        dims = [int(rng.integers(1, 10)) for _ in range(nl + 1)]
        act, loss = ("relu", "gelu")[t % 2], ("mse", "ce")[t // 2 % 2]
        nst = 1 + int(rng.integers(0, min(3, nl)))
        cuts = [0] + sorted(int(v) for v in rng.choice(np.arange(1, nl), nst - 1,
                                                        replace=False)) + [nl]
        split = [int(v) for v in rng.integers(0, 2, nst)]
        M = 1 + t % 4
        order, pending, todo = [], [], list(range(M))
        while todo or pending:  # forwards in order, backwards in any order after their forward
            if todo and (not pending or rng.random() < 0.5):
                pending.append(todo.pop(0))
                order.append(f"f{pending[-1]}")
            else:
                order.append(f"b{pending.pop(int(rng.integers(0, len(pending))))}")
        m = nn.Mlp(dims, act, loss)
        inputs = dict(p=normal(m.nparams) * 0.5)
        for b in range(M):
            rows = int(rng.integers(1, 6))
            inputs[f"x{b}"] = normal(rows, dims[0])
            inputs[f"t{b}"] = (rng.integers(0, dims[-1], rows).astype(np.int32)
                               if loss == "ce" else normal(rows, dims[-1]))
        c.add("stage", dict(dims=",".join(map(str, dims)), act=act, loss=loss,
                            cuts=",".join(map(str, cuts)), split=",".join(map(str, split)), M=M,
                            order="".join(order)), **inputs)


def generate_transformer(c, rng, normal):
    """Cases for the transformer pieces: T = 1, batch > 1, hq/hkv in {1, 2, 4}, odd head
    sizes, T past the C side's query block (32), repeated tokens, the table's first and
    last rows. Accumulated gradients start nonzero (the *0 arrays)."""
    for t in range(8):
        rows, d = [0, 1, 5, 3, 7, 2, 40, 4][t], [1, 4, 7, 16, 3, 9, 33, 5][t]
        x = normal(rows, d) * [1.0, 1.0, 3.0, 0.01, 1.0, 1.0, 1.0, 100.0][t]
        c.add("rmsnorm", dict(rows=rows, d=d, eps=[1e-5, 1e-6, 1e-5, 1e-3, 0.1, 1e-5, 1e-6,
                                                    1e-5][t],
                              null=["-", "dx", "dgamma", "-"][t % 4]),
              x=x, gamma=normal(d), dy=normal(rows, d), dgamma0=normal(d))
    special = [0.0, -0.0, 1e-8, -1e-8, 1.0, -1.0, 5.0, -5.0, 20.0, -20.0, 100.0, -100.0, 1e4,
               -1e4]
    x = np.concatenate([f32(special), normal(300) * 4])
    c.add("silu", {}, x=x, dy=normal(x.size))
    for t in range(8):
        rows, d, ff = [(1, 1, 1), (3, 4, 5), (7, 5, 3), (0, 3, 4), (5, 8, 13), (2, 6, 0),
                       (16, 12, 20), (4, 3, 7)][t]
        c.add("swiglu", dict(rows=rows, d=d, ff=ff, null=["-", "-", "dx", "dwg,dwd", "-", "-",
                                                          "dwu", "-"][t]),
              x=normal(rows, d), wg=normal(d, ff) / np.sqrt(d), wu=normal(d, ff) / np.sqrt(d),
              wd=normal(ff, d) / np.sqrt(max(ff, 1)), dy=normal(rows, d),
              dwg0=normal(d, ff), dwu0=normal(d, ff), dwd0=normal(ff, d))
    gqa = [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4)]
    for t in range(16):
        hq, hkv = gqa[t % len(gqa)]
        batch = [1, 2, 3][t % 3]
        T = [1, 2, 5, 9, 33, 70][t % 6] if t < 12 else int(rng.integers(1, 40))
        hd = [1, 3, 5, 8, 2, 7][t // 2 % 6]
        null = ["-", "-", "dq", "dk", "dv", "dk,dv", "dq,dk,dv", "-"][t % 8]
        n = batch * T
        c.add("attention", dict(batch=batch, T=T, hq=hq, hkv=hkv, hd=hd, null=null),
              q=normal(n, hq * hd) * 1.5, k=normal(n, hkv * hd) * 1.5, v=normal(n, hkv * hd),
              dout=normal(n, hq * hd))
    c.add("attention", dict(batch=0, T=4, hq=2, hkv=1, hd=3, null="-"), q=f32(np.zeros((0, 6))),
          k=f32(np.zeros((0, 3))), v=f32(np.zeros((0, 3))), dout=f32(np.zeros((0, 6))))
    # Attention blocks: every mask, square and not, query blocks past QROWS (32) rows,
    # a row that sees no key (S's first), and empty blocks.
    shapes = [(1, 1), (4, 4), (5, 3), (3, 7), (33, 33), (40, 17), (8, 70), (0, 5), (6, 0)]
    for t in range(len(shapes) * 2):
        nq, nk = shapes[t % len(shapes)]
        hq, hkv = gqa[t % len(gqa)]
        hd = [1, 4, 3, 8, 2][t % 5]
        mask = "NCS"[t % 3]
        null = ["-", "-", "dq", "dk,dv", "-", "dv"][t % 6]
        c.add("attn_block", dict(nq=nq, nk=nk, hq=hq, hkv=hkv, hd=hd, mask=mask, null=null),
              q=normal(nq, hq * hd) * 1.5, k=normal(nk, hkv * hd) * 1.5, v=normal(nk, hkv * hd),
              dout=normal(nq, hq * hd), dq0=normal(nq, hq * hd), dk0=normal(nk, hkv * hd),
              dv0=normal(nk, hkv * hd))
    inf = np.float32(np.inf)
    lse, lse_blk = normal(12) * 3, normal(12) * 3
    lse[[0, 1, 5]], lse_blk[[1, 2, 6]] = -inf, -inf  # one side -inf, both -inf
    lse[3], lse_blk[3] = 1e4, -1e4  # one side's weight underflows to 0
    lse[4], lse_blk[4] = -3e4, -3e4 + 1  # both far below 0: no finite start may be assumed
    o, o_blk = normal(12, 5), normal(12, 5)
    c.add("lse_merge", dict(rows=12, d=5), o=o, lse=lse, o_blk=o_blk, lse_blk=lse_blk)
    # Routing: ties broken by the lower expert (rows of equal logits), k from 1 to E,
    # with and without renormalisation, and no token at all.
    for t, (T, E, k, renorm) in enumerate([(6, 4, 2, 0), (5, 8, 3, 1), (4, 3, 1, 0), (3, 5, 5, 1),
                                           (7, 6, 2, 1), (0, 4, 2, 1)]):
        logits = normal(T, E) * 2
        if T >= 3:
            logits[0, :] = 0.5  # every expert tied
            logits[1, 1:3] = logits[1].max() + 1  # a tie at the top
            logits[2, -1] = logits[2, 0]  # a tie with the first expert
        c.add("topk_route", dict(T=T, E=E, k=k, renorm=renorm), logits=logits, dw=normal(T, k))
    # Experts: some with no token, one expert, a bank starting past expert 0.
    for t, (counts, d, ff, first) in enumerate([([3, 0, 5, 1], 4, 6, 2), ([7], 3, 5, 0),
                                                ([0, 0], 2, 3, 1), ([2, 4, 0, 3, 1, 2], 5, 3, 0)]):
        n, ne = sum(counts), len(counts)
        c.add("experts", dict(d=d, ff=ff, first=first, null=["-", "dx", "-", "dparams"][t]),
              x=normal(n, d), w=normal(ne * 3 * d * ff) / np.sqrt(d), dy=normal(n, d),
              counts=np.array(counts, np.int32), dparams0=normal(ne * 3 * d * ff))
    for t in range(5):
        vocab, d, n = [(64, 4, 12), (1, 3, 5), (7, 1, 1), (50, 6, 40), (10, 2, 0)][t]
        tokens = rng.integers(0, vocab, n).astype(np.int32)
        if n >= 4:  # the first and last rows, and a token repeated
            tokens[:4] = [0, vocab - 1, tokens[4 % n], tokens[4 % n]]
        c.add("embedding", dict(vocab=vocab, d=d), tokens=tokens, table=normal(vocab, d),
              dy=normal(n, d), dtable0=normal(vocab, d))
    for t in range(6):
        batch, T, d, hq, hkv, hd, ff = [(2, 5, 8, 4, 2, 3, 12), (1, 1, 6, 2, 1, 5, 7),
                                        (3, 4, 5, 4, 4, 2, 9), (2, 37, 16, 4, 1, 4, 24),
                                        (1, 6, 4, 1, 1, 1, 3), (2, 3, 6, 2, 2, 3, 5)][t]
        m = nn.Decoder(d, hq, hkv, hd, ff)
        params = normal(m.nparams)
        for name, off, shape in m.tensors:
            size = int(np.prod(shape))
            params[off:off + size] = (1 + 0.1 * params[off:off + size] if name.startswith("norm")
                                      else params[off:off + size] / np.sqrt(shape[0]))
        n = batch * T
        c.add("decoder", dict(batch=batch, T=T, d=d, hq=hq, hkv=hkv, hd=hd, ff=ff, eps=1e-5,
                              null=["-", "-", "dx", "dparams", "-", "-"][t]),
              x=normal(n, d), w=params, dy=normal(n, d), dparams0=normal(m.nparams))

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


def judge_pointwise(forward, backward, x, out):
    """An elementwise function: y, dx and dx computed in place, against forward/backward."""
    xs, dy = x["x"].astype(np.float64), x["dy"].astype(np.float64)
    y, dx = forward(xs), backward(dy, xs)
    dtol = elem_tol(dx, np.abs(dy) * (1 + np.abs(xs)))
    return [compare("forward", out("y"), y, elem_tol(y, 1 + np.abs(xs))),
            compare("backward", out("dx"), dx, dtol),
            compare("backward in place (dx = dy)", out("dx_inplace"), dx, dtol)]


def judge_act(p, x, out):
    return judge_pointwise(lambda xs: nn.act_forward(p["act"], xs),
                           lambda dy, xs: nn.act_backward(p["act"], dy, xs), x, out)


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


def bf16_reference(x):
    """Round to nearest bfloat16, ties to even, by arithmetic in float64 (not by bits, as
    nn.bf16_round does): 8 significant bits, subnormals below 2^-126, past the largest
    bf16 ((2 - 2^-7) 2^127) infinity; NaN and infinities as they are."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(invalid="ignore"):  # signalling NaNs
        xd = x.astype(np.float64)
    out = xd.copy()
    fin = np.isfinite(xd)
    a = np.abs(xd[fin])
    _, e = np.frexp(a)  # a = f 2^e, f in [0.5, 1): the leading bit is 2^(e-1)
    ulp = np.ldexp(1.0, np.maximum(e - 1, -126) - 7)
    q = np.rint(a / ulp) * ulp  # exact: a / ulp has at most 24 significant bits
    q[q > (2 - 2.0 ** -7) * 2.0 ** 127] = np.inf
    out[fin] = np.copysign(q, xd[fin])
    return out.astype(np.float32)


def exact_bits(what, got, ref, x):
    """exact() for float32, saying which input and showing the bits in hex."""
    got, ref = np.asarray(got, np.float32), np.asarray(ref, np.float32)
    if got.shape != ref.shape:
        return f"{what}: shape {got.shape}, expected {ref.shape}"
    diff = np.flatnonzero(got.view(np.uint32) != ref.view(np.uint32))
    if not diff.size:
        return None
    i = int(diff[0])
    xb, gb, rb = (int(a.view(np.uint32)[i]) for a in (x, got, ref))
    return (f"{what}: [{i}] x = {xb:#010x} ({x[i]!r}): expected {rb:#010x} ({ref[i]!r}) "
            f"got {gb:#010x} ({got[i]!r}) ({diff.size} differ)")


def judge_bf16(p, x, out):
    xs = x["x"]
    ref = nn.bf16_round(xs)
    y = out("y")
    problems = [exact_bits("xt_bf16_round", y, ref, xs),
                exact_bits("xt_bf16_round_array", out("y_array"), ref, xs),
                exact_bits("xt_bf16_round_array in place", out("y_inplace"), ref, xs),
                exact("xt_all_finite of each element", out("finite_each"),
                      np.isfinite(xs).astype(np.int32)),
                exact("xt_all_finite of x, of bf16(x), of nothing", out("finite_all"),
                      np.array([np.isfinite(xs).all(), np.isfinite(ref).all(), 1], np.int32))]
    # nn.bf16_round itself against rounding done by arithmetic; NaN must stay NaN.
    indep = bf16_reference(xs)
    nan = np.isnan(xs)
    problems.append(exact_bits("nn.bf16_round against rounding by arithmetic (non-NaN)",
                               ref[~nan], indep[~nan], xs[~nan]))
    if not np.isnan(ref[nan]).all() or not np.isnan(y[nan]).all():
        problems.append(f"a NaN did not stay NaN: nn.py {ref[nan][~np.isnan(ref[nan])][:3]}, "
                        f"C {y[nan][~np.isnan(y[nan])][:3]}")
    if not nn.is_bf16(y).all():
        problems.append("xt_bf16_round returned floats that are not bf16 values (low bits set)")
    return problems


def adam_hp(p):
    return {k: float(np.float32(p[k])) for k in ("lr", "beta1", "beta2", "eps", "wd")}


def judge_adam(p, x, out):
    hp = adam_hp(p)
    w, m, v = (x[k].astype(np.float64) for k in ("p", "m0", "v0"))
    g = x["g"].astype(np.float64)
    got = out("p_steps")
    if got.shape != g.shape:
        return [f"p_steps: shape {got.shape}, expected {g.shape}"]
    problems = []
    moved = np.zeros_like(w)  # sum over the steps so far of |p| + |the step's update|
    gmax = np.zeros_like(w)
    for t in range(p["steps"]):
        before = w
        w, m, v = nn.adam_update(w, g[t], m, v, p["step0"] + t, hp)
        moved = moved + np.abs(before) + np.abs(before * (1 - hp["lr"] * hp["wd"]) - w)
        gmax = np.maximum(gmax, np.abs(g[t]))
        problems.append(compare(f"params after step {p['step0'] + t}", got[t], w,
                                ADAM_RTOL * moved))
    t = p["steps"]
    problems.append(compare("m", out("m"), m, ADAM_RTOL * t * (np.abs(m) + gmax)))
    problems.append(compare("v", out("v"), v, ADAM_RTOL * t * (np.abs(v) + gmax ** 2)))
    return [pr for pr in problems if pr][:3]


# Adam in float32 against float64. Each step rounds the weight (|p| 2^-24) and computes
# its update lr mhat / (sqrt(vhat) + eps) to a few ulps, so the error after t steps is
# bounded by a multiple of the sum over the steps of |p| + |update|; likewise
# t (|m| + max |g|) for the moment m and t (|v| + max g^2) for v. Measured over seed
# 20261122 and 60 others: at most 2.2e-7 of that sum (4 float32 ulps), and 1.1e-7 for
# the moments. The checks allow 1e-6; a slip in the update (a missing bias correction,
# the decay applied after the step, eps inside the square root) is off by far more.
ADAM_RTOL = 1e-6


def judge_layers(p, x, out):
    dims = [int(v) for v in p["dims"].split(",")]
    m = nn.Mlp(dims, p["act"], p["loss"])
    offs = {name: (off, int(np.prod(shape))) for name, off, shape in m.tensors}
    ranges = np.array([[offs[f"W{l}"][0], offs[f"W{l}"][1] + offs[f"b{l}"][1]]
                       for l in range(m.nlayers)], dtype=np.int64)
    problems = [exact("xt_mlp_layer_offset, xt_mlp_layer_count", out("ranges"), ranges)]
    params = out("params").astype(np.float64)
    scale = float(np.float32(p["scale"]))
    total = x["g0"].astype(np.float64)
    losses = []
    for b in range(2):
        xb, tb = x[f"x{b}"], x[f"t{b}"]
        tb = tb if p["loss"] == "ce" else tb.astype(np.float64)
        y, _ = m.forward(params, xb)
        problems.append(compare(f"batch {b} output, layer by layer", out(f"y{b}"), y, mlp_tol(y)))
        loss, g = m.loss_and_grads(params, xb, tb)
        losses.append(loss)
        total = total + scale * g
    problems.append(compare("losses", out("loss"), losses, mlp_tol(losses)))
    problems.append(compare("per-layer gradient buffers after two batches", out("grads"), total,
                            mlp_tol(total)))
    return problems


# The transformer pieces, float32 against float64, whole tensors: |got - ref| <= rtol
# max(1, max |ref|), like the MLP (TRANSFORMER_RTOL below, measured).


def close(what, got, ref, rtol):
    ref = np.asarray(ref, dtype=np.float64)
    return compare(what, got, ref, rtol * max(1.0, float(np.abs(ref).max()) if ref.size else 1.0))


def nulls(p):
    return p["null"].split(",")


def judge_rmsnorm(p, x, out):
    xs, gamma, dy, dg0 = (x[n].astype(np.float64) for n in ("x", "gamma", "dy", "dgamma0"))
    eps = float(np.float32(p["eps"]))
    y, rstd = nn.rmsnorm_forward(xs, gamma, eps)
    dx, dg = nn.rmsnorm_backward(dy, xs, gamma, rstd)
    rtol = TRANSFORMER_RTOL["rmsnorm"]
    return [close("y", out("y"), y, rtol), close("rstd", out("rstd"), rstd, rtol),
            close("dx (overwritten)", out("dx"), np.full(dx.shape, np.nan)
                  if "dx" in nulls(p) else dx, rtol),
            close("dgamma (+=)", out("dgamma"), dg0 if "dgamma" in nulls(p) else dg0 + dg, rtol)]


def judge_silu(p, x, out):
    # nn's functions looked up at each call: the negative control patches them.
    return judge_pointwise(lambda xs: nn.silu_forward(xs), lambda dy, xs: nn.silu_backward(dy, xs),
                           x, out)


def judge_swiglu(p, x, out):
    xs, wg, wu, wd, dy = (x[n].astype(np.float64) for n in ("x", "wg", "wu", "wd", "dy"))
    y, kept = nn.swiglu_forward(xs, wg, wu, wd)
    grads = nn.swiglu_backward(dy, xs, wg, wu, wd, kept)
    rtol = TRANSFORMER_RTOL["swiglu"]
    problems = [close("y", out("y"), y, rtol)]
    problems += [close(f"{n} (kept for backward)", out(n), v, rtol) for n, v in zip("guh", kept)]
    dx = np.full(xs.shape, np.nan) if "dx" in nulls(p) else grads[0]
    problems.append(close("dx (overwritten)", out("dx"), dx, rtol))
    for name, g in zip(("dwg", "dwu", "dwd"), grads[1:]):
        g0 = x[f"{name}0"].astype(np.float64)
        problems.append(close(f"{name} (+=)", out(name), g0 if name in nulls(p) else g0 + g,
                              rtol))
    return problems


def judge_attention(p, x, out):
    shape = [p[k] for k in ("batch", "T", "hq", "hkv", "hd")]
    batch, T, hq, hkv, hd = shape
    q, k, v, dout = (x[n].astype(np.float64) for n in ("q", "k", "v", "dout"))
    o, lse = nn.attention_forward(q, k, v, *shape)
    rtol = TRANSFORMER_RTOL["attention"]
    problems = [close("out", out("out"), o, rtol),
                close("lse", out("lse"), lse.reshape(batch, hq * T), rtol)]
    grads = nn.attention_backward(dout, q, k, v, o, lse, *shape)
    for name, g in zip(("dq", "dk", "dv"), grads):
        if name in nulls(p):
            g = np.full(g.shape, np.nan)  # not written: the NaN it started as
        problems.append(close(f"{name} (overwritten)", out(name), g, rtol))
    return problems


def judge_attn_block(p, x, out):
    shape = [p[k] for k in ("nq", "nk", "hq", "hkv", "hd", "mask")]
    q, k, v, dout = (x[n].astype(np.float64) for n in ("q", "k", "v", "dout"))
    o, lse = nn.attn_block_forward(q, k, v, *shape)
    rtol = TRANSFORMER_RTOL["attention"]
    problems = [close("out", out("out"), o, rtol), close("lse", out("lse"), lse, rtol),
                exact("pairs (forward, backward)", out("pairs").reshape(-1),
                      np.array([nn.block_pairs(*shape[:2], shape[5])] * 2, np.int64))]
    grads = nn.attn_block_backward(dout, q, k, v, o, lse, *shape)
    for name, g in zip(("dq", "dk", "dv"), grads):
        g0 = x[f"{name}0"].astype(np.float64)
        problems.append(close(f"{name} (+=)", out(name), g0 if name in nulls(p) else g0 + g,
                              rtol))
    return problems


def judge_lse_merge(p, x, out):
    o, lse = nn.lse_merge(x["o"], x["lse"], x["o_blk"], x["lse_blk"])
    return [close("o", out("o"), o, 1e-6), close("lse", out("lse").reshape(-1), lse, 1e-6)]


def judge_topk_route(p, x, out):
    idx, w, probs = nn.topk_route(x["logits"].astype(np.float64), p["k"], p["renorm"])
    dl = nn.topk_route_backward(x["dw"].astype(np.float64), probs, idx, p["renorm"])
    rtol = TRANSFORMER_RTOL["route"]
    return [exact("idx", out("idx").astype(np.int32), idx), close("w", out("w"), w, rtol),
            close("probs", out("probs"), probs, rtol), close("dlogits", out("dlogits"), dl, rtol)]


def judge_experts(p, x, out):
    counts, d, ff = [int(n) for n in x["counts"]], p["d"], p["ff"]
    params = x["w"].astype(np.float64)
    y, kept = nn.experts_forward(x["x"], counts, params, d, ff)
    dx, dparams = nn.experts_backward(x["dy"], x["x"], counts, params, d, ff, kept)
    g0 = x["dparams0"].astype(np.float64)
    rtol = TRANSFORMER_RTOL["swiglu"]
    problems = [close("y", out("y"), y, rtol), close("y (keep NULL)", out("y_nokeep"), y, rtol),
                close("dparams (+=)", out("dparams"), g0 if "dparams" in nulls(p) else g0 + dparams,
                      rtol)]
    if "dx" not in nulls(p):
        problems.append(close("dx", out("dx"), dx, rtol))
    return problems


def judge_embedding(p, x, out):
    tokens, table = x["tokens"], x["table"]
    dy, dt0 = x["dy"].astype(np.float64), x["dtable0"].astype(np.float64)
    dt = nn.embedding_backward(tokens, dy, p["vocab"])
    size = np.abs(dt0) + nn.embedding_backward(tokens, np.abs(dy), p["vocab"])
    return [exact("y (rows of the table)", out("y"), table[tokens]),
            compare("dtable (+=, repeats add up)", out("dtable"), dt0 + dt, elem_tol(0, size))]


def judge_decoder(p, x, out):
    m = nn.Decoder(p["d"], p["hq"], p["hkv"], p["hd"], p["ff"], float(np.float32(p["eps"])))
    lay = m.layout()
    want = np.array([lay[n] for n in ("norm1", "wq", "wk", "wv", "wo", "norm2", "wg", "wu", "wd",
                                      "total")], np.int64)
    problems = [exact("xt_decoder_layout_of", out("layout"), want)]
    dy, g0 = x["dy"].astype(np.float64), x["dparams0"].astype(np.float64)
    y, cache = m.forward(x["w"], x["x"], p["batch"], p["T"])
    dx, g = m.backward(dy, cache)
    rtol = TRANSFORMER_RTOL["decoder"]
    problems.append(close("y", out("y"), y, rtol))
    problems.append(close("dx (overwritten)", out("dx"),
                          np.full(dx.shape, np.nan) if "dx" in nulls(p) else dx, rtol))
    got = out("dparams")
    total = g0 if "dparams" in nulls(p) else g0 + g
    for name, off, shape in m.tensors:
        size = int(np.prod(shape))
        problems.append(close(f"d{name} (+=)", got[off:off + size], total[off:off + size], rtol))
    return problems


# float32 against float64, in units of max(1, max |ref|) per tensor. Measured over seed
# 20261122 and seeds 0 to 29: at most 2.9e-7 for RMSNorm (dgamma), 3.8e-7 for SwiGLU (dWu),
# 4.1e-6 for attention (dK with hd = 1: dS = P (dP - D) cancels where P is nearly one-hot,
# and K multiplies what is left), 2.0e-6 for the decoder block (dWk). The checks allow ten
# times that; a wrong head, mask, scale or missing factor is off by 1e-2 or more.
TRANSFORMER_RTOL = {"rmsnorm": 3e-6, "swiglu": 4e-6, "attention": 4e-5, "decoder": 2e-5,
                    "route": 1e-6}

# Pipeline stages: each tensor at once, |got - ref| <= STAGE_RTOL max(1, max |ref|), the MLP's
# tolerance (mlp_tol); seeds 0 to 22 measured at most 6.7e-7.
STAGE_RTOL = 1e-5

def input_gradient(m, flat, x, target):
    """dLoss/dx of the whole model (the first stage's dx), float64."""
    p = m.views(np.asarray(flat, dtype=np.float64))
    out, (_, pres) = m.forward(flat, x)
    d = nn.loss_and_grad(m.loss, out, target)[1]
    for l in range(m.nlayers - 1, -1, -1):
        d = d @ p[f"W{l}"].T
        if l > 0:
            d = nn.act_backward(m.act, d, pres[l - 1])
    return d


def judge_stage(p, x, out):
    """Each stage's gradients are its slice of the whole model's, summed over the micro-batches
    with 1/M; the losses, outputs and the first stage's dx per micro-batch (STAGE_RTOL)."""
    dims = [int(v) for v in p["dims"].split(",")]
    m = nn.Mlp(dims, p["act"], p["loss"])
    cuts = [int(v) for v in p["cuts"].split(",")]
    M = p["M"]
    params = x["p"]
    total, losses, problems = np.zeros(m.nparams), [], []
    for b in range(M):
        xb, tb = x[f"x{b}"], x[f"t{b}"]
        tb = tb if p["loss"] == "ce" else tb.astype(np.float64)
        y, _ = m.forward(params, xb)
        problems.append(close(f"micro-batch {b}'s output", out(f"y{b}"), y, STAGE_RTOL))
        loss, g = m.loss_and_grads(params, xb, tb)
        losses.append(loss)
        total += g / M
        dx = input_gradient(m, params, xb, tb) / M
        problems.append(close(f"micro-batch {b}'s dx (first stage)", out(f"dx{b}"), dx,
                              STAGE_RTOL))
    problems.append(close("losses", out("loss"), losses, STAGE_RTOL))
    offs = [m.tensors[2 * l][1] for l in range(m.nlayers)] + [m.nparams]
    for s in range(len(cuts) - 1):
        ref = total[offs[cuts[s]]:offs[cuts[s + 1]]]
        problems.append(close(f"stage {s}'s gradients (layers {cuts[s]}..{cuts[s + 1] - 1}, "
                              f"sum over {M} micro-batches / {M})", out(f"grads{s}"), ref,
                              STAGE_RTOL))
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

# The layer API out of order (test_nn --die MODE): what libxt must say before it stops.
OUT_OF_ORDER = {
    "forward_skip": r"xt_mlp_forward_layer\(1\): layers run forward in order from 0 .*"
                    r"layer 0 is next",
    "forward_past_end": r"xt_mlp_forward_layer\(2\): the model has layers 0 to 1",
    "loss_early": r"xt_mlp_loss_grad: run all 2 layers forward first",
    "backward_before_loss": r"xt_mlp_backward_layer\(1\): no backward under way: call "
                            r"xt_mlp_loss_grad",
    "backward_skip": r"xt_mlp_backward_layer\(0\): .* layer 1 is next",
    "embedding_range": r"xt_embedding_forward: token 97 at position 3 is outside the table's "
                       r"0\.\.63",
    "gqa_heads": r"xt_attention_forward: hkv=2 KV heads do not divide hq=3 query heads",
    "stage_no_forward": r"xt_stage_backward\(micro-batch 1\): micro-batch 1 has no forward in "
                        r"flight on this stage \(layers 0\.\.1\)",
    "stage_weight_first": r"xt_stage_backward_weight\(micro-batch 0\): its input part has not "
                          r"run: call xt_stage_backward_input first",
    "stage_loss_not_last": r"xt_stage_loss\(micro-batch 0\): this stage \(layers 0\.\.1\) is "
                           r"not the last",
    "stage_twice": r"xt_stage_forward\(micro-batch 3\): micro-batch 3 is already in flight",
}


def kit_programs(build_dir="build"):
    """The kits' case programs (grader/lectures/<lecture>/kit/tests/test_kit.c, built under
    build_dir), which run the cases of the kinds their kit provides."""
    return [os.path.join(build_dir, os.path.splitext(src)[0]) for src in
            sorted(glob.glob(os.path.join("grader", "lectures", "*", "kit", "tests",
                                          "test_kit.c")))]


def die_modes(exe):
    """The --die modes exe knows (exe --die-modes: one a line, printed before MPI starts)."""
    r = launch.run([exe, "--die-modes"], timeout=60)
    return r.output.split() if r.returncode == 0 else []


def out_of_order(exes):
    """Problems, one line each: every mode a program knows must end its run with the ERROR
    message OUT_OF_ORDER gives it. One rank, started directly (no mpirun: its abort alone
    takes a second)."""
    owner = {mode: exe for exe in exes for mode in die_modes(exe)}
    problems = [f"--die {mode}: no program knows it (each lists its modes: --die-modes)"
                for mode in OUT_OF_ORDER if mode not in owner]
    problems += [f"{exe} --die {mode}: no message in OUT_OF_ORDER to expect"
                 for mode, exe in owner.items() if mode not in OUT_OF_ORDER]

    def one(mode):
        exe = owner[mode]
        r = launch.run([exe, "--die", mode], timeout=60)
        pattern = r"\[xt\] rank 0 ERROR: [\w/]+\.c:\d+: " + OUT_OF_ORDER[mode]
        if r.returncode != 0 and re.search(pattern, r.output):
            return None
        said = [ln for ln in r.output.splitlines() if "ERROR" in ln or "SURVIVED" in ln]
        return (f"{exe} --die {mode}: exit {r.returncode}, expected an ERROR matching "
                f"'{OUT_OF_ORDER[mode]}': " + (" | ".join(said) or "no message"))

    # At most 5 at once: more singleton starts side by side make Open MPI's session
    # directory setup fail now and then ("Unable to start a daemon").
    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        return problems + [bad for bad in pool.map(one, [m for m in OUT_OF_ORDER if m in owner])
                           if bad]


def c_versus_numpy(exe=EXE, work=None, seed=SEED, kits=None):
    """(ok, lines, cases, dir): every case through the C programs (libxt's test_nn, then each
    kit's, each running the kinds it knows), judged against nn.py."""
    d = work or os.path.join("build", "selftest", "nn")
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    exes = [exe] + (kit_programs() if kits is None else kits)
    missing = [e for e in exes if not os.path.exists(e)]
    if missing:
        return False, [f"{e} is not built: run make" for e in missing], [], d
    cases = generate(d, np.random.default_rng(seed))
    lines = []
    for e in exes:
        r = launch.run(launch.mpirun_command(1, [e, d]), timeout=60)
        failed = [ln for ln in r.output.splitlines() if ln.startswith("FAIL")]
        if r.returncode != 0 and not failed:
            failed = [f"{e} {d}: exit {r.returncode}"] + r.output.strip().splitlines()[-10:]
        lines += failed
    lines += judge(cases, d)
    lines += out_of_order(exes)
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


def bf16_ties_away(original, x):
    """Ties rounded away from zero (add 0x8000), not to even: the usual slip."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = ((u & 0x7f800000) == 0x7f800000) & ((u & 0x007fffff) != 0)
    r = np.where(nan, u | 0x00400000, u + 0x8000) & 0xffff0000
    return r.astype(np.uint32).view(np.float32)


def bf16_nan_as_number(original, x):
    """NaN rounded like any number: a NaN whose payload is in the dropped bits becomes
    infinity, and 0x7fffffff carries into the sign."""
    u = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000
    return r.astype(np.uint32).view(np.float32)


def adam_no_bias_correction(original, w, g, m, v, t, hp):
    """Adam without its bias correction (1 - beta^t)."""
    return original(w, g, m, v, 1 << 30, hp) if t else original(w, g, m, v, t, hp)


def adam_decay_after(original, w, g, m, v, t, hp):
    """AdamW's decay applied to the updated weights instead of the old ones."""
    w2, m2, v2 = original(w, g, m, v, t, dict(hp, wd=0.0))
    return w2 * (1 - float(hp["lr"]) * float(hp["wd"])), m2, v2


def attention_unscaled_backward(original, *a):
    """Attention's backward without the 1/sqrt(hd) of the scores in dQ and dK."""
    return original(*a, grad_scale=1.0)


def attention_dq_transposed(original, *a):
    """dQ computed as dS^T K, the transpose of the score gradient (the original course's
    slip): the shapes agree, since dS is T x T."""
    return original(*a, dq_transposed=True)


def no_causal_mask(original, T):
    """Every position attending to every other one, the future included."""
    return np.ones((T, T), dtype=bool)


def shifted_as_causal(original, nq, nk, mask):
    """The shifted mask (keys 0 .. i-1) taken as the diagonal's (keys 0 .. i)."""
    return original(nq, nk, "C" if mask == "S" else mask)


def merge_without_max(original, o, lse, o_blk, lse_blk):
    """The merge's weights e^lse / (e^lse + e^lse_blk) without the larger lse taken out:
    they overflow to inf / inf at lse = 1e4."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        a, b = np.exp(np.asarray(lse, np.float32)), np.exp(np.asarray(lse_blk, np.float32))
        w = (a / (a + b))[:, None]
        return w * o + (1 - w) * o_blk, np.log(a + b)


def kv_head_modulo(original, j, hq, hkv):
    """Query head j on KV head j % hkv instead of j / (hq / hkv)."""
    return j % hkv


def rmsnorm_dgamma_without_rstd(original, dy, x, gamma, rstd):
    """dgamma as the sum of dy x, the normalization forgotten."""
    dx, _ = original(dy, x, gamma, rstd)
    return dx, (dy * x).sum(axis=0)


def silu_prime_as_sigmoid(original, dy, x):
    """silu'(x) taken as sigmoid(x), the x s (1 - s) term forgotten."""
    return dy * nn.sigmoid(x)


def embedding_assigned(original, tokens, dy, vocab):
    """dtable[token] = dy where repeated tokens should add up."""
    dt = np.zeros((vocab, dy.shape[1]))
    dt[np.asarray(tokens)] = dy
    return dt


def topk_ties_higher(original, logits, k, renorm):
    """Of equal logits the higher expert first."""
    logits = np.asarray(logits, dtype=np.float64)
    E = logits.shape[1]
    idx = (E - 1 - np.argsort(-logits[:, ::-1], axis=1, kind="stable")[:, :k]).astype(np.int32)
    _, _, probs = original(logits, k, renorm)
    w = np.take_along_axis(probs, idx, 1)
    return idx, (w / w.sum(axis=1, keepdims=True) if renorm else w), probs


def topk_renorm_grad_as_plain(original, dw, probs, idx, renorm):
    """The renormalised weights' gradient taken as if they were not renormalised."""
    return original(dw, probs, idx, False)


# The transformer pieces' slips: (nn's function, the wrong one, what, the C case kinds that
# use it, which check must catch it: "fd" finite differences, "c" the comparison with C).
# A slip made the same way in forward and backward (no mask, the wrong KV head) keeps
# the gradients consistent: only C sees it.
TRANSFORMER_SLIPS = [
    ("attention_backward", attention_unscaled_backward, "attention backward without 1/sqrt(hd)",
     ("attention", "decoder"), ("fd", "c")),
    ("attention_backward", attention_dq_transposed, "attention's dQ as dS^T K",
     ("attention", "decoder"), ("fd", "c")),
    ("causal_mask", no_causal_mask, "attention without the causal mask",
     ("attention", "decoder"), ("c",)),
    ("kv_head", kv_head_modulo, "query head j on KV head j % hkv", ("attention", "decoder"),
     ("c",)),
    ("rmsnorm_backward", rmsnorm_dgamma_without_rstd, "RMSNorm's dgamma without rstd",
     ("rmsnorm", "decoder"), ("fd", "c")),
    ("silu_backward", silu_prime_as_sigmoid, "SiLU' as sigmoid only",
     ("silu", "swiglu", "decoder"), ("fd", "c")),
    ("embedding_backward", embedding_assigned, "embedding gradient = for repeated tokens",
     ("embedding",), ("fd", "c")),
    ("block_mask", shifted_as_causal, "an attention block's shifted mask as the diagonal's",
     ("attn_block",), ("c",)),
    ("lse_merge", merge_without_max, "the log-sum-exp merge without the max taken out",
     ("lse_merge",), ("c",)),
    ("topk_route", topk_ties_higher, "top-k ties to the higher expert", ("topk_route",), ("c",)),
    ("silu_backward", silu_prime_as_sigmoid, "SiLU' as sigmoid only, in the bank of experts",
     ("experts",), ("c",)),
    ("topk_selected_grad", topk_renorm_grad_as_plain, "top-k's renormalisation skipped in backward",
     ("topk_route",), ("fd", "c")),
]


def transformer_negative_control(cases, d, seed):
    """Problems: each of TRANSFORMER_SLIPS must be caught by the checks it names."""
    lines = []
    for name, wrong, what, kinds, by in TRANSFORMER_SLIPS:
        with patched(name, wrong):
            if "fd" in by and not nn.finite_difference_check(
                    np.random.default_rng(seed), pieces=nn.PIECES[1:]):
                lines.append(f"{what}: finite_difference_check found nothing wrong")
            if "c" in by and cases and not judge(cases, d, kinds=kinds):
                lines.append(f"{what}: C still agrees with the wrong nn.py")
    return lines


def negative_control(cases=None, d=None, seed=SEED):
    """(ok, lines): the checks above fail on a wrong nn.py, and nn.py is restored after."""
    lines = []
    names = ["act_backward", "cross_entropy_loss", "bf16_round", "adam_update"] + \
        [slip[0] for slip in TRANSFORMER_SLIPS]
    before = [getattr(nn, n) for n in names]
    for name, wrong, what in (("act_backward", gelu_without_3, "GELU' without its factor 3"),
                              ("cross_entropy_loss", ce_summed, "cross-entropy gradient summed")):
        with patched(name, wrong):
            fd = nn.finite_difference_check(np.random.default_rng(seed))
            c = judge(cases, d, kinds=("act", "mlp")) if cases and name == "act_backward" else None
            # The pipeline stage is judged against nn.Mlp: a wrong Mlp must fail it too.
            stage = judge(cases, d, kinds=("stage",)) if cases else None
        if not fd:
            lines.append(f"{what}: finite_difference_check found nothing wrong")
        if c is not None and not c:
            lines.append(f"{what}: C still agrees with the wrong nn.py")
        if stage is not None and not stage:
            lines.append(f"{what}: the pipeline stage cases still agree with the wrong nn.py")
    # What finite differences cannot see: only the comparison with C (and, for bf16, with
    # rounding by arithmetic) catches these.
    for name, wrong, what, kind in (
            ("bf16_round", bf16_ties_away, "bf16 ties away from zero", "bf16"),
            ("bf16_round", bf16_nan_as_number, "bf16 rounding NaN like a number", "bf16"),
            ("adam_update", adam_no_bias_correction, "Adam without bias correction", "adam"),
            ("adam_update", adam_decay_after, "AdamW decay after the update", "adam")):
        if not cases:
            break
        with patched(name, wrong):
            c = judge(cases, d, kinds=(kind,))
        if not c:
            lines.append(f"{what}: C still agrees with the wrong nn.py")
    lines += transformer_negative_control(cases, d, seed)
    if [getattr(nn, n) for n in names] != before:
        lines.append("nn.py was not restored")
    return not lines, lines


def run(build_dir="build", seed=SEED, work=None):
    """(ok, lines): all three checks, a summary line each, then the problems."""
    exe = os.path.join(build_dir, "common", "tests", "test_nn")
    start = time.monotonic()
    ok1, bad1, cases, d = c_versus_numpy(exe, work, seed, kit_programs(build_dir))
    t1 = time.monotonic() - start
    ok2, bad2 = gradients(seed)
    ok3, bad3 = negative_control(cases, d, seed)
    kinds = sorted({kind for _, kind, _, _ in cases})
    lines = [f"{'ok  ' if ok1 else 'FAIL'}  C agrees with nn.py: {len(cases)} cases "
             f"({', '.join(kinds)}) ({t1:.1f} s)",
             f"{'ok  ' if ok2 else 'FAIL'}  nn.py's gradients match central finite differences",
             f"{'ok  ' if ok3 else 'FAIL'}  negative control: a wrong GELU', cross-entropy "
             f"gradient (in the MLP and in the pipeline stage), bf16 rounding and Adam in nn.py "
             f"are caught, and "
             f"{len(TRANSFORMER_SLIPS)} slips in the transformer pieces (attention's scale, "
             f"mask, KV head and dQ = dS^T K, RMSNorm's dgamma, SiLU', the embedding's repeats, "
             f"an attention block's shifted mask, the log-sum-exp merge without its max, "
             f"top-k's tie order and its renormalised gradient, the bank of experts' SiLU')"]
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
