//! The instruction semantics added for issue 16's remaining gaps, through the public API
//! on the emulated MI300X (gfx942) and MI250X (gfx90a): an f64 MFMA, f32 arithmetic with
//! MODE.FP_ROUND set toward zero by `s_setreg`, and buffer atomics returning their pre-op
//! values. Every expected value is computed on the CPU here (the exhaustive checks are in
//! `emu/tests/shader_{mfma,round,buffer}.rs`).

// Index-heavy CPU references read clearer with explicit loops.
#![allow(clippy::needless_range_loop)]

mod kernels_common;

use kernels_common::{rand, read, Rig};

#[test]
fn f64_mfma() {
    for r in Rig::all() {
        let m = r.module("cl/isa_mfma_more.cl");
        let a: Vec<f64> = rand(64, 11).iter().map(|&x| (x % 9) as f64 - 4.0).collect();
        let b: Vec<f64> = rand(64, 12).iter().map(|&x| (x % 7) as f64 * 0.5).collect();
        let (ba, bb, bd) = (r.buf(&a), r.buf(&b), r.zeros(64 * 4 * 8));
        r.run(&m, "f64_16x16x4", 1, 64, 0, |x| {
            x.buffer(&ba)?.buffer(&bb)?.buffer(&bd)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let d: Vec<f64> = read(&bd, 256);
        // A[i][k] in lane 16k + i; D[i][j] in lane 16 (i % 4) + j, register pair i / 4.
        for i in 0..16 {
            for j in 0..16 {
                let want: f64 = (0..4).map(|k| a[16 * k + i] * b[16 * k + j]).sum();
                let got = d[(16 * (i % 4) + j) * 4 + i / 4];
                assert_eq!(got, want, "{} D[{i}][{j}]", r.target);
            }
        }
    }
}

/// f32 `x` rounded toward zero from an exact f64 value.
fn rtz(x: f64) -> u32 {
    let r = x as f32;
    let r = if (r as f64).abs() > x.abs() {
        f32::from_bits(r.to_bits() - 1)
    } else {
        r
    };
    r.to_bits()
}

#[test]
fn f32_arithmetic_toward_zero() {
    let n = 256usize;
    // Operands in [1, 2) of either sign: their sums and products are exact in f64.
    let f = |seed: u64| -> Vec<f32> {
        rand(n, seed)
            .iter()
            .map(|&x| {
                let v = f32::from_bits(0x3F80_0000 | (x & 0x7F_FFFF));
                if x >> 31 != 0 {
                    -v
                } else {
                    v
                }
            })
            .collect()
    };
    let (a, b) = (f(21), f(22));
    let c = vec![0f32; n];
    for r in Rig::all() {
        let m = r.module("cl/isa_round.cl");
        let (ba, bb, bc, bo) = (r.buf(&a), r.buf(&b), r.buf(&c), r.zeros(8 * n * 4));
        let mode: u32 = 3 | 0xF0; // f32 toward zero, denormals allowed
        r.run(&m, "round_f32", (n / 64) as u32, 64, 0, |x| {
            x.buffer(&ba)?
                .buffer(&bb)?
                .buffer(&bc)?
                .buffer(&bo)?
                .arg(&mode)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let o: Vec<u32> = read(&bo, 8 * n);
        for i in 0..n {
            let (x, y) = (a[i] as f64, b[i] as f64);
            assert_eq!(o[8 * i], rtz(x + y), "{} add lane {i}", r.target);
            assert_eq!(o[8 * i + 1], rtz(x - y), "{} sub lane {i}", r.target);
            assert_eq!(o[8 * i + 2], rtz(x * y), "{} mul lane {i}", r.target);
            // fma with c = 0: the product rounded once.
            assert_eq!(o[8 * i + 3], rtz(x * y), "{} fma lane {i}", r.target);
        }
    }
}

#[test]
fn buffer_atomic_add_returns_the_pre_op_value() {
    let n = 256usize;
    for r in Rig::all() {
        let m = r.module("cl/isa_buffer_ops.cl");
        let mut init = vec![0u32; 64];
        init[12] = 0x7FFF_FFFF;
        init[20] = u32::MAX;
        let (bb, bo) = (r.buf(&init), r.zeros(6 * n * 4));
        let n_bytes = 96u32;
        r.run(&m, "buf_atomics", (n / 64) as u32, 64, 0, |x| {
            x.buffer(&bb)?.buffer(&bo)?.arg(&n_bytes)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let b: Vec<u32> = read(&bb, 64);
        let o: Vec<u32> = read(&bo, 6 * n);
        for c in 0..8 {
            // Sorted by the value each lane saw, the adds chain from 0 to the final sum.
            let mut seen: Vec<(u32, u32)> = (0..n)
                .filter(|i| i % 8 == c)
                .map(|i| (o[6 * i], i as u32 + 1))
                .collect();
            seen.sort();
            let mut cur = 0u32;
            for (old, add) in seen {
                assert_eq!(old, cur, "{} cell {c}", r.target);
                cur += add;
            }
            assert_eq!(b[c], cur, "{} cell {c}", r.target);
        }
    }
}
