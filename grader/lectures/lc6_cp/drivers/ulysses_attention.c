/*
 * The driver of lc6_cp/ulysses_attention.c: the grader's cases, the demo and main.
 * make compiles it as one unit with the exercise's file, which it follows
 * (-include), so it sees everything that file defines (docs/instructors.md,
 * "A lecture's drivers").
 */

static void run_case(xt_case *cs)
{
    MPI_Comm comm = xt_case_comm(cs);
    int np;
    MPI_Comm_size(comm, &np);
    int T = (int)xt_case_int(cs, "T"), hd = (int)xt_case_int(cs, "hd"), c = T / np;
    if (xt_case_is(cs, "ulysses_seq_to_heads") || xt_case_is(cs, "ulysses_heads_to_seq")) {
        int heads = (int)xt_case_int(cs, "heads");
        long n = (long)c * heads * hd;
        xt_array in = xt_case_input_const(cs, "in");
        float *out = xt_case_alloc(cs, "out", n, XT_F32);
        if (xt_case_is(cs, "ulysses_seq_to_heads"))
            ulysses_seq_to_heads(out, in.data, c, heads, hd, comm);
        else
            ulysses_heads_to_seq(out, in.data, c, heads, hd, comm);
        xt_case_output(cs, "out", out, XT_F32, n);
        return;
    }
    int hq = (int)xt_case_int(cs, "hq"), hkv = (int)xt_case_int(cs, "hkv");
    int kvh = hkv >= np ? hkv : np;
    long nq = (long)c * hq * hd, nk = (long)c * hkv * hd;
    long sq = (long)T * (hq / np) * hd, sk = (long)T * (kvh / np) * hd, sl = (long)T * (hq / np);
    if (xt_case_is(cs, "ulysses_attention_forward")) {
        xt_array q = xt_case_input_const(cs, "q"), k = xt_case_input_const(cs, "k");
        xt_array v = xt_case_input_const(cs, "v");
        float *o = xt_case_alloc(cs, "o", nq, XT_F32);
        /* Written through saved's pointers, read back through these: the buffers are the
         * caller's, and a forward that points saved elsewhere has not filled them. */
        float *bufs[5];
        const char *names[5] = {"q_heads", "k_heads", "v_heads", "o_heads", "lse_heads"};
        long sizes[5] = {sq, sk, sk, sq, sl};
        for (int i = 0; i < 5; i++)
            bufs[i] = xt_case_alloc(cs, names[i], sizes[i], XT_F32);
        ulysses_saved saved = {bufs[0], bufs[1], bufs[2], bufs[3], bufs[4]};
        ulysses_attention_forward(o, &saved, q.data, k.data, v.data, c, hq, hkv, hd, comm);
        xt_case_output(cs, "o", o, XT_F32, nq);
        for (int i = 0; i < 5; i++)
            xt_case_output(cs, names[i], bufs[i], XT_F32, sizes[i]);
    } else {
        /* The saved tensors as the grader computed them; the backward only reads them. */
        xt_array dout = xt_case_input_const(cs, "dout");
        ulysses_saved saved = {(float *)xt_case_input_const(cs, "q_heads").data,
                               (float *)xt_case_input_const(cs, "k_heads").data,
                               (float *)xt_case_input_const(cs, "v_heads").data,
                               (float *)xt_case_input_const(cs, "o_heads").data,
                               (float *)xt_case_input_const(cs, "lse_heads").data};
        float *dq = xt_case_alloc(cs, "dq", nq, XT_F32), *dk = xt_case_alloc(cs, "dk", nk, XT_F32);
        float *dv = xt_case_alloc(cs, "dv", nk, XT_F32);
        ulysses_attention_backward(dq, dk, dv, dout.data, &saved, c, hq, hkv, hd, comm);
        xt_case_output(cs, "dq", dq, XT_F32, nq);
        xt_case_output(cs, "dk", dk, XT_F32, nk);
        xt_case_output(cs, "dv", dv, XT_F32, nk);
    }
}

/*
 * The demo's layout pictures: element (position t, head h) holds 10 t + h, printed as the
 * two digits "th"; rows (positions) are two spaces apart, heads one.
 */
static void driver_print_layout(MPI_Comm comm, const char *what, const float *x, int rows,
                                int width)
{
    char line[512];
    int at = 0;
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < width && at < (int)sizeof line - 8; j++)
            at += snprintf(line + at, sizeof line - (size_t)at, "%s%02d",
                           i + j ? (j ? " " : "  ") : "", (int)x[i * width + j]);
    xt_printf_ordered(comm, "%s %s\n", what, line);
}

/*
 * Part 1, the layouts: T = 8 positions of H = 4 heads of one column, each element holding
 * its position and head (10 t + h), through ulysses_seq_to_heads and back. Part 2,
 * attention: T = 8, hq = 4, hkv = 2, hd = 2, random q, k, v and dout, forward (saving the
 * head layout) and backward (from it) beside one process's attention over the whole
 * sequence (at np = 4 the two KV heads are replicated: each is repeated twice before the
 * all-to-all).
 */
static void demo(MPI_Comm comm)
{
    enum { T = 8, H = 4, HQ = 4, HKV = 2, HD = 2 };
    int np, rank;
    MPI_Comm_size(comm, &np);
    MPI_Comm_rank(comm, &rank);
    if (H % np) {
        xt_printf_root(comm, "this demo runs on 1, 2 or 4 ranks (H = %d heads)\n", H);
        return;
    }
    int c = T / np, hl = H / np;
    float seq[T * H], heads[T * H], back[T * H];
    for (int i = 0; i < c; i++)
        for (int h = 0; h < H; h++)
            seq[i * H + h] = (float)(10 * (rank * c + i) + h);
    xt_printf_root(comm,
                   "T = %d positions, H = %d heads, hd = 1; each value reads 'th': "
                   "position t, head h\n",
                   T, H);
    xt_printf_root(comm, "sequence-sharded: rank r holds positions r*%d.., every head\n", c);
    driver_print_layout(comm, "in ", seq, c, H);
    long a0 = xt_mpi_calls("MPI_Alltoall");
    ulysses_seq_to_heads(heads, seq, c, H, 1, comm);
    xt_printf_root(comm,
                   "ulysses_seq_to_heads (one all-to-all): every position, rank r's "
                   "heads r*%d..\n",
                   hl);
    driver_print_layout(comm, "out", heads, T, hl);
    ulysses_heads_to_seq(back, heads, c, H, 1, comm);
    xt_printf_root(comm, "ulysses_heads_to_seq (one all-to-all): back to positions\n");
    driver_print_layout(comm, "out", back, c, H);
    long calls = xt_mpi_calls("MPI_Alltoall") - a0;
    int same = memcmp(seq, back, sizeof(float) * (size_t)c * H) == 0, all;
    MPI_Allreduce(&same, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "round trip gives every rank its input back: %s (%ld all-to-alls)\n",
                   all ? "yes" : "NO", calls);
    if (np > HKV) { /* fewer KV heads than ranks: each repeated np / hkv times, then split */
        for (int i = 0; i < c; i++)
            for (int e = 0; e < np; e++)
                seq[i * np + e] = (float)(10 * (rank * c + i) + e / (np / HKV));
        xt_printf_root(comm,
                       "K with hkv = %d heads < np: each KV head repeated %d times, so "
                       "'th' is KV head h\n",
                       HKV, np / HKV);
        driver_print_layout(comm, "in ", seq, c, np);
        ulysses_seq_to_heads(heads, seq, c, np, 1, comm);
        driver_print_layout(comm, "out", heads, T, 1);
    }
    xt_printf_root(comm, "\n");

    /* Part 2: every rank draws the whole sequence from one seed and keeps its rows. */
    enum { QW = HQ * HD, KW = HKV * HD };
    static float q[T * QW], k[T * KW], v[T * KW], dout[T * QW];
    static float o1[T * QW], lse1[T * HQ], dq1[T * QW], dk1[T * KW], dv1[T * KW];
    float o[T * QW], dq[T * QW], dk[T * KW], dv[T * KW];
    /* The saved head layout: at most every position of every head, whatever np. */
    static float sq[T * QW], sk[T * 4 * HD], sv[T * 4 * HD], so[T * QW], slse[T * HQ];
    ulysses_saved saved = {sq, sk, sv, so, slse};
    xt_rng g = xt_rng_seed(6);
    xt_rng_fill_uniform(&g, q, T * QW, -2, 2);
    xt_rng_fill_uniform(&g, k, T * KW, -2, 2);
    xt_rng_fill_uniform(&g, v, T * KW, -1, 1);
    xt_rng_fill_uniform(&g, dout, T * QW, -1, 1);
    const float *qr = q + c * rank * QW, *kr = k + c * rank * KW, *vr = v + c * rank * KW;
    int kvh = HKV >= np ? HKV : np;
    xt_printf_root(comm, "causal attention, T %d, hq %d, hkv %d, hd %d: KV heads %s\n", T, HQ, HKV,
                   HD, HKV >= np ? "split like the query heads" : "repeated, then split");
    int q_lo = rank * HQ / np, q_hi = (rank + 1) * HQ / np - 1, group = HQ / HKV;
    char qs[32], ks[32];
    int k_lo = q_lo / group, k_hi = q_hi / group;
    if (q_lo == q_hi)
        snprintf(qs, sizeof qs, "head %d", q_lo);
    else
        snprintf(qs, sizeof qs, "heads %d..%d", q_lo, q_hi);
    if (k_lo == k_hi)
        snprintf(ks, sizeof ks, "head %d", k_lo);
    else
        snprintf(ks, sizeof ks, "heads %d..%d", k_lo, k_hi);
    xt_printf_ordered(comm, "query %s -> KV %s%s\n", qs, ks, kvh > HKV ? " (a copy of it)" : "");
    a0 = xt_mpi_calls("MPI_Alltoall");
    ulysses_attention_forward(o, &saved, qr, kr, vr, c, HQ, HKV, HD, comm);
    long fwd = xt_mpi_calls("MPI_Alltoall") - a0;
    xt_print_buffer_ordered(comm, "saved lse, position 0, own heads: ", slse, HQ / np, MPI_FLOAT);
    ulysses_attention_backward(dq, dk, dv, dout + c * rank * QW, &saved, c, HQ, HKV, HD, comm);
    long bwd = xt_mpi_calls("MPI_Alltoall") - a0 - fwd;

    /* One process: the whole sequence in one block (every rank, its own rows compared). */
    memset(dq1, 0, sizeof dq1);
    memset(dk1, 0, sizeof dk1);
    memset(dv1, 0, sizeof dv1);
    xt_attn_block_forward(o1, lse1, q, k, v, T, T, HQ, HKV, HD, XT_MASK_CAUSAL);
    xt_attn_block_backward(dq1, dk1, dv1, dout, q, k, v, o1, lse1, T, T, HQ, HKV, HD,
                           XT_MASK_CAUSAL);
    float err = xt_max_abs_diff(o, o1 + c * rank * QW, (long)c * QW);
    for (int t = 0; t < T; t++) /* the saved lse: every position, this rank's heads */
        err = fmaxf(
            err, xt_max_abs_diff(slse + t * (HQ / np), lse1 + t * HQ + rank * (HQ / np), HQ / np));
    err = fmaxf(err, xt_max_abs_diff(dq, dq1 + c * rank * QW, (long)c * QW));
    err = fmaxf(err, xt_max_abs_diff(dk, dk1 + c * rank * KW, (long)c * KW));
    err = fmaxf(err, xt_max_abs_diff(dv, dv1 + c * rank * KW, (long)c * KW));
    float worst;
    MPI_Allreduce(&err, &worst, 1, MPI_FLOAT, MPI_MAX, comm);
    xt_printf_root(comm, "max |difference| from one process %.1e\n", worst);
    xt_printf_root(comm, "o, the saved lse, dq, dk, dv agree with one process: %s\n",
                   worst < 1e-5f ? "yes" : "NO");
    xt_printf_root(comm,
                   "all-to-alls: forward %ld, backward %ld (K, V, dK, dV %d heads wide; the "
                   "lse\nnever travels)\n",
                   fwd, bwd, kvh);
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
