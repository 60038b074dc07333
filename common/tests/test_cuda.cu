/*
 * test_cuda.cu: the CUDA helpers on 2 ranks (run where a GPU exists).
 * Rank 0 fills a device buffer with a kernel and sends it with xt_cuda_send,
 * staged through a pinned buffer; rank 1 receives it into device memory with
 * xt_cuda_recv, copies it back and checks every element.
 */
#include "xt.h"

#include <stdio.h>

__global__ void fill(float *x, int n, float base)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] = base + (float)i;
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
