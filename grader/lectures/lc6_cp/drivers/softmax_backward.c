/*
 * The driver of lc6_cp/softmax_backward.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    int rows = (int)xt_case_int(c, "rows"), cols = (int)xt_case_int(c, "cols");
    xt_array y = xt_case_input_const(c, "y"), dy = xt_case_input_const(c, "dy");
    float *dx = xt_case_alloc(c, "dx", (long)rows * cols, XT_F32);
    softmax_backward(y.data, dy.data, dx, rows, cols);
    xt_case_output(c, "dx", dx, XT_F32, (long)rows * cols);
}

/*
 * Rank 0 shows the picture's row with its Jacobian written out; then every
 * rank takes a row of its own (rank r: row r % 4 of a small table, the last
 * one-hot) and compares softmax_backward's dx with the Jacobian's product,
 * dx = (diag(y) - y y^T) dy, in double.
 */
static void demo(MPI_Comm comm)
{
    enum { ROWS = 4, COLS = 3 };
    const float table_y[ROWS][COLS] = {
        {0.1f, 0.6f, 0.3f}, {0.7f, 0.2f, 0.1f}, {0.25f, 0.25f, 0.5f}, {1, 0, 0}};
    const float table_dy[ROWS][COLS] = {{1, 2, -1}, {0.5f, -1, 3}, {1, 2, 3}, {4, -2, 7}};
    int rank;
    MPI_Comm_rank(comm, &rank);
    const float *y = table_y[rank % ROWS], *dy = table_dy[rank % ROWS];
    float dx[COLS];
    double jdy[COLS], worst = 0.0, most = 0.0;
    xt_printf_root(comm, "y = [%.1f %.1f %.1f], dy = [%g %g %g]: the Jacobian diag(y) - y y^T\n",
                   y[0], y[1], y[2], dy[0], dy[1], dy[2]);
    for (int a = 0; a < COLS; a++) {
        double row[COLS];
        jdy[a] = 0.0;
        for (int b = 0; b < COLS; b++) {
            row[b] = (a == b ? y[a] : 0.0) - (double)y[a] * y[b];
            jdy[a] += row[b] * dy[b];
        }
        xt_printf_root(comm, "    [%6.2f %6.2f %6.2f]   (J dy)_%d = %7.4f\n", row[0], row[1],
                       row[2], a, jdy[a]);
    }
    xt_printf_root(comm, "s = sum y dy = %.4f, dx = y (dy - s): no Jacobian needed\n\n",
                   (double)(y[0] * dy[0] + y[1] * dy[1] + y[2] * dy[2]));

    softmax_backward(y, dy, dx, 1, COLS);
    for (int a = 0; a < COLS; a++)
        worst = fmax(worst, fabs(dx[a] - jdy[a]));
    xt_printf_ordered(comm, "y = [%.2f %.2f %.2f], dy = [%g %g %g]", y[0], y[1], y[2], dy[0], dy[1],
                      dy[2]);
    xt_printf_ordered(comm, "dx = [%.4f %.4f %.4f], J dy = [%.4f %.4f %.4f]", dx[0], dx[1], dx[2],
                      jdy[0], jdy[1], jdy[2]);
    MPI_Allreduce(&worst, &most, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "dx equals the Jacobian's product: %s (error %.1e)\n",
                   most < 1e-6 ? "yes" : "NO", most);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
