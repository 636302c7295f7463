//! MFMA beyond the dense f32/f16/bf16_1k core in `wave.rs`: f64, int8, the older bf16
//! (two per register, gfx90a), gfx942 fp8/bf8 and xf32, and the CBSZ/ABID (A block
//! broadcast) and BLGP (B lane group) modifiers on every shape that takes them; and how the
//! matrix cores sum f16/bf16/fp8/xf32 products (CDNA2 pairwise sums, CDNA3 fused dot-adds),
//! after Microsoft Research's MMA-Sim (`microsoft/MMA-Sim`, arXiv 2511.10909: reference
//! models checked bit for bit against the hardware), since AMD does not document it.
//!
//! Layouts and modifier semantics are those AMD's `amd_matrix_instruction_calculator`
//! (`matrix_calculator.py`, CDNA2 / CDNA3 tables and `_get_cbsz_abid_transformed_block`,
//! `_get_blgp_transformed_lane`) prints, which follow the CDNA2/CDNA3 ISA guides' "Matrix
//! Arithmetic Instructions"; opcodes from the shared table (`isa/src/ops.rs`, checked against
//! llvm-mc-19).

use super::{fma32, lanes, vcode, Ctx, Op, Target, Wave, AGPR_BASE, R};

/// Element type of an A or B input.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum El {
    F32,
    F16,
    Bf16,
    I8,
    /// gfx942 FP8: E4M3 "FNUZ" (bias 8, no infinities, 0x80 is the only NaN, no -0).
    Fp8,
    /// gfx942 BF8: E5M2 "FNUZ" (bias 16, same special values).
    Bf8,
    F64,
}

impl El {
    fn bits(self) -> usize {
        match self {
            El::F32 => 32,
            El::F16 | El::Bf16 => 16,
            El::I8 | El::Fp8 | El::Bf8 => 8,
            El::F64 => 64,
        }
    }

    /// The exact f32 value of an element (every input type but f64 and i8 is exact in f32).
    fn to_f32(self, x: u32) -> f32 {
        match self {
            El::F32 => f32::from_bits(x),
            El::F16 => half::f16::from_bits(x as u16).to_f32(),
            El::Bf16 => half::bf16::from_bits(x as u16).to_f32(),
            El::Fp8 => fp8_to_f32(x as u8, 3, 8),
            El::Bf8 => fp8_to_f32(x as u8, 2, 16),
            El::I8 | El::F64 => 0.0,
        }
    }
}

/// An AMD "FNUZ" 8-bit float with `mb` mantissa bits and exponent bias `bias`: 0x80 is NaN,
/// exponent field 0 is denormal, no infinities (ROCm composable_kernel
/// `include/ck_tile/core/numeric/float8.hpp`, the "NANOO" table; HIP `amd_hip_fp8.h` uses
/// it on gfx940/941/942).
fn fp8_to_f32(x: u8, mb: u32, bias: i32) -> f32 {
    if x == 0x80 {
        return f32::NAN;
    }
    let sign = if x & 0x80 != 0 { -1.0 } else { 1.0 };
    let e = ((x & 0x7F) >> mb) as i32;
    let m = (x & ((1 << mb) - 1)) as f32;
    let scale = |p: i32| 2f32.powi(p);
    sign * if e == 0 {
        m * scale(1 - bias - mb as i32)
    } else {
        (1.0 + m * scale(-(mb as i32))) * scale(e - bias)
    }
}

/// One MFMA: an M x N x K product over `blocks` blocks with `e` inputs per lane.
#[derive(Clone, Copy, Debug)]
struct Shape {
    m: usize,
    n: usize,
    k: usize,
    blocks: usize,
    a: El,
    b: El,
    /// CBSZ/ABID are honoured (multi-block shapes).
    cbsz: bool,
    /// BLGP is a B lane-group select (or, for f64 on gfx942, negation of A/B/C).
    blgp: bool,
}

fn shape(op: u16, t: Target) -> Option<Shape> {
    let g90 = t == Target::Gfx90a;
    let s = |m, n, k, blocks, a, b| Shape {
        m,
        n,
        k,
        blocks,
        a,
        b,
        cbsz: blocks > 1,
        blgp: true,
    };
    use El::*;
    let mut sh = match op {
        0x40 => s(32, 32, 1, 2, F32, F32),
        0x41 => s(16, 16, 1, 4, F32, F32),
        0x42 => s(4, 4, 1, 16, F32, F32),
        0x44 => s(32, 32, 2, 1, F32, F32),
        0x45 => s(16, 16, 4, 1, F32, F32),
        0x48 => s(32, 32, 4, 2, F16, F16),
        0x49 => s(16, 16, 4, 4, F16, F16),
        0x4a => s(4, 4, 4, 16, F16, F16),
        0x4c => s(32, 32, 8, 1, F16, F16),
        0x4d => s(16, 16, 16, 1, F16, F16),
        0x50 => s(32, 32, 4, 2, I8, I8),
        0x51 => s(16, 16, 4, 4, I8, I8),
        0x52 => s(4, 4, 4, 16, I8, I8),
        0x54 if g90 => s(32, 32, 8, 1, I8, I8),
        0x55 if g90 => s(16, 16, 16, 1, I8, I8),
        0x56 if !g90 => s(32, 32, 16, 1, I8, I8),
        0x57 if !g90 => s(16, 16, 32, 1, I8, I8),
        0x63 if g90 => s(32, 32, 4, 2, Bf16, Bf16),
        0x64 if g90 => s(16, 16, 4, 4, Bf16, Bf16),
        0x65 if g90 => s(4, 4, 4, 16, Bf16, Bf16),
        0x66 if g90 => s(32, 32, 8, 1, Bf16, Bf16),
        0x67 if g90 => s(16, 16, 16, 1, Bf16, Bf16),
        0x5d if !g90 => s(32, 32, 4, 2, Bf16, Bf16),
        0x5e if !g90 => s(16, 16, 4, 4, Bf16, Bf16),
        0x5f if !g90 => s(4, 4, 4, 16, Bf16, Bf16),
        0x60 if !g90 => s(32, 32, 8, 1, Bf16, Bf16),
        0x61 if !g90 => s(16, 16, 16, 1, Bf16, Bf16),
        // The older bf16 forms: two bf16 per register (gfx90a only).
        0x68 if g90 => s(32, 32, 2, 2, Bf16, Bf16),
        0x69 if g90 => s(16, 16, 2, 4, Bf16, Bf16),
        0x6b if g90 => s(4, 4, 2, 16, Bf16, Bf16),
        0x6c if g90 => s(32, 32, 4, 1, Bf16, Bf16),
        0x6d if g90 => s(16, 16, 8, 1, Bf16, Bf16),
        0x6e => s(16, 16, 4, 1, F64, F64),
        0x6f => s(4, 4, 4, 4, F64, F64),
        0x70..=0x77 if !g90 => {
            let big = op >= 0x74;
            let (a, b) = match op & 3 {
                0 => (Bf8, Bf8),
                1 => (Bf8, Fp8),
                2 => (Fp8, Bf8),
                _ => (Fp8, Fp8),
            };
            if big {
                s(32, 32, 16, 1, a, b)
            } else {
                s(16, 16, 32, 1, a, b)
            }
        }
        _ => return None,
    };
    // f64 MFMA take no CBSZ/ABID; BLGP negates on gfx942 and is absent on gfx90a. On
    // gfx942 the single-block 16-bit, int8 and fp8 forms take no BLGP either.
    if sh.a == F64 {
        sh.cbsz = false;
        sh.blgp = !g90;
    } else if !g90 && sh.blocks == 1 && sh.a != F32 {
        sh.blgp = false;
    }
    Some(sh)
}

/// gfx942 SMFMAC shapes (opcodes from the shared table): M x N x K of the dense product.
fn sparse_shape(op: u16, t: Target) -> Option<Shape> {
    if t == Target::Gfx90a {
        return None;
    }
    use El::*;
    let s = |m, k, a, b| Shape {
        m,
        n: m,
        k,
        blocks: 1,
        a,
        b,
        cbsz: false,
        blgp: false,
    };
    let f8 = |op: u16| match op & 3 {
        0 => (Bf8, Bf8),
        1 => (Bf8, Fp8),
        2 => (Fp8, Bf8),
        _ => (Fp8, Fp8),
    };
    Some(match op {
        0x62 => s(16, 32, F16, F16),
        0x64 => s(32, 16, F16, F16),
        0x66 => s(16, 32, Bf16, Bf16),
        0x68 => s(32, 16, Bf16, Bf16),
        0x6a => s(16, 64, I8, I8),
        0x6c => s(32, 32, I8, I8),
        0x78..=0x7b => {
            let (a, b) = f8(op);
            s(16, 64, a, b)
        }
        0x7c..=0x7f => {
            let (a, b) = f8(op);
            s(32, 32, a, b)
        }
        _ => return None,
    })
}

/// The B lane whose value lane `l` uses under BLGP `g` (calculator `_get_blgp_transformed_lane`).
fn blgp_lane(l: usize, g: u8) -> usize {
    match g {
        1 => l % 32,
        2 => 32 + l % 32,
        3 => (l + 16) % 64,
        4 => l % 16,
        5 => 16 + l % 16,
        6 => 32 + l % 16,
        7 => 48 + l % 16,
        _ => l,
    }
}

impl Wave {
    /// Reads `regs` consecutive registers of an MFMA source operand (VGPR/AccVGPR, or a
    /// scalar/inline constant replicated).
    fn mai_src(&self, ctx: &Ctx<'_>, op: &Op, slot: usize, regs: usize) -> R<Vec<[u32; 64]>> {
        let code = op.src[slot];
        let mut out = vec![[0u32; 64]; regs];
        for (r, row) in out.iter_mut().enumerate() {
            if code >= 256 {
                row.copy_from_slice(self.vreg(ctx, vcode(code) + r)?);
            } else {
                *row = [self.rs(ctx, code, op.lit)?; 64];
            }
        }
        Ok(out)
    }

    /// MFMA forms and modifiers the core path in `mai` does not take; faults naming the
    /// instruction for anything not modelled (unsupported modifiers).
    pub(super) fn mfma(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        if ctx.target != Target::Gfx90a && matches!(op.op, 0x3e | 0x3f) {
            return self.mfma_xf32(ctx, op);
        }
        if let Some(sp) = sparse_shape(op.op, ctx.target) {
            return self.smfmac(ctx, op, sp);
        }
        let Some(sh) = shape(op.op, ctx.target) else {
            return Err(self.unimpl(ctx));
        };
        let (cbsz, abid, blgp) = (op.neg_hi, op.opsel, op.neg);
        if (cbsz | abid) != 0
            && (!sh.cbsz || (1usize << cbsz) > sh.blocks || abid as usize >= 1usize << cbsz)
        {
            return Err(self.err(ctx, "MFMA CBSZ/ABID values this shape does not take"));
        }
        if blgp != 0 && !sh.blgp {
            return Err(self.err(ctx, "MFMA BLGP on a shape that does not take it"));
        }
        if self.exec() != u64::MAX {
            return Err(self.err(ctx, "MFMA with a partial EXEC mask is not modelled"));
        }
        let dbase = if op.acc {
            AGPR_BASE as usize + op.dst as usize
        } else {
            op.dst as usize
        };
        if sh.a == El::F64 {
            return self.mfma_f64(ctx, op, sh, dbase, blgp);
        }
        let (m, n, k, blocks) = (sh.m, sh.n, sh.k, sh.blocks);
        // Inputs per lane: K/(K/E) — the K dimension is split over lane groups of M (N).
        let e = k * m * blocks / 64;
        let regs = e * sh.a.bits() / 32;
        let a = self.mai_src(ctx, op, 0, regs.max(1))?;
        let b = self.mai_src(ctx, op, 1, regs.max(1))?;
        let elem = |src: &Vec<[u32; 64]>, bits: usize, lane: usize, idx: usize| -> u32 {
            let bit = idx * bits;
            let w = src[bit / 32][lane] >> (bit % 32);
            if bits == 32 {
                w
            } else {
                w & ((1u32 << bits) - 1)
            }
        };
        let dregs = blocks * m * n / 64;
        let c = self.mai_src(ctx, op, 2, dregs)?;
        let g = 64 / n;
        let ke = k / e;
        let mut acc = c;
        // f16/bf16 (incl. with CBSZ/ABID/BLGP): CDNA3's fused dot-add (`cdna3_f16_dot`) or
        // CDNA2's pairwise sums (`cdna2_f16_dot`); the other types one f32 fma per k.
        let cdna2 = ctx.target == Target::Gfx90a;
        let a_block = |bl: usize| {
            if cbsz == 0 {
                bl
            } else {
                ((bl >> cbsz) << cbsz) + abid as usize
            }
        };
        for bl in 0..blocks {
            let ab = a_block(bl);
            for i in 0..m {
                let s = bl * m / 4 + i / 4;
                let reg = 4 * (s / g) + i % 4;
                for j in 0..n {
                    let lane = j + n * (s % g);
                    let la = |kk: usize| i + m * (kk / e + ke * ab);
                    let lb = |kk: usize| blgp_lane(j + n * (kk / e + ke * bl), blgp);
                    if sh.a == El::I8 {
                        let mut sum = acc[reg][lane] as i32;
                        for kk in 0..k {
                            let x = elem(&a, 8, la(kk), kk % e) as u8 as i8 as i32;
                            let y = elem(&b, 8, lb(kk), kk % e) as u8 as i8 as i32;
                            sum = sum.wrapping_add(x * y);
                        }
                        acc[reg][lane] = sum as u32;
                    } else if !cdna2 && matches!(sh.a, El::Fp8 | El::Bf8) {
                        let x = |kk: usize| sh.a.to_f32(elem(&a, 8, la(kk), kk % e));
                        let y = |kk: usize| sh.b.to_f32(elem(&b, 8, lb(kk), kk % e));
                        let emin = |t: El| if t == El::Fp8 { -7 } else { -15 };
                        let c = f32::from_bits(acc[reg][lane]);
                        let sum = cdna3_fp8_dot(k, emin(sh.a), emin(sh.b), c, x, y);
                        acc[reg][lane] = sum.to_bits();
                    } else if matches!(sh.a, El::F16 | El::Bf16) {
                        let x = |kk: usize| sh.a.to_f32(elem(&a, sh.a.bits(), la(kk), kk % e));
                        let y = |kk: usize| sh.b.to_f32(elem(&b, sh.b.bits(), lb(kk), kk % e));
                        let c = f32::from_bits(acc[reg][lane]);
                        let bf16 = sh.a == El::Bf16;
                        let sum = if cdna2 {
                            // The older bf16 forms (two per register) sum pairs.
                            let group = if bf16 && e == 2 { 2 } else { 4 };
                            cdna2_f16_dot(k, group, bf16, c, x, y)
                        } else {
                            cdna3_f16_dot(k, bf16, c, x, y)
                        };
                        acc[reg][lane] = sum.to_bits();
                    } else {
                        let mut sum = f32::from_bits(acc[reg][lane]);
                        for kk in 0..k {
                            let x = sh.a.to_f32(elem(&a, sh.a.bits(), la(kk), kk % e));
                            let y = sh.b.to_f32(elem(&b, sh.b.bits(), lb(kk), kk % e));
                            sum = fma32(x, y, sum);
                        }
                        acc[reg][lane] = sum.to_bits();
                    }
                }
            }
        }
        for (r, row) in acc.iter().enumerate() {
            self.write32(ctx, dbase + r, row, u64::MAX)?;
        }
        Ok(())
    }

    /// gfx942 SMFMAC: D (in place) += A * B with A 4:2-sparse. Calculator layouts: lane
    /// `i + M * (k / KL)` holds k in `[KL * (lane / M), +KL)` (KL = K * M / 64) — for A as
    /// KL / 2 compressed values (group g of four k: values 2g, 2g + 1), for B as KL dense
    /// values; the index VGPR (SrcC) holds per group a 4-bit field at bits [4g + 3:4g],
    /// the position within the group of value 2g in bits [1:0] and of 2g + 1 in [3:2]
    /// (ROCm composable_kernel `ck_tile` `compress_a_impl` builds it that way). Each
    /// compressed value multiplies the B element at its position; products summed in k
    /// order. The index VGPR holds 32 / KL index sets of KL bits (KL / 4 groups): with CBSZ
    /// 0, ABID picks the set (0..3 for 16-bit inputs, 0..1 for 8-bit ones); with CBSZ 1..3
    /// ABID is ignored and set 0 is used (the calculator's README "compression index" with
    /// `--cbsz`/`--abid`, `_get_reg_name`). CBSZ 4..7 (undefined), an ABID beyond the sets
    /// and BLGP fault.
    fn smfmac(&mut self, ctx: &mut Ctx<'_>, op: &Op, sh: Shape) -> R<()> {
        let (cbsz, abid) = (op.neg_hi as usize, op.opsel as usize);
        let kl = sh.k * sh.m / 64;
        let sets = 32 / kl;
        if op.neg != 0 || cbsz > 3 || (cbsz == 0 && abid >= sets) {
            return Err(self.err(
                ctx,
                format!(
                    "SMFMAC with CBSZ {cbsz} ABID {abid} BLGP {} is not modelled (ABID picks \
                     one of {sets} index sets while CBSZ is 0; CBSZ above 3 and BLGP are \
                     undefined)",
                    op.neg
                ),
            ));
        }
        let set_shift = if cbsz == 0 { abid * kl } else { 0 };
        if self.exec() != u64::MAX {
            return Err(self.err(ctx, "MFMA with a partial EXEC mask is not modelled"));
        }
        let (m, n, k) = (sh.m, sh.n, sh.k);
        let bits = sh.a.bits();
        let a = self.mai_src(ctx, op, 0, (kl / 2 * bits).div_ceil(32))?;
        let b = self.mai_src(ctx, op, 1, (kl * bits).div_ceil(32))?;
        let idx = self.mai_src(ctx, op, 2, 1)?;
        let dbase = if op.acc {
            AGPR_BASE as usize + op.dst as usize
        } else {
            op.dst as usize
        };
        let dregs = m * n / 64;
        let mut acc = Vec::with_capacity(dregs);
        for r in 0..dregs {
            let mut row = [0u32; 64];
            row.copy_from_slice(self.vreg(ctx, dbase + r)?);
            acc.push(row);
        }
        let elem = |src: &Vec<[u32; 64]>, lane: usize, e: usize| -> u32 {
            let bit = e * bits;
            let w = src[bit / 32][lane] >> (bit % 32);
            if bits == 32 {
                w
            } else {
                w & ((1u32 << bits) - 1)
            }
        };
        let g = 64 / n;
        for i in 0..m {
            let s = i / 4;
            let reg = 4 * (s / g) + i % 4;
            for j in 0..n {
                let lane = j + n * (s % g);
                let mut fsum = f32::from_bits(acc[reg][lane]);
                let mut isum = acc[reg][lane] as i32;
                for q in 0..k / kl {
                    let la = i + m * q;
                    let lb = j + n * q;
                    for grp in 0..kl / 4 {
                        let nib = idx[0][la] >> (set_shift + 4 * grp);
                        for v in 0..2 {
                            let pos = ((nib >> (2 * v)) & 3) as usize;
                            let xa = elem(&a, la, 2 * grp + v);
                            let xb = elem(&b, lb, 4 * grp + pos);
                            if sh.a == El::I8 {
                                let p = (xa as u8 as i8 as i32) * (xb as u8 as i8 as i32);
                                isum = isum.wrapping_add(p);
                            } else {
                                fsum = fma32(sh.a.to_f32(xa), sh.b.to_f32(xb), fsum);
                            }
                        }
                    }
                }
                acc[reg][lane] = if sh.a == El::I8 {
                    isum as u32
                } else {
                    fsum.to_bits()
                };
            }
        }
        for (r, row) in acc.iter().enumerate() {
            self.write32(ctx, dbase + r, row, u64::MAX)?;
        }
        Ok(())
    }

    /// f64 MFMA (calculator layouts): 16x16x4 — A[i][k] in lane 16k + i, D[i][j] in lane
    /// 16(i%4) + j, register pair i/4; 4x4x4 with 4 blocks — A[i][k] in lane 16k + 4b + i,
    /// D[i][j] in lane 16i + 4b + j, one register pair. gfx942's BLGP bits negate A, B, C.
    /// gfx942 `v_mfma_f32_16x16x8_xf32` (0x3e) / `v_mfma_f32_32x32x4_xf32` (0x3f): one block,
    /// two f32 inputs per lane (A[i][k] in lane `i + M * (k / 2)`, register `k % 2`; B
    /// likewise with j), D in the general f32 layout. Arithmetic as Microsoft Research's
    /// MMA-Sim models CDNA3 (`microsoft/MMA-Sim` `mmasim/simulator/amd.py` `MFMASim`,
    /// `functions.py` `truncate_to_tf32`, `amd_fused_dot_add`; validated bit for bit against
    /// an MI300X, arXiv 2511.10909): see [`xf32_group`]. CBSZ/ABID/BLGP fault (not modelled).
    fn mfma_xf32(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        if (op.neg_hi | op.opsel | op.neg) != 0 {
            return Err(self.err(ctx, "xf32 MFMA with CBSZ/ABID/BLGP is not modelled"));
        }
        if self.exec() != u64::MAX {
            return Err(self.err(ctx, "MFMA with a partial EXEC mask is not modelled"));
        }
        let (m, n, k) = if op.op == 0x3e {
            (16, 16, 8)
        } else {
            (32, 32, 4)
        };
        let dregs = m * n / 64;
        let a = self.mai_src(ctx, op, 0, 2)?;
        let b = self.mai_src(ctx, op, 1, 2)?;
        let mut acc = self.mai_src(ctx, op, 2, dregs)?;
        let g = 64 / n;
        for i in 0..m {
            let reg = 4 * ((i / 4) / g) + i % 4;
            for j in 0..n {
                let lane = j + n * ((i / 4) % g);
                let mut sum = f32::from_bits(acc[reg][lane]);
                for k0 in (0..k).step_by(4) {
                    let x: [f32; 4] = std::array::from_fn(|t| {
                        let kk = k0 + t;
                        f32::from_bits(a[kk % 2][i + m * (kk / 2)])
                    });
                    let y: [f32; 4] = std::array::from_fn(|t| {
                        let kk = k0 + t;
                        f32::from_bits(b[kk % 2][j + n * (kk / 2)])
                    });
                    sum = xf32_group(&x, &y, sum);
                }
                acc[reg][lane] = sum.to_bits();
            }
        }
        let dbase = if op.acc {
            AGPR_BASE as usize + op.dst as usize
        } else {
            op.dst as usize
        };
        for (r, row) in acc.iter().enumerate() {
            self.write32(ctx, dbase + r, row, u64::MAX)?;
        }
        Ok(())
    }

    fn mfma_f64(&mut self, ctx: &mut Ctx<'_>, op: &Op, sh: Shape, dbase: usize, neg: u8) -> R<()> {
        let a = self.mai_src(ctx, op, 0, 2)?;
        let b = self.mai_src(ctx, op, 1, 2)?;
        let dregs = 2 * sh.blocks * sh.m * sh.n / 64;
        let mut c = vec![[0u64; 64]; dregs / 2];
        let ccode = op.src[2];
        for (p, row) in c.iter_mut().enumerate() {
            if ccode >= 256 {
                let lo = self.vreg(ctx, vcode(ccode) + 2 * p)?;
                let hi = self.vreg(ctx, vcode(ccode) + 2 * p + 1)?;
                *row = lanes(|l| lo[l] as u64 | (hi[l] as u64) << 32);
            } else {
                *row = [self.rs64(ctx, ccode, op.lit, true)?; 64];
            }
        }
        let sgn = |bit: u8| if neg >> bit & 1 != 0 { -1.0 } else { 1.0 };
        let (sa, sb, sc) = (sgn(0), sgn(1), sgn(2));
        let v = |src: &Vec<[u32; 64]>, l: usize| {
            f64::from_bits(src[0][l] as u64 | (src[1][l] as u64) << 32)
        };
        let mut d = c.clone();
        for bl in 0..sh.blocks {
            for i in 0..sh.m {
                for j in 0..sh.n {
                    let (pair, lane) = if sh.m == 16 {
                        (i / 4, 16 * (i % 4) + j)
                    } else {
                        (0, 16 * i + 4 * bl + j)
                    };
                    let mut sum = sc * f64::from_bits(c[pair][lane]);
                    for kk in 0..sh.k {
                        let (la, lb) = if sh.m == 16 {
                            (16 * kk + i, 16 * kk + j)
                        } else {
                            (16 * kk + 4 * bl + i, 16 * kk + 4 * bl + j)
                        };
                        sum = (sa * v(&a, la)).mul_add(sb * v(&b, lb), sum);
                    }
                    d[pair][lane] = sum.to_bits();
                }
            }
        }
        for (p, row) in d.iter().enumerate() {
            let lo: [u32; 64] = lanes(|l| row[l] as u32);
            let hi: [u32; 64] = lanes(|l| (row[l] >> 32) as u32);
            self.write32(ctx, dbase + 2 * p, &lo, u64::MAX)?;
            self.write32(ctx, dbase + 2 * p + 1, &hi, u64::MAX)?;
        }
        Ok(())
    }
}

/// 2^e as an f64 (0 below the subnormal range, infinity above the finite one).
fn pow2(e: i32) -> f64 {
    match e {
        -1022..=1023 => f64::from_bits(((e + 1023) as u64) << 52),
        -1074..=-1023 => f64::from_bits(1u64 << (e + 1074)),
        i32::MIN..=-1075 => 0.0,
        _ => f64::INFINITY,
    }
}

/// A value as (signed significand, exponent) in its input type: |significand| in [1, 2)
/// for normal numbers; below the type's smallest normal exponent `emin` the exponent is
/// `emin` and |significand| < 1; zero is (0, -999) (MMA-Sim `extract_significand_exponent`).
/// Every f32/f16/bf16 value is a normal f64, so the f64 exponent field gives the exponent.
fn sig_exp(v: f64, emin: i32) -> (f64, i32) {
    if v == 0.0 {
        return (0.0, -999);
    }
    let e = (((v.to_bits() >> 52) & 0x7FF) as i32 - 1023).max(emin);
    (v * pow2(-e), e)
}

/// One group of a CDNA3 fused dot-add, `c + sum(a[t] * b[t])` with the inputs exact in f64
/// and `emin` their type's smallest normal exponent (MMA-Sim `amd_fused_dot_add` with 24
/// fractional bits, the non-fp8 path):
/// - an infinite or NaN exact sum (an infinite or NaN input) is returned as is (NaN as the
///   host's quiet NaN: the hardware's payload is not modelled); a product beyond the f32
///   range is an infinity of its sign (both signs: NaN);
/// - each product's significand is aligned to the largest product exponent and truncated
///   toward zero to 24 fractional bits; their sum, aligned to max(that exponent, C's), is
///   floored to 31 fractional bits, C floored to 24; the total rounds to f32 (nearest even).
fn fused_dot_add(a: &[f64], b: &[f64], emin: i32, c: f32) -> f32 {
    let prods = a.iter().zip(b).map(|(x, y)| x * y);
    let exact = prods.clone().sum::<f64>() + c as f64;
    if !exact.is_finite() {
        return exact as f32;
    }
    let big = pow2(128);
    match (
        prods.clone().any(|p| p >= big),
        prods.clone().any(|p| p <= -big),
    ) {
        (true, true) => return f32::NAN,
        (true, false) => return f32::INFINITY,
        (false, true) => return f32::NEG_INFINITY,
        _ => {}
    }
    let terms = a.iter().zip(b).map(|(&x, &y)| {
        let (sa, ea) = sig_exp(x, emin);
        let (sb, eb) = sig_exp(y, emin);
        (sa * sb, ea + eb)
    });
    let e = terms.clone().map(|t| t.1).max().unwrap_or(-999);
    let s: f64 = terms
        .map(|(sg, ei)| (sg * pow2(24 + ei - e)).trunc() * pow2(-24))
        .sum();
    let (sc, ec) = sig_exp(c as f64, -126);
    let mx = e.max(ec);
    let s = (s * pow2(31 + e - mx)).floor() * pow2(-31);
    let sc = (sc * pow2(24 + ec - mx)).floor() * pow2(-24);
    ((s + sc) * pow2(mx)) as f32
}

/// One group of four k of a CDNA3 xf32 MFMA: A and B lose their 13 low mantissa bits
/// (MMA-Sim `truncate_to_tf32`), then [`fused_dot_add`].
fn xf32_group(a: &[f32; 4], b: &[f32; 4], c: f32) -> f32 {
    let tf32 = |x: f32| f32::from_bits(x.to_bits() & !0x1FFF) as f64;
    fused_dot_add(&a.map(tf32), &b.map(tf32), -126, c)
}

/// gfx942 f16 / bf16 MFMA accumulation of one D element: k in groups of min(8, K) (MMA-Sim
/// `MFMASim` for CDNA3 f16/bf16: `fused_dot_add`, group size `min(8, k)`), each group one
/// [`fused_dot_add`] into the running f32 sum. `x(kk)`, `y(kk)`: the exact A and B values.
pub(super) fn cdna3_f16_dot(
    k: usize,
    bf16: bool,
    mut c: f32,
    x: impl Fn(usize) -> f32,
    y: impl Fn(usize) -> f32,
) -> f32 {
    let g = k.min(8);
    let emin = if bf16 { -126 } else { -14 };
    let mut xa = [0f64; 8];
    let mut yb = [0f64; 8];
    for k0 in (0..k).step_by(g) {
        for t in 0..g {
            xa[t] = x(k0 + t) as f64;
            yb[t] = y(k0 + t) as f64;
        }
        c = fused_dot_add(&xa[..g], &yb[..g], emin, c);
    }
    c
}

/// Products (significand, exponent) aligned to the largest exponent and truncated toward
/// zero to 24 fractional bits, summed: (sum, that exponent) (MMA-Sim `fused_sum`).
fn fused_sum(terms: impl Iterator<Item = (f64, i32)> + Clone) -> (f64, i32) {
    let e = terms.clone().map(|t| t.1).max().unwrap_or(-1998);
    let s = terms
        .map(|(sg, ei)| (sg * pow2(24 + ei - e)).trunc() * pow2(-24))
        .sum();
    (s, e)
}

/// gfx942 fp8/bf8 MFMA accumulation of one D element (MMA-Sim `MFMASim`: fp8
/// `"fused_dot_add"`, group size 16, `amd_fused_dot_add` with `is_fp8`): per group of 16 k,
/// the even-k and the odd-k products are each fused (aligned to their largest exponent,
/// truncated to 24 fractional bits), the two sums aligned to the larger exponent and
/// floored to 24 fractional bits, added, aligned to max(that, C's exponent) and floored to
/// 31 fractional bits; C floored to 24 fractional bits, or dropped when its exponent is
/// more than 25 below; the total rounds to f32 (nearest even). FNUZ denormals take the
/// type's smallest normal exponent (`emin_a`, `emin_b`: -7 for E4M3, -15 for E5M2); a NaN
/// input gives NaN.
pub(super) fn cdna3_fp8_dot(
    k: usize,
    emin_a: i32,
    emin_b: i32,
    mut c: f32,
    x: impl Fn(usize) -> f32,
    y: impl Fn(usize) -> f32,
) -> f32 {
    for k0 in (0..k).step_by(16) {
        let g = 16.min(k - k0);
        let (mut a, mut b) = ([0f64; 16], [0f64; 16]);
        for t in 0..g {
            (a[t], b[t]) = (x(k0 + t) as f64, y(k0 + t) as f64);
        }
        let exact = a.iter().zip(&b).map(|(p, q)| p * q).sum::<f64>() + c as f64;
        if !exact.is_finite() {
            return exact as f32;
        }
        let term = |t: usize| {
            let (sa, ea) = sig_exp(a[t], emin_a);
            let (sb, eb) = sig_exp(b[t], emin_b);
            (sa * sb, ea + eb)
        };
        let (s0, e0) = fused_sum((0..g).step_by(2).map(term));
        let (s1, e1) = fused_sum((1..g).step_by(2).map(term));
        let me = e0.max(e1);
        let s0 = (s0 * pow2(24 + e0 - me)).floor() * pow2(-24);
        let s1 = (s1 * pow2(24 + e1 - me)).floor() * pow2(-24);
        let (sc, ec) = sig_exp(c as f64, -126);
        let mx = me.max(ec);
        let s = ((s0 + s1) * pow2(31 + me - mx)).floor() * pow2(-31);
        let sc = if ec >= mx - 25 {
            (sc * pow2(24 + ec - mx)).floor() * pow2(-24)
        } else {
            0.0
        };
        c = ((s + sc) * pow2(mx)) as f32;
    }
    c
}

/// gfx90a (CDNA2) f16 / bf16 MFMA accumulation of one D element (MMA-Sim `MFMASim` for
/// CDNA2: `operation_type = "standard"`, `flush_denormal`, group size 4 — 2 for the older
/// two-per-register bf16 forms — and `functions.py` `pairwise_dot`): A, B and C inputs below
/// their type's smallest normal (f16 2^-14, bf16 and f32 2^-126) read as +0; each group's
/// products (exact in f32) are summed as a balanced tree of f32 additions (halves first),
/// every partial sum below 2^-126 flushed to a zero of its sign; the group sum is added to
/// the running f32 sum, which is flushed likewise. `x(kk)`, `y(kk)`: the A and B values.
pub(super) fn cdna2_f16_dot(
    k: usize,
    group: usize,
    bf16: bool,
    c: f32,
    x: impl Fn(usize) -> f32,
    y: impl Fn(usize) -> f32,
) -> f32 {
    let tiny_in = if bf16 {
        f32::MIN_POSITIVE
    } else {
        2f32.powi(-14)
    };
    let flush_in = |v: f32, tiny: f32| if v.abs() < tiny { 0.0 } else { v };
    fn flush_keep(v: f32) -> f32 {
        if v.abs() < f32::MIN_POSITIVE {
            v * 0.0
        } else {
            v
        }
    }
    fn tree(p: &[f32]) -> f32 {
        let s = match p.len() {
            1 => p[0],
            n => tree(&p[..n / 2]) + tree(&p[n / 2..]),
        };
        flush_keep(s)
    }
    let mut sum = flush_in(c, f32::MIN_POSITIVE);
    let mut prods = [0f32; 4];
    for k0 in (0..k).step_by(group) {
        let g = group.min(k - k0);
        for t in 0..g {
            let (a, b) = (flush_in(x(k0 + t), tiny_in), flush_in(y(k0 + t), tiny_in));
            // `fmaf(a, b, 0.0)`: the exact product rounded once, -0 + 0 = +0.
            prods[t] = fma32(a, b, 0.0);
        }
        sum = flush_keep(sum + tree(&prods[..g]));
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xf32_group_truncates_inputs_and_floors_the_sum() {
        let one = [1.0f32, 0.0, 0.0, 0.0];
        // 1 + 2^-20 loses its low bits (tf32 keeps 10 mantissa bits): exactly 1.
        assert_eq!(
            xf32_group(&[1.0 + 2f32.powi(-20), 0.0, 0.0, 0.0], &one, 0.0),
            1.0
        );
        // 1 + 2^-10 survives.
        let x = 1.0 + 2f32.powi(-10);
        assert_eq!(xf32_group(&[x, 0.0, 0.0, 0.0], &one, 0.0), x);
        // C below the product's 24-bit alignment window is floored away: a positive C
        // vanishes, a negative one takes one unit of 2^-24 relative to the product.
        assert_eq!(xf32_group(&one, &one, 2f32.powi(-30)), 1.0);
        assert_eq!(
            xf32_group(&one, &one, -(2f32.powi(-30))),
            1.0 - 2f32.powi(-24)
        );
        // Zero products leave C exact; infinities and NaN pass through.
        assert_eq!(xf32_group(&[0.0; 4], &one, -3.5), -3.5);
        assert_eq!(
            xf32_group(&[f32::INFINITY, 0.0, 0.0, 0.0], &one, 1.0),
            f32::INFINITY
        );
        assert!(xf32_group(&[f32::NAN, 0.0, 0.0, 0.0], &one, 1.0).is_nan());
        // A product beyond the f32 range is an infinity of its sign.
        let big = [f32::MAX, 0.0, 0.0, 0.0];
        assert_eq!(xf32_group(&big, &[4.0, 0.0, 0.0, 0.0], 0.0), f32::INFINITY);
    }

    #[test]
    fn fnuz_fp8_values() {
        assert_eq!(fp8_to_f32(0x00, 3, 8), 0.0);
        assert!(fp8_to_f32(0x80, 3, 8).is_nan());
        // E4M3 FNUZ max 0x7f = 1.875 * 2^7 = 240; min denormal 0x01 = 2^-10.
        assert_eq!(fp8_to_f32(0x7f, 3, 8), 240.0);
        assert_eq!(fp8_to_f32(0x01, 3, 8), 2f32.powi(-10));
        // E5M2 FNUZ max 0x7f = 1.75 * 2^15 = 57344; 0x40 = 2^(16-16) = 1.
        assert_eq!(fp8_to_f32(0x7f, 2, 16), 57344.0);
        assert_eq!(fp8_to_f32(0x40, 2, 16), 1.0);
        assert_eq!(fp8_to_f32(0xc0, 2, 16), -1.0);
    }

    #[test]
    fn blgp_patterns() {
        assert_eq!(blgp_lane(40, 1), 8);
        assert_eq!(blgp_lane(3, 2), 35);
        assert_eq!(blgp_lane(56, 3), 8);
        assert_eq!(blgp_lane(37, 7), 53);
    }
}
