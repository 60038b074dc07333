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
 * micro-batches it had in flight are printed, and the loss and every stage's
 * gradients (every copy, where a layout holds a stage twice: each must end
 * with the whole batch's) are compared with one process's. make demo draws
 * the timeline from the stage log.
 */
typedef float (*pp_step)(xt_stage **stages, int nchunks, const float *x, const float *target,
                         int mb_rows, int M, MPI_Comm comm);
void pp_demo(MPI_Comm comm, const char *schedule, int M, int nstages, int chunks,
             int (*stage_of)(int chunk, int rank, int np), pp_step step);

/*
 * run_case's set-up when the program itself says which layers a rank holds
 * (pp_basic's pp_layers): one stage of layers first .. first+count-1 of the
 * case's model ("dims", "act", "loss", "params" as above), logged as chunk
 * `chunk`, starting from the model's parameters. pp_case_done finishes it.
 */
xt_stage *pp_case_stage(xt_case *c, int first, int count, int chunk);

/*
 * Whether the ranks of the case's communicator, each holding layers first ..
 * first+count-1, cut the case's model into consecutive stages in rank order
 * (rank 0 from layer 0, each rank where the one before it ended, the last to
 * the model's last layer, none empty): whether a pipeline step can run on
 * them. Collective over the case's communicator, through PMPI, so that the
 * program's counters do not see it.
 */
int pp_case_layout_runs(xt_case *c, int first, int count);

/*
 * checkpoint's demo: a model of 8 ReLU layers (6 -> 16 -> ... -> 4) and a
 * batch of 4 rows, the same on every rank; rank r cuts it into 1, 2, 4 or 8
 * segments (r mod 4) and runs step on them. Each rank prints its peak of
 * XT_MEM_ACTIVATIONS beside the grader's bound (the saved inputs and what
 * one segment keeps) and what keeping every activation would take, and its
 * segments' forward counts; the loss and the gradients are compared with
 * one process's. (No timeline: each rank's segments are a pipeline of their
 * own, which the replay does not draw.)
 */
typedef float (*pp_checkpoint_step)(xt_stage **segments, int nseg, const float *x,
                                    const float *target, int rows);
void pp_checkpoint_demo(MPI_Comm comm, pp_checkpoint_step step);

/*
 * The programs whose schedule runs one stage per rank (rank r is stage r):
 * pp_stage_case is their run_case (the stage from the case, x on rank 0 and
 * target on the last rank, step run on them, the loss written by the last
 * rank, then pp_case_done), and pp_stage_demo their demo (pp_demo with M
 * micro-batches through np stages).
 */
typedef float (*pp_stage_step)(xt_stage *stage, const float *x, const float *target, int mb_rows,
                               int M, MPI_Comm comm);
void pp_stage_case(xt_case *c, pp_stage_step step);
void pp_stage_demo(MPI_Comm comm, const char *schedule, int M, pp_stage_step step);

#endif
