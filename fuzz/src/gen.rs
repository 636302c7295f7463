//! Packet streams from fuzz inputs: typed packets encoded with the `pm4` crate (addresses
//! picked from the [`rig`](crate::rig) memory map so the packets do real work), raw junk
//! words, host writes that unblock waits, and segment boundaries (each segment is one
//! submission).
//!
//! Input layout: one header byte (GPU family in bits 0-1, SDMA version in bits 2-3, ring
//! size `256 << (bits 4-6 % 7)`), then a list of operations, each a tag byte and its
//! fields (see [`Gen::pm4_op`], [`Gen::sdma_op`], [`Gen::aql_op`]).

use pm4::aql::{
    AqlPacket, Barrier, BarrierValue, FenceScope, KernelDispatch, PacketControl, SignalCondition,
    VendorPm4Ib,
};
use pm4::pkt3::{self, CachePolicy, CompareFn, Pm4Packet};
use pm4::sdma::{self, SdmaPacket};
use pm4::{GfxFamily, SdmaVersion};

use crate::input::Src;
use crate::rig::{self, Engine, HostWrite, Report, Rig};

/// Operations one input may generate (all levels together).
pub const MAX_OPS: u32 = 384;
/// Indirect buffers nest at most this deep in generated streams (one more than the
/// engines accept, so the refusal is exercised too).
pub const MAX_DEPTH: u32 = 3;

/// Tag that ends a segment (ring level) or an indirect buffer (nested level), for every
/// engine's operation list.
pub const TAG_END: u8 = 0;
/// Raw-words tag in the PM4 list.
pub const PM4_TAG_RAW: u8 = 14;
/// Raw-words tag in the SDMA list.
pub const SDMA_TAG_RAW: u8 = 10;
/// Raw-slot tag in the AQL list.
pub const AQL_TAG_RAW: u8 = 7;

/// The generator: reads operations from the input and collects what the rig must do.
pub struct Gen<'a> {
    /// The input.
    pub src: Src<'a>,
    ops_left: u32,
    /// Next free byte in the indirect-buffer region.
    ib_cursor: u64,
    /// Indirect buffers to write before the segment is submitted: (VA, dwords).
    pub preload: Vec<(u64, Vec<u32>)>,
    /// Host writes the rig applies when the queue blocks.
    pub pending: Vec<HostWrite>,
    /// GPU family.
    pub family: GfxFamily,
    /// SDMA version.
    pub version: SdmaVersion,
    /// Ring size in bytes.
    pub ring_size: u64,
}

fn compare_fn(b: u8) -> CompareFn {
    match b % 7 {
        0 => CompareFn::Always,
        1 => CompareFn::Less,
        2 => CompareFn::LessEqual,
        3 => CompareFn::Equal,
        4 => CompareFn::NotEqual,
        5 => CompareFn::GreaterEqual,
        _ => CompareFn::Greater,
    }
}

/// A value `v` with `v & mask` satisfying `function` against `reference & mask`, when
/// the mask allows one (else something close).
fn satisfy(function: CompareFn, reference: u64, mask: u64) -> u64 {
    let r = reference & mask;
    match function {
        CompareFn::Less => r.wrapping_sub(1) & mask,
        CompareFn::Greater | CompareFn::NotEqual => r.wrapping_add(1) & mask,
        _ => r,
    }
}

fn cache_policy(b: u8) -> CachePolicy {
    match b & 3 {
        0 => CachePolicy::Lru,
        1 => CachePolicy::Stream,
        2 => CachePolicy::Noa,
        _ => CachePolicy::Bypass,
    }
}

fn fence_scope(b: u8) -> FenceScope {
    match b % 3 {
        0 => FenceScope::None,
        1 => FenceScope::Agent,
        _ => FenceScope::System,
    }
}

impl<'a> Gen<'a> {
    /// Reads the header byte of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        let mut src = Src::new(data);
        let h = src.u8();
        Gen {
            src,
            ops_left: MAX_OPS,
            ib_cursor: 0,
            preload: Vec::new(),
            pending: Vec::new(),
            family: GfxFamily::ALL[(h & 3) as usize],
            version: SdmaVersion::ALL[((h >> 2) & 3) as usize],
            ring_size: 256 << ((h >> 4) % 7),
        }
    }

    /// True when the input or the operation budget is used up.
    pub fn done(&self) -> bool {
        self.src.is_empty() || self.ops_left == 0
    }

    fn take_op(&mut self) -> bool {
        if self.done() {
            return false;
        }
        self.ops_left -= 1;
        true
    }

    /// An address: mostly inside a mapped region (aligned to `align`), sometimes across a
    /// region's end, in the ring or queue pointers, or anywhere.
    pub fn addr(&mut self, align: u64) -> u64 {
        let sel = self.src.u8();
        let off = self.src.u32() as u64;
        let a = match sel % 12 {
            0..=4 => rig::DATA_VA + off % rig::DATA_LEN,
            5 => rig::BIG_VA + off % rig::BIG_LEN,
            6 => rig::SIG_VA + (off % rig::SIG_SLOTS) * 64 + 8,
            7 => rig::IB_VA + off % rig::IB_LEN,
            8 => rig::DATA_VA + rig::DATA_LEN - (off % 64),
            9 => rig::RING_VA + off % rig::RING_MAX,
            10 => rig::QMEM_VA + off % 4096,
            _ => (off << 32) | self.src.u32() as u64,
        };
        if sel & 0x80 != 0 {
            a
        } else {
            a & !(align.max(1) - 1)
        }
    }

    /// A byte length: mostly small, sometimes up to 64 KiB, rarely anything.
    pub fn byte_len(&mut self) -> u32 {
        match self.src.u8() % 8 {
            0..=4 => self.src.u8() as u32 + 1,
            5 | 6 => self.src.u16() as u32 + 1,
            _ => self.src.u32(),
        }
    }

    /// An AQL signal: none, a slot of the signal region, or any address.
    pub fn signal(&mut self) -> u64 {
        match self.src.u8() % 8 {
            0 | 1 => 0,
            7 => self.addr(8),
            s => rig::SIG_VA + ((s as u64 * 13 + self.src.u8() as u64) % rig::SIG_SLOTS) * 64,
        }
    }

    fn words(&mut self, max: u8) -> Vec<u32> {
        let n = self.src.below(max) as usize + 1;
        (0..n).map(|_| self.src.u32()).collect()
    }

    fn host_write(&mut self) -> HostWrite {
        let wide = self.src.bool();
        HostWrite {
            va: self.addr(if wide { 8 } else { 4 }),
            value: self.src.u64(),
            wide,
        }
    }

    /// Places `words` in the indirect-buffer region; None when it is full.
    fn place_ib(&mut self, words: Vec<u32>) -> Option<(u64, u32)> {
        let bytes = words.len() as u64 * 4;
        if words.is_empty() || self.ib_cursor + bytes > rig::IB_LEN {
            return None;
        }
        let va = rig::IB_VA + self.ib_cursor;
        self.ib_cursor = (self.ib_cursor + bytes + 31) & !31;
        let n = words.len() as u32;
        self.preload.push((va, words));
        Some((va, n))
    }

    /// An IB size: the real one mostly, sometimes off by a little or anything.
    fn ib_size(&mut self, real: u32) -> u32 {
        match self.src.u8() % 8 {
            0 => real.wrapping_add(self.src.u8() as u32),
            1 => real.saturating_sub(self.src.u8() as u32 % 4),
            2 => self.src.u32() & 0xF_FFFF,
            _ => real,
        }
    }

    fn push_pm4(family: GfxFamily, out: &mut Vec<u32>, p: &Pm4Packet<'_>) {
        let n = p.dwords(family);
        if n == 0 || n > 4096 {
            return;
        }
        let mut buf = vec![0u32; n];
        if let Ok(k) = p.encode(family, &mut buf) {
            out.extend_from_slice(buf.get(..k).unwrap_or(&buf));
        }
    }

    /// PM4 operations until [`TAG_END`] or the input ends (`depth` 0 is the ring).
    pub fn pm4_list(&mut self, out: &mut Vec<u32>, depth: u32) {
        while self.take_op() {
            if !self.pm4_op(out, depth) {
                return;
            }
        }
    }

    /// One PM4 operation; false at [`TAG_END`].
    pub fn pm4_op(&mut self, out: &mut Vec<u32>, depth: u32) -> bool {
        let tag = self.src.u8() % 20;
        match tag {
            TAG_END => return false,
            1 => {
                let dwords = self.src.below(8) as u32 + 1;
                Self::push_pm4(self.family, out, &Pm4Packet::Nop(pkt3::Nop { dwords }));
            }
            2 | 17 => {
                let dst_sel = match self.src.u8() % 8 {
                    0 => pkt3::WriteDataDst::Register,
                    1 => pkt3::WriteDataDst::MemorySync,
                    2 => pkt3::WriteDataDst::TcL2,
                    3 => pkt3::WriteDataDst::Gds,
                    _ => pkt3::WriteDataDst::Memory,
                };
                let flags = self.src.u8();
                let addr = self.addr(4);
                let data = self.words(16);
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::WriteData(pkt3::WriteData {
                        dst_sel,
                        addr_incr: flags & 1 == 0,
                        wr_confirm: flags & 2 != 0,
                        cache_policy: cache_policy(flags >> 2),
                        engine_sel: (flags >> 4) & 3,
                        addr,
                        data: &data,
                    }),
                );
            }
            3 | 19 => {
                let function = compare_fn(self.src.u8());
                let flags = self.src.u8();
                let addr = self.addr(4);
                let reference = self.src.u32();
                let mask = if flags & 1 == 0 {
                    u32::MAX
                } else {
                    self.src.u32()
                };
                if flags & 2 == 0 {
                    self.pending.push(HostWrite {
                        va: addr,
                        value: satisfy(function, reference as u64, mask as u64),
                        wide: false,
                    });
                }
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::WaitRegMem(pkt3::WaitRegMem {
                        function,
                        mem_space: if flags & 4 == 0 {
                            pkt3::MemSpace::Memory
                        } else {
                            pkt3::MemSpace::Register
                        },
                        operation: match (flags >> 3) & 7 {
                            1 => pkt3::WaitOperation::WrWaitWrReg,
                            2 => pkt3::WaitOperation::WaitRegMemCond,
                            3 => pkt3::WaitOperation::WaitMemPreemptable,
                            _ => pkt3::WaitOperation::WaitRegMem,
                        },
                        engine: flags >> 7,
                        cache_policy: CachePolicy::Lru,
                        addr,
                        reference,
                        mask,
                        poll_interval: self.src.u8() as u16,
                        optimize_ace_offload: false,
                    }),
                );
            }
            4 => {
                let function = compare_fn(self.src.u8());
                let flags = self.src.u8();
                let addr = self.addr(8);
                let reference = self.src.u64();
                let mask = if flags & 1 == 0 {
                    u64::MAX
                } else {
                    self.src.u64()
                };
                if flags & 2 == 0 {
                    self.pending.push(HostWrite {
                        va: addr,
                        value: satisfy(function, reference, mask),
                        wide: true,
                    });
                }
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::WaitRegMem64(pkt3::WaitRegMem64 {
                        function,
                        mem_space: pkt3::MemSpace::Memory,
                        operation: pkt3::WaitOperation::WaitRegMem,
                        engine: 0,
                        cache_policy: CachePolicy::Lru,
                        addr,
                        reference,
                        mask,
                        poll_interval: 4,
                    }),
                );
            }
            5 | 18 => {
                let flags = self.src.u8();
                let sel = self.src.u8();
                let addr = self.addr(8);
                let data = self.src.u64();
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::ReleaseMem(pkt3::ReleaseMem {
                        event_type: if flags & 1 == 0 {
                            0x14
                        } else {
                            self.src.u8() & 0x3F
                        },
                        event_index: if flags & 2 == 0 {
                            5
                        } else {
                            self.src.u8() & 0xF
                        },
                        cache_actions: if flags & 4 == 0 { 0 } else { self.src.u32() },
                        cache_policy: cache_policy(flags >> 3),
                        execute: flags & 0x20 != 0,
                        dst_sel: (flags >> 6) & 3,
                        int_sel: match sel & 3 {
                            0 => pkt3::IntSel::None,
                            1 => pkt3::IntSel::SendInterruptOnly,
                            2 => pkt3::IntSel::SendInterruptAfterWriteConfirm,
                            _ => pkt3::IntSel::SendDataAfterWriteConfirm,
                        },
                        data_sel: match (sel >> 2) % 6 {
                            0 => pkt3::DataSel::None,
                            1 => pkt3::DataSel::Value32,
                            2 => pkt3::DataSel::Value64,
                            3 => pkt3::DataSel::GpuClock,
                            4 => pkt3::DataSel::SystemClock,
                            _ => pkt3::DataSel::Gds,
                        },
                        addr,
                        data,
                        int_ctxid: self.src.u32(),
                    }),
                );
            }
            6 => {
                let engine = self.src.u8() & 1;
                let coher_base = self.addr(256);
                let coher_size = self.byte_len() as u64;
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::AcquireMem(pkt3::AcquireMem {
                        engine,
                        coher_cntl: self.src.u32(),
                        coher_size,
                        coher_base,
                        poll_interval: 10,
                        gcr_cntl: self.src.u32(),
                    }),
                );
            }
            7 => {
                let flags = self.src.u8();
                let mut inner = Vec::new();
                if depth < MAX_DEPTH {
                    self.pm4_list(&mut inner, depth + 1);
                }
                if let Some((addr, real)) = self.place_ib(inner) {
                    let size_dw = self.ib_size(real);
                    Self::push_pm4(
                        self.family,
                        out,
                        &Pm4Packet::IndirectBuffer(pkt3::IndirectBuffer {
                            addr,
                            size_dw,
                            chain: flags & 1 != 0 && depth > 0,
                            offload_polling: flags & 2 != 0,
                            volatile: flags & 4 != 0,
                            valid: flags & 8 == 0,
                            vmid: 0,
                            cache_policy: CachePolicy::Lru,
                            pre_resume: false,
                            priv_: false,
                        }),
                    );
                }
            }
            8 => {
                let event_type = self.src.u8() & 0x3F;
                let event_index = self.src.u8() & 0xF;
                let addr = if self.src.bool() {
                    Some(self.addr(8))
                } else {
                    None
                };
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::EventWrite(pkt3::EventWrite {
                        event_type,
                        event_index,
                        addr,
                    }),
                );
            }
            9 => {
                let sel = self.src.u8();
                let flags = self.src.u8();
                let src = self.addr(4);
                let dst = self.addr(4);
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::CopyData(pkt3::CopyData {
                        src_sel: [1, 2, 5, 9, 0, 4][(sel % 6) as usize],
                        dst_sel: [1, 2, 5, 0, 4, 6][((sel >> 3) % 6) as usize],
                        src_cache_policy: CachePolicy::Lru,
                        count_sel_64: flags & 1 != 0,
                        wr_confirm: flags & 2 != 0,
                        dst_cache_policy: CachePolicy::Lru,
                        pq_exe_status: false,
                        engine_sel: 0,
                        src,
                        dst,
                    }),
                );
            }
            10 => {
                let sel = self.src.u8();
                let flags = self.src.u8();
                let src = self.addr(4);
                let dst = self.addr(4);
                let byte_count = self.byte_len() & 0x3F_FFFF;
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::DmaData(pkt3::DmaData {
                        engine_sel: 0,
                        src_cache_policy: CachePolicy::Lru,
                        dst_sel: match sel & 3 {
                            0 => pkt3::DmaDstSel::DstAddr,
                            1 => pkt3::DmaDstSel::Gds,
                            2 => pkt3::DmaDstSel::Nowhere,
                            _ => pkt3::DmaDstSel::DstAddrTcL2,
                        },
                        dst_cache_policy: CachePolicy::Lru,
                        src_sel: match (sel >> 2) & 3 {
                            0 => pkt3::DmaSrcSel::SrcAddr,
                            1 => pkt3::DmaSrcSel::Gds,
                            2 => pkt3::DmaSrcSel::Data,
                            _ => pkt3::DmaSrcSel::SrcAddrTcL2,
                        },
                        cp_sync: flags & 1 != 0,
                        src,
                        dst,
                        byte_count,
                        sas: flags & 2 != 0,
                        das: flags & 4 != 0,
                        saic: flags & 8 != 0,
                        daic: flags & 16 != 0,
                        raw_wait: flags & 32 != 0,
                        dis_wc: flags & 64 != 0,
                    }),
                );
            }
            11 => {
                let atomic = self.src.u8() & 0x7F;
                let command = self.src.u8() & 0xF;
                let addr = self.addr(8);
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::AtomicMem(pkt3::AtomicMem {
                        atomic,
                        command,
                        cache_policy: CachePolicy::Lru,
                        engine_sel: 0,
                        addr,
                        src_data: self.src.u64(),
                        cmp_data: self.src.u64(),
                        loop_interval: 8,
                    }),
                );
            }
            12 => {
                let reg_offset = self.src.u16() & 0x3FF;
                let values = self.words(8);
                Self::push_pm4(
                    self.family,
                    out,
                    &Pm4Packet::SetShReg(pkt3::SetShReg {
                        reg_offset,
                        values: &values,
                    }),
                );
            }
            13 => {
                let p = pkt3::DispatchDirect {
                    dim_x: self.src.u8() as u32,
                    dim_y: 1,
                    dim_z: 1,
                    dispatch_initiator: self.src.u32(),
                };
                Self::push_pm4(self.family, out, &Pm4Packet::DispatchDirect(p));
            }
            PM4_TAG_RAW => {
                let w = self.words(16);
                out.extend_from_slice(&w);
            }
            15 => {
                // A well-formed type-3 header with any opcode and a short junk body.
                let opcode = self.src.u8() as u32;
                let count = self.src.below(8) as u32;
                out.push((3 << 30) | (count << 16) | (opcode << 8));
                for _ in 0..=count {
                    out.push(self.src.u32());
                }
            }
            _ => {
                let w = self.host_write();
                self.pending.push(w);
            }
        }
        true
    }

    fn push_sdma(version: SdmaVersion, out: &mut Vec<u32>, p: &SdmaPacket<'_>) {
        let n = p.dwords(version);
        if n == 0 || n > 4096 {
            return;
        }
        let mut buf = vec![0u32; n];
        if let Ok(k) = p.encode(version, &mut buf) {
            out.extend_from_slice(buf.get(..k).unwrap_or(&buf));
        }
    }

    /// SDMA operations until [`TAG_END`] or the input ends.
    pub fn sdma_list(&mut self, out: &mut Vec<u32>, depth: u32) {
        while self.take_op() {
            if !self.sdma_op(out, depth) {
                return;
            }
        }
    }

    /// One SDMA operation; false at [`TAG_END`].
    pub fn sdma_op(&mut self, out: &mut Vec<u32>, depth: u32) -> bool {
        match self.src.u8() % 16 {
            TAG_END => return false,
            1 => {
                let count = self.src.below(8) as u16;
                Self::push_sdma(self.version, out, &SdmaPacket::Nop(sdma::Nop { count }));
            }
            2 | 13 => {
                let src = self.addr(1);
                let dst = self.addr(1);
                let bytes = self.byte_len();
                Self::push_sdma(
                    self.version,
                    out,
                    &SdmaPacket::CopyLinear(sdma::CopyLinear {
                        src,
                        dst,
                        bytes,
                        tmz: false,
                        parameter: 0,
                    }),
                );
            }
            3 => {
                let dst = self.addr(4);
                let data = self.src.u32();
                let bytes = self.byte_len();
                let fill_size = self.src.u8() & 3;
                Self::push_sdma(
                    self.version,
                    out,
                    &SdmaPacket::ConstFill(sdma::ConstFill {
                        dst,
                        data,
                        bytes,
                        fill_size,
                    }),
                );
            }
            4 | 14 => {
                let addr = self.addr(4);
                let data = self.src.u32();
                let f = self.src.u8();
                Self::push_sdma(
                    self.version,
                    out,
                    &SdmaPacket::Fence(sdma::Fence {
                        addr,
                        data,
                        mtype: f & 7,
                        gcc: f & 8 != 0,
                        sys: f & 16 != 0,
                        snp: f & 32 != 0,
                        gpa: false,
                        l2_policy: 0,
                    }),
                );
            }
            5 | 15 => {
                let func = compare_fn(self.src.u8());
                let flags = self.src.u8();
                let addr = self.addr(4);
                let reference = self.src.u32();
                let mask = if flags & 1 == 0 {
                    u32::MAX
                } else {
                    self.src.u32()
                };
                if flags & 2 == 0 {
                    self.pending.push(HostWrite {
                        va: addr,
                        value: satisfy(func, reference as u64, mask as u64),
                        wide: false,
                    });
                }
                Self::push_sdma(
                    self.version,
                    out,
                    &SdmaPacket::PollRegmem(sdma::PollRegmem {
                        func,
                        mem_poll: flags & 4 == 0,
                        hdp_flush: flags & 8 != 0,
                        addr,
                        reference,
                        mask,
                        interval: 10,
                        retry_count: if flags & 16 == 0 {
                            0xFFF
                        } else {
                            self.src.u8() as u16
                        },
                    }),
                );
            }
            6 => {
                let int_context = self.src.u32() & 0xFFF_FFFF;
                Self::push_sdma(
                    self.version,
                    out,
                    &SdmaPacket::Trap(sdma::Trap { int_context }),
                );
            }
            7 => {
                let kind = match self.src.u8() % 3 {
                    0 => sdma::TimestampKind::SetLocal,
                    1 => sdma::TimestampKind::GetLocal,
                    _ => sdma::TimestampKind::GetGlobal,
                };
                let value = if kind == sdma::TimestampKind::SetLocal {
                    self.src.u64()
                } else {
                    self.addr(8)
                };
                Self::push_sdma(
                    self.version,
                    out,
                    &SdmaPacket::Timestamp(sdma::Timestamp { kind, value }),
                );
            }
            8 => {
                let dst = self.addr(4);
                let data = self.words(16);
                Self::push_sdma(
                    self.version,
                    out,
                    &SdmaPacket::Write(sdma::Write { dst, data: &data }),
                );
            }
            9 => {
                let mut inner = Vec::new();
                if depth < MAX_DEPTH {
                    self.sdma_list(&mut inner, depth + 1);
                }
                if let Some((ib_addr, real)) = self.place_ib(inner) {
                    let ib_dwords = self.ib_size(real);
                    Self::push_sdma(
                        self.version,
                        out,
                        &SdmaPacket::Indirect(sdma::Indirect {
                            vmid: 0,
                            ib_addr,
                            ib_dwords,
                            csa_addr: 0,
                        }),
                    );
                }
            }
            SDMA_TAG_RAW => {
                let w = self.words(16);
                out.extend_from_slice(&w);
            }
            11 => {
                // A header with any op / sub-op and a short junk body.
                let op = self.src.u8() as u32 & 0x1F;
                let sub = self.src.u8() as u32 & 0xF;
                out.push(op | (sub << 8) | ((self.src.u16() as u32) << 16));
                let n = self.src.below(8);
                for _ in 0..n {
                    out.push(self.src.u32());
                }
            }
            _ => {
                let w = self.host_write();
                self.pending.push(w);
            }
        }
        true
    }

    fn control(&mut self) -> PacketControl {
        let c = self.src.u8();
        PacketControl {
            barrier: c & 1 != 0,
            acquire: fence_scope(c >> 1),
            release: fence_scope(c >> 4),
        }
    }

    /// AQL operations until [`TAG_END`] or the input ends; each packet is 16 dwords.
    pub fn aql_list(&mut self, out: &mut Vec<u32>) {
        while self.take_op() {
            if !self.aql_op(out) {
                return;
            }
        }
    }

    /// One AQL operation; false at [`TAG_END`].
    pub fn aql_op(&mut self, out: &mut Vec<u32>) -> bool {
        let pkt = match self.src.u8() % 12 {
            TAG_END => return false,
            1 | 2 | 11 => {
                let control = self.control();
                let n = self.src.below(6) as usize;
                let mut dep_signals = [0u64; 5];
                for d in dep_signals.iter_mut().take(n) {
                    *d = self.signal();
                    if *d != 0 && self.src.bool() {
                        self.pending.push(HostWrite {
                            va: d.wrapping_add(8),
                            value: 0,
                            wide: true,
                        });
                    }
                }
                let b = Barrier {
                    control,
                    dep_signals,
                    completion_signal: self.signal(),
                };
                if self.src.bool() {
                    AqlPacket::BarrierAnd(b)
                } else {
                    AqlPacket::BarrierOr(b)
                }
            }
            3 | 10 => {
                let control = self.control();
                let mut inner = Vec::new();
                self.pm4_list(&mut inner, 1);
                let Some((addr, real)) = self.place_ib(inner) else {
                    return true;
                };
                let size_dw = self.ib_size(real);
                AqlPacket::VendorPm4Ib(VendorPm4Ib {
                    control,
                    ib: pkt3::IndirectBuffer {
                        addr,
                        size_dw,
                        chain: false,
                        offload_polling: false,
                        volatile: false,
                        valid: true,
                        vmid: 0,
                        cache_policy: CachePolicy::Lru,
                        pre_resume: false,
                        priv_: false,
                    },
                    completion_signal: self.signal(),
                })
            }
            4 => {
                let control = self.control();
                let signal = self.signal();
                let value = self.src.u64() as i64 % 4;
                let mask = if self.src.bool() {
                    -1
                } else {
                    self.src.u64() as i64
                };
                let cond = match self.src.u8() & 3 {
                    0 => SignalCondition::Eq,
                    1 => SignalCondition::Ne,
                    2 => SignalCondition::Lt,
                    _ => SignalCondition::Gte,
                };
                if signal != 0 && self.src.bool() {
                    let v = match cond {
                        SignalCondition::Eq | SignalCondition::Gte => value,
                        SignalCondition::Ne => value.wrapping_add(1),
                        SignalCondition::Lt => value.wrapping_sub(1),
                    };
                    self.pending.push(HostWrite {
                        va: signal.wrapping_add(8),
                        value: v as u64,
                        wide: true,
                    });
                }
                AqlPacket::BarrierValue(BarrierValue {
                    control,
                    signal,
                    value,
                    mask,
                    cond,
                    completion_signal: self.signal(),
                })
            }
            5 => {
                let control = self.control();
                AqlPacket::KernelDispatch(KernelDispatch {
                    control,
                    dimensions: self.src.u8() % 4,
                    workgroup_size: [self.src.u8() as u16, 1, 1],
                    grid_size: [self.src.u16() as u32, 1, 1],
                    private_segment_size: 0,
                    group_segment_size: 0,
                    kernel_object: self.addr(256),
                    kernarg_address: self.addr(16),
                    completion_signal: self.signal(),
                })
            }
            6 => AqlPacket::Invalid,
            AQL_TAG_RAW => {
                let mut w = [0u32; 16];
                for x in w.iter_mut() {
                    *x = self.src.u32();
                }
                out.extend_from_slice(&w);
                return true;
            }
            _ => {
                let w = self.host_write();
                self.pending.push(w);
                return true;
            }
        };
        out.extend_from_slice(&pkt.encode());
        true
    }
}

fn drive(engine: Engine, data: &[u8]) -> Report {
    let mut g = Gen::new(data);
    let mut rig = Rig::new(engine, g.family, g.version, g.ring_size);
    while !g.done() && rig.alive {
        let mut seg = Vec::new();
        match engine {
            Engine::Aql => g.aql_list(&mut seg),
            Engine::Pm4 => g.pm4_list(&mut seg, 0),
            Engine::Sdma => g.sdma_list(&mut seg, 0),
        }
        for (va, words) in g.preload.drain(..) {
            let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
            rig.write(va, &bytes);
        }
        rig.pending.extend(g.pending.drain(..));
        rig.submit(&seg);
    }
    rig.finish()
}

/// The `engine_pm4` target: a PM4 compute queue.
pub fn run_pm4(data: &[u8]) -> Report {
    drive(Engine::Pm4, data)
}

/// The `engine_sdma` target: an SDMA queue.
pub fn run_sdma(data: &[u8]) -> Report {
    drive(Engine::Sdma, data)
}

/// The `engine_aql` target: an AQL queue (PM4 in its vendor IB packets).
pub fn run_aql(data: &[u8]) -> Report {
    drive(Engine::Aql, data)
}

/// The disassembly of what an input submits (ring segments and indirect buffers), without
/// running it: for triaging a crash (`cargo test --test seeds explain -- --nocapture` with
/// `KFDRT_FUZZ_EXPLAIN=ENGINE:FILE`).
pub fn explain(engine: Engine, data: &[u8]) -> String {
    use std::fmt::Write;
    let mut g = Gen::new(data);
    let mut s = format!(
        "{:?} family {:?} sdma {:?} ring {} bytes\n",
        engine, g.family, g.version, g.ring_size
    );
    let dis = |g: &Gen<'_>, words: &[u32]| match engine {
        Engine::Sdma => pm4::disasm::to_text(&pm4::disasm::disasm_sdma(g.version, words)),
        Engine::Pm4 => pm4::disasm::to_text(&pm4::disasm::disasm_pm4(g.family, words)),
        Engine::Aql => pm4::disasm::to_text(&pm4::disasm::disasm_aql(words)),
    };
    let mut n = 0;
    while !g.done() {
        let mut seg = Vec::new();
        match engine {
            Engine::Aql => g.aql_list(&mut seg),
            Engine::Pm4 => g.pm4_list(&mut seg, 0),
            Engine::Sdma => g.sdma_list(&mut seg, 0),
        }
        for (va, words) in g.preload.drain(..).collect::<Vec<_>>() {
            let text = match engine {
                Engine::Sdma => dis(&g, &words),
                _ => pm4::disasm::to_text(&pm4::disasm::disasm_pm4(g.family, &words)),
            };
            let _ = writeln!(s, "IB at {va:#x} ({} dwords):\n{text}", words.len());
        }
        for w in g.pending.drain(..) {
            let _ = writeln!(s, "host write {w:x?}");
        }
        let _ = writeln!(s, "segment {n} ({} dwords):\n{}", seg.len(), dis(&g, &seg));
        n += 1;
    }
    s
}
