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

// BEGIN SOLUTION
/*
 * One step's state. Phase 0 is the direction whose start is nearer this rank (chunk 0 on
 * ranks below np/2, chunk 1 on the others), phase 1 the other one: chunk = phase ^ second.
 * Sends are nonblocking, each from a buffer of its own, completed at the end; receives
 * block until the data is needed. Nothing ever waits on a send, so the only waits are the
 * schedule's own data dependencies, which it runs in an order that can run.
 */
typedef struct {
    xt_stage **chunks;
    const float *x, *target;
    int rows, M, np, rank, second;
    MPI_Comm comm;
    int forwards[2], backwards[2]; /* per phase, so far */
    float *in[2], *dy[2];          /* per chunk: what arrives */
    float *out[2], *dx[2];         /* per chunk: what leaves, one slot per micro-batch */
    MPI_Request *sends;
    int nsends;
    int *deferred, head, tail; /* (chunk, micro-batch) of the weight parts not yet run */
    float loss;                /* the sum of this rank's micro-batches' losses */
} dual;

static int first_mb(const dual *d, int chunk)
{
    return chunk ? d->M / 2 : 0;
}

/* Chunk 0's micro-batches travel toward rank + 1, chunk 1's toward rank - 1. */
static int next_rank(const dual *d, int chunk)
{
    return chunk ? d->rank - 1 : d->rank + 1;
}

static int prev_rank(const dual *d, int chunk)
{
    return chunk ? d->rank + 1 : d->rank - 1;
}

/* Tags are micro-batch numbers: between two ranks, one direction's activations and the
 * other's gradients cross the same way, and their numbers never overlap. */
static void forward(dual *d, int phase)
{
    int c = phase ^ d->second, mb = first_mb(d, c) + d->forwards[phase]++;
    xt_stage *s = d->chunks[c];
    int in = xt_stage_in(s), out = xt_stage_out(s);
    const float *x = d->in[c];
    if (xt_stage_first(s) == 0)
        x = d->x + (size_t)mb * d->rows * in;
    else
        MPI_Recv(d->in[c], d->rows * in, MPI_FLOAT, prev_rank(d, c), mb, d->comm,
                 MPI_STATUS_IGNORE);
    float *y = d->out[c] + (size_t)(mb - first_mb(d, c)) * d->rows * out;
    xt_stage_forward(s, mb, x, d->rows, y);
    if (xt_stage_is_last(s))
        d->loss += xt_stage_loss(s, mb, d->target + (size_t)mb * d->rows * out, 1.0f / d->M);
    else
        MPI_Isend(y, d->rows * out, MPI_FLOAT, next_rank(d, c), mb, d->comm,
                  &d->sends[d->nsends++]);
}

/* split: only the input part, its weight part deferred (zero bubble). */
static void backward(dual *d, int phase, int split)
{
    int c = phase ^ d->second, mb = first_mb(d, c) + d->backwards[phase]++;
    xt_stage *s = d->chunks[c];
    int in = xt_stage_in(s), out = xt_stage_out(s);
    const float *dy = NULL;
    if (!xt_stage_is_last(s)) {
        MPI_Recv(d->dy[c], d->rows * out, MPI_FLOAT, next_rank(d, c), mb, d->comm,
                 MPI_STATUS_IGNORE);
        dy = d->dy[c];
    }
    float *dx = NULL;
    if (xt_stage_first(s) > 0)
        dx = d->dx[c] + (size_t)(mb - first_mb(d, c)) * d->rows * in;
    if (split) {
        xt_stage_backward_input(s, mb, dy, dx);
        d->deferred[2 * d->tail] = c;
        d->deferred[2 * d->tail + 1] = mb;
        d->tail++;
    } else {
        xt_stage_backward(s, mb, dy, dx);
    }
    if (dx)
        MPI_Isend(dx, d->rows * in, MPI_FLOAT, prev_rank(d, c), mb, d->comm,
                  &d->sends[d->nsends++]);
}

/* The oldest deferred weight part, whichever chunk it belongs to. */
static void weight(dual *d)
{
    int c = d->deferred[2 * d->head], mb = d->deferred[2 * d->head + 1];
    d->head++;
    xt_stage_backward_weight(d->chunks[c], mb);
}

/*
 * Both copies of each stage end with the sum of their gradients. The partner np-1-r holds
 * our chunk k's stage as its chunk 1-k: in exchange k both send their chunk k, so what
 * arrives belongs to our chunk 1-k. MPI_Sendrecv: both partners send at once.
 */
static void sum_copies(xt_stage **chunks, int partner, int tag, MPI_Comm comm)
{
    long n[2] = {xt_stage_nparams(chunks[0]), xt_stage_nparams(chunks[1])};
    float *theirs = malloc(sizeof(float) * (size_t)(n[0] + n[1]) + 1);
    XT_CHECK(theirs, "out of memory for the partner's gradients");
    float *into[2] = {theirs, theirs + n[0]};
    for (int k = 0; k < 2; k++)
        MPI_Sendrecv(xt_stage_grads(chunks[k]), (int)n[k], MPI_FLOAT, partner, tag, into[1 - k],
                     (int)n[1 - k], MPI_FLOAT, partner, tag, comm, MPI_STATUS_IGNORE);
    for (int c = 0; c < 2; c++) {
        float *g = xt_stage_grads(chunks[c]);
        for (long i = 0; i < n[c]; i++)
            g[i] += into[c][i];
    }
    free(theirs);
}
// END SOLUTION

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
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(np % 2 == 0 && M % 2 == 0 && M >= 2 * np,
             "DualPipe needs an even number of ranks and an even number of micro-batches, at "
             "least twice the ranks: np = %d, M = %d",
             np, M);
    dual d = {.chunks = chunks,
              .x = x,
              .target = target,
              .rows = mb_rows,
              .M = M,
              .np = np,
              .rank = rank,
              .second = rank >= np / 2,
              .comm = comm};
    for (int c = 0; c < 2; c++) {
        size_t in = (size_t)mb_rows * xt_stage_in(chunks[c]);
        size_t out = (size_t)mb_rows * xt_stage_out(chunks[c]);
        d.in[c] = malloc(sizeof(float) * in + 1);
        d.dy[c] = malloc(sizeof(float) * out + 1);
        d.out[c] = malloc(sizeof(float) * out * (size_t)(M / 2) + 1);
        d.dx[c] = malloc(sizeof(float) * in * (size_t)(M / 2) + 1);
        XT_CHECK(d.in[c] && d.dy[c] && d.out[c] && d.dx[c], "out of memory for the buffers");
    }
    d.sends = malloc(sizeof(MPI_Request) * (size_t)(2 * M));
    d.deferred = malloc(sizeof(int) * (size_t)(2 * M));
    XT_CHECK(d.sends && d.deferred, "out of memory for the requests");

    int half = np / 2, h = rank < half ? rank : np - 1 - rank;
    for (int i = 0; i < 2 * (half - h - 1); i++) /* 1: nF0 */
        forward(&d, 0);
    for (int i = 0; i < h + 1; i++) { /* 2: nF0F1 */
        forward(&d, 0);
        forward(&d, 1);
    }
    for (int i = 0; i < half - h - 1; i++) { /* 3: nB1W1F1 */
        backward(&d, 1, 1);
        weight(&d);
        forward(&d, 1);
    }
    for (int i = 0; i < M / 2 - np + h + 1; i++) { /* 4: the main loop, F0 B1 F1 B0 */
        forward(&d, 0);
        backward(&d, 1, 0);
        forward(&d, 1);
        backward(&d, 0, 0);
    }
    for (int i = 0; i < half - h - 1; i++) { /* 5: nB1F1B0 */
        backward(&d, 1, 0);
        forward(&d, 1);
        backward(&d, 0, 0);
    }
    int split = 0;
    for (int i = 0; i < h + 1; i++) { /* 6: nB1B0, the later half of them split */
        split |= i == (h + 1) / 2 && h % 2 == 1;
        backward(&d, 1, split);
        split |= i == (h + 1) / 2 && h % 2 == 0;
        backward(&d, 0, split);
    }
    for (int i = 0; i < half - h - 1; i++) { /* 7: nWB0 */
        weight(&d);
        backward(&d, 0, 1);
    }
    while (d.head < d.tail) /* 8: nW */
        weight(&d);
    MPI_Waitall(d.nsends, d.sends, MPI_STATUSES_IGNORE);

    sum_copies(chunks, np - 1 - rank, M, comm);
    float loss = d.loss;
    if (rank == 0 || rank == np - 1) {
        float other;
        MPI_Sendrecv(&d.loss, 1, MPI_FLOAT, np - 1 - rank, M + 1, &other, 1, MPI_FLOAT,
                     np - 1 - rank, M + 1, comm, MPI_STATUS_IGNORE);
        loss += other;
    }
    for (int c = 0; c < 2; c++) {
        free(d.in[c]);
        free(d.dy[c]);
        free(d.out[c]);
        free(d.dx[c]);
    }
    free(d.sends);
    free(d.deferred);
    return loss / M;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_dualpipe.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
