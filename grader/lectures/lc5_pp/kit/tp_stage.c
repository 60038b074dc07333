/*
 * tp_stage.c: a tensor-parallel pipeline stage of a decoder language model
 * (kit.h): decoder blocks first .. first+count-1 of `layers`, with the
 * embedding on the first stage and the final RMSNorm, the head and the
 * cross-entropy on the last, each tensor split over a tensor-parallel
 * communicator in the Megatron way:
 *
 *   embedding   rows of E by vocabulary block; partial rows all-reduced   (g)
 *   attention   query and KV heads in blocks (Wq, Wk, Wv columns, Wo rows);
 *               the input gradient all-reduced (f), the output too (g)
 *   SwiGLU      hidden units in blocks (Wg, Wu columns, Wd rows); f and g
 *   norms       whole on every rank (every rank normalizes the same rows)
 *   head        columns of W by vocabulary block; the fused cross-entropy
 *               (a MAX of n, then a SUM of 2n), the input gradient
 *               all-reduced (f)
 *
 * Every all-reduce is MPI_Allreduce on the stage's communicator, so that a
 * case record shows them there. Several micro-batches may be in flight, in
 * any order, each keeping its activations (XT_MEM_ACTIVATIONS) from its
 * forward to its backward; each forward and backward is logged as stage.c's
 * are (S events, stage_log.c), the stage's first block and block count standing
 * for its layers.
 */
#include "kit.h"
#include "stage_log.h"
#include "xt_harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One decoder block's tensors, as xt_decoder_layout orders them: this rank's part. */
typedef struct {
    float *norm1, *wq, *wk, *wv, *wo, *norm2, *wg, *wu, *wd;
} tp_block;

/* What one block's forward keeps for its backward. */
typedef struct {
    float *x, *h1, *rstd1, *q, *k, *v, *o, *lse, *a, *h2, *rstd2, *g, *u, *hh;
} tp_saved;

enum { FORWARDED = 1, LOSS_DONE };

/* One micro-batch in flight. */
typedef struct {
    int mb, batch, T, state;                 /* state 0: the slot is free */
    int *tokens;                             /* the first stage's, for the embedding's gradient */
    tp_saved *saved;                         /* one per block */
    float *x, *hf, *rstd, *logits, *dlogits; /* the last stage's head */
} slot;

struct xt_tp_stage {
    int vocab, d, layers, hq, hkv, hd, ff;
    float eps;
    int first, count, chunk, is_first, is_last;
    MPI_Comm comm;
    int np, rank;
    int v_lo, v_count;  /* vocabulary block: embedding rows, head columns */
    int q_lo, hq_local; /* query heads */
    int kv_lo, hkv_local;
    int ff_lo, ff_local; /* hidden units of the MLPs */
    long nparams;
    float *params, *grads, *adam_m, *adam_v;
    long step;
    float *embed, *final_norm, *head, *dembed, *dfinal_norm, *dhead;
    tp_block *blk, *dblk; /* count each */
    slot *slots;
    int nslots;
};

/* ------------------------------------------------------------ the shard */

/* Views of this rank's tensors in base (NULL: sizes only); returns how many floats. */
static long views(const xt_tp_stage *s, float *base, float **embed, tp_block *blk, float **norm,
                  float **head)
{
    long qw = (long)s->hq_local * s->hd, kvw = (long)s->hkv_local * s->hd, d = s->d;
    long at = 0;
#define TAKE(ptr, n) ((ptr) = base ? base + at : NULL, at += (n))
    if (s->is_first)
        TAKE(*embed, (long)s->v_count * d);
    for (int l = 0; l < s->count; l++) {
        tp_block *b = &blk[l];
        TAKE(b->norm1, d);
        TAKE(b->wq, d * qw);
        TAKE(b->wk, d * kvw);
        TAKE(b->wv, d * kvw);
        TAKE(b->wo, qw * d);
        TAKE(b->norm2, d);
        TAKE(b->wg, d * s->ff_local);
        TAKE(b->wu, d * s->ff_local);
        TAKE(b->wd, (long)s->ff_local * d);
    }
    if (s->is_last) {
        TAKE(*norm, d);
        TAKE(*head, d * s->v_count);
    }
#undef TAKE
    return at;
}

/* Columns [lo, lo + count) of a rows x cols matrix into dst (rows x count). */
static void copy_columns(float *dst, const float *src, int rows, int cols, int lo, int count)
{
    for (int i = 0; i < rows; i++)
        memcpy(dst + (size_t)i * count, src + (size_t)i * cols + lo, sizeof(float) * count);
}

xt_tp_stage *xt_tp_stage_new(const xt_decoder_shape *shape, int vocab, int layers,
                             const float *full, int first, int count, MPI_Comm tp, int chunk)
{
    XT_CHECK(shape && full, "xt_tp_stage_new: no shape or no parameters");
    XT_CHECK(layers >= 1 && first >= 0 && count >= 1 && first + count <= layers,
             "xt_tp_stage_new: blocks %d .. %d are not within the model's 0 .. %d", first,
             first + count - 1, layers - 1);
    XT_CHECK(vocab >= 1 && chunk >= 0, "xt_tp_stage_new: vocabulary %d, chunk %d", vocab, chunk);
    XT_CHECK(tp != MPI_COMM_NULL, "xt_tp_stage_new: the tensor-parallel communicator is null");
    xt_tp_stage *s = calloc(1, sizeof *s);
    XT_CHECK(s, "out of memory for a tensor-parallel stage");
    s->vocab = vocab, s->d = shape->d, s->layers = layers, s->hq = shape->hq;
    s->hkv = shape->hkv, s->hd = shape->hd, s->ff = shape->ff, s->eps = shape->eps;
    s->first = first, s->count = count, s->chunk = chunk;
    s->is_first = first == 0, s->is_last = first + count == layers;
    s->comm = tp;
    PMPI_Comm_size(tp, &s->np);
    PMPI_Comm_rank(tp, &s->rank);
    int np = s->np, r = s->rank;
    XT_CHECK(s->hkv >= 1 && s->hq % s->hkv == 0 && s->hq % np == 0 && s->hkv % np == 0,
             "xt_tp_stage_new: %d query heads on %d KV heads over %d ranks: both must be "
             "multiples of the ranks (no KV head is shared), and hkv must divide hq",
             s->hq, s->hkv, np);
    XT_CHECK(s->ff >= np && vocab >= np,
             "xt_tp_stage_new: %d hidden units and a vocabulary of %d over %d ranks", s->ff, vocab,
             np);
    xt_block(vocab, np, r, &s->v_lo, &s->v_count);
    xt_block(s->ff, np, r, &s->ff_lo, &s->ff_local);
    s->hq_local = s->hq / np, s->q_lo = r * s->hq_local;
    s->hkv_local = s->hkv / np, s->kv_lo = r * s->hkv_local;

    s->blk = calloc((size_t)count, sizeof *s->blk);
    s->dblk = calloc((size_t)count, sizeof *s->dblk);
    XT_CHECK(s->blk && s->dblk, "out of memory for a tensor-parallel stage");
    s->nparams = views(s, NULL, &s->embed, s->blk, &s->final_norm, &s->head);
    size_t bytes = sizeof(float) * (size_t)s->nparams;
    s->params = xt_alloc(XT_MEM_PARAMS, bytes);
    s->grads = xt_alloc(XT_MEM_GRADS, bytes);
    s->adam_m = xt_alloc(XT_MEM_OPTIMIZER, bytes);
    s->adam_v = xt_alloc(XT_MEM_OPTIMIZER, bytes);
    memset(s->grads, 0, bytes);
    memset(s->adam_m, 0, bytes);
    memset(s->adam_v, 0, bytes);
    views(s, s->params, &s->embed, s->blk, &s->final_norm, &s->head);
    views(s, s->grads, &s->dembed, s->dblk, &s->dfinal_norm, &s->dhead);

    /* The whole model: E (V x d), the blocks in xt_decoder_layout's order, the final norm
     * (d), the head (d x V). */
    int d = s->d, hd = s->hd;
    xt_decoder_layout lay = xt_decoder_layout_of(shape);
    if (s->is_first)
        memcpy(s->embed, full + (long)s->v_lo * d, sizeof(float) * (size_t)s->v_count * d);
    const float *p = full + (long)vocab * d + (long)first * lay.total;
    for (int l = 0; l < count; l++, p += lay.total) {
        tp_block *b = &s->blk[l];
        int qw = s->hq * hd, kvw = s->hkv * hd;
        memcpy(b->norm1, p + lay.norm1, sizeof(float) * d);
        copy_columns(b->wq, p + lay.wq, d, qw, s->q_lo * hd, s->hq_local * hd);
        copy_columns(b->wk, p + lay.wk, d, kvw, s->kv_lo * hd, s->hkv_local * hd);
        copy_columns(b->wv, p + lay.wv, d, kvw, s->kv_lo * hd, s->hkv_local * hd);
        memcpy(b->wo, p + lay.wo + (long)s->q_lo * hd * d,
               sizeof(float) * (size_t)s->hq_local * hd * d);
        memcpy(b->norm2, p + lay.norm2, sizeof(float) * d);
        copy_columns(b->wg, p + lay.wg, d, s->ff, s->ff_lo, s->ff_local);
        copy_columns(b->wu, p + lay.wu, d, s->ff, s->ff_lo, s->ff_local);
        memcpy(b->wd, p + lay.wd + (long)s->ff_lo * d, sizeof(float) * (size_t)s->ff_local * d);
    }
    if (s->is_last) {
        p = full + (long)vocab * d + (long)layers * lay.total;
        memcpy(s->final_norm, p, sizeof(float) * d);
        copy_columns(s->head, p + d, d, vocab, s->v_lo, s->v_count);
    }
    return s;
}

static void release(slot *t, int count)
{
    if (t->saved) {
        for (int l = 0; l < count; l++) {
            float **saved = (float **)&t->saved[l];
            for (size_t i = 0; i < sizeof(tp_saved) / sizeof(float *); i++)
                xt_free(saved[i]);
        }
        free(t->saved);
    }
    xt_free(t->tokens);
    xt_free(t->x), xt_free(t->hf), xt_free(t->rstd), xt_free(t->logits), xt_free(t->dlogits);
    memset(t, 0, sizeof *t);
}

void xt_tp_stage_free(xt_tp_stage *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nslots; i++)
        if (s->slots[i].state)
            release(&s->slots[i], s->count);
    free(s->slots);
    xt_free(s->params);
    xt_free(s->grads);
    xt_free(s->adam_m);
    xt_free(s->adam_v);
    free(s->blk);
    free(s->dblk);
    free(s);
}

long xt_tp_stage_nparams(const xt_tp_stage *s)
{
    return s->nparams;
}

float *xt_tp_stage_params(xt_tp_stage *s)
{
    return s->params;
}

float *xt_tp_stage_grads(xt_tp_stage *s)
{
    return s->grads;
}

int xt_tp_stage_d(const xt_tp_stage *s)
{
    return s->d;
}

int xt_tp_stage_first(const xt_tp_stage *s)
{
    return s->first;
}

int xt_tp_stage_count(const xt_tp_stage *s)
{
    return s->count;
}

int xt_tp_stage_is_first(const xt_tp_stage *s)
{
    return s->is_first;
}

int xt_tp_stage_is_last(const xt_tp_stage *s)
{
    return s->is_last;
}

void xt_tp_stage_adam(xt_tp_stage *s, const xt_adam *h)
{
    xt_adam_update(s->params, s->grads, s->adam_m, s->adam_v, s->nparams, ++s->step, h);
}

/* ------------------------------------------------------------ the model */

static float *act_alloc(long n)
{
    return xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)(n > 0 ? n : 1));
}

static void sum_over(MPI_Comm comm, float *buf, long n)
{
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, comm);
}

/* y (n x d) = the embedding rows of tokens, from the rows this rank holds. */
static void embed(const xt_tp_stage *s, const int *tokens, int n, float *y)
{
    int d = s->d;
    for (int i = 0; i < n; i++) {
        XT_CHECK(tokens[i] >= 0 && tokens[i] < s->vocab,
                 "xt_tp_stage_forward: token %d at %d is outside the vocabulary 0 .. %d", tokens[i],
                 i, s->vocab - 1);
        int t = tokens[i] - s->v_lo;
        if (t >= 0 && t < s->v_count)
            memcpy(y + (size_t)i * d, s->embed + (size_t)t * d, sizeof(float) * d);
        else
            memset(y + (size_t)i * d, 0, sizeof(float) * d);
    }
    sum_over(s->comm, y, (long)n * d);
}

/* Block l of the stage forward: x (n x d) in, y out; keeps what backward needs in sv. */
static void block_forward(const xt_tp_stage *s, int l, const float *x, float *y, tp_saved *sv,
                          int batch, int T)
{
    const tp_block *b = &s->blk[l];
    int n = batch * T, d = s->d, qw = s->hq_local * s->hd, kvw = s->hkv_local * s->hd;
    sv->x = act_alloc((long)n * d), sv->h1 = act_alloc((long)n * d), sv->rstd1 = act_alloc(n);
    sv->q = act_alloc((long)n * qw), sv->k = act_alloc((long)n * kvw);
    sv->v = act_alloc((long)n * kvw), sv->o = act_alloc((long)n * qw);
    sv->lse = act_alloc((long)n * s->hq_local), sv->a = act_alloc((long)n * d);
    sv->h2 = act_alloc((long)n * d), sv->rstd2 = act_alloc(n);
    sv->g = act_alloc((long)n * s->ff_local), sv->u = act_alloc((long)n * s->ff_local);
    sv->hh = act_alloc((long)n * s->ff_local);
    memcpy(sv->x, x, sizeof(float) * (size_t)n * d);

    xt_rmsnorm_forward(sv->h1, sv->rstd1, x, b->norm1, n, d, s->eps);
    xt_linear_forward(sv->q, sv->h1, b->wq, NULL, n, d, qw);
    xt_linear_forward(sv->k, sv->h1, b->wk, NULL, n, d, kvw);
    xt_linear_forward(sv->v, sv->h1, b->wv, NULL, n, d, kvw);
    xt_attention_forward(sv->o, sv->lse, sv->q, sv->k, sv->v, batch, T, s->hq_local, s->hkv_local,
                         s->hd);
    xt_linear_forward(sv->a, sv->o, b->wo, NULL, n, qw, d);
    sum_over(s->comm, sv->a, (long)n * d); /* g: the heads' partial outputs */
    for (long i = 0; i < (long)n * d; i++)
        sv->a[i] += x[i];

    xt_rmsnorm_forward(sv->h2, sv->rstd2, sv->a, b->norm2, n, d, s->eps);
    xt_linear_forward(sv->g, sv->h2, b->wg, NULL, n, d, s->ff_local);
    xt_linear_forward(sv->u, sv->h2, b->wu, NULL, n, d, s->ff_local);
    xt_silu_forward(sv->hh, sv->g, (long)n * s->ff_local);
    for (long i = 0; i < (long)n * s->ff_local; i++)
        sv->hh[i] *= sv->u[i];
    xt_linear_forward(y, sv->hh, b->wd, NULL, n, s->ff_local, d);
    sum_over(s->comm, y, (long)n * d); /* g: the hidden units' partial outputs */
    for (long i = 0; i < (long)n * d; i++)
        y[i] += sv->a[i];
}

/* Block l backward: dy (n x d) in, dx out (dx may be dy); frees what sv holds. */
static void block_backward(xt_tp_stage *s, int l, const float *dy, float *dx, tp_saved *sv,
                           int batch, int T)
{
    const tp_block *b = &s->blk[l];
    tp_block *db = &s->dblk[l];
    int n = batch * T, d = s->d, ff = s->ff_local;
    int qw = s->hq_local * s->hd, kvw = s->hkv_local * s->hd;
    long nd = (long)n * d;
    float *da = act_alloc(nd), *dh = act_alloc(nd), *tmp = act_alloc(nd);
    float *dhh = act_alloc((long)n * ff), *du = act_alloc((long)n * ff);

    /* MLP: dh2 = dg Wg^T + du Wu^T, summed over the ranks' hidden units (f). */
    xt_linear_backward(dhh, db->wd, NULL, dy, sv->hh, b->wd, n, ff, d);
    xt_silu_forward(du, sv->g, (long)n * ff);
    for (long i = 0; i < (long)n * ff; i++) {
        float dsilu = dhh[i] * sv->u[i];
        du[i] *= dhh[i];
        dhh[i] = dsilu;
    }
    xt_silu_backward(dhh, dhh, sv->g, (long)n * ff);
    xt_linear_backward(dh, db->wg, NULL, dhh, sv->h2, b->wg, n, d, ff);
    xt_linear_backward(tmp, db->wu, NULL, du, sv->h2, b->wu, n, d, ff);
    for (long i = 0; i < nd; i++)
        dh[i] += tmp[i];
    sum_over(s->comm, dh, nd);
    xt_rmsnorm_backward(da, db->norm2, dh, sv->a, b->norm2, sv->rstd2, n, d);
    for (long i = 0; i < nd; i++)
        da[i] += dy[i];

    /* Attention: dh1 = dq Wq^T + dk Wk^T + dv Wv^T, summed over the heads (f). */
    float *dout = act_alloc((long)n * qw), *dq = act_alloc((long)n * qw);
    float *dk = act_alloc((long)n * kvw), *dv = act_alloc((long)n * kvw);
    xt_linear_backward(dout, db->wo, NULL, da, sv->o, b->wo, n, qw, d);
    xt_attention_backward(dq, dk, dv, dout, sv->q, sv->k, sv->v, sv->o, sv->lse, batch, T,
                          s->hq_local, s->hkv_local, s->hd);
    xt_linear_backward(dh, db->wq, NULL, dq, sv->h1, b->wq, n, d, qw);
    float *dwk = act_alloc((long)d * kvw), *dwv = act_alloc((long)d * kvw);
    memset(dwk, 0, sizeof(float) * (size_t)d * kvw);
    memset(dwv, 0, sizeof(float) * (size_t)d * kvw);
    xt_linear_backward(tmp, dwk, NULL, dk, sv->h1, b->wk, n, d, kvw);
    for (long i = 0; i < nd; i++)
        dh[i] += tmp[i];
    xt_linear_backward(tmp, dwv, NULL, dv, sv->h1, b->wv, n, d, kvw);
    for (long i = 0; i < nd; i++)
        dh[i] += tmp[i];
    for (long i = 0; i < (long)d * kvw; i++) {
        db->wk[i] += dwk[i];
        db->wv[i] += dwv[i];
    }
    sum_over(s->comm, dh, nd);
    xt_rmsnorm_backward(dx, db->norm1, dh, sv->x, b->norm1, sv->rstd1, n, d);
    for (long i = 0; i < nd; i++)
        dx[i] += da[i];

    float **saved = (float **)sv;
    for (size_t i = 0; i < sizeof *sv / sizeof(float *); i++) {
        xt_free(saved[i]);
        saved[i] = NULL;
    }
    float *scratch[] = {da, dh, tmp, dhh, du, dout, dq, dk, dv, dwk, dwv};
    for (size_t i = 0; i < sizeof scratch / sizeof scratch[0]; i++)
        xt_free(scratch[i]);
}

/*
 * The fused cross-entropy over the vocabulary blocks: the mean over n tokens, and dlogits
 * (n x v_count) = its gradient for the own block.
 */
static float cross_entropy(const xt_tp_stage *s, const float *logits, const int *targets, int n,
                           float *dlogits)
{
    int vc = s->v_count;
    float *max = act_alloc(n), *sums = act_alloc(2L * n); /* sum of exps, target logit */
    for (int i = 0; i < n; i++) {
        max[i] = -INFINITY;
        for (int j = 0; j < vc; j++)
            max[i] = fmaxf(max[i], logits[(size_t)i * vc + j]);
    }
    MPI_Allreduce(MPI_IN_PLACE, max, n, MPI_FLOAT, MPI_MAX, s->comm);
    for (int i = 0; i < n; i++) {
        XT_CHECK(targets[i] >= 0 && targets[i] < s->vocab,
                 "xt_tp_stage_loss: target %d at %d is outside the vocabulary 0 .. %d", targets[i],
                 i, s->vocab - 1);
        float sum = 0;
        for (int j = 0; j < vc; j++)
            sum += dlogits[(size_t)i * vc + j] = expf(logits[(size_t)i * vc + j] - max[i]);
        int t = targets[i] - s->v_lo;
        sums[i] = sum;
        sums[n + i] = t >= 0 && t < vc ? logits[(size_t)i * vc + t] : 0.0f;
    }
    sum_over(s->comm, sums, 2L * n);
    double loss = 0;
    for (int i = 0; i < n; i++) {
        loss += log(sums[i]) + max[i] - sums[n + i];
        int t = targets[i] - s->v_lo;
        for (int j = 0; j < vc; j++)
            dlogits[(size_t)i * vc + j] /= sums[i] * (float)n;
        if (t >= 0 && t < vc) /* only the rank whose block holds the target */
            dlogits[(size_t)i * vc + t] -= 1.0f / (float)n;
    }
    xt_free(max);
    xt_free(sums);
    return n ? (float)(loss / n) : 0.0f;
}

/* ------------------------------------------------------- micro-batches */

static slot *find(xt_tp_stage *s, int mb)
{
    for (int i = 0; i < s->nslots; i++)
        if (s->slots[i].state && s->slots[i].mb == mb)
            return &s->slots[i];
    return NULL;
}

static slot *in_flight(xt_tp_stage *s, int mb, const char *fn)
{
    slot *t = find(s, mb);
    XT_CHECK(t,
             "%s(micro-batch %d): micro-batch %d has no forward in flight on this stage "
             "(blocks %d..%d)",
             fn, mb, mb, s->first, s->first + s->count - 1);
    return t;
}

void xt_tp_stage_forward(xt_tp_stage *s, int mb, const int *tokens, const float *x, int batch,
                         int T, float *y)
{
    pp_stage_began began = pp_stage_begin();
    XT_CHECK(mb >= 0 && batch >= 1 && T >= 1,
             "xt_tp_stage_forward: micro-batch %d of %d sequences of %d tokens", mb, batch, T);
    XT_CHECK(s->is_first ? tokens != NULL : x != NULL,
             "xt_tp_stage_forward(micro-batch %d): the %s stage reads %s, which is NULL", mb,
             s->is_first ? "first" : "next", s->is_first ? "tokens" : "x");
    XT_CHECK(s->is_last || y, "xt_tp_stage_forward(micro-batch %d): y is NULL", mb);
    XT_CHECK(!find(s, mb),
             "xt_tp_stage_forward(micro-batch %d): micro-batch %d is already in flight on this "
             "stage (forwarded, not yet backward): a micro-batch is forwarded once per backward",
             mb, mb);
    slot *t = NULL;
    for (int i = 0; i < s->nslots && !t; i++)
        if (!s->slots[i].state)
            t = &s->slots[i];
    if (!t) {
        s->slots = realloc(s->slots, sizeof *s->slots * (size_t)(s->nslots + 1));
        XT_CHECK(s->slots, "out of memory for a tensor-parallel stage's micro-batches");
        t = &s->slots[s->nslots++];
    }
    memset(t, 0, sizeof *t);
    t->mb = mb, t->batch = batch, t->T = T, t->state = FORWARDED;
    t->saved = calloc((size_t)s->count, sizeof *t->saved);
    XT_CHECK(t->saved, "out of memory for a tensor-parallel stage's micro-batch");
    int n = batch * T, d = s->d;
    long nd = (long)n * d;
    float *in = act_alloc(nd), *out = act_alloc(nd);
    if (s->is_first) {
        t->tokens = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(int) * (size_t)n);
        memcpy(t->tokens, tokens, sizeof(int) * (size_t)n);
        embed(s, tokens, n, in);
    } else {
        memcpy(in, x, sizeof(float) * (size_t)nd);
    }
    for (int l = 0; l < s->count; l++) {
        block_forward(s, l, in, out, &t->saved[l], batch, T);
        float *swap = in;
        in = out, out = swap;
    }
    if (s->is_last) { /* the final norm and the head: logits kept for the loss */
        t->x = in, t->hf = act_alloc(nd), t->rstd = act_alloc(n);
        t->logits = act_alloc((long)n * s->v_count);
        xt_rmsnorm_forward(t->hf, t->rstd, t->x, s->final_norm, n, d, s->eps);
        xt_linear_forward(t->logits, t->hf, s->head, NULL, n, d, s->v_count);
        if (y)
            memcpy(y, in, sizeof(float) * (size_t)nd);
    } else {
        memcpy(y, in, sizeof(float) * (size_t)nd);
        xt_free(in);
    }
    xt_free(out);
    pp_stage_event('F', mb, s->chunk, s->first, s->count, began);
}

float xt_tp_stage_loss(xt_tp_stage *s, int mb, const int *targets, float scale)
{
    XT_CHECK(s->is_last,
             "xt_tp_stage_loss(micro-batch %d): this stage (blocks %d..%d) is not the last: the "
             "loss belongs to the stage with the model's block %d",
             mb, s->first, s->first + s->count - 1, s->layers - 1);
    slot *t = in_flight(s, mb, "xt_tp_stage_loss");
    XT_CHECK(t->state == FORWARDED,
             "xt_tp_stage_loss(micro-batch %d): its loss was already taken (once per forward)", mb);
    XT_CHECK(targets, "xt_tp_stage_loss(micro-batch %d): targets is NULL", mb);
    int n = t->batch * t->T;
    long nv = (long)n * s->v_count;
    t->dlogits = act_alloc(nv);
    float loss = cross_entropy(s, t->logits, targets, n, t->dlogits);
    if (scale != 1.0f)
        for (long i = 0; i < nv; i++)
            t->dlogits[i] *= scale;
    t->state = LOSS_DONE;
    return loss;
}

void xt_tp_stage_backward(xt_tp_stage *s, int mb, const float *dy, float *dx)
{
    pp_stage_began began = pp_stage_begin();
    slot *t = in_flight(s, mb, "xt_tp_stage_backward");
    int n = t->batch * t->T, d = s->d;
    long nd = (long)n * d;
    float *g = act_alloc(nd);
    if (s->is_last) {
        XT_CHECK(t->state == LOSS_DONE,
                 "xt_tp_stage_backward(micro-batch %d): no loss was taken: on the last stage "
                 "call xt_tp_stage_loss after the forward first",
                 mb);
        /* The head is column-parallel over the vocabulary: its input gradient is summed (f). */
        float *dh = act_alloc(nd);
        xt_linear_backward(dh, s->dhead, NULL, t->dlogits, t->hf, s->head, n, d, s->v_count);
        sum_over(s->comm, dh, nd);
        xt_rmsnorm_backward(g, s->dfinal_norm, dh, t->x, s->final_norm, t->rstd, n, d);
        xt_free(dh);
    } else {
        XT_CHECK(dy,
                 "xt_tp_stage_backward(micro-batch %d): dy is NULL on a stage that is not "
                 "the last",
                 mb);
        memcpy(g, dy, sizeof(float) * (size_t)nd);
    }
    for (int l = s->count - 1; l >= 0; l--)
        block_backward(s, l, g, g, &t->saved[l], t->batch, t->T);
    if (s->is_first) { /* the embedding's rows that this rank holds */
        for (int i = 0; i < n; i++) {
            int tok = t->tokens[i] - s->v_lo;
            if (tok >= 0 && tok < s->v_count)
                for (int j = 0; j < d; j++)
                    s->dembed[(size_t)tok * d + j] += g[(size_t)i * d + j];
        }
    } else {
        XT_CHECK(dx,
                 "xt_tp_stage_backward(micro-batch %d): dx is NULL on a stage that is not "
                 "the first",
                 mb);
        memcpy(dx, g, sizeof(float) * (size_t)nd);
    }
    xt_free(g);
    release(t, s->count);
    pp_stage_event('B', mb, s->chunk, s->first, s->count, began);
}
