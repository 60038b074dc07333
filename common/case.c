/*
 * case.c: one case of case mode, as the program under test sees it: its
 * parameters, its inputs and outputs, and the guard bytes around them.
 *
 * The grader writes the inputs of group g of case k into one file,
 * DIR/c<k>/g<g>.inputs, and every rank of the group writes its outputs into
 * one file of its own, DIR/c<k>/g<g>.r<r>.outputs: a file per group and per
 * rank, not per array, since a grade makes thousands of cases and creating
 * and removing a file is most of what an array costs. Both files are arrays
 * one after the other, each a line with its name and then the array in .npy
 * form:
 *
 *     r0.x\n <.npy of rank 0's x>  r1.x\n <.npy>  lr\n <.npy of every rank's lr> ...
 *
 * (an input for one rank is named r<rank>.<name>, one for every rank of the
 * group plain <name>; outputs are plain names, and a later output of a name
 * replaces an earlier one). The outputs file ends with the rank's record of
 * the case (record.c), after a line "#record". Inputs in files of their own
 * (DIR/c<k>/g<g>.r<r>.<name>.npy, DIR/c<k>/g<g>.<name>.npy or
 * DIR/c<k>/<name>.npy) are still read where the inputs file has no such
 * array (the benches write theirs so).
 * Inputs and outputs live in buffers with guard bytes on both sides, checked
 * when the function returns, and a const input is compared with a copy.
 * Built with AddressSanitizer, the guard bytes are poisoned for it too: the
 * first access to them stops the rank at the line that made it.
 * While case mode is on, .npy reads by path refuse the grader's files: a
 * program reads its own inputs through xt_case_input, never another rank's.
 * case_run.c reads the cases and runs them.
 */
#define _GNU_SOURCE /* realpath */
#include "xt_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { GUARD = 64 };
static const unsigned char GUARD_BYTE = 0xA5;
static const unsigned char FRESH_BYTE = 0xCD; /* output buffers before the program writes them */

typedef struct xti_guarded {
    char name[64];
    unsigned char *block; /* GUARD | data | GUARD */
    size_t bytes;
    long count;
    xt_dtype dtype;
    unsigned char *original; /* inputs that must not change: a copy to compare with */
} guarded;

/* ---------------------------------------------------------------- case files */

static const char *cases_dir;

/* The npy guard: 1 (and err) for a path inside the cases directory. */
static int refuse_case_files(const char *path, char *err, size_t errcap)
{
    char real_cases[4096], real_path[4096];
    if (!cases_dir || !realpath(cases_dir, real_cases))
        return 0;
    size_t n = strlen(real_cases);
    if (!realpath(path, real_path) || strncmp(real_path, real_cases, n) != 0 ||
        (real_path[n] != '/' && real_path[n] != 0))
        return 0;
    if (err && errcap)
        snprintf(err, errcap, "%s: the grader's case files are read only through xt_case_input",
                 path);
    return 1;
}

void xti_cases_dir(const char *dir)
{
    cases_dir = dir;
    xti_npy_set_guard(refuse_case_files);
}

const char *xti_cases_path(void)
{
    return cases_dir;
}

int xt_case_mode(void)
{
    return cases_dir != NULL;
}

/* -------------------------------------------------------------- parameters */

const char *xti_case_param(const xt_case *c, const char *key)
{
    for (int i = 0; i < c->nkeys; i++)
        if (strcmp(c->keys[i], key) == 0)
            return c->vals[i];
    return NULL;
}

MPI_Comm xt_case_comm(const xt_case *c)
{
    return c->comm;
}

const char *xt_case_str(const xt_case *c, const char *key)
{
    const char *v = xti_case_param(c, key);
    if (!v)
        xt_die("case %d has no parameter '%s' (line: %s)", c->index, key, c->line);
    return v;
}

/* The grader reads what a case left here after the launch: grader/harness.py's scratch_dir. */
const char *xt_case_scratch_dir(xt_case *c)
{
    if (!c->scratch[0]) {
        snprintf(c->scratch, sizeof c->scratch, "%s/g%d.scratch", c->dir, c->group);
        XT_CHECK(mkdir(c->scratch, 0777) == 0 || errno == EEXIST, "cannot create %s: %s",
                 c->scratch, strerror(errno));
    }
    return c->scratch;
}

int xt_case_has(const xt_case *c, const char *key)
{
    return xti_case_param(c, key) != NULL;
}

long xt_case_int(const xt_case *c, const char *key)
{
    const char *v = xt_case_str(c, key);
    char *end;
    long x = strtol(v, &end, 10);
    XT_CHECK(*v && !*end, "case %d: parameter %s=%s is not an integer", c->index, key, v);
    return x;
}

const char *xt_case_fn(const xt_case *c)
{
    return xt_case_str(c, "fn");
}

int xt_case_is(const xt_case *c, const char *fn)
{
    return strcmp(xt_case_fn(c), fn) == 0;
}

MPI_Op xt_case_op(const xt_case *c)
{
    const struct {
        const char *name;
        MPI_Op op;
    } ops[] = {
        {"sum", MPI_SUM},   {"prod", MPI_PROD}, {"max", MPI_MAX},   {"min", MPI_MIN},
        {"land", MPI_LAND}, {"lor", MPI_LOR},   {"lxor", MPI_LXOR}, {"band", MPI_BAND},
        {"bor", MPI_BOR},   {"bxor", MPI_BXOR},
    };
    const char *name = xt_case_str(c, "op");
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (strcmp(name, ops[i].name) == 0)
            return ops[i].op;
    xt_die("case %d: unknown op '%s'", c->index, name);
}

/* ------------------------------------------------------------------ buffers */

/* The case whose buffers xti_case_describe names: the one running. */
static const xt_case *described;

static guarded *new_guarded(xt_case *c, const char *name, long count, xt_dtype dt)
{
    if (c->nbufs == c->capbufs) {
        c->capbufs = c->capbufs ? 2 * c->capbufs : 8;
        c->bufs = realloc(c->bufs, (size_t)c->capbufs * sizeof *c->bufs);
        XT_CHECK(c->bufs, "out of memory");
    }
    guarded *g = &c->bufs[c->nbufs++];
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->count = count;
    g->dtype = dt;
    g->bytes = (size_t)count * xt_dtype_size(dt);
    g->block = xt_malloc(g->bytes + 2 * GUARD);
    memset(g->block, GUARD_BYTE, GUARD);
    memset(g->block + GUARD + g->bytes, GUARD_BYTE, GUARD);
    XTI_POISON(g->block, GUARD);
    XTI_POISON(g->block + GUARD + g->bytes, GUARD);
    described = c;
    return g;
}

static void input_path(const xt_case *c, const char *name, char *out, size_t cap)
{
    struct stat sb;
    snprintf(out, cap, "%s/g%d.r%d.%s.npy", c->dir, c->group, c->rank, name);
    if (stat(out, &sb) == 0)
        return;
    snprintf(out, cap, "%s/g%d.%s.npy", c->dir, c->group, name);
    if (stat(out, &sb) == 0)
        return;
    snprintf(out, cap, "%s/%s.npy", c->dir, name);
}

/* The array called `name` in the group's inputs file: 0 and *out, 1 when the file or the
 * array is absent, -1 and err when the file is damaged. */
static int packed_input(xt_case *c, const char *name, xt_array *out, char *err, size_t cap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/g%d.inputs", c->dir, c->group);
    if (!c->inputs_read) {
        c->inputs_read = 1;
        struct stat sb;
        if (stat(path, &sb) == 0 &&
            xti_file_slurp(path, &c->inputs, &c->inputs_bytes, err, cap) != 0)
            return -1;
    }
    if (!c->inputs)
        return 1;
    char mine[96];
    snprintf(mine, sizeof mine, "r%d.%s", c->rank, name);
    const char *wanted[2] = {mine, name}; /* this rank's own first, then the group's */
    for (int w = 0; w < 2; w++) {
        size_t at = 0, len = c->inputs_bytes;
        while (at < len) {
            const unsigned char *nl = memchr(c->inputs + at, '\n', len - at);
            if (!nl)
                break;
            size_t nlen = (size_t)(nl - (c->inputs + at)), used = 0;
            int match = nlen == strlen(wanted[w]) && memcmp(c->inputs + at, wanted[w], nlen) == 0;
            at += nlen + 1;
            if (match) /* the array itself; the others are read past */
                return xti_npy_parse(c->inputs + at, len - at, path, out, 1, NULL, err, cap);
            xt_array header;
            if (xti_npy_parse(c->inputs + at, len - at, path, &header, 0, &used, err, cap) != 0)
                return -1;
            at += used;
        }
    }
    return 1;
}

/* Names are identifiers: no way to reach another rank's file through one. */
static void check_name(const xt_case *c, const char *name)
{
    int ok = name && (name[0] == '_' || (name[0] >= 'a' && name[0] <= 'z') ||
                      (name[0] >= 'A' && name[0] <= 'Z'));
    for (const char *p = name; ok && *p; p++)
        ok = *p == '_' || (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
             (*p >= '0' && *p <= '9');
    XT_CHECK(ok, "case %d: '%s' is not a valid input or output name", c->index,
             name ? name : "(null)");
}

static xt_array load_guarded(xt_case *c, const char *name, int keep_original)
{
    char path[4096], err[512];
    check_name(c, name);
    xt_array a;
    int found = packed_input(c, name, &a, err, sizeof err);
    if (found < 0)
        xt_die("%s", err);
    if (found > 0) {
        input_path(c, name, path, sizeof path);
        if (xti_npy_read(path, &a, err, sizeof err) != 0)
            xt_die("%s", err);
    }
    guarded *g = new_guarded(c, name, a.count, a.dtype);
    memcpy(g->block + GUARD, a.data, g->bytes);
    if (keep_original)
        g->original = a.data;
    else
        free(a.data);
    a.data = g->block + GUARD;
    return a;
}

xt_array xt_case_input(xt_case *c, const char *name)
{
    return load_guarded(c, name, 0);
}

xt_array xt_case_input_const(xt_case *c, const char *name)
{
    return load_guarded(c, name, 1);
}

void *xt_case_alloc(xt_case *c, const char *name, long count, xt_dtype dt)
{
    XT_CHECK(count >= 0, "xt_case_alloc(%s): negative count %ld", name, count);
    guarded *g = new_guarded(c, name, count, dt);
    memset(g->block + GUARD, FRESH_BYTE, g->bytes);
    return g->block + GUARD;
}

#ifdef XT_ASAN
/* Byte by byte through a volatile pointer: a loop the compiler may not turn into memcpy, which
 * AddressSanitizer checks wherever it is called from. */
XTI_NO_ASAN static void copy_unchecked(unsigned char *to, const void *from, size_t n)
{
    const volatile unsigned char *f = from;
    for (size_t i = 0; i < n; i++)
        to[i] = f[i];
}
#endif

FILE *xti_case_outputs(xt_case *c, char *path, size_t cap)
{
    snprintf(path, cap, "%s/g%d.r%d.outputs", c->dir, c->group, c->rank);
    if (!c->outputs) {
        c->outputs = fopen(path, "wb");
        XT_CHECK(c->outputs, "cannot create %s: %s", path, strerror(errno));
    }
    return c->outputs;
}

void xti_case_close(xt_case *c)
{
    free(c->inputs);
    c->inputs = NULL;
    c->inputs_bytes = 0;
    c->inputs_read = 0;
    if (c->outputs)
        fclose(c->outputs);
    c->outputs = NULL;
}

void xt_case_output(xt_case *c, const char *name, const void *data, xt_dtype dt, long count)
{
    if (!data && count > 0) {
        xti_note("WRONG", "output '%s' should hold %ld elements but its pointer is NULL", name,
                 count);
        return;
    }
    if (count < 0) {
        xti_note("WRONG", "output '%s' has a negative length %ld", name, count);
        return;
    }
    check_name(c, name);
    long shape[1] = {count};
    const void *from = data;
#ifdef XT_ASAN
    /* A count larger than the buffer is the program's bug, and the grader reports it from the
     * values, as without AddressSanitizer: libxt's own read past the end is no finding. */
    size_t bytes = (size_t)count * xt_dtype_size(dt);
    unsigned char *copy = NULL;
    if (bytes && __asan_region_is_poisoned((void *)(uintptr_t)data, bytes)) {
        copy = xt_malloc(bytes);
        copy_unchecked(copy, data, bytes);
        from = copy;
    }
#endif
    char path[4096];
    FILE *f = xti_case_outputs(c, path, sizeof path);
    /* Flushed at once: what a rank wrote before it crashed is still there to read. */
    int ok = fprintf(f, "%s\n", name) > 0 && xti_npy_fwrite(f, from, dt, 1, shape) == 0 &&
             fflush(f) == 0;
#ifdef XT_ASAN
    free(copy);
#endif
    XT_CHECK(ok, "cannot write %s: %s", path, strerror(errno));
}

void xt_case_note(xt_case *c, const char *fmt, ...)
{
    (void)c;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    xti_note("WRONG", "%s", buf);
}

static long first_changed(const unsigned char *a, const unsigned char *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long)i;
    return -1;
}

static const unsigned char *guard_pattern(void)
{
    static unsigned char pat[GUARD];
    if (!pat[0])
        memset(pat, GUARD_BYTE, GUARD);
    return pat;
}

/* Guard bytes and const inputs, checked after the function returns. */
void xti_case_check_buffers(xt_case *c)
{
    const unsigned char *pat = guard_pattern();
    for (int i = 0; i < c->nbufs; i++) {
        guarded *g = &c->bufs[i];
        size_t es = xt_dtype_size(g->dtype);
        XTI_UNPOISON(g->block, GUARD);
        XTI_UNPOISON(g->block + GUARD + g->bytes, GUARD);
        long before = first_changed(g->block, pat, GUARD);
        long after = first_changed(g->block + GUARD + g->bytes, pat, GUARD);
        if (before >= 0)
            xti_note("WRONG",
                     "wrote before the start of '%s' (%ld x %s): byte %ld before it changed",
                     g->name, g->count, xt_dtype_name(g->dtype), GUARD - before);
        if (after >= 0)
            xti_note("WRONG",
                     "wrote past the end of '%s' (%ld x %s): element [%ld] (byte %ld after the "
                     "end) changed",
                     g->name, g->count, xt_dtype_name(g->dtype), g->count + after / (long)es,
                     after);
        if (g->original) {
            long at = first_changed(g->block + GUARD, g->original, g->bytes);
            if (at >= 0)
                xti_note("WRONG",
                         "modified its input '%s' (a const argument): element [%ld] changed",
                         g->name, at / (long)es);
            free(g->original);
        }
        free(g->block);
    }
    free(c->bufs);
    c->bufs = NULL;
    c->nbufs = c->capbufs = 0;
    if (described == c)
        described = NULL;
}

int xti_case_describe(const void *addr, char *out, size_t cap)
{
    const unsigned char *a = addr;
    for (int i = 0; described && i < described->nbufs; i++) {
        const guarded *g = &described->bufs[i];
        const unsigned char *data = g->block + GUARD, *end = data + g->bytes;
        if (a < g->block || a >= end + GUARD || (a >= data && a < end))
            continue;
        if (a < data)
            snprintf(out, cap, "before the start of '%s' (%ld x %s): byte %ld before it", g->name,
                     g->count, xt_dtype_name(g->dtype), (long)(data - a));
        else
            snprintf(out, cap,
                     "past the end of '%s' (%ld x %s): element [%ld] (byte %ld after the end)",
                     g->name, g->count, xt_dtype_name(g->dtype),
                     g->count + (long)(a - end) / (long)xt_dtype_size(g->dtype), (long)(a - end));
        return 1;
    }
    return xti_mem_describe(addr, out, cap);
}
