/*
 * test_nn.c: the numeric layer (xt_nn.h) run on inputs from grader/nntest.py,
 * which compares what comes back with grader/nn.py.
 *
 *     test_nn DIR        (one rank: mpirun -np 1, or started directly)
 *
 * The case files are nn_case.h's; the kinds this program runs:
 *
 *     kind     inputs                  outputs
 *     rng      -                       u64 below uniform (three streams from one seed)
 *     perm     -                       perm
 *     gemm     a b c                   out
 *     linear   x w b dy dw0 db0        y dx dw db
 *     act      x dy                    y dx dx_inplace
 *     mse, ce  pred target             loss (with and without gradient) d
 *     softmax  x                       y y_inplace
 *     sgd      p g                     out
 *     mlp      g0 x0 t0 [x1 t1]        params layout names dims y0 [y1] loss grads
 *                                      hook_layers hook_grads loss_only grads_plain
 *     bf16     x                       y y_array y_inplace finite_each finite_all
 *     adam     p g m0 v0               p_steps (after each step) m v
 *     layers   g0 x0 t0 x1 t1          ranges y0 y1 loss grads
 *     rmsnorm  x gamma dy dgamma0      y rstd dx dgamma
 *     silu     x dy                    y dx dx_inplace
 *     swiglu   x wg wu wd dy dw*0      y g u h dx dwg dwu dwd
 *     attention q k v dout             out lse dq dk dv
 *     embedding tokens table dy dtable0  y dtable
 *     decoder  x w dy dparams0         layout y dx dparams
 *
 * Gradients that accumulate start from the case's *0 arrays (nonzero), so
 * that = where += belongs shows; null=a,b passes those gradients as NULL.
 *
 * The judging happens in Python, where the reference is; this side checks
 * only what NumPy cannot see (the hook's model pointer, the names of
 * activations and losses, and that the layer-by-layer MLP API, with each
 * layer's weights and gradients in a buffer of its own, gives the very bits
 * of xt_mlp_forward/xt_mlp_backward). Buffers that a function must overwrite
 * start as NaN, so that reading them instead shows up in the result.
 *
 *     test_nn --die MODE  calls the layer API out of order, which must stop
 *                         the run with a clear message (nntest.py checks it):
 *                         forward_skip forward_past_end loss_early
 *                         backward_before_loss backward_skip; and the
 *                         transformer pieces' dimension checks:
 *                         embedding_range gqa_heads
 */
#include "nn_case.h"

/* ------------------------------------------------------------ the kinds */

static void run_rng(const test_case *c)
{
    long n = iparam(c, "count");
    uint64_t *v = xt_malloc(sizeof(uint64_t) * (size_t)(n + 1));
    float *f = xt_malloc(sizeof(float) * (size_t)(n + 1));
    xt_rng g = xt_rng_seed(uparam(c, "seed"));
    for (long i = 0; i < n; i++)
        v[i] = xt_rng_u64(&g);
    save(c, "u64", v, XT_U64, n, -1);
    g = xt_rng_seed(uparam(c, "seed"));
    uint64_t below = uparam(c, "below");
    for (long i = 0; i < n; i++)
        v[i] = xt_rng_below(&g, below);
    save(c, "below", v, XT_U64, n, -1);
    g = xt_rng_seed(uparam(c, "seed"));
    float lo = fparam(c, "lo"), hi = fparam(c, "hi");
    for (long i = 0; i < n; i++)
        f[i] = xt_rng_uniform(&g, lo, hi);
    save(c, "uniform", f, XT_F32, n, -1);
    free(v);
    free(f);
}

static void run_perm(const test_case *c)
{
    long n = iparam(c, "n");
    long *p = xt_malloc(sizeof(long) * (size_t)(n + 1));
    int64_t *out = xt_malloc(sizeof(int64_t) * (size_t)(n + 1));
    xt_permutation(uparam(c, "seed"), n, p);
    for (long i = 0; i < n; i++)
        out[i] = p[i]; /* long is 32 bits on some platforms; the file says int64 */
    save(c, "perm", out, XT_I64, n, -1);
    free(p);
    free(out);
}

static void run_gemm(const test_case *c)
{
    int m = (int)iparam(c, "m"), n = (int)iparam(c, "n");
    xt_array a, b, cc;
    floats(c, "a", &a);
    floats(c, "b", &b);
    float *out = floats(c, "c", &cc);
    xt_gemm((int)iparam(c, "ta"), (int)iparam(c, "tb"), m, n, (int)iparam(c, "k"),
            fparam(c, "alpha"), a.data, b.data, fparam(c, "beta"), out);
    save(c, "out", out, XT_F32, m, n);
    xt_array_free(&a);
    xt_array_free(&b);
    xt_array_free(&cc);
}

static void run_linear(const test_case *c)
{
    int rows = (int)iparam(c, "rows"), in = (int)iparam(c, "in"), out = (int)iparam(c, "out");
    const char *null = param(c, "null"); /* which of dx, dw, db are NULL */
    xt_array x, w, b, dy, dw, db;
    floats(c, "x", &x);
    floats(c, "w", &w);
    floats(c, "dy", &dy);
    floats(c, "dw0", &dw);
    floats(c, "db0", &db);
    int bias = (int)iparam(c, "bias");
    if (bias)
        floats(c, "b", &b);
    float *y = nans((long)rows * out), *dx = nans((long)rows * in);
    xt_linear_forward(y, x.data, w.data, bias ? b.data : NULL, rows, in, out);
    save(c, "y", y, XT_F32, rows, out);
    xt_linear_backward(strstr(null, "dx") ? NULL : dx, strstr(null, "dw") ? NULL : dw.data,
                       strstr(null, "db") ? NULL : db.data, dy.data, x.data, w.data, rows, in, out);
    save(c, "dx", dx, XT_F32, rows, in);
    save(c, "dw", dw.data, XT_F32, in, out);
    save(c, "db", db.data, XT_F32, out, -1);
    free(y);
    free(dx);
    if (bias)
        xt_array_free(&b);
    FREE_ARRAYS(&x, &w, &dy, &dw, &db);
}

/* An elementwise function and its backward: y, dx, and dx computed in place (dx = dy). */
static void run_pointwise(const test_case *c, void (*forward)(float *, const float *, long),
                          void (*backward)(float *, const float *, const float *, long))
{
    xt_array x, dy;
    floats(c, "x", &x);
    floats(c, "dy", &dy);
    long n = x.count;
    float *y = nans(n), *dx = nans(n), *inplace = xt_malloc(sizeof(float) * (size_t)(n + 1));
    forward(y, x.data, n);
    backward(dx, dy.data, x.data, n);
    memcpy(inplace, dy.data, sizeof(float) * (size_t)n);
    backward(inplace, inplace, x.data, n); /* documented: dx may be dy */
    save(c, "y", y, XT_F32, n, -1);
    save(c, "dx", dx, XT_F32, n, -1);
    save(c, "dx_inplace", inplace, XT_F32, n, -1);
    FREE_BUFFERS(y, dx, inplace);
    FREE_ARRAYS(&x, &dy);
}

static xt_act pointwise_act; /* the activation run_act's two functions apply */

static void act_forward(float *y, const float *x, long n)
{
    xt_act_forward(pointwise_act, y, x, n);
}

static void act_backward(float *dx, const float *dy, const float *x, long n)
{
    xt_act_backward(pointwise_act, dx, dy, x, n);
}

static void run_act(const test_case *c)
{
    pointwise_act = act_param(c);
    run_pointwise(c, act_forward, act_backward);
}

static void run_loss(const test_case *c)
{
    int rows = (int)iparam(c, "rows"), cols = (int)iparam(c, "cols");
    int ce = !strcmp(c->kind, "ce");
    xt_array pred, target;
    floats(c, "pred", &pred);
    target = load(c, "target", ce ? XT_I32 : XT_F32);
    float *d = nans((long)rows * cols), loss[2];
    if (ce) {
        loss[0] = xt_cross_entropy_loss(d, pred.data, target.data, rows, cols);
        loss[1] = xt_cross_entropy_loss(NULL, pred.data, target.data, rows, cols);
    } else {
        loss[0] = xt_mse_loss(d, pred.data, target.data, rows, cols);
        loss[1] = xt_mse_loss(NULL, pred.data, target.data, rows, cols);
    }
    save(c, "loss", loss, XT_F32, 2, -1);
    save(c, "d", d, XT_F32, rows, cols);
    free(d);
    xt_array_free(&pred);
    xt_array_free(&target);
}

static void run_softmax(const test_case *c)
{
    int rows = (int)iparam(c, "rows"), cols = (int)iparam(c, "cols");
    xt_array x;
    floats(c, "x", &x);
    float *y = nans(x.count);
    xt_softmax_rows(y, x.data, rows, cols);
    save(c, "y", y, XT_F32, rows, cols);
    xt_softmax_rows(x.data, x.data, rows, cols); /* documented: y may be x */
    save(c, "y_inplace", x.data, XT_F32, rows, cols);
    free(y);
    xt_array_free(&x);
}

static void run_sgd(const test_case *c)
{
    xt_array p, g;
    floats(c, "p", &p);
    floats(c, "g", &g);
    xt_sgd(p.data, g.data, p.count, fparam(c, "lr"));
    save(c, "out", p.data, XT_F32, p.count, -1);
    xt_array_free(&p);
    xt_array_free(&g);
}

/* ------------------------------------------------------------------ MLP */

/* What the backward hook saw: the layer of each call and the gradients then. */
typedef struct {
    const xt_mlp *m;
    int calls, cap;
    int32_t *layers;
    float *snapshots; /* cap x nparams */
} hook_log;

static void record_grads(xt_mlp *m, int layer, void *ctx)
{
    hook_log *h = ctx;
    if (m != h->m)
        FAIL("hook called with another model (%p, not %p)", (void *)m, (const void *)h->m);
    if (h->calls == h->cap) {
        FAIL("hook called more than %d times", h->cap);
        return;
    }
    h->layers[h->calls] = layer;
    memcpy(h->snapshots + (long)h->calls * m->nparams, m->grads, sizeof(float) * m->nparams);
    h->calls++;
}

static void run_mlp(const test_case *c)
{
    xt_mlp m;
    xt_loss loss;
    XT_CHECK(xt_loss_from_name(param(c, "loss"), &loss), "unknown loss %s", param(c, "loss"));
    xt_mlp_init_str(&m, param(c, "dims"), act_param(c), loss);
    xt_mlp_randomize(&m, uparam(c, "seed"));
    save(c, "params", m.params, XT_F32, m.nparams, -1);

    /* The layout, for NumPy to compare with nn.Mlp.tensors: names and numbers. */
    int64_t layout[2 * XT_MLP_MAX_LAYERS][5];
    char names[2 * XT_MLP_MAX_LAYERS][8];
    for (int t = 0; t < m.ntensors; t++) {
        const xt_tensor *v = &m.tensor[t];
        int64_t row[5] = {v->layer, v->rows, v->cols, v->offset, v->count};
        memcpy(layout[t], row, sizeof row);
        memcpy(names[t], v->name, 8);
    }
    save(c, "layout", layout, XT_I64, m.ntensors, 5);
    save(c, "names", names, XT_U8, m.ntensors, 8);
    int64_t dims[XT_MLP_MAX_LAYERS + 2] = {m.nlayers};
    for (int l = 0; l <= m.nlayers; l++)
        dims[l + 1] = m.dims[l];
    save(c, "dims", dims, XT_I64, m.nlayers + 2, -1);

    /* Gradients that are already there: backward must add to them. */
    xt_array g0;
    floats(c, "g0", &g0);
    memcpy(m.grads, g0.data, sizeof(float) * m.nparams);
    xt_array_free(&g0);

    int batches = (int)iparam(c, "batches");
    float scale = fparam(c, "scale");
    hook_log h = {&m, 0, 2 * batches * m.nlayers, NULL, NULL};
    h.layers = xt_malloc(sizeof(int32_t) * h.cap);
    h.snapshots = xt_malloc(sizeof(float) * h.cap * m.nparams);
    xt_array x[2], t[2];
    XT_CHECK(batches >= 1 && batches <= 2, "1 or 2 batches, not %d", batches);
    float losses[2], only[2];
    int out = m.dims[m.nlayers];
    for (int b = 0; b < batches; b++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", b);
        floats(c, name, &x[b]);
        snprintf(name, sizeof name, "t%d", b);
        t[b] = load(c, name, loss == XT_MSE ? XT_F32 : XT_I32);
        int rows = (int)x[b].shape[0];
        const float *y = xt_mlp_forward(&m, x[b].data, rows);
        snprintf(name, sizeof name, "y%d", b);
        save(c, name, y, XT_F32, rows, out);
        losses[b] = xt_mlp_backward(&m, t[b].data, scale, record_grads, &h);
    }
    save(c, "loss", losses, XT_F32, batches, -1);
    save(c, "grads", m.grads, XT_F32, m.nparams, -1);
    save(c, "hook_layers", h.layers, XT_I32, h.calls, -1);
    save(c, "hook_grads", h.snapshots, XT_F32, h.calls, m.nparams);

    /* The loss alone, batch by batch; then one plain backward: no hook, scale 1. */
    for (int b = 0; b < batches; b++)
        only[b] = xt_mlp_loss(&m, x[b].data, t[b].data, (int)x[b].shape[0]);
    save(c, "loss_only", only, XT_F32, batches, -1);
    xt_mlp_zero_grad(&m);
    xt_mlp_forward(&m, x[0].data, (int)x[0].shape[0]);
    xt_mlp_backward(&m, t[0].data, 1.0f, NULL, NULL);
    save(c, "grads_plain", m.grads, XT_F32, m.nparams, -1);

    for (int b = 0; b < batches; b++) {
        xt_array_free(&x[b]);
        xt_array_free(&t[b]);
    }
    free(h.layers);
    free(h.snapshots);
    xt_mlp_free(&m);
    if (m.params || m.grads || m.rows_cap)
        FAIL("xt_mlp_free left pointers behind");
}

/* ----------------------------------------------------------------- bf16 */

static void run_bf16(const test_case *c)
{
    xt_array x;
    const float *xs = floats(c, "x", &x);
    long n = x.count;
    float *y = nans(n), *arr = nans(n), *inplace = xt_malloc(sizeof(float) * (size_t)(n + 1));
    int32_t *each = xt_malloc(sizeof(int32_t) * (size_t)(n + 1)), all[3];
    for (long i = 0; i < n; i++) {
        y[i] = xt_bf16_round(xs[i]);
        each[i] = xt_all_finite(xs + i, 1);
    }
    xt_bf16_round_array(arr, xs, n);
    memcpy(inplace, xs, sizeof(float) * (size_t)n);
    xt_bf16_round_array(inplace, inplace, n); /* documented: out may be in */
    all[0] = xt_all_finite(xs, n);
    all[1] = xt_all_finite(y, n);
    all[2] = xt_all_finite(xs, 0);
    save(c, "y", y, XT_F32, n, -1);
    save(c, "y_array", arr, XT_F32, n, -1);
    save(c, "y_inplace", inplace, XT_F32, n, -1);
    save(c, "finite_each", each, XT_I32, n, -1);
    save(c, "finite_all", all, XT_I32, 3, -1);
    free(y);
    free(arr);
    free(inplace);
    free(each);
    xt_array_free(&x);
}

/* ----------------------------------------------------------------- Adam */

static void run_adam(const test_case *c)
{
    xt_adam h = {fparam(c, "lr"), fparam(c, "beta1"), fparam(c, "beta2"), fparam(c, "eps"),
                 fparam(c, "wd")};
    long steps = iparam(c, "steps"), step0 = iparam(c, "step0");
    xt_array p, g, m, v;
    float *ps = floats(c, "p", &p), *gs = floats(c, "g", &g);
    floats(c, "m0", &m);
    floats(c, "v0", &v);
    long n = p.count;
    float *out = xt_malloc(sizeof(float) * (size_t)(steps * n + 1));
    for (long t = 0; t < steps; t++) {
        xt_adam_update(ps, gs + t * n, m.data, v.data, n, step0 + t, &h);
        memcpy(out + t * n, ps, sizeof(float) * (size_t)n);
    }
    save(c, "p_steps", out, XT_F32, steps, n);
    save(c, "m", m.data, XT_F32, n, -1);
    save(c, "v", v.data, XT_F32, n, -1);
    free(out);
    FREE_ARRAYS(&p, &g, &m, &v);
}

/* ------------------------------------------------------- MLP, by layer */

enum { PAD = 16 }; /* NaN floats either side of each layer's own buffer */

/*
 * A NaN-filled block with `n` floats at the returned address, PAD NaNs either
 * side, placed at the same address modulo 64 as `like` (the flat buffer's
 * copy), so that a BLAS kernel that splits its sums by alignment cannot make
 * the two runs differ: what is tested is libxt's layer API, not OpenBLAS.
 */
static float *nans_like(long n, const float *like, float **block)
{
    *block = nans(n + 2 * PAD + 16);
    uintptr_t want = (uintptr_t)like % 64, have = (uintptr_t)(*block + PAD) % 64;
    return *block + PAD + (long)((want - have + 64) % 64) / (long)sizeof(float);
}

static int all_nan(const float *p, long n)
{
    for (long i = 0; i < n; i++)
        if (p[i] == p[i])
            return 0;
    return 1;
}

/*
 * Two models with the same weights: `flat` runs xt_mlp_forward/backward on
 * its buffers, `byl` runs the layer API with each layer's W,b and their
 * gradients copied into buffers of their own, NaN either side; its flat
 * buffers are dropped (drop=1, as a ZeRO-3 rank does) or filled with NaN. Every output, loss and gradient must be bit for bit the
 * same, batch after batch (two batches of different sizes: the activations
 * are reallocated in between, and gradients accumulate).
 */
static void run_layers(const test_case *c)
{
    xt_mlp flat, byl;
    xt_loss loss;
    XT_CHECK(xt_loss_from_name(param(c, "loss"), &loss), "unknown loss %s", param(c, "loss"));
    xt_mlp_init_str(&flat, param(c, "dims"), act_param(c), loss);
    xt_mlp_init_str(&byl, param(c, "dims"), act_param(c), loss);
    xt_mlp_randomize(&flat, uparam(c, "seed"));
    int L = flat.nlayers;
    for (long i = 0; i < flat.nparams; i++) /* biases too, not the zeros randomize gives */
        flat.params[i] += 0.01f * (float)((i * 7) % 13 - 6);
    xt_array g0a;
    const float *g0 = floats(c, "g0", &g0a);
    memcpy(flat.grads, g0, sizeof(float) * (size_t)flat.nparams);

    /* The layout the layer API promises: layer l is W_l then b_l, contiguous. */
    int64_t ranges[XT_MLP_MAX_LAYERS][2];
    for (int l = 0; l < L; l++) {
        long off = xt_mlp_layer_offset(&flat, l), cnt = xt_mlp_layer_count(&flat, l);
        ranges[l][0] = off;
        ranges[l][1] = cnt;
        const xt_tensor *w = &flat.tensor[2 * l], *b = &flat.tensor[2 * l + 1];
        if (off != w->offset || cnt != w->count + b->count || b->offset != off + w->count ||
            off + cnt != (l + 1 < L ? xt_mlp_layer_offset(&flat, l + 1) : flat.nparams))
            FAIL("case %d: layer %d: offset %ld count %ld, but W at %ld (%ld) b at %ld (%ld)",
                 c->id, l, off, cnt, w->offset, w->count, b->offset, b->count);
    }
    save(c, "ranges", ranges, XT_I64, L, 2);

    float *lp[XT_MLP_MAX_LAYERS], *lg[XT_MLP_MAX_LAYERS];   /* layer l's W,b and gradients */
    float *lpb[XT_MLP_MAX_LAYERS], *lgb[XT_MLP_MAX_LAYERS]; /* the blocks around them */
    for (int l = 0; l < L; l++) {
        long off = xt_mlp_layer_offset(&flat, l), cnt = xt_mlp_layer_count(&flat, l);
        lp[l] = nans_like(cnt, flat.params + off, &lpb[l]);
        lg[l] = nans_like(cnt, flat.grads + off, &lgb[l]);
        memcpy(lp[l], flat.params + off, sizeof(float) * (size_t)cnt);
        memcpy(lg[l], g0 + off, sizeof(float) * (size_t)cnt);
    }
    /* Its own flat buffers: dropped (ZeRO-3), or kept full of NaN, which must not show. */
    int drop = (int)iparam(c, "drop");
    if (drop) {
        xt_mlp_drop_params(&byl);
        xt_mlp_drop_grads(&byl);
    } else {
        for (long i = 0; i < byl.nparams; i++)
            byl.params[i] = byl.grads[i] = NAN;
    }
    xt_array_free(&g0a);

    float scale = fparam(c, "scale"), losses[2];
    int out = flat.dims[L];
    for (int b = 0; b < 2; b++) {
        char name[16];
        xt_array x, t;
        snprintf(name, sizeof name, "x%d", b);
        floats(c, name, &x);
        snprintf(name, sizeof name, "t%d", b);
        t = load(c, name, loss == XT_MSE ? XT_F32 : XT_I32);
        int rows = (int)x.shape[0];
        long ny = (long)rows * out;

        const float *y = xt_mlp_forward(&flat, x.data, rows);
        xt_mlp_forward_begin(&byl, x.data, rows);
        for (int l = 0; l < L; l++)
            xt_mlp_forward_layer(&byl, l, lp[l]);
        const float *yl = xt_mlp_output(&byl);
        if (!same_bits(y, yl, ny))
            FAIL("case %d batch %d: layer-by-layer output [%ld] %a, xt_mlp_forward's %a", c->id, b,
                 first_diff(y, yl, ny), (double)yl[first_diff(y, yl, ny)],
                 (double)y[first_diff(y, yl, ny)]);
        snprintf(name, sizeof name, "y%d", b);
        save(c, name, yl, XT_F32, rows, out);

        losses[b] = xt_mlp_backward(&flat, t.data, scale, NULL, NULL);
        float lb = xt_mlp_loss_grad(&byl, t.data, scale);
        for (int l = L - 1; l >= 0; l--)
            xt_mlp_backward_layer(&byl, l, lp[l], lg[l]);
        if (memcmp(&lb, &losses[b], sizeof lb))
            FAIL("case %d batch %d: xt_mlp_loss_grad %a, xt_mlp_backward %a", c->id, b, (double)lb,
                 (double)losses[b]);
        for (int l = 0; l < L; l++) {
            long off = xt_mlp_layer_offset(&flat, l), cnt = xt_mlp_layer_count(&flat, l);
            long i = first_diff(flat.grads + off, lg[l], cnt);
            if (i >= 0)
                FAIL("case %d batch %d: layer %d's own gradient buffer [%ld] %a, "
                     "xt_mlp_backward's %a",
                     c->id, b, l, i, (double)lg[l][i], (double)flat.grads[off + i]);
            i = first_diff(flat.params + off, lp[l], cnt);
            if (i >= 0)
                FAIL("case %d batch %d: layer %d's weights changed at [%ld]", c->id, b, l, i);
            if (!all_nan(lg[l] - PAD, PAD) || !all_nan(lg[l] + cnt, PAD))
                FAIL("case %d batch %d: layer %d's backward wrote outside its gradients", c->id, b,
                     l);
        }
        xt_array_free(&x);
        xt_array_free(&t);
    }
    if (!drop && (!all_nan(byl.params, byl.nparams) || !all_nan(byl.grads, byl.nparams)))
        FAIL("case %d: the layer API wrote into the model's own flat buffers", c->id);
    save(c, "loss", losses, XT_F32, 2, -1);
    float *grads = xt_malloc(sizeof(float) * (size_t)flat.nparams);
    for (int l = 0; l < L; l++)
        memcpy(grads + xt_mlp_layer_offset(&flat, l), lg[l],
               sizeof(float) * (size_t)xt_mlp_layer_count(&flat, l));
    save(c, "grads", grads, XT_F32, flat.nparams, -1);
    save(c, "params", flat.params, XT_F32, flat.nparams, -1);
    free(grads);
    for (int l = 0; l < L; l++) {
        free(lpb[l]);
        free(lgb[l]);
    }
    xt_mlp_free(&flat);
    xt_mlp_free(&byl);
}

/* ------------------------------------------------- transformer pieces */

static void run_rmsnorm(const test_case *c)
{
    int rows = (int)iparam(c, "rows"), d = (int)iparam(c, "d");
    xt_array x, gamma, dy, dgamma;
    floats(c, "x", &x);
    floats(c, "gamma", &gamma);
    floats(c, "dy", &dy);
    floats(c, "dgamma0", &dgamma);
    float *y = nans((long)rows * d), *rstd = nans(rows), *dx = nans((long)rows * d);
    xt_rmsnorm_forward(y, rstd, x.data, gamma.data, rows, d, fparam(c, "eps"));
    xt_rmsnorm_backward(unless_null(c, "dx", dx), unless_null(c, "dgamma", dgamma.data), dy.data,
                        x.data, gamma.data, rstd, rows, d);
    save(c, "y", y, XT_F32, rows, d);
    save(c, "rstd", rstd, XT_F32, rows, -1);
    save(c, "dx", dx, XT_F32, rows, d);
    save(c, "dgamma", dgamma.data, XT_F32, d, -1);
    FREE_BUFFERS(y, rstd, dx);
    FREE_ARRAYS(&x, &gamma, &dy, &dgamma);
}

static void run_silu(const test_case *c)
{
    run_pointwise(c, xt_silu_forward, xt_silu_backward);
}

static void run_swiglu(const test_case *c)
{
    int rows = (int)iparam(c, "rows"), d = (int)iparam(c, "d"), ff = (int)iparam(c, "ff");
    xt_array x, wg, wu, wd, dy, dwg, dwu, dwd;
    floats(c, "x", &x);
    floats(c, "wg", &wg);
    floats(c, "wu", &wu);
    floats(c, "wd", &wd);
    floats(c, "dy", &dy);
    floats(c, "dwg0", &dwg);
    floats(c, "dwu0", &dwu);
    floats(c, "dwd0", &dwd);
    long nh = (long)rows * ff;
    float *y = nans((long)rows * d), *g = nans(nh), *u = nans(nh), *h = nans(nh);
    float *dx = nans((long)rows * d);
    xt_swiglu_forward(y, g, u, h, x.data, wg.data, wu.data, wd.data, rows, d, ff);
    xt_swiglu_backward(unless_null(c, "dx", dx), unless_null(c, "dwg", dwg.data),
                       unless_null(c, "dwu", dwu.data), unless_null(c, "dwd", dwd.data), dy.data,
                       x.data, g, u, h, wg.data, wu.data, wd.data, rows, d, ff);
    save(c, "y", y, XT_F32, rows, d);
    save(c, "g", g, XT_F32, rows, ff);
    save(c, "u", u, XT_F32, rows, ff);
    save(c, "h", h, XT_F32, rows, ff);
    save(c, "dx", dx, XT_F32, rows, d);
    save(c, "dwg", dwg.data, XT_F32, d, ff);
    save(c, "dwu", dwu.data, XT_F32, d, ff);
    save(c, "dwd", dwd.data, XT_F32, ff, d);
    FREE_BUFFERS(y, g, u, h, dx);
    FREE_ARRAYS(&x, &wg, &wu, &wd, &dy, &dwg, &dwu, &dwd);
}

static void run_attention(const test_case *c)
{
    int batch = (int)iparam(c, "batch"), T = (int)iparam(c, "T"), hq = (int)iparam(c, "hq"),
        hkv = (int)iparam(c, "hkv"), hd = (int)iparam(c, "hd");
    xt_array q, k, v, dout;
    floats(c, "q", &q);
    floats(c, "k", &k);
    floats(c, "v", &v);
    floats(c, "dout", &dout);
    long rows = (long)batch * T;
    float *out = nans(rows * hq * hd), *lse = nans(rows * hq), *dq = nans(rows * hq * hd);
    float *dk = nans(rows * hkv * hd), *dv = nans(rows * hkv * hd);
    xt_attention_forward(out, lse, q.data, k.data, v.data, batch, T, hq, hkv, hd);
    xt_attention_backward(unless_null(c, "dq", dq), unless_null(c, "dk", dk),
                          unless_null(c, "dv", dv), dout.data, q.data, k.data, v.data, out, lse,
                          batch, T, hq, hkv, hd);
    save(c, "out", out, XT_F32, rows, (long)hq * hd);
    save(c, "lse", lse, XT_F32, batch, (long)hq * T);
    save(c, "dq", dq, XT_F32, rows, (long)hq * hd);
    save(c, "dk", dk, XT_F32, rows, (long)hkv * hd);
    save(c, "dv", dv, XT_F32, rows, (long)hkv * hd);
    FREE_BUFFERS(out, lse, dq, dk, dv);
    FREE_ARRAYS(&q, &k, &v, &dout);
}

static void run_embedding(const test_case *c)
{
    int vocab = (int)iparam(c, "vocab"), d = (int)iparam(c, "d");
    xt_array tokens = load(c, "tokens", XT_I32), table, dy, dtable;
    floats(c, "table", &table);
    floats(c, "dy", &dy);
    floats(c, "dtable0", &dtable);
    int n = (int)tokens.count;
    float *y = nans((long)n * d);
    xt_embedding_forward(y, tokens.data, n, table.data, vocab, d);
    xt_embedding_backward(dtable.data, tokens.data, n, dy.data, vocab, d);
    save(c, "y", y, XT_F32, n, d);
    save(c, "dtable", dtable.data, XT_F32, vocab, d);
    free(y);
    FREE_ARRAYS(&tokens, &table, &dy, &dtable);
}

static void run_decoder(const test_case *c)
{
    xt_decoder_shape s = {(int)iparam(c, "d"),  (int)iparam(c, "hq"), (int)iparam(c, "hkv"),
                          (int)iparam(c, "hd"), (int)iparam(c, "ff"), fparam(c, "eps")};
    int batch = (int)iparam(c, "batch"), T = (int)iparam(c, "T");
    xt_decoder_layout l = xt_decoder_layout_of(&s);
    int64_t layout[10] = {l.norm1, l.wq, l.wk, l.wv, l.wo, l.norm2, l.wg, l.wu, l.wd, l.total};
    save(c, "layout", layout, XT_I64, 10, -1);
    xt_array x, params, dy, dparams;
    floats(c, "x", &x);
    floats(c, "w", &params);
    floats(c, "dy", &dy);
    floats(c, "dparams0", &dparams);
    XT_CHECK(params.count == l.total, "case %d: %ld parameters, the layout says %ld", c->id,
             params.count, l.total);
    long n = (long)batch * T * s.d;
    float *y = nans(n), *dx = nans(n);
    size_t before = xt_mem_current(XT_MEM_ACTIVATIONS);
    xt_decoder_cache *cache = xt_decoder_forward(y, x.data, params.data, &s, batch, T);
    size_t kept = xt_mem_current(XT_MEM_ACTIVATIONS) - before;
    if (n && !kept)
        FAIL("case %d: xt_decoder_forward kept no activations (XT_MEM_ACTIVATIONS)", c->id);
    xt_decoder_backward(unless_null(c, "dx", dx), unless_null(c, "dparams", dparams.data), dy.data,
                        params.data, cache);
    if (xt_mem_current(XT_MEM_ACTIVATIONS) != before)
        FAIL("case %d: after xt_decoder_backward %zu bytes of activations, %zu before forward",
             c->id, xt_mem_current(XT_MEM_ACTIVATIONS), before);
    save(c, "y", y, XT_F32, (long)batch * T, s.d);
    save(c, "dx", dx, XT_F32, (long)batch * T, s.d);
    save(c, "dparams", dparams.data, XT_F32, l.total, -1);
    FREE_BUFFERS(y, dx);
    FREE_ARRAYS(&x, &params, &dy, &dparams);
}

/* The layer API called out of order: each mode must die in libxt, never come back. */
static void die_out_of_order(const char *mode)
{
    xt_mlp m;
    xt_mlp_init_str(&m, "3,4,2", XT_RELU, XT_MSE);
    xt_mlp_randomize(&m, 1);
    float x[2 * 3] = {1, 2, 3, -1, -2, -3}, target[2 * 2] = {0};
    const float *w0 = m.params + xt_mlp_layer_offset(&m, 0);
    const float *w1 = m.params + xt_mlp_layer_offset(&m, 1);
    float *g0 = m.grads + xt_mlp_layer_offset(&m, 0), *g1 = m.grads + xt_mlp_layer_offset(&m, 1);
    xt_mlp_forward_begin(&m, x, 2);
    if (!strcmp(mode, "forward_skip")) {
        xt_mlp_forward_layer(&m, 1, w1); /* layer 0 first */
    } else if (!strcmp(mode, "forward_past_end")) {
        xt_mlp_forward_layer(&m, 0, w0);
        xt_mlp_forward_layer(&m, 1, w1);
        xt_mlp_forward_layer(&m, 2, w1); /* there is no layer 2 */
    } else if (!strcmp(mode, "loss_early")) {
        xt_mlp_forward_layer(&m, 0, w0);
        xt_mlp_loss_grad(&m, target, 1.0f); /* layer 1 has not run */
    } else if (!strcmp(mode, "backward_before_loss")) {
        xt_mlp_forward_layer(&m, 0, w0);
        xt_mlp_forward_layer(&m, 1, w1);
        xt_mlp_backward_layer(&m, 1, w1, g1); /* no xt_mlp_loss_grad */
    } else if (!strcmp(mode, "backward_skip")) {
        xt_mlp_forward_layer(&m, 0, w0);
        xt_mlp_forward_layer(&m, 1, w1);
        xt_mlp_loss_grad(&m, target, 1.0f);
        xt_mlp_backward_layer(&m, 0, w0, g0); /* layer 1 first */
    } else if (!strcmp(mode, "embedding_range")) {
        int tokens[4] = {1, 63, 0, 97};
        float table[64 * 2] = {0}, y[4 * 2];
        xt_embedding_forward(y, tokens, 4, table, 64, 2); /* 97 is not in 0..63 */
    } else if (!strcmp(mode, "gqa_heads")) {
        float q[6] = {0}, k[4] = {0}, v[4] = {0}, out[6], lse[3];
        xt_attention_forward(out, lse, q, k, v, 1, 1, 3, 2, 2); /* 2 KV heads for 3 */
    } else {
        xt_die("--die %s: no such mode", mode);
    }
    xt_mlp_free(&m);
}

/* What needs no NumPy: the names of activations and losses, both ways. */
static void check_names(void)
{
    for (int i = 0; i < 2; i++) {
        xt_act a;
        xt_loss l;
        if (!xt_act_from_name(xt_act_name((xt_act)i), &a) || a != (xt_act)i)
            FAIL("activation %d does not survive xt_act_name and back", i);
        if (!xt_loss_from_name(xt_loss_name((xt_loss)i), &l) || l != (xt_loss)i)
            FAIL("loss %d does not survive xt_loss_name and back", i);
    }
    xt_act a;
    xt_loss l;
    if (xt_act_from_name("tanh", &a) || xt_act_from_name("", &a) || xt_loss_from_name("l1", &l))
        FAIL("an unknown activation or loss name was accepted");
}

/* ----------------------------------------------------------------- main */

int main(int argc, char **argv)
{
    static const nn_case_kind kinds[] = {{"rng", run_rng},
                                         {"perm", run_perm},
                                         {"gemm", run_gemm},
                                         {"linear", run_linear},
                                         {"act", run_act},
                                         {"mse", run_loss},
                                         {"ce", run_loss},
                                         {"softmax", run_softmax},
                                         {"sgd", run_sgd},
                                         {"mlp", run_mlp},
                                         {"bf16", run_bf16},
                                         {"adam", run_adam},
                                         {"layers", run_layers},
                                         {"rmsnorm", run_rmsnorm},
                                         {"silu", run_silu},
                                         {"swiglu", run_swiglu},
                                         {"attention", run_attention},
                                         {"embedding", run_embedding},
                                         {"decoder", run_decoder}};
    static const char *const modes[] = {
        "forward_skip",  "forward_past_end", "loss_early", "backward_before_loss",
        "backward_skip", "embedding_range",  "gqa_heads",  NULL};
    return nn_case_main(argc, argv, "nn", kinds, sizeof kinds / sizeof kinds[0], modes,
                        die_out_of_order, check_names);
}
