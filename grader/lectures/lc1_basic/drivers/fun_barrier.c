/*
 * The driver of lc1_basic/fun_barrier.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/* Every rank sleeps its own `delay`, then enters the barrier: when did it arrive and leave? */
static void run_case(xt_case *c)
{
    xt_array delay = xt_case_input_const(c, "delay");
    xt_sleep(((const double *)delay.data)[0]);
    double arrive = xt_now();
    barrier_dissemination(xt_case_comm(c));
    double leave = xt_now();
    xt_case_output(c, "arrive", &arrive, XT_F64, 1);
    xt_case_output(c, "leave", &leave, XT_F64, 1);
}

/* Rank r arrives 40 (np-1-r) ms late: rank 0 comes last, and nobody leaves before it. */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    char peers[256] = "", *p = peers;
    for (int d = 1; d < np; d <<= 1)
        p += snprintf(p, (size_t)(peers + sizeof peers - p), " r%d", (rank + d) % np);
    p += snprintf(p, (size_t)(peers + sizeof peers - p), ", hears");
    for (int d = 1; d < np; d <<= 1)
        p += snprintf(p, (size_t)(peers + sizeof peers - p), " r%d", (rank - d + np) % np);
    MPI_Barrier(comm);
    double start = xt_now();
    xt_sleep(0.040 * (np - 1 - rank));
    double arrive = xt_now() - start;
    barrier_dissemination(comm);
    double leave = xt_now() - start;
    xt_printf_ordered(comm, "arrives %6.1f ms, leaves %6.1f ms (signals%s)\n", 1e3 * arrive,
                      1e3 * leave, np > 1 ? peers : " nobody");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
