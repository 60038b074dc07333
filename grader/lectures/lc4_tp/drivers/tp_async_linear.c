/*
 * The driver of lc4_tp/tp_async_linear.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include "xt_harness.h"

#include <string.h>

static void run_case(xt_case *c)
{
    tp_col_backward_case(c, col_linear_backward_async);
}

/*
 * A layer of 64 rows, 256 inputs and 256 outputs cut by columns: each rank's backward
 * once blocking (dx, its all-reduce, then dW) and once overlapped (after a warm-up call),
 * their times on this machine, and the same results both ways.
 */
static void demo(MPI_Comm comm)
{
    enum { ROWS = 64, IN = 256, OUT = 256 };
    int np, rank, lo, count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(OUT, np, rank, &lo, &count);
    xt_rng g = xt_rng_seed(42u + (unsigned)rank);
    float *x = malloc(sizeof(float) * ROWS * IN), *w = malloc(sizeof(float) * IN * OUT);
    float *dy = malloc(sizeof(float) * ROWS * OUT), *dx = malloc(sizeof(float) * ROWS * IN);
    float *dx2 = malloc(sizeof(float) * ROWS * IN);
    float *dw = calloc((size_t)IN * OUT, sizeof(float));
    float *dw2 = calloc((size_t)IN * OUT, sizeof(float));
    xt_rng_fill_uniform(&g, w, (long)IN * count, -1, 1);
    xt_rng_fill_uniform(&g, dy, (long)ROWS * count, -1, 1);
    xt_rng h = xt_rng_seed(7u); /* x is the same on every rank */
    xt_rng_fill_uniform(&h, x, (long)ROWS * IN, -1, 1);

    col_linear_backward_async(x, w, dy, dx2, dw2, NULL, ROWS, IN, count, comm); /* warm-up */
    memset(dw2, 0, sizeof(float) * IN * OUT);
    double t0 = MPI_Wtime();
    xt_tp_input_grad(dx, dy, w, ROWS, IN, count);
    MPI_Allreduce(MPI_IN_PLACE, dx, ROWS * IN, MPI_FLOAT, MPI_SUM, comm);
    xt_linear_backward(NULL, dw, NULL, dy, x, NULL, ROWS, IN, count);
    double blocking = MPI_Wtime() - t0;
    t0 = MPI_Wtime();
    col_linear_backward_async(x, w, dy, dx2, dw2, NULL, ROWS, IN, count, comm);
    double overlapped = MPI_Wtime() - t0;
    int same = memcmp(dx, dx2, sizeof(float) * ROWS * IN) == 0 &&
               memcmp(dw, dw2, sizeof(float) * IN * (size_t)count) == 0;
    int all = 0;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_ordered(comm, "columns %d..%d: blocking %.0f us, overlapped %.0f us\n", lo,
                      lo + count - 1, blocking * 1e6, overlapped * 1e6);
    xt_printf_root(comm, "dx and dW the same both ways: %s\n", all ? "yes" : "NO");
    free(x), free(w), free(dy), free(dx), free(dx2), free(dw), free(dw2);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
