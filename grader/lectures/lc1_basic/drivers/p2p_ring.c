/*
 * The driver of lc1_basic/p2p_ring.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    float *y = xt_case_alloc(c, "recv", x.count, XT_F32);
    if (xt_case_is(c, "ring_shift"))
        ring_shift(x.data, y, (int)x.count, xt_case_comm(c));
    else
        ring_shift_sendrecv(x.data, y, (int)x.count, xt_case_comm(c));
    xt_case_output(c, "y", y, XT_F32, x.count);
}

/* Each rank sends three copies of its own rank number. */
static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    float send[3] = {(float)rank, (float)rank, (float)rank}, recv[3] = {-1, -1, -1};
    xt_print_buffer_ordered(comm, "send:                  ", send, 3, MPI_FLOAT);
    ring_shift(send, recv, 3, comm);
    xt_print_buffer_ordered(comm, "ring_shift received:   ", recv, 3, MPI_FLOAT);
    ring_shift_sendrecv(send, recv, 3, comm);
    xt_print_buffer_ordered(comm, "with MPI_Sendrecv:     ", recv, 3, MPI_FLOAT);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
