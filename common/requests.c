/*
 * requests.c: the requests of the nonblocking calls a program starts, from
 * start to completion. The PMPI wrappers add each request, and report its
 * start (persistent requests), completion and release here. With the table
 * this file
 *   - counts what a nonblocking receive brought when it completes;
 *   - tells the watchdog what a wait is waiting for;
 *   - notes a buffer used while a pending request owns it (RACE);
 *   - notes, when a case ends, the requests it never completed (PENDING),
 *     and a request freed while still active (FREED);
 *   - in strict mode, holds a buffer in flight to MPI's rules, which a fast
 *     transport hides: a send buffer must not change until its request
 *     completes, and a receive buffer holds nothing until then.
 *
 * The last point, for a point-to-point request whose datatype has no holes:
 *
 *   MPI_Isend(buf)  copy of buf kept ........ completion: buf == copy? else INFLIGHT
 *   MPI_Irecv(buf)  buf -> shadow, buf := poison; MPI receives into shadow
 *                                             completion: buf := shadow
 *
 * A small message over shared memory is copied when it is posted, so a send
 * buffer overwritten before its wait arrives intact here and spoiled on
 * another transport or at another size; a receive buffer read before its wait
 * often holds the message already. Neither happens by luck in strict mode: the
 * change is seen, and the early read gets the poison (XTI_RECV_POISON), which
 * the grader names.
 *
 * The table is an open-addressing hash on the handle; the active requests
 * that own a buffer are also kept in a short list, which the check on every
 * point-to-point call scans.
 */
#define _GNU_SOURCE /* dladdr */
#include "xt_internal.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    MPI_Request h;
    short fn, started_fn; /* the call that made it, and the one that last started it */
    char dir;             /* 'S', 'R' or 'C' */
    MPI_Comm comm;
    char persistent, active, used;
    char dense; /* its datatype has no holes (see dense) */
    int peer, tag;
    int world_peer; /* peer's rank in MPI_COMM_WORLD (-1: any, or none) */
    long bytes;
    const char *lo, *hi; /* the buffer's bytes, [lo, hi): MPI's until completion */
    char *copy;          /* strict: a send buffer's bytes when started */
    char *shadow;        /* strict: what MPI receives into, for a receive's [lo, hi) */
    const void *site;    /* where it was started (a return address), for reports */
    xti_coll_bufs *coll; /* strict: a nonblocking collective's buffers (see below) */
} request;
static request *reqs;
static size_t cap_reqs, n_reqs;

static int reuse_noted; /* one note per case is enough */
static int inflight_noted;
static int strict_buffers; /* strict mode: buffers in flight checked (see above) */

void xti_requests_strict(int on)
{
    strict_buffers = on;
}

static size_t req_hash(MPI_Request h)
{
    uint64_t k = 0;
    memcpy(&k, &h, sizeof h < sizeof k ? sizeof h : sizeof k);
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static request *req_find(MPI_Request h)
{
    if (!cap_reqs || h == MPI_REQUEST_NULL)
        return NULL;
    for (size_t i = req_hash(h) & (cap_reqs - 1);; i = (i + 1) & (cap_reqs - 1)) {
        if (!reqs[i].used)
            return NULL;
        if (reqs[i].h == h)
            return &reqs[i];
    }
}

static void req_insert_raw(const request *r)
{
    size_t i = req_hash(r->h) & (cap_reqs - 1);
    while (reqs[i].used && reqs[i].h != r->h)
        i = (i + 1) & (cap_reqs - 1);
    if (!reqs[i].used)
        n_reqs++;
    reqs[i] = *r;
    reqs[i].used = 1;
}

/* The bytes a (buf, count, datatype) argument covers, as [*lo, *hi). */
static void span(const void *buf, int count, MPI_Datatype dt, const char **lo, const char **hi)
{
    *lo = *hi = NULL;
    MPI_Aint lb, extent, true_lb, true_extent;
    if (!buf || buf == MPI_BOTTOM || count <= 0 || dt == MPI_DATATYPE_NULL ||
        PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(dt, &true_lb, &true_extent) != MPI_SUCCESS)
        return;
    (void)lb;
    *lo = (const char *)buf + true_lb;
    *hi = *lo + (MPI_Aint)(count - 1) * extent + true_extent;
}

/* Whether (count, dt) covers every byte of [lo, hi): a datatype with holes leaves
 * bytes that the program may use while the request is pending, so it is left alone. */
static int dense(int count, MPI_Datatype dt, const char *lo, const char *hi)
{
    int size = 0;
    return lo != hi && PMPI_Type_size(dt, &size) == MPI_SUCCESS && (long)size * count == hi - lo;
}

static void poison(char *p, size_t n)
{
    const uint32_t word = XTI_RECV_POISON;
    const char *w = (const char *)&word;
    for (size_t i = 0; i < n; i++)
        p[i] = w[i % sizeof word];
}

void *xti_shadow_open(void *buf, int count, MPI_Datatype dt, int started, char **shadow)
{
    *shadow = NULL;
    if (!strict_buffers)
        return buf;
    const char *lo, *hi;
    span(buf, count, dt, &lo, &hi);
    if (!dense(count, dt, lo, hi))
        return buf;
    size_t n = (size_t)(hi - lo);
    char *s = malloc(n);
    if (!s)
        return buf;
    if (started) {
        /* The shadow starts as the buffer: what a message shorter than the buffer, or a
         * cancelled receive, leaves there is the program's own. */
        memcpy(s, lo, n);
        poison((char *)lo, n);
    }
    *shadow = s;
    return s + ((const char *)buf - lo);
}

void xti_shadow_undo(void *buf, int count, MPI_Datatype dt, int started, char *shadow)
{
    if (!shadow)
        return;
    const char *lo, *hi;
    span(buf, count, dt, &lo, &hi);
    if (started)
        memcpy((char *)lo, shadow, (size_t)(hi - lo));
    free(shadow);
}

void xti_site_format(const void *addr, char *out, size_t cap)
{
    Dl_info info;
    out[0] = 0;
    if (!addr || !dladdr(addr, &info) || !info.dli_fname)
        return;
    if (info.dli_sname && info.dli_saddr)
        snprintf(out, cap, "%s(%s+0x%lx)", info.dli_fname, info.dli_sname,
                 (unsigned long)((const char *)addr - (const char *)info.dli_saddr));
    else
        snprintf(out, cap, "%s(+0x%lx)", info.dli_fname,
                 (unsigned long)((const char *)addr - (const char *)info.dli_fbase));
}

/* "{, posted at |module(fn+0x1c)}": the grader turns it into ", posted at file.c:42", or
 * drops it where the address is not in the exercise's file. */
static const char *site_token(const char *prefix, const void *addr, char *out, size_t cap)
{
    char where[512];
    xti_site_format(addr, where, sizeof where);
    if (where[0])
        snprintf(out, cap, "{%s|%s}", prefix, where);
    else
        out[0] = 0;
    return out;
}

/*
 * The active requests that own a buffer, kept apart from the request table so
 * that the check below, which runs on every point-to-point call, looks at the
 * few pending requests rather than at every slot of the table.
 */
typedef struct {
    MPI_Request h;
    const char *lo, *hi;
    short fn;
    char dir;
    int peer, tag;
} owner;
static owner *owners;
static int n_owners, cap_owners;

static void owner_add(const request *r)
{
    if (r->lo == r->hi)
        return;
    if (n_owners == cap_owners) {
        cap_owners = cap_owners ? 2 * cap_owners : 64;
        owners = realloc(owners, (size_t)cap_owners * sizeof *owners);
        XT_CHECK(owners, "out of memory for the request table");
    }
    owners[n_owners++] = (owner){r->h, r->lo, r->hi, r->fn, r->dir, r->peer, r->tag};
}

static void owner_drop(MPI_Request h)
{
    for (int i = n_owners - 1; i >= 0; i--)
        if (owners[i].h == h) {
            owners[i] = owners[--n_owners];
            return;
        }
}

/*
 * From a nonblocking call until its request completes, the buffer belongs to
 * MPI: receiving into it, or sending from memory that a pending receive is
 * filling, races with the transfer (two sends may share a buffer). Such a bug
 * works on most runs, so it is caught here rather than by a wrong answer.
 */
void xti_check_buffer_free(int fn, char dir, const void *buf, int count, MPI_Datatype dt)
{
    if (!n_owners || reuse_noted)
        return;
    const char *lo, *hi;
    span(buf, count, dt, &lo, &hi);
    if (lo == hi)
        return;
    for (int i = 0; i < n_owners; i++) {
        const owner *r = &owners[i];
        if (r->hi <= lo || hi <= r->lo)
            continue;
        if (dir == 'S' && r->dir == 'S')
            continue;
        reuse_noted = 1;
        /* RACE: a RULE reported before the values, which the race may have spoiled. */
        xti_note("RACE",
                 "%s %s memory that %s(%s %d, tag %d) still owns: a buffer belongs to MPI "
                 "until its request completes (MPI_Wait/MPI_Test), so each pending request "
                 "needs its own buffer",
                 xti_fn_name[fn], dir == 'S' ? "sent from" : "received into", xti_fn_name[r->fn],
                 r->dir == 'S' ? "to" : "from", r->peer, r->tag);
        return;
    }
}

/* A send's buffer as it was when the send started, to compare at its completion. */
static void keep_copy(request *r)
{
    if (!strict_buffers || r->dir != 'S' || !r->dense)
        return;
    size_t n = (size_t)(r->hi - r->lo);
    if (!r->copy)
        r->copy = malloc(n);
    if (r->copy)
        memcpy(r->copy, r->lo, n);
}

static void req_remove(request *r);

void xti_request_add(MPI_Request h, int fn, char dir, int peer, int tag, long bytes, MPI_Comm comm,
                     int persistent, const void *buf, int count, MPI_Datatype dt, char *shadow,
                     const void *site)
{
    request *same = req_find(h);
    if (same && same->active && !same->persistent) {
        /* MPI hands out a handle again only once its request is complete: Open MPI gives
         * every nonblocking collective on one rank the same, already complete request. */
        if (same->shadow)
            memcpy((char *)same->lo, same->shadow, (size_t)(same->hi - same->lo));
        xti_coll_end(same->coll);
        free(same->shadow);
        free(same->copy);
        req_remove(same);
    }
    if (h == MPI_REQUEST_NULL)
        return;
    if (2 * (n_reqs + 1) > cap_reqs) {
        size_t old_cap = cap_reqs;
        request *old = reqs;
        cap_reqs = cap_reqs ? 2 * cap_reqs : 256;
        reqs = calloc(cap_reqs, sizeof *reqs);
        XT_CHECK(reqs, "out of memory for the request table");
        n_reqs = 0;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i].used)
                req_insert_raw(&old[i]);
        free(old);
    }
    request r = {.h = h,
                 .fn = (short)fn,
                 .started_fn = (short)fn,
                 .dir = dir,
                 .comm = comm,
                 .world_peer = xti_world_rank(comm, peer),
                 .persistent = (char)persistent,
                 .active = (char)!persistent,
                 .peer = peer,
                 .tag = tag,
                 .bytes = bytes,
                 .shadow = shadow,
                 .site = site};
    span(buf, count, dt, &r.lo, &r.hi);
    r.dense = (char)dense(count, dt, r.lo, r.hi);
    if (r.active)
        keep_copy(&r);
    req_insert_raw(&r);
    if (r.active)
        owner_add(&r);
}

/* Removes with backward-shift deletion, so lookups never need tombstones. */
static void req_remove(request *r)
{
    owner_drop(r->h);
    size_t i = (size_t)(r - reqs);
    reqs[i].used = 0;
    n_reqs--;
    for (size_t j = (i + 1) & (cap_reqs - 1); reqs[j].used; j = (j + 1) & (cap_reqs - 1)) {
        request moved = reqs[j];
        reqs[j].used = 0;
        n_reqs--;
        req_insert_raw(&moved);
    }
}

void xti_request_starting(MPI_Request h, int fn, const void *site)
{
    request *r = req_find(h);
    if (!r || r->active)
        return;
    r->started_fn = (short)fn;
    r->site = site;
    keep_copy(r);
    /* Before MPI starts it: a message that lands during the start goes into the shadow. */
    if (r->shadow) {
        memcpy(r->shadow, r->lo, (size_t)(r->hi - r->lo));
        poison((char *)r->lo, (size_t)(r->hi - r->lo));
    }
}

void xti_request_start_failed(MPI_Request h)
{
    request *r = req_find(h);
    if (r && !r->active && r->shadow)
        memcpy((char *)r->lo, r->shadow, (size_t)(r->hi - r->lo));
}

void xti_request_started(MPI_Request h)
{
    request *r = req_find(h);
    if (!r)
        return;
    if (r->lo != r->hi && !r->active) {
        /* Compare against the others before this one joins them. */
        xti_check_buffer_free(r->fn, r->dir, r->lo, (int)(r->hi - r->lo), MPI_BYTE);
        owner_add(r);
    }
    r->active = 1;
    if (r->dir == 'S') {
        xti_count_sent(r->fn, r->peer, r->tag, r->bytes, r->comm);
        xti_count_call(r->fn); /* a start is a send of its own */
    }
}

/*
 * A nonblocking collective's buffers in strict mode, as blocks: those it sends from, copied
 * when it starts and compared when it completes; those it receives into, made into one
 * shadow of their span (holes between blocks stay the program's), the blocks poisoned and
 * copied back at completion. With MPI_IN_PLACE the input sits in the receive blocks, and so
 * in the shadow, where MPI reads it.
 */
typedef struct {
    const char *lo, *hi;
} block;

struct xti_coll_bufs {
    block *send, *recv;
    int n_send, n_recv, cap_send, cap_recv;
    int recv_holes; /* a receive block of a datatype with holes: no shadow at all */
    char *copy;     /* the send blocks' bytes, one after another */
    char *shadow;   /* [recv_lo, recv_hi) */
    const char *recv_lo, *recv_hi;
};

xti_coll_bufs *xti_coll_new(void)
{
    if (!strict_buffers)
        return NULL;
    xti_coll_bufs *cb = calloc(1, sizeof *cb);
    return cb;
}

static void add_block(block **bs, int *n, int *cap, const char *lo, const char *hi)
{
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        *bs = realloc(*bs, (size_t)*cap * sizeof **bs);
        XT_CHECK(*bs, "out of memory for a collective's buffers");
    }
    (*bs)[(*n)++] = (block){lo, hi};
}

/* The block of (count, dt) at displacement disp (in dt's extents) from buf. */
static int block_of(const void *buf, MPI_Aint disp, int count, MPI_Datatype dt, const char **lo,
                    const char **hi)
{
    MPI_Aint lb, extent;
    *lo = *hi = NULL;
    if (!buf || buf == MPI_IN_PLACE || count <= 0 ||
        PMPI_Type_get_extent(dt, &lb, &extent) != MPI_SUCCESS)
        return 0;
    span((const char *)buf + disp * extent, count, dt, lo, hi);
    return *lo != *hi && dense(count, dt, *lo, *hi);
}

void xti_coll_send(xti_coll_bufs *cb, const void *buf, MPI_Aint disp, int count, MPI_Datatype dt)
{
    const char *lo, *hi;
    if (cb && block_of(buf, disp, count, dt, &lo, &hi))
        add_block(&cb->send, &cb->n_send, &cb->cap_send, lo, hi);
}

void xti_coll_recv(xti_coll_bufs *cb, const void *buf, MPI_Aint disp, int count, MPI_Datatype dt)
{
    const char *lo, *hi;
    if (!cb || !buf || buf == MPI_IN_PLACE || count <= 0)
        return;
    if (!block_of(buf, disp, count, dt, &lo, &hi)) {
        cb->recv_holes |= lo != hi;
        return;
    }
    add_block(&cb->recv, &cb->n_recv, &cb->cap_recv, lo, hi);
    if (!cb->recv_lo || lo < cb->recv_lo)
        cb->recv_lo = lo;
    if (!cb->recv_hi || hi > cb->recv_hi)
        cb->recv_hi = hi;
}

void *xti_coll_start(xti_coll_bufs *cb, void *r)
{
    if (!cb)
        return r;
    size_t total = 0;
    for (int i = 0; i < cb->n_send; i++)
        total += (size_t)(cb->send[i].hi - cb->send[i].lo);
    cb->copy = total ? malloc(total) : NULL;
    for (size_t at = 0, i = 0; cb->copy && i < (size_t)cb->n_send; i++) {
        size_t n = (size_t)(cb->send[i].hi - cb->send[i].lo);
        memcpy(cb->copy + at, cb->send[i].lo, n);
        at += n;
    }
    if (!cb->n_recv || cb->recv_holes || !r)
        return r;
    cb->shadow = malloc((size_t)(cb->recv_hi - cb->recv_lo));
    if (!cb->shadow)
        return r;
    for (int i = 0; i < cb->n_recv; i++) {
        size_t n = (size_t)(cb->recv[i].hi - cb->recv[i].lo);
        memcpy(cb->shadow + (cb->recv[i].lo - cb->recv_lo), cb->recv[i].lo, n);
    }
    for (int i = 0; i < cb->n_recv; i++)
        poison((char *)cb->recv[i].lo, (size_t)(cb->recv[i].hi - cb->recv[i].lo));
    return cb->shadow + ((const char *)r - cb->recv_lo);
}

/* The receive blocks as MPI left them in the shadow (the message, or the input of MPI_IN_PLACE
 * where it failed), and everything freed. */
void xti_coll_end(xti_coll_bufs *cb)
{
    if (!cb)
        return;
    for (int i = 0; cb->shadow && i < cb->n_recv; i++)
        memcpy((char *)cb->recv[i].lo, cb->shadow + (cb->recv[i].lo - cb->recv_lo),
               (size_t)(cb->recv[i].hi - cb->recv[i].lo));
    free(cb->send);
    free(cb->recv);
    free(cb->copy);
    free(cb->shadow);
    free(cb);
}

/* The first byte of the send blocks that differs from the copy, as (*at of *total); 0 if none. */
static int coll_send_changed(const xti_coll_bufs *cb, size_t *at, size_t *total)
{
    *at = *total = 0;
    int changed = 0;
    for (int i = 0; cb->copy && i < cb->n_send; i++) {
        size_t n = (size_t)(cb->send[i].hi - cb->send[i].lo);
        const char *was = cb->copy + *total;
        for (size_t j = 0; !changed && j < n; j++)
            if (cb->send[i].lo[j] != was[j]) {
                changed = 1;
                *at = *total + j;
            }
        *total += n;
    }
    return changed;
}

/* "MPI_Isend(to 1, tag 0, 64 B{, posted at |site})": a request as reports name it. */
static void describe(const request *r, char *out, size_t cap)
{
    char at[600];
    site_token(", posted at ", r->site, at, sizeof at);
    if (r->dir == 'C')
        snprintf(out, cap, "%s(%ld B%s)", xti_fn_name[r->started_fn], r->bytes, at);
    else
        snprintf(out, cap, "%s(%s %d, tag %d, %ld B%s)", xti_fn_name[r->started_fn],
                 r->dir == 'S' ? "to" : "from", r->peer, r->tag, r->bytes, at);
}

/* The INFLIGHT note (a RULE reported before the values, which it may have spoiled), once a
 * case: "<request>: its <what> (first at byte <at> of <n>) before the request completed (in
 * <fn> at <site>): <why>". */
static void note_inflight(const request *r, const char *what, size_t at, size_t n, int fn,
                          const void *site, const char *why)
{
    inflight_noted = 1;
    char req[800], where[600];
    describe(r, req, sizeof req);
    site_token(" at ", site, where, sizeof where);
    xti_note("INFLIGHT",
             "%s: its %s (first at byte %zu of %zu) before the request completed (in %s%s): %s",
             req, what, at, n, xti_fn_name[fn], where, why);
}

/* A send's buffer (a collective's send blocks) against its copy from the start: INFLIGHT
 * where a byte changed. */
static void check_unchanged(request *r, int fn, const void *site)
{
    size_t n = 0, i = 0;
    if (inflight_noted)
        return;
    if (r->coll) {
        if (!coll_send_changed(r->coll, &i, &n))
            return;
    } else {
        if (!r->copy)
            return;
        n = (size_t)(r->hi - r->lo);
        while (i < n && r->lo[i] == r->copy[i])
            i++;
        if (i == n)
            return;
    }
    note_inflight(r, r->coll ? "send buffer changed" : "buffer changed", i, n, fn, site,
                  "a send buffer belongs to MPI until its request completes, however fast a "
                  "small message leaves, so each message in flight needs a buffer of its own");
}

/* The first byte of [lo, hi) that is not the poison poison() wrote there, or hi - lo. */
static size_t poison_kept(const char *lo, const char *hi)
{
    const uint32_t word = XTI_RECV_POISON;
    const char *w = (const char *)&word;
    size_t n = (size_t)(hi - lo), i = 0;
    while (i < n && lo[i] == w[i % sizeof word])
        i++;
    return i;
}

/* A receive's buffer (a collective's receive blocks) still all poison, as MPI left it while
 * it received into the shadow: INFLIGHT where the program wrote to it. */
static void check_untouched(request *r, int fn, const void *site)
{
    size_t n = 0, at = 0;
    int written = 0;
    if (inflight_noted)
        return;
    if (r->shadow) {
        n = (size_t)(r->hi - r->lo);
        at = poison_kept(r->lo, r->hi);
        written = at < n;
    } else if (r->coll && r->coll->shadow) {
        for (int i = 0; i < r->coll->n_recv; i++) {
            const block *b = &r->coll->recv[i];
            size_t k = poison_kept(b->lo, b->hi);
            if (!written && k < (size_t)(b->hi - b->lo)) {
                written = 1;
                at = n + k;
            }
            n += (size_t)(b->hi - b->lo);
        }
    }
    if (!written)
        return;
    note_inflight(r, "receive buffer was written", at, n, fn, site,
                  "a receive buffer belongs to MPI until its request completes, so use it, in "
                  "place too, only after the wait");
}

void xti_request_coll(MPI_Request h, xti_coll_bufs *cb)
{
    request *r = req_find(h);
    if (r)
        r->coll = cb;
    else
        xti_coll_end(cb);
}

const void *xti_request_complete(MPI_Request h, const MPI_Status *st, int *bytes, int fn,
                                 const void *site)
{
    request *r = req_find(h);
    if (!r || !r->active)
        return NULL;
    const void *into = NULL;
    if (r->dir == 'S' || r->coll)
        check_unchanged(r, fn, site);
    check_untouched(r, fn, site);
    xti_coll_end(r->coll);
    r->coll = NULL;
    if (r->shadow) /* the message, or the buffer as it was (cancelled, shorter) */
        memcpy((char *)r->lo, r->shadow, (size_t)(r->hi - r->lo));
    if (r->dir == 'R') {
        xti_count_recv(r->fn, st, r->comm);
        into = r->lo;
        *bytes = (int)(r->hi - r->lo);
    }
    if (r->persistent) {
        r->active = 0;
        owner_drop(h);
    } else {
        free(r->copy);
        free(r->shadow);
        req_remove(r);
    }
    return into;
}

void xti_request_freed(MPI_Request h)
{
    request *r = req_find(h);
    if (!r)
        return;
    if (r->active) {
        char what[800];
        describe(r, what, sizeof what);
        /* FREED: a RULE. The shadow is MPI's until the message lands, whenever that is. */
        xti_note("FREED",
                 "%s: MPI_Request_free freed its request before it completed, so nothing "
                 "tells when %s; complete every request with MPI_Wait or MPI_Test",
                 what,
                 r->dir == 'S'   ? "its buffer may change or the message has arrived"
                 : r->dir == 'R' ? "its buffer holds the message"
                                 : "its buffers are the program's again");
    } else
        free(r->shadow);
    free(r->copy);
    req_remove(r);
}

int xt_receives_pending(long *bytes)
{
    int n = 0;
    *bytes = 0;
    for (int i = 0; i < n_owners; i++)
        if (owners[i].dir == 'R' && owners[i].peer != MPI_PROC_NULL) {
            n++;
            *bytes += owners[i].hi - owners[i].lo;
        }
    return n;
}

size_t xti_receives_waiting(char *out, size_t len, size_t cap)
{
    /* The program is stuck in a call, so the table holds still while this reads it. */
    for (size_t i = 0; i < cap_reqs; i++) {
        const request *r = &reqs[i];
        if (!r->used || !r->active || r->dir != 'R' || r->peer == MPI_PROC_NULL)
            continue;
        char peer[16], tag[16], item[96];
        snprintf(peer, sizeof peer, r->world_peer < 0 ? "any" : "%d", r->world_peer);
        snprintf(tag, sizeof tag, r->tag < 0 ? "any" : "%d", r->tag);
        int k = snprintf(item, sizeof item, "%sW %s %s %s %ld %s", len ? ";" : "",
                         xti_comm_kind_name(xti_comm_kind(r->comm)), peer, tag, r->bytes,
                         xti_fn_name[r->started_fn]);
        if (k < 0 || len + (size_t)k + 1 > cap)
            break;
        memcpy(out + len, item, (size_t)k + 1);
        len += (size_t)k;
    }
    return len;
}

int xt_exchanges_pending(long *bytes)
{
    int n = xt_receives_pending(bytes);
    for (size_t i = 0; i < cap_reqs; i++)
        if (reqs[i].used && reqs[i].active && reqs[i].dir == 'C') {
            n++;
            *bytes += reqs[i].bytes;
        }
    return n;
}

void xti_request_show(const MPI_Request *hs, int n)
{
    xti_pending shown[XTI_MAX_SHOWN];
    int n_shown = 0, n_more = 0;
    for (int i = 0; i < n; i++) {
        request *r = req_find(hs[i]);
        if (!r || !r->active)
            continue;
        if (n_shown < XTI_MAX_SHOWN)
            shown[n_shown++] = (xti_pending){r->fn, r->dir, r->peer, r->tag, r->bytes};
        else
            n_more++;
    }
    xti_call_pending(shown, n_shown, n_more);
}

void xti_check_pending_requests(void)
{
    for (size_t i = 0; i < cap_reqs; i++) {
        request *r = &reqs[i];
        if (!r->used || !r->active)
            continue;
        const char *what = r->dir == 'S' ? "to" : "from";
        /* PENDING: a RULE reported before the values, which an unfinished request explains. */
        if (r->dir == 'C')
            xti_note("PENDING",
                     "%s was never completed: every nonblocking call needs its "
                     "MPI_Wait/MPI_Test before the function returns",
                     xti_fn_name[r->fn]);
        else
            xti_note("PENDING",
                     "%s(%s %d, tag %d, %ld B) was never completed: every nonblocking "
                     "call needs its MPI_Wait/MPI_Test before the function returns",
                     xti_fn_name[r->fn], what, r->peer, r->tag, r->bytes);
    }
    /* Whatever is left belongs to a finished case (a pending receive's shadow stays MPI's). */
    for (size_t i = 0; i < cap_reqs; i++)
        if (reqs[i].used && !reqs[i].persistent) {
            free(reqs[i].copy);
            reqs[i].used = 0;
        }
    n_reqs = 0;
    n_owners = 0;
    for (size_t i = 0; i < cap_reqs; i++) {
        n_reqs += reqs[i].used;
        if (reqs[i].used && reqs[i].active)
            owner_add(&reqs[i]);
    }
    reuse_noted = inflight_noted = 0; /* the next case gets its own notes */
}
