/*
 * The driver of lc6_cp/ring_online_softmax.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    float *y = xt_case_alloc(c, "y", x.count, XT_F32);
    ring_online_softmax(x.data, y, (int)x.count, xt_case_comm(c));
    xt_case_output(c, "y", y, XT_F32, x.count);
}

/*
 * Ten scores cut over the ranks; each rank's own (max, sum), then every
 * pair sent and received at each step of the ring (libxt's watch shows the
 * messages' contents), then each rank's y against the single-process
 * softmax of the whole vector.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 10 };
    const float whole[T] = {2, 0, 1, 4, 3, 1, 7, 2, 5, 6};
    int np, rank, lo, n;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(T, np, rank, &lo, &n);
    const float *x = whole + lo;
    float y[T];
    double m = -INFINITY, s = 0.0, M = -INFINITY, S = 0.0;
    for (int i = 0; i < n; i++)
        m = fmax(m, x[i]);
    for (int i = 0; i < n; i++)
        s += exp(x[i] - m);
    for (int i = 0; i < T; i++)
        M = fmax(M, whole[i]);
    for (int i = 0; i < T; i++)
        S += exp(whole[i] - M);
    xt_printf_root(comm,
                   "x = [2 0 1 4 3 1 7 2 5 6] over %d ranks; a pair is (max, sum of "
                   "e^(x - max))\n",
                   np);
    xt_print_buffer_ordered(comm, "x_r: ", x, n, MPI_FLOAT);
    xt_printf_ordered(comm, "own pair (%g, %.4f)", m, s);

    xt_printf_root(comm, "the ring: the pair each rank sent (-> r+1) and received (<- r-1)\n");
    int chunk = n;
    xt_watch_begin(y, MPI_FLOAT, &chunk, 1);
    xt_watch_values(2);
    ring_online_softmax(x, y, n, comm);
    xt_watch_print(comm, NULL);

    double worst = 0.0;
    for (int i = 0; i < n; i++) {
        double want = exp(x[i] - M) / S;
        worst = fmax(worst, fabs(y[i] - want) / want);
    }
    xt_printf_root(comm, "the whole vector's pair: (M, S) = (%g, %.4f)\n", M, S);
    char text[T * 8 + 1] = "";
    for (int i = 0, pos = 0; i < n; i++)
        pos += snprintf(text + pos, sizeof text - (size_t)pos, "%s%.4f", i ? " " : "", y[i]);
    xt_printf_ordered(comm, "y_r = e^(x_r - M) / S: [%s]", text);
    double most = 0.0;
    MPI_Allreduce(&worst, &most, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm,
                   "every rank's y equals the single-process softmax: %s (relative "
                   "error %.1e)\n",
                   most < 1e-6 ? "yes" : "NO", most);
    xt_printf_root(comm, "each rank sent np-1 = %d messages of 8 bytes\n", np - 1);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
