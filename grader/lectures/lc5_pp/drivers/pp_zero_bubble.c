/*
 * The driver of lc5_pp/pp_zero_bubble.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    pp_stage_case(c, pp_zero_bubble_step);
}

/* 2 np micro-batches through np stages: the steady state shows; make demo draws the timeline. */
static void demo(MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    pp_stage_demo(comm, "ZB-H1", 2 * np, pp_zero_bubble_step);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
