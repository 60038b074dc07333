/*
 * The driver of lc7_ep/moe_forward.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    ep_layer l = ep_layer_read(c);
    XT_CHECK(l.n_experts == l.E, "moe_forward's case gives %ld experts' parameters, not E = %d",
             l.n_experts, l.E);
    long n = (long)l.T * l.d;
    float *y = xt_case_alloc(c, "y", n, XT_F32);
    float aux = moe_forward(l.x, l.wr, l.experts, l.T, l.d, l.E, l.ff, l.k, l.alpha, y);
    xt_case_output(c, "y", y, XT_F32, n);
    xt_case_output(c, "aux", &aux, XT_F32, 1);
}

/* ----------------------------------------------------------------- demo */

enum { DRIVER_DT = 6, DRIVER_DD = 4, DRIVER_DE = 4, DRIVER_DF = 3, DRIVER_DK = 2 };
static const float DRIVER_ALPHA = 0.01f; /* the Switch Transformer's */

/* The routing in double: probabilities, and each token's k experts by decreasing logit
 * (of equal ones the lower expert first), as xt_topk_route chooses. */
static void driver_route_double(double *probs, int *idx, const float *x, const float *wr, int T,
                                int d, int E, int k)
{
    for (int t = 0; t < T; t++) {
        double z[16], m = -INFINITY, sum = 0.0;
        for (int e = 0; e < E; e++) {
            z[e] = 0.0;
            for (int i = 0; i < d; i++)
                z[e] += (double)x[t * d + i] * wr[i * E + e];
            m = fmax(m, z[e]);
        }
        for (int e = 0; e < E; e++)
            sum += exp(z[e] - m);
        for (int e = 0; e < E; e++)
            probs[t * E + e] = exp(z[e] - m) / sum;
        for (int j = 0; j < k; j++) {
            int best = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++)
                    taken |= idx[t * k + i] == e;
                if (!taken && (best < 0 || z[e] > z[best]))
                    best = e;
            }
            idx[t * k + j] = best;
        }
    }
}

/*
 * The dense computation in double: every expert on every token, each output weighted
 * by its gate, the token's probability of that expert where it is among its k choices
 * and 0 elsewhere. Returns the largest |y - dense|.
 */
static double driver_dense_difference(const float *y, const float *x, const float *wr,
                                      const float *experts, int T, int d, int E, int ff, int k)
{
    double probs[DRIVER_DT * DRIVER_DE], worst = 0.0;
    int idx[DRIVER_DT * DRIVER_DK];
    driver_route_double(probs, idx, x, wr, T, d, E, k);
    long per = xt_expert_params(d, ff);
    for (int t = 0; t < T; t++) {
        double yt[DRIVER_DD] = {0};
        for (int e = 0; e < E; e++) {
            double gate = 0.0;
            for (int j = 0; j < k; j++)
                if (idx[t * k + j] == e)
                    gate = probs[t * E + e];
            const float *wg = experts + e * per, *wu = wg + d * ff, *wd = wu + d * ff;
            for (int f = 0; f < ff; f++) {
                double gv = 0.0, uv = 0.0;
                for (int i = 0; i < d; i++) {
                    gv += (double)x[t * d + i] * wg[i * ff + f];
                    uv += (double)x[t * d + i] * wu[i * ff + f];
                }
                double h = gv / (1.0 + exp(-gv)) * uv;
                for (int i = 0; i < d; i++)
                    yt[i] += gate * h * wd[f * d + i];
            }
        }
        for (int i = 0; i < d; i++)
            worst = fmax(worst, fabs(y[t * d + i] - yt[i]));
    }
    return worst;
}

/* One line: tokens per expert, P_i and the loss (every rank's, or rank 0's alone). */
static void driver_print_balance(MPI_Comm comm, int every_rank, const char *what, const float *x,
                                 const float *wr, int T, float loss)
{
    double probs[DRIVER_DT * DRIVER_DE];
    int idx[DRIVER_DT * DRIVER_DK], count[DRIVER_DE] = {0};
    driver_route_double(probs, idx, x, wr, T, DRIVER_DD, DRIVER_DE, DRIVER_DK);
    for (int c = 0; c < T * DRIVER_DK; c++)
        count[idx[c]]++;
    char line[160];
    int at = snprintf(line, sizeof line, "%-8s tokens per expert", what);
    for (int e = 0; e < DRIVER_DE; e++)
        at += snprintf(line + at, sizeof line - (size_t)at, " %d", count[e]);
    at += snprintf(line + at, sizeof line - (size_t)at, "   P");
    for (int e = 0; e < DRIVER_DE; e++) {
        double P = 0.0;
        for (int t = 0; t < T; t++)
            P += probs[t * DRIVER_DE + e] / T;
        at += snprintf(line + at, sizeof line - (size_t)at, " %.2f", P);
    }
    if (every_rank)
        xt_printf_ordered(comm, "%s   loss %.4f\n", line, loss);
    else
        xt_printf_root(comm, "%s   loss %.4f\n", line, loss);
}

/*
 * Each rank routes its own DRIVER_DT tokens (rank-distinct) through one router and DRIVER_DE
 * experts (the same on every rank): the routing table, the tokens per expert and the
 * balance loss; then skewed tokens (a constant first feature that the router reads as
 * "expert 0"); then perfectly uniform routing, where the loss is exactly alpha; and y
 * beside a dense computation in double.
 */
static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    long per = xt_expert_params(DRIVER_DD, DRIVER_DF);
    float wr[DRIVER_DD * DRIVER_DE], experts[DRIVER_DE * 3 * DRIVER_DD * DRIVER_DF],
        x[DRIVER_DT * DRIVER_DD], xs[DRIVER_DT * DRIVER_DD], y[DRIVER_DT * DRIVER_DD];
    xt_rng g = xt_rng_seed(7);
    xt_rng_fill_uniform(&g, wr, DRIVER_DD * DRIVER_DE, -1.5f, 1.5f);
    xt_rng_fill_uniform(&g, experts, DRIVER_DE * per, -0.8f, 0.8f);
    xt_rng gx = xt_rng_seed(100 + (uint64_t)rank);
    xt_rng_fill_uniform(&gx, x, DRIVER_DT * DRIVER_DD, -1.0f, 1.0f);
    xt_printf_root(comm,
                   "one MoE layer per rank: T %d tokens (each rank its own), d %d, E %d "
                   "experts, ff %d,\nk %d, alpha %g; routing table: token -> expert "
                   "(weight), by decreasing weight\n",
                   DRIVER_DT, DRIVER_DD, DRIVER_DE, DRIVER_DF, DRIVER_DK, DRIVER_ALPHA);
    float loss = moe_forward(x, wr, experts, DRIVER_DT, DRIVER_DD, DRIVER_DE, DRIVER_DF, DRIVER_DK,
                             DRIVER_ALPHA, y);
    double probs[DRIVER_DT * DRIVER_DE];
    int idx[DRIVER_DT * DRIVER_DK];
    driver_route_double(probs, idx, x, wr, DRIVER_DT, DRIVER_DD, DRIVER_DE, DRIVER_DK);
    char table[1024];
    int at = 0;
    for (int t = 0; t < DRIVER_DT; t++) {
        at += snprintf(table + at, sizeof table - (size_t)at, "token %d ->", t);
        for (int j = 0; j < DRIVER_DK; j++)
            at += snprintf(table + at, sizeof table - (size_t)at, "  e%d (%.2f)",
                           idx[t * DRIVER_DK + j], probs[t * DRIVER_DE + idx[t * DRIVER_DK + j]]);
        at += snprintf(table + at, sizeof table - (size_t)at, "%s", t < DRIVER_DT - 1 ? "\n" : "");
    }
    xt_printf_ordered(comm, "%s\n", table);
    double worst = driver_dense_difference(y, x, wr, experts, DRIVER_DT, DRIVER_DD, DRIVER_DE,
                                           DRIVER_DF, DRIVER_DK);
    driver_print_balance(comm, 1, "random", x, wr, DRIVER_DT, loss);

    /* Skewed: feature 0 is 2 on every token and Wr's row 0 favours expert 0. */
    float wskew[DRIVER_DD * DRIVER_DE];
    memcpy(wskew, wr, sizeof wskew);
    memcpy(xs, x, sizeof xs);
    for (int t = 0; t < DRIVER_DT; t++)
        xs[t * DRIVER_DD] = 1.0f;
    wskew[0] = 2.0f;
    wskew[DRIVER_DE - 1] = -2.0f;
    loss = moe_forward(xs, wskew, experts, DRIVER_DT, DRIVER_DD, DRIVER_DE, DRIVER_DF, DRIVER_DK,
                       DRIVER_ALPHA, y);
    worst = fmax(worst, driver_dense_difference(y, xs, wskew, experts, DRIVER_DT, DRIVER_DD,
                                                DRIVER_DE, DRIVER_DF, DRIVER_DK));
    driver_print_balance(comm, 1, "skewed", xs, wskew, DRIVER_DT, loss);

    /* Uniform: T = E tokens x_t = e_t, Wr circulant: every expert is chosen k times and
     * its probabilities are a permutation of every other's, so f_i = P_i = 1/E. */
    float xu[DRIVER_DE * DRIVER_DD] = {0}, wu[DRIVER_DD * DRIVER_DE];
    const float row[DRIVER_DE] = {2.0f, 1.0f, 0.0f, -1.0f};
    for (int i = 0; i < DRIVER_DE; i++) {
        xu[i * DRIVER_DD + i] = 1.0f;
        for (int e = 0; e < DRIVER_DE; e++)
            wu[i * DRIVER_DE + e] = row[(e - i + DRIVER_DE) % DRIVER_DE];
    }
    loss = moe_forward(xu, wu, experts, DRIVER_DE, DRIVER_DD, DRIVER_DE, DRIVER_DF, DRIVER_DK,
                       DRIVER_ALPHA, y);
    worst = fmax(worst, driver_dense_difference(y, xu, wu, experts, DRIVER_DE, DRIVER_DD, DRIVER_DE,
                                                DRIVER_DF, DRIVER_DK));
    driver_print_balance(comm, 0, "uniform", xu, wu, DRIVER_DE, loss);
    xt_printf_root(comm,
                   "uniform routing (T = E, Wr circulant): f_i = P_i = 1/E, loss %.6f %s alpha\n",
                   loss, fabsf(loss - DRIVER_ALPHA) < 1e-7f ? "=" : "!=");
    double all;
    MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "max |y - dense| %.1e: y agrees with a dense computation: %s\n", all,
                   all < 1e-5 ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
