/*
 * p2p_probe.c: receiving a message whose length the receiver does not know.
 * docs/lc1_basic.md#p2p_probe
 *
 * A receive needs a buffer, and a buffer needs a size. When only the sender
 * knows it (a variable-length list of tokens, a sparse gradient), the
 * receiver can ask MPI about the next matching message without receiving it:
 *
 *     MPI_Probe(src, tag, comm, &status)     blocks until a message matches;
 *     MPI_Get_count(&status, MPI_FLOAT, &n)  its length, in floats;
 *     malloc n floats, then MPI_Recv exactly that message
 *     (source and tag from the status, in case they were wildcards).
 *
 * A message of 0 elements is a message like any other: it must be received,
 * or its sender may wait for ever.
 *
 * The alternative is two messages, the length and then the payload (as in
 * fun_all2all_scratch): one more latency, but the receiver can post its
 * receive early. MPI_Mprobe / MPI_Mrecv do the same as probe + receive but
 * remove the message from matching at the probe, which matters when several
 * threads receive on one communicator.
 *
 * Cost: the probe moves no payload; one message of 4 n bytes, alpha + 4 n beta.
 */
#include "xt.h"

#include <stdint.h>
#include <stdlib.h>

int recv_any_size(float **buf, int src, MPI_Comm comm)
{
    /*
     * TODO: receive src's next message into a new *buf; return its length.
     *   Any tag, any number of floats, 0 included (it must still be received). The length must
     *   come from a probe (MPI_Probe or MPI_Mprobe family). *buf: xt_malloc'd, the caller frees it.
     */
    XT_TODO("receive src's next message into a new *buf; return its length.", buf, src, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/p2p_probe.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
