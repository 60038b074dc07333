/*
 * mixed_precision.c: bf16 compute, fp32 master weights, dynamic loss scaling.
 * docs/lc3_zero.md#mixed_precision
 *
 * Matrix units multiply bf16 several times faster than fp32, and a bf16
 * tensor moves half the bytes. But bf16 keeps 8 significant bits: 1.0 + x
 * rounds back to 1.0 for any x below 2^-8 = 0.004, so an Adam step of about
 * lr = 1e-4 on a bf16 weight near 1 is lost entirely. So the weights are kept
 * twice:
 *
 *   fp32 master --round--> bf16 compute copy --forward, backward--> bf16 grads
 *        ^                                    (of scale x loss)          |
 *        |                                                          all finite?
 *        |                                                      yes |       | no
 *        +---- AdamW in fp32 <---- unscale: g / scale <-------------+       |
 *              (moments fp32)                          skip the step, scale / 2
 *
 * The compute copy is rebuilt from the master every step; the update lands
 * on the master, where small steps add up.
 *
 * Loss scaling: gradients are often tiny, and a low-precision format loses
 * them (fp16's smallest normal is 6e-5). Backward therefore runs on
 * scale x loss, which multiplies every gradient by scale (a power of two:
 * exact), and the update divides it out again. Too large a scale overflows
 * to inf; dynamic loss scaling (PyTorch's GradScaler) adapts it:
 *
 *   any gradient inf or NaN?  yes: skip the step: master, moments and Adam's
 *                                  step count unchanged; scale /= 2, clean = 0
 *                             no:  g /= scale; AdamW on the master; clean += 1;
 *                                  after `interval` clean steps in a row,
 *                                  scale *= 2 and clean = 0
 *
 * bf16 has fp32's exponent range, so with bf16 overflow and underflow are
 * rare and frameworks often skip the scaler; fp16 needs it. The mechanics
 * are the same, and here they run on bf16 with one rounding function,
 * xt_bf16_round (nearest, ties to even). libxt's GEMM is float32, so the
 * compute copy and the gradients are bf16 values held in float slots; a GPU
 * keeps them in 2 bytes each.
 *
 * Memory per parameter: compute copy 2 B + gradient 2 B (bf16) + master 4 B
 * + moments 8 B (fp32) = 16 B, as much as plain fp32 training: mixed
 * precision saves time, bandwidth and activation memory, not model state.
 * The grader checks master = 4 B and optimizer state = 8 B per parameter.
 * Cost per step: one extra pass over the parameters each for rounding, the
 * finiteness check and the unscaling.
 */
#include "xt_nn.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The state of mixed-precision training: everything kept in fp32. */
typedef struct {
    long n;        /* parameters */
    float *master; /* n fp32 master weights: XT_MEM_MASTER */
    float *m, *v;  /* Adam's moments, n each: XT_MEM_OPTIMIZER */
    long step;     /* Adam steps taken (a skipped step is not one) */
    float scale;   /* the loss scale */
    int clean;     /* clean steps in a row since the last overflow or growth */
    int interval;  /* grow the scale after this many clean steps in a row */
    xt_adam adam;
} mixed_state;

/* The state for model m: its current weights become the master. */
void mixed_init(mixed_state *s, const xt_mlp *m, const xt_adam *h, float scale0, int interval)
{
    /*
     * TODO: allocate the master and the moments; set the counters.
     *   The master: an fp32 copy of m->params in xt_alloc(XT_MEM_MASTER); the moments zeroed in
     *   xt_alloc(XT_MEM_OPTIMIZER); peaks exactly 4 and 8 nparams B (malloc is not counted).
     *   Then n, step 0, scale = scale0, clean 0, interval, and a copy of *h.
     */
    // BEGIN SOLUTION
    long n = m->nparams;
    s->n = n;
    s->master = xt_alloc(XT_MEM_MASTER, sizeof(float) * (size_t)n);
    memcpy(s->master, m->params, sizeof(float) * (size_t)n);
    s->m = xt_alloc(XT_MEM_OPTIMIZER, sizeof(float) * (size_t)n);
    s->v = xt_alloc(XT_MEM_OPTIMIZER, sizeof(float) * (size_t)n);
    s->step = 0;
    s->scale = scale0;
    s->clean = 0;
    s->interval = interval;
    s->adam = *h;
    // END SOLUTION
}

void mixed_free(mixed_state *s)
{
    xt_free(s->master);
    xt_free(s->m);
    xt_free(s->v);
    s->master = s->m = s->v = NULL;
}

/*
 * One mixed-precision training step of model m on `rows` samples (x:
 * rows x m->dims[0]; target as xt_mlp_backward takes it). Leaves the step's
 * bf16 compute copy in m->params and, on a clean step, the true (unscaled)
 * gradient in m->grads. Sets *loss; returns 1 if the step was skipped.
 */
int mixed_precision_step(mixed_state *s, xt_mlp *m, const float *x, const void *target, int rows,
                         float *loss)
{
    /*
     * TODO: round, backward at the loss scale, skip or update.
     *   Checked every step: m->params = the master rounded by xt_bf16_round, bit for bit. Any inf
     *   or NaN gradient: skip (return 1), the master (bit for bit), moments and s->step untouched.
     *   Else (return 0) m->grads = the gradient at loss scale s->scale, rounded to bf16, divided
     *   by the scale (one bf16 ulp; grad x scale a bf16 value exactly), and the master = float64
     *   AdamW on it within 2e-6 (lr + |w|). The scale: halved on a skip, doubled after
     *   s->interval clean steps in a row, both resetting s->clean. *loss: backward's (unscaled).
     */
    // BEGIN SOLUTION
    long n = m->nparams;
    xt_bf16_round_array(m->params, s->master, n);
    xt_mlp_zero_grad(m);
    xt_mlp_forward(m, x, rows);
    *loss = xt_mlp_backward(m, target, s->scale, NULL, NULL);
    xt_bf16_round_array(m->grads, m->grads, n);
    if (!xt_all_finite(m->grads, n)) {
        s->scale *= 0.5f;
        s->clean = 0;
        return 1;
    }
    for (long i = 0; i < n; i++)
        m->grads[i] /= s->scale;
    s->step++;
    xt_adam_update(s->master, m->grads, s->m, s->v, n, s->step, &s->adam);
    if (++s->clean == s->interval) {
        s->scale *= 2.0f;
        s->clean = 0;
    }
    return 0;
    // END SOLUTION
}

/*
 * The grader's cases, the demo and main: grader/lectures/lc3_zero/drivers/mixed_precision.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
