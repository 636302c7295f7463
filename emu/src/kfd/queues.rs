//! User queues: CREATE/DESTROY/UPDATE_QUEUE, SET_CU_MASK, GET_QUEUE_WAVE_STATE, the
//! kernel >= 6.12 queue buffer checks (`kfd_queue_acquire_buffers`) and doorbells.
//!
//! Kernel rules modelled here are listed, with their sources, in
//! `firmware-notes/kfd-queues.md`.

use core::ptr::NonNull;

use kfd::abi;
use rustix::io::Errno;

use crate::engine::{QueueDesc, QueueKind};
use crate::gpumem::MemWindow;
use crate::kfd::hostmem::{access_ok, PAGE};
use crate::kfd::memory::VmOwner;
use crate::kfd::process::{Emu, Proc, DOORBELLS_PER_SLICE};

/// `-ENOTSUPP` (524): the kernel-internal errno CREATE_QUEUE returns for an unknown
/// queue type; it reaches user space as is.
pub const ENOTSUPP: i32 = 524;

/// The most queues one process may have on one GPU (`max_queues = 127` in
/// `pqm_create_queue`, the HWS limit).
pub const MAX_QUEUES_PER_DEVICE: u32 = 127;
/// Queue ids per process (`KFD_MAX_NUM_OF_QUEUES_PER_PROCESS`).
pub const MAX_QUEUES_PER_PROCESS: u32 = 1024;

/// A user queue as the emulated KFD keeps it.
#[derive(Debug, Clone)]
pub(crate) struct QueueState {
    pub(crate) gpu_idx: usize,
    pub(crate) queue_type: u32,
    pub(crate) ring_va: u64,
    pub(crate) ring_size: u32,
    pub(crate) percentage: u32,
    pub(crate) priority: u32,
    pub(crate) doorbell_slot: u32,
    /// (engine, slot) for SDMA queues.
    pub(crate) sdma: Option<(u32, u32)>,
    pub(crate) cu_mask: Vec<u32>,
    /// GPU mappings the queue holds references on ([start, end) of each).
    pub(crate) refs: Vec<(u64, u64)>,
}

impl QueueState {
    fn is_compute(&self) -> bool {
        matches!(
            self.queue_type,
            abi::KFD_IOC_QUEUE_TYPE_COMPUTE | abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
        )
    }
    fn is_active(&self) -> bool {
        self.ring_va != 0 && self.ring_size > 0 && self.percentage > 0
    }
}

impl Emu {
    /// True when a queue on GPU `idx` holds a reference on a mapping overlapping
    /// `[va, va+size)`.
    pub(crate) fn queue_uses(st: &Proc, idx: usize, va: u64, size: u64) -> bool {
        let end = va.saturating_add(size);
        st.queues
            .values()
            .filter(|q| q.gpu_idx == idx)
            .any(|q| q.refs.iter().any(|&(s, e)| s < end && va < e))
    }

    /// `kfd_queue_buffer_get`: `addr` must be in the first GPU page of a mapping on GPU
    /// `idx`, and when `size >> 12` is non-zero the mapping must be exactly that many
    /// pages. Returns the mapping's range.
    fn queue_buffer(&self, idx: usize, addr: u64, size: u64) -> Result<(u64, u64), Errno> {
        // Only BO mappings count (amdgpu_vm_bo_lookup_mapping); SVM ranges are checked
        // separately by `Svm::queue_buffer_ok`.
        let e = self
            .vm
            .lookup(idx, addr)
            .filter(|e| matches!(e.owner, VmOwner::Bo(_)))
            .ok_or(Errno::INVAL)?;
        let page = addr >> 12;
        let pages = size >> 12;
        let (first, last) = (e.start >> 12, (e.end - 1) >> 12);
        if page != first || (pages != 0 && page + pages - 1 != last) {
            return Err(Errno::INVAL);
        }
        Ok((e.start, e.end))
    }

    pub(crate) fn create_queue(&self, a: &mut abi::CreateQueueArgs) -> Result<(), Errno> {
        // set_queue_properties_from_user
        ring_properties(
            a.queue_percentage,
            a.queue_priority,
            a.ring_base_address,
            &mut a.ring_size,
        )?;
        // KFD 1.22: "Metadata ring size must be a power of 2 or 0".
        if a.metadata_ring_size != 0 && !a.metadata_ring_size.is_power_of_two() {
            return Err(Errno::INVAL);
        }
        if !access_ok(a.read_pointer_address, 4) || !access_ok(a.write_pointer_address, 4) {
            return Err(Errno::FAULT);
        }
        if a.eop_buffer_address != 0 && !access_ok(a.eop_buffer_address, 4) {
            return Err(Errno::FAULT);
        }
        if a.ctx_save_restore_address != 0 && !access_ok(a.ctx_save_restore_address, 4) {
            return Err(Errno::FAULT);
        }
        let qtype = a.queue_type;
        if qtype > abi::KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID {
            return Err(Errno::from_raw_os_error(ENOTSUPP));
        }
        let compute = matches!(
            qtype,
            abi::KFD_IOC_QUEUE_TYPE_COMPUTE | abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL
        );

        // kfd_ioctl_create_queue
        let idx = self.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
        let gpu = &self.gpus[idx];
        let p = &gpu.preset;
        let mut st = self.lock();
        Self::bind(&st, idx).map_err(|_| Errno::SRCH)?;
        if qtype == abi::KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID
            && a.sdma_engine_id >= p.num_sdma_engines + p.num_sdma_xgmi_engines
        {
            return Err(Errno::INVAL);
        }

        // kfd_queue_acquire_buffers
        let mut refs = Vec::new();
        refs.push(self.queue_buffer(idx, a.write_pointer_address, PAGE)?);
        refs.push(self.queue_buffer(idx, a.read_pointer_address, PAGE)?);
        // kfd_queue_acquire_buffers (1.22): an AQL queue's metadata ring follows its ring
        // in the same BO, so the BO must cover both.
        let metadata = if qtype == abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL {
            u64::from(a.metadata_ring_size)
        } else {
            0
        };
        refs.push(self.queue_buffer(
            idx,
            a.ring_base_address,
            u64::from(a.ring_size) + metadata,
        )?);
        if compute {
            let cwsr = gpu.cwsr.ok_or(Errno::INVAL)?;
            if a.eop_buffer_address != 0 {
                if a.eop_buffer_size != u64::from(cwsr.eop_buffer_size) {
                    return Err(Errno::INVAL);
                }
                refs.push(self.queue_buffer(idx, a.eop_buffer_address, a.eop_buffer_size)?);
            }
            if a.ctl_stack_size != cwsr.ctl_stack_size || a.ctx_save_restore_size < cwsr.cwsr_size {
                return Err(Errno::INVAL);
            }
            let total = cwsr.cwsr_bo_size(a.ctx_save_restore_size);
            match self.queue_buffer(idx, a.ctx_save_restore_address, total) {
                Ok(r) => refs.push(r),
                Err(e) => {
                    // kfd_queue_buffer_svm_get: an SVM range mapped on this GPU with
                    // GPU_ALWAYS_MAPPED may hold the CWSR area instead.
                    if !st
                        .svm
                        .queue_buffer_ok(idx, a.ctx_save_restore_address, total)
                    {
                        return Err(e);
                    }
                }
            }
        }

        // pqm_create_queue
        if st.pdds[idx].queue_count >= MAX_QUEUES_PER_DEVICE {
            return Err(Errno::NOSPC);
        }
        let qid = (0..MAX_QUEUES_PER_PROCESS)
            .find(|i| !st.queues.contains_key(i))
            .ok_or(Errno::NOMEM)?;
        let sdma = match qtype {
            abi::KFD_IOC_QUEUE_TYPE_SDMA => Some(Self::alloc_sdma(
                &st,
                idx,
                0,
                p.num_sdma_engines,
                p.num_sdma_queues_per_engine,
            )?),
            abi::KFD_IOC_QUEUE_TYPE_SDMA_XGMI => Some(Self::alloc_sdma(
                &st,
                idx,
                p.num_sdma_engines,
                p.num_sdma_xgmi_engines,
                p.num_sdma_queues_per_engine,
            )?),
            abi::KFD_IOC_QUEUE_TYPE_SDMA_BY_ENG_ID => Some(Self::alloc_sdma(
                &st,
                idx,
                a.sdma_engine_id,
                1,
                p.num_sdma_queues_per_engine,
            )?),
            _ => None,
        };
        let slot = (0..DOORBELLS_PER_SLICE)
            .find(|s| !st.pdds[idx].doorbells.contains(s))
            .ok_or(Errno::NOMEM)?;
        let kind = match (qtype, sdma) {
            (abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL, _) => QueueKind::Aql,
            (abi::KFD_IOC_QUEUE_TYPE_COMPUTE, _) => QueueKind::Pm4,
            (_, Some((engine, _))) => QueueKind::Sdma { engine },
            _ => return Err(Errno::INVAL),
        };
        let q = QueueState {
            gpu_idx: idx,
            queue_type: qtype,
            ring_va: a.ring_base_address,
            ring_size: a.ring_size,
            percentage: a.queue_percentage & 0xff,
            priority: a.queue_priority,
            doorbell_slot: slot,
            sdma,
            cu_mask: Vec::new(),
            refs,
        };
        let desc = QueueDesc {
            queue_id: qid,
            gpu_id: gpu.gpu_id,
            kind,
            ring_va: q.ring_va,
            ring_size: q.ring_size,
            rptr_va: a.read_pointer_address,
            wptr_va: a.write_pointer_address,
            doorbell: self.doorbell_window(idx, slot),
            priority: q.priority,
            percentage: if q.is_active() { q.percentage } else { 0 },
            eop_va: a.eop_buffer_address,
            ctx_save_va: a.ctx_save_restore_address,
        };
        st.pdds[idx].doorbells.insert(slot);
        st.pdds[idx].queue_count += 1;
        st.queues.insert(qid, q);
        gpu.engines.add_queue(desc);
        a.queue_id = qid;
        a.doorbell_offset =
            abi::KFD_MMAP_TYPE_DOORBELL | abi::kfd_mmap_gpu_id(gpu.gpu_id) | (u64::from(slot) * 8);
        Ok(())
    }

    /// Pick the first free SDMA queue slot on engines `first..first+count` of GPU `idx`,
    /// spreading queues over the engines like `allocate_sdma_queue`.
    fn alloc_sdma(
        st: &Proc,
        idx: usize,
        first: u32,
        count: u32,
        per_engine: u32,
    ) -> Result<(u32, u32), Errno> {
        if count == 0 {
            return Err(Errno::NOMEM);
        }
        let used = |e: u32, s: u32| {
            st.queues
                .values()
                .any(|q| q.gpu_idx == idx && q.sdma == Some((e, s)))
        };
        for s in 0..per_engine {
            for e in first..first + count {
                if !used(e, s) {
                    return Ok((e, s));
                }
            }
        }
        Err(Errno::NOMEM)
    }

    /// The 8-byte doorbell `slot` of GPU `idx`, in the emulator's alias of the slice.
    fn doorbell_window(&self, idx: usize, slot: u32) -> MemWindow {
        let db = &self.gpus[idx].doorbell;
        let off = u64::from(slot) * 8;
        let off = off.min(db.len() as u64 - 8);
        // SAFETY: `off + 8` is inside the alias mapping, which the window keeps alive.
        let ptr = unsafe { NonNull::new_unchecked(db.ptr().as_ptr().add(off as usize)) };
        // SAFETY: as above; the doorbell page is only accessed atomically or by copies.
        unsafe { MemWindow::new(off, ptr, 8, true, db.clone()) }
    }

    pub(crate) fn destroy_queue(&self, qid: u32) -> Result<(), Errno> {
        let mut st = self.lock();
        let q = st.queues.remove(&qid).ok_or(Errno::INVAL)?;
        self.gpus[q.gpu_idx].engines.remove_queue(qid);
        let pdd = &mut st.pdds[q.gpu_idx];
        pdd.doorbells.remove(&q.doorbell_slot);
        pdd.queue_count = pdd.queue_count.saturating_sub(1);
        Ok(())
    }

    pub(crate) fn update_queue(&self, a: &mut abi::UpdateQueueArgs) -> Result<(), Errno> {
        ring_properties(
            a.queue_percentage,
            a.queue_priority,
            a.ring_base_address,
            &mut a.ring_size,
        )?;
        let mut st = self.lock();
        let idx = st.queues.get(&a.queue_id).ok_or(Errno::FAULT)?.gpu_idx;
        // pqm_update_queue_properties: a new ring must be a GPU mapping of its size.
        let new_ring = if a.ring_base_address != 0 {
            Some(
                self.queue_buffer(idx, a.ring_base_address, u64::from(a.ring_size))
                    .map_err(|_| Errno::FAULT)?,
            )
        } else {
            None
        };
        let q = st.queues.get_mut(&a.queue_id).ok_or(Errno::FAULT)?;
        if let Some(r) = new_ring {
            // The ring reference is the third one taken at creation.
            if q.refs.len() > 2 {
                q.refs[2] = r;
            }
        }
        q.ring_va = a.ring_base_address;
        q.ring_size = a.ring_size;
        q.percentage = a.queue_percentage & 0xff;
        q.priority = a.queue_priority;
        let pct = if q.is_active() { q.percentage } else { 0 };
        self.gpus[idx]
            .engines
            .update_queue(a.queue_id, q.ring_va, q.ring_size, q.priority, pct);
        Ok(())
    }

    pub(crate) fn set_cu_mask(
        &self,
        a: &mut abi::SetCuMaskArgs,
        mask: &[u32],
    ) -> Result<(), Errno> {
        if a.num_cu_mask % 32 != 0 || a.num_cu_mask == 0 {
            return Err(Errno::INVAL);
        }
        // Masks longer than 1024 bits are truncated to 1024 bits.
        let words = (a.num_cu_mask.min(1024) / 32) as usize;
        if mask.len() < words {
            return Err(Errno::FAULT);
        }
        let mut st = self.lock();
        let q = st.queues.get_mut(&a.queue_id).ok_or(Errno::FAULT)?;
        q.cu_mask = mask[..words].to_vec();
        let idx = q.gpu_idx;
        self.gpus[idx]
            .engines
            .set_cu_mask(a.queue_id, &mask[..words]);
        Ok(())
    }

    pub(crate) fn get_queue_wave_state(
        &self,
        a: &mut abi::GetQueueWaveStateArgs,
    ) -> Result<(), Errno> {
        let st = self.lock();
        let q = st.queues.get(&a.queue_id).ok_or(Errno::FAULT)?;
        // get_wave_state: only inactive (unmapped) compute queues have saved state.
        if !q.is_compute() || q.is_active() {
            return Err(Errno::INVAL);
        }
        a.ctl_stack_used_size = 0;
        a.save_area_used_size = 0;
        Ok(())
    }

    /// Remove every queue from the engines (process teardown).
    pub(crate) fn destroy_all_queues(&self) {
        let mut st = self.lock();
        let ids: Vec<(u32, usize)> = st.queues.iter().map(|(id, q)| (*id, q.gpu_idx)).collect();
        for (id, idx) in ids {
            self.gpus[idx].engines.remove_queue(id);
        }
        st.queues.clear();
    }
}

/// The checks that set_queue_properties_from_user and kfd_ioctl_update_queue share; a ring
/// smaller than KFD_MIN_QUEUE_RING_SIZE is raised to it.
fn ring_properties(
    percentage: u32,
    priority: u32,
    ring_base_address: u64,
    ring_size: &mut u32,
) -> Result<(), Errno> {
    if percentage & 0xff > abi::KFD_MAX_QUEUE_PERCENTAGE {
        return Err(Errno::INVAL);
    }
    if priority > abi::KFD_MAX_QUEUE_PRIORITY {
        return Err(Errno::INVAL);
    }
    if ring_base_address != 0 && !access_ok(ring_base_address, 8) {
        return Err(Errno::FAULT);
    }
    if *ring_size != 0 && !ring_size.is_power_of_two() {
        return Err(Errno::INVAL);
    }
    *ring_size = (*ring_size).max(abi::KFD_MIN_QUEUE_RING_SIZE);
    Ok(())
}
