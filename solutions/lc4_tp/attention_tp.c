/*
 * attention_tp.c: causal grouped-query self-attention split across ranks by heads.
 * docs/lc4_tp.md#attention_tp
 *
 *     q = x Wq, k = x Wk, v = x Wv        x: (batch T) x d; Wq: d x hq hd; Wk, Wv: d x hkv hd
 *     o = attention(q, k, v)              query head j reads KV head j / (hq/hkv), causal
 *     y = o Wo                            Wo: hq hd x d
 *
 * Heads never mix: each is its own attention over its own columns of q, k and
 * v. So the query heads are cut into np equal blocks (hq % np == 0), and each
 * rank also holds the KV heads its query heads read: a block of them when
 * hkv >= np, otherwise the single one, which then lives on np/hkv ranks (its
 * replicas). Wq, Wk, Wv are column-parallel, Wo row-parallel over the own
 * query heads:
 *
 *     hq = 8, hkv = 2, np = 4:   query heads   0 1 | 2 3 | 4 5 | 6 7
 *                                KV heads        0 |   0 |   1 |   1
 *                                rank            0 |   1 |   2 |   3
 *                                kv_comm        {0, 1}    {2, 3}
 *
 *       x (whole) --f--> [q_r k_r v_r] --> attention on the own heads --> o_r Wo_r --g--> y
 *
 *   f: identity forward, all-reduce of dx backward; g: all-reduce of y forward.
 *   A replicated KV head's weight gradient is split among its replicas (each
 *   holds its own query heads' share): summed over kv_comm.
 *
 * Cost per rank: one all-reduce of batch·T·d floats forward, one backward,
 * and where KV heads are replicated two all-reduces of d·hd floats (dWk, dWv)
 * among the replicas; weights and activations 1/np of the layer's (the KV
 * part replicas/np).
 */
#include "xt_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int d, hq, hkv, hd;     /* the whole layer: model dim, query heads, KV heads, head dim */
    int hq_local, q_lo;     /* this rank's query heads: hq_local of them from head q_lo */
    int hkv_local, kv_lo;   /* this rank's KV heads: hkv_local of them from head kv_lo */
    int replicas;           /* ranks holding each of this rank's KV heads (1 when hkv >= np) */
    MPI_Comm comm, kv_comm; /* the layer's group; the ranks sharing this rank's KV heads,
                               in comm's rank order (MPI_COMM_NULL when replicas == 1) */
} attn_tp;

/*
 * Collective over comm. The split: rank r owns query heads [r hq/np, (r+1) hq/np);
 * when hkv >= np, KV heads [r hkv/np, (r+1) hkv/np); otherwise KV head r hkv/np,
 * held by np/hkv ranks.
 */
void attention_tp_init(attn_tp *a, int d, int hq, int hkv, int hd, MPI_Comm comm)
{
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(hkv >= 1 && hq % hkv == 0 && hq % np == 0 &&
                 (hkv >= np ? hkv % np == 0 : np % hkv == 0),
             "attention_tp_init: hq=%d, hkv=%d cannot be split over %d ranks (hkv | hq, "
             "np | hq, and np | hkv or hkv | np)",
             hq, hkv, np);
    /*
     * TODO: fill every field of *a.
     *   a->comm is comm itself. kv_comm: exactly one MPI_Comm_split of comm when replicas > 1
     *   (members in comm's rank order), MPI_COMM_NULL and no MPI call otherwise.
     */
    // BEGIN SOLUTION
    a->d = d;
    a->hq = hq;
    a->hkv = hkv;
    a->hd = hd;
    a->hq_local = hq / np;
    a->q_lo = rank * a->hq_local;
    a->comm = comm;
    a->kv_comm = MPI_COMM_NULL;
    if (hkv >= np) {
        a->hkv_local = hkv / np;
        a->kv_lo = rank * a->hkv_local;
        a->replicas = 1;
    } else {
        a->hkv_local = 1;
        a->replicas = np / hkv;
        a->kv_lo = rank / a->replicas; /* = rank hkv / np */
        MPI_Comm_split(comm, a->kv_lo, rank, &a->kv_comm);
    }
    // END SOLUTION
}

void attention_tp_free(attn_tp *a)
{
    if (a->kv_comm != MPI_COMM_NULL)
        MPI_Comm_free(&a->kv_comm);
}

/*
 * This rank's blocks of the whole weights: wq (d x hq_local hd), wk and wv
 * (d x hkv_local hd), wo (hq_local hd x d), row-major, contiguous.
 */
void attention_tp_shard(const attn_tp *a, const float *wq_full, const float *wk_full,
                        const float *wv_full, const float *wo_full, float *wq, float *wk, float *wv,
                        float *wo)
{
    /*
     * TODO: copy out the blocks.
     *   Head j owns columns j hd .. j hd + hd - 1 of Wq (of Wk, Wv for a KV head) and the same
     *   rows of Wo. wq, wo: the own query heads; wk, wv: the own KV heads.
     */
    // BEGIN SOLUTION
    int d = a->d, hd = a->hd, qw = a->hq * hd, kw = a->hkv * hd;
    int qn = a->hq_local * hd, kn = a->hkv_local * hd;
    for (int i = 0; i < d; i++) {
        memcpy(wq + (size_t)i * qn, wq_full + (size_t)i * qw + (size_t)a->q_lo * hd,
               sizeof(float) * qn);
        memcpy(wk + (size_t)i * kn, wk_full + (size_t)i * kw + (size_t)a->kv_lo * hd,
               sizeof(float) * kn);
        memcpy(wv + (size_t)i * kn, wv_full + (size_t)i * kw + (size_t)a->kv_lo * hd,
               sizeof(float) * kn);
    }
    memcpy(wo, wo_full + (size_t)a->q_lo * hd * d, sizeof(float) * (size_t)qn * d);
    // END SOLUTION
}

/*
 * x, y: (batch T) x d, whole on every rank. act: what backward needs, filled
 * here: batch T (2 hq_local + 2 hkv_local) hd + batch hq_local T floats (its
 * layout is yours).
 */
void attention_tp_forward(const attn_tp *a, const float *x, const float *wq, const float *wk,
                          const float *wv, const float *wo, float *y, float *act, int batch, int T)
{
    /*
     * TODO: the layer's output.
     *   y (garbage in) bit-identical on every rank: exactly one MPI_Allreduce of batch*T*d
     *   floats on a->comm. xt_attention_* are allowed, libxt's decoder is not.
     */
    // BEGIN SOLUTION
    int n = batch * T, d = a->d, qn = a->hq_local * a->hd, kn = a->hkv_local * a->hd;
    float *q = act, *k = q + (size_t)n * qn, *v = k + (size_t)n * kn;
    float *o = v + (size_t)n * kn, *lse = o + (size_t)n * qn;
    xt_linear_forward(q, x, wq, NULL, n, d, qn);
    xt_linear_forward(k, x, wk, NULL, n, d, kn);
    xt_linear_forward(v, x, wv, NULL, n, d, kn);
    xt_attention_forward(o, lse, q, k, v, batch, T, a->hq_local, a->hkv_local, a->hd);
    xt_linear_forward(y, o, wo, NULL, n, qn, d);
    MPI_Allreduce(MPI_IN_PLACE, y, n * d, MPI_FLOAT, MPI_SUM, a->comm);
    // END SOLUTION
}

void attention_tp_backward(const attn_tp *a, const float *x, const float *wq, const float *wk,
                           const float *wv, const float *wo, const float *act, const float *dy,
                           float *dx, float *dwq, float *dwk, float *dwv, float *dwo, int batch,
                           int T)
{
    /*
     * TODO: backward.
     *   dwq, dwk, dwv, dwo += this rank's blocks (dwk, dwv: the whole gradient of the own KV
     *   heads, the same on their replicas); dx (overwritten) bit-identical on every rank.
     *   Exactly one MPI_Allreduce of batch*T*d floats on a->comm; when replicas > 1, one of
     *   d*hkv_local*hd floats on a->kv_comm for dWk and one for dWv. act: what forward left.
     */
    // BEGIN SOLUTION
    int n = batch * T, d = a->d, qn = a->hq_local * a->hd, kn = a->hkv_local * a->hd;
    const float *q = act, *k = q + (size_t)n * qn, *v = k + (size_t)n * kn;
    const float *o = v + (size_t)n * kn, *lse = o + (size_t)n * qn;
    size_t nq = (size_t)n * qn + 1, nk = (size_t)n * kn + 1, nw = (size_t)d * kn + 1;
    float *dout = malloc(sizeof(float) * nq), *dq = malloc(sizeof(float) * nq);
    float *dk = malloc(sizeof(float) * nk), *dv = malloc(sizeof(float) * nk);
    float *dx_kv = malloc(sizeof(float) * ((size_t)n * d + 1));
    xt_linear_backward(dout, dwo, NULL, dy, o, wo, n, qn, d);
    xt_attention_backward(dq, dk, dv, dout, q, k, v, o, lse, batch, T, a->hq_local, a->hkv_local,
                          a->hd);
    xt_linear_backward(dx, dwq, NULL, dq, x, wq, n, d, qn);
    /* A replicated KV head: this rank's query heads give only a share of its gradient. */
    int shared = a->replicas > 1;
    float *gk = shared ? calloc(nw, sizeof(float)) : dwk;
    float *gv = shared ? calloc(nw, sizeof(float)) : dwv;
    xt_linear_backward(dx_kv, gk, NULL, dk, x, wk, n, d, kn);
    for (size_t i = 0; i < (size_t)n * d; i++)
        dx[i] += dx_kv[i];
    xt_linear_backward(dx_kv, gv, NULL, dv, x, wv, n, d, kn);
    for (size_t i = 0; i < (size_t)n * d; i++)
        dx[i] += dx_kv[i];
    MPI_Allreduce(MPI_IN_PLACE, dx, n * d, MPI_FLOAT, MPI_SUM, a->comm);
    if (shared) {
        MPI_Allreduce(MPI_IN_PLACE, gk, d * kn, MPI_FLOAT, MPI_SUM, a->kv_comm);
        MPI_Allreduce(MPI_IN_PLACE, gv, d * kn, MPI_FLOAT, MPI_SUM, a->kv_comm);
        for (int i = 0; i < d * kn; i++) {
            dwk[i] += gk[i];
            dwv[i] += gv[i];
        }
        free(gk);
        free(gv);
    }
    free(dx_kv);
    free(dk);
    free(dv);
    free(dq);
    free(dout);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/attention_tp.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
