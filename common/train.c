/*
 * train.c: the harness around the training exercises (xt_nn.h): reading the
 * grader's case, and the demo with its single-process twin and its check
 * that the replicas agree (xt_ranks_differing).
 * Communication here goes through PMPI, so it never shows in a program's
 * counters or trace: those stay the student's own.
 */
#include "xt_internal.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void model_from_names(xt_mlp *m, const char *dims, const char *act, const char *loss)
{
    xt_act a;
    xt_loss l;
    XT_CHECK(xt_act_from_name(act, &a), "unknown activation \"%s\" (relu, gelu)", act);
    XT_CHECK(xt_loss_from_name(loss, &l), "unknown loss \"%s\" (mse, ce)", loss);
    xt_mlp_init_str(m, dims, a, l);
}

static size_t target_bytes(const xt_mlp *m) /* one sample's */
{
    return m->loss == XT_MSE ? sizeof(float) * (size_t)m->dims[m->nlayers] : sizeof(int32_t);
}

/* FNV-1a over the weights' bits: equal hashes, (almost surely) equal weights. */
static unsigned weights_hash(const float *params, long n)
{
    const unsigned char *p = (const unsigned char *)params;
    unsigned h = 2166136261u;
    for (size_t i = 0; p && i < sizeof(float) * (size_t)n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

int xt_ranks_differing(MPI_Comm comm, const void *buf, size_t bytes)
{
    XT_CHECK(bytes <= INT_MAX, "xt_ranks_differing: %zu bytes is more than one message holds",
             bytes);
    unsigned char *theirs = xt_malloc(bytes + 1);
    memcpy(theirs, buf, bytes);
    PMPI_Bcast(theirs, (int)bytes, MPI_BYTE, 0, comm);
    int differs = memcmp(theirs, buf, bytes) != 0, ndiffer = 0;
    free(theirs);
    PMPI_Allreduce(&differs, &ndiffer, 1, MPI_INT, MPI_SUM, comm);
    return ndiffer;
}

/* --------------------------------------------------------------- case mode */

xt_train_case xt_train_case_begin(xt_case *c)
{
    xt_train_case t = {.c = c, .comm = xt_case_comm(c)};
    model_from_names(&t.model, xt_case_str(c, "dims"), xt_case_str(c, "act"),
                     xt_case_str(c, "loss"));
    t.steps = (int)xt_case_int(c, "steps");
    t.lr = (float)atof(xt_case_str(c, "lr"));
    t.adam = (xt_adam){.lr = t.lr, .beta1 = 0.9f, .beta2 = 0.999f, .eps = 1e-8f};
    if (xt_case_has(c, "beta1")) {
        t.adam.beta1 = (float)atof(xt_case_str(c, "beta1"));
        t.adam.beta2 = (float)atof(xt_case_str(c, "beta2"));
        t.adam.eps = (float)atof(xt_case_str(c, "eps"));
        t.adam.weight_decay = (float)atof(xt_case_str(c, "wd"));
    }
    t.x = xt_case_input_const(c, "x");
    t.y = xt_case_input_const(c, "y");
    xt_array w0 = xt_case_input_const(c, "w0");
    XT_CHECK(w0.count == t.model.nparams && w0.dtype == XT_F32,
             "w0 holds %ld values, the model %s has %ld parameters", w0.count,
             xt_case_str(c, "dims"), t.model.nparams);
    memcpy(t.model.params, w0.data, sizeof(float) * (size_t)w0.count);
    long din = t.model.dims[0];
    t.rows = t.steps > 0 ? (int)(t.x.count / ((long)t.steps * din)) : 0;
    XT_CHECK((long)t.steps * t.rows * din == t.x.count, "x does not hold %d steps of %ld-wide rows",
             t.steps, din);
    return t;
}

const float *xt_train_case_x(const xt_train_case *t, int step)
{
    return (const float *)t->x.data + (long)step * t->rows * t->model.dims[0];
}

const void *xt_train_case_target(const xt_train_case *t, int step)
{
    return xt_mlp_target_at(&t->model, t->y.data, (long)step * t->rows);
}

void xt_train_case_output(xt_train_case *t, int step)
{
    for (int i = 0; i < t->model.ntensors; i++) {
        const xt_tensor *v = &t->model.tensor[i];
        char name[64];
        snprintf(name, sizeof name, "step%d_%s", step + 1, v->name);
        xt_case_output(t->c, name, t->model.params + v->offset, XT_F32, v->count);
    }
}

void xt_train_case_loss(xt_train_case *t, int step, float loss)
{
    char name[64];
    snprintf(name, sizeof name, "step%d_loss", step + 1);
    xt_case_output(t->c, name, &loss, XT_F32, 1);
}

/* Rank r's pieces (lo, count) placed into a full, NaN-filled copy on every rank. */
static float *gather_pieces(MPI_Comm comm, long nparams, const float *shard, long lo, long count)
{
    int np;
    PMPI_Comm_size(comm, &np);
    long mine[2] = {lo, count}, *all = xt_malloc(sizeof(long) * 2 * (size_t)np);
    PMPI_Allgather(mine, 2, MPI_LONG, all, 2, MPI_LONG, comm);
    long total = 0;
    for (int r = 0; r < np; r++)
        total += all[2 * r + 1] > 0 ? all[2 * r + 1] : 0;
    float *pieces = xt_malloc(sizeof(float) * (size_t)(total + 1));
    int *counts = xt_malloc(sizeof(int) * (size_t)np),
        *displs = xt_malloc(sizeof(int) * (size_t)np);
    for (int r = 0, at = 0; r < np; r++) {
        counts[r] = all[2 * r + 1] > 0 ? (int)all[2 * r + 1] : 0;
        displs[r] = at;
        at += counts[r];
    }
    PMPI_Allgatherv(shard, count > 0 ? (int)count : 0, MPI_FLOAT, pieces, counts, displs, MPI_FLOAT,
                    comm);
    float *full = xt_malloc(sizeof(float) * (size_t)(nparams + 1));
    char *hits = xt_calloc((size_t)nparams + 1, 1);
    for (int r = 0; r < np; r++)
        for (long i = 0; i < counts[r]; i++) {
            long at = all[2 * r] + i;
            if (at >= 0 && at < nparams && hits[at]++ == 0)
                full[at] = pieces[displs[r] + i];
        }
    for (long i = 0; i < nparams; i++)
        if (hits[i] != 1)
            full[i] = NAN; /* nobody's, or claimed twice */
    free(hits);
    free(all);
    free(pieces);
    free(counts);
    free(displs);
    return full;
}

void xt_train_case_output_shards(xt_train_case *t, int step, const float *shard, long lo,
                                 long count)
{
    float *full = gather_pieces(t->comm, t->model.nparams, shard, lo, count);
    for (int i = 0; i < t->model.ntensors; i++) {
        const xt_tensor *v = &t->model.tensor[i];
        char name[64];
        snprintf(name, sizeof name, "step%d_%s", step + 1, v->name);
        xt_case_output(t->c, name, full + v->offset, XT_F32, v->count);
    }
    free(full);
}

void xt_train_case_end(xt_train_case *t)
{
    xt_mlp_free(&t->model);
}

/* -------------------------------------------------------------------- demo */

xt_train_demo xt_train_demo_begin(MPI_Comm comm, const char *default_dims)
{
    xt_train_demo d = {.comm = comm};
    PMPI_Comm_rank(comm, &d.rank);
    PMPI_Comm_size(comm, &d.np);
    const char *dims = xt_arg_str("dims", default_dims);
    model_from_names(&d.model, dims, xt_arg_str("act", "relu"), xt_arg_str("loss", "ce"));
    d.steps = (int)xt_arg_int("steps", 5);
    d.rows = (int)xt_arg_int("rows", 8);
    d.lr = (float)xt_arg_double("lr", 0.1);
    d.adam = (xt_adam){.lr = d.lr,
                       .beta1 = (float)xt_arg_double("beta1", 0.9),
                       .beta2 = (float)xt_arg_double("beta2", 0.999),
                       .eps = (float)xt_arg_double("eps", 1e-8),
                       .weight_decay = (float)xt_arg_double("wd", 0.0)};
    XT_CHECK(d.steps >= 0 && d.rows >= 1, "--steps must be >= 0 and --rows >= 1");

    /* The same data set on every rank: inputs, and a teacher network's answers. */
    xt_mlp teacher;
    xt_mlp_init(&teacher, d.model.nlayers, d.model.dims, d.model.act, d.model.loss);
    xt_mlp_randomize(&teacher, 99);
    long global = (long)d.steps * d.np * d.rows;
    int din = d.model.dims[0], dout = d.model.dims[d.model.nlayers];
    d.x = xt_malloc(sizeof(float) * (size_t)(global * din + 1));
    d.target = xt_malloc(target_bytes(&d.model) * (size_t)(global + 1));
    xt_rng g = xt_rng_seed(1234);
    xt_rng_fill_uniform(&g, d.x, global * din, -1.0f, 1.0f);
    for (long i = 0; i < global; i++) {
        const float *y = xt_mlp_forward(&teacher, d.x + i * din, 1);
        if (d.model.loss == XT_MSE) {
            memcpy((float *)d.target + i * dout, y, sizeof(float) * (size_t)dout);
        } else {
            int best = 0;
            for (int j = 1; j < dout; j++)
                best = y[j] > y[best] ? j : best;
            ((int32_t *)d.target)[i] = best;
        }
    }
    xt_mlp_free(&teacher);

    /* Each rank starts somewhere else: only a broadcast makes them agree. */
    xt_mlp_randomize(&d.model, 1000 + (uint64_t)d.rank);
    if (d.rank == 0) {
        xti_mem_pause(1); /* the twin is the demo's, not the program's */
        xt_mlp_init(&d.single, d.model.nlayers, d.model.dims, d.model.act, d.model.loss);
        xti_mem_pause(0);
        memcpy(d.single.params, d.model.params, sizeof(float) * (size_t)d.model.nparams);
        printf("MLP %s %s %s, %ld parameters in %d tensors\n%d rows per rank and step\n", dims,
               xt_act_name(d.model.act), xt_loss_name(d.model.loss), d.model.nparams,
               d.model.ntensors, d.rows);
        fflush(stdout);
    }
    xt_printf_ordered(comm, "rows %d..%d of each step's batch; own initial weights, hash %08x\n",
                      d.rank * d.rows, (d.rank + 1) * d.rows - 1,
                      weights_hash(d.model.params, d.model.nparams));
    d.bytes_before = xt_mpi_stats_get(NULL).bytes_sent;
    return d;
}

const float *xt_train_demo_x(const xt_train_demo *d, int step)
{
    return d->x + ((long)step * d->np + d->rank) * d->rows * d->model.dims[0];
}

const void *xt_train_demo_target(const xt_train_demo *d, int step)
{
    return xt_mlp_target_at(&d->model, d->target, ((long)step * d->np + d->rank) * d->rows);
}

void xt_train_demo_use_adam(xt_train_demo *d)
{
    d->adam_twin = 1;
    d->lr = d->adam.lr = (float)xt_arg_double("lr", 0.01); /* Adam's steps are ~lr each */
    if (d->rank == 0) {
        d->twin_m = xt_calloc((size_t)d->model.nparams, sizeof(float));
        d->twin_v = xt_calloc((size_t)d->model.nparams, sizeof(float));
    }
}

void xt_train_demo_gather_shards(xt_train_demo *d, const float *shard, long lo, long count)
{
    free(d->gathered);
    d->gathered = gather_pieces(d->comm, d->model.nparams, shard, lo, count);
}

void xt_train_demo_report(xt_train_demo *d, int step, float local_loss)
{
    float loss = 0.0f;
    PMPI_Reduce(&local_loss, &loss, 1, MPI_FLOAT, MPI_SUM, 0, d->comm);

    /* Which ranks disagree with rank 0, bit for bit. */
    long n = d->model.nparams;
    const float *w = d->model.params ? d->model.params : d->gathered;
    XT_CHECK(w, "xt_train_demo_report: the parameters are sharded; call "
                "xt_train_demo_gather_shards first");
    int ndiffer = xt_ranks_differing(d->comm, w, sizeof(float) * (size_t)n);

    if (d->rank != 0)
        return;
    if (step == 0)
        printf("step  loss (mean of ranks)  max |W - single-process W|  ranks identical\n");
    /* The single-process twin: one step on the whole global batch. */
    xt_mlp *s = &d->single;
    int global_rows = d->np * d->rows;
    xti_mem_pause(1);
    xt_mlp_zero_grad(s);
    xt_mlp_forward(s, d->x + (long)step * global_rows * s->dims[0], global_rows);
    xt_mlp_backward(s, xt_mlp_target_at(s, d->target, (long)step * global_rows), 1.0f, NULL, NULL);
    if (d->adam_twin)
        xt_adam_update(s->params, s->grads, d->twin_m, d->twin_v, n, step + 1, &d->adam);
    else
        xt_sgd(s->params, s->grads, s->nparams, d->lr);
    double gap = 0.0;
    for (long i = 0; i < n; i++)
        gap = fmax(gap, fabs((double)s->params[i] - w[i]));
    xti_mem_pause(0);
    char same[32] = "yes";
    if (ndiffer)
        snprintf(same, sizeof same, "no (%d of %d differ)", ndiffer, d->np);
    printf("%4d  %-20.6f  %-26.2g  %s\n", step + 1, loss / (float)d->np, gap, same);
    fflush(stdout);
}

void xt_train_demo_end(xt_train_demo *d)
{
    xt_printf_ordered(
        d->comm, "final weights hash %08x\n",
        weights_hash(d->model.params ? d->model.params : d->gathered, d->model.nparams));
    xt_mpi_stats after = xt_mpi_stats_get(NULL);
    if (d->rank == 0 && d->steps > 0) {
        /* The collectives a training step makes (one-time broadcasts left out). */
        static const char *const per_step[] = {"MPI_Allreduce",      "MPI_Iallreduce",
                                               "MPI_Reduce_scatter", "MPI_Reduce_scatter_block",
                                               "MPI_Allgather",      "MPI_Allgatherv"};
        printf("rank 0 per step:");
        const char *sep = " ";
        for (size_t i = 0; i < sizeof per_step / sizeof *per_step; i++) {
            long calls = xt_mpi_stats_get(per_step[i]).calls;
            if (calls) {
                printf("%s%g %s", sep, (double)calls / d->steps, per_step[i]);
                sep = ", ";
            }
        }
        printf("%s\nrank 0 bytes in MPI calls per step: %.0f\n", *sep == ' ' ? " none" : "",
               (double)(after.bytes_sent - d->bytes_before) / d->steps);
        xt_mlp_free(&d->single);
    }
    free(d->twin_m);
    free(d->twin_v);
    free(d->gathered);
    xt_mlp_free(&d->model);
    free(d->x);
    free(d->target);
}
