/*
 * tp_grad.c: the column-parallel layer's two backward products, for
 * tp_async_linear.c, each as one call the grader can see: the input gradient
 * (whose all-reduce the exercise overlaps) and the weight gradient (the work
 * it overlaps with). The weight gradient logs a G event with what was in
 * flight while it ran, so that the grader sees the overlap rather than a time.
 * And the drivers' case of a column-parallel backward, which both exercises share.
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

void tp_col_backward_case(xt_case *c, tp_col_backward_fn *fn)
{
    MPI_Comm comm = xt_case_comm(c);
    int rows = (int)xt_case_int(c, "rows"), in = (int)xt_case_int(c, "in");
    int out = (int)xt_case_int(c, "out"), np, rank, lo, out_local;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_block(out, np, rank, &lo, &out_local);
    int bias = (int)xt_case_int(c, "bias");
    xt_array x = xt_case_input_const(c, "x"), w = xt_case_input_const(c, "w");
    xt_array dy = xt_case_input_const(c, "dy"), dw = xt_case_input(c, "dw");
    float *db = bias ? xt_case_input(c, "db").data : NULL;
    float *dx = xt_case_alloc(c, "dx", (long)rows * in, XT_F32);
    fn(x.data, w.data, dy.data, dx, dw.data, db, rows, in, out_local, comm);
    xt_case_output(c, "dx", dx, XT_F32, (long)rows * in);
    xt_case_output(c, "dw", dw.data, XT_F32, dw.count);
    if (bias)
        xt_case_output(c, "db", db, XT_F32, out_local);
}
