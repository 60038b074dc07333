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
    XT_TODO("ring all-reduce of d_buf, at most chunk floats a message.", d_buf, count, chunk, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_ring_allreduce_cuda.cu,
 * compiled with this file into one program (its own names begin with driver_).
 */
