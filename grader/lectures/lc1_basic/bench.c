/*
 * grader/lectures/lc1_basic/bench.c: the measuring half of `make bench LC=1`.
 * docs/lc1_basic.md (Bandwidth); grader/bench.py starts it and prints the tables.
 *
 * One launch times one hand-written collective of lecture 1 beside the MPI
 * library's own, for every message size from --min to --max bytes (doubling):
 *
 *     ring_allreduce       MPI_Allreduce       (in place, sum)
 *     allreduce_rd         MPI_Allreduce       (in place, sum)
 *     hierarchical_allreduce MPI_Allreduce     (in place, sum; nodes of --per-node ranks)
 *     double_tree_allreduce MPI_Allreduce      (in place, sum; chunks of --chunk bytes)
 *     allgather_ring       MPI_Allgather
 *     reduce_scatter_ring  MPI_Reduce_scatter  (equal blocks, sum)
 *     bcast_binomial       MPI_Bcast           (root 0)
 *     alltoallv_scratch    MPI_Alltoallv       (equal blocks)
 *
 * The hand-written functions are the exercises' own objects (solutions/ or
 * the student's tree), linked here with their main made local by objcopy:
 * no algorithm code is copied. They are declared weak, so that a bench built
 * without an exercise file says so instead of failing to link. The Makefile
 * links a second copy of each, xt_direct_<name>, whose MPI calls go to PMPI_
 * directly, past libxt's counters: --wrapcost times both.
 *
 * Per size, as the collective benchmarks do (nccl-tests, OSU): a check call
 * of each on the same rank-distinct input, results compared on every rank;
 * warm-up calls; back-to-back timed calls after a barrier. The timed calls
 * run in rounds (--rounds, default 5), hand-written then library in each,
 * so that a busy moment of a shared machine does not fall on one side only.
 * A round's time per call is the slowest rank's average; the table shows the
 * median round. With --rounds 1 that is exactly nccl-tests' time (its -a 3,
 * the maximum over ranks); the plain mean of all timed calls comes too.
 *
 * With --calibrate instead of --coll, one launch measures this machine's
 * limit, which no collective's bus bandwidth can pass: what one rank copies
 * and reduces per second while every rank does the same (measure_limit).
 * grader/bench.py starts it once per run, before the collectives.
 *
 * Output (rank 0, one line each, for grader/bench.py):
 *   INFO key value
 *   SKIP reason
 *   ROW bytes count iters warmup rounds t_hand t_lib t_hand_mean t_lib_mean
 *       status nwrong maxerr detail
 *   WRAP bytes count iters t_hand t_hand_direct t_lib t_lib_direct
 *   LIMIT copy|reduce bytes rounds rate_rank0 rate_rank1 ...   (--calibrate)
 * Times in seconds, rates in bytes per second; status is ok or WRONG;
 * detail, the rest of the line, is "-" or the first mismatch.
 */
#include "xt_harness.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- the exercises' functions */

/* Weak: NULL when the exercise's file was not there to link. */
#define XT_WEAK __attribute__((weak))

void ring_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) XT_WEAK;
void allreduce_rd(void *buf, int count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm) XT_WEAK;
void hierarchical_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op, int ranks_per_node,
                            MPI_Comm comm) XT_WEAK;
void double_tree_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op, int chunk,
                           MPI_Comm comm) XT_WEAK;
void allgather_ring(const void *send, void *recv, int count, MPI_Datatype dt,
                    MPI_Comm comm) XT_WEAK;
void reduce_scatter_ring(const void *send, void *recv, const int *recvcounts, MPI_Datatype dt,
                         MPI_Op op, MPI_Comm comm) XT_WEAK;
void bcast_binomial(void *buf, int count, MPI_Datatype dt, int root, MPI_Comm comm) XT_WEAK;
int alltoallv_scratch(const void *send, const int *sendcounts, MPI_Datatype dt, void **recv,
                      int *recvcounts, MPI_Comm comm) XT_WEAK;

/* The same code with MPI_x renamed PMPI_x (Makefile: the .direct.o copies). */
void xt_direct_ring_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op,
                              MPI_Comm comm) XT_WEAK;
void xt_direct_allreduce_rd(void *buf, int count, MPI_Datatype dt, MPI_Op op,
                            MPI_Comm comm) XT_WEAK;
void xt_direct_hierarchical_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op,
                                      int ranks_per_node, MPI_Comm comm) XT_WEAK;
void xt_direct_double_tree_allreduce(void *buf, int count, MPI_Datatype dt, MPI_Op op, int chunk,
                                     MPI_Comm comm) XT_WEAK;
void xt_direct_allgather_ring(const void *send, void *recv, int count, MPI_Datatype dt,
                              MPI_Comm comm) XT_WEAK;
void xt_direct_reduce_scatter_ring(const void *send, void *recv, const int *recvcounts,
                                   MPI_Datatype dt, MPI_Op op, MPI_Comm comm) XT_WEAK;
void xt_direct_bcast_binomial(void *buf, int count, MPI_Datatype dt, int root,
                              MPI_Comm comm) XT_WEAK;
int xt_direct_alltoallv_scratch(const void *send, const int *sendcounts, MPI_Datatype dt,
                                void **recv, int *recvcounts, MPI_Comm comm) XT_WEAK;

/* ------------------------------------------------------------------ state */

typedef struct {
    MPI_Comm comm;
    int rank, np;
    xt_dtype xd;
    MPI_Datatype dt;
    size_t esize;
    long count;     /* elements in the collective's size S */
    int block;      /* elements per rank, for the collectives that cut S np ways */
    char *input;    /* rank-distinct values, as long as the largest size */
    int *counts;    /* np entries of `block` */
    int *displs;    /* i * block */
    int *rcounts;   /* what alltoallv_scratch reports */
    long a2a_total; /* and returns */
    int per_node;   /* ranks a node, for hierarchical_allreduce */
    int chunk;      /* elements a message, for double_tree_allreduce */
    int direct;     /* 1: past libxt's PMPI counters */
    int keep;       /* 1: alltoallv_scratch's result is copied out (the check) */
} bench;

/* Any function, as the table holds the exercise's own and its direct copy. */
typedef void (*any_fn)(void);

typedef struct {
    const char *name, *library, *source;
    int split;   /* S is cut into np equal blocks */
    int reduces; /* results are sums: float results are compared with a tolerance */
    int in_place;
    any_fn fn, direct_fn; /* the exercise's function and its .direct.o copy: NULL if absent */
    void (*hand)(bench *b, void *out);
    void (*lib)(bench *b, void *out);
    long (*result_count)(const bench *b);
} collective;

static void allreduce_ring_hand(bench *b, void *out)
{
    (b->direct ? xt_direct_ring_allreduce : ring_allreduce)(out, (int)b->count, b->dt, MPI_SUM,
                                                            b->comm);
}

static void allreduce_rd_hand(bench *b, void *out)
{
    (b->direct ? xt_direct_allreduce_rd : allreduce_rd)(out, (int)b->count, b->dt, MPI_SUM,
                                                        b->comm);
}

static void allreduce_hier_hand(bench *b, void *out)
{
    (b->direct ? xt_direct_hierarchical_allreduce
               : hierarchical_allreduce)(out, (int)b->count, b->dt, MPI_SUM, b->per_node, b->comm);
}

static void allreduce_dbt_hand(bench *b, void *out)
{
    (b->direct ? xt_direct_double_tree_allreduce
               : double_tree_allreduce)(out, (int)b->count, b->dt, MPI_SUM, b->chunk, b->comm);
}

static void allreduce_lib(bench *b, void *out)
{
    (b->direct ? PMPI_Allreduce : MPI_Allreduce)(MPI_IN_PLACE, out, (int)b->count, b->dt, MPI_SUM,
                                                 b->comm);
}

static void allgather_hand(bench *b, void *out)
{
    (b->direct ? xt_direct_allgather_ring : allgather_ring)(b->input, out, b->block, b->dt,
                                                            b->comm);
}

static void allgather_lib(bench *b, void *out)
{
    (b->direct ? PMPI_Allgather : MPI_Allgather)(b->input, b->block, b->dt, out, b->block, b->dt,
                                                 b->comm);
}

static void reduce_scatter_hand(bench *b, void *out)
{
    (b->direct ? xt_direct_reduce_scatter_ring : reduce_scatter_ring)(b->input, out, b->counts,
                                                                      b->dt, MPI_SUM, b->comm);
}

static void reduce_scatter_lib(bench *b, void *out)
{
    (b->direct ? PMPI_Reduce_scatter : MPI_Reduce_scatter)(b->input, out, b->counts, b->dt, MPI_SUM,
                                                           b->comm);
}

static void bcast_hand(bench *b, void *out)
{
    (b->direct ? xt_direct_bcast_binomial : bcast_binomial)(out, (int)b->count, b->dt, 0, b->comm);
}

static void bcast_lib(bench *b, void *out)
{
    (b->direct ? PMPI_Bcast : MPI_Bcast)(out, (int)b->count, b->dt, 0, b->comm);
}

/* The function allocates its result: freeing it is part of every call's cost. */
static void alltoallv_hand(bench *b, void *out)
{
    void *got = NULL;
    long total = (b->direct ? xt_direct_alltoallv_scratch : alltoallv_scratch)(
        b->input, b->counts, b->dt, &got, b->rcounts, b->comm);
    if (b->keep) {
        b->a2a_total = total;
        if (got && total > 0 && total <= (long)b->np * b->block)
            memcpy(out, got, (size_t)total * b->esize);
    }
    free(got);
}

static void alltoallv_lib(bench *b, void *out)
{
    (b->direct ? PMPI_Alltoallv : MPI_Alltoallv)(b->input, b->counts, b->displs, b->dt, out,
                                                 b->counts, b->displs, b->dt, b->comm);
}

static long whole(const bench *b)
{
    return b->count;
}

static long one_block(const bench *b)
{
    return b->block;
}

static collective collectives[] = {
    {"ring_allreduce", "MPI_Allreduce", "fun_ring_allreduce.c", 0, 1, 1, (any_fn)ring_allreduce,
     (any_fn)xt_direct_ring_allreduce, allreduce_ring_hand, allreduce_lib, whole},
    {"allreduce_rd", "MPI_Allreduce", "fun_allreduce_rd.c", 0, 1, 1, (any_fn)allreduce_rd,
     (any_fn)xt_direct_allreduce_rd, allreduce_rd_hand, allreduce_lib, whole},
    {"hierarchical_allreduce", "MPI_Allreduce", "fun_hierarchical_allreduce.c", 0, 1, 1,
     (any_fn)hierarchical_allreduce, (any_fn)xt_direct_hierarchical_allreduce, allreduce_hier_hand,
     allreduce_lib, whole},
    {"double_tree_allreduce", "MPI_Allreduce", "fun_double_binary_tree.c", 0, 1, 1,
     (any_fn)double_tree_allreduce, (any_fn)xt_direct_double_tree_allreduce, allreduce_dbt_hand,
     allreduce_lib, whole},
    {"allgather_ring", "MPI_Allgather", "fun_gather.c", 1, 0, 0, (any_fn)allgather_ring,
     (any_fn)xt_direct_allgather_ring, allgather_hand, allgather_lib, whole},
    {"reduce_scatter_ring", "MPI_Reduce_scatter", "fun_reduce_scatter.c", 1, 1, 0,
     (any_fn)reduce_scatter_ring, (any_fn)xt_direct_reduce_scatter_ring, reduce_scatter_hand,
     reduce_scatter_lib, one_block},
    {"bcast_binomial", "MPI_Bcast", "fun_broadcast.c", 0, 0, 1, (any_fn)bcast_binomial,
     (any_fn)xt_direct_bcast_binomial, bcast_hand, bcast_lib, whole},
    {"alltoallv_scratch", "MPI_Alltoallv", "fun_all2all_scratch.c", 1, 0, 0,
     (any_fn)alltoallv_scratch, (any_fn)xt_direct_alltoallv_scratch, alltoallv_hand, alltoallv_lib,
     whole},
};
enum { NCOLL = sizeof collectives / sizeof collectives[0] };

/* ------------------------------------------------------------------ data */

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/*
 * Element i of rank r: floats uniform in [-1, 1), integers in [-1000, 1000]
 * (a sum over any sane np neither overflows nor rounds).
 */
static void fill_input(bench *b, long n)
{
    for (long i = 0; i < n; i++) {
        uint64_t h = mix(((uint64_t)b->rank << 40) ^ (uint64_t)i);
        double u = (double)(h >> 11) * 0x1.0p-53 * 2.0 - 1.0;
        long k = (long)(h % 2001) - 1000;
        char *p = b->input + (size_t)i * b->esize;
        switch (b->xd) {
        case XT_F32:
            *(float *)p = (float)u;
            break;
        case XT_F64:
            *(double *)p = u;
            break;
        case XT_I32:
            *(int32_t *)p = (int32_t)k;
            break;
        default:
            *(int64_t *)p = k;
            break;
        }
    }
}

static double element(const bench *b, const void *buf, long i)
{
    const char *p = (const char *)buf + (size_t)i * b->esize;
    switch (b->xd) {
    case XT_F32:
        return *(const float *)p;
    case XT_F64:
        return *(const double *)p;
    case XT_I32:
        return *(const int32_t *)p;
    default:
        return (double)*(const int64_t *)p;
    }
}

/*
 * The buffers a call writes start as this pattern, so that an element the
 * hand-written code never writes cannot pass for a right one. As a float it
 * is about 1.5e16, not a NaN.
 */
static void poison(void *buf, size_t bytes)
{
    memset(buf, 0x5a, bytes);
}

/* ---------------------------------------------------------------- check */

typedef struct {
    long nwrong;
    double maxerr;
    char detail[256];
} verdict;

/*
 * Compares the hand-written result with the library's, element by element.
 * Inputs lie in [-1, 1], so a sum of np of them is off by at most about
 * np * np * eps in any order of additions: the tolerance. Everything else
 * (integers, data that is only moved) must match exactly.
 */
static verdict check(const collective *c, bench *b, const void *hand, const void *lib)
{
    verdict v = {0, 0.0, "-"};
    int is_float = b->xd == XT_F32 || b->xd == XT_F64;
    double eps = b->xd == XT_F32 ? FLT_EPSILON : DBL_EPSILON;
    double tol = c->reduces && is_float ? 2.0 * b->np * b->np * eps : 0.0;
    long n = c->result_count(b), first = -1;
    for (long i = 0; i < n; i++) {
        double h = element(b, hand, i), l = element(b, lib, i);
        double err = fabs(h - l);
        if (err > v.maxerr || err != err)
            v.maxerr = err != err ? INFINITY : err;
        if (!(err <= tol)) {
            if (first < 0)
                first = i;
            v.nwrong++;
        }
    }
    if (first >= 0)
        snprintf(v.detail, sizeof v.detail, "rank %d [%ld]: hand-written %.9g, %s %.9g", b->rank,
                 first, element(b, hand, first), c->library, element(b, lib, first));
    if (c->hand == alltoallv_hand) {
        long want = (long)b->np * b->block;
        int counts_ok = 1;
        for (int i = 0; i < b->np; i++)
            counts_ok &= b->rcounts[i] == b->block;
        if (b->a2a_total != want || !counts_ok) {
            v.nwrong += 1;
            snprintf(v.detail, sizeof v.detail,
                     "rank %d: returned %ld elements (recvcounts[0] %d), expected %ld (%d each)",
                     b->rank, b->a2a_total, b->rcounts[0], want, b->block);
        }
    }
    /* Rank 0 reports the totals and the lowest failing rank's first mismatch. */
    long nwrong = v.nwrong;
    double maxerr = v.maxerr;
    int failing = v.nwrong ? b->rank : b->np;
    PMPI_Allreduce(&nwrong, &v.nwrong, 1, MPI_LONG, MPI_SUM, b->comm);
    PMPI_Allreduce(&maxerr, &v.maxerr, 1, MPI_DOUBLE, MPI_MAX, b->comm);
    PMPI_Allreduce(MPI_IN_PLACE, &failing, 1, MPI_INT, MPI_MIN, b->comm);
    if (failing < b->np)
        PMPI_Bcast(v.detail, sizeof v.detail, MPI_CHAR, failing, b->comm);
    return v;
}

/* ----------------------------------------------------------------- timing */

/* One side of a comparison: a function, whether it goes past libxt's counters, its buffer. */
typedef struct {
    void (*fn)(bench *, void *);
    int direct;
    void *out;
} side;

static double timed_calls(bench *b, const side *s, int n)
{
    b->direct = s->direct;
    PMPI_Barrier(b->comm);
    double t0 = PMPI_Wtime();
    for (int i = 0; i < n; i++)
        s->fn(b, s->out);
    double t = PMPI_Wtime() - t0;
    b->direct = 0;
    return t;
}

typedef struct {
    int iters, rounds;
    double median[2]; /* the median round's time per call: what the table shows */
    double mean[2];   /* over all timed calls, as nccl-tests reports it */
} timing;

/*
 * Times two sides after `warmup` untimed calls of each. The `iters` timed
 * calls of each side run in `rounds` rounds, the two sides one after the
 * other in every round, so that a busy moment of a shared machine does not
 * fall on one side only. A round's time per call is the slowest rank's
 * average; the result is the median round. With cap > 0, iters is first cut
 * so that one side's timed calls take about `cap` seconds.
 */
static timing time_pair(bench *b, const side sides[2], int warmup, int iters, int rounds,
                        double cap)
{
    double w[2];
    for (int k = 0; k < 2; k++)
        w[k] = timed_calls(b, &sides[k], warmup);
    PMPI_Allreduce(MPI_IN_PLACE, w, 2, MPI_DOUBLE, MPI_MAX, b->comm);
    if (cap > 0 && warmup > 0) {
        double per_call = (w[0] > w[1] ? w[0] : w[1]) / warmup;
        if (per_call * iters > cap) {
            int fit = (int)(cap / per_call);
            iters = fit < 5 ? 5 : fit;
        }
    }
    if (rounds > iters)
        rounds = iters;
    if (rounds < 1)
        rounds = 1;
    timing t = {.iters = iters, .rounds = rounds};
    double *per_round = xt_malloc(sizeof(double) * 2 * (size_t)rounds);
    double sum[2] = {0, 0};
    for (int r = 0; r < rounds; r++) {
        /* The counters log every message: keep the log short. */
        xt_mpi_stats_reset();
        int n = iters / rounds + (r < iters % rounds);
        double round[2];
        for (int k = 0; k < 2; k++) {
            double s = timed_calls(b, &sides[k], n);
            sum[k] += s;
            round[k] = s / n;
        }
        PMPI_Allreduce(MPI_IN_PLACE, round, 2, MPI_DOUBLE, MPI_MAX, b->comm);
        per_round[r] = round[0];
        per_round[rounds + r] = round[1];
    }
    for (int k = 0; k < 2; k++) {
        double *v = per_round + (size_t)k * rounds;
        t.median[k] = xt_sort_median(v, rounds);
        t.mean[k] = sum[k] / iters;
    }
    PMPI_Allreduce(MPI_IN_PLACE, t.mean, 2, MPI_DOUBLE, MPI_MAX, b->comm);
    free(per_round);
    return t;
}

/* nccl-tests' defaults are 5 warm-up and 20 timed calls; small sizes get more. */
static int default_iters(long bytes)
{
    long n = (256L << 20) / (bytes > 0 ? bytes : 1);
    return n < 20 ? 20 : n > 1000 ? 1000 : (int)n;
}

static int default_warmup(int iters)
{
    int n = iters / 10;
    return n < 5 ? 5 : n > 100 ? 100 : n;
}

/* Sets count and block for a size in bytes; 0 when the size is too small for np. */
static int set_size(const collective *c, bench *b, long bytes)
{
    long elements = bytes / (long)b->esize;
    if (c->split) {
        b->block = (int)(elements / b->np);
        b->count = (long)b->block * b->np;
        for (int i = 0; i < b->np; i++) {
            b->counts[i] = b->block;
            b->displs[i] = i * b->block;
        }
    } else {
        b->count = elements;
        b->block = (int)elements;
    }
    return b->count > 0;
}

/* Prepares `buf` for a call: the input for in-place collectives, else poison. */
static void prepare(const collective *c, bench *b, void *buf, int for_check)
{
    size_t bytes = (size_t)b->count * b->esize;
    if (c->hand == bcast_hand) {
        if (b->rank == 0)
            memcpy(buf, b->input, bytes);
        else
            poison(buf, bytes);
    } else if (c->in_place) {
        /*
         * The timed calls of an in-place sum start from zeros: from the input,
         * every call would multiply the values by np, and floats would
         * overflow within a hundred calls. An add costs the same for any value.
         */
        if (for_check)
            memcpy(buf, b->input, bytes);
        else
            memset(buf, 0, bytes);
    } else {
        poison(buf, bytes);
    }
}

/* ------------------------------------------------------ the machine's limit */

/*
 * What one rank copies (memcpy) and reduces (MPI_Reduce_local, sum) per
 * second while every other rank does the same: on one machine a byte that
 * moves from rank to rank costs at least one copy, and a reduced byte also a
 * reduce pass, so these bound every collective's busbw (docs/lc1_basic.md,
 * "The ceiling"). All ranks start each round together after a barrier, so
 * that the memory bandwidth the cores share, and the cores that ranks share
 * when np > cores, are in the figure. A round copies `bytes`, then reduces
 * `bytes` into the copy (the library's kernel for the bench's type, the one
 * its collectives use), so that a busy moment of a shared machine falls on
 * both. Per rank the median round counts; rank 0 prints every rank's rates.
 */
static void measure_limit(bench *b, long bytes, int rounds)
{
    int count = (int)(bytes / (long)b->esize);
    size_t size = (size_t)count * b->esize;
    if (rounds < 1)
        rounds = 1;
    char *src = xt_malloc(size), *dst = xt_malloc(size);
    /* Zeros: sums of them stay finite. Writing them maps every page now, not in a timed call. */
    memset(src, 0, size);
    memset(dst, 0, size);
    double *t = xt_malloc(sizeof(double) * 2 * (size_t)rounds);
    /* Round -1 warms up: code, page tables, the op's first dispatch. */
    for (int r = -1; r < rounds; r++) {
        PMPI_Barrier(b->comm);
        double t0 = PMPI_Wtime();
        memcpy(dst, src, size);
        double t_copy = PMPI_Wtime() - t0;
        PMPI_Barrier(b->comm);
        t0 = PMPI_Wtime();
        PMPI_Reduce_local(src, dst, count, b->dt, MPI_SUM);
        double t_reduce = PMPI_Wtime() - t0;
        if (r >= 0) {
            t[r] = t_copy;
            t[rounds + r] = t_reduce;
        }
    }
    double rate[2];
    for (int k = 0; k < 2; k++) {
        double median = xt_sort_median(t + (size_t)k * rounds, rounds);
        rate[k] = median > 0 ? (double)size / median : 0.0;
    }
    double *all = b->rank == 0 ? xt_malloc(sizeof(double) * 2 * (size_t)b->np) : NULL;
    PMPI_Gather(rate, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, b->comm);
    if (b->rank == 0) {
        const char *what[2] = {"copy", "reduce"};
        for (int k = 0; k < 2; k++) {
            printf("LIMIT %s %zu %d", what[k], size, rounds);
            for (int r = 0; r < b->np; r++)
                printf(" %.6e", all[2 * r + k]);
            printf("\n");
        }
        fflush(stdout);
    }
    free(all);
    free(t);
    free(src);
    free(dst);
}

/*
 * Ranks a node: --per-node when given (np a multiple of it); else the launch's, the ranks
 * that share this rank's memory (MPI_Comm_split_type), where they are fewer than np; on one
 * machine, two nodes of np/2 when np is even (virtual nodes: the bytes that would cross),
 * else one rank a node. Rank 0 says which (INFO nodes).
 */
static int nodes_of(bench *b, int given)
{
    int fewest, leader, consecutive = xt_launch_nodes(b->comm, &fewest, &leader);
    int L = given > 0 ? given : fewest < b->np ? fewest : b->np % 2 == 0 ? b->np / 2 : 1;
    if (L < 1 || b->np % L != 0)
        xt_die("--per-node %d: np = %d is not a whole number of nodes of it", L, b->np);
    /* A launch that places ranks round-robin (--map-by node) leaves a node's ranks apart:
     * renumber them node by node, as the algorithm's nodes are consecutive ranks. */
    int any = given == 0 && fewest < b->np && !consecutive;
    if (any) {
        MPI_Comm node_major;
        PMPI_Comm_split(b->comm, 0, leader * b->np + b->rank, &node_major);
        b->comm = node_major;
        PMPI_Comm_rank(b->comm, &b->rank);
    }
    xt_printf_root(b->comm, "INFO nodes %d %d %s\n", b->np / L, L,
                   given > 0        ? "given"
                   : any            ? "launch-renumbered"
                   : fewest < b->np ? "launch"
                                    : "virtual");
    return L;
}

static xt_dtype parse_dtype(const char *name)
{
    xt_dtype dt;
    if (!xt_dtype_from_name(name, &dt) ||
        (dt != XT_F32 && dt != XT_F64 && dt != XT_I32 && dt != XT_I64))
        xt_die("--dtype %s: the bench takes float32, float64, int32 or int64", name);
    return dt;
}

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    /* Measure what the code does, not the grader's deadlock detector. */
    xt_strict_send(0);

    bench b = {.comm = MPI_COMM_WORLD};
    PMPI_Comm_rank(b.comm, &b.rank);
    PMPI_Comm_size(b.comm, &b.np);
    const char *name = xt_arg_str("coll", "");
    b.xd = parse_dtype(xt_arg_str("dtype", "float32"));
    b.dt = xt_dtype_mpi(b.xd);
    b.esize = xt_dtype_size(b.xd);
    long min_bytes = xt_arg_int("min", 8), max_bytes = xt_arg_int("max", 64L << 20);
    int fixed_iters = (int)xt_arg_int("iters", 0), fixed_warmup = (int)xt_arg_int("warmup", -1);
    double cap = xt_arg_double("cap", 2.0);            /* seconds of timed calls per side */
    double size_limit = xt_arg_double("limit", 120.0); /* watchdog, per size */
    long wrap_bytes = xt_arg_int("wrapcost", 0);       /* 0: no wrapper measurement */
    int wrap_iters = (int)xt_arg_int("wrap-iters", 2000);
    int rounds = (int)xt_arg_int("rounds", 5); /* 1: nccl-tests' single average */

    if (xt_arg_flag("calibrate")) {
        xt_watchdog_arm(size_limit);
        measure_limit(&b, xt_arg_int("bytes", 64L << 20), rounds);
        xt_watchdog_arm(0);
        xt_finalize();
        return 0;
    }

    const collective *c = NULL;
    for (int i = 0; i < NCOLL; i++)
        if (strcmp(collectives[i].name, name) == 0)
            c = &collectives[i];
    if (!c) {
        if (b.rank == 0)
            fprintf(stderr, "bench: --coll takes one of:");
        for (int i = 0; i < NCOLL && b.rank == 0; i++)
            fprintf(stderr, " %s", collectives[i].name);
        if (b.rank == 0)
            fprintf(stderr, "\n");
        xt_finalize();
        return 2;
    }
    xt_printf_root(MPI_COMM_WORLD, "INFO coll %s\nINFO library %s\nINFO np %d\nINFO dtype %s\n",
                   c->name, c->library, b.np, xt_dtype_name(b.xd));
    if (c->hand == allreduce_hier_hand)
        b.per_node = nodes_of(&b, (int)xt_arg_int("per-node", 0));
    if (c->hand == allreduce_dbt_hand) {
        long chunk_bytes = xt_arg_int("chunk", 64L << 10);
        XT_CHECK(chunk_bytes >= (long)b.esize, "--chunk %ld: at least one element", chunk_bytes);
        b.chunk = (int)(chunk_bytes / (long)b.esize);
        xt_printf_root(MPI_COMM_WORLD, "INFO chunk %ld\n", (long)b.chunk * (long)b.esize);
    }
    if (!c->fn || !c->direct_fn) {
        xt_printf_root(MPI_COMM_WORLD, "SKIP %s is not in this build (%s missing)\n", c->name,
                       c->source);
        xt_finalize();
        return 0;
    }

    size_t max_elems = (size_t)(max_bytes > min_bytes ? max_bytes : min_bytes) / b.esize + 1;
    b.input = xt_malloc(max_elems * b.esize);
    char *out_hand = xt_malloc(max_elems * b.esize), *out_lib = xt_malloc(max_elems * b.esize);
    b.counts = xt_malloc(sizeof(int) * (size_t)b.np);
    b.displs = xt_malloc(sizeof(int) * (size_t)b.np);
    b.rcounts = xt_malloc(sizeof(int) * (size_t)b.np);
    fill_input(&b, (long)max_elems);
    /* Touch every page once, so that no timed call pays for first-touch faults. */
    memset(out_hand, 0, max_elems * b.esize);
    memset(out_lib, 0, max_elems * b.esize);

    int failed = 0;
    for (long bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
        if (!set_size(c, &b, bytes))
            continue;
        xt_watchdog_arm(size_limit);
        /* The counters keep an event per message: start each size empty. */
        xt_mpi_stats_reset();

        prepare(c, &b, out_hand, 1);
        prepare(c, &b, out_lib, 1);
        double first[2];
        PMPI_Barrier(b.comm);
        first[0] = PMPI_Wtime();
        b.keep = 1;
        c->hand(&b, out_hand);
        b.keep = 0;
        first[0] = PMPI_Wtime() - first[0];
        PMPI_Barrier(b.comm);
        first[1] = PMPI_Wtime();
        c->lib(&b, out_lib);
        first[1] = PMPI_Wtime() - first[1];
        PMPI_Allreduce(MPI_IN_PLACE, first, 2, MPI_DOUBLE, MPI_MAX, b.comm);
        verdict v = check(c, &b, out_hand, out_lib);
        failed |= v.nwrong > 0;

        long sbytes = b.count * (long)b.esize;
        int iters = fixed_iters > 0 ? fixed_iters : default_iters(sbytes);
        int warmup = fixed_warmup >= 0 ? fixed_warmup : default_warmup(iters);
        /* A slow machine: the first call's time bounds the warm-up to a quarter of the cap. */
        double first_call = first[0] > first[1] ? first[0] : first[1];
        if (fixed_warmup < 0 && cap > 0 && first_call * warmup > cap / 4) {
            int fit = (int)(cap / 4 / first_call);
            warmup = fit < 2 ? 2 : fit;
        }
        prepare(c, &b, out_hand, 0);
        prepare(c, &b, out_lib, 0);
        side sides[2] = {{c->hand, 0, out_hand}, {c->lib, 0, out_lib}};
        timing t = time_pair(&b, sides, warmup, iters, rounds, fixed_iters > 0 ? 0.0 : cap);
        /* count: the count argument of the call, one block for the split collectives. */
        xt_printf_root(MPI_COMM_WORLD, "ROW %ld %ld %d %d %d %.9e %.9e %.9e %.9e %s %ld %.3g %s\n",
                       sbytes, c->split ? (long)b.block : b.count, t.iters, warmup, t.rounds,
                       t.median[0], t.median[1], t.mean[0], t.mean[1], v.nwrong ? "WRONG" : "ok",
                       v.nwrong, v.maxerr, v.detail);
    }

    /*
     * What libxt's counting wrappers add: the same calls with them and past
     * them (the xt_direct_ copies, PMPI_ for the library), alternating. A
     * size too small to cut np ways becomes the smallest that can be.
     */
    if (c->split && wrap_bytes > 0 && wrap_bytes < b.np * (long)b.esize)
        wrap_bytes = b.np * (long)b.esize;
    if (wrap_bytes > 0 && set_size(c, &b, wrap_bytes)) {
        xt_watchdog_arm(size_limit);
        prepare(c, &b, out_hand, 0);
        prepare(c, &b, out_lib, 0);
        side hand[2] = {{c->hand, 0, out_hand}, {c->hand, 1, out_hand}};
        side lib[2] = {{c->lib, 0, out_lib}, {c->lib, 1, out_lib}};
        int warmup = default_warmup(wrap_iters);
        timing th = time_pair(&b, hand, warmup, wrap_iters, 2 * rounds, 0.0);
        timing tl = time_pair(&b, lib, warmup, wrap_iters, 2 * rounds, 0.0);
        xt_printf_root(MPI_COMM_WORLD, "WRAP %ld %ld %d %.9e %.9e %.9e %.9e\n",
                       b.count * (long)b.esize, b.count, wrap_iters, th.median[0], th.median[1],
                       tl.median[0], tl.median[1]);
    }
    xt_watchdog_arm(0);

    free(b.input);
    free(out_hand);
    free(out_lib);
    free(b.counts);
    free(b.displs);
    free(b.rcounts);
    xt_finalize();
    return failed ? 1 : 0;
}
