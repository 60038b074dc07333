/*
 * The driver of lc1_basic/p2p.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input(c, "x");
    chain_pass(x.data, (int)x.count, xt_case_comm(c));
    xt_case_output(c, "x", x.data, XT_F32, x.count);
}

/* Rank 0 starts with 1 2 3 4; the others start with -1s that must be overwritten. */
static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    float buf[4];
    for (int i = 0; i < 4; i++)
        buf[i] = rank == 0 ? (float)(i + 1) : -1.0f;
    xt_print_buffer_ordered(comm, "before: ", buf, 4, MPI_FLOAT);
    chain_pass(buf, 4, comm);
    xt_print_buffer_ordered(comm, "after:  ", buf, 4, MPI_FLOAT);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
