/*
 * adam.c: Adam and AdamW, the optimizer whose state ZeRO shards.
 * docs/lc3_zero.md#adam
 *
 * SGD steps every weight by lr times its gradient, so a weight whose
 * gradients are 1000 times smaller learns 1000 times slower. Adam keeps two
 * running averages per weight, its moments,
 *
 *     m = b1 m + (1 - b1) g        the mean of g       (momentum)
 *     v = b2 v + (1 - b2) g^2      the mean of g^2     (the gradient's scale)
 *
 * and steps by m / sqrt(v): about lr per step, whatever the gradient's scale.
 *
 * Bias correction: m and v start at 0, so after t steps they hold only
 * (1 - b^t) of the average they estimate: after one step m = 0.1 g and
 * v = 0.001 g^2 (b1 = 0.9, b2 = 0.999), and m / sqrt(v) = 3.2 instead of 1.
 * Dividing by (1 - b^t) removes the bias; it fades as t grows.
 *
 * One AdamW step, t = step from 1, decoupled weight decay first:
 *
 *     p    = p (1 - lr wd)
 *     m    = b1 m + (1 - b1) g          v    = b2 v + (1 - b2) g^2
 *     mhat = m / (1 - b1^t)             vhat = v / (1 - b2^t)
 *     p    = p - lr mhat / (sqrt(vhat) + eps)
 *
 * (wd = 0 is plain Adam.) Adding wd p to the gradient instead, L2
 * regularisation, is not the same: Adam would divide the decay by sqrt(vhat)
 * like the rest of the gradient, so weights with large gradients would
 * hardly decay.
 *
 * Memory per parameter, the bill ZeRO cuts:
 *
 *                    weight   grad   m    v   fp32 master   total
 *     fp32 training     4       4    4    4        -         16 B
 *     bf16 mixed        2       2    4    4        4         16 B
 *
 * The moments are 8 B of every 16: a 7B-parameter model carries 56 GB of
 * optimizer state, on every data-parallel rank. The grader checks that this
 * program's optimizer state is exactly 8 B per parameter.
 */
#include "xt_nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Adam's state: the two moments of n parameters. */
typedef struct {
    long n;
    float *m, *v; /* n floats each; zero before the first step */
} adam_state;

/* The moments of n parameters, zeroed, counted as optimizer memory. */
void adam_state_init(adam_state *s, long n)
{
    /*
     * TODO: allocate the moments s->m and s->v, n floats each, zeroed; set s->n.
     *   Graded: each rank's peak of XT_MEM_OPTIMIZER bytes is exactly 8 n, so they come from
     *   xt_alloc(XT_MEM_OPTIMIZER, bytes); malloc'd memory is not counted.
     */
    XT_TODO("allocate the moments s->m and s->v, n floats each, zeroed; set s->n.", s, n);
}

void adam_state_free(adam_state *s)
{
    xt_free(s->m);
    xt_free(s->v);
    s->m = s->v = NULL;
}

/*
 * One AdamW step on n parameters, in place. step counts from 1; m and v are
 * the moments, updated in place: the next call continues from them.
 */
void adam_update(float *params, const float *grads, float *m, float *v, long n, long step,
                 const xt_adam *h)
{
    /*
     * TODO: one AdamW step in place (the header comment).
     *   Graded after every step against float64 AdamW within 1e-5 (lr + |p|): decoupled decay
     *   (not L2), bias correction with this step number, eps outside the sqrt, and m, v stored
     *   back for the next call. Calling libxt's xt_adam_update is refused: write the update.
     */
    XT_TODO("one AdamW step in place (the header comment).", params, grads, m, v, n, step, h);
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc3_zero/drivers/adam.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
