/*
 * xt.h: libxt, the one helper layer every xtrain-c program links, as an
 * exercise sees it. This header declares what exercises call; what only the
 * case runner, benchmarks and libxt's tests call (start-up, counters, strict
 * send, the watchdog, trace control, .npy files) is in xt_harness.h.
 *
 * A program in this repository is a plain MPI program. libxt gives it:
 *   - its whole main (xt_main) and shared options;
 *   - printing in rank order, for demos that an instructor projects;
 *   - error checks that name file, line and rank, then abort cleanly;
 *   - XT_TODO, the loud stop that every unwritten exercise ends in;
 *   - memory accounting by kind (xt_alloc);
 *   - case mode, the protocol the grader drives programs with: a case's
 *     parameters, inputs and outputs;
 *   - named ranges on the timeline trace (XT_TRACE=1);
 *   - CUDA helpers (xt_cuda_*), compiled with `make CUDA=1`.
 * Behind its back, every MPI call is counted through the profiling interface
 * (PMPI), MPI_Send may be made synchronous (strict send mode), and a
 * watchdog names the MPI call each rank is blocked in when a run hangs.
 *
 * docs/grader.md describes case mode and the instrumentation files.
 */
#ifndef XT_H
#define XT_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

/* DEVICE=emu: a .cu file built as host C++ against libxt's emulated device (C++, so
 * before extern "C"). */
#ifdef XT_CUDA_EMU
#include "xt_cuda_emu.h"
#endif

#ifdef __cplusplus
extern "C" {
#define XT_NORETURN [[noreturn]]
#else
#define XT_NORETURN _Noreturn
#endif

#if defined(__GNUC__)
#define XT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define XT_PRINTF(f, a)
#endif

/* ------------------------------------------------------------------ start-up */

typedef struct xt_case xt_case;

/*
 * The whole main of an exercise: initialise, then either run the grader's
 * cases (with --cases DIR) or the demo on MPI_COMM_WORLD, then finalise.
 */
int xt_main(int argc, char **argv, void (*run_case)(xt_case *c), void (*demo)(MPI_Comm comm));

/* Seconds on the monotonic clock (one clock for every process of a machine). */
double xt_now(void);
/* Sleeps this long (cases that make ranks arrive at different times). */
void xt_sleep(double seconds);

/* Options after the program name: --name=value or --name value. */
long xt_arg_int(const char *name, long dflt);
double xt_arg_double(const char *name, double dflt);
const char *xt_arg_str(const char *name, const char *dflt);

/* ------------------------------------------------------------------ printing */

/*
 * Collective over comm: every rank formats a text, rank 0 prints them all in
 * rank order, each line prefixed by "[r<rank>] ". Safe to call with any text
 * length; a rank may pass an empty text.
 */
void xt_printf_ordered(MPI_Comm comm, const char *fmt, ...) XT_PRINTF(2, 3);

/* Not collective: rank 0 of comm prints (and flushes); every other rank prints nothing. */
void xt_printf_root(MPI_Comm comm, const char *fmt, ...) XT_PRINTF(2, 3);

/* Collective: prints "label: [v0 v1 ...]" for every rank, in rank order. */
void xt_print_buffer_ordered(MPI_Comm comm, const char *label, const void *buf, int count,
                             MPI_Datatype dt);
/* The same, collective over comm, but only `who` has a buffer to show (a root's result). */
void xt_print_buffer_at(MPI_Comm comm, int who, const char *label, const void *buf, int count,
                        MPI_Datatype dt);
/*
 * An all-reduce's demo: xt_demo_sum_fill gives rank r the values 10 r + i (i = 0..count-1),
 * whose sum over ranks a reader checks by eye; xt_demo_sum_holds (collective) prints on rank
 * 0 whether every rank now holds that sum, "every rank holds the sum of all ranks' buffers:
 * yes" (or NO), and returns 1 if so.
 */
void xt_demo_sum_fill(MPI_Comm comm, int *x, int count);
int xt_demo_sum_holds(MPI_Comm comm, const int *x, int count);
/*
 * How many times this rank has called the MPI function fn ("MPI_Allreduce") so far: for a
 * demo's summary of its communication (in a graded case, counted from the case's start).
 */
long xt_mpi_calls(const char *fn);

/*
 * The launch's nodes as comm sees them (collective over comm, through PMPI, so that no
 * program's counters see it): *per_node the fewest ranks of comm that share a node's memory
 * (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED; np on one machine), *leader the lowest rank of
 * comm on this rank's node. Returns 1 when every node's ranks are consecutive in comm, node
 * after node (rank / *per_node is the node), 0 when the launch placed them apart.
 */
int xt_launch_nodes(MPI_Comm comm, int *per_node, int *leader);

/* Formats up to `cap` bytes of "[v0 v1 ...]"; long buffers are elided in the middle. */
void xt_format_buffer(char *out, size_t cap, const void *buf, int count, MPI_Datatype dt);

/*
 * Follows one buffer through an algorithm, for demos. After xt_watch_begin,
 * every message this rank sends from or receives into `buf` and every
 * MPI_Reduce_local into it is noted; a step begins at each send.
 * xt_watch_print (collective over comm) then prints, step by step and in
 * rank order, which chunk each rank sent and received and the buffer after
 * the step. The caller says how the buffer is cut, as MPI's counts do: the
 * buffer is nchunks chunks of chunk_counts[0], chunk_counts[1], ...
 * elements, one after the other (a message that is not one whole chunk is
 * shown by its element range). phase(step, np), if given, names the phase a
 * step (from 0) belongs to.
 */
void xt_watch_begin(const void *buf, MPI_Datatype dt, const int *chunk_counts, int nchunks);
/* After xt_watch_begin: a message sent from or received into other memory that holds at
 * most `upto` (0 to 8) elements of the buffer's type is shown by its values, not its length
 * (a (max, sum) pair travelling a ring). */
void xt_watch_values(int upto);
void xt_watch_print(MPI_Comm comm, const char *(*phase)(int step, int np));

/* -------------------------------------------------------------------- memory */

/*
 * Memory accounting: a training step allocates its buffers through xt_alloc,
 * naming what each holds. libxt keeps, per rank and per kind, the bytes in use
 * now and the peak since xt_mem_reset_peak (or since the case began), and
 * writes them into every case's record, where the grader checks them against
 * per-kind formulas. A buffer allocated with malloc is not counted, so an
 * exercise graded on its memory allocates with xt_alloc only.
 *
 * Each block has guard bytes on both sides, checked at its xt_free and at the
 * end of every case: a write past either end is reported with the block's
 * kind, size and the line that allocated it. xt_free fills the block with
 * 0xff bytes, so a float read after free is NaN, and holds it back from
 * malloc for a while: a write after free is reported too.
 */
typedef enum {
    XT_MEM_PARAMS,      /* weights used by forward and backward */
    XT_MEM_GRADS,       /* gradients */
    XT_MEM_OPTIMIZER,   /* optimizer state: Adam's moments */
    XT_MEM_MASTER,      /* fp32 master weights (mixed precision) */
    XT_MEM_ACTIVATIONS, /* what forward keeps for backward */
    XT_MEM_COMM,        /* buffers that exist only to communicate or to do I/O */
    XT_MEM_KINDS        /* (also "all kinds together" in xt_mem_peak) */
} xt_mem_kind;

/* `bytes` zeroed bytes, 32-byte aligned, counted as `kind`; dies when out of memory. */
void *xt_alloc_at(xt_mem_kind kind, size_t bytes, const char *file, int line);
/* Frees what xt_alloc returned (NULL: nothing); dies on any other pointer, or a second time. */
void xt_free_at(void *p, const char *file, int line);
#define xt_alloc(kind, bytes) xt_alloc_at((kind), (bytes), __FILE__, __LINE__)
#define xt_free(p)            xt_free_at((p), __FILE__, __LINE__)
size_t xt_alloc_size(const void *p); /* the bytes asked for */

size_t xt_mem_peak(xt_mem_kind kind); /* the most in use since the last reset */
void xt_mem_reset_peak(void);         /* peak := current, every kind */
/* Collective: rank 0 prints each rank's peak bytes per kind, under `title`. */
void xt_mem_print(MPI_Comm comm, const char *title);

/* -------------------------------------------------------------------- errors */

XT_NORETURN void xt_die_at(const char *file, int line, const char *fmt, ...) XT_PRINTF(3, 4);
void *xt_malloc_at(size_t bytes, const char *file, int line);
void *xt_calloc_at(size_t n, size_t size, const char *file, int line);
XT_NORETURN void xt_todo_at(const char *file, int line, const char *func, const char *what, ...);

/* Prints "rank R file:line: message" and aborts every rank. */
#define xt_die(...) xt_die_at(__FILE__, __LINE__, __VA_ARGS__)
#define XT_CHECK(cond, ...)                                                                        \
    do {                                                                                           \
        if (!(cond))                                                                               \
            xt_die_at(__FILE__, __LINE__, __VA_ARGS__);                                            \
    } while (0)
#define xt_malloc(bytes)   xt_malloc_at((bytes), __FILE__, __LINE__)
#define xt_calloc(n, size) xt_calloc_at((n), (size), __FILE__, __LINE__)

/*
 * The body of every unwritten exercise: stops all ranks, naming what to write.
 * XT_TODO("what to write", arg1, arg2, ...) takes the function's arguments too,
 * so that a stub compiles without unused-parameter warnings.
 */
#define XT_TODO(...) xt_todo_at(__FILE__, __LINE__, __func__, __VA_ARGS__)

/* ---------------------------------------------------------- dtypes and arrays */

typedef enum {
    XT_F32,
    XT_F64,
    XT_I8,
    XT_I16,
    XT_I32,
    XT_I64,
    XT_U8,
    XT_U16,
    XT_U32,
    XT_U64,
    XT_F16,  /* IEEE half, '<f2' */
    XT_BF16, /* bfloat16 payload, stored as '<u2' (NumPy has no bfloat16) */
    XT_NDTYPES
} xt_dtype;

MPI_Datatype xt_dtype_mpi(xt_dtype dt); /* F16 and BF16 travel as MPI_UINT16_T */

#define XT_NPY_MAXDIM 8

/* An n-dimensional array, as a case input (or a .npy file) holds it. */
typedef struct {
    void *data;
    xt_dtype dtype;
    int ndim;
    long shape[XT_NPY_MAXDIM];
    long count; /* product of shape */
} xt_array;

/* ------------------------------------------------------------------- tracing */

/*
 * With XT_TRACE=1 (or --trace=1; --trace=FILE.json names the file) every MPI
 * call and every range named here is kept, and the run ends by writing one
 * Chrome trace-event JSON for all ranks: build/trace/<program>.trace.json.
 * Open it in https://ui.perfetto.dev. Without tracing these cost one branch.
 */
void xt_trace_begin(const char *name); /* a named range on this rank's timeline */
void xt_trace_end(void);               /* ends the innermost open range */

/* ------------------------------------------------------------------- case mode */

MPI_Comm xt_case_comm(const xt_case *c); /* the communicator this case runs on */
/*
 * A directory for files the case writes and reads back (a checkpoint), the
 * same path on every rank of the case's group and a different one for every
 * group and case; made on first use, and removed with the grader's run.
 */
const char *xt_case_scratch_dir(xt_case *c);
int xt_case_is(const xt_case *c, const char *fn);           /* the function under test is fn */
const char *xt_case_str(const xt_case *c, const char *key); /* dies if absent */
long xt_case_int(const xt_case *c, const char *key);        /* dies if absent */
MPI_Op xt_case_op(const xt_case *c);                        /* key "op": sum, max, ... */

/*
 * This rank's input `name`, in a buffer with guard bytes on both sides that
 * the case checks afterwards. xt_case_input_const also checks that the
 * program did not modify it.
 */
xt_array xt_case_input(xt_case *c, const char *name);
xt_array xt_case_input_const(xt_case *c, const char *name);
/* A guarded output buffer of `count` elements (bytes 0xCD until written), freed after the case. */
void *xt_case_alloc(xt_case *c, const char *name, long count, xt_dtype dt);
/* Writes this rank's output `name` for the grader to check. */
void xt_case_output(xt_case *c, const char *name, const void *data, xt_dtype dt, long count);
/*
 * Watches a weight array handed to the program: `blocks` blocks of `block`
 * floats from base, each of `parts` equal matrices. Every xt_gemm (and every
 * libxt kernel built on it) that multiplies by one of them adds the rows it
 * multiplied to that block and part, for the record (work.c).
 */
void xt_case_watch_weights(xt_case *c, const char *name, const float *base, long block, long blocks,
                           int parts);
/* Records a remark the grader turns into a failure (e.g. a bad return value). */
void xt_case_note(xt_case *c, const char *fmt, ...) XT_PRINTF(2, 3);

/* ------------------------------------------------------------------------ CUDA */

#if defined(XT_CUDA) || defined(__CUDACC__) || defined(XT_CUDA_EMU)
#ifndef XT_CUDA_EMU
#include <cuda_runtime.h>
#endif

void xt_cuda_check_at(cudaError_t err, const char *call, const char *file, int line);
#define XT_CUDA_CHECK(call) xt_cuda_check_at((call), #call, __FILE__, __LINE__)

/* Picks the device local_rank % device_count; returns the device, -1 without a GPU. */
int xt_cuda_select_device(void);

void *xt_cuda_malloc_at(size_t bytes, const char *file, int line);
void *xt_cuda_host_alloc_at(size_t bytes, const char *file, int line); /* pinned */
#define xt_cuda_malloc(bytes)     xt_cuda_malloc_at((bytes), __FILE__, __LINE__)
#define xt_cuda_host_alloc(bytes) xt_cuda_host_alloc_at((bytes), __FILE__, __LINE__)
/* Synchronous copies that also wait for every stream: for setting up and reading back. */
void xt_cuda_upload(void *dev, const void *host, size_t bytes);
void xt_cuda_download(void *host, const void *dev, size_t bytes);
/*
 * What a function under test left in device memory, read on a stream of
 * libxt's own that waits for nothing (non-blocking, no device-wide wait): a
 * copy or kernel the function queued and did not wait for is still pending,
 * and the bytes read are those from before it, as on a GPU where it ran late.
 */
void xt_cuda_read_back(void *host, const void *dev, size_t bytes);
void xt_cuda_free(void *dev);
void xt_cuda_host_free(void *pinned);

/*
 * Send / receive a device buffer. A CUDA-aware MPI gets the device pointer
 * directly; otherwise the bytes are staged through `pinned` (at least `bytes`
 * long; NULL: a temporary pinned buffer) with copies on `stream`.
 */
void xt_cuda_send(const void *dev, size_t bytes, int dest, int tag, MPI_Comm comm, void *pinned,
                  cudaStream_t stream);
void xt_cuda_recv(void *dev, size_t bytes, int src, int tag, MPI_Comm comm, void *pinned,
                  cudaStream_t stream);
#endif

#ifdef __cplusplus
}
#endif
#endif /* XT_H */
