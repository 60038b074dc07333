/*
 * The driver of lc4_tp/cross_entropy_tp.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int n = (int)xt_case_int(c, "n"), vocab = (int)xt_case_int(c, "V"), np, rank, v_lo, v_count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(vocab, np, rank, &v_lo, &v_count);
    xt_array logits = xt_case_input_const(c, "logits"), targets = xt_case_input_const(c, "targets");
    float *dlogits = NULL;
    if (xt_case_int(c, "grad"))
        dlogits = xt_case_alloc(c, "dlogits", (long)n * v_count, XT_F32);
    float loss = cross_entropy_tp(logits.data, targets.data, n, v_lo, v_count, dlogits, comm);
    xt_case_output(c, "loss", &loss, XT_F32, 1);
    if (dlogits)
        xt_case_output(c, "dlogits", dlogits, XT_F32, (long)n * v_count);
}

/*
 * Two tokens over a vocabulary of 6 whose logits are small integers: rank r
 * holds the columns xt_block(6, np, r) gives; the loss and the gathered
 * gradient equal the single-process cross-entropy (xt_cross_entropy_loss).
 */
static void demo(MPI_Comm comm)
{
    enum { N = 2, V = 6 };
    int np, rank, lo, count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(V, np, rank, &lo, &count);
    const float z[N * V] = {1, 2, 3, 0, -1, 2, 0, 0, 1, 4, 1, 0};
    const int targets[N] = {2, 3};
    float z_local[N * V], dz_local[N * V];
    for (int i = 0; i < N; i++)
        memcpy(z_local + i * count, z + i * V + lo, sizeof(float) * (size_t)count);
    xt_printf_root(comm, "logits (2 x 6): [1 2 3 0 -1 2; 0 0 1 4 1 0]; targets [2 3]\n");
    xt_printf_ordered(comm, "columns %d..%d (%d)\n", lo, lo + count - 1, count);

    float loss = cross_entropy_tp(z_local, targets, N, lo, count, dz_local, comm);
    xt_printf_ordered(comm, "loss %.6f\n", (double)loss);
    xt_print_buffer_ordered(comm, "dlogits, own columns: ", dz_local, N * count, MPI_FLOAT);

    float dz_single[N * V];
    int32_t labels[N] = {2, 3};
    float single = xt_cross_entropy_loss(dz_single, z, labels, N, V);
    int same = 1;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < count; j++)
            same &= fabsf(dz_local[i * count + j] - dz_single[i * V + lo + j]) < 1e-6f;
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "single process loss %.6f; loss and dlogits agree: %s\n", (double)single,
                   same && fabsf(loss - single) < 1e-6f ? "yes" : "NO");
    xt_printf_root(comm, "messages: all-reduce MAX of n = %d floats, SUM of 2n = %d floats\n", N,
                   2 * N);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
