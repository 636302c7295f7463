//! Shader-core tests: kernels compiled from source by clang-19 for gfx942 and gfx90a run on
//! the emulated CP through raw AQL queues (the code object's segments are placed in
//! emulated GPU memory by the test itself) and must give exactly the CPU reference result.

// Lane-indexed comparisons against CPU references.
#![allow(clippy::needless_range_loop)]

mod shader_common;
use shader_common::*;

#[test]
fn vadd_and_saxpy_match_the_cpu() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 10_000usize; // not a multiple of the work-group: a partial group
        let a: Vec<f32> = rand_u32(n, 1)
            .iter()
            .map(|&x| (x % 1000) as f32 * 0.25)
            .collect();
        let b: Vec<f32> = rand_u32(n, 2)
            .iter()
            .map(|&x| (x % 777) as f32 * 0.5)
            .collect();
        let (wa, wb, wc) = (dev.upload(&a), dev.upload(&b), dev.alloc(n * 4));
        let m = dev.load("cl/vadd.cl");
        dev.run_vadd(&mut q, &m, [&wa, &wb, &wc], n, 256);
        let c: Vec<f32> = dev.download(&wc, n);
        for i in 0..n {
            assert_eq!(
                c[i].to_bits(),
                (a[i] + b[i]).to_bits(),
                "{} vadd[{i}]",
                dev.target
            );
        }

        let m = dev.load("cl/isa/saxpy.cl");
        let alpha = 1.75f32;
        let args = Args::default().f32(alpha).ptr(&wa).ptr(&wb).u32(n as u32);
        dev.run_ok(
            &mut q,
            &m,
            "saxpy",
            [n as u32, 1, 1],
            [128, 1, 1],
            0,
            &args.0,
        );
        let y: Vec<f32> = dev.download(&wb, n);
        for i in 0..n {
            let want = alpha.mul_add(a[i], b[i]);
            let want2 = alpha * a[i] + b[i];
            assert!(
                y[i].to_bits() == want.to_bits() || y[i].to_bits() == want2.to_bits(),
                "{} saxpy[{i}]: {} vs {}",
                dev.target,
                y[i],
                want
            );
        }
    }
}

#[test]
fn lds_reduction_with_barriers() {
    for dev in devices() {
        let mut q = dev.queue();
        let groups = 64usize;
        let n = groups * 256;
        let input: Vec<u32> = rand_u32(n, 7).iter().map(|x| x % 100_000).collect();
        let (wi, wo) = (dev.upload(&input), dev.alloc(groups * 4));
        let m = dev.load("cl/isa/reduce.cl");
        let args = Args::default().ptr(&wi).ptr(&wo);
        dev.run_ok(
            &mut q,
            &m,
            "reduce",
            [n as u32, 1, 1],
            [256, 1, 1],
            0,
            &args.0,
        );
        let out: Vec<u32> = dev.download(&wo, groups);
        for g in 0..groups {
            let want: u32 = input[g * 256..(g + 1) * 256].iter().sum();
            assert_eq!(out[g], want, "{} group {g}", dev.target);
        }
    }
}

#[test]
fn global_atomic_histogram() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 50_000usize;
        let input = rand_u32(n, 11);
        let (wi, wb) = (dev.upload(&input), dev.alloc(64 * 4));
        let m = dev.load("cl/isa/histogram.cl");
        let args = Args::default().ptr(&wi).ptr(&wb).u32(n as u32);
        dev.run_ok(
            &mut q,
            &m,
            "histogram",
            [n as u32, 1, 1],
            [256, 1, 1],
            0,
            &args.0,
        );
        let bins: Vec<u32> = dev.download(&wb, 64);
        let mut want = [0u32; 64];
        for x in &input {
            want[(x & 63) as usize] += 1;
        }
        assert_eq!(bins, want.to_vec(), "{}", dev.target);
    }
}

#[test]
fn tiled_matmul() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 64usize;
        let a: Vec<f32> = rand_u32(n * n, 3)
            .iter()
            .map(|&x| (x % 17) as f32 - 8.0)
            .collect();
        let b: Vec<f32> = rand_u32(n * n, 5)
            .iter()
            .map(|&x| (x % 13) as f32 * 0.5)
            .collect();
        let (wa, wb, wc) = (dev.upload(&a), dev.upload(&b), dev.alloc(n * n * 4));
        let m = dev.load("cl/isa/matmul.cl");
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc).u32(n as u32);
        dev.run_ok(
            &mut q,
            &m,
            "matmul",
            [n as u32, n as u32, 1],
            [16, 16, 1],
            0,
            &args.0,
        );
        let c: Vec<f32> = dev.download(&wc, n * n);
        for r in 0..n {
            for col in 0..n {
                let mut acc = 0f32;
                for k in 0..n {
                    acc = a[r * n + k].mul_add(b[k * n + col], acc);
                }
                assert_eq!(
                    c[r * n + col].to_bits(),
                    acc.to_bits(),
                    "{} c[{r}][{col}]",
                    dev.target
                );
            }
        }
    }
}

#[test]
fn divergent_loops_and_integer_division() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 4096usize;
        let input: Vec<u32> = rand_u32(n, 13).iter().map(|x| x % 3_000_000).collect();
        let (wi, wo, wq) = (dev.upload(&input), dev.alloc(n * 4), dev.alloc(n * 4));
        let m = dev.load("cl/isa/divergent.cl");
        let args = Args::default().ptr(&wi).ptr(&wo).ptr(&wq);
        dev.run_ok(
            &mut q,
            &m,
            "divergent",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let out: Vec<u32> = dev.download(&wo, n);
        let qo: Vec<i32> = dev.download(&wq, n);
        for i in 0..n {
            let v = input[i];
            let mut acc = 0u32;
            for k in 0..(v & 31) {
                acc = acc.wrapping_mul(3).wrapping_add(k);
            }
            if v & 1 != 0 {
                acc ^= 0x5555;
            } else {
                acc = acc.wrapping_add(v / 7 + v % 13);
            }
            assert_eq!(out[i], acc, "{} out[{i}] (v={v})", dev.target);
            let s = v as i32 - 1_000_000;
            let d = (i % 5) as i32 - 2;
            let d = if d == 0 { 3 } else { d };
            assert_eq!(qo[i], s / d + s % 17, "{} q[{i}]", dev.target);
        }
    }
}

#[test]
fn unimplemented_instruction_and_bad_store_fault_and_the_device_stays_usable() {
    for dev in devices() {
        let n = 256usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let (wa, wb, wc) = (dev.upload(&a), dev.upload(&a), dev.alloc(n * 4));

        // An instruction the shader core does not model faults the queue, naming it.
        let mut q = dev.queue();
        let m = dev.load("cl/isa/sendmsg.cl");
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc);
        let f = dev
            .run(
                &mut q,
                &m,
                "sendmsg",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            )
            .expect_err("sendmsg must fault");
        assert!(
            f.reason.contains("not implemented") && f.reason.contains(" at 0x"),
            "{}: {}",
            dev.target,
            f.reason
        );
        assert_eq!(f.packet_offset, 0);

        // A store to an unmapped address faults with the VM fault and the instruction.
        let mut q2 = dev.queue();
        let m = dev.load("cl/vadd.cl");
        let bad = 0x7f00_0000_0000u64;
        let args = Args::default()
            .ptr(&wa)
            .ptr(&wb)
            .put(&bad.to_le_bytes())
            .u32(n as u32);
        let f = dev
            .run(
                &mut q2,
                &m,
                "vadd",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            )
            .expect_err("the store must fault");
        let fault = f.fault.expect("a memory fault");
        assert!(fault.write, "{}: {}", dev.target, f.reason);
        assert!(
            fault.va >= bad && fault.va < bad + 4 * n as u64,
            "{:#x}",
            fault.va
        );
        assert!(
            f.reason.contains("global_store_dword"),
            "{}: {}",
            dev.target,
            f.reason
        );

        // The device still runs kernels on a new queue.
        let mut q3 = dev.queue();
        dev.run_vadd(&mut q3, &m, [&wa, &wb, &wc], n, 64);
        let c: Vec<f32> = dev.download(&wc, n);
        assert!((0..n).all(|i| c[i] == 2.0 * i as f32), "{}", dev.target);
    }
}

#[test]
fn integer_division_32_and_64_bit() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 1024usize;
        let a: Vec<i32> = rand_u32(n, 21).iter().map(|&x| x as i32 >> 3).collect();
        let b: Vec<i32> = rand_u32(n, 22)
            .iter()
            .map(|&x| (x as i32) >> (x % 28))
            .collect();
        let la: Vec<i64> = rand_u32(2 * n, 23)
            .chunks(2)
            .map(|c| ((c[0] as i64) << 32 | c[1] as i64) >> (c[0] % 40))
            .collect();
        let lb: Vec<i64> = rand_u32(2 * n, 24)
            .chunks(2)
            .map(|c| ((c[0] as i64) << 32 | c[1] as i64) >> (c[1] % 63))
            .collect();
        let (wa, wb, wla, wlb) = (
            dev.upload(&a),
            dev.upload(&b),
            dev.upload(&la),
            dev.upload(&lb),
        );
        let (wq, wlq) = (dev.alloc(2 * n * 4), dev.alloc(2 * n * 8));
        let m = dev.load("cl/isa_types.cl");
        let args = Args::default()
            .ptr(&wa)
            .ptr(&wb)
            .ptr(&wla)
            .ptr(&wlb)
            .ptr(&wq)
            .ptr(&wlq);
        dev.run_ok(
            &mut q,
            &m,
            "int_div",
            [n as u32, 1, 1],
            [128, 1, 1],
            0,
            &args.0,
        );
        let qv: Vec<i32> = dev.download(&wq, 2 * n);
        let lq: Vec<i64> = dev.download(&wlq, 2 * n);
        for i in 0..n {
            let (x, y) = (a[i], b[i] | 1);
            assert_eq!(qv[2 * i], x.wrapping_div(y), "{} {x}/{y}", dev.target);
            assert_eq!(qv[2 * i + 1], x.wrapping_rem(y), "{} {x}%{y}", dev.target);
            let (lx, ly) = (la[i], lb[i] | 1);
            assert_eq!(lq[2 * i], lx.wrapping_div(ly), "{} {lx}/{ly}", dev.target);
            assert_eq!(
                lq[2 * i + 1],
                ((lx as u64) % (ly as u64)) as i64,
                "{} {lx}%{ly}",
                dev.target
            );
        }
    }
}

#[test]
fn float_and_64_bit_global_atomics() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 2048usize;
        // Small integers: every float/double sum is exact in any order.
        let input: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        let wf = dev.upload(&[0f32]);
        let wd = dev.upload(&[0f64]);
        let wu = dev.upload(&[0u64, 0, 0]);
        let ws = dev.upload(&[i64::MIN, i64::MAX]);
        let wi = dev.alloc((2 + n) * 4);
        let win = dev.upload(&input);
        let m = dev.load("cl/isa_atomics.cl");
        let args = Args::default()
            .ptr(&wf)
            .ptr(&wd)
            .ptr(&wu)
            .ptr(&ws)
            .ptr(&wi)
            .ptr(&win);
        dev.run_ok(
            &mut q,
            &m,
            "atomics",
            [n as u32, 1, 1],
            [256, 1, 1],
            0,
            &args.0,
        );
        let sum: f32 = input.iter().sum();
        assert_eq!(dev.download::<f32>(&wf, 1)[0], sum, "{}", dev.target);
        assert_eq!(dev.download::<f64>(&wd, 1)[0], sum as f64, "{}", dev.target);
        let u: Vec<u64> = dev.download(&wu, 3);
        assert_eq!(u[0], (0..n as u64).sum::<u64>(), "{}", dev.target);
        assert_eq!(
            u[1],
            (0..n as u64).fold(0, |a, i| a ^ (i << 33)),
            "{}",
            dev.target
        );
        assert!(
            u[2] >= 1 && u[2] <= n as u64,
            "{} cmpswap chain {}",
            dev.target,
            u[2]
        );
        let s: Vec<i64> = dev.download(&ws, 2);
        assert_eq!(s, vec![(n as i64 - 1) * 3 - 100, -100], "{}", dev.target);
        let iv: Vec<i32> = dev.download(&wi, 2 + n);
        assert_eq!(iv[0], n as i32, "{}", dev.target);
        let total: i32 = (0..n as i32).sum();
        assert_eq!(iv[1], total, "{}", dev.target);
        // Each returned value is the sum of the items that came before it.
        assert!(
            iv[2..].iter().all(|&o| (0..=total).contains(&o)),
            "{}",
            dev.target
        );
        assert!(iv[2..].contains(&0), "{}", dev.target);
    }
}

#[test]
fn swizzle_bpermute_and_dpp_scan() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 256usize;
        let input: Vec<i32> = rand_u32(n, 31).iter().map(|&x| (x % 1000) as i32).collect();
        let (wi, wo) = (dev.upload(&input), dev.alloc(n * 4));
        let m = dev.load("cl/isa_lanes.cl");
        let args = Args::default().ptr(&wi).ptr(&wo);
        dev.run_ok(
            &mut q,
            &m,
            "swizzle_ops",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let out: Vec<i32> = dev.download(&wo, n);
        for i in 0..n {
            let w = i & !63;
            let l = i & 63;
            let x = |j: usize| input[w + j];
            let s0 = x(l ^ 1);
            let s1 = x((l & !3) | (3 - (l & 3)));
            // and=0x00, or=0x07, xor=0: every lane of a 32-group reads lane 7 of it.
            let s2 = x((l & 32) | 7);
            let p = x((l ^ 5) & 63);
            let f = x(0);
            assert_eq!(
                out[i],
                s0 + 2 * s1 + 4 * s2 + 8 * p + 16 * f,
                "{} lane {i}",
                dev.target
            );
        }
        dev.run_ok(
            &mut q,
            &m,
            "wave_scan",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let out: Vec<i32> = dev.download(&wo, n);
        for i in 0..n {
            let w = i & !63;
            let want: i32 = input[w..=i].iter().sum();
            assert_eq!(out[i], want, "{} scan lane {i}", dev.target);
        }
    }
}

#[test]
fn jump_table_device_calls_and_scratch_array() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 512usize;
        let input: Vec<u32> = rand_u32(n, 41).iter().map(|x| x % 100_000).collect();
        let coef: Vec<f32> = (0..8).map(|k| 0.5 + k as f32 * 0.25).collect();
        let (wi, wc) = (dev.upload(&input), dev.upload(&coef));
        let (wo, wf) = (dev.alloc(2 * n * 4), dev.alloc(n * 4));
        let m = dev.load("cl/isa_control.cl");
        let args = Args::default().ptr(&wi).ptr(&wc).ptr(&wo).ptr(&wf);
        dev.run_ok(
            &mut q,
            &m,
            "control",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let out: Vec<i32> = dev.download(&wo, 2 * n);
        let fout: Vec<f32> = dev.download(&wf, n);
        for i in 0..n {
            let x = input[i];
            let r = match x % 9 {
                0 => (x as i32).wrapping_mul(3),
                1 => x as i32 ^ 0x55,
                2 => (x >> 2) as i32 + 17,
                3 => -(x as i32),
                4 => x.wrapping_mul(x) as i32,
                5 => x as i32 | 0x100,
                6 => x as i32 - 1000,
                7 => (x / 7) as i32,
                _ => 42,
            };
            assert_eq!(out[2 * i], r, "{} switch {i}", dev.target);
            let (mut y, mut steps) = (x, 0);
            while y > 1 && steps < 1000 {
                y = if y & 1 != 0 { 3 * y + 1 } else { y / 2 };
                steps += 1;
            }
            assert_eq!(out[2 * i + 1], steps, "{} collatz {i}", dev.target);
            let t = x as f32 * 0.001;
            let mut p = 0f32;
            for k in (0..=(x & 7) as usize).rev() {
                p = p.mul_add(t, coef[k]);
            }
            let mut p2 = 0f32;
            for k in (0..=(x & 7) as usize).rev() {
                p2 = p2 * t + coef[k];
            }
            assert!(
                fout[i].to_bits() == p.to_bits() || fout[i].to_bits() == p2.to_bits(),
                "{} poly {i}: {} vs {}",
                dev.target,
                fout[i],
                p
            );
        }

        let input: Vec<i32> = (0..64).map(|k| k * 3 - 50).collect();
        let (wi, wo) = (dev.upload(&input), dev.alloc(n * 4));
        let args = Args::default().ptr(&wi).ptr(&wo);
        dev.run_ok(
            &mut q,
            &m,
            "scratch_array",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let out: Vec<i32> = dev.download(&wo, n);
        for i in 0..n {
            let a: Vec<i32> = (0..37).map(|k| input[(i + k) % 64] * k as i32).collect();
            let s: i32 = (0..37).map(|k| a[(k * 7 + i) % 37]).sum();
            assert_eq!(out[i], s, "{} scratch {i}", dev.target);
        }
    }
}

#[test]
fn dispatch_is_traced_with_workgroups_waves_and_instructions() {
    let dev = Dev::new("gfx942", 90402);
    dev.eng.trace().set_enabled(true);
    let mut q = dev.queue();
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let (wa, wb, wc) = (dev.upload(&a), dev.upload(&a), dev.alloc(n * 4));
    let m = dev.load("cl/vadd.cl");
    dev.run_vadd(&mut q, &m, [&wa, &wb, &wc], n, 256);
    let line = dev.take_dispatch_line();
    // 1000 work-items in groups of 256: 4 groups, 4 + 4 + 4 + 4 waves (the last group
    // has 232 work-items, still 4 waves).
    assert!(
        line.contains(&format!("kernel_object={:#x}", m.kd("vadd"))),
        "{line}"
    );
    assert!(line.contains(" workgroups=4 "), "{line}");
    assert!(line.contains(" waves=16 "), "{line}");
    let instrs = trace_field(&line, "instructions=");
    // Every wave runs the whole straight-line body (about 20 instructions).
    assert!((16 * 15..=16 * 40).contains(&instrs), "{line}");
}

#[test]
fn f16_bf16_conversions_and_f64_arithmetic() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 1024usize;
        let input: Vec<f32> = rand_u32(n, 51)
            .iter()
            .map(|&x| (x % 200_000) as f32 / 97.0 - 1000.0)
            .collect();
        let win = dev.upload(&input);
        let (wh, wback, wbf) = (dev.alloc(n * 2), dev.alloc(n * 4), dev.alloc(n * 2));
        let m = dev.load("cl/isa_types.cl");
        let args = Args::default().ptr(&win).ptr(&wh).ptr(&wback).ptr(&wbf);
        dev.run_ok(
            &mut q,
            &m,
            "f16_convert",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let h: Vec<u16> = dev.download(&wh, n);
        let back: Vec<f32> = dev.download(&wback, n);
        let bf: Vec<u16> = dev.download(&wbf, n);
        for i in 0..n {
            let y = half::f16::from_f32(input[i]);
            assert_eq!(back[i], y.to_f32(), "{} back[{i}]", dev.target);
            let want =
                half::f16::from_f64(y.to_f64().mul_add(half::f16::from_f32(1.5).to_f64(), 0.25));
            let alt = y * half::f16::from_f32(1.5) + half::f16::from_f32(0.25);
            assert!(
                h[i] == want.to_bits() || h[i] == alt.to_bits(),
                "{} h[{i}]: {:#x} vs {:#x}",
                dev.target,
                h[i],
                want.to_bits()
            );
            let mut u = input[i].to_bits();
            u = u.wrapping_add(0x7FFF + ((u >> 16) & 1));
            assert_eq!(bf[i], (u >> 16) as u16, "{} bf[{i}]", dev.target);
        }

        let a: Vec<f64> = rand_u32(n, 52)
            .iter()
            .map(|&x| x as f64 / 1e4 - 2e5)
            .collect();
        let b: Vec<f64> = rand_u32(n, 53)
            .iter()
            .map(|&x| x as f64 / 3e5 + 0.5)
            .collect();
        let (wa, wb, wc) = (dev.upload(&a), dev.upload(&b), dev.alloc(n * 8));
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc);
        dev.run_ok(
            &mut q,
            &m,
            "f64_math",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let c: Vec<f64> = dev.download(&wc, n);
        for i in 0..n {
            let (x, y) = (a[i], b[i]);
            let want = x.mul_add(y, 1.0) / (y + 2.0) + x.abs().sqrt() - (x * 0.5).floor()
                + (y as i32) as f64;
            assert_eq!(
                c[i].to_bits(),
                want.to_bits(),
                "{} c[{i}]: {} vs {want}",
                dev.target,
                c[i]
            );
        }
    }
}

/// Dense MFMA on the matrix core model: f32 16x16x4 (two chained products), f16 32x32x8
/// and bf16 16x16x16, with the register layouts of AMD's matrix instruction calculator, results
/// through AccVGPRs (`v_accvgpr_read`), checked against a CPU matrix product.
#[test]
fn mfma_f32_and_f16_matrix_products() {
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_mfma.cl");
        // f32 16x16x4, twice: D = A1 B1 + A0 B0 (small integers: exact in any order).
        let a: Vec<f32> = rand_u32(128, 71)
            .iter()
            .map(|&x| (x % 9) as f32 - 4.0)
            .collect();
        let b: Vec<f32> = rand_u32(128, 72)
            .iter()
            .map(|&x| (x % 7) as f32 - 3.0)
            .collect();
        let (wa, wb, wd) = (dev.upload(&a), dev.upload(&b), dev.alloc(256 * 4));
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wd);
        dev.run_ok(
            &mut q,
            &m,
            "mfma_f32_16x16x4f32",
            [64, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let d: Vec<f32> = dev.download(&wd, 256);
        for i in 0..16 {
            for j in 0..16 {
                let mut want = 0f32;
                for blk in 0..2 {
                    for k in 0..4 {
                        want += a[64 * blk + i + 16 * k] * b[64 * blk + j + 16 * k];
                    }
                }
                let lane = j + 16 * (i / 4);
                assert_eq!(d[lane * 4 + i % 4], want, "{} D[{i}][{j}]", dev.target);
            }
        }
        // f16 32x32x8: A[i][k] in lane i + 32 (k / 4), element k % 4.
        let ah: Vec<u16> = rand_u32(256, 73)
            .iter()
            .map(|&x| half::f16::from_f32((x % 11) as f32 - 5.0).to_bits())
            .collect();
        let bh: Vec<u16> = rand_u32(256, 74)
            .iter()
            .map(|&x| half::f16::from_f32((x % 5) as f32 * 0.5).to_bits())
            .collect();
        let (wa, wb, wd) = (dev.upload(&ah), dev.upload(&bh), dev.alloc(1024 * 4));
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wd);
        dev.run_ok(
            &mut q,
            &m,
            "mfma_f32_32x32x8f16",
            [64, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let d: Vec<f32> = dev.download(&wd, 1024);
        let h = |v: u16| half::f16::from_bits(v).to_f32();
        for i in 0..32 {
            for j in 0..32 {
                let mut want = 0f32;
                for k in 0..8 {
                    want += h(ah[(i + 32 * (k / 4)) * 4 + k % 4])
                        * h(bh[(j + 32 * (k / 4)) * 4 + k % 4]);
                }
                let lane = j + 32 * ((i / 4) % 2);
                let reg = 4 * (i / 8) + i % 4;
                assert_eq!(d[lane * 16 + reg], want, "{} D[{i}][{j}]", dev.target);
            }
        }
        // bf16 16x16x16 (`_1k`, per-target opcodes): A[i][k] in lane i + 16 (k / 4).
        let bf = |seed: u32| -> Vec<u16> {
            rand_u32(256, seed)
                .iter()
                .map(|&x| half::bf16::from_f32((x % 13) as f32 - 6.0).to_bits())
                .collect()
        };
        let (ab, bb) = (bf(75), bf(76));
        let (wa, wb, wd) = (dev.upload(&ab), dev.upload(&bb), dev.alloc(256 * 4));
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wd);
        dev.run_ok(
            &mut q,
            &m,
            "mfma_f32_16x16x16bf16",
            [64, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let d: Vec<f32> = dev.download(&wd, 256);
        let g = |v: u16| half::bf16::from_bits(v).to_f32();
        for i in 0..16 {
            for j in 0..16 {
                let mut want = 0f32;
                for k in 0..16 {
                    want += g(ab[(i + 16 * (k / 4)) * 4 + k % 4])
                        * g(bb[(j + 16 * (k / 4)) * 4 + k % 4]);
                }
                let lane = j + 16 * (i / 4);
                assert_eq!(d[lane * 4 + i % 4], want, "{} bf16 D[{i}][{j}]", dev.target);
            }
        }
    }
}

/// A private array indexed at run time lives in scratch; on gfx942 clang addresses it with
/// SDWA operands (`v_lshlrev_b32_sdwa ... src1_sel:BYTE_0`), on gfx90a through MUBUF.
#[test]
fn private_array_in_scratch_with_sdwa() {
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/private_array.cl");
        let n = 300u32;
        let idx: Vec<u32> = (0..n).map(|i| i.wrapping_mul(40503) ^ 0x55).collect();
        let (wi, wo) = (dev.upload(&idx), dev.alloc(n as usize * 4));
        let args = Args::default().ptr(&wi).ptr(&wo).u32(n);
        dev.run_ok(
            &mut q,
            &m,
            "private_array",
            [n, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let got: Vec<u32> = dev.download(&wo, n as usize);
        for i in 0..n {
            let want = i.wrapping_mul(idx[i as usize] % 256).wrapping_add(7);
            assert_eq!(got[i as usize], want, "{} out[{i}]", dev.target);
        }
    }
}

/// Raw buffer resources built in the kernel: in-range lanes copy (+1), lanes past
/// num_records read 0 and their buffer stores are dropped, as the hardware's range check.
#[test]
fn buffer_resource_range_checking() {
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_buffer.cl");
        let n = 256usize;
        let valid = 200u32; // dwords inside the buffer
        let src: Vec<u32> = rand_u32(n, 81);
        let dst0 = vec![0xDEAD_BEEFu32; 2048];
        let (ws, wd) = (dev.upload(&src), dev.upload(&dst0));
        let args = Args::default().ptr(&ws).ptr(&wd).u32(valid * 4);
        dev.run_ok(
            &mut q,
            &m,
            "buf_copy",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let d: Vec<u32> = dev.download(&wd, 2048);
        for i in 0..n {
            let inside = (i as u32) < valid;
            let want = if inside {
                src[i].wrapping_add(1)
            } else {
                0xDEAD_BEEF
            };
            assert_eq!(d[i], want, "{} dst[{i}]", dev.target);
            let read = if inside { src[i] } else { 0 };
            assert_eq!(d[i + 1024], read, "{} loaded[{i}]", dev.target);
        }
    }
}

/// Packed f16 VOP3P (v_pk_fma/add/mul/max_f16) and SDWA byte/word selects, against the
/// same arithmetic on the host (f16 rounding after each operation, as the kernel does).
#[test]
fn packed_f16_and_sdwa_byte_lanes() {
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_buffer.cl");
        let n = 256usize;
        let hv = |seed: u32, sc: f32| -> Vec<u16> {
            rand_u32(2 * n, seed)
                .iter()
                .map(|&x| half::f16::from_f32(((x % 2001) as f32 - 1000.0) * sc).to_bits())
                .collect()
        };
        let (a, b, c) = (hv(91, 0.01), hv(92, 0.02), hv(93, 0.5));
        let (wa, wb, wc) = (dev.upload(&a), dev.upload(&b), dev.upload(&c));
        let (wd, we, wf) = (dev.alloc(4 * n), dev.alloc(4 * n), dev.alloc(4 * n));
        let args = Args::default()
            .ptr(&wa)
            .ptr(&wb)
            .ptr(&wc)
            .ptr(&wd)
            .ptr(&we)
            .ptr(&wf);
        dev.run_ok(
            &mut q,
            &m,
            "pk_f16",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let (d, e, f): (Vec<u16>, Vec<u16>, Vec<u16>) = (
            dev.download(&wd, 2 * n),
            dev.download(&we, 2 * n),
            dev.download(&wf, 2 * n),
        );
        let h = |v: u16| half::f16::from_bits(v);
        for i in 0..2 * n {
            let (x, y, z) = (h(a[i]), h(b[i]), h(c[i]));
            let fma = half::f16::from_f64(x.to_f64() * y.to_f64() + z.to_f64());
            let unfused = x * y + z;
            assert!(
                d[i] == fma.to_bits() || d[i] == unfused.to_bits(),
                "{} d[{i}] = {:#x}, want {:#x}",
                dev.target,
                d[i],
                fma.to_bits()
            );
            assert_eq!(e[i], ((x + y) * x).to_bits(), "{} e[{i}]", dev.target);
            assert_eq!(
                f[i],
                (x.max(z) - y.min(z)).to_bits(),
                "{} f[{i}]",
                dev.target
            );
        }

        let (a, b) = (rand_u32(n, 94), rand_u32(n, 95));
        let (wa, wb, wo) = (dev.upload(&a), dev.upload(&b), dev.alloc(8 * n));
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wo);
        dev.run_ok(
            &mut q,
            &m,
            "bytes",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let o: Vec<u32> = dev.download(&wo, 2 * n);
        for i in 0..n {
            let (p, q) = (a[i].to_le_bytes(), b[i].to_le_bytes());
            let s = (p[1] as u32 * q[2] as u32)
                .wrapping_add(p[3] as i8 as i32 as u32)
                .wrapping_add((b[i] >> 16) << 3);
            assert_eq!(o[2 * i], s, "{} s[{i}]", dev.target);
            let r = [
                p[0].wrapping_add(q[1]),
                p[2] ^ q[3],
                p[3].wrapping_sub(q[0]),
                p[1] | q[2],
            ];
            assert_eq!(o[2 * i + 1], u32::from_le_bytes(r), "{} r[{i}]", dev.target);
        }
    }
}

/// `s_sleep` in a polling loop lets the work-group's other wave run: wave 0 waits for a
/// flag that only wave 1 sets (without the hand-off the dispatch would never finish).
#[test]
fn s_sleep_hands_the_core_to_the_other_wave() {
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_buffer.cl");
        let (wf, wo) = (dev.upload(&[0u32]), dev.alloc(128 * 4));
        let args = Args::default().ptr(&wf).ptr(&wo);
        dev.run_ok(
            &mut q,
            &m,
            "sleep_handoff",
            [128, 1, 1],
            [128, 1, 1],
            0,
            &args.0,
        );
        let o: Vec<u32> = dev.download(&wo, 128);
        // Wave 0 runs first, so it polled (and slept) at least once before wave 1 ran.
        assert!(
            o[..64].iter().all(|&v| v == 2),
            "{} {:?}",
            dev.target,
            &o[..64]
        );
        assert!(o[64..].iter().all(|&v| v == 3), "{}", dev.target);
    }
}
