/*
 * The driver of lc1_basic/fun_reduce.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/* Only the root has a result; the other ranks pass NULL, as MPI_Reduce allows. */
static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    int root = (int)xt_case_int(c, "root"), rank;
    MPI_Comm_rank(xt_case_comm(c), &rank);
    void *y = rank == root ? xt_case_alloc(c, "recv", x.count, x.dtype) : NULL;
    if (xt_case_is(c, "reduce_linear"))
        reduce_linear(x.data, y, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c), root,
                      xt_case_comm(c));
    else
        reduce_binomial(x.data, y, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c), root,
                        xt_case_comm(c));
    if (rank == root)
        xt_case_output(c, "y", y, x.dtype, x.count);
}

/* Rank r holds 10 r + i at element i; sum to the last rank (--root R). */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int root = (int)xt_arg_int("root", np - 1);
    int x[4], y[4];
    for (int i = 0; i < 4; i++)
        x[i] = 10 * rank + i;
    xt_print_buffer_ordered(comm, "send:                 ", x, 4, MPI_INT);
    reduce_binomial(x, rank == root ? y : NULL, 4, MPI_INT, MPI_SUM, root, comm);
    xt_print_buffer_at(comm, root, "reduce_binomial sum:  ", y, 4, MPI_INT);
    reduce_linear(x, rank == root ? y : NULL, 4, MPI_INT, MPI_SUM, root, comm);
    xt_print_buffer_at(comm, root, "reduce_linear sum:    ", y, 4, MPI_INT);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
