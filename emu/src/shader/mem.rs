//! The shader core's path to GPU memory: a per-worker translation cache of [`MemWindow`]s
//! and typed lane accesses on the emulator's host alias of each buffer. Every access is an
//! atomic operation on the shared mapping (relaxed for plain loads/stores, sequentially
//! consistent read-modify-write for atomics), so atomics are atomic against other
//! workgroups on other threads, other queues and the host.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use crate::gpumem::{Fault, FaultKind, GpuMemory, MemWindow};

/// A per-worker memory port.
pub(crate) struct MemPort {
    gpu_id: u32,
    mem: Arc<dyn GpuMemory>,
    wins: Vec<MemWindow>,
    /// The most recently used windows, most recent first (indices in `wins`).
    mru: [usize; MRU],
}

/// Windows [`MemPort::ptr`] finds without a search: a kernel's kernel arguments and two
/// buffers (saxpy's `x` and `y`) all hit.
const MRU: usize = 3;

impl MemPort {
    pub(crate) fn new(gpu_id: u32, mem: Arc<dyn GpuMemory>) -> Self {
        MemPort {
            gpu_id,
            mem,
            wins: Vec::with_capacity(16),
            mru: [0; MRU],
        }
    }

    /// Whether this port translates for GPU `gpu_id` in `mem` (a kept port is reused
    /// only for its own GPU's memory).
    pub(crate) fn serves(&self, gpu_id: u32, mem: &Arc<dyn GpuMemory>) -> bool {
        self.gpu_id == gpu_id && Arc::ptr_eq(&self.mem, mem)
    }

    fn fault(&self, va: u64, len: u64, write: bool, kind: FaultKind) -> Fault {
        Fault {
            gpu_id: self.gpu_id,
            va,
            len,
            write,
            kind,
        }
    }

    /// Host pointer of `[va, va+len)`.
    #[inline]
    pub(crate) fn ptr(&mut self, va: u64, len: u64, write: bool) -> Result<*mut u8, Fault> {
        if let Some(w) = self.wins.get(self.mru[0]) {
            if w.contains(va, len) {
                return w
                    .host_ptr(va, len, write)
                    .map_err(|f| self.fault(va, len, write, f.kind));
            }
        }
        for i in 1..MRU {
            if let Some(w) = self.wins.get(self.mru[i]) {
                if w.contains(va, len) {
                    // Most recent first.
                    self.mru[..=i].rotate_right(1);
                    return w
                        .host_ptr(va, len, write)
                        .map_err(|f| self.fault(va, len, write, f.kind));
                }
            }
        }
        self.slow_ptr(va, len, write)
    }

    #[cold]
    fn slow_ptr(&mut self, va: u64, len: u64, write: bool) -> Result<*mut u8, Fault> {
        let idx = match self.wins.iter().position(|w| w.contains(va, len)) {
            Some(i) => i,
            None => {
                let w = match self.mem.resolve(self.gpu_id, va, len) {
                    Ok(w) if w.contains(va, len) => w,
                    _ => return Err(self.fault(va, len, write, FaultKind::NotMapped)),
                };
                if self.wins.len() >= 16 {
                    self.wins.remove(0);
                    // The indices moved down by one.
                    for m in &mut self.mru {
                        *m = m.saturating_sub(1);
                    }
                }
                self.wins.push(w);
                self.wins.len() - 1
            }
        };
        // `idx` becomes the most recent; the others keep their order.
        let at = self.mru.iter().position(|&m| m == idx).unwrap_or(MRU - 1);
        self.mru[..=at].rotate_right(1);
        self.mru[0] = idx;
        match self.wins.get(idx) {
            Some(w) => w
                .host_ptr(va, len, write)
                .map_err(|f| self.fault(va, len, write, f.kind)),
            None => Err(self.fault(va, len, write, FaultKind::NotMapped)),
        }
    }

    /// Loads `size` (1, 2, 4, 8) bytes, zero-extended.
    #[inline]
    pub(crate) fn load(&mut self, va: u64, size: u64) -> Result<u64, Fault> {
        let p = self.ptr(va, size, false)?;
        // SAFETY: `ptr` proved [va, va+size) lies in a live mapping; accesses are atomic
        // (aligned) or byte-wise atomic (unaligned), as device memory is shared.
        unsafe { Ok(load_raw(p, size)) }
    }

    /// Stores the low `size` bytes of `v`.
    #[inline]
    pub(crate) fn store(&mut self, va: u64, size: u64, v: u64) -> Result<(), Fault> {
        let p = self.ptr(va, size, true)?;
        // SAFETY: as in `load`; the window is writable.
        unsafe { store_raw(p, size, v) };
        Ok(())
    }

    /// The aligned 32-bit cell at `va` for a read-modify-write.
    pub(crate) fn atomic32(&mut self, va: u64) -> Result<&AtomicU32, Fault> {
        if va % 4 != 0 {
            return Err(self.fault(va, 4, true, FaultKind::NotMapped));
        }
        let p = self.ptr(va, 4, true)?;
        // SAFETY: in bounds, aligned, writable; the window (kept in `wins`) owns the mapping
        // for as long as `self` is borrowed.
        Ok(unsafe { AtomicU32::from_ptr(p.cast()) })
    }

    /// The aligned 64-bit cell at `va` for a read-modify-write.
    pub(crate) fn atomic64(&mut self, va: u64) -> Result<&AtomicU64, Fault> {
        if va % 8 != 0 {
            return Err(self.fault(va, 8, true, FaultKind::NotMapped));
        }
        let p = self.ptr(va, 8, true)?;
        // SAFETY: as in `atomic32`.
        Ok(unsafe { AtomicU64::from_ptr(p.cast()) })
    }
}

/// # Safety
/// `p..p+size` must be valid for reads.
#[inline]
pub(crate) unsafe fn load_raw(p: *mut u8, size: u64) -> u64 {
    let a = p as usize;
    match size {
        1 => AtomicU8::from_ptr(p).load(Ordering::Relaxed) as u64,
        2 if a % 2 == 0 => AtomicU16::from_ptr(p.cast()).load(Ordering::Relaxed) as u64,
        4 if a % 4 == 0 => AtomicU32::from_ptr(p.cast()).load(Ordering::Relaxed) as u64,
        8 if a % 8 == 0 => AtomicU64::from_ptr(p.cast()).load(Ordering::Relaxed),
        _ => {
            let mut v = 0u64;
            for i in 0..size.min(8) as usize {
                v |= (AtomicU8::from_ptr(p.add(i)).load(Ordering::Relaxed) as u64) << (8 * i);
            }
            v
        }
    }
}

/// # Safety
/// `p..p+size` must be valid for writes.
#[inline]
pub(crate) unsafe fn store_raw(p: *mut u8, size: u64, v: u64) {
    let a = p as usize;
    match size {
        1 => AtomicU8::from_ptr(p).store(v as u8, Ordering::Relaxed),
        2 if a % 2 == 0 => AtomicU16::from_ptr(p.cast()).store(v as u16, Ordering::Relaxed),
        4 if a % 4 == 0 => AtomicU32::from_ptr(p.cast()).store(v as u32, Ordering::Relaxed),
        8 if a % 8 == 0 => AtomicU64::from_ptr(p.cast()).store(v, Ordering::Relaxed),
        _ => {
            for i in 0..size.min(8) as usize {
                AtomicU8::from_ptr(p.add(i)).store((v >> (8 * i)) as u8, Ordering::Relaxed);
            }
        }
    }
}

/// `amd_queue_t` byte offsets of the scratch fields the CP reads (ROCr
/// `inc/amd_hsa_queue.h`; firmware-notes/kernels.md "Scratch").
mod amd_queue {
    pub(super) const COMPUTE_TMPRING_SIZE: u64 = 140;
    pub(super) const SCRATCH_RESOURCE_DESCRIPTOR: u64 = 144;
    pub(super) const SCRATCH_BACKING_MEMORY_LOCATION: u64 = 160;
}

/// COMPUTE_TMPRING_SIZE.WAVESIZE granule on gfx9 (1 KiB) and the field's width.
const TMPRING_GRANULE: u64 = 1024;
const TMPRING_WAVESIZE_MASK: u32 = 0x1FFF;

/// A queue's scratch as the CP hands it to a dispatch's waves (from `amd_queue_t`): the
/// private segment buffer V# (`scratch_resource_descriptor`), the flat scratch base
/// (`scratch_backing_memory_location`), and COMPUTE_TMPRING_SIZE (WAVES concurrent
/// scratch waves per XCC, WAVESIZE KiB each). Each XCC has its own slice
/// (`shader::queue_scratch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct QueueScratch {
    pub(crate) srd: [u32; 4],
    pub(crate) location: u64,
    pub(crate) waves: u32,
    pub(crate) wave_bytes: u64,
}

impl QueueScratch {
    /// The scratch fields of the `amd_queue_t` at `queue_va`.
    pub(crate) fn read(port: &mut MemPort, queue_va: u64) -> Result<QueueScratch, Fault> {
        let tmpring = port.load(queue_va + amd_queue::COMPUTE_TMPRING_SIZE, 4)? as u32;
        let mut srd = [0u32; 4];
        for (i, w) in srd.iter_mut().enumerate() {
            *w = port.load(
                queue_va + amd_queue::SCRATCH_RESOURCE_DESCRIPTOR + 4 * i as u64,
                4,
            )? as u32;
        }
        let location = port.load(queue_va + amd_queue::SCRATCH_BACKING_MEMORY_LOCATION, 8)?;
        Ok(QueueScratch::from_tmpring(tmpring, srd, location))
    }

    /// From a COMPUTE_TMPRING_SIZE value (WAVES [11:0], WAVESIZE [24:12] in KiB), the V#
    /// and the backing memory location.
    pub(crate) fn from_tmpring(tmpring: u32, srd: [u32; 4], location: u64) -> QueueScratch {
        QueueScratch {
            srd,
            location,
            waves: tmpring & 0xFFF,
            wave_bytes: u64::from((tmpring >> 12) & TMPRING_WAVESIZE_MASK) * TMPRING_GRANULE,
        }
    }

    /// Bytes of each lane's private segment a wave's slot holds.
    pub(crate) fn lane_bytes(&self) -> u64 {
        self.wave_bytes / 64
    }

    /// The private segment wave offset of scratch slot `slot` (the system SGPR): the
    /// slot's byte offset in the scratch (the V# base plus it is the wave's base).
    pub(crate) fn wave_offset(&self, slot: u32) -> u64 {
        u64::from(slot) * self.wave_bytes
    }

    /// The scratch base address in the V# (bits 0..47).
    pub(crate) fn base(&self) -> u64 {
        self.srd[0] as u64 | ((self.srd[1] & 0xFFFF) as u64) << 32
    }
}

/// The address of byte `offset` of lane `lane`'s private segment in a wave whose scratch
/// starts at `wave_base` (FLAT_SCRATCH, or the V# base plus the wave offset): gfx9
/// interleaves the lanes' private memory dword by dword (AMDGPUUsage "Memory Spaces",
/// private: "accessed in an interleaved manner ... by buffer instructions with the scratch
/// buffer descriptor and per wavefront scratch offset, by the scratch instructions, or by
/// flat instructions"), i.e. the swizzle of the scratch V# (ELEMENT_SIZE 4 bytes,
/// INDEX_STRIDE 64, ADD_TID_ENABLE): see [`swizzled_offset`].
#[inline]
pub(crate) fn scratch_addr(wave_base: u64, offset: u64, lane: usize) -> u64 {
    wave_base.wrapping_add(swizzled_offset(lane as u64, offset, 0, 4, 64))
}

/// Swizzled buffer addressing (CDNA3 ISA "Buffer Addressing", swizzle enabled): with
/// `index` (idxen VGPR, plus the lane id when ADD_TID_ENABLE) and `offset` (offen VGPR plus
/// the instruction offset), the byte offset from base + soffset is
/// `(index / index_stride * stride + offset / element_size * element_size) * index_stride
/// + index % index_stride * element_size + offset % element_size`.
#[inline]
pub(crate) fn swizzled_offset(
    index: u64,
    offset: u64,
    stride: u64,
    element_size: u64,
    index_stride: u64,
) -> u64 {
    (index / index_stride * stride + offset / element_size * element_size) * index_stride
        + index % index_stride * element_size
        + offset % element_size
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpumem::HeapMemory;

    /// Accesses cycling over few windows (the MRU hits), over more windows than the
    /// port keeps (evictions), and out of every window each reach the right memory.
    #[test]
    fn port_reaches_the_right_window_through_hits_misses_and_evictions() {
        let mem = Arc::new(HeapMemory::new());
        let base = |r: u64| 0x1_0000_0000 + r * 0x10_0000;
        let wins: Vec<MemWindow> = (0..20).map(|r| mem.add_region(base(r), 4096)).collect();
        let mut port = MemPort::new(1, mem.clone());
        let mut want = vec![[0u32; 1024]; 20];
        let mut x = 0x9E37_79B9u32;
        let patterns: [&[u64]; 3] = [&[0, 1, 2, 0, 2, 1, 1, 0], &[3, 4, 5, 6], &[7, 19, 8, 0]];
        for round in 0..200u32 {
            let p = patterns[(round % 3) as usize];
            for (i, &r) in p.iter().enumerate() {
                x = x
                    .wrapping_mul(0x0101_0101)
                    .wrapping_add(round * 8 + i as u32);
                let o = (x % 1024) as usize;
                port.store(base(r) + 4 * o as u64, 4, x as u64)
                    .expect("store");
                want[r as usize][o] = x;
                let back = port.load(base(r) + 4 * o as u64, 4).expect("load");
                assert_eq!(back, x as u64, "region {r} dword {o}");
            }
            // Every region once: more windows than the port keeps.
            if round % 50 == 49 {
                for r in (0..20).rev() {
                    port.load(base(r), 4).expect("load");
                }
            }
        }
        for (r, w) in wins.iter().enumerate() {
            for (o, &v) in want[r].iter().enumerate() {
                assert_eq!(w.load_u32(base(r as u64) + 4 * o as u64), Ok(v));
            }
        }
        // Between regions, and across a region's end: not mapped.
        assert!(port.load(base(0) + 4096, 4).is_err());
        assert!(port.load(base(1) + 4094, 4).is_err());
    }
}
