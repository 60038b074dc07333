/*
 * The driver of lc6_cp/cp_grad_sync.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include <stdlib.h>
#include <string.h>

static void run_case(xt_case *c)
{
    int rows = (int)xt_case_int(c, "c"), d = (int)xt_case_int(c, "d");
    xt_array x = xt_case_input_const(c, "x"), g = xt_case_input_const(c, "g");
    xt_array wq = xt_case_input(c, "wq"), wk = xt_case_input(c, "wk");
    xt_array wv = xt_case_input(c, "wv"), wo = xt_case_input(c, "wo");
    cp_train(wq.data, wk.data, wv.data, wo.data, x.data, g.data, (int)xt_case_int(c, "steps"),
             strtof(xt_case_str(c, "lr"), NULL), rows, d, (int)xt_case_int(c, "hq"),
             (int)xt_case_int(c, "hkv"), (int)xt_case_int(c, "hd"), (int)xt_case_int(c, "cp"),
             xt_case_comm(c));
    xt_case_output(c, "wq", wq.data, XT_F32, wq.count);
    xt_case_output(c, "wk", wk.data, XT_F32, wk.count);
    xt_case_output(c, "wv", wv.data, XT_F32, wv.count);
    xt_case_output(c, "wo", wo.data, XT_F32, wo.count);
}

/*
 * np ranks as dp x cp (--cp, default 2 when np is even): each data rank a sequence of
 * T = cp c tokens (c = 4 rows a rank), d 8, 2 query heads sharing 1 KV head of 4; three
 * steps of SGD; then the weights each rank ends with, which must be the same everywhere.
 */
static void demo(MPI_Comm comm)
{
    enum { C = 4, D = 8, HQ = 2, HKV = 1, HD = 4, STEPS = 3 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int cp = (int)xt_arg_int("cp", np % 2 == 0 ? 2 : 1);
    XT_CHECK(cp >= 1 && np % cp == 0, "--cp %d does not divide np = %d", cp, np);
    float x[C * D], g[C * D], wq[D * HQ * HD], wk[D * HKV * HD], wv[D * HKV * HD], wo[HQ * HD * D];
    xt_rng w = xt_rng_seed(31u); /* the same weights everywhere */
    xt_rng_fill_uniform(&w, wq, D * HQ * HD, -0.5f, 0.5f);
    xt_rng_fill_uniform(&w, wk, D * HKV * HD, -0.5f, 0.5f);
    xt_rng_fill_uniform(&w, wv, D * HKV * HD, -0.5f, 0.5f);
    xt_rng_fill_uniform(&w, wo, HQ * HD * D, -0.5f, 0.5f);
    xt_rng r = xt_rng_seed(100u + (unsigned)rank); /* each rank its rows */
    xt_rng_fill_uniform(&r, x, C * D, -1, 1);
    xt_rng_fill_uniform(&r, g, C * D, -1, 1);
    xt_printf_ordered(comm, "data rank %d, context rank %d of %d\n", rank / cp, rank % cp, cp);
    long before = xt_mpi_calls("MPI_Allreduce");
    cp_train(wq, wk, wv, wo, x, g, STEPS, 0.1f, C, D, HQ, HKV, HD, cp, comm);
    long allreduces = xt_mpi_calls("MPI_Allreduce") - before;
    float first[D * HQ * HD];
    memcpy(first, wq, sizeof first);
    MPI_Bcast(first, D * HQ * HD, MPI_FLOAT, 0, comm);
    int same = memcmp(first, wq, sizeof first) == 0, all = 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "%d steps, %ld gradient all-reduce(s) a rank over all %d ranks\n", STEPS,
                   allreduces, np);
    xt_printf_root(comm, "Wq[0..3] on rank 0 after training: %.5f %.5f %.5f %.5f\n", wq[0], wq[1],
                   wq[2], wq[3]);
    xt_printf_root(comm, "every rank holds the same weights: %s\n", all ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
