//! The KFD connection and the GPU agents ([`DeviceCore`], [`Gpu`]), with the state the
//! hardware-facing layers share: doorbell pages, HDP flush pages, peer access and the
//! extents of live buffer objects. It sits under memory, rings and signals, which take
//! `&DeviceCore` (never the runtime's `DeviceInner`); see the layering in the crate docs.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::OwnedFd;
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kfd::abi::ProcessDeviceApertures;
use kfd::topology::Node;
use kfd::Backend;

use crate::error::{Error, ErrorKind, Result};
use crate::sync::lock;

/// One GPU agent of a [`crate::Device`].
#[derive(Debug)]
pub struct Gpu {
    /// Index among the device's GPUs (HIP device ordinal).
    pub index: usize,
    /// KFD gpu_id.
    pub gpu_id: u32,
    /// The topology node.
    pub node: Node,
    /// PM4/AQL packet family.
    pub family: pm4::GfxFamily,
    /// SDMA packet version.
    pub sdma_version: pm4::SdmaVersion,
    /// Apertures from GET_PROCESS_APERTURES_NEW.
    pub apertures: ProcessDeviceApertures,
    /// The render node (kept open: buffer objects are mmapped through it).
    pub(crate) render: OwnedFd,
}

impl Gpu {
    /// gfx target name, e.g. `gfx942`.
    pub fn gfx_name(&self) -> String {
        self.node
            .gfx_target_name()
            .unwrap_or_else(|| "unknown".into())
    }
    /// Number of compute units.
    pub fn cu_count(&self) -> u32 {
        self.node.cu_count()
    }
}

/// The KFD connection and the GPUs: what buffer objects need to free themselves.
/// Dropped after the last [`crate::Buffer`]: render fds close, then the backend.
pub(crate) struct DeviceCore {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) kfd_version: (u32, u32),
    pub(crate) gpus: Vec<Gpu>,
    /// Doorbell pages mapped so far (per GPU); unmapped when the last queue is gone.
    pub(crate) doorbells: Mutex<Vec<(usize, DoorbellPage)>>,
    /// The signal event every queue's context save area header names for queue errors.
    /// Created with the first queue (a signal event needs the event page first).
    pub(crate) queue_error_event: std::sync::OnceLock<u32>,
    /// The error payloads of live queues.
    pub(crate) queue_errors: crate::queue_error::Registry,
    /// Per GPU: the MMIO remap page (HDP flush) and whether the CPU wrote its VRAM.
    pub(crate) hdp: Vec<crate::hdp::Hdp>,
    /// Set after any GPU's HDP is marked dirty: a doorbell checks this one flag.
    pub(crate) hdp_dirty: std::sync::atomic::AtomicBool,
    /// Peer access between GPUs and the device buffers it maps.
    pub(crate) peers: Peers,
    /// Address ranges of the live buffer objects (length checks of copies and fills).
    pub(crate) extents: Extents,
    /// The live USERPTR buffer objects by first page: registrations whose pages lie in
    /// one of them share it ([`crate::memory`]'s `Buffer::userptr`).
    pub(crate) userptrs: Mutex<BTreeMap<u64, UserptrBo>>,
    /// SVM context-save areas of destroyed queues, for reuse: (gpu index, address,
    /// length). Unmapped when the device goes.
    pub(crate) cwsr_free: Mutex<Vec<(usize, u64, usize)>>,
}

impl Drop for DeviceCore {
    fn drop(&mut self) {
        for h in &mut self.hdp {
            h.close(self.backend.as_ref());
        }
        if let Some(&e) = self.queue_error_event.get() {
            let _ = kfd::ioctl::destroy_event(self.backend.as_ref(), e);
        }
        // Queues hold the core, so none is left: unmap the doorbell pages.
        let areas = std::mem::take(self.cwsr_free.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (_, addr, len) in areas {
            // SAFETY: an SVM context-save area this device mapped; no queue uses it now.
            let _ = unsafe { rustix::mm::munmap(addr as *mut core::ffi::c_void, len) };
        }
        let pages = std::mem::take(self.doorbells.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (_, p) in pages {
            if let Some(nn) = core::ptr::NonNull::new(p.base.cast()) {
                // SAFETY: the page was mapped by `doorbell_slot` and no queue uses it now.
                let _ = unsafe { self.backend.munmap(nn, p.len) };
            }
        }
    }
}

impl DeviceCore {
    /// Flush the HDP of every GPU whose VRAM the CPU wrote since the last flush: call
    /// before a doorbell (or a release of waiting GPU work).
    #[inline]
    pub(crate) fn hdp_flush_dirty(&self) {
        use std::sync::atomic::Ordering;
        // One load on the doorbell path; the per-GPU flags are looked at only after a
        // mark (which sets its GPU's flag before this one).
        if self.hdp_dirty.load(Ordering::Acquire) && self.hdp_dirty.swap(false, Ordering::AcqRel) {
            for h in &self.hdp {
                h.flush_if_dirty();
            }
        }
    }

    /// The CPU may have written GPU `gpu_index`'s VRAM: flushed before the next doorbell.
    pub(crate) fn mark_hdp_dirty(&self, gpu_index: usize) {
        use std::sync::atomic::Ordering;
        if let Some(h) = self.hdp.get(gpu_index) {
            h.mark_dirty();
            // Always stored (never skipped when it reads true): a flush racing with this
            // mark may have taken an older `true` without seeing the GPU's flag.
            self.hdp_dirty.store(true, Ordering::Release);
        }
    }

    pub(crate) fn gpu(&self, index: usize) -> Result<&Gpu> {
        self.gpus.get(index).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidValue,
                "Device::gpu",
                format!(
                    "GPU index {index} out of range (device has {})",
                    self.gpus.len()
                ),
            )
        })
    }
    pub(crate) fn gpu_ids(&self) -> Vec<u32> {
        self.gpus.iter().map(|g| g.gpu_id).collect()
    }
}

/// The doorbell mapping of one GPU (mapped once per device and GPU, unmapped with the
/// device).
pub(crate) struct DoorbellPage {
    pub(crate) base: *mut u8,
    pub(crate) len: usize,
    pub(crate) offset: u64,
}

// SAFETY: the page is device MMIO (or the emulator's doorbell memory) written only by
// 64-bit volatile stores.
unsafe impl Send for DoorbellPage {}
// SAFETY: as above.
unsafe impl Sync for DoorbellPage {}

/// What one live buffer object holds, in [`Extents`]: the length asked for (not the
/// page-rounded one), its kind and its GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Extent {
    pub(crate) len: u64,
    pub(crate) kind: crate::types::AllocationKind,
    pub(crate) gpu: usize,
}

/// The address ranges of a device's live buffer objects as their callers asked for them
/// (`[base, base+len)`: `hipMalloc(100)` is 100 bytes though its BO is a page; a
/// registration is the caller's pointer and length, not the pages around them), keyed by
/// `(base, handle)` (a range registered twice as USERPTR appears twice).
///
/// The last range found is kept in a sequence-locked cell: the stream memory operations
/// look up their address at every call (`hipStreamWriteValue32` on one flag word), and a
/// hit there is a few loads instead of the lock and the tree walk. Every insert and
/// removal clears the cell (under the write lock), so a hit is never a freed range.
#[derive(Default)]
pub(crate) struct Extents {
    map: std::sync::RwLock<std::collections::BTreeMap<(u64, u64), Extent>>,
    /// Even: `hit` is consistent; odd: a writer is changing it.
    seq: AtomicU64,
    /// Base, length (0: empty) and packed kind and GPU ([`pack`]) of the last range found.
    hit: [AtomicU64; 3],
}

/// An [`Extent`]'s kind and GPU in one word (the cell of [`Extents`]).
fn pack(e: &Extent) -> u64 {
    use crate::types::{AllocationKind as A, MemoryKind as M};
    let code = match e.kind {
        A::Buffer(M::Device) => 0,
        A::Buffer(M::HostPinned) => 1,
        A::Buffer(M::Signal) => 2,
        A::Buffer(M::Userptr) => 3,
        A::IpcImport => 4,
        A::Managed => 5,
        A::Vmm => 6,
    };
    code | (e.gpu as u64) << 8
}

/// [`pack`] undone, with the length.
fn unpack(len: u64, w: u64) -> Extent {
    use crate::types::{AllocationKind as A, MemoryKind as M};
    let kind = match w & 0xff {
        0 => A::Buffer(M::Device),
        1 => A::Buffer(M::HostPinned),
        2 => A::Buffer(M::Signal),
        3 => A::Buffer(M::Userptr),
        4 => A::IpcImport,
        5 => A::Managed,
        _ => A::Vmm,
    };
    Extent {
        len,
        kind,
        gpu: (w >> 8) as usize,
    }
}

impl Extents {
    fn write(
        &self,
    ) -> std::sync::RwLockWriteGuard<'_, std::collections::BTreeMap<(u64, u64), Extent>> {
        let m = self.map.write().unwrap_or_else(|e| e.into_inner());
        // No reader of the map now and no publisher (they hold the read lock): clear the
        // cell. The odd value first, so a concurrent cell reader rejects what it read.
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s | 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.hit[1].store(0, Ordering::Relaxed);
        self.seq.store((s | 1) + 1, Ordering::Release);
        m
    }
    pub(crate) fn insert(&self, base: u64, handle: u64, e: Extent) {
        self.write().insert((base, handle), e);
    }
    pub(crate) fn remove(&self, base: u64, handle: u64) {
        self.write().remove(&(base, handle));
    }
    /// The base and entry of the buffer object containing `addr`. Ranges may overlap
    /// (registrations of overlapping host ranges): the nearest base at or below `addr`
    /// whose range holds it, among the few closest.
    #[inline]
    pub(crate) fn containing(&self, addr: u64) -> Option<(u64, Extent)> {
        // The cell (a sequence lock's read side).
        let s1 = self.seq.load(Ordering::Acquire);
        let base = self.hit[0].load(Ordering::Relaxed);
        let len = self.hit[1].load(Ordering::Relaxed);
        let w = self.hit[2].load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        if s1 & 1 == 0 && self.seq.load(Ordering::Relaxed) == s1 && addr.wrapping_sub(base) < len {
            return Some((base, unpack(len, w)));
        }
        self.containing_slow(addr)
    }

    /// Whether the last range found (the cell) holds `addr`: the hot path of the stream
    /// memory operations' check, a few loads. False says nothing (ask [`Self::containing`]).
    #[inline(always)]
    pub(crate) fn cached_holds(&self, addr: u64) -> bool {
        let s1 = self.seq.load(Ordering::Acquire);
        let base = self.hit[0].load(Ordering::Relaxed);
        let len = self.hit[1].load(Ordering::Relaxed);
        fence(Ordering::Acquire);
        s1 & 1 == 0 && self.seq.load(Ordering::Relaxed) == s1 && addr.wrapping_sub(base) < len
    }

    #[inline(never)]
    fn containing_slow(&self, addr: u64) -> Option<(u64, Extent)> {
        let m = self.map.read().unwrap_or_else(|e| e.into_inner());
        let (key, e) = m
            .range(..=(addr, u64::MAX))
            .rev()
            .take(4)
            .find(|(&(va, _), e)| addr - va < e.len)
            .map(|(&k, &e)| (k, e))?;
        let base = key.0;
        // Publish it, unless another publisher is at it (the map cannot change while the
        // read lock is held, so what is published is live), or a range starts inside it (a
        // registration inside this one): the lookup answers the nearest base, which
        // for some addresses of this range is that other one.
        use std::ops::Bound::{Excluded, Unbounded};
        let alone = m
            .range((Excluded(key), Unbounded))
            .next()
            .is_none_or(|(&(next, _), _)| next >= base + e.len);
        let s = self.seq.load(Ordering::Relaxed);
        if alone
            && s & 1 == 0
            && self
                .seq
                .compare_exchange(s, s + 1, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            fence(Ordering::Release);
            self.hit[0].store(base, Ordering::Relaxed);
            self.hit[1].store(e.len, Ordering::Relaxed);
            self.hit[2].store(pack(&e), Ordering::Relaxed);
            self.seq.store(s + 2, Ordering::Release);
        }
        Some((base, e))
    }
}

/// One USERPTR buffer object and how many registrations ([`crate::Buffer`]s) use it.
pub(crate) struct UserptrBo {
    pub(crate) size: usize,
    pub(crate) handle: u64,
    pub(crate) refs: usize,
    pub(crate) mapped_on: Arc<Mutex<Vec<u32>>>,
}

/// Peer access (`hipDeviceEnablePeerAccess`) and the device buffers it governs.
#[derive(Default)]
pub(crate) struct Peers {
    pub(crate) state: Mutex<PeerState>,
}

#[derive(Default)]
pub(crate) struct PeerState {
    /// `(accessor, owner)`: GPU `accessor` may access GPU `owner`'s device buffers.
    pub(crate) enabled: BTreeSet<(usize, usize)>,
    /// Live device buffers by VA.
    pub(crate) bufs: BTreeMap<u64, PeerBuf>,
}

pub(crate) struct PeerBuf {
    pub(crate) len: u64,
    pub(crate) handle: u64,
    pub(crate) owner: usize,
    pub(crate) mapped: Arc<Mutex<Vec<u32>>>,
}

impl Peers {
    /// Map the device buffers that hold `[va, va + len)` on GPU `gpu` so that its copy
    /// engines can reach them: a copy between GPUs works without peer access, as
    /// `hipMemcpy`/`hipMemcpyPeer` do in HIP. The mapping stays until the buffer is
    /// freed or peer access from `gpu` to the owner is disabled.
    pub(crate) fn map_for_copy(
        &self,
        dev: &DeviceCore,
        gpu: usize,
        va: u64,
        len: u64,
    ) -> Result<()> {
        let st = lock(&self.state);
        let end = va.saturating_add(len.max(1));
        for (&bva, b) in st.bufs.range(..end).rev() {
            if bva + b.len <= va {
                break;
            }
            if b.owner != gpu {
                map_handle(dev, b.handle, &b.mapped, gpu, "hipMemcpy")?;
            }
        }
        Ok(())
    }
}

pub(crate) fn map_handle(
    dev: &DeviceCore,
    handle: u64,
    mapped: &Mutex<Vec<u32>>,
    gpu: usize,
    call: &'static str,
) -> Result<()> {
    let id = dev.gpu(gpu)?.gpu_id;
    let mut m = lock(mapped);
    if m.contains(&id) {
        return Ok(());
    }
    let mut n = 0u32;
    kfd::ioctl::map_memory_to_gpu(dev.backend.as_ref(), handle, &[id], &mut n)
        .map_err(|e| Error::from_kfd(call, e))?;
    m.push(id);
    Ok(())
}

pub(crate) fn unmap_handle(
    dev: &DeviceCore,
    handle: u64,
    mapped: &Mutex<Vec<u32>>,
    gpu: usize,
    call: &'static str,
) -> Result<()> {
    let id = dev.gpu(gpu)?.gpu_id;
    let mut m = lock(mapped);
    let Some(pos) = m.iter().position(|&g| g == id) else {
        return Ok(());
    };
    let mut n = 0u32;
    kfd::ioctl::unmap_memory_from_gpu(dev.backend.as_ref(), handle, &[id], &mut n)
        .map_err(|e| Error::from_kfd(call, e))?;
    m.remove(pos);
    Ok(())
}

/// Releases an imported dmabuf mapped over `reservation`: unmaps it from `gpu_id` (0: never
/// mapped on a GPU), puts PROT_NONE back over the CPU mapping so the range stays reserved
/// until the reservation drops, and frees the BO. Shared by buffer IPC and pool imports.
pub(crate) fn release_import(
    b: &dyn Backend,
    reservation: &crate::va::VaReservation,
    handle: u64,
    gpu_id: u32,
) {
    if gpu_id != 0 {
        let mut n = 0;
        let _ = kfd::ioctl::unmap_memory_from_gpu(b, handle, &[gpu_id], &mut n);
    }
    // SAFETY: the range is the caller's reservation; the anonymous PROT_NONE mapping
    // replaces the dmabuf mapping and keeps the range ours until the reservation drops.
    let _ = unsafe {
        rustix::mm::mmap_anonymous(
            reservation.ptr().as_ptr(),
            reservation.len(),
            rustix::mm::ProtFlags::empty(),
            rustix::mm::MapFlags::PRIVATE
                | rustix::mm::MapFlags::NORESERVE
                | rustix::mm::MapFlags::FIXED,
        )
    };
    let _ = kfd::ioctl::free_memory_of_gpu(b, handle);
}

#[cfg(test)]
mod tests {
    use super::{Extent, Extents};
    use crate::types::{AllocationKind, MemoryKind};

    fn ext(len: u64) -> Extent {
        Extent {
            len,
            kind: AllocationKind::Buffer(MemoryKind::Userptr),
            gpu: 0,
        }
    }

    #[test]
    fn containing_uses_the_requested_length_and_finds_overlapping_ranges() {
        let x = Extents::default();
        x.insert(0x1000, 1, ext(100));
        assert_eq!(
            x.containing(0x1000).map(|(b, e)| (b, e.len)),
            Some((0x1000, 100))
        );
        assert_eq!(x.containing(0x1063).map(|(b, _)| b), Some(0x1000));
        assert_eq!(x.containing(0x1064), None, "past the 100 bytes asked for");
        assert_eq!(x.containing(0xfff), None);
        // A registration inside another (shared BO), then one starting at the same base.
        x.insert(0x1000, 2, ext(0x3000));
        x.insert(0x2008, 3, ext(8));
        // The outer range found first (and not cached: a range starts inside it), then
        // an address of the inner one: still the inner one.
        assert_eq!(x.containing(0x1f00).map(|(b, _)| b), Some(0x1000));
        assert_eq!(x.containing(0x2008).map(|(b, _)| b), Some(0x2008));
        assert_eq!(x.containing(0x200c).map(|(b, _)| b), Some(0x2008));
        assert_eq!(
            x.containing(0x2010).map(|(b, e)| (b, e.len)),
            Some((0x1000, 0x3000))
        );
        x.remove(0x1000, 2);
        assert_eq!(x.containing(0x2010), None);
        assert_eq!(x.containing(0x1010).map(|(_, e)| e.len), Some(100));
        x.remove(0x1000, 1);
        x.remove(0x2008, 3);
        assert_eq!(x.containing(0x1010), None);
    }
}
