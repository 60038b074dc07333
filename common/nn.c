/*
 * nn.c: the numeric layer (xt_nn.h). Plain loops for what is elementwise,
 * CBLAS for every matrix product. grader/nn.py is its NumPy twin.
 */
#include "xt_internal.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* OpenBLAS's own call; declared here because Debian's cblas.h may be netlib's. */
void openblas_set_num_threads(int n);

/* ------------------------------------------------------------- random numbers */

xt_rng xt_rng_seed(uint64_t seed)
{
    return (xt_rng){seed};
}

uint64_t xt_rng_u64(xt_rng *g)
{
    uint64_t z = (g->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t xt_rng_below(xt_rng *g, uint64_t n)
{
    /* The largest multiple of n that fits: draws at or above it are redrawn. */
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do
        x = xt_rng_u64(g);
    while (x >= limit);
    return x % n;
}

float xt_rng_uniform(xt_rng *g, float lo, float hi)
{
    float u = (float)(xt_rng_u64(g) >> 40) * (1.0f / 16777216.0f);
    /* Two statements: clang would fuse one into a multiply-add (FMA), whose
     * single rounding is not NumPy's two, and the draws would stop being bit-exact. */
    float span = (hi - lo) * u;
    return lo + span;
}

void xt_rng_fill_uniform(xt_rng *g, float *out, long n, float lo, float hi)
{
    for (long i = 0; i < n; i++)
        out[i] = xt_rng_uniform(g, lo, hi);
}

void xt_permutation(uint64_t seed, long n, long *out)
{
    xt_rng g = xt_rng_seed(seed);
    for (long i = 0; i < n; i++)
        out[i] = i;
    for (long i = n - 1; i > 0; i--) {
        long j = (long)xt_rng_below(&g, (uint64_t)i + 1);
        long t = out[i];
        out[i] = out[j];
        out[j] = t;
    }
}

/* ---------------------------------------------------------------------- GEMM */

void xt_gemm_ld(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc)
{
    /*
     * Ranks share the cores: OpenBLAS's own threads would multiply that.
     * Setting it once here covers every program without touching its main.
     */
    static int single_threaded;
    if (!single_threaded) {
        openblas_set_num_threads(1);
        single_threaded = 1;
    }
    if (m == 0 || n == 0)
        return;
    xti_work_gemm(a, b, m, n);
    if (k == 0) { /* BLAS leaves C alone when k = 0 only with beta = 1 */
        for (long i = 0; i < m; i++)
            for (long j = 0; j < n; j++)
                c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void xt_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
             const float *b, float beta, float *c)
{
    xt_gemm_ld(trans_a, trans_b, m, n, k, alpha, a, trans_a ? m : k, b, trans_b ? k : n, beta, c,
               n);
}

/* -------------------------------------------------------------------- layers */

static const char *const act_names[] = {"relu", "gelu"};
static const char *const loss_names[] = {"mse", "ce"};

const char *xt_act_name(xt_act act)
{
    return act_names[act];
}

const char *xt_loss_name(xt_loss loss)
{
    return loss_names[loss];
}

int xt_act_from_name(const char *name, xt_act *out)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(name, act_names[i])) {
            *out = (xt_act)i;
            return 1;
        }
    return 0;
}

int xt_loss_from_name(const char *name, xt_loss *out)
{
    for (int i = 0; i < 2; i++)
        if (!strcmp(name, loss_names[i])) {
            *out = (xt_loss)i;
            return 1;
        }
    return 0;
}

void xt_linear_forward(float *y, const float *x, const float *w, const float *b, int rows, int in,
                       int out)
{
    if (b)
        for (int r = 0; r < rows; r++)
            memcpy(y + (long)r * out, b, sizeof(float) * (size_t)out);
    xt_gemm(0, 0, rows, out, in, 1.0f, x, w, b ? 1.0f : 0.0f, y);
}

void xt_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int rows, int in, int out)
{
    if (dw)
        xt_gemm(1, 0, in, out, rows, 1.0f, x, dy, 1.0f, dw);
    if (db)
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < out; j++)
                db[j] += dy[(long)r * out + j];
    if (dx)
        xt_gemm(0, 1, rows, in, out, 1.0f, dy, w, 0.0f, dx);
}

#define GELU_C 0.7978845608028654f /* sqrt(2 / pi) */

void xt_act_forward(xt_act act, float *y, const float *x, long n)
{
    for (long i = 0; i < n; i++) {
        float v = x[i];
        if (act == XT_RELU)
            y[i] = v > 0.0f ? v : 0.0f;
        else
            y[i] = 0.5f * v * (1.0f + tanhf(GELU_C * (v + 0.044715f * v * v * v)));
    }
}

void xt_act_backward(xt_act act, float *dx, const float *dy, const float *x, long n)
{
    for (long i = 0; i < n; i++) {
        float v = x[i], d;
        if (act == XT_RELU) {
            d = v > 0.0f ? 1.0f : 0.0f;
        } else {
            float t = tanhf(GELU_C * (v + 0.044715f * v * v * v));
            d = 0.5f * (1.0f + t) +
                0.5f * v * (1.0f - t * t) * GELU_C * (1.0f + 3.0f * 0.044715f * v * v);
        }
        dx[i] = dy[i] * d;
    }
}

float xt_mse_loss(float *dpred, const float *pred, const float *target, int rows, int cols)
{
    long n = (long)rows * cols;
    double sum = 0.0;
    for (long i = 0; i < n; i++) {
        float e = pred[i] - target[i];
        sum += (double)e * e;
        if (dpred)
            dpred[i] = 2.0f * e / (float)n;
    }
    return n ? (float)(sum / (double)n) : 0.0f;
}

void xt_softmax_rows(float *y, const float *x, int rows, int cols)
{
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (long)r * cols;
        float *yr = y + (long)r * cols;
        float mx = -INFINITY;
        for (int j = 0; j < cols; j++)
            mx = xr[j] > mx ? xr[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < cols; j++) {
            yr[j] = expf(xr[j] - mx);
            sum += yr[j];
        }
        for (int j = 0; j < cols; j++)
            yr[j] /= sum;
    }
}

float xt_cross_entropy_loss(float *dlogits, const float *logits, const int32_t *labels, int rows,
                            int classes)
{
    double total = 0.0;
    for (int r = 0; r < rows; r++) {
        const float *z = logits + (long)r * classes;
        int label = labels[r];
        XT_CHECK(label >= 0 && label < classes, "label %d of row %d is not a class in [0, %d)",
                 label, r, classes);
        float mx = -INFINITY;
        for (int j = 0; j < classes; j++)
            mx = z[j] > mx ? z[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j < classes; j++)
            sum += expf(z[j] - mx);
        float logsum = logf(sum);
        total += (double)(logsum - (z[label] - mx));
        if (dlogits) {
            float *d = dlogits + (long)r * classes;
            for (int j = 0; j < classes; j++)
                d[j] = (expf(z[j] - mx - logsum) - (j == label ? 1.0f : 0.0f)) / (float)rows;
        }
    }
    return rows ? (float)(total / rows) : 0.0f;
}

void xt_sgd(float *params, const float *grads, long n, float lr)
{
    for (long i = 0; i < n; i++)
        params[i] -= lr * grads[i];
}

/* ----------------------------------------------------------------------- MLP */

void xt_mlp_init(xt_mlp *m, int nlayers, const int *dims, xt_act act, xt_loss loss)
{
    XT_CHECK(nlayers >= 1 && nlayers <= XT_MLP_MAX_LAYERS, "an MLP has 1 to %d layers, not %d",
             XT_MLP_MAX_LAYERS, nlayers);
    memset(m, 0, sizeof *m);
    m->nlayers = nlayers;
    m->act = act;
    m->loss = loss;
    long offset = 0;
    for (int l = 0; l <= nlayers; l++) {
        XT_CHECK(dims[l] >= 1, "layer width %d is not positive", dims[l]);
        m->dims[l] = dims[l];
    }
    for (int l = 0; l < nlayers; l++) {
        xt_tensor *w = &m->tensor[2 * l], *b = &m->tensor[2 * l + 1];
        snprintf(w->name, sizeof w->name, "W%d", l);
        snprintf(b->name, sizeof b->name, "b%d", l);
        w->layer = b->layer = l;
        w->rows = dims[l];
        w->cols = b->cols = dims[l + 1];
        b->rows = 1;
        w->offset = offset;
        w->count = (long)dims[l] * dims[l + 1];
        offset += w->count;
        b->offset = offset;
        b->count = dims[l + 1];
        offset += b->count;
    }
    m->ntensors = 2 * nlayers;
    m->nparams = offset;
    m->params = xt_alloc(XT_MEM_PARAMS, sizeof(float) * (size_t)offset);
    m->grads = xt_alloc(XT_MEM_GRADS, sizeof(float) * (size_t)offset);
}

int xt_dims_parse(const char *dims, int *d)
{
    int n = 0;
    const char *p = dims;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        XT_CHECK(end != p && v > 0 && v < (1L << 24) && n <= XT_MLP_MAX_LAYERS,
                 "bad layer widths \"%s\": expected up to %d positive integers, like 8,16,4", dims,
                 XT_MLP_MAX_LAYERS + 1);
        d[n++] = (int)v;
        XT_CHECK(*end == '\0' || (*end == ',' && end[1] != '\0'), "bad layer widths \"%s\"", dims);
        p = *end == ',' ? end + 1 : end;
    }
    XT_CHECK(n >= 2, "bad layer widths \"%s\": an input and an output width at least", dims);
    return n - 1;
}

void xt_mlp_init_str(xt_mlp *m, const char *dims, xt_act act, xt_loss loss)
{
    int d[XT_MLP_MAX_LAYERS + 1];
    int nlayers = xt_dims_parse(dims, d);
    xt_mlp_init(m, nlayers, d, act, loss);
}

void xt_mlp_randomize(xt_mlp *m, uint64_t seed)
{
    xt_rng g = xt_rng_seed(seed);
    for (int t = 0; t < m->ntensors; t++) {
        xt_tensor *v = &m->tensor[t];
        float *p = m->params + v->offset;
        float bound = 1.0f / sqrtf((float)m->dims[v->layer]);
        for (long i = 0; i < v->count; i++)
            p[i] = t % 2 ? 0.0f : xt_rng_uniform(&g, -bound, bound);
    }
}

static void free_activations(xt_mlp *m)
{
    for (int l = 0; l < m->nlayers; l++) {
        xt_free(m->pre[l]);
        xt_free(m->post[l]);
        m->pre[l] = m->post[l] = NULL;
    }
    xt_free(m->delta[0]);
    xt_free(m->delta[1]);
    m->delta[0] = m->delta[1] = NULL;
    m->rows_cap = 0;
}

void xt_mlp_free(xt_mlp *m)
{
    free_activations(m);
    xt_free(m->params);
    xt_free(m->grads);
    m->params = m->grads = NULL;
}

void xt_mlp_zero_grad(xt_mlp *m)
{
    XT_CHECK(m->grads, "xt_mlp_zero_grad: this model's gradient buffer was dropped");
    memset(m->grads, 0, sizeof(float) * (size_t)m->nparams);
}

void xt_mlp_pad_params(xt_mlp *m, long total)
{
    XT_CHECK(m->params && total >= m->nparams,
             "xt_mlp_pad_params: %ld floats cannot hold the %ld parameters", total, m->nparams);
    float *p = xt_alloc(XT_MEM_PARAMS, sizeof(float) * (size_t)total);
    memcpy(p, m->params, sizeof(float) * (size_t)m->nparams);
    xt_free(m->params);
    m->params = p;
}

void xt_mlp_drop_params(xt_mlp *m)
{
    xt_free(m->params);
    m->params = NULL;
}

void xt_mlp_drop_grads(xt_mlp *m)
{
    xt_free(m->grads);
    m->grads = NULL;
}

long xt_mlp_layer_offset(const xt_mlp *m, int l)
{
    return m->tensor[2 * l].offset;
}

long xt_mlp_layer_count(const xt_mlp *m, int l)
{
    return m->tensor[2 * l].count + m->tensor[2 * l + 1].count;
}

static void reserve_rows(xt_mlp *m, int rows)
{
    if (rows <= m->rows_cap)
        return;
    free_activations(m);
    int widest = 0;
    for (int l = 0; l <= m->nlayers; l++)
        widest = m->dims[l] > widest ? m->dims[l] : widest;
    for (int l = 0; l < m->nlayers; l++) {
        size_t bytes = sizeof(float) * (size_t)rows * (size_t)m->dims[l + 1];
        m->pre[l] = xt_alloc(XT_MEM_ACTIVATIONS, bytes);
        m->post[l] = xt_alloc(XT_MEM_ACTIVATIONS, bytes);
    }
    m->delta[0] = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)rows * (size_t)widest);
    m->delta[1] = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)rows * (size_t)widest);
    m->rows_cap = rows;
}

void xt_mlp_forward_begin(xt_mlp *m, const float *x, int rows)
{
    reserve_rows(m, rows > 0 ? rows : 1);
    m->rows = rows;
    m->input = x;
    m->next_forward = 0;
    m->next_backward = -1;
}

void xt_mlp_forward_layer(xt_mlp *m, int l, const float *layer_params)
{
    XT_CHECK(l >= 0 && l < m->nlayers, "xt_mlp_forward_layer(%d): the model has layers 0 to %d", l,
             m->nlayers - 1);
    XT_CHECK(l == m->next_forward,
             "xt_mlp_forward_layer(%d): layers run forward in order from 0 after "
             "xt_mlp_forward_begin; layer %d is next",
             l, m->next_forward);
    int rows = m->rows, in = m->dims[l], out = m->dims[l + 1];
    const float *h = l > 0 ? m->post[l - 1] : m->input;
    xt_linear_forward(m->pre[l], h, layer_params, layer_params + (long)in * out, rows, in, out);
    long n = (long)rows * out;
    if (l < m->nlayers - 1)
        xt_act_forward(m->act, m->post[l], m->pre[l], n);
    else
        memcpy(m->post[l], m->pre[l], sizeof(float) * (size_t)n);
    m->next_forward = l + 1;
}

const float *xt_mlp_output(const xt_mlp *m)
{
    return m->post[m->nlayers - 1];
}

const float *xt_mlp_forward(xt_mlp *m, const float *x, int rows)
{
    xt_mlp_forward_begin(m, x, rows);
    xt_trace_begin("forward");
    for (int l = 0; l < m->nlayers; l++)
        xt_mlp_forward_layer(m, l, m->params + xt_mlp_layer_offset(m, l));
    xt_trace_end();
    return xt_mlp_output(m);
}

float xt_mlp_loss_grad(xt_mlp *m, const void *target, float scale)
{
    int L = m->nlayers, rows = m->rows, out = m->dims[L];
    XT_CHECK(m->next_forward == L, "xt_mlp_loss_grad: run all %d layers forward first", L);
    float *d = m->delta[0];
    float loss;
    if (m->loss == XT_MSE)
        loss = xt_mse_loss(d, m->post[L - 1], target, rows, out);
    else
        loss = xt_cross_entropy_loss(d, m->post[L - 1], target, rows, out);
    if (scale != 1.0f)
        for (long i = 0; i < (long)rows * out; i++)
            d[i] *= scale;
    m->cur_delta = 0;
    m->next_backward = L - 1;
    return loss;
}

void xt_mlp_backward_layer(xt_mlp *m, int l, const float *layer_params, float *layer_grads)
{
    XT_CHECK(l >= 0 && l < m->nlayers, "xt_mlp_backward_layer(%d): the model has layers 0 to %d", l,
             m->nlayers - 1);
    XT_CHECK(m->next_backward >= 0,
             "xt_mlp_backward_layer(%d): no backward under way: call xt_mlp_loss_grad after the "
             "forward first (backward runs once per forward)",
             l);
    XT_CHECK(l == m->next_backward,
             "xt_mlp_backward_layer(%d): layers run backward from the last after "
             "xt_mlp_loss_grad; layer %d is next",
             l, m->next_backward);
    int rows = m->rows, in = m->dims[l], out = m->dims[l + 1];
    if (xt_trace_enabled()) {
        char name[32];
        snprintf(name, sizeof name, "backward layer %d", l);
        xt_trace_begin(name);
    }
    /* d is dLoss/d(pre_l); dnext becomes dLoss/d(pre_{l-1}). */
    float *d = m->delta[m->cur_delta], *dnext = m->delta[1 - m->cur_delta];
    const float *x = l > 0 ? m->post[l - 1] : m->input;
    xt_linear_backward(l > 0 ? dnext : NULL, layer_grads, layer_grads + (long)in * out, d, x,
                       layer_params, rows, in, out);
    if (l > 0)
        xt_act_backward(m->act, dnext, dnext, m->pre[l - 1], (long)rows * in);
    xt_trace_end();
    m->cur_delta = 1 - m->cur_delta;
    m->next_backward = l - 1;
}

float xt_mlp_backward(xt_mlp *m, const void *target, float scale, xt_grad_hook hook, void *ctx)
{
    /* MPI calls made from here to the return (the hooks') are logged as inside backward. */
    const char *outer = xti.compute;
    int outer_at = xti.compute_at;
    xti.compute = "backward";
    xti.compute_at = -1;
    float loss = xt_mlp_loss_grad(m, target, scale);
    for (int l = m->nlayers - 1; l >= 0; l--) {
        long off = xt_mlp_layer_offset(m, l);
        xt_mlp_backward_layer(m, l, m->params + off, m->grads + off);
        if (hook) {
            xti.compute_at = l;
            hook(m, l, ctx);
            xti.compute_at = -1;
        }
    }
    xti.compute = outer;
    xti.compute_at = outer_at;
    return loss;
}

const void *xt_mlp_target_at(const xt_mlp *m, const void *target, long row)
{
    if (m->loss == XT_MSE)
        return (const float *)target + row * m->dims[m->nlayers];
    return (const int32_t *)target + row;
}

float xt_mlp_loss(xt_mlp *m, const float *x, const void *target, int rows)
{
    const float *y = xt_mlp_forward(m, x, rows);
    int out = m->dims[m->nlayers];
    if (m->loss == XT_MSE)
        return xt_mse_loss(NULL, y, target, rows, out);
    return xt_cross_entropy_loss(NULL, y, target, rows, out);
}

/* ------------------------------------------------------------------- Adam */

void xt_adam_update(float *params, const float *grads, float *m, float *v, long n, long step,
                    const xt_adam *h)
{
    XT_CHECK(step >= 1, "xt_adam_update: steps count from 1, not %ld", step);
    float bc1 = (float)(1.0 - pow(h->beta1, (double)step));
    float bc2 = (float)(1.0 - pow(h->beta2, (double)step));
    float decay = 1.0f - h->lr * h->weight_decay;
    for (long i = 0; i < n; i++) {
        float g = grads[i];
        m[i] = h->beta1 * m[i] + (1.0f - h->beta1) * g;
        v[i] = h->beta2 * v[i] + (1.0f - h->beta2) * g * g;
        float mhat = m[i] / bc1, vhat = v[i] / bc2;
        params[i] = params[i] * decay - h->lr * mhat / (sqrtf(vhat) + h->eps);
    }
}

/* ------------------------------------------------------------------- bf16 */

float xt_bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu))
        u |= 0x00400000u; /* NaN stays NaN: keep it quiet, never round it to infinity */
    else
        u += 0x7fffu + ((u >> 16) & 1u); /* to nearest, ties to even */
    u &= 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

void xt_bf16_round_array(float *out, const float *in, long n)
{
    for (long i = 0; i < n; i++)
        out[i] = xt_bf16_round(in[i]);
}

float xt_max_abs_diff(const float *a, const float *b, long n)
{
    float m = 0.0f;
    for (long i = 0; i < n; i++) {
        float d = fabsf(a[i] - b[i]);
        if (!(d <= m))
            m = d; /* a NaN sticks */
    }
    return m;
}

int xt_all_finite(const float *x, long n)
{
    for (long i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}
