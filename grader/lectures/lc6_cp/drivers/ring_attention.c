/*
 * The driver of lc6_cp/ring_attention.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    cp_attention_case(c, "ring_attention_forward", ring_attention_forward, ring_attention_backward);
}

/*
 * T = 2 np tokens (two per rank), 2 query heads sharing 1 KV head of 4
 * dimensions: the ring's steps as a table (what each rank holds and does),
 * then what each rank's blocks computed, and the comparison with one process.
 */
static void demo(MPI_Comm comm)
{
    enum { C = 2, HQ = 2, HKV = 1, HD = 4 };
    int np;
    MPI_Comm_size(comm, &np);
    xt_printf_root(comm,
                   "causal ring attention: T = %d tokens, %d per rank; %d query heads, "
                   "%d KV head, hd %d\nat step s rank r holds the K/V block of rank r-s\n\n",
                   C * np, C, HQ, HKV, HD);
    if (np <= 8) {
        char line[160];
        int at = snprintf(line, sizeof line, "step ");
        for (int r = 0; r < np; r++)
            at += snprintf(line + at, sizeof line - (size_t)at, "  r%-9d", r);
        while (at > 0 && line[at - 1] == ' ')
            line[--at] = '\0';
        xt_printf_root(comm, "%s\n", line);
        for (int s = 0; s < np; s++) {
            at = snprintf(line, sizeof line, "%4d ", s);
            for (int r = 0; r < np; r++) {
                int src = (r - s + np) % np;
                at += snprintf(line + at, sizeof line - (size_t)at, "  KV%d %-6s", src,
                               src == r  ? "causal"
                               : src < r ? "full"
                                         : "skip");
            }
            while (at > 0 && line[at - 1] == ' ')
                line[--at] = '\0';
            xt_printf_root(comm, "%s\n", line);
        }
        xt_printf_root(comm,
                       "forward: %d K/V sends per rank (none at the last step); backward: "
                       "%d K/V\nand %d dK/dV sends (the last brings them home)\n",
                       np - 1, np - 1, np);
    }
    cp_attention_demo(comm, "contiguous", C * np, HQ, HKV, HD, ring_attention_forward,
                      ring_attention_backward);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
