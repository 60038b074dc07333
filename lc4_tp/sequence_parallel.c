/*
 * sequence_parallel.c: the pre-norm SwiGLU block with Megatron sequence
 * parallelism (Korthikanti et al. 2022). docs/lc4_tp.md#sequence_parallel
 *
 *     y = x + MLP(RMSNorm(x; gamma))      MLP(z) = (silu(z Wg) * (z Wu)) Wd
 *
 * Tensor parallelism alone (mlp_tp) keeps every token on every rank outside
 * the MLP, so the norm and the residual are computed np times over and their
 * activations are whole on every rank. Sequence parallelism cuts the tokens
 * there instead: rank r holds the tokens xt_block(T, np, r), and the
 * all-reduce g after the row-parallel projection becomes a reduce-scatter
 * (each rank receives the sum of its own tokens only), while the identity f
 * in front of the column-parallel projections becomes an all-gather:
 *
 *   x_r --RMSNorm--> n_r --AG--> n (T x d) --[Wg_r, Wu_r]--> silu(g) * u --Wd_r--> p_r
 *   (own tokens)       all-gather            (all T tokens, own hidden units)     (T x d)
 *
 *   y_r = x_r + RS(p)_r              RS: reduce-scatter by the token blocks
 *
 * Backward mirrors it: the reduce-scatter's mirror is an all-gather of dy,
 * the all-gather's mirror a reduce-scatter of dn; the norm's backward runs
 * on the own tokens and dgamma, a sum over all tokens, is all-reduced (d
 * floats). Backward gathers n again from the n_r forward kept, as Megatron
 * does, so that forward keeps only 1/np of the norm's activations.
 *
 * Cost per rank: forward one all-gather and one reduce-scatter of T*d floats
 * in all; by the ring formulas each moves (np-1)/np T d floats per rank, so
 * together they cost exactly mlp_tp's all-reduce (an all-reduce is a
 * reduce-scatter then an all-gather). Backward: two all-gathers (dy, n), one
 * reduce-scatter, and one all-reduce of d floats (dgamma).
 */
#include "xt_nn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/*
 * x, y: this rank's tokens xt_block(T, np, rank), T_local x d; gamma: d,
 * the same on every rank; w: the hidden-unit blocks of mlp_tp, contiguous:
 * Wg_r, Wu_r (d x ff_local each), then Wd_r (ff_local x d). Returns what
 * backward needs.
 */
float *seqpar_forward(const float *x, const float *gamma, const float *w, float *y, int T, int d,
                      int ff_local, float eps, MPI_Comm comm)
{
    /*
     * TODO: y = x + MLP(RMSNorm(x)), own tokens
     *   Exactly one MPI_Allgatherv (T_local*d floats sent) and one MPI_Reduce_scatter (T*d),
     *   nothing else. Return one xt_alloc(XT_MEM_ACTIVATIONS) block of exactly
     *   T_local*(d+1) + 3*T*ff_local floats (layout yours), backward frees it; the activations'
     *   peak is checked to the byte: scratch is not XT_MEM_ACTIVATIONS (malloc, XT_MEM_COMM).
     */
    XT_TODO("y = x + MLP(RMSNorm(x)), own tokens", x, gamma, w, y, T, d, ff_local, eps, comm);
}

/* dw: the gradients of w, in w's layout. */
void seqpar_backward(const float *x, const float *gamma, const float *w, float *act,
                     const float *dy, float *dx, float *dgamma, float *dw, int T, int d,
                     int ff_local, MPI_Comm comm)
{
    /*
     * TODO: backward, xt_free(act)
     *   dx (T_local x d) overwritten; dw += the own blocks' gradients; dgamma += the sum over
     *   all T tokens, bit-identical on every rank (it arrives holding earlier gradients, the
     *   same everywhere). Exactly two MPI_Allgatherv of T_local*d floats (dy, and the norm's
     *   output again), one MPI_Reduce_scatter of T*d, one MPI_Allreduce of d; nothing else.
     */
    XT_TODO("backward, xt_free(act)", x, gamma, w, act, dy, dx, dgamma, dw, T, d, ff_local, comm);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc4_tp/drivers/sequence_parallel.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
