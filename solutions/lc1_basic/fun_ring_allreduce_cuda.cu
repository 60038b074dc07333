/*
 * fun_ring_allreduce_cuda.cu: ring all-reduce of a GPU buffer, copies and messages pipelined.
 * docs/lc1_basic.md#fun_ring_allreduce_cuda
 *
 * The ring of fun_ring_allreduce.c on device memory, float sum: afterwards
 * every rank's d_buf holds the element-wise sum of all ranks' d_buf. Blocks
 * and steps are the CPU version's: np blocks (the first count % np of them one
 * element longer), reduce-scatter for np-1 steps (rank r sends block r-s and
 * adds block r-s-1 into its own), then all-gather for np-1 steps (sends block
 * r+1-s, stores block r-s).
 *
 * What changes on a GPU: MPI here cannot read device memory, so every byte
 * goes device -> pinned host -> MPI -> pinned host -> device, and the addition
 * is a CUDA kernel. Each block travels in segments of at most `chunk` floats,
 * one message each, so that per step the copies and the messages overlap:
 *
 *     copy engine   [D2H 0][D2H 1]        [H2D 0 + add 0][D2H 2][H2D 1 + add 1] ...
 *     MPI                  [segment 0    ][segment 1     ]       [segment 2    ] ...
 *
 * One stream carries every copy and kernel in program order, and that order
 * is the data dependence: the next step's device-to-host copy of a block comes
 * after the kernel that finished it. The host waits on events only where MPI
 * touches pinned memory: before a send reads a slot (its copy must be done)
 * and before a receive refills one (the copy out of it must be done).
 *
 * Cost: the CPU ring's bytes, 2 (np-1)/np of the buffer per rank, now one
 * message per segment: 2 (np-1) blocks of about count/np floats, each in
 * ceil(block/chunk) messages. With n = 4 count bytes, c = 4 chunk bytes,
 * alpha per message, beta per byte on the link, gamma per byte of a PCIe copy:
 *     a block a message:  2 (np-1) (alpha + n/np (beta + 2 gamma))
 *     pipelined:          2 (np-1) ((n/(np c)) alpha + n/np max(beta, gamma) + 2 c gamma)
 * Every step fills and drains its own pipeline: a segment's two copies.
 */
#include "xt.h"

#include <stdlib.h>

// BEGIN SOLUTION
/* Block i of count elements cut np ways (the CPU ring's chunks). */
static int block_start(int i, int count, int np)
{
    int rem = count % np;
    return i * (count / np) + (i < rem ? i : rem);
}

static int block_len(int i, int count, int np)
{
    return count / np + (i < count % np ? 1 : 0);
}

static int segments_of(int len, int chunk)
{
    return len / chunk + (len % chunk != 0);
}

static int segment_len(int k, int len, int chunk)
{
    int left = len - k * chunk;
    return left < chunk ? left : chunk;
}

__global__ void add_into(float *dst, const float *src, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        dst[i] += src[i];
}

/* Two pinned slots each way, a device scratch for one segment, one stream. */
typedef struct {
    int chunk;
    cudaStream_t stream;
    float *out[2], *in[2]; /* pinned */
    cudaEvent_t out_ready[2], in_free[2];
    float *d_incoming;
} pipeline;

/* slot_len: the longest segment, chunk or less when no block is that long */
static void pipeline_open(pipeline *p, int chunk, int slot_len)
{
    size_t bytes = sizeof(float) * (size_t)slot_len;
    p->chunk = chunk;
    XT_CUDA_CHECK(cudaStreamCreateWithFlags(&p->stream, cudaStreamNonBlocking));
    for (int s = 0; s < 2; s++) {
        p->out[s] = (float *)xt_cuda_host_alloc(bytes);
        p->in[s] = (float *)xt_cuda_host_alloc(bytes);
        XT_CUDA_CHECK(cudaEventCreateWithFlags(&p->out_ready[s], cudaEventDisableTiming));
        XT_CUDA_CHECK(cudaEventCreateWithFlags(&p->in_free[s], cudaEventDisableTiming));
    }
    p->d_incoming = (float *)xt_cuda_malloc(bytes);
}

static void pipeline_close(pipeline *p)
{
    for (int s = 0; s < 2; s++) {
        xt_cuda_host_free(p->out[s]);
        xt_cuda_host_free(p->in[s]);
        XT_CUDA_CHECK(cudaEventDestroy(p->out_ready[s]));
        XT_CUDA_CHECK(cudaEventDestroy(p->in_free[s]));
    }
    xt_cuda_free(p->d_incoming);
    XT_CUDA_CHECK(cudaStreamDestroy(p->stream));
}

/* Queues the copy of segment k of `block` into out-slot k%2 and marks its end. */
static void stage_out(pipeline *p, const float *block, int len, int k)
{
    XT_CUDA_CHECK(cudaMemcpyAsync(p->out[k % 2], block + (size_t)k * p->chunk,
                                  sizeof(float) * (size_t)segment_len(k, len, p->chunk),
                                  cudaMemcpyDeviceToHost, p->stream));
    XT_CUDA_CHECK(cudaEventRecord(p->out_ready[k % 2], p->stream));
}

/*
 * One ring step: block `out` (out_len floats at d_out) goes right in
 * segments while block `in` comes from the left, segment by segment, and is
 * added into d_in (reduce) or stored there.
 */
static void ring_step(pipeline *p, const float *d_out, int out_len, float *d_in, int in_len,
                      int reduce, int right, int left, MPI_Comm comm)
{
    int chunk = p->chunk;
    int nout = segments_of(out_len, chunk), nin = segments_of(in_len, chunk);
    if (nout > 0)
        stage_out(p, d_out, out_len, 0);
    for (int k = 0; k < nout || k < nin; k++) {
        int s = k % 2;
        /* Out-slot (k+1)%2 held segment k-1, whose send completed: refill it while
         * segment k travels. */
        if (k + 1 < nout)
            stage_out(p, d_out, out_len, k + 1);
        MPI_Request req[2];
        int nreq = 0;
        if (k < nin) {
            /* The copy out of this in-slot (two segments ago) must be done before
             * MPI overwrites it; an event never recorded counts as done. */
            XT_CUDA_CHECK(cudaEventSynchronize(p->in_free[s]));
            MPI_Irecv(p->in[s], segment_len(k, in_len, chunk), MPI_FLOAT, left, 0, comm,
                      &req[nreq++]);
        }
        if (k < nout) {
            /* MPI reads host memory: segment k must have landed in its slot. */
            XT_CUDA_CHECK(cudaEventSynchronize(p->out_ready[s]));
            MPI_Isend(p->out[s], segment_len(k, out_len, chunk), MPI_FLOAT, right, 0, comm,
                      &req[nreq++]);
        }
        MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE);
        if (k < nin) {
            int len = segment_len(k, in_len, chunk);
            float *dst = d_in + (size_t)k * chunk;
            size_t bytes = sizeof(float) * (size_t)len;
            if (reduce) {
                XT_CUDA_CHECK(cudaMemcpyAsync(p->d_incoming, p->in[s], bytes,
                                              cudaMemcpyHostToDevice, p->stream));
                int grid = (int)((len + 255L) / 256);
                grid = grid < 4096 ? grid : 4096;
                add_into<<<grid, 256, 0, p->stream>>>(dst, p->d_incoming, len);
                XT_CUDA_CHECK(cudaGetLastError());
            } else {
                XT_CUDA_CHECK(
                    cudaMemcpyAsync(dst, p->in[s], bytes, cudaMemcpyHostToDevice, p->stream));
            }
            XT_CUDA_CHECK(cudaEventRecord(p->in_free[s], p->stream));
        }
    }
}
// END SOLUTION

void ring_allreduce_cuda(float *d_buf, int count, int chunk, MPI_Comm comm)
{
    /*
     * TODO: ring all-reduce of d_buf, at most chunk floats a message.
     *   On return d_buf (device memory) holds the sum over all ranks (float rounding bound)
     *   and no work on it is pending (the caller reads it next, on another stream). Blocks
     *   and steps as ring_allreduce's: block i starts at i*(count/np) + min(i, count%np);
     *   step s sends block r-s (reduce-scatter), then r+1-s (all-gather).
     *   Each block goes right in ceil(len/chunk) MPI_FLOAT messages of at most chunk floats,
     *   none for an empty block; messages and bytes per rank are checked exactly, and only
     *   point-to-point calls are allowed. MPI touches pinned host memory only: a slot is sent
     *   once the copy filling it has completed, refilled once the copy emptying it has.
     */
    // BEGIN SOLUTION
    XT_CHECK(chunk > 0, "ring_allreduce_cuda: chunk must be positive, got %d", chunk);
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    if (np == 1 || count == 0)
        return;
    int right = (rank + 1) % np, left = (rank - 1 + np) % np;
    int longest = block_len(0, count, np);
    pipeline p;
    pipeline_open(&p, chunk, chunk < longest ? chunk : longest);
    for (int s = 0; s < np - 1; s++) {
        int out = (rank - s + np) % np, in = (rank - s - 1 + np) % np;
        ring_step(&p, d_buf + block_start(out, count, np), block_len(out, count, np),
                  d_buf + block_start(in, count, np), block_len(in, count, np), 1, right, left,
                  comm);
    }
    for (int s = 0; s < np - 1; s++) {
        int out = (rank + 1 - s + np) % np, in = (rank - s + np) % np;
        ring_step(&p, d_buf + block_start(out, count, np), block_len(out, count, np),
                  d_buf + block_start(in, count, np), block_len(in, count, np), 0, right, left,
                  comm);
    }
    /* The caller reads d_buf on its own stream, which does not wait for ours. */
    XT_CUDA_CHECK(cudaStreamSynchronize(p.stream));
    pipeline_close(&p);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_ring_allreduce_cuda.cu,
 * compiled with this file into one program (its own names begin with driver_).
 */
