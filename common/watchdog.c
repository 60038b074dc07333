/*
 * watchdog.c: names a deadlock instead of hanging.
 *
 * A thread per rank sleeps in short steps. Case mode arms it at the start of
 * every case, right after a barrier, so all ranks' deadlines fall within
 * moments of each other. When the deadline passes, each rank reports what it
 * is doing (blocked in which MPI call, with peer, tag and bytes; computing;
 * waiting for the others; idle), waits a moment so the others report too,
 * and leaves with XT_EXIT_DEADLOCK, which makes mpirun end the whole run.
 *
 *   r0 MPI_Send(to 1, tag 0, 64 B) for 10.0 s      <- every rank waits for
 *   r1 MPI_Send(to 2, tag 0, 64 B) for 10.0 s         its right neighbour
 *   r2 MPI_Send(to 0, tag 0, 64 B) for 10.0 s         to receive: a cycle
 *
 * The thread never calls MPI: it reads the call state call.c keeps.
 */
#define _GNU_SOURCE
#include "xt_internal.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static pthread_t thread;
static int running;
static atomic_int stop;
static _Atomic double deadline; /* 0: disarmed */
static _Atomic double armed_for;

static size_t (*describe_more)(char *out, size_t cap);

void xt_watchdog_describe_with(size_t (*fn)(char *out, size_t cap))
{
    describe_more = fn;
}

void xt_watchdog_arm(double seconds)
{
    atomic_store(&armed_for, seconds);
    atomic_store(&deadline, seconds > 0 ? xti_now() + seconds : 0.0);
}

static void report_and_exit(void)
{
    double now = xti_now();
    char what[1024], text[1200];
    int in_mpi = 0;
    const char *state;
    switch (atomic_load(&xti.phase)) {
    case XTI_PHASE_DONE:
        state = "done";
        snprintf(what, sizeof what, "returned from the function; waiting for the other ranks");
        break;
    case XTI_PHASE_IDLE:
        state = "idle";
        snprintf(what, sizeof what, "not part of this case");
        break;
    case XTI_PHASE_FINISH:
        state = "done";
        snprintf(what, sizeof what, "finished; waiting for the other ranks to finish");
        break;
    default:
        xti_describe_call(what, sizeof what, now, 1, &in_mpi);
        state = in_mpi ? "mpi" : "compute";
        break;
    }
    size_t len = strlen(what);
    if (describe_more && len + 3 < sizeof what) {
        size_t n = describe_more(what + len + 2, sizeof what - len - 2);
        if (n > 0) {
            what[len] = ';';
            what[len + 1] = ' ';
        }
    }
    snprintf(text, sizeof text, "%s: %s", state, what);
    /* What the rank sent and received in the case, and the receives it still waits on:
     * the grader pairs them across ranks (a message sent and never received). */
    static char ledger[3000];
    size_t n = xti_ledger_describe(ledger, sizeof ledger);
    xti_receives_waiting(ledger, n, sizeof ledger);
    xti_status_line("LEDGER", ledger);
    xti_status_line("HANG", text);
    if (xti.case_index >= 0)
        xti_diag("[xt] watchdog: case %d still running after %.1f s; world rank %d: %s\n",
                 xti.case_index, atomic_load(&armed_for), xti.rank, what);
    else
        xti_diag("[xt] watchdog: still running after %.1f s; rank %d: %s\n",
                 atomic_load(&armed_for), xti.rank, what);
    /* Give the other ranks time to report before mpirun tears the run down. */
    struct timespec grace = {1, 0};
    nanosleep(&grace, NULL);
    atomic_store(&xti.aborting, 1);
    _exit(XT_EXIT_DEADLOCK);
}

static void *watch(void *arg)
{
    (void)arg;
    const struct timespec step = {0, 20 * 1000 * 1000};
    while (!atomic_load(&stop)) {
        nanosleep(&step, NULL);
        double d = atomic_load(&deadline);
        if (d > 0 && xti_now() >= d)
            report_and_exit();
    }
    return NULL;
}

void xti_watchdog_start(void)
{
    if (pthread_create(&thread, NULL, watch, NULL) != 0)
        xt_die("cannot start the watchdog thread");
    running = 1;
}

void xti_watchdog_stop(void)
{
    if (!running)
        return;
    atomic_store(&stop, 1);
    pthread_join(thread, NULL);
    running = 0;
}
