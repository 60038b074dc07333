/*
 * distributed_sampler.c: which samples each rank trains on, epoch by epoch.
 * docs/lc2_dp.md#distributed_sampler
 *
 * In data parallelism every rank must see a different part of the data set,
 * the parts together must cover all of it, and every rank must process the
 * same number of samples (else one rank runs an extra step and the others
 * wait for it in an all-reduce forever). PyTorch's DistributedSampler does
 * this without any communication: every rank draws the same shuffled order
 * from the same seed, makes its length a multiple of np, and takes every
 * np-th entry starting at its own rank.
 *
 *     n = 10, np = 4, order = a b c d e f g h i j  (shuffled by seed + epoch)
 *
 *     padded (drop_last = 0): ceil(10/4) = 3 each, 12 in all, wrap around:
 *         a b c d e f g h i j | a b
 *         r0: a e i   r1: b f j   r2: c g a   r3: d h b   (a, b twice)
 *
 *     cut (drop_last = 1): 10/4 = 2 each, 8 in all, the tail dropped:
 *         a b c d e f g h | i j
 *         r0: a e   r1: b f   r2: c g   r3: d h            (i, j not at all)
 *
 * When np > 2n the padding wraps more than once (n = 3, np = 8: a b c a b c
 * a b). The shuffle uses seed + epoch, so each epoch has a new order that
 * every rank agrees on; forgetting the epoch (set_epoch in PyTorch) replays
 * the same order every epoch.
 *
 * Cost: no messages at all. Each rank draws the whole permutation, O(n)
 * time and memory, and keeps ceil(n/np) (or floor) of it.
 */
#include "xt_nn.h"

#include <stdio.h>
#include <stdlib.h>

/* Fills `indices` with the data-set indices this rank visits in `epoch` and returns how many. */
long distributed_sampler(long n, long epoch, uint64_t seed, int shuffle, int drop_last,
                         MPI_Comm comm, long *indices)
{
    /*
     * TODO: fill `indices`; return the count.
     *   Compared exactly with DistributedSampler: order = xt_permutation(seed + epoch, n) if
     *   shuffle, else 0 .. n-1; num_samples = floor(n / np) with drop_last (order cut to
     *   num_samples * np), else ceil(n / np) (order padded by wrapping: entry k is order[k % n]);
     *   rank r takes entries r, r + np, r + 2 np, ...: num_samples of them. n = 0 gives 0.
     *   `indices` has room for ceil(n / np) entries only (writing past them is WRONG). No
     *   communication (RULE): only MPI_Comm_rank and MPI_Comm_size, on `comm`.
     */
    // BEGIN SOLUTION
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    long num_samples = drop_last ? n / np : (n + np - 1) / np;
    long total = num_samples * np;
    if (total == 0)
        return 0;
    long *order = xt_malloc(sizeof(long) * (size_t)(n > total ? n : total));
    if (shuffle) {
        xt_permutation(seed + (uint64_t)epoch, n, order);
    } else {
        for (long i = 0; i < n; i++)
            order[i] = i;
    }
    for (long k = n; k < total; k++) /* padding: wrap around, as often as needed */
        order[k] = order[k % n];
    for (long i = 0; i < num_samples; i++)
        indices[i] = order[rank + i * np];
    free(order);
    return num_samples;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc2_dp/drivers/distributed_sampler.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
