/*
 * crash.c: a rank that dies says how, before mpirun's own message: a fatal
 * signal (with the MPI call it happened in, and the call stack), an MPI
 * error in the program's call (libxt's error handler on MPI_COMM_WORLD and
 * MPI_COMM_SELF), or exit() before MPI_Finalize. Each becomes a CRASH line
 * on stderr and in the status file. Built with AddressSanitizer, its report
 * (the bad access, where it happened, where the memory came from) goes to the
 * status file as well, for the grader to quote; ASan then ends the rank.
 */
#define _GNU_SOURCE
#include "xt_internal.h"

#include <execinfo.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef XT_ASAN
#include <sanitizer/asan_interface.h>
#endif

/* A fatal MPI error in an exercise: name the call, then end the run. */
static void on_mpi_error(MPI_Comm *comm, int *code, ...)
{
    (void)comm;
    char err[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    PMPI_Error_string(*code, err, &len);
    char where[512];
    int in_mpi = 0;
    xti_describe_call(where, sizeof where, xti_now(), 0, &in_mpi);
    char msg[1024];
    snprintf(msg, sizeof msg, "MPI error in %s: %s", where, err);
    xti_diag("[xt] rank %d CRASH %s\n", xti.rank, msg);
    xti_status_line("CRASH", msg);
    xti_abort(XT_EXIT_ERROR);
}

void xti_crash_catch_mpi_errors(void)
{
    /* An exercise's MPI error names its call and ends the run (default: fatal, anonymous). */
    MPI_Errhandler eh;
    PMPI_Comm_create_errhandler(on_mpi_error, &eh);
    PMPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    PMPI_Comm_set_errhandler(MPI_COMM_SELF, eh);
    PMPI_Errhandler_free(&eh);
}

static const char *signal_name(int sig)
{
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV (segmentation fault: a bad pointer or an index out of bounds)";
    case SIGBUS:
        return "SIGBUS (bus error: a misaligned or unmapped address)";
    case SIGFPE:
        return "SIGFPE (arithmetic error: integer division by zero?)";
    case SIGILL:
        return "SIGILL (illegal instruction)";
    case SIGABRT:
        return "SIGABRT (abort: a failed assert() or a heap corruption caught by free)";
    default:
        return "a fatal signal";
    }
}

static size_t (*explain_fault)(const void *addr, char *out, size_t cap);

void xt_crash_explain_faults(size_t (*fn)(const void *addr, char *out, size_t cap))
{
    explain_fault = fn;
}

/* Signal-safe: no stdio, no malloc. */
static void on_fatal_signal(int sig, siginfo_t *info, void *context)
{
    (void)context;
    if (atomic_load(&xti.aborting)) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    char msg[512];
    size_t p = 0;
    p = xti_put_str(msg, p, sizeof msg, "signal ");
    p = xti_put_int(msg, p, sizeof msg, sig);
    p = xti_put_str(msg, p, sizeof msg, " ");
    p = xti_put_str(msg, p, sizeof msg, signal_name(sig));
    const char *call = xti_current_call_name();
    if (*call) {
        p = xti_put_str(msg, p, sizeof msg, " inside ");
        p = xti_put_str(msg, p, sizeof msg, call);
    }
    if (explain_fault && info && (sig == SIGSEGV || sig == SIGBUS) && p + 3 < sizeof msg) {
        size_t n = explain_fault(info->si_addr, msg + p + 2, sizeof msg - p - 2);
        if (n > 0) {
            msg[p] = ':';
            msg[p + 1] = ' ';
            p += 2 + n;
        }
    }
    msg[p] = 0;
    xti_status_line("CRASH", msg);
    char line[600];
    size_t q = 0;
    q = xti_put_str(line, q, sizeof line, "[xt] rank ");
    q = xti_put_int(line, q, sizeof line, xti.rank);
    q = xti_put_str(line, q, sizeof line, " CRASH ");
    q = xti_put_str(line, q, sizeof line, msg);
    q = xti_put_str(line, q, sizeof line, "\n");
    xti_write_all(xti.diag_fd, line, q);
    /* The call stack, innermost first, for the grader to show the exercise's frames. */
    void *frames[32];
    int n = backtrace(frames, 32);
    if (xti.status_fd >= 0) {
        xti_write_all(xti.status_fd, "BACKTRACE\n", 10);
        backtrace_symbols_fd(frames, n, xti.status_fd);
        xti_write_all(xti.status_fd, "END\n", 4);
    }
    backtrace_symbols_fd(frames, n, xti.diag_fd);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* exit() from inside an exercise ends its rank without a word: say so. */
static void on_exit_call(void)
{
    if (!xti.mpi_ready || atomic_load(&xti.aborting))
        return;
    int phase = atomic_load(&xti.phase);
    if (phase != XTI_PHASE_USER && phase != XTI_PHASE_SETUP)
        return;
    const char *msg = "the program called exit() before MPI_Finalize";
    xti_diag("[xt] rank %d CRASH %s\n", xti.rank, msg);
    xti_status_line("CRASH", msg);
}

void xti_crash_catch_signals(void)
{
    atexit(on_exit_call);
    /* Load libgcc's unwinder now: backtrace() must not call malloc in a handler. */
    void *warm[2];
    backtrace(warm, 2);
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

#ifdef XT_ASAN
static int (*describe_block)(const void *addr, char *out, size_t cap);

/*
 * ASan's report, as it printed it: a CRASH line ("AddressSanitizer: heap-buffer-overflow, a
 * WRITE of size 4", with the xt_alloc block it hit where there is one), then the report
 * between ASAN and END lines. ASan exits next (ASAN_OPTIONS abort_on_error=0, the grader's
 * setting), so no SIGABRT reports it a second time.
 */
static void on_asan_report(const char *report)
{
    const char *what = __asan_get_report_description();
    char bug[96] = "";
    if (what && *what) {
        snprintf(bug, sizeof bug, "%s", what);
    } else {
        /* Not an access (a double free, a bad free): the report's first line names it. */
        const char *p = strstr(report, "AddressSanitizer: ");
        if (p) {
            p += strlen("AddressSanitizer: ");
            size_t n = strcspn(p, "\n");
            const char *on = strstr(p, " on ");
            if (on && (size_t)(on - p) < n)
                n = (size_t)(on - p);
            snprintf(bug, sizeof bug, "%.*s", (int)n, p);
        }
    }
    /* In an xt_alloc block's zones or freed data (poisoned by mem.c), the block says more than
     * ASan's "use-after-poison". */
    char block[512] = "";
    void *addr = __asan_get_report_address();
    if (addr && describe_block && !describe_block(addr, block, sizeof block))
        block[0] = 0;
    char access[64] = "";
    size_t size = __asan_get_report_access_size();
    if (what && *what && size)
        snprintf(access, sizeof access, "a %s of size %zu",
                 __asan_get_report_access_type() ? "WRITE" : "READ", size);
    char msg[1024];
    if (*block)
        snprintf(msg, sizeof msg, "AddressSanitizer: %s %s", *access ? access : "an access", block);
    else if (*access)
        snprintf(msg, sizeof msg, "AddressSanitizer: %s, %s", bug, access);
    else
        snprintf(msg, sizeof msg, "AddressSanitizer: %s", *bug ? bug : "a bad access");
    xti_status_line("CRASH", msg);
    char line[1100];
    int len = snprintf(line, sizeof line, "[xt] rank %d CRASH %s\n", xti.rank, msg);
    if (len > 0)
        xti_write_all(xti.diag_fd, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
    if (xti.status_fd >= 0) {
        xti_write_all(xti.status_fd, "ASAN\n", 5);
        /* Up to ASan's map of shadow bytes, which only ASan's authors read. */
        const char *shadow = strstr(report, "Shadow bytes around");
        size_t keep = shadow ? (size_t)(shadow - report) : strlen(report);
        xti_write_all(xti.status_fd, report, keep);
        if (keep && report[keep - 1] != '\n')
            xti_write_all(xti.status_fd, "\n", 1);
        xti_write_all(xti.status_fd, "END\n", 4);
    }
}
#endif

void xti_crash_catch_asan(int (*describe)(const void *addr, char *out, size_t cap))
{
#ifdef XT_ASAN
    describe_block = describe;
    __asan_set_error_report_callback(on_asan_report);
#else
    (void)describe;
#endif
}
