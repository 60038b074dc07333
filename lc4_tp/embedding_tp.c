/*
 * embedding_tp.c: an embedding table whose vocabulary is cut across the
 * ranks. docs/lc4_tp.md#embedding_tp
 *
 * The table E is V x d: row t is token t's vector. Rank r holds the row
 * block r (the split rule of xt_block: rows v_lo .. v_lo + v_count - 1,
 * stored as v_count x d). Every rank sees the same n tokens; each looks up
 * the ones it owns, writes zeros for the others, and one all-reduce (SUM)
 * puts the rows together, since exactly one rank contributed each of them:
 *
 *     tokens   3   0   8   3          E cut by rows: rank 0 rows 0..3
 *     rank 0  E3  E0   0  E3                         rank 1 rows 4..6
 *     rank 1   0   0   0   0                         rank 2 rows 7..9
 *     rank 2   0   0  E8   0
 *     -------------------------  all-reduce (SUM)
 *     y       E3  E0  E8  E3     on every rank
 *
 * Backward: dE[t] += dy[i] for every i with tokens[i] = t. Each rank adds
 * the rows of its own tokens into its own block: dy is the same on every
 * rank (y was), so nothing travels.
 *
 * Cost per rank: forward one all-reduce of n·d floats, 2 (np-1)/np · n·d·4
 * bytes with a ring; backward none.
 */
#include "xt_nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void embedding_tp_forward(const int *tokens, int n, const float *e_local, int v_lo, int v_count,
                          int d, float *y, MPI_Comm comm)
{
    /*
     * TODO: y = E[tokens] on every rank.
     *   y (n x d) arrives holding garbage; this rank holds E's rows v_lo .. v_lo + v_count - 1.
     *   Exactly one MPI_Allreduce of n*d floats on comm; y bit-identical on every rank.
     */
    XT_TODO("y = E[tokens] on every rank.", tokens, n, e_local, v_lo, v_count, d, y, comm);
}

void embedding_tp_backward(const int *tokens, int n, const float *dy, int v_lo, int v_count, int d,
                           float *de_local)
{
    /*
     * TODO: de_local += dy's rows, for own tokens.
     *   Row tokens[i] - v_lo of de_local gets row i of dy (n x d) for tokens in this rank's
     *   block; a repeated token adds up; other rows unchanged. No MPI call.
     */
    XT_TODO("de_local += dy's rows, for own tokens.", tokens, n, dy, v_lo, v_count, d, de_local);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/embedding_tp.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
