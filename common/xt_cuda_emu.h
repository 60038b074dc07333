/*
 * xt_cuda_emu.h: an emulated CUDA device, for machines without a GPU (DEVICE=emu).
 *
 * `make grade DEVICE=emu` builds an exercise's .cu file as host C++ against
 * this header instead of the CUDA runtime: grader/cudaemu.py rewrites each
 * kernel launch `k<<<grid, block, shmem, stream>>>(args)` into
 * `xt_emu_kernel(__FILE__, __LINE__, k, grid, block, shmem, stream)(args)`,
 * and xt.h includes this file in place of <cuda_runtime.h>. What it keeps of
 * a GPU is what the exercises must get right:
 *
 *   - Device memory is not host memory. cudaMalloc gives pages that the host
 *     cannot touch (PROT_NONE); only queued device work (copies, kernels)
 *     runs with them open. A host read or write of a device pointer, or an
 *     MPI call handed one, stops the rank with a report that says so.
 *   - Queued work runs late. cudaMemcpyAsync, cudaMemsetAsync, kernels and
 *     event records are queued on their stream and run, in stream order,
 *     only when the host waits for them: cudaEventSynchronize,
 *     cudaStreamSynchronize, cudaDeviceSynchronize, a blocking cudaMemcpy,
 *     cudaFree. cudaStreamWaitEvent orders one stream after another's
 *     record; the legacy default stream (0) and streams made without
 *     cudaStreamNonBlocking wait for each other, as on a GPU. So a missing
 *     wait gives a wrong answer every time, not once in a thousand runs.
 *   - A kernel runs every thread of its grid, one after the other, with
 *     threadIdx, blockIdx, blockDim and gridDim set for each.
 *
 * Not emulated: __syncthreads and shared memory across the threads of a
 * block (threads run one at a time, to the end), warps, atomics' races,
 * timing (cudaEventElapsedTime is 0), several devices, cuBLAS beyond
 * libxt's xt_cuda_gemm. docs/setup.md ("The emulated device") says more.
 */
#ifndef XT_CUDA_EMU_H
#define XT_CUDA_EMU_H

#ifndef __cplusplus
#error "xt_cuda_emu.h is C++: a .cu file is built as C++ for DEVICE=emu"
#endif

#include <stddef.h>

#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct dim3 {
    unsigned int x, y, z;
    dim3(unsigned int x_ = 1, unsigned int y_ = 1, unsigned int z_ = 1) : x(x_), y(y_), z(z_)
    {
    }
};
typedef dim3 uint3;

/* Set for each emulated thread while a kernel runs. */
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
} cudaError_t;

typedef enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
} cudaMemcpyKind;

typedef struct xt_emu_stream *cudaStream_t;
typedef struct xt_emu_event *cudaEvent_t;

#define cudaStreamDefault      0x0u
#define cudaStreamNonBlocking  0x1u
#define cudaEventDefault       0x0u
#define cudaEventBlockingSync  0x1u
#define cudaEventDisableTiming 0x2u
#define cudaHostAllocDefault   0x0u
#define cudaStreamLegacy       ((cudaStream_t)0)

const char *cudaGetErrorString(cudaError_t err);
const char *cudaGetErrorName(cudaError_t err);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int *device);

cudaError_t cudaMalloc(void **p, size_t bytes);
cudaError_t cudaFree(void *p);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags);
cudaError_t cudaFreeHost(void *p);

cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemset(void *p, int value, size_t bytes);

/* The calls that queue work carry their call site, for the reports of work left pending. */
cudaError_t xt_emu_memcpy_async(const char *file, int line, void *dst, const void *src,
                                size_t bytes, cudaMemcpyKind kind, cudaStream_t s);
cudaError_t xt_emu_memset_async(const char *file, int line, void *p, int value, size_t bytes,
                                cudaStream_t s);
cudaError_t xt_emu_event_record(const char *file, int line, cudaEvent_t e, cudaStream_t s);
cudaError_t xt_emu_stream_wait_event(const char *file, int line, cudaStream_t s, cudaEvent_t e,
                                     unsigned int flags);
#define cudaMemcpyAsync(dst, src, bytes, kind, ...)                                                \
    xt_emu_memcpy_async(__FILE__, __LINE__, dst, src, bytes, kind, xt_emu_stream_arg(__VA_ARGS__))
#define cudaMemsetAsync(p, value, bytes, ...)                                                      \
    xt_emu_memset_async(__FILE__, __LINE__, p, value, bytes, xt_emu_stream_arg(__VA_ARGS__))
#define cudaEventRecord(e, ...)                                                                    \
    xt_emu_event_record(__FILE__, __LINE__, e, xt_emu_stream_arg(__VA_ARGS__))
#define cudaStreamWaitEvent(s, e, ...)                                                             \
    xt_emu_stream_wait_event(__FILE__, __LINE__, s, e, xt_emu_flags_arg(__VA_ARGS__))

inline cudaStream_t xt_emu_stream_arg(cudaStream_t s = 0)
{
    return s;
}
inline unsigned int xt_emu_flags_arg(unsigned int flags = 0)
{
    return flags;
}

/*
 * Work still queued, on any stream, that writes into [dev, dev + bytes): how
 * many copies and memsets (kernels name no range), the first one's
 * description ("cudaMemcpyAsync HostToDevice 16 B at file:line") into out.
 */
int xt_emu_queued_writes(const void *dev, size_t bytes, char *out, size_t cap);

/* Queues work that reads or writes device memory on stream s (0: the default stream). */
void xt_emu_enqueue(const char *file, int line, const char *what, cudaStream_t s,
                    std::function<void()> work);

/* The rewritten launch: xt_emu_kernel(file, line, k, grid, block[, shmem[, stream]])(args). */
template <typename... Params> struct xt_emu_launch {
    const char *file;
    int line;
    void (*kernel)(Params...);
    dim3 grid, block;
    cudaStream_t stream;

    template <typename... Args> void operator()(Args... args) const
    {
        void (*k)(Params...) = kernel;
        dim3 g = grid, b = block;
        xt_emu_enqueue(file, line, "kernel launch", stream, [=]() {
            gridDim = g;
            blockDim = b;
            for (unsigned bz = 0; bz < g.z; bz++)
                for (unsigned by = 0; by < g.y; by++)
                    for (unsigned bx = 0; bx < g.x; bx++) {
                        blockIdx = uint3(bx, by, bz);
                        for (unsigned tz = 0; tz < b.z; tz++)
                            for (unsigned ty = 0; ty < b.y; ty++)
                                for (unsigned tx = 0; tx < b.x; tx++) {
                                    threadIdx = uint3(tx, ty, tz);
                                    k(args...);
                                }
                    }
        });
    }
};

void xt_emu_check_launch(const char *file, int line, dim3 grid, dim3 block);

template <typename... Params>
xt_emu_launch<Params...> xt_emu_kernel(const char *file, int line, void (*kernel)(Params...),
                                       dim3 grid, dim3 block, size_t shmem = 0,
                                       cudaStream_t stream = 0)
{
    (void)shmem;
    xt_emu_check_launch(file, line, grid, block);
    return xt_emu_launch<Params...>{file, line, kernel, grid, block, stream};
}

#endif /* XT_CUDA_EMU_H */
