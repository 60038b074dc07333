/*
 * The driver of lc5_pp/pp_tied_embedding.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */
#include <stdio.h>

/* This rank's block of the tied matrix as vocab_local x d: E's rows on the first stage, the
 * head's columns transposed on the last (the first when there is one stage). */
static void driver_tied_copy(xt_tp_stage *stage, int vocab_local, int head, float *out)
{
    int d = xt_tp_stage_d(stage);
    long vd = (long)vocab_local * d;
    const float *p = xt_tp_stage_params(stage);
    if (!head) {
        memcpy(out, p, sizeof(float) * (size_t)vd);
        return;
    }
    const float *h = p + xt_tp_stage_nparams(stage) - vd;
    for (int v = 0; v < vocab_local; v++)
        for (int c = 0; c < d; c++)
            out[(long)v * d + c] = h[(long)c * vocab_local + v];
}

/*
 * The case: parallel_3d's (pp_lm_case_read), w0 tied (the head E^T). tied_embedding_group's
 * writes the case ranks of this rank's group ("members", -1 for none); tied_pp_step's runs
 * the steps and writes each step's loss on the last stage, the shard's gradients after step 1
 * ("grads"), its parameters after the last ("params"), and after each step k the tied copies
 * this rank holds as vocab_local x d ("embed<k>" on the first stage, "head<k>" on the last).
 */
static void run_case(xt_case *c)
{
    pp_lm_case lm;
    pp_lm_case_read(c, &lm);
    lm.stage = pp_lm_stage(&lm.model, lm.w0, &lm.mesh, xt_mesh_group(&lm.mesh, "tp"));
    const pp_lm *m = &lm.model;
    MPI_Comm group = tied_embedding_group(&lm.mesh);
    if (xt_case_is(c, "tied_embedding_group")) {
        int *members = xt_case_alloc(c, "members", 2, XT_I32), n = 0;
        members[0] = members[1] = -1;
        if (group != MPI_COMM_NULL) {
            MPI_Group mine, all;
            int ranks[2] = {0, 1};
            MPI_Comm_size(group, &n);
            MPI_Comm_group(group, &mine);
            MPI_Comm_group(xt_case_comm(c), &all);
            MPI_Group_translate_ranks(mine, n < 2 ? n : 2, ranks, all, members);
            MPI_Group_free(&mine);
            MPI_Group_free(&all);
        }
        xt_case_output(c, "members", members, XT_I32, 2);
    } else {
        int lo, vl, tp = xt_mesh_size(&lm.mesh, "tp");
        xt_block(m->vocab, tp, xt_mesh_coord(&lm.mesh, "tp"), &lo, &vl);
        int first = xt_tp_stage_is_first(lm.stage), last = xt_tp_stage_is_last(lm.stage);
        float *copy = xt_malloc(sizeof(float) * (size_t)vl * (size_t)m->shape.d);
        for (int s = 0; s < lm.steps; s++) {
            float loss =
                tied_pp_step(lm.stage, &lm.mesh, group, pp_lm_case_tokens(&lm, s),
                             pp_lm_case_targets(&lm, s), vl, m->seqs, m->T, m->M, &lm.adam);
            pp_lm_case_stepped(c, &lm, s, loss);
            for (int end = 0; end < 2; end++)
                if (end ? last : first) {
                    char name[24];
                    driver_tied_copy(lm.stage, vl, end, copy);
                    snprintf(name, sizeof name, "%s%d", end ? "head" : "embed", s + 1);
                    xt_case_output(c, name, copy, XT_F32, (long)vl * m->shape.d);
                }
        }
        free(copy);
    }
    if (group != MPI_COMM_NULL)
        MPI_Comm_free(&group);
    pp_lm_case_free(c, &lm, !xt_case_is(c, "tied_embedding_group"));
}

/*
 * A three-block decoder (vocab 29, d 8) with its head tied to its embedding, 4 steps of 4
 * sequences in 4 micro-batches on pp = np (dp 1, tp 1): each rank's stage, the embedding
 * group, each step's loss beside one process's tied training, and whether the two copies
 * stayed bit-identical.
 */
static void demo(MPI_Comm comm)
{
    enum { STEPS = 4, MB = 4 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    char description[64];
    snprintf(description, sizeof description, "pp=%d,dp=1,tp=1", np);
    xt_mesh mesh;
    xt_mesh_init(&mesh, description, comm);
    pp_lm m = {29, np < 3 ? 3 : np, 4, 6, MB, {8, 4, 2, 2, 12, 1e-5f}};
    long vd = (long)m.vocab * m.shape.d;
    pp_lm_demo data = pp_lm_demo_new(&m, STEPS, 1);
    xt_adam h = {0.05f, 0.9f, 0.95f, 1e-3f, 0.01f};
    xt_tp_stage *stage = pp_lm_stage(&m, data.w0, &mesh, xt_mesh_group(&mesh, "tp"));
    MPI_Comm group = tied_embedding_group(&mesh);
    int members = 0;
    if (group != MPI_COMM_NULL)
        MPI_Comm_size(group, &members);
    xt_printf_ordered(comm, "stage %d: %sblocks %d-%d%s; embedding group: %s\n", rank,
                      xt_tp_stage_is_first(stage) ? "embedding, " : "", xt_tp_stage_first(stage),
                      xt_tp_stage_first(stage) + xt_tp_stage_count(stage) - 1,
                      xt_tp_stage_is_last(stage) ? ", head" : "",
                      members == 0   ? "none"
                      : members == 1 ? "itself"
                                     : "first and last");
    int first = xt_tp_stage_is_first(stage), last = xt_tp_stage_is_last(stage), same = 1;
    float *mine = malloc(sizeof(float) * (size_t)vd), *other = malloc(sizeof(float) * (size_t)vd);
    for (int s = 0; s < STEPS; s++) {
        long at = (long)s * m.seqs * m.T;
        float loss = tied_pp_step(stage, &mesh, group, first ? data.tokens + at : NULL,
                                  last ? data.targets + at : NULL, m.vocab, m.seqs, m.T, m.M, &h);
        float one = pp_lm_single_step(&m, 1, data.w, data.g, data.mom, data.vel, s + 1,
                                      data.tokens + at, data.targets + at, &h);
        MPI_Bcast(&loss, 1, MPI_FLOAT, np - 1, comm);
        xt_printf_root(comm, "step %d: loss %.6f   one process (tied) %.6f\n", s + 1, (double)loss,
                       (double)one);
        /* The copies: the first stage's E against the last stage's head, transposed. */
        if (first)
            driver_tied_copy(stage, m.vocab, 0, mine);
        if (last)
            driver_tied_copy(stage, m.vocab, 1, np == 1 ? other : mine);
        if (np > 1) {
            if (first)
                MPI_Send(mine, (int)vd, MPI_FLOAT, np - 1, 0, comm);
            if (last)
                MPI_Recv(other, (int)vd, MPI_FLOAT, 0, 0, comm, MPI_STATUS_IGNORE);
        }
        if (last)
            same &= memcmp(first ? mine : other, np == 1 ? other : mine,
                           sizeof(float) * (size_t)vd) == 0;
    }
    MPI_Bcast(&same, 1, MPI_INT, np - 1, comm);
    xt_printf_root(comm, "the two copies of the tied matrix bit-identical after every step: %s\n",
                   same ? "yes" : "NO");
    if (group != MPI_COMM_NULL)
        MPI_Comm_free(&group);
    xt_tp_stage_free(stage);
    xt_mesh_free(&mesh);
    pp_lm_demo_free(&data);
    free(mine), free(other);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
