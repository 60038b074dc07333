/*
 * pp_dualpipe.c: DualPipe (DeepSeek-V3), one pipeline fed from both ends.
 * docs/lc5_pp.md#pp_dualpipe
 *
 * The model's layers are cut into p = np stages (np even) and every rank
 * holds two of them: chunk 0 is stage r, chunk 1 stage p-1-r, so each stage
 * exists twice. Micro-batches 0..M/2-1 enter at rank 0 and go down through
 * the chunks 0; M/2..M-1 enter at rank p-1 and go up through the chunks 1:
 *
 *           chunk 0 (down)  chunk 1 (up)
 *     r0    stage 0         stage 3        x in (first half); the second
 *     r1    stage 1         stage 2                 half's loss
 *     r2    stage 2         stage 1
 *     r3    stage 3         stage 0        x in (second half); the first
 *                                                   half's loss
 *
 * Every rank is near the start of one direction, so it has work from the
 * first units on, and the two directions fill each other's bubbles. The
 * order is DeepSeek's (dualpipe/dualpipe.py), in eight steps; replayed in
 * unit time (F = 1, B = 2, the split backward's parts I and W 1 each; upper
 * case chunk 0, lower case chunk 1, the digit the micro-batch), np = 4, M = 8:
 *
 *     r0  F0F1F2f4i4w4f5F3b5--f6B0--b6--f7 .B1--b7--I2W2I3W3
 *     r1   .F0f4F1f5F2b4--f6B0--F3b5--f7B1--b6--B2--i7I3w7W3
 *     r2   .f4F0f5F1f6B0--F2b4--f7B1--F3b5--B2--b6--I3i7W3w7
 *     r3  f4f5f6F0I0W0F1f7B1--F2b4--B2--F3 .b5--B3--i6w6i7w7
 *
 * Each rank idles p/2-1 units (1F1B: 3(p-1)), the least any schedule of
 * this layout can: the middle ranks wait that long for their first input.
 * The price is memory: twice the parameters, and p+1 micro-batches in flight
 * (1F1B: p on rank 0). On real hardware each forward of one direction runs
 * beside a backward of the other, hiding each other's communication
 * (expert parallelism's all-to-alls), which is what DualPipe is for.
 *
 * The two copies of a stage each saw half the batch: ranks r and p-1-r
 * exchange their chunks' gradients and add them, so that both copies hold the
 * whole batch's (and take the same optimizer step). The loss is a mean over
 * all M micro-batches (scale 1/M); ranks p-1 and 0, which hold the last stage
 * of each direction, exchange their halves' sums.
 *
 * Cost per step: per chunk M/2 activations to the next stage of its direction
 * and M/2 gradients back (mb_rows x the boundary's width floats each), 2(p-1)M
 * messages in the pipeline, as 1F1B; then one message each way per chunk
 * between r and p-1-r (the stage's parameter count in floats), and one float
 * each way between 0 and p-1.
 */
#include "kit.h" /* the lecture's kit: the pipeline stage, the case set-up and demo */
#include "xt_nn.h"

#include <stdlib.h>

float pp_dualpipe_step(xt_stage **chunks, const float *x, const float *target, int mb_rows, int M,
                       MPI_Comm comm)
{
    /*
     * TODO: DualPipe: two directions, copies summed.
     *   np even, M even, M >= 2 np; else stop with xt_die naming np and M. chunks[0] is stage r
     *   of np, chunks[1] stage np-1-r. Micro-batches 0..M/2-1 enter at rank 0 and go down
     *   through the chunks 0; M/2..M-1 enter at rank np-1 and go up through the chunks 1.
     *   x and target hold the whole batch on ranks 0 and np-1 (NULL elsewhere); micro-batch m
     *   is their rows m*mb_rows.., and every stage call is given m; the loss's scale is 1/M.
     *   Graded, from the stage calls replayed in unit time (F=1, B=2, I=W=1): every rank idles
     *   at most np/2-1 units and keeps at most np+1 micro-batches in flight. Messages,
     *   MPI_FLOAT point to point on comm: per chunk one activation on and one gradient back per
     *   micro-batch; then one message each way per chunk with rank np-1-r, which holds the
     *   other copy of its stages (both copies end with the whole batch's gradient, the sum);
     *   and ranks 0 and np-1 swap one float, their half's loss sum, both returning the batch's
     *   mean loss. Strict send mode: an MPI_Send returns only once it is received.
     */
    XT_TODO("DualPipe: two directions, copies summed.", chunks, x, target, mb_rows, M, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_dualpipe.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
