/*
 * tp_async_linear.c: the column-parallel backward with its all-reduce
 * overlapped. docs/lc4_tp.md#tp_async_linear
 *
 * col_parallel_linear.c's backward computes dx = dy W^T, all-reduces it
 * (Megatron's "f": every rank's x gets a gradient from every column block),
 * and adds x^T dy to dW. Nothing in dW waits for the all-reduce, and nothing
 * in the all-reduce waits for dW: Megatron starts the all-reduce of dx
 * asynchronously and computes the weight gradient while it is on the wire
 * (its "async tensor-model-parallel all-reduce"):
 *
 *     blocking   | dx = dy W^T | all-reduce dx ......... | dW += x^T dy |
 *     overlapped | dx = dy W^T | all-reduce dx ......... |
 *                              | dW += x^T dy |  (while it is in flight)
 *
 * Cost: the same one all-reduce of rows x in floats, 2 (np-1)/np of it
 * through every rank with a ring; what is saved is time, up to the smaller
 * of the all-reduce's and the dW product's. The buffer dx belongs to MPI from
 * MPI_Iallreduce to its MPI_Wait: neither read nor written in between.
 */
#include "kit.h" /* xt_tp_input_grad, xt_tp_weight_grad */

#include <stdio.h>
#include <stdlib.h>

void col_linear_backward_async(const float *x, const float *w, const float *dy, float *dx,
                               float *dw, float *db, int rows, int in, int out_local, MPI_Comm comm)
{
    /*
     * TODO: overlapped backward.
     *   col_linear_backward's results (dw, db +=; dx summed) with the kit's two products and
     *   exactly one MPI_Iallreduce of dx's rows*in floats, in flight during xt_tp_weight_grad.
     */
    // BEGIN SOLUTION
    MPI_Request req;
    xt_tp_input_grad(dx, dy, w, rows, in, out_local);
    MPI_Iallreduce(MPI_IN_PLACE, dx, rows * in, MPI_FLOAT, MPI_SUM, comm, &req);
    xt_tp_weight_grad(dw, db, dy, x, rows, in, out_local);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/tp_async_linear.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
