/*
 * test_kit.c: lecture 7's kit (kit.h): top-k routing and the bank of experts, run on inputs from grader/nntest.py, which compares
 * what comes back with grader/nn.py's twins (the case files: nn_case.h).
 *
 *     kind     inputs                  outputs
 *     topk_route logits dw             idx w probs dlogits (T, E, k, renorm)
 *     experts  x w dy counts dparams0  y y_nokeep dx dparams (d, ff, first)
 */
#include "kit.h"
#include "tests/nn_case.h"

static void run_topk_route(const test_case *c)
{
    int T = (int)iparam(c, "T"), E = (int)iparam(c, "E"), k = (int)iparam(c, "k"),
        renorm = (int)iparam(c, "renorm");
    xt_array logits, dw;
    floats(c, "logits", &logits);
    floats(c, "dw", &dw);
    int *idx = xt_malloc(sizeof(int) * (size_t)((long)T * k + 1));
    float *w = nans((long)T * k), *probs = nans((long)T * E), *dlogits = nans((long)T * E);
    xt_topk_route(idx, w, probs, logits.data, T, E, k, renorm);
    xt_topk_route_backward(dlogits, dw.data, probs, idx, T, E, k, renorm);
    save(c, "idx", idx, XT_I32, T, k);
    save(c, "w", w, XT_F32, T, k);
    save(c, "probs", probs, XT_F32, T, E);
    save(c, "dlogits", dlogits, XT_F32, T, E);
    free(idx);
    FREE_BUFFERS(w, probs, dlogits);
    FREE_ARRAYS(&logits, &dw);
}

static void run_experts(const test_case *c)
{
    int d = (int)iparam(c, "d"), ff = (int)iparam(c, "ff"), first = (int)iparam(c, "first");
    xt_array x, params, dy, dparams, counts = load(c, "counts", XT_I32);
    floats(c, "x", &x);
    floats(c, "w", &params);
    floats(c, "dy", &dy);
    floats(c, "dparams0", &dparams);
    int ne = (int)counts.count;
    long n = (long)x.count / d;
    float *y = nans(n * d), *dx = nans(n * d), *keep = nans(3 * n * ff);
    xt_experts_forward(y, keep, x.data, counts.data, first, ne, params.data, d, ff);
    xt_experts_backward(unless_null(c, "dx", dx), unless_null(c, "dparams", dparams.data), dy.data,
                        x.data, keep, counts.data, first, ne, params.data, d, ff);
    float *y2 = nans(n * d); /* without keep: the same y */
    xt_experts_forward(y2, NULL, x.data, counts.data, first, ne, params.data, d, ff);
    save(c, "y", y, XT_F32, n, d);
    save(c, "y_nokeep", y2, XT_F32, n, d);
    save(c, "dx", dx, XT_F32, n, d);
    save(c, "dparams", dparams.data, XT_F32, (long)dparams.count, -1);
    FREE_BUFFERS(y, y2, dx, keep);
    FREE_ARRAYS(&x, &params, &dy, &dparams, &counts);
}

int main(int argc, char **argv)
{
    static const nn_case_kind kinds[] = {{"topk_route", run_topk_route}, {"experts", run_experts}};
    return nn_case_main(argc, argv, "lc7_ep kit", kinds, sizeof kinds / sizeof kinds[0], NULL, NULL,
                        NULL);
}
