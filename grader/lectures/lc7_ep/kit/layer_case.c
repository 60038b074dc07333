/*
 * layer_case.c: reading a graded MoE layer's case (kit.h).
 */
#include "kit.h"

#include <stdlib.h>

static float float_param(xt_case *c, const char *key)
{
    return strtof(xt_case_str(c, key), NULL);
}

ep_layer ep_layer_read(xt_case *c)
{
    ep_layer l = {.T = (int)xt_case_int(c, "T"),
                  .d = (int)xt_case_int(c, "d"),
                  .E = (int)xt_case_int(c, "E"),
                  .ff = (int)xt_case_int(c, "ff"),
                  .k = (int)xt_case_int(c, "k"),
                  .renorm = (int)xt_case_int(c, "renorm"),
                  .cf = float_param(c, "cf"),
                  .alpha = float_param(c, "alpha")};
    xt_array x = xt_case_input_const(c, "x"), wr = xt_case_input_const(c, "wr");
    xt_array ex = xt_case_input_const(c, "experts");
    long per = xt_expert_params(l.d, l.ff);
    XT_CHECK(x.count == (long)l.T * l.d && wr.count == (long)l.d * l.E && ex.count % per == 0,
             "the case's x, wr, experts hold %ld, %ld, %ld floats for T=%d d=%d E=%d ff=%d",
             x.count, wr.count, ex.count, l.T, l.d, l.E, l.ff);
    l.x = x.data;
    l.wr = wr.data;
    l.experts = ex.data;
    l.n_experts = ex.count / per;
    /* Each expert's rows through its Wg, Wu and Wd, for the rules on routed work. */
    xt_case_watch_weights(c, "experts", ex.data, per, l.n_experts, 3);
    if (xt_case_int(c, "has_dy")) {
        xt_array dy = xt_case_input_const(c, "dy");
        XT_CHECK(dy.count == x.count, "the case's dy holds %ld floats, x %ld", dy.count, x.count);
        l.dy = dy.data;
    }
    return l;
}
