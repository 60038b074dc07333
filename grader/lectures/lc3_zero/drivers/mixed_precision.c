/*
 * The driver of lc3_zero/mixed_precision.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/*
 * Case mode: this rank trains its own model (no data parallelism) from w0;
 * case parameters scale0 and interval, and Adam's lr, beta1, beta2, eps, wd.
 * After step s (from 1): step<s>_master, step<s>_compute (the compute copy
 * the step used), step<s>_grad, step<s>_scale (after the step) and
 * step<s>_skipped.
 */
static void run_case(xt_case *c)
{
    xt_train_case t = xt_train_case_begin(c);
    mixed_state s;
    mixed_init(&s, &t.model, &t.adam, (float)atof(xt_case_str(c, "scale0")),
               (int)xt_case_int(c, "interval"));
    long n = t.model.nparams;
    for (int k = 0; k < t.steps; k++) {
        float loss;
        int32_t skipped = mixed_precision_step(&s, &t.model, xt_train_case_x(&t, k),
                                               xt_train_case_target(&t, k), t.rows, &loss);
        char name[64];
        snprintf(name, sizeof name, "step%d_master", k + 1);
        xt_case_output(c, name, s.master, XT_F32, n);
        snprintf(name, sizeof name, "step%d_compute", k + 1);
        xt_case_output(c, name, t.model.params, XT_F32, n);
        snprintf(name, sizeof name, "step%d_grad", k + 1);
        xt_case_output(c, name, t.model.grads, XT_F32, n);
        snprintf(name, sizeof name, "step%d_scale", k + 1);
        xt_case_output(c, name, &s.scale, XT_F32, 1);
        snprintf(name, sizeof name, "step%d_skipped", k + 1);
        xt_case_output(c, name, &skipped, XT_I32, 1);
        xt_train_case_loss(&t, k, loss);
    }
    mixed_free(&s);
    xt_train_case_end(&t);
}

/*
 * Demo: every rank trains its own MLP on its own rows of libxt's demo data
 * (no communication at all). At step --overflow_step (default 3; 0: none)
 * input 0 of every row of the batch is set to 1e37, a corrupted batch whose
 * scaled gradients overflow float32: watch that step get skipped and the
 * scale halve, and the scale double after --interval clean steps (default
 * 2). Options: --scale0 (65536), --lr (0.01 here), --beta1 --beta2 --eps
 * --wd, and the training demo's --dims --act --loss --steps --rows.
 */
static void demo(MPI_Comm comm)
{
    xt_train_demo d = xt_train_demo_begin(comm, "8,32,32,4");
    d.adam.lr = (float)xt_arg_double("lr", 0.01);
    int overflow_step = (int)xt_arg_int("overflow_step", 3);
    int interval = (int)xt_arg_int("interval", 2);
    float scale0 = (float)xt_arg_double("scale0", 65536);
    XT_CHECK(interval >= 1 && scale0 > 0, "--interval must be >= 1 and --scale0 > 0");
    mixed_state s;
    mixed_init(&s, &d.model, &d.adam, scale0, interval);

    long n = d.model.nparams, width = (long)d.rows * d.model.dims[0];
    float *x = xt_malloc(sizeof(float) * (size_t)width);
    char planted[96] = "";
    if (overflow_step > 0)
        snprintf(planted, sizeof planted,
                 "planted overflow: input 0 of every row = 1e37 at step %d\n", overflow_step);
    float *before = xt_malloc(sizeof(float) * (size_t)n); /* the master the step rounds */
    xt_printf_root(comm,
                   "AdamW lr %g; loss scale %g, x2 after %d clean steps, /2 on overflow\n"
                   "%s"
                   "rank 0 (every rank trains its own model on its own rows):\n"
                   "step  loss          scale used  skipped  scale after  bf16 rounding: max\n"
                   "                                                      |master - compute|\n",
                   (double)d.adam.lr, (double)scale0, interval, planted);
    int skips = 0;
    float first = 0.0f, last = 0.0f;
    for (int k = 0; k < d.steps; k++) {
        memcpy(x, xt_train_demo_x(&d, k), sizeof(float) * (size_t)width);
        if (k + 1 == overflow_step)
            for (int r = 0; r < d.rows; r++)
                x[(long)r * d.model.dims[0]] = 1e37f;
        float used = s.scale, loss;
        memcpy(before, s.master, sizeof(float) * (size_t)n);
        int skipped =
            mixed_precision_step(&s, &d.model, x, xt_train_demo_target(&d, k), d.rows, &loss);
        double gap = 0.0;
        for (long i = 0; i < n; i++)
            gap = fmax(gap, fabs((double)before[i] - d.model.params[i]));
        skips += skipped;
        if (k == 0)
            first = loss;
        last = loss;
        xt_printf_root(comm, "%4d  %-12.6g  %10g  %-7s  %11g  %.2g\n", k + 1, (double)loss,
                       (double)used, skipped ? "yes" : "no", (double)s.scale, gap);
    }
    xt_printf_ordered(comm, "%d steps, %d skipped, final scale %g, loss %.4g -> %.4g\n", d.steps,
                      skips, (double)s.scale, (double)first, (double)last);
    xt_printf_root(comm,
                   "rank 0, bytes per parameter counted by xt_alloc: master %.0f, moments %.0f\n"
                   "(and the bf16 compute copy and gradient: float slots here, 2 B each on a "
                   "GPU)\n",
                   (double)xt_mem_peak(XT_MEM_MASTER) / (double)n,
                   (double)xt_mem_peak(XT_MEM_OPTIMIZER) / (double)n);
    free(x);
    free(before);
    mixed_free(&s);
    xt_train_demo_end(&d);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
