/*
 * record.c: the record of one case on one rank, which the grader reads
 * (docs/grader.md): the last thing in the rank's outputs file of the case,
 * DIR/c<k>/g<g>.r<r>.outputs (case.c), after a line "#record":
 *
 *     #record
 *     # xt case record, rank 1 of the case (world rank 5)
 *     T 0.000412                        the seconds the function took
 *     C MPI_Send p2p 3 3 0 96 0         counters per function (counters.c)
 *     E MPI_Send S 2 0 32 case          one line per message (counters.c), with
 *     E MPI_Iallreduce C -1 -1 96 case backward:2  the libxt computation running, if
 *                                       any (here: the hook after layer 2's backward)
 *     N RACE ...                        notes (notes.c)
 *     M params 4096 4096                memory per kind (mem.c)
 *     S F 3 0 0.0012 0.0013 ...         a line a lecture's kit logged (xt_event): its
 *                                       kind ("S", a pipeline stage's call), then
 *                                       what the kit wrote; the lecture's grader
 *                                       package reads its own kinds
 *     W experts 2 0 17                  rows multiplied through a watched weight (work.c):
 *                                       the array, its block and part, the rows
 *     SD 12                             events not logged (past the log's cap)
 *     END
 *
 * xti_record_begin clears what a case collects; xti_record_write writes it.
 */
#include "xt_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/*
 * The events the case's kit logged, in call order: each kept as its record
 * line, formatted when logged (a few hundred per case at most, so the
 * formatting costs nothing next to the compute it describes).
 */
enum { MAX_CALLS = 1 << 16, CALL_LINE = 112, MAX_KINDS = 8, MAX_HOOKS = 8 };
typedef struct {
    char line[CALL_LINE];
} call_line;
static call_line *calls;
static long n_calls, cap_calls, dropped_calls;
static double case_began; /* xti_now() when the case began; 0 before the first */

/* The event kinds kits declared (xt_event_kind), and how many lines of each this case holds. */
static struct {
    char kind[4];
    const char *describe;
    long lines;
} kinds[MAX_KINDS];
static int n_kinds;
static void (*case_hooks[MAX_HOOKS])(void);
static int n_case_hooks;

void xti_record_begin(void)
{
    xt_mpi_stats_reset();
    xt_mem_reset_peak();
    xti_notes_clear();
    xti_work_begin();
    n_calls = dropped_calls = 0;
    for (int i = 0; i < n_kinds; i++)
        kinds[i].lines = 0;
    case_began = xti_now();
    for (int i = 0; i < n_case_hooks; i++)
        case_hooks[i]();
}

void xt_on_case_begin(void (*hook)(void))
{
    for (int i = 0; i < n_case_hooks; i++)
        if (case_hooks[i] == hook)
            return;
    XT_CHECK(n_case_hooks < MAX_HOOKS, "xt_on_case_begin: more than %d hooks", MAX_HOOKS);
    case_hooks[n_case_hooks++] = hook;
}

double xt_case_clock(void)
{
    return xti_now() - case_began;
}

int xt_case_running(void)
{
    return xti.case_index >= 0;
}

long xt_events_logged(void)
{
    return xti_events_logged();
}

static int kind_index(const char *kind)
{
    for (int i = 0; i < n_kinds; i++)
        if (!strcmp(kinds[i].kind, kind))
            return i;
    return -1;
}

static int kind_valid(const char *kind)
{
    size_t n = strlen(kind);
    if (n < 1 || n >= sizeof kinds[0].kind)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (kind[i] < 'A' || kind[i] > 'Z')
            return 0;
    /* The record's own line kinds (docs/grader.md) stay libxt's. */
    static const char *const taken[] = {"T", "C", "E", "N", "M", "W", "SD", "END"};
    for (size_t i = 0; i < sizeof taken / sizeof *taken; i++)
        if (!strcmp(kind, taken[i]))
            return 0;
    return 1;
}

void xt_event_kind(const char *kind, const char *describe)
{
    XT_CHECK(kind && kind_valid(kind),
             "xt_event_kind(\"%s\"): a kind is 1 to 3 capital letters, none of the record's own "
             "(T C E N M W SD END)",
             kind ? kind : "(null)");
    int i = kind_index(kind);
    if (i < 0) {
        XT_CHECK(n_kinds < MAX_KINDS, "xt_event_kind: more than %d event kinds", MAX_KINDS);
        i = n_kinds++;
        snprintf(kinds[i].kind, sizeof kinds[i].kind, "%s", kind);
    }
    kinds[i].describe = describe;
}

void xt_event(const char *kind, const char *fmt, ...)
{
    int i = kind_index(kind);
    XT_CHECK(i >= 0, "xt_event(\"%s\", ...): declare the kind first with xt_event_kind", kind);
    if (n_calls == cap_calls) {
        if (cap_calls >= MAX_CALLS) {
            dropped_calls++;
            return;
        }
        cap_calls = cap_calls ? 2 * cap_calls : 256;
        calls = realloc(calls, (size_t)cap_calls * sizeof *calls);
        XT_CHECK(calls, "out of memory for the case's event log");
    }
    kinds[i].lines++;
    char *line = calls[n_calls++].line;
    int n = snprintf(line, CALL_LINE, "%s ", kind);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, (size_t)(CALL_LINE - n), fmt, ap);
    va_end(ap);
}

static void calls_write(FILE *f)
{
    for (int i = 0; i < n_kinds; i++)
        if (kinds[i].lines && kinds[i].describe)
            fprintf(f, "# %s\n", kinds[i].describe);
    for (long i = 0; i < n_calls; i++)
        fprintf(f, "%s\n", calls[i].line);
    if (dropped_calls)
        fprintf(f, "SD %ld\n", dropped_calls);
}

/*
 * A demo's events, for its timeline: with XT_STAGE_LOG=DIR in the
 * environment, each rank that logged any writes DIR/stages.r<rank>.txt (the
 * lines a case record would hold) when the program ends.
 */
void xti_stage_log_write(void)
{
    const char *dir = getenv("XT_STAGE_LOG");
    if (!dir || !*dir || (!n_calls && !dropped_calls))
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/stages.r%d.txt", dir, xti.rank);
    FILE *f = fopen(path, "w");
    XT_CHECK(f, "cannot create %s (XT_STAGE_LOG)", path);
    calls_write(f);
    fprintf(f, "END\n");
    XT_CHECK(fclose(f) == 0, "cannot write %s", path);
}

void xti_record_write(FILE *f, const char *path, double seconds)
{
    fprintf(f, "#record\n");
    fprintf(f, "# xt case record, rank %d of the case (world rank %d)\n", xti.case_rank, xti.rank);
    fprintf(f, "T %.6f\n", seconds);
    xti_counters_write(f);
    xti_notes_write(f);
    xti_mem_write(f);
    xti_work_write(f);
    calls_write(f);
    fprintf(f, "END\n");
    XT_CHECK(fflush(f) == 0 && !ferror(f), "cannot write %s", path);
}
