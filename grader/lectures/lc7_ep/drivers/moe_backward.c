/*
 * The driver of lc7_ep/moe_backward.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    ep_layer l = ep_layer_read(c);
    XT_CHECK(l.n_experts == l.E && l.dy,
             "moe_backward's case gives %ld experts' parameters "
             "(E = %d) and %s dy",
             l.n_experts, l.E, l.dy ? "a" : "no");
    long n = (long)l.T * l.d, np = (long)l.E * xt_expert_params(l.d, l.ff);
    xt_array dwr = xt_case_input(c, "dwr"), dexperts = xt_case_input(c, "dexperts");
    XT_CHECK(dwr.count == (long)l.d * l.E && dexperts.count == np,
             "the case's dwr, dexperts hold %ld, %ld floats", dwr.count, dexperts.count);
    float *dx = xt_case_alloc(c, "dx", n, XT_F32);
    moe_backward(l.x, l.wr, l.experts, l.dy, l.T, l.d, l.E, l.ff, l.k, l.alpha, dx, dwr.data,
                 dexperts.data);
    xt_case_output(c, "dx", dx, XT_F32, n);
    xt_case_output(c, "dwr", dwr.data, XT_F32, dwr.count);
    xt_case_output(c, "dexperts", dexperts.data, XT_F32, np);
}

/* ----------------------------------------------------------------- demo */

enum {
    DRIVER_DT = 6,
    DRIVER_DD = 4,
    DRIVER_DE = 4,
    DRIVER_DF = 3,
    DRIVER_DK = 2,
    DRIVER_NPAR = DRIVER_DE * 3 * DRIVER_DD * DRIVER_DF
};
static const float DRIVER_ALPHA = 0.1f;

/*
 * L = sum(y dy) + alpha E sum_i f_i P_i in double, densely (every expert on every token,
 * gated by its probability where chosen, 0 elsewhere), from double copies of the inputs:
 * what the finite differences are taken of.
 */
static double driver_layer_loss(const double *x, const double *wr, const double *ex,
                                const float *dy)
{
    double loss = 0.0, P[DRIVER_DE] = {0};
    int count[DRIVER_DE] = {0};
    for (int t = 0; t < DRIVER_DT; t++) {
        double z[DRIVER_DE], m = -INFINITY, sum = 0.0, p[DRIVER_DE];
        for (int e = 0; e < DRIVER_DE; e++) {
            z[e] = 0.0;
            for (int i = 0; i < DRIVER_DD; i++)
                z[e] += x[t * DRIVER_DD + i] * wr[i * DRIVER_DE + e];
            m = fmax(m, z[e]);
        }
        for (int e = 0; e < DRIVER_DE; e++)
            sum += exp(z[e] - m);
        int chosen[DRIVER_DE] = {0};
        for (int e = 0; e < DRIVER_DE; e++) {
            p[e] = exp(z[e] - m) / sum;
            P[e] += p[e] / DRIVER_DT;
        }
        for (int j = 0; j < DRIVER_DK; j++) { /* top-k by logit, the lower expert on ties */
            int best = -1;
            for (int e = 0; e < DRIVER_DE; e++)
                if (!chosen[e] && (best < 0 || z[e] > z[best]))
                    best = e;
            chosen[best] = 1;
            count[best]++;
        }
        for (int e = 0; e < DRIVER_DE; e++) {
            if (!chosen[e])
                continue;
            const double *wg = ex + e * 3 * DRIVER_DD * DRIVER_DF, *wu = wg + DRIVER_DD * DRIVER_DF,
                         *wd = wu + DRIVER_DD * DRIVER_DF;
            for (int f = 0; f < DRIVER_DF; f++) {
                double g = 0.0, u = 0.0;
                for (int i = 0; i < DRIVER_DD; i++) {
                    g += x[t * DRIVER_DD + i] * wg[i * DRIVER_DF + f];
                    u += x[t * DRIVER_DD + i] * wu[i * DRIVER_DF + f];
                }
                double hf = g / (1.0 + exp(-g)) * u;
                for (int i = 0; i < DRIVER_DD; i++)
                    loss += p[e] * hf * wd[f * DRIVER_DD + i] * dy[t * DRIVER_DD + i];
            }
        }
    }
    for (int e = 0; e < DRIVER_DE; e++)
        loss += (double)DRIVER_ALPHA * DRIVER_DE * count[e] / (DRIVER_DK * DRIVER_DT) * P[e];
    return loss;
}

/* The central difference of driver_layer_loss in one entry of one of its inputs. */
static double driver_numeric(double *v, int i, const double *x, const double *wr, const double *ex,
                             const float *dy)
{
    const double step = 1e-5, keep = v[i];
    v[i] = keep + step;
    double up = driver_layer_loss(x, wr, ex, dy);
    v[i] = keep - step;
    double down = driver_layer_loss(x, wr, ex, dy);
    v[i] = keep;
    return (up - down) / (2 * step);
}

static double driver_norm(const float *v, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += (double)v[i] * v[i];
    return sqrt(s);
}

/*
 * Each rank differentiates its own DRIVER_DT tokens (rank-distinct) through one router and DRIVER_DE
 * experts (the same on every rank), with a random dy and alpha = 0.1: each gradient's
 * driver_norm, then a few entries of each beside central differences of the loss in double.
 */
static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    float wr[DRIVER_DD * DRIVER_DE], ex[DRIVER_NPAR], x[DRIVER_DT * DRIVER_DD],
        dy[DRIVER_DT * DRIVER_DD];
    float dx[DRIVER_DT * DRIVER_DD], dwr[DRIVER_DD * DRIVER_DE] = {0}, dex[DRIVER_NPAR] = {0};
    xt_rng g = xt_rng_seed(7);
    xt_rng_fill_uniform(&g, wr, DRIVER_DD * DRIVER_DE, -1.5f, 1.5f);
    xt_rng_fill_uniform(&g, ex, DRIVER_NPAR, -0.8f, 0.8f);
    xt_rng gx = xt_rng_seed(100 + (uint64_t)rank);
    xt_rng_fill_uniform(&gx, x, DRIVER_DT * DRIVER_DD, -1.0f, 1.0f);
    xt_rng_fill_uniform(&gx, dy, DRIVER_DT * DRIVER_DD, -1.0f, 1.0f);
    moe_backward(x, wr, ex, dy, DRIVER_DT, DRIVER_DD, DRIVER_DE, DRIVER_DF, DRIVER_DK, DRIVER_ALPHA,
                 dx, dwr, dex);

    double xd[DRIVER_DT * DRIVER_DD], wd[DRIVER_DD * DRIVER_DE], ed[DRIVER_NPAR];
    for (int i = 0; i < DRIVER_DT * DRIVER_DD; i++)
        xd[i] = x[i];
    for (int i = 0; i < DRIVER_DD * DRIVER_DE; i++)
        wd[i] = wr[i];
    for (int i = 0; i < DRIVER_NPAR; i++)
        ed[i] = ex[i];
    /* A few entries of each: x's, Wr's, and expert 1's Wg, Wu and Wd. */
    const int per = 3 * DRIVER_DD * DRIVER_DF;
    struct {
        const char *name;
        double *v;
        const float *grad;
        int i;
    } at[] = {{"dx[0][0]", xd, dx, 0},
              {"dx[3][2]", xd, dx, 3 * DRIVER_DD + 2},
              {"dx[5][1]", xd, dx, 5 * DRIVER_DD + 1},
              {"dWr[0][0]", wd, dwr, 0},
              {"dWr[1][3]", wd, dwr, DRIVER_DE + 3},
              {"dWr[3][2]", wd, dwr, 3 * DRIVER_DE + 2},
              {"dWg1[0][1]", ed, dex, per + 1},
              {"dWu1[2][0]", ed, dex, per + DRIVER_DD * DRIVER_DF + 2 * DRIVER_DF},
              {"dWd1[1][3]", ed, dex, per + 2 * DRIVER_DD * DRIVER_DF + DRIVER_DD + 3}};
    int nat = (int)(sizeof at / sizeof at[0]);
    xt_printf_root(comm,
                   "MoE layer backward: T %d tokens (each rank its own), d %d, E %d, ff %d, "
                   "k %d,\nalpha %g, random dy; L = sum(y dy) + alpha E sum_i f_i P_i\n",
                   DRIVER_DT, DRIVER_DD, DRIVER_DE, DRIVER_DF, DRIVER_DK, DRIVER_ALPHA);
    double worst = 0.0;
    char table[1024];
    int len =
        snprintf(table, sizeof table, "%-11s %12s %12s\n", "entry", "analytic", "finite diff.");
    for (int a = 0; a < nat; a++) {
        double num = driver_numeric(at[a].v, at[a].i, xd, wd, ed, dy), got = at[a].grad[at[a].i];
        worst = fmax(worst, fabs(got - num) / (1e-3 + fabs(num)));
        len += snprintf(table + len, sizeof table - (size_t)len, "%-11s %12.6f %12.6f\n",
                        at[a].name, got, num);
    }
    xt_printf_root(comm, "rank 0's gradients beside central differences in double (h = 1e-5):\n");
    xt_printf_root(comm, "%s", table);
    xt_printf_ordered(comm, "|dx| %.4f  |dWr| %.4f  |dexperts| %.4f  worst rel. difference %.1e\n",
                      driver_norm(dx, DRIVER_DT * DRIVER_DD),
                      driver_norm(dwr, DRIVER_DD * DRIVER_DE), driver_norm(dex, DRIVER_NPAR),
                      worst);
    double all;
    MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "gradients agree with finite differences: %s\n",
                   all < 1e-3 ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
