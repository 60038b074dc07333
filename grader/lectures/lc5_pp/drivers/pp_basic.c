/*
 * The driver of lc5_pp/pp_basic.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    if (xt_case_is(c, "pp_layers")) {
        /* Every stage of `stages` stages, for each model size in "nlayers". */
        xt_array ls = xt_case_input_const(c, "nlayers");
        int stages = (int)xt_case_int(c, "stages");
        const int32_t *L = ls.data;
        long n = ls.count * stages;
        int32_t *first = xt_case_alloc(c, "first", n, XT_I32);
        int32_t *count = xt_case_alloc(c, "count", n, XT_I32);
        for (long i = 0; i < ls.count; i++)
            for (int r = 0; r < stages; r++) {
                int f, k;
                pp_layers(L[i], stages, r, &f, &k);
                first[i * stages + r] = f;
                count[i * stages + r] = k;
            }
        xt_case_output(c, "first", first, XT_I32, n);
        xt_case_output(c, "count", count, XT_I32, n);
        return;
    }
    /* pp_basic_step: this rank's stage is the layers pp_layers gives it. */
    MPI_Comm comm = xt_case_comm(c);
    int rank, np, first, count;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int dims[XT_MLP_MAX_LAYERS + 2];
    int nlayers = xt_dims_parse(xt_case_str(c, "dims"), dims);
    pp_layers(nlayers, np, rank, &first, &count);
    int32_t layers[2] = {first, count};
    xt_case_output(c, "layers", layers, XT_I32, 2);
    if (!pp_case_layout_runs(c, first, count))
        return; /* no pipeline to run: the grader reports the layers */
    xt_stage *stage = pp_case_stage(c, first, count, 0);
    xt_array x = xt_case_input_const(c, "x"), target = xt_case_input_const(c, "target");
    float loss =
        pp_basic_step(stage, rank == 0 ? x.data : NULL, rank == np - 1 ? target.data : NULL,
                      (int)xt_case_int(c, "mb_rows"), comm);
    if (rank == np - 1)
        xt_case_output(c, "loss", &loss, XT_F32, 1);
    pp_case_done(c, &stage, 1);
}

/* The demo's schedule: rank r is stage r. */
static int driver_stage_of(int chunk, int rank, int np)
{
    (void)chunk, (void)np;
    return rank;
}

static float driver_step(xt_stage **stages, int nchunks, const float *x, const float *target,
                         int mb_rows, int M, MPI_Comm comm)
{
    (void)nchunks;
    return pp_basic_step(stages[0], x, target, mb_rows * M, comm);
}

/* pp_layers' cut of 10 layers, then one batch through np stages (the timeline from the log). */
static void demo(MPI_Comm comm)
{
    int np, rank, first, count;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    pp_layers(10, np, rank, &first, &count);
    xt_printf_root(comm, "pp_layers: 10 layers over %d stages\n", np);
    xt_printf_ordered(comm, "stage %d: layers %d..%d (%d)\n", rank, first, first + count - 1,
                      count);
    pp_demo(comm, "one batch", 1, np, 1, driver_stage_of, driver_step);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
