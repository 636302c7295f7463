//! Raw KFD queues for packet-level checks: AQL, PM4 compute and SDMA queues built with
//! CREATE_QUEUE directly (buffers from the runtime's allocator, which GPU-maps them on
//! every GPU), and `amd_signal_t` cells for AQL completion and dependency signals.
//!
//! A check declares its raw queue after the memory the queue's packets name (signals,
//! indirect buffers, scratch): the queue then drops first, and DESTROY_QUEUE returns only
//! once no engine touches it, so a check ending early never frees memory under a queue
//! still waiting on it (the raw-queue counterpart of [`super::Drain`]).

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, Ordering};

use kfd::abi;
use kfdrt::raw::hsa::{self, AmdSignal};
use kfdrt::raw::{self as rq, UserQueue, WptrUnit};
use kfdrt::{Buffer, Device, MemoryKind};
use pm4::aql::{AqlPacket, AqlRingWriter};
use pm4::sdma::SdmaPacket;

use super::{wait_for, OrFail};

/// Compute-queue buffers the kernel checks: EOP (when wanted) and the CWSR area.
fn compute_buffers(
    dev: &Device,
    gpu: usize,
    with_eop: bool,
) -> Result<(Option<Buffer>, Buffer, abi::CreateQueueArgs), String> {
    let g = &dev.gpus()[gpu];
    let sizes = kfd::cwsr::queue_sizes(&g.node.properties)
        .ok_or_else(|| format!("GPU {:#x} has no CWSR sizes", g.gpu_id))?;
    let eop = if with_eop {
        Some(
            dev.alloc(MemoryKind::Device, gpu, sizes.eop_buffer_size as usize)
                .or_fail("EOP buffer")?,
        )
    } else {
        None
    };
    let cwsr = dev
        .alloc(
            MemoryKind::HostPinned,
            gpu,
            sizes.cwsr_bo_size(sizes.cwsr_size) as usize,
        )
        .or_fail("CWSR buffer")?;
    let args = abi::CreateQueueArgs {
        eop_buffer_address: eop.as_ref().map_or(0, |b| b.va()),
        eop_buffer_size: eop.as_ref().map_or(0, |_| sizes.eop_buffer_size as u64),
        ctx_save_restore_address: cwsr.va(),
        ctx_save_restore_size: sizes.cwsr_size,
        ctl_stack_size: sizes.ctl_stack_size,
        ..Default::default()
    };
    Ok((eop, cwsr, args))
}

/// Whether GPU `gpu` is gfx94x (AQL queues take no EOP buffer there).
pub fn is_gfx94x(dev: &Device, gpu: usize) -> bool {
    (90400..90500).contains(&dev.gpus()[gpu].node.properties.gfx_target_version)
}

/// A raw AQL queue.
pub struct RawAql {
    /// Declared first: the KFD queue goes before the buffers it names.
    q: UserQueue,
    _eop: Option<Buffer>,
    _cwsr: Buffer,
}

impl RawAql {
    /// Create an AQL queue of `slots` packets on GPU `gpu`, with an EOP buffer except on
    /// gfx94x (as libhsakmt creates them).
    pub fn new(dev: &Device, gpu: usize, slots: u32) -> Result<RawAql, String> {
        Self::with_eop(dev, gpu, slots, !is_gfx94x(dev, gpu))
    }

    /// Create an AQL queue, with or without an EOP buffer.
    pub fn with_eop(dev: &Device, gpu: usize, slots: u32, eop: bool) -> Result<RawAql, String> {
        let g = &dev.gpus()[gpu];
        let ring_bytes = slots as usize * 64;
        let ring = dev
            .alloc(MemoryKind::HostPinned, gpu, ring_bytes)
            .or_fail("AQL ring")?;
        let amdq = dev
            .alloc(MemoryKind::Signal, gpu, 4096)
            .or_fail("amd_queue_t")?;
        let (eop, cwsr, base) = compute_buffers(dev, gpu, eop)?;
        // SAFETY: the ring is `ring_bytes` of CPU-mapped memory owned by `ring`.
        let words = unsafe {
            core::slice::from_raw_parts(ring.as_ptr() as *const AtomicU32, ring_bytes / 4)
        };
        pm4::aql::init_invalid(words);
        let q = hsa::amd_queue(ring.va(), slots, g);
        amdq.write(0, zerocopy::IntoBytes::as_bytes(&q))
            .or_fail("amd_queue_t")?;
        let args = abi::CreateQueueArgs {
            queue_type: abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
            queue_percentage: abi::KFD_MAX_QUEUE_PERCENTAGE,
            queue_priority: 7,
            ..base
        };
        let q = rq::create_queue(
            dev,
            gpu,
            WptrUnit::AqlPacket,
            ring,
            amdq,
            hsa::QUEUE_WRITE_DISPATCH_ID_OFFSET,
            hsa::QUEUE_READ_DISPATCH_ID_OFFSET,
            args,
        )
        .or_fail("CREATE_QUEUE")?;
        Ok(RawAql {
            q,
            _eop: eop,
            _cwsr: cwsr,
        })
    }

    /// The queue's context save area (its first 40 bytes are XCC 0's header).
    pub fn cwsr(&self) -> &Buffer {
        &self._cwsr
    }

    /// Packets the CP has consumed (`read_dispatch_id`).
    pub fn read_index(&self) -> u64 {
        self.q.rptr()
    }

    /// Publish packets in order and ring the doorbell once (value = last index).
    pub fn submit(&mut self, pkts: &[AqlPacket]) -> Result<(), String> {
        let w = AqlRingWriter::new(self.q.ring_words()).ok_or("AQL ring is not a power of two")?;
        let r = self
            .q
            .reserve(pkts.len() as u64, &|| None)
            .or_fail("AQL ring space")?;
        let mut next = r.wptr();
        for p in pkts {
            w.write(next, p);
            next += 1;
        }
        r.publish(next);
        Ok(())
    }

    /// The bare submission floor ([`kfdrt::raw::bare_publish`]) on this queue.
    pub fn bare_publish(&self, index: u64, packet: &[u32; 16]) {
        rq::bare_publish(&self.q, index, packet)
    }

    /// Wait until the CP consumed every submitted packet.
    pub fn wait_consumed(&self) -> Result<(), String> {
        wait_for("the CP to consume the AQL packets", super::WAIT, || {
            self.read_index() >= self.q.wptr()
        })
    }
}

/// A raw SDMA queue: ring plus a read/write pointer page (no EOP, no CWSR).
pub struct RawSdma {
    q: UserQueue,
    /// KFD queue id.
    pub queue_id: u32,
    version: pm4::SdmaVersion,
}

impl RawSdma {
    /// Create an SDMA queue with a `ring_bytes` ring (a page multiple, power of two).
    pub fn new(dev: &Device, gpu: usize, ring_bytes: usize) -> Result<RawSdma, String> {
        let g = &dev.gpus()[gpu];
        let ring = dev
            .alloc(MemoryKind::HostPinned, gpu, ring_bytes)
            .or_fail("SDMA ring")?;
        let ptrs = dev
            .alloc(MemoryKind::Signal, gpu, 4096)
            .or_fail("SDMA rptr/wptr")?;
        let args = abi::CreateQueueArgs {
            queue_type: abi::KFD_IOC_QUEUE_TYPE_SDMA,
            queue_percentage: abi::KFD_MAX_QUEUE_PERCENTAGE,
            queue_priority: 7,
            ..Default::default()
        };
        let q = rq::create_queue(dev, gpu, WptrUnit::Byte, ring, ptrs, 8, 0, args)
            .or_fail("CREATE_QUEUE (SDMA)")?;
        Ok(RawSdma {
            queue_id: q.queue_id(),
            q,
            version: g.sdma_version,
        })
    }

    /// The engine's read pointer in bytes.
    pub fn rptr(&self) -> u64 {
        self.q.rptr()
    }

    /// Write packets (never straddling the ring end), then publish the write pointer
    /// (bytes) in memory and through the doorbell.
    pub fn submit(&mut self, pkts: &[SdmaPacket<'_>]) -> Result<(), String> {
        rq::sdma_submit(&self.q, self.version, pkts).or_fail("SDMA packets")
    }

    /// Wait until the engine has read everything submitted.
    pub fn wait_idle(&self) -> Result<(), String> {
        wait_for("the SDMA engine to drain its ring", super::WAIT, || {
            self.rptr() >= self.q.wptr()
        })
    }
}

/// A raw PM4 compute queue (`KFD_IOC_QUEUE_TYPE_COMPUTE`): pointers count dwords.
pub struct RawPm4 {
    q: UserQueue,
    _eop: Option<Buffer>,
    _cwsr: Buffer,
}

impl RawPm4 {
    /// Create a PM4 compute queue with a 4 KiB ring (1024 dwords).
    pub fn new(dev: &Device, gpu: usize) -> Result<RawPm4, String> {
        let ring = dev
            .alloc(MemoryKind::HostPinned, gpu, 4096)
            .or_fail("PM4 ring")?;
        let ptrs = dev
            .alloc(MemoryKind::Signal, gpu, 4096)
            .or_fail("PM4 rptr/wptr")?;
        let (eop, cwsr, base) = compute_buffers(dev, gpu, true)?;
        let args = abi::CreateQueueArgs {
            queue_type: abi::KFD_IOC_QUEUE_TYPE_COMPUTE,
            queue_percentage: abi::KFD_MAX_QUEUE_PERCENTAGE,
            queue_priority: 7,
            ..base
        };
        let q = rq::create_queue(dev, gpu, WptrUnit::Dword, ring, ptrs, 8, 0, args)
            .or_fail("CREATE_QUEUE (PM4 compute)")?;
        Ok(RawPm4 {
            q,
            _eop: eop,
            _cwsr: cwsr,
        })
    }

    /// The CP's read pointer in dwords.
    pub fn rptr(&self) -> u64 {
        self.q.rptr()
    }

    /// Append dwords (wrapping in the 1024-dword ring) and ring the doorbell.
    pub fn submit(&mut self, dwords: &[u32]) -> Result<(), String> {
        ensure_len(dwords.len(), 512)?;
        let r = self
            .q
            .reserve(dwords.len() as u64, &|| None)
            .or_fail("PM4 ring space")?;
        let ring = self.q.ring_words();
        let w = r.wptr();
        for (i, &d) in dwords.iter().enumerate() {
            ring[((w + i as u64) % ring.len() as u64) as usize].store(d, Ordering::Relaxed);
        }
        r.publish(w + dwords.len() as u64);
        Ok(())
    }

    /// Wait until the CP has read everything submitted.
    pub fn wait_idle(&self) -> Result<(), String> {
        wait_for("the CP to drain the PM4 ring", super::WAIT, || {
            self.rptr() >= self.q.wptr()
        })
    }
}

fn ensure_len(n: usize, max: usize) -> Result<(), String> {
    if n > max {
        return Err(format!("{n} dwords in one submission (at most {max})"));
    }
    Ok(())
}

/// `amd_signal_t` cells (64 per page) in signal memory, without interrupts.
pub struct RawSignals {
    buf: Buffer,
}

impl RawSignals {
    /// A page of signals on GPU 0's allocator.
    pub fn new(dev: &Device) -> Result<RawSignals, String> {
        Ok(RawSignals {
            buf: dev
                .alloc(MemoryKind::Signal, 0, 4096)
                .or_fail("signal memory")?,
        })
    }

    /// Initialise signal `i` (a user signal with `value`, optional mailbox/event) and
    /// return its handle.
    pub fn init(&self, i: usize, value: i64, mailbox: Option<(u64, u32)>) -> u64 {
        let sig = AmdSignal {
            kind: hsa::AMD_SIGNAL_KIND_USER,
            value,
            event_mailbox_ptr: mailbox.map_or(0, |m| m.0),
            event_id: mailbox.map_or(0, |m| m.1),
            ..Default::default()
        };
        let h = self.handle(i);
        // SAFETY: slot `i` is a 64-byte aligned amd_signal_t inside the CPU-mapped page.
        unsafe { core::ptr::write_volatile(h as *mut AmdSignal, sig) };
        std::sync::atomic::fence(Ordering::Release);
        h
    }

    /// The handle (address) of signal `i`.
    pub fn handle(&self, i: usize) -> u64 {
        assert!(i < 64, "signal index {i} out of the page");
        self.buf.va() + i as u64 * 64
    }

    /// Signal `i`'s value cell.
    pub fn value(&self, i: usize) -> &AtomicI64 {
        // SAFETY: the value field (offset 8) of slot `i`, 8-aligned, CPU-mapped.
        unsafe { AtomicI64::from_ptr((self.handle(i) + hsa::SIGNAL_VALUE_OFFSET) as *mut i64) }
    }
}

/// A scratch buffer with typed access for packet checks. `read`/`write` go through the GPU
/// when the buffer is not CPU-visible (VRAM on a small-BAR board).
pub struct Scratch {
    /// The buffer.
    pub buf: Buffer,
    dev: Device,
}

impl Scratch {
    /// `bytes` of `kind` memory on GPU `gpu`.
    pub fn new(dev: &Device, kind: MemoryKind, gpu: usize, bytes: usize) -> Result<Self, String> {
        Ok(Scratch {
            buf: dev.alloc(kind, gpu, bytes).or_fail("scratch buffer")?,
            dev: dev.clone(),
        })
    }
    /// GPU address of byte `off`.
    pub fn va(&self, off: usize) -> u64 {
        self.buf.va() + off as u64
    }
    /// The u32 at byte `off`.
    pub fn u32(&self, off: usize) -> &AtomicU32 {
        self.buf.atomic_u32(off).expect("aligned, in bounds")
    }
    /// The u64 at byte `off`.
    pub fn u64(&self, off: usize) -> &AtomicU64 {
        self.buf.atomic_u64(off).expect("aligned, in bounds")
    }
    /// Copy bytes out (through the GPU when the CPU cannot see the buffer).
    pub fn read(&self, off: usize, len: usize) -> Vec<u8> {
        if !self.buf.is_cpu_visible() {
            assert!(off + len <= self.buf.len(), "in bounds");
            return super::read_via_gpu(&self.dev, self.buf.gpu_index(), self.va(off), len)
                .expect("GPU read of the scratch buffer");
        }
        let mut v = vec![0; len];
        self.buf.read(off, &mut v).expect("in bounds");
        v
    }
    /// Copy bytes in (through the GPU when the CPU cannot see the buffer).
    pub fn write(&self, off: usize, data: &[u8]) {
        if !self.buf.is_cpu_visible() {
            assert!(off + data.len() <= self.buf.len(), "in bounds");
            return super::write_via_gpu(&self.dev, self.buf.gpu_index(), self.va(off), data)
                .expect("GPU write of the scratch buffer");
        }
        self.buf.write(off, data).expect("in bounds");
    }
}
