//! The Rust side of the ABI test: a table of every struct size, field offset and enum
//! value this library uses, which `tests/c/layout.c` (compiled against Debian's header)
//! compares with its own `sizeof`/`offsetof`/enum values.

use crate::api::{hipIpcEventHandle_t, hipIpcMemHandle_t};
use crate::error::*;
use crate::kernel::{dim3, hipFuncAttributes};
use crate::types::*;
use std::ffi::{c_char, CString};
use std::mem::{offset_of, size_of};
use std::sync::OnceLock;

macro_rules! rows {
    ($out:ident; size $t:ident) => {
        $out.push(format!("size {} {}", stringify!($t), size_of::<$t>()));
    };
    ($out:ident; field $t:ident . $f:ident as $c:ident) => {
        $out.push(format!(
            "offset {}.{} {}",
            stringify!($t),
            stringify!($c),
            offset_of!($t, $f)
        ));
    };
    ($out:ident; value $($v:ident),*) => {
        $( $out.push(format!("value {} {}", stringify!($v), $v as i64)); )*
    };
}

/// The table, one `size NAME N` / `offset STRUCT.FIELD N` / `value NAME N` per line.
pub fn table() -> String {
    let mut o = Vec::new();
    rows!(o; size hipDeviceProp_t);
    rows!(o; field hipDeviceProp_t.name as name);
    rows!(o; field hipDeviceProp_t.totalGlobalMem as totalGlobalMem);
    rows!(o; field hipDeviceProp_t.sharedMemPerBlock as sharedMemPerBlock);
    rows!(o; field hipDeviceProp_t.regsPerBlock as regsPerBlock);
    rows!(o; field hipDeviceProp_t.warpSize as warpSize);
    rows!(o; field hipDeviceProp_t.maxThreadsPerBlock as maxThreadsPerBlock);
    rows!(o; field hipDeviceProp_t.maxThreadsDim as maxThreadsDim);
    rows!(o; field hipDeviceProp_t.maxGridSize as maxGridSize);
    rows!(o; field hipDeviceProp_t.clockRate as clockRate);
    rows!(o; field hipDeviceProp_t.memoryClockRate as memoryClockRate);
    rows!(o; field hipDeviceProp_t.memoryBusWidth as memoryBusWidth);
    rows!(o; field hipDeviceProp_t.totalConstMem as totalConstMem);
    rows!(o; field hipDeviceProp_t.major as major);
    rows!(o; field hipDeviceProp_t.minor as minor);
    rows!(o; field hipDeviceProp_t.multiProcessorCount as multiProcessorCount);
    rows!(o; field hipDeviceProp_t.l2CacheSize as l2CacheSize);
    rows!(o; field hipDeviceProp_t.maxThreadsPerMultiProcessor as maxThreadsPerMultiProcessor);
    rows!(o; field hipDeviceProp_t.computeMode as computeMode);
    rows!(o; field hipDeviceProp_t.clockInstructionRate as clockInstructionRate);
    rows!(o; field hipDeviceProp_t.arch as arch);
    rows!(o; field hipDeviceProp_t.concurrentKernels as concurrentKernels);
    rows!(o; field hipDeviceProp_t.pciDomainID as pciDomainID);
    rows!(o; field hipDeviceProp_t.pciBusID as pciBusID);
    rows!(o; field hipDeviceProp_t.pciDeviceID as pciDeviceID);
    rows!(o; field hipDeviceProp_t.maxSharedMemoryPerMultiProcessor as maxSharedMemoryPerMultiProcessor);
    rows!(o; field hipDeviceProp_t.isMultiGpuBoard as isMultiGpuBoard);
    rows!(o; field hipDeviceProp_t.canMapHostMemory as canMapHostMemory);
    rows!(o; field hipDeviceProp_t.gcnArch as gcnArch);
    rows!(o; field hipDeviceProp_t.gcnArchName as gcnArchName);
    rows!(o; field hipDeviceProp_t.integrated as integrated);
    rows!(o; field hipDeviceProp_t.cooperativeLaunch as cooperativeLaunch);
    rows!(o; field hipDeviceProp_t.cooperativeMultiDeviceLaunch as cooperativeMultiDeviceLaunch);
    rows!(o; field hipDeviceProp_t.maxTexture1DLinear as maxTexture1DLinear);
    rows!(o; field hipDeviceProp_t.maxTexture1D as maxTexture1D);
    rows!(o; field hipDeviceProp_t.maxTexture2D as maxTexture2D);
    rows!(o; field hipDeviceProp_t.maxTexture3D as maxTexture3D);
    rows!(o; field hipDeviceProp_t.hdpMemFlushCntl as hdpMemFlushCntl);
    rows!(o; field hipDeviceProp_t.hdpRegFlushCntl as hdpRegFlushCntl);
    rows!(o; field hipDeviceProp_t.memPitch as memPitch);
    rows!(o; field hipDeviceProp_t.textureAlignment as textureAlignment);
    rows!(o; field hipDeviceProp_t.texturePitchAlignment as texturePitchAlignment);
    rows!(o; field hipDeviceProp_t.kernelExecTimeoutEnabled as kernelExecTimeoutEnabled);
    rows!(o; field hipDeviceProp_t.ECCEnabled as ECCEnabled);
    rows!(o; field hipDeviceProp_t.tccDriver as tccDriver);
    rows!(o; field hipDeviceProp_t.cooperativeMultiDeviceUnmatchedFunc as cooperativeMultiDeviceUnmatchedFunc);
    rows!(o; field hipDeviceProp_t.cooperativeMultiDeviceUnmatchedGridDim as cooperativeMultiDeviceUnmatchedGridDim);
    rows!(o; field hipDeviceProp_t.cooperativeMultiDeviceUnmatchedBlockDim as cooperativeMultiDeviceUnmatchedBlockDim);
    rows!(o; field hipDeviceProp_t.cooperativeMultiDeviceUnmatchedSharedMem as cooperativeMultiDeviceUnmatchedSharedMem);
    rows!(o; field hipDeviceProp_t.isLargeBar as isLargeBar);
    rows!(o; field hipDeviceProp_t.asicRevision as asicRevision);
    rows!(o; field hipDeviceProp_t.managedMemory as managedMemory);
    rows!(o; field hipDeviceProp_t.directManagedMemAccessFromHost as directManagedMemAccessFromHost);
    rows!(o; field hipDeviceProp_t.concurrentManagedAccess as concurrentManagedAccess);
    rows!(o; field hipDeviceProp_t.pageableMemoryAccess as pageableMemoryAccess);
    rows!(o; field hipDeviceProp_t.pageableMemoryAccessUsesHostPageTables as pageableMemoryAccessUsesHostPageTables);
    rows!(o; size hipPointerAttribute_t);
    rows!(o; field hipPointerAttribute_t.memoryType as memoryType);
    rows!(o; field hipPointerAttribute_t.device as device);
    rows!(o; field hipPointerAttribute_t.devicePointer as devicePointer);
    rows!(o; field hipPointerAttribute_t.hostPointer as hostPointer);
    rows!(o; field hipPointerAttribute_t.isManaged as isManaged);
    rows!(o; field hipPointerAttribute_t.allocationFlags as allocationFlags);
    rows!(o; size hipMemLocation);
    rows!(o; field hipMemLocation.type_ as type);
    rows!(o; field hipMemLocation.id as id);
    rows!(o; size hipMemAccessDesc);
    rows!(o; field hipMemAccessDesc.location as location);
    rows!(o; field hipMemAccessDesc.flags as flags);
    rows!(o; size hipMemPoolProps);
    rows!(o; field hipMemPoolProps.allocType as allocType);
    rows!(o; field hipMemPoolProps.handleTypes as handleTypes);
    rows!(o; field hipMemPoolProps.location as location);
    rows!(o; field hipMemPoolProps.win32SecurityAttributes as win32SecurityAttributes);
    rows!(o; field hipMemPoolProps.reserved as reserved);
    rows!(o; size hipMemAllocationProp);
    rows!(o; field hipMemAllocationProp.compressionType as compressionType);
    rows!(o; field hipMemAllocationProp.location as location);
    rows!(o; field hipMemAllocationProp.requestedHandleType as requestedHandleType);
    rows!(o; field hipMemAllocationProp.type_ as type);
    rows!(o; field hipMemAllocationProp.usage as usage);
    rows!(o; field hipMemAllocationProp.win32HandleMetaData as win32HandleMetaData);
    rows!(o; size hipMemPoolPtrExportData);
    rows!(o; size hipFuncAttributes);
    rows!(o; field hipFuncAttributes.binaryVersion as binaryVersion);
    rows!(o; field hipFuncAttributes.cacheModeCA as cacheModeCA);
    rows!(o; field hipFuncAttributes.constSizeBytes as constSizeBytes);
    rows!(o; field hipFuncAttributes.localSizeBytes as localSizeBytes);
    rows!(o; field hipFuncAttributes.maxDynamicSharedSizeBytes as maxDynamicSharedSizeBytes);
    rows!(o; field hipFuncAttributes.maxThreadsPerBlock as maxThreadsPerBlock);
    rows!(o; field hipFuncAttributes.numRegs as numRegs);
    rows!(o; field hipFuncAttributes.preferredShmemCarveout as preferredShmemCarveout);
    rows!(o; field hipFuncAttributes.ptxVersion as ptxVersion);
    rows!(o; field hipFuncAttributes.sharedSizeBytes as sharedSizeBytes);
    rows!(o; size dim3);
    rows!(o; field dim3.x as x);
    rows!(o; field dim3.y as y);
    rows!(o; field dim3.z as z);
    rows!(o; size hipIpcMemHandle_t);
    rows!(o; size hipIpcEventHandle_t);
    rows!(o; value hipMemoryTypeHost, hipMemoryTypeDevice, hipMemoryTypeArray, hipMemoryTypeUnified);
    rows!(o; value hipMemcpyHostToHost, hipMemcpyHostToDevice, hipMemcpyDeviceToHost,
        hipMemcpyDeviceToDevice, hipMemcpyDefault);
    rows!(o; value hipMemLocationTypeInvalid, hipMemLocationTypeDevice);
    rows!(o; value hipMemAccessFlagsProtNone, hipMemAccessFlagsProtRead,
        hipMemAccessFlagsProtReadWrite);
    rows!(o; value hipMemAllocationTypeInvalid, hipMemAllocationTypePinned);
    rows!(o; value hipMemHandleTypeNone, hipMemHandleTypePosixFileDescriptor);
    rows!(o; value hipStreamDefault, hipStreamNonBlocking, hipEventDefault,
        hipEventBlockingSync, hipEventDisableTiming, hipEventInterprocess, hipHostMallocDefault,
        hipDeviceMallocDefault, hipMallocSignalMemory, hipHostRegisterDefault,
        hipHostRegisterPortable, hipHostRegisterMapped, hipIpcMemLazyEnablePeerAccess);
    rows!(o; value hipHostMallocPortable, hipHostMallocMapped, hipHostMallocWriteCombined,
        hipHostMallocNumaUser, hipHostMallocCoherent, hipHostMallocNonCoherent,
        hipDeviceMallocFinegrained);
    rows!(o; value hipMemPoolReuseFollowEventDependencies, hipMemPoolReuseAllowOpportunistic, hipMemPoolReuseAllowInternalDependencies, hipMemPoolAttrReleaseThreshold, hipMemPoolAttrReservedMemCurrent, hipMemPoolAttrReservedMemHigh, hipMemPoolAttrUsedMemCurrent, hipMemPoolAttrUsedMemHigh);
    rows!(o; value hipDeviceAttributeCanMapHostMemory, hipDeviceAttributeClockRate, hipDeviceAttributeConcurrentKernels, hipDeviceAttributeL2CacheSize, hipDeviceAttributeComputeCapabilityMajor, hipDeviceAttributeComputeCapabilityMinor, hipDeviceAttributeManagedMemory, hipDeviceAttributeMaxThreadsPerMultiProcessor, hipDeviceAttributeMultiprocessorCount, hipDeviceAttributePciBusId, hipDeviceAttributePciDeviceId, hipDeviceAttributePciDomainID, hipDeviceAttributeMaxSharedMemoryPerBlock, hipDeviceAttributeTotalGlobalMem, hipDeviceAttributeWarpSize, hipDeviceAttributeIsLargeBar, hipDeviceAttributeMaxBlockDimX, hipDeviceAttributeMaxBlockDimY, hipDeviceAttributeMaxBlockDimZ, hipDeviceAttributeMaxGridDimX, hipDeviceAttributeMaxGridDimY, hipDeviceAttributeMaxGridDimZ, hipDeviceAttributeMaxThreadsPerBlock, hipDeviceAttributeMaxPitch, hipDeviceAttributeMaxRegistersPerBlock, hipDeviceAttributeTotalConstantMemory);
    rows!(o; value hipDeviceAttributeEccEnabled, hipDeviceAttributeComputeMode, hipDeviceAttributeIntegrated, hipDeviceAttributeIsMultiGpuBoard, hipDeviceAttributeKernelExecTimeout, hipDeviceAttributeMemoryBusWidth, hipDeviceAttributeMemoryClockRate, hipDeviceAttributeMaxSharedMemoryPerMultiprocessor, hipDeviceAttributeConcurrentManagedAccess, hipDeviceAttributeDirectManagedMemAccessFromHost, hipDeviceAttributePageableMemoryAccess, hipDeviceAttributePageableMemoryAccessUsesHostPageTables, hipDeviceAttributeCooperativeLaunch, hipDeviceAttributeCooperativeMultiDeviceLaunch, hipDeviceAttributeCooperativeMultiDeviceUnmatchedFunc, hipDeviceAttributeCooperativeMultiDeviceUnmatchedGridDim, hipDeviceAttributeCooperativeMultiDeviceUnmatchedBlockDim, hipDeviceAttributeCooperativeMultiDeviceUnmatchedSharedMem, hipDeviceAttributePhysicalMultiProcessorCount, hipDeviceAttributeCanUseStreamWaitValue, hipDeviceAttributeImageSupport, hipDeviceAttributeFineGrainSupport, hipDeviceAttributeMemoryPoolsSupported, hipDeviceAttributeMaxTexture1DWidth, hipDeviceAttributeMaxTexture2DWidth, hipDeviceAttributeMaxTexture2DHeight, hipDeviceAttributeMaxTexture3DWidth, hipDeviceAttributeMaxTexture3DHeight, hipDeviceAttributeMaxTexture3DDepth, hipDeviceAttributeTextureAlignment, hipDeviceAttributeTexturePitchAlignment, hipDeviceAttributeHdpMemFlushCntl, hipDeviceAttributeHdpRegFlushCntl, hipDeviceAttributeAsicRevision, hipEventReleaseToDevice, hipEventReleaseToSystem);
    o.extend(ERROR_VALUES.iter().map(|(n, v)| format!("value {n} {v}")));
    o.join("\n") + "\n"
}

/// Every `hipError_t` constant, for the table.
const ERROR_VALUES: &[(&str, hipError_t)] = &[
    ("hipSuccess", hipSuccess),
    ("hipErrorInvalidValue", hipErrorInvalidValue),
    ("hipErrorOutOfMemory", hipErrorOutOfMemory),
    ("hipErrorNotInitialized", hipErrorNotInitialized),
    ("hipErrorInvalidDevice", hipErrorInvalidDevice),
    ("hipErrorNoDevice", hipErrorNoDevice),
    ("hipErrorInvalidHandle", hipErrorInvalidHandle),
    ("hipErrorContextIsDestroyed", hipErrorContextIsDestroyed),
    ("hipErrorNotReady", hipErrorNotReady),
    ("hipErrorLaunchFailure", hipErrorLaunchFailure),
    ("hipErrorNotSupported", hipErrorNotSupported),
    (
        "hipErrorHostMemoryAlreadyRegistered",
        hipErrorHostMemoryAlreadyRegistered,
    ),
    (
        "hipErrorHostMemoryNotRegistered",
        hipErrorHostMemoryNotRegistered,
    ),
    ("hipErrorUnknown", hipErrorUnknown),
    ("hipErrorInvalidDevicePointer", hipErrorInvalidDevicePointer),
    ("hipErrorInvalidSymbol", hipErrorInvalidSymbol),
];

/// `kfdrt_hip_layout`: the layout table as a NUL-terminated string owned by the library.
#[no_mangle]
pub extern "C" fn kfdrt_hip_layout() -> *const c_char {
    static T: OnceLock<CString> = OnceLock::new();
    T.get_or_init(|| CString::new(table()).unwrap_or_default())
        .as_ptr()
}
