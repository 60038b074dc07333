/*
 * The driver of lc5_pp/checkpoint.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_stage *segments[XT_MLP_MAX_LAYERS];
    int nseg = pp_case_stages(c, segments, XT_MLP_MAX_LAYERS);
    xt_array x = xt_case_input_const(c, "x"), target = xt_case_input_const(c, "target");
    float loss =
        checkpoint_step(segments, nseg, x.data, target.data, (int)xt_case_int(c, "mb_rows"));
    xt_case_output(c, "loss", &loss, XT_F32, 1);
    pp_case_done(c, segments, nseg);
}

/* One model cut into 1, 2, 4 and 8 segments, one cut per rank; the timeline from the log. */
static void demo(MPI_Comm comm)
{
    pp_checkpoint_demo(comm, checkpoint_step);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
