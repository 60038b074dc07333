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
    XT_TODO("the layers stage `rank` of np holds.", nlayers, np, rank, first, count);
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
    XT_TODO("the batch forward down the pipeline, then back.", stage, x, target, rows, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_basic.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
