/*
 * xt_internal.h: state shared between libxt's own files. Not for exercises:
 * the grader rejects a program whose exercise file refers to an xti_ symbol.
 */
#ifndef XT_INTERNAL_H
#define XT_INTERNAL_H

#include "xt.h"

#include <stdatomic.h>
#include <stdio.h>

/* Exit codes a rank leaves with when libxt ends the run itself. */
enum {
    XT_EXIT_ERROR = 3,     /* xt_die, an MPI error, a bad file */
    XT_EXIT_TODO = 42,     /* XT_TODO reached */
    XT_EXIT_DEADLOCK = 43, /* the watchdog fired */
};

/* What a rank is doing, for the watchdog's report. */
enum {
    XTI_PHASE_SETUP,  /* before the first case, or outside case mode */
    XTI_PHASE_USER,   /* inside the function under test */
    XTI_PHASE_DONE,   /* returned from it, waiting for the other ranks */
    XTI_PHASE_IDLE,   /* not part of the running case */
    XTI_PHASE_FINISH, /* after the last case */
};

/* Kinds of MPI function, as the grader's rules name them. */
enum {
    XTI_CAT_P2P,   /* sends, receives, probes, completion */
    XTI_CAT_COLL,  /* library collectives, blocking or not */
    XTI_CAT_COMM,  /* communicator and topology construction (collective too) */
    XTI_CAT_RMA,   /* one-sided communication */
    XTI_CAT_LOCAL, /* MPI_Reduce_local */
    XTI_CAT_OTHER, /* MPI_Abort */
};

typedef struct {
    int rank, size, local_rank;
    int argc;
    char **argv;
    int mpi_ready;
    const char *out_dir;  /* where files go: --cases or --out; NULL: nowhere */
    int status_fd;        /* per-rank fault file in out_dir, -1 if none */
    _Atomic int phase;    /* XTI_PHASE_* */
    _Atomic int aborting; /* set once this rank is ending the run */
    int case_index;       /* -1 outside a case */
    int case_group;       /* which copy of the case (sub-communicator) */
    int case_rank;        /* rank inside the case communicator */
    int case_np;
    MPI_Comm case_comm;    /* MPI_COMM_NULL outside a case */
    double watchdog_limit; /* seconds; 0: off */
} xti_globals;

extern xti_globals xti;

/* core.c */
double xti_now(void);        /* monotonic seconds */
double xti_now_coarse(void); /* the same clock, to the tick */
/* One element as xt_print_buffer_ordered prints it. */
void xti_format_value(char *out, size_t cap, const void *value, xt_dtype dt);
/* Writes one tab-separated line "KIND\tcase=..\tgroup=..\trank=..\tworld=..\tus=..\t<text>"
 * to the status file (if any); async-signal-safe. */
void xti_status_line(const char *kind, const char *text);
XT_NORETURN void xti_abort(int code);

/* pmpi.c */
void xti_pmpi_init(void);

/* watch.c: what the PMPI layer tells xt_watch about the watched buffer. */
void xti_watch_send(const void *buf, int count, MPI_Datatype dt, int peer);
void xti_watch_recv(const void *buf, int count, MPI_Datatype dt, int peer);
void xti_watch_fold(const void *buf, int count, MPI_Datatype dt);

/* trace.c: the XT_TRACE timeline. */
void xti_trace_init(void);
double xti_trace_clock(void); /* seconds since the run's origin; 0 when not tracing */
void xti_trace_mpi(const char *fn, double t0, int peer, long bytes);
void xti_trace_write(void);
void xti_case_stats_begin(void);
/* Writes stats, events and notes of the finished case, then clears them. */
void xti_case_stats_write(const char *path, double seconds);
void xti_mem_write(FILE *f); /* the M lines of a case record */
/* While on, xt_alloc counts nothing: the harness's own buffers (a demo's twin model). */
void xti_mem_pause(int on);
void xti_note(const char *kind, const char *fmt, ...) XT_PRINTF(2, 3);
/* Reports requests the case started and never completed, as RULE notes. */
void xti_check_pending_requests(void);
/* One line describing this rank's current MPI call; with_time adds "for N s". */
void xti_describe_call(char *out, size_t cap, double now, int with_time, int *in_mpi);
/* Name of the MPI call in progress or "" (for crash reports; signal-safe). */
const char *xti_current_call_name(void);

/* watchdog.c */
void xti_watchdog_start(void);
void xti_watchdog_stop(void);

/* cases.c */
void xti_cases_dir(const char *dir);
const char *xti_cases_path(void); /* NULL outside case mode */

/* npy.c: xt_npy_try_read without the case-mode guard, for the harness. */
int xti_npy_read(const char *path, xt_array *out, char *err, size_t errcap);

#endif
