/*
 * kit.h: what lecture 6's programs are given beyond libxt, its kit (the code
 * is in grader/lectures/lc6_cp/kit/, linked into this lecture's programs
 * only): attention of one block of queries against one block of keys and
 * values under a mask, the log-sum-exp merge of two results, and one tile
 * of scores, each call seen by the grader; then the set-up of a graded
 * attention case and the demo's run, which the case drivers use.
 */
#ifndef LC6_KIT_H
#define LC6_KIT_H

#include "xt_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------- attention blocks */

/*
 * The masks of a block of queries against a block of keys whose positions
 * start together (query i and key j sit i and j positions after the start):
 * NONE, query i sees every key (the keys' block lies wholly before); CAUSAL,
 * keys 0 .. i (the diagonal block); SHIFTED, keys 0 .. i-1 (a striped layout's
 * keys one position behind their queries).
 */
typedef enum { XT_MASK_NONE = 'N', XT_MASK_CAUSAL = 'C', XT_MASK_SHIFTED = 'S' } xt_mask;

/*
 * One attention block, grouped-query: q nq x (hq hd), k and v nk x (hkv hd),
 * query head j reading KV head j / (hq / hkv); scores q.k / sqrt(hd). out
 * nq x (hq hd) and lse nq x hq (token-major, so that rows of out and lse
 * pair up as (nq hq) rows of hd) are overwritten: the block's own softmax
 * output and log-sum-exp. A query row that sees no key gets lse -inf and a
 * zero output. The scratch is 32 query rows of scores, and a mask's hidden
 * keys are never computed: no nq x nk matrix, no work wasted on the diagonal.
 *
 * Backward, given the whole row's out and lse (after every block is merged):
 * P = exp(S - lse), and dq, dk, dv are accumulated (+=; any may be NULL).
 *
 * Each call is logged in the case record (an A line, xt_event: forward or backward,
 * shape, mask, the (query, key) position pairs computed, the receives pending
 * while it ran); xt_attn_pairs('F') and ('B') give the pairs computed since
 * the case (or the program) began.
 */
void xt_attn_block_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                           int nq, int nk, int hq, int hkv, int hd, xt_mask mask);
void xt_attn_block_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out, const float *lse,
                            int nq, int nk, int hq, int hkv, int hd, xt_mask mask);
long xt_attn_pairs(char op);

/*
 * o (rows x d) and lse (rows) := the softmax-weighted combination of (o, lse)
 * and (o_blk, lse_blk), lse = log(e^lse + e^lse_blk). A row whose lse is -inf
 * carries no weight; two such rows give o = 0, lse = -inf.
 */
void xt_lse_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d);

/*
 * One tile of scores for a program that tiles attention itself (kit/attn_block.c):
 * s (nq x nk, row-major) = scale q k^T, q nq x d and k nk x d row-major (rows
 * of one head). No mask: the caller applies it. Each call is logged in the
 * case record (an A line: op T, mask N, nq x nk pairs); xt_attn_tiles gives
 * the calls since the program began, and their pairs in *pairs (may be NULL).
 */
void xt_attn_scores(float *s, const float *q, const float *k, int nq, int nk, int d, float scale);
long xt_attn_tiles(long *pairs);

/* ------------------------------------------------ the cases and the demo */

/*
 * A context-parallel causal attention over a sequence cut across comm's
 * ranks: this rank holds c positions (the layout says which), token-major
 * rows: q and o c x (hq hd), k and v c x (hkv hd), lse c x hq. The backward
 * gets the whole row's o and lse (the merged forward's) and overwrites dq,
 * dk, dv with its rows of the whole sequence's gradients.
 */
typedef void (*cp_attn_forward)(float *o, float *lse, const float *q, const float *k,
                                const float *v, int c, int hq, int hkv, int hd, MPI_Comm comm);
typedef void (*cp_attn_backward)(float *dq, float *dk, float *dv, const float *dout, const float *q,
                                 const float *k, const float *v, const float *o, const float *lse,
                                 int c, int hq, int hkv, int hd, MPI_Comm comm);

/*
 * run_case for such a pair: c = T / np from the case's "T", "hq", "hkv",
 * "hd". The case whose fn is forward_name reads "q", "k", "v" and writes "o"
 * and "lse"; any other reads "dout", "q", "k", "v", "o", "lse" and writes
 * "dq", "dk", "dv". Outputs arrive filled with garbage.
 */
void cp_attention_case(xt_case *c, const char *forward_name, cp_attn_forward fwd,
                       cp_attn_backward bwd);

/*
 * The positions rank r of np holds, in its row order, into pos (T / np of
 * them): layout "contiguous" (r c .. r c + c - 1) or "zigzag" (chunks r and
 * 2 np - 1 - r of T / (2 np) positions).
 */
void cp_positions(const char *layout, int T, int np, int r, int *pos);

/*
 * The demo's run: a sequence of T tokens (seeded random q, k, v and dout,
 * the same on every rank), this rank's rows by the layout; fwd, then bwd
 * from fwd's o and lse. Each rank prints its positions and the (query, key)
 * pairs its attention blocks computed, forward and backward (the kit's
 * xt_attn_pairs), beside the causal pairs its queries own; then o, lse, dq,
 * dk, dv are compared with one process's causal attention over the whole
 * sequence (libxt's xt_attention_forward/_backward, code of its own) and
 * the last line says "... matches one process: yes" (or NO). Collective.
 */
void cp_attention_demo(MPI_Comm comm, const char *layout, int T, int hq, int hkv, int hd,
                       cp_attn_forward fwd, cp_attn_backward bwd);

#ifdef __cplusplus
}
#endif

#endif
