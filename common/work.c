/*
 * work.c: the rows a case's weights multiplied. A case names a weight
 * array it handed the program (a mixture of experts' parameters, in blocks
 * of one expert, each of three matrices) with xt_case_watch_weights; every GEMM
 * whose operand lies in that array adds the rows it pushed through that
 * block's matrix. The record's W lines carry the sums:
 *
 *     W experts 2 0 17      block 2 (expert 2), part 0 (its Wg): 17 rows
 *
 * so the grader can hold the work to what the contract fixes (an expert
 * computes only the tokens routed to it), whatever the program's loops
 * look like. Computing the same product with a loop of one's own is not
 * counted, which is why the contracts that fix work name xt_gemm.
 */
#include "xt_internal.h"

#include <stdlib.h>
#include <string.h>

enum { MAX_WATCHES = 4 };
typedef struct {
    char name[24];
    const float *base;
    long block, blocks;
    int parts;
    long *rows; /* blocks x parts */
} watch;
static watch watches[MAX_WATCHES];
static int n_watches;

void xt_case_watch_weights(xt_case *c, const char *name, const float *base, long block, long blocks,
                           int parts)
{
    (void)c;
    XT_CHECK(n_watches < MAX_WATCHES, "more than %d weight arrays watched in one case",
             MAX_WATCHES);
    XT_CHECK(block > 0 && blocks >= 0 && parts > 0 && block % parts == 0,
             "xt_case_watch_weights(%s): block %ld of %d parts", name, block, parts);
    watch *w = &watches[n_watches++];
    snprintf(w->name, sizeof w->name, "%s", name);
    w->base = base;
    w->block = block;
    w->blocks = blocks;
    w->parts = parts;
    w->rows = calloc((size_t)(blocks * parts + 1), sizeof *w->rows);
    XT_CHECK(w->rows, "out of memory for the watch of %s", name);
}

void xti_work_begin(void)
{
    for (int i = 0; i < n_watches; i++)
        free(watches[i].rows);
    n_watches = 0;
}

/* The operand p of a GEMM, if it lies in a watched array: rows more through its matrix. */
static void count_operand(const float *p, long rows)
{
    for (int i = 0; i < n_watches; i++) {
        watch *w = &watches[i];
        if (!p || p < w->base || p >= w->base + w->block * w->blocks)
            continue;
        long off = p - w->base, b = off / w->block;
        long part = off % w->block / (w->block / w->parts);
        w->rows[b * w->parts + part] += rows;
    }
}

/* C (m x n) = op(A) op(B): B carries the weight for the m rows of A, or A for the n of B. */
void xti_work_gemm(const float *a, const float *b, int m, int n)
{
    if (!n_watches)
        return;
    count_operand(b, m);
    count_operand(a, n);
}

void xti_work_write(FILE *f)
{
    int any = 0;
    for (int i = 0; i < n_watches; i++) {
        const watch *w = &watches[i];
        for (long j = 0; j < w->blocks * w->parts; j++) {
            if (!w->rows[j])
                continue;
            if (!any++)
                fprintf(f, "# work: watched-weights block part rows-multiplied\n");
            fprintf(f, "W %s %ld %ld %ld\n", w->name, j / w->parts, j % w->parts, w->rows[j]);
        }
    }
}
