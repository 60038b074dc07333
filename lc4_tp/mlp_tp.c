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
    XT_TODO("copy out the blocks.", wg_full, wu_full, wd_full, wg, wu, wd, d, ff, np, rank);
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
    XT_TODO("the MLP's output.", x, wg, wu, wd, y, act, rows, d, ff_local, comm);
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
    XT_TODO("backward.", x, wg, wu, wd, act, dy, dx, dwg, dwu, dwd, rows, d, ff_local, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/mlp_tp.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
