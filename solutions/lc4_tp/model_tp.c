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
#include "xt_nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TP_MAX_LAYERS 4

typedef struct {
    int vocab, d, layers, hq, hkv, hd, ff;
    float eps;
} tp_config;

/* One decoder block's tensors, as xt_decoder_layout orders them: this rank's part. */
typedef struct {
    float *norm1, *wq, *wk, *wv, *wo, *norm2, *wg, *wu, *wd;
} tp_block;

typedef struct {
    tp_config cfg;
    MPI_Comm comm, kv_comm; /* kv_comm: the ranks sharing this rank's KV heads, or NULL */
    int np, rank;
    int v_lo, v_count;              /* vocabulary block: embedding rows, head columns */
    int q_lo, hq_local;             /* query heads */
    int kv_lo, hkv_local, replicas; /* KV heads, and how many ranks hold each */
    int ff_lo, ff_local;            /* hidden units of the MLPs */
    long nparams;                   /* this rank's floats, every tensor */
    float *params, *grads, *adam_m, *adam_v;
    long step;
    /* Views into params and grads: embedding (v_count x d), blocks, final norm, head. */
    float *embed, *final_norm, *head, *dembed, *dfinal_norm, *dhead;
    tp_block blk[TP_MAX_LAYERS], dblk[TP_MAX_LAYERS];
} tp_model;

/* ------------------------------------------------------------ the model */

static void tp_views(tp_model *m, float *base, float **embed, tp_block *blk, float **norm,
                     float **head)
{
    const tp_config *c = &m->cfg;
    long qw = (long)m->hq_local * c->hd, kvw = (long)m->hkv_local * c->hd;
    float *p = base;
    *embed = p;
    p += (long)m->v_count * c->d;
    for (int l = 0; l < c->layers; l++) {
        tp_block *b = &blk[l];
        b->norm1 = p, p += c->d;
        b->wq = p, p += c->d * qw;
        b->wk = p, p += c->d * kvw;
        b->wv = p, p += c->d * kvw;
        b->wo = p, p += qw * c->d;
        b->norm2 = p, p += c->d;
        b->wg = p, p += (long)c->d * m->ff_local;
        b->wu = p, p += (long)c->d * m->ff_local;
        b->wd = p, p += (long)m->ff_local * c->d;
    }
    *norm = p, p += c->d;
    *head = p, p += (long)c->d * m->v_count;
    m->nparams = p - base;
}

/* Columns [lo, lo + count) of a rows x cols matrix into dst (rows x count). */
static void copy_columns(float *dst, const float *src, int rows, int cols, int lo, int count)
{
    for (int i = 0; i < rows; i++)
        memcpy(dst + (size_t)i * count, src + (size_t)i * cols + lo, sizeof(float) * count);
}

/*
 * This rank's shard of the whole parameters `full` (the same on every rank):
 * the embedding E (V x d), each block in xt_decoder_layout's order, the final
 * norm (d), the head (d x V). Collective over comm (kv_comm is split here).
 */
static void tp_model_init(tp_model *m, const tp_config *c, const float *full, MPI_Comm comm)
{
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    m->comm = comm;
    MPI_Comm_size(comm, &m->np);
    MPI_Comm_rank(comm, &m->rank);
    int np = m->np, r = m->rank;
    if (c->layers > TP_MAX_LAYERS || c->hq % np || c->hq % c->hkv || (c->hkv % np && np % c->hkv))
        xt_die("model_tp: %d layers (at most %d), hq %d, hkv %d at np %d: hq must be a "
               "multiple of np and of hkv, and hkv a multiple or a divisor of np",
               c->layers, TP_MAX_LAYERS, c->hq, c->hkv, np);
    xt_block(c->vocab, np, r, &m->v_lo, &m->v_count);
    xt_block(c->ff, np, r, &m->ff_lo, &m->ff_local);
    m->hq_local = c->hq / np;
    m->q_lo = r * m->hq_local;
    m->replicas = c->hkv >= np ? 1 : np / c->hkv;
    m->hkv_local = c->hkv >= np ? c->hkv / np : 1;
    m->kv_lo = c->hkv >= np ? r * m->hkv_local : r / m->replicas;
    m->kv_comm = MPI_COMM_NULL;
    if (m->replicas > 1)
        MPI_Comm_split(comm, m->kv_lo, r, &m->kv_comm);

    tp_block scratch[TP_MAX_LAYERS];
    float *e, *n, *h;
    tp_views(m, NULL, &e, scratch, &n, &h); /* sizes only */
    size_t bytes = sizeof(float) * (size_t)m->nparams;
    m->params = xt_alloc(XT_MEM_PARAMS, bytes);
    m->grads = xt_alloc(XT_MEM_GRADS, bytes);
    m->adam_m = xt_alloc(XT_MEM_OPTIMIZER, bytes);
    m->adam_v = xt_alloc(XT_MEM_OPTIMIZER, bytes);
    memset(m->adam_m, 0, bytes);
    memset(m->adam_v, 0, bytes);
    memset(m->grads, 0, bytes);
    tp_views(m, m->params, &m->embed, m->blk, &m->final_norm, &m->head);
    tp_views(m, m->grads, &m->dembed, m->dblk, &m->dfinal_norm, &m->dhead);

    int d = c->d, hd = c->hd;
    xt_decoder_shape shape = {d, c->hq, c->hkv, hd, c->ff, c->eps};
    xt_decoder_layout lay = xt_decoder_layout_of(&shape);
    const float *p = full;
    memcpy(m->embed, p + (long)m->v_lo * d, sizeof(float) * (size_t)m->v_count * d);
    p += (long)c->vocab * d;
    for (int l = 0; l < c->layers; l++, p += lay.total) {
        tp_block *b = &m->blk[l];
        int qw = c->hq * hd, kvw = c->hkv * hd;
        memcpy(b->norm1, p + lay.norm1, sizeof(float) * d);
        copy_columns(b->wq, p + lay.wq, d, qw, m->q_lo * hd, m->hq_local * hd);
        copy_columns(b->wk, p + lay.wk, d, kvw, m->kv_lo * hd, m->hkv_local * hd);
        copy_columns(b->wv, p + lay.wv, d, kvw, m->kv_lo * hd, m->hkv_local * hd);
        memcpy(b->wo, p + lay.wo + (long)m->q_lo * hd * d,
               sizeof(float) * (size_t)m->hq_local * hd * d);
        memcpy(b->norm2, p + lay.norm2, sizeof(float) * d);
        copy_columns(b->wg, p + lay.wg, d, c->ff, m->ff_lo, m->ff_local);
        copy_columns(b->wu, p + lay.wu, d, c->ff, m->ff_lo, m->ff_local);
        memcpy(b->wd, p + lay.wd + (long)m->ff_lo * d, sizeof(float) * (size_t)m->ff_local * d);
    }
    memcpy(m->final_norm, p, sizeof(float) * d);
    p += d;
    copy_columns(m->head, p, d, c->vocab, m->v_lo, m->v_count);
}

static void tp_model_free(tp_model *m)
{
    xt_free(m->params);
    xt_free(m->grads);
    xt_free(m->adam_m);
    xt_free(m->adam_v);
    if (m->kv_comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->kv_comm);
}

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

    /* The head is column-parallel over the vocabulary: its input gradient is summed (f). */
    xt_linear_backward(y, m->dhead, NULL, dlogits, hf, m->head, n, d, m->v_count);
    sum_over(m->comm, y, nd);
    xt_rmsnorm_backward(hf, m->dfinal_norm, y, x, m->final_norm, rstd, n, d);
    for (int l = L - 1; l >= 0; l--)
        tp_block_backward(m, l, hf, hf, &saved[l], batch, T);
    for (int i = 0; i < n; i++) { /* the embedding's rows that this rank holds */
        int t = tokens[i] - m->v_lo;
        if (t >= 0 && t < m->v_count)
            for (int j = 0; j < d; j++)
                m->dembed[(size_t)t * d + j] += hf[(size_t)i * d + j];
    }
    xt_free(x), xt_free(y), xt_free(hf), xt_free(rstd), xt_free(logits), xt_free(dlogits);
    xt_adam_update(m->params, m->grads, m->adam_m, m->adam_v, m->nparams, ++m->step, h);
    return loss;
    // END SOLUTION
}

/* ------------------------------------------------------------------------ */

static tp_config case_config(xt_case *c)
{
    tp_config cfg = {(int)xt_case_int(c, "vocab"),  (int)xt_case_int(c, "d"),
                     (int)xt_case_int(c, "layers"), (int)xt_case_int(c, "hq"),
                     (int)xt_case_int(c, "hkv"),    (int)xt_case_int(c, "hd"),
                     (int)xt_case_int(c, "ff"),     1e-5f};
    return cfg;
}

/*
 * Every tensor this rank holds, as "step<s>_<name>", and its gradient of the step, as
 * "step<s>_grad_<name>": the grader knows the blocks.
 */
static void output_tensors(xt_case *c, const tp_model *m, float *base, int step, const char *prefix)
{
    float *embed, *final_norm, *head;
    tp_block blk[TP_MAX_LAYERS];
    tp_model sizes = *m;
    tp_views(&sizes, base, &embed, blk, &final_norm, &head);
    char name[64];
    const tp_config *g = &m->cfg;
    long qw = (long)m->hq_local * g->hd, kvw = (long)m->hkv_local * g->hd;
#define OUT(tensor, ptr, count)                                                                    \
    do {                                                                                           \
        snprintf(name, sizeof name, "step%d_%s%s", step, prefix, tensor);                          \
        xt_case_output(c, name, ptr, XT_F32, count);                                               \
    } while (0)
    OUT("embed", embed, (long)m->v_count * g->d);
    for (int l = 0; l < g->layers; l++) {
        const tp_block *b = &blk[l];
        const char *names[] = {"norm1", "wq", "wk", "wv", "wo", "norm2", "wg", "wu", "wd"};
        const float *ptrs[] = {b->norm1, b->wq, b->wk, b->wv, b->wo, b->norm2, b->wg, b->wu, b->wd};
        long counts[] = {g->d,
                         g->d * qw,
                         g->d * kvw,
                         g->d * kvw,
                         qw * g->d,
                         g->d,
                         (long)g->d * m->ff_local,
                         (long)g->d * m->ff_local,
                         (long)m->ff_local * g->d};
        for (int k = 0; k < 9; k++) {
            char tensor[24];
            snprintf(tensor, sizeof tensor, "L%d_%s", l, names[k]);
            OUT(tensor, ptrs[k], counts[k]);
        }
    }
    OUT("final_norm", final_norm, g->d);
    OUT("head", head, (long)g->d * m->v_count);
#undef OUT
}

/*
 * Every tensor this rank holds, as "step<s>_<name>", and its gradient of the step, as
 * "step<s>_grad_<name>": the grader knows the blocks.
 */
static void output_shards(xt_case *c, const tp_model *m, int step)
{
    output_tensors(c, m, m->params, step, "");
    output_tensors(c, m, m->grads, step, "grad_");
}

static void run_case(xt_case *c)
{
    tp_config cfg = case_config(c);
    int steps = (int)xt_case_int(c, "steps"), batch = (int)xt_case_int(c, "batch");
    int T = (int)xt_case_int(c, "T");
    xt_adam h = {(float)atof(xt_case_str(c, "lr")), 0.9f, 0.95f, 1e-3f,
                 (float)atof(xt_case_str(c, "wd"))};
    xt_array w0 = xt_case_input_const(c, "w0");
    xt_array tokens = xt_case_input_const(c, "tokens"), targets = xt_case_input_const(c, "targets");
    tp_model m;
    tp_model_init(&m, &cfg, w0.data, xt_case_comm(c));
    for (int s = 0; s < steps; s++) {
        long at = (long)s * batch * T;
        float loss = model_tp_step(&m, (const int *)tokens.data + at,
                                   (const int *)targets.data + at, batch, T, &h);
        char name[24];
        snprintf(name, sizeof name, "step%d_loss", s + 1);
        xt_case_output(c, name, &loss, XT_F32, 1);
        output_shards(c, &m, s + 1);
    }
    tp_model_free(&m);
}

/*
 * A two-block model (vocab 37, d 16, 4 query heads on 2 KV heads, ff 24)
 * trained for 5 steps on a fixed token stream, each step's loss beside the
 * same program on one process (rank 0, MPI_COMM_SELF): what a tensor-parallel
 * run must reproduce.
 */
static void demo(MPI_Comm comm)
{
    enum { STEPS = 5, BATCH = 2, T = 6 };
    tp_config cfg = {37, 16, 2, 4, 2, 4, 24, 1e-5f};
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_decoder_shape shape = {cfg.d, cfg.hq, cfg.hkv, cfg.hd, cfg.ff, cfg.eps};
    long total = 2L * cfg.vocab * cfg.d + cfg.layers * xt_decoder_layout_of(&shape).total + cfg.d;
    float *w0 = malloc(sizeof(float) * (size_t)total);
    xt_rng g = xt_rng_seed(7);
    xt_rng_fill_uniform(&g, w0, total, -0.3f, 0.3f);
    int tokens[STEPS * BATCH * T], targets[STEPS * BATCH * T];
    for (int i = 0; i < STEPS * BATCH * T; i++) {
        tokens[i] = (int)xt_rng_below(&g, (uint64_t)cfg.vocab);
        targets[i] = (tokens[i] * 5 + 3) % cfg.vocab; /* a rule worth learning */
    }
    xt_adam h = {0.05f, 0.9f, 0.95f, 1e-3f, 0.01f};
    tp_model m, single;
    tp_model_init(&m, &cfg, w0, comm);
    xt_printf_root(comm, "decoder: vocab %d, d %d, %d blocks, %d query / %d KV heads, ff %d\n",
                   cfg.vocab, cfg.d, cfg.layers, cfg.hq, cfg.hkv, cfg.ff);
    xt_printf_ordered(comm, "vocab %d..%d, q heads %d..%d, kv head%s %d%s, ff %d..%d\n", m.v_lo,
                      m.v_lo + m.v_count - 1, m.q_lo, m.q_lo + m.hq_local - 1,
                      m.hkv_local > 1 ? "s" : "", m.kv_lo, m.replicas > 1 ? " (shared)" : "",
                      m.ff_lo, m.ff_lo + m.ff_local - 1);
    if (rank == 0)
        tp_model_init(&single, &cfg, w0, MPI_COMM_SELF);
    long before = xt_mpi_calls("MPI_Allreduce");
    for (int s = 0; s < STEPS; s++) {
        int at = s * BATCH * T;
        float loss = model_tp_step(&m, tokens + at, targets + at, BATCH, T, &h), one = 0;
        if (s == 0)
            xt_printf_root(comm, "all-reduces in step 1 on rank 0: %ld = 2 + 4L + 2 (loss)%s\n",
                           xt_mpi_calls("MPI_Allreduce") - before,
                           m.replicas > 1 ? " + 2L (KV replicas)" : "");
        if (rank == 0)
            one = model_tp_step(&single, tokens + at, targets + at, BATCH, T, &h);
        xt_printf_root(comm, "step %d: loss %.6f   single process %.6f   |diff| %.1e\n", s + 1,
                       loss, one, fabsf(loss - one));
    }
    if (rank == 0)
        tp_model_free(&single);
    tp_model_free(&m);
    free(w0);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
