/*
 * The driver of lc7_ep/all2all_async.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int E = (int)xt_case_int(c, "E"), d = (int)xt_case_int(c, "d");
    int ff = (int)xt_case_int(c, "ff");
    xt_array rows = xt_case_input_const(c, "rows");
    xt_array sc = xt_case_input_const(c, "send_counts");
    xt_array rc = xt_case_input_const(c, "recv_counts");
    xt_array ex = xt_case_input_const(c, "experts");
    XT_CHECK(sc.count == E && rc.count == E && rows.count % d == 0,
             "the case's counts hold %ld and %ld ints for E=%d, its rows %ld floats for d=%d",
             sc.count, rc.count, E, rows.count, d);
    float *out = xt_case_alloc(c, "out", rows.count, XT_F32);
    experts_exchange(out, rows.data, sc.data, rc.data, ex.data, E, d, ff, comm);
    xt_case_output(c, "out", out, XT_F32, rows.count);
}

/* "2/0/1/3": a rank's counts per peer, for the demo's lines. */
static void driver_per_peer(char *line, size_t cap, const int *counts, int np)
{
    int at = 0;
    for (int p = 0; p < np && at < (int)cap; p++)
        at += snprintf(line + at, cap - (size_t)at, "%s%d", p ? "/" : "", counts[p]);
}

/*
 * E = 2 np experts of d = 4, ff = 8; rank s sends expert e (s + 2 e) % 3 rows, none
 * to the last rank's experts, which therefore receives nothing. Each rank's counts,
 * the order in which its expert calls ran (the kit's log: the rows each computed, and
 * whether an exchange was pending), and its outputs beside one process's.
 */
static void demo(MPI_Comm comm)
{
    enum { D = 4, FF = 8, MAXE = 16 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int E = 2 * np, nl = 2;
    if (E > MAXE) {
        xt_printf_root(comm, "this demo runs on at most %d ranks\n", MAXE / 2);
        return;
    }
    int counts[MAXE][MAXE], sc[MAXE], rc[MAXE], rows_to[MAXE], rows_from[MAXE], n = 0;
    for (int s = 0; s < np; s++)
        for (int e = 0; e < E; e++)
            counts[s][e] = np > 1 && e / nl == np - 1 ? 0 : (s + 2 * e) % 3;
    for (int p = 0; p < np; p++) {
        rows_to[p] = rows_from[p] = 0;
        for (int j = 0; j < nl; j++) {
            sc[p * nl + j] = counts[rank][p * nl + j];
            rc[p * nl + j] = counts[p][rank * nl + j];
            rows_to[p] += sc[p * nl + j];
            rows_from[p] += rc[p * nl + j];
        }
        n += rows_to[p];
    }
    long per = xt_expert_params(D, FF);
    float *params = malloc(sizeof(float) * (size_t)(E * per));
    float *rows = malloc(sizeof(float) * (size_t)(n * D + 1));
    float *out = malloc(sizeof(float) * (size_t)(n * D + 1));
    float *want = malloc(sizeof(float) * (size_t)(n * D + 1));
    xt_rng g = xt_rng_seed(7);
    xt_rng_fill_uniform(&g, params, E * per, -0.5f, 0.5f);
    xt_rng h = xt_rng_seed(100 + (uint64_t)rank);
    xt_rng_fill_uniform(&h, rows, n * D, -1.0f, 1.0f);

    xt_printf_root(comm,
                   "%d experts (%d per rank) of d %d, ff %d; rank s sends expert e "
                   "(s + 2e) %% 3 rows,\nnone to the last rank's experts%s\n\n",
                   E, nl, D, FF, np > 1 ? ": it receives nothing" : "");
    char to[64], from[64];
    driver_per_peer(to, sizeof to, rows_to, np);
    driver_per_peer(from, sizeof from, rows_from, np);
    xt_printf_ordered(comm, "rows to r0.. %-12s from r0.. %-12s (own %d)\n", to, from,
                      rows_to[rank]);

    long before = xt_expert_log(NULL, 0, 0);
    experts_exchange(out, rows, sc, rc, params + (long)rank * nl * per, E, D, FF, comm);
    long logged = xt_expert_log(NULL, 0, 0) - before;
    xt_expert_call *log = malloc(sizeof *log * (size_t)(logged + 1));
    xt_expert_log(log, before, logged);
    /* The rows computed while an exchange was pending, up to the first call without one
     * (the wait came before it), and the rows after. */
    int under = 0, after = 0, waited = 0;
    for (long i = 0; i < logged; i++) {
        waited |= !log[i].pending;
        if (waited)
            after += log[i].tokens;
        else
            under += log[i].tokens;
    }
    xt_printf_root(comm, "\nthe order, from libxt's log of the expert calls: rows computed while "
                         "an\nexchange was pending (the own ones, under MPI_Ialltoallv), then "
                         "after the wait\n");
    xt_printf_ordered(comm, "%d row%s with an exchange in flight, then %d after the wait\n", under,
                      under == 1 ? "" : "s", after);

    /* One process: every row through its own expert, every expert at hand. */
    float err = 0.0f;
    long at = 0;
    for (int e = 0; e < E; e++) {
        xt_experts_forward(want + at * D, NULL, rows + at * D, &counts[rank][e], e, 1,
                           params + (long)e * per, D, FF);
        at += counts[rank][e];
    }
    for (long i = 0; i < (long)n * D; i++)
        err = fmaxf(err, fabsf(out[i] - want[i]));
    float worst;
    MPI_Allreduce(&err, &worst, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm, "\nmax |difference| from one process %.1e\n", worst);
    xt_printf_root(comm, "every row's output matches one process: %s\n",
                   worst < 1e-5f ? "yes" : "NO");
    free(log);
    free(want);
    free(out);
    free(rows);
    free(params);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
