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
    XT_TODO("fill every field of *a.", a, d, hq, hkv, hd, comm);
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
    XT_TODO("copy out the blocks.", a, wq_full, wk_full, wv_full, wo_full, wq, wk, wv, wo);
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
    XT_TODO("the layer's output.", a, x, wq, wk, wv, wo, y, act, batch, T);
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
    XT_TODO("backward.", a, x, wq, wk, wv, wo, act, dy, dx, dwq, dwk, dwv, dwo, batch, T);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/attention_tp.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
