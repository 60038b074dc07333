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

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/sequence_parallel.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
