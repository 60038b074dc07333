/*
 * ddp_bucketed.c: data parallelism with gradient buckets, overlapped with backward.
 * docs/lc2_dp.md#ddp_bucketed
 *
 * ddp_naive sends one all-reduce per tensor, all after backward: many small
 * messages (each pays the latency alpha) and the network idle while backward
 * runs. Backward produces gradients from the last layer to the first, so
 * group them in that order into buckets of about `cap` bytes and start a
 * nonblocking all-reduce for a bucket as soon as backward has filled it:
 *
 *     flat gradients   W0  b0 | W1  b1 | W2  b2        (layer order)
 *     buckets          [ B2     ][ B1     ][ B0   ]      (filled right to left)
 *
 *     backward  layer 2 ....| layer 1 .........| layer 0 ........|
 *     network               [Iallreduce B0]    [Iallreduce B1]   [B2] wait
 *
 * A bucket takes tensors from the last one backwards until it holds at least
 * `cap` bytes; a tensor never splits. Buckets are slices of the one flat
 * gradient buffer, so nothing is copied. Every request is waited for before
 * the update reads the gradients.
 *
 * MPI progresses a nonblocking collective only inside MPI calls (unless the
 * library runs a progress thread): between layers we call MPI_Testall on the
 * buckets already started, so their messages move while backward computes.
 *
 * Cost per step: one all-reduce per bucket, the same bytes as ddp_naive
 * (every gradient once) in fewer, larger messages.
 */
#include "xt_nn.h"

#include <stdlib.h>

/* A slice [lo, hi) of the flat gradient buffer, complete once backward has done first_layer. */
typedef struct {
    long lo, hi;
    int first_layer;
} bucket;

/* The buckets of m for `cap` bytes, in the order backward fills them. Returns how many. */
int plan_buckets(const xt_mlp *m, size_t cap, bucket *out)
{
    /*
     * TODO: cut m's tensors into buckets; return how many.
     *   The grader expects one MPI_Iallreduce per bucket of this rule: tensors from the last to
     *   the first, never split; a bucket closes once it holds >= cap bytes (4 per float), the
     *   last one whatever its size (cap = 0: a bucket per tensor). out[i] is the slice [lo, hi)
     *   of m->grads (in floats) in launch order; first_layer is the layer of its lowest tensor.
     */
    XT_TODO("cut m's tensors into buckets; return how many.", m, cap, out);
}

/* What backward's hook needs: the plan, and which buckets are in flight. */
typedef struct {
    MPI_Comm comm;
    bucket *buckets;
    MPI_Request *reqs;
    int nbuckets, started;
} bucket_state;

/* Called by xt_mlp_backward when layer `layer`'s gradients are complete. */
void on_layer_done(xt_mlp *m, int layer, void *ctx)
{
    /*
     * TODO: start every bucket that backward has now completed.
     *   One in-place MPI_Iallreduce (SUM) per bucket, in plan order, in the hook of its first_layer:
     *   earlier, it sums half-computed gradients (WRONG); later, it overlaps less of backward, and a
     *   blocking MPI_Allreduce none (RULE). Progress calls on started buckets are not counted.
     */
    XT_TODO("start every bucket that backward has now completed.", m, layer, ctx);
}

/*
 * One SGD step of data-parallel training with gradient buckets of `cap`
 * bytes on this rank's `rows` samples. Returns this rank's loss.
 */
float ddp_bucketed_step(xt_mlp *m, const float *x, const void *target, int rows, float lr,
                        size_t cap, MPI_Comm comm)
{
    /*
     * TODO: one bucketed DDP step; return the local loss.
     *   Graded as ddp_naive_step (weights bit-identical on all ranks, within 2e-5 (1 + |w|) of
     *   full-batch SGD), but every gradient travels once per step in plan_buckets' buckets,
     *   started by on_layer_done as backward's hook; no MPI_Allreduce at all. Every request
     *   completes before the update reads the gradients (one still pending is a RULE).
     */
    XT_TODO("one bucketed DDP step; return the local loss.", m, x, target, rows, lr, cap, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc2_dp/drivers/ddp_bucketed.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
