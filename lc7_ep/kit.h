/*
 * kit.h: what lecture 7's programs are given beyond libxt, its kit (the code
 * is in grader/lectures/lc7_ep/kit/, linked into this lecture's programs
 * only): softmax top-k routing, a bank of SwiGLU experts whose every call the
 * grader sees, and the reading of a graded MoE layer's case. The exercises
 * call the first two; the third is their case drivers'.
 */
#ifndef LC7_KIT_H
#define LC7_KIT_H

#include "xt_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ----------------------------------------------------- mixture of experts */

/*
 * Softmax top-k routing of T tokens over E experts (kit/moe.c): probs (T x E) =
 * softmax(logits) row by row; idx[t k + j] (T x k) the expert of token t's
 * j-th largest probability (of equal probabilities the lower expert first),
 * w[t k + j] that probability, divided by the sum of the k when renorm.
 * Backward: dlogits (T x E, overwritten) from dw (T x k), through the selected
 * probabilities only; probs and idx are the forward's.
 */
void xt_topk_route(int *idx, float *w, float *probs, const float *logits, int T, int E, int k,
                   int renorm);
void xt_topk_route_backward(float *dlogits, const float *dw, const float *probs, const int *idx,
                            int T, int E, int k, int renorm);

/*
 * A bank of ne SwiGLU experts, global indices first .. first+ne-1, each
 * expert(x) = (silu(x Wg) * x Wu) Wd with its parameters in one block of
 * xt_expert_params(d, ff) = 3 d ff floats: Wg (d x ff), Wu (d x ff), Wd
 * (ff x d); params holds the ne blocks one after the other (the experts of a
 * rank are a contiguous slice of every expert's parameters).
 *
 * x (n x d) holds tokens grouped by expert: counts[j] rows for expert
 * first + j, the groups in expert order, n their sum; y (n x d) gets each
 * row's expert output. keep (3 n ff floats, or NULL when no backward
 * follows) receives what the backward needs. Backward: dx (n x d)
 * overwritten, dparams += (the same layout as params); either may be NULL.
 *
 * Every expert's call is logged in the case record as an X line (xt_event):
 * forward or backward, the expert, its tokens, when, the MPI events before it
 * and the exchanges (receives, nonblocking collectives) pending while it ran.
 */
long xt_expert_params(int d, int ff);
void xt_experts_forward(float *y, float *keep, const float *x, const int *counts, int first, int ne,
                        const float *params, int d, int ff);
void xt_experts_backward(float *dx, float *dparams, const float *dy, const float *x,
                         const float *keep, const int *counts, int first, int ne,
                         const float *params, int d, int ff);

/*
 * The expert calls this rank has logged (the X lines above), for a demo that
 * shows in which order its program computed and waited: the from-th call
 * logged and those after it, at most max, into out (NULL: none); returns how
 * many calls the log holds in all. A graded case starts a fresh log; a demo's
 * grows from the start of the program.
 */
typedef struct {
    char op;            /* 'F' forward, 'B' backward */
    int expert, tokens; /* the expert's global index, the rows it computed */
    int pending;        /* exchanges (receives, nonblocking collectives) pending meanwhile */
    long pending_bytes; /* their bytes */
    long events_before; /* MPI messages this rank had logged before the call */
    double seconds;     /* how long it ran */
} xt_expert_call;
long xt_expert_log(xt_expert_call *out, long from, long max);

/*
 * For a demo (kit/moe.c): whether this rank's y (T x d) is the layer on one process, computed
 * here token by token with the bank: x's routing (x Wr, xt_topk_route, renorm 0) over all E
 * experts (`all`: E blocks of parameters, then s shared experts' blocks, the bank's E ..
 * E+s-1, added with weight 1). Collective: rank 0 prints "y matches the layer on one
 * process: yes" (or NO) with the largest difference over comm's ranks, which it returns.
 */
double ep_demo_check(MPI_Comm comm, const float *y, const float *x, const float *wr,
                     const float *all, int T, int d, int E, int ff, int k, int s);

/* ------------------------------------------------------ the layer's case */

/*
 * One MoE layer's case (docs/lc7_ep.md, "Conventions"): this rank's T tokens
 * x (T x d) and their upstream gradient dy (T x d; NULL when the case has
 * none), the router Wr (d x E, the same on every rank), and the experts'
 * parameters: every expert's (E blocks of xt_expert_params(d, ff) floats)
 * when the case's "experts" is "all", or this rank's E/np when it is
 * "local". k experts per token, weights renormalised over the k when renorm;
 * capacity factor cf (0: dropless) and the balance loss's alpha.
 */
typedef struct {
    int T, d, E, ff, k, renorm;
    float cf, alpha;
    const float *x, *dy, *wr, *experts;
    long n_experts; /* how many experts' parameters `experts` holds */
} ep_layer;

ep_layer ep_layer_read(xt_case *c);

#ifdef __cplusplus
}
#endif

#endif
