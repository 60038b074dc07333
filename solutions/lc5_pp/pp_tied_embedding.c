/*
 * pp_tied_embedding.c: a pipeline whose first stage's input embedding and last
 * stage's output head are one matrix (tied), as in GPT-2 and Megatron-LM's
 * default. docs/lc5_pp.md#pp_tied_embedding
 *
 * The embedding E (vocab x d) maps tokens to vectors on the first stage; the head
 * (d x vocab) maps the last stage's vectors to logits. Tied, the head is E^T:
 * one matrix, used at both ends of the model, whose gradient is the sum of both
 * uses. In a pipeline the two ends live on different ranks, so each holds a copy:
 *
 *     stage 0: E            stage 1: blocks          stage 2: blocks, head = E^T
 *         \________________ embedding group ___________________/
 *     after backward: dE (stage 0) + dHead^T (stage 2), all-reduced between the two,
 *     and both copies step with the sum: they stay bit-identical
 *
 * Megatron-LM builds that "embedding group" of the first and last stage of every
 * pipeline (its ranks in a dp x pp mesh: one group per data rank and tensor rank)
 * and all-reduces the word embeddings' gradient over it after the data-parallel
 * reduction (finalize_model_grads). With one stage, first = last: the two uses'
 * gradients add on the rank, no message.
 *
 * Cost per step: a pipeline step, the data-parallel all-reduce of each shard, and
 * on the first and last stage one all-reduce of vocab d floats (this rank's
 * vocabulary block of E under tensor parallelism) between the two: at GPT-2's
 * 50257 x 768 that is 154 MB in float32, as much as the gradient of 12
 * transformer blocks' attention, which is why it runs after, or overlapped with,
 * the data-parallel reduction.
 */
#include "kit.h" /* the tensor-parallel stage, the mesh */

#include <stdlib.h>
#include <string.h>

MPI_Comm tied_embedding_group(const xt_mesh *mesh)
{
    /*
     * TODO: the embedding group of this rank's pipeline.
     *   Its pp group's ranks at pp coordinate 0 and the last, in that order; MPI_COMM_NULL
     *   on a middle stage; this rank alone with one stage. The caller frees it.
     */
    // BEGIN SOLUTION
    int pp = xt_mesh_size(mesh, "pp"), me = xt_mesh_coord(mesh, "pp");
    int in = me == 0 || me == pp - 1;
    MPI_Comm group;
    MPI_Comm_split(xt_mesh_group(mesh, "pp"), in ? 0 : MPI_UNDEFINED, me, &group);
    return group;
    // END SOLUTION
}

float tied_pp_step(xt_tp_stage *stage, const xt_mesh *mesh, MPI_Comm embedding, const int *tokens,
                   const int *targets, int vocab_local, int seqs, int T, int M, const xt_adam *h)
{
    /*
     * TODO: one step.
     *   parallel_3d_step's contract, any schedule (each micro-batch's activation and gradient
     *   once each way on the pp group; the shard's gradients zeroed, one MPI_Allreduce of
     *   them on dp, divided by dp; the loss's on dp), and before xt_tp_stage_adam the tied
     *   matrix's gradient: this rank's vocab_local rows of E (the first stage's first
     *   vocab_local d floats) and of the head (the last stage's last d vocab_local, its
     *   transpose) summed by one MPI_Allreduce of vocab_local d floats on embedding; with one
     *   stage, on the rank. Returns the mean loss on the last stage.
     */
    // BEGIN SOLUTION
    MPI_Comm pp = xt_mesh_group(mesh, "pp"), dp = xt_mesh_group(mesh, "dp");
    int np = xt_mesh_size(mesh, "pp"), rank = xt_mesh_coord(mesh, "pp");
    int ndp = xt_mesh_size(mesh, "dp"), share = seqs / ndp, mbs = share / M;
    int n = mbs * T, first = rank == 0, last = rank == np - 1, d = xt_tp_stage_d(stage);
    long nx = (long)n * d, count = xt_tp_stage_nparams(stage);
    size_t mine = (size_t)xt_mesh_coord(mesh, "dp") * share * T;
    const int *tok = tokens ? tokens + mine : NULL, *tgt = targets ? targets + mine : NULL;
    float *grads = xt_tp_stage_grads(stage);
    memset(grads, 0, sizeof(float) * (size_t)count);
    float *x = malloc(sizeof(float) * 2 * (size_t)nx), *y = x + nx, loss = 0.0f;
    for (int m = 0; m < M; m++) { /* GPipe: every forward, then every backward */
        if (!first)
            MPI_Recv(x, (int)nx, MPI_FLOAT, rank - 1, m, pp, MPI_STATUS_IGNORE);
        xt_tp_stage_forward(stage, m, tok ? tok + (size_t)m * n : NULL, x, mbs, T, y);
        if (last)
            loss += xt_tp_stage_loss(stage, m, tgt + (size_t)m * n, 1.0f / M);
        else
            MPI_Send(y, (int)nx, MPI_FLOAT, rank + 1, m, pp);
    }
    for (int m = M - 1; m >= 0; m--) {
        if (!last)
            MPI_Recv(y, (int)nx, MPI_FLOAT, rank + 1, M + m, pp, MPI_STATUS_IGNORE);
        xt_tp_stage_backward(stage, m, last ? NULL : y, first ? NULL : x);
        if (!first)
            MPI_Send(x, (int)nx, MPI_FLOAT, rank - 1, M + m, pp);
    }
    free(x);
    MPI_Allreduce(MPI_IN_PLACE, grads, (int)count, MPI_FLOAT, MPI_SUM, dp);
    for (long i = 0; i < count; i++)
        grads[i] /= (float)ndp;
    if (last) {
        loss /= (float)M;
        MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_FLOAT, MPI_SUM, dp);
        loss /= (float)ndp;
    }

    /* The tied matrix: E's rows on the first stage, the head's columns on the last. */
    long vd = (long)vocab_local * d;
    float *dE = first ? grads : NULL, *dH = last ? grads + count - vd : NULL;
    float *sum = malloc(sizeof(float) * ((size_t)vd + 1));
    if (first)
        memcpy(sum, dE, sizeof(float) * (size_t)vd);
    else if (last)
        memset(sum, 0, sizeof(float) * (size_t)vd);
    if (last) /* the head is d x vocab_local: its transpose adds to E's layout */
        for (int v = 0; v < vocab_local; v++)
            for (int c = 0; c < d; c++)
                sum[(long)v * d + c] += dH[(long)c * vocab_local + v];
    if ((first || last) && np > 1)
        MPI_Allreduce(MPI_IN_PLACE, sum, (int)vd, MPI_FLOAT, MPI_SUM, embedding);
    if (first)
        memcpy(dE, sum, sizeof(float) * (size_t)vd);
    if (last)
        for (int v = 0; v < vocab_local; v++)
            for (int c = 0; c < d; c++)
                dH[(long)c * vocab_local + v] = sum[(long)v * d + c];
    free(sum);
    xt_tp_stage_adam(stage, h);
    return loss;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_tied_embedding.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
