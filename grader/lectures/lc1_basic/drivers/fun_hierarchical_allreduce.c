/*
 * The driver of lc1_basic/fun_hierarchical_allreduce.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include <stdio.h>
#include <stdlib.h>

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input(c, "x");
    hierarchical_allreduce(x.data, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c),
                           (int)xt_case_int(c, "ranks_per_node"), xt_case_comm(c));
    xt_case_output(c, "x", x.data, x.dtype, x.count);
}

/* Rank r holds 10 r + i at element i; all-reduce with sum on nodes of --per-node ranks (2). */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int count = (int)xt_arg_int("count", 4);
    int L = (int)xt_arg_int("per-node", np % 2 == 0 ? 2 : 1);
    XT_CHECK(L >= 1 && np % L == 0, "--per-node %d does not divide np = %d", L, np);
    int *x = xt_malloc(sizeof(int) * (size_t)count);
    xt_demo_sum_fill(comm, x, count);
    /* Who each phase talks to: the node's ranks, then those of the same local index. */
    char plan[256], *p = plan, *end = plan + sizeof plan;
    p += snprintf(p, (size_t)(end - p), "node %d: ring with r%d..r%d; block %d across nodes with",
                  rank / L, rank / L * L, rank / L * L + L - 1, rank % L);
    for (int r = rank % L; r < np; r += L)
        if (r != rank)
            p += snprintf(p, (size_t)(end - p), " r%d", r);
    if (np == L)
        snprintf(p, (size_t)(end - p), " nobody");
    xt_printf_ordered(comm, "%s\n", plan);
    xt_print_buffer_ordered(comm, "before: ", x, count, MPI_INT);
    hierarchical_allreduce(x, count, MPI_INT, MPI_SUM, L, comm);
    xt_print_buffer_ordered(comm, "after:  ", x, count, MPI_INT);
    xt_demo_sum_holds(comm, x, count);
    free(x);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
