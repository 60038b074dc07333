/*
 * mpi_names.c: the MPI functions libxt wraps (XTI_FUNCTIONS in
 * xt_internal.h), with their names and kinds as the grader's files spell
 * them, and the kinds of communicator a call can be made on (the case's, the
 * world, self, a group libxt named, any other); and the launch's nodes.
 */
#include "xt_internal.h"

#include <stdio.h>
#include <string.h>

const char *const xti_fn_name[XTI_NFN] = {
#define X(name, cat) #name,
    XTI_FUNCTIONS(X)
#undef X
};

const int xti_fn_cat[XTI_NFN] = {
#define X(name, cat) XTI_CAT_##cat,
    XTI_FUNCTIONS(X)
#undef X
};

const char *xti_cat_name(int cat)
{
    static const char *const names[] = {"p2p", "coll", "comm", "rma", "local", "other"};
    return cat >= 0 && cat < (int)(sizeof names / sizeof names[0]) ? names[cat] : "?";
}

/*
 * Communicators libxt made for a purpose it can name (a process mesh's groups): each
 * distinct name is a kind of its own, 1 .. n_names, written "other@<name>" in a record (an
 * older reader still sees "other"). A name and its kind stay for the whole run; a handle
 * is forgotten when its communicator is freed (a later communicator may get the handle).
 * Names are 1 to NAME_CAP - 1 characters (a mesh's are at most 7).
 */
enum { MAX_NAMES = 16, MAX_NAMED = 128, NAME_CAP = 8 };
static char names[MAX_NAMES][sizeof "other@" + NAME_CAP];
static int n_names;
static struct {
    MPI_Comm comm;
    char kind;
} named[MAX_NAMED];
static int n_named;

const char *xt_comm_logged_as(MPI_Comm comm)
{
    return xti_comm_kind_name(xti_comm_kind(comm));
}

void xt_comm_name_group(MPI_Comm comm, const char *name)
{
    for (int i = 0; i < n_named; i++)
        if (named[i].comm == comm) {
            named[i] = named[--n_named];
            break;
        }
    /* Past the tables' room (never with a mesh or two), comm stays "other". */
    if (!name || !*name || comm == MPI_COMM_NULL || strlen(name) >= NAME_CAP ||
        n_named == MAX_NAMED)
        return;
    int k = 0;
    while (k < n_names && strcmp(names[k] + strlen("other@"), name) != 0)
        k++;
    if (k == MAX_NAMES)
        return;
    if (k == n_names)
        snprintf(names[n_names++], sizeof names[0], "other@%s", name);
    named[n_named].comm = comm;
    named[n_named++].kind = (char)(k + 1);
}

char xti_comm_kind(MPI_Comm comm)
{
    if (comm == xti.case_comm && comm != MPI_COMM_NULL)
        return 'c';
    if (comm == MPI_COMM_WORLD)
        return 'w';
    if (comm == MPI_COMM_SELF)
        return 's';
    for (int i = 0; i < n_named; i++)
        if (named[i].comm == comm)
            return named[i].kind;
    return 'o';
}

const char *xti_comm_kind_name(char kind)
{
    if (kind >= 1 && kind <= n_names)
        return names[kind - 1];
    return kind == 'c' ? "case" : kind == 'w' ? "world" : kind == 's' ? "self" : "other";
}

const char *xti_comm_group(char kind)
{
    return kind >= 1 && kind <= n_names ? names[kind - 1] + strlen("other@") : NULL;
}

int xti_world_rank(MPI_Comm comm, int rank)
{
    if (rank < 0 || comm == MPI_COMM_NULL)
        return -1;
    if (comm == MPI_COMM_WORLD)
        return rank;
    int inter = 0, world = MPI_UNDEFINED, size = 0;
    MPI_Group group, whole;
    if (PMPI_Comm_test_inter(comm, &inter) != MPI_SUCCESS || inter ||
        PMPI_Comm_group(comm, &group) != MPI_SUCCESS)
        return -1;
    /* A rank out of range is the program's error, which MPI reports in its own call;
     * translating it first would read past the group's table. */
    if (PMPI_Group_size(group, &size) == MPI_SUCCESS && rank < size &&
        PMPI_Comm_group(MPI_COMM_WORLD, &whole) == MPI_SUCCESS) {
        PMPI_Group_translate_ranks(group, 1, &rank, whole, &world);
        PMPI_Group_free(&whole);
    }
    PMPI_Group_free(&group);
    return world == MPI_UNDEFINED ? -1 : world;
}

int xt_launch_nodes(MPI_Comm comm, int *per_node, int *leader)
{
    int rank, here, apart, any;
    MPI_Comm shared;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &shared);
    PMPI_Comm_size(shared, &here);
    PMPI_Allreduce(&rank, leader, 1, MPI_INT, MPI_MIN, shared);
    PMPI_Comm_free(&shared);
    PMPI_Allreduce(&here, per_node, 1, MPI_INT, MPI_MIN, comm);
    apart = *leader != rank / *per_node * *per_node;
    PMPI_Allreduce(&apart, &any, 1, MPI_INT, MPI_LOR, comm);
    return !any;
}
