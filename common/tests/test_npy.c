/*
 * test_npy.c: .npy round trip with NumPy. For every dtype, reads DIR/in_<dtype>.npy
 * (NumPy wrote element i as 3i - 7 in shape (2, 3)), checks shape and values,
 * and writes the same values to DIR/out_<dtype>.npy for NumPy to check back.
 */
#include "xt_harness.h"

#include <stdio.h>
#include <string.h>

static double element(const xt_array *a, long i)
{
    const char *p = (const char *)a->data + (size_t)i * xt_dtype_size(a->dtype);
    switch (a->dtype) {
    case XT_F32:
        return *(const float *)p;
    case XT_F64:
        return *(const double *)p;
    case XT_I8:
        return *(const int8_t *)p;
    case XT_I16:
        return *(const int16_t *)p;
    case XT_I32:
        return *(const int32_t *)p;
    case XT_I64:
        return (double)*(const int64_t *)p;
    case XT_U8:
        return *(const uint8_t *)p;
    case XT_U16:
        return *(const uint16_t *)p;
    case XT_U32:
        return *(const uint32_t *)p;
    case XT_U64:
        return (double)*(const uint64_t *)p;
    default:
        return *(const uint16_t *)p; /* 16-bit payloads: compared as bits */
    }
}

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    const char *dir = xt_arg_str("dir", ".");
    int failures = 0;
    for (int t = 0; t < XT_NDTYPES; t++) {
        xt_dtype dt = (xt_dtype)t;
        if (dt == XT_BF16)
            continue; /* bf16 travels as uint16: the uint16 case covers it */
        char path[1024], err[256];
        snprintf(path, sizeof path, "%s/in_%s.npy", dir, xt_dtype_name(dt));
        xt_array a;
        if (xt_npy_try_read(path, &a, err, sizeof err) != 0) {
            printf("FAIL %s: %s\n", xt_dtype_name(dt), err);
            failures++;
            continue;
        }
        int ok = a.dtype == dt && a.ndim == 2 && a.shape[0] == 2 && a.shape[1] == 3 && a.count == 6;
        for (long i = 0; ok && i < a.count; i++) {
            double want =
                dt == XT_U8 || dt == XT_U16 || dt == XT_U32 || dt == XT_U64 ? 3.0 * i : 3.0 * i - 7;
            /* float16 stays a 16-bit payload here: NumPy checks its bits come back. */
            ok = dt == XT_F16 || element(&a, i) == want;
        }
        if (!ok) {
            printf("FAIL %s: wrong dtype, shape or values\n", xt_dtype_name(dt));
            failures++;
        }
        snprintf(path, sizeof path, "%s/out_%s.npy", dir, xt_dtype_name(dt));
        xt_npy_write(path, a.data, a.dtype, a.ndim, a.shape);
        xt_array_free(&a);
    }
    /* Edge shapes: a scalar (ndim 0), an empty vector, a long 1-d vector. */
    char path[1024];
    double one = 2.5;
    snprintf(path, sizeof path, "%s/out_scalar.npy", dir);
    xt_npy_write(path, &one, XT_F64, 0, NULL);
    snprintf(path, sizeof path, "%s/out_empty.npy", dir);
    xt_npy_write(path, NULL, XT_F32, 1, (long[]){0});
    static int32_t seq[1000];
    for (int i = 0; i < 1000; i++)
        seq[i] = i;
    snprintf(path, sizeof path, "%s/out_seq.npy", dir);
    xt_npy_write(path, seq, XT_I32, 1, (long[]){1000});
    xt_array back;
    xt_npy_read(path, &back);
    if (back.count != 1000 || memcmp(back.data, seq, sizeof seq) != 0) {
        printf("FAIL C-to-C round trip of out_seq.npy\n");
        failures++;
    }
    xt_array_free(&back);
    char err[256];
    snprintf(path, sizeof path, "%s/not_there.npy", dir);
    if (xt_npy_try_read(path, &back, err, sizeof err) == 0 || !strstr(err, "not_there")) {
        printf("FAIL a missing file is not reported by name: %s\n", err);
        failures++;
    }
    printf(failures ? "npy: %d failures\n" : "npy: ok\n", failures);
    xt_finalize();
    return failures ? 1 : 0;
}
