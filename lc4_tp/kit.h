/*
 * kit.h: what lecture 4's model is given beyond libxt, its kit (the code is in
 * grader/lectures/lc4_tp/kit/, linked into this lecture's programs, and into
 * lecture 5's, whose tensor-parallel pipeline stage is built on model_tp.c):
 * the decoder's configuration, one rank's shard of its tensors, and how a
 * rank cuts its shard out of the whole model.
 */
#ifndef LC4_KIT_H
#define LC4_KIT_H

#include "xt_nn.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TP_MAX_LAYERS 4

typedef struct {
    int vocab, d, layers, hq, hkv, hd, ff;
    float eps;
} tp_config;

/* One decoder block's tensors, as xt_decoder_layout orders them: this rank's part. */
typedef struct {
    float *norm1, *wq, *wk, *wv, *wo, *norm2, *wg, *wu, *wd;
} tp_block;

typedef struct {
    tp_config cfg;
    int first, count; /* the blocks held: 0 and cfg.layers here (a pipeline stage holds a run) */
    MPI_Comm comm, kv_comm; /* kv_comm: the ranks sharing this rank's KV heads, or NULL */
    int np, rank;
    int v_lo, v_count;              /* vocabulary block: embedding rows, head columns */
    int q_lo, hq_local;             /* query heads */
    int kv_lo, hkv_local, replicas; /* KV heads, and how many ranks hold each */
    int ff_lo, ff_local;            /* hidden units of the MLPs */
    long nparams;                   /* this rank's floats, every tensor */
    float *params, *grads, *adam_m, *adam_v;
    long step;
    /* Views into params and grads: embedding (v_count x d), blocks, final norm, head (NULL
     * where the blocks held do not begin or end the model). */
    float *embed, *final_norm, *head, *dembed, *dfinal_norm, *dhead;
    tp_block blk[TP_MAX_LAYERS], dblk[TP_MAX_LAYERS]; /* blk[l] is block first + l */
} tp_model;

/*
 * This rank's shard of blocks first .. first+count-1 of the whole model `full`
 * (the same on every rank, flat: the embedding E (V x d), each block in
 * xt_decoder_layout's order, the final norm (d), the head (d x V)), with the
 * embedding when first is 0 and the final norm and head when the blocks end
 * the model. Parameters, gradients (zeroed) and AdamW's moments (zeroed) are
 * xt_alloc'd as XT_MEM_PARAMS, XT_MEM_GRADS and XT_MEM_OPTIMIZER. Collective
 * over comm: kv_comm is split here when np/hkv ranks share each KV head.
 */
void xt_tp_model_init(tp_model *m, const tp_config *c, const float *full, int first, int count,
                      MPI_Comm comm);
void xt_tp_model_free(tp_model *m);
/*
 * Views of the shard's tensors laid out from base, in the order of params
 * (base NULL: sizes only, every view NULL); returns how many floats.
 */
long xt_tp_model_views(const tp_model *m, float *base, float **embed, tp_block *blk, float **norm,
                       float **head);

/*
 * The column-parallel layer's backward, in two calls (kit/tp_grad.c), for an
 * all-reduce of dx to overlap the second: dx = dy W^T (rows x in, overwritten);
 * then dW += x^T dy and db += dy's column sums (db may be NULL), which logs what
 * exchanges were in flight while it ran (the case record's G lines).
 */
void xt_tp_input_grad(float *dx, const float *dy, const float *w, int rows, int in, int out_local);
void xt_tp_weight_grad(float *dw, float *db, const float *dy, const float *x, int rows, int in,
                       int out_local);

/*
 * For the grader's drivers: one case of a column-parallel backward with
 * col_linear_backward's signature (col_parallel_linear.c's, tp_async_linear.c's): this
 * rank's inputs read, fn run on them, dx, dw and db (with a bias) written.
 */
typedef void tp_col_backward_fn(const float *x, const float *w, const float *dy, float *dx,
                                float *dw, float *db, int rows, int in, int out_local,
                                MPI_Comm comm);
void tp_col_backward_case(xt_case *c, tp_col_backward_fn *fn);

/*
 * For the grader's drivers and demos (kit/tp_mesh.c): a dp x tp mesh over comm, tensor
 * ranks consecutive. Collective over comm: this rank's tensor group (its ranks those of
 * one data rank), made as a case's set-up past libxt's counters and named "tp" in the
 * records; *tp_rank and *dp_rank this rank's coordinates. xt_tp_group_free frees it.
 */
MPI_Comm xt_tp_group(MPI_Comm comm, int tp, int *tp_rank, int *dp_rank);
void xt_tp_group_free(MPI_Comm *group);

#ifdef __cplusplus
}
#endif

#endif
