/*
 * The driver of lc2_dp/ddp_grad_accum.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_train_case d = xt_train_case_begin(c);
    int micro = (int)xt_case_int(c, "micro");
    MPI_Bcast(d.model.params, (int)d.model.nparams, MPI_FLOAT, 0, d.comm);
    for (int s = 0; s < d.steps; s++) {
        float loss = ddp_accum_step(&d.model, xt_train_case_x(&d, s), xt_train_case_target(&d, s),
                                    d.rows, micro, d.lr, d.comm);
        xt_train_case_output(&d, s);
        xt_train_case_loss(&d, s, loss);
    }
    xt_train_case_end(&d);
}

/* --micro (default 4) micro-batches, which must divide --rows (default 8). */
static void demo(MPI_Comm comm)
{
    xt_train_demo d = xt_train_demo_begin(comm, "8,32,32,4");
    int micro = (int)xt_arg_int("micro", 4);
    XT_CHECK(micro >= 1 && d.rows % micro == 0, "--micro %d must divide --rows %d", micro, d.rows);
    MPI_Bcast(d.model.params, (int)d.model.nparams, MPI_FLOAT, 0, comm);
    for (int s = 0; s < d.steps; s++) {
        float loss = ddp_accum_step(&d.model, xt_train_demo_x(&d, s), xt_train_demo_target(&d, s),
                                    d.rows, micro, d.lr, comm);
        xt_train_demo_report(&d, s, loss);
    }
    xt_train_demo_end(&d);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
