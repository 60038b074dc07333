/*
 * gate_sigmoid.c: DeepSeek-V3's gate, balanced by a bias that chooses but
 * never weighs. docs/lc7_ep.md#gate_sigmoid
 *
 * Each expert scores a token on its own, s = sigmoid(logit) (no softmax
 * across the experts). The k experts are chosen on s + b, b a per-expert
 * bias that no gradient trains; the chosen experts are weighed by their
 * scores alone, normalised over the k:
 *
 *   s      .73  .69  .55  .50       b  -.25  0  0  +.125
 *   s + b  .48  .69  .55  .63   --> k = 2: experts 1 3 (not 0 1)
 *   w      .69 / (.69 + .50) = .58,   .50 / 1.19 = .42   (no b in w)
 *
 * After each step the bias moves by a fixed gamma against the load: an
 * expert that got fewer than the mean k T / E of the T k choices gains
 * gamma, one that got more loses it, one exactly at the mean keeps its
 * bias. Balance without a loss term, and so without a gradient that
 * fights the language-model loss.
 *
 * A small sequence-wise loss keeps a single sequence from being extreme:
 *
 *   L = alpha sum_i f_i P_i,   f_i = E / (k T) load_i   (1 when balanced; a count, no gradient)
 *                              P_i = 1/T sum_t s_ti / sum_j s_tj
 *
 * Uniform routing (every f_i = 1, every P_i = 1/E) gives exactly alpha.
 * Its gradient flows through P only: dL/ds'_ti = alpha f_i / T, then
 * through the normalisation over the row and the sigmoid, s (1 - s).
 *
 * Cost per token: E sigmoids, k E comparisons, O(E) for the loss's
 * gradient; the bias update O(T k + E). No messages: each rank gates its
 * own tokens (across ranks the loads would be summed first: one
 * all-reduce of E counts).
 */
#include "kit.h" /* the lecture's kit: routing, the expert bank */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gate_sigmoid_forward(const float *logits, const float *bias, int T, int E, int k,
                          float *scores, int *idx, float *w)
{
    /*
     * TODO: the sigmoid gate: top-k on s + bias.
     *   scores (T x E) = sigmoid(logits); idx (T x k) by decreasing s + bias, of equal ones
     *   the lower expert first (graded exactly); w (T x k) the chosen scores over their sum:
     *   the bias chooses, it never weighs. No MPI call.
     */
    XT_TODO("the sigmoid gate: top-k on s + bias.", logits, bias, T, E, k, scores, idx, w);
}

void gate_bias_update(float *bias, const int *idx, int T, int E, int k, float gamma)
{
    /*
     * TODO: bias_i += gamma under the mean load, -= over.
     *   load_i: how many of the T k choices in idx went to expert i; the mean is k T / E.
     *   Equal to it (compare in integers: load_i E == k T): unchanged. No MPI call.
     */
    XT_TODO("bias_i += gamma under the mean load, -= over.", bias, idx, T, E, k, gamma);
}

float seq_balance_loss(const float *logits, const int *idx, int T, int E, int k, float alpha,
                       float *dlogits)
{
    /*
     * TODO: alpha sum_i f_i P_i, and dlogits.
     *   f_i = E/(k T) load_i (a count: no gradient); P_i = the mean over t of s_ti / sum_j
     *   s_tj, s = sigmoid(logits). dlogits (T x E) arrives holding garbage and is overwritten
     *   with the loss's gradient through P. T = 0 gives 0. No MPI call.
     */
    XT_TODO("alpha sum_i f_i P_i, and dlogits.", logits, idx, T, E, k, alpha, dlogits);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/gate_sigmoid.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
