/*
 * The driver of lc1_basic/fun_broadcast.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input(c, "x");
    int root = (int)xt_case_int(c, "root");
    if (xt_case_is(c, "bcast_linear"))
        bcast_linear(x.data, (int)x.count, xt_dtype_mpi(x.dtype), root, xt_case_comm(c));
    else
        bcast_binomial(x.data, (int)x.count, xt_dtype_mpi(x.dtype), root, xt_case_comm(c));
    xt_case_output(c, "x", x.data, x.dtype, x.count);
}

/* The last rank broadcasts 10 20 30 40; the others start with their own rank. */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int root = (int)xt_arg_int("root", np - 1);
    int buf[4];
    for (int i = 0; i < 4; i++)
        buf[i] = rank == root ? 10 * (i + 1) : rank;
    xt_print_buffer_ordered(comm, "before:          ", buf, 4, MPI_INT);
    bcast_binomial(buf, 4, MPI_INT, root, comm);
    xt_print_buffer_ordered(comm, "bcast_binomial:  ", buf, 4, MPI_INT);
    for (int i = 0; i < 4; i++)
        buf[i] = rank == root ? 100 * (i + 1) : rank;
    bcast_linear(buf, 4, MPI_INT, root, comm);
    xt_print_buffer_ordered(comm, "bcast_linear:    ", buf, 4, MPI_INT);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
