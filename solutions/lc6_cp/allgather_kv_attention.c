/*
 * allgather_kv_attention.c: Llama 3's context parallelism: the keys and
 * values all-gathered, then each rank's queries against all of them.
 * docs/lc6_cp.md#allgather_kv_attention
 *
 * Ring attention (ring_attention.c, zigzag_attention.c) passes K and V around
 * in np-1 steps, each hidden under a block of compute. Llama 3 (Dubey et al.
 * 2024) does the plain thing instead: one all-gather of K and one of V, then
 * every rank attends with its own queries to the whole sequence's keys.
 * Its reasons: grouped-query attention makes K and V small beside Q (8 KV heads
 * for 128 query heads), so the all-gather is cheap; one collective is simpler
 * and more flexible than a ring (any mask, such as documents packed in one
 * sequence); and at its sequence lengths the latency of np-1 ring steps
 * matters more than their overlap.
 *
 * The layout is zigzag, as zigzag_attention.c's (rank r holds chunk r and
 * chunk 2np-1-r of c' = T/(2np) positions), so that the causal work is the
 * same on every rank; the all-gathered K and V arrive rank by rank, each
 * rank's two chunks together, and are put in sequence order:
 *
 *     np = 2, chunks 0..3   K gathered: [k0 k3 | k1 k2]  ->  in order: k0 k1 k2 k3
 *     rank 0 (chunks 0, 3):  q0 x k0 (causal);  q3 x k0 k1 k2 (all), q3 x k3 (causal)
 *     rank 1 (chunks 1, 2):  q1 x k0, q1 x k1 (causal);  q2 x k0 k1, q2 x k2 (causal)
 *
 * Backward: K and V gathered again (or kept), dQ of the own queries, and dK, dV
 * of the whole sequence from the own queries, which a reduce-scatter sums over
 * the ranks and returns to their owners, back in rank-by-rank order.
 *
 * Cost per rank, for c = 2c' rows of hkv heads: forward two all-gathers of
 * c hkv hd floats in (np-1)/np of T hkv hd received; backward the same two and
 * two reduce-scatters of T hkv hd floats, (np-1)/np of them sent. The ring sends
 * as much, in np-1 messages a tensor, overlapped with compute; the all-gather is
 * one call, not overlapped, and its K and V for the whole sequence sit in memory.
 */
#include "kit.h" /* attention blocks; cp_attention_case, cp_attention_demo */

#include <stdlib.h>
#include <string.h>

// BEGIN SOLUTION
/*
 * Rows of np ranks' blocks (rank p's: chunk p, then chunk 2np-1-p, h rows each, width
 * floats a row) to sequence order (to_sequence), or back.
 */
static void reorder(float *dst, const float *src, int np, int h, int width, int to_sequence)
{
    size_t chunk = (size_t)h * (size_t)width;
    for (int j = 0; j < 2 * np; j++) {
        int p = j < np ? j : 2 * np - 1 - j, half = j < np ? 0 : 1;
        size_t blocked = (size_t)(2 * p + half) * chunk, ordered = (size_t)j * chunk;
        memcpy(dst + (to_sequence ? ordered : blocked), src + (to_sequence ? blocked : ordered),
               sizeof(float) * chunk);
    }
}

/* The whole sequence's K and V in sequence order, from every rank's rows. */
static void gather_kv(float *kseq, float *vseq, const float *k, const float *v, int c, int width,
                      MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    float *all = malloc(sizeof(float) * ((size_t)np * c * width + 1));
    MPI_Allgather(k, c * width, MPI_FLOAT, all, c * width, MPI_FLOAT, comm);
    reorder(kseq, all, np, c / 2, width, 1);
    MPI_Allgather(v, c * width, MPI_FLOAT, all, c * width, MPI_FLOAT, comm);
    reorder(vseq, all, np, c / 2, width, 1);
    free(all);
}
// END SOLUTION

void allgather_kv_forward(float *o, float *lse, const float *q, const float *k, const float *v,
                          int c, int hq, int hkv, int hd, MPI_Comm comm)
{
    /*
     * TODO: o, lse against the all-gathered keys.
     *   Zigzag rows (chunk r, then chunk 2np-1-r, c' = c/2 each); o c x (hq hd), lse c x hq,
     *   overwritten. Exactly one MPI_Allgather of K and one of V (c hkv hd floats from each
     *   rank), nothing else. Blocks with xt_attn_block_forward and xt_lse_merge; no pair
     *   above the diagonal computed.
     */
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int h = c / 2, ldq = hq * hd, ldk = hkv * hd;
    float *kseq = malloc(sizeof(float) * ((size_t)np * c * ldk + 1));
    float *vseq = malloc(sizeof(float) * ((size_t)np * c * ldk + 1));
    float *o_blk = malloc(sizeof(float) * ((size_t)h * ldq + 1));
    float *lse_blk = malloc(sizeof(float) * ((size_t)h * hq + 1));
    gather_kv(kseq, vseq, k, v, c, ldk, comm);
    for (int i = 0; i < 2; i++) { /* the own chunks: i = 0 is chunk r, i = 1 chunk 2np-1-r */
        int chunk = i == 0 ? rank : 2 * np - 1 - rank;
        float *oi = o + (size_t)i * h * ldq, *li = lse + (size_t)i * h * hq;
        const float *qi = q + (size_t)i * h * ldq;
        size_t diag = (size_t)chunk * h * ldk; /* the chunk's own keys: causal */
        xt_attn_block_forward(oi, li, qi, kseq + diag, vseq + diag, h, h, hq, hkv, hd,
                              XT_MASK_CAUSAL);
        if (chunk > 0) { /* every earlier key: no mask */
            xt_attn_block_forward(o_blk, lse_blk, qi, kseq, vseq, h, chunk * h, hq, hkv, hd,
                                  XT_MASK_NONE);
            xt_lse_merge(oi, li, o_blk, lse_blk, h * hq, hd);
        }
    }
    free(kseq);
    free(vseq);
    free(o_blk);
    free(lse_blk);
    // END SOLUTION
}

void allgather_kv_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const float *k, const float *v, const float *o, const float *lse, int c,
                           int hq, int hkv, int hd, MPI_Comm comm)
{
    /*
     * TODO: the gradients.
     *   dq, dk, dv: this rank's rows, overwritten; o, lse: the whole forward's rows. Exactly
     *   one MPI_Allgather of K and one of V as forward, one MPI_Reduce_scatter_block of dK
     *   and one of dV (np c hkv hd floats each, rank by rank), nothing else. Blocks with
     *   xt_attn_block_backward (+=); no pair above the diagonal computed.
     */
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int h = c / 2, ldq = hq * hd, ldk = hkv * hd;
    size_t whole = (size_t)np * c * ldk;
    float *kseq = malloc(sizeof(float) * (whole + 1)), *vseq = malloc(sizeof(float) * (whole + 1));
    float *dkseq = calloc(whole + 1, sizeof(float)), *dvseq = calloc(whole + 1, sizeof(float));
    float *blocked = malloc(sizeof(float) * (whole + 1));
    gather_kv(kseq, vseq, k, v, c, ldk, comm);
    memset(dq, 0, sizeof(float) * (size_t)c * ldq);
    for (int i = 0; i < 2; i++) {
        int chunk = i == 0 ? rank : 2 * np - 1 - rank;
        size_t at = (size_t)i * h, diag = (size_t)chunk * h * ldk;
        xt_attn_block_backward(dq + at * ldq, dkseq + diag, dvseq + diag, dout + at * ldq,
                               q + at * ldq, kseq + diag, vseq + diag, o + at * ldq, lse + at * hq,
                               h, h, hq, hkv, hd, XT_MASK_CAUSAL);
        if (chunk > 0)
            xt_attn_block_backward(dq + at * ldq, dkseq, dvseq, dout + at * ldq, q + at * ldq, kseq,
                                   vseq, o + at * ldq, lse + at * hq, h, chunk * h, hq, hkv, hd,
                                   XT_MASK_NONE);
    }
    /* Summed over the ranks and each rank's rows home: rank by rank, as gathered. */
    reorder(blocked, dkseq, np, h, ldk, 0);
    MPI_Reduce_scatter_block(blocked, dk, c * ldk, MPI_FLOAT, MPI_SUM, comm);
    reorder(blocked, dvseq, np, h, ldk, 0);
    MPI_Reduce_scatter_block(blocked, dv, c * ldk, MPI_FLOAT, MPI_SUM, comm);
    free(kseq);
    free(vseq);
    free(dkseq);
    free(dvseq);
    free(blocked);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/allgather_kv_attention.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
