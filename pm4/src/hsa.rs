//! The memory layouts the command processor reads, shared by the runtime and the
//! emulator: `amd_signal_t` and `amd_queue_t` (ROCm/ROCR-Runtime
//! `runtime/hsa-runtime/inc/amd_hsa_signal.h` and `amd_hsa_queue.h`; the same layouts are
//! in LLVM `amd/device-libs/ockl/inc/amd_hsa_queue.h`). Field offsets are checked by the
//! tests below.

use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

/// `AMD_SIGNAL_KIND_INVALID`.
pub const AMD_SIGNAL_KIND_INVALID: i64 = 0;
/// `AMD_SIGNAL_KIND_USER`: a signal whose value lives in memory.
pub const AMD_SIGNAL_KIND_USER: i64 = 1;
/// `AMD_SIGNAL_KIND_DOORBELL`.
pub const AMD_SIGNAL_KIND_DOORBELL: i64 = -1;

/// `amd_signal_t`: 64 bytes, 64-byte aligned. The signal handle the CP takes is the
/// address of this struct.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, Default, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct AmdSignal {
    /// `AMD_SIGNAL_KIND_*`.
    pub kind: i64,
    /// The signal value (the CP decrements it on completion).
    pub value: i64,
    /// Address of the KFD event slot the CP writes `event_id` to; 0 = no interrupt.
    pub event_mailbox_ptr: u64,
    /// The event's trigger data.
    pub event_id: u32,
    /// Reserved.
    pub reserved1: u32,
    /// Start timestamp (GPU clock) written by the CP for profiled packets.
    pub start_ts: u64,
    /// End timestamp (GPU clock).
    pub end_ts: u64,
    /// `queue_ptr` (union with reserved2).
    pub queue_ptr: u64,
    /// Reserved.
    pub reserved3: [u32; 2],
}

/// Byte offset of [`AmdSignal::value`].
pub const SIGNAL_VALUE_OFFSET: u64 = 8;
/// Byte offset of [`AmdSignal::event_mailbox_ptr`].
pub const SIGNAL_MAILBOX_OFFSET: u64 = 16;
/// Byte offset of [`AmdSignal::start_ts`].
pub const SIGNAL_START_TS_OFFSET: u64 = 32;
/// Byte offset of [`AmdSignal::end_ts`].
pub const SIGNAL_END_TS_OFFSET: u64 = 40;

/// `hsa_queue_type_t` MULTI.
pub const HSA_QUEUE_TYPE_MULTI: u32 = 0;
/// `HSA_QUEUE_FEATURE_KERNEL_DISPATCH`.
pub const HSA_QUEUE_FEATURE_KERNEL_DISPATCH: u32 = 1;
/// `AMD_QUEUE_PROPERTIES_IS_PTR64`.
pub const AMD_QUEUE_PROPERTIES_IS_PTR64: u32 = 1 << 1;

/// `amd_queue_t` (which begins with `hsa_queue_t`): 256 bytes, 64-byte aligned.
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable)]
pub struct AmdQueue {
    /// `hsa_queue_t.type`.
    pub queue_type: u32,
    /// `hsa_queue_t.features`.
    pub features: u32,
    /// `hsa_queue_t.base_address`: the ring.
    pub base_address: u64,
    /// `hsa_queue_t.doorbell_signal` handle.
    pub doorbell_signal: u64,
    /// `hsa_queue_t.size` in packets.
    pub size: u32,
    /// `hsa_queue_t.reserved1`.
    pub hsa_reserved1: u32,
    /// `hsa_queue_t.id`.
    pub id: u64,
    /// `reserved1[4]`.
    pub reserved1: [u32; 4],
    /// Packets published by the producer (the AQL write pointer).
    pub write_dispatch_id: u64,
    /// LDS aperture high bits.
    pub group_segment_aperture_base_hi: u32,
    /// Scratch aperture high bits.
    pub private_segment_aperture_base_hi: u32,
    /// Highest CU id.
    pub max_cu_id: u32,
    /// Highest wave id.
    pub max_wave_id: u32,
    /// Legacy doorbell bookkeeping.
    pub max_legacy_doorbell_dispatch_id_plus_1: u64,
    /// Legacy doorbell lock.
    pub legacy_doorbell_lock: u32,
    /// `reserved2[9]`.
    pub reserved2: [u32; 9],
    /// Packets consumed by the CP (the AQL read pointer).
    pub read_dispatch_id: u64,
    /// Offset of `read_dispatch_id` from the queue base.
    pub read_dispatch_id_field_base_byte_offset: u32,
    /// COMPUTE_TMPRING_SIZE value.
    pub compute_tmpring_size: u32,
    /// Scratch buffer descriptor.
    pub scratch_resource_descriptor: [u32; 4],
    /// Scratch backing address.
    pub scratch_backing_memory_location: u64,
    /// Scratch backing size.
    pub scratch_backing_memory_byte_size: u64,
    /// Scratch bytes per work-item.
    pub scratch_workitem_byte_size: u32,
    /// `AMD_QUEUE_PROPERTIES_*`.
    pub queue_properties: u32,
    /// `reserved3[2]`.
    pub reserved3: [u32; 2],
    /// `queue_inactive_signal` handle.
    pub queue_inactive_signal: u64,
    /// `reserved4[14]`.
    pub reserved4: [u32; 14],
}

impl AmdQueue {
    /// The `amd_queue_t` of an AQL queue over `slots` packets at `ring_va`, as ROCr fills
    /// it (`amd_aql_queue.cpp`): a multi-producer queue with the kernel-dispatch feature,
    /// the LDS and scratch aperture high bits, CU and wave id limits, 64-bit pointers.
    pub fn new(ring_va: u64, slots: u32, limits: QueueLimits) -> AmdQueue {
        AmdQueue {
            queue_type: HSA_QUEUE_TYPE_MULTI,
            features: HSA_QUEUE_FEATURE_KERNEL_DISPATCH,
            base_address: ring_va,
            doorbell_signal: 0,
            size: slots,
            hsa_reserved1: 0,
            id: 0,
            reserved1: [0; 4],
            write_dispatch_id: 0,
            group_segment_aperture_base_hi: (limits.lds_base >> 32) as u32,
            private_segment_aperture_base_hi: (limits.scratch_base >> 32) as u32,
            max_cu_id: limits.max_cu_id,
            max_wave_id: limits.max_wave_id,
            max_legacy_doorbell_dispatch_id_plus_1: 0,
            legacy_doorbell_lock: 0,
            reserved2: [0; 9],
            read_dispatch_id: 0,
            read_dispatch_id_field_base_byte_offset: QUEUE_READ_DISPATCH_ID_OFFSET as u32,
            compute_tmpring_size: 0,
            scratch_resource_descriptor: [0; 4],
            scratch_backing_memory_location: 0,
            scratch_backing_memory_byte_size: 0,
            scratch_workitem_byte_size: 0,
            queue_properties: AMD_QUEUE_PROPERTIES_IS_PTR64,
            reserved3: [0; 2],
            queue_inactive_signal: 0,
            reserved4: [0; 14],
        }
    }
}

/// What an `amd_queue_t` says about its GPU.
#[derive(Debug, Clone, Copy, Default)]
pub struct QueueLimits {
    /// LDS aperture base (its high 32 bits go into the queue).
    pub lds_base: u64,
    /// Scratch aperture base (high 32 bits).
    pub scratch_base: u64,
    /// Highest CU id.
    pub max_cu_id: u32,
    /// Highest wave id per CU.
    pub max_wave_id: u32,
}

/// Byte offset of [`AmdSignal::event_id`].
pub const SIGNAL_EVENT_ID_OFFSET: u64 = 24;
/// Byte offset of [`AmdQueue::queue_properties`].
pub const QUEUE_PROPERTIES_OFFSET: u64 = 180;
/// Byte offset of [`AmdQueue::queue_inactive_signal`].
pub const QUEUE_INACTIVE_SIGNAL_OFFSET: u64 = 192;
/// `AMD_QUEUE_PROPERTIES_ENABLE_PROFILING` (bit 3).
pub const AMD_QUEUE_PROPERTIES_ENABLE_PROFILING: u32 = 1 << 3;

/// Byte offset of [`AmdQueue::write_dispatch_id`] (the AQL wptr the kernel is given).
pub const QUEUE_WRITE_DISPATCH_ID_OFFSET: u64 = 56;
/// Byte offset of [`AmdQueue::read_dispatch_id`] (the AQL rptr the kernel is given).
pub const QUEUE_READ_DISPATCH_ID_OFFSET: u64 = 128;

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn amd_signal_layout() {
        assert_eq!(size_of::<AmdSignal>(), 64);
        assert_eq!(offset_of!(AmdSignal, value) as u64, SIGNAL_VALUE_OFFSET);
        assert_eq!(
            offset_of!(AmdSignal, event_mailbox_ptr) as u64,
            SIGNAL_MAILBOX_OFFSET
        );
        assert_eq!(
            offset_of!(AmdSignal, event_id) as u64,
            SIGNAL_EVENT_ID_OFFSET
        );
        assert_eq!(
            offset_of!(AmdSignal, start_ts) as u64,
            SIGNAL_START_TS_OFFSET
        );
        assert_eq!(offset_of!(AmdSignal, end_ts) as u64, SIGNAL_END_TS_OFFSET);
        assert_eq!(offset_of!(AmdSignal, queue_ptr), 48);
    }

    #[test]
    fn amd_queue_layout() {
        assert_eq!(size_of::<AmdQueue>(), 256);
        assert_eq!(offset_of!(AmdQueue, base_address), 8);
        assert_eq!(offset_of!(AmdQueue, size), 24);
        assert_eq!(offset_of!(AmdQueue, id), 32);
        assert_eq!(
            offset_of!(AmdQueue, write_dispatch_id) as u64,
            QUEUE_WRITE_DISPATCH_ID_OFFSET
        );
        assert_eq!(
            offset_of!(AmdQueue, read_dispatch_id) as u64,
            QUEUE_READ_DISPATCH_ID_OFFSET
        );
        assert_eq!(offset_of!(AmdQueue, compute_tmpring_size), 140);
        assert_eq!(offset_of!(AmdQueue, scratch_backing_memory_location), 160);
        assert_eq!(
            offset_of!(AmdQueue, queue_properties) as u64,
            QUEUE_PROPERTIES_OFFSET
        );
        assert_eq!(
            offset_of!(AmdQueue, queue_inactive_signal) as u64,
            QUEUE_INACTIVE_SIGNAL_OFFSET
        );
    }
}
