/*
 * fun_gather.c: gather to any root, and all-gather around a ring.
 * docs/lc1_basic.md#fun_gather
 *
 * Every rank contributes a block of `count` elements. Afterwards `recv` holds
 * the np blocks in rank order, block i from rank i: at the root only for the
 * gather (elsewhere `recv` may be NULL, as in MPI_Gather), at every rank for
 * the all-gather.
 *
 * Linear gather: every other rank sends its block to the root, which
 * receives block i from rank i straight into its place and copies its own.
 * The root receives np-1 messages in a row: (np-1)(alpha + n beta), n the
 * bytes of one block.
 *
 * Ring all-gather: np-1 steps around the ring r -> r+1. At step s rank r
 * sends block r-s to the right (its own first, then what it has just
 * received) and receives block r-s-1 from the left:
 *
 *     np = 4, the block rank r sends at step s:
 *              r0   r1   r2   r3
 *     s = 0    b0   b1   b2   b3      its own
 *     s = 1    b3   b0   b1   b2      the one received at step 0
 *     s = 2    b2   b3   b0   b1      (after it, every rank holds b0..b3)
 *
 * Every rank sends exactly np-1 messages of one block, (np-1) n bytes, to
 * one neighbour: (np-1)(alpha + n beta), the least bandwidth any all-gather
 * can use, since each rank must receive (np-1) n bytes.
 */
#include "xt.h"

#include <stdlib.h>
#include <string.h>

void gather_linear(const void *send, void *recv, int count, MPI_Datatype dt, int root,
                   MPI_Comm comm)
{
    /*
     * TODO: gather every rank's block into the root's recv.
     *   Block i (rank i's count elements) goes to recv + i * count; any root and dt, count 0;
     *   exact. recv is NULL except at the root; blocks arrive in any order (graded highest rank
     *   first). Point-to-point only: every other rank sends one message of count elements to
     *   the root, which sends nothing and receives exactly one from each.
     */
    // BEGIN SOLUTION
    int rank, np, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Type_size(dt, &size);
    if (rank != root) {
        MPI_Send(send, count, dt, root, 0, comm);
        return;
    }
    size_t block = (size_t)count * (size_t)size;
    char *out = recv;
    memcpy(out + (size_t)root * block, send, block);
    for (int r = 0; r < np; r++)
        if (r != root)
            MPI_Recv(out + (size_t)r * block, count, dt, r, 0, comm, MPI_STATUS_IGNORE);
    // END SOLUTION
}

void allgather_ring(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Comm comm)
{
    /*
     * TODO: ring all-gather of every rank's block into recv.
     *   On every rank, recv + i * count = rank i's send (np * count elements); any dt, count 0;
     *   exact; send is const. Point-to-point only: every rank sends exactly np-1 messages of
     *   count elements each, all to one neighbour (always rank+1, or always rank-1).
     */
    // BEGIN SOLUTION
    int rank, np, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Type_size(dt, &size);
    size_t block = (size_t)count * (size_t)size;
    char *out = recv;
    memcpy(out + (size_t)rank * block, send, block);
    int right = (rank + 1) % np, left = (rank - 1 + np) % np;
    for (int s = 0; s < np - 1; s++) {
        int sent = (rank - s + np) % np, received = (rank - s - 1 + np) % np;
        MPI_Sendrecv(out + (size_t)sent * block, count, dt, right, 0,
                     out + (size_t)received * block, count, dt, left, 0, comm, MPI_STATUS_IGNORE);
    }
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_gather.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
