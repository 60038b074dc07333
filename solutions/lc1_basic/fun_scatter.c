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
 * Every rank reads the group's np blocks, for their type and size; only the
 * root passes them, the others pass NULL, as MPI_Scatter allows.
 */
static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int root = (int)xt_case_int(c, "root"), rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    xt_array x = xt_case_input_const(c, "x");
    int count = (int)(x.count / np);
    void *y = xt_case_alloc(c, "recv", count, x.dtype);
    scatter_linear(rank == root ? x.data : NULL, y, count, xt_dtype_mpi(x.dtype), root, comm);
    xt_case_output(c, "y", y, x.dtype, count);
}

/* The root holds 0 1 10 11 20 21 ...; rank i gets 10 i, 10 i + 1 (--root R). */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int root = (int)xt_arg_int("root", np - 1);
    int *x = NULL, y[2] = {-1, -1};
    if (rank == root) {
        x = xt_malloc(sizeof(int) * 2 * (size_t)np);
        for (int i = 0; i < 2 * np; i++)
            x[i] = 10 * (i / 2) + i % 2;
    }
    xt_print_buffer_at(comm, root, "send:            ", x, 2 * np, MPI_INT);
    scatter_linear(x, y, 2, MPI_INT, root, comm);
    xt_print_buffer_ordered(comm, "scatter_linear:  ", y, 2, MPI_INT);
    free(x);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
