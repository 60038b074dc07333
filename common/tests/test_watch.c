/*
 * test_watch.c: a demo's step view of a ring all-gather, checked by the
 * self-test: --mode=blocking exchanges with MPI_Sendrecv, --mode=nonblocking
 * posts MPI_Irecv before MPI_Isend and waits for both. The two must print
 * the same steps: a receive belongs to the step in which it completes, and
 * the buffer shows it only from then on. --mode=values passes a pair of its
 * own around the ring instead, which xt_watch_values shows by its values.
 */
#include "xt_harness.h"

#include <string.h>

static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int nonblocking = strcmp(xt_arg_str("mode", "blocking"), "nonblocking") == 0;
    int buf[8] = {0}, counts[8];
    for (int i = 0; i < np; i++)
        counts[i] = 1;
    buf[rank] = 10 * (rank + 1);
    xt_watch_begin(buf, MPI_INT, counts, np);
    int right = (rank + 1) % np, left = (rank - 1 + np) % np;
    if (strcmp(xt_arg_str("mode", "blocking"), "values") == 0) {
        int pair[2] = {rank, 10 * rank}, got[2];
        xt_watch_values(2);
        for (int s = 0; s < np - 1; s++) {
            MPI_Sendrecv(pair, 2, MPI_INT, right, 0, got, 2, MPI_INT, left, 0, comm,
                         MPI_STATUS_IGNORE);
            pair[0] = got[0];
            pair[1] = got[1];
        }
        xt_watch_print(comm, NULL);
        return;
    }
    for (int s = 0; s < np - 1; s++) {
        int out = (rank - s + np) % np, in = (rank - s - 1 + np) % np;
        if (nonblocking) {
            MPI_Request rq[2];
            MPI_Irecv(&buf[in], 1, MPI_INT, left, 0, comm, &rq[0]);
            MPI_Isend(&buf[out], 1, MPI_INT, right, 0, comm, &rq[1]);
            MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
        } else {
            MPI_Sendrecv(&buf[out], 1, MPI_INT, right, 0, &buf[in], 1, MPI_INT, left, 0, comm,
                         MPI_STATUS_IGNORE);
        }
    }
    xt_watch_print(comm, NULL);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, NULL, demo);
}
