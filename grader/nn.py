"""NumPy twin of libxt's numeric layer (common/xt_nn.h), for references and tests.

Everything here is the plain single-process definition, computed in float64:
the grader compares a C program's float32 results with it under a stated
tolerance. The random numbers and the permutation are bit-exact copies of the
C ones, so a sampler's shuffle can be checked index for index.
`python3 grader/nn.py` checks this file's own gradients against finite
differences (make test runs it).
"""

import math
import sys

import numpy as np

MASK64 = (1 << 64) - 1


# ------------------------------------------------------------- random numbers

class Rng:
    """splitmix64, as xt_rng."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def u64(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        limit = MASK64 - MASK64 % n
        while True:
            x = self.u64()
            if x < limit:
                return x % n

    def uniform(self, lo, hi):
        """As xt_rng_uniform, in float32 arithmetic."""
        u = np.float32(self.u64() >> 40) * np.float32(1.0 / 16777216.0)
        return np.float32(lo) + (np.float32(hi) - np.float32(lo)) * u


def permutation(seed, n):
    """xt_permutation: Fisher-Yates from the top, from the identity."""
    g = Rng(seed)
    out = list(range(n))
    for i in range(n - 1, 0, -1):
        j = g.below(i + 1)
        out[i], out[j] = out[j], out[i]
    return np.array(out, dtype=np.int64)


# --------------------------------------------------------------------- layers

GELU_C = math.sqrt(2.0 / math.pi)


def act_forward(act, x):
    if act == "relu":
        return np.maximum(x, 0.0)
    return 0.5 * x * (1.0 + np.tanh(GELU_C * (x + 0.044715 * x ** 3)))


def act_backward(act, dy, x):
    if act == "relu":
        return dy * (x > 0)
    t = np.tanh(GELU_C * (x + 0.044715 * x ** 3))
    return dy * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_C * (1.0 + 3 * 0.044715 * x * x))


def mse_loss(pred, target):
    """Mean over every element of (pred - target)^2, and its gradient."""
    n = pred.size
    e = pred - target
    return float((e * e).sum() / max(n, 1)), 2.0 * e / max(n, 1)


def softmax_rows(x):
    z = x - x.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def cross_entropy_loss(logits, labels):
    """Mean over rows of -log softmax(logits)[label], and its gradient."""
    rows = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)
    logsum = np.log(np.exp(z).sum(axis=1, keepdims=True))
    logp = z - logsum
    loss = -logp[np.arange(rows), labels].sum() / max(rows, 1)
    d = np.exp(logp)
    d[np.arange(rows), labels] -= 1.0
    return float(loss), d / max(rows, 1)


def loss_and_grad(loss, out, target):
    return mse_loss(out, target) if loss == "mse" else cross_entropy_loss(out, target)


# ------------------------------------------------------------------------ MLP

class Mlp:
    """Shapes and flat layout of xt_mlp: W0 b0 W1 b1 ..., W_l in x out."""

    def __init__(self, dims, act="relu", loss="mse"):
        self.dims = [int(d) for d in (dims.split(",") if isinstance(dims, str) else dims)]
        self.act, self.loss = act, loss
        self.tensors = []  # (name, offset, shape)
        off = 0
        for l in range(len(self.dims) - 1):
            for name, shape in ((f"W{l}", (self.dims[l], self.dims[l + 1])),
                                (f"b{l}", (self.dims[l + 1],))):
                self.tensors.append((name, off, shape))
                off += int(np.prod(shape))
        self.nparams = off

    @property
    def nlayers(self):
        return len(self.dims) - 1

    def views(self, flat):
        """{name: array view of flat}."""
        return {name: flat[off:off + int(np.prod(shape))].reshape(shape)
                for name, off, shape in self.tensors}

    def randomize(self, seed):
        """xt_mlp_randomize: W uniform in +-1/sqrt(in), b zero, float32."""
        g = Rng(seed)
        flat = np.zeros(self.nparams, dtype=np.float32)
        for t, (name, off, shape) in enumerate(self.tensors):
            if t % 2 == 0:
                bound = np.float32(1.0) / np.sqrt(np.float32(shape[0]))
                for i in range(int(np.prod(shape))):
                    flat[off + i] = g.uniform(-bound, bound)
        return flat

    def forward(self, flat, x):
        """Output and the activations backward needs."""
        p = self.views(np.asarray(flat, dtype=np.float64))
        h = np.asarray(x, dtype=np.float64)
        hs, pres = [h], []
        for l in range(self.nlayers):
            pre = h @ p[f"W{l}"] + p[f"b{l}"]
            pres.append(pre)
            h = act_forward(self.act, pre) if l < self.nlayers - 1 else pre
            hs.append(h)
        return h, (hs, pres)

    def mean_loss(self, flat, x, target):
        """The loss (mean over rows), float64."""
        out, _ = self.forward(flat, x)
        return loss_and_grad(self.loss, out, target)[0]

    def loss_and_grads(self, flat, x, target):
        """The loss (mean over rows) and its gradient, flat, float64."""
        p = self.views(np.asarray(flat, dtype=np.float64))
        out, (hs, pres) = self.forward(flat, x)
        loss, d = loss_and_grad(self.loss, out, target)
        grads = np.zeros(self.nparams)
        g = self.views(grads)
        for l in range(self.nlayers - 1, -1, -1):
            g[f"W{l}"][...] = hs[l].T @ d
            g[f"b{l}"][...] = d.sum(axis=0)
            if l > 0:
                d = act_backward(self.act, d @ p[f"W{l}"].T, pres[l - 1])
        return loss, grads

    def sgd_steps(self, flat, batches, lr):
        """Full-batch SGD: the parameters (float64, flat) after each batch (x, target)."""
        w = np.asarray(flat, dtype=np.float64).copy()
        out = []
        for x, target in batches:
            _, g = self.loss_and_grads(w, x, target)
            w = w - lr * g
            out.append(w.copy())
        return out


    def adam_steps(self, flat, batches, hp):
        """Full-batch AdamW (adam_update below): the parameters after each batch."""
        w = np.asarray(flat, dtype=np.float64).copy()
        m, v = np.zeros_like(w), np.zeros_like(w)
        out = []
        for t, (x, target) in enumerate(batches, 1):
            _, g = self.loss_and_grads(w, x, target)
            w, m, v = adam_update(w, g, m, v, t, hp)
            out.append(w.copy())
        return out


# ----------------------------------------------------------------------- Adam

def adam_update(w, g, m, v, t, hp):
    """One AdamW step (t from 1), float64: the definition xt_adam_update follows.
    hp: lr, beta1, beta2, eps, wd. Returns the new (w, m, v)."""
    lr, b1, b2, eps, wd = (float(hp[k]) for k in ("lr", "beta1", "beta2", "eps", "wd"))
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    mhat, vhat = m / (1 - b1 ** t), v / (1 - b2 ** t)
    return w * (1 - lr * wd) - lr * mhat / (np.sqrt(vhat) + eps), m, v


# ----------------------------------------------------------------------- bf16

def bf16_round(x):
    """Each float32 of x rounded to the nearest bfloat16, ties to even, as float32
    (xt_bf16_round): add 0x7fff plus the lowest kept bit, drop the low 16 bits."""
    u = np.atleast_1d(np.asarray(x, dtype=np.float32)).view(np.uint32).astype(np.uint64)
    c = {k: np.uint64(v) for k, v in (("exp", 0x7f800000), ("man", 0x007fffff),
                                        ("quiet", 0x00400000), ("half", 0x7fff),
                                        ("one", 1), ("sh", 16), ("hi", 0xffff0000))}
    nan = ((u & c["exp"]) == c["exp"]) & ((u & c["man"]) != 0)
    r = np.where(nan, u | c["quiet"], u + c["half"] + ((u >> c["sh"]) & c["one"])) & c["hi"]
    r = r.reshape(np.shape(x))
    return r.astype(np.uint32).view(np.float32)


def is_bf16(x):
    """True where a float32 is exactly a bfloat16 value (its low 16 bits are zero)."""
    return (np.asarray(x, dtype=np.float32).view(np.uint32) & 0xffff) == 0


# --------------------------------------------------------- transformer pieces

def block(n, np_, r):
    """xt_block: (lo, count) of block r when n elements are cut into np_ blocks, the
    first n % np_ one element longer."""
    base, extra = divmod(n, np_)
    return r * base + min(r, extra), base + (1 if r < extra else 0)


# ------------------------------------------------ the reference's own check

def finite_difference_check(rng, trials=12):
    """Each analytic gradient here against central differences; returns failures."""
    failures = []
    for t in range(trials):
        nl = int(rng.integers(1, 4))
        dims = [int(rng.integers(1, 7)) for _ in range(nl + 1)]
        act = ("relu", "gelu")[t % 2]
        loss = ("mse", "ce")[(t // 2) % 2]
        m = Mlp(dims, act, loss)
        rows = int(rng.integers(1, 6))
        x = rng.normal(size=(rows, dims[0]))
        target = (rng.integers(0, dims[-1], rows).astype(np.int32) if loss == "ce"
                  else rng.normal(size=(rows, dims[-1])))
        w = rng.normal(size=m.nparams) * 0.7
        _, g = m.loss_and_grads(w, x, target)
        h = 1e-6
        num = np.zeros_like(w)
        for i in range(m.nparams):
            e = np.zeros_like(w)
            e[i] = h
            num[i] = (m.loss_and_grads(w + e, x, target)[0]
                      - m.loss_and_grads(w - e, x, target)[0]) / (2 * h)
        # ReLU's kink: a coordinate whose step crosses it is not differentiable there.
        err = np.abs(num - g).max() if m.nparams else 0.0
        if err > 1e-5 * (1 + np.abs(g).max()):
            pre_min = min((np.abs(p).min() for p in m.forward(w, x)[1][1]), default=1.0)
            if not (act == "relu" and pre_min < 1e-5):
                failures.append(f"dims {dims} {act} {loss}: |numeric - analytic| = {err:.2e}")
    for act in ("relu", "gelu"):
        x = rng.normal(size=50) * 3
        h = 1e-6
        num = (act_forward(act, x + h) - act_forward(act, x - h)) / (2 * h)
        ana = act_backward(act, np.ones_like(x), x)
        err = np.abs(num - ana)[np.abs(x) > 1e-4].max()
        if err > 1e-6:
            failures.append(f"{act}' off by {err:.2e}")
    return failures


if __name__ == "__main__":
    bad = finite_difference_check(np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1
                                                        else 20261122))
    for line in bad:
        print("nn.py gradient check:", line)
    print("nn.py: gradients match finite differences" if not bad else "nn.py: FAILED")
    sys.exit(1 if bad else 0)
