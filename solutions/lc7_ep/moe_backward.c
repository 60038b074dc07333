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
    // BEGIN SOLUTION
    long n = (long)T * k, per = xt_expert_params(d, ff);
    float *logits = malloc(sizeof(float) * ((size_t)T * E + 1));
    float *probs = malloc(sizeof(float) * ((size_t)T * E + 1));
    float *w = malloc(sizeof(float) * ((size_t)n + 1)),
          *dw = malloc(sizeof(float) * ((size_t)n + 1));
    int *idx = malloc(sizeof(int) * ((size_t)n + 1)), *slot = malloc(sizeof(int) * ((size_t)n + 1));
    int *count = calloc((size_t)E + 1, sizeof(int)), *start = malloc(sizeof(int) * ((size_t)E + 1));
    int *next = malloc(sizeof(int) * ((size_t)E + 1));
    xt_gemm(0, 0, T, E, d, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, T, E, k, 0);

    /* The forward's grouping: choice c = t k + j is row slot[c] of its expert's rows. */
    for (long c = 0; c < n; c++)
        count[idx[c]]++;
    start[0] = 0;
    for (int e = 0; e < E; e++)
        start[e + 1] = start[e] + count[e];
    memcpy(next, start, sizeof(int) * (size_t)E);
    size_t nd = (size_t)n * d + 1, nf = (size_t)n * ff + 1;
    float *xs = malloc(sizeof(float) * nd), *out = malloc(sizeof(float) * nd);
    float *dos = malloc(sizeof(float) * nd), *dxs = malloc(sizeof(float) * nd);
    float *g = malloc(sizeof(float) * nf), *u = malloc(sizeof(float) * nf);
    float *h = malloc(sizeof(float) * nf), *dh = malloc(sizeof(float) * nf);
    for (long c = 0; c < n; c++) {
        slot[c] = next[idx[c]]++;
        memcpy(xs + (long)slot[c] * d, x + c / k * d, sizeof(float) * (size_t)d);
    }
    for (int e = 0; e < E; e++) /* each expert's g, u, h and output again */
        if (count[e]) {
            const float *wg = experts + e * per, *wu = wg + (long)d * ff, *wd = wu + (long)d * ff;
            long r = start[e];
            xt_swiglu_forward(out + r * d, g + r * ff, u + r * ff, h + r * ff, xs + r * d, wg, wu,
                              wd, count[e], d, ff);
        }

    /* The combine's backward: dw_tj = <dy_t, out_tj>; expert output gradient w_tj dy_t. */
    for (long c = 0; c < n; c++) {
        const float *dyt = dy + c / k * d, *o = out + (long)slot[c] * d;
        float *dot = dos + (long)slot[c] * d;
        double sum = 0.0;
        for (int i = 0; i < d; i++) {
            sum += (double)dyt[i] * o[i];
            dot[i] = w[c] * dyt[i];
        }
        dw[c] = (float)sum;
    }

    /* Each expert's SwiGLU backward, on its rows. */
    for (int e = 0; e < E; e++) {
        int m = count[e];
        if (!m)
            continue;
        const float *wg = experts + e * per, *wu = wg + (long)d * ff, *wd = wu + (long)d * ff;
        float *dwg = dexperts + e * per, *dwu = dwg + (long)d * ff, *dwd = dwu + (long)d * ff;
        long r = start[e];
        float *ge = g + r * ff, *ue = u + r * ff, *dhe = dh + r * ff;
        xt_gemm(1, 0, ff, d, m, 1.0f, h + r * ff, dos + r * d, 1.0f, dwd); /* dWd += h^T do */
        xt_gemm(0, 1, m, ff, d, 1.0f, dos + r * d, wd, 0.0f, dhe);         /* dh = do Wd^T */
        for (long i = 0; i < (long)m * ff; i++) {
            float s = 1.0f / (1.0f + expf(-ge[i]));
            float du = dhe[i] * ge[i] * s;                             /* dh silu(g) */
            dhe[i] = dhe[i] * ue[i] * s * (1.0f + ge[i] * (1.0f - s)); /* dg = dh u silu'(g) */
            ue[i] = du;
        }
        xt_gemm(1, 0, d, ff, m, 1.0f, xs + r * d, dhe, 1.0f, dwg); /* dWg += x^T dg */
        xt_gemm(1, 0, d, ff, m, 1.0f, xs + r * d, ue, 1.0f, dwu);  /* dWu += x^T du */
        xt_gemm(0, 1, m, d, ff, 1.0f, dhe, wg, 0.0f, dxs + r * d); /* dx = dg Wg^T */
        xt_gemm(0, 1, m, d, ff, 1.0f, ue, wu, 1.0f, dxs + r * d);  /*    + du Wu^T */
    }
    memset(dx, 0, sizeof(float) * (size_t)T * d);
    for (long c = 0; c < n; c++)
        for (int i = 0; i < d; i++)
            dx[c / k * d + i] += dxs[(long)slot[c] * d + i];

    /* The router, through the chosen probabilities (dw), then through every P_i of the
     * balance loss: dprobs[t][i] = a_i = alpha E f_i / T, and the softmax backward
     * dlogits[t][i] += p_ti (a_i - sum_e p_te a_e). */
    float *dlogits = malloc(sizeof(float) * ((size_t)T * E + 1));
    double *a = malloc(sizeof(double) * ((size_t)E + 1));
    xt_topk_route_backward(dlogits, dw, probs, idx, T, E, k, 0);
    for (int e = 0; e < E; e++)
        a[e] = (double)alpha * E * count[e] / (double)n / T;
    for (int t = 0; t < T; t++) {
        const float *p = probs + (long)t * E;
        double pa = 0.0;
        for (int e = 0; e < E; e++)
            pa += p[e] * a[e];
        for (int e = 0; e < E; e++)
            dlogits[(long)t * E + e] += (float)(p[e] * (a[e] - pa));
    }
    xt_gemm(1, 0, d, E, T, 1.0f, x, dlogits, 1.0f, dwr); /* dWr += x^T dlogits */
    xt_gemm(0, 1, T, d, E, 1.0f, dlogits, wr, 1.0f, dx); /* dx += dlogits Wr^T */
    free(logits);
    free(probs);
    free(w);
    free(dw);
    free(idx);
    free(slot);
    free(count);
    free(start);
    free(next);
    free(xs);
    free(out);
    free(dos);
    free(dxs);
    free(g);
    free(u);
    free(h);
    free(dh);
    free(dlogits);
    free(a);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/moe_backward.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
