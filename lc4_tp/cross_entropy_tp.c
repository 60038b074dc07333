/*
 * cross_entropy_tp.c: the softmax cross-entropy of logits whose vocabulary
 * is cut across the ranks, without ever putting a row of logits together.
 * docs/lc4_tp.md#cross_entropy_tp
 *
 * A vocab-parallel LM head leaves rank r with the columns v_lo .. v_lo +
 * v_count - 1 of the n x V logits z (the split rule of xt_block). The loss
 * of token i with target t_i is log sum_j exp(z_ij) - z_it, and everything
 * it needs is a sum or a maximum over j, so each rank reduces its own
 * columns and three numbers per token travel:
 *
 *            columns of rank 0 | rank 1 | rank 2
 *     z_i   [ . . . . | . . . t . | . . . . ]     target t owned by rank 1
 *     m_i  = max over all j          all-reduce MAX   (n floats)
 *     S_i  = sum_j exp(z_ij - m_i)   all-reduce SUM   (n floats) \ one call
 *     zt_i = z_it - m_i (owner only) all-reduce SUM   (n floats) / of 2n
 *     loss = mean_i (log S_i - zt_i)                  the same on every rank
 *     dz_ij = (exp(z_ij - m_i) / S_i - [j = t_i]) / n  own columns, local
 *
 * Cost per rank: two all-reduces, of n and 2n floats, 2 (np-1)/np · 3n·4
 * bytes with a ring; gathering the logits instead would receive
 * (np-1)/np · n·V floats.
 */
#include "xt_nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

float cross_entropy_tp(const float *logits_local, const int *targets, int n, int v_lo, int v_count,
                       float *dlogits_local, MPI_Comm comm)
{
    /*
     * TODO: mean cross-entropy.
     *   The mean over the n tokens, returned bit-identical on every rank (n = 0: 0).
     *   dlogits_local (n x v_count, or NULL: skip) = d loss / d logits of this block,
     *   overwritten. Logits up to +-1e4 must not overflow. At most 3 MPI_Allreduce on comm
     *   of at most 2n floats each (the logits stay where they are), no other communication.
     */
    XT_TODO("mean cross-entropy.", logits_local, targets, n, v_lo, v_count, dlogits_local, comm);
}

/* ------------------------------------------------------------------------ */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int n = (int)xt_case_int(c, "n"), vocab = (int)xt_case_int(c, "V"), np, rank, v_lo, v_count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(vocab, np, rank, &v_lo, &v_count);
    xt_array logits = xt_case_input_const(c, "logits"), targets = xt_case_input_const(c, "targets");
    float *dlogits = NULL;
    if (xt_case_int(c, "grad"))
        dlogits = xt_case_alloc(c, "dlogits", (long)n * v_count, XT_F32);
    float loss = cross_entropy_tp(logits.data, targets.data, n, v_lo, v_count, dlogits, comm);
    xt_case_output(c, "loss", &loss, XT_F32, 1);
    if (dlogits)
        xt_case_output(c, "dlogits", dlogits, XT_F32, (long)n * v_count);
}

/*
 * Two tokens over a vocabulary of 6 whose logits are small integers: rank r
 * holds the columns xt_block(6, np, r) gives; the loss and the gathered
 * gradient equal the single-process cross-entropy (xt_cross_entropy_loss).
 */
static void demo(MPI_Comm comm)
{
    enum { N = 2, V = 6 };
    int np, rank, lo, count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(V, np, rank, &lo, &count);
    const float z[N * V] = {1, 2, 3, 0, -1, 2, 0, 0, 1, 4, 1, 0};
    const int targets[N] = {2, 3};
    float z_local[N * V], dz_local[N * V];
    for (int i = 0; i < N; i++)
        memcpy(z_local + i * count, z + i * V + lo, sizeof(float) * (size_t)count);
    xt_printf_root(comm, "logits (2 x 6): [1 2 3 0 -1 2; 0 0 1 4 1 0]; targets [2 3]\n");
    xt_printf_ordered(comm, "columns %d..%d (%d)\n", lo, lo + count - 1, count);

    float loss = cross_entropy_tp(z_local, targets, N, lo, count, dz_local, comm);
    xt_printf_ordered(comm, "loss %.6f\n", (double)loss);
    xt_print_buffer_ordered(comm, "dlogits, own columns: ", dz_local, N * count, MPI_FLOAT);

    float dz_single[N * V];
    int32_t labels[N] = {2, 3};
    float single = xt_cross_entropy_loss(dz_single, z, labels, N, V);
    int same = 1;
    for (int i = 0; i < N; i++)
        for (int j = 0; j < count; j++)
            same &= fabsf(dz_local[i * count + j] - dz_single[i * V + lo + j]) < 1e-6f;
    MPI_Allreduce(MPI_IN_PLACE, &same, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "single process loss %.6f; loss and dlogits agree: %s\n", (double)single,
                   same && fabsf(loss - single) < 1e-6f ? "yes" : "NO");
    xt_printf_root(comm, "messages: all-reduce MAX of n = %d floats, SUM of 2n = %d floats\n", N,
                   2 * N);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
