/*
 * p2p_ring.c: shift a buffer one step around a ring, without deadlock.
 * docs/lc1_basic.md#p2p_ring
 *
 * Every rank sends `count` floats to its right neighbour (rank+1 mod np) and
 * receives as many from its left neighbour (rank-1 mod np):
 *
 *        +--> r0 --> r1 --> r2 --> r3 --+
 *        +------------------------------+
 *
 * If every rank calls MPI_Send first, every rank waits for a receive that no
 * one has posted yet: a cycle of waits, a deadlock. (MPI may buffer small
 * messages and hide it; the grader's strict send mode never buffers.)
 * Two ways out:
 *   ring_shift          even ranks send then receive, odd ranks receive then
 *                       send, so every cycle of waits is broken;
 *   ring_shift_sendrecv MPI_Sendrecv posts both halves at once and lets MPI
 *                       order them.
 *
 * Cost: one message of n = 4 count bytes per rank. With MPI_Sendrecv all of
 * them travel at once: alpha + n beta. With the even/odd order and sends that
 * wait for their receive, two phases when np is even, 2(alpha + n beta), and
 * three when np is odd, because ranks np-1 and 0 are both even neighbours.
 */
#include "xt.h"

#include <string.h>

void ring_shift(const float *send, float *recv, int count, MPI_Comm comm)
{
    /*
     * TODO: recv = the left neighbour's send, with MPI_Send/MPI_Recv.
     *   Right is rank+1 mod np, left rank-1 mod np; exact. MPI_Send and MPI_Recv are the only
     *   point-to-point calls allowed (no collective); at most one message per rank. Graded in
     *   strict send mode (an MPI_Send returns only once its receive is posted): the order must
     *   not deadlock at any np, np = 1 included, where the rank is its own neighbour.
     */
    XT_TODO("recv = the left neighbour's send, with MPI_Send/MPI_Recv.", send, recv, count, comm);
}

void ring_shift_sendrecv(const float *send, float *recv, int count, MPI_Comm comm)
{
    /*
     * TODO: the same shift as ring_shift, with one MPI_Sendrecv.
     *   Exactly one MPI_Sendrecv per rank when np > 1, and no other point-to-point call nor
     *   collective; at most one message per rank. At np = 1 a copy is fine too.
     */
    XT_TODO("the same shift as ring_shift, with one MPI_Sendrecv.", send, recv, count, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/p2p_ring.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
