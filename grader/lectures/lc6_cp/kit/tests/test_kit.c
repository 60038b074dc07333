/*
 * test_kit.c: lecture 6's kit (kit.h): attention blocks and the log-sum-exp merge, run on inputs from grader/nntest.py, which compares
 * what comes back with grader/nn.py's twins (the case files: nn_case.h).
 *
 *     kind     inputs                  outputs
 *     attn_block q k v dout dq0 dk0 dv0  out lse dq dk dv pairs (one block,
 *                                      mask=N|C|S; the backward from the block's
 *                                      own out, lse; pairs: xt_attn_pairs' count)
 *     lse_merge o lse o_blk lse_blk    o lse (merged in place)
 */
#include "kit.h"
#include "tests/nn_case.h"

static void run_attn_block(const test_case *c)
{
    int nq = (int)iparam(c, "nq"), nk = (int)iparam(c, "nk"), hq = (int)iparam(c, "hq"),
        hkv = (int)iparam(c, "hkv"), hd = (int)iparam(c, "hd");
    xt_mask mask = (xt_mask)param(c, "mask")[0];
    xt_array q, k, v, dout, dq, dk, dv;
    floats(c, "q", &q);
    floats(c, "k", &k);
    floats(c, "v", &v);
    floats(c, "dout", &dout);
    floats(c, "dq0", &dq);
    floats(c, "dk0", &dk);
    floats(c, "dv0", &dv);
    float *out = nans((long)nq * hq * hd), *lse = nans((long)nq * hq);
    long f0 = xt_attn_pairs('F'), b0 = xt_attn_pairs('B');
    xt_attn_block_forward(out, lse, q.data, k.data, v.data, nq, nk, hq, hkv, hd, mask);
    xt_attn_block_backward(unless_null(c, "dq", dq.data), unless_null(c, "dk", dk.data),
                           unless_null(c, "dv", dv.data), dout.data, q.data, k.data, v.data, out,
                           lse, nq, nk, hq, hkv, hd, mask);
    long counted[2] = {xt_attn_pairs('F') - f0, xt_attn_pairs('B') - b0};
    save(c, "out", out, XT_F32, nq, (long)hq * hd);
    save(c, "lse", lse, XT_F32, nq, hq);
    save(c, "dq", dq.data, XT_F32, nq, (long)hq * hd);
    save(c, "dk", dk.data, XT_F32, nk, (long)hkv * hd);
    save(c, "dv", dv.data, XT_F32, nk, (long)hkv * hd);
    save(c, "pairs", counted, XT_I64, 2, 1);
    FREE_BUFFERS(out, lse);
    FREE_ARRAYS(&q, &k, &v, &dout, &dq, &dk, &dv);
}

static void run_lse_merge(const test_case *c)
{
    int rows = (int)iparam(c, "rows"), d = (int)iparam(c, "d");
    xt_array o, lse, o_blk, lse_blk;
    floats(c, "o", &o);
    floats(c, "lse", &lse);
    floats(c, "o_blk", &o_blk);
    floats(c, "lse_blk", &lse_blk);
    xt_lse_merge(o.data, lse.data, o_blk.data, lse_blk.data, rows, d);
    save(c, "o", o.data, XT_F32, rows, d);
    save(c, "lse", lse.data, XT_F32, rows, 1);
    FREE_ARRAYS(&o, &lse, &o_blk, &lse_blk);
}

int main(int argc, char **argv)
{
    static const nn_case_kind kinds[] = {{"attn_block", run_attn_block},
                                         {"lse_merge", run_lse_merge}};
    return nn_case_main(argc, argv, "lc6_cp kit", kinds, sizeof kinds / sizeof kinds[0], NULL, NULL,
                        NULL);
}
