/*
 * adam_zero3.c: ZeRO stage 3, the parameters sharded as well.
 * docs/lc3_zero.md#adam_zero3
 *
 * After stage 2 every rank still holds the whole model, though between two
 * steps it only updates its shard. Stage 3 keeps only the shard, and builds
 * each layer's weights when a layer needs them, frees them right after:
 *
 *     forward:   gather W0 -> layer 0 -> free, gather W1 -> layer 1 -> free ...
 *     backward:  ... gather W1 -> layer 1 backward -> free, reduce-scatter dW1
 *                    gather W0 -> layer 0 backward -> free, reduce-scatter dW0
 *     update:    Adam on the own shard; nothing to gather afterwards
 *
 * A layer's weights are gathered twice per step, once for forward and once
 * for backward (which needs W to pass the gradient on): that is the price,
 * 3 PHI floats of traffic per step against stage 2's 2 PHI. The gain: no rank
 * ever holds more than its shard and the largest layer.
 *
 *     gathering layer l, flat [off, off + n):  rank r contributes the part of
 *     its shard inside the layer (counts[r] floats, maybe 0), placed at
 *     displs[r] = where that part starts - off: MPI_Allgatherv.
 *
 * Memory per rank: weights 4 shard + one layer's 4 n, gradients the same,
 * moments 8 shard. Cost per step: 2 all-gathers per layer (2 x 4 PHI bytes
 * received in all) and one reduce-scatter per layer (4 PHI bytes in).
 */
#include "xt_nn.h"

#include <string.h>

typedef struct {
    long shard;           /* ceil(nparams / np): each rank's share, padding included */
    long lo, count;       /* this rank owns parameters [lo, lo + count) */
    long step;            /* Adam steps taken */
    float *param;         /* the own shard of the weights (XT_MEM_PARAMS) */
    float *m, *v;         /* Adam's moments for it (XT_MEM_OPTIMIZER) */
    float *grad;          /* its summed gradient (XT_MEM_GRADS) */
    float *layer_grad;    /* one layer's full gradient, reused (XT_MEM_GRADS) */
    int *counts, *displs; /* per rank: its part of a layer (XT_MEM_COMM) */
} zero3;

/* Each rank keeps its shard of rank 0's weights; the full model is dropped. */
void zero3_init(zero3 *z, xt_mlp *m, MPI_Comm comm)
{
    /*
     * TODO: lay out the shards, hand them out, drop the full buffers.
     *   The layout of zero1_init (shard = ceil(nparams / np), lo, count; z->step = 0). z->param:
     *   this rank's shard of rank 0's weights, shard floats of XT_MEM_PARAMS. After init the model
     *   keeps no full buffer (m->params, m->grads): the peaks are reset after init, and during
     *   the steps a rank's weights and gradients must each peak between 4 count + 4 L and
     *   4 shard + 4 L B (L = the largest layer's W and b count), its moments between 8 count
     *   and 8 shard B; all through xt_alloc (malloc is not counted). z->counts, z->displs: np
     *   ints each, XT_MEM_COMM.
     */
    XT_TODO("lay out the shards, hand them out, drop the full buffers.", z, m, comm);
}

/* Layer l's full weights, gathered from the shards into a new buffer (XT_MEM_PARAMS). */
float *zero3_gather_layer(zero3 *z, xt_mlp *m, int l, MPI_Comm comm)
{
    /*
     * TODO: all-gather the layer from the shards that hold a part of it.
     *   Returns a new buffer of xt_mlp_layer_count(m, l) floats from xt_alloc(XT_MEM_PARAMS),
     *   filled by one all-gather call (2 nlayers per step are counted); the caller xt_frees it.
     */
    XT_TODO("all-gather the layer from the shards that hold a part of it.", z, m, l, comm);
}

/* One ZeRO-3 AdamW step on this rank's `rows` samples. Returns this rank's loss. */
float zero3_step(zero3 *z, xt_mlp *m, const float *x, const void *target, int rows,
                 const xt_adam *h, MPI_Comm comm)
{
    /*
     * TODO: gather each layer just in time, then update.
     *   Per step: exactly 2 nlayers all-gathers (each layer just before its forward and again
     *   just before its backward, none after the update); reduce-scatters of exactly 4 nparams
     *   gradient bytes; no all-reduce of any kind (MPI_Allreduce, MPI_Iallreduce, MPI_Reduce,
     *   MPI_Ireduce). One gathered layer at a time: weights peak at most 4 shard + 4 L B.
     *   Graded after every step: the shards put together equal full-batch AdamW on the global
     *   batch within 1e-5 (1 + |w|). Returns this rank's own loss.
     */
    XT_TODO("gather each layer just in time, then update.", z, m, x, target, rows, h, comm);
}

void zero3_free(zero3 *z)
{
    xt_free(z->param);
    xt_free(z->m);
    xt_free(z->v);
    xt_free(z->grad);
    xt_free(z->layer_grad);
    xt_free(z->counts);
    xt_free(z->displs);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc3_zero/drivers/adam_zero3.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
