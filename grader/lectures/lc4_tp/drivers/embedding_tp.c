/*
 * The driver of lc4_tp/embedding_tp.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int n = (int)xt_case_int(c, "n"), vocab = (int)xt_case_int(c, "V");
    int d = (int)xt_case_int(c, "d"), np, rank, v_lo, v_count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(vocab, np, rank, &v_lo, &v_count);
    xt_array tokens = xt_case_input_const(c, "tokens");
    if (xt_case_is(c, "embedding_tp_forward")) {
        xt_array e = xt_case_input_const(c, "e");
        float *y = xt_case_alloc(c, "y", (long)n * d, XT_F32);
        embedding_tp_forward(tokens.data, n, e.data, v_lo, v_count, d, y, comm);
        xt_case_output(c, "y", y, XT_F32, (long)n * d);
    } else {
        xt_array dy = xt_case_input_const(c, "dy"), de = xt_case_input(c, "de");
        embedding_tp_backward(tokens.data, n, dy.data, v_lo, v_count, d, de.data);
        xt_case_output(c, "de", de.data, XT_F32, de.count);
    }
}

/*
 * A table of V = 10 tokens whose row t is (10 t, 10 t + 1, 10 t + 2), so that
 * each number names its token: rank r holds the rows xt_block(10, np, r)
 * gives, the all-reduced lookup equals the single-process one, and the
 * backward adds a repeated token's two gradient rows into one row.
 */
static void demo(MPI_Comm comm)
{
    enum { V = 10, D = 3, N = 5 };
    int np, rank, lo, count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(V, np, rank, &lo, &count);
    float e_full[V * D];
    for (int t = 0; t < V; t++)
        for (int j = 0; j < D; j++)
            e_full[t * D + j] = (float)(10 * t + j);
    const float *e_local = e_full + lo * D;
    int tokens[N] = {3, 0, 9, 3, 5};
    xt_printf_root(comm, "E (10 x 3): row t = [10t 10t+1 10t+2]; tokens [3 0 9 3 5]\n");
    xt_printf_ordered(comm, "rows %d..%d of E (%d)\n", lo, lo + count - 1, count);

    float y[N * D], single[N * D];
    embedding_tp_forward(tokens, N, e_local, lo, count, D, y, comm);
    for (int i = 0; i < N; i++)
        memcpy(single + i * D, e_full + tokens[i] * D, sizeof(float) * D);
    xt_print_buffer_at(comm, 0, "y = E[tokens]: ", y, N * D, MPI_FLOAT);
    xt_printf_root(comm, "single process E[tokens] equal: %s\n",
                   memcmp(y, single, sizeof y) == 0 ? "yes" : "NO");

    /* Backward: row i of dy is i + 1 everywhere, so token 3 (rows 0 and 3) gets 1 + 4. */
    float dy[N * D], de[V * D] = {0};
    for (int i = 0; i < N; i++)
        for (int j = 0; j < D; j++)
            dy[i * D + j] = (float)(i + 1);
    embedding_tp_backward(tokens, N, dy, lo, count, D, de);
    xt_print_buffer_ordered(comm, "dE rows: ", de, count * D, MPI_FLOAT);
    xt_printf_root(comm, "forward: one all-reduce of n*d = %d floats; backward: none\n", N * D);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
