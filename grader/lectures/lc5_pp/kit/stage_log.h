/*
 * stage_log.h: how the kit's two pipeline stages (stage.c, tp_stage.c) log
 * their calls: one S event per call (xt_event), which the lecture's grader
 * reads as the schedule that ran (grader/lectures/lc5_pp/events.py).
 */
#ifndef LC5_STAGE_LOG_H
#define LC5_STAGE_LOG_H

/* What a stage's call notes of the moment it began: when (xt_case_clock), the events (E
 * lines) logged before it, and the activations (XT_MEM_ACTIVATIONS bytes) in use. */
typedef struct {
    double start;
    long events;
    long activations;
} pp_stage_began;
pp_stage_began pp_stage_begin(void);
/* The call (op F, B, I, W or N) for the case's log: its micro-batch, chunk and layers, and
 * what it began with; it ends now. */
void pp_stage_event(char op, int mb, int chunk, int first, int count, pp_stage_began began);

#endif
