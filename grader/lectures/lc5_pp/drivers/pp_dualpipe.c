/*
 * The driver of lc5_pp/pp_dualpipe.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_stage *chunks[2];
    pp_case_stages(c, chunks, 2);
    xt_array x = xt_case_input_const(c, "x"), target = xt_case_input_const(c, "target");
    int rank, np;
    MPI_Comm_rank(xt_case_comm(c), &rank);
    MPI_Comm_size(xt_case_comm(c), &np);
    int ends = rank == 0 || rank == np - 1;
    float loss =
        pp_dualpipe_step(chunks, ends ? x.data : NULL, ends ? target.data : NULL,
                         (int)xt_case_int(c, "mb_rows"), (int)xt_case_int(c, "M"), xt_case_comm(c));
    if (ends)
        xt_case_output(c, "loss", &loss, XT_F32, 1);
    pp_case_done(c, chunks, 2);
}

/* The demo's layout: chunk 0 is stage r, chunk 1 stage np-1-r. */
static int driver_stage_of(int chunk, int rank, int np)
{
    return chunk ? np - 1 - rank : rank;
}

static float driver_step(xt_stage **stages, int nchunks, const float *x, const float *target,
                         int mb_rows, int M, MPI_Comm comm)
{
    (void)nchunks;
    return pp_dualpipe_step(stages, x, target, mb_rows, M, comm);
}

/* 2 np + 2 micro-batches; make demo draws the timeline from the stage log. */
static void demo(MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    pp_demo(comm, "DualPipe", 2 * np + 2, np, 2, driver_stage_of, driver_step);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
