/*
 * node_limited_routing.c: DeepSeek-V3's node-limited routing.
 * docs/lc7_ep.md#node_limited_routing
 *
 * With expert parallelism a token's hidden state is sent to every node that
 * holds one of its k experts, and the network between nodes is the slow part
 * of the dispatch. DeepSeek-V3 bounds it: each token goes to at most M nodes.
 * The E experts sit on `nodes` nodes, G = E / nodes consecutive experts each.
 * For a token, a node's score is the sum of its top k/M values of s + b (s
 * the sigmoid scores, b the balancing bias of gate_sigmoid); the M nodes
 * with the highest node scores are kept, and the k experts are chosen among
 * theirs only, by s + b. The weights are the chosen s over their sum, as in
 * gate_sigmoid: the bias chooses, it never weighs.
 *
 *     E = 8 on 4 nodes, k = 4, M = 2 (top 2 of each node summed)
 *     s + b    .9 .1 | .6 .6 | .8 .7 | .2 .1
 *     node     1.0   | 1.2   | 1.5   | .3     --> nodes 2 and 1
 *     chosen   experts 4 5 2 3 (not 0, the best single expert: its node's second is poor)
 *
 * Cost per token: E additions and a partial sort per node, then a top-k of
 * M G candidates; no messages (each rank routes its own tokens). What it
 * saves is in the dispatch: a token crosses to M nodes at most, where k
 * unconstrained experts may sit on k different nodes.
 *
 * The gradient: the choice is piecewise constant, so only the weights carry
 * one. With S the sum of the chosen s, w_j = s_j / S and
 *     dL/ds_j = (dw_j - sum_i dw_i w_i) / S   for a chosen expert j, 0 elsewhere.
 */
#include "xt.h"

#include <stdio.h>
#include <stdlib.h>

void node_limited_forward(const float *scores, const float *bias, int T, int E, int k, int nodes,
                          int M, int *idx, float *w)
{
    /*
     * TODO: node-limited top-k of each token's experts.
     *   Experts in nodes groups of G = E / nodes. A node's score: the sum of its top k / M
     *   values of s + bias, added largest first in float. Keep the M best nodes (of equal
     *   ones the lower node), then idx (T x k) the top k of s + bias among their experts (of
     *   equal ones the lower expert, first chosen first); w the chosen s over their sum.
     */
    // BEGIN SOLUTION
    int G = E / nodes, per = k / M;
    float *node_score = xt_malloc(sizeof(float) * (size_t)nodes);
    int *kept = xt_malloc(sizeof(int) * (size_t)nodes), *taken = xt_malloc(sizeof(int) * (size_t)E);
    for (int t = 0; t < T; t++) {
        const float *s = scores + (size_t)t * E;
        for (int n = 0; n < nodes; n++) { /* the top `per` of the node, largest first */
            float sum = 0.0f;
            for (int e = 0; e < E; e++)
                taken[e] = 0;
            for (int j = 0; j < per; j++) {
                int best = -1;
                for (int e = n * G; e < (n + 1) * G; e++)
                    if (!taken[e] && (best < 0 || s[e] + bias[e] > s[best] + bias[best]))
                        best = e;
                taken[best] = 1;
                sum += s[best] + bias[best];
            }
            node_score[n] = sum;
            kept[n] = 0;
        }
        for (int m = 0; m < M; m++) { /* strictly greater: of equal nodes the lower stays */
            int best = -1;
            for (int n = 0; n < nodes; n++)
                if (!kept[n] && (best < 0 || node_score[n] > node_score[best]))
                    best = n;
            kept[best] = 1;
        }
        for (int e = 0; e < E; e++)
            taken[e] = !kept[e / G]; /* the other nodes' experts are out */
        int *it = idx + (size_t)t * k;
        float *wt = w + (size_t)t * k, total = 0.0f;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++)
                if (!taken[e] && (best < 0 || s[e] + bias[e] > s[best] + bias[best]))
                    best = e;
            taken[best] = 1;
            it[j] = best;
            wt[j] = s[best];
            total += s[best];
        }
        for (int j = 0; j < k; j++)
            wt[j] /= total;
    }
    free(node_score);
    free(kept);
    free(taken);
    // END SOLUTION
}

void node_limited_backward(const float *scores, const int *idx, const float *dw, int T, int E,
                           int k, float *dscores)
{
    /*
     * TODO: dscores (T x E) from dw (T x k).
     *   Through w = the chosen s over their sum; zero for the experts not chosen: the choice
     *   itself has no gradient.
     */
    // BEGIN SOLUTION
    for (int t = 0; t < T; t++) {
        const float *s = scores + (size_t)t * E, *g = dw + (size_t)t * k;
        const int *it = idx + (size_t)t * k;
        float *ds = dscores + (size_t)t * E, total = 0.0f, dot = 0.0f;
        for (int e = 0; e < E; e++)
            ds[e] = 0.0f;
        for (int j = 0; j < k; j++)
            total += s[it[j]];
        for (int j = 0; j < k; j++)
            dot += g[j] * s[it[j]] / total;
        for (int j = 0; j < k; j++)
            ds[it[j]] = (g[j] - dot) / total;
    }
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/node_limited_routing.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
