/*
 * stage_log.c: the S events of the kit's pipeline stages (stage_log.h).
 */
#include "stage_log.h"
#include "kit.h"
#include "xt_harness.h"

pp_stage_began pp_stage_begin(void)
{
    return (pp_stage_began){xt_case_clock(), xt_events_logged(),
                            (long)xt_mem_current(XT_MEM_ACTIVATIONS)};
}

/* The S kind, declared once as the program starts. */
__attribute__((constructor)) static void declare_events(void)
{
    xt_event_kind("S", "stage call: F|B|I|W|N micro-batch chunk start end (seconds since the "
                       "case began) first-layer layers events-before activations-bytes-then");
}

void pp_stage_event(char op, int mb, int chunk, int first, int count, pp_stage_began began)
{
    xt_event("S", "%c %d %d %.6f %.6f %d %d %ld %ld", op, mb, chunk, began.start, xt_case_clock(),
             first, count, began.events, began.activations);
}
