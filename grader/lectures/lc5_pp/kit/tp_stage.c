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
 *
 * The shard, the blocks, the embedding, the head's backward and the fused
 * cross-entropy are lecture 4's: its kit's tp_model and its solution,
 * solutions/lc4_tp/model_tp.c, compiled into this file as it is (the manifest
 * declares USES = ["lc4_tp"]), so that one source serves both lectures. This
 * file adds what a pipeline needs: a run of blocks, and micro-batches in
 * flight, each with its own saved activations.
 */
#include "kit.h"
#include "stage_log.h"
#include "xt_harness.h"

/* Lecture 4's answer: tp_saved, tp_embed, tp_block_forward, tp_block_backward,
 * tp_cross_entropy, tp_head_backward, tp_embed_backward (and its own kit.h's tp_model). */
#include "model_tp.c"

#include <stdlib.h>
#include <string.h>

enum { FORWARDED = 1, LOSS_DONE };

/* One micro-batch in flight. */
typedef struct {
    int mb, batch, T, state;                 /* state 0: the slot is free */
    int *tokens;                             /* the first stage's, for the embedding's gradient */
    tp_saved *saved;                         /* one per block */
    float *x, *hf, *rstd, *logits, *dlogits; /* the last stage's head */
} slot;

struct xt_tp_stage {
    tp_model m; /* this rank's shard of the stage's blocks */
    int chunk, is_first, is_last;
    slot *slots;
    int nslots;
};

/* ------------------------------------------------------------ the shard */

xt_tp_stage *xt_tp_stage_new(const xt_decoder_shape *shape, int vocab, int layers,
                             const float *full, int first, int count, MPI_Comm tp, int chunk)
{
    XT_CHECK(shape && full, "xt_tp_stage_new: no shape or no parameters");
    XT_CHECK(layers >= 1 && first >= 0 && count >= 1 && first + count <= layers,
             "xt_tp_stage_new: blocks %d .. %d are not within the model's 0 .. %d", first,
             first + count - 1, layers - 1);
    XT_CHECK(count <= TP_MAX_LAYERS, "xt_tp_stage_new: %d blocks on one stage, at most %d", count,
             TP_MAX_LAYERS);
    XT_CHECK(vocab >= 1 && chunk >= 0, "xt_tp_stage_new: vocabulary %d, chunk %d", vocab, chunk);
    XT_CHECK(tp != MPI_COMM_NULL, "xt_tp_stage_new: the tensor-parallel communicator is null");
    int np;
    PMPI_Comm_size(tp, &np);
    XT_CHECK(shape->hkv >= 1 && shape->hq % shape->hkv == 0 && shape->hq % np == 0 &&
                 shape->hkv % np == 0,
             "xt_tp_stage_new: %d query heads on %d KV heads over %d ranks: both must be "
             "multiples of the ranks (no KV head is shared), and hkv must divide hq",
             shape->hq, shape->hkv, np);
    XT_CHECK(shape->ff >= np && vocab >= np,
             "xt_tp_stage_new: %d hidden units and a vocabulary of %d over %d ranks", shape->ff,
             vocab, np);
    xt_tp_stage *s = calloc(1, sizeof *s);
    XT_CHECK(s, "out of memory for a tensor-parallel stage");
    tp_config c = {vocab,      shape->d,  layers,    shape->hq,
                   shape->hkv, shape->hd, shape->ff, shape->eps};
    xt_tp_model_init(&s->m, &c, full, first, count, tp);
    s->chunk = chunk;
    s->is_first = first == 0, s->is_last = first + count == layers;
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
            release(&s->slots[i], s->m.count);
    free(s->slots);
    xt_tp_model_free(&s->m);
    free(s);
}

long xt_tp_stage_nparams(const xt_tp_stage *s)
{
    return s->m.nparams;
}

float *xt_tp_stage_params(xt_tp_stage *s)
{
    return s->m.params;
}

float *xt_tp_stage_grads(xt_tp_stage *s)
{
    return s->m.grads;
}

int xt_tp_stage_d(const xt_tp_stage *s)
{
    return s->m.cfg.d;
}

int xt_tp_stage_first(const xt_tp_stage *s)
{
    return s->m.first;
}

int xt_tp_stage_count(const xt_tp_stage *s)
{
    return s->m.count;
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
    tp_model *m = &s->m;
    xt_adam_update(m->params, m->grads, m->adam_m, m->adam_v, m->nparams, ++m->step, h);
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
             fn, mb, mb, s->m.first, s->m.first + s->m.count - 1);
    return t;
}

/* Every token id of a vocabulary, or stop naming the first that is not. */
static void check_tokens(const xt_tp_stage *s, const int *ids, int n, const char *fn,
                         const char *what)
{
    for (int i = 0; i < n; i++)
        XT_CHECK(ids[i] >= 0 && ids[i] < s->m.cfg.vocab,
                 "%s: %s %d at %d is outside the vocabulary 0 .. %d", fn, what, ids[i], i,
                 s->m.cfg.vocab - 1);
}

void xt_tp_stage_forward(xt_tp_stage *s, int mb, const int *tokens, const float *x, int batch,
                         int T, float *y)
{
    pp_stage_began began = pp_stage_begin();
    tp_model *m = &s->m;
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
    t->saved = calloc((size_t)m->count, sizeof *t->saved);
    XT_CHECK(t->saved, "out of memory for a tensor-parallel stage's micro-batch");
    int n = batch * T, d = m->cfg.d;
    long nd = (long)n * d;
    float *in = act_alloc(nd), *out = act_alloc(nd);
    if (s->is_first) {
        check_tokens(s, tokens, n, "xt_tp_stage_forward", "token");
        t->tokens = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(int) * (size_t)n);
        memcpy(t->tokens, tokens, sizeof(int) * (size_t)n);
        tp_embed(m, tokens, n, in);
    } else {
        memcpy(in, x, sizeof(float) * (size_t)nd);
    }
    for (int l = 0; l < m->count; l++) {
        tp_block_forward(m, l, in, out, &t->saved[l], batch, T);
        float *swap = in;
        in = out, out = swap;
    }
    if (s->is_last) { /* the final norm and the head: logits kept for the loss */
        t->x = in, t->hf = act_alloc(nd), t->rstd = act_alloc(n);
        t->logits = act_alloc((long)n * m->v_count);
        xt_rmsnorm_forward(t->hf, t->rstd, t->x, m->final_norm, n, d, m->cfg.eps);
        xt_linear_forward(t->logits, t->hf, m->head, NULL, n, d, m->v_count);
        if (y)
            memcpy(y, in, sizeof(float) * (size_t)nd);
    } else {
        memcpy(y, in, sizeof(float) * (size_t)nd);
        xt_free(in);
    }
    xt_free(out);
    pp_stage_event('F', mb, s->chunk, m->first, m->count, began);
}

float xt_tp_stage_loss(xt_tp_stage *s, int mb, const int *targets, float scale)
{
    tp_model *m = &s->m;
    XT_CHECK(s->is_last,
             "xt_tp_stage_loss(micro-batch %d): this stage (blocks %d..%d) is not the last: the "
             "loss belongs to the stage with the model's block %d",
             mb, m->first, m->first + m->count - 1, m->cfg.layers - 1);
    slot *t = in_flight(s, mb, "xt_tp_stage_loss");
    XT_CHECK(t->state == FORWARDED,
             "xt_tp_stage_loss(micro-batch %d): its loss was already taken (once per forward)", mb);
    XT_CHECK(targets, "xt_tp_stage_loss(micro-batch %d): targets is NULL", mb);
    int n = t->batch * t->T;
    check_tokens(s, targets, n, "xt_tp_stage_loss", "target");
    long nv = (long)n * m->v_count;
    t->dlogits = act_alloc(nv);
    float loss = tp_cross_entropy(m, t->logits, targets, n, t->dlogits);
    if (scale != 1.0f)
        for (long i = 0; i < nv; i++)
            t->dlogits[i] *= scale;
    t->state = LOSS_DONE;
    return loss;
}

void xt_tp_stage_backward(xt_tp_stage *s, int mb, const float *dy, float *dx)
{
    pp_stage_began began = pp_stage_begin();
    tp_model *m = &s->m;
    slot *t = in_flight(s, mb, "xt_tp_stage_backward");
    int n = t->batch * t->T, d = m->cfg.d;
    long nd = (long)n * d;
    float *g = act_alloc(nd);
    if (s->is_last) {
        XT_CHECK(t->state == LOSS_DONE,
                 "xt_tp_stage_backward(micro-batch %d): no loss was taken: on the last stage "
                 "call xt_tp_stage_loss after the forward first",
                 mb);
        tp_head_backward(m, t->dlogits, t->x, t->hf, t->rstd, n, g);
    } else {
        XT_CHECK(dy,
                 "xt_tp_stage_backward(micro-batch %d): dy is NULL on a stage that is not "
                 "the last",
                 mb);
        memcpy(g, dy, sizeof(float) * (size_t)nd);
    }
    for (int l = m->count - 1; l >= 0; l--) {
        tp_block_backward(m, l, g, g, &t->saved[l], t->batch, t->T);
        memset(&t->saved[l], 0, sizeof t->saved[l]); /* freed by the block's backward */
    }
    if (s->is_first) {
        tp_embed_backward(m, t->tokens, n, g);
    } else {
        XT_CHECK(dx,
                 "xt_tp_stage_backward(micro-batch %d): dx is NULL on a stage that is not "
                 "the first",
                 mb);
        memcpy(dx, g, sizeof(float) * (size_t)nd);
    }
    xt_free(g);
    release(t, m->count);
    pp_stage_event('B', mb, s->chunk, m->first, m->count, began);
}
