/*
 * fun_barrier.c: a barrier from point-to-point messages (dissemination).
 * docs/lc1_basic.md#fun_barrier
 *
 * No rank may leave the barrier before every rank has entered it. In round
 * k = 0, 1, ... each rank signals rank r + 2^k and waits for a signal from
 * rank r - 2^k (mod np); the signals carry no data. After round k a rank has
 * heard, directly or through a chain of signals, from the 2^(k+1) ranks
 * r, r-1, ..., r - 2^(k+1) + 1, so after ceil(log2 np) rounds it has heard
 * from all of them: everyone has arrived.
 *
 *     np = 5      r0    r1    r2    r3    r4
 *     round 0     ->r1  ->r2  ->r3  ->r4  ->r0     (distance 1)
 *     round 1     ->r2  ->r3  ->r4  ->r0  ->r1     (distance 2)
 *     round 2     ->r4  ->r0  ->r1  ->r2  ->r3     (distance 4)
 *     r0 hears from r4 in round 0; from r3, who had heard from r2, in
 *     round 1; from r1, who knew of r0 r4 r3, in round 2: from everyone.
 *
 * Unlike a tree (gather to a root, then release) no rank is special and
 * there is no release phase; unlike pairwise exchange (partner r xor 2^k)
 * np need not be a power of two.
 *
 * Cost: ceil(log2 np) messages of 0 bytes per rank, one per round, and as
 * many received: ceil(log2 np) alpha.
 */
#include "xt.h"

#include <stdio.h>

void barrier_dissemination(MPI_Comm comm)
{
    /*
     * TODO: dissemination barrier over comm, point-to-point only.
     *   No rank may return before every rank has entered (arrivals are staggered). Each
     *   rank sends and receives exactly ceil(log2 np) messages, all of count 0; np = 1: none.
     */
    XT_TODO("dissemination barrier over comm, point-to-point only.", comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_barrier.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
