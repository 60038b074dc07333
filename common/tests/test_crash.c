/*
 * test_crash.c: the ways a rank dies, each of which libxt must name.
 *   --mode segv     rank 1 writes through a NULL pointer in crash_here()
 *   --mode mpierr   rank 0 sends to rank 99, which does not exist
 *   --mode abort    rank 1 calls MPI_Abort(comm, 7)
 *   --mode exit     rank 1 calls exit(3) before MPI_Finalize
 *   --mode heap     rank 1 writes over the 8 bytes before a malloc'd block (its
 *                   size, to glibc) and frees it: glibc aborts the rank
 */
#include "xt_harness.h"

#include <stdlib.h>
#include <string.h>

void crash_here(int *p);
void crash_here(int *p)
{
    p[1] = 42;
}

/* Fills n bytes from p + at: out of line and volatile, so that the compiler neither warns about
 * the bounds it breaks nor drops the stores. */
__attribute__((noinline)) void scribble(char *p, long at, long n);
void scribble(char *p, long at, long n)
{
    volatile char *q = p + at;
    for (long i = 0; i < n; i++)
        q[i] = 0x41;
}

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    const char *mode = xt_arg_str("mode", "segv");
    int rank = xt_rank(), x = 1;
    volatile int *nowhere = NULL;
    if (strcmp(mode, "segv") == 0 && rank == 1)
        crash_here((int *)nowhere);
    if (strcmp(mode, "mpierr") == 0 && rank == 0)
        MPI_Send(&x, 1, MPI_INT, 99, 0, MPI_COMM_WORLD);
    if (strcmp(mode, "abort") == 0 && rank == 1)
        MPI_Abort(MPI_COMM_WORLD, 7);
    if (strcmp(mode, "exit") == 0 && rank == 1)
        exit(3);
    if (strcmp(mode, "heap") == 0 && rank == 1) {
        char *block = malloc(24);
        scribble(block, -8, 8);
        free(block);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    xt_finalize();
    return 0;
}
