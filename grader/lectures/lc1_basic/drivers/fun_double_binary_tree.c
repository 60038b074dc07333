/*
 * The driver of lc1_basic/fun_double_binary_tree.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include <stdio.h>
#include <stdlib.h>

/* Rank r's links in tree t of n ranks as four ints: parent, the lower child, the higher
 * child (-1 where none, after any child), level. */
static void driver_links_row(int n, int r, int t, int *row)
{
    int kids[2] = {-2, -2};
    row[3] = double_tree_links(n, r, t, &row[0], kids);
    int lo = kids[0] < kids[1] ? kids[0] : kids[1], hi = kids[0] < kids[1] ? kids[1] : kids[0];
    row[1] = lo < 0 ? hi : lo;
    row[2] = lo < 0 ? lo : hi;
}

static void run_case(xt_case *c)
{
    if (xt_case_is(c, "double_tree_links")) {
        int n = (int)xt_case_int(c, "n");
        int *links = xt_case_alloc(c, "links", 2L * n * 4, XT_I32);
        for (int t = 0; t < 2; t++)
            for (int r = 0; r < n; r++)
                driver_links_row(n, r, t, links + ((long)t * n + r) * 4);
        xt_case_output(c, "links", links, XT_I32, 2L * n * 4);
        return;
    }
    xt_array x = xt_case_input(c, "x");
    double_tree_allreduce(x.data, (int)x.count, xt_dtype_mpi(x.dtype), xt_case_op(c),
                          (int)xt_case_int(c, "chunk"), xt_case_comm(c));
    xt_case_output(c, "x", x.data, x.dtype, x.count);
}

/* Both trees, rank by rank; then rank r holds 10 r + i at element i, all-reduced with sum in
 * chunks of --chunk elements (2). */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    int count = (int)xt_arg_int("count", 8), chunk = (int)xt_arg_int("chunk", 2);
    XT_CHECK(count >= 0 && chunk >= 1, "need --count >= 0 and --chunk >= 1");
    char line[256], *p = line, *end = line + sizeof line;
    int interior = 0;
    for (int t = 0; t < 2; t++) {
        int row[4];
        driver_links_row(np, rank, t, row);
        interior += row[1] >= 0;
        p += snprintf(p, (size_t)(end - p), "%stree %d: level %d, up ", t ? " | " : "", t, row[3]);
        p += row[0] < 0 ? snprintf(p, (size_t)(end - p), "-, ")
                        : snprintf(p, (size_t)(end - p), "r%d, ", row[0]);
        p += snprintf(p, (size_t)(end - p), row[1] < 0 ? "a leaf" : "down");
        for (int k = 1; k < 3; k++)
            if (row[k] >= 0)
                p += snprintf(p, (size_t)(end - p), " r%d", row[k]);
    }
    xt_printf_ordered(comm, "%s\n", line);
    int both = 0, any = interior > 1;
    MPI_Allreduce(&any, &both, 1, MPI_INT, MPI_SUM, comm);
    xt_printf_root(comm, "ranks interior in both trees: %d (only rank 0 when np is odd)\n", both);

    int *x = xt_malloc(sizeof(int) * (size_t)(count > 0 ? count : 1));
    xt_demo_sum_fill(comm, x, count);
    xt_print_buffer_ordered(comm, "before: ", x, count, MPI_INT);
    double_tree_allreduce(x, count, MPI_INT, MPI_SUM, chunk, comm);
    xt_print_buffer_ordered(comm, "after:  ", x, count, MPI_INT);
    xt_demo_sum_holds(comm, x, count);
    free(x);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
