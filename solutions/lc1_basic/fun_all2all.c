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
    // BEGIN SOLUTION
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int *sendcounts = xt_malloc(sizeof(int) * (size_t)np);
    int *sdispls = xt_malloc(sizeof(int) * (size_t)np);
    int *recvcounts = xt_malloc(sizeof(int) * (size_t)np);
    int *rdispls = xt_malloc(sizeof(int) * (size_t)np);
    int sent = 0, received = 0;
    for (int j = 0; j < np; j++) {
        sendcounts[j] = splits[rank * np + j];
        recvcounts[j] = splits[j * np + rank];
        sdispls[j] = sent;
        rdispls[j] = received;
        sent += sendcounts[j];
        received += recvcounts[j];
    }
    MPI_Alltoallv(send, sendcounts, sdispls, MPI_FLOAT, recv, recvcounts, rdispls, MPI_FLOAT, comm);
    free(sendcounts);
    free(sdispls);
    free(recvcounts);
    free(rdispls);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/fun_all2all.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
