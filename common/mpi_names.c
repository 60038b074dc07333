/*
 * mpi_names.c: the MPI functions libxt wraps (XTI_FUNCTIONS in
 * xt_internal.h), with their names and kinds as the grader's files spell
 * them, and the kinds of communicator a call can be made on.
 */
#include "xt_internal.h"

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

char xti_comm_kind(MPI_Comm comm)
{
    if (comm == xti.case_comm && comm != MPI_COMM_NULL)
        return 'c';
    if (comm == MPI_COMM_WORLD)
        return 'w';
    if (comm == MPI_COMM_SELF)
        return 's';
    return 'o';
}

const char *xti_comm_kind_name(char kind)
{
    return kind == 'c' ? "case" : kind == 'w' ? "world" : kind == 's' ? "self" : "other";
}
