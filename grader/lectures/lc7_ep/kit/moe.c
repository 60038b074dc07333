/*
 * moe.c: the pieces lecture 7's mixture-of-experts layers share (kit.h):
 * softmax top-k routing with its backward, and a bank of SwiGLU
 * experts applied to tokens grouped by expert, one GEMM chain per expert.
 * grader/nn.py holds the NumPy twins (topk_route, experts_forward and the
 * rest).
 *
 * Each expert's call is logged in the case record as an X line (xt_event):
 * forward or backward, the expert's global index, the tokens it computed,
 * when, how many MPI events came before it, and how many exchanges were
 * pending while it ran. From these lines the grader counts each expert's
 * tokens against the routing histogram, and sees whether a dispatch or a
 * combine was in flight under the compute.
 */
#include "kit.h"
#include "xt_harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void check_route(const char *fn, int T, int E, int k)
{
    if (T < 0 || E < 1 || k < 1 || k > E)
        xt_die("%s(T=%d, E=%d, k=%d): needs T >= 0, E >= 1 and 1 <= k <= E", fn, T, E, k);
}

void xt_topk_route(int *idx, float *w, float *probs, const float *logits, int T, int E, int k,
                   int renorm)
{
    check_route("xt_topk_route", T, E, k);
    xt_softmax_rows(probs, logits, T, E);
    for (int t = 0; t < T; t++) {
        const float *p = probs + (long)t * E, *z = logits + (long)t * E;
        int *it = idx + (long)t * k;
        float *wt = w + (long)t * k;
        double sum = 0.0;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++)
                    taken |= it[i] == e;
                /* Chosen by the logits, which softmax keeps in order and which rounding
                 * cannot make equal; strictly greater: of equal ones the lower expert wins. */
                if (!taken && (best < 0 || z[e] > z[best]))
                    best = e;
            }
            it[j] = best;
            wt[j] = p[best];
            sum += p[best];
        }
        if (renorm)
            for (int j = 0; j < k; j++)
                wt[j] = (float)(wt[j] / sum);
    }
}

void xt_topk_route_backward(float *dlogits, const float *dw, const float *probs, const int *idx,
                            int T, int E, int k, int renorm)
{
    check_route("xt_topk_route_backward", T, E, k);
    for (int t = 0; t < T; t++) {
        const float *p = probs + (long)t * E;
        const int *it = idx + (long)t * k;
        const float *dwt = dw + (long)t * k;
        float *dl = dlogits + (long)t * E;
        /* dp: the gradient of each probability, nonzero at the k selected only */
        double sel = 0.0, dot = 0.0, pdp = 0.0;
        for (int j = 0; j < k; j++) {
            sel += p[it[j]];
            dot += (double)dwt[j] * p[it[j]];
        }
#define DP(j) (renorm ? (dwt[j] - dot / sel) / sel : (double)dwt[j])
        /* softmax backward: dl = p (dp - sum_e p_e dp_e) */
        for (int j = 0; j < k; j++)
            pdp += p[it[j]] * DP(j);
        for (int e = 0; e < E; e++)
            dl[e] = (float)(-p[e] * pdp);
        for (int j = 0; j < k; j++)
            dl[it[j]] = (float)(p[it[j]] * (DP(j) - pdp));
#undef DP
    }
}

long xt_expert_params(int d, int ff)
{
    return 3L * d * ff;
}

static void check_experts(const char *fn, const int *counts, int first, int ne, int d, int ff)
{
    if (first < 0 || ne < 0 || d < 1 || ff < 1)
        xt_die("%s(first=%d, ne=%d, d=%d, ff=%d): needs first, ne >= 0 and d, ff >= 1", fn, first,
               ne, d, ff);
    for (int j = 0; j < ne; j++)
        if (counts[j] < 0)
            xt_die("%s: counts[%d] = %d tokens for expert %d, below zero", fn, j, counts[j],
                   first + j);
}

/* The expert calls logged since the case began (or, in a demo, since the program began). */
static xt_expert_call *log_calls;
static long log_n, log_cap;

static void log_clear(void)
{
    log_n = 0;
}

/* The X kind and the per-case log, declared once as the program starts. */
__attribute__((constructor)) static void declare_events(void)
{
    xt_event_kind("X", "expert call: F|B expert tokens start end events-before exchanges-pending "
                       "their-bytes");
    xt_on_case_begin(log_clear);
}

static void record(char op, int expert, int tokens, double start, long events)
{
    long bytes = 0;
    int pending = xt_exchanges_pending(&bytes);
    double end = xt_case_clock();
    xt_event("X", "%c %d %d %.6f %.6f %ld %d %ld", op, expert, tokens, start, end, events, pending,
             bytes);
    if (log_n == log_cap) {
        log_cap = log_cap ? 2 * log_cap : 64;
        log_calls = realloc(log_calls, (size_t)log_cap * sizeof *log_calls);
        XT_CHECK(log_calls, "out of memory for the log of expert calls");
    }
    log_calls[log_n++] = (xt_expert_call){.op = op,
                                          .expert = expert,
                                          .tokens = tokens,
                                          .pending = pending,
                                          .pending_bytes = bytes,
                                          .events_before = events,
                                          .seconds = end - start};
}

long xt_expert_log(xt_expert_call *out, long from, long max)
{
    long copied = 0;
    for (long i = from; out && i < log_n && copied < max; i++)
        out[copied++] = log_calls[i];
    return log_n;
}

void xt_experts_forward(float *y, float *keep, const float *x, const int *counts, int first, int ne,
                        const float *params, int d, int ff)
{
    check_experts("xt_experts_forward", counts, first, ne, d, ff);
    long per = xt_expert_params(d, ff), rows = 0;
    float *scratch = NULL;
    if (!keep) {
        int most = 0;
        for (int j = 0; j < ne; j++)
            most = counts[j] > most ? counts[j] : most;
        scratch = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)(3L * most * ff + 1));
    }
    for (int j = 0; j < ne; j++) {
        double start = xt_case_clock();
        long events = xt_events_logged();
        int n = counts[j];
        const float *p = params + j * per;
        float *g = keep ? keep + 3 * rows * ff : scratch, *u = g + (long)n * ff,
              *h = u + (long)n * ff;
        if (n)
            xt_swiglu_forward(y + rows * d, g, u, h, x + rows * d, p, p + (long)d * ff,
                              p + 2L * d * ff, n, d, ff);
        record('F', first + j, n, start, events);
        rows += n;
    }
    xt_free(scratch);
}

void xt_experts_backward(float *dx, float *dparams, const float *dy, const float *x,
                         const float *keep, const int *counts, int first, int ne,
                         const float *params, int d, int ff)
{
    check_experts("xt_experts_backward", counts, first, ne, d, ff);
    long per = xt_expert_params(d, ff), rows = 0;
    for (int j = 0; j < ne; j++) {
        double start = xt_case_clock();
        long events = xt_events_logged();
        int n = counts[j];
        const float *p = params + j * per;
        float *dp = dparams ? dparams + j * per : NULL;
        const float *g = keep + 3 * rows * ff, *u = g + (long)n * ff, *h = u + (long)n * ff;
        if (n)
            xt_swiglu_backward(dx ? dx + rows * d : NULL, dp, dp ? dp + (long)d * ff : NULL,
                               dp ? dp + 2L * d * ff : NULL, dy + rows * d, x + rows * d, g, u, h,
                               p, p + (long)d * ff, p + 2L * d * ff, n, d, ff);
        record('B', first + j, n, start, events);
        rows += n;
    }
}

double ep_demo_check(MPI_Comm comm, const float *y, const float *x, const float *wr,
                     const float *all, int T, int d, int E, int ff, int k, int s)
{
    long per = xt_expert_params(d, ff);
    float *logits = malloc(sizeof(float) * ((size_t)T * E * 2 + (size_t)T * k + 2 * (size_t)d + 1));
    float *probs = logits + (size_t)T * E, *w = probs + (size_t)T * E, *one = w + (size_t)T * k;
    float *acc = one + d;
    int *idx = malloc(sizeof(int) * ((size_t)T * k + 1)), one_row = 1;
    xt_gemm(0, 0, T, E, d, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, T, E, k, 0);
    double worst = 0.0;
    for (int t = 0; t < T; t++) {
        memset(acc, 0, sizeof(float) * (size_t)d);
        for (int j = 0; j < k + s; j++) { /* the k routed, then the s shared */
            int e = j < k ? idx[t * k + j] : E + j - k;
            xt_experts_forward(one, NULL, x + (size_t)t * d, &one_row, e, 1, all + (size_t)e * per,
                               d, ff);
            for (int c = 0; c < d; c++)
                acc[c] += (j < k ? w[t * k + j] : 1.0f) * one[c];
        }
        for (int c = 0; c < d; c++)
            worst = fmax(worst, fabs((double)acc[c] - y[(size_t)t * d + c]));
    }
    PMPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "y matches the layer on one process: %s (largest difference %.1e)\n",
                   worst < 1e-5 ? "yes" : "NO", worst);
    free(logits);
    free(idx);
    return worst;
}
