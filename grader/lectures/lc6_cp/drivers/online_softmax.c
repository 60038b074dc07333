/*
 * The driver of lc6_cp/online_softmax.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    if (xt_case_is(c, "online_softmax")) {
        int block = (int)xt_case_int(c, "block");
        xt_array x = xt_case_input_const(c, "x");
        float *y = xt_case_alloc(c, "y", x.count, XT_F32);
        online_softmax(x.data, y, (int)x.count, block);
        xt_case_output(c, "y", y, XT_F32, x.count);
    } else {
        int rows = (int)xt_case_int(c, "rows"), d = (int)xt_case_int(c, "d");
        xt_array o = xt_case_input(c, "o"), lse = xt_case_input(c, "lse");
        xt_array o_blk = xt_case_input_const(c, "o_blk");
        xt_array lse_blk = xt_case_input_const(c, "lse_blk");
        lse_merge(o.data, lse.data, o_blk.data, lse_blk.data, rows, d);
        xt_case_output(c, "o", o.data, XT_F32, o.count);
        xt_case_output(c, "lse", lse.data, XT_F32, lse.count);
    }
}

/* The definition, in double, over x[0 .. n): the max and the sum against it. */
static void driver_max_and_sum(const float *x, int n, double *m, double *s)
{
    *m = -INFINITY;
    for (int i = 0; i < n; i++)
        *m = x[i] > *m ? x[i] : *m;
    *s = 0.0;
    for (int i = 0; i < n; i++)
        *s += exp(x[i] - *m);
}

/*
 * Eight scores in blocks of 3: the running max and sum after each block
 * (from the definition, over the blocks so far); then online_softmax's y on
 * every rank, each in blocks of its own size, against the two-pass softmax.
 * Then the merge: one query's attention over eight keys, computed as two
 * halves (keys 0..3 and 4..7) and merged by their LSEs, against the whole;
 * a second row whose first half is fully masked (lse -inf, o NaN) takes the
 * second half's result as it is.
 */
static void demo(MPI_Comm comm)
{
    enum { N = 8, BLOCK = 3, D = 2, HALF = N / 2 };
    const float x[N] = {1, 3, 2, 0, 5, 4, 1, 1};
    float y[N];
    xt_printf_root(comm, "x = [1 3 2 | 0 5 4 | 1 1], blocks of %d\n", BLOCK);
    for (int k = 0; k * BLOCK < N; k++) {
        int hi = (k + 1) * BLOCK < N ? (k + 1) * BLOCK : N;
        double m, s, m0, s0;
        driver_max_and_sum(x, hi, &m, &s);
        if (k == 0) {
            xt_printf_root(comm, "after block 0: max %g, sum %.4f\n", m, s);
            continue;
        }
        driver_max_and_sum(x, k * BLOCK, &m0, &s0);
        xt_printf_root(comm, "after block %d: max %g, sum %.4f e^(%g-%g) + %.4f = %.4f\n", k, m, s0,
                       m0, m, s - s0 * exp(m0 - m), s);
    }
    /* Every rank runs online_softmax on the same x, in blocks of its own size. */
    int rank;
    MPI_Comm_rank(comm, &rank);
    int block = rank % N + 1;
    online_softmax(x, y, N, block);
    double m, s, worst = 0.0, most = 0.0;
    driver_max_and_sum(x, N, &m, &s);
    char text[N * 8] = "";
    for (int i = 0, pos = 0; i < N; i++) {
        worst = fmax(worst, fabs(y[i] - exp(x[i] - m) / s) / (exp(x[i] - m) / s));
        pos += snprintf(text + pos, sizeof text - (size_t)pos, "%s%.3f", i ? " " : "", y[i]);
    }
    xt_printf_ordered(comm, "blocks of %d: y = [%s]", block, text);
    MPI_Allreduce(&worst, &most, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm,
                   "online and two-pass softmax agree: %s (relative "
                   "error %.1e)\n\n",
                   most < 1e-6 ? "yes" : "NO", most);

    /* Values: key j holds (j, 1), so o = (the expected key index, 1). */
    float v[N * D], o[2 * D], lse[2], o_b[2 * D], lse_b[2], whole[D] = {0, 0};
    for (int j = 0; j < N; j++) {
        v[j * D] = (float)j;
        v[j * D + 1] = 1.0f;
    }
    for (int h = 0; h < 2; h++) {
        const float *xh = x + h * HALF;
        float p[HALF], *oh = h ? o_b : o, *lh = h ? lse_b : lse;
        double mh, sh;
        online_softmax(xh, p, HALF, HALF);
        driver_max_and_sum(xh, HALF, &mh, &sh);
        oh[0] = oh[1] = 0.0f;
        for (int j = 0; j < HALF; j++)
            for (int c = 0; c < D; c++)
                oh[c] += p[j] * v[(h * HALF + j) * D + c];
        lh[0] = (float)(mh + log(sh));
        oh[2] = oh[0];
        oh[3] = oh[1];
        lh[1] = lh[0];
        xt_printf_root(comm, "keys %d..%d: o = (%.4f, %.4f), lse = %.4f\n", h * HALF,
                       h * HALF + HALF - 1, oh[0], oh[1], lh[0]);
    }
    o[2] = o[3] = NAN; /* row 1: its first half fully masked */
    lse[1] = -INFINITY;
    lse_merge(o, lse, o_b, lse_b, 2, D);
    for (int j = 0; j < N; j++)
        for (int c = 0; c < D; c++)
            whole[c] += (float)(exp(x[j] - m) / s) * v[j * D + c];
    double lse_whole = m + log(s);
    xt_printf_root(comm, "merged:     o = (%.4f, %.4f), lse = %.4f\n", o[0], o[1], lse[0]);
    xt_printf_root(comm, "whole row:  o = (%.4f, %.4f), lse = %.4f\n", whole[0], whole[1],
                   lse_whole);
    int same = fabsf(o[0] - whole[0]) < 1e-5f && fabsf(o[1] - whole[1]) < 1e-5f &&
               fabs(lse[0] - lse_whole) < 1e-5;
    xt_printf_root(comm, "merged halves equal the whole: %s\n", same ? "yes" : "NO");
    xt_printf_root(comm,
                   "row 1, first half masked (lse -inf, o NaN): o = (%.4f, %.4f), "
                   "lse = %.4f\n",
                   o[2], o[3], lse[1]);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
