/*
 * mem.c: memory accounting. Every buffer of a training step is allocated
 * through xt_alloc with its kind (xt.h); this file keeps each kind's bytes
 * in use now and at their peak, on this rank. The grader reads them from the
 * case record (lines "M <kind> <current> <peak>") and checks them against
 * per-kind formulas. xt_steady_allocator tunes malloc for benchmarks.
 *
 * It also catches the memory bugs that would otherwise show up far from
 * where they happen, or not at all:
 *
 *     | header | zone | data (bytes)                 | zone |
 *                  ^ 64 bytes of ZONE_BYTE on each side, checked at xt_free
 *                    and at the end of every case
 *
 *   - a write past either end of a block changes its zones: reported with
 *     the block's kind, size and where it was allocated;
 *   - xt_free fills the data with 0xff (a float or double read after free is
 *     NaN, an int -1) and keeps the block, unreleased, in a FIFO quarantine
 *     of at most QUARANTINE_BYTES, so reads after free see the poison rather
 *     than whatever malloc put there next; a write after free changes the
 *     poison, checked when the block leaves the quarantine (at the latest
 *     at the end of the case).
 * In a case the report is a WRONG note of the case record; outside one (a
 * demo, a bench) the program dies with it. The accounting does not see the
 * quarantine: a block stops counting at its xt_free. Benchmarks
 * (xt_steady_allocator) keep the zones but neither poison nor quarantine:
 * they time the algorithm, not the checks, and the grader has caught the bugs.
 *
 * Built with AddressSanitizer (make SAN=1), the zones and the freed data are
 * also poisoned for it: the first access to them stops the rank at the line
 * that made it, and xti_mem_describe names the block for the report.
 */
#include "xt_internal.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAGIC       0x78746d656dUL   /* "xtmem": a live block */
#define MAGIC_FREED 0x78746672656dUL /* "xtfrem": freed, still held by libxt */

enum {
    ZONE = 64,                  /* guard bytes on each side of the data */
    QUARANTINE_BYTES = 4 << 20, /* freed bytes held back from malloc, at most */
};
static const unsigned char ZONE_BYTE = 0xFD;
static const unsigned char POISON_BYTE = 0xFF;

typedef struct block {
    unsigned long magic;
    size_t bytes;
    const char *file; /* where xt_alloc was called */
    int line;
    int kind;
    const char *free_file; /* where xt_free was called, once it was */
    int free_line;
    int counted; /* 0: allocated while libxt's harness paused the accounting */
    /* Live: the list of live blocks; freed: next in the quarantine (prev unused). */
    struct block *prev, *next;
} header;

/* The header, then the front zone: the data starts 128 bytes into a 64-byte-aligned block. */
_Static_assert(sizeof(header) <= 64, "the header fits in front of the zone");
enum { HEAD = 64 };

static size_t current[XT_MEM_KINDS], peak[XT_MEM_KINDS];
static size_t current_total, peak_total;
static int paused;

static header *live;            /* every block not yet freed, newest first */
static header *q_head, *q_tail; /* the quarantine, oldest first */
static size_t q_bytes;
static int poison = 1; /* 0: xt_free checks the zones and frees at once */

static const char *kind_names[XT_MEM_KINDS] = {"params", "grads",       "optimizer",
                                               "master", "activations", "comm"};

const char *xt_mem_kind_name(xt_mem_kind kind)
{
    return kind >= 0 && kind < XT_MEM_KINDS ? kind_names[kind] : "?";
}

static unsigned char *data_of(header *h)
{
    return (unsigned char *)h + HEAD + ZONE;
}

static header *header_of(const void *p)
{
    return (header *)((uintptr_t)p - ZONE - HEAD);
}

/* The magic word in front of p, read past AddressSanitizer: p may be no block of libxt's (a
 * pointer from malloc), and then libxt's own message says so. */
XTI_NO_ASAN static unsigned long magic_of(const void *p)
{
    return header_of(p)->magic;
}

/*
 * A source path as the student's tree names it: from its lecture directory
 * (lcN_x/ex.c, also for solutions/ and a mutant's copy) or from
 * common/ (common/nn.c); grader/lectures/<lecture>/ files keep that prefix.
 */
static const char *shown(const char *path)
{
    if (!path)
        return "?";
    const char *best = NULL;
    for (const char *c = path; *c; c++) {
        if (c != path && c[-1] != '/')
            continue;
        if (strncmp(c, "common/", 7) == 0 ||
            (c[0] == 'l' && c[1] == 'c' && c[2] >= '0' && c[2] <= '9' && strchr(c, '/')))
            best = c;
    }
    if (!best)
        return path;
    const char *lectures = "grader/lectures/";
    size_t n = strlen(lectures);
    if ((size_t)(best - path) >= n && strncmp(best - n, lectures, n) == 0)
        return best - n;
    return best;
}

/* A bug found in a block: a WRONG note in a case, else the end of the run at file:line. */
static void report(const char *file, int line, const char *fmt, ...) XT_PRINTF(3, 4);
static void report(const char *file, int line, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int phase = atomic_load(&xti.phase);
    if (xti.case_index >= 0 && (phase == XTI_PHASE_USER || phase == XTI_PHASE_DONE)) {
        /* Also on stderr: heap damage past the zones may yet crash the rank before its record. */
        xti_diag("[xt] rank %d WRONG %s\n", xti.rank, msg);
        xti_note("WRONG", "%s", msg);
        return;
    }
    xt_die_at(shown(file), line, "%s", msg);
}

/* How many of n bytes at p differ from `byte`, and the first (lowest) and last that do. */
static size_t changed(const unsigned char *p, size_t n, unsigned char byte, size_t *first,
                      size_t *last)
{
    /* Poison checks scan whole blocks: memcmp against the pattern first, fast when intact. */
    enum { CHUNK = 4096 };
    static unsigned char pattern[2][CHUNK];
    static int ready;
    if (!ready) {
        memset(pattern[0], ZONE_BYTE, CHUNK);
        memset(pattern[1], POISON_BYTE, CHUNK);
        ready = 1;
    }
    const unsigned char *pat = pattern[byte == POISON_BYTE];
    size_t count = 0;
    for (size_t at = 0; at < n; at += CHUNK) {
        size_t len = n - at < CHUNK ? n - at : CHUNK;
        if (memcmp(p + at, pat, len) == 0)
            continue;
        for (size_t i = at; i < at + len; i++)
            if (p[i] != byte) {
                if (!count)
                    *first = i;
                *last = i;
                count++;
            }
    }
    return count;
}

static void fill_zones(header *h)
{
    XTI_UNPOISON(data_of(h) - ZONE, ZONE);
    XTI_UNPOISON(data_of(h) + h->bytes, ZONE);
    memset(data_of(h) - ZONE, ZONE_BYTE, ZONE);
    memset(data_of(h) + h->bytes, ZONE_BYTE, ZONE);
    XTI_POISON(data_of(h) - ZONE, ZONE);
    XTI_POISON(data_of(h) + h->bytes, ZONE);
}

/* Under AddressSanitizer, what libxt itself reads and writes of a block: zones, and the data
 * once freed. */
static void unpoison_guarded(header *h)
{
    XTI_UNPOISON(data_of(h) - ZONE, h->magic == MAGIC_FREED ? ZONE + h->bytes + ZONE : ZONE);
    XTI_UNPOISON(data_of(h) + h->bytes, ZONE);
}

static void poison_guarded(header *h)
{
    XTI_POISON(data_of(h) - ZONE, h->magic == MAGIC_FREED ? ZONE + h->bytes + ZONE : ZONE);
    XTI_POISON(data_of(h) + h->bytes, ZONE);
}

/* Back to malloc: the whole block unpoisoned, as malloc gave it. */
static void release(header *h)
{
    h->magic = 0;
    XTI_UNPOISON(h, HEAD + ZONE + h->bytes + ZONE);
    free(h);
}

/* "2 bytes changed in bytes 1062..1063", offsets from the start of the data. */
static void describe(char *out, size_t cap, size_t n, long first, long last)
{
    if (n == 1)
        snprintf(out, cap, "1 byte changed: byte %ld", first);
    else
        snprintf(out, cap, "%zu bytes changed in bytes %ld..%ld", n, first, last);
}

/*
 * Checks h's zones and, when freed, its poison; reports what changed, `found`
 * saying when ("" or " (found at its xt_free at F:L)"). Returns nonzero if anything had.
 */
static int check_block(header *h, const char *found, const char *file, int line)
{
    const char *kind = kind_names[h->kind];
    size_t first = 0, last = 0, n;
    unpoison_guarded(h);
    char what[96], freed[256] = "";
    if (h->magic == MAGIC_FREED)
        snprintf(freed, sizeof freed, " after it was freed at %s:%d", shown(h->free_file),
                 h->free_line);
    int bad = 0;
    if ((n = changed(data_of(h) - ZONE, ZONE, ZONE_BYTE, &first, &last))) {
        describe(what, sizeof what, n, (long)first - ZONE, (long)last - ZONE);
        report(file, line,
               "wrote before the start of the %zu-byte %s block allocated at %s:%d%s: %s%s",
               h->bytes, kind, shown(h->file), h->line, freed, what, found);
        bad = 1;
    }
    if ((n = changed(data_of(h) + h->bytes, ZONE, ZONE_BYTE, &first, &last))) {
        describe(what, sizeof what, n, (long)(h->bytes + first), (long)(h->bytes + last));
        report(file, line, "wrote past the end of the %zu-byte %s block allocated at %s:%d%s: %s%s",
               h->bytes, kind, shown(h->file), h->line, freed, what, found);
        bad = 1;
    }
    if (h->magic == MAGIC_FREED &&
        (n = changed(data_of(h), h->bytes, POISON_BYTE, &first, &last))) {
        describe(what, sizeof what, n, (long)first, (long)last);
        report(file, line, "wrote to the %zu-byte %s block allocated at %s:%d%s: %s%s", h->bytes,
               kind, shown(h->file), h->line, freed, what, found);
        bad = 1;
    }
    poison_guarded(h);
    return bad;
}

void *xt_alloc_at(xt_mem_kind kind, size_t bytes, const char *file, int line)
{
    if (kind < 0 || kind >= XT_MEM_KINDS)
        xt_die_at(file, line, "xt_alloc: %d is not a memory kind (XT_MEM_PARAMS ...)", (int)kind);
    void *base = NULL;
    if (bytes > SIZE_MAX - HEAD - 2 * ZONE ||
        posix_memalign(&base, 64, HEAD + 2 * ZONE + bytes) != 0)
        xt_die_at(file, line, "out of memory allocating %zu bytes of %s", bytes, kind_names[kind]);
    header *h = base;
    memset(h, 0, sizeof *h);
    h->magic = MAGIC;
    h->bytes = bytes;
    h->kind = kind;
    h->file = file;
    h->line = line;
    h->counted = !paused;
    memset(data_of(h), 0, bytes);
    fill_zones(h);
    h->next = live;
    if (live)
        live->prev = h;
    live = h;
    if (h->counted) {
        current[kind] += bytes;
        current_total += bytes;
        if (current[kind] > peak[kind])
            peak[kind] = current[kind];
        if (current_total > peak_total)
            peak_total = current_total;
    }
    return data_of(h);
}

/* Hands the oldest quarantined block back to malloc, after checking its poison. */
static void release_oldest(void)
{
    header *h = q_head;
    q_head = h->next;
    if (!q_head)
        q_tail = NULL;
    q_bytes -= h->bytes;
    if (check_block(h, "", h->free_file, h->free_line))
        return; /* written where it should not have been: never handed back to malloc */
    release(h);
}

void xt_free_at(void *p, const char *file, int line)
{
    if (!p)
        return;
    header *h = header_of(p);
    if (magic_of(p) == MAGIC_FREED)
        xt_die_at(file, line,
                  "xt_free: the %zu-byte %s block allocated at %s:%d was freed already, at %s:%d",
                  h->bytes, kind_names[h->kind], shown(h->file), h->line, shown(h->free_file),
                  h->free_line);
    if (magic_of(p) != MAGIC)
        xt_die_at(file, line,
                  "xt_free: %p was not allocated by xt_alloc (or was freed already); free it "
                  "the way it was allocated",
                  p);
    if (h->counted) {
        current[h->kind] -= h->bytes;
        current_total -= h->bytes;
    }
    if (h->prev)
        h->prev->next = h->next;
    else
        live = h->next;
    if (h->next)
        h->next->prev = h->prev;
    h->prev = h->next = NULL;

    char found[256];
    snprintf(found, sizeof found, " (found at its xt_free at %s:%d)", shown(file), line);
    int damaged = check_block(h, found, file, line);
    if (!poison && !damaged) {
        release(h);
        return;
    }
    h->magic = MAGIC_FREED;
    h->free_file = file;
    h->free_line = line;
    memset(p, POISON_BYTE, h->bytes);
    XTI_POISON(p, h->bytes);
    if (damaged)
        return; /* the heap around it may be damaged too: never handed back to malloc */
    if (q_tail)
        q_tail->next = h;
    else
        q_head = h;
    q_tail = h;
    q_bytes += h->bytes;
    /* The newest block stays even when larger than the quarantine: reads after free see NaN. */
    while (q_bytes > QUARANTINE_BYTES && q_head != q_tail)
        release_oldest();
}

/* Where addr lies in block h, or 0 if outside it. */
static int describe_in(const header *h, uintptr_t addr, char *out, size_t cap)
{
    uintptr_t data = (uintptr_t)h + HEAD + ZONE;
    if (addr < data - ZONE || addr >= data + h->bytes + ZONE)
        return 0;
    long at = addr < data ? -(long)(data - addr) : (long)(addr - data);
    const char *where = addr < data               ? "before the start of"
                        : addr >= data + h->bytes ? "past the end of"
                                                  : "in";
    char freed[256] = "";
    if (h->magic == MAGIC_FREED)
        snprintf(freed, sizeof freed, " after it was freed at %s:%d", shown(h->free_file),
                 h->free_line);
    snprintf(out, cap, "%s the %zu-byte %s block allocated at %s:%d%s (byte %ld)", where, h->bytes,
             kind_names[h->kind], shown(h->file), h->line, freed, at);
    return 1;
}

int xti_mem_describe(const void *addr, char *out, size_t cap)
{
    uintptr_t a = (uintptr_t)addr;
    for (const header *h = live; h; h = h->next)
        if (describe_in(h, a, out, cap))
            return 1;
    for (const header *h = q_head; h; h = h->next)
        if (describe_in(h, a, out, cap))
            return 1;
    return 0;
}

size_t xt_alloc_size(const void *p)
{
    if (!p)
        return 0;
    const header *h = header_of(p);
    XT_CHECK(magic_of(p) != MAGIC_FREED,
             "xt_alloc_size: the %zu-byte %s block allocated at %s:%d was freed at %s:%d", h->bytes,
             kind_names[h->kind], shown(h->file), h->line, shown(h->free_file), h->free_line);
    XT_CHECK(magic_of(p) == MAGIC, "xt_alloc_size: %p was not allocated by xt_alloc", p);
    return h->bytes;
}

void xti_mem_check(void)
{
    for (header *h = live; h; h = h->next)
        if (check_block(h, "", h->file, h->line))
            fill_zones(h); /* reported once */
    while (q_head)
        release_oldest();
}

void xti_mem_uncount_live(void)
{
    for (header *h = live; h; h = h->next)
        if (h->counted) {
            current[h->kind] -= h->bytes;
            current_total -= h->bytes;
            h->counted = 0;
        }
    xt_mem_reset_peak();
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
    poison = 0;
#ifdef __GLIBC__
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}
