/*
 * The driver of lc1_basic/fun_allreduce_rd.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input(c, "x");
    allreduce_rd(x.data, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c), xt_case_comm(c));
    xt_case_output(c, "x", x.data, x.dtype, x.count);
}

/* Rank r holds 10 r + i at element i; all-reduce with sum. */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int count = (int)xt_arg_int("count", 4);
    int *x = xt_malloc(sizeof(int) * (size_t)count);
    for (int i = 0; i < count; i++)
        x[i] = 10 * rank + i;
    int p2 = 1;
    while (2 * p2 <= np)
        p2 *= 2;
    char plan[256] = "", *p = plan, *end = plan + sizeof plan;
    if (rank >= p2) {
        snprintf(p, (size_t)(end - p), "sends to r%d, gets the result back", rank - p2);
    } else {
        if (rank + p2 < np)
            p += snprintf(p, (size_t)(end - p), "takes in r%d, ", rank + p2);
        p += snprintf(p, (size_t)(end - p), "swaps with");
        for (int mask = 1; mask < p2; mask <<= 1)
            p += snprintf(p, (size_t)(end - p), " r%d", rank ^ mask);
        if (p2 == 1)
            p += snprintf(p, (size_t)(end - p), " nobody");
        if (rank + p2 < np)
            snprintf(p, (size_t)(end - p), ", sends the result to r%d", rank + p2);
    }
    xt_printf_ordered(comm, "%s\n", plan);
    xt_print_buffer_ordered(comm, "before: ", x, count, MPI_INT);
    allreduce_rd(x, count, MPI_INT, MPI_SUM, comm);
    xt_print_buffer_ordered(comm, "after:  ", x, count, MPI_INT);
    free(x);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
