/*
 * The driver of lc7_ep/node_limited_routing.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    int T = (int)xt_case_int(c, "T"), E = (int)xt_case_int(c, "E");
    int k = (int)xt_case_int(c, "k");
    xt_array scores = xt_case_input_const(c, "scores");
    if (xt_case_is(c, "node_limited_forward")) {
        xt_array bias = xt_case_input_const(c, "bias");
        int nodes = (int)xt_case_int(c, "nodes"), M = (int)xt_case_int(c, "M");
        int *idx = xt_case_alloc(c, "idx", (long)T * k, XT_I32);
        float *w = xt_case_alloc(c, "w", (long)T * k, XT_F32);
        node_limited_forward(scores.data, bias.data, T, E, k, nodes, M, idx, w);
        xt_case_output(c, "idx", idx, XT_I32, (long)T * k);
        xt_case_output(c, "w", w, XT_F32, (long)T * k);
    } else {
        xt_array idx = xt_case_input_const(c, "idx"), dw = xt_case_input_const(c, "dw");
        float *dscores = xt_case_alloc(c, "dscores", (long)T * E, XT_F32);
        node_limited_backward(scores.data, idx.data, dw.data, T, E, k, dscores);
        xt_case_output(c, "dscores", dscores, XT_F32, (long)T * E);
    }
}

/*
 * The page's picture: one token, E = 8 experts on 4 nodes, k = 4, M = 2, routed with and
 * without the node limit; then each rank checks the gradient of a random loss sum dw_j w_j
 * against central differences of it, in double, for its own random token.
 */
static void demo(MPI_Comm comm)
{
    enum { E = 8, NODES = 4, K = 4, M = 2 };
    int rank;
    MPI_Comm_rank(comm, &rank);
    const float s[E] = {0.9f, 0.1f, 0.6f, 0.6f, 0.8f, 0.7f, 0.2f, 0.1f}, none[E] = {0};
    int idx[K], flat_idx[K];
    float w[K], flat_w[K];
    node_limited_forward(s, none, 1, E, K, NODES, M, idx, w);
    node_limited_forward(s, none, 1, E, K, 1, 1, flat_idx, flat_w);
    xt_printf_root(comm, "s: .9 .1 | .6 .6 | .8 .7 | .2 .1 (4 nodes of 2 experts), k = 4\n");
    xt_printf_root(comm, "M = 2 nodes: experts %d %d %d %d, w %.3f %.3f %.3f %.3f\n", idx[0],
                   idx[1], idx[2], idx[3], w[0], w[1], w[2], w[3]);
    xt_printf_root(comm, "no limit:    experts %d %d %d %d (on 3 nodes)\n", flat_idx[0],
                   flat_idx[1], flat_idx[2], flat_idx[3]);

    /* The gradient against central differences of L = sum_j dw_j w_j (the choice fixed). */
    float r[E], dw[K], ds[E];
    unsigned seed = 1234u + 77u * (unsigned)rank;
    for (int e = 0; e < E; e++)
        r[e] = 0.05f + 0.9f * (float)((seed = seed * 1103515245u + 12345u) >> 8) / 16777216.0f;
    for (int j = 0; j < K; j++)
        dw[j] = (float)((seed = seed * 1103515245u + 12345u) >> 8) / 8388608.0f - 1.0f;
    node_limited_forward(r, none, 1, E, K, NODES, M, idx, w);
    node_limited_backward(r, idx, dw, 1, E, K, ds);
    double worst = 0.0, h = 1e-3;
    for (int e = 0; e < E; e++) {
        double plus = 0.0, minus = 0.0, sum_p = 0.0, sum_m = 0.0;
        for (int j = 0; j < K; j++) {
            double v = r[idx[j]];
            sum_p += v + (idx[j] == e ? h : 0.0);
            sum_m += v - (idx[j] == e ? h : 0.0);
        }
        for (int j = 0; j < K; j++) {
            double v = r[idx[j]];
            plus += dw[j] * (v + (idx[j] == e ? h : 0.0)) / sum_p;
            minus += dw[j] * (v - (idx[j] == e ? h : 0.0)) / sum_m;
        }
        double num = (plus - minus) / (2 * h), err = num - ds[e];
        worst = err < 0 ? (-err > worst ? -err : worst) : (err > worst ? err : worst);
    }
    int ok = worst < 1e-3, all = 0;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_ordered(comm, "own token: dscores vs central differences, worst %.1e\n", worst);
    xt_printf_root(comm, "dscores equals the central differences: %s\n", all ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
