/*
 * parallel_3d.c: data x pipeline x tensor parallelism, the capstone: lecture
 * 4's decoder language model trained on a mesh of pp x dp x tp ranks.
 * docs/lc5_pp.md#parallel_3d
 *
 * The kit's mesh lays the ranks out on a grid in Megatron-LM's order, tp
 * varying fastest and pp slowest ("pp=2,dp=2,tp=2": rank = 4 pp + 2 dp + tp),
 * and gives every rank one communicator per dimension:
 *
 *              pp 0 (embedding, blocks 0..)   pp 1 (.. blocks, head, loss)
 *     dp 0     [ r0  r1 ]  ---- pp ---->       [ r4  r5 ]
 *                 tp                              tp
 *     dp 1     [ r2  r3 ]  ---- pp ---->       [ r6  r7 ]
 *
 *     tp groups {0,1} {2,3} {4,5} {6,7}: one stage's tensors split in two;
 *               every block all-reduces n d floats twice forward and twice
 *               backward (inside the kit's xt_tp_stage): neighbours, the
 *               fastest links
 *     dp groups {0,2} {1,3} {4,6} {5,7}: replicas of one shard, each on its
 *               own share of the batch; one all-reduce of the shard's
 *               gradients per step, the most bytes after tp's
 *     pp groups {0,4} {1,5} {2,6} {3,7}: 1F1B; each micro-batch's activations
 *               forward, its gradient back, point to point: the fewest
 *               bytes, so the furthest apart
 *
 * Cost per step and rank, n = (seqs / dp / M) T tokens per micro-batch:
 * pp: M activations of n d floats to the next stage, M gradients of n d back
 * to the previous; dp: one all-reduce of the shard's gradients (~2 x its
 * size on the wire), and on the last stage one of the loss; tp: the stage's,
 * 4 all-reduces of n d per block per micro-batch and the embedding's, the
 * head's and the cross-entropy's.
 */
#include "kit.h" /* the lecture's kit: the tensor-parallel stage, the mesh */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

float parallel_3d_step(xt_tp_stage *stage, const xt_mesh *mesh, const int *tokens,
                       const int *targets, int seqs, int T, int M, const xt_adam *h)
{
    /*
     * TODO: one training step on the 3D mesh.
     *   Graded: each step's loss and every rank's shard (its gradients after step 1, its
     *   parameters at the end) against one process's AdamW training on the whole batch of
     *   seqs sequences of T tokens (tokens on the first pp stage, targets on the last, NULL
     *   elsewhere). Data share c of dp holds sequences c seqs/dp.., in M micro-batches, in
     *   order. The stage's calls are exactly 1F1B's for this rank's pp coordinate;
     *   activations and their gradients go as MPI_FLOAT point to point on the pp group only,
     *   one message per micro-batch each way (MPI_Send is synchronous when graded). The
     *   stage's grads (zero them: they hold the last step's) end as the whole batch's
     *   mean-loss gradient: one MPI_Allreduce of them on the dp group; then xt_tp_stage_adam.
     *   Returns the whole batch's mean loss on the last pp stage (one all-reduce of it on
     *   dp; anything elsewhere). Nothing on any other communicator.
     */
    // BEGIN SOLUTION
    MPI_Comm pp = xt_mesh_group(mesh, "pp"), dp = xt_mesh_group(mesh, "dp");
    int np = xt_mesh_size(mesh, "pp"), rank = xt_mesh_coord(mesh, "pp");
    int ndp = xt_mesh_size(mesh, "dp"), share = seqs / ndp, mbs = share / M;
    int n = mbs * T, last = rank == np - 1;
    long nx = (long)n * xt_tp_stage_d(stage);
    size_t mine = (size_t)xt_mesh_coord(mesh, "dp") * share * T; /* this share's first token */
    const int *tok = tokens ? tokens + mine : NULL, *tgt = targets ? targets + mine : NULL;
    float *grads = xt_tp_stage_grads(stage);
    memset(grads, 0, sizeof(float) * (size_t)xt_tp_stage_nparams(stage));
    float *xin = malloc(sizeof(float) * 4 * (size_t)nx), *dx = xin + nx, *y = dx + nx, *dy = y + nx;
    int w = np - rank - 1 < M ? np - rank - 1 : M;
    float loss = 0.0f;
    for (int m = 0; m < w; m++) { /* warm-up */
        if (rank > 0)
            MPI_Recv(xin, (int)nx, MPI_FLOAT, rank - 1, m, pp, MPI_STATUS_IGNORE);
        xt_tp_stage_forward(stage, m, tok ? tok + (size_t)m * n : NULL, xin, mbs, T, y);
        MPI_Send(y, (int)nx, MPI_FLOAT, rank + 1, m, pp);
    }
    if (rank > 0 && w < M)
        MPI_Recv(xin, (int)nx, MPI_FLOAT, rank - 1, w, pp, MPI_STATUS_IGNORE);
    for (int b = 0; b < M - w; b++) { /* steady: forward f, backward b */
        int f = w + b;
        xt_tp_stage_forward(stage, f, tok ? tok + (size_t)f * n : NULL, xin, mbs, T, y);
        if (last)
            loss += xt_tp_stage_loss(stage, f, tgt + (size_t)f * n, 1.0f / M);
        else
            MPI_Sendrecv(y, (int)nx, MPI_FLOAT, rank + 1, f, dy, (int)nx, MPI_FLOAT, rank + 1, b,
                         pp, MPI_STATUS_IGNORE);
        xt_tp_stage_backward(stage, b, last ? NULL : dy, rank > 0 ? dx : NULL);
        if (rank > 0 && f + 1 < M)
            MPI_Sendrecv(dx, (int)nx, MPI_FLOAT, rank - 1, b, xin, (int)nx, MPI_FLOAT, rank - 1,
                         f + 1, pp, MPI_STATUS_IGNORE);
        else if (rank > 0)
            MPI_Send(dx, (int)nx, MPI_FLOAT, rank - 1, b, pp);
    }
    for (int b = M - w; b < M; b++) { /* cool-down */
        MPI_Recv(dy, (int)nx, MPI_FLOAT, rank + 1, b, pp, MPI_STATUS_IGNORE);
        xt_tp_stage_backward(stage, b, dy, rank > 0 ? dx : NULL);
        if (rank > 0)
            MPI_Send(dx, (int)nx, MPI_FLOAT, rank - 1, b, pp);
    }
    free(xin);
    /* Each share's gradient is of its own mean (1/M per micro-batch): the batch's is their
     * mean over the dp replicas. */
    long count = xt_tp_stage_nparams(stage);
    MPI_Allreduce(MPI_IN_PLACE, grads, (int)count, MPI_FLOAT, MPI_SUM, dp);
    for (long i = 0; i < count; i++)
        grads[i] /= (float)ndp;
    if (last) {
        loss /= (float)M;
        MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_FLOAT, MPI_SUM, dp);
        loss /= (float)ndp;
    }
    xt_tp_stage_adam(stage, h);
    return loss;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/parallel_3d.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
