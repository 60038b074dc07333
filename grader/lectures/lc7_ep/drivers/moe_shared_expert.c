/*
 * The driver of lc7_ep/moe_shared_expert.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include <stdio.h>

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    ep_layer l = ep_layer_read(c);
    int np, s = (int)xt_case_int(c, "shared");
    MPI_Comm_size(comm, &np);
    XT_CHECK(l.renorm == 0 && l.cf == 0.0f && l.alpha == 0.0f && l.n_experts == l.E / np,
             "moe_shared_expert cases: renorm 0, dropless, alpha 0, each rank's E/np experts");
    xt_array sh = xt_case_input_const(c, "shared_experts");
    long n = (long)l.T * l.d;
    float *y = xt_case_alloc(c, "y", n, XT_F32);
    shared_moe *m =
        shared_moe_forward(y, l.x, l.wr, l.experts, sh.data, l.T, l.d, l.E, l.ff, l.k, s, comm);
    if (xt_case_is(c, "shared_moe_forward")) {
        xt_case_output(c, "y", y, XT_F32, n);
        shared_moe_free(m);
        shared_moe_free(NULL); /* the contract's "m may be NULL" */
        return;
    }
    xt_array dwr = xt_case_input(c, "dwr"), dex = xt_case_input(c, "dexperts");
    xt_array dsh = xt_case_input(c, "dshared");
    float *dx = xt_case_alloc(c, "dx", n, XT_F32);
    shared_moe_backward(m, dx, dwr.data, dex.data, dsh.data, l.dy);
    xt_case_output(c, "dx", dx, XT_F32, n);
    xt_case_output(c, "dwr", dwr.data, XT_F32, dwr.count);
    xt_case_output(c, "dexperts", dex.data, XT_F32, dex.count);
    xt_case_output(c, "dshared", dsh.data, XT_F32, dsh.count);
}

/*
 * One layer of 64 tokens a rank, d 32, E 8 routed experts of ff 32 (k 2) and 2 shared ones:
 * each rank's expert calls in the order it made them, with what was in flight, and y
 * against the layer on one process (the kit's experts, one token at a time).
 */
static void demo(MPI_Comm comm)
{
    enum { T = 64, D = 32, E = 8, FF = 32, K = 2, S = 2 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(E % np == 0, "np = %d must divide E = %d", np, E);
    int nl = E / np;
    long per = xt_expert_params(D, FF);
    float *all = xt_malloc(sizeof(float) * (size_t)((E + S) * per)), wr[D * E];
    float *x = xt_malloc(sizeof(float) * T * D), *y = xt_malloc(sizeof(float) * T * D);
    xt_rng g = xt_rng_seed(2025u); /* the same weights everywhere */
    xt_rng_fill_uniform(&g, all, (E + S) * per, -0.3f, 0.3f);
    xt_rng_fill_uniform(&g, wr, D * E, -1, 1);
    xt_rng h = xt_rng_seed(11u + 17u * (unsigned)rank);
    xt_rng_fill_uniform(&h, x, T * D, -1, 1);

    long before = xt_expert_log(NULL, 0, 0);
    shared_moe *m = shared_moe_forward(y, x, wr, all + (size_t)rank * nl * per,
                                       all + (size_t)E * per, T, D, E, FF, K, S, comm);
    shared_moe_free(m);
    xt_expert_call calls[16];
    long n = xt_expert_log(calls, before, 16);
    char line[200];
    int at = snprintf(line, sizeof line, "forward calls:");
    for (long i = 0; i < n - before && i < 16; i++)
        at += snprintf(line + at, sizeof line - (size_t)at, " %s%d:%d%s",
                       calls[i].expert >= E ? "S" : "e",
                       calls[i].expert >= E ? calls[i].expert - E : calls[i].expert,
                       calls[i].tokens, calls[i].pending ? "*" : "");
    xt_printf_ordered(comm, "%s\n", line);
    xt_printf_root(comm, "(S: a shared expert, e: a routed one; :tokens; * with the dispatch in "
                         "flight)\n");

    ep_demo_check(comm, y, x, wr, all, T, D, E, FF, K, S);
    free(all);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
