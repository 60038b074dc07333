/*
 * zero_state.c: lecture 3's kit (kit.h), linked into each of its programs:
 * a ZeRO-1 rank's state and training step, the harness that
 * zero_checkpoint.c trains with while it saves and re-shards the state
 * (adam_zero1.c's step, written once outside the exercise), and the
 * damage that the grader's refusal cases do to a checkpoint. Their
 * communication goes through PMPI so that it never shows in a program's
 * counters or trace: those stay the student's own.
 *
 *     flat params, nparams = 10, np = 4: shard = ceil(10 / 4) = 3
 *
 *       | r0: 0 1 2 | r1: 3 4 5 | r2: 6 7 8 | r3: 9 . . |
 *       lo = rank * shard, count = the parameters of [lo, lo + shard) that
 *       exist: 3 3 3 1 here (0 for a rank wholly past the end)
 */
#include "kit.h"
#include "xt_harness.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void zero_state_init(zero_state *z, long nparams, MPI_Comm comm)
{
    int rank, np;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &np);
    XT_CHECK(nparams >= 1, "zero_state_init: %ld parameters", nparams);
    memset(z, 0, sizeof *z);
    z->nparams = nparams;
    z->shard = (nparams + np - 1) / np;
    z->lo = (long)rank * z->shard;
    long left = nparams - z->lo;
    z->count = left < 0 ? 0 : left < z->shard ? left : z->shard;
    z->step = 0;
    z->m = xt_alloc(XT_MEM_OPTIMIZER, sizeof(float) * (size_t)z->shard);
    z->v = xt_alloc(XT_MEM_OPTIMIZER, sizeof(float) * (size_t)z->shard);
}

void zero_state_free(zero_state *z)
{
    xt_free(z->m);
    xt_free(z->v);
    memset(z, 0, sizeof *z);
}

float zero1_train_step(zero_state *z, xt_mlp *m, const float *x, const void *target, int rows,
                       const xt_adam *h, MPI_Comm comm)
{
    int np;
    PMPI_Comm_size(comm, &np);
    XT_CHECK(m->params && m->grads && m->nparams == z->nparams,
             "zero1_train_step: the model (%ld parameters) does not match the ZeRO state "
             "(%ld)",
             m->nparams, z->nparams);
    XT_CHECK(xt_alloc_size(m->params) >= sizeof(float) * (size_t)(np * z->shard),
             "zero1_train_step: pad the parameters to np * shard = %ld floats first "
             "(xt_mlp_pad_params)",
             np * z->shard);

    xt_mlp_zero_grad(m);
    xt_mlp_forward(m, x, rows);
    float loss = xt_mlp_backward(m, target, 1.0f, NULL, NULL);
    XT_MPI_CHECK(PMPI_Allreduce(MPI_IN_PLACE, m->grads, (int)m->nparams, MPI_FLOAT, MPI_SUM, comm));
    for (long i = 0; i < m->nparams; i++)
        m->grads[i] /= (float)np;
    z->step++;
    if (z->count > 0)
        xt_adam_update(m->params + z->lo, m->grads + z->lo, z->m, z->v, z->count, z->step, h);
    XT_MPI_CHECK(PMPI_Allgather(MPI_IN_PLACE, (int)z->shard, MPI_FLOAT, m->params, (int)z->shard,
                                MPI_FLOAT, comm));
    return loss;
}

/* Writes n bytes at byte `at` of an existing file (stdio: the harness's, not an exercise's). */
static void overwrite(const char *path, long at, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "r+b");
    XT_CHECK(f, "cannot damage %s: %s", path, strerror(errno));
    XT_CHECK(fseek(f, at, SEEK_SET) == 0 && fwrite(bytes, 1, n, f) == n && fclose(f) == 0,
             "cannot damage %s: %s", path, strerror(errno));
}

void zero_checkpoint_damage(xt_case *c, const char *dir, long nparams, MPI_Comm comm)
{
    if (!xt_case_has(c, "damage"))
        return;
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank == 0) {
        const char *how = xt_case_str(c, "damage");
        long save_np = xt_case_int(c, "save_np");
        long shard = (nparams + save_np - 1) / save_np;
        long count = nparams - shard < shard ? nparams - shard : shard; /* old rank 1's */
        XT_CHECK(save_np >= 2 && count >= 1, "case: damage=%s needs an old rank 1 with a shard",
                 how);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir,
                 strcmp(how, "magic") ? "shard-1.bin" : "meta.bin");
        if (strcmp(how, "truncate") == 0) {
            /* header, parameters, m, then half of v */
            off_t size = (off_t)(64 + 4 * (2 * count + count / 2));
            XT_CHECK(truncate(path, size) == 0, "cannot damage %s: %s", path, strerror(errno));
        } else if (strcmp(how, "step") == 0) {
            int64_t step = 0;
            FILE *f = fopen(path, "rb");
            XT_CHECK(f && fseek(f, 48, SEEK_SET) == 0 && fread(&step, 8, 1, f) == 1,
                     "cannot damage %s: no header", path);
            fclose(f);
            step++;
            overwrite(path, 48, &step, 8);
        } else if (strcmp(how, "magic") == 0) {
            const int64_t zero = 0;
            overwrite(path, 0, &zero, 8);
        } else {
            xt_die("case: unknown damage=%s", how);
        }
    }
    XT_MPI_CHECK(PMPI_Barrier(comm));
}
