/*
 * pp_gpipe.c: GPipe, a pipeline over micro-batches: every forward, then
 * every backward. docs/lc5_pp.md#pp_gpipe
 *
 * The model's layers are cut into np stages, one per rank, in order; the
 * batch of M mb_rows rows is cut into M micro-batches. Rank 0 feeds them in
 * one after another, each stage passes its output to the next, and once the
 * last micro-batch's forward is done the gradients flow back the same way:
 *
 *     r0  F0 F1 F2 F3 .  .  .  .  .  .  .  .  .  B0 B1 B2 B3
 *     r1     F0 F1 F2 F3 .  .  .  .  .  .  B0 B1 B2 B3 .  .
 *     r2        F0 F1 F2 F3 .  .  .  B0 B1 B2 B3 .  .  .  .
 *     r3           F0 F1 F2 F3 B0 B1 B2 B3 .  .  .  .  .  .
 *
 * (a backward takes about twice a forward; make demo EX=pp_gpipe draws it to
 * scale). The dots are the bubble: with p stages each rank idles (p-1)(F+B)
 * of a step of (M+p-1)(F+B), a fraction (p-1)/(M+p-1) that more
 * micro-batches shrink. The price is memory: every stage keeps all M
 * micro-batches' activations until their backward.
 *
 * The loss is the mean over the whole batch: each micro-batch's loss is a
 * mean over its rows, so its gradient carries 1/M.
 *
 * Cost per step: rank r sends M activations forward (mb_rows x its output
 * width floats each, r < p-1) and M gradients back (mb_rows x its input
 * width, r > 0): 2(p-1)M messages in the whole pipeline.
 */
#include "kit.h" /* the lecture's kit: the pipeline stage, the case set-up and demo */
#include "xt_nn.h"

#include <stdlib.h>

float pp_gpipe_step(xt_stage *stage, const float *x, const float *target, int mb_rows, int M,
                    MPI_Comm comm)
{
    /*
     * TODO: every forward, then every backward.
     *   Micro-batches in order 0..M-1 both times. Rank r is stage r of np; x (M*mb_rows
     *   rows) is on rank 0, target on rank np-1, micro-batch m being rows m*mb_rows.. of
     *   both. Point-to-point MPI_FLOAT messages on comm between neighbours only, one per
     *   micro-batch each way. Returns the batch's mean loss on rank np-1 (anything
     *   elsewhere); the stage's grads += the gradient of that mean.
     */
    XT_TODO("every forward, then every backward.", stage, x, target, mb_rows, M, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_gpipe.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
