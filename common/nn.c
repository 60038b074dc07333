/*
 * nn.c: the numeric layer (xt_nn.h). Plain loops for what is elementwise,
 * CBLAS for every matrix product. grader/nn.py is its NumPy twin.
 */
#include "xt_nn.h"

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

void xt_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
             const float *b, float beta, float *c)
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
    if (k == 0) { /* BLAS leaves C alone when k = 0 only with beta = 1 */
        for (long i = 0; i < (long)m * n; i++)
            c[i] = beta == 0.0f ? 0.0f : beta * c[i];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, m, n, k, alpha, a, trans_a ? m : k, b,
                trans_b ? k : n, beta, c, n);
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
    m->params = xt_calloc((size_t)offset, sizeof(float));
    m->grads = xt_calloc((size_t)offset, sizeof(float));
}

void xt_mlp_init_str(xt_mlp *m, const char *dims, xt_act act, xt_loss loss)
{
    int d[XT_MLP_MAX_LAYERS + 2], n = 0;
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
    xt_mlp_init(m, n - 1, d, act, loss);
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
        free(m->pre[l]);
        free(m->post[l]);
        m->pre[l] = m->post[l] = NULL;
    }
    free(m->delta[0]);
    free(m->delta[1]);
    m->delta[0] = m->delta[1] = NULL;
    m->rows_cap = 0;
}

void xt_mlp_free(xt_mlp *m)
{
    free_activations(m);
    free(m->params);
    free(m->grads);
    m->params = m->grads = NULL;
}

void xt_mlp_zero_grad(xt_mlp *m)
{
    memset(m->grads, 0, sizeof(float) * (size_t)m->nparams);
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
        m->pre[l] = xt_malloc(sizeof(float) * (size_t)rows * (size_t)m->dims[l + 1]);
        m->post[l] = xt_malloc(sizeof(float) * (size_t)rows * (size_t)m->dims[l + 1]);
    }
    m->delta[0] = xt_malloc(sizeof(float) * (size_t)rows * (size_t)widest);
    m->delta[1] = xt_malloc(sizeof(float) * (size_t)rows * (size_t)widest);
    m->rows_cap = rows;
}

const float *xt_mlp_forward(xt_mlp *m, const float *x, int rows)
{
    reserve_rows(m, rows > 0 ? rows : 1);
    m->rows = rows;
    m->input = x;
    xt_trace_begin("forward");
    const float *h = x;
    for (int l = 0; l < m->nlayers; l++) {
        const xt_tensor *w = &m->tensor[2 * l], *b = &m->tensor[2 * l + 1];
        xt_linear_forward(m->pre[l], h, m->params + w->offset, m->params + b->offset, rows,
                          m->dims[l], m->dims[l + 1]);
        long n = (long)rows * m->dims[l + 1];
        if (l < m->nlayers - 1)
            xt_act_forward(m->act, m->post[l], m->pre[l], n);
        else
            memcpy(m->post[l], m->pre[l], sizeof(float) * (size_t)n);
        h = m->post[l];
    }
    xt_trace_end();
    return h;
}

float xt_mlp_backward(xt_mlp *m, const void *target, float scale, xt_grad_hook hook, void *ctx)
{
    int rows = m->rows, L = m->nlayers, out = m->dims[L];
    float *d = m->delta[0], *dnext = m->delta[1];
    float loss;
    if (m->loss == XT_MSE)
        loss = xt_mse_loss(d, m->post[L - 1], target, rows, out);
    else
        loss = xt_cross_entropy_loss(d, m->post[L - 1], target, rows, out);
    if (scale != 1.0f)
        for (long i = 0; i < (long)rows * out; i++)
            d[i] *= scale;
    for (int l = L - 1; l >= 0; l--) {
        const xt_tensor *w = &m->tensor[2 * l], *b = &m->tensor[2 * l + 1];
        if (xt_trace_enabled()) {
            char name[32];
            snprintf(name, sizeof name, "backward layer %d", l);
            xt_trace_begin(name);
        }
        /* d is dLoss/d(pre_l) here. */
        const float *in = l > 0 ? m->post[l - 1] : m->input;
        xt_linear_backward(l > 0 ? dnext : NULL, m->grads + w->offset, m->grads + b->offset, d, in,
                           m->params + w->offset, rows, m->dims[l], m->dims[l + 1]);
        if (l > 0)
            xt_act_backward(m->act, dnext, dnext, m->pre[l - 1], (long)rows * m->dims[l]);
        xt_trace_end();
        if (hook)
            hook(m, l, ctx);
        if (l > 0) {
            float *t = d;
            d = dnext;
            dnext = t;
        }
    }
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
