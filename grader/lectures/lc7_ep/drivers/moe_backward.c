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

enum { DT = 6, DD = 4, DE = 4, DF = 3, DK = 2, NPAR = DE * 3 * DD * DF };
static const float ALPHA = 0.1f;

/*
 * L = sum(y dy) + alpha E sum_i f_i P_i in double, densely (every expert on every token,
 * gated by its probability where chosen, 0 elsewhere), from double copies of the inputs:
 * what the finite differences are taken of.
 */
static double layer_loss(const double *x, const double *wr, const double *ex, const float *dy)
{
    double loss = 0.0, P[DE] = {0};
    int count[DE] = {0};
    for (int t = 0; t < DT; t++) {
        double z[DE], m = -INFINITY, sum = 0.0, p[DE];
        for (int e = 0; e < DE; e++) {
            z[e] = 0.0;
            for (int i = 0; i < DD; i++)
                z[e] += x[t * DD + i] * wr[i * DE + e];
            m = fmax(m, z[e]);
        }
        for (int e = 0; e < DE; e++)
            sum += exp(z[e] - m);
        int chosen[DE] = {0};
        for (int e = 0; e < DE; e++) {
            p[e] = exp(z[e] - m) / sum;
            P[e] += p[e] / DT;
        }
        for (int j = 0; j < DK; j++) { /* top-k by logit, the lower expert on ties */
            int best = -1;
            for (int e = 0; e < DE; e++)
                if (!chosen[e] && (best < 0 || z[e] > z[best]))
                    best = e;
            chosen[best] = 1;
            count[best]++;
        }
        for (int e = 0; e < DE; e++) {
            if (!chosen[e])
                continue;
            const double *wg = ex + e * 3 * DD * DF, *wu = wg + DD * DF, *wd = wu + DD * DF;
            for (int f = 0; f < DF; f++) {
                double g = 0.0, u = 0.0;
                for (int i = 0; i < DD; i++) {
                    g += x[t * DD + i] * wg[i * DF + f];
                    u += x[t * DD + i] * wu[i * DF + f];
                }
                double hf = g / (1.0 + exp(-g)) * u;
                for (int i = 0; i < DD; i++)
                    loss += p[e] * hf * wd[f * DD + i] * dy[t * DD + i];
            }
        }
    }
    for (int e = 0; e < DE; e++)
        loss += (double)ALPHA * DE * count[e] / (DK * DT) * P[e];
    return loss;
}

/* The central difference of layer_loss in one entry of one of its inputs. */
static double numeric(double *v, int i, const double *x, const double *wr, const double *ex,
                      const float *dy)
{
    const double step = 1e-5, keep = v[i];
    v[i] = keep + step;
    double up = layer_loss(x, wr, ex, dy);
    v[i] = keep - step;
    double down = layer_loss(x, wr, ex, dy);
    v[i] = keep;
    return (up - down) / (2 * step);
}

static double norm(const float *v, int n)
{
    double s = 0.0;
    for (int i = 0; i < n; i++)
        s += (double)v[i] * v[i];
    return sqrt(s);
}

/*
 * Each rank differentiates its own DT tokens (rank-distinct) through one router and DE
 * experts (the same on every rank), with a random dy and alpha = 0.1: each gradient's
 * norm, then a few entries of each beside central differences of the loss in double.
 */
static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    float wr[DD * DE], ex[NPAR], x[DT * DD], dy[DT * DD];
    float dx[DT * DD], dwr[DD * DE] = {0}, dex[NPAR] = {0};
    xt_rng g = xt_rng_seed(7);
    xt_rng_fill_uniform(&g, wr, DD * DE, -1.5f, 1.5f);
    xt_rng_fill_uniform(&g, ex, NPAR, -0.8f, 0.8f);
    xt_rng gx = xt_rng_seed(100 + (uint64_t)rank);
    xt_rng_fill_uniform(&gx, x, DT * DD, -1.0f, 1.0f);
    xt_rng_fill_uniform(&gx, dy, DT * DD, -1.0f, 1.0f);
    moe_backward(x, wr, ex, dy, DT, DD, DE, DF, DK, ALPHA, dx, dwr, dex);

    double xd[DT * DD], wd[DD * DE], ed[NPAR];
    for (int i = 0; i < DT * DD; i++)
        xd[i] = x[i];
    for (int i = 0; i < DD * DE; i++)
        wd[i] = wr[i];
    for (int i = 0; i < NPAR; i++)
        ed[i] = ex[i];
    /* A few entries of each: x's, Wr's, and expert 1's Wg, Wu and Wd. */
    const int per = 3 * DD * DF;
    struct {
        const char *name;
        double *v;
        const float *grad;
        int i;
    } at[] = {{"dx[0][0]", xd, dx, 0},
              {"dx[3][2]", xd, dx, 3 * DD + 2},
              {"dx[5][1]", xd, dx, 5 * DD + 1},
              {"dWr[0][0]", wd, dwr, 0},
              {"dWr[1][3]", wd, dwr, DE + 3},
              {"dWr[3][2]", wd, dwr, 3 * DE + 2},
              {"dWg1[0][1]", ed, dex, per + 1},
              {"dWu1[2][0]", ed, dex, per + DD * DF + 2 * DF},
              {"dWd1[1][3]", ed, dex, per + 2 * DD * DF + DD + 3}};
    int nat = (int)(sizeof at / sizeof at[0]);
    xt_printf_root(comm,
                   "MoE layer backward: T %d tokens (each rank its own), d %d, E %d, ff %d, "
                   "k %d,\nalpha %g, random dy; L = sum(y dy) + alpha E sum_i f_i P_i\n",
                   DT, DD, DE, DF, DK, ALPHA);
    double worst = 0.0;
    char table[1024];
    int len =
        snprintf(table, sizeof table, "%-11s %12s %12s\n", "entry", "analytic", "finite diff.");
    for (int a = 0; a < nat; a++) {
        double num = numeric(at[a].v, at[a].i, xd, wd, ed, dy), got = at[a].grad[at[a].i];
        worst = fmax(worst, fabs(got - num) / (1e-3 + fabs(num)));
        len += snprintf(table + len, sizeof table - (size_t)len, "%-11s %12.6f %12.6f\n",
                        at[a].name, got, num);
    }
    xt_printf_root(comm, "rank 0's gradients beside central differences in double (h = 1e-5):\n");
    xt_printf_root(comm, "%s", table);
    xt_printf_ordered(comm, "|dx| %.4f  |dWr| %.4f  |dexperts| %.4f  worst rel. difference %.1e\n",
                      norm(dx, DT * DD), norm(dwr, DD * DE), norm(dex, NPAR), worst);
    double all;
    MPI_Allreduce(&worst, &all, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "gradients agree with finite differences: %s\n",
                   all < 1e-3 ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
