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
    XT_TODO("the layer in two hops.", y, x, wr, experts, T, d, E, ff, k, ranks_per_node, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/hierarchical_dispatch.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
