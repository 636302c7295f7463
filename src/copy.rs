//! Copies and fills, stream-ordered. Copies of at least [`crate::sdma::sdma_min_bytes`]
//! go to the stream's SDMA queue (see [`crate::sdma`]); smaller copies and all fills run
//! on the command processor's DMA engine (CP DMA:
//! PM4 `DMA_DATA` in the stream's own AQL queue). Running in the stream's queue keeps
//! them in order with the stream's other work at no synchronisation cost, and they
//! complete on the stream timeline like every other command. Any allocation of the
//! device works: VRAM of this or another GPU of the device, host-pinned, signal or
//! registered memory; other addresses are refused (see `check`).
//!
//! Each `DMA_DATA` moves at most [`crate::cmdbuf::Target::dma_max_bytes`] bytes (32 MiB, or
//! 32736 on gfx11+ whose CP DMA takes at most 32767 bytes a packet); one AQL PM4-IB
//! packet carries two of them (its 64-byte indirect-buffer slot holds 16 dwords, with
//! room for the PRED_EXEC that keeps them on one XCC of a multi-XCC GPU).

use pm4::pkt3::DmaData;

use crate::cmdbuf::CmdBuf;
use crate::device::Device;
use crate::error::{Error, ErrorKind, Result};
use crate::stream::Stream;

/// Bytes per DMA_DATA command below gfx11 (a 2^25-byte chunk keeps every count well
/// inside the 26-bit BYTE_COUNT field); see [`crate::cmdbuf::Target::dma_max_bytes`].
pub const CHUNK: u64 = 1 << 25;

/// Null and overflow checks, and HIP's rules for the memory: each range must lie in one
/// allocation of this device (a buffer object, IPC import, managed allocation or VMM
/// mapping) and end inside the length it was allocated with (InvalidValue otherwise, as
/// `hipMemcpy` / `hipMemset` report; see `DeviceInner::check_gpu_range`, which leaves
/// unknown addresses to the GPU only under XNACK). A length of 0 is checked by the callers
/// first: it does nothing and succeeds whatever the addresses (CLR checks the size first).
fn check(s: &Stream, call: &'static str, addrs: &[u64], len: u64) -> Result<()> {
    for &a in addrs {
        if a == 0 {
            return Err(Error::new(ErrorKind::InvalidValue, call, "null address"));
        }
        if a.checked_add(len).is_none() {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("{a:#x}+{len:#x} overflows"),
            ));
        }
        s.inner.dev.check_gpu_range(call, a, len)?;
    }
    Ok(())
}

/// One DMA_DATA command of a copy or fill.
#[derive(Clone, Copy)]
enum Dma {
    Copy { src: u64, dst: u64, len: u32 },
    Fill { dst: u64, value: u32, len: u32 },
}

impl Stream {
    /// Submit `total` DMA_DATA commands (`cmd_at(i)`), [`crate::cmdbuf::Target::dma_per_slot`]
    /// per packet, a command buffer at a time.
    fn submit_dma(&self, total: u64, cmd_at: impl Fn(u64) -> Dma) -> Result<()> {
        let t = self.target();
        let per = t.dma_per_slot() as u64;
        let mut i = 0u64;
        while i < total {
            let mut c = CmdBuf::new(t);
            while i < total && !c.is_full() {
                let mut ds = [DmaData::fill(0, 0, 0); 2];
                let group = (total.min(i + per) - i) as usize;
                for (k, d) in ds.iter_mut().take(group).enumerate() {
                    *d = match cmd_at(i + k as u64) {
                        Dma::Copy { src, dst, len } => DmaData::copy(src, dst, len),
                        Dma::Fill { dst, value, len } => DmaData::fill(dst, value, len),
                    };
                }
                c.dma(&ds[..group])?;
                i += group as u64;
            }
            self.submit(&c, crate::stream::Place::Any, None)?;
        }
        Ok(())
    }

    /// `hipMemcpyAsync`: copy `len` bytes from `src` to `dst` (any alignment) after the
    /// stream's earlier work. Both ranges must lie in allocations of this device
    /// ([`Device::allocation_at`]) within the lengths asked for; anything else is
    /// InvalidValue, as CLR's `hipMemcpyAsync` answers (pageable host memory goes through
    /// [`Stream::memcpy_staged`]). A length of 0 succeeds. Overlapping ranges are
    /// undefined, as in HIP.
    pub fn memcpy(&self, dst: u64, src: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        check(self, "hipMemcpyAsync", &[dst, src], len)?;
        // A copy between GPUs works without peer access, as in HIP: the buffers are mapped
        // on this stream's GPU for its copy engines (memory::Peers::map_for_copy).
        let core = &self.inner.dev.core;
        core.peers
            .map_for_copy(core, self.inner.gpu_index, src, len)?;
        core.peers
            .map_for_copy(core, self.inner.gpu_index, dst, len)?;
        if len >= crate::sdma::sdma_min_bytes() && self.memcpy_sdma(dst, src, len)? {
            return Ok(());
        }
        let chunk = self.inner.family.dma_max_bytes() as u64;
        let cmd_at = |i: u64| {
            let off = i * chunk;
            Dma::Copy {
                src: src + off,
                dst: dst + off,
                len: (len - off).min(chunk) as u32,
            }
        };
        self.submit_dma(len.div_ceil(chunk), cmd_at)
    }

    /// `hipMemsetD32Async`: fill `count` dwords at `dst` (4-byte aligned) with `value`.
    /// The range is checked as for [`Stream::memcpy`] (CLR's `ihipMemset_validate`); a
    /// count of 0 succeeds whatever `dst`.
    pub fn memset_d32(&self, dst: u64, value: u32, count: u64) -> Result<()> {
        let call = "hipMemsetD32Async";
        let len = count
            .checked_mul(4)
            .ok_or_else(|| Error::new(ErrorKind::InvalidValue, call, "count overflows"))?;
        if len == 0 {
            return Ok(());
        }
        check(self, call, &[dst], len)?;
        if dst % 4 != 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("dst {dst:#x} is not 4-byte aligned"),
            ));
        }
        let chunk = self.inner.family.dma_max_bytes() as u64;
        let cmd_at = |i: u64| {
            let off = i * chunk;
            Dma::Fill {
                dst: dst + off,
                value,
                len: (len - off).min(chunk) as u32,
            }
        };
        self.submit_dma(len.div_ceil(chunk), cmd_at)
    }

    /// `hipMemsetAsync`: set `len` bytes at `dst` to `byte`, any alignment; `dst` checked
    /// as for [`Stream::memcpy`] (so `hipMemset` of the stack is InvalidValue, as in
    /// CLR), and a length of 0 succeeds whatever `dst`. The aligned
    /// middle is a CP DMA fill; unaligned head and tail bytes are copied from the pattern
    /// held in the packet's own indirect-buffer slot.
    pub fn memset(&self, dst: u64, byte: u8, len: u64) -> Result<()> {
        let call = "hipMemsetAsync";
        if len == 0 {
            return Ok(());
        }
        check(self, call, &[dst], len)?;
        let pattern = u32::from_ne_bytes([byte; 4]);
        let head = ((4 - dst % 4) % 4).min(len);
        let body = (len - head) / 4 * 4;
        let tail = len - head - body;
        let chunk = self.inner.family.dma_max_bytes() as u64;
        let fill_at = |i: u64| {
            let off = i * chunk;
            Dma::Fill {
                dst: dst + head + off,
                value: pattern,
                len: (body - off).min(chunk) as u32,
            }
        };
        // Edges: copies from the pattern held in the command's own IB (see
        // CmdBuf::fill_edge).
        let mut c = CmdBuf::new(self.target());
        if head > 0 {
            c.fill_edge(dst, head as u32, pattern)?;
        }
        if tail > 0 {
            c.fill_edge(dst + head + body, tail as u32, pattern)?;
        }
        if body > 0 {
            self.submit_dma(body.div_ceil(chunk), fill_at)?;
        }
        if !c.is_empty() {
            self.submit(&c, crate::stream::Place::Any, None)?;
        }
        Ok(())
    }
}

impl Device {
    /// `hipMemcpy`: a copy on GPU `gpu`'s null stream, then a wait for it (null-stream
    /// semantics: it is ordered after the GPU's blocking streams' earlier work).
    pub fn memcpy(&self, gpu: usize, dst: u64, src: u64, len: u64) -> Result<()> {
        let s = self.null_stream(gpu)?;
        s.memcpy(dst, src, len)?;
        s.synchronize()
    }

    /// `hipMemset`: a fill on GPU `gpu`'s null stream, then a wait for it.
    pub fn memset(&self, gpu: usize, dst: u64, byte: u8, len: u64) -> Result<()> {
        let s = self.null_stream(gpu)?;
        s.memset(dst, byte, len)?;
        s.synchronize()
    }
}
