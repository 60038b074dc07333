/*
 * lecture.h: what this lecture's programs share beyond libxt (lecture.c),
 * found on their include path (-Igrader/lectures/lc7_ep): reading a graded
 * MoE layer case.
 */
#ifndef LECTURE_H
#define LECTURE_H

#include "xt_nn.h"

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

#endif
