/*
 * The driver of lc1_basic/fun_reduce_scatter.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    xt_array counts = xt_case_input(c, "recvcounts");
    int rank;
    MPI_Comm_rank(xt_case_comm(c), &rank);
    const int *recvcounts = counts.data;
    void *y = xt_case_alloc(c, "recv", recvcounts[rank], x.dtype);
    reduce_scatter_ring(x.data, y, recvcounts, xt_dtype_mpi(x.dtype), xt_case_op(c),
                        xt_case_comm(c));
    xt_case_output(c, "y", y, x.dtype, recvcounts[rank]);
}

/*
 * Rank r holds 100 r + i at element i; block i has i + 1 elements; sum. The
 * steps show each message by its length, which names the block it carries
 * (the partial sums live in the algorithm's scratch copy; make demo
 * EX=fun_ring_allreduce shows them step by step).
 */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int *counts = xt_malloc(sizeof(int) * (size_t)np), total = 0;
    for (int i = 0; i < np; i++)
        total += counts[i] = i + 1;
    int *x = xt_malloc(sizeof(int) * (size_t)total), *y = xt_malloc(sizeof(int) * (size_t)np);
    for (int i = 0; i < total; i++)
        x[i] = 100 * rank + i;
    xt_print_buffer_ordered(comm, "send: ", x, total, MPI_INT);
    xt_watch_begin(x, MPI_INT, counts, np);
    reduce_scatter_ring(x, y, counts, MPI_INT, MPI_SUM, comm);
    xt_watch_print(comm, NULL);
    xt_print_buffer_ordered(comm, "recv: ", y, counts[rank], MPI_INT);
    free(x);
    free(y);
    free(counts);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
