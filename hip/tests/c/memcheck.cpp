// What copies, fills and stream memory operations accept, as Debian's CLR 5.2 answers them
// (measured under `kfdrt emu-run --device emu:mi250x`): an address in no allocation
// (stack, malloc, 0x1000) is InvalidValue at once and the stream stays usable; sizes are
// checked against the size asked for, not the page-rounded allocation; hipMemcpy's kind
// must be HostToHost or Default when neither side is an allocation; hipHostRegister takes
// any pointer and size. Every refused call must leave no trace: the streams' later work
// runs and copies the right values.
#include <string.h>
#include <stdint.h>
#include <vector>
#include "check.h"

extern "C" hipError_t hipMemset_spt(void* dst, int value, size_t sizeBytes);
extern "C" hipError_t hipMemcpy_spt(void* dst, const void* src, size_t sizeBytes,
                                    hipMemcpyKind kind);

// `s` still runs work: a fill of a fresh 256-byte device buffer, waited for and read back.
static void usable(hipStream_t s) {
    unsigned char* d = nullptr;
    unsigned char out[256];
    OK(hipMalloc((void**)&d, sizeof out));
    OK(hipMemsetAsync(d, 0x3c, sizeof out, s));
    OK(hipStreamSynchronize(s));
    OK(hipDeviceSynchronize());
    OK(hipMemcpy(out, d, sizeof out, hipMemcpyDeviceToHost));
    for (unsigned char c : out) CHECK(c == 0x3c);
    OK(hipFree(d));
    OK(hipGetLastError());
}

// (2) Unknown addresses are refused by every fill and stream memory operation.
static void unknown_addresses(hipStream_t s) {
    int stack_int = 0;
    char stack_buf[64];
    char* heap = (char*)malloc(1 << 20);
    void* bad = (void*)(uintptr_t)0x1000;
    for (hipStream_t st : {(hipStream_t)0, s}) {
        CHECK(hipStreamWriteValue32(st, &stack_int, 5, 0) == hipErrorInvalidValue);
        CHECK(hipStreamWriteValue32(st, bad, 5, 0) == hipErrorInvalidValue);
        CHECK(hipStreamWriteValue64(st, heap, 5, 0) == hipErrorInvalidValue);
        CHECK(hipStreamWaitValue32(st, &stack_int, 1, hipStreamWaitValueEq, ~0u) ==
              hipErrorInvalidValue);
        CHECK(hipStreamWaitValue64(st, heap + 8, 1, hipStreamWaitValueGte, ~0ull) ==
              hipErrorInvalidValue);
        CHECK(hipMemsetAsync(stack_buf, 1, sizeof stack_buf, st) == hipErrorInvalidValue);
        CHECK(hipMemsetD32Async(heap, 1, 16, st) == hipErrorInvalidValue);
        CHECK(hipMemsetAsync(bad, 1, 16, st) == hipErrorInvalidValue);
        usable(st);
    }
    CHECK(hipMemset(stack_buf, 1, sizeof stack_buf) == hipErrorInvalidValue);
    CHECK(hipMemset(heap, 1, 1 << 20) == hipErrorInvalidValue);
    CHECK(hipMemset_spt(stack_buf, 1, sizeof stack_buf) == hipErrorInvalidValue);
    CHECK(stack_int == 0);
    usable(0);
    usable(hipStreamPerThread);
    free(heap);
}

// (2) What the device does map keeps working: pinned and registered host memory.
static void host_memory_still_accepted(hipStream_t s) {
    unsigned* pinned = nullptr;
    OK(hipHostMalloc((void**)&pinned, 64, 0));
    memset(pinned, 0, 64);
    OK(hipStreamWriteValue32(s, pinned, 0x11, 0));
    OK(hipStreamWriteValue64(s, pinned + 2, 0x2200000022ull, 0));
    OK(hipStreamWaitValue32(s, pinned, 0x11, hipStreamWaitValueEq, ~0u));
    OK(hipMemsetAsync(pinned + 4, 0x7, 4, s));
    OK(hipStreamSynchronize(s));
    CHECK(pinned[0] == 0x11 && pinned[2] == 0x22 && pinned[3] == 0x22);
    CHECK(pinned[4] == 0x07070707);
    OK(hipHostFree(pinned));

    // Registered malloc memory, at an unaligned pointer (finding 5 too).
    char* m = (char*)malloc(10000);
    unsigned* r = (unsigned*)(m + 8);
    memset(m, 0, 10000);
    OK(hipHostRegister(r, 4000, 0));
    OK(hipStreamWriteValue32(s, r + 1, 0xabc, 0));
    OK(hipMemsetD32Async(r + 2, 0x5a5a5a5a, 4, s));
    OK(hipStreamSynchronize(s));
    CHECK(r[1] == 0xabc && r[2] == 0x5a5a5a5a && r[5] == 0x5a5a5a5a && r[6] == 0);
    // Past the 4000 bytes registered: refused, though the page is mapped.
    CHECK(hipMemsetAsync((char*)r + 4000, 0, 8, s) == hipErrorInvalidValue);
    CHECK(hipStreamWriteValue32(s, (char*)r + 4000, 1, 0) == hipErrorInvalidValue);
    OK(hipHostUnregister(r));
    // Unregistered: unknown again.
    CHECK(hipStreamWriteValue32(s, r, 1, 0) == hipErrorInvalidValue);
    usable(s);
    free(m);
}

// (3) hipMemcpy's kind against what the pointers are (CLR 5.2 IsHtoHMemcpyValid), and
// the device side's range checked before any host byte is read.
static void memcpy_kinds(hipStream_t s) {
    char buf[64], buf2[64];
    for (int i = 0; i < 64; i++) buf[i] = (char)i, buf2[i] = 0;
    CHECK(hipMemcpy((void*)(uintptr_t)0x10000, buf, 10, hipMemcpyHostToDevice) ==
          hipErrorInvalidValue);
    CHECK(hipMemcpy(buf2, buf, 10, hipMemcpyDeviceToHost) == hipErrorInvalidValue);
    CHECK(hipMemcpy(buf2, buf, 10, hipMemcpyDeviceToDevice) == hipErrorInvalidValue);
    CHECK(hipMemcpyAsync((void*)(uintptr_t)0x10000, buf, 10, hipMemcpyHostToDevice, s) ==
          hipErrorInvalidValue);
    CHECK(hipMemcpy_spt((void*)(uintptr_t)0x10000, buf, 10, hipMemcpyHostToDevice) ==
          hipErrorInvalidValue);
    CHECK(buf2[1] == 0);
    OK(hipMemcpy(buf2, buf, 10, hipMemcpyHostToHost));
    CHECK(buf2[9] == 9 && buf2[10] == 0);
    OK(hipMemcpy(buf2 + 10, buf + 10, 10, hipMemcpyDefault));
    CHECK(buf2[19] == 19 && buf2[20] == 0);
    // A device side: the kind is not what decides (CLR 5.2 neither).
    char* d = nullptr;
    OK(hipMalloc((void**)&d, 100));
    OK(hipMemcpy(d, buf, 64, hipMemcpyDeviceToHost));
    memset(buf2, 0, sizeof buf2);
    OK(hipMemcpy(buf2, d, 64, hipMemcpyHostToDevice));
    CHECK(memcmp(buf, buf2, 64) == 0);
    // 4 MiB from a 64-byte host buffer into a 100-byte device buffer: refused before the
    // host side is read (it used to read far past `buf` and crash).
    CHECK(hipMemcpy(d, buf, 4 << 20, hipMemcpyHostToDevice) == hipErrorInvalidValue);
    CHECK(hipMemcpyAsync(d, buf, 4 << 20, hipMemcpyHostToDevice, s) == hipErrorInvalidValue);
    CHECK(hipMemcpy(buf, d, 4 << 20, hipMemcpyDeviceToHost) == hipErrorInvalidValue);
    OK(hipFree(d));
    usable(s);
    usable(0);
}

// (4) Sizes against the size asked for (100 bytes), not the page behind it.
static void requested_sizes(hipStream_t s) {
    unsigned char* d = nullptr;
    unsigned char buf[256], out[100];
    for (int i = 0; i < 256; i++) buf[i] = (unsigned char)(i * 7);
    OK(hipMalloc((void**)&d, 100));
    CHECK(hipMemcpy(d, buf, 200, hipMemcpyHostToDevice) == hipErrorInvalidValue);
    CHECK(hipMemcpy(d, buf, 101, hipMemcpyHostToDevice) == hipErrorInvalidValue);
    CHECK(hipMemcpy(buf, d, 101, hipMemcpyDeviceToHost) == hipErrorInvalidValue);
    CHECK(hipMemcpy(d + 50, buf, 51, hipMemcpyHostToDevice) == hipErrorInvalidValue);
    CHECK(hipMemsetAsync(d, 1, 200, s) == hipErrorInvalidValue);
    CHECK(hipMemsetAsync(d, 1, 101, 0) == hipErrorInvalidValue);
    CHECK(hipMemset(d, 1, 101) == hipErrorInvalidValue);
    CHECK(hipMemsetD32Async(d, 1, 26, s) == hipErrorInvalidValue);
    // A stream memory operation needs its address inside (CLR checks no length there).
    CHECK(hipStreamWriteValue32(s, d + 100, 1, 0) == hipErrorInvalidValue);
    OK(hipMemcpy(d, buf, 100, hipMemcpyHostToDevice));
    OK(hipMemsetD32Async(d, 0x01010101, 25, s));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(out, d, 100, hipMemcpyDeviceToHost));
    for (unsigned char c : out) CHECK(c == 1);
    OK(hipMemcpy(d, buf, 100, hipMemcpyHostToDevice));
    OK(hipStreamWriteValue32(s, d + 96, 0xdeadbeef, 0));
    OK(hipStreamSynchronize(s));
    OK(hipMemcpy(out, d, 100, hipMemcpyDeviceToHost));
    CHECK(memcmp(out, buf, 96) == 0 && *(unsigned*)(out + 96) == 0xdeadbeef);
    // Zero sizes succeed whatever the pointer (CLR checks the size first).
    OK(hipMemset(nullptr, 1, 0));
    OK(hipMemsetAsync(nullptr, 1, 0, s));
    OK(hipMemsetD32Async(nullptr, 1, 0, s));
    OK(hipMemcpy(nullptr, buf, 0, hipMemcpyHostToDevice));
    OK(hipFree(d));
    usable(s);
}

// (5) hipHostRegister of any pointer and size; the registration is known by the caller's
// pointer and covers the caller's bytes.
static void host_register_any_range(hipStream_t s) {
    char* m = (char*)malloc(3 * 4096);
    for (int i = 0; i < 3 * 4096; i++) m[i] = (char)(i * 3);
    char* p = m + 8;
    OK(hipHostRegister(p, 4000, 0));
    hipPointerAttribute_t at;
    OK(hipPointerGetAttributes(&at, p + 10));
    CHECK(at.memoryType == hipMemoryTypeHost && at.hostPointer == p + 10);
    unsigned f = 99;
    OK(hipHostGetFlags(&f, p));
    CHECK(f == 0);
    // The registered bytes go to the device and back through the registration.
    char* d = nullptr;
    OK(hipMalloc((void**)&d, 4000));
    OK(hipMemcpyAsync(d, p, 4000, hipMemcpyHostToDevice, s));
    OK(hipMemsetAsync(p, 0, 4000, s));
    OK(hipStreamSynchronize(s));
    CHECK(p[0] == 0 && p[3999] == 0 && p[4000] == (char)(4008 * 3));
    OK(hipMemcpyAsync(p, d, 4000, hipMemcpyDeviceToHost, s));
    OK(hipStreamSynchronize(s));
    for (int i = 0; i < 4000; i++) CHECK(p[i] == (char)((i + 8) * 3));
    OK(hipFree(d));
    void* dp = nullptr;
    OK(hipHostGetDevicePointer(&dp, p + 4, 0));
    // The device address of p + 4 (kfdrt's is p + 4 itself; CLR's is elsewhere).
    OK(hipStreamWriteValue32(s, dp, 0x4242, 0));
    OK(hipStreamSynchronize(s));
    CHECK(*(unsigned*)(p + 4) == 0x4242);
    OK(hipHostUnregister(p));
    CHECK(hipHostUnregister(p) == hipErrorHostMemoryNotRegistered);

    // Page-aligned pointer, a size that is not a page multiple.
    char* a = (char*)aligned_alloc(4096, 4 * 4096);
    OK(hipHostRegister(a, 100, 0));
    OK(hipStreamWriteValue32(s, a + 96, 0x1234, 0));
    OK(hipStreamSynchronize(s));
    CHECK(*(unsigned*)(a + 96) == 0x1234);
    OK(hipHostUnregister(a));

    // As CLR 5.2: registering a registered pointer again succeeds and one unregister ends
    // it; a range inside a registration is registered on its own.
    OK(hipHostRegister(a, 8192, 0));
    OK(hipHostRegister(a, 8192, 0));
    OK(hipHostRegister(a + 4096, 4096, 0));
    OK(hipHostGetDevicePointer(&dp, a + 4100, 0));
    OK(hipStreamWriteValue32(s, dp, 0x55, 0));
    OK(hipStreamSynchronize(s));
    CHECK(*(unsigned*)(a + 4100) == 0x55);
    OK(hipHostUnregister(a + 4096));
    OK(hipStreamWriteValue32(s, a + 4100, 0x77, 0));  // still registered through `a`
    OK(hipStreamSynchronize(s));
    CHECK(*(unsigned*)(a + 4100) == 0x77);
    OK(hipHostUnregister(a));
    CHECK(hipHostUnregister(a) == hipErrorHostMemoryNotRegistered);
    CHECK(hipStreamWriteValue32(s, a, 1, 0) == hipErrorInvalidValue);
    // The registration outlives the sub-range's when that is unregistered last.
    OK(hipHostRegister(a, 3 * 4096, 0));
    OK(hipHostRegister(a + 4096, 4096, 0));
    OK(hipHostUnregister(a));
    CHECK(hipStreamWriteValue32(s, a + 8192, 1, 0) == hipErrorInvalidValue);
    OK(hipStreamWriteValue32(s, a + 4096, 0x99, 0));
    OK(hipStreamSynchronize(s));
    CHECK(*(unsigned*)(a + 4096) == 0x99);
    OK(hipHostUnregister(a + 4096));
    usable(s);
    free(a);
    free(m);
}

// With an argument, only the section of that name runs (to see each fail on its own).
int main(int argc, char** argv) {
    hipStream_t s;
    OK(hipStreamCreate(&s));
    struct {
        const char* name;
        void (*f)(hipStream_t);
    } sections[] = {
        {"unknown_addresses", unknown_addresses},
        {"host_memory_still_accepted", host_memory_still_accepted},
        {"memcpy_kinds", memcpy_kinds},
        {"requested_sizes", requested_sizes},
        {"host_register_any_range", host_register_any_range},
    };
    for (auto& t : sections)
        if (argc < 2 || strcmp(argv[1], t.name) == 0) t.f(s);
    OK(hipStreamDestroy(s));
    printf("memcheck checks passed: %d\n", checks.load());
    return 0;
}
