/*
 * transformer.c: the numeric pieces of the lectures on tensor, pipeline,
 * context and expert parallelism (xt_nn.h, "transformer pieces"): the
 * split rule, RMSNorm, SiLU and the SwiGLU MLP, causal grouped-query
 * attention, the embedding, and a decoder block made of them.
 * grader/nn.py holds the NumPy twin of each.
 */
#include "xt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void xt_block(int n, int np, int r, int *lo, int *count)
{
    if (n < 0 || np < 1 || r < 0 || r >= np)
        xt_die("xt_block(n=%d, np=%d, r=%d): needs n >= 0, np >= 1 and 0 <= r < np", n, np, r);
    int base = n / np, extra = n % np;
    *count = base + (r < extra);
    *lo = r * base + (r < extra ? r : extra);
}

/* ----------------------------------------------------------------- RMSNorm */

static void check_dims(const char *fn, int rows, int d)
{
    if (rows < 0 || d < 1)
        xt_die("%s(rows=%d, d=%d): needs rows >= 0 and d >= 1", fn, rows, d);
}

void xt_rmsnorm_forward(float *y, float *rstd, const float *x, const float *gamma, int rows, int d,
                        float eps)
{
    check_dims("xt_rmsnorm_forward", rows, d);
    for (long i = 0; i < rows; i++) {
        const float *xi = x + i * d;
        double ss = 0.0;
        for (int j = 0; j < d; j++)
            ss += (double)xi[j] * xi[j];
        float r = (float)(1.0 / sqrt(ss / d + (double)eps));
        rstd[i] = r;
        for (int j = 0; j < d; j++)
            y[i * d + j] = xi[j] * r * gamma[j];
    }
}

/*
 * y_j = x_j r g_j with r = (mean x^2 + eps)^-1/2, so dr/dx_k = -r^3 x_k / d and
 *     dx_k = r (dy_k g_k - x_k r^2 / d sum_j dy_j g_j x_j).
 */
void xt_rmsnorm_backward(float *dx, float *dgamma, const float *dy, const float *x,
                         const float *gamma, const float *rstd, int rows, int d)
{
    check_dims("xt_rmsnorm_backward", rows, d);
    for (long i = 0; i < rows; i++) {
        const float *xi = x + i * d, *dyi = dy + i * d;
        float r = rstd[i];
        if (dgamma)
            for (int j = 0; j < d; j++)
                dgamma[j] += dyi[j] * xi[j] * r;
        if (!dx)
            continue;
        double dot = 0.0;
        for (int j = 0; j < d; j++)
            dot += (double)dyi[j] * gamma[j] * xi[j];
        float c = (float)(dot * r * r / d);
        for (int j = 0; j < d; j++)
            dx[i * d + j] = r * (dyi[j] * gamma[j] - xi[j] * c);
    }
}

/* ------------------------------------------------------------ SiLU, SwiGLU */

static float sigmoid(float x)
{
    return 1.0f / (1.0f + expf(-x));
}

void xt_silu_forward(float *y, const float *x, long n)
{
    for (long i = 0; i < n; i++)
        y[i] = x[i] * sigmoid(x[i]);
}

/* silu'(x) = s (1 + x (1 - s)), s = sigmoid(x). */
void xt_silu_backward(float *dx, const float *dy, const float *x, long n)
{
    for (long i = 0; i < n; i++) {
        float s = sigmoid(x[i]);
        dx[i] = dy[i] * s * (1.0f + x[i] * (1.0f - s));
    }
}

static void check_mlp(const char *fn, int rows, int d, int ff)
{
    if (rows < 0 || d < 1 || ff < 0)
        xt_die("%s(rows=%d, d=%d, ff=%d): needs rows >= 0, d >= 1 and ff >= 0", fn, rows, d, ff);
}

void xt_swiglu_forward(float *y, float *g, float *u, float *h, const float *x, const float *wg,
                       const float *wu, const float *wd, int rows, int d, int ff)
{
    check_mlp("xt_swiglu_forward", rows, d, ff);
    long n = (long)rows * ff;
    xt_gemm(0, 0, rows, ff, d, 1.0f, x, wg, 0.0f, g);
    xt_gemm(0, 0, rows, ff, d, 1.0f, x, wu, 0.0f, u);
    xt_silu_forward(h, g, n);
    for (long i = 0; i < n; i++)
        h[i] *= u[i];
    xt_gemm(0, 0, rows, d, ff, 1.0f, h, wd, 0.0f, y);
}

void xt_swiglu_backward(float *dx, float *dwg, float *dwu, float *dwd, const float *dy,
                        const float *x, const float *g, const float *u, const float *h,
                        const float *wg, const float *wu, const float *wd, int rows, int d, int ff)
{
    check_mlp("xt_swiglu_backward", rows, d, ff);
    long n = (long)rows * ff;
    if (dwd)
        xt_gemm(1, 0, ff, d, rows, 1.0f, h, dy, 1.0f, dwd);
    if (!dx && !dwg && !dwu)
        return;
    /* dg (first, from dh in place) and du: scratch while the call runs. */
    float *dg = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)(2 * n + 1));
    float *du = dg + n;
    xt_gemm(0, 1, rows, ff, d, 1.0f, dy, wd, 0.0f, dg); /* dh */
    for (long i = 0; i < n; i++) {
        float s = sigmoid(g[i]);
        du[i] = dg[i] * g[i] * s;
        dg[i] = dg[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    }
    if (dwg)
        xt_gemm(1, 0, d, ff, rows, 1.0f, x, dg, 1.0f, dwg);
    if (dwu)
        xt_gemm(1, 0, d, ff, rows, 1.0f, x, du, 1.0f, dwu);
    if (dx) {
        xt_gemm(0, 1, rows, d, ff, 1.0f, dg, wg, 0.0f, dx);
        xt_gemm(0, 1, rows, d, ff, 1.0f, du, wu, 1.0f, dx);
    }
    xt_free(dg);
}

/* --------------------------------------------------------------- attention */

/*
 * Queries are taken QBLOCK rows at a time: one block's scores against the
 * keys it may see (QBLOCK x T at most) is all that exists of the T x T
 * matrix, in forward and in backward.
 */
enum { QBLOCK = 32 };

static void check_attention(const char *fn, int batch, int T, int hq, int hkv, int hd)
{
    if (batch < 0 || T < 0 || hq < 1 || hkv < 1 || hd < 1)
        xt_die("%s(batch=%d, T=%d, hq=%d, hkv=%d, hd=%d): needs batch, T >= 0 and hq, hkv, "
               "hd >= 1",
               fn, batch, T, hq, hkv, hd);
    if (hq % hkv)
        xt_die("%s: hkv=%d KV heads do not divide hq=%d query heads", fn, hkv, hq);
}

/*
 * The scaled scores of queries t0 .. t0+nq-1 against keys 0 .. t0+nq-1 into
 * s (nq x nk, nk = t0 + nq), turned into probabilities exp(score - lse), 0
 * past the diagonal. lse: the rows' log-sum-exp, read (backward), or first
 * computed into lse_out when that is not NULL (forward; then lse is lse_out).
 */
static void probabilities(float *s, float *lse_out, const float *lse, const float *qh,
                          const float *kh, int ldq, int ldk, int t0, int nq, int hd, float scale)
{
    int nk = t0 + nq;
    xt_gemm_ld(0, 1, nq, nk, hd, scale, qh + (long)t0 * ldq, ldq, kh, ldk, 0.0f, s, nk);
    for (int i = 0; i < nq; i++) {
        float *si = s + (long)i * nk;
        int seen = t0 + i + 1; /* keys 0 .. t0 + i */
        if (lse_out) {
            float mx = si[0];
            for (int u = 1; u < seen; u++)
                mx = si[u] > mx ? si[u] : mx;
            double sum = 0.0;
            for (int u = 0; u < seen; u++)
                sum += exp((double)si[u] - mx);
            lse_out[t0 + i] = mx + (float)log(sum);
        }
        for (int u = 0; u < seen; u++)
            si[u] = expf(si[u] - lse[t0 + i]);
        for (int u = seen; u < nk; u++)
            si[u] = 0.0f;
    }
}

void xt_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                          int batch, int T, int hq, int hkv, int hd)
{
    check_attention("xt_attention_forward", batch, T, hq, hkv, hd);
    if (!batch || !T)
        return;
    int ldq = hq * hd, ldk = hkv * hd, group = hq / hkv;
    float scale = 1.0f / sqrtf((float)hd);
    float *s = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)QBLOCK * (size_t)T);
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < hq; j++) {
            long row0 = (long)b * T;
            const float *qh = q + row0 * ldq + j * hd, *kh = k + row0 * ldk + (j / group) * hd;
            const float *vh = v + row0 * ldk + (j / group) * hd;
            float *oh = out + row0 * ldq + j * hd, *lh = lse + ((long)b * hq + j) * T;
            for (int t0 = 0; t0 < T; t0 += QBLOCK) {
                int nq = T - t0 < QBLOCK ? T - t0 : QBLOCK, nk = t0 + nq;
                probabilities(s, lh, lh, qh, kh, ldq, ldk, t0, nq, hd, scale);
                xt_gemm_ld(0, 0, nq, hd, nk, 1.0f, s, nk, vh, ldk, 0.0f, oh + (long)t0 * ldq, ldq);
            }
        }
    xt_free(s);
}

/*
 * With P the probabilities and dP = dO V^T: dV = P^T dO, dS = P (dP - D),
 * D_t = dO_t . O_t (the sum over u of P_tu dP_tu), dQ = scale dS K and
 * dK = scale dS^T Q. The query heads of one KV head add up in dK and dV.
 */
void xt_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const float *k, const float *v, const float *out, const float *lse,
                           int batch, int T, int hq, int hkv, int hd)
{
    check_attention("xt_attention_backward", batch, T, hq, hkv, hd);
    long nkv = (long)batch * T * hkv * hd;
    if (dk)
        memset(dk, 0, sizeof(float) * (size_t)nkv);
    if (dv)
        memset(dv, 0, sizeof(float) * (size_t)nkv);
    if (!batch || !T || (!dq && !dk && !dv))
        return;
    int ldq = hq * hd, ldk = hkv * hd, group = hq / hkv;
    float scale = 1.0f / sqrtf((float)hd);
    float *p = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)QBLOCK * ((size_t)2 * T + 1));
    float *dp = p + (long)QBLOCK * T, *dsum = dp + (long)QBLOCK * T;
    for (int b = 0; b < batch; b++)
        for (int j = 0; j < hq; j++) {
            long row0 = (long)b * T, kvcol = (long)(j / group) * hd;
            const float *qh = q + row0 * ldq + j * hd, *kh = k + row0 * ldk + kvcol;
            const float *vh = v + row0 * ldk + kvcol, *doh = dout + row0 * ldq + j * hd;
            const float *oh = out + row0 * ldq + j * hd;
            const float *lh = lse + ((long)b * hq + j) * T;
            for (int t0 = 0; t0 < T; t0 += QBLOCK) {
                int nq = T - t0 < QBLOCK ? T - t0 : QBLOCK, nk = t0 + nq;
                const float *dob = doh + (long)t0 * ldq;
                probabilities(p, NULL, lh, qh, kh, ldq, ldk, t0, nq, hd, scale);
                if (dv)
                    xt_gemm_ld(1, 0, nk, hd, nq, 1.0f, p, nk, dob, ldq, 1.0f,
                               dv + row0 * ldk + kvcol, ldk);
                if (!dq && !dk)
                    continue;
                xt_gemm_ld(0, 1, nq, nk, hd, 1.0f, dob, ldq, vh, ldk, 0.0f, dp, nk);
                for (int i = 0; i < nq; i++) {
                    double D = 0.0;
                    for (int c = 0; c < hd; c++)
                        D += (double)dob[(long)i * ldq + c] * oh[(long)(t0 + i) * ldq + c];
                    dsum[i] = (float)D;
                }
                for (int i = 0; i < nq; i++)
                    for (int u = 0; u < nk; u++)
                        dp[(long)i * nk + u] =
                            p[(long)i * nk + u] * (dp[(long)i * nk + u] - dsum[i]);
                if (dq)
                    xt_gemm_ld(0, 0, nq, hd, nk, scale, dp, nk, kh, ldk, 0.0f,
                               dq + (row0 + t0) * ldq + j * hd, ldq);
                if (dk)
                    xt_gemm_ld(1, 0, nk, hd, nq, scale, dp, nk, qh + (long)t0 * ldq, ldq, 1.0f,
                               dk + row0 * ldk + kvcol, ldk);
            }
        }
    xt_free(p);
}

/* --------------------------------------------------------------- embedding */

static void check_tokens(const char *fn, const int *tokens, int n, int vocab, int d)
{
    if (n < 0 || vocab < 1 || d < 1)
        xt_die("%s(n=%d, vocab=%d, d=%d): needs n >= 0, vocab >= 1 and d >= 1", fn, n, vocab, d);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            xt_die("%s: token %d at position %d is outside the table's 0..%d", fn, tokens[i], i,
                   vocab - 1);
}

void xt_embedding_forward(float *y, const int *tokens, int n, const float *table, int vocab, int d)
{
    check_tokens("xt_embedding_forward", tokens, n, vocab, d);
    for (long i = 0; i < n; i++)
        memcpy(y + i * d, table + (long)tokens[i] * d, sizeof(float) * (size_t)d);
}

void xt_embedding_backward(float *dtable, const int *tokens, int n, const float *dy, int vocab,
                           int d)
{
    check_tokens("xt_embedding_backward", tokens, n, vocab, d);
    for (long i = 0; i < n; i++) {
        float *row = dtable + (long)tokens[i] * d;
        for (int j = 0; j < d; j++)
            row[j] += dy[i * d + j];
    }
}

/* ----------------------------------------------------------- decoder block */

xt_decoder_layout xt_decoder_layout_of(const xt_decoder_shape *s)
{
    if (s->d < 1 || s->hq < 1 || s->hkv < 1 || s->hd < 1 || s->ff < 0)
        xt_die("decoder shape d=%d hq=%d hkv=%d hd=%d ff=%d: needs d, hq, hkv, hd >= 1 and "
               "ff >= 0",
               s->d, s->hq, s->hkv, s->hd, s->ff);
    if (s->hq % s->hkv)
        xt_die("decoder shape: hkv=%d KV heads do not divide hq=%d query heads", s->hkv, s->hq);
    long d = s->d, qw = (long)s->hq * s->hd, kvw = (long)s->hkv * s->hd, ff = s->ff;
    xt_decoder_layout l;
    l.norm1 = 0;
    l.wq = l.norm1 + d;
    l.wk = l.wq + d * qw;
    l.wv = l.wk + d * kvw;
    l.wo = l.wv + d * kvw;
    l.norm2 = l.wo + qw * d;
    l.wg = l.norm2 + d;
    l.wu = l.wg + d * ff;
    l.wd = l.wu + d * ff;
    l.total = l.wd + ff * d;
    return l;
}

/* The activations, each an array in the one block that holds the cache. */
enum { C_X, C_RSTD1, C_H1, C_Q, C_K, C_V, C_O, C_LSE, C_A, C_RSTD2, C_H2, C_G, C_U, C_H, C_N };

struct xt_decoder_cache {
    xt_decoder_shape s;
    int batch, T;
    float *t[C_N];
};

xt_decoder_cache *xt_decoder_forward(float *y, const float *x, const float *params,
                                     const xt_decoder_shape *s, int batch, int T)
{
    xt_decoder_layout l = xt_decoder_layout_of(s);
    if (batch < 0 || T < 0)
        xt_die("xt_decoder_forward(batch=%d, T=%d): needs batch, T >= 0", batch, T);
    long N = (long)batch * T, d = s->d, qw = (long)s->hq * s->hd, kvw = (long)s->hkv * s->hd;
    long count[C_N] = {
        N * d, N, N * d, N * qw,    N * kvw,   N * kvw,  N * qw, batch * (long)s->hq * T,
        N * d, N, N * d, N * s->ff, N * s->ff, N * s->ff};
    size_t head = (sizeof(xt_decoder_cache) + 31) / 32 * 32, total = 0;
    for (int i = 0; i < C_N; i++)
        total += (size_t)count[i];
    xt_decoder_cache *c = xt_alloc(XT_MEM_ACTIVATIONS, head + sizeof(float) * total);
    c->s = *s;
    c->batch = batch;
    c->T = T;
    float *next = (float *)((char *)c + head);
    for (int i = 0; i < C_N; i++) {
        c->t[i] = next;
        next += count[i];
    }
    float **t = c->t;
    int n = (int)N;
    memcpy(t[C_X], x, sizeof(float) * (size_t)(N * d));
    xt_rmsnorm_forward(t[C_H1], t[C_RSTD1], x, params + l.norm1, n, s->d, s->eps);
    xt_linear_forward(t[C_Q], t[C_H1], params + l.wq, NULL, n, s->d, (int)qw);
    xt_linear_forward(t[C_K], t[C_H1], params + l.wk, NULL, n, s->d, (int)kvw);
    xt_linear_forward(t[C_V], t[C_H1], params + l.wv, NULL, n, s->d, (int)kvw);
    xt_attention_forward(t[C_O], t[C_LSE], t[C_Q], t[C_K], t[C_V], batch, T, s->hq, s->hkv, s->hd);
    memcpy(t[C_A], x, sizeof(float) * (size_t)(N * d));
    xt_gemm(0, 0, n, s->d, (int)qw, 1.0f, t[C_O], params + l.wo, 1.0f, t[C_A]);
    xt_rmsnorm_forward(t[C_H2], t[C_RSTD2], t[C_A], params + l.norm2, n, s->d, s->eps);
    xt_swiglu_forward(y, t[C_G], t[C_U], t[C_H], t[C_H2], params + l.wg, params + l.wu,
                      params + l.wd, n, s->d, s->ff);
    for (long i = 0; i < N * d; i++)
        y[i] += t[C_A][i];
    return c;
}

void xt_decoder_backward(float *dx, float *dparams, const float *dy, const float *params,
                         xt_decoder_cache *cache)
{
    const xt_decoder_shape *s = &cache->s;
    xt_decoder_layout l = xt_decoder_layout_of(s);
    float **t = cache->t;
    long N = (long)cache->batch * cache->T, d = s->d;
    int n = (int)N, qw = s->hq * s->hd, kvw = s->hkv * s->hd;
    float *dp = dparams; /* NULL: no parameter gradients, only dx */
#define GRAD(name) (dp ? dp + l.name : NULL)
    /* Scratch: da, dh (N x d); do, dq (N x qw); dk, dv (N x kvw). */
    float *da =
        xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)(N * (2 * d + 2 * qw + 2 * kvw) + 1));
    float *dh = da + N * d, *dob = dh + N * d, *dq = dob + N * qw, *dk = dq + N * qw,
          *dv = dk + N * kvw;

    /* y = a + swiglu(rmsnorm(a)) */
    xt_swiglu_backward(dh, GRAD(wg), GRAD(wu), GRAD(wd), dy, t[C_H2], t[C_G], t[C_U], t[C_H],
                       params + l.wg, params + l.wu, params + l.wd, n, s->d, s->ff);
    xt_rmsnorm_backward(da, GRAD(norm2), dh, t[C_A], params + l.norm2, t[C_RSTD2], n, s->d);
    for (long i = 0; i < N * d; i++)
        da[i] += dy[i];

    /* a = x + attention(rmsnorm(x) Wq, . Wk, . Wv) Wo */
    xt_linear_backward(dob, GRAD(wo), NULL, da, t[C_O], params + l.wo, n, qw, s->d);
    xt_attention_backward(dq, dk, dv, dob, t[C_Q], t[C_K], t[C_V], t[C_O], t[C_LSE], cache->batch,
                          cache->T, s->hq, s->hkv, s->hd);
    xt_linear_backward(dh, GRAD(wq), NULL, dq, t[C_H1], params + l.wq, n, s->d, qw);
    xt_linear_backward(NULL, GRAD(wk), NULL, dk, t[C_H1], params + l.wk, n, s->d, kvw);
    xt_linear_backward(NULL, GRAD(wv), NULL, dv, t[C_H1], params + l.wv, n, s->d, kvw);
    xt_gemm(0, 1, n, s->d, kvw, 1.0f, dk, params + l.wk, 1.0f, dh);
    xt_gemm(0, 1, n, s->d, kvw, 1.0f, dv, params + l.wv, 1.0f, dh);
    xt_rmsnorm_backward(dx, GRAD(norm1), dh, t[C_X], params + l.norm1, t[C_RSTD1], n, s->d);
    if (dx)
        for (long i = 0; i < N * d; i++)
            dx[i] += da[i];
#undef GRAD
    xt_free(da);
    xt_free(cache);
}
