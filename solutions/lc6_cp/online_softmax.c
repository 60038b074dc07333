/*
 * online_softmax.c: a softmax whose max and sum take one pass over blocks, and the log-sum-exp
 * merge of two partial results. docs/lc6_cp.md#online_softmax
 *
 * softmax(x)_i = e^(x_i - m) / s, m = max_j x_j, s = sum_j e^(x_j - m)
 * (subtracting m keeps every exponent <= 0: e^10000 overflows a float). The
 * textbook takes two passes, one for m, one for s. Online, the blocks come
 * one at a time and a running pair (m, s) is kept; when a block raises the
 * max, the sum so far was taken against the old one and is rescaled:
 *
 *     x = [ 1 3 2 | 0 5 4 | 1 1 ]          blocks of 3, the last shorter
 *     block 0:  m = 3   s = e^-2 + e^0 + e^-1                     = 1.503
 *     block 1:  m = 5   s = 1.503 e^(3-5) + e^-5 + e^0 + e^-1     = 1.578
 *     block 2:  m = 5   s = 1.578 + e^-4 + e^-4                   = 1.615
 *     y_i = e^(x_i - 5) / 1.615
 *
 * FlashAttention does exactly this along a row of scores, one block of keys
 * at a time, so that the row never exists whole. Its result per row is the
 * normalized output o and the log-sum-exp lse = m + log s, which is all it
 * takes to merge two results computed over different keys:
 *
 *     lse = log(e^lse_a + e^lse_b) = m + log(e^(lse_a - m) + e^(lse_b - m)),  m = max
 *     o   = e^(lse_a - lse) o_a + e^(lse_b - lse) o_b      (weights summing to 1)
 *
 * (computed in the second form: e^lse overflows a float once lse passes 88).
 *
 * That is how ring attention (ring_attention.c) adds up the blocks of keys
 * that visit a rank. A row that saw no key at all (every key masked) has
 * lse = -inf and must carry no weight, not NaN.
 *
 * Cost: online_softmax reads x twice and writes y once, with O(1) state: one
 * pass for (m, s), n exps and a rescale a block; y needs the final pair, so a
 * second read with n more exps. lse_merge 2 exps and a log per row, 3 flops
 * per element. No messages.
 */
#include "kit.h" /* the lecture's kit: attention blocks, tiles of scores */

#include <math.h>
#include <stdio.h>
#include <string.h>

void online_softmax(const float *x, float *y, int n, int block)
{
    /*
     * TODO: y = softmax(x), its max and sum found in one pass over blocks.
     *   n >= 1, block >= 1 (the last block may be shorter). x holds values from -1e35 up
     *   to 1e4, and -inf (masked), even a whole block, never only -inf; no NaN in y. y
     *   within float32 roundings of e^(x - max) / sum: subtract the max itself in the exp
     *   (max + log(sum) near 1e4 loses 3 digits). No MPI call; libxt's xt_softmax_rows and
     *   xt_lse_merge are refused: write it.
     */
    // BEGIN SOLUTION
    float m = -INFINITY, s = 0.0f; /* -inf: any finite x raises it, however low */
    for (int lo = 0; lo < n; lo += block) {
        int hi = lo + block < n ? lo + block : n;
        float bm = -INFINITY;
        for (int i = lo; i < hi; i++)
            bm = x[i] > bm ? x[i] : bm;
        if (bm == -INFINITY)
            continue; /* a masked block adds nothing, and e^(-inf - -inf) is NaN */
        float m_new = bm > m ? bm : m;
        s *= expf(m - m_new); /* the sum so far, against the new max (e^-inf = 0 at first) */
        for (int i = lo; i < hi; i++)
            s += expf(x[i] - m_new);
        m = m_new;
    }
    for (int i = 0; i < n; i++)
        y[i] = expf(x[i] - m) / s;
    // END SOLUTION
}

void lse_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d)
{
    /*
     * TODO: merge (o_blk, lse_blk) into (o, lse), row by row.
     *   o, o_blk rows x d. lse may be near +-1e4 (no overflow) or -inf: a -inf row has no
     *   weight and its o may hold anything, NaN too; two -inf rows give o = 0, lse = -inf.
     *   No MPI call; the kit's xt_lse_merge is refused: write it.
     */
    // BEGIN SOLUTION
    for (int i = 0; i < rows; i++) {
        float a = lse[i], b = lse_blk[i];
        float *oi = o + (size_t)i * d;
        const float *bi = o_blk + (size_t)i * d;
        if (b == -INFINITY) { /* nothing to add (and o_blk may be NaN) */
            if (a == -INFINITY)
                memset(oi, 0, sizeof(float) * (size_t)d);
            continue;
        }
        if (a == -INFINITY) { /* nothing to keep: o may be NaN, and 0 * NaN is NaN */
            memcpy(oi, bi, sizeof(float) * (size_t)d);
            lse[i] = b;
            continue;
        }
        float m = a > b ? a : b, wa = expf(a - m), wb = expf(b - m), sum = wa + wb;
        for (int c = 0; c < d; c++)
            oi[c] = (wa * oi[c] + wb * bi[c]) / sum;
        lse[i] = m + logf(sum);
    }
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/online_softmax.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
