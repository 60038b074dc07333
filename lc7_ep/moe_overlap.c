/*
 * moe_overlap.c: one MoE layer with expert parallelism, its T tokens cut
 * into two micro-batches whose exchanges run under each other's experts.
 * docs/lc7_ep.md#moe_overlap
 *
 * GShard's layer is four steps in a row: route, dispatch (rows to the ranks
 * of their experts), experts, combine (outputs back). While the rows travel
 * nothing computes, and while the experts compute nothing travels. Cut the
 * tokens in two micro-batches (xt_block(T, 2, m)) and interleave them, as
 * DualPipe interleaves a forward with a backward:
 *
 *             exchange                           compute
 *   post every receive; start dispatch 0 and 1
 *   wait dispatch 0
 *             dispatch 1 in flight  ...........  experts 0
 *   start combine 0; wait dispatch 1
 *             combine 0 in flight   ...........  experts 1
 *   start combine 1; wait everything; y = sum of the weighted outputs
 *
 * Four exchanges between each pair of ranks, each a point-to-point message
 * with its own tag (dispatch 0, dispatch 1, combine 0, combine 1): in flight
 * together, two of them with one tag could swap their data. The counts of
 * both micro-batches go in one MPI_Alltoall first (2 E/np ints to each
 * rank), since a rank cannot receive rows without knowing how many.
 *
 * Cost per rank r, with D_m[s][p] the rows (choices) of micro-batch m that
 * rank s sends rank p: sum over m and p != r of D_m[r][p] d 4 bytes out and
 * D_m[p][r] d 4 back, the same bytes as one exchange of the whole batch, in
 * twice the messages (at most 4 (np-1) sent), plus the counts' all-to-all.
 * What the overlap saves is at most the shorter of an exchange and a
 * micro-batch's experts, twice.
 */
#include "kit.h" /* ep_layer_read, the expert bank */
#include "xt_nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void moe_overlap_forward(float *y, const float *x, const float *wr, const float *experts, int T,
                         int d, int E, int ff, int k, MPI_Comm comm)
{
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(E % np == 0 && k >= 1 && k <= E,
             "moe_overlap_forward: E=%d experts over %d ranks, k=%d: needs np | E, 1 <= k <= E", E,
             np, k);
    /*
     * TODO: the layer in 2 micro-batches.
     *   y (T x d): this rank's tokens' outputs, as one process gives them (top-k softmax
     *   weights, not renormalised, no capacity). Micro-batch m: tokens xt_block(T, 2, m).
     *   Graded: y; one MPI_Alltoall of both micro-batches' counts (2 E/np ints per rank),
     *   then point-to-point only: per rank pair at most one message per exchange (dispatch
     *   0, 1, combine 0, 1), of exactly its rows, each exchange with its own tag; every
     *   receive posted before the first expert compute; one xt_experts_forward per
     *   micro-batch (each local expert once, with that micro-batch's rows, 0 before 1);
     *   micro-batch 0's experts with micro-batch 1's dispatch pending, 1's with 0's
     *   combine pending (not yet waited).
     */
    XT_TODO("the layer in 2 micro-batches.", y, x, wr, experts, T, d, E, ff, k, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/moe_overlap.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
