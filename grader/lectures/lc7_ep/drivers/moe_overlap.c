/*
 * The driver of lc7_ep/moe_overlap.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    ep_layer l = ep_layer_read(c);
    MPI_Comm comm = xt_case_comm(c);
    int np;
    MPI_Comm_size(comm, &np);
    XT_CHECK(!l.renorm && l.cf == 0.0f && l.n_experts == l.E / np,
             "moe_overlap: a case with renorm 0, cf 0 and each rank's experts (E/np = %d), not "
             "renorm %d, cf %g, %ld experts",
             l.E / np, l.renorm, (double)l.cf, l.n_experts);
    float *y = xt_case_alloc(c, "y", (long)l.T * l.d, XT_F32);
    moe_overlap_forward(y, l.x, l.wr, l.experts, l.T, l.d, l.E, l.ff, l.k, comm);
    xt_case_output(c, "y", y, XT_F32, (long)l.T * l.d);
}

/*
 * T = 6 tokens per rank (micro-batches of 3), d 4, E = 4 experts of ff 8, k 2. Each
 * micro-batch's rows per destination rank, the order of each rank's expert calls
 * (the kit's log: the rows, and the exchanges pending meanwhile), and y beside one
 * process's layer.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 6, D = 4, E = 4, FF = 8, K = 2 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    if (E % np) {
        xt_printf_root(comm, "this demo runs on 1, 2 or 4 ranks (E = %d experts)\n", E);
        return;
    }
    int nl = E / np;
    long per = xt_expert_params(D, FF);
    static float params[E * 3 * D * FF];
    float x[T * D], wr[D * E], y[T * D], want[T * D];
    xt_rng g = xt_rng_seed(11);
    xt_rng_fill_uniform(&g, params, E * per, -0.5f, 0.5f);
    xt_rng_fill_uniform(&g, wr, D * E, -1.0f, 1.0f);
    xt_rng h = xt_rng_seed(200 + (uint64_t)rank);
    xt_rng_fill_uniform(&h, x, T * D, -1.0f, 1.0f);

    /* The routing, as the layer computes it, for the counts printed. */
    float logits[T * E], probs[T * E], w[T * K];
    int idx[T * K];
    xt_gemm(0, 0, T, E, D, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, T, E, K, 0);
    xt_printf_root(comm,
                   "T = %d tokens per rank in 2 micro-batches of %d, d %d; E = %d experts "
                   "(%d per\nrank) of ff %d, k = %d: rows each micro-batch sends to r0..\n",
                   T, T / 2, D, E, nl, FF, K);
    char line[2][64];
    for (int m = 0; m < 2; m++) {
        int lo, count, to[E] = {0}, at = 0;
        xt_block(T, 2, m, &lo, &count);
        for (int i = lo * K; i < (lo + count) * K; i++)
            to[idx[i] / nl]++;
        for (int p = 0; p < np; p++)
            at += snprintf(line[m] + at, sizeof line[m] - (size_t)at, "%s%d", p ? "/" : "", to[p]);
    }
    xt_printf_ordered(comm, "micro-batch 0: %-10s micro-batch 1: %s\n", line[0], line[1]);

    long before = xt_expert_log(NULL, 0, 0);
    moe_overlap_forward(y, x, wr, params + (long)rank * nl * per, T, D, E, FF, K, comm);
    long logged = xt_expert_log(NULL, 0, 0) - before;
    xt_expert_call log[2 * E];
    xt_expert_log(log, before, logged < 2 * E ? logged : 2 * E);
    const char *what[2] = {"micro-batch 1's dispatch", "micro-batch 0's combine"};
    for (int m = 0; m < 2; m++) {
        xt_printf_root(comm,
                       "\nexperts of micro-batch %d, meant to run under %s\n(the kit's "
                       "log: expert:rows, receives still pending meanwhile):\n",
                       m, what[m]);
        char order[160];
        int at = 0, pending = 0;
        for (long i = m * nl; i < (m + 1) * nl && i < logged && i < 2 * E; i++) {
            at += snprintf(order + at, sizeof order - (size_t)at, "e%d:%d ", log[i].expert,
                           log[i].tokens);
            pending = log[i].pending;
        }
        xt_printf_ordered(comm, "%s(%d pending)\n", at ? order : "no expert call ", pending);
    }

    /* One process: every token through its k experts, every expert at hand. */
    memset(want, 0, sizeof want);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < K; j++) {
            int e = idx[t * K + j], one = 1;
            float o[D];
            xt_experts_forward(o, NULL, x + t * D, &one, e, 1, params + (long)e * per, D, FF);
            for (int c = 0; c < D; c++)
                want[t * D + c] += w[t * K + j] * o[c];
        }
    float err = 0.0f, worst;
    for (int i = 0; i < T * D; i++)
        err = fmaxf(err, fabsf(y[i] - want[i]));
    MPI_Allreduce(&err, &worst, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm, "\nmax |difference| from one process %.1e\n", worst);
    xt_printf_root(comm, "y matches one process: %s\n", worst < 1e-5f ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
