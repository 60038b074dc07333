/*
 * print.c: printing for demos: every rank's text in rank order, the root's
 * alone, and buffers formatted as "[v0 v1 ...]".
 *
 * Its communication goes through PMPI, so it never shows in a program's
 * counters or trace.
 */
#include "xt_internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void xt_printf_root(MPI_Comm comm, const char *fmt, ...)
{
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

void xt_printf_ordered(MPI_Comm comm, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = xt_malloc((size_t)len + 1);
    va_start(ap, fmt);
    vsnprintf(text, (size_t)len + 1, fmt, ap);
    va_end(ap);

    int rank, np;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &np);
    int *lens = NULL, *displs = NULL;
    char *all = NULL;
    if (rank == 0) {
        lens = xt_malloc(sizeof(int) * (size_t)np);
        displs = xt_malloc(sizeof(int) * (size_t)np);
    }
    PMPI_Gather(&len, 1, MPI_INT, lens, 1, MPI_INT, 0, comm);
    if (rank == 0) {
        int total = 0;
        for (int r = 0; r < np; r++) {
            displs[r] = total;
            total += lens[r];
        }
        all = xt_malloc((size_t)total + 1);
    }
    PMPI_Gatherv(text, len, MPI_CHAR, all, lens, displs, MPI_CHAR, 0, comm);
    if (rank == 0) {
        for (int r = 0; r < np; r++) {
            const char *s = all + displs[r], *end = s + lens[r];
            while (s < end) {
                const char *nl = memchr(s, '\n', (size_t)(end - s));
                const char *stop = nl ? nl : end;
                printf("[r%d] %.*s\n", r, (int)(stop - s), s);
                s = nl ? nl + 1 : end;
            }
        }
        fflush(stdout);
        free(all);
        free(lens);
        free(displs);
    }
    free(text);
}

void xti_format_value(char *out, size_t cap, const void *value, xt_dtype dt)
{
    const char *p = value;
    switch (dt) {
    case XT_F32:
        snprintf(out, cap, "%g", (double)*(const float *)p);
        break;
    case XT_F64:
        snprintf(out, cap, "%g", *(const double *)p);
        break;
    case XT_I8:
        snprintf(out, cap, "%d", *(const int8_t *)p);
        break;
    case XT_I16:
        snprintf(out, cap, "%d", *(const int16_t *)p);
        break;
    case XT_I32:
        snprintf(out, cap, "%d", *(const int32_t *)p);
        break;
    case XT_I64:
        snprintf(out, cap, "%lld", (long long)*(const int64_t *)p);
        break;
    case XT_U8:
        snprintf(out, cap, "%u", *(const uint8_t *)p);
        break;
    case XT_U16:
    case XT_F16:
    case XT_BF16:
        snprintf(out, cap, "%u", *(const uint16_t *)p);
        break;
    case XT_U32:
        snprintf(out, cap, "%u", *(const uint32_t *)p);
        break;
    default:
        snprintf(out, cap, "%llu", (unsigned long long)*(const uint64_t *)p);
        break;
    }
}

/* snprintf that never runs past the end of `out`; returns the new position. */
static size_t append(char *out, size_t cap, size_t pos, const char *fmt, ...) XT_PRINTF(4, 5);
static size_t append(char *out, size_t cap, size_t pos, const char *fmt, ...)
{
    if (pos + 1 >= cap)
        return pos;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out + pos, cap - pos, fmt, ap);
    va_end(ap);
    if (n < 0)
        return pos;
    return (size_t)n >= cap - pos ? cap - 1 : pos + (size_t)n;
}

void xt_format_buffer(char *out, size_t cap, const void *buf, int count, MPI_Datatype dt)
{
    xt_dtype xd;
    if (cap == 0)
        return;
    out[0] = 0;
    if (!xt_dtype_from_mpi(dt, &xd)) {
        append(out, cap, 0, "[%d elements]", count);
        return;
    }
    size_t sz = xt_dtype_size(xd), pos = 0;
    const int head = 12, tail = 4; /* long buffers: the first 12 and the last 4 */
    pos = append(out, cap, pos, "[");
    for (int i = 0; i < count; i++) {
        if (count > head + tail && i == head) {
            pos = append(out, cap, pos, " ...");
            i = count - tail;
        }
        char one[48];
        xti_format_value(one, sizeof one, (const char *)buf + (size_t)i * sz, xd);
        pos = append(out, cap, pos, "%s%s", i ? " " : "", one);
    }
    append(out, cap, pos, "]");
}

void xt_print_buffer_ordered(MPI_Comm comm, const char *label, const void *buf, int count,
                             MPI_Datatype dt)
{
    char text[1024];
    xt_format_buffer(text, sizeof text, buf, count, dt);
    xt_printf_ordered(comm, "%s%s", label, text);
}

void xt_print_buffer_at(MPI_Comm comm, int who, const char *label, const void *buf, int count,
                        MPI_Datatype dt)
{
    int rank;
    PMPI_Comm_rank(comm, &rank);
    char text[1024] = "";
    if (rank == who)
        xt_format_buffer(text, sizeof text, buf, count, dt);
    xt_printf_ordered(comm, "%s%s", rank == who ? label : "", text);
}

void xt_demo_sum_fill(MPI_Comm comm, int *x, int count)
{
    int rank;
    PMPI_Comm_rank(comm, &rank);
    for (int i = 0; i < count; i++)
        x[i] = 10 * rank + i;
}

int xt_demo_sum_holds(MPI_Comm comm, const int *x, int count)
{
    int np;
    PMPI_Comm_size(comm, &np);
    int right = 1, all = 0;
    for (int i = 0; i < count; i++)
        right &= x[i] == 10 * np * (np - 1) / 2 + np * i;
    PMPI_Allreduce(&right, &all, 1, MPI_INT, MPI_LAND, comm);
    xt_printf_root(comm, "every rank holds the sum of all ranks' buffers: %s\n",
                   all ? "yes" : "NO");
    return all;
}
