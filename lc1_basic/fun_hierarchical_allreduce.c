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
    XT_TODO("in-place ring reduce-scatter of data over comm.", data, count, dt, op, scratch, comm);
}

void ring_allgather_inplace(void *data, int count, MPI_Datatype dt, MPI_Comm comm)
{
    /*
     * TODO: in-place ring all-gather of data over comm.
     *   Rank i holds block i (cut as in ring_reduce_scatter_inplace); afterwards every rank
     *   holds every block. P-1 steps, each one block to the next rank.
     */
    XT_TODO("in-place ring all-gather of data over comm.", data, count, dt, comm);
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
    XT_TODO("node-aware all-reduce of buf, in place.", buf, count, dt, op, ranks_per_node, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_hierarchical_allreduce.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
