/*
 * trace.c: the timeline of a run, as one Chrome trace-event JSON file.
 *
 * With XT_TRACE=1 in the environment (or --trace) every MPI call the program
 * makes, and every range it names with xt_trace_begin/xt_trace_end, becomes
 * an event on its rank's row: one process per rank, so Perfetto
 * (https://ui.perfetto.dev) or chrome://tracing shows the ranks one above
 * the other. Events stay in memory until xt_finalize, where rank 0 gathers
 * them and writes the file, so tracing adds no I/O to the timed region.
 *
 * Timestamps are wall-clock (CLOCK_REALTIME) microseconds since rank 0's
 * start: exact between ranks of one machine, as good as the clocks' sync
 * across machines.
 */
#include "xt_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

enum { MAX_TRACE_EVENTS = 1 << 20, MAX_DEPTH = 64 };

typedef struct {
    const char *name; /* static (an MPI function) or owned (a range) */
    double t0, t1;    /* seconds since the origin */
    int peer;         /* -1: none */
    long bytes;       /* -1: none */
    char mpi;         /* 1: an MPI call, 0: a named range */
} trace_event;

static int tracing;
static const char *trace_path;
static double origin;
static trace_event *events;
static long n_events, cap_events, dropped;
static struct {
    char *name;
    double t0;
} open_ranges[MAX_DEPTH];
static int depth;

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void add(const char *name, double t0, double t1, int peer, long bytes, char mpi)
{
    if (n_events == cap_events) {
        if (cap_events >= MAX_TRACE_EVENTS) {
            dropped++;
            return;
        }
        cap_events = cap_events ? 2 * cap_events : 4096;
        events = realloc(events, (size_t)cap_events * sizeof *events);
        XT_CHECK(events, "out of memory for the trace");
    }
    events[n_events++] = (trace_event){name, t0, t1, peer, bytes, mpi};
}

void xti_trace_init(void)
{
    const char *env = getenv("XT_TRACE");
    const char *opt = xt_arg_str("trace", env);
    if (!opt || !*opt || strcmp(opt, "0") == 0)
        return;
    tracing = 1;
    trace_path = strcmp(opt, "1") == 0 ? NULL : opt;
    double mine = wall_now();
    origin = mine;
    PMPI_Bcast(&origin, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
}

int xt_trace_enabled(void)
{
    return tracing;
}

double xti_trace_clock(void)
{
    return tracing ? wall_now() - origin : 0.0;
}

void xti_trace_mpi(const char *fn, double t0, int peer, long bytes)
{
    if (tracing)
        add(fn, t0, wall_now() - origin, peer, bytes, 1);
}

void xt_trace_begin(const char *name)
{
    if (!tracing)
        return;
    XT_CHECK(depth < MAX_DEPTH, "xt_trace_begin(\"%s\"): ranges nested more than %d deep", name,
             MAX_DEPTH);
    open_ranges[depth].name = strdup(name);
    XT_CHECK(open_ranges[depth].name, "out of memory for the trace");
    open_ranges[depth].t0 = wall_now() - origin;
    depth++;
}

void xt_trace_end(void)
{
    if (!tracing)
        return;
    XT_CHECK(depth > 0, "xt_trace_end() without an open xt_trace_begin()");
    depth--;
    add(open_ranges[depth].name, open_ranges[depth].t0, wall_now() - origin, -1, -1, 0);
}

/* Appends to a growing text buffer. */
typedef struct {
    char *s;
    size_t len, cap;
} text;

static void put(text *t, const char *fmt, ...) XT_PRINTF(2, 3);
static void put(text *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
        va_end(ap);
        XT_CHECK(n >= 0, "cannot format a trace event");
        if (t->len + (size_t)n < t->cap) {
            t->len += (size_t)n;
            return;
        }
        t->cap = 2 * t->cap + (size_t)n + 1;
        t->s = realloc(t->s, t->cap);
        XT_CHECK(t->s, "out of memory for the trace");
    }
}

/* A range's name as a JSON string body: quotes, backslashes and controls escaped. */
static void put_name(text *t, const char *name)
{
    for (const char *p = name; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        if (ch == '"' || ch == '\\')
            put(t, "\\%c", ch);
        else if (ch < 0x20)
            put(t, "\\u%04x", ch);
        else
            put(t, "%c", ch);
    }
}

static void rank_events(text *t, int rank)
{
    put(t,
        "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n"
        "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n",
        rank, rank, rank, rank);
    for (long i = 0; i < n_events; i++) {
        const trace_event *e = &events[i];
        put(t, "{\"name\":\"");
        put_name(t, e->name);
        put(t, "\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":0,\"ts\":%.3f,\"dur\":%.3f",
            e->mpi ? "mpi" : "compute", rank, 1e6 * e->t0, 1e6 * (e->t1 - e->t0));
        if (e->peer >= 0 || e->bytes >= 0) {
            put(t, ",\"args\":{");
            if (e->peer >= 0)
                put(t, "\"peer\":%d%s", e->peer, e->bytes >= 0 ? "," : "");
            if (e->bytes >= 0)
                put(t, "\"bytes\":%ld", e->bytes);
            put(t, "}");
        }
        put(t, "},\n");
    }
    if (dropped)
        put(t,
            "{\"name\":\"%ld events not recorded (limit %d per rank)\",\"ph\":\"i\",\"s\":\"p\","
            "\"pid\":%d,\"tid\":0,\"ts\":%.3f},\n",
            dropped, MAX_TRACE_EVENTS, rank, n_events ? 1e6 * events[n_events - 1].t1 : 0.0);
}

static const char *program_name(void)
{
    const char *p = xti.argc > 0 ? xti.argv[0] : "xt";
    const char *slash = strrchr(p, '/');
    return slash ? slash + 1 : p;
}

/* Rank 0 writes every rank's events; called by xt_finalize on every rank. */
void xti_trace_write(void)
{
    if (!tracing)
        return;
    while (depth > 0) /* ranges left open end here */
        xt_trace_end();
    text t = {0};
    rank_events(&t, xti.rank);
    XT_CHECK(t.len < (size_t)1 << 31, "this rank's trace is over 2 GiB");
    int len = (int)t.len, *lens = NULL, *displs = NULL;
    char *all = NULL;
    long total = 0, n_mine = n_events, n_all = 0;
    if (xti.rank == 0) {
        lens = xt_malloc(sizeof(int) * (size_t)xti.size);
        displs = xt_malloc(sizeof(int) * (size_t)xti.size);
    }
    PMPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, MPI_COMM_WORLD);
    PMPI_Reduce(&n_mine, &n_all, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    if (xti.rank == 0) {
        for (int r = 0; r < xti.size; r++) {
            XT_CHECK(total + lens[r] < (long)1 << 31, "the trace is over 2 GiB");
            displs[r] = (int)total;
            total += lens[r];
        }
        all = xt_malloc((size_t)total + 1);
    }
    PMPI_Gatherv(t.s, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, MPI_COMM_WORLD);
    free(t.s);
    if (xti.rank == 0) {
        char path[4096];
        if (trace_path) {
            snprintf(path, sizeof path, "%s", trace_path);
        } else {
            struct stat st;
            const char *dir = stat("build", &st) == 0 && S_ISDIR(st.st_mode) ? "build/trace" : ".";
            if (strcmp(dir, ".") != 0 && mkdir(dir, 0777) != 0 && errno != EEXIST)
                dir = ".";
            snprintf(path, sizeof path, "%s/%s.trace.json", dir, program_name());
        }
        FILE *f = fopen(path, "w");
        XT_CHECK(f, "cannot write the trace to %s: %s", path, strerror(errno));
        /* Every event ends in ",\n"; the last one's comma would end the array badly. */
        if (total >= 2)
            total -= 2;
        fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
        fwrite(all, 1, (size_t)total, f);
        fprintf(f, "\n]}\n");
        XT_CHECK(fclose(f) == 0, "cannot write the trace to %s", path);
        fprintf(stderr,
                "xt: trace of %d ranks, %ld events: %s (open it in https://ui.perfetto.dev)\n",
                xti.size, n_all, path);
        free(all);
        free(lens);
        free(displs);
    }
}
