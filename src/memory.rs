//! Memory: device (VRAM), host-pinned (GTT), signal memory and registered user memory,
//! each a KFD buffer object placed at a reserved address (GPU VA == CPU VA), CPU-mapped
//! through the render node where the kind allows, and GPU-mapped on every GPU of the
//! device. [`Buffer`] frees itself on drop, in the reverse order of creation.

use std::sync::Arc;

use kfd::abi::{AllocFlags, AllocMemoryOfGpuArgs};
use kfd::{MmapFile, Prot};
use rustix::mm::{MapFlags, ProtFlags};

use crate::device::{Device, DeviceCore};
use crate::error::{Error, ErrorKind, Result};
use crate::va::{VaReservation, HUGE, PAGE};

/// What a buffer is made of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryKind {
    /// VRAM of one GPU, CPU-visible (large-BAR `PUBLIC`), mapped on every GPU.
    Device,
    /// System memory pinned for the GPUs (GTT), CPU-mapped.
    HostPinned,
    /// Fine-grained, uncached system memory for signals and stream memory ops (what
    /// `hipMallocSignalMemory` / `hipExtMallocWithFlags(hipMallocSignalMemory)` give).
    Signal,
    /// Existing host memory registered with KFD (USERPTR).
    Userptr,
}

impl MemoryKind {
    fn flags(self) -> AllocFlags {
        let common = AllocFlags::WRITABLE | AllocFlags::EXECUTABLE | AllocFlags::NO_SUBSTITUTE;
        match self {
            MemoryKind::Device => common | AllocFlags::VRAM | AllocFlags::PUBLIC,
            MemoryKind::HostPinned => common | AllocFlags::GTT | AllocFlags::COHERENT,
            MemoryKind::Signal => {
                common | AllocFlags::GTT | AllocFlags::COHERENT | AllocFlags::UNCACHED
            }
            MemoryKind::Userptr => common | AllocFlags::USERPTR | AllocFlags::COHERENT,
        }
    }
}

/// The address ranges `[va, va+size)` of a device's live buffer objects, keyed by
/// `(va, handle)` (a range registered twice as USERPTR appears twice).
#[derive(Default)]
pub(crate) struct Extents(std::sync::RwLock<std::collections::BTreeMap<(u64, u64), u64>>);

impl Extents {
    fn insert(&self, va: u64, handle: u64, size: u64) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .insert((va, handle), size);
    }
    fn remove(&self, va: u64, handle: u64) {
        self.0
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&(va, handle));
    }
    /// `(start, len)` of the buffer object containing `addr`.
    pub(crate) fn containing(&self, addr: u64) -> Option<(u64, u64)> {
        let m = self.0.read().unwrap_or_else(|e| e.into_inner());
        m.range(..=(addr, u64::MAX))
            .rev()
            .take(4)
            .find(|(&(va, _), &len)| addr - va < len)
            .map(|(&(va, _), &len)| (va, len))
    }
}

/// A GPU buffer object. GPU VA == CPU VA == [`Buffer::va`].
pub struct Buffer {
    dev: Arc<DeviceCore>,
    va: u64,
    size: usize,
    handle: u64,
    kind: MemoryKind,
    gpu_index: usize,
    mapped_on: Vec<u32>,
    cpu_mapped: bool,
    reservation: Option<VaReservation>,
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

impl Device {
    /// Allocate `size` bytes of `kind` memory owned by GPU `gpu_index` (for VRAM, the GPU
    /// whose memory it is), mapped on every GPU of the device.
    pub fn alloc(&self, kind: MemoryKind, gpu_index: usize, size: usize) -> Result<Buffer> {
        Buffer::alloc(&self.inner.core, kind, gpu_index, size)
    }

    /// Register `len` bytes of existing host memory at `ptr` (page-aligned) with KFD and
    /// map it on every GPU (`USERPTR`). The memory must outlive the returned buffer.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid, page-aligned host memory that stays allocated until the
    /// returned [`Buffer`] is dropped; the GPUs may read and write it meanwhile.
    pub unsafe fn register_host_memory(&self, ptr: *mut u8, len: usize) -> Result<Buffer> {
        Buffer::userptr(&self.inner.core, ptr as u64, len)
    }
}

impl Buffer {
    pub(crate) fn alloc(
        dev: &Arc<DeviceCore>,
        kind: MemoryKind,
        gpu_index: usize,
        size: usize,
    ) -> Result<Buffer> {
        Self::alloc_inner(dev, kind, gpu_index, size, true)
    }

    fn alloc_inner(
        dev: &Arc<DeviceCore>,
        kind: MemoryKind,
        gpu_index: usize,
        size: usize,
        map_all: bool,
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
        let size = size.checked_next_multiple_of(PAGE).ok_or_else(|| {
            Error::new(
                ErrorKind::OutOfMemory,
                call,
                format!("size {size:#x} too large"),
            )
        })?;
        let align = if size >= HUGE { HUGE } else { PAGE };
        let reservation = VaReservation::new(size, align)?;
        let mut args = AllocMemoryOfGpuArgs {
            va_addr: reservation.addr(),
            size: size as u64,
            gpu_id: gpu.gpu_id,
            flags: kind.flags().bits(),
            ..Default::default()
        };
        kfd::ioctl::alloc_memory_of_gpu(dev.backend.as_ref(), &mut args)
            .map_err(|e| Error::from_kfd(call, e))?;
        dev.extents
            .insert(reservation.addr(), args.handle, size as u64);
        let mut buf = Buffer {
            dev: dev.clone(),
            va: reservation.addr(),
            size,
            handle: args.handle,
            kind,
            gpu_index,
            mapped_on: Vec::new(),
            cpu_mapped: false,
            reservation: Some(reservation),
        };
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
        if map_all {
            buf.map_all()?;
        }
        Ok(buf)
    }

    /// Like [`Buffer::alloc`], but GPU-mapped only on the GPUs in `map_gpus` (indices);
    /// the stream-ordered allocator maps pool memory on peers only after
    /// `hipMemPoolSetAccess`.
    pub(crate) fn alloc_on(
        dev: &Arc<DeviceCore>,
        kind: MemoryKind,
        gpu_index: usize,
        size: usize,
        map_gpus: &[usize],
    ) -> Result<Buffer> {
        let mut buf = Self::alloc_inner(dev, kind, gpu_index, size, false)?;
        for &g in map_gpus {
            buf.map_on(g)?;
        }
        Ok(buf)
    }

    /// MAP_MEMORY_TO_GPU on GPU `gpu_index` (no-op when already mapped there).
    pub(crate) fn map_on(&mut self, gpu_index: usize) -> Result<()> {
        let id = self.dev.gpu(gpu_index)?.gpu_id;
        if self.mapped_on.contains(&id) {
            return Ok(());
        }
        let mut n = 0u32;
        kfd::ioctl::map_memory_to_gpu(self.dev.backend.as_ref(), self.handle, &[id], &mut n)
            .map_err(|e| Error::from_kfd("Buffer::map_on", e))?;
        self.mapped_on.push(id);
        Ok(())
    }

    /// UNMAP_MEMORY_FROM_GPU on GPU `gpu_index` (no-op when not mapped there).
    pub(crate) fn unmap_from(&mut self, gpu_index: usize) -> Result<()> {
        let id = self.dev.gpu(gpu_index)?.gpu_id;
        let Some(pos) = self.mapped_on.iter().position(|&g| g == id) else {
            return Ok(());
        };
        let mut n = 0u32;
        kfd::ioctl::unmap_memory_from_gpu(self.dev.backend.as_ref(), self.handle, &[id], &mut n)
            .map_err(|e| Error::from_kfd("Buffer::unmap_from", e))?;
        self.mapped_on.remove(pos);
        Ok(())
    }

    fn userptr(dev: &Arc<DeviceCore>, addr: u64, len: usize) -> Result<Buffer> {
        let call = "Device::register_host_memory";
        if addr == 0 || addr % PAGE as u64 != 0 || len == 0 || len % PAGE != 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("ptr={addr:#x} len={len:#x}: both must be non-zero and page-aligned"),
            ));
        }
        let gpu = dev.gpu(0)?;
        let mut args = AllocMemoryOfGpuArgs {
            va_addr: addr,
            size: len as u64,
            mmap_offset: addr,
            gpu_id: gpu.gpu_id,
            flags: MemoryKind::Userptr.flags().bits(),
            ..Default::default()
        };
        kfd::ioctl::alloc_memory_of_gpu(dev.backend.as_ref(), &mut args)
            .map_err(|e| Error::from_kfd(call, e))?;
        dev.extents.insert(addr, args.handle, len as u64);
        let mut buf = Buffer {
            dev: dev.clone(),
            va: addr,
            size: len,
            handle: args.handle,
            kind: MemoryKind::Userptr,
            gpu_index: 0,
            mapped_on: Vec::new(),
            cpu_mapped: false,
            reservation: None,
        };
        buf.map_all()?;
        Ok(buf)
    }

    /// MAP_MEMORY_TO_GPU on every GPU, resuming from `n_success` after a partial failure
    /// is reported (the kernel may map a prefix of the list and then fail).
    fn map_all(&mut self) -> Result<()> {
        let ids = self.dev.gpu_ids();
        let mut n = 0u32;
        kfd::ioctl::map_memory_to_gpu(self.dev.backend.as_ref(), self.handle, &ids, &mut n)
            .map_err(|e| Error::from_kfd("Buffer::map", e))?;
        self.mapped_on = ids;
        Ok(())
    }

    /// GPU and CPU virtual address.
    pub fn va(&self) -> u64 {
        self.va
    }
    /// Size in bytes (rounded up to pages).
    pub fn len(&self) -> usize {
        self.size
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
    /// The CPU pointer (valid while the buffer lives).
    pub fn as_ptr(&self) -> *mut u8 {
        self.va as *mut u8
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
            core::ptr::copy_nonoverlapping(self.as_ptr().add(offset), out.as_mut_ptr(), out.len())
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

impl Drop for Buffer {
    fn drop(&mut self) {
        let b = self.dev.backend.as_ref();
        if !self.mapped_on.is_empty() {
            let mut n = 0;
            let _ = kfd::ioctl::unmap_memory_from_gpu(b, self.handle, &self.mapped_on, &mut n);
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
        self.dev.extents.remove(self.va, self.handle);
    }
}
