/*
 * The driver of lc4_tp/model_tp.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void driver_tp_views(tp_model *m, float *base, float **embed, tp_block *blk, float **norm,
                            float **head)
{
    const tp_config *c = &m->cfg;
    long qw = (long)m->hq_local * c->hd, kvw = (long)m->hkv_local * c->hd;
    float *p = base;
    *embed = p;
    p += (long)m->v_count * c->d;
    for (int l = 0; l < c->layers; l++) {
        tp_block *b = &blk[l];
        b->norm1 = p, p += c->d;
        b->wq = p, p += c->d * qw;
        b->wk = p, p += c->d * kvw;
        b->wv = p, p += c->d * kvw;
        b->wo = p, p += qw * c->d;
        b->norm2 = p, p += c->d;
        b->wg = p, p += (long)c->d * m->ff_local;
        b->wu = p, p += (long)c->d * m->ff_local;
        b->wd = p, p += (long)m->ff_local * c->d;
    }
    *norm = p, p += c->d;
    *head = p, p += (long)c->d * m->v_count;
    m->nparams = p - base;
}

/* Columns [lo, lo + count) of a rows x cols matrix into dst (rows x count). */
static void driver_copy_columns(float *dst, const float *src, int rows, int cols, int lo, int count)
{
    for (int i = 0; i < rows; i++)
        memcpy(dst + (size_t)i * count, src + (size_t)i * cols + lo, sizeof(float) * count);
}

/*
 * This rank's shard of the whole parameters `full` (the same on every rank):
 * the embedding E (V x d), each block in xt_decoder_layout's order, the final
 * norm (d), the head (d x V). Collective over comm (kv_comm is split here).
 */
static void driver_tp_model_init(tp_model *m, const tp_config *c, const float *full, MPI_Comm comm)
{
    memset(m, 0, sizeof *m);
    m->cfg = *c;
    m->comm = comm;
    MPI_Comm_size(comm, &m->np);
    MPI_Comm_rank(comm, &m->rank);
    int np = m->np, r = m->rank;
    if (c->layers > TP_MAX_LAYERS || c->hq % np || c->hq % c->hkv || (c->hkv % np && np % c->hkv))
        xt_die("model_tp: %d layers (at most %d), hq %d, hkv %d at np %d: hq must be a "
               "multiple of np and of hkv, and hkv a multiple or a divisor of np",
               c->layers, TP_MAX_LAYERS, c->hq, c->hkv, np);
    xt_block(c->vocab, np, r, &m->v_lo, &m->v_count);
    xt_block(c->ff, np, r, &m->ff_lo, &m->ff_local);
    m->hq_local = c->hq / np;
    m->q_lo = r * m->hq_local;
    m->replicas = c->hkv >= np ? 1 : np / c->hkv;
    m->hkv_local = c->hkv >= np ? c->hkv / np : 1;
    m->kv_lo = c->hkv >= np ? r * m->hkv_local : r / m->replicas;
    m->kv_comm = MPI_COMM_NULL;
    if (m->replicas > 1)
        MPI_Comm_split(comm, m->kv_lo, r, &m->kv_comm);

    tp_block scratch[TP_MAX_LAYERS];
    float *e, *n, *h;
    driver_tp_views(m, NULL, &e, scratch, &n, &h); /* sizes only */
    size_t bytes = sizeof(float) * (size_t)m->nparams;
    m->params = xt_alloc(XT_MEM_PARAMS, bytes);
    m->grads = xt_alloc(XT_MEM_GRADS, bytes);
    m->adam_m = xt_alloc(XT_MEM_OPTIMIZER, bytes);
    m->adam_v = xt_alloc(XT_MEM_OPTIMIZER, bytes);
    memset(m->adam_m, 0, bytes);
    memset(m->adam_v, 0, bytes);
    memset(m->grads, 0, bytes);
    driver_tp_views(m, m->params, &m->embed, m->blk, &m->final_norm, &m->head);
    driver_tp_views(m, m->grads, &m->dembed, m->dblk, &m->dfinal_norm, &m->dhead);

    int d = c->d, hd = c->hd;
    xt_decoder_shape shape = {d, c->hq, c->hkv, hd, c->ff, c->eps};
    xt_decoder_layout lay = xt_decoder_layout_of(&shape);
    const float *p = full;
    memcpy(m->embed, p + (long)m->v_lo * d, sizeof(float) * (size_t)m->v_count * d);
    p += (long)c->vocab * d;
    for (int l = 0; l < c->layers; l++, p += lay.total) {
        tp_block *b = &m->blk[l];
        int qw = c->hq * hd, kvw = c->hkv * hd;
        memcpy(b->norm1, p + lay.norm1, sizeof(float) * d);
        driver_copy_columns(b->wq, p + lay.wq, d, qw, m->q_lo * hd, m->hq_local * hd);
        driver_copy_columns(b->wk, p + lay.wk, d, kvw, m->kv_lo * hd, m->hkv_local * hd);
        driver_copy_columns(b->wv, p + lay.wv, d, kvw, m->kv_lo * hd, m->hkv_local * hd);
        memcpy(b->wo, p + lay.wo + (long)m->q_lo * hd * d,
               sizeof(float) * (size_t)m->hq_local * hd * d);
        memcpy(b->norm2, p + lay.norm2, sizeof(float) * d);
        driver_copy_columns(b->wg, p + lay.wg, d, c->ff, m->ff_lo, m->ff_local);
        driver_copy_columns(b->wu, p + lay.wu, d, c->ff, m->ff_lo, m->ff_local);
        memcpy(b->wd, p + lay.wd + (long)m->ff_lo * d, sizeof(float) * (size_t)m->ff_local * d);
    }
    memcpy(m->final_norm, p, sizeof(float) * d);
    p += d;
    driver_copy_columns(m->head, p, d, c->vocab, m->v_lo, m->v_count);
}

static void driver_tp_model_free(tp_model *m)
{
    xt_free(m->params);
    xt_free(m->grads);
    xt_free(m->adam_m);
    xt_free(m->adam_v);
    if (m->kv_comm != MPI_COMM_NULL)
        MPI_Comm_free(&m->kv_comm);
}

static tp_config driver_case_config(xt_case *c)
{
    tp_config cfg = {(int)xt_case_int(c, "vocab"),  (int)xt_case_int(c, "d"),
                     (int)xt_case_int(c, "layers"), (int)xt_case_int(c, "hq"),
                     (int)xt_case_int(c, "hkv"),    (int)xt_case_int(c, "hd"),
                     (int)xt_case_int(c, "ff"),     1e-5f};
    return cfg;
}

/*
 * Every tensor this rank holds, as "step<s>_<name>", and its gradient of the step, as
 * "step<s>_grad_<name>": the grader knows the blocks.
 */
static void driver_output_tensors(xt_case *c, const tp_model *m, float *base, int step,
                                  const char *prefix)
{
    float *embed, *final_norm, *head;
    tp_block blk[TP_MAX_LAYERS];
    tp_model sizes = *m;
    driver_tp_views(&sizes, base, &embed, blk, &final_norm, &head);
    char name[64];
    const tp_config *g = &m->cfg;
    long qw = (long)m->hq_local * g->hd, kvw = (long)m->hkv_local * g->hd;
#define DRIVER_OUT(tensor, ptr, count)                                                             \
    do {                                                                                           \
        snprintf(name, sizeof name, "step%d_%s%s", step, prefix, tensor);                          \
        xt_case_output(c, name, ptr, XT_F32, count);                                               \
    } while (0)
    DRIVER_OUT("embed", embed, (long)m->v_count * g->d);
    for (int l = 0; l < g->layers; l++) {
        const tp_block *b = &blk[l];
        const char *names[] = {"norm1", "wq", "wk", "wv", "wo", "norm2", "wg", "wu", "wd"};
        const float *ptrs[] = {b->norm1, b->wq, b->wk, b->wv, b->wo, b->norm2, b->wg, b->wu, b->wd};
        long counts[] = {g->d,
                         g->d * qw,
                         g->d * kvw,
                         g->d * kvw,
                         qw * g->d,
                         g->d,
                         (long)g->d * m->ff_local,
                         (long)g->d * m->ff_local,
                         (long)m->ff_local * g->d};
        for (int k = 0; k < 9; k++) {
            char tensor[24];
            snprintf(tensor, sizeof tensor, "L%d_%s", l, names[k]);
            DRIVER_OUT(tensor, ptrs[k], counts[k]);
        }
    }
    DRIVER_OUT("final_norm", final_norm, g->d);
    DRIVER_OUT("head", head, (long)g->d * m->v_count);
#undef DRIVER_OUT
}

/*
 * Every tensor this rank holds, as "step<s>_<name>", and its gradient of the step, as
 * "step<s>_grad_<name>": the grader knows the blocks.
 */
static void driver_output_shards(xt_case *c, const tp_model *m, int step)
{
    driver_output_tensors(c, m, m->params, step, "");
    driver_output_tensors(c, m, m->grads, step, "grad_");
}

static void run_case(xt_case *c)
{
    tp_config cfg = driver_case_config(c);
    int steps = (int)xt_case_int(c, "steps"), batch = (int)xt_case_int(c, "batch");
    int T = (int)xt_case_int(c, "T");
    xt_adam h = {(float)atof(xt_case_str(c, "lr")), 0.9f, 0.95f, 1e-3f,
                 (float)atof(xt_case_str(c, "wd"))};
    xt_array w0 = xt_case_input_const(c, "w0");
    xt_array tokens = xt_case_input_const(c, "tokens"), targets = xt_case_input_const(c, "targets");
    tp_model m;
    driver_tp_model_init(&m, &cfg, w0.data, xt_case_comm(c));
    for (int s = 0; s < steps; s++) {
        long at = (long)s * batch * T;
        float loss = model_tp_step(&m, (const int *)tokens.data + at,
                                   (const int *)targets.data + at, batch, T, &h);
        char name[24];
        snprintf(name, sizeof name, "step%d_loss", s + 1);
        xt_case_output(c, name, &loss, XT_F32, 1);
        driver_output_shards(c, &m, s + 1);
    }
    driver_tp_model_free(&m);
}

/*
 * A two-block model (vocab 37, d 16, 4 query heads on 2 KV heads, ff 24)
 * trained for 5 steps on a fixed token stream, each step's loss beside the
 * same program on one process (rank 0, MPI_COMM_SELF): what a tensor-parallel
 * run must reproduce.
 */
static void demo(MPI_Comm comm)
{
    enum { STEPS = 5, BATCH = 2, T = 6 };
    tp_config cfg = {37, 16, 2, 4, 2, 4, 24, 1e-5f};
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    xt_decoder_shape shape = {cfg.d, cfg.hq, cfg.hkv, cfg.hd, cfg.ff, cfg.eps};
    long total = 2L * cfg.vocab * cfg.d + cfg.layers * xt_decoder_layout_of(&shape).total + cfg.d;
    float *w0 = malloc(sizeof(float) * (size_t)total);
    xt_rng g = xt_rng_seed(7);
    xt_rng_fill_uniform(&g, w0, total, -0.3f, 0.3f);
    int tokens[STEPS * BATCH * T], targets[STEPS * BATCH * T];
    for (int i = 0; i < STEPS * BATCH * T; i++) {
        tokens[i] = (int)xt_rng_below(&g, (uint64_t)cfg.vocab);
        targets[i] = (tokens[i] * 5 + 3) % cfg.vocab; /* a rule worth learning */
    }
    xt_adam h = {0.05f, 0.9f, 0.95f, 1e-3f, 0.01f};
    tp_model m, single;
    driver_tp_model_init(&m, &cfg, w0, comm);
    xt_printf_root(comm, "decoder: vocab %d, d %d, %d blocks, %d query / %d KV heads, ff %d\n",
                   cfg.vocab, cfg.d, cfg.layers, cfg.hq, cfg.hkv, cfg.ff);
    xt_printf_ordered(comm, "vocab %d..%d, q heads %d..%d, kv head%s %d%s, ff %d..%d\n", m.v_lo,
                      m.v_lo + m.v_count - 1, m.q_lo, m.q_lo + m.hq_local - 1,
                      m.hkv_local > 1 ? "s" : "", m.kv_lo, m.replicas > 1 ? " (shared)" : "",
                      m.ff_lo, m.ff_lo + m.ff_local - 1);
    if (rank == 0)
        driver_tp_model_init(&single, &cfg, w0, MPI_COMM_SELF);
    long before = xt_mpi_calls("MPI_Allreduce");
    for (int s = 0; s < STEPS; s++) {
        int at = s * BATCH * T;
        float loss = model_tp_step(&m, tokens + at, targets + at, BATCH, T, &h), one = 0;
        if (s == 0)
            xt_printf_root(comm, "all-reduces in step 1 on rank 0: %ld = 2 + 4L + 2 (loss)%s\n",
                           xt_mpi_calls("MPI_Allreduce") - before,
                           m.replicas > 1 ? " + 2L (KV replicas)" : "");
        if (rank == 0)
            one = model_tp_step(&single, tokens + at, targets + at, BATCH, T, &h);
        xt_printf_root(comm, "step %d: loss %.6f   single process %.6f   |diff| %.1e\n", s + 1,
                       loss, one, fabsf(loss - one));
    }
    if (rank == 0)
        driver_tp_model_free(&single);
    driver_tp_model_free(&m);
    free(w0);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
