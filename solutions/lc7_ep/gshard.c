/*
 * gshard.c: expert parallelism as GShard does it: every token travels to the
 * ranks of its k experts, is computed there, and its outputs travel back.
 * docs/lc7_ep.md#gshard
 *
 * E experts over np ranks, E/np each: rank r holds experts r E/np ..
 * (r+1) E/np - 1. Every rank routes its own T tokens (x Wr, softmax, top k)
 * and then, since only it knows how many rows it will send where, the ranks
 * first tell each other: one MPI_Alltoall of the counts (E/np ints per peer:
 * how many rows for each of the peer's experts). Then the rows go (one
 * MPI_Alltoallv, grouped by destination rank, then by expert), each rank
 * regroups what it received by expert and runs its experts, and the outputs
 * go back the way they came (one MPI_Alltoallv, the counts transposed):
 *
 *   np 2, E 4, k 1            r0: e0 e1                  r1: e2 e3
 *   r0 tokens a0 a1 a2 a3     send: [a0 a2 | a1] [a3]    recv: [a0 a2 b1 | a1] [...]
 *   routed to e0 e1 e0 e2     counts to r0: 2 1, r1: 1 0    regrouped by expert:
 *   r1 tokens b0 b1 b2 b3     send: [b1 | ] [b0 b3 | b2]    e0: a0 a2 b1   e1: a1
 *   routed to e2 e0 e3 e2     counts to r0: 1 0, r1: 2 1    e2: a3 b0 b3   e3: b2
 *                             dispatch -->  experts  <-- combine
 *   y_t = sum_j w_tj expert_tj(x_t), at the token's home.
 *
 * Capacity (cf > 0): each expert takes at most C = ceil(k T cf / E) choices
 * of one rank's T tokens, in GShard's queue order: every first choice in
 * token order, then every second choice, ...; the rest are dropped (they
 * travel nowhere and add nothing). cf = 0 is dropless: the rows sent are
 * whatever the routing says, which is why the counts must be exchanged.
 *
 * Backward is the mirror with no count exchange (the forward's counts are
 * kept): w_tj dy_t travels to the experts (one MPI_Alltoallv), the experts'
 * backward gives their input gradients and adds to their weights' gradients
 * (from every rank's tokens), the input gradients travel home (one
 * MPI_Alltoallv). The gate gets dw_tj = <dy_t, out_tj> from the outputs the
 * combine brought home, and reaches x and Wr through the softmax.
 *
 * Cost per rank: the counts, E ints (E/np to each rank); the dispatch, d
 * floats per kept choice of its tokens, k T d floats dropless; the combine,
 * d floats per row its experts computed. Of each, the share addressed to the
 * rank itself stays home: under uniform routing (np-1)/np of k T d floats
 * leave per all-to-all, 4 all-to-alls of tokens per layer and step (2
 * forward, 2 backward). With a capacity no rank receives more than np C rows
 * per expert, whatever the routing.
 */
#include "kit.h" /* ep_layer_read, the expert bank */
#include "xt_nn.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What gshard_backward needs from the forward; it frees it (gshard_free when no backward
 * follows). x, wr and experts must stay unchanged until then. */
typedef struct gshard_state gshard_state;

gshard_state *gshard_forward(float *y, const float *x, const float *wr, const float *experts, int T,
                             int d, int E, int ff, int k, float cf, MPI_Comm comm);
void gshard_backward(gshard_state *s, float *dx, float *dwr, float *dexperts, const float *dy);
void gshard_free(gshard_state *s);

/* struct gshard_state, and any helper: yours to write. */
// BEGIN SOLUTION
struct gshard_state {
    MPI_Comm comm;
    int np, rank, T, d, E, ff, k, nl;       /* nl = E / np experts here */
    const float *x, *wr, *experts;          /* the forward's inputs */
    int *idx;                               /* T x k: the chosen experts */
    float *w, *probs;                       /* T x k weights, T x E probabilities */
    int *row;                               /* T x k: the choice's send row, -1 dropped */
    int nsend, nrecv;                       /* rows sent, rows received */
    int *scount, *sdispl, *rcount, *rdispl; /* per peer, in floats */
    int *ecount;                            /* nl: rows per local expert, from every peer */
    int *order;                             /* nrecv: received row i's expert-grouped row */
    float *xin;                             /* nrecv x d: the rows received, by expert */
    float *keep;                            /* what xt_experts_backward needs (3 nrecv ff) */
    float *out;                             /* nsend x d: the outputs, home, in send order */
};

static float *floats(long n)
{
    return malloc(sizeof(float) * (size_t)(n + 1)); /* +1: never malloc(0) */
}

static int *ints(long n)
{
    return calloc((size_t)(n + 1), sizeof(int));
}

/* Rows from the received (peer-major) order to the expert-grouped one (to_experts), or
 * back. */
static void regroup(float *dst, const float *src, const int *order, int n, int d, int to_experts)
{
    for (int i = 0; i < n; i++)
        memcpy(dst + (size_t)(to_experts ? order[i] : i) * d,
               src + (size_t)(to_experts ? i : order[i]) * d, sizeof(float) * (size_t)d);
}
// END SOLUTION

gshard_state *gshard_forward(float *y, const float *x, const float *wr, const float *experts, int T,
                             int d, int E, int ff, int k, float cf, MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    XT_CHECK(E % np == 0 && k >= 1 && k <= E, "gshard_forward: E=%d, k=%d on %d ranks", E, k, np);
    /*
     * TODO: route, dispatch, compute, combine.
     *   y (T x d) overwritten: sum_j w_tj expert_tj(x_t) over the kept choices, with
     *   xt_topk_route (renorm 0); cf > 0: capacity C = ceil(k T cf / E) per expert from this
     *   rank's tokens, in GShard's queue (all first choices in token order, then all second
     *   choices, ...); cf = 0: dropless. On comm exactly, in this order: one MPI_Alltoall of
     *   the counts (E/np ints to each rank: rows for each of its experts), one MPI_Alltoallv
     *   of the kept rows (grouped by rank, then expert), one MPI_Alltoallv back; nothing
     *   else. Every rank takes part, whatever it sends or receives. The local experts in one
     *   xt_experts_forward over the rows received, grouped by expert (the grader counts
     *   each expert's tokens). Returns what gshard_backward needs.
     */
    // BEGIN SOLUTION
    gshard_state *s = calloc(1, sizeof *s);
    int nl = E / np, rank;
    MPI_Comm_rank(comm, &rank);
    s->comm = comm, s->np = np, s->rank = rank, s->nl = nl;
    s->T = T, s->d = d, s->E = E, s->ff = ff, s->k = k;
    s->x = x, s->wr = wr, s->experts = experts;
    s->idx = ints((long)T * k);
    s->row = ints((long)T * k);
    s->w = floats((long)T * k);
    s->probs = floats((long)T * E);
    float *logits = floats((long)T * E);
    xt_gemm(0, 0, T, E, d, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(s->idx, s->w, s->probs, logits, T, E, k, 0);
    free(logits);

    /* GShard's queue: choice j of every token before choice j+1 of any; row = the
     * choice's place among its expert's kept rows, or -1 past the capacity. */
    int C = cf > 0.0f ? (int)ceil((double)k * T * cf / E) : INT_MAX;
    int *count = ints(E), *first = ints(E);
    for (int j = 0; j < k; j++)
        for (int t = 0; t < T; t++) {
            int e = s->idx[t * k + j];
            s->row[t * k + j] = count[e] < C ? count[e]++ : -1;
        }
    for (int e = 1; e < E; e++)
        first[e] = first[e - 1] + count[e - 1];
    s->nsend = first[E - 1] + count[E - 1];
    float *send = floats((long)s->nsend * d); /* by expert, so by rank, then expert */
    for (int i = 0; i < T * k; i++)
        if (s->row[i] >= 0) {
            s->row[i] += first[s->idx[i]];
            memcpy(send + (size_t)s->row[i] * d, x + (size_t)(i / k) * d, sizeof(float) * d);
        }

    /* got[p nl + j]: the rows peer p sends local expert j */
    int *got = ints((long)np * nl);
    MPI_Alltoall(count, nl, MPI_INT, got, nl, MPI_INT, comm);
    s->scount = ints(np), s->sdispl = ints(np), s->rcount = ints(np), s->rdispl = ints(np);
    s->ecount = ints(nl);
    for (int p = 0; p < np; p++) {
        for (int j = 0; j < nl; j++) {
            s->scount[p] += count[p * nl + j] * d;
            s->rcount[p] += got[p * nl + j] * d;
            s->ecount[j] += got[p * nl + j];
            s->nrecv += got[p * nl + j];
        }
        if (p) {
            s->sdispl[p] = s->sdispl[p - 1] + s->scount[p - 1];
            s->rdispl[p] = s->rdispl[p - 1] + s->rcount[p - 1];
        }
    }
    /* Received: peer by peer, each peer's rows by expert. Expert j's group gathers them
     * peer by peer. */
    int *at = ints(nl);
    s->order = ints(s->nrecv);
    for (int j = 1; j < nl; j++)
        at[j] = at[j - 1] + s->ecount[j - 1];
    for (int p = 0, i = 0; p < np; p++)
        for (int j = 0; j < nl; j++)
            for (int n = 0; n < got[p * nl + j]; n++)
                s->order[i++] = at[j]++;

    float *recv = floats((long)s->nrecv * d), *yin = floats((long)s->nrecv * d);
    s->xin = floats((long)s->nrecv * d);
    s->keep = floats(3L * s->nrecv * ff);
    s->out = floats((long)s->nsend * d);
    MPI_Alltoallv(send, s->scount, s->sdispl, MPI_FLOAT, recv, s->rcount, s->rdispl, MPI_FLOAT,
                  comm);
    regroup(s->xin, recv, s->order, s->nrecv, d, 1);
    xt_trace_begin("experts forward");
    xt_experts_forward(yin, s->keep, s->xin, s->ecount, rank * nl, nl, experts, d, ff);
    xt_trace_end();
    regroup(recv, yin, s->order, s->nrecv, d, 0);
    MPI_Alltoallv(recv, s->rcount, s->rdispl, MPI_FLOAT, s->out, s->scount, s->sdispl, MPI_FLOAT,
                  comm);

    memset(y, 0, sizeof(float) * (size_t)T * d);
    for (int i = 0; i < T * k; i++)
        if (s->row[i] >= 0)
            for (int c = 0; c < d; c++)
                y[(size_t)(i / k) * d + c] += s->w[i] * s->out[(size_t)s->row[i] * d + c];
    free(count);
    free(first);
    free(send);
    free(got);
    free(at);
    free(recv);
    free(yin);
    return s;
    // END SOLUTION
}

void gshard_backward(gshard_state *s, float *dx, float *dwr, float *dexperts, const float *dy)
{
    /*
     * TODO: the mirror: gradients to the experts and back.
     *   dx (T x d) overwritten: through the experts and through the router
     *   (xt_topk_route_backward, dw_tj = <dy_t, out_tj>, nothing for a dropped choice);
     *   dwr += x^T dlogits of this rank's tokens; dexperts += its experts' gradients from
     *   every rank's tokens (xt_experts_backward). On comm exactly two MPI_Alltoallv (w dy
     *   out, input gradients back), the forward's counts reused: no count exchange, nothing
     *   else. Frees s.
     */
    // BEGIN SOLUTION
    int T = s->T, d = s->d, E = s->E, k = s->k;
    float *dw = floats((long)T * k), *g = floats((long)s->nsend * d);
    for (int i = 0; i < T * k; i++) { /* dw: the gate's gradient; g: w dy, in send order */
        double dot = 0.0;
        if (s->row[i] >= 0) {
            const float *dyt = dy + (size_t)(i / k) * d, *o = s->out + (size_t)s->row[i] * d;
            float *gi = g + (size_t)s->row[i] * d;
            for (int c = 0; c < d; c++) {
                dot += (double)dyt[c] * o[c];
                gi[c] = s->w[i] * dyt[c];
            }
        }
        dw[i] = (float)dot;
    }
    float *recv = floats((long)s->nrecv * d), *gin = floats((long)s->nrecv * d);
    float *dxin = floats((long)s->nrecv * d);
    MPI_Alltoallv(g, s->scount, s->sdispl, MPI_FLOAT, recv, s->rcount, s->rdispl, MPI_FLOAT,
                  s->comm);
    regroup(gin, recv, s->order, s->nrecv, d, 1);
    xt_trace_begin("experts backward");
    xt_experts_backward(dxin, dexperts, gin, s->xin, s->keep, s->ecount, s->rank * s->nl, s->nl,
                        s->experts, d, s->ff);
    xt_trace_end();
    regroup(recv, dxin, s->order, s->nrecv, d, 0);
    MPI_Alltoallv(recv, s->rcount, s->rdispl, MPI_FLOAT, g, s->scount, s->sdispl, MPI_FLOAT,
                  s->comm);

    /* The router: dlogits from dw, then dx = dlogits Wr^T plus each kept choice's share. */
    float *dlogits = floats((long)T * E);
    xt_topk_route_backward(dlogits, dw, s->probs, s->idx, T, E, k, 0);
    xt_gemm(0, 1, T, d, E, 1.0f, dlogits, s->wr, 0.0f, dx);
    for (int i = 0; i < T * k; i++)
        if (s->row[i] >= 0)
            for (int c = 0; c < d; c++)
                dx[(size_t)(i / k) * d + c] += g[(size_t)s->row[i] * d + c];
    xt_gemm(1, 0, d, E, T, 1.0f, s->x, dlogits, 1.0f, dwr);
    free(dw);
    free(g);
    free(recv);
    free(gin);
    free(dxin);
    free(dlogits);
    gshard_free(s);
    // END SOLUTION
}

void gshard_free(gshard_state *s)
{
    /* TODO: free what gshard_forward kept (s may be NULL). */
    // BEGIN SOLUTION
    if (!s)
        return;
    free(s->idx);
    free(s->w);
    free(s->probs);
    free(s->row);
    free(s->scount);
    free(s->sdispl);
    free(s->rcount);
    free(s->rdispl);
    free(s->ecount);
    free(s->order);
    free(s->xin);
    free(s->keep);
    free(s->out);
    free(s);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/gshard.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
