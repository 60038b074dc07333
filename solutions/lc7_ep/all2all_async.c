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

/*
 * The grader's cases, the demo and main: grader/lectures/lc7_ep/drivers/all2all_async.c,
 * compiled with this file into one program (its own names begin with driver_).
 */
