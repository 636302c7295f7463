//! Copies and fills, stream-ordered. Copies of at least [`crate::sdma::sdma_min_bytes`]
//! go to the stream's SDMA queue (see [`crate::sdma`]); smaller copies and all fills run
//! on the command processor's DMA engine (CP DMA:
//! PM4 `DMA_DATA` in the stream's own AQL queue). Running in the stream's queue keeps
//! them in order with the stream's other work at no synchronisation cost, and they
//! complete on the stream timeline like every other command. Any GPU-mapped address
//! works: VRAM of this or another GPU of the device, host-pinned, signal or registered
//! memory.
//!
//! Each `DMA_DATA` moves at most [`CHUNK`] bytes; one AQL PM4-IB packet carries two of
//! them (its 64-byte indirect-buffer slot holds 16 dwords).

use pm4::pkt3::DmaData;

use crate::device::Device;
use crate::error::{Error, ErrorKind, Result};
use crate::queue::pm4_ib_packet;
use crate::stream::Stream;

/// Bytes per DMA_DATA command (a 2^25-byte chunk keeps every count well inside the
/// 26-bit BYTE_COUNT field).
pub const CHUNK: u64 = 1 << 25;

fn enc(e: pm4::EncodeError) -> Error {
    Error::new(ErrorKind::InvalidValue, "DMA_DATA", e.to_string())
}

/// Null and overflow checks, and HIP's length rule: a range that starts in an
/// allocation of this device (a buffer object, a managed allocation, a VMM reservation)
/// must end inside it (InvalidValue otherwise, as `hipMemcpy` / `hipMemset` report). An
/// address in no allocation kfdrt knows (XNACK pageable memory) is left to the GPU.
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
        let dev = &s.inner.dev;
        let ext = dev
            .extents
            .containing(a)
            .or_else(|| dev.managed.extent_of(a))
            .or_else(|| dev.vmm.extent_of(a));
        if let Some((start, size)) = ext {
            let room = start + size - a;
            if len > room {
                return Err(Error::new(
                    ErrorKind::InvalidValue,
                    call,
                    format!(
                        "{len:#x} bytes at {a:#x} run past the end of the allocation \
                         [{start:#x}, {:#x}) ({room:#x} bytes left)",
                        start + size
                    ),
                ));
            }
        }
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
    /// Submit `total` DMA_DATA commands, command `i` built by `cmd_at(i)` (generated as
    /// submitted: no host memory grows with a copy's length).
    fn submit_dma(
        &self,
        total: u64,
        cmd_at: impl Fn(u64) -> Dma,
        pattern: Option<u32>,
    ) -> Result<()> {
        let fam = self.inner.family;
        // Submit in bounded batches so a huge copy cannot exceed the ring.
        const BATCH: u64 = 2 * 256;
        let mut first = 0u64;
        while first < total {
            let end = (first + BATCH).min(total);
            let n = (end - first).div_ceil(2) as u32;
            let mut i = first;
            self.submit_packets(n, |ib, h| {
                let mut dw = 0usize;
                for k in i..(i + 2).min(end) {
                    let d = match cmd_at(k) {
                        Dma::Copy { src, dst, len } => DmaData::copy(src, dst, len),
                        Dma::Fill { dst, value, len } => DmaData::fill(dst, value, len),
                    };
                    dw += d.encode(fam, &mut ib.words[dw..]).map_err(enc)?;
                }
                i += 2;
                if let Some(p) = pattern {
                    // The byte pattern for unaligned fill edges lives after the commands
                    // in the same slot (the CP reads only `dw` dwords as commands).
                    ib.words[14] = p;
                    ib.words[15] = p;
                }
                Ok(pm4_ib_packet(ib.va, dw as u32, h))
            })?;
            first = end;
        }
        Ok(())
    }

    /// `hipMemcpyAsync`: copy `len` bytes from `src` to `dst` (GPU-mapped addresses of this
    /// device, any alignment) after the stream's earlier work. Overlapping ranges are
    /// undefined, as in HIP.
    pub fn memcpy(&self, dst: u64, src: u64, len: u64) -> Result<()> {
        check(self, "hipMemcpyAsync", &[dst, src], len)?;
        if len == 0 {
            return Ok(());
        }
        if len >= crate::sdma::sdma_min_bytes() && self.memcpy_sdma(dst, src, len)? {
            return Ok(());
        }
        let cmd_at = |i: u64| {
            let off = i * CHUNK;
            Dma::Copy {
                src: src + off,
                dst: dst + off,
                len: (len - off).min(CHUNK) as u32,
            }
        };
        self.submit_dma(len.div_ceil(CHUNK), cmd_at, None)
    }

    /// `hipMemsetD32Async`: fill `count` dwords at `dst` (4-byte aligned) with `value`.
    pub fn memset_d32(&self, dst: u64, value: u32, count: u64) -> Result<()> {
        let call = "hipMemsetD32Async";
        let len = count
            .checked_mul(4)
            .ok_or_else(|| Error::new(ErrorKind::InvalidValue, call, "count overflows"))?;
        check(self, call, &[dst], len)?;
        if dst % 4 != 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("dst {dst:#x} is not 4-byte aligned"),
            ));
        }
        if len == 0 {
            return Ok(());
        }
        let cmd_at = |i: u64| {
            let off = i * CHUNK;
            Dma::Fill {
                dst: dst + off,
                value,
                len: (len - off).min(CHUNK) as u32,
            }
        };
        self.submit_dma(len.div_ceil(CHUNK), cmd_at, None)
    }

    /// `hipMemsetAsync`: set `len` bytes at `dst` to `byte`, any alignment. The aligned
    /// middle is a CP DMA fill; unaligned head and tail bytes are copied from the pattern
    /// held in the packet's own indirect-buffer slot.
    pub fn memset(&self, dst: u64, byte: u8, len: u64) -> Result<()> {
        let call = "hipMemsetAsync";
        check(self, call, &[dst], len)?;
        if len == 0 {
            return Ok(());
        }
        let pattern = u32::from_ne_bytes([byte; 4]);
        let head = ((4 - dst % 4) % 4).min(len);
        let body = (len - head) / 4 * 4;
        let tail = len - head - body;
        let fill_at = |i: u64| {
            let off = i * CHUNK;
            Dma::Fill {
                dst: dst + head + off,
                value: pattern,
                len: (body - off).min(CHUNK) as u32,
            }
        };
        // Edges: copies from the slot's pattern dwords (src filled in below per slot).
        let mut edges = Vec::new();
        if head > 0 {
            edges.push((dst, head));
        }
        if tail > 0 {
            edges.push((dst + head + body, tail));
        }
        if body > 0 {
            self.submit_dma(body.div_ceil(CHUNK), fill_at, None)?;
        }
        if !edges.is_empty() {
            let fam = self.inner.family;
            self.submit_packets(1, |ib, h| {
                let pat_va = ib.va + 14 * 4;
                let mut dw = 0;
                for &(d, n) in &edges {
                    dw += DmaData::copy(pat_va, d, n as u32)
                        .encode(fam, &mut ib.words[dw..])
                        .map_err(enc)?;
                }
                ib.words[14] = pattern;
                ib.words[15] = pattern;
                Ok(pm4_ib_packet(ib.va, dw as u32, h))
            })?;
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
