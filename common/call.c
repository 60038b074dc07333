/*
 * call.c: the MPI call in progress on this rank, as the PMPI wrappers
 * announce it (function, peer, tag, bytes, communicator, since when; for a
 * wait, the requests it waits for), and its description for the watchdog's
 * report and for crash reports.
 *
 * The main thread writes `call`; the watchdog thread reads it through a
 * sequence lock (call_seq is odd while `call` is being written).
 */
#include "xt_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    int fn; /* -1: not in MPI */
    int peer, tag, peer2, tag2, comm_np;
    char comm;
    long bytes;
    double since;
    int n_pending, n_more;
    xti_pending shown[XTI_MAX_SHOWN];
    int last_fn;
    double last_return;
} call_state;
static call_state call = {.fn = -1, .last_fn = -1};
static atomic_uint call_seq;

static void begin_write(void)
{
    atomic_fetch_add_explicit(&call_seq, 1, memory_order_acq_rel);
}

static void end_write(void)
{
    atomic_fetch_add_explicit(&call_seq, 1, memory_order_acq_rel);
}

void xti_call_begin(int fn, int peer, int tag, long bytes, MPI_Comm comm)
{
    int np = 0;
    if (comm != MPI_COMM_NULL)
        PMPI_Comm_size(comm, &np);
    begin_write();
    call.fn = fn;
    call.peer = peer;
    call.tag = tag;
    call.peer2 = MPI_PROC_NULL;
    call.tag2 = 0;
    call.bytes = bytes;
    call.comm = xti_comm_kind(comm);
    call.comm_np = np;
    call.n_pending = call.n_more = 0;
    call.since = xti_now_coarse();
    end_write();
}

void xti_call_second_peer(int peer, int tag)
{
    begin_write();
    call.peer2 = peer;
    call.tag2 = tag;
    end_write();
}

void xti_call_pending(const xti_pending *shown, int n_shown, int n_more)
{
    begin_write();
    call.n_pending = n_shown < XTI_MAX_SHOWN ? n_shown : XTI_MAX_SHOWN;
    memcpy(call.shown, shown, sizeof *shown * (size_t)call.n_pending);
    call.n_more = n_more + n_shown - call.n_pending;
    end_write();
}

void xti_call_end(void)
{
    begin_write();
    call.last_fn = call.fn;
    call.fn = -1;
    call.last_return = xti_now_coarse();
    end_write();
}

/* ------------------------------------------------------------- description */

static void fmt_peer(char *out, size_t cap, const char *dir, int peer)
{
    if (peer == MPI_ANY_SOURCE)
        snprintf(out, cap, "%s any", dir);
    else
        snprintf(out, cap, "%s %d", dir, peer);
}

static void fmt_tag(char *out, size_t cap, int tag)
{
    if (tag == MPI_ANY_TAG)
        snprintf(out, cap, "tag any");
    else
        snprintf(out, cap, "tag %d", tag);
}

void xti_describe_call(char *out, size_t cap, double now, int with_time, int *in_mpi)
{
    /* A consistent copy of `call` (the main thread may be writing it). */
    call_state c;
    for (int tries = 0; tries < 1000; tries++) {
        unsigned s1 = atomic_load_explicit(&call_seq, memory_order_acquire);
        memcpy(&c, &call, sizeof c);
        unsigned s2 = atomic_load_explicit(&call_seq, memory_order_acquire);
        if (s1 == s2 && !(s1 & 1))
            break;
    }
    *in_mpi = c.fn >= 0;
    if (c.fn < 0) {
        if (c.last_fn >= 0)
            snprintf(out, cap, "computing, not in MPI (the last call, %s, returned %.1f s ago)",
                     xti_fn_name[c.last_fn], now - c.last_return);
        else
            snprintf(out, cap, "computing, not in MPI (no MPI call made yet)");
        return;
    }
    char p1[32], t1[32], p2[32], t2[32], args[512] = "";
    const char *name = xti_fn_name[c.fn];
    int cat = xti_fn_cat[c.fn];
    if (cat == XTI_CAT_P2P && (c.fn == XTI_FN_MPI_Wait || c.fn == XTI_FN_MPI_Waitall ||
                               c.fn == XTI_FN_MPI_Waitany || c.fn == XTI_FN_MPI_Waitsome)) {
        size_t pos = 0;
        for (int i = 0; i < c.n_pending && pos < sizeof args; i++) {
            const xti_pending *p = &c.shown[i];
            if (p->dir == 'C') {
                pos += (size_t)snprintf(args + pos, sizeof args - pos, "%s%s", i ? "; " : "",
                                        xti_fn_name[p->fn]);
                continue;
            }
            fmt_peer(p1, sizeof p1, p->dir == 'S' ? "to" : "from", p->peer);
            fmt_tag(t1, sizeof t1, p->tag);
            pos += (size_t)snprintf(args + pos, sizeof args - pos, "%s%s %s, %s, %ld B",
                                    i ? "; " : "", xti_fn_name[p->fn], p1, t1, p->bytes);
        }
        if (c.n_more && pos < sizeof args)
            snprintf(args + pos, sizeof args - pos, "; and %d more", c.n_more);
        if (!c.n_pending)
            snprintf(args, sizeof args, "no active request");
    } else if (c.fn == XTI_FN_MPI_Sendrecv || c.fn == XTI_FN_MPI_Sendrecv_replace) {
        fmt_peer(p1, sizeof p1, "to", c.peer);
        fmt_tag(t1, sizeof t1, c.tag);
        fmt_peer(p2, sizeof p2, "from", c.peer2);
        fmt_tag(t2, sizeof t2, c.tag2);
        snprintf(args, sizeof args, "%s, %s, %ld B; %s, %s", p1, t1, c.bytes, p2, t2);
    } else if (cat == XTI_CAT_P2P && c.peer != -1) {
        int is_recv = c.fn == XTI_FN_MPI_Recv || c.fn == XTI_FN_MPI_Irecv ||
                      c.fn == XTI_FN_MPI_Probe || c.fn == XTI_FN_MPI_Iprobe ||
                      c.fn == XTI_FN_MPI_Mprobe || c.fn == XTI_FN_MPI_Improbe ||
                      c.fn == XTI_FN_MPI_Recv_init;
        fmt_peer(p1, sizeof p1, is_recv ? "from" : "to", c.peer);
        fmt_tag(t1, sizeof t1, c.tag);
        if (c.fn == XTI_FN_MPI_Probe || c.fn == XTI_FN_MPI_Mprobe)
            snprintf(args, sizeof args, "%s, %s", p1, t1);
        else
            snprintf(args, sizeof args, "%s, %s, %s%ld B", p1, t1, is_recv ? "up to " : "",
                     c.bytes);
    } else {
        snprintf(args, sizeof args, "%ld B, %d ranks", c.bytes, c.comm_np);
    }
    const char *group = xti_comm_group(c.comm); /* a mesh's "pp" */
    char named[32] = "";
    if (group && strcmp(group, "mesh") == 0)
        snprintf(named, sizeof named, " on the mesh's own communicator");
    else if (group)
        snprintf(named, sizeof named, " on the %s group", group);
    const char *on = c.comm == 'w'   ? " on MPI_COMM_WORLD"
                     : c.comm == 's' ? " on MPI_COMM_SELF"
                                     : named;
    if (with_time)
        snprintf(out, cap, "%s(%s)%s for %.1f s", name, args, on, now - c.since);
    else
        snprintf(out, cap, "%s(%s)%s", name, args, on);
}

const char *xti_current_call_name(void)
{
    int fn = call.fn;
    return fn >= 0 && fn < XTI_NFN ? xti_fn_name[fn] : "";
}
