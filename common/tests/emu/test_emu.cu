/*
 * test_emu.cu: what the emulated device (DEVICE=emu, common/xt_cuda_emu.h) must
 * keep of a GPU, checked where a GPU would give no answer every time. Built
 * only for the emulated device (make emu): on a GPU, queued work runs on its
 * own and "not yet run" cannot be observed.
 *
 *     test_emu order     queued work runs only when waited for, in stream order;
 *                        events order streams; the legacy default stream and
 *                        blocking streams wait for each other; every thread of a
 *                        3-D grid runs once; errors are reported
 *     test_emu touch     the host reads device memory: a CRASH that says so
 *     test_emu mpi       MPI_Send of a device pointer: a CRASH inside MPI_Send
 *     test_emu hang      blocked in MPI with device work queued: the watchdog's
 *                        report names the queued operation
 */
#include "xt_harness.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures;

static void expect(int ok, const char *what)
{
    if (!ok) {
        printf("emu FAILED: %s\n", what);
        failures++;
    }
}

__global__ void mark(int *hits, int nx, int ny)
{
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    hits[(z * ny + y) * nx + x] += 1;
}

__global__ void scale(float *x, int n, float by)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        x[i] *= by;
}

static void order(void)
{
    const int n = 1000;
    size_t bytes = sizeof(float) * n;
    float *d = (float *)xt_cuda_malloc(bytes);
    float *h = (float *)xt_cuda_host_alloc(bytes), *back = (float *)xt_cuda_host_alloc(bytes);
    for (int i = 0; i < n; i++)
        h[i] = (float)i;
    cudaStream_t s1, s2, blocking;
    cudaEvent_t e;
    XT_CUDA_CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    XT_CUDA_CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    XT_CUDA_CHECK(cudaStreamCreate(&blocking));
    XT_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));

    /* Queued, not run: the copy back has not happened until the event is waited for. */
    XT_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s1));
    scale<<<4, 64, 0, s1>>>(d, n, 2.0f);
    XT_CUDA_CHECK(cudaMemcpyAsync(back, d, bytes, cudaMemcpyDeviceToHost, s1));
    XT_CUDA_CHECK(cudaEventRecord(e, s1));
    expect(isnan(back[0]) && isnan(back[n - 1]), "a queued copy ran before anything waited");
    expect(cudaEventQuery(e) == cudaErrorNotReady, "cudaEventQuery of queued work: not ready");
    XT_CUDA_CHECK(cudaEventSynchronize(e));
    expect(back[0] == 0.0f && back[n - 1] == 2.0f * (n - 1), "copy, kernel, copy in order");

    /* The pinned buffer is read when the copy runs, not when it is queued. */
    XT_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s1));
    h[0] = 42.0f;
    XT_CUDA_CHECK(cudaStreamSynchronize(s1));
    XT_CUDA_CHECK(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
    expect(back[0] == 42.0f, "a copy reads its source when it runs");

    /* s2 waits for s1's record: waiting for s2 runs s1's work first. */
    h[0] = 7.0f;
    XT_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s1));
    XT_CUDA_CHECK(cudaEventRecord(e, s1));
    XT_CUDA_CHECK(cudaStreamWaitEvent(s2, e, 0));
    XT_CUDA_CHECK(cudaMemcpyAsync(back, d, bytes, cudaMemcpyDeviceToHost, s2));
    XT_CUDA_CHECK(cudaStreamSynchronize(s2));
    expect(back[0] == 7.0f, "cudaStreamWaitEvent orders s2 after s1's record");

    /* Without a wait between them, streams are not ordered: s2's copy runs alone. */
    h[0] = 8.0f;
    XT_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s1));
    XT_CUDA_CHECK(cudaMemcpyAsync(back, d, bytes, cudaMemcpyDeviceToHost, s2));
    XT_CUDA_CHECK(cudaStreamSynchronize(s2));
    expect(back[0] == 7.0f, "two streams with no event between them are not ordered");
    XT_CUDA_CHECK(cudaDeviceSynchronize());

    /* The legacy default stream waits for a blocking stream's earlier work, not a
     * non-blocking one's. */
    h[0] = 9.0f;
    XT_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, blocking));
    XT_CUDA_CHECK(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
    expect(back[0] == 9.0f, "a blocking copy waits for a blocking stream");
    h[0] = 10.0f;
    XT_CUDA_CHECK(cudaMemcpyAsync(d, h, bytes, cudaMemcpyHostToDevice, s1));
    XT_CUDA_CHECK(cudaMemcpy(back, d, bytes, cudaMemcpyDeviceToHost));
    expect(back[0] == 9.0f, "a blocking copy does not wait for a non-blocking stream");
    XT_CUDA_CHECK(cudaDeviceSynchronize());

    /* Every thread of a 3-D grid, once. */
    const int nx = 6, ny = 4, nz = 2;
    int *hits = (int *)xt_cuda_malloc(sizeof(int) * nx * ny * nz);
    XT_CUDA_CHECK(cudaMemset(hits, 0, sizeof(int) * nx * ny * nz));
    mark<<<dim3(3, 2, 1), dim3(2, 2, 2)>>>(hits, nx, ny);
    int got[6 * 4 * 2];
    XT_CUDA_CHECK(cudaMemcpy(got, hits, sizeof got, cudaMemcpyDeviceToHost));
    int once = 1;
    for (int i = 0; i < nx * ny * nz; i++)
        once &= got[i] == 1;
    expect(once, "every thread of a 3-D grid runs once");

    /* Errors: a copy whose pointers are not of its kind, a launch of no threads. */
    expect(cudaMemcpy(back, h, bytes, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue,
           "a DeviceToHost copy from host memory is an invalid value");
    cudaGetLastError();
    scale<<<0, 64>>>(d, n, 1.0f);
    expect(cudaGetLastError() == cudaErrorInvalidConfiguration, "a grid of 0 blocks");

    XT_CUDA_CHECK(cudaEventDestroy(e));
    XT_CUDA_CHECK(cudaStreamDestroy(s1));
    XT_CUDA_CHECK(cudaStreamDestroy(s2));
    XT_CUDA_CHECK(cudaStreamDestroy(blocking));
    xt_cuda_free(hits);
    xt_cuda_host_free(back);
    xt_cuda_host_free(h);
    xt_cuda_free(d);
}

int main(int argc, char **argv)
{
    xt_init(&argc, &argv);
    const char *mode = argc > 1 ? argv[1] : "order";
    float *d = (float *)xt_cuda_malloc(64 * sizeof(float));
    if (strcmp(mode, "order") == 0) {
        order();
        printf(failures ? "emu rank %d: %d failures\n" : "emu rank %d: ok\n", xt_rank(), failures);
    } else if (strcmp(mode, "touch") == 0) {
        printf("emu: d[3] = %g\n", d[3]); /* must not get here */
    } else if (strcmp(mode, "mpi") == 0 && xt_size() >= 2) {
        if (xt_rank() == 0)
            MPI_Send(d, 64, MPI_FLOAT, 1, 0, MPI_COMM_WORLD);
        else if (xt_rank() == 1)
            MPI_Recv(d, 64, MPI_FLOAT, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (strcmp(mode, "hang") == 0) {
        float *h = (float *)xt_cuda_host_alloc(64 * sizeof(float));
        cudaStream_t s;
        XT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        XT_CUDA_CHECK(cudaMemcpyAsync(h, d, 64 * sizeof(float), cudaMemcpyDeviceToHost, s));
        xt_watchdog_arm(2.0);
        MPI_Recv(h, 64, MPI_FLOAT, MPI_ANY_SOURCE, 99, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    }
    xt_cuda_free(d);
    xt_finalize();
    return failures ? 1 : 0;
}
