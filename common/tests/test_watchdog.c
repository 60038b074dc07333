/*
 * test_watchdog.c: three ranks that never finish, each in its own way.
 *   rank 0 blocks in MPI_Recv from rank 1 (tag 7), which never sends;
 *   rank 1 computes forever, outside MPI;
 *   rank 2 waits on a receive from rank 0 (tag 3) and a send to rank 0 (tag 4).
 * The watchdog must name all three and end the run.
 */
#include "xt_harness.h"

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    int rank = xt_rank();
    double buf[4] = {0};
    if (rank == 0) {
        MPI_Recv(buf, 4, MPI_DOUBLE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        volatile unsigned long spin = 0;
        for (;;)
            spin++;
    } else {
        MPI_Request r[2];
        MPI_Irecv(buf, 1, MPI_DOUBLE, 0, 3, MPI_COMM_WORLD, &r[0]);
        MPI_Isend(buf + 1, 2, MPI_DOUBLE, 0, 4, MPI_COMM_WORLD, &r[1]);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    xt_finalize();
    return 0;
}
