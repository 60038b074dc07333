/*
 * The driver of lc4_tp/rms_norm.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int tokens = (int)xt_case_int(c, "tokens"), d = (int)xt_case_int(c, "d"), np, rank, lo, rows;
    float eps = (float)atof(xt_case_str(c, "eps"));
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(tokens, np, rank, &lo, &rows);
    xt_array x = xt_case_input_const(c, "x"), gamma = xt_case_input_const(c, "gamma");
    XT_CHECK(x.count == (long)rows * d && gamma.count == d,
             "x or gamma do not hold %d x %d and %d floats", rows, d, d);
    if (xt_case_is(c, "rmsnorm_forward")) {
        float *y = xt_case_alloc(c, "y", (long)rows * d, XT_F32);
        float *rstd = xt_case_alloc(c, "rstd", rows, XT_F32);
        rmsnorm_forward(x.data, gamma.data, y, rstd, rows, d, eps);
        xt_case_output(c, "y", y, XT_F32, (long)rows * d);
        xt_case_output(c, "rstd", rstd, XT_F32, rows);
    } else {
        xt_array rstd = xt_case_input_const(c, "rstd"), dy = xt_case_input_const(c, "dy");
        xt_array dgamma = xt_case_input(c, "dgamma");
        float *dx = xt_case_alloc(c, "dx", (long)rows * d, XT_F32);
        rmsnorm_backward(x.data, gamma.data, rstd.data, dy.data, dx, dgamma.data, rows, d, comm);
        xt_case_output(c, "dx", dx, XT_F32, (long)rows * d);
        xt_case_output(c, "dgamma", dgamma.data, XT_F32, d);
    }
}

/* "0.707 -1.41 ..." into out: one row of a small table. */
static void driver_format_row(char *out, size_t cap, const float *v, int n)
{
    size_t used = 0;
    out[0] = '\0';
    for (int j = 0; j < n && used < cap; j++)
        used += (size_t)snprintf(out + used, cap - used, "%s%6.3f", j ? " " : "", v[j]);
}

/*
 * Six tokens of four features, token t being (t+1) times a direction of its
 * own, so that rstd shrinks as t grows while y keeps only the direction: a
 * norm removes the scale. Rank r holds the tokens xt_block(6, np, r) gives
 * (none, at np = 8). The gradients are checked against one process running
 * the same functions on all six tokens.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 6, D = 4 };
    const float eps = 1e-5f;
    int np, rank, lo, rows;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(T, np, rank, &lo, &rows);

    float x_all[T * D], dy_all[T * D], gamma[D] = {1.0f, 0.5f, 2.0f, -1.0f};
    const float dirs[3][D] = {{1, -1, 1, -1}, {2, 0, -1, 1}, {0, 1, 1, 3}};
    for (int t = 0; t < T; t++)
        for (int j = 0; j < D; j++) {
            x_all[t * D + j] = (float)(t + 1) * dirs[t % 3][j];
            dy_all[t * D + j] = (j == t % D) ? 1.0f : 0.25f;
        }
    const float *x = x_all + lo * D, *dy = dy_all + lo * D;

    xt_printf_root(comm,
                   "%d tokens x %d features; gamma = [1 0.5 2 -1] on every rank; token t\n"
                   "is (t+1) times a direction: rstd shrinks with t, y keeps the direction\n",
                   T, D);
    float y[T * D], rstd[T], dx[T * D], dgamma[D] = {1, 1, 1, 1};
    rmsnorm_forward(x, gamma, y, rstd, rows, D, eps);
    char text[1024], row[80];
    size_t used = rows ? (size_t)snprintf(text, sizeof text, "tokens %d..%d\n", lo, lo + rows - 1)
                       : (size_t)snprintf(text, sizeof text, "no token\n");
    for (int i = 0; i < rows; i++) {
        driver_format_row(row, sizeof row, y + i * D, D);
        used += (size_t)snprintf(text + used, sizeof text - used, "  token %d: rstd %.4f  y %s\n",
                                 lo + i, rstd[i], row);
    }
    xt_printf_ordered(comm, "%s", text);

    rmsnorm_backward(x, gamma, rstd, dy, dx, dgamma, rows, D, comm);
    driver_format_row(row, sizeof row, dgamma, D);
    xt_printf_ordered(comm, "dgamma (held 1 1 1 1, += all tokens' sum): %s\n", row);

    /* One process, every token: its own rmsnorm on MPI_COMM_SELF. */
    float y1[T * D], rstd1[T], dx1[T * D], dgamma1[D] = {1, 1, 1, 1};
    rmsnorm_forward(x_all, gamma, y1, rstd1, T, D, eps);
    rmsnorm_backward(x_all, gamma, rstd1, dy_all, dx1, dgamma1, T, D, MPI_COMM_SELF);
    float diff = 0.0f;
    for (int i = 0; i < rows * D; i++)
        diff = fmaxf(diff, fmaxf(fabsf(y[i] - y1[lo * D + i]), fabsf(dx[i] - dx1[lo * D + i])));
    for (int j = 0; j < D; j++)
        diff = fmaxf(diff, fabsf(dgamma[j] - dgamma1[j]));
    MPI_Allreduce(MPI_IN_PLACE, &diff, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm, "one process on all %d tokens: y, dx, dgamma agree: %s (max diff %.1e)\n",
                   T, diff <= 1e-5f ? "yes" : "NO", (double)diff);
    xt_printf_root(comm, "forward: no message; backward: one all-reduce of d = %d floats\n", D);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
