/*
 * The driver of lc1_basic/initial.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

/* The ranks in comm of sub's members, in sub's rank order. */
static int32_t *driver_members_in(MPI_Comm sub, MPI_Comm comm, int *n)
{
    MPI_Group sub_group, comm_group;
    MPI_Comm_group(sub, &sub_group);
    MPI_Comm_group(comm, &comm_group);
    MPI_Comm_size(sub, n);
    int *ranks = xt_malloc(sizeof(int) * (size_t)*n * 2);
    for (int i = 0; i < *n; i++)
        ranks[i] = i;
    MPI_Group_translate_ranks(sub_group, *n, ranks, comm_group, ranks + *n);
    int32_t *out = xt_malloc(sizeof(int32_t) * (size_t)*n);
    for (int i = 0; i < *n; i++)
        out[i] = ranks[*n + i];
    free(ranks);
    MPI_Group_free(&sub_group);
    MPI_Group_free(&comm_group);
    return out;
}

/* Outputs: coords = (rank in dp_comm, rank in tp_comm), then both groups as ranks of comm. */
static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    MPI_Comm dp_comm = MPI_COMM_NULL, tp_comm = MPI_COMM_NULL;
    make_mesh_2d((int)xt_case_int(c, "dp"), (int)xt_case_int(c, "tp"), comm, &dp_comm, &tp_comm);
    if (dp_comm == MPI_COMM_NULL || tp_comm == MPI_COMM_NULL) {
        xt_case_note(c, "got MPI_COMM_NULL for %s: every rank belongs to both groups",
                     dp_comm == MPI_COMM_NULL ? "dp_comm" : "tp_comm");
        return;
    }
    int32_t coords[2];
    int rank;
    MPI_Comm_rank(dp_comm, &rank);
    coords[0] = rank;
    MPI_Comm_rank(tp_comm, &rank);
    coords[1] = rank;
    xt_case_output(c, "coords", coords, XT_I32, 2);
    int n;
    int32_t *dp_group = driver_members_in(dp_comm, comm, &n);
    xt_case_output(c, "dp_group", dp_group, XT_I32, n);
    free(dp_group);
    int32_t *tp_group = driver_members_in(tp_comm, comm, &n);
    xt_case_output(c, "tp_group", tp_group, XT_I32, n);
    free(tp_group);
    MPI_Comm_free(&dp_comm);
    MPI_Comm_free(&tp_comm);
}

/* The squarest mesh with dp <= tp, or --dp=N. */
static void demo(MPI_Comm comm)
{
    int np;
    MPI_Comm_size(comm, &np);
    int dp = 1;
    for (int d = 1; d * d <= np; d++)
        if (np % d == 0)
            dp = d;
    dp = (int)xt_arg_int("dp", dp);
    XT_CHECK(dp > 0 && np % dp == 0, "--dp=%d does not divide np=%d", dp, np);
    int tp = np / dp;
    MPI_Comm dp_comm, tp_comm;
    make_mesh_2d(dp, tp, comm, &dp_comm, &tp_comm);
    int dp_rank, tp_rank, n_dp, n_tp;
    MPI_Comm_rank(dp_comm, &dp_rank);
    MPI_Comm_rank(tp_comm, &tp_rank);
    int32_t *dp_group = driver_members_in(dp_comm, comm, &n_dp);
    int32_t *tp_group = driver_members_in(tp_comm, comm, &n_tp);
    char dp_text[64], tp_text[64];
    xt_format_buffer(dp_text, sizeof dp_text, dp_group, n_dp, MPI_INT32_T);
    xt_format_buffer(tp_text, sizeof tp_text, tp_group, n_tp, MPI_INT32_T);
    int rank;
    MPI_Comm_rank(comm, &rank);
    char header[64] = "";
    if (rank == 0)
        snprintf(header, sizeof header, "mesh: dp=%d x tp=%d, rank r at (r / tp, r %% tp)\n", dp,
                 tp);
    xt_printf_ordered(comm, "%sat (%d, %d)  dp group %s  tp group %s", header, dp_rank, tp_rank,
                      dp_text, tp_text);
    free(dp_group);
    free(tp_group);
    MPI_Comm_free(&dp_comm);
    MPI_Comm_free(&tp_comm);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
