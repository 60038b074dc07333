/*
 * The driver of lc3_zero/distributed_adam.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_train_case d = xt_train_case_begin(c);
    dp_adam s = {0};
    dp_adam_init(&s, &d.model, d.comm);
    xt_mem_reset_peak(); /* the peaks the grader checks are the training steps' */
    for (int step = 0; step < d.steps; step++) {
        float loss = dp_adam_step(&s, &d.model, xt_train_case_x(&d, step),
                                  xt_train_case_target(&d, step), d.rows, &d.adam, d.comm);
        xt_train_case_output(&d, step);
        xt_train_case_loss(&d, step, loss);
    }
    dp_adam_free(&s);
    xt_train_case_end(&d);
}

static void demo(MPI_Comm comm)
{
    xt_train_demo d = xt_train_demo_begin(comm, "16,64,64,64,64,4");
    xt_train_demo_use_adam(&d);
    dp_adam s = {0};
    dp_adam_init(&s, &d.model, comm);
    xt_mem_reset_peak();
    for (int step = 0; step < d.steps; step++) {
        float loss = dp_adam_step(&s, &d.model, xt_train_demo_x(&d, step),
                                  xt_train_demo_target(&d, step), d.rows, &d.adam, comm);
        xt_train_demo_report(&d, step, loss);
    }
    xt_mem_print(comm, "memory of the training steps");
    dp_adam_free(&s);
    xt_train_demo_end(&d);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
