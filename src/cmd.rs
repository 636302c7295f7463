//! The PM4 commands kfdrt places in a queue slot's indirect buffer, how HIP's
//! stream-memory-op conditions map onto WAIT_REG_MEM compare functions, and every
//! per-family encoding choice (one place, see `firmware-notes/firmware-rules.md`):
//!
//! - waits: 32-bit WAIT_REG_MEM on every family; 64-bit waits WAIT_REG_MEM64 on gfx10+
//!   and the AQL BARRIER_VALUE vendor packet on gfx9, whose CP has no WAIT_REG_MEM64;
//! - CP DMA: at most [`Target::dma_max_bytes`] per DMA_DATA (32736 on gfx11+);
//! - timestamps: COPY_DATA of the GPU clock (no end-of-pipe event, so no EOP buffer is
//!   needed: gfx94x AQL queues have none);
//! - multi-XCC GPUs: side effects (writes, DMA, timestamps) under PRED_EXEC(XCC 0).

use pm4::aql::{AqlPacket, BarrierValue, PacketControl, SignalCondition};
use pm4::pkt3::{
    copy_sel, CachePolicy, CompareFn, CopyData, DmaData, MemSpace, PredExec, WaitOperation,
    WaitRegMem, WaitRegMem64, WriteData, WriteDataDst,
};
use pm4::GfxFamily;

use crate::error::{Error, ErrorKind, Result};
use crate::queue::{pm4_ib_packet, IbSlot};

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
    pub fn of(gpu: &crate::device::Gpu) -> Target {
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

/// Encodes `body` so that only XCC 0 runs it: PRED_EXEC(xcc_mask = 1) around it on a
/// multi-XCC GPU (tinygrad `ops_amd.py` `pred_exec`), as is on one XCC.
fn on_one_xcc(
    t: Target,
    out: &mut [u32],
    body: impl FnOnce(&mut [u32]) -> Result<usize>,
) -> Result<usize> {
    if t.num_xcc <= 1 {
        return body(out);
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
    Ok(PredExec::DWORDS + n)
}

/// CP poll interval used by kfdrt's waits (in the CP's poll-interval units).
pub const POLL_INTERVAL: u16 = 4;

/// `hipStreamWaitValueGte`.
pub const WAIT_VALUE_GTE: u32 = 0x0;
/// `hipStreamWaitValueEq`.
pub const WAIT_VALUE_EQ: u32 = 0x1;
/// `hipStreamWaitValueAnd`.
pub const WAIT_VALUE_AND: u32 = 0x2;
/// `hipStreamWaitValueNor`.
pub const WAIT_VALUE_NOR: u32 = 0x3;

/// The condition a wait-value command tests, already reduced to what the CP does:
/// `(*ptr & mask) FUNCTION reference`, or nothing to wait for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitCondition {
    /// Poll until `(*ptr & mask) function reference`.
    Poll {
        /// Compare function.
        function: CompareFn,
        /// Reference value.
        reference: u64,
        /// Mask.
        mask: u64,
    },
    /// The condition is true for every memory value: nothing to wait for.
    AlwaysTrue,
}

/// Map HIP's wait-value flags onto a CP compare, for `bits`-wide values (32 or 64).
///
/// - GTE: `(*ptr & mask) >= value` — unsigned, as the CP compares.
/// - EQ: `(*ptr & mask) == value`.
/// - AND: `((*ptr & mask) & value) != 0` — polled as `(*ptr & (mask & value)) != 0`.
/// - NOR: `~((*ptr & mask) | (value & mask)) != 0`, exactly as the seed defines it, over
///   `bits` bits. Any bit outside `mask` is 0 in both operands, so its complement is 1 and
///   the condition holds for every memory value unless `mask` is all ones. With a full
///   mask the condition is "some bit is clear in both `*ptr` and `value`", i.e.
///   `(*ptr & ~value) != ~value`, which is what the CP polls.
///
/// Unknown flags are InvalidValue.
pub fn wait_condition(flags: u32, value: u64, mask: u64, bits: u32) -> Result<WaitCondition> {
    let full = if bits == 32 { 0xffff_ffffu64 } else { u64::MAX };
    let (value, mask) = (value & full, mask & full);
    Ok(match flags {
        WAIT_VALUE_GTE => WaitCondition::Poll {
            function: CompareFn::GreaterEqual,
            reference: value,
            mask,
        },
        WAIT_VALUE_EQ => WaitCondition::Poll {
            function: CompareFn::Equal,
            reference: value,
            mask,
        },
        WAIT_VALUE_AND => WaitCondition::Poll {
            function: CompareFn::NotEqual,
            reference: 0,
            mask: mask & value,
        },
        WAIT_VALUE_NOR => {
            if mask != full {
                WaitCondition::AlwaysTrue
            } else {
                let nv = !value & full;
                WaitCondition::Poll {
                    function: CompareFn::NotEqual,
                    reference: nv,
                    mask: nv,
                }
            }
        }
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "stream_wait_value",
                format!(
                "flags {flags:#x}: expected hipStreamWaitValueGte (0), Eq (1), And (2) or Nor (3)"
            ),
            ))
        }
    })
}

/// The condition evaluated on the host (tests, reference model).
pub fn condition_holds(c: WaitCondition, mem: u64) -> bool {
    match c {
        WaitCondition::AlwaysTrue => true,
        WaitCondition::Poll {
            function,
            reference,
            mask,
        } => {
            let v = mem & mask;
            match function {
                CompareFn::Always => true,
                CompareFn::Less => v < reference,
                CompareFn::LessEqual => v <= reference,
                CompareFn::Equal => v == reference,
                CompareFn::NotEqual => v != reference,
                CompareFn::GreaterEqual => v >= reference,
                CompareFn::Greater => v > reference,
            }
        }
    }
}

fn enc_err(e: pm4::EncodeError) -> Error {
    Error::new(ErrorKind::InvalidValue, "pm4 encode", e.to_string())
}

/// WAIT_REG_MEM (32-bit) or WAIT_REG_MEM64 on memory at `addr`; returns dwords written.
/// Every XCC waits (no predication). A 64-bit wait on a family without WAIT_REG_MEM64 is
/// NotSupported: the runtime uses `wait_packet`, which picks BARRIER_VALUE there.
pub fn wait_mem(
    t: Target,
    out: &mut [u32],
    addr: u64,
    bits: u32,
    c: WaitCondition,
) -> Result<usize> {
    let WaitCondition::Poll {
        function,
        reference,
        mask,
    } = c
    else {
        return Ok(0);
    };
    if bits == 32 {
        WaitRegMem::memory(function, addr, reference as u32, mask as u32, POLL_INTERVAL)
            .encode(t.family, out)
            .map_err(enc_err)
    } else if t.has_wait_reg_mem64() {
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
        .encode(t.family, out)
        .map_err(enc_err)
    } else {
        Err(Error::new(
            ErrorKind::NotSupported,
            "wait_mem",
            format!("{:?} has no WAIT_REG_MEM64", t.family),
        ))
    }
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
    Ok(AqlPacket::BarrierValue(BarrierValue {
        control: PacketControl::SYSTEM_BARRIER,
        signal: addr.wrapping_sub(crate::hsa::SIGNAL_VALUE_OFFSET),
        value: value as i64,
        mask: mask as i64,
        cond,
        completion_signal: completion,
    }))
}

/// The packet that waits until `c` holds for the `bits`-wide value at `addr`, completing
/// on `completion`: a PM4-IB WAIT_REG_MEM(64) where the family has it, else BARRIER_VALUE.
pub(crate) fn wait_packet(
    t: Target,
    ib: IbSlot<'_>,
    addr: u64,
    bits: u32,
    c: WaitCondition,
    completion: u64,
) -> Result<AqlPacket> {
    if bits == 64 && !t.has_wait_reg_mem64() {
        return barrier_value_for(addr, c, completion);
    }
    let n = wait_mem(t, ib.words, addr, bits, c)?;
    Ok(pm4_ib_packet(ib.va, n as u32, completion))
}

/// The packet that waits until the signal `handle`'s value is at most `threshold` (a
/// timeline point; timeline values are never negative), completing on `completion`:
/// WAIT_REG_MEM64 `<=` on gfx10+, BARRIER_VALUE `value < threshold + 1` on gfx9 (signal
/// values are signed, as the CP compares them).
pub(crate) fn wait_signal_packet(
    t: Target,
    ib: IbSlot<'_>,
    handle: u64,
    threshold: i64,
    completion: u64,
) -> Result<AqlPacket> {
    if !t.has_wait_reg_mem64() {
        return Ok(AqlPacket::BarrierValue(BarrierValue {
            control: PacketControl::SYSTEM_BARRIER,
            signal: handle,
            value: threshold.saturating_add(1),
            mask: -1,
            cond: SignalCondition::Lt,
            completion_signal: completion,
        }));
    }
    let c = WaitCondition::Poll {
        function: CompareFn::LessEqual,
        reference: threshold as u64,
        mask: u64::MAX,
    };
    let n = wait_mem(t, ib.words, handle + crate::hsa::SIGNAL_VALUE_OFFSET, 64, c)?;
    Ok(pm4_ib_packet(ib.va, n as u32, completion))
}

/// A 32-bit WRITE_DATA, or for 64 bits a COPY_DATA of the immediate with a 64-bit count
/// (one 64-bit write, never two 32-bit halves), with write confirm, on XCC 0.
pub fn write_mem(t: Target, out: &mut [u32], addr: u64, value: u64, bits: u32) -> Result<usize> {
    on_one_xcc(t, out, |out| {
        if bits == 32 {
            let data = [value as u32];
            WriteData {
                dst_sel: WriteDataDst::Memory,
                addr_incr: true,
                wr_confirm: true,
                cache_policy: CachePolicy::Lru,
                engine_sel: 0,
                addr,
                data: &data,
            }
            .encode(t.family, out)
            .map_err(enc_err)
        } else {
            CopyData {
                src_sel: copy_sel::IMMEDIATE_OR_DST_MEMORY,
                dst_sel: copy_sel::IMMEDIATE_OR_DST_MEMORY,
                src_cache_policy: CachePolicy::Lru,
                count_sel_64: true,
                wr_confirm: true,
                dst_cache_policy: CachePolicy::Lru,
                pq_exe_status: false,
                engine_sel: 0,
                src: value,
                dst: addr,
            }
            .encode(t.family, out)
            .map_err(enc_err)
        }
    })
}

/// The 64-bit GPU clock written to `addr` by COPY_DATA (source GPU_CLOCK_COUNT), on XCC 0.
/// The AQL packet carrying it has the barrier bit, so the stream's earlier work has
/// completed when the CP copies the clock; no end-of-pipe event (and so no EOP buffer)
/// is involved.
pub fn timestamp(t: Target, out: &mut [u32], addr: u64) -> Result<usize> {
    on_one_xcc(t, out, |out| {
        CopyData {
            src_sel: copy_sel::GPU_CLOCK_COUNT,
            dst_sel: copy_sel::IMMEDIATE_OR_DST_MEMORY,
            src_cache_policy: CachePolicy::Lru,
            count_sel_64: true,
            wr_confirm: true,
            dst_cache_policy: CachePolicy::Lru,
            pq_exe_status: false,
            engine_sel: 0,
            src: 0,
            dst: addr,
        }
        .encode(t.family, out)
        .map_err(enc_err)
    })
}

/// The SDMA FENCE that signals a copy's completion to the host: MTYPE 3 (uncached) on
/// SDMA 5+ (gfx10+), so the write reaches system memory rather than stopping in a GPU
/// cache (ROCr `amd_blit_sdma.cpp` `BuildFenceCommand`: `mtype = 3` when the ISA major
/// version is >= 10).
pub fn sdma_fence(version: pm4::SdmaVersion, addr: u64, data: u32) -> pm4::sdma::Fence {
    let mut f = pm4::sdma::Fence::new(addr, data);
    if !matches!(version, pm4::SdmaVersion::V4) {
        f.mtype = 3;
    }
    f
}

/// DMA_DATA commands (each at most [`Target::dma_max_bytes`]) on XCC 0.
pub fn dma(t: Target, out: &mut [u32], cmds: &[DmaData]) -> Result<usize> {
    on_one_xcc(t, out, |out| {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hip_reference(flags: u32, mem: u64, value: u64, mask: u64, bits: u32) -> bool {
        let full = if bits == 32 { 0xffff_ffffu64 } else { u64::MAX };
        let (mem, value, mask) = (mem & full, value & full, mask & full);
        match flags {
            WAIT_VALUE_GTE => mem & mask >= value,
            WAIT_VALUE_EQ => mem & mask == value,
            WAIT_VALUE_AND => (mem & mask) & value != 0,
            WAIT_VALUE_NOR => (!((mem & mask) | (value & mask)) & full) != 0,
            _ => unreachable!(),
        }
    }

    #[test]
    fn cp_conditions_match_the_seed_definitions() {
        let vals = [
            0u64,
            1,
            2,
            3,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_fffe,
            0xffff_ffff,
            1 << 40,
            u64::MAX,
            0x1234_5678_9abc_def0,
        ];
        let masks = [u64::MAX, 0xffff_ffff, 0xff, 0xf0f0_f0f0, 0, 1 << 40 | 1];
        for bits in [32, 64] {
            for flags in 0..4 {
                for &m in &masks {
                    for &v in &vals {
                        let c = wait_condition(flags, v, m, bits).unwrap();
                        for &mem in &vals {
                            assert_eq!(
                                condition_holds(
                                    c,
                                    mem & if bits == 32 { 0xffff_ffff } else { u64::MAX }
                                ),
                                hip_reference(flags, mem, v, m, bits),
                                "flags={flags} bits={bits} mem={mem:#x} value={v:#x} mask={m:#x}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// gfx9: every 64-bit condition maps onto BARRIER_VALUE (signed compare of the value
    /// at handle + 8) exactly, or is NotSupported (GTE over bit 63 with a reference that
    /// is not a power of two; never silently inexact).
    #[test]
    fn barrier_value_mapping_is_exact_on_gfx9() {
        let vals = [
            0u64,
            1,
            2,
            3,
            0x7fff_ffff,
            0x8000_0000,
            0xffff_ffff,
            1 << 40,
            (1 << 63) - 1,
            1 << 63,
            (1 << 63) + 5,
            u64::MAX - 1,
            u64::MAX,
            0x1234_5678_9abc_def0,
        ];
        let masks = [
            u64::MAX,
            0xffff_ffff,
            0xff,
            0,
            1 << 40 | 1,
            1 << 63,
            (1 << 63) - 1,
        ];
        let mut unsupported = 0;
        for flags in 0..4 {
            for &m in &masks {
                for &v in &vals {
                    let c = wait_condition(flags, v, m, 64).unwrap();
                    if c == WaitCondition::AlwaysTrue {
                        continue;
                    }
                    let p = match barrier_value_for(0x1008, c, 0) {
                        Ok(AqlPacket::BarrierValue(b)) => b,
                        Ok(other) => panic!("{other:?}"),
                        Err(e) => {
                            assert_eq!(e.kind(), ErrorKind::NotSupported);
                            assert_eq!(flags, WAIT_VALUE_GTE, "{e}");
                            assert!(m & (1 << 63) != 0 && !v.is_power_of_two(), "{e}");
                            unsupported += 1;
                            continue;
                        }
                    };
                    assert_eq!(p.signal, 0x1000);
                    for &mem in &vals {
                        assert_eq!(
                            p.cond.test(mem as i64, p.mask, p.value),
                            hip_reference(flags, mem, v, m, 64),
                            "flags={flags} mem={mem:#x} value={v:#x} mask={m:#x}"
                        );
                    }
                }
            }
        }
        assert!(unsupported > 0);
    }

    /// On a multi-XCC GPU every side effect is under one PRED_EXEC(XCC 0) that covers
    /// exactly the commands; on one XCC there is none; waits are never predicated.
    #[test]
    fn side_effects_are_predicated_to_one_xcc() {
        use pm4::pkt3::{decode_pm4, Pm4Packet};
        let mi300x = Target {
            family: GfxFamily::Gfx9,
            num_xcc: 8,
        };
        let one = Target {
            family: GfxFamily::Gfx9,
            num_xcc: 1,
        };
        type Encoder<'a> = &'a dyn Fn(Target, &mut [u32]) -> Result<usize>;
        let encoders: [Encoder<'_>; 4] = [
            &|t, o| write_mem(t, o, 0x1000, 5, 32),
            &|t, o| write_mem(t, o, 0x1000, 5, 64),
            &|t, o| timestamp(t, o, 0x1000),
            &|t, o| {
                dma(
                    t,
                    o,
                    &[
                        DmaData::fill(0x1000, 0, 64),
                        DmaData::copy(0x2000, 0x3000, 64),
                    ],
                )
            },
        ];
        for e in encoders {
            let mut w = [0u32; 16];
            let n = e(mi300x, &mut w).unwrap();
            let (p, used) = decode_pm4(&w[..n], GfxFamily::Gfx9).unwrap();
            assert_eq!(
                p,
                Pm4Packet::PredExec(PredExec {
                    exec_count: (n - used) as u16,
                    xcc_mask: 1
                })
            );
            let mut w1 = [0u32; 16];
            let n1 = e(one, &mut w1).unwrap();
            assert_eq!(n1, n - used);
            assert_eq!(w1[..n1], w[used..n]);
        }
        let mut w = [0u32; 16];
        let c = wait_condition(WAIT_VALUE_EQ, 1, u64::MAX, 32).unwrap();
        let n = wait_mem(mi300x, &mut w, 0x1000, 32, c).unwrap();
        assert!(matches!(
            decode_pm4(&w[..n], GfxFamily::Gfx9).unwrap().0,
            Pm4Packet::WaitRegMem(_)
        ));
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
            let mut w = [0u32; 16];
            let over = DmaData::fill(0x1000, 0, t.dma_max_bytes() + 32);
            assert!(dma(t, &mut w, &[over]).is_err());
        }
    }

    #[test]
    fn sdma_fence_is_uncached_from_sdma5() {
        for v in pm4::SdmaVersion::ALL {
            let f = sdma_fence(v, 0x1000, 7);
            assert_eq!(f.mtype, if v == pm4::SdmaVersion::V4 { 0 } else { 3 });
        }
    }

    #[test]
    fn invalid_flags_rejected() {
        let e = wait_condition(4, 0, 0, 32).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue);
    }
}
