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
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int in = xt_stage_in(stage), out = xt_stage_out(stage);
    float *recv = malloc(sizeof(float) * (size_t)mb_rows * (size_t)in + 1);
    float *y = malloc(sizeof(float) * (size_t)mb_rows * (size_t)out + 1);
    float loss = 0.0f;
    for (int m = 0; m < M; m++) {
        const float *xm = x ? x + (size_t)m * mb_rows * in : recv;
        if (rank > 0)
            MPI_Recv(recv, mb_rows * in, MPI_FLOAT, rank - 1, m, comm, MPI_STATUS_IGNORE);
        xt_stage_forward(stage, m, xm, mb_rows, y);
        if (rank < np - 1)
            MPI_Send(y, mb_rows * out, MPI_FLOAT, rank + 1, m, comm);
        else
            loss += xt_stage_loss(stage, m, target + (size_t)m * mb_rows * out, 1.0f / M);
    }
    /* Backward: y now receives dy from the next stage, recv holds dx for the previous. */
    for (int m = 0; m < M; m++) {
        if (rank < np - 1)
            MPI_Recv(y, mb_rows * out, MPI_FLOAT, rank + 1, m, comm, MPI_STATUS_IGNORE);
        xt_stage_backward(stage, m, rank < np - 1 ? y : NULL, rank > 0 ? recv : NULL);
        if (rank > 0)
            MPI_Send(recv, mb_rows * in, MPI_FLOAT, rank - 1, m, comm);
    }
    free(recv);
    free(y);
    return loss / M;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_gpipe.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
