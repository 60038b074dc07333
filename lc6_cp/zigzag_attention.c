/*
 * zigzag_attention.c: causal ring attention over the zigzag layout, which
 * gives every rank the same work. docs/lc6_cp.md#zigzag_attention
 *
 * Ring attention over contiguous blocks is unbalanced under the causal mask:
 * rank r's queries see r earlier blocks, so rank 0 computes one block and
 * rank np-1 computes np. Zigzag cuts the sequence into 2 np chunks of
 * c' = T/(2 np) positions and gives rank r chunk r and chunk 2np-1-r, one
 * early and one late (np = 4, chunks 0..7):
 *
 *     chunk   0  1  2  3  4  5  6  7
 *     rank    0  1  2  3  3  2  1  0      rank r's rows: chunk r, then chunk 2np-1-r
 *
 * Q stays; the K/V blocks (2 c' rows each) travel the ring, rank r sending
 * to r+1, so that at step s rank r holds the block of src = r-s. With q1, q2
 * its own chunks and k1, k2 the source's (k1 < q1 when src < r, and so on),
 * each step is one of three:
 *
 *     s = 0 (own block)    src < r              src > r
 *          k1 k2                k1 k2                k1 k2
 *     q1  [\    ]          q1  [##   ]          q1  [     ]
 *     q2  [## \ ]          q2  [##   ]          q2  [## ##]
 *     causal, 2c' x 2c'    2c' x c', no mask    c' x 2c', no mask
 *
 * Every off-diagonal step is exactly half a block, and every rank computes
 * c'^2 (2np-1) + c'(c'+1) (query, key) pairs: the contiguous layout's
 * r c^2 + c(c+1)/2 (c = 2c') spread from c(c+1)/2 to (np-1)c^2 + c(c+1)/2.
 * Blocks merge by their log-sum-exps (xt_lse_merge). Backward does the same
 * half blocks with libxt's accumulating block backward; each block's dK/dV
 * accumulator travels with it and takes one more step to arrive home.
 *
 * Cost per rank: forward np-1 messages of 2 c hkv hd floats (K and V of
 * c = 2c' rows); backward np-1 of those and np dK/dV messages of the same
 * size: (2np-1) 2 c hkv hd 4 bytes. The same bytes as the contiguous ring:
 * zigzag only changes which rows a rank holds and which half it computes.
 */
#include "kit.h" /* attention blocks; cp_attention_case, cp_attention_demo */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void zigzag_attention_forward(float *o, float *lse, const float *q, const float *k, const float *v,
                              int c, int hq, int hkv, int hd, MPI_Comm comm)
{
    /*
     * TODO: o, lse by zigzag ring attention.
     *   c = 2c' rows (chunk r, then chunk 2np-1-r); o c x (hq hd), lse c x hq, token-major,
     *   overwritten. Ring on comm (send to r+1, receive from r-1): exactly np-1 K/V rotations,
     *   each block's MPI_Irecv posted before the compute it overlaps. Blocks with
     *   xt_attn_block_forward and xt_lse_merge only; graded on the pairs each rank computes:
     *   exactly the causal ones (half a block per off-diagonal step), the same on every rank.
     */
    XT_TODO("o, lse by zigzag ring attention.", o, lse, q, k, v, c, hq, hkv, hd, comm);
}

void zigzag_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               const float *k, const float *v, const float *o, const float *lse,
                               int c, int hq, int hkv, int hd, MPI_Comm comm)
{
    /*
     * TODO: dq, dk, dv by zigzag ring.
     *   o and lse are the whole forward's rows. dq, dk, dv overwritten. The same half blocks
     *   as the forward, through xt_attn_block_backward (it accumulates: +=). Ring on comm:
     *   exactly np-1 K/V rotations and np dK/dV rotations (each block's gradient travels with
     *   it and arrives home), a receive posted before every block's compute while any is to
     *   come; the pairs each rank computes are graded as the forward's.
     */
    XT_TODO("dq, dk, dv by zigzag ring.", dq, dk, dv, dout, q, k, v, o, lse, c, hq, hkv, hd, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/zigzag_attention.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
