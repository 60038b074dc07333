/*
 * model_tp.c: a small decoder language model trained with tensor
 * parallelism: every piece of this lecture in one training step.
 * docs/lc4_tp.md#model_tp
 *
 *   tokens -> embedding (vocab-parallel: rows of E)                 all-reduce n d
 *          -> L x [ a = x + attention(rmsnorm(x)) (heads split)     all-reduce n d
 *                   y = a + swiglu(rmsnorm(a))    (hidden split)    all-reduce n d ]
 *          -> rmsnorm -> LM head (vocab-parallel: columns of W)     no message
 *          -> fused cross-entropy over the vocabulary blocks        all-reduces of n, 2n
 *
 * n = batch T tokens, whole on every rank between the layers. Each rank
 * holds: the vocabulary block xt_block(V, np, r) of the embedding's rows and
 * of the head's columns; its query heads, its KV heads (replicated on np/hkv
 * ranks when hkv < np) and the matching rows of Wo; its hidden units of
 * Wg, Wu (columns) and Wd (rows); the RMSNorm gains whole, as every rank
 * normalizes the same whole activations. Backward mirrors forward: the f
 * operators (in front of the QKV projections, the MLP's gate and up, and the
 * head) all-reduce their input gradients; the g operators (after Wo and Wd,
 * and the embedding) need nothing; replicated KV heads sum their weight
 * gradients over their replicas. Then each rank takes an AdamW step on what
 * it holds.
 *
 * Communication per step and rank: forward 1 + 2L all-reduces of n d
 * floats, the cross-entropy's 2 (a MAX of n, then a SUM of 2n), backward
 * 1 + 2L of n d, and 2L of d hd hkv_local on the replica group when KV heads
 * are replicated. The logits (n x V) are never gathered.
 */
#include "kit.h" /* the lecture's kit: tp_config, tp_model (this rank's shard), its set-up */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the model */

/*
 * One training step on batch x T tokens: forward, the mean cross-entropy
 * against targets, backward, and an AdamW step (xt_adam_update, step counting
 * from 1) on every tensor this rank holds. Returns the loss.
 */
float model_tp_step(tp_model *m, const int *tokens, const int *targets, int batch, int T,
                    const xt_adam *h)
{
    /*
     * TODO: one training step; return the loss.
     *   Loss (the same on every rank) and every tensor after each step against one-process
     *   training. Per step: 2 + 4L all-reduces of batch*T*d floats on m->comm, the
     *   cross-entropy's (at most 3, of at most 2 batch*T floats each), 2L on m->kv_comm
     *   where KV heads are replicated, nothing else. Replicated tensors stay bit-identical.
     */
    XT_TODO("one training step; return the loss.", m, tokens, targets, batch, T, h);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/model_tp.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
