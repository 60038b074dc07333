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
 *     S F 3 0 0.001250 0.001302 2 2 5   a pipeline stage's call (stage.c): F forward, B
 *                                       backward, I its input part, W its weight part, N
 *                                       a forward that keeps nothing; the micro-batch, the
 *                                       model chunk, when it started and ended (seconds
 *                                       since the case began), the stage's first layer
 *                                       and number of layers, and how many E lines came
 *                                       before it (which messages it came after)
 *     SD 12                             stage calls not logged (past the log's cap)
 *     END
 *
 * xti_record_begin clears what a case collects; xti_record_write writes it.
 */
#include "xt_internal.h"

#include <stdlib.h>

typedef struct {
    char op;
    int mb, chunk, first, count;
    double start, end;
    long events_before;
} stage_call;

enum { MAX_STAGE_CALLS = 1 << 16 };
static stage_call *stage_calls;
static long n_stage_calls, cap_stage_calls, dropped_stage_calls;
static double case_began; /* xti_now() when the case began; 0 before the first */

void xti_record_begin(void)
{
    xt_mpi_stats_reset();
    xt_mem_reset_peak();
    xti_notes_clear();
    n_stage_calls = dropped_stage_calls = 0;
    case_began = xti_now();
}

void xti_record_stage(char op, int mb, int chunk, int first, int count, double start, double end,
                      long events_before)
{
    if (n_stage_calls == cap_stage_calls) {
        if (cap_stage_calls >= MAX_STAGE_CALLS) {
            dropped_stage_calls++;
            return;
        }
        cap_stage_calls = cap_stage_calls ? 2 * cap_stage_calls : 256;
        stage_calls = realloc(stage_calls, (size_t)cap_stage_calls * sizeof *stage_calls);
        XT_CHECK(stage_calls, "out of memory for the pipeline stage log");
    }
    stage_calls[n_stage_calls++] = (stage_call){
        op, mb, chunk, first, count, start - case_began, end - case_began, events_before};
}

static void stages_write(FILE *f)
{
    if (n_stage_calls || dropped_stage_calls)
        fprintf(f, "# stage call: F|B|I|W|N micro-batch chunk start end (seconds since the "
                   "case began) first-layer layers events-before\n");
    for (long i = 0; i < n_stage_calls; i++) {
        const stage_call *c = &stage_calls[i];
        fprintf(f, "S %c %d %d %.6f %.6f %d %d %ld\n", c->op, c->mb, c->chunk, c->start, c->end,
                c->first, c->count, c->events_before);
    }
    if (dropped_stage_calls)
        fprintf(f, "SD %ld\n", dropped_stage_calls);
}

/*
 * A demo's stage calls, for its timeline: with XT_STAGE_LOG=DIR in the
 * environment, each rank that made any writes DIR/stages.r<rank>.txt (the
 * case record's S lines) when the program ends.
 */
void xti_stage_log_write(void)
{
    const char *dir = getenv("XT_STAGE_LOG");
    if (!dir || !*dir || (!n_stage_calls && !dropped_stage_calls))
        return;
    char path[4096];
    snprintf(path, sizeof path, "%s/stages.r%d.txt", dir, xti.rank);
    FILE *f = fopen(path, "w");
    XT_CHECK(f, "cannot create %s (XT_STAGE_LOG)", path);
    stages_write(f);
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
    stages_write(f);
    fprintf(f, "END\n");
    XT_CHECK(fclose(f) == 0, "cannot write %s", path);
}
