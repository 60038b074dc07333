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
    // BEGIN SOLUTION
    MPI_Status status;
    MPI_Probe(src, MPI_ANY_TAG, comm, &status);
    int count;
    MPI_Get_count(&status, MPI_FLOAT, &count);
    *buf = xt_malloc(sizeof(float) * (size_t)count);
    MPI_Recv(*buf, count, MPI_FLOAT, status.MPI_SOURCE, status.MPI_TAG, comm, MPI_STATUS_IGNORE);
    return count;
    // END SOLUTION
}

/*
 * Rank r sends its payload to r+1 (mod np) with tag 100 + r and receives from
 * r-1 with recv_any_size. The send is nonblocking: under strict send mode a
 * blocking send would wait for a receive that comes only after it.
 */
static int exchange(const float *payload, int count, float **got, MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    MPI_Request req;
    MPI_Isend(payload, count, MPI_FLOAT, (rank + 1) % np, 100 + rank, comm, &req);
    int n = recv_any_size(got, (rank - 1 + np) % np, comm);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    return n;
}

static void run_case(xt_case *c)
{
    xt_array x = xt_case_input_const(c, "x");
    float *y = NULL;
    int n = exchange(x.data, (int)x.count, &y, xt_case_comm(c));
    int64_t ret = n;
    xt_case_output(c, "ret", &ret, XT_I64, 1);
    xt_case_output(c, "y", y, XT_F32, n);
    free(y);
}

/* Rank r's payload: (2 r) % 5 floats, 10 r + i; rank 0's is empty. */
static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    float payload[4];
    int count = (2 * rank) % 5;
    for (int i = 0; i < count; i++)
        payload[i] = (float)(10 * rank + i);
    xt_print_buffer_ordered(comm, "sends to the right:   ", payload, count, MPI_FLOAT);
    float *got = NULL;
    int n = exchange(payload, count, &got, comm);
    char text[256];
    xt_format_buffer(text, sizeof text, got, n, MPI_FLOAT);
    xt_printf_ordered(comm, "got %d from the left: %s", n, text);
    free(got);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
