/*
 * fun_scatter.c: scatter from any root, linear.
 * docs/lc1_basic.md#fun_scatter
 *
 * The root's `send` holds np blocks of `count` elements back to back.
 * Afterwards rank i's `recv` holds block i. As in MPI_Scatter, `send` matters
 * only at the root: the other ranks may pass NULL.
 *
 *     root's send:  [ b0 | b1 | b2 | b3 ]
 *                      |    |    |    |
 *                      v    v    v    v
 *                     r0   r1   r2   r3      (root = 2 keeps b2 with memcpy)
 *
 * The root sends block i to rank i, one message each, and copies its own
 * block: it never sends to itself. np-1 messages of n bytes (one block)
 * leave the root one after the other: (np-1)(alpha + n beta).
 */
#include "xt.h"

#include <stdlib.h>
#include <string.h>

void scatter_linear(const void *send, void *recv, int count, MPI_Datatype dt, int root,
                    MPI_Comm comm)
{
    /*
     * TODO: rank i's recv = block i of the root's send.
     *   Block i is the count elements at send + i * count; any root and dt, count 0; exact.
     *   send is NULL except at the root (const there). Point-to-point only: the root sends one
     *   message of count elements to each other rank and none to itself; every other rank sends
     *   nothing and receives exactly one, from the root.
     */
    // BEGIN SOLUTION
    int rank, np, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Type_size(dt, &size);
    if (rank != root) {
        MPI_Recv(recv, count, dt, root, 0, comm, MPI_STATUS_IGNORE);
        return;
    }
    size_t block = (size_t)count * (size_t)size;
    const char *in = send;
    for (int r = 0; r < np; r++)
        if (r != root)
            MPI_Send(in + (size_t)r * block, count, dt, r, 0, comm);
    memcpy(recv, in + (size_t)root * block, block);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_scatter.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
