/*
 * core_state.c: the state of this process that libxt's files share (xti,
 * declared in xt_internal.h): who this rank is, where files go, and what
 * the rank is doing now. Start-up (init.c) and the case runner (case_run.c)
 * write most fields; `aborting` is set by whichever file ends the run.
 */
#include "xt_internal.h"

xti_globals xti = {
    .status_fd = -1,
    .diag_fd = 2,
    .case_index = -1,
    .case_comm = MPI_COMM_NULL,
    .compute_at = -1,
};
