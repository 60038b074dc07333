/*
 * fun_reduce.c: reduce to any root, linear and as a binomial tree.
 * docs/lc1_basic.md#fun_reduce
 *
 * After the call the root's `recv` holds the element-wise reduction (sum,
 * max, ... any commutative op) of every rank's `send`. As in MPI_Reduce,
 * `recv` matters only at the root: the other ranks may pass NULL.
 *
 * Linear: every other rank sends its buffer to the root, which folds them in
 * one by one. The root receives np-1 messages in a row:
 * (np-1)(alpha + n beta + n gamma) for n bytes, gamma the time to combine a byte.
 *
 * Binomial tree: the broadcast tree of fun_broadcast.c with the arrows
 * reversed. With ranks renumbered relative to the root (v = rank - root mod np),
 * partial results flow towards v0 and halve in number every round:
 *
 *     round 1:  v1 -> v0   v3 -> v2   v5 -> v4   v7 -> v6
 *     round 2:  v2 -> v0              v6 -> v4
 *     round 3:  v4 -> v0
 *
 * v receives from v + m for every power of two m below its lowest set bit
 * (the root: below np), smallest first, while v + m < np, then sends its
 * partial result to v minus its lowest set bit. Every rank but the root sends
 * exactly one message of n bytes; none receives more than ceil(log2 np):
 * ceil(log2 np)(alpha + n beta + n gamma) in all.
 */
#include "xt.h"

#include <stdlib.h>
#include <string.h>

void reduce_linear(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, int root,
                   MPI_Comm comm)
{
    /*
     * TODO: linear reduce of all sends into root's recv.
     *   The root's recv = op over every rank's send, element-wise. Any root, any built-in dt and
     *   commutative op (MPI_Reduce_local is local and allowed); floats within the rounding bound
     *   of any order. recv is NULL except at the root; send is const. Point-to-point only: every
     *   other rank sends one message of count elements to the root, which sends nothing and
     *   receives exactly one from each.
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
    size_t bytes = (size_t)count * (size_t)size;
    memcpy(recv, send, bytes);
    char *incoming = xt_malloc(bytes);
    for (int r = 0; r < np; r++) {
        if (r == root)
            continue;
        MPI_Recv(incoming, count, dt, r, 0, comm, MPI_STATUS_IGNORE);
        MPI_Reduce_local(incoming, recv, count, dt, op);
    }
    free(incoming);
    // END SOLUTION
}

void reduce_binomial(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op, int root,
                     MPI_Comm comm)
{
    /*
     * TODO: binomial-tree reduce into root's recv.
     *   The result rules of reduce_linear (any root, dt, commutative op; floats within the
     *   rounding bound of any order; recv NULL except at the root; send const).
     *   Point-to-point only, and exactly this tree: with v = (rank - root) mod np, a rank
     *   receives one message from each child v + m (m a power of two below v's lowest set bit,
     *   for the root below np; only while v + m < np) and nothing else, then sends one message
     *   of count elements to its parent v - lowbit(v); the root sends nothing.
     */
    // BEGIN SOLUTION
    int rank, np, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Type_size(dt, &size);
    size_t bytes = (size_t)count * (size_t)size;
    int v = (rank - root + np) % np;
    char *partial = rank == root ? recv : xt_malloc(bytes);
    char *incoming = xt_malloc(bytes);
    memcpy(partial, send, bytes);
    for (int mask = 1; mask < np; mask <<= 1) {
        if (v & mask) {
            MPI_Send(partial, count, dt, (v - mask + root) % np, 0, comm);
            break;
        }
        if (v + mask < np) {
            MPI_Recv(incoming, count, dt, (v + mask + root) % np, 0, comm, MPI_STATUS_IGNORE);
            MPI_Reduce_local(incoming, partial, count, dt, op);
        }
    }
    free(incoming);
    if (rank != root)
        free(partial);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_reduce.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
