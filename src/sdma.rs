//! [`SdmaQueue`]: a KFD SDMA queue — a [`UserQueue`] whose write pointer counts bytes —
//! and the stream-ordered copy path that uses it for large copies.
//!
//! Ordering against the stream's compute queue uses two 32-bit words per stream: the
//! AQL queue writes `go = N` after the stream's earlier work; the SDMA queue polls
//! `go == N`, copies, and FENCEs `done = N`; the AQL queue then waits for `done == N`
//! before later work (so the copy completes on the stream timeline). Each stream gets
//! its own SDMA queue: a POLL_REGMEM in a shared SDMA queue could stall another stream's
//! copy behind a wait it does not depend on (the same reasoning as for AQL queues).

use std::sync::Arc;

use kfd::abi;
use pm4::sdma::{CopyLinear, PollRegmem, SdmaPacket, SdmaRingWriter};
use pm4::SdmaVersion;

use crate::cmdbuf::CmdBuf;
use crate::device::DeviceInner;
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{Buffer, MemoryKind};
use crate::ring::{UserQueue, WptrUnit};
use crate::sync::lock;

/// SDMA ring size in bytes.
pub const SDMA_RING_BYTES: usize = 64 << 10;

/// COPY_LINEAR packets per ordered copy piece (7-8 dwords each: a piece takes well under
/// half the ring, with the submit's worst-case end-of-ring padding).
/// `KFDRT_SDMA_PIECE_PACKETS` (1..=256) lowers it, so tests reach several pieces with
/// small copies.
fn piece_packets() -> u64 {
    std::env::var("KFDRT_SDMA_PIECE_PACKETS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(256, |n| n.clamp(1, 256))
}

/// An SDMA queue on one GPU.
pub struct SdmaQueue {
    uq: UserQueue,
    version: SdmaVersion,
}

impl std::fmt::Debug for SdmaQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SdmaQueue(id={} {:?})", self.uq.queue_id(), self.version)
    }
}

impl SdmaQueue {
    /// Create an SDMA queue (PCIe engines) on GPU `gpu_index`.
    pub(crate) fn new(dev: &Arc<DeviceInner>, gpu_index: usize) -> Result<SdmaQueue> {
        let core = &dev.core;
        let gpu = core.gpu(gpu_index)?;
        let version = gpu.sdma_version;
        let ring = Buffer::alloc(core, MemoryKind::HostPinned, gpu_index, SDMA_RING_BYTES)?;
        // One page: the write pointer at 0 and the read pointer at 8 (kfd_queue.c wants
        // each in the first page of a one-page mapping).
        let ptrs = Buffer::alloc(core, MemoryKind::Signal, gpu_index, 4096)?;
        let args = abi::CreateQueueArgs {
            queue_type: abi::KFD_IOC_QUEUE_TYPE_SDMA,
            queue_percentage: abi::KFD_MAX_QUEUE_PERCENTAGE,
            queue_priority: 7,
            ..Default::default()
        };
        let uq = UserQueue::create(
            core,
            gpu_index,
            WptrUnit::Byte,
            ring,
            ptrs,
            0,
            8,
            args,
            "SdmaQueue::new",
        )?;
        Ok(SdmaQueue { uq, version })
    }

    /// KFD queue id.
    pub fn queue_id(&self) -> u32 {
        self.uq.queue_id()
    }

    /// Write `pkts` to the ring (never straddling its end; waiting for space, watching
    /// `fault` as [`UserQueue::reserve`] does), then publish.
    pub(crate) fn submit(
        &self,
        pkts: &[SdmaPacket<'_>],
        fault: &dyn Fn() -> Option<String>,
    ) -> Result<()> {
        sdma_submit(&self.uq, self.version, pkts, fault)
    }

    /// POLL_REGMEM `*addr == value`, the copies, FENCE `*fence = value`. `len` is at
    /// most [`SdmaQueue::piece_bytes`], so the packets fit the ring.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn ordered_copy(
        &self,
        go: u64,
        value: u32,
        fence: u64,
        src: u64,
        dst: u64,
        len: u64,
        fault: &dyn Fn() -> Option<String>,
    ) -> Result<()> {
        let mut pkts: Vec<SdmaPacket<'_>> = Vec::with_capacity(4);
        pkts.push(SdmaPacket::PollRegmem(PollRegmem {
            func: pm4::pkt3::CompareFn::Equal,
            mem_poll: true,
            hdp_flush: false,
            addr: go,
            reference: value,
            mask: u32::MAX,
            interval: 10,
            retry_count: 0xfff,
        }));
        for c in pm4::sdma::copy_linear_split(src, dst, len, self.version) {
            pkts.push(SdmaPacket::CopyLinear(CopyLinear { ..c }));
        }
        pkts.push(SdmaPacket::Fence(crate::cmdbuf::sdma_fence(
            self.version,
            fence,
            value,
        )));
        self.submit(&pkts, fault)
    }

    /// Bytes one ordered copy moves at most: 256 COPY_LINEAR packets. The
    /// POLL_REGMEM in front of a piece is released only after the piece was submitted, so
    /// a piece must fit the ring (then the ring drains piece by piece).
    pub(crate) fn piece_bytes(&self) -> u64 {
        piece_packets() * self.version.copy_chunk_bytes() as u64
    }
}

/// Write SDMA packets into `uq` and publish: room for every packet plus its worst-case
/// end-of-ring NOP padding is reserved first, so encoding never meets a full ring.
pub(crate) fn sdma_submit(
    uq: &UserQueue,
    version: SdmaVersion,
    pkts: &[SdmaPacket<'_>],
    fault: &dyn Fn() -> Option<String>,
) -> Result<()> {
    let call = "SdmaQueue::submit";
    let need: u64 = pkts.iter().map(|p| p.dwords(version) as u64 * 4 * 2).sum();
    let writer = SdmaRingWriter::new(uq.ring_words(), version)
        .ok_or_else(|| Error::new(ErrorKind::Driver, call, "ring size is not a power of two"))?;
    let r = uq.reserve(need, fault)?;
    let mut w = r.wptr();
    for p in pkts {
        w = writer
            .write(w, p)
            .map_err(|e| Error::new(ErrorKind::InvalidValue, call, e.to_string()).with_source(e))?;
    }
    r.publish(w);
    Ok(())
}

/// A stream's link to its SDMA queue.
pub(crate) struct SdmaLink {
    /// None when no SDMA queue could be created (copies then use CP DMA).
    queue: Option<SdmaQueue>,
    /// `go` at offset 0, `done` at offset 4.
    words: Option<Buffer>,
    seq: u32,
}

/// Copies at least this large go to SDMA (`KFDRT_SDMA_MIN_BYTES`, default 1 MiB);
/// smaller ones run on CP DMA, which needs no cross-engine handshake.
pub fn sdma_min_bytes() -> u64 {
    std::env::var("KFDRT_SDMA_MIN_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1 << 20)
}

impl crate::stream::Stream {
    /// The KFD queue id of the stream's SDMA queue, once a copy has used it.
    pub fn sdma_queue_id(&self) -> Option<u32> {
        let g = lock(&self.inner.sdma);
        g.as_ref()
            .and_then(|l| l.queue.as_ref())
            .map(|q| q.queue_id())
    }

    /// Try the SDMA path for a copy; Ok(false) when the stream has no SDMA queue (the
    /// caller falls back to CP DMA).
    pub(crate) fn memcpy_sdma(&self, dst: u64, src: u64, len: u64) -> Result<bool> {
        let s = &self.inner;
        let mut g = lock(&s.sdma);
        if g.is_none() {
            let link = match (
                SdmaQueue::new(&s.dev, s.gpu_index),
                Buffer::alloc(&s.dev.core, MemoryKind::Signal, s.gpu_index, 4096),
            ) {
                (Ok(q), Ok(w)) => SdmaLink {
                    queue: Some(q),
                    words: Some(w),
                    seq: 0,
                },
                _ => SdmaLink {
                    queue: None,
                    words: None,
                    seq: 0,
                },
            };
            *g = Some(link);
        }
        let Some(link) = g.as_mut() else {
            return Ok(false);
        };
        let (Some(q), Some(words)) = (&link.queue, &link.words) else {
            return Ok(false);
        };
        let (go, done) = (words.va(), words.va() + 4);
        let fam = s.family;
        let gpu = s.gpu_index;
        let fault = || s.dev.poll_faults(gpu);
        let piece = q.piece_bytes();
        let mut off = 0;
        // One go/done handshake per piece: the ring never holds more than fits behind
        // one POLL_REGMEM, so copies of any size drain.
        while off < len {
            let n_bytes = (len - off).min(piece);
            link.seq = link.seq.wrapping_add(1).max(1);
            let n = link.seq;
            q.ordered_copy(go, n, done, src + off, dst + off, n_bytes, &fault)
                .inspect_err(|e| {
                    if e.kind() == ErrorKind::LaunchFailure {
                        s.fail(e.to_string());
                    }
                })?;
            let cond = crate::cmd::WaitCondition::Poll {
                function: pm4::pkt3::CompareFn::Equal,
                reference: n as u64,
                mask: u32::MAX as u64,
            };
            let mut c = CmdBuf::new(fam);
            c.write_mem(go, n as u64, 32)?;
            c.wait_mem(done, 32, cond)?;
            self.submit(&c, crate::stream::Place::Dedicated, None)?;
            off += n_bytes;
        }
        Ok(true)
    }
}
