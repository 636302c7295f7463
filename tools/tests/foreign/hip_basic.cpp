// A HIP program run under `kfdrt emu-run` against Debian's CLR (libamdhip64 5.2):
// streams with priorities, events, host callbacks, stream memory operations
// (hipStreamWriteValue/WaitValue 32/64), hipMemcpy and hipMemset. Prints one "ok NAME"
// line per check; exits 1 at the first failure.
#include "hip_common.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <atomic>
#include <vector>


static std::atomic<int> callbacks{0};
static void on_done(hipStream_t, hipError_t status, void* arg) {
    if (status == hipSuccess) callbacks.fetch_add(*(int*)arg);
}

int main() {
    setvbuf(stdout, nullptr, _IONBF, 0);
    int n = 0;
    CHECK(hipGetDeviceCount(&n));
    EXPECT(n >= 1, "no devices");
    hipDeviceProp_t p;
    CHECK(hipGetDeviceProperties(&p, 0));
    printf("ok device count=%d name=%s cus=%d warp=%d\n", n, p.gcnArchName, p.multiProcessorCount,
           p.warpSize);

    int lo = 0, hi = 0;
    CHECK(hipDeviceGetStreamPriorityRange(&lo, &hi));
    hipStream_t s1, s2;
    CHECK(hipStreamCreateWithPriority(&s1, hipStreamNonBlocking, hi));
    CHECK(hipStreamCreateWithPriority(&s2, hipStreamNonBlocking, lo));
    int prio = 0;
    CHECK(hipStreamGetPriority(s1, &prio));
    EXPECT(prio == hi, "priority %d, expected %d", prio, hi);
    printf("ok streams priorities=[%d,%d]\n", lo, hi);

    hipEvent_t e0, e1;
    CHECK(hipEventCreate(&e0));
    CHECK(hipEventCreate(&e1));
    CHECK(hipEventRecord(e0, s1));
    CHECK(hipEventRecord(e1, s1));
    CHECK(hipEventSynchronize(e1));
    EXPECT(hipEventQuery(e1) == hipSuccess, "event not complete after synchronize");
    float ms = -1;
    CHECK(hipEventElapsedTime(&ms, e0, e1));
    EXPECT(ms >= 0, "elapsed %f", ms);
    printf("ok events\n");

    int add = 5;
    CHECK(hipStreamAddCallback(s2, on_done, &add, 0));
    CHECK(hipStreamSynchronize(s2));
    EXPECT(callbacks.load() == 5, "callbacks %d", callbacks.load());
    printf("ok callback\n");

    // Stream memory operations on host-visible memory.
    uint64_t* flag = nullptr;
    CHECK(hipHostMalloc((void**)&flag, 64, hipHostMallocDefault));
    memset(flag, 0, 64);
    CHECK(hipStreamWriteValue32(s1, flag, 7, 0));
    CHECK(hipStreamWriteValue64(s1, flag + 1, 0x1234567890ull, 0));
    CHECK(hipStreamSynchronize(s1));
    EXPECT(((uint32_t*)flag)[0] == 7 && flag[1] == 0x1234567890ull, "write values %u %llx",
           ((uint32_t*)flag)[0], (unsigned long long)flag[1]);
    CHECK(hipStreamWaitValue32(s2, flag + 2, 1, hipStreamWaitValueEq, 0xffffffff));
    CHECK(hipStreamWaitValue64(s2, flag + 3, 2, hipStreamWaitValueGte, ~0ull));
    CHECK(hipStreamWriteValue32(s2, flag + 4, 9, 0));
    EXPECT(hipStreamQuery(s2) == hipErrorNotReady, "stream ran past its wait");
    __atomic_store_n((uint32_t*)(flag + 2), 1u, __ATOMIC_RELEASE);
    __atomic_store_n(flag + 3, 3ull, __ATOMIC_RELEASE);
    CHECK(hipStreamSynchronize(s2));
    EXPECT(*(uint32_t*)(flag + 4) == 9, "write after waits %u", *(uint32_t*)(flag + 4));
    printf("ok stream_memops\n");

    const size_t bytes = 1 << 20;
    std::vector<uint8_t> h(bytes), back(bytes, 0);
    for (size_t i = 0; i < bytes; i++) h[i] = (uint8_t)(i * 13 + 1);
    void* d = nullptr;
    CHECK(hipMalloc(&d, bytes));
    CHECK(hipMemcpy(d, h.data(), bytes, hipMemcpyHostToDevice));
    CHECK(hipMemcpy(back.data(), d, bytes, hipMemcpyDeviceToHost));
    EXPECT(memcmp(h.data(), back.data(), bytes) == 0, "round trip differs");
    printf("ok memcpy h2d d2h\n");

    CHECK(hipMemset(d, 0xab, bytes));
    CHECK(hipMemcpy(back.data(), d, bytes, hipMemcpyDeviceToHost));
    EXPECT(back[0] == 0xab && back[bytes - 1] == 0xab, "memset %x %x", back[0], back[bytes - 1]);
    printf("ok memset\n");

    CHECK(hipFree(d));
    CHECK(hipHostFree(flag));
    CHECK(hipStreamDestroy(s1));
    CHECK(hipStreamDestroy(s2));
    printf("ok done\n");
    return 0;
}
