/*
 * kit.h: what lecture 3's programs are given beyond libxt, its kit (the code
 * is in grader/lectures/lc3_zero/kit/, linked into this lecture's programs
 * only): a ZeRO-1 rank's state and training step, which zero_checkpoint.c
 * trains with, and the damage the grader's refusal cases do to a checkpoint.
 */
#ifndef LC3_KIT_H
#define LC3_KIT_H

#include "xt_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A ZeRO-1 rank's state, the training harness of zero_checkpoint.c: the flat
 * parameters are cut into np shards of `shard` = ceil(nparams / np) floats,
 * the last padded; this rank owns [lo, lo + count), count <= shard (0 past
 * the end), and keeps Adam's moments for it only. step: the Adam steps taken.
 */
typedef struct {
    long nparams, shard, lo, count, step;
    float *m, *v; /* shard floats each, XT_MEM_OPTIMIZER, zero past count */
} zero_state;

/* The layout of this rank of comm, moments zeroed, step 0. */
void zero_state_init(zero_state *z, long nparams, MPI_Comm comm);
void zero_state_free(zero_state *z);
/*
 * One ZeRO-1 training step of model m (its params padded to np * shard, the
 * same on every rank): forward and backward on this rank's rows, gradients
 * all-reduced and averaged, AdamW on the own shard, parameters all-gathered.
 * Its communication goes through PMPI, so it is not counted: it is a harness
 * around the code under test, never an answer to grade. Returns the local
 * loss.
 */
float zero1_train_step(zero_state *z, xt_mlp *m, const float *x, const void *target, int rows,
                       const xt_adam *h, MPI_Comm comm);

/*
 * The grader's damaged checkpoints, for the cases that offer one to
 * zero_checkpoint_load (parameter damage=...; in any other case it does
 * nothing). Between the save and the load, case rank 0 damages the
 * checkpoint in dir, saved by save_np ranks, as a crash or a mix-up would:
 *   truncate  shard-1.bin cut in the middle of its v block
 *   step      shard-1.bin's header says one step more: a shard of another save
 *   magic     meta.bin's magic zeroed
 * The offsets are the documented layout's, whatever the save wrote.
 * Collective over comm, the case's.
 */
void zero_checkpoint_damage(xt_case *c, const char *dir, long nparams, MPI_Comm comm);

#ifdef __cplusplus
}
#endif

#endif
