/*
 * test_kit.c: lecture 5's kit (kit.h), the pipeline stage, run on inputs from
 * grader/nntest.py, which compares what comes back with grader/nn.py's MLP
 * (the case files: nn_case.h).
 *
 *     kind     inputs                  outputs
 *     stage    p x0 t0 [x1 t1 ...]     grads0 [grads1 ...] loss dx0 y0 [dx1 y1 ...]
 *
 *     test_kit --die MODE  a stage misused, which must stop the run with a
 *                          clear message (nntest.py checks it):
 *                          stage_no_forward stage_weight_first
 *                          stage_loss_not_last stage_twice
 */
#include "kit.h"
#include "tests/nn_case.h"

/*
 * A pipeline stage case: the model dims cut at `cuts` ("0,2,3": stages of layers 0-1 and 2),
 * M micro-batches run in `order` ("f0f1b0f2b1b2": micro-batch b's forward through every stage
 * and its loss, scale 1/M, or its backward through every stage, the last first). Stages whose
 * `split` flag is 1 run the input part in the backward and every weight part at the end, in
 * the order the backwards ran. The same schedule runs again with every flag flipped, which
 * must give the same bits. Outputs: grads<s> per stage, loss (M), dx<b> (the first stage's),
 * y<b> (the last stage's output).
 */
typedef struct {
    int n, first[XT_MLP_MAX_LAYERS], count[XT_MLP_MAX_LAYERS];
    xt_stage *st[XT_MLP_MAX_LAYERS];
} stage_set;

static int parse_ints(const char *text, int *out, int cap)
{
    int n = 0;
    for (const char *p = text; *p && n < cap; p++) {
        out[n++] = (int)strtol(p, (char **)&p, 10);
        if (!*p)
            break;
    }
    return n;
}

static void run_schedule(const test_case *c, xt_mlp *m, stage_set *ss, const int *split, int M,
                         const int *rows, float *const *x, const void *const *t, float *loss,
                         float **dx, float **y)
{
    const char *order = param(c, "order");
    int S = ss->n, last = S - 1;
    float *out[8][XT_MLP_MAX_LAYERS] = {{0}}, *din[8][XT_MLP_MAX_LAYERS] = {{0}};
    int wq[8], nw = 0;
    for (const char *p = order; *p; p++) {
        char op = *p;
        int b = (int)strtol(p + 1, (char **)&p, 10);
        p--;
        if (op == 'f') {
            for (int s = 0; s < S; s++) {
                int w = xt_stage_out(ss->st[s]);
                out[b][s] = nans((long)rows[b] * w);
                xt_stage_forward(ss->st[s], b, s ? out[b][s - 1] : x[b], rows[b], out[b][s]);
            }
            loss[b] = xt_stage_loss(ss->st[last], b, t[b], 1.0f / (float)M);
            memcpy(y[b], out[b][last],
                   sizeof(float) * (size_t)rows[b] * (size_t)m->dims[m->nlayers]);
        } else {
            for (int s = last; s >= 0; s--) {
                float *into = s ? nans((long)rows[b] * xt_stage_in(ss->st[s])) : dx[b];
                const float *dy = s == last ? NULL : din[b][s + 1];
                if (split[s])
                    xt_stage_backward_input(ss->st[s], b, dy, into);
                else
                    xt_stage_backward(ss->st[s], b, dy, into);
                din[b][s] = s ? into : NULL;
            }
            wq[nw++] = b;
        }
    }
    for (int i = 0; i < nw; i++)
        for (int s = last; s >= 0; s--)
            if (split[s])
                xt_stage_backward_weight(ss->st[s], wq[i]);
    for (int b = 0; b < M; b++)
        for (int s = 0; s < S; s++) {
            free(out[b][s]);
            free(din[b][s]);
        }
}

static void new_stages(stage_set *ss, xt_mlp *m, const int *cuts, int ncuts, int chunk0)
{
    ss->n = ncuts - 1;
    for (int s = 0; s < ss->n; s++) {
        ss->first[s] = cuts[s];
        ss->count[s] = cuts[s + 1] - cuts[s];
        ss->st[s] =
            xt_stage_new(m->nlayers, m->dims, m->act, m->loss, cuts[s], ss->count[s], chunk0 + s);
        memcpy(xt_stage_params(ss->st[s]), m->params + xt_mlp_layer_offset(m, cuts[s]),
               sizeof(float) * (size_t)xt_stage_nparams(ss->st[s]));
    }
}

/* What one micro-batch keeps (xt_nn.h): after forward, after the loss, after the input part. */
static void check_stage_memory(const test_case *c, xt_mlp *m, const float *x, const void *t,
                               int rows, int k)
{
    xt_stage *s = xt_stage_new(m->nlayers, m->dims, m->act, m->loss, 0, m->nlayers, 0);
    memcpy(xt_stage_params(s), m->params, sizeof(float) * (size_t)m->nparams);
    long sum = 0;
    for (int l = 1; l <= m->nlayers; l++)
        sum += m->dims[l];
    int in = m->dims[0], out = m->dims[m->nlayers];
    size_t fwd = 4 * (size_t)rows * (size_t)(in + 2 * sum), lossb = 4 * (size_t)rows * (size_t)out,
           inb = 4 * (size_t)rows * (size_t)sum;
    float *y = nans((long)rows * out), *dx = nans((long)rows * in);
    size_t base = xt_mem_current(XT_MEM_ACTIVATIONS);
    xt_mem_reset_peak();
    for (int b = 0; b < k; b++)
        xt_stage_forward(s, b, x, rows, y);
    size_t now = xt_mem_current(XT_MEM_ACTIVATIONS) - base,
           peak = xt_mem_peak(XT_MEM_ACTIVATIONS) - base;
    if (now != k * fwd || peak != k * fwd)
        FAIL("case %d: %d micro-batches forwarded keep %zu bytes (peak %zu), expected %d x %zu",
             c->id, k, now, peak, k, fwd);
    if (xt_stage_forwards(s) != k)
        FAIL("case %d: xt_stage_forwards %ld after %d forwards", c->id, xt_stage_forwards(s), k);
    for (int b = 0; b < k; b++)
        xt_stage_loss(s, b, t, 1.0f);
    now = xt_mem_current(XT_MEM_ACTIVATIONS) - base;
    if (now != k * (fwd + lossb))
        FAIL("case %d: after the losses %zu bytes, expected %d x (%zu + %zu)", c->id, now, k, fwd,
             lossb);
    xt_stage_backward_input(s, 0, NULL, dx);
    now = xt_mem_current(XT_MEM_ACTIVATIONS) - base;
    if (now != k * (fwd + lossb) - lossb + inb)
        FAIL("case %d: after one input part %zu bytes, expected %zu", c->id, now,
             k * (fwd + lossb) - lossb + inb);
    xt_stage_backward_weight(s, 0);
    for (int b = 1; b < k; b++)
        xt_stage_backward(s, b, NULL, NULL);
    if (xt_mem_current(XT_MEM_ACTIVATIONS) != base)
        FAIL("case %d: after every backward %zu bytes of activations, %zu before", c->id,
             xt_mem_current(XT_MEM_ACTIVATIONS), base);
    xt_stage_forward(s, 0, x, rows, y); /* a recomputation counts too */
    if (xt_stage_forwards(s) != k + 1)
        FAIL("case %d: xt_stage_forwards %ld after %d forwards", c->id, xt_stage_forwards(s),
             k + 1);
    xt_stage_free(s);
    if (xt_mem_current(XT_MEM_ACTIVATIONS) != base)
        FAIL("case %d: xt_stage_free left %zu bytes of activations", c->id,
             xt_mem_current(XT_MEM_ACTIVATIONS) - base);
    FREE_BUFFERS(y, dx);
}

static void run_stage(const test_case *c)
{
    xt_mlp m;
    xt_loss loss;
    XT_CHECK(xt_loss_from_name(param(c, "loss"), &loss), "unknown loss %s", param(c, "loss"));
    xt_mlp_init_str(&m, param(c, "dims"), act_param(c), loss);
    xt_array pa;
    floats(c, "p", &pa);
    memcpy(m.params, pa.data, sizeof(float) * (size_t)m.nparams);
    int cuts[XT_MLP_MAX_LAYERS + 1], split[XT_MLP_MAX_LAYERS], flipped[XT_MLP_MAX_LAYERS];
    int ncuts = parse_ints(param(c, "cuts"), cuts, XT_MLP_MAX_LAYERS + 1);
    int nsplit = parse_ints(param(c, "split"), split, XT_MLP_MAX_LAYERS);
    int M = (int)iparam(c, "M");
    XT_CHECK(nsplit == ncuts - 1 && M >= 1 && M <= 8, "case %d: bad cuts, split or M", c->id);
    for (int s = 0; s < nsplit; s++)
        flipped[s] = !split[s];
    xt_array xa[8], ta[8];
    float *x[8], *dx[2][8], *y[2][8], lossv[2][8];
    const void *t[8];
    int rows[8], in = m.dims[0], out = m.dims[m.nlayers];
    for (int b = 0; b < M; b++) {
        char name[16];
        snprintf(name, sizeof name, "x%d", b);
        x[b] = floats(c, name, &xa[b]);
        rows[b] = (int)xa[b].shape[0];
        snprintf(name, sizeof name, "t%d", b);
        ta[b] = load(c, name, loss == XT_MSE ? XT_F32 : XT_I32);
        t[b] = ta[b].data;
        for (int r = 0; r < 2; r++) {
            dx[r][b] = nans((long)rows[b] * in);
            y[r][b] = nans((long)rows[b] * out);
        }
    }
    stage_set ss[2];
    for (int r = 0; r < 2; r++) {
        new_stages(&ss[r], &m, cuts, ncuts, 0);
        run_schedule(c, &m, &ss[r], r ? flipped : split, M, rows, x, t, lossv[r], dx[r], y[r]);
        for (int s = 0; s < ss[r].n; s++)
            if (xt_stage_forwards(ss[r].st[s]) != M)
                FAIL("case %d: stage %d counted %ld forwards, %d ran", c->id, s,
                     xt_stage_forwards(ss[r].st[s]), M);
    }
    for (int s = 0; s < ss[0].n; s++) {
        long n = xt_stage_nparams(ss[0].st[s]);
        if (!same_bits(xt_stage_grads(ss[0].st[s]), xt_stage_grads(ss[1].st[s]), n))
            FAIL("case %d: stage %d's gradients: split and full backward differ at [%ld]", c->id, s,
                 first_diff(xt_stage_grads(ss[0].st[s]), xt_stage_grads(ss[1].st[s]), n));
        char name[16];
        snprintf(name, sizeof name, "grads%d", s);
        save(c, name, xt_stage_grads(ss[0].st[s]), XT_F32, n, -1);
    }
    for (int b = 0; b < M; b++) {
        if (!same_bits(dx[0][b], dx[1][b], (long)rows[b] * in) ||
            !same_bits(y[0][b], y[1][b], (long)rows[b] * out) ||
            memcmp(&lossv[0][b], &lossv[1][b], sizeof(float)))
            FAIL("case %d: micro-batch %d: dx, output or loss differ between the runs", c->id, b);
        char name[16];
        snprintf(name, sizeof name, "dx%d", b);
        save(c, name, dx[0][b], XT_F32, rows[b], in);
        snprintf(name, sizeof name, "y%d", b);
        save(c, name, y[0][b], XT_F32, rows[b], out);
    }
    save(c, "loss", lossv[0], XT_F32, M, -1);
    size_t act = xt_mem_current(XT_MEM_ACTIVATIONS);
    for (int r = 0; r < 2; r++)
        for (int s = 0; s < ss[r].n; s++)
            xt_stage_free(ss[r].st[s]);
    if (act != xt_mem_current(XT_MEM_ACTIVATIONS))
        FAIL("case %d: stages kept %zu bytes of activations after every backward", c->id,
             act - xt_mem_current(XT_MEM_ACTIVATIONS));
    check_stage_memory(c, &m, x[0], t[0], rows[0], M);
    for (int b = 0; b < M; b++) {
        FREE_ARRAYS(&xa[b], &ta[b]);
        FREE_BUFFERS(dx[0][b], dx[1][b], y[0][b], y[1][b]);
    }
    xt_array_free(&pa);
    xt_mlp_free(&m);
}

static void die_misused(const char *mode)
{
    int dims[4] = {3, 4, 4, 2};
    float x[2 * 3] = {1, 2, 3, -1, -2, -3}, target[2 * 2] = {0};
    xt_stage *s0 = xt_stage_new(3, dims, XT_RELU, XT_MSE, 0, 2, 0);
    float y[2 * 4], dy[2 * 4] = {0};
    if (!strcmp(mode, "stage_no_forward")) {
        xt_stage_forward(s0, 0, x, 2, y);
        xt_stage_backward(s0, 1, dy, NULL); /* micro-batch 1 never went forward */
    } else if (!strcmp(mode, "stage_weight_first")) {
        xt_stage_forward(s0, 0, x, 2, y);
        xt_stage_backward_weight(s0, 0); /* before its input part */
    } else if (!strcmp(mode, "stage_loss_not_last")) {
        xt_stage_forward(s0, 0, x, 2, y);
        xt_stage_loss(s0, 0, target, 1.0f); /* layer 2 is on another stage */
    } else if (!strcmp(mode, "stage_twice")) {
        xt_stage_forward(s0, 3, x, 2, y);
        xt_stage_forward(s0, 3, x, 2, y); /* still in flight */
    } else {
        xt_die("--die %s: no such mode", mode);
    }
    xt_stage_free(s0);
}

int main(int argc, char **argv)
{
    static const nn_case_kind kinds[] = {{"stage", run_stage}};
    static const char *const modes[] = {"stage_no_forward", "stage_weight_first",
                                        "stage_loss_not_last", "stage_twice", NULL};
    return nn_case_main(argc, argv, "lc5_pp kit", kinds, sizeof kinds / sizeof kinds[0], modes,
                        die_misused, NULL);
}
