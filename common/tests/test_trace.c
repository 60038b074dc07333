/*
 * test_trace.c: the timeline trace, checked by the self-test. Every rank
 * names a range ("step \"1\"", a quote to escape) and passes a value around
 * the ring inside it; run with --trace=FILE.
 */
#include "xt_harness.h"

static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int v = rank, got = -1;
    xt_trace_begin("step \"1\"");
    MPI_Sendrecv(&v, 1, MPI_INT, (rank + 1) % np, 0, &got, 1, MPI_INT, (rank - 1 + np) % np, 0,
                 comm, MPI_STATUS_IGNORE);
    xt_trace_end();
    xt_trace_begin("left open");
    MPI_Barrier(comm);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, NULL, demo);
}
