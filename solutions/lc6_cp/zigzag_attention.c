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
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int h = c / 2, ldq = hq * hd;
    long kv_floats = (long)c * hkv * hd; /* K or V of one block */
    float *kv[2], *o_blk = malloc(sizeof(float) * ((size_t)c * ldq + 1));
    float *lse_blk = malloc(sizeof(float) * ((size_t)c * hq + 1));
    for (int b = 0; b < 2; b++)
        kv[b] = malloc(sizeof(float) * (size_t)(2 * kv_floats + 1));
    memcpy(kv[0], k, sizeof(float) * (size_t)kv_floats);
    memcpy(kv[0] + kv_floats, v, sizeof(float) * (size_t)kv_floats);
    int cur = 0;
    for (int s = 0; s < np; s++) {
        MPI_Request req[2];
        if (s < np - 1) { /* the next block moves while this one is computed */
            MPI_Irecv(kv[1 - cur], (int)(2 * kv_floats), MPI_FLOAT, (rank - 1 + np) % np, s, comm,
                      &req[0]);
            MPI_Isend(kv[cur], (int)(2 * kv_floats), MPI_FLOAT, (rank + 1) % np, s, comm, &req[1]);
        }
        int src = (rank - s + np) % np;
        const float *kb = kv[cur], *vb = kv[cur] + kv_floats;
        if (s == 0) {
            xt_attn_block_forward(o, lse, q, kb, vb, c, c, hq, hkv, hd, XT_MASK_CAUSAL);
        } else if (src < rank) { /* both query chunks see the block's first chunk only */
            xt_attn_block_forward(o_blk, lse_blk, q, kb, vb, c, h, hq, hkv, hd, XT_MASK_NONE);
            xt_lse_merge(o, lse, o_blk, lse_blk, c * hq, hd);
        } else { /* only the second query chunk sees the block, all of it */
            xt_attn_block_forward(o_blk, lse_blk, q + (long)h * ldq, kb, vb, h, c, hq, hkv, hd,
                                  XT_MASK_NONE);
            xt_lse_merge(o + (long)h * ldq, lse + (long)h * hq, o_blk, lse_blk, h * hq, hd);
        }
        if (s < np - 1)
            MPI_Waitall(2, req, MPI_STATUSES_IGNORE);
        cur = 1 - cur;
    }
    free(kv[0]);
    free(kv[1]);
    free(o_blk);
    free(lse_blk);
    // END SOLUTION
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
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int h = c / 2, ldq = hq * hd, prev = (rank - 1 + np) % np, next = (rank + 1) % np;
    long kv_floats = (long)c * hkv * hd, blk = 2 * kv_floats; /* a block: K then V */
    size_t bytes = sizeof(float) * (size_t)blk;
    /* kv: the K/V block computed and the next; acc: the travelling dK/dV accumulators (the
     * one this step adds to, and the next step's, arriving); part: this step's share. */
    float *kv[2], *acc[2], *part = malloc(bytes + sizeof(float));
    for (int b = 0; b < 2; b++) {
        kv[b] = malloc(bytes + sizeof(float));
        acc[b] = malloc(bytes + sizeof(float));
    }
    memcpy(kv[0], k, sizeof(float) * (size_t)kv_floats);
    memcpy(kv[0] + kv_floats, v, sizeof(float) * (size_t)kv_floats);
    memset(dq, 0, sizeof(float) * (size_t)c * (size_t)ldq);
    MPI_Request acc_in = MPI_REQUEST_NULL; /* this step's accumulator, posted a step ago */
    int cur = 0;
    for (int s = 0; s < np; s++) {
        MPI_Request kv_req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
        MPI_Request acc_next = MPI_REQUEST_NULL, acc_out = MPI_REQUEST_NULL;
        if (s < np - 1) {
            MPI_Irecv(kv[1 - cur], (int)blk, MPI_FLOAT, prev, 2 * s, comm, &kv_req[0]);
            MPI_Isend(kv[cur], (int)blk, MPI_FLOAT, next, 2 * s, comm, &kv_req[1]);
        }
        if (np > 1) /* the next step's accumulator (after the last step: the own one, home) */
            MPI_Irecv(acc[(s + 1) % 2], (int)blk, MPI_FLOAT, prev, 2 * s + 1, comm, &acc_next);
        int src = (rank - s + np) % np;
        const float *kb = kv[cur], *vb = kv[cur] + kv_floats;
        float *dkb = part, *dvb = part + kv_floats;
        memset(part, 0, bytes);
        if (s == 0)
            xt_attn_block_backward(dq, dkb, dvb, dout, q, kb, vb, o, lse, c, c, hq, hkv, hd,
                                   XT_MASK_CAUSAL);
        else if (src < rank)
            xt_attn_block_backward(dq, dkb, dvb, dout, q, kb, vb, o, lse, c, h, hq, hkv, hd,
                                   XT_MASK_NONE);
        else
            xt_attn_block_backward(dq + (long)h * ldq, dkb, dvb, dout + (long)h * ldq,
                                   q + (long)h * ldq, kb, vb, o + (long)h * ldq, lse + (long)h * hq,
                                   h, c, hq, hkv, hd, XT_MASK_NONE);
        float *a = acc[s % 2];
        if (s == 0) {
            memcpy(a, part, bytes);
        } else {
            MPI_Wait(&acc_in, MPI_STATUS_IGNORE);
            for (long i = 0; i < blk; i++)
                a[i] += part[i];
        }
        if (np > 1)
            MPI_Isend(a, (int)blk, MPI_FLOAT, next, 2 * s + 1, comm, &acc_out);
        MPI_Waitall(2, kv_req, MPI_STATUSES_IGNORE);
        MPI_Wait(&acc_out, MPI_STATUS_IGNORE);
        acc_in = acc_next;
        cur = 1 - cur;
    }
    MPI_Wait(&acc_in, MPI_STATUS_IGNORE); /* the own block's dK/dV, home after np steps */
    const float *home = acc[np > 1 ? np % 2 : 0];
    memcpy(dk, home, sizeof(float) * (size_t)kv_floats);
    memcpy(dv, home + kv_floats, sizeof(float) * (size_t)kv_floats);
    for (int b = 0; b < 2; b++) {
        free(kv[b]);
        free(acc[b]);
    }
    free(part);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/zigzag_attention.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
