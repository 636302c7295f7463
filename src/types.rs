//! The typed arguments of the API: one [`Location`], one [`AccessFlags`], one
//! [`HandleType`] shared by memory pools, virtual memory and managed memory, and a Rust type
//! for every flag or enumerated argument of the HIP calls kfdrt implements.
//!
//! Flag sets are [`bitflags`] types; enumerated arguments are Rust enums. Each keeps HIP's
//! numeric values and converts from the raw C value (`from_bits` / `from_raw`, `None` for a
//! value HIP does not define) and back (`bits` / `raw`), which is all a C ABI layer needs:
//!
//! ```
//! use kfdrt::{AttachFlags, EventFlags, Location, StreamFlags, WaitCompare};
//!
//! assert_eq!(StreamFlags::from_bits(1), Some(StreamFlags::NON_BLOCKING)); // hipStreamNonBlocking
//! assert_eq!(StreamFlags::from_bits(4), None);
//! let f = EventFlags::from_bits(0x3).unwrap(); // hipEventBlockingSync | hipEventDisableTiming
//! assert!(f.contains(EventFlags::DISABLE_TIMING));
//! assert_eq!(WaitCompare::from_raw(3), Some(WaitCompare::Nor)); // hipStreamWaitValueNor
//! assert_eq!(AttachFlags::GLOBAL.bits(), 1); // hipMemAttachGlobal
//! assert_eq!(Location::from_device_id(-1), Some(Location::Host)); // hipCpuDeviceId
//! assert_eq!(Location::from_raw(1, 0), Some(Location::Gpu(0))); // hipMemLocationTypeDevice
//! ```

use bitflags::bitflags;

/// A place memory lives in or is accessed from: the host or GPU `n` of the [`Device`]
/// (`hipMemLocation`, and the `int device` arguments of the managed-memory calls where
/// `hipCpuDeviceId` means the host).
///
/// `Gpu(n)` is the index into [`Device::gpus`], HIP's device ordinal.
///
/// [`Device`]: crate::Device
/// [`Device::gpus`]: crate::Device::gpus
///
/// ```
/// use kfdrt::Location;
///
/// assert_eq!(Location::Gpu(1).device_id(), 1);
/// assert_eq!(Location::Host.device_id(), Location::CPU_DEVICE_ID);
/// assert_eq!(Location::Host.raw(), (2, 0)); // hipMemLocationTypeHost
/// assert_eq!(Location::from_device_id(-2), None); // hipInvalidDeviceId
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Location {
    /// Host memory (`hipMemLocationTypeHost`, `hipCpuDeviceId`).
    Host,
    /// GPU `n` of the device (`hipMemLocationTypeDevice` with id `n`).
    Gpu(usize),
}

impl Location {
    /// `hipCpuDeviceId` (-1): the host as a device number.
    pub const CPU_DEVICE_ID: i32 = -1;
    /// `hipInvalidDeviceId` (-2): "no location" in attribute queries.
    pub const INVALID_DEVICE_ID: i32 = -2;
    /// `hipMemLocationTypeInvalid`.
    pub const TYPE_INVALID: u32 = 0;
    /// `hipMemLocationTypeDevice`.
    pub const TYPE_DEVICE: u32 = 1;
    /// `hipMemLocationTypeHost`.
    pub const TYPE_HOST: u32 = 2;

    /// From a HIP device number: [`Location::CPU_DEVICE_ID`] is the host, `n >= 0` GPU `n`;
    /// anything else (`hipInvalidDeviceId`, other negatives) is `None`.
    pub fn from_device_id(id: i32) -> Option<Location> {
        match id {
            Self::CPU_DEVICE_ID => Some(Location::Host),
            n => usize::try_from(n).ok().map(Location::Gpu),
        }
    }

    /// The HIP device number: GPU `n` is `n`, the host [`Location::CPU_DEVICE_ID`].
    /// (A GPU index above `i32::MAX` cannot exist; it saturates.)
    pub fn device_id(self) -> i32 {
        match self {
            Location::Host => Self::CPU_DEVICE_ID,
            Location::Gpu(n) => i32::try_from(n).unwrap_or(i32::MAX),
        }
    }

    /// From a `hipMemLocation { type, id }`: `hipMemLocationTypeDevice` (1) with `id >= 0`
    /// is a GPU, `hipMemLocationTypeHost` (2) the host (its `id` is ignored, as CLR);
    /// anything else (Invalid, the NUMA types) is `None`.
    pub fn from_raw(type_: u32, id: i32) -> Option<Location> {
        match type_ {
            Self::TYPE_DEVICE => usize::try_from(id).ok().map(Location::Gpu),
            Self::TYPE_HOST => Some(Location::Host),
            _ => None,
        }
    }

    /// The `hipMemLocation { type, id }` of this location (the host has id 0).
    pub fn raw(self) -> (u32, i32) {
        match self {
            Location::Host => (Self::TYPE_HOST, 0),
            Location::Gpu(_) => (Self::TYPE_DEVICE, self.device_id()),
        }
    }
}

/// `hipMemAccessFlags`: the access a location has to pool or virtual memory. HIP defines
/// it as an enumeration of three values (read-write is 3, not a combination of bits).
///
/// ```
/// use kfdrt::AccessFlags;
///
/// assert_eq!(AccessFlags::from_raw(3), Some(AccessFlags::ReadWrite));
/// assert_eq!(AccessFlags::from_raw(2), None);
/// assert_eq!(AccessFlags::Read.raw(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum AccessFlags {
    /// `hipMemAccessFlagsProtNone` (0): no access.
    #[default]
    None = 0,
    /// `hipMemAccessFlagsProtRead` (1): read only.
    Read = 1,
    /// `hipMemAccessFlagsProtReadWrite` (3): read and write.
    ReadWrite = 3,
}

impl AccessFlags {
    /// From HIP's value; `None` for a value HIP does not define.
    pub fn from_raw(v: u64) -> Option<AccessFlags> {
        match v {
            0 => Some(AccessFlags::None),
            1 => Some(AccessFlags::Read),
            3 => Some(AccessFlags::ReadWrite),
            _ => None,
        }
    }

    /// HIP's value.
    pub fn raw(self) -> u64 {
        self as u64
    }
}

/// `hipAccessDesc` / `hipMemAccessDesc`: who gets what access, for
/// [`MemPool::set_access`](crate::MemPool::set_access) and
/// [`Device::mem_set_access`](crate::Device::mem_set_access).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AccessDesc {
    /// Who gets access.
    pub location: Location,
    /// What access.
    pub flags: AccessFlags,
}

impl AccessDesc {
    /// `flags` access for `location`.
    pub fn new(location: Location, flags: AccessFlags) -> AccessDesc {
        AccessDesc { location, flags }
    }
}

/// `hipMemAllocationHandleType`: how an allocation or a pool may be shared with another
/// process. Shared by memory pools ([`PoolProps`](crate::PoolProps)), virtual-memory
/// allocations ([`MemAllocationProp`](crate::MemAllocationProp)) and their export and
/// import calls. On Linux only a POSIX file descriptor (a dmabuf) exists; the Win32 types
/// are NotSupported wherever they are passed.
///
/// ```
/// use kfdrt::HandleType;
///
/// assert_eq!(HandleType::from_raw(1), Some(HandleType::PosixFileDescriptor));
/// assert_eq!(HandleType::from_raw(3), None);
/// assert_eq!(HandleType::Win32Kmt.raw(), 4);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum HandleType {
    /// `hipMemHandleTypeNone` (0): not shareable.
    #[default]
    None = 0,
    /// `hipMemHandleTypePosixFileDescriptor` (1): a dmabuf file descriptor.
    PosixFileDescriptor = 1,
    /// `hipMemHandleTypeWin32` (2): NotSupported on Linux.
    Win32 = 2,
    /// `hipMemHandleTypeWin32Kmt` (4): NotSupported on Linux.
    Win32Kmt = 4,
}

impl HandleType {
    /// From HIP's value; `None` for a value HIP does not define.
    pub fn from_raw(v: u32) -> Option<HandleType> {
        match v {
            0 => Some(HandleType::None),
            1 => Some(HandleType::PosixFileDescriptor),
            2 => Some(HandleType::Win32),
            4 => Some(HandleType::Win32Kmt),
            _ => None,
        }
    }

    /// HIP's value.
    pub fn raw(self) -> u32 {
        self as u32
    }

    /// The Win32 types, which do not exist on Linux.
    pub(crate) fn is_win32(self) -> bool {
        matches!(self, HandleType::Win32 | HandleType::Win32Kmt)
    }
}

bitflags! {
    /// Stream creation flags (`hipStreamCreateWithFlags`, `hipStreamGetFlags`).
    ///
    /// The empty set is `hipStreamDefault` (0): the stream synchronises with the null
    /// stream.
    ///
    /// ```
    /// use kfdrt::StreamFlags;
    ///
    /// assert_eq!(StreamFlags::DEFAULT.bits(), 0); // hipStreamDefault
    /// assert_eq!(StreamFlags::from_bits(1), Some(StreamFlags::NON_BLOCKING));
    /// assert_eq!(StreamFlags::from_bits(2), None); // not a hipStream* flag
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct StreamFlags: u32 {
        /// `hipStreamNonBlocking` (0x1): no implicit synchronisation with the null stream.
        const NON_BLOCKING = 0x1;
    }
}

impl StreamFlags {
    /// `hipStreamDefault` (0).
    pub const DEFAULT: StreamFlags = StreamFlags::empty();
}

bitflags! {
    /// Event creation flags (`hipEventCreateWithFlags`).
    ///
    /// The empty set is `hipEventDefault` (0). `hipEventInterprocess` is defined so the C
    /// ABI can name it; creating such an event is NotSupported (kfdrt has no IPC events).
    /// CLR's `hipEventReleaseToDevice` / `hipEventReleaseToSystem` /
    /// `hipEventDisableSystemFence` are not defined: every kfdrt record releases at system
    /// scope.
    ///
    /// ```
    /// use kfdrt::EventFlags;
    ///
    /// assert_eq!(EventFlags::DEFAULT.bits(), 0);
    /// assert_eq!(EventFlags::from_bits(0x2), Some(EventFlags::DISABLE_TIMING));
    /// assert_eq!(EventFlags::from_bits(0x80), None);
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct EventFlags: u32 {
        /// `hipEventBlockingSync` (0x1): synchronize sleeps instead of spinning.
        const BLOCKING_SYNC = 0x1;
        /// `hipEventDisableTiming` (0x2): no timestamps (a record costs no packet).
        const DISABLE_TIMING = 0x2;
        /// `hipEventInterprocess` (0x4): NotSupported.
        const INTERPROCESS = 0x4;
    }
}

impl EventFlags {
    /// `hipEventDefault` (0).
    pub const DEFAULT: EventFlags = EventFlags::empty();
}

bitflags! {
    /// `hipStreamWriteValue32/64` flags. HIP reserves the argument ("ignored for now");
    /// the one bit CUDA defines only relaxes ordering, and kfdrt keeps the write ordered
    /// after every earlier write of the stream whatever the flags (always correct).
    ///
    /// ```
    /// use kfdrt::WriteValueFlags;
    ///
    /// assert_eq!(WriteValueFlags::from_bits(1), Some(WriteValueFlags::NO_MEMORY_BARRIER));
    /// assert_eq!(WriteValueFlags::DEFAULT.bits(), 0);
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct WriteValueFlags: u32 {
        /// CUDA's `CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER` (0x1): the write may become
        /// visible before earlier writes (kfdrt does not use the freedom).
        const NO_MEMORY_BARRIER = 0x1;
    }
}

impl WriteValueFlags {
    /// No flags (`hipStreamWriteValueDefault`, 0).
    pub const DEFAULT: WriteValueFlags = WriteValueFlags::empty();
}

/// The comparison of `hipStreamWaitValue32/64` (its `flags` argument, an enumeration in
/// HIP). With `mask` applied to the memory value `*ptr`:
///
/// - `Gte`: `(*ptr & mask) >= value` (unsigned);
/// - `Eq`: `(*ptr & mask) == value`;
/// - `And`: `((*ptr & mask) & value) != 0`;
/// - `Nor`: `~((*ptr & mask) | (value & mask)) != 0` over the operand width, exactly as
///   the HIP documentation defines it (so with a partial mask it always holds).
///
/// ```
/// use kfdrt::WaitCompare;
///
/// assert_eq!(WaitCompare::from_raw(0), Some(WaitCompare::Gte)); // hipStreamWaitValueGte
/// assert_eq!(WaitCompare::Nor.raw(), 3);
/// assert_eq!(WaitCompare::from_raw(4), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum WaitCompare {
    /// `hipStreamWaitValueGte` (0).
    Gte = 0,
    /// `hipStreamWaitValueEq` (1).
    Eq = 1,
    /// `hipStreamWaitValueAnd` (2).
    And = 2,
    /// `hipStreamWaitValueNor` (3).
    Nor = 3,
}

impl WaitCompare {
    /// From HIP's value; `None` for a value HIP does not define.
    pub fn from_raw(v: u32) -> Option<WaitCompare> {
        match v {
            0 => Some(WaitCompare::Gte),
            1 => Some(WaitCompare::Eq),
            2 => Some(WaitCompare::And),
            3 => Some(WaitCompare::Nor),
            _ => None,
        }
    }

    /// HIP's value.
    pub fn raw(self) -> u32 {
        self as u32
    }
}

bitflags! {
    /// The stream association of managed memory (`hipMemAttach*`): the `flags` of
    /// `hipMallocManaged` (Global or Host) and `hipStreamAttachMemAsync` (Global, Host or
    /// Single). HIP and CUDA define them as bits, but each call takes exactly one of them;
    /// other combinations are InvalidValue there.
    ///
    /// ```
    /// use kfdrt::AttachFlags;
    ///
    /// assert_eq!(AttachFlags::from_bits(4), Some(AttachFlags::SINGLE));
    /// assert_eq!(AttachFlags::from_bits(8), None);
    /// ```
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    pub struct AttachFlags: u32 {
        /// `hipMemAttachGlobal` (0x1): accessible from any stream on any device.
        const GLOBAL = 0x1;
        /// `hipMemAttachHost` (0x2): the program will not access it from devices without
        /// concurrent managed access.
        const HOST = 0x2;
        /// `hipMemAttachSingle` (0x4): associated with one stream (attach only).
        const SINGLE = 0x4;
    }
}

/// `hipMemAllocationGranularity_flags`: which granularity
/// [`Device::mem_get_allocation_granularity`](crate::Device::mem_get_allocation_granularity)
/// reports.
///
/// ```
/// use kfdrt::GranularityOption;
///
/// assert_eq!(GranularityOption::from_raw(1), Some(GranularityOption::Recommended));
/// assert_eq!(GranularityOption::from_raw(2), None);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum GranularityOption {
    /// `hipMemAllocationGranularityMinimum` (0).
    Minimum = 0,
    /// `hipMemAllocationGranularityRecommended` (1).
    Recommended = 1,
}

impl GranularityOption {
    /// From HIP's value; `None` for a value HIP does not define.
    pub fn from_raw(v: u32) -> Option<GranularityOption> {
        match v {
            0 => Some(GranularityOption::Minimum),
            1 => Some(GranularityOption::Recommended),
            _ => None,
        }
    }

    /// HIP's value.
    pub fn raw(self) -> u32 {
        self as u32
    }
}

/// `hipMemAllocationType` of a virtual-memory allocation. Pinned device memory is the one
/// type HIP defines (`hipMemAllocationTypeInvalid` is 0, which [`AllocationType::from_raw`]
/// rejects).
///
/// ```
/// use kfdrt::AllocationType;
///
/// assert_eq!(AllocationType::from_raw(1), Some(AllocationType::Pinned));
/// assert_eq!(AllocationType::from_raw(0), None); // hipMemAllocationTypeInvalid
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum AllocationType {
    /// `hipMemAllocationTypePinned` (1).
    #[default]
    Pinned = 1,
}

impl AllocationType {
    /// From HIP's value; `None` for a value HIP does not define (or Invalid).
    pub fn from_raw(v: u32) -> Option<AllocationType> {
        (v == 1).then_some(AllocationType::Pinned)
    }

    /// HIP's value.
    pub fn raw(self) -> u32 {
        self as u32
    }
}

/// What a buffer is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// VRAM of one GPU (`hipMalloc`).
    ///
    /// GPU-mapped on its own GPU; on GPU `g` also once `g` has peer access to the owner
    /// ([`crate::Device::enable_peer_access`], `hipDeviceEnablePeerAccess`): CLR maps a
    /// device allocation on the devices in the owner's peer list at allocation
    /// (`rocclr/device/rocm/rocdevice.cpp` `Device::deviceAllowAccess`) and maps the
    /// existing ones when a peer is added (`Device::enableP2P`, `MemObjMap::UpdateAccess`).
    ///
    /// CPU-visible (`KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC` and a CPU mapping) exactly when the
    /// GPU's VRAM heap is large-BAR (`HEAP_TYPE_FB_PUBLIC` in the topology), as ROCr gives
    /// every `hipMalloc`: `amd_memory_region.cc` sets `HostAccess` for local memory unless
    /// the heap is `HSA_HEAPTYPE_FRAME_BUFFER_PRIVATE`. On a small-BAR board the buffer is
    /// GPU-only and `read`/`write` fail with `InvalidValue`.
    Device,
    /// System memory pinned for the GPUs (GTT), CPU-mapped.
    HostPinned,
    /// Fine-grained, uncached system memory for signals and stream memory ops (what
    /// `hipMallocSignalMemory` / `hipExtMallocWithFlags(hipMallocSignalMemory)` give).
    Signal,
    /// Existing host memory registered with KFD (USERPTR).
    Userptr,
}

/// What holds an address of the device: the answer of [`crate::Device::allocation_at`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationKind {
    /// A buffer object of this process: [`crate::Device::alloc`] (any [`MemoryKind`],
    /// also the chunks of stream-ordered pools) or a registration
    /// ([`crate::Device::register_host_memory`], [`MemoryKind::Userptr`]).
    Buffer(MemoryKind),
    /// Another process's buffer opened here ([`crate::Device::ipc_open`]), or the backing
    /// of an imported memory pool ([`crate::Device::import_mem_pool`]).
    IpcImport,
    /// Managed memory ([`crate::Device::malloc_managed`]).
    Managed,
    /// A mapping inside a virtual address reservation ([`crate::Device::mem_map`]).
    Vmm,
}

/// One allocation of a device, as its creator asked for it: `len` bytes from `base`
/// (the page rounding KFD needs is not part of it). What CLR's `getMemoryObject` finds
/// for an address, and what its size checks compare against (`hipMemcpy`, `hipMemset`,
/// the stream memory operations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// First address (GPU VA == CPU VA).
    pub base: u64,
    /// Bytes from `base`: the size asked for (`hipMalloc(100)` is 100 bytes long). For a
    /// VMM mapping, the whole address reservation holding it (as CLR checks the sizes of
    /// VMM memory against its VA range).
    pub len: u64,
    /// What it is.
    pub kind: AllocationKind,
    /// The GPU it belongs to (the owner of device memory; the allocating GPU otherwise).
    pub gpu: usize,
}
