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

int xti_npy_parse(const unsigned char *buf, size_t len, const char *what, xt_array *out, int keep,
                  size_t *used, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (len < 8 || memcmp(buf, "\x93NUMPY", 6) != 0)
        return fail(err, errcap, "%s is not a .npy file", what);
    size_t hlen, at;
    if (buf[6] == 1) {
        if (len < 10)
            goto truncated;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
        at = 10;
    } else if (buf[6] == 2 || buf[6] == 3) {
        if (len < 12)
            goto truncated;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
        at = 12;
    } else {
        return fail(err, errcap, "%s: unsupported .npy version %d", what, buf[6]);
    }
    if (len - at < hlen)
        goto truncated;
    char *hdr = malloc(hlen + 1);
    if (!hdr)
        return fail(err, errcap, "%s: out of memory", what);
    memcpy(hdr, buf + at, hlen);
    hdr[hlen] = 0;
    at += hlen;
    int rc = -1;

    const char *descr = dict_value(hdr, "descr");
    const char *fortran = dict_value(hdr, "fortran_order");
    const char *shape = dict_value(hdr, "shape");
    if (!descr || !fortran || !shape || *descr != '\'' || *shape != '(') {
        fail(err, errcap, "%s: malformed header %s", what, hdr);
        goto done;
    }
    if (strncmp(fortran, "False", 5) != 0) {
        fail(err, errcap, "%s: Fortran-order arrays are not supported", what);
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
        fail(err, errcap, "%s: unsupported dtype '%s' (little-endian numbers only)", what, d);
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
            fail(err, errcap, "%s: bad shape in header %s", what, hdr);
            goto done;
        }
        out->shape[out->ndim++] = v;
        out->count *= v;
        s = end;
    }
    size_t bytes = (size_t)out->count * xt_dtype_size(found);
    if (len - at < bytes) {
        fail(err, errcap, "%s: file is truncated", what);
        goto done;
    }
    if (used)
        *used = at + bytes;
    if (!keep) { /* only its length: an array read past */
        rc = 0;
        goto done;
    }
    out->data = malloc(bytes ? bytes : 1);
    if (!out->data) {
        fail(err, errcap, "%s: out of memory for %zu bytes", what, bytes);
        goto done;
    }
    memcpy(out->data, buf + at, bytes);
    rc = 0;
done:
    free(hdr);
    if (rc != 0)
        memset(out, 0, sizeof *out);
    return rc;
truncated:
    return fail(err, errcap, "%s: file is truncated", what);
}

int xti_file_slurp(const char *path, unsigned char **data, size_t *len, char *err, size_t errcap)
{
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(err, errcap, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) {
            fclose(f);
            return fail(err, errcap, "%s: out of memory", path);
        }
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap)
            break;
        cap *= 2;
        unsigned char *more = realloc(buf, cap);
        if (!more)
            free(buf);
        buf = more;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        return fail(err, errcap, "cannot read %s", path);
    }
    *data = buf;
    *len = n;
    return 0;
}

int xti_npy_read(const char *path, xt_array *out, char *err, size_t errcap)
{
    unsigned char *buf;
    size_t len;
    memset(out, 0, sizeof *out);
    if (xti_file_slurp(path, &buf, &len, err, errcap) != 0)
        return -1;
    int rc = xti_npy_parse(buf, len, path, out, 1, NULL, err, errcap);
    free(buf);
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

int xti_npy_fwrite(FILE *f, const void *data, xt_dtype dt, int ndim, const long *shape)
{
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
    /* Pad so that the header is a multiple of 64 bytes, ending in '\n'. */
    size_t total = 10 + n + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hlen = n + pad + 1;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);

    size_t bytes = (size_t)count * xt_dtype_size(dt);
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, n, f) == n;
    for (size_t i = 0; ok && i < pad; i++)
        ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    ok = ok && (bytes == 0 || fwrite(data, 1, bytes, f) == bytes);
    return ok ? 0 : -1;
}

void xt_npy_write(const char *path, const void *data, xt_dtype dt, int ndim, const long *shape)
{
    XT_CHECK((unsigned)dt < XT_NDTYPES, "xt_npy_write(%s): bad dtype %d", path, (int)dt);
    XT_CHECK(ndim >= 0 && ndim <= XT_NPY_MAXDIM, "xt_npy_write(%s): bad ndim %d", path, ndim);
    FILE *f = fopen(path, "wb");
    XT_CHECK(f, "cannot create %s: %s", path, strerror(errno));
    int ok = xti_npy_fwrite(f, data, dt, ndim, shape) == 0;
    ok = (fclose(f) == 0) && ok;
    XT_CHECK(ok, "cannot write %s: %s", path, strerror(errno));
}
