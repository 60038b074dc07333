/*
 * The driver of lc5_pp/parallel_3d.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/* The decoder's shape from a case or the demo. */
typedef struct {
    int vocab, layers, seqs, T, M;
    xt_decoder_shape shape;
} driver_p3d_model;

static long driver_full_size(const driver_p3d_model *m)
{
    return 2L * m->vocab * m->shape.d + m->layers * xt_decoder_layout_of(&m->shape).total +
           m->shape.d;
}

/* This rank's stage: the blocks of its pp coordinate (the first layers % pp stages one block
 * more), tensor-parallel over its tp group. */
static xt_tp_stage *driver_stage_of(const driver_p3d_model *m, const float *full,
                                    const xt_mesh *mesh)
{
    int first, count;
    xt_block(m->layers, xt_mesh_size(mesh, "pp"), xt_mesh_coord(mesh, "pp"), &first, &count);
    return xt_tp_stage_new(&m->shape, m->vocab, m->layers, full, first, count,
                           xt_mesh_group(mesh, "tp"), 0);
}

/*
 * The case: "mesh" (as "pp=2,dp=2,tp=2"), the model, "steps" steps of "seqs" sequences
 * of T tokens in M micro-batches; "w0" the whole initial parameters, "tokens" and "targets"
 * every step's batch. Writes the loss of each step on the last stage's ranks, this rank's
 * shard's gradients after step 1 ("grads") and its parameters after the last ("params").
 */
static void run_case(xt_case *c)
{
    driver_p3d_model m = {(int)xt_case_int(c, "vocab"),
                          (int)xt_case_int(c, "layers"),
                          (int)xt_case_int(c, "seqs"),
                          (int)xt_case_int(c, "T"),
                          (int)xt_case_int(c, "M"),
                          {(int)xt_case_int(c, "d"), (int)xt_case_int(c, "hq"),
                           (int)xt_case_int(c, "hkv"), (int)xt_case_int(c, "hd"),
                           (int)xt_case_int(c, "ff"), 1e-5f}};
    int steps = (int)xt_case_int(c, "steps");
    xt_adam h = {(float)atof(xt_case_str(c, "lr")), 0.9f, 0.95f, 1e-3f,
                 (float)atof(xt_case_str(c, "wd"))};
    xt_array w0 = xt_case_input_const(c, "w0");
    xt_array tokens = xt_case_input_const(c, "tokens"), targets = xt_case_input_const(c, "targets");
    XT_CHECK(w0.count == driver_full_size(&m), "the case's w0 holds %ld floats, the model %ld",
             w0.count, driver_full_size(&m));
    xt_mesh mesh;
    xt_mesh_init(&mesh, xt_case_str(c, "mesh"), xt_case_comm(c));
    xt_tp_stage *stage = driver_stage_of(&m, w0.data, &mesh);
    int first = xt_tp_stage_is_first(stage), last = xt_tp_stage_is_last(stage);
    for (int s = 0; s < steps; s++) {
        long at = (long)s * m.seqs * m.T;
        float loss =
            parallel_3d_step(stage, &mesh, first ? (const int *)tokens.data + at : NULL,
                             last ? (const int *)targets.data + at : NULL, m.seqs, m.T, m.M, &h);
        char name[24];
        snprintf(name, sizeof name, "step%d_loss", s + 1);
        if (last)
            xt_case_output(c, name, &loss, XT_F32, 1);
        if (s == 0)
            xt_case_output(c, "grads", xt_tp_stage_grads(stage), XT_F32,
                           xt_tp_stage_nparams(stage));
    }
    xt_case_output(c, "params", xt_tp_stage_params(stage), XT_F32, xt_tp_stage_nparams(stage));
    xt_tp_stage_free(stage);
    xt_mesh_free(&mesh);
}

/* ------------------------------------------------------------------- the demo */

/* One process's step on the whole batch, from libxt's single-process pieces: the embedding,
 * the decoder blocks, the final norm, the head, the mean cross-entropy, AdamW. */
static float driver_single_step(const driver_p3d_model *m, float *w, float *g, float *mom,
                                float *vel, long step, const int *tokens, const int *targets,
                                const xt_adam *h)
{
    int V = m->vocab, d = m->shape.d, n = m->seqs * m->T, L = m->layers;
    long nd = (long)n * d, total = driver_full_size(m), blk = xt_decoder_layout_of(&m->shape).total;
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
    float *gnorm = g + (long)V * d + L * blk;
    xt_linear_backward(dy, gnorm + d, NULL, dlogits, hf, head, n, d, V);
    xt_rmsnorm_backward(dx, gnorm, dy, x + L * nd, norm, rstd, n, d);
    for (int l = L - 1; l >= 0; l--) {
        memcpy(dy, dx, sizeof(float) * (size_t)nd);
        xt_decoder_backward(dx, g + (long)V * d + l * blk, dy, w + (long)V * d + l * blk, cache[l]);
    }
    xt_embedding_backward(g, tokens, n, dx, V, d);
    xt_adam_update(w, g, mom, vel, total, step, h);
    free(x);
    return loss;
}

/*
 * A four-block decoder (vocab 29, d 8, 4 query heads on 2 KV heads) trained for 5 steps
 * of 4 sequences per data share in 4 micro-batches on a mesh made from np (8: pp, dp and tp
 * 2 each; 4: pp 2, tp 2); each step's loss beside one process's on the whole batch, and at the end
 * every rank's shard against the same slice of the single process's parameters. make
 * demo then draws the first step's stage calls of one pp group.
 */
static void demo(MPI_Comm comm)
{
    enum { STEPS = 5, MB = 4 };
    int np;
    MPI_Comm_size(comm, &np);
    int tp = np % 2 ? 1 : 2, pp = (np / tp) % 2 ? 1 : 2, dp = np / (tp * pp);
    char description[64];
    snprintf(description, sizeof description, "pp=%d,dp=%d,tp=%d", pp, dp, tp);
    xt_mesh mesh;
    xt_mesh_init(&mesh, description, comm);
    xt_mesh_print(&mesh);
    driver_p3d_model m = {29, 4, 4 * dp, 6, MB, {8, 4, 2, 2, 12, 1e-5f}};
    long total = driver_full_size(&m);
    float *w0 = malloc(sizeof(float) * (size_t)total * 5), *w = w0 + total, *g = w + total;
    float *mom = g + total, *vel = mom + total;
    xt_rng r = xt_rng_seed(7);
    xt_rng_fill_uniform(&r, w0, total, -0.3f, 0.3f);
    memcpy(w, w0, sizeof(float) * (size_t)total);
    memset(mom, 0, sizeof(float) * 2 * (size_t)total);
    int ntok = STEPS * m.seqs * m.T;
    int *tokens = malloc(sizeof(int) * 2 * (size_t)ntok), *targets = tokens + ntok;
    for (int i = 0; i < ntok; i++) {
        tokens[i] = (int)xt_rng_below(&r, (uint64_t)m.vocab);
        targets[i] = (tokens[i] * 5 + 3) % m.vocab; /* a rule worth learning */
    }
    xt_adam h = {0.05f, 0.9f, 0.95f, 1e-3f, 0.01f};
    xt_tp_stage *stage = driver_stage_of(&m, w0, &mesh);
    xt_printf_root(comm,
                   "decoder: vocab %d, d %d, %d blocks, %d/%d heads, ff %d; %d sequences "
                   "of %d\ntokens a step, %d micro-batches per data share\n",
                   m.vocab, m.shape.d, m.layers, m.shape.hq, m.shape.hkv, m.shape.ff, m.seqs, m.T,
                   m.M);
    int b0 = xt_tp_stage_first(stage), b1 = b0 + xt_tp_stage_count(stage) - 1;
    xt_printf_ordered(comm, "dp %d pp %d tp %d: %sblocks %d-%d%s, %ld floats\n",
                      xt_mesh_coord(&mesh, "dp"), xt_mesh_coord(&mesh, "pp"),
                      xt_mesh_coord(&mesh, "tp"), xt_tp_stage_is_first(stage) ? "embedding, " : "",
                      b0, b1, xt_tp_stage_is_last(stage) ? ", head" : "",
                      xt_tp_stage_nparams(stage));
    int first = xt_tp_stage_is_first(stage), last = xt_tp_stage_is_last(stage);
    double worst = 0;
    for (int s = 0; s < STEPS; s++) {
        long at = (long)s * m.seqs * m.T;
        float loss = parallel_3d_step(stage, &mesh, first ? tokens + at : NULL,
                                      last ? targets + at : NULL, m.seqs, m.T, m.M, &h);
        float one = driver_single_step(&m, w, g, mom, vel, s + 1, tokens + at, targets + at, &h);
        float shown = last ? loss : -INFINITY;
        MPI_Allreduce(MPI_IN_PLACE, &shown, 1, MPI_FLOAT, MPI_MAX, comm);
        worst = fmax(worst, fabs((double)shown - one) / (1.0 + fabs((double)one)));
        xt_printf_root(comm, "step %d: loss %.6f   one process %.6f   |diff| %.1e\n", s + 1,
                       (double)shown, (double)one, fabs((double)shown - one));
    }
    /* Every rank's shard against the same shard of the single process's parameters. */
    xt_tp_stage *twin = driver_stage_of(&m, w, &mesh);
    const float *a = xt_tp_stage_params(stage), *b = xt_tp_stage_params(twin);
    double err = 0;
    for (long i = 0; i < xt_tp_stage_nparams(stage); i++)
        err = fmax(err, fabs((double)a[i] - b[i]) / (1.0 + fabs((double)b[i])));
    MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "losses and every rank's shard agree with one process: %s (%.1e)\n",
                   worst <= 1e-4 && err <= 1e-3 ? "yes" : "NO", fmax(worst, err));
    /* make demo draws the stage log (XT_STAGE_LOG): only the pp group of dp 0, tp 0 keeps
     * it, as every other replica and tensor slice runs the same schedule. */
    if (xt_mesh_coord(&mesh, "dp") != 0 || xt_mesh_coord(&mesh, "tp") != 0)
        unsetenv("XT_STAGE_LOG");
    char slice[64] = "";
    for (int p = 0, at = 0; p < pp; p++)
        at += snprintf(slice + at, sizeof slice - (size_t)at, "%s%d", p ? ", " : "", p * dp * tp);
    xt_printf_root(comm,
                   "the timeline shows ranks %s: the pp group of dp 0, tp 0 (the rest "
                   "alike)\n",
                   slice);
    xt_tp_stage_free(twin);
    xt_tp_stage_free(stage);
    xt_mesh_free(&mesh);
    free(w0);
    free(tokens);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
