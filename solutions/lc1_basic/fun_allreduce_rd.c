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
    // BEGIN SOLUTION
    int rank, np, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Type_size(dt, &size);
    int p2 = 1;
    while (2 * p2 <= np)
        p2 *= 2;
    if (rank >= p2) {
        MPI_Send(buf, count, dt, rank - p2, 0, comm);
        MPI_Recv(buf, count, dt, rank - p2, 2, comm, MPI_STATUS_IGNORE);
        return;
    }
    char *incoming = xt_malloc((size_t)count * (size_t)size);
    int folded = rank + p2 < np ? rank + p2 : -1;
    if (folded >= 0) {
        MPI_Recv(incoming, count, dt, folded, 0, comm, MPI_STATUS_IGNORE);
        MPI_Reduce_local(incoming, buf, count, dt, op);
    }
    for (int mask = 1; mask < p2; mask <<= 1) {
        int partner = rank ^ mask;
        MPI_Sendrecv(buf, count, dt, partner, 1, incoming, count, dt, partner, 1, comm,
                     MPI_STATUS_IGNORE);
        MPI_Reduce_local(incoming, buf, count, dt, op);
    }
    if (folded >= 0)
        MPI_Send(buf, count, dt, folded, 2, comm);
    free(incoming);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_allreduce_rd.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
