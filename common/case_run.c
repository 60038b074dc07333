/*
 * case_run.c: case mode, the protocol between the grader and a program:
 * reading the cases, running each on its group of ranks, and recording it.
 *
 * The grader writes DIR/cases.txt, one case a line:
 *
 *     case 3 np=4 fn=ring_allreduce op=sum watchdog=10
 *
 * and the inputs of each case (case.c). A case of np ranks runs on every
 * group of np consecutive world ranks at once, each group with its own
 * inputs:
 *
 *     world  0 1 2 3 4 5 6 7        np=4: groups 0 and 1
 *            [g0   ] [g1   ]        np=3: groups 0 and 1, ranks 6 and 7 idle
 *
 * so one launch grades several world sizes, and code that talks on
 * MPI_COMM_WORLD instead of its communicator mixes the groups' data up.
 * In a resident launch (resident.c) the world is the running exercise's
 * own, xti.case_world, and the ranks above it are idle in every case.
 * Each case gets a fresh duplicate of its group's communicator, so a stray
 * message cannot leak into the next case.
 *
 * When the function returns, every rank of the group checks its buffers'
 * guard bytes, its xt_alloc blocks (mem.c) and its requests, then writes
 * its record at the end of its outputs file, DIR/c<k>/g<g>.r<r>.outputs
 * (record.c): its MPI counters and events for the case, its time, and the
 * notes. The grader reads those;
 * docs/grader.md has more.
 *
 * A case whose input the exercise must refuse (a refusal test: M not a
 * multiple of np) ends its run in xt_die, and an exercise not yet written
 * ends it at its XT_TODO. In a resident launch the case's line may say
 * refuse=<the exercise's file>, and an xt_die from that file ends only the
 * case on that rank; or todo=<its test>, and an XT_TODO does
 * (run_ending_early). The rank then writes its record and goes on to the
 * next case; the test's later cases are skipped on every rank. A rank the
 * others wait for in vain is the watchdog's, as any hang.
 *
 * What the function prints, on stdout or stderr, goes to the case's output
 * file, DIR/c<k>/g<g>.r<r>.out.txt (removed when empty), so the grader can
 * show a failing case's own lines; libxt's messages still go to the rank's
 * stderr (xti.diag_fd).
 */
#define _GNU_SOURCE
#include "xt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Waits for r, sleeping while it waits, so that idle ranks leave the cores to busy ones. */
static void quiet_wait(MPI_Request *r)
{
    int done = 0;
    for (int spin = 0;; spin++) {
        PMPI_Test(r, &done, MPI_STATUS_IGNORE);
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

static void quiet_barrier(void)
{
    MPI_Request r;
    PMPI_Ibarrier(MPI_COMM_WORLD, &r);
    quiet_wait(&r);
}

/* A barrier that also tells whether any rank came with a nonzero flag. */
static int quiet_any(int mine)
{
    int any = 0;
    MPI_Request r;
    PMPI_Iallreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD, &r);
    quiet_wait(&r);
    return any;
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
        XT_CHECK(c->nkeys < XTI_CASE_MAX_KEYS, "cases.txt, case %d: too many parameters", c->index);
        *eq = 0;
        c->keys[c->nkeys] = tok;
        c->vals[c->nkeys++] = eq + 1;
    }
    const char *np = xti_case_param(c, "np");
    XT_CHECK(np, "cases.txt, case %d: no np=", c->index);
    c->np = atoi(np);
    return 1;
}

/* The rank's stdout and stderr from before the cases, put back after each one. */
static int saved_out = -1, saved_err = -1;

/* Points stdout and stderr at the case's output file; returns its descriptor, or -1. */
static int output_begin(const char *path)
{
    if (saved_out < 0)
        return -1;
    fflush(stdout);
    fflush(stderr);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    dup2(fd, 1);
    dup2(fd, 2);
    return fd;
}

static void output_end(int fd, const char *path)
{
    if (fd < 0)
        return;
    fflush(stdout);
    fflush(stderr);
    dup2(saved_out, 1);
    dup2(saved_err, 2);
    struct stat st;
    if (fstat(fd, &st) == 0 && st.st_size == 0)
        unlink(path);
    close(fd);
}

typedef struct {
    int np;
    MPI_Comm comm; /* this rank's group of np, or MPI_COMM_NULL */
} group_comm;

/* Runs one case of a resident launch that may end early on this rank: an xt_die from
 * `refuse` (a case the exercise must refuse) or, with `todo`, an XT_TODO (an exercise not
 * yet written) jumps back here (core_err.c). 0 when the function returned, else how it
 * ended (XTI_CASE_REFUSED, XTI_CASE_TODO). The jump lands in this small frame, whose
 * locals do not change after setjmp. */
static int run_ending_early(void (*run_case)(xt_case *c), xt_case *c, const char *refuse, int todo)
{
    switch (setjmp(xti.case_exit)) {
    case 0:
        break;
    case XTI_CASE_REFUSED:
        return XTI_CASE_REFUSED;
    default:
        return XTI_CASE_TODO;
    }
    xti.refusal_file = refuse;
    xti.todo_ends_case = todo;
    run_case(c);
    xti.refusal_file = NULL;
    xti.todo_ends_case = 0;
    return 0;
}

void xt_run_cases(void (*run_case)(xt_case *c))
{
    const char *cases_dir = xti_cases_path();
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

    /* Line-buffered: a rank that crashes or hangs keeps every line it printed. */
    fflush(stdout);
    fflush(stderr);
    setvbuf(stdout, NULL, _IOLBF, 0);
    saved_out = dup(1);
    saved_err = dup(2);
    if (saved_out < 0 || saved_err < 0) {
        if (saved_out >= 0)
            close(saved_out);
        saved_out = -1;
    } else {
        xti.diag_fd = saved_err;
    }

    /* The world the cases are spread over: the launch's, or in a resident launch the
     * exercise's own (the ranks above it are idle in every case). */
    int world = xti.case_world > 0 ? xti.case_world : xti.size;
    group_comm groups[16];
    int ngroups = 0;
    for (int i = 0; i < nlines; i++) {
        xt_case c = {0};
        char *copy = strdup(lines[i]);
        if (parse_line(copy, &c)) {
            XT_CHECK(c.np >= 1 && c.np <= world,
                     "case %d needs %d ranks but this run has %d: start it with mpirun -np %d",
                     c.index, c.np, world, c.np);
            int known = 0;
            for (int g = 0; g < ngroups; g++)
                known |= groups[g].np == c.np;
            if (!known) {
                XT_CHECK(ngroups < 16, "too many different np in one run");
                int copies = world / c.np;
                int color = xti.rank < copies * c.np ? xti.rank / c.np : MPI_UNDEFINED;
                groups[ngroups].np = c.np;
                PMPI_Comm_split(MPI_COMM_WORLD, color, xti.rank, &groups[ngroups].comm);
                ngroups++;
            }
        }
        free(copy);
    }

    /* Here, and not at start-up, so that the other ranks wait in the sleeping barrier
     * below rather than spin in a collective. */
    xti_debug_wait();
    /* In a resident launch a case's line may say todo=<its test>: once a case of that test
     * ended at an XT_TODO on any rank, every rank skips the test's other cases, which its
     * own launch, ended by the TODO, would not have run (the grader reports them NOT RUN). */
    const char *skip_todo = NULL, *previous_todo = NULL;
    int ended_at_todo = 0;
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

        if (quiet_any(ended_at_todo))
            skip_todo = previous_todo;
        ended_at_todo = 0;
        const char *todo_of = xti.resident ? xti_case_param(&c, "todo") : NULL;
        previous_todo = todo_of;
        int skipped = todo_of && skip_todo && strcmp(todo_of, skip_todo) == 0;
        xti.case_index = c.index;
        const char *wd = xti_case_param(&c, "watchdog");
        xt_watchdog_arm(wd ? atof(wd) : xti.watchdog_limit);

        if (group == MPI_COMM_NULL || skipped) {
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

        char out[4096];
        snprintf(out, sizeof out, "%s/g%d.r%d.out.txt", c.dir, c.group, c.rank);
        int out_fd = output_begin(out);
        xti_record_begin();
        atomic_store(&xti.phase, XTI_PHASE_USER);
        double t0 = xti_now();
        /* A case may end early only in a resident launch: anywhere else xt_die and XT_TODO
         * end the run, as a student's own launch would. */
        const char *refuse = xti.resident ? xti_case_param(&c, "refuse") : NULL;
        int todo = xti.resident && xti_case_param(&c, "todo") != NULL;
        int ended =
            refuse || todo ? run_ending_early(run_case, &c, refuse, todo) : (run_case(&c), 0);
        if (ended) { /* it may have jumped out of a libxt computation */
            xti.compute = NULL;
            xti.compute_at = -1;
        }
        ended_at_todo = ended == XTI_CASE_TODO;
        double seconds = xti_now() - t0;
        atomic_store(&xti.phase, XTI_PHASE_DONE);
        output_end(out_fd, out);

        xti_case_check_buffers(&c);
        xti_mem_check();
        if (ended) /* what the exercise held when it stopped counts in no later case */
            xti_mem_uncount_live();
        xti_check_pending_requests();
        char rec[4096];
        xti_record_write(xti_case_outputs(&c, rec, sizeof rec), rec, seconds);
        xti_case_close(&c);

        xti.case_comm = MPI_COMM_NULL;
        PMPI_Comm_free(&c.comm);
        free(c.line);
    }
    quiet_barrier();
    xt_watchdog_arm(0);
    if (saved_out >= 0) {
        xti.diag_fd = 2;
        close(saved_out);
        close(saved_err);
        saved_out = saved_err = -1;
    }
    xti.case_index = -1;
    atomic_store(&xti.phase, XTI_PHASE_FINISH);
    for (int g = 0; g < ngroups; g++)
        if (groups[g].comm != MPI_COMM_NULL)
            PMPI_Comm_free(&groups[g].comm);
    for (int i = 0; i < nlines; i++)
        free(lines[i]);
    free(lines);
}
