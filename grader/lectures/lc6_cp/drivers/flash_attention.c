/*
 * The driver of lc6_cp/flash_attention.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    int T = (int)xt_case_int(c, "T"), d = (int)xt_case_int(c, "hd");
    int br = (int)xt_case_int(c, "br"), bc = (int)xt_case_int(c, "bc");
    long n = (long)T * d;
    xt_array q = xt_case_input_const(c, "q"), k = xt_case_input_const(c, "k");
    xt_array v = xt_case_input_const(c, "v");
    if (xt_case_is(c, "flash_attention_forward")) {
        float *o = xt_case_alloc(c, "o", n, XT_F32), *lse = xt_case_alloc(c, "lse", T, XT_F32);
        flash_attention_forward(o, lse, q.data, k.data, v.data, T, d, br, bc);
        xt_case_output(c, "o", o, XT_F32, n);
        xt_case_output(c, "lse", lse, XT_F32, T);
    } else {
        xt_array dout = xt_case_input_const(c, "dout"), o = xt_case_input_const(c, "o");
        xt_array lse = xt_case_input_const(c, "lse");
        float *dq = xt_case_alloc(c, "dq", n, XT_F32), *dk = xt_case_alloc(c, "dk", n, XT_F32);
        float *dv = xt_case_alloc(c, "dv", n, XT_F32);
        flash_attention_backward(dq, dk, dv, dout.data, q.data, k.data, v.data, o.data, lse.data, T,
                                 d, br, bc);
        xt_case_output(c, "dq", dq, XT_F32, n);
        xt_case_output(c, "dk", dk, XT_F32, n);
        xt_case_output(c, "dv", dv, XT_F32, n);
    }
}

/*
 * The demo: one small sequence, the same on every rank; each rank tiles it
 * its own way (br x bc from DRIVER_TILES), so the ranks show four tilings of one
 * attention. Rank 0 also draws its tile grid and the running max and sum of
 * one query tile, computed from their definition (over the keys seen so far).
 */
enum { DRIVER_DT = 10, DRIVER_DD = 4 };
static const int DRIVER_TILES[4][2] = {{4, 3}, {3, 4}, {16, 5}, {2, 16}};

/* Plain causal attention of one head, in double: the definition, row by row. */
static void driver_plain_attention(double *o, double *lse, const float *q, const float *k,
                                   const float *v, const double *shift, int which, double eps)
{
    /* The inputs q, k, v, the one named by `which` (0, 1, 2) moved by eps shift. */
    double x[3][DRIVER_DT * DRIVER_DD];
    const float *in[3] = {q, k, v};
    for (int t = 0; t < 3; t++)
        for (int e = 0; e < DRIVER_DT * DRIVER_DD; e++)
            x[t][e] = in[t][e] + (t == which ? eps * shift[e] : 0.0);
    for (int i = 0; i < DRIVER_DT; i++) {
        double s[DRIVER_DT], mx = -INFINITY, sum = 0.0;
        for (int j = 0; j <= i; j++) {
            s[j] = 0.0;
            for (int c = 0; c < DRIVER_DD; c++)
                s[j] += x[0][i * DRIVER_DD + c] * x[1][j * DRIVER_DD + c];
            s[j] /= sqrt((double)DRIVER_DD);
            mx = s[j] > mx ? s[j] : mx;
        }
        for (int j = 0; j <= i; j++)
            sum += exp(s[j] - mx);
        lse[i] = mx + log(sum);
        for (int c = 0; c < DRIVER_DD; c++) {
            o[i * DRIVER_DD + c] = 0.0;
            for (int j = 0; j <= i; j++)
                o[i * DRIVER_DD + c] += exp(s[j] - lse[i]) * x[2][j * DRIVER_DD + c];
        }
    }
}

/* L = sum of dout . o for the plain attention with one input moved: what dq, dk, dv are the
 * gradient of. */
static double driver_plain_loss(const float *q, const float *k, const float *v, const float *dout,
                                const double *shift, int which, double eps)
{
    double o[DRIVER_DT * DRIVER_DD], lse[DRIVER_DT], loss = 0.0;
    driver_plain_attention(o, lse, q, k, v, shift, which, eps);
    for (int e = 0; e < DRIVER_DT * DRIVER_DD; e++)
        loss += dout[e] * o[e];
    return loss;
}

static void driver_draw_grid(MPI_Comm comm, int br, int bc)
{
    char line[128], label[32];
    int n = snprintf(line, sizeof line, "    %-14s", "");
    for (int j0 = 0; j0 < DRIVER_DT; j0 += bc) {
        snprintf(label, sizeof label, "%d..%d", j0,
                 (j0 + bc < DRIVER_DT ? j0 + bc : DRIVER_DT) - 1);
        n += snprintf(line + n, sizeof line - (size_t)n, " %-6s", label);
    }
    xt_printf_root(comm, "%s   <- keys\n", line);
    for (int i0 = 0; i0 < DRIVER_DT; i0 += br) {
        int last = (i0 + br < DRIVER_DT ? i0 + br : DRIVER_DT) - 1;
        snprintf(label, sizeof label, "%d..%d", i0, last);
        n = snprintf(line, sizeof line, "    queries %-6s", label);
        for (int j0 = 0; j0 < DRIVER_DT; j0 += bc) {
            int jlast = (j0 + bc < DRIVER_DT ? j0 + bc : DRIVER_DT) - 1;
            const char *mark = j0 > last ? " .     " : jlast > i0 ? " [M]   " : " [ ]   ";
            n += snprintf(line + n, sizeof line - (size_t)n, "%s", mark);
        }
        xt_printf_root(comm, "%s\n", line);
    }
    xt_printf_root(comm, "    [ ]: every key visible  [M]: the mask cuts it  .: skipped, "
                         "all masked\n");
}

/* The running max m and sum l of query tile 4..7 after each key tile, from the definition. */
static void driver_draw_running(MPI_Comm comm, const float *q, const float *k, int br, int bc)
{
    int i0 = br, last = 2 * br - 1;
    char line[160];
    int n = snprintf(line, sizeof line, "    query");
    for (int j0 = 0; j0 <= last; j0 += bc)
        n += snprintf(line + n, sizeof line - (size_t)n, "   keys 0..%-7d",
                      (j0 + bc < DRIVER_DT ? j0 + bc : DRIVER_DT) - 1);
    xt_printf_root(comm, "%s\n", line);
    for (int i = i0; i <= last; i++) {
        n = snprintf(line, sizeof line, "    %5d", i);
        double prev = -INFINITY;
        for (int j0 = 0; j0 <= last; j0 += bc) {
            int upto = j0 + bc - 1 < i ? j0 + bc - 1 : i; /* the keys seen so far: 0..upto */
            double s[DRIVER_DT], mx = -INFINITY, sum = 0.0;
            for (int j = 0; j <= upto; j++) {
                s[j] = 0.0;
                for (int c = 0; c < DRIVER_DD; c++)
                    s[j] += (double)q[i * DRIVER_DD + c] * k[j * DRIVER_DD + c];
                s[j] /= sqrt((double)DRIVER_DD);
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int j = 0; j <= upto; j++)
                sum += exp(s[j] - mx);
            n += snprintf(line + n, sizeof line - (size_t)n, "   m %5.2f%c l %4.2f", mx,
                          mx > prev && j0 > 0 ? '*' : ' ', sum);
            prev = mx;
        }
        xt_printf_root(comm, "%s\n", line);
    }
    xt_printf_root(comm, "    *: the max grew: l and the output so far rescaled by "
                         "e^(m_old - m_new)\n");
}

static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int br = DRIVER_TILES[rank % 4][0], bc = DRIVER_TILES[rank % 4][1];
    float q[DRIVER_DT * DRIVER_DD], k[DRIVER_DT * DRIVER_DD], v[DRIVER_DT * DRIVER_DD],
        dout[DRIVER_DT * DRIVER_DD], o[DRIVER_DT * DRIVER_DD], lse[DRIVER_DT];
    float dq[DRIVER_DT * DRIVER_DD], dk[DRIVER_DT * DRIVER_DD], dv[DRIVER_DT * DRIVER_DD];
    double shift[DRIVER_DT * DRIVER_DD], plain_o[DRIVER_DT * DRIVER_DD], plain_lse[DRIVER_DT];
    xt_rng g = xt_rng_seed(6);
    xt_rng_fill_uniform(&g, q, DRIVER_DT * DRIVER_DD, -2.0f, 2.0f);
    xt_rng_fill_uniform(&g, k, DRIVER_DT * DRIVER_DD, -2.0f, 2.0f);
    xt_rng_fill_uniform(&g, v, DRIVER_DT * DRIVER_DD, -1.0f, 1.0f);
    xt_rng_fill_uniform(&g, dout, DRIVER_DT * DRIVER_DD, -1.0f, 1.0f);
    for (int e = 0; e < DRIVER_DT * DRIVER_DD; e++)
        shift[e] = xt_rng_uniform(&g, -1.0f, 1.0f);

    xt_printf_root(comm,
                   "flash attention in one process: T = %d, d = %d, causal; every rank "
                   "has the same\nq, k, v and cuts them into its own tiles of br queries "
                   "x bc keys.\n\n",
                   DRIVER_DT, DRIVER_DD);
    xt_printf_root(comm, "rank 0's tiles, br = %d, bc = %d:\n", DRIVER_TILES[0][0],
                   DRIVER_TILES[0][1]);
    driver_draw_grid(comm, DRIVER_TILES[0][0], DRIVER_TILES[0][1]);
    xt_printf_root(comm,
                   "\nthe running max m and sum l of query tile %d..%d after each key "
                   "tile:\n",
                   DRIVER_TILES[0][0], 2 * DRIVER_TILES[0][0] - 1);
    driver_draw_running(comm, q, k, DRIVER_TILES[0][0], DRIVER_TILES[0][1]);

    long pairs0, tiles0 = xt_attn_tiles(&pairs0), pairs1;
    flash_attention_forward(o, lse, q, k, v, DRIVER_DT, DRIVER_DD, br, bc);
    long tiles = xt_attn_tiles(&pairs1) - tiles0, grid = 0, visible = 0;
    size_t fwd_peak = xt_mem_peak(XT_MEM_KINDS);
    for (int i0 = 0; i0 < DRIVER_DT; i0 += br)
        for (int j0 = 0; j0 < DRIVER_DT; j0 += bc) {
            grid++;
            visible += j0 <= (i0 + br < DRIVER_DT ? i0 + br : DRIVER_DT) - 1;
        }
    driver_plain_attention(plain_o, plain_lse, q, k, v, shift, -1, 0.0);
    double err_o = 0.0, err_lse = 0.0;
    for (int e = 0; e < DRIVER_DT * DRIVER_DD; e++)
        err_o = fmax(err_o, fabs(o[e] - plain_o[e]));
    for (int i = 0; i < DRIVER_DT; i++)
        err_lse = fmax(err_lse, fabs(lse[i] - plain_lse[i]));

    /* Backward: the change of L = sum dout . o along `shift`, moving q, k or v alone, against
     * finite differences of the plain attention (in double: exact to ~1e-9). */
    flash_attention_backward(dq, dk, dv, dout, q, k, v, o, lse, DRIVER_DT, DRIVER_DD, br, bc);
    const float *grads[3] = {dq, dk, dv};
    double err_grad = 0.0, eps = 1e-4;
    for (int t = 0; t < 3; t++) {
        double along = 0.0;
        for (int e = 0; e < DRIVER_DT * DRIVER_DD; e++)
            along += grads[t][e] * shift[e];
        double fd = (driver_plain_loss(q, k, v, dout, shift, t, eps) -
                     driver_plain_loss(q, k, v, dout, shift, t, -eps)) /
                    (2 * eps);
        err_grad = fmax(err_grad, fabs(along - fd));
    }
    size_t peak = xt_mem_peak(XT_MEM_KINDS);

    xt_printf_root(comm,
                   "\neach rank: the score tiles it computed of its grid, the largest "
                   "error against\nthe plain definition (dq, dk, dv: along a direction, "
                   "against finite\ndifferences), and its scratch at the peak (xt_alloc): "
                   "forward, then forward\nand backward; one T x T matrix is %d B.\n",
                   4 * DRIVER_DT * DRIVER_DT);
    xt_printf_root(comm, "     br x bc   tiles  pairs      o      lse   grads   scratch\n");
    xt_printf_ordered(comm, "%3d x %-3d  %2ld/%-2ld  %5ld  %.0e  %.0e  %.0e  %3zu/%zu B\n", br, bc,
                      tiles, grid, pairs1 - pairs0, err_o, err_lse, err_grad, fwd_peak, peak);
    int ok = tiles == visible && err_o < 1e-5 && err_lse < 1e-5 && err_grad < 1e-4, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "(at T = 32768 the same tiles need the same scratch; the T x T "
                         "matrix, 4 GiB)\n");
    xt_printf_root(comm, "every rank's tiles and values agree with the plain computation: %s\n",
                   all ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
