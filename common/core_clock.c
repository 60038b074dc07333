/*
 * core_clock.c: the monotonic clock, at full and at tick resolution, sleeping,
 * and the median of timed rounds for the benchmarks.
 */
#define _GNU_SOURCE /* CLOCK_MONOTONIC_COARSE */
#include "xt_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

double xti_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/*
 * The same clock at the kernel tick's resolution (a few ms), for the PMPI
 * wrappers: the watchdog needs no finer, and at about 20 ns instead of 60
 * it keeps the counters' cost on an 8-byte message small.
 */
double xti_now_coarse(void)
{
#ifdef CLOCK_MONOTONIC_COARSE
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
#else
    return xti_now();
#endif
}

double xt_now(void)
{
    return xti_now();
}

void xt_sleep(double seconds)
{
    if (seconds <= 0)
        return;
    struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {
    }
}

static int by_value(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

double xt_sort_median(double *t, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(t, (size_t)n, sizeof *t, by_value);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}
