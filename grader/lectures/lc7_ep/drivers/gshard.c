/*
 * The driver of lc7_ep/gshard.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    ep_layer l = ep_layer_read(c);
    int np;
    MPI_Comm_size(comm, &np);
    XT_CHECK(l.renorm == 0 && l.alpha == 0.0f && l.n_experts == l.E / np,
             "gshard cases: renorm 0, alpha 0, each rank's E/np experts (got %d, %g, %ld)",
             l.renorm, l.alpha, l.n_experts);
    long n = (long)l.T * l.d;
    float *y = xt_case_alloc(c, "y", n, XT_F32);
    gshard_state *s = gshard_forward(y, l.x, l.wr, l.experts, l.T, l.d, l.E, l.ff, l.k, l.cf, comm);
    if (xt_case_is(c, "gshard_forward")) {
        xt_case_output(c, "y", y, XT_F32, n);
        gshard_free(s);
        gshard_free(NULL); /* the contract's "s may be NULL" */
        return;
    }
    xt_array dwr = xt_case_input(c, "dwr"), dex = xt_case_input(c, "dexperts");
    float *dx = xt_case_alloc(c, "dx", n, XT_F32);
    gshard_backward(s, dx, dwr.data, dex.data, l.dy);
    xt_case_output(c, "dx", dx, XT_F32, n);
    xt_case_output(c, "dwr", dwr.data, XT_F32, dwr.count);
    xt_case_output(c, "dexperts", dex.data, XT_F32, dex.count);
}

/* ----------------------------------------------------------------- the demo */

enum {
    DRIVER_DT = 4,
    DRIVER_DD = 4,
    DRIVER_DE = 8,
    DRIVER_DFF = 4,
    DRIVER_DK = 2
}; /* tokens per rank, d, E, ff, k */

/*
 * The demo's routing, every rank's tokens (np T of them): idx and w as xt_topk_route gives
 * them, and kept[i] whether choice i fits its expert's capacity C (0: dropless): fewer
 * than C choices of the same rank's tokens for the same expert stand before it in the
 * queue (every first choice in token order, then every second choice).
 */
static void driver_demo_routing(int *idx, float *w, int *kept, const float *x, const float *wr,
                                int np, int C)
{
    int n = np * DRIVER_DT;
    float logits[8 * DRIVER_DT * DRIVER_DE], probs[8 * DRIVER_DT * DRIVER_DE];
    xt_gemm(0, 0, n, DRIVER_DE, DRIVER_DD, 1.0f, x, wr, 0.0f, logits);
    xt_topk_route(idx, w, probs, logits, n, DRIVER_DE, DRIVER_DK, 0);
    for (int i = 0; i < n * DRIVER_DK; i++) {
        int src = i / DRIVER_DK / DRIVER_DT, t = i / DRIVER_DK % DRIVER_DT, j = i % DRIVER_DK,
            ahead = 0;
        for (int u = 0; u < DRIVER_DT; u++)
            for (int jj = 0; jj < DRIVER_DK; jj++)
                if ((jj < j || (jj == j && u < t)) &&
                    idx[(src * DRIVER_DT + u) * DRIVER_DK + jj] == idx[i])
                    ahead++;
        kept[i] = !C || ahead < C;
    }
}

static void driver_token_name(char *out, int src, int t)
{
    snprintf(out, 4, "%c%d", 'a' + src, t);
}

/* The largest |a - b| over n floats. */
/*
 * Every rank draws the whole layer from one seed: np T = 4 np tokens (rank r keeps rows
 * r T ..), a router skewed so that expert 0 is most tokens' first choice and experts 6
 * and 7 nobody's (at np = 4 rank 3 receives no token, and must still take part), E = 8
 * experts, k = 2. --cf=1 sets a capacity (C = ceil(k T cf / E) per expert from each rank's
 * tokens) and shows the choices it drops. Then forward and backward, and the same layer
 * computed one process at a time (each rank's tokens through gshard on MPI_COMM_SELF with
 * all E experts, the experts' gradients summed).
 */
static void demo(MPI_Comm comm)
{
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    if (DRIVER_DE % np || np > 8) {
        xt_printf_root(comm, "this demo runs on 1, 2, 4 or 8 ranks (E = %d experts)\n", DRIVER_DE);
        return;
    }
    float cf = (float)xt_arg_double("cf", 0.0);
    int nl = DRIVER_DE / np, n = np * DRIVER_DT,
        C = cf > 0 ? (int)ceil((double)DRIVER_DK * DRIVER_DT * cf / DRIVER_DE) : 0;
    long per = xt_expert_params(DRIVER_DD, DRIVER_DFF);
    static float x[8 * DRIVER_DT * DRIVER_DD], dy[8 * DRIVER_DT * DRIVER_DD],
        wr[DRIVER_DD * DRIVER_DE], params[DRIVER_DE * 3 * DRIVER_DD * DRIVER_DFF];
    xt_rng g = xt_rng_seed(7);
    xt_rng_fill_uniform(&g, x, n * DRIVER_DD, -1.5f, 1.5f);
    xt_rng_fill_uniform(&g, dy, n * DRIVER_DD, -1.0f, 1.0f);
    xt_rng_fill_uniform(&g, wr, DRIVER_DD * DRIVER_DE, -0.6f, 0.6f);
    xt_rng_fill_uniform(&g, params, DRIVER_DE * per, -1.0f, 1.0f);
    /* The skew: feature 0 of every token lies in [2, 3], and the router's row 0 (what that
     * feature adds to each logit) favours expert 0 and starves experts 6 and 7. */
    for (int i = 0; i < n; i++)
        x[i * DRIVER_DD] = 2.0f + xt_rng_uniform(&g, 0.0f, 1.0f);
    for (int e = 0; e < DRIVER_DE; e++)
        wr[e] = e == 0 ? 0.4f : e >= DRIVER_DE - 2 ? -12.0f : 0.0f;

    int idx[8 * DRIVER_DT * DRIVER_DK], kept[8 * DRIVER_DT * DRIVER_DK];
    float w[8 * DRIVER_DT * DRIVER_DK];
    driver_demo_routing(idx, w, kept, x, wr, np, C);
    xt_printf_root(comm,
                   "GShard, %d rank(s), T = %d tokens each (a0.. on rank 0, b0.. on rank "
                   "1), top-%d\n",
                   np, DRIVER_DT, DRIVER_DK);
    xt_printf_root(comm,
                   "E = %d experts, %d per rank (expert e on rank e/%d); skewed: 6, 7 get "
                   "nothing\n",
                   DRIVER_DE, nl, nl);
    if (C)
        xt_printf_root(comm,
                       "capacity C = ceil(k T cf / E) = %d per expert from each rank "
                       "(cf = %g)\n",
                       C, cf);
    else
        xt_printf_root(comm, "dropless (cf = 0; ARGS=--cf=1 sets a capacity)\n");
    xt_printf_root(comm, "routing: each token's experts and weights%s\n",
                   C ? " (x: dropped, past C)" : "");
    char line[640], name[4];
    int at = 0;
    for (int t = 0; t < DRIVER_DT; t++) {
        int i = (rank * DRIVER_DT + t) * DRIVER_DK;
        driver_token_name(name, rank, t);
        at += snprintf(line + at, sizeof line - (size_t)at, "%s%s", t ? " | " : "", name);
        for (int j = 0; j < DRIVER_DK; j++) {
            int pct = (int)lroundf(w[i + j] * 100.0f);
            at += snprintf(line + at, sizeof line - (size_t)at, " e%d%c.%02d", idx[i + j],
                           kept[i + j] ? ' ' : 'x', pct > 99 ? 99 : pct);
        }
    }
    xt_printf_ordered(comm, "%s\n", line);

    /* sent[s][e]: kept choices of rank s's tokens for expert e */
    int sent[8][DRIVER_DE];
    memset(sent, 0, sizeof sent);
    for (int i = 0; i < n * DRIVER_DK; i++)
        sent[i / DRIVER_DK / DRIVER_DT][idx[i]] += kept[i];
    xt_printf_root(comm,
                   "counts (MPI_Alltoall, %d int(s) per peer): rows for each rank's "
                   "experts\n",
                   nl);
    at = 0;
    int total = 0;
    for (int p = 0; p < np; p++) {
        at += snprintf(line + at, sizeof line - (size_t)at, "%sr%d:", p ? "  " : "to ", p);
        for (int j = 0; j < nl; j++) {
            at += snprintf(line + at, sizeof line - (size_t)at, " %d", sent[rank][p * nl + j]);
            total += sent[rank][p * nl + j];
        }
    }
    xt_printf_ordered(comm, "%s  (%d rows)\n", line, total);
    xt_printf_root(comm, "dispatch (MPI_Alltoallv): each expert's rows, rank by rank, in "
                         "queue order\n");
    line[0] = '\0';
    at = 0;
    for (int j = 0, wrap = 0; j < nl; j++) {
        int e = rank * nl + j, rows = 0;
        for (int s = 0; s < np; s++)
            rows += sent[s][e];
        at += snprintf(line + at, sizeof line - (size_t)at, "%se%d (%d):", j ? "\n" : "", e, rows);
        wrap = at;
        for (int s = 0; s < np; s++) /* from rank s: its queue order, first choices first */
            for (int jj = 0; jj < DRIVER_DK; jj++)
                for (int t = 0; t < DRIVER_DT; t++) {
                    int i = (s * DRIVER_DT + t) * DRIVER_DK + jj;
                    if (idx[i] == e && kept[i]) {
                        driver_token_name(name, s, t);
                        if (at - wrap > 64) /* np = 8: a second line */
                            at += snprintf(line + at, sizeof line - (size_t)at, "\n%8s", ""),
                                wrap = at;
                        at += snprintf(line + at, sizeof line - (size_t)at, " %s", name);
                    }
                }
        if (!rows)
            at += snprintf(line + at, sizeof line - (size_t)at, " none");
    }
    xt_printf_ordered(comm, "%s\n", line);
    xt_printf_root(comm, "combine (MPI_Alltoallv): the outputs go home, the counts "
                         "transposed\n");
    at = 0;
    for (int p = 0; p < np; p++) {
        int rows = 0;
        for (int j = 0; j < nl; j++)
            rows += sent[p][rank * nl + j];
        at += snprintf(line + at, sizeof line - (size_t)at, "%sr%d: %d", p ? "  " : "to ", p, rows);
    }
    xt_printf_ordered(comm, "%s\n", line);

    /* The layer, expert-parallel: this rank's tokens, its experts. */
    float y[DRIVER_DT * DRIVER_DD], dx[DRIVER_DT * DRIVER_DD], dwr[DRIVER_DD * DRIVER_DE],
        dex[DRIVER_DE * 3 * DRIVER_DD * DRIVER_DFF];
    memset(dwr, 0, sizeof dwr);
    memset(dex, 0, sizeof dex);
    long a0 = xt_mpi_calls("MPI_Alltoall"), v0 = xt_mpi_calls("MPI_Alltoallv");
    gshard_state *s =
        gshard_forward(y, x + rank * DRIVER_DT * DRIVER_DD, wr, params + rank * nl * per, DRIVER_DT,
                       DRIVER_DD, DRIVER_DE, DRIVER_DFF, DRIVER_DK, cf, comm);
    long a1 = xt_mpi_calls("MPI_Alltoall"), v1 = xt_mpi_calls("MPI_Alltoallv");
    gshard_backward(s, dx, dwr, dex, dy + rank * DRIVER_DT * DRIVER_DD);
    long a2 = xt_mpi_calls("MPI_Alltoall"), v2 = xt_mpi_calls("MPI_Alltoallv");
    xt_print_buffer_ordered(comm, "y, token 0: ", y, DRIVER_DD, MPI_FLOAT);
    xt_printf_root(comm, "forward: %ld MPI_Alltoall, %ld MPI_Alltoallv; backward: %ld, %ld\n",
                   a1 - a0, v1 - v0, a2 - a1, v2 - v1);

    /* One process at a time: rank s's tokens with every expert, on MPI_COMM_SELF. */
    static float dex1[DRIVER_DE * 3 * DRIVER_DD * DRIVER_DFF];
    float y1[DRIVER_DT * DRIVER_DD], dx1[DRIVER_DT * DRIVER_DD], dwr1[DRIVER_DD * DRIVER_DE],
        ys[DRIVER_DT * DRIVER_DD], dxs[DRIVER_DT * DRIVER_DD], dwrs[DRIVER_DD * DRIVER_DE];
    memset(dex1, 0, sizeof dex1);
    xt_trace_begin("one process, for the check");
    for (int src = 0; src < np; src++) {
        memset(dwrs, 0, sizeof dwrs);
        gshard_state *one =
            gshard_forward(ys, x + src * DRIVER_DT * DRIVER_DD, wr, params, DRIVER_DT, DRIVER_DD,
                           DRIVER_DE, DRIVER_DFF, DRIVER_DK, cf, MPI_COMM_SELF);
        gshard_backward(one, dxs, dwrs, dex1, dy + src * DRIVER_DT * DRIVER_DD);
        if (src == rank) {
            memcpy(y1, ys, sizeof ys);
            memcpy(dx1, dxs, sizeof dxs);
            memcpy(dwr1, dwrs, sizeof dwrs);
        }
    }
    xt_trace_end();
    float err = xt_max_abs_diff(y, y1, DRIVER_DT * DRIVER_DD);
    err = fmaxf(err, xt_max_abs_diff(dx, dx1, DRIVER_DT * DRIVER_DD));
    err = fmaxf(err, xt_max_abs_diff(dwr, dwr1, DRIVER_DD * DRIVER_DE));
    err = fmaxf(err, xt_max_abs_diff(dex, dex1 + rank * nl * per, nl * per));
    float worst;
    MPI_Allreduce(&err, &worst, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm, "max |difference| from one process %.1e\n", worst);
    xt_printf_root(comm, "y, dx, dwr and dexperts: matches one process: %s\n",
                   worst < 1e-5f ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
