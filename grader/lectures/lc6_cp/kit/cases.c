/*
 * cases.c: lecture 6's case set-up and demo (kit.h). The demo's own
 * communication (whether every rank matched) goes through PMPI, so that a
 * trace or a count shows only what the exercise did.
 */
#include "kit.h"
#include "xt_harness.h" /* XT_MPI_CHECK, xt_mpi_stats_get */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void cp_attention_case(xt_case *c, const char *forward_name, cp_attn_forward fwd,
                       cp_attn_backward bwd)
{
    MPI_Comm comm = xt_case_comm(c);
    int np;
    MPI_Comm_size(comm, &np);
    int T = (int)xt_case_int(c, "T"), hq = (int)xt_case_int(c, "hq");
    int hkv = (int)xt_case_int(c, "hkv"), hd = (int)xt_case_int(c, "hd");
    XT_CHECK(T % np == 0, "the case's T=%d is not a multiple of np=%d", T, np);
    int rows = T / np;
    long nq = (long)rows * hq * hd, nkv = (long)rows * hkv * hd, nlse = (long)rows * hq;
    xt_array q = xt_case_input_const(c, "q"), k = xt_case_input_const(c, "k");
    xt_array v = xt_case_input_const(c, "v");
    XT_CHECK(q.count == nq && k.count == nkv && v.count == nkv,
             "the case's q, k, v hold %ld, %ld, %ld floats, not %ld, %ld, %ld", q.count, k.count,
             v.count, nq, nkv, nkv);
    if (xt_case_is(c, forward_name)) {
        float *o = xt_case_alloc(c, "o", nq, XT_F32);
        float *lse = xt_case_alloc(c, "lse", nlse, XT_F32);
        fwd(o, lse, q.data, k.data, v.data, rows, hq, hkv, hd, comm);
        xt_case_output(c, "o", o, XT_F32, nq);
        xt_case_output(c, "lse", lse, XT_F32, nlse);
        return;
    }
    xt_array dout = xt_case_input_const(c, "dout"), o = xt_case_input_const(c, "o");
    xt_array lse = xt_case_input_const(c, "lse");
    float *dq = xt_case_alloc(c, "dq", nq, XT_F32);
    float *dk = xt_case_alloc(c, "dk", nkv, XT_F32);
    float *dv = xt_case_alloc(c, "dv", nkv, XT_F32);
    bwd(dq, dk, dv, dout.data, q.data, k.data, v.data, o.data, lse.data, rows, hq, hkv, hd, comm);
    xt_case_output(c, "dq", dq, XT_F32, nq);
    xt_case_output(c, "dk", dk, XT_F32, nkv);
    xt_case_output(c, "dv", dv, XT_F32, nkv);
}

void cp_positions(const char *layout, int T, int np, int r, int *pos)
{
    int c = T / np;
    if (strcmp(layout, "contiguous") == 0) {
        for (int i = 0; i < c; i++)
            pos[i] = r * c + i;
        return;
    }
    XT_CHECK(strcmp(layout, "zigzag") == 0 && T % (2 * np) == 0,
             "cp_positions: layout %s with T=%d over %d ranks", layout, T, np);
    int h = T / (2 * np);
    for (int i = 0; i < h; i++) {
        pos[i] = r * h + i;
        pos[h + i] = (2 * np - 1 - r) * h + i;
    }
}

/* ------------------------------------------------------------------- the demo */

/* This rank's rows (at pos, width w) of a whole-sequence array. */
static void rows_of(float *mine, const float *whole, const int *pos, int c, int w)
{
    for (int i = 0; i < c; i++)
        memcpy(mine + (long)i * w, whole + (long)pos[i] * w, sizeof(float) * (size_t)w);
}

/* max |got - want| over this rank's rows, and max |want| over the whole array. */
static int rows_match(const float *got, const float *whole, const int *pos, int c, int w, int T)
{
    double scale = 1.0, err = 0.0;
    for (long i = 0; i < (long)T * w; i++)
        scale = fmax(scale, fabs(whole[i]));
    for (int i = 0; i < c; i++)
        for (int j = 0; j < w; j++)
            err = fmax(err, fabs((double)got[(long)i * w + j] - whole[(long)pos[i] * w + j]));
    return err <= 1e-4 * scale;
}

void cp_attention_demo(MPI_Comm comm, const char *layout, int T, int hq, int hkv, int hd,
                       cp_attn_forward fwd, cp_attn_backward bwd)
{
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    int c = T / np, wq = hq * hd, wk = hkv * hd;
    long nq = (long)T * wq, nk = (long)T * wk;
    /* The whole sequence, the same on every rank (one seed): q, k, v, dout. */
    float *whole = xt_malloc(sizeof(float) * (size_t)(2 * nq + 2 * nk));
    float *Q = whole, *K = Q + nq, *V = K + nk, *DO = V + nk;
    xt_rng g = xt_rng_seed(6);
    xt_rng_fill_uniform(&g, whole, 2 * nq + 2 * nk, -1.5f, 1.5f);
    int *pos = xt_malloc(sizeof(int) * (size_t)c);
    cp_positions(layout, T, np, rank, pos);

    long mq = (long)c * wq, mk = (long)c * wk;
    float *mine = xt_malloc(sizeof(float) * (size_t)(5 * mq + 4 * mk + (long)c * hq));
    float *q = mine, *dout = q + mq, *o = dout + mq, *dq = o + mq, *k = dq + mq, *v = k + mk;
    float *dk = v + mk, *dv = dk + mk, *lse = dv + mk;
    rows_of(q, Q, pos, c, wq);
    rows_of(k, K, pos, c, wk);
    rows_of(v, V, pos, c, wk);
    rows_of(dout, DO, pos, c, wq);

    long f0 = xt_attn_pairs('F'), s0 = xt_mpi_stats_get(NULL).bytes_sent;
    fwd(o, lse, q, k, v, c, hq, hkv, hd, comm);
    long f1 = xt_attn_pairs('F'), b0 = xt_attn_pairs('B'), s1 = xt_mpi_stats_get(NULL).bytes_sent;
    bwd(dq, dk, dv, dout, q, k, v, o, lse, c, hq, hkv, hd, comm);
    long b1 = xt_attn_pairs('B'), s2 = xt_mpi_stats_get(NULL).bytes_sent;

    long owned = 0;
    for (int i = 0; i < c; i++)
        owned += pos[i] + 1;
    char where[64];
    if (strcmp(layout, "contiguous") == 0)
        snprintf(where, sizeof where, "positions %d-%d", pos[0], pos[c - 1]);
    else
        snprintf(where, sizeof where, "positions %d-%d,%d-%d", pos[0], pos[c / 2 - 1], pos[c / 2],
                 pos[c - 1]);
    xt_printf_root(comm, "\nthe (query, key) pairs each rank's blocks computed, beside the "
                         "causal pairs its\nqueries own, and the floats it sent:\n");
    xt_printf_ordered(comm, "%s  pairs: fwd %ld bwd %ld (causal %ld)  sent: fwd %ld bwd %ld\n",
                      where, f1 - f0, b1 - b0, owned, (s1 - s0) / 4, (s2 - s1) / 4);

    /* One process: the whole sequence's causal attention (lse head-major: hq x T). */
    float *ref = xt_malloc(sizeof(float) * (size_t)(3 * nq + 2 * nk + (long)T * hq * 2));
    float *O = ref, *dQ = O + nq, *dK = dQ + nq, *dV = dK + nk, *L = dV + nk, *Lt = L + T * hq;
    xt_attention_forward(O, L, Q, K, V, 1, T, hq, hkv, hd);
    xt_attention_backward(dQ, dK, dV, DO, Q, K, V, O, L, 1, T, hq, hkv, hd);
    for (int t = 0; t < T; t++)
        for (int j = 0; j < hq; j++)
            Lt[t * hq + j] = L[j * T + t];
    int ok = rows_match(o, O, pos, c, wq, T) && rows_match(lse, Lt, pos, c, hq, T) &&
             rows_match(dq, dQ, pos, c, wq, T) && rows_match(dk, dK, pos, c, wk, T) &&
             rows_match(dv, dV, pos, c, wk, T);
    XT_MPI_CHECK(PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_LAND, comm));
    xt_printf_root(comm, "every rank's o, lse, dq, dk, dv matches one process: %s\n",
                   ok ? "yes" : "NO");
    free(ref);
    free(mine);
    free(pos);
    free(whole);
}
