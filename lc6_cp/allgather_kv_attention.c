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
    XT_TODO("o, lse against the all-gathered keys.", o, lse, q, k, v, c, hq, hkv, hd, comm);
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
    XT_TODO("the gradients.", dq, dk, dv, dout, q, k, v, o, lse, c, hq, hkv, hd, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/allgather_kv_attention.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
