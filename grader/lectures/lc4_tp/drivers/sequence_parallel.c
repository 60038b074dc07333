/*
 * The driver of lc4_tp/sequence_parallel.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

#define DRIVER_EPS 1e-5f

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int T = (int)xt_case_int(c, "T"), d = (int)xt_case_int(c, "d");
    int ff = (int)xt_case_int(c, "ff"), np, rank, lo, tl, ff_local;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(T, np, rank, &lo, &tl);
    xt_block(ff, np, rank, &lo, &ff_local);
    xt_array x = xt_case_input_const(c, "x"), gamma = xt_case_input_const(c, "gamma");
    xt_array w = xt_case_input_const(c, "w");
    long n = (long)tl * d, nw = (long)d * ff_local;
    float *y = xt_case_alloc(c, "y", n, XT_F32);
    float *act = seqpar_forward(x.data, gamma.data, w.data, y, T, d, ff_local, DRIVER_EPS, comm);
    xt_case_output(c, "y", y, XT_F32, n);
    if (!xt_case_is(c, "seqpar_backward")) {
        xt_free(act);
        return;
    }
    xt_array dy = xt_case_input_const(c, "dy"), dgamma = xt_case_input(c, "dgamma");
    xt_array dw = xt_case_input(c, "dw");
    float *dx = xt_case_alloc(c, "dx", n, XT_F32), *dwf = dw.data;
    seqpar_backward(x.data, gamma.data, w.data, act, dy.data, dx, dgamma.data, dwf, T, d, ff_local,
                    comm);
    xt_case_output(c, "dx", dx, XT_F32, n);
    xt_case_output(c, "dgamma", dgamma.data, XT_F32, dgamma.count);
    xt_case_output(c, "dwg", dwf, XT_F32, nw);
    xt_case_output(c, "dwu", dwf + nw, XT_F32, nw);
    xt_case_output(c, "dwd", dwf + 2 * nw, XT_F32, nw);
}

/* Rank `rank`'s w (seqpar_forward's layout) from the whole Wg, Wu (d x ff) and Wd (ff x d). */
static void driver_shard(float *w, const float *wg, const float *wu, const float *wd, int d, int ff,
                         int np, int rank)
{
    int lo, fl;
    xt_block(ff, np, rank, &lo, &fl);
    for (int i = 0; i < d; i++)
        for (int j = 0; j < fl; j++) {
            w[i * fl + j] = wg[i * ff + lo + j];
            w[d * fl + i * fl + j] = wu[i * ff + lo + j];
        }
    memcpy(w + 2 * d * fl, wd + lo * d, sizeof(float) * fl * d);
}

/*
 * T = 6 tokens, d = 4, ff = 10: rank r holds the tokens xt_block(6, np, r)
 * and the hidden units xt_block(10, np, r). Every rank also runs the same
 * functions on MPI_COMM_SELF with all tokens and the whole weights, the
 * single-process twin, and compares its own tokens.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 6, D = 4, FF = 10 };
    int np, rank, lo, tl, flo, fl;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(T, np, rank, &lo, &tl);
    xt_block(FF, np, rank, &flo, &fl);
    float x[T * D], gamma[D], wg[D * FF], wu[D * FF], wd[FF * D], dy[T * D];
    xt_rng rg = xt_rng_seed(4);
    xt_rng_fill_uniform(&rg, x, T * D, -1, 1);
    xt_rng_fill_uniform(&rg, gamma, D, 0.5f, 1.5f);
    xt_rng_fill_uniform(&rg, wg, D * FF, -0.5f, 0.5f);
    xt_rng_fill_uniform(&rg, wu, D * FF, -0.5f, 0.5f);
    xt_rng_fill_uniform(&rg, wd, FF * D, -0.5f, 0.5f);
    xt_rng_fill_uniform(&rg, dy, T * D, -1, 1);
    float w[3 * D * FF], w1[3 * D * FF];
    driver_shard(w, wg, wu, wd, D, FF, np, rank);
    driver_shard(w1, wg, wu, wd, D, FF, 1, 0);

    xt_printf_root(comm, "y = x + MLP(RMSNorm(x)), T %d tokens, d %d, ff %d\n", T, D, FF);
    xt_printf_ordered(comm, "tokens %d..%d (%d), hidden units %d..%d (%d)\n", lo, lo + tl - 1, tl,
                      flo, flo + fl - 1, fl);
    float y[T * D], dx[T * D], dgamma[D] = {0}, dw[3 * D * FF] = {0};
    float *act = seqpar_forward(x + lo * D, gamma, w, y, T, D, fl, DRIVER_EPS, comm);
    long kept = (long)xt_mem_peak(XT_MEM_ACTIVATIONS);
    xt_print_buffer_ordered(comm, "y, first own token: ", y, tl ? D : 0, MPI_FLOAT);
    seqpar_backward(x + lo * D, gamma, w, act, dy + lo * D, dx, dgamma, dw, T, D, fl, comm);
    xt_print_buffer_ordered(comm, "dx, first own token: ", dx, tl ? D : 0, MPI_FLOAT);
    xt_printf_root(comm, "activations kept, bytes: 4 (T_local (d+1) + 3 T ff_local)\n");
    xt_printf_ordered(comm, "kept %ld B (norm %d B); without sequence parallelism %d B\n", kept,
                      4 * tl * (D + 1), 4 * (T * (D + 1) + 3 * T * fl));

    float y1[T * D], dx1[T * D], dgamma1[D] = {0}, dw1[3 * D * FF] = {0};
    float *act1 = seqpar_forward(x, gamma, w1, y1, T, D, FF, DRIVER_EPS, MPI_COMM_SELF);
    seqpar_backward(x, gamma, w1, act1, dy, dx1, dgamma1, dw1, T, D, FF, MPI_COMM_SELF);
    float err = 0;
    for (int i = 0; i < tl * D; i++)
        err = fmaxf(err, fmaxf(fabsf(y[i] - y1[lo * D + i]), fabsf(dx[i] - dx1[lo * D + i])));
    for (int j = 0; j < D; j++)
        err = fmaxf(err, fabsf(dgamma[j] - dgamma1[j]));
    MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm, "split vs single process: max |difference| of y, dx, dgamma %.1e (%s)\n",
                   err, err < 1e-5f ? "agree" : "DIFFER");
    xt_printf_root(comm,
                   "forward: all-gather + reduce-scatter, T*d = %d floats; backward: "
                   "2 all-gathers,\n1 reduce-scatter, 1 all-reduce of d = %d (dgamma)\n",
                   T * D, D);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
