/*
 * lecture.h: what this lecture's programs share beyond libxt (lecture.c),
 * found on their include path (-Igrader/lectures/lc5_pp): the set-up of a
 * graded case and the demo, around the schedule each program writes.
 */
#ifndef LECTURE_H
#define LECTURE_H

#include "xt_nn.h"

/*
 * run_case's set-up: this rank's stages from the case's "dims", "act",
 * "loss" and "params" (the whole model, flat) and its "layers" (int32 pairs
 * first, count: one per chunk, in chunk order). Stage k is logged as chunk k
 * and starts from the model's parameters. Returns how many there are (at
 * most max). pp_case_done writes "grads" (every stage's, in chunk order, one
 * after another) and "forwards" (each stage's forward calls), then frees the
 * stages.
 */
int pp_case_stages(xt_case *c, xt_stage **stages, int max);
void pp_case_done(xt_case *c, xt_stage **stages, int n);

/*
 * The demo: a model of 2 nstages ReLU layers (6 -> 8 -> ... -> 4, two per
 * stage) and a batch of M micro-batches of 2 rows, the same on every rank;
 * rank r runs chunks 0..chunks-1, chunk k being stage stage_of(k, r, np).
 * step runs the schedule (x on the ranks holding stage 0, target on those
 * holding the last, NULL elsewhere); then each rank's stages and the most
 * micro-batches it had in flight are printed, and the loss and the gradients
 * (copies of a stage summed) are compared with one process's. make demo
 * draws the timeline from the stage log.
 */
typedef float (*pp_step)(xt_stage **stages, int nchunks, const float *x, const float *target,
                         int mb_rows, int M, MPI_Comm comm);
void pp_demo(MPI_Comm comm, const char *schedule, int M, int nstages, int chunks,
             int (*stage_of)(int chunk, int rank, int np), pp_step step);

/*
 * The same demo for a layout that holds each stage on several ranks, every copy ending
 * the step with the whole batch's gradient (DualPipe): each copy is compared with one
 * process's gradients, instead of the copies' sum.
 */
void pp_demo_copies(MPI_Comm comm, const char *schedule, int M, int nstages, int chunks,
                    int (*stage_of)(int chunk, int rank, int np), pp_step step);

#endif
