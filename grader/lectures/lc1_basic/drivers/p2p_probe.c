/*
 * The driver of lc1_basic/p2p_probe.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/*
 * Rank r sends its payload to r+1 (mod np) with tag 100 + r and receives from
 * r-1 with recv_any_size. The send is nonblocking: under strict send mode a
 * blocking send would wait for a receive that comes only after it.
 */
static int driver_exchange(const float *payload, int count, float **got, MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Request req;
    MPI_Isend(payload, count, MPI_FLOAT, (rank + 1) % np, 100 + rank, comm, &req);
    int n = recv_any_size(got, (rank - 1 + np) % np, comm);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return n;
}

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    float *y = NULL;
    int n = driver_exchange(x.data, (int)x.count, &y, xt_case_comm(c));
    int64_t ret = n;
    xt_case_output(c, "ret", &ret, XT_I64, 1);
    xt_case_output(c, "y", y, XT_F32, n);
    free(y);
}

/* Rank r's payload: (2 r) % 5 floats, 10 r + i; rank 0's is empty. */
static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    float payload[4];
    int count = (2 * rank) % 5;
    for (int i = 0; i < count; i++)
        payload[i] = (float)(10 * rank + i);
    xt_print_buffer_ordered(comm, "sends to the right:   ", payload, count, MPI_FLOAT);
    float *got = NULL;
    int n = driver_exchange(payload, count, &got, comm);
    char text[256];
    xt_format_buffer(text, sizeof text, got, n, MPI_FLOAT);
    xt_printf_ordered(comm, "got %d from the left: %s", n, text);
    free(got);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
