/*
 * The driver of lc2_dp/distributed_sampler.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/*
 * Case mode: parameters n, epochs, seed, shuffle, drop_last. For each epoch
 * e = 0 .. epochs-1 the output `epoch<e>` holds the indices returned, as
 * many as distributed_sampler said.
 */
static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int np;
    MPI_Comm_size(comm, &np);
    long n = xt_case_int(c, "n"), epochs = xt_case_int(c, "epochs");
    uint64_t seed = strtoull(xt_case_str(c, "seed"), NULL, 10);
    int shuffle = (int)xt_case_int(c, "shuffle"), drop_last = (int)xt_case_int(c, "drop_last");
    long room = (n + np - 1) / np > 0 ? (n + np - 1) / np : 1;
    for (long e = 0; e < epochs; e++) {
        char name[32];
        snprintf(name, sizeof name, "epoch%ld", e);
        long *indices = xt_case_alloc(c, name, room, XT_I64);
        long got = distributed_sampler(n, e, seed, shuffle, drop_last, comm, indices);
        if (got < 0 || got > room) {
            xt_case_note(c,
                         "distributed_sampler returned %ld in epoch %ld, but a rank gets at "
                         "most ceil(n/np) = %ld indices (and never fewer than 0)",
                         got, e, (n + np - 1) / np);
            return;
        }
        xt_case_output(c, name, indices, XT_I64, got);
    }
}

/*
 * "[a b c | d e]": values v[0..count), " |" before position `bar` (none if
 * bar >= count), '*' after those whose position first + i * step is >= n,
 * the middle elided when the list is long.
 */
static void driver_format_list(char *out, size_t cap, const long *v, long count, long bar,
                               long first, long step, long n)
{
    size_t len = (size_t)snprintf(out, cap, "[");
    long head = 8, tail = count - 4 < bar - 2 ? count - 4 : bar - 2;
    if (tail < head)
        tail = head;
    for (long i = 0; i < count && len < cap; i++) {
        if (count > 14 && i == head && i < tail) {
            len += (size_t)snprintf(out + len, cap - len, " ...");
            i = tail - 1;
            continue;
        }
        const char *sep = i == 0 ? "" : i == bar ? " | " : " ";
        const char *star = first + i * step >= n ? "*" : "";
        len += (size_t)snprintf(out + len, cap - len, "%s%ld%s", sep, v[i], star);
    }
    if (len < cap)
        snprintf(out + len, cap - len, "]");
}

/*
 * Each epoch: the order (the sampler on one rank), the ranks' lists put back
 * together in position order, so that the padding or the cut shows, and each
 * rank's own list. Options: --n 10 --epochs 2 --shuffle 1 --drop_last 0 --seed 1234.
 */
static void demo(MPI_Comm comm)
{
    int rank, np;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &np);
    long n = xt_arg_int("n", 10), epochs = xt_arg_int("epochs", 2);
    int shuffle = (int)xt_arg_int("shuffle", 1), drop_last = (int)xt_arg_int("drop_last", 0);
    uint64_t seed = (uint64_t)xt_arg_int("seed", 1234);
    XT_CHECK(n >= 0 && epochs >= 0, "--n and --epochs must not be negative");
    long room = n / np + 1;
    long *mine = xt_malloc(sizeof(long) * (size_t)room);
    long *order = xt_malloc(sizeof(long) * (size_t)(n + 1));
    long *all = xt_malloc(sizeof(long) * (size_t)(room * np));
    long *global = xt_malloc(sizeof(long) * (size_t)(room * np));
    int *counts = xt_malloc(sizeof(int) * (size_t)np),
        *displs = xt_malloc(sizeof(int) * (size_t)np);
    char text[1024];
    if (rank == 0)
        printf("n=%ld np=%d shuffle=%d drop_last=%d seed=%llu ('*': padding, a repeat)\n", n, np,
               shuffle, drop_last, (unsigned long long)seed);
    for (long e = 0; e < epochs; e++) {
        long got = distributed_sampler(n, e, seed, shuffle, drop_last, comm, mine);
        int cnt = (int)got;
        MPI_Gather(&cnt, 1, MPI_INT, counts, 1, MPI_INT, 0, comm);
        if (rank == 0)
            for (int r = 0; r < np; r++)
                displs[r] = r == 0 ? 0 : displs[r - 1] + counts[r - 1];
        MPI_Gatherv(mine, cnt, MPI_LONG, all, counts, displs, MPI_LONG, 0, comm);
        if (rank == 0) {
            long full = distributed_sampler(n, e, seed, shuffle, 0, MPI_COMM_SELF, order);
            driver_format_list(text, sizeof text, order, full, full, 0, 1, n);
            int w = snprintf(NULL, 0, "epoch %ld", e);
            printf("epoch %ld order:  %s\n", e, text);
            /* Entry i of rank r sits at position r + i np of the global list. */
            long total = 0;
            for (long k = 0; k < room * np; k++)
                global[k] = -1;
            for (int r = 0; r < np; r++)
                for (long i = 0; i < counts[r]; i++) {
                    long pos = r + i * np;
                    if (pos < room * np) {
                        global[pos] = all[displs[r] + i];
                        total = pos + 1 > total ? pos + 1 : total;
                    }
                }
            driver_format_list(text, sizeof text, global, total, n, 0, 1, n);
            if (total >= n)
                printf("%*s padded: %s  %d x %d, %ld padding\n", w, "", text, counts[0], np,
                       total - n);
            else
                printf("%*s cut:    %s  %d x %d, %ld dropped\n", w, "", text, counts[0], np,
                       n - total);
        }
        driver_format_list(text, sizeof text, mine, got, got, rank, np, n);
        xt_printf_ordered(comm, "epoch %ld: %s\n", e, text);
    }
    free(mine);
    free(order);
    free(all);
    free(global);
    free(counts);
    free(displs);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
