/*
 * resident.c: one launch, many exercises.
 *
 * Starting an MPI job's ranks costs more than most exercises' cases (about
 * 0.6 s for 8 ranks on a laptop, against milliseconds for the cases), so
 * the grader runs a lecture's exercises in one launch of a resident program:
 * each exercise's object, its main renamed xt_entry_<exercise> and every
 * other symbol made local (objcopy, so that two exercises' helpers of one
 * name stay apart), linked with the lecture's kit and libxt. The grader
 * writes a list, one exercise a line,
 *
 *     <exercise> <cases dir> <world>
 *
 * and starts `mpirun -np W resident --out DIR --resident LIST`, W the
 * largest world of the list: it starts the ranks first, and writes every
 * exercise's cases and its line of the list while they start and run (the
 * list grows: see list_reader). For each line, every rank calls the
 * exercise's main with `--cases <dir>`; its xt_main finds MPI and libxt up
 * and runs the cases as that program's own launch would, on the same groups
 * of the same world, writing the same files; the ranks above its world idle
 * through each case:
 *
 *     rank 0..3  init | A: world 8 | B: world 4 | C: world 8 | finalize
 *     rank 4..7  init | A: world 8 | B: idle    | C: world 8 | finalize
 *
 * Between exercises, libxt starts afresh what a case would not: the status
 * file (the exercise's own), memory still in use (no longer counted) and
 * the watchdog. A crash or a hang ends the launch inside one exercise; the
 * grader grades that one, and every verdict but OK, in a launch of its own
 * (grader/resident.py), so that a neighbour can never decide a verdict.
 */
#define _GNU_SOURCE
#include "xt_internal.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef int (*entry_fn)(int argc, char **argv);

/* How long the ranks wait for the grader's next line of the list: each is written in
 * well under a second, and the grader ends the launch if it fails to. */
enum { LIST_WAIT_MS = 120 * 1000 };

/* The list, read as the grader writes it. The grader writes LIST.part a line at a time,
 * each exercise's line once its cases are whole, so that the first exercise runs while
 * the grader still writes the next one's inputs, and renames it LIST once whole. A list
 * already whole (LIST itself: a launch run again) is read as it is. */
typedef struct {
    const char *path;
    int fd;
    int whole; /* nothing more will be written to it */
    size_t len;
    char buf[8192];
} list_reader;

static void sleep_ms(void)
{
    nanosleep(&(struct timespec){0, 1000 * 1000}, NULL);
}

static void list_open(list_reader *r, const char *path)
{
    char part[4200];
    snprintf(part, sizeof part, "%s.part", path);
    r->path = path;
    r->len = 0;
    for (int waited_ms = 0;; waited_ms++) {
        /* LIST before LIST.part: the grader renames the one into the other. */
        if ((r->fd = open(path, O_RDONLY)) >= 0) {
            r->whole = 1;
            return;
        }
        if ((r->fd = open(part, O_RDONLY)) >= 0) {
            r->whole = 0;
            return;
        }
        XT_CHECK(waited_ms < LIST_WAIT_MS, "%s did not appear within %d s: %s", path,
                 LIST_WAIT_MS / 1000, strerror(errno));
        sleep_ms();
    }
}

/* The list's next line (without its newline) into line; 0 at its end. */
static int list_next(list_reader *r, char *line, size_t size)
{
    for (int waited_ms = 0;;) {
        char *nl = memchr(r->buf, '\n', r->len);
        if (nl) {
            size_t n = (size_t)(nl - r->buf);
            XT_CHECK(n < size, "%s: a line longer than %zu bytes", r->path, size - 1);
            snprintf(line, size, "%.*s", (int)n, r->buf);
            memmove(r->buf, nl + 1, r->len - n - 1);
            r->len -= n + 1;
            return 1;
        }
        XT_CHECK(r->len < sizeof r->buf, "%s: a line longer than %zu bytes", r->path,
                 sizeof r->buf);
        ssize_t got = read(r->fd, r->buf + r->len, sizeof r->buf - r->len);
        XT_CHECK(got >= 0, "cannot read %s: %s", r->path, strerror(errno));
        if (got > 0) {
            r->len += (size_t)got;
            continue;
        }
        if (r->whole) { /* a last line without its newline */
            if (r->len == 0)
                return 0;
            XT_CHECK(r->len < size, "%s: a line longer than %zu bytes", r->path, size - 1);
            snprintf(line, size, "%.*s", (int)r->len, r->buf);
            r->len = 0;
            return 1;
        }
        /* Renamed: what was written before the rename is all there is; read it out. */
        if (access(r->path, F_OK) == 0) {
            r->whole = 1;
            continue;
        }
        XT_CHECK(waited_ms < LIST_WAIT_MS, "%s.part: no next line within %d s", r->path,
                 LIST_WAIT_MS / 1000);
        sleep_ms();
        waited_ms++;
    }
}

static entry_fn find_entry(const char *exercise)
{
    char symbol[320];
    snprintf(symbol, sizeof symbol, "xt_entry_%s", exercise);
    entry_fn entry;
    /* The -rdynamic link keeps each entry in the dynamic symbol table. */
    *(void **)&entry = dlsym(RTLD_DEFAULT, symbol);
    return entry;
}

int xt_resident_main(int argc, char **argv)
{
    xti.resident = 1;
    xt_init(&argc, &argv);
    const char *list = xt_arg_str("resident", NULL);
    XT_CHECK(list,
             "%s runs the exercises that --resident LIST names, one '<exercise> <cases dir> "
             "<world>' a line (docs/grader.md)",
             argv[0]);
    /* The grader starts the ranks first and writes the list while they start (their
     * MPI_Init and its inputs take about as long). */
    list_reader reader;
    list_open(&reader, list);

    const char *launch_dir = xti.out_dir;
    int launch_status = xti.status_fd;
    int launch_argc = xti.argc;
    char **launch_argv = xti.argv;
    char line[4096];
    while (list_next(&reader, line, sizeof line)) {
        char exercise[256], dir[3800];
        int world;
        if (line[0] == '#' || sscanf(line, "%255s %3799s %d", exercise, dir, &world) != 3)
            continue;
        entry_fn entry = find_entry(exercise);
        XT_CHECK(entry, "%s: this program has no exercise %s", list, exercise);
        XT_CHECK(world >= 1 && world <= xti.size,
                 "%s: %s's world of %d ranks is not in this run's %d", list, exercise, world,
                 xti.size);

        atomic_store(&xti.phase, XTI_PHASE_SETUP);
        xti.case_world = world;
        xti.out_dir = dir;
        xti_status_open();
        xti_mem_uncount_live();
        xt_watchdog_arm(xti.watchdog_limit); /* until its first case arms its own */
        char *exercise_argv[] = {argv[0], "--cases", dir, NULL};
        entry(3, exercise_argv);

        if (xti.status_fd >= 0)
            close(xti.status_fd);
        xti.status_fd = launch_status;
        xti.out_dir = launch_dir;
        xti.case_world = 0;
        xti.argc = launch_argc;
        xti.argv = launch_argv;
    }
    close(reader.fd);
    xt_finalize();
    return 0;
}
