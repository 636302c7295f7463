// The seed scenarios through HIP's C API: compiled by g++ against Debian's HIP 5.2 headers,
// linked with Debian's -lamdhip64, run with LD_LIBRARY_PATH pointing at kfdrt's library.
#include <hip/hip_runtime_api.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <atomic>
#include <vector>

#include "check.h"

static hipStream_t foreign() { return (hipStream_t)(uintptr_t)0xdead0; }

static void errors_and_library() {
    // Our library, not Debian's, serves the calls: its kfdrt-only export is there and
    // hipMalloc lives in the same object.
    void *mine = dlsym(RTLD_DEFAULT, "kfdrt_hip_layout");
    CHECK(mine != NULL);
    Dl_info a, b;
    CHECK(dladdr((void *)(hipError_t (*)(void **, size_t))&hipMalloc, &a) && dladdr(mine, &b));
    CHECK(strcmp(a.dli_fname, b.dli_fname) == 0);
    CHECK(strcmp(hipGetErrorName(hipErrorInvalidHandle), "hipErrorInvalidHandle") == 0);
    CHECK(strcmp(hipGetErrorString(hipErrorNotReady), "hipErrorNotReady") == 0);
    CHECK(strcmp(hipGetErrorName((hipError_t)12345), "hipErrorUnknown") == 0);
    // Last error: every call sets it; Get returns and clears, Peek keeps.
    CHECK(hipGetLastError() == hipSuccess);
    CHECK(hipStreamDestroy(foreign()) == hipErrorInvalidHandle);
    CHECK(hipPeekAtLastError() == hipErrorInvalidHandle);
    CHECK(hipPeekAtLastError() == hipErrorInvalidHandle);
    CHECK(hipGetLastError() == hipErrorInvalidHandle);
    CHECK(hipGetLastError() == hipSuccess);
    CHECK(hipStreamQuery(foreign()) == hipErrorInvalidHandle);
    int n = 0;
    OK(hipGetDeviceCount(&n));  // a success replaces the last error (HIP 5.2 HIP_RETURN)
    CHECK(hipPeekAtLastError() == hipSuccess);
    // Not modelled: a clear error, never a fake success.
    CHECK(hipMemcpy2D_spt(NULL, 0, NULL, 0, 0, 0, hipMemcpyDefault) == hipErrorNotSupported);
    CHECK(hipPeekAtLastError() == hipErrorNotSupported);
}

// hipHostMalloc flags: every defined combination but Coherent|NonCoherent gives pinned,
// GPU-mapped host memory at the same address (checked by a GPU write and a GPU fill seen
// by the host); NumaUser is NotSupported; bad hipExtMallocWithFlags requests are
// InvalidValue, fine-grained VRAM NotSupported.
static void host_malloc_flags() {
    const unsigned good[] = {
        hipHostMallocPortable,
        hipHostMallocMapped,
        hipHostMallocWriteCombined,
        hipHostMallocCoherent,
        hipHostMallocNonCoherent,
        hipHostMallocPortable | hipHostMallocMapped | hipHostMallocCoherent,
        hipHostMallocWriteCombined | hipHostMallocMapped | hipHostMallocNonCoherent,
    };
    hipStream_t s;
    OK(hipStreamCreate(&s));
    for (unsigned i = 0; i < sizeof good / sizeof good[0]; i++) {
        unsigned *p = NULL;
        OK(hipHostMalloc((void **)&p, 8192, good[i]));
        CHECK(p != NULL);
        memset(p, 0, 8192);
        OK(hipMemsetAsync(p + 1024, 0x3c, 4096, s));
        OK(hipStreamWriteValue32(s, p, 0x1000 + i, 0));
        OK(hipStreamSynchronize(s));
        CHECK(p[0] == 0x1000 + i && p[1] == 0);
        CHECK(p[1024] == 0x3c3c3c3c && p[2047] == 0x3c3c3c3c);
        hipPointerAttribute_t at;
        OK(hipPointerGetAttributes(&at, p + 5));
        CHECK(at.memoryType == hipMemoryTypeHost && at.hostPointer == (void *)(p + 5));
        CHECK(at.devicePointer == (void *)(p + 5) && at.isManaged == 0);
        CHECK(at.allocationFlags == good[i]);
        // Mapped: the device pointer is the host pointer; the flags come back as given.
        void *dp = NULL;
        OK(hipHostGetDevicePointer(&dp, p + 5, 0));
        CHECK(dp == (void *)(p + 5));
        unsigned f = 0xffffffffu;
        OK(hipHostGetFlags(&f, p + 100));
        CHECK(f == good[i]);
        OK(hipHostFree(p));
        CHECK(hipHostGetFlags(&f, p) == hipErrorInvalidValue);
    }
    OK(hipStreamDestroy(s));
    void *p = NULL;
    int stack = 0;
    unsigned f = 0;
    CHECK(hipHostGetDevicePointer(&p, &stack, 0) == hipErrorInvalidValue);
    CHECK(hipHostGetFlags(&f, &stack) == hipErrorInvalidValue);
    OK(hipHostMalloc(&p, 4096, 0));
    void *dp = NULL;
    OK(hipHostGetDevicePointer(&dp, p, 1));  // no flag is defined: ignored, as CLR
    CHECK(dp == p);
    CHECK(hipHostGetDevicePointer(NULL, p, 0) == hipErrorInvalidValue);
    OK(hipHostGetFlags(&f, p));
    CHECK(f == hipHostMallocDefault);
    OK(hipHostFree(p));
    p = NULL;
    CHECK(hipHostMalloc(&p, 4096, hipHostMallocCoherent | hipHostMallocNonCoherent) ==
          hipErrorInvalidValue);
    CHECK(hipHostMalloc(&p, 4096, hipHostMallocNumaUser) == hipErrorNotSupported);
    // A bit 5.2 does not define: accepted and kept, as CLR 5.2.
    OK(hipHostMalloc(&p, 4096, 0x8));
    OK(hipHostGetFlags(&f, p));
    CHECK(f == 0x8);
    OK(hipHostFree(p));
    p = NULL;
    CHECK(hipHostMalloc(NULL, 4096, 0) == hipErrorInvalidValue);
    CHECK(p == NULL);
    OK(hipHostMalloc(&p, 0, hipHostMallocMapped));
    CHECK(p == NULL);
    CHECK(hipExtMallocWithFlags(&p, 16, hipMallocSignalMemory) == hipErrorInvalidValue);
    CHECK(hipExtMallocWithFlags(&p, 4096, 7) == hipErrorInvalidValue);
    CHECK(hipExtMallocWithFlags(&p, 4096, hipDeviceMallocFinegrained) == hipErrorNotSupported);
    OK(hipExtMallocWithFlags(&p, 8, hipMallocSignalMemory));
    CHECK(p != NULL);
    OK(hipFree(p));
}

static void devices() {
    int n = 0, d = -1;
    OK(hipGetDeviceCount(&n));
    CHECK(n >= 1);
    CHECK(hipSetDevice(n) == hipErrorInvalidDevice);
    CHECK(hipSetDevice(-1) == hipErrorInvalidDevice);
    OK(hipSetDevice(0));
    OK(hipGetDevice(&d));
    CHECK(d == 0);
    CHECK(hipGetDeviceCount(NULL) == hipErrorInvalidValue);
    hipDeviceProp_t prop;
    memset(&prop, 0xff, sizeof prop);
    OK(hipGetDeviceProperties(&prop, 0));
    CHECK(strncmp(prop.gcnArchName, "gfx9", 4) == 0);
    CHECK(prop.major == 9);
    CHECK(prop.multiProcessorCount > 0 && prop.warpSize == 64);
    CHECK(prop.totalGlobalMem > (1ull << 30));
    CHECK(prop.sharedMemPerBlock == 64 * 1024);
    CHECK(prop.isLargeBar == 1 && prop.managedMemory == 1);
    int lim = -1;
    CHECK(prop.maxThreadsPerBlock == 1024);
    CHECK(prop.maxThreadsDim[0] == 1024 && prop.maxThreadsDim[1] == 1024 && prop.maxThreadsDim[2] == 1024);
    CHECK(prop.maxGridSize[0] == 2147483647 && prop.maxGridSize[1] == 2147483647 && prop.maxGridSize[2] == 2147483647);
    CHECK(prop.totalConstMem == 2147483647 && prop.memPitch == 2147483647);
    // CLR 5.2: 256 VGPRs x 4 SIMDs x 64 lanes.
    CHECK(prop.regsPerBlock == 256 * 4 * 64);
    // The target ID with its features (the emulated GPUs report SRAM ECC).
    CHECK(strstr(prop.gcnArchName, ":sramecc+:xnack-") != NULL);
    CHECK(prop.arch.hasGlobalInt32Atomics && prop.arch.hasDoubles && prop.arch.has3dGrid && !prop.arch.hasDynamicParallelism);
    OK(hipDeviceGetAttribute(&lim, hipDeviceAttributeMaxThreadsPerBlock, 0));
    CHECK(lim == 1024);
    OK(hipDeviceGetAttribute(&lim, hipDeviceAttributeMaxBlockDimZ, 0));
    CHECK(lim == 1024);
    OK(hipDeviceGetAttribute(&lim, hipDeviceAttributeMaxGridDimX, 0));
    CHECK(lim == 2147483647);
    OK(hipDeviceGetAttribute(&lim, hipDeviceAttributeMaxGridDimY, 0));
    CHECK(lim == 2147483647);
    OK(hipDeviceGetAttribute(&lim, hipDeviceAttributeMaxRegistersPerBlock, 0));
    CHECK(lim == prop.regsPerBlock);
    OK(hipDeviceGetAttribute(&lim, hipDeviceAttributeTotalConstantMemory, 0));
    CHECK(lim == 2147483647);
    int v = -1;
    OK(hipDeviceGetAttribute(&v, hipDeviceAttributeMultiprocessorCount, 0));
    CHECK(v == prop.multiProcessorCount);
    OK(hipDeviceGetAttribute(&v, hipDeviceAttributeWarpSize, 0));
    CHECK(v == 64);
    OK(hipDeviceGetAttribute(&v, hipDeviceAttributeComputeCapabilityMajor, 0));
    CHECK(v == prop.major);
    CHECK(hipDeviceGetAttribute(&v, hipDeviceAttributeMaxTexture1DWidth, 0) == hipErrorNotSupported);
    CHECK(hipGetDeviceProperties(&prop, n) == hipErrorInvalidDevice);
    CHECK(hipGetDeviceProperties(NULL, 0) == hipErrorInvalidValue);
    int rt = 0;
    OK(hipRuntimeGetVersion(&rt));
    CHECK(rt == HIP_VERSION);
}

static void streams() {
    int least = 0, greatest = 0;
    OK(hipDeviceGetStreamPriorityRange(&least, &greatest));
    CHECK(greatest < least);
    hipStream_t hi, lo, nb;
    OK(hipStreamCreateWithPriority(&hi, hipStreamDefault, greatest));
    OK(hipStreamCreateWithPriority(&lo, hipStreamDefault, least));
    OK(hipStreamCreateWithFlags(&nb, hipStreamNonBlocking));
    int p = 99;
    unsigned f = 99;
    OK(hipStreamGetPriority(hi, &p));
    CHECK(p == greatest);
    OK(hipStreamGetPriority(lo, &p));
    CHECK(p == least);
    OK(hipStreamGetFlags(nb, &f));
    CHECK(f == hipStreamNonBlocking);
    OK(hipStreamGetFlags(hi, &f));
    CHECK(f == hipStreamDefault);
    CHECK(hipStreamCreateWithFlags(&nb, 0x80) == hipErrorInvalidValue);
    // CU mask: CUs 0..3 only.
    hipStream_t cu;
    uint32_t mask[1] = {0xf}, got[32];
    memset(got, 0xff, sizeof got);
    OK(hipExtStreamCreateWithCUMask(&cu, 1, mask));
    CHECK(hipExtStreamGetCUMask(cu, 1, got) == hipErrorInvalidValue);  // too small for the GPU
    OK(hipExtStreamGetCUMask(cu, 32, got));
    CHECK(got[0] == 0xf && got[1] == 0 && got[31] == 0);
    OK(hipStreamSynchronize(cu));
    OK(hipStreamDestroy(cu));
    OK(hipStreamDestroy(hi));
    OK(hipStreamDestroy(lo));
    OK(hipStreamDestroy(nb));
    // Destroyed handles stay invalid, never a crash.
    CHECK(hipStreamQuery(hi) == hipErrorInvalidHandle);
    CHECK(hipStreamDestroy(hi) == hipErrorInvalidHandle);
    CHECK(hipStreamSynchronize(lo) == hipErrorInvalidHandle);
}

static void wait_write_values() {
    uint32_t *flag, *out;
    uint64_t *flag64, *out64;
    OK(hipHostMalloc((void **)&flag, 4096, 0));
    OK(hipHostMalloc((void **)&out, 4096, 0));
    flag64 = (uint64_t *)(flag + 2);
    out64 = (uint64_t *)(out + 2);
    *flag = 0;
    *out = 0;
    *flag64 = 0;
    *out64 = 0;
    hipStream_t a, b;
    OK(hipStreamCreateWithFlags(&a, hipStreamNonBlocking));
    OK(hipStreamCreateWithFlags(&b, hipStreamNonBlocking));
    OK(hipStreamWaitValue32(a, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    OK(hipStreamWriteValue32(a, out, 42, 0));
    OK(hipStreamWaitValue64(a, flag64, 0x100000000ull, hipStreamWaitValueGte, ~0ull));
    OK(hipStreamWriteValue64(a, out64, 0x1234567890ull, 0));
    CHECK(hipStreamQuery(a) == hipErrorNotReady);
    CHECK(*out == 0);
    OK(hipStreamWriteValue32(b, flag, 1, 0));  // releases the first wait from another stream
    OK(hipStreamSynchronize(b));
    for (int i = 0; i < 2000 && __atomic_load_n(out, __ATOMIC_ACQUIRE) != 42; i++) usleep(1000);
    CHECK(__atomic_load_n(out, __ATOMIC_ACQUIRE) == 42);
    CHECK(*out64 == 0);  // still held by the 64-bit wait
    CHECK(hipStreamQuery(a) == hipErrorNotReady);
    __atomic_store_n(flag64, 0x100000001ull, __ATOMIC_RELEASE);  // host releases it
    OK(hipStreamSynchronize(a));
    CHECK(*out64 == 0x1234567890ull);
    OK(hipStreamQuery(a));
    // Reserved flags are ignored, as the seed says; a bad handle is an error.
    OK(hipStreamWriteValue32(a, out, 5, 7));
    OK(hipStreamSynchronize(a));
    CHECK(*out == 5);
    CHECK(hipStreamWriteValue32(foreign(), out, 1, 0) == hipErrorInvalidHandle);
    OK(hipStreamDestroy(a));
    OK(hipStreamDestroy(b));
    OK(hipHostFree(flag));
    OK(hipHostFree(out));
}

static void events() {
    hipStream_t s1, s2;
    OK(hipStreamCreateWithFlags(&s1, hipStreamNonBlocking));
    OK(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking));
    uint32_t *flag, *out;
    OK(hipExtMallocWithFlags((void **)&flag, 8, hipMallocSignalMemory));
    OK(hipExtMallocWithFlags((void **)&out, 8, hipMallocSignalMemory));
    *flag = 0;
    *out = 0;
    hipEvent_t start, stop, e, nt;
    OK(hipEventCreate(&start));
    OK(hipEventCreate(&stop));
    OK(hipEventCreateWithFlags(&e, hipEventDefault));
    OK(hipEventCreateWithFlags(&nt, hipEventDisableTiming));
    OK(hipEventQuery(e));  // never recorded: complete
    // s2 waits for e, recorded on s1 behind a gate.
    OK(hipEventRecord(start, s1));
    OK(hipStreamWaitValue32(s1, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    OK(hipEventRecord(e, s1));
    OK(hipEventRecord(stop, s1));
    OK(hipStreamWaitEvent(s2, e, 0));
    OK(hipStreamWriteValue32(s2, out, 5, 0));
    CHECK(hipEventQuery(e) == hipErrorNotReady);
    CHECK(hipStreamQuery(s2) == hipErrorNotReady);
    CHECK(*out == 0);
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(s2));
    CHECK(*out == 5);
    OK(hipEventSynchronize(stop));
    OK(hipEventQuery(e));
    float ms = -1;
    OK(hipEventElapsedTime(&ms, start, stop));
    CHECK(ms >= 0);
    OK(hipEventRecord(nt, s1));
    OK(hipEventSynchronize(nt));
    CHECK(hipEventElapsedTime(&ms, start, nt) != hipSuccess);
    CHECK(hipEventElapsedTime(NULL, start, stop) == hipErrorInvalidValue);
    OK(hipEventDestroy(e));
    CHECK(hipEventQuery(e) == hipErrorInvalidHandle);
    CHECK(hipEventRecord(e, s1) == hipErrorInvalidHandle);
    CHECK(hipEventDestroy(e) == hipErrorInvalidHandle);
    CHECK(hipEventSynchronize((hipEvent_t)s1) == hipErrorInvalidHandle);  // a stream is no event
    OK(hipEventDestroy(start));
    OK(hipEventDestroy(stop));
    OK(hipEventDestroy(nt));
    OK(hipStreamDestroy(s1));
    OK(hipStreamDestroy(s2));
    OK(hipFree(flag));
    OK(hipFree(out));
}

struct Log {
    std::atomic<int> n{0};
    int order[8];
    hipStream_t seen[8];
    hipError_t status[8];
};
struct Ticket {
    Log *log;
    int id;
};
static void cb(hipStream_t s, hipError_t st, void *user) {
    Ticket *t = (Ticket *)user;
    int i = t->log->n.load();
    t->log->order[i] = t->id;
    t->log->seen[i] = s;
    t->log->status[i] = st;
    t->log->n.store(i + 1);
}

static void callbacks() {
    hipStream_t s;
    OK(hipStreamCreate(&s));
    uint32_t *flag;
    OK(hipExtMallocWithFlags((void **)&flag, 8, hipMallocSignalMemory));
    *flag = 0;
    Log log;
    Ticket t1{&log, 1}, t2{&log, 2}, t3{&log, 3};
    OK(hipStreamWaitValue32(s, flag, 1, hipStreamWaitValueEq, 0xffffffff));
    OK(hipStreamAddCallback(s, cb, &t1, 0));
    OK(hipStreamWriteValue32(s, flag, 2, 0));
    OK(hipStreamAddCallback(s, cb, &t2, 0));
    OK(hipStreamAddCallback(s, cb, &t3, 0));
    CHECK(hipStreamAddCallback(s, cb, &t3, 1) == hipErrorInvalidValue);
    CHECK(hipStreamAddCallback(s, NULL, &t3, 0) == hipErrorInvalidValue);
    usleep(20000);
    CHECK(log.n.load() == 0);  // gated by the wait
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(s));
    CHECK(log.n.load() == 3);
    CHECK(log.order[0] == 1 && log.order[1] == 2 && log.order[2] == 3);
    for (int i = 0; i < 3; i++) CHECK(log.seen[i] == s && log.status[i] == hipSuccess);
    CHECK(*flag == 2);
    OK(hipStreamDestroy(s));
    OK(hipFree(flag));
}

static void memory() {
    const size_t n = 1 << 16;
    unsigned char *d, *h, *h2;
    OK(hipMalloc((void **)&d, n));
    OK(hipHostMalloc((void **)&h, n, hipHostMallocDefault));
    OK(hipHostMalloc((void **)&h2, n, 0));
    OK(hipMemset(d, 0x5a, n));
    OK(hipMemcpy(h, d, n, hipMemcpyDeviceToHost));
    for (size_t i = 0; i < n; i++) CHECK(h[i] == 0x5a);
    for (size_t i = 0; i < n; i++) h[i] = (unsigned char)(i * 7);
    OK(hipMemcpy(d, h, n, hipMemcpyHostToDevice));
    OK(hipMemcpy(h2, d, n, hipMemcpyDefault));
    CHECK(memcmp(h, h2, n) == 0);
    hipStream_t s;
    OK(hipStreamCreate(&s));
    OK(hipMemsetAsync(d + 16, 0x11, 32, s));
    OK(hipMemcpyAsync(h2, d, 64, hipMemcpyDeviceToHost, s));
    OK(hipStreamSynchronize(s));
    CHECK(h2[15] == (unsigned char)(15 * 7) && h2[16] == 0x11 && h2[47] == 0x11 &&
          h2[48] == (unsigned char)(48 * 7));
    hipPointerAttribute_t at;
    OK(hipPointerGetAttributes(&at, d + 100));
    CHECK(at.memoryType == hipMemoryTypeDevice && at.device == 0);
    CHECK(at.devicePointer == (void *)(d + 100) && at.hostPointer == NULL && at.isManaged == 0);
    OK(hipPointerGetAttributes(&at, h));
    CHECK(at.memoryType == hipMemoryTypeHost);
    // Managed and stream-ordered memory are this library's allocations too.
    void *mp = NULL;
    OK(hipMallocManaged(&mp, 4096, hipMemAttachGlobal));
    OK(hipPointerGetAttributes(&at, (char *)mp + 8));
    CHECK(at.isManaged == 1 && at.memoryType == hipMemoryTypeHost && at.device == 0);
    CHECK(at.hostPointer == (char *)mp + 8 && at.devicePointer == (char *)mp + 8);
    OK(hipFree(mp));
    CHECK(hipPointerGetAttributes(&at, (char *)mp + 8) == hipErrorInvalidValue);
    void *ap = NULL;
    OK(hipMallocAsync(&ap, 4096, s));
    OK(hipPointerGetAttributes(&at, (char *)ap + 100));
    CHECK(at.memoryType == hipMemoryTypeDevice && at.device == 0 && at.isManaged == 0);
    CHECK(at.devicePointer == (char *)ap + 100 && at.hostPointer == NULL);
    OK(hipFreeAsync(ap, s));
    OK(hipStreamSynchronize(s));
    int stack;
    CHECK(hipPointerGetAttributes(&at, &stack) == hipErrorInvalidValue);
    // Free: null is fine, foreign or wrong-kind pointers are errors, double free too.
    OK(hipFree(NULL));
    CHECK(hipFree(&stack) == hipErrorInvalidValue);
    CHECK(hipHostFree(d) == hipErrorInvalidValue);
    OK(hipFree(d));
    CHECK(hipFree(d) == hipErrorInvalidValue);
    OK(hipHostFree(h));
    OK(hipHostFree(h2));
    CHECK(hipMalloc(NULL, 16) == hipErrorInvalidValue);
    OK(hipStreamDestroy(s));
}

static void host_register() {
    const size_t n = 1 << 16;
    unsigned char *a, *b, *d;
    CHECK(posix_memalign((void **)&a, 4096, n) == 0 && posix_memalign((void **)&b, 4096, n) == 0);
    for (size_t i = 0; i < n; i++) a[i] = (unsigned char)(i ^ 0x5c), b[i] = 0;
    OK(hipHostRegister(a, n, hipHostRegisterDefault));
    OK(hipHostRegister(b, n, hipHostRegisterMapped));
    OK(hipHostRegister(a, n, 0));  // registered already: nothing changes (CLR 5.2, measured)
    CHECK(hipHostRegister(a, n, hipHostRegisterIoMemory) == hipErrorNotSupported);
    OK(hipMalloc((void **)&d, n));
    OK(hipMemcpy(d, a, n, hipMemcpyHostToDevice));
    OK(hipMemcpy(b, d, n, hipMemcpyDeviceToHost));
    CHECK(memcmp(a, b, n) == 0);
    unsigned f = 99;
    OK(hipHostGetFlags(&f, b + 10));
    CHECK(f == hipHostRegisterMapped);
    void *dp = NULL;
    OK(hipHostGetDevicePointer(&dp, b + 10, 0));
    CHECK(dp == (void *)(b + 10));
    OK(hipHostGetDevicePointer(&dp, d + 3, 0));  // any buffer, as CLR
    CHECK(dp == (void *)(d + 3));
    OK(hipHostUnregister(a));
    OK(hipHostUnregister(b));
    CHECK(hipHostUnregister(a) == hipErrorHostMemoryNotRegistered);
    OK(hipFree(d));
    free(a);
    free(b);
}

static void malloc_async() {
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    unsigned char *p = NULL, *h;
    OK(hipHostMalloc((void **)&h, 4096, 0));
    OK(hipMallocAsync((void **)&p, 4096, s));
    CHECK(p != NULL);
    OK(hipMemsetAsync(p, 0x7e, 4096, s));
    OK(hipMemcpyAsync(h, p, 4096, hipMemcpyDeviceToHost, s));
    OK(hipFreeAsync(p, s));
    OK(hipStreamSynchronize(s));
    for (int i = 0; i < 4096; i++) CHECK(h[i] == 0x7e);
    CHECK(hipFreeAsync(NULL, s) == hipErrorInvalidValue);
    CHECK(hipMallocAsync((void **)&p, 64, foreign()) == hipErrorInvalidHandle);
    OK(hipStreamDestroy(s));
    OK(hipHostFree(h));
}

static void pools() {
    hipMemPool_t def1, def2, pool;
    OK(hipDeviceGetDefaultMemPool(&def1, 0));
    OK(hipDeviceGetDefaultMemPool(&def2, 0));
    CHECK(def1 == def2);
    CHECK(hipDeviceGetDefaultMemPool(&def2, 99) == hipErrorInvalidDevice);
    hipMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = hipMemAllocationTypeInvalid;
    props.handleTypes = hipMemHandleTypeNone;
    props.location.type = hipMemLocationTypeDevice;
    props.location.id = 0;
    CHECK(hipMemPoolCreate(&pool, &props) == hipErrorInvalidValue);
    props.allocType = hipMemAllocationTypePinned;
    OK(hipMemPoolCreate(&pool, &props));
    int reuse = -1;
    OK(hipMemPoolGetAttribute(pool, hipMemPoolReuseFollowEventDependencies, &reuse));
    CHECK(reuse == 1);
    reuse = 0;
    OK(hipMemPoolSetAttribute(pool, hipMemPoolReuseAllowOpportunistic, &reuse));
    reuse = -1;
    OK(hipMemPoolGetAttribute(pool, hipMemPoolReuseAllowOpportunistic, &reuse));
    CHECK(reuse == 0);
    uint64_t thr = 1 << 20, v = 0;
    OK(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &thr));
    OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReleaseThreshold, &v));
    CHECK(v == 1 << 20);
    CHECK(hipMemPoolSetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &v) == hipErrorInvalidValue);
    hipStream_t s;
    OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
    unsigned char *p = NULL, *h;
    OK(hipHostMalloc((void **)&h, 1000, 0));
    OK(hipMallocFromPoolAsync((void **)&p, 1000, pool, s));
    OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &v));
    CHECK(v >= 1000);
    uint64_t reserved = 0;
    OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &reserved));
    CHECK(reserved >= v);
    OK(hipMemsetAsync(p, 0x33, 1000, s));
    OK(hipMemcpyAsync(h, p, 1000, hipMemcpyDeviceToHost, s));
    OK(hipFreeAsync(p, s));
    OK(hipStreamSynchronize(s));
    CHECK(h[0] == 0x33 && h[999] == 0x33);
    OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &v));
    CHECK(v == 0);
    OK(hipMemPoolTrimTo(pool, 0));
    OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReservedMemCurrent, &v));
    CHECK(v == 0);
    hipMemAccessDesc desc;
    desc.location.type = hipMemLocationTypeDevice;
    desc.location.id = 0;
    desc.flags = hipMemAccessFlagsProtReadWrite;
    OK(hipMemPoolSetAccess(pool, &desc, 1));
    hipMemAccessFlags f = hipMemAccessFlagsProtNone;
    OK(hipMemPoolGetAccess(&f, pool, &desc.location));
    CHECK(f == hipMemAccessFlagsProtReadWrite);
    // The current pool of the device serves hipMallocAsync.
    hipMemPool_t cur = nullptr;
    OK(hipDeviceGetMemPool(&cur, 0));
    CHECK(cur == def1);
    OK(hipDeviceSetMemPool(0, pool));
    OK(hipDeviceGetMemPool(&cur, 0));
    CHECK(cur == pool);
    CHECK(hipDeviceGetMemPool(&cur, 99) == hipErrorInvalidDevice);
    OK(hipMallocAsync((void **)&p, 4096, s));
    OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &v));
    CHECK(v >= 4096);
    OK(hipFreeAsync(p, s));
    OK(hipStreamSynchronize(s));
    OK(hipDeviceSetMemPool(0, def1));
    OK(hipDeviceGetMemPool(&cur, 0));
    CHECK(cur == def1);
    OK(hipMemPoolDestroy(pool));
    CHECK(hipMemPoolGetAttribute(pool, hipMemPoolAttrUsedMemCurrent, &v) == hipErrorInvalidHandle);
    CHECK(hipMemPoolDestroy(pool) == hipErrorInvalidHandle);
    CHECK(hipMallocFromPoolAsync((void **)&p, 64, pool, s) == hipErrorInvalidHandle);
    OK(hipStreamDestroy(s));
    OK(hipHostFree(h));
}

static void managed() {
    const size_t n = 1 << 16;
    unsigned char *m = NULL;
    OK(hipMallocManaged((void **)&m, n, hipMemAttachGlobal));
    CHECK(m != NULL);
    memset(m, 1, n);  // host access
    int v = -7;
    OK(hipMemAdvise(m, n, hipMemAdviseSetPreferredLocation, 0));
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributePreferredLocation, m, n));
    CHECK(v == 0);
    OK(hipMemAdvise(m, n, hipMemAdviseSetReadMostly, 0));
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeReadMostly, m, n));
    CHECK(v == 1);
    OK(hipMemAdvise(m, n, hipMemAdviseUnsetReadMostly, 0));
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeReadMostly, m, n));
    CHECK(v == 0);
    CHECK(hipMemRangeGetAttribute(&v, 3, hipMemRangeAttributeReadMostly, m, n) == hipErrorInvalidValue);
    hipStream_t s;
    OK(hipStreamCreate(&s));
    OK(hipMemPrefetchAsync(m, n, 0, s));
    OK(hipMemsetAsync(m, 9, 4096, s));  // the GPU writes the prefetched pages
    OK(hipStreamSynchronize(s));
    OK(hipMemRangeGetAttribute(&v, 4, hipMemRangeAttributeLastPrefetchLocation, m, n));
    CHECK(v == 0);
    OK(hipMemPrefetchAsync(m, n, hipCpuDeviceId, s));
    OK(hipStreamSynchronize(s));
    CHECK(m[0] == 9 && m[4095] == 9 && m[4096] == 1);
    int last = 5, pref = 5;
    void *data[2] = {&last, &pref};
    size_t sizes[2] = {4, 4};
    hipMemRangeAttribute attrs[2] = {hipMemRangeAttributeLastPrefetchLocation,
                                     hipMemRangeAttributePreferredLocation};
    OK(hipMemRangeGetAttributes(data, sizes, attrs, 2, m, n));
    CHECK(last == hipCpuDeviceId && pref == 0);
    OK(hipStreamAttachMemAsync(s, m, 0, hipMemAttachSingle));
    OK(hipStreamAttachMemAsync(s, m, 0, hipMemAttachGlobal));
    CHECK(hipStreamAttachMemAsync(s, m, 0, 0x8) == hipErrorInvalidValue);
    CHECK(hipStreamAttachMemAsync(foreign(), m, 0, hipMemAttachGlobal) == hipErrorInvalidHandle);
    OK(hipStreamSynchronize(s));
    OK(hipStreamDestroy(s));
    OK(hipFree(m));
    CHECK(hipFree(m) == hipErrorInvalidValue);
}

static void vmm() {
    hipMemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = hipMemAllocationTypePinned;
    prop.requestedHandleType = hipMemHandleTypeNone;
    prop.location.type = hipMemLocationTypeDevice;
    prop.location.id = 0;
    size_t gmin = 0, grec = 0;
    OK(hipMemGetAllocationGranularity(&gmin, &prop, hipMemAllocationGranularityMinimum));
    OK(hipMemGetAllocationGranularity(&grec, &prop, hipMemAllocationGranularityRecommended));
    CHECK(gmin > 0 && grec >= gmin && grec % gmin == 0);
    void *va = NULL;
    OK(hipMemAddressReserve(&va, 2 * grec, 0, NULL, 0));
    CHECK(va != NULL && (uintptr_t)va % grec == 0);
    hipMemGenericAllocationHandle_t h;
    OK(hipMemCreate(&h, grec, &prop, 0));
    OK(hipMemMap(va, grec, 0, h, 0));
    hipMemAccessDesc d;
    d.location = prop.location;
    d.flags = hipMemAccessFlagsProtReadWrite;
    OK(hipMemSetAccess(va, grec, &d, 1));
    unsigned long long f = 0;
    OK(hipMemGetAccess(&f, &prop.location, va));
    CHECK(f == hipMemAccessFlagsProtReadWrite);
    OK(hipMemset(va, 0x42, grec));
    unsigned char *b = (unsigned char *)va;
    CHECK(b[0] == 0x42 && b[grec - 1] == 0x42);
    CHECK(hipMemMap(va, grec, 0, (hipMemGenericAllocationHandle_t)foreign(), 0) == hipErrorInvalidValue);
    OK(hipMemUnmap(va, grec));
    OK(hipMemRelease(h));
    CHECK(hipMemRelease(h) == hipErrorInvalidValue);
    OK(hipMemAddressFree(va, 2 * grec));
    prop.compressionType = 1;
    CHECK(hipMemCreate(&h, grec, &prop, 0) == hipErrorNotSupported);
}

int main() {
    errors_and_library();
    devices();
    streams();
    wait_write_values();
    events();
    callbacks();
    memory();
    host_malloc_flags();
    host_register();
    malloc_async();
    pools();
    managed();
    vmm();
    OK(hipDeviceSynchronize());
    printf("api: %d checks passed\n", checks.load());
    return 0;
}
