/*
 * cases.c: lecture 5's case set-up and demo (kit.h).
 */
#include "kit.h"
#include "xt_harness.h" /* xt_act_from_name, xt_loss_from_name */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pp_case_stages(xt_case *c, xt_stage **stages, int max)
{
    xt_array layers = xt_case_input_const(c, "layers");
    XT_CHECK(layers.dtype == XT_I32 && layers.count % 2 == 0 && layers.count / 2 <= max,
             "the case's \"layers\" holds %ld values: (first, count) pairs, at most %d",
             layers.count, max);
    const int32_t *fc = layers.data;
    int n = (int)(layers.count / 2);
    for (int k = 0; k < n; k++)
        stages[k] = pp_case_stage(c, fc[2 * k], fc[2 * k + 1], k);
    return n;
}

void pp_case_done(xt_case *c, xt_stage **stages, int n)
{
    long total = 0;
    for (int k = 0; k < n; k++)
        total += xt_stage_nparams(stages[k]);
    float *grads = xt_case_alloc(c, "grads", total, XT_F32);
    int32_t *forwards = xt_case_alloc(c, "forwards", n, XT_I32);
    long at = 0;
    for (int k = 0; k < n; k++) {
        memcpy(grads + at, xt_stage_grads(stages[k]),
               sizeof(float) * (size_t)xt_stage_nparams(stages[k]));
        at += xt_stage_nparams(stages[k]);
        forwards[k] = (int32_t)xt_stage_forwards(stages[k]);
        xt_stage_free(stages[k]);
        stages[k] = NULL;
    }
    xt_case_output(c, "grads", grads, XT_F32, total);
    xt_case_output(c, "forwards", forwards, XT_I32, n);
}

/* ------------------------------------------------------------------- the demo */

void pp_demo(MPI_Comm comm, const char *schedule, int M, int nstages, int chunks,
             int (*stage_of)(int chunk, int rank, int np), pp_step step)
{
    enum { MB_ROWS = 2, LAYERS_PER_STAGE = 2, IN = 6, HIDDEN = 8, OUT = 4 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    XT_CHECK(chunks >= 1 && chunks <= 8, "pp_demo: %d chunks per rank", chunks);
    int nlayers = LAYERS_PER_STAGE * nstages, rows = M * MB_ROWS;
    XT_CHECK(nlayers <= XT_MLP_MAX_LAYERS,
             "pp_demo: %d stages of %d layers is more "
             "than a model's %d layers",
             nstages, LAYERS_PER_STAGE, XT_MLP_MAX_LAYERS);
    int dims[XT_MLP_MAX_LAYERS + 1];
    for (int l = 0; l <= nlayers; l++)
        dims[l] = l == 0 ? IN : l == nlayers ? OUT : HIDDEN;
    /* The whole model, the batch and the single process's gradients, the same on every rank. */
    xt_mlp whole;
    xt_mlp_init(&whole, nlayers, dims, XT_RELU, XT_MSE);
    xt_mlp_randomize(&whole, 1);
    xt_rng g = xt_rng_seed(2);
    float *x = malloc(sizeof(float) * (size_t)rows * IN);
    float *target = malloc(sizeof(float) * (size_t)rows * OUT);
    XT_CHECK(x && target, "out of memory for the demo's batch");
    xt_rng_fill_uniform(&g, x, (long)rows * IN, -1.0f, 1.0f);
    xt_rng_fill_uniform(&g, target, (long)rows * OUT, -1.0f, 1.0f);

    xt_stage *stages[8];
    int has_first = 0, has_last = 0;
    for (int k = 0; k < chunks; k++) {
        int s = stage_of(k, rank, np);
        stages[k] =
            xt_stage_new(nlayers, dims, XT_RELU, XT_MSE, LAYERS_PER_STAGE * s, LAYERS_PER_STAGE, k);
        memcpy(xt_stage_params(stages[k]),
               whole.params + xt_mlp_layer_offset(&whole, xt_stage_first(stages[k])),
               sizeof(float) * (size_t)xt_stage_nparams(stages[k]));
        has_first |= s == 0;
        has_last |= s == nstages - 1;
    }
    xt_printf_root(comm, "%s: %d ranks, %d stages of %d layers, M = %d micro-batches of %d rows\n",
                   schedule, np, nstages, LAYERS_PER_STAGE, M, MB_ROWS);
    xt_stage_in_flight_most();
    float loss =
        step(stages, chunks, has_first ? x : NULL, has_last ? target : NULL, MB_ROWS, M, comm);
    int most = xt_stage_in_flight_most();
    char line[256];
    int at = snprintf(line, sizeof line, "stage%s", chunks > 1 ? "s" : "");
    for (int k = 0; k < chunks; k++)
        at += snprintf(line + at, sizeof line - (size_t)at, " %d (layers %d-%d)",
                       stage_of(k, rank, np), xt_stage_first(stages[k]),
                       xt_stage_first(stages[k]) + xt_stage_count(stages[k]) - 1);
    xt_printf_ordered(comm, "%s; at most %d micro-batch%s in flight\n", line, most,
                      most == 1 ? "" : "es");

    xt_mlp_zero_grad(&whole);
    xt_mlp_forward(&whole, x, rows);
    float single_loss = xt_mlp_loss_grad(&whole, target, 1.0f);
    for (int l = nlayers - 1; l >= 0; l--)
        xt_mlp_backward_layer(&whole, l, whole.params + xt_mlp_layer_offset(&whole, l),
                              whole.grads + xt_mlp_layer_offset(&whole, l));

    /* Every copy of every stage against the single process's gradients. */
    double worst = 0.0, scale = 0.0;
    for (long i = 0; i < whole.nparams; i++)
        scale = fabs((double)whole.grads[i]) > scale ? fabs((double)whole.grads[i]) : scale;
    for (int k = 0; k < chunks; k++) {
        const float *want = whole.grads + xt_mlp_layer_offset(&whole, xt_stage_first(stages[k]));
        const float *g = xt_stage_grads(stages[k]);
        for (long i = 0; i < xt_stage_nparams(stages[k]); i++) {
            double d = fabs((double)g[i] - (double)want[i]);
            worst = d > worst ? d : worst;
        }
    }
    MPI_Allreduce(MPI_IN_PLACE, &worst, 1, MPI_DOUBLE, MPI_MAX, comm);
    float last_loss = has_last ? loss : 0.0f;
    MPI_Allreduce(MPI_IN_PLACE, &last_loss, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm,
                   "loss %.6f (one process: %.6f)\n"
                   "gradients agree with one process: %s (max error %.1e)\n",
                   (double)last_loss, (double)single_loss,
                   worst <= 1e-5 * (scale > 1.0 ? scale : 1.0) ? "yes" : "NO", worst);
    for (int k = 0; k < chunks; k++)
        xt_stage_free(stages[k]);
    free(x);
    free(target);
    xt_mlp_free(&whole);
}

/* ------------------------------------------------ a stage of given layers */

xt_stage *pp_case_stage(xt_case *c, int first, int count, int chunk)
{
    int dims[XT_MLP_MAX_LAYERS + 2];
    int nlayers = xt_dims_parse(xt_case_str(c, "dims"), dims);
    xt_act act;
    xt_loss loss;
    XT_CHECK(xt_act_from_name(xt_case_str(c, "act"), &act), "unknown activation \"%s\"",
             xt_case_str(c, "act"));
    XT_CHECK(xt_loss_from_name(xt_case_str(c, "loss"), &loss), "unknown loss \"%s\"",
             xt_case_str(c, "loss"));
    xt_array params = xt_case_input_const(c, "params");
    long offset = 0, total = 0;
    for (int l = 0; l < nlayers; l++) {
        if (l == first)
            offset = total;
        total += (long)dims[l] * dims[l + 1] + dims[l + 1];
    }
    XT_CHECK(params.dtype == XT_F32 && params.count == total,
             "the case's \"params\" holds %ld values, the model %s has %ld", params.count,
             xt_case_str(c, "dims"), total);
    xt_stage *s = xt_stage_new(nlayers, dims, act, loss, first, count, chunk);
    memcpy(xt_stage_params(s), (const float *)params.data + offset,
           sizeof(float) * (size_t)xt_stage_nparams(s));
    return s;
}

int pp_case_layout_runs(xt_case *c, int first, int count)
{
    MPI_Comm comm = xt_case_comm(c);
    int dims[XT_MLP_MAX_LAYERS + 2];
    int nlayers = xt_dims_parse(xt_case_str(c, "dims"), dims);
    int np, mine[2] = {first, count};
    PMPI_Comm_size(comm, &np);
    int *all = malloc(sizeof(int) * 2 * (size_t)np);
    XT_CHECK(all, "out of memory for the ranks' layers");
    XT_MPI_CHECK(PMPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, comm));
    int next = 0;
    for (int r = 0; r < np && next >= 0; r++)
        next = all[2 * r] == next && all[2 * r + 1] >= 1 ? next + all[2 * r + 1] : -1;
    free(all);
    return next == nlayers;
}

/* ------------------------------------------------------- checkpoint's demo */

/* S of xt_nn.h's memory formula: the sum of stage s's layer widths. */
static long widths_sum(const xt_stage *s, const int *dims)
{
    long sum = 0;
    for (int l = xt_stage_first(s); l < xt_stage_first(s) + xt_stage_count(s); l++)
        sum += dims[l + 1];
    return sum;
}

void pp_checkpoint_demo(MPI_Comm comm, pp_checkpoint_step step)
{
    enum { L = 8, ROWS = 4, IN = 6, HIDDEN = 16, OUT = 4 };
    static const int cuts[4] = {1, 2, 4, 8};
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int dims[L + 1];
    for (int l = 0; l <= L; l++)
        dims[l] = l == 0 ? IN : l == L ? OUT : HIDDEN;
    xt_mlp whole;
    xt_mlp_init(&whole, L, dims, XT_RELU, XT_MSE);
    xt_mlp_randomize(&whole, 1);
    xt_rng g = xt_rng_seed(2);
    float x[ROWS * IN], target[ROWS * OUT];
    xt_rng_fill_uniform(&g, x, ROWS * IN, -1.0f, 1.0f);
    xt_rng_fill_uniform(&g, target, ROWS * OUT, -1.0f, 1.0f);

    int nseg = cuts[rank % 4];
    xt_stage *seg[L];
    long saved = 0, one = 0;
    for (int k = 0; k < nseg; k++) {
        int first, count;
        xt_block(L, nseg, k, &first, &count);
        seg[k] = xt_stage_new(L, dims, XT_RELU, XT_MSE, first, count, k);
        memcpy(xt_stage_params(seg[k]), whole.params + xt_mlp_layer_offset(&whole, first),
               sizeof(float) * (size_t)xt_stage_nparams(seg[k]));
        /* The grader's bound: the saved inputs, and what one segment keeps at a time (xt_nn.h:
         * 4 rows (in + 2 S) after its forward, 4 rows S more in its backward, 4 rows out more
         * after the loss). */
        long in = dims[first], S = widths_sum(seg[k], dims), last = k == nseg - 1;
        long keeps = 4L * ROWS * (in + 3 * S + (last ? OUT : 0));
        saved += 4L * ROWS * in;
        one = keeps > one ? keeps : one;
    }
    long S_all = 0;
    for (int l = 1; l <= L; l++)
        S_all += dims[l];
    xt_printf_root(comm,
                   "checkpoint: %d layers (%d -> %d x%d -> %d), %d rows. Without checkpointing "
                   "the step\nkeeps %ld B of activations at its peak and forwards %d layers. "
                   "Rank r cuts the\nmodel into 1, 2, 4, 8 segments:\n",
                   L, IN, HIDDEN, L - 1, OUT, ROWS, 4L * ROWS * (IN + 3 * S_all + OUT), L);
    /* No timeline: make demo's replay draws one pipeline, and these are four separate cuts of
     * one model, which it would take for stages of one pipeline. */
    unsetenv("XT_STAGE_LOG");
    xt_mem_reset_peak();
    float loss = step(seg, nseg, x, target, ROWS);
    size_t peak = xt_mem_peak(XT_MEM_ACTIVATIONS);
    int twice = 1;
    for (int k = 0; k < nseg; k++)
        twice &= xt_stage_forwards(seg[k]) == 2;

    xt_mlp_zero_grad(&whole);
    xt_mlp_forward(&whole, x, ROWS);
    float single_loss = xt_mlp_loss_grad(&whole, target, 1.0f);
    for (int l = L - 1; l >= 0; l--)
        xt_mlp_backward_layer(&whole, l, whole.params + xt_mlp_layer_offset(&whole, l),
                              whole.grads + xt_mlp_layer_offset(&whole, l));
    double worst = fabs((double)loss - (double)single_loss), scale = 1.0;
    for (int k = 0; k < nseg; k++) {
        const float *gk = xt_stage_grads(seg[k]);
        const float *want = whole.grads + xt_mlp_layer_offset(&whole, xt_stage_first(seg[k]));
        for (long i = 0; i < xt_stage_nparams(seg[k]); i++) {
            double d = fabs((double)gk[i] - (double)want[i]);
            worst = d > worst ? d : worst;
            scale = fabs((double)want[i]) > scale ? fabs((double)want[i]) : scale;
        }
    }
    long forwards = 0;
    for (int k = 0; k < nseg; k++)
        forwards += xt_stage_forwards(seg[k]) * xt_stage_count(seg[k]);
    xt_printf_ordered(
        comm, "%d segment%s: peak %4zu B (the grader's bound %4ld B); %ld layer forwards%s\n", nseg,
        nseg == 1 ? " " : "s", peak, saved + one, forwards,
        twice ? "" : " (a segment not forwarded twice)");
    int agree = worst <= 1e-5 * scale;
    MPI_Allreduce(MPI_IN_PLACE, &agree, 1, MPI_INT, MPI_MIN, comm);
    xt_printf_root(comm, "loss %.6f (one process: %.6f); gradients agree with one process: %s\n",
                   (double)loss, (double)single_loss, agree ? "yes" : "NO");
    for (int k = 0; k < nseg; k++)
        xt_stage_free(seg[k]);
    xt_mlp_free(&whole);
}

/* ------------------------------------------------ one stage per rank */

void pp_stage_case(xt_case *c, pp_stage_step step)
{
    xt_stage *stage;
    pp_case_stages(c, &stage, 1);
    xt_array x = xt_case_input_const(c, "x"), target = xt_case_input_const(c, "target");
    int rank, np;
    MPI_Comm_rank(xt_case_comm(c), &rank);
    MPI_Comm_size(xt_case_comm(c), &np);
    float loss = step(stage, rank == 0 ? x.data : NULL, rank == np - 1 ? target.data : NULL,
                      (int)xt_case_int(c, "mb_rows"), (int)xt_case_int(c, "M"), xt_case_comm(c));
    if (rank == np - 1)
        xt_case_output(c, "loss", &loss, XT_F32, 1);
    pp_case_done(c, &stage, 1);
}

static pp_stage_step demo_step; /* pp_stage_demo's, for the adapter below */

static int stage_is_rank(int chunk, int rank, int np)
{
    (void)chunk, (void)np;
    return rank;
}

static float one_stage(xt_stage **stages, int nchunks, const float *x, const float *target,
                       int mb_rows, int M, MPI_Comm comm)
{
    (void)nchunks;
    return demo_step(stages[0], x, target, mb_rows, M, comm);
}

void pp_stage_demo(MPI_Comm comm, const char *schedule, int M, pp_stage_step step)
{
    int np;
    MPI_Comm_size(comm, &np);
    demo_step = step;
    pp_demo(comm, schedule, M, np, 1, stage_is_rank, one_stage);
}
