/*
 * The driver of lc1_basic/p2p_async.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array msgs = xt_case_input_const(c, "msgs");
    xt_array sum = xt_case_input(c, "sum");
    gather_async(msgs.data, (int)xt_case_int(c, "k"), (int)xt_case_int(c, "count"), sum.data,
                 xt_case_comm(c));
    xt_case_output(c, "sum", sum.data, XT_F32, sum.count);
}

/* k = 2 messages of 3 floats; rank r's message i holds 100 r + 10 i + j; sum starts at -1. */
static void demo(MPI_Comm comm)
{
    enum { K = 2, COUNT = 3 };
    int rank;
    MPI_Comm_rank(comm, &rank);
    float msgs[K * COUNT], sum[COUNT] = {-1.0f, -1.0f, -1.0f};
    for (int i = 0; i < K; i++)
        for (int j = 0; j < COUNT; j++)
            msgs[i * COUNT + j] = (float)(100 * rank + 10 * i + j);
    xt_print_buffer_ordered(comm, "msgs:       ", msgs, K * COUNT, MPI_FLOAT);
    xt_print_buffer_ordered(comm, "sum before: ", sum, COUNT, MPI_FLOAT);
    gather_async(msgs, K, COUNT, sum, comm);
    xt_print_buffer_ordered(comm, "sum after:  ", sum, COUNT, MPI_FLOAT);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
