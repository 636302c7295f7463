//! HDP flush: CPU writes to VRAM through the PCIe BAR pass the Host Data Path, which
//! may hold them; before the GPU reads them the runtime writes the HDP_MEM_FLUSH_CNTL
//! register (CLR `rocvirtual.cpp` writes `*hdpMemFlushCntl = 1` and reads it back).
//! The register is reached through the MMIO remap page: a one-page BO allocated with
//! `KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP` and mapped from `/dev/kfd` at its mmap offset
//! (libhsakmt `fmm.c`); HDP_MEM_FLUSH_CNTL is at offset 0 of it
//! (`KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL`).
//!
//! kfdrt marks a GPU's HDP dirty when the CPU may have written its VRAM
//! ([`crate::Buffer::write`], [`crate::Buffer::as_ptr`] of device memory) and flushes
//! every dirty HDP before ringing a doorbell, so the flush precedes the work that reads.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

use kfd::abi::{AllocFlags, AllocMemoryOfGpuArgs};
use kfd::{Backend, MmapFile, Prot};

use crate::va::{VaReservation, PAGE};

/// Offset of HDP_MEM_FLUSH_CNTL in the MMIO remap page.
pub const HDP_MEM_FLUSH_CNTL: usize = 0;

/// One GPU's MMIO remap page and dirty flag.
pub(crate) struct Hdp {
    /// The CPU mapping of the remap page (None when the kernel offers none, e.g. no
    /// large BAR or an older kernel: then no flush is possible or needed from here).
    page: Option<(VaReservation, u64)>,
    dirty: AtomicBool,
}

// SAFETY: the page is an MMIO mapping written only with 32-bit volatile accesses.
unsafe impl Send for Hdp {}
// SAFETY: as above.
unsafe impl Sync for Hdp {}

impl Hdp {
    /// Allocates and maps GPU `gpu_id`'s MMIO remap page (best effort).
    pub(crate) fn open(b: &dyn Backend, gpu_id: u32) -> Hdp {
        Hdp {
            page: Self::map(b, gpu_id),
            dirty: AtomicBool::new(false),
        }
    }

    fn map(b: &dyn Backend, gpu_id: u32) -> Option<(VaReservation, u64)> {
        let r = VaReservation::new(PAGE, PAGE).ok()?;
        let mut a = AllocMemoryOfGpuArgs {
            va_addr: r.addr(),
            size: PAGE as u64,
            gpu_id,
            flags: (AllocFlags::MMIO_REMAP | AllocFlags::WRITABLE | AllocFlags::NO_SUBSTITUTE)
                .bits(),
            ..Default::default()
        };
        kfd::ioctl::alloc_memory_of_gpu(b, &mut a).ok()?;
        // SAFETY: the fixed range is our own reservation, which nothing references.
        let m = unsafe {
            b.mmap(
                MmapFile::Kfd,
                a.mmap_offset,
                PAGE,
                Some(r.ptr()),
                Prot::READ | Prot::WRITE,
            )
        };
        if m.is_err() {
            let _ = kfd::ioctl::free_memory_of_gpu(b, a.handle);
            return None;
        }
        Some((r, a.handle))
    }

    /// Whether the remap page is mapped.
    pub(crate) fn available(&self) -> bool {
        self.page.is_some()
    }

    /// The CPU may have written this GPU's VRAM.
    pub(crate) fn mark_dirty(&self) {
        if !self.dirty.load(Ordering::Relaxed) {
            self.dirty.store(true, Ordering::Release);
        }
    }

    /// Flush when dirty: write 1 to HDP_MEM_FLUSH_CNTL and read it back (the read posts
    /// the write before the doorbell that follows).
    pub(crate) fn flush_if_dirty(&self) {
        if !self.dirty.load(Ordering::Acquire) || !self.dirty.swap(false, Ordering::AcqRel) {
            return;
        }
        self.flush();
    }

    /// Flush unconditionally.
    pub(crate) fn flush(&self) {
        if let Some((r, _)) = &self.page {
            // SAFETY: the remap page is mapped READ|WRITE at `r` for as long as `self`
            // lives; HDP_MEM_FLUSH_CNTL is a 4-byte aligned register in it.
            let reg = unsafe {
                AtomicU32::from_ptr((r.addr() as usize + HDP_MEM_FLUSH_CNTL) as *mut u32)
            };
            reg.store(1, Ordering::SeqCst);
            let _ = reg.load(Ordering::SeqCst);
        }
    }

    /// Unmaps and frees the page (device teardown).
    pub(crate) fn close(&mut self, b: &dyn Backend) {
        if let Some((r, handle)) = self.page.take() {
            // Reverse order of creation: the CPU mapping, then the BO.
            drop(r);
            let _ = kfd::ioctl::free_memory_of_gpu(b, handle);
        }
    }
}

#[cfg(all(test, feature = "emulator"))]
mod tests {
    use std::sync::Arc;

    use crate::{Device, MemoryKind};

    /// A CPU write to VRAM is followed by an HDP flush before the doorbell of the work
    /// that reads it; work that reads no CPU-written VRAM rings without one.
    #[test]
    fn hdp_flush_precedes_the_doorbell_after_cpu_vram_writes() {
        for preset in ["emu:mi300x", "emu:rx7900xtx"] {
            let emu = Arc::new(kfd_emu::EmuBackend::from_spec(preset).unwrap());
            let dev = Device::with_backend(emu.clone()).unwrap();
            assert!(dev.has_hdp_flush(0), "{preset}: no MMIO remap page");
            let gpu_id = dev.gpus()[0].gpu_id;
            let vram = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
            let host = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
            let s = dev.create_stream(0).unwrap();
            s.memset(host.va(), 0, 4096).unwrap();
            s.synchronize().unwrap();
            let (d0, f0) = emu.hdp_stats(gpu_id).unwrap();
            // Host-to-host work: doorbells, no flush.
            s.memcpy(host.va() + 2048, host.va(), 16).unwrap();
            s.synchronize().unwrap();
            let (d1, f1) = emu.hdp_stats(gpu_id).unwrap();
            assert!(d1 > d0, "{preset}: no doorbell counted");
            assert_eq!(f1, f0, "{preset}: flush without a CPU write to VRAM");
            // CPU write to VRAM, then a copy that reads it.
            vram.write(0, &[1, 2, 3, 4]).unwrap();
            s.memcpy(host.va(), vram.va(), 4).unwrap();
            let (_, f2) = emu.hdp_stats(gpu_id).unwrap();
            assert_eq!(
                f2,
                f1 + 1,
                "{preset}: the copy's doorbell had no flush before it"
            );
            s.synchronize().unwrap();
            let mut got = [0u8; 4];
            host.read(0, &mut got).unwrap();
            assert_eq!(got, [1, 2, 3, 4]);
            // The flush happened once: the next doorbell has none.
            s.memcpy(host.va() + 8, host.va(), 4).unwrap();
            s.synchronize().unwrap();
            assert_eq!(emu.hdp_stats(gpu_id).unwrap().1, f2, "{preset}");
        }
    }
}
