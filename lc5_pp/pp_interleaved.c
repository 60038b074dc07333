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
    XT_TODO("interleaved 1F1B over v chunks.", chunks, v, x, target, mb_rows, M, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_interleaved.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
