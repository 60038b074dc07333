/*
 * The driver of lc1_basic/fun_ring_allreduce.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input(c, "x");
    ring_allreduce(x.data, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c), xt_case_comm(c));
    xt_case_output(c, "x", x.data, x.dtype, x.count);
}

static const char *driver_ring_phase(int step, int np)
{
    return step < np - 1 ? "reduce-scatter" : "all-gather";
}

/*
 * Rank r holds 10 r + i at element i; all-reduce with sum. Every step shows
 * the chunk each rank sends right and the one it receives from the left,
 * then its buffer, chunks split by bars: the partial sums grow one
 * contribution per hop, then the finished chunks travel around.
 */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int count = (int)xt_arg_int("count", 2 * np + 1);
    int *x = xt_malloc(sizeof(int) * (size_t)count);
    for (int i = 0; i < count; i++)
        x[i] = 10 * rank + i;
    xt_print_buffer_ordered(comm, "before: ", x, count, MPI_INT);
    int *chunks = xt_malloc(sizeof(int) * (size_t)np); /* the ring's cut, for the display */
    for (int i = 0; i < np; i++)
        chunks[i] = count / np + (i < count % np);
    xt_watch_begin(x, MPI_INT, chunks, np);
    ring_allreduce(x, count, MPI_INT, MPI_SUM, comm);
    xt_watch_print(comm, driver_ring_phase);
    xt_print_buffer_ordered(comm, "after:  ", x, count, MPI_INT);
    free(chunks);
    free(x);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
