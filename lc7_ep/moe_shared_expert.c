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
    XT_TODO("the forward.", y, x, wr, experts, shared, T, d, E, ff, k, s, comm);
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
    XT_TODO("the backward.", m, dx, dwr, dexperts, dshared, dy);
}

void shared_moe_free(shared_moe *m)
{
    /* TODO: free what shared_moe_forward kept (m may be NULL). */
    XT_TODO("free what shared_moe_forward kept (m may be NULL).", m);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/moe_shared_expert.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
