/*
 * ring_online_softmax.c: the softmax of a vector cut across the ranks, its
 * max and sum passed around a ring. docs/lc6_cp.md#ring_online_softmax
 *
 * Rank r holds block r of the vector (xt_block's rule: some ranks hold one
 * element more, and a rank may hold none). softmax(x)_i = e^(x_i - M) / S
 * needs the max M and the sum S = sum_j e^(x_j - M) of the whole vector.
 * Each rank sums its own block against its own max, giving a pair (m, s);
 * two pairs merge as the online softmax merges blocks (online_softmax.c):
 *
 *     (m_a, s_a) + (m_b, s_b) = (m, s_a e^(m_a - m) + s_b e^(m_b - m)),  m = max(m_a, m_b)
 *
 * and an empty block's pair is (-inf, 0), which must merge into nothing, not
 * NaN. The pairs travel a ring, to r+1, from r-1. At step s each rank sends
 * the pair it holds, which covers its own block and the s-1 before it, and
 * receives the pair of the s blocks before its own; with its own pair that
 * makes s+1 blocks. After np-1 steps every rank covers the whole vector:
 *
 *              step 1          step 2            step 3
 *     r0    {0} + {3}       {0} + {2,3}       {0} + {1,2,3}    = (M, S) on every
 *     r1    {1} + {0}       {1} + {3,0}       {1} + {2,3,0}      rank, each then
 *     r2    {2} + {1}       {2} + {0,1}       {2} + {3,0,1}      normalizing its
 *     r3    {3} + {2}       {3} + {1,2}       {3} + {0,1,2}      own block
 *
 * This is ring attention's pattern with the smallest possible message: there
 * the key/value blocks travel and each rank merges what arrives by the LSE.
 *
 * Cost per rank: np-1 messages of one pair (2 floats, 8 bytes) sent and as
 * many received: (np-1)(alpha + 8 beta). An all-reduce of the pair with a
 * user-defined MPI_Op would take about log2(np) steps instead.
 */
#include "kit.h" /* the lecture's kit: attention blocks, tiles of scores */

#include <math.h>
#include <stdio.h>

// BEGIN SOLUTION
/* pair := pair + other: the max of both, each sum brought to it. (-inf, 0) adds nothing. */
static void merge_pair(float pair[2], const float other[2])
{
    float m = pair[0] > other[0] ? pair[0] : other[0];
    if (m == -INFINITY)
        return; /* both empty: e^(-inf - -inf) would be NaN */
    pair[1] = pair[1] * expf(pair[0] - m) + other[1] * expf(other[0] - m);
    pair[0] = m;
}
// END SOLUTION

void ring_online_softmax(const float *x, float *y, int n, MPI_Comm comm)
{
    /*
     * TODO: y = this rank's part of the softmax of the whole vector.
     *   The whole vector is every rank's x in rank order; n may be 0. Exactly np-1 messages
     *   sent, each to rank+1, and np-1 received, each from rank-1 (mod np), each one (max,
     *   sum) pair of 2 floats (8 bytes), on comm; no collective. x may be near +-1e4: y
     *   within float32 roundings of e^(x - M) / S, M subtracted itself in the exp (M +
     *   log S near 1e4 loses 3 digits).
     */
    // BEGIN SOLUTION
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    float own[2] = {-INFINITY, 0.0f}; /* an empty block: the max of nothing */
    for (int i = 0; i < n; i++)
        own[0] = x[i] > own[0] ? x[i] : own[0];
    for (int i = 0; i < n; i++)
        own[1] += expf(x[i] - own[0]);
    float held[2] = {own[0], own[1]}, got[2];
    for (int step = 1; step < np; step++) {
        MPI_Sendrecv(held, 2, MPI_FLOAT, (rank + 1) % np, 0, got, 2, MPI_FLOAT,
                     (rank + np - 1) % np, 0, comm, MPI_STATUS_IGNORE);
        /* got covers the `step` blocks before this rank's: add the own block once. */
        held[0] = own[0];
        held[1] = own[1];
        merge_pair(held, got);
    }
    for (int i = 0; i < n; i++)
        y[i] = expf(x[i] - held[0]) / held[1];
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc6_cp/drivers/ring_online_softmax.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
