/*
 * mlp_tp.c: a transformer's SwiGLU MLP split across ranks, Megatron style.
 * docs/lc4_tp.md#mlp_tp
 *
 *     y = (silu(x Wg) * (x Wu)) Wd        x, y: rows x d;  Wg, Wu: d x ff;  Wd: ff x d
 *
 * The hidden dimension ff is cut by the split rule: rank r holds the column
 * blocks r of Wg and of Wu (the same columns: the product silu(g) * u pairs
 * column j of g with column j of u) and the row block r of Wd. Gate and up
 * are column-parallel, down is row-parallel, and silu(g) * u in between is
 * elementwise, so it works on the rank's own columns:
 *
 *       x (whole) --f--> [x Wg_r] [x Wu_r] --> h_r = silu(g_r) * u_r --> h_r Wd_r --g--> y
 *                        column-parallel        rows x ff_local           row-parallel
 *
 *   f: identity forward, all-reduce of dx backward (in front of gate and up)
 *   g: all-reduce of y forward, identity backward (after down)
 *
 * Cost per rank: one all-reduce of rows·d floats forward and one backward,
 * whatever ff is; weights and activations 1/np of the layer's.
 */
#include "xt_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * Rank `rank` of `np`'s blocks of the whole weights: wg, wu (d x ff_local)
 * and wd (ff_local x d), ff_local = xt_block(ff, np, rank)'s count.
 */
void mlp_tp_shard(const float *wg_full, const float *wu_full, const float *wd_full, float *wg,
                  float *wu, float *wd, int d, int ff, int np, int rank)
{
    /*
     * TODO: copy out the blocks.
     *   wg, wu: the column block xt_block(ff, np, rank) of Wg and of Wu (d x ff_local);
     *   wd: the same block of Wd's rows (ff_local x d); all row-major, contiguous.
     */
    // BEGIN SOLUTION
    int lo, count;
    xt_block(ff, np, rank, &lo, &count);
    for (int i = 0; i < d; i++) {
        memcpy(wg + (size_t)i * count, wg_full + (size_t)i * ff + lo, sizeof(float) * count);
        memcpy(wu + (size_t)i * count, wu_full + (size_t)i * ff + lo, sizeof(float) * count);
    }
    memcpy(wd, wd_full + (size_t)lo * d, sizeof(float) * (size_t)count * (size_t)d);
    // END SOLUTION
}

/*
 * act: 3 rows ff_local floats that forward fills with what backward needs
 * (its layout is yours).
 */
void mlp_tp_forward(const float *x, const float *wg, const float *wu, const float *wd, float *y,
                    float *act, int rows, int d, int ff_local, MPI_Comm comm)
{
    /*
     * TODO: the MLP's output.
     *   y (rows x d, garbage in) bit-identical on every rank: exactly one MPI_Allreduce of
     *   rows*d floats. Not libxt's xt_swiglu_* (xt_linear_*, xt_silu_* are fine).
     */
    // BEGIN SOLUTION
    size_t n = (size_t)rows * (size_t)ff_local;
    float *g = act, *u = act + n, *h = act + 2 * n;
    xt_linear_forward(g, x, wg, NULL, rows, d, ff_local);
    xt_linear_forward(u, x, wu, NULL, rows, d, ff_local);
    xt_silu_forward(h, g, (long)n);
    for (size_t i = 0; i < n; i++)
        h[i] *= u[i];
    xt_linear_forward(y, h, wd, NULL, rows, ff_local, d);
    MPI_Allreduce(MPI_IN_PLACE, y, rows * d, MPI_FLOAT, MPI_SUM, comm);
    // END SOLUTION
}

void mlp_tp_backward(const float *x, const float *wg, const float *wu, const float *wd,
                     const float *act, const float *dy, float *dx, float *dwg, float *dwu,
                     float *dwd, int rows, int d, int ff_local, MPI_Comm comm)
{
    /*
     * TODO: backward.
     *   dwg, dwu, dwd += this rank's blocks; dx (rows x d, overwritten) bit-identical on
     *   every rank: exactly one MPI_Allreduce of rows*d floats. act: what forward left.
     */
    // BEGIN SOLUTION
    size_t n = (size_t)rows * (size_t)ff_local;
    const float *g = act, *u = act + n, *h = act + 2 * n;
    float *dh = malloc(sizeof(float) * (n + 1)), *du = malloc(sizeof(float) * (n + 1));
    float *silu_g = malloc(sizeof(float) * (n + 1));
    xt_linear_backward(dh, dwd, NULL, dy, h, wd, rows, ff_local, d);
    xt_silu_forward(silu_g, g, (long)n);
    for (size_t i = 0; i < n; i++) {
        du[i] = dh[i] * silu_g[i];
        dh[i] *= u[i]; /* now d silu(g) */
    }
    xt_silu_backward(dh, dh, g, (long)n); /* now dg */
    float *dx_up = malloc(sizeof(float) * ((size_t)rows * (size_t)d + 1));
    xt_linear_backward(dx, dwg, NULL, dh, x, wg, rows, d, ff_local);
    xt_linear_backward(dx_up, dwu, NULL, du, x, wu, rows, d, ff_local);
    for (size_t i = 0; i < (size_t)rows * (size_t)d; i++)
        dx[i] += dx_up[i];
    MPI_Allreduce(MPI_IN_PLACE, dx, rows * d, MPI_FLOAT, MPI_SUM, comm);
    free(dx_up);
    free(silu_g);
    free(du);
    free(dh);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/mlp_tp.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
