/*
 * The driver of lc1_basic/fun_ring_allreduce_cuda.cu: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    XT_CHECK(xt_cuda_select_device() >= 0, "no GPU: fun_ring_allreduce_cuda needs one");
    xt_array x = xt_case_input(c, "x");
    int count = (int)x.count;
    size_t bytes = sizeof(float) * (size_t)count;
    float *d = (float *)xt_cuda_malloc(bytes);
    xt_cuda_upload(d, (const float *)x.data, sizeof(float) * (size_t)count);
    ring_allreduce_cuda(d, count, (int)xt_case_int(c, "chunk"), xt_case_comm(c));
    xt_cuda_read_back(x.data, d, bytes); /* nothing waited for on the function's behalf */
    xt_case_output(c, "x", x.data, XT_F32, x.count);
    xt_cuda_free(d);
}

/* Rank r holds 10 r + i at element i; all-reduce with sum, --chunk (2) floats a message. */
static void demo(MPI_Comm comm)
{
    XT_CHECK(xt_cuda_select_device() >= 0, "no GPU: fun_ring_allreduce_cuda needs one");
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int count = (int)xt_arg_int("count", 2 * np + 1), chunk = (int)xt_arg_int("chunk", 2);
    XT_CHECK(count >= 0 && chunk > 0, "need --count >= 0 and --chunk > 0");
    float *h = (float *)xt_malloc(sizeof(float) * (size_t)count);
    for (int i = 0; i < count; i++)
        h[i] = (float)(10 * rank + i);
    float *d = (float *)xt_cuda_malloc(sizeof(float) * (size_t)count);
    xt_cuda_upload(d, h, sizeof(float) * (size_t)count);
    xt_print_buffer_ordered(comm, "before: ", h, count, MPI_FLOAT);
    ring_allreduce_cuda(d, count, chunk, comm);
    XT_CUDA_CHECK(cudaMemcpy(h, d, sizeof(float) * (size_t)count, cudaMemcpyDeviceToHost));
    xt_print_buffer_ordered(comm, "after:  ", h, count, MPI_FLOAT);
    xt_cuda_free(d);
    free(h);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
