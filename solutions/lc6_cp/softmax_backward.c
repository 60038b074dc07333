/*
 * softmax_backward.c: the gradient of a row-wise softmax, without its
 * Jacobian. docs/lc6_cp.md#softmax_backward
 *
 * y = softmax(x) row by row. Each y_i depends on every x_j of its row:
 * dy_i/dx_j = y_i ([i = j] - y_j), a cols x cols Jacobian J = diag(y) - y y^T
 * per row. Backward wants dx = J^T dy (J is symmetric), and the product
 * folds into one number per row:
 *
 *     dx_j = sum_i y_i ([i = j] - y_j) dy_i = y_j (dy_j - s),    s = sum_i y_i dy_i
 *
 *        y    [ .1  .6  .3 ]        s = .1(1) + .6(2) + .3(-1) = 1.0
 *        dy   [  1   2  -1 ]
 *        dx   [ .1(1-1)  .6(2-1)  .3(-1-1) ] = [ 0  .6  -.6 ]     (sums to 0)
 *
 * FlashAttention's backward is this formula on every row of scores: with
 * P = softmax(S) and dP = dO V^T, dS = P (dP - D) where D_i = sum_j P_ij dP_ij
 * = dO_i . O_i, one number per query, computed once before the tiles.
 *
 * Cost: 2 passes over a row, 3 flops per element, no scratch; the Jacobian
 * would cost cols^2 memory and a cols x cols product per row.
 */
#include "kit.h" /* the lecture's kit: attention blocks, tiles of scores */

#include <math.h>
#include <stdio.h>

void softmax_backward(const float *y, const float *dy, float *dx, int rows, int cols)
{
    /*
     * TODO: dx = the gradient through y = softmax(x), row by row.
     *   y, dy, dx are rows x cols; dx arrives holding garbage and is overwritten. No MPI
     *   call, no cols x cols Jacobian.
     */
    // BEGIN SOLUTION
    for (int i = 0; i < rows; i++) {
        const float *yi = y + (size_t)i * cols, *gi = dy + (size_t)i * cols;
        float s = 0.0f;
        for (int j = 0; j < cols; j++)
            s += yi[j] * gi[j];
        for (int j = 0; j < cols; j++)
            dx[(size_t)i * cols + j] = yi[j] * (gi[j] - s);
    }
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/softmax_backward.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
