/*
 * p2p.c: blocking point-to-point messages, passed down a chain.
 * docs/lc1_basic.md#p2p
 *
 * Rank 0 sends its buffer to rank 1. Every other rank receives from the rank
 * before it, doubles every element and, unless it is the last, sends the
 * result on. Rank k ends up holding x * 2^k, where x is rank 0's buffer.
 *
 *     r0 ---x---> r1 ---2x---> r2 ---4x---> r3
 *
 * MPI_Send(buf, count, type, dest, tag, comm) returns once `buf` may be
 * reused; MPI_Recv(buf, count, type, src, tag, comm, status) returns once
 * the message is in `buf`. A receive matches a send by communicator, source
 * and tag, and `count` is the most it accepts, not what must arrive.
 *
 * Cost: np-1 messages of count floats, one after the other, so the chain
 * takes (np-1)(alpha + 4 count beta): latency alpha per hop, beta per byte.
 */
#include "xt.h"

void chain_pass(float *buf, int count, MPI_Comm comm)
{
    /*
     * TODO: pass buf from rank 0 down the chain, doubling at every hop.
     *   Afterwards rank k's buf is rank 0's x * 2^k, bit-exact; np = 1 and count = 0 are graded.
     *   Point-to-point on comm only: a rank below np-1 sends one message of count floats, to
     *   rank+1; the last rank sends none.
     */
    XT_TODO("pass buf from rank 0 down the chain, doubling at every hop.", buf, count, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/p2p.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
