//! Whole-wave memory fast paths: the DS and FLAT/GLOBAL dword loads and stores whose
//! [`Fast`] kind lowering chose, run over the 64 lanes at once.
//!
//! - GLOBAL/FLAT dword loads and stores under a full EXEC whose lanes address consecutive
//!   elements (the unit-stride access of `x[gid]`): one address translation for the
//!   wave's whole span, then a straight copy between the mapping and the VGPRs. The
//!   accesses stay relaxed atomics of the same widths as the general path's (an 8-aligned
//!   dwordx2 is one 64-bit access), so other agents never see other tearing.
//! - DS reads and writes: the address VGPR is read once, reads run over every lane
//!   without a branch and are merged under EXEC; each lane's access follows the general
//!   path's rule (a read beyond the LDS returns 0, a write beyond it is dropped), lane by
//!   lane in lane order, so overlapping lanes resolve the same way.
//!
//! Every other case (a partial EXEC or a strided GLOBAL access, a misaligned span, an
//! address outside one mapped window, a register beyond the allocation) returns `false`
//! before anything is written, and the general path (`Wave::ds`, `Wave::flat`) runs the
//! instruction and raises its fault, if any, naming the faulting lane's address.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use super::{Ctx, Wave, SHARED_APERTURE_HI};
use crate::shader::lower::{Fast, Op};

type Lanes = [u32; 64];

/// Whether `v[l] == b + l * S` for every lane without wrapping (`S` the lane stride).
#[inline(always)]
fn unit_stride<const S: u32>(v: &Lanes) -> bool {
    let b = v[0];
    let mut d = 0u32;
    for l in 0..64 {
        d |= v[l] ^ b.wrapping_add(l as u32 * S);
    }
    d == 0 && b.checked_add(63 * S).is_some()
}

/// The same high dword in every lane.
#[inline(always)]
fn uniform(v: &Lanes) -> bool {
    let b = v[0];
    let mut d = 0u32;
    for &x in v {
        d |= x ^ b;
    }
    d == 0
}

/// The LDS dword at byte `a` (0 beyond the LDS: the general path's out-of-range read).
#[inline(always)]
fn lds_rd(lds: &[u8], a: u32) -> u32 {
    match lds.get(a as usize..(a as usize).wrapping_add(4)) {
        Some(&[b0, b1, b2, b3]) => u32::from_le_bytes([b0, b1, b2, b3]),
        _ => 0,
    }
}

/// Stores the LDS dword at byte `a` (dropped beyond the LDS).
#[inline(always)]
fn lds_wr(lds: &mut [u8], a: u32, v: u32) {
    if let Some(c) = lds.get_mut(a as usize..(a as usize).wrapping_add(4)) {
        c.copy_from_slice(&v.to_le_bytes());
    }
}

/// Writes `r` to `d` under `exec`, eight lanes (one EXEC byte) at a time: whole bytes
/// (all or none of the eight lanes, as EXEC masks mostly are) copy or skip.
#[inline]
pub(crate) fn merge(d: &mut Lanes, r: &Lanes, exec: u64) {
    if exec == u64::MAX {
        *d = *r;
        return;
    }
    for (c, (dc, rc)) in d.chunks_exact_mut(8).zip(r.chunks_exact(8)).enumerate() {
        match (exec >> (8 * c)) as u8 {
            0 => {}
            0xFF => dc.copy_from_slice(rc),
            b => {
                for i in 0..8 {
                    if b >> i & 1 != 0 {
                        dc[i] = rc[i];
                    }
                }
            }
        }
    }
}

/// Register `r`'s 64 lanes of the file `v`: `None` only outside `v`, which `data_regs`
/// rules out before any register is written.
#[inline(always)]
fn reg64(v: &mut [u32], r: usize) -> Option<&mut Lanes> {
    v.get_mut(r * 64..r * 64 + 64)?.try_into().ok()
}

/// Active lanes of a sparse EXEC in ascending order (lane order, as the general path).
#[inline(always)]
fn lanes_of(exec: u64) -> impl Iterator<Item = usize> {
    let mut e = exec;
    std::iter::from_fn(move || {
        (e != 0).then(|| {
            let l = e.trailing_zeros() as usize;
            e &= e - 1;
            l
        })
    })
}

/// At most this many active lanes: visit them one by one rather than all 64.
const SPARSE: u32 = 16;

impl Wave {
    /// Index in `v` of raw register `r` (the general DS/FLAT paths index data registers
    /// this way) when registers `r..r + n` lie inside the granted file.
    #[inline(always)]
    fn data_regs(&self, r: usize, n: usize) -> Option<usize> {
        (r + n <= self.nregs).then_some(r)
    }

    /// A DS op of kind `op.fast`; `false` (nothing done) when the general path must run it.
    pub(crate) fn ds_fast(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> bool {
        let exec = self.exec();
        let ai = self.file_idx(op.src[0] as usize);
        let mut addr = [0u32; 64];
        match self.v.get(ai * 64..ai * 64 + 64) {
            Some(a) => addr.copy_from_slice(a),
            None => return false,
        }
        let acc = if op.acc { self.acc_base } else { 0 };
        let off16 = (op.imm as u32) | (op.aux as u32) << 8;
        let lds: &mut [u8] = &mut *ctx.lds;
        match op.fast {
            Fast::DsRead(words) => {
                let words = words as usize;
                let Some(d) = self.data_regs(op.dst as usize + acc, words) else {
                    return false;
                };
                if exec.count_ones() <= SPARSE {
                    for l in lanes_of(exec) {
                        let a = addr[l].wrapping_add(off16);
                        for w in 0..words {
                            self.v[(d + w) * 64 + l] = lds_rd(lds, a.wrapping_add(4 * w as u32));
                        }
                    }
                    return true;
                }
                let mut r = [0u32; 64];
                for w in 0..words {
                    let o = off16.wrapping_add(4 * w as u32);
                    for l in 0..64 {
                        r[l] = lds_rd(lds, addr[l].wrapping_add(o));
                    }
                    if let Some(dst) = reg64(&mut self.v, d + w) {
                        merge(dst, &r, exec);
                    }
                }
            }
            Fast::DsRead2(scale) => {
                let Some(d) = self.data_regs(op.dst as usize + acc, 2) else {
                    return false;
                };
                let scale = u32::from(scale);
                let (o0, o1) = (op.imm as u32 * scale, op.aux as u32 * scale);
                if exec.count_ones() <= SPARSE {
                    for l in lanes_of(exec) {
                        self.v[d * 64 + l] = lds_rd(lds, addr[l].wrapping_add(o0));
                        self.v[(d + 1) * 64 + l] = lds_rd(lds, addr[l].wrapping_add(o1));
                    }
                    return true;
                }
                let (mut r0, mut r1) = ([0u32; 64], [0u32; 64]);
                for l in 0..64 {
                    r0[l] = lds_rd(lds, addr[l].wrapping_add(o0));
                    r1[l] = lds_rd(lds, addr[l].wrapping_add(o1));
                }
                if let Some(dst) = reg64(&mut self.v, d) {
                    merge(dst, &r0, exec);
                }
                if let Some(dst) = reg64(&mut self.v, d + 1) {
                    merge(dst, &r1, exec);
                }
            }
            Fast::DsWrite(words) => {
                let words = words as usize;
                let Some(s) = self.data_regs(op.src[1] as usize + acc, words) else {
                    return false;
                };
                let src = &self.v[s * 64..(s + words) * 64];
                if exec == u64::MAX && words == 1 {
                    for l in 0..64 {
                        lds_wr(lds, addr[l].wrapping_add(off16), src[l]);
                    }
                } else {
                    for l in lanes_of(exec) {
                        let a = addr[l].wrapping_add(off16);
                        for w in 0..words {
                            lds_wr(lds, a.wrapping_add(4 * w as u32), src[w * 64 + l]);
                        }
                    }
                }
            }
            // The general path reads write2's data registers from the VGPR file whatever
            // `acc` says: AccVGPR data takes it too, so both agree.
            Fast::DsWrite2(_) if op.acc => return false,
            Fast::DsWrite2(scale) => {
                // data0 and data1 are separate registers.
                let (Some(s0), Some(s1)) = (
                    self.data_regs(op.src[1] as usize + acc, 1),
                    self.data_regs(op.src[2] as usize + acc, 1),
                ) else {
                    return false;
                };
                let scale = u32::from(scale);
                let (o0, o1) = (op.imm as u32 * scale, op.aux as u32 * scale);
                let (x0, x1) = (
                    &self.v[s0 * 64..s0 * 64 + 64],
                    &self.v[s1 * 64..s1 * 64 + 64],
                );
                for l in lanes_of(exec) {
                    lds_wr(lds, addr[l].wrapping_add(o0), x0[l]);
                    lds_wr(lds, addr[l].wrapping_add(o1), x1[l]);
                }
            }
            _ => return false,
        }
        true
    }

    /// A GLOBAL/FLAT dword load or store of kind `op.fast` under a full EXEC with
    /// unit-stride lanes inside one mapped window; `false` (nothing done) otherwise.
    pub(crate) fn flat_fast(&mut self, ctx: &mut Ctx<'_>, op: &Op) -> bool {
        let (words, store) = match op.fast {
            Fast::GlobalLoad(w) => (w as usize, false),
            Fast::GlobalStore(w) => (w as usize, true),
            _ => return false,
        };
        if self.exec() != u64::MAX {
            return false;
        }
        let ai = self.file_idx(op.src[0] as usize);
        let Some(v0) = self.v.get(ai * 64..ai * 64 + 64) else {
            return false;
        };
        let Ok(v0) = <&Lanes>::try_from(v0) else {
            return false;
        };
        let unit = match words {
            1 => unit_stride::<4>(v0),
            2 => unit_stride::<8>(v0),
            3 => unit_stride::<12>(v0),
            _ => unit_stride::<16>(v0),
        };
        if !unit {
            return false;
        }
        let imm = op.imm as i64 as u64;
        let saddr = op.src[2];
        // The lane-0 address as `Wave::lane_addrs` forms it: global with an SGPR base adds
        // the 32-bit VGPR offset; otherwise the VGPR pair is the 64-bit address.
        let start = if op.aux == 2 && saddr != 0x7F {
            let Some(sb) = fast_s64(&self.s, saddr) else {
                return false;
            };
            sb.wrapping_add(imm).wrapping_add(v0[0] as u64)
        } else {
            let ai1 = self.file_idx(op.src[0] as usize + 1);
            let Some(v1) = self.v.get(ai1 * 64..ai1 * 64 + 64) else {
                return false;
            };
            let Ok(v1) = <&Lanes>::try_from(v1) else {
                return false;
            };
            if !uniform(v1) {
                return false;
            }
            (v0[0] as u64 | (v1[0] as u64) << 32).wrapping_add(imm)
        };
        let stride = 4 * words as u64;
        let len = 64 * stride;
        // An ordinary global range (below the LDS aperture, no wrap), as `span_ptr` wants.
        match start.checked_add(len - stride) {
            Some(hi) if hi < (SHARED_APERTURE_HI as u64) << 32 => {}
            _ => return false,
        }
        let Ok(p) = ctx.mem.ptr(start, len, store) else {
            return false;
        };
        // Whole-element alignment: the atomics below need it (the general path reads a
        // misaligned element bytewise).
        let align = if words == 2 { 8 } else { 4 };
        if start % align != 0 || (p as usize) % align as usize != 0 {
            return false;
        }
        let acc = if op.acc { self.acc_base } else { 0 };
        let reg = if store { op.src[1] } else { op.dst } as usize + acc;
        let Some(r) = self.data_regs(reg, words) else {
            return false;
        };
        let regs = &mut self.v[r * 64..(r + words) * 64];
        let stride = stride as usize;
        // For every access below: `ptr` proved [start, start + 64 * stride) lies in a live
        // mapping (writable for a store); every lane's element is at `p + l * stride`, aligned
        // for the access width (checked above). Device memory is shared with other agents,
        // so every access is atomic, as in `mem::load_raw`/`store_raw`.
        if words == 2 {
            let (lo, hi) = regs.split_at_mut(64);
            for l in 0..64 {
                // SAFETY: as above (8-byte elements, 8-aligned).
                let cell = unsafe { AtomicU64::from_ptr(p.add(l * 8).cast()) };
                if store {
                    cell.store(lo[l] as u64 | (hi[l] as u64) << 32, Ordering::Relaxed);
                } else {
                    let x = cell.load(Ordering::Relaxed);
                    lo[l] = x as u32;
                    hi[l] = (x >> 32) as u32;
                }
            }
        } else {
            for w in 0..words {
                let reg = &mut regs[w * 64..w * 64 + 64];
                for l in 0..64 {
                    // SAFETY: as above (dword `w` of lane `l`'s element, 4-aligned).
                    let cell = unsafe { AtomicU32::from_ptr(p.add(l * stride + 4 * w).cast()) };
                    if store {
                        cell.store(reg[l], Ordering::Relaxed);
                    } else {
                        reg[l] = cell.load(Ordering::Relaxed);
                    }
                }
            }
        }
        true
    }
}

/// A 64-bit SGPR-pair base (the only scalar operand a GLOBAL `saddr` is).
#[inline(always)]
fn fast_s64(s: &[u32; 128], code: u16) -> Option<u64> {
    let c = code as usize;
    Some(*s.get(c)? as u64 | (*s.get(c + 1)? as u64) << 32)
}

#[cfg(test)]
mod tests {
    use super::super::{Ctx, Wave};
    use crate::gpumem::HeapMemory;
    use crate::shader::lower::{Fast, Op};
    use crate::shader::mem::MemPort;
    use crate::shader::{Program, Target};
    use std::sync::Arc;

    const NREGS: usize = 16;
    /// A lane's address from its lane number.
    type LaneAddr = Box<dyn Fn(u64) -> u64>;
    /// The global test buffer, and two adjacent regions (a span across their boundary is
    /// not in one window: the general path resolves each lane on its own).
    const R: u64 = 0x1_0000_0000;
    const R_LEN: usize = 16 * 1024;
    const SPLIT: u64 = 0x1_0001_1000;
    const LDS_LEN: usize = 1024;

    /// Instruction encodings from `llvm-mc-19 -mcpu=gfx942 -show-encoding` (little-endian
    /// bytes as dwords).
    fn enc(b: [u8; 8]) -> Vec<u32> {
        vec![
            u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        ]
    }

    fn xorshift(x: &mut u64) -> u64 {
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x
    }

    /// Two copies of the same initial memory (one per path).
    fn memory(seed: u64) -> Arc<HeapMemory> {
        let mem = HeapMemory::new();
        let mut x = seed;
        for (va, len) in [(R, R_LEN), (SPLIT - 4096, 4096), (SPLIT, 4096)] {
            let w = mem.add_region(va, len);
            for o in (0..len as u64).step_by(4) {
                w.store_u32(va + o, xorshift(&mut x) as u32).expect("store");
            }
        }
        Arc::new(mem)
    }

    fn dump(mem: &Arc<HeapMemory>) -> Vec<u32> {
        let mut port = MemPort::new(1, mem.clone());
        let mut out = Vec::new();
        for (va, len) in [(R, R_LEN), (SPLIT - 4096, 8192)] {
            for o in (0..len as u64).step_by(4) {
                out.push(port.load(va + o, 4).expect("load") as u32);
            }
        }
        out
    }

    fn wave(seed: u64, exec: u64) -> Wave {
        let mut w = Wave::new(NREGS, NREGS, 0);
        let mut x = seed;
        for r in w.v.iter_mut() {
            *r = xorshift(&mut x) as u32;
        }
        for r in w.s.iter_mut().take(104) {
            *r = xorshift(&mut x) as u32;
        }
        w.s[126] = exec as u32;
        w.s[127] = (exec >> 32) as u32;
        w
    }

    /// Runs `op` on `w` by the fast path (falling back like the interpreter loop) or the
    /// general path only.
    fn step(
        w: &mut Wave,
        prog: &Program,
        mem: &Arc<HeapMemory>,
        lds: &mut [u8],
        fast: bool,
    ) -> (bool, Result<(), String>) {
        let mut port = MemPort::new(1, mem.clone());
        let clock = || 0u64;
        let mut ctx = Ctx {
            prog,
            mem: &mut port,
            lds,
            target: Target::Gfx942,
            sramecc: true,
            clock: &clock,
        };
        let op: Op = prog.ops[0];
        let ran = fast
            && match op.enc {
                crate::shader::lower::Enc::Ds => w.ds_fast(&mut ctx, &op),
                _ => w.flat_fast(&mut ctx, &op),
            };
        if ran {
            return (true, Ok(()));
        }
        let r = match op.enc {
            crate::shader::lower::Enc::Ds => w.ds(&mut ctx, &op),
            _ => w.flat(&mut ctx, &op),
        };
        (false, r.map_err(|e| e.reason))
    }

    /// Every GLOBAL/FLAT fast kind over full and partial EXEC, unit-stride aligned,
    /// misaligned, strided, reversed, window-crossing and faulting addresses: the fast
    /// path leaves the registers and memory the general path leaves, and declines (then
    /// the general path raises the same fault) wherever it does not apply.
    #[test]
    fn global_fast_path_matches_the_general_path() {
        // (encoding, dwords per lane, uses s[6:7] + v2 instead of v[0:1])
        let cases: [([u8; 8], u64, bool); 7] = [
            // global_load_dword v4, v[0:1], off offset:8
            ([0x08, 0x80, 0x50, 0xdc, 0x00, 0x00, 0x7f, 0x04], 1, false),
            // global_load_dwordx2 v[4:5], v2, s[6:7] offset:-16
            ([0xf0, 0x9f, 0x54, 0xdc, 0x02, 0x00, 0x06, 0x04], 2, true),
            // global_store_dwordx4 v[0:1], v[4:7], off
            ([0x00, 0x80, 0x7c, 0xdc, 0x00, 0x04, 0x7f, 0x00], 4, false),
            // global_store_dword v2, v5, s[6:7]
            ([0x00, 0x80, 0x70, 0xdc, 0x02, 0x05, 0x06, 0x00], 1, true),
            // flat_load_dwordx3 v[4:6], v[0:1]
            ([0x00, 0x00, 0x58, 0xdc, 0x00, 0x00, 0x00, 0x04], 3, false),
            // global_load_dwordx4 v[4:7], v[0:1], off
            ([0x00, 0x80, 0x5c, 0xdc, 0x00, 0x00, 0x7f, 0x04], 4, false),
            // global_store_dwordx2 v[0:1], v[4:5], off
            ([0x00, 0x80, 0x74, 0xdc, 0x00, 0x04, 0x7f, 0x00], 2, false),
        ];
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut fast_runs = 0;
        for (bytes, words, saddr) in cases {
            let prog = Program::decode(0, 0, &enc(bytes), Target::Gfx942);
            assert!(
                matches!(prog.ops[0].fast, Fast::GlobalLoad(_) | Fast::GlobalStore(_)),
                "{bytes:x?} has no fast kind"
            );
            let stride = 4 * words;
            // (lane address, whether the fast path must run under a full EXEC)
            let layouts: [(&str, LaneAddr, bool); 7] = [
                ("unit", Box::new(move |l| R + 64 + l * stride), true),
                ("misaligned", Box::new(move |l| R + 66 + l * stride), false),
                ("strided", Box::new(move |l| R + 32 + 2 * l * stride), false),
                (
                    "reversed",
                    Box::new(move |l| R + 32 + (63 - l) * stride),
                    false,
                ),
                (
                    "window-crossing",
                    Box::new(move |l| SPLIT - 128 + l * stride),
                    false,
                ),
                (
                    "faulting",
                    Box::new(move |l| R + R_LEN as u64 - 100 + l * stride),
                    false,
                ),
                (
                    "unmapped",
                    Box::new(move |l| 0x7_0000_0000 + l * stride),
                    false,
                ),
            ];
            for (name, addr, must) in &layouts {
                for exec in [u64::MAX, 0x0FF0_FFFF_0000_FFF1] {
                    xorshift(&mut seed);
                    let (ma, mb) = (memory(seed), memory(seed));
                    let mut a = wave(seed, exec);
                    // The SGPR base just below the lowest lane address.
                    let sb = (0..64).map(&**addr).min().unwrap_or(R) - 32;
                    for l in 0..64 {
                        let va = addr(l as u64);
                        if saddr {
                            // s[6:7] + v2 (+ the instruction offset, -16 or 0).
                            a.s[6] = sb as u32;
                            a.s[7] = (sb >> 32) as u32;
                            let imm = if words == 2 { 16 } else { 0 };
                            a.v[2 * 64 + l] = (va + imm - sb) as u32;
                        } else {
                            let imm = if words == 1 { 8 } else { 0 };
                            let base = va - imm;
                            a.v[l] = base as u32;
                            a.v[64 + l] = (base >> 32) as u32;
                        }
                    }
                    let mut b = Wave::new(NREGS, NREGS, 0);
                    b.v.clone_from(&a.v);
                    b.s = a.s;
                    let (mut la, mut lb) = ([0u8; 4], [0u8; 4]);
                    let (ran, ra) = step(&mut a, &prog, &ma, &mut la, true);
                    let (_, rb) = step(&mut b, &prog, &mb, &mut lb, false);
                    let what = format!("{bytes:x?} {name} exec {exec:#x} (fast ran: {ran})");
                    assert_eq!(ra, rb, "{what}");
                    assert!(a.v == b.v, "{what}: registers differ");
                    assert!(dump(&ma) == dump(&mb), "{what}: memory differs");
                    assert_eq!(ran, *must && exec == u64::MAX, "{what}");
                    if name.starts_with("faulting") || name.starts_with("unmapped") {
                        let e = ra.expect_err("must fault");
                        assert!(e.contains("memory fault"), "{what}: {e}");
                    }
                    fast_runs += usize::from(ran);
                }
            }
        }
        assert_eq!(fast_runs, 7);
    }

    /// Every DS fast kind over full and partial EXEC with in-range, misaligned,
    /// out-of-range and colliding lane addresses: the same registers and LDS as the
    /// general path.
    #[test]
    fn ds_fast_path_matches_the_general_path() {
        let cases: [[u8; 8]; 10] = [
            // ds_read_b32 v4, v1 offset:12
            [0x0c, 0x00, 0x6c, 0xd8, 0x01, 0x00, 0x00, 0x04],
            // ds_read2_b32 v[4:5], v1 offset0:3 offset1:200
            [0x03, 0xc8, 0x6e, 0xd8, 0x01, 0x00, 0x00, 0x04],
            // ds_read2st64_b32 v[4:5], v1 offset1:2
            [0x00, 0x02, 0x70, 0xd8, 0x01, 0x00, 0x00, 0x04],
            // ds_write_b32 v1, v5 offset:4
            [0x04, 0x00, 0x1a, 0xd8, 0x01, 0x05, 0x00, 0x00],
            // ds_write2_b32 v1, v5, v6 offset0:1 offset1:9
            [0x01, 0x09, 0x1c, 0xd8, 0x01, 0x05, 0x06, 0x00],
            // ds_write2st64_b32 v1, v5, v6 offset1:1
            [0x00, 0x01, 0x1e, 0xd8, 0x01, 0x05, 0x06, 0x00],
            // ds_read_b128 v[4:7], v1 offset:16
            [0x10, 0x00, 0xfe, 0xd9, 0x01, 0x00, 0x00, 0x04],
            // ds_write_b64 v1, v[6:7] offset:8
            [0x08, 0x00, 0x9a, 0xd8, 0x01, 0x06, 0x00, 0x00],
            // ds_read_b64 v[4:5], v1
            [0x00, 0x00, 0xec, 0xd8, 0x01, 0x00, 0x00, 0x04],
            // ds_read_b32 v1, v1 (the address register is the destination)
            [0x00, 0x00, 0x6c, 0xd8, 0x01, 0x00, 0x00, 0x01],
        ];
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mem = Arc::new(HeapMemory::new());
        for bytes in cases {
            let prog = Program::decode(0, 0, &enc(bytes), Target::Gfx942);
            assert_ne!(prog.ops[0].fast, Fast::None, "{bytes:x?} has no fast kind");
            for layout in ["dword", "misaligned", "out-of-range", "colliding"] {
                for exec in [u64::MAX, 0x8000_0F0F_1234_0001, 0x0000_0100_0000_8003, 0] {
                    xorshift(&mut seed);
                    let mut a = wave(seed, exec);
                    let mut x = seed;
                    for l in 0..64 {
                        let r = xorshift(&mut x);
                        a.v[64 + l] = match layout {
                            "dword" => 4 * l as u32,
                            "misaligned" => (r % 900) as u32 | 1,
                            "out-of-range" => (r % 1400) as u32 & !3,
                            _ => (r % 8) as u32 * 4,
                        };
                    }
                    let mut b = Wave::new(NREGS, NREGS, 0);
                    b.v.clone_from(&a.v);
                    b.s = a.s;
                    let mut la = vec![0u8; LDS_LEN];
                    for c in la.iter_mut() {
                        *c = xorshift(&mut x) as u8;
                    }
                    let mut lb = la.clone();
                    let (ran, ra) = step(&mut a, &prog, &mem, &mut la, true);
                    let (_, rb) = step(&mut b, &prog, &mem, &mut lb, false);
                    let what = format!("{bytes:x?} {layout} exec {exec:#x}");
                    assert!(ran, "{what}: the fast path declined");
                    assert_eq!(ra, rb, "{what}");
                    assert!(a.v == b.v, "{what}: registers differ");
                    assert!(la == lb, "{what}: LDS differs");
                }
            }
        }
    }

    /// `s_load_dwordx4/x8` read their dwords through one translation when they lie in
    /// one window: inside a window, across two adjacent windows and running off the end
    /// of mapped memory they load what dword-by-dword loads give, and fault on the first
    /// unmapped dword (the dwords before it loaded) naming its address.
    #[test]
    fn smem_one_translation_matches_dword_loads() {
        let cases: [([u8; 8], u64, usize); 2] = [
            // s_load_dwordx4 s[8:11], s[2:3], 0x10
            ([0x01, 0x02, 0x0a, 0xc0, 0x10, 0x00, 0x00, 0x00], 0x10, 4),
            // s_load_dwordx8 s[8:15], s[2:3], 0x0
            ([0x01, 0x02, 0x0e, 0xc0, 0x00, 0x00, 0x00, 0x00], 0, 8),
        ];
        let mem = memory(7);
        for (bytes, off, n) in cases {
            let prog = Program::decode(0, 0, &enc(bytes), Target::Gfx942);
            for (name, base) in [
                ("inside", R + 0x100),
                ("window-crossing", SPLIT - 8 - off),
                ("faulting", R + R_LEN as u64 - 8 - off),
            ] {
                let mut w = wave(3, u64::MAX);
                w.s[2] = base as u32;
                w.s[3] = (base >> 32) as u32;
                let before = w.s;
                let mut port = MemPort::new(1, mem.clone());
                let clock = || 0u64;
                let mut lds = [0u8; 0];
                let mut ctx = Ctx {
                    prog: &prog,
                    mem: &mut port,
                    lds: &mut lds,
                    target: Target::Gfx942,
                    sramecc: true,
                    clock: &clock,
                };
                let r = w.smem(&mut ctx, &prog.ops[0]);
                let mut check = MemPort::new(1, mem.clone());
                let mut want = before;
                let mut fault = None;
                for i in 0..n {
                    match check.load(base + off + 4 * i as u64, 4) {
                        Ok(v) => want[8 + i] = v as u32,
                        Err(f) => {
                            fault = Some(f.va);
                            break;
                        }
                    }
                }
                assert_eq!(w.s, want, "{bytes:x?} {name}");
                match (r, fault) {
                    (Ok(()), None) => assert_ne!(name, "faulting"),
                    (Err(e), Some(va)) => {
                        assert_eq!(name, "faulting");
                        assert_eq!(e.fault.map(|f| f.va), Some(va), "{bytes:x?} {name}");
                    }
                    (r, f) => panic!(
                        "{bytes:x?} {name}: {:?} vs fault {f:?}",
                        r.err().map(|e| e.reason)
                    ),
                }
            }
        }
    }
}
