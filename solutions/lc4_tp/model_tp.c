/*
 * model_tp.c: a small decoder language model trained with tensor
 * parallelism: every piece of this lecture in one training step.
 * docs/lc4_tp.md#model_tp
 *
 *   tokens -> embedding (vocab-parallel: rows of E)                 all-reduce n d
 *          -> L x [ a = x + attention(rmsnorm(x)) (heads split)     all-reduce n d
 *                   y = a + swiglu(rmsnorm(a))    (hidden split)    all-reduce n d ]
 *          -> rmsnorm -> LM head (vocab-parallel: columns of W)     no message
 *          -> fused cross-entropy over the vocabulary blocks        all-reduces of n, 2n
 *
 * n = batch T tokens, whole on every rank between the layers. Each rank
 * holds: the vocabulary block xt_block(V, np, r) of the embedding's rows and
 * of the head's columns; its query heads, its KV heads (replicated on np/hkv
 * ranks when hkv < np) and the matching rows of Wo; its hidden units of
 * Wg, Wu (columns) and Wd (rows); the RMSNorm gains whole, as every rank
 * normalizes the same whole activations. Backward mirrors forward: the f
 * operators (in front of the QKV projections, the MLP's gate and up, and the
 * head) all-reduce their input gradients; the g operators (after Wo and Wd,
 * and the embedding) need nothing; replicated KV heads sum their weight
 * gradients over their replicas. Then each rank takes an AdamW step on what
 * it holds.
 *
 * Communication per step and rank: forward 1 + 2L all-reduces of n d
 * floats, the cross-entropy's 2 (a MAX of n, then a SUM of 2n), backward
 * 1 + 2L of n d, and 2L of d hd hkv_local on the replica group when KV heads
 * are replicated. The logits (n x V) are never gathered.
 */
#include "kit.h" /* the lecture's kit: tp_config, tp_model (this rank's shard), its set-up */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the model */

// BEGIN SOLUTION
/* What one block's forward keeps for its backward. */
typedef struct {
    float *x, *h1, *rstd1, *q, *k, *v, *o, *lse, *a, *h2, *rstd2, *g, *u, *hh;
} tp_saved;

static float *act_alloc(long n)
{
    return xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)n);
}

static void sum_over(MPI_Comm comm, float *buf, long n)
{
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, comm);
}

/* y (n x d) = the embedding rows of tokens, from the rows this rank holds. */
static void tp_embed(const tp_model *m, const int *tokens, int n, float *y)
{
    int d = m->cfg.d;
    for (int i = 0; i < n; i++) {
        int t = tokens[i] - m->v_lo;
        if (t >= 0 && t < m->v_count)
            memcpy(y + (size_t)i * d, m->embed + (size_t)t * d, sizeof(float) * d);
        else
            memset(y + (size_t)i * d, 0, sizeof(float) * d);
    }
    sum_over(m->comm, y, (long)n * d);
}

/* The embedding's gradient: dy (n x d) into the rows this rank holds. */
static void tp_embed_backward(tp_model *m, const int *tokens, int n, const float *dy)
{
    int d = m->cfg.d;
    for (int i = 0; i < n; i++) {
        int t = tokens[i] - m->v_lo;
        if (t >= 0 && t < m->v_count)
            for (int j = 0; j < d; j++)
                m->dembed[(size_t)t * d + j] += dy[(size_t)i * d + j];
    }
}

/* Block l forward: x (n x d) in, y out; keeps what backward needs in s. */
static void tp_block_forward(const tp_model *m, int l, const float *x, float *y, tp_saved *s,
                             int batch, int T)
{
    const tp_config *c = &m->cfg;
    const tp_block *b = &m->blk[l];
    int n = batch * T, d = c->d, qw = m->hq_local * c->hd, kvw = m->hkv_local * c->hd;
    s->x = act_alloc((long)n * d), s->h1 = act_alloc((long)n * d), s->rstd1 = act_alloc(n);
    s->q = act_alloc((long)n * qw), s->k = act_alloc((long)n * kvw);
    s->v = act_alloc((long)n * kvw), s->o = act_alloc((long)n * qw);
    s->lse = act_alloc((long)n * m->hq_local), s->a = act_alloc((long)n * d);
    s->h2 = act_alloc((long)n * d), s->rstd2 = act_alloc(n);
    s->g = act_alloc((long)n * m->ff_local), s->u = act_alloc((long)n * m->ff_local);
    s->hh = act_alloc((long)n * m->ff_local);
    memcpy(s->x, x, sizeof(float) * (size_t)n * d);

    xt_rmsnorm_forward(s->h1, s->rstd1, x, b->norm1, n, d, c->eps);
    xt_linear_forward(s->q, s->h1, b->wq, NULL, n, d, qw);
    xt_linear_forward(s->k, s->h1, b->wk, NULL, n, d, kvw);
    xt_linear_forward(s->v, s->h1, b->wv, NULL, n, d, kvw);
    xt_attention_forward(s->o, s->lse, s->q, s->k, s->v, batch, T, m->hq_local, m->hkv_local,
                         c->hd);
    xt_linear_forward(s->a, s->o, b->wo, NULL, n, qw, d);
    sum_over(m->comm, s->a, (long)n * d); /* g: the heads' partial outputs */
    for (long i = 0; i < (long)n * d; i++)
        s->a[i] += x[i];

    xt_rmsnorm_forward(s->h2, s->rstd2, s->a, b->norm2, n, d, c->eps);
    xt_linear_forward(s->g, s->h2, b->wg, NULL, n, d, m->ff_local);
    xt_linear_forward(s->u, s->h2, b->wu, NULL, n, d, m->ff_local);
    xt_silu_forward(s->hh, s->g, (long)n * m->ff_local);
    for (long i = 0; i < (long)n * m->ff_local; i++)
        s->hh[i] *= s->u[i];
    xt_linear_forward(y, s->hh, b->wd, NULL, n, m->ff_local, d);
    sum_over(m->comm, y, (long)n * d); /* g: the hidden units' partial outputs */
    for (long i = 0; i < (long)n * d; i++)
        y[i] += s->a[i];
}

/* Block l backward: dy (n x d) in, dx out (dx may be dy); frees s. */
static void tp_block_backward(tp_model *m, int l, const float *dy, float *dx, tp_saved *s,
                              int batch, int T)
{
    const tp_config *c = &m->cfg;
    const tp_block *b = &m->blk[l];
    tp_block *db = &m->dblk[l];
    int n = batch * T, d = c->d, ff = m->ff_local;
    int qw = m->hq_local * c->hd, kvw = m->hkv_local * c->hd;
    long nd = (long)n * d;
    float *da = act_alloc(nd), *dh = act_alloc(nd), *tmp = act_alloc(nd);
    float *dhh = act_alloc((long)n * ff), *du = act_alloc((long)n * ff);

    /* MLP: dh2 = dg Wg^T + du Wu^T, summed over the ranks' hidden units (f). */
    xt_linear_backward(dhh, db->wd, NULL, dy, s->hh, b->wd, n, ff, d);
    xt_silu_forward(du, s->g, (long)n * ff);
    for (long i = 0; i < (long)n * ff; i++) {
        float dsilu = dhh[i] * s->u[i];
        du[i] *= dhh[i];
        dhh[i] = dsilu;
    }
    xt_silu_backward(dhh, dhh, s->g, (long)n * ff);
    xt_linear_backward(dh, db->wg, NULL, dhh, s->h2, b->wg, n, d, ff);
    xt_linear_backward(tmp, db->wu, NULL, du, s->h2, b->wu, n, d, ff);
    for (long i = 0; i < nd; i++)
        dh[i] += tmp[i];
    sum_over(m->comm, dh, nd);
    xt_rmsnorm_backward(da, db->norm2, dh, s->a, b->norm2, s->rstd2, n, d);
    for (long i = 0; i < nd; i++)
        da[i] += dy[i];

    /* Attention: dh1 = dq Wq^T + dk Wk^T + dv Wv^T, summed over the heads (f). */
    float *dout = act_alloc((long)n * qw), *dq = act_alloc((long)n * qw);
    float *dk = act_alloc((long)n * kvw), *dv = act_alloc((long)n * kvw);
    xt_linear_backward(dout, db->wo, NULL, da, s->o, b->wo, n, qw, d);
    xt_attention_backward(dq, dk, dv, dout, s->q, s->k, s->v, s->o, s->lse, batch, T, m->hq_local,
                          m->hkv_local, c->hd);
    xt_linear_backward(dh, db->wq, NULL, dq, s->h1, b->wq, n, d, qw);
    float *dwk = act_alloc((long)d * kvw), *dwv = act_alloc((long)d * kvw);
    memset(dwk, 0, sizeof(float) * (size_t)d * kvw);
    memset(dwv, 0, sizeof(float) * (size_t)d * kvw);
    xt_linear_backward(tmp, dwk, NULL, dk, s->h1, b->wk, n, d, kvw);
    for (long i = 0; i < nd; i++)
        dh[i] += tmp[i];
    xt_linear_backward(tmp, dwv, NULL, dv, s->h1, b->wv, n, d, kvw);
    for (long i = 0; i < nd; i++)
        dh[i] += tmp[i];
    if (m->replicas > 1) { /* each replica saw only its own query heads */
        sum_over(m->kv_comm, dwk, (long)d * kvw);
        sum_over(m->kv_comm, dwv, (long)d * kvw);
    }
    for (long i = 0; i < (long)d * kvw; i++) {
        db->wk[i] += dwk[i];
        db->wv[i] += dwv[i];
    }
    sum_over(m->comm, dh, nd);
    xt_rmsnorm_backward(dx, db->norm1, dh, s->x, b->norm1, s->rstd1, n, d);
    for (long i = 0; i < nd; i++)
        dx[i] += da[i];

    float **saved = (float **)s;
    for (size_t i = 0; i < sizeof *s / sizeof(float *); i++)
        xt_free(saved[i]);
    float *scratch[] = {da, dh, tmp, dhh, du, dout, dq, dk, dv, dwk, dwv};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
        xt_free(scratch[i]);
}

/*
 * The head's backward: dlogits (n x v_count) to dx (n x d, may be hf), from the final norm's
 * input x, its output hf and rstd. The head is column-parallel over the vocabulary: its input
 * gradient is summed (f).
 */
static void tp_head_backward(tp_model *m, const float *dlogits, const float *x, const float *hf,
                             const float *rstd, int n, float *dx)
{
    int d = m->cfg.d;
    float *dh = act_alloc((long)n * d);
    xt_linear_backward(dh, m->dhead, NULL, dlogits, hf, m->head, n, d, m->v_count);
    sum_over(m->comm, dh, (long)n * d);
    xt_rmsnorm_backward(dx, m->dfinal_norm, dh, x, m->final_norm, rstd, n, d);
    xt_free(dh);
}

/*
 * The fused cross-entropy over the vocabulary blocks: the mean over n tokens,
 * and dlogits (n x v_count) = its gradient for the own block.
 */
static float tp_cross_entropy(const tp_model *m, const float *logits, const int *targets, int n,
                              float *dlogits)
{
    int vc = m->v_count;
    float *max = act_alloc(n), *sums = act_alloc(2L * n); /* sum of exps, target logit */
    for (int i = 0; i < n; i++) {
        max[i] = -INFINITY;
        for (int j = 0; j < vc; j++)
            max[i] = fmaxf(max[i], logits[(size_t)i * vc + j]);
    }
    MPI_Allreduce(MPI_IN_PLACE, max, n, MPI_FLOAT, MPI_MAX, m->comm);
    for (int i = 0; i < n; i++) {
        float s = 0;
        for (int j = 0; j < vc; j++)
            s += dlogits[(size_t)i * vc + j] = expf(logits[(size_t)i * vc + j] - max[i]);
        int t = targets[i] - m->v_lo;
        sums[i] = s;
        sums[n + i] = t >= 0 && t < vc ? logits[(size_t)i * vc + t] : 0.0f;
    }
    sum_over(m->comm, sums, 2L * n);
    double loss = 0;
    for (int i = 0; i < n; i++) {
        loss += log(sums[i]) + max[i] - sums[n + i];
        int t = targets[i] - m->v_lo;
        for (int j = 0; j < vc; j++)
            dlogits[(size_t)i * vc + j] /= sums[i] * (float)n;
        if (t >= 0 && t < vc) /* only the rank whose block holds the target */
            dlogits[(size_t)i * vc + t] -= 1.0f / (float)n;
    }
    xt_free(max);
    xt_free(sums);
    return (float)(loss / n);
}
// END SOLUTION

/*
 * One training step on batch x T tokens: forward, the mean cross-entropy
 * against targets, backward, and an AdamW step (xt_adam_update, step counting
 * from 1) on every tensor this rank holds. Returns the loss.
 */
float model_tp_step(tp_model *m, const int *tokens, const int *targets, int batch, int T,
                    const xt_adam *h)
{
    /*
     * TODO: one training step; return the loss.
     *   Loss (the same on every rank) and every tensor after each step against one-process
     *   training. Per step: 2 + 4L all-reduces of batch*T*d floats on m->comm, the
     *   cross-entropy's (at most 3, of at most 2 batch*T floats each), 2L on m->kv_comm
     *   where KV heads are replicated, nothing else. Replicated tensors stay bit-identical.
     */
    // BEGIN SOLUTION
    const tp_config *c = &m->cfg;
    int n = batch * T, d = c->d, L = c->layers;
    long nd = (long)n * d;
    memset(m->grads, 0, sizeof(float) * (size_t)m->nparams);

    tp_saved saved[TP_MAX_LAYERS];
    float *x = act_alloc(nd), *y = act_alloc(nd), *hf = act_alloc(nd), *rstd = act_alloc(n);
    float *logits = act_alloc((long)n * m->v_count), *dlogits = act_alloc((long)n * m->v_count);
    tp_embed(m, tokens, n, x);
    for (int l = 0; l < L; l++) {
        tp_block_forward(m, l, x, y, &saved[l], batch, T);
        float *t = x;
        x = y, y = t;
    }
    xt_rmsnorm_forward(hf, rstd, x, m->final_norm, n, d, c->eps);
    xt_linear_forward(logits, hf, m->head, NULL, n, d, m->v_count);
    float loss = tp_cross_entropy(m, logits, targets, n, dlogits);

    tp_head_backward(m, dlogits, x, hf, rstd, n, hf);
    for (int l = L - 1; l >= 0; l--)
        tp_block_backward(m, l, hf, hf, &saved[l], batch, T);
    tp_embed_backward(m, tokens, n, hf);
    xt_free(x), xt_free(y), xt_free(hf), xt_free(rstd), xt_free(logits), xt_free(dlogits);
    xt_adam_update(m->params, m->grads, m->adam_m, m->adam_v, m->nparams, ++m->step, h);
    return loss;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/model_tp.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
