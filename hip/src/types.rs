//! HIP 5.2 structs and enum values, written from `hip/hip_runtime_api.h` (Debian
//! `libamdhip64-dev` 5.2). `tests/c/layout.c` checks every size and offset against the
//! header through [`crate::layout`].

#![allow(non_upper_case_globals)]

use std::ffi::{c_int, c_uint, c_void};

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
/// `hipHostMalloc` flag `hipHostMallocDefault`.
pub const hipHostMallocDefault: c_uint = 0;
/// `hipExtMallocWithFlags` flag `hipDeviceMallocDefault`.
pub const hipDeviceMallocDefault: c_uint = 0;
/// `hipExtMallocWithFlags` flag `hipMallocSignalMemory`.
pub const hipMallocSignalMemory: c_uint = 2;

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
