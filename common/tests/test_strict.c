/*
 * test_strict.c: two ranks both send first, then receive: the unsafe exchange.
 * With MPI's buffering (--no-strict) the small messages slip through; in strict
 * send mode MPI_Send waits for its receive, so this deadlocks every time and
 * the watchdog names both sends.
 */
#include "xt_harness.h"

#include <stdio.h>

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    int rank = xt_rank(), value = rank, got = -1;
    MPI_Send(&value, 1, MPI_INT, 1 - rank, 5, MPI_COMM_WORLD);
    MPI_Recv(&got, 1, MPI_INT, 1 - rank, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    printf("strict rank %d: exchange completed (strict send %s)\n", rank,
           xt_strict_send_enabled() ? "on" : "off");
    xt_finalize();
    return 0;
}
