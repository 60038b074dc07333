/*
 * core_opts.c: the options every program shares, read from the command line
 * that start-up keeps in xti.argc/xti.argv: --name=value or --name value.
 */
#include "xt_internal.h"

#include <stdlib.h>
#include <string.h>

static const char *find_arg(const char *name)
{
    size_t len = strlen(name);
    for (int i = 1; i < xti.argc; i++) {
        const char *a = xti.argv[i];
        if (strncmp(a, "--", 2) != 0 || strncmp(a + 2, name, len) != 0)
            continue;
        if (a[2 + len] == '=')
            return a + 3 + len;
        if (a[2 + len] == 0)
            return (i + 1 < xti.argc && strncmp(xti.argv[i + 1], "--", 2) != 0) ? xti.argv[i + 1]
                                                                                : "";
    }
    return NULL;
}

const char *xt_arg_str(const char *name, const char *dflt)
{
    const char *v = find_arg(name);
    return v ? v : dflt;
}

long xt_arg_int(const char *name, long dflt)
{
    const char *v = find_arg(name);
    if (!v)
        return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    XT_CHECK(*v && !*end, "option --%s expects an integer, got '%s'", name, v);
    return x;
}

double xt_arg_double(const char *name, double dflt)
{
    const char *v = find_arg(name);
    if (!v)
        return dflt;
    char *end;
    double x = strtod(v, &end);
    XT_CHECK(*v && !*end, "option --%s expects a number, got '%s'", name, v);
    return x;
}

int xt_arg_flag(const char *name)
{
    return find_arg(name) != NULL;
}
