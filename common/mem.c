/*
 * mem.c: memory accounting. Every buffer of a training step is allocated
 * through xt_alloc with its kind (xt.h); this file keeps each kind's bytes
 * in use now and at their peak, on this rank. The grader reads them from the
 * case record (lines "M <kind> <current> <peak>") and checks them against
 * per-kind formulas. xt_steady_allocator tunes malloc for benchmarks.
 *
 * Each block carries a small header with its kind and size, so xt_free needs
 * only the pointer and can refuse one that xt_alloc did not return.
 */
#include "xt_internal.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC 0x78746d656dUL /* "xtmem" */

typedef struct {
    unsigned long magic;
    size_t bytes;
    int kind;
    int counted; /* 0: allocated while libxt's harness paused the accounting */
    /* 32 bytes in all: the block after it stays aligned for SIMD loads. */
    unsigned long reserved_;
} header;

static size_t current[XT_MEM_KINDS], peak[XT_MEM_KINDS];
static size_t current_total, peak_total;
static int paused;

static const char *kind_names[XT_MEM_KINDS] = {"params", "grads",       "optimizer",
                                               "master", "activations", "comm"};

const char *xt_mem_kind_name(xt_mem_kind kind)
{
    return kind >= 0 && kind < XT_MEM_KINDS ? kind_names[kind] : "?";
}

void *xt_alloc_at(xt_mem_kind kind, size_t bytes, const char *file, int line)
{
    if (kind < 0 || kind >= XT_MEM_KINDS)
        xt_die_at(file, line, "xt_alloc: %d is not a memory kind (XT_MEM_PARAMS ...)", (int)kind);
    header *h = calloc(1, sizeof(header) + (bytes ? bytes : 1));
    if (!h)
        xt_die_at(file, line, "out of memory allocating %zu bytes of %s", bytes, kind_names[kind]);
    h->magic = MAGIC;
    h->bytes = bytes;
    h->kind = kind;
    h->counted = !paused;
    if (paused)
        return h + 1;
    current[kind] += bytes;
    current_total += bytes;
    if (current[kind] > peak[kind])
        peak[kind] = current[kind];
    if (current_total > peak_total)
        peak_total = current_total;
    return h + 1;
}

void xt_free_at(void *p, const char *file, int line)
{
    if (!p)
        return;
    header *h = (header *)p - 1;
    if (h->magic != MAGIC)
        xt_die_at(file, line,
                  "xt_free: %p was not allocated by xt_alloc (or was freed already); free it "
                  "the way it was allocated",
                  p);
    h->magic = 0;
    if (h->counted) {
        current[h->kind] -= h->bytes;
        current_total -= h->bytes;
    }
    free(h);
}

size_t xt_alloc_size(const void *p)
{
    if (!p)
        return 0;
    const header *h = (const header *)p - 1;
    XT_CHECK(h->magic == MAGIC, "xt_alloc_size: %p was not allocated by xt_alloc", p);
    return h->bytes;
}

size_t xt_mem_current(xt_mem_kind kind)
{
    return kind == XT_MEM_KINDS ? current_total : current[kind];
}

size_t xt_mem_peak(xt_mem_kind kind)
{
    return kind == XT_MEM_KINDS ? peak_total : peak[kind];
}

void xt_mem_reset_peak(void)
{
    for (int k = 0; k < XT_MEM_KINDS; k++)
        peak[k] = current[k];
    peak_total = current_total;
}

void xti_mem_pause(int on)
{
    paused = on;
}

void xti_mem_write(FILE *f)
{
    fprintf(f, "# memory: kind bytes-in-use-now peak-bytes-since-xt_mem_reset_peak\n");
    for (int k = 0; k < XT_MEM_KINDS; k++)
        fprintf(f, "M %s %zu %zu\n", kind_names[k], current[k], peak[k]);
    fprintf(f, "M total %zu %zu\n", current_total, peak_total);
}

void xt_mem_print(MPI_Comm comm, const char *title)
{
    /* The kinds some rank used, so that every rank prints the same columns. */
    unsigned long mine[XT_MEM_KINDS], most[XT_MEM_KINDS];
    for (int k = 0; k < XT_MEM_KINDS; k++)
        mine[k] = peak[k];
    PMPI_Allreduce(mine, most, XT_MEM_KINDS, MPI_UNSIGNED_LONG, MPI_MAX, comm);
    char line[256];
    int n = 0;
    for (int k = 0; k < XT_MEM_KINDS; k++)
        if (most[k])
            n += snprintf(line + n, sizeof line - (size_t)n, " %11zu", peak[k]);
    snprintf(line + n, sizeof line - (size_t)n, " %11zu\n", peak_total);
    int rank;
    PMPI_Comm_rank(comm, &rank);
    if (rank == 0) {
        printf("%s: peak bytes per rank\n     ", title);
        for (int k = 0; k < XT_MEM_KINDS; k++)
            if (most[k])
                printf(" %11s", kind_names[k]);
        printf(" %11s\n", "total");
        fflush(stdout);
    }
    xt_printf_ordered(comm, "%s", line);
}

void xt_steady_allocator(void)
{
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}
