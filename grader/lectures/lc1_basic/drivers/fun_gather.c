/*
 * The driver of lc1_basic/fun_gather.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/*
 * The root and the highest rank other than it enter gather_linear first, the others
 * 4 ms later, so that block reaches a root already waiting before any other: a root
 * that stores blocks in order of arrival puts it in the lowest rank's place every
 * time, not now and then.
 */
static void driver_enter_highest_rank_first(MPI_Comm comm, int root)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int first = root == np - 1 ? np - 2 : np - 1;
    if (np > 2 && rank != first && rank != root)
        xt_sleep(0.004);
}

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    MPI_Comm comm = xt_case_comm(c);
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    long total = (long)np * x.count;
    if (xt_case_is(c, "gather_linear")) {
        int root = (int)xt_case_int(c, "root");
        /* Only the root has a result; the other ranks pass NULL, as MPI_Gather allows. */
        void *y = rank == root ? xt_case_alloc(c, "recv", total, x.dtype) : NULL;
        driver_enter_highest_rank_first(comm, root);
        gather_linear(x.data, y, (int)x.count, xt_dtype_mpi(x.dtype), root, comm);
        if (rank == root)
            xt_case_output(c, "y", y, x.dtype, total);
    } else {
        void *y = xt_case_alloc(c, "recv", total, x.dtype);
        allgather_ring(x.data, y, (int)x.count, xt_dtype_mpi(x.dtype), comm);
        xt_case_output(c, "y", y, x.dtype, total);
    }
}

static const char *driver_ring_phase(int step, int np)
{
    (void)step, (void)np;
    return "all-gather";
}

/*
 * Rank r contributes 10 r and 10 r + 1; gather to the last rank (--root R).
 * The ring's steps show each block travelling one hop per step; -1 marks a
 * block not received yet.
 */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int root = (int)xt_arg_int("root", np - 1);
    int x[2] = {10 * rank, 10 * rank + 1};
    int *y = xt_malloc(sizeof(int) * 2 * (size_t)np);
    xt_print_buffer_ordered(comm, "send:            ", x, 2, MPI_INT);
    gather_linear(x, rank == root ? y : NULL, 2, MPI_INT, root, comm);
    xt_print_buffer_at(comm, root, "gather_linear:   ", y, 2 * np, MPI_INT);
    for (int i = 0; i < 2 * np; i++)
        y[i] = -1;
    int *blocks = xt_malloc(sizeof(int) * (size_t)np);
    for (int i = 0; i < np; i++)
        blocks[i] = 2;
    xt_watch_begin(y, MPI_INT, blocks, np);
    allgather_ring(x, y, 2, MPI_INT, comm);
    xt_watch_print(comm, driver_ring_phase);
    xt_print_buffer_ordered(comm, "allgather_ring:  ", y, 2 * np, MPI_INT);
    free(blocks);
    free(y);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
