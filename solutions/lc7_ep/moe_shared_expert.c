/*
 * moe_shared_expert.c: DeepSeekMoE's layer under expert parallelism: shared
 * experts that every token goes through, beside the routed ones, computed
 * while the dispatch is on the wire. docs/lc7_ep.md#moe_shared_expert
 *
 * DeepSeekMoE (Dai et al. 2024) splits the experts into many fine-grained
 * routed ones and a few shared ones outside the routing, which hold what every
 * token needs:
 *
 *     y_t = sum_i shared_i(x_t) + sum_j w_tj routed_idx_tj(x_t)
 *
 * The routed part is gshard.c's (dropless): counts exchanged, rows dispatched
 * to the ranks of their experts, computed, combined back. The shared experts
 * are dense: every rank holds all s of them and computes them on its own T
 * tokens, with nothing to exchange, which makes them the work to run while the
 * dispatch travels:
 *
 *     route, counts (MPI_Alltoall) | MPI_Ialltoallv(rows) ......... wait |
 *                                  | shared experts on the own tokens    | routed experts |
 *                                                                          combine (MPI_Alltoallv)
 *
 * Backward mirrors it: w dy to the routed experts' ranks and their input
 * gradients back, the router's gradient through the weights, and the shared
 * experts' backward on the own tokens (their weights' gradient from this
 * rank's tokens; data parallelism sums it over the ranks, as it does Wr's).
 *
 * Cost per rank: gshard's bytes (the counts, E ints; d floats per choice out
 * and per row its experts computed back, forward and again backward), none for
 * the shared experts; their compute, 6 s T d ff flops forward, hides the
 * dispatch when it is at least as long.
 */
#include "kit.h" /* the expert bank */
#include "xt_nn.h"

#include <stdlib.h>
#include <string.h>

/* What shared_moe_backward needs from the forward; it frees it (shared_moe_free when no
 * backward follows). x, wr, experts and shared must stay unchanged until then. */
typedef struct shared_moe shared_moe;

shared_moe *shared_moe_forward(float *y, const float *x, const float *wr, const float *experts,
                               const float *shared, int T, int d, int E, int ff, int k, int s,
                               MPI_Comm comm);
void shared_moe_backward(shared_moe *m, float *dx, float *dwr, float *dexperts, float *dshared,
                         const float *dy);
void shared_moe_free(shared_moe *m);

/* struct shared_moe, and any helper: yours to write. */
// BEGIN SOLUTION
struct shared_moe {
    MPI_Comm comm;
    int np, rank, T, d, E, ff, k, s, nl;
    const float *x, *wr, *experts, *shared;
    int *idx;                               /* T x k: the chosen experts */
    float *w, *probs;                       /* T x k weights, T x E probabilities */
    int *row;                               /* T x k: the choice's row in send order */
    int nsend, nrecv;                       /* rows sent, rows received */
    int *scount, *sdispl, *rcount, *rdispl; /* per peer, in floats */
    int *ecount;                            /* nl: rows per local expert, from every peer */
    int *order;                             /* nrecv: received row i's expert-grouped row */
    float *xin, *keep;                      /* the rows by expert; what their backward needs */
    float *out;                             /* nsend x d: the routed outputs, home */
    float *skeep;                           /* s x 3 T ff: the shared experts' backward */
};

static float *floats(long n)
{
    return malloc(sizeof(float) * (size_t)(n + 1));
}

static int *ints(long n)
{
    return calloc((size_t)(n + 1), sizeof(int));
}

static void regroup(float *dst, const float *src, const int *order, int n, int d, int to_experts)
{
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)(to_experts ? order[i] : i) * d,
               src + (size_t)(to_experts ? i : order[i]) * d, sizeof(float) * (size_t)d);
}
// END SOLUTION

shared_moe *shared_moe_forward(float *y, const float *x, const float *wr, const float *experts,
                               const float *shared, int T, int d, int E, int ff, int k, int s,
                               MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    XT_CHECK(E % np == 0 && k >= 1 && k <= E && s >= 0,
             "shared_moe_forward: E=%d, k=%d, s=%d "
             "on %d ranks",
             E, k, s, np);
    /*
     * TODO: the forward.
     *   y (T x d) overwritten: sum_i shared_i(x_t) + sum_j w_tj expert_tj(x_t), the routed
     *   part gshard.c's (dropless). Shared expert i is the bank's expert E + i (first E + i,
     *   parameters at shared + i xt_expert_params(d, ff)), on this rank's T tokens. On comm,
     *   in order: one MPI_Alltoall of the counts, one MPI_Ialltoallv of the rows, one
     *   MPI_Alltoallv back; nothing else. Every shared expert computed while the dispatch
     *   is pending (after its start, before its wait); the routed experts in one
     *   xt_experts_forward over the rows received, grouped by expert.
     */
    // BEGIN SOLUTION
    shared_moe *m = calloc(1, sizeof *m);
    int nl = E / np, rank;
    MPI_Comm_rank(comm, &rank);
    m->comm = comm, m->np = np, m->rank = rank, m->nl = nl;
    m->T = T, m->d = d, m->E = E, m->ff = ff, m->k = k, m->s = s;
    m->x = x, m->wr = wr, m->experts = experts, m->shared = shared;
    m->idx = ints((long)T * k);
    m->row = ints((long)T * k);
    m->w = floats((long)T * k);
    m->probs = floats((long)T * E);
    float *logits = floats((long)T * E);
    xt_gemm(0, 0, T, E, d, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(m->idx, m->w, m->probs, logits, T, E, k, 0);
    free(logits);

    /* Rows by expert (so by rank), token order within each. */
    int *count = ints(E), *first = ints(E);
    for (int i = 0; i < T * k; i++)
        count[m->idx[i]]++;
    for (int e = 1; e < E; e++)
        first[e] = first[e - 1] + count[e - 1];
    m->nsend = T * k;
    float *send = floats((long)m->nsend * d);
    int *at = ints(E);
    memcpy(at, first, sizeof(int) * (size_t)E);
    for (int i = 0; i < T * k; i++) {
        m->row[i] = at[m->idx[i]]++;
        memcpy(send + (size_t)m->row[i] * d, x + (size_t)(i / k) * d, sizeof(float) * d);
    }
    int *got = ints((long)np * nl);
    MPI_Alltoall(count, nl, MPI_INT, got, nl, MPI_INT, comm);
    m->scount = ints(np), m->sdispl = ints(np), m->rcount = ints(np), m->rdispl = ints(np);
    m->ecount = ints(nl);
    for (int p = 0; p < np; p++) {
        for (int j = 0; j < nl; j++) {
            m->scount[p] += count[p * nl + j] * d;
            m->rcount[p] += got[p * nl + j] * d;
            m->ecount[j] += got[p * nl + j];
            m->nrecv += got[p * nl + j];
        }
        if (p) {
            m->sdispl[p] = m->sdispl[p - 1] + m->scount[p - 1];
            m->rdispl[p] = m->rdispl[p - 1] + m->rcount[p - 1];
        }
    }
    int *next = ints(nl);
    m->order = ints(m->nrecv);
    for (int j = 1; j < nl; j++)
        next[j] = next[j - 1] + m->ecount[j - 1];
    for (int p = 0, i = 0; p < np; p++)
        for (int j = 0; j < nl; j++)
            for (int n = 0; n < got[p * nl + j]; n++)
                m->order[i++] = next[j]++;

    float *recv = floats((long)m->nrecv * d), *yin = floats((long)m->nrecv * d);
    m->xin = floats((long)m->nrecv * d);
    m->keep = floats(3L * m->nrecv * ff);
    m->out = floats((long)m->nsend * d);
    m->skeep = floats(3L * s * T * ff);
    MPI_Request dispatch;
    MPI_Ialltoallv(send, m->scount, m->sdispl, MPI_FLOAT, recv, m->rcount, m->rdispl, MPI_FLOAT,
                   comm, &dispatch);

    /* The shared experts while the rows travel: y starts as their sum. */
    long per = xt_expert_params(d, ff);
    float *ys = floats((long)T * d);
    memset(y, 0, sizeof(float) * (size_t)T * d);
    for (int i = 0; i < s; i++) {
        xt_experts_forward(ys, m->skeep + 3L * i * T * ff, x, &T, E + i, 1, shared + i * per, d,
                           ff);
        for (long c = 0; c < (long)T * d; c++)
            y[c] += ys[c];
    }
    MPI_Wait(&dispatch, MPI_STATUS_IGNORE);

    regroup(m->xin, recv, m->order, m->nrecv, d, 1);
    xt_experts_forward(yin, m->keep, m->xin, m->ecount, rank * nl, nl, experts, d, ff);
    regroup(recv, yin, m->order, m->nrecv, d, 0);
    MPI_Alltoallv(recv, m->rcount, m->rdispl, MPI_FLOAT, m->out, m->scount, m->sdispl, MPI_FLOAT,
                  comm);
    for (int i = 0; i < T * k; i++)
        for (int c = 0; c < d; c++)
            y[(size_t)(i / k) * d + c] += m->w[i] * m->out[(size_t)m->row[i] * d + c];
    free(count), free(first), free(send), free(at), free(got), free(next);
    free(recv), free(yin), free(ys);
    return m;
    // END SOLUTION
}

void shared_moe_backward(shared_moe *m, float *dx, float *dwr, float *dexperts, float *dshared,
                         const float *dy)
{
    /*
     * TODO: the backward.
     *   Every gradient, the mirror. dx (T x d) overwritten: through the shared experts, the
     *   routed ones and the router (dw_tj = <dy_t, out_tj>); dwr += x^T dlogits and dshared
     *   += (s blocks) from this rank's tokens; dexperts += its experts' from every rank's.
     *   On comm exactly two MPI_Alltoallv: w dy out, the input gradients back.
     *   Frees m.
     */
    // BEGIN SOLUTION
    int T = m->T, d = m->d, E = m->E, k = m->k, ff = m->ff;
    float *dw = floats((long)T * k), *g = floats((long)m->nsend * d);
    for (int i = 0; i < T * k; i++) {
        double dot = 0.0;
        const float *dyt = dy + (size_t)(i / k) * d, *o = m->out + (size_t)m->row[i] * d;
        float *gi = g + (size_t)m->row[i] * d;
        for (int c = 0; c < d; c++) {
            dot += (double)dyt[c] * o[c];
            gi[c] = m->w[i] * dyt[c];
        }
        dw[i] = (float)dot;
    }
    float *recv = floats((long)m->nrecv * d), *gin = floats((long)m->nrecv * d);
    float *dxin = floats((long)m->nrecv * d);
    MPI_Alltoallv(g, m->scount, m->sdispl, MPI_FLOAT, recv, m->rcount, m->rdispl, MPI_FLOAT,
                  m->comm);
    regroup(gin, recv, m->order, m->nrecv, d, 1);
    xt_experts_backward(dxin, dexperts, gin, m->xin, m->keep, m->ecount, m->rank * m->nl, m->nl,
                        m->experts, d, ff);
    regroup(recv, dxin, m->order, m->nrecv, d, 0);
    MPI_Alltoallv(recv, m->rcount, m->rdispl, MPI_FLOAT, g, m->scount, m->sdispl, MPI_FLOAT,
                  m->comm);

    /* The router, then every route into dx: the routed rows, the shared experts. */
    float *dlogits = floats((long)T * E), *dxs = floats((long)T * d);
    xt_topk_route_backward(dlogits, dw, m->probs, m->idx, T, E, k, 0);
    xt_gemm(0, 1, T, d, E, 1.0f, dlogits, m->wr, 0.0f, dx);
    for (int i = 0; i < T * k; i++)
        for (int c = 0; c < d; c++)
            dx[(size_t)(i / k) * d + c] += g[(size_t)m->row[i] * d + c];
    long per = xt_expert_params(d, ff);
    for (int i = 0; i < m->s; i++) {
        xt_experts_backward(dxs, dshared + i * per, dy, m->x, m->skeep + 3L * i * T * ff, &T, E + i,
                            1, m->shared + i * per, d, ff);
        for (long c = 0; c < (long)T * d; c++)
            dx[c] += dxs[c];
    }
    xt_gemm(1, 0, d, E, T, 1.0f, m->x, dlogits, 1.0f, dwr);
    free(dw), free(g), free(recv), free(gin), free(dxin), free(dlogits), free(dxs);
    shared_moe_free(m);
    // END SOLUTION
}

void shared_moe_free(shared_moe *m)
{
    /* TODO: free what shared_moe_forward kept (m may be NULL). */
    // BEGIN SOLUTION
    if (!m)
        return;
    free(m->idx), free(m->w), free(m->probs), free(m->row);
    free(m->scount), free(m->sdispl), free(m->rcount), free(m->rdispl);
    free(m->ecount), free(m->order), free(m->xin), free(m->keep), free(m->out), free(m->skeep);
    free(m);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/moe_shared_expert.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
