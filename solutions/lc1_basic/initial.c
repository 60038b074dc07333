/*
 * initial.c: a 2-D device mesh, the layout behind data and tensor parallelism.
 * docs/lc1_basic.md#initial
 *
 * np = dp * tp ranks are laid out row by row in a dp x tp grid, the same
 * layout as NumPy's arange(np).reshape(dp, tp). Rank r sits at
 * (r / tp, r % tp): tp is the fast axis, so tp consecutive ranks share a
 * tensor-parallel group, as in Megatron-LM, and usually share a node and its
 * fast links. A rank belongs to two groups:
 *
 *     dp=2, tp=4            tp group: its row     dp group: its column
 *            tp=0 1 2 3
 *     dp=0:    0  1  2  3   {0 1 2 3} {4 5 6 7}    {0 4} {1 5} {2 6} {3 7}
 *     dp=1:    4  5  6  7
 *
 * A rank's rank inside its dp group is its dp coordinate (r / tp), inside its
 * tp group its tp coordinate (r % tp).
 *
 * MPI_Cart_create lays out a grid the same way (the last dimension varies
 * fastest); MPI_Cart_sub keeps some dimensions and gives each rank the group
 * of ranks that differ from it only along those. MPI_Comm_split(comm, colour,
 * key) does the same by hand: ranks with the same colour form a group, ordered
 * by key.
 *
 * Cost: no data moves. Each constructor is collective over comm; a typical
 * MPI exchanges every rank's (colour, key), an all-gather of np small
 * messages: about log2(np) alpha.
 */
#include "xt.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void make_mesh_2d(int dp, int tp, MPI_Comm comm, MPI_Comm *dp_comm, MPI_Comm *tp_comm)
{
    /*
     * TODO: make this rank's mesh column and row communicators.
     *   Rank r of comm sits at (r / tp, r % tp) of the dp x tp mesh, tp the fast axis; it must
     *   be rank r / tp of *dp_comm (its column), r % tp of *tp_comm (its row). Caller frees both.
     */
    // BEGIN SOLUTION
    int dims[2] = {dp, tp}, periods[2] = {0, 0};
    MPI_Comm mesh;
    /* No reordering: coordinates must follow the ranks of comm. */
    MPI_Cart_create(comm, 2, dims, periods, 0, &mesh);
    int along_dp[2] = {1, 0}, along_tp[2] = {0, 1};
    MPI_Cart_sub(mesh, along_dp, dp_comm);
    MPI_Cart_sub(mesh, along_tp, tp_comm);
    MPI_Comm_free(&mesh);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/initial.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
