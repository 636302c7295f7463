//! Table-driven decoder and disassembler for AMD gfx9 CDNA machine code: gfx90a (MI200,
//! CDNA2) and gfx940/gfx941/gfx942 (MI300, CDNA3), wave64.
//!
//! One row per instruction lives in `ops.rs` ([`Opcode`], [`OpInfo`]): its class, its opcode
//! number on each target, the VOP3 opcode of a VOP1/VOP2/VOPC op, operand widths and flags.
//! [`decode`] turns the dwords at an instruction into an [`Inst`] (plain `Copy` data, no
//! allocation) and [`Inst`]'s `Display` prints it in `llvm-objdump-19 -d` syntax.
//!
//! Encoding facts and their sources: `firmware-notes/isa-gfx9-encoding.md`.
//!
//! ```
//! use amdgpu_isa::{decode, Opcode, Target};
//! // v_add_f32_e32 v2, s1, v1
//! let inst = decode(&[0x0204_0201], Target::Gfx942).unwrap();
//! assert_eq!(inst.op, Opcode::V_ADD_F32);
//! assert_eq!(inst.to_string(), "v_add_f32_e32 v2, s1, v1");
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod decode;
mod display;
mod ops_table;

pub use decode::decode;
pub use display::{disassemble, DisasmLine};
pub use ops_table::{OpInfo, Opcode};

/// A gfx9 CDNA target. gfx940, gfx941 and gfx942 share one instruction encoding (checked
/// opcode-for-opcode against LLVM 19); gfx90a differs in MFMA names/opcodes, cache-policy
/// bits (`glc/slc/scc` versus `sc0/sc1/nt`) and a few instructions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// MI200 series (CDNA2).
    Gfx90a,
    /// MI300 engineering target (CDNA3).
    Gfx940,
    /// MI300 variant (CDNA3).
    Gfx941,
    /// MI300X/MI300A (CDNA3).
    Gfx942,
}

impl Target {
    /// Parses `gfx90a`, `gfx940`, `gfx941`, `gfx942` (a `:feature` suffix such as `:xnack-`
    /// is ignored).
    pub fn from_name(name: &str) -> Option<Target> {
        match name.split(':').next().unwrap_or("") {
            "gfx90a" => Some(Target::Gfx90a),
            "gfx940" => Some(Target::Gfx940),
            "gfx941" => Some(Target::Gfx941),
            "gfx942" => Some(Target::Gfx942),
            _ => None,
        }
    }
    /// The LLVM processor name.
    pub fn name(self) -> &'static str {
        match self {
            Target::Gfx90a => "gfx90a",
            Target::Gfx940 => "gfx940",
            Target::Gfx941 => "gfx941",
            Target::Gfx942 => "gfx942",
        }
    }
    /// True for gfx940/941/942 (CDNA3): `sc0/sc1/nt` cache bits, renamed MFMA.
    pub fn is_gfx94x(self) -> bool {
        !matches!(self, Target::Gfx90a)
    }
    /// Column of this target in the opcode table (0 = gfx90a, 1 = gfx94x).
    #[inline]
    pub(crate) fn col(self) -> usize {
        usize::from(self.is_gfx94x())
    }
}

/// The table class of an opcode: the encoding of its basic form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    /// Scalar, one source.
    Sop1,
    /// Scalar, two sources.
    Sop2,
    /// Scalar with a 16-bit immediate.
    Sopk,
    /// Scalar compare (writes SCC).
    Sopc,
    /// Scalar program control (branches, waits, messages).
    Sopp,
    /// Scalar memory.
    Smem,
    /// Vector, one source (also has VOP3, DPP and SDWA forms).
    Vop1,
    /// Vector, two sources (also has VOP3, DPP and SDWA forms).
    Vop2,
    /// Vector compare (also has VOP3, DPP? no; SDWA forms).
    Vopc,
    /// Vector, VOP3-only (VOP3A or VOP3B).
    Vop3,
    /// Packed math (VOP3P).
    Vop3p,
    /// Matrix fused multiply-add (VOP3P-MAI layout: MFMA/SMFMAC).
    Mai,
    /// Local data share.
    Ds,
    /// Flat memory (segment chosen by address).
    Flat,
    /// Global memory (FLAT encoding, seg=2).
    Global,
    /// Scratch memory (FLAT encoding, seg=1).
    Scratch,
    /// Untyped buffer memory.
    Mubuf,
    /// Typed buffer memory.
    Mtbuf,
}

/// The encoding an instruction was actually found in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Encoding {
    /// SOP1.
    Sop1,
    /// SOP2.
    Sop2,
    /// SOPK.
    Sopk,
    /// SOPC.
    Sopc,
    /// SOPP.
    Sopp,
    /// SMEM (64 bits).
    Smem,
    /// VOP1 (`_e32`).
    Vop1,
    /// VOP2 (`_e32`).
    Vop2,
    /// VOPC (`_e32`, writes VCC).
    Vopc,
    /// VOP3A (64 bits; `_e64` for promoted VOP1/VOP2/VOPC).
    Vop3,
    /// VOP3B (64 bits, with a scalar destination `dst[1]` instead of abs/clamp/op_sel).
    Vop3b,
    /// VOP3P (packed math).
    Vop3p,
    /// VOP3P-MAI (MFMA/SMFMAC).
    Mai,
    /// VOP1/VOP2/VOPC with a DPP dword (`_dpp`).
    Dpp,
    /// VOP1/VOP2/VOPC with an SDWA dword (`_sdwa`).
    Sdwa,
    /// DS.
    Ds,
    /// FLAT, seg=0.
    Flat,
    /// FLAT, seg=2.
    Global,
    /// FLAT, seg=1.
    Scratch,
    /// MUBUF.
    Mubuf,
    /// MTBUF.
    Mtbuf,
}

/// Scalar operand numbers (the 0..=127 space of SSRC/SDST fields) with fixed meaning.
pub mod sreg {
    /// First of the 102 general SGPRs is 0; the last is 101.
    pub const SGPR_LAST: u8 = 101;
    /// `flat_scratch_lo` (`flat_scratch` as a pair).
    pub const FLAT_SCRATCH_LO: u8 = 102;
    /// `xnack_mask_lo` (`xnack_mask` as a pair).
    pub const XNACK_MASK_LO: u8 = 104;
    /// `vcc_lo` (`vcc` as a pair).
    pub const VCC_LO: u8 = 106;
    /// `vcc_hi`.
    pub const VCC_HI: u8 = 107;
    /// `ttmp0` (trap temporaries run to `ttmp15` = 123).
    pub const TTMP0: u8 = 108;
    /// `m0`.
    pub const M0: u8 = 124;
    /// `exec_lo` (`exec` as a pair).
    pub const EXEC_LO: u8 = 126;
    /// `exec_hi`.
    pub const EXEC_HI: u8 = 127;
}

/// Source operands outside the register files and constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Special {
    /// 235: `src_shared_base` (aperture base of LDS in the flat space, high half).
    SharedBase,
    /// 236: `src_shared_limit`.
    SharedLimit,
    /// 237: `src_private_base`.
    PrivateBase,
    /// 238: `src_private_limit`.
    PrivateLimit,
    /// 239: `src_pops_exiting_wave_id`.
    PopsExitingWaveId,
    /// 251: `src_vccz`.
    Vccz,
    /// 252: `src_execz`.
    Execz,
    /// 253: `src_scc`.
    Scc,
    /// 254: `src_lds_direct`.
    LdsDirect,
}

/// Inline floating-point constants (source codes 240..=248). Their bit pattern depends on
/// the operand's type: see [`FloatConst::f32_bits`], [`FloatConst::f64_bits`],
/// [`FloatConst::f16_bits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FloatConst {
    /// 0.5
    Half,
    /// -0.5
    NegHalf,
    /// 1.0
    One,
    /// -1.0
    NegOne,
    /// 2.0
    Two,
    /// -2.0
    NegTwo,
    /// 4.0
    Four,
    /// -4.0
    NegFour,
    /// 1/(2*pi)
    InvTwoPi,
}

impl FloatConst {
    /// The value as an f32 bit pattern.
    pub fn f32_bits(self) -> u32 {
        match self {
            FloatConst::Half => 0x3f00_0000,
            FloatConst::NegHalf => 0xbf00_0000,
            FloatConst::One => 0x3f80_0000,
            FloatConst::NegOne => 0xbf80_0000,
            FloatConst::Two => 0x4000_0000,
            FloatConst::NegTwo => 0xc000_0000,
            FloatConst::Four => 0x4080_0000,
            FloatConst::NegFour => 0xc080_0000,
            FloatConst::InvTwoPi => 0x3e22_f983,
        }
    }
    /// The value as an f64 bit pattern.
    pub fn f64_bits(self) -> u64 {
        match self {
            FloatConst::Half => 0x3fe0_0000_0000_0000,
            FloatConst::NegHalf => 0xbfe0_0000_0000_0000,
            FloatConst::One => 0x3ff0_0000_0000_0000,
            FloatConst::NegOne => 0xbff0_0000_0000_0000,
            FloatConst::Two => 0x4000_0000_0000_0000,
            FloatConst::NegTwo => 0xc000_0000_0000_0000,
            FloatConst::Four => 0x4010_0000_0000_0000,
            FloatConst::NegFour => 0xc010_0000_0000_0000,
            FloatConst::InvTwoPi => 0x3fc4_5f30_6dc9_c882,
        }
    }
    /// The value as an f16 bit pattern.
    pub fn f16_bits(self) -> u16 {
        match self {
            FloatConst::Half => 0x3800,
            FloatConst::NegHalf => 0xb800,
            FloatConst::One => 0x3c00,
            FloatConst::NegOne => 0xbc00,
            FloatConst::Two => 0x4000,
            FloatConst::NegTwo => 0xc000,
            FloatConst::Four => 0x4400,
            FloatConst::NegFour => 0xc400,
            FloatConst::InvTwoPi => 0x3118,
        }
    }
}

/// One operand. Register ranges carry their first register and their width in dwords.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Operand {
    /// Not present.
    #[default]
    None,
    /// Scalar registers by operand number (0..=127: SGPRs, `flat_scratch`, `xnack_mask`,
    /// `vcc`, `ttmp*`, `m0`, `exec`; see [`sreg`]), `n` dwords from `idx`.
    Sreg {
        /// First scalar operand number.
        idx: u8,
        /// Width in dwords.
        n: u8,
    },
    /// Vector registers `v[idx .. idx+n]`.
    Vgpr {
        /// First VGPR.
        idx: u8,
        /// Width in dwords.
        n: u8,
    },
    /// Accumulation registers `a[idx .. idx+n]` (gfx90a/gfx94x unified register file).
    Agpr {
        /// First AGPR.
        idx: u8,
        /// Width in dwords.
        n: u8,
    },
    /// Inline integer constant, -16..=64.
    Int(i8),
    /// Inline float constant.
    Float(FloatConst),
    /// 32-bit literal dword following the instruction.
    Literal(u32),
    /// A special source ([`Special`]).
    Special(Special),
    /// `off`: no register (FLAT/GLOBAL/SCRATCH saddr or vaddr, MUBUF vaddr).
    Off,
}

/// Per-encoding modifiers and immediates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Mods {
    /// Nothing beyond the operands (SOP1, SOP2, SOPC, VOP1/VOP2/VOPC `_e32`).
    #[default]
    None,
    /// SOPK or SOPP signed 16-bit immediate (branch offsets are in dwords from the next
    /// instruction).
    Simm16(i16),
    /// SMEM.
    Smem {
        /// Byte offset (21-bit signed with `imm`, gfx9).
        offset: i32,
        /// The offset field is an immediate.
        imm: bool,
        /// An SGPR offset is added too (`soe`; the SGPR is in `src[1]`).
        soe: bool,
        /// `glc`.
        glc: bool,
    },
    /// VOP3A/VOP3B.
    Vop3 {
        /// `abs` per source (bit i = src i; VOP3A only).
        abs: u8,
        /// `neg` per source.
        neg: u8,
        /// `clamp`.
        clamp: bool,
        /// Output modifier: 0 none, 1 `mul:2`, 2 `mul:4`, 3 `div:2`.
        omod: u8,
        /// `op_sel` bits (src0, src1, src2, dst) for 16-bit ops.
        op_sel: u8,
    },
    /// VOP3P.
    Vop3p {
        /// `op_sel` bits per source.
        op_sel: u8,
        /// `op_sel_hi` bits per source.
        op_sel_hi: u8,
        /// `neg_lo` bits per source.
        neg_lo: u8,
        /// `neg_hi` bits per source.
        neg_hi: u8,
        /// `clamp`.
        clamp: bool,
    },
    /// VOP3P-MAI.
    Mai {
        /// `cbsz` (broadcast control of A).
        cbsz: u8,
        /// `abid` (broadcast block id of A).
        abid: u8,
        /// `blgp` (lane group pattern of B; on gfx940 f64 MFMA it is `neg`).
        blgp: u8,
        /// `acc_cd`: C and D are AGPRs.
        acc_cd: bool,
    },
    /// DPP dword.
    Dpp {
        /// `dpp_ctrl` (9 bits).
        ctrl: u16,
        /// `row_mask`.
        row_mask: u8,
        /// `bank_mask`.
        bank_mask: u8,
        /// `bound_ctrl` bit (write 0 for out-of-range source lanes).
        bound_ctrl: bool,
        /// `abs` bits (src0, src1).
        abs: u8,
        /// `neg` bits (src0, src1).
        neg: u8,
    },
    /// SDWA dword.
    Sdwa {
        /// `dst_sel` (0..=3 BYTE_n, 4..=5 WORD_n, 6 DWORD).
        dst_sel: u8,
        /// `dst_unused` (0 pad, 1 sext, 2 preserve).
        dst_unused: u8,
        /// `src0_sel`.
        src0_sel: u8,
        /// `src1_sel`.
        src1_sel: u8,
        /// `sext` bits (src0, src1).
        sext: u8,
        /// `abs` bits (src0, src1).
        abs: u8,
        /// `neg` bits (src0, src1).
        neg: u8,
        /// `clamp`.
        clamp: bool,
        /// Output modifier.
        omod: u8,
    },
    /// DS.
    Ds {
        /// `offset0` (low byte of `offset` for single-address ops).
        offset0: u8,
        /// `offset1` (high byte of `offset`).
        offset1: u8,
        /// `gds`.
        gds: bool,
    },
    /// FLAT/GLOBAL/SCRATCH.
    Flat {
        /// Byte offset: 12-bit unsigned for FLAT, 13-bit signed for GLOBAL/SCRATCH.
        offset: i16,
        /// `glc` (gfx90a) / `sc0` (gfx94x).
        glc: bool,
        /// `slc` (gfx90a) / `nt` (gfx94x).
        slc: bool,
        /// `scc` (gfx90a) / `sc1` (gfx94x).
        scc: bool,
        /// `lds` (load to LDS).
        lds: bool,
    },
    /// MUBUF/MTBUF.
    Buf {
        /// 12-bit unsigned byte offset.
        offset: u16,
        /// `offen`: vaddr supplies an offset.
        offen: bool,
        /// `idxen`: vaddr supplies an index.
        idxen: bool,
        /// `glc` / `sc0`.
        glc: bool,
        /// `slc` / `nt`.
        slc: bool,
        /// `scc` / `sc1`.
        scc: bool,
        /// `lds` (MUBUF only).
        lds: bool,
        /// MTBUF data format (`dfmt`).
        dfmt: u8,
        /// MTBUF numeric format (`nfmt`).
        nfmt: u8,
    },
}

/// One decoded instruction.
///
/// Operand slots by encoding (absent ones are [`Operand::None`]):
/// - SOP1/SOP2/SOPC/SOPK, VOP1/VOP2/VOPC/VOP3/VOP3P/MAI/DPP/SDWA: `dst[0]` = destination
///   (SDST, VDST; VOPC `_e32` writes `vcc`, shown as `dst[0]`), `dst[1]` = VOP3B scalar
///   carry-out; `src[0..3]` = src0, src1, src2 (for VOP2 ops using VCC implicitly, the
///   carry-in `vcc` is `src[2]`). SOPK: `dst[0]` is the SDST field even where the op reads
///   it (`s_cmpk_*`, `s_setreg_b32`); `s_setreg_imm32_b32`'s literal is `src[0]`.
/// - SMEM: `dst[0]` = sdata (loads), `src[0]` = sbase, `src[1]` = SGPR offset (if any),
///   `src[2]` = sdata (stores).
/// - DS: `dst[0]` = vdst, `src[0]` = addr, `src[1]` = data0, `src[2]` = data1.
/// - FLAT/GLOBAL/SCRATCH: `dst[0]` = vdst, `src[0]` = vaddr (or `Off`), `src[1]` = data,
///   `src[2]` = saddr (or `Off`).
/// - MUBUF/MTBUF: `dst[0]` = vdata for loads and returning atomics, `src[0]` = vaddr (or
///   `Off`), `src[1]` = srsrc, `src[2]` = soffset, `src[3]` = vdata for stores/atomics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Inst {
    /// The instruction.
    pub op: Opcode,
    /// The encoding it was found in.
    pub enc: Encoding,
    /// Length in dwords (1..=3), literal included.
    pub len: u8,
    /// Destinations.
    pub dst: [Operand; 2],
    /// Sources.
    pub src: [Operand; 4],
    /// Modifiers.
    pub mods: Mods,
    /// The target it was decoded for (mnemonic and cache-bit names depend on it).
    pub target: Target,
}

impl Inst {
    /// The table row of the opcode.
    #[inline]
    pub fn info(&self) -> &'static OpInfo {
        self.op.info()
    }
    /// The instruction's mnemonic on its target, without encoding suffix.
    pub fn name(&self) -> &'static str {
        self.op.name(self.target)
    }
}

/// Why a word sequence did not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Fewer dwords than the instruction needs.
    Truncated {
        /// Dwords needed.
        need: u8,
        /// Dwords available.
        have: usize,
    },
    /// No instruction with this opcode in this encoding on this target.
    UnknownOpcode {
        /// The encoding.
        enc: Encoding,
        /// Opcode field value.
        opcode: u16,
        /// The first dword.
        word: u32,
    },
    /// An encoding gfx9 does not have (or this decoder does not model), named.
    NotSupported {
        /// What is missing.
        what: &'static str,
        /// The first dword.
        word: u32,
    },
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::Truncated { need, have } => {
                write!(f, "truncated instruction: needs {need} dwords, {have} left")
            }
            DecodeError::UnknownOpcode { enc, opcode, word } => {
                write!(f, "unknown {enc:?} opcode {opcode:#x} (word {word:#010x})")
            }
            DecodeError::NotSupported { what, word } => {
                write!(f, "not supported: {what} (word {word:#010x})")
            }
        }
    }
}

impl std::error::Error for DecodeError {}
