//! [`CmdBuf`]: the commands of one submission, in the hardware's vocabulary (wait on
//! memory, write memory, wait on a signal or timeline point, barrier, timestamp, copy,
//! fill, kernel dispatch), encoded completely before any ring slot is reserved: an
//! encoding error returns before the ring is touched, so a submission is all or nothing.
//!
//! Every per-family encoding choice is made here, in one place (the facts and their
//! sources are in `firmware-notes/firmware-rules.md`):
//!
//! - 32-bit waits: WAIT_REG_MEM on every family. 64-bit waits: WAIT_REG_MEM64 on gfx10+;
//!   on gfx9, whose CP has none (`soc15d.h`), the AQL BARRIER_VALUE vendor packet, which
//!   compares signed values (see [`barrier_value_for`]);
//! - timeline points (`value <= threshold`): WAIT_REG_MEM64 on gfx10+, BARRIER_VALUE LT
//!   on gfx9;
//! - CP DMA: at most [`Target::dma_max_bytes`] per DMA_DATA (32736 on gfx11+);
//! - timestamps: COPY_DATA of the GPU clock (no end-of-pipe event, so no EOP buffer is
//!   needed: gfx94x AQL queues have none);
//! - multi-XCC GPUs: side effects (writes, DMA, timestamps) under PRED_EXEC(XCC 0), waits
//!   unpredicated.
//!
//! A command is one AQL packet: either a complete packet (barriers, dispatches), or PM4
//! commands that go into the slot's indirect buffer and run from a PM4-IB packet. The
//! queue fills in each packet's completion signal and IB address when it publishes.

use pm4::aql::{AqlPacket, SignalCondition};
use pm4::pkt3::{
    CachePolicy, CompareFn, CopyData, DmaData, MemSpace, PredExec, WaitOperation, WaitRegMem,
    WaitRegMem64, WriteData,
};
use pm4::GfxFamily;

use crate::cmd::WaitCondition;
use crate::error::{Error, ErrorKind, Result};

/// Dwords of indirect buffer each ring slot has (the queue's per-slot IB area).
pub(crate) const IB_DWORDS: usize = 16;
/// Commands (AQL packets) one [`CmdBuf`] holds.
pub(crate) const CMDBUF_PACKETS: usize = 4;

/// What the packets for one GPU must respect: its family's firmware and its XCC count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    /// Packet family.
    pub family: GfxFamily,
    /// XCCs in the partition (MI300X: 8); each runs the PM4 of an indirect buffer.
    pub num_xcc: u32,
}

impl Target {
    /// The target of a GPU of the device.
    pub fn of(gpu: &crate::devcore::Gpu) -> Target {
        Target {
            family: gpu.family,
            num_xcc: gpu.node.properties.xcc_count(),
        }
    }

    /// Bytes per DMA_DATA: Mesa `cp_dma_max_byte_count` (32767 on gfx11+, the 26-bit
    /// BYTE_COUNT before), rounded down to its 32-byte alignment; 32 MiB chunks below gfx11.
    pub const fn dma_max_bytes(self) -> u32 {
        match self.family {
            GfxFamily::Gfx9 | GfxFamily::Gfx10 => 1 << 25,
            GfxFamily::Gfx11 | GfxFamily::Gfx12 => 32767 & !31,
        }
    }

    /// Whether the CP has WAIT_REG_MEM64 (`nvd.h`, gfx10+; gfx9's `soc15d.h` has none).
    pub const fn has_wait_reg_mem64(self) -> bool {
        !matches!(self.family, GfxFamily::Gfx9)
    }

    /// DMA_DATA commands that fit one 16-dword slot with their predication.
    pub const fn dma_per_slot(self) -> usize {
        2
    }
}

/// How [`CmdBuf::wait_mem`] carries out a wait on memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MemWait {
    /// Encoded into the buffer (or nothing to wait for: an always-true condition).
    Encoded,
    /// Nothing encoded: gfx9 has no packet for this 64-bit compare; the stream runs the
    /// wait kernel (`crate::waitkernel`) instead.
    WaitKernel,
}

/// CP poll interval used by kfdrt's waits (in the CP's poll-interval units).
pub const POLL_INTERVAL: u16 = 4;

/// One encoded command.
#[derive(Clone, Copy)]
pub(crate) enum Cmd {
    /// Not used (the tail of the fixed array).
    Unused,
    /// A complete AQL packet, encoded (dword 0 is its header); the completion signal
    /// (dwords 14-15) is set at publication.
    Packet([u32; 16]),
    /// PM4 commands for the slot's indirect buffer. `ib_reloc`: a dword index whose
    /// 64-bit address (lo, hi) is relative to the IB itself and gets the IB address added.
    Ib {
        words: [u32; IB_DWORDS],
        dwords: u8,
        ib_reloc: Option<u8>,
    },
}

/// The encoded commands of one submission (no heap: a fixed array of
/// [`CMDBUF_PACKETS`] commands).
#[derive(Clone, Copy)]
pub(crate) struct CmdBuf {
    t: Target,
    n: usize,
    cmds: [Cmd; CMDBUF_PACKETS],
}

fn enc_err(e: pm4::EncodeError) -> Error {
    Error::new(ErrorKind::InvalidValue, "pm4 encode", e.to_string()).with_source(e)
}

impl CmdBuf {
    /// An empty buffer for `t`.
    pub(crate) const fn new(t: Target) -> CmdBuf {
        CmdBuf {
            t,
            n: 0,
            cmds: [Cmd::Unused; CMDBUF_PACKETS],
        }
    }

    /// A buffer holding just `c`.
    pub(crate) fn of(t: Target, c: Cmd) -> CmdBuf {
        let mut b = CmdBuf::new(t);
        b.cmds[0] = c;
        b.n = usize::from(!matches!(c, Cmd::Unused));
        b
    }

    /// Commands (= AQL packets) encoded so far.
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    /// Whether no command was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Whether no more command fits.
    pub(crate) fn is_full(&self) -> bool {
        self.n == CMDBUF_PACKETS
    }

    /// The encoded commands.
    pub(crate) fn cmds(&self) -> &[Cmd] {
        &self.cmds[..self.n]
    }

    fn push(&mut self, c: Cmd) -> Result<()> {
        let slot = self.cmds.get_mut(self.n).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidValue,
                "CmdBuf",
                format!("more than {CMDBUF_PACKETS} commands in one submission"),
            )
        })?;
        *slot = c;
        self.n += 1;
        Ok(())
    }

    fn push_packet(&mut self, p: AqlPacket) -> Result<()> {
        self.push(Cmd::Packet(p.encode()))
    }

    /// Encode PM4 commands with `body` (given the IB dwords; returns dwords used).
    fn push_ib(
        &mut self,
        pred: bool,
        body: impl FnOnce(&mut [u32]) -> Result<usize>,
    ) -> Result<usize> {
        if self.is_full() {
            return self.push(Cmd::Unused).map(|_| 0);
        }
        let mut words = [0u32; IB_DWORDS];
        let (n, start) = if pred {
            on_one_xcc(self.t, &mut words, body)?
        } else {
            (body(&mut words)?, 0)
        };
        self.push(Cmd::Ib {
            words,
            dwords: n as u8,
            ib_reloc: None,
        })?;
        Ok(start)
    }

    /// Wait until `c` holds for the `bits`-wide value at `addr`: WAIT_REG_MEM, or for 64
    /// bits WAIT_REG_MEM64 (gfx10+) / BARRIER_VALUE (gfx9). Every XCC waits.
    ///
    /// On gfx9 an unsigned 64-bit compare over bit 63 with no exact signed BARRIER_VALUE
    /// form (see [`barrier_value_for`]) is no packet at all: nothing is encoded and the
    /// answer is [`MemWait::WaitKernel`] (the caller runs `crate::waitkernel`'s kernel).
    /// 32-bit waits, and every wait on gfx10+, are always [`MemWait::Encoded`].
    pub(crate) fn wait_mem(&mut self, addr: u64, bits: u32, c: WaitCondition) -> Result<MemWait> {
        let WaitCondition::Poll {
            function,
            reference,
            mask,
        } = c
        else {
            return Ok(MemWait::Encoded);
        };
        if bits == 64 && !self.t.has_wait_reg_mem64() {
            return match barrier_value_for(addr, c, 0) {
                Ok(p) => self.push_packet(p).map(|_| MemWait::Encoded),
                Err(e) if e.kind() == ErrorKind::NotSupported => Ok(MemWait::WaitKernel),
                Err(e) => Err(e),
            };
        }
        if bits == 32 && addr % 4 == 0 && !self.is_full() {
            // The enqueue hot path (hipStreamWaitValue32): no encoder validation.
            self.push(wait_reg_mem32(
                function,
                addr,
                reference as u32,
                mask as u32,
            ))?;
        } else {
            self.wait_mem_encoded(addr, bits, function, reference, mask)?;
        }
        Ok(MemWait::Encoded)
    }

    /// The PM4 wait of [`CmdBuf::wait_mem`] through the pm4 encoders (with their
    /// validation).
    fn wait_mem_encoded(
        &mut self,
        addr: u64,
        bits: u32,
        function: CompareFn,
        reference: u64,
        mask: u64,
    ) -> Result<()> {
        let fam = self.t.family;
        self.push_ib(false, |out| {
            if bits == 32 {
                WaitRegMem::memory(function, addr, reference as u32, mask as u32, POLL_INTERVAL)
                    .encode(fam, out)
                    .map_err(enc_err)
            } else {
                WaitRegMem64 {
                    function,
                    mem_space: MemSpace::Memory,
                    operation: WaitOperation::WaitRegMem,
                    engine: 0,
                    cache_policy: CachePolicy::Lru,
                    addr,
                    reference,
                    mask,
                    poll_interval: POLL_INTERVAL,
                }
                .encode(fam, out)
                .map_err(enc_err)
            }
        })
        .map(|_| ())
    }

    /// Wait until the signal `handle`'s value is at most `threshold` (a timeline point;
    /// timeline values are never negative): WAIT_REG_MEM64 `<=` on gfx10+, BARRIER_VALUE
    /// `value < threshold + 1` on gfx9 (signal values are signed, as the CP compares them).
    pub(crate) fn wait_point(&mut self, handle: u64, threshold: i64) -> Result<()> {
        if !self.t.has_wait_reg_mem64() {
            return self.push(Cmd::barrier_value_point(handle, threshold));
        }
        self.wait_mem(
            handle + pm4::hsa::SIGNAL_VALUE_OFFSET,
            64,
            WaitCondition::Poll {
                function: CompareFn::LessEqual,
                reference: threshold as u64,
                mask: u64::MAX,
            },
        )
        .map(|_| ())
    }

    /// Wait until every signal in `deps` (0 = none) reaches 0: a barrier-AND. No
    /// runtime path needs one today (callback holds wait on a callback line, see
    /// `crate::callback`); the builder keeps it for the kernel-graph work to come.
    #[allow(dead_code)]
    pub(crate) fn barrier_and(&mut self, deps: [u64; 5]) -> Result<()> {
        self.push(Cmd::Packet(AqlPacket::barrier_and(deps, 0).encode()))
    }

    /// A 32-bit WRITE_DATA, or for 64 bits a COPY_DATA of the immediate with a 64-bit
    /// count (one 64-bit write, never two 32-bit halves), with write confirm, on XCC 0.
    pub(crate) fn write_mem(&mut self, addr: u64, value: u64, bits: u32) -> Result<()> {
        if bits == 32 && addr % 4 == 0 && !self.is_full() {
            // The enqueue hot path (hipStreamWriteValue32): constant words, no encoder.
            return self.push(write_data32(self.t, addr, value as u32));
        }
        self.write_mem_encoded(addr, value, bits)
    }

    /// [`CmdBuf::write_mem`] through the pm4 encoders (with their validation).
    fn write_mem_encoded(&mut self, addr: u64, value: u64, bits: u32) -> Result<()> {
        let fam = self.t.family;
        self.push_ib(true, |out| {
            if bits == 32 {
                WriteData::memory(addr, &[value as u32])
                    .encode(fam, out)
                    .map_err(enc_err)
            } else {
                CopyData::imm64_to_mem(value, addr)
                    .encode(fam, out)
                    .map_err(enc_err)
            }
        })
        .map(|_| ())
    }

    /// The 64-bit GPU clock written to `addr` by COPY_DATA (source GPU_CLOCK_COUNT), on
    /// XCC 0. The AQL packet carrying it has the barrier bit, so the stream's earlier work
    /// has completed when the CP copies the clock.
    pub(crate) fn timestamp(&mut self, addr: u64) -> Result<()> {
        let fam = self.t.family;
        self.push_ib(true, |out| {
            CopyData::gpu_clock_to_mem(addr)
                .encode(fam, out)
                .map_err(enc_err)
        })
        .map(|_| ())
    }

    /// DMA_DATA copies and fills (each at most [`Target::dma_max_bytes`], at most
    /// [`Target::dma_per_slot`]) in one packet, on XCC 0.
    pub(crate) fn dma(&mut self, cmds: &[DmaData]) -> Result<()> {
        let t = self.t;
        self.push_ib(true, |out| dma_body(t, out, cmds)).map(|_| ())
    }

    /// Copy `len` (< 4) bytes of `pattern` to `dst` with DMA_DATA whose source is the
    /// last dword of this command's own IB (unaligned fill edges), on XCC 0.
    pub(crate) fn fill_edge(&mut self, dst: u64, len: u32, pattern: u32) -> Result<()> {
        let t = self.t;
        let src = ((IB_DWORDS - 1) * 4) as u64;
        let start = self.push_ib(true, |out| {
            dma_body(t, out, &[DmaData::copy(src, dst, len)])
        })?;
        if let Some(Cmd::Ib {
            words, ib_reloc, ..
        }) = self.cmds[..self.n].last_mut()
        {
            words[IB_DWORDS - 1] = pattern;
            // DMA_DATA: header, control, SRC_ADDR_LO, SRC_ADDR_HI, ...
            *ib_reloc = Some((start + 2) as u8);
        }
        Ok(())
    }

    /// Any AQL packet as given (tests of the CP's error paths).
    #[cfg(test)]
    pub(crate) fn raw_packet(&mut self, p: AqlPacket) -> Result<()> {
        self.push_packet(p)
    }

    /// PM4 words as given, in the slot's IB (tests of the CP's error paths).
    #[cfg(test)]
    pub(crate) fn raw_pm4(&mut self, words: &[u32]) -> Result<()> {
        self.push_ib(false, |out| {
            let dst = out.get_mut(..words.len()).ok_or_else(|| {
                Error::new(
                    ErrorKind::InvalidValue,
                    "CmdBuf::raw_pm4",
                    "too many dwords",
                )
            })?;
            dst.copy_from_slice(words);
            Ok(words.len())
        })
        .map(|_| ())
    }
}

impl Cmd {
    /// The single command of [`CmdBuf::wait_point`] (`value <= threshold` on a timeline)
    /// where it is one packet without PM4: gfx9's BARRIER_VALUE `value < threshold + 1`.
    /// None where the wait is a WAIT_REG_MEM64 (gfx10+: build it with a [`CmdBuf`]).
    #[inline]
    pub(crate) fn wait_point(t: Target, handle: u64, threshold: i64) -> Option<Cmd> {
        (!t.has_wait_reg_mem64()).then(|| Cmd::barrier_value_point(handle, threshold))
    }

    /// gfx9's timeline wait: BARRIER_VALUE `value < threshold + 1` (signal values are
    /// signed, as the CP compares them; timeline values are never negative).
    #[inline]
    fn barrier_value_point(handle: u64, threshold: i64) -> Cmd {
        Cmd::Packet(barrier_value_point_words(handle, threshold))
    }

    /// The single command of [`CmdBuf::write_mem`]`(addr, value, 32)` for a 4-byte
    /// aligned `addr` (the hipStreamWriteValue32 hot path), or None.
    #[inline]
    pub(crate) fn write_mem32(t: Target, addr: u64, value: u32) -> Option<Cmd> {
        (addr % 4 == 0).then(|| write_data32(t, addr, value))
    }

    /// The single command of a 32-bit [`CmdBuf::wait_mem`] for a 4-byte aligned `addr`
    /// (the hipStreamWaitValue32 hot path), or None (an always-true condition is no
    /// command at all).
    #[inline]
    pub(crate) fn wait_mem32(addr: u64, c: WaitCondition) -> Option<Cmd> {
        match c {
            WaitCondition::Poll {
                function,
                reference,
                mask,
            } if addr % 4 == 0 => Some(wait_reg_mem32(
                function,
                addr,
                reference as u32,
                mask as u32,
            )),
            _ => None,
        }
    }
}

/// The packet of [`Cmd::wait_point`] on gfx9 (no completion signal).
#[inline(always)]
fn barrier_value_point_words(handle: u64, threshold: i64) -> [u32; 16] {
    pm4::aql::BarrierValue {
        control: pm4::aql::PacketControl::SYSTEM_BARRIER,
        signal: handle,
        value: threshold.saturating_add(1),
        mask: -1,
        cond: SignalCondition::Lt,
        completion_signal: 0,
    }
    .encode()
}

/// [`Cmd::wait_point`]'s gfx9 packet with its completion signal (the hipStreamWaitEvent
/// hot path encodes it whole before reserving a ring slot).
#[inline(always)]
pub(crate) fn barrier_value_point_packet(
    handle: u64,
    threshold: i64,
    completion: u64,
) -> [u32; 16] {
    let mut w = barrier_value_point_words(handle, threshold);
    let at = pm4::aql::COMPLETION_SIGNAL_OFFSET / 4;
    w[at] = completion as u32;
    w[at + 1] = (completion >> 32) as u32;
    w
}

/// Dwords of a [`SmallIb`]: the longest single command of the enqueue hot path (WAIT_REG_MEM,
/// or PRED_EXEC + a one-value WRITE_DATA: 7).
pub(crate) const SMALL_IB_DWORDS: usize = 7;
const _: () = assert!(SMALL_IB_DWORDS <= IB_DWORDS && WaitRegMem::DWORDS <= SMALL_IB_DWORDS);

/// A short PM4 command encoded completely before its ring slot is reserved (the
/// single-command enqueue hot path; `AqlQueue` copies the words into the slot's IB area):
/// its words, of which the first `dwords` are the command.
pub(crate) struct SmallIb {
    /// The command's words (the rest zero).
    pub(crate) words: [u32; SMALL_IB_DWORDS],
    /// Dwords used.
    pub(crate) dwords: u32,
}

impl SmallIb {
    /// [`Cmd::write_mem32`]'s command (hipStreamWriteValue32): WRITE_DATA, under
    /// PRED_EXEC on a multi-XCC GPU. `addr` is 4-byte aligned.
    #[inline(always)]
    pub(crate) fn write_data32(t: Target, addr: u64, value: u32) -> SmallIb {
        let mut words = [0u32; SMALL_IB_DWORDS];
        let dwords = write_data32_into(t, addr, value, &mut words);
        SmallIb { words, dwords }
    }

    /// [`Cmd::wait_mem32`]'s command (hipStreamWaitValue32): WAIT_REG_MEM on memory.
    /// `addr` is 4-byte aligned.
    #[inline(always)]
    pub(crate) fn wait_reg_mem32(
        function: CompareFn,
        addr: u64,
        reference: u32,
        mask: u32,
    ) -> SmallIb {
        let mut words = [0u32; SMALL_IB_DWORDS];
        let dwords = wait_reg_mem32_into(function, addr, reference, mask, &mut words);
        SmallIb { words, dwords }
    }
}

/// The IB command of a 32-bit [`CmdBuf::wait_mem`] without the encoder's validation (the
/// enqueue hot path): WAIT_REG_MEM on memory, operation wait, engine ME, LRU, kfdrt's poll
/// interval, the words of pm4's [`WaitRegMem::words`]. `addr` is 4-byte aligned
/// (`wait_reg_mem32_matches_the_encoder` checks every family and function).
#[inline]
fn wait_reg_mem32(function: CompareFn, addr: u64, reference: u32, mask: u32) -> Cmd {
    let mut words = [0u32; IB_DWORDS];
    let dwords = wait_reg_mem32_into(function, addr, reference, mask, &mut words);
    Cmd::Ib {
        words,
        dwords: dwords as u8,
        ib_reloc: None,
    }
}

/// [`wait_reg_mem32`]'s words written into `out` (at least [`WaitRegMem::DWORDS`]);
/// returns the dwords used.
#[inline(always)]
fn wait_reg_mem32_into(
    function: CompareFn,
    addr: u64,
    reference: u32,
    mask: u32,
    out: &mut [u32],
) -> u32 {
    out[..WaitRegMem::DWORDS].copy_from_slice(
        &WaitRegMem::memory(function, addr, reference, mask, POLL_INTERVAL).words(),
    );
    WaitRegMem::DWORDS as u32
}

/// The IB command of [`CmdBuf::write_mem`]`(addr, value, 32)` without the encoders'
/// validation (the enqueue hot path): PRED_EXEC(XCC 0) on a multi-XCC GPU, then the
/// WRITE_DATA of [`WriteData::memory`], from pm4's [`PredExec::words`] and
/// [`WriteData::head`]. `addr` is 4-byte aligned (`write_data32_matches_the_encoders`
/// checks every family).
#[inline]
fn write_data32(t: Target, addr: u64, value: u32) -> Cmd {
    let mut words = [0u32; IB_DWORDS];
    let dwords = write_data32_into(t, addr, value, &mut words);
    Cmd::Ib {
        words,
        dwords: dwords as u8,
        ib_reloc: None,
    }
}

/// [`write_data32`]'s words written into `out` (at least 7 dwords); returns the dwords
/// used.
#[inline(always)]
fn write_data32_into(t: Target, addr: u64, value: u32, out: &mut [u32]) -> u32 {
    const DWORDS: usize = 5;
    const PRED: [u32; PredExec::DWORDS] = PredExec {
        exec_count: DWORDS as u16,
        xcc_mask: 1,
    }
    .words();
    let [h0, h1, h2, h3] = WriteData::memory(addr, &[value]).head();
    if t.num_xcc > 1 {
        out[..7].copy_from_slice(&[PRED[0], PRED[1], h0, h1, h2, h3, value]);
        7
    } else {
        out[..5].copy_from_slice(&[h0, h1, h2, h3, value]);
        5
    }
}

/// Encodes `body` so that only XCC 0 runs it: PRED_EXEC(xcc_mask = 1) around it on a
/// multi-XCC GPU (tinygrad `ops_amd.py` `pred_exec`), as is on one XCC. Returns the
/// dwords used and where the body starts.
fn on_one_xcc(
    t: Target,
    out: &mut [u32],
    body: impl FnOnce(&mut [u32]) -> Result<usize>,
) -> Result<(usize, usize)> {
    if t.num_xcc <= 1 {
        return Ok((body(out)?, 0));
    }
    let rest = out.get_mut(PredExec::DWORDS..).ok_or_else(|| {
        enc_err(pm4::EncodeError::BufferTooSmall {
            needed: PredExec::DWORDS,
            available: 0,
        })
    })?;
    let n = body(rest)?;
    PredExec {
        exec_count: n as u16,
        xcc_mask: 1,
    }
    .encode(t.family, out)
    .map_err(enc_err)?;
    Ok((PredExec::DWORDS + n, PredExec::DWORDS))
}

fn dma_body(t: Target, out: &mut [u32], cmds: &[DmaData]) -> Result<usize> {
    let mut dw = 0;
    for d in cmds {
        if d.byte_count > t.dma_max_bytes() {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "DMA_DATA",
                format!(
                    "{} bytes exceed the {:?} CP DMA limit of {}",
                    d.byte_count,
                    t.family,
                    t.dma_max_bytes()
                ),
            ));
        }
        dw += d
            .encode(t.family, out.get_mut(dw..).unwrap_or_default())
            .map_err(enc_err)?;
    }
    Ok(dw)
}

/// The AQL BARRIER_VALUE packet that waits exactly as `c` does on the 64-bit value at
/// `addr` (8-byte aligned). BARRIER_VALUE compares a signal's value, signed: the CP reads
/// the `amd_signal_t` value at handle + 8, so handle = `addr - 8` names any 8-byte cell
/// (`firmware-notes/firmware-rules.md` has the table). Conditions with no exact signed
/// form are NotSupported.
pub fn barrier_value_for(addr: u64, c: WaitCondition, completion: u64) -> Result<AqlPacket> {
    let WaitCondition::Poll {
        function,
        reference,
        mask,
    } = c
    else {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            "barrier_value_for",
            "nothing to wait for",
        ));
    };
    const SIGN: u64 = 1 << 63;
    let (cond, value, mask) = match function {
        CompareFn::Equal => (SignalCondition::Eq, reference, mask),
        CompareFn::NotEqual => (SignalCondition::Ne, reference, mask),
        CompareFn::Always => (SignalCondition::Eq, 0, 0),
        CompareFn::GreaterEqual if reference == 0 => (SignalCondition::Eq, 0, 0),
        // (v & mask) is non-negative: unsigned and signed order agree below 2^63; a
        // reference at or above 2^63 is never reached (0 == 1 never holds).
        CompareFn::GreaterEqual if mask & SIGN == 0 => {
            if reference & SIGN == 0 {
                (SignalCondition::Gte, reference, mask)
            } else {
                (SignalCondition::Eq, 1, 0)
            }
        }
        // x >= 2^k (unsigned) iff x has a bit at or above k set.
        CompareFn::GreaterEqual if reference.is_power_of_two() => {
            (SignalCondition::Ne, 0, mask & !(reference - 1))
        }
        CompareFn::Less if mask & SIGN == 0 && reference & SIGN == 0 => {
            (SignalCondition::Lt, reference, mask)
        }
        CompareFn::LessEqual if mask & SIGN == 0 && reference < SIGN - 1 => {
            (SignalCondition::Lt, reference + 1, mask)
        }
        _ => {
            return Err(Error::new(
                ErrorKind::NotSupported,
                "hipStreamWaitValue64",
                format!(
                    "{function:?} {reference:#x} under mask {mask:#x}: gfx9 has no WAIT_REG_MEM64 and \
                     BARRIER_VALUE compares signed 64-bit values; this unsigned compare over bit 63 \
                     has no exact single-packet form"
                ),
            ))
        }
    };
    Ok(AqlPacket::barrier_value(
        addr.wrapping_sub(pm4::hsa::SIGNAL_VALUE_OFFSET),
        cond,
        value as i64,
        mask as i64,
        completion,
    ))
}

/// The SDMA FENCE that signals a copy's completion to the host: MTYPE 3 (uncached) on
/// SDMA 5+ (gfx10+), so the write reaches system memory rather than stopping in a GPU
/// cache (ROCr `amd_blit_sdma.cpp` `BuildFenceCommand`: `mtype = 3` when the ISA major
/// version is >= 10).
pub(crate) fn sdma_fence(version: pm4::SdmaVersion, addr: u64, data: u32) -> pm4::sdma::Fence {
    let mut f = pm4::sdma::Fence::new(addr, data);
    if !matches!(version, pm4::SdmaVersion::V4) {
        f.mtype = 3;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cmd::{wait_condition, WAIT_VALUE_EQ};
    use pm4::pkt3::{decode_pm4, Pm4Packet};

    fn ib_of(c: &CmdBuf, i: usize) -> Vec<u32> {
        match c.cmds()[i] {
            Cmd::Ib { words, dwords, .. } => words[..dwords as usize].to_vec(),
            _ => panic!("not an IB command"),
        }
    }

    /// The only command of `c` as (dwords, all IB words), which must be an IB command
    /// without relocation (what the hot-path/encoder parity tests compare).
    fn only_ib(c: &CmdBuf) -> (u8, [u32; IB_DWORDS]) {
        match c.cmds() {
            [Cmd::Ib {
                words,
                dwords,
                ib_reloc: None,
            }] => (*dwords, *words),
            _ => panic!("not one IB command without relocation"),
        }
    }

    /// On a multi-XCC GPU every side effect is under one PRED_EXEC(XCC 0) that covers
    /// exactly the commands; on one XCC there is none; waits are never predicated.
    #[test]
    fn side_effects_are_predicated_to_one_xcc() {
        let mi300x = Target {
            family: GfxFamily::Gfx9,
            num_xcc: 8,
        };
        let one = Target {
            family: GfxFamily::Gfx9,
            num_xcc: 1,
        };
        type Encoder<'a> = &'a dyn Fn(&mut CmdBuf) -> Result<()>;
        let encoders: [Encoder<'_>; 4] = [
            &|c| c.write_mem(0x1000, 5, 32),
            &|c| c.write_mem(0x1000, 5, 64),
            &|c| c.timestamp(0x1000),
            &|c| {
                c.dma(&[
                    DmaData::fill(0x1000, 0, 64),
                    DmaData::copy(0x2000, 0x3000, 64),
                ])
            },
        ];
        for e in encoders {
            let mut c = CmdBuf::new(mi300x);
            e(&mut c).unwrap();
            let w = ib_of(&c, 0);
            let n = w.len();
            let (p, used) = decode_pm4(&w, GfxFamily::Gfx9).unwrap();
            assert_eq!(
                p,
                Pm4Packet::PredExec(PredExec {
                    exec_count: (n - used) as u16,
                    xcc_mask: 1
                })
            );
            let mut c1 = CmdBuf::new(one);
            e(&mut c1).unwrap();
            assert_eq!(ib_of(&c1, 0), w[used..n]);
        }
        let mut c = CmdBuf::new(mi300x);
        let cond = wait_condition(WAIT_VALUE_EQ, 1, u64::MAX, 32).unwrap();
        c.wait_mem(0x1000, 32, cond).unwrap();
        assert!(matches!(
            decode_pm4(&ib_of(&c, 0), GfxFamily::Gfx9).unwrap().0,
            Pm4Packet::WaitRegMem(_)
        ));
    }

    /// The constant-word WRITE_DATA of the hot path is exactly the pm4 encoders' output,
    /// on every family, with and without PRED_EXEC.
    #[test]
    fn write_data32_matches_the_encoders() {
        for family in GfxFamily::ALL {
            for num_xcc in [1, 8] {
                let t = Target { family, num_xcc };
                for (addr, value) in [(0x1000u64, 5u64), (0x7fff_1234_5678, 0xdead_beef)] {
                    let mut fast = CmdBuf::new(t);
                    fast.write_mem(addr, value, 32).unwrap();
                    // The stream's single-command path builds the same command.
                    let one = Cmd::write_mem32(t, addr, value as u32).unwrap();
                    assert_eq!(only_ib(&fast), only_ib(&CmdBuf::of(t, one)));
                    let mut enc = CmdBuf::new(t);
                    enc.write_mem_encoded(addr, value, 32).unwrap();
                    assert_eq!(only_ib(&fast), only_ib(&enc), "{family:?} {num_xcc} XCCs");
                }
            }
        }
    }

    /// The constant-word WAIT_REG_MEM of the hot path is exactly the pm4 encoder's output.
    #[test]
    fn wait_reg_mem32_matches_the_encoder() {
        use CompareFn::*;
        for family in GfxFamily::ALL {
            for num_xcc in [1, 8] {
                let t = Target { family, num_xcc };
                for f in [
                    Always,
                    Less,
                    LessEqual,
                    Equal,
                    NotEqual,
                    GreaterEqual,
                    Greater,
                ] {
                    let (addr, r, m) = (0x7fff_1234_5678u64, 0x8000_0001u64, 0xffff_00ffu64);
                    let mut fast = CmdBuf::new(t);
                    let c = WaitCondition::Poll {
                        function: f,
                        reference: r,
                        mask: m,
                    };
                    assert_eq!(fast.wait_mem(addr, 32, c).unwrap(), MemWait::Encoded);
                    let one = Cmd::wait_mem32(addr, c).unwrap();
                    assert_eq!(only_ib(&fast), only_ib(&CmdBuf::of(t, one)));
                    let mut enc = CmdBuf::new(t);
                    enc.wait_mem_encoded(addr, 32, f, r, m).unwrap();
                    assert_eq!(only_ib(&fast), only_ib(&enc), "{family:?} {f:?}");
                }
            }
        }
    }

    /// The single-command timeline wait is gfx9's BARRIER_VALUE `value < threshold + 1`,
    /// exactly [`CmdBuf::wait_point`]'s packet; gfx10+ has none (WAIT_REG_MEM64 instead).
    #[test]
    fn wait_point_single_command_is_the_barrier_value() {
        for family in GfxFamily::ALL {
            let t = Target { family, num_xcc: 8 };
            let (h, thr) = (0x7fff_0000_1000u64, (1i64 << 62) - 5);
            let mut b = CmdBuf::new(t);
            b.wait_point(h, thr).unwrap();
            match Cmd::wait_point(t, h, thr) {
                Some(Cmd::Packet(w)) => {
                    assert_eq!(family, GfxFamily::Gfx9);
                    assert!(matches!(b.cmds(), [Cmd::Packet(v)] if *v == w));
                    assert_eq!(
                        AqlPacket::decode(&w).unwrap(),
                        AqlPacket::barrier_value(h, SignalCondition::Lt, thr + 1, -1, 0)
                    );
                }
                None => assert!(t.has_wait_reg_mem64()),
                Some(_) => panic!("{family:?}: not a packet"),
            }
        }
    }

    /// The fill-edge copy reads its pattern from its own IB: the relocated dword is the
    /// DMA_DATA source address.
    #[test]
    fn fill_edge_source_is_relocated_into_the_ib() {
        for num_xcc in [1, 8] {
            let t = Target {
                family: GfxFamily::Gfx9,
                num_xcc,
            };
            let mut c = CmdBuf::new(t);
            c.fill_edge(0x5003, 3, 0xabab_abab).unwrap();
            let Cmd::Ib {
                mut words,
                dwords,
                ib_reloc: Some(r),
            } = c.cmds()[0]
            else {
                panic!("no relocation")
            };
            assert_eq!(words[IB_DWORDS - 1], 0xabab_abab);
            let ib = 0x7_0000_1000u64;
            let a = (words[r as usize] as u64 | (words[r as usize + 1] as u64) << 32) + ib;
            words[r as usize] = a as u32;
            words[r as usize + 1] = (a >> 32) as u32;
            let mut at = 0;
            let mut found = false;
            while at < dwords as usize {
                let (p, used) = decode_pm4(&words[at..dwords as usize], t.family).unwrap();
                if let Pm4Packet::DmaData(d) = p {
                    assert_eq!(d.src, ib + 60);
                    assert_eq!(d.dst, 0x5003);
                    found = true;
                }
                at += used;
            }
            assert!(found);
        }
    }

    /// gfx11+ CP DMA moves at most 32767 bytes; kfdrt's chunk respects it per family.
    #[test]
    fn dma_chunk_per_family() {
        for f in GfxFamily::ALL {
            let t = Target {
                family: f,
                num_xcc: 1,
            };
            let max = match f {
                GfxFamily::Gfx11 | GfxFamily::Gfx12 => 32767,
                _ => (1 << 26) - 1,
            };
            assert!(t.dma_max_bytes() <= max && t.dma_max_bytes() % 32 == 0);
            let over = DmaData::fill(0x1000, 0, t.dma_max_bytes() + 32);
            let mut c = CmdBuf::new(t);
            assert!(c.dma(&[over]).is_err());
            assert!(c.is_empty(), "a failed encode adds nothing");
        }
    }

    /// A full buffer refuses more commands with an error (nothing half-added).
    #[test]
    fn overflow_is_an_error() {
        let t = Target {
            family: GfxFamily::Gfx11,
            num_xcc: 1,
        };
        let mut c = CmdBuf::new(t);
        for _ in 0..CMDBUF_PACKETS {
            c.write_mem(0x1000, 1, 32).unwrap();
        }
        assert!(c.write_mem(0x1000, 1, 32).is_err());
        assert!(c.barrier_and([0; 5]).is_err());
        assert_eq!(c.len(), CMDBUF_PACKETS);
    }

    #[test]
    fn sdma_fence_is_uncached_from_sdma5() {
        for v in pm4::SdmaVersion::ALL {
            let f = sdma_fence(v, 0x1000, 7);
            assert_eq!(f.mtype, if v == pm4::SdmaVersion::V4 { 0 } else { 3 });
        }
    }
}
