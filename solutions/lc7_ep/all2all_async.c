/*
 * all2all_async.c: a nonblocking all-to-all-v with the experts' compute
 * under it. docs/lc7_ep.md#all2all_async
 *
 * Expert parallelism sends every row to the rank of its expert, which
 * computes it and sends the output back. GShard does it with blocking
 * all-to-alls, and nothing computes while the rows travel. But some rows
 * never travel: those whose expert lives on their own rank. So start the
 * exchange of the others, compute the own rows while it is in flight, and
 * only then wait:
 *
 *   rank r   MPI_Ialltoallv(rows to the other ranks) --------------. in flight
 *            xt_experts_forward(the own rows)   <- under the exchange
 *            MPI_Wait  <---------------------------------------------'
 *            xt_experts_forward(the rows received, peer by peer)
 *            MPI_Alltoallv(their outputs back to where they came from)
 *
 *   rows, out:  | to r0: e0 e1 | to r1: e2 e3 | to r2: e4 e5 | ...   (E/np = 2)
 *                 block p: send_counts[p E/np + j] rows for p's expert j
 *
 * The own block stays where it is: its count is 0 in both exchanges, and its
 * outputs are written straight into out. The outputs go back with a blocking
 * MPI_Alltoallv: once the received rows are computed there is nothing left
 * to compute under it.
 *
 * Cost per rank r, with D[s][p] the rows rank s sends rank p: the rows'
 * exchange sends sum_{p != r} D[r][p] d 4 bytes and receives
 * sum_{p != r} D[p][r] d 4; the outputs' exchange the reverse. Under uniform
 * routing each is about (np-1)/np of the rows; the 1/np that stays home is
 * the compute (6 d ff flops a row) that can hide the transfer.
 */
#include "kit.h" /* the lecture's kit: routing, the expert bank */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void experts_exchange(float *out, const float *rows, const int *send_counts, const int *recv_counts,
                      const float *experts, int E, int d, int ff, MPI_Comm comm)
{
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(E % np == 0, "experts_exchange: %d experts cannot be split over %d ranks", E, np);
    /*
     * TODO: experts under an a2a.
     *   rows/out: blocks by destination rank p, then p's expert j (send_counts[p E/np + j]
     *   rows of d); recv_counts[p E/np + j]: what p sends this rank's expert j. Graded:
     *   out on every rank; exactly the rows to each other rank and their outputs back,
     *   nothing to itself, by two all-to-all-v (the first an MPI_Ialltoallv) or by
     *   point-to-point only; the rows' exchange started before the own rows'
     *   xt_experts_forward and waited after it, those rows computed before any received
     *   one; experts through xt_experts_forward (global expert indices) only.
     */
    // BEGIN SOLUTION
    int nl = E / np, first = rank * nl;
    /* Per peer, in floats: what goes (sc, at sd in rows and out) and what comes (rc, rd). */
    int *sc = malloc(sizeof(int) * 4 * (size_t)np), *sd = sc + np, *rc = sd + np, *rd = rc + np;
    int sent = 0, got = 0;
    for (int p = 0; p < np; p++) {
        sc[p] = rc[p] = 0;
        for (int j = 0; j < nl; j++) {
            sc[p] += send_counts[p * nl + j] * d;
            rc[p] += recv_counts[p * nl + j] * d;
        }
        sd[p] = sent;
        rd[p] = got;
        sent += sc[p];
        got += rc[p];
    }
    int own = sd[rank];
    sc[rank] = rc[rank] = 0; /* the own rows stay: no message to itself */
    float *in = malloc(sizeof(float) * (size_t)(2L * got + 1)), *y = in + got;
    MPI_Request req;
    MPI_Ialltoallv(rows, sc, sd, MPI_FLOAT, in, rc, rd, MPI_FLOAT, comm, &req);
    /* While the others' rows travel: the own rows, straight into out. */
    xt_experts_forward(out + own, NULL, rows + own, send_counts + rank * nl, first, nl, experts, d,
                       ff);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    for (int p = 0; p < np; p++)
        if (rc[p])
            xt_experts_forward(y + rd[p], NULL, in + rd[p], recv_counts + p * nl, first, nl,
                               experts, d, ff);
    MPI_Alltoallv(y, rc, rd, MPI_FLOAT, out, sc, sd, MPI_FLOAT, comm);
    free(in);
    free(sc);
    // END SOLUTION
}

/* ------------------------------------------------------------------------ */

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
static void per_peer(char *line, size_t cap, const int *counts, int np)
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
    per_peer(to, sizeof to, rows_to, np);
    per_peer(from, sizeof from, rows_from, np);
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
