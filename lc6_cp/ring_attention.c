/*
 * ring_attention.c: causal attention over a sequence cut across the ranks,
 * the key/value blocks passed around a ring. docs/lc6_cp.md#ring_attention
 *
 * T = np c tokens, cut contiguously: rank r holds the queries, keys and
 * values of positions r c .. r c + c - 1. Its queries need the keys and
 * values of every rank up to its own, and none after. The queries stay; the
 * K/V blocks travel: at each step every rank sends the block it holds to
 * r+1 and receives the next from r-1, so at step s rank r holds the block of
 * rank r-s (mod np):
 *
 *             r0          r1          r2          r3
 *   step 0    KV0 \       KV1 \       KV2 \       KV3 \      \  causal: the diagonal
 *   step 1    KV3 .       KV0 #       KV1 #       KV2 #      #  full: an earlier rank's
 *   step 2    KV2 .       KV3 .       KV0 #       KV1 #      .  skipped: a later rank's,
 *   step 3    KV1 .       KV2 .       KV3 .       KV0 #         fully masked
 *
 * Each block gives its own output and log-sum-exp, merged into the running
 * ones by the LSE (o = (e^lse o + e^lse_b o_b) / (e^lse + e^lse_b)), so the
 * T x T scores never exist anywhere. The next block's receive is posted
 * before the current block is computed: the transfer runs under the compute.
 * Rank r computes r+1 blocks, rank np-1 the most (zigzag_attention.c evens
 * that out).
 *
 * Backward: the K/V blocks travel again, and with each goes the accumulator
 * of its dK/dV. Every rank adds its queries' share to the block it holds and
 * passes both on; after np hops each accumulator is home, holding every
 * rank's share. dQ stays home.
 *
 * Cost per rank, with d = hkv hd: forward np-1 messages of K and V, 2 c d
 * floats each: 2 (np-1) (T/np) d floats, under 2 T d whatever np; backward
 * np-1 K/V messages and np dK/dV messages of the same size.
 */
#include "kit.h" /* attention blocks; cp_attention_case, cp_attention_demo */
#include "xt_nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ring_attention_forward(float *o, float *lse, const float *q, const float *k, const float *v,
                            int c, int hq, int hkv, int hd, MPI_Comm comm)
{
    /*
     * TODO: ring attention forward.
     *   o (c x hq hd) and lse (c x hq): this rank's rows of causal attention over the
     *   whole sequence. Each block through xt_attn_block_forward (XT_MASK_CAUSAL on the
     *   own, XT_MASK_NONE on earlier ranks'; later ranks' skipped, not computed), merged by
     *   xt_lse_merge. Point-to-point on comm only: to r+1, from r-1; exactly np-1 K/V
     *   blocks of 2 c hkv hd floats sent; each block's compute runs with the next
     *   block's receive already posted.
     */
    XT_TODO("ring attention forward.", o, lse, q, k, v, c, hq, hkv, hd, comm);
}

void ring_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                             const float *k, const float *v, const float *o, const float *lse,
                             int c, int hq, int hkv, int hd, MPI_Comm comm)
{
    /*
     * TODO: ring attention backward.
     *   o and lse are the whole row's (the merged forward's). dq, dk, dv (overwritten): this
     *   rank's rows of the whole sequence's gradients. Each block through
     *   xt_attn_block_backward (it accumulates), masks and skips as forward. Point-to-point
     *   on comm, to r+1, from r-1: exactly np-1 K/V blocks and np dK/dV blocks sent, each of
     *   2 c hkv hd floats; a receive posted under each block's compute, as forward.
     */
    XT_TODO("ring attention backward.", dq, dk, dv, dout, q, k, v, o, lse, c, hq, hkv, hd, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/ring_attention.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
