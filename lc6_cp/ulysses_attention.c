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
    XT_TODO("sequence-sharded to head-sharded.", out, in, c, heads, hd, comm);
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
    XT_TODO("head-sharded back to sequence-sharded.", out, in, c, heads, hd, comm);
}

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
    XT_TODO("causal attention, by heads.", o, saved, q, k, v, c, hq, hkv, hd, comm);
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
    XT_TODO("its gradients from the saved layout.", dq, dk, dv, dout, saved, c, hq, hkv, hd, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/ulysses_attention.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
