/*
 * The driver of lc7_ep/hierarchical_dispatch.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include <stdio.h>

/*
 * Ranks a node from the launch (make bench LC=7 without --per-node: ranks_per_node 0): the
 * fewest ranks that share a node's memory (MPI_Comm_split_type), where they are fewer than np
 * and every node's ranks are consecutive (*how 1); otherwise virtual nodes, two of np/2 when
 * np is even, else one rank a node (*how 0, or 2 when the launch placed a node's ranks apart).
 */
static int driver_launch_nodes(MPI_Comm comm, int *how)
{
    int np, fewest, leader, consecutive = xt_launch_nodes(comm, &fewest, &leader);
    MPI_Comm_size(comm, &np);
    if (fewest < np && np % fewest == 0 && consecutive) {
        *how = 1;
        return fewest;
    }
    *how = fewest < np ? 2 : 0;
    return np % 2 == 0 ? np / 2 : 1;
}

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    ep_layer l = ep_layer_read(c);
    int np, how = -1;
    MPI_Comm_size(comm, &np);
    XT_CHECK(l.renorm == 0 && l.cf == 0.0f && l.n_experts == l.E / np,
             "hierarchical_dispatch cases: renorm 0, dropless, each rank's E/np experts");
    int L = (int)xt_case_int(c, "ranks_per_node");
    if (L == 0) { /* the bench's: the launch's nodes, and which they were */
        int *nodes = xt_case_alloc(c, "nodes", 2, XT_I32);
        L = driver_launch_nodes(comm, &how);
        nodes[0] = L, nodes[1] = how;
        xt_case_output(c, "nodes", nodes, XT_I32, 2);
    }
    long n = (long)l.T * l.d;
    float *y = xt_case_alloc(c, "y", n, XT_F32);
    hierarchical_moe_forward(y, l.x, l.wr, l.experts, l.T, l.d, l.E, l.ff, l.k, L, comm);
    xt_case_output(c, "y", y, XT_F32, n);
}

/*
 * One layer of 16 tokens a rank, d 32, E 16, ff 16, k 4 on nodes of --per-node ranks (2):
 * each rank's records across and inside nodes and its bytes across, against what GShard's
 * dispatch would send across for the same routing; y against the layer on one process
 * (the kit's experts, one token at a time).
 */
static void demo(MPI_Comm comm)
{
    enum { T = 16, D = 32, E = 16, FF = 16, K = 4 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int L = (int)xt_arg_int("per-node", np % 2 == 0 ? 2 : 1);
    XT_CHECK(L >= 1 && np % L == 0 && E % np == 0,
             "--per-node %d, np %d: nodes of L ranks, "
             "np dividing %d experts",
             L, np, E);
    int nl = E / np;
    long per = xt_expert_params(D, FF);
    float *all = xt_malloc(sizeof(float) * (size_t)(E * per)), wr[D * E], x[T * D], y[T * D];
    xt_rng g = xt_rng_seed(2024u); /* the same weights everywhere */
    xt_rng_fill_uniform(&g, all, E * per, -0.3f, 0.3f);
    xt_rng_fill_uniform(&g, wr, D * E, -1, 1);
    xt_rng h = xt_rng_seed(7u + 13u * (unsigned)rank);
    xt_rng_fill_uniform(&h, x, T * D, -1, 1);

    hierarchical_moe_forward(y, x, wr, all + (size_t)rank * nl * per, T, D, E, FF, K, L, comm);

    /* What crossed: from the routing, records per (token, other node) against GShard's rows
     * per (token, expert on another node). */
    float logits[T * E], probs[T * E], w[T * K];
    int idx[T * K];
    xt_gemm(0, 0, T, E, D, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, T, E, K, 0);
    long records = 0, rows = 0;
    for (int t = 0; t < T; t++)
        for (int n = 0; n < np / L; n++) {
            int on = 0;
            for (int j = 0; j < K; j++)
                on += idx[t * K + j] / nl / L == n;
            records += n != rank / L && on > 0;
            rows += n != rank / L ? on : 0;
        }
    xt_printf_ordered(comm, "node %d: %ld records across (%ld B), GShard %ld rows (%ld B)\n",
                      rank / L, records, records * (D + 2 * K) * 4, rows, rows * D * 4);

    ep_demo_check(comm, y, x, wr, all, T, D, E, FF, K, 0);
    free(all);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
