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
    XT_TODO("gather every rank's block into the root's recv.", send, recv, count, dt, root, comm);
}

void allgather_ring(const void *send, void *recv, int count, MPI_Datatype dt, MPI_Comm comm)
{
    /*
     * TODO: ring all-gather of every rank's block into recv.
     *   On every rank, recv + i * count = rank i's send (np * count elements); any dt, count 0;
     *   exact; send is const. Point-to-point only: every rank sends exactly np-1 messages of
     *   count elements each, all to one neighbour (always rank+1, or always rank-1).
     */
    XT_TODO("ring all-gather of every rank's block into recv.", send, recv, count, dt, comm);
}

/*
 * Ranks enter gather_linear in reverse rank order, a few milliseconds apart,
 * so blocks reach the root highest rank first: a root that stores them in
 * order of arrival gets them wrong every time, not now and then.
 */
static void enter_highest_rank_first(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    xt_sleep(0.004 * (np - 1 - rank));
}

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    MPI_Comm comm = xt_case_comm(c);
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    long total = (long)np * x.count;
    if (xt_case_is(c, "gather_linear")) {
        int root = (int)xt_case_int(c, "root");
        /* Only the root has a result; the other ranks pass NULL, as MPI_Gather allows. */
        void *y = rank == root ? xt_case_alloc(c, "recv", total, x.dtype) : NULL;
        enter_highest_rank_first(comm);
        gather_linear(x.data, y, (int)x.count, xt_dtype_mpi(x.dtype), root, comm);
        if (rank == root)
            xt_case_output(c, "y", y, x.dtype, total);
    } else {
        void *y = xt_case_alloc(c, "recv", total, x.dtype);
        allgather_ring(x.data, y, (int)x.count, xt_dtype_mpi(x.dtype), comm);
        xt_case_output(c, "y", y, x.dtype, total);
    }
}

static const char *ring_phase(int step, int np)
{
    (void)step, (void)np;
    return "all-gather";
}

/*
 * Rank r contributes 10 r and 10 r + 1; gather to the last rank (--root R).
 * The ring's steps show each block travelling one hop per step; -1 marks a
 * block not received yet.
 */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int root = (int)xt_arg_int("root", np - 1);
    int x[2] = {10 * rank, 10 * rank + 1};
    int *y = xt_malloc(sizeof(int) * 2 * (size_t)np);
    xt_print_buffer_ordered(comm, "send:            ", x, 2, MPI_INT);
    gather_linear(x, rank == root ? y : NULL, 2, MPI_INT, root, comm);
    xt_print_buffer_at(comm, root, "gather_linear:   ", y, 2 * np, MPI_INT);
    for (int i = 0; i < 2 * np; i++)
        y[i] = -1;
    int *blocks = xt_malloc(sizeof(int) * (size_t)np);
    for (int i = 0; i < np; i++)
        blocks[i] = 2;
    xt_watch_begin(y, MPI_INT, blocks, np);
    allgather_ring(x, y, 2, MPI_INT, comm);
    xt_watch_print(comm, ring_phase);
    xt_print_buffer_ordered(comm, "allgather_ring:  ", y, 2 * np, MPI_INT);
    free(blocks);
    free(y);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
