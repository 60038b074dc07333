/*
 * The driver of lc3_zero/zero_checkpoint.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/* Rank `rank` of a world of `np`: its rows of each step's global batch of B rows. */
static const float *driver_rows_x(const xt_train_case *t, int step, int rank, int np)
{
    return xt_train_case_x(t, step) + (long)rank * (t->rows / np) * t->model.dims[0];
}

static const void *driver_rows_y(const xt_train_case *t, int step, int rank, int np)
{
    return xt_mlp_target_at(&t->model, xt_train_case_target(t, step), (long)rank * (t->rows / np));
}

/* Every tensor of the model as "<prefix>_<name>". */
static void driver_output_params(xt_train_case *t, const char *prefix)
{
    for (int i = 0; i < t->model.ntensors; i++) {
        const xt_tensor *v = &t->model.tensor[i];
        char name[64];
        snprintf(name, sizeof name, "%s_%s", prefix, v->name);
        xt_case_output(t->c, name, t->model.params + v->offset, XT_F32, v->count);
    }
}

/*
 * np = max(save_np, load_np) ranks. Phase 1: ranks 0 .. save_np-1 train
 * steps1 ZeRO-1 steps from rank 0's weights and save. Everything is freed
 * (and in the grader's refusal cases the checkpoint damaged: the load must
 * then stop with an error). Phase 2: load_np ranks in a rotated order (new
 * rank i is case rank (i + 1) % np, so nobody finds its old shard in
 * memory) load, and train the remaining steps. Each step's global batch of
 * `rows` rows is cut in the current world's rank order.
 */
static void run_case(xt_case *c)
{
    xt_train_case t = xt_train_case_begin(c);
    int rank, np;
    MPI_Comm_rank(t.comm, &rank);
    MPI_Comm_size(t.comm, &np);
    int save_np = (int)xt_case_int(c, "save_np"), load_np = (int)xt_case_int(c, "load_np");
    int steps1 = (int)xt_case_int(c, "steps1");
    XT_CHECK(save_np <= np && load_np <= np && t.rows % save_np == 0 && t.rows % load_np == 0,
             "case: %d rows per step cannot be cut for %d and %d ranks", t.rows, save_np, load_np);
    const char *dir = xt_case_scratch_dir(c); /* removed with the grader's run */
    long n = t.model.nparams;
    zero_state z;

    MPI_Comm comm;
    MPI_Comm_split(t.comm, rank < save_np ? 0 : MPI_UNDEFINED, rank, &comm);
    if (comm != MPI_COMM_NULL) {
        zero_state_init(&z, n, comm);
        xt_mlp_pad_params(&t.model, save_np * z.shard);
        MPI_Bcast(t.model.params, (int)n, MPI_FLOAT, 0, comm);
        for (int s = 0; s < steps1; s++) {
            zero1_train_step(&z, &t.model, driver_rows_x(&t, s, rank, save_np),
                             driver_rows_y(&t, s, rank, save_np), t.rows / save_np, &t.adam, comm);
            xt_train_case_output(&t, s);
        }
        xt_case_output(c, "saved_m", z.m, XT_F32, z.count);
        xt_case_output(c, "saved_v", z.v, XT_F32, z.count);
        zero_checkpoint_save(&z, &t.model, dir, comm);
        zero_state_free(&z);
        MPI_Comm_free(&comm);
    }
    memset(t.model.params, 0, xt_alloc_size(t.model.params)); /* nothing carries over */
    MPI_Barrier(t.comm);                                      /* the job ends here and restarts */
    zero_checkpoint_damage(c, dir, n, t.comm); /* only in the cases that test refusal */

    int rank2 = (rank + np - 1) % np;
    MPI_Comm_split(t.comm, rank2 < load_np ? 0 : MPI_UNDEFINED, rank2, &comm);
    if (comm != MPI_COMM_NULL) {
        zero_state_init(&z, n, comm);
        xt_mlp_pad_params(&t.model, load_np * z.shard);
        zero_checkpoint_load(&z, &t.model, dir, comm);
        int64_t step = z.step;
        xt_case_output(c, "loaded_m", z.m, XT_F32, z.count);
        xt_case_output(c, "loaded_v", z.v, XT_F32, z.count);
        xt_case_output(c, "loaded_step", &step, XT_I64, 1);
        driver_output_params(&t, "loaded");
        for (int s = steps1; s < t.steps; s++) {
            zero1_train_step(&z, &t.model, driver_rows_x(&t, s, rank2, load_np),
                             driver_rows_y(&t, s, rank2, load_np), t.rows / load_np, &t.adam, comm);
            xt_train_case_output(&t, s);
        }
        zero_state_free(&z);
        MPI_Comm_free(&comm);
    }
    xt_train_case_end(&t);
}

/* ---------------------------------------------------------------------- demo */

static double driver_max_gap(const float *a, const float *b, long n)
{
    double gap = 0.0;
    for (long i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        gap = d > gap ? d : -d > gap ? -d : gap;
    }
    return gap;
}

/*
 * One ZeRO-1 step of world `comm` on its rows of the step's batch, and the
 * same step of the uninterrupted single-process twin (every rank keeps one:
 * it is small); rank 0 of comm prints the line.
 */
static void driver_demo_step(zero_state *z, xt_mlp *m, const float *x, const int32_t *y, int rows,
                             int step, const xt_adam *h, MPI_Comm comm, xt_mlp *twin, float *tm,
                             float *tv)
{
    int r, np;
    MPI_Comm_rank(comm, &r);
    MPI_Comm_size(comm, &np);
    int din = m->dims[0], mine = rows / np;
    float loss =
        zero1_train_step(z, m, x + (long)r * mine * din, y + (long)r * mine, mine, h, comm);
    float sum = 0.0f;
    MPI_Reduce(&loss, &sum, 1, MPI_FLOAT, MPI_SUM, 0, comm);
    xt_mlp_zero_grad(twin);
    xt_mlp_forward(twin, x, rows);
    xt_mlp_backward(twin, y, 1.0f, NULL, NULL);
    xt_adam_update(twin->params, twin->grads, tm, tv, twin->nparams, step + 1, h);
    xt_printf_root(comm, "%4d  np=%d   %-8.5f  %-11.2g  %ld\n", step + 1, np, sum / (float)np,
                   driver_max_gap(m->params, twin->params, m->nparams), z->step);
}

/* Rank 0: the files of the checkpoint and their sizes. */
static long driver_list_files(const char *dir, int np)
{
    long total = 0;
    for (int q = -1; q < np; q++) {
        char path[4096];
        struct stat sb;
        ckpt_path(path, sizeof path, dir, q);
        long size = stat(path, &sb) == 0 ? (long)sb.st_size : -1;
        printf("  %-12s %6ld B\n", strrchr(path, '/') + 1, size);
        total += size > 0 ? size : 0;
    }
    return total;
}

/*
 * make demo EX=zero_checkpoint NP=4: train 3 steps at np = NP, save, load at
 * np = NP-1 with the ranks rotated, train 3 more, and compare every step
 * with one process that never stopped. Options: --steps1, --steps2, --rows
 * (per step: NP (NP-1) rows times this), --lr, --wd, --dims, and
 * --lose=moments or --lose=step, which damages the loaded state on purpose
 * to show what a checkpoint without it does to training.
 */
static void demo(MPI_Comm world)
{
    int rank, np;
    MPI_Comm_rank(world, &rank);
    MPI_Comm_size(world, &np);
    int save_np = np, load_np = np > 1 ? np - 1 : 1;
    int steps1 = (int)xt_arg_int("steps1", 3), steps2 = (int)xt_arg_int("steps2", 3);
    int rows = save_np * load_np * (int)xt_arg_int("rows", 2); /* per step, both worlds */
    xt_adam h = {.lr = (float)xt_arg_double("lr", 0.03),
                 .beta1 = 0.9f,
                 .beta2 = 0.999f,
                 .eps = 1e-8f,
                 .weight_decay = (float)xt_arg_double("wd", 0.01)};
    xt_mlp m, twin;
    xt_mlp_init_str(&m, xt_arg_str("dims", "8,32,32,4"), XT_RELU, XT_CROSS_ENTROPY);
    long n = m.nparams;
    int din = m.dims[0], steps = steps1 + steps2;

    /*
     * One batch, the same on every rank and at every step: random inputs and
     * labels to learn by heart, so that the loss falls, across the restart too.
     */
    float *x = xt_malloc(sizeof(float) * (size_t)rows * din);
    int32_t *y = xt_malloc(sizeof(int32_t) * (size_t)rows);
    xt_rng g = xt_rng_seed(1234);
    for (long i = 0; i < (long)rows * din; i++)
        x[i] = xt_rng_uniform(&g, -1.0f, 1.0f);
    for (long i = 0; i < rows; i++)
        y[i] = (int32_t)xt_rng_below(&g, (uint64_t)m.dims[m.nlayers]);
    xt_mlp_randomize(&m, 1000 + (uint64_t)rank); /* own weights: the broadcast makes them agree */
    xt_mlp_init(&twin, m.nlayers, m.dims, m.act, m.loss);
    xt_mlp_randomize(&twin, 1000); /* rank 0's: the twin starts where the broadcast does */
    float *tm = xt_calloc((size_t)n, sizeof(float)), *tv = xt_calloc((size_t)n, sizeof(float));

    /*
     * A fresh directory, named by rank 0 (mkdtemp), removed at the end: under
     * build/ when the demo runs from the repository (make demo), so that a
     * run stopped half-way leaves nothing outside it; else under /tmp.
     */
    char dir[256] = "build/zero_checkpoint-XXXXXX";
    if (rank == 0 && !mkdtemp(dir)) {
        snprintf(dir, sizeof dir, "/tmp/zero_checkpoint-XXXXXX");
        XT_CHECK(mkdtemp(dir), "mkdtemp %s: %s", dir, strerror(errno));
    }
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, world);
    xt_printf_root(world,
                   "MLP %s, %ld parameters; AdamW lr %g wd %g; %d rows per step\n"
                   "phase 1: np=%d trains %d steps, saves to %s\n"
                   "phase 2: np=%d (rotated: new rank i is old rank i+1) loads, trains %d\n"
                   "step  world  loss      max|W-twin|  adam step\n",
                   xt_arg_str("dims", "8,32,32,4"), n, h.lr, h.weight_decay, rows, save_np, steps1,
                   dir, load_np, steps2);

    zero_state z;
    MPI_Comm comm;
    MPI_Comm_split(world, rank < save_np ? 0 : MPI_UNDEFINED, rank, &comm);
    if (comm != MPI_COMM_NULL) {
        zero_state_init(&z, n, comm);
        xt_mlp_pad_params(&m, save_np * z.shard);
        MPI_Bcast(m.params, (int)n, MPI_FLOAT, 0, comm);
        for (int s = 0; s < steps1; s++)
            driver_demo_step(&z, &m, x, y, rows, s, &h, comm, &twin, tm, tv);
        zero_checkpoint_save(&z, &m, dir, comm);
        xt_printf_ordered(comm, "old rank %d of %d saved [%ld, %ld)\n", rank, save_np, z.lo,
                          z.lo + z.count);
        zero_state_free(&z);
        MPI_Comm_free(&comm);
    }
    memset(m.params, 0, xt_alloc_size(m.params));
    MPI_Barrier(world);
    if (rank == 0) {
        printf("checkpoint %s:\n", dir);
        long total = driver_list_files(dir, save_np);
        printf("  %ld B in all; the fp32 model alone is %ld B\n", total, 4 * n);
        fflush(stdout);
    }

    int rank2 = (rank + np - 1) % np;
    MPI_Comm_split(world, rank2 < load_np ? 0 : MPI_UNDEFINED, rank2, &comm);
    if (comm != MPI_COMM_NULL) {
        zero_state_init(&z, n, comm);
        xt_mlp_pad_params(&m, load_np * z.shard);
        zero_checkpoint_load(&z, &m, dir, comm);
        /* Which old files cover this rank's new shard (the loader's arithmetic, again). */
        char from[256] = "";
        long old_shard = (n + save_np - 1) / save_np;
        for (int q = 0, k = 0; q < save_np; q++) {
            long qlo = q * old_shard, qhi = qlo + old_shard < n ? qlo + old_shard : n;
            long a = z.lo > qlo ? z.lo : qlo, b = z.lo + z.count < qhi ? z.lo + z.count : qhi;
            if (a < b)
                k += snprintf(from + k, sizeof from - (size_t)k, " shard-%d[%ld,%ld)", q, a, b);
        }
        xt_printf_ordered(comm, "new r%d (was r%d) [%ld,%ld) <-%s\n", rank2, rank, z.lo,
                          z.lo + z.count, z.count ? from : " nothing");
        /* --lose moments|step: what a checkpoint without them does to training. */
        const char *lose = xt_arg_str("lose", "");
        if (strcmp(lose, "moments") == 0) {
            memset(z.m, 0, sizeof(float) * (size_t)z.shard);
            memset(z.v, 0, sizeof(float) * (size_t)z.shard);
        } else if (strcmp(lose, "step") == 0) {
            z.step = 0;
        }
        xt_printf_root(comm, "%s",
                       *lose ? "(--lose: the loaded state is damaged on purpose)\n" : "");
        for (int s = steps1; s < steps; s++)
            driver_demo_step(&z, &m, x, y, rows, s, &h, comm, &twin, tm, tv);
        zero_state_free(&z);
        MPI_Comm_free(&comm);
    }
    MPI_Barrier(world);
    if (rank == 0) {
        for (int q = -1; q < save_np; q++) {
            char path[4096];
            ckpt_path(path, sizeof path, dir, q);
            remove(path);
        }
        rmdir(dir);
        printf("removed %s\n", dir);
    }
    xt_mlp_free(&twin);
    free(tm);
    free(tv);
    xt_mlp_free(&m);
    free(x);
    free(y);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
