/*
 * lecture.h: what this lecture's programs share beyond libxt (lecture.c),
 * found on their include path (-Igrader/lectures/lc6_cp): the set-up of a
 * graded attention case and the demo's run and comparison, around the
 * context-parallel attention each program writes.
 */
#ifndef LECTURE_H
#define LECTURE_H

#include "xt_nn.h"

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
 * pairs its attention blocks computed, forward and backward (libxt's
 * xt_attn_pairs), beside the causal pairs its queries own; then o, lse, dq,
 * dk, dv are compared with one process's causal attention over the whole
 * sequence (libxt's xt_attention_forward/_backward, code of its own) and
 * the last line says "... matches one process: yes" (or NO). Collective.
 */
void cp_attention_demo(MPI_Comm comm, const char *layout, int T, int hq, int hkv, int hd,
                       cp_attn_forward fwd, cp_attn_backward bwd);

#endif
