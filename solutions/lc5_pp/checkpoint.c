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
    // BEGIN SOLUTION
    int widest = 1;
    for (int k = 0; k < nseg; k++) {
        int in = xt_stage_in(segments[k]), out = xt_stage_out(segments[k]);
        widest = in > widest ? in : widest;
        widest = out > widest ? out : widest;
    }
    size_t most = sizeof(float) * (size_t)rows * (size_t)widest + 1;
    float *y = malloc(most), *dy = malloc(most), *dx = malloc(most);
    float **saved = malloc(sizeof(float *) * (size_t)nseg);
    size_t x_bytes = sizeof(float) * (size_t)rows * (size_t)xt_stage_in(segments[0]);
    saved[0] = xt_alloc(XT_MEM_ACTIVATIONS, x_bytes);
    memcpy(saved[0], x, x_bytes);
    for (int k = 0; k < nseg; k++) {
        float *out = y; /* the last segment's output is not kept */
        if (k + 1 < nseg)
            out = saved[k + 1] =
                xt_alloc(XT_MEM_ACTIVATIONS,
                         sizeof(float) * (size_t)rows * (size_t)xt_stage_out(segments[k]));
        xt_stage_infer(segments[k], saved[k], rows, out);
    }
    float loss = 0.0f;
    for (int k = nseg - 1; k >= 0; k--) {
        xt_stage_forward(segments[k], 0, saved[k], rows, y);
        if (k == nseg - 1)
            loss = xt_stage_loss(segments[k], 0, target, 1.0f);
        xt_stage_backward(segments[k], 0, k == nseg - 1 ? NULL : dy, k > 0 ? dx : NULL);
        xt_free(saved[k]);
        float *t = dy; /* segment k's dx is segment k-1's dy */
        dy = dx;
        dx = t;
    }
    free(saved);
    free(y);
    free(dy);
    free(dx);
    return loss;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/checkpoint.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
