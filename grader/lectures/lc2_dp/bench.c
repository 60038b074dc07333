/*
 * grader/lectures/lc2_dp/bench.c: the measuring half of `make bench LC=2`.
 * docs/lc2_dp.md (Step time); grader/bench.py starts it and prints the tables.
 *
 * One launch times a data-parallel training step of an MLP several ways
 * (--variants, default all), on every rank at once:
 *
 *     compute          zero grads, forward, backward, grads / np, SGD: no MPI at all
 *     naive            ddp_naive_step: backward, then one MPI_Allreduce per tensor
 *     onebucket        ddp_bucketed_step with a cap of all the gradients: one
 *                      MPI_Iallreduce, started when backward has finished
 *     bucketed         ddp_bucketed_step: an MPI_Iallreduce per bucket, started
 *                      from backward's hook, MPI_Testall at every later hook,
 *                      MPI_Waitall before the update
 *     noprogress       ddp_bucketed_step with its MPI_Testall calls answered
 *                      "not yet" without entering MPI: the same code minus
 *                      its progress calls
 *     *_ring           the same three with Open MPI's libnbc told to use its
 *                      ring for MPI_Iallreduce
 *
 * The compute step runs on every rank at the same time as the others do, so
 * that it sees the same contention for cores and memory: step - compute is
 * what communication adds to a step (its exposed part).
 *
 * The DDP functions are the exercises' own objects (solutions/lc2_dp or the
 * student's tree), linked here with their main made local by objcopy: no
 * algorithm code is copied. The Makefile also renames the exercise objects'
 * MPI_Testall and MPI_Waitall to xt_bench_Testall and xt_bench_Waitall
 * (below): they pass through to MPI, except that noprogress skips the
 * Testall, and a traced run waits bucket by bucket, to show when each
 * finished.
 *
 * Timing: --warmup untimed steps of each, then --rounds rounds of --steps
 * steps of each, the variants one after the other in every round (starting
 * one later each round), so that a busy moment of the machine does not fall
 * on one only. A round's time per
 * step is the slowest rank's average; the best, median and worst round are
 * printed.
 *
 * Check: all models start from the same weights and see the same batches,
 * so after the run every DDP variant must hold naive's weights, on every
 * rank (the result check; a stale or missing bucket shows up here).
 *
 * With --trace=FILE.json (or XT_TRACE=1) the launch instead runs --steps
 * steps of each variant, each in a range "<variant> step <s>", and libxt
 * writes their timeline (common/trace.c) for bench.py's summary.
 *
 * Output (rank 0, one line each, for grader/bench.py):
 *   INFO key value
 *   SKIP reason
 *   BUCKET index first_tensor last_tensor bytes first_layer
 *   CALLS variant function calls_per_step bytes_sent_per_step
 *   ROW variant median best worst rounds steps      (seconds per step)
 *   CHECK naive=<variant> ok|WRONG n_weights_differ max_difference detail
 */
#include "xt_harness.h"

#include <float.h>
#ifdef __GLIBC__
#endif
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- the exercises' functions */

/* Weak: NULL when the exercise's file was not there to link. */
#define XT_WEAK __attribute__((weak))

/* The exercises' signatures and bucket layout, as solutions/lc2_dp/ddp_bucketed.c declares them. */
typedef struct {
    long lo, hi;
    int first_layer;
} bucket;

float ddp_naive_step(xt_mlp *m, const float *x, const void *target, int rows, float lr,
                     MPI_Comm comm) XT_WEAK;
int plan_buckets(const xt_mlp *m, size_t cap, bucket *out) XT_WEAK;
float ddp_bucketed_step(xt_mlp *m, const float *x, const void *target, int rows, float lr,
                        size_t cap, MPI_Comm comm) XT_WEAK;

/* ------------------------------------------- the exercise's MPI_Testall/Waitall */

/* 0: ddp_bucketed_step's MPI_Testall calls never reach MPI (the noprogress variant). */
static int progress_calls = 1;

static void mark(const char *fmt, ...) XT_PRINTF(1, 2);
static void mark(const char *fmt, ...)
{
    char name[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    xt_trace_begin(name);
    xt_trace_end();
}

/*
 * ddp_bucketed.c's MPI_Testall (objcopy --redefine-sym). Answering "not yet"
 * is always allowed (a test may report an unfinished request), so the
 * noprogress variant is still correct MPI: the requests complete in Waitall.
 * A trace gets a mark "done N" when the first N buckets are known complete.
 */
int xt_bench_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[]);
int xt_bench_Testall(int n, MPI_Request reqs[], int *flag, MPI_Status sts[])
{
    if (!progress_calls) {
        *flag = 0;
        return MPI_SUCCESS;
    }
    int rc = MPI_Testall(n, reqs, flag, sts);
    if (*flag)
        mark("done %d", n);
    return rc;
}

/*
 * ddp_bucketed.c's MPI_Waitall. A traced run waits for the buckets one at a
 * time, in the order they started ("wait bucket i" ranges), so that the
 * timeline shows when each one finished: every MPI_Wait drives the progress
 * of all of them, as MPI_Waitall does. Untraced, it is MPI_Waitall.
 */
int xt_bench_Waitall(int n, MPI_Request reqs[], MPI_Status sts[]);
int xt_bench_Waitall(int n, MPI_Request reqs[], MPI_Status sts[])
{
    if (!xt_trace_enabled())
        return MPI_Waitall(n, reqs, sts);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "wait bucket %d", i);
        xt_trace_begin(name);
        int rc = MPI_Wait(&reqs[i], sts == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &sts[i]);
        xt_trace_end();
        if (rc != MPI_SUCCESS)
            return rc;
    }
    return MPI_SUCCESS;
}

/* ------------------------------------------------ libnbc's Iallreduce algorithm */

/*
 * Open MPI's nonblocking collectives (libnbc) choose the Iallreduce algorithm
 * at every call from the variable coll_libnbc_iallreduce_algorithm: 0 is its
 * own rule, which takes a binomial tree (reduce to rank 0, broadcast back)
 * for every MPI_IN_PLACE call, as DDP's are (and for fewer than 4 ranks or
 * under 64 KiB); 1 is its ring. The variable can be written through the MPI
 * tool interface, so one launch times both. With another MPI there is no
 * such variable and the _ring variants are left out.
 */
static MPI_T_cvar_handle nbc_alg;
static int mpit_on, have_handle, have_nbc_alg;
static int nbc_alg_start; /* the value at start: OMPI_MCA_... may have set it */

static void find_nbc_alg(void)
{
    int provided, index, count, verbosity, bind, scope;
    MPI_Datatype dt;
    char name[128], desc[512];
    int name_len = sizeof name, desc_len = sizeof desc;
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS)
        return;
    mpit_on = 1;
    if (MPI_T_cvar_get_index("coll_libnbc_iallreduce_algorithm", &index) != MPI_SUCCESS ||
        MPI_T_cvar_get_info(index, name, &name_len, &verbosity, &dt, NULL, desc, &desc_len, &bind,
                            &scope) != MPI_SUCCESS ||
        dt != MPI_INT || bind != MPI_T_BIND_NO_OBJECT ||
        MPI_T_cvar_handle_alloc(index, NULL, &nbc_alg, &count) != MPI_SUCCESS)
        return;
    have_handle = 1;
    if (count != 1)
        return;
    /* A trial write: a read-only variable says so here, not in the middle of a run. */
    int ring = 1;
    have_nbc_alg = MPI_T_cvar_read(nbc_alg, &nbc_alg_start) == MPI_SUCCESS &&
                   MPI_T_cvar_write(nbc_alg, &ring) == MPI_SUCCESS &&
                   MPI_T_cvar_write(nbc_alg, &nbc_alg_start) == MPI_SUCCESS;
}

/* ring 1: the ring; 0: whatever the launch chose (by default, libnbc's own rule). */
static void set_nbc_alg(int ring)
{
    int alg = ring ? 1 : nbc_alg_start;
    if (have_nbc_alg)
        MPI_T_cvar_write(nbc_alg, &alg);
}

/* ------------------------------------------------------------------ state */

/*
 * The variants, in the order the table shows them. Every one after naive is
 * ddp_bucketed_step: with or without its progress calls, with its own cap or
 * one as large as all gradients (one bucket, started when backward has
 * finished: nothing can overlap), with libnbc's own algorithm or its ring.
 */
enum { COMPUTE, NAIVE, FIRST_BUCKETED };
typedef struct {
    const char *name;
    int progress; /* MPI_Testall reaches MPI */
    int one;      /* a single bucket */
    int ring;     /* libnbc's ring */
} variant;
static const variant variants[] = {
    {"compute", 1, 0, 0},       {"naive", 1, 0, 0},           {"onebucket", 1, 1, 0},
    {"bucketed", 1, 0, 0},      {"noprogress", 0, 0, 0},      {"onebucket_ring", 1, 1, 1},
    {"bucketed_ring", 1, 0, 1}, {"noprogress_ring", 0, 0, 1},
};
enum { NVARIANTS = sizeof variants / sizeof variants[0] };

enum { NBATCHES = 4 }; /* distinct batches per rank, used in turn */

typedef struct {
    MPI_Comm comm;
    int rank, np, rows;
    size_t cap;
    float lr;
    float *x[NBATCHES], *y[NBATCHES]; /* this rank's rows of each batch; MSE targets */
    int run[NVARIANTS];               /* 1: this launch times the variant */
    xt_mlp model[NVARIANTS];
    long steps_done[NVARIANTS];
} bench;

/*
 * The same forward, backward and update as a DDP step, with no MPI: the
 * gradients are divided by np as the DDP steps divide them, so that the
 * difference between a DDP step and this one is communication only.
 */
static void compute_step(xt_mlp *m, const float *x, const float *y, int rows, float lr, int np)
{
    xt_mlp_zero_grad(m);
    xt_mlp_forward(m, x, rows);
    xt_mlp_backward(m, y, 1.0f, NULL, NULL);
    for (long i = 0; i < m->nparams; i++)
        m->grads[i] /= (float)np;
    xt_sgd(m->params, m->grads, m->nparams, lr);
}

static void one_step(bench *b, int v)
{
    xt_mlp *m = &b->model[v];
    int k = (int)(b->steps_done[v] % NBATCHES);
    const float *x = b->x[k];
    const float *y = b->y[k];
    b->steps_done[v]++;
    if (v == COMPUTE) {
        compute_step(m, x, y, b->rows, b->lr, b->np);
    } else if (v == NAIVE) {
        ddp_naive_step(m, x, y, b->rows, b->lr, b->comm);
    } else {
        const variant *w = &variants[v];
        /* One bucket: a cap of all the gradients, which only the whole buffer reaches. */
        size_t cap = w->one ? sizeof(float) * (size_t)m->nparams : b->cap;
        progress_calls = w->progress;
        set_nbc_alg(w->ring);
        ddp_bucketed_step(m, x, y, b->rows, b->lr, cap, b->comm);
        set_nbc_alg(0);
        progress_calls = 1;
    }
}

/* Seconds per step of `n` steps of variant v on this rank, after a barrier. */
static double timed_steps(bench *b, int v, int n)
{
    PMPI_Barrier(b->comm);
    double t0 = PMPI_Wtime();
    for (int i = 0; i < n; i++)
        one_step(b, v);
    return (PMPI_Wtime() - t0) / n;
}

/* ----------------------------------------------------------------- check */

/*
 * Compares model a with model b on this rank, and model a on every rank with
 * rank 0's. Rank 0 prints one CHECK line. tol: the largest |difference|
 * accepted between a and b (0: bit for bit).
 */
static int check_models(bench *b, const char *what, const xt_mlp *a, const xt_mlp *c, double tol)
{
    long n = a->nparams, ndiff = 0, first = -1;
    double maxdiff = 0.0;
    for (long i = 0; i < n; i++) {
        float p = a->params[i], q = c->params[i];
        if (memcmp(&p, &q, sizeof p) != 0) {
            double d = fabs((double)p - (double)q);
            if (d != d)
                d = INFINITY; /* a NaN on either side is as wrong as it gets */
            if (d > maxdiff)
                maxdiff = d;
            if (first < 0)
                first = i;
            ndiff++;
        }
    }
    /* Data parallelism keeps every rank's weights equal: bit for bit, they all apply one update. */
    long nrank_diff = xt_ranks_differing(b->comm, a->params, sizeof(float) * (size_t)n);

    char detail[256] = "-";
    if (first >= 0)
        snprintf(detail, sizeof detail, "rank %d param[%ld] %.9g vs %.9g", b->rank, first,
                 (double)a->params[first], (double)c->params[first]);
    int bad = maxdiff > tol || nrank_diff;
    /* Summed over ranks below; nrank_diff is already the same total on every rank. */
    long counts[3] = {ndiff, b->rank == 0 ? nrank_diff : 0, bad};
    PMPI_Allreduce(MPI_IN_PLACE, counts, 3, MPI_LONG, MPI_SUM, b->comm);
    PMPI_Allreduce(MPI_IN_PLACE, &maxdiff, 1, MPI_DOUBLE, MPI_MAX, b->comm);
    /* The lowest rank with a difference tells which. */
    int who = first >= 0 ? b->rank : b->np;
    PMPI_Allreduce(MPI_IN_PLACE, &who, 1, MPI_INT, MPI_MIN, b->comm);
    if (who < b->np && who != 0) {
        if (b->rank == who)
            PMPI_Send(detail, sizeof detail, MPI_CHAR, 0, 0, b->comm);
        if (b->rank == 0)
            PMPI_Recv(detail, sizeof detail, MPI_CHAR, who, 0, b->comm, MPI_STATUS_IGNORE);
    }
    if (counts[1])
        snprintf(detail, sizeof detail, "%ld rank(s) hold other weights than rank 0", counts[1]);
    xt_printf_root(b->comm, "CHECK %s %s %ld %.3g %s\n", what, counts[2] ? "WRONG" : "ok",
                   counts[0], maxdiff, detail);
    return counts[2] != 0;
}

/* --------------------------------------------------------------- the runs */

static void print_calls(bench *b, int v, int steps)
{
    static const char *fns[] = {"MPI_Allreduce", "MPI_Iallreduce", "MPI_Testall", "MPI_Waitall",
                                "MPI_Wait"};
    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        xt_mpi_stats s = xt_mpi_stats_get(fns[i]);
        if (s.calls > 0)
            xt_printf_root(b->comm, "CALLS %s %s %.2f %ld\n", variants[v].name, fns[i],
                           (double)s.calls / steps, s.bytes_sent / steps);
    }
}

static int run_timing(bench *b, int warmup, int steps, int rounds)
{
    for (int v = 0; v < NVARIANTS; v++)
        for (int i = 0; b->run[v] && i < warmup; i++)
            one_step(b, v);

    double *per_round = xt_malloc(sizeof(double) * NVARIANTS * (size_t)rounds);
    for (int r = 0; r < rounds; r++) {
        double round[NVARIANTS] = {0};
        /* Each round starts one variant later: none is always first after the others. */
        for (int k = 0; k < NVARIANTS; k++) {
            int v = (k + r) % NVARIANTS;
            if (!b->run[v])
                continue;
            /* The counters keep an event per message: empty them for every run of steps. */
            xt_mpi_stats_reset();
            round[v] = timed_steps(b, v, steps);
            if (r == 0) /* the counts are the same every round */
                print_calls(b, v, steps);
        }
        PMPI_Allreduce(MPI_IN_PLACE, round, NVARIANTS, MPI_DOUBLE, MPI_MAX, b->comm);
        for (int v = 0; v < NVARIANTS; v++)
            per_round[(size_t)v * rounds + r] = round[v];
    }
    for (int v = 0; v < NVARIANTS; v++) {
        if (!b->run[v])
            continue;
        double *t = per_round + (size_t)v * rounds;
        double median = xt_sort_median(t, rounds);
        xt_printf_root(b->comm, "ROW %s %.9e %.9e %.9e %d %d\n", variants[v].name, median, t[0],
                       t[rounds - 1], rounds, steps);
    }
    free(per_round);
    if (!b->run[NAIVE])
        return 0;

    /*
     * Naive and bucketed add the same gradients, each element once per rank,
     * but in different orders over 3 or more ranks (Open MPI's blocking
     * all-reduce and libnbc's Iallreduce use different trees and rings), so
     * the last bits of a sum may differ, and a step's difference carries into
     * the next. The tolerance allows that rounding: a few float epsilons of
     * the largest weight per step taken. Over 1 or 2 ranks a sum has one
     * order (a + b = b + a exactly): bit for bit.
     */
    float wmax = 0.0f;
    for (long i = 0; i < b->model[NAIVE].nparams; i++)
        wmax = fmaxf(wmax, fabsf(b->model[NAIVE].params[i]));
    double tol = b->np <= 2 ? 0.0 : 4.0 * FLT_EPSILON * wmax * (double)b->steps_done[NAIVE];
    int failed = 0;
    for (int v = FIRST_BUCKETED; v < NVARIANTS; v++)
        if (b->run[v]) {
            char what[64];
            snprintf(what, sizeof what, "naive=%s", variants[v].name);
            failed |= check_models(b, what, &b->model[NAIVE], &b->model[v], tol);
        }
    xt_printf_root(b->comm, "INFO steps_checked %ld\nINFO check_tolerance %.3g\n",
                   b->steps_done[NAIVE], tol);
    return failed;
}

/* `steps` steps of each chosen variant, each in a range "<variant> step <s>", for the timeline. */
static void run_trace(bench *b, int steps)
{
    for (int v = 0; v < NVARIANTS; v++)
        for (int s = 0; b->run[v] && s < steps; s++) {
            char name[48];
            snprintf(name, sizeof name, "%s step %d", variants[v].name, s);
            PMPI_Barrier(b->comm);
            xt_trace_begin(name);
            one_step(b, v);
            xt_trace_end();
        }
}

int main(int argc, char **argv)
{
    /*
     * libnbc allocates a bucket-sized temporary at every MPI_Iallreduce and
     * frees it when the request completes; whether that costs fresh pages
     * would otherwise depend on which variants ran before.
     */
    xt_steady_allocator();
    xt_init(&argc, &argv);
    /* Measure what the code does, not the grader's deadlock detector. */
    xt_strict_send(0);

    bench b = {.comm = MPI_COMM_WORLD};
    PMPI_Comm_rank(b.comm, &b.rank);
    PMPI_Comm_size(b.comm, &b.np);
    const char *dims = xt_arg_str("dims", "1024,1024,1024,1024,1024,1024,1024,16");
    b.rows = (int)xt_arg_int("rows", 16); /* per rank and step */
    b.cap = (size_t)xt_arg_int("bucket_bytes", 4L << 20);
    b.lr = (float)xt_arg_double("lr", 0.01);
    int steps = (int)xt_arg_int("steps", 3);    /* timed steps per round and variant */
    int rounds = (int)xt_arg_int("rounds", 11); /* the median round counts */
    int warmup = (int)xt_arg_int("warmup", 2);
    double limit = xt_arg_double("limit", 300.0); /* watchdog for the whole launch */
    /* Comma-separated names; the default: all that this MPI can run. */
    const char *chosen = xt_arg_str("variants", "");
    if (b.rows < 1 || steps < 1 || rounds < 1 || warmup < 0 || b.cap < 1)
        xt_die("need --rows, --steps, --rounds, --bucket_bytes >= 1 and --warmup >= 0");

    xt_printf_root(b.comm, "INFO np %d\nINFO dims %s\nINFO rows %d\nINFO bucket_bytes %zu\n", b.np,
                   dims, b.rows, b.cap);
    if (!ddp_naive_step || !ddp_bucketed_step || !plan_buckets) {
        xt_printf_root(b.comm, "SKIP ddp_naive.c or ddp_bucketed.c is not in this build\n");
        xt_finalize();
        return 0;
    }
    xt_watchdog_arm(limit);
    find_nbc_alg();
    xt_printf_root(b.comm, "INFO iallreduce_algorithm %s\n",
                   have_nbc_alg ? (nbc_alg_start == 0 ? "libnbc-default" : "forced") : "-");
    for (int v = 0; v < NVARIANTS; v++) {
        size_t len = strlen(variants[v].name);
        const char *p = chosen;
        int listed = !*chosen;
        while (*chosen && p && !listed) {
            listed = strncmp(p, variants[v].name, len) == 0 && (p[len] == ',' || p[len] == 0);
            p = strchr(p, ',');
            p = p ? p + 1 : NULL;
        }
        b.run[v] = listed && (have_nbc_alg || !variants[v].ring);
    }

    /* Every model starts from the same weights: the DDP steps need no broadcast. */
    int first = -1;
    for (int v = 0; v < NVARIANTS; v++) {
        if (!b.run[v])
            continue;
        xt_mlp_init_str(&b.model[v], dims, XT_RELU, XT_MSE);
        xt_mlp_randomize(&b.model[v], 2026);
        if (first < 0)
            first = v;
    }
    if (first < 0)
        xt_die("--variants %s: none of them can run here", chosen);
    const xt_mlp *m = &b.model[first];
    int din = m->dims[0], dout = m->dims[m->nlayers];
    xt_printf_root(b.comm, "INFO nparams %ld\nINFO grad_bytes %ld\n", m->nparams,
                   (long)sizeof(float) * m->nparams);
    bucket *plan = xt_malloc(sizeof(bucket) * (size_t)m->ntensors);
    int nb = plan_buckets(m, b.cap, plan);
    for (int i = 0; i < nb; i++) {
        int lo = 0, hi = 0;
        for (int t = 0; t < m->ntensors; t++) {
            if (m->tensor[t].offset == plan[i].lo)
                lo = t;
            if (m->tensor[t].offset + m->tensor[t].count == plan[i].hi)
                hi = t;
        }
        xt_printf_root(b.comm, "BUCKET %d %s %s %ld %d\n", i, m->tensor[lo].name,
                       m->tensor[hi].name, (long)sizeof(float) * (plan[i].hi - plan[i].lo),
                       plan[i].first_layer);
    }
    free(plan);

    /* Inputs uniform in +-1 and targets in +-1, distinct per rank and batch. */
    xt_rng g = xt_rng_seed(1000003u * (uint64_t)(b.rank + 1));
    for (int k = 0; k < NBATCHES; k++) {
        b.x[k] = xt_malloc(sizeof(float) * (size_t)b.rows * din);
        b.y[k] = xt_malloc(sizeof(float) * (size_t)b.rows * dout);
        xt_rng_fill_uniform(&g, b.x[k], (long)b.rows * din, -1.0f, 1.0f);
        xt_rng_fill_uniform(&g, b.y[k], (long)b.rows * dout, -1.0f, 1.0f);
    }

    int failed = 0;
    if (xt_trace_enabled())
        run_trace(&b, steps);
    else
        failed = run_timing(&b, warmup, steps, rounds);
    xt_watchdog_arm(0);

    if (have_handle)
        MPI_T_cvar_handle_free(&nbc_alg);
    if (mpit_on)
        MPI_T_finalize();
    for (int v = 0; v < NVARIANTS; v++)
        if (b.run[v])
            xt_mlp_free(&b.model[v]);
    for (int k = 0; k < NBATCHES; k++) {
        free(b.x[k]);
        free(b.y[k]);
    }
    xt_finalize();
    return failed ? 1 : 0;
}
