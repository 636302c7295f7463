// The driver-style entry points (hipMemcpyHtoD and kin, hipMemsetD8/D16/D32,
// hipMemGetAddressRange, hipInit, hipDeviceGetName/TotalMem/ComputeCapability,
// hipModuleLoadDataEx): each must be exported (the program would not load otherwise) and do
// the work of the call it wraps: values read back, error codes as the wrapped call gives.
#include <string.h>
#include <stdint.h>
#include "check.h"

static void copies(hipStream_t s) {
    int h[64], back[64];
    for (int i = 0; i < 64; i++) h[i] = i * 3 + 1;
    int *d = nullptr, *d2 = nullptr;
    OK(hipMalloc((void**)&d, sizeof h));
    OK(hipMalloc((void**)&d2, sizeof h));
    OK(hipMemcpyHtoD(d, h, sizeof h));
    OK(hipMemcpyDtoD(d2, d, sizeof h));
    memset(back, 0, sizeof back);
    OK(hipMemcpyDtoH(back, d2, sizeof h));
    CHECK(memcmp(back, h, sizeof h) == 0);
    for (int i = 0; i < 64; i++) h[i] = -i;
    OK(hipMemcpyHtoDAsync(d, h, sizeof h, s));
    OK(hipMemcpyDtoDAsync(d2, d, sizeof h, s));
    memset(back, 0, sizeof back);
    OK(hipMemcpyDtoHAsync(back, d2, sizeof h, s));
    OK(hipStreamSynchronize(s));
    CHECK(memcmp(back, h, sizeof h) == 0);
    // hipMemcpyWithStream returns with the copy done.
    memset(back, 0, sizeof back);
    OK(hipMemcpyWithStream(back, d, sizeof h, hipMemcpyDeviceToHost, s));
    CHECK(memcmp(back, h, sizeof h) == 0);
    // Errors are the wrapped call's: two host addresses with a device kind, a size past
    // the allocation.
    int x = 0, y = 0;
    CHECK(hipMemcpyHtoD(&x, &y, 4) == hipErrorInvalidValue);
    CHECK(hipPeekAtLastError() == hipErrorInvalidValue);
    CHECK(hipMemcpyWithStream(&x, &y, 4, hipMemcpyDeviceToHost, s) == hipErrorInvalidValue);
    CHECK(hipMemcpyDtoD(d2, d, sizeof h + 4) == hipErrorInvalidValue);
    CHECK(hipGetLastError() == hipErrorInvalidValue);
    OK(hipFree(d));
    OK(hipFree(d2));
}

static void fills(hipStream_t s) {
    uint8_t* d = nullptr;
    uint8_t b[64];
    uint16_t w[32];
    uint32_t q[16];
    OK(hipMalloc((void**)&d, 64));
    // D8: counts are bytes; any alignment.
    OK(hipMemsetD8(d, 0x5a, 64));
    OK(hipMemsetD8Async(d + 3, 0xa7, 5, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(b, d, 64, hipMemcpyDeviceToHost));
    for (int i = 0; i < 64; i++) CHECK(b[i] == (i >= 3 && i < 8 ? 0xa7 : 0x5a));
    // D16: counts are 16-bit elements.
    OK(hipMemsetD16(d, 0x1234, 32));
    OK(hipMemcpy(w, d, 64, hipMemcpyDeviceToHost));
    for (int i = 0; i < 32; i++) CHECK(w[i] == 0x1234);
    OK(hipMemsetD16Async(d + 8, 0xbeef, 4, s));
    // Equal bytes: a byte fill, any even count and alignment.
    OK(hipMemsetD16Async(d + 2, 0x7777, 3, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(w, d, 64, hipMemcpyDeviceToHost));
    for (int i = 0; i < 32; i++)
        CHECK(w[i] == (i >= 1 && i < 4 ? 0x7777 : i >= 4 && i < 8 ? 0xbeef : 0x1234));
    // A pattern of two different bytes at a 2-aligned start or an odd count is not done.
    CHECK(hipMemsetD16(d + 2, 0x1234, 2) == hipErrorNotSupported);
    CHECK(hipMemsetD16Async(d, 0x1234, 3, s) == hipErrorNotSupported);
    CHECK(hipGetLastError() == hipErrorNotSupported);
    OK(hipMemsetD16(d + 2, 0x1234, 0));
    OK(hipMemcpy(w, d, 8, hipMemcpyDeviceToHost));
    CHECK(w[0] == 0x1234 && w[1] == 0x7777 && w[3] == 0x7777);
    // D32: counts are dwords; past the allocation is InvalidValue.
    OK(hipMemsetD32(d, (int)0xdeadbeef, 16));
    OK(hipMemcpy(q, d, 64, hipMemcpyDeviceToHost));
    for (int i = 0; i < 16; i++) CHECK(q[i] == 0xdeadbeef);
    CHECK(hipMemsetD32(d, 1, 17) == hipErrorInvalidValue);
    CHECK(hipMemsetD16(d, 0x1234, 34) == hipErrorInvalidValue);
    CHECK(hipMemsetD8(d, 1, 65) == hipErrorInvalidValue);
    CHECK(hipGetLastError() == hipErrorInvalidValue);
    OK(hipFree(d));
}

static void address_range(hipStream_t) {
    char* d = nullptr;
    OK(hipMalloc((void**)&d, 1000));
    hipDeviceptr_t base = nullptr;
    size_t size = 0;
    OK(hipMemGetAddressRange(&base, &size, d + 10));
    CHECK(base == d && size == 1000);
    base = nullptr;
    OK(hipMemGetAddressRange(&base, &size, d + 999));
    CHECK(base == d);
    int x;
    base = (hipDeviceptr_t)1;
    size = 7;
    CHECK(hipMemGetAddressRange(&base, &size, &x) == hipErrorInvalidDevicePointer);
    CHECK(base == (hipDeviceptr_t)1 && size == 7);
    CHECK(hipMemGetAddressRange(&base, &size, d + 1000) == hipErrorInvalidDevicePointer);
    OK(hipFree(d));
}

static void device_queries(hipStream_t) {
    OK(hipInit(0));
    CHECK(hipInit(1) == hipErrorInvalidValue);
    CHECK(hipPeekAtLastError() == hipErrorInvalidValue);
    hipDeviceProp_t p;
    OK(hipGetDeviceProperties(&p, 0));
    char name[300];
    memset(name, 'x', sizeof name);
    OK(hipDeviceGetName(name, sizeof name, 0));
    CHECK(strcmp(name, p.name) == 0);
    // Exactly the name and its NUL fit; one byte less is InvalidValue with the buffer
    // untouched (CLR 5.2, measured).
    size_t n = strlen(p.name);
    memset(name, 'x', sizeof name);
    OK(hipDeviceGetName(name, (int)n + 1, 0));
    CHECK(strcmp(name, p.name) == 0 && name[n + 1] == 'x');
    memset(name, 'x', sizeof name);
    CHECK(hipDeviceGetName(name, (int)n, 0) == hipErrorInvalidValue);
    CHECK(name[0] == 'x');
    CHECK(hipDeviceGetName(name, 0, 0) == hipErrorInvalidValue);
    CHECK(hipDeviceGetName(nullptr, 8, 0) == hipErrorInvalidValue);
    CHECK(hipDeviceGetName(name, 8, 99) == hipErrorInvalidDevice);
    size_t total = 0;
    OK(hipDeviceTotalMem(&total, 0));
    CHECK(total == p.totalGlobalMem && total > 0);
    CHECK(hipDeviceTotalMem(&total, -1) == hipErrorInvalidDevice);
    CHECK(hipDeviceTotalMem(nullptr, 0) == hipErrorInvalidValue);
    int major = -1, minor = -1;
    OK(hipDeviceComputeCapability(&major, &minor, 0));
    CHECK(major == p.major && minor == p.minor && major > 0);
    CHECK(hipDeviceComputeCapability(&major, &minor, 99) == hipErrorInvalidDevice);
    CHECK(hipDeviceComputeCapability(nullptr, &minor, 0) == hipErrorInvalidValue);
    // hipModuleLoadDataEx is hipModuleLoadData: the same error for an image that is no
    // code object, options or not.
    hipModule_t m = nullptr;
    static const char junk[64] = "not an ELF";
    hipJitOption opt = hipJitOptionMaxRegisters;
    void* val = (void*)(uintptr_t)32;
    hipError_t plain = hipModuleLoadData(&m, junk);
    CHECK(plain != hipSuccess);
    CHECK(hipModuleLoadDataEx(&m, junk, 1, &opt, &val) == plain);
    CHECK(hipModuleLoadDataEx(&m, junk, 0, nullptr, nullptr) == plain);
    CHECK(hipModuleLoadDataEx(nullptr, junk, 0, nullptr, nullptr) == hipErrorInvalidValue);
    CHECK(hipGetLastError() == hipErrorInvalidValue);
}

// A failed hipPointerGetAttributes zeroes the struct (CLR 5.2), so a program that ignores
// the code reads memoryType 0, not what the struct held before.
static void failed_queries(hipStream_t) {
    int x = 0;
    hipPointerAttribute_t a;
    memset(&a, 0x5b, sizeof a);
    CHECK(hipPointerGetAttributes(&a, &x) == hipErrorInvalidValue);
    CHECK(hipPeekAtLastError() == hipErrorInvalidValue);
    hipPointerAttribute_t zero;
    memset(&zero, 0, sizeof zero);
    CHECK(memcmp(&a, &zero, sizeof a) == 0);
    void* d = nullptr;
    OK(hipMalloc(&d, 64));
    memset(&a, 0x5b, sizeof a);
    OK(hipPointerGetAttributes(&a, d));
    CHECK(a.memoryType == hipMemoryTypeDevice && a.devicePointer == d && a.hostPointer == nullptr);
    OK(hipFree(d));
    memset(&a, 0x5b, sizeof a);
    CHECK(hipPointerGetAttributes(&a, d) == hipErrorInvalidValue);
    CHECK(a.memoryType == 0 && a.devicePointer == nullptr);
    // A null pool is InvalidValue (the header's documented code, CLR 5.2's, measured); a
    // destroyed one stays InvalidHandle (kfdrt's check: CLR 5.2 does not answer so).
    uint64_t v = 0;
    int reuse = 1;
    CHECK(hipMemPoolGetAttribute(nullptr, hipMemPoolAttrReleaseThreshold, &v) ==
          hipErrorInvalidValue);
    CHECK(hipPeekAtLastError() == hipErrorInvalidValue);
    CHECK(hipMemPoolSetAttribute(nullptr, hipMemPoolAttrReleaseThreshold, &v) ==
          hipErrorInvalidValue);
    CHECK(hipMemPoolSetAttribute(nullptr, hipMemPoolReuseAllowOpportunistic, &reuse) ==
          hipErrorInvalidValue);
    CHECK(hipMemPoolTrimTo(nullptr, 0) == hipErrorInvalidValue);
    hipMemPool_t pool = nullptr;
    hipMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = hipMemAllocationTypePinned;
    props.location.type = hipMemLocationTypeDevice;
    props.location.id = 0;
    OK(hipMemPoolCreate(&pool, &props));
    OK(hipMemPoolGetAttribute(pool, hipMemPoolAttrReleaseThreshold, &v));
    OK(hipMemPoolTrimTo(pool, 0));
    OK(hipMemPoolDestroy(pool));
    CHECK(hipMemPoolTrimTo(pool, 0) == hipErrorInvalidHandle);
}

int main(int argc, char** argv) {
    hipStream_t s;
    OK(hipStreamCreate(&s));
    struct {
        const char* name;
        void (*f)(hipStream_t);
    } sections[] = {
        {"copies", copies},
        {"fills", fills},
        {"address_range", address_range},
        {"device_queries", device_queries},
        {"failed_queries", failed_queries},
    };
    for (auto& t : sections)
        if (argc < 2 || strcmp(argv[1], t.name) == 0) t.f(s);
    OK(hipStreamDestroy(s));
    printf("driver_api checks passed: %d\n", checks.load());
    return 0;
}
