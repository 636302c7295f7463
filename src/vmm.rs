//! Virtual memory management (HIP seed 003): address reservations, physical allocations,
//! mappings and per-device access, on KFD.
//!
//! # How it is built on KFD
//! KFD places a buffer object at its virtual address when it is allocated, so a physical
//! allocation that can be mapped anywhere, any number of times, is built the way ROCr's
//! `hsa_amd_vmem_*` does it (`Runtime::VMemoryHandleCreate` allocates and creates a
//! shareable handle at once; mapping goes through that handle):
//! * `memCreate`: `ALLOC_MEMORY_OF_GPU` (VRAM, PUBLIC on a large-BAR board only; `va_addr`
//!   0: never mapped itself),
//!   then `EXPORT_DMABUF` — the dmabuf fd *is* the physical allocation.
//! * `addressReserve`: an inaccessible anonymous mapping (`PROT_NONE`), as every kfdrt
//!   buffer address is reserved (GPU VA == CPU VA).
//! * `memMap`: `IMPORT_DMABUF` at the address (a new BO handle on the same pages) and a CPU
//!   mapping of the dmabuf over the reservation (`mmap(fd)`, MAP_FIXED | MAP_SHARED) on a
//!   large-BAR board. Two mappings of one allocation are two imports of one dmabuf: the
//!   same bytes.
//! * `setAccess`: `MAP_MEMORY_TO_GPU` / `UNMAP_MEMORY_FROM_GPU` of the imported BO per GPU.
//! * `memUnmap`: unmap from the GPUs, put `PROT_NONE` back, `FREE_MEMORY_OF_GPU` the import.
//! * export / import of a shareable handle: the dmabuf fd (`hipMemHandleTypePosixFileDescriptor`);
//!   an imported fd is sized and placed with `GET_DMABUF_INFO`.
//!
//! Handles are reference counted as in CUDA/CLR: `memCreate` and `retainAllocationHandle`
//! take a reference, `memRelease` drops one, and each mapping holds one, so the physical
//! memory is freed when it is released and unmapped everywhere.
//!
//! # Choices where the seed is vague
//! * Granularity: minimum 4 KiB (KFD BOs and GPU page tables are page granular; ROCr's
//!   `RUNTIME_ALLOC_GRANULE`), recommended 2 MiB (the GPU's fragment size; ROCr's
//!   `RUNTIME_ALLOC_REC_GRANULE` for VRAM, and what CUDA reports).
//! * Mapped memory is CPU-accessible read-write exactly when the GPU's VRAM heap is
//!   large-BAR (`HEAP_TYPE_FB_PUBLIC`), like `hipMalloc` memory
//!   ([`crate::MemoryKind::Device`]). On a small-BAR board (heap FRAME_BUFFER_PRIVATE) KFD
//!   refuses `PUBLIC` VRAM (`kfd_ioctl_alloc_memory_of_gpu`: EINVAL unless
//!   `kfd_dev_is_large_bar`), so the allocation is GPU-only and the reservation stays
//!   `PROT_NONE` for the CPU. The GPUs get access only through `setAccess`.
//! * `hipMemAccessFlagsProtRead`: KFD has no per-GPU read-only mapping of a shared BO (an
//!   imported BO is always writable and MAP_MEMORY_TO_GPU has no permission argument), so a
//!   read-only grant maps the BO like read-write and `getAccess` reports Read — what ROCr
//!   does on KFD. GPU writes through it are not trapped.
//! * A mapping must cover the whole allocation (`offset` must be 0, as the seed says, and
//!   KFD maps whole BOs): a smaller `size` is NotSupported, a larger one InvalidValue.

use std::collections::{BTreeMap, HashMap};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use kfd::abi::AllocFlags;

use crate::device::{Device, DeviceCore};
use crate::error::{Error, ErrorKind, Result};
use crate::stream::Stream;
use crate::types::{
    AccessDesc, AccessFlags, AllocationType, GranularityOption, HandleType, Location,
};
use crate::va::{HUGE, PAGE};

/// Minimum allocation granularity (see the module docs).
pub const MIN_GRANULARITY: usize = PAGE;
/// Recommended allocation granularity.
pub const RECOMMENDED_GRANULARITY: usize = HUGE;

/// `hipMemAllocationProp.allocFlags`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MemAllocFlags {
    /// Compression type; must be 0 (KFD has no compressible VRAM allocation:
    /// NotSupported otherwise).
    pub compression_type: u8,
    /// GPUDirect RDMA capable: accepted and recorded (VRAM BOs are dmabuf-exportable).
    pub gpu_direct_rdma_capable: u8,
    /// Usage hints: must be 0 (InvalidValue otherwise).
    pub usage: u16,
}

/// `hipMemAllocationProp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemAllocationProp {
    /// `hipMemAllocationProp.type`: Pinned, the one type.
    pub alloc_type: AllocationType,
    /// `requestedHandleType`: how the allocation may be exported.
    pub requested_handle_type: HandleType,
    /// Where the memory is: a GPU (a host location is InvalidValue, as CLR).
    pub location: Location,
    /// Allocation flags.
    pub alloc_flags: MemAllocFlags,
}

impl MemAllocationProp {
    /// Pinned VRAM of GPU `gpu`, exportable as `handle_type`.
    pub fn device(gpu: usize, handle_type: HandleType) -> Self {
        MemAllocationProp {
            alloc_type: AllocationType::Pinned,
            requested_handle_type: handle_type,
            location: Location::Gpu(gpu),
            alloc_flags: MemAllocFlags::default(),
        }
    }
}

/// `hipMemGenericAllocationHandle_t`: a physical allocation.
///
/// # Example
///
/// Reserve an address range, back it with VRAM, map it, give GPU 0 access, then undo:
///
/// ```
/// use kfdrt::{AccessDesc, AccessFlags, Device, GranularityOption, HandleType, Location};
/// use kfdrt::MemAllocationProp;
///
/// # fn main() -> kfdrt::Result<()> {
/// let dev = Device::open()?;
/// let prop = MemAllocationProp::device(0, HandleType::None);
/// let size = dev.mem_get_allocation_granularity(&prop, GranularityOption::Recommended)?;
/// let va = dev.mem_address_reserve(size, 0, 0, 0)?;
/// let handle = dev.mem_create(size, &prop, 0)?;
/// dev.mem_map(va, size, 0, handle, 0)?;
/// let rw = AccessDesc::new(Location::Gpu(0), AccessFlags::ReadWrite);
/// dev.mem_set_access(va, size, &[rw])?;
/// assert_eq!(dev.mem_get_access(Location::Gpu(0), va)?, AccessFlags::ReadWrite);
/// let s = dev.create_stream(0)?;
/// s.write_value32(va, 1, kfdrt::WriteValueFlags::DEFAULT)?; // the GPU writes through the mapping
/// s.synchronize()?;
/// dev.mem_unmap(va, size)?;
/// dev.mem_release(handle)?;
/// dev.mem_address_free(va, size)?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MemHandle(u64);

impl MemHandle {
    /// The raw value (never 0).
    pub fn raw(self) -> u64 {
        self.0
    }
}

/// A `PROT_NONE` range owned by an address reservation.
struct Reserved {
    addr: u64,
    len: usize,
    /// Requested size.
    size: usize,
}

impl Drop for Reserved {
    fn drop(&mut self) {
        // SAFETY: the range is ours; mappings in it were removed first.
        let _ = unsafe { rustix::mm::munmap(self.addr as *mut core::ffi::c_void, self.len) };
    }
}

struct PhysAlloc {
    core: Arc<DeviceCore>,
    size: usize,
    prop: MemAllocationProp,
    /// The local BO (None for an allocation imported from a shareable handle).
    bo: Option<u64>,
    fd: OwnedFd,
    gpu_index: usize,
    /// Whether mappings get a CPU mapping of the dmabuf (large-BAR VRAM).
    cpu_visible: bool,
    refs: usize,
}

impl Drop for PhysAlloc {
    fn drop(&mut self) {
        if let Some(h) = self.bo {
            let _ = kfd::ioctl::free_memory_of_gpu(self.core.backend.as_ref(), h);
        }
    }
}

struct Mapping {
    core: Arc<DeviceCore>,
    size: usize,
    handle: u64,
    /// The imported BO at this address.
    bo: u64,
    /// Access flags per GPU index.
    access: Vec<AccessFlags>,
    /// gpu_ids the BO is mapped on.
    mapped_on: Vec<u32>,
    va: u64,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        let b = self.core.backend.as_ref();
        if !self.mapped_on.is_empty() {
            let mut n = 0;
            let _ = kfd::ioctl::unmap_memory_from_gpu(b, self.bo, &self.mapped_on, &mut n);
        }
        // SAFETY: the range is inside our reservation; the dmabuf mapping is being retired
        // and replaced by the inaccessible reservation pages.
        let _ = unsafe {
            rustix::mm::mmap_anonymous(
                self.va as *mut core::ffi::c_void,
                self.size,
                rustix::mm::ProtFlags::empty(),
                rustix::mm::MapFlags::PRIVATE
                    | rustix::mm::MapFlags::NORESERVE
                    | rustix::mm::MapFlags::FIXED,
            )
        };
        let _ = kfd::ioctl::free_memory_of_gpu(b, self.bo);
    }
}

#[derive(Default)]
struct State {
    next: u64,
    reservations: BTreeMap<u64, Reserved>,
    allocs: HashMap<u64, PhysAlloc>,
    mappings: BTreeMap<u64, Mapping>,
}

impl State {
    fn unref(&mut self, h: u64) {
        if let Some(a) = self.allocs.get_mut(&h) {
            a.refs -= 1;
            if a.refs == 0 {
                self.allocs.remove(&h);
            }
        }
    }
    fn mapping_at(&self, addr: u64) -> Option<(u64, &Mapping)> {
        self.mappings
            .range(..=addr)
            .next_back()
            .filter(|(&va, m)| addr < va + m.size as u64)
            .map(|(&va, m)| (va, m))
    }
    /// The mappings that exactly tile `[ptr, ptr+size)`, or InvalidValue.
    fn tiling(&self, call: &'static str, ptr: u64, size: usize) -> Result<Vec<u64>> {
        let end = ptr + size as u64;
        let mut at = ptr;
        let mut out = Vec::new();
        while at < end {
            match self.mappings.get(&at) {
                Some(m) if at + m.size as u64 <= end => {
                    out.push(at);
                    at += m.size as u64;
                }
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidValue,
                        call,
                        format!(
                            "{ptr:#x}+{size:#x} is not exactly covered by mappings (at {at:#x})"
                        ),
                    ))
                }
            }
        }
        Ok(out)
    }
}

/// Per-device VMM state.
#[derive(Default)]
pub(crate) struct Registry {
    st: Mutex<State>,
}

impl Registry {
    pub(crate) fn new() -> Self {
        Self::default()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        crate::sync::lock(&self.st)
    }
    /// When a mapping covers `addr`: the start and size asked for of the reservation
    /// holding it, and the GPU of the physical memory mapped there.
    pub(crate) fn mapped_extent(&self, addr: u64) -> Option<(u64, u64, usize)> {
        let st = self.lock();
        let (_, m) = st.mapping_at(addr)?;
        let gpu = st.allocs.get(&m.handle).map_or(0, |a| a.gpu_index);
        let (start, len) = crate::va::range_containing(&st.reservations, addr, |r| r.size as u64)?;
        Some((start, len, gpu))
    }
}

/// Whether `gpu`'s VRAM heap is CPU-visible (large BAR: `HEAP_TYPE_FB_PUBLIC`).
fn large_bar(core: &DeviceCore, gpu: usize) -> bool {
    core.gpus[gpu]
        .node
        .mem_banks
        .iter()
        .any(|b| b.heap_type == kfd::topology::HEAP_TYPE_FB_PUBLIC)
}

fn inval(call: &'static str, msg: impl Into<std::borrow::Cow<'static, str>>) -> Error {
    Error::new(ErrorKind::InvalidValue, call, msg)
}

impl Device {
    fn vmm_gpu(&self, call: &'static str, loc: Location) -> Result<usize> {
        match loc {
            Location::Host => Err(inval(
                call,
                "location is the host: must be a device (hipMemLocationTypeDevice)",
            )),
            Location::Gpu(i) if i < self.inner.gpus.len() => Ok(i),
            Location::Gpu(i) => Err(inval(call, format!("device {i} out of range"))),
        }
    }

    /// `hipMemGetAllocationGranularity`: [`MIN_GRANULARITY`] (4 KiB) for
    /// [`GranularityOption::Minimum`], [`RECOMMENDED_GRANULARITY`] (2 MiB) for
    /// [`GranularityOption::Recommended`]. The property must be on a valid device
    /// (InvalidValue otherwise, as CLR).
    pub fn mem_get_allocation_granularity(
        &self,
        prop: &MemAllocationProp,
        option: GranularityOption,
    ) -> Result<usize> {
        let call = "hipMemGetAllocationGranularity";
        self.vmm_gpu(call, prop.location)?;
        Ok(match option {
            GranularityOption::Minimum => MIN_GRANULARITY,
            GranularityOption::Recommended => RECOMMENDED_GRANULARITY,
        })
    }

    /// `hipMemAddressReserve`: reserve `size` bytes (a non-zero multiple of the minimum
    /// granularity) aligned to `alignment` (0 = 2 MiB for sizes of at least 2 MiB, else
    /// 4 KiB; otherwise a power of two, raised to 4 KiB). `addr`, when non-zero, asks for
    /// that start address: it is used when it is aligned and free, otherwise another
    /// address is returned (a hint, as in CUDA and ROCr). `flags` must be 0.
    pub fn mem_address_reserve(
        &self,
        size: usize,
        alignment: usize,
        addr: u64,
        flags: u64,
    ) -> Result<u64> {
        let call = "hipMemAddressReserve";
        if flags != 0 {
            return Err(inval(call, format!("flags {flags:#x} must be 0")));
        }
        if size == 0 || size % MIN_GRANULARITY != 0 {
            return Err(inval(
                call,
                format!("size {size:#x} must be a non-zero multiple of {MIN_GRANULARITY:#x}"),
            ));
        }
        if alignment != 0 && !alignment.is_power_of_two() {
            return Err(inval(
                call,
                format!("alignment {alignment:#x} is not a power of two"),
            ));
        }
        let align = match alignment {
            0 if size >= HUGE => HUGE,
            0 => PAGE,
            a => a.max(PAGE),
        };
        let mut got = None;
        if addr != 0 && addr % align as u64 == 0 {
            // SAFETY: FIXED_NOREPLACE never replaces an existing mapping; a fresh
            // PROT_NONE mapping at the requested address or an error.
            let r = unsafe {
                rustix::mm::mmap_anonymous(
                    addr as *mut core::ffi::c_void,
                    size,
                    rustix::mm::ProtFlags::empty(),
                    rustix::mm::MapFlags::PRIVATE
                        | rustix::mm::MapFlags::NORESERVE
                        | rustix::mm::MapFlags::FIXED_NOREPLACE,
                )
            };
            match r {
                Ok(p) if p as u64 == addr => got = Some(addr),
                Ok(p) => {
                    // Old kernels treat FIXED_NOREPLACE as a hint: not where we asked.
                    // SAFETY: the mapping we just made.
                    let _ = unsafe { rustix::mm::munmap(p, size) };
                }
                Err(_) => {}
            }
        }
        let start = match got {
            Some(a) => a,
            None => {
                let v = crate::va::VaReservation::new(size, align)?;
                let a = v.addr();
                // The range now belongs to the registry's Reserved (unmapped on its drop).
                std::mem::forget(v);
                a
            }
        };
        self.inner.vmm.lock().reservations.insert(
            start,
            Reserved {
                addr: start,
                len: size,
                size,
            },
        );
        Ok(start)
    }

    /// `hipMemAddressFree`: free a reservation; `ptr` and `size` must be exactly those of
    /// a reservation, and nothing may be mapped in it any more (InvalidValue otherwise —
    /// unmap first).
    pub fn mem_address_free(&self, ptr: u64, size: usize) -> Result<()> {
        let call = "hipMemAddressFree";
        if ptr == 0 || size == 0 {
            return Err(inval(call, "null pointer or zero size"));
        }
        let mut st = self.inner.vmm.lock();
        match st.reservations.get(&ptr) {
            Some(r) if r.size == size => {}
            _ => {
                return Err(inval(
                    call,
                    format!("{ptr:#x}+{size:#x} is not a reservation"),
                ))
            }
        }
        if st.mappings.range(ptr..ptr + size as u64).next().is_some() {
            return Err(inval(call, "the reservation still has mappings"));
        }
        st.reservations.remove(&ptr);
        Ok(())
    }

    /// `hipMemCreate`: `size` bytes (a non-zero multiple of the minimum granularity) of
    /// VRAM of `prop.location`'s GPU. `prop` must be Pinned on a valid device,
    /// `requested_handle_type` None or PosixFileDescriptor (Win32 types: NotSupported),
    /// compression 0 (NotSupported otherwise), usage 0; `flags` must be 0. VRAM
    /// exhaustion is OutOfMemory.
    pub fn mem_create(
        &self,
        size: usize,
        prop: &MemAllocationProp,
        flags: u64,
    ) -> Result<MemHandle> {
        let call = "hipMemCreate";
        if flags != 0 {
            return Err(inval(call, format!("flags {flags:#x} must be 0")));
        }
        let gpu = self.vmm_gpu(call, prop.location)?;
        match prop.requested_handle_type {
            HandleType::None | HandleType::PosixFileDescriptor => {}
            HandleType::Win32 | HandleType::Win32Kmt => {
                return Err(Error::new(
                    ErrorKind::NotSupported,
                    call,
                    "Win32 handle types do not exist on Linux",
                ))
            }
        }
        if prop.alloc_flags.compression_type != 0 {
            return Err(Error::new(
                ErrorKind::NotSupported,
                call,
                "KFD has no compressible VRAM allocation",
            ));
        }
        if prop.alloc_flags.usage != 0 {
            return Err(inval(call, "allocFlags.usage must be 0"));
        }
        if size == 0 || size % MIN_GRANULARITY != 0 {
            return Err(inval(
                call,
                format!("size {size:#x} must be a non-zero multiple of {MIN_GRANULARITY:#x}"),
            ));
        }
        let core = &self.inner.core;
        let b = core.backend.as_ref();
        let cpu_visible = large_bar(core, gpu);
        let public = if cpu_visible {
            AllocFlags::PUBLIC
        } else {
            AllocFlags::empty()
        };
        let mut args = kfd::abi::AllocMemoryOfGpuArgs {
            va_addr: 0,
            size: size as u64,
            gpu_id: core.gpus[gpu].gpu_id,
            flags: (AllocFlags::VRAM
                | public
                | AllocFlags::WRITABLE
                | AllocFlags::EXECUTABLE
                | AllocFlags::NO_SUBSTITUTE)
                .bits(),
            ..Default::default()
        };
        kfd::ioctl::alloc_memory_of_gpu(b, &mut args).map_err(|e| Error::from_kfd(call, e))?;
        const O_CLOEXEC: u32 = 0o2000000;
        let fd = match kfd::ioctl::export_dmabuf(b, args.handle, O_CLOEXEC) {
            // SAFETY: EXPORT_DMABUF returned a new fd that we own.
            Ok(fd) => unsafe { OwnedFd::from_raw_fd(fd) },
            Err(e) => {
                let _ = kfd::ioctl::free_memory_of_gpu(b, args.handle);
                return Err(Error::from_kfd(call, e));
            }
        };
        let mut st = self.inner.vmm.lock();
        st.next += 1;
        let id = st.next;
        st.allocs.insert(
            id,
            PhysAlloc {
                core: core.clone(),
                size,
                prop: *prop,
                bo: Some(args.handle),
                fd,
                gpu_index: gpu,
                cpu_visible,
                refs: 1,
            },
        );
        Ok(MemHandle(id))
    }

    /// `hipMemRelease`: drop the reference `memCreate` / `retainAllocationHandle` /
    /// `importFromShareableHandle` gave; the memory is freed once every reference and
    /// every mapping is gone. An unknown (or fully released) handle is InvalidValue.
    pub fn mem_release(&self, handle: MemHandle) -> Result<()> {
        let mut st = self.inner.vmm.lock();
        if !st.allocs.contains_key(&handle.0) {
            return Err(inval(
                "hipMemRelease",
                format!("unknown handle {:#x}", handle.0),
            ));
        }
        st.unref(handle.0);
        Ok(())
    }

    /// `hipMemGetAllocationPropertiesFromHandle`: the properties given to `memCreate` (for
    /// an imported handle: Pinned on the exporting GPU's index here, PosixFileDescriptor).
    pub fn mem_get_allocation_properties_from_handle(
        &self,
        handle: MemHandle,
    ) -> Result<MemAllocationProp> {
        let st = self.inner.vmm.lock();
        st.allocs.get(&handle.0).map(|a| a.prop).ok_or_else(|| {
            inval(
                "hipMemGetAllocationPropertiesFromHandle",
                format!("unknown handle {:#x}", handle.0),
            )
        })
    }

    /// `hipMemRetainAllocationHandle`: the handle mapped at `addr` (anywhere inside a
    /// mapping), with a new reference the caller must release. InvalidValue when nothing is
    /// mapped there.
    pub fn mem_retain_allocation_handle(&self, addr: u64) -> Result<MemHandle> {
        let mut st = self.inner.vmm.lock();
        let h = st.mapping_at(addr).map(|(_, m)| m.handle).ok_or_else(|| {
            inval(
                "hipMemRetainAllocationHandle",
                format!("nothing mapped at {addr:#x}"),
            )
        })?;
        if let Some(a) = st.allocs.get_mut(&h) {
            a.refs += 1;
        }
        Ok(MemHandle(h))
    }

    /// `hipMemMap`: map `handle` at `ptr` (inside one reservation, page aligned, not
    /// overlapping another mapping). `offset` must be 0 and `flags` 0; `size` must be the
    /// allocation's size (smaller: NotSupported, KFD maps whole BOs; larger: InvalidValue).
    /// On a large-BAR board the mapping is CPU-accessible at once; on a small-BAR board it
    /// is GPU-only (see the module docs). GPUs need [`Device::mem_set_access`].
    pub fn mem_map(
        &self,
        ptr: u64,
        size: usize,
        offset: usize,
        handle: MemHandle,
        flags: u64,
    ) -> Result<()> {
        let call = "hipMemMap";
        if ptr == 0 || size == 0 || offset != 0 || flags != 0 {
            return Err(inval(
                call,
                format!("ptr={ptr:#x} size={size:#x} offset={offset:#x} flags={flags:#x}: need non-zero ptr and size, zero offset and flags"),
            ));
        }
        if ptr % MIN_GRANULARITY as u64 != 0 || size % MIN_GRANULARITY != 0 {
            return Err(inval(
                call,
                "ptr and size must be multiples of the minimum granularity",
            ));
        }
        let mut st = self.inner.vmm.lock();
        let (asize, gpu, fd, cpu_visible) = match st.allocs.get(&handle.0) {
            Some(a) => (a.size, a.gpu_index, a.fd.as_raw_fd(), a.cpu_visible),
            None => return Err(inval(call, format!("unknown handle {:#x}", handle.0))),
        };
        if size > asize {
            return Err(inval(
                call,
                format!("size {size:#x} exceeds the allocation ({asize:#x})"),
            ));
        }
        if size < asize {
            return Err(Error::new(
                ErrorKind::NotSupported,
                call,
                format!("mapping {size:#x} of a {asize:#x} allocation: KFD maps whole BOs"),
            ));
        }
        let end = ptr + size as u64;
        let inside = st
            .reservations
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&a, r)| end <= a + r.len as u64);
        if !inside {
            return Err(inval(
                call,
                format!("{ptr:#x}+{size:#x} is not inside one reservation"),
            ));
        }
        let overlap = st
            .mappings
            .range(..end)
            .next_back()
            .is_some_and(|(&va, m)| va + m.size as u64 > ptr);
        if overlap {
            return Err(inval(
                call,
                format!("{ptr:#x}+{size:#x} overlaps a mapping"),
            ));
        }
        let core = self.inner.core.clone();
        let b = core.backend.as_ref();
        let gpu_id = core.gpus[gpu].gpu_id;
        let bo =
            kfd::ioctl::import_dmabuf(b, gpu_id, fd, ptr).map_err(|e| Error::from_kfd(call, e))?;
        // Small BAR: no CPU mapping (KFD would refuse it); the reservation stays PROT_NONE.
        let r = if cpu_visible {
            // SAFETY: the fd is the allocation's dmabuf; the fixed range lies in our own
            // reservation (checked above), which nothing references.
            unsafe {
                rustix::mm::mmap(
                    ptr as *mut core::ffi::c_void,
                    size,
                    rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                    rustix::mm::MapFlags::SHARED | rustix::mm::MapFlags::FIXED,
                    BorrowedFd::borrow_raw(fd),
                    0,
                )
            }
            .map(|_| ())
        } else {
            Ok(())
        };
        if let Err(e) = r {
            let _ = kfd::ioctl::free_memory_of_gpu(b, bo);
            return Err(Error::new(
                ErrorKind::Driver,
                call,
                format!("mmap of the dmabuf: {e}"),
            ));
        }
        if let Some(a) = st.allocs.get_mut(&handle.0) {
            a.refs += 1;
        }
        let n = core.gpus.len();
        st.mappings.insert(
            ptr,
            Mapping {
                core,
                size,
                handle: handle.0,
                bo,
                access: vec![AccessFlags::None; n],
                mapped_on: Vec::new(),
                va: ptr,
            },
        );
        Ok(())
    }

    /// `hipMemUnmap`: unmap every mapping in `[ptr, ptr+size)`, which must be exactly a
    /// sequence of whole mappings (InvalidValue otherwise). GPU access goes with them.
    pub fn mem_unmap(&self, ptr: u64, size: usize) -> Result<()> {
        let call = "hipMemUnmap";
        if ptr == 0 || size == 0 {
            return Err(inval(call, "null pointer or zero size"));
        }
        let mut st = self.inner.vmm.lock();
        for va in st.tiling(call, ptr, size)? {
            if let Some(m) = st.mappings.remove(&va) {
                let h = m.handle;
                drop(m);
                st.unref(h);
            }
        }
        Ok(())
    }

    /// `hipMemSetAccess`: for every descriptor, give its device read-write
    /// ([`AccessFlags::ReadWrite`]), read ([`AccessFlags::Read`], see the module docs) or no
    /// ([`AccessFlags::None`]) access to `[ptr, ptr+size)`, which must be exactly a sequence
    /// of whole mappings. Locations must be valid devices and flags one of the three; no
    /// descriptor, a null pointer or zero size is InvalidValue. Nothing changes when a
    /// descriptor is invalid.
    pub fn mem_set_access(&self, ptr: u64, size: usize, desc: &[AccessDesc]) -> Result<()> {
        let call = "hipMemSetAccess";
        if ptr == 0 || size == 0 || desc.is_empty() {
            return Err(inval(call, "null pointer, zero size or no descriptor"));
        }
        let mut wanted = Vec::with_capacity(desc.len());
        for d in desc {
            let g = self.vmm_gpu(call, d.location)?;
            wanted.push((g, d.flags));
        }
        let mut st = self.inner.vmm.lock();
        let vas = st.tiling(call, ptr, size)?;
        let b = self.inner.backend.as_ref();
        for va in vas {
            let Some(m) = st.mappings.get_mut(&va) else {
                continue;
            };
            for &(g, f) in &wanted {
                let id = self.inner.gpus[g].gpu_id;
                let on = m.mapped_on.contains(&id);
                if f != AccessFlags::None && !on {
                    let mut n = 0;
                    kfd::ioctl::map_memory_to_gpu(b, m.bo, &[id], &mut n)
                        .map_err(|e| Error::from_kfd(call, e))?;
                    m.mapped_on.push(id);
                } else if f == AccessFlags::None && on {
                    let mut n = 0;
                    kfd::ioctl::unmap_memory_from_gpu(b, m.bo, &[id], &mut n)
                        .map_err(|e| Error::from_kfd(call, e))?;
                    m.mapped_on.retain(|&x| x != id);
                }
                m.access[g] = f;
            }
        }
        Ok(())
    }

    /// `hipMemGetAccess`: the access flags `location` has to the mapping holding `ptr`
    /// ([`AccessFlags::None`] until set). InvalidValue when nothing is mapped at `ptr` or the
    /// location is not a valid device.
    pub fn mem_get_access(&self, location: Location, ptr: u64) -> Result<AccessFlags> {
        let call = "hipMemGetAccess";
        let g = self.vmm_gpu(call, location)?;
        let st = self.inner.vmm.lock();
        st.mapping_at(ptr)
            .map(|(_, m)| m.access[g])
            .ok_or_else(|| inval(call, format!("nothing mapped at {ptr:#x}")))
    }

    /// `hipMemExportToShareableHandle`: a new dmabuf fd for the allocation (close-on-exec;
    /// clear the flag to pass it to a child, or send it over a Unix socket). `handle_type`
    /// must be PosixFileDescriptor (Win32 types: NotSupported) and the allocation must have
    /// been created with that `requested_handle_type`; `flags` must be 0 (InvalidValue).
    pub fn mem_export_to_shareable_handle(
        &self,
        handle: MemHandle,
        handle_type: HandleType,
        flags: u64,
    ) -> Result<OwnedFd> {
        let call = "hipMemExportToShareableHandle";
        if flags != 0 {
            return Err(inval(call, format!("flags {flags:#x} must be 0")));
        }
        match handle_type {
            HandleType::PosixFileDescriptor => {}
            HandleType::Win32 | HandleType::Win32Kmt => {
                return Err(Error::new(
                    ErrorKind::NotSupported,
                    call,
                    "Win32 handle types do not exist on Linux",
                ))
            }
            HandleType::None => return Err(inval(call, "handle type None")),
        }
        let st = self.inner.vmm.lock();
        let a = st
            .allocs
            .get(&handle.0)
            .ok_or_else(|| inval(call, format!("unknown handle {:#x}", handle.0)))?;
        if a.prop.requested_handle_type != HandleType::PosixFileDescriptor {
            return Err(inval(
                call,
                "the allocation was not created with hipMemHandleTypePosixFileDescriptor",
            ));
        }
        rustix::io::fcntl_dupfd_cloexec(a.fd.as_fd(), 0)
            .map_err(|e| Error::new(ErrorKind::Driver, call, format!("dup: {e}")))
    }

    /// `hipMemImportFromShareableHandle`: a handle for the allocation behind a dmabuf fd
    /// (from this or another process); the fd is duplicated, the caller keeps its own.
    /// `handle_type` must be PosixFileDescriptor (Win32: NotSupported); an fd that is not a
    /// GPU dmabuf of this device is InvalidValue.
    pub fn mem_import_from_shareable_handle(
        &self,
        fd: BorrowedFd<'_>,
        handle_type: HandleType,
    ) -> Result<MemHandle> {
        let call = "hipMemImportFromShareableHandle";
        match handle_type {
            HandleType::PosixFileDescriptor => {}
            HandleType::Win32 | HandleType::Win32Kmt => {
                return Err(Error::new(
                    ErrorKind::NotSupported,
                    call,
                    "Win32 handle types do not exist on Linux",
                ))
            }
            HandleType::None => return Err(inval(call, "handle type None")),
        }
        let core = &self.inner.core;
        let info = kfd::ioctl::get_dmabuf_info(core.backend.as_ref(), fd.as_raw_fd())
            .map_err(|e| Error::new(ErrorKind::InvalidValue, call, e.to_string()).with_source(e))?;
        let gpu = core
            .gpus
            .iter()
            .position(|g| g.gpu_id == info.gpu_id)
            .ok_or_else(|| inval(call, format!("dmabuf of unknown gpu_id {:#x}", info.gpu_id)))?;
        let own = rustix::io::fcntl_dupfd_cloexec(fd, 0)
            .map_err(|e| Error::new(ErrorKind::InvalidValue, call, format!("dup: {e}")))?;
        let size = info.size as usize;
        let mut st = self.inner.vmm.lock();
        st.next += 1;
        let id = st.next;
        st.allocs.insert(
            id,
            PhysAlloc {
                core: core.clone(),
                size,
                prop: MemAllocationProp::device(gpu, HandleType::PosixFileDescriptor),
                bo: None,
                fd: own,
                gpu_index: gpu,
                cpu_visible: large_bar(core, gpu),
                refs: 1,
            },
        );
        Ok(MemHandle(id))
    }

    /// `hipMemMapArrayAsync`: sparse arrays do not exist on AMD GPUs (the seed: "not
    /// supported on AMD GPUs"): an empty list is InvalidValue (as CLR), anything else
    /// NotSupported.
    pub fn mem_map_array_async(&self, map_info_count: usize, stream: &Stream) -> Result<()> {
        let call = "hipMemMapArrayAsync";
        let _ = stream;
        if map_info_count == 0 {
            return Err(inval(call, "empty map-info list"));
        }
        Err(Error::new(
            ErrorKind::NotSupported,
            call,
            "sparse arrays are not supported on AMD GPUs",
        ))
    }
}
