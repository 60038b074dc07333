/*
 * The driver of lc1_basic/fun_all2all_scratch.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    xt_array sendcounts = xt_case_input_const(c, "sendcounts");
    int *recvcounts = xt_case_alloc(c, "recvcounts", sendcounts.count, XT_I32);
    void *y = NULL;
    int total = alltoallv_scratch(x.data, sendcounts.data, xt_dtype_mpi(x.dtype), &y, recvcounts,
                                  xt_case_comm(c));
    int64_t ret = total;
    xt_case_output(c, "ret", &ret, XT_I64, 1);
    xt_case_output(c, "recvcounts", recvcounts, XT_I32, sendcounts.count);
    xt_case_output(c, "y", y, x.dtype, total);
    free(y);
}

/* Rank r sends j + 1 copies of 10 r + j to rank j. */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int *counts = xt_malloc(sizeof(int) * (size_t)np), total = 0;
    for (int j = 0; j < np; j++)
        total += counts[j] = j + 1;
    int *x = xt_malloc(sizeof(int) * (size_t)total), *p = x;
    for (int j = 0; j < np; j++)
        for (int k = 0; k <= j; k++)
            *p++ = 10 * rank + j;
    int *recvcounts = xt_malloc(sizeof(int) * (size_t)np);
    void *y = NULL;
    xt_print_buffer_ordered(comm, "send: ", x, total, MPI_INT);
    int got = alltoallv_scratch(x, counts, MPI_INT, &y, recvcounts, comm);
    xt_print_buffer_ordered(comm, "recv: ", y, got, MPI_INT);
    free(y);
    free(x);
    free(counts);
    free(recvcounts);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
