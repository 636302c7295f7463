//! The [`Backend`] seam: everything the runtime needs from a device, at ioctl granularity.
//!
//! Argument filling, result parsing, mmap-offset handling and doorbell writes all happen
//! above this trait, in code shared by the hardware backend ([`crate::HwBackend`]) and the
//! emulated device (`kfd_emu::EmuBackend`). A backend only moves the typed arguments to
//! its device and back.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::io::Errno;

use crate::abi;
use crate::topology::Topology;

/// Which kind of device sits behind a backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendKind {
    /// A real GPU through `/dev/kfd`.
    Hardware,
    /// The in-process emulated device.
    Emulated,
}

/// One KFD ioctl with its typed arguments.
///
/// Where the kernel ABI passes a user pointer inside the argument struct (gpu_id arrays,
/// event arrays, CU masks, SVM attributes, aperture arrays), the variant carries the
/// slice as well. [`crate::ioctl`] stores the slice's address in the pointer field, so the
/// hardware backend passes the struct unchanged, while the emulator reads the slice and
/// never dereferences a raw pointer.
#[derive(Debug)]
pub enum Ioctl<'a> {
    /// `AMDKFD_IOC_GET_VERSION`.
    GetVersion(&'a mut abi::GetVersionArgs),
    /// `AMDKFD_IOC_CREATE_QUEUE`.
    CreateQueue(&'a mut abi::CreateQueueArgs),
    /// `AMDKFD_IOC_DESTROY_QUEUE`.
    DestroyQueue(&'a mut abi::DestroyQueueArgs),
    /// `AMDKFD_IOC_UPDATE_QUEUE`.
    UpdateQueue(&'a mut abi::UpdateQueueArgs),
    /// `AMDKFD_IOC_SET_CU_MASK` with its mask words.
    SetCuMask {
        /// Header; `cu_mask_ptr` points at `mask`.
        args: &'a mut abi::SetCuMaskArgs,
        /// `num_cu_mask / 32` words.
        mask: &'a [u32],
    },
    /// `AMDKFD_IOC_GET_QUEUE_WAVE_STATE`.
    GetQueueWaveState(&'a mut abi::GetQueueWaveStateArgs),
    /// `AMDKFD_IOC_SET_MEMORY_POLICY`.
    SetMemoryPolicy(&'a mut abi::SetMemoryPolicyArgs),
    /// `AMDKFD_IOC_GET_CLOCK_COUNTERS`.
    GetClockCounters(&'a mut abi::GetClockCountersArgs),
    /// `AMDKFD_IOC_GET_PROCESS_APERTURES` (deprecated form).
    GetProcessApertures(&'a mut abi::GetProcessAperturesArgs),
    /// `AMDKFD_IOC_GET_PROCESS_APERTURES_NEW` with the array it fills.
    GetProcessAperturesNew {
        /// Header; the pointer refers to `apertures`.
        args: &'a mut abi::GetProcessAperturesNewArgs,
        /// Output array (`num_of_nodes` entries on input).
        apertures: &'a mut [abi::ProcessDeviceApertures],
    },
    /// `AMDKFD_IOC_CREATE_EVENT`.
    CreateEvent(&'a mut abi::CreateEventArgs),
    /// `AMDKFD_IOC_DESTROY_EVENT`.
    DestroyEvent(&'a mut abi::DestroyEventArgs),
    /// `AMDKFD_IOC_SET_EVENT`.
    SetEvent(&'a mut abi::SetEventArgs),
    /// `AMDKFD_IOC_RESET_EVENT`.
    ResetEvent(&'a mut abi::ResetEventArgs),
    /// `AMDKFD_IOC_WAIT_EVENTS` with its event array (read and written back).
    WaitEvents {
        /// Header; the pointer refers to `events`.
        args: &'a mut abi::WaitEventsArgs,
        /// The events to wait on.
        events: &'a mut [abi::EventData],
    },
    /// `AMDKFD_IOC_SET_SCRATCH_BACKING_VA`.
    SetScratchBackingVa(&'a mut abi::SetScratchBackingVaArgs),
    /// `AMDKFD_IOC_SET_TRAP_HANDLER`.
    SetTrapHandler(&'a mut abi::SetTrapHandlerArgs),
    /// `AMDKFD_IOC_ACQUIRE_VM`.
    AcquireVm(&'a mut abi::AcquireVmArgs),
    /// `AMDKFD_IOC_ALLOC_MEMORY_OF_GPU`.
    AllocMemoryOfGpu(&'a mut abi::AllocMemoryOfGpuArgs),
    /// `AMDKFD_IOC_FREE_MEMORY_OF_GPU`.
    FreeMemoryOfGpu(&'a mut abi::FreeMemoryOfGpuArgs),
    /// `AMDKFD_IOC_MAP_MEMORY_TO_GPU` with its gpu_id array.
    MapMemoryToGpu {
        /// Header; the pointer refers to `gpu_ids`.
        args: &'a mut abi::MapMemoryToGpuArgs,
        /// The GPUs to map on.
        gpu_ids: &'a [u32],
    },
    /// `AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU` with its gpu_id array.
    UnmapMemoryFromGpu {
        /// Header; the pointer refers to `gpu_ids`.
        args: &'a mut abi::UnmapMemoryFromGpuArgs,
        /// The GPUs to unmap from.
        gpu_ids: &'a [u32],
    },
    /// `AMDKFD_IOC_GET_DMABUF_INFO`.
    GetDmabufInfo(&'a mut abi::GetDmabufInfoArgs),
    /// `AMDKFD_IOC_IMPORT_DMABUF`.
    ImportDmabuf(&'a mut abi::ImportDmabufArgs),
    /// `AMDKFD_IOC_EXPORT_DMABUF`.
    ExportDmabuf(&'a mut abi::ExportDmabufArgs),
    /// `AMDKFD_IOC_SVM` with its attribute array (read and written back).
    Svm {
        /// Header; `nattr == attrs.len()`.
        args: &'a mut abi::SvmArgs,
        /// The attributes.
        attrs: &'a mut [abi::SvmAttribute],
    },
    /// `AMDKFD_IOC_SET_XNACK_MODE`.
    SetXnackMode(&'a mut abi::SetXnackModeArgs),
    /// `AMDKFD_IOC_AVAILABLE_MEMORY`.
    AvailableMemory(&'a mut abi::GetAvailableMemoryArgs),
    /// `AMDKFD_IOC_RUNTIME_ENABLE`.
    RuntimeEnable(&'a mut abi::RuntimeEnableArgs),
    /// `AMDKFD_IOC_DBG_TRAP` (KFD 1.13) with the user buffer its operation's pointer field
    /// refers to (empty for operations without one; see
    /// [`abi::DbgTrapArgs::user_buffer_len`]).
    DbgTrap {
        /// Header; the operation's pointer field refers to `buf`.
        args: &'a mut abi::DbgTrapArgs,
        /// The runtime-info, queue-id, exception-info or snapshot buffer.
        buf: &'a mut [u8],
    },
    /// `AMDKFD_IOC_CREATE_PROCESS` (KFD 1.19; no argument).
    CreateProcess,
}

impl Ioctl<'_> {
    /// The kernel's name for this ioctl (`"AMDKFD_IOC_CREATE_QUEUE"`).
    pub fn name(&self) -> &'static str {
        match self {
            Ioctl::GetVersion(_) => "AMDKFD_IOC_GET_VERSION",
            Ioctl::CreateQueue(_) => "AMDKFD_IOC_CREATE_QUEUE",
            Ioctl::DestroyQueue(_) => "AMDKFD_IOC_DESTROY_QUEUE",
            Ioctl::UpdateQueue(_) => "AMDKFD_IOC_UPDATE_QUEUE",
            Ioctl::SetCuMask { .. } => "AMDKFD_IOC_SET_CU_MASK",
            Ioctl::GetQueueWaveState(_) => "AMDKFD_IOC_GET_QUEUE_WAVE_STATE",
            Ioctl::SetMemoryPolicy(_) => "AMDKFD_IOC_SET_MEMORY_POLICY",
            Ioctl::GetClockCounters(_) => "AMDKFD_IOC_GET_CLOCK_COUNTERS",
            Ioctl::GetProcessApertures(_) => "AMDKFD_IOC_GET_PROCESS_APERTURES",
            Ioctl::GetProcessAperturesNew { .. } => "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW",
            Ioctl::CreateEvent(_) => "AMDKFD_IOC_CREATE_EVENT",
            Ioctl::DestroyEvent(_) => "AMDKFD_IOC_DESTROY_EVENT",
            Ioctl::SetEvent(_) => "AMDKFD_IOC_SET_EVENT",
            Ioctl::ResetEvent(_) => "AMDKFD_IOC_RESET_EVENT",
            Ioctl::WaitEvents { .. } => "AMDKFD_IOC_WAIT_EVENTS",
            Ioctl::SetScratchBackingVa(_) => "AMDKFD_IOC_SET_SCRATCH_BACKING_VA",
            Ioctl::SetTrapHandler(_) => "AMDKFD_IOC_SET_TRAP_HANDLER",
            Ioctl::AcquireVm(_) => "AMDKFD_IOC_ACQUIRE_VM",
            Ioctl::AllocMemoryOfGpu(_) => "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU",
            Ioctl::FreeMemoryOfGpu(_) => "AMDKFD_IOC_FREE_MEMORY_OF_GPU",
            Ioctl::MapMemoryToGpu { .. } => "AMDKFD_IOC_MAP_MEMORY_TO_GPU",
            Ioctl::UnmapMemoryFromGpu { .. } => "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU",
            Ioctl::GetDmabufInfo(_) => "AMDKFD_IOC_GET_DMABUF_INFO",
            Ioctl::ImportDmabuf(_) => "AMDKFD_IOC_IMPORT_DMABUF",
            Ioctl::ExportDmabuf(_) => "AMDKFD_IOC_EXPORT_DMABUF",
            Ioctl::Svm { .. } => "AMDKFD_IOC_SVM",
            Ioctl::SetXnackMode(_) => "AMDKFD_IOC_SET_XNACK_MODE",
            Ioctl::AvailableMemory(_) => "AMDKFD_IOC_AVAILABLE_MEMORY",
            Ioctl::RuntimeEnable(_) => "AMDKFD_IOC_RUNTIME_ENABLE",
            Ioctl::DbgTrap { .. } => "AMDKFD_IOC_DBG_TRAP",
            Ioctl::CreateProcess => "AMDKFD_IOC_CREATE_PROCESS",
        }
    }

    /// The request code that goes to `ioctl(2)` (for SVM it includes the attributes;
    /// `None` when there are too many attributes to encode).
    pub fn request_code(&self) -> Option<u32> {
        use abi::*;
        Some(match self {
            Ioctl::GetVersion(_) => AMDKFD_IOC_GET_VERSION,
            Ioctl::CreateQueue(_) => AMDKFD_IOC_CREATE_QUEUE,
            Ioctl::DestroyQueue(_) => AMDKFD_IOC_DESTROY_QUEUE,
            Ioctl::UpdateQueue(_) => AMDKFD_IOC_UPDATE_QUEUE,
            Ioctl::SetCuMask { .. } => AMDKFD_IOC_SET_CU_MASK,
            Ioctl::GetQueueWaveState(_) => AMDKFD_IOC_GET_QUEUE_WAVE_STATE,
            Ioctl::SetMemoryPolicy(_) => AMDKFD_IOC_SET_MEMORY_POLICY,
            Ioctl::GetClockCounters(_) => AMDKFD_IOC_GET_CLOCK_COUNTERS,
            Ioctl::GetProcessApertures(_) => AMDKFD_IOC_GET_PROCESS_APERTURES,
            Ioctl::GetProcessAperturesNew { .. } => AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
            Ioctl::CreateEvent(_) => AMDKFD_IOC_CREATE_EVENT,
            Ioctl::DestroyEvent(_) => AMDKFD_IOC_DESTROY_EVENT,
            Ioctl::SetEvent(_) => AMDKFD_IOC_SET_EVENT,
            Ioctl::ResetEvent(_) => AMDKFD_IOC_RESET_EVENT,
            Ioctl::WaitEvents { .. } => AMDKFD_IOC_WAIT_EVENTS,
            Ioctl::SetScratchBackingVa(_) => AMDKFD_IOC_SET_SCRATCH_BACKING_VA,
            Ioctl::SetTrapHandler(_) => AMDKFD_IOC_SET_TRAP_HANDLER,
            Ioctl::AcquireVm(_) => AMDKFD_IOC_ACQUIRE_VM,
            Ioctl::AllocMemoryOfGpu(_) => AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
            Ioctl::FreeMemoryOfGpu(_) => AMDKFD_IOC_FREE_MEMORY_OF_GPU,
            Ioctl::MapMemoryToGpu { .. } => AMDKFD_IOC_MAP_MEMORY_TO_GPU,
            Ioctl::UnmapMemoryFromGpu { .. } => AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
            Ioctl::GetDmabufInfo(_) => AMDKFD_IOC_GET_DMABUF_INFO,
            Ioctl::ImportDmabuf(_) => AMDKFD_IOC_IMPORT_DMABUF,
            Ioctl::ExportDmabuf(_) => AMDKFD_IOC_EXPORT_DMABUF,
            Ioctl::Svm { attrs, .. } => return svm_request_code(attrs.len()),
            Ioctl::SetXnackMode(_) => AMDKFD_IOC_SET_XNACK_MODE,
            Ioctl::AvailableMemory(_) => AMDKFD_IOC_AVAILABLE_MEMORY,
            Ioctl::RuntimeEnable(_) => AMDKFD_IOC_RUNTIME_ENABLE,
            Ioctl::DbgTrap { .. } => AMDKFD_IOC_DBG_TRAP,
            Ioctl::CreateProcess => AMDKFD_IOC_CREATE_PROCESS,
        })
    }
}

/// Which device file an mmap goes to.
#[derive(Debug, Clone, Copy)]
pub enum MmapFile<'a> {
    /// `/dev/kfd`: doorbells, the event page, the MMIO remap page (by offset type bits).
    Kfd,
    /// A render node returned by [`Backend::open_render_node`]: buffer objects.
    Render(BorrowedFd<'a>),
}

bitflags::bitflags! {
    /// Page protection for [`Backend::mmap`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct Prot: u32 {
        /// Readable.
        const READ = 1;
        /// Writable.
        const WRITE = 2;
    }
}

impl Prot {
    /// The mmap(2) protection bits.
    pub fn to_mmap(self) -> rustix::mm::ProtFlags {
        let mut p = rustix::mm::ProtFlags::empty();
        if self.contains(Prot::READ) {
            p |= rustix::mm::ProtFlags::READ;
        }
        if self.contains(Prot::WRITE) {
            p |= rustix::mm::ProtFlags::WRITE;
        }
        p
    }
}

/// A KFD device: the real one or the emulated one.
///
/// Implementations are shared across threads; every method may be called concurrently.
pub trait Backend: Send + Sync + 'static {
    /// Hardware or emulated.
    fn kind(&self) -> BackendKind;

    /// The device's topology, parsed from its sysfs-format tree by [`crate::topology`].
    fn topology(&self) -> &Topology;

    /// Perform one ioctl on `/dev/kfd`. Returns the kernel's errno on failure; the
    /// arguments have been copied back (as the kernel does) whenever the call returned.
    fn ioctl(&self, req: Ioctl<'_>) -> Result<(), Errno>;

    /// Open `/dev/dri/renderD<minor>` (read-write, close-on-exec). The fd is what
    /// `ACQUIRE_VM` takes and what buffer objects are mmapped through.
    fn open_render_node(&self, minor: u32) -> Result<OwnedFd, Errno>;

    /// mmap `len` bytes of `file` at `offset`, shared, optionally at `fixed_addr`
    /// (MAP_FIXED). Returns the mapped address.
    ///
    /// # Safety
    /// With `fixed_addr`, any existing mapping in the range is replaced: the caller must
    /// own that range (normally a reservation it made) and nothing may reference it.
    unsafe fn mmap(
        &self,
        file: MmapFile<'_>,
        offset: u64,
        len: usize,
        fixed_addr: Option<NonNull<c_void>>,
        prot: Prot,
    ) -> Result<NonNull<c_void>, Errno>;

    /// Unmap a range returned by [`Backend::mmap`].
    ///
    /// # Safety
    /// Nothing may reference the range afterwards.
    unsafe fn munmap(&self, addr: NonNull<c_void>, len: usize) -> Result<(), Errno>;

    /// Tell the device that the runtime just wrote `queue_id`'s doorbell. A no-op on
    /// hardware (the doorbell store itself is the notification); the emulator wakes the
    /// engine that serves the queue.
    fn doorbell_written(&self, queue_id: u32);

    /// Tell the device that a host store just released a value packets of `queue_id` may
    /// be waiting on: a barrier packet's dependency signal, or the memory word of a
    /// WAIT_REG_MEM / BARRIER_VALUE wait (the runtime's callback lines, which the host
    /// advances after each stream callback). Call it after the store, once per queue
    /// whose published wait the store may satisfy.
    ///
    /// A no-op on hardware: the CP polls the memory of a blocked packet by itself (the
    /// poll interval of WAIT_REG_MEM, the barrier's dependency re-check). The emulator
    /// wakes the engine serving the queue so that it re-polls now rather than at its next
    /// poll tick (up to 1 ms later).
    fn host_signal_written(&self, queue_id: u32);

    /// Give back the CPU mapping `addr..addr+len` of freed SVM (managed) memory.
    ///
    /// On hardware this is `munmap`: the kernel's MMU notifier drops the SVM range's GPU
    /// mappings with it. The emulator cannot observe `munmap`, so its SVM range would
    /// outlive the memory; it keeps the addresses reserved instead (PROT_NONE, no pages),
    /// so that no later mapping lands on the stale range.
    ///
    /// # Safety
    /// The range is the caller's own mapping and nothing references it afterwards.
    unsafe fn release_svm_mapping(&self, addr: NonNull<c_void>, len: usize) -> Result<(), Errno>;
}
