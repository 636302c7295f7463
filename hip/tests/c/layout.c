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
    SZ(hipDeviceProp_t),
    OFF(hipDeviceProp_t, name),
    OFF(hipDeviceProp_t, totalGlobalMem),
    OFF(hipDeviceProp_t, sharedMemPerBlock),
    OFF(hipDeviceProp_t, regsPerBlock),
    OFF(hipDeviceProp_t, warpSize),
    OFF(hipDeviceProp_t, maxThreadsPerBlock),
    OFF(hipDeviceProp_t, maxThreadsDim),
    OFF(hipDeviceProp_t, maxGridSize),
    OFF(hipDeviceProp_t, clockRate),
    OFF(hipDeviceProp_t, memoryClockRate),
    OFF(hipDeviceProp_t, memoryBusWidth),
    OFF(hipDeviceProp_t, totalConstMem),
    OFF(hipDeviceProp_t, major),
    OFF(hipDeviceProp_t, minor),
    OFF(hipDeviceProp_t, multiProcessorCount),
    OFF(hipDeviceProp_t, l2CacheSize),
    OFF(hipDeviceProp_t, maxThreadsPerMultiProcessor),
    OFF(hipDeviceProp_t, computeMode),
    OFF(hipDeviceProp_t, clockInstructionRate),
    OFF(hipDeviceProp_t, arch),
    OFF(hipDeviceProp_t, concurrentKernels),
    OFF(hipDeviceProp_t, pciDomainID),
    OFF(hipDeviceProp_t, pciBusID),
    OFF(hipDeviceProp_t, pciDeviceID),
    OFF(hipDeviceProp_t, maxSharedMemoryPerMultiProcessor),
    OFF(hipDeviceProp_t, isMultiGpuBoard),
    OFF(hipDeviceProp_t, canMapHostMemory),
    OFF(hipDeviceProp_t, gcnArch),
    OFF(hipDeviceProp_t, gcnArchName),
    OFF(hipDeviceProp_t, integrated),
    OFF(hipDeviceProp_t, cooperativeLaunch),
    OFF(hipDeviceProp_t, cooperativeMultiDeviceLaunch),
    OFF(hipDeviceProp_t, maxTexture1DLinear),
    OFF(hipDeviceProp_t, maxTexture1D),
    OFF(hipDeviceProp_t, maxTexture2D),
    OFF(hipDeviceProp_t, maxTexture3D),
    OFF(hipDeviceProp_t, hdpMemFlushCntl),
    OFF(hipDeviceProp_t, hdpRegFlushCntl),
    OFF(hipDeviceProp_t, memPitch),
    OFF(hipDeviceProp_t, textureAlignment),
    OFF(hipDeviceProp_t, texturePitchAlignment),
    OFF(hipDeviceProp_t, kernelExecTimeoutEnabled),
    OFF(hipDeviceProp_t, ECCEnabled),
    OFF(hipDeviceProp_t, tccDriver),
    OFF(hipDeviceProp_t, cooperativeMultiDeviceUnmatchedFunc),
    OFF(hipDeviceProp_t, cooperativeMultiDeviceUnmatchedGridDim),
    OFF(hipDeviceProp_t, cooperativeMultiDeviceUnmatchedBlockDim),
    OFF(hipDeviceProp_t, cooperativeMultiDeviceUnmatchedSharedMem),
    OFF(hipDeviceProp_t, isLargeBar),
    OFF(hipDeviceProp_t, asicRevision),
    OFF(hipDeviceProp_t, managedMemory),
    OFF(hipDeviceProp_t, directManagedMemAccessFromHost),
    OFF(hipDeviceProp_t, concurrentManagedAccess),
    OFF(hipDeviceProp_t, pageableMemoryAccess),
    OFF(hipDeviceProp_t, pageableMemoryAccessUsesHostPageTables),
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
    SZ(hipFuncAttributes), OFF(hipFuncAttributes, binaryVersion),
    OFF(hipFuncAttributes, cacheModeCA), OFF(hipFuncAttributes, constSizeBytes),
    OFF(hipFuncAttributes, localSizeBytes), OFF(hipFuncAttributes, maxDynamicSharedSizeBytes),
    OFF(hipFuncAttributes, maxThreadsPerBlock), OFF(hipFuncAttributes, numRegs),
    OFF(hipFuncAttributes, preferredShmemCarveout), OFF(hipFuncAttributes, ptxVersion),
    OFF(hipFuncAttributes, sharedSizeBytes),
    SZ(dim3), OFF(dim3, x), OFF(dim3, y), OFF(dim3, z), SZ(hipIpcMemHandle_t), SZ(hipIpcEventHandle_t),
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
    VAL(hipEventBlockingSync), VAL(hipEventDisableTiming), VAL(hipEventInterprocess), VAL(hipHostMallocDefault),
    VAL(hipDeviceMallocDefault), VAL(hipMallocSignalMemory),
    VAL(hipHostRegisterDefault), VAL(hipHostRegisterPortable), VAL(hipHostRegisterMapped),
    VAL(hipIpcMemLazyEnablePeerAccess),
    VAL(hipHostMallocPortable), VAL(hipHostMallocMapped), VAL(hipHostMallocWriteCombined),
    VAL(hipHostMallocNumaUser), VAL(hipHostMallocCoherent), VAL(hipHostMallocNonCoherent),
    VAL(hipDeviceMallocFinegrained),
    VAL(hipErrorHostMemoryAlreadyRegistered), VAL(hipErrorHostMemoryNotRegistered),
    VAL(hipMemPoolReuseFollowEventDependencies), VAL(hipMemPoolReuseAllowOpportunistic), VAL(hipMemPoolReuseAllowInternalDependencies), VAL(hipMemPoolAttrReleaseThreshold), VAL(hipMemPoolAttrReservedMemCurrent), VAL(hipMemPoolAttrReservedMemHigh), VAL(hipMemPoolAttrUsedMemCurrent), VAL(hipMemPoolAttrUsedMemHigh),
    VAL(hipDeviceAttributeCanMapHostMemory), VAL(hipDeviceAttributeClockRate), VAL(hipDeviceAttributeConcurrentKernels), VAL(hipDeviceAttributeL2CacheSize), VAL(hipDeviceAttributeComputeCapabilityMajor), VAL(hipDeviceAttributeComputeCapabilityMinor), VAL(hipDeviceAttributeManagedMemory), VAL(hipDeviceAttributeMaxThreadsPerMultiProcessor), VAL(hipDeviceAttributeMultiprocessorCount), VAL(hipDeviceAttributePciBusId), VAL(hipDeviceAttributePciDeviceId), VAL(hipDeviceAttributePciDomainID), VAL(hipDeviceAttributeMaxSharedMemoryPerBlock), VAL(hipDeviceAttributeTotalGlobalMem), VAL(hipDeviceAttributeWarpSize), VAL(hipDeviceAttributeIsLargeBar), VAL(hipDeviceAttributeMaxBlockDimX), VAL(hipDeviceAttributeMaxBlockDimY), VAL(hipDeviceAttributeMaxBlockDimZ), VAL(hipDeviceAttributeMaxGridDimX), VAL(hipDeviceAttributeMaxGridDimY), VAL(hipDeviceAttributeMaxGridDimZ), VAL(hipDeviceAttributeMaxThreadsPerBlock), VAL(hipDeviceAttributeMaxPitch), VAL(hipDeviceAttributeMaxRegistersPerBlock), VAL(hipDeviceAttributeTotalConstantMemory),
    VAL(hipDeviceAttributeEccEnabled), VAL(hipDeviceAttributeComputeMode), VAL(hipDeviceAttributeIntegrated), VAL(hipDeviceAttributeIsMultiGpuBoard), VAL(hipDeviceAttributeKernelExecTimeout), VAL(hipDeviceAttributeMemoryBusWidth), VAL(hipDeviceAttributeMemoryClockRate), VAL(hipDeviceAttributeMaxSharedMemoryPerMultiprocessor), VAL(hipDeviceAttributeConcurrentManagedAccess), VAL(hipDeviceAttributeDirectManagedMemAccessFromHost), VAL(hipDeviceAttributePageableMemoryAccess), VAL(hipDeviceAttributePageableMemoryAccessUsesHostPageTables), VAL(hipDeviceAttributeCooperativeLaunch), VAL(hipDeviceAttributeCooperativeMultiDeviceLaunch), VAL(hipDeviceAttributeCooperativeMultiDeviceUnmatchedFunc), VAL(hipDeviceAttributeCooperativeMultiDeviceUnmatchedGridDim), VAL(hipDeviceAttributeCooperativeMultiDeviceUnmatchedBlockDim), VAL(hipDeviceAttributeCooperativeMultiDeviceUnmatchedSharedMem), VAL(hipDeviceAttributePhysicalMultiProcessorCount), VAL(hipDeviceAttributeCanUseStreamWaitValue), VAL(hipDeviceAttributeImageSupport), VAL(hipDeviceAttributeFineGrainSupport), VAL(hipDeviceAttributeMemoryPoolsSupported), VAL(hipDeviceAttributeMaxTexture1DWidth), VAL(hipDeviceAttributeMaxTexture2DWidth), VAL(hipDeviceAttributeMaxTexture2DHeight), VAL(hipDeviceAttributeMaxTexture3DWidth), VAL(hipDeviceAttributeMaxTexture3DHeight), VAL(hipDeviceAttributeMaxTexture3DDepth), VAL(hipDeviceAttributeTextureAlignment), VAL(hipDeviceAttributeTexturePitchAlignment), VAL(hipDeviceAttributeHdpMemFlushCntl), VAL(hipDeviceAttributeHdpRegFlushCntl), VAL(hipDeviceAttributeAsicRevision), VAL(hipEventReleaseToDevice), VAL(hipEventReleaseToSystem),
    VAL(hipSuccess), VAL(hipErrorInvalidValue), VAL(hipErrorOutOfMemory),
    VAL(hipErrorNotInitialized), VAL(hipErrorInvalidDevice), VAL(hipErrorNoDevice),
    VAL(hipErrorInvalidHandle), VAL(hipErrorContextIsDestroyed), VAL(hipErrorNotReady),
    VAL(hipErrorLaunchFailure), VAL(hipErrorNotSupported), VAL(hipErrorUnknown),
    VAL(hipErrorInvalidDevicePointer), VAL(hipErrorInvalidSymbol),
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
