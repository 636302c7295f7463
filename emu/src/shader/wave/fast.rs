//! The VALU fast path: the common unmodified VOP1/VOP2/VOPC/VOP3 operations (the
//! [`Fast`] kinds chosen at lowering) as straight loops over the 64 lanes.
//!
//! A VGPR source is read in place (a `&[u32; 64]` into the register file, no copy); a
//! scalar source is broadcast into a buffer of the wave. The result goes to a buffer of the
//! wave, then to the destination VGPR: a plain copy under a full EXEC, a select otherwise.
//! The lane loops have fixed trip counts over fixed-size arrays, so they carry no bounds
//! checks and vectorise; the register indices are checked once per instruction.
//!
//! Every kind computes exactly what the general path (`Wave::valu_ops`) computes for the
//! same op; when a condition the fast path does not model holds at run time (MODE flushes
//! f32 denormals, a register beyond the wave's allocation, an operand code other than an
//! SGPR, inline constant or literal) it returns `false` and the general path runs the op
//! (and raises its fault, if any).

use super::{fma_lanes_into, fma_lanes_s_into, mask2, Wave, EXEC, VCC};
use crate::shader::lower::{Fast, Op, VopForm};

type Lanes = [u32; 64];

/// Buffers of the fast path: broadcast scalar sources and the result (kept in the wave,
/// so nothing 256-byte is zeroed per instruction).
pub(crate) struct FastBufs {
    bc: [Lanes; 3],
    out: Lanes,
    out_hi: Lanes,
}

impl Default for Box<FastBufs> {
    fn default() -> Self {
        Box::new(FastBufs {
            bc: [[0; 64]; 3],
            out: [0; 64],
            out_hi: [0; 64],
        })
    }
}

/// A 32-bit scalar source (SGPR, inline integer or f32 constant, literal); `None` for the
/// codes the general path handles (apertures, VCCZ/EXECZ/SCC, LDS_DIRECT).
#[inline(always)]
fn scalar(s: &[u32; 128], code: u16, lit: u32) -> Option<u32> {
    Some(match code {
        0..=127 => s[code as usize],
        128..=192 => (code - 128) as u32,
        193..=208 => (-((code - 192) as i32)) as u32,
        240..=248 => super::f32_inline(code)?.to_bits(),
        255 => lit,
        _ => return None,
    })
}

/// A 64-bit scalar source read as the general path's `rs64(.., f64ty = false)`.
#[inline(always)]
fn scalar64(s: &[u32; 128], code: u16, lit: u32) -> Option<u64> {
    Some(match code {
        0..=126 => s[code as usize] as u64 | (s[code as usize + 1] as u64) << 32,
        128..=192 => (code - 128) as u64,
        193..=208 => (-((code - 192) as i64)) as u64,
        240..=248 => super::f32_inline(code)?.to_bits() as u64,
        255 => lit as u64,
        _ => return None,
    })
}

/// VGPR `r` of the register file (`nregs` registers granted).
#[inline(always)]
fn vgpr(v: &[u32], nregs: usize, r: usize) -> Option<&Lanes> {
    if r >= nregs {
        return None;
    }
    v.get(r * 64..r * 64 + 64)?.try_into().ok()
}

/// Source operand `code`: the VGPR in place, or the scalar value broadcast into `buf`.
#[inline(always)]
fn src<'a>(
    v: &'a [u32],
    nregs: usize,
    s: &[u32; 128],
    code: u16,
    lit: u32,
    buf: &'a mut Lanes,
) -> Option<&'a Lanes> {
    if code >= 256 {
        vgpr(v, nregs, code as usize - 256)
    } else {
        *buf = [scalar(s, code, lit)?; 64];
        Some(buf)
    }
}

/// Writes `r` to `d` under `exec`.
#[inline(always)]
fn store(d: &mut Lanes, r: &Lanes, exec: u64) {
    if exec == u64::MAX {
        *d = *r;
    } else {
        super::memfast::merge(d, r, exec);
    }
}

#[inline(always)]
fn map1(a: &Lanes, out: &mut Lanes, f: impl Fn(u32) -> u32) {
    for l in 0..64 {
        out[l] = f(a[l]);
    }
}

#[inline(always)]
fn map2(a: &Lanes, b: &Lanes, out: &mut Lanes, f: impl Fn(u32, u32) -> u32) {
    for l in 0..64 {
        out[l] = f(a[l], b[l]);
    }
}

#[inline(always)]
fn map2s(x: u32, b: &Lanes, out: &mut Lanes, f: impl Fn(u32, u32) -> u32) {
    for l in 0..64 {
        out[l] = f(x, b[l]);
    }
}

#[inline(always)]
fn map3s(x: u32, b: &Lanes, c: &Lanes, out: &mut Lanes, f: impl Fn(u32, u32, u32) -> u32) {
    for l in 0..64 {
        out[l] = f(x, b[l], c[l]);
    }
}

#[inline(always)]
fn map3(a: &Lanes, b: &Lanes, c: &Lanes, out: &mut Lanes, f: impl Fn(u32, u32, u32) -> u32) {
    for l in 0..64 {
        out[l] = f(a[l], b[l], c[l]);
    }
}

#[inline(always)]
fn fl(x: u32) -> f32 {
    f32::from_bits(x)
}

/// The lanes where condition `c` (VOPC low opcode bits) holds for f32 operands; the same
/// predicates as the general path's `cmp_mask`.
#[allow(clippy::neg_cmp_op_on_partial_ord, clippy::nonminimal_bool)]
fn cmp_f32(c: u8, a: &Lanes, b: &Lanes) -> u64 {
    let (a, b) = (a.map(fl), b.map(fl));
    super::cmp_mask(c, &a, &b)
}

/// Writes a 64-bit scalar destination as the general path's `ws64`.
#[inline(always)]
fn ws64(s: &mut [u32; 128], code: u16, x: u64) {
    if let Some(r) = s.get_mut(code as usize) {
        *r = x as u32;
    }
    if let Some(r) = s.get_mut(code as usize + 1) {
        *r = (x >> 32) as u32;
    }
}

impl Wave {
    /// Runs `op` (of kind `op.fast`) on the fast path; `false` when the general path must
    /// (nothing was written then).
    #[inline]
    pub(crate) fn valu_fast(&mut self, op: &Op) -> bool {
        let exec = self.exec();
        // f32 arithmetic as plain host arithmetic needs MODE to keep f32 denormals
        // (FP_DENORM[5:4] = 3; the general path flushes otherwise) and to round f32 to
        // nearest even (FP_ROUND[1:0] = 0; `round.rs` takes the other modes before this).
        let keep_denorm = self.mode & 0x33 == 0x30;
        let e32 = op.form == VopForm::E32;
        let nregs = self.nregs;
        let lit = op.lit;
        let Wave { v, s, fast, .. } = self;
        let FastBufs { bc, out, out_hi } = &mut **fast;
        let [b0, b1, b2] = bc;
        let vv: &[u32] = v;
        macro_rules! s0 {
            () => {
                match src(vv, nregs, s, op.src[0], lit, b0) {
                    Some(x) => x,
                    None => return false,
                }
            };
        }
        macro_rules! s1 {
            () => {
                match src(vv, nregs, s, op.src[1], lit, b1) {
                    Some(x) => x,
                    None => return false,
                }
            };
        }
        macro_rules! s2 {
            () => {
                match src(vv, nregs, s, op.src[2], lit, b2) {
                    Some(x) => x,
                    None => return false,
                }
            };
        }
        macro_rules! f32op {
            () => {
                if !keep_denorm {
                    return false;
                }
            };
        }
        macro_rules! u1 {
            ($f:expr) => {{
                map1(s0!(), out, $f);
            }};
        }
        // src0 is the operand that is most often scalar (the only one VOP2/VOPC allow):
        // a loop with it as a plain value, no broadcast.
        macro_rules! u2 {
            ($f:expr) => {{
                let f = $f;
                if op.src[0] < 256 {
                    let Some(x) = scalar(s, op.src[0], lit) else {
                        return false;
                    };
                    map2s(x, s1!(), out, f);
                } else {
                    map2(s0!(), s1!(), out, f);
                }
            }};
        }
        macro_rules! u3 {
            ($f:expr) => {{
                let f = $f;
                if op.src[0] < 256 {
                    let Some(x) = scalar(s, op.src[0], lit) else {
                        return false;
                    };
                    map3s(x, s1!(), s2!(), out, f);
                } else {
                    map3(s0!(), s1!(), s2!(), out, f);
                }
            }};
        }
        macro_rules! f2 {
            ($f:expr) => {{
                f32op!();
                let f = $f;
                u2!(move |x, y| f(fl(x), fl(y)).to_bits());
            }};
        }
        let d = op.dst as usize;
        // The 64-bit kinds and the compares/carries write elsewhere: handled first.
        match op.fast {
            Fast::CmpF32(..) | Fast::CmpI32(..) | Fast::CmpU32(..) => {
                let (a, b) = (s0!(), s1!());
                let (mask, x) = match op.fast {
                    Fast::CmpF32(c, x) => {
                        f32op!();
                        (cmp_f32(c, a, b), x)
                    }
                    Fast::CmpI32(c, x) => (
                        super::cmp_mask(c, &a.map(|v| v as i32), &b.map(|v| v as i32)),
                        x,
                    ),
                    Fast::CmpU32(c, x) => (super::cmp_mask(c, a, b), x),
                    _ => (0, false),
                };
                let mask = mask & exec;
                let sd = if e32 { VCC } else { op.sdst };
                ws64(s, sd, mask);
                if x {
                    ws64(s, EXEC, mask);
                }
                return true;
            }
            Fast::AddCo | Fast::SubCo | Fast::SubrevCo | Fast::AddcCo => {
                let (a, b) = (s0!(), s1!());
                let cout = match op.fast {
                    Fast::AddCo => {
                        map2(a, b, out, u32::wrapping_add);
                        mask2(a, b, |x, y| x.checked_add(y).is_none())
                    }
                    Fast::SubCo => {
                        map2(a, b, out, u32::wrapping_sub);
                        mask2(a, b, |x, y| y > x)
                    }
                    Fast::SubrevCo => {
                        map2(a, b, out, |x, y| y.wrapping_sub(x));
                        mask2(a, b, |x, y| x > y)
                    }
                    _ => {
                        let cin = if e32 {
                            s[106] as u64 | (s[107] as u64) << 32
                        } else {
                            match scalar64(s, op.src[2], lit) {
                                Some(m) => m,
                                None => return false,
                            }
                        };
                        let ci: Lanes = std::array::from_fn(|l| (cin >> l) as u32 & 1);
                        map3(a, b, &ci, out, |x, y, c| x.wrapping_add(y).wrapping_add(c));
                        let mut m = 0u64;
                        for l in 0..64 {
                            let s = a[l] as u64 + b[l] as u64 + ci[l] as u64;
                            m |= (s >> 32) << l;
                        }
                        m
                    }
                };
                let Some(dv) = vgpr_mut(v, nregs, d) else {
                    return false;
                };
                store(dv, out, exec);
                let sd = if e32 { VCC } else { op.sdst };
                ws64(s, sd, cout & exec);
                return true;
            }
            Fast::MovB64 | Fast::LshlAddU64 | Fast::LshlrevB64 => {
                // Operands as the general path's fetch64(.., Ty::B32).
                let get64 = |code: u16, lo: &mut Lanes, hi: &mut Lanes| -> Option<()> {
                    if code >= 256 {
                        let r = code as usize - 256;
                        *lo = *vgpr(vv, nregs, r)?;
                        *hi = *vgpr(vv, nregs, r + 1)?;
                    } else {
                        let x = scalar64(s, code, lit)?;
                        *lo = [x as u32; 64];
                        *hi = [(x >> 32) as u32; 64];
                    }
                    Some(())
                };
                let (lo, hi) = (&mut *out, &mut *out_hi);
                let ok = match op.fast {
                    Fast::MovB64 => get64(op.src[0], lo, hi).is_some(),
                    Fast::LshlAddU64 => {
                        let [x0, x1, _] = bc;
                        get64(op.src[0], x0, x1).is_some()
                            && get64(op.src[2], lo, hi).is_some()
                            && if op.src[1] < 256 {
                                // A uniform shift (the common `v_lshl_add_u64 .., 0, ..`): one
                                // count for every lane, so the loop vectorises.
                                match scalar(s, op.src[1], lit) {
                                    Some(k) => {
                                        shl64(x0, x1, k & 7);
                                        add64(lo, hi, x0, x1);
                                        true
                                    }
                                    None => false,
                                }
                            } else {
                                match vgpr(vv, nregs, op.src[1] as usize - 256) {
                                    Some(sh) => {
                                        for l in 0..64 {
                                            let a = (x0[l] as u64 | (x1[l] as u64) << 32)
                                                << (sh[l] & 7);
                                            let r =
                                                a.wrapping_add(lo[l] as u64 | (hi[l] as u64) << 32);
                                            lo[l] = r as u32;
                                            hi[l] = (r >> 32) as u32;
                                        }
                                        true
                                    }
                                    None => false,
                                }
                            }
                    }
                    _ if op.src[0] < 256 => {
                        // A uniform shift count: vectorises.
                        let [x0, x1, _] = bc;
                        match scalar(s, op.src[0], lit) {
                            Some(k) => {
                                let k = k & 63;
                                get64(op.src[1], x0, x1).is_some() && {
                                    shl64(x0, x1, k);
                                    *lo = *x0;
                                    *hi = *x1;
                                    true
                                }
                            }
                            None => false,
                        }
                    }
                    _ => {
                        let [x0, x1, _] = bc;
                        match vgpr(vv, nregs, op.src[0] as usize - 256) {
                            Some(sh) => {
                                let sh = *sh;
                                get64(op.src[1], x0, x1).is_some() && {
                                    for l in 0..64 {
                                        let r =
                                            (x0[l] as u64 | (x1[l] as u64) << 32) << (sh[l] & 63);
                                        lo[l] = r as u32;
                                        hi[l] = (r >> 32) as u32;
                                    }
                                    true
                                }
                            }
                            None => false,
                        }
                    }
                };
                if !ok {
                    return false;
                }
                let Some(dv) = vgpr_mut(v, nregs, d) else {
                    return false;
                };
                store(dv, lo, exec);
                let Some(dv) = vgpr_mut(v, nregs, d + 1) else {
                    return false;
                };
                store(dv, hi, exec);
                return true;
            }
            _ => {}
        }
        match op.fast {
            Fast::AddF32 => f2!(|x: f32, y: f32| x + y),
            Fast::SubF32 => f2!(|x: f32, y: f32| x - y),
            Fast::SubrevF32 => f2!(|x: f32, y: f32| y - x),
            Fast::MulF32 => f2!(|x: f32, y: f32| x * y),
            Fast::MinF32 => f2!(|x: f32, y: f32| super::fmin(x, y)),
            Fast::MaxF32 => f2!(|x: f32, y: f32| super::fmax(x, y)),
            Fast::FmaF32 => {
                f32op!();
                if op.src[0] < 256 {
                    let Some(x) = scalar(s, op.src[0], lit) else {
                        return false;
                    };
                    fma_lanes_s_into(x, s1!(), s2!(), out);
                } else {
                    fma_lanes_into(s0!(), s1!(), s2!(), out);
                }
            }
            Fast::FmacF32 | Fast::MacF32 => {
                f32op!();
                let Some(dd) = vgpr(vv, nregs, d) else {
                    return false;
                };
                if op.fast == Fast::FmacF32 && op.src[0] < 256 {
                    let Some(x) = scalar(s, op.src[0], lit) else {
                        return false;
                    };
                    fma_lanes_s_into(x, s1!(), dd, out);
                } else if op.fast == Fast::FmacF32 {
                    fma_lanes_into(s0!(), s1!(), dd, out);
                } else {
                    map3(s0!(), s1!(), dd, out, |x, y, z| {
                        (fl(x) * fl(y) + fl(z)).to_bits()
                    });
                }
            }
            Fast::MadF32 => {
                f32op!();
                map3(s0!(), s1!(), s2!(), out, |x, y, z| {
                    (fl(x) * fl(y) + fl(z)).to_bits()
                });
            }
            Fast::CvtF32U32 => {
                f32op!();
                u1!(|x: u32| (x as f32).to_bits())
            }
            Fast::CvtF32I32 => {
                f32op!();
                u1!(|x: u32| (x as i32 as f32).to_bits())
            }
            Fast::Mov => {
                let a = s0!();
                *out = *a;
            }
            Fast::AddU32 => u2!(u32::wrapping_add),
            Fast::SubU32 => u2!(u32::wrapping_sub),
            Fast::SubrevU32 => u2!(|x: u32, y: u32| y.wrapping_sub(x)),
            Fast::Lshlrev => u2!(|x: u32, y: u32| y << (x & 31)),
            Fast::Lshrrev => u2!(|x: u32, y: u32| y >> (x & 31)),
            Fast::Ashrrev => u2!(|x: u32, y: u32| ((y as i32) >> (x & 31)) as u32),
            Fast::And => u2!(|x: u32, y: u32| x & y),
            Fast::Or => u2!(|x: u32, y: u32| x | y),
            Fast::Xor => u2!(|x: u32, y: u32| x ^ y),
            Fast::MinI32 => u2!(|x: u32, y: u32| (x as i32).min(y as i32) as u32),
            Fast::MaxI32 => u2!(|x: u32, y: u32| (x as i32).max(y as i32) as u32),
            Fast::MinU32 => u2!(|x: u32, y: u32| x.min(y)),
            Fast::MaxU32 => u2!(|x: u32, y: u32| x.max(y)),
            Fast::MulU32U24 => u2!(|x: u32, y: u32| (x & 0xFF_FFFF).wrapping_mul(y & 0xFF_FFFF)),
            Fast::MulLoU32 => u2!(u32::wrapping_mul),
            Fast::MulHiU32 => u2!(|x: u32, y: u32| ((x as u64 * y as u64) >> 32) as u32),
            Fast::MadU32U24 => u3!(|x: u32, y: u32, z: u32| (x & 0xFF_FFFF)
                .wrapping_mul(y & 0xFF_FFFF)
                .wrapping_add(z)),
            Fast::BfeU32 => u3!(|x: u32, y: u32, z: u32| {
                let (o, w) = (y & 31, z & 31);
                ((x as u64 >> o) & ((1u64 << w) - 1)) as u32
            }),
            Fast::Bfi => u3!(|x: u32, y: u32, z: u32| (x & y) | (!x & z)),
            Fast::Add3 => u3!(|x: u32, y: u32, z: u32| x.wrapping_add(y).wrapping_add(z)),
            Fast::LshlAdd => u3!(|x: u32, y: u32, z: u32| (x << (y & 31)).wrapping_add(z)),
            Fast::AddLshl => u3!(|x: u32, y: u32, z: u32| x.wrapping_add(y) << (z & 31)),
            Fast::LshlOr => u3!(|x: u32, y: u32, z: u32| (x << (y & 31)) | z),
            Fast::AndOr => u3!(|x: u32, y: u32, z: u32| (x & y) | z),
            Fast::Or3 => u3!(|x: u32, y: u32, z: u32| x | y | z),
            Fast::Xad => u3!(|x: u32, y: u32, z: u32| (x ^ y).wrapping_add(z)),
            Fast::Cndmask => {
                let m = if e32 {
                    s[106] as u64 | (s[107] as u64) << 32
                } else {
                    match scalar64(s, op.src[2], lit) {
                        Some(m) => m,
                        None => return false,
                    }
                };
                let (a, b) = (s0!(), s1!());
                for l in 0..64 {
                    let k = 0u32.wrapping_sub((m >> l) as u32 & 1);
                    out[l] = (b[l] & k) | (a[l] & !k);
                }
            }
            _ => return false,
        }
        let Some(dv) = vgpr_mut(v, nregs, d) else {
            return false;
        };
        store(dv, out, exec);
        true
    }
}

/// VGPR `r` for writing.
#[inline(always)]
fn vgpr_mut(v: &mut [u32], nregs: usize, r: usize) -> Option<&mut Lanes> {
    if r >= nregs {
        return None;
    }
    v.get_mut(r * 64..r * 64 + 64)?.try_into().ok()
}

/// Shifts the 64-bit lanes `hi:lo` left by the uniform count `k` (0..=63), as 32-bit
/// lane operations (which vectorise, where a loop over `u64` lanes joined from two `u32`
/// registers does not).
#[inline(always)]
fn shl64(lo: &mut Lanes, hi: &mut Lanes, k: u32) {
    if k == 0 {
        // `v_lshl_add_u64 .., 0, ..`: the compilers' 64-bit add.
        return;
    }
    if k >= 32 {
        for l in 0..64 {
            hi[l] = lo[l] << (k - 32);
            lo[l] = 0;
        }
    } else {
        // `lo >> (32 - k)` as two shifts: defined for k = 0 too (it gives 0).
        for l in 0..64 {
            hi[l] = hi[l] << k | (lo[l] >> 1) >> (31 - k);
            lo[l] <<= k;
        }
    }
}

/// `hi:lo += bh:bl` over 64-bit lanes, as 32-bit lane operations with the carry.
#[inline(always)]
fn add64(lo: &mut Lanes, hi: &mut Lanes, bl: &Lanes, bh: &Lanes) {
    for l in 0..64 {
        let (a, b) = (lo[l], bl[l]);
        let r = a.wrapping_add(b);
        // The carry out of bit 31 from the operands' and the sum's top bits (bit
        // operations only: no unsigned compare, which SSE2 lacks).
        let carry = ((a & b) | ((a | b) & !r)) >> 31;
        hi[l] = hi[l].wrapping_add(bh[l]).wrapping_add(carry);
        lo[l] = r;
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Ctx, Wave};
    use crate::shader::lower::{Fast, Op};
    use crate::shader::mem::MemPort;
    use crate::shader::{Program, Target};

    const NREGS: usize = 16;

    fn vop2(op: u32, vdst: u32, vsrc1: u32, src0: u32) -> Vec<u32> {
        vec![op << 25 | vdst << 17 | vsrc1 << 9 | src0]
    }
    fn vop1(op: u32, vdst: u32, src0: u32) -> Vec<u32> {
        vec![0x3F << 25 | vdst << 17 | op << 9 | src0]
    }
    fn vopc(op: u32, vsrc1: u32, src0: u32) -> Vec<u32> {
        vec![0x3E << 25 | op << 17 | vsrc1 << 9 | src0]
    }
    /// VOP3A/B: `dst` is vdst (VOP3A) or sdst << 8 | vdst (VOP3B).
    fn vop3(op: u32, dst: u32, src: [u32; 3]) -> Vec<u32> {
        vec![
            0x34 << 26 | op << 16 | dst,
            src[2] << 18 | src[1] << 9 | src[0],
        ]
    }

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// Register contents that hit the edge cases: denormals, zeros of both signs,
    /// infinities, NaNs, shift counts past 31, 24-bit boundaries, carries.
    fn value(x: &mut u64) -> u32 {
        const EDGE: [u32; 12] = [
            0,
            0x8000_0000,
            0x0000_0001,
            0x807F_FFFF,
            0x7F80_0000,
            0xFF80_0000,
            0x7FC0_0000,
            0xFFFF_FFFF,
            0x00FF_FFFF,
            0x0100_0000,
            0x3F80_0000,
            33,
        ];
        let r = xorshift(x);
        match r % 4 {
            0 => EDGE[(r >> 8) as usize % EDGE.len()],
            1 => (r >> 16) as u32 & 0x3F,
            _ => (r >> 20) as u32,
        }
    }

    fn wave(seed: u64, mode: u32, exec: u64) -> Wave {
        let mut w = Wave::new(NREGS, NREGS, 0);
        let mut x = seed;
        for r in w.v.iter_mut() {
            *r = value(&mut x);
        }
        for r in w.s.iter_mut().take(104) {
            *r = value(&mut x);
        }
        w.s[106] = xorshift(&mut x) as u32;
        w.s[107] = xorshift(&mut x) as u32;
        w.s[126] = exec as u32;
        w.s[127] = (exec >> 32) as u32;
        w.mode = mode;
        w
    }

    /// Every fast kind, with VGPR, SGPR, inline-constant and literal operands, under full
    /// and partial EXEC and both f32 denormal modes: the fast path leaves exactly the
    /// state the general path leaves (or declines, and then writes nothing).
    #[test]
    fn fast_path_matches_the_general_path() {
        let lit = 0x4049_0FDBu32;
        let mut cases: Vec<Vec<u32>> = Vec::new();
        // VOP2 with each kind of src0 (v1, s5, inline 1.0, inline -3, literal).
        let vop2_ops = [
            0x0, 0x1, 0x2, 0x3, 0x5, 0x8, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0x10, 0x11, 0x12, 0x13,
            0x14, 0x15, 0x19, 0x1a, 0x1b, 0x1c, 0x34, 0x35, 0x36, 0x3b,
        ];
        for op in vop2_ops {
            for src0 in [257, 5, 242, 195, 255] {
                let mut w = vop2(op, 3, 2, src0);
                if src0 == 255 {
                    w.push(lit);
                }
                cases.push(w);
            }
            // In place: the destination is a source.
            cases.push(vop2(op, 2, 2, 258));
        }
        for op in [0x1, 0x5, 0x6] {
            cases.push(vop1(op, 4, 257));
            cases.push(vop1(op, 4, 7));
        }
        cases.push(vop1(0x38, 4, 258));
        cases.push(vop1(0x38, 4, 8));
        cases.push(vop1(0x38, 4, 242));
        for op in [
            0x41, 0x42, 0x44, 0x49, 0x4d, 0x4e, 0x54, 0x5b, 0xc1, 0xc4, 0xc9, 0xcc, 0xd9,
        ] {
            cases.push(vopc(op, 2, 257));
            cases.push(vopc(op, 2, 9));
            // VOP3 form: sdst s[20:21].
            cases.push(vop3(op, 20, [257, 258, 0]));
        }
        let vop3_ops = [
            0x1cb, 0x1c3, 0x1c8, 0x1ca, 0x1f3, 0x1fd, 0x1fe, 0x1ff, 0x200, 0x201, 0x202, 0x285,
            0x286, 0x101, 0x105, 0x134,
        ];
        for op in vop3_ops {
            cases.push(vop3(op, 5, [257, 258, 259]));
            cases.push(vop3(op, 5, [9, 258, 259]));
            cases.push(vop3(op, 5, [257, 242, 259]));
            cases.push(vop3(op, 5, [257, 258, 193]));
            cases.push(vop3(op, 1, [257, 258, 259]));
        }
        // v_cndmask_b32_e64 with s[10:11], v_add_co/addc_co_u32_e64 with sdst s[12:13].
        cases.push(vop3(0x100, 5, [257, 258, 10]));
        cases.push(vop3(0x119, 12 << 8 | 5, [257, 258, 0]));
        cases.push(vop3(0x11c, 12 << 8 | 5, [257, 258, 14]));
        // 64-bit: v_lshl_add_u64, v_lshlrev_b64.
        cases.push(vop3(0x208, 6, [258, 131, 260]));
        cases.push(vop3(0x208, 6, [258, 259, 12]));
        cases.push(vop3(0x28f, 6, [257, 258, 0]));
        cases.push(vop3(0x28f, 6, [7, 10, 0]));
        // The uniform shifts: saxpy's `v_lshl_add_u64 v[2:3], s[6:7], 0, v[0:1]` (an SGPR
        // pair src0), counts 0..4; v_lshlrev_b64 by 0, 1, 31, 32, 33, 63 (inline integers).
        for k in 0..=4 {
            cases.push(vop3(0x208, 6, [6, 128 + k, 260]));
            cases.push(vop3(0x208, 6, [258, 128 + k, 260]));
        }
        for k in [0, 1, 31, 32, 33, 63] {
            cases.push(vop3(0x28f, 6, [128 + k, 258, 0]));
            cases.push(vop3(0x28f, 2, [128 + k, 258, 0]));
        }

        let mut cases: Vec<(Vec<u32>, Target)> =
            cases.into_iter().map(|w| (w, Target::Gfx942)).collect();
        // v_mac_f32 and v_mad_f32 exist on gfx90a only.
        cases.push((vop2(0x16, 3, 2, 257), Target::Gfx90a));
        cases.push((vop2(0x16, 3, 2, 5), Target::Gfx90a));
        cases.push((vop3(0x1c1, 5, [257, 258, 259]), Target::Gfx90a));
        cases.push((vop3(0x1c1, 5, [9, 242, 259]), Target::Gfx90a));
        let mem = std::sync::Arc::new(crate::gpumem::HeapMemory::new());
        let mut port = MemPort::new(1, mem);
        let mut lds = [0u8; 0];
        let clock = || 0u64;
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut kinds = std::collections::HashSet::new();
        for (words, target) in &cases {
            let prog = Program::decode(0, 0, words, *target);
            let op: Op = prog.ops[0];
            assert_ne!(op.fast, Fast::None, "{words:x?} takes the general path");
            kinds.insert(format!("{:?}", op.fast).split('(').next().map(String::from));
            let mut slow_op = op;
            slow_op.fast = Fast::None;
            for mode in [0x30, 0x00] {
                for exec in [u64::MAX, 0xF0F0_1234_8000_0001] {
                    xorshift(&mut seed);
                    let mut a = wave(seed, mode, exec);
                    let mut b = wave(seed, mode, exec);
                    let ran = a.valu_fast(&op);
                    let mut ctx = Ctx {
                        prog: &prog,
                        mem: &mut port,
                        lds: &mut lds,
                        target: *target,
                        sramecc: true,
                        clock: &clock,
                    };
                    if ran {
                        b.valu(&mut ctx, &slow_op).expect("general path");
                    }
                    assert!(
                        a.v == b.v && a.s == b.s,
                        "{words:x?} (fast {:?}, mode {mode:#x}, exec {exec:#x}, ran {ran})",
                        op.fast
                    );
                    // Declining is only for the flushing MODE here.
                    assert!(ran || mode == 0, "{words:x?} declined");
                }
            }
        }
        assert!(kinds.len() >= 45, "only {} kinds covered", kinds.len());
    }
}
