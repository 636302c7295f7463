//! Raw KFD ABI: the `#[repr(C)]` argument structs, request codes and constants of
//! `include/uapi/linux/kfd_ioctl.h` up to KFD interface version 1.22 (and the 128-byte
//! `kfd_dbg_device_info_entry` that followed it); the version history and its sources are
//! in `firmware-notes/kfd-abi.md`.
//!
//! Every struct follows the kernel header field for field, in the same order, with the
//! header's explicit `pad` members and nothing else; the `zerocopy` derives prove at
//! compile time that no implicit padding exists, and `tests/abi_conformance.rs` compares
//! every size and field offset with the host's installed header.
//!
//! Names drop the `kfd_ioctl_` prefix and use Rust case: `kfd_ioctl_create_queue_args`
//! is [`CreateQueueArgs`].

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// KFD interface major version this crate speaks.
pub const KFD_IOCTL_MAJOR_VERSION: u32 = 1;
/// Newest KFD interface minor version whose ABI this crate models.
pub const KFD_IOCTL_MINOR_VERSION: u32 = 22;

/// The ioctl "type" byte of every KFD request (`AMDKFD_IOCTL_BASE`).
pub const AMDKFD_IOCTL_BASE: u8 = b'K';

// ---------------------------------------------------------------------------------------
// Request-code arithmetic (asm-generic/ioctl.h, the layout on x86-64 and arm64).
// ---------------------------------------------------------------------------------------

/// Bit position of the number field in a request code.
pub const IOC_NRSHIFT: u32 = 0;
/// Bit position of the type field.
pub const IOC_TYPESHIFT: u32 = 8;
/// Bit position of the 14-bit size field.
pub const IOC_SIZESHIFT: u32 = 16;
/// Bit position of the direction field.
pub const IOC_DIRSHIFT: u32 = 30;
/// Largest size the 14-bit size field can carry.
pub const IOC_SIZEMASK: u32 = (1 << 14) - 1;
/// Direction: userspace writes the argument (kernel reads it).
pub const IOC_WRITE: u32 = 1;
/// Direction: userspace reads the argument (kernel writes it).
pub const IOC_READ: u32 = 2;

/// `_IOC(dir, type, nr, size)`.
pub const fn ioc(dir: u32, ty: u8, nr: u32, size: usize) -> u32 {
    (dir << IOC_DIRSHIFT)
        | ((size as u32 & IOC_SIZEMASK) << IOC_SIZESHIFT)
        | ((ty as u32) << IOC_TYPESHIFT)
        | (nr << IOC_NRSHIFT)
}
const fn ior<T>(nr: u32) -> u32 {
    ioc(IOC_READ, AMDKFD_IOCTL_BASE, nr, core::mem::size_of::<T>())
}
const fn iow<T>(nr: u32) -> u32 {
    ioc(IOC_WRITE, AMDKFD_IOCTL_BASE, nr, core::mem::size_of::<T>())
}
const fn iowr<T>(nr: u32) -> u32 {
    ioc(
        IOC_READ | IOC_WRITE,
        AMDKFD_IOCTL_BASE,
        nr,
        core::mem::size_of::<T>(),
    )
}
/// The number field (`_IOC_NR`) of a request code.
pub const fn ioc_nr(code: u32) -> u32 {
    code & 0xff
}
/// The size field (`_IOC_SIZE`) of a request code.
pub const fn ioc_size(code: u32) -> u32 {
    (code >> IOC_SIZESHIFT) & IOC_SIZEMASK
}

// ---------------------------------------------------------------------------------------
// Version
// ---------------------------------------------------------------------------------------

/// `struct kfd_ioctl_get_version_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct GetVersionArgs {
    /// From KFD.
    pub major_version: u32,
    /// From KFD.
    pub minor_version: u32,
}

// ---------------------------------------------------------------------------------------
// Queues
// ---------------------------------------------------------------------------------------

/// `KFD_IOC_QUEUE_TYPE_COMPUTE`: a PM4 compute queue.
pub const KFD_IOC_QUEUE_TYPE_COMPUTE: u32 = 0x0;
/// `KFD_IOC_QUEUE_TYPE_SDMA`.
pub const KFD_IOC_QUEUE_TYPE_SDMA: u32 = 0x1;
/// `KFD_IOC_QUEUE_TYPE_COMPUTE_AQL`.
pub const KFD_IOC_QUEUE_TYPE_COMPUTE_AQL: u32 = 0x2;
/// `KFD_IOC_QUEUE_TYPE_SDMA_XGMI`.
pub const KFD_IOC_QUEUE_TYPE_SDMA_XGMI: u32 = 0x3;
/// `KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID` (KFD 1.17).
pub const KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID: u32 = 0x4;
/// `KFD_MAX_QUEUE_PERCENTAGE`.
pub const KFD_MAX_QUEUE_PERCENTAGE: u32 = 100;
/// `KFD_MAX_QUEUE_PRIORITY`.
pub const KFD_MAX_QUEUE_PRIORITY: u32 = 15;
/// `KFD_MIN_QUEUE_RING_SIZE` (bytes; the kernel rejects smaller rings).
pub const KFD_MIN_QUEUE_RING_SIZE: u32 = 1024;

/// `struct kfd_ioctl_create_queue_args` in its KFD 1.22 form (with `sdma_engine_id`, 1.17,
/// and `metadata_ring_size`, 1.22, which was the `pad` member before).
///
/// Older kernels know the 88-byte form without the last two members; the kernel copies
/// `max(user size, kernel size)` bytes and zero-fills, so the longer form is accepted by
/// every kernel (kfd_chardev.c `kfd_ioctl`).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct CreateQueueArgs {
    /// To KFD: GPU VA of the ring.
    pub ring_base_address: u64,
    /// To KFD: GPU VA of the write pointer.
    pub write_pointer_address: u64,
    /// To KFD: GPU VA of the read pointer.
    pub read_pointer_address: u64,
    /// From KFD: mmap offset of the queue's doorbell.
    pub doorbell_offset: u64,
    /// To KFD: ring size in bytes (power of two).
    pub ring_size: u32,
    /// To KFD.
    pub gpu_id: u32,
    /// To KFD: `KFD_IOC_QUEUE_TYPE_*`.
    pub queue_type: u32,
    /// To KFD: 0..=100 in bits 0..7.
    pub queue_percentage: u32,
    /// To KFD: 0..=15.
    pub queue_priority: u32,
    /// From KFD.
    pub queue_id: u32,
    /// To KFD.
    pub eop_buffer_address: u64,
    /// To KFD.
    pub eop_buffer_size: u64,
    /// To KFD.
    pub ctx_save_restore_address: u64,
    /// To KFD.
    pub ctx_save_restore_size: u32,
    /// To KFD.
    pub ctl_stack_size: u32,
    /// To KFD (1.17): engine for `KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID`.
    pub sdma_engine_id: u32,
    /// To KFD (1.22; `pad` before): bytes of the metadata ring that follows the AQL ring
    /// in the same allocation, 0 or a power of two. Kernels before 1.22 ignore it (it was
    /// padding), so 0 is the only portable value.
    pub metadata_ring_size: u32,
}

/// `struct kfd_ioctl_destroy_queue_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct DestroyQueueArgs {
    /// To KFD.
    pub queue_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_update_queue_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct UpdateQueueArgs {
    /// To KFD.
    pub ring_base_address: u64,
    /// To KFD.
    pub queue_id: u32,
    /// To KFD.
    pub ring_size: u32,
    /// To KFD.
    pub queue_percentage: u32,
    /// To KFD.
    pub queue_priority: u32,
}

/// `struct kfd_ioctl_set_cu_mask_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SetCuMaskArgs {
    /// To KFD.
    pub queue_id: u32,
    /// To KFD: number of mask *bits* (a multiple of 32).
    pub num_cu_mask: u32,
    /// To KFD: pointer to `num_cu_mask / 32` u32 words.
    pub cu_mask_ptr: u64,
}

/// `struct kfd_ioctl_get_queue_wave_state_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct GetQueueWaveStateArgs {
    /// To KFD.
    pub ctl_stack_address: u64,
    /// From KFD.
    pub ctl_stack_used_size: u32,
    /// From KFD.
    pub save_area_used_size: u32,
    /// To KFD.
    pub queue_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_get_available_memory_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct GetAvailableMemoryArgs {
    /// From KFD: bytes of VRAM this process can still allocate.
    pub available: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

// ---------------------------------------------------------------------------------------
// Memory policy, clocks, apertures
// ---------------------------------------------------------------------------------------

/// `KFD_IOC_CACHE_POLICY_COHERENT`.
pub const KFD_IOC_CACHE_POLICY_COHERENT: u32 = 0;
/// `KFD_IOC_CACHE_POLICY_NONCOHERENT`.
pub const KFD_IOC_CACHE_POLICY_NONCOHERENT: u32 = 1;

/// `struct kfd_ioctl_set_memory_policy_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SetMemoryPolicyArgs {
    /// To KFD.
    pub alternate_aperture_base: u64,
    /// To KFD.
    pub alternate_aperture_size: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// To KFD: `KFD_IOC_CACHE_POLICY_*`.
    pub default_policy: u32,
    /// To KFD: `KFD_IOC_CACHE_POLICY_*`.
    pub alternate_policy: u32,
    /// To KFD (1.18; `pad` before): `KFD_PROC_FLAG_*` bits.
    pub misc_process_flag: u32,
}

/// `KFD_PROC_FLAG_MFMA_HIGH_PRECISION` for [`SetMemoryPolicyArgs::misc_process_flag`]
/// (KFD 1.18).
pub const KFD_PROC_FLAG_MFMA_HIGH_PRECISION: u32 = 1 << 0;

/// `struct kfd_ioctl_get_clock_counters_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct GetClockCountersArgs {
    /// From KFD: GPU timestamp counter.
    pub gpu_clock_counter: u64,
    /// From KFD: CPU timestamp counter (TSC-like, raw).
    pub cpu_clock_counter: u64,
    /// From KFD: CLOCK_BOOTTIME in ns.
    pub system_clock_counter: u64,
    /// From KFD: frequency of `system_clock_counter` (1 GHz).
    pub system_clock_freq: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_process_device_apertures`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct ProcessDeviceApertures {
    /// From KFD.
    pub lds_base: u64,
    /// From KFD.
    pub lds_limit: u64,
    /// From KFD.
    pub scratch_base: u64,
    /// From KFD.
    pub scratch_limit: u64,
    /// From KFD.
    pub gpuvm_base: u64,
    /// From KFD.
    pub gpuvm_limit: u64,
    /// From KFD.
    pub gpu_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `NUM_OF_SUPPORTED_GPUS`: entries in the deprecated fixed-size apertures ioctl.
pub const NUM_OF_SUPPORTED_GPUS: usize = 7;

/// `struct kfd_ioctl_get_process_apertures_args` (deprecated; at most 7 GPUs).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct GetProcessAperturesArgs {
    /// From KFD.
    pub process_apertures: [ProcessDeviceApertures; NUM_OF_SUPPORTED_GPUS],
    /// From KFD: 1..=7.
    pub num_of_nodes: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_get_process_apertures_new_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct GetProcessAperturesNewArgs {
    /// To KFD: pointer to a user array of [`ProcessDeviceApertures`].
    pub kfd_process_device_apertures_ptr: u64,
    /// To KFD: entries in the array (0 asks for the count); from KFD: entries filled.
    pub num_of_nodes: u32,
    /// Padding named in the header.
    pub pad: u32,
}

// ---------------------------------------------------------------------------------------
// Events
// ---------------------------------------------------------------------------------------

/// `KFD_INVALID_FD`.
pub const KFD_INVALID_FD: u32 = 0xffff_ffff;
/// `KFD_IOC_EVENT_SIGNAL`.
pub const KFD_IOC_EVENT_SIGNAL: u32 = 0;
/// `KFD_IOC_EVENT_NODECHANGE`.
pub const KFD_IOC_EVENT_NODECHANGE: u32 = 1;
/// `KFD_IOC_EVENT_DEVICESTATECHANGE`.
pub const KFD_IOC_EVENT_DEVICESTATECHANGE: u32 = 2;
/// `KFD_IOC_EVENT_HW_EXCEPTION`.
pub const KFD_IOC_EVENT_HW_EXCEPTION: u32 = 3;
/// `KFD_IOC_EVENT_SYSTEM_EVENT`.
pub const KFD_IOC_EVENT_SYSTEM_EVENT: u32 = 4;
/// `KFD_IOC_EVENT_DEBUG_EVENT`.
pub const KFD_IOC_EVENT_DEBUG_EVENT: u32 = 5;
/// `KFD_IOC_EVENT_PROFILE_EVENT`.
pub const KFD_IOC_EVENT_PROFILE_EVENT: u32 = 6;
/// `KFD_IOC_EVENT_QUEUE_EVENT`.
pub const KFD_IOC_EVENT_QUEUE_EVENT: u32 = 7;
/// `KFD_IOC_EVENT_MEMORY`.
pub const KFD_IOC_EVENT_MEMORY: u32 = 8;
/// `KFD_IOC_WAIT_RESULT_COMPLETE`.
pub const KFD_IOC_WAIT_RESULT_COMPLETE: u32 = 0;
/// `KFD_IOC_WAIT_RESULT_TIMEOUT`.
pub const KFD_IOC_WAIT_RESULT_TIMEOUT: u32 = 1;
/// `KFD_IOC_WAIT_RESULT_FAIL`.
pub const KFD_IOC_WAIT_RESULT_FAIL: u32 = 2;
/// `KFD_SIGNAL_EVENT_LIMIT`: slots in the event page (8 bytes each).
pub const KFD_SIGNAL_EVENT_LIMIT: u32 = 4096;
/// `KFD_HW_EXCEPTION_WHOLE_GPU_RESET`.
pub const KFD_HW_EXCEPTION_WHOLE_GPU_RESET: u32 = 0;
/// `KFD_HW_EXCEPTION_PER_ENGINE_RESET`.
pub const KFD_HW_EXCEPTION_PER_ENGINE_RESET: u32 = 1;
/// `KFD_HW_EXCEPTION_GPU_HANG`.
pub const KFD_HW_EXCEPTION_GPU_HANG: u32 = 0;
/// `KFD_HW_EXCEPTION_ECC`.
pub const KFD_HW_EXCEPTION_ECC: u32 = 1;
/// `KFD_MEM_ERR_NO_RAS`.
pub const KFD_MEM_ERR_NO_RAS: u32 = 0;
/// `KFD_MEM_ERR_SRAM_ECC`.
pub const KFD_MEM_ERR_SRAM_ECC: u32 = 1;
/// `KFD_MEM_ERR_POISON_CONSUMED`.
pub const KFD_MEM_ERR_POISON_CONSUMED: u32 = 2;
/// `KFD_MEM_ERR_GPU_HANG`.
pub const KFD_MEM_ERR_GPU_HANG: u32 = 3;

/// `struct kfd_ioctl_create_event_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct CreateEventArgs {
    /// From KFD: mmap offset of the event page (first signal event only).
    pub event_page_offset: u64,
    /// From KFD: signal events only; the value the CP writes to the mailbox.
    pub event_trigger_data: u32,
    /// To KFD: `KFD_IOC_EVENT_*`.
    pub event_type: u32,
    /// To KFD.
    pub auto_reset: u32,
    /// To KFD: only for some event types.
    pub node_id: u32,
    /// From KFD.
    pub event_id: u32,
    /// From KFD: slot index in the event page.
    pub event_slot_index: u32,
}

/// `struct kfd_ioctl_destroy_event_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct DestroyEventArgs {
    /// To KFD.
    pub event_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_set_event_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SetEventArgs {
    /// To KFD.
    pub event_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_reset_event_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct ResetEventArgs {
    /// To KFD.
    pub event_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_memory_exception_failure`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct MemoryExceptionFailure {
    /// Page not present or supervisor privilege.
    pub not_present: u32,
    /// Write access to a read-only page.
    pub read_only: u32,
    /// Execute access to a page marked NX.
    pub no_execute: u32,
    /// The exact fault address is unknown.
    pub imprecise: u32,
}

/// `struct kfd_hsa_memory_exception_data`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct HsaMemoryExceptionData {
    /// What kind of access failed.
    pub failure: MemoryExceptionFailure,
    /// Faulting virtual address.
    pub va: u64,
    /// GPU that faulted.
    pub gpu_id: u32,
    /// `KFD_MEM_ERR_*` (`ErrorType` in the header).
    pub error_type: u32,
}

/// `struct kfd_hsa_hw_exception_data`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct HsaHwExceptionData {
    /// `KFD_HW_EXCEPTION_*_RESET`.
    pub reset_type: u32,
    /// `KFD_HW_EXCEPTION_GPU_HANG` or `_ECC`.
    pub reset_cause: u32,
    /// Non-zero when VRAM contents were lost.
    pub memory_lost: u32,
    /// GPU that raised the exception.
    pub gpu_id: u32,
}

/// `struct kfd_hsa_signal_event_data` (KFD 1.14).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct HsaSignalEventData {
    /// To and from KFD: the event age the waiter last saw (0 = don't care).
    pub last_event_age: u64,
}

/// `struct kfd_event_data`.
///
/// The header's anonymous union (memory exception, hw exception, signal data; 32 bytes,
/// 8-byte aligned) is kept as raw words; [`EventData::memory_exception`],
/// [`EventData::hw_exception`] and [`EventData::signal`] give typed views.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct EventData {
    /// The union's bytes.
    pub payload: [u64; 4],
    /// Pointer to an extension structure for future exception types.
    pub kfd_event_data_ext: u64,
    /// To KFD.
    pub event_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

impl EventData {
    /// A wait entry for `event_id` carrying `last_event_age` (0 = no age check).
    pub fn for_signal(event_id: u32, last_event_age: u64) -> Self {
        let mut e = EventData {
            event_id,
            ..Default::default()
        };
        e.set_signal(HsaSignalEventData { last_event_age });
        e
    }
    /// The union read as memory exception data.
    pub fn memory_exception(&self) -> HsaMemoryExceptionData {
        HsaMemoryExceptionData::read_from_bytes(self.payload.as_bytes()).unwrap_or_default()
    }
    /// The union read as hardware exception data.
    pub fn hw_exception(&self) -> HsaHwExceptionData {
        HsaHwExceptionData::read_from_prefix(self.payload.as_bytes())
            .map(|(v, _)| v)
            .unwrap_or_default()
    }
    /// The union read as signal event data.
    pub fn signal(&self) -> HsaSignalEventData {
        HsaSignalEventData {
            last_event_age: self.payload[0],
        }
    }
    /// Store memory exception data in the union.
    pub fn set_memory_exception(&mut self, d: HsaMemoryExceptionData) {
        self.payload.as_mut_bytes().copy_from_slice(d.as_bytes());
    }
    /// Store hardware exception data in the union (the rest is zeroed).
    pub fn set_hw_exception(&mut self, d: HsaHwExceptionData) {
        self.payload = [0; 4];
        self.payload.as_mut_bytes()[..16].copy_from_slice(d.as_bytes());
    }
    /// Store signal event data in the union (the rest is zeroed).
    pub fn set_signal(&mut self, d: HsaSignalEventData) {
        self.payload = [d.last_event_age, 0, 0, 0];
    }
}

/// `struct kfd_ioctl_wait_events_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct WaitEventsArgs {
    /// To KFD: pointer to an array of [`EventData`].
    pub events_ptr: u64,
    /// To KFD.
    pub num_events: u32,
    /// To KFD: non-zero = wait until all events are signalled.
    pub wait_for_all: u32,
    /// To KFD: milliseconds; `0xffffffff` waits forever.
    pub timeout: u32,
    /// From KFD: `KFD_IOC_WAIT_RESULT_*`.
    pub wait_result: u32,
}

/// `timeout` value of [`WaitEventsArgs`] that waits without limit.
pub const KFD_EVENT_TIMEOUT_INFINITE: u32 = 0xffff_ffff;

// ---------------------------------------------------------------------------------------
// Scratch, trap handler, VM
// ---------------------------------------------------------------------------------------

/// `struct kfd_ioctl_set_scratch_backing_va_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SetScratchBackingVaArgs {
    /// To KFD.
    pub va_addr: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_set_trap_handler_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SetTrapHandlerArgs {
    /// To KFD: trap base address.
    pub tba_addr: u64,
    /// To KFD: trap memory address.
    pub tma_addr: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_acquire_vm_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct AcquireVmArgs {
    /// To KFD: the render node fd of this GPU.
    pub drm_fd: u32,
    /// To KFD.
    pub gpu_id: u32,
}

// ---------------------------------------------------------------------------------------
// Memory objects
// ---------------------------------------------------------------------------------------

/// `KFD_IOC_ALLOC_MEM_FLAGS_VRAM`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_VRAM: u32 = 1 << 0;
/// `KFD_IOC_ALLOC_MEM_FLAGS_GTT`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_GTT: u32 = 1 << 1;
/// `KFD_IOC_ALLOC_MEM_FLAGS_USERPTR`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_USERPTR: u32 = 1 << 2;
/// `KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL: u32 = 1 << 3;
/// `KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP: u32 = 1 << 4;
/// `KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE: u32 = 1 << 31;
/// `KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE: u32 = 1 << 30;
/// `KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC: u32 = 1 << 29;
/// `KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE: u32 = 1 << 28;
/// `KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM: u32 = 1 << 27;
/// `KFD_IOC_ALLOC_MEM_FLAGS_COHERENT`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_COHERENT: u32 = 1 << 26;
/// `KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED: u32 = 1 << 25;
/// `KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT`.
pub const KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT: u32 = 1 << 24;
/// `KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS` (KFD 1.16).
pub const KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS: u32 = 1 << 23;

bitflags::bitflags! {
    /// The `flags` of [`AllocMemoryOfGpuArgs`] as a typed set (same bits as the constants).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct AllocFlags: u32 {
        /// VRAM.
        const VRAM = KFD_IOC_ALLOC_MEM_FLAGS_VRAM;
        /// GTT (system memory the GPU reaches through the GART).
        const GTT = KFD_IOC_ALLOC_MEM_FLAGS_GTT;
        /// User pages registered at `mmap_offset`.
        const USERPTR = KFD_IOC_ALLOC_MEM_FLAGS_USERPTR;
        /// The GPU's doorbell aperture page(s).
        const DOORBELL = KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL;
        /// The MMIO remap page (HDP flush).
        const MMIO_REMAP = KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP;
        /// GPU-writable.
        const WRITABLE = KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
        /// GPU-executable.
        const EXECUTABLE = KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
        /// CPU-visible VRAM.
        const PUBLIC = KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
        /// Fail rather than place the BO elsewhere.
        const NO_SUBSTITUTE = KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE;
        /// Memory of an AQL queue (ring/rptr/wptr).
        const AQL_QUEUE_MEM = KFD_IOC_ALLOC_MEM_FLAGS_AQL_QUEUE_MEM;
        /// Fine-grained coherent.
        const COHERENT = KFD_IOC_ALLOC_MEM_FLAGS_COHERENT;
        /// Uncached on the GPU.
        const UNCACHED = KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
        /// Coherent with device-scope atomics.
        const EXT_COHERENT = KFD_IOC_ALLOC_MEM_FLAGS_EXT_COHERENT;
        /// Physically contiguous VRAM.
        const CONTIGUOUS = KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS;
    }
}

/// `struct kfd_ioctl_alloc_memory_of_gpu_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct AllocMemoryOfGpuArgs {
    /// To KFD: GPU VA of the allocation.
    pub va_addr: u64,
    /// To KFD: bytes.
    pub size: u64,
    /// From KFD: `gpu_id << 32 | id` on current kernels.
    pub handle: u64,
    /// To KFD for USERPTR (the CPU address); from KFD otherwise (mmap offset).
    pub mmap_offset: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// To KFD: `KFD_IOC_ALLOC_MEM_FLAGS_*`.
    pub flags: u32,
}

/// `struct kfd_ioctl_free_memory_of_gpu_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct FreeMemoryOfGpuArgs {
    /// To KFD.
    pub handle: u64,
}

/// `struct kfd_ioctl_map_memory_to_gpu_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct MapMemoryToGpuArgs {
    /// To KFD.
    pub handle: u64,
    /// To KFD: pointer to `n_devices` u32 gpu_ids.
    pub device_ids_array_ptr: u64,
    /// To KFD.
    pub n_devices: u32,
    /// To/from KFD: devices from the start of the array already mapped.
    pub n_success: u32,
}

/// `struct kfd_ioctl_unmap_memory_from_gpu_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct UnmapMemoryFromGpuArgs {
    /// To KFD.
    pub handle: u64,
    /// To KFD: pointer to `n_devices` u32 gpu_ids.
    pub device_ids_array_ptr: u64,
    /// To KFD.
    pub n_devices: u32,
    /// To/from KFD.
    pub n_success: u32,
}

/// `struct kfd_ioctl_alloc_queue_gws_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct AllocQueueGwsArgs {
    /// To KFD.
    pub queue_id: u32,
    /// To KFD.
    pub num_gws: u32,
    /// From KFD.
    pub first_gws: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_get_dmabuf_info_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct GetDmabufInfoArgs {
    /// From KFD.
    pub size: u64,
    /// To KFD.
    pub metadata_ptr: u64,
    /// To KFD (space) / from KFD (actual size).
    pub metadata_size: u32,
    /// From KFD.
    pub gpu_id: u32,
    /// From KFD: `KFD_IOC_ALLOC_MEM_FLAGS_*`.
    pub flags: u32,
    /// To KFD.
    pub dmabuf_fd: u32,
}

/// `struct kfd_ioctl_import_dmabuf_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct ImportDmabufArgs {
    /// To KFD.
    pub va_addr: u64,
    /// From KFD.
    pub handle: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// To KFD.
    pub dmabuf_fd: u32,
}

/// `struct kfd_ioctl_export_dmabuf_args` (KFD 1.12).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct ExportDmabufArgs {
    /// To KFD.
    pub handle: u64,
    /// To KFD: `O_CLOEXEC` / `O_RDWR` style flags for the new fd.
    pub flags: u32,
    /// From KFD.
    pub dmabuf_fd: u32,
}

// ---------------------------------------------------------------------------------------
// SVM
// ---------------------------------------------------------------------------------------

/// `KFD_IOCTL_SVM_FLAG_HOST_ACCESS`.
pub const KFD_IOCTL_SVM_FLAG_HOST_ACCESS: u32 = 0x0000_0001;
/// `KFD_IOCTL_SVM_FLAG_COHERENT`.
pub const KFD_IOCTL_SVM_FLAG_COHERENT: u32 = 0x0000_0002;
/// `KFD_IOCTL_SVM_FLAG_HIVE_LOCAL`.
pub const KFD_IOCTL_SVM_FLAG_HIVE_LOCAL: u32 = 0x0000_0004;
/// `KFD_IOCTL_SVM_FLAG_GPU_RO`.
pub const KFD_IOCTL_SVM_FLAG_GPU_RO: u32 = 0x0000_0008;
/// `KFD_IOCTL_SVM_FLAG_GPU_EXEC`.
pub const KFD_IOCTL_SVM_FLAG_GPU_EXEC: u32 = 0x0000_0010;
/// `KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY`.
pub const KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY: u32 = 0x0000_0020;
/// `KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED`.
pub const KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED: u32 = 0x0000_0040;
/// `KFD_IOCTL_SVM_FLAG_EXT_COHERENT`.
pub const KFD_IOCTL_SVM_FLAG_EXT_COHERENT: u32 = 0x0000_0080;
/// `KFD_IOCTL_SVM_OP_SET_ATTR`.
pub const KFD_IOCTL_SVM_OP_SET_ATTR: u32 = 0;
/// `KFD_IOCTL_SVM_OP_GET_ATTR`.
pub const KFD_IOCTL_SVM_OP_GET_ATTR: u32 = 1;
/// `KFD_IOCTL_SVM_LOCATION_SYSMEM`.
pub const KFD_IOCTL_SVM_LOCATION_SYSMEM: u32 = 0;
/// `KFD_IOCTL_SVM_LOCATION_UNDEFINED`.
pub const KFD_IOCTL_SVM_LOCATION_UNDEFINED: u32 = 0xffff_ffff;
/// `KFD_IOCTL_SVM_ATTR_PREFERRED_LOC`.
pub const KFD_IOCTL_SVM_ATTR_PREFERRED_LOC: u32 = 0;
/// `KFD_IOCTL_SVM_ATTR_PREFETCH_LOC`.
pub const KFD_IOCTL_SVM_ATTR_PREFETCH_LOC: u32 = 1;
/// `KFD_IOCTL_SVM_ATTR_ACCESS`.
pub const KFD_IOCTL_SVM_ATTR_ACCESS: u32 = 2;
/// `KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE`.
pub const KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE: u32 = 3;
/// `KFD_IOCTL_SVM_ATTR_NO_ACCESS`.
pub const KFD_IOCTL_SVM_ATTR_NO_ACCESS: u32 = 4;
/// `KFD_IOCTL_SVM_ATTR_SET_FLAGS`.
pub const KFD_IOCTL_SVM_ATTR_SET_FLAGS: u32 = 5;
/// `KFD_IOCTL_SVM_ATTR_CLR_FLAGS`.
pub const KFD_IOCTL_SVM_ATTR_CLR_FLAGS: u32 = 6;
/// `KFD_IOCTL_SVM_ATTR_GRANULARITY`.
pub const KFD_IOCTL_SVM_ATTR_GRANULARITY: u32 = 7;

/// `struct kfd_ioctl_svm_attribute`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SvmAttribute {
    /// `KFD_IOCTL_SVM_ATTR_*`.
    pub type_: u32,
    /// Meaning depends on `type_`.
    pub value: u32,
}

/// `struct kfd_ioctl_svm_args` without its flexible `attrs[]` tail.
///
/// The request code's size field must include the attribute array:
/// use [`svm_request_code`].
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SvmArgs {
    /// Page-aligned start address.
    pub start_addr: u64,
    /// Page-aligned size in bytes.
    pub size: u64,
    /// `KFD_IOCTL_SVM_OP_*`.
    pub op: u32,
    /// Number of attributes following the header.
    pub nattr: u32,
}

/// Largest attribute count whose request size still fits the 14-bit size field.
pub const SVM_MAX_ATTRS: usize = (IOC_SIZEMASK as usize - core::mem::size_of::<SvmArgs>())
    / core::mem::size_of::<SvmAttribute>();

/// The request code for an SVM call with `nattr` attributes: `AMDKFD_IOC_SVM` plus the
/// attribute bytes in the size field (the kernel copies `_IOC_SIZE(cmd)` bytes in and out;
/// libhsakmt's `svm.c` builds the code the same way). `None` when it does not fit.
pub const fn svm_request_code(nattr: usize) -> Option<u32> {
    if nattr > SVM_MAX_ATTRS {
        return None;
    }
    let attr_bytes = (nattr * core::mem::size_of::<SvmAttribute>()) as u32;
    Some(AMDKFD_IOC_SVM + (attr_bytes << IOC_SIZESHIFT))
}

/// `struct kfd_ioctl_set_xnack_mode_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SetXnackModeArgs {
    /// In: 0 disable, > 0 enable, < 0 query. Out: the current mode.
    pub xnack_enabled: i32,
}

// ---------------------------------------------------------------------------------------
// Runtime enable (KFD 1.13)
// ---------------------------------------------------------------------------------------

/// `KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK`.
pub const KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK: u32 = 1;
/// `KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK`.
pub const KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK: u32 = 2;

/// `struct kfd_runtime_info`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct RuntimeInfo {
    /// Pointer shared between runtime and debugger.
    pub r_debug: u64,
    /// `DEBUG_RUNTIME_STATE_*`.
    pub runtime_state: u32,
    /// Non-zero when trap temporaries are set up.
    pub ttmp_setup: u32,
}

/// `struct kfd_context_save_area_header`: the first 40 bytes of each XCC's context
/// save area. The runtime fills `err_payload_addr` / `err_event_id` (libhsakmt
/// `fill_cwsr_header`); on a queue exception the firmware / KFD ORs
/// `KFD_EC_MASK(code)` into the 64-bit payload and signals the event.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct ContextSaveAreaHeader {
    /// `wave_state.control_stack_offset`.
    pub control_stack_offset: u32,
    /// `wave_state.control_stack_size`.
    pub control_stack_size: u32,
    /// `wave_state.wave_state_offset`.
    pub wave_state_offset: u32,
    /// `wave_state.wave_state_size`.
    pub wave_state_size: u32,
    /// Offset of the debugger area.
    pub debug_offset: u32,
    /// Size of the debugger area.
    pub debug_size: u32,
    /// GPU address of the 64-bit error payload.
    pub err_payload_addr: u64,
    /// Event signalled on a queue error.
    pub err_event_id: u32,
    /// Reserved.
    pub reserved1: u32,
}

/// Offset of `err_payload_addr` in [`ContextSaveAreaHeader`].
pub const CWSR_HEADER_ERR_PAYLOAD_ADDR: u64 = 24;
/// Offset of `err_event_id` in [`ContextSaveAreaHeader`].
pub const CWSR_HEADER_ERR_EVENT_ID: u64 = 32;

/// `enum kfd_dbg_trap_exception_code` values reported per queue.
pub mod ec {
    /// `EC_QUEUE_WAVE_ABORT`.
    pub const QUEUE_WAVE_ABORT: u32 = 1;
    /// `EC_QUEUE_WAVE_TRAP`.
    pub const QUEUE_WAVE_TRAP: u32 = 2;
    /// `EC_QUEUE_WAVE_MATH_ERROR`.
    pub const QUEUE_WAVE_MATH_ERROR: u32 = 3;
    /// `EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION`.
    pub const QUEUE_WAVE_ILLEGAL_INSTRUCTION: u32 = 4;
    /// `EC_QUEUE_WAVE_MEMORY_VIOLATION`.
    pub const QUEUE_WAVE_MEMORY_VIOLATION: u32 = 5;
    /// `EC_QUEUE_WAVE_APERTURE_VIOLATION`.
    pub const QUEUE_WAVE_APERTURE_VIOLATION: u32 = 6;
    /// `EC_QUEUE_PACKET_DISPATCH_DIM_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_DIM_INVALID: u32 = 16;
    /// `EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID: u32 = 17;
    /// `EC_QUEUE_PACKET_DISPATCH_CODE_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_CODE_INVALID: u32 = 18;
    /// `EC_QUEUE_PACKET_RESERVED`.
    pub const QUEUE_PACKET_RESERVED: u32 = 19;
    /// `EC_QUEUE_PACKET_UNSUPPORTED`.
    pub const QUEUE_PACKET_UNSUPPORTED: u32 = 20;
    /// `EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID: u32 = 21;
    /// `EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID`.
    pub const QUEUE_PACKET_DISPATCH_REGISTER_INVALID: u32 = 22;
    /// `EC_QUEUE_PACKET_VENDOR_UNSUPPORTED`.
    pub const QUEUE_PACKET_VENDOR_UNSUPPORTED: u32 = 23;
    /// `EC_QUEUE_PREEMPTION_ERROR`.
    pub const QUEUE_PREEMPTION_ERROR: u32 = 30;

    /// `KFD_EC_MASK(code)`.
    pub const fn mask(code: u32) -> u64 {
        1u64 << (code.saturating_sub(1) & 63)
    }

    /// The `EC_*` name of a queue exception code.
    pub const fn name(code: u32) -> &'static str {
        match code {
            QUEUE_WAVE_ABORT => "EC_QUEUE_WAVE_ABORT",
            QUEUE_WAVE_TRAP => "EC_QUEUE_WAVE_TRAP",
            QUEUE_WAVE_MATH_ERROR => "EC_QUEUE_WAVE_MATH_ERROR",
            QUEUE_WAVE_ILLEGAL_INSTRUCTION => "EC_QUEUE_WAVE_ILLEGAL_INSTRUCTION",
            QUEUE_WAVE_MEMORY_VIOLATION => "EC_QUEUE_WAVE_MEMORY_VIOLATION",
            QUEUE_WAVE_APERTURE_VIOLATION => "EC_QUEUE_WAVE_APERTURE_VIOLATION",
            QUEUE_PACKET_DISPATCH_DIM_INVALID => "EC_QUEUE_PACKET_DISPATCH_DIM_INVALID",
            QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID => {
                "EC_QUEUE_PACKET_DISPATCH_GROUP_SEGMENT_SIZE_INVALID"
            }
            QUEUE_PACKET_DISPATCH_CODE_INVALID => "EC_QUEUE_PACKET_DISPATCH_CODE_INVALID",
            QUEUE_PACKET_RESERVED => "EC_QUEUE_PACKET_RESERVED",
            QUEUE_PACKET_UNSUPPORTED => "EC_QUEUE_PACKET_UNSUPPORTED",
            QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID => {
                "EC_QUEUE_PACKET_DISPATCH_WORK_GROUP_SIZE_INVALID"
            }
            QUEUE_PACKET_DISPATCH_REGISTER_INVALID => "EC_QUEUE_PACKET_DISPATCH_REGISTER_INVALID",
            QUEUE_PACKET_VENDOR_UNSUPPORTED => "EC_QUEUE_PACKET_VENDOR_UNSUPPORTED",
            QUEUE_PREEMPTION_ERROR => "EC_QUEUE_PREEMPTION_ERROR",
            _ => "EC_UNKNOWN",
        }
    }

    /// The names of the codes set in a payload, comma separated.
    pub fn describe(payload: u64) -> String {
        (1..=64u32)
            .filter(|&c| payload & mask(c) != 0)
            .map(|c| name(c).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// `struct kfd_ioctl_runtime_enable_args`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct RuntimeEnableArgs {
    /// Pointer to the runtime's `r_debug`.
    pub r_debug: u64,
    /// `KFD_RUNTIME_ENABLE_MODE_*`.
    pub mode_mask: u32,
    /// From KFD: what KFD supports.
    pub capabilities_mask: u32,
}

// ---------------------------------------------------------------------------------------
// Debugger: AMDKFD_IOC_DBG_TRAP (KFD 1.13)
// ---------------------------------------------------------------------------------------

/// `KFD_IOC_DBG_TRAP_ENABLE` (`enum kfd_dbg_trap_operations`).
pub const KFD_IOC_DBG_TRAP_ENABLE: u32 = 0;
/// `KFD_IOC_DBG_TRAP_DISABLE` (no per-op arguments).
pub const KFD_IOC_DBG_TRAP_DISABLE: u32 = 1;
/// `KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT`.
pub const KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT: u32 = 2;
/// `KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED`.
pub const KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED: u32 = 3;
/// `KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE`.
pub const KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE: u32 = 4;
/// `KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE`.
pub const KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE: u32 = 5;
/// `KFD_IOC_DBG_TRAP_SUSPEND_QUEUES`.
pub const KFD_IOC_DBG_TRAP_SUSPEND_QUEUES: u32 = 6;
/// `KFD_IOC_DBG_TRAP_RESUME_QUEUES`.
pub const KFD_IOC_DBG_TRAP_RESUME_QUEUES: u32 = 7;
/// `KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH`.
pub const KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH: u32 = 8;
/// `KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH`.
pub const KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH: u32 = 9;
/// `KFD_IOC_DBG_TRAP_SET_FLAGS`.
pub const KFD_IOC_DBG_TRAP_SET_FLAGS: u32 = 10;
/// `KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT`.
pub const KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT: u32 = 11;
/// `KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO`.
pub const KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO: u32 = 12;
/// `KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT`.
pub const KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT: u32 = 13;
/// `KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT`.
pub const KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT: u32 = 14;

/// The `KFD_IOC_DBG_TRAP_*` name of a debug trap operation.
pub const fn dbg_trap_op_name(op: u32) -> &'static str {
    match op {
        KFD_IOC_DBG_TRAP_ENABLE => "KFD_IOC_DBG_TRAP_ENABLE",
        KFD_IOC_DBG_TRAP_DISABLE => "KFD_IOC_DBG_TRAP_DISABLE",
        KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT => "KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT",
        KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED => "KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED",
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE => "KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE",
        KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE => "KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE",
        KFD_IOC_DBG_TRAP_SUSPEND_QUEUES => "KFD_IOC_DBG_TRAP_SUSPEND_QUEUES",
        KFD_IOC_DBG_TRAP_RESUME_QUEUES => "KFD_IOC_DBG_TRAP_RESUME_QUEUES",
        KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH => "KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH",
        KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH => "KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH",
        KFD_IOC_DBG_TRAP_SET_FLAGS => "KFD_IOC_DBG_TRAP_SET_FLAGS",
        KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT => "KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT",
        KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO => "KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO",
        KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT => "KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT",
        KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT => "KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT",
        _ => "KFD_IOC_DBG_TRAP_UNKNOWN",
    }
}

/// One member of the `kfd_ioctl_dbg_trap_args` union: the per-operation argument struct
/// and the operation it belongs to.
pub trait DbgTrapOpArgs: FromBytes + IntoBytes + KnownLayout + Immutable + Copy + Default {
    /// The `KFD_IOC_DBG_TRAP_*` operation that takes this struct.
    const OP: u32;
}

macro_rules! dbg_trap_op_args {
    ($(#[$doc:meta])* $name:ident, $op:ident { $($(#[$fdoc:meta])* $field:ident: $ty:ty,)* }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(
            Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout,
            Immutable,
        )]
        pub struct $name {
            $($(#[$fdoc])* pub $field: $ty,)*
        }
        impl DbgTrapOpArgs for $name {
            const OP: u32 = $op;
        }
        // Every member must fit the union.
        const _: () = assert!(core::mem::size_of::<$name>() <= DBG_TRAP_UNION_SIZE);
    };
}

/// Bytes of the `kfd_ioctl_dbg_trap_args` union: its largest members (enable,
/// suspend_queues, set_node_address_watch, query_exception_info, queue_snapshot,
/// device_snapshot) are 24 bytes, 8-byte aligned.
pub const DBG_TRAP_UNION_SIZE: usize = 24;

dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_enable_args`.
    DbgTrapEnableArgs, KFD_IOC_DBG_TRAP_ENABLE {
        /// To KFD: exceptions to raise to the debugger.
        exception_mask: u64,
        /// To KFD: pointer to the `kfd_runtime_info` buffer.
        rinfo_ptr: u64,
        /// To and from KFD: size of that buffer / of the runtime info KFD keeps.
        rinfo_size: u32,
        /// To KFD: fd KFD notifies the debugger through.
        dbg_fd: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_send_runtime_event_args`.
    DbgTrapSendRuntimeEventArgs, KFD_IOC_DBG_TRAP_SEND_RUNTIME_EVENT {
        /// To KFD: exceptions to raise to the runtime.
        exception_mask: u64,
        /// To KFD.
        gpu_id: u32,
        /// To KFD.
        queue_id: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_set_exceptions_enabled_args`.
    DbgTrapSetExceptionsEnabledArgs, KFD_IOC_DBG_TRAP_SET_EXCEPTIONS_ENABLED {
        /// To KFD: exceptions to raise to the debugger.
        exception_mask: u64,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_set_wave_launch_override_args`.
    DbgTrapSetWaveLaunchOverrideArgs, KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_OVERRIDE {
        /// To KFD: `KFD_DBG_TRAP_OVERRIDE_*`.
        override_mode: u32,
        /// To KFD: trap bits to set; from KFD: the previous mask.
        enable_mask: u32,
        /// To KFD: bits asked for; from KFD: bits supported.
        support_request_mask: u32,
        /// Padding named in the header.
        pad: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_set_wave_launch_mode_args`.
    DbgTrapSetWaveLaunchModeArgs, KFD_IOC_DBG_TRAP_SET_WAVE_LAUNCH_MODE {
        /// To KFD: `KFD_DBG_TRAP_WAVE_LAUNCH_MODE_*`.
        launch_mode: u32,
        /// Padding named in the header.
        pad: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_suspend_queues_args`.
    DbgTrapSuspendQueuesArgs, KFD_IOC_DBG_TRAP_SUSPEND_QUEUES {
        /// To KFD: exceptions to clear on suspend.
        exception_mask: u64,
        /// To and from KFD: pointer to `num_queues` queue ids (status bits come back).
        queue_array_ptr: u64,
        /// To KFD.
        num_queues: u32,
        /// To KFD: preemption grace period.
        grace_period: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_resume_queues_args`.
    DbgTrapResumeQueuesArgs, KFD_IOC_DBG_TRAP_RESUME_QUEUES {
        /// To and from KFD: pointer to `num_queues` queue ids (status bits come back).
        queue_array_ptr: u64,
        /// To KFD.
        num_queues: u32,
        /// Padding named in the header.
        pad: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_set_node_address_watch_args`.
    DbgTrapSetNodeAddressWatchArgs, KFD_IOC_DBG_TRAP_SET_NODE_ADDRESS_WATCH {
        /// To KFD: watched address.
        address: u64,
        /// To KFD: `KFD_DBG_TRAP_ADDRESS_WATCH_MODE_*`.
        mode: u32,
        /// To KFD: address mask.
        mask: u32,
        /// To KFD.
        gpu_id: u32,
        /// From KFD: the watch point id.
        id: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_clear_node_address_watch_args`.
    DbgTrapClearNodeAddressWatchArgs, KFD_IOC_DBG_TRAP_CLEAR_NODE_ADDRESS_WATCH {
        /// To KFD.
        gpu_id: u32,
        /// To KFD: the watch point id.
        id: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_set_flags_args`.
    DbgTrapSetFlagsArgs, KFD_IOC_DBG_TRAP_SET_FLAGS {
        /// To KFD: `KFD_DBG_TRAP_FLAG_*`; from KFD: the previous flags.
        flags: u32,
        /// Padding named in the header.
        pad: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_query_debug_event_args`.
    DbgTrapQueryDebugEventArgs, KFD_IOC_DBG_TRAP_QUERY_DEBUG_EVENT {
        /// To KFD: exceptions to clear; from KFD: pending exceptions.
        exception_mask: u64,
        /// From KFD.
        gpu_id: u32,
        /// From KFD.
        queue_id: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_query_exception_info_args`.
    DbgTrapQueryExceptionInfoArgs, KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO {
        /// To KFD: pointer to the info buffer.
        info_ptr: u64,
        /// To and from KFD: buffer size / size of the info KFD has.
        info_size: u32,
        /// To KFD: gpu_id or queue_id, by exception code.
        source_id: u32,
        /// To KFD: `EC_*`.
        exception_code: u32,
        /// To KFD: non-zero clears the exception.
        clear_exception: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_queue_snapshot_args`.
    DbgTrapQueueSnapshotArgs, KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT {
        /// To KFD: exceptions to clear.
        exception_mask: u64,
        /// To KFD: pointer to `num_queues` [`QueueSnapshotEntry`]-sized slots.
        snapshot_buf_ptr: u64,
        /// To KFD: slots; from KFD: queues the process has.
        num_queues: u32,
        /// To KFD: slot size; from KFD: bytes written per slot.
        entry_size: u32,
    }
);
dbg_trap_op_args!(
    /// `struct kfd_ioctl_dbg_trap_device_snapshot_args`.
    DbgTrapDeviceSnapshotArgs, KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT {
        /// To KFD: exceptions to clear.
        exception_mask: u64,
        /// To KFD: pointer to `num_devices` [`DbgDeviceInfoEntry`]-sized slots.
        snapshot_buf_ptr: u64,
        /// To KFD: slots; from KFD: devices the process has.
        num_devices: u32,
        /// To KFD: slot size; from KFD: bytes written per slot.
        entry_size: u32,
    }
);

/// `struct kfd_ioctl_dbg_trap_args` (`AMDKFD_IOC_DBG_TRAP`, KFD 1.13).
///
/// The header's anonymous union of the fourteen per-operation structs (24 bytes, 8-byte
/// aligned) is kept as raw words, like [`EventData`]'s; [`DbgTrapArgs::op_args`] and
/// [`DbgTrapArgs::set_op_args`] give typed views by [`DbgTrapOpArgs`] member.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct DbgTrapArgs {
    /// To KFD: the target process.
    pub pid: u32,
    /// To KFD: `KFD_IOC_DBG_TRAP_*`.
    pub op: u32,
    /// The union's bytes.
    pub payload: [u64; DBG_TRAP_UNION_SIZE / 8],
}

impl DbgTrapArgs {
    /// A request for operation `T::OP` on `pid` carrying `args`.
    pub fn new<T: DbgTrapOpArgs>(pid: u32, args: T) -> Self {
        let mut a = DbgTrapArgs {
            pid,
            op: T::OP,
            ..Default::default()
        };
        a.set_op_args(args);
        a
    }
    /// A `KFD_IOC_DBG_TRAP_DISABLE` request (the union is unused).
    pub fn disable(pid: u32) -> Self {
        DbgTrapArgs {
            pid,
            op: KFD_IOC_DBG_TRAP_DISABLE,
            ..Default::default()
        }
    }
    /// The union read as member `T` (whatever `op` says).
    pub fn op_args<T: DbgTrapOpArgs>(&self) -> T {
        T::read_from_prefix(self.payload.as_bytes())
            .map(|(v, _)| v)
            .unwrap_or_default()
    }
    /// Store member `T` in the union (the rest is zeroed); `op` is left alone.
    pub fn set_op_args<T: DbgTrapOpArgs>(&mut self, args: T) {
        self.payload = [0; DBG_TRAP_UNION_SIZE / 8];
        let b = args.as_bytes();
        self.payload.as_mut_bytes()[..b.len()].copy_from_slice(b);
    }
    /// Bytes of user memory KFD may read or write through the operation's pointer field
    /// (`rinfo_ptr`, `queue_array_ptr`, `info_ptr`, `snapshot_buf_ptr`); `None` for
    /// operations without one.
    pub fn user_buffer_len(&self) -> Option<u64> {
        Some(match self.op {
            KFD_IOC_DBG_TRAP_ENABLE => self.op_args::<DbgTrapEnableArgs>().rinfo_size.into(),
            KFD_IOC_DBG_TRAP_SUSPEND_QUEUES => {
                u64::from(self.op_args::<DbgTrapSuspendQueuesArgs>().num_queues) * 4
            }
            KFD_IOC_DBG_TRAP_RESUME_QUEUES => {
                u64::from(self.op_args::<DbgTrapResumeQueuesArgs>().num_queues) * 4
            }
            KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO => self
                .op_args::<DbgTrapQueryExceptionInfoArgs>()
                .info_size
                .into(),
            KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT => {
                let a = self.op_args::<DbgTrapQueueSnapshotArgs>();
                u64::from(a.num_queues) * u64::from(a.entry_size)
            }
            KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT => {
                let a = self.op_args::<DbgTrapDeviceSnapshotArgs>();
                u64::from(a.num_devices) * u64::from(a.entry_size)
            }
            _ => return None,
        })
    }
    /// Point the operation's pointer field at `ptr`; no-op for operations without one.
    pub fn set_user_buffer_ptr(&mut self, ptr: u64) {
        match self.op {
            KFD_IOC_DBG_TRAP_ENABLE => {
                let mut a = self.op_args::<DbgTrapEnableArgs>();
                a.rinfo_ptr = ptr;
                self.set_op_args(a);
            }
            KFD_IOC_DBG_TRAP_SUSPEND_QUEUES => {
                let mut a = self.op_args::<DbgTrapSuspendQueuesArgs>();
                a.queue_array_ptr = ptr;
                self.set_op_args(a);
            }
            KFD_IOC_DBG_TRAP_RESUME_QUEUES => {
                let mut a = self.op_args::<DbgTrapResumeQueuesArgs>();
                a.queue_array_ptr = ptr;
                self.set_op_args(a);
            }
            KFD_IOC_DBG_TRAP_QUERY_EXCEPTION_INFO => {
                let mut a = self.op_args::<DbgTrapQueryExceptionInfoArgs>();
                a.info_ptr = ptr;
                self.set_op_args(a);
            }
            KFD_IOC_DBG_TRAP_GET_QUEUE_SNAPSHOT => {
                let mut a = self.op_args::<DbgTrapQueueSnapshotArgs>();
                a.snapshot_buf_ptr = ptr;
                self.set_op_args(a);
            }
            KFD_IOC_DBG_TRAP_GET_DEVICE_SNAPSHOT => {
                let mut a = self.op_args::<DbgTrapDeviceSnapshotArgs>();
                a.snapshot_buf_ptr = ptr;
                self.set_op_args(a);
            }
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------
// Less-used ioctls: tile config, SMI events, CRIU, deprecated debugger (KFD <= 1.12)
// ---------------------------------------------------------------------------------------

/// `struct kfd_ioctl_get_tile_config_args` (pre-gfx9 tiling; kept for completeness).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct GetTileConfigArgs {
    /// To KFD: pointer to the tile array.
    pub tile_config_ptr: u64,
    /// To KFD: pointer to the macro tile array.
    pub macro_tile_config_ptr: u64,
    /// To KFD (allocated) / from KFD (filled).
    pub num_tile_configs: u32,
    /// To KFD (allocated) / from KFD (filled).
    pub num_macro_tile_configs: u32,
    /// To KFD.
    pub gpu_id: u32,
    /// From KFD.
    pub gb_addr_config: u32,
    /// From KFD.
    pub num_banks: u32,
    /// From KFD.
    pub num_ranks: u32,
}

/// `struct kfd_ioctl_smi_events_args` (KFD 1.3).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct SmiEventsArgs {
    /// To KFD.
    pub gpuid: u32,
    /// From KFD: an fd that delivers SMI event lines.
    pub anon_fd: u32,
}

/// `struct kfd_ioctl_criu_args` (KFD 1.7).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct CriuArgs {
    /// Pointer to [`CriuDeviceBucket`] array.
    pub devices: u64,
    /// Pointer to [`CriuBoBucket`] array.
    pub bos: u64,
    /// Pointer to private data.
    pub priv_data: u64,
    /// Size of the private data.
    pub priv_data_size: u64,
    /// Number of devices.
    pub num_devices: u32,
    /// Number of BOs.
    pub num_bos: u32,
    /// Number of opaque objects.
    pub num_objects: u32,
    /// Process being checkpointed.
    pub pid: u32,
    /// `KFD_CRIU_OP_*`.
    pub op: u32,
    /// Tail padding made explicit (the C struct is 8-byte aligned).
    pub _tail: u32,
}

/// `struct kfd_criu_device_bucket`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct CriuDeviceBucket {
    /// gpu_id seen by the user.
    pub user_gpu_id: u32,
    /// gpu_id on this machine.
    pub actual_gpu_id: u32,
    /// Render node fd.
    pub drm_fd: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_criu_bo_bucket`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct CriuBoBucket {
    /// BO address.
    pub addr: u64,
    /// BO size.
    pub size: u64,
    /// mmap offset.
    pub offset: u64,
    /// Offset after restore.
    pub restored_offset: u64,
    /// User gpu_id.
    pub gpu_id: u32,
    /// `KFD_IOC_ALLOC_MEM_FLAGS_*`.
    pub alloc_flags: u32,
    /// dmabuf fd.
    pub dmabuf_fd: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_register_args` (deprecated debugger ABI).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct DbgRegisterArgs {
    /// To KFD.
    pub gpu_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_unregister_args` (deprecated debugger ABI).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct DbgUnregisterArgs {
    /// To KFD.
    pub gpu_id: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `struct kfd_ioctl_dbg_address_watch_args` (deprecated debugger ABI).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct DbgAddressWatchArgs {
    /// Pointer to the content.
    pub content_ptr: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// Including gpu_id and buf_size.
    pub buf_size_in_bytes: u32,
}

/// `struct kfd_ioctl_dbg_wave_control_args` (deprecated debugger ABI).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct DbgWaveControlArgs {
    /// Pointer to the content.
    pub content_ptr: u64,
    /// To KFD.
    pub gpu_id: u32,
    /// Including gpu_id and buf_size.
    pub buf_size_in_bytes: u32,
}

/// `struct kfd_dbg_device_info_entry` (KFD 1.13 debugger snapshot) in its 128-byte form:
/// `capability2` and `pad` were appended after 1.22 without a version bump (amd-gfx,
/// Jonathan Kim, 2026-01-19, "Add additional capabilities reporting"). The debugger
/// snapshot passes `entry_size`, so the kernel copies `min(entry_size, its size)`.
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct DbgDeviceInfoEntry {
    /// Raised exceptions.
    pub exception_status: u64,
    /// LDS aperture base.
    pub lds_base: u64,
    /// LDS aperture limit.
    pub lds_limit: u64,
    /// Scratch aperture base.
    pub scratch_base: u64,
    /// Scratch aperture limit.
    pub scratch_limit: u64,
    /// GPUVM aperture base.
    pub gpuvm_base: u64,
    /// GPUVM aperture limit.
    pub gpuvm_limit: u64,
    /// gpu_id.
    pub gpu_id: u32,
    /// PCI location.
    pub location_id: u32,
    /// PCI vendor.
    pub vendor_id: u32,
    /// PCI device.
    pub device_id: u32,
    /// PCI revision.
    pub revision_id: u32,
    /// PCI subsystem vendor.
    pub subsystem_vendor_id: u32,
    /// PCI subsystem device.
    pub subsystem_device_id: u32,
    /// MEC firmware version.
    pub fw_version: u32,
    /// gfx target version.
    pub gfx_target_version: u32,
    /// SIMD count.
    pub simd_count: u32,
    /// Waves per SIMD.
    pub max_waves_per_simd: u32,
    /// Shader arrays.
    pub array_count: u32,
    /// Shader arrays per engine.
    pub simd_arrays_per_engine: u32,
    /// XCC count.
    pub num_xcc: u32,
    /// HSA_CAP bits.
    pub capability: u32,
    /// Debug properties.
    pub debug_prop: u32,
    /// `HSA_CAP2_*` bits (after 1.22).
    pub capability2: u32,
    /// Padding named in the header.
    pub pad: u32,
}

/// `KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP` (`enum kfd_dbg_trap_flags`, KFD 1.13).
pub const KFD_DBG_TRAP_FLAG_SINGLE_MEM_OP: u32 = 1;
/// `KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP` (KFD 1.13).
pub const KFD_DBG_TRAP_FLAG_SINGLE_ALU_OP: u32 = 2;
/// `KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE` (KFD 1.21: GC 12.1 reports LDS accesses
/// out of range to a subscribed debugger).
pub const KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE: u32 = 4;

/// `struct kfd_queue_snapshot_entry` (KFD 1.13).
#[repr(C)]
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, FromBytes, IntoBytes, KnownLayout, Immutable,
)]
pub struct QueueSnapshotEntry {
    /// Raised exceptions.
    pub exception_status: u64,
    /// Ring address.
    pub ring_base_address: u64,
    /// Write pointer address.
    pub write_pointer_address: u64,
    /// Read pointer address.
    pub read_pointer_address: u64,
    /// CWSR area address.
    pub ctx_save_restore_address: u64,
    /// Queue id.
    pub queue_id: u32,
    /// gpu_id.
    pub gpu_id: u32,
    /// Ring size.
    pub ring_size: u32,
    /// Queue type.
    pub queue_type: u32,
    /// CWSR area size.
    pub ctx_save_restore_area_size: u32,
    /// Reserved.
    pub reserved: u32,
}

/// `AMDKFD_IOC_GET_TILE_CONFIG`.
pub const AMDKFD_IOC_GET_TILE_CONFIG: u32 = iowr::<GetTileConfigArgs>(0x12);
/// `AMDKFD_IOC_SMI_EVENTS`.
pub const AMDKFD_IOC_SMI_EVENTS: u32 = iowr::<SmiEventsArgs>(0x1F);
/// `AMDKFD_IOC_CRIU_OP`.
pub const AMDKFD_IOC_CRIU_OP: u32 = iowr::<CriuArgs>(0x22);

// ---------------------------------------------------------------------------------------
// mmap offsets (kfd_priv.h)
// ---------------------------------------------------------------------------------------

/// Bit position of the mmap type in an mmap offset.
pub const KFD_MMAP_TYPE_SHIFT: u32 = 62;
/// Mask of the mmap type bits.
pub const KFD_MMAP_TYPE_MASK: u64 = 0x3 << KFD_MMAP_TYPE_SHIFT;
/// mmap type: doorbells (on `/dev/kfd`).
pub const KFD_MMAP_TYPE_DOORBELL: u64 = 0x3 << KFD_MMAP_TYPE_SHIFT;
/// mmap type: the signal event page (on `/dev/kfd`).
pub const KFD_MMAP_TYPE_EVENTS: u64 = 0x2 << KFD_MMAP_TYPE_SHIFT;
/// mmap type: reserved memory (CWSR trap handler page, on `/dev/kfd`).
pub const KFD_MMAP_TYPE_RESERVED_MEM: u64 = 0x1 << KFD_MMAP_TYPE_SHIFT;
/// mmap type: the MMIO remap page (on `/dev/kfd`).
pub const KFD_MMAP_TYPE_MMIO: u64 = 0x0 << KFD_MMAP_TYPE_SHIFT;
/// Bit position of the gpu_id in an mmap offset.
pub const KFD_MMAP_GPU_ID_SHIFT: u32 = 46;
/// Mask of the gpu_id bits in an mmap offset.
pub const KFD_MMAP_GPU_ID_MASK: u64 = ((1u64 << 16) - 1) << KFD_MMAP_GPU_ID_SHIFT;
/// `KFD_MMAP_GPU_ID(gpu_id)`.
pub const fn kfd_mmap_gpu_id(gpu_id: u32) -> u64 {
    ((gpu_id as u64) << KFD_MMAP_GPU_ID_SHIFT) & KFD_MMAP_GPU_ID_MASK
}
/// `KFD_MMAP_GET_GPU_ID(offset)`.
pub const fn kfd_mmap_get_gpu_id(offset: u64) -> u32 {
    ((offset & KFD_MMAP_GPU_ID_MASK) >> KFD_MMAP_GPU_ID_SHIFT) as u32
}

// ---------------------------------------------------------------------------------------
// Request codes
// ---------------------------------------------------------------------------------------

/// `AMDKFD_IOC_GET_VERSION`.
pub const AMDKFD_IOC_GET_VERSION: u32 = ior::<GetVersionArgs>(0x01);
/// `AMDKFD_IOC_CREATE_QUEUE` (1.17 argument size).
pub const AMDKFD_IOC_CREATE_QUEUE: u32 = iowr::<CreateQueueArgs>(0x02);
/// `AMDKFD_IOC_DESTROY_QUEUE`.
pub const AMDKFD_IOC_DESTROY_QUEUE: u32 = iowr::<DestroyQueueArgs>(0x03);
/// `AMDKFD_IOC_SET_MEMORY_POLICY`.
pub const AMDKFD_IOC_SET_MEMORY_POLICY: u32 = iow::<SetMemoryPolicyArgs>(0x04);
/// `AMDKFD_IOC_GET_CLOCK_COUNTERS`.
pub const AMDKFD_IOC_GET_CLOCK_COUNTERS: u32 = iowr::<GetClockCountersArgs>(0x05);
/// `AMDKFD_IOC_GET_PROCESS_APERTURES`.
pub const AMDKFD_IOC_GET_PROCESS_APERTURES: u32 = ior::<GetProcessAperturesArgs>(0x06);
/// `AMDKFD_IOC_UPDATE_QUEUE`.
pub const AMDKFD_IOC_UPDATE_QUEUE: u32 = iow::<UpdateQueueArgs>(0x07);
/// `AMDKFD_IOC_CREATE_EVENT`.
pub const AMDKFD_IOC_CREATE_EVENT: u32 = iowr::<CreateEventArgs>(0x08);
/// `AMDKFD_IOC_DESTROY_EVENT`.
pub const AMDKFD_IOC_DESTROY_EVENT: u32 = iow::<DestroyEventArgs>(0x09);
/// `AMDKFD_IOC_SET_EVENT`.
pub const AMDKFD_IOC_SET_EVENT: u32 = iow::<SetEventArgs>(0x0A);
/// `AMDKFD_IOC_RESET_EVENT`.
pub const AMDKFD_IOC_RESET_EVENT: u32 = iow::<ResetEventArgs>(0x0B);
/// `AMDKFD_IOC_WAIT_EVENTS`.
pub const AMDKFD_IOC_WAIT_EVENTS: u32 = iowr::<WaitEventsArgs>(0x0C);
/// `AMDKFD_IOC_SET_SCRATCH_BACKING_VA`.
pub const AMDKFD_IOC_SET_SCRATCH_BACKING_VA: u32 = iowr::<SetScratchBackingVaArgs>(0x11);
/// `AMDKFD_IOC_SET_TRAP_HANDLER`.
pub const AMDKFD_IOC_SET_TRAP_HANDLER: u32 = iow::<SetTrapHandlerArgs>(0x13);
/// `AMDKFD_IOC_GET_PROCESS_APERTURES_NEW`.
pub const AMDKFD_IOC_GET_PROCESS_APERTURES_NEW: u32 = iowr::<GetProcessAperturesNewArgs>(0x14);
/// `AMDKFD_IOC_ACQUIRE_VM`.
pub const AMDKFD_IOC_ACQUIRE_VM: u32 = iow::<AcquireVmArgs>(0x15);
/// `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`.
pub const AMDKFD_IOC_ALLOC_MEMORY_OF_GPU: u32 = iowr::<AllocMemoryOfGpuArgs>(0x16);
/// `AMDKFD_IOC_FREE_MEMORY_OF_GPU`.
pub const AMDKFD_IOC_FREE_MEMORY_OF_GPU: u32 = iow::<FreeMemoryOfGpuArgs>(0x17);
/// `AMDKFD_IOC_MAP_MEMORY_TO_GPU`.
pub const AMDKFD_IOC_MAP_MEMORY_TO_GPU: u32 = iowr::<MapMemoryToGpuArgs>(0x18);
/// `AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU`.
pub const AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU: u32 = iowr::<UnmapMemoryFromGpuArgs>(0x19);
/// `AMDKFD_IOC_SET_CU_MASK`.
pub const AMDKFD_IOC_SET_CU_MASK: u32 = iow::<SetCuMaskArgs>(0x1A);
/// `AMDKFD_IOC_GET_QUEUE_WAVE_STATE`.
pub const AMDKFD_IOC_GET_QUEUE_WAVE_STATE: u32 = iowr::<GetQueueWaveStateArgs>(0x1B);
/// `AMDKFD_IOC_GET_DMABUF_INFO`.
pub const AMDKFD_IOC_GET_DMABUF_INFO: u32 = iowr::<GetDmabufInfoArgs>(0x1C);
/// `AMDKFD_IOC_IMPORT_DMABUF`.
pub const AMDKFD_IOC_IMPORT_DMABUF: u32 = iowr::<ImportDmabufArgs>(0x1D);
/// `AMDKFD_IOC_ALLOC_QUEUE_GWS`.
pub const AMDKFD_IOC_ALLOC_QUEUE_GWS: u32 = iowr::<AllocQueueGwsArgs>(0x1E);
/// `AMDKFD_IOC_SVM` with no attributes; see [`svm_request_code`].
pub const AMDKFD_IOC_SVM: u32 = iowr::<SvmArgs>(0x20);
/// `AMDKFD_IOC_SET_XNACK_MODE`.
pub const AMDKFD_IOC_SET_XNACK_MODE: u32 = iowr::<SetXnackModeArgs>(0x21);
/// `AMDKFD_IOC_AVAILABLE_MEMORY`.
pub const AMDKFD_IOC_AVAILABLE_MEMORY: u32 = iowr::<GetAvailableMemoryArgs>(0x23);
/// `AMDKFD_IOC_EXPORT_DMABUF`.
pub const AMDKFD_IOC_EXPORT_DMABUF: u32 = iowr::<ExportDmabufArgs>(0x24);
/// `AMDKFD_IOC_RUNTIME_ENABLE`.
pub const AMDKFD_IOC_RUNTIME_ENABLE: u32 = iowr::<RuntimeEnableArgs>(0x25);
/// `AMDKFD_IOC_DBG_TRAP` (KFD 1.13).
pub const AMDKFD_IOC_DBG_TRAP: u32 = iowr::<DbgTrapArgs>(0x26);
/// `AMDKFD_IOC_CREATE_PROCESS` (KFD 1.19): `_IO('K', 0x27)`, no argument. Replaces the
/// fd's primary KFD process by a new secondary one; EINVAL when the fd already has one.
pub const AMDKFD_IOC_CREATE_PROCESS: u32 = ioc(0, AMDKFD_IOCTL_BASE, 0x27, 0);
/// `AMDKFD_COMMAND_START`: the lowest KFD ioctl number.
pub const AMDKFD_COMMAND_START: u32 = 0x01;
/// `AMDKFD_COMMAND_END` (KFD 1.19+: 0x28): one past the highest KFD ioctl number. The
/// kernel answers a number outside `[START, END)` with ENOTTY (EINVAL in kernels before
/// a 2025 stable fix of kfd_chardev.c `kfd_ioctl`).
pub const AMDKFD_COMMAND_END: u32 = 0x28;

/// Minimum KFD minor version that has each newer ioctl (from the header's change log).
pub mod min_minor {
    /// SVM (1.5).
    pub const SVM: u32 = 5;
    /// AVAILABLE_MEMORY (1.9).
    pub const AVAILABLE_MEMORY: u32 = 9;
    /// EXPORT_DMABUF (1.12).
    pub const EXPORT_DMABUF: u32 = 12;
    /// RUNTIME_ENABLE (1.13).
    pub const RUNTIME_ENABLE: u32 = 13;
    /// DBG_TRAP (1.13).
    pub const DBG_TRAP: u32 = 13;
    /// `kfd_event_data.signal_event_data.last_event_age` (1.14).
    pub const EVENT_AGE: u32 = 14;
    /// `KFD_IOC_ALLOC_MEM_FLAGS_CONTIGUOUS` (1.16).
    pub const CONTIGUOUS: u32 = 16;
    /// `KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID` and `sdma_engine_id` (1.17).
    pub const SDMA_BY_ENG_ID: u32 = 17;
    /// `set_memory_policy_args.misc_process_flag` (1.18).
    pub const MISC_PROCESS_FLAG: u32 = 18;
    /// `AMDKFD_IOC_CREATE_PROCESS` (1.19).
    pub const CREATE_PROCESS: u32 = 19;
    /// Trap handler support for expert scheduling mode (1.20; no ABI change).
    pub const EXPERT_SCHED_TRAP: u32 = 20;
    /// `KFD_DBG_TRAP_FLAG_LDS_OUT_OF_ADDR_RANGE` (1.21).
    pub const LDS_OUT_OF_ADDR_RANGE: u32 = 21;
    /// `create_queue_args.metadata_ring_size` (1.22).
    pub const METADATA_RING: u32 = 22;
}
