/*
 * stage.c: a pipeline stage (kit.h): a few consecutive layers of libxt's
 * MLP, with as many micro-batches in flight as a schedule wants. Every
 * forward, backward, input part and weight part is logged in the case
 * record (an S event, stage_log.c), so that the grader can see the schedule
 * that ran.
 */
#include "kit.h"
#include "stage_log.h"
#include "xt_harness.h"

#include <stdlib.h>
#include <string.h>

enum { FORWARDED = 1, LOSS_DONE, INPUT_DONE };

/* Micro-batches forwarded and not yet backward on this rank, over all its stages, and the
 * most there were (for the demo's line). */
static int in_flight_now, in_flight_max;

/* One micro-batch in flight: everything in one XT_MEM_ACTIVATIONS block. */
typedef struct {
    int mb, rows, state; /* state 0: the slot is free */
    float *keep;         /* x, then pre_j and post_j of each layer j */
    float *dloss;        /* the last stage's loss gradient (rows x out), after xt_stage_loss */
    float *delta;        /* dLoss/dpre_j of each layer, after the input part */
} slot;

struct xt_stage {
    int nlayers, first, count, chunk;
    int dims[XT_MLP_MAX_LAYERS + 1]; /* the whole model's */
    xt_act act;
    xt_loss loss;
    long nparams;
    long offset[XT_MLP_MAX_LAYERS]; /* layer j of the stage in params */
    long sum_out;                   /* sum of the stage's layers' widths */
    float *params, *grads;
    slot *slots;
    int nslots;
    long forwards;
};

xt_stage *xt_stage_new(int nlayers, const int *dims, xt_act act, xt_loss loss, int first, int count,
                       int chunk)
{
    XT_CHECK(nlayers >= 1 && nlayers <= XT_MLP_MAX_LAYERS,
             "xt_stage_new: a model has 1 to %d "
             "layers, not %d",
             XT_MLP_MAX_LAYERS, nlayers);
    XT_CHECK(first >= 0 && count >= 1 && first + count <= nlayers,
             "xt_stage_new: layers %d .. %d are not within the model's 0 .. %d", first,
             first + count - 1, nlayers - 1);
    XT_CHECK(chunk >= 0, "xt_stage_new: chunk %d is negative", chunk);
    xt_stage *s = calloc(1, sizeof *s);
    XT_CHECK(s, "out of memory for a pipeline stage");
    s->nlayers = nlayers;
    s->first = first;
    s->count = count;
    s->chunk = chunk;
    s->act = act;
    s->loss = loss;
    for (int l = 0; l <= nlayers; l++) {
        XT_CHECK(dims[l] >= 1, "xt_stage_new: layer width %d is not positive", dims[l]);
        s->dims[l] = dims[l];
    }
    for (int j = 0; j < count; j++) {
        int in = dims[first + j], out = dims[first + j + 1];
        s->offset[j] = s->nparams;
        s->nparams += (long)in * out + out;
        s->sum_out += out;
    }
    s->params = xt_alloc(XT_MEM_PARAMS, sizeof(float) * (size_t)s->nparams);
    s->grads = xt_alloc(XT_MEM_GRADS, sizeof(float) * (size_t)s->nparams);
    memset(s->grads, 0, sizeof(float) * (size_t)s->nparams);
    return s;
}

static void release(slot *t)
{
    in_flight_now--;
    xt_free(t->keep);
    xt_free(t->dloss);
    xt_free(t->delta);
    memset(t, 0, sizeof *t);
}

void xt_stage_free(xt_stage *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nslots; i++)
        if (s->slots[i].state)
            release(&s->slots[i]);
    free(s->slots);
    xt_free(s->params);
    xt_free(s->grads);
    free(s);
}

long xt_stage_nparams(const xt_stage *s)
{
    return s->nparams;
}

float *xt_stage_params(xt_stage *s)
{
    return s->params;
}

float *xt_stage_grads(xt_stage *s)
{
    return s->grads;
}

int xt_stage_in(const xt_stage *s)
{
    return s->dims[s->first];
}

int xt_stage_out(const xt_stage *s)
{
    return s->dims[s->first + s->count];
}

int xt_stage_is_last(const xt_stage *s)
{
    return s->first + s->count == s->nlayers;
}

long xt_stage_forwards(const xt_stage *s)
{
    return s->forwards;
}

int xt_stage_first(const xt_stage *s)
{
    return s->first;
}

int xt_stage_count(const xt_stage *s)
{
    return s->count;
}

int xt_stage_in_flight_most(void)
{
    int most = in_flight_max;
    in_flight_max = in_flight_now;
    return most;
}

/* The slot of micro-batch mb in flight, or NULL. */
static slot *find(xt_stage *s, int mb)
{
    for (int i = 0; i < s->nslots; i++)
        if (s->slots[i].state && s->slots[i].mb == mb)
            return &s->slots[i];
    return NULL;
}

static slot *in_flight(xt_stage *s, int mb, const char *fn)
{
    slot *t = find(s, mb);
    XT_CHECK(t,
             "%s(micro-batch %d): micro-batch %d has no forward in flight on this stage "
             "(layers %d..%d)",
             fn, mb, mb, s->first, s->first + s->count - 1);
    return t;
}

/* Layer j's pre and post activations, and its input, in t->keep. */
static float *pre_of(const xt_stage *s, const slot *t, int j)
{
    long off = (long)t->rows * s->dims[s->first];
    for (int i = 0; i < j; i++)
        off += 2L * t->rows * s->dims[s->first + i + 1];
    return t->keep + off;
}

static float *post_of(const xt_stage *s, const slot *t, int j)
{
    return pre_of(s, t, j) + (long)t->rows * s->dims[s->first + j + 1];
}

static const float *input_of(const xt_stage *s, const slot *t, int j)
{
    return j ? post_of(s, t, j - 1) : t->keep;
}

static int has_act(const xt_stage *s, int j)
{
    return s->first + j < s->nlayers - 1;
}

void xt_stage_forward(xt_stage *s, int mb, const float *x, int rows, float *y)
{
    pp_stage_began began = pp_stage_begin();
    XT_CHECK(mb >= 0, "xt_stage_forward: micro-batch %d is negative", mb);
    XT_CHECK(rows >= 0, "xt_stage_forward(micro-batch %d): %d rows", mb, rows);
    XT_CHECK(!find(s, mb),
             "xt_stage_forward(micro-batch %d): micro-batch %d is already in flight on this stage "
             "(forwarded, not yet backward): a micro-batch is forwarded once per backward",
             mb, mb);
    slot *t = NULL;
    for (int i = 0; i < s->nslots && !t; i++)
        if (!s->slots[i].state)
            t = &s->slots[i];
    if (!t) {
        s->slots = realloc(s->slots, sizeof *s->slots * (size_t)(s->nslots + 1));
        XT_CHECK(s->slots, "out of memory for a pipeline stage's micro-batches");
        t = &s->slots[s->nslots++];
    }
    memset(t, 0, sizeof *t);
    if (++in_flight_now > in_flight_max)
        in_flight_max = in_flight_now;
    t->mb = mb;
    t->rows = rows;
    t->state = FORWARDED;
    int in = s->dims[s->first];
    size_t floats = (size_t)rows * (size_t)(in + 2 * s->sum_out);
    t->keep = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (floats ? floats : 1));
    memcpy(t->keep, x, sizeof(float) * (size_t)rows * (size_t)in);
    for (int j = 0; j < s->count; j++) {
        int a = s->dims[s->first + j], b = s->dims[s->first + j + 1];
        const float *w = s->params + s->offset[j];
        float *pre = pre_of(s, t, j), *post = post_of(s, t, j);
        xt_linear_forward(pre, input_of(s, t, j), w, w + (long)a * b, rows, a, b);
        if (has_act(s, j))
            xt_act_forward(s->act, post, pre, (long)rows * b);
        else
            memcpy(post, pre, sizeof(float) * (size_t)rows * (size_t)b);
    }
    memcpy(y, post_of(s, t, s->count - 1), sizeof(float) * (size_t)rows * (size_t)xt_stage_out(s));
    s->forwards++;
    pp_stage_event('F', mb, s->chunk, s->first, s->count, began);
}

float xt_stage_loss(xt_stage *s, int mb, const void *target, float scale)
{
    XT_CHECK(xt_stage_is_last(s),
             "xt_stage_loss(micro-batch %d): this stage (layers %d..%d) is not the last: the "
             "loss belongs to the stage with the model's layer %d",
             mb, s->first, s->first + s->count - 1, s->nlayers - 1);
    slot *t = in_flight(s, mb, "xt_stage_loss");
    XT_CHECK(t->state == FORWARDED,
             "xt_stage_loss(micro-batch %d): its loss was already taken (once per forward)", mb);
    int out = xt_stage_out(s);
    long n = (long)t->rows * out;
    t->dloss = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)(n ? n : 1));
    const float *pred = post_of(s, t, s->count - 1);
    float loss = s->loss == XT_MSE ? xt_mse_loss(t->dloss, pred, target, t->rows, out)
                                   : xt_cross_entropy_loss(t->dloss, pred, target, t->rows, out);
    if (scale != 1.0f)
        for (long i = 0; i < n; i++)
            t->dloss[i] *= scale;
    t->state = LOSS_DONE;
    return loss;
}

static void input_part(xt_stage *s, slot *t, const char *fn, const float *dy, float *dx)
{
    int mb = t->mb, rows = t->rows, out = xt_stage_out(s);
    XT_CHECK(t->state != INPUT_DONE,
             "%s(micro-batch %d): its input part already ran; the weight part is next", fn, mb);
    if (!dy) {
        XT_CHECK(xt_stage_is_last(s),
                 "%s(micro-batch %d): dy is NULL, but only the last stage has a loss gradient of "
                 "its own",
                 fn, mb);
        XT_CHECK(t->state == LOSS_DONE,
                 "%s(micro-batch %d): dy is NULL and no loss was taken: call xt_stage_loss after "
                 "the forward first",
                 fn, mb);
        dy = t->dloss;
    }
    size_t floats = (size_t)rows * (size_t)s->sum_out;
    t->delta = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (floats ? floats : 1));
    /* delta_j, dLoss/d(pre_j), at the same offsets as pre_j minus x's and the posts. */
    float *d[XT_MLP_MAX_LAYERS] = {0};
    long off = 0;
    for (int j = 0; j < s->count; j++) {
        d[j] = t->delta + off;
        off += (long)rows * s->dims[s->first + j + 1];
    }
    int last = s->count - 1;
    memcpy(d[last], dy, sizeof(float) * (size_t)rows * (size_t)out);
    for (int j = last; j >= 0; j--) {
        int a = s->dims[s->first + j], b = s->dims[s->first + j + 1];
        if (has_act(s, j))
            xt_act_backward(s->act, d[j], d[j], pre_of(s, t, j), (long)rows * b);
        float *below = j > 0 ? d[j - 1] : dx;
        if (below)
            xt_linear_backward(below, NULL, NULL, d[j], input_of(s, t, j), s->params + s->offset[j],
                               rows, a, b);
    }
    xt_free(t->dloss);
    t->dloss = NULL;
    t->state = INPUT_DONE;
}

static void weight_part(xt_stage *s, slot *t)
{
    int rows = t->rows;
    long off = 0;
    for (int j = 0; j < s->count; j++) {
        int a = s->dims[s->first + j], b = s->dims[s->first + j + 1];
        float *g = s->grads + s->offset[j];
        xt_linear_backward(NULL, g, g + (long)a * b, t->delta + off, input_of(s, t, j),
                           s->params + s->offset[j], rows, a, b);
        off += (long)rows * b;
    }
    release(t);
}

void xt_stage_infer(xt_stage *s, const float *x, int rows, float *y)
{
    pp_stage_began began = pp_stage_begin();
    XT_CHECK(rows >= 0, "xt_stage_infer: %d rows", rows);
    /* Two buffers of the widest layer, taken in turn, freed before returning. */
    int widest = 1;
    for (int j = 0; j < s->count; j++)
        if (s->dims[s->first + j + 1] > widest)
            widest = s->dims[s->first + j + 1];
    size_t floats = (size_t)rows * (size_t)widest;
    float *buf[2] = {xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (floats ? floats : 1)),
                     xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (floats ? floats : 1))};
    const float *in = x;
    for (int j = 0; j < s->count; j++) {
        int a = s->dims[s->first + j], b = s->dims[s->first + j + 1];
        const float *w = s->params + s->offset[j];
        float *out = buf[j % 2];
        xt_linear_forward(out, in, w, w + (long)a * b, rows, a, b);
        if (has_act(s, j))
            xt_act_forward(s->act, out, out, (long)rows * b);
        in = out;
    }
    memcpy(y, in, sizeof(float) * (size_t)rows * (size_t)xt_stage_out(s));
    xt_free(buf[0]);
    xt_free(buf[1]);
    s->forwards++;
    pp_stage_event('N', -1, s->chunk, s->first, s->count, began);
}

void xt_stage_backward(xt_stage *s, int mb, const float *dy, float *dx)
{
    pp_stage_began began = pp_stage_begin();
    slot *t = in_flight(s, mb, "xt_stage_backward");
    XT_CHECK(t->state != INPUT_DONE,
             "xt_stage_backward(micro-batch %d): its input part already ran: finish it with "
             "xt_stage_backward_weight",
             mb);
    input_part(s, t, "xt_stage_backward", dy, dx);
    weight_part(s, t);
    pp_stage_event('B', mb, s->chunk, s->first, s->count, began);
}

void xt_stage_backward_input(xt_stage *s, int mb, const float *dy, float *dx)
{
    pp_stage_began began = pp_stage_begin();
    slot *t = in_flight(s, mb, "xt_stage_backward_input");
    input_part(s, t, "xt_stage_backward_input", dy, dx);
    pp_stage_event('I', mb, s->chunk, s->first, s->count, began);
}

void xt_stage_backward_weight(xt_stage *s, int mb)
{
    pp_stage_began began = pp_stage_begin();
    slot *t = in_flight(s, mb, "xt_stage_backward_weight");
    XT_CHECK(t->state == INPUT_DONE,
             "xt_stage_backward_weight(micro-batch %d): its input part has not run: call "
             "xt_stage_backward_input first",
             mb);
    weight_part(s, t);
    pp_stage_event('W', mb, s->chunk, s->first, s->count, began);
}
