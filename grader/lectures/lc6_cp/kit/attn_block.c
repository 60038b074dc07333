/*
 * attn_block.c: attention of one block of queries against one block of keys
 * and values (kit.h), the step that ring, zigzag and striped attention
 * repeat; the log-sum-exp merge that joins two such results; and one tile of
 * scores for programs that tile attention themselves. grader/nn.py holds the
 * NumPy twins (attn_block_forward and the rest).
 *
 * Each call is logged in the case record as an A line (xt_event): forward or
 * backward (T: a tile of scores), the block's shape and mask, how many
 * (query, key) position pairs it computed, when, how many MPI events came
 * before it, and how many receives were pending while it ran. That is how
 * the grader sees which blocks a rank skipped, whether a transfer ran under
 * the compute, and whether a program skipped the tiles a causal mask hides.
 */
#include "kit.h"
#include "xt_harness.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { QROWS = 32 }; /* query rows per score tile: the scratch is QROWS x nk */

static long pairs_done[2]; /* (query, key) pairs of the blocks since the case began, F and B */

static void pairs_clear(void)
{
    pairs_done[0] = pairs_done[1] = 0;
}

long xt_attn_pairs(char op)
{
    XT_CHECK(op == 'F' || op == 'B', "xt_attn_pairs('%c'): 'F' (forward) or 'B' (backward)", op);
    return pairs_done[op == 'B'];
}

/* The A kind and the per-case count, declared once as the program starts. */
__attribute__((constructor)) static void declare_events(void)
{
    xt_event_kind("A", "attention block: F|B|T nq nk mask(N|C|S) pairs start end events-before "
                       "receives-pending their-bytes");
    xt_on_case_begin(pairs_clear);
}

static void event(char op, int nq, int nk, char mask, long pairs, double start, int recv_pending,
                  long recv_bytes, long events)
{
    if (op == 'F' || op == 'B')
        pairs_done[op == 'B'] += pairs;
    xt_event("A", "%c %d %d %c %ld %.6f %.6f %ld %d %ld", op, nq, nk, mask, pairs, start,
             xt_case_clock(), events, recv_pending, recv_bytes);
}

/* The keys query row i sees: 0 .. visible(i) - 1. */
static int visible(xt_mask mask, int i, int nk)
{
    int n = mask == XT_MASK_NONE ? nk : mask == XT_MASK_CAUSAL ? i + 1 : i;
    return n < nk ? n : nk;
}

static long pairs_of(xt_mask mask, int nq, int nk)
{
    long n = 0;
    for (int i = 0; i < nq; i++)
        n += visible(mask, i, nk);
    return n;
}

static void check_block(const char *fn, int nq, int nk, int hq, int hkv, int hd, xt_mask mask)
{
    if (nq < 0 || nk < 0 || hq < 1 || hkv < 1 || hd < 1)
        xt_die("%s(nq=%d, nk=%d, hq=%d, hkv=%d, hd=%d): needs nq, nk >= 0 and hq, hkv, hd >= 1", fn,
               nq, nk, hq, hkv, hd);
    if (hq % hkv)
        xt_die("%s: hkv=%d KV heads do not divide hq=%d query heads", fn, hkv, hq);
    if (mask != XT_MASK_NONE && mask != XT_MASK_CAUSAL && mask != XT_MASK_SHIFTED)
        xt_die("%s: mask %d is none of XT_MASK_NONE, XT_MASK_CAUSAL, XT_MASK_SHIFTED", fn,
               (int)mask);
}

/*
 * Scores of query rows i0 .. i0+n-1 of one head against the keys the tile's
 * last row sees (rows see more keys as they go down: under a mask the keys
 * past them are never computed), scaled; then each row turned into
 * probabilities exp(s - lse) (lse given), or, with lse_out, first its
 * log-sum-exp computed into lse_out. Invisible keys get 0. s is n x the
 * returned number of keys; lse is indexed by the row's position and strided
 * by hq (token-major).
 */
static int tile_probabilities(float *s, const float *qh, const float *kh, int ldq, int ldk, int i0,
                              int n, int nk, int hd, float scale, xt_mask mask, float *lse_out,
                              const float *lse, int hq)
{
    int kn = visible(mask, i0 + n - 1, nk);
    if (kn)
        xt_gemm_ld(0, 1, n, kn, hd, scale, qh + (long)i0 * ldq, ldq, kh, ldk, 0.0f, s, kn);
    for (int i = 0; i < n; i++) {
        float *si = s + (long)i * kn;
        int seen = visible(mask, i0 + i, nk);
        long at = (long)(i0 + i) * hq;
        if (lse_out) {
            if (!seen) {
                lse_out[at] = -INFINITY;
            } else {
                float mx = si[0];
                for (int u = 1; u < seen; u++)
                    mx = si[u] > mx ? si[u] : mx;
                double sum = 0.0;
                for (int u = 0; u < seen; u++)
                    sum += exp((double)si[u] - mx);
                lse_out[at] = mx + (float)log(sum);
            }
        }
        float l = lse_out ? lse_out[at] : lse[at];
        for (int u = 0; u < seen; u++)
            si[u] = isinf(l) ? 0.0f : expf(si[u] - l);
        for (int u = seen; u < kn; u++)
            si[u] = 0.0f;
    }
    return kn;
}

static void record(char op, int nq, int nk, xt_mask mask, double start, long events)
{
    long pairs = pairs_of(mask, nq, nk);
    long bytes = 0;
    int pending = xt_receives_pending(&bytes);
    event(op, nq, nk, (char)mask, pairs, start, pending, bytes, events);
}

void xt_attn_block_forward(float *out, float *lse, const float *q, const float *k, const float *v,
                           int nq, int nk, int hq, int hkv, int hd, xt_mask mask)
{
    double start = xt_case_clock();
    long events = xt_events_logged();
    check_block("xt_attn_block_forward", nq, nk, hq, hkv, hd, mask);
    int traced = xt_trace_enabled();
    if (traced)
        xt_trace_begin("attention block forward");
    int ldq = hq * hd, ldk = hkv * hd, group = hq / hkv;
    float scale = 1.0f / sqrtf((float)hd);
    float *s = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)QROWS * (size_t)(nk + 1));
    int rows = nq;
    for (int j = 0; j < hq; j++) {
        const float *qh = q + j * hd, *kh = k + (j / group) * hd, *vh = v + (j / group) * hd;
        float *oh = out + j * hd, *lh = lse + j;
        for (int i0 = 0; i0 < rows; i0 += QROWS) {
            int n = rows - i0 < QROWS ? rows - i0 : QROWS;
            int kn =
                tile_probabilities(s, qh, kh, ldq, ldk, i0, n, nk, hd, scale, mask, lh, NULL, hq);
            if (kn)
                xt_gemm_ld(0, 0, n, hd, kn, 1.0f, s, kn, vh, ldk, 0.0f, oh + (long)i0 * ldq, ldq);
            else
                for (int i = 0; i < n; i++)
                    memset(oh + (long)(i0 + i) * ldq, 0, sizeof(float) * (size_t)hd);
        }
    }
    xt_free(s);
    if (traced)
        xt_trace_end();
    record('F', nq, nk, mask, start, events);
}

/*
 * With P = exp(S - lse) (the lse of the whole row, not of this block) and
 * dP = dO V^T: dV += P^T dO, dS = P (dP - D) with D_i = dO_i . O_i (O the
 * row's whole output), dQ += scale dS K, dK += scale dS^T Q.
 */
void xt_attn_block_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                            const float *k, const float *v, const float *out, const float *lse,
                            int nq, int nk, int hq, int hkv, int hd, xt_mask mask)
{
    double start = xt_case_clock();
    long events = xt_events_logged();
    check_block("xt_attn_block_backward", nq, nk, hq, hkv, hd, mask);
    int traced = xt_trace_enabled();
    if (traced)
        xt_trace_begin("attention block backward");
    int ldq = hq * hd, ldk = hkv * hd, group = hq / hkv;
    float scale = 1.0f / sqrtf((float)hd);
    float *p = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)QROWS * ((size_t)2 * nk + 1));
    float *dp = p + (long)QROWS * nk, *dsum = dp + (long)QROWS * nk;
    int rows = nq;
    for (int j = 0; j < hq; j++) {
        long kvcol = (long)(j / group) * hd;
        const float *qh = q + j * hd, *kh = k + kvcol, *vh = v + kvcol;
        const float *doh = dout + j * hd, *oh = out + j * hd, *lh = lse + j;
        for (int i0 = 0; i0 < rows; i0 += QROWS) {
            int n = rows - i0 < QROWS ? rows - i0 : QROWS;
            const float *dob = doh + (long)i0 * ldq;
            int kn =
                tile_probabilities(p, qh, kh, ldq, ldk, i0, n, nk, hd, scale, mask, NULL, lh, hq);
            if (!kn)
                continue;
            if (dv)
                xt_gemm_ld(1, 0, kn, hd, n, 1.0f, p, kn, dob, ldq, 1.0f, dv + kvcol, ldk);
            if (!dq && !dk)
                continue;
            xt_gemm_ld(0, 1, n, kn, hd, 1.0f, dob, ldq, vh, ldk, 0.0f, dp, kn);
            for (int i = 0; i < n; i++) {
                double D = 0.0;
                for (int c = 0; c < hd; c++)
                    D += (double)dob[(long)i * ldq + c] * oh[(long)(i0 + i) * ldq + c];
                dsum[i] = (float)D;
            }
            for (int i = 0; i < n; i++)
                for (int u = 0; u < kn; u++)
                    dp[(long)i * kn + u] = p[(long)i * kn + u] * (dp[(long)i * kn + u] - dsum[i]);
            if (dq)
                xt_gemm_ld(0, 0, n, hd, kn, scale, dp, kn, kh, ldk, 1.0f,
                           dq + (long)i0 * ldq + j * hd, ldq);
            if (dk)
                xt_gemm_ld(1, 0, kn, hd, n, scale, dp, kn, qh + (long)i0 * ldq, ldq, 1.0f,
                           dk + kvcol, ldk);
        }
    }
    xt_free(p);
    if (traced)
        xt_trace_end();
    record('B', nq, nk, mask, start, events);
}

/*
 * o, lse := the softmax-weighted combination of (o, lse) and (o_blk, lse_blk):
 * with m = max(lse, lse_blk), the weights are e^(lse - m) and e^(lse_blk - m)
 * over their sum, and lse = m + log(that sum). A row whose lse is -inf has no
 * weight; two such rows give o = 0 and lse = -inf.
 */
void xt_lse_merge(float *o, float *lse, const float *o_blk, const float *lse_blk, int rows, int d)
{
    if (rows < 0 || d < 1)
        xt_die("xt_lse_merge(rows=%d, d=%d): needs rows >= 0 and d >= 1", rows, d);
    for (long i = 0; i < rows; i++) {
        float a = lse[i], b = lse_blk[i];
        float *oi = o + i * d;
        const float *bi = o_blk + i * d;
        if (isinf(b) && b < 0) {
            if (isinf(a) && a < 0)
                memset(oi, 0, sizeof(float) * (size_t)d);
            continue;
        }
        if (isinf(a) && a < 0) {
            memcpy(oi, bi, sizeof(float) * (size_t)d);
            lse[i] = b;
            continue;
        }
        double m = a > b ? a : b, wa = exp((double)a - m), wb = exp((double)b - m);
        double sum = wa + wb;
        for (int c = 0; c < d; c++)
            oi[c] = (float)((wa * oi[c] + wb * bi[c]) / sum);
        lse[i] = (float)(m + log(sum));
    }
}

/* ------------------------------------------------------------ a tile of scores */

static long tiles, tile_pairs; /* since the program began */

void xt_attn_scores(float *s, const float *q, const float *k, int nq, int nk, int d, float scale)
{
    if (nq < 0 || nk < 0 || d < 1)
        xt_die("xt_attn_scores(nq=%d, nk=%d, d=%d): needs nq, nk >= 0 and d >= 1", nq, nk, d);
    double start = xt_case_clock();
    long events = xt_events_logged();
    if (nq && nk)
        xt_gemm(0, 1, nq, nk, d, scale, q, k, 0.0f, s);
    long pairs = (long)nq * nk;
    tiles++;
    tile_pairs += pairs;
    event('T', nq, nk, 'N', pairs, start, 0, 0, events);
}

long xt_attn_tiles(long *pairs)
{
    if (pairs)
        *pairs = tile_pairs;
    return tiles;
}
