/*
 * flash_attention.c: causal attention in one process, tile by tile, so that
 * the T x T score matrix never exists. docs/lc6_cp.md#flash_attention
 *
 * One head: q, k, v are T x d, scores s_ij = q_i . k_j / sqrt(d), query i
 * sees keys j <= i. The queries are cut into tiles of br rows, the keys into
 * tiles of bc (the last of each may be shorter). A query tile visits the key
 * tiles from the left, keeping per row a running max m, a running sum l of
 * e^(s - m), and the output so far, unnormalized; when a new key tile raises
 * the max, the sum and the output are rescaled by e^(m_old - m_new):
 *
 *                 keys 0..2  3..5  6..8  9         T = 10, br = 4, bc = 3
 *     queries 0..3   [M]     [M]    .    .         M: on the diagonal, the
 *     queries 4..7   [ ]     [M]   [M]   .            mask applied inside
 *     queries 8..9   [ ]     [ ]   [M]  [M]        .: above it, skipped
 *
 * At the end of the row o = o / l and lse = m + log l. The backward
 * recomputes each tile's probabilities P = exp(S - lse) from the saved lse
 * instead of keeping them, and with D_i = dO_i . O_i:
 *
 *     dV_j += P^T dO_i    dP = dO_i V_j^T    dS = P (dP - D)
 *     dQ_i += dS K_j / sqrt(d)              dK_j += dS^T Q_i / sqrt(d)
 *
 * Cost: one process, no messages. Compute: about T^2/2 (query, key) pairs
 * (plus the masked corners of the diagonal tiles), 4d flops each forward
 * (scores, P V) and 10d backward (scores again, dP, dV, dQ, dK). Memory: one
 * tile of scores (br bc floats, two backward) and a few rows per tile, where
 * plain attention holds T^2 scores; that is what lets a GPU keep a tile in
 * its fast on-chip memory and read q, k, v from the slow one once per tile.
 */
#include "kit.h" /* the lecture's kit: attention blocks, tiles of scores */

#include <math.h>
#include <stdio.h>
#include <string.h>

void flash_attention_forward(float *o, float *lse, const float *q, const float *k, const float *v,
                             int T, int d, int br, int bc)
{
    /*
     * TODO: tiled causal attention forward (online softmax).
     *   o (T x d) and lse (T, natural log) arrive holding garbage; scores q.k / sqrt(d), key
     *   j visible to query i when j <= i. Query tiles of br rows, key tiles of bc (the last
     *   of each may be shorter); every tile's scores come from xt_attn_scores (xt_nn.h), which
     *   the grader counts: the tiles holding a visible key, each once, none above the diagonal.
     *   Scratch only through xt_alloc, all freed, its peak at most one tile's worth (docs:
     *   4 (2 br bc + 4 (br + bc)(d + 1) + T) bytes): no malloc, no variable-length array,
     *   no stack or static array over 4 KiB. No MPI call; attention already written is refused.
     */
    // BEGIN SOLUTION
    float scale = 1.0f / sqrtf((float)d);
    br = br < T ? br : T; /* a tile larger than the sequence is the sequence */
    bc = bc < T ? bc : T;
    float *s = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)br * (size_t)bc);
    float *m = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)br);
    float *l = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)br);
    for (int i0 = 0; i0 < T; i0 += br) {
        int nq = T - i0 < br ? T - i0 : br;
        float *oi = o + (size_t)i0 * d;
        memset(oi, 0, sizeof(float) * (size_t)nq * (size_t)d);
        for (int r = 0; r < nq; r++) {
            m[r] = -INFINITY;
            l[r] = 0.0f;
        }
        /* The key tiles whose first key the tile's last query sees. */
        for (int j0 = 0; j0 <= i0 + nq - 1; j0 += bc) {
            int nk = T - j0 < bc ? T - j0 : bc;
            xt_attn_scores(s, q + (size_t)i0 * d, k + (size_t)j0 * d, nq, nk, d, scale);
            for (int r = 0; r < nq; r++) {
                float *sr = s + (size_t)r * nk, *orow = oi + (size_t)r * d;
                int seen = i0 + r - j0 + 1; /* keys j0 .. i0 + r */
                seen = seen < 0 ? 0 : seen > nk ? nk : seen;
                float mx = m[r];
                for (int u = 0; u < seen; u++)
                    mx = sr[u] > mx ? sr[u] : mx;
                float alpha = seen ? expf(m[r] - mx) : 1.0f; /* 0 while m is -inf */
                l[r] *= alpha;
                for (int c = 0; c < d; c++)
                    orow[c] *= alpha;
                for (int u = 0; u < nk; u++) {
                    sr[u] = u < seen ? expf(sr[u] - mx) : 0.0f;
                    l[r] += sr[u];
                }
                m[r] = mx;
            }
            xt_gemm(0, 0, nq, d, nk, 1.0f, s, v + (size_t)j0 * d, 1.0f, oi);
        }
        for (int r = 0; r < nq; r++) {
            for (int c = 0; c < d; c++)
                oi[(size_t)r * d + c] /= l[r];
            lse[i0 + r] = m[r] + logf(l[r]);
        }
    }
    xt_free(s);
    xt_free(m);
    xt_free(l);
    // END SOLUTION
}

void flash_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                              const float *k, const float *v, const float *o, const float *lse,
                              int T, int d, int br, int bc)
{
    /*
     * TODO: tiled backward, P recomputed.
     *   P = exp(S - lse) from the forward's lse, tile by tile; D_i = dout_i . o_i. dq, dk, dv
     *   (T x d) arrive holding garbage and are overwritten. The forward's rules hold: the
     *   same tiles through xt_attn_scores, each once; scratch through xt_alloc within the
     *   same bound, all freed; no MPI call.
     */
    // BEGIN SOLUTION
    float scale = 1.0f / sqrtf((float)d);
    br = br < T ? br : T;
    bc = bc < T ? bc : T;
    size_t tile = sizeof(float) * (size_t)br * (size_t)bc, rows = sizeof(float) * (size_t)T * d;
    float *p = xt_alloc(XT_MEM_ACTIVATIONS, tile), *ds = xt_alloc(XT_MEM_ACTIVATIONS, tile);
    float *D = xt_alloc(XT_MEM_ACTIVATIONS, sizeof(float) * (size_t)br);
    memset(dq, 0, rows);
    memset(dk, 0, rows);
    memset(dv, 0, rows);
    for (int i0 = 0; i0 < T; i0 += br) {
        int nq = T - i0 < br ? T - i0 : br;
        const float *qi = q + (size_t)i0 * d, *doi = dout + (size_t)i0 * d;
        for (int r = 0; r < nq; r++) {
            double sum = 0.0;
            for (int c = 0; c < d; c++)
                sum += (double)doi[(size_t)r * d + c] * o[(size_t)(i0 + r) * d + c];
            D[r] = (float)sum;
        }
        for (int j0 = 0; j0 <= i0 + nq - 1; j0 += bc) {
            int nk = T - j0 < bc ? T - j0 : bc;
            const float *kj = k + (size_t)j0 * d, *vj = v + (size_t)j0 * d;
            xt_attn_scores(p, qi, kj, nq, nk, d, scale);
            for (int r = 0; r < nq; r++)
                for (int u = 0; u < nk; u++) {
                    float *pu = p + (size_t)r * nk + u;
                    *pu = j0 + u <= i0 + r ? expf(*pu - lse[i0 + r]) : 0.0f;
                }
            xt_gemm(1, 0, nk, d, nq, 1.0f, p, doi, 1.0f, dv + (size_t)j0 * d);
            xt_gemm(0, 1, nq, nk, d, 1.0f, doi, vj, 0.0f, ds);
            for (int r = 0; r < nq; r++)
                for (int u = 0; u < nk; u++)
                    ds[(size_t)r * nk + u] =
                        p[(size_t)r * nk + u] * (ds[(size_t)r * nk + u] - D[r]);
            xt_gemm(0, 0, nq, d, nk, scale, ds, kj, 1.0f, dq + (size_t)i0 * d);
            xt_gemm(1, 0, nk, d, nq, scale, ds, qi, 1.0f, dk + (size_t)j0 * d);
        }
    }
    xt_free(p);
    xt_free(ds);
    xt_free(D);
    // END SOLUTION
}

/* ------------------------------------------------------------------------ */

static void run_case(xt_case *c)
{
    int T = (int)xt_case_int(c, "T"), d = (int)xt_case_int(c, "hd");
    int br = (int)xt_case_int(c, "br"), bc = (int)xt_case_int(c, "bc");
    long n = (long)T * d;
    xt_array q = xt_case_input_const(c, "q"), k = xt_case_input_const(c, "k");
    xt_array v = xt_case_input_const(c, "v");
    if (xt_case_is(c, "flash_attention_forward")) {
        float *o = xt_case_alloc(c, "o", n, XT_F32), *lse = xt_case_alloc(c, "lse", T, XT_F32);
        flash_attention_forward(o, lse, q.data, k.data, v.data, T, d, br, bc);
        xt_case_output(c, "o", o, XT_F32, n);
        xt_case_output(c, "lse", lse, XT_F32, T);
    } else {
        xt_array dout = xt_case_input_const(c, "dout"), o = xt_case_input_const(c, "o");
        xt_array lse = xt_case_input_const(c, "lse");
        float *dq = xt_case_alloc(c, "dq", n, XT_F32), *dk = xt_case_alloc(c, "dk", n, XT_F32);
        float *dv = xt_case_alloc(c, "dv", n, XT_F32);
        flash_attention_backward(dq, dk, dv, dout.data, q.data, k.data, v.data, o.data, lse.data, T,
                                 d, br, bc);
        xt_case_output(c, "dq", dq, XT_F32, n);
        xt_case_output(c, "dk", dk, XT_F32, n);
        xt_case_output(c, "dv", dv, XT_F32, n);
    }
}

/*
 * The demo: one small sequence, the same on every rank; each rank tiles it
 * its own way (br x bc from TILES), so the ranks show four tilings of one
 * attention. Rank 0 also draws its tile grid and the running max and sum of
 * one query tile, computed from their definition (over the keys seen so far).
 */
enum { DT = 10, DD = 4 };
static const int TILES[4][2] = {{4, 3}, {3, 4}, {16, 5}, {2, 16}};

/* Plain causal attention of one head, in double: the definition, row by row. */
static void plain_attention(double *o, double *lse, const float *q, const float *k, const float *v,
                            const double *shift, int which, double eps)
{
    /* The inputs q, k, v, the one named by `which` (0, 1, 2) moved by eps shift. */
    double x[3][DT * DD];
    const float *in[3] = {q, k, v};
    for (int t = 0; t < 3; t++)
        for (int e = 0; e < DT * DD; e++)
            x[t][e] = in[t][e] + (t == which ? eps * shift[e] : 0.0);
    for (int i = 0; i < DT; i++) {
        double s[DT], mx = -INFINITY, sum = 0.0;
        for (int j = 0; j <= i; j++) {
            s[j] = 0.0;
            for (int c = 0; c < DD; c++)
                s[j] += x[0][i * DD + c] * x[1][j * DD + c];
            s[j] /= sqrt((double)DD);
            mx = s[j] > mx ? s[j] : mx;
        }
        for (int j = 0; j <= i; j++)
            sum += exp(s[j] - mx);
        lse[i] = mx + log(sum);
        for (int c = 0; c < DD; c++) {
            o[i * DD + c] = 0.0;
            for (int j = 0; j <= i; j++)
                o[i * DD + c] += exp(s[j] - lse[i]) * x[2][j * DD + c];
        }
    }
}

/* L = sum of dout . o for the plain attention with one input moved: what dq, dk, dv are the
 * gradient of. */
static double plain_loss(const float *q, const float *k, const float *v, const float *dout,
                         const double *shift, int which, double eps)
{
    double o[DT * DD], lse[DT], loss = 0.0;
    plain_attention(o, lse, q, k, v, shift, which, eps);
    for (int e = 0; e < DT * DD; e++)
        loss += dout[e] * o[e];
    return loss;
}

static void draw_grid(MPI_Comm comm, int br, int bc)
{
    char line[128], label[32];
    int n = snprintf(line, sizeof line, "    %-14s", "");
    for (int j0 = 0; j0 < DT; j0 += bc) {
        snprintf(label, sizeof label, "%d..%d", j0, (j0 + bc < DT ? j0 + bc : DT) - 1);
        n += snprintf(line + n, sizeof line - (size_t)n, " %-6s", label);
    }
    xt_printf_root(comm, "%s   <- keys\n", line);
    for (int i0 = 0; i0 < DT; i0 += br) {
        int last = (i0 + br < DT ? i0 + br : DT) - 1;
        snprintf(label, sizeof label, "%d..%d", i0, last);
        n = snprintf(line, sizeof line, "    queries %-6s", label);
        for (int j0 = 0; j0 < DT; j0 += bc) {
            int jlast = (j0 + bc < DT ? j0 + bc : DT) - 1;
            const char *mark = j0 > last ? " .     " : jlast > i0 ? " [M]   " : " [ ]   ";
            n += snprintf(line + n, sizeof line - (size_t)n, "%s", mark);
        }
        xt_printf_root(comm, "%s\n", line);
    }
    xt_printf_root(comm, "    [ ]: every key visible  [M]: the mask cuts it  .: skipped, "
                         "all masked\n");
}

/* The running max m and sum l of query tile 4..7 after each key tile, from the definition. */
static void draw_running(MPI_Comm comm, const float *q, const float *k, int br, int bc)
{
    int i0 = br, last = 2 * br - 1;
    char line[160];
    int n = snprintf(line, sizeof line, "    query");
    for (int j0 = 0; j0 <= last; j0 += bc)
        n += snprintf(line + n, sizeof line - (size_t)n, "   keys 0..%-7d",
                      (j0 + bc < DT ? j0 + bc : DT) - 1);
    xt_printf_root(comm, "%s\n", line);
    for (int i = i0; i <= last; i++) {
        n = snprintf(line, sizeof line, "    %5d", i);
        double prev = -INFINITY;
        for (int j0 = 0; j0 <= last; j0 += bc) {
            int upto = j0 + bc - 1 < i ? j0 + bc - 1 : i; /* the keys seen so far: 0..upto */
            double s[DT], mx = -INFINITY, sum = 0.0;
            for (int j = 0; j <= upto; j++) {
                s[j] = 0.0;
                for (int c = 0; c < DD; c++)
                    s[j] += (double)q[i * DD + c] * k[j * DD + c];
                s[j] /= sqrt((double)DD);
                mx = s[j] > mx ? s[j] : mx;
            }
            for (int j = 0; j <= upto; j++)
                sum += exp(s[j] - mx);
            n += snprintf(line + n, sizeof line - (size_t)n, "   m %5.2f%c l %4.2f", mx,
                          mx > prev && j0 > 0 ? '*' : ' ', sum);
            prev = mx;
        }
        xt_printf_root(comm, "%s\n", line);
    }
    xt_printf_root(comm, "    *: the max grew: l and the output so far rescaled by "
                         "e^(m_old - m_new)\n");
}

static void demo(MPI_Comm comm)
{
    int rank;
    MPI_Comm_rank(comm, &rank);
    int br = TILES[rank % 4][0], bc = TILES[rank % 4][1];
    float q[DT * DD], k[DT * DD], v[DT * DD], dout[DT * DD], o[DT * DD], lse[DT];
    float dq[DT * DD], dk[DT * DD], dv[DT * DD];
    double shift[DT * DD], plain_o[DT * DD], plain_lse[DT];
    xt_rng g = xt_rng_seed(6);
    xt_rng_fill_uniform(&g, q, DT * DD, -2.0f, 2.0f);
    xt_rng_fill_uniform(&g, k, DT * DD, -2.0f, 2.0f);
    xt_rng_fill_uniform(&g, v, DT * DD, -1.0f, 1.0f);
    xt_rng_fill_uniform(&g, dout, DT * DD, -1.0f, 1.0f);
    for (int e = 0; e < DT * DD; e++)
        shift[e] = xt_rng_uniform(&g, -1.0f, 1.0f);

    xt_printf_root(comm,
                   "flash attention in one process: T = %d, d = %d, causal; every rank "
                   "has the same\nq, k, v and cuts them into its own tiles of br queries "
                   "x bc keys.\n\n",
                   DT, DD);
    xt_printf_root(comm, "rank 0's tiles, br = %d, bc = %d:\n", TILES[0][0], TILES[0][1]);
    draw_grid(comm, TILES[0][0], TILES[0][1]);
    xt_printf_root(comm,
                   "\nthe running max m and sum l of query tile %d..%d after each key "
                   "tile:\n",
                   TILES[0][0], 2 * TILES[0][0] - 1);
    draw_running(comm, q, k, TILES[0][0], TILES[0][1]);

    long pairs0, tiles0 = xt_attn_tiles(&pairs0), pairs1;
    flash_attention_forward(o, lse, q, k, v, DT, DD, br, bc);
    long tiles = xt_attn_tiles(&pairs1) - tiles0, grid = 0, visible = 0;
    size_t fwd_peak = xt_mem_peak(XT_MEM_KINDS);
    for (int i0 = 0; i0 < DT; i0 += br)
        for (int j0 = 0; j0 < DT; j0 += bc) {
            grid++;
            visible += j0 <= (i0 + br < DT ? i0 + br : DT) - 1;
        }
    plain_attention(plain_o, plain_lse, q, k, v, shift, -1, 0.0);
    double err_o = 0.0, err_lse = 0.0;
    for (int e = 0; e < DT * DD; e++)
        err_o = fmax(err_o, fabs(o[e] - plain_o[e]));
    for (int i = 0; i < DT; i++)
        err_lse = fmax(err_lse, fabs(lse[i] - plain_lse[i]));

    /* Backward: the change of L = sum dout . o along `shift`, moving q, k or v alone, against
     * finite differences of the plain attention (in double: exact to ~1e-9). */
    flash_attention_backward(dq, dk, dv, dout, q, k, v, o, lse, DT, DD, br, bc);
    const float *grads[3] = {dq, dk, dv};
    double err_grad = 0.0, eps = 1e-4;
    for (int t = 0; t < 3; t++) {
        double along = 0.0;
        for (int e = 0; e < DT * DD; e++)
            along += grads[t][e] * shift[e];
        double fd =
            (plain_loss(q, k, v, dout, shift, t, eps) - plain_loss(q, k, v, dout, shift, t, -eps)) /
            (2 * eps);
        err_grad = fmax(err_grad, fabs(along - fd));
    }
    size_t peak = xt_mem_peak(XT_MEM_KINDS);

    xt_printf_root(comm,
                   "\neach rank: the score tiles it computed of its grid, the largest "
                   "error against\nthe plain definition (dq, dk, dv: along a direction, "
                   "against finite\ndifferences), and its scratch at the peak (xt_alloc): "
                   "forward, then forward\nand backward; one T x T matrix is %d B.\n",
                   4 * DT * DT);
    xt_printf_root(comm, "     br x bc   tiles  pairs      o      lse   grads   scratch\n");
    xt_printf_ordered(comm, "%3d x %-3d  %2ld/%-2ld  %5ld  %.0e  %.0e  %.0e  %3zu/%zu B\n", br, bc,
                      tiles, grid, pairs1 - pairs0, err_o, err_lse, err_grad, fwd_peak, peak);
    int ok = tiles == visible && err_o < 1e-5 && err_lse < 1e-5 && err_grad < 1e-4, all;
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "(at T = 32768 the same tiles need the same scratch; the T x T "
                         "matrix, 4 GiB)\n");
    xt_printf_root(comm, "every rank's tiles and values agree with the plain computation: %s\n",
                   all ? "yes" : "NO");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
