//! [`AqlQueue`]: a KFD AQL compute queue — a [`UserQueue`] whose write pointer counts
//! 64-byte packets, with its `amd_queue_t`, EOP and CWSR buffers, and a per-slot
//! indirect-buffer area for the PM4 commands of a command buffer (`cmdbuf::CmdBuf`),
//! carried in AMD vendor PM4-IB packets.
//!
//! Publishing a command buffer: reserve its packets in the ring, copy each command's PM4
//! words into its slot's IB area, write each packet body and release-store its header
//! (`ring::store_packet`), then the ring's publish (write_dispatch_id, doorbell, backend).
//! [`AqlQueue::submit_one`] is the same for one command without the buffer (the
//! single-command enqueue hot path: write-value, wait-value, a timeline wait).

use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use kfd::abi;
use pm4::aql::{AqlPacket, VendorPm4Ib, COMPLETION_SIGNAL_OFFSET, PACKET_DWORDS};

use crate::cmdbuf::{Cmd, CmdBuf, IB_DWORDS};
use crate::device::{DeviceCore, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::hsa;
use crate::memory::{Buffer, MemoryKind};
use crate::ring::{store_packet, UserQueue, WptrUnit};
use crate::sync::lock;

/// Default ring size in packets.
pub const DEFAULT_RING_PACKETS: u32 = 1024;
/// Bytes of PM4 indirect buffer reserved per ring slot.
pub const IB_BYTES_PER_SLOT: usize = IB_DWORDS * 4;

/// An AQL queue on one GPU.
pub struct AqlQueue {
    /// Declared first: the KFD queue is destroyed before the buffers it names.
    uq: UserQueue,
    gpu_index: usize,
    queue_id: u32,
    slots: u32,
    ib: Buffer,
    /// The PM4-IB packet every IB command is carried in, encoded once (patched per use).
    ib_template: [u32; 16],
    _eop: Option<Buffer>,
    _cwsr: Option<CwsrArea>,
    priority: u32,
    /// The queue's scratch (private segment) memory, grown by kernel launches.
    pub(crate) scratch: Mutex<crate::launch::QueueScratch>,
    /// The queue's kernarg ring, created with the first launch on the queue.
    pub(crate) kernargs: Mutex<Option<crate::launch::KernargRing>>,
}

impl std::fmt::Debug for AqlQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AqlQueue(id={} gpu={} slots={} prio={})",
            self.queue_id, self.gpu_index, self.slots, self.priority
        )
    }
}

impl AqlQueue {
    /// Create an AQL queue on GPU `gpu_index` with KFD priority `priority` (0..=15).
    pub(crate) fn new(
        dev: &Arc<DeviceInner>,
        gpu_index: usize,
        priority: u32,
        slots: u32,
    ) -> Result<AqlQueue> {
        let call = "AqlQueue::new";
        if !slots.is_power_of_two() || slots < 64 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("ring of {slots} packets"),
            ));
        }
        let core = &dev.core;
        let gpu = core.gpu(gpu_index)?;
        let ring_bytes = slots as usize * 64;
        let ring = Buffer::alloc(core, MemoryKind::HostPinned, gpu_index, ring_bytes)?;
        let amdq = Buffer::alloc(core, MemoryKind::Signal, gpu_index, 4096)?;
        let ib = Buffer::alloc(
            core,
            MemoryKind::HostPinned,
            gpu_index,
            slots as usize * IB_BYTES_PER_SLOT,
        )?;
        // Sizes as the kernel computes and checks them (kfd::cwsr). gfx94x AQL queues take
        // no EOP buffer (design.md; kfd_queue.c checks it only when given).
        let sizes = kfd::cwsr::queue_sizes(&gpu.node.properties).ok_or_else(|| {
            Error::new(
                ErrorKind::NotSupported,
                call,
                format!("GPU {:#x} has no CWSR sizes", gpu.gpu_id),
            )
        })?;
        let is_gfx94x = (90400..90500).contains(&gpu.node.properties.gfx_target_version);
        let eop = if is_gfx94x {
            None
        } else {
            Some(Buffer::alloc(
                core,
                MemoryKind::Device,
                gpu_index,
                sizes.eop_buffer_size as usize,
            )?)
        };
        let cwsr_len = sizes.cwsr_bo_size(sizes.cwsr_size) as usize;
        let cwsr = Some(CwsrArea::new(dev, gpu_index, cwsr_len)?);
        let (ctx_size, ctl_size) = (sizes.cwsr_size, sizes.ctl_stack_size);
        // Queue errors: every XCC's context save area header names this queue's error
        // payload and the device's error event (libhsakmt `fill_cwsr_header`).
        let payload_va = amdq.va() + crate::queue_error::PAYLOAD_OFFSET;
        let ev = match core.queue_error_event.get() {
            Some(&e) => e,
            None => {
                let (e, _, _) = crate::signal::create_signal_event(&dev.signals)?;
                // A racing creator may have won: keep one event, destroy the other.
                if core.queue_error_event.set(e).is_err() {
                    let _ = kfd::ioctl::destroy_event(core.backend.as_ref(), e);
                }
                core.queue_error_event.get().copied().unwrap_or(e)
            }
        };
        if let Some(c) = cwsr.as_ref() {
            for (off, h) in
                crate::queue_error::cwsr_headers(sizes.num_xcc, ctx_size as u64, payload_va, ev)
            {
                c.write(off as usize, zerocopy::IntoBytes::as_bytes(&h))?;
            }
        }

        // Ring slots start INVALID; amd_queue_t describes the ring.
        // SAFETY: the ring is `ring_bytes` of CPU-mapped memory owned by `ring`.
        let ring_words = unsafe {
            core::slice::from_raw_parts(ring.as_ptr() as *const AtomicU32, ring_bytes / 4)
        };
        pm4::aql::init_invalid(ring_words);
        let q = hsa::amd_queue(ring.va(), slots, gpu);
        amdq.write(0, zerocopy::IntoBytes::as_bytes(&q))?;

        let args = abi::CreateQueueArgs {
            queue_type: abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            queue_percentage: abi::KFD_MAX_QUEUE_PERCENTAGE,
            queue_priority: priority.min(abi::KFD_MAX_QUEUE_PRIORITY),
            eop_buffer_address: eop.as_ref().map_or(0, |b| b.va()),
            eop_buffer_size: eop.as_ref().map_or(0, |_| sizes.eop_buffer_size as u64),
            ctx_save_restore_address: cwsr.as_ref().map_or(0, |c| c.va()),
            ctx_save_restore_size: ctx_size,
            ctl_stack_size: ctl_size,
            ..Default::default()
        };
        let uq = UserQueue::create(
            core,
            gpu_index,
            WptrUnit::AqlPacket,
            ring,
            amdq,
            hsa::QUEUE_WRITE_DISPATCH_ID_OFFSET,
            hsa::QUEUE_READ_DISPATCH_ID_OFFSET,
            args,
            call,
        )?;
        let queue_id = uq.queue_id();
        core.queue_errors.add(gpu_index, queue_id, payload_va);
        Ok(AqlQueue {
            uq,
            gpu_index,
            queue_id,
            slots,
            ib,
            ib_template: AqlPacket::pm4_ib(0, 0, 0).encode(),
            _eop: eop,
            _cwsr: cwsr,
            priority,
            scratch: Mutex::new(Default::default()),
            kernargs: Mutex::new(None),
        })
    }

    /// KFD queue id.
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }
    /// GPU index.
    pub fn gpu_index(&self) -> usize {
        self.gpu_index
    }
    /// KFD priority.
    pub fn priority(&self) -> u32 {
        self.priority
    }

    /// GPU address of the queue's `amd_queue_t` (the kernel's queue pointer).
    pub fn amd_queue_va(&self) -> u64 {
        self.uq.ptrs().va()
    }

    /// `AMDKFD_IOC_UPDATE_QUEUE` with the queue's own ring, percentage and priority: the
    /// CP reloads the queue (and with it the `amd_queue_t` scratch fields).
    pub(crate) fn reload(&self) -> Result<()> {
        let mut a = abi::UpdateQueueArgs {
            ring_base_address: self.uq.ring().va(),
            queue_id: self.queue_id,
            ring_size: self.uq.ring().len() as u32,
            queue_percentage: abi::KFD_MAX_QUEUE_PERCENTAGE,
            queue_priority: self.priority.min(abi::KFD_MAX_QUEUE_PRIORITY),
        };
        kfd::ioctl::update_queue(self.core().backend.as_ref(), &mut a)
            .map_err(|e| Error::from_kfd("AqlQueue::reload", e))
    }

    /// Write bytes of the queue's `amd_queue_t` at `offset` (the scratch fields).
    pub(crate) fn write_amd_queue(&self, offset: usize, bytes: &[u8]) -> Result<()> {
        self.uq.ptrs().write(offset, bytes)
    }

    /// The GPU this queue runs on.
    pub(crate) fn gpu(&self) -> Result<&crate::Gpu> {
        self.core().gpu(self.gpu_index)
    }

    /// The device core (for allocations tied to the queue).
    pub(crate) fn core(&self) -> &Arc<DeviceCore> {
        self.uq.core()
    }

    /// Packets the CP has consumed.
    pub fn read_index(&self) -> u64 {
        self.uq.rptr()
    }

    /// Publish the commands of `bufs` in order, one packet each, every packet completing
    /// on `completion`. Waits for ring space watching `fault` (see
    /// [`UserQueue::reserve`]). Returns the number of packets published.
    pub(crate) fn submit(
        &self,
        bufs: &[&CmdBuf],
        completion: u64,
        fault: &dyn Fn() -> Option<String>,
    ) -> Result<u64> {
        let count: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        if count == 0 {
            return Ok(0);
        }
        let r = self.uq.reserve(count, fault)?;
        let mut idx = r.wptr();
        for c in bufs.iter().flat_map(|b| b.cmds()) {
            if !matches!(c, Cmd::Unused) {
                self.write_cmd(idx, c, completion);
                idx += 1;
            }
        }
        r.publish(idx);
        Ok(count)
    }

    /// Publish one command (the single-command enqueue hot path: no loop, no count):
    /// [`AqlQueue::submit`] of a buffer holding just `cmd`. Always inlined into its few
    /// callers: a call here cost the enqueue its prologue and epilogue (issue #12).
    #[inline(always)]
    pub(crate) fn submit_one(
        &self,
        cmd: &Cmd,
        completion: u64,
        fault: &dyn Fn() -> Option<String>,
    ) -> Result<()> {
        let r = self.uq.reserve(1, fault)?;
        let idx = r.wptr();
        self.write_cmd(idx, cmd, completion);
        r.publish(idx + 1);
        Ok(())
    }

    /// Write command `c` into ring slot `idx` (reserved) with its completion signal: the
    /// packet body, then its header with a release store; an IB command's PM4 words go to
    /// the slot's IB area first.
    #[inline(always)]
    fn write_cmd(&self, idx: u64, c: &Cmd, completion: u64) {
        let at = COMPLETION_SIGNAL_OFFSET / 4;
        let mut w = match c {
            Cmd::Unused => return,
            Cmd::Packet(w) => *w,
            Cmd::Ib {
                words,
                dwords,
                ib_reloc,
            } => {
                let ib_va = self.ib_area(idx, words, *ib_reloc);
                VendorPm4Ib::patch(&self.ib_template, ib_va, *dwords as u32, 0)
            }
        };
        w[at] = completion as u32;
        w[at + 1] = (completion >> 32) as u32;
        // `slots` is a power of two (checked in `new`) and the ring holds `slots` packets.
        let slot = (idx & (u64::from(self.slots) - 1)) as usize;
        // SAFETY: `slot < slots`, so the packet lies inside the ring (`slots * 64` bytes of
        // CPU-mapped memory owned by the queue, 64-byte aligned).
        let p = unsafe { self.uq.ring_base().add(slot * PACKET_DWORDS) };
        // SAFETY: the slot is reserved (consumed by the CP, which reads a slot's body only
        // after an acquire load of a valid header, and invalidated its header before
        // releasing the read pointer): nothing reads dwords 1..16 while they are written.
        // The header (dword 0) is published last with a release store.
        unsafe { store_packet(p, &w) };
    }

    /// Copy a command's PM4 words into the IB area of ring slot `idx` (applying its
    /// IB-relative address); returns the area's GPU address.
    #[inline(always)]
    fn ib_area(&self, idx: u64, words: &[u32; IB_DWORDS], reloc: Option<u8>) -> u64 {
        let slot = (idx & (u64::from(self.slots) - 1)) as usize;
        let ib_va = self.ib.va() + (slot * IB_DWORDS * 4) as u64;
        let relocated;
        let src = match reloc.map(usize::from).filter(|&at| at + 1 < IB_DWORDS) {
            None => words,
            Some(at) => {
                let mut w = *words;
                let a = (w[at] as u64 | (w[at + 1] as u64) << 32).wrapping_add(ib_va);
                w[at] = a as u32;
                w[at + 1] = (a >> 32) as u32;
                relocated = w;
                &relocated
            }
        };
        // SAFETY: the slot's IB area is CPU-mapped and owned by this queue; the CP reads it
        // only after the packet is published (the header's release store orders this copy
        // before), and the slot (so its area) was consumed before the ring space was
        // reserved, so nothing reads the area while it is written. All IB_DWORDS words: a
        // fixed-size copy (a few vector moves), and a relocated command may read data
        // after its commands.
        unsafe { core::ptr::copy_nonoverlapping(src.as_ptr(), ib_va as *mut u32, IB_DWORDS) };
        ib_va
    }

    /// Index of the next packet to be submitted.
    pub fn next_index(&self) -> u64 {
        self.uq.wptr()
    }
}

/// A queue's context save/restore (CWSR) area.
///
/// Where KFD allows it (SVM support on the GPU, KFD >= 1.11 for
/// `KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED`), it is pageable host memory registered as an
/// SVM range with GPU access and GPU_ALWAYS_MAPPED, as libhsakmt allocates it
/// (`queues.c`, `register_svm_range(..., alwaysMapped)`); `kfd_queue_buffer_svm_get`
/// accepts such a range for the CWSR area. Only the pages the firmware touches use
/// memory, instead of a pinned GTT buffer of the full size (~177 MiB per queue on an
/// MI300X). Otherwise it is a host-pinned buffer object. SVM areas are recycled through
/// the device (a range cannot be unregistered, only unmapped) and unmapped with it.
pub(crate) enum CwsrArea {
    Bo(Buffer),
    Svm {
        core: Arc<DeviceCore>,
        gpu_index: usize,
        addr: u64,
        len: usize,
    },
}

impl CwsrArea {
    fn new(dev: &Arc<DeviceInner>, gpu_index: usize, len: usize) -> Result<CwsrArea> {
        let core = &dev.core;
        let gpu = core.gpu(gpu_index)?;
        if !gpu.node.properties.svm_supported() || core.kfd_version.1 < 11 {
            let b = Buffer::alloc(core, MemoryKind::HostPinned, gpu_index, len)?;
            return Ok(CwsrArea::Bo(b));
        }
        let reuse = {
            let mut free = lock(&core.cwsr_free);
            free.iter()
                .position(|&(g, _, l)| g == gpu_index && l == len)
                .map(|i| free.swap_remove(i))
        };
        if let Some((_, addr, len)) = reuse {
            return Ok(CwsrArea::Svm {
                core: core.clone(),
                gpu_index,
                addr,
                len,
            });
        }
        let call = "AqlQueue::new(CWSR)";
        // SAFETY: a fresh private anonymous mapping at a kernel-chosen address.
        let p = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::NORESERVE,
            )
        }
        .map_err(|e| {
            Error::new(ErrorKind::OutOfMemory, call, format!("mmap {len:#x}: {e}")).with_source(e)
        })?;
        let addr = p as u64;
        let flags = abi::KFD_IOCTL_SVM_FLAG_HOST_ACCESS
            | abi::KFD_IOCTL_SVM_FLAG_GPU_EXEC
            | abi::KFD_IOCTL_SVM_FLAG_GPU_ALWAYS_MAPPED;
        let mut attrs = [
            abi::SvmAttribute {
                type_: abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
                value: abi::KFD_IOCTL_SVM_LOCATION_SYSMEM,
            },
            abi::SvmAttribute {
                type_: abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
                value: !flags,
            },
            abi::SvmAttribute {
                type_: abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
                value: flags,
            },
            abi::SvmAttribute {
                type_: abi::KFD_IOCTL_SVM_ATTR_ACCESS,
                value: gpu.gpu_id,
            },
        ];
        let r = kfd::ioctl::svm(
            core.backend.as_ref(),
            abi::KFD_IOCTL_SVM_OP_SET_ATTR,
            addr,
            len as u64,
            &mut attrs,
        );
        if let Err(e) = r {
            // SAFETY: our fresh mapping, never handed out.
            let _ = unsafe { rustix::mm::munmap(p, len) };
            return Err(Error::from_kfd(call, e));
        }
        Ok(CwsrArea::Svm {
            core: core.clone(),
            gpu_index,
            addr,
            len,
        })
    }

    /// Writes `bytes` at `off` (the context save area headers that name the queue's
    /// error payload and event).
    pub(crate) fn write(&self, off: usize, bytes: &[u8]) -> Result<()> {
        match self {
            CwsrArea::Bo(b) => b.write(off, bytes),
            CwsrArea::Svm { addr, len, .. } => {
                if off.checked_add(bytes.len()).is_none_or(|e| e > *len) {
                    return Err(Error::new(
                        ErrorKind::InvalidValue,
                        "CwsrArea::write",
                        format!(
                            "{} bytes at {off:#x} past the {len:#x}-byte area",
                            bytes.len()
                        ),
                    ));
                }
                // SAFETY: `addr..addr+len` is our own read-write anonymous mapping (the SVM
                // range), alive as long as the device; the range was checked above.
                unsafe {
                    core::ptr::copy_nonoverlapping(
                        bytes.as_ptr(),
                        (*addr as *mut u8).add(off),
                        bytes.len(),
                    )
                };
                Ok(())
            }
        }
    }

    /// GPU (and CPU) address of the area.
    pub(crate) fn va(&self) -> u64 {
        match self {
            CwsrArea::Bo(b) => b.va(),
            CwsrArea::Svm { addr, .. } => *addr,
        }
    }
}

impl Drop for CwsrArea {
    fn drop(&mut self) {
        if let CwsrArea::Svm {
            core,
            gpu_index,
            addr,
            len,
        } = self
        {
            // The queue using it is destroyed (AqlQueue::drop runs first): recycle it.
            lock(&core.cwsr_free).push((*gpu_index, *addr, *len));
        }
    }
}

impl Drop for AqlQueue {
    fn drop(&mut self) {
        // The KFD queue itself is destroyed by `uq` (dropped first of the fields).
        self.core().queue_errors.remove(self.queue_id);
    }
}
