/*
 * p2p_async.c: nonblocking messages, many in flight at once.
 * docs/lc1_basic.md#p2p_async
 *
 * Every rank but the last sends k messages of count floats (msgs holds them
 * back to back) to the last rank, which adds up everything it receives:
 * afterwards the last rank's sum[j] is the sum of element j over all
 * (np-1) k messages. The other ranks do not touch sum; at np = 1 nothing
 * arrives and the last rank's sum is all zeros.
 *
 *     r0: Isend m0 m1 m2 --\
 *     r1: Isend m0 m1 m2 ----> r3: Irecv x 9 into 9 buffers, Waitall, add
 *     r2: Isend m0 m1 m2 --/
 *
 * MPI_Isend / MPI_Irecv return at once with a request; the transfer goes on
 * while the program does something else, and MPI_Wait / MPI_Waitall /
 * MPI_Test complete it. Until then the buffer belongs to MPI: a send buffer
 * must not be changed, a receive buffer not read or reused. Hence one receive
 * buffer per message, not one buffer for all.
 *
 * Cost: each sender posts k messages of n = 4 count bytes without waiting
 * for the previous ones, so the latencies overlap; the last rank's link
 * carries everything: about alpha + (np-1) k n beta, against
 * (np-1) k (alpha + n beta) for blocking sends received one by one.
 */
#include "xt.h"

#include <stdlib.h>

void gather_async(const float *msgs, int k, int count, float *sum, MPI_Comm comm)
{
    /*
     * TODO: the last rank sums the k messages every other rank sends.
     *   Rank np-1: sum[j] = element j added over the (np-1) k messages it receives (its own msgs
     *   excluded), written over sum's old values; zeros at np = 1. Other ranks leave sum alone.
     *   Any summation order (graded within a float rounding bound).
     *   Nonblocking calls only: MPI_Isend/MPI_Issend, MPI_Irecv, MPI_Wait*, MPI_Test*. Each rank
     *   below np-1 sends exactly k messages, message i = the count floats at msgs + i*count, all
     *   to rank np-1; rank np-1 sends none. No buffer may be given to a call while a pending
     *   request owns it, and every request completes before the function returns.
     */
    // BEGIN SOLUTION
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int last = np - 1;
    if (rank != last) {
        MPI_Request *reqs = xt_malloc(sizeof(MPI_Request) * (size_t)k);
        for (int i = 0; i < k; i++)
            MPI_Isend(msgs + (size_t)i * count, count, MPI_FLOAT, last, i, comm, &reqs[i]);
        MPI_Waitall(k, reqs, MPI_STATUSES_IGNORE);
        free(reqs);
        return;
    }
    int n = last * k; /* messages to receive */
    float *bufs = xt_malloc(sizeof(float) * (size_t)n * (size_t)count);
    MPI_Request *reqs = xt_malloc(sizeof(MPI_Request) * (size_t)n);
    for (int src = 0; src < last; src++)
        for (int i = 0; i < k; i++) {
            int m = src * k + i;
            MPI_Irecv(bufs + (size_t)m * count, count, MPI_FLOAT, src, i, comm, &reqs[m]);
        }
    MPI_Waitall(n, reqs, MPI_STATUSES_IGNORE);
    for (int j = 0; j < count; j++)
        sum[j] = 0.0f;
    for (int m = 0; m < n; m++)
        for (int j = 0; j < count; j++)
            sum[j] += bufs[(size_t)m * count + j];
    free(reqs);
    free(bufs);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/p2p_async.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
