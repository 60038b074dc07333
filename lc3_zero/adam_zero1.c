/*
 * adam_zero1.c: ZeRO stage 1, the optimizer state sharded.
 * docs/lc3_zero.md#adam_zero1
 *
 * Adam's moments are 8 of the 16 bytes every data-parallel rank keeps per
 * parameter, and each rank only ever needs them to update the parameters it
 * updates. So cut the flat parameter buffer into np equal shards, let rank r
 * update only shard r, with moments for that shard only, and all-gather the
 * updated shards so that every rank has the whole new model again:
 *
 *     flat params, PHI = 10, np = 4: shard = ceil(10 / 4) = 3, padded to 12
 *
 *       | r0: 0 1 2 | r1: 3 4 5 | r2: 6 7 8 | r3: 9 . . |
 *                                                   ^ padding, never updated
 *
 *     1. forward, backward: full gradients on every rank (as in DP)
 *     2. all-reduce the gradients, average             (4 PHI bytes in)
 *     3. rank r: Adam on its shard, its moments only   (8 PHI/np bytes kept)
 *     4. all-gather the shards into the padded buffer  (4 shard bytes in)
 *
 * The all-gather needs equal blocks, hence the padding: np * shard floats
 * hold the parameters, the last rank's shard runs past PHI (or lies wholly
 * past it when np is large) and its tail is never updated.
 *
 * Memory per rank: weights 4 np shard (padded), gradients 4 PHI, moments
 * 8 shard. Cost per step: the all-reduce (2 (np-1)/np 4 PHI bytes sent with
 * a ring) plus the all-gather ((np-1)/np 4 np shard): 3 PHI floats against
 * DP's 2. Stage 2 gets back to DP's 2 by reduce-scattering instead.
 */
#include "xt_nn.h"

typedef struct {
    long shard;     /* ceil(nparams / np): each rank's share, padding included */
    long lo, count; /* this rank updates parameters [lo, lo + count) */
    long step;      /* Adam steps taken */
    float *m, *v;   /* Adam's moments for the own shard (XT_MEM_OPTIMIZER) */
} zero1;

/* Shards, padded parameters, rank 0's weights everywhere, moments for the own shard. */
void zero1_init(zero1 *z, xt_mlp *m, MPI_Comm comm)
{
    /*
     * TODO: lay out the shards, then set up this rank's state.
     *   shard = ceil(nparams / np); rank r owns [r shard, (r+1) shard) clipped to nparams (count
     *   may be 0). m->params padded to np shard floats (weights <= 4 np shard B), rank 0's weights
     *   on every rank, moments for the own shard only: XT_MEM_OPTIMIZER, 8 count..8 shard B.
     */
    XT_TODO("lay out the shards, then set up this rank's state.", z, m, comm);
}

/* One ZeRO-1 AdamW step on this rank's `rows` samples. Returns this rank's loss. */
float zero1_step(zero1 *z, xt_mlp *m, const float *x, const void *target, int rows,
                 const xt_adam *h, MPI_Comm comm)
{
    /*
     * TODO: all-reduce, update the own shard, all-gather.
     *   Per step exactly one all-reduce of all 4 nparams gradient bytes and one all-gather
     *   (MPI_Allgather, MPI_Allgatherv or nonblocking) of the updated shards. Graded as
     *   distributed_adam: identical weights, full-batch AdamW within 1e-5 (1 + |w|).
     */
    XT_TODO("all-reduce, update the own shard, all-gather.", z, m, x, target, rows, h, comm);
}

void zero1_free(zero1 *z)
{
    xt_free(z->m);
    xt_free(z->v);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc3_zero/drivers/adam_zero1.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
