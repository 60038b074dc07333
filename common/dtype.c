/*
 * dtype.c: the element types libxt knows (xt_dtype): their sizes, NumPy's
 * names and .npy descriptors, and their MPI datatypes, both ways.
 */
#include "xt_internal.h"

#include <string.h>

static const struct {
    const char *name;  /* NumPy's dtype name */
    const char *descr; /* .npy descr */
    size_t size;
} dtypes[XT_NDTYPES] = {
    [XT_F32] = {"float32", "<f4", 4}, [XT_F64] = {"float64", "<f8", 8},
    [XT_I8] = {"int8", "|i1", 1},     [XT_I16] = {"int16", "<i2", 2},
    [XT_I32] = {"int32", "<i4", 4},   [XT_I64] = {"int64", "<i8", 8},
    [XT_U8] = {"uint8", "|u1", 1},    [XT_U16] = {"uint16", "<u2", 2},
    [XT_U32] = {"uint32", "<u4", 4},  [XT_U64] = {"uint64", "<u8", 8},
    [XT_F16] = {"float16", "<f2", 2}, [XT_BF16] = {"bfloat16", "<u2", 2},
};

size_t xt_dtype_size(xt_dtype dt)
{
    return (unsigned)dt < XT_NDTYPES ? dtypes[dt].size : 0;
}

const char *xt_dtype_name(xt_dtype dt)
{
    return (unsigned)dt < XT_NDTYPES ? dtypes[dt].name : "?";
}

int xt_dtype_from_name(const char *name, xt_dtype *out)
{
    for (int i = 0; i < XT_NDTYPES; i++)
        if (dtypes[i].name && strcmp(dtypes[i].name, name) == 0) {
            *out = (xt_dtype)i;
            return 1;
        }
    return 0;
}

const char *xti_dtype_descr(xt_dtype dt)
{
    return (unsigned)dt < XT_NDTYPES ? dtypes[dt].descr : "?";
}

int xti_dtype_from_descr(const char *descr, xt_dtype *out)
{
    /* bfloat16 is written as '<u2' but read back as uint16: NumPy has no bfloat16. */
    for (int t = 0; t < XT_NDTYPES; t++)
        if (t != XT_BF16 && strcmp(descr, dtypes[t].descr) == 0) {
            *out = (xt_dtype)t;
            return 1;
        }
    return 0;
}

MPI_Datatype xt_dtype_mpi(xt_dtype dt)
{
    switch (dt) {
    case XT_F32:
        return MPI_FLOAT;
    case XT_F64:
        return MPI_DOUBLE;
    case XT_I8:
        return MPI_INT8_T;
    case XT_I16:
        return MPI_INT16_T;
    case XT_I32:
        return MPI_INT32_T;
    case XT_I64:
        return MPI_INT64_T;
    case XT_U8:
        return MPI_UINT8_T;
    case XT_U32:
        return MPI_UINT32_T;
    case XT_U64:
        return MPI_UINT64_T;
    default:
        return MPI_UINT16_T;
    }
}

int xt_dtype_from_mpi(MPI_Datatype mt, xt_dtype *out)
{
    int size = 0;
    if (mt == MPI_DATATYPE_NULL || PMPI_Type_size(mt, &size) != MPI_SUCCESS)
        return 0;
    xt_dtype dt;
    if (mt == MPI_FLOAT)
        dt = XT_F32;
    else if (mt == MPI_DOUBLE)
        dt = XT_F64;
    else if (mt == MPI_INT8_T || mt == MPI_SIGNED_CHAR || mt == MPI_CHAR)
        dt = XT_I8;
    else if (mt == MPI_INT16_T || mt == MPI_SHORT)
        dt = XT_I16;
    else if (mt == MPI_INT32_T || mt == MPI_INT)
        dt = XT_I32;
    else if (mt == MPI_INT64_T || mt == MPI_LONG_LONG || (mt == MPI_LONG && size == 8))
        dt = XT_I64;
    else if (mt == MPI_UINT8_T || mt == MPI_UNSIGNED_CHAR || mt == MPI_BYTE)
        dt = XT_U8;
    else if (mt == MPI_UINT16_T || mt == MPI_UNSIGNED_SHORT)
        dt = XT_U16;
    else if (mt == MPI_UINT32_T || mt == MPI_UNSIGNED)
        dt = XT_U32;
    else if (mt == MPI_UINT64_T || mt == MPI_UNSIGNED_LONG_LONG ||
             (mt == MPI_UNSIGNED_LONG && size == 8))
        dt = XT_U64;
    else
        return 0;
    *out = dt;
    return 1;
}
