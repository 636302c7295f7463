// One HIP program for two HIP implementations: Debian's CLR (libamdhip64 5.2) on the
// emulated GPU through `kfdrt emu-run`, and kfdrt's own libamdhip64 (crate hip/) on the
// same emulated GPU. Every call prints one line, "diff FUNCTION ERROR CHECK": ERROR is
// hipGetErrorName of its result, CHECK is "ok" when the result is right (data, values),
// "wrong:WHAT" when the call succeeded with a wrong result, "-" when it failed, and
// "skipped" when what it needs failed earlier. The program never stops early, so both
// libraries answer every line.
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <atomic>
#include <vector>

static void report(const char* fn, hipError_t e, bool ok, const char* what) {
    if (e != hipSuccess)
        printf("diff %s %s -\n", fn, hipGetErrorName(e));
    else if (ok)
        printf("diff %s hipSuccess ok\n", fn);
    else
        printf("diff %s hipSuccess wrong:%s\n", fn, what);
}
static void skipped(const char* fn) { printf("diff %s - skipped\n", fn); }

// Call `expr`; on success evaluate `check` (a bool) to say whether the result is right.
#define CALL(fn, expr, check, what)                                                  \
    ([&]() {                                                                         \
        hipError_t e_ = (expr);                                                      \
        bool ok_ = e_ == hipSuccess && (check);                                      \
        report(fn, e_, ok_, what);                                                   \
        return e_ == hipSuccess;                                                     \
    }())

static std::atomic<int> callbacks{0};
static void on_done(hipStream_t, hipError_t status, void*) {
    if (status == hipSuccess) callbacks.fetch_add(1);
}

static const size_t kBytes = 1 << 20;

int main() {
    setvbuf(stdout, nullptr, _IONBF, 0);
    int n = 0;
    CALL("hipGetDeviceCount", hipGetDeviceCount(&n), n == 1, "count");
    hipDeviceProp_t p;
    memset(&p, 0, sizeof p);
    CALL("hipGetDeviceProperties", hipGetDeviceProperties(&p, 0),
         strncmp(p.gcnArchName, "gfx90a", 6) == 0 && p.multiProcessorCount == 110 &&
             p.warpSize == 64,
         "properties");
    // CLR 5.2 says least = 1, greatest = -1 (hip_stream.cpp); the values are printed.
    int lo = 9, hi = 9;
    if (CALL("hipDeviceGetStreamPriorityRange", hipDeviceGetStreamPriorityRange(&lo, &hi),
             lo > hi, "range"))
        printf("diff hipDeviceGetStreamPriorityRange(values) hipSuccess least=%d,greatest=%d\n", lo,
               hi);

    hipStream_t s = nullptr, s2 = nullptr;
    bool have_s = CALL("hipStreamCreateWithPriority",
                       hipStreamCreateWithPriority(&s, hipStreamNonBlocking, hi), s != nullptr,
                       "stream");
    bool have_s2 = CALL("hipStreamCreateWithFlags",
                        hipStreamCreateWithFlags(&s2, hipStreamNonBlocking), s2 != nullptr,
                        "stream");
    if (have_s) {
        int prio = 7;
        CALL("hipStreamGetPriority", hipStreamGetPriority(s, &prio), prio == hi, "priority");
    } else {
        skipped("hipStreamGetPriority");
    }

    // Events.
    hipEvent_t e0 = nullptr, e1 = nullptr;
    bool have_ev = CALL("hipEventCreate", hipEventCreate(&e0), e0 != nullptr, "event") &&
                   hipEventCreate(&e1) == hipSuccess;
    if (have_ev && have_s) {
        CALL("hipEventRecord", hipEventRecord(e0, s), true, "");
        (void)hipEventRecord(e1, s);
        CALL("hipEventSynchronize", hipEventSynchronize(e1), true, "");
        CALL("hipEventQuery", hipEventQuery(e1), true, "");
        float ms = -1;
        CALL("hipEventElapsedTime", hipEventElapsedTime(&ms, e0, e1), ms >= 0, "negative");
    } else {
        for (const char* f : {"hipEventRecord", "hipEventSynchronize", "hipEventQuery",
                              "hipEventElapsedTime"})
            skipped(f);
    }

    // A callback.
    if (have_s2) {
        CALL("hipStreamAddCallback", hipStreamAddCallback(s2, on_done, nullptr, 0), true, "");
        CALL("hipStreamSynchronize", hipStreamSynchronize(s2), callbacks.load() == 1,
             "callback count");
    } else {
        skipped("hipStreamAddCallback");
        skipped("hipStreamSynchronize");
    }

    // Stream memory operations on pinned host memory.
    uint64_t* flag = nullptr;
    bool have_flag = CALL("hipHostMalloc", hipHostMalloc((void**)&flag, 64, hipHostMallocDefault),
                          flag != nullptr, "pointer");
    if (have_flag && have_s && have_s2) {
        memset(flag, 0, 64);
        CALL("hipStreamWriteValue32", hipStreamWriteValue32(s, flag, 7, 0), true, "");
        CALL("hipStreamWriteValue64", hipStreamWriteValue64(s, flag + 1, 0x1234567890ull, 0),
             true, "");
        hipError_t e = hipStreamSynchronize(s);
        if (e == hipSuccess && (((uint32_t*)flag)[0] != 7 || flag[1] != 0x1234567890ull))
            printf("diff hipStreamWriteValue(data) hipSuccess wrong:values\n");
        CALL("hipStreamWaitValue32",
             hipStreamWaitValue32(s2, flag + 2, 1, hipStreamWaitValueEq, 0xffffffff), true, "");
        CALL("hipStreamWaitValue64",
             hipStreamWaitValue64(s2, flag + 3, 2, hipStreamWaitValueGte, ~0ull), true, "");
        (void)hipStreamWriteValue32(s2, flag + 4, 9, 0);
        CALL("hipStreamQuery(blocked)", hipStreamQuery(s2) == hipErrorNotReady ? hipSuccess
                                                                               : hipStreamQuery(s2),
             true, "");
        __atomic_store_n((uint32_t*)(flag + 2), 1u, __ATOMIC_RELEASE);
        __atomic_store_n(flag + 3, 3ull, __ATOMIC_RELEASE);
        CALL("hipStreamSynchronize(after-waits)", hipStreamSynchronize(s2),
             *(uint32_t*)(flag + 4) == 9, "write after waits");
    } else {
        for (const char* f : {"hipStreamWriteValue32", "hipStreamWriteValue64",
                              "hipStreamWaitValue32", "hipStreamWaitValue64",
                              "hipStreamQuery(blocked)", "hipStreamSynchronize(after-waits)"})
            skipped(f);
    }

    // Copies and fills.
    std::vector<uint8_t> h(kBytes), back(kBytes, 0);
    for (size_t i = 0; i < kBytes; i++) h[i] = (uint8_t)(i * 13 + 1);
    void* d = nullptr;
    bool have_d = CALL("hipMalloc", hipMalloc(&d, kBytes), d != nullptr, "pointer");
    if (have_d) {
        CALL("hipMemcpy(H2D)", hipMemcpy(d, h.data(), kBytes, hipMemcpyHostToDevice), true, "");
        CALL("hipMemcpy(D2H)", hipMemcpy(back.data(), d, kBytes, hipMemcpyDeviceToHost),
             memcmp(h.data(), back.data(), kBytes) == 0, "data");
        CALL("hipMemset", hipMemset(d, 0xab, kBytes), true, "");
        (void)hipMemcpy(back.data(), d, kBytes, hipMemcpyDeviceToHost);
        if (back[0] != 0xab || back[kBytes - 1] != 0xab)
            printf("diff hipMemset(data) hipSuccess wrong:data\n");
        CALL("hipFree", hipFree(d), true, "");
    } else {
        for (const char* f : {"hipMemcpy(H2D)", "hipMemcpy(D2H)", "hipMemset", "hipFree"})
            skipped(f);
    }

    // Stream-ordered allocator and pools.
    hipMemPool_t def = nullptr;
    bool have_def = CALL("hipDeviceGetDefaultMemPool", hipDeviceGetDefaultMemPool(&def, 0),
                         def != nullptr, "pool");
    if (have_s) {
        void* a = nullptr;
        if (CALL("hipMallocAsync", hipMallocAsync(&a, kBytes, s), a != nullptr, "pointer")) {
            CALL("hipMemsetAsync", hipMemsetAsync(a, 0x5c, kBytes, s), true, "");
            CALL("hipMemcpyAsync(D2H)",
                 hipMemcpyAsync(back.data(), a, kBytes, hipMemcpyDeviceToHost, s), true, "");
            CALL("hipFreeAsync", hipFreeAsync(a, s), true, "");
            CALL("hipStreamSynchronize(pool)", hipStreamSynchronize(s),
                 back[0] == 0x5c && back[kBytes - 1] == 0x5c, "data");
        } else {
            for (const char* f : {"hipMemsetAsync", "hipMemcpyAsync(D2H)", "hipFreeAsync",
                                  "hipStreamSynchronize(pool)"})
                skipped(f);
        }
        hipMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = hipMemAllocationTypePinned;
        props.location.type = hipMemLocationTypeDevice;
        props.location.id = 0;
        hipMemPool_t pool = nullptr;
        if (CALL("hipMemPoolCreate", hipMemPoolCreate(&pool, &props), pool != nullptr, "pool")) {
            uint64_t thr = 4 * kBytes, got = 0;
            CALL("hipMemPoolSetAttribute",
                 hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &thr), true, "");
            CALL("hipMemPoolGetAttribute",
                 hipMemPoolGetAttribute(pool, hipMemPoolAttrReleaseThreshold, &got), got == thr,
                 "threshold");
            void* b = nullptr;
            if (CALL("hipMallocFromPoolAsync", hipMallocFromPoolAsync(&b, kBytes, pool, s),
                     b != nullptr, "pointer")) {
                (void)hipFreeAsync(b, s);
                (void)hipStreamSynchronize(s);
            }
            CALL("hipMemPoolTrimTo", hipMemPoolTrimTo(pool, 0), true, "");
            CALL("hipMemPoolDestroy", hipMemPoolDestroy(pool), true, "");
        } else {
            for (const char* f : {"hipMemPoolSetAttribute", "hipMemPoolGetAttribute",
                                  "hipMallocFromPoolAsync", "hipMemPoolTrimTo",
                                  "hipMemPoolDestroy"})
                skipped(f);
        }
    }
    // CLR 5.2's hipStreamDestroy spins while a pool's free heap holds a block (see
    // hip_memory.cpp): empty the default pool before destroying streams.
    if (have_def) (void)hipMemPoolTrimTo(def, 0);

    // Managed memory.
    uint8_t* m = nullptr;
    if (CALL("hipMallocManaged", hipMallocManaged((void**)&m, kBytes, hipMemAttachGlobal),
             m != nullptr, "pointer")) {
        for (size_t i = 0; i < kBytes; i++) m[i] = (uint8_t)(i * 3 + 1);
        CALL("hipMemAdvise", hipMemAdvise(m, kBytes, hipMemAdviseSetPreferredLocation, 0), true,
             "");
        int loc = -7;
        CALL("hipMemRangeGetAttribute",
             hipMemRangeGetAttribute(&loc, sizeof loc, hipMemRangeAttributePreferredLocation, m,
                                     kBytes),
             loc == 0, "location");
        if (have_s) {
            CALL("hipMemPrefetchAsync", hipMemPrefetchAsync(m, kBytes, 0, s), true, "");
            CALL("hipStreamSynchronize(prefetch)", hipStreamSynchronize(s),
                 m[1] == 4 && m[kBytes - 1] == (uint8_t)((kBytes - 1) * 3 + 1), "data");
        } else {
            skipped("hipMemPrefetchAsync");
            skipped("hipStreamSynchronize(prefetch)");
        }
        CALL("hipFree(managed)", hipFree(m), true, "");
    } else {
        for (const char* f : {"hipMemAdvise", "hipMemRangeGetAttribute", "hipMemPrefetchAsync",
                              "hipStreamSynchronize(prefetch)", "hipFree(managed)"})
            skipped(f);
    }

    // Virtual memory management.
    hipMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;
    size_t gran = 0;
    CALL("hipMemGetAllocationGranularity",
         hipMemGetAllocationGranularity(&gran, &prop, hipMemAllocationGranularityMinimum),
         gran > 0 && (gran & (gran - 1)) == 0, "granularity");
    size_t size = gran ? ((kBytes + gran - 1) / gran) * gran : kBytes;
    hipMemGenericAllocationHandle_t vh = nullptr;
    bool have_vh = CALL("hipMemCreate", hipMemCreate(&vh, size, &prop, 0), vh != nullptr,
                        "handle");
    void* va = nullptr;
    CALL("hipMemAddressReserve", hipMemAddressReserve(&va, size, 0, nullptr, 0), va != nullptr,
         "no address");
    if (have_vh) {
        bool mapped = CALL("hipMemMap", hipMemMap(va, size, 0, vh, 0), true, "");
        hipMemAccessDesc acc;
        memset(&acc, 0, sizeof acc);
        acc.location = prop.location;
        acc.flags = hipMemAccessFlagsProtReadWrite;
        CALL("hipMemSetAccess", hipMemSetAccess(va, size, &acc, 1), true, "");
        if (mapped && va != nullptr) {
            CALL("hipMemcpy(VMM)", hipMemcpy(va, h.data(), kBytes, hipMemcpyHostToDevice), true,
                 "");
            (void)hipMemcpy(back.data(), va, kBytes, hipMemcpyDeviceToHost);
            if (memcmp(h.data(), back.data(), kBytes) != 0)
                printf("diff hipMemcpy(VMM-data) hipSuccess wrong:data\n");
        } else {
            skipped("hipMemcpy(VMM)");
        }
        CALL("hipMemUnmap", hipMemUnmap(va, size), true, "");
        CALL("hipMemRelease", hipMemRelease(vh), true, "");
    } else {
        for (const char* f : {"hipMemMap", "hipMemSetAccess", "hipMemcpy(VMM)", "hipMemUnmap",
                              "hipMemRelease"})
            skipped(f);
    }
    if (va != nullptr)
        CALL("hipMemAddressFree", hipMemAddressFree(va, size), true, "");
    else
        skipped("hipMemAddressFree");

    if (have_flag) (void)hipHostFree(flag);
    if (have_s) CALL("hipStreamDestroy", hipStreamDestroy(s), true, "");
    if (have_s2) (void)hipStreamDestroy(s2);
    CALL("hipDeviceSynchronize", hipDeviceSynchronize(), true, "");
    printf("diff end\n");
    return 0;
}
