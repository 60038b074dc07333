/*
 * The driver of lc7_ep/gate_sigmoid.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    int T = (int)xt_case_int(c, "T"), E = (int)xt_case_int(c, "E");
    int k = (int)xt_case_int(c, "k");
    xt_array idx_in;
    if (xt_case_is(c, "gate_sigmoid_forward")) {
        xt_array logits = xt_case_input_const(c, "logits"), bias = xt_case_input_const(c, "bias");
        float *scores = xt_case_alloc(c, "scores", (long)T * E, XT_F32);
        int *idx = xt_case_alloc(c, "idx", (long)T * k, XT_I32);
        float *w = xt_case_alloc(c, "w", (long)T * k, XT_F32);
        gate_sigmoid_forward(logits.data, bias.data, T, E, k, scores, idx, w);
        xt_case_output(c, "scores", scores, XT_F32, (long)T * E);
        xt_case_output(c, "idx", idx, XT_I32, (long)T * k);
        xt_case_output(c, "w", w, XT_F32, (long)T * k);
    } else if (xt_case_is(c, "gate_bias_update")) {
        /* Two steps: the bias after each, from the routing of that step. */
        float gamma = strtof(xt_case_str(c, "gamma"), NULL);
        xt_array bias = xt_case_input(c, "bias");
        idx_in = xt_case_input_const(c, "idx");
        const int *steps = idx_in.data;
        gate_bias_update(bias.data, steps, T, E, k, gamma);
        xt_case_output(c, "step0_bias", bias.data, XT_F32, E);
        gate_bias_update(bias.data, steps + (size_t)T * k, T, E, k, gamma);
        xt_case_output(c, "step1_bias", bias.data, XT_F32, E);
    } else {
        float alpha = strtof(xt_case_str(c, "alpha"), NULL);
        xt_array logits = xt_case_input_const(c, "logits");
        idx_in = xt_case_input_const(c, "idx");
        float *dlogits = xt_case_alloc(c, "dlogits", (long)T * E, XT_F32);
        float loss = seq_balance_loss(logits.data, idx_in.data, T, E, k, alpha, dlogits);
        xt_case_output(c, "loss", &loss, XT_F32, 1);
        xt_case_output(c, "dlogits", dlogits, XT_F32, (long)T * E);
    }
}

/* The loads of a routing: how many of the T k choices each expert got. */
static void driver_loads_of(const int *idx, int T, int k, int *load, int E)
{
    memset(load, 0, sizeof(int) * (size_t)E);
    for (int c = 0; c < T * k; c++)
        load[idx[c]]++;
}

/*
 * Each rank gates T = 16 tokens of its own over E = 4 experts, k = 2, the logits skewed
 * towards the low experts (more so on higher ranks), and runs a few steps of the bias
 * update on the same tokens: the loads (mean k T / E = 8) come together as the bias moves.
 * Then the sequence-wise loss: on uniform routing (every score equal, every load the mean)
 * it is alpha; on the skewed routing above; and its dlogits beside central finite
 * differences of the loss.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 16, E = 4, K = 2, STEPS = 12 };
    const float gamma = 0.05f, alpha = 0.01f;
    int rank;
    MPI_Comm_rank(comm, &rank);
    float logits[T * E], bias[E] = {0}, scores[T * E], w[T * K], dl[T * E];
    int idx[T * K], load[E], skewed[T * K];
    xt_rng g = xt_rng_seed(5 + (uint64_t)rank);
    for (int t = 0; t < T; t++)
        for (int e = 0; e < E; e++)
            logits[t * E + e] =
                xt_rng_uniform(&g, -1.0f, 1.0f) + (0.5f + 0.2f * (float)rank) * (float)(1 - e);
    xt_printf_root(comm,
                   "T = %d tokens per rank, E = %d, k = %d: the mean load is %d; gamma = "
                   "%g\n",
                   T, E, K, K * T / E, (double)gamma);
    int weighs = 0;
    for (int step = 0; step < STEPS; step++) {
        gate_sigmoid_forward(logits, bias, T, E, K, scores, idx, w);
        if (step == 0)
            memcpy(skewed, idx, sizeof idx);
        for (int t = 0; t < T; t++) { /* the weights: the chosen scores, normalised */
            const float *st = scores + t * E;
            const int *it = idx + t * K;
            for (int j = 0; j < K; j++)
                weighs |= fabsf(w[t * K + j] - st[it[j]] / (st[it[0]] + st[it[1]])) > 1e-6f;
        }
        driver_loads_of(idx, T, K, load, E);
        int lo = load[0], hi = load[0];
        for (int e = 1; e < E; e++) {
            lo = load[e] < lo ? load[e] : lo;
            hi = load[e] > hi ? load[e] : hi;
        }
        if (step < 4 || step == STEPS - 1)
            xt_printf_ordered(comm,
                              "step %2d  loads %2d %2d %2d %2d (spread %2d)  bias %+.2f %+.2f "
                              "%+.2f %+.2f\n",
                              step, load[0], load[1], load[2], load[3], hi - lo, (double)bias[0],
                              (double)bias[1], (double)bias[2], (double)bias[3]);
        else if (step == 4)
            xt_printf_root(comm, "...\n");
        gate_bias_update(bias, idx, T, E, K, gamma);
    }
    int any;
    MPI_Allreduce(&weighs, &any, 1, MPI_INT, MPI_LOR, comm);
    xt_printf_root(comm, "the bias never weighs: w equals the chosen scores normalised: %s\n\n",
                   any ? "NO" : "yes");

    /* Uniform routing: equal logits in every row, token t to experts 2t % 4 and 2t % 4 + 1. */
    float flat[T * E], uniform_loss, skewed_loss, balanced_loss;
    int even[T * K];
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < E; e++)
            flat[t * E + e] = 0.1f * (float)(t % 5);
        for (int j = 0; j < K; j++)
            even[t * K + j] = (K * t + j) % E;
    }
    uniform_loss = seq_balance_loss(flat, even, T, E, K, alpha, dl);
    skewed_loss = seq_balance_loss(logits, skewed, T, E, K, alpha, dl);
    balanced_loss = seq_balance_loss(logits, idx, T, E, K, alpha, dl);
    xt_printf_root(comm, "sequence-wise loss, alpha = %g\n", (double)alpha);
    xt_printf_ordered(comm, "uniform %.6f   skewed (step 0) %.6f   after the bias %.6f\n",
                      (double)uniform_loss, (double)skewed_loss, (double)balanced_loss);
    int at_alpha = fabsf(uniform_loss - alpha) <= 1e-6f * alpha, all;
    MPI_Allreduce(&at_alpha, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "uniform routing's loss equals alpha: %s\n", all ? "yes" : "NO");

    /* dlogits of the skewed routing's loss beside central differences of the loss. */
    seq_balance_loss(logits, skewed, T, E, K, alpha, dl);
    double worst = 0.0, most, scale = 0.0, top;
    float junk[T * E];
    for (int c = 0; c < T * E; c++) {
        const float h = 1e-2f, keep = logits[c];
        logits[c] = keep + h;
        double up = seq_balance_loss(logits, skewed, T, E, K, alpha, junk);
        logits[c] = keep - h;
        double down = seq_balance_loss(logits, skewed, T, E, K, alpha, junk);
        logits[c] = keep;
        worst = fmax(worst, fabs((up - down) / (2.0 * h) - dl[c]));
        scale = fmax(scale, fabs(dl[c]));
    }
    MPI_Allreduce(&worst, &most, 1, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Allreduce(&scale, &top, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "dlogits equals the loss's central differences: %s (error %.1e of %.1e)\n",
                   most < 0.02 * top ? "yes" : "NO", most, top);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
