/*
 * fun_ring_allreduce.c: ring all-reduce, the algorithm behind data-parallel training.
 * docs/lc1_basic.md#fun_ring_allreduce
 *
 * In place: afterwards every rank's `buf` holds the element-wise reduction of
 * all ranks' buffers. Cut the buffer into np chunks (the first count % np of
 * them one element longer) and go around the ring r -> r+1 twice:
 *
 *   reduce-scatter, np-1 steps: at step s rank r sends chunk (r-s) and folds
 *     the chunk (r-s-1) it receives into its own; each chunk gathers one more
 *     contribution per hop, and rank r ends owning the full chunk (r+1).
 *   all-gather, np-1 steps: the full chunks travel once around the ring; at
 *     step s rank r sends chunk (r+1-s) and stores the chunk (r-s) it receives.
 *
 *     np = 3, chunks a b c, rank r's part of chunk a written a_r:
 *             r0              r1              r2
 *     start   a0 b0 c0        a1 b1 c1        a2 b2 c2
 *     RS s=0  sends a0        sends b1        sends c2       (to the right)
 *             c: c0+c2        a: a1+a0        b: b2+b1
 *     RS s=1  sends c02       sends a01       sends b12
 *             b: b0+b12=B     c: c1+c02=C     a: a2+a01=A    (owned, full)
 *     AG s=0  sends B         sends C         sends A
 *             gets A          gets B          gets C
 *     AG s=1  sends A         sends B         sends C        (all hold A B C)
 *
 * Cost: 2(np-1) messages per rank of about count/np elements each, so every
 * rank sends 2 (np-1)/np count elements: about twice the buffer, whatever np
 * is. Latency grows with np, bandwidth does not.
 */
#include "xt.h"

#include <stdlib.h>

void ring_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm)
{
    /*
     * TODO: ring all-reduce of buf, in place, over comm.
     *   Any built-in dt and op: float sum/prod within a rounding bound (any order), all else
     *   exact. Any count and np: count 0, count < np (empty chunks), np not dividing count,
     *   np = 1. buf is guarded (no write past count elements); use comm, never MPI_COMM_WORLD.
     *   Point-to-point only (MPI_Reduce_local, a local call, is allowed), every request
     *   completed, always to the same neighbour. Per rank at most 2(np-1) messages and
     *   2(np-1) ceil(count/np) elements sent: chunks of at most ceil(count/np) elements (the
     *   lecture's cut: chunk i starts at i*(count/np) + min(i, count%np)).
     */
    XT_TODO("ring all-reduce of buf, in place, over comm.", buf, count, dt, op, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_ring_allreduce.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
