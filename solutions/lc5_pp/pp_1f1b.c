/*
 * pp_1f1b.c: 1F1B (one forward, one backward), GPipe's pipeline with each
 * backward run as soon as it can, so that few micro-batches wait in memory.
 * docs/lc5_pp.md#pp_1f1b
 *
 * Rank r is stage r of p. It runs a warm-up of w = min(p-r-1, M) forwards,
 * then M-w times one forward and one backward, then the w backwards left;
 * micro-batches in order 0..M-1 both ways. Drawn with a backward as long as a
 * forward (make demo EX=pp_1f1b draws it to scale):
 *
 *     r0  F0 F1 F2 F3 .  .  .  B0 F4 B1 F5 B2 .  B3 .  B4 .  B5
 *     r1  .  F0 F1 F2 .  .  B0 F3 B1 F4 B2 F5 B3 .  B4 .  B5 .
 *     r2  .  .  F0 F1 .  B0 F2 B1 F3 B2 F4 B3 F5 B4 .  B5 .  .
 *     r3  .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 .  .  .
 *
 * The bubble is GPipe's: each rank still idles (p-1)(F+B) of (M+p-1)(F+B),
 * a fraction (p-1)/(M+p-1), because the first backward cannot start before
 * the last stage has the first forward. What changes is memory: rank r never
 * holds more than min(p-r, M) micro-batches' activations (p on rank 0, one on
 * the last), however large M is, where GPipe holds M.
 *
 * In the steady phase both neighbours send at once: rank r has an activation
 * for r+1 and waits for a gradient from it, while r+1 has that gradient for r
 * and waits for r's next activation. Two blocking sends there wait for each
 * other for ever (they do here: every graded case makes MPI_Send
 * synchronous), so each such pair is one MPI_Sendrecv.
 *
 * Cost per step: GPipe's messages in another order: rank r sends M
 * activations forward (mb_rows x its output width floats each, r < p-1) and M
 * gradients back (mb_rows x its input width, r > 0): 2(p-1)M messages in the
 * whole pipeline.
 */
#include "kit.h" /* the lecture's kit: the pipeline stage, the case set-up and demo */
#include "xt_nn.h"

#include <stdlib.h>

float pp_1f1b_step(xt_stage *stage, const float *x, const float *target, int mb_rows, int M,
                   MPI_Comm comm)
{
    /*
     * TODO: one training step of the 1F1B schedule.
     *   Graded: rank r's stage calls exactly 1F1B's: min(np-r-1, M) forwards, then one
     *   forward and one backward at a time, then the backwards left, micro-batches in order
     *   both ways; at most min(np-r, M) in flight. Rank r is stage r of np; x (M*mb_rows
     *   rows) is on rank 0, target on rank np-1, micro-batch m being rows m*mb_rows.. of
     *   both. Point-to-point MPI_FLOAT messages on comm between neighbours only, one per
     *   micro-batch each way. Returns the batch's mean loss on rank np-1 (anything
     *   elsewhere); the stage's grads += the gradient of that mean.
     *   MPI_Send is synchronous when graded: where two neighbours send to each other at
     *   once, pair each send with its receive (MPI_Sendrecv, or nonblocking calls).
     */
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int nin = mb_rows * xt_stage_in(stage), nout = mb_rows * xt_stage_out(stage);
    int last = rank == np - 1;
    /* xin: a forward's input from rank-1; dx: a backward's gradient for it. y and dy the same
     * towards rank+1. MPI_Sendrecv needs its two buffers apart. */
    float *xin = malloc(sizeof(float) * (2 * (size_t)nin + 2 * (size_t)nout) + 1);
    float *dx = xin + nin, *y = dx + nin, *dy = y + nout;
    int w = np - rank - 1 < M ? np - rank - 1 : M;
    float loss = 0.0f;
    for (int m = 0; m < w; m++) { /* warm-up: w > 0 only before the last rank */
        if (rank > 0)
            MPI_Recv(xin, nin, MPI_FLOAT, rank - 1, m, comm, MPI_STATUS_IGNORE);
        xt_stage_forward(stage, m, rank > 0 ? xin : x + (size_t)m * nin, mb_rows, y);
        MPI_Send(y, nout, MPI_FLOAT, rank + 1, m, comm);
    }
    if (rank > 0 && w < M)
        MPI_Recv(xin, nin, MPI_FLOAT, rank - 1, w, comm, MPI_STATUS_IGNORE);
    for (int b = 0; b < M - w; b++) { /* steady: forward f, backward b */
        int f = w + b;
        xt_stage_forward(stage, f, rank > 0 ? xin : x + (size_t)f * nin, mb_rows, y);
        if (last)
            loss += xt_stage_loss(stage, f, target + (size_t)f * nout, 1.0f / M);
        else /* f's activation out, b's gradient in: rank+1 sends it while it waits for f */
            MPI_Sendrecv(y, nout, MPI_FLOAT, rank + 1, f, dy, nout, MPI_FLOAT, rank + 1, b, comm,
                         MPI_STATUS_IGNORE);
        xt_stage_backward(stage, b, last ? NULL : dy, rank > 0 ? dx : NULL);
        if (rank > 0 && f + 1 < M) /* b's gradient back, the next forward's input in */
            MPI_Sendrecv(dx, nin, MPI_FLOAT, rank - 1, b, xin, nin, MPI_FLOAT, rank - 1, f + 1,
                         comm, MPI_STATUS_IGNORE);
        else if (rank > 0)
            MPI_Send(dx, nin, MPI_FLOAT, rank - 1, b, comm);
    }
    for (int b = M - w; b < M; b++) { /* cool-down: the w backwards left */
        MPI_Recv(dy, nout, MPI_FLOAT, rank + 1, b, comm, MPI_STATUS_IGNORE);
        xt_stage_backward(stage, b, dy, rank > 0 ? dx : NULL);
        if (rank > 0)
            MPI_Send(dx, nin, MPI_FLOAT, rank - 1, b, comm);
    }
    free(xin);
    return loss / M;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_1f1b.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
