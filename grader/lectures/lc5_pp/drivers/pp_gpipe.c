/*
 * The driver of lc5_pp/pp_gpipe.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    pp_stage_case(c, pp_gpipe_step);
}

/* Six micro-batches through np stages; make demo draws the timeline from the stage log. */
static void demo(MPI_Comm comm)
{
    pp_stage_demo(comm, "GPipe", 6, pp_gpipe_step);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
