/*
 * xt_nn.h: the numeric layer the training exercises share, so that they stay
 * about parallelism.
 *
 *   - random numbers and a seeded permutation that grader/nn.py draws
 *     identically in NumPy (a sampler's shuffle, a demo's initial weights);
 *   - GEMM through CBLAS (OpenBLAS, one thread per rank);
 *   - layers with forward and backward: linear, ReLU, GELU (tanh form), mean
 *     squared error, softmax cross-entropy;
 *   - a small MLP whose parameters and gradients live in one flat buffer each,
 *     with a view per tensor: a gradient bucket or a ZeRO shard is a slice of
 *     that buffer;
 *   - SGD, AdamW, bf16 rounding;
 *   - the transformer pieces (transformer.c): RMSNorm, SiLU and the SwiGLU MLP,
 *     causal grouped-query attention with its log-sum-exp, the embedding, and a
 *     decoder block made of them;
 *   - a tensor-parallel pipeline stage of a decoder language model (tp_stage.c);
 *   - attention blocks (attn_block.c): a block of queries against a block of
 *     keys and values under a mask, and the log-sum-exp merge of two results;
 *     one tile of scores (attn_tile.c), logged, for programs that tile
 *     attention themselves.
 *
 * Every matrix is row-major float32. A linear layer computes y = x W + b with
 * x rows x in, W in x out, b of length out. Backward functions accumulate
 * into gradients (+=), as autograd does, so that micro-batches add up; zero
 * them before a step. grader/nn.py is the NumPy twin of this file: the
 * grader's references and `make test`'s unit tests use it.
 */
#ifndef XT_NN_H
#define XT_NN_H

#include "xt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------- random numbers */

/*
 * splitmix64: state += 0x9E3779B97F4A7C15, then two xor-shift-multiplies.
 * Small, fast, and easy to write again in Python, which is the point.
 */
typedef struct {
    uint64_t state;
} xt_rng;

xt_rng xt_rng_seed(uint64_t seed);
uint64_t xt_rng_u64(xt_rng *g);
/* Uniform in [0, n), n >= 1, by rejection: no modulo bias. */
uint64_t xt_rng_below(xt_rng *g, uint64_t n);
/* Uniform in [lo, hi): the top 24 bits of one draw, scaled. */
float xt_rng_uniform(xt_rng *g, float lo, float hi);
/* n draws of xt_rng_uniform, in order, into out. */
void xt_rng_fill_uniform(xt_rng *g, float *out, long n, float lo, float hi);

/*
 * A permutation of 0 .. n-1 from `seed`: Fisher-Yates from the top, starting
 * from the identity: for i = n-1 down to 1, swap out[i] with out[j],
 * j = xt_rng_below(g, i + 1).
 */
void xt_permutation(uint64_t seed, long n, long *out);

/* ---------------------------------------------------------------------- GEMM */

/*
 * C = alpha op(A) op(B) + beta C, row-major: op(A) is m x k, op(B) is k x n,
 * C is m x n; op(X) is X, or X transposed when trans_X is nonzero.
 */
void xt_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
             const float *b, float beta, float *c);

/* -------------------------------------------------------------------- layers */

typedef enum { XT_RELU, XT_GELU } xt_act;
typedef enum { XT_MSE, XT_CROSS_ENTROPY } xt_loss;

/* y = x W + b (b may be NULL). */
void xt_linear_forward(float *y, const float *x, const float *w, const float *b, int rows, int in,
                       int out);
/* dW += x^T dy; db += dy summed over rows; dx = dy W^T. Any of dx, dw, db may be NULL. */
void xt_linear_backward(float *dx, float *dw, float *db, const float *dy, const float *x,
                        const float *w, int rows, int in, int out);

/* y = act(x), elementwise; GELU is the tanh form 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))). */
void xt_act_forward(xt_act act, float *y, const float *x, long n);
/* dx = dy act'(x), x being the forward's input; dx may be dy. */
void xt_act_backward(xt_act act, float *dx, const float *dy, const float *x, long n);

/* Mean over rows x cols of (pred - target)^2; dpred (may be NULL) = its gradient. */
float xt_mse_loss(float *dpred, const float *pred, const float *target, int rows, int cols);
/* Mean over rows of -log softmax(logits)[label]; dlogits (may be NULL) = its gradient. */
float xt_cross_entropy_loss(float *dlogits, const float *logits, const int32_t *labels, int rows,
                            int classes);
/* Row-wise softmax, max subtracted first. y may be x. */
void xt_softmax_rows(float *y, const float *x, int rows, int cols);

/* params -= lr grads */
void xt_sgd(float *params, const float *grads, long n, float lr);

/* ----------------------------------------------------------------------- MLP */

#define XT_MLP_MAX_LAYERS 24

/* One tensor's place in the flat buffers: params + offset, grads + offset. */
typedef struct {
    char name[8]; /* "W0", "b0", "W1", ... */
    int layer;
    int rows, cols; /* W: in x out; b: 1 x out */
    long offset, count;
} xt_tensor;

/*
 * A multilayer perceptron: dims[0] inputs, dims[nlayers] outputs, `act`
 * after every layer but the last. Parameters are laid out flat in layer
 * order, W0 b0 W1 b1 ...: tensor[2l] is W_l, tensor[2l+1] is b_l.
 */
typedef struct xt_mlp {
    int nlayers;
    int dims[XT_MLP_MAX_LAYERS + 1];
    xt_act act;
    xt_loss loss;
    long nparams;
    float *params; /* nparams */
    float *grads;  /* nparams */
    int ntensors;  /* 2 nlayers */
    xt_tensor tensor[2 * XT_MLP_MAX_LAYERS];

    /* The last forward's activations, kept for backward (private). */
    int rows, rows_cap;
    const float *input;
    float *pre[XT_MLP_MAX_LAYERS];  /* rows x dims[l+1], before act */
    float *post[XT_MLP_MAX_LAYERS]; /* rows x dims[l+1], after act */
    float *delta[2];                /* backward scratch */
    int cur_delta, next_forward, next_backward;
} xt_mlp;

/* Parameters zeroed (load or randomise them), gradients zeroed. */
void xt_mlp_init(xt_mlp *m, int nlayers, const int *dims, xt_act act, xt_loss loss);
/* "8,16,4" -> nlayers 2, dims {8, 16, 4}; dies on a bad list. */
void xt_mlp_init_str(xt_mlp *m, const char *dims, xt_act act, xt_loss loss);
/* "8,16,4" -> d[0..n] (d holds XT_MLP_MAX_LAYERS + 1); returns n, the number of layers. */
int xt_dims_parse(const char *dims, int *d);
/* W_l uniform in +-1/sqrt(dims[l]), b_l zero, drawn in tensor order from `seed`. */
void xt_mlp_randomize(xt_mlp *m, uint64_t seed);
void xt_mlp_free(xt_mlp *m);
void xt_mlp_zero_grad(xt_mlp *m);

/*
 * Forward of `rows` samples; returns the rows x dims[nlayers] outputs (owned
 * by m). Keeps x's address and the activations for xt_mlp_backward, so x
 * must stay unchanged until then.
 */
const float *xt_mlp_forward(xt_mlp *m, const float *x, int rows);

/*
 * Layer by layer, for code that decides where each layer's weights live
 * (ZeRO-3 gathers them just in time; a pipeline stage holds a few). Layer l's
 * parameters are W_l then b_l, contiguous: xt_mlp_layer_count(m, l) floats
 * from xt_mlp_layer_offset(m, l) in the flat layout. xt_mlp_forward is
 *
 *     xt_mlp_forward_begin(m, x, rows);
 *     for (l = 0; l < m->nlayers; l++)
 *         xt_mlp_forward_layer(m, l, m->params + xt_mlp_layer_offset(m, l));
 *
 * and xt_mlp_backward is xt_mlp_loss_grad, then xt_mlp_backward_layer from
 * the last layer to the first. layer_params must hold the same weights in
 * forward and backward; layer_grads receives += the layer's gradients.
 */
long xt_mlp_layer_offset(const xt_mlp *m, int l);
long xt_mlp_layer_count(const xt_mlp *m, int l);
void xt_mlp_forward_begin(xt_mlp *m, const float *x, int rows);
void xt_mlp_forward_layer(xt_mlp *m, int l, const float *layer_params);
const float *xt_mlp_output(const xt_mlp *m); /* rows x dims[nlayers], after the last layer */
/* The loss of the forward just run, and its gradient (times scale) set up for backward. */
float xt_mlp_loss_grad(xt_mlp *m, const void *target, float scale);
void xt_mlp_backward_layer(xt_mlp *m, int l, const float *layer_params, float *layer_grads);

/*
 * ZeRO changes what a rank keeps. xt_mlp_pad_params grows the flat
 * parameter buffer to `total` floats (zeros after nparams), so that it can be
 * all-gathered in np equal shards; the drop functions free the full
 * parameter or gradient buffer of a rank that keeps only its shard (the
 * pointer becomes NULL, and the model is then used layer by layer).
 */
void xt_mlp_pad_params(xt_mlp *m, long total);
void xt_mlp_drop_params(xt_mlp *m);
void xt_mlp_drop_grads(xt_mlp *m);

/* Called by backward once layer `layer`'s W and b gradients are complete. */
typedef void (*xt_grad_hook)(xt_mlp *m, int layer, void *ctx);

/*
 * Backward of the last forward against `target` (MSE: rows x dims[nlayers]
 * floats; cross-entropy: rows int32 labels). Adds scale * d(loss)/d(params)
 * to m->grads, the loss being the mean over the rows; calls hook (may be
 * NULL) after each layer, the last layer first. Returns the loss.
 */
float xt_mlp_backward(xt_mlp *m, const void *target, float scale, xt_grad_hook hook, void *ctx);

/* Row `row` of a target array as xt_mlp_backward takes it (floats for MSE, int32 labels for CE). */
const void *xt_mlp_target_at(const xt_mlp *m, const void *target, long row);

/* The loss of x against target, no gradients. */
float xt_mlp_loss(xt_mlp *m, const float *x, const void *target, int rows);

/* ---------------------------------------------------------------- Adam */

/*
 * Adam's hyperparameters. weight_decay is AdamW's decoupled decay (0: plain
 * Adam): each step first multiplies the weights by (1 - lr weight_decay).
 */
typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
} xt_adam;

/*
 * One AdamW step (step counts from 1) on n parameters, in place, with their
 * moments m and v, for the exercises that build on an optimizer:
 *     p = p (1 - lr wd);  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
 *     p -= lr (m / (1 - b1^step)) / (sqrt(v / (1 - b2^step)) + eps)
 */
void xt_adam_update(float *params, const float *grads, float *m, float *v, long n, long step,
                    const xt_adam *h);

/* ---------------------------------------------------------------- bf16 */

/*
 * bfloat16 is float32 with the low 16 bits of the mantissa dropped: the same
 * exponent range, 8 bits of precision. xt_bf16_round rounds a float to the
 * nearest bf16 value, ties to even, and returns it as a float (NaN stays
 * NaN; values past the largest bf16 become infinity).
 */
float xt_bf16_round(float x);
void xt_bf16_round_array(float *out, const float *in, long n); /* out may be in */
int xt_all_finite(const float *x, long n);                     /* no inf, no NaN */
/* max |a[i] - b[i]| over n elements (a demo's check against one process); NaN if any is */
float xt_max_abs_diff(const float *a, const float *b, long n);

/* ---------------------------------------------------- training harnesses */

/*
 * What the training exercises share around the function a student writes:
 * the grader's case, and the demo.
 *
 * Case mode: the case names the model (dims, act, loss), the number of
 * steps and the learning rate; this rank's inputs are its rows of every
 * step's batch, x (steps x rows x dims[0]) and y (targets as
 * xt_mlp_backward takes them), and w0, its initial weights (rank 0's are the
 * real ones; the others start elsewhere on purpose). After each step
 * xt_train_case_output writes every tensor as "step<s>_<name>", s from 1,
 * and xt_train_case_loss the loss the step returned as "step<s>_loss".
 */
typedef struct {
    xt_case *c;
    MPI_Comm comm;
    xt_mlp model;
    int steps, rows; /* rows: this rank's samples per step */
    float lr;
    xt_adam adam; /* from the case's lr, beta1, beta2, eps, wd, where it has them */
    xt_array x, y;
} xt_train_case;

xt_train_case xt_train_case_begin(xt_case *c);
const float *xt_train_case_x(const xt_train_case *t, int step);
const void *xt_train_case_target(const xt_train_case *t, int step);
void xt_train_case_output(xt_train_case *t, int step);
void xt_train_case_loss(xt_train_case *t, int step, float loss);
/*
 * The same outputs when the parameters are sharded (ZeRO-3): each rank holds
 * `count` of them from flat index `lo`; the pieces are gathered (through
 * PMPI: not counted) and written whole. A gap or an overlap shows as NaN.
 */
void xt_train_case_output_shards(xt_train_case *t, int step, const float *shard, long lo,
                                 long count);
void xt_train_case_end(xt_train_case *t);

/*
 * Demo mode: a synthetic task (inputs uniform in +-1, targets from a fixed
 * random "teacher" MLP) that every rank draws identically and slices by
 * rank; each rank's model starts from its own seed. Options: --dims
 * (default: the program's), --act, --loss, --steps, --rows (per rank and
 * step), --lr. After each step xt_train_demo_report prints the mean loss,
 * how far rank 0 is from single-process full-batch training of the same
 * start, and whether all ranks hold identical weights.
 */
typedef struct {
    MPI_Comm comm;
    int rank, np;
    xt_mlp model, single; /* single: rank 0's single-process twin */
    int steps, rows;
    float lr;
    float *x;          /* steps x (np rows) x dims[0], the whole data set */
    void *target;      /* steps x (np rows) targets */
    long bytes_before; /* this rank's bytes sent by MPI calls before the first step */
    xt_adam adam;      /* --lr --beta1 --beta2 --eps --wd */
    int adam_twin;     /* the twin trains with Adam (xt_train_demo_use_adam) */
    float *twin_m, *twin_v;
    float *gathered; /* xt_train_demo_gather_shards' copy, when params are sharded */
} xt_train_demo;

xt_train_demo xt_train_demo_begin(MPI_Comm comm, const char *default_dims);
const float *xt_train_demo_x(const xt_train_demo *d, int step);          /* this rank's rows */
const void *xt_train_demo_target(const xt_train_demo *d, int step);      /* this rank's targets */
void xt_train_demo_report(xt_train_demo *d, int step, float local_loss); /* collective */
void xt_train_demo_end(xt_train_demo *d);                                /* collective */
/* The single-process twin takes Adam steps with d->adam, not SGD steps. */
void xt_train_demo_use_adam(xt_train_demo *d);
/* The full parameters of sharded ranks, on rank 0 (collective), for the report. */
void xt_train_demo_gather_shards(xt_train_demo *d, const float *shard, long lo, long count);

/* ------------------------------------------------------ pipeline stage */

/*
 * A pipeline stage (common/stage.c): layers first .. first+count-1 of the
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
 * "S <op> <mb> <chunk> <start> <end> <first> <count> <events>" (docs/grader.md): op F
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

/* ------------------------------------------------- transformer pieces */

/*
 * What the lectures on tensor, pipeline, context and expert parallelism
 * share (common/transformer.c). The conventions of xt_linear_*: row-major
 * float32; backward functions accumulate (+=) into weight gradients and
 * overwrite input gradients; a gradient pointer may be NULL (not wanted).
 * Nonsense sizes (negative counts, hkv not dividing hq, a token outside the
 * table) stop the run with a message naming them. Scratch a backward needs
 * while it runs is xt_alloc'd as XT_MEM_ACTIVATIONS and freed before it
 * returns.
 */

/*
 * The split rule: a dimension of n elements cut into np blocks, block r
 * holding n/np elements, one more when r < n % np, and starting at
 * r (n/np) + min(r, n % np). The same cut as a ring all-reduce's chunks.
 */
void xt_block(int n, int np, int r, int *lo, int *count);

/*
 * RMSNorm over the last dimension: rstd[i] = 1/sqrt(mean_j x[i,j]^2 + eps),
 * y[i,j] = x[i,j] rstd[i] gamma[j]. Backward: dx overwritten, dgamma +=
 * sum over rows of dy x rstd (either may be NULL); rstd is the forward's.
 */
void xt_rmsnorm_forward(float *y, float *rstd, const float *x, const float *gamma, int rows, int d,
                        float eps);
void xt_rmsnorm_backward(float *dx, float *dgamma, const float *dy, const float *x,
                         const float *gamma, const float *rstd, int rows, int d);

/* silu(x) = x sigmoid(x); backward dx = dy silu'(x), x the forward's input; dx may be dy. */
void xt_silu_forward(float *y, const float *x, long n);
void xt_silu_backward(float *dx, const float *dy, const float *x, long n);

/*
 * The SwiGLU MLP: g = x Wg, u = x Wu (rows x ff), h = silu(g) * u, y = h Wd
 * (rows x d). Wg, Wu: d x ff; Wd: ff x d. Forward keeps g, u and h (caller's
 * buffers, rows x ff each) for backward: dx overwritten; dwg, dwu, dwd +=.
 * With ff a block of the hidden columns (and Wd's matching rows), this is
 * one rank's part of a tensor-parallel MLP: y and dx are then partial sums.
 * Any of dx, dwg, dwu, dwd may be NULL.
 */
void xt_swiglu_forward(float *y, float *g, float *u, float *h, const float *x, const float *wg,
                       const float *wu, const float *wd, int rows, int d, int ff);
void xt_swiglu_backward(float *dx, float *dwg, float *dwu, float *dwd, const float *dy,
                        const float *x, const float *g, const float *u, const float *h,
                        const float *wg, const float *wu, const float *wd, int rows, int d, int ff);

/*
 * Causal grouped-query self-attention over `batch` sequences of T tokens.
 * q: (batch T) x (hq hd), head j in columns j hd .. j hd + hd - 1; k, v:
 * (batch T) x (hkv hd); hkv divides hq and query head j reads KV head
 * j / (hq / hkv). Scores q.k / sqrt(hd), position t attending to 0 .. t
 * of its own sequence. out: (batch T) x (hq hd); lse: batch x hq x T, the
 * log-sum-exp of each row of scaled scores (natural log). Backward: dq, dk,
 * dv overwritten (any may be NULL), from out and lse: the probabilities are
 * recomputed as exp(score - lse), 32 query rows at a time, so no T x T matrix
 * exists, in forward or backward; the query heads that share a KV head add
 * up in its dk and dv.
 */
void xt_attention_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                          int batch, int T, int hq, int hkv, int hd);
void xt_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                           const float *k, const float *v, const float *out, const float *lse,
                           int batch, int T, int hq, int hkv, int hd);

/*
 * y[i] = table[tokens[i]] (n x d, table vocab x d); backward dtable[tokens[i]]
 * += dy[i] (repeats add up). A token outside 0 .. vocab-1 stops the run.
 */
void xt_embedding_forward(float *y, const int *tokens, int n, const float *table, int vocab, int d);
void xt_embedding_backward(float *dtable, const int *tokens, int n, const float *dy, int vocab,
                           int d);

/*
 * A decoder block (pre-norm, as Llama):
 *     a = x + attention(rmsnorm(x; norm1) Wq, . Wk, . Wv) Wo
 *     y = a + swiglu(rmsnorm(a; norm2); Wg, Wu, Wd)
 * Its parameters lie flat in this order (xt_decoder_layout_of gives the
 * offsets, and total, their count): norm1 (d), Wq (d x hq hd), Wk (d x hkv hd), Wv (d x hkv hd),
 * Wo (hq hd x d), norm2 (d), Wg (d x ff), Wu (d x ff), Wd (ff x d).
 */
typedef struct {
    int d, hq, hkv, hd, ff;
    float eps;
} xt_decoder_shape;

typedef struct {
    long norm1, wq, wk, wv, wo, norm2, wg, wu, wd, total;
} xt_decoder_layout;

xt_decoder_layout xt_decoder_layout_of(const xt_decoder_shape *s);

/*
 * What forward keeps for backward, one xt_alloc'd block (XT_MEM_ACTIVATIONS):
 * a copy of x, both norms' outputs and rstd, q, k, v, the attention's output
 * and lse, a, and the MLP's g, u, h.
 */
typedef struct xt_decoder_cache xt_decoder_cache;

/* Forward of batch x T tokens, x and y (batch T) x d; returns the cache backward needs. */
xt_decoder_cache *xt_decoder_forward(float *y, const float *x, const float *params,
                                     const xt_decoder_shape *s, int batch, int T);
/* dx overwritten; dparams += (same flat layout); either may be NULL; frees the cache. */
void xt_decoder_backward(float *dx, float *dparams, const float *dy, const float *params,
                         xt_decoder_cache *cache);

/* ------------------------------------------- tensor-parallel pipeline stage */

/*
 * A decoder language model's pipeline stage, tensor-parallel over `tp`
 * (common/tp_stage.c): decoder blocks first .. first+count-1 of `layers`
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
 * first count events", docs/grader.md), first and count being the stage's
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

/* ------------------------------------------------------- attention blocks */

/*
 * The masks of a block of queries against a block of keys whose positions
 * start together (query i and key j sit i and j positions after the start):
 * NONE, query i sees every key (the keys' block lies wholly before); CAUSAL,
 * keys 0 .. i (the diagonal block); SHIFTED, keys 0 .. i-1 (a striped layout's
 * keys one position behind their queries).
 */
typedef enum { XT_MASK_NONE = 'N', XT_MASK_CAUSAL = 'C', XT_MASK_SHIFTED = 'S' } xt_mask;

/*
 * One attention block, grouped-query: q nq x (hq hd), k and v nk x (hkv hd),
 * query head j reading KV head j / (hq / hkv); scores q.k / sqrt(hd). out
 * nq x (hq hd) and lse nq x hq (token-major, so that rows of out and lse
 * pair up as (nq hq) rows of hd) are overwritten: the block's own softmax
 * output and log-sum-exp. A query row that sees no key gets lse -inf and a
 * zero output. The scratch is 32 query rows of scores, and a mask's hidden
 * keys are never computed: no nq x nk matrix, no work wasted on the diagonal.
 *
 * Backward, given the whole row's out and lse (after every block is merged):
 * P = exp(S - lse), and dq, dk, dv are accumulated (+=; any may be NULL).
 *
 * Each call is logged in the case record (an A line: forward or backward,
 * shape, mask, the (query, key) position pairs computed, the receives pending
 * while it ran); xt_attn_pairs('F') and ('B') give the pairs computed since
 * the case (or the program) began.
 */
void xt_attn_block_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                           int nq, int nk, int hq, int hkv, int hd, xt_mask mask);
void xt_attn_block_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out, const float *lse,
                            int nq, int nk, int hq, int hkv, int hd, xt_mask mask);
long xt_attn_pairs(char op);

/*
 * o (rows x d) and lse (rows) := the softmax-weighted combination of (o, lse)
 * and (o_blk, lse_blk), lse = log(e^lse + e^lse_blk). A row whose lse is -inf
 * carries no weight; two such rows give o = 0, lse = -inf.
 */
void xt_lse_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d);

/*
 * One tile of scores for a program that tiles attention itself (attn_tile.c):
 * s (nq x nk, row-major) = scale q k^T, q nq x d and k nk x d row-major (rows
 * of one head). No mask: the caller applies it. Each call is logged in the
 * case record (an A line: op T, mask N, nq x nk pairs); xt_attn_tiles gives
 * the calls since the program began, and their pairs in *pairs (may be NULL).
 */
void xt_attn_scores(float *s, const float *q, const float *k, int nq, int nk, int d, float scale);
long xt_attn_tiles(long *pairs);

/* ----------------------------------------------------- mixture of experts */

/*
 * Softmax top-k routing of T tokens over E experts (moe.c): probs (T x E) =
 * softmax(logits) row by row; idx[t k + j] (T x k) the expert of token t's
 * j-th largest probability (of equal probabilities the lower expert first),
 * w[t k + j] that probability, divided by the sum of the k when renorm.
 * Backward: dlogits (T x E, overwritten) from dw (T x k), through the selected
 * probabilities only; probs and idx are the forward's.
 */
void xt_topk_route(int *idx, float *w, float *probs, const float *logits, int T, int E, int k,
                   int renorm);
void xt_topk_route_backward(float *dlogits, const float *dw, const float *probs, const int *idx,
                            int T, int E, int k, int renorm);

/*
 * A bank of ne SwiGLU experts, global indices first .. first+ne-1, each
 * expert(x) = (silu(x Wg) * x Wu) Wd with its parameters in one block of
 * xt_expert_params(d, ff) = 3 d ff floats: Wg (d x ff), Wu (d x ff), Wd
 * (ff x d); params holds the ne blocks one after the other (the experts of a
 * rank are a contiguous slice of every expert's parameters).
 *
 * x (n x d) holds tokens grouped by expert: counts[j] rows for expert
 * first + j, the groups in expert order, n their sum; y (n x d) gets each
 * row's expert output. keep (3 n ff floats, or NULL when no backward
 * follows) receives what the backward needs. Backward: dx (n x d)
 * overwritten, dparams += (the same layout as params); either may be NULL.
 *
 * Every expert's call is logged in the case record as an X line (docs/grader.md):
 * forward or backward, the expert, its tokens, when, the MPI events before it
 * and the exchanges (receives, nonblocking collectives) pending while it ran.
 */
long xt_expert_params(int d, int ff);
void xt_experts_forward(float *y, float *keep, const float *x, const int *counts, int first, int ne,
                        const float *params, int d, int ff);
void xt_experts_backward(float *dx, float *dparams, const float *dy, const float *x,
                         const float *keep, const int *counts, int first, int ne,
                         const float *params, int d, int ff);

/*
 * The expert calls this rank has logged (the X lines above), for a demo that
 * shows in which order its program computed and waited: the from-th call
 * logged and those after it, at most max, into out (NULL: none); returns how
 * many calls the log holds in all. A graded case starts a fresh log; a demo's
 * grows from the start of the program.
 */
typedef struct {
    char op;            /* 'F' forward, 'B' backward */
    int expert, tokens; /* the expert's global index, the rows it computed */
    int pending;        /* exchanges (receives, nonblocking collectives) pending meanwhile */
    long pending_bytes; /* their bytes */
    long events_before; /* MPI messages this rank had logged before the call */
    double seconds;     /* how long it ran */
} xt_expert_call;
long xt_expert_log(xt_expert_call *out, long from, long max);

#ifdef __cplusplus
}
#endif

/* ---------------------------------------------------------------------- CUDA */

#if defined(XT_CUDA) || defined(__CUDACC__) || defined(XT_CUDA_EMU)
#ifndef XT_CUDA_EMU /* the emulated device has no cuBLAS; xt_cuda_gemm runs xt_gemm */
/* Outside extern "C": cuBLAS's headers pull in C++ (cuda_fp16.h). */
#include <cublas_v2.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

#ifndef XT_CUDA_EMU
void xt_cublas_check_at(cublasStatus_t status, const char *call, const char *file, int line);
#define XT_CUBLAS_CHECK(call) xt_cublas_check_at((call), #call, __FILE__, __LINE__)
#endif

/*
 * xt_gemm on device pointers, through cuBLAS: the same row-major meaning and
 * arguments. Queued on the default stream, like a kernel launch; reading C
 * back with xt_cuda_download waits for it. Plain FP32, no TF32, so results
 * agree with xt_gemm to float32 rounding.
 */
void xt_cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                  const float *b, float beta, float *c);

#ifdef __cplusplus
}
#endif
#endif

#endif /* XT_NN_H */
