//! [`AqlQueue`]: a KFD AQL compute queue with its ring, `amd_queue_t`, EOP and CWSR
//! buffers, doorbell, and a per-slot indirect-buffer area for PM4 commands (stream
//! memory ops) carried in AMD vendor PM4-IB packets.
//!
//! Submission follows the AQL publish order: reserve a slot (waiting while the ring is
//! full), write the body, release-store the header (pm4's `AqlRingWriter`), bump
//! `write_dispatch_id`, then the 64-bit doorbell store of the packet index. Producers on
//! one queue serialise on a mutex so doorbell values only grow; it is uncontended when one
//! stream uses the queue.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kfd::abi;
use pm4::aql::{AqlPacket, AqlRingWriter, VendorPm4Ib};
use pm4::pkt3::IndirectBuffer;

use crate::device::{DeviceCore, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::hsa::{self, AmdQueue};
use crate::memory::{Buffer, MemoryKind};

/// Default ring size in packets.
pub const DEFAULT_RING_PACKETS: u32 = 1024;
/// Bytes of PM4 indirect buffer reserved per ring slot.
pub const IB_BYTES_PER_SLOT: usize = 64;

/// The doorbell mapping of one GPU (mapped once per device and GPU).
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

struct Submit {
    /// Next packet index to hand out (== write_dispatch_id after publication).
    next: u64,
    /// Last read index seen: re-read (a cache line the CP writes) only when the ring
    /// looks full by this value.
    read_seen: u64,
}

/// An AQL queue on one GPU.
pub struct AqlQueue {
    dev: Arc<DeviceCore>,
    gpu_index: usize,
    queue_id: u32,
    slots: u32,
    ring: Buffer,
    amdq: Buffer,
    ib: Buffer,
    _eop: Option<Buffer>,
    _cwsr: Option<CwsrArea>,
    doorbell: *mut u64,
    submit: Mutex<Submit>,
    priority: u32,
}

// SAFETY: raw pointers refer to mappings owned by the queue (doorbell page held by the
// device); all shared memory is written with atomics or volatile stores.
unsafe impl Send for AqlQueue {}
// SAFETY: as above; submission is serialised by `submit`.
unsafe impl Sync for AqlQueue {}

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

        // Ring slots start INVALID; amd_queue_t describes the ring.
        // SAFETY: the ring is `ring_bytes` of CPU-mapped memory owned by `ring`.
        let ring_words = unsafe {
            core::slice::from_raw_parts(ring.as_ptr() as *const AtomicU32, ring_bytes / 4)
        };
        pm4::aql::init_invalid(ring_words);
        let q = AmdQueue::new(ring.va(), slots, gpu);
        amdq.write(0, zerocopy::IntoBytes::as_bytes(&q))?;

        let mut args = abi::CreateQueueArgs {
            ring_base_address: ring.va(),
            write_pointer_address: amdq.va() + hsa::QUEUE_WRITE_DISPATCH_ID_OFFSET,
            read_pointer_address: amdq.va() + hsa::QUEUE_READ_DISPATCH_ID_OFFSET,
            ring_size: ring_bytes as u32,
            gpu_id: gpu.gpu_id,
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
        kfd::ioctl::create_queue(core.backend.as_ref(), &mut args)
            .map_err(|e| Error::from_kfd(call, e))?;
        let queue_id = args.queue_id;
        let doorbell = match dev.doorbell_slot(gpu_index, args.doorbell_offset) {
            Ok(p) => p,
            Err(e) => {
                let _ = kfd::ioctl::destroy_queue(core.backend.as_ref(), queue_id);
                return Err(e);
            }
        };
        Ok(AqlQueue {
            dev: dev.core.clone(),
            gpu_index,
            queue_id,
            slots,
            ring,
            amdq,
            ib,
            _eop: eop,
            _cwsr: cwsr,
            doorbell,
            submit: Mutex::new(Submit {
                next: 0,
                read_seen: 0,
            }),
            priority,
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

    fn cell(&self, offset: u64) -> &AtomicU64 {
        // SAFETY: amd_queue_t lives in `amdq` (4 KiB, CPU-mapped); offsets are the
        // 8-aligned dispatch id fields.
        unsafe { AtomicU64::from_ptr((self.amdq.va() + offset) as *mut u64) }
    }

    /// Packets the CP has consumed.
    pub fn read_index(&self) -> u64 {
        self.cell(hsa::QUEUE_READ_DISPATCH_ID_OFFSET)
            .load(Ordering::Acquire)
    }

    fn ring_words(&self) -> &[AtomicU32] {
        // SAFETY: the ring buffer is CPU-mapped and lives as long as `self`.
        unsafe {
            core::slice::from_raw_parts(self.ring.as_ptr() as *const AtomicU32, self.ring.len() / 4)
        }
    }

    /// Submit packets built by `build` for consecutive indices; `build(index, ib)` gets
    /// the packet index and the slot's indirect-buffer area (GPU address and CPU words)
    /// for PM4 commands. Returns the index of the last packet.
    pub(crate) fn submit(
        &self,
        count: u32,
        build: impl FnMut(u64, IbSlot<'_>) -> AqlPacket,
    ) -> Result<u64> {
        self.submit_watched(count, build, &|| None)
    }

    /// [`AqlQueue::submit`] whose wait for ring space also calls `fault` (after a short
    /// spin, then on every retry): a `Some(why)` ends the wait with LaunchFailure, as a
    /// faulted queue never consumes the packets in front of the new ones.
    pub(crate) fn submit_watched(
        &self,
        count: u32,
        mut build: impl FnMut(u64, IbSlot<'_>) -> AqlPacket,
        fault: &dyn Fn() -> Option<String>,
    ) -> Result<u64> {
        if count == 0 || count > self.slots {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "AqlQueue::submit",
                format!("{count} packets"),
            ));
        }
        let mut g = self.submit.lock().unwrap_or_else(|e| e.into_inner());
        let first = g.next;
        let last = first + count as u64 - 1;
        // Wait for space: the slot of `last` must have been consumed.
        let mut spins = 0u32;
        while last - g.read_seen >= self.slots as u64 {
            g.read_seen = self.read_index();
            if last - g.read_seen < self.slots as u64 {
                break;
            }
            spins += 1;
            if spins < 1000 {
                std::hint::spin_loop();
            } else {
                if let Some(why) = fault() {
                    return Err(Error::new(
                        ErrorKind::LaunchFailure,
                        "AqlQueue::submit",
                        format!("the ring is full behind work that faulted: {why}"),
                    ));
                }
                std::thread::yield_now();
            }
        }
        let writer = AqlRingWriter::new(self.ring_words()).ok_or_else(|| {
            Error::new(
                ErrorKind::Driver,
                "AqlQueue::submit",
                "ring is not a power-of-two number of slots",
            )
        })?;
        for idx in first..=last {
            let slot = (idx % self.slots as u64) as usize;
            let ib_va = self.ib.va() + (slot * IB_BYTES_PER_SLOT) as u64;
            // SAFETY: the slot's 64-byte IB area is CPU-mapped and owned by this queue; it
            // is not read by the CP until the packet below is published.
            let ib_words = unsafe {
                core::slice::from_raw_parts_mut(ib_va as *mut u32, IB_BYTES_PER_SLOT / 4)
            };
            let pkt = build(
                idx,
                IbSlot {
                    va: ib_va,
                    words: ib_words,
                },
            );
            writer.write(idx, &pkt);
        }
        g.next = last + 1;
        self.cell(hsa::QUEUE_WRITE_DISPATCH_ID_OFFSET)
            .store(last + 1, Ordering::Release);
        // SAFETY: the doorbell is a mapped, 8-byte aligned doorbell slot of this queue.
        unsafe { core::ptr::write_volatile(self.doorbell, last) };
        self.dev.backend.doorbell_written(self.queue_id);
        Ok(last)
    }

    /// Index of the next packet to be submitted.
    pub fn next_index(&self) -> u64 {
        self.submit.lock().unwrap_or_else(|e| e.into_inner()).next
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
            let mut free = core.cwsr_free.lock().unwrap_or_else(|e| e.into_inner());
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
        .map_err(|e| Error::new(ErrorKind::OutOfMemory, call, format!("mmap {len:#x}: {e}")))?;
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
            core.cwsr_free
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((*gpu_index, *addr, *len));
        }
    }
}

/// The per-slot indirect-buffer area handed to packet builders.
pub(crate) struct IbSlot<'a> {
    /// GPU address of the area.
    pub(crate) va: u64,
    /// CPU view (16 dwords).
    pub(crate) words: &'a mut [u32],
}

/// A vendor PM4-IB packet running `dwords` of the IB at `va`.
pub(crate) fn pm4_ib_packet(va: u64, dwords: u32, completion_signal: u64) -> AqlPacket {
    AqlPacket::VendorPm4Ib(VendorPm4Ib {
        control: pm4::aql::PacketControl::SYSTEM_BARRIER,
        ib: IndirectBuffer {
            addr: va,
            size_dw: dwords,
            chain: false,
            offload_polling: false,
            volatile: false,
            valid: true,
            vmid: 0,
            cache_policy: pm4::pkt3::CachePolicy::Lru,
            pre_resume: false,
            priv_: false,
        },
        completion_signal,
    })
}

impl Drop for AqlQueue {
    fn drop(&mut self) {
        let _ = kfd::ioctl::destroy_queue(self.dev.backend.as_ref(), self.queue_id);
    }
}

impl DeviceCore {
    /// The CPU address of a queue's doorbell: the GPU's doorbell page is mmapped from
    /// `/dev/kfd` once (at `doorbell_offset & ~(page - 1)`, page = 1024 doorbells), and the
    /// slot is the offset within it.
    pub(crate) fn doorbell_slot(&self, gpu_index: usize, doorbell_offset: u64) -> Result<*mut u64> {
        let call = "AqlQueue::new(doorbell)";
        let gpu = self.gpu(gpu_index)?;
        let db_size = gpu.node.doorbell_size().max(4) as u64;
        let page_len = 1024 * db_size;
        let page_off = doorbell_offset & !(page_len - 1);
        let mut pages = self.doorbells.lock().unwrap_or_else(|e| e.into_inner());
        let existing = pages
            .iter()
            .find(|(i, p)| *i == gpu_index && p.offset == page_off)
            .map(|(_, p)| p.base);
        let base = match existing {
            Some(b) => b,
            None => {
                // SAFETY: a fresh shared mapping of the KFD doorbell page at a kernel-chosen
                // address; it stays mapped until the device is dropped.
                let p = unsafe {
                    self.backend.mmap(
                        kfd::MmapFile::Kfd,
                        page_off,
                        page_len as usize,
                        None,
                        kfd::Prot::READ | kfd::Prot::WRITE,
                    )
                }
                .map_err(|e| {
                    Error::new(
                        ErrorKind::Driver,
                        call,
                        format!("mmap doorbell page at {page_off:#x}: {e}"),
                    )
                })?;
                let base = p.as_ptr() as *mut u8;
                pages.push((
                    gpu_index,
                    DoorbellPage {
                        base,
                        len: page_len as usize,
                        offset: page_off,
                    },
                ));
                base
            }
        };
        // SAFETY: the slot offset is inside the page just mapped.
        Ok(unsafe { base.add((doorbell_offset - page_off) as usize) } as *mut u64)
    }
}
