//! Printing in llvm-objdump-19 syntax (mnemonic, `_e32`/`_e64`/`_dpp`/`_sdwa` suffix,
//! operands, modifiers), and disassembly of a byte range.

use crate::ops_table::flags;
use crate::{decode, sreg, Class, DecodeError, Encoding, FloatConst, Inst, Mods, Opcode, Operand};
use crate::{Special, Target};
use std::fmt::{self, Write};

/// How an immediate source is printed: depends on the operand's type.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    B16,
    /// 16-bit integer: LLVM shows float inline constants as their f16 bit patterns
    I16,
    /// Packed 16-bit: f16 constants, literals printed whole
    P16,
    B32,
    B64,
}

/// Type of an instruction's sources, from the last type token of the mnemonic.
fn src_ty(name: &str, width: u8) -> Ty {
    if width >= 2 {
        return Ty::B64;
    }
    let mut ty = Ty::B32;
    for tok in name.split('_') {
        match tok {
            "f16" | "bf16" => ty = Ty::B16,
            "i16" | "u16" | "b16" => ty = Ty::I16,
            "f32" | "i32" | "u32" | "b32" | "f64" | "i64" | "u64" | "b64" | "u24" | "i24" => {
                ty = Ty::B32
            }
            _ => {}
        }
    }
    if name.starts_with("s_") {
        return Ty::B32;
    }
    if name.contains("pk_") {
        return if name.ends_with("_f32") || name.ends_with("_b32") {
            Ty::B32
        } else {
            Ty::P16
        };
    }
    if name.starts_with("v_pk_") || name.starts_with("v_dot") {
        // packed 16-bit sources print as 32-bit
        if !name.ends_with("_f32") && !name.starts_with("v_pk_") {
            return Ty::B32;
        }
    }
    ty
}

/// Whether the sources of a VOP3 op take float input modifiers (abs/neg): the source type
/// (last type token of the mnemonic) is a float, or the op is `v_cndmask_b32`.
fn fp_mods(name: &str) -> bool {
    if name.starts_with("v_cndmask_b32") {
        return true;
    }
    let mut fp = false;
    for t in name.split('_') {
        match t {
            "f16" | "f32" | "f64" => fp = true,
            "i16" | "u16" | "b16" | "i32" | "u32" | "b32" | "i64" | "u64" | "b64" | "u24"
            | "i24" | "u8" | "i8" | "i4" | "u4" => fp = false,
            _ => {}
        }
    }
    fp
}

/// Integer sources of ops that take float modifiers (exponent, selector, packed byte
/// position): LLVM prints their modifier bit as `sext(...)`.
fn int_src(name: &str, k: usize) -> bool {
    match k {
        1 => {
            name.starts_with("v_ldexp")
                || name.starts_with("v_trig_preop")
                || name == "v_cvt_pk_u8_f32"
        }
        2 => name == "v_cvt_pk_u8_f32",
        _ => false,
    }
}

/// Whether a mnemonic names a 16-bit type (VOP3 op_sel is printed for those only).
fn has_16bit(name: &str) -> bool {
    name.split('_')
        .any(|t| matches!(t, "f16" | "i16" | "u16" | "b16"))
}

fn reg_range(f: &mut dyn Write, prefix: &str, idx: u32, n: u8) -> fmt::Result {
    if n <= 1 {
        write!(f, "{prefix}{idx}")
    } else {
        write!(f, "{prefix}[{idx}:{}]", idx + u32::from(n) - 1)
    }
}

fn sreg_name(f: &mut dyn Write, idx: u8, n: u8) -> fmt::Result {
    let pair = n == 2;
    match idx {
        0..=sreg::SGPR_LAST => reg_range(f, "s", u32::from(idx), n),
        102 if pair => f.write_str("flat_scratch"),
        102 => f.write_str("flat_scratch_lo"),
        103 => f.write_str("flat_scratch_hi"),
        104 if pair => f.write_str("xnack_mask"),
        104 => f.write_str("xnack_mask_lo"),
        105 => f.write_str("xnack_mask_hi"),
        106 if pair => f.write_str("vcc"),
        106 => f.write_str("vcc_lo"),
        107 => f.write_str("vcc_hi"),
        108..=123 => reg_range(f, "ttmp", u32::from(idx - sreg::TTMP0), n),
        124 => f.write_str("m0"),
        125 => f.write_str("null"),
        126 if pair => f.write_str("exec"),
        126 => f.write_str("exec_lo"),
        127 => f.write_str("exec_hi"),
        _ => write!(f, "s{idx}"),
    }
}

fn float_name(c: FloatConst, ty: Ty) -> &'static str {
    match c {
        FloatConst::Half => "0.5",
        FloatConst::NegHalf => "-0.5",
        FloatConst::One => "1.0",
        FloatConst::NegOne => "-1.0",
        FloatConst::Two => "2.0",
        FloatConst::NegTwo => "-2.0",
        FloatConst::Four => "4.0",
        FloatConst::NegFour => "-4.0",
        FloatConst::InvTwoPi if ty == Ty::B64 => "0.15915494309189532",
        FloatConst::InvTwoPi => "0.15915494",
    }
}

fn operand(f: &mut dyn Write, o: Operand, ty: Ty) -> fmt::Result {
    match o {
        Operand::None => Ok(()),
        Operand::Sreg { idx, n } => sreg_name(f, idx, n),
        Operand::Vgpr { idx, n } => reg_range(f, "v", u32::from(idx), n),
        Operand::Agpr { idx, n } => reg_range(f, "a", u32::from(idx), n),
        Operand::Int(i) => write!(f, "{i}"),
        Operand::Float(c) if ty == Ty::I16 => write!(f, "0x{:x}", c.f16_bits()),
        Operand::Float(c) => f.write_str(float_name(c, ty)),
        Operand::Literal(l) => literal(f, l, ty),
        Operand::Special(s) => f.write_str(match s {
            Special::SharedBase => "src_shared_base",
            Special::SharedLimit => "src_shared_limit",
            Special::PrivateBase => "src_private_base",
            Special::PrivateLimit => "src_private_limit",
            Special::PopsExitingWaveId => "src_pops_exiting_wave_id",
            Special::Vccz => "src_vccz",
            Special::Execz => "src_execz",
            Special::Scc => "src_scc",
            Special::LdsDirect => "src_lds_direct",
        }),
        Operand::Off => f.write_str("off"),
    }
}

const FLOATS: [FloatConst; 9] = [
    FloatConst::Half,
    FloatConst::NegHalf,
    FloatConst::One,
    FloatConst::NegOne,
    FloatConst::Two,
    FloatConst::NegTwo,
    FloatConst::Four,
    FloatConst::NegFour,
    FloatConst::InvTwoPi,
];

/// LLVM prints a literal whose value an inline constant could express like that constant.
fn literal(f: &mut dyn Write, l: u32, ty: Ty) -> fmt::Result {
    match ty {
        Ty::B16 | Ty::I16 => {
            let v = l & 0xFFFF;
            if (-16..=64).contains(&i32::from(v as u16 as i16)) {
                return write!(f, "{}", v as u16 as i16);
            }
            if let Some(c) = FLOATS.iter().find(|c| u32::from(c.f16_bits()) == v) {
                return f.write_str(float_name(*c, ty));
            }
            write!(f, "0x{v:x}")
        }
        Ty::B32 | Ty::P16 => {
            if (-16..=64).contains(&(l as i32)) {
                return write!(f, "{}", l as i32);
            }
            if let Some(c) = FLOATS.iter().find(|c| c.f32_bits() == l) {
                return f.write_str(float_name(*c, ty));
            }
            write!(f, "0x{l:x}")
        }
        Ty::B64 => {
            if (-16..=64).contains(&(l as i32)) {
                return write!(f, "{}", l as i32);
            }
            if let Some(c) = FLOATS.iter().find(|c| c.f64_bits() == u64::from(l) << 32) {
                return f.write_str(float_name(*c, ty));
            }
            write!(f, "0x{l:x}")
        }
    }
}

/// Writes `, op` (or ` op` for the first operand).
struct Ops<'a, 'b> {
    f: &'a mut fmt::Formatter<'b>,
    first: bool,
}

impl Ops<'_, '_> {
    fn sep(&mut self) -> fmt::Result {
        let s = if self.first { " " } else { ", " };
        self.first = false;
        self.f.write_str(s)
    }
    fn op(&mut self, o: Operand, ty: Ty) -> fmt::Result {
        if o == Operand::None {
            return Ok(());
        }
        self.sep()?;
        operand(self.f, o, ty)
    }
    /// A source with VOP3/DPP/SDWA `neg`/`abs` modifiers.
    fn modded(&mut self, o: Operand, ty: Ty, neg: bool, abs: bool, sext: bool) -> fmt::Result {
        if o == Operand::None {
            return Ok(());
        }
        self.sep()?;
        if sext {
            self.f.write_str("sext(")?;
        }
        // LLVM writes neg(imm) for a negated constant without abs (-1 would read as an int)
        let imm = matches!(o, Operand::Int(_) | Operand::Float(_) | Operand::Literal(_));
        let neg_fn = neg && !abs && imm;
        if neg_fn {
            self.f.write_str("neg(")?;
        } else if neg {
            self.f.write_str("-")?;
        }
        if abs {
            self.f.write_str("|")?;
        }
        operand(self.f, o, ty)?;
        if abs {
            self.f.write_str("|")?;
        }
        if neg_fn {
            self.f.write_str(")")?;
        }
        if sext {
            self.f.write_str(")")?;
        }
        Ok(())
    }
}

fn sel_name(s: u8) -> &'static str {
    match s {
        0 => "BYTE_0",
        1 => "BYTE_1",
        2 => "BYTE_2",
        3 => "BYTE_3",
        4 => "WORD_0",
        5 => "WORD_1",
        _ => "DWORD",
    }
}

fn bitlist(f: &mut fmt::Formatter<'_>, name: &str, v: u8, n: usize) -> fmt::Result {
    write!(f, " {name}:[")?;
    for i in 0..n {
        if i > 0 {
            f.write_str(",")?;
        }
        write!(f, "{}", (v >> i) & 1)?;
    }
    f.write_str("]")
}

fn dpp_ctrl(f: &mut fmt::Formatter<'_>, c: u16) -> fmt::Result {
    match c {
        0x000..=0x0FF => write!(
            f,
            " quad_perm:[{},{},{},{}]",
            c & 3,
            (c >> 2) & 3,
            (c >> 4) & 3,
            (c >> 6) & 3
        ),
        0x101..=0x10F => write!(f, " row_shl:{}", c & 0xF),
        0x111..=0x11F => write!(f, " row_shr:{}", c & 0xF),
        0x121..=0x12F => write!(f, " row_ror:{}", c & 0xF),
        0x130 => f.write_str(" wave_shl:1"),
        0x134 => f.write_str(" wave_rol:1"),
        0x138 => f.write_str(" wave_shr:1"),
        0x13C => f.write_str(" wave_ror:1"),
        0x140 => f.write_str(" row_mirror"),
        0x141 => f.write_str(" row_half_mirror"),
        0x142 => f.write_str(" row_bcast:15"),
        0x143 => f.write_str(" row_bcast:31"),
        0x150..=0x15F => write!(f, " row_newbcast:{}", c & 0xF),
        _ => f.write_str(" /* Invalid dpp_ctrl value */"),
    }
}

fn waitcnt(f: &mut fmt::Formatter<'_>, v: u16) -> fmt::Result {
    let vm = (v & 0xF) | ((v >> 14) & 3) << 4;
    let exp = (v >> 4) & 7;
    let lgkm = (v >> 8) & 0xF;
    let mut any = false;
    if vm != 0x3F {
        write!(f, " vmcnt({vm})")?;
        any = true;
    }
    if exp != 7 {
        write!(f, " expcnt({exp})")?;
        any = true;
    }
    if lgkm != 0xF {
        write!(f, " lgkmcnt({lgkm})")?;
        any = true;
    }
    if !any {
        f.write_str(" vmcnt(63) expcnt(7) lgkmcnt(15)")?;
    }
    Ok(())
}

const HWREG: [&str; 24] = [
    "",
    "HW_REG_MODE",
    "HW_REG_STATUS",
    "HW_REG_TRAPSTS",
    "HW_REG_HW_ID",
    "HW_REG_GPR_ALLOC",
    "HW_REG_LDS_ALLOC",
    "HW_REG_IB_STS",
    "",
    "",
    "",
    "",
    "",
    "",
    "",
    "HW_REG_SH_MEM_BASES",
    "HW_REG_TBA_LO",
    "HW_REG_TBA_HI",
    "HW_REG_TMA_LO",
    "HW_REG_TMA_HI",
    "HW_REG_FLAT_SCR_LO",
    "HW_REG_FLAT_SCR_HI",
    "HW_REG_XNACK_MASK",
    "HW_REG_POPS_PACKER",
];

/// Hardware register names LLVM 19 knows on gfx94x beyond the gfx90a ones (ids 20..=25).
const HWREG_GFX94X: [&str; 6] = [
    "HW_REG_XCC_ID",
    "HW_REG_SQ_PERF_SNAPSHOT_DATA",
    "HW_REG_SQ_PERF_SNAPSHOT_DATA1",
    "HW_REG_SQ_PERF_SNAPSHOT_PC_LO",
    "HW_REG_SQ_PERF_SNAPSHOT_PC_HI",
    "",
];

fn hwreg(f: &mut fmt::Formatter<'_>, v: u16, gfx94x: bool) -> fmt::Result {
    let id = usize::from(v & 0x3F);
    let off = (v >> 6) & 0x1F;
    let size = ((v >> 11) & 0x1F) + 1;
    f.write_str("hwreg(")?;
    let name = if id >= 20 {
        if gfx94x {
            HWREG_GFX94X.get(id - 20).copied()
        } else {
            None
        }
    } else {
        HWREG.get(id).copied()
    };
    match name {
        Some(n) if !n.is_empty() => f.write_str(n)?,
        _ => write!(f, "{id}")?,
    }
    if off != 0 || size != 32 {
        write!(f, ", {off}, {size}")?;
    }
    f.write_str(")")
}

fn sendmsg(f: &mut fmt::Formatter<'_>, v: u16) -> fmt::Result {
    let id = v & 0xF;
    let op = (v >> 4) & 7;
    let stream = (v >> 8) & 3;
    let name = match id {
        1 => "MSG_INTERRUPT",
        2 => "MSG_GS",
        3 => "MSG_GS_DONE",
        4 => "MSG_SAVEWAVE",
        5 => "MSG_STALL_WAVE_GEN",
        6 => "MSG_HALT_WAVES",
        7 => "MSG_ORDERED_PS_DONE",
        8 => "MSG_EARLY_PRIM_DEALLOC",
        9 => "MSG_GS_ALLOC_REQ",
        10 => "MSG_GET_DOORBELL",
        11 => "MSG_GET_DDID",
        15 => "MSG_SYSMSG",
        _ => "",
    };
    let gs = matches!(id, 2 | 3);
    if name.is_empty() || (!gs && v >> 10 != 0) || (gs && op == 0 && stream != 0) {
        return write!(f, " {v}");
    }
    write!(f, " sendmsg({name}")?;
    if matches!(id, 2 | 3) {
        let ops = ["GS_OP_NOP", "GS_OP_CUT", "GS_OP_EMIT", "GS_OP_EMIT_CUT"];
        write!(f, ", {}", ops.get(usize::from(op)).copied().unwrap_or("0"))?;
        if op != 0 {
            write!(f, ", {stream}")?;
        }
    } else if id == 15 {
        let ops = [
            "0",
            "SYSMSG_OP_ECC_ERR_INTERRUPT",
            "SYSMSG_OP_REG_RD",
            "SYSMSG_OP_HOST_TRAP_ACK",
            "SYSMSG_OP_TTRACE_PC",
        ];
        write!(f, ", {}", ops.get(usize::from(op)).copied().unwrap_or("0"))?;
    }
    f.write_str(")")
}

fn sopp(f: &mut fmt::Formatter<'_>, inst: &Inst, imm: i16) -> fmt::Result {
    let v = imm as u16;
    let name = inst.name();
    match inst.op {
        Opcode::S_ENDPGM
        | Opcode::S_BARRIER
        | Opcode::S_WAKEUP
        | Opcode::S_ICACHE_INV
        | Opcode::S_TTRACEDATA
        | Opcode::S_ENDPGM_SAVED
        | Opcode::S_SET_GPR_IDX_OFF
        | Opcode::S_ENDPGM_ORDERED_PS_DONE => {
            if inst.op == Opcode::S_ENDPGM && v != 0 {
                write!(f, " {v}")?;
            }
            Ok(())
        }
        Opcode::S_WAITCNT => waitcnt(f, v),
        Opcode::S_SENDMSG | Opcode::S_SENDMSGHALT => sendmsg(f, v),
        _ if name.starts_with("s_cbranch") || name == "s_branch" => write!(f, " {v}"),
        Opcode::S_SETPRIO | Opcode::S_SLEEP | Opcode::S_NOP | Opcode::S_SETHALT if v <= 64 => {
            write!(f, " {v}")
        }
        _ => write!(f, " 0x{v:x}"),
    }
}

impl fmt::Display for Inst {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let info = self.info();
        let name = self.name();
        f.write_str(name)?;
        match self.enc {
            Encoding::Vop1 | Encoding::Vop2 | Encoding::Vopc if info.flags & flags::E32 != 0 => {
                f.write_str("_e32")?
            }
            Encoding::Vop3 | Encoding::Vop3b
                if matches!(info.class, Class::Vop1 | Class::Vop2 | Class::Vopc) =>
            {
                f.write_str("_e64")?
            }
            Encoding::Dpp => f.write_str("_dpp")?,
            Encoding::Sdwa => f.write_str("_sdwa")?,
            _ => {}
        }
        let ty = src_ty(name, info.widths[2]);
        let ty1 = src_ty(name, 1);
        let packed32 = name.starts_with("v_pk_") && ty1 == Ty::B32;
        let tyn = |n: u8| if n >= 2 && !packed32 { Ty::B64 } else { ty1 };
        let mut o = Ops { f, first: true };
        let gfx94x = self.target.is_gfx94x();
        match self.mods {
            Mods::None => {
                if self.enc == Encoding::Sopc && self.op == Opcode::S_SET_GPR_IDX_ON {
                    o.op(self.src[0], ty)?;
                    if let Operand::Literal(m) = self.src[1] {
                        o.sep()?;
                        if m > 15 {
                            return write!(o.f, "0x{m:x}");
                        }
                        write!(o.f, "gpr_idx(")?;
                        let names = ["SRC0", "SRC1", "SRC2", "DST"];
                        let mut first = true;
                        for (i, n) in names.iter().enumerate() {
                            if m >> i & 1 != 0 {
                                if !first {
                                    o.f.write_str(",")?;
                                }
                                first = false;
                                o.f.write_str(n)?;
                            }
                        }
                        o.f.write_str(")")?;
                    }
                    return Ok(());
                }
                // VOP2 carry-out (vcc) is printed right after vdst
                for d in self.dst {
                    o.op(d, ty)?;
                }
                let w = info.widths;
                if info.flags & flags::LITERAL != 0 && self.enc == Encoding::Vop2 {
                    // v_madmk: vdst, src0, K, vsrc1; v_madak: vdst, src0, vsrc1, K
                    let mk = name.contains("mk_");
                    o.op(self.src[0], ty)?;
                    // the K constant prints as its full 32-bit literal even for f16 ops
                    if mk {
                        o.op(self.src[2], Ty::B32)?;
                        o.op(self.src[1], ty)?;
                    } else {
                        o.op(self.src[1], ty)?;
                        o.op(self.src[2], Ty::B32)?;
                    }
                    return Ok(());
                }
                o.op(self.src[0], tyn(w[2]))?;
                o.op(self.src[1], tyn(w[3]))?;
                o.op(self.src[2], tyn(w[4]))?;
                Ok(())
            }
            Mods::Simm16(imm) => {
                if self.enc == Encoding::Sopp {
                    return sopp(o.f, self, imm);
                }
                let v = imm as u16;
                match self.op {
                    Opcode::S_GETREG_B32 => {
                        o.op(self.dst[0], ty)?;
                        o.sep()?;
                        hwreg(o.f, v, gfx94x)
                    }
                    Opcode::S_SETREG_B32 => {
                        o.sep()?;
                        hwreg(o.f, v, gfx94x)?;
                        o.op(self.dst[0], ty)
                    }
                    Opcode::S_SETREG_IMM32_B32 => {
                        o.sep()?;
                        hwreg(o.f, v, gfx94x)?;
                        o.op(self.src[0], ty)
                    }
                    Opcode::S_CBRANCH_I_FORK | Opcode::S_CALL_B64 => {
                        o.op(self.dst[0], ty)?;
                        write!(o.f, ", {v}")
                    }
                    _ => {
                        o.op(self.dst[0], ty)?;
                        write!(o.f, ", 0x{v:x}")
                    }
                }
            }
            Mods::Smem {
                offset,
                imm,
                soe,
                glc,
            } => {
                o.op(self.dst[0], ty)?;
                if let Operand::Int(i) = self.src[2] {
                    o.sep()?;
                    write!(o.f, "{i}")?;
                } else {
                    o.op(self.src[2], ty)?;
                }
                o.op(self.src[0], ty)?;
                if self.src[0] != Operand::None || self.src[1] != Operand::None || imm {
                    if imm && soe {
                        o.op(self.src[1], ty)?;
                        write!(o.f, " offset:0x{:x}", offset)?;
                    } else if imm {
                        o.sep()?;
                        write!(o.f, "0x{:x}", offset)?;
                    } else {
                        o.op(self.src[1], ty)?;
                    }
                }
                // SMEM keeps the name glc on gfx94x; probes and discards do not print it
                let no_glc = matches!(
                    self.op,
                    Opcode::S_ATC_PROBE
                        | Opcode::S_ATC_PROBE_BUFFER
                        | Opcode::S_DCACHE_DISCARD
                        | Opcode::S_DCACHE_DISCARD_X2
                );
                if glc && !no_glc {
                    o.f.write_str(" glc")?;
                }
                Ok(())
            }
            Mods::Vop3 {
                abs,
                neg,
                clamp,
                omod,
                op_sel,
            } => {
                // integer ops have no input modifiers: LLVM ignores those bits
                let (abs, neg) = if fp_mods(name) { (abs, neg) } else { (0, 0) };
                o.op(self.dst[0], ty)?;
                o.op(self.dst[1], ty)?;
                let w = info.widths;
                let carry = info.flags & flags::CARRY_IN != 0;
                for k in 0..3 {
                    let n = if k == 2 && carry { 2 } else { w[2 + k] };
                    // an integer source of an op with float modifiers: its neg bit is sext
                    let int = int_src(name, k);
                    let t = if k == 2 && name.starts_with("v_mad_") && name.contains("32_") {
                        Ty::B32
                    } else {
                        tyn(n)
                    };
                    o.modded(
                        self.src[k],
                        t,
                        !int && neg >> k & 1 != 0,
                        !int && abs >> k & 1 != 0,
                        int && neg >> k & 1 != 0,
                    )?;
                }
                if op_sel != 0 && has_16bit(name) && !name.contains("legacy") {
                    let nsrc = self
                        .src
                        .iter()
                        .take(3)
                        .filter(|s| **s != Operand::None)
                        .count();
                    let mut v = op_sel & ((1 << nsrc) - 1);
                    v |= (op_sel >> 3 & 1) << nsrc;
                    bitlist(o.f, "op_sel", v, nsrc + 1)?;
                }
                if clamp {
                    o.f.write_str(" clamp")?;
                }
                omod_str(o.f, omod)
            }
            Mods::Vop3p {
                op_sel,
                op_sel_hi,
                neg_lo,
                neg_hi,
                clamp,
            } => {
                o.op(self.dst[0], ty)?;
                let w = info.widths;
                // v_fma_mix*: neg_lo/neg_hi are the sources' neg/abs modifiers
                let mix = name.starts_with("v_fma_mix") || name.starts_with("v_mad_mix");
                for k in 0..3 {
                    if mix {
                        let (n, a) = (neg_lo >> k & 1 != 0, neg_hi >> k & 1 != 0);
                        o.modded(self.src[k], Ty::B32, n, a, false)?;
                    } else {
                        o.op(self.src[k], tyn(w[2 + k]))?;
                    }
                }
                let nsrc = self
                    .src
                    .iter()
                    .take(3)
                    .filter(|s| **s != Operand::None)
                    .count();
                let mask = (1u8 << nsrc) - 1;
                if op_sel & mask != 0 {
                    bitlist(o.f, "op_sel", op_sel, nsrc)?;
                }
                // mix ops default to op_sel_hi 0, the others to all ones
                let hi_default = if mix { 0 } else { mask };
                if op_sel_hi & mask != hi_default {
                    bitlist(o.f, "op_sel_hi", op_sel_hi, nsrc)?;
                }
                if neg_lo & mask != 0 && !mix {
                    bitlist(o.f, "neg_lo", neg_lo, nsrc)?;
                }
                if neg_hi & mask != 0 && !mix {
                    bitlist(o.f, "neg_hi", neg_hi, nsrc)?;
                }
                if clamp {
                    o.f.write_str(" clamp")?;
                }
                Ok(())
            }
            Mods::Mai {
                cbsz,
                abid,
                blgp,
                acc_cd: _,
            } => {
                o.op(self.dst[0], ty)?;
                for k in 0..3 {
                    o.op(self.src[k], Ty::B32)?;
                }
                if cbsz != 0 {
                    write!(o.f, " cbsz:{cbsz}")?;
                }
                if abid != 0 {
                    write!(o.f, " abid:{abid}")?;
                }
                if blgp != 0 {
                    if gfx94x && name.starts_with("v_mfma_f64") {
                        // gfx94x f64 MFMA reuses blgp as neg of A, B, C
                        bitlist(o.f, "neg", blgp, 3)?;
                    } else {
                        write!(o.f, " blgp:{blgp}")?;
                    }
                }
                Ok(())
            }
            Mods::Dpp {
                ctrl,
                row_mask,
                bank_mask,
                bound_ctrl,
                abs,
                neg,
            } => {
                o.op(self.dst[0], ty)?;
                if self.enc == Encoding::Dpp && info.class == Class::Vop2 {
                    o.op(self.dst[1], ty)?;
                }
                let w = info.widths;
                let (abs, neg) = if fp_mods(name) { (abs, neg) } else { (0, 0) };
                let i1 = int_src(name, 1);
                let n1 = neg & 2 != 0;
                o.modded(self.src[0], tyn(w[2]), neg & 1 != 0, abs & 1 != 0, false)?;
                o.modded(
                    self.src[1],
                    tyn(w[3]),
                    !i1 && n1,
                    !i1 && abs & 2 != 0,
                    i1 && n1,
                )?;
                o.op(self.src[2], ty)?;
                let dp_alu = w[2] >= 2 || w[0] >= 2;
                if dp_alu && !(0x150..=0x15F).contains(&ctrl) {
                    o.f.write_str("  /* DP ALU dpp only supports row_newbcast */")?;
                } else {
                    dpp_ctrl(o.f, ctrl)?;
                }
                write!(o.f, " row_mask:0x{row_mask:x} bank_mask:0x{bank_mask:x}")?;
                if bound_ctrl {
                    o.f.write_str(" bound_ctrl:1")?;
                }
                Ok(())
            }
            Mods::Sdwa {
                dst_sel,
                dst_unused,
                src0_sel,
                src1_sel,
                sext,
                abs,
                neg,
                clamp,
                omod,
            } => {
                o.op(self.dst[0], ty)?;
                if info.class == Class::Vop2 {
                    o.op(self.dst[1], ty)?;
                }
                let w = info.widths;
                o.modded(
                    self.src[0],
                    tyn(w[2]),
                    neg & 1 != 0,
                    abs & 1 != 0,
                    sext & 1 != 0,
                )?;
                o.modded(
                    self.src[1],
                    tyn(w[3]),
                    neg & 2 != 0,
                    abs & 2 != 0,
                    sext & 2 != 0,
                )?;
                o.op(self.src[2], ty)?;
                if clamp && info.class != Class::Vopc {
                    o.f.write_str(" clamp")?;
                }
                omod_str(o.f, omod)?;
                if info.class != Class::Vopc {
                    write!(o.f, " dst_sel:{}", sel_name(dst_sel))?;
                    let u = ["UNUSED_PAD", "UNUSED_SEXT", "UNUSED_PRESERVE", "UNUSED_3"];
                    write!(o.f, " dst_unused:{}", u[usize::from(dst_unused & 3)])?;
                }
                write!(o.f, " src0_sel:{}", sel_name(src0_sel))?;
                if info.class != Class::Vop1 {
                    write!(o.f, " src1_sel:{}", sel_name(src1_sel))?;
                }
                Ok(())
            }
            Mods::Ds {
                offset0,
                offset1,
                gds,
            } => {
                o.op(self.dst[0], ty)?;
                o.op(self.src[0], ty)?;
                o.op(self.src[1], ty)?;
                o.op(self.src[2], ty)?;
                if name.contains("2st64") || name.contains("2_") {
                    if offset0 != 0 {
                        write!(o.f, " offset0:{offset0}")?;
                    }
                    if offset1 != 0 {
                        write!(o.f, " offset1:{offset1}")?;
                    }
                } else {
                    let off = u16::from(offset1) << 8 | u16::from(offset0);
                    if off != 0 {
                        if self.op == Opcode::DS_SWIZZLE_B32 {
                            write!(o.f, " offset:{}", swizzle(off))?;
                        } else {
                            write!(o.f, " offset:{off}")?;
                        }
                    }
                }
                if gds {
                    o.f.write_str(" gds")?;
                }
                Ok(())
            }
            Mods::Flat {
                offset,
                glc,
                slc,
                scc,
                lds,
            } => {
                o.op(self.dst[0], ty)?;
                o.op(self.src[0], ty)?;
                o.op(self.src[1], ty)?;
                o.op(self.src[2], ty)?;
                if offset != 0 {
                    write!(o.f, " offset:{offset}")?;
                }
                cache_bits(o.f, gfx94x, glc, slc, scc)?;
                if lds {
                    o.f.write_str(" lds")?;
                }
                Ok(())
            }
            Mods::Buf {
                offset,
                offen,
                idxen,
                glc,
                slc,
                scc,
                lds,
                dfmt,
                nfmt,
            } => {
                if info.widths == [0; 5] {
                    // cache control (buffer_wbl2, buffer_inv, ...): no operands; objdump
                    // shows the scope bits on gfx94x only
                    if !gfx94x {
                        return Ok(());
                    }
                    return cache_bits(o.f, gfx94x, glc, false, scc);
                }
                let vdata = if self.src[3] != Operand::None {
                    self.src[3]
                } else {
                    self.dst[0]
                };
                o.op(vdata, ty)?;
                o.op(self.src[0], ty)?;
                o.op(self.src[1], ty)?;
                o.op(self.src[2], ty)?;
                if self.enc == Encoding::Mtbuf {
                    // defaults (dfmt 1 = BUF_DATA_FORMAT_8, nfmt 0 = UNORM) are omitted
                    match (dfmt != 1, nfmt != 0) {
                        (true, true) => {
                            write!(o.f, " format:[{},{}]", dfmt_name(dfmt), nfmt_name(nfmt))?
                        }
                        (true, false) => write!(o.f, " format:[{}]", dfmt_name(dfmt))?,
                        (false, true) => write!(o.f, " format:[{}]", nfmt_name(nfmt))?,
                        (false, false) => {}
                    }
                }
                if idxen {
                    o.f.write_str(" idxen")?;
                }
                if offen {
                    o.f.write_str(" offen")?;
                }
                if offset != 0 {
                    write!(o.f, " offset:{offset}")?;
                }
                cache_bits(o.f, gfx94x, glc, slc, scc)?;
                if lds {
                    o.f.write_str(" lds")?;
                }
                Ok(())
            }
        }
    }
}

fn omod_str(f: &mut fmt::Formatter<'_>, omod: u8) -> fmt::Result {
    match omod {
        1 => f.write_str(" mul:2"),
        2 => f.write_str(" mul:4"),
        3 => f.write_str(" div:2"),
        _ => Ok(()),
    }
}

fn cache_bits(
    f: &mut fmt::Formatter<'_>,
    gfx94x: bool,
    glc: bool,
    slc: bool,
    scc: bool,
) -> fmt::Result {
    if gfx94x {
        if glc {
            f.write_str(" sc0")?;
        }
        if slc {
            f.write_str(" nt")?;
        }
        if scc {
            f.write_str(" sc1")?;
        }
    } else {
        if glc {
            f.write_str(" glc")?;
        }
        if slc {
            f.write_str(" slc")?;
        }
        if scc {
            f.write_str(" scc")?;
        }
    }
    Ok(())
}

fn dfmt_name(d: u8) -> &'static str {
    [
        "BUF_DATA_FORMAT_INVALID",
        "BUF_DATA_FORMAT_8",
        "BUF_DATA_FORMAT_16",
        "BUF_DATA_FORMAT_8_8",
        "BUF_DATA_FORMAT_32",
        "BUF_DATA_FORMAT_16_16",
        "BUF_DATA_FORMAT_10_11_11",
        "BUF_DATA_FORMAT_11_11_10",
        "BUF_DATA_FORMAT_10_10_10_2",
        "BUF_DATA_FORMAT_2_10_10_10",
        "BUF_DATA_FORMAT_8_8_8_8",
        "BUF_DATA_FORMAT_32_32",
        "BUF_DATA_FORMAT_16_16_16_16",
        "BUF_DATA_FORMAT_32_32_32",
        "BUF_DATA_FORMAT_32_32_32_32",
        "BUF_DATA_FORMAT_RESERVED_15",
    ][usize::from(d & 15)]
}

fn nfmt_name(n: u8) -> &'static str {
    [
        "BUF_NUM_FORMAT_UNORM",
        "BUF_NUM_FORMAT_SNORM",
        "BUF_NUM_FORMAT_USCALED",
        "BUF_NUM_FORMAT_SSCALED",
        "BUF_NUM_FORMAT_UINT",
        "BUF_NUM_FORMAT_SINT",
        "BUF_NUM_FORMAT_RESERVED_6",
        "BUF_NUM_FORMAT_FLOAT",
    ][usize::from(n & 7)]
}

/// `ds_swizzle_b32` offset in LLVM's `swizzle(...)` syntax.
fn swizzle(off: u16) -> String {
    if off & 0x8000 != 0 {
        // quad permute mode
        return format!(
            "swizzle(QUAD_PERM,{},{},{},{})",
            off & 3,
            (off >> 2) & 3,
            (off >> 4) & 3,
            (off >> 6) & 3
        );
    }
    let and = off & 0x1F;
    let or = (off >> 5) & 0x1F;
    let xor = (off >> 10) & 0x1F;
    if and == 0x1F && or == 0 && xor != 0 {
        if xor.is_power_of_two() {
            return format!("swizzle(SWAP,{xor})");
        }
        if (xor + 1).is_power_of_two() {
            return format!("swizzle(REVERSE,{})", xor + 1);
        }
    }
    if xor == 0 {
        // broadcast: the and mask clears the lane bits of a group, or selects the lane
        let group = (!and & 0x1F) + 1;
        if group.is_power_of_two() && group > 1 && or < group {
            return format!("swizzle(BROADCAST,{group},{or})");
        }
    }
    format!("swizzle(BITMASK_PERM,\"{}\")", bitmask_perm(and, or, xor))
}

fn bitmask_perm(and: u16, or: u16, xor: u16) -> String {
    let mut s = String::with_capacity(5);
    for i in (0..5).rev() {
        let a = and >> i & 1;
        let o = or >> i & 1;
        let x = xor >> i & 1;
        s.push(match (a, o, x) {
            (0, 0, _) => '0',
            (0, 1, _) => '1',
            (1, _, 0) => 'p',
            _ => 'i',
        });
    }
    s
}

/// One line of a disassembly: byte offset and the instruction, or why not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisasmLine {
    /// Byte offset from the start of the range.
    pub offset: usize,
    /// The instruction's dwords (literal included; one dword when it did not decode).
    pub words: [u32; 3],
    /// How many of `words` are used.
    pub nwords: u8,
    /// Decoded instruction, or why not (then one dword is skipped).
    pub inst: Result<Inst, DecodeError>,
}

/// Disassembles `bytes` (little-endian code; a trailing partial dword is ignored) for
/// `target`, one line per instruction.
pub fn disassemble(bytes: &[u8], target: Target) -> Vec<DisasmLine> {
    let words: Vec<u32> = bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let mut out = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        let r = decode(&words[i..], target);
        let n = r
            .as_ref()
            .map(|x| usize::from(x.len))
            .unwrap_or(1)
            .clamp(1, 3);
        let mut ws = [0u32; 3];
        for (k, w) in words[i..].iter().take(n).enumerate() {
            ws[k] = *w;
        }
        out.push(DisasmLine {
            offset: i * 4,
            words: ws,
            nwords: n as u8,
            inst: r,
        });
        i += n;
    }
    out
}
