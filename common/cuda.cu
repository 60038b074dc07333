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
 */
#include "xt.h"

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
