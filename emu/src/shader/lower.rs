//! Lowering of the shared decoder's [`amdgpu_isa::Inst`] into the interpreter's compact
//! executable [`Op`]: operands become small register/constant codes resolved once per
//! kernel, opcodes become the target's VOP3-space opcode number (the row of the shared
//! opcode table for the kernel's target), modifiers become flat fields. There is no bit-field
//! split of machine code here: every field comes from `amdgpu_isa::decode`.
//!
//! Operand codes (`src[i]`, scalar `dst`/`sdst`): 0..=127 scalar registers, 128..=208 inline
//! integers, 235..=254 specials and inline floats, 255 the literal (`lit`), 256..=511 VGPRs,
//! 512..=767 AccVGPRs. Memory encodings (DS, FLAT, MUBUF) keep raw register numbers in
//! `dst`/`src` with `acc` saying which file the data registers are in.

use amdgpu_isa::{Class, Encoding, FloatConst, Inst, Mods, Opcode, Operand, Special};

/// A VALU operation the interpreter runs on its fast path (`wave/fast.rs`): no input or
/// output modifiers, no DPP/SDWA, every vector operand an architectural VGPR (operand codes
/// 256..512) and the destination a VGPR. Chosen once at lowering; [`Fast::None`] takes the
/// general path. The fast path itself falls back to the general one when a run-time
/// condition does not hold (f32 denormals flushed by MODE, a register beyond the wave's
/// allocation), so both give the same result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fast {
    None,
    // f32 (need MODE.FP_DENORM to keep f32 denormals)
    AddF32,
    SubF32,
    SubrevF32,
    MulF32,
    MinF32,
    MaxF32,
    /// `v_fma_f32`.
    FmaF32,
    /// `v_fmac_f32`: D = S0 * S1 + D, fused.
    FmacF32,
    /// `v_mac_f32`: D = S0 * S1 + D, unfused.
    MacF32,
    /// `v_mad_f32`: unfused.
    MadF32,
    CvtF32U32,
    CvtF32I32,
    // 32-bit integer
    Mov,
    AddU32,
    SubU32,
    SubrevU32,
    Lshlrev,
    Lshrrev,
    Ashrrev,
    And,
    Or,
    Xor,
    MinI32,
    MaxI32,
    MinU32,
    MaxU32,
    MulU32U24,
    MulLoU32,
    MulHiU32,
    MadU32U24,
    BfeU32,
    Bfi,
    Add3,
    LshlAdd,
    AddLshl,
    LshlOr,
    AndOr,
    Or3,
    Xad,
    /// `v_cndmask_b32`: the mask is VCC (e32) or the SGPR pair `src[2]`.
    Cndmask,
    /// Carry-out ops: `v_add_co_u32`, `v_sub_co_u32`, `v_subrev_co_u32`.
    AddCo,
    SubCo,
    SubrevCo,
    /// `v_addc_co_u32`: carry-in from VCC (e32) or `src[2]`.
    AddcCo,
    /// VOPC compares: condition (low 4 bits of the opcode), whether it also writes EXEC.
    CmpF32(u8, bool),
    CmpI32(u8, bool),
    CmpU32(u8, bool),
    // 64-bit (register pairs)
    /// `v_mov_b64` (gfx94x).
    MovB64,
    /// `v_lshl_add_u64` (gfx94x): D = (S0 << S1[2:0]) + S2.
    LshlAddU64,
    LshlrevB64,
    // Whole-wave memory fast paths (`wave/memfast.rs`), DS and FLAT/GLOBAL encodings.
    /// `global_load_dword{,x2,x3,x4}` / `flat_load_dword*`: dwords per lane.
    GlobalLoad(u8),
    /// `global_store_dword{,x2,x3,x4}` / `flat_store_dword*`: dwords per lane.
    GlobalStore(u8),
    /// `ds_read_b32/b64/b96/b128`: dwords per lane.
    DsRead(u8),
    /// `ds_write_b32/b64/b96/b128`: dwords per lane.
    DsWrite(u8),
    /// `ds_read2_b32` (offset scale 4) / `ds_read2st64_b32` (scale 256).
    DsRead2(u16),
    /// `ds_write2_b32` / `ds_write2st64_b32`: the offset scale.
    DsWrite2(u16),
}

/// The whole-wave fast-path kind of a DS op (the VOP3-space opcode `op`, gfx9 DS opcode
/// numbers as the general path `Wave::ds` dispatches on); GDS ops take the general path.
fn ds_fast_kind(op: u16, gds: bool) -> Fast {
    if gds {
        return Fast::None;
    }
    match op {
        0x36 => Fast::DsRead(1),
        0x76 => Fast::DsRead(2),
        0xfe => Fast::DsRead(3),
        0xff => Fast::DsRead(4),
        0x0d => Fast::DsWrite(1),
        0x4d => Fast::DsWrite(2),
        0xde => Fast::DsWrite(3),
        0xdf => Fast::DsWrite(4),
        0x37 => Fast::DsRead2(4),
        0x38 => Fast::DsRead2(256),
        0x0e => Fast::DsWrite2(4),
        0x0f => Fast::DsWrite2(256),
        _ => Fast::None,
    }
}

/// The whole-wave fast-path kind of a FLAT/GLOBAL op (`seg` 0 flat, 1 scratch, 2 global):
/// dword loads and stores not in the scratch segment and not the LDS-DMA form.
fn flat_fast_kind(op: u16, seg: u16, lds: bool) -> Fast {
    if seg == 1 || lds {
        return Fast::None;
    }
    match op {
        0x14..=0x17 => Fast::GlobalLoad((op - 0x13) as u8),
        0x1c..=0x1f => Fast::GlobalStore((op - 0x1b) as u8),
        _ => Fast::None,
    }
}

/// The fast-path kind of a VOP1/VOP2/VOPC/VOP3 op (after the operands are lowered).
fn fast_kind(inst: &Inst, o: &Op) -> Fast {
    let plain = matches!(o.form, VopForm::E32 | VopForm::Vop3)
        && o.abs == 0
        && o.neg == 0
        && !o.clamp
        && o.omod == 0
        && o.opsel == 0;
    // Sources: a scalar operand code (< 256) or a VGPR (256..512); no AccVGPR.
    if !plain || o.src.iter().any(|&c| c >= AGPR_BASE) {
        return Fast::None;
    }
    let vopc = inst.info().class == Class::Vopc;
    if !vopc && o.dst >= 256 {
        return Fast::None;
    }
    use Opcode as O;
    let f = match inst.op {
        O::V_ADD_F32 => Fast::AddF32,
        O::V_SUB_F32 => Fast::SubF32,
        O::V_SUBREV_F32 => Fast::SubrevF32,
        O::V_MUL_F32 => Fast::MulF32,
        O::V_MIN_F32 => Fast::MinF32,
        O::V_MAX_F32 => Fast::MaxF32,
        O::V_FMA_F32 => Fast::FmaF32,
        O::V_FMAC_F32 => Fast::FmacF32,
        O::V_MAC_F32 => Fast::MacF32,
        O::V_MAD_F32 => Fast::MadF32,
        O::V_CVT_F32_U32 => Fast::CvtF32U32,
        O::V_CVT_F32_I32 => Fast::CvtF32I32,
        O::V_MOV_B32 => Fast::Mov,
        O::V_ADD_U32 => Fast::AddU32,
        O::V_SUB_U32 => Fast::SubU32,
        O::V_SUBREV_U32 => Fast::SubrevU32,
        O::V_LSHLREV_B32 => Fast::Lshlrev,
        O::V_LSHRREV_B32 => Fast::Lshrrev,
        O::V_ASHRREV_I32 => Fast::Ashrrev,
        O::V_AND_B32 => Fast::And,
        O::V_OR_B32 => Fast::Or,
        O::V_XOR_B32 => Fast::Xor,
        O::V_MIN_I32 => Fast::MinI32,
        O::V_MAX_I32 => Fast::MaxI32,
        O::V_MIN_U32 => Fast::MinU32,
        O::V_MAX_U32 => Fast::MaxU32,
        O::V_MUL_U32_U24 => Fast::MulU32U24,
        O::V_MUL_LO_U32 => Fast::MulLoU32,
        O::V_MUL_HI_U32 => Fast::MulHiU32,
        O::V_MAD_U32_U24 => Fast::MadU32U24,
        O::V_BFE_U32 => Fast::BfeU32,
        O::V_BFI_B32 => Fast::Bfi,
        O::V_ADD3_U32 => Fast::Add3,
        O::V_LSHL_ADD_U32 => Fast::LshlAdd,
        O::V_ADD_LSHL_U32 => Fast::AddLshl,
        O::V_LSHL_OR_B32 => Fast::LshlOr,
        O::V_AND_OR_B32 => Fast::AndOr,
        O::V_OR3_B32 => Fast::Or3,
        O::V_XAD_U32 => Fast::Xad,
        O::V_CNDMASK_B32 => Fast::Cndmask,
        O::V_ADD_CO_U32 => Fast::AddCo,
        O::V_SUB_CO_U32 => Fast::SubCo,
        O::V_SUBREV_CO_U32 => Fast::SubrevCo,
        O::V_ADDC_CO_U32 => Fast::AddcCo,
        O::V_MOV_B64 => Fast::MovB64,
        O::V_LSHL_ADD_U64 => Fast::LshlAddU64,
        O::V_LSHLREV_B64 => Fast::LshlrevB64,
        _ if vopc => {
            let k = o.op;
            let (cond, x) = ((k & 0xF) as u8, k >> 4 & 1 == 1);
            match k {
                0x40..=0x5F => Fast::CmpF32(cond, x),
                0xC0..=0xDF if k >> 3 & 1 == 0 => Fast::CmpI32(cond & 7, x),
                0xC0..=0xDF => Fast::CmpU32(cond & 7, x),
                _ => Fast::None,
            }
        }
        _ => Fast::None,
    };
    // The 64-bit destinations need the pair inside the VGPR file.
    if matches!(f, Fast::MovB64 | Fast::LshlAddU64 | Fast::LshlrevB64) && o.dst >= 255 {
        return Fast::None;
    }
    f
}

/// Instruction class the interpreter dispatches on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Enc {
    Sop2,
    Sop1,
    Sopk,
    Sopc,
    Sopp,
    Smem,
    /// VOP1/VOP2/VOPC/VOP3: `op` is the VOP3 opcode number (VOPC 0..0xFF, VOP2 +0x100,
    /// VOP1 +0x140).
    Valu,
    Vop3p,
    /// VOP3P-MAI (MFMA).
    Mai,
    Ds,
    Flat,
    Mubuf,
    /// Not decodable (reserved encoding or bits), or an encoding the core does not model.
    Invalid,
}

/// VOP encodings (for the e32 implicit-VCC forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum VopForm {
    E32,
    Vop3,
    Sdwa,
    Dpp,
}

/// One lowered instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Op {
    pub(crate) enc: Enc,
    pub(crate) form: VopForm,
    pub(crate) op: u16,
    /// Length in dwords (including a literal).
    pub(crate) len: u8,
    /// Destination: operand code (scalar), VGPR number (vector), DS/FLAT/MUBUF vdst.
    pub(crate) dst: u16,
    /// VOP3B / VOPC scalar destination (operand code); MUBUF soffset.
    pub(crate) sdst: u16,
    /// Source operand codes; DS: addr, data0, data1 as VGPR numbers; FLAT: addr, data,
    /// saddr; MUBUF: vaddr, vdata, srsrc.
    pub(crate) src: [u16; 3],
    /// 32-bit literal (operand code 255, the K of `v_madmk`/`v_fmaak`, `s_setreg_imm32`).
    pub(crate) lit: u32,
    /// SOPK/SOPP simm16 (SOPK zero-extended), SMEM/FLAT/DS/MUBUF offset.
    pub(crate) imm: i32,
    /// DS offset1; FLAT segment (0 flat, 1 scratch, 2 global).
    pub(crate) aux: u16,
    pub(crate) abs: u8,
    pub(crate) neg: u8,
    pub(crate) clamp: bool,
    pub(crate) omod: u8,
    pub(crate) opsel: u8,
    /// VOP3P op_sel_hi; SMEM soe | !imm << 1; DS gds; FLAT lds; MUBUF offen | idxen << 1 |
    /// glc << 2 | scc << 3 | lds << 4; DPP control dword; SDWA dword.
    pub(crate) ext: u32,
    /// VOP3P neg_hi; FLAT: 1 = no VGPR address; MAI cbsz.
    pub(crate) neg_hi: u8,
    /// Data registers are AccVGPRs (DS/FLAT/MUBUF `acc`, MFMA `acc_cd`).
    pub(crate) acc: bool,
    /// Raw words, for error messages.
    pub(crate) words: [u32; 3],
    /// The VALU fast-path kind ([`Fast::None`]: the general path).
    pub(crate) fast: Fast,
}

impl Op {
    /// An op the core cannot execute (faults when reached).
    pub(crate) fn invalid(words: [u32; 3]) -> Op {
        Op {
            enc: Enc::Invalid,
            form: VopForm::E32,
            op: 0,
            len: 1,
            dst: 0,
            sdst: 0,
            src: [0; 3],
            lit: 0,
            imm: 0,
            aux: 0,
            abs: 0,
            neg: 0,
            clamp: false,
            omod: 0,
            opsel: 0,
            ext: 0,
            neg_hi: 0,
            acc: false,
            words,
            fast: Fast::None,
        }
    }
}

/// AccVGPR operand codes start here.
pub(crate) const AGPR_BASE: u16 = 512;

/// The operand code of a source or scalar destination; `lit` receives a literal.
fn code(o: Operand, lit: &mut u32) -> u16 {
    match o {
        Operand::None | Operand::Off => 0,
        Operand::Sreg { idx, .. } => idx as u16,
        Operand::Vgpr { idx, .. } => 256 + idx as u16,
        Operand::Agpr { idx, .. } => AGPR_BASE + idx as u16,
        Operand::Int(i) if i >= 0 => 128 + i as u16,
        Operand::Int(i) => 192 + i16::from(i).unsigned_abs(),
        Operand::Float(f) => {
            240 + match f {
                FloatConst::Half => 0,
                FloatConst::NegHalf => 1,
                FloatConst::One => 2,
                FloatConst::NegOne => 3,
                FloatConst::Two => 4,
                FloatConst::NegTwo => 5,
                FloatConst::Four => 6,
                FloatConst::NegFour => 7,
                FloatConst::InvTwoPi => 8,
            }
        }
        Operand::Literal(v) => {
            *lit = v;
            255
        }
        Operand::Special(s) => match s {
            Special::SharedBase => 235,
            Special::SharedLimit => 236,
            Special::PrivateBase => 237,
            Special::PrivateLimit => 238,
            Special::PopsExitingWaveId => 239,
            Special::Vccz => 251,
            Special::Execz => 252,
            Special::Scc => 253,
            Special::LdsDirect => 254,
        },
    }
}

/// The raw register number of a VGPR/AGPR operand (memory encodings), 0 if absent.
fn reg(o: Operand) -> u16 {
    match o {
        Operand::Vgpr { idx, .. } | Operand::Agpr { idx, .. } => idx as u16,
        Operand::Sreg { idx, .. } => idx as u16,
        _ => 0,
    }
}

fn is_agpr(o: Operand) -> bool {
    matches!(o, Operand::Agpr { .. })
}

/// Lowers `inst` (decoded from `words`) for `target`'s opcode column.
pub(crate) fn lower(inst: &Inst, words: [u32; 3]) -> Op {
    let info = inst.info();
    let col = usize::from(inst.target.is_gfx94x());
    let code_n = info.code[col];
    let mut o = Op::invalid(words);
    o.len = inst.len;
    let mut lit = 0u32;
    match inst.enc {
        Encoding::Sop1 | Encoding::Sop2 | Encoding::Sopc => {
            o.enc = match inst.enc {
                Encoding::Sop1 => Enc::Sop1,
                Encoding::Sop2 => Enc::Sop2,
                _ => Enc::Sopc,
            };
            o.op = code_n;
            o.dst = code(inst.dst[0], &mut lit);
            o.src = [code(inst.src[0], &mut lit), code(inst.src[1], &mut lit), 0];
            if inst.op == amdgpu_isa::Opcode::S_SET_GPR_IDX_ON {
                // The mode field is not an operand.
                o.src[1] = match inst.src[1] {
                    Operand::Literal(m) => m as u16,
                    _ => 0,
                };
                lit = 0;
            }
        }
        Encoding::Sopk => {
            o.enc = Enc::Sopk;
            o.op = code_n;
            o.dst = code(inst.dst[0], &mut lit);
            code(inst.src[0], &mut lit);
            if let Mods::Simm16(i) = inst.mods {
                o.imm = i as u16 as i32;
            }
        }
        Encoding::Sopp => {
            o.enc = Enc::Sopp;
            o.op = code_n;
            if let Mods::Simm16(i) = inst.mods {
                o.imm = i32::from(i);
            }
        }
        Encoding::Smem => {
            o.enc = Enc::Smem;
            o.op = code_n;
            let sdata = if inst.dst[0] != Operand::None {
                inst.dst[0]
            } else {
                inst.src[2]
            };
            o.dst = match sdata {
                Operand::Int(i) => i as u16,
                s => reg(s),
            };
            o.src[0] = reg(inst.src[0]);
            o.src[1] = reg(inst.src[1]);
            if let Mods::Smem {
                offset,
                imm,
                soe,
                glc,
            } = inst.mods
            {
                o.imm = offset;
                o.ext = u32::from(soe) | u32::from(!imm) << 1;
                o.clamp = glc;
            }
        }
        Encoding::Vop1
        | Encoding::Vop2
        | Encoding::Vopc
        | Encoding::Vop3
        | Encoding::Vop3b
        | Encoding::Dpp
        | Encoding::Sdwa => {
            o.enc = Enc::Valu;
            o.op = match info.class {
                Class::Vopc => code_n,
                Class::Vop2 => 0x100 + code_n,
                Class::Vop1 => 0x140 + code_n,
                _ => code_n,
            };
            o.form = match inst.enc {
                Encoding::Vop3 | Encoding::Vop3b => VopForm::Vop3,
                Encoding::Dpp => VopForm::Dpp,
                Encoding::Sdwa => VopForm::Sdwa,
                _ => VopForm::E32,
            };
            let vop3 = o.form == VopForm::Vop3;
            // The destination: a VGPR number, or a scalar operand code (VOPC, readlane).
            o.dst = match inst.dst[0] {
                Operand::Vgpr { idx, .. } => idx as u16,
                Operand::Agpr { idx, .. } => AGPR_BASE + idx as u16,
                d => code(d, &mut lit),
            };
            if info.class == Class::Vopc {
                o.sdst = o.dst;
                if !vop3 {
                    o.dst = 0;
                }
            }
            if let Operand::Sreg { idx, .. } = inst.dst[1] {
                o.sdst = idx as u16;
            }
            let nsrc = if vop3 { 3 } else { 2 };
            for k in 0..nsrc {
                o.src[k] = code(inst.src[k], &mut lit);
            }
            match inst.mods {
                Mods::Vop3 {
                    abs,
                    neg,
                    clamp,
                    omod,
                    op_sel,
                } => {
                    o.abs = abs;
                    o.neg = neg;
                    o.clamp = clamp;
                    o.omod = omod;
                    o.opsel = op_sel;
                }
                Mods::Dpp {
                    ctrl,
                    row_mask,
                    bank_mask,
                    bound_ctrl,
                    abs,
                    neg,
                } => {
                    o.abs = abs;
                    o.neg = neg;
                    o.ext = u32::from(ctrl) << 8
                        | u32::from(bound_ctrl) << 19
                        | u32::from(bank_mask) << 24
                        | u32::from(row_mask) << 28;
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
                    o.abs = abs;
                    o.neg = neg;
                    o.clamp = clamp;
                    o.omod = omod;
                    o.ext = u32::from(dst_sel)
                        | u32::from(dst_unused) << 4
                        | u32::from(src0_sel) << 8
                        | u32::from(src1_sel) << 12
                        | u32::from(sext) << 16;
                }
                _ => {}
            }
            if info.flags & amdgpu_isa::flags::LITERAL != 0 {
                // v_madmk/v_madak/v_fmamk/v_fmaak: K is the literal, not an operand.
                if let Operand::Literal(k) = inst.src[2] {
                    lit = k;
                }
                o.src[2] = 0;
            }
            o.lit = lit;
            o.fast = fast_kind(inst, &o);
        }
        Encoding::Vop3p => {
            o.enc = Enc::Vop3p;
            o.op = code_n;
            o.dst = reg(inst.dst[0]);
            o.acc = is_agpr(inst.dst[0]);
            for k in 0..3 {
                o.src[k] = code(inst.src[k], &mut lit);
            }
            if let Mods::Vop3p {
                op_sel,
                op_sel_hi,
                neg_lo,
                neg_hi,
                clamp,
            } = inst.mods
            {
                o.opsel = op_sel;
                o.ext = u32::from(op_sel_hi);
                o.neg = neg_lo;
                o.neg_hi = neg_hi;
                o.clamp = clamp;
            }
        }
        Encoding::Mai => {
            o.enc = Enc::Mai;
            o.op = code_n;
            o.dst = reg(inst.dst[0]);
            for k in 0..3 {
                o.src[k] = code(inst.src[k], &mut lit);
            }
            if let Mods::Mai {
                cbsz,
                abid,
                blgp,
                acc_cd,
            } = inst.mods
            {
                o.neg_hi = cbsz;
                o.opsel = abid;
                o.neg = blgp;
                o.acc = acc_cd;
            }
        }
        Encoding::Ds => {
            o.enc = Enc::Ds;
            o.op = code_n;
            o.dst = reg(inst.dst[0]);
            o.src = [reg(inst.src[0]), reg(inst.src[1]), reg(inst.src[2])];
            o.acc = [inst.dst[0], inst.src[1], inst.src[2]]
                .into_iter()
                .any(is_agpr);
            if let Mods::Ds {
                offset0,
                offset1,
                gds,
            } = inst.mods
            {
                o.imm = i32::from(offset0);
                o.aux = u16::from(offset1);
                o.ext = u32::from(gds);
            }
            o.fast = ds_fast_kind(o.op, o.ext & 1 != 0);
        }
        Encoding::Flat | Encoding::Global | Encoding::Scratch => {
            o.enc = Enc::Flat;
            o.op = code_n;
            o.aux = match inst.enc {
                Encoding::Flat => 0,
                Encoding::Scratch => 1,
                _ => 2,
            };
            o.dst = reg(inst.dst[0]);
            o.src = [
                reg(inst.src[0]),
                reg(inst.src[1]),
                match inst.src[2] {
                    Operand::Sreg { idx, .. } => idx as u16,
                    _ => 0x7F,
                },
            ];
            o.neg_hi = u8::from(inst.src[0] == Operand::Off);
            o.acc = is_agpr(inst.dst[0]) || is_agpr(inst.src[1]);
            if let Mods::Flat {
                offset, glc, lds, ..
            } = inst.mods
            {
                o.imm = i32::from(offset);
                o.clamp = glc;
                o.ext = u32::from(lds);
            }
            o.fast = flat_fast_kind(o.op, o.aux, o.ext & 1 != 0);
        }
        // MTBUF runs on the MUBUF path at 0x100 + its opcode, dfmt/nfmt in `ext` [15:8].
        Encoding::Mubuf | Encoding::Mtbuf => {
            o.enc = Enc::Mubuf;
            o.op = code_n;
            let vdata = if inst.dst[0] != Operand::None {
                inst.dst[0]
            } else {
                inst.src[3]
            };
            o.dst = reg(vdata);
            o.src = [reg(inst.src[0]), reg(vdata), reg(inst.src[1])];
            o.sdst = code(inst.src[2], &mut lit);
            o.acc = is_agpr(vdata);
            if let Mods::Buf {
                offset,
                offen,
                idxen,
                glc,
                scc,
                lds,
                dfmt,
                nfmt,
                ..
            } = inst.mods
            {
                o.imm = i32::from(offset);
                o.ext = u32::from(offen)
                    | u32::from(idxen) << 1
                    | u32::from(glc) << 2
                    | u32::from(scc) << 3
                    | u32::from(lds) << 4;
                if inst.enc == Encoding::Mtbuf {
                    o.op = 0x100 + code_n;
                    o.ext |= u32::from(dfmt) << 8 | u32::from(nfmt) << 12;
                }
            }
        }
    }
    o.lit = lit;
    o
}
