/*
 * The driver of lc4_tp/col_parallel_linear.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

#include "kit.h" /* tp_col_backward_case */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int rows = (int)xt_case_int(c, "rows"), in = (int)xt_case_int(c, "in");
    int out = (int)xt_case_int(c, "out"), np, rank, lo, out_local;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(out, np, rank, &lo, &out_local);
    int bias = (int)xt_case_int(c, "bias");
    if (xt_case_is(c, "col_linear_forward")) {
        xt_array x = xt_case_input_const(c, "x"), w = xt_case_input_const(c, "w");
        const float *b = bias ? xt_case_input_const(c, "b").data : NULL;
        float *y = xt_case_alloc(c, "y", (long)rows * out_local, XT_F32);
        col_linear_forward(x.data, w.data, b, y, rows, in, out_local, comm);
        xt_case_output(c, "y", y, XT_F32, (long)rows * out_local);
    } else if (xt_case_is(c, "col_linear_backward")) {
        tp_col_backward_case(c, col_linear_backward);
    } else {
        xt_array y_local = xt_case_input_const(c, "y_local");
        float *y = xt_case_alloc(c, "y", (long)rows * out, XT_F32);
        col_linear_gather(y_local.data, y, rows, out, comm);
        xt_case_output(c, "y", y, XT_F32, (long)rows * out);
    }
}

/*
 * A 2 x 3 input times a 3 x 6 weight whose element (i, j) is 10 i + j, so
 * that each printed number names its row and column: rank r holds the
 * columns xt_block(6, np, r) gives, computes its part of y alone, and the
 * gathered y equals the single-process product.
 */
static void demo(MPI_Comm comm)
{
    enum { ROWS = 2, IN = 3, OUT = 6 };
    int np, rank, lo, count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(OUT, np, rank, &lo, &count);
    float x[ROWS * IN] = {1, 0, 1, 0, 1, -1}, w_full[IN * OUT], w[IN * OUT], y_local[ROWS * OUT];
    for (int i = 0; i < IN; i++)
        for (int j = 0; j < OUT; j++)
            w_full[i * OUT + j] = (float)(10 * i + j);
    for (int i = 0; i < IN; i++)
        memcpy(w + i * count, w_full + i * OUT + lo, sizeof(float) * (size_t)count);
    xt_printf_root(comm, "x (2 x 3) on every rank: [1 0 1; 0 1 -1]; W (3 x 6): W[i][j] = 10i+j\n");
    xt_printf_ordered(comm, "columns %d..%d of W (%d)\n", lo, lo + count - 1, count);
    xt_print_buffer_ordered(comm, "W_r row 0: ", w, count, MPI_FLOAT);

    col_linear_forward(x, w, NULL, y_local, ROWS, IN, count, comm);
    xt_print_buffer_ordered(comm, "y_r = x W_r: ", y_local, ROWS * count, MPI_FLOAT);

    float y[ROWS * OUT], single[ROWS * OUT];
    col_linear_gather(y_local, y, ROWS, OUT, comm);
    xt_linear_forward(single, x, w_full, NULL, ROWS, IN, OUT);
    xt_print_buffer_at(comm, 0, "gathered y: ", y, ROWS * OUT, MPI_FLOAT);
    xt_printf_root(comm, "single process x W equal: %s\n",
                   memcmp(y, single, sizeof y) == 0 ? "yes" : "NO");

    /* Backward: dy = 1 everywhere for the picture (the grader's dy is random). */
    float dy[ROWS * OUT], dx[ROWS * IN], dw[IN * OUT] = {0};
    for (int i = 0; i < ROWS * count; i++)
        dy[i] = 1.0f;
    col_linear_backward(x, w, dy, dx, dw, NULL, ROWS, IN, count, comm);
    xt_print_buffer_ordered(comm, "dx, all-reduced: ", dx, ROWS * IN, MPI_FLOAT);
    xt_printf_root(comm, "forward: no message; backward: one all-reduce of rows*in = %d floats\n",
                   ROWS * IN);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
