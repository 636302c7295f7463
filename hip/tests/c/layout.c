/* ABI check: sizes, offsets and enum values of Debian's HIP 5.2 header against the table
 * the Rust side prints (kfdrt_hip_layout). Every row of either side must match. */
#include <hip/hip_runtime_api.h>
#include <dlfcn.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct row { const char *key; long long v; int seen; };

#define SZ(t) { "size " #t, (long long)sizeof(t), 0 }
#define OFF(t, f) { "offset " #t "." #f, (long long)offsetof(t, f), 0 }
#define VAL(v) { "value " #v, (long long)(v), 0 }

static struct row rows[] = {
    SZ(hipPointerAttribute_t),
    OFF(hipPointerAttribute_t, memoryType), OFF(hipPointerAttribute_t, device),
    OFF(hipPointerAttribute_t, devicePointer), OFF(hipPointerAttribute_t, hostPointer),
    OFF(hipPointerAttribute_t, isManaged), OFF(hipPointerAttribute_t, allocationFlags),
    SZ(hipMemLocation), OFF(hipMemLocation, type), OFF(hipMemLocation, id),
    SZ(hipMemAccessDesc), OFF(hipMemAccessDesc, location), OFF(hipMemAccessDesc, flags),
    SZ(hipMemPoolProps), OFF(hipMemPoolProps, allocType), OFF(hipMemPoolProps, handleTypes),
    OFF(hipMemPoolProps, location), OFF(hipMemPoolProps, win32SecurityAttributes),
    OFF(hipMemPoolProps, reserved),
    SZ(hipMemAllocationProp), OFF(hipMemAllocationProp, compressionType),
    OFF(hipMemAllocationProp, location), OFF(hipMemAllocationProp, requestedHandleType),
    OFF(hipMemAllocationProp, type), OFF(hipMemAllocationProp, usage),
    OFF(hipMemAllocationProp, win32HandleMetaData),
    SZ(hipMemPoolPtrExportData),
    VAL(hipMemoryTypeHost), VAL(hipMemoryTypeDevice), VAL(hipMemoryTypeArray),
    VAL(hipMemoryTypeUnified),
    VAL(hipMemcpyHostToHost), VAL(hipMemcpyHostToDevice), VAL(hipMemcpyDeviceToHost),
    VAL(hipMemcpyDeviceToDevice), VAL(hipMemcpyDefault),
    VAL(hipMemLocationTypeInvalid), VAL(hipMemLocationTypeDevice),
    VAL(hipMemAccessFlagsProtNone), VAL(hipMemAccessFlagsProtRead),
    VAL(hipMemAccessFlagsProtReadWrite),
    VAL(hipMemAllocationTypeInvalid), VAL(hipMemAllocationTypePinned),
    VAL(hipMemHandleTypeNone), VAL(hipMemHandleTypePosixFileDescriptor),
    VAL(hipStreamDefault), VAL(hipStreamNonBlocking), VAL(hipEventDefault),
    VAL(hipEventBlockingSync), VAL(hipEventDisableTiming), VAL(hipHostMallocDefault),
    VAL(hipDeviceMallocDefault), VAL(hipMallocSignalMemory),
    VAL(hipMemPoolReuseFollowEventDependencies), VAL(hipMemPoolReuseAllowOpportunistic), VAL(hipMemPoolReuseAllowInternalDependencies), VAL(hipMemPoolAttrReleaseThreshold), VAL(hipMemPoolAttrReservedMemCurrent), VAL(hipMemPoolAttrReservedMemHigh), VAL(hipMemPoolAttrUsedMemCurrent), VAL(hipMemPoolAttrUsedMemHigh),
    VAL(hipSuccess), VAL(hipErrorInvalidValue), VAL(hipErrorOutOfMemory),
    VAL(hipErrorNotInitialized), VAL(hipErrorInvalidDevice), VAL(hipErrorNoDevice),
    VAL(hipErrorInvalidHandle), VAL(hipErrorContextIsDestroyed), VAL(hipErrorNotReady),
    VAL(hipErrorLaunchFailure), VAL(hipErrorNotSupported), VAL(hipErrorUnknown),
};

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: layout LIB\n"); return 2; }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    const char *(*table)(void) = (const char *(*)(void))dlsym(lib, "kfdrt_hip_layout");
    if (!table) { fprintf(stderr, "no kfdrt_hip_layout\n"); return 2; }
    const size_t n = sizeof rows / sizeof rows[0];
    int bad = 0, sizes = 0, offsets = 0, values = 0;
    char line[256];
    const char *p = table();
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        if (len >= sizeof line) len = sizeof line - 1;
        memcpy(line, p, len);
        line[len] = 0;
        p += len + (nl ? 1 : 0);
        char *sp = strrchr(line, ' ');
        if (!sp) { printf("MALFORMED %s\n", line); bad++; continue; }
        *sp = 0;
        long long v = atoll(sp + 1);
        size_t i;
        for (i = 0; i < n && strcmp(rows[i].key, line) != 0; i++) {}
        if (i == n) { printf("UNKNOWN to C: %s\n", line); bad++; continue; }
        rows[i].seen = 1;
        if (rows[i].v != v) { printf("MISMATCH %s: header %lld, Rust %lld\n", line, rows[i].v, v); bad++; }
        if (!strncmp(line, "size", 4)) sizes++;
        else if (!strncmp(line, "offset", 6)) offsets++;
        else values++;
    }
    for (size_t i = 0; i < n; i++)
        if (!rows[i].seen) { printf("MISSING in Rust: %s\n", rows[i].key); bad++; }
    printf("layout: %d sizes, %d offsets, %d values checked, %d bad\n", sizes, offsets, values, bad);
    return bad ? 1 : 0;
}
