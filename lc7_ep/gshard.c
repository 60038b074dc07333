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
    XT_TODO("route, dispatch, compute, combine.", y, x, wr, experts, T, d, E, ff, k, cf, comm);
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
    XT_TODO("the mirror: gradients to the experts and back.", s, dx, dwr, dexperts, dy);
}

void gshard_free(gshard_state *s)
{
    /* TODO: free what gshard_forward kept (s may be NULL). */
    XT_TODO("free what gshard_forward kept (s may be NULL).", s);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/gshard.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
