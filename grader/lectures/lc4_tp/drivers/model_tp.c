/*
 * The driver of lc4_tp/model_tp.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

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
    xt_tp_model_views(m, base, &embed, blk, &final_norm, &head);
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
    xt_tp_model_init(&m, &cfg, w0.data, 0, cfg.layers, xt_case_comm(c));
    for (int s = 0; s < steps; s++) {
        long at = (long)s * batch * T;
        float loss = model_tp_step(&m, (const int *)tokens.data + at,
                                   (const int *)targets.data + at, batch, T, &h);
        char name[24];
        snprintf(name, sizeof name, "step%d_loss", s + 1);
        xt_case_output(c, name, &loss, XT_F32, 1);
        driver_output_shards(c, &m, s + 1);
    }
    xt_tp_model_free(&m);
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
    xt_tp_model_init(&m, &cfg, w0, 0, cfg.layers, comm);
    xt_printf_root(comm, "decoder: vocab %d, d %d, %d blocks, %d query / %d KV heads, ff %d\n",
                   cfg.vocab, cfg.d, cfg.layers, cfg.hq, cfg.hkv, cfg.ff);
    xt_printf_ordered(comm, "vocab %d..%d, q heads %d..%d, kv head%s %d%s, ff %d..%d\n", m.v_lo,
                      m.v_lo + m.v_count - 1, m.q_lo, m.q_lo + m.hq_local - 1,
                      m.hkv_local > 1 ? "s" : "", m.kv_lo, m.replicas > 1 ? " (shared)" : "",
                      m.ff_lo, m.ff_lo + m.ff_local - 1);
    if (rank == 0)
        xt_tp_model_init(&single, &cfg, w0, 0, cfg.layers, MPI_COMM_SELF);
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
        xt_tp_model_free(&single);
    xt_tp_model_free(&m);
    free(w0);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
