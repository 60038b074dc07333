/*
 * test_cuda.cu: the CUDA helpers on 2 ranks (run where a GPU exists).
 * Rank 0 fills a device buffer with a kernel and sends it with xt_cuda_send,
 * staged through a pinned buffer; rank 1 receives it into device memory with
 * xt_cuda_recv, copies it back and checks every element. Every rank also
 * checks xt_cuda_gemm against xt_gemm on the host.
 */
#include "xt_harness.h"

#include <math.h>
#include <stdio.h>

__global__ void fill(float *x, int n, float base)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = base + (float)i;
}

static float *random_floats(xt_rng *g, long n)
{
    float *p = (float *)xt_malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (long i = 0; i < n; i++)
        p[i] = xt_rng_uniform(g, -1.0f, 1.0f);
    return p;
}

static float *on_device(const float *host, long n)
{
    float *d = (float *)xt_cuda_malloc(sizeof(float) * (size_t)n);
    xt_cuda_upload(d, host, sizeof(float) * (size_t)n);
    return d;
}

/*
 * xt_cuda_gemm against xt_gemm for one shape and every transpose: both must
 * be within float32 rounding of the exact product, 1e-5 of the same product
 * taken in absolute values (|alpha| |A| |B| + |beta C|), which xt_gemm
 * computes too. With beta = 0, C starts as NaN: neither may read it.
 */
static int check_gemm(int m, int n, int k, float alpha, float beta)
{
    int failures = 0;
    xt_rng g = xt_rng_seed(1000003u * (uint64_t)(m + 7 * n + 31 * k));
    long na = (long)m * k, nb = (long)k * n, nc = (long)m * n;
    float *a = random_floats(&g, na), *b = random_floats(&g, nb), *c = random_floats(&g, nc);
    float *abs_a = (float *)xt_malloc(sizeof(float) * (size_t)(na + 1));
    float *abs_b = (float *)xt_malloc(sizeof(float) * (size_t)(nb + 1));
    float *want = (float *)xt_malloc(sizeof(float) * (size_t)(nc + 1));
    float *bound = (float *)xt_malloc(sizeof(float) * (size_t)(nc + 1));
    float *got = (float *)xt_malloc(sizeof(float) * (size_t)(nc + 1));
    for (long i = 0; i < na; i++)
        abs_a[i] = fabsf(a[i]);
    for (long i = 0; i < nb; i++)
        abs_b[i] = fabsf(b[i]);
    if (beta == 0.0f)
        for (long i = 0; i < nc; i++)
            c[i] = NAN;
    float *da = on_device(a, na), *db = on_device(b, nb),
          *dc = (float *)xt_cuda_malloc(sizeof(float) * (size_t)(nc + 1));
    for (int trans = 0; trans < 4; trans++) {
        int ta = trans & 1, tb = trans >> 1;
        /* The same numbers serve every transpose: only their reading changes. */
        for (long i = 0; i < nc; i++) {
            want[i] = c[i];
            bound[i] = beta == 0.0f ? 0.0f : fabsf(beta * c[i]);
        }
        xt_gemm(ta, tb, m, n, k, alpha, a, b, beta, want);
        xt_gemm(ta, tb, m, n, k, fabsf(alpha), abs_a, abs_b, 1.0f, bound);
        xt_cuda_upload(dc, c, sizeof(float) * (size_t)nc);
        xt_cuda_gemm(ta, tb, m, n, k, alpha, da, db, beta, dc);
        XT_CUDA_CHECK(cudaGetLastError());
        xt_cuda_download(got, dc, sizeof(float) * (size_t)nc);
        for (long i = 0; i < nc; i++) {
            /* Both sides are off by up to 1e-5 of the bound: 2e-5 between them. */
            if (!(fabsf(got[i] - want[i]) <= 2e-5f * bound[i])) {
                if (failures++ < 3)
                    printf("gemm rank %d: m=%d n=%d k=%d trans_a=%d trans_b=%d beta=%g: "
                           "C[%ld] cuBLAS %.9g, CBLAS %.9g\n",
                           xt_rank(), m, n, k, ta, tb, beta, i, got[i], want[i]);
            }
        }
    }
    xt_cuda_free(da);
    xt_cuda_free(db);
    xt_cuda_free(dc);
    float *all[] = {a, b, c, abs_a, abs_b, want, bound, got};
    for (int i = 0; i < 8; i++)
        free(all[i]);
    return failures;
}

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    int dev = xt_cuda_select_device();
    if (dev < 0) {
        printf("cuda rank %d: no GPU, nothing to test\n", xt_rank());
        xt_finalize();
        return 0;
    }
    const int n = 1 << 20;
    size_t bytes = sizeof(float) * (size_t)n;
    float *d = (float *)xt_cuda_malloc(bytes);
    void *pinned = xt_cuda_host_alloc(bytes);
    cudaStream_t stream;
    XT_CUDA_CHECK(cudaStreamCreate(&stream));
    int failures = 0;
    /* Square, tall and thin, longer than a tile, k = 0, one row; beta 0, 1 and other. */
    static const struct {
        int m, n, k;
        float alpha, beta;
    } shapes[] = {{8, 8, 8, 1.0f, 0.0f}, {37, 29, 65, 1.5f, 0.5f}, {130, 3, 257, -1.0f, 1.0f},
                  {3, 4, 0, 1.0f, 0.0f}, {3, 4, 0, 2.0f, -0.5f},   {1, 300, 17, 0.25f, 0.0f}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        failures +=
            check_gemm(shapes[i].m, shapes[i].n, shapes[i].k, shapes[i].alpha, shapes[i].beta);
    if (xt_rank() == 0) {
        fill<<<(n + 255) / 256, 256, 0, stream>>>(d, n, 0.5f);
        XT_CUDA_CHECK(cudaGetLastError());
        xt_cuda_send(d, bytes, 1, 0, MPI_COMM_WORLD, pinned, stream);
    } else if (xt_rank() == 1) {
        xt_cuda_recv(d, bytes, 0, 0, MPI_COMM_WORLD, NULL, stream);
        float *h = (float *)xt_malloc(bytes);
        XT_CUDA_CHECK(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
        for (int i = 0; i < n; i++)
            failures += h[i] != 0.5f + (float)i;
        free(h);
    }
    printf(failures ? "cuda rank %d: %d wrong elements\n" : "cuda rank %d: ok\n", xt_rank(),
           failures);
    XT_CUDA_CHECK(cudaStreamDestroy(stream));
    xt_cuda_host_free(pinned);
    xt_cuda_free(d);
    xt_finalize();
    return failures ? 1 : 0;
}
