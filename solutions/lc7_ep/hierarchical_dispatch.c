/*
 * hierarchical_dispatch.c: expert parallelism across nodes, each token over
 * the network once per node (DeepEP's internode dispatch and combine).
 * docs/lc7_ep.md#hierarchical_dispatch
 *
 * GShard's dispatch (gshard.c) sends a token's row to the rank of each of its
 * k experts: with fine-grained experts (DeepSeek-V3: k = 8 of 256) several of
 * them often sit on one node, and the same row crosses the network once for
 * each. Inside a node the links are several times faster than between nodes,
 * so send each row across once per destination node, to the rank there with
 * the same local index as the sender (the same "rail": its NIC talks to ours),
 * and let that rank forward it inside its node:
 *
 *     nodes of L = ranks_per_node consecutive ranks; rank p holds experts
 *     p E/np .. (p+1) E/np - 1, node n the experts of its L ranks
 *
 *     hop 1 (across)   token t of rank r, its experts on nodes {n1, n2, ...}:
 *                      one record to rank n L + r % L of each other node n
 *     hop 2 (inside)   every rank forwards each record it holds (its own
 *                      tokens' included) to the ranks of its node holding one
 *                      of the token's experts, once each
 *     experts          each rank computes its records' chosen experts
 *     combine          the mirror: an expert rank returns sum_j w_tj out_tj of
 *                      the token's experts it holds, the forwarder adds its
 *                      node's, one row per record back across; y_t = the sum
 *
 * A record is what a forwarder needs: the row and the token's routing, as
 * DeepEP sends them: d + 2 k floats (x_t; the k experts' indices, exact as
 * floats; the k weights). A combined row is d floats.
 *
 * Cost, per rank, for its T tokens with n_t other nodes among token t's
 * experts: across the network, sum_t n_t records out (GShard: one row for
 * each of the k choices whose expert is on another node) and back one row
 * for each record it received. Inside the node: a record for each rank that
 * holds one of a token's experts. The counts of each hop: one MPI_Alltoall
 * of one int per rank.
 */
#include "kit.h" /* the expert bank */
#include "xt_nn.h"

#include <stdlib.h>
#include <string.h>

// BEGIN SOLUTION
enum { HOP1 = 1, HOP2 = 2, BACK2 = 3, BACK1 = 4 };

/* A record: x_t (d floats), then the token's k experts (as floats), then its k weights. */
static float *record_at(float *recs, int i, int d, int k)
{
    return recs + (size_t)i * (size_t)(d + 2 * k);
}

/* Whether one of the record's experts lives on a rank of [first, first + ranks). */
static int wants(const float *rec, int d, int k, int nl, int first, int ranks)
{
    for (int j = 0; j < k; j++) {
        int owner = (int)rec[d + j] / nl;
        if (owner >= first && owner < first + ranks)
            return 1;
    }
    return 0;
}

/*
 * Sends out[p] floats from each block of send (blocks in rank order) and receives in[p]
 * from each p into recv (blocks in rank order), point-to-point with tag; counts in floats.
 */
static void exchange(const float *send, const int *out, float *recv, const int *in, int tag,
                     MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    MPI_Request *req = malloc(sizeof(MPI_Request) * (size_t)(2 * np));
    int n = 0;
    size_t at = 0;
    for (int p = 0; p < np; p++) {
        if (in[p] > 0)
            MPI_Irecv(recv + at, in[p], MPI_FLOAT, p, tag, comm, &req[n++]);
        at += (size_t)in[p];
    }
    at = 0;
    for (int p = 0; p < np; p++) {
        if (out[p] > 0)
            MPI_Isend(send + at, out[p], MPI_FLOAT, p, tag, comm, &req[n++]);
        at += (size_t)out[p];
    }
    MPI_Waitall(n, req, MPI_STATUSES_IGNORE);
    free(req);
}

// END SOLUTION

void hierarchical_moe_forward(float *y, const float *x, const float *wr, const float *experts,
                              int T, int d, int E, int ff, int k, int ranks_per_node, MPI_Comm comm)
{
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(E % np == 0 && k >= 1 && k <= E && ranks_per_node >= 1 && np % ranks_per_node == 0,
             "hierarchical_moe_forward: E=%d, k=%d, %d ranks a node on %d ranks", E, k,
             ranks_per_node, np);
    /*
     * TODO: the layer in two hops.
     *   GShard's, dropless (xt_topk_route, renorm 0): y (T x d) overwritten, sum_j w_tj
     *   expert_tj(x_t). Nodes of ranks_per_node ranks.
     *   Across nodes, only: one record (d + 2k floats: x_t, its k experts, its k weights)
     *   per token and other node holding one of its experts, to the rank there of the
     *   same local index; and one row (d floats) back per record received. Inside a node:
     *   records forwarded to the experts' ranks, rows back. Point-to-point, and at most two
     *   MPI_Alltoall of one int per rank (the counts). One xt_experts_forward over the
     *   rows of the local experts, grouped by expert.
     */
    // BEGIN SOLUTION
    int L = ranks_per_node, node = rank / L, local = rank % L, nl = E / np;
    int R = d + 2 * k; /* floats a record */
    size_t row = sizeof(float) * (size_t)d;
    int *idx = malloc(sizeof(int) * ((size_t)T * k + 1));
    float *w = malloc(sizeof(float) * ((size_t)T * k + 1));
    float *probs = malloc(sizeof(float) * ((size_t)T * E + 1));
    float *logits = malloc(sizeof(float) * ((size_t)T * E + 1));
    xt_gemm(0, 0, T, E, d, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, T, E, k, 0);
    free(logits);
    free(probs);

    /* This rank's tokens as records. */
    float *mine = malloc(sizeof(float) * ((size_t)T * R + 1));
    for (int t = 0; t < T; t++) {
        float *rec = record_at(mine, t, d, k);
        memcpy(rec, x + (size_t)t * d, row);
        for (int j = 0; j < k; j++) {
            rec[d + j] = (float)idx[t * k + j];
            rec[d + k + j] = w[t * k + j];
        }
    }
    free(idx);
    free(w);

    /* Hop 1: each token to the same local index of every other node that wants it. */
    int *out1 = calloc((size_t)np, sizeof(int)), *in1 = calloc((size_t)np, sizeof(int));
    for (int t = 0; t < T; t++)
        for (int n = 0; n < np / L; n++)
            if (n != node && wants(record_at(mine, t, d, k), d, k, nl, n * L, L))
                out1[n * L + local]++;
    MPI_Alltoall(out1, 1, MPI_INT, in1, 1, MPI_INT, comm);
    int sent1 = 0, got1 = 0;
    for (int p = 0; p < np; p++)
        sent1 += out1[p], got1 += in1[p];
    float *send1 = malloc(sizeof(float) * ((size_t)sent1 * R + 1));
    int *home = malloc(sizeof(int) * ((size_t)sent1 + 1)); /* send1's record i: my token */
    for (int n = 0, at = 0; n < np / L; n++)
        for (int t = 0; t < T && n != node; t++)
            if (wants(record_at(mine, t, d, k), d, k, nl, n * L, L)) {
                memcpy(record_at(send1, at, d, k), record_at(mine, t, d, k), sizeof(float) * R);
                home[at++] = t;
            }
    /* Held: my tokens, then the records from other nodes, source by source. */
    int held = T + got1;
    float *hold = malloc(sizeof(float) * ((size_t)held * R + 1));
    memcpy(hold, mine, sizeof(float) * (size_t)T * R);
    for (int p = 0; p < np; p++)
        out1[p] *= R, in1[p] *= R;
    exchange(send1, out1, hold + (size_t)T * R, in1, HOP1, comm);

    /* Hop 2: each held record to every other rank of the node holding one of its experts. */
    int *out2 = calloc((size_t)np, sizeof(int)), *in2 = calloc((size_t)np, sizeof(int));
    for (int h = 0; h < held; h++)
        for (int q = node * L; q < node * L + L; q++)
            if (q != rank && wants(record_at(hold, h, d, k), d, k, nl, q, 1))
                out2[q]++;
    MPI_Alltoall(out2, 1, MPI_INT, in2, 1, MPI_INT, comm);
    int sent2 = 0, got2 = 0;
    for (int p = 0; p < np; p++)
        sent2 += out2[p], got2 += in2[p];
    float *send2 = malloc(sizeof(float) * ((size_t)sent2 * R + 1));
    int *from = malloc(sizeof(int) * ((size_t)sent2 + 1)); /* send2's record i: held record */
    for (int q = node * L, at = 0; q < node * L + L; q++)
        for (int h = 0; h < held && q != rank; h++)
            if (wants(record_at(hold, h, d, k), d, k, nl, q, 1)) {
                memcpy(record_at(send2, at, d, k), record_at(hold, h, d, k), sizeof(float) * R);
                from[at++] = h;
            }
    /* To compute: the held records my experts want, then those forwarded to me. */
    float *work = malloc(sizeof(float) * ((size_t)(held + got2) * R + 1));
    int *which = malloc(sizeof(int) * ((size_t)held + 1)), nwork = 0;
    for (int h = 0; h < held; h++)
        if (wants(record_at(hold, h, d, k), d, k, nl, rank, 1)) {
            memcpy(record_at(work, nwork, d, k), record_at(hold, h, d, k), sizeof(float) * R);
            which[nwork++] = h;
        }
    int own = nwork;
    for (int p = 0; p < np; p++)
        out2[p] *= R, in2[p] *= R;
    exchange(send2, out2, work + (size_t)own * R, in2, HOP2, comm);
    nwork += got2;

    /* The experts: every (record, choice) on a local expert, grouped by expert. */
    int *ecount = calloc((size_t)nl + 1, sizeof(int)), rows = 0;
    for (int i = 0; i < nwork; i++)
        for (int j = 0; j < k; j++) {
            int e = (int)record_at(work, i, d, k)[d + j];
            if (e / nl == rank)
                ecount[e - rank * nl]++, rows++;
        }
    int *at = calloc((size_t)nl + 1, sizeof(int)), *pair = malloc(sizeof(int) * ((size_t)rows + 1));
    for (int e = 1; e < nl; e++)
        at[e] = at[e - 1] + ecount[e - 1];
    float *xin = malloc(row * ((size_t)rows + 1)), *yout = malloc(row * ((size_t)rows + 1));
    for (int i = 0; i < nwork; i++)
        for (int j = 0; j < k; j++) {
            int e = (int)record_at(work, i, d, k)[d + j];
            if (e / nl != rank)
                continue;
            int r = at[e - rank * nl]++;
            memcpy(xin + (size_t)r * d, record_at(work, i, d, k), row);
            pair[r] = i * k + j;
        }
    xt_experts_forward(yout, NULL, xin, ecount, rank * nl, nl, experts, d, ff);
    float *part = calloc((size_t)nwork * d + 1, sizeof(float)); /* sum_j w out per record */
    for (int r = 0; r < rows; r++) {
        int i = pair[r] / k, j = pair[r] % k;
        float wt = record_at(work, i, d, k)[d + k + j];
        for (int c = 0; c < d; c++)
            part[(size_t)i * d + c] += wt * yout[(size_t)r * d + c];
    }

    /* Back inside the node: each forwarded record's row to its forwarder. */
    float *acc = calloc((size_t)held * d + 1, sizeof(float)), *back2 = malloc(row * (sent2 + 1));
    for (int i = 0; i < own; i++)
        for (int c = 0; c < d; c++)
            acc[(size_t)which[i] * d + c] += part[(size_t)i * d + c];
    for (int p = 0; p < np; p++)
        out2[p] = out2[p] / R * d, in2[p] = in2[p] / R * d;
    exchange(part + (size_t)own * d, in2, back2, out2, BACK2, comm);
    for (int i = 0; i < sent2; i++)
        for (int c = 0; c < d; c++)
            acc[(size_t)from[i] * d + c] += back2[(size_t)i * d + c];

    /* Back across: each record from another node, one row to its home; y the sum. */
    float *back1 = malloc(row * (sent1 + 1));
    for (int p = 0; p < np; p++)
        out1[p] = out1[p] / R * d, in1[p] = in1[p] / R * d;
    exchange(acc + (size_t)T * d, in1, back1, out1, BACK1, comm);
    memcpy(y, acc, row * (size_t)T);
    for (int i = 0; i < sent1; i++)
        for (int c = 0; c < d; c++)
            y[(size_t)home[i] * d + c] += back1[(size_t)i * d + c];

    free(mine), free(out1), free(in1), free(send1), free(home), free(hold);
    free(out2), free(in2), free(send2), free(from), free(work), free(which);
    free(ecount), free(at), free(pair), free(xin), free(yout), free(part), free(acc);
    free(back2), free(back1);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/hierarchical_dispatch.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
