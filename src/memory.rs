//! Memory: device (VRAM), host-pinned (GTT), signal memory and registered user memory,
//! each a KFD buffer object placed at a reserved address (GPU VA == CPU VA), CPU-mapped
//! through the render node where the kind allows. System memory is GPU-mapped on every
//! GPU of the device; device memory on its own GPU, and on another GPU only once peer
//! access is enabled ([`crate::Device::enable_peer_access`]), as HIP does. [`Buffer`]
//! frees itself on drop, in the reverse order of creation. Buffers hold only the
//! [`DeviceCore`] (see the layering in the crate docs); the allocation API on
//! [`crate::Device`] is in the `device` module.

use std::sync::{Arc, Mutex};

use kfd::abi::{AllocFlags, AllocMemoryOfGpuArgs};
use kfd::{MmapFile, Prot};
use rustix::mm::{MapFlags, ProtFlags};

use crate::devcore::{map_handle, unmap_handle, DeviceCore, PeerBuf};
use crate::error::{Error, ErrorKind, Result};
use crate::sync::lock;
use crate::va::{VaReservation, HUGE, PAGE};

// Defined with the foundations (`crate::types`) so that `devcore`'s extents can name them.
pub use crate::types::{Allocation, AllocationKind, MemoryKind};

impl Allocation {
    /// Bytes from `addr` (inside the allocation) to its end.
    pub fn room_at(&self, addr: u64) -> u64 {
        (self.base + self.len).saturating_sub(addr)
    }
}

impl MemoryKind {
    fn flags(self, host_visible_vram: bool) -> AllocFlags {
        let common = AllocFlags::WRITABLE | AllocFlags::EXECUTABLE | AllocFlags::NO_SUBSTITUTE;
        match self {
            MemoryKind::Device if host_visible_vram => {
                common | AllocFlags::VRAM | AllocFlags::PUBLIC
            }
            MemoryKind::Device => common | AllocFlags::VRAM,
            MemoryKind::HostPinned => common | AllocFlags::GTT | AllocFlags::COHERENT,
            MemoryKind::Signal => {
                common | AllocFlags::GTT | AllocFlags::COHERENT | AllocFlags::UNCACHED
            }
            MemoryKind::Userptr => common | AllocFlags::USERPTR | AllocFlags::COHERENT,
        }
    }
}

/// A GPU buffer object. GPU VA == CPU VA == [`Buffer::va`].
///
/// # Example
///
/// ```
/// use kfdrt::{Device, MemoryKind};
///
/// # fn main() -> kfdrt::Result<()> {
/// let dev = Device::open()?;
/// let vram = dev.alloc(MemoryKind::Device, 0, 1 << 20)?; // hipMalloc
/// let host = dev.alloc(MemoryKind::HostPinned, 0, 1 << 20)?; // hipHostMalloc
/// host.write(0, b"bytes")?;
/// let s = dev.create_stream(0)?;
/// s.memcpy(vram.va(), host.va(), 5)?;
/// s.synchronize()?;
/// let mut out = [0u8; 5];
/// vram.read(0, &mut out)?; // VRAM is CPU-visible
/// assert_eq!(&out, b"bytes");
/// # Ok(())
/// # }
/// ```
pub struct Buffer {
    dev: Arc<DeviceCore>,
    /// The BO's first address and page-rounded size.
    va: u64,
    size: usize,
    /// The range asked for: `va` and the size before rounding for allocations; the
    /// caller's pointer and length for registered memory (inside `va..va+size`).
    base: u64,
    requested: usize,
    /// The second half of the buffer's key in the extents registry: the handle, or for
    /// registered memory (which may share its BO) a serial of its own.
    key: u64,
    handle: u64,
    kind: MemoryKind,
    gpu_index: usize,
    /// gpu_ids the BO is mapped on; shared with [`crate::devcore::Peers`] for device buffers, whose peer
    /// mappings change with peer access.
    mapped_on: Arc<Mutex<Vec<u32>>>,
    /// Registered in [`crate::devcore::Peers`] (a device buffer whose peer mappings follow peer access).
    peer_managed: bool,
    cpu_mapped: bool,
    reservation: Option<VaReservation>,
    /// Unmapped and freed already ([`Buffer::into_reservation`]); the drop does nothing more.
    retired: bool,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Buffer({:?} va={:#x} size={:#x} handle={:#x})",
            self.kind, self.va, self.size, self.handle
        )
    }
}

// SAFETY: a Buffer owns a shared mapping of device-visible memory; it hands out only raw
// pointers and copies, never references into the mapping.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

impl Buffer {
    pub(crate) fn alloc(
        dev: &Arc<DeviceCore>,
        kind: MemoryKind,
        gpu_index: usize,
        size: usize,
    ) -> Result<Buffer> {
        Self::alloc_inner(dev, kind, gpu_index, size, true, None)
    }

    fn alloc_inner(
        dev: &Arc<DeviceCore>,
        kind: MemoryKind,
        gpu_index: usize,
        size: usize,
        map_all: bool,
        spare: Option<VaReservation>,
    ) -> Result<Buffer> {
        let call = "Device::alloc";
        if kind == MemoryKind::Userptr {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                "use register_host_memory for USERPTR",
            ));
        }
        if size == 0 {
            return Err(Error::new(ErrorKind::InvalidValue, call, "size is 0"));
        }
        let gpu = dev.gpu(gpu_index)?;
        let requested = size;
        let size = size.checked_next_multiple_of(PAGE).ok_or_else(|| {
            Error::new(
                ErrorKind::OutOfMemory,
                call,
                format!("size {size:#x} too large"),
            )
        })?;
        let align = if size >= HUGE { HUGE } else { PAGE };
        // A spare reservation of exactly this size (and alignment) is placed as is.
        let reservation = match spare {
            Some(r) if r.len() == size && r.addr() % align as u64 == 0 => r,
            _ => VaReservation::new(size, align)?,
        };
        let host_visible_vram = gpu
            .node
            .mem_banks
            .iter()
            .any(|b| b.heap_type == kfd::topology::HEAP_TYPE_FB_PUBLIC);
        let cpu_visible = kind != MemoryKind::Device || host_visible_vram;
        let mut args = AllocMemoryOfGpuArgs {
            va_addr: reservation.addr(),
            size: size as u64,
            gpu_id: gpu.gpu_id,
            flags: kind.flags(host_visible_vram).bits(),
            ..Default::default()
        };
        kfd::ioctl::alloc_memory_of_gpu(dev.backend.as_ref(), &mut args)
            .map_err(|e| Error::from_kfd(call, e))?;
        let extent = crate::devcore::Extent {
            len: requested as u64,
            kind: AllocationKind::Buffer(kind),
            gpu: gpu_index,
        };
        dev.extents.insert(reservation.addr(), args.handle, extent);
        let mut buf = Buffer {
            dev: dev.clone(),
            va: reservation.addr(),
            size,
            base: reservation.addr(),
            requested,
            key: args.handle,
            handle: args.handle,
            kind,
            gpu_index,
            mapped_on: Arc::default(),
            peer_managed: false,
            cpu_mapped: false,
            reservation: Some(reservation),
            retired: false,
        };
        if !cpu_visible {
            if map_all {
                buf.map_device()?;
            }
            return Ok(buf);
        }
        // CPU mapping through the render node, placed over the reservation.
        let fixed = buf.reservation.as_ref().map(|r| r.ptr());
        // SAFETY: the fixed range is our own reservation, which nothing references.
        let r = unsafe {
            dev.backend.mmap(
                MmapFile::Render(std::os::fd::AsFd::as_fd(&gpu.render)),
                args.mmap_offset,
                size,
                fixed,
                Prot::READ | Prot::WRITE,
            )
        };
        match r {
            Ok(_) => buf.cpu_mapped = true,
            Err(e) => {
                return Err(Error::new(
                    ErrorKind::Driver,
                    call,
                    format!("mmap of BO {:#x}: {e}", args.handle),
                ));
            }
        }
        if map_all && kind == MemoryKind::Device {
            buf.map_device()?;
        } else if map_all {
            buf.map_all()?;
        }
        Ok(buf)
    }

    /// A device buffer: map it on its GPU and on every GPU with peer access to that GPU,
    /// and register it so that later peer-access changes reach it. Done under the peer
    /// lock, so an `enable_peer_access` running meanwhile sees the buffer either before
    /// (and maps it itself) or after (and finds it mapped).
    fn map_device(&mut self) -> Result<()> {
        let dev = self.dev.clone();
        let mut st = lock(&dev.peers.state);
        map_handle(
            &dev,
            self.handle,
            &self.mapped_on,
            self.gpu_index,
            "Buffer::map",
        )?;
        let accessors: Vec<usize> = st
            .enabled
            .iter()
            .filter(|&&(_, owner)| owner == self.gpu_index)
            .map(|&(a, _)| a)
            .collect();
        for a in accessors {
            map_handle(&dev, self.handle, &self.mapped_on, a, "Buffer::map")?;
        }
        st.bufs.insert(
            self.va,
            PeerBuf {
                len: self.size as u64,
                handle: self.handle,
                owner: self.gpu_index,
                mapped: self.mapped_on.clone(),
            },
        );
        self.peer_managed = true;
        Ok(())
    }

    /// Like [`Buffer::alloc`], but GPU-mapped only on the GPUs in `map_gpus` (indices);
    /// the stream-ordered allocator maps pool memory on peers only after
    /// `hipMemPoolSetAccess`. The BO is placed in `spare` when that is a reservation of
    /// exactly its size ([`Buffer::into_reservation`]), else at a new one.
    pub(crate) fn alloc_on(
        dev: &Arc<DeviceCore>,
        kind: MemoryKind,
        gpu_index: usize,
        size: usize,
        map_gpus: &[usize],
        spare: Option<VaReservation>,
    ) -> Result<Buffer> {
        let mut buf = Self::alloc_inner(dev, kind, gpu_index, size, false, spare)?;
        for &g in map_gpus {
            buf.map_on(g)?;
        }
        Ok(buf)
    }

    /// MAP_MEMORY_TO_GPU on GPU `gpu_index` (no-op when already mapped there).
    pub(crate) fn map_on(&mut self, gpu_index: usize) -> Result<()> {
        map_handle(
            &self.dev,
            self.handle,
            &self.mapped_on,
            gpu_index,
            "Buffer::map_on",
        )
    }

    /// UNMAP_MEMORY_FROM_GPU on GPU `gpu_index` (no-op when not mapped there).
    pub(crate) fn unmap_from(&mut self, gpu_index: usize) -> Result<()> {
        unmap_handle(
            &self.dev,
            self.handle,
            &self.mapped_on,
            gpu_index,
            "Buffer::unmap_from",
        )
    }

    /// The gpu_ids the buffer is GPU-mapped on now.
    pub fn mapped_gpu_ids(&self) -> Vec<u32> {
        lock(&self.mapped_on).clone()
    }

    /// USERPTR registration of `[addr, addr+len)`: the BO covers the whole pages holding
    /// it ([`page_span`]); the buffer's [`Buffer::base`] / [`Buffer::requested_len`] are
    /// the caller's range. Pages inside a live registration's BO share that BO (counted;
    /// freed with its last registration): KFD maps a USERPTR BO at its CPU address, where
    /// a second BO over the same pages would overlap the first. A range that only partly
    /// overlaps a registration fails in KFD (InvalidValue).
    pub(crate) fn userptr(dev: &Arc<DeviceCore>, addr: u64, len: usize) -> Result<Buffer> {
        let call = "Device::register_host_memory";
        let Some((va, size)) = page_span(addr, len) else {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("ptr={addr:#x} len={len:#x}: both must be non-zero, without overflow"),
            ));
        };
        static SERIAL: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 63);
        let key = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let extent = crate::devcore::Extent {
            len: len as u64,
            kind: AllocationKind::Buffer(MemoryKind::Userptr),
            gpu: 0,
        };
        let mut bos = lock(&dev.userptrs);
        let inside = bos
            .range_mut(..=va)
            .next_back()
            .filter(|(&bva, bo)| va + size as u64 <= bva + bo.size as u64);
        if let Some((&bva, bo)) = inside {
            bo.refs += 1;
            dev.extents.insert(addr, key, extent);
            return Ok(Buffer {
                dev: dev.clone(),
                va: bva,
                size: bo.size,
                base: addr,
                requested: len,
                key,
                handle: bo.handle,
                kind: MemoryKind::Userptr,
                gpu_index: 0,
                mapped_on: bo.mapped_on.clone(),
                peer_managed: false,
                cpu_mapped: false,
                reservation: None,
                retired: false,
            });
        }
        let gpu = dev.gpu(0)?;
        let mut args = AllocMemoryOfGpuArgs {
            va_addr: va,
            size: size as u64,
            mmap_offset: va,
            gpu_id: gpu.gpu_id,
            flags: MemoryKind::Userptr.flags(false).bits(),
            ..Default::default()
        };
        kfd::ioctl::alloc_memory_of_gpu(dev.backend.as_ref(), &mut args)
            .map_err(|e| Error::from_kfd(call, e))?;
        let mut buf = Buffer {
            dev: dev.clone(),
            va,
            size,
            base: addr,
            requested: len,
            key,
            handle: args.handle,
            kind: MemoryKind::Userptr,
            gpu_index: 0,
            mapped_on: Arc::default(),
            peer_managed: false,
            cpu_mapped: false,
            reservation: None,
            retired: false,
        };
        if let Err(e) = buf.map_all() {
            // Unlocked before `buf`'s drop, which takes the lock.
            drop(bos);
            return Err(e);
        }
        bos.insert(
            va,
            crate::devcore::UserptrBo {
                size,
                handle: args.handle,
                refs: 1,
                mapped_on: buf.mapped_on.clone(),
            },
        );
        dev.extents.insert(addr, key, extent);
        Ok(buf)
    }

    /// MAP_MEMORY_TO_GPU on every GPU, resuming from `n_success` after a partial failure
    /// is reported (the kernel may map a prefix of the list and then fail).
    fn map_all(&mut self) -> Result<()> {
        let ids = self.dev.gpu_ids();
        let mut n = 0u32;
        kfd::ioctl::map_memory_to_gpu(self.dev.backend.as_ref(), self.handle, &ids, &mut n)
            .map_err(|e| Error::from_kfd("Buffer::map", e))?;
        *lock(&self.mapped_on) = ids;
        Ok(())
    }

    /// GPU and CPU virtual address of the buffer object (page-aligned; for registered
    /// memory, the start of the first page of the caller's range).
    pub fn va(&self) -> u64 {
        self.va
    }
    /// Size in bytes of the buffer object from [`Buffer::va`] (rounded up to pages).
    pub fn len(&self) -> usize {
        self.size
    }
    /// The address asked for: [`Buffer::va`] for an allocation, the caller's pointer for
    /// registered memory (`hipHostRegister`'s pointer, which need not be page-aligned).
    pub fn base(&self) -> u64 {
        self.base
    }
    /// The bytes asked for from [`Buffer::base`] (`hipMalloc(100)`: 100), the length the
    /// copies and fills of [`crate::Stream`] are checked against, as CLR checks them.
    pub fn requested_len(&self) -> usize {
        self.requested
    }
    /// Never true: buffers have a non-zero size.
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
    /// The KFD handle.
    pub fn handle(&self) -> u64 {
        self.handle
    }
    /// What the buffer is made of.
    pub fn kind(&self) -> MemoryKind {
        self.kind
    }
    /// Owning GPU index.
    pub fn gpu_index(&self) -> usize {
        self.gpu_index
    }
    /// Whether the CPU can access the buffer (`read`, `write`, atomics, `as_ptr`): false
    /// only for device memory on a small-BAR board (see [`MemoryKind::Device`]).
    pub fn is_cpu_visible(&self) -> bool {
        self.cpu_mapped || self.kind == MemoryKind::Userptr
    }
    /// The CPU pointer (valid while the buffer lives; dereference it only when
    /// [`Buffer::is_cpu_visible`]). For device memory the runtime flushes its GPU's HDP
    /// before the next submission, so CPU writes through it reach the GPU.
    pub fn as_ptr(&self) -> *mut u8 {
        self.mark_cpu_write();
        self.va as *mut u8
    }

    fn mark_cpu_write(&self) {
        if self.kind == MemoryKind::Device {
            self.dev.mark_hdp_dirty(self.gpu_index);
        }
    }

    fn check(&self, call: &'static str, offset: usize, len: usize) -> Result<()> {
        if !self.cpu_mapped && self.kind != MemoryKind::Userptr {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                "buffer is not CPU-visible",
            ));
        }
        if offset.checked_add(len).is_none_or(|e| e > self.size) {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!(
                    "range {offset:#x}+{len:#x} outside buffer of {:#x} bytes",
                    self.size
                ),
            ));
        }
        Ok(())
    }

    /// Copy `data` into the buffer at `offset` with the CPU.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check("Buffer::write", offset, data.len())?;
        // SAFETY: bounds checked; the mapping is live while `self` lives; device-shared
        // memory is accessed by raw copy, never through a Rust reference.
        unsafe {
            core::ptr::copy_nonoverlapping(data.as_ptr(), self.as_ptr().add(offset), data.len())
        };
        Ok(())
    }

    /// Copy from the buffer at `offset` into `out` with the CPU.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check("Buffer::read", offset, out.len())?;
        // SAFETY: as in `write`.
        unsafe {
            core::ptr::copy_nonoverlapping(
                (self.va as *const u8).add(offset),
                out.as_mut_ptr(),
                out.len(),
            )
        };
        Ok(())
    }

    /// The 64-bit cell at `offset` as an atomic (signal values, stream memory op targets).
    pub fn atomic_u64(&self, offset: usize) -> Result<&core::sync::atomic::AtomicU64> {
        self.check("Buffer::atomic_u64", offset, 8)?;
        if offset % 8 != 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "Buffer::atomic_u64",
                "offset not 8-byte aligned",
            ));
        }
        // SAFETY: in bounds, aligned, lives as long as `&self`.
        Ok(unsafe { core::sync::atomic::AtomicU64::from_ptr(self.as_ptr().add(offset).cast()) })
    }

    /// The 32-bit cell at `offset` as an atomic.
    pub fn atomic_u32(&self, offset: usize) -> Result<&core::sync::atomic::AtomicU32> {
        self.check("Buffer::atomic_u32", offset, 4)?;
        if offset % 4 != 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "Buffer::atomic_u32",
                "offset not 4-byte aligned",
            ));
        }
        // SAFETY: in bounds, aligned, lives as long as `&self`.
        Ok(unsafe { core::sync::atomic::AtomicU32::from_ptr(self.as_ptr().add(offset).cast()) })
    }
}

impl Buffer {
    /// Unmap and free the buffer like its drop, but keep its address range reserved
    /// (`PROT_NONE`, no memory behind it) and hand it back, for a later buffer of the same
    /// size ([`Buffer::alloc_on`]): libhsakmt likewise keeps a freed BO's range reserved in
    /// its aperture (`fmm.c` `__fmm_release`: `mmap(PROT_NONE, MAP_FIXED)` over it, then
    /// `aperture_release_area`) instead of unmapping it.
    pub(crate) fn into_reservation(mut self) -> Option<VaReservation> {
        self.retire();
        self.reservation.take()
    }

    fn retire(&mut self) {
        if std::mem::replace(&mut self.retired, true) {
            return;
        }
        self.dev.extents.remove(self.base, self.key);
        // A registration's BO goes with its last registration, and the registry stays
        // locked until the BO is freed: a registration of the same pages made meanwhile
        // would otherwise find no BO and map a second one over this one's range (refused).
        let _userptrs = if self.kind == MemoryKind::Userptr {
            let mut bos = lock(&self.dev.userptrs);
            if let Some(bo) = bos.get_mut(&self.va).filter(|b| b.handle == self.handle) {
                bo.refs -= 1;
                if bo.refs > 0 {
                    return;
                }
                bos.remove(&self.va);
            }
            Some(bos)
        } else {
            None
        };
        let b = self.dev.backend.as_ref();
        // Leave the peer registry first, so peer-access changes no longer touch the BO.
        let _peers = self.peer_managed.then(|| {
            let mut st = lock(&self.dev.peers.state);
            st.bufs.remove(&self.va);
            st
        });
        let mapped = std::mem::take(&mut *lock(&self.mapped_on));
        if !mapped.is_empty() {
            let mut n = 0;
            let _ = kfd::ioctl::unmap_memory_from_gpu(b, self.handle, &mapped, &mut n);
        }
        if self.cpu_mapped {
            if let Some(r) = &self.reservation {
                // Put the PROT_NONE reservation back over the BO's pages so the range stays
                // ours until the reservation itself is dropped.
                // SAFETY: the range is our reservation; the BO mapping is being retired.
                let _ = unsafe {
                    rustix::mm::mmap_anonymous(
                        r.ptr().as_ptr(),
                        r.len(),
                        ProtFlags::empty(),
                        MapFlags::PRIVATE | MapFlags::NORESERVE | MapFlags::FIXED,
                    )
                };
            }
        }
        let _ = kfd::ioctl::free_memory_of_gpu(b, self.handle);
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.retire();
    }
}

/// The whole pages holding `[addr, addr+len)`: (first page, bytes), or None for a null
/// address, a zero length or a range past the end of the address space. libhsakmt
/// registers host memory the same way (`hsaKmtRegisterMemory*` aligns the start down and
/// the size up to pages), so `hipHostRegister` takes any pointer and length.
pub(crate) fn page_span(addr: u64, len: usize) -> Option<(u64, usize)> {
    if addr == 0 || len == 0 {
        return None;
    }
    let start = addr & !(PAGE as u64 - 1);
    let end = addr
        .checked_add(len as u64)?
        .checked_next_multiple_of(PAGE as u64)?;
    Some((start, usize::try_from(end - start).ok()?))
}

#[cfg(test)]
mod tests {
    use super::page_span;

    #[test]
    fn page_span_rounds_out_to_whole_pages() {
        assert_eq!(page_span(0x1000, 0x1000), Some((0x1000, 0x1000)));
        assert_eq!(page_span(0x1008, 4000), Some((0x1000, 0x1000)));
        assert_eq!(page_span(0x1008, 4089), Some((0x1000, 0x2000)));
        assert_eq!(page_span(0x1000, 100), Some((0x1000, 0x1000)));
        assert_eq!(page_span(0x1fff, 2), Some((0x1000, 0x2000)));
        assert_eq!(page_span(0, 10), None);
        assert_eq!(page_span(0x1000, 0), None);
        assert_eq!(page_span(u64::MAX - 10, 100), None);
    }
}
