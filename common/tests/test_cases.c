/*
 * test_cases.c: case mode, checked by the self-test. Each case's fn says what
 * the "exercise" does:
 *   copy       output y = input x, plus its group rank and size
 *   overrun    writes one element past the end of its output buffer
 *   underrun   writes one element before its start
 *   modify     changes its const input
 *   pending    rank 0 starts a send to rank 1 and never waits for it
 *   reuse      rank 1 posts two receives into one buffer (rank 0 sends two)
 *   inflight   rank 0 changes the buffer of its MPI_Isend to rank 1 before waiting
 *   early      rank 1 copies its MPI_Irecv's buffer before the wait ('early') and after
 *              it ('late'): the receive poison, then the message
 *   freed      rank 0 frees its MPI_Isend's request with MPI_Request_free
 *   written    rank 1 writes into its MPI_Irecv's buffer before the wait
 *   icoll      two in-place MPI_Iallreduce pending at once (on one rank Open MPI gives both
 *              the same request): 'early' read before the wait, 'late_a', 'late_b' after
 *   icoll_sent changes its MPI_Ialltoall's send buffer before the wait
 *   igather    MPI_Igather to rank 0, which copies its receive buffer before the wait
 *              ('early': the poison) and after it ('late': every rank's pair)
 *   iscatter_sent  rank 0 changes its MPI_Iscatter's send buffer before the wait
 *   persistent 'early' and 'late' again, through MPI_Recv_init and MPI_Start, twice
 *              ('early2', 'late2' the second time): a message that lands during the
 *              start is the message
 *   world      all-reduces its rank over MPI_COMM_WORLD instead of its comm
 *   note       leaves a remark for the grader
 *   peek       tries to read rank 0's input file directly (refused in case mode)
 *   nullout    hands back a NULL output that should hold elements
 *   print      prints a line on stdout and one on stderr (the case's output file)
 *   event      logs events of two kinds a kit would declare (xt_event_kind, xt_event): the
 *              record must list them in order, after each kind's description
 *              (grader/selftest.py)
 */
#include "xt_harness.h"

#include <stdio.h>
#include <string.h>

/* Q 0 .. Q 4 interleaved with R 0, R 1, each with the clock: "Q <i> <start> <end>". */
static void events(void)
{
    xt_event_kind("Q", "test event: index start end");
    xt_event_kind("RR", "another kind: index");
    for (int i = 0; i < 5; i++) {
        double start = xt_case_clock();
        xt_event("Q", "%d %.6f %.6f", i, start, xt_case_clock());
        if (i % 2)
            xt_event("RR", "%d", i / 2);
    }
}

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    xt_array x = xt_case_input_const(c, "x");
    float *y = xt_case_alloc(c, "y", x.count, XT_F32);
    memcpy(y, x.data, sizeof(float) * (size_t)x.count);
    if (xt_case_is(c, "overrun"))
        y[x.count] = 1.0f;
    if (xt_case_is(c, "underrun"))
        y[-1] = 1.0f;
    if (xt_case_is(c, "modify"))
        ((float *)x.data)[1] += 1.0f;
    if (xt_case_is(c, "pending") && np > 1) {
        int v = 1;
        if (rank == 0) {
            MPI_Request r;
            MPI_Isend(&v, 1, MPI_INT, 1, 0, comm, &r);
        } else if (rank == 1) {
            MPI_Recv(&v, 1, MPI_INT, 0, 0, comm, MPI_STATUS_IGNORE);
        }
    }
    if (xt_case_is(c, "reuse") && np > 1) {
        int v[2] = {1, 2}, into = 0;
        MPI_Request r[2];
        if (rank == 0) {
            MPI_Isend(&v[0], 1, MPI_INT, 1, 0, comm, &r[0]);
            MPI_Isend(&v[1], 1, MPI_INT, 1, 1, comm, &r[1]);
        } else if (rank == 1) {
            MPI_Irecv(&into, 1, MPI_INT, 0, 0, comm, &r[0]);
            MPI_Irecv(&into, 1, MPI_INT, 0, 1, comm, &r[1]);
        }
        if (rank < 2)
            MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
    }
    if (xt_case_is(c, "inflight") && np > 1) {
        int v[64] = {0};
        if (rank == 0) {
            MPI_Request r;
            MPI_Isend(v, 64, MPI_INT, 1, 0, comm, &r);
            v[3] = 7;
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(v, 64, MPI_INT, 0, 0, comm, MPI_STATUS_IGNORE);
        }
    }
    if (xt_case_is(c, "early") && np > 1) {
        int32_t w[4] = {1, 2, 3, 4}, sent[3] = {5, 6, 7}, early[4], late[4];
        if (rank == 0)
            MPI_Send(sent, 3, MPI_INT, 1, 0, comm);
        else if (rank == 1) {
            MPI_Request r;
            MPI_Irecv(w, 4, MPI_INT, 0, 0, comm, &r); /* 3 of 4 arrive; w[3] stays 4 */
            memcpy(early, w, sizeof w);
            MPI_Wait(&r, MPI_STATUS_IGNORE);
            memcpy(late, w, sizeof w);
            xt_case_output(c, "early", early, XT_I32, 4);
            xt_case_output(c, "late", late, XT_I32, 4);
        }
    }
    if (xt_case_is(c, "persistent") && np > 1) {
        int32_t w[4] = {1, 2, 3, 4}, sent[2][3] = {{5, 6, 7}, {8, 9, 10}}, got[4][4];
        if (rank == 0) {
            MPI_Send(sent[0], 3, MPI_INT, 1, 0, comm);
            MPI_Send(sent[1], 3, MPI_INT, 1, 0, comm);
        } else if (rank == 1) {
            MPI_Request r;
            MPI_Recv_init(w, 4, MPI_INT, 0, 0, comm, &r);
            for (int i = 0; i < 2; i++) {
                MPI_Start(&r);
                memcpy(got[2 * i], w, sizeof w);
                MPI_Wait(&r, MPI_STATUS_IGNORE);
                memcpy(got[2 * i + 1], w, sizeof w);
            }
            MPI_Request_free(&r);
            const char *names[4] = {"early", "late", "early2", "late2"};
            for (int i = 0; i < 4; i++)
                xt_case_output(c, names[i], got[i], XT_I32, 4);
        }
    }
    if (xt_case_is(c, "written") && np > 1) {
        int32_t w[4] = {0};
        if (rank == 0)
            MPI_Send(w, 4, MPI_INT, 1, 0, comm);
        else if (rank == 1) {
            MPI_Request r;
            MPI_Irecv(w, 4, MPI_INT, 0, 0, comm, &r);
            w[1] = 9;
            MPI_Wait(&r, MPI_STATUS_IGNORE);
        }
    }
    if (xt_case_is(c, "icoll")) {
        int32_t a[3] = {rank + 1, 2 * (rank + 1), 3}, b[2] = {rank, 1}, early[3];
        MPI_Request r[2];
        MPI_Iallreduce(MPI_IN_PLACE, a, 3, MPI_INT, MPI_SUM, comm, &r[0]);
        MPI_Iallreduce(MPI_IN_PLACE, b, 2, MPI_INT, MPI_SUM, comm, &r[1]);
        memcpy(early, a, sizeof a);
        MPI_Waitall(2, r, MPI_STATUSES_IGNORE);
        xt_case_output(c, "early", early, XT_I32, 3);
        xt_case_output(c, "late_a", a, XT_I32, 3);
        xt_case_output(c, "late_b", b, XT_I32, 2);
    }
    if (xt_case_is(c, "icoll_sent")) {
        int32_t s[8] = {0}, r[8];
        MPI_Request req;
        MPI_Ialltoall(s, 1, MPI_INT, r, 1, MPI_INT, comm, &req);
        if (rank == 0)
            s[np - 1] = 5;
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (xt_case_is(c, "igather")) {
        int32_t mine[2] = {rank + 1, rank + 1}, all[16] = {0}, early[16];
        MPI_Request req;
        MPI_Igather(mine, 2, MPI_INT, all, 2, MPI_INT, 0, comm, &req);
        memcpy(early, all, sizeof(int32_t) * 2 * (size_t)np);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
        if (rank == 0) {
            xt_case_output(c, "early", early, XT_I32, 2 * np);
            xt_case_output(c, "late", all, XT_I32, 2 * np);
        }
    }
    if (xt_case_is(c, "iscatter_sent")) {
        int32_t s[8] = {0}, mine;
        MPI_Request req;
        MPI_Iscatter(s, 1, MPI_INT, &mine, 1, MPI_INT, 0, comm, &req);
        if (rank == 0)
            s[np - 1] = 5;
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    if (xt_case_is(c, "freed") && np > 1) {
        int v = 1;
        if (rank == 0) {
            MPI_Request r;
            MPI_Isend(&v, 1, MPI_INT, 1, 0, comm, &r);
            MPI_Request_free(&r);
        } else if (rank == 1) {
            MPI_Recv(&v, 1, MPI_INT, 0, 0, comm, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(comm); /* v outlives the send */
    }
    if (xt_case_is(c, "world")) {
        int me = rank, sum = 0;
        MPI_Allreduce(&me, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    }
    if (xt_case_is(c, "note"))
        xt_case_note(c, "returned %d, expected %d", 3, 4);
    if (xt_case_is(c, "peek")) {
        char path[4096], err[512];
        snprintf(path, sizeof path, "%s/c%s/g0.r0.x.npy", xt_arg_str("cases", "."),
                 xt_case_str(c, "index"));
        xt_array other;
        int32_t refused = xt_npy_try_read(path, &other, err, sizeof err) != 0;
        if (!refused)
            xt_array_free(&other);
        xt_case_output(c, "refused", &refused, XT_I32, 1);
    }
    if (xt_case_is(c, "nullout"))
        xt_case_output(c, "lost", NULL, XT_F32, 3);
    if (xt_case_is(c, "print")) {
        printf("case %s rank %d of %d\n", xt_case_str(c, "index"), rank, np);
        fprintf(stderr, "stderr of rank %d\n", rank);
    }
    if (xt_case_is(c, "event"))
        events();
    int32_t who[2] = {rank, np};
    xt_case_output(c, "y", y, XT_F32, x.count);
    xt_case_output(c, "who", who, XT_I32, 2);
}

static void demo(MPI_Comm comm)
{
    xt_printf_ordered(comm, "case-mode test program; run it with --cases DIR");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
