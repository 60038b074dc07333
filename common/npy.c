/*
 * npy.c: the .npy format (NumPy's own, version 1.0 to 3.0): reading and writing.
 *
 *   "\x93NUMPY" major minor  header_len  {'descr': '<f4', 'fortran_order': False,
 *                                          'shape': (3, 4), }   padding  '\n'  data
 *
 * Only little-endian C-order arrays of plain numbers: that is all the grader writes.
 * A higher layer may install a guard that refuses some paths (case mode
 * refuses the grader's case files: xti_npy_set_guard).
 */
#include "xt_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ reading */

static int fail(char *err, size_t cap, const char *fmt, ...) XT_PRINTF(3, 4);
static int fail(char *err, size_t cap, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* The value after 'key': in the header dict, or NULL. */
static const char *dict_value(const char *hdr, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p)
        return NULL;
    p = strchr(p + strlen(pat), ':');
    if (!p)
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

static xti_npy_guard_fn guard;

void xti_npy_set_guard(xti_npy_guard_fn refuse)
{
    guard = refuse;
}

int xt_npy_try_read(const char *path, xt_array *out, char *err, size_t errcap)
{
    if (guard && guard(path, err, errcap)) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return xti_npy_read(path, out, err, errcap);
}

int xti_npy_read(const char *path, xt_array *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, errcap, "cannot open %s: %s", path, strerror(errno));
    unsigned char pre[10];
    char *hdr = NULL;
    int rc = -1;
    if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        fail(err, errcap, "%s is not a .npy file", path);
        goto done;
    }
    size_t hlen;
    if (pre[6] == 1) {
        if (fread(pre + 8, 1, 2, f) != 2)
            goto truncated;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        unsigned char l4[4];
        if (fread(l4, 1, 4, f) != 4)
            goto truncated;
        hlen = (size_t)l4[0] | (size_t)l4[1] << 8 | (size_t)l4[2] << 16 | (size_t)l4[3] << 24;
    } else {
        fail(err, errcap, "%s: unsupported .npy version %d", path, pre[6]);
        goto done;
    }
    hdr = malloc(hlen + 1);
    if (!hdr || fread(hdr, 1, hlen, f) != hlen)
        goto truncated;
    hdr[hlen] = 0;

    const char *descr = dict_value(hdr, "descr");
    const char *fortran = dict_value(hdr, "fortran_order");
    const char *shape = dict_value(hdr, "shape");
    if (!descr || !fortran || !shape || *descr != '\'' || *shape != '(') {
        fail(err, errcap, "%s: malformed header %s", path, hdr);
        goto done;
    }
    if (strncmp(fortran, "False", 5) != 0) {
        fail(err, errcap, "%s: Fortran-order arrays are not supported", path);
        goto done;
    }
    char d[8] = {0};
    for (int i = 0; i < 7 && descr[1 + i] && descr[1 + i] != '\''; i++)
        d[i] = descr[1 + i];
    if (d[0] == '=')
        d[0] = '<';
    if (d[0] == '|' && d[2] != '1')
        d[0] = '<';
    if (strcmp(d, "|b1") == 0)
        strcpy(d, "|u1");
    xt_dtype found;
    if (!xti_dtype_from_descr(d, &found)) {
        fail(err, errcap, "%s: unsupported dtype '%s' (little-endian numbers only)", path, d);
        goto done;
    }
    out->dtype = found;
    out->count = 1;
    const char *s = shape + 1;
    while (*s && *s != ')') {
        while (*s == ' ' || *s == ',')
            s++;
        if (*s == ')')
            break;
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || out->ndim == XT_NPY_MAXDIM) {
            fail(err, errcap, "%s: bad shape in header %s", path, hdr);
            goto done;
        }
        out->shape[out->ndim++] = v;
        out->count *= v;
        s = end;
    }
    size_t bytes = (size_t)out->count * xt_dtype_size(found);
    out->data = malloc(bytes ? bytes : 1);
    if (!out->data) {
        fail(err, errcap, "%s: out of memory for %zu bytes", path, bytes);
        goto done;
    }
    if (fread(out->data, 1, bytes, f) != bytes) {
        free(out->data);
        out->data = NULL;
        goto truncated;
    }
    rc = 0;
    goto done;
truncated:
    fail(err, errcap, "%s: file is truncated", path);
done:
    free(hdr);
    fclose(f);
    return rc;
}

void xt_npy_read(const char *path, xt_array *out)
{
    char err[512];
    if (xt_npy_try_read(path, out, err, sizeof err) != 0)
        xt_die("%s", err);
}

void xt_array_free(xt_array *a)
{
    free(a->data);
    a->data = NULL;
    a->count = 0;
}

/* ------------------------------------------------------------------ writing */

void xt_npy_write(const char *path, const void *data, xt_dtype dt, int ndim, const long *shape)
{
    XT_CHECK((unsigned)dt < XT_NDTYPES, "xt_npy_write(%s): bad dtype %d", path, (int)dt);
    XT_CHECK(ndim >= 0 && ndim <= XT_NPY_MAXDIM, "xt_npy_write(%s): bad ndim %d", path, ndim);
    char dict[256];
    size_t n =
        (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                         xti_dtype_descr(dt));
    long count = 1;
    for (int i = 0; i < ndim; i++) {
        n += (size_t)snprintf(dict + n, sizeof dict - n, "%ld%s", shape[i],
                              (ndim == 1 || i + 1 < ndim) ? ", " : "");
        count *= shape[i];
    }
    if (ndim == 1)
        n -= 1; /* "(3,)" */
    n += (size_t)snprintf(dict + n, sizeof dict - n, "), }");
    /* Pad so that the data starts on a multiple of 64 bytes, header ending in '\n'. */
    size_t total = 10 + n + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hlen = n + pad + 1;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);

    FILE *f = fopen(path, "wb");
    XT_CHECK(f, "cannot create %s: %s", path, strerror(errno));
    size_t bytes = (size_t)count * xt_dtype_size(dt);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, n, f) == n;
    for (size_t i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && (bytes == 0 || fwrite(data, 1, bytes, f) == bytes);
    ok = (fclose(f) == 0) && ok;
    XT_CHECK(ok, "cannot write %s: %s", path, strerror(errno));
}
