/*
 * moe_backward.c: the backward of one mixture-of-experts layer on one
 * process, through the experts, the combine weights and the Switch balance
 * loss. docs/lc7_ep.md#moe_backward
 *
 * The forward (moe_forward.c) is y_t = sum_j w_tj out_tj, out_tj =
 * expert_idx_tj(x_t), w_tj = probs[t][idx_tj], probs = softmax(x Wr), plus
 * the loss alpha E sum_i f_i P_i. Of L = sum(y dy) + that loss, the gradient
 * flows back along two roads, which meet again in dx:
 *
 *          dy_t ----------------+-----------------------------+
 *            |                  |                             |
 *    times w_tj (ONCE)    <dy_t, out_tj> = dw_tj       alpha E f_i / T
 *            |                  |                       (every token,
 *    SwiGLU backward      top-k backward: only the      every expert:
 *    of expert idx_tj     chosen probabilities          through P_i)
 *       /        \              \                         /
 *   dWg dWu dWd   dx_t (experts)  dprobs -- softmax backward --> dlogits
 *                       \                                    /     \
 *                        +------- dx_t += dlogits_t Wr^T ---+  dWr += x^T dlogits
 *
 * The SwiGLU backward, with s = sigmoid(g), h = silu(g) u, out = h Wd, and
 * do the expert's output gradient (w dy):
 *   dWd += h^T do    dh = do Wd^T    du = dh silu(g)    dg = dh u s (1 + g (1 - s))
 *   dWg += x^T dg    dWu += x^T du   dx = dg Wg^T + du Wu^T
 * f_i is a count: no gradient flows through it.
 *
 * Cost: one process, no messages. Compute: the forward's experts again (6 k T
 * d ff flops, or kept from the forward in a real layer) and twice that
 * backward (12 k T d ff), the router 4 T d E.
 */
#include "kit.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void moe_backward(const float *x, const float *wr, const float *experts, const float *dy, int T,
                  int d, int E, int ff, int k, float alpha, float *dx, float *dwr, float *dexperts)
{
    /*
     * TODO: the layer's gradients.
     *   Of L = sum(y dy) + the balance loss (moe_forward's, with alpha), recomputing what the
     *   forward had. dx (T x d, arrives holding garbage) overwritten: through the experts
     *   and through the router; dwr (d x E) and dexperts (every expert's, xt_expert_params'
     *   layout) +=. No gradient through f_i (a count). SwiGLU's backward by hand:
     *   xt_swiglu_backward, xt_silu_backward and xt_experts_* are refused. Each expert
     *   on its routed rows alone, its products through xt_gemm (rows counted). No MPI call.
     */
    XT_TODO("the layer's gradients.", x, wr, experts, dy, T, d, E, ff, k, alpha, dx, dwr, dexperts);
}

/* ------------------------------------------------------------------------ */

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
