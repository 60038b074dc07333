/*
 * The driver of lc3_zero/adam.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static float driver_case_float(xt_case *c, const char *key)
{
    return (float)atof(xt_case_str(c, key));
}

/*
 * Case mode: this rank's own problem, p0 (n floats) and the gradients of
 * every step (steps x n); after step s (from 1) the parameters are written
 * as "step<s>_params".
 */
static void run_case(xt_case *c)
{
    long n = xt_case_int(c, "n");
    int steps = (int)xt_case_int(c, "steps");
    xt_adam h = {.lr = driver_case_float(c, "lr"),
                 .beta1 = driver_case_float(c, "beta1"),
                 .beta2 = driver_case_float(c, "beta2"),
                 .eps = driver_case_float(c, "eps"),
                 .weight_decay = driver_case_float(c, "wd")};
    xt_array p0 = xt_case_input_const(c, "p0");
    xt_array grads = xt_case_input_const(c, "grads");
    XT_CHECK(p0.count == n && grads.count == steps * n, "p0 or grads do not hold %ld x %d floats",
             n, steps);

    float *params = xt_alloc(XT_MEM_PARAMS, sizeof(float) * (size_t)n);
    memcpy(params, p0.data, sizeof(float) * (size_t)n);
    adam_state s;
    adam_state_init(&s, n);
    for (int t = 1; t <= steps; t++) {
        adam_update(params, (const float *)grads.data + (long)(t - 1) * n, s.m, s.v, n, t, &h);
        char name[32];
        snprintf(name, sizeof name, "step%d_params", t);
        xt_case_output(c, name, params, XT_F32, n);
    }
    adam_state_free(&s);
    xt_free(params);
}

/*
 * Demo: rank r minimises its own one-weight problem f(p) = a p^2 / 2 from
 * p = 1, with a = 100 on rank 0, 1 on rank 1, 0.01 on rank 2, ...: gradients
 * a p, orders of magnitude apart. Plain SGD with the same lr would take steps
 * lr a p: 10 on rank 0 (it diverges), 1e-3 on rank 2 (it hardly moves).
 * Adam's first step is lr on every rank. Options: --steps --lr --beta1
 * --beta2 --eps --wd.
 */
static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int steps = (int)xt_arg_int("steps", 6);
    xt_adam h = {.lr = (float)xt_arg_double("lr", 0.1),
                 .beta1 = (float)xt_arg_double("beta1", 0.9),
                 .beta2 = (float)xt_arg_double("beta2", 0.999),
                 .eps = (float)xt_arg_double("eps", 1e-8),
                 .weight_decay = (float)xt_arg_double("wd", 0.0)};
    float a = (float)(100.0 * pow(0.01, rank % 5));
    float p = 1.0f, sgd = 1.0f;

    xt_printf_root(comm,
                   "AdamW lr %g, betas %g %g, eps %g, wd %g\n"
                   "rank r minimises its own f(p) = a p^2 / 2 from p = 1 (gradient a p)\n",
                   (double)h.lr, (double)h.beta1, (double)h.beta2, (double)h.eps,
                   (double)h.weight_decay);
    xt_printf_ordered(comm, "a = %g: plain SGD's first step would be lr a p = %g\n", (double)a,
                      (double)(h.lr * a));
    adam_state s;
    adam_state_init(&s, 1);
    for (int t = 1; t <= steps; t++) {
        float g = a * p;
        float before = p;
        adam_update(&p, &g, s.m, s.v, 1, t, &h);
        sgd -= h.lr * a * sgd;
        if (t == 1)
            xt_printf_root(comm, "     %4s  %12s  %12s  %12s  %8s  %s\n", "step", "gradient g",
                           "m (mean g)", "v (mean g^2)", "p", "change of p");
        xt_printf_ordered(comm, "%4d  %+12.4e  %+12.4e  %12.4e  %+8.5f  %+.5f\n", t, (double)g,
                          (double)s.m[0], (double)s.v[0], (double)p, (double)(p - before));
    }
    xt_printf_root(comm, "after %d steps, Adam's p beside plain SGD's with the same lr:\n", steps);
    xt_printf_ordered(comm, "a = %-6g Adam p = %+.5f   SGD p = %+.5g\n", (double)a, (double)p,
                      (double)sgd);
    adam_state_free(&s);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
