/*
 * transformer.c: the numeric pieces of the lectures on tensor, pipeline,
 * context and expert parallelism (xt_nn.h, "transformer pieces"): the
 * split rule, RMSNorm, SiLU and the SwiGLU MLP, causal grouped-query
 * attention, the embedding, and a decoder block made of them.
 * grader/nn.py holds the NumPy twin of each.
 */
#include "xt_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void xt_block(int n, int np, int r, int *lo, int *count)
{
    if (n < 0 || np < 1 || r < 0 || r >= np)
        xt_die("xt_block(n=%d, np=%d, r=%d): needs n >= 0, np >= 1 and 0 <= r < np", n, np, r);
    int base = n / np, extra = n % np;
    *count = base + (r < extra);
    *lo = r * base + (r < extra ? r : extra);
}
