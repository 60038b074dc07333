/*
 * watch.c: a demo's view of one buffer going through an algorithm.
 *
 * Between xt_watch_begin and xt_watch_print the PMPI layer tells this file
 * about every message sent from or received into the watched buffer and
 * every MPI_Reduce_local into it. A step begins at each send, and the buffer
 * is copied as it is when the next step begins (or the algorithm ends), so
 * the print shows, per step and rank, which chunk went where and what the
 * buffer held afterwards: partial results growing step by step. The record
 * comes from the MPI calls themselves, so it shows whatever the code under
 * the watch did, a student's own included. How the buffer is cut into
 * chunks is the caller's: it passes the chunks' lengths, as MPI's counts.
 *
 * Nonblocking receives count when they complete, not when they are posted;
 * until then the snapshots show their part of the buffer as it was when
 * posted, not whatever MPI has already written there.
 *
 * A message from or into other memory (an algorithm's own scratch) is named
 * by its length, or, after xt_watch_values(k), by its contents when it holds
 * at most k elements of the buffer's type: a ring that passes a (max, sum)
 * pair around shows the pairs.
 */
#include "xt_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_STEPS = 64, MAX_CHUNKS = 64, MAX_WATCH_BYTES = 1 << 16, MAX_PENDING = 16 };

typedef struct {
    int to, sent_a, sent_b;      /* to: -1 if nothing sent; a = b = -1: not from the buffer */
    int from, recv_a, recv_b;    /* from: -1 if nothing received; a = -1: into scratch */
    int fold_a, fold_b;          /* like recv_a, recv_b: where MPI_Reduce_local reduced into */
    int folded, touched;         /* a reduction happened; the watched buffer was used */
    char *after;                 /* the buffer when the step ended */
    char sent_v[64], recv_v[64]; /* a small message outside the buffer, by its values */
} step;

static struct {
    int on;
    const char *base;
    int count, size, nchunks;
    int start[MAX_CHUNKS + 1]; /* chunk c is [start[c], start[c + 1]) */
    xt_dtype xd;
    int known;  /* dt has an xt_dtype, so its values can be printed */
    int values; /* xt_watch_values: show messages outside the buffer up to this many elements */
    step steps[MAX_STEPS];
    int n;
    int overflow; /* steps past MAX_STEPS were not kept */
    struct {
        int a, b;    /* elements [a, b) of the buffer */
        char *saved; /* what they held when the receive was posted */
    } pending[MAX_PENDING];
    int npending;
} w;

static void drop_pending(int i)
{
    free(w.pending[i].saved);
    w.pending[i] = w.pending[--w.npending];
}

void xt_watch_begin(const void *buf, MPI_Datatype dt, const int *chunk_counts, int nchunks)
{
    XT_CHECK(nchunks >= 1 && nchunks <= MAX_CHUNKS,
             "xt_watch_begin: %d chunks (a demo shows 1 to %d)", nchunks, MAX_CHUNKS);
    int size;
    PMPI_Type_size(dt, &size);
    memset(&w, 0, sizeof w);
    for (int c = 0; c < nchunks; c++) {
        XT_CHECK(chunk_counts[c] >= 0, "xt_watch_begin: chunk %d has %d elements", c,
                 chunk_counts[c]);
        w.start[c + 1] = w.start[c] + chunk_counts[c];
    }
    w.count = w.start[nchunks];
    XT_CHECK((long)w.count * size <= MAX_WATCH_BYTES,
             "xt_watch_begin: %d elements is more than a demo can show", w.count);
    w.on = 1;
    w.base = buf;
    w.size = size;
    w.known = xt_dtype_from_mpi(dt, &w.xd);
    w.nchunks = nchunks;
}

/*
 * [*a, *b) in elements of the watched buffer; outside it, *a = -1 and *b is
 * the element count (a scratch buffer's chunk is told by its length).
 */
static void range(const void *buf, int count, MPI_Datatype dt, int *a, int *b)
{
    int size = 0;
    PMPI_Type_size(dt, &size);
    long off = (const char *)buf - w.base, len = (long)count * size;
    if (!buf || off < 0 || off + len > (long)w.count * w.size || off % w.size) {
        *a = -1;
        *b = count;
        return;
    }
    *a = (int)(off / w.size);
    *b = (int)((off + len) / w.size);
}

void xt_watch_values(int upto)
{
    XT_CHECK(w.on, "xt_watch_values without xt_watch_begin");
    XT_CHECK(upto >= 0 && upto <= 8, "xt_watch_values(%d): a demo shows 0 to 8 values", upto);
    w.values = upto;
}

/* "[v0 v1]": a message outside the buffer, read as the buffer's type, when xt_watch_values
 * asked for messages that short; else "" (named by its length instead). */
static void payload(char *out, size_t cap, const void *buf, int count, MPI_Datatype dt)
{
    int size = 0;
    out[0] = '\0';
    PMPI_Type_size(dt, &size);
    long bytes = (long)count * size, n = bytes / w.size;
    if (!w.values || !w.known || !buf || bytes <= 0 || bytes % w.size || n > w.values)
        return;
    size_t pos = (size_t)snprintf(out, cap, "[");
    for (long i = 0; i < n && pos < cap; i++) {
        char v[32];
        xti_format_value(v, sizeof v, (const char *)buf + i * w.size, w.xd);
        pos += (size_t)snprintf(out + pos, cap - pos, "%s%s", i ? " " : "", v);
    }
    if (pos < cap)
        snprintf(out + pos, cap - pos, "]");
}

static char *snapshot(void)
{
    char *copy = xt_malloc((size_t)w.count * (size_t)w.size + 1);
    memcpy(copy, w.base, (size_t)w.count * (size_t)w.size);
    for (int i = 0; i < w.npending; i++)
        memcpy(copy + (size_t)w.pending[i].a * w.size, w.pending[i].saved,
               (size_t)(w.pending[i].b - w.pending[i].a) * w.size);
    return copy;
}

void xti_watch_posted(const void *buf, int count, MPI_Datatype dt)
{
    int a, b;
    if (!w.on || w.npending == MAX_PENDING)
        return;
    range(buf, count, dt, &a, &b);
    if (a < 0 || b <= a)
        return;
    size_t len = (size_t)(b - a) * w.size;
    char *saved = xt_malloc(len);
    memcpy(saved, w.base + (size_t)a * w.size, len);
    w.pending[w.npending].a = a;
    w.pending[w.npending].b = b;
    w.pending[w.npending++].saved = saved;
}

static step *new_step(void)
{
    if (w.n > 0 && !w.steps[w.n - 1].after)
        w.steps[w.n - 1].after = snapshot();
    if (w.n == MAX_STEPS) {
        w.overflow = 1;
        return NULL;
    }
    step *s = &w.steps[w.n++];
    *s = (step){-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, NULL, "", ""};
    return s;
}

static step *current(void)
{
    return w.n > 0 ? &w.steps[w.n - 1] : new_step();
}

void xti_watch_send(const void *buf, int count, MPI_Datatype dt, int peer)
{
    if (!w.on || peer < 0)
        return;
    /* A receive posted just before (not yet reduced in) belongs to this send's step. */
    step *s =
        w.n > 0 && w.steps[w.n - 1].to < 0 && !w.steps[w.n - 1].folded ? current() : new_step();
    if (!s)
        return;
    s->to = peer;
    range(buf, count, dt, &s->sent_a, &s->sent_b);
    s->touched |= s->sent_a >= 0;
    if (s->sent_a < 0)
        payload(s->sent_v, sizeof s->sent_v, buf, count, dt);
}

void xti_watch_recv(const void *buf, int count, MPI_Datatype dt, int peer)
{
    if (!w.on)
        return;
    int a, b;
    range(buf, count, dt, &a, &b);
    for (int i = 0; i < w.npending; i++)
        if (w.pending[i].a == a && w.pending[i].b == b) {
            drop_pending(i);
            break;
        }
    if (peer < 0)
        return;
    step *s = current();
    if (!s)
        return;
    s->from = peer;
    range(buf, count, dt, &s->recv_a, &s->recv_b);
    s->touched |= s->recv_a >= 0;
    if (s->recv_a < 0)
        payload(s->recv_v, sizeof s->recv_v, buf, count, dt);
}

void xti_watch_fold(const void *buf, int count, MPI_Datatype dt)
{
    if (!w.on)
        return;
    step *s = current();
    if (!s)
        return;
    range(buf, count, dt, &s->fold_a, &s->fold_b);
    s->folded = 1;
    s->touched |= s->fold_a >= 0;
}

/* "c3" when [a, b) is chunk 3, else "[a:b]"; "n elts" outside the buffer. */
static void name_range(char *out, size_t cap, int a, int b)
{
    if (a < 0) {
        snprintf(out, cap, "%d elt%s", b, b == 1 ? "" : "s");
        return;
    }
    for (int c = 0; c < w.nchunks; c++)
        if (w.start[c] == a && w.start[c + 1] == b && a < b) {
            snprintf(out, cap, "c%d", c);
            return;
        }
    snprintf(out, cap, "[%d:%d]", a, b);
}

static void format_value(char *out, size_t cap, const char *p)
{
    if (w.known)
        xti_format_value(out, cap, p, w.xd);
    else
        snprintf(out, cap, "?");
}

static int widest(const char *buf)
{
    int most = 1;
    char v[64];
    for (int i = 0; i < w.count; i++) {
        format_value(v, sizeof v, buf + (size_t)i * (size_t)w.size);
        int n = (int)strlen(v);
        most = n > most ? n : most;
    }
    return most;
}

/* The buffer with a bar between chunks: [ 0  1| 2  3| 4]. */
static void format_chunks(char *out, size_t cap, const char *buf, int width)
{
    size_t pos = 0;
    pos += (size_t)snprintf(out + pos, cap - pos, "[");
    int c = 1;
    for (int i = 0; i < w.count && pos < cap; i++) {
        char v[64];
        format_value(v, sizeof v, buf + (size_t)i * (size_t)w.size);
        while (c < w.nchunks && w.start[c] == i && i > 0) {
            pos += (size_t)snprintf(out + pos, cap - pos, "|");
            c++;
        }
        pos += (size_t)snprintf(out + pos, cap - pos, "%s%*s", i && out[pos - 1] != '|' ? " " : "",
                                width, v);
    }
    if (pos < cap)
        snprintf(out + pos, cap - pos, "]");
}

/* What step s sent ("c0 -> r1") and received ("c3 <- r3 (reduced in)"), each "" if nothing. */
static void describe_step(const step *s, char *sent, size_t sent_cap, char *got, size_t got_cap)
{
    char what[72];
    sent[0] = got[0] = '\0';
    if (s->to >= 0) {
        if (s->sent_v[0])
            snprintf(what, sizeof what, "%s", s->sent_v);
        else
            name_range(what, sizeof what, s->sent_a, s->sent_b);
        snprintf(sent, sent_cap, "%s -> r%d", what, s->to);
    }
    if (s->from >= 0) {
        if (s->recv_v[0])
            snprintf(what, sizeof what, "%s", s->recv_v);
        else
            name_range(what, sizeof what, s->recv_a, s->recv_b);
        if (s->recv_a < 0 && s->fold_a >= 0)
            name_range(what, sizeof what, s->fold_a, s->fold_b);
        snprintf(got, got_cap, "%s <- r%d%s", what, s->from, s->folded ? " (reduced in)" : "");
    } else if (s->folded) {
        name_range(what, sizeof what, s->fold_a, s->fold_b);
        snprintf(got, got_cap, "reduced into %s", what);
    }
}

void xt_watch_print(MPI_Comm comm, const char *(*phase)(int step, int np))
{
    XT_CHECK(w.on, "xt_watch_print without xt_watch_begin");
    if (w.n > 0 && !w.steps[w.n - 1].after)
        w.steps[w.n - 1].after = snapshot();
    w.on = 0;
    int rank, np, n = w.n, most = 0, width = 1;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &np);
    /* Columns as wide as the widest entry on any rank (at least 13 and 22). */
    int cols[2] = {13, 22};
    for (int k = 0; k < w.n; k++) {
        int wk = widest(w.steps[k].after);
        width = wk > width ? wk : width;
        char sent[96], got[112];
        describe_step(&w.steps[k], sent, sizeof sent, got, sizeof got);
        cols[0] = (int)strlen(sent) > cols[0] ? (int)strlen(sent) : cols[0];
        cols[1] = (int)strlen(got) > cols[1] ? (int)strlen(got) : cols[1];
    }
    PMPI_Allreduce(&n, &most, 1, MPI_INT, MPI_MAX, comm);
    PMPI_Allreduce(MPI_IN_PLACE, &width, 1, MPI_INT, MPI_MAX, comm);
    PMPI_Allreduce(MPI_IN_PLACE, cols, 2, MPI_INT, MPI_MAX, comm);
    /* A buffer the algorithm never touched (it works on a copy) is not worth showing. */
    int any_touched = 0;
    for (int k = 0; k < w.n; k++)
        any_touched |= w.steps[k].touched;
    PMPI_Allreduce(MPI_IN_PLACE, &any_touched, 1, MPI_INT, MPI_MAX, comm);
    for (int k = 0; k < most; k++) {
        const char *label = phase ? phase(k, np) : NULL;
        if (rank == 0) {
            printf("step %d%s%s%s\n", k + 1, label ? " (" : "", label ? label : "",
                   label ? ")" : "");
            fflush(stdout);
        }
        char line[1024] = "", sent[96] = "", got[112] = "", buf[768] = "";
        if (k < w.n) {
            describe_step(&w.steps[k], sent, sizeof sent, got, sizeof got);
            if (any_touched)
                format_chunks(buf, sizeof buf, w.steps[k].after, width);
            snprintf(line, sizeof line, "%-*s %-*s %s", cols[0], sent, cols[1], got, buf);
        } else {
            snprintf(line, sizeof line, "%-*s %-*s %s", cols[0], "", cols[1], "", "(done)");
        }
        for (size_t len = strlen(line); len > 0 && line[len - 1] == ' '; len--)
            line[len - 1] = '\0';
        xt_printf_ordered(comm, "%s", line);
    }
    int lost = w.overflow, any_lost = 0;
    PMPI_Allreduce(&lost, &any_lost, 1, MPI_INT, MPI_MAX, comm);
    if (rank == 0 && any_lost)
        printf("(only the first %d steps were kept)\n", MAX_STEPS);
    for (int k = 0; k < w.n; k++)
        free(w.steps[k].after);
    w.n = 0;
    while (w.npending)
        drop_pending(0);
}
