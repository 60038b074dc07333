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
    XT_TODO("the embedding group of this rank's pipeline.", mesh);
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
    XT_TODO("one step.", stage, mesh, embedding, tokens, targets, vocab_local, seqs, T, M, h);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc5_pp/drivers/pp_tied_embedding.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
