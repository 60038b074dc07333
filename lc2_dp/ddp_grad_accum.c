/*
 * ddp_grad_accum.c: gradient accumulation under data parallelism.
 * docs/lc2_dp.md#ddp_grad_accum
 *
 * A batch too big for memory is cut into K micro-batches: forward and
 * backward each one, adding its gradients into the same buffer, and take one
 * optimizer step at the end. With data parallelism the ranks only need to
 * agree on the final sum, so they communicate once per step, after the last
 * micro-batch, not K times (PyTorch's no_sync):
 *
 *     micro-batch   1        2        ...      K
 *     each rank     fwd+bwd  fwd+bwd  ...      fwd+bwd   all-reduce   SGD
 *                   g += g1  g += g2           g += gK   (once)
 *
 * Each micro-batch's loss is a mean over its rows, so its gradient is scaled
 * by 1/K: the K scaled means add up to the mean over the rank's rows, and
 * the all-reduce then averages over ranks. The result is the step that one
 * process would take on the whole global batch.
 *
 * Cost per step: one all-reduce of all gradients (4 nparams bytes), whatever
 * K is: K times fewer messages than synchronising every micro-batch.
 */
#include "xt_nn.h"

#include <stdlib.h>

/*
 * One SGD step on this rank's `rows` samples in `micro` micro-batches of
 * rows / micro samples each (micro divides rows). Returns this rank's loss
 * (the mean over its micro-batches).
 */
float ddp_accum_step(xt_mlp *m, const float *x, const void *target, int rows, int micro, float lr,
                     MPI_Comm comm)
{
    /*
     * TODO: accumulate micro-batches, all-reduce once.
     *   Graded after every step: weights bit-identical on all ranks and within 2e-5 (1 + |w|) of
     *   a single SGD step of one process on the whole global batch: `micro` micro-batches of
     *   rows / micro rows, each weighing 1/micro, then the mean over ranks. Exactly one
     *   all-reduce per step, after the last micro-batch, of exactly 4 nparams bytes (the
     *   gradients only). Returned, and checked: the mean of this rank's micro-batch losses.
     */
    XT_TODO("accumulate micro-batches, all-reduce once.", m, x, target, rows, micro, lr, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc2_dp/drivers/ddp_grad_accum.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
