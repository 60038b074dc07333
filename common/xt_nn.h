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
/* The same with leading dimensions: row r of A starts at a + r lda (likewise B and C), so
 * that a block of columns (one attention head) is multiplied in place. */
void xt_gemm_ld(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a, int lda,
                const float *b, int ldb, float beta, float *c, int ldc);

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
