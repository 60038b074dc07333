/*
 * cuda_emu.cpp: the emulated CUDA device of xt_cuda_emu.h (DEVICE=emu).
 *
 * Device memory: each cudaMalloc block is a mapping of its own, kept
 * PROT_NONE while the host runs, so that a host access faults; the fault is
 * explained (libxt's crash report, through xt_crash_explain_faults).
 *
 * Streams: each holds a queue of operations, numbered in the order they were
 * queued (one counter for the whole device). Nothing runs when queued. A wait
 * runs what it waits for: the operations of one stream up to a number, each
 * after what it depends on (an earlier record that a cudaStreamWaitEvent
 * named; the legacy default stream and blocking streams' earlier work). While
 * queued work runs, every device block is opened (read and write), and closed
 * again after.
 *
 * A hang report names the work still queued (xt_watchdog_describe_with).
 */
#include "xt_cuda_emu.h"
#include "xt_harness.h"

#include <errno.h>
#include <mutex>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <deque>
#include <string>
#include <vector>

namespace
{

/* ------------------------------------------------------------------ memory */

struct block {
    char *base;   /* what cudaMalloc returned */
    size_t bytes; /* what it asked for */
    char *map;    /* the mapping: guard page, the block's pages, guard page */
    size_t mapped;
};

/* Fixed, so that the fault handler reads it without locks or allocation. */
const int MAX_BLOCKS = 4096;
block blocks[MAX_BLOCKS];
volatile int nblocks;
size_t page_size;
int open_depth; /* > 0 while queued work runs: device blocks readable and writable */

void protect_all(int prot)
{
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].base)
            mprotect(blocks[i].base, blocks[i].mapped - 2 * page_size, prot);
}

void open_device()
{
    if (open_depth++ == 0)
        protect_all(PROT_READ | PROT_WRITE);
}

void close_device()
{
    if (--open_depth == 0)
        protect_all(PROT_NONE);
}

int find_block(const void *p)
{
    const char *c = (const char *)p;
    for (int i = 0; i < nblocks; i++)
        if (blocks[i].base && c >= blocks[i].map && c < blocks[i].map + blocks[i].mapped)
            return i;
    return -1;
}

bool is_device(const void *p, size_t bytes)
{
    int i = find_block(p);
    if (i < 0)
        return false;
    const char *c = (const char *)p;
    return c >= blocks[i].base && c + bytes <= blocks[i].base + blocks[i].bytes;
}

/*
 * Fresh device and pinned memory hold this float NaN in every 4 bytes, so that a read
 * of memory nothing wrote (a slot sent before its copy ran) is a NaN the grader's report
 * recognises (harness.EMU_FRESH), and not the 0xff bytes of libxt's freed blocks.
 */
const uint32_t FRESH = 0x7fdead00u;

void fill_fresh(void *p, size_t bytes)
{
    unsigned char *c = (unsigned char *)p;
    for (size_t i = 0; i < bytes; i++)
        c[i] = (unsigned char)(FRESH >> (8 * (i % 4)));
}

/* Signal-safe formatting for the fault report. */
size_t put(char *out, size_t at, size_t cap, const char *s)
{
    while (*s && at + 1 < cap)
        out[at++] = *s++;
    out[at < cap ? at : cap - 1] = 0;
    return at;
}

size_t put_num(char *out, size_t at, size_t cap, unsigned long v)
{
    char digits[24];
    int n = 0;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    char s[24];
    for (int i = 0; i < n; i++)
        s[i] = digits[n - 1 - i];
    s[n] = 0;
    return put(out, at, cap, s);
}

size_t explain_fault(const void *addr, char *out, size_t cap)
{
    int i = find_block(addr);
    if (i < 0 || cap == 0)
        return 0;
    const char *c = (const char *)addr;
    size_t at = 0;
    if (c >= blocks[i].base && c < blocks[i].base + blocks[i].bytes) {
        at = put(out, at, cap, "the host touched device memory: byte ");
        at = put_num(out, at, cap, (unsigned long)(c - blocks[i].base));
        at = put(out, at, cap, " of a ");
        at = put_num(out, at, cap, (unsigned long)blocks[i].bytes);
        at = put(out, at, cap,
                 " B block from cudaMalloc (emulated device, DEVICE=emu); host code, and an "
                 "MPI that is not CUDA-aware, reach it only through cudaMemcpy or a kernel");
    } else {
        at = put(out, at, cap, "an access just outside a ");
        at = put_num(out, at, cap, (unsigned long)blocks[i].bytes);
        at = put(out, at, cap, " B block from cudaMalloc (emulated device, DEVICE=emu)");
    }
    return at;
}

/* ------------------------------------------------------------------ streams */

struct op {
    unsigned long seq;
    std::string where; /* "cudaMemcpyAsync D2H 64 B at file:line" */
    std::function<void()> work;
    cudaEvent_t waits_for = nullptr; /* a cudaStreamWaitEvent: this record first */
    cudaStream_t after_stream = nullptr;
    unsigned long after_seq = 0;
    const char *dst = nullptr; /* what a copy or memset writes */
    size_t dst_bytes = 0;
};

bool is_blocking(cudaStream_t s);

} // namespace

struct xt_emu_stream {
    unsigned int flags;
    unsigned long done; /* every op numbered up to this one has run */
    std::deque<op> queue;
    bool destroyed;
    int id;
};

struct xt_emu_event {
    cudaStream_t stream; /* of the last record; nullptr: never recorded */
    unsigned long seq;   /* that record's number */
    int queries;         /* cudaEventQuery calls that found it pending */
    bool destroyed;
};

namespace
{

std::recursive_mutex lock; /* the watchdog thread reads the queues */
xt_emu_stream default_stream = {cudaStreamDefault, 0, {}, false, 0};
std::vector<cudaStream_t> streams = {&default_stream};
unsigned long next_seq = 1;
thread_local cudaError_t last_error = cudaSuccess;
bool installed;
int next_stream_id = 1;

cudaStream_t real(cudaStream_t s)
{
    return s ? s : &default_stream;
}

bool is_blocking(cudaStream_t s)
{
    return s != &default_stream && !(s->flags & cudaStreamNonBlocking);
}

cudaError_t fail(cudaError_t err)
{
    last_error = err;
    return err;
}

size_t describe_pending(char *out, size_t cap);

void install()
{
    if (installed)
        return;
    installed = true;
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    xt_crash_explain_faults(explain_fault);
    xt_watchdog_describe_with(describe_pending);
}

void run_until(cudaStream_t s, unsigned long seq);

/* Runs one stream's operations up to number seq (inclusive), each after what it needs. */
void run_until(cudaStream_t s, unsigned long seq)
{
    std::lock_guard<std::recursive_mutex> hold(lock);
    if (s->queue.empty() || s->queue.front().seq > seq) {
        /* Nothing of it is queued: no pages to open, the common case of a wait. */
        s->done = seq > s->done ? seq : s->done;
        return;
    }
    open_device();
    while (!s->queue.empty() && s->queue.front().seq <= seq) {
        op o = std::move(s->queue.front());
        s->queue.pop_front();
        if (o.after_stream)
            run_until(o.after_stream, o.after_seq);
        /* The legacy default stream and blocking streams wait for each other's earlier work. */
        if (s == &default_stream) {
            for (cudaStream_t t : streams)
                if (is_blocking(t))
                    run_until(t, o.seq - 1);
        } else if (is_blocking(s)) {
            run_until(&default_stream, o.seq - 1);
        }
        if (o.work)
            o.work();
        s->done = o.seq;
    }
    if (s->queue.empty() || s->queue.front().seq > seq)
        s->done = seq > s->done ? seq : s->done;
    close_device();
}

void run_all()
{
    std::lock_guard<std::recursive_mutex> hold(lock);
    for (size_t i = 0; i < streams.size(); i++)
        run_until(streams[i], next_seq);
}

void enqueue(cudaStream_t s, op o)
{
    std::lock_guard<std::recursive_mutex> hold(lock);
    install();
    o.seq = next_seq++;
    real(s)->queue.push_back(std::move(o));
}

std::string at(const char *file, int line)
{
    return std::string(" at ") + file + ":" + std::to_string(line);
}

const char *kind_name(cudaMemcpyKind k)
{
    switch (k) {
    case cudaMemcpyHostToDevice:
        return "HostToDevice";
    case cudaMemcpyDeviceToHost:
        return "DeviceToHost";
    case cudaMemcpyDeviceToDevice:
        return "DeviceToDevice";
    case cudaMemcpyHostToHost:
        return "HostToHost";
    default:
        return "Default";
    }
}

/* A copy's pointers must be what its kind says: a device pointer on the device side. */
cudaError_t check_copy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    if (bytes == 0)
        return cudaSuccess;
    if (!dst || !src)
        return cudaErrorInvalidValue;
    bool dst_dev = is_device(dst, bytes), src_dev = is_device(src, bytes);
    bool dst_want = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    bool src_want = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind == cudaMemcpyDefault)
        return cudaSuccess;
    if (dst_dev != dst_want || src_dev != src_want)
        return cudaErrorInvalidValue;
    return cudaSuccess;
}

size_t describe_pending(char *out, size_t cap)
{
    std::unique_lock<std::recursive_mutex> hold(lock, std::try_to_lock);
    if (!hold.owns_lock() || cap == 0)
        return 0;
    std::string text;
    int shown = 0, total = 0;
    for (cudaStream_t s : streams)
        for (const op &o : s->queue) {
            total++;
            if (shown < 3) {
                text += (shown ? "; " : "") + o.where + " (stream " +
                        (s == &default_stream ? std::string("0") : std::to_string(s->id)) + ")";
                shown++;
            }
        }
    if (!total)
        return 0;
    std::string head = "device work queued and not yet waited for (" + std::to_string(total) +
                       (total == 1 ? " operation" : " operations") + "): ";
    text = head + text + (total > shown ? "; ..." : "");
    size_t n = text.size() < cap - 1 ? text.size() : cap - 1;
    memcpy(out, text.data(), n);
    out[n] = 0;
    return n;
}

} // namespace

/* ---------------------------------------------------------------- the API */

/* Each error the emulated runtime returns: its name, and what it most likely means here. */
static const struct {
    cudaError_t err;
    const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue",
     "invalid argument (a copy whose pointers are not of the kind it names?)"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInvalidConfiguration, "cudaErrorInvalidConfiguration",
     "invalid configuration argument (a grid or block of 0, or over 1024 threads)"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice",
     "invalid device ordinal (the emulated device is device 0)"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle",
     "invalid resource handle (a stream or event destroyed, or never created)"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
};

const char *cudaGetErrorName(cudaError_t err)
{
    for (const auto &e : errors)
        if (e.err == err)
            return e.name;
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t err)
{
    for (const auto &e : errors)
        if (e.err == err)
            return e.text;
    return "unknown error";
}

cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_error;
    last_error = cudaSuccess;
    return e;
}

cudaError_t cudaPeekAtLastError(void)
{
    return last_error;
}

cudaError_t cudaGetDeviceCount(int *count)
{
    *count = 1;
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int device)
{
    return device == 0 ? cudaSuccess : fail(cudaErrorInvalidDevice);
}

cudaError_t cudaGetDevice(int *device)
{
    *device = 0;
    return cudaSuccess;
}

cudaError_t cudaMalloc(void **p, size_t bytes)
{
    std::lock_guard<std::recursive_mutex> hold(lock);
    install();
    size_t pages = (bytes + page_size - 1) / page_size;
    size_t mapped = (pages + 2) * page_size;
    int slot = -1;
    for (int i = 0; i < nblocks; i++)
        if (!blocks[i].base)
            slot = i;
    if (slot < 0 && nblocks == MAX_BLOCKS)
        return fail(cudaErrorMemoryAllocation);
    void *m = mmap(NULL, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return fail(cudaErrorMemoryAllocation);
    block b = {(char *)m + page_size, bytes, (char *)m, mapped};
    /* A GPU's fresh memory holds whatever was there: here, the FRESH NaN. */
    mprotect(b.base, pages * page_size, PROT_READ | PROT_WRITE);
    fill_fresh(b.base, pages * page_size);
    if (open_depth == 0)
        mprotect(b.base, pages * page_size, PROT_NONE);
    if (slot < 0)
        slot = nblocks++;
    blocks[slot] = b;
    *p = b.base;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (!p)
        return cudaSuccess;
    std::lock_guard<std::recursive_mutex> hold(lock);
    run_all(); /* as on a GPU, cudaFree waits for the device */
    int i = find_block(p);
    if (i < 0 || blocks[i].base != p)
        return fail(cudaErrorInvalidValue);
    munmap(blocks[i].map, blocks[i].mapped);
    blocks[i].base = nullptr;
    return cudaSuccess;
}

cudaError_t cudaMallocHost(void **p, size_t bytes)
{
    install();
    void *m = malloc(bytes ? bytes : 1);
    if (!m)
        return fail(cudaErrorMemoryAllocation);
    fill_fresh(m, bytes); /* a read before any write shows as the FRESH NaN */
    *p = m;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned int flags)
{
    (void)flags;
    return cudaMallocHost(p, bytes);
}

cudaError_t cudaFreeHost(void *p)
{
    run_all(); /* cudaFreeHost waits for the device too */
    free(p);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags)
{
    std::lock_guard<std::recursive_mutex> hold(lock);
    install();
    cudaStream_t n = new xt_emu_stream{flags, 0, {}, false, next_stream_id++};
    n->done = next_seq - 1;
    streams.push_back(n);
    *s = n;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault);
}

/* Its queued work still runs (when the device is next waited for), as on a GPU. */
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    std::lock_guard<std::recursive_mutex> hold(lock);
    if (!s || s == &default_stream || s->destroyed)
        return fail(cudaErrorInvalidResourceHandle);
    s->destroyed = true;
    return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (s && s->destroyed)
        return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::recursive_mutex> hold(lock);
    run_until(real(s), next_seq);
    return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t s)
{
    std::lock_guard<std::recursive_mutex> hold(lock);
    if (real(s)->queue.empty())
        return cudaSuccess;
    /* Not ready now; a later query finds it done, so that a polling loop ends. */
    run_until(real(s), next_seq);
    return cudaErrorNotReady;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags)
{
    (void)flags;
    *e = new xt_emu_event{nullptr, 0, 0, false};
    return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *e)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    if (!e || e->destroyed)
        return fail(cudaErrorInvalidResourceHandle);
    e->destroyed = true; /* kept: a queued wait may still name it */
    return cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (!e || e->destroyed)
        return fail(cudaErrorInvalidResourceHandle);
    if (e->stream) /* an event never recorded counts as done */
        run_until(e->stream, e->seq);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!e || e->destroyed)
        return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::recursive_mutex> hold(lock);
    if (!e->stream || e->stream->done >= e->seq)
        return cudaSuccess;
    /* Not ready the first time it is asked; done the next time. */
    if (e->queries++ == 0)
        return cudaErrorNotReady;
    run_until(e->stream, e->seq);
    return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end)
{
    (void)start;
    (void)end;
    *ms = 0.0f;
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(void)
{
    run_all();
    return cudaSuccess;
}

cudaError_t xt_emu_memcpy_async(const char *file, int line, void *dst, const void *src,
                                size_t bytes, cudaMemcpyKind kind, cudaStream_t s)
{
    cudaError_t err = check_copy(dst, src, bytes, kind);
    if (err != cudaSuccess)
        return fail(err);
    if (s && s->destroyed)
        return fail(cudaErrorInvalidResourceHandle);
    op o;
    o.where = std::string("cudaMemcpyAsync ") + kind_name(kind) + " " + std::to_string(bytes) +
              " B" + at(file, line);
    o.work = [=]() { memmove(dst, src, bytes); };
    o.dst = (const char *)dst;
    o.dst_bytes = bytes;
    enqueue(s, std::move(o));
    return cudaSuccess;
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, cudaMemcpyKind kind)
{
    cudaError_t err = check_copy(dst, src, bytes, kind);
    if (err != cudaSuccess)
        return fail(err);
    /* On the legacy default stream, and the host waits for it. */
    op o;
    o.where = std::string("cudaMemcpy ") + kind_name(kind) + " " + std::to_string(bytes) + " B";
    o.work = [=]() { memmove(dst, src, bytes); };
    enqueue(0, std::move(o));
    run_until(&default_stream, next_seq);
    return cudaSuccess;
}

cudaError_t xt_emu_memset_async(const char *file, int line, void *p, int value, size_t bytes,
                                cudaStream_t s)
{
    if (bytes && !is_device(p, bytes))
        return fail(cudaErrorInvalidValue);
    op o;
    o.where = "cudaMemsetAsync " + std::to_string(bytes) + " B" + at(file, line);
    o.work = [=]() { memset(p, value, bytes); };
    o.dst = (const char *)p;
    o.dst_bytes = bytes;
    enqueue(s, std::move(o));
    return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t bytes)
{
    cudaError_t err = xt_emu_memset_async("cudaMemset", 0, p, value, bytes, 0);
    if (err == cudaSuccess)
        run_until(&default_stream, next_seq);
    return err;
}

cudaError_t xt_emu_event_record(const char *file, int line, cudaEvent_t e, cudaStream_t s)
{
    if (!e || e->destroyed || (s && s->destroyed))
        return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::recursive_mutex> hold(lock);
    op o;
    o.where = "cudaEventRecord" + at(file, line);
    enqueue(s, std::move(o));
    e->stream = real(s);
    e->seq = next_seq - 1;
    e->queries = 0;
    return cudaSuccess;
}

cudaError_t xt_emu_stream_wait_event(const char *file, int line, cudaStream_t s, cudaEvent_t e,
                                     unsigned int flags)
{
    (void)flags;
    if (!e || e->destroyed || (s && s->destroyed))
        return fail(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::recursive_mutex> hold(lock);
    op o;
    o.where = "cudaStreamWaitEvent" + at(file, line);
    o.after_stream = e->stream; /* the record as it is now; none: nothing to wait for */
    o.after_seq = e->seq;
    enqueue(s, std::move(o));
    return cudaSuccess;
}

int xt_emu_queued_writes(const void *dev, size_t bytes, char *out, size_t cap)
{
    std::lock_guard<std::recursive_mutex> hold(lock);
    const char *lo = (const char *)dev, *hi = lo + bytes;
    int n = 0;
    for (cudaStream_t s : streams)
        for (const op &o : s->queue)
            if (o.dst && o.dst < hi && lo < o.dst + o.dst_bytes && n++ == 0 && cap)
                snprintf(out, cap, "%s", o.where.c_str());
    return n;
}

void xt_emu_enqueue(const char *file, int line, const char *what, cudaStream_t s,
                    std::function<void()> work)
{
    op o;
    o.where = std::string(what) + at(file, line);
    o.work = std::move(work);
    enqueue(s, std::move(o));
}

void xt_emu_check_launch(const char *file, int line, dim3 grid, dim3 block)
{
    (void)file;
    (void)line;
    unsigned long threads = (unsigned long)block.x * block.y * block.z;
    if (!grid.x || !grid.y || !grid.z || !threads || threads > 1024)
        fail(cudaErrorInvalidConfiguration);
}
