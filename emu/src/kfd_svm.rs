//! Shared virtual memory (`AMDKFD_IOC_SVM`): a page-granular range tree with split and
//! merge, every attribute, GET_ATTR's intersection rules, PREFETCH_LOC migration with VRAM
//! capacity accounting, and the GPU mappings the engines resolve.
//!
//! Memory model: an SVM range is the application's own memory at its own address. Data
//! never moves: VRAM residency after a prefetch is accounting (it counts against the GPU's
//! VRAM capacity and AVAILABLE_MEMORY, as the kernel's SVM BOs do), and the engines always
//! reach the bytes through a window at the range's address, so every byte survives any
//! sequence of migrations. Kernel rules are listed, with their sources, in
//! `firmware-notes/kfd-svm.md`.

use std::collections::BTreeMap;
use std::sync::Arc;

use kfd::abi::{self, SvmAttribute};
use rustix::io::Errno;

use crate::gpumem::MemWindow;
use crate::kfd_hostmem::{check_user_range, user_range_rw, UserRange, PAGE};
use crate::kfd_memory::{VmEntry, VmOwner};
use crate::kfd_process::{Emu, Proc};

/// `svm_default_granularity`: 2^9 pages (2 MiB).
pub const DEFAULT_GRANULARITY: u8 = 9;
/// Flags of a new range (`svm_range_set_default_attributes`).
pub const DEFAULT_FLAGS: u32 =
    abi::KFD_IOCTL_SVM_FLAG_HOST_ACCESS | abi::KFD_IOCTL_SVM_FLAG_COHERENT;

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
            tail.last = r.last;
            if let Some(head) = self.ranges.get_mut(&start) {
                head.last = p - 1;
            }
            self.ranges.insert(p, tail);
        }
    }

    /// Merge neighbours with identical attributes and residency.
    fn merge(&mut self) {
        let mut out = BTreeMap::new();
        let mut cur: Option<(u64, Range)> = None;
        for (s, r) in std::mem::take(&mut self.ranges) {
            if let Some((_, cr)) = &mut cur {
                let mut grown = cr.clone();
                grown.last = r.last;
                if cr.last + 1 == s && grown == r {
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
                },
            );
        }
        // svm_range_apply_attrs, then svm_range_trigger_migration for each range.
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
            self.svm_migrate(&mut st, k, &mut r, xnack);
            st.svm.ranges.insert(k, r);
        }
        st.svm.merge();
        self.refresh_svm_windows(&st);
        Ok(())
    }

    /// `svm_range_best_prefetch_location` + `svm_range_trigger_migration`. A migration to
    /// VRAM that does not fit leaves the range where it is and is not an error.
    fn svm_migrate(&self, st: &mut Proc, start: u64, r: &mut Range, xnack: bool) {
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
        if best != 0 {
            let Some(to) = self.gpu_idx(best) else { return };
            let cap = self.gpus[to].preset.vram_size;
            if st.pdds[to].vram_used.saturating_add(bytes) > cap {
                return;
            }
            st.pdds[to].vram_used += bytes;
            st.pdds[to].vram_used_aligned += bytes;
        }
        if let Some(from) = self.gpu_idx(r.actual_loc) {
            st.pdds[from].vram_used = st.pdds[from].vram_used.saturating_sub(bytes);
            st.pdds[from].vram_used_aligned = st.pdds[from].vram_used_aligned.saturating_sub(bytes);
        }
        r.actual_loc = best;
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
                // Only memory the CPU has readable and writable now gets a GPU window.
                .filter(|(s, r)| user_range_rw(*s << 12, (r.last - *s + 1) << 12))
                .map(|(s, r)| {
                    let start = s << 12;
                    let len = (r.last - s + 1) << 12;
                    let writable = r.flags & abi::KFD_IOCTL_SVM_FLAG_GPU_RO == 0;
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
                if get_pref {
                    if r.preferred_loc == abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
                        || (location != abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
                            && location != r.preferred_loc)
                    {
                        location = abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED;
                        get_pref = false;
                    } else {
                        location = r.preferred_loc;
                    }
                }
                if get_prefetch {
                    if r.prefetch_loc == abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
                        || (prefetch != abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
                            && prefetch != r.prefetch_loc)
                    {
                        prefetch = abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED;
                        get_prefetch = false;
                    } else {
                        prefetch = r.prefetch_loc;
                    }
                }
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
