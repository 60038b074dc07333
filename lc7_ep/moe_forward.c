/*
 * moe_forward.c: one mixture-of-experts layer on one process, with the
 * Switch Transformer's load-balancing loss. docs/lc7_ep.md#moe_forward
 *
 * A router Wr (d x E) scores every token against every expert; each token
 * goes to the k experts of largest probability, and its output is their
 * outputs weighted by those probabilities. An expert computes only the
 * tokens routed to it, so the choices are grouped by expert first:
 *
 *   tokens      router: softmax(x Wr), top-k      grouped by expert
 *   t0 ------> e2 (.41) e0 (.22)                  e0: t0 t2      -> SwiGLU_0
 *   t1 ------> e1 (.50) e2 (.19)                  e1: t1 t2      -> SwiGLU_1
 *   t2 ------> e1 (.38) e0 (.30)                  e2: t0 t1      -> SwiGLU_2
 *                                                 e3: (none)     -> nothing
 *   y_t0 = .41 SwiGLU_2(x_t0) + .22 SwiGLU_0(x_t0)    (the combine)
 *
 * Nothing in the routing spreads the tokens: a router that sends everything
 * to one expert is a dense layer with E - 1 idle experts. The balance loss
 * alpha E sum_i f_i P_i (f_i: the share of the k T choices expert i got, a
 * count; P_i: its mean probability) is alpha at perfectly uniform routing
 * and alpha E when, with k = 1, one expert takes every token with
 * probability 1; its gradient reaches the router through P_i only.
 *
 * Cost: one process, no messages. Compute: the router 2 T d E flops, the
 * experts 6 d ff flops per choice, 6 k T d ff in all, where a dense layer of
 * the E experts would spend 6 E T d ff: the parameters grow with E, the
 * compute with k. Memory: the k T grouped rows (d + 2 ff floats each).
 */
#include "kit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

float moe_forward(const float *x, const float *wr, const float *experts, int T, int d, int E,
                  int ff, int k, float alpha, float *y)
{
    /*
     * TODO: one MoE layer and its balance loss.
     *   logits = x Wr; xt_topk_route with renorm 0 (each weight is its chosen probability);
     *   y (T x d, arrives holding garbage) = sum_j w_tj expert_idx_tj(x_t), each expert a
     *   SwiGLU (docs, "Conventions") on the tokens routed to it alone (maybe none), its
     *   products through xt_gemm (the grader counts the rows each expert multiplies).
     *   Returns alpha E sum_i f_i P_i: f_i = (choices of expert i) / (k T), all k choices
     *   counted; P_i = the mean over the T tokens of probability i (0 when T = 0).
     *   No MPI call; xt_experts_forward/_backward are refused: the bank is this exercise.
     */
    XT_TODO("one MoE layer and its balance loss.", x, wr, experts, T, d, E, ff, k, alpha, y);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/moe_forward.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
