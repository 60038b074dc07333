/*
 * counters.c: what the PMPI wrappers count, per MPI function: calls,
 * messages and bytes, since the last reset (each case resets) and since
 * start-up; and the event log of the case, one entry per message or
 * collective (the "E" lines of its record).
 *
 * A message is one send (or one receive); its bytes are count * MPI_Type_size.
 * Receives count what arrived (MPI_Get_count on the status). Sends to or
 * receives from MPI_PROC_NULL move nothing and are not messages.
 */
#include "xt_internal.h"

#include <stdlib.h>
#include <string.h>

static xt_mpi_stats stats[XTI_NFN]; /* since the last reset (each case resets) */
static xt_mpi_stats total[XTI_NFN]; /* since start-up */

typedef struct {
    short fn;
    char dir;  /* 'S' sent, 'R' received, 'C' collective */
    char comm; /* xti_comm_kind */
    int peer, tag;
    int case_peer; /* the peer's rank in the case's group, whatever the communicator; -1 */
    long bytes;
    const char *compute; /* xti.compute and xti.compute_at when it happened */
    int compute_at;
} event;

enum { MAX_EVENTS = 1 << 20 };
static event *events;
static long n_events, cap_events, dropped_events;

/* The rank in the running case's group of the process with this MPI_COMM_WORLD rank, or -1
 * (outside a case, or a process outside the group): a group's ranks are consecutive world
 * ranks, its rank 0 world rank xti.rank - xti.case_rank. So a message on a communicator of
 * the program's own (MPI_Comm_split) names its peer as the grader numbers the group's ranks,
 * and the grader can tell, say, which node it went to. */
static int case_peer_of(int world)
{
    if (world < 0 || xti.case_index < 0 || xti.case_comm == MPI_COMM_NULL)
        return -1;
    int r = world - (xti.rank - xti.case_rank);
    return r >= 0 && r < xti.case_np ? r : -1;
}

static void add_event(int fn, char dir, int peer, int case_peer, int tag, long bytes, char comm)
{
    if (n_events == cap_events) {
        if (cap_events >= MAX_EVENTS) {
            dropped_events++;
            return;
        }
        cap_events = cap_events ? 2 * cap_events : 1024;
        events = realloc(events, (size_t)cap_events * sizeof *events);
        XT_CHECK(events, "out of memory for the MPI event log");
    }
    events[n_events++] =
        (event){(short)fn, dir, comm, peer, tag, case_peer, bytes, xti.compute, xti.compute_at};
}

/*
 * The ledger: per kind of communicator, peer (its rank in MPI_COMM_WORLD, so that every
 * rank's entries name the same processes) and tag, the messages this rank sent and
 * received in the case. Summed over the ranks of a case that stopped, a send that no
 * receive balances is a message that was sent and never received: what a deadlock's report
 * names beside the calls the ranks are blocked in (a send completes once the message has
 * left, so the blocked calls alone do not show it). The watchdog's thread reads it.
 */
typedef struct {
    char dir, comm;
    int peer, tag;
    long msgs, bytes, last; /* last: the bytes of the latest message */
} ledger_entry;
enum { LEDGER_MAX = 192 };
static ledger_entry ledger[LEDGER_MAX];
static atomic_int n_ledger, ledger_full;

static void ledger_add(char dir, char kind, int world, int tag, long bytes)
{
    int n = atomic_load(&n_ledger);
    for (int i = n - 1; i >= 0; i--) {
        ledger_entry *e = &ledger[i];
        if (e->dir == dir && e->comm == kind && e->peer == world && e->tag == tag) {
            e->msgs++;
            e->bytes += bytes;
            e->last = bytes;
            return;
        }
    }
    if (n == LEDGER_MAX) {
        atomic_store(&ledger_full, 1);
        return;
    }
    ledger[n] = (ledger_entry){dir, kind, world, tag, 1, bytes, bytes};
    atomic_store(&n_ledger, n + 1); /* the entry is whole before the watchdog can see it */
}

size_t xti_ledger_describe(char *out, size_t cap)
{
    size_t len = 0;
    int n = atomic_load(&n_ledger);
    if (cap)
        out[0] = '\0';
    for (int i = 0; i < n; i++) {
        const ledger_entry *e = &ledger[i];
        char item[96];
        int k = snprintf(item, sizeof item, "%s%c %s %d %d %ld %ld %ld", len ? ";" : "", e->dir,
                         xti_comm_kind_name(e->comm), e->peer, e->tag, e->msgs, e->bytes, e->last);
        if (k < 0 || len + (size_t)k + 3 > cap) {
            atomic_store(&ledger_full, 1);
            break;
        }
        memcpy(out + len, item, (size_t)k + 1);
        len += (size_t)k;
    }
    if (atomic_load(&ledger_full) && len + 2 < cap) {
        memcpy(out + len, len ? ";+" : "+", len ? 3 : 2);
        len += len ? 2 : 1;
    }
    return len;
}

long xti_events_logged(void)
{
    return n_events + dropped_events;
}

void xti_count_call(int fn)
{
    stats[fn].calls++;
    total[fn].calls++;
}

void xti_count_sent(int fn, int peer, int tag, long bytes, MPI_Comm comm)
{
    if (peer == MPI_PROC_NULL)
        return;
    /* The peer's world rank, once per message: the ledger's and the event's. */
    char kind = xti_comm_kind(comm);
    int world = xti_world_rank(comm, peer);
    ledger_add('S', kind, world, tag, bytes);
    stats[fn].msgs_sent++;
    total[fn].msgs_sent++;
    stats[fn].bytes_sent += bytes;
    total[fn].bytes_sent += bytes;
    add_event(fn, 'S', peer, case_peer_of(world), tag, bytes, kind);
}

void xti_count_recv(int fn, const MPI_Status *st, MPI_Comm comm)
{
    if (st->MPI_SOURCE == MPI_PROC_NULL)
        return;
    int flag = 0;
    PMPI_Test_cancelled(st, &flag);
    if (flag)
        return;
    int n = 0;
    if (PMPI_Get_count(st, MPI_BYTE, &n) != MPI_SUCCESS || n == MPI_UNDEFINED)
        n = 0;
    stats[fn].msgs_recv++;
    total[fn].msgs_recv++;
    stats[fn].bytes_recv += n;
    total[fn].bytes_recv += n;
    char kind = xti_comm_kind(comm);
    int world = xti_world_rank(comm, st->MPI_SOURCE);
    ledger_add('R', kind, world, st->MPI_TAG, n);
    add_event(fn, 'R', st->MPI_SOURCE, case_peer_of(world), st->MPI_TAG, n, kind);
}

void xti_count_coll(int fn, long sent, long recvd, char comm)
{
    stats[fn].bytes_sent += sent;
    total[fn].bytes_sent += sent;
    stats[fn].bytes_recv += recvd;
    total[fn].bytes_recv += recvd;
    add_event(fn, 'C', -1, -1, -1, sent, comm);
}

/* One-sided: the origin's bytes, as sent, whichever way they go. */
void xti_count_rma(int fn, int target, long bytes)
{
    stats[fn].bytes_sent += bytes;
    total[fn].bytes_sent += bytes;
    add_event(fn, 'C', target, -1, -1, bytes, 'o');
}

long xt_mpi_calls(const char *fn)
{
    return xt_mpi_stats_get(fn).calls;
}

xt_mpi_stats xt_mpi_stats_get(const char *fn)
{
    xt_mpi_stats s = {0};
    for (int i = 0; i < XTI_NFN; i++) {
        if (fn && strcmp(fn, xti_fn_name[i]) != 0)
            continue;
        s.calls += stats[i].calls;
        s.msgs_sent += stats[i].msgs_sent;
        s.msgs_recv += stats[i].msgs_recv;
        s.bytes_sent += stats[i].bytes_sent;
        s.bytes_recv += stats[i].bytes_recv;
    }
    return s;
}

void xt_mpi_stats_reset(void)
{
    memset(stats, 0, sizeof stats);
    n_events = dropped_events = 0;
    atomic_store(&n_ledger, 0);
    atomic_store(&ledger_full, 0);
}

static void write_table(FILE *f, const xt_mpi_stats *t)
{
    fprintf(f, "# function kind calls msgs_sent msgs_recv bytes_sent bytes_recv\n");
    for (int i = 0; i < XTI_NFN; i++)
        if (t[i].calls)
            fprintf(f, "C %s %s %ld %ld %ld %ld %ld\n", xti_fn_name[i], xti_cat_name(xti_fn_cat[i]),
                    t[i].calls, t[i].msgs_sent, t[i].msgs_recv, t[i].bytes_sent, t[i].bytes_recv);
}

void xt_mpi_stats_write(const char *path)
{
    FILE *f = fopen(path, "w");
    XT_CHECK(f, "cannot create %s", path);
    fprintf(f, "# xt mpi counters, rank %d of %d, since start-up\n", xti.rank, xti.size);
    write_table(f, total);
    XT_CHECK(fclose(f) == 0, "cannot write %s", path);
}

void xti_counters_write(FILE *f)
{
    write_table(f, stats);
    fprintf(f, "# event: function S|R|C peer tag bytes "
               "communicator(case|world|self|other|other@<mesh group>) "
               "the peer's rank in the case's group (-1: none) "
               "[libxt computation running[:layer whose hook runs]]\n");
    for (long i = 0; i < n_events; i++) {
        const event *e = &events[i];
        fprintf(f, "E %s %c %d %d %ld %s %d", xti_fn_name[e->fn], e->dir, e->peer, e->tag, e->bytes,
                xti_comm_kind_name(e->comm), e->case_peer);
        if (e->compute)
            fprintf(f, " %s", e->compute);
        if (e->compute && e->compute_at >= 0)
            fprintf(f, ":%d", e->compute_at);
        fputc('\n', f);
    }
    if (dropped_events)
        fprintf(f, "D %ld\n", dropped_events);
}
