/*
 * The driver of lc1_basic/fun_scatter.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/*
 * Every rank reads the group's np blocks, for their type and size; only the
 * root passes them, the others pass NULL, as MPI_Scatter allows.
 */
static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int root = (int)xt_case_int(c, "root"), rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    xt_array x = xt_case_input_const(c, "x");
    int count = (int)(x.count / np);
    void *y = xt_case_alloc(c, "recv", count, x.dtype);
    scatter_linear(rank == root ? x.data : NULL, y, count, xt_dtype_mpi(x.dtype), root, comm);
    xt_case_output(c, "y", y, x.dtype, count);
}

/* The root holds 0 1 10 11 20 21 ...; rank i gets 10 i, 10 i + 1 (--root R). */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int root = (int)xt_arg_int("root", np - 1);
    int *x = NULL, y[2] = {-1, -1};
    if (rank == root) {
        x = xt_malloc(sizeof(int) * 2 * (size_t)np);
        for (int i = 0; i < 2 * np; i++)
            x[i] = 10 * (i / 2) + i % 2;
    }
    xt_print_buffer_at(comm, root, "send:            ", x, 2 * np, MPI_INT);
    scatter_linear(x, y, 2, MPI_INT, root, comm);
    xt_print_buffer_ordered(comm, "scatter_linear:  ", y, 2, MPI_INT);
    free(x);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
