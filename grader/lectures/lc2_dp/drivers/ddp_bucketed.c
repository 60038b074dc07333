/*
 * The driver of lc2_dp/ddp_bucketed.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_train_case d = xt_train_case_begin(c);
    size_t cap = (size_t)xt_case_int(c, "bucket_bytes");
    MPI_Bcast(d.model.params, (int)d.model.nparams, MPI_FLOAT, 0, d.comm);
    for (int s = 0; s < d.steps; s++) {
        float loss = ddp_bucketed_step(&d.model, xt_train_case_x(&d, s),
                                       xt_train_case_target(&d, s), d.rows, d.lr, cap, d.comm);
        xt_train_case_output(&d, s);
        xt_train_case_loss(&d, s, loss);
    }
    xt_train_case_end(&d);
}

/* --bucket_bytes (default 512): 512 B makes three buckets of the default model. */
static void demo(MPI_Comm comm)
{
    xt_train_demo d = xt_train_demo_begin(comm, "8,32,32,4");
    size_t cap = (size_t)xt_arg_int("bucket_bytes", 512);
    MPI_Bcast(d.model.params, (int)d.model.nparams, MPI_FLOAT, 0, comm);
    for (int s = 0; s < d.steps; s++) {
        xt_trace_begin("step");
        float loss = ddp_bucketed_step(&d.model, xt_train_demo_x(&d, s),
                                       xt_train_demo_target(&d, s), d.rows, d.lr, cap, comm);
        xt_trace_end();
        xt_train_demo_report(&d, s, loss);
    }
    xt_train_demo_end(&d);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
