//! SDMA packets (SDMA 4.x for gfx9, 5.x gfx10, 6.x gfx11, 7.x gfx12) and the
//! SDMA ring writer.
//!
//! Header (all versions): op bits 7:0, sub_op bits 15:8, packet-specific fields
//! in bits 31:16 (`SDMA_PKT_*_HEADER_*` in the kernel's `*_sdma_pkt_open.h`).
//! COPY_LINEAR and CONST_FILL counts hold bytes - 1; their width is 22 bits on
//! SDMA 4.x and 30 bits from 5.x on. WRITE's count holds dwords - 1 (20 bits).

use core::sync::atomic::{AtomicU32, Ordering};

use crate::error::{check_align, check_reserved, check_width, DecodeError, EncodeError};
use crate::family::SdmaVersion;
use crate::pkt3::CompareFn;
use crate::sink::{hi, join, lo, RingSink, Sink};

/// SDMA opcodes (`SDMA_OP_*`).
pub mod op {
    /// SDMA_OP_NOP.
    pub const NOP: u8 = 0;
    /// SDMA_OP_COPY.
    pub const COPY: u8 = 1;
    /// SDMA_OP_WRITE.
    pub const WRITE: u8 = 2;
    /// SDMA_OP_INDIRECT.
    pub const INDIRECT: u8 = 4;
    /// SDMA_OP_FENCE.
    pub const FENCE: u8 = 5;
    /// SDMA_OP_TRAP.
    pub const TRAP: u8 = 6;
    /// SDMA_OP_POLL_REGMEM.
    pub const POLL_REGMEM: u8 = 8;
    /// SDMA_OP_ATOMIC.
    pub const ATOMIC: u8 = 10;
    /// SDMA_OP_CONST_FILL.
    pub const CONST_FILL: u8 = 11;
    /// SDMA_OP_TIMESTAMP.
    pub const TIMESTAMP: u8 = 13;
    /// SDMA_SUBOP_COPY_LINEAR / SDMA_SUBOP_WRITE_LINEAR.
    pub const SUBOP_LINEAR: u8 = 0;
    /// SDMA_SUBOP_TIMESTAMP_SET.
    pub const SUBOP_TIMESTAMP_SET: u8 = 0;
    /// SDMA_SUBOP_TIMESTAMP_GET.
    pub const SUBOP_TIMESTAMP_GET: u8 = 1;
    /// SDMA_SUBOP_TIMESTAMP_GET_GLOBAL.
    pub const SUBOP_TIMESTAMP_GET_GLOBAL: u8 = 2;
}

/// An SDMA header dword.
pub const fn header(op: u8, sub_op: u8, fields: u32) -> u32 {
    op as u32 | ((sub_op as u32) << 8) | fields
}

impl SdmaVersion {
    /// Largest byte count [`copy_linear_split`] puts in one packet: the count
    /// field's range rounded down to 256 bytes (0x3FFF00 on 4.x, 0x3FFFFF00
    /// from 5.x; Mesa `sid.h` `SDMA_V2_0_COPY_MAX_BYTES` /
    /// `SDMA_V5_2_COPY_MAX_BYTES` note a hardware limit on the last 255 bytes).
    pub const fn copy_chunk_bytes(self) -> u32 {
        self.max_copy_bytes() - 256
    }
    const fn count_mask(self) -> u32 {
        ((1u64 << self.count_bits()) - 1) as u32
    }
}

/// NOP: `count` extra dwords follow the header (all ignored).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Nop {
    /// Dwords after the header (header bits 29:16), 0..=0x3FFF.
    pub count: u16,
}

/// COPY_LINEAR (7 dwords): copies `bytes` bytes from `src` to `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CopyLinear {
    /// Source byte address.
    pub src: u64,
    /// Destination byte address.
    pub dst: u64,
    /// Bytes to copy, 1..=`version.max_copy_bytes()` (count field = bytes - 1).
    pub bytes: u32,
    /// TMZ (header bit 18).
    pub tmz: bool,
    /// The PARAMETER dword (swizzle and cache-policy fields, version specific;
    /// 0 for default).
    pub parameter: u32,
}

/// CONST_FILL (5 dwords): fills `bytes` bytes at `dst` with `data`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConstFill {
    /// Destination byte address.
    pub dst: u64,
    /// Fill pattern.
    pub data: u32,
    /// Bytes to fill (count field = bytes - 1).
    pub bytes: u32,
    /// FILLSIZE (header bits 31:30): 0 byte, 1 word, 2 dword.
    pub fill_size: u8,
}

/// FENCE (4 dwords): writes `data` to `addr` once earlier packets completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fence {
    /// Destination (4-aligned).
    pub addr: u64,
    /// Value written.
    pub data: u32,
    /// MTYPE (header bits 18:16; 3 = uncached).
    pub mtype: u8,
    /// GCC (header bit 19, SDMA 5+).
    pub gcc: bool,
    /// SYS: system memory (header bit 20, SDMA 5+).
    pub sys: bool,
    /// SNP: snoop, CPU coherent (header bit 22, SDMA 5+).
    pub snp: bool,
    /// GPA: physical address (header bit 23, SDMA 5+).
    pub gpa: bool,
    /// L2_POLICY (header bits 25:24, SDMA 5+).
    pub l2_policy: u8,
}

impl Fence {
    /// A plain fence: write `data` at `addr`, no cache attributes.
    pub const fn new(addr: u64, data: u32) -> Self {
        Fence {
            addr,
            data,
            mtype: 0,
            gcc: false,
            sys: false,
            snp: false,
            gpa: false,
            l2_policy: 0,
        }
    }

    const fn header_fields(&self) -> u32 {
        ((self.mtype as u32) << 16)
            | ((self.gcc as u32) << 19)
            | ((self.sys as u32) << 20)
            | ((self.snp as u32) << 22)
            | ((self.gpa as u32) << 23)
            | ((self.l2_policy as u32) << 24)
    }
}

/// POLL_REGMEM (6 dwords): waits until `(value & mask) func reference`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PollRegmem {
    /// Compare function (header bits 30:28).
    pub func: CompareFn,
    /// MEM_POLL (header bit 31): poll memory rather than a register.
    pub mem_poll: bool,
    /// HDP_FLUSH (header bit 26).
    pub hdp_flush: bool,
    /// Memory: 4-aligned address. Register: register offset << 2.
    pub addr: u64,
    /// Reference value.
    pub reference: u32,
    /// Mask.
    pub mask: u32,
    /// Poll interval (dword 5 bits 15:0).
    pub interval: u16,
    /// Retry count (dword 5 bits 27:16; 0xFFF = forever).
    pub retry_count: u16,
}

/// `SDMA_ATOMIC_ADD64`: the TC operation ROCr's blits use to decrement a completion
/// signal (adding `u64::MAX`); ROCR-Runtime blit_sdma.cpp `BuildAtomicDecrementCommand`.
pub const ATOMIC_ADD64: u8 = 47;

/// ATOMIC (8 dwords, `SDMA_PKT_ATOMIC`): a memory atomic at `addr`. Header: LOOP bit 16,
/// TMZ bit 18, ATOMIC_OP bits 31:25 (a TC atomic operation number); then addr, src_data,
/// cmp_data (64-bit each) and LOOP_INTERVAL (bits 12:0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Atomic {
    /// TC atomic operation (7 bits), e.g. [`ATOMIC_ADD64`].
    pub atomic_op: u8,
    /// LOOP: repeat a compare-swap until it succeeds.
    pub loop_: bool,
    /// TMZ.
    pub tmz: bool,
    /// 8-aligned address.
    pub addr: u64,
    /// Source operand.
    pub src_data: u64,
    /// Compare operand (compare-swap operations).
    pub cmp_data: u64,
    /// Loop interval (13 bits).
    pub loop_interval: u16,
}

/// TRAP (2 dwords): raises an interrupt carrying `int_context`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Trap {
    /// INT_CONTEXT (bits 27:0); KFD uses the event id.
    pub int_context: u32,
}

/// TIMESTAMP sub-operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimestampKind {
    /// Sets the local timestamp to `value`.
    SetLocal,
    /// Writes the local timestamp to `value` (an 8-aligned address).
    GetLocal,
    /// Writes the global timestamp to `value` (an 8-aligned address).
    GetGlobal,
}

/// TIMESTAMP (3 dwords).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Timestamp {
    /// Which timestamp operation.
    pub kind: TimestampKind,
    /// Address (GET) or timestamp value (SET).
    pub value: u64,
}

/// WRITE linear (4 + n dwords): writes `data` at `dst`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Write<'a> {
    /// Destination (4-aligned).
    pub dst: u64,
    /// Data, 1..=2^20 dwords.
    pub data: &'a [u32],
}

/// INDIRECT (6 dwords): executes an SDMA indirect buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Indirect {
    /// VMID (header bits 19:16).
    pub vmid: u8,
    /// IB address (32-byte aligned).
    pub ib_addr: u64,
    /// IB size in dwords (20 bits).
    pub ib_dwords: u32,
    /// Context save area address.
    pub csa_addr: u64,
}

/// Any SDMA packet this crate decodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SdmaPacket<'a> {
    /// NOP.
    Nop(Nop),
    /// COPY_LINEAR.
    CopyLinear(CopyLinear),
    /// CONST_FILL.
    ConstFill(ConstFill),
    /// FENCE.
    Fence(Fence),
    /// POLL_REGMEM.
    PollRegmem(PollRegmem),
    /// TRAP.
    Trap(Trap),
    /// ATOMIC.
    Atomic(Atomic),
    /// TIMESTAMP.
    Timestamp(Timestamp),
    /// WRITE linear.
    Write(Write<'a>),
    /// INDIRECT.
    Indirect(Indirect),
}

impl SdmaPacket<'_> {
    /// Size in dwords.
    pub fn dwords(&self, _version: SdmaVersion) -> usize {
        match self {
            SdmaPacket::Nop(n) => 1 + n.count as usize,
            SdmaPacket::CopyLinear(_) => 7,
            SdmaPacket::ConstFill(_) => 5,
            SdmaPacket::Fence(_) => 4,
            SdmaPacket::PollRegmem(_) => 6,
            SdmaPacket::Trap(_) => 2,
            SdmaPacket::Atomic(_) => 8,
            SdmaPacket::Timestamp(_) => 3,
            SdmaPacket::Write(w) => 4 + w.data.len(),
            SdmaPacket::Indirect(_) => 6,
        }
    }

    /// Disassembly name.
    pub const fn name(&self) -> &'static str {
        match self {
            SdmaPacket::Nop(_) => "NOP",
            SdmaPacket::CopyLinear(_) => "COPY_LINEAR",
            SdmaPacket::ConstFill(_) => "CONST_FILL",
            SdmaPacket::Fence(_) => "FENCE",
            SdmaPacket::PollRegmem(_) => "POLL_REGMEM",
            SdmaPacket::Trap(_) => "TRAP",
            SdmaPacket::Atomic(_) => "ATOMIC",
            SdmaPacket::Timestamp(t) => match t.kind {
                TimestampKind::SetLocal => "TIMESTAMP_SET",
                TimestampKind::GetLocal => "TIMESTAMP_GET",
                TimestampKind::GetGlobal => "TIMESTAMP_GET_GLOBAL",
            },
            SdmaPacket::Write(_) => "WRITE_LINEAR",
            SdmaPacket::Indirect(_) => "INDIRECT",
        }
    }

    /// Checks every field against `version`.
    pub fn validate(&self, version: SdmaVersion) -> Result<(), EncodeError> {
        let cb = version.count_bits();
        match self {
            SdmaPacket::Nop(n) => check_width("count", n.count as u64, 14),
            SdmaPacket::CopyLinear(c) => {
                if c.bytes == 0 {
                    return Err(EncodeError::InvalidField {
                        field: "count",
                        value: 0,
                    });
                }
                check_width("count", (c.bytes - 1) as u64, cb)
            }
            SdmaPacket::ConstFill(f) => {
                if f.bytes == 0 {
                    return Err(EncodeError::InvalidField {
                        field: "count",
                        value: 0,
                    });
                }
                check_width("count", (f.bytes - 1) as u64, cb)?;
                check_width("fillsize", f.fill_size as u64, 2)
            }
            SdmaPacket::Fence(f) => {
                check_align("addr", f.addr, 4)?;
                check_width("mtype", f.mtype as u64, 3)?;
                check_width("l2_policy", f.l2_policy as u64, 2)
            }
            SdmaPacket::PollRegmem(p) => {
                check_align("addr", p.addr, 4)?;
                check_width("retry_count", p.retry_count as u64, 12)
            }
            SdmaPacket::Trap(t) => check_width("int_context", t.int_context as u64, 28),
            SdmaPacket::Atomic(a) => {
                check_align("addr", a.addr, 8)?;
                check_width("atomic_op", a.atomic_op as u64, 7)?;
                check_width("loop_interval", a.loop_interval as u64, 13)
            }
            SdmaPacket::Timestamp(t) => match t.kind {
                TimestampKind::SetLocal => Ok(()),
                _ => check_align("addr", t.value, 8),
            },
            SdmaPacket::Write(w) => {
                if w.data.is_empty() || w.data.len() > (1 << 20) {
                    return Err(EncodeError::InvalidField {
                        field: "count",
                        value: w.data.len() as u64,
                    });
                }
                check_align("dst_addr", w.dst, 4)
            }
            SdmaPacket::Indirect(i) => {
                check_width("vmid", i.vmid as u64, 4)?;
                check_align("ib_base", i.ib_addr, 32)?;
                check_width("ib_size", i.ib_dwords as u64, 20)
            }
        }
    }

    fn emit<S: Sink + ?Sized>(&self, _version: SdmaVersion, s: &mut S) {
        match self {
            SdmaPacket::Nop(n) => {
                s.put(0, header(op::NOP, 0, (n.count as u32) << 16));
                for i in 0..n.count as usize {
                    s.put(1 + i, 0);
                }
            }
            SdmaPacket::CopyLinear(c) => {
                s.put(0, header(op::COPY, op::SUBOP_LINEAR, (c.tmz as u32) << 18));
                s.put(1, c.bytes - 1);
                s.put(2, c.parameter);
                s.put(3, lo(c.src));
                s.put(4, hi(c.src));
                s.put(5, lo(c.dst));
                s.put(6, hi(c.dst));
            }
            SdmaPacket::ConstFill(f) => {
                s.put(0, header(op::CONST_FILL, 0, (f.fill_size as u32) << 30));
                s.put(1, lo(f.dst));
                s.put(2, hi(f.dst));
                s.put(3, f.data);
                s.put(4, f.bytes - 1);
            }
            SdmaPacket::Fence(f) => {
                s.put(0, header(op::FENCE, 0, f.header_fields()));
                s.put(1, lo(f.addr));
                s.put(2, hi(f.addr));
                s.put(3, f.data);
            }
            SdmaPacket::PollRegmem(p) => {
                s.put(
                    0,
                    header(
                        op::POLL_REGMEM,
                        0,
                        ((p.hdp_flush as u32) << 26)
                            | ((p.func as u32) << 28)
                            | ((p.mem_poll as u32) << 31),
                    ),
                );
                s.put(1, lo(p.addr));
                s.put(2, hi(p.addr));
                s.put(3, p.reference);
                s.put(4, p.mask);
                s.put(5, p.interval as u32 | ((p.retry_count as u32) << 16));
            }
            SdmaPacket::Trap(t) => {
                s.put(0, header(op::TRAP, 0, 0));
                s.put(1, t.int_context);
            }
            SdmaPacket::Atomic(a) => {
                s.put(
                    0,
                    header(
                        op::ATOMIC,
                        0,
                        ((a.loop_ as u32) << 16)
                            | ((a.tmz as u32) << 18)
                            | ((a.atomic_op as u32) << 25),
                    ),
                );
                s.put(1, lo(a.addr));
                s.put(2, hi(a.addr));
                s.put(3, lo(a.src_data));
                s.put(4, hi(a.src_data));
                s.put(5, lo(a.cmp_data));
                s.put(6, hi(a.cmp_data));
                s.put(7, a.loop_interval as u32);
            }
            SdmaPacket::Timestamp(t) => {
                let sub = match t.kind {
                    TimestampKind::SetLocal => op::SUBOP_TIMESTAMP_SET,
                    TimestampKind::GetLocal => op::SUBOP_TIMESTAMP_GET,
                    TimestampKind::GetGlobal => op::SUBOP_TIMESTAMP_GET_GLOBAL,
                };
                s.put(0, header(op::TIMESTAMP, sub, 0));
                s.put(1, lo(t.value));
                s.put(2, hi(t.value));
            }
            SdmaPacket::Write(w) => {
                s.put(0, header(op::WRITE, op::SUBOP_LINEAR, 0));
                s.put(1, lo(w.dst));
                s.put(2, hi(w.dst));
                s.put(3, (w.data.len() - 1) as u32);
                for (i, &d) in w.data.iter().enumerate() {
                    s.put(4 + i, d);
                }
            }
            SdmaPacket::Indirect(i) => {
                s.put(0, header(op::INDIRECT, 0, (i.vmid as u32) << 16));
                s.put(1, lo(i.ib_addr));
                s.put(2, hi(i.ib_addr));
                s.put(3, i.ib_dwords);
                s.put(4, lo(i.csa_addr));
                s.put(5, hi(i.csa_addr));
            }
        }
    }

    /// Encodes into `out`, returning the dwords written. Never allocates.
    pub fn encode(&self, version: SdmaVersion, out: &mut [u32]) -> Result<usize, EncodeError> {
        self.validate(version)?;
        let n = self.dwords(version);
        if out.len() < n {
            return Err(EncodeError::BufferTooSmall {
                needed: n,
                available: out.len(),
            });
        }
        self.emit(version, out);
        Ok(n)
    }
}

/// Decodes one SDMA packet at the start of `words`: the packet and the dwords
/// it spans. Never panics.
pub fn decode_sdma(
    words: &[u32],
    version: SdmaVersion,
) -> Result<(SdmaPacket<'_>, usize), DecodeError> {
    let Some(&h) = words.first() else {
        return Err(DecodeError::Truncated {
            needed: 1,
            available: 0,
        });
    };
    let opc = h as u8;
    let sub = (h >> 8) as u8;
    let n = packet_dwords(words)?;
    if words.len() < n {
        return Err(DecodeError::Truncated {
            needed: n,
            available: words.len(),
        });
    }
    let w = &words[..n];
    let cmask = version.count_mask();
    decode_body(w, h, opc, sub, n, cmask)
}

/// Length in dwords of the SDMA packet at the start of `words`, from its header
/// (and, for WRITE, its count dword).
pub fn packet_dwords(words: &[u32]) -> Result<usize, DecodeError> {
    let Some(&h) = words.first() else {
        return Err(DecodeError::Truncated {
            needed: 1,
            available: 0,
        });
    };
    let opc = h as u8;
    let sub = (h >> 8) as u8;
    Ok(match (opc, sub) {
        (op::NOP, 0) => 1 + ((h >> 16) & 0x3FFF) as usize,
        (op::COPY, op::SUBOP_LINEAR) => 7,
        (op::CONST_FILL, 0) => 5,
        (op::FENCE, 0) => 4,
        (op::POLL_REGMEM, 0) => 6,
        (op::TRAP, 0) => 2,
        (op::ATOMIC, 0) => 8,
        (op::TIMESTAMP, 0..=2) => 3,
        (op::WRITE, op::SUBOP_LINEAR) => {
            if words.len() < 4 {
                return Err(DecodeError::Truncated {
                    needed: 4,
                    available: words.len(),
                });
            }
            check_reserved(words[3], 0xFFFFF, 3)?;
            5 + (words[3] & 0xFFFFF) as usize
        }
        (op::INDIRECT, 0) => 6,
        _ => {
            return Err(DecodeError::UnknownSdmaOpcode {
                op: opc,
                sub_op: sub,
            })
        }
    })
}

fn decode_body(
    w: &[u32],
    h: u32,
    opc: u8,
    sub: u8,
    n: usize,
    cmask: u32,
) -> Result<(SdmaPacket<'_>, usize), DecodeError> {
    let pkt = match opc {
        op::NOP => {
            check_reserved(h, 0x3FFF_0000 | 0xFFFF, 0)?;
            SdmaPacket::Nop(Nop {
                count: (n - 1) as u16,
            })
        }
        op::COPY => {
            check_reserved(h, 0xFFFF | (1 << 18), 0)?;
            check_reserved(w[1], cmask, 1)?;
            SdmaPacket::CopyLinear(CopyLinear {
                src: join(w[3], w[4]),
                dst: join(w[5], w[6]),
                bytes: w[1] + 1,
                tmz: h & (1 << 18) != 0,
                parameter: w[2],
            })
        }
        op::CONST_FILL => {
            check_reserved(h, 0xFFFF | (3 << 30), 0)?;
            check_reserved(w[4], cmask, 4)?;
            SdmaPacket::ConstFill(ConstFill {
                dst: join(w[1], w[2]),
                data: w[3],
                bytes: w[4] + 1,
                fill_size: (h >> 30) as u8,
            })
        }
        op::FENCE => {
            check_reserved(h, 0xFFFF | (0x1F << 16) | (0xF << 22), 0)?;
            check_reserved(w[1], !3, 1)?;
            SdmaPacket::Fence(Fence {
                addr: join(w[1], w[2]),
                data: w[3],
                mtype: ((h >> 16) & 7) as u8,
                gcc: h & (1 << 19) != 0,
                sys: h & (1 << 20) != 0,
                snp: h & (1 << 22) != 0,
                gpa: h & (1 << 23) != 0,
                l2_policy: ((h >> 24) & 3) as u8,
            })
        }
        op::POLL_REGMEM => {
            check_reserved(h, 0xFFFF | (1 << 26) | (7 << 28) | (1 << 31), 0)?;
            check_reserved(w[1], !3, 1)?;
            check_reserved(w[5], 0x0FFF_FFFF, 5)?;
            let f = (h >> 28) & 7;
            let Some(func) = CompareFn::from_bits(f) else {
                return Err(DecodeError::InvalidField {
                    field: "func",
                    value: f as u64,
                });
            };
            SdmaPacket::PollRegmem(PollRegmem {
                func,
                mem_poll: h >> 31 != 0,
                hdp_flush: h & (1 << 26) != 0,
                addr: join(w[1], w[2]),
                reference: w[3],
                mask: w[4],
                interval: w[5] as u16,
                retry_count: ((w[5] >> 16) & 0xFFF) as u16,
            })
        }
        op::TRAP => {
            check_reserved(h, 0xFFFF, 0)?;
            check_reserved(w[1], 0x0FFF_FFFF, 1)?;
            SdmaPacket::Trap(Trap { int_context: w[1] })
        }
        op::ATOMIC => {
            check_reserved(h, 0xFFFF | (1 << 16) | (1 << 18) | (0x7F << 25), 0)?;
            check_reserved(w[1], !7, 1)?;
            check_reserved(w[7], 0x1FFF, 7)?;
            SdmaPacket::Atomic(Atomic {
                atomic_op: (h >> 25) as u8,
                loop_: h & (1 << 16) != 0,
                tmz: h & (1 << 18) != 0,
                addr: join(w[1], w[2]),
                src_data: join(w[3], w[4]),
                cmp_data: join(w[5], w[6]),
                loop_interval: (w[7] & 0x1FFF) as u16,
            })
        }
        op::TIMESTAMP => {
            check_reserved(h, 0xFFFF, 0)?;
            let kind = match sub {
                op::SUBOP_TIMESTAMP_SET => TimestampKind::SetLocal,
                op::SUBOP_TIMESTAMP_GET => TimestampKind::GetLocal,
                _ => TimestampKind::GetGlobal,
            };
            if kind != TimestampKind::SetLocal {
                check_reserved(w[1], !7, 1)?;
            }
            SdmaPacket::Timestamp(Timestamp {
                kind,
                value: join(w[1], w[2]),
            })
        }
        op::WRITE => {
            check_reserved(h, 0xFFFF, 0)?;
            check_reserved(w[1], !3, 1)?;
            SdmaPacket::Write(Write {
                dst: join(w[1], w[2]),
                data: &w[4..],
            })
        }
        _ => {
            // INDIRECT
            check_reserved(h, 0xFFFF | (0xF << 16), 0)?;
            check_reserved(w[1], !31, 1)?;
            check_reserved(w[3], 0xFFFFF, 3)?;
            SdmaPacket::Indirect(Indirect {
                vmid: ((h >> 16) & 0xF) as u8,
                ib_addr: join(w[1], w[2]),
                ib_dwords: w[3],
                csa_addr: join(w[4], w[5]),
            })
        }
    };
    Ok((pkt, n))
}

/// Iterator of COPY_LINEAR packets covering a large copy; see
/// [`copy_linear_split`].
#[derive(Clone, Debug)]
pub struct CopySplit {
    src: u64,
    dst: u64,
    remaining: u64,
    chunk: u64,
}

impl Iterator for CopySplit {
    type Item = CopyLinear;
    fn next(&mut self) -> Option<CopyLinear> {
        if self.remaining == 0 {
            return None;
        }
        let n = core::cmp::min(self.remaining, self.chunk);
        let pkt = CopyLinear {
            src: self.src,
            dst: self.dst,
            bytes: n as u32,
            tmz: false,
            parameter: 0,
        };
        self.src = self.src.wrapping_add(n);
        self.dst = self.dst.wrapping_add(n);
        self.remaining -= n;
        Some(pkt)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let k = self.remaining.div_ceil(self.chunk) as usize;
        (k, Some(k))
    }
}

/// Splits a copy of `bytes` bytes into COPY_LINEAR packets of at most
/// `version.copy_chunk_bytes()` bytes each, so every count fits its field.
pub fn copy_linear_split(src: u64, dst: u64, bytes: u64, version: SdmaVersion) -> CopySplit {
    CopySplit {
        src,
        dst,
        remaining: bytes,
        chunk: version.copy_chunk_bytes() as u64,
    }
}

/// Writes SDMA packets into a ring viewed as atomics. The write pointer counts
/// bytes and grows monotonically (the ring offset is `wptr % ring bytes`). A
/// packet never straddles the ring end: if it would, the rest of the ring is
/// filled with one-dword NOPs and the packet starts at offset 0.
pub struct SdmaRingWriter<'a> {
    ring: &'a [AtomicU32],
    version: SdmaVersion,
}

impl<'a> SdmaRingWriter<'a> {
    /// A writer over `ring`; `None` unless its length in dwords is a non-zero
    /// power of two.
    pub fn new(ring: &'a [AtomicU32], version: SdmaVersion) -> Option<Self> {
        if ring.is_empty() || !ring.len().is_power_of_two() {
            return None;
        }
        Some(SdmaRingWriter { ring, version })
    }

    /// Ring size in bytes.
    pub fn ring_bytes(&self) -> u64 {
        self.ring.len() as u64 * 4
    }

    /// Writes `pkt` at byte write pointer `wptr` (relaxed stores, then a
    /// release fence) and returns the new write pointer in bytes.
    pub fn write(&self, wptr: u64, pkt: &SdmaPacket<'_>) -> Result<u64, EncodeError> {
        check_align("wptr", wptr, 4)?;
        pkt.validate(self.version)?;
        let n = pkt.dwords(self.version);
        let len = self.ring.len();
        if n > len {
            return Err(EncodeError::BufferTooSmall {
                needed: n,
                available: len,
            });
        }
        let mut wptr = wptr;
        let mut pos = ((wptr / 4) as usize) & (len - 1);
        if pos + n > len {
            for w in &self.ring[pos..] {
                w.store(header(op::NOP, 0, 0), Ordering::Relaxed);
            }
            wptr += ((len - pos) * 4) as u64;
            pos = 0;
        }
        pkt.emit(
            self.version,
            &mut RingSink {
                ring: self.ring,
                start: pos,
            },
        );
        core::sync::atomic::fence(Ordering::Release);
        Ok(wptr + (n * 4) as u64)
    }
}
