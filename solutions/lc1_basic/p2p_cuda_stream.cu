/*
 * p2p_cuda_stream.cu: sending a device buffer through an MPI that cannot read GPU memory.
 * docs/lc1_basic.md#p2p_cuda_stream
 *
 * Debian's Open MPI is not CUDA-aware: MPI_Send needs host memory. So the
 * bytes are staged: device -> pinned host buffer (cudaMemcpyAsync on a side
 * stream) -> MPI -> pinned host buffer -> device. Done in one piece, the copy,
 * the message and the second copy run one after the other. Cut into chunks,
 * they overlap: the GPU's copy engine moves chunk i+1 while MPI carries chunk i.
 *
 *     send_device(d_buf, count, chunk, peer, comm)
 *         chunk i (elements i*chunk .. i*chunk+chunk-1, the last chunk shorter)
 *         leaves as one MPI_Send of MPI_FLOAT with tag 0; count 0 sends nothing
 *     recv_device(d_buf, count, chunk, peer, comm)
 *         the matching receives; on return d_buf holds the data
 *
 *     sender     copy engine   [D2H 0][D2H 1]       [D2H 2]
 *                MPI                  [send 0      ][send 1      ][send 2      ]
 *     receiver   MPI                  [recv 0      ][recv 1      ][recv 2      ]
 *                copy engine                        [H2D 0]       [H2D 1]       [H2D 2]
 *
 * Two pinned slots per side are enough: while MPI reads (or fills) one, the
 * copy engine fills (or empties) the other. An event recorded after each copy
 * tells the host when a slot's copy is done: MPI must not read a slot before
 * its device-to-host copy finished, nor overwrite one before its host-to-device
 * copy finished. Both functions expect d_buf to be ready when called (no
 * pending work on it) and leave it ready when they return.
 *
 * Cost: ceil(count/chunk) messages, 4 count bytes in all. With n = 4 count
 * bytes, c = 4 chunk bytes, alpha per message, beta per byte on the link and
 * gamma per byte of a PCIe copy:
 *     in one piece:  alpha + n (beta + 2 gamma)        (copy, send, copy)
 *     pipelined:     (n/c) alpha + n max(beta, gamma) + 2 c gamma
 * Fill and drain cost one chunk's copy each; in between, the slower of link
 * and copy sets the pace. Small chunks pay alpha often, large ones a long fill.
 */
#include "xt.h"

#include <stdlib.h>

// BEGIN SOLUTION
/* Two pinned slots, each with the event of the copy that last used it. */
typedef struct {
    cudaStream_t stream;
    float *slot[2];
    cudaEvent_t copied[2];
} staging;

static staging staging_open(int slot_len)
{
    staging st;
    XT_CUDA_CHECK(cudaStreamCreateWithFlags(&st.stream, cudaStreamNonBlocking));
    for (int s = 0; s < 2; s++) {
        st.slot[s] = (float *)xt_cuda_host_alloc(sizeof(float) * (size_t)slot_len);
        XT_CUDA_CHECK(cudaEventCreateWithFlags(&st.copied[s], cudaEventDisableTiming));
    }
    return st;
}

static void staging_close(staging *st)
{
    for (int s = 0; s < 2; s++) {
        XT_CUDA_CHECK(cudaEventDestroy(st->copied[s]));
        xt_cuda_host_free(st->slot[s]);
    }
    XT_CUDA_CHECK(cudaStreamDestroy(st->stream));
}

static int chunks_of(int count, int chunk)
{
    return count / chunk + (count % chunk != 0);
}

static int chunk_len(int i, int count, int chunk)
{
    int left = count - i * chunk;
    return left < chunk ? left : chunk;
}

/* Starts the copy of chunk i into slot s; the slot's event fires when it is done. */
static void copy_out(staging *st, int s, const float *d_buf, int i, int count, int chunk)
{
    XT_CUDA_CHECK(cudaMemcpyAsync(st->slot[s], d_buf + (size_t)i * chunk,
                                  sizeof(float) * (size_t)chunk_len(i, count, chunk),
                                  cudaMemcpyDeviceToHost, st->stream));
    XT_CUDA_CHECK(cudaEventRecord(st->copied[s], st->stream));
}
// END SOLUTION

void send_device(const float *d_buf, int count, int chunk, int peer, MPI_Comm comm)
{
    /*
     * TODO: send d_buf to peer, one MPI_Send per chunk.
     *   Chunk i (elements i*chunk .., the last one shorter) is one message of MPI_FLOAT, tag
     *   0, in order: exactly ceil(count/chunk) messages, none for count 0. MPI cannot read
     *   device memory: stage through pinned host memory (xt_cuda_host_alloc), and hand a
     *   slot to MPI only once the copy filling it has completed. d_buf must stay unchanged;
     *   the receiver's floats are compared exactly.
     */
    // BEGIN SOLUTION
    XT_CHECK(chunk > 0, "send_device: chunk must be positive, got %d", chunk);
    int nchunks = chunks_of(count, chunk);
    if (nchunks == 0)
        return;
    staging st = staging_open(count < chunk ? count : chunk);
    copy_out(&st, 0, d_buf, 0, count, chunk);
    for (int i = 0; i < nchunks; i++) {
        /* The other slot held chunk i-1, whose MPI_Send has returned: refill it now, so
         * that the copy runs while chunk i is on the wire. */
        if (i + 1 < nchunks)
            copy_out(&st, (i + 1) % 2, d_buf, i + 1, count, chunk);
        /* MPI reads host memory: the copy into this slot must have landed. */
        XT_CUDA_CHECK(cudaEventSynchronize(st.copied[i % 2]));
        MPI_Send(st.slot[i % 2], chunk_len(i, count, chunk), MPI_FLOAT, peer, 0, comm);
    }
    staging_close(&st);
    // END SOLUTION
}

void recv_device(float *d_buf, int count, int chunk, int peer, MPI_Comm comm)
{
    /*
     * TODO: receive d_buf from peer, one MPI_Recv per chunk.
     *   The peer sends chunk i (elements i*chunk .., the last one shorter) as one message of
     *   MPI_FLOAT, tag 0, from host memory, in order; count 0: no message. Receive into
     *   pinned host memory (xt_cuda_host_alloc); refill a slot only once the copy emptying
     *   it has completed, and return only once every copy into d_buf has completed (the
     *   caller reads d_buf next, on another stream). Compared exactly with the sent floats.
     */
    // BEGIN SOLUTION
    XT_CHECK(chunk > 0, "recv_device: chunk must be positive, got %d", chunk);
    int nchunks = chunks_of(count, chunk);
    if (nchunks == 0)
        return;
    staging st = staging_open(count < chunk ? count : chunk);
    for (int i = 0; i < nchunks; i++) {
        int s = i % 2, len = chunk_len(i, count, chunk);
        /* The copy of chunk i-2 out of this slot must be done before MPI overwrites it
         * (an event never recorded counts as done). */
        XT_CUDA_CHECK(cudaEventSynchronize(st.copied[s]));
        MPI_Recv(st.slot[s], len, MPI_FLOAT, peer, 0, comm, MPI_STATUS_IGNORE);
        XT_CUDA_CHECK(cudaMemcpyAsync(d_buf + (size_t)i * chunk, st.slot[s],
                                      sizeof(float) * (size_t)len, cudaMemcpyHostToDevice,
                                      st.stream));
        XT_CUDA_CHECK(cudaEventRecord(st.copied[s], st.stream));
    }
    /* The stream does not wait for the caller's work, nor the caller for it. */
    XT_CUDA_CHECK(cudaStreamSynchronize(st.stream));
    staging_close(&st);
    // END SOLUTION
}

/*
 * The grader's side of the conversation, on plain host memory: the same
 * messages (chunk i as MPI_FLOAT, tag 0), no staging. A test of send_device
 * pairs it with host_recv_chunks, a test of recv_device with host_send_chunks.
 * host_recv_chunks takes messages of any size until count floats are in, so
 * that a wrong split shows up in the grader's message check, not as an error.
 */
static void host_send_chunks(const float *x, int count, int chunk, int peer, MPI_Comm comm)
{
    for (int off = 0; off < count; off += chunk)
        MPI_Send(x + off, count - off < chunk ? count - off : chunk, MPI_FLOAT, peer, 0, comm);
}

static void host_recv_chunks(float *x, int count, int peer, MPI_Comm comm)
{
    for (int off = 0; off < count;) {
        MPI_Status status;
        int got;
        MPI_Recv(x + off, count - off, MPI_FLOAT, peer, 0, comm, &status);
        MPI_Get_count(&status, MPI_FLOAT, &got);
        off += got;
    }
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/p2p_cuda_stream.cu,
 * compiled with this file into one program (its own names begin with driver_).
 */
