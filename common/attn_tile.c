/*
 * attn_tile.c: one tile of attention scores, s = scale q k^T, for programs
 * that tile attention themselves (xt_nn.h, "attention blocks"). It is a
 * plain product; what it adds is the log: each call is an A line of the
 * case record (op T, mask N, nq x nk pairs), so the grader counts the tiles
 * a program computed and their shapes, and sees whether it skipped the
 * tiles that a causal mask hides entirely.
 */
#include "xt_internal.h"

static long tiles, tile_pairs; /* since the program began */

void xt_attn_scores(float *s, const float *q, const float *k, int nq, int nk, int d, float scale)
{
    if (nq < 0 || nk < 0 || d < 1)
        xt_die("xt_attn_scores(nq=%d, nk=%d, d=%d): needs nq, nk >= 0 and d >= 1", nq, nk, d);
    double start = xti_now();
    long events = xti_events_logged();
    if (nq && nk)
        xt_gemm(0, 1, nq, nk, d, scale, q, k, 0.0f, s);
    long pairs = (long)nq * nk;
    tiles++;
    tile_pairs += pairs;
    xti_record_attn('T', nq, nk, 'N', pairs, start, xti_now(), events, 0, 0);
}

long xt_attn_tiles(long *pairs)
{
    if (pairs)
        *pairs = tile_pairs;
    return tiles;
}
