//! Directed rounding: MODE.FP_ROUND other than round-to-nearest-even.
//!
//! MODE [1:0] rounds f32 results, [3:2] f64 and f16 results (0 nearest even, 1 toward
//! +inf, 2 toward -inf, 3 toward zero; LLVM `SIDefines.h` `FP_ROUND_*`, and
//! `SIModeRegister.cpp`, which sets the [3:2] field for `v_cvt_f16_f32`). While a wave's
//! round mode is not all-nearest-even, every instruction passes [`Wave::directed`] first:
//! the ops listed here are computed exactly (integer mantissas in `u128`, sticky bit
//! jammed) and rounded once in the asked direction; ops whose result cannot depend on the
//! round mode run on the ordinary path; every other float op faults naming itself, so no
//! answer is ever rounded the wrong way.

use super::{fma32, ftz_f16, Ctx, Enc, Op, Target, Ty, VopForm, Wave, R};

/// A rounding direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rm {
    /// Round to nearest, ties to even.
    Ne,
    /// Toward +infinity.
    Up,
    /// Toward -infinity.
    Down,
    /// Toward zero.
    Zero,
}

impl Rm {
    /// The direction a 2-bit MODE.FP_ROUND field asks for.
    pub(crate) fn from_field(f: u32) -> Rm {
        match f & 3 {
            0 => Rm::Ne,
            1 => Rm::Up,
            2 => Rm::Down,
            _ => Rm::Zero,
        }
    }
}

/// An IEEE binary format: precision (with the hidden bit) and exponent width.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fmt {
    p: u32,
    ebits: u32,
}

pub(crate) const F16: Fmt = Fmt { p: 11, ebits: 5 };
pub(crate) const F32: Fmt = Fmt { p: 24, ebits: 8 };
pub(crate) const F64: Fmt = Fmt { p: 53, ebits: 11 };

impl Fmt {
    fn bias(self) -> i32 {
        (1 << (self.ebits - 1)) - 1
    }
    fn emin(self) -> i32 {
        1 - self.bias()
    }
    fn emask(self) -> u64 {
        (1 << self.ebits) - 1
    }
    fn fbits(self) -> u32 {
        self.p - 1
    }
    fn sign(self) -> u64 {
        1 << (self.fbits() + self.ebits)
    }
    /// A nonzero result below the smallest normal (output-denormal flushing applies).
    fn is_denormal(self, bits: u64) -> bool {
        (bits >> self.fbits()) & self.emask() == 0 && bits & (self.sign() - 1) != 0
    }
}

/// A finite value `(-1)^neg * m * 2^e` (zero when `m == 0`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fin {
    neg: bool,
    m: u128,
    e: i32,
}

/// The exact value of a finite encoding; `None` for infinities and NaNs.
pub(crate) fn decode(f: Fmt, bits: u64) -> Option<Fin> {
    let fb = f.fbits();
    let neg = bits & f.sign() != 0;
    let ef = (bits >> fb) & f.emask();
    let frac = (bits & ((1 << fb) - 1)) as u128;
    if ef == f.emask() {
        return None;
    }
    Some(if ef == 0 {
        Fin {
            neg,
            m: frac,
            e: f.emin() - fb as i32,
        }
    } else {
        Fin {
            neg,
            m: frac | 1 << fb,
            e: ef as i32 - f.bias() - fb as i32,
        }
    })
}

fn nbits(m: u128) -> i32 {
    128 - m.leading_zeros() as i32
}

/// `m >> d` with every shifted-out bit ORed into bit 0 (sticky), so directed rounding still
/// sees an inexact value.
fn jam(m: u128, d: i32) -> u128 {
    if d >= 128 {
        (m != 0) as u128
    } else {
        (m >> d) | ((m & ((1u128 << d) - 1) != 0) as u128)
    }
}

/// Rounds an exact finite value to `f` in direction `rm` (IEEE 754 overflow rules: toward
/// zero or away from the overflow direction gives the largest finite value).
pub(crate) fn round(f: Fmt, x: Fin, rm: Rm) -> u64 {
    let sign = if x.neg { f.sign() } else { 0 };
    if x.m == 0 {
        return sign;
    }
    let fb = f.fbits() as i32;
    let top = x.e + nbits(x.m) - 1;
    let mut q = top.max(f.emin()) - fb;
    let shift = q - x.e;
    #[derive(PartialEq)]
    enum Rest {
        Exact,
        Below,
        Half,
        Above,
    }
    let (mut r, rest) = if shift <= 0 {
        (x.m << (-shift) as u32, Rest::Exact)
    } else if shift > 128 {
        (0, Rest::Below)
    } else {
        let (r, rem) = if shift == 128 {
            (0, x.m)
        } else {
            (x.m >> shift, x.m & ((1u128 << shift) - 1))
        };
        let half = 1u128 << (shift - 1);
        let rest = if rem == 0 {
            Rest::Exact
        } else if rem < half {
            Rest::Below
        } else if rem == half {
            Rest::Half
        } else {
            Rest::Above
        };
        (r, rest)
    };
    let up = match rm {
        Rm::Ne => rest == Rest::Above || (rest == Rest::Half && r & 1 == 1),
        Rm::Up => !x.neg && rest != Rest::Exact,
        Rm::Down => x.neg && rest != Rest::Exact,
        Rm::Zero => false,
    };
    if up {
        r += 1;
    }
    if r >> f.p != 0 {
        r >>= 1;
        q += 1;
    }
    let ef = if r >> fb == 0 {
        0
    } else {
        (q + fb + f.bias()) as u64
    };
    if ef >= f.emask() {
        let inf = sign | f.emask() << fb;
        let max = sign | (f.emask() - 1) << fb | ((1 << fb) - 1);
        return match rm {
            Rm::Ne => inf,
            Rm::Zero => max,
            Rm::Up if x.neg => max,
            Rm::Down if !x.neg => max,
            _ => inf,
        };
    }
    sign | ef << fb | (r as u64 & ((1 << fb) - 1))
}

/// The exact sum (an inexact tail is jammed into the lowest bit, far below any rounding
/// position). An exact zero from opposite signs is -0 only when rounding toward -inf.
pub(crate) fn add(x: Fin, y: Fin, rm: Rm) -> Fin {
    if x.m == 0 && y.m == 0 {
        let neg = if x.neg == y.neg {
            x.neg
        } else {
            rm == Rm::Down
        };
        return Fin { neg, m: 0, e: 0 };
    }
    if x.m == 0 {
        return y;
    }
    if y.m == 0 {
        return x;
    }
    let (mut hi, mut lo) = if x.e + nbits(x.m) >= y.e + nbits(y.m) {
        (x, y)
    } else {
        (y, x)
    };
    // Operands have at most 106 bits; the larger goes to 125 bits, the smaller aligns to it.
    let s = 125 - nbits(hi.m);
    hi.m <<= s;
    hi.e -= s;
    let d = hi.e - lo.e;
    if d <= 0 {
        lo.m <<= (-d) as u32;
    } else {
        lo.m = jam(lo.m, d);
    }
    let e = hi.e;
    if hi.neg == lo.neg {
        Fin {
            neg: hi.neg,
            m: hi.m + lo.m,
            e,
        }
    } else if hi.m > lo.m {
        Fin {
            neg: hi.neg,
            m: hi.m - lo.m,
            e,
        }
    } else if hi.m < lo.m {
        Fin {
            neg: lo.neg,
            m: lo.m - hi.m,
            e,
        }
    } else {
        Fin {
            neg: rm == Rm::Down,
            m: 0,
            e: 0,
        }
    }
}

/// The exact product.
pub(crate) fn mul(x: Fin, y: Fin) -> Fin {
    Fin {
        neg: x.neg ^ y.neg,
        m: x.m * y.m,
        e: x.e + y.e,
    }
}

/// An integer as an exact value.
pub(crate) fn from_int(v: i64) -> Fin {
    Fin {
        neg: v < 0,
        m: v.unsigned_abs() as u128,
        e: 0,
    }
}

/// `x * 2^k`, exact.
pub(crate) fn scale(x: Fin, k: i32) -> Fin {
    Fin {
        e: x.e + k.clamp(-10_000, 10_000),
        ..x
    }
}

/// The float operations computed here, on encodings of one format.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arith {
    Add,
    Mul,
    /// Fused: one rounding.
    Fma,
    /// Unfused multiply then add: two roundings.
    Mad,
}

/// One lane of `k` on the encodings `x`, `y`, `z` of format `f`, rounded by `rm`.
/// Infinities and NaNs take `host` (those results are exact or NaN in every mode).
fn arith(f: Fmt, k: Arith, x: u64, y: u64, z: u64, rm: Rm, host: impl Fn() -> u64) -> u64 {
    let (Some(a), Some(b)) = (decode(f, x), decode(f, y)) else {
        return host();
    };
    match k {
        Arith::Add => round(f, add(a, b, rm), rm),
        Arith::Mul => round(f, mul(a, b), rm),
        Arith::Fma => match decode(f, z) {
            Some(c) => round(f, add(mul(a, b), c, rm), rm),
            None => host(),
        },
        Arith::Mad => {
            let p = round(f, mul(a, b), rm);
            match (decode(f, p), decode(f, z)) {
                (Some(p), Some(c)) => round(f, add(p, c, rm), rm),
                _ => host(),
            }
        }
    }
}

/// The transcendentals (`v_exp/log/rcp/rcp_iflag/rsq/sqrt/sin/cos_f32`, `v_rcp/rsq/sqrt_f64`,
/// `v_rcp/sqrt/rsq/log/exp/sin/cos_f16`). AMD's CDNA2/CDNA3 ISA guides define them by an
/// error bound, not by a rounding direction (LLVM AMDGPUUsage "LLVM IR Intrinsics":
/// `llvm.exp2`/`llvm.log2` "Hardware provides 1ULP accuracy for float, and 0.51ULP for
/// half"), and no public source says whether MODE.FP_ROUND moves their result. The
/// emulator gives them the same value in every round mode: its round-to-nearest value,
/// which lies within the documented bound of the exact result whatever the mode
/// (firmware-notes/isa-gfx9.md "Round modes").
fn approximate(op: u16) -> bool {
    matches!(op, 0x160..=0x16a | 0x17d..=0x181 | 0x189 | 0x18a)
}

/// VALU ops whose result cannot depend on the round mode: integer and bit ops, moves,
/// compares and class tests, min/max, exact conversions (from narrower floats and small
/// integers, float to integer which truncates by definition, `v_cvt_pkrtz` which always
/// rounds toward zero), trunc/ceil/floor/rndne, frexp, `v_div_scale` (unscaled operands
/// pass through; it faults itself otherwise) and `v_div_fixup` (special-case selection, no
/// arithmetic rounding in the ISA pseudocode).
fn valu_insensitive(op: u16) -> bool {
    matches!(
        op,
        0x00..=0x100
            | 0x106..=0x115
            | 0x119..=0x11e
            | 0x126..=0x132
            | 0x134..=0x136
            | 0x13d
            | 0x140..=0x144
            | 0x147
            | 0x148
            | 0x14b
            | 0x150..=0x15a
            | 0x15c..=0x15f
            | 0x16b..=0x16f
            | 0x173
            | 0x174
            | 0x178
            | 0x192
            | 0x1c2
            | 0x1c3
            | 0x1c8..=0x1ca
            | 0x1ce..=0x1d8
            | 0x1de..=0x1e1
            | 0x1e8
            | 0x1e9
            | 0x1ed
            | 0x1f3
            | 0x1fd..=0x202
            | 0x208
            | 0x282
            | 0x283
            | 0x285..=0x287
            | 0x289..=0x291
            | 0x293
            | 0x296
            | 0x29c
            | 0x29d
            | 0x2a0
    )
}

impl Wave {
    /// Runs `op` under a non-nearest-even round mode when its result depends on it.
    /// `Ok(true)`: executed here; `Ok(false)`: the ordinary path computes it (no rounding
    /// involved); `Err`: a rounding-dependent op this model does not round (faults).
    pub(super) fn directed(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<bool> {
        let unmodelled = |w: &Wave, ctx: &Ctx<'_>| {
            w.err(
                ctx,
                format!(
                    "instruction not implemented by the emulator under MODE round mode {:#x} \
                     (only round to nearest even is modelled for it)",
                    w.mode & 0xF
                ),
            )
        };
        match op.enc {
            Enc::Valu => {}
            // v_accvgpr_read/write, packed integer ops and v_pk_mov_b32 do not round.
            // ... and v_pk_min/max_f16 (the result is one of the inputs).
            Enc::Vop3p if matches!(op.op, 0x58 | 0x59 | 0x00..=0x0d | 0x11 | 0x12 | 0x33) => {
                return Ok(false)
            }
            Enc::Vop3p if matches!(op.op, 0x0e..=0x10) => {
                self.directed_pk_f16(ctx, op)?;
                self.lane_instrs += self.exec().count_ones() as u64;
                return Ok(true);
            }
            Enc::Vop3p if matches!(op.op, 0x30..=0x32) && !op.clamp => {
                self.directed_pk_f32(ctx, op)?;
                self.lane_instrs += self.exec().count_ones() as u64;
                return Ok(true);
            }
            Enc::Vop3p | Enc::Mai => return Err(unmodelled(self, ctx)),
            // LDS f32 add; FLAT and buffer f32/f16/bf16/f64 add.
            Enc::Ds if matches!(op.op, 0x15 | 0x35) => return Err(unmodelled(self, ctx)),
            Enc::Flat | Enc::Mubuf if matches!(op.op, 0x4d..=0x4f | 0x52) => {
                return Err(unmodelled(self, ctx))
            }
            _ => return Ok(false),
        }
        if op.omod == 0 && (valu_insensitive(op.op) || approximate(op.op)) {
            return Ok(false);
        }
        // SDWA: `sdwa` stages the selected operands and runs the VOP3 form through
        // `directed_op`.
        if op.form == VopForm::Sdwa {
            return Ok(false);
        }
        let exec = self.exec();
        let mut tmp = self.tmp.take().unwrap_or_default();
        let r = self.directed_op(ctx, op, &mut tmp);
        self.tmp = Some(tmp);
        r?;
        self.lane_instrs += exec.count_ones() as u64;
        Ok(true)
    }

    /// A VALU op (VOP3, e32 or DPP form) under a directed round mode: `Ok(false)` when it
    /// does not round (the ordinary path runs it), `Ok(true)` when computed here, `Err`
    /// when it rounds and is not modelled here.
    pub(super) fn directed_op(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: &Op,
        tmp: &mut super::Tmp,
    ) -> R<bool> {
        if op.omod == 0 && (valu_insensitive(op.op) || approximate(op.op)) {
            return Ok(false);
        }
        let unmodelled = |w: &Wave, ctx: &Ctx<'_>| {
            w.err(
                ctx,
                format!(
                    "instruction not implemented by the emulator under MODE round mode {:#x} \
                     (only round to nearest even is modelled for it)",
                    w.mode & 0xF
                ),
            )
        };
        if op.omod != 0 || op.form == VopForm::Sdwa {
            return Err(unmodelled(self, ctx));
        }
        let sp = Rm::from_field(self.mode);
        let dp = Rm::from_field(self.mode >> 2);
        let mut exec = self.exec();
        if op.form == VopForm::Dpp {
            exec &= self.dpp(ctx, op, exec)?;
        }
        let d = op.dst as usize;
        if self.directed_valu(ctx, op, tmp, sp, dp, exec, d)? {
            Ok(true)
        } else {
            Err(unmodelled(self, ctx))
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn directed_valu(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: &Op,
        tmp: &mut super::Tmp,
        sp: Rm,
        dp: Rm,
        exec: u64,
        d: usize,
    ) -> R<bool> {
        let ftz_in = self.mode & 0x10 == 0;
        let ftz_out = self.mode & 0x20 == 0;
        let ftz64_in = self.mode & 0x40 == 0;
        let ftz64_out = self.mode & 0x80 == 0;
        let ftz16 = self.mode & 0xC0 == 0;
        let clamp = op.clamp;
        let (a, b, c) = (&mut tmp.a, &mut tmp.b, &mut tmp.c);
        let flush32 = |v: &mut [u32; 64]| {
            if ftz_in {
                for x in v.iter_mut() {
                    if *x & 0x7F80_0000 == 0 {
                        *x &= 0x8000_0000;
                    }
                }
            }
        };
        let clamp32 = |x: u32| -> u32 {
            let v = f32::from_bits(x);
            if !clamp {
                x
            } else if v.is_nan() {
                0
            } else {
                v.clamp(0.0, 1.0).to_bits()
            }
        };
        let k = op.op;
        match k {
            // ---- f32 arithmetic (MODE [1:0]) ----
            0x101..=0x103 | 0x105 | 0x116 | 0x13b | 0x1c1 | 0x1cb | 0x117 | 0x118 | 0x1e2 => {
                if k == 0x1e2 && self.vcc() & exec != 0 {
                    return Err(self.err(
                        ctx,
                        "v_div_fmas with VCC set (scaled division) is not modelled",
                    ));
                }
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::F32, b)?;
                match k {
                    0x116 | 0x13b => c.copy_from_slice(self.vreg(ctx, d)?),
                    0x1c1 | 0x1cb | 0x1e2 => self.fetch(ctx, op, 2, Ty::F32, c)?,
                    0x117 | 0x118 => *c = [op.lit; 64],
                    _ => {}
                }
                flush32(a);
                flush32(b);
                flush32(c);
                let fused = ctx.target != Target::Gfx90a;
                let kind = match k {
                    0x101..=0x103 => Arith::Add,
                    0x105 => Arith::Mul,
                    0x116 | 0x1c1 => Arith::Mad,
                    0x117 | 0x118 if !fused => Arith::Mad,
                    _ => Arith::Fma,
                };
                let mut r = [0u32; 64];
                for l in 0..64 {
                    let (mut x, mut y, mut z) = (a[l], b[l], c[l]);
                    match k {
                        0x102 => y ^= 0x8000_0000,
                        0x103 => {
                            (x, y) = (y, x ^ 0x8000_0000);
                        }
                        // v_fmamk / v_madmk: S0 * K + S1.
                        0x117 => (y, z) = (z, y),
                        _ => {}
                    }
                    let host = || {
                        let (p, q, s) = (f32::from_bits(x), f32::from_bits(y), f32::from_bits(z));
                        (match kind {
                            Arith::Add => p + q,
                            Arith::Mul => p * q,
                            Arith::Fma => fma32(p, q, s),
                            Arith::Mad => p * q + s,
                        })
                        .to_bits() as u64
                    };
                    let v = arith(F32, kind, x as u64, y as u64, z as u64, sp, host) as u32;
                    r[l] = clamp32(v);
                }
                self.out32(ctx, F32, &r, exec, ftz_out)?;
                self.write32(ctx, d, &r, exec)?;
            }
            // ---- f64 arithmetic (MODE [3:2]) ----
            0x280 | 0x281 | 0x1cc | 0x104 | 0x1e3 => {
                if k == 0x1e3 && self.vcc() & exec != 0 {
                    return Err(self.err(
                        ctx,
                        "v_div_fmas with VCC set (scaled division) is not modelled",
                    ));
                }
                let (a64, b64, c64) = (&mut tmp.a64, &mut tmp.b64, &mut tmp.c64);
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                self.fetch64(ctx, op, 1, Ty::F64, b64)?;
                match k {
                    0x104 => {
                        let lo = self.vreg(ctx, d)?;
                        let hi = self.vreg(ctx, d + 1)?;
                        for l in 0..64 {
                            c64[l] = lo[l] as u64 | (hi[l] as u64) << 32;
                        }
                    }
                    0x1cc | 0x1e3 => self.fetch64(ctx, op, 2, Ty::F64, c64)?,
                    _ => {}
                }
                // The ordinary path flushes f64 inputs for add/mul/fma (not fmac/div_fmas).
                if ftz64_in && matches!(k, 0x280 | 0x281 | 0x1cc) {
                    for v in [&mut *a64, &mut *b64, &mut *c64] {
                        for x in v.iter_mut() {
                            if *x & 0x7FF0_0000_0000_0000 == 0 {
                                *x &= 1 << 63;
                            }
                        }
                    }
                }
                let kind = match k {
                    0x280 => Arith::Add,
                    0x281 => Arith::Mul,
                    _ => Arith::Fma,
                };
                let mut r = [0u64; 64];
                for l in 0..64 {
                    let (x, y, z) = (a64[l], b64[l], c64[l]);
                    let host = || {
                        let (p, q, s) = (f64::from_bits(x), f64::from_bits(y), f64::from_bits(z));
                        (match kind {
                            Arith::Add => p + q,
                            Arith::Mul => p * q,
                            _ => p.mul_add(q, s),
                        })
                        .to_bits()
                    };
                    let mut v = arith(F64, kind, x, y, z, dp, host);
                    if clamp {
                        let f = f64::from_bits(v);
                        v = if f.is_nan() {
                            0
                        } else {
                            f.clamp(0.0, 1.0).to_bits()
                        };
                    }
                    r[l] = v;
                }
                if ftz64_out && matches!(k, 0x280 | 0x281 | 0x1cc) {
                    self.out64(ctx, &r, exec)?;
                }
                self.write64(ctx, d, &r, exec)?;
            }
            // ---- conversions ----
            0x145 | 0x146 => {
                // v_cvt_f32_i32 / v_cvt_f32_u32 (MODE [1:0]).
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                let r: [u32; 64] = std::array::from_fn(|l| {
                    let v = if k == 0x145 {
                        a[l] as i32 as i64
                    } else {
                        a[l] as i64
                    };
                    clamp32(round(F32, from_int(v), sp) as u32)
                });
                self.write32(ctx, d, &r, exec)?;
            }
            0x14a => {
                // v_cvt_f16_f32: rounds by MODE [3:2] (LLVM SIModeRegister sets the DP field
                // for it); conversions do not flush outputs.
                if clamp {
                    return Ok(false);
                }
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                flush32(a);
                let r: [u32; 64] = std::array::from_fn(|l| match decode(F32, a[l] as u64) {
                    Some(x) => round(F16, x, dp) as u32,
                    None => half::f16::from_f32(f32::from_bits(a[l])).to_bits() as u32,
                });
                self.write32(ctx, d, &r, exec)?;
            }
            0x14f => {
                // v_cvt_f32_f64: an f32 result from an f64 op; which field rounds it is not
                // documented, so it is modelled only when both fields agree.
                if sp != dp {
                    return Ok(false);
                }
                let a64 = &mut tmp.a64;
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                let r: [u32; 64] = std::array::from_fn(|l| {
                    clamp32(match decode(F64, a64[l]) {
                        Some(x) => round(F32, x, sp) as u32,
                        None => (f64::from_bits(a64[l]) as f32).to_bits(),
                    })
                });
                self.out32(ctx, F32, &r, exec, ftz_out)?;
                self.write32(ctx, d, &r, exec)?;
            }
            0x288 => {
                // v_ldexp_f32: exact scaling, rounded only at overflow / into denormals.
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                flush32(a);
                let r: [u32; 64] = std::array::from_fn(|l| {
                    clamp32(match decode(F32, a[l] as u64) {
                        Some(x) => round(F32, scale(x, b[l] as i32), sp) as u32,
                        None => a[l],
                    })
                });
                self.out32(ctx, F32, &r, exec, ftz_out)?;
                self.write32(ctx, d, &r, exec)?;
            }
            0x284 => {
                // v_ldexp_f64 (the ordinary path does not flush it either).
                if clamp {
                    return Ok(false);
                }
                let a64 = &mut tmp.a64;
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                let r: [u64; 64] = std::array::from_fn(|l| match decode(F64, a64[l]) {
                    Some(x) => round(F64, scale(x, b[l] as i32), dp),
                    None => a64[l],
                });
                self.write64(ctx, d, &r, exec)?;
            }
            // ---- f16 (MODE [3:2]) ----
            0x11f..=0x122 | 0x206 => {
                if k == 0x206 && (op.opsel != 0 || clamp) {
                    return Ok(false);
                }
                self.fetch(ctx, op, 0, Ty::F16, a)?;
                self.fetch(ctx, op, 1, Ty::F16, b)?;
                if k == 0x206 {
                    self.fetch(ctx, op, 2, Ty::F16, c)?;
                }
                // The ordinary path flushes the VOP2 f16 ops' inputs and outputs, not
                // v_fma_f16's.
                let fl = ftz16 && k != 0x206;
                let mut r = [0u32; 64];
                for l in 0..64 {
                    let (mut x, mut y, z) = (
                        ftz_f16(a[l] as u16, fl) as u64,
                        ftz_f16(b[l] as u16, fl) as u64,
                        c[l] as u16 as u64,
                    );
                    match k {
                        0x120 => y ^= 0x8000,
                        0x121 => (x, y) = (y, x ^ 0x8000),
                        _ => {}
                    }
                    let kind = match k {
                        0x122 => Arith::Mul,
                        0x206 => Arith::Fma,
                        _ => Arith::Add,
                    };
                    let host = || {
                        let h = |v: u64| half::f16::from_bits(v as u16).to_f64();
                        let v = match kind {
                            Arith::Add => h(x) + h(y),
                            Arith::Mul => h(x) * h(y),
                            _ => h(x) * h(y) + h(z),
                        };
                        half::f16::from_f64(v).to_bits() as u64
                    };
                    let mut v = arith(F16, kind, x, y, z, dp, host) as u16;
                    if clamp {
                        let f = half::f16::from_bits(v).to_f32();
                        v = if f.is_nan() {
                            0
                        } else {
                            half::f16::from_f32(f.clamp(0.0, 1.0)).to_bits()
                        };
                    }
                    r[l] = v as u32;
                }
                if fl {
                    self.out32(ctx, F16, &r, exec, true)?;
                }
                self.write32(ctx, d, &r, exec)?;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// `v_pk_fma_f32` / `v_pk_mul_f32` / `v_pk_add_f32` rounded by MODE [1:0]: each result
    /// half takes the source halves op_sel (low) / op_sel_hi (high) choose, neg / neg_hi
    /// negate them (as the ordinary path; no denormal flushing there either).
    fn directed_pk_f32(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        let rm = Rm::from_field(self.mode);
        let exec = self.exec();
        let nsrc = if op.op == 0x30 { 3 } else { 2 };
        let mut s = [[0u64; 64]; 3];
        for (i, v) in s.iter_mut().enumerate().take(nsrc) {
            self.fetch64(ctx, op, i, Ty::B32, v)?;
        }
        let pick = |i: usize, x: u64, hi: bool| pk_operand(op, i, x, hi, 32);
        let kind = match op.op {
            0x30 => Arith::Fma,
            0x31 => Arith::Mul,
            _ => Arith::Add,
        };
        let mut r = [0u64; 64];
        for l in 0..64 {
            let half = |hi: bool| -> u64 {
                let (x, y, z) = (
                    pick(0, s[0][l], hi),
                    pick(1, s[1][l], hi),
                    pick(2, s[2][l], hi),
                );
                let host = || {
                    let (p, q, t) = (
                        f32::from_bits(x as u32),
                        f32::from_bits(y as u32),
                        f32::from_bits(z as u32),
                    );
                    (match kind {
                        Arith::Fma => fma32(p, q, t),
                        Arith::Mul => p * q,
                        _ => p + q,
                    })
                    .to_bits() as u64
                };
                arith(F32, kind, x, y, z, rm, host)
            };
            r[l] = half(false) | half(true) << 32;
        }
        self.write64(ctx, op.dst as usize, &r, exec)
    }

    /// `v_pk_fma_f16` / `v_pk_add_f16` / `v_pk_mul_f16` rounded by MODE [3:2], with the
    /// ordinary path's half selection, negation, clamp and flushing (fma flushes its inputs;
    /// all flush outputs while FP_DENORM[7:6] is 0 — a denormal result then faults).
    fn directed_pk_f16(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        let rm = Rm::from_field(self.mode >> 2);
        let ftz16 = self.mode & 0xC0 == 0;
        let exec = self.exec();
        let k = op.op;
        let nsrc = if k == 0x0e { 3 } else { 2 };
        let mut s = [[0u32; 64]; 3];
        for (i, v) in s.iter_mut().enumerate().take(nsrc) {
            self.fetch(ctx, op, i, Ty::F16, v)?;
        }
        let pick = |i: usize, x: u32, hi: bool| -> u64 {
            let v = pk_operand(op, i, u64::from(x), hi, 16);
            ftz_f16(v as u16, ftz16 && k == 0x0e) as u64
        };
        let kind = match k {
            0x0e => Arith::Fma,
            0x0f => Arith::Add,
            _ => Arith::Mul,
        };
        let clamp = op.clamp;
        let mut r = [0u32; 64];
        let mut halves = [0u32; 128];
        for l in 0..64 {
            for hi in [false, true] {
                let (x, y, z) = (
                    pick(0, s[0][l], hi),
                    pick(1, s[1][l], hi),
                    pick(2, s[2][l], hi),
                );
                let host = || {
                    let h = |v: u64| half::f16::from_bits(v as u16).to_f64();
                    let v = match kind {
                        Arith::Fma => h(x) * h(y) + h(z),
                        Arith::Add => h(x) + h(y),
                        _ => h(x) * h(y),
                    };
                    half::f16::from_f64(v).to_bits() as u64
                };
                let mut v = arith(F16, kind, x, y, z, rm, host) as u16;
                if clamp {
                    let f = half::f16::from_bits(v).to_f32();
                    v = if f.is_nan() {
                        0
                    } else {
                        half::f16::from_f32(f.clamp(0.0, 1.0)).to_bits()
                    };
                }
                halves[2 * l + hi as usize] = v as u32;
            }
            r[l] = halves[2 * l] | halves[2 * l + 1] << 16;
        }
        if ftz16 {
            let h: [u32; 64] = std::array::from_fn(|l| halves[2 * l]);
            let g: [u32; 64] = std::array::from_fn(|l| halves[2 * l + 1]);
            self.out32(ctx, F16, &h, exec, true)?;
            self.out32(ctx, F16, &g, exec, true)?;
        }
        self.write32(ctx, op.dst as usize, &r, exec)
    }

    /// Output-denormal flushing under a directed round mode: whether the hardware rounds
    /// before or after flushing is not documented, so a denormal result that MODE would
    /// flush faults instead.
    fn out32(&self, ctx: &Ctx<'_>, f: Fmt, r: &[u32; 64], exec: u64, ftz: bool) -> R<()> {
        if ftz && (0..64).any(|l| exec >> l & 1 != 0 && f.is_denormal(r[l] as u64)) {
            return Err(self.denormal_err(ctx));
        }
        Ok(())
    }

    fn out64(&self, ctx: &Ctx<'_>, r: &[u64; 64], exec: u64) -> R<()> {
        if (0..64).any(|l| exec >> l & 1 != 0 && F64.is_denormal(r[l])) {
            return Err(self.denormal_err(ctx));
        }
        Ok(())
    }

    fn denormal_err(&self, ctx: &Ctx<'_>) -> super::ShaderError {
        self.err(
            ctx,
            "a denormal result under a directed round mode while MODE flushes output \
             denormals is not modelled",
        )
    }
}

/// VOP3P operand `i` of a packed op for the low (`hi` false) or high result half: the
/// `width`-bit half of `x` that op_sel (low) / op_sel_hi (high) selects, its sign negated
/// by neg (low) / neg_hi (high) (CDNA3 ISA "VOP3P": OPSEL, OPSEL_HI, NEG, NEG_HI).
fn pk_operand(op: &Op, i: usize, x: u64, hi: bool, width: u32) -> u64 {
    let sel = if hi {
        (op.ext >> i) & 1
    } else {
        (op.opsel as u32 >> i) & 1
    };
    let neg = u64::from((if hi { op.neg_hi } else { op.neg } >> i) & 1);
    let mask = (1u64 << width) - 1;
    ((x >> (width * sel)) & mask) ^ neg << (width - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_even_matches_the_host() {
        let vals = [
            1.0f32, -3.5, 1e-40, -1e-45, 3.4e38, 1.0e-7, 0.1, -0.0, 0.0, 12345.678,
        ];
        for &x in &vals {
            for &y in &vals {
                let (a, b) = (
                    decode(F32, x.to_bits() as u64),
                    decode(F32, y.to_bits() as u64),
                );
                let (a, b) = (a.unwrap(), b.unwrap());
                assert_eq!(
                    round(F32, add(a, b, Rm::Ne), Rm::Ne) as u32,
                    (x + y).to_bits(),
                    "{x} + {y}"
                );
                assert_eq!(
                    round(F32, mul(a, b), Rm::Ne) as u32,
                    (x * y).to_bits(),
                    "{x} * {y}"
                );
            }
        }
    }

    /// Random encodings (every exponent, extremes favoured) through add, mul, fma and
    /// two-rounding mad in all four directions, against `rustc_apfloat` (a software IEEE
    /// implementation sharing no code with this module).
    #[test]
    fn matches_rustc_apfloat_on_random_operands() {
        use rustc_apfloat::ieee::{Double, Half, Single};
        use rustc_apfloat::{Float, Round};
        fn check<F: Float>(f: Fmt, bits: u32, iters: usize, seed: u64) {
            let mut x = seed;
            let mut next = move || {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                x
            };
            let ebits = f.ebits as u64;
            let fb = f.fbits() as u64;
            let mut gen = move || -> u64 {
                let r = next();
                let e = match r % 8 {
                    0 => 0,
                    1 => 1,
                    2 => (1 << ebits) - 2,
                    3 => (1 << (ebits - 1)) - 1 + (r >> 8) % 3,
                    _ => (r >> 8) % ((1 << ebits) - 1),
                };
                let m = next() & ((1 << fb) - 1);
                let m = if r % 5 == 0 { m & !0xF } else { m };
                ((r >> 40) & 1) << (bits - 1) | e << fb | m
            };
            let mask = if bits == 64 {
                u64::MAX
            } else {
                (1u64 << bits) - 1
            };
            for _ in 0..iters {
                let (a, b, c) = (gen() & mask, gen() & mask, gen() & mask);
                let (fa, fb_, fc) = (
                    F::from_bits(a as u128),
                    F::from_bits(b as u128),
                    F::from_bits(c as u128),
                );
                for (rm, rr) in [
                    (Rm::Ne, Round::NearestTiesToEven),
                    (Rm::Up, Round::TowardPositive),
                    (Rm::Down, Round::TowardNegative),
                    (Rm::Zero, Round::TowardZero),
                ] {
                    let host = || u64::MAX; // never taken for finite operands
                    let eq = |got: u64, want: F, what: &str| {
                        if want.is_nan() {
                            return;
                        }
                        assert_eq!(
                            got as u128,
                            want.to_bits(),
                            "{what} {a:#x} {b:#x} {c:#x} {rm:?}"
                        );
                    };
                    let finite = |v: u64| decode(f, v).is_some();
                    if !(finite(a) && finite(b) && finite(c)) {
                        continue;
                    }
                    eq(
                        arith(f, Arith::Add, a, b, 0, rm, host),
                        fa.add_r(fb_, rr).value,
                        "add",
                    );
                    eq(
                        arith(f, Arith::Mul, a, b, 0, rm, host),
                        fa.mul_r(fb_, rr).value,
                        "mul",
                    );
                    let fma = fa.mul_add_r(fb_, fc, rr).value;
                    eq(arith(f, Arith::Fma, a, b, c, rm, host), fma, "fma");
                    let p = fa.mul_r(fb_, rr).value;
                    if !p.is_finite() {
                        continue;
                    }
                    let mad = p.add_r(fc, rr).value;
                    eq(arith(f, Arith::Mad, a, b, c, rm, host), mad, "mad");
                }
            }
        }
        check::<Half>(F16, 16, 20_000, 1);
        check::<Single>(F32, 32, 20_000, 2);
        check::<Double>(F64, 64, 20_000, 3);
    }

    #[test]
    fn directed_overflow_and_tiny() {
        let max = decode(F32, f32::MAX.to_bits() as u64).unwrap();
        let two = decode(F32, 2f32.to_bits() as u64).unwrap();
        assert_eq!(
            round(F32, mul(max, two), Rm::Zero) as u32,
            f32::MAX.to_bits()
        );
        assert_eq!(
            round(F32, mul(max, two), Rm::Up) as u32,
            f32::INFINITY.to_bits()
        );
        let tiny = decode(F32, 1e-45f32.to_bits() as u64).unwrap();
        let half = decode(F32, 0.5f32.to_bits() as u64).unwrap();
        assert_eq!(round(F32, mul(tiny, half), Rm::Up) as u32, 1);
        assert_eq!(round(F32, mul(tiny, half), Rm::Zero) as u32, 0);
        let one = decode(F32, 1f32.to_bits() as u64).unwrap();
        let neg_one = Fin { neg: true, ..one };
        assert_eq!(
            round(F32, add(one, neg_one, Rm::Down), Rm::Down) as u32,
            0x8000_0000
        );
    }
}
