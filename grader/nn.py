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


def rmsnorm_forward(x, gamma, eps):
    """xt_rmsnorm_forward: (y, rstd), rstd = 1/sqrt(mean x^2 + eps) per row."""
    rstd = 1.0 / np.sqrt((x * x).mean(axis=1) + eps)
    return x * rstd[:, None] * gamma, rstd


def rmsnorm_backward(dy, x, gamma, rstd):
    """(dx, dgamma) of rmsnorm_forward: dx = r (dy g - x r^2 mean(dy g x)), dgamma = sum dy x r."""
    r = rstd[:, None]
    dyg = dy * gamma
    dx = r * (dyg - x * r * r * (dyg * x).mean(axis=1, keepdims=True))
    return dx, (dy * x * r).sum(axis=0)


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


def silu_forward(x):
    return x * sigmoid(x)


def silu_backward(dy, x):
    """dy silu'(x), silu'(x) = s (1 + x (1 - s)), s = sigmoid(x)."""
    s = sigmoid(x)
    return dy * s * (1.0 + x * (1.0 - s))


def swiglu_forward(x, wg, wu, wd):
    """xt_swiglu_forward: (y, (g, u, h)), y = (silu(x Wg) * x Wu) Wd."""
    g, u = x @ wg, x @ wu
    h = silu_forward(g) * u
    return h @ wd, (g, u, h)


def swiglu_backward(dy, x, wg, wu, wd, kept):
    """(dx, dwg, dwu, dwd) of swiglu_forward; kept is its (g, u, h)."""
    g, u, h = kept
    dh = dy @ wd.T
    du = dh * silu_forward(g)
    dg = silu_backward(dh * u, g)
    return dg @ wg.T + du @ wu.T, x.T @ dg, x.T @ du, h.T @ dy


def kv_head(j, hq, hkv):
    """The KV head query head j reads (grouped-query attention)."""
    return j // (hq // hkv)


def causal_mask(T):
    """T x T, True where position t may attend to position u (u <= t)."""
    return np.tril(np.ones((T, T), dtype=bool))


def _heads(a, batch, T, h, hd):
    """(batch T) x (h hd) -> batch x h x T x hd."""
    return np.asarray(a, dtype=np.float64).reshape(batch, T, h, hd).transpose(0, 2, 1, 3)


def _unheads(a):
    batch, h, T, hd = a.shape
    return a.transpose(0, 2, 1, 3).reshape(batch * T, h * hd)


def _probabilities(q, k, hq, hkv, hd, lse=None):
    """The scaled, masked scores and their probabilities, batch x hq x T x T, with k
    already per KV head; lse (batch x hq x T) computed when not given."""
    kh = k[:, [kv_head(j, hq, hkv) for j in range(hq)]]
    s = q @ kh.transpose(0, 1, 3, 2) / math.sqrt(hd)
    s = np.where(causal_mask(q.shape[2]), s, -np.inf)
    if lse is None:
        m = s.max(axis=3, keepdims=True)
        lse = (m + np.log(np.exp(s - m).sum(axis=3, keepdims=True)))[..., 0]
    return np.exp(s - lse[..., None]), lse, kh


def attention_forward(q, k, v, batch, T, hq, hkv, hd):
    """xt_attention_forward: (out, lse), out (batch T) x (hq hd), lse batch x hq x T."""
    qh, kh, vh = _heads(q, batch, T, hq, hd), _heads(k, batch, T, hkv, hd), \
        _heads(v, batch, T, hkv, hd)
    p, lse, _ = _probabilities(qh, kh, hq, hkv, hd)
    vq = vh[:, [kv_head(j, hq, hkv) for j in range(hq)]]
    return _unheads(p @ vq), lse


def _sum_groups(d, hq, hkv):
    """Per query head (batch x hq x T x hd) -> per KV head: the heads that read each add up."""
    out = np.zeros(d.shape[:1] + (hkv,) + d.shape[2:])
    for j in range(hq):
        out[:, kv_head(j, hq, hkv)] += d[:, j]
    return out


def attention_backward(dout, q, k, v, out, lse, batch, T, hq, hkv, hd, grad_scale=None,
                       dq_transposed=False):
    """(dq, dk, dv) of attention_forward, from out and lse, closed form: P = exp(S - lse),
    dV = P^T dO, dS = P (dO V^T - rowsum(dO O)), dQ = c dS K, dK = c dS^T Q, c = 1/sqrt(hd)
    (grad_scale and dq_transposed, dQ = c dS^T K, for the negative controls)."""
    c = 1.0 / math.sqrt(hd) if grad_scale is None else grad_scale
    qh = _heads(q, batch, T, hq, hd)
    dob, ob = _heads(dout, batch, T, hq, hd), _heads(out, batch, T, hq, hd)
    kv = _heads(k, batch, T, hkv, hd)
    p, _, kh = _probabilities(qh, kv, hq, hkv, hd, np.asarray(lse, dtype=np.float64))
    vq = _heads(v, batch, T, hkv, hd)[:, [kv_head(j, hq, hkv) for j in range(hq)]]
    dp = dob @ vq.transpose(0, 1, 3, 2)
    ds = p * (dp - (dob * ob).sum(axis=3, keepdims=True))
    dq = c * (ds.transpose(0, 1, 3, 2) if dq_transposed else ds) @ kh
    dk = _sum_groups(c * ds.transpose(0, 1, 3, 2) @ qh, hq, hkv)
    dv = _sum_groups(p.transpose(0, 1, 3, 2) @ dob, hq, hkv)
    return _unheads(dq), _unheads(dk), _unheads(dv)


def block_mask(nq, nk, mask):
    """nq x nk, True where query i sees key j: mask N (every key), C (j <= i) or S (j < i)."""
    i, j = np.arange(nq)[:, None], np.arange(nk)[None, :]
    return {"N": np.ones((nq, nk), dtype=bool), "C": j <= i, "S": j < i}[mask]


def _block_heads(q, k, v, nq, nk, hq, hkv, hd):
    """q as hq x nq x hd; k and v as hq x nk x hd, each query head's KV head."""
    kv = [kv_head(j, hq, hkv) for j in range(hq)]
    qh = np.asarray(q, dtype=np.float64).reshape(nq, hq, hd).transpose(1, 0, 2)
    kh = np.asarray(k, dtype=np.float64).reshape(nk, hkv, hd).transpose(1, 0, 2)[kv]
    vh = np.asarray(v, dtype=np.float64).reshape(nk, hkv, hd).transpose(1, 0, 2)[kv]
    return qh, kh, vh


def _block_probabilities(qh, kh, hd, mask, lse=None):
    """P (hq x nq x nk) and lse (hq x nq); a row that sees no key: P 0, lse -inf."""
    nq, nk = qh.shape[1], kh.shape[1]
    s = np.where(block_mask(nq, nk, mask), qh @ kh.transpose(0, 2, 1) / math.sqrt(hd), -np.inf)
    if lse is None:
        m = s.max(axis=2, keepdims=True) if nk else np.full(s.shape[:2] + (1,), -np.inf)
        m = np.where(np.isfinite(m), m, 0.0)
        total = np.exp(s - m).sum(axis=2, keepdims=True)
        with np.errstate(divide="ignore"):
            lse = np.where(total > 0, m + np.log(total), -np.inf)[..., 0]
    finite = np.isfinite(lse)[..., None]
    p = np.where(finite, np.exp(s - np.where(finite, lse[..., None], 0.0)), 0.0)
    return p, lse


def attn_block_forward(q, k, v, nq, nk, hq, hkv, hd, mask):
    """xt_attn_block_forward: (out nq x (hq hd), lse nq x hq), token-major."""
    qh, kh, vh = _block_heads(q, k, v, nq, nk, hq, hkv, hd)
    p, lse = _block_probabilities(qh, kh, hd, mask)
    return (p @ vh).transpose(1, 0, 2).reshape(nq, hq * hd), lse.T.copy()


def attn_block_backward(dout, q, k, v, out, lse, nq, nk, hq, hkv, hd, mask):
    """(dq, dk, dv) of one block given the whole row's out and lse (nq x hq), closed form
    as attention_backward's: P = exp(S - lse), dS = P (dO V^T - rowsum(dO O))."""
    c = 1.0 / math.sqrt(hd)
    qh, kh, vh = _block_heads(q, k, v, nq, nk, hq, hkv, hd)
    dob = np.asarray(dout, dtype=np.float64).reshape(nq, hq, hd).transpose(1, 0, 2)
    ob = np.asarray(out, dtype=np.float64).reshape(nq, hq, hd).transpose(1, 0, 2)
    p, _ = _block_probabilities(qh, kh, hd, mask, np.asarray(lse, dtype=np.float64).T)
    ds = p * (dob @ vh.transpose(0, 2, 1) - (dob * ob).sum(axis=2, keepdims=True))
    dq = (c * ds @ kh).transpose(1, 0, 2).reshape(nq, hq * hd)
    dk, dv = np.zeros((hkv, nk, hd)), np.zeros((hkv, nk, hd))
    for j in range(hq):
        dk[kv_head(j, hq, hkv)] += c * ds[j].T @ qh[j]
        dv[kv_head(j, hq, hkv)] += p[j].T @ dob[j]
    return dq, dk.transpose(1, 0, 2).reshape(nk, hkv * hd), \
        dv.transpose(1, 0, 2).reshape(nk, hkv * hd)


def block_pairs(nq, nk, mask):
    """The (query, key) position pairs a block computes: what xt_attn_pairs counts."""
    return int(block_mask(nq, nk, mask).sum())


def lse_merge(o, lse, o_blk, lse_blk):
    """xt_lse_merge: (o, lse) combined with (o_blk, lse_blk), weights e^lse over their sum;
    -inf rows carry no weight, two -inf rows give o 0, lse -inf."""
    o, o_blk = np.asarray(o, dtype=np.float64), np.asarray(o_blk, dtype=np.float64)
    a, b = np.asarray(lse, dtype=np.float64), np.asarray(lse_blk, dtype=np.float64)
    m = np.maximum(a, b)
    m = np.where(np.isfinite(m), m, 0.0)
    wa, wb = np.exp(a - m), np.exp(b - m)
    total = wa + wb
    safe = np.where(total > 0, total, 1.0)
    merged = (wa[:, None] * np.nan_to_num(o) + wb[:, None] * np.nan_to_num(o_blk)) / safe[:, None]
    with np.errstate(divide="ignore"):
        return np.where(total[:, None] > 0, merged, 0.0), np.where(total > 0, m + np.log(safe),
                                                                   -np.inf)


def embedding_forward(tokens, table):
    return np.asarray(table, dtype=np.float64)[np.asarray(tokens)]


def embedding_backward(tokens, dy, vocab):
    """dtable (vocab x d) of embedding_forward: repeated tokens add up."""
    dt = np.zeros((vocab, dy.shape[1]))
    np.add.at(dt, np.asarray(tokens), dy)
    return dt


class Decoder:
    """xt_decoder_*: a pre-norm decoder block (RMSNorm, GQA attention, residual, RMSNorm,
    SwiGLU, residual), its parameters flat in xt_decoder_layout's order."""

    def __init__(self, d, hq, hkv, hd, ff, eps=1e-5):
        self.d, self.hq, self.hkv, self.hd, self.ff, self.eps = d, hq, hkv, hd, ff, eps
        qw, kvw = hq * hd, hkv * hd
        self.tensors = []  # (name, offset, shape), in xt_decoder_layout's order
        off = 0
        for name, shape in (("norm1", (d,)), ("wq", (d, qw)), ("wk", (d, kvw)),
                            ("wv", (d, kvw)), ("wo", (qw, d)), ("norm2", (d,)),
                            ("wg", (d, ff)), ("wu", (d, ff)), ("wd", (ff, d))):
            self.tensors.append((name, off, shape))
            off += int(np.prod(shape))
        self.nparams = off

    def layout(self):
        """{name: offset} and "total", as xt_decoder_layout_of."""
        return dict({name: off for name, off, _ in self.tensors}, total=self.nparams)

    def views(self, flat):
        return {name: flat[off:off + int(np.prod(shape))].reshape(shape)
                for name, off, shape in self.tensors}

    def forward(self, flat, x, batch, T):
        """y and what backward needs."""
        p = self.views(np.asarray(flat, dtype=np.float64))
        x = np.asarray(x, dtype=np.float64)
        h1, rstd1 = rmsnorm_forward(x, p["norm1"], self.eps)
        q, k, v = h1 @ p["wq"], h1 @ p["wk"], h1 @ p["wv"]
        o, lse = attention_forward(q, k, v, batch, T, self.hq, self.hkv, self.hd)
        a = x + o @ p["wo"]
        h2, rstd2 = rmsnorm_forward(a, p["norm2"], self.eps)
        m, kept = swiglu_forward(h2, p["wg"], p["wu"], p["wd"])
        return a + m, (p, x, batch, T, h1, rstd1, q, k, v, o, lse, a, h2, rstd2, kept)

    def backward(self, dy, cache):
        """(dx, dparams flat) of forward."""
        p, x, batch, T, h1, rstd1, q, k, v, o, lse, a, h2, rstd2, kept = cache
        grads = np.zeros(self.nparams)
        g = self.views(grads)
        dh2, g["wg"][...], g["wu"][...], g["wd"][...] = swiglu_backward(
            dy, h2, p["wg"], p["wu"], p["wd"], kept)
        da, g["norm2"][...] = rmsnorm_backward(dh2, a, p["norm2"], rstd2)
        da = da + dy
        g["wo"][...] = o.T @ da
        dq, dk, dv = attention_backward(da @ p["wo"].T, q, k, v, o, lse, batch, T, self.hq,
                                        self.hkv, self.hd)
        g["wq"][...], g["wk"][...], g["wv"][...] = h1.T @ dq, h1.T @ dk, h1.T @ dv
        dh1 = dq @ p["wq"].T + dk @ p["wk"].T + dv @ p["wv"].T
        dx, g["norm1"][...] = rmsnorm_backward(dh1, x, p["norm1"], rstd1)
        return dx + da, grads

    def loss_and_grads(self, flat, x, batch, T, r):
        """The loss sum(y r), r a fixed random upstream gradient, and (dx, dparams)."""
        y, cache = self.forward(flat, x, batch, T)
        dx, grads = self.backward(r, cache)
        return float((y * r).sum()), dx, grads


# ------------------------------------------------ the reference's own check

def numeric_gradients(f, arrays, h=1e-6):
    """Central differences of the scalar f() with respect to every element of each array
    in arrays (changed in place and restored)."""
    out = []
    for a in arrays:
        g = np.zeros(a.shape)
        flat, gf = a.reshape(-1), g.reshape(-1)
        for i in range(flat.size):
            keep = flat[i]
            flat[i] = keep + h
            up = f()
            flat[i] = keep - h
            down = f()
            flat[i] = keep
            gf[i] = (up - down) / (2 * h)
        out.append(g)
    return out


# Central differences with h = 1e-6 in float64 are off by about h^2 |f'''| + 1e-16 |f| / h.
# Measured over the pieces below, seed 20261122 and 40 others, in units of
# (1 + max |analytic|): at most 1.9e-7 for RMSNorm (its curvature grows as 1/rms^3 on the
# small rows), 2e-9 for the others. The check allows 1e-5, as the MLP's does; a slip in a
# formula (a missing factor, a wrong head) is off by 1e-2 or more.
FD_RTOL = 1e-5


# ------------------------------------------------------- mixture of experts

def topk_route(logits, k, renorm):
    """xt_topk_route: (idx T x k, w T x k, probs T x E). The order comes from the logits
    themselves (softmax keeps it), of equal ones the lower expert first."""
    logits = np.asarray(logits, dtype=np.float64)
    probs = softmax_rows(logits) if logits.size else logits.copy()
    idx = np.argsort(-logits, axis=1, kind="stable")[:, :k]
    w = np.take_along_axis(probs, idx, 1)
    if renorm:
        w = w / w.sum(axis=1, keepdims=True)
    return idx.astype(np.int32), w, probs


def topk_selected_grad(dw, probs, idx, renorm):
    """dprobs (T x E) of topk_route's w, nonzero at the selected experts only."""
    dw, probs = np.asarray(dw, dtype=np.float64), np.asarray(probs, dtype=np.float64)
    sel = np.take_along_axis(probs, idx, 1)
    if renorm:
        total = sel.sum(axis=1, keepdims=True)
        dsel = (dw - (dw * sel / total).sum(axis=1, keepdims=True)) / total
    else:
        dsel = dw
    dp = np.zeros_like(probs)
    np.put_along_axis(dp, idx, dsel, 1)
    return dp


def softmax_rows_backward(dy, y):
    """dx of y = softmax(x) row by row: y (dy - sum(y dy))."""
    return y * (dy - (y * dy).sum(axis=1, keepdims=True))


def topk_route_backward(dw, probs, idx, renorm):
    """xt_topk_route_backward: dlogits (T x E) from dw (T x k)."""
    return softmax_rows_backward(topk_selected_grad(dw, probs, idx, renorm),
                                 np.asarray(probs, dtype=np.float64))


def expert_weights(params, e, d, ff):
    """(Wg, Wu, Wd) of expert e in a stack of experts' parameters (xt_expert_params)."""
    b = np.asarray(params, dtype=np.float64).reshape(-1)[e * 3 * d * ff:(e + 1) * 3 * d * ff]
    return b[:d * ff].reshape(d, ff), b[d * ff:2 * d * ff].reshape(d, ff), \
        b[2 * d * ff:].reshape(ff, d)


def experts_forward(x, counts, params, d, ff):
    """xt_experts_forward: (y, kept), rows grouped by expert, counts[j] rows for expert j
    of params; kept is each expert's (g, u, h)."""
    x = np.asarray(x, dtype=np.float64).reshape(-1, d)
    y, kept, lo = np.zeros_like(x), [], 0
    for j, n in enumerate(counts):
        y[lo:lo + n], kj = swiglu_forward(x[lo:lo + n], *expert_weights(params, j, d, ff))
        kept.append(kj)
        lo += n
    return y, kept


def experts_backward(dy, x, counts, params, d, ff, kept):
    """(dx, dparams) of experts_forward; dparams in params' layout."""
    x = np.asarray(x, dtype=np.float64).reshape(-1, d)
    dy = np.asarray(dy, dtype=np.float64).reshape(-1, d)
    dx, dparams, lo = np.zeros_like(x), [], 0
    for j, n in enumerate(counts):
        dx[lo:lo + n], *dw = swiglu_backward(dy[lo:lo + n], x[lo:lo + n],
                                             *expert_weights(params, j, d, ff), kept[j])
        dparams += [g.reshape(-1) for g in dw]
        lo += n
    return dx, np.concatenate(dparams) if dparams else np.zeros(0)


def switch_balance_loss(probs, idx, E, k, alpha):
    """(loss, dprobs): the Switch Transformer's alpha E sum_i f_i P_i, f_i the share of
    the k T choices that went to expert i (a count: no gradient), P_i the mean
    probability of expert i over the T tokens."""
    probs = np.asarray(probs, dtype=np.float64)
    T = probs.shape[0]
    if T == 0:
        return 0.0, np.zeros_like(probs)
    f = np.bincount(np.asarray(idx).reshape(-1), minlength=E) / (k * T)
    P = probs.mean(axis=0)
    return float(alpha * E * (f * P).sum()), np.broadcast_to(alpha * E * f / T, probs.shape)


class Moe:
    """One mixture-of-experts layer computed densely, every token on one process: the
    reference the MoE exercises are checked against. A token's choice may be dropped
    (keep[t, j] = 0: over an expert's capacity); dropped choices add nothing to y, their
    weights get no gradient, but they count in the balance loss's f_i as chosen."""

    def __init__(self, d, E, ff, k, renorm=False, alpha=0.0):
        self.d, self.E, self.ff, self.k, self.renorm, self.alpha = d, E, ff, k, renorm, alpha

    def forward(self, x, wr, params, keep=None):
        """(y, aux loss, cache). Each expert's SwiGLU runs once, on the stack of the
        (token, choice) rows that chose it and were kept."""
        x = np.asarray(x, dtype=np.float64).reshape(-1, self.d)
        T, d, ff, k = x.shape[0], self.d, self.ff, self.k
        idx, w, probs = topk_route(x @ np.asarray(wr, dtype=np.float64), k, self.renorm)
        keep = np.ones((T, k)) if keep is None else np.asarray(keep, dtype=np.float64)
        outs, kept = np.zeros((T, k, d)), {}
        for e in range(self.E):
            ts, js = np.nonzero((idx == e) & (keep != 0))
            if ts.size:
                outs[ts, js], kj = swiglu_forward(x[ts], *expert_weights(params, e, d, ff))
                kept[e] = (ts, js, kj)
        y = (keep[..., None] * w[..., None] * outs).sum(axis=1)
        aux, daux = switch_balance_loss(probs, idx, self.E, k, self.alpha)
        return y, aux, (x, idx, w, probs, keep, outs, kept, daux)

    def backward(self, dy, wr, params, cache):
        """(dx, dwr, dparams) of sum(y dy) + aux."""
        x, idx, w, probs, keep, outs, kept, daux = cache
        dy = np.asarray(dy, dtype=np.float64).reshape(-1, self.d)
        d, ff = self.d, self.ff
        dx, dparams = np.zeros_like(x), np.zeros(self.E * 3 * d * ff)
        dw = keep * np.einsum("td,tjd->tj", dy, outs)
        for e, (ts, js, kj) in kept.items():
            dxe, *dwe = swiglu_backward(w[ts, js][:, None] * dy[ts], x[ts],
                                        *expert_weights(params, e, d, ff), kj)
            np.add.at(dx, ts, dxe)
            dparams[e * 3 * d * ff:(e + 1) * 3 * d * ff] += np.concatenate(
                [g.reshape(-1) for g in dwe])
        dp = topk_selected_grad(dw, probs, idx, self.renorm) + daux
        dlogits = softmax_rows_backward(dp, probs)
        wr = np.asarray(wr, dtype=np.float64)
        return dx + dlogits @ wr.T, x.T @ dlogits, dparams


def _fd(failures, what, f, arrays, analytic, names):
    """One piece: each analytic gradient against numeric_gradients."""
    for name, num, ana in zip(names, numeric_gradients(f, arrays), analytic):
        ana = np.asarray(ana, dtype=np.float64)
        err = float(np.abs(num - ana).max()) if num.size else 0.0
        if not err <= FD_RTOL * (1 + (float(np.abs(ana).max()) if ana.size else 0.0)):
            failures.append(f"{what}: d{name} off by {err:.2e}")


# (hq, hkv) pairs for the attention checks: hkv < hq in most.
GQA = [(1, 1), (2, 1), (4, 2), (4, 1), (4, 4), (2, 2)]


def _check_mlp(rng, failures, trials):
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


def _check_act(rng, failures):
    for act in ("relu", "gelu"):
        x = rng.normal(size=50) * 3
        h = 1e-6
        num = (act_forward(act, x + h) - act_forward(act, x - h)) / (2 * h)
        ana = act_backward(act, np.ones_like(x), x)
        err = np.abs(num - ana)[np.abs(x) > 1e-4].max()
        if err > 1e-6:
            failures.append(f"{act}' off by {err:.2e}")


def _check_rmsnorm(rng, failures):
    for t in range(4):
        rows, d = int(rng.integers(1, 5)), int(rng.integers(1, 7))
        x = rng.normal(size=(rows, d)) * (0.05 if t == 3 else 1.0)  # eps matters when small
        gamma, r, eps = rng.normal(size=d), rng.normal(size=(rows, d)), [1e-5, 1e-6, 0.1, 1e-3][t]
        _, rstd = rmsnorm_forward(x, gamma, eps)
        _fd(failures, f"rmsnorm {rows}x{d} eps {eps:g}",
            lambda: float((rmsnorm_forward(x, gamma, eps)[0] * r).sum()), [x, gamma],
            rmsnorm_backward(r, x, gamma, rstd), ["x", "gamma"])


def _check_silu(rng, failures):
    x = rng.normal(size=60) * 4
    r = rng.normal(size=60)
    _fd(failures, "silu", lambda: float((silu_forward(x) * r).sum()), [x], [silu_backward(r, x)],
        ["x"])


def _check_swiglu(rng, failures):
    for _ in range(3):
        rows, d, ff = (int(rng.integers(1, 5)) for _ in range(3))
        x, r = rng.normal(size=(rows, d)), rng.normal(size=(rows, d))
        wg, wu, wd = rng.normal(size=(d, ff)), rng.normal(size=(d, ff)), rng.normal(size=(ff, d))
        _, kept = swiglu_forward(x, wg, wu, wd)
        _fd(failures, f"swiglu rows {rows} d {d} ff {ff}",
            lambda: float((swiglu_forward(x, wg, wu, wd)[0] * r).sum()), [x, wg, wu, wd],
            swiglu_backward(r, x, wg, wu, wd, kept), ["x", "Wg", "Wu", "Wd"])


def _check_attention(rng, failures):
    for t, (hq, hkv) in enumerate(GQA):
        batch, T, hd = 1 + t % 3, int(rng.integers(2, 6)), [1, 2, 3][t % 3]
        q = rng.normal(size=(batch * T, hq * hd))
        k, v = (rng.normal(size=(batch * T, hkv * hd)) for _ in range(2))
        r = rng.normal(size=(batch * T, hq * hd))
        out, lse = attention_forward(q, k, v, batch, T, hq, hkv, hd)
        _fd(failures, f"attention batch {batch} T {T} hq {hq} hkv {hkv} hd {hd}",
            lambda: float((attention_forward(q, k, v, batch, T, hq, hkv, hd)[0] * r).sum()),
            [q, k, v], attention_backward(r, q, k, v, out, lse, batch, T, hq, hkv, hd),
            ["q", "k", "v"])


def _check_attn_block(rng, failures):
    for t, (hq, hkv) in enumerate(GQA):
        mask = "NCS"[t % 3]
        nq, nk, hd = int(rng.integers(1, 5)), int(rng.integers(1, 5)), [1, 2, 3][t % 3]
        q = rng.normal(size=(nq, hq * hd))
        k, v = (rng.normal(size=(nk, hkv * hd)) for _ in range(2))
        r = rng.normal(size=(nq, hq * hd))
        shape = (nq, nk, hq, hkv, hd, mask)
        out, lse = attn_block_forward(q, k, v, *shape)
        _fd(failures, f"attention block nq {nq} nk {nk} hq {hq} hkv {hkv} hd {hd} mask {mask}",
            lambda: float((attn_block_forward(q, k, v, *shape)[0] * r).sum()),
            [q, k, v], attn_block_backward(r, q, k, v, out, lse, *shape), ["q", "k", "v"])


def _check_embedding(rng, failures):
    vocab, d, n = 5, 3, 9
    tokens = np.concatenate([[0, vocab - 1, 2, 2], rng.integers(0, vocab, n - 4)])
    table, r = rng.normal(size=(vocab, d)), rng.normal(size=(n, d))
    _fd(failures, "embedding", lambda: float((embedding_forward(tokens, table) * r).sum()),
        [table], [embedding_backward(tokens, r, vocab)], ["table"])


def _check_decoder(rng, failures):
    for t, (hq, hkv) in enumerate([(2, 1), (4, 2), (1, 1)]):
        batch, T, d, hd, ff = 2 - t % 2, 3 - t % 2, 4, [3, 1, 2][t], 3
        m = Decoder(d, hq, hkv, hd, ff, eps=1e-5)
        flat = rng.normal(size=m.nparams) * 0.5
        for name, off, shape in m.tensors:
            if name.startswith("norm"):
                flat[off:off + shape[0]] += 1.0
        x, r = rng.normal(size=(batch * T, d)), rng.normal(size=(batch * T, d))
        _, dx, g = m.loss_and_grads(flat, x, batch, T, r)
        _fd(failures, f"decoder batch {batch} T {T} d {d} hq {hq} hkv {hkv} hd {hd} ff {ff}",
            lambda: m.loss_and_grads(flat, x, batch, T, r)[0], [flat, x], [g, dx],
            ["params", "x"])



def _check_topk_route(rng, failures):
    for t, (T, E, k, renorm) in enumerate([(3, 4, 2, False), (4, 5, 2, True), (2, 3, 1, True),
                                           (3, 6, 3, False)]):
        logits = rng.normal(size=(T, E)) * 2
        r = rng.normal(size=(T, k))
        idx, _, probs = topk_route(logits, k, renorm)

        def f():  # the selection held fixed: a step this small never changes it
            p = softmax_rows(logits)
            w = np.take_along_axis(p, idx, 1)
            return float(((w / w.sum(axis=1, keepdims=True) if renorm else w) * r).sum())
        _fd(failures, f"topk route T {T} E {E} k {k} renorm {renorm}", f, [logits],
            [topk_route_backward(r, probs, idx, renorm)], ["logits"])


def _check_experts(rng, failures):
    d, ff, counts = 3, 4, [2, 0, 3]
    params = rng.normal(size=len(counts) * 3 * d * ff) * 0.7
    x, r = rng.normal(size=(5, d)), rng.normal(size=(5, d))
    _, kept = experts_forward(x, counts, params, d, ff)
    _fd(failures, "experts counts 2, 0, 3",
        lambda: float((experts_forward(x, counts, params, d, ff)[0] * r).sum()), [x, params],
        experts_backward(r, x, counts, params, d, ff, kept), ["x", "params"])


def _check_moe(rng, failures):
    for t, (T, d, E, ff, k, renorm) in enumerate([(5, 3, 4, 2, 2, False), (4, 2, 3, 3, 1, False),
                                                  (3, 3, 4, 2, 2, True)]):
        m = Moe(d, E, ff, k, renorm, alpha=0.3)
        x, r = rng.normal(size=(T, d)), rng.normal(size=(T, d))
        wr, params = rng.normal(size=(d, E)), rng.normal(size=E * 3 * d * ff) * 0.7
        keep = np.ones((T, k))
        keep[0, -1] = 0  # one choice dropped, as by a capacity

        def f():
            y, aux, _ = m.forward(x, wr, params, keep)
            return float((y * r).sum() + aux)
        # The selection must not change under the small steps: count on a margin.
        _, _, cache = m.forward(x, wr, params, keep)
        _fd(failures, f"moe T {T} d {d} E {E} ff {ff} k {k} renorm {renorm}", f,
            [x, wr, params], m.backward(r, wr, params, cache), ["x", "wr", "params"])


PIECES = ("mlp", "act", "rmsnorm", "silu", "swiglu", "attention", "attn_block", "embedding",
          "decoder", "topk_route", "experts", "moe")


def finite_difference_check(rng, trials=12, pieces=PIECES):
    """Each analytic gradient here against central differences, with random upstream
    gradients; returns failures. pieces: which of PIECES to check."""
    failures = []
    for piece in PIECES:
        if piece not in pieces:
            continue
        if piece == "mlp":
            _check_mlp(rng, failures, trials)
        else:
            globals()[f"_check_{piece}"](rng, failures)
    return failures


if __name__ == "__main__":
    bad = finite_difference_check(np.random.default_rng(int(sys.argv[1]) if len(sys.argv) > 1
                                                        else 20261122))
    for line in bad:
        print("nn.py gradient check:", line)
    print("nn.py: gradients match finite differences" if not bad else "nn.py: FAILED")
    sys.exit(1 if bad else 0)
