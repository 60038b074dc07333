/*
 * lm_case.c: lecture 4's decoder language model on a process mesh (kit.h), for
 * the drivers and demos of the programs that train it through pipeline stages
 * (parallel_3d.c, pp_tied_embedding.c): the model and its training read from
 * a case, this rank's stage of the whole model, and one process's step, the
 * demos' yardstick.
 */
#include "kit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long pp_lm_size(const pp_lm *m)
{
    return 2L * m->vocab * m->shape.d + m->layers * xt_decoder_layout_of(&m->shape).total +
           m->shape.d;
}

xt_tp_stage *pp_lm_stage(const pp_lm *m, const float *full, const xt_mesh *mesh, MPI_Comm tp)
{
    int first, count;
    xt_block(m->layers, xt_mesh_size(mesh, "pp"), xt_mesh_coord(mesh, "pp"), &first, &count);
    return xt_tp_stage_new(&m->shape, m->vocab, m->layers, full, first, count, tp, 0);
}

float pp_lm_single_step(const pp_lm *m, int tied, float *w, float *g, float *mom, float *vel,
                        long step, const int *tokens, const int *targets, const xt_adam *h)
{
    int V = m->vocab, d = m->shape.d, n = m->seqs * m->T, L = m->layers;
    long nd = (long)n * d, total = pp_lm_size(m), blk = xt_decoder_layout_of(&m->shape).total;
    float *x = malloc(sizeof(float) * (size_t)(nd * (L + 4) + n + 2L * n * V));
    float *hf = x + nd * (L + 1), *dx = hf + nd, *dy = dx + nd, *rstd = dy + nd;
    float *logits = rstd + n, *dlogits = logits + (long)n * V;
    const float *norm = w + (long)V * d + L * blk, *head = norm + d;
    xt_decoder_cache *cache[16];
    memset(g, 0, sizeof(float) * (size_t)total);
    xt_embedding_forward(x, tokens, n, w, V, d);
    for (int l = 0; l < L; l++) /* block l reads x + l nd, writes x + (l+1) nd */
        cache[l] = xt_decoder_forward(x + (l + 1) * nd, x + l * nd, w + (long)V * d + l * blk,
                                      &m->shape, m->seqs, m->T);
    xt_rmsnorm_forward(hf, rstd, x + L * nd, norm, n, d, m->shape.eps);
    xt_linear_forward(logits, hf, head, NULL, n, d, V);
    float loss = xt_cross_entropy_loss(dlogits, logits, targets, n, V);
    float *gnorm = g + (long)V * d + L * blk, *ghead = gnorm + d;
    xt_linear_backward(dy, ghead, NULL, dlogits, hf, head, n, d, V);
    xt_rmsnorm_backward(dx, gnorm, dy, x + L * nd, norm, rstd, n, d);
    for (int l = L - 1; l >= 0; l--) {
        memcpy(dy, dx, sizeof(float) * (size_t)nd);
        xt_decoder_backward(dx, g + (long)V * d + l * blk, dy, w + (long)V * d + l * blk, cache[l]);
    }
    xt_embedding_backward(g, tokens, n, dx, V, d);
    if (tied) /* one matrix: E's gradient and the head's, summed, given to both copies */
        for (int v = 0; v < V; v++)
            for (int c = 0; c < d; c++) {
                g[(long)v * d + c] += ghead[(long)c * V + v];
                ghead[(long)c * V + v] = g[(long)v * d + c];
            }
    xt_adam_update(w, g, mom, vel, total, step, h);
    free(x);
    return loss;
}

void pp_lm_case_read(xt_case *c, pp_lm_case *lm)
{
    lm->model =
        (pp_lm){(int)xt_case_int(c, "vocab"),
                (int)xt_case_int(c, "layers"),
                (int)xt_case_int(c, "seqs"),
                (int)xt_case_int(c, "T"),
                (int)xt_case_int(c, "M"),
                {(int)xt_case_int(c, "d"), (int)xt_case_int(c, "hq"), (int)xt_case_int(c, "hkv"),
                 (int)xt_case_int(c, "hd"), (int)xt_case_int(c, "ff"), 1e-5f}};
    lm->steps = (int)xt_case_int(c, "steps");
    lm->adam = (xt_adam){(float)atof(xt_case_str(c, "lr")), 0.9f, 0.95f, 1e-3f,
                         (float)atof(xt_case_str(c, "wd"))};
    xt_array w0 = xt_case_input_const(c, "w0");
    xt_array tokens = xt_case_input_const(c, "tokens"), targets = xt_case_input_const(c, "targets");
    long size = pp_lm_size(&lm->model);
    XT_CHECK(w0.count == size, "the case's w0 holds %ld floats, the model %ld", w0.count, size);
    lm->w0 = w0.data;
    lm->tokens = tokens.data;
    lm->targets = targets.data;
    lm->stage = NULL;
    xt_mesh_init(&lm->mesh, xt_case_str(c, "mesh"), xt_case_comm(c));
}

const int *pp_lm_case_tokens(const pp_lm_case *lm, int s)
{
    return xt_tp_stage_is_first(lm->stage) ? lm->tokens + (long)s * lm->model.seqs * lm->model.T
                                           : NULL;
}

const int *pp_lm_case_targets(const pp_lm_case *lm, int s)
{
    return xt_tp_stage_is_last(lm->stage) ? lm->targets + (long)s * lm->model.seqs * lm->model.T
                                          : NULL;
}

void pp_lm_case_stepped(xt_case *c, const pp_lm_case *lm, int s, float loss)
{
    char name[24];
    snprintf(name, sizeof name, "step%d_loss", s + 1);
    if (xt_tp_stage_is_last(lm->stage))
        xt_case_output(c, name, &loss, XT_F32, 1);
    if (s == 0)
        xt_case_output(c, "grads", xt_tp_stage_grads(lm->stage), XT_F32,
                       xt_tp_stage_nparams(lm->stage));
}

void pp_lm_case_free(xt_case *c, pp_lm_case *lm, int params)
{
    if (lm->stage && params)
        xt_case_output(c, "params", xt_tp_stage_params(lm->stage), XT_F32,
                       xt_tp_stage_nparams(lm->stage));
    if (lm->stage)
        xt_tp_stage_free(lm->stage);
    xt_mesh_free(&lm->mesh);
}

pp_lm_demo pp_lm_demo_new(const pp_lm *m, int steps, int tied)
{
    long total = pp_lm_size(m), vd = (long)m->vocab * m->shape.d;
    pp_lm_demo d;
    d.w0 = malloc(sizeof(float) * (size_t)total * 5);
    d.w = d.w0 + total, d.g = d.w + total, d.mom = d.g + total, d.vel = d.mom + total;
    xt_rng r = xt_rng_seed(7);
    xt_rng_fill_uniform(&r, d.w0, total, -0.3f, 0.3f);
    if (tied) { /* the head starts as E^T */
        float *head = d.w0 + total - vd;
        for (int v = 0; v < m->vocab; v++)
            for (int c = 0; c < m->shape.d; c++)
                head[(long)c * m->vocab + v] = d.w0[(long)v * m->shape.d + c];
    }
    memcpy(d.w, d.w0, sizeof(float) * (size_t)total);
    memset(d.mom, 0, sizeof(float) * 2 * (size_t)total);
    long ntok = (long)steps * m->seqs * m->T;
    d.tokens = malloc(sizeof(int) * 2 * (size_t)ntok);
    d.targets = d.tokens + ntok;
    for (long i = 0; i < ntok; i++) {
        d.tokens[i] = (int)xt_rng_below(&r, (uint64_t)m->vocab);
        d.targets[i] = (d.tokens[i] * 5 + 3) % m->vocab; /* a rule worth learning */
    }
    return d;
}

void pp_lm_demo_free(pp_lm_demo *d)
{
    free(d->w0);
    free(d->tokens);
}
