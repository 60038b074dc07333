/*
 * The driver of lc3_zero/adam_zero3.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    xt_train_case d = xt_train_case_begin(c);
    zero3 z = {0};
    zero3_init(&z, &d.model, d.comm);
    xt_mem_reset_peak(); /* the peaks the grader checks are the training steps' */
    for (int step = 0; step < d.steps; step++) {
        float loss = zero3_step(&z, &d.model, xt_train_case_x(&d, step),
                                xt_train_case_target(&d, step), d.rows, &d.adam, d.comm);
        xt_train_case_output_shards(&d, step, z.param, z.lo, z.count);
        xt_train_case_loss(&d, step, loss);
    }
    zero3_free(&z);
    xt_train_case_end(&d);
}

static void demo(MPI_Comm comm)
{
    xt_train_demo d = xt_train_demo_begin(comm, "16,64,64,64,64,4");
    xt_train_demo_use_adam(&d);
    zero3 z = {0};
    zero3_init(&z, &d.model, comm);
    xt_printf_ordered(comm, "shard of %ld: parameters %ld..%ld (%ld)\n", z.shard, z.lo,
                      z.lo + z.count - 1, z.count);
    xt_mem_reset_peak();
    for (int step = 0; step < d.steps; step++) {
        float loss = zero3_step(&z, &d.model, xt_train_demo_x(&d, step),
                                xt_train_demo_target(&d, step), d.rows, &d.adam, comm);
        xt_train_demo_gather_shards(&d, z.param, z.lo, z.count);
        xt_train_demo_report(&d, step, loss);
    }
    xt_mem_print(comm, "memory of the training steps");
    zero3_free(&z);
    xt_train_demo_end(&d);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
