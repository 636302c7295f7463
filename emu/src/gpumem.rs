//! How the emulated engines reach memory: by GPU virtual address, through the
//! emulator's own alias mapping of each buffer object, never through the application's
//! CPU mapping (which may be PROT_NONE or unmapped at any time).

use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::any::Any;
use std::sync::Arc;

/// What kind of access faulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// No BO or SVM range is GPU-mapped at the address for this GPU.
    NotMapped,
    /// A write to memory that is mapped read-only for the GPU.
    ReadOnly,
}

/// A GPU memory fault, as the VM block would report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// GPU that faulted.
    pub gpu_id: u32,
    /// Faulting address.
    pub va: u64,
    /// Length of the access.
    pub len: u64,
    /// Write access.
    pub write: bool,
    /// Why.
    pub kind: FaultKind,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "GPU {:#x} {} fault at va={:#x} len={:#x}: {}",
            self.gpu_id,
            if self.write { "write" } else { "read" },
            self.va,
            self.len,
            match self.kind {
                FaultKind::NotMapped => "not mapped for this GPU",
                FaultKind::ReadOnly => "mapped read-only",
            }
        )
    }
}

/// A window `[va, va + len)` of GPU-visible memory, resolved to the emulator's host alias.
/// The window keeps its backing alive (`owner`) so it stays valid while an engine uses it,
/// even if the application frees or unmaps the BO meanwhile.
#[derive(Clone)]
pub struct MemWindow {
    va: u64,
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
    _owner: Arc<dyn Any + Send + Sync>,
}

// SAFETY: a MemWindow is a pointer into a shared mapping owned by `_owner` (Send + Sync);
// all accesses go through atomics or raw copies of device-shared memory.
unsafe impl Send for MemWindow {}
// SAFETY: as above; no `&mut` aliasing is ever handed out.
unsafe impl Sync for MemWindow {}

impl std::fmt::Debug for MemWindow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MemWindow({:#x}+{:#x}{})",
            self.va,
            self.len,
            if self.writable { "" } else { " ro" }
        )
    }
}

impl MemWindow {
    /// A window over `len` bytes at host address `ptr`, seen by the GPU at `va`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay mapped read-write (or read-only when `!writable`) for as
    /// long as `owner` lives, and no Rust reference may alias it.
    pub unsafe fn new(
        va: u64,
        ptr: NonNull<u8>,
        len: usize,
        writable: bool,
        owner: Arc<dyn Any + Send + Sync>,
    ) -> Self {
        MemWindow {
            va,
            ptr,
            len,
            writable,
            _owner: owner,
        }
    }

    /// First GPU address of the window.
    pub fn va(&self) -> u64 {
        self.va
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for an empty window.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// How many holders keep the window's memory alive, this window included (the
    /// memory map, engine caches, other windows): tests use it to see that the engines
    /// let go of unmapped memory.
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self._owner)
    }
    /// Whether the GPU may write.
    pub fn writable(&self) -> bool {
        self.writable
    }
    /// True when `[va, va+len)` lies inside the window.
    pub fn contains(&self, va: u64, len: u64) -> bool {
        va >= self.va
            && va
                .checked_add(len)
                .is_some_and(|end| end <= self.va + self.len as u64)
    }

    fn at(&self, va: u64, len: u64, write: bool, gpu_id: u32) -> Result<*mut u8, Fault> {
        if !self.contains(va, len) {
            return Err(Fault {
                gpu_id,
                va,
                len,
                write,
                kind: FaultKind::NotMapped,
            });
        }
        if write && !self.writable {
            return Err(Fault {
                gpu_id,
                va,
                len,
                write,
                kind: FaultKind::ReadOnly,
            });
        }
        // SAFETY: `contains` proved the offset is inside the mapping.
        Ok(unsafe { self.ptr.as_ptr().add((va - self.va) as usize) })
    }

    /// The emulator's host address of `[va, va+len)` (the shader core's memory path).
    pub(crate) fn host_ptr(&self, va: u64, len: u64, write: bool) -> Result<*mut u8, Fault> {
        self.at(va, len, write, 0)
    }

    /// 32-bit load with acquire ordering (`va` must be 4-byte aligned).
    pub fn load_u32(&self, va: u64) -> Result<u32, Fault> {
        let p = self.aligned(va, 4, false)?;
        // SAFETY: in bounds, aligned, shared memory accessed only atomically or by copies.
        Ok(unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Acquire))
    }
    /// 64-bit load with acquire ordering (`va` must be 8-byte aligned).
    pub fn load_u64(&self, va: u64) -> Result<u64, Fault> {
        let p = self.aligned(va, 8, false)?;
        // SAFETY: as in `load_u32`.
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) }.load(Ordering::Acquire))
    }
    /// 32-bit store with release ordering.
    pub fn store_u32(&self, va: u64, v: u32) -> Result<(), Fault> {
        let p = self.aligned(va, 4, true)?;
        // SAFETY: as in `load_u32`.
        unsafe { AtomicU32::from_ptr(p.cast()) }.store(v, Ordering::Release);
        Ok(())
    }
    /// 64-bit store with release ordering.
    pub fn store_u64(&self, va: u64, v: u64) -> Result<(), Fault> {
        let p = self.aligned(va, 8, true)?;
        // SAFETY: as in `load_u32`.
        unsafe { AtomicU64::from_ptr(p.cast()) }.store(v, Ordering::Release);
        Ok(())
    }
    /// The 64-bit cell at `va` as an atomic (for read-modify-write packets).
    pub fn atomic_u64(&self, va: u64) -> Result<&AtomicU64, Fault> {
        let p = self.aligned(va, 8, true)?;
        // SAFETY: in bounds and aligned; lives as long as `self` (which owns the mapping).
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) })
    }
    /// The 32-bit cell at `va` as an atomic.
    pub fn atomic_u32(&self, va: u64) -> Result<&AtomicU32, Fault> {
        let p = self.aligned(va, 4, true)?;
        // SAFETY: as in `atomic_u64`.
        Ok(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    fn aligned(&self, va: u64, n: u64, write: bool) -> Result<*mut u8, Fault> {
        if va % n != 0 {
            // Hardware ignores the low bits of dword addresses; the packet decoders reject
            // misaligned addresses earlier, so reaching here is a fault.
            return Err(Fault {
                gpu_id: 0,
                va,
                len: n,
                write,
                kind: FaultKind::NotMapped,
            });
        }
        self.at(va, n, write, 0)
    }

    /// Copy `out.len()` bytes from `va` into `out`.
    pub fn read(&self, va: u64, out: &mut [u8]) -> Result<(), Fault> {
        let p = self.at(va, out.len() as u64, false, 0)?;
        // SAFETY: in bounds; `out` is a distinct Rust buffer.
        unsafe { core::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }
    /// Copy `data` to `va`.
    pub fn write(&self, va: u64, data: &[u8]) -> Result<(), Fault> {
        let p = self.at(va, data.len() as u64, true, 0)?;
        // SAFETY: in bounds and writable; `data` is a distinct Rust buffer.
        unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }
    /// Fill `len` bytes at `va` with the little-endian 32-bit `pattern` (len a multiple of 4).
    pub fn fill_u32(&self, va: u64, len: u64, pattern: u32) -> Result<(), Fault> {
        let p = self.at(va, len, true, 0)?;
        let bytes = pattern.to_le_bytes();
        if bytes.iter().all(|b| *b == bytes[0]) {
            // SAFETY: in bounds and writable.
            unsafe { core::ptr::write_bytes(p, bytes[0], len as usize) };
        } else {
            for i in 0..(len as usize / 4) {
                // SAFETY: in bounds; unaligned store is fine for raw shared memory.
                unsafe { core::ptr::write_unaligned(p.add(i * 4).cast::<u32>(), pattern) };
            }
        }
        Ok(())
    }
    /// Copy `len` bytes from `src_va` in `src` to `dst_va` in `self` (overlap allowed).
    pub fn copy_from(
        &self,
        dst_va: u64,
        src: &MemWindow,
        src_va: u64,
        len: u64,
    ) -> Result<(), Fault> {
        let d = self.at(dst_va, len, true, 0)?;
        let s = src.at(src_va, len, false, 0)?;
        // SAFETY: both ranges are in bounds of live mappings; `copy` allows overlap.
        unsafe { core::ptr::copy(s, d, len as usize) };
        Ok(())
    }
}

/// The emulated KFD's view of every GPU's page tables.
pub trait GpuMemory: Send + Sync + 'static {
    /// Resolve `[va, va+len)` as seen by GPU `gpu_id`. The returned window covers at least
    /// that range (normally the whole BO or SVM range, so engines can cache it). Fails with
    /// a [`Fault`] when the range is not GPU-mapped for that GPU, or not all in one object.
    fn resolve(&self, gpu_id: u32, va: u64, len: u64) -> Result<MemWindow, Fault>;
}

/// A [`GpuMemory`] over plain heap buffers, for engine tests and fuzzing.
#[derive(Default)]
pub struct HeapMemory {
    regions: std::sync::RwLock<Vec<(u64, Arc<HeapRegion>)>>,
}

struct HeapRegion {
    buf: Box<[AtomicU64]>,
}

impl HeapMemory {
    /// An empty address space.
    pub fn new() -> Self {
        Self::default()
    }
    /// Add a zeroed region of `len` bytes (rounded up to 8) at `va` (8-byte aligned).
    pub fn add_region(&self, va: u64, len: usize) -> MemWindow {
        let words = len.div_ceil(8);
        let buf: Box<[AtomicU64]> = (0..words).map(|_| AtomicU64::new(0)).collect();
        let region = Arc::new(HeapRegion { buf });
        let ptr = NonNull::new(region.buf.as_ptr() as *mut u8).unwrap_or(NonNull::dangling());
        self.regions
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .push((va, region.clone()));
        // SAFETY: the buffer lives as long as `region`, which the window owns; it is only
        // accessed through atomics and raw copies.
        unsafe { MemWindow::new(va, ptr, words * 8, true, region) }
    }

    /// Remove the region at `va` (an unmap: windows already handed out keep their
    /// buffer; new resolves fault). Returns whether there was one.
    ///
    /// ```
    /// use kfd_emu::gpumem::{GpuMemory, HeapMemory};
    ///
    /// let mem = HeapMemory::new();
    /// let w = mem.add_region(0x10_0000, 4096);
    /// assert!(mem.resolve(1, 0x10_0000, 4).is_ok());
    /// assert!(mem.remove_region(0x10_0000));
    /// assert!(mem.resolve(1, 0x10_0000, 4).is_err()); // unmapped
    /// assert!(w.store_u32(0x10_0000, 7).is_ok()); // the old window keeps its buffer
    /// assert!(!mem.remove_region(0x10_0000));
    /// ```
    pub fn remove_region(&self, va: u64) -> bool {
        let mut regions = self.regions.write().unwrap_or_else(|e| e.into_inner());
        let before = regions.len();
        regions.retain(|(base, _)| *base != va);
        regions.len() != before
    }
}

impl GpuMemory for HeapMemory {
    fn resolve(&self, gpu_id: u32, va: u64, len: u64) -> Result<MemWindow, Fault> {
        let regions = self.regions.read().unwrap_or_else(|e| e.into_inner());
        for (base, r) in regions.iter() {
            let size = (r.buf.len() * 8) as u64;
            if va >= *base && va.checked_add(len).is_some_and(|e| e <= base + size) {
                let ptr = NonNull::new(r.buf.as_ptr() as *mut u8).unwrap_or(NonNull::dangling());
                // SAFETY: as in `add_region`.
                return Ok(unsafe { MemWindow::new(*base, ptr, size as usize, true, r.clone()) });
            }
        }
        Err(Fault {
            gpu_id,
            va,
            len,
            write: false,
            kind: FaultKind::NotMapped,
        })
    }
}
