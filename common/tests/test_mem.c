/*
 * test_mem.c: memory accounting (xt_alloc, xt_free, xt_mem_*), checked by
 * the self-test in case mode. Each case's fn says what it does:
 *   units   the accounting on its own (xti_mem_pause too), and the MLP's
 *           buffers by kind; writes "failures" (int32, one element), each
 *           failure also printed
 *   grow    rank r: params 1000+8r and 500 bytes, optimizer 3000 bytes, then
 *           frees all but the 500 params bytes (kept for the next case)
 *   after   grads 100 bytes, freed; frees the 500 bytes kept from `grow`;
 *           then xt_mem_print(comm, "after")
 *   overrun  writes 8 bytes past the end of a 40-byte grads block, frees it
 *   underrun writes 3 bytes before a 16-byte comm block and keeps it: found
 *            at the end of the case (and only there: `uaf` frees it)
 *   uaf      writes to a freed 400-byte params block, then frees 17 MiB, which
 *            pushes it out of the quarantine; writes to a freed 12-byte
 *            optimizer block, found at the end of the case
 * The self-test reads the "M" lines of grow's and after's records: after's
 * params peak is 500, not grow's 1500+8r, since each case starts its peaks
 * from what is in use then; and the WRONG notes of the last three.
 *
 *   --mode badfree    (no --cases) hands xt_free a pointer from malloc: dies
 *   --mode doublefree frees a block twice: dies, naming both xt_free calls
 *   --mode overrun    writes past a block's end, frees it: dies
 *   --mode leak       writes past a block's end, never frees it: dies at xt_finalize
 */
#include "xt_harness.h"
#include "xt_internal.h" /* xti_mem_pause */

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        printf("FAIL rank %d: ", xt_rank());                                                       \
        printf(__VA_ARGS__);                                                                       \
        printf("\n");                                                                              \
        failures++;                                                                                \
    } while (0)

/* Each kind's bytes in use and peak, and the total's (index XT_MEM_KINDS). */
typedef struct {
    size_t cur[XT_MEM_KINDS + 1], peak[XT_MEM_KINDS + 1];
} snapshot;

static snapshot snap(void)
{
    snapshot s;
    for (int k = 0; k <= XT_MEM_KINDS; k++) {
        s.cur[k] = xt_mem_current((xt_mem_kind)k);
        s.peak[k] = xt_mem_peak((xt_mem_kind)k);
    }
    return s;
}

static const char *name(int k)
{
    return k == XT_MEM_KINDS ? "total" : xt_mem_kind_name((xt_mem_kind)k);
}

/* Since `before`, each kind k's current grew by dcur[k] and its peak by dpeak[k]
 * (k = XT_MEM_KINDS: the total). */
static void expect_all(const char *what, const snapshot *before, const long *dcur,
                       const long *dpeak)
{
    snapshot now = snap();
    for (int k = 0; k <= XT_MEM_KINDS; k++) {
        long got_cur = (long)(now.cur[k] - before->cur[k]);
        long got_peak = (long)(now.peak[k] - before->peak[k]);
        if (got_cur != dcur[k] || got_peak != dpeak[k])
            FAIL("%s: %s current %+ld peak %+ld, expected %+ld %+ld", what, name(k), got_cur,
                 got_peak, dcur[k], dpeak[k]);
    }
}

/* The same when only `kind` changed (and the total with it). */
static void expect(const char *what, const snapshot *before, int kind, long dcur, long dpeak)
{
    long c[XT_MEM_KINDS + 1] = {0}, p[XT_MEM_KINDS + 1] = {0};
    c[kind] = c[XT_MEM_KINDS] = dcur;
    p[kind] = p[XT_MEM_KINDS] = dpeak;
    expect_all(what, before, c, p);
}

static void units(void)
{
    /* Start from peak == current, so that deltas of the peak are exact. */
    xt_mem_reset_peak();
    snapshot s0 = snap();
    for (int k = 0; k <= XT_MEM_KINDS; k++)
        if (s0.peak[k] != s0.cur[k])
            FAIL("xt_mem_reset_peak: %s peak %zu, current %zu", name(k), s0.peak[k], s0.cur[k]);

    /* Zeroed: dirty blocks, free them, and ask for the same size again. */
    unsigned char *dirty = xt_alloc(XT_MEM_COMM, 4096);
    memset(dirty, 0xAB, 4096);
    xt_free(dirty);
    for (int t = 0; t < 3; t++) {
        unsigned char *p = xt_alloc(XT_MEM_COMM, 4096);
        for (int i = 0; i < 4096; i++)
            if (p[i]) {
                FAIL("xt_alloc: byte %d of a fresh block is %#x, not 0", i, p[i]);
                break;
            }
        if ((uintptr_t)p % 32)
            FAIL("xt_alloc: %p is not 32-byte aligned", (void *)p);
        memset(p, 0xAB, 4096);
        xt_free(p);
    }
    xt_mem_reset_peak();
    s0 = snap();

    /* Counting, kind by kind: current and peak; free lowers current only. */
    for (int k = 0; k < XT_MEM_KINDS; k++) {
        snapshot before = snap();
        size_t a = 100 + 24 * (size_t)k, b = 7;
        char *p = xt_alloc((xt_mem_kind)k, a), *q = xt_alloc((xt_mem_kind)k, b);
        if (xt_alloc_size(p) != a || xt_alloc_size(q) != b)
            FAIL("xt_alloc_size: %zu and %zu, expected %zu and %zu", xt_alloc_size(p),
                 xt_alloc_size(q), a, b);
        expect("two blocks", &before, k, (long)(a + b), (long)(a + b));
        memset(p, 1, a); /* all usable */
        memset(q, 1, b);
        xt_free(p);
        expect("the first freed", &before, k, (long)b, (long)(a + b));
        char *r = xt_alloc((xt_mem_kind)k, 50);
        expect("a smaller block in its place", &before, k, (long)(b + 50), (long)(a + b));
        xt_free(r);
        xt_free(q);
        expect("both freed", &before, k, 0, (long)(a + b));
        xt_mem_reset_peak();
        expect("xt_mem_reset_peak", &before, k, 0, 0);
    }

    /* Kinds add up in the total; its peak is of the sum, not a sum of peaks. */
    snapshot before = snap();
    void *p = xt_alloc(XT_MEM_PARAMS, 300);
    xt_free(p);
    void *g = xt_alloc(XT_MEM_GRADS, 200), *o = xt_alloc(XT_MEM_OPTIMIZER, 100);
    snapshot now = snap();
    if (now.peak[XT_MEM_KINDS] - before.peak[XT_MEM_KINDS] != 300 ||
        now.cur[XT_MEM_KINDS] - before.cur[XT_MEM_KINDS] != 300 ||
        now.peak[XT_MEM_PARAMS] - before.peak[XT_MEM_PARAMS] != 300 ||
        now.peak[XT_MEM_GRADS] - before.peak[XT_MEM_GRADS] != 200)
        FAIL("total: current %+ld peak %+ld, expected +300 +300",
             (long)(now.cur[XT_MEM_KINDS] - before.cur[XT_MEM_KINDS]),
             (long)(now.peak[XT_MEM_KINDS] - before.peak[XT_MEM_KINDS]));
    xt_free(g);
    xt_free(o);

    /* Zero bytes, and freeing NULL: fine, and counted as nothing. */
    xt_mem_reset_peak();
    before = snap();
    void *z = xt_alloc(XT_MEM_MASTER, 0);
    if (!z || xt_alloc_size(z) != 0 || xt_alloc_size(NULL) != 0)
        FAIL("xt_alloc(0) gave %p of size %zu; xt_alloc_size(NULL) %zu", z, xt_alloc_size(z),
             xt_alloc_size(NULL));
    xt_free(z);
    xt_free(NULL);
    expect("xt_alloc(0), xt_free(NULL)", &before, XT_MEM_MASTER, 0, 0);

    /* Paused (libxt's own buffers, a demo's twin model): neither counted nor, freed, uncounted. */
    xt_mem_reset_peak();
    before = snap();
    void *counted = xt_alloc(XT_MEM_PARAMS, 64);
    xti_mem_pause(1);
    void *hidden = xt_alloc(XT_MEM_PARAMS, 1000);
    xt_free(counted);
    xti_mem_pause(0);
    expect("xti_mem_pause: a block counted before, freed during", &before, XT_MEM_PARAMS, 0, 64);
    xt_free(hidden);
    expect("xti_mem_pause: a block allocated during, freed after", &before, XT_MEM_PARAMS, 0, 64);

    /* Freed memory reads as NaN (float and double), also a block larger than the quarantine,
     * and the quarantine holds no bytes of the accounting. */
    xt_mem_reset_peak();
    before = snap();
    size_t sizes[] = {64, 4096, (size_t)20 << 20};
    for (int t = 0; t < 3; t++) {
        float *f = xt_alloc(XT_MEM_ACTIVATIONS, sizes[t]);
        size_t n = sizes[t] / sizeof(float);
        for (size_t i = 0; i < n; i++)
            f[i] = 1.0f;
        xt_free(f);
        size_t bad = n;
        for (size_t i = 0; i < n && bad == n; i++)
            if (!isnan(f[i]))
                bad = i;
        if (bad < n)
            FAIL("poison: float [%zu] of a freed %zu-byte block reads %g, not NaN", bad, sizes[t],
                 (double)f[bad]);
        if (t == 0 && !isnan(((double *)(void *)f)[3]))
            FAIL("poison: a double of a freed block reads %g, not NaN", ((double *)(void *)f)[3]);
    }
    expect("three blocks freed into the quarantine", &before, XT_MEM_ACTIVATIONS, 0,
           (long)sizes[2]);

    /* The names the M lines use. */
    const char *names[] = {"params", "grads", "optimizer", "master", "activations", "comm"};
    for (int k = 0; k < XT_MEM_KINDS; k++)
        if (strcmp(xt_mem_kind_name((xt_mem_kind)k), names[k]))
            FAIL("xt_mem_kind_name(%d) is %s, expected %s", k, xt_mem_kind_name((xt_mem_kind)k),
                 names[k]);
    if (strcmp(xt_mem_kind_name(XT_MEM_KINDS), "?") || strcmp(xt_mem_kind_name(-1), "?"))
        FAIL("xt_mem_kind_name of a kind that is none: %s", xt_mem_kind_name(XT_MEM_KINDS));

    /* The MLP's buffers by kind: weights, gradients, what forward keeps; padding, dropping. */
    xt_mem_reset_peak();
    before = snap();
    xt_mlp m;
    xt_mlp_init_str(&m, "3,5,2", XT_RELU, XT_MSE);
    size_t np = sizeof(float) * (size_t)m.nparams; /* (3*5+5 + 5*2+2) floats */
    long init[XT_MEM_KINDS + 1] = {
        [XT_MEM_PARAMS] = (long)np, [XT_MEM_GRADS] = (long)np, [XT_MEM_KINDS] = 2 * (long)np};
    expect_all("xt_mlp_init: params and grads", &before, init, init);
    xt_mem_reset_peak();
    before = snap();
    float x[4 * 3] = {0};
    xt_mlp_forward(&m, x, 4);
    /* pre and post of each layer (4 rows x 5, 4 x 2), two deltas of the widest (5). */
    long act = (long)sizeof(float) * (2 * 4 * 5 + 2 * 4 * 2 + 2 * 4 * 5);
    expect("xt_mlp_forward(4 rows)", &before, XT_MEM_ACTIVATIONS, act, act);
    xt_mem_reset_peak();
    before = snap();
    xt_mlp_pad_params(&m, m.nparams + 10);
    if (xt_alloc_size(m.params) != np + 40)
        FAIL("xt_mlp_pad_params: %zu bytes, expected %zu", xt_alloc_size(m.params), np + 40);
    for (int i = 0; i < 10; i++)
        if (m.params[m.nparams + i] != 0.0f)
            FAIL("xt_mlp_pad_params: padding [%d] is %g", i, (double)m.params[m.nparams + i]);
    /* Both buffers exist for a moment: the peak shows it. */
    expect("xt_mlp_pad_params(+10)", &before, XT_MEM_PARAMS, 40, (long)np + 40);
    xt_mem_reset_peak();
    before = snap();
    xt_mlp_drop_params(&m);
    xt_mlp_drop_grads(&m);
    if (m.params || m.grads)
        FAIL("xt_mlp_drop_params/grads left a pointer");
    snapshot dropped = snap();
    if ((long)(dropped.cur[XT_MEM_PARAMS] - before.cur[XT_MEM_PARAMS]) != -(long)np - 40 ||
        (long)(dropped.cur[XT_MEM_GRADS] - before.cur[XT_MEM_GRADS]) != -(long)np)
        FAIL("xt_mlp_drop_params/grads: params %+ld grads %+ld bytes, expected %+ld %+ld",
             (long)(dropped.cur[XT_MEM_PARAMS] - before.cur[XT_MEM_PARAMS]),
             (long)(dropped.cur[XT_MEM_GRADS] - before.cur[XT_MEM_GRADS]), -(long)np - 40,
             -(long)np);
    xt_mlp_free(&m);
    now = snap();
    for (int k = 0; k <= XT_MEM_KINDS; k++)
        if (now.cur[k] != s0.cur[k])
            FAIL("after xt_mlp_free: %s %zu bytes in use, %zu before", name(k), now.cur[k],
                 s0.cur[k]);
}

static void *kept; /* from case `grow` to case `after` */

static void run_case(xt_case *c)
{
    int rank;
    MPI_Comm_rank(xt_case_comm(c), &rank);
    if (xt_case_is(c, "units")) {
        units();
        int32_t n = failures;
        xt_case_output(c, "failures", &n, XT_I32, 1);
    } else if (xt_case_is(c, "grow")) {
        void *a = xt_alloc(XT_MEM_PARAMS, 1000 + 8 * (size_t)rank);
        void *b = xt_alloc(XT_MEM_OPTIMIZER, 3000);
        kept = xt_alloc(XT_MEM_PARAMS, 500);
        xt_free(a);
        xt_free(b);
    } else if (xt_case_is(c, "overrun")) {
        unsigned char *p = xt_alloc(XT_MEM_GRADS, 40);
        memset(p + 40, 0, 8);
        xt_free(p);
    } else if (xt_case_is(c, "underrun")) {
        unsigned char *p = xt_alloc(XT_MEM_COMM, 16);
        memset(p - 3, 0, 3);
        kept = p;
    } else if (xt_case_is(c, "uaf")) {
        xt_free(kept); /* its zone was restored once reported: no second report */
        kept = NULL;
        float *w = xt_alloc(XT_MEM_PARAMS, 400);
        xt_free(w);
        w[5] = 1.0f;
        xt_free(xt_alloc(XT_MEM_ACTIVATIONS, (size_t)17 << 20));
        double *d = xt_alloc(XT_MEM_OPTIMIZER, 12);
        xt_free(d);
        d[1] = 2.0; /* bytes 8..11 of the block, and 4 bytes of its zone */
    } else if (xt_case_is(c, "after")) {
        xt_free(xt_alloc(XT_MEM_GRADS, 100));
        xt_free(kept);
        kept = NULL;
        xt_mem_print(xt_case_comm(c), "after");
    }
}

static void demo(MPI_Comm comm)
{
    (void)comm;
    const char *mode = xt_arg_str("mode", "");
    if (strcmp(mode, "badfree") == 0) {
        char *p = malloc(64);
        xt_free(p);
    } else if (strcmp(mode, "doublefree") == 0) {
        void *p = xt_alloc(XT_MEM_COMM, 24);
        xt_free(p);
        xt_free(p);
    } else if (strcmp(mode, "overrun") == 0) {
        float *p = xt_alloc(XT_MEM_PARAMS, 4 * sizeof(float));
        p[4] = 1.0f;
        xt_free(p);
    } else if (strcmp(mode, "leak") == 0) {
        float *p = xt_alloc(XT_MEM_PARAMS, 4 * sizeof(float));
        p[5] = 1.0f;
        return; /* xt_finalize checks it */
    }
    printf("test_mem: run it with --cases DIR, or --mode badfree\n");
}

int main(int argc, char **argv)
{
    return xt_main(argc, argv, run_case, demo);
}
