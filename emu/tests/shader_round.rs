//! Directed rounding (MODE.FP_ROUND toward +inf, -inf, zero) on the emulated gfx942 and
//! gfx90a: kernels set MODE with `s_setreg` and run f32/f64/f16 arithmetic and conversions;
//! every result is checked against `rustc_apfloat` (a software IEEE implementation that
//! shares no code with the emulator) rounding the same exact operation the same way.

mod shader_common;
use kfd_emu::gpumem::MemWindow;
use shader_common::*;

use rustc_apfloat::ieee::{Double, Half, Single};
use rustc_apfloat::{Float, FloatConvert, Round};

/// MODE.FP_ROUND field value -> direction (LLVM SIDefines.h FP_ROUND_*).
fn dir(field: u32) -> Round {
    match field & 3 {
        0 => Round::NearestTiesToEven,
        1 => Round::TowardPositive,
        2 => Round::TowardNegative,
        _ => Round::TowardZero,
    }
}

/// Runs `kernel` over `n` work-items in wave64 groups with the buffer arguments `bufs`
/// followed by the MODE value `mode`.
fn run_lanes(
    dev: &Dev,
    q: &mut Queue,
    m: &Module,
    kernel: &str,
    bufs: &[&MemWindow],
    mode: u32,
    n: usize,
) {
    let args = bufs.iter().fold(Args::default(), |a, b| a.ptr(b)).u32(mode);
    dev.run_ok(q, m, kernel, [n as u32, 1, 1], [64, 1, 1], 0, &args.0);
}

/// Runs `kernel` over `n` lanes once for each MODE value in `modes` (the last of `bufs`
/// receives `per` values of `T` per lane) and hands `check` the MODE value, the lane and
/// its outputs.
#[allow(clippy::too_many_arguments)]
fn check_lanes<T: bytemuck::Pod + Default + Clone>(
    dev: &Dev,
    q: &mut Queue,
    m: &Module,
    kernel: &str,
    bufs: &[&MemWindow],
    modes: impl IntoIterator<Item = u32>,
    n: usize,
    per: usize,
    mut check: impl FnMut(u32, usize, &[T]),
) {
    let out = bufs.last().expect("an output buffer");
    for md in modes {
        run_lanes(dev, q, m, kernel, bufs, md, n);
        let o: Vec<T> = dev.download(out, per * n);
        for (i, got) in o.chunks_exact(per).enumerate() {
            check(md, i, got);
        }
    }
}

/// MODE bits [7:0]: the round fields, all denormals allowed.
fn mode(sp: u32, dp: u32) -> u32 {
    sp | dp << 2 | 0xF0
}

/// Operands that exercise rounding: random mantissas at exponents from denormal to
/// overflow, cancelling pairs, tiny addends (sticky bits), zeros, infinities and NaNs.
/// `fb` fraction bits, `eb` exponent bits.
fn operands(n: usize, seed: u32, fb: u32, eb: u32) -> [Vec<u64>; 3] {
    let r = rand_u32(6 * n, seed);
    let emax = (1u64 << eb) - 1;
    let bias = emax / 2;
    let mk = |s: u32, e: u64, m: u32, m2: u32| -> u64 {
        let frac = ((m as u64) << 32 | m2 as u64) & ((1 << fb) - 1);
        ((s & 1) as u64) << (fb + eb) | e.min(emax) << fb | frac
    };
    let mut out = [vec![0u64; n], vec![0u64; n], vec![0u64; n]];
    for i in 0..n {
        let w = &r[6 * i..6 * i + 6];
        let e_near = bias + (w[0] as u64 % 8);
        let (ea, eb_, ec) = match i % 8 {
            0 => (w[0] as u64 % emax, w[1] as u64 % emax, w[2] as u64 % emax),
            1 => (e_near, bias + (w[1] as u64 % 5), bias + (w[2] as u64 % 9)),
            2 => (0, w[1] as u64 % 3, 0),
            3 => (emax - 1 - (w[0] as u64 % 2), bias + 1, emax - 1),
            4 => (e_near, e_near, e_near + 1),
            5 => (
                e_near,
                (w[1] as u64 % 2) * bias,
                bias.saturating_sub(fb as u64 + 2),
            ),
            6 => (e_near, bias.saturating_sub(2 * fb as u64), 0),
            _ => (
                if w[0] % 3 == 0 { emax } else { bias },
                if w[1] % 3 == 0 { emax } else { 0 },
                if w[2] % 2 == 0 { emax } else { bias },
            ),
        };
        let a = mk(w[3], ea, w[4], w[5]);
        let mut b = mk(w[4], eb_, w[5], w[3]);
        let c = mk(w[5], ec, w[3], w[4]);
        if i % 8 == 4 {
            // b = -a with its last bits changed: massive cancellation.
            b = (a ^ 1 << (fb + eb)) ^ (w[1] as u64 & 7);
        }
        if i % 8 == 5 && w[1] % 4 == 0 {
            b = 0;
        }
        out[0][i] = a;
        out[1][i] = b;
        out[2][i] = c;
    }
    out
}

fn same<F: Float>(got: u128, want: F, what: &str) {
    if want.is_nan() {
        assert!(F::from_bits(got).is_nan(), "{what}: got {got:#x}, want NaN");
    } else {
        assert_eq!(
            got,
            want.to_bits(),
            "{what}: got {got:#x}, want {:#x}",
            want.to_bits()
        );
    }
}

#[test]
fn f32_arithmetic_and_conversions_round_in_every_direction() {
    let n = 512usize;
    let [a, b, c] = operands(n, 0x5eed, 23, 8);
    let a: Vec<u32> = a.iter().map(|&x| x as u32).collect();
    let b: Vec<u32> = b.iter().map(|&x| x as u32).collect();
    let c: Vec<u32> = c.iter().map(|&x| x as u32).collect();
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_round.cl");
        let (wa, wb, wc, wo) = (
            dev.upload(&a),
            dev.upload(&b),
            dev.upload(&c),
            dev.alloc(8 * n * 4),
        );
        let modes = (0..16).map(|md| mode(md & 3, md >> 2));
        let bufs = [&wa, &wb, &wc, &wo];
        check_lanes(
            &dev,
            &mut q,
            &m,
            "round_f32",
            &bufs,
            modes,
            n,
            8,
            |md, i, o: &[u32]| {
                let rm = dir(md);
                let (x, y, z) = (
                    Single::from_bits(a[i] as u128),
                    Single::from_bits(b[i] as u128),
                    Single::from_bits(c[i] as u128),
                );
                let e = (c[i] % 64) as i32 - 32;
                let t = |op: &str| {
                    format!(
                        "{} mode {:#x} lane {i} {op}({:#x}, {:#x}, {:#x})",
                        dev.target,
                        md & 0xF,
                        a[i],
                        b[i],
                        c[i]
                    )
                };
                let got = |k: usize| o[k] as u128;
                same(got(0), x.add_r(y, rm).value, &t("add"));
                same(got(1), x.sub_r(y, rm).value, &t("sub"));
                same(got(2), x.mul_r(y, rm).value, &t("mul"));
                same(got(3), x.mul_add_r(y, z, rm).value, &t("fma"));
                same(got(4), x.mul_add_r(y, z, rm).value, &t("fmac"));
                let si = Single::from_i128_r(a[i] as i32 as i128, rm).value;
                same(got(5), si, &t("cvt_f32_i32"));
                let su = Single::from_u128_r(a[i] as u128, rm).value;
                same(got(6), su, &t("cvt_f32_u32"));
                same(got(7), x.scalbn_r(e, rm), &t("ldexp"));
            },
        );
    }
}

#[test]
fn f64_arithmetic_rounds_in_every_direction() {
    let n = 512usize;
    let [a, b, c] = operands(n, 0xd0b1e, 52, 11);
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_round.cl");
        let (wa, wb, wc, wo) = (
            dev.upload(&a),
            dev.upload(&b),
            dev.upload(&c),
            dev.alloc(5 * n * 8),
        );
        // v_cvt_f32_f64 in the same kernel is modelled when both fields agree.
        let modes = (0..4).map(|f| mode(f, f));
        let bufs = [&wa, &wb, &wc, &wo];
        check_lanes(
            &dev,
            &mut q,
            &m,
            "round_f64",
            &bufs,
            modes,
            n,
            5,
            |md, i, o: &[u64]| {
                let rm = dir(md >> 2);
                let (x, y, z) = (
                    Double::from_bits(a[i] as u128),
                    Double::from_bits(b[i] as u128),
                    Double::from_bits(c[i] as u128),
                );
                let e = (c[i] % 128) as i32 - 64;
                let t = |op: &str| {
                    format!(
                        "{} round {} lane {i} {op}({:#x}, {:#x}, {:#x})",
                        dev.target,
                        md & 3,
                        a[i],
                        b[i],
                        c[i]
                    )
                };
                let got = |k: usize| o[k] as u128;
                same(got(0), x.add_r(y, rm).value, &t("add_f64"));
                same(got(1), x.mul_r(y, rm).value, &t("mul_f64"));
                same(got(2), x.mul_add_r(y, z, rm).value, &t("fma_f64"));
                same(got(3), x.scalbn_r(e, rm), &t("ldexp_f64"));
                let mut lost = false;
                let s: Single = x.convert_r(rm, &mut lost).value;
                same(got(4) & 0xFFFF_FFFF, s, &t("cvt_f32_f64"));
            },
        );
    }
}

#[test]
fn f16_arithmetic_and_f32_to_f16_round_by_the_f64_f16_field() {
    let n = 512usize;
    let [a, b, c] = operands(n, 0xf16, 10, 5);
    let h = |v: &[u64]| v.iter().map(|&x| x as u16).collect::<Vec<u16>>();
    let (a, b, c) = (h(&a), h(&b), h(&c));
    let [w, _, _] = operands(n, 0xf32, 23, 8);
    // f32 values around the f16 range (exponents 100..=150 plus the generator's extremes).
    let w: Vec<u32> = w
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let x = x as u32;
            if i % 2 == 0 {
                (x & 0x807F_FFFF) | (100 + (x >> 3) % 51) << 23
            } else {
                x
            }
        })
        .collect();
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_round.cl");
        let (wa, wb, wc, ww, wo) = (
            dev.upload(&a),
            dev.upload(&b),
            dev.upload(&c),
            dev.upload(&w),
            dev.alloc(5 * n * 2),
        );
        let modes = (0..16).map(|md| mode(md & 3, md >> 2));
        let bufs = [&wa, &wb, &wc, &ww, &wo];
        check_lanes(
            &dev,
            &mut q,
            &m,
            "round_f16",
            &bufs,
            modes,
            n,
            5,
            |md, i, o: &[u16]| {
                let rm = dir(md >> 2);
                let (x, y, z) = (
                    Half::from_bits(a[i] as u128),
                    Half::from_bits(b[i] as u128),
                    Half::from_bits(c[i] as u128),
                );
                let t = |op: &str| {
                    format!(
                        "{} mode {:#x} lane {i} {op}({:#x}, {:#x}, {:#x}, {:#x})",
                        dev.target,
                        md & 0xF,
                        a[i],
                        b[i],
                        c[i],
                        w[i]
                    )
                };
                let got = |k: usize| o[k] as u128;
                same(got(0), x.add_r(y, rm).value, &t("add_f16"));
                same(got(1), x.sub_r(y, rm).value, &t("sub_f16"));
                same(got(2), x.mul_r(y, rm).value, &t("mul_f16"));
                same(got(3), x.mul_add_r(y, z, rm).value, &t("fma_f16"));
                let mut lost = false;
                let hw: Half = Single::from_bits(w[i] as u128)
                    .convert_r(rm, &mut lost)
                    .value;
                same(got(4), hw, &t("cvt_f16_f32"));
            },
        );
    }
}

#[test]
fn packed_f32_rounds_in_every_direction() {
    let n = 256usize;
    let [a, b, c] = operands(2 * n, 0x9acc, 23, 8);
    let w = |v: &[u64]| v.iter().map(|&x| x as u32).collect::<Vec<u32>>();
    let (a, b, c) = (w(&a), w(&b), w(&c));
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_round.cl");
        let (wa, wb, wc, wo) = (
            dev.upload(&a),
            dev.upload(&b),
            dev.upload(&c),
            dev.alloc(6 * n * 4),
        );
        for sp in 0..4 {
            run_lanes(
                &dev,
                &mut q,
                &m,
                "round_pk_f32",
                &[&wa, &wb, &wc, &wo],
                mode(sp, 0),
                n,
            );
            let o: Vec<u32> = dev.download(&wo, 6 * n);
            let rm = dir(sp);
            let f = |v: u32| Single::from_bits(v as u128);
            for i in 0..n {
                let (x, y, z) = (
                    [f(a[2 * i]), f(a[2 * i + 1])],
                    [f(b[2 * i]), f(b[2 * i + 1])],
                    [f(c[2 * i]), f(c[2 * i + 1])],
                );
                let t = |op: &str| format!("{} round {sp} elem {i} {op}", dev.target);
                let got = |k: usize| o[6 * i + k] as u128;
                for h in 0..2 {
                    same(got(h), x[h].mul_add_r(y[h], z[h], rm).value, &t("pk_fma"));
                    same(got(2 + h), x[h].mul_r(y[h], rm).value, &t("pk_mul"));
                }
                same(got(4), x[1].add_r(y[0], rm).value, &t("pk_add lo"));
                same(got(5), x[0].add_r(y[1], rm).value, &t("pk_add hi"));
            }
        }
    }
}

#[test]
fn packed_f16_rounds_by_the_f64_f16_field() {
    let n = 256usize;
    let [a, b, c] = operands(2 * n, 0x9a16, 10, 5);
    let w = |v: &[u64]| -> Vec<u32> {
        (0..n)
            .map(|i| v[2 * i] as u32 & 0xFFFF | (v[2 * i + 1] as u32 & 0xFFFF) << 16)
            .collect()
    };
    let (a, b, c) = (w(&a), w(&b), w(&c));
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_round.cl");
        let (wa, wb, wc, wo) = (
            dev.upload(&a),
            dev.upload(&b),
            dev.upload(&c),
            dev.alloc(3 * n * 4),
        );
        for dp in 0..4 {
            run_lanes(
                &dev,
                &mut q,
                &m,
                "round_pk_f16",
                &[&wa, &wb, &wc, &wo],
                mode(0, dp),
                n,
            );
            let o: Vec<u32> = dev.download(&wo, 3 * n);
            let rm = dir(dp);
            let h = |v: u32, k: usize| Half::from_bits((v >> (16 * k) & 0xFFFF) as u128);
            for i in 0..n {
                let t = |op: &str| format!("{} round {dp} elem {i} {op}", dev.target);
                let got = |j: usize, k: usize| (o[3 * i + j] >> (16 * k) & 0xFFFF) as u128;
                for k in 0..2 {
                    let (x, y, z) = (h(a[i], k), h(b[i], k), h(c[i], k));
                    same(got(0, k), x.mul_add_r(y, z, rm).value, &t("pk_fma_f16"));
                    same(got(1, k), x.mul_r(y, rm).value, &t("pk_mul_f16"));
                    let sw = h(b[i], 1 - k);
                    same(got(2, k), x.add_r(sw, rm).value, &t("pk_add_f16"));
                }
            }
        }
    }
}

/// DPP (`v_add_f32_dpp row_shr:1`) and SDWA (`v_add_f16_sdwa` on selected halves) forms
/// round like their VOP3 forms.
#[test]
fn dpp_and_sdwa_forms_round_in_every_direction() {
    let n = 256usize;
    let [a, b, _] = operands(n, 0xd99, 23, 8);
    let [h, g, _] = operands(2 * n, 0x5d3a, 10, 5);
    let (a, b): (Vec<u32>, Vec<u32>) = (
        (0..n)
            .map(|i| a[i] as u32 & 0xFFFF_0000 | h[2 * i] as u32 & 0xFFFF)
            .collect(),
        (0..n).map(|i| b[i] as u32).collect(),
    );
    // The f16 views: a's high half is an f16 from the f16 generator, b's low half too.
    let a: Vec<u32> = (0..n)
        .map(|i| a[i] & 0xFFFF | (g[2 * i] as u32) << 16)
        .collect();
    let b16: Vec<u32> = (0..n)
        .map(|i| b[i] & 0xFFFF_0000 | g[2 * i + 1] as u32 & 0xFFFF)
        .collect();
    let c: Vec<u32> = rand_u32(n, 0x5eed5);
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_round.cl");
        let (wa, wb, wc, wo) = (
            dev.upload(&a),
            dev.upload(&b16),
            dev.upload(&c),
            dev.alloc(2 * n * 4),
        );
        for md in [0u32, 0x5, 0xA, 0xF, 0x3, 0xC] {
            let (sp, dp) = (md & 3, md >> 2);
            run_lanes(
                &dev,
                &mut q,
                &m,
                "round_dpp_sdwa",
                &[&wa, &wb, &wc, &wo],
                mode(sp, dp),
                n,
            );
            let o: Vec<u32> = dev.download(&wo, 2 * n);
            for i in 0..n {
                let t = |op: &str| format!("{} mode {md:#x} lane {i} {op}", dev.target);
                let src = if i % 16 == 0 { 0 } else { a[i - 1] };
                let want = Single::from_bits(src as u128)
                    .add_r(Single::from_bits(b16[i] as u128), dir(sp))
                    .value;
                same(o[2 * i] as u128, want, &t("v_add_f32_dpp"));
                let x = Half::from_bits((a[i] >> 16) as u128);
                let y = Half::from_bits((b16[i] & 0xFFFF) as u128);
                same(
                    (o[2 * i + 1] >> 16) as u128,
                    x.add_r(y, dir(dp)).value,
                    &t("v_add_f16_sdwa"),
                );
                assert_eq!(o[2 * i + 1] & 0xFFFF, c[i] & 0xFFFF, "{} preserved", t(""));
            }
        }
    }
}

/// Float-to-integer conversions and `v_frexp_exp_i32_f32` return integers: MODE's f32
/// output-denormal flush (FP_DENORM[5:4] = 0) must not zero them (it did: every result
/// below 2^23 read as a denormal bit pattern).
#[test]
fn integer_results_are_not_flushed_as_denormals() {
    let n = 64usize;
    let x: Vec<f32> = (0..n)
        .map(|i| (i as f32 * 37.25 - 900.0) * if i % 7 == 0 { 1e5 } else { 1.0 })
        .collect();
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_round.cl");
        let (wx, wo) = (dev.upload(&x), dev.alloc(3 * n * 4));
        for mode in [0xF0u32, 0x00, 0x03] {
            run_lanes(&dev, &mut q, &m, "cvt_int_flush", &[&wx, &wo], mode, n);
            let o: Vec<u32> = dev.download(&wo, 3 * n);
            for i in 0..n {
                let t = format!("{} mode {mode:#x} lane {i} ({})", dev.target, x[i]);
                assert_eq!(o[3 * i] as i32, x[i] as i32, "{t} cvt_i32");
                assert_eq!(o[3 * i + 1], x[i] as u32, "{t} cvt_u32");
                let e = if x[i] == 0.0 {
                    0
                } else {
                    x[i].abs().log2().floor() as i32 + 1
                };
                assert_eq!(o[3 * i + 2] as i32, e, "{t} frexp_exp");
            }
        }
    }
}

/// The kernel descriptor's RSRC1 FLOAT_ROUND_MODE_32 [13:12] / _16_64 [15:14] (and
/// FLOAT_DENORM_MODE [19:16]) give the waves' initial MODE.
#[test]
fn kernel_descriptor_round_mode_sets_the_initial_mode() {
    let n = 128usize;
    let [a, b, _] = operands(n, 0x4d0, 23, 8);
    let [c, d, _] = operands(n, 0x4d1, 52, 11);
    let (a, b): (Vec<u32>, Vec<u32>) = (
        a.iter().map(|&x| x as u32).collect(),
        b.iter().map(|&x| x as u32).collect(),
    );
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_round.cl");
        // f32 toward zero, f64 toward -inf, all denormals allowed.
        m.patch_rsrc1("round_kd", |r| {
            (r & !(0xFF << 12)) | 3 << 12 | 2 << 14 | 3 << 16 | 3 << 18
        });
        let (wa, wb, wc, wd) = (
            dev.upload(&a),
            dev.upload(&b),
            dev.upload(&c),
            dev.upload(&d),
        );
        let (wo, wod) = (dev.alloc(3 * n * 4), dev.alloc(n * 8));
        let args = Args::default()
            .ptr(&wa)
            .ptr(&wb)
            .ptr(&wc)
            .ptr(&wd)
            .ptr(&wo)
            .ptr(&wod);
        dev.run_ok(
            &mut q,
            &m,
            "round_kd",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let o: Vec<u32> = dev.download(&wo, 3 * n);
        let od: Vec<u64> = dev.download(&wod, n);
        for i in 0..n {
            let t = format!("{} lane {i}", dev.target);
            assert_eq!(o[3 * i], 0xFB, "{t} MODE");
            let (x, y) = (
                Single::from_bits(a[i] as u128),
                Single::from_bits(b[i] as u128),
            );
            same(
                o[3 * i + 1] as u128,
                x.add_r(y, Round::TowardZero).value,
                &t,
            );
            same(
                o[3 * i + 2] as u128,
                x.mul_r(y, Round::TowardZero).value,
                &t,
            );
            let (x, y) = (
                Double::from_bits(c[i] as u128),
                Double::from_bits(d[i] as u128),
            );
            same(od[i] as u128, x.add_r(y, Round::TowardNegative).value, &t);
        }
    }
}

/// What the model does not round in a directed mode faults, naming the instruction:
/// `v_fract_f32`, and `v_cvt_f32_f64` when the f32 and f64 fields disagree (which one
/// rounds it is not documented). Nearest-even still runs them. `v_sqrt_f32` (a
/// transcendental, defined by its error bound) gives its nearest-even value in every mode.
#[test]
fn unmodelled_rounding_ops_fault_in_directed_modes() {
    let n = 64usize;
    let x: Vec<f32> = (0..4 * n).map(|i| i as f32 * 0.37 + 0.5).collect();
    for dev in devices() {
        let m = dev.load("cl/isa_round.cl");
        let (wx, wo) = (dev.upload(&x), dev.alloc(8 * n * 8));
        let mut q = dev.queue();
        for md in [mode(0, 0), mode(3, 0), mode(1, 2)] {
            run_lanes(&dev, &mut q, &m, "round_sqrt", &[&wx, &wo], md, n);
            let o: Vec<f32> = dev.download(&wo, n);
            for i in 0..n {
                assert_eq!(
                    o[i],
                    x[i].sqrt(),
                    "{} sqrt lane {i} mode {md:#x}",
                    dev.target
                );
            }
        }
        run_lanes(&dev, &mut q, &m, "round_fract", &[&wx, &wo], mode(0, 0), n);
        let o: Vec<f32> = dev.download(&wo, n);
        for i in 0..n {
            assert_eq!(o[i], x[i] - x[i].floor(), "{} fract lane {i}", dev.target);
        }
        let args = Args::default().ptr(&wx).ptr(&wo).u32(mode(3, 0));
        let f = dev
            .run(
                &mut q,
                &m,
                "round_fract",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            )
            .expect_err("v_fract_f32 toward zero must fault");
        assert!(
            f.reason.contains("v_fract_f32") && f.reason.contains("round mode 0x3"),
            "{}: {}",
            dev.target,
            f.reason
        );
        let mut q = dev.queue();
        let args = Args::default()
            .ptr(&wx)
            .ptr(&wx)
            .ptr(&wx)
            .ptr(&wo)
            .u32(mode(1, 2));
        let f = dev
            .run(
                &mut q,
                &m,
                "round_f64",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            )
            .expect_err("v_cvt_f32_f64 with split round fields must fault");
        assert!(
            f.reason.contains("v_cvt_f32_f64"),
            "{}: {}",
            dev.target,
            f.reason
        );
    }
}

/// `v_fract_f32` / `v_fract_f64` of tiny negative inputs: x - floor(x) rounds to 1.0, but
/// the hardware result is min(that, the largest value below 1.0) (LLVM ConstantFolding
/// `amdgcn_fract`, quoting OpenCL: "The min() operator is there to prevent fract(-small)
/// from returning 1.0"); NaN for NaN and infinities.
#[test]
fn fract_of_tiny_negatives_stays_below_one() {
    let f: Vec<f32> = [
        -1e-10f32,
        -1e-20,
        -5.9e-8,
        -1.5,
        2.75,
        -0.0,
        1e30,
        -3.25e-3,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
    ]
    .into_iter()
    .cycle()
    .take(64)
    .collect();
    let d: Vec<f64> = [
        -1e-20f64,
        -1e-300,
        -1.1e-16,
        -1.5,
        2.75,
        -0.0,
        1e300,
        -3.25e-3,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ]
    .into_iter()
    .cycle()
    .take(64)
    .collect();
    let want32 = |x: f32| {
        let v = x - x.floor();
        if v.is_nan() {
            v
        } else {
            v.min(1.0f32.next_down())
        }
    };
    let want64 = |x: f64| {
        let v = x - x.floor();
        if v.is_nan() {
            v
        } else {
            v.min(1.0f64.next_down())
        }
    };
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_fract.cl");
        let (wf, wd, wfo, wdo) = (
            dev.upload(&f),
            dev.upload(&d),
            dev.alloc(64 * 4),
            dev.alloc(64 * 8),
        );
        let args = Args::default().ptr(&wf).ptr(&wd).ptr(&wfo).ptr(&wdo);
        dev.run_ok(&mut q, &m, "fract", [64, 1, 1], [64, 1, 1], 0, &args.0);
        let fo: Vec<f32> = dev.download(&wfo, 64);
        let dout: Vec<f64> = dev.download(&wdo, 64);
        for i in 0..64 {
            let (w, g) = (want32(f[i]), fo[i]);
            assert!(
                w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan()),
                "{} fract_f32({:e}) = {g:e}, want {w:e}",
                dev.target,
                f[i]
            );
            assert!(g.is_nan() || g < 1.0, "{} fract_f32 {g}", dev.target);
            let (w, g) = (want64(d[i]), dout[i]);
            assert!(
                w.to_bits() == g.to_bits() || (w.is_nan() && g.is_nan()),
                "{} fract_f64({:e}) = {g:e}, want {w:e}",
                dev.target,
                d[i]
            );
        }
        assert_eq!(fo[0], 1.0f32.next_down(), "{}", dev.target);
    }
}
