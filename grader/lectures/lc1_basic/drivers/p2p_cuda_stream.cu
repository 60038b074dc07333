/*
 * The driver of lc1_basic/p2p_cuda_stream.cu: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/*
 * Rank 2k sends its x to rank 2k+1 (an odd np leaves the last rank out).
 * Every rank writes x back: the sender's device buffer (unchanged), the
 * receiver's buffer after the transfer, an idle rank's input.
 */
static void run_case(xt_case *c)
{
    XT_CHECK(xt_cuda_select_device() >= 0, "no GPU: p2p_cuda_stream needs one");
    MPI_Comm comm = xt_case_comm(c);
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    xt_array x = xt_case_input(c, "x");
    float *h = (float *)x.data;
    int count = (int)x.count, chunk = (int)xt_case_int(c, "chunk");
    int sender = rank % 2 == 0 && rank + 1 < np, receiver = rank % 2 == 1;
    int test_send = xt_case_is(c, "send_device");
    float *d = (float *)xt_cuda_malloc(sizeof(float) * (size_t)count);
    xt_cuda_upload(d, h, sizeof(float) * (size_t)count);
    if (sender && test_send)
        send_device(d, count, chunk, rank + 1, comm);
    else if (sender)
        host_send_chunks(h, count, chunk, rank + 1, comm);
    else if (receiver && test_send)
        host_recv_chunks(h, count, rank - 1, comm);
    else if (receiver)
        recv_device(d, count, chunk, rank - 1, comm);
    if (!(receiver && test_send)) /* nothing waited for on the function's behalf */
        xt_cuda_read_back(h, d, sizeof(float) * (size_t)count);
    xt_case_output(c, "x", h, XT_F32, x.count);
    xt_cuda_free(d);
}

/* Rank r = 2k sends 100 r + i in chunks of --chunk (3) to rank r+1, whose buffer holds -1s. */
static void demo(MPI_Comm comm)
{
    XT_CHECK(xt_cuda_select_device() >= 0, "no GPU: p2p_cuda_stream needs one");
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int count = (int)xt_arg_int("count", 8), chunk = (int)xt_arg_int("chunk", 3);
    XT_CHECK(count >= 0 && chunk > 0, "need --count >= 0 and --chunk > 0");
    int sender = rank % 2 == 0 && rank + 1 < np, receiver = rank % 2 == 1;
    float *h = (float *)xt_malloc(sizeof(float) * (size_t)count);
    for (int i = 0; i < count; i++)
        h[i] = receiver ? -1.0f : (float)(100 * rank + i);
    float *d = (float *)xt_cuda_malloc(sizeof(float) * (size_t)count);
    xt_cuda_upload(d, h, sizeof(float) * (size_t)count);
    int nchunks = count / chunk + (count % chunk != 0);
    if (sender)
        xt_printf_ordered(comm, "sends %d floats to r%d in %d chunks\n", count, rank + 1, nchunks);
    else if (receiver)
        xt_printf_ordered(comm, "receives %d floats from r%d in %d chunks\n", count, rank - 1,
                          nchunks);
    else
        xt_printf_ordered(comm, "idle: no partner\n");
    xt_print_buffer_ordered(comm, "device before: ", h, count, MPI_FLOAT);
    if (sender)
        send_device(d, count, chunk, rank + 1, comm);
    else if (receiver)
        recv_device(d, count, chunk, rank - 1, comm);
    xt_cuda_download(h, d, sizeof(float) * (size_t)count);
    xt_print_buffer_ordered(comm, "device after:  ", h, count, MPI_FLOAT);
    xt_cuda_free(d);
    free(h);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
