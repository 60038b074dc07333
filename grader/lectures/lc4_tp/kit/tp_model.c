/*
 * tp_model.c: one rank's shard of the tensor-parallel decoder (kit.h), cut out
 * of the whole model in the Megatron way:
 *
 *   embedding E     rows v_lo .. v_lo + v_count - 1           xt_block(V, np, r)
 *   norm1, norm2    whole                                     replicated
 *   Wq, Wo          columns, rows of heads q_lo .. + hq/np
 *   Wk, Wv          columns of its KV heads                   hkv/np each, or one
 *                                                             shared by np/hkv ranks
 *   Wg, Wu, Wd      columns, columns, rows of hidden units    xt_block(ff, np, r)
 *   final norm      whole                                     replicated
 *   head W          columns v_lo .. v_lo + v_count - 1        xt_block(V, np, r)
 *
 * Lecture 4's driver shards the whole model (blocks 0 .. L-1); lecture 5's
 * tensor-parallel pipeline stage a run of blocks.
 */
#include "kit.h"
#include "xt_harness.h"

#include <string.h>

long xt_tp_model_views(const tp_model *m, float *base, float **embed, tp_block *blk, float **norm,
                       float **head)
{
    const tp_config *c = &m->cfg;
    long qw = (long)m->hq_local * c->hd, kvw = (long)m->hkv_local * c->hd, d = c->d;
    long at = 0;
#define TAKE(ptr, n) ((ptr) = base ? base + at : NULL, at += (n))
    *embed = *norm = *head = NULL;
    if (m->first == 0)
        TAKE(*embed, (long)m->v_count * d);
    for (int l = 0; l < m->count; l++) {
        tp_block *b = &blk[l];
        TAKE(b->norm1, d);
        TAKE(b->wq, d * qw);
        TAKE(b->wk, d * kvw);
        TAKE(b->wv, d * kvw);
        TAKE(b->wo, qw * d);
        TAKE(b->norm2, d);
        TAKE(b->wg, d * m->ff_local);
        TAKE(b->wu, d * m->ff_local);
        TAKE(b->wd, (long)m->ff_local * d);
    }
    if (m->first + m->count == c->layers) {
        TAKE(*norm, d);
        TAKE(*head, d * m->v_count);
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

void xt_tp_model_init(tp_model *m, const tp_config *c, const float *full, int first, int count,
                      MPI_Comm comm)
{
    XT_CHECK(m && c && full, "xt_tp_model_init: no model, configuration or parameters");
    XT_CHECK(c->layers >= 1 && first >= 0 && count >= 1 && first + count <= c->layers,
             "xt_tp_model_init: blocks %d .. %d are not within the model's 0 .. %d", first,
             first + count - 1, c->layers - 1);
    XT_CHECK(count <= TP_MAX_LAYERS, "xt_tp_model_init: %d blocks on one rank, at most %d", count,
             TP_MAX_LAYERS);
    XT_CHECK(comm != MPI_COMM_NULL, "xt_tp_model_init: the tensor-parallel communicator is null");
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    m->first = first, m->count = count;
    m->comm = comm;
    PMPI_Comm_size(comm, &m->np);
    PMPI_Comm_rank(comm, &m->rank);
    int np = m->np, r = m->rank;
    XT_CHECK(c->hkv >= 1 && c->hq % np == 0 && c->hq % c->hkv == 0 &&
                 (c->hkv % np == 0 || np % c->hkv == 0),
             "xt_tp_model_init: hq %d, hkv %d at np %d: hq must be a multiple of np and of hkv, "
             "and hkv a multiple or a divisor of np",
             c->hq, c->hkv, np);
    XT_CHECK(c->ff >= np && c->vocab >= np,
             "xt_tp_model_init: %d hidden units and a vocabulary of %d over %d ranks", c->ff,
             c->vocab, np);
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

    tp_block sizes[TP_MAX_LAYERS];
    float *e, *n, *h;
    m->nparams = xt_tp_model_views(m, NULL, &e, sizes, &n, &h);
    size_t bytes = sizeof(float) * (size_t)m->nparams;
    m->params = xt_alloc(XT_MEM_PARAMS, bytes);
    m->grads = xt_alloc(XT_MEM_GRADS, bytes);
    m->adam_m = xt_alloc(XT_MEM_OPTIMIZER, bytes);
    m->adam_v = xt_alloc(XT_MEM_OPTIMIZER, bytes);
    memset(m->grads, 0, bytes);
    memset(m->adam_m, 0, bytes);
    memset(m->adam_v, 0, bytes);
    xt_tp_model_views(m, m->params, &m->embed, m->blk, &m->final_norm, &m->head);
    xt_tp_model_views(m, m->grads, &m->dembed, m->dblk, &m->dfinal_norm, &m->dhead);

    int d = c->d, hd = c->hd, qw = c->hq * hd, kvw = c->hkv * hd;
    xt_decoder_shape shape = {d, c->hq, c->hkv, hd, c->ff, c->eps};
    xt_decoder_layout lay = xt_decoder_layout_of(&shape);
    if (m->embed)
        memcpy(m->embed, full + (long)m->v_lo * d, sizeof(float) * (size_t)m->v_count * d);
    const float *p = full + (long)c->vocab * d + (long)first * lay.total;
    for (int l = 0; l < count; l++, p += lay.total) {
        tp_block *b = &m->blk[l];
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
    if (m->head) {
        p = full + (long)c->vocab * d + (long)c->layers * lay.total;
        memcpy(m->final_norm, p, sizeof(float) * d);
        copy_columns(m->head, p + d, d, c->vocab, m->v_lo, m->v_count);
    }
}

void xt_tp_model_free(tp_model *m)
{
    xt_free(m->params);
    xt_free(m->grads);
    xt_free(m->adam_m);
    xt_free(m->adam_v);
    if (m->kv_comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->kv_comm);
    m->params = m->grads = m->adam_m = m->adam_v = NULL;
}
