/*
 * init.c: start-up and shutdown, and the whole main of an exercise.
 *
 * xt_init brings up MPI and then every part of libxt in order: the error
 * handler and crash reports, options, the status file, strict send, the
 * trace, the watchdog, and case mode or the demo's watchdog. xt_finalize
 * writes the counters and the trace, then ends MPI. Everything libxt does
 * with MPI itself goes through PMPI_ entry points, so the instrumentation
 * (pmpi.c) sees only what the exercise does.
 */
#include "xt_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int xt_rank(void)
{
    return xti.rank;
}

int xt_size(void)
{
    return xti.size;
}

int xt_local_rank(void)
{
    return xti.local_rank;
}

static void usage(const char *prog)
{
    printf("usage: mpirun -np N %s [options]\n"
           "  (no --cases)       demo: a small input, each rank's before and after\n"
           "  --cases DIR        case mode: run the grader's cases in DIR (docs/grader.md)\n"
           "  --out DIR          write the MPI call counters (mpi.r<rank>.txt) to DIR\n"
           "  --watchdog SEC     end the run with a report after SEC seconds (0: never)\n"
           "  --no-strict        let MPI_Send buffer (strict send is on by default)\n"
           "  --debug-rank R     rank R waits for a debugger (gdb -p) at start; other ranks\n"
           "                     wait for it (use with --watchdog 0; make debug does both)\n"
           "  --debug-break FN   with --debug-rank: the gdb command printed breaks in FN\n"
           "  --count N          demo input length, where the demo takes one\n"
           "  --mpi-library      print the MPI library's version and exit (no MPI_Init)\n",
           prog);
}

void xti_status_open(void)
{
    if (!xti.out_dir)
        return;
    mkdir(xti.out_dir, 0777);
    char path[4096];
    snprintf(path, sizeof path, "%s/status.r%d.txt", xti.out_dir, xti.rank);
    xti.status_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0666);
    if (xti.status_fd < 0)
        xt_die("cannot create %s: %s", path, strerror(errno));
}

void xt_init(int *argc, char ***argv)
{
    XT_MPI_CHECK(PMPI_Init(argc, argv));
    xti.mpi_ready = 1;
    xti.argc = *argc;
    xti.argv = *argv;
    PMPI_Comm_rank(MPI_COMM_WORLD, &xti.rank);
    PMPI_Comm_size(MPI_COMM_WORLD, &xti.size);

    MPI_Comm node;
    PMPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, xti.rank, MPI_INFO_NULL, &node);
    PMPI_Comm_rank(node, &xti.local_rank);
    PMPI_Comm_free(&node);

    xti_crash_catch_mpi_errors();

    if (xt_arg_flag("help")) {
        if (xti.rank == 0)
            usage((*argv)[0]);
        PMPI_Finalize();
        exit(0);
    }

    const char *cases = xt_arg_str("cases", NULL);
    xti.out_dir = cases ? cases : xt_arg_str("out", getenv("XT_OUT"));
    if (xti.out_dir && !*xti.out_dir)
        xti.out_dir = NULL;
    xti_status_open();
    xti_crash_catch_signals();
    xti_crash_catch_asan(xti_case_describe);

    const char *env_strict = getenv("XT_STRICT");
    int strict = !(xt_arg_flag("no-strict") || (env_strict && strcmp(env_strict, "0") == 0));
    xt_strict_send(strict);
    xti_trace_init();

    const char *env_wd = getenv("XT_WATCHDOG");
    int graded = cases || xti.resident;
    xti.watchdog_limit = xt_arg_double("watchdog", env_wd ? atof(env_wd) : (graded ? 10.0 : 60.0));
    xti_watchdog_start();
    if (cases) {
        xti_cases_dir(cases); /* a rank to debug waits before its first case */
    } else if (!xti.resident) {
        xti_debug_wait();
        xt_watchdog_arm(xti.watchdog_limit);
    }
}

void xt_finalize(void)
{
    atomic_store(&xti.phase, XTI_PHASE_FINISH);
    xt_watchdog_arm(0);
    xti_mem_check(); /* what no case checked: a demo's blocks */
    if (xti.out_dir) {
        char path[4096];
        snprintf(path, sizeof path, "%s/mpi.r%d.txt", xti.out_dir, xti.rank);
        xt_mpi_stats_write(path);
    }
    xti_watchdog_stop();
    xti_trace_write();
    xti_stage_log_write();
    fflush(stdout);
    /* Let every rank's output reach mpirun before the run ends. */
    PMPI_Barrier(MPI_COMM_WORLD);
    if (xti.status_fd >= 0)
        close(xti.status_fd);
    xti.mpi_ready = 0;
    PMPI_Finalize();
}

int xt_main(int argc, char **argv, void (*run_case)(xt_case *c), void (*demo)(MPI_Comm comm))
{
    /* The MPI library the program runs with, as it names itself: MPI_Get_library_version
     * may be called before MPI_Init, so no launcher is needed (the grader's report names
     * the library from it, not from the launcher, which may be Slurm's). */
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--mpi-library") == 0) {
            char version[MPI_MAX_LIBRARY_VERSION_STRING];
            int len;
            PMPI_Get_library_version(version, &len);
            printf("%s\n", version);
            return 0;
        }
    if (xti.resident) {
        /* Started by a resident launch (resident.c), MPI and libxt already up: this
         * exercise's cases, in the directory its --cases names, and back. */
        xti.argc = argc;
        xti.argv = argv;
        xti_cases_dir(xt_arg_str("cases", NULL));
        xt_run_cases(run_case);
        return 0;
    }
    xt_init(&argc, &argv);
    if (xt_case_mode())
        xt_run_cases(run_case);
    else
        demo(MPI_COMM_WORLD);
    xt_finalize();
    return 0;
}
