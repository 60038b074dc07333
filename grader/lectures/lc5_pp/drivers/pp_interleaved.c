/*
 * The driver of lc5_pp/pp_interleaved.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_stage *chunks[8];
    int v = pp_case_stages(c, chunks, 8);
    xt_array x = xt_case_input_const(c, "x"), target = xt_case_input_const(c, "target");
    int rank, np;
    MPI_Comm_rank(xt_case_comm(c), &rank);
    MPI_Comm_size(xt_case_comm(c), &np);
    float loss = pp_interleaved_step(
        chunks, v, rank == 0 ? x.data : NULL, rank == np - 1 ? target.data : NULL,
        (int)xt_case_int(c, "mb_rows"), (int)xt_case_int(c, "M"), xt_case_comm(c));
    if (rank == np - 1)
        xt_case_output(c, "loss", &loss, XT_F32, 1);
    pp_case_done(c, chunks, v);
}

/* The demo's layout: rank r's chunk k is stage k np + r. */
static int driver_stage_of(int chunk, int rank, int np)
{
    return chunk * np + rank;
}

static float driver_step(xt_stage **stages, int nchunks, const float *x, const float *target,
                         int mb_rows, int M, MPI_Comm comm)
{
    return pp_interleaved_step(stages, nchunks, x, target, mb_rows, M, comm);
}

/* 2 np micro-batches through 2 chunks per rank; make demo draws the timeline. */
static void demo(MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    pp_demo(comm, "interleaved 1F1B", 2 * np, 2 * np, 2, driver_stage_of, driver_step);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
