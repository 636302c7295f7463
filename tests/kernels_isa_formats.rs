//! Packed buffer formats, D16 forms, transcendentals under directed rounding and xf32 MFMA,
//! through the public API on the emulated MI300X (gfx942) and MI250X (gfx90a) — presets
//! with SRAM ECC on, so D16 loads zero the other half. Expected values are computed on the
//! CPU here; the exhaustive checks (SRAM ECC off too, every format) are in
//! `emu/tests/shader_formats.rs`.

// Index-heavy CPU references read clearer with explicit loops.
#![allow(clippy::needless_range_loop)]

mod kernels_common;

use kernels_common::{rand, read, Rig};

#[test]
fn ds_d16_reads_zero_the_other_half() {
    let seed = 0x0D16_5EEDu32;
    let src: Vec<u16> = rand(128, 3).iter().map(|&x| x as u16).collect();
    for r in Rig::all() {
        let m = r.module("cl/isa_formats.cl");
        let (bs, bo) = (r.buf(&src), r.zeros(8 * 64 * 4));
        r.run(&m, "ds_d16", 1, 64, 0, |x| {
            x.buffer(&bs)?.buffer(&bo)?.arg(&seed)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let o: Vec<u32> = read(&bo, 8 * 64);
        for i in 0..64 {
            let b = src[i] as u8;
            let sx = b as i8 as i16 as u16 as u32;
            let s = src[i + 64] as u32;
            let want = [b as u32, (b as u32) << 16, sx, sx << 16, s, s << 16];
            assert_eq!(&o[8 * i..8 * i + 6], &want, "{} lane {i}", r.target);
        }
    }
}

#[test]
fn sqrt_keeps_its_value_toward_zero() {
    let n = 128usize;
    let x: Vec<f32> = rand(n, 5)
        .iter()
        .map(|&v| (v % 100_000) as f32 * 0.013)
        .collect();
    for r in Rig::all() {
        let m = r.module("cl/isa_round.cl");
        let (bx, bo) = (r.buf(&x), r.zeros(4 * n));
        let mode: u32 = 3 | 0xF0; // f32 toward zero, denormals allowed
        r.run(&m, "round_sqrt", (n / 64) as u32, 64, 0, |a| {
            a.buffer(&bx)?.buffer(&bo)?.arg(&mode)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let o: Vec<f32> = read(&bo, n);
        for i in 0..n {
            assert_eq!(o[i], x[i].sqrt(), "{} v_sqrt_f32 lane {i}", r.target);
        }
    }
}

/// xf32 MFMA on the MI300X: inputs that tf32 holds exactly (small integers) give the exact
/// product; A[0][0] = 3 + 2^-15 loses its low bits (tf32 keeps 10 mantissa bits), so row 0
/// uses 3.
#[test]
fn xf32_mfma_on_mi300x() {
    let r = Rig::new("emu:mi300x", "gfx942");
    let m = r.module("cl/isa_formats.cl");
    let ints = |seed: u64| -> Vec<f32> {
        rand(128, seed)
            .iter()
            .map(|&v| (v % 15) as f32 - 7.0)
            .collect()
    };
    let (mut a, b) = (ints(7), ints(8));
    let c: Vec<f32> = rand(256, 9).iter().map(|&v| (v % 5) as f32).collect();
    a[0] = 3.0 + 2f32.powi(-15);
    let (ba, bb, bc, bd) = (r.buf(&a), r.buf(&b), r.buf(&c), r.zeros(256 * 4));
    r.run(&m, "xf32_16x16x8", 1, 64, 0, |x| {
        x.buffer(&ba)?.buffer(&bb)?.buffer(&bc)?.buffer(&bd)?;
        Ok(())
    })
    .unwrap_or_else(|e| panic!("gfx942: {e}"));
    let d: Vec<f32> = read(&bd, 256);
    // A[i][k] in lane i + 16 (k / 2), register k % 2; B[k][j] likewise; D[i][j] in lane
    // j + 16 (i / 4), register i % 4.
    for i in 0..16 {
        for j in 0..16 {
            let (lane, reg) = (j + 16 * (i / 4), i % 4);
            let mut want = c[4 * lane + reg] as f64;
            for k in 0..8 {
                let x = a[2 * (i + 16 * (k / 2)) + k % 2];
                let x = if i == 0 && k == 0 { 3.0 } else { x };
                want += x as f64 * b[2 * (j + 16 * (k / 2)) + k % 2] as f64;
            }
            assert_eq!(d[4 * lane + reg] as f64, want, "D[{i}][{j}]");
        }
    }
}
