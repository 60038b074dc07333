/*
 * col_parallel_linear.c: a linear layer whose output columns are cut
 * across the ranks. docs/lc4_tp.md#col_parallel_linear
 *
 * y = x W + b with W in x out. Rank r holds the column block r of W (in x
 * out_local, the split rule of xt_block) and the same block of b; the input
 * x (rows x in) is the same on every rank. Each rank computes its own
 * columns of y and needs nothing from the others:
 *
 *              W = [ W_0 | W_1 | W_2 ]          y = [ y_0 | y_1 | y_2 ]
 *     x  ·     (in x out, cut by columns)   =   y_r = x W_r + b_r
 *
 * Backward, with dy_r the gradient of this rank's columns of y:
 *     dW_r += x^T dy_r     db_r += sum over rows of dy_r     (local)
 *     dx    = dy W^T = sum over r of dy_r W_r^T              (all-reduce)
 * Every rank used all of x, so every rank's x gets a gradient from every
 * block: the all-reduce of dx is Megatron's "f" operator (identity forward,
 * all-reduce backward). When the next layer is row-parallel (mlp_tp.c), y
 * stays split and col_linear_gather is never needed; a layer at the end of
 * a model gathers y's columns onto every rank.
 *
 * Cost per rank: forward none; backward one all-reduce of rows·in floats,
 * 2 (np-1)/np · rows·in·4 bytes with a ring; gather one all-gather,
 * (np-1)/np · rows·out·4 bytes received.
 */
#include "xt_nn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void col_linear_forward(const float *x, const float *w, const float *b, float *y, int rows, int in,
                        int out_local, MPI_Comm comm)
{
    /*
     * TODO: y = x w + b for this rank's columns.
     *   b may be NULL; y arrives holding garbage. No MPI call (local queries such as
     *   MPI_Comm_rank are fine).
     */
    // BEGIN SOLUTION
    (void)comm;
    xt_linear_forward(y, x, w, b, rows, in, out_local);
    // END SOLUTION
}

void col_linear_backward(const float *x, const float *w, const float *dy, float *dx, float *dw,
                         float *db, int rows, int in, int out_local, MPI_Comm comm)
{
    /*
     * TODO: dw, db +=; dx all-reduced.
     *   dw += x^T dy, db += column sums of dy (db NULL: no bias); dx (rows x in, overwritten)
     *   = dy W^T, bit-identical on every rank: exactly one MPI_Allreduce of rows*in floats.
     */
    // BEGIN SOLUTION
    xt_linear_backward(dx, dw, db, dy, x, w, rows, in, out_local);
    MPI_Allreduce(MPI_IN_PLACE, dx, rows * in, MPI_FLOAT, MPI_SUM, comm);
    // END SOLUTION
}

void col_linear_gather(const float *y_local, float *y, int rows, int out, MPI_Comm comm)
{
    /*
     * TODO: gather the column blocks into y.
     *   y (rows x out) = every rank's block side by side, on every rank.
     *   Rank r's block is xt_block(out, np, r) columns wide (it may be 0). Exactly one
     *   MPI_Allgatherv or MPI_Allgather on comm, sending this rank's rows*out_local floats.
     */
    // BEGIN SOLUTION
    int np, rank, my_lo, my_count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(out, np, rank, &my_lo, &my_count);
    /* Block r arrives contiguous (rows x count_r) at rows * lo_r; then each of its rows
     * moves to columns lo_r .. lo_r + count_r - 1 of y. */
    int *counts = malloc(sizeof(int) * (size_t)np), *displs = malloc(sizeof(int) * (size_t)np);
    for (int r = 0; r < np; r++) {
        int lo, count;
        xt_block(out, np, r, &lo, &count);
        counts[r] = rows * count;
        displs[r] = rows * lo;
    }
    float *blocks = malloc(sizeof(float) * ((size_t)rows * (size_t)out + 1));
    MPI_Allgatherv(y_local, rows * my_count, MPI_FLOAT, blocks, counts, displs, MPI_FLOAT, comm);
    for (int r = 0; r < np; r++) {
        int lo, count;
        xt_block(out, np, r, &lo, &count);
        for (int i = 0; i < rows; i++)
            memcpy(y + (size_t)i * out + lo, blocks + displs[r] + (size_t)i * count,
                   sizeof(float) * (size_t)count);
    }
    free(blocks);
    free(counts);
    free(displs);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/col_parallel_linear.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
