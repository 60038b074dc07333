/*
 * pp_basic.c: the simplest pipeline: the model's layers cut into np stages,
 * one batch passed down through them and its gradient passed back up.
 * docs/lc5_pp.md#pp_basic
 *
 * Rank r holds stage r: a run of consecutive layers, the first L % np stages
 * one layer more (pp_layers). The batch enters at rank 0; each stage receives
 * its input from the stage before, runs its layers and sends the output on;
 * the last stage takes the loss. The backward runs the same path in reverse:
 *
 *     r0  F . . . . . B
 *     r1    F . . . B
 *     r2      F . B            F: forward of the whole batch, B: backward
 *     r3        F B            (a backward takes about twice a forward)
 *
 * One stage works at a time: with p stages every rank idles (p-1)(F+B) of a
 * step of p(F+B), a bubble of (p-1)/p. Micro-batches (pp_gpipe) fill it.
 * What pipelining buys here is memory: each rank holds 1/p of the weights.
 *
 * Cost per step: rank r sends one activation forward (rows x its output
 * width floats, r < p-1) and one gradient back (rows x its input width,
 * r > 0): 2(p-1) messages in the whole pipeline, independent of the layers
 * inside the stages.
 */
#include "kit.h" /* the lecture's kit: the pipeline stage, the case set-up and demo */
#include "xt_nn.h"

#include <stdint.h>
#include <stdlib.h>

void pp_layers(int nlayers, int np, int rank, int *first, int *count)
{
    /*
     * TODO: the layers stage `rank` of np holds.
     *   Consecutive runs in stage order, the first nlayers % np stages one layer more;
     *   1 <= np <= nlayers (a pipeline has no empty stage). xt_block is not allowed here.
     */
    // BEGIN SOLUTION
    int base = nlayers / np, extra = nlayers % np;
    *first = rank * base + (rank < extra ? rank : extra);
    *count = base + (rank < extra ? 1 : 0);
    // END SOLUTION
}

float pp_basic_step(xt_stage *stage, const float *x, const float *target, int rows, MPI_Comm comm)
{
    /*
     * TODO: the batch forward down the pipeline, then back.
     *   Rank r is stage r of np; x (rows x the stage's input width) is on rank 0, target on
     *   rank np-1. xt_stage_forward and xt_stage_backward of micro-batch 0, the loss with
     *   scale 1. Only point-to-point MPI_FLOAT messages on comm: one activation to rank r+1,
     *   one gradient to rank r-1. Returns the loss on rank np-1 (anything elsewhere); the
     *   stage's grads += their gradient.
     */
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int in = xt_stage_in(stage), out = xt_stage_out(stage);
    float *recv = malloc(sizeof(float) * (size_t)rows * in + 1);
    float *y = malloc(sizeof(float) * (size_t)rows * out + 1);
    float loss = 0.0f;
    if (rank > 0)
        MPI_Recv(recv, rows * in, MPI_FLOAT, rank - 1, 0, comm, MPI_STATUS_IGNORE);
    xt_stage_forward(stage, 0, rank > 0 ? recv : x, rows, y);
    if (rank < np - 1)
        MPI_Send(y, rows * out, MPI_FLOAT, rank + 1, 0, comm);
    else
        loss = xt_stage_loss(stage, 0, target, 1.0f);
    /* Backward: y now receives dy from the next stage, recv holds dx for the previous. */
    if (rank < np - 1)
        MPI_Recv(y, rows * out, MPI_FLOAT, rank + 1, 1, comm, MPI_STATUS_IGNORE);
    xt_stage_backward(stage, 0, rank < np - 1 ? y : NULL, rank > 0 ? recv : NULL);
    if (rank > 0)
        MPI_Send(recv, rows * in, MPI_FLOAT, rank - 1, 1, comm);
    free(recv);
    free(y);
    return loss;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_basic.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
