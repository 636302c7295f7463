//! Field extraction for every gfx9 encoding. Bit layouts: `firmware-notes/isa-gfx9-encoding.md`.

use crate::ops_table::{flags, opcode_at, Lookup, LOOKUP};
use crate::{
    sreg, Class, DecodeError, Encoding, FloatConst, Inst, Mods, Opcode, Operand, Special, Target,
};

/// Source code of the SDWA marker in src0.
const SRC_SDWA: u16 = 0xF9;
/// Source code of the DPP marker in src0.
const SRC_DPP: u16 = 0xFA;
/// Source code of a literal dword.
const SRC_LITERAL: u16 = 0xFF;
/// `off` in a FLAT saddr field.
const SADDR_OFF: u32 = 0x7F;

#[inline]
fn bits(w: u32, lo: u32, n: u32) -> u32 {
    (w >> lo) & ((1u32 << n) - 1)
}

#[inline]
fn bit(w: u32, b: u32) -> bool {
    (w >> b) & 1 != 0
}

/// Decoding state shared by the operand helpers: the words and whether a literal was used.
struct Ctx<'a> {
    words: &'a [u32],
    /// Dwords of the instruction proper (the literal, if any, follows).
    base: u8,
    literal: bool,
}

impl Ctx<'_> {
    fn word0(&self) -> u32 {
        self.words.first().copied().unwrap_or(0)
    }
    /// A 9-bit (VOP) or 8-bit (SOP) source operand of `n` dwords.
    fn src(&mut self, v: u32, n: u8) -> Result<Operand, DecodeError> {
        let v = v as u16;
        Ok(match v {
            // LLVM (and the hardware) ignore the low bits of a misaligned SGPR tuple
            0..=127 => Operand::Sreg {
                idx: align(v as u8, n),
                n,
            },
            128..=192 => Operand::Int((v - 128) as i8),
            193..=208 => Operand::Int(-((v - 192) as i8)),
            235 => Operand::Special(Special::SharedBase),
            236 => Operand::Special(Special::SharedLimit),
            237 => Operand::Special(Special::PrivateBase),
            238 => Operand::Special(Special::PrivateLimit),
            239 => Operand::Special(Special::PopsExitingWaveId),
            240 => Operand::Float(FloatConst::Half),
            241 => Operand::Float(FloatConst::NegHalf),
            242 => Operand::Float(FloatConst::One),
            243 => Operand::Float(FloatConst::NegOne),
            244 => Operand::Float(FloatConst::Two),
            245 => Operand::Float(FloatConst::NegTwo),
            246 => Operand::Float(FloatConst::Four),
            247 => Operand::Float(FloatConst::NegFour),
            248 => Operand::Float(FloatConst::InvTwoPi),
            251 => Operand::Special(Special::Vccz),
            252 => Operand::Special(Special::Execz),
            253 => Operand::Special(Special::Scc),
            254 => Operand::Special(Special::LdsDirect),
            SRC_LITERAL => {
                self.literal = true;
                let i = usize::from(self.base);
                match self.words.get(i) {
                    Some(&l) => Operand::Literal(l),
                    None => {
                        return Err(DecodeError::Truncated {
                            need: self.base + 1,
                            have: self.words.len(),
                        })
                    }
                }
            }
            256..=511 => Operand::Vgpr {
                idx: (v - 256) as u8,
                n,
            },
            _ => {
                return Err(DecodeError::NotSupported {
                    what: "reserved source operand code",
                    word: self.word0(),
                })
            }
        })
    }
    /// A source that must not be a literal (VOP3, VOP3P, MAI: no literal on gfx9).
    fn src_nolit(&mut self, v: u32, n: u8) -> Result<Operand, DecodeError> {
        if v as u16 == SRC_LITERAL {
            return Err(DecodeError::NotSupported {
                what: "literal constant in a 64-bit VOP encoding (gfx10+ only)",
                word: self.word0(),
            });
        }
        self.src(v, n)
    }
}

fn need(words: &[u32], n: u8) -> Result<(), DecodeError> {
    if words.len() < usize::from(n) {
        Err(DecodeError::Truncated {
            need: n,
            have: words.len(),
        })
    } else {
        Ok(())
    }
}

fn find(table: &[u16], code: u32, enc: Encoding, word: u32) -> Result<Opcode, DecodeError> {
    table
        .get(code as usize)
        .copied()
        .and_then(opcode_at)
        .ok_or(DecodeError::UnknownOpcode {
            enc,
            opcode: code as u16,
            word,
        })
}

#[inline]
fn vgpr(idx: u32, n: u8) -> Operand {
    Operand::Vgpr { idx: idx as u8, n }
}

#[inline]
fn agpr(idx: u32, n: u8) -> Operand {
    Operand::Agpr { idx: idx as u8, n }
}

#[inline]
fn sgpr(idx: u32, n: u8) -> Operand {
    Operand::Sreg {
        idx: align(idx as u8, n),
        n,
    }
}

/// SGPR tuples are aligned: pairs to 2, wider to 4.
#[inline]
fn align(idx: u8, n: u8) -> u8 {
    match n {
        0 | 1 => idx,
        2 => idx & !1,
        _ => idx & !3,
    }
}

/// VGPR or AGPR by an `acc` bit.
#[inline]
fn vreg(acc: bool, idx: u32, n: u8) -> Operand {
    if acc {
        agpr(idx, n)
    } else {
        vgpr(idx, n)
    }
}

const VCC: Operand = Operand::Sreg {
    idx: sreg::VCC_LO,
    n: 2,
};

/// Decodes the instruction at `words[0]` for `target`; [`Inst::len`] says how many dwords it
/// used (literal included). Never panics; allocation-free.
pub fn decode(words: &[u32], target: Target) -> Result<Inst, DecodeError> {
    let w0 = *words
        .first()
        .ok_or(DecodeError::Truncated { need: 1, have: 0 })?;
    let lk = &LOOKUP[target.col()];
    let mut cx = Ctx {
        words,
        base: 1,
        literal: false,
    };
    let mut inst = Inst {
        op: Opcode::S_NOP,
        enc: Encoding::Sopp,
        len: 1,
        dst: [Operand::None; 2],
        src: [Operand::None; 4],
        mods: Mods::None,
        target,
    };
    if w0 >> 31 == 0 {
        vop_short(&mut cx, lk, w0, &mut inst)?;
    } else if w0 >> 30 == 0b10 {
        scalar(&mut cx, lk, w0, &mut inst)?;
    } else {
        match w0 >> 26 {
            0b110000 => smem(&mut cx, lk, w0, &mut inst)?,
            0b110100 => {
                if bits(w0, 23, 3) == 0b111 {
                    vop3p(&mut cx, lk, w0, &mut inst)?
                } else {
                    vop3(&mut cx, lk, w0, &mut inst)?
                }
            }
            0b110110 => ds(&mut cx, lk, w0, &mut inst)?,
            0b110111 => flat(&mut cx, lk, w0, &mut inst)?,
            0b111000 => mubuf(&mut cx, lk, w0, &mut inst, false)?,
            0b111010 => mubuf(&mut cx, lk, w0, &mut inst, true)?,
            0b110101 => {
                return Err(DecodeError::NotSupported {
                    what: "VINTRP encoding",
                    word: w0,
                })
            }
            0b110001 => {
                return Err(DecodeError::NotSupported {
                    what: "EXP encoding",
                    word: w0,
                })
            }
            0b111100 => {
                return Err(DecodeError::NotSupported {
                    what: "MIMG encoding",
                    word: w0,
                })
            }
            _ => {
                return Err(DecodeError::NotSupported {
                    what: "unknown encoding",
                    word: w0,
                })
            }
        }
    }
    inst.len = cx.base + u8::from(cx.literal);
    Ok(inst)
}

fn scalar(cx: &mut Ctx<'_>, lk: &Lookup, w0: u32, inst: &mut Inst) -> Result<(), DecodeError> {
    if w0 >> 28 == 0b1011 {
        match bits(w0, 23, 5) {
            0b11101 => {
                let op = find(&lk.sop1, bits(w0, 8, 8), Encoding::Sop1, w0)?;
                let w = op.info().widths;
                inst.op = op;
                inst.enc = Encoding::Sop1;
                if w[0] > 0 {
                    inst.dst[0] = sgpr(bits(w0, 16, 7), w[0]);
                }
                if w[2] > 0 {
                    inst.src[0] = cx.src(bits(w0, 0, 8), w[2])?;
                }
            }
            0b11110 => {
                let op = find(&lk.sopc, bits(w0, 16, 7), Encoding::Sopc, w0)?;
                let w = op.info().widths;
                inst.op = op;
                inst.enc = Encoding::Sopc;
                inst.src[0] = cx.src(bits(w0, 0, 8), w[2].max(1))?;
                if op == Opcode::S_SET_GPR_IDX_ON {
                    // ssrc1 is the 4-bit gpr_idx mode, not an operand
                    inst.src[1] = Operand::Literal(bits(w0, 8, 8));
                } else {
                    inst.src[1] = cx.src(bits(w0, 8, 8), w[3].max(1))?;
                }
            }
            0b11111 => {
                let op = find(&lk.sopp, bits(w0, 16, 7), Encoding::Sopp, w0)?;
                inst.op = op;
                inst.enc = Encoding::Sopp;
                inst.mods = Mods::Simm16(w0 as u16 as i16);
            }
            code => {
                let op = find(&lk.sopk, code, Encoding::Sopk, w0)?;
                let i = op.info();
                inst.op = op;
                inst.enc = Encoding::Sopk;
                inst.mods = Mods::Simm16(w0 as u16 as i16);
                let n = match op {
                    Opcode::S_CALL_B64 | Opcode::S_CBRANCH_I_FORK => 2,
                    _ => i.widths[0].max(1),
                };
                inst.dst[0] = sgpr(bits(w0, 16, 7), n);
                if i.flags & flags::LITERAL != 0 {
                    inst.src[0] = cx.src(u32::from(SRC_LITERAL), 1)?;
                }
            }
        }
    } else {
        let op = find(&lk.sop2, bits(w0, 23, 7), Encoding::Sop2, w0)?;
        let w = op.info().widths;
        inst.op = op;
        inst.enc = Encoding::Sop2;
        if w[0] > 0 {
            inst.dst[0] = sgpr(bits(w0, 16, 7), w[0]);
        }
        inst.src[0] = cx.src(bits(w0, 0, 8), w[2].max(1))?;
        inst.src[1] = cx.src(bits(w0, 8, 8), w[3].max(1))?;
    }
    Ok(())
}

fn smem(cx: &mut Ctx<'_>, lk: &Lookup, w0: u32, inst: &mut Inst) -> Result<(), DecodeError> {
    need(cx.words, 2)?;
    cx.base = 2;
    let w1 = cx.words[1];
    let op = find(&lk.smem, bits(w0, 18, 8), Encoding::Smem, w0)?;
    let i = op.info();
    inst.op = op;
    inst.enc = Encoding::Smem;
    let imm = bit(w0, 17);
    let soe = bit(w0, 14);
    let raw = bits(w1, 0, 21);
    let offset = ((raw << 11) as i32) >> 11;
    if i.widths[2] > 0 {
        inst.src[0] = sgpr(bits(w0, 0, 6) << 1, i.widths[2]);
    }
    if soe {
        inst.src[1] = sgpr(bits(w1, 25, 7), 1);
    } else if !imm {
        inst.src[1] = sgpr(raw & 0x7F, 1);
    }
    if i.widths[0] > 0 {
        let sdata = sgpr(bits(w0, 6, 7), i.widths[0]);
        if i.flags & flags::STORE != 0 {
            inst.src[2] = sdata;
        } else {
            inst.dst[0] = sdata;
        }
    } else if op == Opcode::S_ATC_PROBE || op == Opcode::S_ATC_PROBE_BUFFER {
        inst.src[2] = Operand::Int(bits(w0, 6, 7) as i8);
    }
    inst.mods = Mods::Smem {
        offset: if imm { offset } else { 0 },
        imm,
        soe,
        glc: bit(w0, 16),
    };
    Ok(())
}

/// VOP1, VOP2, VOPC and their DPP/SDWA forms.
fn vop_short(cx: &mut Ctx<'_>, lk: &Lookup, w0: u32, inst: &mut Inst) -> Result<(), DecodeError> {
    let top = bits(w0, 25, 6);
    let (op, enc) = match top {
        0x3F => (
            find(&lk.vop1, bits(w0, 9, 8), Encoding::Vop1, w0)?,
            Encoding::Vop1,
        ),
        0x3E => (
            find(&lk.vopc, bits(w0, 17, 8), Encoding::Vopc, w0)?,
            Encoding::Vopc,
        ),
        code => (find(&lk.vop2, code, Encoding::Vop2, w0)?, Encoding::Vop2),
    };
    let i = op.info();
    let w = i.widths;
    inst.op = op;
    inst.enc = enc;
    let vdst = bits(w0, 17, 8);
    let vsrc1 = bits(w0, 9, 8);
    let src0 = bits(w0, 0, 9) as u16;
    // destination
    match enc {
        Encoding::Vopc => inst.dst[0] = VCC,
        _ if w[0] > 0 => {
            inst.dst[0] = if i.flags & flags::SCALAR_DST != 0 {
                sgpr(vdst, w[0])
            } else {
                vreg(i.flags & flags::ACC_DST != 0, vdst, w[0])
            }
        }
        _ => {}
    }
    if enc == Encoding::Vop2 && i.flags & flags::SDST != 0 {
        inst.dst[1] = VCC;
    }
    let has_src1 = enc != Encoding::Vop1;
    if has_src1 {
        inst.src[1] = vgpr(vsrc1, w[3].max(1));
    }
    if i.flags & flags::CARRY_IN != 0 {
        inst.src[2] = VCC;
    }
    match src0 {
        SRC_SDWA => {
            need(cx.words, 2)?;
            cx.base = 2;
            let d = cx.words[1];
            inst.enc = Encoding::Sdwa;
            let s0 = bits(d, 0, 8);
            inst.src[0] = if bit(d, 23) {
                cx.src(s0, w[2].max(1))?
            } else {
                vgpr(s0, w[2].max(1))
            };
            if has_src1 && bit(d, 31) {
                inst.src[1] = cx.src(vsrc1, w[3].max(1))?;
            }
            if cx.literal {
                return Err(DecodeError::NotSupported {
                    what: "literal in SDWA",
                    word: w0,
                });
            }
            let vopc = enc == Encoding::Vopc;
            if vopc && bit(d, 15) {
                inst.dst[0] = cx.src(bits(d, 8, 7), 2)?;
            }
            inst.mods = Mods::Sdwa {
                dst_sel: if vopc { 6 } else { bits(d, 8, 3) as u8 },
                dst_unused: if vopc { 0 } else { bits(d, 11, 2) as u8 },
                clamp: bit(d, 13),
                omod: if vopc { 0 } else { bits(d, 14, 2) as u8 },
                src0_sel: bits(d, 16, 3) as u8,
                src1_sel: bits(d, 24, 3) as u8,
                sext: u8::from(bit(d, 19)) | u8::from(bit(d, 27)) << 1,
                neg: u8::from(bit(d, 20)) | u8::from(bit(d, 28)) << 1,
                abs: u8::from(bit(d, 21)) | u8::from(bit(d, 29)) << 1,
            };
        }
        SRC_DPP => {
            need(cx.words, 2)?;
            cx.base = 2;
            let d = cx.words[1];
            inst.enc = Encoding::Dpp;
            inst.src[0] = vgpr(bits(d, 0, 8), w[2].max(1));
            inst.mods = Mods::Dpp {
                ctrl: bits(d, 8, 9) as u16,
                bound_ctrl: bit(d, 19),
                neg: u8::from(bit(d, 20)) | u8::from(bit(d, 22)) << 1,
                abs: u8::from(bit(d, 21)) | u8::from(bit(d, 23)) << 1,
                bank_mask: bits(d, 24, 4) as u8,
                row_mask: bits(d, 28, 4) as u8,
            };
        }
        _ => {
            if w[2] > 0 || enc != Encoding::Vop1 {
                inst.src[0] = cx.src(u32::from(src0), w[2].max(1))?;
            }
            if i.flags & flags::LITERAL != 0 {
                // v_madmk: src0 * K + vsrc1; v_madak: src0 * vsrc1 + K. K is `src[2]`.
                let k = cx.src(u32::from(SRC_LITERAL), 1)?;
                inst.src[2] = k;
            }
            if i.flags & flags::ACC_SRC0 != 0 {
                if let Operand::Vgpr { idx, n } = inst.src[0] {
                    inst.src[0] = Operand::Agpr { idx, n };
                }
            }
        }
    }
    Ok(())
}

fn vop3(cx: &mut Ctx<'_>, lk: &Lookup, w0: u32, inst: &mut Inst) -> Result<(), DecodeError> {
    need(cx.words, 2)?;
    cx.base = 2;
    let w1 = cx.words[1];
    let op = find(&lk.vop3, bits(w0, 16, 10), Encoding::Vop3, w0)?;
    let i = op.info();
    let w = i.widths;
    inst.op = op;
    let vdst = bits(w0, 0, 8);
    let vop3b = i.flags & flags::SDST != 0;
    inst.enc = if vop3b {
        Encoding::Vop3b
    } else {
        Encoding::Vop3
    };
    if i.class == Class::Vopc {
        inst.dst[0] = cx.src(vdst, 2)?;
    } else if w[0] > 0 {
        inst.dst[0] = if i.flags & flags::SCALAR_DST != 0 {
            sgpr(vdst, w[0])
        } else {
            vreg(i.flags & flags::ACC_DST != 0, vdst, w[0])
        };
    }
    if vop3b {
        inst.dst[1] = cx.src(bits(w0, 8, 7), 2)?;
    }
    let carry = i.flags & flags::CARRY_IN != 0;
    let n2 = if carry { 2 } else { w[4] };
    for (k, n) in [w[2], w[3], n2].into_iter().enumerate() {
        if n > 0 {
            let f = bits(w1, 9 * k as u32, 9);
            inst.src[k] = cx.src_nolit(f, n)?;
        }
    }
    if i.flags & flags::ACC_SRC0 != 0 {
        if let Operand::Vgpr { idx, n } = inst.src[0] {
            inst.src[0] = Operand::Agpr { idx, n };
        }
    }
    inst.mods = Mods::Vop3 {
        abs: if vop3b { 0 } else { bits(w0, 8, 3) as u8 },
        neg: bits(w1, 29, 3) as u8,
        clamp: bit(w0, 15),
        omod: bits(w1, 27, 2) as u8,
        op_sel: if vop3b { 0 } else { bits(w0, 11, 4) as u8 },
    };
    Ok(())
}

fn vop3p(cx: &mut Ctx<'_>, lk: &Lookup, w0: u32, inst: &mut Inst) -> Result<(), DecodeError> {
    need(cx.words, 2)?;
    cx.base = 2;
    let w1 = cx.words[1];
    let op = find(&lk.vop3p, bits(w0, 16, 7), Encoding::Vop3p, w0)?;
    let i = op.info();
    let w = i.widths;
    inst.op = op;
    let vdst = bits(w0, 0, 8);
    if i.class == Class::Mai {
        inst.enc = Encoding::Mai;
        let acc_cd = bit(w0, 15);
        inst.dst[0] = vreg(acc_cd, vdst, w[0]);
        for (k, n) in [w[2], w[3], w[4]].into_iter().enumerate() {
            if n == 0 {
                continue;
            }
            let f = bits(w1, 9 * k as u32, 9);
            let mut o = cx.src_nolit(f, n)?;
            let acc = match k {
                0 => bit(w1, 27),
                1 => bit(w1, 28),
                // SMFMAC src2 is the sparsity index VGPR, never C
                _ => acc_cd && !op.info().names[1].starts_with("v_smfmac"),
            };
            if let (true, Operand::Vgpr { idx, n }) = (acc, o) {
                o = Operand::Agpr { idx, n };
            }
            inst.src[k] = o;
        }
        inst.mods = Mods::Mai {
            cbsz: bits(w0, 8, 3) as u8,
            abid: bits(w0, 11, 4) as u8,
            blgp: bits(w1, 29, 3) as u8,
            acc_cd,
        };
        return Ok(());
    }
    inst.enc = Encoding::Vop3p;
    inst.dst[0] = vreg(i.flags & flags::ACC_DST != 0, vdst, w[0].max(1));
    for (k, n) in [w[2], w[3], w[4]].into_iter().enumerate() {
        if n > 0 {
            let f = bits(w1, 9 * k as u32, 9);
            inst.src[k] = cx.src_nolit(f, n)?;
        }
    }
    if i.flags & flags::ACC_SRC0 != 0 {
        if let Operand::Vgpr { idx, n } = inst.src[0] {
            inst.src[0] = Operand::Agpr { idx, n };
        }
    }
    inst.mods = Mods::Vop3p {
        op_sel: bits(w0, 11, 3) as u8,
        op_sel_hi: bits(w1, 27, 2) as u8 | (u8::from(bit(w0, 14)) << 2),
        neg_lo: bits(w1, 29, 3) as u8,
        neg_hi: bits(w0, 8, 3) as u8,
        clamp: bit(w0, 15),
    };
    Ok(())
}

fn ds(cx: &mut Ctx<'_>, lk: &Lookup, w0: u32, inst: &mut Inst) -> Result<(), DecodeError> {
    need(cx.words, 2)?;
    cx.base = 2;
    let w1 = cx.words[1];
    let op = find(&lk.ds, bits(w0, 17, 8), Encoding::Ds, w0)?;
    let w = op.info().widths;
    inst.op = op;
    inst.enc = Encoding::Ds;
    let acc = bit(w0, 25);
    if w[0] > 0 {
        inst.dst[0] = vreg(acc, bits(w1, 24, 8), w[0]);
    }
    if w[2] > 0 {
        inst.src[0] = vgpr(bits(w1, 0, 8), w[2]);
    }
    if w[3] > 0 {
        inst.src[1] = vreg(acc, bits(w1, 8, 8), w[3]);
    }
    if w[4] > 0 {
        inst.src[2] = vreg(acc, bits(w1, 16, 8), w[4]);
    }
    inst.mods = Mods::Ds {
        offset0: bits(w0, 0, 8) as u8,
        offset1: bits(w0, 8, 8) as u8,
        gds: bit(w0, 16),
    };
    Ok(())
}

fn flat(cx: &mut Ctx<'_>, lk: &Lookup, w0: u32, inst: &mut Inst) -> Result<(), DecodeError> {
    need(cx.words, 2)?;
    cx.base = 2;
    let w1 = cx.words[1];
    let code = bits(w0, 18, 7);
    let (table, enc) = match bits(w0, 14, 2) {
        0 => (&lk.flat[..], Encoding::Flat),
        1 => (&lk.scratch[..], Encoding::Scratch),
        2 => (&lk.global[..], Encoding::Global),
        _ => {
            return Err(DecodeError::NotSupported {
                what: "FLAT seg=3 (reserved)",
                word: w0,
            })
        }
    };
    let op = find(table, code, enc, w0)?;
    let w = op.info().widths;
    inst.op = op;
    inst.enc = enc;
    let acc = bit(w1, 23);
    let saddr = bits(w1, 16, 7);
    let off13 = ((bits(w0, 0, 13) << 19) as i32 >> 19) as i16;
    let offset = if enc == Encoding::Flat {
        bits(w0, 0, 12) as i16
    } else {
        off13
    };
    let gfx94x = inst.target.is_gfx94x();
    // which address parts are present
    let (vaddr_n, saddr_op) = match enc {
        Encoding::Flat => (2, Operand::None),
        Encoding::Global => {
            if saddr == SADDR_OFF {
                (2, Operand::Off)
            } else {
                (1, cx.src(saddr, 2)?)
            }
        }
        _ => {
            let s = if saddr == SADDR_OFF {
                Operand::Off
            } else {
                cx.src(saddr, 1)?
            };
            // gfx94x: the `sve` bit (13) says vaddr is used; gfx90a: vaddr iff saddr is off
            let v = if gfx94x {
                bit(w0, 13)
            } else {
                saddr == SADDR_OFF
            };
            (if v { 1 } else { 0 }, s)
        }
    };
    inst.src[0] = if vaddr_n > 0 {
        vgpr(bits(w1, 0, 8), vaddr_n)
    } else {
        Operand::Off
    };
    if w[3] > 0 {
        inst.src[1] = vreg(acc, bits(w1, 8, 8), w[3]);
    }
    inst.src[2] = saddr_op;
    if w[0] > 0 {
        inst.dst[0] = vreg(acc, bits(w1, 24, 8), w[0]);
    } else if op.info().flags & flags::ATOMIC != 0 && bit(w0, 16) {
        // glc/sc0 atomics return the old value: as wide as data, half of it for cmpswap
        let n = if op.name(inst.target).contains("cmpswap") {
            w[3] / 2
        } else {
            w[3]
        };
        inst.dst[0] = vreg(acc, bits(w1, 24, 8), n.max(1));
    }
    let lds = !(gfx94x && enc == Encoding::Scratch) && bit(w0, 13);
    if lds {
        // loads to LDS have no VGPR destination
        inst.dst[0] = Operand::None;
    }
    inst.mods = Mods::Flat {
        offset,
        glc: bit(w0, 16),
        slc: bit(w0, 17),
        scc: bit(w0, 25),
        lds,
    };
    Ok(())
}

fn mubuf(
    cx: &mut Ctx<'_>,
    lk: &Lookup,
    w0: u32,
    inst: &mut Inst,
    typed: bool,
) -> Result<(), DecodeError> {
    need(cx.words, 2)?;
    cx.base = 2;
    let w1 = cx.words[1];
    let (op, enc) = if typed {
        (
            find(&lk.mtbuf, bits(w0, 15, 4), Encoding::Mtbuf, w0)?,
            Encoding::Mtbuf,
        )
    } else {
        (
            find(&lk.mubuf, bits(w0, 18, 7), Encoding::Mubuf, w0)?,
            Encoding::Mubuf,
        )
    };
    let i = op.info();
    let w = i.widths;
    inst.op = op;
    inst.enc = enc;
    let offen = bit(w0, 12);
    let idxen = bit(w0, 13);
    let glc = bit(w0, 14);
    let acc = bit(w1, 23);
    let n = u8::from(offen) + u8::from(idxen);
    // cache control ops (buffer_wbl2, buffer_inv, buffer_wbinvl1*) have no operands
    if w != [0; 5] {
        inst.src[0] = if n > 0 {
            vgpr(bits(w1, 0, 8), n)
        } else {
            Operand::Off
        };
        inst.src[1] = sgpr(bits(w1, 16, 5) << 2, 4);
        inst.src[2] = cx.src(bits(w1, 24, 8), 1)?;
    }
    if cx.literal {
        return Err(DecodeError::NotSupported {
            what: "literal soffset in MUBUF",
            word: w0,
        });
    }
    // loads to LDS (`lds` bit) have no VGPR data
    if w[0] > 0 && (typed || !bit(w0, 16)) {
        let vdata = vreg(acc, bits(w1, 8, 8), w[0]);
        let f = i.flags;
        if f & flags::LOAD != 0 {
            inst.dst[0] = vdata;
        } else {
            inst.src[3] = vdata;
            if f & flags::ATOMIC != 0 && glc {
                let n = if op.name(inst.target).contains("cmpswap") {
                    w[0] / 2
                } else {
                    w[0]
                };
                inst.dst[0] = vreg(acc, bits(w1, 8, 8), n.max(1));
            }
        }
    }
    inst.mods = Mods::Buf {
        offset: bits(w0, 0, 12) as u16,
        offen,
        idxen,
        glc,
        slc: if typed { bit(w1, 22) } else { bit(w0, 17) },
        scc: if typed { false } else { bit(w0, 15) },
        lds: !typed && bit(w0, 16),
        dfmt: if typed { bits(w0, 19, 4) as u8 } else { 0 },
        nfmt: if typed { bits(w0, 23, 3) as u8 } else { 0 },
    };
    Ok(())
}
