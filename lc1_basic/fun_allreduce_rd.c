/*
 * fun_allreduce_rd.c: all-reduce by recursive doubling, for any number of ranks.
 * docs/lc1_basic.md#fun_allreduce_rd
 *
 * In place: afterwards every rank's `buf` holds the element-wise reduction of
 * all ranks' buffers. In round k every rank swaps its whole buffer with rank
 * r xor 2^k and reduces what it gets into its own; after log2 p rounds each
 * rank has heard, directly or through a partner, from all p ranks.
 *
 * That needs p to be a power of two. With p2 the largest power of two <= np,
 * the np - p2 ranks r >= p2 first fold their buffer into rank r - p2, sit out
 * the rounds, and get the result back at the end:
 *
 *     np = 6, p2 = 4
 *     fold in    r4 -> r0    r5 -> r1
 *     round 0    r0 <-> r1   r2 <-> r3      (partner r xor 1)
 *     round 1    r0 <-> r2   r1 <-> r3      (partner r xor 2)
 *     fold out   r0 -> r4    r1 -> r5
 *
 * Cost: every message carries the whole buffer (n bytes). A rank below p2
 * sends log2(p2) messages, plus one if it has a folded partner; a folded rank
 * sends one. Time log2(p) (alpha + n beta) for a power of two, two steps more
 * otherwise: few messages, so it wins for small buffers; the ring wins for
 * large ones.
 */
#include "xt.h"

#include <stdio.h>
#include <stdlib.h>

void allreduce_rd(void *buf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    /*
     * TODO: recursive-doubling all-reduce of buf, in place, over comm.
     *   Any built-in dt and op: float sum/prod within a rounding bound (any order), all else
     *   exact. Any np, not only powers of two; count 0 included; buf is guarded.
     *   Point-to-point only (MPI_Reduce_local, a local call, is allowed). With p2 = the
     *   largest power of two <= np, rank r sends exactly: 1 message if r >= p2 (it folds
     *   into rank r - p2 and gets the result back from it); otherwise log2(p2), plus 1 if
     *   rank r + p2 exists. Every message is the whole buffer, count elements (with count
     *   0 a rank may send fewer).
     */
    XT_TODO("recursive-doubling all-reduce of buf, in place, over comm.", buf, count, dt, op, comm);
}

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input(c, "x");
    allreduce_rd(x.data, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c), xt_case_comm(c));
    xt_case_output(c, "x", x.data, x.dtype, x.count);
}

/* Rank r holds 10 r + i at element i; all-reduce with sum. */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int count = (int)xt_arg_int("count", 4);
    int *x = xt_malloc(sizeof(int) * (size_t)count);
    for (int i = 0; i < count; i++)
        x[i] = 10 * rank + i;
    int p2 = 1;
    while (2 * p2 <= np)
        p2 *= 2;
    char plan[256] = "", *p = plan, *end = plan + sizeof plan;
    if (rank >= p2) {
        snprintf(p, (size_t)(end - p), "sends to r%d, gets the result back", rank - p2);
    } else {
        if (rank + p2 < np)
            p += snprintf(p, (size_t)(end - p), "takes in r%d, ", rank + p2);
        p += snprintf(p, (size_t)(end - p), "swaps with");
        for (int mask = 1; mask < p2; mask <<= 1)
            p += snprintf(p, (size_t)(end - p), " r%d", rank ^ mask);
        if (p2 == 1)
            p += snprintf(p, (size_t)(end - p), " nobody");
        if (rank + p2 < np)
            snprintf(p, (size_t)(end - p), ", sends the result to r%d", rank + p2);
    }
    xt_printf_ordered(comm, "%s\n", plan);
    xt_print_buffer_ordered(comm, "before: ", x, count, MPI_INT);
    allreduce_rd(x, count, MPI_INT, MPI_SUM, comm);
    xt_print_buffer_ordered(comm, "after:  ", x, count, MPI_INT);
    free(x);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
