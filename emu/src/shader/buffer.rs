//! MUBUF buffer atomics and MTBUF typed loads/stores through a buffer resource (V#).
//!
//! Addressing and range checking as `mubuf_vsharp` (CDNA3 ISA "Buffer Instructions", V#
//! layout and "Range Checking"): the address is base + soffset + inst_offset, plus the
//! VGPR offset with `offen` and the VGPR index times the stride with `idxen`; a raw buffer
//! (stride 0) access is in range while offset + bytes <= num_records, a structured one
//! while index < num_records. Atomics are the FLAT atomics' read-modify-writes (same opcode
//! numbers, `int_rmw`) on the emulator's host-atomic view of GPU memory; an out-of-range
//! atomic is not performed. MTBUF formats: LLVM `SIDefines.h` `MTBUFFormat` (DFMT_8 = 1 ...
//! DFMT_32_32_32_32 = 14; NFMT_UNORM = 0, SNORM, USCALED, SSCALED, UINT, SINT, reserved,
//! FLOAT = 7).

use std::sync::atomic::Ordering;

use super::{fmax64, fmin64, int_rmw, Ctx, Op, Wave, AGPR_BASE, R};

/// Per-lane buffer addressing of one MUBUF/MTBUF op.
struct Lanes {
    base: u64,
    stride: u64,
    num_records: u64,
    soff: u64,
    off: [u64; 64],
    idx: [u64; 64],
    /// EXEC when the op issued.
    exec: u64,
    /// The data VGPR (the `acc` bit selects AGPRs, at `AGPR_BASE` in the register file).
    vd: usize,
}

impl Lanes {
    /// The lanes EXEC enables, in order.
    fn active(&self) -> impl Iterator<Item = usize> {
        let exec = self.exec;
        (0..64).filter(move |l| exec >> l & 1 != 0)
    }
    fn addr(&self, l: usize) -> u64 {
        self.base
            .wrapping_add(self.soff)
            .wrapping_add(self.off[l])
            .wrapping_add(self.idx[l] * self.stride)
    }
    /// In range / out of range / straddling the end (`None`) for `bytes` at lane `l`.
    fn range(&self, l: usize, bytes: u64) -> Option<bool> {
        if self.stride != 0 {
            Some(self.idx[l] < self.num_records)
        } else if self.off[l] + bytes <= self.num_records {
            Some(true)
        } else if self.off[l] >= self.num_records {
            Some(false)
        } else {
            None
        }
    }
}

impl Wave {
    fn buf_lanes(&self, ctx: &Ctx<'_>, op: &Op, vsharp: [u32; 4]) -> R<Lanes> {
        let (offen, idxen) = (op.ext & 1 != 0, op.ext & 2 != 0);
        let va = op.src[0] as usize;
        let mut l = Lanes {
            base: vsharp[0] as u64 | ((vsharp[1] & 0xFFFF) as u64) << 32,
            stride: ((vsharp[1] >> 16) & 0x3FFF) as u64,
            num_records: vsharp[2] as u64,
            soff: self.rs(ctx, op.sdst, 0)? as u64,
            off: [op.imm as u64; 64],
            idx: [0; 64],
            exec: self.exec(),
            vd: op.dst as usize + if op.acc { AGPR_BASE as usize } else { 0 },
        };
        if idxen {
            let v = self.vreg(ctx, va)?;
            for i in 0..64 {
                l.idx[i] = v[i] as u64;
            }
        }
        if offen {
            let v = self.vreg(ctx, va + usize::from(idxen))?;
            for i in 0..64 {
                l.off[i] += v[i] as u64;
            }
        }
        Ok(l)
    }

    /// MUBUF ops at opcode 0x40 and above on a non-private V#: buffer atomics, and MTBUF
    /// (lowered to 0x100 + the MTBUF opcode).
    pub(super) fn buffer_ext(&mut self, ctx: &mut Ctx<'_>, op: &Op, vsharp: [u32; 4]) -> R<()> {
        if op.op >= 0x100 {
            // MTBUF: format from the instruction, components in order.
            let (dfmt, nfmt) = ((op.ext >> 8) & 0xF, (op.ext >> 12) & 7);
            return self.typed(ctx, op, vsharp, op.op - 0x100, dfmt, nfmt, [4, 5, 6, 7]);
        }
        if op.op < 0x10 || matches!(op.op, 0x26 | 0x27) {
            // buffer_load/store_format_* (and `_d16_hi_x`): format and DST_SEL from V#
            // word 3.
            let w3 = vsharp[3];
            let sel = [0, 3, 6, 9].map(|b| (w3 >> b) & 7);
            return self.typed(
                ctx,
                op,
                vsharp,
                op.op,
                (w3 >> 15) & 0xF,
                (w3 >> 12) & 7,
                sel,
            );
        }
        let k = op.op;
        let int_op = matches!(k, 0x40..=0x4c | 0x60..=0x6c);
        if !int_op && !matches!(k, 0x4d..=0x51) {
            return Err(self.unimpl(ctx));
        }
        let wide = k >= 0x60 || matches!(k, 0x4f..=0x51);
        let size = if wide { 8 } else { 4 };
        let rtn = op.ext & 4 != 0; // glc / sc0: return the pre-op value
        let lanes = self.buf_lanes(ctx, op, vsharp)?;
        let vd = lanes.vd;
        for l in lanes.active() {
            match lanes.range(l, size) {
                Some(true) => {}
                Some(false) if !rtn => continue,
                _ => {
                    return Err(self.err(
                        ctx,
                        "an out-of-range buffer atomic with return (or one straddling \
                         num_records) is not modelled",
                    ))
                }
            }
            let a = lanes.addr(l);
            let dw = |w: &Wave, i: usize| -> R<u32> { Ok(w.vreg(ctx, vd + i)?[l]) };
            let old: u64 = if !wide {
                let (x, x1) = (dw(self, 0)?, if k == 0x41 { dw(self, 1)? } else { 0 });
                let cell = match ctx.mem.atomic32(a) {
                    Ok(c) => c,
                    Err(f) => return Err(self.mem_err(ctx, f)),
                };
                let f = |o: u32| -> u32 {
                    if int_op {
                        return int_rmw(k & 0x1F, o as u64, x as u64, x1 as u64, 32) as u32;
                    }
                    if k == 0x4d {
                        return (f32::from_bits(o) + f32::from_bits(x)).to_bits();
                    }
                    let h = |v: u32| half::f16::from_bits(v as u16);
                    let lo = h(o) + h(x);
                    let hi = h(o >> 16) + h(x >> 16);
                    lo.to_bits() as u32 | (hi.to_bits() as u32) << 16
                };
                match cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(f(o))) {
                    Ok(p) | Err(p) => p as u64,
                }
            } else {
                let xv = dw(self, 0)? as u64 | (dw(self, 1)? as u64) << 32;
                let cmp = if k == 0x61 {
                    dw(self, 2)? as u64 | (dw(self, 3)? as u64) << 32
                } else {
                    0
                };
                let cell = match ctx.mem.atomic64(a) {
                    Ok(c) => c,
                    Err(f) => return Err(self.mem_err(ctx, f)),
                };
                let f = |o: u64| -> u64 {
                    if int_op {
                        return int_rmw(k & 0x1F, o, xv, cmp, 64);
                    }
                    let (p, q) = (f64::from_bits(o), f64::from_bits(xv));
                    match k {
                        0x4f => p + q,
                        0x50 => fmin64(p, q),
                        _ => fmax64(p, q),
                    }
                    .to_bits()
                };
                match cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(f(o))) {
                    Ok(p) | Err(p) => p,
                }
            };
            if rtn {
                for w in 0..size as usize / 4 {
                    match self.vreg_mut(vd + w) {
                        Some(r) => r[l] = (old >> (32 * w)) as u32,
                        None => return Err(self.err(ctx, "VGPR beyond the wave's allocation")),
                    }
                }
            }
        }
        Ok(())
    }

    /// Typed loads/stores: `tbuffer_*_format_*` (format from the instruction) and
    /// `buffer_*_format_*` (format and DST_SEL from V# word 3: DST_SEL_X..W [11:0],
    /// NUM_FORMAT [14:12], DATA_FORMAT [18:15]); `code` is the opcode within its group
    /// (0-3 load x..xyzw, 4-7 store, 8-15 the D16 forms, MUBUF 0x26/0x27 `_d16_hi_x`). CLRX `doc/GcnMemHandling.md`
    /// ("MUBUF/MTBUF format conversion"): MTBUF takes the instruction's formats with
    /// identity DST_SEL, MUBUF `_format` the resource's formats and DST_SEL (0 zero, 1 one,
    /// 4-7 component R, G, B, A). Modelled (every conversion exact):
    /// - formats of 1-4 equal 8/16/32-bit components: loads as UINT/SINT (zero/sign
    ///   extended), USCALED/SSCALED of 8/16 bits and FLOAT of 16/32 bits to f32; stores of
    ///   32-bit UINT/SINT/FLOAT components (no conversion), all of the format's components,
    ///   identity DST_SEL;
    /// - the packed formats, loads only: 10_11_11 (R11G11B10 from bit 0: Mesa
    ///   `ac_translate_buffer_dataformat` maps R11G11B10_FLOAT to it), 11_11_10 (R10G11B11
    ///   from bit 0: AMD PAL `g_gfx9MergedDataFormats.h` maps `X10Y11Z11_Float` to it) and
    ///   2_10_10_10 (R10G10B10A2 from bit 0); FLOAT (the 10/11-bit unsigned floats to f32,
    ///   the 11-bit packed formats only) and UINT/SINT/USCALED/SSCALED of each field;
    /// - D16 forms (two 16-bit components per VGPR, low half first; with an odd component
    ///   count the last VGPR's high half is zeroed with SRAM ECC on, kept with it off; the
    ///   `_d16_hi_x` forms one component in the high half, the low half zeroed / kept
    ///   likewise): loads of 8/16-bit UINT/SINT (to 16 bits), 16-bit FLOAT and 8-bit
    ///   USCALED/SSCALED (to f16), stores of 16-bit UINT/SINT/FLOAT components.
    ///
    /// Everything else faults: UNORM/SNORM (no public source pins the hardware's rounding
    /// of the scaling: firmware-notes/isa-gfx9.md), 10_10_10_2 (no public bit layout),
    /// packed stores, D16 conversions that round, selecting "one" or a component the
    /// format lacks (their fill values), an element straddling num_records.
    #[allow(clippy::too_many_arguments)]
    fn typed(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: &Op,
        vsharp: [u32; 4],
        code: u16,
        dfmt: u32,
        nfmt: u32,
        sel: [u32; 4],
    ) -> R<()> {
        let unmodelled = |w: &Wave, ctx: &Ctx<'_>, what: &str| {
            w.err(
                ctx,
                format!("typed buffer {what} (dfmt {dfmt}, nfmt {nfmt}) is not modelled"),
            )
        };
        // `buffer_load/store_format_d16_hi_x` (MUBUF 0x26/0x27): one 16-bit component in
        // the high half of the VGPR.
        let hi = matches!(code, 0x26 | 0x27);
        let d16 = hi || code >= 8;
        let load = if hi { code == 0x26 } else { code & 7 < 4 };
        let n_inst = if hi { 1 } else { (code & 3) as usize + 1 };
        // D16 `_x`/`_xyz` loads leave the high half of their last VGPR unused, `_hi_x` the
        // low half: zeroed with SRAM ECC on, kept with it off (firmware-notes/isa-gfx9.md
        // "D16 loads and SRAMECC"). (register, bits kept)
        let zero_half = match (d16 && load && ctx.sramecc, hi) {
            (true, true) => Some((0, 0xFFFF_0000u32)),
            (true, false) if n_inst % 2 == 1 => Some((n_inst / 2, 0xFFFFu32)),
            _ => None,
        };
        // Component layout: (bits per component, components); packed formats give each
        // component's (shift, width) inside one dword.
        let packed: Option<&[(u32, u32)]> = match dfmt {
            6 => Some(&[(0, 11), (11, 11), (22, 10)]),
            7 => Some(&[(0, 10), (10, 11), (21, 11)]),
            9 => Some(&[(0, 10), (10, 10), (20, 10), (30, 2)]),
            _ => None,
        };
        let (bits, n_fmt) = match dfmt {
            1 => (8, 1),
            2 => (16, 1),
            3 => (8, 2),
            4 => (32, 1),
            5 => (16, 2),
            6 | 7 => (32, 3),
            9 => (32, 4),
            10 => (8, 4),
            11 => (32, 2),
            12 => (16, 4),
            13 => (32, 3),
            14 => (32, 4),
            _ => return Err(unmodelled(self, ctx, "data format")),
        };
        let ok = match (packed.is_some(), load, d16, nfmt) {
            (true, true, false, 7) => dfmt == 6 || dfmt == 7,
            (true, true, false, 2..=5) => true,
            (true, ..) => false,
            (false, true, false, 4 | 5) => true,
            (false, true, false, 2 | 3) => bits < 32,
            (false, true, false, 7) => bits >= 16,
            (false, false, false, 4 | 5 | 7) => bits == 32,
            (false, true, true, 4 | 5) => bits <= 16,
            (false, true, true, 2 | 3) => bits == 8,
            (false, _, true, 7) => bits == 16,
            (false, false, true, 4 | 5) => bits == 16,
            _ => false,
        };
        if !ok {
            return Err(unmodelled(
                self,
                ctx,
                if d16 {
                    "D16 conversion"
                } else {
                    "numeric format"
                },
            ));
        }
        let sel_ok = (0..n_inst).all(|c| match sel[c] {
            0 => load,
            4..=7 => (sel[c] - 4) < n_fmt as u32 && (load || sel[c] == 4 + c as u32),
            _ => false,
        });
        if !sel_ok || (!load && n_inst != n_fmt) {
            return Err(unmodelled(
                self,
                ctx,
                "component selection (DST_SEL / count) other than format components or zero",
            ));
        }
        let cb = bits as u64 / 8;
        let elem = if packed.is_some() {
            4
        } else {
            cb * n_fmt as u64
        };
        let lanes = self.buf_lanes(ctx, op, vsharp)?;
        let vd = lanes.vd;
        // Component `c` of a lane's result or source: 32 bits, or a 16-bit half (D16).
        let put = |w: &mut Wave, ctx: &Ctx<'_>, c: usize, l: usize, v: u32| -> R<()> {
            let (reg, sh, mask) = if hi {
                (vd, 16, 0xFFFFu32)
            } else if d16 {
                (vd + c / 2, 16 * (c % 2) as u32, 0xFFFFu32)
            } else {
                (vd + c, 0, u32::MAX)
            };
            match w.vreg_mut(reg) {
                Some(r) => {
                    r[l] = (r[l] & !(mask << sh)) | (v & mask) << sh;
                    Ok(())
                }
                None => Err(w.err(ctx, "VGPR beyond the wave's allocation")),
            }
        };
        for l in lanes.active() {
            if let Some((r, keep)) = zero_half {
                match self.vreg_mut(vd + r) {
                    Some(x) => x[l] &= keep,
                    None => return Err(self.err(ctx, "VGPR beyond the wave's allocation")),
                }
            }
            let in_range = match lanes.range(l, elem) {
                Some(r) => r,
                None => return Err(unmodelled(self, ctx, "element straddling num_records")),
            };
            let a = lanes.addr(l);
            let word = match (packed, in_range && load) {
                (Some(_), true) => match ctx.mem.load(a, 4) {
                    Ok(v) => v,
                    Err(f) => return Err(self.mem_err(ctx, f)),
                },
                _ => 0,
            };
            for c in 0..n_inst {
                if load && sel[c] == 0 {
                    put(self, ctx, c, l, 0)?;
                    continue;
                }
                let fc = (sel[c] - 4) as usize;
                let ca = a.wrapping_add(cb * fc as u64);
                if load {
                    let (raw, width) = match packed {
                        Some(p) => {
                            let (sh, w) = p[fc];
                            ((word >> sh) & ((1 << w) - 1), w)
                        }
                        None if in_range => match ctx.mem.load(ca, cb) {
                            Ok(v) => (v, bits),
                            Err(f) => return Err(self.mem_err(ctx, f)),
                        },
                        None => (0, bits),
                    };
                    let sx = |v: u64| ((v << (64 - width)) as i64 >> (64 - width)) as i32;
                    let v = match (nfmt, d16) {
                        (4, _) => raw as u32,
                        (5, _) => sx(raw) as u32,
                        (2, false) => (raw as f32).to_bits(),
                        (3, false) => (sx(raw) as f32).to_bits(),
                        (2, true) => half::f16::from_f32(raw as f32).to_bits() as u32,
                        (3, true) => half::f16::from_f32(sx(raw) as f32).to_bits() as u32,
                        _ if packed.is_some() => ufloat_to_f32(raw as u32, width).to_bits(),
                        _ if bits == 16 && !d16 => {
                            half::f16::from_bits(raw as u16).to_f32().to_bits()
                        }
                        _ => raw as u32,
                    };
                    put(self, ctx, c, l, v)?;
                } else if in_range {
                    let v = self.vreg(ctx, if d16 { vd + c / 2 } else { vd + c })?[l];
                    let v = match (hi, d16) {
                        (true, _) => v >> 16,
                        (false, true) => v >> (16 * (c % 2)) & 0xFFFF,
                        _ => v,
                    };
                    if let Err(f) = ctx.mem.store(ca, cb, v as u64) {
                        return Err(self.mem_err(ctx, f));
                    }
                }
            }
        }
        Ok(())
    }
}

/// An unsigned small float of `width` bits (11: 5-bit exponent, 6-bit mantissa; 10: 5 and
/// 5; bias 15, exponent 31 infinity/NaN: the R11G11B10 format, Vulkan "Unsigned 11-Bit /
/// 10-Bit Floating-Point Numbers") as f32 (exact).
fn ufloat_to_f32(v: u32, width: u32) -> f32 {
    let mb = width - 5;
    let (e, m) = (v >> mb & 0x1F, v & ((1 << mb) - 1));
    match e {
        0 => m as f32 * (2.0f32).powi(-14 - mb as i32),
        31 if m == 0 => f32::INFINITY,
        31 => f32::NAN,
        _ => (1.0 + m as f32 / (1u32 << mb) as f32) * (2.0f32).powi(e as i32 - 15),
    }
}
