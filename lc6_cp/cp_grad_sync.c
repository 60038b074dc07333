/*
 * cp_grad_sync.c: training with context parallelism inside data parallelism:
 * whose gradients are summed with whose. docs/lc6_cp.md#cp_grad_sync
 *
 * np = dp x cp ranks, cp consecutive ranks to a context group: each data rank
 * (a group) trains on its own sequence, cut over its cp ranks in the zigzag
 * layout. The layer is one attention block, its weights the same on every rank:
 *
 *     q = x Wq, k = x Wk, v = x Wv;  o = causal attention(q, k, v);  y = o Wo
 *
 * and the loss of data rank j's sequence is L_j = sum_t y_t . g_t (g: a given
 * upstream gradient), the step's loss their mean over the data ranks. The
 * attention runs over the context group (all-gathered K and V, as in
 * allgather_kv_attention.c), and each rank's weight gradients come from its own
 * c tokens only: for one sequence they are parts of one sum. So the gradient
 * all-reduce must span the context ranks as well as the data ranks:
 *
 *     dp 2 x cp 2:   r0 r1 | r2 r3      context groups {r0 r1}, {r2 r3} (attention)
 *                                       gradients: one all-reduce over all four
 *     sum over r0..r3, then / dp: the mean over sequences of each sequence's gradient
 *
 * Megatron-LM names this group "data parallel with context parallel" (its
 * optimizer's gradient buffers reduce over dp x cp); reducing over the data
 * ranks alone leaves each context rank with the gradient of its own chunk of
 * tokens, and the context ranks' weights drift apart from the first step.
 *
 * Cost per step and rank: the attention's collectives on the context group
 * (two all-gathers forward, K and V, c hkv hd floats from each rank; two more
 * and two reduce-scatters of cp c hkv hd floats backward, or the forward's kept);
 * one all-reduce of the weights' gradients, d (hq + 2 hkv) hd + hq hd d floats,
 * over all dp cp ranks: the same bytes as plain data parallelism over np ranks.
 */
#include "kit.h" /* attention blocks */

#include <stdlib.h>
#include <string.h>

void cp_train(float *wq, float *wk, float *wv, float *wo, const float *x, const float *g, int steps,
              float lr, int c, int d, int hq, int hkv, int hd, int cp, MPI_Comm comm)
{
    /*
     * TODO: SGD steps.
     *   The attention block on dp x cp ranks: context groups of cp consecutive ranks
     *   (MPI_Comm_split; free it), zigzag rows x, g (c x d). Per step: forward and backward
     *   as allgather_kv_attention.c's over the group; the four weights' gradients (Wq, Wk,
     *   Wv, Wo, packed in that order) in exactly one MPI_Allreduce over comm, then divided by
     *   dp = np / cp; W -= lr gradient on every rank, the same bits everywhere.
     */
    XT_TODO("SGD steps.", wq, wk, wv, wo, x, g, steps, lr, c, d, hq, hkv, hd, cp, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/cp_grad_sync.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
