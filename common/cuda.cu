/*
 * cuda.cu: libxt's CUDA helpers, built with `make CUDA=1` into libxt_cuda.a.
 *
 * Debian's Open MPI is not CUDA-aware: MPI cannot read or write device
 * memory. Device buffers then travel through pinned host memory:
 *
 *     device --cudaMemcpyAsync(stream)--> pinned --MPI_Send--> ... --MPI_Recv--> pinned --> device
 *
 * A CUDA-aware MPI (MPIX_Query_cuda_support() says so; XT_CUDA_AWARE=0/1
 * overrides) gets the device pointer directly. Several ranks may share one
 * GPU: each picks local_rank % device_count.
 *
 * xt_cuda_gemm is xt_gemm (xt_nn.h) on the device, through cuBLAS.
 */
#include "xt_harness.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#if defined(OPEN_MPI) && OPEN_MPI
#include <mpi-ext.h>
#endif

void xt_cuda_check_at(cudaError_t err, const char *call, const char *file, int line)
{
    if (err != cudaSuccess)
        xt_die_at(file, line, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                  cudaGetErrorName(err));
}

int xt_cuda_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* no driver or no device: not an error here */
        return 0;
    }
    return n;
}

int xt_cuda_select_device(void)
{
    int n = xt_cuda_device_count();
    if (n == 0)
        return -1;
    int dev = xt_local_rank() % n;
    XT_CUDA_CHECK(cudaSetDevice(dev));
    return dev;
}

int xt_cuda_aware_mpi(void)
{
#ifdef XT_CUDA_EMU
    return 0; /* no MPI reads the emulated device's memory */
#endif
    const char *env = getenv("XT_CUDA_AWARE");
    if (env && *env)
        return strcmp(env, "0") != 0;
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return MPIX_Query_cuda_support();
#else
    return 0;
#endif
}

void *xt_cuda_malloc_at(size_t bytes, const char *file, int line)
{
    void *p = NULL;
    xt_cuda_check_at(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc", file, line);
    return p;
}

void *xt_cuda_host_alloc_at(size_t bytes, const char *file, int line)
{
    void *p = NULL;
    xt_cuda_check_at(cudaMallocHost(&p, bytes ? bytes : 1), "cudaMallocHost", file, line);
    return p;
}

void xt_cuda_upload(void *dev, const void *host, size_t bytes)
{
    XT_CUDA_CHECK(cudaMemcpy(dev, host, bytes, cudaMemcpyHostToDevice));
    /* From pageable memory cudaMemcpy may return before the data lands, and
     * work on a non-blocking stream does not wait for the legacy stream. */
    XT_CUDA_CHECK(cudaDeviceSynchronize());
}

void xt_cuda_download(void *host, const void *dev, size_t bytes)
{
    XT_CUDA_CHECK(cudaDeviceSynchronize());
    XT_CUDA_CHECK(cudaMemcpy(host, dev, bytes, cudaMemcpyDeviceToHost));
}

#ifdef XT_CUDA_EMU
extern "C" void xti_note(const char *kind, const char *fmt, ...);
#endif

void xt_cuda_read_back(void *host, const void *dev, size_t bytes)
{
#ifdef XT_CUDA_EMU
    /* The emulated device knows what is still queued: name it, not only its effect. */
    char first[512];
    int n = xt_emu_queued_writes(dev, bytes, first, sizeof first);
    if (n)
        xti_note("UNWAITED",
                 "returned with device work still queued into the buffer the caller reads "
                 "next: %s%s. The caller reads it on a stream of its own, which waits for "
                 "nothing: return only once that work has completed (cudaStreamSynchronize, or "
                 "cudaEventSynchronize of an event recorded after it; destroying a stream does "
                 "not wait for its work)",
                 first, n > 1 ? " and more" : "");
#endif
    static cudaStream_t own;
    if (!own)
        XT_CUDA_CHECK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
    XT_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, own));
    XT_CUDA_CHECK(cudaStreamSynchronize(own));
}

void xt_cuda_free(void *dev)
{
    if (dev)
        XT_CUDA_CHECK(cudaFree(dev));
}

void xt_cuda_host_free(void *pinned)
{
    if (pinned)
        XT_CUDA_CHECK(cudaFreeHost(pinned));
}

static int message_count(size_t bytes)
{
    XT_CHECK(bytes <= (size_t)INT_MAX, "a message of %zu bytes is over MPI's int count", bytes);
    return (int)bytes;
}

void xt_cuda_send(const void *dev, size_t bytes, int dest, int tag, MPI_Comm comm, void *pinned,
                  cudaStream_t stream)
{
    int n = message_count(bytes);
    if (xt_cuda_aware_mpi()) {
        XT_MPI_CHECK(MPI_Send(dev, n, MPI_BYTE, dest, tag, comm));
        return;
    }
    void *host = pinned ? pinned : xt_cuda_host_alloc(bytes);
    XT_CUDA_CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, stream));
    XT_CUDA_CHECK(cudaStreamSynchronize(stream));
    XT_MPI_CHECK(MPI_Send(host, n, MPI_BYTE, dest, tag, comm));
    if (!pinned)
        xt_cuda_host_free(host);
}

void xt_cuda_recv(void *dev, size_t bytes, int src, int tag, MPI_Comm comm, void *pinned,
                  cudaStream_t stream)
{
    int n = message_count(bytes);
    if (xt_cuda_aware_mpi()) {
        XT_MPI_CHECK(MPI_Recv(dev, n, MPI_BYTE, src, tag, comm, MPI_STATUS_IGNORE));
        return;
    }
    void *host = pinned ? pinned : xt_cuda_host_alloc(bytes);
    XT_MPI_CHECK(MPI_Recv(host, n, MPI_BYTE, src, tag, comm, MPI_STATUS_IGNORE));
    XT_CUDA_CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, stream));
    XT_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (!pinned)
        xt_cuda_host_free(host);
}

/* ---------------------------------------------------------------------- GEMM */

#ifdef XT_CUDA_EMU
/* The emulated device has no cuBLAS: xt_gemm itself, queued on the default stream. */
void xt_cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                  const float *b, float beta, float *c)
{
    xt_emu_enqueue(__FILE__, __LINE__, "xt_cuda_gemm", 0,
                   [=]() { xt_gemm(trans_a, trans_b, m, n, k, alpha, a, b, beta, c); });
}
#else

void xt_cublas_check_at(cublasStatus_t status, const char *call, const char *file, int line)
{
    if (status != CUBLAS_STATUS_SUCCESS)
        xt_die_at(file, line, "%s failed: %s (%s)", call, cublasGetStatusString(status),
                  cublasGetStatusName(status));
}

/*
 * One handle per process, made on first use: creating one costs milliseconds
 * and a context, far more than a small GEMM. It is bound to the device
 * current then, so select the device first (xt_cuda_select_device). It is
 * never destroyed: the driver reclaims it at exit, and destroying it from an
 * atexit handler can run after the CUDA runtime has already shut down.
 */
static cublasHandle_t cublas_handle(void)
{
    static cublasHandle_t handle;
    if (!handle)
        XT_CUBLAS_CHECK(cublasCreate(&handle));
    return handle;
}

void xt_cuda_gemm(int trans_a, int trans_b, int m, int n, int k, float alpha, const float *a,
                  const float *b, float beta, float *c)
{
    if (m == 0 || n == 0)
        return;
    cublasHandle_t h = cublas_handle();
    if (k == 0) { /* as xt_gemm: C = beta C, and beta = 0 clears C whatever it held */
        long count = (long)m * n;
        XT_CHECK(count <= INT_MAX, "xt_cuda_gemm: %d x %d is over cuBLAS's int count", m, n);
        if (beta == 0.0f)
            XT_CUDA_CHECK(cudaMemsetAsync(c, 0, sizeof(float) * (size_t)count, 0));
        else if (beta != 1.0f)
            XT_CUBLAS_CHECK(cublasSscal(h, (int)count, &beta, c, 1));
        return;
    }
    /*
     * cuBLAS is column-major, and a row-major matrix read column-major is its
     * transpose. So C = op(A) op(B), row-major, is C^T = op(B)^T op(A)^T
     * column-major: the same call with A and B swapped, m and n swapped, and
     * the leading dimensions the row-major ones.
     */
    XT_CUBLAS_CHECK(cublasSgemm(h, trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha, b,
                                trans_b ? k : n, a, trans_a ? m : k, &beta, c, n));
}
#endif
