/*
 * The driver of lc4_tp/row_parallel_linear.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int rows = (int)xt_case_int(c, "rows"), in = (int)xt_case_int(c, "in");
    int out = (int)xt_case_int(c, "out"), np, rank, lo, in_local;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(in, np, rank, &lo, &in_local);
    int bias = (int)xt_case_int(c, "bias");
    xt_array x = xt_case_input_const(c, "x"), w = xt_case_input_const(c, "w");
    if (xt_case_is(c, "row_linear_forward")) {
        const float *b = bias ? xt_case_input_const(c, "b").data : NULL;
        float *y = xt_case_alloc(c, "y", (long)rows * out, XT_F32);
        row_linear_forward(x.data, w.data, b, y, rows, in_local, out, comm);
        xt_case_output(c, "y", y, XT_F32, (long)rows * out);
    } else {
        xt_array dy = xt_case_input_const(c, "dy"), dw = xt_case_input(c, "dw");
        float *db = bias ? xt_case_input(c, "db").data : NULL;
        float *dx = xt_case_alloc(c, "dx", (long)rows * in_local, XT_F32);
        row_linear_backward(x.data, w.data, dy.data, dx, dw.data, db, rows, in_local, out, comm);
        xt_case_output(c, "dx", dx, XT_F32, (long)rows * in_local);
        xt_case_output(c, "dw", dw.data, XT_F32, dw.count);
        if (bias)
            xt_case_output(c, "db", db, XT_F32, out);
    }
}

/*
 * x (2 x 6) and W (6 x 3) cut by x's columns and W's rows: rank r multiplies
 * its own pieces, the all-reduce adds the np partial products, and the bias
 * (100 in every column) is added once. W's element (i, j) is i + 1 when
 * j = 0, so that the first column of y reads as a sum of x's entries.
 */
static void demo(MPI_Comm comm)
{
    enum { ROWS = 2, IN = 6, OUT = 3 };
    int np, rank, lo, count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(IN, np, rank, &lo, &count);
    float x_full[ROWS * IN], w_full[IN * OUT], b[OUT] = {100, 100, 100};
    for (int i = 0; i < ROWS * IN; i++)
        x_full[i] = (float)(i % IN + 1 + 10 * (i / IN));
    for (int i = 0; i < IN; i++)
        for (int j = 0; j < OUT; j++)
            w_full[i * OUT + j] = j == 0 ? 1.0f : (float)(j * (i + 1));
    float x[ROWS * IN], y[ROWS * OUT], partial[ROWS * OUT], single[ROWS * OUT];
    for (int i = 0; i < ROWS; i++)
        memcpy(x + i * count, x_full + i * IN + lo, sizeof(float) * (size_t)count);
    const float *w = w_full + lo * OUT; /* a row block is contiguous */

    xt_printf_root(comm, "x (2 x 6) = [1..6; 11..16], W (6 x 3), b = 100: y = x W + b\n");
    xt_printf_ordered(comm, "rows %d..%d of W, columns %d..%d of x (%d)\n", lo, lo + count - 1, lo,
                      lo + count - 1, count);
    xt_linear_forward(partial, x, w, NULL, ROWS, count, OUT);
    xt_print_buffer_ordered(comm, "x_r W_r: ", partial, ROWS * OUT, MPI_FLOAT);
    row_linear_forward(x, w, b, y, ROWS, count, OUT, comm);
    xt_print_buffer_ordered(comm, "y, all-reduced + b: ", y, ROWS * OUT, MPI_FLOAT);
    xt_linear_forward(single, x_full, w_full, b, ROWS, IN, OUT);
    xt_printf_root(comm, "single process x W + b equal: %s\n",
                   memcmp(y, single, sizeof y) == 0 ? "yes" : "NO");
    xt_printf_root(comm, "forward: one all-reduce of rows*out = %d floats; backward: none\n",
                   ROWS * OUT);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
