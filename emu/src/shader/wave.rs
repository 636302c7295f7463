//! One wave64's architectural state and the interpreter loop.
//!
//! Each instruction executes over all 64 lanes in a straight loop on flat arrays (operands
//! gathered into `[u32; 64]`, results merged under EXEC), so the compiler vectorises the
//! lane loops. Semantics follow AMD's "CDNA3 Instruction Set Architecture" and "CDNA2
//! Instruction Set Architecture" reference guides (sections cited in
//! `firmware-notes/isa-gfx9.md`).

// Lane loops index several per-lane arrays at once; NaN-aware negated float compares are
// the ISA's definitions (NGE, NLG, ...).
#![allow(
    clippy::needless_range_loop,
    clippy::neg_cmp_op_on_partial_ord,
    clippy::nonminimal_bool
)]

use std::sync::atomic::Ordering;

use super::lower::{Enc, Fast, Op, VopForm, AGPR_BASE};
use super::mem::{self, MemPort};
use super::{Program, ShaderError, Target};

// Directed rounding (MODE.FP_ROUND); a child module so it reaches the operand helpers.
#[path = "round.rs"]
mod round;
// MFMA types and modifiers beyond the dense f32/f16/bf16 core in `mai`.
#[path = "mfma.rs"]
mod mfma;
// Buffer atomics and MTBUF.
#[path = "buffer.rs"]
mod buffer;

/// Why [`Wave::run`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WaveStop {
    /// At an `s_barrier`, waiting for the other waves of the work-group.
    Barrier,
    /// `s_endpgm`.
    End,
    /// `s_sleep`: still runnable; the other waves get a turn.
    Sleep,
}

type R<T> = Result<T, ShaderError>;

mod fast;
mod formats;
mod memfast;

/// Operand type (how inline constants read).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    B32,
    F16,
    F32,
    F64,
}

/// Internal VGPR-sized temporaries after the kernel's registers (SDWA operand staging);
/// reached through register numbers [`TEMP_BASE`]...
const TEMPS: usize = 3;
/// Register number of the first internal temporary (above the AccVGPR codes).
const TEMP_BASE: usize = 768;

/// SGPR-space operand codes.
const VCC: u16 = 106;
const EXEC: u16 = 126;

/// The private (scratch) aperture base (high dword), as KFD's `kfd_init_apertures_v9`.
pub(crate) const PRIVATE_APERTURE_HI: u32 = 0x2_0000;

/// The LDS (shared) aperture base (high dword).
pub(crate) const SHARED_APERTURE_HI: u32 = 0x1_0000;

/// Per-dispatch context shared by a worker's waves.
pub(crate) struct Ctx<'a> {
    pub(crate) prog: &'a Program,
    pub(crate) mem: &'a mut MemPort,
    pub(crate) lds: &'a mut [u8],
    pub(crate) target: Target,
    /// SRAM ECC on: D16 loads zero the other half of their VGPR (else they keep it).
    pub(crate) sramecc: bool,
    pub(crate) clock: &'a dyn Fn() -> u64,
}

/// A wave's state.
pub(crate) struct Wave {
    /// SGPRs by operand code (s0..s101, FLAT_SCRATCH 102-103, XNACK_MASK 104-105,
    /// VCC 106-107, TTMP 108-123, M0 124, EXEC 126-127).
    pub(crate) s: [u32; 128],
    /// VGPRs then AccVGPRs, 64 lanes each (`v[r * 64 + lane]`).
    pub(crate) v: Vec<u32>,
    /// Where the AccVGPRs start (in registers).
    pub(crate) acc_base: usize,
    /// Registers of the unified VGPR file the kernel was granted (internal temporaries
    /// follow them in `v`).
    nregs: usize,
    pub(crate) pc: usize,
    pub(crate) scc: bool,
    /// The MODE hardware register.
    pub(crate) mode: u32,
    /// Bytes of each lane's private segment in the wave's scratch slot (the queue's
    /// scratch wave size / 64; accesses beyond fault). The memory itself is the queue's
    /// scratch, reached through FLAT_SCRATCH or the private segment V# (`scratch_addr`).
    pub(crate) priv_size: u32,
    /// Instructions executed, and lane-instructions (active lanes of vector instructions,
    /// 1 for scalar ones).
    pub(crate) instrs: u64,
    pub(crate) lane_instrs: u64,
    /// HW_ID-style wave slot (for s_getreg HW_ID).
    pub(crate) hw_id: u32,
    /// The DPP-permuted src0 of the current instruction.
    dpp_src: [u32; 64],
    /// VALU operand buffers.
    /// Taken while a VALU op runs (`None` then), so the buffers are never reallocated.
    tmp: Option<Box<Tmp>>,
    /// The VALU fast path's buffers.
    fast: Box<fast::FastBufs>,
    /// The last EXEC counted and its population (a cache: no popcount per instruction).
    pop_exec: u64,
    pop: u64,
}

/// VALU operand gather buffers.
pub(crate) struct Tmp {
    a: [u32; 64],
    b: [u32; 64],
    c: [u32; 64],
    a64: [u64; 64],
    b64: [u64; 64],
    c64: [u64; 64],
}

impl Default for Box<Tmp> {
    fn default() -> Self {
        Box::new(Tmp {
            a: [0; 64],
            b: [0; 64],
            c: [0; 64],
            a64: [0; 64],
            b64: [0; 64],
            c64: [0; 64],
        })
    }
}

fn f32_inline(code: u16) -> Option<f32> {
    Some(match code {
        240 => 0.5,
        241 => -0.5,
        242 => 1.0,
        243 => -1.0,
        244 => 2.0,
        245 => -2.0,
        246 => 4.0,
        247 => -4.0,
        248 => f32::from_bits(0x3e22_f983),
        _ => return None,
    })
}

fn f64_inline(code: u16) -> Option<f64> {
    match code {
        248 => Some(f64::from_bits(0x3fc4_5f30_6dc9_c882)),
        _ => f32_inline(code).map(|f| f as f64),
    }
}

fn f16_inline(code: u16) -> Option<u16> {
    Some(match code {
        240 => 0x3800,
        241 => 0xB800,
        242 => 0x3C00,
        243 => 0xBC00,
        244 => 0x4000,
        245 => 0xC000,
        246 => 0x4400,
        247 => 0xC400,
        248 => 0x3118,
        _ => return None,
    })
}

/// `[f(0), .., f(63)]` as a plain loop (inlined, so the lane loop vectorises).
#[inline(always)]
fn lanes<T: Copy + Default, F: FnMut(usize) -> T>(mut f: F) -> [T; 64] {
    let mut r = [T::default(); 64];
    for (l, x) in r.iter_mut().enumerate() {
        *x = f(l);
    }
    r
}

/// Flushes an f32 denormal to a signed zero.
#[inline]
fn ftz32(x: f32) -> f32 {
    if x.is_subnormal() {
        f32::from_bits(x.to_bits() & 0x8000_0000)
    } else {
        x
    }
}

impl Wave {
    pub(crate) fn new(nregs: usize, acc_base: usize, priv_size: u32) -> Wave {
        Wave {
            s: [0; 128],
            v: vec![0; (nregs + TEMPS) * 64],
            acc_base,
            nregs,
            pc: 0,
            scc: false,
            mode: 0,
            priv_size,
            instrs: 0,
            lane_instrs: 0,
            hw_id: 0,
            dpp_src: [0; 64],
            tmp: Some(Box::default()),
            fast: Box::default(),
            pop_exec: 0,
            pop: 0,
        }
    }

    /// Back to the state of [`Wave::new`] for another wave of the same dispatch, keeping the
    /// allocations (no allocation per wave).
    pub(crate) fn reset(&mut self) {
        // VGPRs and scratch start undefined on hardware (only the dispatch-initialised
        // registers are set); they are not cleared between the waves a worker runs for
        // one GPU and memory (`workers::take_state` drops waves another one used).
        self.s = [0; 128];
        self.pc = 0;
        self.scc = false;
        self.mode = 0;
        self.instrs = 0;
        self.lane_instrs = 0;
        self.hw_id = 0;
    }

    #[inline]
    pub(crate) fn exec(&self) -> u64 {
        self.s[126] as u64 | (self.s[127] as u64) << 32
    }
    /// Active lanes (EXEC's population count).
    #[inline(always)]
    fn active_lanes(&mut self) -> u64 {
        let e = self.exec();
        if e != self.pop_exec {
            self.pop_exec = e;
            self.pop = e.count_ones() as u64;
        }
        self.pop
    }

    #[inline]
    fn vcc(&self) -> u64 {
        self.s[106] as u64 | (self.s[107] as u64) << 32
    }

    fn err(&self, ctx: &Ctx<'_>, msg: impl Into<String>) -> ShaderError {
        ShaderError::at(ctx.prog, self.pc, msg.into(), None)
    }

    fn unimpl(&self, ctx: &Ctx<'_>) -> ShaderError {
        self.err(ctx, "instruction not implemented by the emulator")
    }

    fn mem_err(&self, ctx: &Ctx<'_>, f: crate::gpumem::Fault) -> ShaderError {
        ShaderError::at(ctx.prog, self.pc, format!("memory fault: {f}"), Some(f))
    }

    // ---- scalar operands ----

    #[inline]
    fn rs(&self, ctx: &Ctx<'_>, code: u16, lit: u32) -> R<u32> {
        Ok(match code {
            0..=127 => self.s[code as usize],
            128..=192 => (code - 128) as u32,
            193..=208 => (-((code - 192) as i32)) as u32,
            235 => SHARED_APERTURE_HI,
            236 => SHARED_APERTURE_HI | 0xFFFF_FFFF,
            237 => PRIVATE_APERTURE_HI,
            238 => PRIVATE_APERTURE_HI | 0xFFFF_FFFF,
            240..=248 => f32_inline(code).map(f32::to_bits).unwrap_or(0),
            251 => (self.vcc() == 0) as u32,
            252 => (self.exec() == 0) as u32,
            253 => self.scc as u32,
            255 => lit,
            _ => return Err(self.err(ctx, format!("operand code {code} not supported"))),
        })
    }

    #[inline]
    fn rs64(&self, ctx: &Ctx<'_>, code: u16, lit: u32, f64ty: bool) -> R<u64> {
        Ok(match code {
            0..=126 => self.s[code as usize] as u64 | (self.s[code as usize + 1] as u64) << 32,
            128..=192 => (code - 128) as u64,
            193..=208 => (-((code - 192) as i64)) as u64,
            235 | 237 => (self.rs(ctx, code, lit)? as u64) << 32,
            240..=248 => {
                if f64ty {
                    f64_inline(code).map(f64::to_bits).unwrap_or(0)
                } else {
                    f32_inline(code).map(f32::to_bits).unwrap_or(0) as u64
                }
            }
            // A 64-bit float literal supplies the high dword.
            255 if f64ty => (lit as u64) << 32,
            255 => lit as u64,
            _ => self.rs(ctx, code, lit)? as u64,
        })
    }

    #[inline]
    fn ws(&mut self, code: u16, v: u32) {
        if let Some(r) = self.s.get_mut(code as usize) {
            *r = v;
        }
    }
    #[inline]
    fn ws64(&mut self, code: u16, v: u64) {
        self.ws(code, v as u32);
        self.ws(code + 1, (v >> 32) as u32);
    }

    // ---- vector operands ----

    /// Index in `v` of register `r`: 0..512 the unified file (VGPRs, then AccVGPRs from
    /// `acc_base`), 512..768 AccVGPR `r - 512`, [`TEMP_BASE`].. an internal temporary.
    /// `usize::MAX / 128` (never in range) beyond the kernel's allocation.
    #[inline]
    fn file_idx(&self, r: usize) -> usize {
        let i = if r < 512 {
            r
        } else if r < TEMP_BASE {
            self.acc_base + (r - 512)
        } else {
            return self.nregs + (r - TEMP_BASE);
        };
        if i < self.nregs {
            i
        } else {
            usize::MAX / 128
        }
    }

    #[inline]
    fn vreg(&self, ctx: &Ctx<'_>, r: usize) -> R<&[u32]> {
        let i = self.file_idx(r);
        self.v
            .get(i * 64..i * 64 + 64)
            .ok_or_else(|| self.err(ctx, format!("VGPR v{r} beyond the wave's allocation")))
    }

    #[inline]
    fn vreg_mut(&mut self, r: usize) -> Option<&mut [u32]> {
        let i = self.file_idx(r);
        self.v.get_mut(i * 64..i * 64 + 64)
    }

    /// Gathers source `i` of a VALU op as 32-bit lanes (with VOP3 abs/neg for float types).
    #[inline]
    fn fetch(&self, ctx: &Ctx<'_>, op: &Op, i: usize, ty: Ty, out: &mut [u32; 64]) -> R<()> {
        let code = op.src[i];
        if i == 0 && op.form == VopForm::Dpp {
            *out = self.dpp_src;
        } else if code >= 256 {
            out.copy_from_slice(self.vreg(ctx, vcode(code))?);
        } else {
            let v = match ty {
                Ty::F16 => match f16_inline(code) {
                    Some(h) => h as u32,
                    None => self.rs(ctx, code, op.lit)?,
                },
                _ => self.rs(ctx, code, op.lit)?,
            };
            *out = [v; 64];
        }
        if op.form != VopForm::E32 && (op.abs | op.neg) != 0 {
            let sign = match ty {
                Ty::F32 => 0x8000_0000u32,
                Ty::F16 => 0x8000,
                _ => return Ok(()),
            };
            if op.abs >> i & 1 != 0 {
                out.iter_mut().for_each(|x| *x &= !sign);
            }
            if op.neg >> i & 1 != 0 {
                out.iter_mut().for_each(|x| *x ^= sign);
            }
        }
        Ok(())
    }

    /// Gathers source `i` as 64-bit lanes (register pairs).
    #[inline]
    fn fetch64(&self, ctx: &Ctx<'_>, op: &Op, i: usize, ty: Ty, out: &mut [u64; 64]) -> R<()> {
        let code = op.src[i];
        if code >= 256 {
            let r = vcode(code);
            let lo = self.vreg(ctx, r)?;
            let hi = self.vreg(ctx, r + 1)?;
            for l in 0..64 {
                out[l] = lo[l] as u64 | (hi[l] as u64) << 32;
            }
        } else {
            *out = [self.rs64(ctx, code, op.lit, ty == Ty::F64)?; 64];
        }
        if ty == Ty::F64 && op.form == VopForm::Vop3 {
            let sign = 1u64 << 63;
            if op.abs >> i & 1 != 0 {
                out.iter_mut().for_each(|x| *x &= !sign);
            }
            if op.neg >> i & 1 != 0 {
                out.iter_mut().for_each(|x| *x ^= sign);
            }
        }
        Ok(())
    }

    #[inline]
    fn write32(&mut self, ctx: &Ctx<'_>, dst: usize, r: &[u32; 64], exec: u64) -> R<()> {
        let Some(d) = self.vreg_mut(dst) else {
            return Err(self.err(ctx, format!("VGPR v{dst} beyond the wave's allocation")));
        };
        if exec == u64::MAX {
            d.copy_from_slice(r);
        } else {
            for l in 0..64 {
                if exec >> l & 1 != 0 {
                    d[l] = r[l];
                }
            }
        }
        Ok(())
    }

    #[inline]
    fn write64(&mut self, ctx: &Ctx<'_>, dst: usize, r: &[u64; 64], exec: u64) -> R<()> {
        let lo: [u32; 64] = lanes(|l| r[l] as u32);
        let hi: [u32; 64] = lanes(|l| (r[l] >> 32) as u32);
        self.write32(ctx, dst, &lo, exec)?;
        self.write32(ctx, dst + 1, &hi, exec)
    }

    /// Runs until a barrier or the end of the program.
    pub(crate) fn run(&mut self, ctx: &mut Ctx<'_>) -> R<WaveStop> {
        loop {
            let prog = ctx.prog;
            let Some(op) = prog.ops.get(self.pc) else {
                return Err(ShaderError::new(format!(
                    "program counter left the decoded code of kernel {} (op index {})",
                    ctx.prog.name, self.pc
                )));
            };
            self.instrs += 1;
            let next = self.pc + 1;
            // A round mode other than nearest-even: rounding ops go through `round.rs`.
            if self.mode & 0xF != 0 && self.directed(ctx, op)? {
                self.pc = next;
                continue;
            }
            match op.enc {
                Enc::Valu => {
                    self.lane_instrs += self.active_lanes();
                    if op.fast == Fast::None || !self.valu_fast(op) {
                        self.valu(ctx, op)?;
                    }
                }
                Enc::Sop2 => {
                    self.lane_instrs += 1;
                    self.sop2(ctx, op)?
                }
                Enc::Sop1 => {
                    self.lane_instrs += 1;
                    if self.sop1(ctx, op)? {
                        continue;
                    }
                }
                Enc::Sopc => {
                    self.lane_instrs += 1;
                    self.sopc(ctx, op)?
                }
                Enc::Sopk => {
                    self.lane_instrs += 1;
                    self.sopk(ctx, op)?
                }
                Enc::Sopp => {
                    self.lane_instrs += 1;
                    match self.sopp(ctx, op)? {
                        Flow::Next => {}
                        Flow::Jump => continue,
                        Flow::Stop(s) => {
                            self.pc = next;
                            return Ok(s);
                        }
                    }
                }
                Enc::Smem => {
                    self.lane_instrs += 1;
                    self.smem(ctx, op)?
                }
                Enc::Ds => {
                    self.lane_instrs += self.active_lanes();
                    if op.fast == Fast::None || !self.ds_fast(ctx, op) {
                        self.ds(ctx, op)?
                    }
                }
                Enc::Flat => {
                    self.lane_instrs += self.active_lanes();
                    if op.fast == Fast::None || !self.flat_fast(ctx, op) {
                        self.flat(ctx, op)?
                    }
                }
                Enc::Invalid => {
                    // Decoded but of an encoding the core does not execute (MTBUF), or bits
                    // the decoder rejects.
                    return Err(match prog.insts.get(self.pc) {
                        Some(Some(_)) => self.unimpl(ctx),
                        _ => self.err(ctx, "invalid or undecodable instruction"),
                    });
                }
                // buffer_wbl2, buffer_inv, buffer_wbinvl1(_vol): cache maintenance, no
                // architectural effect without modelled caches.
                Enc::Mubuf if matches!(op.op, 0x28 | 0x29 | 0x3e | 0x3f) => {}
                Enc::Mubuf => {
                    self.lane_instrs += self.active_lanes();
                    self.mubuf(ctx, op)?
                }
                Enc::Vop3p => {
                    self.lane_instrs += self.active_lanes();
                    self.vop3p(ctx, op)?
                }
                Enc::Mai => {
                    self.lane_instrs += self.active_lanes();
                    self.mai(ctx, op)?
                }
            }
            self.pc = next;
        }
    }

    fn jump_to(&mut self, ctx: &Ctx<'_>, va: u64) -> R<()> {
        match ctx.prog.index_of(va) {
            Some(i) => {
                self.pc = i;
                Ok(())
            }
            None => Err(self.err(
                ctx,
                format!("branch target {va:#x} is outside the kernel's decoded code"),
            )),
        }
    }

    // ---- SALU ----

    fn sop2(&mut self, ctx: &Ctx<'_>, op: &Op) -> R<()> {
        let (c0, c1, l) = (op.src[0], op.src[1], op.lit);
        let is64 = matches!(
            op.op,
            0x0b | 0x0d
                | 0x0f
                | 0x11
                | 0x13
                | 0x15
                | 0x17
                | 0x19
                | 0x1b
                | 0x1d
                | 0x1f
                | 0x21
                | 0x27
        );
        if is64 {
            let a = self.rs64(ctx, c0, l, false)?;
            let b = self.rs64(ctx, c1, l, false)?;
            let b32 = self.rs(ctx, c1, l)?;
            let (r, scc) = match op.op {
                0x0b => (if self.scc { a } else { b }, None),
                0x0d => (a & b, Some(())),
                0x0f => (a | b, Some(())),
                0x11 => (a ^ b, Some(())),
                0x13 => (a & !b, Some(())),
                0x15 => (a | !b, Some(())),
                0x17 => (!(a & b), Some(())),
                0x19 => (!(a | b), Some(())),
                0x1b => (!(a ^ b), Some(())),
                0x1d => (a << (b32 & 63), Some(())),
                0x1f => (a >> (b32 & 63), Some(())),
                0x21 => (((a as i64) >> (b32 & 63)) as u64, Some(())),
                0x27 => {
                    let off = b32 & 63;
                    let w = (b32 >> 16) & 0x7F;
                    let v = if w == 0 {
                        0
                    } else {
                        (a >> off) & (u64::MAX >> (64 - w.min(64)))
                    };
                    (v, Some(()))
                }
                _ => return Err(self.unimpl(ctx)),
            };
            if scc.is_some() {
                self.scc = r != 0;
            }
            self.ws64(op.dst, r);
            return Ok(());
        }
        let a = self.rs(ctx, c0, l)?;
        let b = self.rs(ctx, c1, l)?;
        let (ai, bi) = (a as i32, b as i32);
        let mut scc = self.scc;
        let r = match op.op {
            0x00 => {
                let (r, c) = a.overflowing_add(b);
                scc = c;
                r
            }
            0x01 => {
                let (r, c) = a.overflowing_sub(b);
                scc = c;
                r
            }
            0x02 => {
                let (r, o) = ai.overflowing_add(bi);
                scc = o;
                r as u32
            }
            0x03 => {
                let (r, o) = ai.overflowing_sub(bi);
                scc = o;
                r as u32
            }
            0x04 => {
                let r = a as u64 + b as u64 + self.scc as u64;
                scc = r >> 32 != 0;
                r as u32
            }
            0x05 => {
                let r = (a as u64)
                    .wrapping_sub(b as u64)
                    .wrapping_sub(self.scc as u64);
                scc = r >> 32 != 0;
                r as u32
            }
            0x06 => {
                scc = ai < bi;
                ai.min(bi) as u32
            }
            0x07 => {
                scc = a < b;
                a.min(b)
            }
            0x08 => {
                scc = ai > bi;
                ai.max(bi) as u32
            }
            0x09 => {
                scc = a > b;
                a.max(b)
            }
            0x0a => {
                if self.scc {
                    a
                } else {
                    b
                }
            }
            0x0c | 0x0e | 0x10 | 0x12 | 0x14 | 0x1c | 0x1e | 0x20 | 0x2a => {
                let r = match op.op {
                    0x0c => a & b,
                    0x0e => a | b,
                    0x10 => a ^ b,
                    0x12 => a & !b,
                    0x14 => a | !b,
                    0x1c => a << (b & 31),
                    0x1e => a >> (b & 31),
                    0x20 => (ai >> (b & 31)) as u32,
                    _ => ai.wrapping_sub(bi).unsigned_abs(),
                };
                scc = r != 0;
                r
            }
            0x22 => (((1u64 << (a & 31)) - 1) as u32).wrapping_shl(b & 31),
            0x24 => ai.wrapping_mul(bi) as u32,
            0x25 | 0x26 => {
                let off = b & 31;
                let w = (b >> 16) & 0x7F;
                let r = if w == 0 {
                    0
                } else if op.op == 0x25 {
                    ((a as u64 >> off) & ((1u64 << w.min(32)) - 1)) as u32
                } else {
                    let w = w.min(32);
                    let x = (a >> off) as u64 & ((1u64 << w) - 1);
                    (((x << (64 - w)) as i64) >> (64 - w)) as u32
                };
                scc = r != 0;
                r
            }
            0x2c => ((a as u64 * b as u64) >> 32) as u32,
            0x2d => ((ai as i64 * bi as i64) >> 32) as u32,
            0x2e..=0x31 => {
                let sh = (op.op - 0x2d) as u32;
                let r = ((a as u64) << sh) + b as u64;
                scc = r >> 32 != 0;
                r as u32
            }
            0x32 => (a & 0xFFFF) | (b << 16),
            0x33 => (a & 0xFFFF) | (b & 0xFFFF_0000),
            0x34 => (a >> 16) | (b & 0xFFFF_0000),
            _ => return Err(self.unimpl(ctx)),
        };
        self.scc = scc;
        self.ws(op.dst, r);
        Ok(())
    }

    /// Returns true when the op changed the PC itself.
    fn sop1(&mut self, ctx: &Ctx<'_>, op: &Op) -> R<bool> {
        let (c, l) = (op.src[0], op.lit);
        match op.op {
            0x00 => {
                let v = self.rs(ctx, c, l)?;
                self.ws(op.dst, v)
            }
            0x01 => {
                let v = self.rs64(ctx, c, l, false)?;
                self.ws64(op.dst, v)
            }
            0x02 => {
                if self.scc {
                    let v = self.rs(ctx, c, l)?;
                    self.ws(op.dst, v)
                }
            }
            0x03 => {
                if self.scc {
                    let v = self.rs64(ctx, c, l, false)?;
                    self.ws64(op.dst, v)
                }
            }
            0x04 => {
                let v = !self.rs(ctx, c, l)?;
                self.scc = v != 0;
                self.ws(op.dst, v)
            }
            0x05 => {
                let v = !self.rs64(ctx, c, l, false)?;
                self.scc = v != 0;
                self.ws64(op.dst, v)
            }
            0x08 => {
                let v = self.rs(ctx, c, l)?.reverse_bits();
                self.ws(op.dst, v)
            }
            0x0a | 0x0c => {
                let x = self.rs(ctx, c, l)?;
                let v = if op.op == 0x0c {
                    x.count_ones()
                } else {
                    x.count_zeros()
                };
                self.scc = v != 0;
                self.ws(op.dst, v)
            }
            0x0b | 0x0d => {
                let x = self.rs64(ctx, c, l, false)?;
                let v = if op.op == 0x0d {
                    x.count_ones()
                } else {
                    x.count_zeros()
                };
                self.scc = v != 0;
                self.ws(op.dst, v)
            }
            0x10 => {
                let x = self.rs(ctx, c, l)?;
                let v = if x == 0 { u32::MAX } else { x.trailing_zeros() };
                self.ws(op.dst, v)
            }
            0x11 => {
                let x = self.rs64(ctx, c, l, false)?;
                let v = if x == 0 { u32::MAX } else { x.trailing_zeros() };
                self.ws(op.dst, v)
            }
            0x12 => {
                let x = self.rs(ctx, c, l)?;
                let v = if x == 0 { u32::MAX } else { x.leading_zeros() };
                self.ws(op.dst, v)
            }
            0x13 => {
                let x = self.rs64(ctx, c, l, false)?;
                let v = if x == 0 { u32::MAX } else { x.leading_zeros() };
                self.ws(op.dst, v)
            }
            0x16 => {
                let v = self.rs(ctx, c, l)? as i8 as i32 as u32;
                self.ws(op.dst, v)
            }
            0x17 => {
                let v = self.rs(ctx, c, l)? as i16 as i32 as u32;
                self.ws(op.dst, v)
            }
            0x18 | 0x1a => {
                let b = self.rs(ctx, c, l)? & 31;
                let d = self.s.get(op.dst as usize).copied().unwrap_or(0);
                let v = if op.op == 0x18 {
                    d & !(1 << b)
                } else {
                    d | (1 << b)
                };
                self.ws(op.dst, v)
            }
            0x1c => {
                let pc = ctx.prog.addr_of(self.pc + 1);
                self.ws64(op.dst, pc);
            }
            0x1d => {
                let t = self.rs64(ctx, c, l, false)?;
                self.jump_to(ctx, t)?;
                return Ok(true);
            }
            0x1e => {
                let t = self.rs64(ctx, c, l, false)?;
                let ret = ctx.prog.addr_of(self.pc + 1);
                self.ws64(op.dst, ret);
                self.jump_to(ctx, t)?;
                return Ok(true);
            }
            0x20..=0x25 | 0x33 => {
                let s = self.rs64(ctx, c, l, false)?;
                let e = self.exec();
                let n = match op.op {
                    0x20 => s & e,
                    0x21 => s | e,
                    0x22 => s ^ e,
                    0x23 => s & !e,
                    0x24 => s | !e,
                    0x25 => !(s & e),
                    _ => !s & e,
                };
                self.ws64(op.dst, e);
                self.ws64(EXEC, n);
                self.scc = n != 0;
            }
            0x35 | 0x36 => {
                let s = self.rs64(ctx, c, l, false)?;
                let e = self.exec();
                let n = if op.op == 0x35 { !s & e } else { s & !e };
                self.ws64(EXEC, n);
                self.ws64(op.dst, n);
                self.scc = n != 0;
            }
            0x30 => {
                let v = (self.rs(ctx, c, l)? as i32).unsigned_abs();
                self.scc = v != 0;
                self.ws(op.dst, v)
            }
            _ => return Err(self.unimpl(ctx)),
        }
        Ok(false)
    }

    fn sopc(&mut self, ctx: &Ctx<'_>, op: &Op) -> R<()> {
        if matches!(op.op, 0x12 | 0x13) {
            let a = self.rs64(ctx, op.src[0], op.lit, false)?;
            let b = self.rs64(ctx, op.src[1], op.lit, false)?;
            self.scc = if op.op == 0x12 { a == b } else { a != b };
            return Ok(());
        }
        let a = self.rs(ctx, op.src[0], op.lit)?;
        let b = self.rs(ctx, op.src[1], op.lit)?;
        let (ai, bi) = (a as i32, b as i32);
        self.scc = match op.op {
            0x0 => ai == bi,
            0x1 => ai != bi,
            0x2 => ai > bi,
            0x3 => ai >= bi,
            0x4 => ai < bi,
            0x5 => ai <= bi,
            0x6 => a == b,
            0x7 => a != b,
            0x8 => a > b,
            0x9 => a >= b,
            0xa => a < b,
            0xb => a <= b,
            0xc => (a >> (b & 31)) & 1 == 0,
            0xd => (a >> (b & 31)) & 1 == 1,
            0xe => {
                let x = self.rs64(ctx, op.src[0], op.lit, false)?;
                (x >> (b & 63)) & 1 == 0
            }
            0xf => {
                let x = self.rs64(ctx, op.src[0], op.lit, false)?;
                (x >> (b & 63)) & 1 == 1
            }
            _ => return Err(self.unimpl(ctx)),
        };
        Ok(())
    }

    fn sopk(&mut self, ctx: &Ctx<'_>, op: &Op) -> R<()> {
        let k = op.imm as u32 & 0xFFFF;
        let ks = k as u16 as i16 as i32;
        let d = self.s.get(op.dst as usize).copied().unwrap_or(0);
        match op.op {
            0x0 => self.ws(op.dst, ks as u32),
            0x1 => {
                if self.scc {
                    self.ws(op.dst, ks as u32)
                }
            }
            0x2..=0x7 => {
                let a = d as i32;
                self.scc = match op.op {
                    0x2 => a == ks,
                    0x3 => a != ks,
                    0x4 => a > ks,
                    0x5 => a >= ks,
                    0x6 => a < ks,
                    _ => a <= ks,
                };
            }
            0x8..=0xd => {
                self.scc = match op.op {
                    0x8 => d == k,
                    0x9 => d != k,
                    0xa => d > k,
                    0xb => d >= k,
                    0xc => d < k,
                    _ => d <= k,
                };
            }
            0xe => {
                let (r, o) = (d as i32).overflowing_add(ks);
                self.scc = o;
                self.ws(op.dst, r as u32)
            }
            0xf => self.ws(op.dst, (d as i32).wrapping_mul(ks) as u32),
            0x11 => {
                let v = self.getreg(ctx, k)?;
                self.ws(op.dst, v)
            }
            0x12 | 0x14 => {
                let v = if op.op == 0x14 { op.lit } else { d };
                self.setreg(ctx, k, v)?
            }
            _ => return Err(self.unimpl(ctx)),
        }
        Ok(())
    }

    fn hwreg_field(k: u32) -> (u32, u32, u32) {
        let id = k & 0x3F;
        let off = (k >> 6) & 0x1F;
        let size = ((k >> 11) & 0x1F) + 1;
        (id, off, size)
    }

    fn getreg(&self, ctx: &Ctx<'_>, k: u32) -> R<u32> {
        let (id, off, size) = Self::hwreg_field(k);
        let full = match id {
            1 => self.mode,
            // STATUS: SCC (bit 0), EXECZ (9), VCCZ (10), IN_BARRIER...
            2 => {
                self.scc as u32
                    | ((self.exec() == 0) as u32) << 9
                    | ((self.vcc() == 0) as u32) << 10
            }
            3 => 0, // TRAPSTS: no exception raised
            4 => self.hw_id,
            // GPR_ALLOC / LDS_ALLOC / IB_STS: report zero-based fields are not modelled.
            _ => {
                return Err(self.err(
                    ctx,
                    format!("s_getreg of hardware register {id} is not modelled"),
                ))
            }
        };
        let mask = if size >= 32 {
            u32::MAX
        } else {
            (1 << size) - 1
        };
        Ok((full >> off) & mask)
    }

    fn setreg(&mut self, ctx: &Ctx<'_>, k: u32, v: u32) -> R<()> {
        let (id, off, size) = Self::hwreg_field(k);
        if id != 1 {
            return Err(self.err(
                ctx,
                format!("s_setreg of hardware register {id} is not modelled"),
            ));
        }
        let mask = (if size >= 32 {
            u32::MAX
        } else {
            (1 << size) - 1
        }) << off;
        // Any round mode: ops that round go through `round.rs` while it is not nearest-even.
        self.mode = (self.mode & !mask) | ((v << off) & mask);
        Ok(())
    }

    fn sopp(&mut self, ctx: &Ctx<'_>, op: &Op) -> R<Flow> {
        let target = || {
            ctx.prog
                .addr_of(self.pc + 1)
                .wrapping_add((op.imm as i64 * 4) as u64)
        };
        let take = match op.op {
            // s_nop, s_waitcnt, s_sethalt is below, s_sleep, s_setprio, s_icache_inv,
            // s_incperflevel, s_decperflevel, s_ttracedata: no architectural effect here
            // (memory operations complete in order).
            // s_sleep: no architectural effect, but a polling wave gives its host core away
            // (the hardware parks it for 64 * N clocks).
            // It also lets the work-group's other waves run (a spin-wait on another wave's
            // store makes progress).
            0x0e => {
                if op.imm & 0x7F != 0 {
                    std::thread::yield_now();
                }
                return Ok(Flow::Stop(WaveStop::Sleep));
            }
            0x00 | 0x0c | 0x0f | 0x13 | 0x14 | 0x15 | 0x16 => return Ok(Flow::Next),
            0x01 => return Ok(Flow::Stop(WaveStop::End)),
            0x0a => return Ok(Flow::Stop(WaveStop::Barrier)),
            0x02 => true,
            0x04 => !self.scc,
            0x05 => self.scc,
            0x06 => self.vcc() == 0,
            0x07 => self.vcc() != 0,
            0x08 => self.exec() == 0,
            0x09 => self.exec() != 0,
            // Debugger branches: no debugger attached.
            0x17..=0x1a => false,
            0x12 => {
                return Err(self.err(
                    ctx,
                    format!("s_trap {} raised (no trap handler)", op.imm & 0xFF),
                ))
            }
            0x0d => {
                if op.imm & 1 != 0 {
                    return Err(self.err(ctx, "s_sethalt 1 halted the wave"));
                }
                return Ok(Flow::Next);
            }
            _ => return Err(self.unimpl(ctx)),
        };
        if take {
            let t = target();
            self.jump_to(ctx, t)?;
            Ok(Flow::Jump)
        } else {
            Ok(Flow::Next)
        }
    }

    fn smem(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        let n = match op.op {
            0x00..=0x04 => 1u16 << op.op,
            0x20..=0x23 => return Ok(()), // s_dcache_inv/wb(_vol): no cache
            0x24 | 0x25 => {
                let t = (ctx.clock)();
                self.ws64(op.dst, t);
                return Ok(());
            }
            _ => return Err(self.unimpl(ctx)),
        };
        let base = (self.s.get(op.src[0] as usize).copied().unwrap_or(0) as u64
            | (self.s.get(op.src[0] as usize + 1).copied().unwrap_or(0) as u64) << 32)
            & 0xFFFF_FFFF_FFFF;
        let mut off = op.imm as i64;
        if op.ext & 2 != 0 || op.ext & 1 != 0 {
            off += self.rs(ctx, op.src[1], 0)? as i64;
        }
        let addr = base.wrapping_add(off as u64) & !3;
        // The n dwords through one translation when they lie in one window (the kernarg
        // loads of every wave); otherwise dword by dword, faulting on the first unmapped.
        if let Ok(p) = ctx.mem.ptr(addr, 4 * n as u64, false) {
            for i in 0..n {
                // SAFETY: `ptr` proved [addr, addr + 4n) lies in a live mapping; `load_raw`
                // is atomic (or bytewise when the host address is not 4-aligned).
                let v = unsafe { mem::load_raw(p.add(4 * i as usize), 4) } as u32;
                self.ws(op.dst + i, v);
            }
            return Ok(());
        }
        for i in 0..n {
            let v = ctx
                .mem
                .load(addr + 4 * i as u64, 4)
                .map_err(|f| self.mem_err(ctx, f))? as u32;
            self.ws(op.dst + i, v);
        }
        Ok(())
    }

    // ---- VALU ----

    fn valu(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        // Operand buffers live in the wave (no per-instruction zeroing of 2 KiB of stack).
        let mut tmp = self.tmp.take().unwrap_or_default();
        let r = self.valu_ops(ctx, op, &mut tmp);
        self.tmp = Some(tmp);
        r
    }

    fn valu_ops(&mut self, ctx: &mut Ctx<'_>, op: &Op, tmp: &mut Tmp) -> R<()> {
        if op.form == VopForm::Sdwa {
            return self.sdwa(ctx, op, tmp);
        }
        let mut exec = self.exec();
        if op.form == VopForm::Dpp {
            exec &= self.dpp(ctx, op, exec)?;
        }
        let d = op.dst as usize;
        let a = &mut tmp.a;
        let b = &mut tmp.b;
        let c = &mut tmp.c;
        macro_rules! u1 {
            ($f:expr) => {{
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                let f = $f;
                let r: [u32; 64] = lanes(|l| f(a[l]));
                self.write32(ctx, d, &r, exec)?;
            }};
        }
        macro_rules! u2 {
            ($f:expr) => {{
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                let f = $f;
                let r: [u32; 64] = lanes(|l| f(a[l], b[l]));
                self.write32(ctx, d, &r, exec)?;
            }};
        }
        macro_rules! u3 {
            ($f:expr) => {{
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                self.fetch(ctx, op, 2, Ty::B32, c)?;
                let f = $f;
                let r: [u32; 64] = lanes(|l| f(a[l], b[l], c[l]));
                self.write32(ctx, d, &r, exec)?;
            }};
        }
        // MODE.FP_DENORM: per type, bit 0 allows input denormals, bit 1 output denormals
        // (0 = flush both, 3 = allow both); [5:4] f32, [7:6] f64/f16.
        let ftz_in = self.mode & 0x10 == 0;
        let ftz = self.mode & 0x20 == 0;
        let ftz64_in = self.mode & 0x40 == 0;
        let ftz64_out = self.mode & 0x80 == 0;
        let flush64 = move |v: &mut [u64; 64], on: bool| {
            if on {
                for x in v.iter_mut() {
                    if *x & 0x7FF0_0000_0000_0000 == 0 {
                        *x &= 1 << 63;
                    }
                }
            }
        };
        let omod = op.omod;
        let clamp = op.clamp;
        let post = move |x: f32| -> u32 {
            let mut x = match omod {
                1 => x * 2.0,
                2 => x * 4.0,
                3 => x * 0.5,
                _ => x,
            };
            if clamp {
                x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
            }
            if ftz {
                x = ftz32(x);
            }
            x.to_bits()
        };
        let pre = move |x: u32| -> f32 {
            let f = f32::from_bits(x);
            if ftz_in {
                ftz32(f)
            } else {
                f
            }
        };
        // Float ops: inputs flushed in a pass of their own, the operation in a plain lane
        // loop (small enough to inline and vectorise), output modifiers in a final pass.
        let needs_post = omod != 0 || clamp || ftz;
        let flush = move |v: &mut [u32; 64]| {
            if ftz_in {
                for x in v.iter_mut() {
                    if *x & 0x7F80_0000 == 0 {
                        *x &= 0x8000_0000;
                    }
                }
            }
        };
        let finish = move |r: &mut [u32; 64]| {
            if needs_post {
                for x in r.iter_mut() {
                    *x = post(f32::from_bits(*x));
                }
            }
        };
        macro_rules! f1 {
            ($f:expr) => {{
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                flush(a);
                let f = $f;
                let mut r: [u32; 64] = lanes(|l| f(f32::from_bits(a[l])).to_bits());
                finish(&mut r);
                self.write32(ctx, d, &r, exec)?;
            }};
        }
        macro_rules! f2 {
            ($f:expr) => {{
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::F32, b)?;
                flush(a);
                flush(b);
                let f = $f;
                let mut r: [u32; 64] =
                    lanes(|l| f(f32::from_bits(a[l]), f32::from_bits(b[l])).to_bits());
                finish(&mut r);
                self.write32(ctx, d, &r, exec)?;
            }};
        }
        macro_rules! f3 {
            ($f:expr) => {{
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::F32, b)?;
                self.fetch(ctx, op, 2, Ty::F32, c)?;
                flush(a);
                flush(b);
                flush(c);
                let f = $f;
                let mut r: [u32; 64] = lanes(|l| {
                    f(
                        f32::from_bits(a[l]),
                        f32::from_bits(b[l]),
                        f32::from_bits(c[l]),
                    )
                    .to_bits()
                });
                finish(&mut r);
                self.write32(ctx, d, &r, exec)?;
            }};
        }
        let a64 = &mut tmp.a64;
        let b64 = &mut tmp.b64;
        let c64 = &mut tmp.c64;
        macro_rules! d2 {
            ($f:expr) => {{
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                self.fetch64(ctx, op, 1, Ty::F64, b64)?;
                flush64(a64, ftz64_in);
                flush64(b64, ftz64_in);
                let f = $f;
                let mut r: [u64; 64] =
                    lanes(|l| f(f64::from_bits(a64[l]), f64::from_bits(b64[l])).to_bits());
                flush64(&mut r, ftz64_out);
                self.write64(ctx, d, &r, exec)?;
            }};
        }
        macro_rules! d1 {
            ($f:expr) => {{
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                flush64(a64, ftz64_in);
                let f = $f;
                let mut r: [u64; 64] = lanes(|l| f(f64::from_bits(a64[l])).to_bits());
                flush64(&mut r, ftz64_out);
                self.write64(ctx, d, &r, exec)?;
            }};
        }
        let e32 = op.form == VopForm::E32;
        if op.opsel != 0 && (0x11f..=0x133).contains(&op.op) {
            return Err(self.err(ctx, "op_sel on a 16-bit VOP3 operation is not modelled"));
        }
        match op.op {
            // VOPC compares (0x00..=0xFF).
            0x00..=0xFF => return self.vopc(ctx, op, exec),
            // ---- VOP2 (0x100 + n) ----
            0x100 => {
                // v_cndmask_b32
                let m = if e32 {
                    self.vcc()
                } else {
                    self.rs64(ctx, op.src[2], op.lit, false)?
                };
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::F32, b)?;
                let r: [u32; 64] = lanes(|l| if m >> l & 1 != 0 { b[l] } else { a[l] });
                self.write32(ctx, d, &r, exec)?;
            }
            0x101 => f2!(|x: f32, y: f32| x + y),
            0x102 => f2!(|x: f32, y: f32| x - y),
            0x103 => f2!(|x: f32, y: f32| y - x),
            0x105 => f2!(|x: f32, y: f32| x * y),
            0x106 => u2!(
                |x: u32, y: u32| ((x << 8) as i32 >> 8).wrapping_mul((y << 8) as i32 >> 8) as u32
            ),
            0x107 => u2!(|x: u32, y: u32| ((((x << 8) as i32 >> 8) as i64
                * ((y << 8) as i32 >> 8) as i64)
                >> 32) as u32),
            0x108 => u2!(|x: u32, y: u32| (x & 0xFF_FFFF).wrapping_mul(y & 0xFF_FFFF)),
            0x109 => u2!(
                |x: u32, y: u32| (((x & 0xFF_FFFF) as u64 * (y & 0xFF_FFFF) as u64) >> 32) as u32
            ),
            0x10a => f2!(|x: f32, y: f32| fmin(x, y)),
            0x10b => f2!(|x: f32, y: f32| fmax(x, y)),
            0x10c => u2!(|x: u32, y: u32| (x as i32).min(y as i32) as u32),
            0x10d => u2!(|x: u32, y: u32| (x as i32).max(y as i32) as u32),
            0x10e => u2!(|x: u32, y: u32| x.min(y)),
            0x10f => u2!(|x: u32, y: u32| x.max(y)),
            0x110 => u2!(|x: u32, y: u32| y >> (x & 31)),
            0x111 => u2!(|x: u32, y: u32| ((y as i32) >> (x & 31)) as u32),
            0x112 => u2!(|x: u32, y: u32| y << (x & 31)),
            0x113 => u2!(|x: u32, y: u32| x & y),
            0x114 => u2!(|x: u32, y: u32| x | y),
            0x115 => u2!(|x: u32, y: u32| x ^ y),
            0x13d => u2!(|x: u32, y: u32| !(x ^ y)),
            // 16-bit integer VOP2 (gfx9 writes the low half and zeroes the high half).
            0x126 => u2!(|x: u32, y: u32| (x as u16).wrapping_add(y as u16) as u32),
            0x127 => u2!(|x: u32, y: u32| (x as u16).wrapping_sub(y as u16) as u32),
            0x128 => u2!(|x: u32, y: u32| (y as u16).wrapping_sub(x as u16) as u32),
            0x129 => u2!(|x: u32, y: u32| (x as u16).wrapping_mul(y as u16) as u32),
            0x12a => u2!(|x: u32, y: u32| ((y as u16) << (x & 15)) as u32),
            0x12b => u2!(|x: u32, y: u32| ((y as u16) >> (x & 15)) as u32),
            0x12c => u2!(|x: u32, y: u32| ((y as u16 as i16) >> (x & 15)) as u16 as u32),
            0x12f => u2!(|x: u32, y: u32| (x as u16).max(y as u16) as u32),
            0x130 => u2!(|x: u32, y: u32| (x as u16 as i16).max(y as u16 as i16) as u16 as u32),
            0x131 => u2!(|x: u32, y: u32| (x as u16).min(y as u16) as u32),
            0x132 => u2!(|x: u32, y: u32| (x as u16 as i16).min(y as u16 as i16) as u16 as u32),
            // f16 VOP2 (computed in f32: one rounding to f16 is exact for + - * min max).
            0x11f..=0x122 | 0x12d | 0x12e => {
                self.fetch(ctx, op, 0, Ty::F16, a)?;
                self.fetch(ctx, op, 1, Ty::F16, b)?;
                let ftz16 = self.mode & 0xC0 == 0;
                let k = op.op;
                let r: [u32; 64] = lanes(|l| {
                    let g = |v: u32| half::f16::from_bits(ftz_f16(v as u16, ftz16)).to_f32();
                    let (x, y) = (g(a[l]), g(b[l]));
                    let mut v = match k {
                        0x11f => x + y,
                        0x120 => x - y,
                        0x121 => y - x,
                        0x122 => x * y,
                        0x12d => fmax(x, y),
                        _ => fmin(x, y),
                    };
                    if clamp {
                        v = if v.is_nan() { 0.0 } else { v.clamp(0.0, 1.0) };
                    }
                    ftz_f16(half::f16::from_f32(v).to_bits(), ftz16) as u32
                });
                if omod != 0 {
                    return Err(self.err(ctx, "f16 output modifier is not modelled"));
                }
                self.write32(ctx, d, &r, exec)?;
            }
            0x13c => {
                // v_pk_fmac_f16: D.lo/hi = S0.lo/hi * S1.lo/hi + D.lo/hi
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                c.copy_from_slice(self.vreg(ctx, d)?);
                let ftz16 = self.mode & 0xC0 == 0;
                let r: [u32; 64] = lanes(|l| {
                    let h = |x: u32, sh: u32| f16_fma(x >> sh, b[l] >> sh, c[l] >> sh, ftz16);
                    h(a[l], 0) as u32 | (h(a[l], 16) as u32) << 16
                });
                self.write32(ctx, d, &r, exec)?;
            }
            0x116 | 0x13b => {
                // v_mac_f32 / v_fmac_f32: D = S0 * S1 + D
                let mut dd = [0u32; 64];
                dd.copy_from_slice(self.vreg(ctx, d)?);
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::F32, b)?;
                let fused = op.op == 0x13b;
                flush(a);
                flush(b);
                flush(&mut dd);
                let mut r: [u32; 64] = if fused {
                    fma_lanes(a, b, &dd)
                } else {
                    lanes(|l| {
                        let (x, y, z) = (
                            f32::from_bits(a[l]),
                            f32::from_bits(b[l]),
                            f32::from_bits(dd[l]),
                        );
                        (x * y + z).to_bits()
                    })
                };
                finish(&mut r);
                self.write32(ctx, d, &r, exec)?;
            }
            0x119..=0x11e => return self.carry_op(ctx, op, exec),
            0x134 => u2!(|x: u32, y: u32| x.wrapping_add(y)),
            0x135 => u2!(|x: u32, y: u32| x.wrapping_sub(y)),
            0x136 => u2!(|x: u32, y: u32| y.wrapping_sub(x)),
            0x104 => {
                // v_fmac_f64
                let mut dd = [0u64; 64];
                let mut lo = [0u32; 64];
                let mut hi = [0u32; 64];
                lo.copy_from_slice(self.vreg(ctx, d)?);
                hi.copy_from_slice(self.vreg(ctx, d + 1)?);
                for l in 0..64 {
                    dd[l] = lo[l] as u64 | (hi[l] as u64) << 32;
                }
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                self.fetch64(ctx, op, 1, Ty::F64, b64)?;
                let r: [u64; 64] = lanes(|l| {
                    f64::from_bits(a64[l])
                        .mul_add(f64::from_bits(b64[l]), f64::from_bits(dd[l]))
                        .to_bits()
                });
                self.write64(ctx, d, &r, exec)?;
            }
            // ---- VOP1 (0x140 + n) ----
            0x140 => {}
            0x141 => u1!(|x: u32| x),
            0x142 => {
                // v_readfirstlane_b32: dst is an SGPR.
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                let lane = if exec == 0 {
                    0
                } else {
                    exec.trailing_zeros() as usize
                };
                self.ws(op.dst, a[lane]);
            }
            0x143 => {
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                let r: [u32; 64] = lanes(|l| f64_to_i32(f64::from_bits(a64[l])) as u32);
                self.write32(ctx, d, &r, exec)?;
            }
            0x144 | 0x156 | 0x150 => {
                let ty = if op.op == 0x150 { Ty::F32 } else { Ty::B32 };
                self.fetch(ctx, op, 0, ty, a)?;
                let r: [u64; 64] = lanes(|l| {
                    match op.op {
                        0x144 => a[l] as i32 as f64,
                        0x156 => a[l] as f64,
                        _ => pre(a[l]) as f64,
                    }
                    .to_bits()
                });
                self.write64(ctx, d, &r, exec)?;
            }
            0x145 => u1!(|x: u32| post(x as i32 as f32)),
            0x146 => u1!(|x: u32| post(x as f32)),
            // Integer results: MODE's output-denormal flush and float output modifiers do
            // not apply (flushing the result bits zeroed every |result| < 2^23).
            0x147 | 0x148 | 0x173 => {
                if omod != 0 {
                    return Err(self.err(ctx, "output modifier on an integer result"));
                }
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                flush(a);
                let k = op.op;
                let r: [u32; 64] = lanes(|l| {
                    let x = f32::from_bits(a[l]);
                    match k {
                        0x147 => f32_to_u32(x),
                        0x148 => f32_to_i32(x) as u32,
                        _ => frexp_exp(x) as u32,
                    }
                });
                self.write32(ctx, d, &r, exec)?;
            }
            0x14a => {
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                let r: [u32; 64] = lanes(|l| half::f16::from_f32(pre(a[l])).to_bits() as u32);
                self.write32(ctx, d, &r, exec)?;
            }
            0x14b => {
                self.fetch(ctx, op, 0, Ty::F16, a)?;
                let r: [u32; 64] = lanes(|l| post(half::f16::from_bits(a[l] as u16).to_f32()));
                self.write32(ctx, d, &r, exec)?;
            }
            0x14f => {
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                let r: [u32; 64] = lanes(|l| post(f64::from_bits(a64[l]) as f32));
                self.write32(ctx, d, &r, exec)?;
            }
            0x151..=0x154 => {
                let sh = (op.op - 0x151) * 8;
                u1!(|x: u32| post(((x >> sh) & 0xFF) as f32))
            }
            0x155 => {
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                let r: [u32; 64] = lanes(|l| f64_to_u32(f64::from_bits(a64[l])));
                self.write32(ctx, d, &r, exec)?;
            }
            0x157 => d1!(|x: f64| x.trunc()),
            0x158 => d1!(|x: f64| x.ceil()),
            0x159 => d1!(|x: f64| x.round_ties_even()),
            0x15a => d1!(|x: f64| x.floor()),
            // v_fract_f32/_f64: min(x - floor(x), the largest value below 1.0), so a tiny
            // negative x gives 0x1.fffffep-1 rather than 1.0; NaN for NaN and infinities
            // (LLVM ConstantFolding `amdgcn_fract`; firmware-notes/isa-gfx9.md).
            0x15b => f1!(|x: f32| {
                let v = x - x.floor(); // NaN for NaN and infinities
                if v.is_nan() {
                    v
                } else {
                    v.min(f32::from_bits(0x3F7F_FFFF))
                }
            }),
            0x172 => d1!(|x: f64| {
                let v = x - x.floor();
                if v.is_nan() {
                    v
                } else {
                    v.min(f64::from_bits(0x3FEF_FFFF_FFFF_FFFF))
                }
            }),
            0x15c => f1!(|x: f32| x.trunc()),
            0x15d => f1!(|x: f32| x.ceil()),
            0x15e => f1!(|x: f32| x.round_ties_even()),
            0x15f => f1!(|x: f32| x.floor()),
            0x160 => f1!(|x: f32| x.exp2()),
            0x161 => f1!(|x: f32| x.log2()),
            0x162 | 0x163 => f1!(|x: f32| 1.0 / x),
            0x164 => f1!(|x: f32| 1.0 / x.sqrt()),
            0x165 => d1!(|x: f64| 1.0 / x),
            0x166 => d1!(|x: f64| 1.0 / x.sqrt()),
            0x167 => f1!(|x: f32| x.sqrt()),
            0x168 => d1!(|x: f64| x.sqrt()),
            0x169 => f1!(|x: f32| (x * std::f32::consts::TAU).sin()),
            0x16a => f1!(|x: f32| (x * std::f32::consts::TAU).cos()),
            // f16 transcendentals (`wave/formats.rs`).
            0x17d..=0x181 | 0x189 | 0x18a => return self.f16_transcendental(ctx, op, exec),
            0x16b => u1!(|x: u32| !x),
            0x16c => u1!(|x: u32| x.reverse_bits()),
            0x16d => u1!(|x: u32| if x == 0 { u32::MAX } else { x.leading_zeros() }),
            0x16e => u1!(|x: u32| if x == 0 { u32::MAX } else { x.trailing_zeros() }),
            0x16f => u1!(|x: u32| {
                let s = x as i32;
                if s == 0 || s == -1 {
                    u32::MAX
                } else if s < 0 {
                    (!x).leading_zeros()
                } else {
                    x.leading_zeros()
                }
            }),
            0x174 => f1!(|x: f32| frexp_mant(x)),
            0x178 => {
                // v_mov_b64 (gfx940+)
                if ctx.target == Target::Gfx90a {
                    return Err(self.unimpl(ctx));
                }
                self.fetch64(ctx, op, 0, Ty::B32, a64)?;
                self.write64(ctx, d, a64, exec)?;
            }
            // v_accvgpr_mov_b32 (VOP1 0x52): AccVGPR to AccVGPR (operand codes name the AGPRs).
            0x192 => u1!(|x: u32| x),
            // ---- VOP3-only ----
            0x1c2 => u3!(|x: u32, y: u32, z: u32| (((x << 8) as i32 >> 8)
                .wrapping_mul((y << 8) as i32 >> 8)
                as u32)
                .wrapping_add(z)),
            0x1c3 => u3!(|x: u32, y: u32, z: u32| (x & 0xFF_FFFF)
                .wrapping_mul(y & 0xFF_FFFF)
                .wrapping_add(z)),
            0x1c1 => f3!(|x: f32, y: f32, z: f32| x * y + z),
            0x1c8 => u3!(|x: u32, y: u32, z: u32| {
                let (o, w) = (y & 31, z & 31);
                if w == 0 {
                    0
                } else {
                    ((x as u64 >> o) & ((1u64 << w) - 1)) as u32
                }
            }),
            0x1c9 => u3!(|x: u32, y: u32, z: u32| {
                let (o, w) = (y & 31, z & 31);
                if w == 0 {
                    0
                } else {
                    ((((x >> o) as u64) << (64 - w)) as i64 >> (64 - w)) as u32
                }
            }),
            0x1ca => u3!(|x: u32, y: u32, z: u32| (x & y) | (!x & z)),
            0x1cb => {
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::F32, b)?;
                self.fetch(ctx, op, 2, Ty::F32, c)?;
                flush(a);
                flush(b);
                flush(c);
                let mut r = fma_lanes(a, b, c);
                finish(&mut r);
                self.write32(ctx, d, &r, exec)?;
            }
            0x1cc => {
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                self.fetch64(ctx, op, 1, Ty::F64, b64)?;
                self.fetch64(ctx, op, 2, Ty::F64, c64)?;
                flush64(a64, ftz64_in);
                flush64(b64, ftz64_in);
                flush64(c64, ftz64_in);
                let mut r: [u64; 64] = lanes(|l| {
                    f64::from_bits(a64[l])
                        .mul_add(f64::from_bits(b64[l]), f64::from_bits(c64[l]))
                        .to_bits()
                });
                flush64(&mut r, ftz64_out);
                self.write64(ctx, d, &r, exec)?;
            }
            0x1ce => {
                u3!(|x: u32, y: u32, z: u32| (((x as u64) << 32 | y as u64) >> (z & 31)) as u32)
            }
            0x1cf => u3!(
                |x: u32, y: u32, z: u32| (((x as u64) << 32 | y as u64) >> (8 * (z & 3))) as u32
            ),
            0x1d0 => f3!(|x: f32, y: f32, z: f32| fmin(fmin(x, y), z)),
            0x1d1 => u3!(|x: u32, y: u32, z: u32| (x as i32).min(y as i32).min(z as i32) as u32),
            0x1d2 => u3!(|x: u32, y: u32, z: u32| x.min(y).min(z)),
            0x1d3 => f3!(|x: f32, y: f32, z: f32| fmax(fmax(x, y), z)),
            0x1d4 => u3!(|x: u32, y: u32, z: u32| (x as i32).max(y as i32).max(z as i32) as u32),
            0x1d5 => u3!(|x: u32, y: u32, z: u32| x.max(y).max(z)),
            0x1d7 => u3!(|x: u32, y: u32, z: u32| {
                let (x, y, z) = (x as i32, y as i32, z as i32);
                x.max(y).min(x.min(y).max(z)) as u32
            }),
            0x1d8 => u3!(|x: u32, y: u32, z: u32| x.max(y).min(x.min(y).max(z))),
            0x117 | 0x118 => {
                // v_fmamk_f32: S0 * K + S1; v_fmaak_f32: S0 * S1 + K (gfx940); gfx90a has the
                // unfused v_madmk_f32 / v_madak_f32 at the same opcodes.
                let fused = ctx.target != Target::Gfx90a;
                let k = f32::from_bits(op.lit);
                let mk = op.op == 0x117;
                f2!(|x: f32, y: f32| match (mk, fused) {
                    (true, true) => fma32(x, k, y),
                    (false, true) => fma32(x, y, k),
                    (true, false) => x * k + y,
                    (false, false) => x * y + k,
                })
            }
            0x1e0 | 0x1e1 => return self.div_scale(ctx, op, exec),
            0x1e2 => {
                // v_div_fmas_f32 with VCC clear is a plain fma (div_scale never sets VCC here).
                if self.vcc() & exec != 0 {
                    return Err(self.err(
                        ctx,
                        "v_div_fmas with VCC set (scaled division) is not modelled",
                    ));
                }
                f3!(fma32)
            }
            0x1e3 => {
                if self.vcc() & exec != 0 {
                    return Err(self.err(
                        ctx,
                        "v_div_fmas with VCC set (scaled division) is not modelled",
                    ));
                }
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                self.fetch64(ctx, op, 1, Ty::F64, b64)?;
                self.fetch64(ctx, op, 2, Ty::F64, c64)?;
                let r: [u64; 64] = lanes(|l| {
                    f64::from_bits(a64[l])
                        .mul_add(f64::from_bits(b64[l]), f64::from_bits(c64[l]))
                        .to_bits()
                });
                self.write64(ctx, d, &r, exec)?;
            }
            0x1de => {
                f3!(|q: f32, den: f32, num: f32| div_fixup(q as f64, den as f64, num as f64) as f32)
            }
            0x1df => {
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                self.fetch64(ctx, op, 1, Ty::F64, b64)?;
                self.fetch64(ctx, op, 2, Ty::F64, c64)?;
                let r: [u64; 64] = lanes(|l| {
                    div_fixup(
                        f64::from_bits(a64[l]),
                        f64::from_bits(b64[l]),
                        f64::from_bits(c64[l]),
                    )
                    .to_bits()
                });
                self.write64(ctx, d, &r, exec)?;
            }
            0x1e8 | 0x1e9 => {
                // v_mad_u64_u32 / v_mad_i64_i32 (VOP3B): D64 = S0 * S1 + S2_64
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                self.fetch64(ctx, op, 2, Ty::B32, c64)?;
                let signed = op.op == 0x1e9;
                let mut carry = 0u64;
                let r: [u64; 64] = lanes(|l| {
                    let (p, cy) = if signed {
                        let p =
                            (a[l] as i32 as i128) * (b[l] as i32 as i128) + c64[l] as i64 as i128;
                        (p as u64, p > i64::MAX as i128 || p < i64::MIN as i128)
                    } else {
                        let p = a[l] as u128 * b[l] as u128 + c64[l] as u128;
                        (p as u64, p >> 64 != 0)
                    };
                    if cy && exec >> l & 1 != 0 {
                        carry |= 1 << l;
                    }
                    p
                });
                self.write64(ctx, d, &r, exec)?;
                self.ws64(op.sdst, carry);
            }
            0x1f3 => u3!(|x: u32, y: u32, z: u32| (x ^ y).wrapping_add(z)),
            0x1ed => u3!(|x: u32, y: u32, z: u32| perm(x, y, z)),
            0x1fd => u3!(|x: u32, y: u32, z: u32| (x << (y & 31)).wrapping_add(z)),
            0x1fe => u3!(|x: u32, y: u32, z: u32| x.wrapping_add(y) << (z & 31)),
            0x1ff => u3!(|x: u32, y: u32, z: u32| x.wrapping_add(y).wrapping_add(z)),
            0x200 => u3!(|x: u32, y: u32, z: u32| (x << (y & 31)) | z),
            0x201 => u3!(|x: u32, y: u32, z: u32| (x & y) | z),
            0x202 => u3!(|x: u32, y: u32, z: u32| x | y | z),
            0x208 => {
                // v_lshl_add_u64 (gfx940+): D = (S0 << S1[2:0]) + S2
                if ctx.target == Target::Gfx90a {
                    return Err(self.unimpl(ctx));
                }
                self.fetch64(ctx, op, 0, Ty::B32, a64)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                self.fetch64(ctx, op, 2, Ty::B32, c64)?;
                let r: [u64; 64] = lanes(|l| (a64[l] << (b[l] & 7)).wrapping_add(c64[l]));
                self.write64(ctx, d, &r, exec)?;
            }
            0x206 => {
                // v_fma_f16 (op_sel picks halves; only the low halves are modelled).
                if op.opsel != 0 {
                    return Err(self.err(ctx, "v_fma_f16 with op_sel is not modelled"));
                }
                self.fetch(ctx, op, 0, Ty::F16, a)?;
                self.fetch(ctx, op, 1, Ty::F16, b)?;
                self.fetch(ctx, op, 2, Ty::F16, c)?;
                let h = |x: u32| half::f16::from_bits(x as u16).to_f64();
                let r: [u32; 64] = lanes(|l| {
                    // The f16 product is exact in f64; one rounding of the sum to f64,
                    // then to f16.
                    half::f16::from_f64(h(a[l]) * h(b[l]) + h(c[l])).to_bits() as u32
                });
                self.write32(ctx, d, &r, exec)?;
            }
            0x284 => {
                self.fetch64(ctx, op, 0, Ty::F64, a64)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                let r: [u64; 64] =
                    lanes(|l| ldexp64(f64::from_bits(a64[l]), b[l] as i32).to_bits());
                self.write64(ctx, d, &r, exec)?;
            }
            0x280 => d2!(|x: f64, y: f64| x + y),
            0x281 => d2!(|x: f64, y: f64| x * y),
            0x282 => d2!(|x: f64, y: f64| fmin64(x, y)),
            0x283 => d2!(|x: f64, y: f64| fmax64(x, y)),
            0x285 => u2!(|x: u32, y: u32| x.wrapping_mul(y)),
            0x286 => u2!(|x: u32, y: u32| ((x as u64 * y as u64) >> 32) as u32),
            0x287 => u2!(|x: u32, y: u32| ((x as i32 as i64 * y as i32 as i64) >> 32) as u32),
            0x288 => {
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                let r: [u32; 64] = lanes(|l| post(ldexp32(pre(a[l]), b[l] as i32)));
                self.write32(ctx, d, &r, exec)?;
            }
            0x289 => {
                // v_readlane_b32 sdst, vsrc, lane
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                let lane = self.rs(ctx, op.src[1], op.lit)? as usize & 63;
                self.ws(op.dst, a[lane]);
            }
            0x28a => {
                // v_writelane_b32 vdst, ssrc, lane (ignores EXEC)
                let v = self.rs(ctx, op.src[0], op.lit)?;
                let lane = self.rs(ctx, op.src[1], op.lit)? as usize & 63;
                match self.vreg_mut(d) {
                    Some(r) => r[lane] = v,
                    None => return Err(self.err(ctx, "VGPR beyond the wave's allocation")),
                }
            }
            0x28b => u2!(|x: u32, y: u32| x.count_ones().wrapping_add(y)),
            0x28c => {
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                let r: [u32; 64] = lanes(|l| {
                    let m = if l >= 32 {
                        a[l]
                    } else {
                        a[l] & ((1u64 << l) - 1) as u32
                    };
                    m.count_ones().wrapping_add(b[l])
                });
                self.write32(ctx, d, &r, exec)?;
            }
            0x28d => {
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                self.fetch(ctx, op, 1, Ty::B32, b)?;
                let r: [u32; 64] = lanes(|l| {
                    let m = if l < 32 {
                        0
                    } else {
                        a[l] & ((1u64 << (l - 32)) - 1) as u32
                    };
                    m.count_ones().wrapping_add(b[l])
                });
                self.write32(ctx, d, &r, exec)?;
            }
            0x28f..=0x291 => {
                self.fetch(ctx, op, 0, Ty::B32, a)?;
                self.fetch64(ctx, op, 1, Ty::B32, b64)?;
                let k = op.op;
                let r: [u64; 64] = lanes(|l| {
                    let s = a[l] & 63;
                    match k {
                        0x28f => b64[l] << s,
                        0x290 => b64[l] >> s,
                        _ => ((b64[l] as i64) >> s) as u64,
                    }
                });
                self.write64(ctx, d, &r, exec)?;
            }
            0x293 => u2!(|x: u32, y: u32| (((1u64 << (x & 31)) - 1) as u32).wrapping_shl(y & 31)),
            0x296 => {
                self.fetch(ctx, op, 0, Ty::F32, a)?;
                self.fetch(ctx, op, 1, Ty::F32, b)?;
                let r: [u32; 64] = lanes(|l| {
                    f32_to_f16_rtz(pre(a[l])) as u32 | (f32_to_f16_rtz(pre(b[l])) as u32) << 16
                });
                self.write32(ctx, d, &r, exec)?;
            }
            0x29c => u2!(|x: u32, y: u32| x.wrapping_add(y)),
            0x29d => u2!(|x: u32, y: u32| x.wrapping_sub(y)),
            0x2a0 => u2!(|x: u32, y: u32| (x & 0xFFFF) | (y << 16)),
            _ => return Err(self.unimpl(ctx)),
        }
        Ok(())
    }

    /// v_div_scale_f32/f64 (VOP3B). Only the unscaled case is modelled: when the ISA's
    /// pseudocode would scale an operand (extreme exponents, denormal quotients) the op faults.
    fn div_scale(&mut self, ctx: &Ctx<'_>, op: &Op, exec: u64) -> R<()> {
        let f64op = op.op == 0x1e1;
        let mut s = [[0u64; 64]; 3];
        for (i, v) in s.iter_mut().enumerate() {
            if f64op {
                self.fetch64(ctx, op, i, Ty::F64, v)?;
            } else {
                let mut t = [0u32; 64];
                self.fetch(ctx, op, i, Ty::F32, &mut t)?;
                for l in 0..64 {
                    v[l] = (f32::from_bits(t[l]) as f64).to_bits();
                }
            }
        }
        let (lim, tiny) = if f64op { (768, 53) } else { (96, 23) };
        let expo = |x: f64, f64op: bool| -> i32 {
            if f64op {
                ((x.to_bits() >> 52) & 0x7FF) as i32 - 1023
            } else {
                (((x as f32).to_bits() >> 23) & 0xFF) as i32 - 127
            }
        };
        let denorm = |x: f64| {
            if f64op {
                x.is_subnormal()
            } else {
                (x as f32).is_subnormal()
            }
        };
        let mut r = [0u64; 64];
        for l in 0..64 {
            let (s0, s1, s2) = (
                f64::from_bits(s[0][l]),
                f64::from_bits(s[1][l]),
                f64::from_bits(s[2][l]),
            );
            r[l] = s[0][l];
            if exec >> l & 1 == 0 || s0.is_nan() || s1.is_nan() || s2.is_nan() {
                continue;
            }
            if s2 == 0.0 || s1 == 0.0 {
                r[l] = f64::NAN.to_bits();
                continue;
            }
            if !s1.is_finite() || !s2.is_finite() {
                continue;
            }
            let scaled = expo(s2, f64op) - expo(s1, f64op) >= lim
                || denorm(s1)
                || denorm(1.0 / s1)
                || denorm(s2 / s1)
                || expo(s2, f64op) <= -(if f64op { 1022 } else { 126 }) + tiny;
            if scaled {
                return Err(self.err(
                    ctx,
                    "v_div_scale operands that need scaling (extreme exponents) are not modelled",
                ));
            }
        }
        if f64op {
            self.write64(ctx, op.dst as usize, &r, exec)?;
        } else {
            let r32: [u32; 64] = lanes(|l| (f64::from_bits(r[l]) as f32).to_bits());
            self.write32(ctx, op.dst as usize, &r32, exec)?;
        }
        // VCC (the scale flag) is clear for every lane.
        self.ws64(op.sdst, 0);
        Ok(())
    }

    /// Gathers the DPP-permuted src0 into `dpp_src`; returns the lanes that are written
    /// (row_mask/bank_mask, and bound_ctrl:0 lanes whose source is invalid are not).
    fn dpp(&mut self, ctx: &Ctx<'_>, op: &Op, exec: u64) -> R<u64> {
        let ctrl = (op.ext >> 8) & 0x1FF;
        let bound_zero = (op.ext >> 19) & 1 != 0;
        let bank_mask = (op.ext >> 24) & 0xF;
        let row_mask = (op.ext >> 28) & 0xF;
        let mut src = [0u32; 64];
        src.copy_from_slice(self.vreg(ctx, vcode(op.src[0]))?);
        let mut write = 0u64;
        for l in 0..64usize {
            let row = l >> 4;
            let bank = (l >> 2) & 3;
            if row_mask >> row & 1 == 0 || bank_mask >> bank & 1 == 0 {
                continue;
            }
            let r = l & 15;
            let base = l & !15;
            let s: Option<usize> = match ctrl {
                0x000..=0x0FF => Some((l & !3) | ((ctrl >> (2 * (l & 3))) & 3) as usize),
                0x101..=0x10F => {
                    let n = (ctrl & 0xF) as usize;
                    (r + n < 16).then(|| l + n)
                }
                0x111..=0x11F => {
                    let n = (ctrl & 0xF) as usize;
                    (r >= n).then(|| l - n)
                }
                0x121..=0x12F => Some(base + (r + 16 - (ctrl & 0xF) as usize) % 16),
                0x130 => (l < 63).then(|| l + 1),
                0x134 => Some((l + 1) % 64),
                0x138 => (l > 0).then(|| l - 1),
                0x13C => Some((l + 63) % 64),
                0x140 => Some(base + 15 - r),
                0x141 => Some((l & !7) + 7 - (l & 7)),
                // row_bcast:15: lane 15 of each row feeds the next row.
                0x142 => (row > 0).then(|| row * 16 - 1),
                // row_bcast:31: lane 31 feeds rows 2 and 3.
                0x143 => (row >= 2).then_some(31),
                _ => {
                    return Err(self.err(
                        ctx,
                        format!("DPP control {ctrl:#x} is not a gfx9 DPP operation"),
                    ))
                }
            };
            match s {
                Some(s) if exec >> s & 1 != 0 => {
                    self.dpp_src[l] = src[s];
                    write |= 1 << l;
                }
                _ if bound_zero => {
                    self.dpp_src[l] = 0;
                    write |= 1 << l;
                }
                _ => {}
            }
        }
        Ok(write)
    }

    fn carry_op(&mut self, ctx: &Ctx<'_>, op: &Op, exec: u64) -> R<()> {
        let mut a = [0u32; 64];
        let mut b = [0u32; 64];
        self.fetch(ctx, op, 0, Ty::B32, &mut a)?;
        self.fetch(ctx, op, 1, Ty::B32, &mut b)?;
        let e32 = op.form == VopForm::E32;
        let cin = if matches!(op.op, 0x11c..=0x11e) {
            if e32 {
                self.vcc()
            } else {
                self.rs64(ctx, op.src[2], op.lit, false)?
            }
        } else {
            0
        };
        let mut cout = 0u64;
        let k = op.op;
        let r: [u32; 64] = lanes(|l| {
            let ci = cin >> l & 1;
            let (x, y) = (a[l] as u64, b[l] as u64);
            let (v, c) = match k {
                0x119 => {
                    let s = x + y;
                    (s, s >> 32 != 0)
                }
                0x11a => (x.wrapping_sub(y), y > x),
                0x11b => (y.wrapping_sub(x), x > y),
                0x11c => {
                    let s = x + y + ci;
                    (s, s >> 32 != 0)
                }
                0x11d => (x.wrapping_sub(y).wrapping_sub(ci), y + ci > x),
                _ => (y.wrapping_sub(x).wrapping_sub(ci), x + ci > y),
            };
            if c {
                cout |= 1 << l;
            }
            v as u32
        });
        self.write32(ctx, op.dst as usize, &r, exec)?;
        let sd = if e32 { VCC } else { op.sdst };
        self.ws64(sd, cout & exec);
        Ok(())
    }

    fn vopc(&mut self, ctx: &Ctx<'_>, op: &Op, exec: u64) -> R<()> {
        let k = op.op;
        let cmpx = (k >> 4) & 1 == 1 && k >= 0x20;
        let cond = (k & 0xF) as u8;
        let mut mask = 0u64;
        match k {
            0x10..=0x13 => {
                // v_cmp(x)_class_f32 / f64
                let mut cls = [0u32; 64];
                self.fetch(ctx, op, 1, Ty::B32, &mut cls)?;
                if k < 0x12 {
                    let mut a = [0u32; 64];
                    self.fetch(ctx, op, 0, Ty::F32, &mut a)?;
                    for l in 0..64 {
                        if class_bits(
                            f32::from_bits(a[l]) as f64,
                            f32::from_bits(a[l]).is_subnormal(),
                        ) & cls[l]
                            != 0
                        {
                            mask |= 1 << l;
                        }
                    }
                } else {
                    let mut a = [0u64; 64];
                    self.fetch64(ctx, op, 0, Ty::F64, &mut a)?;
                    for l in 0..64 {
                        let x = f64::from_bits(a[l]);
                        if class_bits(x, x.is_subnormal()) & cls[l] != 0 {
                            mask |= 1 << l;
                        }
                    }
                }
                mask &= exec;
                self.write_cmp(op, mask, k & 1 == 1)?;
                return Ok(());
            }
            // One generic compare per width and type: the condition is chosen once per
            // instruction, then one lane loop builds the mask.
            0x40..=0x5F => {
                let mut a = [0u32; 64];
                let mut b = [0u32; 64];
                self.fetch(ctx, op, 0, Ty::F32, &mut a)?;
                self.fetch(ctx, op, 1, Ty::F32, &mut b)?;
                let fa: [f32; 64] = lanes(|l| f32::from_bits(a[l]));
                let fb: [f32; 64] = lanes(|l| f32::from_bits(b[l]));
                mask = cmp_mask(cond, &fa, &fb);
            }
            0x60..=0x7F => {
                let mut a = [0u64; 64];
                let mut b = [0u64; 64];
                self.fetch64(ctx, op, 0, Ty::F64, &mut a)?;
                self.fetch64(ctx, op, 1, Ty::F64, &mut b)?;
                let fa: [f64; 64] = lanes(|l| f64::from_bits(a[l]));
                let fb: [f64; 64] = lanes(|l| f64::from_bits(b[l]));
                mask = cmp_mask(cond, &fa, &fb);
            }
            0xC0..=0xDF => {
                let mut a = [0u32; 64];
                let mut b = [0u32; 64];
                self.fetch(ctx, op, 0, Ty::B32, &mut a)?;
                self.fetch(ctx, op, 1, Ty::B32, &mut b)?;
                mask = if (k >> 3) & 1 == 0 {
                    let ia: [i32; 64] = lanes(|l| a[l] as i32);
                    let ib: [i32; 64] = lanes(|l| b[l] as i32);
                    cmp_mask(cond & 7, &ia, &ib)
                } else {
                    cmp_mask(cond & 7, &a, &b)
                };
            }
            0xE0..=0xFF => {
                let mut a = [0u64; 64];
                let mut b = [0u64; 64];
                self.fetch64(ctx, op, 0, Ty::B32, &mut a)?;
                self.fetch64(ctx, op, 1, Ty::B32, &mut b)?;
                mask = if (k >> 3) & 1 == 0 {
                    let ia: [i64; 64] = lanes(|l| a[l] as i64);
                    let ib: [i64; 64] = lanes(|l| b[l] as i64);
                    cmp_mask(cond & 7, &ia, &ib)
                } else {
                    cmp_mask(cond & 7, &a, &b)
                };
            }
            _ => return Err(self.unimpl(ctx)),
        }
        mask &= exec;
        self.write_cmp(op, mask, cmpx)
    }

    fn write_cmp(&mut self, op: &Op, mask: u64, cmpx: bool) -> R<()> {
        let sd = if op.form == VopForm::E32 {
            VCC
        } else {
            op.sdst
        };
        self.ws64(sd, mask);
        if cmpx {
            self.ws64(EXEC, mask);
        }
        Ok(())
    }

    // ---- LDS ----

    fn ds(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        if op.ext & 1 != 0 {
            return Err(self.err(ctx, "GDS is not modelled"));
        }
        let exec = self.exec();
        let mut addr = [0u32; 64];
        addr.copy_from_slice(self.vreg(ctx, op.src[0] as usize)?);
        let off16 = (op.imm as u32) | (op.aux as u32) << 8;
        let (o0, o1) = (op.imm as u32, op.aux as u32);
        let dbase = op.dst as usize + if op.acc { self.acc_base } else { 0 };
        let d0 = op.src[1] as usize;
        let d1 = op.src[2] as usize;
        let lds_len = ctx.lds.len();
        // Out-of-range LDS reads return 0 and writes are dropped (the LDS bounds check).
        let rd = |lds: &[u8], a: u32, n: usize| -> u64 { rd_le(lds, a as usize, n).unwrap_or(0) };
        let wr = |lds: &mut [u8], a: u32, n: usize, v: u64| {
            wr_le(lds, a as usize, n, v);
        };
        let _ = lds_len;
        macro_rules! vr {
            ($r:expr, $l:expr) => {
                self.v.get(($r) * 64 + $l).copied().unwrap_or(0)
            };
        }
        macro_rules! vw {
            ($r:expr, $l:expr, $v:expr) => {
                match self.v.get_mut(($r) * 64 + $l) {
                    Some(x) => *x = $v,
                    None => return Err(self.err(ctx, "VGPR beyond the wave's allocation")),
                }
            };
        }
        match op.op {
            // loads
            // ds_read_b32 / ds_write_b32 with every active lane inside the LDS: straight
            // lane loops (the out-of-range rule needs no per-lane handling then).
            0x36 | 0x0d if ds_in_range(&addr, exec, off16, ctx.lds.len()) => {
                let reg = if op.op == 0x36 {
                    dbase
                } else {
                    d0 + if op.acc { self.acc_base } else { 0 }
                };
                let Some(v) = self.vreg_mut(reg) else {
                    return Err(self.err(ctx, "VGPR beyond the wave's allocation"));
                };
                for l in 0..64 {
                    if exec >> l & 1 != 0 {
                        let a = addr[l].wrapping_add(off16) as usize;
                        if let Some(c) = ctx.lds.get_mut(a..a + 4) {
                            if op.op == 0x36 {
                                v[l] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                            } else {
                                c.copy_from_slice(&v[l].to_le_bytes());
                            }
                        }
                    }
                }
            }
            0x36 | 0x39 | 0x3a | 0x3b | 0x3c | 0x76 | 0xfe | 0xff => {
                let (n, words) = match op.op {
                    0x36 => (4, 1),
                    0x39 | 0x3a => (1, 1),
                    0x3b | 0x3c => (2, 1),
                    0x76 => (8, 2),
                    0xfe => (12, 3),
                    _ => (16, 4),
                };
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a = addr[l].wrapping_add(off16);
                    if words == 1 {
                        let raw = rd(ctx.lds, a, n);
                        let v = match op.op {
                            0x39 => raw as u8 as i8 as i32 as u32,
                            0x3b => raw as u16 as i16 as i32 as u32,
                            _ => raw as u32,
                        };
                        vw!(dbase, l, v);
                    } else {
                        for w in 0..words {
                            let v = rd(ctx.lds, a.wrapping_add(4 * w as u32), 4) as u32;
                            vw!(dbase + w, l, v);
                        }
                    }
                }
            }
            0x37 | 0x38 | 0x77 | 0x78 => {
                let (size, scale) = match op.op {
                    0x37 => (4, 4),
                    0x38 => (4, 256),
                    0x77 => (8, 8),
                    _ => (8, 512),
                };
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a0 = addr[l].wrapping_add(o0 * scale);
                    let a1 = addr[l].wrapping_add(o1 * scale);
                    let v0 = rd(ctx.lds, a0, size);
                    let v1 = rd(ctx.lds, a1, size);
                    if size == 4 {
                        vw!(dbase, l, v0 as u32);
                        vw!(dbase + 1, l, v1 as u32);
                    } else {
                        vw!(dbase, l, v0 as u32);
                        vw!(dbase + 1, l, (v0 >> 32) as u32);
                        vw!(dbase + 2, l, v1 as u32);
                        vw!(dbase + 3, l, (v1 >> 32) as u32);
                    }
                }
            }
            // stores
            0x0d | 0x1e | 0x1f | 0x4d | 0xde | 0xdf => {
                let (n, words) = match op.op {
                    0x0d => (4, 1),
                    0x1e => (1, 1),
                    0x1f => (2, 1),
                    0x4d => (4, 2),
                    0xde => (4, 3),
                    _ => (4, 4),
                };
                let src = d0 + if op.acc { self.acc_base } else { 0 };
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a = addr[l].wrapping_add(off16);
                    for w in 0..words {
                        let v = vr!(src + w, l) as u64;
                        wr(ctx.lds, a.wrapping_add(4 * w as u32), n, v);
                    }
                }
            }
            0x0e | 0x0f | 0x4e | 0x4f => {
                let (size, scale) = match op.op {
                    0x0e => (4, 4),
                    0x0f => (4, 256),
                    0x4e => (8, 8),
                    _ => (8, 512),
                };
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a0 = addr[l].wrapping_add(o0 * scale);
                    let a1 = addr[l].wrapping_add(o1 * scale);
                    let (v0, v1) = if size == 4 {
                        (vr!(d0, l) as u64, vr!(d1, l) as u64)
                    } else {
                        (
                            vr!(d0, l) as u64 | (vr!(d0 + 1, l) as u64) << 32,
                            vr!(d1, l) as u64 | (vr!(d1 + 1, l) as u64) << 32,
                        )
                    };
                    wr(ctx.lds, a0, size, v0);
                    wr(ctx.lds, a1, size, v1);
                }
            }
            // 32-bit atomics (with and without return)
            0x00..=0x0b
            | 0x20..=0x2b
            | 0x2d
            | 0x30
            | 0x10
            | 0x12
            | 0x13
            | 0x15
            | 0x32
            | 0x33
            | 0x35 => {
                let rtn = matches!(op.op, 0x20..=0x2b | 0x2d | 0x30 | 0x32 | 0x33 | 0x35);
                let base = if (0x20..=0x2b).contains(&op.op) {
                    op.op - 0x20
                } else {
                    op.op
                };
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a = addr[l].wrapping_add(off16);
                    let old = rd(ctx.lds, a, 4) as u32;
                    let x = vr!(d0, l);
                    let y = vr!(d1, l);
                    let new = match base {
                        0x00 => old.wrapping_add(x),
                        0x01 => old.wrapping_sub(x),
                        0x02 => x.wrapping_sub(old),
                        0x03 => {
                            if old >= x {
                                0
                            } else {
                                old + 1
                            }
                        }
                        0x04 => {
                            if old == 0 || old > x {
                                x
                            } else {
                                old - 1
                            }
                        }
                        0x05 => (old as i32).min(x as i32) as u32,
                        0x06 => (old as i32).max(x as i32) as u32,
                        0x07 => old.min(x),
                        0x08 => old.max(x),
                        0x09 => old & x,
                        0x0a => old | x,
                        0x0b => old ^ x,
                        0x2d => x,
                        0x30 | 0x10 => {
                            if old == x {
                                y
                            } else {
                                old
                            }
                        }
                        0x12 | 0x32 => fmin(f32::from_bits(old), f32::from_bits(x)).to_bits(),
                        0x13 | 0x33 => fmax(f32::from_bits(old), f32::from_bits(x)).to_bits(),
                        _ => (f32::from_bits(old) + f32::from_bits(x)).to_bits(),
                    };
                    wr(ctx.lds, a, 4, new as u64);
                    if rtn {
                        vw!(dbase, l, old);
                    }
                }
            }
            0x40 | 0x60 => {
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a = addr[l].wrapping_add(off16);
                    let old = rd(ctx.lds, a, 8);
                    let x = vr!(d0, l) as u64 | (vr!(d0 + 1, l) as u64) << 32;
                    wr(ctx.lds, a, 8, old.wrapping_add(x));
                    if op.op == 0x60 {
                        vw!(dbase, l, old as u32);
                        vw!(dbase + 1, l, (old >> 32) as u32);
                    }
                }
            }
            0x3d => {
                // ds_swizzle_b32: the source is the ADDR operand.
                let src = addr;
                let r: [u32; 64] = lanes(|l| src[swizzle_lane(off16, l)]);
                let r: [u32; 64] = lanes(|l| {
                    let s = swizzle_lane(off16, l);
                    if exec >> s & 1 != 0 {
                        r[l]
                    } else {
                        0
                    }
                });
                self.write32(ctx, dbase, &r, exec)?;
            }
            0x3e | 0x3f => {
                // ds_permute_b32 (push) / ds_bpermute_b32 (pull); addresses are lane*4.
                let mut src = [0u32; 64];
                src.copy_from_slice(self.vreg(ctx, d0)?);
                let mut r = [0u32; 64];
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let sel = ((addr[l].wrapping_add(off16) >> 2) & 63) as usize;
                    if op.op == 0x3f {
                        r[l] = if exec >> sel & 1 != 0 { src[sel] } else { 0 };
                    } else {
                        r[sel] = src[l];
                    }
                }
                self.write32(ctx, dbase, &r, exec)?;
            }
            // ds_write_b8/b16_d16_hi, ds_read_{u8,i8,u16}_d16[_hi] (`wave/formats.rs`).
            0x54..=0x5b => return self.ds_d16(ctx, op, &addr, off16, exec),
            _ => return Err(self.unimpl(ctx)),
        }
        Ok(())
    }

    // ---- FLAT / GLOBAL / SCRATCH ----

    /// Every lane's FLAT/GLOBAL/SCRATCH address (operands resolved once per instruction).
    fn lane_addrs(&self, ctx: &Ctx<'_>, op: &Op) -> R<[u64; 64]> {
        let va = op.src[0] as usize;
        let saddr = op.src[2];
        let imm = op.imm as i64 as u64;
        let mut out = [0u64; 64];
        let zero = [0u32; 64];
        let uses_v = match op.aux {
            1 => op.neg_hi == 0 && (saddr == 0x7F || ctx.target == Target::Gfx942),
            _ => true,
        };
        let v0: &[u32] = if uses_v { self.vreg(ctx, va)? } else { &zero };
        match op.aux {
            1 => {
                let sb = if saddr != 0x7F {
                    self.rs(ctx, saddr, 0)? as u64
                } else {
                    0
                };
                for l in 0..64 {
                    out[l] = ((PRIVATE_APERTURE_HI as u64) << 32)
                        + (sb.wrapping_add(v0[l] as u64).wrapping_add(imm) & 0xFFFF_FFFF);
                }
            }
            2 if saddr != 0x7F => {
                let sb = self.rs64(ctx, saddr, 0, false)?.wrapping_add(imm);
                for l in 0..64 {
                    out[l] = sb.wrapping_add(v0[l] as u64);
                }
            }
            _ => {
                let v1 = self.vreg(ctx, va + 1)?;
                for l in 0..64 {
                    out[l] = (v0[l] as u64 | (v1[l] as u64) << 32).wrapping_add(imm);
                }
            }
        }
        Ok(out)
    }

    /// Loads `size` bytes at a flat address (global, LDS or private aperture).
    fn fload(&mut self, ctx: &mut Ctx<'_>, a: u64, size: u64, l: usize) -> R<u64> {
        match (a >> 32) as u32 {
            SHARED_APERTURE_HI => {
                let o = (a & 0xFFFF_FFFF) as usize;
                Ok(rd_le(ctx.lds, o, size as usize).unwrap_or(0))
            }
            PRIVATE_APERTURE_HI => self.scratch_access(ctx, a & 0xFFFF_FFFF, size, l, None),
            _ => ctx.mem.load(a, size).map_err(|f| self.mem_err(ctx, f)),
        }
    }

    fn fstore(&mut self, ctx: &mut Ctx<'_>, a: u64, size: u64, v: u64, l: usize) -> R<()> {
        match (a >> 32) as u32 {
            SHARED_APERTURE_HI => {
                let o = (a & 0xFFFF_FFFF) as usize;
                wr_le(ctx.lds, o, size as usize, v);
                Ok(())
            }
            PRIVATE_APERTURE_HI => self
                .scratch_access(ctx, a & 0xFFFF_FFFF, size, l, Some(v))
                .map(|_| ()),
            _ => ctx.mem.store(a, size, v).map_err(|f| self.mem_err(ctx, f)),
        }
    }

    /// A flat or `scratch_*` access of `size` bytes at byte `o` of lane `l`'s private
    /// segment (a store when `store` has the value): in the queue's scratch memory at the
    /// wave's FLAT_SCRATCH base, lanes interleaved dword by dword (`mem::scratch_addr`);
    /// pieces are split at dword boundaries. Beyond the lane's slice of the wave's scratch
    /// slot it faults.
    fn scratch_access(
        &mut self,
        ctx: &mut Ctx<'_>,
        o: u64,
        size: u64,
        l: usize,
        store: Option<u64>,
    ) -> R<u64> {
        let ps = u64::from(self.priv_size);
        if o + size > ps {
            return Err(self.err(
                ctx,
                format!(
                    "private (scratch) access at offset {o:#x} beyond the {ps}-byte per-lane \
                     slice of the wave's scratch"
                ),
            ));
        }
        let base = self.s[102] as u64 | (self.s[103] as u64) << 32;
        let (mut v, mut i) = (0u64, 0u64);
        while i < size {
            let off = o + i;
            let n = (4 - off % 4).min(size - i);
            let a = mem::scratch_addr(base, off, l);
            match store {
                Some(x) => ctx
                    .mem
                    .store(a, n, x >> (8 * i))
                    .map_err(|f| self.mem_err(ctx, f))?,
                None => v |= ctx.mem.load(a, n).map_err(|f| self.mem_err(ctx, f))? << (8 * i),
            }
            i += n;
        }
        Ok(v)
    }

    /// `*_load_dwordx2` whose active lanes all fall in one mapped window at host `p` (GPU
    /// address `lo`): each 8-byte-aligned lane reads its two dwords with one 64-bit load, so
    /// a value another agent writes with one 64-bit store is never seen torn.
    fn load_x2_window(
        &mut self,
        ctx: &Ctx<'_>,
        addrs: &[u64; 64],
        exec: u64,
        lo: u64,
        p: *mut u8,
        vd: usize,
    ) -> R<()> {
        let mut pairs = [0u64; 64];
        for l in 0..64 {
            if exec >> l & 1 != 0 {
                let o = (addrs[l] - lo) as usize;
                // SAFETY: `span_ptr` proved every active lane's [a, a + 8) lies inside the
                // live window at `p`; `load_raw` reads bytewise when not 8-aligned.
                pairs[l] = if addrs[l] % 8 == 0 {
                    unsafe { mem::load_raw(p.add(o), 8) }
                } else {
                    unsafe { mem::load_raw(p.add(o), 4) | mem::load_raw(p.add(o + 4), 4) << 32 }
                };
            }
        }
        for w in 0..2 {
            let Some(dst) = self.vreg_mut(vd + w) else {
                return Err(self.err(ctx, "VGPR beyond the wave's allocation"));
            };
            for l in 0..64 {
                if exec >> l & 1 != 0 {
                    dst[l] = (pairs[l] >> (32 * w)) as u32;
                }
            }
        }
        Ok(())
    }

    fn flat(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        // Bit 13 is `lds` on gfx90a; on gfx940 scratch it is SVE (VGPR address enable).
        if op.ext & 1 != 0 && !(ctx.target == Target::Gfx942 && op.aux == 1) {
            return Err(self.err(ctx, "FLAT LDS-DMA form is not modelled"));
        }
        let exec = self.exec();
        let vd = op.dst as usize + if op.acc { self.acc_base } else { 0 };
        let vdata = op.src[1] as usize + if op.acc { self.acc_base } else { 0 };
        match op.op {
            0x10..=0x17 | 0x20..=0x25 => {
                let (size, words) = match op.op {
                    0x10 | 0x11 | 0x20..=0x23 => (1, 1),
                    0x12 | 0x13 | 0x24 | 0x25 => (2, 1),
                    0x14 => (4, 1),
                    0x15 => (4, 2),
                    0x16 => (4, 3),
                    _ => (4, 4),
                };
                let addrs = self.lane_addrs(ctx, op)?;
                // Fast path: plain dword loads whose lanes all fall in one mapped window.
                if op.op == 0x14 || op.op == 0x15 || op.op == 0x17 {
                    if let Some((lo, p)) = span_ptr(ctx, &addrs, exec, 4 * words as u64, false) {
                        if words == 2 {
                            // An 8-byte-aligned dwordx2 is one 64-bit access, never two
                            // halves: LLVM lowers a 64-bit atomic load to it.
                            return self.load_x2_window(ctx, &addrs, exec, lo, p, vd);
                        }
                        for w in 0..words {
                            let Some(dst) = self.vreg_mut(vd + w) else {
                                return Err(self.err(ctx, "VGPR beyond the wave's allocation"));
                            };
                            for l in 0..64 {
                                if exec >> l & 1 != 0 {
                                    let o = (addrs[l] - lo) as usize + 4 * w;
                                    // SAFETY: `span_ptr` proved every active lane's
                                    // [a, a + 4 * words) lies inside the live window at `p`.
                                    dst[l] = unsafe { mem::load_raw(p.add(o), 4) } as u32;
                                }
                            }
                        }
                        return Ok(());
                    }
                }
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a = addrs[l];
                    if op.op == 0x15 && a % 8 == 0 {
                        // Aligned dwordx2: one 64-bit access (see `load_x2_window`).
                        let raw = self.fload(ctx, a, 8, l)?;
                        for w in 0..2 {
                            match self.v.get_mut((vd + w) * 64 + l) {
                                Some(x) => *x = (raw >> (32 * w)) as u32,
                                None => {
                                    return Err(self.err(ctx, "VGPR beyond the wave's allocation"))
                                }
                            }
                        }
                        continue;
                    }
                    for w in 0..words {
                        let raw = self.fload(ctx, a + 4 * w as u64, size, l)?;
                        let old = self.v.get((vd + w) * 64 + l).copied().unwrap_or(0);
                        let v = match op.op {
                            0x11 => raw as u8 as i8 as i32 as u32,
                            0x13 => raw as u16 as i16 as i32 as u32,
                            0x20..=0x25 => d16_load(op.op, raw, old, ctx.sramecc),
                            _ => raw as u32,
                        };
                        match self.v.get_mut((vd + w) * 64 + l) {
                            Some(x) => *x = v,
                            None => return Err(self.err(ctx, "VGPR beyond the wave's allocation")),
                        }
                    }
                }
            }
            0x18..=0x1f => {
                let (size, words, hi) = match op.op {
                    0x18 => (1, 1, false),
                    0x19 => (1, 1, true),
                    0x1a => (2, 1, false),
                    0x1b => (2, 1, true),
                    0x1c => (4, 1, false),
                    0x1d => (4, 2, false),
                    0x1e => (4, 3, false),
                    _ => (4, 4, false),
                };
                let addrs = self.lane_addrs(ctx, op)?;
                if size == 4 {
                    if let Some((lo, p)) = span_ptr(ctx, &addrs, exec, 4 * words as u64, true) {
                        if words == 2 {
                            let (a0, a1) = (self.vreg(ctx, vdata)?, self.vreg(ctx, vdata + 1)?);
                            for l in 0..64 {
                                if exec >> l & 1 != 0 {
                                    let o = (addrs[l] - lo) as usize;
                                    let v = a0[l] as u64 | (a1[l] as u64) << 32;
                                    // SAFETY: as for the loads; the window is writable. An
                                    // 8-aligned dwordx2 is one 64-bit store, never two halves.
                                    unsafe { mem::store_raw(p.add(o), 8, v) };
                                }
                            }
                            return Ok(());
                        }
                        for w in 0..words {
                            let src = self.vreg(ctx, vdata + w)?;
                            for l in 0..64 {
                                if exec >> l & 1 != 0 {
                                    let o = (addrs[l] - lo) as usize + 4 * w;
                                    // SAFETY: as for the loads; the window is writable.
                                    unsafe { mem::store_raw(p.add(o), 4, src[l] as u64) };
                                }
                            }
                        }
                        return Ok(());
                    }
                }
                for l in 0..64 {
                    if exec >> l & 1 == 0 {
                        continue;
                    }
                    let a = addrs[l];
                    if op.op == 0x1d && a % 8 == 0 {
                        let lo32 = self.v.get(vdata * 64 + l).copied().unwrap_or(0) as u64;
                        let hi32 = self.v.get((vdata + 1) * 64 + l).copied().unwrap_or(0) as u64;
                        self.fstore(ctx, a, 8, lo32 | hi32 << 32, l)?;
                        continue;
                    }
                    for w in 0..words {
                        let mut v = self.v.get((vdata + w) * 64 + l).copied().unwrap_or(0);
                        if hi {
                            v >>= 16;
                        }
                        self.fstore(ctx, a + 4 * w as u64, size, v as u64, l)?;
                    }
                }
            }
            0x40..=0x52 | 0x60..=0x6c => self.flat_atomic(ctx, op, exec, vd, vdata)?,
            _ => return Err(self.unimpl(ctx)),
        }
        Ok(())
    }

    /// MUBUF: through the buffer resource (V#) in the four SGPRs at `srsrc`; scratch is
    /// reached this way on gfx90a (the private segment V# of the queue, swizzled).
    fn mubuf(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        let r = op.src[2] as usize;
        let vsharp = [0, 1, 2, 3].map(|i| self.s.get(r + i).copied().unwrap_or(0));
        if op.ext & 0x10 != 0 {
            return Err(self.err(ctx, "MUBUF LDS-DMA form is not modelled"));
        }
        self.mubuf_vsharp(ctx, op, vsharp)
    }

    /// MUBUF through a buffer resource (V#) in memory (CDNA3 ISA "Buffer Instructions":
    /// V# word 0 base[31:0], word 1 base[47:32] and stride[61:48], word 2 num_records, word 3
    /// ADD_TID_ENABLE bit 23). Address = base + soffset + offset + index * stride, with
    /// offset = (offen ? VGPR : 0) + inst_offset and index = idxen ? VGPR : 0. Range
    /// checking: a raw buffer (stride 0) is in range while offset + bytes <= num_records, a
    /// structured one while index < num_records; out-of-range loads return 0 and stores are
    /// dropped, per dword. Swizzled buffers (word 1 SWIZZLE_ENABLE bit 31; the scratch V#)
    /// address `mem::swizzled_offset` with word 3 ELEMENT_SIZE [20:19] (2 << n bytes) and
    /// INDEX_STRIDE [22:21] (8 << n), the lane id added to the index when ADD_TID_ENABLE;
    /// they are in range while soffset + that offset + bytes <= num_records. ADD_TID_ENABLE
    /// without swizzling faults (not modelled).
    fn mubuf_vsharp(&mut self, ctx: &mut Ctx<'_>, op: &Op, vsharp: [u32; 4]) -> R<()> {
        let swizzle = vsharp[1] >> 31 != 0;
        let add_tid = vsharp[3] & (1 << 23) != 0;
        if add_tid && !swizzle {
            return Err(self.err(
                ctx,
                "MUBUF with ADD_TID_ENABLE on an unswizzled buffer is not modelled",
            ));
        }
        let element_size = 2u64 << ((vsharp[3] >> 19) & 3);
        let index_stride = 8u64 << ((vsharp[3] >> 21) & 3);
        // Atomics, `buffer_{load,store}_format_*` (incl. the `_d16_hi_x` forms 0x26/0x27).
        if op.op >= 0x40 || op.op < 0x10 || matches!(op.op, 0x26 | 0x27) {
            if swizzle {
                return Err(self.err(
                    ctx,
                    "MUBUF atomics and format loads/stores on a swizzled buffer are not modelled",
                ));
            }
            return self.buffer_ext(ctx, op, vsharp);
        }
        let (size, words, store, sext) = match op.op {
            0x10 => (1, 1, false, false),
            0x11 => (1, 1, false, true),
            0x12 => (2, 1, false, false),
            0x13 => (2, 1, false, true),
            0x14..=0x17 => (4, op.op as usize - 0x13, false, false),
            0x18 => (1, 1, true, false),
            0x1a => (2, 1, true, false),
            0x1c..=0x1f => (4, op.op as usize - 0x1b, true, false),
            // buffer_load_{u,s}byte_d16[_hi], buffer_load_short_d16[_hi] (`d16_load`).
            0x20..=0x23 => (1, 1, false, false),
            0x24 | 0x25 => (2, 1, false, false),
            _ => return Err(self.unimpl(ctx)),
        };
        let d16 = (0x20..=0x25).contains(&op.op);
        let base = vsharp[0] as u64 | ((vsharp[1] & 0xFFFF) as u64) << 32;
        let stride = ((vsharp[1] >> 16) & 0x3FFF) as u64;
        let num_records = vsharp[2] as u64;
        let soff = self.rs(ctx, op.sdst, 0)? as u64;
        let exec = self.exec();
        let (offen, idxen) = (op.ext & 1 != 0, op.ext & 2 != 0);
        let va = op.src[0] as usize;
        let mut index = [0u32; 64];
        let mut voff = [0u32; 64];
        if idxen {
            index.copy_from_slice(self.vreg(ctx, va)?);
        }
        if offen {
            voff.copy_from_slice(self.vreg(ctx, va + usize::from(idxen))?);
        }
        let vd = op.dst as usize + if op.acc { AGPR_BASE as usize } else { 0 };
        for l in 0..64 {
            if exec >> l & 1 == 0 {
                continue;
            }
            let off = voff[l] as u64 + op.imm as u64;
            let idx = index[l] as u64 + if add_tid { l as u64 } else { 0 };
            let addr = base
                .wrapping_add(soff)
                .wrapping_add(off)
                .wrapping_add(idx * stride);
            for w in 0..words {
                let wo = 4 * w as u64;
                let (a, in_range) = if swizzle {
                    let o = mem::swizzled_offset(idx, off + wo, stride, element_size, index_stride);
                    (
                        base.wrapping_add(soff).wrapping_add(o),
                        soff + o + size <= num_records,
                    )
                } else if stride == 0 {
                    (addr.wrapping_add(wo), off + wo + size <= num_records)
                } else {
                    (addr.wrapping_add(wo), idx < num_records)
                };
                if store {
                    let v = self.vreg(ctx, vd + w)?[l] as u64;
                    if in_range {
                        ctx.mem
                            .store(a, size, v)
                            .map_err(|f| self.mem_err(ctx, f))?;
                    }
                } else {
                    let raw = if in_range {
                        ctx.mem.load(a, size).map_err(|f| self.mem_err(ctx, f))?
                    } else {
                        0
                    };
                    let Some(x) = self.vreg_mut(vd + w) else {
                        return Err(self.err(ctx, "VGPR beyond the wave's allocation"));
                    };
                    x[l] = match (sext, size) {
                        _ if d16 => d16_load(op.op, raw, x[l], ctx.sramecc),
                        (true, 1) => raw as u8 as i8 as i32 as u32,
                        (true, _) => raw as u16 as i16 as i32 as u32,
                        _ => raw as u32,
                    };
                }
            }
        }
        Ok(())
    }

    /// SDWA (CDNA3 ISA "SDWA"; CDNA2 same): the selected byte/word of each source
    /// (zero- or sign-extended) is staged in an internal temporary, the operation runs as its
    /// VOP3 form on the temporaries (abs/neg/clamp/omod from the SDWA dword, VCC implicit),
    /// and the 32-bit result is written to the selected field of VDST, the other bits padded
    /// with zeros, sign-extended, or preserved (`dst_unused`). VOPC writes VCC or the SDWA
    /// SDST.
    fn sdwa(&mut self, ctx: &mut Ctx<'_>, op: &Op, tmp: &mut Tmp) -> R<()> {
        let exec = self.exec();
        let dst_sel = op.ext & 0xF;
        let dst_unused = (op.ext >> 4) & 3;
        let mut inner = *op;
        inner.form = VopForm::Vop3;
        for i in 0..2 {
            let sel = (op.ext >> (8 + 4 * i)) & 0xF;
            let sext = (op.ext >> (16 + i)) & 1 != 0;
            let mut x = [0u32; 64];
            let code = op.src[i];
            if code >= 256 {
                x.copy_from_slice(self.vreg(ctx, vcode(code))?);
            } else {
                x = [self.rs(ctx, code, op.lit)?; 64];
            }
            for v in x.iter_mut() {
                *v = sdwa_select(*v, sel, sext);
            }
            match self.vreg_mut(TEMP_BASE + i) {
                Some(t) => t.copy_from_slice(&x),
                None => return Err(self.err(ctx, "SDWA staging register missing")),
            }
            inner.src[i] = (TEMP_BASE + i) as u16;
        }
        inner.src[2] = VCC;
        if op.op < 0x100 {
            // VOPC: only the condition mask is written.
            return self.valu_ops(ctx, &inner, tmp);
        }
        let d = op.dst as usize;
        let mut old = [0u32; 64];
        old.copy_from_slice(self.vreg(ctx, d)?);
        match self.vreg_mut(TEMP_BASE + 2) {
            Some(t) => t.copy_from_slice(&old),
            None => return Err(self.err(ctx, "SDWA staging register missing")),
        }
        inner.dst = (TEMP_BASE + 2) as u16;
        // A directed round mode: rounding ops go through `round.rs`.
        if self.mode & 0xF == 0 || !self.directed_op(ctx, &inner, tmp)? {
            self.valu_ops(ctx, &inner, tmp)?;
        }
        let mut res = [0u32; 64];
        res.copy_from_slice(self.vreg(ctx, TEMP_BASE + 2)?);
        let (shift, width) = match dst_sel {
            0..=3 => (8 * dst_sel, 8),
            4 | 5 => (16 * (dst_sel - 4), 16),
            _ => (0, 32),
        };
        let r: [u32; 64] = lanes(|l| {
            if width == 32 {
                return res[l];
            }
            let mask = ((1u64 << width) - 1) as u32;
            let field = (res[l] & mask) << shift;
            let fmask = mask << shift;
            match dst_unused {
                // UNUSED_SEXT: the field's sign fills the bits above it.
                1 => {
                    let neg = (res[l] >> (width - 1)) & 1 != 0;
                    let above = if shift + width >= 32 {
                        0
                    } else {
                        u32::MAX << (shift + width)
                    };
                    field | if neg { above } else { 0 }
                }
                // UNUSED_PRESERVE
                2 => (old[l] & !fmask) | field,
                _ => field,
            }
        });
        self.write32(ctx, d, &r, exec)
    }

    /// VOP3P-MAI: the dense f32 and f16 MFMA (CDNA2 ISA / CDNA3 ISA "Matrix Arithmetic
    /// Instructions"; register layouts as AMD's matrix instruction calculator prints them).
    /// An M x N x K product over B blocks: A[b][i][k] in lane `i + M * (k / E + (K / E) * b)`
    /// element `k % E` (E values per lane: 1 f32, 4 f16), B[b][k][j] likewise with j, and
    /// C/D[b][i][j] in lane `j + N * (s % G)`, register `4 * (s / G) + i % 4` with
    /// `s = b * M / 4 + i / 4`, `G = 64 / N`. f32: the sum runs over k in order with one
    /// fused multiply-add each; f16/bf16 sum as MMA-Sim's CDNA2 / CDNA3 models
    /// (`mfma.rs` `cdna2_f16_dot`, `cdna3_f16_dot`). The bf16 `_1k` forms share the f16
    /// shapes. Broadcast controls (cbsz/abid/blgp) and the integer/old-bf16/f64/xf32/f8
    /// variants go to `mfma.rs`; partial EXEC faults.
    fn mai(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        // bf16 "_1k" forms: the f16 shapes with bf16 inputs, at per-target opcodes.
        let bf16_base = if ctx.target == Target::Gfx90a {
            0x63
        } else {
            0x5d
        };
        let bf16 = (bf16_base..bf16_base + 5).contains(&op.op);
        let code = if bf16 {
            0x48 + [0, 1, 2, 4, 5][(op.op - bf16_base) as usize]
        } else {
            op.op
        };
        let (m, n, k, blocks, e) = match code {
            0x40 => (32, 32, 1, 2, 1),
            0x41 => (16, 16, 1, 4, 1),
            0x42 => (4, 4, 1, 16, 1),
            0x44 => (32, 32, 2, 1, 1),
            0x45 => (16, 16, 4, 1, 1),
            0x48 => (32, 32, 4, 2, 4),
            0x49 => (16, 16, 4, 4, 4),
            0x4a => (4, 4, 4, 16, 4),
            0x4c => (32, 32, 8, 1, 4),
            0x4d => (16, 16, 16, 1, 4),
            _ => return self.mfma(ctx, op),
        };
        if op.neg_hi != 0 || op.opsel != 0 || op.neg != 0 {
            return self.mfma(ctx, op);
        }
        if self.exec() != u64::MAX {
            return Err(self.err(ctx, "MFMA with a partial EXEC mask is not modelled"));
        }
        let regs_in = if e == 1 { 1 } else { 2 };
        let dregs = blocks * m * n / 64;
        // Operand values per lane (f32, converted from f16 where packed).
        let mut av = vec![[0f32; 4]; 64];
        let mut bv = vec![[0f32; 4]; 64];
        for (slot, vals) in [(0usize, &mut av), (1, &mut bv)] {
            let code = op.src[slot];
            for r in 0..regs_in {
                let mut x = [0u32; 64];
                if code >= 256 {
                    x.copy_from_slice(self.vreg(ctx, vcode(code) + r)?);
                } else {
                    x = [self.rs(ctx, code, op.lit)?; 64];
                }
                for l in 0..64 {
                    if e == 1 {
                        vals[l][0] = f32::from_bits(x[l]);
                    } else {
                        let cv = |h: u16| {
                            if bf16 {
                                half::bf16::from_bits(h).to_f32()
                            } else {
                                half::f16::from_bits(h).to_f32()
                            }
                        };
                        vals[l][2 * r] = cv(x[l] as u16);
                        vals[l][2 * r + 1] = cv((x[l] >> 16) as u16);
                    }
                }
            }
        }
        let ccode = op.src[2];
        let mut acc = vec![[0f32; 64]; dregs];
        for (r, row) in acc.iter_mut().enumerate() {
            if ccode >= 256 {
                let src = self.vreg(ctx, vcode(ccode) + r)?;
                for l in 0..64 {
                    row[l] = f32::from_bits(src[l]);
                }
            } else {
                *row = [f32::from_bits(self.rs(ctx, ccode, op.lit)?); 64];
            }
        }
        let g = 64 / n;
        let ke = k / e;
        // f16/bf16: CDNA3's fused dot-add over groups of k (gfx942) or CDNA2's pairwise
        // sums with denormal flushing (gfx90a; `mfma.rs`); f32: one f32 fma per k in order.
        for b in 0..blocks {
            for i in 0..m {
                let s = b * m / 4 + i / 4;
                let reg = 4 * (s / g) + i % 4;
                for j in 0..n {
                    let lane = j + n * (s % g);
                    let la = |kk: usize| i + m * (kk / e + ke * b);
                    let lb = |kk: usize| j + n * (kk / e + ke * b);
                    let x = |kk: usize| av[la(kk)][kk % e];
                    let y = |kk: usize| bv[lb(kk)][kk % e];
                    acc[reg][lane] = if e == 4 && ctx.target == Target::Gfx90a {
                        mfma::cdna2_f16_dot(k, 4, bf16, acc[reg][lane], x, y)
                    } else if e == 4 {
                        mfma::cdna3_f16_dot(k, bf16, acc[reg][lane], x, y)
                    } else {
                        let mut sum = acc[reg][lane];
                        for kk in 0..k {
                            sum = fma32(av[la(kk)][kk % e], bv[lb(kk)][kk % e], sum);
                        }
                        sum
                    };
                }
            }
        }
        let dbase = if op.acc {
            AGPR_BASE as usize + op.dst as usize
        } else {
            op.dst as usize
        };
        for (r, row) in acc.iter().enumerate() {
            let out: [u32; 64] = lanes(|l| row[l].to_bits());
            self.write32(ctx, dbase + r, &out, u64::MAX)?;
        }
        Ok(())
    }

    /// VOP3P with 16-bit halves (CDNA3 ISA "VOP3P"): each half of the result takes the
    /// sources' halves chosen by op_sel (low) and op_sel_hi (high); neg_lo/neg_hi negate
    /// the halves of float operands.
    fn vop3p16(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        let exec = self.exec();
        let kop = op.op;
        let nsrc = match kop {
            0x0 | 0x9 | 0xe => 3,
            _ => 2,
        };
        let float = matches!(kop, 0xe..=0x12);
        if op.clamp && !float {
            return Err(self.err(ctx, "packed integer clamp (saturation) is not modelled"));
        }
        let mut s = [[0u32; 64]; 3];
        for (i, v) in s.iter_mut().enumerate().take(nsrc) {
            self.fetch(ctx, op, i, if float { Ty::F16 } else { Ty::B32 }, v)?;
        }
        let ftz16 = self.mode & 0xC0 == 0;
        let clamp = op.clamp;
        let half = |i: usize, x: u32, hi: bool| -> u32 {
            let sel = if hi {
                (op.ext >> i) & 1
            } else {
                (op.opsel as u32 >> i) & 1
            };
            let mut v = (x >> (16 * sel)) & 0xFFFF;
            let neg = if hi { op.neg_hi } else { op.neg } >> i & 1;
            if float && neg != 0 {
                v ^= 0x8000;
            }
            v
        };
        let f = |x: u32| half::f16::from_bits(x as u16).to_f32();
        let h = |x: f32| -> u32 {
            let x = if clamp {
                if x.is_nan() {
                    0.0
                } else {
                    x.clamp(0.0, 1.0)
                }
            } else {
                x
            };
            ftz_f16(half::f16::from_f32(x).to_bits(), ftz16) as u32
        };
        let r: [u32; 64] = lanes(|l| {
            let one = |hi: bool| -> u32 {
                let x = half(0, s[0][l], hi);
                let y = half(1, s[1][l], hi);
                let z = half(2, s[2][l], hi);
                let (xi, yi, zi) = (x as u16 as i16, y as u16 as i16, z as u16 as i16);
                (match kop {
                    0x0 => xi.wrapping_mul(yi).wrapping_add(zi) as u16 as u32,
                    0x1 => (x as u16).wrapping_mul(y as u16) as u32,
                    0x2 => xi.wrapping_add(yi) as u16 as u32,
                    0x3 => xi.wrapping_sub(yi) as u16 as u32,
                    0x4 => ((y as u16) << (x & 15)) as u32,
                    0x5 => ((y as u16) >> (x & 15)) as u32,
                    0x6 => (yi >> (x & 15)) as u16 as u32,
                    0x7 => xi.max(yi) as u16 as u32,
                    0x8 => xi.min(yi) as u16 as u32,
                    0x9 => (x as u16).wrapping_mul(y as u16).wrapping_add(z as u16) as u32,
                    0xa => (x as u16).wrapping_add(y as u16) as u32,
                    0xb => (x as u16).wrapping_sub(y as u16) as u32,
                    0xc => x.max(y),
                    0xd => x.min(y),
                    0xe => f16_fma(x, y, z, ftz16) as u32,
                    0xf => h(f(x) + f(y)),
                    0x10 => h(f(x) * f(y)),
                    0x11 => h(fmin(f(x), f(y))),
                    _ => h(fmax(f(x), f(y))),
                }) & 0xFFFF
            };
            one(false) | one(true) << 16
        });
        self.write32(ctx, op.dst as usize, &r, exec)
    }

    /// VOP3P: the packed 32-bit moves and float ops of gfx90a/gfx940.
    fn vop3p(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> R<()> {
        let exec = self.exec();
        match op.op {
            0x0..=0x12 => return self.vop3p16(ctx, op),
            0x58 | 0x59 => {
                // v_accvgpr_read_b32 (AGPR -> VGPR) / v_accvgpr_write_b32 (-> AGPR).
                let mut x = [0u32; 64];
                self.fetch(ctx, op, 0, Ty::B32, &mut x)?;
                let d = if op.acc {
                    AGPR_BASE as usize + op.dst as usize
                } else {
                    op.dst as usize
                };
                return self.write32(ctx, d, &x, exec);
            }
            _ => {}
        }
        let mut s = [[0u64; 64]; 3];
        let nsrc = match op.op {
            0x30 => 3,
            0x31..=0x33 => 2,
            _ => return Err(self.unimpl(ctx)),
        };
        for (i, v) in s.iter_mut().enumerate().take(nsrc) {
            self.fetch64(ctx, op, i, Ty::B32, v)?;
        }
        // op_sel picks the source half for the low result, op_sel_hi for the high one;
        // neg / neg_hi negate the halves (float ops).
        let pick = |i: usize, x: u64, hi: bool| -> u32 {
            let sel = if hi {
                (op.ext >> i) & 1
            } else {
                (op.opsel as u32 >> i) & 1
            };
            let v = (x >> (32 * sel)) as u32;
            let neg = if hi {
                op.neg_hi >> i & 1
            } else {
                op.neg >> i & 1
            };
            if neg != 0 && op.op != 0x33 {
                v ^ 0x8000_0000
            } else {
                v
            }
        };
        let k = op.op;
        let r: [u64; 64] = lanes(|l| {
            let half = |hi: bool| -> u32 {
                let a = f32::from_bits(pick(0, s[0][l], hi));
                let b = f32::from_bits(pick(1, s[1][l], hi));
                match k {
                    0x30 => fma32(a, b, f32::from_bits(pick(2, s[2][l], hi))).to_bits(),
                    0x31 => (a * b).to_bits(),
                    0x32 => (a + b).to_bits(),
                    // v_pk_mov_b32: D.lo = S0 half op_sel[0], D.hi = S1 half op_sel[1].
                    _ => {
                        let i = hi as usize;
                        (s[i][l] >> (32 * ((op.opsel as u64 >> i) & 1))) as u32
                    }
                }
            };
            half(false) as u64 | (half(true) as u64) << 32
        });
        self.write64(ctx, op.dst as usize, &r, exec)
    }

    fn flat_atomic(
        &mut self,
        ctx: &mut Ctx<'_>,
        op: &Op,
        exec: u64,
        vd: usize,
        vdata: usize,
    ) -> R<()> {
        let rtn = op.clamp; // glc / sc0: return the pre-op value
        let wide = op.op >= 0x60 || matches!(op.op, 0x4f..=0x51);
        let addrs = self.lane_addrs(ctx, op)?;
        for l in 0..64 {
            if exec >> l & 1 == 0 {
                continue;
            }
            let a = addrs[l];
            if (a >> 32) as u32 == SHARED_APERTURE_HI || (a >> 32) as u32 == PRIVATE_APERTURE_HI {
                return Err(self.err(
                    ctx,
                    "flat atomics to the LDS/private apertures are not modelled",
                ));
            }
            let x = self.v.get(vdata * 64 + l).copied().unwrap_or(0);
            let x1 = self.v.get((vdata + 1) * 64 + l).copied().unwrap_or(0);
            let k = op.op;
            // Integer atomics: one table for both widths (32-bit ops 0x40.., 64-bit 0x60..).
            let int_op = matches!(k, 0x40..=0x4c | 0x60..=0x6c);
            let old: u64 = if !wide {
                if k == 0x52 && ctx.target == Target::Gfx90a {
                    return Err(self.unimpl(ctx));
                }
                let cell = match ctx.mem.atomic32(a) {
                    Ok(c) => c,
                    Err(f) => return Err(self.mem_err(ctx, f)),
                };
                let f = |o: u32| -> u32 {
                    if int_op {
                        return int_rmw(k & 0x1F, o as u64, x as u64, x1 as u64, 32) as u32;
                    }
                    match k {
                        0x4d => (f32::from_bits(o) + f32::from_bits(x)).to_bits(),
                        0x4e => {
                            let lo =
                                half::f16::from_bits(o as u16) + half::f16::from_bits(x as u16);
                            let hi = half::f16::from_bits((o >> 16) as u16)
                                + half::f16::from_bits((x >> 16) as u16);
                            lo.to_bits() as u32 | (hi.to_bits() as u32) << 16
                        }
                        _ => {
                            let lo =
                                half::bf16::from_bits(o as u16) + half::bf16::from_bits(x as u16);
                            let hi = half::bf16::from_bits((o >> 16) as u16)
                                + half::bf16::from_bits((x >> 16) as u16);
                            lo.to_bits() as u32 | (hi.to_bits() as u32) << 16
                        }
                    }
                };
                match cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(f(o))) {
                    Ok(p) | Err(p) => p as u64,
                }
            } else {
                let cell = match ctx.mem.atomic64(a) {
                    Ok(c) => c,
                    Err(f) => return Err(self.mem_err(ctx, f)),
                };
                let xv = x as u64 | (x1 as u64) << 32;
                let cmp = if k == 0x61 {
                    self.v.get((vdata + 2) * 64 + l).copied().unwrap_or(0) as u64
                        | (self.v.get((vdata + 3) * 64 + l).copied().unwrap_or(0) as u64) << 32
                } else {
                    0
                };
                let f = |o: u64| -> u64 {
                    if int_op {
                        return int_rmw(k & 0x1F, o, xv, cmp, 64);
                    }
                    match k {
                        0x4f => (f64::from_bits(o) + f64::from_bits(xv)).to_bits(),
                        0x50 => fmin64(f64::from_bits(o), f64::from_bits(xv)).to_bits(),
                        _ => fmax64(f64::from_bits(o), f64::from_bits(xv)).to_bits(),
                    }
                };
                match cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |o| Some(f(o))) {
                    Ok(p) | Err(p) => p,
                }
            };
            if rtn {
                let n = if wide { 2 } else { 1 };
                for w in 0..n {
                    match self.v.get_mut((vd + w) * 64 + l) {
                        Some(r) => *r = (old >> (32 * w)) as u32,
                        None => return Err(self.err(ctx, "VGPR beyond the wave's allocation")),
                    }
                }
            }
        }
        Ok(())
    }
}

/// The integer read-modify-write of a FLAT/GLOBAL atomic on a `bits`-wide cell (32 or 64):
/// `k` is the opcode's low 5 bits (swap, cmpswap, add, sub, smin, umin, smax, umax, and, or,
/// xor, inc, dec: CDNA3 ISA "Flat Atomic" pseudocode), `o` the old value, `x` the data, `cmp`
/// the cmpswap compare value, all zero-extended.
fn int_rmw(k: u16, o: u64, x: u64, cmp: u64, bits: u32) -> u64 {
    let mask = if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let sx = |v: u64| ((v << (64 - bits)) as i64) >> (64 - bits);
    (match k {
        0 => x,
        1 => {
            if o == cmp {
                x
            } else {
                o
            }
        }
        2 => o.wrapping_add(x),
        3 => o.wrapping_sub(x),
        4 => {
            if sx(x) < sx(o) {
                x
            } else {
                o
            }
        }
        5 => o.min(x),
        6 => {
            if sx(x) > sx(o) {
                x
            } else {
                o
            }
        }
        7 => o.max(x),
        8 => o & x,
        9 => o | x,
        10 => o ^ x,
        11 => {
            if o >= x {
                0
            } else {
                o + 1
            }
        }
        _ => {
            if o == 0 || o > x {
                x
            } else {
                o - 1
            }
        }
    }) & mask
}

/// The register number (see [`Wave::file_idx`]) of a vector operand code: 256..512 VGPR
/// `code - 256`, AccVGPR and temporary codes as they are.
#[inline(always)]
fn vcode(code: u16) -> usize {
    if code < 512 {
        code as usize - 256
    } else {
        code as usize
    }
}

/// The VGPR a gfx9 D16 load (FLAT/GLOBAL/SCRATCH and MUBUF opcodes 0x20-0x25:
/// `load_ubyte_d16[_hi]`, `load_sbyte_d16[_hi]`, `load_short_d16[_hi]`) leaves: the datum
/// (a byte zero- or sign-extended to 16 bits, or a short) in the low half (`_d16`) or the
/// high half (`_d16_hi`). The other half is kept when SRAM ECC is off and zeroed when it
/// is on (the VGPR is written whole): firmware-notes/isa-gfx9.md "D16 loads and SRAMECC".
pub(crate) fn d16_load(op: u16, raw: u64, old: u32, sramecc: bool) -> u32 {
    let half = match op {
        0x22 | 0x23 => raw as u8 as i8 as i16 as u16 as u32,
        0x20 | 0x21 => raw as u8 as u32,
        _ => raw as u16 as u32,
    };
    let hi = op & 1 != 0;
    let keep = if sramecc { 0 } else { old };
    if hi {
        (keep & 0xFFFF) | half << 16
    } else {
        (keep & 0xFFFF_0000) | half
    }
}

/// Every active lane's 4-byte LDS access at `addr + off` lies inside an LDS of `len` bytes.
#[inline]
fn ds_in_range(addr: &[u32; 64], exec: u64, off: u32, len: usize) -> bool {
    let mut hi = 0u64;
    for l in 0..64 {
        if exec >> l & 1 != 0 {
            hi = hi.max(addr[l] as u64 + off as u64 + 4);
        }
    }
    hi <= len as u64
}

/// When every active lane's `[a, a + bytes)` lies in one mapped window of global memory
/// (no LDS/private aperture address), the lowest address and its host pointer.
#[inline]
fn span_ptr(
    ctx: &mut Ctx<'_>,
    addrs: &[u64; 64],
    exec: u64,
    bytes: u64,
    write: bool,
) -> Option<(u64, *mut u8)> {
    let (mut lo, mut hi) = (u64::MAX, 0u64);
    // Consecutive lanes at consecutive `bytes`-sized elements (the common unit-stride
    // access): the span is known without a per-lane min/max (an OR-reduction vectorises).
    let base = addrs[0];
    let mut diff = 0u64;
    for l in 0..64 {
        diff |= addrs[l] ^ base.wrapping_add(l as u64 * bytes);
    }
    if exec == u64::MAX && diff == 0 && base.checked_add(63 * bytes).is_some() {
        lo = base;
        hi = base + 63 * bytes;
    } else {
        for l in 0..64 {
            if exec >> l & 1 != 0 {
                lo = lo.min(addrs[l]);
                hi = hi.max(addrs[l]);
            }
        }
    }
    // Below the LDS aperture (1 << 48) and not wrapping: an ordinary global range.
    if lo > hi || hi >= (SHARED_APERTURE_HI as u64) << 32 {
        return None;
    }
    let p = ctx.mem.ptr(lo, hi - lo + bytes, write).ok()?;
    Some((lo, p))
}

/// The SDWA source select: byte 0..3, word 4..5 (zero- or sign-extended), dword 6.
#[inline]
fn sdwa_select(x: u32, sel: u32, sext: bool) -> u32 {
    match sel {
        0..=3 => {
            let b = (x >> (8 * sel)) as u8;
            if sext {
                b as i8 as i32 as u32
            } else {
                b as u32
            }
        }
        4 | 5 => {
            let w = (x >> (16 * (sel - 4))) as u16;
            if sext {
                w as i16 as i32 as u32
            } else {
                w as u32
            }
        }
        _ => x,
    }
}

/// An f16 denormal flushed to a signed zero when `ftz` (MODE FP_DENORM 16/64 = 0).
#[inline]
fn ftz_f16(h: u16, ftz: bool) -> u16 {
    if ftz && h & 0x7C00 == 0 {
        h & 0x8000
    } else {
        h
    }
}

/// f16 fused multiply-add (low 16 bits of each argument): the product of two f16 is exact
/// in f64 and the f64 sum rounds innocuously to f16 (53 >= 2 * 11 + 2 bits).
#[inline]
fn f16_fma(x: u32, y: u32, z: u32, ftz: bool) -> u16 {
    let g = |v: u32| half::f16::from_bits(ftz_f16(v as u16, ftz)).to_f64();
    ftz_f16(half::f16::from_f64(g(x) * g(y) + g(z)).to_bits(), ftz)
}

/// Correctly rounded f32 fused multiply-add over 64 lanes of f32 bit patterns.
#[inline]
fn fma_lanes(a: &[u32; 64], b: &[u32; 64], c: &[u32; 64]) -> [u32; 64] {
    let mut r = [0u32; 64];
    fma_lanes_into(a, b, c, &mut r);
    r
}

/// [`fma_lanes`] into `r`. On a host with FMA (detected at run time) the hardware
/// instruction; otherwise [`fma_lanes_f64`]. (Both are the IEEE fusedMultiplyAdd; only the
/// payload of a NaN result may differ.)
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn fma_lanes_into(a: &[u32; 64], b: &[u32; 64], c: &[u32; 64], r: &mut [u32; 64]) {
    if multiversion::target::target_cfg_f!(target_feature = "fma") {
        for l in 0..64 {
            r[l] = f32::from_bits(a[l])
                .mul_add(f32::from_bits(b[l]), f32::from_bits(c[l]))
                .to_bits();
        }
    } else {
        *r = fma_lanes_f64(a, b, c);
    }
}

/// [`fma_lanes_into`] with a scalar (the same in every lane) first factor.
#[multiversion::multiversion(targets("x86_64+avx2+fma"))]
fn fma_lanes_s_into(a: u32, b: &[u32; 64], c: &[u32; 64], r: &mut [u32; 64]) {
    if multiversion::target::target_cfg_f!(target_feature = "fma") {
        let x = f32::from_bits(a);
        for l in 0..64 {
            r[l] = x
                .mul_add(f32::from_bits(b[l]), f32::from_bits(c[l]))
                .to_bits();
        }
    } else {
        *r = fma_lanes_f64(&[a; 64], b, c);
    }
}

/// [`fma32`] over 64 lanes of f32 bit patterns (a loop of its own, so it is compiled tight).
#[inline(never)]
fn fma_lanes_f64(a: &[u32; 64], b: &[u32; 64], c: &[u32; 64]) -> [u32; 64] {
    // A branch-free pass (vectorises) with the f64 fast path, then the rare lanes that need
    // the library fma (see `fma32`).
    let mut r = [0u32; 64];
    let mut slow = [0u8; 64];
    for l in 0..64 {
        let (x, y, z) = (
            f32::from_bits(a[l]),
            f32::from_bits(b[l]),
            f32::from_bits(c[l]),
        );
        let s = x as f64 * y as f64 + z as f64;
        let bits = s.to_bits();
        let e = (bits >> 52) & 0x7FF;
        let ok =
            (bits & 0x1FFF_FFFF != 0x1000_0000 && (e >= 0x3FF - 126 || s == 0.0)) || e == 0x7FF;
        r[l] = (s as f32).to_bits();
        slow[l] = u8::from(!ok);
    }
    if slow.iter().any(|&x| x != 0) {
        for l in 0..64 {
            if slow[l] != 0 {
                r[l] = f32::from_bits(a[l])
                    .mul_add(f32::from_bits(b[l]), f32::from_bits(c[l]))
                    .to_bits();
            }
        }
    }
    r
}

/// Fused multiply-add of f32, exactly rounded: the product of two f32 is exact in f64, so
/// the f64 sum rounded once more to f32 is the correctly rounded result except when the f64
/// sum lies exactly halfway between two f32 values or in the f32 subnormal range (double
/// rounding); those take the library `fmaf` (musl `fmaf.c` uses the same argument). Avoids a
/// library call per lane on hosts built without FMA.
#[inline(always)]
fn fma32(x: f32, y: f32, z: f32) -> f32 {
    let xy = x as f64 * y as f64;
    let r = xy + z as f64;
    let b = r.to_bits();
    let e = (b >> 52) & 0x7FF;
    // (An f64 zero is an exact zero: the inputs' exact sum is representable that far down.)
    if (b & 0x1FFF_FFFF != 0x1000_0000 && (e >= 0x3FF - 126 || r == 0.0)) || e == 0x7FF {
        return r as f32;
    }
    x.mul_add(y, z)
}

/// Little-endian load of `n` (1, 2, 4, 8) bytes at `a`, None when out of range. Fixed-size
/// reads (no variable-length copy through the stack, which stalls store forwarding).
#[inline(always)]
fn rd_le(buf: &[u8], a: usize, n: usize) -> Option<u64> {
    let s = buf.get(a..)?;
    Some(match n {
        1 => *s.first()? as u64,
        2 => u16::from_le_bytes(*s.first_chunk::<2>()?) as u64,
        4 => u32::from_le_bytes(*s.first_chunk::<4>()?) as u64,
        8 => u64::from_le_bytes(*s.first_chunk::<8>()?),
        _ => {
            let b = s.get(..n.min(8))?;
            b.iter().rev().fold(0u64, |v, &x| v << 8 | x as u64)
        }
    })
}

/// Little-endian store of the low `n` bytes of `v` at `a`; dropped when out of range.
#[inline(always)]
fn wr_le(buf: &mut [u8], a: usize, n: usize, v: u64) {
    let Some(s) = buf.get_mut(a..) else { return };
    match n {
        1 => {
            if let Some(x) = s.first_mut() {
                *x = v as u8;
            }
        }
        2 => {
            if let Some(c) = s.first_chunk_mut::<2>() {
                *c = (v as u16).to_le_bytes();
            }
        }
        4 => {
            if let Some(c) = s.first_chunk_mut::<4>() {
                *c = (v as u32).to_le_bytes();
            }
        }
        8 => {
            if let Some(c) = s.first_chunk_mut::<8>() {
                *c = v.to_le_bytes();
            }
        }
        _ => {
            if let Some(b) = s.get_mut(..n.min(8)) {
                b.copy_from_slice(&v.to_le_bytes()[..n.min(8)]);
            }
        }
    }
}

enum Flow {
    Next,
    Jump,
    Stop(WaveStop),
}

/// IEEE minNum as the VALU does with IEEE mode: a NaN operand yields the other.
#[inline]
fn fmin(x: f32, y: f32) -> f32 {
    x.min(y)
}
#[inline]
fn fmax(x: f32, y: f32) -> f32 {
    x.max(y)
}
#[inline]
fn fmin64(x: f64, y: f64) -> f64 {
    x.min(y)
}
#[inline]
fn fmax64(x: f64, y: f64) -> f64 {
    x.max(y)
}

/// Float → int conversions saturate and map NaN to 0 (as Rust's `as`).
fn f32_to_i32(x: f32) -> i32 {
    x as i32
}
fn f32_to_u32(x: f32) -> u32 {
    x as u32
}
fn f64_to_i32(x: f64) -> i32 {
    x as i32
}
fn f64_to_u32(x: f64) -> u32 {
    x as u32
}

/// `x * 2^e` exactly (scaling in steps that cannot overflow an intermediate).
fn ldexp64(mut x: f64, e: i32) -> f64 {
    let mut e = e.clamp(-2200, 2200);
    while e > 1000 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    // The last step rounds once (a denormal result rounds like the hardware's).
    x * 2f64.powi(e)
}

fn ldexp32(x: f32, e: i32) -> f32 {
    (x as f64 * 2f64.powi(e.clamp(-400, 400))) as f32
}

fn frexp_exp(x: f32) -> i32 {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    let b = (x as f64).to_bits();
    ((b >> 52) & 0x7FF) as i32 - 1022
}

fn frexp_mant(x: f32) -> f32 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let e = frexp_exp(x);
    (x as f64 / 2f64.powi(e)) as f32
}

fn f32_to_f16_rtz(x: f32) -> u16 {
    let h = half::f16::from_f32(x);
    // Round toward zero: step back one ulp when rounding went away from zero.
    if h.is_finite() && (h.to_f32().abs() > x.abs()) {
        let b = h.to_bits();
        if b & 0x7FFF != 0 {
            return b - 1;
        }
    }
    if h.is_infinite() && x.is_finite() {
        return (h.to_bits() & 0x8000) | 0x7BFF;
    }
    h.to_bits()
}

/// v_div_fixup: special cases of `num / den` around the refined quotient `q` (ISA guide).
fn div_fixup(q: f64, den: f64, num: f64) -> f64 {
    let sign = if den.is_sign_negative() != num.is_sign_negative() {
        -1.0
    } else {
        1.0
    };
    if num.is_nan()
        || den.is_nan()
        || (den == 0.0 && num == 0.0)
        || (den.is_infinite() && num.is_infinite())
    {
        f64::NAN
    } else if den == 0.0 || num.is_infinite() {
        sign * f64::INFINITY
    } else if den.is_infinite() || num == 0.0 {
        sign * 0.0
    } else if q.is_nan() {
        f64::NAN
    } else {
        sign * q.abs()
    }
}

fn perm(x: u32, y: u32, sel: u32) -> u32 {
    let bytes = ((x as u64) << 32 | y as u64).to_le_bytes();
    let mut r = 0u32;
    for i in 0..4 {
        let s = (sel >> (8 * i)) & 0xFF;
        let b: u32 = match s {
            0..=7 => bytes[s as usize] as u32,
            8 => ((bytes[1] as i8) >> 7) as u8 as u32,
            9 => ((bytes[3] as i8) >> 7) as u8 as u32,
            10 => ((bytes[5] as i8) >> 7) as u8 as u32,
            11 => ((bytes[7] as i8) >> 7) as u8 as u32,
            12 => 0,
            _ => 0xFF,
        };
        r |= b << (8 * i);
    }
    r
}

fn class_bits(x: f64, sub: bool) -> u32 {
    // 0 sNaN, 1 qNaN, 2 -inf, 3 -norm, 4 -denorm, 5 -0, 6 +0, 7 +denorm, 8 +norm, 9 +inf
    if x.is_nan() {
        return 0b11; // both NaN classes: the signalling bit is not tracked through f32→f64
    }
    let neg = x.is_sign_negative();
    let bit = if x.is_infinite() {
        if neg {
            2
        } else {
            9
        }
    } else if x == 0.0 {
        if neg {
            5
        } else {
            6
        }
    } else if sub {
        if neg {
            4
        } else {
            7
        }
    } else if neg {
        3
    } else {
        8
    };
    1 << bit
}

/// The lanes where `f(a, b)` holds.
#[inline(always)]
fn mask2<T: Copy>(a: &[T; 64], b: &[T; 64], f: impl Fn(T, T) -> bool) -> u64 {
    // A byte per lane (vectorises), then 8 bytes of 0/1 packed into 8 bits by one multiply:
    // byte i lands on bit 56 + i (0x0102040810204080 = sum of 2^(56 - 7i)), no carries.
    let mut bytes = [0u8; 64];
    for l in 0..64 {
        bytes[l] = f(a[l], b[l]) as u8;
    }
    let mut m = 0u64;
    for (i, c) in bytes.chunks_exact(8).enumerate() {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        m |= (u64::from_le_bytes(w).wrapping_mul(0x0102_0408_1020_4080) >> 56) << (8 * i);
    }
    m
}

/// VOPC condition `c` (the low 4 bits of the opcode: F, LT, EQ, LE, GT, LG, GE, O, U, NGE,
/// NLG, NGT, NLE, NEQ, NLT, TRU) over all lanes, for any ordered type: integers use
/// 0..=7 (LG = NE, O = TRU on them).
// `x < y || x > y` is not `x != y` for NaNs (LG versus NEQ).
#[allow(clippy::eq_op, clippy::double_comparisons)]
fn cmp_mask<T: PartialOrd + Copy>(c: u8, a: &[T; 64], b: &[T; 64]) -> u64 {
    match c {
        0 => 0,
        1 => mask2(a, b, |x, y| x < y),
        2 => mask2(a, b, |x, y| x == y),
        3 => mask2(a, b, |x, y| x <= y),
        4 => mask2(a, b, |x, y| x > y),
        5 => mask2(a, b, |x, y| x < y || x > y),
        6 => mask2(a, b, |x, y| x >= y),
        7 => mask2(a, b, |x, y| x == x && y == y),
        8 => mask2(a, b, |x, y| x != x || y != y),
        9 => mask2(a, b, |x, y| !(x >= y)),
        10 => mask2(a, b, |x, y| !(x < y || x > y)),
        11 => mask2(a, b, |x, y| !(x > y)),
        12 => mask2(a, b, |x, y| !(x <= y)),
        13 => mask2(a, b, |x, y| x != y),
        14 => mask2(a, b, |x, y| !(x < y)),
        _ => u64::MAX,
    }
}

/// ds_swizzle_b32 source lane for `offset` (ISA guide, DS_SWIZZLE_B32).
fn swizzle_lane(offset: u32, l: usize) -> usize {
    if offset & 0x8000 != 0 {
        // Quad-permute mode over groups of 4 lanes.
        let sel = (offset >> (2 * (l & 3))) & 3;
        (l & !3) | sel as usize
    } else {
        // Bit-mask mode within groups of 32.
        let and = offset & 0x1F;
        let or = (offset >> 5) & 0x1F;
        let xor = (offset >> 10) & 0x1F;
        let j = (((l as u32 & 0x1F) & and) | or) ^ xor;
        (l & 0x20) | j as usize
    }
}

#[cfg(test)]
mod tests {
    use super::{cmp_mask, fma32, fma_lanes, fma_lanes_f64, int_rmw};

    /// The 64-lane fma agrees with the correctly rounded scalar one on every lane.
    #[test]
    fn fma_lanes_match_fmaf() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..2000 {
            let mut arr = [[0u32; 64]; 3];
            for a in arr.iter_mut() {
                for v in a.iter_mut() {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *v = x as u32;
                }
            }
            // Some exact ties: c = -(a*b rounded).
            for l in (0..64).step_by(5) {
                let p = f32::from_bits(arr[0][l]) as f64 * f32::from_bits(arr[1][l]) as f64;
                arr[2][l] = (-(p as f32)).to_bits();
            }
            // The dispatching entry (hardware FMA on hosts that have it) and the f64 form.
            for r in [
                fma_lanes(&arr[0], &arr[1], &arr[2]),
                fma_lanes_f64(&arr[0], &arr[1], &arr[2]),
            ] {
                for l in 0..64 {
                    let (a, b, c) = (
                        f32::from_bits(arr[0][l]),
                        f32::from_bits(arr[1][l]),
                        f32::from_bits(arr[2][l]),
                    );
                    let want = a.mul_add(b, c);
                    let got = f32::from_bits(r[l]);
                    assert!(
                        want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                        "fma({a:e}, {b:e}, {c:e})"
                    );
                }
            }
        }
    }

    /// One integer atomic table for both widths: signedness and wrap-around follow the
    /// cell's width.
    #[test]
    fn integer_atomics_per_width() {
        let m32 = |v: i32| v as u32 as u64;
        // smin/smax on 32-bit cells compare as i32, umin/umax as u32.
        assert_eq!(int_rmw(4, m32(-5), m32(3), 0, 32), m32(-5));
        assert_eq!(int_rmw(6, m32(-5), m32(3), 0, 32), m32(3));
        assert_eq!(int_rmw(5, m32(-5), m32(3), 0, 32), m32(3));
        assert_eq!(int_rmw(7, m32(-5), m32(3), 0, 32), m32(-5));
        assert_eq!(int_rmw(4, (-5i64) as u64, 3, 0, 64), (-5i64) as u64);
        // add wraps at the width; inc/dec wrap at DATA.
        assert_eq!(int_rmw(2, 0xFFFF_FFFF, 2, 0, 32), 1);
        assert_eq!(int_rmw(2, 0xFFFF_FFFF, 2, 0, 64), 0x1_0000_0001);
        assert_eq!(int_rmw(11, 7, 7, 0, 32), 0);
        assert_eq!(int_rmw(11, 6, 7, 0, 32), 7);
        assert_eq!(int_rmw(12, 0, 9, 0, 64), 9);
        assert_eq!(int_rmw(12, 10, 9, 0, 64), 9);
        assert_eq!(int_rmw(12, 4, 9, 0, 64), 3);
        // cmpswap stores only on a match.
        assert_eq!(int_rmw(1, 5, 8, 5, 32), 8);
        assert_eq!(int_rmw(1, 5, 8, 6, 32), 5);
        assert_eq!(int_rmw(3, 0, 1, 0, 32), 0xFFFF_FFFF);
    }

    /// Every VOPC float condition, NaNs included, against the ISA guide's definitions
    /// written lane by lane; integer conditions 0..=7 likewise.
    #[test]
    fn vopc_conditions() {
        let vals = [
            f32::NAN,
            -1.0,
            0.0,
            -0.0,
            1.0,
            2.5,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let a: [f32; 64] = std::array::from_fn(|l| vals[l % 8]);
        let b: [f32; 64] = std::array::from_fn(|l| vals[l / 8]);
        for c in 0..16u8 {
            let m = cmp_mask(c, &a, &b);
            for l in 0..64 {
                let (x, y) = (a[l], b[l]);
                let un = x.is_nan() || y.is_nan();
                let want = match c {
                    0 => false,
                    1 => x < y,
                    2 => x == y,
                    3 => x <= y,
                    4 => x > y,
                    5 => x != y && !un,
                    6 => x >= y,
                    7 => !un,
                    8 => un,
                    9 => !(x >= y),
                    10 => x == y || un,
                    11 => !(x > y),
                    12 => !(x <= y),
                    13 => x != y,
                    14 => !(x < y),
                    _ => true,
                };
                assert_eq!(m >> l & 1 == 1, want, "cond {c} lane {l}: {x} {y}");
            }
        }
        let ia: [i32; 64] = std::array::from_fn(|l| l as i32 % 8 - 4);
        let ib: [i32; 64] = std::array::from_fn(|l| l as i32 / 8 - 4);
        for c in 0..8u8 {
            let m = cmp_mask(c, &ia, &ib);
            for l in 0..64 {
                let (x, y) = (ia[l], ib[l]);
                let w = [false, x < y, x == y, x <= y, x > y, x != y, x >= y, true][c as usize];
                assert_eq!(m >> l & 1 == 1, w, "int cond {c} lane {l}");
            }
        }
    }

    /// The fast f32 fma agrees bit for bit with the library's correctly rounded `fmaf`,
    /// including products whose f64 sum lands halfway between f32 values and subnormals.
    #[test]
    fn fma32_is_correctly_rounded() {
        let mut x = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..2_000_000u32 {
            let r = next();
            let (a, b) = (f32::from_bits(r as u32), f32::from_bits((r >> 32) as u32));
            let c = match i % 4 {
                // c cancelling most of the product, or a tie in f32: the double-rounding cases.
                0 => -((a as f64 * b as f64) as f32),
                1 => f32::from_bits((next() as u32 & 0x807F_FFFF) | 0x0080_0000),
                2 => (a as f64 * b as f64 + f32::from_bits(next() as u32) as f64 * 0.0) as f32,
                _ => f32::from_bits(next() as u32),
            };
            let (a, b) = if i % 8 == 5 {
                // small integers times powers of two: exact ties occur
                (
                    (next() % 4096) as f32 + 0.5,
                    f32::from_bits(0x3300_0000 | (next() as u32 & 0x7F_FFFF)),
                )
            } else {
                (a, b)
            };
            let want = a.mul_add(b, c);
            let got = fma32(a, b, c);
            assert!(
                want.to_bits() == got.to_bits() || (want.is_nan() && got.is_nan()),
                "fma({a:e}, {b:e}, {c:e}) = {want:e}, fast path {got:e}"
            );
        }
    }
}
