//! HIP 5.2 structs and enum values, written from `hip/hip_runtime_api.h` (Debian
//! `libamdhip64-dev` 5.2). `tests/c/layout.c` checks every size and offset against the
//! header through [`crate::layout`].

#![allow(non_upper_case_globals)]

use std::ffi::{c_char, c_int, c_uint, c_void};

/// `hipMemoryType`.
pub type hipMemoryType = c_int;
/// `hipMemoryTypeHost`.
pub const hipMemoryTypeHost: hipMemoryType = 0;
/// `hipMemoryTypeDevice`.
pub const hipMemoryTypeDevice: hipMemoryType = 1;
/// `hipMemoryTypeArray`.
pub const hipMemoryTypeArray: hipMemoryType = 2;
/// `hipMemoryTypeUnified`.
pub const hipMemoryTypeUnified: hipMemoryType = 3;

/// `hipMemcpyKind`.
pub type hipMemcpyKind = c_int;
/// `hipMemcpyHostToHost`.
pub const hipMemcpyHostToHost: hipMemcpyKind = 0;
/// `hipMemcpyHostToDevice`.
pub const hipMemcpyHostToDevice: hipMemcpyKind = 1;
/// `hipMemcpyDeviceToHost`.
pub const hipMemcpyDeviceToHost: hipMemcpyKind = 2;
/// `hipMemcpyDeviceToDevice`.
pub const hipMemcpyDeviceToDevice: hipMemcpyKind = 3;
/// `hipMemcpyDefault`.
pub const hipMemcpyDefault: hipMemcpyKind = 4;

/// `hipMemLocationType`.
pub type hipMemLocationType = c_int;
/// `hipMemLocationTypeInvalid`.
pub const hipMemLocationTypeInvalid: hipMemLocationType = 0;
/// `hipMemLocationTypeDevice`.
pub const hipMemLocationTypeDevice: hipMemLocationType = 1;

/// `hipMemAccessFlags`.
pub type hipMemAccessFlags = c_int;
/// `hipMemAccessFlagsProtNone`.
pub const hipMemAccessFlagsProtNone: hipMemAccessFlags = 0;
/// `hipMemAccessFlagsProtRead`.
pub const hipMemAccessFlagsProtRead: hipMemAccessFlags = 1;
/// `hipMemAccessFlagsProtReadWrite`.
pub const hipMemAccessFlagsProtReadWrite: hipMemAccessFlags = 3;

/// `hipMemAllocationType`.
pub type hipMemAllocationType = c_int;
/// `hipMemAllocationTypeInvalid`.
pub const hipMemAllocationTypeInvalid: hipMemAllocationType = 0;
/// `hipMemAllocationTypePinned`.
pub const hipMemAllocationTypePinned: hipMemAllocationType = 1;

/// `hipMemAllocationHandleType`.
pub type hipMemAllocationHandleType = c_int;
/// `hipMemHandleTypeNone`.
pub const hipMemHandleTypeNone: hipMemAllocationHandleType = 0;
/// `hipMemHandleTypePosixFileDescriptor`.
pub const hipMemHandleTypePosixFileDescriptor: hipMemAllocationHandleType = 1;

/// Stream flag `hipStreamDefault`.
pub const hipStreamDefault: c_uint = 0;
/// Stream flag `hipStreamNonBlocking`.
pub const hipStreamNonBlocking: c_uint = 1;
/// Event flag `hipEventDefault`.
pub const hipEventDefault: c_uint = 0;
/// Event flag `hipEventBlockingSync`.
pub const hipEventBlockingSync: c_uint = 1;
/// Event flag `hipEventDisableTiming`.
pub const hipEventDisableTiming: c_uint = 2;
/// Event flag `hipEventInterprocess`.
pub const hipEventInterprocess: c_uint = 4;
/// Event flag `hipEventReleaseToDevice`.
pub const hipEventReleaseToDevice: c_uint = 0x4000_0000;
/// Event flag `hipEventReleaseToSystem`.
pub const hipEventReleaseToSystem: c_uint = 0x8000_0000;
/// `hipHostMalloc` flag `hipHostMallocDefault`.
pub const hipHostMallocDefault: c_uint = 0;
/// `hipHostMalloc` flag `hipHostMallocPortable`.
pub const hipHostMallocPortable: c_uint = 0x1;
/// `hipHostMalloc` flag `hipHostMallocMapped`.
pub const hipHostMallocMapped: c_uint = 0x2;
/// `hipHostMalloc` flag `hipHostMallocWriteCombined`.
pub const hipHostMallocWriteCombined: c_uint = 0x4;
/// `hipHostMalloc` flag `hipHostMallocNumaUser`.
pub const hipHostMallocNumaUser: c_uint = 0x2000_0000;
/// `hipHostMalloc` flag `hipHostMallocCoherent`.
pub const hipHostMallocCoherent: c_uint = 0x4000_0000;
/// `hipHostMalloc` flag `hipHostMallocNonCoherent`.
pub const hipHostMallocNonCoherent: c_uint = 0x8000_0000;
/// `hipExtMallocWithFlags` flag `hipDeviceMallocFinegrained`.
pub const hipDeviceMallocFinegrained: c_uint = 1;
/// `hipExtMallocWithFlags` flag `hipDeviceMallocDefault`.
pub const hipDeviceMallocDefault: c_uint = 0;
/// `hipExtMallocWithFlags` flag `hipMallocSignalMemory`.
pub const hipMallocSignalMemory: c_uint = 2;

/// `hipHostRegister` flag `hipHostRegisterDefault`.
pub const hipHostRegisterDefault: c_uint = 0;
/// `hipHostRegister` flag `hipHostRegisterPortable`.
pub const hipHostRegisterPortable: c_uint = 1;
/// `hipIpcOpenMemHandle`'s only flag value, `hipIpcMemLazyEnablePeerAccess` (0 in HIP 5.2).
pub const hipIpcMemLazyEnablePeerAccess: c_uint = 0;
/// `hipHostRegister` flag `hipHostRegisterMapped`.
pub const hipHostRegisterMapped: c_uint = 2;

/// `hipPointerAttribute_t` (HIP 5.2 field order).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipPointerAttribute_t {
    /// Where the memory is.
    pub memoryType: hipMemoryType,
    /// Owning device.
    pub device: c_int,
    /// Device address.
    pub devicePointer: *mut c_void,
    /// Host address.
    pub hostPointer: *mut c_void,
    /// Managed memory.
    pub isManaged: c_int,
    /// Allocation flags.
    pub allocationFlags: c_uint,
}

/// `hipMemLocation`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemLocation {
    /// Location type.
    pub type_: hipMemLocationType,
    /// Device ordinal.
    pub id: c_int,
}

/// `hipMemAccessDesc`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemAccessDesc {
    /// Where.
    pub location: hipMemLocation,
    /// Access.
    pub flags: hipMemAccessFlags,
}

/// `hipMemPoolProps` (HIP 5.2: `allocType, handleTypes, location, win32..., reserved`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemPoolProps {
    /// Allocation type.
    pub allocType: hipMemAllocationType,
    /// Shareable handle types.
    pub handleTypes: hipMemAllocationHandleType,
    /// Home location.
    pub location: hipMemLocation,
    /// Windows only.
    pub win32SecurityAttributes: *mut c_void,
    /// Reserved.
    pub reserved: [u8; 64],
}

/// `hipMemAllocationProp` (HIP 5.2 order: `compressionType` first).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemAllocationProp {
    /// Compression type.
    pub compressionType: u8,
    /// Home location.
    pub location: hipMemLocation,
    /// Requested shareable handle type.
    pub requestedHandleType: hipMemAllocationHandleType,
    /// Allocation type.
    pub type_: hipMemAllocationType,
    /// Usage.
    pub usage: u16,
    /// Windows only.
    pub win32HandleMetaData: *mut c_void,
}

/// `hipMemPoolPtrExportData`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipMemPoolPtrExportData {
    /// Opaque.
    pub reserved: [u8; 64],
}

/// `hipMemPoolAttr`.
pub type hipMemPoolAttr = c_int;
/// `hipMemPoolReuseFollowEventDependencies`.
pub const hipMemPoolReuseFollowEventDependencies: hipMemPoolAttr = 1;
/// `hipMemPoolReuseAllowOpportunistic`.
pub const hipMemPoolReuseAllowOpportunistic: hipMemPoolAttr = 2;
/// `hipMemPoolReuseAllowInternalDependencies`.
pub const hipMemPoolReuseAllowInternalDependencies: hipMemPoolAttr = 3;
/// `hipMemPoolAttrReleaseThreshold`.
pub const hipMemPoolAttrReleaseThreshold: hipMemPoolAttr = 4;
/// `hipMemPoolAttrReservedMemCurrent`.
pub const hipMemPoolAttrReservedMemCurrent: hipMemPoolAttr = 5;
/// `hipMemPoolAttrReservedMemHigh`.
pub const hipMemPoolAttrReservedMemHigh: hipMemPoolAttr = 6;
/// `hipMemPoolAttrUsedMemCurrent`.
pub const hipMemPoolAttrUsedMemCurrent: hipMemPoolAttr = 7;
/// `hipMemPoolAttrUsedMemHigh`.
pub const hipMemPoolAttrUsedMemHigh: hipMemPoolAttr = 8;

/// `hipDeviceProp_t` (HIP 5.2 layout; `arch` is the 17-bit `hipDeviceArch_t` bitfield).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct hipDeviceProp_t {
    /// `name`.
    pub name: [c_char; 256],
    /// `totalGlobalMem`.
    pub totalGlobalMem: usize,
    /// `sharedMemPerBlock`.
    pub sharedMemPerBlock: usize,
    /// `regsPerBlock`.
    pub regsPerBlock: c_int,
    /// `warpSize`.
    pub warpSize: c_int,
    /// `maxThreadsPerBlock`.
    pub maxThreadsPerBlock: c_int,
    /// `maxThreadsDim`.
    pub maxThreadsDim: [c_int; 3],
    /// `maxGridSize`.
    pub maxGridSize: [c_int; 3],
    /// `clockRate`.
    pub clockRate: c_int,
    /// `memoryClockRate`.
    pub memoryClockRate: c_int,
    /// `memoryBusWidth`.
    pub memoryBusWidth: c_int,
    /// `totalConstMem`.
    pub totalConstMem: usize,
    /// `major`.
    pub major: c_int,
    /// `minor`.
    pub minor: c_int,
    /// `multiProcessorCount`.
    pub multiProcessorCount: c_int,
    /// `l2CacheSize`.
    pub l2CacheSize: c_int,
    /// `maxThreadsPerMultiProcessor`.
    pub maxThreadsPerMultiProcessor: c_int,
    /// `computeMode`.
    pub computeMode: c_int,
    /// `clockInstructionRate`.
    pub clockInstructionRate: c_int,
    /// `arch`.
    pub arch: u32,
    /// `concurrentKernels`.
    pub concurrentKernels: c_int,
    /// `pciDomainID`.
    pub pciDomainID: c_int,
    /// `pciBusID`.
    pub pciBusID: c_int,
    /// `pciDeviceID`.
    pub pciDeviceID: c_int,
    /// `maxSharedMemoryPerMultiProcessor`.
    pub maxSharedMemoryPerMultiProcessor: usize,
    /// `isMultiGpuBoard`.
    pub isMultiGpuBoard: c_int,
    /// `canMapHostMemory`.
    pub canMapHostMemory: c_int,
    /// `gcnArch`.
    pub gcnArch: c_int,
    /// `gcnArchName`.
    pub gcnArchName: [c_char; 256],
    /// `integrated`.
    pub integrated: c_int,
    /// `cooperativeLaunch`.
    pub cooperativeLaunch: c_int,
    /// `cooperativeMultiDeviceLaunch`.
    pub cooperativeMultiDeviceLaunch: c_int,
    /// `maxTexture1DLinear`.
    pub maxTexture1DLinear: c_int,
    /// `maxTexture1D`.
    pub maxTexture1D: c_int,
    /// `maxTexture2D`.
    pub maxTexture2D: [c_int; 2],
    /// `maxTexture3D`.
    pub maxTexture3D: [c_int; 3],
    /// `hdpMemFlushCntl`.
    pub hdpMemFlushCntl: *mut c_uint,
    /// `hdpRegFlushCntl`.
    pub hdpRegFlushCntl: *mut c_uint,
    /// `memPitch`.
    pub memPitch: usize,
    /// `textureAlignment`.
    pub textureAlignment: usize,
    /// `texturePitchAlignment`.
    pub texturePitchAlignment: usize,
    /// `kernelExecTimeoutEnabled`.
    pub kernelExecTimeoutEnabled: c_int,
    /// `ECCEnabled`.
    pub ECCEnabled: c_int,
    /// `tccDriver`.
    pub tccDriver: c_int,
    /// `cooperativeMultiDeviceUnmatchedFunc`.
    pub cooperativeMultiDeviceUnmatchedFunc: c_int,
    /// `cooperativeMultiDeviceUnmatchedGridDim`.
    pub cooperativeMultiDeviceUnmatchedGridDim: c_int,
    /// `cooperativeMultiDeviceUnmatchedBlockDim`.
    pub cooperativeMultiDeviceUnmatchedBlockDim: c_int,
    /// `cooperativeMultiDeviceUnmatchedSharedMem`.
    pub cooperativeMultiDeviceUnmatchedSharedMem: c_int,
    /// `isLargeBar`.
    pub isLargeBar: c_int,
    /// `asicRevision`.
    pub asicRevision: c_int,
    /// `managedMemory`.
    pub managedMemory: c_int,
    /// `directManagedMemAccessFromHost`.
    pub directManagedMemAccessFromHost: c_int,
    /// `concurrentManagedAccess`.
    pub concurrentManagedAccess: c_int,
    /// `pageableMemoryAccess`.
    pub pageableMemoryAccess: c_int,
    /// `pageableMemoryAccessUsesHostPageTables`.
    pub pageableMemoryAccessUsesHostPageTables: c_int,
}

/// `hipDeviceAttribute_t`.
pub type hipDeviceAttribute_t = c_int;
/// `hipDeviceAttributeCanMapHostMemory`.
pub const hipDeviceAttributeCanMapHostMemory: hipDeviceAttribute_t = 3;
/// `hipDeviceAttributeClockRate`.
pub const hipDeviceAttributeClockRate: hipDeviceAttribute_t = 5;
/// `hipDeviceAttributeConcurrentKernels`.
pub const hipDeviceAttributeConcurrentKernels: hipDeviceAttribute_t = 8;
/// `hipDeviceAttributeL2CacheSize`.
pub const hipDeviceAttributeL2CacheSize: hipDeviceAttribute_t = 19;
/// `hipDeviceAttributeComputeCapabilityMajor`.
pub const hipDeviceAttributeComputeCapabilityMajor: hipDeviceAttribute_t = 23;
/// `hipDeviceAttributeComputeCapabilityMinor`.
pub const hipDeviceAttributeComputeCapabilityMinor: hipDeviceAttribute_t = 61;
/// `hipDeviceAttributeManagedMemory`.
pub const hipDeviceAttributeManagedMemory: hipDeviceAttribute_t = 24;
/// `hipDeviceAttributeMaxThreadsPerMultiProcessor`.
pub const hipDeviceAttributeMaxThreadsPerMultiProcessor: hipDeviceAttribute_t = 57;
/// `hipDeviceAttributeMultiprocessorCount`.
pub const hipDeviceAttributeMultiprocessorCount: hipDeviceAttribute_t = 63;
/// `hipDeviceAttributePciBusId`.
pub const hipDeviceAttributePciBusId: hipDeviceAttribute_t = 67;
/// `hipDeviceAttributePciDeviceId`.
pub const hipDeviceAttributePciDeviceId: hipDeviceAttribute_t = 68;
/// `hipDeviceAttributePciDomainID`.
pub const hipDeviceAttributePciDomainID: hipDeviceAttribute_t = 69;
/// `hipDeviceAttributeMaxSharedMemoryPerBlock`.
pub const hipDeviceAttributeMaxSharedMemoryPerBlock: hipDeviceAttribute_t = 74;
/// `hipDeviceAttributeTotalGlobalMem`.
pub const hipDeviceAttributeTotalGlobalMem: hipDeviceAttribute_t = 84;
/// `hipDeviceAttributeWarpSize`.
pub const hipDeviceAttributeWarpSize: hipDeviceAttribute_t = 87;
/// `hipDeviceAttributeMaxBlockDimX`.
pub const hipDeviceAttributeMaxBlockDimX: hipDeviceAttribute_t = 26;
/// `hipDeviceAttributeMaxBlockDimY`.
pub const hipDeviceAttributeMaxBlockDimY: hipDeviceAttribute_t = 27;
/// `hipDeviceAttributeMaxBlockDimZ`.
pub const hipDeviceAttributeMaxBlockDimZ: hipDeviceAttribute_t = 28;
/// `hipDeviceAttributeMaxGridDimX`.
pub const hipDeviceAttributeMaxGridDimX: hipDeviceAttribute_t = 29;
/// `hipDeviceAttributeMaxGridDimY`.
pub const hipDeviceAttributeMaxGridDimY: hipDeviceAttribute_t = 30;
/// `hipDeviceAttributeMaxGridDimZ`.
pub const hipDeviceAttributeMaxGridDimZ: hipDeviceAttribute_t = 31;
/// `hipDeviceAttributeMaxThreadsPerBlock`.
pub const hipDeviceAttributeMaxThreadsPerBlock: hipDeviceAttribute_t = 56;
/// `hipDeviceAttributeMaxPitch`.
pub const hipDeviceAttributeMaxPitch: hipDeviceAttribute_t = 58;
/// `hipDeviceAttributeMaxRegistersPerBlock`.
pub const hipDeviceAttributeMaxRegistersPerBlock: hipDeviceAttribute_t = 71;
/// `hipDeviceAttributeTotalConstantMemory`.
pub const hipDeviceAttributeTotalConstantMemory: hipDeviceAttribute_t = 83;
/// `hipDeviceAttributeEccEnabled`.
pub const hipDeviceAttributeEccEnabled: hipDeviceAttribute_t = 0;
/// `hipDeviceAttributeComputeMode`.
pub const hipDeviceAttributeComputeMode: hipDeviceAttribute_t = 6;
/// `hipDeviceAttributeIntegrated`.
pub const hipDeviceAttributeIntegrated: hipDeviceAttribute_t = 16;
/// `hipDeviceAttributeIsMultiGpuBoard`.
pub const hipDeviceAttributeIsMultiGpuBoard: hipDeviceAttribute_t = 17;
/// `hipDeviceAttributeKernelExecTimeout`.
pub const hipDeviceAttributeKernelExecTimeout: hipDeviceAttribute_t = 18;
/// `hipDeviceAttributeMemoryBusWidth`.
pub const hipDeviceAttributeMemoryBusWidth: hipDeviceAttribute_t = 59;
/// `hipDeviceAttributeMemoryClockRate`.
pub const hipDeviceAttributeMemoryClockRate: hipDeviceAttribute_t = 60;
/// `hipDeviceAttributeMaxSharedMemoryPerMultiprocessor`.
pub const hipDeviceAttributeMaxSharedMemoryPerMultiprocessor: hipDeviceAttribute_t = 10002;
/// `hipDeviceAttributeConcurrentManagedAccess`.
pub const hipDeviceAttributeConcurrentManagedAccess: hipDeviceAttribute_t = 9;
/// `hipDeviceAttributeDirectManagedMemAccessFromHost`.
pub const hipDeviceAttributeDirectManagedMemAccessFromHost: hipDeviceAttribute_t = 13;
/// `hipDeviceAttributePageableMemoryAccess`.
pub const hipDeviceAttributePageableMemoryAccess: hipDeviceAttribute_t = 65;
/// `hipDeviceAttributePageableMemoryAccessUsesHostPageTables`.
pub const hipDeviceAttributePageableMemoryAccessUsesHostPageTables: hipDeviceAttribute_t = 66;
/// `hipDeviceAttributeCooperativeLaunch`.
pub const hipDeviceAttributeCooperativeLaunch: hipDeviceAttribute_t = 10;
/// `hipDeviceAttributeCooperativeMultiDeviceLaunch`.
pub const hipDeviceAttributeCooperativeMultiDeviceLaunch: hipDeviceAttribute_t = 11;
/// `hipDeviceAttributeCooperativeMultiDeviceUnmatchedFunc`.
pub const hipDeviceAttributeCooperativeMultiDeviceUnmatchedFunc: hipDeviceAttribute_t = 10007;
/// `hipDeviceAttributeCooperativeMultiDeviceUnmatchedGridDim`.
pub const hipDeviceAttributeCooperativeMultiDeviceUnmatchedGridDim: hipDeviceAttribute_t = 10008;
/// `hipDeviceAttributeCooperativeMultiDeviceUnmatchedBlockDim`.
pub const hipDeviceAttributeCooperativeMultiDeviceUnmatchedBlockDim: hipDeviceAttribute_t = 10009;
/// `hipDeviceAttributeCooperativeMultiDeviceUnmatchedSharedMem`.
pub const hipDeviceAttributeCooperativeMultiDeviceUnmatchedSharedMem: hipDeviceAttribute_t = 10010;
/// `hipDeviceAttributePhysicalMultiProcessorCount`.
pub const hipDeviceAttributePhysicalMultiProcessorCount: hipDeviceAttribute_t = 10015;
/// `hipDeviceAttributeCanUseStreamWaitValue`.
pub const hipDeviceAttributeCanUseStreamWaitValue: hipDeviceAttribute_t = 10013;
/// `hipDeviceAttributeImageSupport`.
pub const hipDeviceAttributeImageSupport: hipDeviceAttribute_t = 10014;
/// `hipDeviceAttributeFineGrainSupport`.
pub const hipDeviceAttributeFineGrainSupport: hipDeviceAttribute_t = 10016;
/// `hipDeviceAttributeMemoryPoolsSupported`.
pub const hipDeviceAttributeMemoryPoolsSupported: hipDeviceAttribute_t = 88;
/// `hipDeviceAttributeMaxTexture1DWidth`.
pub const hipDeviceAttributeMaxTexture1DWidth: hipDeviceAttribute_t = 39;
/// `hipDeviceAttributeMaxTexture2DWidth`.
pub const hipDeviceAttributeMaxTexture2DWidth: hipDeviceAttribute_t = 43;
/// `hipDeviceAttributeMaxTexture2DHeight`.
pub const hipDeviceAttributeMaxTexture2DHeight: hipDeviceAttribute_t = 44;
/// `hipDeviceAttributeMaxTexture3DWidth`.
pub const hipDeviceAttributeMaxTexture3DWidth: hipDeviceAttribute_t = 49;
/// `hipDeviceAttributeMaxTexture3DHeight`.
pub const hipDeviceAttributeMaxTexture3DHeight: hipDeviceAttribute_t = 50;
/// `hipDeviceAttributeMaxTexture3DDepth`.
pub const hipDeviceAttributeMaxTexture3DDepth: hipDeviceAttribute_t = 51;
/// `hipDeviceAttributeTextureAlignment`.
pub const hipDeviceAttributeTextureAlignment: hipDeviceAttribute_t = 81;
/// `hipDeviceAttributeTexturePitchAlignment`.
pub const hipDeviceAttributeTexturePitchAlignment: hipDeviceAttribute_t = 82;
/// `hipDeviceAttributeHdpMemFlushCntl`.
pub const hipDeviceAttributeHdpMemFlushCntl: hipDeviceAttribute_t = 10005;
/// `hipDeviceAttributeHdpRegFlushCntl`.
pub const hipDeviceAttributeHdpRegFlushCntl: hipDeviceAttribute_t = 10006;
/// `hipDeviceAttributeAsicRevision`.
pub const hipDeviceAttributeAsicRevision: hipDeviceAttribute_t = 10012;
/// `hipDeviceAttributeIsLargeBar`.
pub const hipDeviceAttributeIsLargeBar: hipDeviceAttribute_t = 10011;
