/*
 * debugger.c: one rank waits for a debugger (make debug, docs/grader.md).
 *
 * With --debug-rank R, world rank R stops before its first case (outside
 * case mode: at the end of start-up), prints its PID and the gdb command that
 * attaches to it, and sleeps until xt_debug_wait is cleared: by the debugger
 * (set var xt_debug_wait = 0) or by SIGUSR1 (no debugger at hand). This is
 * the classic MPI "wait for attach" idiom: a rank started by mpirun cannot
 * be started under gdb, but it can wait for one. The other ranks go on and
 * wait for it in MPI, as for any slow rank; the grader turns the watchdog
 * off for such a run. --debug-break FN adds a breakpoint on FN to the
 * command printed.
 */
#define _GNU_SOURCE
#include "xt_internal.h"

#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

/* Cleared from outside: by gdb, or by the SIGUSR1 handler. */
volatile sig_atomic_t xt_debug_wait;

static void on_usr1(int sig)
{
    (void)sig;
    xt_debug_wait = 0;
}

void xti_debug_wait(void)
{
    if (xt_arg_int("debug-rank", -1) != xti.rank)
        return;
#ifdef PR_SET_PTRACER
    /* Yama's ptrace_scope 1 (Ubuntu's default) lets a debugger attach only to its own
     * children; this lets a gdb started by the same user attach. */
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
#endif
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &old);

    char host[256] = "";
    gethostname(host, sizeof host - 1);
    const char *fn = xt_arg_str("debug-break", NULL);
    char brk[300] = "";
    if (fn && *fn)
        snprintf(brk, sizeof brk, " -ex 'break %s'", fn);
    long pid = (long)getpid();
    xt_debug_wait = 1;
    /* libxt's own channel: never counted as what the student's code printed. */
    xti_diag("[xt] rank %d (PID %ld on %s) waits for a debugger. In another terminal:\n"
             "[xt]   gdb -p %ld -ex 'set var xt_debug_wait = 0'%s -ex continue\n"
             "[xt] (or kill -USR1 %ld: it goes on without one)\n",
             xti.rank, pid, host, pid, brk, pid);
    while (xt_debug_wait) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    sigaction(SIGUSR1, &old, NULL);
    xti_diag("[xt] rank %d goes on\n", xti.rank);
}
