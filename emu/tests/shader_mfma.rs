//! MFMA beyond the dense f32/f16/bf16 core: f64, int8 (incl. gfx942's 16x16x32 / 32x32x16),
//! gfx90a's two-per-register bf16, gfx942 fp8/bf8, and the CBSZ/ABID (A block broadcast)
//! and BLGP (B lane group; negation for gfx942 f64) modifiers, on the emulated gfx942 and
//! gfx90a. Lane operands are random raw words; the CPU decodes them by the layouts AMD's
//! matrix instruction calculator prints, multiplies in f64 / i64 and places D the same way.
//! Values are small enough that every sum is exact in any order.

// Matrix index loops read clearer with explicit indices.
#![allow(clippy::needless_range_loop)]

mod shader_common;
use shader_common::*;

#[derive(Clone, Copy, PartialEq)]
enum Ty {
    I8,
    F32,
    F16,
    Bf16,
    /// E4M3, AMD "FNUZ" (bias 8).
    Fp8,
    /// E5M2, AMD "FNUZ" (bias 16).
    Bf8,
}

impl Ty {
    fn bits(self) -> usize {
        match self {
            Ty::F32 => 32,
            Ty::F16 | Ty::Bf16 => 16,
            _ => 8,
        }
    }
    /// A random element code whose value is small (exact sums).
    fn code(self, r: u32) -> u32 {
        let s = (r >> 16) & 1;
        let small = (r % 9) as f32 - 4.0;
        match self {
            Ty::I8 => r & 0xFF,
            Ty::F32 => small.to_bits(),
            Ty::F16 => half::f16::from_f32(small).to_bits() as u32,
            Ty::Bf16 => half::bf16::from_f32(small).to_bits() as u32,
            // Exponent fields 6..=10 (2^-2..2^2) and 14..=18, any mantissa.
            Ty::Fp8 => s << 7 | (6 + (r >> 3) % 5) << 3 | (r & 7),
            Ty::Bf8 => s << 7 | (14 + (r >> 3) % 5) << 2 | (r & 3),
        }
    }
    fn value(self, c: u32) -> f64 {
        let fp8 = |c: u32, mb: u32, bias: i32| {
            let s = if c & 0x80 != 0 { -1.0 } else { 1.0 };
            let e = ((c & 0x7F) >> mb) as i32;
            let m = (c & ((1 << mb) - 1)) as f64 / (1 << mb) as f64;
            assert!(e != 0 && c != 0x80, "test codes are normal");
            s * (1.0 + m) * 2f64.powi(e - bias)
        };
        match self {
            Ty::I8 => c as u8 as i8 as f64,
            Ty::F32 => f32::from_bits(c) as f64,
            Ty::F16 => half::f16::from_bits(c as u16).to_f64(),
            Ty::Bf16 => half::bf16::from_bits(c as u16).to_f64(),
            Ty::Fp8 => fp8(c, 3, 8),
            Ty::Bf8 => fp8(c, 2, 16),
        }
    }
}

struct Case {
    kernel: &'static str,
    m: usize,
    n: usize,
    k: usize,
    blocks: usize,
    a: Ty,
    b: Ty,
    cbsz: u32,
    abid: u32,
    blgp: u32,
}

/// Calculator `_get_blgp_transformed_lane`: the lane whose B value lane `l` uses.
fn blgp(l: usize, g: u32) -> usize {
    match g {
        0 => l,
        1 => l % 32,
        2 => 32 + l % 32,
        3 => (l + 16) % 64,
        _ => 16 * (g as usize - 4) + l % 16,
    }
}

fn run_case(dev: &Dev, m: &Module, c: &Case) {
    let e = c.k * c.m * c.blocks / 64; // inputs per lane
    let words = (e * c.a.bits()).div_ceil(32);
    let dregs = c.blocks * c.m * c.n / 64;
    let gen = |seed: u32, ty: Ty| -> Vec<u32> {
        let r = rand_u32(64 * e, seed);
        let mut w = vec![0u32; 64 * words];
        for l in 0..64 {
            for x in 0..e {
                let bit = x * ty.bits();
                w[l * words + bit / 32] |= ty.code(r[l * e + x]) << (bit % 32);
            }
        }
        w
    };
    let (aw, bw) = (gen(0xA11CE, c.a), gen(0xB0B, c.b));
    let el = |w: &Vec<u32>, ty: Ty, lane: usize, x: usize| -> f64 {
        let bit = x * ty.bits();
        let v = w[lane * words + bit / 32] >> (bit % 32);
        let mask = if ty.bits() == 32 {
            u32::MAX
        } else {
            (1 << ty.bits()) - 1
        };
        ty.value(v & mask)
    };
    let mut q = dev.queue();
    let (wa, wb, wd) = (dev.upload(&aw), dev.upload(&bw), dev.alloc(64 * dregs * 4));
    let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wd);
    dev.run_ok(&mut q, m, c.kernel, [64, 1, 1], [64, 1, 1], 0, &args.0);
    let d: Vec<u32> = dev.download(&wd, 64 * dregs);
    // A[blk][i][k] is in lane i + M (k / E + (K / E) blk), element k % E; B likewise with j.
    let g = 64 / c.n;
    for blk in 0..c.blocks {
        let ablk = if c.cbsz == 0 {
            blk
        } else {
            (blk >> c.cbsz << c.cbsz) + c.abid as usize
        };
        for i in 0..c.m {
            for j in 0..c.n {
                let mut want = 0f64;
                for kk in 0..c.k {
                    let grp = kk / e + (c.k / e) * ablk;
                    let x = el(&aw, c.a, i + c.m * grp, kk % e);
                    let grp = kk / e + (c.k / e) * blk;
                    let y = el(&bw, c.b, blgp(j + c.n * grp, c.blgp), kk % e);
                    want += x * y;
                }
                let s = blk * c.m / 4 + i / 4;
                let reg = 4 * (s / g) + i % 4;
                let lane = j + c.n * (s % g);
                let got = d[lane * dregs + reg];
                let got = if c.a == Ty::I8 {
                    got as i32 as f64
                } else {
                    f32::from_bits(got) as f64
                };
                assert_eq!(
                    got, want,
                    "{} {} D[{blk}][{i}][{j}] (lane {lane} reg {reg})",
                    dev.target, c.kernel
                );
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn case(
    kernel: &'static str,
    m: usize,
    k: usize,
    blocks: usize,
    a: Ty,
    b: Ty,
    cbsz: u32,
    abid: u32,
    blgp: u32,
) -> Case {
    Case {
        kernel,
        m,
        n: m,
        k,
        blocks,
        a,
        b,
        cbsz,
        abid,
        blgp,
    }
}

#[test]
fn int8_bf16_fp8_mfma_and_broadcast_modifiers() {
    use Ty::*;
    for dev in devices() {
        let m = dev.load("cl/isa_mfma_more.cl");
        let mut cases = vec![
            case("i8_32x32x4_cbsz1_abid1", 32, 4, 2, I8, I8, 1, 1, 0),
            case("i8_16x16x4_cbsz2_abid3", 16, 4, 4, I8, I8, 2, 3, 0),
            case("i8_4x4x4_cbsz4_abid5_blgp2", 4, 4, 16, I8, I8, 4, 5, 2),
            case("f32_32x32x1_blgp3", 32, 1, 2, F32, F32, 0, 0, 3),
            case("f32_16x16x4_blgp1", 16, 4, 1, F32, F32, 0, 0, 1),
            case("f16_4x4x4_cbsz3_abid5_blgp6", 4, 4, 16, F16, F16, 3, 5, 6),
        ];
        if dev.target == "gfx90a" {
            cases.extend([
                case("i8_32x32x8", 32, 8, 1, I8, I8, 0, 0, 0),
                case("i8_16x16x16_blgp7", 16, 16, 1, I8, I8, 0, 0, 7),
                case(
                    "bf16_32x32x2_cbsz1_abid0_blgp4",
                    32,
                    2,
                    2,
                    Bf16,
                    Bf16,
                    1,
                    0,
                    4,
                ),
                case("bf16_16x16x8", 16, 8, 1, Bf16, Bf16, 0, 0, 0),
            ]);
        } else {
            cases.extend([
                case("i8_16x16x32", 16, 32, 1, I8, I8, 0, 0, 0),
                case("i8_32x32x16", 32, 16, 1, I8, I8, 0, 0, 0),
                case("fp8_fp8_16x16x32", 16, 32, 1, Fp8, Fp8, 0, 0, 0),
                case("bf8_fp8_16x16x32", 16, 32, 1, Bf8, Fp8, 0, 0, 0),
                case("fp8_bf8_32x32x16", 32, 16, 1, Fp8, Bf8, 0, 0, 0),
                case("bf8_bf8_32x32x16", 32, 16, 1, Bf8, Bf8, 0, 0, 0),
            ]);
        }
        for c in &cases {
            run_case(&dev, &m, c);
        }
    }
}

/// f64 MFMA by the calculator's f64 layouts: 16x16x4 — A[i][k] in lane 16k + i, D[i][j] in
/// lane 16 (i % 4) + j, register pair i / 4; 4x4x4 (4 blocks) — A[i][k] in lane 16k + 4b + i,
/// D[i][j] in lane 16i + 4b + j. gfx942's BLGP 5 negates A and C (C is 0 here).
#[test]
fn f64_mfma() {
    for dev in devices() {
        let m = dev.load("cl/isa_mfma_more.cl");
        let a: Vec<f64> = rand_u32(64, 0xF64A)
            .iter()
            .map(|&x| (x % 15) as f64 - 7.0)
            .collect();
        let b: Vec<f64> = rand_u32(64, 0xF64B)
            .iter()
            .map(|&x| (x % 13) as f64 * 0.25 - 1.5)
            .collect();
        let mut kernels = vec![("f64_16x16x4", 1.0), ("f64_4x4x4", 1.0)];
        if dev.target == "gfx942" {
            kernels.push(("f64_16x16x4_neg5", -1.0));
        }
        for (kernel, sign) in kernels {
            let mut q = dev.queue();
            let big = kernel.starts_with("f64_16");
            let pairs = if big { 4 } else { 1 };
            let (wa, wb, wd) = (dev.upload(&a), dev.upload(&b), dev.alloc(64 * pairs * 8));
            let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wd);
            dev.run_ok(&mut q, &m, kernel, [64, 1, 1], [64, 1, 1], 0, &args.0);
            let d: Vec<f64> = dev.download(&wd, 64 * pairs);
            let blocks = if big { 1 } else { 4 };
            let mn = if big { 16 } else { 4 };
            for blk in 0..blocks {
                for i in 0..mn {
                    for j in 0..mn {
                        let (want, lane, pair) = if big {
                            let w: f64 = (0..4).map(|k| a[16 * k + i] * b[16 * k + j]).sum();
                            (w, 16 * (i % 4) + j, i / 4)
                        } else {
                            let w: f64 = (0..4)
                                .map(|k| a[16 * k + 4 * blk + i] * b[16 * k + 4 * blk + j])
                                .sum();
                            (w, 16 * i + 4 * blk + j, 0)
                        };
                        assert_eq!(
                            d[lane * pairs + pair],
                            sign * want,
                            "{} {kernel} D[{blk}][{i}][{j}]",
                            dev.target
                        );
                    }
                }
            }
        }
    }
}

/// gfx942 SMFMAC (4:2 structured-sparse A): per lane the compressed A values, the dense B
/// values and a compression index (a 4-bit field per group of four k: the positions of the
/// group's two kept values, first in bits [1:0]); the CPU expands A and multiplies densely.
#[test]
fn sparse_smfmac_on_gfx942() {
    use Ty::*;
    let dev = devices()
        .into_iter()
        .find(|d| d.target == "gfx942")
        .expect("gfx942 device");
    let m = dev.load("cl/isa_mfma_more.cl");
    // (kernel, M = N, K, A type, B type, index set bit offset: CBSZ 0 -> ABID x KL, else 0).
    let cases = [
        ("sp_f16_16x16x32", 16, 32, F16, F16, 0),
        ("sp_f16_32x32x16", 32, 16, F16, F16, 0),
        ("sp_bf16_16x16x32", 16, 32, Bf16, Bf16, 0),
        ("sp_i8_16x16x64", 16, 64, I8, I8, 0),
        ("sp_i8_32x32x32", 32, 32, I8, I8, 0),
        ("sp_fp8_bf8_16x16x64", 16, 64, Fp8, Bf8, 0),
        ("sp_bf8_fp8_32x32x32", 32, 32, Bf8, Fp8, 0),
        ("sp_f16_16x16x32_abid3", 16, 32, F16, F16, 24),
        ("sp_bf16_16x16x32_abid2", 16, 32, Bf16, Bf16, 16),
        ("sp_f16_32x32x16_cbsz1", 32, 16, F16, F16, 0),
        ("sp_i8_16x16x64_abid1", 16, 64, I8, I8, 16),
        ("sp_fp8_bf8_16x16x64_abid1", 16, 64, Fp8, Bf8, 16),
    ];
    // The six ways to keep two of four positions, in increasing order.
    let pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)];
    for (kernel, mn, k, ta, tb, set_shift) in cases {
        let kl = k * mn / 64; // k values per lane
        let bits = ta.bits();
        let (aw, bw) = ((kl / 2 * bits).div_ceil(32), (kl * bits).div_ceil(32));
        let ra = rand_u32(64 * kl, 0x5A);
        let rb = rand_u32(64 * kl, 0x5B);
        let ri = rand_u32(64 * kl, 0x5C);
        let mut a = vec![0u32; 64 * aw];
        let mut b = vec![0u32; 64 * bw];
        let mut ix = vec![0u32; 64];
        for l in 0..64 {
            for e in 0..kl / 2 {
                let bit = e * bits;
                a[l * aw + bit / 32] |= ta.code(ra[l * kl + e]) << (bit % 32);
            }
            for e in 0..kl {
                let bit = e * tb.bits();
                b[l * bw + bit / 32] |= tb.code(rb[l * kl + e]) << (bit % 32);
            }
            // Every index set of the VGPR filled (different positions per set).
            for g in 0..8 {
                let (p0, p1) = pairs[(ri[l * kl + g] % 6) as usize];
                ix[l] |= (p0 | p1 << 2) << (4 * g);
            }
        }
        let get = |w: &Vec<u32>, words: usize, ty: Ty, lane: usize, e: usize| -> f64 {
            let bit = e * ty.bits();
            let v = w[lane * words + bit / 32] >> (bit % 32);
            ty.value(if ty.bits() == 32 {
                v
            } else {
                v & ((1 << ty.bits()) - 1)
            })
        };
        // Dense A[i][kk] from the compressed values and their positions.
        let mut dense = vec![vec![0f64; k]; mn];
        for i in 0..mn {
            for q in 0..k / kl {
                let lane = i + mn * q;
                for g in 0..kl / 4 {
                    let nib = ix[lane] >> (set_shift + 4 * g);
                    for v in 0..2 {
                        let pos = ((nib >> (2 * v)) & 3) as usize;
                        dense[i][q * kl + 4 * g + pos] = get(&a, aw, ta, lane, 2 * g + v);
                    }
                }
            }
        }
        let dregs = mn * mn / 64;
        let mut q = dev.queue();
        let (wa, wb, wi, wd) = (
            dev.upload(&a),
            dev.upload(&b),
            dev.upload(&ix),
            dev.alloc(64 * dregs * 4),
        );
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wi).ptr(&wd);
        dev.run_ok(&mut q, &m, kernel, [64, 1, 1], [64, 1, 1], 0, &args.0);
        let d: Vec<u32> = dev.download(&wd, 64 * dregs);
        let g = 64 / mn;
        for i in 0..mn {
            for j in 0..mn {
                let want: f64 = (0..k)
                    .map(|kk| dense[i][kk] * get(&b, bw, tb, j + mn * (kk / kl), kk % kl))
                    .sum();
                let s = i / 4;
                let (reg, lane) = (4 * (s / g) + i % 4, j + mn * (s % g));
                let got = d[lane * dregs + reg];
                let got = if ta == I8 {
                    got as i32 as f64
                } else {
                    f32::from_bits(got) as f64
                };
                assert_eq!(got, want, "{kernel} D[{i}][{j}]");
            }
        }
    }
}
