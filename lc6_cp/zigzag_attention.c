/*
 * zigzag_attention.c: causal ring attention over the zigzag layout, which
 * gives every rank the same work. docs/lc6_cp.md#zigzag_attention
 *
 * Ring attention over contiguous blocks is unbalanced under the causal mask:
 * rank r's queries see r earlier blocks, so rank 0 computes one block and
 * rank np-1 computes np. Zigzag cuts the sequence into 2 np chunks of
 * c' = T/(2 np) positions and gives rank r chunk r and chunk 2np-1-r, one
 * early and one late (np = 4, chunks 0..7):
 *
 *     chunk   0  1  2  3  4  5  6  7
 *     rank    0  1  2  3  3  2  1  0      rank r's rows: chunk r, then chunk 2np-1-r
 *
 * Q stays; the K/V blocks (2 c' rows each) travel the ring, rank r sending
 * to r+1, so that at step s rank r holds the block of src = r-s. With q1, q2
 * its own chunks and k1, k2 the source's (k1 < q1 when src < r, and so on),
 * each step is one of three:
 *
 *     s = 0 (own block)    src < r              src > r
 *          k1 k2                k1 k2                k1 k2
 *     q1  [\    ]          q1  [##   ]          q1  [     ]
 *     q2  [## \ ]          q2  [##   ]          q2  [## ##]
 *     causal, 2c' x 2c'    2c' x c', no mask    c' x 2c', no mask
 *
 * Every off-diagonal step is exactly half a block, and every rank computes
 * c'^2 (2np-1) + c'(c'+1) (query, key) pairs: the contiguous layout's
 * r c^2 + c(c+1)/2 (c = 2c') spread from c(c+1)/2 to (np-1)c^2 + c(c+1)/2.
 * Blocks merge by their log-sum-exps (xt_lse_merge). Backward does the same
 * half blocks with libxt's accumulating block backward; each block's dK/dV
 * accumulator travels with it and takes one more step to arrive home.
 *
 * Cost per rank: forward np-1 messages of 2 c hkv hd floats (K and V of
 * c = 2c' rows); backward np-1 of those and np dK/dV messages of the same
 * size: (2np-1) 2 c hkv hd 4 bytes. The same bytes as the contiguous ring:
 * zigzag only changes which rows a rank holds and which half it computes.
 */
#include "xt_nn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void zigzag_attention_forward(float *o, float *lse, const float *q, const float *k, const float *v,
                              int c, int hq, int hkv, int hd, MPI_Comm comm)
{
    /*
     * TODO: o, lse by zigzag ring attention.
     *   c = 2c' rows (chunk r, then chunk 2np-1-r); o c x (hq hd), lse c x hq, token-major,
     *   overwritten. Ring on comm (send to r+1, receive from r-1): exactly np-1 K/V rotations,
     *   each block's MPI_Irecv posted before the compute it overlaps. Blocks with
     *   xt_attn_block_forward and xt_lse_merge only; graded on the pairs each rank computes:
     *   exactly the causal ones (half a block per off-diagonal step), the same on every rank.
     */
    XT_TODO("o, lse by zigzag ring attention.", o, lse, q, k, v, c, hq, hkv, hd, comm);
}

void zigzag_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               const float *k, const float *v, const float *o, const float *lse,
                               int c, int hq, int hkv, int hd, MPI_Comm comm)
{
    /*
     * TODO: dq, dk, dv by zigzag ring.
     *   o and lse are the whole forward's rows. dq, dk, dv overwritten. The same half blocks
     *   as the forward, through xt_attn_block_backward (it accumulates: +=). Ring on comm:
     *   exactly np-1 K/V rotations and np dK/dV rotations (each block's gradient travels with
     *   it and arrives home), a receive posted before every block's compute while any is to
     *   come; the pairs each rank computes are graded as the forward's.
     */
    XT_TODO("dq, dk, dv by zigzag ring.", dq, dk, dv, dout, q, k, v, o, lse, c, hq, hkv, hd, comm);
}

/* ------------------------------------------------------------------------ */

static void run_case(xt_case *c)
{
    MPI_Comm comm = xt_case_comm(c);
    int np, T = (int)xt_case_int(c, "T"), hq = (int)xt_case_int(c, "hq");
    int hkv = (int)xt_case_int(c, "hkv"), hd = (int)xt_case_int(c, "hd");
    MPI_Comm_size(comm, &np);
    int rows = T / np;
    long nq = (long)rows * hq * hd, nk = (long)rows * hkv * hd;
    xt_array q = xt_case_input_const(c, "q"), k = xt_case_input_const(c, "k");
    xt_array v = xt_case_input_const(c, "v");
    if (xt_case_is(c, "zigzag_attention_forward")) {
        float *o = xt_case_alloc(c, "o", nq, XT_F32);
        float *lse = xt_case_alloc(c, "lse", (long)rows * hq, XT_F32);
        zigzag_attention_forward(o, lse, q.data, k.data, v.data, rows, hq, hkv, hd, comm);
        xt_case_output(c, "o", o, XT_F32, nq);
        xt_case_output(c, "lse", lse, XT_F32, (long)rows * hq);
    } else {
        xt_array dout = xt_case_input_const(c, "dout"), o = xt_case_input_const(c, "o");
        xt_array lse = xt_case_input_const(c, "lse");
        float *dq = xt_case_alloc(c, "dq", nq, XT_F32), *dk = xt_case_alloc(c, "dk", nk, XT_F32);
        float *dv = xt_case_alloc(c, "dv", nk, XT_F32);
        zigzag_attention_backward(dq, dk, dv, dout.data, q.data, k.data, v.data, o.data, lse.data,
                                  rows, hq, hkv, hd, comm);
        xt_case_output(c, "dq", dq, XT_F32, nq);
        xt_case_output(c, "dk", dk, XT_F32, nk);
        xt_case_output(c, "dv", dv, XT_F32, nk);
    }
}

/* ------------------------------------------------------------------------ */

enum { DEMO_CHUNK = 2, DEMO_HD = 4 }; /* c' positions per chunk; one head of 4 dimensions */

/* Position of the rank's row i: chunk r, then chunk 2np-1-r. */
static int demo_position(int np, int rank, int i)
{
    int chunk = i < DEMO_CHUNK ? rank : 2 * np - 1 - rank;
    return chunk * DEMO_CHUNK + i % DEMO_CHUNK;
}

/* Largest |a - b| over n floats. */
static double demo_max_diff(const float *a, const float *b, long n)
{
    double m = 0.0;
    for (long i = 0; i < n; i++)
        m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/*
 * T = 2 np c' positions, one head: the chunk map, what each rank computes at
 * each step (its own block, or which half of a visiting block), the pairs it
 * computed (xt_attn_pairs) beside the contiguous layout's, and the outputs
 * and gradients against one process's attention over the whole sequence.
 */
static void demo(MPI_Comm comm)
{
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int h = DEMO_CHUNK, c = 2 * h, T = np * c, d = DEMO_HD;
    long n = (long)T * d;
    /* The whole sequence on every rank (the same draws), then this rank's rows. */
    float *whole = malloc(sizeof(float) * (size_t)(4 * n)),
          *mine = malloc(sizeof(float) * 4 * c * d);
    xt_rng g = xt_rng_seed(6);
    xt_rng_fill_uniform(&g, whole, 4 * n, -1.5f, 1.5f); /* q, k, v, dout */
    for (int t = 0; t < 4; t++)
        for (int i = 0; i < c; i++)
            memcpy(mine + (t * c + i) * d, whole + t * n + (long)demo_position(np, rank, i) * d,
                   sizeof(float) * d);
    const float *q = mine, *k = mine + c * d, *v = mine + 2 * c * d, *dout = mine + 3 * c * d;

    xt_printf_root(comm,
                   "zigzag: T = %d positions in %d chunks of c' = %d; rank r holds chunks"
                   " r and %d-r\n",
                   T, 2 * np, h, 2 * np - 1);
    char line[160], header[160] = "";
    int at = snprintf(line, sizeof line, "chunks %d,%d  positions", rank, 2 * np - 1 - rank);
    for (int i = 0; i < c; i++)
        at += snprintf(line + at, sizeof line - (size_t)at, "%s%3d", i == h ? " |" : "",
                       demo_position(np, rank, i));
    xt_printf_ordered(comm, "%s\n", line);

    xt_printf_root(comm,
                   "\nstep s: rank r holds rank r-s's K/V (%d rows: its two chunks)\n"
                   "  own    its own block, %d x %d, causal mask      (%d pairs)\n"
                   "  lo rj  rj < r: both query chunks x rj's first chunk, %d x %d (%d)\n"
                   "  hi rj  rj > r: the second query chunk x all of rj, %d x %d (%d)\n",
                   c, c, c, c * (c + 1) / 2, c, h, c * h, h, c, h * c);
    long before = xt_attn_pairs('F');
    float *o = malloc(sizeof(float) * (size_t)c * d), *lse = malloc(sizeof(float) * (size_t)c);
    zigzag_attention_forward(o, lse, q, k, v, c, 1, 1, d, comm);
    long pairs = xt_attn_pairs('F') - before;
    line[0] = 0;
    at = 0;
    for (int s = 0; s < np; s++) {
        int src = (rank - s + np) % np;
        at += snprintf(line + at, sizeof line - (size_t)at, s == 0 ? "own    " : "%s r%d  ",
                       src < rank ? "lo" : "hi", src);
        if (rank == 0) /* the header, on rank 0's line before its own */
            snprintf(header + 7 * s, sizeof header - (size_t)(7 * s), "s=%-5d", s);
    }
    xt_printf_root(comm, "     %-30s pairs\n", header);
    xt_printf_ordered(comm, "%-30s %ld\n", line, pairs);

    /* Backward: the same blocks; then its pairs beside the contiguous layout's. */
    float *grads = malloc(sizeof(float) * 3 * c * d);
    before = xt_attn_pairs('B');
    zigzag_attention_backward(grads, grads + c * d, grads + 2 * c * d, dout, q, k, v, o, lse, c, 1,
                              1, d, comm);
    long back = xt_attn_pairs('B') - before, contiguous = (long)rank * c * c + c * (c + 1) / 2;
    xt_printf_root(comm,
                   "\nwork per rank, (query, key) pairs: contiguous r c^2 + c(c+1)/2 (c = %d)"
                   "\nagainst zigzag's c'^2 (2np-1) + c'(c'+1) = %d\n",
                   c, h * h * (2 * np - 1) + h * (h + 1));
    xt_printf_ordered(comm, "contiguous %3ld   zigzag %3ld forward, %3ld backward\n", contiguous,
                      pairs, back);
    long total = pairs;
    MPI_Allreduce(MPI_IN_PLACE, &total, 1, MPI_LONG, MPI_SUM, comm);
    xt_printf_root(comm, "both sum to T(T+1)/2 = %d: zigzag %ld\n", T * (T + 1) / 2, total);

    float *w_o = malloc(sizeof(float) * (size_t)n), *w_lse = malloc(sizeof(float) * T);
    float *w_g = calloc((size_t)(3 * n), sizeof(float));
    xt_attn_block_forward(w_o, w_lse, whole, whole + n, whole + 2 * n, T, T, 1, 1, d,
                          XT_MASK_CAUSAL);
    xt_attn_block_backward(w_g, w_g + n, w_g + 2 * n, whole + 3 * n, whole, whole + n,
                           whole + 2 * n, w_o, w_lse, T, T, 1, 1, d, XT_MASK_CAUSAL);
    double err = 0.0;
    for (int i = 0; i < c; i++) {
        int p = demo_position(np, rank, i);
        err = fmax(err, demo_max_diff(o + i * d, w_o + (long)p * d, d));
        err = fmax(err, fabs((double)lse[i] - w_lse[p]));
        for (int t = 0; t < 3; t++)
            err = fmax(err, demo_max_diff(grads + (t * c + i) * d, w_g + t * n + (long)p * d, d));
    }
    MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_DOUBLE, MPI_MAX, comm);
    xt_print_buffer_ordered(comm, "lse of its rows: ", lse, c, MPI_FLOAT);
    xt_printf_root(comm,
                   "o, lse, dq, dk, dv against one process's attention over all %d positions:"
                   "\nlargest difference %.1e; matches one process: %s\n",
                   T, err, err < 1e-4 ? "yes" : "NO");
    free(whole);
    free(mine);
    free(o);
    free(lse);
    free(grads);
    free(w_o);
    free(w_lse);
    free(w_g);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
