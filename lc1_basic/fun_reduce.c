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
    XT_TODO("linear reduce of all sends into root's recv.", send, recv, count, dt, op, root, comm);
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
    XT_TODO("binomial-tree reduce into root's recv.", send, recv, count, dt, op, root, comm);
}

/* Only the root has a result; the other ranks pass NULL, as MPI_Reduce allows. */
static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    int root = (int)xt_case_int(c, "root"), rank;
    MPI_Comm_rank(xt_case_comm(c), &rank);
    void *y = rank == root ? xt_case_alloc(c, "recv", x.count, x.dtype) : NULL;
    if (xt_case_is(c, "reduce_linear"))
        reduce_linear(x.data, y, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c), root,
                      xt_case_comm(c));
    else
        reduce_binomial(x.data, y, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c), root,
                        xt_case_comm(c));
    if (rank == root)
        xt_case_output(c, "y", y, x.dtype, x.count);
}

/* Rank r holds 10 r + i at element i; sum to the last rank (--root R). */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int root = (int)xt_arg_int("root", np - 1);
    int x[4], y[4];
    for (int i = 0; i < 4; i++)
        x[i] = 10 * rank + i;
    xt_print_buffer_ordered(comm, "send:                 ", x, 4, MPI_INT);
    reduce_binomial(x, rank == root ? y : NULL, 4, MPI_INT, MPI_SUM, root, comm);
    xt_print_buffer_at(comm, root, "reduce_binomial sum:  ", y, 4, MPI_INT);
    reduce_linear(x, rank == root ? y : NULL, 4, MPI_INT, MPI_SUM, root, comm);
    xt_print_buffer_at(comm, root, "reduce_linear sum:    ", y, 4, MPI_INT);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
