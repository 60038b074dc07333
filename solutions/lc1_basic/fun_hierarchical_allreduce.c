/*
 * fun_hierarchical_allreduce.c: the node-aware all-reduce (NCCL's and Horovod's).
 * docs/lc1_basic.md#fun_hierarchical_allreduce
 *
 * In place, as fun_ring_allreduce: afterwards every rank's `buf` holds the
 * element-wise reduction of all ranks' buffers. The ranks sit on nodes of
 * L = ranks_per_node consecutive ranks (node = rank / L, local = rank % L),
 * and a link between nodes is several times slower than one inside a node,
 * so the buffer crosses the network as little as it can:
 *
 *     np = 8, L = 4: nodes {0 1 2 3} and {4 5 6 7}
 *     1. reduce-scatter inside each node   local rank l holds block l of its node's sum
 *     2. all-reduce block l across nodes   among the ranks of local index l: 0<->4, 1<->5, ...
 *     3. all-gather inside each node       every rank holds every block of the total
 *
 * Each phase is a ring over its communicator (MPI_Comm_split: one per node,
 * one per local index). Cost for S bytes, N = np / L nodes, per rank:
 * 2 (L-1)/L S inside the node and 2 (N-1)/N S/L across nodes, against a
 * flat ring's 2 (np-1)/np S, nearly all of which crosses nodes when the
 * ring's neighbours straddle them. The network carries 1/L of the flat
 * ring's bytes per rank, in 2 (N-1) steps instead of 2 (np-1).
 */
#include "xt.h"

#include <stdlib.h>

/* The first element of block b when count elements are cut into `parts` blocks. */
static inline int block_start(int count, int parts, int b)
{
    return (int)((long)count * b / parts);
}

void ring_reduce_scatter_inplace(void *data, int count, MPI_Datatype dt, MPI_Op op, void *scratch,
                                 MPI_Comm comm)
{
    /*
     * TODO: in-place ring reduce-scatter of data over comm.
     *   count elements; afterwards rank i holds block i of the reduction, blocks cut at
     *   count * b / P for P ranks; scratch holds a block. P-1 steps, each one block to the
     *   next rank.
     */
    // BEGIN SOLUTION
    int rank, P, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    MPI_Type_size(dt, &size);
    char *bytes = data;
    int right = (rank + 1) % P, left = (rank + P - 1) % P;
    for (int s = 0; s < P - 1; s++) { /* block i-s-1 out, block i-s-2 in and folded */
        int out = ((rank - s - 1) % P + P) % P, in = ((rank - s - 2) % P + P) % P;
        int o0 = block_start(count, P, out), o1 = block_start(count, P, out + 1);
        int i0 = block_start(count, P, in), i1 = block_start(count, P, in + 1);
        MPI_Sendrecv(bytes + (size_t)o0 * size, o1 - o0, dt, right, 0, scratch, i1 - i0, dt, left,
                     0, comm, MPI_STATUS_IGNORE);
        MPI_Reduce_local(scratch, bytes + (size_t)i0 * size, i1 - i0, dt, op);
    }
    // END SOLUTION
}

void ring_allgather_inplace(void *data, int count, MPI_Datatype dt, MPI_Comm comm)
{
    /*
     * TODO: in-place ring all-gather of data over comm.
     *   Rank i holds block i (cut as in ring_reduce_scatter_inplace); afterwards every rank
     *   holds every block. P-1 steps, each one block to the next rank.
     */
    // BEGIN SOLUTION
    int rank, P, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &P);
    MPI_Type_size(dt, &size);
    char *bytes = data;
    int right = (rank + 1) % P, left = (rank + P - 1) % P;
    for (int s = 0; s < P - 1; s++) { /* block i-s passed on, block i-s-1 taken in */
        int out = ((rank - s) % P + P) % P, in = ((rank - s - 1) % P + P) % P;
        int o0 = block_start(count, P, out), o1 = block_start(count, P, out + 1);
        int i0 = block_start(count, P, in), i1 = block_start(count, P, in + 1);
        MPI_Sendrecv(bytes + (size_t)o0 * size, o1 - o0, dt, right, 1, bytes + (size_t)i0 * size,
                     i1 - i0, dt, left, 1, comm, MPI_STATUS_IGNORE);
    }
    // END SOLUTION
}

void hierarchical_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op, int ranks_per_node,
                            MPI_Comm comm)
{
    /*
     * TODO: node-aware all-reduce of buf, in place.
     *   Nodes of ranks_per_node consecutive ranks (np a multiple of it). Point-to-point
     *   only, and MPI_Comm_split (free what you make). Any built-in dt and op, any count.
     *   Bytes sent per rank, S = count elements: inside the node 2 (L-1)/L S, to other
     *   nodes 2 (N-1)/N S/L (L ranks a node, N nodes); exactly where L N divides count.
     */
    // BEGIN SOLUTION
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Type_size(dt, &size);
    int L = ranks_per_node, node = rank / L, local = rank % L;
    MPI_Comm node_comm, cross_comm;
    MPI_Comm_split(comm, node, local, &node_comm);
    MPI_Comm_split(comm, local, node, &cross_comm);

    /* A block of the node's ring at most: count / L + 1 elements. */
    void *scratch = xt_malloc(((size_t)count / (size_t)L + 1) * (size_t)size);
    ring_reduce_scatter_inplace(buf, count, dt, op, scratch, node_comm);
    int b0 = block_start(count, L, local), b1 = block_start(count, L, local + 1);
    char *mine = (char *)buf + (size_t)b0 * size; /* local rank l's block: l across nodes */
    ring_reduce_scatter_inplace(mine, b1 - b0, dt, op, scratch, cross_comm);
    ring_allgather_inplace(mine, b1 - b0, dt, cross_comm);
    ring_allgather_inplace(buf, count, dt, node_comm);

    free(scratch);
    MPI_Comm_free(&node_comm);
    MPI_Comm_free(&cross_comm);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_hierarchical_allreduce.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
