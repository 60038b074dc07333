/*
 * flash_attention.c: causal attention in one process, tile by tile, so that
 * the T x T score matrix never exists. docs/lc6_cp.md#flash_attention
 *
 * One head: q, k, v are T x d, scores s_ij = q_i . k_j / sqrt(d), query i
 * sees keys j <= i. The queries are cut into tiles of br rows, the keys into
 * tiles of bc (the last of each may be shorter). A query tile visits the key
 * tiles from the left, keeping per row a running max m, a running sum l of
 * e^(s - m), and the output so far, unnormalized; when a new key tile raises
 * the max, the sum and the output are rescaled by e^(m_old - m_new):
 *
 *                 keys 0..2  3..5  6..8  9         T = 10, br = 4, bc = 3
 *     queries 0..3   [M]     [M]    .    .         M: on the diagonal, the
 *     queries 4..7   [ ]     [M]   [M]   .            mask applied inside
 *     queries 8..9   [ ]     [ ]   [M]  [M]        .: above it, skipped
 *
 * At the end of the row o = o / l and lse = m + log l. The backward
 * recomputes each tile's probabilities P = exp(S - lse) from the saved lse
 * instead of keeping them, and with D_i = dO_i . O_i:
 *
 *     dV_j += P^T dO_i    dP = dO_i V_j^T    dS = P (dP - D)
 *     dQ_i += dS K_j / sqrt(d)              dK_j += dS^T Q_i / sqrt(d)
 *
 * Cost: one process, no messages. Compute: about T^2/2 (query, key) pairs
 * (plus the masked corners of the diagonal tiles), 4d flops each forward
 * (scores, P V) and 10d backward (scores again, dP, dV, dQ, dK). Memory: one
 * tile of scores (br bc floats, two backward) and a few rows per tile, where
 * plain attention holds T^2 scores; that is what lets a GPU keep a tile in
 * its fast on-chip memory and read q, k, v from the slow one once per tile.
 */
#include "kit.h" /* the lecture's kit: attention blocks, tiles of scores */

#include <math.h>
#include <stdio.h>
#include <string.h>

void flash_attention_forward(float *o, float *lse, const float *q, const float *k, const float *v,
                             int T, int d, int br, int bc)
{
    /*
     * TODO: tiled causal attention forward (online softmax).
     *   o (T x d) and lse (T, natural log) arrive holding garbage; scores q.k / sqrt(d), key
     *   j visible to query i when j <= i. Query tiles of br rows, key tiles of bc (the last
     *   of each may be shorter); every tile's scores come from xt_attn_scores (xt_nn.h), which
     *   the grader counts: the tiles holding a visible key, each once, none above the diagonal.
     *   Scratch only through xt_alloc, all freed, its peak at most one tile's worth (docs:
     *   4 (2 br bc + 4 (br + bc)(d + 1) + T) bytes): no malloc, no variable-length array,
     *   no stack or static array over 4 KiB. No MPI call; attention already written is refused.
     */
    XT_TODO("tiled causal attention forward (online softmax).", o, lse, q, k, v, T, d, br, bc);
}

void flash_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                              const float *k, const float *v, const float *o, const float *lse,
                              int T, int d, int br, int bc)
{
    /*
     * TODO: tiled backward, P recomputed.
     *   P = exp(S - lse) from the forward's lse, tile by tile; D_i = dout_i . o_i. dq, dk, dv
     *   (T x d) arrive holding garbage and are overwritten. The forward's rules hold: the
     *   same tiles through xt_attn_scores, each once; scratch through xt_alloc within the
     *   same bound, all freed; no MPI call.
     */
    XT_TODO("tiled backward, P recomputed.", dq, dk, dv, dout, q, k, v, o, lse, T, d, br, bc);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/flash_attention.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
