//! Managed memory (HIP seed 002, attach rules of CUDA seed 004) on KFD shared virtual
//! memory (`AMDKFD_IOC_SVM`).
//!
//! # Model
//! A managed allocation is anonymous, page-aligned host memory registered with KFD as an
//! SVM range — what CLR does for `hipMallocManaged` on an HMM-capable device: the range is
//! system memory at its own address, every GPU gets `ACCESS` to it (CLR's
//! `SetSvmAttributesInt(SetAccessedBy, first_alloc = true)` = `AGENT_ACCESSIBLE` for every
//! device), and the kernel migrates it between system memory and VRAM when asked
//! (`PREFETCH_LOC`) or on GPU faults (XNACK on). GPU VA == CPU VA.
//!
//! | HIP | KFD SVM |
//! |---|---|
//! | `hipMemAdviseSetReadMostly` / `Unset` | `SET_FLAGS` / `CLR_FLAGS` `GPU_READ_MOSTLY` |
//! | `hipMemAdviseSetPreferredLocation(gpu)` / `(cpu)` | `PREFERRED_LOC` gpu_id / `SYSMEM` |
//! | `hipMemAdviseUnsetPreferredLocation` | `PREFERRED_LOC` `UNDEFINED` |
//! | `hipMemAdviseSetAccessedBy(gpu)` | `ACCESS_IN_PLACE` gpu_id (CLR) |
//! | `hipMemAdviseUnsetAccessedBy(gpu)` | `ACCESS` gpu_id (CLR: back to plain accessible) |
//! | `hipMemAdviseSet/UnsetAccessedBy(cpu)` | no KFD attribute: kept by kfdrt per page |
//! | `hipMemAdviseSetCoarseGrain` / `Unset` | `CLR_FLAGS` / `SET_FLAGS` `COHERENT` |
//! | `hipMemPrefetchAsync(gpu)` / `(cpu)` | `PREFETCH_LOC` gpu_id / `SYSMEM` |
//!
//! Ranges are rounded to CPU pages (start down, end up), as the seed says and the CUDA
//! driver does since CUDA 8.
//!
//! # XNACK
//! The device's XNACK mode (`SET_XNACK_MODE` query) selects:
//! * **Pageable (non-managed) memory**: prefetch, advise, range attributes and
//!   `streamAttachMemAsync` accept ordinary host memory only with XNACK on (CLR's
//!   `hmmCpuMemoryAccessible_`, `hipDevAttrPageableMemoryAccess`); with XNACK off they
//!   return InvalidValue for it (NotSupported for prefetch, as CLR).
//! * **Residency on several GPUs**: with XNACK off every GPU holds `ACCESS` (a GPU cannot
//!   fault pages in), and the kernel keeps a range in system memory when a GPU other than
//!   the prefetch target may use it (`svm_range_best_prefetch_location`); with XNACK on only
//!   `ACCESS_IN_PLACE` users (SetAccessedBy) pin it there. The last prefetch location reads
//!   back the request either way.
//!
//! # Stream order
//! `hipMemPrefetchAsync` and `hipStreamAttachMemAsync` are stream-ordered host-side
//! operations (an SVM ioctl, a bookkeeping change). When the stream's earlier work has
//! completed at call time they happen at once; otherwise they run as a stream callback
//! ([`Stream::add_callback`]), which starts after the earlier work and holds later work
//! until it has finished — exactly stream order, with no helper thread of our own.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, Weak};

use kfd::abi::{self, SvmAttribute};

use crate::devcore::DeviceCore;
use crate::device::{Device, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::stream::{Stream, StreamInner};
use crate::types::{AttachFlags, Location};
use crate::va::PAGE;

/// `hipMemRangeCoherencyMode`: the value of [`MemRangeAttribute::CoherencyMode`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum CoherencyMode {
    /// `hipMemRangeCoherencyModeFineGrain` (0).
    FineGrain = 0,
    /// `hipMemRangeCoherencyModeCoarseGrain` (1).
    CoarseGrain = 1,
    /// `hipMemRangeCoherencyModeIndeterminate` (2): a range mixing both.
    Indeterminate = 2,
}

impl CoherencyMode {
    /// HIP's value.
    pub fn raw(self) -> u32 {
        self as u32
    }
}

/// `hipMemoryAdvise`, with HIP's numeric values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MemoryAdvise {
    /// `hipMemAdviseSetReadMostly`.
    SetReadMostly = 1,
    /// `hipMemAdviseUnsetReadMostly`.
    UnsetReadMostly = 2,
    /// `hipMemAdviseSetPreferredLocation`.
    SetPreferredLocation = 3,
    /// `hipMemAdviseUnsetPreferredLocation`.
    UnsetPreferredLocation = 4,
    /// `hipMemAdviseSetAccessedBy`.
    SetAccessedBy = 5,
    /// `hipMemAdviseUnsetAccessedBy`.
    UnsetAccessedBy = 6,
    /// `hipMemAdviseSetCoarseGrain`.
    SetCoarseGrain = 100,
    /// `hipMemAdviseUnsetCoarseGrain`.
    UnsetCoarseGrain = 101,
}

impl MemoryAdvise {
    /// All advices.
    pub const ALL: [MemoryAdvise; 8] = [
        MemoryAdvise::SetReadMostly,
        MemoryAdvise::UnsetReadMostly,
        MemoryAdvise::SetPreferredLocation,
        MemoryAdvise::UnsetPreferredLocation,
        MemoryAdvise::SetAccessedBy,
        MemoryAdvise::UnsetAccessedBy,
        MemoryAdvise::SetCoarseGrain,
        MemoryAdvise::UnsetCoarseGrain,
    ];
    /// From HIP's value; anything else is InvalidValue.
    pub fn from_raw(v: u32) -> Result<Self> {
        hip_value(&Self::ALL, |a| a as u32, v)
            .ok_or_else(|| invalid_value("hipMemAdvise", "advice", v, "hipMemoryAdvise"))
    }
}

/// `hipMemRangeAttribute`, with HIP's numeric values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum MemRangeAttribute {
    /// `hipMemRangeAttributeReadMostly`: an `i32`, 1 when every page is read-mostly.
    ReadMostly = 1,
    /// `hipMemRangeAttributePreferredLocation`: an `i32` device,
    /// [`Location::CPU_DEVICE_ID`], or [`Location::INVALID_DEVICE_ID`] when pages differ or
    /// none is set.
    PreferredLocation = 2,
    /// `hipMemRangeAttributeAccessedBy`: an array of `i32` devices, padded with
    /// [`Location::INVALID_DEVICE_ID`].
    AccessedBy = 3,
    /// `hipMemRangeAttributeLastPrefetchLocation`: an `i32` as PreferredLocation.
    LastPrefetchLocation = 4,
    /// `hipMemRangeAttributeCoherencyMode`: a `u32` [`CoherencyMode`].
    CoherencyMode = 100,
}

impl MemRangeAttribute {
    /// From HIP's value; anything else is InvalidValue.
    pub fn from_raw(v: u32) -> Result<Self> {
        let all = [
            Self::ReadMostly,
            Self::PreferredLocation,
            Self::AccessedBy,
            Self::LastPrefetchLocation,
            Self::CoherencyMode,
        ];
        hip_value(&all, |a| a as u32, v).ok_or_else(|| {
            invalid_value(
                "hipMemRangeGetAttribute",
                "attribute",
                v,
                "hipMemRangeAttribute",
            )
        })
    }
}

/// The member of `all` whose HIP value (`raw`) is `v`.
fn hip_value<T: Copy>(all: &[T], raw: impl Fn(T) -> u32, v: u32) -> Option<T> {
    all.iter().copied().find(|&a| raw(a) == v)
}

/// InvalidValue from `call`: `v` is no value of the HIP enumeration `hip_type`.
fn invalid_value(call: &'static str, what: &str, v: u32, hip_type: &str) -> Error {
    Error::new(
        ErrorKind::InvalidValue,
        call,
        format!("{what} {v} is not a {hip_type} value"),
    )
}

/// The stream association of managed memory (`hipStreamAttachMemAsync`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attachment {
    /// `hipMemAttachGlobal`.
    Global,
    /// `hipMemAttachHost`.
    Host,
    /// `hipMemAttachSingle`: one stream (see [`Device::mem_attached_to`]).
    Single,
}

#[derive(Clone)]
enum Assoc {
    Global,
    Host,
    Single(Weak<StreamInner>),
}

impl Assoc {
    fn resolve(&self, default: Attachment) -> Attachment {
        match self {
            Assoc::Global => Attachment::Global,
            Assoc::Host => Attachment::Host,
            // The association reverts when the stream is gone: dropped and its work done
            // (a stream destroyed while busy lives in the graveyard until then).
            Assoc::Single(w) if w.strong_count() > 0 => Attachment::Single,
            Assoc::Single(_) => default,
        }
    }
}

struct Alloc {
    /// Requested size.
    size: usize,
    default: Attachment,
    assoc: Option<Assoc>,
}

/// Pages (by page number) as disjoint half-open intervals.
#[derive(Default)]
struct PageSet(BTreeMap<u64, u64>);

impl PageSet {
    fn remove(&mut self, s: u64, e: u64) {
        let keys: Vec<(u64, u64)> = self
            .0
            .range(..e)
            .filter(|(_, &ie)| ie > s)
            .map(|(&a, &b)| (a, b))
            .collect();
        for (a, b) in keys {
            self.0.remove(&a);
            if a < s {
                self.0.insert(a, s);
            }
            if b > e {
                self.0.insert(e, b);
            }
        }
    }
    fn insert(&mut self, s: u64, e: u64) {
        self.remove(s, e);
        let mut s2 = s;
        let mut e2 = e;
        if let Some((&a, &b)) = self.0.range(..s).next_back() {
            if b == s {
                self.0.remove(&a);
                s2 = a;
            }
        }
        if let Some(&b) = self.0.get(&e) {
            self.0.remove(&e);
            e2 = b;
        }
        self.0.insert(s2, e2);
    }
    fn covers(&self, s: u64, e: u64) -> bool {
        self.0.range(..=s).next_back().is_some_and(|(_, &b)| b >= e)
    }
}

#[derive(Default)]
struct State {
    allocs: BTreeMap<u64, Alloc>,
    /// Pages with the CPU in their accessed-by set.
    cpu_accessed_by: PageSet,
    /// Stream associations of pageable (system-allocated) ranges: (start, len, assoc).
    pageable: Vec<(u64, u64, Assoc)>,
}

/// Per-device managed-memory bookkeeping (allocations, CPU accessed-by, associations).
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
    /// `(start, size)` of the managed allocation containing `addr`.
    pub(crate) fn extent_of(&self, addr: u64) -> Option<(u64, u64)> {
        crate::va::range_containing(&self.lock().allocs, addr, |a| a.size as u64)
    }
}

/// What a (ptr, count) names.
#[derive(Clone, Copy)]
enum Target {
    /// Inside a managed allocation.
    Managed,
    /// System-allocated memory (XNACK on only).
    Pageable,
}

/// Page-rounded `[start, end)` of `[ptr, ptr+count)`.
fn page_range(call: &'static str, ptr: u64, count: usize) -> Result<(u64, u64)> {
    if ptr == 0 || count == 0 {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            call,
            format!("ptr={ptr:#x} count={count:#x}: both must be non-zero"),
        ));
    }
    let end = ptr
        .checked_add(count as u64)
        .and_then(|e| e.checked_next_multiple_of(PAGE as u64))
        .ok_or_else(|| Error::new(ErrorKind::InvalidValue, call, "range overflows"))?;
    Ok((ptr & !(PAGE as u64 - 1), end))
}

fn svm_err(call: &'static str, e: kfd::KfdError) -> Error {
    match e.errno {
        kfd::Errno::FAULT | kfd::Errno::INVAL | kfd::Errno::ADDRINUSE => {
            Error::new(ErrorKind::InvalidValue, call, e.to_string()).with_source(e)
        }
        _ => Error::from_kfd(call, e),
    }
}

/// `AMDKFD_IOC_SVM` operation `op` (SET_ATTR, GET_ATTR) of `attrs` over the pages `[s, e)`.
fn svm(
    dev: &DeviceCore,
    call: &'static str,
    op: u32,
    s: u64,
    e: u64,
    attrs: &mut [SvmAttribute],
) -> Result<()> {
    kfd::ioctl::svm(dev.backend.as_ref(), op, s, e - s, attrs).map_err(|x| svm_err(call, x))
}

fn attr(type_: u32, value: u32) -> SvmAttribute {
    SvmAttribute { type_, value }
}

/// Memory from [`Device::malloc_managed`]: host memory registered as a KFD SVM range,
/// usable by the CPU and every GPU at the same address. Dropping it is `hipFree`.
///
/// # Example
///
/// ```
/// use kfdrt::{AttachFlags, Device, Location, MemRangeAttribute, MemoryAdvise, WriteValueFlags};
///
/// # fn main() -> kfdrt::Result<()> {
/// let dev = Device::open()?;
/// let s = dev.create_stream(0)?;
/// let m = dev.malloc_managed(1 << 20, AttachFlags::GLOBAL)?;
/// m.write(0, &[9u8; 16])?;
/// let gpu0 = Location::Gpu(0);
/// dev.mem_advise(m.ptr(), 1 << 20, MemoryAdvise::SetPreferredLocation, gpu0)?;
/// dev.mem_prefetch_async(m.ptr(), 1 << 20, gpu0, &s)?; // to GPU 0's VRAM
/// s.write_value32(m.ptr() + 16, 5, WriteValueFlags::DEFAULT)?; // the GPU writes it there
/// dev.mem_prefetch_async(m.ptr(), 1 << 20, Location::Host, &s)?; // and back
/// s.synchronize()?;
/// let mut b = [0u8; 20];
/// m.read(0, &mut b)?;
/// assert_eq!((b[0], b[16]), (9, 5));
/// let mut loc = [0u8; 4];
/// dev.mem_range_get_attribute(&mut loc, MemRangeAttribute::PreferredLocation, m.ptr(), 1 << 20)?;
/// assert_eq!(i32::from_le_bytes(loc), 0);
/// # Ok(())
/// # }
/// ```
pub struct ManagedMemory {
    dev: Device,
    base: u64,
    size: usize,
    mapped: usize,
}

impl std::fmt::Debug for ManagedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ManagedMemory(ptr={:#x} size={:#x})",
            self.base, self.size
        )
    }
}

// SAFETY: the value owns an anonymous mapping and hands out only addresses and copies.
unsafe impl Send for ManagedMemory {}
// SAFETY: as above.
unsafe impl Sync for ManagedMemory {}

impl ManagedMemory {
    /// The address (CPU and GPU).
    pub fn ptr(&self) -> u64 {
        self.base
    }
    /// The address as a pointer.
    pub fn as_ptr(&self) -> *mut u8 {
        self.base as *mut u8
    }
    /// The requested size in bytes.
    pub fn len(&self) -> usize {
        self.size
    }
    /// Never true: sizes are non-zero.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    fn check(&self, call: &'static str, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("{offset:#x}+{len:#x} outside {:#x} bytes", self.size),
            ));
        }
        Ok(())
    }
    /// Copy `data` in at `offset` with the CPU.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check("ManagedMemory::write", offset, data.len())?;
        // SAFETY: bounds checked; the mapping lives as long as `self`; shared with the
        // GPUs, so accessed by raw copy only.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), self.as_ptr().add(offset), data.len())
        };
        Ok(())
    }
    /// Copy out from `offset` with the CPU.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check("ManagedMemory::read", offset, out.len())?;
        // SAFETY: as in `write`.
        unsafe {
            core::ptr::copy_nonoverlapping(self.as_ptr().add(offset), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }
}

impl Drop for ManagedMemory {
    fn drop(&mut self) {
        let inner = &self.dev.inner;
        let (s, e) = (self.base, self.base + self.mapped as u64);
        {
            let mut st = inner.managed.lock();
            st.allocs.remove(&self.base);
            st.cpu_accessed_by.remove(s >> 12, e >> 12);
        }
        // Return any VRAM and drop the GPU mappings before the memory goes (on hardware the
        // MMU notifier of munmap would do this too).
        let mut attrs: Vec<SvmAttribute> = inner
            .gpus
            .iter()
            .map(|g| attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g.gpu_id))
            .collect();
        attrs.push(attr(
            abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC,
            abi::KFD_IOCTL_SVM_LOCATION_SYSMEM,
        ));
        let _ = svm(
            inner,
            "hipFree",
            abi::KFD_IOCTL_SVM_OP_SET_ATTR,
            s,
            e,
            &mut attrs,
        );
        if let Some(nn) = core::ptr::NonNull::new(self.base as *mut core::ffi::c_void) {
            // SAFETY: the range is this allocation's own mapping, being retired; nothing
            // references it afterwards.
            let _ = unsafe { inner.backend.release_svm_mapping(nn, self.mapped) };
        }
    }
}

impl DeviceInner {
    /// XNACK mode of the process (`SET_XNACK_MODE` query; off when the kernel lacks it).
    pub(crate) fn xnack_enabled(&self) -> bool {
        kfd::ioctl::set_xnack_mode(self.backend.as_ref(), -1).is_ok_and(|m| m > 0)
    }
}

impl Device {
    /// Whether the process runs with XNACK (GPU page-fault retry) enabled; selects the
    /// managed-memory behaviours listed in [`crate::managed`].
    pub fn xnack_enabled(&self) -> bool {
        self.inner.xnack_enabled()
    }

    /// `hipMallocManaged`: `size` bytes (rounded up to 4 KiB pages) of managed memory.
    ///
    /// `flags` must be [`AttachFlags::GLOBAL`] or [`AttachFlags::HOST`] (the initial stream
    /// association); anything else, or `size == 0`, is InvalidValue (HIP's public entry
    /// point rejects size 0). The memory is anonymous host memory registered as one SVM
    /// range with `ACCESS` for every GPU (as CLR); it starts in system memory and is
    /// zero-filled.
    pub fn malloc_managed(&self, size: usize, flags: AttachFlags) -> Result<ManagedMemory> {
        let call = "hipMallocManaged";
        if size == 0 {
            return Err(Error::new(ErrorKind::InvalidValue, call, "size is 0"));
        }
        let default = if flags == AttachFlags::GLOBAL {
            Attachment::Global
        } else if flags == AttachFlags::HOST {
            Attachment::Host
        } else {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!(
                    "flags {:#x}: must be hipMemAttachGlobal (1) or hipMemAttachHost (2)",
                    flags.bits()
                ),
            ));
        };
        let mapped = size.checked_next_multiple_of(PAGE).ok_or_else(|| {
            Error::new(
                ErrorKind::OutOfMemory,
                call,
                format!("size {size:#x} too large"),
            )
        })?;
        // SAFETY: a fresh private anonymous mapping at a kernel-chosen address.
        let p = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                mapped,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::NORESERVE,
            )
        }
        .map_err(|e| {
            Error::new(
                ErrorKind::OutOfMemory,
                call,
                format!("mmap {mapped:#x}: {e}"),
            )
        })?;
        let base = p as u64;
        let mut attrs: Vec<SvmAttribute> = self
            .inner
            .gpus
            .iter()
            .map(|g| attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g.gpu_id))
            .collect();
        if let Err(e) = svm(
            &self.inner,
            call,
            abi::KFD_IOCTL_SVM_OP_SET_ATTR,
            base,
            base + mapped as u64,
            &mut attrs,
        ) {
            // SAFETY: our fresh mapping, never handed out.
            let _ = unsafe { rustix::mm::munmap(p, mapped) };
            return Err(e);
        }
        self.inner.managed.lock().allocs.insert(
            base,
            Alloc {
                size,
                default,
                assoc: None,
            },
        );
        Ok(ManagedMemory {
            dev: self.clone(),
            base,
            size,
            mapped,
        })
    }

    /// Which allocation `[ptr, ptr+count)` lies in; pageable memory with XNACK on.
    fn managed_target(&self, call: &'static str, ptr: u64, count: usize) -> Result<Target> {
        let st = self.inner.managed.lock();
        if let Some((&base, a)) = st.allocs.range(..=ptr).next_back() {
            if ptr < base + a.size as u64 {
                if (ptr - base) + count as u64 > a.size as u64 {
                    return Err(Error::new(
                        ErrorKind::InvalidValue,
                        call,
                        format!(
                            "{ptr:#x}+{count:#x} runs past the managed allocation {base:#x}+{:#x}",
                            a.size
                        ),
                    ));
                }
                return Ok(Target::Managed);
            }
        }
        drop(st);
        if self.inner.xnack_enabled() {
            Ok(Target::Pageable)
        } else {
            Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("{ptr:#x} is not managed memory, and pageable memory needs XNACK on"),
            ))
        }
    }

    /// A location argument: `Ok(None)` for the host, `Ok(Some(index))` for a GPU of the
    /// device, InvalidDevice for a GPU it does not have (`hipErrorInvalidDevice`, as CLR).
    fn location(&self, call: &'static str, device: Location) -> Result<Option<usize>> {
        match device {
            Location::Host => Ok(None),
            Location::Gpu(i) if i < self.inner.gpus.len() => Ok(Some(i)),
            Location::Gpu(i) => Err(Error::new(
                ErrorKind::InvalidDevice,
                call,
                format!(
                    "device {i}: expected the host or a GPU 0..{}",
                    self.inner.gpus.len()
                ),
            )),
        }
    }

    /// `hipMemPrefetchAsync`: migrate `[ptr, ptr+count)` (rounded to pages) to GPU
    /// `device`'s VRAM, or to system memory for [`Location::Host`], in the order of
    /// `stream` (see [`crate::managed`] for how). The bytes are preserved.
    ///
    /// Errors: null pointer or zero count, or a range running past its managed allocation:
    /// InvalidValue; a device that is neither a GPU nor -1: InvalidDevice; memory that is
    /// not managed with XNACK off: NotSupported (CLR). A GPU target without room for the
    /// range leaves it where it is (the kernel ignores the failed migration).
    pub fn mem_prefetch_async(
        &self,
        ptr: u64,
        count: usize,
        device: Location,
        stream: &Stream,
    ) -> Result<()> {
        let call = "hipMemPrefetchAsync";
        let (s, e) = page_range(call, ptr, count)?;
        let loc = self.location(call, device)?;
        match self.managed_target(call, ptr, count) {
            Ok(_) => {}
            Err(err) if err.kind() == ErrorKind::InvalidValue && !self.is_managed(ptr) => {
                return Err(Error::new(ErrorKind::NotSupported, call, err.to_string()))
            }
            Err(err) => return Err(err),
        }
        let value = match loc {
            Some(i) => self.inner.gpus[i].gpu_id,
            None => abi::KFD_IOCTL_SVM_LOCATION_SYSMEM,
        };
        let run = move |dev: &DeviceInner| -> Result<()> {
            svm(
                dev,
                call,
                abi::KFD_IOCTL_SVM_OP_SET_ATTR,
                s,
                e,
                &mut [attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, value)],
            )
        };
        if stream.point_now().done() {
            return run(&self.inner);
        }
        let weak = Arc::downgrade(&self.inner);
        let sw = Arc::downgrade(&stream.inner);
        stream.add_callback(
            move |status| {
                if status.is_err() {
                    return;
                }
                if let Some(dev) = weak.upgrade() {
                    if let Err(err) = run(&dev) {
                        if let Some(s) = sw.upgrade() {
                            s.fail(err.to_string());
                        }
                    }
                }
            },
            0,
        )
    }

    fn is_managed(&self, ptr: u64) -> bool {
        let st = self.inner.managed.lock();
        st.allocs
            .range(..=ptr)
            .next_back()
            .is_some_and(|(&b, a)| ptr < b + a.size as u64)
    }

    /// `hipMemAdvise` over `[ptr, ptr+count)`, rounded to CPU pages (start down, end up),
    /// mapped to SVM attributes as the table in [`crate::managed`] shows.
    ///
    /// `device` is a GPU or [`Location::Host`]; it is ignored for the read-mostly
    /// advices (as CLR). SetAccessedBy / UnsetAccessedBy for the CPU have no KFD attribute
    /// (the CPU always reaches SVM memory) and are recorded per page by kfdrt, so that
    /// memRangeGetAttribute(AccessedBy) reports them as CUDA does. The coarse-grain
    /// advices apply to the range whatever the device (coherence is a range property).
    ///
    /// Errors: null pointer or zero count, a range past its managed allocation, memory not
    /// managed with XNACK off: InvalidValue; a bad device: InvalidDevice.
    pub fn mem_advise(
        &self,
        ptr: u64,
        count: usize,
        advice: MemoryAdvise,
        device: Location,
    ) -> Result<()> {
        let call = "hipMemAdvise";
        let (s, e) = page_range(call, ptr, count)?;
        let read_mostly = matches!(
            advice,
            MemoryAdvise::SetReadMostly | MemoryAdvise::UnsetReadMostly
        );
        let loc = if read_mostly {
            None
        } else {
            self.location(call, device)?
        };
        self.managed_target(call, ptr, count)?;
        let gpu_id = loc.map(|i| self.inner.gpus[i].gpu_id);
        use abi::*;
        let a = match (advice, gpu_id) {
            (MemoryAdvise::SetReadMostly, _) => attr(
                KFD_IOCTL_SVM_ATTR_SET_FLAGS,
                KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY,
            ),
            (MemoryAdvise::UnsetReadMostly, _) => attr(
                KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
                KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY,
            ),
            (MemoryAdvise::SetPreferredLocation, g) => attr(
                KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
                g.unwrap_or(KFD_IOCTL_SVM_LOCATION_SYSMEM),
            ),
            (MemoryAdvise::UnsetPreferredLocation, _) => attr(
                KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
                KFD_IOCTL_SVM_LOCATION_UNDEFINED,
            ),
            (MemoryAdvise::SetAccessedBy, Some(g)) => attr(KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, g),
            (MemoryAdvise::UnsetAccessedBy, Some(g)) => attr(KFD_IOCTL_SVM_ATTR_ACCESS, g),
            (MemoryAdvise::SetAccessedBy, None) | (MemoryAdvise::UnsetAccessedBy, None) => {
                // Validate the range with KFD (GET_ATTR) before recording.
                let mut q = [attr(KFD_IOCTL_SVM_ATTR_GRANULARITY, 0)];
                svm(&self.inner, call, KFD_IOCTL_SVM_OP_GET_ATTR, s, e, &mut q)?;
                let mut st = self.inner.managed.lock();
                if advice == MemoryAdvise::SetAccessedBy {
                    st.cpu_accessed_by.insert(s >> 12, e >> 12);
                } else {
                    st.cpu_accessed_by.remove(s >> 12, e >> 12);
                }
                return Ok(());
            }
            (MemoryAdvise::SetCoarseGrain, _) => {
                attr(KFD_IOCTL_SVM_ATTR_CLR_FLAGS, KFD_IOCTL_SVM_FLAG_COHERENT)
            }
            (MemoryAdvise::UnsetCoarseGrain, _) => {
                attr(KFD_IOCTL_SVM_ATTR_SET_FLAGS, KFD_IOCTL_SVM_FLAG_COHERENT)
            }
        };
        svm(&self.inner, call, KFD_IOCTL_SVM_OP_SET_ATTR, s, e, &mut [a])
    }

    /// Every attribute of `[ptr, ptr+count)` at once (one GET_ATTR), typed. Mixed ranges
    /// give the "undefined" values: locations `None`, read-mostly 0,
    /// coherency [`CoherencyMode::Indeterminate`], and only the devices that access every page
    /// in place in `accessed_by` (GPUs in index order, then the CPU as -1).
    pub fn mem_range_attributes(&self, ptr: u64, count: usize) -> Result<RangeAttributes> {
        let call = "hipMemRangeGetAttribute";
        let (s, e) = page_range(call, ptr, count)?;
        self.managed_target(call, ptr, count)?;
        use abi::*;
        let n = self.inner.gpus.len();
        let mut q = Vec::with_capacity(4 + n);
        q.push(attr(KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0));
        q.push(attr(KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0));
        q.push(attr(KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0));
        q.push(attr(KFD_IOCTL_SVM_ATTR_CLR_FLAGS, 0));
        for g in &self.inner.gpus {
            q.push(attr(KFD_IOCTL_SVM_ATTR_ACCESS, g.gpu_id));
        }
        svm(&self.inner, call, KFD_IOCTL_SVM_OP_GET_ATTR, s, e, &mut q)?;
        let loc = |v: u32| -> Option<Location> {
            match v {
                KFD_IOCTL_SVM_LOCATION_SYSMEM => Some(Location::Host),
                KFD_IOCTL_SVM_LOCATION_UNDEFINED => None,
                g => self
                    .inner
                    .gpus
                    .iter()
                    .position(|x| x.gpu_id == g)
                    .map(Location::Gpu),
            }
        };
        let set = q[2].value;
        let clr = q[3].value;
        let coherency = if set & KFD_IOCTL_SVM_FLAG_COHERENT != 0 {
            CoherencyMode::FineGrain
        } else if clr & KFD_IOCTL_SVM_FLAG_COHERENT != 0 {
            CoherencyMode::CoarseGrain
        } else {
            CoherencyMode::Indeterminate
        };
        let mut accessed_by: Vec<Location> = q[4..]
            .iter()
            .enumerate()
            .filter(|(_, a)| a.type_ == KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE)
            .map(|(i, _)| Location::Gpu(i))
            .collect();
        if self
            .inner
            .managed
            .lock()
            .cpu_accessed_by
            .covers(s >> 12, e >> 12)
        {
            accessed_by.push(Location::Host);
        }
        Ok(RangeAttributes {
            read_mostly: set & KFD_IOCTL_SVM_FLAG_GPU_READ_MOSTLY != 0,
            preferred_location: loc(q[0].value),
            accessed_by,
            last_prefetch_location: loc(q[1].value),
            coherency,
        })
    }

    /// `hipMemRangeGetAttribute`: write `attribute` of `[ptr, ptr+count)` into `data`
    /// (native-endian 32-bit values).
    ///
    /// Sizes (CLR's `GetSvmAttributes`): ReadMostly, PreferredLocation,
    /// LastPrefetchLocation and CoherencyMode need exactly 4 bytes; AccessedBy a non-zero
    /// multiple of 4 (entries beyond the accessing devices are [`Location::INVALID_DEVICE_ID`],
    /// devices beyond the array are left out). Anything else, an empty `data`, a null
    /// pointer, a zero count, or memory that is not managed (pageable with XNACK on is
    /// accepted) is InvalidValue.
    pub fn mem_range_get_attribute(
        &self,
        data: &mut [u8],
        attribute: MemRangeAttribute,
        ptr: u64,
        count: usize,
    ) -> Result<()> {
        self.mem_range_get_attributes(&mut [data], &[attribute], ptr, count)
    }

    /// `hipMemRangeGetAttributes`: one query per entry of `attributes` into the matching
    /// entry of `data` (same size rules as [`Device::mem_range_get_attribute`]). No
    /// attribute, or `data.len() != attributes.len()`, is InvalidValue.
    pub fn mem_range_get_attributes(
        &self,
        data: &mut [&mut [u8]],
        attributes: &[MemRangeAttribute],
        ptr: u64,
        count: usize,
    ) -> Result<()> {
        let call = "hipMemRangeGetAttributes";
        if attributes.is_empty() || data.len() != attributes.len() {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!(
                    "{} attributes, {} result buffers",
                    attributes.len(),
                    data.len()
                ),
            ));
        }
        for (d, a) in data.iter().zip(attributes) {
            let ok = match a {
                MemRangeAttribute::AccessedBy => !d.is_empty() && d.len() % 4 == 0,
                _ => d.len() == 4,
            };
            if !ok {
                return Err(Error::new(
                    ErrorKind::InvalidValue,
                    call,
                    format!("{a:?}: data size {} is not allowed", d.len()),
                ));
            }
        }
        let r = self.mem_range_attributes(ptr, count)?;
        for (d, a) in data.iter_mut().zip(attributes) {
            match a {
                MemRangeAttribute::ReadMostly => {
                    d.copy_from_slice(&(r.read_mostly as i32).to_ne_bytes())
                }
                MemRangeAttribute::PreferredLocation => {
                    d.copy_from_slice(&device_id(r.preferred_location).to_ne_bytes())
                }
                MemRangeAttribute::LastPrefetchLocation => {
                    d.copy_from_slice(&device_id(r.last_prefetch_location).to_ne_bytes())
                }
                MemRangeAttribute::CoherencyMode => {
                    d.copy_from_slice(&r.coherency.raw().to_ne_bytes())
                }
                MemRangeAttribute::AccessedBy => {
                    for (i, c) in d.chunks_exact_mut(4).enumerate() {
                        let v = device_id(r.accessed_by.get(i).copied());
                        c.copy_from_slice(&v.to_ne_bytes());
                    }
                }
            }
        }
        Ok(())
    }

    /// The current stream association of the managed allocation holding `ptr` (or of the
    /// pageable range attached at `ptr`): the last attach that took effect, or the
    /// allocation's default ([`AttachFlags::GLOBAL`] / [`AttachFlags::HOST`] from
    /// `malloc_managed`; Global for pageable memory) once the attached stream has been
    /// destroyed and its work has completed.
    pub fn mem_attachment(&self, ptr: u64) -> Result<Attachment> {
        self.inner.pools.reap();
        let st = self.inner.managed.lock();
        if let Some((&b, a)) = st.allocs.range(..=ptr).next_back() {
            if ptr < b + a.size as u64 {
                return Ok(a.assoc.as_ref().map_or(a.default, |x| x.resolve(a.default)));
            }
        }
        if let Some((_, _, x)) = st
            .pageable
            .iter()
            .rev()
            .find(|(s, l, _)| ptr >= *s && ptr < s + l)
        {
            return Ok(x.resolve(Attachment::Global));
        }
        Err(Error::new(
            ErrorKind::InvalidValue,
            "mem_attachment",
            format!("{ptr:#x} is neither managed nor attached memory"),
        ))
    }

    /// Whether the memory at `ptr` is attached singly to `stream` now.
    pub fn mem_attached_to(&self, ptr: u64, stream: &Stream) -> Result<bool> {
        if self.mem_attachment(ptr)? != Attachment::Single {
            return Ok(false);
        }
        let st = self.inner.managed.lock();
        let me = Arc::as_ptr(&stream.inner);
        let hit = |x: &Assoc| matches!(x, Assoc::Single(w) if w.as_ptr() == me);
        if let Some((&b, a)) = st.allocs.range(..=ptr).next_back() {
            if ptr < b + a.size as u64 {
                return Ok(a.assoc.as_ref().is_some_and(hit));
            }
        }
        Ok(st
            .pageable
            .iter()
            .rev()
            .find(|(s, l, _)| ptr >= *s && ptr < s + l)
            .is_some_and(|(_, _, x)| hit(x)))
    }
}

/// Every managed-range attribute, as [`Device::mem_range_attributes`] returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeAttributes {
    /// Every page is read-mostly.
    pub read_mostly: bool,
    /// Common preferred location; `None` when pages differ or none is set
    /// (`hipInvalidDeviceId`).
    pub preferred_location: Option<Location>,
    /// Locations that access every page in place (GPUs ascending, then the host).
    pub accessed_by: Vec<Location>,
    /// Common last prefetch location (as `preferred_location`).
    pub last_prefetch_location: Option<Location>,
    /// Coherency of the range.
    pub coherency: CoherencyMode,
}

/// The `i32` HIP writes for a location in attribute data (`hipInvalidDeviceId` for none).
fn device_id(l: Option<Location>) -> i32 {
    l.map_or(Location::INVALID_DEVICE_ID, Location::device_id)
}

impl Stream {
    /// `hipStreamAttachMemAsync` (`cuStreamAttachMemAsync` rules): after the stream's
    /// earlier work, associate `length` bytes at `ptr` with `flags`
    /// ([`AttachFlags::GLOBAL`], [`AttachFlags::HOST`] or [`AttachFlags::SINGLE`] = this
    /// stream), replacing any earlier association.
    ///
    /// Rules: for managed memory `length` must be 0 or the whole allocation's size (both
    /// mean the whole allocation; `ptr` may point inside it with length 0); system-allocated
    /// memory needs a non-zero `length` and a device with pageable memory access (XNACK
    /// on); [`AttachFlags::SINGLE`] on the null stream is InvalidValue (it is no specific
    /// stream); a null `ptr` or other flags are InvalidValue. When the stream is destroyed
    /// the association reverts to the allocation's default once the stream's work is done.
    ///
    /// On AMD GPUs every device has coherent access to managed memory, so the association
    /// changes no SVM attribute (CLR accepts the call and does nothing); kfdrt validates,
    /// orders and records it, readable through [`Device::mem_attachment`].
    pub fn attach_mem_async(&self, ptr: u64, length: usize, flags: AttachFlags) -> Result<()> {
        let call = "hipStreamAttachMemAsync";
        if ptr == 0 {
            return Err(Error::new(ErrorKind::InvalidValue, call, "null pointer"));
        }
        let assoc = if flags == AttachFlags::GLOBAL {
            Assoc::Global
        } else if flags == AttachFlags::HOST {
            Assoc::Host
        } else if flags == AttachFlags::SINGLE {
            if self.is_null() {
                return Err(Error::new(
                    ErrorKind::InvalidValue,
                    call,
                    "hipMemAttachSingle on the null stream",
                ));
            }
            Assoc::Single(Arc::downgrade(&self.inner))
        } else {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!(
                    "flags {:#x}: must be Global (1), Host (2) or Single (4)",
                    flags.bits()
                ),
            ));
        };
        let dev = &self.inner.dev;
        let managed_base = {
            let st = dev.managed.lock();
            match st.allocs.range(..=ptr).next_back() {
                Some((&b, a)) if ptr < b + a.size as u64 => {
                    if length != 0 && (ptr != b || length != a.size) {
                        return Err(Error::new(
                            ErrorKind::InvalidValue,
                            call,
                            format!(
                                "length {length:#x}: must be 0 or the whole allocation ({:#x} at {b:#x})",
                                a.size
                            ),
                        ));
                    }
                    Some(b)
                }
                _ => None,
            }
        };
        if managed_base.is_none() {
            if length == 0 {
                return Err(Error::new(
                    ErrorKind::InvalidValue,
                    call,
                    "length 0 for memory that is not managed",
                ));
            }
            if !dev.xnack_enabled() {
                return Err(Error::new(
                    ErrorKind::InvalidValue,
                    call,
                    "system-allocated memory needs pageable memory access (XNACK on)",
                ));
            }
        }
        let apply = move |d: &DeviceInner| {
            let mut st = d.managed.lock();
            match managed_base {
                Some(b) => {
                    if let Some(a) = st.allocs.get_mut(&b) {
                        a.assoc = Some(assoc);
                    }
                }
                None => {
                    let end = ptr + length as u64;
                    st.pageable.retain(|(s, l, _)| *s >= end || s + l <= ptr);
                    st.pageable.push((ptr, length as u64, assoc));
                }
            }
        };
        if self.point_now().done() {
            apply(dev);
            return Ok(());
        }
        let weak = Arc::downgrade(dev);
        self.add_callback(
            move |_| {
                if let Some(d) = weak.upgrade() {
                    apply(&d);
                }
            },
            0,
        )
    }
}
