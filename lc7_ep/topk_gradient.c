/*
 * topk_gradient.c: softmax top-k routing and its gradient.
 * docs/lc7_ep.md#topk_gradient
 *
 * The router scores each token against every expert (logits, T x E), turns
 * the scores into probabilities with a softmax, and sends the token to its
 * k most likely experts, each weighed by its probability (divided by the k
 * probabilities' sum when renormalised, as Mixtral does):
 *
 *   logits   e0    e1    e2    e3         probs  .09  .50  .37  .04
 *   t0      1.0   2.7   2.4   0.2   -->   k = 2: idx [1 2], w [.50 .37]
 *                                         renorm: w [.57 .43]
 *
 * The choice is discrete and has no gradient; the weights have one, and it
 * is all the router learns from. dw (T x k) reaches the chosen
 * probabilities, and through the softmax's Jacobian every logit of the row:
 *
 *   dp_e = dw_j at e = idx_j (renorm: (dw_j - sum_i dw_i w_i) / S, S the
 *          sum of the k probabilities), 0 for every expert not chosen
 *   dlogits_e = p_e (dp_e - sum_i p_i dp_i)
 *
 * so an expert that was not chosen still gets a gradient, -p_e sum_i p_i
 * dp_i: raising its logit takes probability from the chosen ones. With
 * renorm that sum is 0 and only the chosen move: the renormalised weights
 * depend only on the chosen logits' differences.
 *
 * Cost per token: E exps, k passes over E for the selection (k E
 * comparisons; a heap does E log k), O(E) for the backward. No messages:
 * the router is replicated and every rank routes its own tokens.
 */
#include "kit.h" /* the lecture's kit: routing, the expert bank */

#include <math.h>
#include <stdio.h>
#include <string.h>

void topk_forward(const float *logits, int T, int E, int k, int renorm, float *probs, int *idx,
                  float *w)
{
    /*
     * TODO: softmax, then the top k of each row.
     *   probs (T x E) = softmax of each row, computed stably; idx (T x k) the chosen experts
     *   by decreasing logit, of equal logits the lower expert first (graded exactly); w (T x
     *   k) their probabilities, over their sum when renorm. No MPI call; not xt_topk_route
     *   nor xt_softmax_rows.
     */
    XT_TODO("softmax, then the top k of each row.", logits, T, E, k, renorm, probs, idx, w);
}

void topk_backward(const float *probs, const int *idx, const float *dw, int T, int E, int k,
                   int renorm, float *dlogits)
{
    /*
     * TODO: dlogits from dw, through the chosen.
     *   probs and idx are the forward's. dlogits arrives holding garbage and is overwritten;
     *   the gradient flows through the chosen probabilities only (and their sum when renorm),
     *   then through the softmax to every logit of the row. No MPI call; not
     *   xt_topk_route_backward.
     */
    XT_TODO("dlogits from dw, through the chosen.", probs, idx, dw, T, E, k, renorm, dlogits);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/topk_gradient.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
