/*
 * tp_dropout.c: dropout under tensor parallelism, Megatron's model-parallel
 * random state. docs/lc4_tp.md#tp_dropout
 *
 * Dropout zeroes each activation with probability p and scales the rest by
 * 1/(1-p), by a mask drawn from a random generator. Under tensor parallelism an
 * activation is either replicated (every tensor rank holds all of it: after a
 * row-parallel layer's all-reduce) or split (each rank holds its own columns:
 * after a column-parallel layer), and the mask must follow:
 *
 *   replicated: the same mask on every tensor rank. Different masks would
 *     give each rank a different y, and the replicas, which must stay one
 *     model, drift apart from the first step;
 *   split: a different mask on each tensor rank. The same draws on every
 *     rank would drop the same positions of different columns: a pattern
 *     repeated tp times, not one process's independent dropout.
 *
 * Megatron keeps two generators for it (tensor_parallel/random.py): the
 * default one, seeded alike across the tensor group, for replicated regions,
 * and a tracked one ("model-parallel-rng", entered with
 * get_cuda_rng_tracker().fork()), seeded with the tensor rank, for split ones.
 * With data_parallel_random_init the data ranks differ too; no pipeline here:
 *
 *   replicated = xt_rng_seed(seed + 10 dp_rank)
 *   split      = xt_rng_seed(seed + 10 dp_rank + 2718 + tp_rank)
 *
 * The layer, an MLP with dropout in both regions (W1 by columns, W2 by rows):
 *
 *   x --> a_r = x W1_r --> h_r = drop_split(silu(a_r)) --> z = sum_r h_r W2_r --> y = drop_repl(z)
 *         column-parallel   rows x ff_local, split          all-reduce            rows x d, replicated
 *
 * Cost: no message for the masks (every rank draws its own, in step); one
 * all-reduce of rows d floats forward (z), one backward (dx), as without
 * dropout. Each generator advances by the elements it masks, call after call.
 */
#include "xt_nn.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Megatron's two generators, one rank's. */
typedef struct {
    xt_rng replicated; /* the default one: the same sequence on every tensor rank */
    xt_rng split;      /* the tracked one: a sequence per tensor rank */
} tp_rng;

tp_rng tp_rng_init(uint64_t seed, int tp_rank, int dp_rank)
{
    /*
     * TODO: this rank's two generators.
     *   replicated = xt_rng_seed(seed + 10 dp_rank); split = xt_rng_seed(seed + 10 dp_rank
     *   + 2718 + tp_rank) (Megatron's seeds, data_parallel_random_init).
     */
    XT_TODO("this rank's two generators.", seed, tp_rank, dp_rank);
}

void dropout_scales(xt_rng *g, float *scale, long n, float p)
{
    /*
     * TODO: n dropout scales from g.
     *   For i = 0 .. n-1 in order, one draw u = xt_rng_uniform(g, 0, 1): scale[i] =
     *   1 / (1 - p) if u >= p (kept), 0 if not (dropped).
     */
    XT_TODO("n dropout scales from g.", g, scale, n, p);
}

/*
 * act: what backward needs, in this layout: a (rows x ff_local), the split region's scales
 * (rows x ff_local), the replicated region's (rows x d).
 */
void tp_dropout_forward(const float *x, const float *w1, const float *w2, float *y, float *act,
                        tp_rng *rng, float p, int rows, int d, int ff_local, MPI_Comm comm)
{
    /*
     * TODO: the MLP with its two dropouts.
     *   y (rows x d) = drop_repl(sum_r drop_split(silu(x W1_r)) W2_r), the same on every
     *   tensor rank: one MPI_Allreduce of rows*d floats, no other message. Masks from
     *   dropout_scales: the split one (rows x ff_local) from rng->split, the replicated one
     *   (rows x d) from rng->replicated, each row-major; act as above.
     */
    XT_TODO("the MLP with its two dropouts.", x, w1, w2, y, act, rng, p, rows, d, ff_local, comm);
}

void tp_dropout_backward(const float *x, const float *w1, const float *w2, const float *act,
                         const float *dy, float *dx, float *dw1, float *dw2, int rows, int d,
                         int ff_local, MPI_Comm comm)
{
    /*
     * TODO: the backward.
     *   Through both masks, act as the forward left it. dx (rows x d) overwritten, the
     *   same on every tensor rank: one MPI_Allreduce of rows*d floats, no other message;
     *   dw1 (d x ff_local), dw2 (ff_local x d) +=.
     */
    XT_TODO("the backward.", x, w1, w2, act, dy, dx, dw1, dw2, rows, d, ff_local, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/tp_dropout.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
