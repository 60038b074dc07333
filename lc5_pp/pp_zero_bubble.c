/*
 * pp_zero_bubble.c: ZB-H1, 1F1B with each backward split in two and the
 * weight part deferred into the bubbles. docs/lc5_pp.md#pp_zero_bubble
 *
 * A backward is two jobs. I, the input gradient dx (the paper's B), is what
 * the previous stage waits for: it is on the pipeline's critical path. W, the
 * weight gradient, is wanted by nobody until the optimizer step. ZB-H1 (Qi et
 * al., "Zero Bubble Pipeline Parallelism", ICLR 2024) keeps 1F1B's order with
 * each backward's I in its place, sends each I's dx on at once, and lets rank
 * r hold back its first r W's, running one W after each later I (oldest
 * first); the W's still held back end the step, where 1F1B's later stages
 * sat idle:
 *
 *     r0  F0 F1 F2 F3 .  .  .  I0 W0 F4 I1 W1 F5 I2 W2 I3 W3 I4 W4 I5 W5
 *     r1  .  F0 F1 F2 .  .  I0 F3 I1 W0 F4 I2 W1 F5 I3 W2 I4 W3 I5 W4 W5
 *     r2  .  .  F0 F1 .  I0 F2 I1 F3 I2 W0 F4 I3 W1 F5 I4 W2 I5 W3 W4 W5
 *     r3  .  .  .  F0 I0 F1 I1 F2 I2 F3 I3 W0 F4 I4 W1 F5 I5 W2 W3 W4 W5
 *
 * (p = 4, M = 6, one unit each: make demo EX=pp_zero_bubble draws it). With
 * F a forward, B a whole backward (2 units, I + W) and W its weight part,
 * each rank idles (p-1)(F+B-2W) = p-1 units of a step of 3M + p-1, against 1F1B's
 * (p-1)(F+B) = 3(p-1): a third of the bubble, for free. The memory is
 * 1F1B's: a micro-batch is in flight from its forward to its W, at most
 * min(p, M) on every rank, which is 1F1B's peak (its first rank's).
 *
 * Cost per step: GPipe's and 1F1B's messages, in another order: rank r sends
 * M activations forward (mb_rows x its output width floats each, r < p-1)
 * and M input gradients back (mb_rows x its input width, r > 0): 2(p-1)M
 * messages in the whole pipeline. A W sends nothing.
 */
#include "kit.h" /* the lecture's kit: the pipeline stage, the case set-up and demo */
#include "xt_nn.h"

#include <stdlib.h>

float pp_zero_bubble_step(xt_stage *stage, const float *x, const float *target, int mb_rows, int M,
                          MPI_Comm comm)
{
    /*
     * TODO: the ZB-H1 schedule: I at once, W deferred.
     *   Graded: rank r's stage calls are exactly ZB-H1's: min(np-r-1, M) forwards; then per
     *   micro-batch F, I (xt_stage_backward_input) and, once r W's are held back, one W
     *   (xt_stage_backward_weight, oldest first); after the last F each I is followed by
     *   one W; the W's still held back end the step. Every W runs, each after its I; each
     *   I's dx goes to rank r-1 before the next stage call. As pp_gpipe_step: x on rank 0,
     *   target on rank np-1, micro-batch m being rows m*mb_rows.. of both; one MPI_FLOAT
     *   message per micro-batch each way between neighbours on comm, in strict send mode;
     *   returns the mean loss on rank np-1; the stage's grads +=.
     */
    XT_TODO("the ZB-H1 schedule: I at once, W deferred.", stage, x, target, mb_rows, M, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_zero_bubble.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
