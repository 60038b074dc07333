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
    XT_TODO("the layer in 2 micro-batches.", y, x, wr, experts, T, d, E, ff, k, comm);
}

/* ------------------------------------------------------------------------ */

static void run_case(xt_case *c)
{
    ep_layer l = ep_layer_read(c);
    MPI_Comm comm = xt_case_comm(c);
    int np;
    MPI_Comm_size(comm, &np);
    XT_CHECK(!l.renorm && l.cf == 0.0f && l.n_experts == l.E / np,
             "moe_overlap: a case with renorm 0, cf 0 and each rank's experts (E/np = %d), not "
             "renorm %d, cf %g, %ld experts",
             l.E / np, l.renorm, (double)l.cf, l.n_experts);
    float *y = xt_case_alloc(c, "y", (long)l.T * l.d, XT_F32);
    moe_overlap_forward(y, l.x, l.wr, l.experts, l.T, l.d, l.E, l.ff, l.k, comm);
    xt_case_output(c, "y", y, XT_F32, (long)l.T * l.d);
}

/*
 * T = 6 tokens per rank (micro-batches of 3), d 4, E = 4 experts of ff 8, k 2. Each
 * micro-batch's rows per destination rank, the order of each rank's expert calls
 * (the kit's log: the rows, and the exchanges pending meanwhile), and y beside one
 * process's layer.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 6, D = 4, E = 4, FF = 8, K = 2 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    if (E % np) {
        xt_printf_root(comm, "this demo runs on 1, 2 or 4 ranks (E = %d experts)\n", E);
        return;
    }
    int nl = E / np;
    long per = xt_expert_params(D, FF);
    static float params[E * 3 * D * FF];
    float x[T * D], wr[D * E], y[T * D], want[T * D];
    xt_rng g = xt_rng_seed(11);
    xt_rng_fill_uniform(&g, params, E * per, -0.5f, 0.5f);
    xt_rng_fill_uniform(&g, wr, D * E, -1.0f, 1.0f);
    xt_rng h = xt_rng_seed(200 + (uint64_t)rank);
    xt_rng_fill_uniform(&h, x, T * D, -1.0f, 1.0f);

    /* The routing, as the layer computes it, for the counts printed. */
    float logits[T * E], probs[T * E], w[T * K];
    int idx[T * K];
    xt_gemm(0, 0, T, E, D, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, T, E, K, 0);
    xt_printf_root(comm,
                   "T = %d tokens per rank in 2 micro-batches of %d, d %d; E = %d experts "
                   "(%d per\nrank) of ff %d, k = %d: rows each micro-batch sends to r0..\n",
                   T, T / 2, D, E, nl, FF, K);
    char line[2][64];
    for (int m = 0; m < 2; m++) {
        int lo, count, to[E] = {0}, at = 0;
        xt_block(T, 2, m, &lo, &count);
        for (int i = lo * K; i < (lo + count) * K; i++)
            to[idx[i] / nl]++;
        for (int p = 0; p < np; p++)
            at += snprintf(line[m] + at, sizeof line[m] - (size_t)at, "%s%d", p ? "/" : "", to[p]);
    }
    xt_printf_ordered(comm, "micro-batch 0: %-10s micro-batch 1: %s\n", line[0], line[1]);

    long before = xt_expert_log(NULL, 0, 0);
    moe_overlap_forward(y, x, wr, params + (long)rank * nl * per, T, D, E, FF, K, comm);
    long logged = xt_expert_log(NULL, 0, 0) - before;
    xt_expert_call log[2 * E];
    xt_expert_log(log, before, logged < 2 * E ? logged : 2 * E);
    const char *what[2] = {"micro-batch 1's dispatch", "micro-batch 0's combine"};
    for (int m = 0; m < 2; m++) {
        xt_printf_root(comm,
                       "\nexperts of micro-batch %d, meant to run under %s\n(the kit's "
                       "log: expert:rows, receives still pending meanwhile):\n",
                       m, what[m]);
        char order[160];
        int at = 0, pending = 0;
        for (long i = m * nl; i < (m + 1) * nl && i < logged && i < 2 * E; i++) {
            at += snprintf(order + at, sizeof order - (size_t)at, "e%d:%d ", log[i].expert,
                           log[i].tokens);
            pending = log[i].pending;
        }
        xt_printf_ordered(comm, "%s(%d pending)\n", at ? order : "no expert call ", pending);
    }

    /* One process: every token through its k experts, every expert at hand. */
    memset(want, 0, sizeof want);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K; j++) {
            int e = idx[t * K + j], one = 1;
            float o[D];
            xt_experts_forward(o, NULL, x + t * D, &one, e, 1, params + (long)e * per, D, FF);
            for (int c = 0; c < D; c++)
                want[t * D + c] += w[t * K + j] * o[c];
        }
    float err = 0.0f, worst;
    for (int i = 0; i < T * D; i++)
        err = fmaxf(err, fabsf(y[i] - want[i]));
    MPI_Allreduce(&err, &worst, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm, "\nmax |difference| from one process %.1e\n", worst);
    xt_printf_root(comm, "y matches one process: %s\n", worst < 1e-5f ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
