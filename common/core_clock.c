/*
 * core_clock.c: the monotonic clock, at full and at tick resolution, and sleeping.
 */
#define _GNU_SOURCE /* CLOCK_MONOTONIC_COARSE */
#include "xt_internal.h"

#include <errno.h>
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
