/*
 * pp_interleaved.c: Megatron's interleaved 1F1B: each rank holds v model
 * chunks, and the micro-batches go round the ranks v times. docs/lc5_pp.md#pp_interleaved
 *
 * The model's layers are cut into v np stages; rank r holds v of them,
 * stages r, r + np, r + 2 np, ... (its chunks 0, 1, ..., v-1). A micro-batch
 * runs through rank 0, 1, ..., np-1 on chunk 0, comes back to rank 0 for
 * chunk 1, and so on: the last rank sends to rank 0 between rounds.
 *
 * Megatron's order counts "virtual micro-batches" k = 0 .. M v - 1: groups of
 * np micro-batches go through chunk 0, then the same group through chunk 1,
 * ...; the backward takes the chunks the other way (chunk v-1 first). Rank r
 * runs 2 (np-r-1) + (v-1) np forwards first (every forward when M = np),
 * then one forward and one backward at a time, then the backwards left.
 * With np = 2, v = 2, M = 4 (upper case chunk 0, lower case chunk 1; a chunk
 * is half a stage, so a chunk's forward is 1 unit and its backward 2):
 *
 *     r0  F0F1f0f1F2 .b0--F3b1--f2B0--f3B1-- .b2-- .b3--B2--B3--
 *     r1   .F0F1f0b0--f1b1--F2B0--F3B1--f2b2--f3b3--B2--B3-- . .
 *
 * Each rank idles (np-1)(F+B) of a chunk, v times less than 1F1B's (np-1)
 * (F+B) of a whole stage: a bubble (np-1)/(v M + np-1) of the step. The price
 * is messages: each of the v np - 1 stage boundaries carries one activation
 * forward and one gradient back per micro-batch, 2 (v np - 1) M messages in
 * the pipeline, about v times 1F1B's 2 (np-1) M. Megatron needs M to be a
 * multiple of np (the groups of np); this program stops otherwise.
 *
 * The loss is the mean over the whole batch: each micro-batch's loss gradient
 * carries 1/M. At np = 1 every boundary is inside the rank: a local copy.
 */
#include "kit.h" /* the lecture's kit: the pipeline stage, the case set-up and demo */
#include "xt_nn.h"

#include <stdlib.h>
#include <string.h>

// BEGIN SOLUTION
/*
 * Virtual micro-batch k runs micro-batch (k / (np v)) np + k % np, on chunk
 * (k % (np v)) / np forward and on chunk v-1 minus that backward. Each
 * direction (d = 0: activations into a forward, d = 1: gradients into a
 * backward) has one receive posted ahead, for the next op that takes a
 * message, into box[d]; blocking sends then always find their receive posted
 * once the receiver has finished its previous op of that direction.
 */
typedef struct {
    xt_stage **chunks;
    int np, rank, v, M, rows;
    MPI_Comm comm;
    float *box[2];      /* the next activation (0) and gradient (1) in */
    MPI_Request req[2]; /* their receives */
} ilv;

static int ilv_mb(const ilv *p, int k)
{
    return k / (p->np * p->v) * p->np + k % p->np;
}

static int ilv_chunk(const ilv *p, int k, int d)
{
    int c = k % (p->np * p->v) / p->np;
    return d == 0 ? c : p->v - 1 - c;
}

static int ilv_stage(const ilv *p, int k, int d)
{
    return ilv_chunk(p, k, d) * p->np + p->rank;
}

/* Micro-batch mb's message into stage s, in direction d. */
static int ilv_tag(const ilv *p, int mb, int s, int d)
{
    return (mb * p->v * p->np + s) * 2 + d;
}

/* Posts the receive of the first op from k on, in direction d, that takes a message: a
 * forward but on stage 0, a backward but on the last stage. At np = 1 none: the previous
 * op of that direction copies its output into box[d]. */
static void ilv_post(ilv *p, int k, int d)
{
    int last = p->v * p->np - 1;
    for (; p->np > 1 && k < p->M * p->v; k++) {
        int s = ilv_stage(p, k, d);
        if (s == (d == 0 ? 0 : last))
            continue;
        xt_stage *st = p->chunks[ilv_chunk(p, k, d)];
        int width = d == 0 ? xt_stage_in(st) : xt_stage_out(st);
        int from = (d == 0 ? s - 1 : s + 1) % p->np;
        MPI_Irecv(p->box[d], p->rows * width, MPI_FLOAT, from, ilv_tag(p, ilv_mb(p, k), s, d),
                  p->comm, &p->req[d]);
        return;
    }
}

/* Forward of virtual micro-batch k; returns its loss on the last stage, else 0. */
static float ilv_forward(ilv *p, int k, const float *x, const float *target, float *y)
{
    int c = ilv_chunk(p, k, 0), s = ilv_stage(p, k, 0), mb = ilv_mb(p, k);
    int in = xt_stage_in(p->chunks[c]), out = xt_stage_out(p->chunks[c]);
    if (s > 0 && p->np > 1)
        MPI_Wait(&p->req[0], MPI_STATUS_IGNORE);
    xt_stage_forward(p->chunks[c], mb, s == 0 ? x + (size_t)mb * p->rows * in : p->box[0], p->rows,
                     y);
    if (s > 0)
        ilv_post(p, k + 1, 0); /* box[0] is free again */
    if (s == p->v * p->np - 1)
        return xt_stage_loss(p->chunks[c], mb, target + (size_t)mb * p->rows * out, 1.0f / p->M);
    if (p->np == 1)
        memcpy(p->box[0], y, sizeof(float) * (size_t)p->rows * out);
    else
        MPI_Send(y, p->rows * out, MPI_FLOAT, (s + 1) % p->np, ilv_tag(p, mb, s + 1, 0), p->comm);
    return 0.0f;
}

/* Backward of virtual micro-batch k. */
static void ilv_backward(ilv *p, int k, float *dx)
{
    int c = ilv_chunk(p, k, 1), s = ilv_stage(p, k, 1), mb = ilv_mb(p, k);
    int last = s == p->v * p->np - 1, in = xt_stage_in(p->chunks[c]);
    if (!last && p->np > 1)
        MPI_Wait(&p->req[1], MPI_STATUS_IGNORE);
    xt_stage_backward(p->chunks[c], mb, last ? NULL : p->box[1], s > 0 ? dx : NULL);
    if (!last)
        ilv_post(p, k + 1, 1); /* box[1] is free again */
    if (s == 0)
        return;
    if (p->np == 1)
        memcpy(p->box[1], dx, sizeof(float) * (size_t)p->rows * in);
    else
        MPI_Send(dx, p->rows * in, MPI_FLOAT, (s - 1) % p->np, ilv_tag(p, mb, s - 1, 1), p->comm);
}
// END SOLUTION

float pp_interleaved_step(xt_stage **chunks, int v, const float *x, const float *target,
                          int mb_rows, int M, MPI_Comm comm)
{
    /*
     * TODO: interleaved 1F1B over v chunks.
     *   Chunk k is stage k*np + r of v*np; x (M*mb_rows rows) is on rank 0, target on rank
     *   np-1, micro-batch m being rows m*mb_rows.. of both. Stop with XT_CHECK, naming M and
     *   np, unless np divides M. The stage calls are exactly Megatron's order (docs:
     *   pp_interleaved): virtual micro-batch k is micro-batch (k/(np v)) np + k%np on chunk
     *   (k%(np v))/np forward, v-1 minus that backward; warm-up 2(np-r-1) + (v-1)np
     *   forwards, all M v when M = np, then one forward and one backward at a time.
     *   Point-to-point MPI_FLOAT messages on comm, one per micro-batch and stage boundary
     *   each way; a boundary inside the rank (np = 1) is a copy, not a message. MPI_Send is
     *   synchronous when graded: a naive blocking exchange deadlocks. Returns the batch's
     *   mean loss on rank np-1 (anything elsewhere); each chunk's grads += its gradient.
     */
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(M % np == 0,
             "interleaved 1F1B runs the micro-batches in groups of np: M = %d is not a "
             "multiple of np = %d",
             M, np);
    int width = 1;
    for (int c = 0; c < v; c++) {
        width = xt_stage_in(chunks[c]) > width ? xt_stage_in(chunks[c]) : width;
        width = xt_stage_out(chunks[c]) > width ? xt_stage_out(chunks[c]) : width;
    }
    size_t bytes = sizeof(float) * (size_t)mb_rows * (size_t)width;
    ilv p = {
        .chunks = chunks, .np = np, .rank = rank, .v = v, .M = M, .rows = mb_rows, .comm = comm};
    p.box[0] = malloc(bytes);
    p.box[1] = malloc(bytes);
    p.req[0] = p.req[1] = MPI_REQUEST_NULL;
    float *out = malloc(bytes);
    XT_CHECK(p.box[0] && p.box[1] && out, "out of memory for %zu B buffers", bytes);
    int total = M * v;
    int warmup = M == np ? total : 2 * (np - rank - 1) + (v - 1) * np;
    warmup = warmup < total ? warmup : total;
    float loss = 0.0f;
    ilv_post(&p, 0, 0);
    ilv_post(&p, 0, 1);
    for (int k = 0; k < warmup; k++)
        loss += ilv_forward(&p, k, x, target, out);
    for (int k = 0; k < total - warmup; k++) {
        loss += ilv_forward(&p, warmup + k, x, target, out);
        ilv_backward(&p, k, out);
    }
    for (int k = total - warmup; k < total; k++)
        ilv_backward(&p, k, out);
    free(p.box[0]);
    free(p.box[1]);
    free(out);
    return loss / M;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_interleaved.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
