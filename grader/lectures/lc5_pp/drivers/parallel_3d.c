/*
 * The driver of lc5_pp/parallel_3d.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/*
 * The case: "mesh" (as "pp=2,dp=2,tp=2"), the model, "steps" steps of "seqs" sequences
 * of T tokens in M micro-batches; "w0" the whole initial parameters, "tokens" and "targets"
 * every step's batch. Writes the loss of each step on the last stage's ranks, this rank's
 * shard's gradients after step 1 ("grads") and its parameters after the last ("params").
 */
static void run_case(xt_case *c)
{
    pp_lm_case lm;
    pp_lm_case_read(c, &lm);
    lm.stage = pp_lm_stage(&lm.model, lm.w0, &lm.mesh, xt_mesh_group(&lm.mesh, "tp"));
    const pp_lm *m = &lm.model;
    for (int s = 0; s < lm.steps; s++)
        pp_lm_case_stepped(c, &lm, s,
                           parallel_3d_step(lm.stage, &lm.mesh, pp_lm_case_tokens(&lm, s),
                                            pp_lm_case_targets(&lm, s), m->seqs, m->T, m->M,
                                            &lm.adam));
    pp_lm_case_free(c, &lm, 1);
}

/* ------------------------------------------------------------------- the demo */

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
    pp_lm m = {29, 4, 4 * dp, 6, MB, {8, 4, 2, 2, 12, 1e-5f}};
    pp_lm_demo data = pp_lm_demo_new(&m, STEPS, 0);
    xt_adam h = {0.05f, 0.9f, 0.95f, 1e-3f, 0.01f};
    xt_tp_stage *stage = pp_lm_stage(&m, data.w0, &mesh, xt_mesh_group(&mesh, "tp"));
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
        float loss = parallel_3d_step(stage, &mesh, first ? data.tokens + at : NULL,
                                      last ? data.targets + at : NULL, m.seqs, m.T, m.M, &h);
        float one = pp_lm_single_step(&m, 0, data.w, data.g, data.mom, data.vel, s + 1,
                                      data.tokens + at, data.targets + at, &h);
        float shown = last ? loss : -INFINITY;
        MPI_Allreduce(MPI_IN_PLACE, &shown, 1, MPI_FLOAT, MPI_MAX, comm);
        worst = fmax(worst, fabs((double)shown - one) / (1.0 + fabs((double)one)));
        xt_printf_root(comm, "step %d: loss %.6f   one process %.6f   |diff| %.1e\n", s + 1,
                       (double)shown, (double)one, fabs((double)shown - one));
    }
    /* Every rank's shard against the same shard of the single process's parameters. */
    xt_tp_stage *twin = pp_lm_stage(&m, data.w, &mesh, xt_mesh_group(&mesh, "tp"));
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
    pp_lm_demo_free(&data);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
