/*
 * checkpoint.c: activation recomputation (checkpointing): a step that keeps
 * only each segment's input through the forward and computes the rest again
 * when the backward needs it. docs/lc5_pp.md#checkpoint
 *
 * The model's layers are cut into nseg consecutive segments. The forward
 * runs every segment keeping nothing but a copy of its input (the
 * checkpoint); the backward takes the segments last first, recomputes the
 * segment from its checkpoint, this time keeping its activations, and
 * backpropagates through it at once:
 *
 *     forward   N0 N1 N2                  keeps x0, x1, x2 (the inputs)
 *     backward           F2 B2 F1 B1 F0 B0   F: recompute, B: backward
 *
 *     kept      x0 x1 x2 + one segment's activations at a time
 *
 * Memory: the saved inputs (one layer's width each) plus one segment's
 * activations, instead of every layer's. With L equal layers in s segments
 * that is about s + L/s layers' worth, least at s = sqrt(L). The price is
 * one more forward of every segment: about a third more compute per step
 * (a backward costs about two forwards).
 *
 * One process: no messages.
 */
#include "kit.h" /* the lecture's kit: the pipeline stage, the case set-up and demo */
#include "xt_nn.h"

#include <stdlib.h>
#include <string.h>

float checkpoint_step(xt_stage **segments, int nseg, const float *x, const float *target, int rows)
{
    /*
     * TODO: keep only segment inputs; recompute in backward.
     *   segments[k] holds the k-th run of the model's layers, in order; x is segment 0's
     *   input, target the last's (rows rows each). Forward: every segment by xt_stage_infer
     *   (it keeps nothing), each segment's input copied into xt_alloc(XT_MEM_ACTIVATIONS)
     *   memory. Backward, last segment first: xt_stage_forward (micro-batch 0) from that
     *   copy, the loss on the last (scale 1), xt_stage_backward, then the copy xt_free'd.
     *   Graded: the gradients and the loss (returned); every segment forwarded exactly
     *   twice; the peak of XT_MEM_ACTIVATIONS at most the copies + what one segment keeps
     *   (docs), none left at the end. Buffers that only pass an output or a gradient on
     *   are not counted: malloc them.
     */
    XT_TODO("keep only segment inputs; recompute in backward.", segments, nseg, x, target, rows);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/checkpoint.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
