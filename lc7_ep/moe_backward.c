/*
 * moe_backward.c: the backward of one mixture-of-experts layer on one
 * process, through the experts, the combine weights and the Switch balance
 * loss. docs/lc7_ep.md#moe_backward
 *
 * The forward (moe_forward.c) is y_t = sum_j w_tj out_tj, out_tj =
 * expert_idx_tj(x_t), w_tj = probs[t][idx_tj], probs = softmax(x Wr), plus
 * the loss alpha E sum_i f_i P_i. Of L = sum(y dy) + that loss, the gradient
 * flows back along two roads, which meet again in dx:
 *
 *          dy_t ----------------+-----------------------------+
 *            |                  |                             |
 *    times w_tj (ONCE)    <dy_t, out_tj> = dw_tj       alpha E f_i / T
 *            |                  |                       (every token,
 *    SwiGLU backward      top-k backward: only the      every expert:
 *    of expert idx_tj     chosen probabilities          through P_i)
 *       /        \              \                         /
 *   dWg dWu dWd   dx_t (experts)  dprobs -- softmax backward --> dlogits
 *                       \                                    /     \
 *                        +------- dx_t += dlogits_t Wr^T ---+  dWr += x^T dlogits
 *
 * The SwiGLU backward, with s = sigmoid(g), h = silu(g) u, out = h Wd, and
 * do the expert's output gradient (w dy):
 *   dWd += h^T do    dh = do Wd^T    du = dh silu(g)    dg = dh u s (1 + g (1 - s))
 *   dWg += x^T dg    dWu += x^T du   dx = dg Wg^T + du Wu^T
 * f_i is a count: no gradient flows through it.
 *
 * Cost: one process, no messages. Compute: the forward's experts again (6 k T
 * d ff flops, or kept from the forward in a real layer) and twice that
 * backward (12 k T d ff), the router 4 T d E.
 */
#include "kit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void moe_backward(const float *x, const float *wr, const float *experts, const float *dy, int T,
                  int d, int E, int ff, int k, float alpha, float *dx, float *dwr, float *dexperts)
{
    /*
     * TODO: the layer's gradients.
     *   Of L = sum(y dy) + the balance loss (moe_forward's, with alpha), recomputing what the
     *   forward had. dx (T x d, arrives holding garbage) overwritten: through the experts
     *   and through the router; dwr (d x E) and dexperts (every expert's, xt_expert_params'
     *   layout) +=. No gradient through f_i (a count). SwiGLU's backward by hand:
     *   xt_swiglu_backward, xt_silu_backward and xt_experts_* are refused. Each expert
     *   on its routed rows alone, its products through xt_gemm (rows counted). No MPI call.
     */
    XT_TODO("the layer's gradients.", x, wr, experts, dy, T, d, E, ff, k, alpha, dx, dwr, dexperts);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/moe_backward.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
