/*
 * tp_grad.c: the column-parallel layer's two backward products, for
 * tp_async_linear.c, each as one call the grader can see: the input gradient
 * (whose all-reduce the exercise overlaps) and the weight gradient (the work
 * it overlaps with). The weight gradient logs a G event with what was in
 * flight while it ran, so that the grader sees the overlap rather than a time.
 */
#include "kit.h"
#include "xt_harness.h"

__attribute__((constructor)) static void declare_events(void)
{
    xt_event_kind("G", "weight gradient: events-before exchanges-pending their-bytes");
}

void xt_tp_input_grad(float *dx, const float *dy, const float *w, int rows, int in, int out_local)
{
    xt_linear_backward(dx, NULL, NULL, dy, NULL, w, rows, in, out_local);
}

void xt_tp_weight_grad(float *dw, float *db, const float *dy, const float *x, int rows, int in,
                       int out_local)
{
    long events = xt_events_logged(), bytes = 0;
    xt_linear_backward(NULL, dw, db, dy, x, NULL, rows, in, out_local);
    int pending = xt_exchanges_pending(&bytes);
    xt_event("G", "%ld %d %ld", events, pending, bytes);
}
