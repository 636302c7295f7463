//! Field extraction of the gfx9 (CDNA2/CDNA3) instruction encodings into the interpreter's
//! pre-decoded [`Op`] form.
//!
//! INTERIM: this is the bit-field split of each encoding only (which opcode number, which
//! operand fields), not a decoder with mnemonics; it is to be replaced by a lowering from
//! `amdgpu_isa::decode` once the shared decoder crate lands. Opcode semantics live in
//! `wave.rs`, keyed by the encoding's opcode number (numbers checked against
//! `llvm-mc-19 -show-encoding` for gfx90a and gfx942; see `firmware-notes/isa-gfx9.md`).

/// Instruction encoding class.
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
    Ds,
    Flat,
    Mubuf,
    /// Not decodable (reserved encoding or bits).
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

/// One pre-decoded instruction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Op {
    pub(crate) enc: Enc,
    pub(crate) form: VopForm,
    pub(crate) op: u16,
    /// Length in dwords (including a literal).
    pub(crate) len: u8,
    /// Destination: SGPR/special operand code (scalar), VGPR number (vector), DS/FLAT vdst.
    pub(crate) dst: u16,
    /// VOP3B / VOPC-in-VOP3 scalar destination (operand code).
    pub(crate) sdst: u16,
    /// Source operand codes (0..=255 scalar/inline/literal, 256.. VGPR). DS: addr, data0,
    /// data1 as VGPR numbers; FLAT: addr, data, saddr.
    pub(crate) src: [u16; 3],
    /// 32-bit literal (operand code 255).
    pub(crate) lit: u32,
    /// SOPK/SOPP simm16, SMEM/FLAT/DS offset (signed where the encoding is).
    pub(crate) imm: i32,
    /// DS offset1; FLAT segment (0 flat, 1 scratch, 2 global).
    pub(crate) aux: u16,
    pub(crate) abs: u8,
    pub(crate) neg: u8,
    pub(crate) clamp: bool,
    pub(crate) omod: u8,
    pub(crate) opsel: u8,
    /// VOP3P op_sel_hi / neg_hi; SMEM: soffset enable bit; DPP/SDWA control dword.
    pub(crate) ext: u32,
    /// VOP3P neg_hi.
    pub(crate) neg_hi: u8,
    /// Destination is an AccVGPR (gfx90a+ `acc` bit on DS/FLAT, MFMA acc_cd).
    pub(crate) acc: bool,
    /// Raw words, for error messages.
    pub(crate) words: [u32; 3],
}

impl Op {
    fn new(enc: Enc, op: u16, len: u8, words: [u32; 3]) -> Op {
        Op {
            enc,
            form: VopForm::E32,
            op,
            len,
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
        }
    }
}

const LITERAL: u16 = 255;
const SDWA: u16 = 249;
const DPP: u16 = 250;

/// Splits the instruction at `words[0..]` (up to 3 dwords available). Always returns an op
/// (an [`Enc::Invalid`] one of length 1 when the bits are not an encoding).
pub(crate) fn split(words: &[u32]) -> Op {
    let w0 = words.first().copied().unwrap_or(0);
    let w1 = words.get(1).copied().unwrap_or(0);
    let w2 = words.get(2).copied().unwrap_or(0);
    let raw = [w0, w1, w2];
    let mut o;
    // A trailing literal follows a 1-dword instruction whose source code is 255.
    let lit1 = |o: &mut Op, n: usize| {
        if o.src[..n].contains(&LITERAL) {
            o.lit = w1;
            o.len = 2;
        }
    };
    match w0 >> 25 {
        0x3F => {
            // VOP1
            let op = ((w0 >> 9) & 0xFF) as u16;
            o = Op::new(Enc::Valu, 0x140 + op, 1, raw);
            o.src = [(w0 & 0x1FF) as u16, 0, 0];
            o.dst = ((w0 >> 17) & 0xFF) as u16;
            vop_ext(&mut o, w1, false);
            if o.form == VopForm::E32 {
                lit1(&mut o, 1);
            }
            return o;
        }
        0x3E => {
            // VOPC
            let op = ((w0 >> 17) & 0xFF) as u16;
            o = Op::new(Enc::Valu, op, 1, raw);
            o.src = [(w0 & 0x1FF) as u16, 256 + ((w0 >> 9) & 0xFF) as u16, 0];
            o.sdst = 106; // VCC
            vop_ext(&mut o, w1, false);
            if o.form == VopForm::E32 {
                lit1(&mut o, 1);
            }
            return o;
        }
        _ => {}
    }
    if w0 >> 31 == 0 {
        // VOP2
        let op = ((w0 >> 25) & 0x3F) as u16;
        o = Op::new(Enc::Valu, 0x100 + op, 1, raw);
        o.src = [(w0 & 0x1FF) as u16, 256 + ((w0 >> 9) & 0xFF) as u16, 0];
        o.dst = ((w0 >> 17) & 0xFF) as u16;
        // v_madmk/v_madak/v_fmamk/v_fmaak carry a literal constant as well.
        let k = matches!(op, 0x17 | 0x18 | 0x24 | 0x25);
        vop_ext(&mut o, w1, k);
        if !matches!(o.form, VopForm::Sdwa | VopForm::Dpp) {
            lit1(&mut o, 1);
        }
        return o;
    }
    match w0 >> 23 {
        0x17D => {
            o = Op::new(Enc::Sop1, ((w0 >> 8) & 0xFF) as u16, 1, raw);
            o.dst = ((w0 >> 16) & 0x7F) as u16;
            o.src[0] = (w0 & 0xFF) as u16;
            lit1(&mut o, 1);
            return o;
        }
        0x17E => {
            o = Op::new(Enc::Sopc, ((w0 >> 16) & 0x7F) as u16, 1, raw);
            o.src = [(w0 & 0xFF) as u16, ((w0 >> 8) & 0xFF) as u16, 0];
            lit1(&mut o, 2);
            return o;
        }
        0x17F => {
            o = Op::new(Enc::Sopp, ((w0 >> 16) & 0x7F) as u16, 1, raw);
            o.imm = (w0 & 0xFFFF) as u16 as i16 as i32;
            return o;
        }
        _ => {}
    }
    match w0 >> 28 {
        0xB => {
            let op = ((w0 >> 23) & 0x1F) as u16;
            o = Op::new(Enc::Sopk, op, 1, raw);
            o.dst = ((w0 >> 16) & 0x7F) as u16;
            o.imm = (w0 & 0xFFFF) as i32;
            if op == 0x14 {
                // s_setreg_imm32_b32
                o.lit = w1;
                o.len = 2;
            }
            return o;
        }
        0x8 | 0x9 => {
            o = Op::new(Enc::Sop2, ((w0 >> 23) & 0x7F) as u16, 1, raw);
            o.dst = ((w0 >> 16) & 0x7F) as u16;
            o.src = [(w0 & 0xFF) as u16, ((w0 >> 8) & 0xFF) as u16, 0];
            lit1(&mut o, 2);
            return o;
        }
        _ => {}
    }
    match w0 >> 26 {
        0x30 => {
            // SMEM
            o = Op::new(Enc::Smem, ((w0 >> 18) & 0xFF) as u16, 2, raw);
            o.dst = ((w0 >> 6) & 0x7F) as u16;
            o.src[0] = ((w0 & 0x3F) << 1) as u16;
            let imm = (w0 >> 17) & 1 != 0;
            let soe = (w0 >> 14) & 1 != 0;
            o.src[1] = (w1 >> 25) as u16; // soffset (SGPR) when soe or !imm
            o.imm = if imm {
                // 21-bit signed byte offset.
                ((w1 & 0x1F_FFFF) << 11) as i32 >> 11
            } else {
                0
            };
            o.ext = u32::from(soe) | (u32::from(!imm) << 1);
            if !imm {
                // The offset is an SGPR number in the low bits.
                o.src[1] = (w1 & 0xFF) as u16;
            }
            o.clamp = (w0 >> 16) & 1 != 0; // glc
            return o;
        }
        0x34 => {
            if (w0 >> 23) & 7 == 7 {
                // VOP3P
                o = Op::new(Enc::Vop3p, ((w0 >> 16) & 0x7F) as u16, 2, raw);
                o.dst = (w0 & 0xFF) as u16;
                o.neg_hi = ((w0 >> 8) & 7) as u8;
                o.opsel = ((w0 >> 11) & 7) as u8;
                o.ext = ((w0 >> 14) & 1) << 2 | ((w1 >> 27) & 3);
                o.clamp = (w0 >> 15) & 1 != 0;
                o.src = [
                    (w1 & 0x1FF) as u16,
                    ((w1 >> 9) & 0x1FF) as u16,
                    ((w1 >> 18) & 0x1FF) as u16,
                ];
                o.neg = (w1 >> 29) as u8;
                // MFMA: bit 15 is acc_cd (C/D are AccVGPRs); bits 59/60 (w1 bits 27/28)
                // are acc for A/B, kept in ext.
                if o.src.contains(&LITERAL) {
                    o.lit = w2;
                    o.len = 3;
                }
                return o;
            }
            let op = ((w0 >> 16) & 0x3FF) as u16;
            o = Op::new(Enc::Valu, op, 2, raw);
            o.form = VopForm::Vop3;
            o.dst = (w0 & 0xFF) as u16;
            o.src = [
                (w1 & 0x1FF) as u16,
                ((w1 >> 9) & 0x1FF) as u16,
                ((w1 >> 18) & 0x1FF) as u16,
            ];
            o.neg = (w1 >> 29) as u8;
            o.omod = ((w1 >> 27) & 3) as u8;
            o.clamp = (w0 >> 15) & 1 != 0;
            if is_vop3b(op) {
                o.sdst = ((w0 >> 8) & 0x7F) as u16;
            } else {
                o.abs = ((w0 >> 8) & 7) as u8;
                o.opsel = ((w0 >> 11) & 0xF) as u8;
                // VOPC in VOP3: the SGPR destination is the vdst field.
                o.sdst = (w0 & 0xFF) as u16;
            }
            if o.src.contains(&LITERAL) {
                o.lit = w2;
                o.len = 3;
            }
            return o;
        }
        0x36 => {
            o = Op::new(Enc::Ds, ((w0 >> 17) & 0xFF) as u16, 2, raw);
            o.imm = (w0 & 0xFF) as i32;
            o.aux = ((w0 >> 8) & 0xFF) as u16;
            o.acc = (w0 >> 25) & 1 != 0;
            o.ext = (w0 >> 16) & 1; // gds
            o.src = [
                (w1 & 0xFF) as u16,
                ((w1 >> 8) & 0xFF) as u16,
                ((w1 >> 16) & 0xFF) as u16,
            ];
            o.dst = (w1 >> 24) as u16;
            return o;
        }
        0x37 => {
            o = Op::new(Enc::Flat, ((w0 >> 18) & 0x7F) as u16, 2, raw);
            let seg = ((w0 >> 14) & 3) as u16;
            o.aux = seg;
            o.imm = if seg == 0 {
                (w0 & 0xFFF) as i32
            } else {
                ((w0 & 0x1FFF) << 19) as i32 >> 19
            };
            o.clamp = (w0 >> 16) & 1 != 0; // glc / sc0
            o.ext = (w0 >> 13) & 1; // lds
            o.src = [
                (w1 & 0xFF) as u16,
                ((w1 >> 8) & 0xFF) as u16,
                ((w1 >> 16) & 0x7F) as u16,
            ];
            o.acc = (w1 >> 23) & 1 != 0;
            o.dst = (w1 >> 24) as u16;
            return o;
        }
        0x38 => {
            o = Op::new(Enc::Mubuf, ((w0 >> 18) & 0x7F) as u16, 2, raw);
            o.imm = (w0 & 0xFFF) as i32;
            // offen (12), idxen (13), glc (14), lds (16)
            o.ext = (w0 >> 12) & 0x1F;
            o.src = [
                (w1 & 0xFF) as u16,
                ((w1 >> 8) & 0xFF) as u16,
                (((w1 >> 16) & 0x1F) << 2) as u16,
            ];
            o.sdst = (w1 >> 24) as u16; // soffset
            o.acc = (w1 >> 23) & 1 != 0;
            o.dst = ((w1 >> 8) & 0xFF) as u16; // vdata
            return o;
        }
        _ => {}
    }
    Op::new(Enc::Invalid, 0, 1, raw)
}

/// VOP3B opcodes (scalar carry/condition destination instead of abs/opsel).
fn is_vop3b(op: u16) -> bool {
    matches!(op, 0x119..=0x11E | 0x1E0 | 0x1E1 | 0x1E8 | 0x1E9)
}

/// Handles the SDWA/DPP extension dword of a VOP1/VOP2/VOPC.
fn vop_ext(o: &mut Op, w1: u32, k_literal: bool) {
    match o.src[0] {
        SDWA => {
            o.form = VopForm::Sdwa;
            o.len = 2;
            o.ext = w1;
            // src0 is a VGPR unless the S0 bit (23) selects an SGPR.
            o.src[0] = if (w1 >> 23) & 1 != 0 {
                (w1 & 0xFF) as u16
            } else {
                256 + (w1 & 0xFF) as u16
            };
            if (w1 >> 31) & 1 != 0 {
                o.src[1] -= 256;
            }
        }
        DPP => {
            o.form = VopForm::Dpp;
            o.len = 2;
            o.ext = w1;
            o.neg = (((w1 >> 20) & 1) | ((w1 >> 22) & 1) << 1) as u8;
            o.abs = (((w1 >> 21) & 1) | ((w1 >> 23) & 1) << 1) as u8;
            o.src[0] = 256 + (w1 & 0xFF) as u16;
        }
        _ => {
            if k_literal {
                o.lit = w1;
                o.len = 2;
            }
        }
    }
}
