/*
 * adam_zero2.c: ZeRO stage 2, gradients sharded too.
 * docs/lc3_zero.md#adam_zero2
 *
 * After stage 1 a rank updates only its shard, yet it still receives, and
 * keeps, the averaged gradient of the whole model. A reduce-scatter gives
 * each rank the sum of just its own shard: half an all-reduce's traffic
 * (an all-reduce *is* a reduce-scatter followed by an all-gather), and only
 * a shard to keep. Stage 2 reduce-scatters each layer's gradient as soon as
 * backward has produced it, into the owners' shards, and reuses one
 * layer-sized buffer for the next layer:
 *
 *     layer l's gradient, flat [off, off + n), cut where the shards are cut:
 *
 *        shards  | r0 ........ | r1 ........ | r2 ........ | r3 ...  |
 *        layer l         [=====|=============|===]
 *        counts      r0: 5       r1: 13        r2: 4        r3: 0
 *
 *     MPI_Reduce_scatter(layer_grad, own part, counts): rank r receives the
 *     sum over ranks of its counts[r] elements, at the right place of its
 *     gradient shard. A layer may give a rank nothing (counts[r] = 0).
 *
 * Memory per rank: weights 4 np shard (padded), gradients 4 shard + one
 * layer's 4 n, moments 8 shard. Cost per step: one reduce-scatter per layer,
 * 4 PHI bytes in all (((np-1)/np) of them sent with a ring), plus the
 * all-gather of stage 1: 2 PHI floats, as plain data parallelism.
 */
#include "xt_nn.h"

#include <string.h>

typedef struct {
    long shard;        /* ceil(nparams / np): each rank's share, padding included */
    long lo, count;    /* this rank updates parameters [lo, lo + count) */
    long step;         /* Adam steps taken */
    float *m, *v;      /* Adam's moments for the own shard (XT_MEM_OPTIMIZER) */
    float *grad;       /* the own shard's summed gradient (XT_MEM_GRADS) */
    float *layer_grad; /* one layer's full gradient, reused layer after layer (XT_MEM_GRADS) */
    int *counts;       /* per rank: how much of a layer's gradient it owns (XT_MEM_COMM) */
} zero2;

/* The shards, padded parameters broadcast from rank 0, and the sharded buffers. */
void zero2_init(zero2 *z, xt_mlp *m, MPI_Comm comm)
{
    /*
     * TODO: as zero1_init, and drop the full gradient buffer.
     *   The layout, padding, broadcast and moments of zero1_init; z->step = 0. No full gradient
     *   buffer may remain (m->grads counts as XT_MEM_GRADS): during the steps a rank's gradients
     *   peak between 4 count + 4 L and 4 shard + 4 L B, L = the largest layer's W and b count.
     *   So z->grad (the own shard's sums) and z->layer_grad (one layer, reused) are all of it,
     *   both xt_alloc(XT_MEM_GRADS) (malloc is not counted). z->counts: np ints, XT_MEM_COMM.
     */
    XT_TODO("as zero1_init, and drop the full gradient buffer.", z, m, comm);
}

/* One ZeRO-2 AdamW step on this rank's `rows` samples. Returns this rank's loss. */
float zero2_step(zero2 *z, xt_mlp *m, const float *x, const void *target, int rows,
                 const xt_adam *h, MPI_Comm comm)
{
    /*
     * TODO: reduce-scatter layer by layer, then update.
     *   No all-reduce of any kind (MPI_Allreduce, MPI_Iallreduce, MPI_Reduce, MPI_Ireduce: a
     *   RULE). The gradients reach their owners through reduce-scatters (MPI_Reduce_scatter,
     *   _block or nonblocking) whose inputs total exactly 4 nparams B per step: every gradient
     *   once, no padding. Then one all-gather per step, as in zero1_step. Gradient memory stays
     *   within the own shard and one layer (4 shard + 4 L B). Graded as zero1: identical
     *   weights, full-batch AdamW within 1e-5 (1 + |w|). Returns this rank's own loss.
     */
    XT_TODO("reduce-scatter layer by layer, then update.", z, m, x, target, rows, h, comm);
}

void zero2_free(zero2 *z)
{
    xt_free(z->m);
    xt_free(z->v);
    xt_free(z->grad);
    xt_free(z->layer_grad);
    xt_free(z->counts);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc3_zero/drivers/adam_zero2.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
