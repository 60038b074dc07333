/*
 * The driver of lc7_ep/topk_gradient.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    int T = (int)xt_case_int(c, "T"), E = (int)xt_case_int(c, "E");
    int k = (int)xt_case_int(c, "k"), renorm = (int)xt_case_int(c, "renorm");
    if (xt_case_is(c, "topk_forward")) {
        xt_array logits = xt_case_input_const(c, "logits");
        float *probs = xt_case_alloc(c, "probs", (long)T * E, XT_F32);
        int *idx = xt_case_alloc(c, "idx", (long)T * k, XT_I32);
        float *w = xt_case_alloc(c, "w", (long)T * k, XT_F32);
        topk_forward(logits.data, T, E, k, renorm, probs, idx, w);
        xt_case_output(c, "idx", idx, XT_I32, (long)T * k);
        xt_case_output(c, "w", w, XT_F32, (long)T * k);
        xt_case_output(c, "probs", probs, XT_F32, (long)T * E);
    } else {
        xt_array probs = xt_case_input_const(c, "probs"), idx = xt_case_input_const(c, "idx");
        xt_array dw = xt_case_input_const(c, "dw");
        float *dlogits = xt_case_alloc(c, "dlogits", (long)T * E, XT_F32);
        topk_backward(probs.data, idx.data, dw.data, T, E, k, renorm, dlogits);
        xt_case_output(c, "dlogits", dlogits, XT_F32, (long)T * E);
    }
}

/*
 * Each rank routes two tokens of its own over E = 4 experts (rank r: rows 2r % 8 and
 * 2r % 8 + 1 of a small table; row 1 has a tie, row 5 all four logits equal), k = 2,
 * renormalised, and prints the routing table; then a random dw goes back, and dlogits is
 * compared with the same gradient computed densely in double: the derivative of every w_j
 * with respect to every probability (d w_j / d p_e, zero unless e is chosen), through the
 * softmax's whole E x E Jacobian diag(p) - p p^T.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 2, E = 4, K = 2, ROWS = 8 };
    static const float table[ROWS][E] = {{1.0f, 2.7f, 2.4f, 0.2f},  {0.5f, 1.5f, -1.0f, 1.5f},
                                         {3.0f, -2.0f, 0.0f, 2.9f}, {-1.0f, 0.3f, 0.8f, 2.0f},
                                         {2.2f, 2.1f, 2.0f, 1.9f},  {0.7f, 0.7f, 0.7f, 0.7f},
                                         {0.0f, 4.0f, 1.0f, -3.0f}, {1.2f, -0.4f, 1.3f, 0.1f}};
    int rank;
    MPI_Comm_rank(comm, &rank);
    float logits[T * E], probs[T * E], w[T * K], dw[T * K], dl[T * E];
    int idx[T * K];
    for (int t = 0; t < T; t++)
        memcpy(logits + t * E, table[(2 * rank + t) % ROWS], sizeof(float) * E);
    xt_rng g = xt_rng_seed(11 + (uint64_t)rank);
    xt_rng_fill_uniform(&g, dw, T * K, -1.0f, 1.0f);

    topk_forward(logits, T, E, K, 1, probs, idx, w);
    xt_printf_root(comm,
                   "E = %d experts, k = %d, renormalised: w = the chosen probabilities "
                   "over their sum\n",
                   E, K);
    xt_printf_root(comm, "%s\n",
                   "          logits e0..e3          probs e0..e3           chosen w");
    char text[2][160];
    for (int t = 0; t < T; t++) {
        const float *z = logits + t * E, *p = probs + t * E;
        snprintf(text[t], sizeof text[t],
                 "t%d %5.1f %5.1f %5.1f %5.1f  %4.2f %4.2f %4.2f %4.2f -> e%d e%d  %4.2f %4.2f", t,
                 z[0], z[1], z[2], z[3], p[0], p[1], p[2], p[3], idx[t * K], idx[t * K + 1],
                 w[t * K], w[t * K + 1]);
    }
    xt_printf_ordered(comm, "%s\n%s\n", text[0], text[1]);

    topk_backward(probs, idx, dw, T, E, K, 1, dl);
    double worst = 0.0, most;
    for (int t = 0; t < T; t++) {
        const float *p = probs + t * E;
        const int *it = idx + t * K;
        double S = 0.0, dp[E] = {0}, dense[E];
        for (int j = 0; j < K; j++)
            S += p[it[j]];
        /* dp_e = sum_j dw_j d(p_j / S)/d p_e over the chosen e: [e = idx_j] / S - p_j / S^2 */
        for (int j = 0; j < K; j++)
            for (int i = 0; i < K; i++)
                dp[it[i]] += dw[t * K + j] * ((i == j ? 1.0 / S : 0.0) - p[it[j]] / (S * S));
        for (int a = 0; a < E; a++) {
            dense[a] = 0.0;
            for (int b = 0; b < E; b++)
                dense[a] += ((a == b ? p[a] : 0.0) - (double)p[a] * p[b]) * dp[b];
            worst = fmax(worst, fabs(dense[a] - dl[t * E + a]));
        }
        double shown[E]; /* rounding noise (the renormalised sum, 1e-9) shown as 0 */
        for (int a = 0; a < E; a++)
            shown[a] = fabsf(dl[t * E + a]) < 5e-5f ? 0.0 : dl[t * E + a];
        snprintf(text[t], sizeof text[t], "t%d dw %5.2f %5.2f  dlogits %7.4f %7.4f %7.4f %7.4f", t,
                 dw[t * K], dw[t * K + 1], shown[0], shown[1], shown[2], shown[3]);
    }
    xt_printf_ordered(comm, "%s\n%s\n", text[0], text[1]);
    MPI_Allreduce(&worst, &most, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "(renormalised: the experts not chosen get no gradient)\n");
    xt_printf_root(comm, "dense: every d w_j / d p_e, then diag(p) - p p^T, in double: %.1e off\n",
                   most);
    xt_printf_root(comm, "dlogits equals the dense softmax's gradient through the chosen: %s\n",
                   most < 1e-6 ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
