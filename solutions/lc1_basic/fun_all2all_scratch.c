/*
 * fun_all2all_scratch.c: all-to-all-v from point-to-point messages.
 * docs/lc1_basic.md#fun_all2all_scratch
 *
 * Rank r's `send` holds np blocks back to back, block j (sendcounts[j]
 * elements, possibly 0) for rank j. Afterwards rank r holds, in a buffer it
 * allocates, the blocks every rank sent it, in source-rank order; recvcounts[i]
 * says how many came from rank i. The receiver does not know those sizes in
 * advance, so they travel first:
 *
 *   1. sizes:    rank r tells rank j sendcounts[j];
 *   2. payloads: rank r sends block j to rank j, receives block r of every j.
 *
 * Both in pairwise order: at step k = 1 .. np-1 rank r sends to r+k and
 * receives from r-k (mod np), so every step pairs each rank with exactly one
 * sender and one receiver and no rank is swamped. Its own block is copied.
 *
 *     np = 4, step k=1      step k=2      step k=3
 *     0->1 1->2 2->3 3->0   0->2 1->3 ..  0->3 1->0 ..
 *
 * Cost: 2(np-1) messages per rank: np-1 of one int, np-1 payloads carrying
 * everything but its own block.
 */
#include "xt.h"

#include <stdlib.h>
#include <string.h>

int alltoallv_scratch(const void *send, const int *sendcounts, MPI_Datatype dt, void **recv,
                      int *recvcounts, MPI_Comm comm)
{
    /*
     * TODO: sizes first, then payloads, pairwise.
     *   Point-to-point only. Block j of send (sendcounts[j] elements of dt, maybe 0) goes to
     *   rank j. Set recvcounts[i] (np entries) to what rank i sent you; *recv = a buffer you
     *   malloc (the caller frees it; NULL is fine when nothing arrives) holding the blocks
     *   in source-rank order; return the total number of elements received.
     *   Rank r's sends, checked in order: np-1 sizes, one int (4 B) each, to r+1, r+2, ...,
     *   r+np-1 (mod np); then the payloads in the same order, an empty one may be skipped.
     *   The own block is copied, never sent. Return value, recvcounts and data: exact.
     */
    // BEGIN SOLUTION
    int rank, np, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Type_size(dt, &size);
    recvcounts[rank] = sendcounts[rank];
    for (int k = 1; k < np; k++) {
        int to = (rank + k) % np, from = (rank - k + np) % np;
        MPI_Sendrecv(&sendcounts[to], 1, MPI_INT, to, 0, &recvcounts[from], 1, MPI_INT, from, 0,
                     comm, MPI_STATUS_IGNORE);
    }
    int *sstart = xt_malloc(sizeof(int) * (size_t)np),
        *rstart = xt_malloc(sizeof(int) * (size_t)np);
    int stotal = 0, rtotal = 0;
    for (int i = 0; i < np; i++) {
        sstart[i] = stotal;
        stotal += sendcounts[i];
        rstart[i] = rtotal;
        rtotal += recvcounts[i];
    }
    const char *in = send;
    char *out = xt_malloc((size_t)rtotal * (size_t)size);
    memcpy(out + (size_t)rstart[rank] * size, in + (size_t)sstart[rank] * size,
           (size_t)sendcounts[rank] * (size_t)size);
    for (int k = 1; k < np; k++) {
        int to = (rank + k) % np, from = (rank - k + np) % np;
        MPI_Sendrecv(in + (size_t)sstart[to] * size, sendcounts[to], dt, to, 1,
                     out + (size_t)rstart[from] * size, recvcounts[from], dt, from, 1, comm,
                     MPI_STATUS_IGNORE);
    }
    free(sstart);
    free(rstart);
    *recv = out;
    return rtotal;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_all2all_scratch.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
