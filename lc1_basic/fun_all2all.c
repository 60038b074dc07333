/*
 * fun_all2all.c: all-to-all-v when every rank knows the whole split matrix.
 * docs/lc1_basic.md#fun_all2all
 *
 * splits is an np x np matrix, the same on every rank: splits[i*np + j]
 * elements go from rank i to rank j (the token routing of a mixture of
 * experts looks like this once the counts have been all-gathered). Rank r's
 * `send` holds its blocks for ranks 0, 1, ... back to back; afterwards its
 * `recv` holds the blocks from ranks 0, 1, ... back to back.
 *
 * MPI_Alltoallv wants, on every rank, what it sends (a row of the matrix)
 * and what it receives (a column: the transpose), each as counts and
 * displacements, the running sums of the counts:
 *
 *     splits     to r0 r1 r2        rank 1 sends   counts 2 0 1   displs 0 2 2
 *     from r0        1  2  0        rank 1 gets    counts 2 0 3   displs 0 2 2
 *     from r1        2  0  1                       (column 1)
 *     from r2        0  3  1
 *
 * Cost: one collective; rank r sends the elements of its row and receives
 * those of its column (its own block included: the library copies it).
 */
#include "xt.h"

#include <stdlib.h>

void alltoallv_from_splits(const float *send, const int *splits, float *recv, MPI_Comm comm)
{
    /*
     * TODO: counts and displacements from splits, one MPI_Alltoallv.
     *   Exactly one MPI_Alltoallv per rank and no other communication (every rank already
     *   holds the whole matrix). recv must hold the blocks from ranks 0, 1, ... back to back,
     *   splits[i*np + rank] floats from rank i, and is exactly that long (guarded).
     *   Blocks of 0 and an all-zero matrix occur; values are compared exactly.
     */
    XT_TODO("counts and displacements from splits, one MPI_Alltoallv.", send, splits, recv, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_all2all.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
