/*
 * xt_internal.h: what libxt's own files share. Not for exercises: the
 * grader rejects a program whose exercise file refers to an xti_ symbol.
 *
 * libxt is built in layers with no circle: a file calls only files of
 * earlier layers, never one of its own layer or a later one (checked by
 * grader/libxt_layers.py on the objects' symbols). The order, as that
 * script reads it:
 */
/* LAYERS (each file uses only files above it):
 *   0 core_state.c core_clock.c dtype.c
 *   1 core_err.c mpi_names.c
 *   2 core_opts.c print.c npy.c notes.c counters.c call.c
 *   3 mem.c trace.c watch.c requests.c crash.c debugger.c work.c
 *   4 pmpi.c record.c nn.c watchdog.c
 *   5 case.c transformer.c
 *   6 case_run.c train.c
 *   7 init.c
 *   8 resident.c
 *   9 cuda.cu
 */
/*
 * In words: the base (0-2: state, clock, dtypes, errors, options) with
 * printing and files (print.c, npy.c); then the instrumentation (2-4: the
 * MPI function table, counters, the call in progress, notes, requests,
 * memory, trace, the buffer watch, the watchdog, crash reports, the wait
 * for a debugger, the rows multiplied through watched weights (work.c), the PMPI
 * wrappers, the case record with the events a lecture's kit logs) and the
 * numeric layer (nn.c); then the case protocol (5-6: one case, the case
 * runner, the training harness) beside the transformer pieces; then
 * init/main (7), and the resident launch of many exercises (8); the CUDA
 * helpers sit above every C file. Code that only one lecture's programs
 * share is not here: it is that lecture's kit (grader/lectures/<lecture>/kit/),
 * which uses libxt through xt_harness.h and logs through xt_event.
 * Where a lower layer needs something a higher one knows, the higher one
 * installs a hook at start-up (npy.c's guard, installed by case.c).
 *
 * Below, every internal function under the file that defines it.
 */
#ifndef XT_INTERNAL_H
#define XT_INTERNAL_H

#include "xt_harness.h"

#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>

/* XT_ASAN: built with AddressSanitizer (make SAN=1); gcc and clang say so differently. */
#if defined(__SANITIZE_ADDRESS__)
#define XT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define XT_ASAN 1
#endif
#endif

/* Bytes a program must not touch (guard zones, freed blocks), told to AddressSanitizer so
 * that it stops at the access; nothing without it. XTI_NO_ASAN: a function that reads
 * them on purpose (libxt's own checks). */
#ifdef XT_ASAN
#include <sanitizer/asan_interface.h>
#define XTI_POISON(p, n)   ASAN_POISON_MEMORY_REGION((p), (n))
#define XTI_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define XTI_NO_ASAN        __attribute__((no_sanitize_address))
#else
#define XTI_POISON(p, n)   ((void)(p), (void)(n))
#define XTI_UNPOISON(p, n) ((void)(p), (void)(n))
#define XTI_NO_ASAN
#endif

/* Exit codes a rank leaves with when libxt ends the run itself. */
enum {
    XT_EXIT_ERROR = 3,     /* xt_die, an MPI error, a bad file */
    XT_EXIT_TODO = 42,     /* XT_TODO reached */
    XT_EXIT_DEADLOCK = 43, /* the watchdog fired */
};

/* How a case of a resident launch ended early on this rank (the value of its jump to
 * xti.case_exit): refused (an xt_die from the file its line names), or at an XT_TODO. */
enum {
    XTI_CASE_REFUSED = 1,
    XTI_CASE_TODO = 2,
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

/* ----------------------------------------------------------------- layer 0 */

/* core_state.c */
typedef struct {
    int rank, size, local_rank;
    int argc;
    char **argv;
    int mpi_ready;
    const char *out_dir;  /* where files go: --cases or --out; NULL: nowhere */
    int status_fd;        /* per-rank fault file in out_dir, -1 if none */
    int diag_fd;          /* libxt's own messages: stderr, kept apart from a case's output */
    _Atomic int phase;    /* XTI_PHASE_* */
    _Atomic int aborting; /* set once this rank is ending the run */
    int case_index;       /* -1 outside a case */
    int case_group;       /* which copy of the case (sub-communicator) */
    int case_rank;        /* rank inside the case communicator */
    int case_np;
    MPI_Comm case_comm;    /* MPI_COMM_NULL outside a case */
    double watchdog_limit; /* seconds; 0: off */
    /* A resident launch (resident.c): many exercises' cases, one after another. Its
     * world is the largest any of them needs; case_world is the world of the exercise
     * running now, as its own launch would have it (the ranks above it idle). */
    int resident;
    int case_world;
    /* In a resident launch, what ends only the case running now on this rank (a jump to
     * case_exit) instead of the run, so that the launch goes on to the next case: an
     * xt_die from refusal_file, in a case the exercise must refuse (its line's
     * refuse=<file>; NULL otherwise), and an XT_TODO while todo_ends_case is set, in a case
     * of an exercise not yet written (its line's todo=<its test>). */
    const char *refusal_file;
    int todo_ends_case;
    jmp_buf case_exit;
    /* The libxt computation running now ("backward": inside xt_mlp_backward, its hooks
     * included), or NULL, and where in it (the layer whose hook is running), or -1: each
     * MPI event is tagged with both, so that the grader can tell communication overlapped
     * with a computation from communication after it. */
    const char *compute;
    int compute_at;
} xti_globals;
extern xti_globals xti;

/* core_clock.c */
double xti_now(void);        /* monotonic seconds */
double xti_now_coarse(void); /* the same clock, to the tick */

/* dtype.c */
const char *xti_dtype_descr(xt_dtype dt);                   /* the .npy descr: "<f4", ... */
int xti_dtype_from_descr(const char *descr, xt_dtype *out); /* 0 when no dtype has it */

/* ----------------------------------------------------------------- layer 1 */

/* core_err.c */
/* Signal-safe text: append s (or v in decimal) at buf[pos], never past cap - 1. */
size_t xti_put_str(char *buf, size_t pos, size_t cap, const char *s);
size_t xti_put_int(char *buf, size_t pos, size_t cap, long v);
void xti_write_all(int fd, const char *s, size_t n);
/* Writes one tab-separated line "KIND\tcase=..\tgroup=..\trank=..\tworld=..\tus=..\t<text>"
 * to the status file (if any); async-signal-safe. */
void xti_status_line(const char *kind, const char *text);
/* One of libxt's own messages, "[xt] ...", to xti.diag_fd (not async-signal-safe). */
void xti_diag(const char *fmt, ...) XT_PRINTF(1, 2);
XT_NORETURN void xti_abort(int code);

/* mpi_names.c */
/*
 * The MPI functions the PMPI layer wraps, each with its kind: one list, from
 * which mpi_names.c makes the tables and pmpi.c the wrappers' indexes.
 */
#define XTI_FUNCTIONS(X)                                                                           \
    X(MPI_Send, P2P)                                                                               \
    X(MPI_Bsend, P2P)                                                                              \
    X(MPI_Ssend, P2P)                                                                              \
    X(MPI_Rsend, P2P)                                                                              \
    X(MPI_Isend, P2P)                                                                              \
    X(MPI_Ibsend, P2P)                                                                             \
    X(MPI_Issend, P2P)                                                                             \
    X(MPI_Irsend, P2P)                                                                             \
    X(MPI_Recv, P2P)                                                                               \
    X(MPI_Irecv, P2P)                                                                              \
    X(MPI_Sendrecv, P2P)                                                                           \
    X(MPI_Sendrecv_replace, P2P)                                                                   \
    X(MPI_Probe, P2P)                                                                              \
    X(MPI_Iprobe, P2P)                                                                             \
    X(MPI_Mprobe, P2P)                                                                             \
    X(MPI_Improbe, P2P)                                                                            \
    X(MPI_Mrecv, P2P)                                                                              \
    X(MPI_Imrecv, P2P)                                                                             \
    X(MPI_Send_init, P2P)                                                                          \
    X(MPI_Bsend_init, P2P)                                                                         \
    X(MPI_Ssend_init, P2P)                                                                         \
    X(MPI_Rsend_init, P2P)                                                                         \
    X(MPI_Recv_init, P2P)                                                                          \
    X(MPI_Start, P2P)                                                                              \
    X(MPI_Startall, P2P)                                                                           \
    X(MPI_Wait, P2P)                                                                               \
    X(MPI_Waitall, P2P)                                                                            \
    X(MPI_Waitany, P2P)                                                                            \
    X(MPI_Waitsome, P2P)                                                                           \
    X(MPI_Test, P2P)                                                                               \
    X(MPI_Testall, P2P)                                                                            \
    X(MPI_Testany, P2P)                                                                            \
    X(MPI_Testsome, P2P)                                                                           \
    X(MPI_Request_free, P2P)                                                                       \
    X(MPI_Cancel, P2P)                                                                             \
    X(MPI_Barrier, COLL)                                                                           \
    X(MPI_Ibarrier, COLL)                                                                          \
    X(MPI_Bcast, COLL)                                                                             \
    X(MPI_Ibcast, COLL)                                                                            \
    X(MPI_Gather, COLL)                                                                            \
    X(MPI_Igather, COLL)                                                                           \
    X(MPI_Gatherv, COLL)                                                                           \
    X(MPI_Igatherv, COLL)                                                                          \
    X(MPI_Scatter, COLL)                                                                           \
    X(MPI_Iscatter, COLL)                                                                          \
    X(MPI_Scatterv, COLL)                                                                          \
    X(MPI_Iscatterv, COLL)                                                                         \
    X(MPI_Allgather, COLL)                                                                         \
    X(MPI_Iallgather, COLL)                                                                        \
    X(MPI_Allgatherv, COLL)                                                                        \
    X(MPI_Iallgatherv, COLL)                                                                       \
    X(MPI_Alltoall, COLL)                                                                          \
    X(MPI_Ialltoall, COLL)                                                                         \
    X(MPI_Alltoallv, COLL)                                                                         \
    X(MPI_Ialltoallv, COLL)                                                                        \
    X(MPI_Alltoallw, COLL)                                                                         \
    X(MPI_Ialltoallw, COLL)                                                                        \
    X(MPI_Reduce, COLL)                                                                            \
    X(MPI_Ireduce, COLL)                                                                           \
    X(MPI_Allreduce, COLL)                                                                         \
    X(MPI_Iallreduce, COLL)                                                                        \
    X(MPI_Reduce_scatter, COLL)                                                                    \
    X(MPI_Ireduce_scatter, COLL)                                                                   \
    X(MPI_Reduce_scatter_block, COLL)                                                              \
    X(MPI_Ireduce_scatter_block, COLL)                                                             \
    X(MPI_Scan, COLL)                                                                              \
    X(MPI_Iscan, COLL)                                                                             \
    X(MPI_Exscan, COLL)                                                                            \
    X(MPI_Iexscan, COLL)                                                                           \
    X(MPI_Neighbor_allgather, COLL)                                                                \
    X(MPI_Ineighbor_allgather, COLL)                                                               \
    X(MPI_Neighbor_allgatherv, COLL)                                                               \
    X(MPI_Ineighbor_allgatherv, COLL)                                                              \
    X(MPI_Neighbor_alltoall, COLL)                                                                 \
    X(MPI_Ineighbor_alltoall, COLL)                                                                \
    X(MPI_Neighbor_alltoallv, COLL)                                                                \
    X(MPI_Ineighbor_alltoallv, COLL)                                                               \
    X(MPI_Neighbor_alltoallw, COLL)                                                                \
    X(MPI_Ineighbor_alltoallw, COLL)                                                               \
    X(MPI_Comm_split, COMM)                                                                        \
    X(MPI_Comm_split_type, COMM)                                                                   \
    X(MPI_Comm_dup, COMM)                                                                          \
    X(MPI_Comm_dup_with_info, COMM)                                                                \
    X(MPI_Comm_idup, COMM)                                                                         \
    X(MPI_Comm_create, COMM)                                                                       \
    X(MPI_Comm_create_group, COMM)                                                                 \
    X(MPI_Cart_create, COMM)                                                                       \
    X(MPI_Cart_sub, COMM)                                                                          \
    X(MPI_Graph_create, COMM)                                                                      \
    X(MPI_Dist_graph_create, COMM)                                                                 \
    X(MPI_Dist_graph_create_adjacent, COMM)                                                        \
    X(MPI_Intercomm_create, COMM)                                                                  \
    X(MPI_Intercomm_merge, COMM)                                                                   \
    X(MPI_Win_create, RMA)                                                                         \
    X(MPI_Win_allocate, RMA)                                                                       \
    X(MPI_Win_allocate_shared, RMA)                                                                \
    X(MPI_Win_create_dynamic, RMA)                                                                 \
    X(MPI_Put, RMA)                                                                                \
    X(MPI_Get, RMA)                                                                                \
    X(MPI_Accumulate, RMA)                                                                         \
    X(MPI_Get_accumulate, RMA)                                                                     \
    X(MPI_Fetch_and_op, RMA)                                                                       \
    X(MPI_Compare_and_swap, RMA)                                                                   \
    X(MPI_Rput, RMA)                                                                               \
    X(MPI_Rget, RMA)                                                                               \
    X(MPI_Raccumulate, RMA)                                                                        \
    X(MPI_Rget_accumulate, RMA)                                                                    \
    X(MPI_Reduce_local, LOCAL)                                                                     \
    X(MPI_Abort, OTHER)

enum {
#define X(name, cat) XTI_FN_##name,
    XTI_FUNCTIONS(X)
#undef X
        XTI_NFN
};
extern const char *const xti_fn_name[XTI_NFN]; /* "MPI_Send", ... */
extern const int xti_fn_cat[XTI_NFN];          /* XTI_CAT_* */
const char *xti_cat_name(int cat);             /* "p2p", "coll", ... */
/* 'c' the running case's communicator, 'w' world, 's' self, 1.. a group named by
 * xt_comm_name_group (xt_harness.h), 'o' any other. */
char xti_comm_kind(MPI_Comm comm);
/* "case", "world", "self", "other", or for a named group "other@<name>" ("other@pp"). */
const char *xti_comm_kind_name(char kind);
const char *xti_comm_group(char kind); /* "pp" for a named group's kind, else NULL */
/* rank of comm as a rank of MPI_COMM_WORLD; -1 for a rank outside comm (MPI_ANY_SOURCE,
 * MPI_PROC_NULL, one past its size), MPI_COMM_NULL or an intercommunicator. */
int xti_world_rank(MPI_Comm comm, int rank);

/* ----------------------------------------------------------------- layer 2 */

/* core_opts.c */
/* (nothing internal: xt_arg_*) */

/* print.c */
/* One element as xt_print_buffer_ordered prints it. */
void xti_format_value(char *out, size_t cap, const void *value, xt_dtype dt);

/* npy.c */
/* A guard returns nonzero (and fills err) to refuse reading `path`. */
typedef int (*xti_npy_guard_fn)(const char *path, char *err, size_t errcap);
void xti_npy_set_guard(xti_npy_guard_fn refuse); /* for xt_npy_try_read; NULL: none */
/* xt_npy_try_read without the guard, for libxt's own reads. */
int xti_npy_read(const char *path, xt_array *out, char *err, size_t errcap);
/* One .npy array from memory (what names it in errors): its header into *out, its data
 * copied too where keep; *used: the bytes it takes in buf. */
int xti_npy_parse(const unsigned char *buf, size_t len, const char *what, xt_array *out, int keep,
                  size_t *used, char *err, size_t errcap);
/* A .npy array onto an open stream; 0, or -1 when a write failed. */
int xti_npy_fwrite(FILE *f, const void *data, xt_dtype dt, int ndim, const long *shape);
/* A whole file into malloc'd memory. */
int xti_file_slurp(const char *path, unsigned char **data, size_t *len, char *err, size_t errcap);

/* notes.c */
void xti_note(const char *kind, const char *fmt, ...) XT_PRINTF(2, 3);
void xti_notes_clear(void);
void xti_notes_write(FILE *f); /* the N lines of a case record */

/* counters.c */
void xti_count_call(int fn);
void xti_count_sent(int fn, int peer, int tag, long bytes, MPI_Comm comm);
void xti_count_recv(int fn, const MPI_Status *st, MPI_Comm comm); /* what arrived */
void xti_count_coll(int fn, long sent, long recvd, char comm);
void xti_count_rma(int fn, int target, long bytes);
void xti_counters_write(FILE *f); /* the C, E and D lines of a case record */
long xti_events_logged(void);     /* E lines so far in this case, dropped ones included */
/* The case's point-to-point ledger, for a deadlock's report (watchdog.c, a LEDGER status
 * line): "S case 1 3 2 128 64;R case 0 3 1 64 64;..." (sent or received, on which kind of
 * communicator, the peer's world rank, the tag, messages, bytes, the last message's bytes),
 * "+" at the end where entries did not fit. Read from the watchdog's thread. */
size_t xti_ledger_describe(char *out, size_t cap);

/* call.c */
enum { XTI_MAX_SHOWN = 4 };
/* A request a wait is waiting for. */
typedef struct {
    short fn, dir;
    int peer, tag;
    long bytes;
} xti_pending;
void xti_call_begin(int fn, int peer, int tag, long bytes, MPI_Comm comm);
void xti_call_second_peer(int peer, int tag); /* the receive half of a send-receive */
void xti_call_pending(const xti_pending *shown, int n_shown, int n_more);
void xti_call_end(void);
/* One line describing this rank's current MPI call; with_time adds "for N s". */
void xti_describe_call(char *out, size_t cap, double now, int with_time, int *in_mpi);
/* Name of the MPI call in progress or "" (for crash reports; signal-safe). */
const char *xti_current_call_name(void);

/* ----------------------------------------------------------------- layer 3 */

/* mem.c */
void xti_mem_write(FILE *f); /* the M lines of a case record */
/* While on, xt_alloc counts nothing: the harness's own buffers (a demo's twin model). */
void xti_mem_pause(int on);
/* Checks every block's guard zones and every freed block's poison (a WRONG note in a case,
 * else the run ends), then hands the freed blocks back to malloc: at the end of each case,
 * and of the run. */
void xti_mem_check(void);
/* Blocks still live stay valid and checked but no longer count as in use, and the peaks
 * restart: a resident launch's next exercise starts from nothing, as its own launch would. */
void xti_mem_uncount_live(void);
/* Where addr lies in an xt_alloc block, live or freed and still held back ("past the end of the
 * 40-byte grads block allocated at F:L (byte 44)"), into out; 0 if in none. */
int xti_mem_describe(const void *addr, char *out, size_t cap);

/* trace.c */
/* The XT_TRACE timeline. */
void xti_trace_init(void);
double xti_trace_clock(void); /* seconds since the run's origin; 0 when not tracing */
void xti_trace_mpi(const char *fn, double t0, int peer, long bytes);
void xti_trace_write(void);

/* watch.c */
/* What the PMPI layer tells xt_watch about the watched buffer. */
void xti_watch_send(const void *buf, int count, MPI_Datatype dt, int peer);
void xti_watch_posted(const void *buf, int count, MPI_Datatype dt); /* a nonblocking receive */
void xti_watch_recv(const void *buf, int count, MPI_Datatype dt, int peer); /* completed */
void xti_watch_fold(const void *buf, int count, MPI_Datatype dt);

/* requests.c */
/* What fills a pending receive's buffer in strict mode, every 4 bytes: a quiet NaN as a
 * float, which arithmetic carries along; the grader names it (harness.RECV_POISON). */
#define XTI_RECV_POISON 0x7fdeadeeu
/* Strict mode's buffers in flight (xt_strict_send): a send buffer checked unchanged at
 * completion (INFLIGHT), a receive made into a shadow while the user's buffer holds the
 * poison, a request freed while active noted (FREED). */
void xti_requests_strict(int on);
/* Where MPI should receive (buf, count, dt): in strict mode a shadow of its bytes, *shadow,
 * for xti_request_add (started: the receive starts now, so the buffer is copied into the
 * shadow and poisoned; else a persistent receive's, done at each start); else buf itself,
 * *shadow NULL. xti_shadow_undo gives the buffer back when the call failed. */
void *xti_shadow_open(void *buf, int count, MPI_Datatype dt, int started, char **shadow);
void xti_shadow_undo(void *buf, int count, MPI_Datatype dt, int started, char *shadow);
/* A nonblocking collective's buffers in strict mode (requests.c): NULL when not strict, and
 * then every call below does nothing (start returns r). The send and receive blocks are
 * (count, dt) at disp extents from buf; start copies the send blocks and returns where MPI
 * should receive what belongs at r (a shadow, r's blocks poisoned); xti_request_coll hands it
 * to the request, whose completion checks the copy and fills r; xti_coll_end, where the call
 * failed, gives r back. */
typedef struct xti_coll_bufs xti_coll_bufs;
xti_coll_bufs *xti_coll_new(void);
void xti_coll_send(xti_coll_bufs *cb, const void *buf, MPI_Aint disp, int count, MPI_Datatype dt);
void xti_coll_recv(xti_coll_bufs *cb, const void *buf, MPI_Aint disp, int count, MPI_Datatype dt);
void *xti_coll_start(xti_coll_bufs *cb, void *r);
void xti_coll_end(xti_coll_bufs *cb);
void xti_request_coll(MPI_Request h, xti_coll_bufs *cb);
/* A code address as a backtrace names it, "module(symbol+0xoff)", for the grader to turn into
 * file:line; "" when unknown. */
void xti_site_format(const void *addr, char *out, size_t cap);
/* site: where the exercise started it (the MPI call's return address). */
void xti_request_add(MPI_Request h, int fn, char dir, int peer, int tag, long bytes, MPI_Comm comm,
                     int persistent, const void *buf, int count, MPI_Datatype dt, char *shadow,
                     const void *site);
/* A persistent request's start by fn at site: starting, before MPI_Start (a receive's shadow
 * made ready, a send's buffer copied), then started (counts a send), or start_failed. */
void xti_request_starting(MPI_Request h, int fn, const void *site);
void xti_request_started(MPI_Request h);
void xti_request_start_failed(MPI_Request h);
/* Counts a completed receive and returns its buffer (*bytes long); NULL for anything else.
 * fn at site completed it. */
const void *xti_request_complete(MPI_Request h, const MPI_Status *st, int *bytes, int fn,
                                 const void *site);
void xti_request_freed(MPI_Request h);
void xti_request_show(const MPI_Request *hs, int n); /* what a wait waits for, to call.c */
/* The receives started and not yet complete, for a deadlock's report: "W case 0 2 64
 * MPI_Irecv;..." (the communicator's kind, the peer's world rank or "any", the tag or
 * "any", bytes, the call), after out's first len bytes, each entry led by ';' where len > 0.
 * Read from the watchdog's thread while the program is stuck. Returns the new length. */
size_t xti_receives_waiting(char *out, size_t len, size_t cap);
/* Notes (RACE) a buffer that a pending request owns. */
void xti_check_buffer_free(int fn, char dir, const void *buf, int count, MPI_Datatype dt);
/* Reports requests the case started and never completed, as PENDING notes, and forgets them. */
void xti_check_pending_requests(void);

/* watchdog.c */
void xti_watchdog_start(void);
void xti_watchdog_stop(void);

/* crash.c */
void xti_crash_catch_mpi_errors(void); /* libxt's error handler on MPI_COMM_WORLD and SELF */
void xti_crash_catch_signals(void);    /* fatal signals, and exit() before MPI_Finalize */
/* Under XT_ASAN: AddressSanitizer's report goes to the status file too, the block it found
 * named by `describe` (case.c's xti_case_describe); otherwise nothing. */
void xti_crash_catch_asan(int (*describe)(const void *addr, char *out, size_t cap));

/* debugger.c */
/* With --debug-rank equal to this rank: print the PID and the gdb command, and sleep until
 * a debugger (or SIGUSR1) clears xt_debug_wait. Otherwise nothing. */
void xti_debug_wait(void);
extern volatile sig_atomic_t xt_debug_wait;

/* work.c */
void xti_work_begin(void); /* a case begins: the last case's watched weights dropped */
/* A GEMM C (m x n) = op(A) op(B): the rows it pushed through A or B, if either is watched. */
void xti_work_gemm(const float *a, const float *b, int m, int n);
void xti_work_write(FILE *f); /* the case record's W lines */

/* ----------------------------------------------------------------- layer 4 */

/* pmpi.c */
/* (nothing internal: the MPI_ wrappers, xt_strict_send) */

/* record.c */
void xti_record_begin(void); /* a case begins: counters, notes and memory peaks cleared */
/* Writes counters, events, notes, memory and the kit's events of the finished case. */
/* The case's record onto f, the rank's outputs file (path: its name, for errors). */
void xti_record_write(FILE *f, const char *path, double seconds);
/* At finalize: a demo's kit events, to XT_STAGE_LOG's directory if it is set. */
void xti_stage_log_write(void);

/* nn.c */
/* (nothing internal: xt_gemm, xt_gemm_ld and the layers) */

/* ----------------------------------------------------------------- layer 5 */

/* One case, as case_run.c sets it up and case.c serves it. */
enum { XTI_CASE_MAX_KEYS = 32 };
struct xt_case {
    int index, np, group, rank;
    MPI_Comm comm;
    int nkeys;
    char *keys[XTI_CASE_MAX_KEYS], *vals[XTI_CASE_MAX_KEYS];
    char *line;
    char dir[3072];
    char scratch[3200]; /* xt_case_scratch_dir's, once made */
    struct xti_guarded *bufs;
    int nbufs, capbufs;
    unsigned char *inputs; /* the group's inputs file, read at its first input */
    size_t inputs_bytes;
    int inputs_read;
    FILE *outputs; /* this rank's outputs file, open from its first output */
};

/* case.c */
void xti_cases_dir(const char *dir); /* case mode on; installs npy.c's guard */
const char *xti_cases_path(void);    /* NULL outside case mode */
const char *xti_case_param(const xt_case *c, const char *key); /* NULL if absent */
/* Notes overwritten guard bytes and modified const inputs, then frees the buffers. */
void xti_case_check_buffers(xt_case *c);
/* The rank's outputs file of the case, opened (created) at the first call; path: its name. */
FILE *xti_case_outputs(xt_case *c, char *path, size_t cap);
/* Frees the case's inputs and closes its outputs file. */
void xti_case_close(xt_case *c);
/* xti_mem_describe, and first the guard bytes of the running case's inputs and outputs
 * ("past the end of 'recv' (4 x float32): element [5] (byte 4 after the end)"). */
int xti_case_describe(const void *addr, char *out, size_t cap);

/* ----------------------------------------------------------------- layer 6 */

/* case_run.c */
/* (nothing internal: xt_run_cases) */

/* train.c */
/* (nothing internal) */

/* ----------------------------------------------------------------- layer 7 */

/* init.c */
/* Opens out_dir/status.r<rank>.txt as the rank's status file (nothing without out_dir). */
void xti_status_open(void);

/* ----------------------------------------------------------------- layer 8 */

/* resident.c */
/* (nothing internal: xt_resident_main) */

#endif
