//! Memory objects: ALLOC/FREE/MAP/UNMAP, render-node and `/dev/kfd` mmaps, dmabuf
//! export/import, and the per-GPU page tables the engines resolve GPU VAs through.
//!
//! Kernel rules modelled here are listed, with their sources, in
//! `firmware-notes/kfd-memory.md`.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, BorrowedFd, IntoRawFd};
use std::sync::{Arc, RwLock};

use kfd::abi::{self, AllocFlags};
use kfd::{MmapFile, Prot};
use rustix::io::Errno;

use crate::gpumem::{Fault, FaultKind, GpuMemory, MemWindow};
use crate::kfd::hostmem::{
    check_user_range, page_align, user_range_rw, Backing, UserRange, BO_MEMFD_PREFIX, PAGE,
};
use crate::kfd::process::{
    file_id, Emu, Proc, DOORBELL_SLICE, DRM_FILE_PAGE_OFFSET_START, GPUVM_BASE, GPUVM_END,
    VRAM_AVAILABILITY_ALIGN,
};

/// What backs a BO.
#[derive(Clone, Debug)]
pub(crate) enum BoMem {
    /// Pages of its own (a sealed memfd with the emulator's alias).
    Pages(Arc<Backing>),
    /// The application's memory at a CPU address (USERPTR).
    User(Arc<UserRange>),
}

/// A buffer object (`struct kgd_mem`).
#[derive(Debug)]
pub(crate) struct Bo {
    pub(crate) gpu_idx: usize,
    pub(crate) va: u64,
    /// Page-aligned size.
    pub(crate) size: u64,
    pub(crate) flags: u32,
    pub(crate) mem: BoMem,
    /// Render-node mmap offset (DRM fake offset), 0 for none.
    pub(crate) drm_offset: u64,
    /// GPUs it is mapped on now.
    pub(crate) mapped: BTreeSet<usize>,
    /// VRAM charged (page-aligned, 2 MiB-aligned).
    pub(crate) vram_charge: (u64, u64),
    /// System memory charged.
    pub(crate) system_charge: u64,
    /// Pages of its own that no one outside this process's emulator can hold: a VRAM or
    /// GTT BO allocated here and never exported as a dmabuf. Only such memfds are recycled.
    pub(crate) private_pages: bool,
}

/// How many freed BOs' memfds the emulator keeps for reuse (per process).
const RECYCLE_SLOTS: usize = 4;

/// A freed BO's memfd, emptied (its pages given back), kept for the next ALLOC of a BO with
/// the same GPU, VA, size and flags (see `firmware-notes/kfd-memory.md`, "Recycled memfds").
pub(crate) struct Recycled {
    gpu_idx: usize,
    va: u64,
    size: u64,
    flags: u32,
    backing: Arc<Backing>,
}

impl Bo {
    /// The window engines use for this BO at its GPU VA.
    pub(crate) fn window(&self) -> MemWindow {
        let writable = self.flags & abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE != 0;
        match &self.mem {
            BoMem::Pages(b) => {
                let len = (self.size as usize).min(b.len());
                // SAFETY: the alias stays mapped read-write while the Arc<Backing> lives;
                // the window owns a clone of it.
                unsafe { MemWindow::new(self.va, b.ptr(), len, writable, b.clone()) }
            }
            BoMem::User(u) => {
                let ptr = NonNull::new(u.addr as *mut u8).unwrap_or(NonNull::dangling());
                // SAFETY: a registered user range: checked mapped at registration and at
                // every MAP; the application must keep it mapped while registered (the
                // USERPTR contract, documented in kfd-memory.md).
                unsafe { MemWindow::new(self.va, ptr, u.len as usize, writable, u.clone()) }
            }
        }
    }
}

/// Who owns a GPU page-table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VmOwner {
    /// A BO (by handle).
    Bo(u64),
    /// An SVM range.
    Svm,
}

/// One mapping in a GPU's page tables.
#[derive(Clone, Debug)]
pub(crate) struct VmEntry {
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) window: MemWindow,
    pub(crate) owner: VmOwner,
}

/// Every GPU's page tables, by GPU VA: what [`GpuMemory::resolve`] serves the engines.
pub(crate) struct GpuVm {
    gpu_ids: Vec<u32>,
    maps: Vec<RwLock<BTreeMap<u64, VmEntry>>>,
}

impl GpuVm {
    pub(crate) fn new(gpu_ids: Vec<u32>) -> Self {
        let maps = gpu_ids
            .iter()
            .map(|_| RwLock::new(BTreeMap::new()))
            .collect();
        GpuVm { gpu_ids, maps }
    }

    fn map(&self, idx: usize) -> Option<&RwLock<BTreeMap<u64, VmEntry>>> {
        self.maps.get(idx)
    }

    /// The mapping containing `va` on GPU `idx`.
    pub(crate) fn lookup(&self, idx: usize, va: u64) -> Option<VmEntry> {
        let m = self.map(idx)?.read().unwrap_or_else(|e| e.into_inner());
        let (_, e) = m.range(..=va).next_back()?;
        (va < e.end).then(|| e.clone())
    }

    fn overlaps(m: &BTreeMap<u64, VmEntry>, start: u64, end: u64) -> bool {
        if let Some((_, e)) = m.range(..end).next_back() {
            return e.end > start;
        }
        false
    }

    /// Insert a mapping; EINVAL if it overlaps another one (amdgpu_vm_bo_map).
    pub(crate) fn insert(&self, idx: usize, entry: VmEntry) -> Result<(), Errno> {
        let Some(map) = self.map(idx) else {
            return Err(Errno::INVAL);
        };
        let mut m = map.write().unwrap_or_else(|e| e.into_inner());
        if Self::overlaps(&m, entry.start, entry.end) {
            return Err(Errno::INVAL);
        }
        m.insert(entry.start, entry);
        Ok(())
    }

    /// Remove the mapping of BO `handle`, which starts at `va`, on GPU `idx`.
    pub(crate) fn remove_bo(&self, idx: usize, handle: u64, va: u64) {
        if let Some(map) = self.map(idx) {
            let mut m = map.write().unwrap_or_else(|e| e.into_inner());
            if m.get(&va).is_some_and(|e| e.owner == VmOwner::Bo(handle)) {
                m.remove(&va);
            }
        }
    }

    /// Replace all SVM mappings of GPU `idx` by `entries` (entries that would overlap a BO
    /// mapping are skipped; SET_ATTR prevents that case with EADDRINUSE).
    pub(crate) fn replace_svm(&self, idx: usize, entries: Vec<VmEntry>) {
        if let Some(map) = self.map(idx) {
            let mut m = map.write().unwrap_or_else(|e| e.into_inner());
            m.retain(|_, e| e.owner != VmOwner::Svm);
            for e in entries {
                if !Self::overlaps(&m, e.start, e.end) {
                    m.insert(e.start, e);
                }
            }
        }
    }
}

impl GpuMemory for GpuVm {
    fn resolve(&self, gpu_id: u32, va: u64, len: u64) -> Result<MemWindow, Fault> {
        let fault = Fault {
            gpu_id,
            va,
            len,
            write: false,
            kind: FaultKind::NotMapped,
        };
        let idx = self
            .gpu_ids
            .iter()
            .position(|g| *g == gpu_id)
            .ok_or(fault)?;
        let e = self.lookup(idx, va).ok_or(fault)?;
        if !e.window.contains(va, len.max(1)) {
            return Err(fault);
        }
        Ok(e.window)
    }
}

/// The name of a BO's memfd: the prefix, the exporting GPU and the flags GET_DMABUF_INFO
/// reports (`amdgpu_amdkfd_get_dmabuf_info`: VRAM or GTT, plus PUBLIC for CPU-visible VRAM).
fn memfd_name(gpu_id: u32, flags: u32) -> String {
    let mut info = if flags & abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM != 0 {
        abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM
    } else {
        abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT
    };
    if flags & abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM != 0
        && flags & abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC != 0
    {
        info |= abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    }
    format!("{BO_MEMFD_PREFIX} g={gpu_id:x} f={info:x}")
}

fn parse_memfd_name(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix(BO_MEMFD_PREFIX)?.trim();
    let mut gpu = None;
    let mut flags = None;
    for part in rest.split_whitespace() {
        if let Some(v) = part.strip_prefix("g=") {
            gpu = u32::from_str_radix(v, 16).ok();
        } else if let Some(v) = part.strip_prefix("f=") {
            flags = u32::from_str_radix(v, 16).ok();
        }
    }
    Some((gpu?, flags?))
}

fn pages_overlap(a_start: u64, a_len: u64, b_start: u64, b_len: u64) -> bool {
    let a_last = a_start.saturating_add(a_len.max(1) - 1) >> 12;
    let b_last = b_start.saturating_add(b_len.max(1) - 1) >> 12;
    (a_start >> 12) <= b_last && (b_start >> 12) <= a_last
}

impl Emu {
    /// Enter `bo` under a fresh handle (`gpu_id << 32` | the lowest free idr id of its GPU)
    /// with a fresh render-node mmap offset; returns the handle and that offset.
    fn insert_bo(st: &mut Proc, gpu_id: u32, mut bo: Bo) -> (u64, u64) {
        let ids = &mut st.pdds[bo.gpu_idx].bo_ids;
        // The lowest free id: the first position of the sorted ids that holds another
        // number (one pass, no lookup per candidate).
        let id = ids
            .iter()
            .zip(0u32..)
            .find(|&(&have, want)| have != want)
            .map_or(u32::try_from(ids.len()).unwrap_or(u32::MAX), |(_, want)| {
                want
            });
        ids.insert(id);
        let handle = (u64::from(gpu_id) << 32) | u64::from(id);
        if st.next_drm_pgoff < DRM_FILE_PAGE_OFFSET_START {
            st.next_drm_pgoff = DRM_FILE_PAGE_OFFSET_START;
        }
        let drm_offset = st.next_drm_pgoff << 12;
        st.next_drm_pgoff = st.next_drm_pgoff.saturating_add(bo.size >> 12);
        st.drm_offsets.insert(drm_offset, handle);
        bo.drm_offset = drm_offset;
        st.bos.insert(handle, bo);
        (handle, drm_offset)
    }

    pub(crate) fn alloc_memory(&self, a: &mut abi::AllocMemoryOfGpuArgs) -> Result<(), Errno> {
        if a.size == 0 {
            return Err(Errno::INVAL);
        }
        let flags = a.flags;
        let f = AllocFlags::from_bits_retain(flags);
        let mut st = self.lock();
        // Overlap with SVM ranges (kfd_ioctl_alloc_memory_of_gpu): EADDRINUSE.
        if !(a.va_addr == 0 && f.contains(AllocFlags::VRAM)) && st.svm.overlaps(a.va_addr, a.size) {
            return Err(Errno::ADDRINUSE);
        }
        if f.contains(AllocFlags::USERPTR) && st.svm.overlaps(a.mmap_offset, a.size) {
            return Err(Errno::ADDRINUSE);
        }
        let idx = self.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
        let gpu = &self.gpus[idx];
        // kfd_ioctl_alloc_memory_of_gpu: "Alloc host visible vram on small bar is not
        // allowed" (PUBLIC | VRAM on a GPU that is not `kfd_dev_is_large_bar`): EINVAL.
        if f.contains(AllocFlags::VRAM)
            && f.contains(AllocFlags::PUBLIC)
            && gpu.preset.is_small_bar()
        {
            return Err(Errno::INVAL);
        }
        Self::bind(&st, idx)?;
        if f.contains(AllocFlags::DOORBELL) {
            if a.size != DOORBELL_SLICE {
                return Err(Errno::INVAL);
            }
        } else if f.contains(AllocFlags::MMIO_REMAP) && a.size != PAGE {
            return Err(Errno::INVAL);
        }
        let size = page_align(a.size).ok_or(Errno::INVAL)?;
        let usize_ok = usize::try_from(size).is_ok();
        if !usize_ok {
            return Err(Errno::NOMEM);
        }
        let mut vram_charge = (0, 0);
        let mut system_charge = 0;
        let mem = if f.contains(AllocFlags::VRAM) {
            if st.pdds[idx].vram_used.saturating_add(size) > gpu.preset.vram_size {
                return Err(Errno::NOMEM);
            }
            // Checked: a size near 2^64 (found by the kfd_ioctl fuzz target) must be ENOMEM,
            // as amdgpu_amdkfd_reserve_mem_limit answers, not an overflow.
            let aligned = size
                .div_ceil(VRAM_AVAILABILITY_ALIGN)
                .checked_mul(VRAM_AVAILABILITY_ALIGN)
                .ok_or(Errno::NOMEM)?;
            vram_charge = (size, aligned);
            Self::pages_at(&mut st, idx, gpu.gpu_id, a.va_addr, size, flags)?
        } else if f.contains(AllocFlags::GTT) {
            if st.system_used.saturating_add(size) > self.system_limit {
                return Err(Errno::NOMEM);
            }
            system_charge = size;
            Self::pages_at(&mut st, idx, gpu.gpu_id, a.va_addr, size, flags)?
        } else if f.contains(AllocFlags::USERPTR) {
            let addr = a.mmap_offset;
            if addr == 0 || addr % PAGE != 0 {
                return Err(Errno::INVAL);
            }
            if st.system_used.saturating_add(size) > self.system_limit {
                return Err(Errno::NOMEM);
            }
            // get_user_pages for a writable userptr BO needs readable, writable pages.
            check_user_range(addr, size)?;
            if !user_range_rw(addr, size) {
                return Err(Errno::FAULT);
            }
            system_charge = size;
            BoMem::User(Arc::new(UserRange { addr, len: size }))
        } else if f.contains(AllocFlags::DOORBELL) {
            BoMem::Pages(gpu.doorbell.clone())
        } else if f.contains(AllocFlags::MMIO_REMAP) {
            BoMem::Pages(gpu.mmio.clone())
        } else {
            return Err(Errno::INVAL);
        };
        st.pdds[idx].vram_used += vram_charge.0;
        st.pdds[idx].vram_used_aligned += vram_charge.1;
        st.system_used += system_charge;
        let bo = Bo {
            gpu_idx: idx,
            va: a.va_addr,
            size,
            flags,
            mem,
            drm_offset: 0,
            mapped: BTreeSet::new(),
            vram_charge,
            system_charge,
            private_pages: f.intersects(AllocFlags::VRAM | AllocFlags::GTT),
        };
        let (handle, drm_offset) = Self::insert_bo(&mut st, gpu.gpu_id, bo);
        a.handle = handle;
        // MMIO is mapped through /dev/kfd (kfd_ioctl_alloc_memory_of_gpu).
        a.mmap_offset = if f.contains(AllocFlags::MMIO_REMAP) {
            abi::KFD_MMAP_TYPE_MMIO | abi::kfd_mmap_gpu_id(gpu.gpu_id)
        } else {
            drm_offset
        };
        Ok(())
    }

    /// Find a BO by handle the way the kernel does: the pdd of the handle's gpu_id, then
    /// the idr id. `Err(true)` = unknown GPU, `Err(false)` = unknown id.
    fn find_bo(&self, st: &Proc, handle: u64) -> Result<(), bool> {
        let gpu_id = (handle >> 32) as u32;
        self.gpu_idx(gpu_id).ok_or(true)?;
        if st.bos.contains_key(&handle) {
            Ok(())
        } else {
            Err(false)
        }
    }

    pub(crate) fn free_memory(&self, handle: u64) -> Result<(), Errno> {
        let mut st = self.lock();
        if self.events.signal_handle() == Some(handle) {
            return Err(Errno::PERM);
        }
        self.find_bo(&st, handle).map_err(|_| Errno::INVAL)?;
        let bo = st.bos.get(&handle).ok_or(Errno::INVAL)?;
        if !bo.mapped.is_empty() {
            return Err(Errno::BUSY);
        }
        let Some(bo) = st.bos.remove(&handle) else {
            return Err(Errno::INVAL);
        };
        let pdd = &mut st.pdds[bo.gpu_idx];
        pdd.bo_ids.remove(&(handle as u32));
        pdd.vram_used = pdd.vram_used.saturating_sub(bo.vram_charge.0);
        pdd.vram_used_aligned = pdd.vram_used_aligned.saturating_sub(bo.vram_charge.1);
        st.system_used = st.system_used.saturating_sub(bo.system_charge);
        st.drm_offsets.remove(&bo.drm_offset);
        // An engine that used the BO may still hold a window of it (translations are let
        // go lazily after the unmap): have the engines let go first, so the memfd can be
        // recycled now. Only then: the wait is a round trip to every running engine, made
        // without the process lock (the BO is already out of the process's tables), so
        // the process's other ioctls do not stall behind it.
        if let BoMem::Pages(b) = &bo.mem {
            if bo.private_pages && Arc::strong_count(b) > 1 {
                drop(st);
                for g in &self.gpus {
                    g.engines.release_windows();
                }
                st = self.lock();
            }
        }
        Self::recycle(&mut st, bo);
        Ok(())
    }

    /// Keep a freed BO's memfd for a later BO at the same GPU VA, its pages given back now
    /// (hole punched: the memory is free again and reads as zeros). Only a memfd nothing
    /// else holds: never exported, no engine window left (`Arc` unique). Saves the memfd's
    /// creation, sizing and alias mapping at the next ALLOC, and its unmapping and close
    /// here (a stream-ordered pool with release threshold 0 frees and re-allocates its
    /// slab at every synchronize).
    fn recycle(st: &mut Proc, bo: Bo) {
        let BoMem::Pages(backing) = bo.mem else {
            return;
        };
        if !bo.private_pages || Arc::strong_count(&backing) != 1 || backing.len() as u64 != bo.size
        {
            return;
        }
        if backing.punch_all().is_err() {
            return;
        }
        if st.recycled.len() == RECYCLE_SLOTS {
            st.recycled.remove(0);
        }
        st.recycled.push(Recycled {
            gpu_idx: bo.gpu_idx,
            va: bo.va,
            size: bo.size,
            flags: bo.flags,
            backing,
        });
    }

    /// The pages of a new VRAM or GTT BO: a recycled memfd kept for this VA, size and
    /// flags, else a new one.
    fn pages_at(
        st: &mut Proc,
        idx: usize,
        gpu_id: u32,
        va: u64,
        size: u64,
        flags: u32,
    ) -> Result<BoMem, Errno> {
        let backing = match Self::take_recycled(st, idx, va, size, flags) {
            Some(b) => b,
            None => Arc::new(Backing::new_unsealed(&memfd_name(gpu_id, flags), size)?),
        };
        Ok(BoMem::Pages(backing))
    }

    /// A recycled memfd for a new BO of `size` bytes with `flags` at `va` on GPU `idx`.
    fn take_recycled(
        st: &mut Proc,
        idx: usize,
        va: u64,
        size: u64,
        flags: u32,
    ) -> Option<Arc<Backing>> {
        let i = st
            .recycled
            .iter()
            .rposition(|r| r.gpu_idx == idx && r.va == va && r.size == size && r.flags == flags)?;
        Some(st.recycled.swap_remove(i).backing)
    }

    /// The argument checks and the per-GPU loop that AMDKFD_IOC_MAP_MEMORY_TO_GPU and
    /// AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU share (kfd_ioctl_{map,unmap}_memory_{to,from}_gpu):
    /// `n_success` resumes a partly done call and counts the GPUs done. `bind` makes the
    /// BO's own GPU and every peer need an acquired VM (map only).
    pub(crate) fn for_each_peer(
        &self,
        handle: u64,
        (n_devices, n_success): (u32, &mut u32),
        gpu_ids: &[u32],
        bind: bool,
        op: fn(&Self, &mut Proc, u64, usize) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        if n_devices == 0 || *n_success > n_devices {
            return Err(Errno::INVAL);
        }
        if gpu_ids.len() < n_devices as usize {
            return Err(Errno::FAULT);
        }
        let mut st = self.lock();
        let own = self.gpu_idx((handle >> 32) as u32).ok_or(Errno::INVAL)?;
        if bind {
            Self::bind(&st, own)?;
        }
        if !st.bos.contains_key(&handle) {
            return Err(Errno::NOMEM);
        }
        for i in *n_success..n_devices {
            let peer = self.gpu_idx(gpu_ids[i as usize]).ok_or(Errno::INVAL)?;
            if bind {
                Self::bind(&st, peer)?;
            }
            op(self, &mut st, handle, peer)?;
            *n_success = i + 1;
        }
        Ok(())
    }

    /// AMDKFD_IOC_MAP_MEMORY_TO_GPU on one GPU (`for_each_peer` with `bind`): a GPU where
    /// the BO is mapped already is skipped.
    pub(crate) fn map_on(&self, st: &mut Proc, handle: u64, peer: usize) -> Result<(), Errno> {
        let bo = st.bos.get(&handle).ok_or(Errno::NOMEM)?;
        if bo.mapped.contains(&peer) {
            return Ok(());
        }
        let end = bo.va.checked_add(bo.size).ok_or(Errno::INVAL)?;
        if bo.va % PAGE != 0 || bo.va < GPUVM_BASE || end > GPUVM_END {
            return Err(Errno::INVAL);
        }
        if let BoMem::User(u) = &bo.mem {
            check_user_range(u.addr, u.len)?;
            if !user_range_rw(u.addr, u.len) {
                return Err(Errno::FAULT);
            }
        }
        let entry = VmEntry {
            start: bo.va,
            end,
            window: bo.window(),
            owner: VmOwner::Bo(handle),
        };
        self.vm.insert(peer, entry)?;
        let bo = st.bos.get_mut(&handle).ok_or(Errno::NOMEM)?;
        bo.mapped.insert(peer);
        Ok(())
    }

    /// AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU on one GPU (`for_each_peer` without `bind`).
    pub(crate) fn unmap_on(&self, st: &mut Proc, handle: u64, peer: usize) -> Result<(), Errno> {
        let bo = st.bos.get(&handle).ok_or(Errno::NOMEM)?;
        // amdgpu_amdkfd_gpuvm_unmap_memory_from_gpu: no VM where the BO is mapped
        // ("the BO wasn't actually mapped") is EINVAL.
        if !bo.mapped.contains(&peer) {
            return Err(Errno::INVAL);
        }
        if Self::queue_uses(st, peer, bo.va, bo.size) {
            return Err(Errno::BUSY);
        }
        self.vm.remove_bo(peer, handle, bo.va);
        self.gpus[peer].engines.flush_tlb();
        if let Some(bo) = st.bos.get_mut(&handle) {
            bo.mapped.remove(&peer);
        }
        Ok(())
    }

    /// `Backend::mmap` for the emulator.
    ///
    /// # Safety
    /// As `Backend::mmap`.
    pub(crate) unsafe fn mmap(
        &self,
        file: MmapFile<'_>,
        offset: u64,
        len: usize,
        fixed: Option<NonNull<c_void>>,
        prot: Prot,
    ) -> Result<NonNull<c_void>, Errno> {
        let pf = prot.to_mmap();
        if let Some(a) = fixed {
            if a.as_ptr() as u64 % PAGE != 0 {
                return Err(Errno::INVAL);
            }
        }
        let backing = match file {
            MmapFile::Render(fd) => self.render_mmap_target(fd, offset, len, fixed)?,
            MmapFile::Kfd => self.kfd_mmap_target(offset, len)?,
        };
        // SAFETY: forwarded from the caller's contract.
        let p = unsafe { backing.map_for_app(len, fixed, pf) }?;
        if matches!(file, MmapFile::Kfd)
            && offset & abi::KFD_MMAP_TYPE_MASK == abi::KFD_MMAP_TYPE_EVENTS
        {
            self.events
                .set_mapped_size(page_align(len as u64).unwrap_or(0));
        }
        Ok(p)
    }

    fn render_mmap_target(
        &self,
        fd: BorrowedFd<'_>,
        offset: u64,
        len: usize,
        fixed: Option<NonNull<c_void>>,
    ) -> Result<Arc<Backing>, Errno> {
        use std::os::fd::AsRawFd;
        let file = file_id(fd.as_raw_fd())?;
        let mut st = self.lock();
        let node = st.render_node(file)?;
        // drm_gem_mmap: exact offset lookup, else EINVAL.
        let handle = *st.drm_offsets.get(&offset).ok_or(Errno::INVAL)?;
        let vm = st.pdds.get(node.gpu_idx).and_then(|p| p.vm);
        let bo = st.bos.get_mut(&handle).ok_or(Errno::INVAL)?;
        // drm_vma_node_is_allowed: only the DRM file that owns the BO (the render node
        // whose VM was acquired for the BO's GPU) may map it.
        if node.gpu_idx != bo.gpu_idx || vm != Some(file) {
            return Err(Errno::ACCESS);
        }
        if len as u64 > bo.size {
            return Err(Errno::INVAL);
        }
        // A CPU mapping anywhere but the BO's VA outlives FREE and would alias the next BO
        // given this memfd at that VA: such a BO's memfd is not recycled.
        if fixed.map(|a| a.as_ptr() as u64) != Some(bo.va) {
            bo.private_pages = false;
        }
        // amdgpu_gem_object_mmap refuses userptr BOs and BOs created with
        // AMDGPU_GEM_CREATE_NO_CPU_ACCESS (EPERM). KFD never sets NO_CPU_ACCESS: a VRAM BO
        // without KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC gets 0 instead of CPU_ACCESS_REQUIRED
        // (amdgpu_amdkfd_gpuvm.c `amdgpu_amdkfd_gpuvm_alloc_memory_of_gpu`), and libhsakmt
        // mmaps every VRAM BO, PROT_NONE/MAP_PRIVATE when it has no host access (fmm.c
        // `fmm_allocate_device`; amdgpu_gem.c keeps a workaround for exactly that mapping).
        match &bo.mem {
            BoMem::Pages(b) => Ok(b.clone()),
            BoMem::User(_) => Err(Errno::PERM),
        }
    }

    fn kfd_mmap_target(&self, offset: u64, len: usize) -> Result<Arc<Backing>, Errno> {
        let gpu_id = abi::kfd_mmap_get_gpu_id(offset);
        let gpu = self.gpu_idx(gpu_id).map(|i| &self.gpus[i]);
        match offset & abi::KFD_MMAP_TYPE_MASK {
            abi::KFD_MMAP_TYPE_DOORBELL => {
                let g = gpu.ok_or(Errno::NODEV)?;
                if len as u64 != DOORBELL_SLICE {
                    return Err(Errno::INVAL);
                }
                Ok(g.doorbell.clone())
            }
            abi::KFD_MMAP_TYPE_EVENTS => {
                let limit = u64::from(abi::KFD_SIGNAL_EVENT_LIMIT) * 8;
                if len == 0 || page_align(len as u64).is_none_or(|l| l > limit) {
                    return Err(Errno::INVAL);
                }
                self.events.page().ok_or(Errno::INVAL)
            }
            abi::KFD_MMAP_TYPE_MMIO => {
                let g = gpu.ok_or(Errno::NODEV)?;
                if len as u64 != PAGE {
                    return Err(Errno::INVAL);
                }
                Ok(g.mmio.clone())
            }
            _ => {
                gpu.ok_or(Errno::NODEV)?;
                // The CWSR trap-handler pages (APUs only) are not modelled.
                Err(Errno::INVAL)
            }
        }
    }

    pub(crate) fn export_dmabuf(&self, a: &mut abi::ExportDmabufArgs) -> Result<(), Errno> {
        self.gpu_idx((a.handle >> 32) as u32).ok_or(Errno::INVAL)?;
        let mut st = self.lock();
        let bo = st.bos.get(&a.handle).ok_or(Errno::INVAL)?;
        let BoMem::Pages(b) = &bo.mem else {
            // amdgpu_gem_prime_export refuses userptr BOs.
            return Err(Errno::PERM);
        };
        // BO memfds are sealed on their first export, before any other process can
        // hold them (Backing::new_unsealed).
        b.seal()?;
        let b = b.clone();
        if let Some(bo) = st.bos.get_mut(&a.handle) {
            bo.private_pages = false;
        }
        const O_CLOEXEC: u32 = 0o2000000;
        let fd = if a.flags & O_CLOEXEC != 0 {
            rustix::io::fcntl_dupfd_cloexec(b.fd(), 0)?
        } else {
            rustix::io::dup(b.fd())?
        };
        a.dmabuf_fd = fd.into_raw_fd() as u32;
        Ok(())
    }

    /// The memfd behind a dmabuf fd number: EBADF when not open (dma_buf_get), EINVAL when
    /// not a buffer exported by an emulated GPU.
    fn dmabuf_backing(fd: u32) -> Result<(Backing, Option<(u32, u32)>), Errno> {
        let raw = fd as i32;
        file_id(raw)?;
        // SAFETY: file_id just proved the number is an open fd; it is only dup'ed.
        let borrowed = unsafe { BorrowedFd::borrow_raw(raw) };
        let owned = rustix::io::fcntl_dupfd_cloexec(borrowed, 0).map_err(|_| Errno::BADF)?;
        let name = crate::kfd::hostmem::memfd_name(owned.as_fd());
        let backing = Backing::import(owned)?;
        Ok((backing, name.as_deref().and_then(parse_memfd_name)))
    }

    pub(crate) fn get_dmabuf_info(&self, a: &mut abi::GetDmabufInfoArgs) -> Result<(), Errno> {
        let first = self.gpus.first().ok_or(Errno::INVAL)?;
        let (backing, info) = Self::dmabuf_backing(a.dmabuf_fd)?;
        a.size = backing.len() as u64;
        let (gpu_id, flags) = info.unwrap_or((first.gpu_id, abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT));
        a.gpu_id = if self.gpu_idx(gpu_id).is_some() {
            gpu_id
        } else {
            first.gpu_id
        };
        a.flags = flags;
        a.metadata_size = 0;
        Ok(())
    }

    pub(crate) fn import_dmabuf(&self, a: &mut abi::ImportDmabufArgs) -> Result<(), Errno> {
        let idx = self.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
        let mut st = self.lock();
        Self::bind(&st, idx)?;
        let (backing, info) = Self::dmabuf_backing(a.dmabuf_fd)?;
        let domain = info
            .map(|(_, f)| f & abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM)
            .unwrap_or(0);
        let domain = if domain != 0 {
            abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        } else {
            abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT
        };
        // import_obj_create: imported BOs are writable and executable; they are not
        // charged to the importer.
        let flags = domain
            | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
            | abi::KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE;
        let size = backing.len() as u64;
        let bo = Bo {
            gpu_idx: idx,
            va: a.va_addr,
            size,
            flags,
            mem: BoMem::Pages(Arc::new(backing)),
            drm_offset: 0,
            mapped: BTreeSet::new(),
            vram_charge: (0, 0),
            system_charge: 0,
            private_pages: false,
        };
        (a.handle, _) = Self::insert_bo(&mut st, a.gpu_id, bo);
        Ok(())
    }

    /// True when `[start, start+len)` shares a page with a BO mapped on some GPU
    /// (`svm_range_check_vm`, used by SVM SET_ATTR/GET_ATTR).
    pub(crate) fn bo_overlaps(st: &Proc, start: u64, len: u64) -> bool {
        st.bos
            .values()
            .any(|b| !b.mapped.is_empty() && pages_overlap(b.va, b.size, start, len))
    }
}
