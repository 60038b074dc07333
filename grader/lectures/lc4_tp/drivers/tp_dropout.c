/*
 * The driver of lc4_tp/tp_dropout.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include "kit.h" /* xt_tp_group */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The case: a dp x tp mesh of np ranks ("tp"), a seed. tp_rng_init's writes the two states;
 * the layer's run two forward steps (x, then x2) on one pair of generators and write both
 * steps' y and masks; tp_dropout_backward's then run the backward of the second step.
 */
static void run_case(xt_case *c)
{
    int tp_rank, dp_rank;
    MPI_Comm group = xt_tp_group(xt_case_comm(c), (int)xt_case_int(c, "tp"), &tp_rank, &dp_rank);
    tp_rng rng = tp_rng_init((uint64_t)xt_case_int(c, "seed"), tp_rank, dp_rank);
    if (xt_case_is(c, "tp_rng_init")) {
        int64_t *states = xt_case_alloc(c, "states", 2, XT_I64);
        states[0] = (int64_t)rng.replicated.state;
        states[1] = (int64_t)rng.split.state;
        xt_case_output(c, "states", states, XT_I64, 2);
        xt_tp_group_free(&group);
        return;
    }
    int rows = (int)xt_case_int(c, "rows"), d = (int)xt_case_int(c, "d");
    int lo, ff_local;
    xt_block((int)xt_case_int(c, "ff"), (int)xt_case_int(c, "tp"), tp_rank, &lo, &ff_local);
    float p = (float)atof(xt_case_str(c, "p"));
    xt_array x = xt_case_input_const(c, "x"), x2 = xt_case_input_const(c, "x2");
    xt_array w1 = xt_case_input_const(c, "w1"), w2 = xt_case_input_const(c, "w2");
    long n = (long)rows * ff_local, m = (long)rows * d;
    float *act1 = xt_case_alloc(c, "act1", 2 * n + m, XT_F32);
    float *act2 = xt_case_alloc(c, "act2", 2 * n + m, XT_F32);
    float *y1 = xt_case_alloc(c, "y1", m, XT_F32), *y2 = xt_case_alloc(c, "y2", m, XT_F32);
    tp_dropout_forward(x.data, w1.data, w2.data, y1, act1, &rng, p, rows, d, ff_local, group);
    tp_dropout_forward(x2.data, w1.data, w2.data, y2, act2, &rng, p, rows, d, ff_local, group);
    if (xt_case_is(c, "tp_dropout_forward")) {
        xt_case_output(c, "y1", y1, XT_F32, m);
        xt_case_output(c, "y2", y2, XT_F32, m);
        xt_case_output(c, "split1", act1 + n, XT_F32, n);
        xt_case_output(c, "repl1", act1 + 2 * n, XT_F32, m);
        xt_case_output(c, "split2", act2 + n, XT_F32, n);
        xt_case_output(c, "repl2", act2 + 2 * n, XT_F32, m);
    } else {
        xt_array dy = xt_case_input_const(c, "dy");
        xt_array dw1 = xt_case_input(c, "dw1"), dw2 = xt_case_input(c, "dw2");
        float *dx = xt_case_alloc(c, "dx", m, XT_F32);
        tp_dropout_backward(x2.data, w1.data, w2.data, act2, dy.data, dx, dw1.data, dw2.data, rows,
                            d, ff_local, group);
        xt_case_output(c, "dx", dx, XT_F32, m);
        xt_case_output(c, "dw1", dw1.data, XT_F32, dw1.count);
        xt_case_output(c, "dw2", dw2.data, XT_F32, dw2.count);
    }
    xt_tp_group_free(&group);
}

/* The first `show` scales as 1 (kept) and . (dropped). */
static void driver_pattern(char *out, const float *scale, long n, long show)
{
    long i = 0;
    for (; i < n && i < show; i++)
        out[i] = scale[i] != 0.0f ? '1' : '.';
    out[i] = '\0';
}

/* FNV-1a of n floats' bytes. */
static uint64_t driver_hash(const float *v, long n)
{
    uint64_t h = 1469598103934665603ull;
    const unsigned char *b = (const unsigned char *)v;
    for (long i = 0; i < n * (long)sizeof(float); i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* How many distinct arrays of n floats the ranks of group hold (collective over group). */
static int driver_distinct_on_group(const float *v, long n, MPI_Comm group)
{
    int np, distinct = 0;
    MPI_Comm_size(group, &np);
    uint64_t mine = driver_hash(v, n), *all = xt_malloc(sizeof(uint64_t) * (size_t)np);
    MPI_Allgather(&mine, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, group);
    for (int r = 0; r < np; r++) {
        int seen = 0;
        for (int q = 0; q < r; q++)
            seen |= all[q] == all[r];
        distinct += !seen;
    }
    free(all);
    return distinct;
}

/*
 * A dp x tp mesh of the world (--tp, default np, or np/2 when np is 8), one forward step of
 * 4 rows, d 8, ff 16 at p = 0.25 on seed 1234: each rank's coordinates and the start of its
 * two masks, then what the masks and y agree on.
 */
static void demo(MPI_Comm comm)
{
    enum { ROWS = 4, D = 8, FF = 16 };
    int np;
    MPI_Comm_size(comm, &np);
    int tp = (int)xt_arg_int("tp", np == 8 ? 4 : np);
    XT_CHECK(tp >= 1 && np % tp == 0, "--tp %d does not divide np = %d", tp, np);
    int tp_rank, dp_rank, lo, ff_local;
    MPI_Comm group = xt_tp_group(comm, tp, &tp_rank, &dp_rank);
    xt_block(FF, tp, tp_rank, &lo, &ff_local);
    float x[ROWS * D], y[ROWS * D], w1[D * FF], w2[FF * D];
    float act[2 * ROWS * FF + ROWS * D];
    xt_rng g = xt_rng_seed(99u + 7u * (unsigned)dp_rank); /* each data rank its own x */
    xt_rng_fill_uniform(&g, x, ROWS * D, -1, 1);
    xt_rng wg = xt_rng_seed(5u + (unsigned)tp_rank); /* each tensor rank its own block */
    xt_rng_fill_uniform(&wg, w1, (long)D * ff_local, -1, 1);
    xt_rng_fill_uniform(&wg, w2, (long)ff_local * D, -1, 1);

    tp_rng rng = tp_rng_init(1234u, tp_rank, dp_rank);
    long before = xt_mpi_calls("MPI_Allreduce");
    tp_dropout_forward(x, w1, w2, y, act, &rng, 0.25f, ROWS, D, ff_local, group);
    long allreduces = xt_mpi_calls("MPI_Allreduce") - before;
    long n = (long)ROWS * ff_local;
    char split[40], repl[40];
    driver_pattern(split, act + n, n, 16);
    driver_pattern(repl, act + 2 * n, (long)ROWS * D, 16);
    xt_printf_ordered(comm, "dp %d tp %d: split mask %-16s  replicated mask %s\n", dp_rank, tp_rank,
                      split, repl);
    int tp_size = tp, all[3] = {driver_distinct_on_group(act + 2 * n, (long)ROWS * D, group) == 1,
                                driver_distinct_on_group(y, (long)ROWS * D, group) == 1,
                                driver_distinct_on_group(act + n, n, group) == tp_size};
    MPI_Allreduce(MPI_IN_PLACE, all, 3, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "replicated masks the same on every tensor rank: %s\n",
                   all[0] ? "yes" : "NO");
    xt_printf_root(comm, "y the same on every tensor rank: %s\n", all[1] ? "yes" : "NO");
    xt_printf_root(comm, "split masks all different across the tensor group: %s\n",
                   tp == 1  ? "(one tensor rank)"
                   : all[2] ? "yes"
                            : "NO");
    xt_printf_root(comm, "messages for the masks: none (all-reduces in the step: %ld, the MLP's)\n",
                   allreduces);
    xt_tp_group_free(&group);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
