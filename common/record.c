/*
 * record.c: the record of one case on one rank, DIR/c<k>/g<g>.r<r>.mpi.txt,
 * which the grader reads (docs/grader.md):
 *
 *     # xt case record, rank 1 of the case (world rank 5)
 *     T 0.000412                        the seconds the function took
 *     C MPI_Send p2p 3 3 0 96 0         counters per function (counters.c)
 *     E MPI_Send S 2 0 32 case          one line per message (counters.c), with
 *     E MPI_Iallreduce C -1 -1 96 case backward:2  the libxt computation running, if
 *                                       any (here: the hook after layer 2's backward)
 *     N RACE ...                        notes (notes.c)
 *     M params 4096 4096                memory per kind (mem.c)
 *     S F 3 0 0.001250 0.001302 2 2 5 96  a pipeline stage's call (stage.c): F forward, B
 *                                       backward, I its input part, W its weight part, N
 *                                       a forward that keeps nothing; the micro-batch, the
 *                                       model chunk, when it started and ended (seconds
 *                                       since the case began), the stage's first layer
 *                                       and number of layers, how many E lines came
 *                                       before it (which messages it came after), and the
 *                                       XT_MEM_ACTIVATIONS bytes in use when it began
 *     A F 64 64 C 2080 0.0012 0.0013 4 1 65536  an attention block (attn_block.c):
 *                                       F forward or B backward, nq, nk, the mask
 *                                       (N none, C causal, S shifted), the (query,
 *                                       key) pairs computed, start, end, the E lines
 *                                       before it, and the receives pending while it
 *                                       ran with the bytes they expect; T for a
 *                                       tile of scores (attn_tile.c)
 *     X F 3 17 0.0012 0.0015 6 2 4096   an expert's call (moe.c): F forward or B
 *                                       backward, the expert, the tokens it
 *                                       computed, start, end, the E lines before
 *                                       it, and the exchanges (receives and
 *                                       nonblocking collectives) pending while
 *                                       it ran with their bytes
 *     W experts 2 0 17                  rows multiplied through a watched weight (work.c):
 *                                       the array, its block and part, the rows
 *     SD 12                             compute calls not logged (past the log's cap)
 *     END
 *
 * xti_record_begin clears what a case collects; xti_record_write writes it.
 */
#include "xt_internal.h"

#include <stdlib.h>

/*
 * The compute calls of the case, in call order: each kept as its record line,
 * formatted when logged (a few hundred per case at most, so the formatting
 * costs nothing next to the compute it describes).
 */
enum { MAX_CALLS = 1 << 16, CALL_LINE = 112 };
typedef struct {
    char line[CALL_LINE];
} call_line;
static call_line *calls;
static long n_calls, cap_calls, dropped_calls, n_stage_calls, n_attn_calls, n_expert_calls;
static long pairs_done[2]; /* attention pairs, forward and backward */
static double case_began;  /* xti_now() when the case began; 0 before the first */

void xti_record_begin(void)
{
    xt_mpi_stats_reset();
    xt_mem_reset_peak();
    xti_notes_clear();
    xti_work_begin();
    pairs_done[0] = pairs_done[1] = 0;
    n_calls = dropped_calls = n_stage_calls = n_attn_calls = n_expert_calls = 0;
    case_began = xti_now();
}

static char *call_slot(void)
{
    if (n_calls == cap_calls) {
        if (cap_calls >= MAX_CALLS) {
            dropped_calls++;
            return NULL;
        }
        cap_calls = cap_calls ? 2 * cap_calls : 256;
        calls = realloc(calls, (size_t)cap_calls * sizeof *calls);
        XT_CHECK(calls, "out of memory for the log of compute calls");
    }
    return calls[n_calls++].line;
}

xti_stage_began xti_stage_begin(void)
{
    return (xti_stage_began){xti_now(), xti_events_logged(),
                             (long)xt_mem_current(XT_MEM_ACTIVATIONS)};
}

void xti_record_stage(char op, int mb, int chunk, int first, int count, xti_stage_began began)
{
    double end = xti_now();
    char *line = call_slot();
    if (!line)
        return;
    n_stage_calls++;
    snprintf(line, CALL_LINE, "S %c %d %d %.6f %.6f %d %d %ld %ld", op, mb, chunk,
             began.start - case_began, end - case_began, first, count, began.events,
             began.activations);
}

void xti_record_attn(char op, int nq, int nk, char mask, long pairs, double start, double end,
                     long events_before, int recv_pending, long recv_bytes)
{
    if (op == 'F' || op == 'B')
        pairs_done[op == 'B'] += pairs;
    char *line = call_slot();
    if (!line)
        return;
    n_attn_calls++;
    snprintf(line, CALL_LINE, "A %c %d %d %c %ld %.6f %.6f %ld %d %ld", op, nq, nk, mask, pairs,
             start - case_began, end - case_began, events_before, recv_pending, recv_bytes);
}

void xti_record_expert(char op, int expert, int tokens, double start, double end,
                       long events_before, int pending, long pending_bytes)
{
    char *line = call_slot();
    if (!line)
        return;
    n_expert_calls++;
    snprintf(line, CALL_LINE, "X %c %d %d %.6f %.6f %ld %d %ld", op, expert, tokens,
             start - case_began, end - case_began, events_before, pending, pending_bytes);
}

long xti_record_pairs(char op)
{
    return pairs_done[op == 'B'];
}

static void calls_write(FILE *f)
{
    if (n_stage_calls)
        fprintf(f, "# stage call: F|B|I|W|N micro-batch chunk start end (seconds since the "
                   "case began) first-layer layers events-before activations-bytes-then\n");
    if (n_attn_calls)
        fprintf(f, "# attention block: F|B|T nq nk mask(N|C|S) pairs start end events-before "
                   "receives-pending their-bytes\n");
    if (n_expert_calls)
        fprintf(f, "# expert call: F|B expert tokens start end events-before exchanges-pending "
                   "their-bytes\n");
    for (long i = 0; i < n_calls; i++)
        fprintf(f, "%s\n", calls[i].line);
    if (dropped_calls)
        fprintf(f, "SD %ld\n", dropped_calls);
}

/*
 * A demo's compute calls, for its timeline: with XT_STAGE_LOG=DIR in the
 * environment, each rank that made any writes DIR/stages.r<rank>.txt (the
 * case record's S and A lines) when the program ends.
 */
void xti_stage_log_write(void)
{
    const char *dir = getenv("XT_STAGE_LOG");
    if (!dir || !*dir || (!n_calls && !dropped_calls))
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/stages.r%d.txt", dir, xti.rank);
    FILE *f = fopen(path, "w");
    XT_CHECK(f, "cannot create %s (XT_STAGE_LOG)", path);
    calls_write(f);
    fprintf(f, "END\n");
    XT_CHECK(fclose(f) == 0, "cannot write %s", path);
}

void xti_record_write(const char *path, double seconds)
{
    FILE *f = fopen(path, "w");
    XT_CHECK(f, "cannot create %s", path);
    fprintf(f, "# xt case record, rank %d of the case (world rank %d)\n", xti.case_rank, xti.rank);
    fprintf(f, "T %.6f\n", seconds);
    xti_counters_write(f);
    xti_notes_write(f);
    xti_mem_write(f);
    xti_work_write(f);
    calls_write(f);
    fprintf(f, "END\n");
    XT_CHECK(fclose(f) == 0, "cannot write %s", path);
}

/*
 * The expert calls this rank logged (its X lines), for a demo that shows in
 * which order a program computed and waited (xt_nn.h): the from-th X line of
 * the log and those after it, at most max, into out; returns how many X lines
 * the log holds in all. A case starts a fresh log; a demo's goes on.
 */
long xt_expert_log(xt_expert_call *out, long from, long max)
{
    long seen = 0, copied = 0;
    for (long i = 0; i < n_calls; i++) {
        if (calls[i].line[0] != 'X')
            continue;
        if (seen++ < from || copied >= max || !out)
            continue;
        xt_expert_call *c = &out[copied];
        char op = 0;
        double start = 0.0, end = 0.0;
        if (sscanf(calls[i].line, "X %c %d %d %lf %lf %ld %d %ld", &op, &c->expert, &c->tokens,
                   &start, &end, &c->events_before, &c->pending, &c->pending_bytes) == 8) {
            c->op = op;
            c->seconds = end - start;
            copied++;
        }
    }
    return seen;
}
