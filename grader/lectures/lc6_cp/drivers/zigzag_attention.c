/*
 * The driver of lc6_cp/zigzag_attention.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *c)
{
    cp_attention_case(c, "zigzag_attention_forward", zigzag_attention_forward,
                      zigzag_attention_backward);
}

/*
 * T = 2 np c' positions (c' = 2), one head of 4 dimensions: the chunk map,
 * what each rank computes at each step (its own block, or which half of a
 * visiting block), the work per rank against the contiguous layout's, then
 * the pairs each rank's blocks computed and the comparison with one process.
 */
static void demo(MPI_Comm comm)
{
    enum { CHUNK = 2, HD = 4 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int h = CHUNK, c = 2 * h, T = np * c;
    xt_printf_root(comm,
                   "zigzag: T = %d positions in %d chunks of c' = %d; rank r holds chunks"
                   " r and %d-r\n",
                   T, 2 * np, h, 2 * np - 1);
    char line[160];
    xt_printf_root(comm,
                   "\nstep s: rank r holds rank r-s's K/V (%d rows: its two chunks)\n"
                   "  own    its own block, %d x %d, causal mask      (%d pairs)\n"
                   "  lo rj  rj < r: both query chunks x rj's first chunk, %d x %d (%d)\n"
                   "  hi rj  rj > r: the second query chunk x all of rj, %d x %d (%d)\n",
                   c, c, c, c * (c + 1) / 2, c, h, c * h, h, c, h * c);
    int at = snprintf(line, sizeof line, "     ");
    for (int s = 0; s < np && at < 150; s++)
        at += snprintf(line + at, sizeof line - (size_t)at, s + 1 < np ? "s=%-6d" : "s=%d", s);
    xt_printf_root(comm, "%s\n", line);
    at = 0;
    for (int s = 0; s < np && at < 150; s++) {
        int src = (rank - s + np) % np;
        char step[16];
        snprintf(step, sizeof step, s == 0 ? "own" : "%s r%d", src < rank ? "lo" : "hi", src);
        at += snprintf(line + at, sizeof line - (size_t)at, s + 1 < np ? "%-8s" : "%s", step);
    }
    xt_printf_ordered(comm, "%s\n", line);
    long contiguous = (long)rank * c * c + c * (c + 1) / 2;
    xt_printf_root(comm,
                   "\nwork per rank, (query, key) pairs: contiguous r c^2 + c(c+1)/2 (c = %d)"
                   "\nagainst zigzag's c'^2 (2np-1) + c'(c'+1) = %d\n",
                   c, h * h * (2 * np - 1) + h * (h + 1));
    xt_printf_ordered(comm, "contiguous %3ld   zigzag %3d\n", contiguous,
                      h * h * (2 * np - 1) + h * (h + 1));
    cp_attention_demo(comm, "zigzag", T, 1, 1, HD, zigzag_attention_forward,
                      zigzag_attention_backward);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
