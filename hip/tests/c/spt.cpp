// The per-thread default stream through HIP's C API: compiled by g++ against Debian's HIP
// 5.2 headers with HIP_API_PER_THREAD_DEFAULT_STREAM (the header then maps hipMemcpy,
// hipMemset, hipMemcpyAsync, hipStreamQuery/Synchronize/GetFlags/GetPriority/WaitEvent to
// their `_spt` entry points), linked with Debian's -lamdhip64, run on kfdrt's library.
#define HIP_API_PER_THREAD_DEFAULT_STREAM 1
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <atomic>
#include <thread>

// Debian's 5.2 library has no hipEventRecord_spt (the header maps it anyway): use the
// plain form. The header declares only the `_spt` names of the mapped calls, so the plain
// forms used below are declared here.
#undef hipEventRecord
extern "C" hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream);
#pragma push_macro("hipStreamQuery")
#pragma push_macro("hipStreamSynchronize")
#undef hipStreamQuery
#undef hipStreamSynchronize
extern "C" hipError_t hipStreamQuery(hipStream_t stream);
extern "C" hipError_t hipStreamSynchronize(hipStream_t stream);
#pragma pop_macro("hipStreamQuery")
#pragma pop_macro("hipStreamSynchronize")

#include "check.h"

static unsigned load(volatile unsigned *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }

// Wait (bounded) until the host sees `*p == v`.
static void await_value(volatile unsigned *p, unsigned v) {
    for (int i = 0; i < 20000 && load(p) != v; i++) usleep(1000);
    CHECK(load(p) == v);
}

int main() {
    unsigned *gate, *sig;  // pinned host memory: the gate the streams wait on, results
    OK(hipHostMalloc((void **)&gate, 4096, 0));
    OK(hipHostMalloc((void **)&sig, 4096, 0));
    memset(gate, 0, 4096);
    memset(sig, 0, 4096);

    // The handle: a blocking stream of default priority, idle.
    unsigned flags = 99;
    int prio = 99;
    OK(hipStreamGetFlags(hipStreamPerThread, &flags));
    CHECK(flags == hipStreamDefault);
    OK(hipStreamGetFlags(nullptr, &flags));  // _spt: null is the per-thread stream
    CHECK(flags == hipStreamDefault);
    OK(hipStreamGetPriority(hipStreamPerThread, &prio));
    CHECK(prio == 0);
    OK(hipStreamQuery(hipStreamPerThread));
    OK(hipStreamSynchronize(hipStreamPerThread));
    CHECK(hipStreamDestroy(hipStreamPerThread) == hipErrorInvalidHandle);

    // Work behind a closed gate on this thread's per-thread stream: null (through the
    // `_spt` entry points) and hipStreamPerThread name the same stream.
    OK(hipStreamWaitValue32(hipStreamPerThread, gate, 1, hipStreamWaitValueEq, ~0u));
    OK(hipStreamWriteValue32(hipStreamPerThread, &sig[0], 7, 0));
    CHECK(hipStreamQuery(nullptr) == hipErrorNotReady);
    CHECK(hipStreamQuery(hipStreamPerThread) == hipErrorNotReady);
    CHECK(hipPeekAtLastError() == hipErrorNotReady);

    // Another thread has its own per-thread stream: idle, and its synchronous copies and
    // memsets complete while this thread's stream is held.
    // Its allocations are freed by this thread once the held stream ran: hipFree waits for
    // every stream, the held one included (CLR's ihipFree: SyncAllStreams).
    void *other_d = nullptr;
    unsigned *other_pin = nullptr;
    std::thread other([&] {
        OK(hipStreamQuery(nullptr));
        OK(hipStreamQuery(hipStreamPerThread));
        void *d = nullptr;
        OK(hipMalloc(&d, 4096));
        OK(hipMemset(d, 0x5a, 4096));  // hipMemset_spt: on this thread's stream, waited for
        unsigned char h[4096];
        OK(hipMemcpy(h, d, sizeof h, hipMemcpyDeviceToHost));  // hipMemcpy_spt
        CHECK(h[0] == 0x5a && h[4095] == 0x5a);
        OK(hipStreamWriteValue32(hipStreamPerThread, &sig[1], 5, 0));
        OK(hipStreamSynchronize(nullptr));  // _spt: this thread's stream only
        CHECK(load(&sig[1]) == 5);
        CHECK(load(&sig[0]) == 0);  // the main thread's stream is still held
        // hipMemcpyAsync_spt with a null stream: ordered on this thread's stream.
        unsigned *pin;
        OK(hipHostMalloc((void **)&pin, 4096, 0));
        pin[0] = 0;
        OK(hipMemcpyAsync(pin, d, 4, hipMemcpyDeviceToHost, nullptr));
        OK(hipStreamSynchronize(hipStreamPerThread));
        CHECK(pin[0] == 0x5a5a5a5a);
        other_pin = pin;
        other_d = d;
    });
    other.join();
    CHECK(load(&sig[0]) == 0);

    // hipStreamWaitEvent_spt: the per-thread stream waits for an event of another stream.
    hipStream_t s;
    hipEvent_t ev;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    OK(hipEventCreateWithFlags(&ev, hipEventDisableTiming));
    OK(hipStreamWaitValue32(s, gate, 2, hipStreamWaitValueGte, ~0u));
    OK(hipEventRecord(ev, s));
    OK(hipStreamWaitEvent(nullptr, ev, 0));
    OK(hipStreamWriteValue32(hipStreamPerThread, &sig[2], 9, 0));

    // Open the first gate: the per-thread stream runs up to the event wait.
    __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
    await_value(&sig[0], 7);
    CHECK(hipStreamQuery(nullptr) == hipErrorNotReady);
    CHECK(load(&sig[2]) == 0);
    __atomic_store_n(gate, 2, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(nullptr));
    CHECK(load(&sig[2]) == 9);
    OK(hipStreamQuery(nullptr));
    OK(hipHostFree(other_pin));
    OK(hipFree(other_d));

    // The per-thread stream is blocking: the legacy null stream waits for it.
#undef hipStreamQuery
#undef hipStreamSynchronize
    OK(hipStreamWaitValue32(hipStreamPerThread, gate, 3, hipStreamWaitValueEq, ~0u));
    OK(hipStreamWriteValue32(nullptr, &sig[3], 11, 0));  // not mapped: the legacy null stream
    CHECK(hipStreamQuery(nullptr) == hipErrorNotReady);
    usleep(20000);
    CHECK(load(&sig[3]) == 0);
    __atomic_store_n(gate, 3, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(nullptr));
    CHECK(load(&sig[3]) == 11);
    OK(hipStreamQuery(hipStreamPerThread));
    // hipDeviceSynchronize covers per-thread streams too.
    OK(hipStreamWaitValue32(hipStreamPerThread, gate, 4, hipStreamWaitValueEq, ~0u));
    OK(hipStreamWriteValue32(hipStreamPerThread, &sig[4], 13, 0));
    std::thread opener([&] {
        usleep(20000);
        __atomic_store_n(gate, 4, __ATOMIC_RELEASE);
    });
    OK(hipDeviceSynchronize());
    CHECK(load(&sig[4]) == 13);
    opener.join();

    OK(hipEventDestroy(ev));
    OK(hipStreamDestroy(s));
    OK(hipHostFree(gate));
    OK(hipHostFree(sig));
    printf("spt checks passed: %d\n", checks.load());
    return 0;
}
