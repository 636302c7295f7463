//! [`AqlQueue`]: a KFD AQL compute queue — a [`UserQueue`] whose write pointer counts
//! 64-byte packets, with its `amd_queue_t`, EOP and CWSR buffers, and a per-slot
//! indirect-buffer area for the PM4 commands of a command buffer (`cmdbuf::CmdBuf`),
//! carried in AMD vendor PM4-IB packets.
//!
//! Publishing a command buffer: reserve its packets in the ring, copy each command's PM4
//! words into its slot's IB area, write each packet body and release-store its header
//! (`ring::store_packet`), then the ring's publish (write_dispatch_id, doorbell), which
//! returns a `ring::Published` holding the producer lock: the caller counts the packets,
//! then drops it (unlock, backend notification). [`AqlQueue::submit_one`] is the same
//! for one command without the buffer, and [`OneSlot`] for one command encoded before
//! its slot was reserved (the single-command enqueue hot path: write-value, wait-value,
//! a timeline wait).

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kfd::abi;
use pm4::aql::{AqlPacket, COMPLETION_SIGNAL_OFFSET, PACKET_DWORDS};

use crate::cmdbuf::{Cmd, CmdBuf, SmallIb, IB_DWORDS, SMALL_IB_DWORDS};
use crate::device::{DeviceCore, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::hsa;
use crate::memory::{Buffer, MemoryKind};
use crate::ring::{store_packet, Published, UserQueue, WptrUnit};
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
    /// The queue's kernarg ring, created with the first launch on the queue; guarded by
    /// the queue's producer lock (reached through a [`OneSlot`] or
    /// [`AqlQueue::with_kernargs`]), which every launch holds anyway.
    kernargs: KernargCell,
    /// Set when a stream on the queue saw all its work complete (a synchronize): the next
    /// launch checks whether the kernarg ring is drained and can start again at its
    /// beginning or middle (a hint, read without the producer lock).
    pub(crate) kernargs_drained: std::sync::atomic::AtomicBool,
    /// [`AqlQueue::warm_next`]'s marks, written under the producer lock: the slot index
    /// its lines were taken up to, and the write pointer at its last call.
    warm_to: AtomicU64,
    warm_wptr: AtomicU64,
}

/// At most this many slots' lines are taken by one [`AqlQueue::warm_next`].
const WARM_MAX_SLOTS: u64 = 64;

/// Stores to one dword of the line at `p` the value it holds: the line comes into this
/// CPU's cache owned (for writing) without changing memory. The caller holds the lock
/// that serialises every CPU writer of the line.
///
/// # Safety
/// `p` is 4-aligned, inside live CPU-mapped memory.
#[inline]
pub(crate) unsafe fn own_line(p: *mut u8) {
    // SAFETY: the caller's contract; shared memory is accessed atomically.
    let a = unsafe { AtomicU32::from_ptr(p.cast()) };
    a.store(a.load(Ordering::Relaxed), Ordering::Relaxed);
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
            kernargs: KernargCell(std::cell::UnsafeCell::new(None)),
            kernargs_drained: std::sync::atomic::AtomicBool::new(false),
            warm_to: AtomicU64::new(0),
            warm_wptr: AtomicU64::new(0),
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
    /// on `completion`: returns how many, and the publication with the producer lock
    /// still held (None when there was nothing to publish), for the producer to count
    /// them in ring order before dropping it (see [`crate::ring::Published`]). Waits for
    /// ring space watching `fault` (see [`UserQueue::reserve`]).
    pub(crate) fn submit(
        &self,
        bufs: &[&CmdBuf],
        completion: u64,
        fault: &dyn Fn() -> Option<String>,
    ) -> Result<(u64, Option<Published<'_>>)> {
        let count: u64 = bufs.iter().map(|b| b.len() as u64).sum();
        if count == 0 {
            return Ok((0, None));
        }
        let r = self.uq.reserve(count, fault)?;
        let mut idx = r.wptr();
        for c in bufs.iter().flat_map(|b| b.cmds()) {
            if !matches!(c, Cmd::Unused) {
                self.write_cmd(idx, c, completion);
                idx += 1;
            }
        }
        Ok((count, Some(r.publish_locked(idx))))
    }

    /// Publish one command (the single-command path: no loop, no count): [`AqlQueue::submit`]
    /// of a buffer holding just `cmd`.
    #[inline(always)]
    pub(crate) fn submit_one(
        &self,
        cmd: &Cmd,
        completion: u64,
        fault: &dyn Fn() -> Option<String>,
    ) -> Result<Published<'_>> {
        let slot = self.reserve_one(fault)?;
        Ok(slot.publish(cmd, completion))
    }

    /// Reserve one ring slot (the producer lock held until the [`OneSlot`] is published
    /// or dropped): the enqueue hot path checks its stream's placement and builds its
    /// packet under it.
    #[inline(always)]
    pub(crate) fn reserve_one(&self, fault: impl Fn() -> Option<String>) -> Result<OneSlot<'_>> {
        Ok(OneSlot {
            q: self,
            wptr: self.uq.reserve_with(1, fault)?.into_wptr(),
        })
    }

    /// [`AqlQueue::reserve_one`] without waiting ([`crate::ring::UserQueue::try_reserve`]):
    /// None when the producer lock is held or the ring looks full.
    #[inline(always)]
    pub(crate) fn try_reserve_one(&self) -> Option<OneSlot<'_>> {
        Some(OneSlot {
            q: self,
            wptr: self.uq.try_reserve(1)?.into_wptr(),
        })
    }

    /// Write command `c` into ring slot `idx` (reserved) with its completion signal: the
    /// packet body, then its header with a release store; an IB command's PM4 words go to
    /// the slot's IB area first.
    #[inline(always)]
    fn write_cmd(&self, idx: u64, c: &Cmd, completion: u64) {
        let at = COMPLETION_SIGNAL_OFFSET / 4;
        // `slots` is a power of two (checked in `new`) and the ring holds `slots` packets.
        let slot = (idx & (u64::from(self.slots) - 1)) as usize;
        // SAFETY: `slot < slots`, so the packet lies inside the ring (`slots * 64` bytes of
        // CPU-mapped memory owned by the queue, 64-byte aligned).
        let p = unsafe { self.uq.ring_base().add(slot * PACKET_DWORDS) };
        let mut w = match c {
            Cmd::Unused => return,
            Cmd::Packet(w) => *w,
            Cmd::Ib {
                words,
                dwords,
                ib_reloc,
            } => {
                let ib_va = self.ib_area(slot, words, *ib_reloc);
                // SAFETY: `p` is the reserved slot (see below).
                unsafe { self.store_ib_packet(p, ib_va, u32::from(*dwords), completion) };
                return;
            }
        };
        w[at] = completion as u32;
        w[at + 1] = (completion >> 32) as u32;
        // SAFETY: the slot is reserved (consumed by the CP, which reads a slot's body only
        // after an acquire load of a valid header, and invalidated its header before
        // releasing the read pointer): nothing reads dwords 1..16 while they are written.
        // The header (dword 0) is published last with a release store.
        unsafe { store_packet(p, &w) };
    }

    /// Write the PM4-IB packet for `dwords` of IB at `ib_va` into the slot at `p`: the
    /// queue's template straight into the slot, then the few dwords that differ (no
    /// packet image on the stack), the header last with a release store.
    ///
    /// # Safety
    /// `p` is a reserved ring slot of this queue (nothing reads dwords 1..16 until the
    /// header's release store).
    #[inline(always)]
    unsafe fn store_ib_packet(&self, p: *mut u32, ib_va: u64, dwords: u32, completion: u64) {
        let at = COMPLETION_SIGNAL_OFFSET / 4;
        let t = &self.ib_template;
        // Each dword stored once: the template's where it is final (1, 5..=13), 64-bit
        // stores for the IB address (dwords 2..3; 4-aligned as the encoder requires: the
        // slots' IB areas are IB_BYTES_PER_SLOT apart in a page-aligned buffer) and the
        // completion signal (14..15).
        debug_assert_eq!(ib_va % 4, 0);
        // SAFETY: per the contract; the template is 16 dwords, the slot too.
        unsafe {
            p.add(1).write(t[1]);
            (p.add(2) as *mut u64).write_unaligned(ib_va);
            p.add(4).write(t[4] | (dwords & 0xF_FFFF));
            core::ptr::copy_nonoverlapping(t.as_ptr().add(5), p.add(5), at - 5);
            (p.add(at) as *mut u64).write_unaligned(completion);
            AtomicU32::from_ptr(p).store(t[0], Ordering::Release);
        }
    }

    /// Copy a command's PM4 words into the IB area of ring slot `slot` (applying its
    /// IB-relative address); returns the area's GPU address.
    #[inline(always)]
    fn ib_area(&self, slot: usize, words: &[u32; IB_DWORDS], reloc: Option<u8>) -> u64 {
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

    /// Wait for the producers publishing now (see [`UserQueue::fence_producers`]).
    pub(crate) fn fence_producers(&self) {
        self.uq.fence_producers()
    }

    /// Index of the next packet to be submitted.
    pub fn next_index(&self) -> u64 {
        self.uq.wptr()
    }
}

/// The kernarg ring of an [`AqlQueue`], accessed only with the queue's producer lock held.
struct KernargCell(std::cell::UnsafeCell<Option<crate::launch::KernargRing>>);

// SAFETY: the ring (Send) is reached only through `OneSlot::kernargs` (a `&mut` borrow of
// a reservation: the producer lock held) or `AqlQueue::with_kernargs` (takes the lock), so
// one thread at a time.
unsafe impl Sync for KernargCell {}

impl AqlQueue {
    /// Run `f` on the queue's kernarg ring with the producer lock held (inspection).
    #[cfg(test)]
    pub(crate) fn with_kernargs<R>(
        &self,
        f: impl FnOnce(&mut Option<crate::launch::KernargRing>) -> R,
    ) -> R {
        let _held = self.uq.lock_producer();
        // SAFETY: the producer lock is held until `_held` drops (see `KernargCell`).
        f(unsafe { &mut *self.kernargs.0.get() })
    }

    /// After the host waited for the queue (`Stream::synchronize`): bring the cache lines
    /// the next packets will be written to — the free ring slots after the write pointer,
    /// their IB areas and the kernarg ring's next segments
    /// ([`crate::launch::KernargRing::warm_next`]) — into this CPU's cache, owned, by
    /// storing back the values they hold. As many slots as were published since the last
    /// call (at least 1, at most [`WARM_MAX_SLOTS`]): a program that enqueues batches and
    /// synchronizes gets its next batch's lines ready. Why: the last lap's packets were
    /// read by the packet processor; where that is another CPU core (the emulated CP) its
    /// copies must be invalidated before each store of the next lap completes, a
    /// cross-core round trip the enqueue's locked instruction waits for; done here, it is
    /// paid once per synchronize instead of on the enqueue path. After the wait, not
    /// during it: the processor's reads of the batch (and its core's prefetches of the
    /// lines after them) would take the lines back. On a GPU the lines were read over
    /// PCIe and this is a few cache-hitting stores. Skipped when another thread holds the
    /// producer lock (it is enqueueing: the lines are being written anyway) or the ring is
    /// full.
    pub(crate) fn warm_next(&self) {
        let Some(mut slot) = self.try_reserve_one() else {
            return;
        };
        let w = slot.wptr;
        // Guarded by the producer lock the slot holds (relaxed atomics for `Sync`).
        let span = w
            .saturating_sub(self.warm_wptr.swap(w, Ordering::Relaxed))
            .clamp(1, WARM_MAX_SLOTS);
        let from = self.warm_to.load(Ordering::Relaxed).max(w);
        let to = (w + span).min(self.uq.rptr().saturating_add(self.uq.capacity()));
        let mask = u64::from(self.slots) - 1;
        for idx in from..to {
            let slot_i = (idx & mask) as usize;
            // SAFETY: `slot_i < slots`: a slot of the ring and its IB area (CPU-mapped,
            // owned by the queue); free slots, and every CPU write to them is made under
            // the producer lock held here.
            unsafe {
                own_line(self.uq.ring_base().add(slot_i * PACKET_DWORDS).cast());
                own_line(self.ib.as_ptr().add(slot_i * IB_BYTES_PER_SLOT));
            }
        }
        self.warm_to.store(to.max(from), Ordering::Relaxed);
        if let Some(ring) = slot.kernargs() {
            ring.warm_next();
        }
        // Dropped unpublished: the lock is released, nothing is published.
    }

    /// The write pointer and [`AqlQueue::warm_next`]'s slot mark (inspection).
    #[cfg(test)]
    pub(crate) fn warm_marks(&self) -> (u64, u64) {
        let _held = self.uq.lock_producer();
        (self.uq.wptr(), self.warm_to.load(Ordering::Relaxed))
    }

    /// The ring's and the IB areas' bytes (inspection).
    #[cfg(test)]
    pub(crate) fn ring_and_ib_bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.uq.ring().len() + self.ib.len()];
        let (r, i) = v.split_at_mut(self.uq.ring().len());
        self.uq.ring().read(0, r).unwrap();
        self.ib.read(0, i).unwrap();
        v
    }

    /// The 16 dwords of ring packet `index` as they are now (inspection).
    #[cfg(test)]
    pub(crate) fn packet_words(&self, index: u64) -> [u32; 16] {
        let slot = (index & (u64::from(self.slots) - 1)) as usize;
        let mut w = [0u32; 16];
        // SAFETY: `slot < slots`: a packet inside the ring (CPU-mapped, owned by the
        // queue); a racing write at most makes the copy stale.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.uq.ring_base().add(slot * PACKET_DWORDS),
                w.as_mut_ptr(),
                16,
            )
        };
        w
    }
}

/// One reserved ring slot of an [`AqlQueue`] (its producer lock held): publish a
/// command into it, or drop it to publish nothing. Two words (the queue and the
/// reservation's write pointer, see [`crate::ring::Reservation::into_wptr`]), so that
/// the launch path keeps it in registers.
pub(crate) struct OneSlot<'a> {
    q: &'a AqlQueue,
    wptr: u64,
}

impl Drop for OneSlot<'_> {
    fn drop(&mut self) {
        // Not published: the reservation unlocks unchanged.
        drop(self.q.uq.resume(self.wptr));
    }
}

impl<'a> OneSlot<'a> {
    /// The reservation again, for a publish (the slot's own drop is skipped).
    #[inline(always)]
    fn into_reservation(self) -> crate::ring::Reservation<'a> {
        let (q, wptr) = (self.q, self.wptr);
        std::mem::forget(self);
        q.uq.resume(wptr)
    }

    /// The queue the slot is in.
    #[inline(always)]
    pub(crate) fn queue(&self) -> &'a AqlQueue {
        self.q
    }

    /// The queue's KFD id.
    #[inline(always)]
    pub(crate) fn queue_id(&self) -> u32 {
        self.q.queue_id
    }

    /// The queue's kernarg ring (the slot holds the producer lock that guards it).
    #[inline(always)]
    pub(crate) fn kernargs(&mut self) -> &mut Option<crate::launch::KernargRing> {
        // SAFETY: the reservation holds the queue's producer lock, and the borrow of the
        // ring ends with this `&mut` borrow of the slot (see `KernargCell`).
        unsafe { &mut *self.q.kernargs.0.get() }
    }

    /// The reserved slot's 16 packet dwords (64-byte aligned), for a packet built in
    /// place: the caller writes dwords 1..14, then [`OneSlot::publish_header`]. Nothing
    /// reads the slot before its header is published.
    #[inline(always)]
    pub(crate) fn packet_ptr(&self) -> *mut u32 {
        let q = self.q;
        let slot = (self.wptr & (u64::from(q.slots) - 1)) as usize;
        // SAFETY: `slot < slots`: the reserved slot inside the ring.
        unsafe { q.uq.ring_base().add(slot * PACKET_DWORDS) }
    }

    /// Publish the packet built in place at [`OneSlot::packet_ptr`] (dwords 1..14
    /// written): its completion signal `completion`, then dword 0 `header` with a release
    /// store. The producer lock is held until the returned [`Published`] is dropped.
    #[inline(always)]
    pub(crate) fn publish_header(self, header: u32, completion: u64) -> Published<'a> {
        let p = self.packet_ptr();
        self.publish_header_at(p, header, completion)
    }

    /// [`OneSlot::publish_header`] with the slot's [`OneSlot::packet_ptr`] `p` at hand
    /// (not computed again after the packet's writes).
    #[inline(always)]
    pub(crate) fn publish_header_at(
        self,
        p: *mut u32,
        header: u32,
        completion: u64,
    ) -> Published<'a> {
        debug_assert_eq!(p, self.packet_ptr());
        let idx = self.wptr;
        let at = COMPLETION_SIGNAL_OFFSET / 4;
        // SAFETY: the reserved slot (`p` is its `packet_ptr`); the header is published last.
        unsafe {
            (p.add(at) as *mut u64).write_unaligned(completion);
            AtomicU32::from_ptr(p).store(header, Ordering::Release);
        }
        self.into_reservation().publish_locked(idx + 1)
    }

    /// Publish the packet `words` (encoded, completion signal and header included) into
    /// the slot: dwords 1..16, then the header with a release store. The producer lock is
    /// held until the returned [`Published`] is dropped.
    #[inline(always)]
    pub(crate) fn publish_packet(self, words: &[u32; PACKET_DWORDS]) -> Published<'a> {
        let idx = self.wptr;
        // SAFETY: the reserved slot (see `packet_ptr`): nothing reads dwords 1..16 before
        // the header's release store.
        unsafe { store_packet(self.packet_ptr(), words) };
        self.into_reservation().publish_locked(idx + 1)
    }

    /// Publish the PM4 command `ib` (encoded) in a PM4-IB packet completing on
    /// `completion`: its words copied into the slot's IB area, the queue's PM4-IB
    /// template patched into the slot, the header last. The producer lock is held until
    /// the returned [`Published`] is dropped.
    #[inline(always)]
    pub(crate) fn publish_ib(self, completion: u64, ib: &SmallIb) -> Published<'a> {
        let q = self.q;
        let idx = self.wptr;
        let slot = (idx & (u64::from(q.slots) - 1)) as usize;
        let ib_va = q.ib.va() + (slot * IB_BYTES_PER_SLOT) as u64;
        // SAFETY: the slot's IB area: IB_DWORDS >= SMALL_IB_DWORDS 4-aligned dwords of
        // CPU-mapped memory the queue owns; the slot is reserved, and the CP reads its area
        // only after the packet's header is published below, so nothing else accesses it
        // meanwhile. A fixed-size copy (two vector moves).
        unsafe {
            core::ptr::copy_nonoverlapping(ib.words.as_ptr(), ib_va as *mut u32, SMALL_IB_DWORDS)
        };
        // SAFETY: `slot < slots`: a reserved slot inside the ring.
        unsafe {
            let p = q.uq.ring_base().add(slot * PACKET_DWORDS);
            q.store_ib_packet(p, ib_va, ib.dwords, completion);
        }
        self.into_reservation().publish_locked(idx + 1)
    }

    /// Write `cmd` completing on `completion` into the slot and publish it. The producer
    /// lock is held until the returned [`Published`] is dropped.
    #[inline(always)]
    pub(crate) fn publish(self, cmd: &Cmd, completion: u64) -> Published<'a> {
        let idx = self.wptr;
        self.q.write_cmd(idx, cmd, completion);
        self.into_reservation().publish_locked(idx + 1)
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

#[cfg(test)]
mod tests {
    use super::*;
    use pm4::aql::VendorPm4Ib;

    /// The PM4-IB packet the single-command path writes straight into a slot is the
    /// encoder's (`VendorPm4Ib::patch` of the queue's template), and its IB holds the
    /// command's words.
    #[test]
    fn ib_packet_written_in_place_matches_the_encoder() {
        let dev = crate::Device::open_for_test("emu:mi300x");
        let q = AqlQueue::new(&dev.inner, 0, 7, 64).unwrap();
        let mem = dev.alloc(MemoryKind::Signal, 0, 4096).unwrap();
        let t = crate::cmdbuf::Target::of(dev.inner.gpu(0).unwrap());
        let cmd = Cmd::write_mem32(t, mem.va(), 0x1234_5678).unwrap();
        let Cmd::Ib { words, dwords, .. } = cmd else {
            panic!("an IB command")
        };
        let sig = crate::signal::Signal::new(&dev.inner.signals, 1).unwrap();
        let completion = sig.handle();
        drop(q.submit_one(&cmd, completion, &|| None).unwrap());
        let t0 = std::time::Instant::now();
        while q.read_index() < 1 {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(20),
                "CP stuck"
            );
            std::thread::yield_now();
        }
        let want = VendorPm4Ib::patch(&q.ib_template, q.ib.va(), u32::from(dwords), completion);
        let ring = q.uq.ring_words();
        // The CP turned the header's type to INVALID after consuming the slot.
        assert_eq!(ring[0].load(Ordering::Acquire) >> 16, want[0] >> 16);
        for (i, w) in want.iter().enumerate().skip(1) {
            assert_eq!(ring[i].load(Ordering::Acquire), *w, "dword {i}");
        }
        let mut ib = [0u8; IB_BYTES_PER_SLOT];
        q.ib.read(0, &mut ib).unwrap();
        for (i, w) in words.iter().enumerate().take(usize::from(dwords)) {
            assert_eq!(
                u32::from_le_bytes(ib[i * 4..i * 4 + 4].try_into().unwrap()),
                *w
            );
        }
        assert_eq!(
            mem.atomic_u32(0).unwrap().load(Ordering::Acquire),
            0x1234_5678
        );
    }
}
