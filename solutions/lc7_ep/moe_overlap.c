/*
 * moe_overlap.c: one MoE layer with expert parallelism, its T tokens cut
 * into two micro-batches whose exchanges run under each other's experts.
 * docs/lc7_ep.md#moe_overlap
 *
 * GShard's layer is four steps in a row: route, dispatch (rows to the ranks
 * of their experts), experts, combine (outputs back). While the rows travel
 * nothing computes, and while the experts compute nothing travels. Cut the
 * tokens in two micro-batches (xt_block(T, 2, m)) and interleave them, as
 * DualPipe interleaves a forward with a backward:
 *
 *             exchange                           compute
 *   post every receive; start dispatch 0 and 1
 *   wait dispatch 0
 *             dispatch 1 in flight  ...........  experts 0
 *   start combine 0; wait dispatch 1
 *             combine 0 in flight   ...........  experts 1
 *   start combine 1; wait everything; y = sum of the weighted outputs
 *
 * Four exchanges between each pair of ranks, each a point-to-point message
 * with its own tag (dispatch 0, dispatch 1, combine 0, combine 1): in flight
 * together, two of them with one tag could swap their data. The counts of
 * both micro-batches go in one MPI_Alltoall first (2 E/np ints to each
 * rank), since a rank cannot receive rows without knowing how many.
 *
 * Cost per rank r, with D_m[s][p] the rows (choices) of micro-batch m that
 * rank s sends rank p: sum over m and p != r of D_m[r][p] d 4 bytes out and
 * D_m[p][r] d 4 back, the same bytes as one exchange of the whole batch, in
 * twice the messages (at most 4 (np-1) sent), plus the counts' all-to-all.
 * What the overlap saves is at most the shorter of an exchange and a
 * micro-batch's experts, twice.
 */
#include "kit.h" /* ep_layer_read, the expert bank */
#include "xt_nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// BEGIN SOLUTION
enum { DISPATCH, COMBINE };

/* Four exchanges between two ranks, four tags: tag_of(DISPATCH, 1) = 1, ... */
static int tag_of(int phase, int mb)
{
    return 2 * phase + mb;
}

/* One micro-batch's rows on their way: what this rank sends, and what it computes. */
typedef struct {
    int rows;         /* its tokens' choices: k per token */
    int *slot;        /* row i of xs is choice slot[i] (token t's j-th: t k + j) */
    int *sc, *soff;   /* rows per expert (E) it sends; the first row to each rank */
    int *rc, *roff;   /* rows per (rank p, local expert j) it gets; the first from each p */
    int got;          /* rows received in all, its own included */
    float *xs, *back; /* its rows grouped by expert; their outputs, back from the experts */
    float *xr, *yr;   /* rows received, grouped by rank then local expert; their outputs */
    float *xe, *ye;   /* the same rows grouped by local expert, for xt_experts_forward */
    int *ne;          /* rows per local expert */
} micro_batch;

/* The choices of tokens lo .. lo+count-1, grouped by expert (so by rank), in token order. */
static void plan_sends(micro_batch *b, const float *x, const int *idx, int lo, int count, int k,
                       int E, int np, int d)
{
    b->rows = count * k;
    b->sc = calloc((size_t)(E + np), sizeof(int));
    b->soff = b->sc + E;
    b->slot = malloc(sizeof(int) * (size_t)(b->rows + 1));
    b->xs = malloc(sizeof(float) * ((size_t)b->rows * d + 1));
    b->back = malloc(sizeof(float) * ((size_t)b->rows * d + 1));
    int at = 0;
    for (int e = 0; e < E; e++) {
        if (e % (E / np) == 0)
            b->soff[e / (E / np)] = at;
        for (int t = lo; t < lo + count; t++)
            for (int j = 0; j < k; j++)
                if (idx[t * k + j] == e) {
                    b->slot[at] = t * k + j;
                    memcpy(b->xs + (size_t)at * d, x + (size_t)t * d, sizeof(float) * d);
                    b->sc[e]++;
                    at++;
                }
    }
}

/* What each rank sends this one (rc: its counts from the all-to-all), and the buffers. */
static void plan_receives(micro_batch *b, const int *rc, int np, int nl, int d)
{
    b->rc = malloc(sizeof(int) * (size_t)(np * nl + np + nl));
    b->roff = b->rc + np * nl;
    b->ne = b->roff + np;
    memcpy(b->rc, rc, sizeof(int) * (size_t)(np * nl));
    b->got = 0;
    for (int j = 0; j < nl; j++)
        b->ne[j] = 0;
    for (int p = 0; p < np; p++) {
        b->roff[p] = b->got;
        for (int j = 0; j < nl; j++) {
            b->got += rc[p * nl + j];
            b->ne[j] += rc[p * nl + j];
        }
    }
    size_t n = (size_t)b->got * d + 1;
    b->xr = malloc(sizeof(float) * 4 * n);
    b->yr = b->xr + n;
    b->xe = b->yr + n;
    b->ye = b->xe + n;
}

static int rows_to(const micro_batch *b, int p, int nl)
{
    int n = 0;
    for (int j = 0; j < nl; j++)
        n += b->sc[p * nl + j];
    return n;
}

static int rows_from(const micro_batch *b, int p, int nl)
{
    int n = 0;
    for (int j = 0; j < nl; j++)
        n += b->rc[p * nl + j];
    return n;
}

/*
 * The experts of one micro-batch, its rows all here: the own block taken from xs, the
 * rows regrouped by expert (one xt_experts_forward for the micro-batch), the outputs
 * put back in the order they came, the own ones straight into back.
 */
static void compute(micro_batch *b, int mb, const float *experts, int rank, int np, int nl, int d,
                    int ff)
{
    size_t row = sizeof(float) * d;
    memcpy(b->xr + (size_t)b->roff[rank] * d, b->xs + (size_t)b->soff[rank] * d,
           row * (size_t)rows_to(b, rank, nl));
    int at = 0;
    for (int j = 0; j < nl; j++)
        for (int p = 0; p < np; p++) {
            int from = b->roff[p];
            for (int i = 0; i < j; i++)
                from += b->rc[p * nl + i];
            memcpy(b->xe + (size_t)at * d, b->xr + (size_t)from * d, row * b->rc[p * nl + j]);
            at += b->rc[p * nl + j];
        }
    char name[40];
    snprintf(name, sizeof name, "experts, micro-batch %d", mb);
    xt_trace_begin(name);
    xt_experts_forward(b->ye, NULL, b->xe, b->ne, rank * nl, nl, experts, d, ff);
    xt_trace_end();
    at = 0;
    for (int j = 0; j < nl; j++)
        for (int p = 0; p < np; p++) {
            int from = b->roff[p];
            for (int i = 0; i < j; i++)
                from += b->rc[p * nl + i];
            memcpy(b->yr + (size_t)from * d, b->ye + (size_t)at * d, row * b->rc[p * nl + j]);
            at += b->rc[p * nl + j];
        }
    memcpy(b->back + (size_t)b->soff[rank] * d, b->yr + (size_t)b->roff[rank] * d,
           row * (size_t)rows_to(b, rank, nl));
}

static void free_batch(micro_batch *b)
{
    free(b->sc);
    free(b->slot);
    free(b->xs);
    free(b->back);
    free(b->rc);
    free(b->xr);
}
// END SOLUTION

void moe_overlap_forward(float *y, const float *x, const float *wr, const float *experts, int T,
                         int d, int E, int ff, int k, MPI_Comm comm)
{
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(E % np == 0 && k >= 1 && k <= E,
             "moe_overlap_forward: E=%d experts over %d ranks, k=%d: needs np | E, 1 <= k <= E", E,
             np, k);
    /*
     * TODO: the layer in 2 micro-batches.
     *   y (T x d): this rank's tokens' outputs, as one process gives them (top-k softmax
     *   weights, not renormalised, no capacity). Micro-batch m: tokens xt_block(T, 2, m).
     *   Graded: y; one MPI_Alltoall of both micro-batches' counts (2 E/np ints per rank),
     *   then point-to-point only: per rank pair at most one message per exchange (dispatch
     *   0, 1, combine 0, 1), of exactly its rows, each exchange with its own tag; every
     *   receive posted before the first expert compute; one xt_experts_forward per
     *   micro-batch (each local expert once, with that micro-batch's rows, 0 before 1);
     *   micro-batch 0's experts with micro-batch 1's dispatch pending, 1's with 0's
     *   combine pending (not yet waited).
     */
    // BEGIN SOLUTION
    int nl = E / np;
    float *logits = malloc(sizeof(float) * (2 * (size_t)T * E + 1)), *probs = logits + T * E;
    int *idx = malloc(sizeof(int) * ((size_t)T * k + 1));
    float *w = malloc(sizeof(float) * ((size_t)T * k + 1));
    xt_gemm(0, 0, T, E, d, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, T, E, k, 0);

    /* Both micro-batches' counts in one all-to-all: to rank p, 2 nl ints (0's, then 1's). */
    micro_batch mb[2];
    int *counts = malloc(sizeof(int) * 4 * (size_t)E);
    for (int m = 0; m < 2; m++) {
        int lo, count;
        xt_block(T, 2, m, &lo, &count);
        plan_sends(&mb[m], x, idx, lo, count, k, E, np, d);
        for (int p = 0; p < np; p++)
            memcpy(counts + 2 * p * nl + m * nl, mb[m].sc + p * nl, sizeof(int) * nl);
    }
    MPI_Alltoall(counts, 2 * nl, MPI_INT, counts + 2 * E, 2 * nl, MPI_INT, comm);
    for (int m = 0; m < 2; m++) {
        int *rc = counts + E; /* the 2 E ints after the sent ones are free now: reorder */
        for (int p = 0; p < np; p++)
            memcpy(rc + p * nl, counts + 2 * E + 2 * p * nl + m * nl, sizeof(int) * nl);
        plan_receives(&mb[m], rc, np, nl, d);
    }

    /* Every receive first, then the rows out. dispatch[m]: micro-batch m's rows arriving. */
    MPI_Request *req = malloc(sizeof(MPI_Request) * (8 * (size_t)np + 1));
    MPI_Request *dispatch[2] = {req, req + np}, *rest = req + 2 * np;
    int nd[2] = {0, 0}, nrest = 0;
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < np; p++) {
            int in = rows_from(&mb[m], p, nl), out = rows_to(&mb[m], p, nl);
            if (p != rank && in)
                MPI_Irecv(mb[m].xr + (size_t)mb[m].roff[p] * d, in * d, MPI_FLOAT, p,
                          tag_of(DISPATCH, m), comm, &dispatch[m][nd[m]++]);
            if (p != rank && out)
                MPI_Irecv(mb[m].back + (size_t)mb[m].soff[p] * d, out * d, MPI_FLOAT, p,
                          tag_of(COMBINE, m), comm, &rest[nrest++]);
        }
    for (int m = 0; m < 2; m++)
        for (int p = 0; p < np; p++) {
            int out = rows_to(&mb[m], p, nl);
            if (p != rank && out)
                MPI_Isend(mb[m].xs + (size_t)mb[m].soff[p] * d, out * d, MPI_FLOAT, p,
                          tag_of(DISPATCH, m), comm, &rest[nrest++]);
        }

    xt_trace_begin("micro-batch 1's dispatch in flight");
    for (int m = 0; m < 2; m++) {
        MPI_Waitall(nd[m], dispatch[m], MPI_STATUSES_IGNORE);
        if (m == 1) {
            xt_trace_end();
            xt_trace_begin("micro-batch 0's combine in flight");
        }
        compute(&mb[m], m, experts, rank, np, nl, d, ff);
        for (int p = 0; p < np; p++) {
            int in = rows_from(&mb[m], p, nl);
            if (p != rank && in)
                MPI_Isend(mb[m].yr + (size_t)mb[m].roff[p] * d, in * d, MPI_FLOAT, p,
                          tag_of(COMBINE, m), comm, &rest[nrest++]);
        }
    }
    MPI_Waitall(nrest, rest, MPI_STATUSES_IGNORE);
    xt_trace_end();

    /* y_t = sum over its k choices of weight x expert output. */
    memset(y, 0, sizeof(float) * (size_t)T * d);
    for (int m = 0; m < 2; m++)
        for (int i = 0; i < mb[m].rows; i++) {
            int s = mb[m].slot[i];
            float *yt = y + (size_t)(s / k) * d;
            const float *o = mb[m].back + (size_t)i * d;
            for (int c = 0; c < d; c++)
                yt[c] += w[s] * o[c];
        }
    for (int m = 0; m < 2; m++)
        free_batch(&mb[m]);
    free(req);
    free(counts);
    free(w);
    free(idx);
    free(logits);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/moe_overlap.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
