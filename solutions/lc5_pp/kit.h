/*
 * kit.h: what lecture 5's programs are given beyond libxt, its kit (the code
 * is in grader/lectures/lc5_pp/kit/, linked into this lecture's programs
 * only): a pipeline stage of an MLP and one of a tensor-parallel decoder
 * model, each call logged for the grader; a process mesh; then the set-up
 * of a graded pipeline case and the demo, which the case drivers use.
 */
#ifndef LC5_KIT_H
#define LC5_KIT_H

#include "xt_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------ pipeline stage */

/*
 * A pipeline stage (kit/stage.c): layers first .. first+count-1 of the
 * MLP above with widths dims[0..nlayers], `act` after every layer but the
 * model's last, the loss after the model's last. Its parameters are those
 * layers' W_l, b_l in order, flat: exactly the slice of the whole model's
 * flat buffer from xt_mlp_layer_offset(first), so that a stage's parameters
 * can be copied from a whole model. chunk is the model chunk its calls are
 * logged as (interleaved schedules give a rank several).
 *
 * Any number of micro-batches may be in flight, in any order: a forward keeps
 * what its backward needs, per micro-batch, until that backward. What one
 * micro-batch of `rows` rows keeps, as XT_MEM_ACTIVATIONS, is exactly
 *
 *     after xt_stage_forward:          4 rows (in + 2 S) bytes
 *                                      (a copy of x, and each layer's output
 *                                      before and after its activation)
 *     plus, after xt_stage_loss:       4 rows out bytes (the loss's gradient)
 *     plus, after the input part:      4 rows S bytes (each layer's dLoss/d(pre))
 *                                      (the loss's gradient is freed then)
 *
 * S being the sum of the stage's layer widths dims[first+1] + ... +
 * dims[first+count], in = dims[first], out = dims[first+count] (at least 4
 * bytes for a block of zero rows). Backward frees it all, so that with k
 * micro-batches forwarded and none backward the stage keeps k times one's.
 *
 * Every call but the loss is logged in the case record as a line
 * "S <op> <mb> <chunk> <start> <end> <first> <count> <events>" (xt_event): op F
 * forward, B full backward, I input part, W weight part, N a forward that
 * keeps nothing; start and end in seconds since the case began; events: the MPI
 * events logged before it (so that messages and calls can be put in order). A demo run
 * with XT_STAGE_LOG=DIR writes the same lines to DIR/stages.r<rank>.txt. Misuse (a backward with no forward in flight, the weight part
 * before the input part, the loss on a stage that is not the last, a
 * micro-batch forwarded again while in flight) stops the run with a message.
 */
typedef struct xt_stage xt_stage;

xt_stage *xt_stage_new(int nlayers, const int *dims, xt_act act, xt_loss loss, int first, int count,
                       int chunk);
void xt_stage_free(xt_stage *s);
long xt_stage_nparams(const xt_stage *s);
float *xt_stage_params(xt_stage *s); /* xt_alloc XT_MEM_PARAMS */
float *xt_stage_grads(xt_stage *s);  /* xt_alloc XT_MEM_GRADS, zeroed at creation; backward adds */
int xt_stage_in(const xt_stage *s);  /* dims[first] */
int xt_stage_out(const xt_stage *s); /* dims[first + count] */
int xt_stage_is_last(const xt_stage *s);
/* Forward of micro-batch mb (>= 0): x (rows x in) -> y (rows x out). */
void xt_stage_forward(xt_stage *s, int mb, const float *x, int rows, float *y);
/* Last stage only: mb's loss against target (as xt_mlp_backward takes targets) and, kept for
 * its backward, the loss's gradient times scale (1/M for a mean over M micro-batches).
 * Returns the loss. */
float xt_stage_loss(xt_stage *s, int mb, const void *target, float scale);
/* Full backward of mb: dy (rows x out; NULL on the last stage: the loss's gradient), dx
 * (rows x in) overwritten (NULL: not wanted, the first stage), grads +=; frees mb's
 * activations. */
void xt_stage_backward(xt_stage *s, int mb, const float *dy, float *dx);
/* The same split in two (zero-bubble schedules): the input part (dx, keeping what the weight
 * part needs) and the weight part (grads +=, then mb's activations are freed). Together they
 * give the full backward's bits. */
void xt_stage_backward_input(xt_stage *s, int mb, const float *dy, float *dx);
void xt_stage_backward_weight(xt_stage *s, int mb);
/* A forward that keeps nothing (activation recomputation's first pass): x -> y, the
 * scratch freed before it returns; logged as N with micro-batch -1, counted as a forward. */
void xt_stage_infer(xt_stage *s, const float *x, int rows, float *y);
long xt_stage_forwards(const xt_stage *s); /* forward calls so far (recomputation counts them) */
int xt_stage_first(const xt_stage *s);     /* its first layer */
int xt_stage_count(const xt_stage *s);     /* its number of layers */
/* The most micro-batches in flight at once on this rank, over all its stages, since the
 * last call (or the start); each call starts the count again from those in flight now. */
int xt_stage_in_flight_most(void);

/* ------------------------------------------- tensor-parallel pipeline stage */

/*
 * A decoder language model's pipeline stage, tensor-parallel over `tp`
 * (kit/tp_stage.c, built from lecture 4's model_tp.c solution and kit, the
 * same code for the same blocks): decoder blocks first .. first+count-1 of `layers`
 * (shape as above), with the embedding when first is 0 (the first stage) and
 * the final RMSNorm, the head and the cross-entropy when first + count is
 * layers (the last). The whole model's parameters `full` lie flat as: the
 * embedding E (vocab x d), every block in xt_decoder_layout's order, the final
 * norm (d), the head (d x vocab); each rank keeps its shard, in that order:
 *
 *     embedding    rows of E of the vocabulary block xt_block(vocab, np, r)
 *     each block   norm1 whole; the columns of Wq, Wk, Wv of query heads
 *                  r hq/np .. and KV heads r hkv/np .. (hq and hkv must be
 *                  multiples of np: no KV head is shared); Wo's matching rows;
 *                  norm2 whole; hidden units xt_block(ff, np, r): columns of
 *                  Wg and Wu, rows of Wd
 *     final norm   whole; head: the columns of the vocabulary block
 *
 * Communication, all MPI_Allreduce on tp, per micro-batch of n = batch T
 * tokens: forward 2 per block of n d floats, and on the first stage 1 more (the
 * embedding); the loss 2 (a MAX of n, a SUM of 2n); backward 2 per block of n d,
 * and on the last stage 1 more (the head's input gradient). Nothing else.
 *
 * Any number of micro-batches may be in flight, in any order: a forward keeps
 * what its backward needs (XT_MEM_ACTIVATIONS) until that backward. Every
 * forward and backward is logged as xt_stage's are ("S F|B mb chunk start end
 * first count events", xt_event), first and count being the stage's
 * blocks. Misuse (a backward with no forward in flight, the loss on a stage
 * that is not the last or twice, a micro-batch forwarded again while in
 * flight) stops the run with a message. Collective over tp: every rank of it
 * makes the same calls in the same order.
 */
typedef struct xt_tp_stage xt_tp_stage;

xt_tp_stage *xt_tp_stage_new(const xt_decoder_shape *shape, int vocab, int layers,
                             const float *full, int first, int count, MPI_Comm tp, int chunk);
void xt_tp_stage_free(xt_tp_stage *s);
long xt_tp_stage_nparams(const xt_tp_stage *s); /* this rank's shard: floats */
float *xt_tp_stage_params(xt_tp_stage *s);      /* xt_alloc XT_MEM_PARAMS, in the order above */
float *xt_tp_stage_grads(xt_tp_stage *s);    /* XT_MEM_GRADS, zeroed at creation; backward adds */
int xt_tp_stage_d(const xt_tp_stage *s);     /* the width of what passes between stages */
int xt_tp_stage_first(const xt_tp_stage *s); /* its first block */
int xt_tp_stage_count(const xt_tp_stage *s); /* its number of blocks */
int xt_tp_stage_is_first(const xt_tp_stage *s);
int xt_tp_stage_is_last(const xt_tp_stage *s);
/*
 * Forward of micro-batch mb (>= 0), batch sequences of T tokens: the first stage reads
 * tokens (batch T of them), any other x ((batch T) x d); y ((batch T) x d) is the stage's
 * output, for the next stage (the last stage keeps its logits for the loss; y may be NULL).
 */
void xt_tp_stage_forward(xt_tp_stage *s, int mb, const int *tokens, const float *x, int batch,
                         int T, float *y);
/* Last stage only: the mean cross-entropy of mb's tokens against targets (batch T of them),
 * the same on every rank of tp, and, kept for its backward, its gradient times scale. */
float xt_tp_stage_loss(xt_tp_stage *s, int mb, const int *targets, float scale);
/* Backward of mb: dy ((batch T) x d) from the next stage (NULL on the last: the loss's
 * gradient); dx overwritten (ignored on the first stage, whose gradient ends in the
 * embedding); grads +=; frees mb's activations. */
void xt_tp_stage_backward(xt_tp_stage *s, int mb, const float *dy, float *dx);
/* One AdamW step (xt_adam_update, step counting from 1) on the shard with its gradients; the
 * moments are the stage's (XT_MEM_OPTIMIZER). */
void xt_tp_stage_adam(xt_tp_stage *s, const xt_adam *h);

/* -------------------------------------------------------------- process mesh */

/*
 * The ranks of a communicator laid out on a grid of up to four named
 * dimensions (data, pipeline, tensor parallelism, ...), with one communicator
 * per dimension: this rank's group along it, the ranks that differ from this
 * one only in that coordinate, in coordinate order.
 */
#define XT_MESH_MAX_DIMS 4
typedef struct {
    int ndims;
    char names[XT_MESH_MAX_DIMS][8]; /* "dp", "pp", "tp", ... in the description's order */
    int sizes[XT_MESH_MAX_DIMS];
    int coords[XT_MESH_MAX_DIMS]; /* this rank's coordinate along each */
    /* Along each dimension, the ranks that differ from this one only in that coordinate. */
    MPI_Comm group[XT_MESH_MAX_DIMS];
    MPI_Comm comm; /* the mesh's own communicator (a dup of the parent) */
} xt_mesh;
/*
 * "pp=2,dp=2,tp=2" (Megatron-LM's order, pp slowest; "2x2x2" names the
 * dimensions dp, pp, tp in that order; a dimension of size 1 is allowed): the
 * product must equal comm's size. The LAST dimension varies fastest (rank =
 * ((c0 * s1) + c1) * s2 + c2), so tensor parallelism, listed last, groups
 * neighbouring ranks, as Megatron-LM, torchtitan and picotron all do. Collective over comm; dies with a clear message on a bad
 * description or a product that is not the size. Each group's communicator
 * is named after its dimension (MPI_Comm_get_name), the mesh's own "mesh"
 * (no dimension may be called that), and a case record logs a message on one
 * as "other@<name>" (docs/grader.md).
 */
void xt_mesh_init(xt_mesh *m, const char *description, MPI_Comm comm);
MPI_Comm xt_mesh_group(const xt_mesh *m, const char *name); /* dies on an unknown name */
int xt_mesh_coord(const xt_mesh *m, const char *name);      /* likewise */
int xt_mesh_size(const xt_mesh *m, const char *name);       /* likewise */
int xt_mesh_rank_of(const xt_mesh *m, const int *coords);   /* the mesh rank at those coordinates */
void xt_mesh_free(xt_mesh *m); /* collective: frees every communicator of the mesh */
/*
 * Collective: the mesh's rank 0 prints every rank's coordinates and each
 * dimension's groups (mesh ranks), for a demo; inside a graded case, nothing.
 */
void xt_mesh_print(const xt_mesh *m);

/* ------------------------------------------------ a language model on a mesh */

/*
 * Lecture 4's decoder language model trained through pipeline stages on a mesh
 * (kit/lm_case.c, for parallel_3d.c's and pp_tied_embedding.c's drivers and demos). A
 * pp_lm is the model and its batch: seqs sequences of T tokens a step in M micro-batches.
 * pp_lm_size: the whole model's floats (embedding, blocks, final norm, head). pp_lm_stage:
 * this rank's xt_tp_stage of the whole parameters `full`, the blocks of its pp coordinate
 * (the first layers % pp stages one block more), tensor-parallel over `tp` (the mesh's tp
 * group, xt_mesh_group(mesh, "tp")). pp_lm_single_step: one
 * process's AdamW step on the whole batch from libxt's single-process pieces (the demos'
 * yardstick), g the whole gradient; tied: the head is the embedding's transpose, their
 * gradients summed and the same update applied to both. Returns the mean loss.
 * pp_lm_case_read reads a case's model ("vocab", "layers", "d", "hq", "hkv", "hd", "ff",
 * "seqs", "T", "M"), "steps", AdamW's "lr" and "wd", the whole initial parameters "w0",
 * every step's "tokens" and "targets", and builds the "mesh"; the driver then makes `stage`
 * with pp_lm_stage.
 */
typedef struct {
    int vocab, layers, seqs, T, M;
    xt_decoder_shape shape;
} pp_lm;
long pp_lm_size(const pp_lm *m);
xt_tp_stage *pp_lm_stage(const pp_lm *m, const float *full, const xt_mesh *mesh, MPI_Comm tp);
float pp_lm_single_step(const pp_lm *m, int tied, float *w, float *g, float *mom, float *vel,
                        long step, const int *tokens, const int *targets, const xt_adam *h);
typedef struct {
    pp_lm model;
    int steps;
    xt_adam adam;
    const float *w0;
    const int *tokens, *targets;
    xt_mesh mesh;
    xt_tp_stage *stage;
} pp_lm_case;
void pp_lm_case_read(xt_case *c, pp_lm_case *lm);
/* Step s's (from 0) tokens on the first stage, targets on the last; NULL elsewhere. */
const int *pp_lm_case_tokens(const pp_lm_case *lm, int s);
const int *pp_lm_case_targets(const pp_lm_case *lm, int s);
/* After step s: writes its loss on the last stage ("step<s+1>_loss"), and after the first the
 * stage's gradients ("grads"). */
void pp_lm_case_stepped(xt_case *c, const pp_lm_case *lm, int s, float loss);
/* Writes the stage's parameters ("params") when params is nonzero; frees the stage and the
 * mesh. */
void pp_lm_case_free(xt_case *c, pp_lm_case *lm, int params);
/*
 * A demo's training data for `steps` steps: the whole initial parameters w0 (seed 7, the
 * same on every rank; tied: the head set to E^T), a one-process copy w with its gradient g
 * and AdamW's moments (zero) for pp_lm_single_step, and every step's tokens and targets (a
 * rule worth learning: target = 5 token + 3 mod vocab). pp_lm_demo_free frees it.
 */
typedef struct {
    float *w0, *w, *g, *mom, *vel;
    int *tokens, *targets;
} pp_lm_demo;
pp_lm_demo pp_lm_demo_new(const pp_lm *m, int steps, int tied);
void pp_lm_demo_free(pp_lm_demo *d);

/* ------------------------------------------------ the cases and the demo */

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

#ifdef __cplusplus
}
#endif

#endif
