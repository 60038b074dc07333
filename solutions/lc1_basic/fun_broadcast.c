/*
 * fun_broadcast.c: broadcast from any root, linear and as a binomial tree.
 * docs/lc1_basic.md#fun_broadcast
 *
 * After the call every rank's `buf` holds the root's `count` elements.
 *
 * Linear: the root sends to every other rank in turn. np-1 messages leave
 * one rank, one after the other: (np-1)(alpha + n beta) for n bytes.
 *
 * Binomial tree: in every round, each rank that has the data sends it to one
 * that does not, so the number of ranks holding it doubles. With ranks
 * renumbered relative to the root (v = rank - root mod np):
 *
 *     round 1:  v0 -> v4                 (the highest power of two < np first)
 *     round 2:  v0 -> v2   v4 -> v6
 *     round 3:  v0 -> v1   v2 -> v3   v4 -> v5   v6 -> v7
 *
 * v receives from v minus its lowest set bit, then sends to v + m for every
 * power of two m below that bit. No rank sends more than ceil(log2 np)
 * messages: ceil(log2 np)(alpha + n beta) in all.
 */
#include "xt.h"

void bcast_linear(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    /*
     * TODO: linear broadcast: every rank's buf becomes the root's.
     *   Any root, any built-in dt, count 0 included; exact. Point-to-point only: the root sends
     *   at most np-1 messages and receives none; every other rank receives exactly one message
     *   and sends none.
     */
    // BEGIN SOLUTION
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    if (rank != root) {
        MPI_Recv(buf, count, dt, root, 0, comm, MPI_STATUS_IGNORE);
        return;
    }
    for (int r = 0; r < np; r++)
        if (r != root)
            MPI_Send(buf, count, dt, r, 0, comm);
    // END SOLUTION
}

void bcast_binomial(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm)
{
    /*
     * TODO: binomial-tree broadcast of the root's buf.
     *   Any root, any built-in dt, count 0 included; exact. Point-to-point only: no rank sends
     *   more than ceil(log2 np) messages; the root receives none, every other rank exactly one.
     *   The last rank receives by round ceil(log2 np), a rank's sends taking one round each.
     */
    // BEGIN SOLUTION
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int v = (rank - root + np) % np;
    int mask = 1;
    while (mask < np) {
        if (v & mask) {
            MPI_Recv(buf, count, dt, (v - mask + root) % np, 0, comm, MPI_STATUS_IGNORE);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (v + mask < np)
            MPI_Send(buf, count, dt, (v + mask + root) % np, 0, comm);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_broadcast.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
