/*
 * sequence_parallel.c: the pre-norm SwiGLU block with Megatron sequence
 * parallelism (Korthikanti et al. 2022). docs/lc4_tp.md#sequence_parallel
 *
 *     y = x + MLP(RMSNorm(x; gamma))      MLP(z) = (silu(z Wg) * (z Wu)) Wd
 *
 * Tensor parallelism alone (mlp_tp) keeps every token on every rank outside
 * the MLP, so the norm and the residual are computed np times over and their
 * activations are whole on every rank. Sequence parallelism cuts the tokens
 * there instead: rank r holds the tokens xt_block(T, np, r), and the
 * all-reduce g after the row-parallel projection becomes a reduce-scatter
 * (each rank receives the sum of its own tokens only), while the identity f
 * in front of the column-parallel projections becomes an all-gather:
 *
 *   x_r --RMSNorm--> n_r --AG--> n (T x d) --[Wg_r, Wu_r]--> silu(g) * u --Wd_r--> p_r
 *   (own tokens)       all-gather            (all T tokens, own hidden units)     (T x d)
 *
 *   y_r = x_r + RS(p)_r              RS: reduce-scatter by the token blocks
 *
 * Backward mirrors it: the reduce-scatter's mirror is an all-gather of dy,
 * the all-gather's mirror a reduce-scatter of dn; the norm's backward runs
 * on the own tokens and dgamma, a sum over all tokens, is all-reduced (d
 * floats). Backward gathers n again from the n_r forward kept, as Megatron
 * does, so that forward keeps only 1/np of the norm's activations.
 *
 * Cost per rank: forward one all-gather and one reduce-scatter of T*d floats
 * in all; by the ring formulas each moves (np-1)/np T d floats per rank, so
 * together they cost exactly mlp_tp's all-reduce (an all-reduce is a
 * reduce-scatter then an all-gather). Backward: two all-gathers (dy, n), one
 * reduce-scatter, and one all-reduce of d floats (dgamma).
 */
#include "xt_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

// BEGIN SOLUTION
/* Every rank's block of the T x d tokens as MPI counts and displacements, in floats. */
static void token_blocks(int T, int d, int np, int *counts, int *displs)
{
    for (int r = 0; r < np; r++) {
        int lo, count;
        xt_block(T, np, r, &lo, &count);
        counts[r] = count * d;
        displs[r] = lo * d;
    }
}
// END SOLUTION

/*
 * x, y: this rank's tokens xt_block(T, np, rank), T_local x d; gamma: d,
 * the same on every rank; w: the hidden-unit blocks of mlp_tp, contiguous:
 * Wg_r, Wu_r (d x ff_local each), then Wd_r (ff_local x d). Returns what
 * backward needs.
 */
float *seqpar_forward(const float *x, const float *gamma, const float *w, float *y, int T, int d,
                      int ff_local, float eps, MPI_Comm comm)
{
    /*
     * TODO: y = x + MLP(RMSNorm(x)), own tokens
     *   Exactly one MPI_Allgatherv (T_local*d floats sent) and one MPI_Reduce_scatter (T*d),
     *   nothing else. Return one xt_alloc(XT_MEM_ACTIVATIONS) block of exactly
     *   T_local*(d+1) + 3*T*ff_local floats (layout yours), backward frees it; the activations'
     *   peak is checked to the byte: scratch is not XT_MEM_ACTIVATIONS (malloc, XT_MEM_COMM).
     */
    // BEGIN SOLUTION
    int np, rank, lo, tl;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int *counts = malloc(sizeof(int) * np), *displs = malloc(sizeof(int) * np);
    token_blocks(T, d, np, counts, displs);
    xt_block(T, np, rank, &lo, &tl);
    size_t nh = (size_t)T * (size_t)ff_local, td = (size_t)T * (size_t)d;
    size_t nw = (size_t)d * (size_t)ff_local;
    const float *wg = w, *wu = w + nw, *wd = w + 2 * nw;
    float *act = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * ((size_t)tl * (d + 1) + 3 * nh));
    float *n_own = act, *rstd = act + (size_t)tl * d;
    float *g = rstd + tl, *u = g + nh, *h = u + nh;
    xt_rmsnorm_forward(n_own, rstd, x, gamma, tl, d, eps);
    float *n_all = xt_alloc(XT_MEM_COMM, sizeof(float) * td);
    float *partial = xt_alloc(XT_MEM_COMM, sizeof(float) * td);
    MPI_Allgatherv(n_own, tl * d, MPI_FLOAT, n_all, counts, displs, MPI_FLOAT, comm);
    xt_linear_forward(g, n_all, wg, NULL, T, d, ff_local);
    xt_linear_forward(u, n_all, wu, NULL, T, d, ff_local);
    xt_silu_forward(h, g, (long)nh);
    for (size_t i = 0; i < nh; i++)
        h[i] *= u[i];
    xt_linear_forward(partial, h, wd, NULL, T, ff_local, d);
    MPI_Reduce_scatter(partial, y, counts, MPI_FLOAT, MPI_SUM, comm);
    for (size_t i = 0; i < (size_t)tl * d; i++)
        y[i] += x[i];
    xt_free(partial);
    xt_free(n_all);
    free(displs);
    free(counts);
    return act;
    // END SOLUTION
}

/* dw: the gradients of w, in w's layout. */
void seqpar_backward(const float *x, const float *gamma, const float *w, float *act,
                     const float *dy, float *dx, float *dgamma, float *dw, int T, int d,
                     int ff_local, MPI_Comm comm)
{
    /*
     * TODO: backward, xt_free(act)
     *   dx (T_local x d) overwritten; dw += the own blocks' gradients; dgamma += the sum over
     *   all T tokens, bit-identical on every rank (it arrives holding earlier gradients, the
     *   same everywhere). Exactly two MPI_Allgatherv of T_local*d floats (dy, and the norm's
     *   output again), one MPI_Reduce_scatter of T*d, one MPI_Allreduce of d; nothing else.
     */
    // BEGIN SOLUTION
    int np, rank, lo, tl;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int *counts = malloc(sizeof(int) * np), *displs = malloc(sizeof(int) * np);
    token_blocks(T, d, np, counts, displs);
    xt_block(T, np, rank, &lo, &tl);
    size_t nh = (size_t)T * (size_t)ff_local, td = (size_t)T * (size_t)d;
    size_t nw = (size_t)d * (size_t)ff_local;
    const float *wg = w, *wu = w + nw, *wd = w + 2 * nw;
    float *dwg = dw, *dwu = dw + nw, *dwd = dw + 2 * nw;
    const float *n_own = act, *rstd = act + (size_t)tl * d;
    const float *g = rstd + tl, *u = g + nh, *h = u + nh;

    float *dy_all = xt_alloc(XT_MEM_COMM, sizeof(float) * td);
    float *n_all = xt_alloc(XT_MEM_COMM, sizeof(float) * td);
    MPI_Allgatherv(dy, tl * d, MPI_FLOAT, dy_all, counts, displs, MPI_FLOAT, comm);
    MPI_Allgatherv(n_own, tl * d, MPI_FLOAT, n_all, counts, displs, MPI_FLOAT, comm);

    float *dh = malloc(sizeof(float) * (nh + 1)), *du = malloc(sizeof(float) * (nh + 1));
    float *silu_g = malloc(sizeof(float) * (nh + 1));
    xt_linear_backward(dh, dwd, NULL, dy_all, h, wd, T, ff_local, d);
    xt_silu_forward(silu_g, g, (long)nh);
    for (size_t i = 0; i < nh; i++) {
        du[i] = dh[i] * silu_g[i];
        dh[i] *= u[i]; /* now d silu(g) */
    }
    xt_silu_backward(dh, dh, g, (long)nh); /* now dg */
    float *dn_all = xt_alloc(XT_MEM_COMM, sizeof(float) * td);
    float *dn_up = malloc(sizeof(float) * (td + 1));
    xt_linear_backward(dn_all, dwg, NULL, dh, n_all, wg, T, d, ff_local);
    xt_linear_backward(dn_up, dwu, NULL, du, n_all, wu, T, d, ff_local);
    for (size_t i = 0; i < td; i++)
        dn_all[i] += dn_up[i];

    float *dn = malloc(sizeof(float) * ((size_t)tl * d + 1));
    float *dgamma_sum = calloc((size_t)d + 1, sizeof(float));
    MPI_Reduce_scatter(dn_all, dn, counts, MPI_FLOAT, MPI_SUM, comm);
    xt_rmsnorm_backward(dx, dgamma_sum, dn, x, gamma, rstd, tl, d);
    for (size_t i = 0; i < (size_t)tl * d; i++)
        dx[i] += dy[i];
    MPI_Allreduce(MPI_IN_PLACE, dgamma_sum, d, MPI_FLOAT, MPI_SUM, comm);
    for (int j = 0; j < d; j++)
        dgamma[j] += dgamma_sum[j];

    free(dgamma_sum);
    free(dn);
    free(dn_up);
    xt_free(dn_all);
    free(silu_g);
    free(du);
    free(dh);
    xt_free(n_all);
    xt_free(dy_all);
    free(displs);
    free(counts);
    xt_free(act);
    // END SOLUTION
}

/* ------------------------------------------------------------------------ */

#define EPS 1e-5f

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int T = (int)xt_case_int(c, "T"), d = (int)xt_case_int(c, "d");
    int ff = (int)xt_case_int(c, "ff"), np, rank, lo, tl, ff_local;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(T, np, rank, &lo, &tl);
    xt_block(ff, np, rank, &lo, &ff_local);
    xt_array x = xt_case_input_const(c, "x"), gamma = xt_case_input_const(c, "gamma");
    xt_array w = xt_case_input_const(c, "w");
    long n = (long)tl * d, nw = (long)d * ff_local;
    float *y = xt_case_alloc(c, "y", n, XT_F32);
    float *act = seqpar_forward(x.data, gamma.data, w.data, y, T, d, ff_local, EPS, comm);
    xt_case_output(c, "y", y, XT_F32, n);
    if (!xt_case_is(c, "seqpar_backward")) {
        xt_free(act);
        return;
    }
    xt_array dy = xt_case_input_const(c, "dy"), dgamma = xt_case_input(c, "dgamma");
    xt_array dw = xt_case_input(c, "dw");
    float *dx = xt_case_alloc(c, "dx", n, XT_F32), *dwf = dw.data;
    seqpar_backward(x.data, gamma.data, w.data, act, dy.data, dx, dgamma.data, dwf, T, d, ff_local,
                    comm);
    xt_case_output(c, "dx", dx, XT_F32, n);
    xt_case_output(c, "dgamma", dgamma.data, XT_F32, dgamma.count);
    xt_case_output(c, "dwg", dwf, XT_F32, nw);
    xt_case_output(c, "dwu", dwf + nw, XT_F32, nw);
    xt_case_output(c, "dwd", dwf + 2 * nw, XT_F32, nw);
}

/* Rank `rank`'s w (seqpar_forward's layout) from the whole Wg, Wu (d x ff) and Wd (ff x d). */
static void shard(float *w, const float *wg, const float *wu, const float *wd, int d, int ff,
                  int np, int rank)
{
    int lo, fl;
    xt_block(ff, np, rank, &lo, &fl);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < fl; j++) {
            w[i * fl + j] = wg[i * ff + lo + j];
            w[d * fl + i * fl + j] = wu[i * ff + lo + j];
        }
    memcpy(w + 2 * d * fl, wd + lo * d, sizeof(float) * fl * d);
}

/*
 * T = 6 tokens, d = 4, ff = 10: rank r holds the tokens xt_block(6, np, r)
 * and the hidden units xt_block(10, np, r). Every rank also runs the same
 * functions on MPI_COMM_SELF with all tokens and the whole weights, the
 * single-process twin, and compares its own tokens.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 6, D = 4, FF = 10 };
    int np, rank, lo, tl, flo, fl;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(T, np, rank, &lo, &tl);
    xt_block(FF, np, rank, &flo, &fl);
    float x[T * D], gamma[D], wg[D * FF], wu[D * FF], wd[FF * D], dy[T * D];
    xt_rng rg = xt_rng_seed(4);
    xt_rng_fill_uniform(&rg, x, T * D, -1, 1);
    xt_rng_fill_uniform(&rg, gamma, D, 0.5f, 1.5f);
    xt_rng_fill_uniform(&rg, wg, D * FF, -0.5f, 0.5f);
    xt_rng_fill_uniform(&rg, wu, D * FF, -0.5f, 0.5f);
    xt_rng_fill_uniform(&rg, wd, FF * D, -0.5f, 0.5f);
    xt_rng_fill_uniform(&rg, dy, T * D, -1, 1);
    float w[3 * D * FF], w1[3 * D * FF];
    shard(w, wg, wu, wd, D, FF, np, rank);
    shard(w1, wg, wu, wd, D, FF, 1, 0);

    xt_printf_root(comm, "y = x + MLP(RMSNorm(x)), T %d tokens, d %d, ff %d\n", T, D, FF);
    xt_printf_ordered(comm, "tokens %d..%d (%d), hidden units %d..%d (%d)\n", lo, lo + tl - 1, tl,
                      flo, flo + fl - 1, fl);
    float y[T * D], dx[T * D], dgamma[D] = {0}, dw[3 * D * FF] = {0};
    float *act = seqpar_forward(x + lo * D, gamma, w, y, T, D, fl, EPS, comm);
    long kept = (long)xt_mem_peak(XT_MEM_ACTIVATIONS);
    xt_print_buffer_ordered(comm, "y, first own token: ", y, tl ? D : 0, MPI_FLOAT);
    seqpar_backward(x + lo * D, gamma, w, act, dy + lo * D, dx, dgamma, dw, T, D, fl, comm);
    xt_print_buffer_ordered(comm, "dx, first own token: ", dx, tl ? D : 0, MPI_FLOAT);
    xt_printf_root(comm, "activations kept, bytes: 4 (T_local (d+1) + 3 T ff_local)\n");
    xt_printf_ordered(comm, "kept %ld B (norm %d B); without sequence parallelism %d B\n", kept,
                      4 * tl * (D + 1), 4 * (T * (D + 1) + 3 * T * fl));

    float y1[T * D], dx1[T * D], dgamma1[D] = {0}, dw1[3 * D * FF] = {0};
    float *act1 = seqpar_forward(x, gamma, w1, y1, T, D, FF, EPS, MPI_COMM_SELF);
    seqpar_backward(x, gamma, w1, act1, dy, dx1, dgamma1, dw1, T, D, FF, MPI_COMM_SELF);
    float err = 0;
    for (int i = 0; i < tl * D; i++)
        err = fmaxf(err, fmaxf(fabsf(y[i] - y1[lo * D + i]), fabsf(dx[i] - dx1[lo * D + i])));
    for (int j = 0; j < D; j++)
        err = fmaxf(err, fabsf(dgamma[j] - dgamma1[j]));
    MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm, "split vs single process: max |difference| of y, dx, dgamma %.1e (%s)\n",
                   err, err < 1e-5f ? "agree" : "DIFFER");
    xt_printf_root(comm,
                   "forward: all-gather + reduce-scatter, T*d = %d floats; backward: "
                   "2 all-gathers,\n1 reduce-scatter, 1 all-reduce of d = %d (dgamma)\n",
                   T * D, D);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
