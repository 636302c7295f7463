//! PM4 type-3 packets (command processor / MEC).
//!
//! Header (all families): bits 31:30 type (3), bits 29:16 count = total dwords - 2,
//! bits 15:8 opcode, bit 1 shader type, bit 0 predicate (`PACKET3()` in the
//! kernel's `soc15d.h`/`nvd.h`, `PKT3()` in Mesa's `sid.h`). Encoders write
//! bits 7:0 as zero; decoders ignore them. A NOP whose count is 0x3FFF is a
//! header-only (one dword) NOP.
//!
//! Every packet struct has `encode(&self, family, out) -> Result<usize, EncodeError>`
//! (no allocation) and `dwords(&self, family)`. [`decode_pm4`] decodes one packet.

use core::sync::atomic::{AtomicU32, Ordering};

use crate::error::{check_align, check_reserved, check_width, DecodeError, EncodeError};
use crate::family::GfxFamily;
use crate::sink::{hi, join, lo, RingSink, Sink};

/// PM4 type-3 opcodes (`PACKET3_*` in `soc15d.h` / `nvd.h`).
pub mod op {
    /// NOP.
    pub const NOP: u8 = 0x10;
    /// DISPATCH_DIRECT.
    pub const DISPATCH_DIRECT: u8 = 0x15;
    /// ATOMIC_MEM.
    pub const ATOMIC_MEM: u8 = 0x1E;
    /// WRITE_DATA.
    pub const WRITE_DATA: u8 = 0x37;
    /// WAIT_REG_MEM.
    pub const WAIT_REG_MEM: u8 = 0x3C;
    /// INDIRECT_BUFFER.
    pub const INDIRECT_BUFFER: u8 = 0x3F;
    /// COPY_DATA.
    pub const COPY_DATA: u8 = 0x40;
    /// EVENT_WRITE.
    pub const EVENT_WRITE: u8 = 0x46;
    /// RELEASE_MEM.
    pub const RELEASE_MEM: u8 = 0x49;
    /// DMA_DATA.
    pub const DMA_DATA: u8 = 0x50;
    /// ACQUIRE_MEM.
    pub const ACQUIRE_MEM: u8 = 0x58;
    /// SET_SH_REG.
    pub const SET_SH_REG: u8 = 0x76;
    /// WAIT_REG_MEM64.
    pub const WAIT_REG_MEM64: u8 = 0x93;
    /// PRED_EXEC.
    pub const PRED_EXEC: u8 = 0x23;
}

/// `PACKET3(op, count)`: a type-3 header; `count` = total dwords - 2.
pub const fn packet3(opcode: u8, count: u16) -> u32 {
    (3u32 << 30) | (((count as u32) & 0x3FFF) << 16) | ((opcode as u32) << 8)
}

/// The header-only NOP, `PACKET3(PACKET3_NOP, 0x3FFF)`: one dword of padding.
pub const NOP_HEADER_ONLY: u32 = packet3(op::NOP, 0x3FFF);

/// Name of a type-3 opcode, or `None` if this crate does not name it.
pub const fn opcode_name(opcode: u8) -> Option<&'static str> {
    Some(match opcode {
        op::NOP => "NOP",
        op::DISPATCH_DIRECT => "DISPATCH_DIRECT",
        op::ATOMIC_MEM => "ATOMIC_MEM",
        op::WRITE_DATA => "WRITE_DATA",
        op::WAIT_REG_MEM => "WAIT_REG_MEM",
        op::INDIRECT_BUFFER => "INDIRECT_BUFFER",
        op::COPY_DATA => "COPY_DATA",
        op::EVENT_WRITE => "EVENT_WRITE",
        op::RELEASE_MEM => "RELEASE_MEM",
        op::DMA_DATA => "DMA_DATA",
        op::ACQUIRE_MEM => "ACQUIRE_MEM",
        op::SET_SH_REG => "SET_SH_REG",
        op::WAIT_REG_MEM64 => "WAIT_REG_MEM64",
        op::PRED_EXEC => "PRED_EXEC",
        0x11 => "SET_BASE",
        0x12 => "CLEAR_STATE",
        0x16 => "DISPATCH_INDIRECT",
        0x21 => "REG_RMW",
        0x22 => "COND_EXEC",
        0x39 => "MEM_SEMAPHORE",
        0x42 => "PFP_SYNC_ME",
        0x45 => "COND_WRITE",
        0x59 => "REWIND",
        0x5A => "INTERRUPT",
        0x68 => "SET_CONFIG_REG",
        0x69 => "SET_CONTEXT_REG",
        0x79 => "SET_UCONFIG_REG",
        0x95 => "HDP_FLUSH",
        0x98 => "INVALIDATE_TLBS",
        0xA0 => "SET_RESOURCES",
        0xA2 => "MAP_QUEUES",
        0xA3 => "UNMAP_QUEUES",
        0xA4 => "QUERY_STATUS",
        0xA5 => "RUN_LIST",
        _ => return None,
    })
}

/// Compare function of WAIT_REG_MEM / WAIT_REG_MEM64 (and SDMA POLL_REGMEM):
/// the engine tests `(value & mask) FUNCTION reference`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompareFn {
    /// 0: always pass.
    Always = 0,
    /// 1: `<`.
    Less = 1,
    /// 2: `<=`.
    LessEqual = 2,
    /// 3: `==`.
    Equal = 3,
    /// 4: `!=`.
    NotEqual = 4,
    /// 5: `>=`.
    GreaterEqual = 5,
    /// 6: `>`.
    Greater = 6,
}

impl CompareFn {
    /// All seven functions.
    pub const ALL: [CompareFn; 7] = [
        CompareFn::Always,
        CompareFn::Less,
        CompareFn::LessEqual,
        CompareFn::Equal,
        CompareFn::NotEqual,
        CompareFn::GreaterEqual,
        CompareFn::Greater,
    ];

    /// From the 3-bit field; 7 is reserved.
    pub const fn from_bits(v: u32) -> Option<Self> {
        Some(match v {
            0 => CompareFn::Always,
            1 => CompareFn::Less,
            2 => CompareFn::LessEqual,
            3 => CompareFn::Equal,
            4 => CompareFn::NotEqual,
            5 => CompareFn::GreaterEqual,
            6 => CompareFn::Greater,
            _ => return None,
        })
    }

    /// Disassembly name: ALWAYS, LT, LEQ, EQ, NEQ, GEQ, GT.
    pub const fn name(self) -> &'static str {
        match self {
            CompareFn::Always => "ALWAYS",
            CompareFn::Less => "LT",
            CompareFn::LessEqual => "LEQ",
            CompareFn::Equal => "EQ",
            CompareFn::NotEqual => "NEQ",
            CompareFn::GreaterEqual => "GEQ",
            CompareFn::Greater => "GT",
        }
    }

    /// Evaluates `(value & mask) FUNCTION reference` (unsigned), as the CP does.
    pub const fn test(self, value: u64, mask: u64, reference: u64) -> bool {
        let v = value & mask;
        match self {
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

/// WAIT_REG_MEM `mem_space` (bits 5:4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemSpace {
    /// 0: poll a register.
    Register = 0,
    /// 1: poll memory.
    Memory = 1,
}

impl MemSpace {
    const fn from_bits(v: u32) -> Option<Self> {
        match v {
            0 => Some(MemSpace::Register),
            1 => Some(MemSpace::Memory),
            _ => None,
        }
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            MemSpace::Register => "register",
            MemSpace::Memory => "memory",
        }
    }
}

/// WAIT_REG_MEM `operation` (bits 7:6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WaitOperation {
    /// 0: wait.
    WaitRegMem = 0,
    /// 1: write register 1, wait, write register 2 (register space only).
    WrWaitWrReg = 1,
    /// 2: conditional wait (WAIT_REG_MEM64 on gfx10+).
    WaitRegMemCond = 2,
    /// 3: preemptable memory wait.
    WaitMemPreemptable = 3,
}

impl WaitOperation {
    const fn from_bits(v: u32) -> Self {
        match v & 3 {
            0 => WaitOperation::WaitRegMem,
            1 => WaitOperation::WrWaitWrReg,
            2 => WaitOperation::WaitRegMemCond,
            _ => WaitOperation::WaitMemPreemptable,
        }
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            WaitOperation::WaitRegMem => "wait_reg_mem",
            WaitOperation::WrWaitWrReg => "wr_wait_wr_reg",
            WaitOperation::WaitRegMemCond => "wait_reg_mem_cond",
            WaitOperation::WaitMemPreemptable => "wait_mem_preemptable",
        }
    }
}

/// 2-bit L2 cache policy used by several packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CachePolicy {
    /// 0: LRU.
    Lru = 0,
    /// 1: stream.
    Stream = 1,
    /// 2: no-allocate (gfx10+) / bypass (gfx9 WRITE_DATA on MEC).
    Noa = 2,
    /// 3: bypass.
    Bypass = 3,
}

impl CachePolicy {
    const fn from_bits(v: u32) -> Self {
        match v & 3 {
            0 => CachePolicy::Lru,
            1 => CachePolicy::Stream,
            2 => CachePolicy::Noa,
            _ => CachePolicy::Bypass,
        }
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            CachePolicy::Lru => "lru",
            CachePolicy::Stream => "stream",
            CachePolicy::Noa => "noa",
            CachePolicy::Bypass => "bypass",
        }
    }
}

// ---------------------------------------------------------------------------
// Encoding plumbing

trait Encodable {
    fn len(&self, fam: GfxFamily) -> usize;
    fn validate(&self, fam: GfxFamily) -> Result<(), EncodeError>;
    fn emit<S: Sink + ?Sized>(&self, fam: GfxFamily, s: &mut S);
}

macro_rules! encode_methods {
    ($t:ty) => {
        impl $t {
            /// Size in dwords of this packet on `family`.
            pub fn dwords(&self, family: GfxFamily) -> usize {
                Encodable::len(self, family)
            }
            /// Encodes into `out`, returning the dwords written. Never allocates.
            pub fn encode(&self, family: GfxFamily, out: &mut [u32]) -> Result<usize, EncodeError> {
                Encodable::validate(self, family)?;
                let n = Encodable::len(self, family);
                if out.len() < n {
                    return Err(EncodeError::BufferTooSmall {
                        needed: n,
                        available: out.len(),
                    });
                }
                Encodable::emit(self, family, out);
                Ok(n)
            }
        }
    };
}

// ---------------------------------------------------------------------------
// NOP

/// NOP: `dwords` total dwords of padding (1 = header-only form, count 0x3FFF;
/// otherwise count = dwords - 2 and the body is ignored by the CP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Nop {
    /// Total dwords including the header, 1..=0x4000.
    pub dwords: u32,
}

impl Nop {
    /// Largest NOP: count 0x3FFE, 0x4000 dwords.
    pub const MAX_DWORDS: u32 = 0x4000;
}

impl Encodable for Nop {
    fn len(&self, _: GfxFamily) -> usize {
        self.dwords as usize
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        if self.dwords == 0 || self.dwords > Self::MAX_DWORDS {
            return Err(EncodeError::InvalidField {
                field: "dwords",
                value: self.dwords as u64,
            });
        }
        Ok(())
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        if self.dwords == 1 {
            s.put(0, NOP_HEADER_ONLY);
        } else {
            s.put(0, packet3(op::NOP, (self.dwords - 2) as u16));
            for i in 1..self.dwords as usize {
                s.put(i, 0);
            }
        }
    }
}
encode_methods!(Nop);

// ---------------------------------------------------------------------------
// WRITE_DATA

/// WRITE_DATA destination (`DST_SEL`, dword 1 bits 11:8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WriteDataDst {
    /// 0: memory-mapped register (`addr` = register dword offset).
    Register = 0,
    /// 1: memory, synchronous via GRBM.
    MemorySync = 1,
    /// 2: TC/L2.
    TcL2 = 2,
    /// 3: GDS.
    Gds = 3,
    /// 5: memory (asynchronous, direct).
    Memory = 5,
}

impl WriteDataDst {
    const fn from_bits(v: u32) -> Option<Self> {
        Some(match v {
            0 => WriteDataDst::Register,
            1 => WriteDataDst::MemorySync,
            2 => WriteDataDst::TcL2,
            3 => WriteDataDst::Gds,
            5 => WriteDataDst::Memory,
            _ => return None,
        })
    }
    /// Whether the destination is memory (not a register or GDS).
    ///
    /// ```
    /// use pm4::pkt3::WriteDataDst;
    ///
    /// assert!(WriteDataDst::Memory.is_memory());
    /// assert!(!WriteDataDst::Gds.is_memory());
    /// ```
    pub const fn is_memory(self) -> bool {
        matches!(
            self,
            WriteDataDst::MemorySync | WriteDataDst::TcL2 | WriteDataDst::Memory
        )
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            WriteDataDst::Register => "register",
            WriteDataDst::MemorySync => "memory_sync",
            WriteDataDst::TcL2 => "tc_l2",
            WriteDataDst::Gds => "gds",
            WriteDataDst::Memory => "memory",
        }
    }
}

/// WRITE_DATA (0x37): writes `data` to memory or registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WriteData<'a> {
    /// Destination select.
    pub dst_sel: WriteDataDst,
    /// Increment the address per dword (false sets `WR_ONE_ADDR`, bit 16).
    pub addr_incr: bool,
    /// Wait for write confirmation (bit 20).
    pub wr_confirm: bool,
    /// Cache policy (bits 26:25).
    pub cache_policy: CachePolicy,
    /// Engine select (bits 31:30): 0 ME, 1 PFP, 2 CE.
    pub engine_sel: u8,
    /// Destination: a 4-byte aligned byte address for memory destinations,
    /// the register dword offset for `Register`, the GDS offset for `Gds`.
    pub addr: u64,
    /// Data dwords (1..=0x3FFD).
    pub data: &'a [u32],
}

impl<'a> WriteData<'a> {
    /// The common write: `data` to memory at `addr` (4-byte aligned), address
    /// increment, write confirm, LRU, engine ME.
    pub const fn memory(addr: u64, data: &'a [u32]) -> WriteData<'a> {
        WriteData {
            dst_sel: WriteDataDst::Memory,
            addr_incr: true,
            wr_confirm: true,
            cache_policy: CachePolicy::Lru,
            engine_sel: 0,
            addr,
            data,
        }
    }

    /// The four dwords before the data (header, control, address), unvalidated: what
    /// the encoder writes, for callers that build the words themselves (the runtime's
    /// enqueue hot path).
    #[inline]
    pub const fn head(&self) -> [u32; 4] {
        [
            packet3(op::WRITE_DATA, (self.data.len() + 2) as u16),
            ((self.dst_sel as u32) << 8)
                | ((!self.addr_incr as u32) << 16)
                | ((self.wr_confirm as u32) << 20)
                | ((self.cache_policy as u32) << 25)
                | ((self.engine_sel as u32) << 30),
            lo(self.addr),
            hi(self.addr),
        ]
    }
}

impl Encodable for WriteData<'_> {
    fn len(&self, _: GfxFamily) -> usize {
        4 + self.data.len()
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        if self.data.is_empty() || self.data.len() > 0x3FFD {
            return Err(EncodeError::InvalidField {
                field: "count",
                value: self.data.len() as u64,
            });
        }
        check_width("engine_sel", self.engine_sel as u64, 2)?;
        if self.dst_sel.is_memory() {
            check_align("dst_addr", self.addr, 4)?;
        }
        Ok(())
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        for (i, w) in self.head().into_iter().enumerate() {
            s.put(i, w);
        }
        for (i, &d) in self.data.iter().enumerate() {
            s.put(4 + i, d);
        }
    }
}
encode_methods!(WriteData<'_>);

// ---------------------------------------------------------------------------
// WAIT_REG_MEM / WAIT_REG_MEM64

/// WAIT_REG_MEM (0x3C, 7 dwords): waits until `(value & mask) function reference`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WaitRegMem {
    /// Compare function (bits 2:0).
    pub function: CompareFn,
    /// Register or memory (bits 5:4).
    pub mem_space: MemSpace,
    /// Operation (bits 7:6).
    pub operation: WaitOperation,
    /// Engine (bits 9:8): 0 ME, 1 PFP.
    pub engine: u8,
    /// Cache policy for the poll reads (bits 26:25).
    pub cache_policy: CachePolicy,
    /// Memory: 4-byte aligned poll address. Register space: low 32 bits = the
    /// polled (or first written) register offset, high 32 bits = the second
    /// register of the write-wait-write form; each at most 18 bits.
    pub addr: u64,
    /// Reference value.
    pub reference: u32,
    /// Mask applied to the polled value.
    pub mask: u32,
    /// Poll interval (dword 6 bits 15:0).
    pub poll_interval: u16,
    /// `OPTIMIZE_ACE_OFFLOAD_MODE` (dword 6 bit 31).
    pub optimize_ace_offload: bool,
}

impl WaitRegMem {
    /// Dwords of a WAIT_REG_MEM on every family.
    pub const DWORDS: usize = 7;

    /// The common memory wait: `*addr & mask FUNCTION reference`, ME engine,
    /// poll interval `poll_interval`.
    pub const fn memory(
        function: CompareFn,
        addr: u64,
        reference: u32,
        mask: u32,
        poll_interval: u16,
    ) -> Self {
        WaitRegMem {
            function,
            mem_space: MemSpace::Memory,
            operation: WaitOperation::WaitRegMem,
            engine: 0,
            cache_policy: CachePolicy::Lru,
            addr,
            reference,
            mask,
            poll_interval,
            optimize_ace_offload: false,
        }
    }

    /// The packet's dwords (the same on every family), unvalidated: what the encoder
    /// writes, for callers that build the words themselves (the runtime's enqueue hot
    /// path).
    #[inline]
    pub const fn words(&self) -> [u32; Self::DWORDS] {
        [
            packet3(op::WAIT_REG_MEM, 5),
            wait_ctl(
                self.function,
                self.mem_space,
                self.operation,
                self.engine,
                self.cache_policy,
            ),
            lo(self.addr),
            hi(self.addr),
            self.reference,
            self.mask,
            self.poll_interval as u32 | ((self.optimize_ace_offload as u32) << 31),
        ]
    }

    /// Encodes straight into a ring of atomics (relaxed stores) at dword
    /// `start`, wrapping at the ring end. Returns the dwords written.
    pub fn encode_ring(
        &self,
        family: GfxFamily,
        ring: &[AtomicU32],
        start: usize,
    ) -> Result<usize, EncodeError> {
        self.validate(family)?;
        if ring.len() < Self::DWORDS || start >= ring.len() {
            return Err(EncodeError::BufferTooSmall {
                needed: Self::DWORDS,
                available: ring.len(),
            });
        }
        self.emit(family, &mut RingSink { ring, start });
        Ok(Self::DWORDS)
    }
}

const WAIT_CTL_KNOWN: u32 = 0x7 | (3 << 4) | (3 << 6) | (3 << 8) | (3 << 25);

const fn wait_ctl(
    function: CompareFn,
    ms: MemSpace,
    opn: WaitOperation,
    engine: u8,
    cp: CachePolicy,
) -> u32 {
    (function as u32)
        | ((ms as u32) << 4)
        | ((opn as u32) << 6)
        | ((engine as u32) << 8)
        | ((cp as u32) << 25)
}

fn validate_wait_addr(ms: MemSpace, addr: u64, align: u64) -> Result<(), EncodeError> {
    match ms {
        MemSpace::Memory => check_align("mem_poll_addr", addr, align),
        MemSpace::Register => {
            check_width("reg_poll_addr", lo(addr) as u64, 18)?;
            check_width("reg_write_addr2", hi(addr) as u64, 18)
        }
    }
}

impl Encodable for WaitRegMem {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        check_width("engine_sel", self.engine as u64, 2)?;
        validate_wait_addr(self.mem_space, self.addr, 4)
    }
    #[inline(always)]
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        for (i, w) in self.words().into_iter().enumerate() {
            s.put(i, w);
        }
    }
}
encode_methods!(WaitRegMem);

/// WAIT_REG_MEM64 (0x93, 9 dwords): 64-bit reference and mask; memory
/// addresses are 8-byte aligned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WaitRegMem64 {
    /// Compare function.
    pub function: CompareFn,
    /// Register or memory.
    pub mem_space: MemSpace,
    /// Operation.
    pub operation: WaitOperation,
    /// Engine (bits 9:8).
    pub engine: u8,
    /// Cache policy (bits 26:25).
    pub cache_policy: CachePolicy,
    /// Poll address (8-byte aligned for memory), as in [`WaitRegMem::addr`].
    pub addr: u64,
    /// 64-bit reference.
    pub reference: u64,
    /// 64-bit mask.
    pub mask: u64,
    /// Poll interval.
    pub poll_interval: u16,
}

impl WaitRegMem64 {
    /// Dwords of a WAIT_REG_MEM64.
    pub const DWORDS: usize = 9;
}

impl Encodable for WaitRegMem64 {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        check_width("engine_sel", self.engine as u64, 2)?;
        validate_wait_addr(self.mem_space, self.addr, 8)
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        s.put(0, packet3(op::WAIT_REG_MEM64, 7));
        s.put(
            1,
            wait_ctl(
                self.function,
                self.mem_space,
                self.operation,
                self.engine,
                self.cache_policy,
            ),
        );
        s.put(2, lo(self.addr));
        s.put(3, hi(self.addr));
        s.put(4, lo(self.reference));
        s.put(5, hi(self.reference));
        s.put(6, lo(self.mask));
        s.put(7, hi(self.mask));
        s.put(8, self.poll_interval as u32);
    }
}
encode_methods!(WaitRegMem64);

// ---------------------------------------------------------------------------
// RELEASE_MEM

/// Cache-action bits of RELEASE_MEM dword 1, already in position.
///
/// gfx9 (`soc15d.h`, `EOP_*`): the TC/TCL1 action enables. gfx10+ (`nvd.h`,
/// `PACKET3_RELEASE_MEM_GCR_*`): the GCR bits.
pub mod release_cache {
    /// gfx9 `EOP_TCL1_VOL_ACTION_EN` (bit 12).
    pub const GFX9_TCL1_VOL_ACTION_ENA: u32 = 1 << 12;
    /// gfx9 `EOP_TC_VOL_ACTION_EN` (bit 13).
    pub const GFX9_TC_VOL_ACTION_ENA: u32 = 1 << 13;
    /// gfx9 `EOP_TC_WB_ACTION_EN` (bit 15): write back L2.
    pub const GFX9_TC_WB_ACTION_ENA: u32 = 1 << 15;
    /// gfx9 `EOP_TCL1_ACTION_EN` (bit 16).
    pub const GFX9_TCL1_ACTION_ENA: u32 = 1 << 16;
    /// gfx9 `EOP_TC_ACTION_EN` (bit 17): invalidate L2.
    pub const GFX9_TC_ACTION_ENA: u32 = 1 << 17;
    /// gfx9 `EOP_TC_NC_ACTION_EN` (bit 19).
    pub const GFX9_TC_NC_ACTION_ENA: u32 = 1 << 19;
    /// gfx9 `TC_WC_ACTION_ENA` (bit 20).
    pub const GFX9_TC_WC_ACTION_ENA: u32 = 1 << 20;
    /// gfx9 `EOP_TC_MD_ACTION_EN` (bit 21).
    pub const GFX9_TC_MD_ACTION_ENA: u32 = 1 << 21;
    /// Every gfx9 cache-action bit.
    pub const GFX9_MASK: u32 = GFX9_TCL1_VOL_ACTION_ENA
        | GFX9_TC_VOL_ACTION_ENA
        | GFX9_TC_WB_ACTION_ENA
        | GFX9_TCL1_ACTION_ENA
        | GFX9_TC_ACTION_ENA
        | GFX9_TC_NC_ACTION_ENA
        | GFX9_TC_WC_ACTION_ENA
        | GFX9_TC_MD_ACTION_ENA;
    /// gfx10+ `GCR_GLM_WB` (bit 12).
    pub const GCR_GLM_WB: u32 = 1 << 12;
    /// gfx10+ `GCR_GLM_INV` (bit 13).
    pub const GCR_GLM_INV: u32 = 1 << 13;
    /// gfx10+ `GCR_GLV_INV` (bit 14).
    pub const GCR_GLV_INV: u32 = 1 << 14;
    /// gfx10+ `GCR_GL1_INV` (bit 15).
    pub const GCR_GL1_INV: u32 = 1 << 15;
    /// gfx10+ `GCR_GL2_US` (bit 16).
    pub const GCR_GL2_US: u32 = 1 << 16;
    /// gfx10+ `GCR_GL2_RANGE` (bits 18:17).
    pub const GCR_GL2_RANGE: u32 = 3 << 17;
    /// gfx10+ `GCR_GL2_DISCARD` (bit 19).
    pub const GCR_GL2_DISCARD: u32 = 1 << 19;
    /// gfx10+ `GCR_GL2_INV` (bit 20).
    pub const GCR_GL2_INV: u32 = 1 << 20;
    /// gfx10+ `GCR_GL2_WB` (bit 21).
    pub const GCR_GL2_WB: u32 = 1 << 21;
    /// gfx10+ `GCR_SEQ` (bits 23:22; 1 = forward).
    pub const GCR_SEQ: u32 = 3 << 22;
    /// Every gfx10+ GCR bit.
    pub const GCR_MASK: u32 = 0xFFF << 12;

    /// The cache-action bits valid on `family`.
    pub const fn mask(family: crate::GfxFamily) -> u32 {
        if family.has_gcr() {
            GCR_MASK
        } else {
            GFX9_MASK
        }
    }
}

/// RELEASE_MEM `INT_SEL` (dword 2 bits 26:24).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntSel {
    /// 0: no interrupt.
    None = 0,
    /// 1: interrupt only (DATA_SEL must be 0).
    SendInterruptOnly = 1,
    /// 2: interrupt when the data write is confirmed.
    SendInterruptAfterWriteConfirm = 2,
    /// 3: wait for write confirmation, no interrupt.
    SendDataAfterWriteConfirm = 3,
}

impl IntSel {
    const fn from_bits(v: u32) -> Option<Self> {
        Some(match v {
            0 => IntSel::None,
            1 => IntSel::SendInterruptOnly,
            2 => IntSel::SendInterruptAfterWriteConfirm,
            3 => IntSel::SendDataAfterWriteConfirm,
            _ => return None,
        })
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            IntSel::None => "none",
            IntSel::SendInterruptOnly => "int_only",
            IntSel::SendInterruptAfterWriteConfirm => "int_after_wr_confirm",
            IntSel::SendDataAfterWriteConfirm => "data_after_wr_confirm",
        }
    }
    /// True when the CP raises an interrupt (with `int_ctxid`).
    pub const fn interrupts(self) -> bool {
        matches!(
            self,
            IntSel::SendInterruptOnly | IntSel::SendInterruptAfterWriteConfirm
        )
    }
}

/// RELEASE_MEM `DATA_SEL` (dword 2 bits 31:29).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DataSel {
    /// 0: discard (no write).
    None = 0,
    /// 1: write the low 32 bits of `data`.
    Value32 = 1,
    /// 2: write 64-bit `data`.
    Value64 = 2,
    /// 3: write the 64-bit GPU clock counter.
    GpuClock = 3,
    /// 4: write the 64-bit system clock counter.
    SystemClock = 4,
    /// 5: store GDS data.
    Gds = 5,
}

impl DataSel {
    const fn from_bits(v: u32) -> Option<Self> {
        Some(match v {
            0 => DataSel::None,
            1 => DataSel::Value32,
            2 => DataSel::Value64,
            3 => DataSel::GpuClock,
            4 => DataSel::SystemClock,
            5 => DataSel::Gds,
            _ => return None,
        })
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            DataSel::None => "none",
            DataSel::Value32 => "data32",
            DataSel::Value64 => "data64",
            DataSel::GpuClock => "gpu_clock",
            DataSel::SystemClock => "sys_clock",
            DataSel::Gds => "gds",
        }
    }
}

/// EVENT_TYPE values used with RELEASE_MEM / EVENT_WRITE (`VGT_EVENT_TYPE`).
pub mod event {
    /// `CS_PARTIAL_FLUSH` (0x07, index 4).
    pub const CS_PARTIAL_FLUSH: u8 = 0x07;
    /// `CACHE_FLUSH_AND_INV_TS_EVENT` (0x14, index 5 = end of pipe).
    pub const CACHE_FLUSH_AND_INV_TS_EVENT: u8 = 0x14;
    /// `BOTTOM_OF_PIPE_TS` (0x28).
    pub const BOTTOM_OF_PIPE_TS: u8 = 0x28;
    /// `CS_DONE` (0x2F, index 6 = shader done).
    pub const CS_DONE: u8 = 0x2F;
    /// Event index: end of pipe (RELEASE_MEM).
    pub const INDEX_END_OF_PIPE: u8 = 5;
    /// Event index: shader done (RELEASE_MEM).
    pub const INDEX_SHADER_DONE: u8 = 6;
    /// Event index of the partial flushes (EVENT_WRITE).
    pub const INDEX_PARTIAL_FLUSH: u8 = 4;

    /// Name of an event type, if known.
    pub const fn name(t: u8) -> Option<&'static str> {
        match t {
            CS_PARTIAL_FLUSH => Some("CS_PARTIAL_FLUSH"),
            CACHE_FLUSH_AND_INV_TS_EVENT => Some("CACHE_FLUSH_AND_INV_TS_EVENT"),
            BOTTOM_OF_PIPE_TS => Some("BOTTOM_OF_PIPE_TS"),
            CS_DONE => Some("CS_DONE"),
            _ => None,
        }
    }
}

/// RELEASE_MEM (0x49, 8 dwords on every family): at the event, perform cache
/// actions, write data and/or raise an interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReleaseMem {
    /// EVENT_TYPE (bits 5:0).
    pub event_type: u8,
    /// EVENT_INDEX (bits 11:8).
    pub event_index: u8,
    /// Cache-action bits in place (see [`release_cache`]; family specific).
    pub cache_actions: u32,
    /// Cache policy (bits 26:25).
    pub cache_policy: CachePolicy,
    /// `EXECUTE` (bit 28).
    pub execute: bool,
    /// DST_SEL (dword 2 bits 17:16): 0 memory controller, 1 TC/L2.
    pub dst_sel: u8,
    /// Interrupt select.
    pub int_sel: IntSel,
    /// Data select.
    pub data_sel: DataSel,
    /// Destination byte address (4-aligned; 8-aligned for 64-bit data).
    pub addr: u64,
    /// Data (low 32 bits only for `Value32`).
    pub data: u64,
    /// Interrupt context id (dword 7).
    pub int_ctxid: u32,
}

impl ReleaseMem {
    /// Dwords of a RELEASE_MEM.
    pub const DWORDS: usize = 8;

    /// The end-of-pipe release: at `CACHE_FLUSH_AND_INV_TS_EVENT` (event index 5,
    /// end of pipe), write what `data_sel` selects to `addr` through the memory
    /// controller (DST_SEL 0), with no cache actions and no interrupt (add one with
    /// [`ReleaseMem::with_interrupt`]).
    ///
    /// ```
    /// use pm4::pkt3::{DataSel, ReleaseMem};
    /// use pm4::GfxFamily;
    /// // The 64-bit GPU clock at end of pipe, e.g. a timestamp.
    /// let p = ReleaseMem::end_of_pipe(DataSel::GpuClock, 0x1000, 0);
    /// let mut w = [0u32; ReleaseMem::DWORDS];
    /// p.encode(GfxFamily::Gfx9, &mut w).unwrap();
    /// assert_eq!(w[2] >> 29, DataSel::GpuClock as u32);
    /// ```
    pub const fn end_of_pipe(data_sel: DataSel, addr: u64, data: u64) -> Self {
        ReleaseMem {
            event_type: event::CACHE_FLUSH_AND_INV_TS_EVENT,
            event_index: event::INDEX_END_OF_PIPE,
            cache_actions: 0,
            cache_policy: CachePolicy::Lru,
            execute: false,
            dst_sel: 0,
            int_sel: IntSel::None,
            data_sel,
            addr,
            data,
            int_ctxid: 0,
        }
    }

    /// [`ReleaseMem::end_of_pipe`] writing the 32-bit `value` (DATA_SEL 1), the
    /// fence write of a PM4 queue.
    ///
    /// ```
    /// use pm4::pkt3::{IntSel, ReleaseMem};
    /// use pm4::GfxFamily;
    /// // Write 7 to 0x1000 at end of pipe, then interrupt with context id 3.
    /// let p = ReleaseMem::end_of_pipe_write32(0x1000, 7)
    ///     .with_interrupt(IntSel::SendInterruptAfterWriteConfirm, 3);
    /// let mut w = [0u32; ReleaseMem::DWORDS];
    /// p.encode(GfxFamily::Gfx9, &mut w).unwrap();
    /// assert_eq!((w[3], w[5], w[7]), (0x1000, 7, 3));
    /// ```
    pub const fn end_of_pipe_write32(addr: u64, value: u32) -> Self {
        Self::end_of_pipe(DataSel::Value32, addr, value as u64)
    }

    /// This release with INT_SEL `int_sel` and interrupt context id `int_ctxid`
    /// (the id the CP puts in the interrupt it raises).
    ///
    /// ```
    /// use pm4::pkt3::{DataSel, IntSel, ReleaseMem};
    /// // An interrupt and no data write.
    /// let p = ReleaseMem::end_of_pipe(DataSel::None, 0, 0)
    ///     .with_interrupt(IntSel::SendInterruptOnly, 9);
    /// assert_eq!((p.int_sel, p.int_ctxid), (IntSel::SendInterruptOnly, 9));
    /// ```
    pub const fn with_interrupt(mut self, int_sel: IntSel, int_ctxid: u32) -> Self {
        self.int_sel = int_sel;
        self.int_ctxid = int_ctxid;
        self
    }
}

impl Encodable for ReleaseMem {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, fam: GfxFamily) -> Result<(), EncodeError> {
        check_width("event_type", self.event_type as u64, 6)?;
        check_width("event_index", self.event_index as u64, 4)?;
        check_width("dst_sel", self.dst_sel as u64, 2)?;
        if self.cache_actions & !release_cache::mask(fam) != 0 {
            return Err(EncodeError::InvalidField {
                field: "cache_actions",
                value: self.cache_actions as u64,
            });
        }
        let align = match self.data_sel {
            DataSel::Value64 | DataSel::GpuClock | DataSel::SystemClock => 8,
            _ => 4,
        };
        check_align("address", self.addr, align)
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        s.put(0, packet3(op::RELEASE_MEM, 6));
        s.put(
            1,
            self.event_type as u32
                | ((self.event_index as u32) << 8)
                | self.cache_actions
                | ((self.cache_policy as u32) << 25)
                | ((self.execute as u32) << 28),
        );
        s.put(
            2,
            ((self.dst_sel as u32) << 16)
                | ((self.int_sel as u32) << 24)
                | ((self.data_sel as u32) << 29),
        );
        s.put(3, lo(self.addr));
        s.put(4, hi(self.addr));
        s.put(5, lo(self.data));
        s.put(6, hi(self.data));
        s.put(7, self.int_ctxid);
    }
}
encode_methods!(ReleaseMem);

// ---------------------------------------------------------------------------
// ACQUIRE_MEM

/// GCR_CNTL bits of the gfx10+ ACQUIRE_MEM (Mesa `S_586_*`).
pub mod gcr {
    /// `GLI_INV` (bits 1:0): 1 = invalidate all of the instruction cache.
    pub const GLI_INV_ALL: u32 = 1;
    /// `GL1_RANGE` (bits 3:2).
    pub const GL1_RANGE: u32 = 3 << 2;
    /// `GLM_WB` (bit 4).
    pub const GLM_WB: u32 = 1 << 4;
    /// `GLM_INV` (bit 5).
    pub const GLM_INV: u32 = 1 << 5;
    /// `GLK_WB` (bit 6).
    pub const GLK_WB: u32 = 1 << 6;
    /// `GLK_INV` (bit 7): scalar L0.
    pub const GLK_INV: u32 = 1 << 7;
    /// `GLV_INV` (bit 8): vector L0.
    pub const GLV_INV: u32 = 1 << 8;
    /// `GL1_INV` (bit 9).
    pub const GL1_INV: u32 = 1 << 9;
    /// `GL2_US` (bit 10).
    pub const GL2_US: u32 = 1 << 10;
    /// `GL2_RANGE` (bits 12:11).
    pub const GL2_RANGE: u32 = 3 << 11;
    /// `GL2_DISCARD` (bit 13).
    pub const GL2_DISCARD: u32 = 1 << 13;
    /// `GL2_INV` (bit 14).
    pub const GL2_INV: u32 = 1 << 14;
    /// `GL2_WB` (bit 15).
    pub const GL2_WB: u32 = 1 << 15;
    /// `SEQ` (bits 17:16; 1 = forward).
    pub const SEQ: u32 = 3 << 16;
    /// `RANGE_IS_PA` (bit 18).
    pub const RANGE_IS_PA: u32 = 1 << 18;
    /// All defined bits.
    pub const MASK: u32 = 0x7FFFF;
}

/// gfx9 CP_COHER_CNTL bits (`PACKET3_ACQUIRE_MEM_CP_COHER_CNTL_*` in `soc15d.h`).
pub mod coher {
    /// TC_NC_ACTION_ENA (bit 3).
    pub const TC_NC_ACTION_ENA: u32 = 1 << 3;
    /// TC_WC_ACTION_ENA (bit 4).
    pub const TC_WC_ACTION_ENA: u32 = 1 << 4;
    /// TC_INV_METADATA_ACTION_ENA (bit 5).
    pub const TC_INV_METADATA_ACTION_ENA: u32 = 1 << 5;
    /// TCL1_VOL_ACTION_ENA (bit 15).
    pub const TCL1_VOL_ACTION_ENA: u32 = 1 << 15;
    /// TC_WB_ACTION_ENA (bit 18).
    pub const TC_WB_ACTION_ENA: u32 = 1 << 18;
    /// TCL1_ACTION_ENA (bit 22).
    pub const TCL1_ACTION_ENA: u32 = 1 << 22;
    /// TC_ACTION_ENA (bit 23).
    pub const TC_ACTION_ENA: u32 = 1 << 23;
    /// CB_ACTION_ENA (bit 25).
    pub const CB_ACTION_ENA: u32 = 1 << 25;
    /// DB_ACTION_ENA (bit 26).
    pub const DB_ACTION_ENA: u32 = 1 << 26;
    /// SH_KCACHE_ACTION_ENA (bit 27).
    pub const SH_KCACHE_ACTION_ENA: u32 = 1 << 27;
    /// SH_KCACHE_VOL_ACTION_ENA (bit 28).
    pub const SH_KCACHE_VOL_ACTION_ENA: u32 = 1 << 28;
    /// SH_ICACHE_ACTION_ENA (bit 29).
    pub const SH_ICACHE_ACTION_ENA: u32 = 1 << 29;
    /// SH_KCACHE_WB_ACTION_ENA (bit 30).
    pub const SH_KCACHE_WB_ACTION_ENA: u32 = 1 << 30;
}

/// ACQUIRE_MEM (0x58): cache invalidation / write-back over a range.
/// gfx9: 7 dwords, actions in `coher_cntl`. gfx10+: 8 dwords, actions in
/// `gcr_cntl` (dword 7); `coher_cntl` is normally 0 there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AcquireMem {
    /// Dword 1 bit 31 (gfx9 `ENGINE`: 0 PFP, 1 ME).
    pub engine: u8,
    /// CP_COHER_CNTL (dword 1 bits 30:0).
    pub coher_cntl: u32,
    /// CP_COHER_SIZE | CP_COHER_SIZE_HI << 32 (256-byte units).
    pub coher_size: u64,
    /// CP_COHER_BASE | CP_COHER_BASE_HI << 32 (256-byte units).
    pub coher_base: u64,
    /// Poll interval (bits 15:0).
    pub poll_interval: u16,
    /// GCR_CNTL (gfx10+ only; must be 0 on gfx9).
    pub gcr_cntl: u32,
}

impl AcquireMem {
    /// Dwords on `family`: 7 on gfx9, 8 on gfx10+.
    pub const fn dwords_for(family: GfxFamily) -> usize {
        if family.has_gcr() {
            8
        } else {
            7
        }
    }

    /// Full-range acquire as the kernel/kfdtest emit it: gfx9 with
    /// `coher_cntl`, gfx10+ with `gcr_cntl`; size all ones, poll interval given.
    pub const fn full_range(
        family: GfxFamily,
        coher_cntl: u32,
        gcr_cntl: u32,
        poll_interval: u16,
    ) -> Self {
        AcquireMem {
            engine: 0,
            coher_cntl: if family.has_gcr() { 0 } else { coher_cntl },
            coher_size: 0xFFFF_FFFF,
            coher_base: 0,
            poll_interval,
            gcr_cntl: if family.has_gcr() { gcr_cntl } else { 0 },
        }
    }
}

impl Encodable for AcquireMem {
    fn len(&self, fam: GfxFamily) -> usize {
        Self::dwords_for(fam)
    }
    fn validate(&self, fam: GfxFamily) -> Result<(), EncodeError> {
        check_width("engine", self.engine as u64, 1)?;
        check_width("coher_cntl", self.coher_cntl as u64, 31)?;
        if fam.has_gcr() {
            check_width("gcr_cntl", self.gcr_cntl as u64, 19)
        } else if self.gcr_cntl != 0 {
            Err(EncodeError::Unsupported {
                what: "ACQUIRE_MEM gcr_cntl on gfx9",
            })
        } else {
            Ok(())
        }
    }
    fn emit<S: Sink + ?Sized>(&self, fam: GfxFamily, s: &mut S) {
        let n = Self::dwords_for(fam);
        s.put(0, packet3(op::ACQUIRE_MEM, (n - 2) as u16));
        s.put(1, self.coher_cntl | ((self.engine as u32) << 31));
        s.put(2, lo(self.coher_size));
        s.put(3, hi(self.coher_size));
        s.put(4, lo(self.coher_base));
        s.put(5, hi(self.coher_base));
        s.put(6, self.poll_interval as u32);
        if fam.has_gcr() {
            s.put(7, self.gcr_cntl);
        }
    }
}
encode_methods!(AcquireMem);

// ---------------------------------------------------------------------------
// INDIRECT_BUFFER

/// INDIRECT_BUFFER (0x3F, 4 dwords): executes `size_dw` dwords at `addr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IndirectBuffer {
    /// IB byte address (4-aligned).
    pub addr: u64,
    /// IB size in dwords (bits 19:0).
    pub size_dw: u32,
    /// CHAIN (bit 20).
    pub chain: bool,
    /// OFFLOAD_POLLING / PRE_ENB (bit 21).
    pub offload_polling: bool,
    /// VOLATILE (bit 22).
    pub volatile: bool,
    /// VALID (bit 23; required on compute queues).
    pub valid: bool,
    /// VMID (bits 27:24).
    pub vmid: u8,
    /// Cache policy (bits 29:28).
    pub cache_policy: CachePolicy,
    /// PRE_RESUME (bit 30).
    pub pre_resume: bool,
    /// PRIV (bit 31).
    pub priv_: bool,
}

impl IndirectBuffer {
    /// Dwords of an INDIRECT_BUFFER.
    pub const DWORDS: usize = 4;

    /// The compute-queue form: valid, VMID 0, LRU.
    pub const fn new(addr: u64, size_dw: u32) -> Self {
        IndirectBuffer {
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
        }
    }
}

impl IndirectBuffer {
    /// Decodes dwords 1..=3 of an INDIRECT_BUFFER whose header was checked (the body
    /// [`decode_pm4`] decodes; also the AQL PM4-IB packet's fast path). Always inlined:
    /// as a call it cost ~47 instructions per PM4-IB packet, mostly moving the result.
    #[inline(always)]
    pub(crate) fn decode_body(w1: u32, w2: u32, c: u32) -> Result<Self, DecodeError> {
        check_reserved(w1, !3, 1)?;
        Ok(IndirectBuffer {
            addr: join(w1, w2),
            size_dw: c & 0xFFFFF,
            chain: c & (1 << 20) != 0,
            offload_polling: c & (1 << 21) != 0,
            volatile: c & (1 << 22) != 0,
            valid: c & (1 << 23) != 0,
            vmid: ((c >> 24) & 0xF) as u8,
            cache_policy: CachePolicy::from_bits(c >> 28),
            pre_resume: c & (1 << 30) != 0,
            priv_: c & (1 << 31) != 0,
        })
    }
}

impl Encodable for IndirectBuffer {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        check_align("ib_base", self.addr, 4)?;
        check_width("ib_size", self.size_dw as u64, 20)?;
        check_width("vmid", self.vmid as u64, 4)
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        s.put(0, packet3(op::INDIRECT_BUFFER, 2));
        s.put(1, lo(self.addr));
        s.put(2, hi(self.addr));
        s.put(
            3,
            self.size_dw
                | ((self.chain as u32) << 20)
                | ((self.offload_polling as u32) << 21)
                | ((self.volatile as u32) << 22)
                | ((self.valid as u32) << 23)
                | ((self.vmid as u32) << 24)
                | ((self.cache_policy as u32) << 28)
                | ((self.pre_resume as u32) << 30)
                | ((self.priv_ as u32) << 31),
        );
    }
}
encode_methods!(IndirectBuffer);

// ---------------------------------------------------------------------------
// EVENT_WRITE

/// EVENT_WRITE (0x46): 2 dwords, or 4 with an address (sample events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EventWrite {
    /// EVENT_TYPE (bits 5:0).
    pub event_type: u8,
    /// EVENT_INDEX (bits 11:8).
    pub event_index: u8,
    /// 8-byte aligned address for sampling events.
    pub addr: Option<u64>,
}

impl Encodable for EventWrite {
    fn len(&self, _: GfxFamily) -> usize {
        if self.addr.is_some() {
            4
        } else {
            2
        }
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        check_width("event_type", self.event_type as u64, 6)?;
        check_width("event_index", self.event_index as u64, 4)?;
        if let Some(a) = self.addr {
            check_align("address", a, 8)?;
        }
        Ok(())
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        let w1 = self.event_type as u32 | ((self.event_index as u32) << 8);
        match self.addr {
            None => {
                s.put(0, packet3(op::EVENT_WRITE, 0));
                s.put(1, w1);
            }
            Some(a) => {
                s.put(0, packet3(op::EVENT_WRITE, 2));
                s.put(1, w1);
                s.put(2, lo(a));
                s.put(3, hi(a));
            }
        }
    }
}
encode_methods!(EventWrite);

// ---------------------------------------------------------------------------
// COPY_DATA

/// COPY_DATA source/destination selects (`PACKET3_COPY_DATA__{SRC,DST}_SEL__*`).
pub mod copy_sel {
    /// Memory-mapped register.
    pub const REGISTER: u8 = 0;
    /// Memory (source only; destination 1 = memory sync via GRBM).
    pub const MEMORY: u8 = 1;
    /// TC/L2.
    pub const TC_L2: u8 = 2;
    /// GDS.
    pub const GDS: u8 = 3;
    /// Performance counters.
    pub const PERFCOUNTERS: u8 = 4;
    /// Source: immediate data. Destination: memory.
    pub const IMMEDIATE_OR_DST_MEMORY: u8 = 5;
    /// Source: atomic return data.
    pub const ATOMIC_RETURN_DATA: u8 = 6;
    /// Source: GPU clock count.
    pub const GPU_CLOCK_COUNT: u8 = 9;

    /// Name of a source select.
    pub const fn src_name(v: u8) -> &'static str {
        match v {
            0 => "register",
            1 => "memory",
            2 => "tc_l2",
            3 => "gds",
            4 => "perfcounters",
            5 => "immediate",
            6 => "atomic_return_data",
            7 => "gds_atomic_return_data0",
            8 => "gds_atomic_return_data1",
            9 => "gpu_clock_count",
            _ => "reserved",
        }
    }
    /// Name of a destination select.
    pub const fn dst_name(v: u8) -> &'static str {
        match v {
            0 => "register",
            1 => "memory_sync",
            2 => "tc_l2",
            3 => "gds",
            4 => "perfcounters",
            5 => "memory",
            6 => "mem_mapped_reg_dc",
            _ => "reserved",
        }
    }
}

/// COPY_DATA (0x40, 6 dwords).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CopyData {
    /// SRC_SEL (bits 3:0), see [`copy_sel`].
    pub src_sel: u8,
    /// DST_SEL (bits 11:8).
    pub dst_sel: u8,
    /// SRC_CACHE_POLICY (bits 14:13).
    pub src_cache_policy: CachePolicy,
    /// COUNT_SEL (bit 16): copy 64 bits.
    pub count_sel_64: bool,
    /// WR_CONFIRM (bit 20).
    pub wr_confirm: bool,
    /// DST_CACHE_POLICY (bits 26:25).
    pub dst_cache_policy: CachePolicy,
    /// PQ_EXE_STATUS (bit 29).
    pub pq_exe_status: bool,
    /// ENGINE_SEL (bits 31:30).
    pub engine_sel: u8,
    /// Source: address, register offset or immediate data (dwords 2..3).
    pub src: u64,
    /// Destination: address or register offset (dwords 4..5).
    pub dst: u64,
}

impl CopyData {
    /// Dwords of a COPY_DATA.
    pub const DWORDS: usize = 6;

    /// A COPY_DATA to memory at `dst` (DST_SEL 5) with write confirm, from what
    /// `src_sel` selects ([`copy_sel`]; `src` is its address or immediate value),
    /// 64 bits when `count_sel_64`, else 32; LRU cache policies, ME engine.
    ///
    /// ```
    /// use pm4::pkt3::{copy_sel, CopyData};
    /// use pm4::GfxFamily;
    /// // The 64-bit atomic return data to 0x2000.
    /// let p = CopyData::to_memory(copy_sel::ATOMIC_RETURN_DATA, 0, 0x2000, true);
    /// let mut w = [0u32; CopyData::DWORDS];
    /// p.encode(GfxFamily::Gfx9, &mut w).unwrap();
    /// assert_eq!(w[1], 0x0011_0506);
    /// ```
    pub const fn to_memory(src_sel: u8, src: u64, dst: u64, count_sel_64: bool) -> Self {
        CopyData {
            src_sel,
            dst_sel: copy_sel::IMMEDIATE_OR_DST_MEMORY,
            src_cache_policy: CachePolicy::Lru,
            count_sel_64,
            wr_confirm: true,
            dst_cache_policy: CachePolicy::Lru,
            pq_exe_status: false,
            engine_sel: 0,
            src,
            dst,
        }
    }

    /// [`CopyData::to_memory`] of the 32-bit dword at memory address `src`.
    ///
    /// ```
    /// use pm4::pkt3::{copy_sel, CopyData};
    /// let p = CopyData::mem_to_mem32(0x1000, 0x1008);
    /// assert_eq!((p.src_sel, p.count_sel_64), (copy_sel::MEMORY, false));
    /// ```
    pub const fn mem_to_mem32(src: u64, dst: u64) -> Self {
        Self::to_memory(copy_sel::MEMORY, src, dst, false)
    }

    /// [`CopyData::to_memory`] of the 64-bit immediate `value`: a 64-bit memory
    /// write in one packet.
    ///
    /// ```
    /// use pm4::pkt3::CopyData;
    /// use pm4::GfxFamily;
    /// let p = CopyData::imm64_to_mem(0x1_0000_0002, 0x2000);
    /// let mut w = [0u32; CopyData::DWORDS];
    /// p.encode(GfxFamily::Gfx9, &mut w).unwrap();
    /// assert_eq!(&w[2..], &[2, 1, 0x2000, 0]);
    /// ```
    pub const fn imm64_to_mem(value: u64, dst: u64) -> Self {
        Self::to_memory(copy_sel::IMMEDIATE_OR_DST_MEMORY, value, dst, true)
    }

    /// [`CopyData::to_memory`] of the 64-bit GPU clock count (SRC_SEL 9): a
    /// timestamp taken when the CP reaches the packet.
    ///
    /// ```
    /// use pm4::pkt3::{copy_sel, CopyData};
    /// let p = CopyData::gpu_clock_to_mem(0x2000);
    /// assert_eq!((p.src_sel, p.count_sel_64), (copy_sel::GPU_CLOCK_COUNT, true));
    /// ```
    pub const fn gpu_clock_to_mem(dst: u64) -> Self {
        Self::to_memory(copy_sel::GPU_CLOCK_COUNT, 0, dst, true)
    }
}

const COPY_CTL_KNOWN: u32 =
    0xF | (0xF << 8) | (3 << 13) | (1 << 16) | (1 << 20) | (3 << 25) | (1 << 29) | (3 << 30);

impl Encodable for CopyData {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        check_width("src_sel", self.src_sel as u64, 4)?;
        check_width("dst_sel", self.dst_sel as u64, 4)?;
        check_width("engine_sel", self.engine_sel as u64, 2)
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        s.put(0, packet3(op::COPY_DATA, 4));
        s.put(
            1,
            self.src_sel as u32
                | ((self.dst_sel as u32) << 8)
                | ((self.src_cache_policy as u32) << 13)
                | ((self.count_sel_64 as u32) << 16)
                | ((self.wr_confirm as u32) << 20)
                | ((self.dst_cache_policy as u32) << 25)
                | ((self.pq_exe_status as u32) << 29)
                | ((self.engine_sel as u32) << 30),
        );
        s.put(2, lo(self.src));
        s.put(3, hi(self.src));
        s.put(4, lo(self.dst));
        s.put(5, hi(self.dst));
    }
}
encode_methods!(CopyData);

// ---------------------------------------------------------------------------
// DMA_DATA

/// DMA_DATA `SRC_SEL` (dword 1 bits 30:29).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmaSrcSel {
    /// 0: SRC_ADDR via the SAS address space.
    SrcAddr = 0,
    /// 1: GDS.
    Gds = 1,
    /// 2: immediate DATA (fill).
    Data = 2,
    /// 3: SRC_ADDR via L2.
    SrcAddrTcL2 = 3,
}

impl DmaSrcSel {
    const fn from_bits(v: u32) -> Self {
        match v & 3 {
            0 => DmaSrcSel::SrcAddr,
            1 => DmaSrcSel::Gds,
            2 => DmaSrcSel::Data,
            _ => DmaSrcSel::SrcAddrTcL2,
        }
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            DmaSrcSel::SrcAddr => "src_addr",
            DmaSrcSel::Gds => "gds",
            DmaSrcSel::Data => "data",
            DmaSrcSel::SrcAddrTcL2 => "src_addr_tc_l2",
        }
    }
}

/// DMA_DATA `DST_SEL` (dword 1 bits 21:20).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DmaDstSel {
    /// 0: DST_ADDR via the DAS address space.
    DstAddr = 0,
    /// 1: GDS.
    Gds = 1,
    /// 2: nowhere (read only).
    Nowhere = 2,
    /// 3: DST_ADDR via L2.
    DstAddrTcL2 = 3,
}

impl DmaDstSel {
    const fn from_bits(v: u32) -> Self {
        match v & 3 {
            0 => DmaDstSel::DstAddr,
            1 => DmaDstSel::Gds,
            2 => DmaDstSel::Nowhere,
            _ => DmaDstSel::DstAddrTcL2,
        }
    }
    /// Disassembly name.
    pub const fn name(self) -> &'static str {
        match self {
            DmaDstSel::DstAddr => "dst_addr",
            DmaDstSel::Gds => "gds",
            DmaDstSel::Nowhere => "nowhere",
            DmaDstSel::DstAddrTcL2 => "dst_addr_tc_l2",
        }
    }
}

/// DMA_DATA (0x50, 7 dwords): CP DMA copy (`src_sel` address) or fill
/// (`src_sel = Data`, `src` low 32 bits = the fill value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DmaData {
    /// ENGINE_SEL (bit 0): 0 ME, 1 PFP.
    pub engine_sel: u8,
    /// SRC_CACHE_POLICY (bits 14:13).
    pub src_cache_policy: CachePolicy,
    /// DST_SEL.
    pub dst_sel: DmaDstSel,
    /// DST_CACHE_POLICY (bits 26:25).
    pub dst_cache_policy: CachePolicy,
    /// SRC_SEL.
    pub src_sel: DmaSrcSel,
    /// CP_SYNC (bit 31).
    pub cp_sync: bool,
    /// Source address, or the fill data in the low 32 bits.
    pub src: u64,
    /// Destination address.
    pub dst: u64,
    /// BYTE_COUNT (dword 6 bits 25:0).
    pub byte_count: u32,
    /// SAS (bit 26): source is a register.
    pub sas: bool,
    /// DAS (bit 27): destination is a register.
    pub das: bool,
    /// SAIC (bit 28): do not increment the source address.
    pub saic: bool,
    /// DAIC (bit 29): do not increment the destination address.
    pub daic: bool,
    /// RAW_WAIT (bit 30).
    pub raw_wait: bool,
    /// DIS_WC (bit 31): disable write confirm.
    pub dis_wc: bool,
}

impl DmaData {
    /// Dwords of a DMA_DATA.
    pub const DWORDS: usize = 7;
    /// Largest BYTE_COUNT (26 bits).
    pub const MAX_BYTES: u32 = (1 << 26) - 1;

    /// A memory-to-memory copy through L2 with CP_SYNC.
    pub const fn copy(src: u64, dst: u64, byte_count: u32) -> Self {
        DmaData {
            engine_sel: 0,
            src_cache_policy: CachePolicy::Lru,
            dst_sel: DmaDstSel::DstAddrTcL2,
            dst_cache_policy: CachePolicy::Lru,
            src_sel: DmaSrcSel::SrcAddrTcL2,
            cp_sync: true,
            src,
            dst,
            byte_count,
            sas: false,
            das: false,
            saic: false,
            daic: false,
            raw_wait: false,
            dis_wc: false,
        }
    }

    /// A fill of `byte_count` bytes at `dst` with the 32-bit `value`.
    pub const fn fill(dst: u64, value: u32, byte_count: u32) -> Self {
        let mut d = Self::copy(0, dst, byte_count);
        d.src_sel = DmaSrcSel::Data;
        d.src = value as u64;
        d
    }
}

const DMA_CTL_KNOWN: u32 = 1 | (3 << 13) | (3 << 20) | (3 << 25) | (3 << 29) | (1 << 31);

impl Encodable for DmaData {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        check_width("engine_sel", self.engine_sel as u64, 1)?;
        check_width("byte_count", self.byte_count as u64, 26)?;
        if matches!(self.src_sel, DmaSrcSel::Data) {
            check_width("data", self.src, 32)?;
        }
        Ok(())
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        s.put(0, packet3(op::DMA_DATA, 5));
        s.put(
            1,
            self.engine_sel as u32
                | ((self.src_cache_policy as u32) << 13)
                | ((self.dst_sel as u32) << 20)
                | ((self.dst_cache_policy as u32) << 25)
                | ((self.src_sel as u32) << 29)
                | ((self.cp_sync as u32) << 31),
        );
        s.put(2, lo(self.src));
        s.put(3, hi(self.src));
        s.put(4, lo(self.dst));
        s.put(5, hi(self.dst));
        s.put(
            6,
            self.byte_count
                | ((self.sas as u32) << 26)
                | ((self.das as u32) << 27)
                | ((self.saic as u32) << 28)
                | ((self.daic as u32) << 29)
                | ((self.raw_wait as u32) << 30)
                | ((self.dis_wc as u32) << 31),
        );
    }
}
encode_methods!(DmaData);

// ---------------------------------------------------------------------------
// ATOMIC_MEM

/// ATOMIC_MEM (0x1E, 9 dwords).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AtomicMem {
    /// ATOMIC (bits 6:0): a TC_OP atomic opcode (e.g. 72 = CMPSWAP_32).
    pub atomic: u8,
    /// COMMAND (bits 11:8): 0 single pass, 1 loop until compare satisfied,
    /// 2 wr_confirm, 3 send_no_rtn.
    pub command: u8,
    /// CACHE_POLICY (bits 26:25).
    pub cache_policy: CachePolicy,
    /// ENGINE_SEL (bits 31:30).
    pub engine_sel: u8,
    /// Byte address (4-aligned).
    pub addr: u64,
    /// Source data.
    pub src_data: u64,
    /// Compare data.
    pub cmp_data: u64,
    /// LOOP_INTERVAL (bits 12:0).
    pub loop_interval: u16,
}

/// TC_OP codes for [`AtomicMem::atomic`] (`enum TC_OP` in the Linux kernel's
/// `drivers/gpu/drm/amd/include/asic_reg/*/*_enum.h`, e.g. `soc21_enum.h`): bits 4:0
/// the operation, bit 5 the 64-bit form, bit 6 the form that returns nothing.
pub mod tc_op {
    /// `TC_OP_ATOMIC_ADD_RTN_32` (15): 32-bit add, old value returned.
    pub const ADD_RTN_32: u8 = 15;
    /// `TC_OP_ATOMIC_ADD_RTN_64` (47): 64-bit add, old value returned (ROCr's
    /// signal increment).
    pub const ADD_RTN_64: u8 = 47;
    /// `TC_OP_ATOMIC_CMPSWAP_32` (72): 32-bit compare-and-swap, no return.
    pub const CMPSWAP_32: u8 = 72;
    /// `TC_OP_ATOMIC_ADD_32` (79): 32-bit add, no return.
    pub const ADD_32: u8 = 79;
}

impl AtomicMem {
    /// Dwords of an ATOMIC_MEM.
    pub const DWORDS: usize = 9;

    /// A single-pass (COMMAND 0) ATOMIC_MEM of TC_OP `atomic` ([`tc_op`]) at `addr`
    /// with source `src_data` and compare `cmp_data`; LRU, ME engine.
    ///
    /// ```
    /// use pm4::pkt3::{tc_op, AtomicMem};
    /// use pm4::GfxFamily;
    /// // *0x1000 = 9 if it is 0.
    /// let p = AtomicMem::single_pass(tc_op::CMPSWAP_32, 0x1000, 9, 0);
    /// let mut w = [0u32; AtomicMem::DWORDS];
    /// p.encode(GfxFamily::Gfx9, &mut w).unwrap();
    /// assert_eq!(&w[1..], &[72, 0x1000, 0, 9, 0, 0, 0, 0]);
    /// ```
    pub const fn single_pass(atomic: u8, addr: u64, src_data: u64, cmp_data: u64) -> Self {
        AtomicMem {
            atomic,
            command: 0,
            cache_policy: CachePolicy::Lru,
            engine_sel: 0,
            addr,
            src_data,
            cmp_data,
            loop_interval: 0,
        }
    }

    /// `*addr += value` on the 64-bit cell at `addr` (`TC_OP_ATOMIC_ADD_RTN_64`; the
    /// old value becomes the atomic return data).
    ///
    /// ```
    /// use pm4::pkt3::{tc_op, AtomicMem};
    /// let p = AtomicMem::add_rtn_64(0x1000, 1);
    /// assert_eq!((p.atomic, p.src_data), (tc_op::ADD_RTN_64, 1));
    /// ```
    pub const fn add_rtn_64(addr: u64, value: u64) -> Self {
        Self::single_pass(tc_op::ADD_RTN_64, addr, value, 0)
    }

    /// `*addr += value` on the 32-bit cell at `addr`, returning nothing
    /// (`TC_OP_ATOMIC_ADD_32`).
    ///
    /// ```
    /// use pm4::pkt3::{tc_op, AtomicMem};
    /// let p = AtomicMem::add_32(0x1000, 1);
    /// assert_eq!((p.atomic, p.src_data), (tc_op::ADD_32, 1));
    /// ```
    pub const fn add_32(addr: u64, value: u32) -> Self {
        Self::single_pass(tc_op::ADD_32, addr, value as u64, 0)
    }
}

const ATOMIC_CTL_KNOWN: u32 = 0x7F | (0xF << 8) | (3 << 25) | (3 << 30);

impl Encodable for AtomicMem {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        check_width("atomic", self.atomic as u64, 7)?;
        check_width("command", self.command as u64, 4)?;
        check_width("engine_sel", self.engine_sel as u64, 2)?;
        check_width("loop_interval", self.loop_interval as u64, 13)?;
        check_align("addr", self.addr, 4)
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        s.put(0, packet3(op::ATOMIC_MEM, 7));
        s.put(
            1,
            self.atomic as u32
                | ((self.command as u32) << 8)
                | ((self.cache_policy as u32) << 25)
                | ((self.engine_sel as u32) << 30),
        );
        s.put(2, lo(self.addr));
        s.put(3, hi(self.addr));
        s.put(4, lo(self.src_data));
        s.put(5, hi(self.src_data));
        s.put(6, lo(self.cmp_data));
        s.put(7, hi(self.cmp_data));
        s.put(8, self.loop_interval as u32);
    }
}
encode_methods!(AtomicMem);

// ---------------------------------------------------------------------------
// SET_SH_REG / DISPATCH_DIRECT

/// First persistent-state (SH) register, in dwords (`PACKET3_SET_SH_REG_START`).
pub const SH_REG_START: u32 = 0x2C00;

/// SET_SH_REG (0x76): writes `values` to consecutive SH registers starting at
/// `SH_REG_START + reg_offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SetShReg<'a> {
    /// Register offset from [`SH_REG_START`], in dwords (bits 15:0).
    pub reg_offset: u16,
    /// Values (1..=0x3FFE).
    pub values: &'a [u32],
}

impl Encodable for SetShReg<'_> {
    fn len(&self, _: GfxFamily) -> usize {
        2 + self.values.len()
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        if self.values.is_empty() || self.values.len() > 0x3FFE {
            return Err(EncodeError::InvalidField {
                field: "count",
                value: self.values.len() as u64,
            });
        }
        Ok(())
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        s.put(0, packet3(op::SET_SH_REG, self.values.len() as u16));
        s.put(1, self.reg_offset as u32);
        for (i, &v) in self.values.iter().enumerate() {
            s.put(2 + i, v);
        }
    }
}
encode_methods!(SetShReg<'_>);

/// DISPATCH_DIRECT (0x15, 5 dwords).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DispatchDirect {
    /// Workgroups in X.
    pub dim_x: u32,
    /// Workgroups in Y.
    pub dim_y: u32,
    /// Workgroups in Z.
    pub dim_z: u32,
    /// COMPUTE_DISPATCH_INITIATOR value.
    pub dispatch_initiator: u32,
}

impl DispatchDirect {
    /// Dwords of a DISPATCH_DIRECT.
    pub const DWORDS: usize = 5;
}

impl Encodable for DispatchDirect {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        Ok(())
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        s.put(0, packet3(op::DISPATCH_DIRECT, 3));
        s.put(1, self.dim_x);
        s.put(2, self.dim_y);
        s.put(3, self.dim_z);
        s.put(4, self.dispatch_initiator);
    }
}
encode_methods!(DispatchDirect);

// ---------------------------------------------------------------------------
// PRED_EXEC

/// PRED_EXEC (0x23, 2 dwords): the next `exec_count` dwords execute only on the XCCs
/// whose bit is set in `xcc_mask` (kernel `soc15d.h`: `PACKET3_PRED_EXEC__EXEC_COUNT`
/// bits 13:0, `PACKET3_PRED_EXEC__VIRTUALXCCID_SELECT` bits 31:24; tinygrad
/// `ops_amd.py` `pred_exec`). On a single-XCC GPU XCC 0 is the only one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PredExec {
    /// Dwords that follow this packet and are predicated (bits 13:0).
    pub exec_count: u16,
    /// Virtual XCC ids that execute them (bits 31:24).
    pub xcc_mask: u8,
}

impl PredExec {
    /// Dwords of a PRED_EXEC.
    pub const DWORDS: usize = 2;

    /// The packet's dwords, unvalidated (the encoder first checks that `exec_count`
    /// fits its 14 bits): what the encoder writes.
    #[inline]
    pub const fn words(&self) -> [u32; Self::DWORDS] {
        [
            packet3(op::PRED_EXEC, 0),
            self.exec_count as u32 | ((self.xcc_mask as u32) << 24),
        ]
    }
}

impl Encodable for PredExec {
    fn len(&self, _: GfxFamily) -> usize {
        Self::DWORDS
    }
    fn validate(&self, _: GfxFamily) -> Result<(), EncodeError> {
        check_width("exec_count", self.exec_count as u64, 14)
    }
    fn emit<S: Sink + ?Sized>(&self, _: GfxFamily, s: &mut S) {
        let [a, b] = self.words();
        s.put(0, a);
        s.put(1, b);
    }
}
encode_methods!(PredExec);

// ---------------------------------------------------------------------------
// The packet enum

/// Any PM4 type-3 packet this crate decodes. Variable-length packets borrow
/// their payload from the decoded buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Pm4Packet<'a> {
    /// NOP / padding.
    Nop(Nop),
    /// WRITE_DATA.
    WriteData(WriteData<'a>),
    /// WAIT_REG_MEM.
    WaitRegMem(WaitRegMem),
    /// WAIT_REG_MEM64.
    WaitRegMem64(WaitRegMem64),
    /// RELEASE_MEM.
    ReleaseMem(ReleaseMem),
    /// ACQUIRE_MEM.
    AcquireMem(AcquireMem),
    /// INDIRECT_BUFFER.
    IndirectBuffer(IndirectBuffer),
    /// EVENT_WRITE.
    EventWrite(EventWrite),
    /// COPY_DATA.
    CopyData(CopyData),
    /// DMA_DATA.
    DmaData(DmaData),
    /// ATOMIC_MEM.
    AtomicMem(AtomicMem),
    /// SET_SH_REG.
    SetShReg(SetShReg<'a>),
    /// DISPATCH_DIRECT.
    DispatchDirect(DispatchDirect),
    /// PRED_EXEC.
    PredExec(PredExec),
    /// A well-formed type-3 packet with an opcode this crate does not decode.
    Unknown {
        /// Opcode.
        opcode: u8,
        /// Total dwords (count + 2).
        dwords: usize,
    },
}

macro_rules! each_packet {
    ($self:expr, $p:ident => $e:expr, unknown $d:ident => $u:expr) => {
        match $self {
            Pm4Packet::Nop($p) => $e,
            Pm4Packet::WriteData($p) => $e,
            Pm4Packet::WaitRegMem($p) => $e,
            Pm4Packet::WaitRegMem64($p) => $e,
            Pm4Packet::ReleaseMem($p) => $e,
            Pm4Packet::AcquireMem($p) => $e,
            Pm4Packet::IndirectBuffer($p) => $e,
            Pm4Packet::EventWrite($p) => $e,
            Pm4Packet::CopyData($p) => $e,
            Pm4Packet::DmaData($p) => $e,
            Pm4Packet::AtomicMem($p) => $e,
            Pm4Packet::SetShReg($p) => $e,
            Pm4Packet::DispatchDirect($p) => $e,
            Pm4Packet::PredExec($p) => $e,
            Pm4Packet::Unknown { dwords: $d, .. } => $u,
        }
    };
}

impl Pm4Packet<'_> {
    /// Size in dwords on `family`.
    pub fn dwords(&self, family: GfxFamily) -> usize {
        each_packet!(self, p => p.dwords(family), unknown d => *d)
    }

    /// Encodes the packet. `Unknown` cannot be encoded.
    pub fn encode(&self, family: GfxFamily, out: &mut [u32]) -> Result<usize, EncodeError> {
        each_packet!(self, p => p.encode(family, out),
            unknown _d => Err(EncodeError::Unsupported { what: "encoding an unknown PM4 packet" }))
    }

    /// Opcode of the packet.
    pub const fn opcode(&self) -> u8 {
        match self {
            Pm4Packet::Nop(_) => op::NOP,
            Pm4Packet::WriteData(_) => op::WRITE_DATA,
            Pm4Packet::WaitRegMem(_) => op::WAIT_REG_MEM,
            Pm4Packet::WaitRegMem64(_) => op::WAIT_REG_MEM64,
            Pm4Packet::ReleaseMem(_) => op::RELEASE_MEM,
            Pm4Packet::AcquireMem(_) => op::ACQUIRE_MEM,
            Pm4Packet::IndirectBuffer(_) => op::INDIRECT_BUFFER,
            Pm4Packet::EventWrite(_) => op::EVENT_WRITE,
            Pm4Packet::CopyData(_) => op::COPY_DATA,
            Pm4Packet::DmaData(_) => op::DMA_DATA,
            Pm4Packet::AtomicMem(_) => op::ATOMIC_MEM,
            Pm4Packet::SetShReg(_) => op::SET_SH_REG,
            Pm4Packet::DispatchDirect(_) => op::DISPATCH_DIRECT,
            Pm4Packet::PredExec(_) => op::PRED_EXEC,
            Pm4Packet::Unknown { opcode, .. } => *opcode,
        }
    }

    /// Disassembly name (kernel `PACKET3_*` spelling without the prefix).
    pub const fn name(&self) -> &'static str {
        match opcode_name(self.opcode()) {
            Some(n) => n,
            None => "UNKNOWN",
        }
    }
}

// ---------------------------------------------------------------------------
// Decoding

/// Decodes a type-3 header into `(opcode, total dwords)`.
pub const fn decode_header(h: u32) -> Result<(u8, usize), DecodeError> {
    let ty = (h >> 30) as u8;
    if ty != 3 {
        return Err(DecodeError::BadHeaderType {
            header: h,
            packet_type: ty,
        });
    }
    let opcode = (h >> 8) as u8;
    let count = ((h >> 16) & 0x3FFF) as usize;
    if opcode == op::NOP && count == 0x3FFF {
        return Ok((opcode, 1));
    }
    Ok((opcode, count + 2))
}

fn need(opcode: u8, have: usize, want: usize) -> Result<(), DecodeError> {
    if have != want {
        Err(DecodeError::BadLength {
            opcode,
            dwords: have,
        })
    } else {
        Ok(())
    }
}

fn decode_wait_addr(ms: MemSpace, w2: u32, w3: u32, align_bits: u32) -> Result<u64, DecodeError> {
    match ms {
        MemSpace::Memory => check_reserved(w2, !((1u32 << align_bits) - 1), 2)?,
        MemSpace::Register => {
            check_reserved(w2, 0x3FFFF, 2)?;
            check_reserved(w3, 0x3FFFF, 3)?;
        }
    }
    Ok(join(w2, w3))
}

type WaitCtl = (CompareFn, MemSpace, WaitOperation, u8, CachePolicy);

fn decode_wait_ctl(w: u32) -> Result<WaitCtl, DecodeError> {
    check_reserved(w, WAIT_CTL_KNOWN, 1)?;
    let function = match CompareFn::from_bits(w & 7) {
        Some(f) => f,
        None => {
            return Err(DecodeError::InvalidField {
                field: "function",
                value: (w & 7) as u64,
            })
        }
    };
    let ms = match MemSpace::from_bits((w >> 4) & 3) {
        Some(m) => m,
        None => {
            return Err(DecodeError::InvalidField {
                field: "mem_space",
                value: ((w >> 4) & 3) as u64,
            })
        }
    };
    Ok((
        function,
        ms,
        WaitOperation::from_bits(w >> 6),
        ((w >> 8) & 3) as u8,
        CachePolicy::from_bits(w >> 25),
    ))
}

impl<'a> WriteData<'a> {
    /// Decodes a WRITE_DATA whose header [`decode_header`] already read: `w` is the whole
    /// packet (header included, exactly the dwords the header counts). What
    /// [`decode_pm4`] does for this opcode, callable alone by an executor that reads
    /// headers itself (the emulator's indirect-buffer fast path).
    ///
    /// ```
    /// use pm4::pkt3::WriteData;
    /// use pm4::GfxFamily;
    ///
    /// let data = [7u32, 8];
    /// let mut w = [0u32; 8];
    /// let n = WriteData::memory(0x1000, &data).encode(GfxFamily::Gfx9, &mut w).unwrap();
    /// let back = WriteData::decode_body(&w[..n]).unwrap();
    /// assert_eq!(back, WriteData::memory(0x1000, &data));
    /// ```
    #[inline]
    pub fn decode_body(w: &'a [u32]) -> Result<WriteData<'a>, DecodeError> {
        let n = w.len();
        let (Some(&w1), Some(&w2), Some(&w3), Some(data)) =
            (w.get(1), w.get(2), w.get(3), w.get(4..))
        else {
            return Err(DecodeError::BadLength {
                opcode: op::WRITE_DATA,
                dwords: n,
            });
        };
        if data.is_empty() {
            return Err(DecodeError::BadLength {
                opcode: op::WRITE_DATA,
                dwords: n,
            });
        }
        check_reserved(
            w1,
            (0xF << 8) | (1 << 16) | (1 << 20) | (3 << 25) | (3 << 30),
            1,
        )?;
        let dsel = (w1 >> 8) & 0xF;
        let Some(dst_sel) = WriteDataDst::from_bits(dsel) else {
            return Err(DecodeError::InvalidField {
                field: "dst_sel",
                value: dsel as u64,
            });
        };
        if dst_sel.is_memory() {
            check_reserved(w2, !3, 2)?;
        }
        Ok(WriteData {
            dst_sel,
            addr_incr: w1 & (1 << 16) == 0,
            wr_confirm: w1 & (1 << 20) != 0,
            cache_policy: CachePolicy::from_bits(w1 >> 25),
            engine_sel: (w1 >> 30) as u8,
            addr: join(w2, w3),
            data,
        })
    }
}

impl WaitRegMem {
    /// Decodes a WAIT_REG_MEM whose header [`decode_header`] already read: `w` is the
    /// whole packet, as for [`WriteData::decode_body`].
    ///
    /// ```
    /// use pm4::pkt3::{CompareFn, WaitRegMem};
    /// use pm4::GfxFamily;
    ///
    /// let wait = WaitRegMem::memory(CompareFn::Equal, 0x2000, 1, u32::MAX, 4);
    /// let mut w = [0u32; WaitRegMem::DWORDS];
    /// wait.encode(GfxFamily::Gfx9, &mut w).unwrap();
    /// assert_eq!(WaitRegMem::decode_body(&w).unwrap(), wait);
    /// ```
    #[inline]
    pub fn decode_body(w: &[u32]) -> Result<WaitRegMem, DecodeError> {
        let &[_, w1, w2, w3, w4, w5, w6] = w else {
            return Err(DecodeError::BadLength {
                opcode: op::WAIT_REG_MEM,
                dwords: w.len(),
            });
        };
        let (function, mem_space, operation, engine, cache_policy) = decode_wait_ctl(w1)?;
        let addr = decode_wait_addr(mem_space, w2, w3, 2)?;
        check_reserved(w6, 0xFFFF | (1 << 31), 6)?;
        Ok(WaitRegMem {
            function,
            mem_space,
            operation,
            engine,
            cache_policy,
            addr,
            reference: w4,
            mask: w5,
            poll_interval: w6 as u16,
            optimize_ace_offload: w6 >> 31 != 0,
        })
    }
}

impl WaitRegMem64 {
    /// Decodes a WAIT_REG_MEM64 whose header [`decode_header`] already read: `w` is the
    /// whole packet, as for [`WriteData::decode_body`].
    ///
    /// ```
    /// use pm4::pkt3::{CompareFn, WaitRegMem, WaitRegMem64};
    /// use pm4::GfxFamily;
    ///
    /// let w32 = WaitRegMem::memory(CompareFn::GreaterEqual, 0x2000, 0, 0, 4);
    /// let wait = WaitRegMem64 {
    ///     function: w32.function,
    ///     mem_space: w32.mem_space,
    ///     operation: w32.operation,
    ///     engine: 0,
    ///     cache_policy: w32.cache_policy,
    ///     addr: 0x2000,
    ///     reference: 1 << 40,
    ///     mask: u64::MAX,
    ///     poll_interval: 4,
    /// };
    /// let mut w = [0u32; WaitRegMem64::DWORDS];
    /// wait.encode(GfxFamily::Gfx9, &mut w).unwrap();
    /// assert_eq!(WaitRegMem64::decode_body(&w).unwrap(), wait);
    /// ```
    #[inline]
    pub fn decode_body(w: &[u32]) -> Result<WaitRegMem64, DecodeError> {
        let &[_, w1, w2, w3, w4, w5, w6, w7, w8] = w else {
            return Err(DecodeError::BadLength {
                opcode: op::WAIT_REG_MEM64,
                dwords: w.len(),
            });
        };
        let (function, mem_space, operation, engine, cache_policy) = decode_wait_ctl(w1)?;
        let addr = decode_wait_addr(mem_space, w2, w3, 3)?;
        check_reserved(w8, 0xFFFF, 8)?;
        Ok(WaitRegMem64 {
            function,
            mem_space,
            operation,
            engine,
            cache_policy,
            addr,
            reference: join(w4, w5),
            mask: join(w6, w7),
            poll_interval: w8 as u16,
        })
    }
}

/// Decodes one PM4 packet at the start of `words`. Returns the packet and the
/// dwords it spans. Unknown opcodes with a valid header decode as
/// [`Pm4Packet::Unknown`]. Never panics.
pub fn decode_pm4(words: &[u32], family: GfxFamily) -> Result<(Pm4Packet<'_>, usize), DecodeError> {
    let Some(&h) = words.first() else {
        return Err(DecodeError::Truncated {
            needed: 1,
            available: 0,
        });
    };
    let (opcode, n) = decode_header(h)?;
    if words.len() < n {
        return Err(DecodeError::Truncated {
            needed: n,
            available: words.len(),
        });
    }
    let w = &words[..n];
    let pkt = match opcode {
        op::NOP => Pm4Packet::Nop(Nop { dwords: n as u32 }),
        op::WRITE_DATA => Pm4Packet::WriteData(WriteData::decode_body(w)?),
        op::WAIT_REG_MEM => Pm4Packet::WaitRegMem(WaitRegMem::decode_body(w)?),
        op::WAIT_REG_MEM64 => Pm4Packet::WaitRegMem64(WaitRegMem64::decode_body(w)?),
        op::RELEASE_MEM => {
            need(opcode, n, ReleaseMem::DWORDS)?;
            let cache_mask = release_cache::mask(family);
            check_reserved(
                w[1],
                0x3F | (0xF << 8) | cache_mask | (3 << 25) | (1 << 28),
                1,
            )?;
            check_reserved(w[2], (3 << 16) | (7 << 24) | (7 << 29), 2)?;
            let is = (w[2] >> 24) & 7;
            let Some(int_sel) = IntSel::from_bits(is) else {
                return Err(DecodeError::InvalidField {
                    field: "int_sel",
                    value: is as u64,
                });
            };
            let ds = w[2] >> 29;
            let Some(data_sel) = DataSel::from_bits(ds) else {
                return Err(DecodeError::InvalidField {
                    field: "data_sel",
                    value: ds as u64,
                });
            };
            check_reserved(w[3], !3, 3)?;
            Pm4Packet::ReleaseMem(ReleaseMem {
                event_type: (w[1] & 0x3F) as u8,
                event_index: ((w[1] >> 8) & 0xF) as u8,
                cache_actions: w[1] & cache_mask,
                cache_policy: CachePolicy::from_bits(w[1] >> 25),
                execute: w[1] & (1 << 28) != 0,
                dst_sel: ((w[2] >> 16) & 3) as u8,
                int_sel,
                data_sel,
                addr: join(w[3], w[4]),
                data: join(w[5], w[6]),
                int_ctxid: w[7],
            })
        }
        op::ACQUIRE_MEM => {
            need(opcode, n, AcquireMem::dwords_for(family))?;
            check_reserved(w[6], 0xFFFF, 6)?;
            let gcr_cntl = if family.has_gcr() {
                check_reserved(w[7], gcr::MASK, 7)?;
                w[7]
            } else {
                0
            };
            Pm4Packet::AcquireMem(AcquireMem {
                engine: (w[1] >> 31) as u8,
                coher_cntl: w[1] & 0x7FFF_FFFF,
                coher_size: join(w[2], w[3]),
                coher_base: join(w[4], w[5]),
                poll_interval: w[6] as u16,
                gcr_cntl,
            })
        }
        op::INDIRECT_BUFFER => {
            need(opcode, n, IndirectBuffer::DWORDS)?;
            Pm4Packet::IndirectBuffer(IndirectBuffer::decode_body(w[1], w[2], w[3])?)
        }
        op::EVENT_WRITE => {
            check_reserved(w[1], 0x3F | (0xF << 8), 1)?;
            let addr = match n {
                2 => None,
                4 => {
                    check_reserved(w[2], !7, 2)?;
                    Some(join(w[2], w[3]))
                }
                _ => return Err(DecodeError::BadLength { opcode, dwords: n }),
            };
            Pm4Packet::EventWrite(EventWrite {
                event_type: (w[1] & 0x3F) as u8,
                event_index: ((w[1] >> 8) & 0xF) as u8,
                addr,
            })
        }
        op::COPY_DATA => {
            need(opcode, n, CopyData::DWORDS)?;
            check_reserved(w[1], COPY_CTL_KNOWN, 1)?;
            let c = w[1];
            Pm4Packet::CopyData(CopyData {
                src_sel: (c & 0xF) as u8,
                dst_sel: ((c >> 8) & 0xF) as u8,
                src_cache_policy: CachePolicy::from_bits(c >> 13),
                count_sel_64: c & (1 << 16) != 0,
                wr_confirm: c & (1 << 20) != 0,
                dst_cache_policy: CachePolicy::from_bits(c >> 25),
                pq_exe_status: c & (1 << 29) != 0,
                engine_sel: (c >> 30) as u8,
                src: join(w[2], w[3]),
                dst: join(w[4], w[5]),
            })
        }
        op::DMA_DATA => {
            need(opcode, n, DmaData::DWORDS)?;
            check_reserved(w[1], DMA_CTL_KNOWN, 1)?;
            let c = w[1];
            let src_sel = DmaSrcSel::from_bits(c >> 29);
            let src = if matches!(src_sel, DmaSrcSel::Data) {
                // The high source dword is unused for immediate data.
                check_reserved(w[3], 0, 3)?;
                w[2] as u64
            } else {
                join(w[2], w[3])
            };
            let d = w[6];
            Pm4Packet::DmaData(DmaData {
                engine_sel: (c & 1) as u8,
                src_cache_policy: CachePolicy::from_bits(c >> 13),
                dst_sel: DmaDstSel::from_bits(c >> 20),
                dst_cache_policy: CachePolicy::from_bits(c >> 25),
                src_sel,
                cp_sync: c & (1 << 31) != 0,
                src,
                dst: join(w[4], w[5]),
                byte_count: d & 0x3FF_FFFF,
                sas: d & (1 << 26) != 0,
                das: d & (1 << 27) != 0,
                saic: d & (1 << 28) != 0,
                daic: d & (1 << 29) != 0,
                raw_wait: d & (1 << 30) != 0,
                dis_wc: d & (1 << 31) != 0,
            })
        }
        op::ATOMIC_MEM => {
            need(opcode, n, AtomicMem::DWORDS)?;
            check_reserved(w[1], ATOMIC_CTL_KNOWN, 1)?;
            check_reserved(w[2], !3, 2)?;
            check_reserved(w[8], 0x1FFF, 8)?;
            Pm4Packet::AtomicMem(AtomicMem {
                atomic: (w[1] & 0x7F) as u8,
                command: ((w[1] >> 8) & 0xF) as u8,
                cache_policy: CachePolicy::from_bits(w[1] >> 25),
                engine_sel: (w[1] >> 30) as u8,
                addr: join(w[2], w[3]),
                src_data: join(w[4], w[5]),
                cmp_data: join(w[6], w[7]),
                loop_interval: w[8] as u16,
            })
        }
        op::SET_SH_REG => {
            if n < 3 {
                return Err(DecodeError::BadLength { opcode, dwords: n });
            }
            check_reserved(w[1], 0xFFFF, 1)?;
            Pm4Packet::SetShReg(SetShReg {
                reg_offset: w[1] as u16,
                values: &w[2..],
            })
        }
        op::DISPATCH_DIRECT => {
            need(opcode, n, DispatchDirect::DWORDS)?;
            Pm4Packet::DispatchDirect(DispatchDirect {
                dim_x: w[1],
                dim_y: w[2],
                dim_z: w[3],
                dispatch_initiator: w[4],
            })
        }
        op::PRED_EXEC => {
            need(opcode, n, PredExec::DWORDS)?;
            check_reserved(w[1], 0x3FFF | (0xFF << 24), 1)?;
            Pm4Packet::PredExec(PredExec {
                exec_count: (w[1] & 0x3FFF) as u16,
                xcc_mask: (w[1] >> 24) as u8,
            })
        }
        _ => Pm4Packet::Unknown { opcode, dwords: n },
    };
    Ok((pkt, n))
}

/// An iterator over the packets of a PM4 buffer; stops after the first error.
pub struct Pm4Iter<'a> {
    words: &'a [u32],
    offset: usize,
    family: GfxFamily,
    failed: bool,
}

impl<'a> Iterator for Pm4Iter<'a> {
    /// `(dword offset, packet or error)`.
    type Item = (usize, Result<Pm4Packet<'a>, DecodeError>);
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.words.len() {
            return None;
        }
        let off = self.offset;
        match decode_pm4(&self.words[off..], self.family) {
            Ok((p, n)) => {
                self.offset += n;
                Some((off, Ok(p)))
            }
            Err(e) => {
                self.failed = true;
                Some((off, Err(e)))
            }
        }
    }
}

/// Iterates over the packets in `words`.
pub fn iter(words: &[u32], family: GfxFamily) -> Pm4Iter<'_> {
    Pm4Iter {
        words,
        offset: 0,
        family,
        failed: false,
    }
}

// ---------------------------------------------------------------------------
// Ring writer

/// Writes PM4 packets into a ring of dwords viewed as atomics (a PM4 compute
/// queue). The write pointer counts dwords and grows monotonically; the ring
/// position is `wptr % len`. The CP follows packets across the ring end, so
/// packets may wrap. Publishing (storing the wptr and ringing the doorbell)
/// is the caller's job, after [`Pm4RingWriter::write`] returns.
pub struct Pm4RingWriter<'a> {
    ring: &'a [AtomicU32],
    family: GfxFamily,
}

impl<'a> Pm4RingWriter<'a> {
    /// A writer over `ring`; `None` unless the length is a non-zero power of two.
    pub fn new(ring: &'a [AtomicU32], family: GfxFamily) -> Option<Self> {
        if ring.is_empty() || !ring.len().is_power_of_two() {
            return None;
        }
        Some(Pm4RingWriter { ring, family })
    }

    /// Ring size in dwords.
    pub fn len_dwords(&self) -> usize {
        self.ring.len()
    }

    /// Writes `pkt` at `wptr` (dwords) with relaxed stores and a release
    /// fence, and returns the new write pointer.
    pub fn write(&self, wptr: u64, pkt: &Pm4Packet<'_>) -> Result<u64, EncodeError> {
        let n = pkt.dwords(self.family);
        if n > self.ring.len() {
            return Err(EncodeError::BufferTooSmall {
                needed: n,
                available: self.ring.len(),
            });
        }
        let start = (wptr as usize) & (self.ring.len() - 1);
        let mut sink = RingSink {
            ring: self.ring,
            start,
        };
        let fam = self.family;
        match pkt {
            Pm4Packet::Nop(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::WriteData(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::WaitRegMem(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::WaitRegMem64(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::ReleaseMem(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::AcquireMem(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::IndirectBuffer(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::EventWrite(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::CopyData(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::DmaData(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::AtomicMem(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::SetShReg(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::DispatchDirect(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::PredExec(p) => p.validate(fam).map(|_| p.emit(fam, &mut sink)),
            Pm4Packet::Unknown { .. } => Err(EncodeError::Unsupported {
                what: "encoding an unknown PM4 packet",
            }),
        }?;
        core::sync::atomic::fence(Ordering::Release);
        Ok(wptr + n as u64)
    }

    /// Pads with one NOP so that the new write pointer is a multiple of
    /// `align` dwords (a power of two); returns it.
    pub fn pad_to(&self, wptr: u64, align: u64) -> Result<u64, EncodeError> {
        if align == 0 || !align.is_power_of_two() {
            return Err(EncodeError::InvalidField {
                field: "align",
                value: align,
            });
        }
        let pad = (align - (wptr & (align - 1))) & (align - 1);
        if pad == 0 {
            return Ok(wptr);
        }
        self.write(wptr, &Pm4Packet::Nop(Nop { dwords: pad as u32 }))
    }
}
