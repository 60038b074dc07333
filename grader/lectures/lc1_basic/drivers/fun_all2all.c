/*
 * The driver of lc1_basic/fun_all2all.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/* Elements this rank receives: the sum of column `rank` of splits. */
static int driver_column_sum(const int *splits, int rank, int np)
{
    int total = 0;
    for (int i = 0; i < np; i++)
        total += splits[i * np + rank];
    return total;
}

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    xt_array x = xt_case_input_const(c, "x");
    xt_array splits = xt_case_input_const(c, "splits");
    int total = driver_column_sum(splits.data, rank, np);
    float *y = xt_case_alloc(c, "y", total, XT_F32);
    alltoallv_from_splits(x.data, splits.data, y, comm);
    xt_case_output(c, "y", y, XT_F32, total);
}

/* splits[i][j] = (2i + j + 1) mod 3; rank i's block for rank j holds 10 i + j. */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int *splits = xt_malloc(sizeof(int) * (size_t)np * (size_t)np);
    for (int i = 0; i < np; i++)
        for (int j = 0; j < np; j++)
            splits[i * np + j] = (2 * i + j + 1) % 3;
    int *column = xt_malloc(sizeof(int) * (size_t)np);
    int sent = 0;
    for (int j = 0; j < np; j++) {
        column[j] = splits[j * np + rank];
        sent += splits[rank * np + j];
    }
    float *x = xt_malloc(sizeof(float) * (size_t)sent), *p = x;
    for (int j = 0; j < np; j++)
        for (int k = 0; k < splits[rank * np + j]; k++)
            *p++ = (float)(10 * rank + j);
    int got = driver_column_sum(splits, rank, np);
    float *y = xt_malloc(sizeof(float) * (size_t)got);
    xt_print_buffer_ordered(comm, "counts out (row):   ", splits + rank * np, np, MPI_INT);
    xt_print_buffer_ordered(comm, "counts in (column): ", column, np, MPI_INT);
    xt_print_buffer_ordered(comm, "send: ", x, sent, MPI_FLOAT);
    alltoallv_from_splits(x, splits, y, comm);
    xt_print_buffer_ordered(comm, "recv: ", y, got, MPI_FLOAT);
    free(splits);
    free(column);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
