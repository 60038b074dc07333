/*
 * The driver of lc6_cp/allgather_kv_attention.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include <stdio.h>

static void run_case(xt_case *c)
{
    cp_attention_case(c, "allgather_kv_forward", allgather_kv_forward, allgather_kv_backward);
}

/*
 * T = 2 np c' positions (c' = 2), 4 query heads reading 1 KV head of 4 dimensions: what
 * each rank's two chunks attend to after the all-gather and what the collectives move, then
 * the pairs each rank's blocks computed and the comparison with one process.
 */
static void demo(MPI_Comm comm)
{
    enum { CHUNK = 2, HQ = 4, HKV = 1, HD = 4 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int c = 2 * CHUNK, T = np * c;
    xt_printf_root(comm,
                   "T = %d in %d chunks of %d; rank r holds chunks r and %d-r; K and V: %d of "
                   "%d heads\n",
                   T, 2 * np, CHUNK, 2 * np - 1, HKV, HQ);
    char line[160];
    int at = 0;
    for (int i = 0; i < 2; i++) {
        int chunk = i == 0 ? rank : 2 * np - 1 - rank;
        at += snprintf(line + at, sizeof line - (size_t)at, "%sq%d x k0..k%d", i ? ";  " : "",
                       chunk, chunk);
    }
    xt_printf_ordered(comm, "%s (the last causal)\n", line);
    xt_printf_root(comm,
                   "forward: 2 all-gathers of %d floats a rank (K, V); backward: the same 2 "
                   "and\n2 reduce-scatters of %d floats (dK, dV)\n",
                   c * HKV * HD, T * HKV * HD);
    cp_attention_demo(comm, "zigzag", T, HQ, HKV, HD, allgather_kv_forward, allgather_kv_backward);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
