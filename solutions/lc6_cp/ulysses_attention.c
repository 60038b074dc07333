/*
 * ulysses_attention.c: DeepSpeed-Ulysses, context parallelism by two
 * all-to-alls. docs/lc6_cp.md#ulysses_attention
 *
 * The sequence of T tokens is cut over np ranks (rank r holds positions
 * r c .. r c + c - 1, c = T / np), and so are q, k and v. Attention mixes
 * positions but never heads: so turn the sequence shard into a head shard,
 * every position of H / np heads, compute ordinary causal attention on them,
 * and turn the result back. One MPI_Alltoall does each turn:
 *
 *   sequence-sharded (c x H hd)              head-sharded (T x H/np hd)
 *            heads 0 1 | 2 3                          heads 0 1      heads 2 3
 *   r0  t0..1     A   |  B        all-to-all   r0  t0..1   A     r1  t0..1   B
 *   r1  t2..3     C   |  D        -------->        t2..3   C         t2..3   D
 *                                 <--------
 *   block s of a rank's send buffer is its c positions of rank s's heads
 *   (a column block: packed first); what rank s receives from rank p is
 *   positions p c .. of its own heads, already in place. Back: the inverse.
 *
 * Forward: q, k, v to the head layout (3 all-to-alls), xt_attn_block_forward
 * over the whole sequence on the own heads (T x T, causal), o back (1). What
 * the block backward will read stays in the head layout, saved (as
 * DeepSpeed's Ulysses keeps its local attention's inputs and outputs): q, k,
 * v, o and the log-sum-exp, which never travels. Backward: dout to the head
 * layout (1), the block backward from the saved tensors, dq, dk, dv back (3).
 *
 * GQA (query head j reads KV head j / (hq / hkv)): when hkv >= np the KV
 * heads split like the query heads, and rank r's query heads read exactly
 * its KV heads. When hkv < np there are not enough KV heads to go round:
 * each is repeated np / hkv times first, side by side (c x (np hd), verl's
 * repeat_kv), so that rank r receives KV head r / (np / hkv), the one its
 * query heads read.
 * Backward, the np / hkv copies' gradients come back and are summed.
 *
 * Cost per rank, per call of MPI_Alltoall on a tensor of c x W floats: it
 * sends (np-1)/np of it, c W (np-1)/np 4 bytes. With W_q = hq hd and
 * W_kv = max(hkv, np) hd: (2 W_q + 2 W_kv) c (np-1)/np floats in 4 calls
 * forward, and the same backward. With T fixed that falls as 1/np, where the
 * ring's (np-1) 2 c hkv hd does not; but the heads cap np (hq % np == 0),
 * nothing overlaps the exchanges, and the saved tensors hold every position
 * of the own heads: T (2 W_q + 2 W_kv) / np + T hq / np floats until the
 * backward.
 */
#include "kit.h" /* the lecture's kit: attention blocks, tiles of scores */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ulysses_seq_to_heads(float *out, const float *in, int c, int heads, int hd, MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    XT_CHECK(heads % np == 0, "ulysses_seq_to_heads: %d heads cannot be split over %d ranks", heads,
             np);
    /*
     * TODO: sequence-sharded to head-sharded.
     *   in: this rank's c positions x (heads hd); out: all T = np c positions x (heads/np hd),
     *   this rank's heads r heads/np .., token-major. Graded exactly, element by element;
     *   exactly one MPI_Alltoall on comm of c heads hd floats in all, nothing else.
     */
    // BEGIN SOLUTION
    int width = heads / np * hd, block = c * width; /* one rank's heads, one rank's block */
    float *send = malloc(sizeof(float) * ((size_t)np * (size_t)block + 1));
    /* Block s: this rank's c positions, rank s's heads (columns s width .. of every row). */
    for (int s = 0; s < np; s++)
        for (int i = 0; i < c; i++)
            memcpy(send + (size_t)s * block + (size_t)i * width,
                   in + (size_t)i * heads * hd + (size_t)s * width, sizeof(float) * (size_t)width);
    /* What rank p sends is its positions p c .. of this rank's heads: rows p c .. of out. */
    MPI_Alltoall(send, block, MPI_FLOAT, out, block, MPI_FLOAT, comm);
    free(send);
    // END SOLUTION
}

void ulysses_heads_to_seq(float *out, const float *in, int c, int heads, int hd, MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    XT_CHECK(heads % np == 0, "ulysses_heads_to_seq: %d heads cannot be split over %d ranks", heads,
             np);
    /*
     * TODO: head-sharded back to sequence-sharded.
     *   The inverse of ulysses_seq_to_heads: in all T positions x (heads/np hd), out this
     *   rank's c positions x (heads hd). Exactly one MPI_Alltoall, c heads hd floats.
     */
    // BEGIN SOLUTION
    int width = heads / np * hd, block = c * width;
    float *recv = malloc(sizeof(float) * ((size_t)np * (size_t)block + 1));
    /* Rows s c .. of in go to rank s; from rank s come this rank's positions of its heads. */
    MPI_Alltoall(in, block, MPI_FLOAT, recv, block, MPI_FLOAT, comm);
    for (int s = 0; s < np; s++)
        for (int i = 0; i < c; i++)
            memcpy(out + (size_t)i * heads * hd + (size_t)s * width,
                   recv + (size_t)s * block + (size_t)i * width, sizeof(float) * (size_t)width);
    free(recv);
    // END SOLUTION
}

// BEGIN SOLUTION
/*
 * K or V (c x (hkv hd)) to the head layout with kvh KV heads in all (T x (kvh/np hd)): kvh
 * is hkv when the KV heads split over the ranks, otherwise a multiple of it, and each KV
 * head is first repeated kvh / hkv times, side by side, so that expanded head e is KV head
 * e / (kvh / hkv): the one query head e / (kvh / hkv) * (hq / hkv) .. reads.
 */
static void kv_to_heads(float *out, const float *in, int c, int hkv, int kvh, int hd, MPI_Comm comm)
{
    if (kvh == hkv) {
        ulysses_seq_to_heads(out, in, c, hkv, hd, comm);
        return;
    }
    int rep = kvh / hkv;
    float *x = malloc(sizeof(float) * ((size_t)c * (size_t)kvh * (size_t)hd + 1));
    for (int i = 0; i < c; i++)
        for (int e = 0; e < kvh; e++)
            memcpy(x + ((size_t)i * kvh + e) * hd, in + ((size_t)i * hkv + e / rep) * hd,
                   sizeof(float) * (size_t)hd);
    ulysses_seq_to_heads(out, x, c, kvh, hd, comm);
    free(x);
}

/* The mirror: dK or dV back to the sequence layout, the kvh / hkv copies of each KV head
 * summed into it (each copy's gradient is only its query heads' share). */
static void kv_grad_to_seq(float *out, const float *in, int c, int hkv, int kvh, int hd,
                           MPI_Comm comm)
{
    if (kvh == hkv) {
        ulysses_heads_to_seq(out, in, c, hkv, hd, comm);
        return;
    }
    int rep = kvh / hkv;
    float *x = malloc(sizeof(float) * ((size_t)c * (size_t)kvh * (size_t)hd + 1));
    ulysses_heads_to_seq(x, in, c, kvh, hd, comm);
    for (int i = 0; i < c; i++)
        for (int h = 0; h < hkv; h++)
            for (int d = 0; d < hd; d++) {
                float sum = 0.0f;
                for (int e = h * rep; e < (h + 1) * rep; e++)
                    sum += x[((size_t)i * kvh + e) * hd + d];
                out[((size_t)i * hkv + h) * hd + d] = sum;
            }
    free(x);
}
// END SOLUTION

/*
 * What the forward keeps for the backward, in the head layout: every position of this
 * rank's heads, token-major (T = np c rows). Buffers of the caller's, filled by the forward.
 *   q, o   T x (hq/np hd)            k, v   T x (max(hkv, np)/np hd) (KV heads as sent)
 *   lse    T x hq/np
 */
typedef struct {
    float *q, *k, *v, *o, *lse;
} ulysses_saved;

static void check_heads(const char *fn, int hq, int hkv, MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    XT_CHECK(hkv >= 1 && hq % hkv == 0 && hq % np == 0 &&
                 (hkv >= np ? hkv % np == 0 : np % hkv == 0),
             "%s: hq=%d, hkv=%d cannot be split over %d ranks (hkv | hq, np | hq, and np | hkv "
             "or hkv | np)",
             fn, hq, hkv, np);
}

void ulysses_attention_forward(float *o, ulysses_saved *saved, const float *q, const float *k,
                               const float *v, int c, int hq, int hkv, int hd, MPI_Comm comm)
{
    check_heads("ulysses_attention_forward", hq, hkv, comm);
    /*
     * TODO: causal attention, by heads.
     *   o (c x hq hd) overwritten, saved filled (above); 4 MPI_Alltoall on comm, of q, k, v,
     *   o (c W floats, W as in the Cost), nothing else; the lse stays in saved.
     */
    // BEGIN SOLUTION
    int np;
    MPI_Comm_size(comm, &np);
    int T = np * c, kvh = hkv >= np ? hkv : np; /* KV heads sent */
    ulysses_seq_to_heads(saved->q, q, c, hq, hd, comm);
    kv_to_heads(saved->k, k, c, hkv, kvh, hd, comm);
    kv_to_heads(saved->v, v, c, hkv, kvh, hd, comm);
    xt_attn_block_forward(saved->o, saved->lse, saved->q, saved->k, saved->v, T, T, hq / np,
                          kvh / np, hd, XT_MASK_CAUSAL);
    ulysses_heads_to_seq(o, saved->o, c, hq, hd, comm);
    // END SOLUTION
}

void ulysses_attention_backward(float *dq, float *dk, float *dv, const float *dout,
                                const ulysses_saved *saved, int c, int hq, int hkv, int hd,
                                MPI_Comm comm)
{
    check_heads("ulysses_attention_backward", hq, hkv, comm);
    /*
     * TODO: its gradients from the saved layout.
     *   dout c x (hq hd): this rank's positions; saved as the forward wrote it (read only).
     *   dq c x (hq hd), dk and dv c x (hkv hd) overwritten. Exactly 4 MPI_Alltoall on comm:
     *   dout and dq of c hq hd floats, dk and dv of c max(hkv, np) hd; nothing else. One
     *   attention backward on the own heads, and no forward again: o and lse are saved.
     */
    // BEGIN SOLUTION
    int np;
    MPI_Comm_size(comm, &np);
    int T = np * c, kvh = hkv >= np ? hkv : np;
    size_t qn = (size_t)T * (hq / np) * hd, kn = (size_t)T * (kvh / np) * hd;
    float *doh = malloc(sizeof(float) * (qn + 1));
    float *dqh = calloc(qn + 1, sizeof(float)); /* the block backward adds: start from 0 */
    float *dkh = calloc(kn + 1, sizeof(float)), *dvh = calloc(kn + 1, sizeof(float));
    ulysses_seq_to_heads(doh, dout, c, hq, hd, comm);
    xt_attn_block_backward(dqh, dkh, dvh, doh, saved->q, saved->k, saved->v, saved->o, saved->lse,
                           T, T, hq / np, kvh / np, hd, XT_MASK_CAUSAL);
    ulysses_heads_to_seq(dq, dqh, c, hq, hd, comm);
    kv_grad_to_seq(dk, dkh, c, hkv, kvh, hd, comm);
    kv_grad_to_seq(dv, dvh, c, hkv, kvh, hd, comm);
    free(doh);
    free(dqh);
    free(dkh);
    free(dvh);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/ulysses_attention.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
