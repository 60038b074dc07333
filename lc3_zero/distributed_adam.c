/*
 * distributed_adam.c: data parallelism with Adam, the baseline ZeRO shrinks.
 * docs/lc3_zero.md#distributed_adam
 *
 * Lecture 2's data parallelism with lecture 3's optimizer: every rank keeps
 * everything, and the only change from SGD is that the step also reads and
 * writes Adam's two moments. Per parameter, every rank holds
 *
 *     weight 4 B + gradient 4 B + Adam's m and v 8 B = 16 B    (fp32)
 *
 * so a model of PHI parameters costs 16 PHI bytes on each of the np ranks,
 * and adding ranks makes the batch bigger, never the model. ZeRO (the next
 * three programs) removes that redundancy one buffer at a time (roughly:
 * the exact figures add padding and one layer, see each program):
 *
 *                      weights   gradients   Adam m, v
 *     this program     4 PHI     4 PHI       8 PHI
 *     ZeRO-1           4 PHI     4 PHI       8 PHI / np
 *     ZeRO-2           4 PHI     4 PHI / np  8 PHI / np
 *     ZeRO-3           4 PHI/np  4 PHI / np  8 PHI / np
 *
 * Cost per step: one all-reduce of the 4 PHI bytes of gradients (2 (np-1)/np
 * 4 PHI bytes sent per rank with a ring), as for SGD; Adam adds no traffic.
 */
#include "xt_nn.h"

typedef struct {
    float *m, *v; /* Adam's moments, one each per parameter (XT_MEM_OPTIMIZER) */
    long step;    /* Adam steps taken */
} dp_adam;

/* Every rank starts from rank 0's weights, with zero moments. */
void dp_adam_init(dp_adam *s, xt_mlp *m, MPI_Comm comm)
{
    /*
     * TODO: broadcast rank 0's weights and allocate Adam's state.
     *   Only rank 0's initial m->params are right; s->step = 0. The moments, zeroed, for all
     *   nparams: xt_alloc(XT_MEM_OPTIMIZER), peak exactly 8 nparams B (malloc is not counted).
     */
    XT_TODO("broadcast rank 0's weights and allocate Adam's state.", s, m, comm);
}

/*
 * One data-parallel AdamW step on this rank's `rows` samples (x: rows x
 * m->dims[0]; target as xt_mlp_backward takes it). Returns this rank's loss.
 */
float dp_adam_step(dp_adam *s, xt_mlp *m, const float *x, const void *target, int rows,
                   const xt_adam *h, MPI_Comm comm)
{
    /*
     * TODO: average the gradients, take an Adam step.
     *   Graded after every step: weights bit-identical on all ranks and equal to full-batch
     *   AdamW on the global batch within 1e-5 (1 + |w|); exactly one all-reduce (MPI_Allreduce or
     *   MPI_Iallreduce) of all 4 nparams gradient bytes per step. Returns this rank's own loss.
     */
    XT_TODO("average the gradients, take an Adam step.", s, m, x, target, rows, h, comm);
}

void dp_adam_free(dp_adam *s)
{
    xt_free(s->m);
    xt_free(s->v);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc3_zero/drivers/distributed_adam.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
