//! Shared virtual memory (`AMDKFD_IOC_SVM`): a page-granular range tree with split and
//! merge, every attribute, GET_ATTR's intersection rules, PREFETCH_LOC migration with VRAM
//! capacity accounting, and the GPU mappings the engines resolve.
//!
//! Memory model: an SVM range in system memory is the application's own memory at its own
//! address, reached by the engines through a window at that address. A PREFETCH_LOC to a
//! GPU moves the bytes into emulated VRAM (`svm_migrate_ram_to_vram`): a memfd charged to
//! the GPU's VRAM capacity, filled with a copy of the range and mapped MAP_SHARED|MAP_FIXED
//! over the application's pages, so the CPU keeps the same bytes at the same address (large
//! BAR VRAM behind HMM) and the engines reach them through the emulator's alias of the memfd.
//! Back to system memory (`svm_migrate_vram_to_ram`) the bytes are copied into fresh
//! anonymous memory that is moved into place with mremap. Kernel rules are listed, with
//! their sources, in `firmware-notes/kfd-svm.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kfd::abi::{self, SvmAttribute};
use rustix::io::Errno;

use crate::gpumem::MemWindow;
use crate::kfd::hostmem::{check_user_range, maps_cover, user_range_rw, Backing, UserRange, PAGE};
use crate::kfd::memory::{VmEntry, VmOwner};
use crate::kfd::process::{Emu, Proc};

/// `svm_default_granularity`: 2^9 pages (2 MiB).
pub const DEFAULT_GRANULARITY: u8 = 9;
/// Flags of a new range (`svm_range_set_default_attributes`).
pub const DEFAULT_FLAGS: u32 =
    abi::KFD_IOCTL_SVM_FLAG_HOST_ACCESS | abi::KFD_IOCTL_SVM_FLAG_COHERENT;

/// Name of the memfds behind VRAM-resident SVM ranges (not importable as a dmabuf).
const VRAM_MEMFD_PREFIX: &str = "kfd-emu-svm-vram";

/// The emulated VRAM holding a VRAM-resident range: its bytes start at `offset` in
/// `backing` (the pieces of a split range share one memfd).
#[derive(Debug, Clone)]
pub(crate) struct VramPages {
    backing: Arc<Backing>,
    offset: u64,
}

impl PartialEq for VramPages {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.backing, &other.backing) && self.offset == other.offset
    }
}
impl Eq for VramPages {}

/// One SVM range: pages `[start, last]` (the map key is `start`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Range {
    last: u64,
    preferred_loc: u32,
    prefetch_loc: u32,
    /// 0 = system memory, else the gpu_id whose VRAM holds the range.
    actual_loc: u32,
    flags: u32,
    granularity: u8,
    /// GPU indices with ACCESS.
    access: u64,
    /// GPU indices with ACCESS_IN_PLACE.
    aip: u64,
    /// The VRAM holding the bytes while `actual_loc` is a GPU.
    vram: Option<VramPages>,
}

impl Range {
    /// True when `b` (starting at page `b_start`) continues `a` (starting at `a_start`)
    /// with the same attributes and residency, in the same VRAM pages when in VRAM.
    fn continued_by(&self, a_start: u64, b: &Range, b_start: u64) -> bool {
        if self.last + 1 != b_start {
            return false;
        }
        let mut x = self.clone();
        x.last = b.last;
        x.vram = None;
        let mut y = b.clone();
        y.vram = None;
        x == y
            && match (&self.vram, &b.vram) {
                (None, None) => true,
                (Some(p), Some(q)) => {
                    Arc::ptr_eq(&p.backing, &q.backing)
                        && q.offset == p.offset + (b_start - a_start) * PAGE
                }
                _ => false,
            }
    }
}

/// The process's SVM ranges, keyed by first page.
#[derive(Debug, Default)]
pub(crate) struct Svm {
    ranges: BTreeMap<u64, Range>,
}

impl Svm {
    /// True when any range shares a page with `[addr, addr+len)`.
    pub(crate) fn overlaps(&self, addr: u64, len: u64) -> bool {
        let first = addr >> 12;
        let last = addr.saturating_add(len.max(1) - 1) >> 12;
        self.ranges
            .range(..=last)
            .next_back()
            .is_some_and(|(_, r)| r.last >= first)
            || self.ranges.range(first..=last).next().is_some()
    }

    /// `kfd_queue_buffer_svm_get`: `[addr, addr+size)` is covered by consecutive ranges
    /// mapped on GPU `idx` with GPU_ALWAYS_MAPPED.
    pub(crate) fn queue_buffer_ok(&self, idx: usize, addr: u64, size: u64) -> bool {
        let bit = 1u64 << idx;
        let mut page = addr >> 12;
        let mut left = size >> 12;
        while left > 0 {
            let Some((_, r)) = self.ranges.range(..=page).next_back() else {
                return false;
            };
            if r.last < page
                || (r.access | r.aip) & bit == 0
                || r.flags & abi::KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED == 0
            {
                return false;
            }
            let n = r.last - page + 1;
            if n >= left {
                return true;
            }
            left -= n;
            page += n;
        }
        true
    }

    /// Split so that a range boundary falls before page `p`.
    fn split_at(&mut self, p: u64) {
        let Some((&start, r)) = self.ranges.range(..p).next_back() else {
            return;
        };
        if r.last >= p {
            let mut tail = r.clone();
            if let Some(v) = &mut tail.vram {
                v.offset += (p - start) * PAGE;
            }
            if let Some(head) = self.ranges.get_mut(&start) {
                head.last = p - 1;
            }
            self.ranges.insert(p, tail);
        }
    }

    /// Merge neighbours with identical attributes and residency (VRAM-resident neighbours
    /// only when they are consecutive pages of the same VRAM memfd).
    fn merge(&mut self) {
        let mut out = BTreeMap::new();
        let mut cur: Option<(u64, Range)> = None;
        for (s, r) in std::mem::take(&mut self.ranges) {
            if let Some((cs, cr)) = &mut cur {
                if cr.continued_by(*cs, &r, s) {
                    cr.last = r.last;
                    continue;
                }
            }
            if let Some((cs, cr)) = cur.take() {
                out.insert(cs, cr);
            }
            cur = Some((s, r));
        }
        if let Some((cs, cr)) = cur {
            out.insert(cs, cr);
        }
        self.ranges = out;
    }

    /// Number of ranges (tests and introspection).
    pub(crate) fn len(&self) -> usize {
        self.ranges.len()
    }

    /// Residency of the page holding `addr`: `Some(0)` system memory, `Some(gpu_id)` VRAM.
    pub(crate) fn location(&self, addr: u64) -> Option<u32> {
        let p = addr >> 12;
        let (_, r) = self.ranges.range(..=p).next_back()?;
        (r.last >= p).then_some(r.actual_loc)
    }
}

impl Emu {
    pub(crate) fn svm_ioctl(
        &self,
        args: &mut abi::SvmArgs,
        attrs: &mut [SvmAttribute],
    ) -> Result<(), Errno> {
        // kfd_ioctl_svm
        if args.start_addr % PAGE != 0
            || args.size % PAGE != 0
            || args.start_addr == 0
            || args.size == 0
        {
            return Err(Errno::INVAL);
        }
        if attrs.len() < args.nattr as usize {
            return Err(Errno::FAULT);
        }
        let attrs = &mut attrs[..args.nattr as usize];
        match args.op {
            abi::KFD_IOCTL_SVM_OP_SET_ATTR => self.svm_set_attr(args.start_addr, args.size, attrs),
            abi::KFD_IOCTL_SVM_OP_GET_ATTR => self.svm_get_attr(args.start_addr, args.size, attrs),
            _ => Err(Errno::INVAL),
        }
    }

    /// `svm_range_is_valid`: the range is backed by CPU mappings (EFAULT) and overlaps no
    /// GPU-mapped BO (EADDRINUSE).
    fn svm_valid(st: &Proc, start: u64, size: u64) -> Result<(), Errno> {
        check_user_range(start, size).map_err(|_| Errno::FAULT)?;
        if Emu::bo_overlaps(st, start, size) {
            return Err(Errno::ADDRINUSE);
        }
        Ok(())
    }

    fn svm_set_attr(&self, start: u64, size: u64, attrs: &[SvmAttribute]) -> Result<(), Errno> {
        // svm_range_check_attr
        for a in attrs {
            let gpu = match a.type_ {
                abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => {
                    a.value != abi::KFD_IOCTL_SVM_LOCATION_SYSMEM
                        && a.value != abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
                }
                abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => {
                    a.value != abi::KFD_IOCTL_SVM_LOCATION_SYSMEM
                }
                abi::KFD_IOCTL_SVM_ATTR_ACCESS
                | abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
                | abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS => true,
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS
                | abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS
                | abi::KFD_IOCTL_SVM_ATTR_GRANULARITY => false,
                _ => return Err(Errno::INVAL),
            };
            if gpu && self.gpu_idx(a.value).is_none() {
                return Err(Errno::INVAL);
            }
        }
        let mut st = self.lock();
        Self::svm_valid(&st, start, size)?;
        let first = start >> 12;
        let last = first + (size >> 12) - 1;
        let all_gpus: u64 = if self.gpus.len() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.gpus.len()) - 1
        };
        let xnack = st.xnack;
        // svm_range_add: split at the boundaries, create ranges for the gaps.
        st.svm.split_at(first);
        st.svm.split_at(last + 1);
        let mut p = first;
        let existing: Vec<(u64, u64)> = st
            .svm
            .ranges
            .range(first..=last)
            .map(|(s, r)| (*s, r.last))
            .collect();
        let mut gaps = Vec::new();
        for (s, l) in &existing {
            if *s > p {
                gaps.push((p, s - 1));
            }
            p = l + 1;
        }
        if p <= last {
            gaps.push((p, last));
        }
        for (s, l) in gaps {
            st.svm.ranges.insert(
                s,
                Range {
                    last: l,
                    preferred_loc: abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED,
                    prefetch_loc: abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED,
                    actual_loc: 0,
                    flags: DEFAULT_FLAGS,
                    granularity: DEFAULT_GRANULARITY,
                    access: if xnack { all_gpus } else { 0 },
                    aip: 0,
                    vram: None,
                },
            );
        }
        // svm_range_apply_attrs, then svm_range_trigger_migration for each range. The
        // engines are paused from the first migration that moves bytes until the new
        // mappings are in place (the kernel evicts the process's queues while it migrates:
        // svm_range_evict from the MMU notifier of migrate_vma_setup).
        let mut paused = false;
        let keys: Vec<u64> = st.svm.ranges.range(first..=last).map(|(s, _)| *s).collect();
        for k in keys {
            let Some(mut r) = st.svm.ranges.get(&k).cloned() else {
                continue;
            };
            for a in attrs {
                let bit = self.gpu_idx(a.value).map(|i| 1u64 << i).unwrap_or(0);
                match a.type_ {
                    abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => r.preferred_loc = a.value,
                    abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => r.prefetch_loc = a.value,
                    abi::KFD_IOCTL_SVM_ATTR_ACCESS => {
                        r.access |= bit;
                        r.aip &= !bit;
                    }
                    abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE => {
                        r.access &= !bit;
                        r.aip |= bit;
                    }
                    abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS => {
                        r.access &= !bit;
                        r.aip &= !bit;
                    }
                    abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS => r.flags |= a.value,
                    abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS => r.flags &= !a.value,
                    abi::KFD_IOCTL_SVM_ATTR_GRANULARITY => r.granularity = a.value.min(0x3f) as u8,
                    _ => {}
                }
            }
            self.svm_migrate(&mut st, k, &mut r, xnack, &mut paused);
            st.svm.ranges.insert(k, r);
        }
        st.svm.merge();
        self.refresh_svm_windows(&st);
        if paused {
            for g in &self.gpus {
                g.engines.resume();
            }
        }
        Ok(())
    }

    /// Stop every engine before the first byte of this SET_ATTR moves (see the caller).
    fn pause_for_migration(&self, paused: &mut bool) {
        if !*paused {
            for g in &self.gpus {
                g.engines.pause();
            }
            *paused = true;
        }
    }

    /// `svm_range_best_prefetch_location` + `svm_range_trigger_migration`. A migration to
    /// VRAM that does not fit, or that finds no anonymous read-write pages to move, leaves
    /// the range where it is and is not an error.
    fn svm_migrate(
        &self,
        st: &mut Proc,
        start: u64,
        r: &mut Range,
        xnack: bool,
        paused: &mut bool,
    ) {
        let mut best = r.prefetch_loc;
        if best != 0 && best != abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED {
            match self.gpu_idx(best) {
                None => best = 0,
                Some(bo_idx) => {
                    let users = if xnack { r.aip } else { r.access | r.aip };
                    // GPUs other than the target that use the range and are not in its
                    // XGMI hive (no hives are emulated) force system memory.
                    if users & !(1u64 << bo_idx) != 0 {
                        best = 0;
                    }
                }
            }
        }
        if best == abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED || (best == 0 && r.actual_loc == 0) {
            return;
        }
        let bytes = (r.last - start + 1) * PAGE;
        if best == r.actual_loc {
            return;
        }
        let addr = start << 12;
        if best != 0 {
            let Some(to) = self.gpu_idx(best) else { return };
            let cap = self.gpus[to].preset.vram_size;
            if st.pdds[to].vram_used.saturating_add(bytes) > cap {
                return;
            }
            let Some(pages) = self.move_to_vram(addr, bytes, r.vram.as_ref(), best, paused) else {
                return;
            };
            r.vram = Some(pages);
            st.pdds[to].vram_used += bytes;
            st.pdds[to].vram_used_aligned += bytes;
        } else if let Some(old) = &r.vram {
            if !self.move_to_ram(addr, bytes, old, paused) {
                return;
            }
            r.vram = None;
        }
        if let Some(from) = self.gpu_idx(r.actual_loc) {
            st.pdds[from].vram_used = st.pdds[from].vram_used.saturating_sub(bytes);
            st.pdds[from].vram_used_aligned = st.pdds[from].vram_used_aligned.saturating_sub(bytes);
        }
        r.actual_loc = best;
    }

    /// `svm_migrate_ram_to_vram` (and `svm_migrate_vram_to_vram`): copy `[addr, addr+len)`
    /// into a new VRAM memfd of GPU `gpu_id` and map it over the application's pages at the
    /// same address. `None` (nothing moved) when the pages are not anonymous read-write
    /// memory (only anonymous pages migrate: `migrate_vma_pages`) or, from VRAM, when the
    /// application no longer maps the range's VRAM there.
    fn move_to_vram(
        &self,
        addr: u64,
        len: u64,
        from: Option<&VramPages>,
        gpu_id: u32,
        paused: &mut bool,
    ) -> Option<VramPages> {
        let ok = match from {
            None => maps_cover(addr, len, |m| {
                m.perms.starts_with("rw")
                    && m.perms.as_bytes().get(3) == Some(&b'p')
                    && m.inode == 0
            }),
            Some(v) => maps_vram(addr, len, v),
        };
        let ulen = usize::try_from(len).ok()?;
        if !ok {
            return None;
        }
        self.pause_for_migration(paused);
        let backing = Backing::new(&format!("{VRAM_MEMFD_PREFIX} g={gpu_id:x}"), len).ok()?;
        // Allocate the VRAM pages up front (the kernel allocates the range's VRAM BO before
        // copying, svm_range_vram_node_new) rather than one page fault at a time; a kernel
        // without MADV_POPULATE_WRITE just faults them in during the copy.
        // SAFETY: the whole alias of the fresh memfd; populating writes no data.
        let _ = unsafe {
            rustix::mm::madvise(
                backing.ptr().as_ptr().cast(),
                ulen,
                rustix::mm::Advice::LinuxPopulateWrite,
            )
        };
        let src = match from {
            Some(v) => v
                .backing
                .ptr()
                .as_ptr()
                .wrapping_add(v.offset as usize)
                .cast_const(),
            None => addr as *const u8,
        };
        // SAFETY: the source is `len` bytes of readable memory: the application's anonymous
        // read-write pages (just checked in /proc/self/maps, under the process lock) or the
        // emulator's alias of the old VRAM; the destination is the new memfd's alias. They
        // do not overlap. A CPU thread writing the range while it migrates races with the
        // copy (the kernel would block it on the page lock), as documented in kfd-svm.md.
        unsafe { core::ptr::copy_nonoverlapping(src, backing.ptr().as_ptr(), ulen) };
        let fixed = core::ptr::NonNull::new(addr as *mut core::ffi::c_void)?;
        // SAFETY: `[addr, addr+len)` is the registered range's own memory (checked above):
        // replacing its pages with a shared mapping of the same bytes keeps every CPU
        // reference valid, as the kernel's migration to device pages does.
        let mapped = unsafe {
            backing.map_for_app(
                ulen,
                Some(fixed),
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            )
        };
        mapped.ok()?;
        if let Some(v) = from {
            release_vram(v, len);
        }
        Some(VramPages {
            backing: Arc::new(backing),
            offset: 0,
        })
    }

    /// `svm_migrate_vram_to_ram`: copy the range's VRAM into fresh anonymous memory and
    /// move that over `[addr, addr+len)` (mremap, so the CPU never sees a half-copied
    /// range), then free the VRAM pages. When the application no longer maps the range's
    /// VRAM at `addr` (it unmapped or replaced the memory) its mapping is left alone and
    /// only the VRAM is freed. False when the move failed (the range stays in VRAM).
    fn move_to_ram(&self, addr: u64, len: u64, from: &VramPages, paused: &mut bool) -> bool {
        let Ok(ulen) = usize::try_from(len) else {
            return false;
        };
        if !maps_vram(addr, len, from) {
            release_vram(from, len);
            return true;
        }
        self.pause_for_migration(paused);
        // SAFETY: a fresh private anonymous mapping where the kernel chooses, its pages
        // allocated up front (MAP_POPULATE) rather than one fault at a time.
        let tmp = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                ulen,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::POPULATE,
            )
        };
        let Ok(tmp) = tmp else {
            return false;
        };
        let src = from
            .backing
            .ptr()
            .as_ptr()
            .wrapping_add(from.offset as usize)
            .cast_const();
        // SAFETY: `src` is `len` bytes inside the old VRAM memfd's alias (the range's pages);
        // `tmp` is our fresh mapping of `len` bytes; they do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(src, tmp.cast::<u8>(), ulen) };
        // SAFETY: `tmp` is ours; `[addr, addr+len)` is the registered range's own mapping
        // of its VRAM (checked above), replaced atomically by the same bytes in anonymous
        // memory, as the kernel's migration back to system pages does.
        let moved = unsafe {
            rustix::mm::mremap_fixed(
                tmp,
                ulen,
                ulen,
                rustix::mm::MremapFlags::MAYMOVE,
                addr as *mut core::ffi::c_void,
            )
        };
        if moved.is_err() {
            // SAFETY: `tmp` is still our own mapping, referenced by nothing.
            let _ = unsafe { rustix::mm::munmap(tmp, ulen) };
            return false;
        }
        release_vram(from, len);
        true
    }

    /// Rebuild every GPU's SVM mappings from the range tree.
    pub(crate) fn refresh_svm_windows(&self, st: &Proc) {
        for (idx, _) in self.gpus.iter().enumerate() {
            let bit = 1u64 << idx;
            let entries = st
                .svm
                .ranges
                .iter()
                .filter(|(_, r)| (r.access | r.aip) & bit != 0)
                // System memory gets a GPU window only where the CPU has it readable and
                // writable now; VRAM is reached through the emulator's alias of its memfd.
                .filter(|(s, r)| {
                    r.vram.is_some() || user_range_rw(*s << 12, (r.last - *s + 1) << 12)
                })
                .map(|(s, r)| {
                    let start = s << 12;
                    let len = (r.last - s + 1) << 12;
                    let writable = r.flags & abi::KFD_IOCTL_SVM_FLAG_GPU_RO == 0;
                    if let Some(v) = &r.vram {
                        let ptr = core::ptr::NonNull::new(
                            v.backing.ptr().as_ptr().wrapping_add(v.offset as usize),
                        )
                        .unwrap_or(core::ptr::NonNull::dangling());
                        let owner = v.backing.clone();
                        // SAFETY: `[offset, offset+len)` lies inside the memfd (a range's
                        // pages never outgrow the memfd made for them); its alias stays
                        // mapped read-write while the window holds the Arc<Backing>.
                        let window =
                            unsafe { MemWindow::new(start, ptr, len as usize, writable, owner) };
                        return VmEntry {
                            start,
                            end: start + len,
                            window,
                            owner: VmOwner::Svm,
                        };
                    }
                    let owner = Arc::new(UserRange { addr: start, len });
                    let ptr = core::ptr::NonNull::new(start as *mut u8)
                        .unwrap_or(core::ptr::NonNull::dangling());
                    // SAFETY: an SVM range was checked to be mapped when registered; the
                    // application keeps it mapped while registered (the documented SVM
                    // contract of the emulator, kfd-svm.md).
                    let window =
                        unsafe { MemWindow::new(start, ptr, len as usize, writable, owner) };
                    VmEntry {
                        start,
                        end: start + len,
                        window,
                        owner: VmOwner::Svm,
                    }
                })
                .collect();
            self.vm.replace_svm(idx, entries);
            self.gpus[idx].engines.flush_tlb();
        }
    }

    fn svm_get_attr(&self, start: u64, size: u64, attrs: &mut [SvmAttribute]) -> Result<(), Errno> {
        let st = self.lock();
        Self::svm_valid(&st, start, size)?;
        let (mut get_pref, mut get_prefetch, mut get_access, mut get_flags, mut get_gran) =
            (false, false, false, false, false);
        for a in attrs.iter() {
            match a.type_ {
                abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => get_pref = true,
                abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => get_prefetch = true,
                abi::KFD_IOCTL_SVM_ATTR_ACCESS => get_access = true,
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS | abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS => {
                    get_flags = true
                }
                abi::KFD_IOCTL_SVM_ATTR_GRANULARITY => get_gran = true,
                _ => return Err(Errno::INVAL),
            }
        }
        let supported: u64 = if self.gpus.len() >= 64 {
            u64::MAX
        } else {
            (1u64 << self.gpus.len()) - 1
        };
        let first = start >> 12;
        let last = first + (size >> 12) - 1;
        let mut location = abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED;
        let mut prefetch = abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED;
        let mut granularity: u8 = 0xff;
        let (mut flags_and, mut flags_or) = (u32::MAX, 0u32);
        let (mut access, mut aip);
        let overlapping: Vec<&Range> = {
            let mut v: Vec<&Range> = Vec::new();
            if let Some((_, r)) = st.svm.ranges.range(..first).next_back() {
                if r.last >= first {
                    v.push(r);
                }
            }
            v.extend(st.svm.ranges.range(first..=last).map(|(_, r)| r));
            v
        };
        if overlapping.is_empty() {
            granularity = DEFAULT_GRANULARITY;
            flags_and = DEFAULT_FLAGS;
            flags_or = DEFAULT_FLAGS;
            access = if st.xnack { supported } else { 0 };
            aip = 0;
        } else {
            access = supported;
            aip = supported;
            for r in overlapping {
                merge_location(&mut location, &mut get_pref, r.preferred_loc);
                merge_location(&mut prefetch, &mut get_prefetch, r.prefetch_loc);
                if get_access {
                    access &= r.access;
                    aip &= r.aip;
                }
                if get_flags {
                    flags_and &= r.flags;
                    flags_or |= r.flags;
                }
                if get_gran && r.granularity < granularity {
                    granularity = r.granularity;
                }
            }
        }
        for a in attrs.iter_mut() {
            match a.type_ {
                abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC => a.value = location,
                abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC => a.value = prefetch,
                abi::KFD_IOCTL_SVM_ATTR_ACCESS => {
                    let idx = self.gpu_idx(a.value).ok_or(Errno::INVAL)?;
                    let bit = 1u64 << idx;
                    a.type_ = if access & bit != 0 {
                        abi::KFD_IOCTL_SVM_ATTR_ACCESS
                    } else if aip & bit != 0 {
                        abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
                    } else {
                        abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS
                    };
                }
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS => a.value = flags_and,
                abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS => a.value = !flags_or,
                abi::KFD_IOCTL_SVM_ATTR_GRANULARITY => a.value = u32::from(granularity),
                _ => {}
            }
        }
        Ok(())
    }
}

/// svm_range_get_attr: a location over several ranges is theirs when they all agree, else
/// UNDEFINED, after which `more` is cleared and the other ranges are not looked at.
fn merge_location(loc: &mut u32, more: &mut bool, range_loc: u32) {
    if !*more {
        return;
    }
    const UNDEFINED: u32 = abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED;
    if range_loc == UNDEFINED || (*loc != UNDEFINED && *loc != range_loc) {
        *loc = UNDEFINED;
        *more = false;
    } else {
        *loc = range_loc;
    }
}

/// Free the VRAM pages `[offset, offset+len)` of `v` (the range moved away; other pieces of
/// a split range keep theirs). The memfd itself goes with its last piece.
fn release_vram(v: &VramPages, len: u64) {
    // Punching a hole is allowed on a memfd sealed only against resizing; the alias keeps
    // reading zeros there, so a stale engine window can never fault.
    let _ = rustix::fs::fallocate(
        v.backing.fd(),
        rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
        v.offset,
        len,
    );
}

/// True when `[addr, addr+len)` is still the application's read-write shared mapping of
/// `v`'s VRAM pages, page for page (not unmapped or replaced since the migration).
fn maps_vram(addr: u64, len: u64, v: &VramPages) -> bool {
    let Ok(st) = rustix::fs::fstat(v.backing.fd()) else {
        return false;
    };
    maps_cover(addr, len, |m| {
        let at = m.lo.max(addr);
        m.perms.starts_with("rw")
            && m.perms.as_bytes().get(3) == Some(&b's')
            && m.inode == st.st_ino
            && m.path.starts_with(&format!("/memfd:{VRAM_MEMFD_PREFIX}"))
            && m.offset + (at - m.lo) == v.offset + (at - addr)
            && m.hi > at
    })
}
