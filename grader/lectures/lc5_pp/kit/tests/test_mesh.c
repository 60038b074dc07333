/*
 * test_mesh.c: the process mesh of --mesh DESCRIPTION on MPI_COMM_WORLD. Each
 * rank writes mesh.r<rank>.txt in --out: its coordinates, then for every
 * dimension the world ranks of its group in the group's order, for the
 * self-test to compare with numpy.arange(np).reshape(sizes); rank 0 prints
 * the mesh. --mode unknown asks for a group the mesh does not have. Every
 * group's communicator must carry its dimension's name (MPI_Comm_get_name,
 * and the kind a case record logs: "other@<name>"), the mesh's own "mesh".
 */
#include "kit.h"
#include "xt_harness.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    xt_mesh m;
    xt_mesh_init(&m, xt_arg_str("mesh", "dp=2,pp=2,tp=2"), MPI_COMM_WORLD);
    if (strcmp(xt_arg_str("mode", ""), "unknown") == 0)
        xt_mesh_group(&m, "cp");

    char path[4096];
    snprintf(path, sizeof path, "%s/mesh.r%d.txt", xt_arg_str("out", "."), xt_rank());
    FILE *f = fopen(path, "w");
    XT_CHECK(f, "cannot write %s", path);
    fprintf(f, "coords");
    for (int d = 0; d < m.ndims; d++)
        fprintf(f, " %d", m.coords[d]);
    fprintf(f, "\n");
    MPI_Group world, group;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    for (int d = 0; d < m.ndims; d++) {
        MPI_Comm g = xt_mesh_group(&m, m.names[d]);
        int n, mine[8], theirs[8];
        MPI_Comm_size(g, &n);
        XT_CHECK(n == xt_mesh_size(&m, m.names[d]) && n <= 8, "%s: group of %d", m.names[d], n);
        char name[MPI_MAX_OBJECT_NAME], kind[32];
        int len;
        MPI_Comm_get_name(g, name, &len);
        snprintf(kind, sizeof kind, "other@%s", m.names[d]);
        XT_CHECK(strcmp(name, m.names[d]) == 0, "%s: the group's communicator is named \"%s\"",
                 m.names[d], name);
        XT_CHECK(strcmp(xt_comm_logged_as(g), kind) == 0,
                 "%s: its messages would be logged on \"%s\", not \"%s\"", m.names[d],
                 xt_comm_logged_as(g), kind);
        MPI_Comm_rank(g, &mine[0]);
        XT_CHECK(mine[0] == xt_mesh_coord(&m, m.names[d]),
                 "%s: rank %d in its group, coordinate %d", m.names[d], mine[0],
                 xt_mesh_coord(&m, m.names[d]));
        for (int i = 0; i < n; i++)
            mine[i] = i;
        MPI_Comm_group(g, &group);
        MPI_Group_translate_ranks(group, n, mine, world, theirs);
        MPI_Group_free(&group);
        fprintf(f, "%s", m.names[d]);
        for (int i = 0; i < n; i++)
            fprintf(f, " %d", theirs[i]);
        fprintf(f, "\n");
    }
    MPI_Group_free(&world);
    XT_CHECK(strcmp(xt_comm_logged_as(m.comm), "other@mesh") == 0,
             "the mesh's own communicator would be logged on \"%s\"", xt_comm_logged_as(m.comm));
    XT_CHECK(xt_mesh_rank_of(&m, m.coords) == xt_rank(), "xt_mesh_rank_of(own coordinates) is %d",
             xt_mesh_rank_of(&m, m.coords));
    fclose(f);
    xt_mesh_print(&m);
    xt_mesh_free(&m);
    xt_finalize();
    return 0;
}
