/*
 * test_pmpi.c: the PMPI counters against a known sequence of calls on 2 ranks.
 * Rank 0 sends, rank 1 receives, both take part in a collective; each rank
 * checks its own counts and writes them (--out) for the self-test to read.
 * First, on their own (the counters are reset after them): all-gathers with
 * MPI_IN_PLACE, whose send count and type MPI ignores; the rank's own block,
 * already in the receive buffer, counts as what it sends.
 */
#include "xt_harness.h"

#include <stdio.h>
#include <string.h>

static int failures;

static void expect(const char *fn, long calls, long msent, long mrecv, long bsent, long brecv)
{
    xt_mpi_stats s = xt_mpi_stats_get(fn);
    if (s.calls != calls || s.msgs_sent != msent || s.msgs_recv != mrecv || s.bytes_sent != bsent ||
        s.bytes_recv != brecv) {
        printf("FAIL rank %d %s: calls %ld msgs %ld/%ld bytes %ld/%ld, expected %ld %ld/%ld "
               "%ld/%ld\n",
               xt_rank(), fn ? fn : "(all)", s.calls, s.msgs_sent, s.msgs_recv, s.bytes_sent,
               s.bytes_recv, calls, msent, mrecv, bsent, brecv);
        failures++;
    }
}

/* MPI_IN_PLACE all-gathers, with a send count and type MPI must ignore. */
static void in_place_gathers(MPI_Comm comm, int rank)
{
    int all[16] = {0}, counts[2] = {2, 5}, displs[2] = {0, 2}, mine[3] = {1, 2, 3};
    MPI_Request req;

    xt_mpi_stats_reset();
    MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 3, MPI_INT, comm);
    MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, comm);
    MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, 3, MPI_INT, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all, counts, displs, MPI_INT, comm, &req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    /* Not in place: the send count and type are what is sent, as before. */
    MPI_Allgather(mine, 3, MPI_INT, all, 3, MPI_INT, comm);
    expect("MPI_Allgather", 2, 0, 0, 12 + 12, 24 + 24);         /* 3 ints each time */
    expect("MPI_Iallgather", 1, 0, 0, 12, 24);                  /* in place: 3 ints */
    expect("MPI_Allgatherv", 1, 0, 0, 4 * counts[rank], 4 * 7); /* in place: counts[rank] */
    expect("MPI_Iallgatherv", 1, 0, 0, 4 * counts[rank], 4 * 7);
}

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    MPI_Comm comm = MPI_COMM_WORLD;
    int rank = xt_rank(), peer = 1 - rank;
    int ints[20] = {0};
    double dbl[5] = {0}, red[2] = {1, 2}, out[2];
    float f3[3] = {1, 2, 3}, g3[3];
    MPI_Request req[2];

    in_place_gathers(comm, rank);
    xt_mpi_stats_reset();
    if (rank == 0) {
        MPI_Send(ints, 10, MPI_INT, 1, 0, comm);            /* 40 B */
        MPI_Isend(dbl, 5, MPI_DOUBLE, 1, 1, comm, &req[0]); /* 40 B */
        MPI_Wait(&req[0], MPI_STATUS_IGNORE);
        MPI_Send(ints, 3, MPI_INT, MPI_PROC_NULL, 0, comm); /* nothing */
    } else {
        MPI_Recv(ints, 20, MPI_INT, 0, 0, comm, MPI_STATUS_IGNORE); /* 40 B arrive */
        MPI_Status st[1]; /* a real array: the statuses the caller asked for stay intact */
        MPI_Irecv(dbl, 5, MPI_DOUBLE, 0, 1, comm, &req[0]);
        MPI_Waitall(1, req, st);
        if (st[0].MPI_SOURCE != 0 || st[0].MPI_TAG != 1) {
            printf("FAIL rank 1: MPI_Waitall status says source %d tag %d\n", st[0].MPI_SOURCE,
                   st[0].MPI_TAG);
            failures++;
        }
        MPI_Recv(ints, 3, MPI_INT, MPI_PROC_NULL, 0, comm, MPI_STATUS_IGNORE);
    }
    MPI_Sendrecv(f3, 3, MPI_FLOAT, peer, 2, g3, 3, MPI_FLOAT, peer, 2, comm, MPI_STATUS_IGNORE);
    MPI_Bcast(ints, 4, MPI_INT, 0, comm);
    MPI_Allreduce(red, out, 2, MPI_DOUBLE, MPI_SUM, comm);
    MPI_Reduce_local(ints, ints + 4, 3, MPI_INT, MPI_SUM);

    if (rank == 0) {
        expect("MPI_Send", 2, 1, 0, 40, 0);
        expect("MPI_Isend", 1, 1, 0, 40, 0);
        expect("MPI_Wait", 1, 0, 0, 0, 0);
        expect("MPI_Bcast", 1, 0, 0, 16, 0);
    } else {
        expect("MPI_Recv", 2, 0, 1, 0, 40);
        expect("MPI_Irecv", 1, 0, 1, 0, 40); /* counted at its completion, in MPI_Waitall */
        expect("MPI_Waitall", 1, 0, 0, 0, 0);
        expect("MPI_Bcast", 1, 0, 0, 0, 16);
    }
    expect("MPI_Sendrecv", 1, 1, 1, 12, 12);
    expect("MPI_Allreduce", 1, 0, 0, 16, 16);
    expect("MPI_Reduce_local", 1, 0, 0, 0, 0);
    expect(NULL, 8, rank == 0 ? 3 : 1, rank == 0 ? 1 : 3,
           rank == 0 ? 40 + 40 + 12 + 16 + 16 : 12 + 16,
           rank == 0 ? 12 + 16 : 40 + 40 + 12 + 16 + 16);
    printf(failures ? "pmpi rank %d: %d failures\n" : "pmpi rank %d: ok\n", rank, failures);
    xt_finalize();
    return failures ? 1 : 0;
}
