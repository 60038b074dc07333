/*
 * nn_case.h: what the programs that run numeric cases from grader/nntest.py
 * share (common/tests/test_nn.c for libxt's layers, each lecture kit's
 * grader/lectures/<lecture>/kit/tests/test_kit.c for its own): one case a
 * line in DIR/cases.txt, "<id> <kind> key=value ...", its arrays
 * DIR/<id>.<name>.npy (NumPy writes the inputs, the program its outputs
 * beside them); floats in cases.txt are C99 hex literals ("0x1.8p-1"), so
 * that both sides start from the same bits. Each program runs the kinds it
 * knows and leaves the others to the program that knows them; nntest.py
 * judges every output.
 *
 *     PROGRAM DIR          (one rank: mpirun -np 1, or started directly)
 *     PROGRAM --die MODE   a misuse that must stop the run with a clear message
 *     PROGRAM --die-modes  the modes it knows, one a line
 */
#ifndef NN_CASE_H
#define NN_CASE_H

#include "xt_harness.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *dir;
static int failures;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        printf("FAIL " __VA_ARGS__);                                                               \
        printf("\n");                                                                              \
        failures++;                                                                                \
    } while (0)

/* ------------------------------------------------------------- one case */

#define MAX_KEYS 16

typedef struct {
    int id;
    char kind[16];
    int nkeys;
    char key[MAX_KEYS][32];
    char value[MAX_KEYS][256];
} test_case;

static inline const char *param(const test_case *c, const char *key)
{
    for (int i = 0; i < c->nkeys; i++)
        if (!strcmp(c->key[i], key))
            return c->value[i];
    xt_die("case %d (%s): no parameter '%s'", c->id, c->kind, key);
}

static inline long iparam(const test_case *c, const char *key)
{
    return strtol(param(c, key), NULL, 10);
}

static inline uint64_t uparam(const test_case *c, const char *key)
{
    return strtoull(param(c, key), NULL, 10);
}

static inline float fparam(const test_case *c, const char *key)
{
    return strtof(param(c, key), NULL); /* hex: exact */
}

static inline xt_array load(const test_case *c, const char *name, xt_dtype dt)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.%s.npy", dir, c->id, name);
    xt_array a;
    xt_npy_read(path, &a);
    XT_CHECK(a.dtype == dt, "%s: %s, expected %s", path, xt_dtype_name(a.dtype), xt_dtype_name(dt));
    return a;
}

/* The input as floats: the array owns them, free with xt_array_free. */
static inline float *floats(const test_case *c, const char *name, xt_array *a)
{
    *a = load(c, name, XT_F32);
    return a->data;
}

static inline void save(const test_case *c, const char *name, const void *data, xt_dtype dt,
                        long d0, long d1)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%d.%s.npy", dir, c->id, name);
    long shape[2] = {d0, d1};
    xt_npy_write(path, data, dt, d1 < 0 ? 1 : 2, shape);
}

static inline float *nans(long n)
{
    float *p = xt_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (long i = 0; i < n; i++)
        p[i] = NAN;
    return p;
}

static inline void free_arrays(xt_array *const *all, int n)
{
    for (int i = 0; i < n; i++)
        xt_array_free(all[i]);
}

static inline void free_buffers(float *const *all, int n)
{
    for (int i = 0; i < n; i++)
        free(all[i]);
}

/* FREE_ARRAYS(&x, &y): xt_array_free each; FREE_BUFFERS(p, q): free each. */
#define FREE_ARRAYS(...)                                                                           \
    free_arrays((xt_array *[]){__VA_ARGS__},                                                       \
                (int)(sizeof((xt_array *[]){__VA_ARGS__}) / sizeof(xt_array *)))
#define FREE_BUFFERS(...)                                                                          \
    free_buffers((float *[]){__VA_ARGS__},                                                         \
                 (int)(sizeof((float *[]){__VA_ARGS__}) / sizeof(float *)))

static inline xt_act act_param(const test_case *c)
{
    xt_act act;
    XT_CHECK(xt_act_from_name(param(c, "act"), &act), "unknown act %s", param(c, "act"));
    return act;
}

static inline int same_bits(const float *a, const float *b, long n)
{
    return memcmp(a, b, sizeof(float) * (size_t)n) == 0;
}

static inline long first_diff(const float *a, const float *b, long n)
{
    for (long i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof(float)))
            return i;
    return -1;
}

/* A gradient the case names in null= is passed as NULL; otherwise `buf`. */
static inline float *unless_null(const test_case *c, const char *name, float *buf)
{
    const char *null = param(c, "null");
    size_t n = strlen(name);
    for (const char *p = null; (p = strstr(p, name)); p += n)
        if ((p == null || p[-1] == ',') && (p[n] == ',' || p[n] == '\0'))
            return NULL;
    return buf;
}

static inline int parse(char *line, test_case *c)
{
    memset(c, 0, sizeof *c);
    char *tok = strtok(line, " \t\n");
    if (!tok || tok[0] == '#')
        return 0;
    c->id = atoi(tok);
    tok = strtok(NULL, " \t\n");
    XT_CHECK(tok && strlen(tok) < sizeof c->kind, "case %d: no kind", c->id);
    strcpy(c->kind, tok);
    while ((tok = strtok(NULL, " \t\n"))) {
        char *eq = strchr(tok, '=');
        XT_CHECK(eq && c->nkeys < MAX_KEYS && eq - tok < 32 && strlen(eq + 1) < 256,
                 "case %d: bad parameter '%s'", c->id, tok);
        *eq = '\0';
        strcpy(c->key[c->nkeys], tok);
        strcpy(c->value[c->nkeys], eq + 1);
        c->nkeys++;
    }
    return 1;
}

/* A kind of case and the function that runs one. */
typedef struct {
    const char *kind;
    void (*run)(const test_case *c);
} nn_case_kind;

/*
 * The program's main: --die-modes prints `modes` (NULL-terminated); --die
 * MODE calls die(MODE), which must not come back; otherwise every case of
 * DIR/cases.txt whose kind is in `kinds` runs, after check() (what needs no
 * NumPy; may be NULL). Prints "<name>: N cases, ok" or the failures' count.
 */
static inline int nn_case_main(int argc, char **argv, const char *name, const nn_case_kind *kinds,
                               size_t nkinds, const char *const *modes, void (*die)(const char *),
                               void (*check)(void))
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--die-modes")) {
            for (const char *const *m = modes; m && *m; m++)
                printf("%s\n", *m);
            return 0;
        }
    xt_init(&argc, &argv);
    const char *mode = xt_arg_str("die", NULL);
    if (mode) {
        die(mode);
        printf("SURVIVED --die %s: the API accepted it\n", mode);
        fflush(stdout);
        xt_finalize();
        return 1;
    }
    XT_CHECK(argc >= 2 && strncmp(argv[1], "--", 2) != 0, "usage: %s DIR", argv[0]);
    dir = argv[1];
    if (check)
        check();
    char path[4096], line[4096];
    snprintf(path, sizeof path, "%s/cases.txt", dir);
    FILE *f = fopen(path, "r");
    XT_CHECK(f, "cannot open %s", path);
    int ran = 0;
    test_case c;
    while (fgets(line, sizeof line, f)) {
        if (!parse(line, &c))
            continue;
        for (size_t k = 0; k < nkinds; k++)
            if (!strcmp(kinds[k].kind, c.kind)) {
                kinds[k].run(&c);
                ran++;
            }
    }
    fclose(f);
    printf(failures ? "%s: %d cases, %d failures\n" : "%s: %d cases, ok\n", name, ran, failures);
    xt_finalize();
    return failures ? 1 : 0;
}

#endif
