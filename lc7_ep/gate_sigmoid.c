/*
 * gate_sigmoid.c: DeepSeek-V3's gate, balanced by a bias that chooses but
 * never weighs. docs/lc7_ep.md#gate_sigmoid
 *
 * Each expert scores a token on its own, s = sigmoid(logit) (no softmax
 * across the experts). The k experts are chosen on s + b, b a per-expert
 * bias that no gradient trains; the chosen experts are weighed by their
 * scores alone, normalised over the k:
 *
 *   s      .73  .69  .55  .50       b  -.25  0  0  +.125
 *   s + b  .48  .69  .55  .63   --> k = 2: experts 1 3 (not 0 1)
 *   w      .69 / (.69 + .50) = .58,   .50 / 1.19 = .42   (no b in w)
 *
 * After each step the bias moves by a fixed gamma against the load: an
 * expert that got fewer than the mean k T / E of the T k choices gains
 * gamma, one that got more loses it, one exactly at the mean keeps its
 * bias. Balance without a loss term, and so without a gradient that
 * fights the language-model loss.
 *
 * A small sequence-wise loss keeps a single sequence from being extreme:
 *
 *   L = alpha sum_i f_i P_i,   f_i = E / (k T) load_i   (1 when balanced; a count, no gradient)
 *                              P_i = 1/T sum_t s_ti / sum_j s_tj
 *
 * Uniform routing (every f_i = 1, every P_i = 1/E) gives exactly alpha.
 * Its gradient flows through P only: dL/ds'_ti = alpha f_i / T, then
 * through the normalisation over the row and the sigmoid, s (1 - s).
 *
 * Cost per token: E sigmoids, k E comparisons, O(E) for the loss's
 * gradient; the bias update O(T k + E). No messages: each rank gates its
 * own tokens (across ranks the loads would be summed first: one
 * all-reduce of E counts).
 */
#include "kit.h" /* the lecture's kit: routing, the expert bank */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gate_sigmoid_forward(const float *logits, const float *bias, int T, int E, int k,
                          float *scores, int *idx, float *w)
{
    /*
     * TODO: the sigmoid gate: top-k on s + bias.
     *   scores (T x E) = sigmoid(logits); idx (T x k) by decreasing s + bias, of equal ones
     *   the lower expert first (graded exactly); w (T x k) the chosen scores over their sum:
     *   the bias chooses, it never weighs. No MPI call.
     */
    XT_TODO("the sigmoid gate: top-k on s + bias.", logits, bias, T, E, k, scores, idx, w);
}

void gate_bias_update(float *bias, const int *idx, int T, int E, int k, float gamma)
{
    /*
     * TODO: bias_i += gamma under the mean load, -= over.
     *   load_i: how many of the T k choices in idx went to expert i; the mean is k T / E.
     *   Equal to it (compare in integers: load_i E == k T): unchanged. No MPI call.
     */
    XT_TODO("bias_i += gamma under the mean load, -= over.", bias, idx, T, E, k, gamma);
}

float seq_balance_loss(const float *logits, const int *idx, int T, int E, int k, float alpha,
                       float *dlogits)
{
    /*
     * TODO: alpha sum_i f_i P_i, and dlogits.
     *   f_i = E/(k T) load_i (a count: no gradient); P_i = the mean over t of s_ti / sum_j
     *   s_tj, s = sigmoid(logits). dlogits (T x E) arrives holding garbage and is overwritten
     *   with the loss's gradient through P. T = 0 gives 0. No MPI call.
     */
    XT_TODO("alpha sum_i f_i P_i, and dlogits.", logits, idx, T, E, k, alpha, dlogits);
}

/* ------------------------------------------------------------------------ */

static void run_case(xt_case *c)
{
    int T = (int)xt_case_int(c, "T"), E = (int)xt_case_int(c, "E");
    int k = (int)xt_case_int(c, "k");
    xt_array idx_in;
    if (xt_case_is(c, "gate_sigmoid_forward")) {
        xt_array logits = xt_case_input_const(c, "logits"), bias = xt_case_input_const(c, "bias");
        float *scores = xt_case_alloc(c, "scores", (long)T * E, XT_F32);
        int *idx = xt_case_alloc(c, "idx", (long)T * k, XT_I32);
        float *w = xt_case_alloc(c, "w", (long)T * k, XT_F32);
        gate_sigmoid_forward(logits.data, bias.data, T, E, k, scores, idx, w);
        xt_case_output(c, "scores", scores, XT_F32, (long)T * E);
        xt_case_output(c, "idx", idx, XT_I32, (long)T * k);
        xt_case_output(c, "w", w, XT_F32, (long)T * k);
    } else if (xt_case_is(c, "gate_bias_update")) {
        /* Two steps: the bias after each, from the routing of that step. */
        float gamma = strtof(xt_case_str(c, "gamma"), NULL);
        xt_array bias = xt_case_input(c, "bias");
        idx_in = xt_case_input_const(c, "idx");
        const int *steps = idx_in.data;
        gate_bias_update(bias.data, steps, T, E, k, gamma);
        xt_case_output(c, "step0_bias", bias.data, XT_F32, E);
        gate_bias_update(bias.data, steps + (size_t)T * k, T, E, k, gamma);
        xt_case_output(c, "step1_bias", bias.data, XT_F32, E);
    } else {
        float alpha = strtof(xt_case_str(c, "alpha"), NULL);
        xt_array logits = xt_case_input_const(c, "logits");
        idx_in = xt_case_input_const(c, "idx");
        float *dlogits = xt_case_alloc(c, "dlogits", (long)T * E, XT_F32);
        float loss = seq_balance_loss(logits.data, idx_in.data, T, E, k, alpha, dlogits);
        xt_case_output(c, "loss", &loss, XT_F32, 1);
        xt_case_output(c, "dlogits", dlogits, XT_F32, (long)T * E);
    }
}

/* The loads of a routing: how many of the T k choices each expert got. */
static void loads_of(const int *idx, int T, int k, int *load, int E)
{
    memset(load, 0, sizeof(int) * (size_t)E);
    for (int c = 0; c < T * k; c++)
        load[idx[c]]++;
}

/*
 * Each rank gates T = 16 tokens of its own over E = 4 experts, k = 2, the logits skewed
 * towards the low experts (more so on higher ranks), and runs a few steps of the bias
 * update on the same tokens: the loads (mean k T / E = 8) come together as the bias moves.
 * Then the sequence-wise loss: on uniform routing (every score equal, every load the mean)
 * it is alpha; on the skewed routing above; and its dlogits beside central finite
 * differences of the loss.
 */
static void demo(MPI_Comm comm)
{
    enum { T = 16, E = 4, K = 2, STEPS = 12 };
    const float gamma = 0.05f, alpha = 0.01f;
    int rank;
    MPI_Comm_rank(comm, &rank);
    float logits[T * E], bias[E] = {0}, scores[T * E], w[T * K], dl[T * E];
    int idx[T * K], load[E], skewed[T * K];
    xt_rng g = xt_rng_seed(5 + (uint64_t)rank);
    for (int t = 0; t < T; t++)
        for (int e = 0; e < E; e++)
            logits[t * E + e] =
                xt_rng_uniform(&g, -1.0f, 1.0f) + (0.5f + 0.2f * (float)rank) * (float)(1 - e);
    xt_printf_root(comm,
                   "T = %d tokens per rank, E = %d, k = %d: the mean load is %d; gamma = "
                   "%g\n",
                   T, E, K, K * T / E, (double)gamma);
    int weighs = 0;
    for (int step = 0; step < STEPS; step++) {
        gate_sigmoid_forward(logits, bias, T, E, K, scores, idx, w);
        if (step == 0)
            memcpy(skewed, idx, sizeof idx);
        for (int t = 0; t < T; t++) { /* the weights: the chosen scores, normalised */
            const float *st = scores + t * E;
            const int *it = idx + t * K;
            for (int j = 0; j < K; j++)
                weighs |= fabsf(w[t * K + j] - st[it[j]] / (st[it[0]] + st[it[1]])) > 1e-6f;
        }
        loads_of(idx, T, K, load, E);
        int lo = load[0], hi = load[0];
        for (int e = 1; e < E; e++) {
            lo = load[e] < lo ? load[e] : lo;
            hi = load[e] > hi ? load[e] : hi;
        }
        if (step < 4 || step == STEPS - 1)
            xt_printf_ordered(comm,
                              "step %2d  loads %2d %2d %2d %2d (spread %2d)  bias %+.2f %+.2f "
                              "%+.2f %+.2f\n",
                              step, load[0], load[1], load[2], load[3], hi - lo, (double)bias[0],
                              (double)bias[1], (double)bias[2], (double)bias[3]);
        else if (step == 4)
            xt_printf_root(comm, "...\n");
        gate_bias_update(bias, idx, T, E, K, gamma);
    }
    int any;
    MPI_Allreduce(&weighs, &any, 1, MPI_INT, MPI_LOR, comm);
    xt_printf_root(comm, "the bias never weighs: w equals the chosen scores normalised: %s\n\n",
                   any ? "NO" : "yes");

    /* Uniform routing: equal logits in every row, token t to experts 2t % 4 and 2t % 4 + 1. */
    float flat[T * E], uniform_loss, skewed_loss, balanced_loss;
    int even[T * K];
    for (int t = 0; t < T; t++) {
        for (int e = 0; e < E; e++)
            flat[t * E + e] = 0.1f * (float)(t % 5);
        for (int j = 0; j < K; j++)
            even[t * K + j] = (K * t + j) % E;
    }
    uniform_loss = seq_balance_loss(flat, even, T, E, K, alpha, dl);
    skewed_loss = seq_balance_loss(logits, skewed, T, E, K, alpha, dl);
    balanced_loss = seq_balance_loss(logits, idx, T, E, K, alpha, dl);
    xt_printf_root(comm, "sequence-wise loss, alpha = %g\n", (double)alpha);
    xt_printf_ordered(comm, "uniform %.6f   skewed (step 0) %.6f   after the bias %.6f\n",
                      (double)uniform_loss, (double)skewed_loss, (double)balanced_loss);
    int at_alpha = fabsf(uniform_loss - alpha) <= 1e-6f * alpha, all;
    MPI_Allreduce(&at_alpha, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "uniform routing's loss equals alpha: %s\n", all ? "yes" : "NO");

    /* dlogits of the skewed routing's loss beside central differences of the loss. */
    seq_balance_loss(logits, skewed, T, E, K, alpha, dl);
    double worst = 0.0, most, scale = 0.0, top;
    float junk[T * E];
    for (int c = 0; c < T * E; c++) {
        const float h = 1e-2f, keep = logits[c];
        logits[c] = keep + h;
        double up = seq_balance_loss(logits, skewed, T, E, K, alpha, junk);
        logits[c] = keep - h;
        double down = seq_balance_loss(logits, skewed, T, E, K, alpha, junk);
        logits[c] = keep;
        worst = fmax(worst, fabs((up - down) / (2.0 * h) - dl[c]));
        scale = fmax(scale, fabs(dl[c]));
    }
    MPI_Allreduce(&worst, &most, 1, MPI_DOUBLE, MPI_MAX, comm);
    MPI_Allreduce(&scale, &top, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_printf_root(comm, "dlogits equals the loss's central differences: %s (error %.1e of %.1e)\n",
                   most < 0.02 * top ? "yes" : "NO", most, top);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
