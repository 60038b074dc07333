/*
 * grader/lectures/lc4_tp/bench.c: the measuring half of `make bench LC=4` for
 * the MLP block. docs/lc4_tp.md (Bench); grader/lectures/lc4_tp/bench.py
 * starts it, runs the decoder step through model_tp's own case mode, and
 * prints the tables.
 *
 * One launch runs, on every rank, the SwiGLU block of T tokens, width d and
 * ff hidden units two ways (--blocks, default both):
 *
 *     mlp     mlp_tp_forward + mlp_tp_backward (mlp_tp.c): tensor parallelism;
 *             every rank holds all T tokens, one all-reduce of T d floats each way
 *     seqpar  seqpar_forward + seqpar_backward (sequence_parallel.c): the same
 *             block with a pre-norm and sequence parallelism; each rank holds
 *             T_local = xt_block(T, np, rank) tokens outside the MLP
 *
 * The functions are the exercises' own objects (solutions/lc4_tp or the
 * student's tree), linked here with their main made local by objcopy: no
 * algorithm code is copied. Both take plain arrays: the driver cuts the
 * whole weights Wg, Wu (d x ff) and Wd (ff x d), the same on every rank, into
 * the rank's hidden-unit block xt_block(ff, np, rank), as the grader does.
 *
 * Measure (once, counters reset before each phase): per phase (fwd, bwd),
 * the calls and bytes of every MPI function (libxt's PMPI counters: the
 * bytes of each call's buffer, not what the library's algorithm puts on the
 * wire), and the activation memory: for mlp, the act buffer the contract
 * fixes (3 T ff_local floats, allocated here as XT_MEM_ACTIVATIONS); for
 * seqpar, the peak of XT_MEM_ACTIVATIONS over its forward and backward
 * (the exercise allocates it), against T_local (d + 1) + 3 T ff_local floats.
 *
 * Check: rank 0 runs the same functions on MPI_COMM_SELF with the whole
 * weights (the single-process twin, as the demos do); every rank's y and dx
 * (its own tokens, for seqpar) must be within --tol of it (|a - b| <= tol
 * (1 + |b|)), and mlp's y and dx bit-identical on every rank.
 *
 * Time: after --warmup untimed calls, --rounds rounds of one forward and one
 * backward of each block, the blocks taking turns (starting one later each
 * round); a round's time is the slowest rank's. Median, best and worst.
 *
 * Output (rank 0, one line each, for bench.py):
 *   INFO key value
 *   SKIP reason
 *   CALLS block phase function calls_min calls_max bytes_min bytes_max
 *   ACT block kept_min kept_max formula_min formula_max nbad     (bytes per rank)
 *   ROW block median best worst rounds                           (seconds per fwd+bwd)
 *   CHECK block ok|WRONG maxdiff ndiffer detail
 */
#include "xt_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------- the exercises' functions */

/* Weak: NULL when the exercise's file was not there to link. */
#define XT_WEAK __attribute__((weak))

void mlp_tp_forward(const float *x, const float *wg, const float *wu, const float *wd, float *y,
                    float *act, int rows, int d, int ff_local, MPI_Comm comm) XT_WEAK;
void mlp_tp_backward(const float *x, const float *wg, const float *wu, const float *wd,
                     const float *act, const float *dy, float *dx, float *dwg, float *dwu,
                     float *dwd, int rows, int d, int ff_local, MPI_Comm comm) XT_WEAK;
float *seqpar_forward(const float *x, const float *gamma, const float *w, float *y, int T, int d,
                      int ff_local, float eps, MPI_Comm comm) XT_WEAK;
void seqpar_backward(const float *x, const float *gamma, const float *w, float *act,
                     const float *dy, float *dx, float *dgamma, float *dw, int T, int d,
                     int ff_local, MPI_Comm comm) XT_WEAK;

enum { MLP, SEQPAR, NBLOCKS };
static const char *const block_name[NBLOCKS] = {"mlp", "seqpar"};
static const char *const block_file[NBLOCKS] = {"mlp_tp.c", "sequence_parallel.c"};

#define EPS 1e-5f

/* ------------------------------------------------------------------ state */

typedef struct {
    int T, d, ff;           /* the block: tokens, width, hidden units */
    int tl, t_lo;           /* this rank's tokens (seqpar) */
    int fl, f_lo;           /* this rank's hidden units */
    float *x, *dy, *gamma;  /* whole, the same on every rank */
    float *wg, *wu, *wd;    /* whole weights, the same on every rank */
    float *w, *dw;          /* this rank's blocks: Wg_r, Wu_r (d x fl), Wd_r (fl x d) */
    float *y, *dx, *dgamma; /* outputs */
    float *act;             /* mlp's act: 3 T fl floats, XT_MEM_ACTIVATIONS */
    float *sp_act;          /* seqpar's, between its forward and its backward */
} block;

typedef struct {
    MPI_Comm comm;
    int rank, np, run[NBLOCKS];
    double tol;
    block b;
} bench;

/* w (Wg_r, Wu_r, Wd_r, contiguous) from the whole weights: the split rule of lecture 4. */
static void cut(const block *b, float *w, int fl, int f_lo)
{
    int d = b->d, ff = b->ff;
    for (int i = 0; i < d; i++)
        for (int j = 0; j < fl; j++) {
            w[(size_t)i * fl + j] = b->wg[(size_t)i * ff + f_lo + j];
            w[(size_t)d * fl + (size_t)i * fl + j] = b->wu[(size_t)i * ff + f_lo + j];
        }
    memcpy(w + 2 * (size_t)d * fl, b->wd + (size_t)f_lo * d, sizeof(float) * (size_t)fl * d);
}

/* One forward and one backward of block k on comm (w: its blocks, fl hidden units). */
static void forward(bench *bn, int k, const float *w, int fl, int t_lo, float *act, float **sp_act,
                    MPI_Comm comm)
{
    block *b = &bn->b;
    size_t nw = (size_t)b->d * fl;
    if (k == MLP)
        mlp_tp_forward(b->x, w, w + nw, w + 2 * nw, b->y, act, b->T, b->d, fl, comm);
    else
        *sp_act = seqpar_forward(b->x + (size_t)t_lo * b->d, b->gamma, w, b->y, b->T, b->d, fl, EPS,
                                 comm);
}

static void backward(bench *bn, int k, const float *w, float *dw, int fl, int t_lo, float *act,
                     float *sp_act, MPI_Comm comm)
{
    block *b = &bn->b;
    size_t nw = (size_t)b->d * fl;
    if (k == MLP)
        mlp_tp_backward(b->x, w, w + nw, w + 2 * nw, act, b->dy, b->dx, dw, dw + nw, dw + 2 * nw,
                        b->T, b->d, fl, comm);
    else
        seqpar_backward(b->x + (size_t)t_lo * b->d, b->gamma, w, sp_act,
                        b->dy + (size_t)t_lo * b->d, b->dx, b->dgamma, dw, b->T, b->d, fl, comm);
}

/* --------------------------------------------------------------- reductions */

static void minmax(MPI_Comm comm, long v, long out[2])
{
    long in[2] = {-v, v};
    PMPI_Allreduce(in, out, 2, MPI_LONG, MPI_MAX, comm);
    out[0] = -out[0];
}

static const char *const mpi_fns[] = {"MPI_Allreduce",
                                      "MPI_Allgather",
                                      "MPI_Allgatherv",
                                      "MPI_Reduce_scatter",
                                      "MPI_Reduce_scatter_block",
                                      "MPI_Reduce",
                                      "MPI_Bcast",
                                      "MPI_Send",
                                      "MPI_Isend",
                                      "MPI_Sendrecv",
                                      "MPI_Alltoall",
                                      "MPI_Alltoallv",
                                      "MPI_Barrier"};
enum { NFNS = sizeof mpi_fns / sizeof mpi_fns[0] };

/* The counters since the last reset, as CALLS lines; "all" counts every MPI function. */
static void report_calls(bench *bn, int k, const char *phase)
{
    for (int i = 0; i <= NFNS; i++) {
        xt_mpi_stats s = xt_mpi_stats_get(i < NFNS ? mpi_fns[i] : NULL);
        long calls[2], bytes[2];
        minmax(bn->comm, s.calls, calls);
        minmax(bn->comm, s.bytes_sent, bytes);
        if (calls[1] > 0 || i == NFNS)
            xt_printf_root(bn->comm, "CALLS %s %s %s %ld %ld %ld %ld\n", block_name[k], phase,
                           i < NFNS ? mpi_fns[i] : "all", calls[0], calls[1], bytes[0], bytes[1]);
    }
    xt_mpi_stats_reset();
}

/* ------------------------------------------------------------ measure one */

/*
 * Block k once, counted: CALLS per phase, ACT, then CHECK against the
 * single-process twin on rank 0. Returns nothing: bench.py judges the lines.
 */
static void measure(bench *bn, int k)
{
    block *b = &bn->b;
    size_t act_floats = 3 * (size_t)b->T * b->fl;
    size_t before = xt_mem_current(XT_MEM_ACTIVATIONS);
    memset(b->dw, 0, sizeof(float) * 3 * (size_t)b->d * b->fl);
    memset(b->dgamma, 0, sizeof(float) * (size_t)b->d);
    xt_mem_reset_peak();
    xt_mpi_stats_reset();
    float *sp_act = NULL;
    forward(bn, k, b->w, b->fl, b->t_lo, b->act, &sp_act, bn->comm);
    report_calls(bn, k, "fwd");
    backward(bn, k, b->w, b->dw, b->fl, b->t_lo, b->act, sp_act, bn->comm);
    report_calls(bn, k, "bwd");

    /* Activations kept for backward (bytes per rank), and what the formula says. */
    long kept, formula;
    if (k == MLP) { /* the contract's buffer, which this driver allocates */
        kept = (long)(sizeof(float) * act_floats);
        formula = (long)(sizeof(float) * act_floats);
    } else {
        kept = (long)(xt_mem_peak(XT_MEM_ACTIVATIONS) - before);
        formula = (long)sizeof(float) * ((long)b->tl * (b->d + 1) + 3L * b->T * b->fl);
    }
    long kr[2], fr[2], nbad = kept != formula;
    minmax(bn->comm, kept, kr);
    minmax(bn->comm, formula, fr);
    PMPI_Allreduce(MPI_IN_PLACE, &nbad, 1, MPI_LONG, MPI_SUM, bn->comm);
    xt_printf_root(bn->comm, "ACT %s %ld %ld %ld %ld %ld\n", block_name[k], kr[0], kr[1], fr[0],
                   fr[1], nbad);

    /* The single-process twin on rank 0, whole weights; its y and dx to every rank. */
    long rows_out = k == MLP ? b->T : b->tl, out_lo = k == MLP ? 0 : b->t_lo;
    size_t td = (size_t)b->T * b->d;
    float *ref = xt_malloc(sizeof(float) * 2 * td);
    float *mine_y = xt_malloc(sizeof(float) * td), *mine_dx = xt_malloc(sizeof(float) * td);
    memcpy(mine_y, b->y, sizeof(float) * (size_t)rows_out * b->d);
    memcpy(mine_dx, b->dx, sizeof(float) * (size_t)rows_out * b->d);
    if (bn->rank == 0) {
        float *w1 = xt_malloc(sizeof(float) * 3 * (size_t)b->d * b->ff);
        float *dw1 = calloc(3 * (size_t)b->d * b->ff, sizeof(float));
        float *act1 = k == MLP ? xt_malloc(sizeof(float) * 3 * (size_t)b->T * b->ff) : NULL;
        cut(b, w1, b->ff, 0);
        float *sp1 = NULL;
        forward(bn, k, w1, b->ff, 0, act1, &sp1, MPI_COMM_SELF);
        backward(bn, k, w1, dw1, b->ff, 0, act1, sp1, MPI_COMM_SELF);
        memcpy(ref, b->y, sizeof(float) * td);
        memcpy(ref + td, b->dx, sizeof(float) * td);
        free(act1);
        free(dw1);
        free(w1);
    }
    PMPI_Bcast(ref, (int)(2 * td), MPI_FLOAT, 0, bn->comm);
    double worst = 0, maxdiff = 0;
    long ndiff = 0;
    char detail[160] = "-";
    for (int part = 0; part < 2; part++) {
        const float *got = part ? mine_dx : mine_y;
        const float *want = ref + part * td + (size_t)out_lo * b->d;
        for (long i = 0; i < rows_out * b->d; i++) {
            double e = fabs((double)got[i] - (double)want[i]);
            if (e != e)
                e = INFINITY;
            double rel = e / (1.0 + fabs((double)want[i]));
            if (rel > bn->tol && ndiff++ == 0)
                snprintf(detail, sizeof detail, "rank %d %s[%ld] %.9g vs one rank's %.9g", bn->rank,
                         part ? "dx" : "y", out_lo * b->d + i, (double)got[i], (double)want[i]);
            worst = rel > worst ? rel : worst;
            maxdiff = e > maxdiff ? e : maxdiff;
        }
    }
    long nrank = 0;
    if (k == MLP) /* whole on every rank: bit for bit */
        nrank = xt_ranks_differing(bn->comm, mine_y, sizeof(float) * td) +
                xt_ranks_differing(bn->comm, mine_dx, sizeof(float) * td);
    /* rank 0 tells the first rank's detail that differs */
    struct {
        double v;
        int rank;
    } me = {ndiff ? 1.0 : 0.0, bn->rank}, who;
    who.v = 0;
    who.rank = 0;
    PMPI_Allreduce(&me, &who, 1, MPI_DOUBLE_INT, MPI_MAXLOC, bn->comm);
    if (who.v > 0 && who.rank != 0) {
        if (bn->rank == who.rank)
            PMPI_Send(detail, sizeof detail, MPI_CHAR, 0, 0, bn->comm);
        if (bn->rank == 0)
            PMPI_Recv(detail, sizeof detail, MPI_CHAR, who.rank, 0, bn->comm, MPI_STATUS_IGNORE);
    }
    PMPI_Allreduce(MPI_IN_PLACE, &ndiff, 1, MPI_LONG, MPI_SUM, bn->comm);
    PMPI_Allreduce(MPI_IN_PLACE, &maxdiff, 1, MPI_DOUBLE, MPI_MAX, bn->comm);
    if (nrank && !ndiff)
        snprintf(detail, sizeof detail, "y or dx differ between ranks (%ld)", nrank);
    xt_printf_root(bn->comm, "CHECK %s %s %.3g %ld %s\n", block_name[k],
                   ndiff || nrank ? "WRONG" : "ok", maxdiff, ndiff, detail);
    free(mine_dx);
    free(mine_y);
    free(ref);
}

/* ----------------------------------------------------------------- timing */

static void run_timing(bench *bn, int warmup, int rounds)
{
    block *b = &bn->b;
    for (int k = 0; k < NBLOCKS; k++)
        for (int i = 0; bn->run[k] && i < warmup; i++) {
            float *sp_act = NULL;
            forward(bn, k, b->w, b->fl, b->t_lo, b->act, &sp_act, bn->comm);
            backward(bn, k, b->w, b->dw, b->fl, b->t_lo, b->act, sp_act, bn->comm);
        }
    double *per_round = xt_malloc(sizeof(double) * NBLOCKS * (size_t)(rounds + 1));
    for (int r = 0; r < rounds; r++) {
        double round[NBLOCKS] = {0};
        for (int j = 0; j < NBLOCKS; j++) {
            int k = (j + r) % NBLOCKS;
            if (!bn->run[k])
                continue;
            float *sp_act = NULL;
            PMPI_Barrier(bn->comm);
            double t0 = PMPI_Wtime();
            forward(bn, k, b->w, b->fl, b->t_lo, b->act, &sp_act, bn->comm);
            backward(bn, k, b->w, b->dw, b->fl, b->t_lo, b->act, sp_act, bn->comm);
            round[k] = PMPI_Wtime() - t0;
        }
        PMPI_Allreduce(MPI_IN_PLACE, round, NBLOCKS, MPI_DOUBLE, MPI_MAX, bn->comm);
        for (int k = 0; k < NBLOCKS; k++)
            per_round[(size_t)k * rounds + r] = round[k];
    }
    for (int k = 0; k < NBLOCKS; k++) {
        if (!bn->run[k])
            continue;
        double *v = per_round + (size_t)k * rounds;
        double median = xt_sort_median(v, rounds);
        xt_printf_root(bn->comm, "ROW %s %.9e %.9e %.9e %d\n", block_name[k], median, v[0],
                       v[rounds - 1], rounds);
    }
    free(per_round);
}

int main(int argc, char **argv)
{
    xt_steady_allocator(); /* backward mallocs its scratch at every call */
    xt_init(&argc, &argv);
    xt_strict_send(0); /* measure the code, not the grader's deadlock detector */

    bench bn = {.comm = MPI_COMM_WORLD};
    block *b = &bn.b;
    PMPI_Comm_rank(bn.comm, &bn.rank);
    PMPI_Comm_size(bn.comm, &bn.np);
    b->T = (int)xt_arg_int("T", 512);
    b->d = (int)xt_arg_int("d", 512);
    b->ff = (int)xt_arg_int("ff", 1408);
    bn.tol = xt_arg_double("tol", 1e-4);
    int rounds = (int)xt_arg_int("rounds", 7); /* 0: no timing */
    int warmup = (int)xt_arg_int("warmup", 1);
    double limit = xt_arg_double("limit", 300.0); /* watchdog for the whole launch */
    const char *chosen = xt_arg_str("blocks", "mlp,seqpar");
    if (b->T < 1 || b->d < 1 || b->ff < 1 || rounds < 0 || warmup < 0)
        xt_die("need --T, --d, --ff >= 1 and --rounds, --warmup >= 0");
    for (int k = 0; k < NBLOCKS; k++)
        bn.run[k] = strstr(chosen, block_name[k]) != NULL;
    xt_block(b->T, bn.np, bn.rank, &b->t_lo, &b->tl);
    xt_block(b->ff, bn.np, bn.rank, &b->f_lo, &b->fl);
    long flr[2], tlr[2];
    minmax(bn.comm, b->fl, flr);
    minmax(bn.comm, b->tl, tlr);
    xt_printf_root(bn.comm,
                   "INFO np %d\nINFO T %d\nINFO d %d\nINFO ff %d\nINFO ff_local %ld..%ld\n"
                   "INFO T_local %ld..%ld\nINFO tolerance %.3g\n",
                   bn.np, b->T, b->d, b->ff, flr[0], flr[1], tlr[0], tlr[1], bn.tol);

    int linked[NBLOCKS] = {mlp_tp_forward && mlp_tp_backward, seqpar_forward && seqpar_backward};
    int any = 0;
    for (int k = 0; k < NBLOCKS; k++) {
        if (bn.run[k] && !linked[k]) {
            xt_printf_root(bn.comm, "SKIP %s: %s is not in this build\n", block_name[k],
                           block_file[k]);
            bn.run[k] = 0;
        }
        any |= bn.run[k];
    }
    if (!any) {
        xt_printf_root(bn.comm, "SKIP no block to run\n");
        xt_finalize();
        return 0;
    }
    xt_watchdog_arm(limit);

    /* The same whole inputs and weights on every rank (not counted memory). */
    size_t td = (size_t)b->T * b->d, dff = (size_t)b->d * b->ff;
    xt_rng g = xt_rng_seed(2026);
    b->x = xt_malloc(sizeof(float) * td);
    b->dy = xt_malloc(sizeof(float) * td);
    b->gamma = xt_malloc(sizeof(float) * (size_t)b->d);
    b->wg = xt_malloc(sizeof(float) * dff);
    b->wu = xt_malloc(sizeof(float) * dff);
    b->wd = xt_malloc(sizeof(float) * dff);
    float sw = 1.0f / sqrtf((float)b->d), sd = 1.0f / sqrtf((float)b->ff);
    xt_rng_fill_uniform(&g, b->x, (long)td, -1.0f, 1.0f);
    xt_rng_fill_uniform(&g, b->dy, (long)td, -1.0f, 1.0f);
    xt_rng_fill_uniform(&g, b->gamma, b->d, 0.5f, 1.5f);
    xt_rng_fill_uniform(&g, b->wg, (long)dff, -sw, sw);
    xt_rng_fill_uniform(&g, b->wu, (long)dff, -sw, sw);
    xt_rng_fill_uniform(&g, b->wd, (long)dff, -sd, sd);
    size_t nw = 3 * (size_t)b->d * b->fl + 1;
    b->w = xt_malloc(sizeof(float) * nw);
    b->dw = xt_malloc(sizeof(float) * nw);
    cut(b, b->w, b->fl, b->f_lo);
    b->y = xt_malloc(sizeof(float) * td);
    b->dx = xt_malloc(sizeof(float) * td);
    b->dgamma = xt_malloc(sizeof(float) * (size_t)b->d);

    for (int k = 0; k < NBLOCKS; k++) {
        if (!bn.run[k])
            continue;
        if (k == MLP)
            b->act = xt_alloc(XT_MEM_ACTIVATIONS,
                              sizeof(float) * (b->fl ? 3 * (size_t)b->T * b->fl : 1));
        measure(&bn, k);
    }
    if (rounds > 0)
        run_timing(&bn, warmup, rounds);
    xt_watchdog_arm(0);

    if (b->act)
        xt_free(b->act);
    float *bufs[] = {b->x, b->dy, b->gamma, b->wg, b->wu,    b->wd,
                     b->w, b->dw, b->y,     b->dx, b->dgamma};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        free(bufs[i]);
    xt_finalize();
    return 0;
}
