// The idle hipStreamQuery / hipStreamSynchronize fast path (a per-thread hot stream answered
// from kfdrt's idle predicates) keeps every rule of the full path: handle validation after
// the stream was cached, HIP 5.2's last error, callbacks, the null stream's wait for busy
// blocking streams, the null stream of the current device, pool releases, device reset,
// sticky errors. Compiled by g++
// against Debian's HIP 5.2 headers, run on kfdrt's library (2 emulated GPUs).
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <atomic>
#include <chrono>
#include <thread>

#include "check.h"

// Query and synchronize twice each: the first call may take the full path and caches the
// stream, the second takes the fast path.
static void idle_twice(hipStream_t s) {
    for (int i = 0; i < 2; i++) {
        OK(hipStreamQuery(s));
        OK(hipStreamSynchronize(s));
    }
}

// A stream destroyed (on this thread or another) after the fast path cached it is an
// invalid handle, never a crash; so are foreign handles and handles of another kind.
static void destroyed_and_foreign_handles() {
    hipStream_t a, b;
    OK(hipStreamCreateWithFlags(&a, hipStreamNonBlocking));
    OK(hipStreamCreateWithFlags(&b, hipStreamNonBlocking));
    idle_twice(a);
    OK(hipStreamDestroy(a));
    CHECK(hipStreamQuery(a) == hipErrorInvalidHandle);
    CHECK(hipStreamSynchronize(a) == hipErrorInvalidHandle);
    CHECK(hipGetLastError() == hipErrorInvalidHandle);
    CHECK(hipGetLastError() == hipSuccess);

    idle_twice(b);
    std::thread([b] { CHECK(hipStreamDestroy(b) == hipSuccess); }).join();
    CHECK(hipStreamSynchronize(b) == hipErrorInvalidHandle);
    CHECK(hipStreamQuery(b) == hipErrorInvalidHandle);
    // A new stream may reuse the registry slot: the old handle stays dead.
    hipStream_t c;
    OK(hipStreamCreateWithFlags(&c, hipStreamNonBlocking));
    idle_twice(c);
    CHECK(hipStreamQuery(b) == hipErrorInvalidHandle);
    CHECK(hipStreamQuery(a) == hipErrorInvalidHandle);
    OK(hipStreamQuery(c));

    hipEvent_t e;
    OK(hipEventCreate(&e));
    CHECK(hipStreamQuery((hipStream_t)e) == hipErrorInvalidHandle);
    CHECK(hipStreamSynchronize((hipStream_t)e) == hipErrorInvalidHandle);
    CHECK(hipStreamQuery((hipStream_t)(uintptr_t)0xdead0) == hipErrorInvalidHandle);
    CHECK(hipStreamSynchronize((hipStream_t)(uintptr_t)0xdead0) == hipErrorInvalidHandle);
    CHECK(hipStreamQuery((hipStream_t)(uintptr_t)-1) == hipErrorInvalidHandle);
    CHECK(hipPeekAtLastError() == hipErrorInvalidHandle);
    // HIP 5.2 stores every call's result as the last error, success too (fast path).
    OK(hipStreamQuery(c));
    CHECK(hipPeekAtLastError() == hipSuccess);
    CHECK(hipStreamQuery(a) == hipErrorInvalidHandle);
    OK(hipStreamSynchronize(c));
    CHECK(hipGetLastError() == hipSuccess);
    OK(hipEventDestroy(e));
    OK(hipStreamDestroy(c));
}

// One thread answers queries from its hot stream in a loop while another destroys the
// stream: every answer is Success until the first InvalidHandle, InvalidHandle after it,
// and a query that starts after the destroy returned is InvalidHandle.
static void destroy_while_another_thread_queries() {
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    std::atomic<int> started{0}, destroyed{0}, bad{0};
    std::thread q([&] {
        bool dead = false;
        auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(60);
        for (long i = 0; std::chrono::steady_clock::now() < limit; i++) {
            int after = destroyed.load();
            hipError_t e = hipStreamQuery(s);
            if (i == 100) started = 1;
            if (e == hipErrorInvalidHandle) {
                dead = true;
            } else if (e != hipSuccess || dead || after) {
                bad = 1;
            }
            if (dead && after) return;
        }
        bad = 2;  // the destroy was never seen
    });
    while (started.load() == 0) usleep(100);
    OK(hipStreamDestroy(s));
    destroyed = 1;
    q.join();
    CHECK(bad.load() == 0);
}

static std::atomic<int> gate{0}, ran{0};
static void held_callback(hipStream_t, hipError_t, void*) {
    while (gate.load() == 0) usleep(100);
    ran.fetch_add(1);
}

// A stream idle and cached, then given a callback that has not returned: query is
// NotReady (and the last error says so) until it returns; synchronize waits for it.
static void pending_callback() {
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    idle_twice(s);
    gate = 0;
    ran = 0;
    OK(hipStreamAddCallback(s, held_callback, nullptr, 0));
    for (int i = 0; i < 3; i++) CHECK(hipStreamQuery(s) == hipErrorNotReady);
    CHECK(hipPeekAtLastError() == hipErrorNotReady);
    std::thread opener([] {
        usleep(50000);
        gate = 1;
    });
    OK(hipStreamSynchronize(s));
    CHECK(ran.load() == 1);  // returned only after the callback ran
    opener.join();
    idle_twice(s);
    OK(hipStreamDestroy(s));
}

// Two streams and the null stream in turn (the fast path keeps the last two idle ones:
// the previous one is tried before the full lookup): a pending callback on the previous
// stream is seen, and a destroy on another thread leaves it an invalid handle.
static void alternating_streams() {
    hipStream_t a, b;
    OK(hipStreamCreateWithFlags(&a, hipStreamNonBlocking));
    OK(hipStreamCreateWithFlags(&b, hipStreamNonBlocking));
    for (int i = 0; i < 3; i++) {
        OK(hipStreamQuery(a));
        OK(hipStreamSynchronize(b));
        OK(hipStreamQuery(nullptr));
        OK(hipStreamSynchronize(a));
    }
    OK(hipStreamQuery(a));
    OK(hipStreamQuery(b));  // `a` is the previous entry now
    gate = 0;
    ran = 0;
    OK(hipStreamAddCallback(a, held_callback, nullptr, 0));
    for (int i = 0; i < 3; i++) {
        CHECK(hipStreamQuery(a) == hipErrorNotReady);
        OK(hipStreamQuery(b));
    }
    CHECK(hipGetLastError() == hipSuccess);
    gate = 1;
    OK(hipStreamSynchronize(a));
    CHECK(ran.load() == 1);
    OK(hipStreamQuery(a));
    OK(hipStreamQuery(b));
    OK(hipStreamQuery(b));
    std::thread([a] { CHECK(hipStreamDestroy(a) == hipSuccess); }).join();
    CHECK(hipStreamQuery(a) == hipErrorInvalidHandle);
    CHECK(hipStreamSynchronize(a) == hipErrorInvalidHandle);
    OK(hipStreamQuery(b));
    CHECK(hipPeekAtLastError() == hipSuccess);
    OK(hipStreamDestroy(b));
    CHECK(hipStreamQuery(b) == hipErrorInvalidHandle);
}

// The null stream, cached idle, waits in synchronize for a busy blocking stream of its
// GPU although it has no work of its own. A non-blocking stream does not hold it.
static void null_stream_and_blocking_streams() {
    uint32_t* flag;
    OK(hipHostMalloc((void**)&flag, 4096, 0));
    flag[0] = 0;
    flag[1] = 0;
    idle_twice(nullptr);
    hipStream_t nb, b;
    OK(hipStreamCreateWithFlags(&nb, hipStreamNonBlocking));
    OK(hipStreamWaitValue32(nb, flag, 3, hipStreamWaitValueEq, 0xffffffff));
    idle_twice(nullptr);  // a busy non-blocking stream does not count
    OK(hipStreamCreate(&b));
    idle_twice(nullptr);  // an idle blocking stream does not either
    OK(hipStreamWaitValue32(b, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    OK(hipStreamWriteValue32(b, flag + 1, 7, 0));
    std::atomic<int> released{0};
    std::thread opener([&] {
        usleep(50000);
        released = 1;
        __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    });
    OK(hipStreamSynchronize(nullptr));
    CHECK(released.load() == 1);
    CHECK(__atomic_load_n(flag + 1, __ATOMIC_ACQUIRE) == 7);
    opener.join();
    OK(hipStreamQuery(b));
    idle_twice(nullptr);
    __atomic_store_n(flag, 3, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(nb));
    OK(hipStreamDestroy(b));
    OK(hipStreamDestroy(nb));
    idle_twice(nullptr);
    OK(hipHostFree(flag));
}

// The cached null stream is the current device's: after hipSetDevice the null stream
// of the other GPU answers.
static void null_stream_follows_the_current_device() {
    int n = 0;
    OK(hipGetDeviceCount(&n));
    CHECK(n == 2);
    uint32_t* flag;
    OK(hipHostMalloc((void**)&flag, 4096, 0));
    flag[0] = 0;
    OK(hipSetDevice(0));
    idle_twice(nullptr);
    OK(hipStreamWaitValue32(nullptr, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    CHECK(hipStreamQuery(nullptr) == hipErrorNotReady);
    OK(hipSetDevice(1));
    idle_twice(nullptr);  // GPU 1's null stream is idle
    OK(hipSetDevice(0));
    CHECK(hipStreamQuery(nullptr) == hipErrorNotReady);
    CHECK(hipStreamQuery(nullptr) == hipErrorNotReady);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(nullptr));
    idle_twice(nullptr);
    OK(hipSetDevice(1));
    idle_twice(nullptr);
    OK(hipSetDevice(0));
    OK(hipHostFree(flag));
}

// A stream cached idle that then faults on the GPU (a write to GPU 0's memory from GPU 1,
// which has no peer access: an allocation, so accepted, but not mapped on GPU 1; an
// address in no allocation is refused before the GPU sees it) reports the sticky error
// from every later query and synchronize. Last: the fault is the GPU's, other work on it
// is left alone.
static void sticky_error() {
    void* d0 = nullptr;
    OK(hipSetDevice(0));
    OK(hipMalloc(&d0, 64));
    OK(hipSetDevice(1));
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    idle_twice(s);
    CHECK(hipStreamWriteValue32(s, (void*)(uintptr_t)0x1000, 1, 0) == hipErrorInvalidValue);
    CHECK(hipGetLastError() == hipErrorInvalidValue);
    idle_twice(s);
    OK(hipStreamWriteValue32(s, d0, 1, 0));
    hipError_t e = hipErrorNotReady;
    for (int i = 0; i < 10000 && e == hipErrorNotReady; i++) {
        e = hipStreamQuery(s);
        if (e == hipErrorNotReady) usleep(1000);
    }
    CHECK(e == hipErrorLaunchFailure);
    for (int i = 0; i < 3; i++) {
        CHECK(hipStreamQuery(s) == hipErrorLaunchFailure);
        CHECK(hipStreamSynchronize(s) == hipErrorLaunchFailure);
        CHECK(hipPeekAtLastError() == hipErrorLaunchFailure);
    }
    CHECK(hipGetLastError() == hipErrorLaunchFailure);
    CHECK(hipGetLastError() == hipSuccess);
}

// hipStreamWriteValue32 and hipEventRecord on the thread's hot stream (the one its last
// query / synchronize answered) keep the full path's rules: the last error stored on
// success too, an event or stream destroyed (here or on another thread) after both were
// cached is an invalid handle, never a crash; the null stream likewise.
static void enqueues_on_the_hot_stream() {
    unsigned* flag;
    OK(hipHostMalloc((void**)&flag, 64, 0));
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    hipEvent_t e, f;
    OK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
    OK(hipEventCreateWithFlags(&f, hipEventDisableTiming));
    for (hipStream_t st : {s, (hipStream_t) nullptr}) {
        idle_twice(st);
        CHECK(hipStreamQuery((hipStream_t)(uintptr_t)0xdead0) == hipErrorInvalidHandle);
        idle_twice(st);
        CHECK(hipStreamQuery((hipStream_t)(uintptr_t)0xdead0) == hipErrorInvalidHandle);
        OK(hipStreamWriteValue32(st, flag, 3, 0));
        CHECK(hipPeekAtLastError() == hipSuccess);
        CHECK(hipStreamQuery((hipStream_t)(uintptr_t)0xdead0) == hipErrorInvalidHandle);
        OK(hipEventRecord(e, st));
        OK(hipEventRecord(e, st));
        CHECK(hipPeekAtLastError() == hipSuccess);
        OK(hipStreamSynchronize(st));
        CHECK(__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 3);
        OK(hipEventQuery(e));
        __atomic_store_n(flag, 0, __ATOMIC_RELEASE);
        CHECK(hipEventRecord((hipEvent_t)(uintptr_t)0xdead0, st) == hipErrorInvalidHandle);
        CHECK(hipGetLastError() == hipErrorInvalidHandle);
        CHECK(hipEventRecord((hipEvent_t)st, st) == hipErrorInvalidHandle);
    }
    // Destroyed after both were cached: the event on another thread, then on this one.
    OK(hipEventRecord(f, s));
    std::thread([f] { CHECK(hipEventDestroy(f) == hipSuccess); }).join();
    CHECK(hipEventRecord(f, s) == hipErrorInvalidHandle);
    CHECK(hipPeekAtLastError() == hipErrorInvalidHandle);
    OK(hipEventRecord(e, s));
    OK(hipEventDestroy(e));
    CHECK(hipEventRecord(e, s) == hipErrorInvalidHandle);
    CHECK(hipEventRecord(e, nullptr) == hipErrorInvalidHandle);
    // The stream destroyed on another thread while hot.
    OK(hipEventCreateWithFlags(&e, hipEventDisableTiming));
    idle_twice(s);
    OK(hipStreamWriteValue32(s, flag, 1, 0));
    OK(hipEventRecord(e, s));
    std::thread([s] { CHECK(hipStreamDestroy(s) == hipSuccess); }).join();
    CHECK(hipStreamWriteValue32(s, flag, 2, 0) == hipErrorInvalidHandle);
    CHECK(hipGetLastError() == hipErrorInvalidHandle);
    CHECK(hipEventRecord(e, s) == hipErrorInvalidHandle);
    CHECK(hipGetLastError() == hipErrorInvalidHandle);
    CHECK(__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 1);
    OK(hipEventDestroy(e));
    OK(hipHostFree(flag));
}

// hipDeviceReset on another thread destroys the device's streams: a stream this thread
// had cached idle is an invalid handle afterwards (its idle predicates were closed), and a
// stream created after the reset is cached and answered as usual.
static void device_reset_on_another_thread() {
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    idle_twice(s);
    std::thread([] { CHECK(hipDeviceReset() == hipSuccess); }).join();
    CHECK(hipStreamQuery(s) == hipErrorInvalidHandle);
    CHECK(hipStreamSynchronize(s) == hipErrorInvalidHandle);
    CHECK(hipGetLastError() == hipErrorInvalidHandle);
    hipStream_t t;
    OK(hipStreamCreateWithFlags(&t, hipStreamNonBlocking));
    idle_twice(t);
    CHECK(hipStreamQuery(s) == hipErrorInvalidHandle);
    OK(hipStreamDestroy(t));
}

// A stream-ordered free on a stream cached idle leaves it idle but gives the pool a
// release to do: the next synchronize (on that stream, and on the null stream) still
// returns the memory to the device (the default release threshold, 0).
static void pool_release_on_an_idle_stream() {
    hipMemPool_t pool;
    OK(hipDeviceGetDefaultMemPool(&pool, 0));
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    for (int round = 0; round < 2; round++) {
        idle_twice(s);
        idle_twice(nullptr);
        void* p = nullptr;
        OK(hipMallocAsync(&p, 1 << 20, s));
        OK(hipFreeAsync(p, s));
        OK(hipStreamQuery(s));  // nothing on the GPU: idle
        uint64_t reserved = 0;
        OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &reserved));
        CHECK(reserved >= (1 << 20));
        OK(hipStreamSynchronize(round == 0 ? s : nullptr));
        OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &reserved));
        CHECK(reserved == 0);
    }
    OK(hipStreamDestroy(s));
}

int main() {
    destroyed_and_foreign_handles();
    destroy_while_another_thread_queries();
    pending_callback();
    alternating_streams();
    null_stream_and_blocking_streams();
    null_stream_follows_the_current_device();
    pool_release_on_an_idle_stream();
    enqueues_on_the_hot_stream();
    device_reset_on_another_thread();
    sticky_error();
    printf("idle checks passed: %d\n", checks.load());
    return 0;
}
