/*
 * fun_reduce_scatter.c: ring reduce-scatter with uneven blocks.
 * docs/lc1_basic.md#fun_reduce_scatter
 *
 * Every rank holds the whole vector, cut into np blocks: block i has
 * recvcounts[i] elements (any of them may be 0). Afterwards rank i holds
 * block i reduced over all ranks (sum, max, ... any commutative op).
 *
 * Around the ring r -> r+1, in np-1 steps: at step s, rank r sends its
 * partial block (r-s-1) to the right and receives partial block (r-s-2) from
 * the left, folding its own contribution into it. A block picks up one more
 * contribution per hop and, after np-1 hops, arrives complete at its owner.
 *
 *     np = 3; "1:02" is block 1 holding the contributions of ranks 0 and 2
 *               r0            r1            r2
 *     step 0    sends 2:0     sends 0:1     sends 1:2      (to the right)
 *               folds 1:02    folds 2:01    folds 0:12
 *     step 1    sends 1:02    sends 2:01    sends 0:12
 *               folds 0:012   folds 1:012   folds 2:012    (block r, complete)
 *
 * Cost: np-1 messages per rank; rank r sends every block except its own,
 * (N - recvcounts[r]) elements for N in all, about N (np-1)/np: the minimum
 * any reduce-scatter must move.
 */
#include "xt.h"

#include <stdlib.h>
#include <string.h>

void reduce_scatter_ring(const void *send, void *recv, const int *recvcounts, MPI_Datatype dt,
                         MPI_Op op, MPI_Comm comm)
{
    /*
     * TODO: ring reduce-scatter of send's blocks to recv.
     *   Block i has recvcounts[i] elements (0 allowed) and starts at recvcounts[0] + ... +
     *   recvcounts[i-1]; recv gets block `rank` reduced over all ranks, exactly
     *   recvcounts[rank] elements (it is guarded). `send` is const: it is checked unchanged.
     *   Any built-in dt and op: float sum/prod within a rounding bound (any order), all else
     *   exact. np = 1: recv is the own block as it is, no op applied (3 stays 3 under LAND).
     *   Point-to-point only (MPI_Reduce_local, a local call, is allowed), always to the same
     *   neighbour; per rank at most np-1 messages and N - recvcounts[rank] elements sent
     *   (N = the sum of recvcounts): every block but its own, once.
     */
    XT_TODO("ring reduce-scatter of send's blocks to recv.", send, recv, recvcounts, dt, op, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_reduce_scatter.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
