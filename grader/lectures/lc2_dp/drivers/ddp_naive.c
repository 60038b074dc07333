/*
 * The driver of lc2_dp/ddp_naive.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_train_case d = xt_train_case_begin(c);
    broadcast_parameters(&d.model, d.comm);
    for (int s = 0; s < d.steps; s++) {
        float loss = ddp_naive_step(&d.model, xt_train_case_x(&d, s), xt_train_case_target(&d, s),
                                    d.rows, d.lr, d.comm);
        xt_train_case_output(&d, s);
        xt_train_case_loss(&d, s, loss);
    }
    xt_train_case_end(&d);
}

static void demo(MPI_Comm comm)
{
    xt_train_demo d = xt_train_demo_begin(comm, "8,32,32,4");
    broadcast_parameters(&d.model, comm);
    for (int s = 0; s < d.steps; s++) {
        float loss = ddp_naive_step(&d.model, xt_train_demo_x(&d, s), xt_train_demo_target(&d, s),
                                    d.rows, d.lr, comm);
        xt_train_demo_report(&d, s, loss);
    }
    xt_train_demo_end(&d);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
