/*
 * cases.c: case mode, the protocol between the grader and a program.
 *
 * The grader writes DIR/cases.txt, one case a line:
 *
 *     case 3 np=4 fn=ring_allreduce op=sum watchdog=10
 *
 * and the inputs of case k as DIR/c<k>/g<g>.r<r>.<name>.npy (or, the same for
 * every rank of a group, DIR/c<k>/g<g>.<name>.npy). A case of np ranks runs on
 * every group of np consecutive world ranks at once, each group with its own
 * inputs:
 *
 *     world  0 1 2 3 4 5 6 7        np=4: groups 0 and 1
 *            [g0   ] [g1   ]        np=3: groups 0 and 1, ranks 6 and 7 idle
 *
 * so one launch grades several world sizes, and code that talks on
 * MPI_COMM_WORLD instead of its communicator mixes the groups' data up.
 * Each case gets a fresh duplicate of its group's communicator, so a stray
 * message cannot leak into the next case.
 *
 * Every rank of a group writes its outputs as DIR/c<k>/g<g>.r<r>.<name>.npy
 * and then DIR/c<k>/g<g>.r<r>.mpi.txt: its MPI counters and events for the
 * case, its time, and notes (guard bytes overwritten, an input modified, a
 * request never completed). The grader reads those; docs/grader.md has more.
 */
#define _GNU_SOURCE
#include "xt_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { MAX_KEYS = 32, GUARD = 64 };
static const unsigned char GUARD_BYTE = 0xA5;
static const unsigned char FRESH_BYTE = 0xCD; /* output buffers before the program writes them */

typedef struct {
    char name[64];
    unsigned char *block; /* GUARD | data | GUARD */
    size_t bytes;
    long count;
    xt_dtype dtype;
    unsigned char *original; /* inputs that must not change: a copy to compare with */
} guarded;

struct xt_case {
    int index, np, group, rank;
    MPI_Comm comm;
    int nkeys;
    char *keys[MAX_KEYS], *vals[MAX_KEYS];
    char *line;
    char dir[3072];
    char scratch[3200]; /* xt_case_scratch_dir's, once made */
    guarded *bufs;
    int nbufs, capbufs;
};

static const char *cases_dir;

void xti_cases_dir(const char *dir)
{
    cases_dir = dir;
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

MPI_Comm xt_case_comm(const xt_case *c)
{
    return c->comm;
}

static const char *find_key(const xt_case *c, const char *key)
{
    for (int i = 0; i < c->nkeys; i++)
        if (strcmp(c->keys[i], key) == 0)
            return c->vals[i];
    return NULL;
}

const char *xt_case_str(const xt_case *c, const char *key)
{
    const char *v = find_key(c, key);
    if (!v)
        xt_die("case %d has no parameter '%s' (line: %s)", c->index, key, c->line);
    return v;
}

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
    return find_key(c, key) != NULL;
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
    input_path(c, name, path, sizeof path);
    xt_array a;
    if (xti_npy_read(path, &a, err, sizeof err) != 0)
        xt_die("%s", err);
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
    char path[4096];
    snprintf(path, sizeof path, "%s/g%d.r%d.%s.npy", c->dir, c->group, c->rank, name);
    long shape[1] = {count};
    xt_npy_write(path, data, dt, 1, shape);
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
static void check_and_free_buffers(xt_case *c)
{
    const unsigned char *pat = guard_pattern();
    for (int i = 0; i < c->nbufs; i++) {
        guarded *g = &c->bufs[i];
        size_t es = xt_dtype_size(g->dtype);
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
}

/* ------------------------------------------------------------------ running */

/* A barrier that sleeps while it waits, so idle ranks leave the cores to busy ones. */
static void quiet_barrier(void)
{
    MPI_Request r;
    PMPI_Ibarrier(MPI_COMM_WORLD, &r);
    int done = 0;
    for (int spin = 0;; spin++) {
        PMPI_Test(&r, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        if (spin < 50) {
            sched_yield();
        } else {
            struct timespec ts = {0, 100 * 1000};
            nanosleep(&ts, NULL);
        }
    }
}

static int parse_line(char *line, xt_case *c)
{
    char *save = NULL;
    char *tok = strtok_r(line, " \t\r\n", &save);
    if (!tok || tok[0] == '#' || strcmp(tok, "case") != 0)
        return 0;
    tok = strtok_r(NULL, " \t\r\n", &save);
    XT_CHECK(tok, "cases.txt: 'case' without a number");
    c->index = atoi(tok);
    c->nkeys = 0;
    while ((tok = strtok_r(NULL, " \t\r\n", &save))) {
        char *eq = strchr(tok, '=');
        XT_CHECK(eq, "cases.txt, case %d: '%s' is not key=value", c->index, tok);
        XT_CHECK(c->nkeys < MAX_KEYS, "cases.txt, case %d: too many parameters", c->index);
        *eq = 0;
        c->keys[c->nkeys] = tok;
        c->vals[c->nkeys++] = eq + 1;
    }
    const char *np = find_key(c, "np");
    XT_CHECK(np, "cases.txt, case %d: no np=", c->index);
    c->np = atoi(np);
    return 1;
}

typedef struct {
    int np;
    MPI_Comm comm; /* this rank's group of np, or MPI_COMM_NULL */
} group_comm;

void xt_run_cases(void (*run_case)(xt_case *c))
{
    XT_CHECK(cases_dir, "xt_run_cases: not in case mode (no --cases DIR)");
    char path[4096];
    snprintf(path, sizeof path, "%s/cases.txt", cases_dir);
    FILE *f = fopen(path, "r");
    XT_CHECK(f, "cannot open %s: %s", path, strerror(errno));

    /* Read every line first: all ranks must agree on the groups before any case runs. */
    char **lines = NULL;
    int nlines = 0, cap = 0;
    char buf[8192];
    while (fgets(buf, sizeof buf, f)) {
        if (nlines == cap) {
            cap = cap ? 2 * cap : 64;
            lines = realloc(lines, (size_t)cap * sizeof *lines);
            XT_CHECK(lines, "out of memory");
        }
        lines[nlines++] = strdup(buf);
    }
    fclose(f);

    group_comm groups[16];
    int ngroups = 0;
    for (int i = 0; i < nlines; i++) {
        xt_case c = {0};
        char *copy = strdup(lines[i]);
        if (parse_line(copy, &c)) {
            XT_CHECK(c.np >= 1 && c.np <= xti.size,
                     "case %d needs %d ranks but this run has %d: start it with mpirun -np %d",
                     c.index, c.np, xti.size, c.np);
            int known = 0;
            for (int g = 0; g < ngroups; g++)
                known |= groups[g].np == c.np;
            if (!known) {
                XT_CHECK(ngroups < 16, "too many different np in one run");
                int copies = xti.size / c.np;
                int color = xti.rank < copies * c.np ? xti.rank / c.np : MPI_UNDEFINED;
                groups[ngroups].np = c.np;
                PMPI_Comm_split(MPI_COMM_WORLD, color, xti.rank, &groups[ngroups].comm);
                ngroups++;
            }
        }
        free(copy);
    }

    for (int i = 0; i < nlines; i++) {
        xt_case c = {0};
        c.line = strdup(lines[i]);
        char *work = lines[i];
        if (!parse_line(work, &c)) {
            free(c.line);
            continue;
        }
        MPI_Comm group = MPI_COMM_NULL;
        for (int g = 0; g < ngroups; g++)
            if (groups[g].np == c.np)
                group = groups[g].comm;

        quiet_barrier();
        xti.case_index = c.index;
        const char *wd = find_key(&c, "watchdog");
        xt_watchdog_arm(wd ? atof(wd) : xti.watchdog_limit);

        if (group == MPI_COMM_NULL) {
            atomic_store(&xti.phase, XTI_PHASE_IDLE);
            free(c.line);
            continue;
        }
        c.group = xti.rank / c.np;
        PMPI_Comm_rank(group, &c.rank);
        PMPI_Comm_dup(group, &c.comm);
        snprintf(c.dir, sizeof c.dir, "%s/c%d", cases_dir, c.index);
        xti.case_group = c.group;
        xti.case_rank = c.rank;
        xti.case_np = c.np;
        xti.case_comm = c.comm;

        xti_case_stats_begin();
        atomic_store(&xti.phase, XTI_PHASE_USER);
        double t0 = xti_now();
        run_case(&c);
        double seconds = xti_now() - t0;
        atomic_store(&xti.phase, XTI_PHASE_DONE);

        check_and_free_buffers(&c);
        xti_check_pending_requests();
        char rec[4096];
        snprintf(rec, sizeof rec, "%s/g%d.r%d.mpi.txt", c.dir, c.group, c.rank);
        xti_case_stats_write(rec, seconds);

        xti.case_comm = MPI_COMM_NULL;
        PMPI_Comm_free(&c.comm);
        free(c.line);
    }
    quiet_barrier();
    xt_watchdog_arm(0);
    xti.case_index = -1;
    atomic_store(&xti.phase, XTI_PHASE_FINISH);
    for (int g = 0; g < ngroups; g++)
        if (groups[g].comm != MPI_COMM_NULL)
            PMPI_Comm_free(&groups[g].comm);
    for (int i = 0; i < nlines; i++)
        free(lines[i]);
    free(lines);
}
