/*
 * group.c: process groups, communicators made from them, and sums per half.
 * docs/lc1_basic.md#group
 *
 * A group is a set of processes with ranks 0..n-1 of its own; a communicator
 * is a group plus a private context that messages travel in. Groups are local
 * objects: MPI_Comm_group, MPI_Group_range_incl and friends cost no messages.
 * MPI_Comm_create_group turns one into a communicator (collective over the
 * group's members only). MPI_Group_translate_ranks answers "who is rank i of
 * this group in that other one", the question every sub-communicator raises
 * when it needs a global rank (a root, a peer, a log line).
 *
 * The low half holds the ranks below h = (np+1)/2, the high half the rest
 * (empty at np = 1). Each half sums its ranks' x on its own communicator; the
 * two leaders (ranks 0 and h of comm) swap the results; each half shares the
 * other half's sum. Every rank ends with both.
 *
 *     np = 5, h = 3      low: 0 1 2          high: 3 4
 *     1. all-reduce      lo on 0 1 2         hi on 3 4
 *     2. leaders         0 <---- lo/hi ----> 3
 *     3. broadcast       hi to 1 2           lo to 4
 *
 * Cost, n = 8 count bytes: the halves work side by side, so it is one
 * all-reduce and one broadcast over ceil(np/2) ranks plus one exchange between
 * the leaders, alpha + n beta. Only two messages cross between the halves, one
 * each way, n bytes each.
 */
#include "xt.h"

#include <stdlib.h>

MPI_Comm make_half(MPI_Comm comm, int *members)
{
    /*
     * TODO: return this rank's half of comm as a new communicator; fill members.
     *   Low half: ranks 0 .. h-1 of comm, h = (np+1)/2; high half: h .. np-1. Ranks keep comm's
     *   order (rank r is rank r - first of its half). members (room for np ints): members[i] is
     *   the rank in comm of the half's rank i. Never MPI_COMM_NULL; the caller frees it.
     */
    // BEGIN SOLUTION
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int h = (np + 1) / 2;
    MPI_Group all, half;
    MPI_Comm_group(comm, &all);
    int range[1][3] = {{rank < h ? 0 : h, rank < h ? h - 1 : np - 1, 1}};
    MPI_Group_range_incl(all, 1, range, &half);
    MPI_Comm out;
    MPI_Comm_create_group(comm, half, 0, &out);
    int n;
    MPI_Group_size(half, &n);
    int *half_ranks = xt_malloc(sizeof(int) * (size_t)n);
    for (int i = 0; i < n; i++)
        half_ranks[i] = i;
    MPI_Group_translate_ranks(half, n, half_ranks, all, members);
    free(half_ranks);
    MPI_Group_free(&half);
    MPI_Group_free(&all);
    return out;
    // END SOLUTION
}

void group_sums(const double *x, int count, MPI_Comm comm, double *lo_sum, double *hi_sum)
{
    /*
     * TODO: every rank gets both halves' sums of x.
     *   lo_sum = x summed over make_half's low half, hi_sum over the high half (all zeros at
     *   np = 1); both arrive holding garbage. Any summation order (graded within a rounding bound).
     *   Collectives run only on the halves' communicators, never on comm. The only
     *   point-to-point messages: ranks 0 and h = (np+1)/2 of comm each send one of count doubles
     *   to the other (none at np = 1).
     */
    // BEGIN SOLUTION
    int np;
    MPI_Comm_size(comm, &np);
    int *members = xt_malloc(sizeof(int) * (size_t)np);
    MPI_Comm half = make_half(comm, members);
    int low = members[0] == 0, h = (np + 1) / 2;
    double *mine = low ? lo_sum : hi_sum, *other = low ? hi_sum : lo_sum;
    MPI_Allreduce(x, mine, count, MPI_DOUBLE, MPI_SUM, half);
    if (h == np) {
        for (int i = 0; i < count; i++)
            other[i] = 0.0;
    } else {
        int half_rank;
        MPI_Comm_rank(half, &half_rank);
        if (half_rank == 0)
            MPI_Sendrecv(mine, count, MPI_DOUBLE, low ? h : 0, 0, other, count, MPI_DOUBLE,
                         low ? h : 0, 0, comm, MPI_STATUS_IGNORE);
        MPI_Bcast(other, count, MPI_DOUBLE, 0, half);
    }
    MPI_Comm_free(&half);
    free(members);
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc1_basic/drivers/group.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
