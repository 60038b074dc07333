/*
 * The driver of lc1_basic/group.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int np;
    MPI_Comm_size(comm, &np);
    if (xt_case_is(c, "make_half")) {
        int *members = xt_case_alloc(c, "members", np, XT_I32);
        MPI_Comm half = make_half(comm, members);
        if (half == MPI_COMM_NULL) {
            xt_case_note(c, "got MPI_COMM_NULL: every rank belongs to one half");
            return;
        }
        int where[2]; /* rank in the half, size of the half */
        MPI_Comm_rank(half, &where[0]);
        MPI_Comm_size(half, &where[1]);
        xt_case_output(c, "half", where, XT_I32, 2);
        xt_case_output(c, "members", members, XT_I32, where[1]);
        MPI_Comm_free(&half);
        return;
    }
    xt_array x = xt_case_input_const(c, "x");
    double *lo = xt_case_alloc(c, "lo", x.count, XT_F64);
    double *hi = xt_case_alloc(c, "hi", x.count, XT_F64);
    group_sums(x.data, (int)x.count, comm, lo, hi);
    xt_case_output(c, "lo", lo, XT_F64, x.count);
    xt_case_output(c, "hi", hi, XT_F64, x.count);
}

/* Rank r holds x = (r, 10 r); the low half's sums are small, the high half's large. */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int *members = xt_malloc(sizeof(int) * (size_t)np), n;
    MPI_Comm half = make_half(comm, members);
    MPI_Comm_size(half, &n);
    char text[128];
    xt_format_buffer(text, sizeof text, members, n, MPI_INT);
    xt_printf_ordered(comm, "%s half, its ranks in comm: %s", members[0] == 0 ? "low " : "high",
                      text);
    MPI_Comm_free(&half);
    free(members);
    double x[2] = {rank, 10.0 * rank}, lo[2], hi[2];
    xt_print_buffer_ordered(comm, "x:  ", x, 2, MPI_DOUBLE);
    group_sums(x, 2, comm, lo, hi);
    char lo_text[64], hi_text[64];
    xt_format_buffer(lo_text, sizeof lo_text, lo, 2, MPI_DOUBLE);
    xt_format_buffer(hi_text, sizeof hi_text, hi, 2, MPI_DOUBLE);
    xt_printf_ordered(comm, "lo: %s  hi: %s", lo_text, hi_text);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
