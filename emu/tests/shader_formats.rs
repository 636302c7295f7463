//! Data formats and 16-bit forms on the emulated gfx942 and gfx90a (kernel
//! `test-kernels/cl/isa_formats.cl`): DS D16 reads and `_d16_hi` writes,
//! `buffer_{load,store}_format_d16_hi_x`, MTBUF 11_11_10 / 10_11_11 with float, integer and
//! scaled numeric formats, the transcendentals under every MODE round mode, and gfx942's
//! xf32 MFMA. Every expected value is computed here on the CPU (firmware-notes/isa-gfx9.md
//! names the rules).

mod shader_common;
use shader_common::*;

use rustc_apfloat::ieee::{Double, Half};
use rustc_apfloat::{Float, FloatConvert};

/// The pattern every kernel seeds its destination VGPRs with (lane `i`, slot `k` adds k).
fn old(seed: u32, i: usize) -> u32 {
    seed ^ (i as u32).wrapping_mul(0x9E37_79B9)
}

/// A D16 load's VGPR: `half` in the high or low half; the other half of `prev` kept with
/// SRAM ECC off, zero with it on.
fn d16(half: u32, prev: u32, hi: bool, sramecc: bool) -> u32 {
    let keep = if sramecc { 0 } else { prev };
    if hi {
        (keep & 0xFFFF) | half << 16
    } else {
        (keep & 0xFFFF_0000) | half
    }
}

fn check_ds(dev: &Dev, sramecc: bool) {
    let seed = 0x5EED_0016u32;
    let src: Vec<u16> = rand_u32(128, 0x1D5).iter().map(|&x| x as u16).collect();
    let m = dev.load("cl/isa_formats.cl");
    let (ws, wo) = (dev.upload(&src), dev.alloc(8 * 64 * 4));
    let args = Args::default().ptr(&ws).ptr(&wo).u32(seed);
    let mut q = dev.queue();
    dev.run_ok(&mut q, &m, "ds_d16", [64, 1, 1], [64, 1, 1], 0, &args.0);
    let out: Vec<u32> = dev.download(&wo, 8 * 64);
    let t = dev.target;
    for i in 0..64 {
        let o = old(seed, i);
        let (b, s) = (src[i] as u8, src[i + 64] as u32);
        let want = [
            d16(b as u32, o, false, sramecc),
            d16(b as u32, o.wrapping_add(1), true, sramecc),
            d16(
                b as i8 as i16 as u16 as u32,
                o.wrapping_add(2),
                false,
                sramecc,
            ),
            d16(
                b as i8 as i16 as u16 as u32,
                o.wrapping_add(3),
                true,
                sramecc,
            ),
            d16(s, o.wrapping_add(4), false, sramecc),
            d16(s, o.wrapping_add(5), true, sramecc),
            (o.wrapping_add(7) >> 16 & 0xFF) << 24 | 0xFF << 16 | o.wrapping_add(6) >> 16,
            0,
        ];
        assert_eq!(
            &out[8 * i..8 * i + 8],
            &want,
            "{t} sramecc={sramecc} lane {i}: ds_read_{{u8,u8_hi,i8,i8_hi,u16,u16_hi}}_d16, \
             ds_write_b16/b8_d16_hi (src {:#06x} / {:#06x})",
            src[i],
            src[i + 64]
        );
    }
}

#[test]
fn ds_d16_reads_and_hi_writes() {
    for dev in devices() {
        check_ds(&dev, true);
    }
    for &(t, v) in TARGETS.iter() {
        check_ds(&Dev::with_config(t, v, 1, false), false);
    }
}

fn check_buf_hi(dev: &Dev, sramecc: bool) {
    let n = 128usize;
    let seed = 0xB0F_D16u32;
    let src16: Vec<u16> = rand_u32(n, 0x16).iter().map(|&x| x as u16).collect();
    let src8: Vec<u8> = rand_u32(n, 0x8).iter().map(|&x| x as u8).collect();
    let m = dev.load("cl/isa_formats.cl");
    let (w16, w8) = (dev.upload(&src16), dev.upload(&src8));
    let (wd, wo) = (dev.alloc(2 * n), dev.alloc(16 * n));
    let args = Args::default()
        .ptr(&w16)
        .ptr(&w8)
        .ptr(&wd)
        .ptr(&wo)
        .u32(n as u32)
        .u32(seed);
    let mut q = dev.queue();
    dev.run_ok(
        &mut q,
        &m,
        "buf_d16_hi",
        [n as u32, 1, 1],
        [64, 1, 1],
        0,
        &args.0,
    );
    let out: Vec<u32> = dev.download(&wo, 4 * n);
    let dst: Vec<u16> = dev.download(&wd, n);
    let t = dev.target;
    for i in 0..n {
        let o = old(seed, i);
        assert_eq!(out[4 * i + 3], o, "{t} lane {i} seed");
        // 8-bit SSCALED to f16: the integer value (exact in f16).
        let f16_of = |v: i32| {
            let mut loses = false;
            let h: Half = Double::from_bits((v as f64).to_bits() as u128)
                .convert(&mut loses)
                .value;
            assert!(!loses);
            h.to_bits() as u32
        };
        let want = [
            d16(src16[i] as u32, o, true, sramecc),
            d16(
                f16_of(src8[i] as i8 as i32),
                o.wrapping_add(1),
                true,
                sramecc,
            ),
            d16(src16[i] as u32, o.wrapping_add(2), true, sramecc),
        ];
        assert_eq!(
            &out[4 * i..4 * i + 3],
            &want,
            "{t} sramecc={sramecc} lane {i}: buffer_load_format_d16_hi_x 16 UINT / 8 SSCALED / \
             16 FLOAT (src {:#06x}, {:#04x})",
            src16[i],
            src8[i]
        );
        assert_eq!(
            dst[i],
            (o >> 16) as u16,
            "{t} lane {i}: buffer_store_format_d16_hi_x"
        );
    }
}

#[test]
fn buffer_format_d16_hi_x_loads_and_stores() {
    for dev in devices() {
        check_buf_hi(&dev, true);
    }
    for &(t, v) in TARGETS.iter() {
        check_buf_hi(&Dev::with_config(t, v, 1, false), false);
    }
}

/// An unsigned 10- or 11-bit float (5-bit exponent, bias 15; Vulkan "Unsigned 11-Bit /
/// 10-Bit Floating-Point Numbers") as f64.
fn ufloat(v: u32, width: u32) -> f64 {
    let mb = width - 5;
    let (e, m) = ((v >> mb) as i32 & 0x1F, (v & ((1 << mb) - 1)) as f64);
    match e {
        0 => m * 2f64.powi(-14 - mb as i32),
        31 if m == 0.0 => f64::INFINITY,
        31 => f64::NAN,
        _ => (2f64.powi(mb as i32) + m) * 2f64.powi(e - 15 - mb as i32),
    }
}

fn field(v: u32, sh: u32, w: u32) -> u32 {
    v >> sh & ((1 << w) - 1)
}

fn sext(v: u32, w: u32) -> i32 {
    ((v << (32 - w)) as i32) >> (32 - w)
}

#[test]
fn packed_11_11_10_and_10_11_11_formats() {
    let n = 256usize;
    let mut src = rand_u32(n, 0x11_11_10);
    // Zero, the largest finite values, infinities and a NaN of each field.
    src[..5].copy_from_slice(&[0, 0xF7BD_EF7B, 0xF800_7C00 | 0x1F << 16, 0xFFFF_FFFF, 0x3E0]);
    for dev in devices() {
        let m = dev.load("cl/isa_formats.cl");
        let (ws, wo) = (dev.upload(&src), dev.alloc(12 * 4 * n));
        let args = Args::default().ptr(&ws).ptr(&wo).u32(n as u32);
        let mut q = dev.queue();
        dev.run_ok(
            &mut q,
            &m,
            "packed_fmt",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let out: Vec<u32> = dev.download(&wo, 12 * n);
        let t = dev.target;
        // 11_11_10: X 10 bits at 0, Y 11 at 10, Z 11 at 21; 10_11_11: 11 at 0, 11 at 11,
        // 10 at 22.
        let l1: [(u32, u32); 3] = [(0, 10), (10, 11), (21, 11)];
        let l2: [(u32, u32); 3] = [(0, 11), (11, 11), (22, 10)];
        for (i, &v) in src.iter().enumerate() {
            let o = &out[12 * i..12 * i + 12];
            for c in 0..3 {
                let (sh, w) = l1[c];
                let f = field(v, sh, w);
                let want = ufloat(f, w) as f32;
                let got = f32::from_bits(o[c]);
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{t} {v:#010x} 11_11_10 FLOAT component {c}: got {got}, want {want}"
                );
                assert_eq!(o[3 + c], f, "{t} {v:#010x} 11_11_10 UINT component {c}");
                assert_eq!(
                    o[6 + c],
                    (sext(f, w) as f32).to_bits(),
                    "{t} {v:#010x} 11_11_10 SSCALED component {c}"
                );
                let (sh, w) = l2[c];
                assert_eq!(
                    o[9 + c] as i32,
                    sext(field(v, sh, w), w),
                    "{t} {v:#010x} 10_11_11 SINT component {c}"
                );
            }
        }
    }
}

/// A VOP3 output modifier on an f16 transcendental is not modelled: the queue faults
/// naming it rather than writing an unscaled result.
#[test]
fn f16_transcendental_with_output_modifier_faults() {
    for dev in devices() {
        let m = dev.load("cl/isa_formats.cl");
        let (wh, wo) = (dev.upload(&[0x3C00u16; 64]), dev.alloc(64 * 4));
        let mut q = dev.queue();
        let f = dev
            .run(&mut q, &m, "rcp_f16_omod", [64, 1, 1], [64, 1, 1], 0, &{
                Args::default().ptr(&wh).ptr(&wo).0
            })
            .expect_err("omod on v_rcp_f16 must fault");
        assert!(
            f.reason.contains("f16 output modifier is not modelled"),
            "{}: {}",
            dev.target,
            f.reason
        );
    }
}

/// Inputs of the transcendentals: both signs, tiny to large magnitudes, zeros and the
/// special values.
fn transcendental_inputs(n: usize) -> (Vec<f32>, Vec<f64>, Vec<u16>) {
    let r = rand_u32(3 * n, 0x7A4C);
    let mut x: Vec<f32> = (0..n)
        .map(|i| {
            let e = (r[i] >> 23) % 40;
            f32::from_bits((r[i] & 0x807F_FFFF) | (107 + e) << 23)
        })
        .collect();
    let mut xd: Vec<f64> = (0..n)
        .map(|i| {
            let m = (r[n + i] as u64) << 20 | r[i] as u64 >> 12;
            f64::from_bits(
                m | (1000 + (r[n + i] as u64 >> 24) % 48) << 52 | (r[i] as u64 >> 31) << 63,
            )
        })
        .collect();
    let mut xh: Vec<u16> = (0..n)
        .map(|i| (r[2 * n + i] as u16 & 0x83FF) | ((1 + (r[2 * n + i] >> 16) % 29) as u16) << 10)
        .collect();
    let sp = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        0.25,
        -0.5,
        1.0,
    ];
    for (k, &v) in sp.iter().enumerate() {
        x[k] = v;
        xd[k] = v as f64;
        xh[k] = half::f16::from_f32(v).to_bits();
    }
    (x, xd, xh)
}

/// `got` is within `ulps` units in the last place (of f32) of the exact value `want`.
fn near32(got: f32, want: f64, ulps: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    // Beyond the f32 range: the infinity of its sign.
    if (want as f32).is_infinite() || got.is_infinite() {
        return got == want as f32;
    }
    let ulp = 2f64.powi((want.abs().max(f32::MIN_POSITIVE as f64)).log2().floor() as i32 - 23);
    (got as f64 - want).abs() <= ulps * ulp
}

/// The transcendentals give the same value in all 16 MODE round settings (the emulator's
/// defined behaviour: the ISA bounds their error, not their rounding direction), and that
/// value is within the documented accuracy of the exact result: v_rcp/v_sqrt f32/f64
/// correctly rounded, v_exp/v_log/v_rsq f32 within 1 ULP, sin/cos of revolutions within
/// 2^-20 absolute for |x| <= 1; the f16 forms the exact result rounded once to f16
/// (0.5 ULP, inside LLVM's 0.51 ULP), high half zero.
#[test]
fn transcendentals_keep_their_value_in_every_round_mode() {
    let n = 128usize;
    let (x, xd, xh) = transcendental_inputs(n);
    for dev in devices() {
        let m = dev.load("cl/isa_formats.cl");
        let (wx, wd, wh) = (dev.upload(&x), dev.upload(&xd), dev.upload(&xh));
        let wo = dev.alloc(20 * 4 * n);
        let mut q = dev.queue();
        let t = dev.target;
        let mut base: Option<Vec<u32>> = None;
        for rm in 0..16u32 {
            let args = Args::default()
                .ptr(&wx)
                .ptr(&wd)
                .ptr(&wh)
                .ptr(&wo)
                .u32(0xF0 | rm);
            dev.run_ok(
                &mut q,
                &m,
                "transcendentals",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            );
            let out: Vec<u32> = dev.download(&wo, 20 * n);
            match &base {
                Some(b) => assert_eq!(&out, b, "{t}: MODE round field {rm:#x} changed a result"),
                None => base = Some(out),
            }
        }
        let out = base.expect("ran");
        for i in 0..n {
            let o = &out[20 * i..20 * i + 20];
            let a = x[i];
            let f = |k: usize| f32::from_bits(o[k]);
            let ad = a as f64;
            let same = |g: f32, w: f32| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
            assert!(same(f(2), 1.0 / a), "{t} v_rcp_f32({a})");
            assert!(same(f(4), a.sqrt()), "{t} v_sqrt_f32({a})");
            assert!(
                near32(f(0), ad.exp2(), 1.0),
                "{t} v_exp_f32({a}) = {}",
                f(0)
            );
            assert!(
                near32(f(1), ad.log2(), 1.0),
                "{t} v_log_f32({a}) = {}",
                f(1)
            );
            assert!(
                near32(f(3), 1.0 / ad.sqrt(), 1.0),
                "{t} v_rsq_f32({a}) = {}",
                f(3)
            );
            if a.abs() <= 1.0 {
                let tau = std::f64::consts::TAU;
                assert!(
                    (f(5) as f64 - (ad * tau).sin()).abs() < 2f64.powi(-20),
                    "{t} sin({a})"
                );
                assert!(
                    (f(6) as f64 - (ad * tau).cos()).abs() < 2f64.powi(-20),
                    "{t} cos({a})"
                );
            }
            let d = xd[i];
            let g = |k: usize| f64::from_bits(o[7 + 2 * k] as u64 | (o[8 + 2 * k] as u64) << 32);
            let same64 = |g: f64, w: f64| g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan());
            assert!(same64(g(0), 1.0 / d), "{t} v_rcp_f64({d})");
            assert!(same64(g(2), d.sqrt()), "{t} v_sqrt_f64({d})");
            let r = g(1);
            if d > 0.0 && d.is_finite() {
                assert!((r * r * d - 1.0).abs() < 1e-15, "{t} v_rsq_f64({d}) = {r}");
            } else {
                assert!(same64(r, 1.0 / d.sqrt()), "{t} v_rsq_f64({d}) = {r}");
            }
            let h = half::f16::from_bits(xh[i]).to_f64();
            let fns: [fn(f64) -> f64; 7] = [
                |v| 1.0 / v,
                f64::sqrt,
                |v| 1.0 / v.sqrt(),
                f64::log2,
                f64::exp2,
                |v| (v * std::f64::consts::TAU).sin(),
                |v| (v * std::f64::consts::TAU).cos(),
            ];
            for (k, fun) in fns.iter().enumerate() {
                let exact = fun(h);
                let mut loses = false;
                let want: Half = Double::from_bits(exact.to_bits() as u128)
                    .convert(&mut loses)
                    .value;
                let got = o[13 + k];
                assert_eq!(got >> 16, 0, "{t} f16 op {k} of {h}: high half");
                let ok = got == want.to_bits() as u32
                    || (want.is_nan() && (got & 0x7C00 == 0x7C00) && got & 0x3FF != 0);
                assert!(
                    ok,
                    "{t} f16 op {k} of {h}: got {got:#06x}, want {:#06x}",
                    want.to_bits()
                );
            }
        }
    }
}

/// (signed integer significand, exponent) of `v` with `frac` fraction bits: v = m * 2^(e -
/// frac), e the exponent of v but at least `emin` (denormals).
fn parts(v: f64, emin: i32, frac: i32) -> (i128, i32) {
    if v == 0.0 {
        return (0, emin);
    }
    let e = (v.abs().log2().floor() as i32).max(emin);
    let m = v * 2f64.powi(frac - e);
    assert_eq!(m.fract(), 0.0, "{v} has more than {frac} fraction bits");
    (m as i128, e)
}

/// `v` (an integer count of 2^-k units) shifted by `sh` (left when positive), rounding
/// toward zero (`floor` false) or toward -inf (`floor` true).
fn shift(v: i128, sh: i32, floor: bool) -> i128 {
    if sh >= 0 {
        v << sh
    } else if floor {
        v >> (-sh).min(127)
    } else {
        let mag = v.abs() >> (-sh).min(127);
        if v < 0 {
            -mag
        } else {
            mag
        }
    }
}

/// MMA-Sim's CDNA3 fused dot-add (firmware-notes/isa-gfx9.md, MFMA), written here in
/// integer arithmetic: per group of `group` k, each product aligned to the largest product
/// exponent and truncated toward zero to 24 fractional bits, the sum floored to 31
/// fractional bits and C to 24 at the larger of that exponent and C's, the total rounded
/// to f32 and carried into the next group. Inputs: exact values with `frac` fraction bits
/// and smallest normal exponent `emin`.
fn fused_ref(a: &[f64], b: &[f64], emin: i32, frac: i32, group: usize, c: f32) -> f32 {
    let mut sum = c;
    for g in (0..a.len()).step_by(group) {
        // Product = P * 2^(e - 2 frac).
        let prods: Vec<(i128, i32)> = (g..g + group)
            .map(|k| {
                let (ma, ea) = parts(a[k], emin, frac);
                let (mb, eb) = parts(b[k], emin, frac);
                (ma * mb, ea + eb)
            })
            .filter(|p| p.0 != 0)
            .collect();
        let (mc, ec) = parts(sum as f64, -126, 23);
        let emax = prods.iter().map(|p| p.1).max();
        let (s, mx) = match emax {
            Some(emax) => {
                // Terms in units of 2^(emax - 24), truncated.
                let s: i128 = prods
                    .iter()
                    .map(|&(p, e)| shift(p, e - 2 * frac - emax + 24, false))
                    .sum();
                let mx = if mc == 0 { emax } else { emax.max(ec) };
                // In units of 2^(mx - 31), floored.
                (shift(s, emax - mx + 7, true), mx)
            }
            None => (0, ec),
        };
        // C = mc * 2^(ec - 23): in units of 2^(mx - 24), floored, then of 2^(mx - 31).
        let cterm = shift(mc, ec - mx + 1, true);
        sum = ((s + (cterm << 7)) as f64 * 2f64.powi(mx - 31)) as f32;
    }
    sum
}

/// gfx942 xf32: A and B truncated to 10 mantissa bits, groups of four.
/// Runs MFMA `kernel` (arguments A, B, C, D) on one wave: uploads A, B and C, returns D
/// (as many f32 as C).
fn run_mfma<A: bytemuck::Pod, B: bytemuck::Pod>(
    dev: &Dev,
    m: &Module,
    kernel: &str,
    a: &[A],
    b: &[B],
    c: &[f32],
) -> Vec<f32> {
    let mut q = dev.queue();
    let (wa, wb, wc) = (dev.upload(a), dev.upload(b), dev.upload(c));
    let wd = dev.alloc(c.len() * 4);
    let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc).ptr(&wd);
    dev.run_ok(&mut q, m, kernel, [64, 1, 1], [64, 1, 1], 0, &args.0);
    dev.download(&wd, c.len())
}

fn xf32_ref(a: &[f32], b: &[f32], c: f32) -> f32 {
    let tf = |x: &f32| f32::from_bits(x.to_bits() & !0x1FFF) as f64;
    let (a, b): (Vec<f64>, Vec<f64>) = (a.iter().map(tf).collect(), b.iter().map(tf).collect());
    fused_ref(&a, &b, -126, 23, 4, c)
}

#[test]
fn xf32_mfma_on_gfx942() {
    let dev = Dev::new("gfx942", 90402);
    assert!(
        test_kernels::toolchain_available(),
        "clang-19 and ld.lld-19 are needed"
    );
    let m = dev.load("cl/isa_formats.cl");
    for (kernel, mm, k) in [("xf32_16x16x8", 16usize, 8usize), ("xf32_32x32x4", 32, 4)] {
        let nn = mm;
        let dregs = mm * nn / 64;
        // Full 23-bit mantissas (the truncation shows), exponents -8..8, both signs.
        let gen = |seed: u32, len: usize| -> Vec<f32> {
            rand_u32(len, seed)
                .iter()
                .map(|&r| f32::from_bits((r & 0x807F_FFFF) | (119 + (r >> 23) % 17) << 23))
                .collect()
        };
        let (av, bv, cv) = (gen(0xA, 128), gen(0xB, 128), gen(0xC, 64 * dregs));
        let d = run_mfma(&dev, &m, kernel, &av, &bv, &cv);
        // A[i][k] in lane i + M (k / 2), register k % 2 (a[2 lane + reg]); B likewise.
        let g = 64 / nn;
        let mut differs = 0;
        for i in 0..mm {
            for j in 0..nn {
                let arow: Vec<f32> = (0..k)
                    .map(|kk| av[2 * (i + mm * (kk / 2)) + kk % 2])
                    .collect();
                let bcol: Vec<f32> = (0..k)
                    .map(|kk| bv[2 * (j + nn * (kk / 2)) + kk % 2])
                    .collect();
                let reg = 4 * ((i / 4) / g) + i % 4;
                let lane = j + nn * ((i / 4) % g);
                let c = cv[lane * dregs + reg];
                let want = xf32_ref(&arow, &bcol, c);
                let got = d[lane * dregs + reg];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{kernel} D[{i}][{j}]: got {got}, want {want}"
                );
                let naive = (0..k).fold(c, |s, kk| arow[kk].mul_add(bcol[kk], s));
                differs += usize::from(naive.to_bits() != got.to_bits());
            }
        }
        // The full-precision f32 chain gives other values: the xf32 reduction is visible.
        assert!(
            differs > mm * nn / 2,
            "{kernel}: only {differs} results differ from f32 fma"
        );
    }
}

/// MMA-Sim's CDNA2 f16/bf16 accumulation (firmware-notes/isa-gfx9.md, MFMA), written here in
/// f64 arithmetic rounded to f32 after each operation (exact, then one rounding): inputs
/// below `tiny` (and C below 2^-126) read as +0; per group, the products summed as a
/// balanced tree, each partial sum below 2^-126 a zero of its sign; the group sum added to
/// the running sum, flushed likewise.
fn cdna2_ref(a: &[f64], b: &[f64], tiny: f64, group: usize, c: f32) -> f32 {
    let min = 2f64.powi(-126);
    let flush = |v: f32| {
        if (v.abs() as f64) < min {
            0.0f32.copysign(v)
        } else {
            v
        }
    };
    fn tree(p: &[f32], flush: &dyn Fn(f32) -> f32) -> f32 {
        if p.len() == 1 {
            return flush(p[0]);
        }
        let h = p.len() / 2;
        flush((tree(&p[..h], flush) as f64 + tree(&p[h..], flush) as f64) as f32)
    }
    let fin = |v: f64| if v.abs() < tiny { 0.0 } else { v };
    let mut sum = if (c.abs() as f64) < min { 0.0 } else { c };
    for g in (0..a.len()).step_by(group) {
        let p: Vec<f32> = (g..g + group)
            .map(|k| {
                let x = fin(a[k]) * fin(b[k]);
                // The product plus +0: a zero product is +0.
                if x == 0.0 {
                    0.0
                } else {
                    x as f32
                }
            })
            .collect();
        sum = flush((sum as f64 + tree(&p, &flush) as f64) as f32);
    }
    sum
}

/// f16 and bf16 MFMA accumulate as MMA-Sim measured: CDNA3 (gfx942) a fused dot-add over
/// groups of min(8, K) against [`fused_ref`], CDNA2 (gfx90a) pairwise sums of 4 (2 for the
/// older bf16 forms) with denormal flushing against [`cdna2_ref`] — not an f32 fma chain.
/// Random full-mantissa inputs, some f16 denormals among them.
#[test]
fn f16_bf16_mfma_sum_as_mma_sim() {
    for dev in devices() {
        let m = dev.load("cl/isa_formats.cl");
        let cdna2 = dev.target == "gfx90a";
        // (kernel, M, N, K, blocks, bf16)
        let mut cases = vec![
            ("f16_16x16x16", 16usize, 16usize, 16usize, 1usize, false),
            ("f16_4x4x4", 4, 4, 4, 16, false),
            ("bf16_32x32x8", 32, 32, 8, 1, true),
        ];
        if cdna2 {
            cases.push(("bf16_32x32x4", 32, 32, 4, 1, true));
        }
        for (kernel, mm, nn, k, blocks, bf16) in cases {
            let dregs = blocks * mm * nn / 64;
            let e = k * mm * blocks / 64; // inputs per lane
                                          // Exponents -6..6 (f16: one value in 16 denormal), both signs, full mantissas.
            let gen = |seed: u32| -> Vec<u16> {
                rand_u32(64 * e, seed)
                    .iter()
                    .map(|&r| {
                        if bf16 {
                            (r as u16 & 0x807F) | ((121 + (r >> 16) % 13) as u16) << 7
                        } else if (r >> 28) == 0 {
                            r as u16 & 0x83FF
                        } else {
                            (r as u16 & 0x83FF) | ((9 + (r >> 16) % 13) as u16) << 10
                        }
                    })
                    .collect()
            };
            let val = |h: u16| -> f64 {
                if bf16 {
                    f32::from_bits((h as u32) << 16) as f64
                } else {
                    half::f16::from_bits(h).to_f64()
                }
            };
            let (av, bv) = (gen(0xF16A), gen(0xF16B));
            let cv: Vec<f32> = rand_u32(64 * dregs, 0xC)
                .iter()
                .map(|&r| f32::from_bits((r & 0x807F_FFFF) | (124 + (r >> 23) % 7) << 23))
                .collect();
            let d = run_mfma(&dev, &m, kernel, &av, &bv, &cv);
            let (g, ke) = (64 / nn, k / e);
            let (emin, frac) = if bf16 { (-126, 7) } else { (-14, 10) };
            let t = dev.target;
            let mut differs = 0;
            for blk in 0..blocks {
                for i in 0..mm {
                    for j in 0..nn {
                        // A[blk][i][k] in lane i + M (k / E + (K / E) blk), element k % E.
                        let at = |kk: usize| av[e * (i + mm * (kk / e + ke * blk)) + kk % e];
                        let bt = |kk: usize| bv[e * (j + nn * (kk / e + ke * blk)) + kk % e];
                        let arow: Vec<f64> = (0..k).map(|kk| val(at(kk))).collect();
                        let bcol: Vec<f64> = (0..k).map(|kk| val(bt(kk))).collect();
                        let s = blk * mm / 4 + i / 4;
                        let (reg, lane) = (4 * (s / g) + i % 4, j + nn * (s % g));
                        let c = cv[lane * dregs + reg];
                        let want = if cdna2 {
                            let group = if bf16 && e == 2 { 2 } else { 4 };
                            cdna2_ref(&arow, &bcol, 2f64.powi(emin), group, c)
                        } else {
                            fused_ref(&arow, &bcol, emin, frac, k.min(8), c)
                        };
                        let got = d[lane * dregs + reg];
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{t} {kernel} D[{blk}][{i}][{j}]: got {got}, want {want}"
                        );
                        let chain =
                            (0..k).fold(c, |s, kk| (arow[kk] as f32).mul_add(bcol[kk] as f32, s));
                        differs += usize::from(chain.to_bits() != got.to_bits());
                    }
                }
            }
            assert!(
                differs > 0,
                "{t} {kernel}: no result differs from an f32 fma chain"
            );
        }
    }
}

/// An AMD FNUZ 8-bit float (gfx942 FP8 E4M3: `mb` 3, bias 8; BF8 E5M2: `mb` 2, bias 16;
/// 0x80 NaN, no infinities) as f64.
fn fnuz(x: u8, mb: i32, bias: i32) -> f64 {
    if x == 0x80 {
        return f64::NAN;
    }
    let e = ((x & 0x7F) >> mb) as i32;
    let m = (x & ((1 << mb) - 1)) as f64;
    let v = if e == 0 {
        m * 2f64.powi(1 - bias - mb)
    } else {
        (2f64.powi(mb) + m) * 2f64.powi(e - bias - mb)
    };
    if x & 0x80 != 0 {
        -v
    } else {
        v
    }
}

/// MMA-Sim's CDNA3 fp8 fused dot-add in integer arithmetic (firmware-notes/isa-gfx9.md):
/// per group of 16 k, even and odd products each aligned to their largest exponent and
/// truncated to 24 fractional bits, the two sums floored to 24 fractional bits at the
/// larger exponent, their sum floored to 31 at max(that, C's exponent), C floored to 24 or
/// dropped when more than 25 binades below; one rounding to f32 per group.
fn fp8_ref(a: &[f64], b: &[f64], ta: (i32, i32), tb: (i32, i32), c: f32) -> f32 {
    let ((emin_a, fa), (emin_b, fb)) = (ta, tb);
    let mut sum = c;
    for g in (0..a.len()).step_by(16) {
        let half = |first: usize| -> Option<(i128, i32)> {
            let prods: Vec<(i128, i32)> = (g + first..g + 16)
                .step_by(2)
                .map(|k| {
                    let (ma, ea) = parts(a[k], emin_a, fa);
                    let (mb, eb) = parts(b[k], emin_b, fb);
                    (ma * mb, ea + eb)
                })
                .filter(|p| p.0 != 0)
                .collect();
            let emax = prods.iter().map(|p| p.1).max()?;
            // Units of 2^(emax - 24), truncated.
            let s = prods
                .iter()
                .map(|&(p, e)| shift(p, e - fa - fb - emax + 24, false))
                .sum();
            Some((s, emax))
        };
        let (mc, ec) = parts(sum as f64, -126, 23);
        let halves: Vec<(i128, i32)> = [half(0), half(1)].into_iter().flatten().collect();
        let me = halves.iter().map(|h| h.1).max();
        let (s, mx) = match me {
            Some(me) => {
                // Units of 2^(me - 24), floored.
                let s: i128 = halves.iter().map(|&(v, e)| shift(v, e - me, true)).sum();
                let mx = if mc == 0 { me } else { me.max(ec) };
                (shift(s, me - mx + 7, true), mx)
            }
            None => (0, ec),
        };
        let cterm = if mc != 0 && ec >= mx - 25 {
            shift(mc, ec - mx + 1, true)
        } else {
            0
        };
        sum = ((s + (cterm << 7)) as f64 * 2f64.powi(mx - 31)) as f32;
    }
    sum
}

/// gfx942 fp8/bf8 MFMA accumulate as MMA-Sim's CDNA3 fp8 path ([`fp8_ref`]), with C: random
/// bytes (NaN 0x80 excluded), so exponents spread widely and sums truncate.
#[test]
fn fp8_mfma_fused_dot_add_on_gfx942() {
    let dev = Dev::new("gfx942", 90402);
    let m = dev.load("cl/isa_formats.cl");
    let e4m3 = ((1 - 8), 3); // (smallest normal exponent, mantissa bits)
    let e5m2 = ((1 - 16), 2);
    for (kernel, mm, k, ta, tb) in [
        ("fp8_fp8_16x16x32", 16usize, 32usize, e4m3, e4m3),
        ("bf8_fp8_32x32x16", 32, 16, e5m2, e4m3),
    ] {
        let nn = mm;
        let dregs = mm * nn / 64;
        let e = k * mm / 64; // 8 per lane
        let gen = |seed: u32| -> Vec<u8> {
            rand_u32(64 * e, seed)
                .iter()
                .map(|&r| if r as u8 == 0x80 { 0x81 } else { r as u8 })
                .collect()
        };
        let (av, bv) = (gen(0xF8A), gen(0xF8B));
        let cv: Vec<f32> = rand_u32(64 * dregs, 0xC8)
            .iter()
            .map(|&r| f32::from_bits((r & 0x807F_FFFF) | (120 + (r >> 23) % 15) << 23))
            .collect();
        let d = run_mfma(&dev, &m, kernel, &av, &bv, &cv);
        let val = |x: u8, t: (i32, i32)| fnuz(x, t.1, 1 - t.0);
        let g = 64 / nn;
        let mut differs = 0;
        for i in 0..mm {
            for j in 0..nn {
                let arow: Vec<f64> = (0..k)
                    .map(|kk| val(av[e * (i + mm * (kk / e)) + kk % e], ta))
                    .collect();
                let bcol: Vec<f64> = (0..k)
                    .map(|kk| val(bv[e * (j + nn * (kk / e)) + kk % e], tb))
                    .collect();
                let (reg, lane) = (4 * ((i / 4) / g) + i % 4, j + nn * ((i / 4) % g));
                let c = cv[lane * dregs + reg];
                let want = fp8_ref(&arow, &bcol, (ta.0, ta.1), (tb.0, tb.1), c);
                let got = d[lane * dregs + reg];
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{kernel} D[{i}][{j}]: got {got}, want {want}"
                );
                let chain = (0..k).fold(c, |s, kk| (arow[kk] as f32).mul_add(bcol[kk] as f32, s));
                differs += usize::from(chain.to_bits() != got.to_bits());
            }
        }
        assert!(
            differs > 0,
            "{kernel}: no result differs from an f32 fma chain"
        );
    }
}
