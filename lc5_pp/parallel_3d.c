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
    XT_TODO("one training step on the 3D mesh.", stage, mesh, tokens, targets, seqs, T, M, h);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/parallel_3d.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
