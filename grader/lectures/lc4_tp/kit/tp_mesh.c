/*
 * tp_mesh.c: the tensor group of a data x tensor mesh, for the drivers whose
 * cases run on such a mesh (tp_dropout.c's): made past libxt's counters, as a
 * case's set-up is, and named in the records, so that a rule can tell a
 * message on it from one on the case's communicator.
 */
#include "kit.h"
#include "xt_harness.h"

MPI_Comm xt_tp_group(MPI_Comm comm, int tp, int *tp_rank, int *dp_rank)
{
    int rank, np;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &np);
    if (tp < 1 || np % tp != 0)
        xt_die("a tensor group of %d ranks: np = %d is not a whole number of them", tp, np);
    *tp_rank = rank % tp;
    *dp_rank = rank / tp;
    MPI_Comm group;
    XT_MPI_CHECK(PMPI_Comm_split(comm, *dp_rank, *tp_rank, &group));
    xt_comm_name_group(group, "tp");
    return group;
}

void xt_tp_group_free(MPI_Comm *group)
{
    xt_comm_name_group(*group, NULL);
    PMPI_Comm_free(group);
}
