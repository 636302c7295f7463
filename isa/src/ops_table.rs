//! The opcode table: [`Opcode`] and its rows, generated into `ops.rs` by
//! `isa/gen/gen_table.py` (from a probe of llvm-mc-19's disassembler, see
//! `firmware-notes/isa-gfx9-encoding.md`), plus the per-target lookup arrays built from it at
//! compile time.

use crate::{Class, Target};

/// "No opcode on this target" in the table.
pub(crate) const NONE: u16 = 0xFFFF;

/// Flag bits of [`OpInfo::flags`].
pub mod flags {
    /// Changes the program counter (branches, `s_setpc`, `s_swappc`, `s_call`).
    pub const BRANCH: u32 = 1 << 0;
    /// Memory read.
    pub const LOAD: u32 = 1 << 1;
    /// Memory write.
    pub const STORE: u32 = 1 << 2;
    /// Memory read-modify-write.
    pub const ATOMIC: u32 = 1 << 3;
    /// DS atomic returning the old value (`_rtn`).
    pub const RETURNS: u32 = 1 << 4;
    /// Destination is an AGPR (`v_accvgpr_write`, `v_accvgpr_mov`).
    pub const ACC_DST: u32 = 1 << 5;
    /// src0 is an AGPR (`v_accvgpr_read`, `v_accvgpr_mov`).
    pub const ACC_SRC0: u32 = 1 << 6;
    /// Takes a 32-bit literal after the instruction word (`s_setreg_imm32_b32`).
    pub const LITERAL: u32 = 1 << 7;
    /// Has a scalar carry-out/condition destination in VOP3 (VOP3B layout).
    pub const SDST: u32 = 1 << 8;
    /// Reads a carry-in/condition: VCC in `_e32`, an SGPR pair as src2 in `_e64`.
    pub const CARRY_IN: u32 = 1 << 9;
    /// VOP destination field names an SGPR (`v_readfirstlane_b32`, `v_readlane_b32`).
    pub const SCALAR_DST: u32 = 1 << 10;
    /// llvm-objdump spells the 32-bit form with an `_e32` suffix.
    pub const E32: u32 = 1 << 11;
}
use flags::*;

/// One row of the opcode table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    /// Table class (the encoding of the basic form).
    pub class: Class,
    /// Opcode field value per target column (0 = gfx90a, 1 = gfx94x); 0xFFFF = absent.
    pub code: [u16; 2],
    /// VOP3 opcode of a VOP1/VOP2/VOPC op per target column; 0xFFFF = none.
    pub vop3: [u16; 2],
    /// Operand widths in dwords: [vdst/sdst/sdata, VOP3B sdst, src0, src1, src2]. For memory
    /// classes: DS [vdst, -, addr, data0, data1]; FLAT [vdst, -, addr, data, -]; MUBUF
    /// [vdata, -, vaddr, srsrc, soffset]; SMEM [sdata, -, sbase, -, -]. 0 = absent.
    pub widths: [u8; 5],
    /// [`flags`] bits.
    pub flags: u32,
    /// Mnemonic per target column ("" = absent), LLVM spelling, no encoding suffix.
    pub names: [&'static str; 2],
}

macro_rules! isa_ops {
    ($($v:ident = $cls:ident, [$c0:expr, $c1:expr], [$e0:expr, $e1:expr], [$($w:expr),*], $fl:expr, $n0:literal, $n1:literal;)*) => {
        /// One variant per instruction, named after LLVM's gfx90a mnemonic (the gfx940
        /// spelling where gfx90a lacks the instruction). Instructions that gfx940 renamed
        /// (e.g. `v_mfma_f32_32x32x8f16` -> `v_mfma_f32_32x32x8_f16`) share one variant.
        #[allow(non_camel_case_types)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u16)]
        pub enum Opcode {
            $(
                #[doc = concat!("`", $n0, "` / `", $n1, "`")]
                $v,
            )*
        }
        /// All rows, indexed by `Opcode as usize`.
        pub static OPS: &[OpInfo] = &[
            $(OpInfo {
                class: Class::$cls,
                code: [$c0, $c1],
                vop3: [$e0, $e1],
                widths: [$($w),*],
                flags: $fl,
                names: [$n0, $n1],
            },)*
        ];
        const ALL: &[Opcode] = &[$(Opcode::$v,)*];
    };
}

include!("ops.rs");

impl Opcode {
    /// The table row.
    #[inline]
    pub fn info(self) -> &'static OpInfo {
        &OPS[self as usize]
    }
    /// Mnemonic on `target` (the other target's spelling if this one lacks it).
    pub fn name(self, target: Target) -> &'static str {
        let i = self.info();
        let n = i.names[target.col()];
        if n.is_empty() {
            i.names[1 - target.col()]
        } else {
            n
        }
    }
    /// True if `target` has this instruction.
    pub fn exists_on(self, target: Target) -> bool {
        self.info().code[target.col()] != NONE
    }
    /// Every opcode, in table order.
    pub fn all() -> &'static [Opcode] {
        ALL
    }
    /// Number of rows in the table.
    pub const COUNT: usize = ALL.len();
}

/// Per (class, target column) dense arrays from opcode field value to table index, built at
/// compile time. `u16::MAX` = no instruction.
pub(crate) struct Lookup {
    pub sop1: [u16; 256],
    pub sop2: [u16; 128],
    pub sopk: [u16; 32],
    pub sopc: [u16; 128],
    pub sopp: [u16; 128],
    pub smem: [u16; 256],
    pub vop1: [u16; 256],
    pub vop2: [u16; 64],
    pub vopc: [u16; 256],
    /// VOP3 opcode space (10 bits), promoted VOP1/VOP2/VOPC included.
    pub vop3: [u16; 1024],
    pub vop3p: [u16; 128],
    pub ds: [u16; 256],
    pub flat: [u16; 128],
    pub global: [u16; 128],
    pub scratch: [u16; 128],
    pub mubuf: [u16; 128],
    pub mtbuf: [u16; 16],
}

const fn fill<const N: usize>(class: Class, col: usize) -> [u16; N] {
    let mut t = [NONE; N];
    let mut i = 0;
    while i < OPS.len() {
        let r = &OPS[i];
        let c = r.code[col];
        // `Class` has no const PartialEq: compare discriminants
        let mai_in_vop3p = matches!(class, Class::Vop3p) && matches!(r.class, Class::Mai);
        if (r.class as u8 == class as u8 || mai_in_vop3p) && c != NONE && (c as usize) < N {
            t[c as usize] = i as u16;
        }
        if matches!(class, Class::Vop3)
            && r.vop3[col] != NONE
            && (r.vop3[col] as usize) < N
            && matches!(r.class, Class::Vop1 | Class::Vop2 | Class::Vopc)
        {
            t[r.vop3[col] as usize] = i as u16;
        }
        i += 1;
    }
    t
}

const fn lookup(col: usize) -> Lookup {
    Lookup {
        sop1: fill(Class::Sop1, col),
        sop2: fill(Class::Sop2, col),
        sopk: fill(Class::Sopk, col),
        sopc: fill(Class::Sopc, col),
        sopp: fill(Class::Sopp, col),
        smem: fill(Class::Smem, col),
        vop1: fill(Class::Vop1, col),
        vop2: fill(Class::Vop2, col),
        vopc: fill(Class::Vopc, col),
        vop3: fill(Class::Vop3, col),
        vop3p: fill(Class::Vop3p, col),
        ds: fill(Class::Ds, col),
        flat: fill(Class::Flat, col),
        global: fill(Class::Global, col),
        scratch: fill(Class::Scratch, col),
        mubuf: fill(Class::Mubuf, col),
        mtbuf: fill(Class::Mtbuf, col),
    }
}

/// Lookup arrays: [gfx90a, gfx94x].
pub(crate) static LOOKUP: [Lookup; 2] = [lookup(0), lookup(1)];

/// Table index -> Opcode.
#[inline]
pub(crate) fn opcode_at(i: u16) -> Option<Opcode> {
    ALL.get(usize::from(i)).copied()
}

#[allow(dead_code)]
const _FLAGS_USED: u32 = BRANCH
    | LOAD
    | STORE
    | ATOMIC
    | RETURNS
    | ACC_DST
    | ACC_SRC0
    | LITERAL
    | SDST
    | CARRY_IN
    | SCALAR_DST
    | E32;
