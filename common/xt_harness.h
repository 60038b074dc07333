/*
 * xt_harness.h: the part of libxt that runs programs rather than being called
 * by them: start-up and shutdown, the MPI counters, strict send, the
 * watchdog, trace control, case mode's runner, .npy files and the name
 * tables. The case runner (xt_main), the benchmark drivers
 * (grader/lectures/<lecture>/bench.c) and libxt's own tests include it; an
 * exercise includes only xt.h (and xt_nn.h), which declare none of this.
 */
#ifndef XT_HARNESS_H
#define XT_HARNESS_H

#include "xt.h"
#include "xt_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ start-up */

/*
 * What xt_main does around the exercise: MPI_Init with libxt's error
 * handler, options, the status file, the PMPI layer, tracing and the
 * watchdog; xt_finalize writes the counters and the trace, then MPI_Finalize.
 */
void xt_init(int *argc, char ***argv);
void xt_finalize(void);
/* The main of a resident program (resident.c): the exercises its --resident LIST names,
 * each as its own program's launch would run them, in one launch. */
int xt_resident_main(int argc, char **argv);
int xt_rank(void);       /* rank in MPI_COMM_WORLD */
int xt_size(void);       /* size of MPI_COMM_WORLD */
int xt_local_rank(void); /* rank among the processes on this node */

/* --name given (with or without a value). */
int xt_arg_flag(const char *name);

/*
 * For benchmarks: fixed glibc thresholds keep buffers of up to 32 MiB in the
 * heap, as in a trainer that has run for a while, instead of a fresh mmap
 * and its page faults each time a step allocates one, depending on what ran
 * before; and xt_free frees at once, without the poison and quarantine that
 * catch reads after free (the red zones are still checked).
 */
void xt_steady_allocator(void);

/*
 * For benchmarks: sorts n round times ascending, in place (t[0] the best,
 * t[n-1] the worst), and returns their median (0 when n is 0).
 */
double xt_sort_median(double *t, int n);

/*
 * Collective over comm: how many ranks hold, in the `bytes` bytes at buf,
 * something other than rank 0's, bit for bit (the same answer on every
 * rank). Data-parallel replicas must all answer 0.
 */
int xt_ranks_differing(MPI_Comm comm, const void *buf, size_t bytes);

/* -------------------------------------------------------------------- errors */

void xt_mpi_check_at(int rc, const char *call, const char *file, int line);
/* Dies naming the call when an MPI call libxt makes itself fails. */
#define XT_MPI_CHECK(call) xt_mpi_check_at((call), #call, __FILE__, __LINE__)

/* -------------------------------------------------------------------- memory */

const char *xt_mem_kind_name(xt_mem_kind kind); /* "params", "grads", ... */
size_t xt_mem_current(xt_mem_kind kind);        /* bytes in use on this rank */

/* ---------------------------------------------------------- dtypes and .npy */

size_t xt_dtype_size(xt_dtype dt);
const char *xt_dtype_name(xt_dtype dt);                  /* NumPy's name: "float32", "int64", ... */
int xt_dtype_from_name(const char *name, xt_dtype *out); /* 0 when no dtype has that name */
int xt_dtype_from_mpi(MPI_Datatype mt, xt_dtype *out);   /* 0 when mt has no xt_dtype */

/*
 * Reads a little-endian, C-order .npy (version 1 to 3). 0 on success, else -1
 * and `err`. In case mode the grader's case files are refused: a program
 * reads its own inputs through xt_case_input, never another rank's by path.
 */
int xt_npy_try_read(const char *path, xt_array *out, char *err, size_t errcap);
void xt_npy_read(const char *path, xt_array *out); /* dies on error */
void xt_npy_write(const char *path, const void *data, xt_dtype dt, int ndim, const long *shape);
void xt_array_free(xt_array *a);

/* ------------------------------------------------------ MPI instrumentation */

/*
 * Every MPI call the program makes goes through libxt's PMPI layer. Per MPI
 * function it counts calls, messages and bytes: a send of `count` elements of
 * type dt is count * MPI_Type_size(dt) bytes sent and one message; a receive
 * counts what actually arrived. Collectives count this rank's send and
 * receive buffers. libxt's own communication is not counted.
 */
typedef struct {
    long calls;
    long msgs_sent;
    long msgs_recv;
    long bytes_sent;
    long bytes_recv;
} xt_mpi_stats;

/* Counters of one function ("MPI_Send"), or of all when fn is NULL. */
xt_mpi_stats xt_mpi_stats_get(const char *fn);
void xt_mpi_stats_reset(void);
/* Writes the per-function table (the format the grader reads; docs/grader.md). */
void xt_mpi_stats_write(const char *path);

/* Strict send: MPI_Send and MPI_Isend behave as MPI_Ssend and MPI_Issend. */
void xt_strict_send(int on);
int xt_strict_send_enabled(void);

/* ------------------------------------------------------------------- tracing */

int xt_trace_enabled(void); /* XT_TRACE=1 or --trace: xt_finalize writes the timeline */

/* -------------------------------------------------------------------- watchdog */

/*
 * Past `seconds` after arming, every rank prints the MPI call it is blocked in
 * (function, peer, tag, bytes, time blocked) and the run ends. Case mode arms
 * it for each case; a demo is armed for --watchdog seconds (default 60).
 * 0 disarms.
 */
void xt_watchdog_arm(double seconds);
/*
 * More for a hang report: fn writes what else the rank is waiting on (device work
 * still queued, say) into out, returning its length (0: nothing). Called from the
 * watchdog's thread; fn must not block.
 */
void xt_watchdog_describe_with(size_t (*fn)(char *out, size_t cap));

/*
 * More for a crash report: on SIGSEGV or SIGBUS, fn explains the faulting address
 * (a device block the host may not touch, say), returning its length (0: nothing to
 * say). Called inside the signal handler: no locks, no allocation, no stdio.
 */
void xt_crash_explain_faults(size_t (*fn)(const void *addr, char *out, size_t cap));

/* ------------------------------------------------------------ lecture kits */

/*
 * What a lecture's kit (grader/lectures/<lecture>/kit/, linked only into that
 * lecture's programs) uses to show its grader what happened. A kit declares
 * each kind of event it logs once, with a line describing its fields (the
 * case record prints it as a comment above the first such line), then logs
 * events: xt_event("S", "%c %d", op, mb) appends "S F 3" to the case record
 * (docs/grader.md) and to a demo's XT_STAGE_LOG file. A kind is 1 to 3
 * capital letters, none of the record's own (T C E N M W SD END); the
 * lecture's grader package parses its kinds (records.event_kind).
 */
void xt_event_kind(const char *kind, const char *describe);
void xt_event(const char *kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
double xt_case_clock(void);  /* seconds since the case (or the demo) began */
int xt_case_running(void);   /* 1 while a graded case runs (a demo's printing stays quiet) */
long xt_events_logged(void); /* E lines (messages) of the case so far, dropped ones included */
void xt_on_case_begin(void (*hook)(void)); /* hook runs as each case begins (once per hook) */
/* The receives started and not yet complete (MPI_PROC_NULL's aside), and their bytes. */
int xt_receives_pending(long *bytes);
/* The same, and the nonblocking collectives started and not complete, with the bytes they
 * counted at their start. */
int xt_exchanges_pending(long *bytes);
/* Names comm as a group of the kit's making (a process mesh's "dp", "pp", "tp", "mesh"), so
 * that the record says which group a message went on; NULL forgets comm (before freeing it). */
void xt_comm_name_group(MPI_Comm comm, const char *name);
/* What a case record logs a message on comm as: "case", "world", "self", "other" or, for a
 * named group, "other@<name>". */
const char *xt_comm_logged_as(MPI_Comm comm);

/* ------------------------------------------------------------------- case mode */

int xt_case_mode(void); /* started with --cases DIR */
/* Runs every case of DIR/cases.txt on its group of ranks (docs/grader.md). */
void xt_run_cases(void (*run_case)(xt_case *c));
const char *xt_case_fn(const xt_case *c); /* the function under test */
int xt_case_has(const xt_case *c, const char *key);

/* ------------------------------------------------------------- name tables */

const char *xt_act_name(xt_act act);    /* "relu", "gelu" */
const char *xt_loss_name(xt_loss loss); /* "mse", "ce" */
int xt_act_from_name(const char *name, xt_act *out);
int xt_loss_from_name(const char *name, xt_loss *out);

/* ------------------------------------------------------------------------ CUDA */

#if defined(XT_CUDA) || defined(__CUDACC__) || defined(XT_CUDA_EMU)
int xt_cuda_device_count(void);
/* Whether this MPI reads and writes device memory itself (MPIX_Query_cuda_support). */
int xt_cuda_aware_mpi(void);
#endif

#ifdef __cplusplus
}
#endif
#endif /* XT_HARNESS_H */
