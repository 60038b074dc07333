/*
 * The driver of lc4_tp/attention_tp.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void driver_output_int(xt_case *c, const char *name, int v)
{
    xt_case_output(c, name, &v, XT_I32, 1);
}

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int d = (int)xt_case_int(c, "d"), hq = (int)xt_case_int(c, "hq");
    int hkv = (int)xt_case_int(c, "hkv"), hd = (int)xt_case_int(c, "hd");
    attn_tp a;
    attention_tp_init(&a, d, hq, hkv, hd, comm);
    if (xt_case_is(c, "attention_tp_init")) {
        const int f[] = {a.d,    a.hq,        a.hkv,   a.hd,      a.hq_local,
                         a.q_lo, a.hkv_local, a.kv_lo, a.replicas};
        const char *names[] = {"d",    "hq",        "hkv",   "hd",      "hq_local",
                               "q_lo", "hkv_local", "kv_lo", "replicas"};
        for (int i = 0; i < 9; i++)
            driver_output_int(c, names[i], f[i]);
        driver_output_int(c, "comm_is_case", a.comm == comm);
        /* kv_comm's members, as ranks of comm, in kv_comm's rank order (none: NULL). */
        int size = 0, members[64], ranks[64];
        if (a.kv_comm != MPI_COMM_NULL) {
            MPI_Group g_kv, g_case;
            MPI_Comm_size(a.kv_comm, &size);
            XT_CHECK(size <= 64, "kv_comm has %d ranks", size);
            MPI_Comm_group(a.kv_comm, &g_kv);
            MPI_Comm_group(comm, &g_case);
            for (int i = 0; i < size; i++)
                ranks[i] = i;
            MPI_Group_translate_ranks(g_kv, size, ranks, g_case, members);
            MPI_Group_free(&g_kv);
            MPI_Group_free(&g_case);
        }
        xt_case_output(c, "kv_members", members, XT_I32, size);
        attention_tp_free(&a);
        return;
    }
    long qn = (long)a.hq_local * hd, kn = (long)a.hkv_local * hd;
    if (xt_case_is(c, "attention_tp_shard")) {
        xt_array wq = xt_case_input_const(c, "wq_full"), wk = xt_case_input_const(c, "wk_full");
        xt_array wv = xt_case_input_const(c, "wv_full"), wo = xt_case_input_const(c, "wo_full");
        float *q = xt_case_alloc(c, "wq", d * qn, XT_F32),
              *k = xt_case_alloc(c, "wk", d * kn, XT_F32);
        float *v = xt_case_alloc(c, "wv", d * kn, XT_F32),
              *o = xt_case_alloc(c, "wo", qn * d, XT_F32);
        attention_tp_shard(&a, wq.data, wk.data, wv.data, wo.data, q, k, v, o);
        xt_case_output(c, "wq", q, XT_F32, d * qn);
        xt_case_output(c, "wk", k, XT_F32, d * kn);
        xt_case_output(c, "wv", v, XT_F32, d * kn);
        xt_case_output(c, "wo", o, XT_F32, qn * d);
        attention_tp_free(&a);
        return;
    }
    int batch = (int)xt_case_int(c, "batch"), T = (int)xt_case_int(c, "T");
    long n = (long)batch * T;
    xt_array x = xt_case_input_const(c, "x"), wq = xt_case_input_const(c, "wq");
    xt_array wk = xt_case_input_const(c, "wk"), wv = xt_case_input_const(c, "wv");
    xt_array wo = xt_case_input_const(c, "wo");
    float *y = xt_case_alloc(c, "y", n * d, XT_F32);
    float *act =
        xt_case_alloc(c, "act", n * (2 * qn + 2 * kn) + (long)batch * a.hq_local * T, XT_F32);
    attention_tp_forward(&a, x.data, wq.data, wk.data, wv.data, wo.data, y, act, batch, T);
    xt_case_output(c, "y", y, XT_F32, n * d);
    if (xt_case_is(c, "attention_tp_backward")) {
        xt_array dy = xt_case_input_const(c, "dy"), dwq = xt_case_input(c, "dwq");
        xt_array dwk = xt_case_input(c, "dwk"), dwv = xt_case_input(c, "dwv");
        xt_array dwo = xt_case_input(c, "dwo");
        float *dx = xt_case_alloc(c, "dx", n * d, XT_F32);
        attention_tp_backward(&a, x.data, wq.data, wk.data, wv.data, wo.data, act, dy.data, dx,
                              dwq.data, dwk.data, dwv.data, dwo.data, batch, T);
        xt_case_output(c, "dx", dx, XT_F32, n * d);
        xt_case_output(c, "dwq", dwq.data, XT_F32, dwq.count);
        xt_case_output(c, "dwk", dwk.data, XT_F32, dwk.count);
        xt_case_output(c, "dwv", dwv.data, XT_F32, dwv.count);
        xt_case_output(c, "dwo", dwo.data, XT_F32, dwo.count);
    }
    attention_tp_free(&a);
}

/*
 * d = 5, head dim 3, one sequence of 3 tokens; hq = 2 np query heads and
 * hkv = np/2 KV heads (1 when np is odd), so every KV head is replicated on
 * two ranks (np ranks when hkv = 1). Every rank runs the split layer; rank 0
 * also runs the same functions on MPI_COMM_SELF with the whole weights, the
 * single-process twin, and compares y, dx and its own block of dWk.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 3, D = 5, HD = 3, MAXH = 16 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int hq = 2 * np, hkv = np % 2 ? 1 : np / 2;
    if (hq > MAXH) {
        xt_printf_root(comm, "this demo runs on at most %d ranks\n", MAXH / 2);
        return;
    }
    int qw = hq * HD, kw = hkv * HD;
    attn_tp a;
    attention_tp_init(&a, D, hq, hkv, HD, comm);
    int qn = a.hq_local * HD, kn = a.hkv_local * HD;
    static float wq_full[D * MAXH * HD], wk_full[D * MAXH * HD], wv_full[D * MAXH * HD];
    static float wo_full[MAXH * HD * D], act1[T * 4 * MAXH * HD + MAXH * T];
    static float dq1[D * MAXH * HD], dk1[D * MAXH * HD], dv1[D * MAXH * HD], do1[MAXH * HD * D];
    float x[T * D], dy[T * D];
    xt_rng g = xt_rng_seed(4);
    xt_rng_fill_uniform(&g, x, T * D, -1, 1);
    xt_rng_fill_uniform(&g, wq_full, D * qw, -0.5f, 0.5f);
    xt_rng_fill_uniform(&g, wk_full, D * kw, -0.5f, 0.5f);
    xt_rng_fill_uniform(&g, wv_full, D * kw, -0.5f, 0.5f);
    xt_rng_fill_uniform(&g, wo_full, qw * D, -0.5f, 0.5f);
    xt_rng_fill_uniform(&g, dy, T * D, -1, 1);
    float *wq = malloc(sizeof(float) * D * qn), *wk = malloc(sizeof(float) * D * kn);
    float *wv = malloc(sizeof(float) * D * kn), *wo = malloc(sizeof(float) * qn * D);
    float *act = malloc(sizeof(float) * (T * (2 * qn + 2 * kn) + a.hq_local * T));
    float *dwq = calloc(D * qn, sizeof(float)), *dwk = calloc(D * kn, sizeof(float));
    float *dwv = calloc(D * kn, sizeof(float)), *dwo = calloc(qn * D, sizeof(float));
    attention_tp_shard(&a, wq_full, wk_full, wv_full, wo_full, wq, wk, wv, wo);
    xt_printf_root(comm, "causal GQA attention, T %d, d %d, hq %d, hkv %d, head dim %d\n", T, D, hq,
                   hkv, HD);
    xt_printf_ordered(comm, "query heads %d..%d, KV heads %d..%d, replicas %d\n", a.q_lo,
                      a.q_lo + a.hq_local - 1, a.kv_lo, a.kv_lo + a.hkv_local - 1, a.replicas);
    float y[T * D], dx[T * D];
    attention_tp_forward(&a, x, wq, wk, wv, wo, y, act, 1, T);
    xt_print_buffer_ordered(comm, "y row 2: ", y + 2 * D, D, MPI_FLOAT);
    attention_tp_backward(&a, x, wq, wk, wv, wo, act, dy, dx, dwq, dwk, dwv, dwo, 1, T);
    xt_print_buffer_ordered(comm, "dx row 2: ", dx + 2 * D, D, MPI_FLOAT);
    xt_print_buffer_ordered(comm, "dWk row 0: ", dwk, kn, MPI_FLOAT);

    float err = 0, y1[T * D] = {0};
    if (rank == 0) {
        attn_tp one;
        float dx1[T * D];
        attention_tp_init(&one, D, hq, hkv, HD, MPI_COMM_SELF);
        attention_tp_forward(&one, x, wq_full, wk_full, wv_full, wo_full, y1, act1, 1, T);
        attention_tp_backward(&one, x, wq_full, wk_full, wv_full, wo_full, act1, dy, dx1, dq1, dk1,
                              dv1, do1, 1, T);
        attention_tp_free(&one);
        for (int i = 0; i < T * D; i++)
            err = fmaxf(err, fmaxf(fabsf(y[i] - y1[i]), fabsf(dx[i] - dx1[i])));
        for (int i = 0; i < D; i++)
            for (int j = 0; j < kn; j++)
                err = fmaxf(err, fabsf(dwk[i * kn + j] - dk1[i * kw + a.kv_lo * HD + j]));
    }
    xt_print_buffer_at(comm, 0, "one process y row 2: ", y1 + 2 * D, D, MPI_FLOAT);
    xt_printf_root(comm, "split vs single process: max |difference| of y, dx, dWk %.1e (%s)\n", err,
                   err < 1e-5f ? "agree" : "DIFFER");
    xt_printf_root(
        comm, "per layer: one all-reduce of T*d = %d floats forward, one backward%s\n", T * D,
        a.replicas > 1 ? ",\n  and dWk, dWv all-reduced among each KV head's replicas" : "");
    free(wq);
    free(wk);
    free(wv);
    free(wo);
    free(act);
    free(dwq);
    free(dwk);
    free(dwv);
    free(dwo);
    attention_tp_free(&a);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
