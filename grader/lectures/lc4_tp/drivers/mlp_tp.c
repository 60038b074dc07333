/*
 * The driver of lc4_tp/mlp_tp.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int rows = (int)xt_case_int(c, "rows"), d = (int)xt_case_int(c, "d");
    int ff = (int)xt_case_int(c, "ff"), np, rank, lo, ff_local;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(ff, np, rank, &lo, &ff_local);
    if (xt_case_is(c, "mlp_tp_shard")) {
        xt_array wg = xt_case_input_const(c, "wg_full"), wu = xt_case_input_const(c, "wu_full");
        xt_array wd = xt_case_input_const(c, "wd_full");
        long n = (long)d * ff_local;
        float *g = xt_case_alloc(c, "wg", n, XT_F32), *u = xt_case_alloc(c, "wu", n, XT_F32);
        float *dn = xt_case_alloc(c, "wd", n, XT_F32);
        mlp_tp_shard(wg.data, wu.data, wd.data, g, u, dn, d, ff, np, rank);
        xt_case_output(c, "wg", g, XT_F32, n);
        xt_case_output(c, "wu", u, XT_F32, n);
        xt_case_output(c, "wd", dn, XT_F32, n);
        return;
    }
    xt_array x = xt_case_input_const(c, "x"), wg = xt_case_input_const(c, "wg");
    xt_array wu = xt_case_input_const(c, "wu"), wd = xt_case_input_const(c, "wd");
    float *y = xt_case_alloc(c, "y", (long)rows * d, XT_F32);
    float *act = xt_case_alloc(c, "act", 3L * rows * ff_local, XT_F32);
    mlp_tp_forward(x.data, wg.data, wu.data, wd.data, y, act, rows, d, ff_local, comm);
    xt_case_output(c, "y", y, XT_F32, (long)rows * d);
    if (xt_case_is(c, "mlp_tp_backward")) {
        xt_array dy = xt_case_input_const(c, "dy"), dwg = xt_case_input(c, "dwg");
        xt_array dwu = xt_case_input(c, "dwu"), dwd = xt_case_input(c, "dwd");
        float *dx = xt_case_alloc(c, "dx", (long)rows * d, XT_F32);
        mlp_tp_backward(x.data, wg.data, wu.data, wd.data, act, dy.data, dx, dwg.data, dwu.data,
                        dwd.data, rows, d, ff_local, comm);
        xt_case_output(c, "dx", dx, XT_F32, (long)rows * d);
        xt_case_output(c, "dwg", dwg.data, XT_F32, dwg.count);
        xt_case_output(c, "dwu", dwu.data, XT_F32, dwu.count);
        xt_case_output(c, "dwd", dwd.data, XT_F32, dwd.count);
    }
}

/*
 * d = 4, ff = 10: rank r holds the hidden units xt_block(10, np, r) gives.
 * Every rank runs the split MLP; rank 0 also runs the same functions on
 * MPI_COMM_SELF with the whole weights, the single-process twin.
 */
static void demo(MPI_Comm comm)
{
    enum { ROWS = 3, D = 4, FF = 10 };
    int np, rank, lo, count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(FF, np, rank, &lo, &count);
    float x[ROWS * D], wg_full[D * FF], wu_full[D * FF], wd_full[FF * D];
    xt_rng g = xt_rng_seed(4);
    xt_rng_fill_uniform(&g, x, ROWS * D, -1, 1);
    xt_rng_fill_uniform(&g, wg_full, D * FF, -0.5f, 0.5f);
    xt_rng_fill_uniform(&g, wu_full, D * FF, -0.5f, 0.5f);
    xt_rng_fill_uniform(&g, wd_full, FF * D, -0.5f, 0.5f);
    float wg[D * FF], wu[D * FF], wd[FF * D], act[3 * ROWS * FF], y[ROWS * D];
    mlp_tp_shard(wg_full, wu_full, wd_full, wg, wu, wd, D, FF, np, rank);
    xt_printf_root(comm, "SwiGLU MLP, rows %d, d %d, ff %d: y = (silu(x Wg) * x Wu) Wd\n", ROWS, D,
                   FF);
    xt_printf_ordered(comm, "hidden units %d..%d (%d): columns of Wg, Wu; rows of Wd\n", lo,
                      lo + count - 1, count);
    mlp_tp_forward(x, wg, wu, wd, y, act, ROWS, D, count, comm);
    xt_print_buffer_ordered(comm, "y row 0: ", y, D, MPI_FLOAT);

    float dy[ROWS * D], dx[ROWS * D], dwg[D * FF] = {0}, dwu[D * FF] = {0}, dwd[FF * D] = {0};
    xt_rng_fill_uniform(&g, dy, ROWS * D, -1, 1);
    mlp_tp_backward(x, wg, wu, wd, act, dy, dx, dwg, dwu, dwd, ROWS, D, count, comm);
    xt_print_buffer_ordered(comm, "dx row 0: ", dx, D, MPI_FLOAT);

    float err = 0, y1[ROWS * D] = {0};
    if (rank == 0) {
        float dx1[ROWS * D], act1[3 * ROWS * FF];
        float g1[D * FF] = {0}, u1[D * FF] = {0}, d1[FF * D] = {0};
        mlp_tp_forward(x, wg_full, wu_full, wd_full, y1, act1, ROWS, D, FF, MPI_COMM_SELF);
        mlp_tp_backward(x, wg_full, wu_full, wd_full, act1, dy, dx1, g1, u1, d1, ROWS, D, FF,
                        MPI_COMM_SELF);
        for (int i = 0; i < ROWS * D; i++)
            err = fmaxf(err, fmaxf(fabsf(y[i] - y1[i]), fabsf(dx[i] - dx1[i])));
    }
    xt_print_buffer_at(comm, 0, "single process y row 0: ", y1, D, MPI_FLOAT);
    xt_printf_root(comm, "split vs single process: max |difference| of y, dx %.1e (%s)\n", err,
                   err < 1e-5f ? "agree" : "DIFFER");
    xt_printf_root(comm, "per MLP: one all-reduce of rows*d = %d floats forward, one backward\n",
                   ROWS * D);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
