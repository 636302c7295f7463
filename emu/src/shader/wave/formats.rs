//! 16-bit data movement and arithmetic the core paths leave out: the DS D16 reads and
//! `_d16_hi` writes, and the f16 VOP1 transcendentals.
//!
//! - DS D16 (LLVM `DSInstructions.td`, gfx9 opcodes 0x54-0x5b, checked with llvm-mc-19):
//!   `ds_write_b8_d16_hi` / `ds_write_b16_d16_hi` store the byte / short in bits [23:16] /
//!   [31:16] of the data VGPR; `ds_read_{u8,i8,u16}_d16[_hi]` put a byte (zero- or
//!   sign-extended to 16 bits) or a short in the low (`_d16`) or high (`_hi`) half, the
//!   other half kept with SRAM ECC off and zeroed with it on — the rule of the FLAT/MUBUF
//!   D16 loads (`d16_load`; firmware-notes/isa-gfx9.md "D16 loads and SRAMECC": LLVM's
//!   `D16PreservesUnusedBits` predicate guards the DS patterns in `DSInstructions.td`
//!   exactly as the FLAT and buffer ones). LDS bounds as every DS access: a read beyond
//!   the LDS returns 0, a write is dropped.
//! - f16 transcendentals (`v_rcp/sqrt/rsq/log/exp/sin/cos_f16`): computed in f64 from the
//!   f16 input and rounded once to f16 (nearest even), i.e. within 0.5 ULP plus the f64
//!   evaluation's error (below 2^-40 ULP of f16): inside LLVM AMDGPUUsage's "0.51ULP for
//!   half" for the hardware's `v_exp_f16`/`v_log_f16`. `v_sin/cos_f16` take revolutions
//!   (sin(2 pi x)) like the f32 forms. Denormal inputs and results flush when MODE
//!   FP_DENORM [7:6] flushes (as the other f16 ops); gfx9 writes the low half and zeroes
//!   the high half; VOP3 op_sel faults (not modelled, as the other 16-bit VOP ops).

use super::{d16_load, ftz_f16, rd_le, wr_le, Ctx, Op, Wave, R};

impl Wave {
    /// DS opcodes 0x54-0x5b (see the module comment); `addr` is the ADDR VGPR, `off` the
    /// 16-bit instruction offset.
    pub(super) fn ds_d16(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: &Op,
        addr: &[u32; 64],
        off: u32,
        exec: u64,
    ) -> R<()> {
        let acc = if op.acc { self.acc_base } else { 0 };
        let beyond = |w: &Wave, ctx: &Ctx<'_>| w.err(ctx, "VGPR beyond the wave's allocation");
        match op.op {
            0x54 | 0x55 => {
                let n = if op.op == 0x54 { 1 } else { 2 };
                let src = op.src[1] as usize + acc;
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let Some(&v) = self.v.get(src * 64 + l) else {
                        return Err(beyond(self, ctx));
                    };
                    let a = addr[l].wrapping_add(off) as usize;
                    wr_le(ctx.lds, a, n, (v >> 16) as u64);
                }
            }
            0x56..=0x5b => {
                // The FLAT opcode of the same form: 0x20 ubyte .. 0x25 short_hi.
                let flat_op = op.op - 0x36;
                let n = if op.op >= 0x5a { 2 } else { 1 };
                let dst = op.dst as usize + acc;
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a = addr[l].wrapping_add(off) as usize;
                    let raw = rd_le(ctx.lds, a, n).unwrap_or(0);
                    let sramecc = ctx.sramecc;
                    match self.v.get_mut(dst * 64 + l) {
                        Some(x) => *x = d16_load(flat_op, raw, *x, sramecc),
                        None => return Err(beyond(self, ctx)),
                    }
                }
            }
            _ => return Err(self.unimpl(ctx)),
        }
        Ok(())
    }

    /// `v_rcp/sqrt/rsq/log/exp/sin/cos_f16` (VOP3 numbering 0x17d-0x181, 0x189, 0x18a).
    /// `exec`: the lanes to write (EXEC, narrowed by DPP's row/bank masks).
    pub(super) fn f16_transcendental(&mut self, ctx: &mut Ctx<'_>, op: &Op, exec: u64) -> R<()> {
        if op.opsel != 0 {
            return Err(self.err(ctx, "VOP3 op_sel on a 16-bit op is not modelled"));
        }
        if op.omod != 0 {
            return Err(self.err(ctx, "f16 output modifier is not modelled"));
        }
        let ftz = self.mode & 0xC0 == 0;
        let mut a = [0u32; 64];
        self.fetch(ctx, op, 0, super::Ty::F16, &mut a)?;
        let f: fn(f64) -> f64 = match op.op {
            0x17d => |x| 1.0 / x,
            0x17e => f64::sqrt,
            0x17f => |x| 1.0 / x.sqrt(),
            0x180 => f64::log2,
            0x181 => f64::exp2,
            0x189 => |x| (x * std::f64::consts::TAU).sin(),
            0x18a => |x| (x * std::f64::consts::TAU).cos(),
            _ => return Err(self.unimpl(ctx)),
        };
        let clamp = op.clamp;
        let r: [u32; 64] = std::array::from_fn(|l| {
            let x = half::f16::from_bits(ftz_f16(a[l] as u16, ftz)).to_f64();
            let mut v = half::f16::from_f64(f(x));
            if clamp {
                v = if v.is_nan() {
                    half::f16::ZERO
                } else {
                    v.clamp(half::f16::ZERO, half::f16::ONE)
                };
            }
            ftz_f16(v.to_bits(), ftz) as u32
        });
        self.write32(ctx, op.dst as usize, &r, exec)
    }
}
