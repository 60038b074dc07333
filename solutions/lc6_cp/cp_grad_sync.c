/*
 * cp_grad_sync.c: training with context parallelism inside data parallelism:
 * whose gradients are summed with whose. docs/lc6_cp.md#cp_grad_sync
 *
 * np = dp x cp ranks, cp consecutive ranks to a context group: each data rank
 * (a group) trains on its own sequence, cut over its cp ranks in the zigzag
 * layout. The layer is one attention block, its weights the same on every rank:
 *
 *     q = x Wq, k = x Wk, v = x Wv;  o = causal attention(q, k, v);  y = o Wo
 *
 * and the loss of data rank j's sequence is L_j = sum_t y_t . g_t (g: a given
 * upstream gradient), the step's loss their mean over the data ranks. The
 * attention runs over the context group (all-gathered K and V, as in
 * allgather_kv_attention.c), and each rank's weight gradients come from its own
 * c tokens only: for one sequence they are parts of one sum. So the gradient
 * all-reduce must span the context ranks as well as the data ranks:
 *
 *     dp 2 x cp 2:   r0 r1 | r2 r3      context groups {r0 r1}, {r2 r3} (attention)
 *                                       gradients: one all-reduce over all four
 *     sum over r0..r3, then / dp: the mean over sequences of each sequence's gradient
 *
 * Megatron-LM names this group "data parallel with context parallel" (its
 * optimizer's gradient buffers reduce over dp x cp); reducing over the data
 * ranks alone leaves each context rank with the gradient of its own chunk of
 * tokens, and the context ranks' weights drift apart from the first step.
 *
 * Cost per step and rank: the attention's collectives on the context group
 * (two all-gathers forward, K and V, c hkv hd floats from each rank; two more
 * and two reduce-scatters of cp c hkv hd floats backward, or the forward's kept);
 * one all-reduce of the weights' gradients, d (hq + 2 hkv) hd + hq hd d floats,
 * over all dp cp ranks: the same bytes as plain data parallelism over np ranks.
 */
#include "kit.h" /* attention blocks */

#include <stdlib.h>
#include <string.h>

// BEGIN SOLUTION
/* Rows of cp ranks' blocks (rank p's: chunk p, then chunk 2cp-1-p) to sequence order, or back. */
static void reorder(float *dst, const float *src, int cp, int h, int width, int to_sequence)
{
    size_t chunk = (size_t)h * (size_t)width;
    for (int j = 0; j < 2 * cp; j++) {
        int p = j < cp ? j : 2 * cp - 1 - j, half = j < cp ? 0 : 1;
        size_t blocked = (size_t)(2 * p + half) * chunk, ordered = (size_t)j * chunk;
        memcpy(dst + (to_sequence ? ordered : blocked), src + (to_sequence ? blocked : ordered),
               sizeof(float) * chunk);
    }
}

/* The whole sequence's rows of a (c rows, width floats each) in sequence order. */
static void gather(float *seq, const float *a, int c, int width, MPI_Comm group)
{
    int cp;
    MPI_Comm_size(group, &cp);
    float *all = malloc(sizeof(float) * ((size_t)cp * c * width + 1));
    MPI_Allgather(a, c * width, MPI_FLOAT, all, c * width, MPI_FLOAT, group);
    reorder(seq, all, cp, c / 2, width, 1);
    free(all);
}
// END SOLUTION

void cp_train(float *wq, float *wk, float *wv, float *wo, const float *x, const float *g, int steps,
              float lr, int c, int d, int hq, int hkv, int hd, int cp, MPI_Comm comm)
{
    /*
     * TODO: SGD steps.
     *   The attention block on dp x cp ranks: context groups of cp consecutive ranks
     *   (MPI_Comm_split; free it), zigzag rows x, g (c x d). Per step: forward and backward
     *   as allgather_kv_attention.c's over the group; the four weights' gradients (Wq, Wk,
     *   Wv, Wo, packed in that order) in exactly one MPI_Allreduce over comm, then divided by
     *   dp = np / cp; W -= lr gradient on every rank, the same bits everywhere.
     */
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    MPI_Comm group;
    MPI_Comm_split(comm, rank / cp, rank % cp, &group);
    int me = rank % cp, h = c / 2, T = cp * c, lq = hq * hd, lk = hkv * hd;
    long nq = (long)d * lq, nk = (long)d * lk, no = (long)lq * d, nw = nq + 2 * nk + no;
    float *q = malloc(sizeof(float) * ((size_t)c * lq + 1)),
          *k = malloc(sizeof(float) * ((size_t)c * lk + 1));
    float *v = malloc(sizeof(float) * ((size_t)c * lk + 1)),
          *o = malloc(sizeof(float) * ((size_t)c * lq + 1));
    float *lse = malloc(sizeof(float) * ((size_t)c * hq + 1)),
          *do_ = malloc(sizeof(float) * ((size_t)c * lq + 1));
    float *dq = malloc(sizeof(float) * ((size_t)c * lq + 1)),
          *dk = malloc(sizeof(float) * ((size_t)c * lk + 1));
    float *dv = malloc(sizeof(float) * ((size_t)c * lk + 1));
    float *kseq = malloc(sizeof(float) * ((size_t)T * lk + 1)),
          *vseq = malloc(sizeof(float) * ((size_t)T * lk + 1));
    float *dkseq = malloc(sizeof(float) * ((size_t)T * lk + 1)),
          *dvseq = malloc(sizeof(float) * ((size_t)T * lk + 1));
    float *blocked = malloc(sizeof(float) * ((size_t)T * lk + 1));
    float *ob = malloc(sizeof(float) * ((size_t)h * lq + 1)),
          *lb = malloc(sizeof(float) * ((size_t)h * hq + 1));
    float *grad = malloc(sizeof(float) * ((size_t)nw + 1));
    for (int step = 0; step < steps; step++) {
        xt_linear_forward(q, x, wq, NULL, c, d, lq);
        xt_linear_forward(k, x, wk, NULL, c, d, lk);
        xt_linear_forward(v, x, wv, NULL, c, d, lk);
        gather(kseq, k, c, lk, group);
        gather(vseq, v, c, lk, group);
        for (int i = 0; i < 2; i++) { /* own chunk i: its causal block, then every earlier key */
            int chunk = i == 0 ? me : 2 * cp - 1 - me;
            float *oi = o + (size_t)i * h * lq, *li = lse + (size_t)i * h * hq;
            size_t diag = (size_t)chunk * h * lk;
            xt_attn_block_forward(oi, li, q + (size_t)i * h * lq, kseq + diag, vseq + diag, h, h,
                                  hq, hkv, hd, XT_MASK_CAUSAL);
            if (chunk > 0) {
                xt_attn_block_forward(ob, lb, q + (size_t)i * h * lq, kseq, vseq, h, chunk * h, hq,
                                      hkv, hd, XT_MASK_NONE);
                xt_lse_merge(oi, li, ob, lb, h * hq, hd);
            }
        }
        /* Backward from dy = g: Wo's gradient, then through the attention (K and V kept). */
        float *gq = grad, *gk = grad + nq, *gv = gk + nk, *go = gv + nk;
        memset(grad, 0, sizeof(float) * (size_t)nw);
        xt_linear_backward(do_, go, NULL, g, o, wo, c, lq, d);
        memset(dq, 0, sizeof(float) * (size_t)c * lq);
        memset(dkseq, 0, sizeof(float) * (size_t)T * lk);
        memset(dvseq, 0, sizeof(float) * (size_t)T * lk);
        for (int i = 0; i < 2; i++) {
            int chunk = i == 0 ? me : 2 * cp - 1 - me;
            size_t at = (size_t)i * h, diag = (size_t)chunk * h * lk;
            xt_attn_block_backward(dq + at * lq, dkseq + diag, dvseq + diag, do_ + at * lq,
                                   q + at * lq, kseq + diag, vseq + diag, o + at * lq,
                                   lse + at * hq, h, h, hq, hkv, hd, XT_MASK_CAUSAL);
            if (chunk > 0)
                xt_attn_block_backward(dq + at * lq, dkseq, dvseq, do_ + at * lq, q + at * lq, kseq,
                                       vseq, o + at * lq, lse + at * hq, h, chunk * h, hq, hkv, hd,
                                       XT_MASK_NONE);
        }
        reorder(blocked, dkseq, cp, h, lk, 0);
        MPI_Reduce_scatter_block(blocked, dk, c * lk, MPI_FLOAT, MPI_SUM, group);
        reorder(blocked, dvseq, cp, h, lk, 0);
        MPI_Reduce_scatter_block(blocked, dv, c * lk, MPI_FLOAT, MPI_SUM, group);
        xt_linear_backward(NULL, gq, NULL, dq, x, wq, c, d, lq);
        xt_linear_backward(NULL, gk, NULL, dk, x, wk, c, d, lk);
        xt_linear_backward(NULL, gv, NULL, dv, x, wv, c, d, lk);

        /* Every rank's tokens' part, summed over the data and context ranks: the mean over the
         * sequences of each one's gradient once divided by dp. */
        MPI_Allreduce(MPI_IN_PLACE, grad, (int)nw, MPI_FLOAT, MPI_SUM, comm);
        float scale = lr / (float)(np / cp);
        for (long i = 0; i < nq; i++)
            wq[i] -= scale * gq[i];
        for (long i = 0; i < nk; i++) {
            wk[i] -= scale * gk[i];
            wv[i] -= scale * gv[i];
        }
        for (long i = 0; i < no; i++)
            wo[i] -= scale * go[i];
    }
    free(q), free(k), free(v), free(o), free(lse), free(do_), free(dq), free(dk), free(dv);
    free(kseq), free(vseq), free(dkseq), free(dvseq), free(blocked), free(ob), free(lb);
    free(grad);
    MPI_Comm_free(&group);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/cp_grad_sync.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
