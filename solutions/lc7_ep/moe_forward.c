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
    // BEGIN SOLUTION
    long n = (long)T * k; /* the choices: token t's j-th is c = t k + j */
    long per = xt_expert_params(d, ff);
    float *logits = malloc(sizeof(float) * ((size_t)T * E + 1));
    float *probs = malloc(sizeof(float) * ((size_t)T * E + 1));
    float *w = malloc(sizeof(float) * ((size_t)n + 1));
    int *idx = malloc(sizeof(int) * ((size_t)n + 1)), *slot = malloc(sizeof(int) * ((size_t)n + 1));
    int *count = calloc((size_t)E + 1, sizeof(int)), *start = malloc(sizeof(int) * ((size_t)E + 1));
    xt_gemm(0, 0, T, E, d, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, T, E, k, 0);

    /* Group the choices by expert, token order within each: choice c is row slot[c]. */
    for (long c = 0; c < n; c++)
        count[idx[c]]++;
    start[0] = 0;
    for (int e = 0; e < E; e++)
        start[e + 1] = start[e] + count[e];
    float *xs = malloc(sizeof(float) * ((size_t)n * d + 1));
    float *g = malloc(sizeof(float) * ((size_t)n * ff + 1));
    float *u = malloc(sizeof(float) * ((size_t)n * ff + 1));
    float *out = malloc(sizeof(float) * ((size_t)n * d + 1));
    int *next = malloc(sizeof(int) * ((size_t)E + 1));
    memcpy(next, start, sizeof(int) * (size_t)E);
    for (long c = 0; c < n; c++) {
        slot[c] = next[idx[c]]++;
        memcpy(xs + (long)slot[c] * d, x + c / k * d, sizeof(float) * (size_t)d);
    }

    /* Each expert on its rows: g = xs Wg, u = xs Wu, h = silu(g) u (into g), out = h Wd. */
    for (int e = 0; e < E; e++) {
        int m = count[e];
        if (!m)
            continue; /* no token: nothing to compute */
        const float *wg = experts + e * per, *wu = wg + (long)d * ff, *wd = wu + (long)d * ff;
        const float *xe = xs + (long)start[e] * d;
        float *ge = g + (long)start[e] * ff, *ue = u + (long)start[e] * ff;
        xt_gemm(0, 0, m, ff, d, 1.0f, xe, wg, 0.0f, ge);
        xt_gemm(0, 0, m, ff, d, 1.0f, xe, wu, 0.0f, ue);
        for (long i = 0; i < (long)m * ff; i++)
            ge[i] = ge[i] / (1.0f + expf(-ge[i])) * ue[i];
        xt_gemm(0, 0, m, d, ff, 1.0f, ge, wd, 0.0f, out + (long)start[e] * d);
    }

    /* The combine: y_t = sum_j w_tj out_tj. */
    memset(y, 0, sizeof(float) * (size_t)T * d);
    for (long c = 0; c < n; c++)
        for (int i = 0; i < d; i++)
            y[c / k * d + i] += w[c] * out[(long)slot[c] * d + i];

    /* The Switch loss: f_i = count_i / (k T), P_i = mean_t probs[t][i]. */
    double loss = 0.0;
    for (int e = 0; e < E && T; e++) {
        double P = 0.0;
        for (int t = 0; t < T; t++)
            P += probs[(long)t * E + e];
        loss += (double)count[e] / (double)n * (P / T);
    }
    free(logits);
    free(probs);
    free(w);
    free(idx);
    free(slot);
    free(count);
    free(start);
    free(next);
    free(xs);
    free(g);
    free(u);
    free(out);
    return (float)(alpha * E * loss);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/moe_forward.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
