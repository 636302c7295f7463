//! Issue 16's "must show" kernels through the public API, on the emulated MI300X (gfx942)
//! and MI250X (gfx90a): HIP device code built by clang-19 (`test-kernels/hip/isa_mix.hip`)
//! whose every result is computed again on the CPU here. Also: a long kernel on one queue
//! while another queue's packets complete (the CP does not block on a dispatch), the
//! private-array (scratch) kernel, and an unimplemented instruction / out-of-bounds store
//! each faulting the stream with a message naming the instruction and its address while
//! the device stays usable.

// Index-heavy CPU references read clearer with explicit loops.
#![allow(clippy::needless_range_loop)]

mod kernels_common;

use kernels_common::{rand, read, Rig};
use kfdrt::ErrorKind;

const MIX: &str = "hip/isa_mix.hip";

fn mix(a: u32, b: u32) -> u32 {
    a.wrapping_mul(2654435761) ^ (b >> 3)
}

#[test]
fn divergent_loops_jump_table_and_device_calls() {
    for r in Rig::all() {
        let m = r.module(MIX);
        let n = 2048usize;
        let input = rand(n, 1);
        let (bi, bo) = (r.buf(&input), r.zeros(8 * n));
        r.run(&m, "branchy", (n / 128) as u32, 128, 0, |a| {
            a.buffer(&bi)?.buffer(&bo)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let out: Vec<u32> = read(&bo, 2 * n);
        for i in 0..n {
            let x = input[i];
            let mut acc = 1u32;
            for k in 0..(x & 63) {
                acc = acc.wrapping_mul(5).wrapping_add(k);
                if acc & 0x100 != 0 {
                    acc ^= x;
                }
            }
            let want = match x % 10 {
                0 => acc.wrapping_add(11),
                1 => acc.wrapping_mul(3),
                2 => acc >> 2,
                3 => !acc,
                4 => acc ^ 0xdead,
                5 => acc.wrapping_sub(x),
                6 => acc | 7,
                7 => acc & 0xffff,
                8 => acc << 3,
                _ => mix(acc, x),
            };
            assert_eq!(out[2 * i], want, "{} switch[{i}] x={x}", r.target);
            assert_eq!(out[2 * i + 1], mix(x, acc), "{} call[{i}]", r.target);
        }
    }
}

#[test]
fn integer_division_and_modulo_32_and_64_bit() {
    for r in Rig::all() {
        let m = r.module(MIX);
        let n = 1024usize;
        let raw = rand(6 * n, 2);
        let a: Vec<i32> = (0..n).map(|i| raw[i] as i32).collect();
        // Divisors of every magnitude, never 0 (and never -1 with i32::MIN).
        let b: Vec<i32> = (0..n)
            .map(|i| ((raw[n + i] as i32) >> (raw[n + i] % 31)) | 1)
            .collect();
        let la: Vec<i64> = (0..n)
            .map(|i| ((raw[2 * n + i] as i64) << 32 | raw[3 * n + i] as i64) >> (i % 50))
            .collect();
        let lb: Vec<i64> = (0..n)
            .map(|i| (((raw[4 * n + i] as i64) << 32 | raw[5 * n + i] as i64) >> (i % 63)) | 1)
            .collect();
        let (ba, bb, bla, blb) = (r.buf(&a), r.buf(&b), r.buf(&la), r.buf(&lb));
        let (bq, blq) = (r.zeros(16 * n), r.zeros(32 * n));
        r.run(&m, "divmod", (n / 64) as u32, 64, 0, |x| {
            x.buffer(&ba)?.buffer(&bb)?.buffer(&bla)?.buffer(&blb)?;
            x.buffer(&bq)?.buffer(&blq)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let q: Vec<i32> = read(&bq, 4 * n);
        let lq: Vec<i64> = read(&blq, 4 * n);
        for i in 0..n {
            let (x, y) = (a[i], b[i]);
            let want = [
                x.wrapping_div(y),
                x.wrapping_rem(y),
                ((x as u32) / (y as u32)) as i32,
                ((x as u32) % (y as u32)) as i32,
            ];
            assert_eq!(&q[4 * i..4 * i + 4], &want, "{} {x} / {y}", r.target);
            let (x, y) = (la[i], lb[i]);
            let want = [
                x.wrapping_div(y),
                x.wrapping_rem(y),
                ((x as u64) / (y as u64)) as i64,
                ((x as u64) % (y as u64)) as i64,
            ];
            assert_eq!(&lq[4 * i..4 * i + 4], &want, "{} {x} / {y}", r.target);
        }
    }
}

#[test]
fn f16_bf16_conversions_and_f64_arithmetic() {
    for r in Rig::all() {
        let m = r.module(MIX);
        let n = 512usize;
        let raw = rand(2 * n, 3);
        // Normal, subnormal-for-f16, large, negative and ties.
        let f: Vec<f32> = (0..n)
            .map(|i| {
                let v = (raw[i] % 2_000_001) as f32 / 1000.0 - 1000.0;
                match i % 5 {
                    0 => v,
                    1 => v * 1e-7,
                    2 => v * 97.0,
                    3 => f32::from_bits(raw[i] & 0x8FFF_FFFF),
                    _ => 1.0 + (i as f32) * f32::EPSILON * 0.5,
                }
            })
            .collect();
        let d: Vec<f64> = (0..n)
            .map(|i| (raw[n + i] as f64 / 4096.0 - 5e5) * if i % 3 == 0 { 1e-3 } else { 1.0 })
            .map(|x| if x == 0.0 { 0.25 } else { x })
            .collect();
        let (bf, bd) = (r.buf(&f), r.buf(&d));
        let (bh, bbf, bback, bdo) = (
            r.zeros(2 * n),
            r.zeros(2 * n),
            r.zeros(8 * n),
            r.zeros(16 * n),
        );
        r.run(&m, "floats", (n / 64) as u32, 64, 0, |a| {
            a.buffer(&bf)?.buffer(&bd)?.buffer(&bh)?.buffer(&bbf)?;
            a.buffer(&bback)?.buffer(&bdo)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let h: Vec<u16> = read(&bh, n);
        let bf16: Vec<u16> = read(&bbf, n);
        let back: Vec<f32> = read(&bback, 2 * n);
        let dout: Vec<f64> = read(&bdo, 2 * n);
        for i in 0..n {
            let wh = half::f16::from_f32(f[i]);
            let wb = half::bf16::from_f32(f[i]);
            assert_eq!(h[i], wh.to_bits(), "{} f16({:e})", r.target, f[i]);
            assert_eq!(bf16[i], wb.to_bits(), "{} bf16({:e})", r.target, f[i]);
            assert_eq!(back[2 * i].to_bits(), wh.to_f32().to_bits(), "{}", r.target);
            assert_eq!(
                back[2 * i + 1].to_bits(),
                wb.to_f32().to_bits(),
                "{}",
                r.target
            );
            let x = d[i];
            let w0 = x * 3.25 + 1.0 / x;
            let w1 = x.mul_add(x, -2.5) / (x + 7.0);
            // The kernel may fuse x * 3.25 + (1/x) into one fma.
            let w0f = x.mul_add(3.25, 1.0 / x);
            assert!(
                dout[2 * i].to_bits() == w0.to_bits() || dout[2 * i].to_bits() == w0f.to_bits(),
                "{} f64[{i}]: {} vs {w0}",
                r.target,
                dout[2 * i]
            );
            assert_eq!(
                dout[2 * i + 1].to_bits(),
                w1.to_bits(),
                "{} f64 fma/div {x}",
                r.target
            );
        }
    }
}

#[test]
fn wave_prefix_scan_with_dpp() {
    for r in Rig::all() {
        let m = r.module(MIX);
        let n = 512usize;
        let input: Vec<i32> = rand(n, 4)
            .iter()
            .map(|&x| (x % 2001) as i32 - 1000)
            .collect();
        let (bi, bo) = (r.buf(&input), r.zeros(4 * n));
        r.run(&m, "scan", (n / 256) as u32, 256, 0, |a| {
            a.buffer(&bi)?.buffer(&bo)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let out: Vec<i32> = read(&bo, n);
        for i in 0..n {
            let w = i & !63;
            let want: i32 = input[w..=i].iter().sum();
            assert_eq!(out[i], want, "{} scan[{i}]", r.target);
        }
    }
}

#[test]
fn float_and_64_bit_atomics_across_workgroups() {
    for r in Rig::all() {
        let m = r.module(MIX);
        let n = 4096usize;
        // Small integers: every float/double sum is exact in any order.
        let input: Vec<f32> = (0..n).map(|i| (i % 13) as f32).collect();
        let bi = r.buf(&input);
        let (bfs, bds, bu) = (r.zeros(4), r.zeros(8), r.zeros(32));
        r.run(&m, "atomics", (n / 256) as u32, 256, 0, |a| {
            a.buffer(&bi)?.buffer(&bfs)?.buffer(&bds)?.buffer(&bu)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let sum: f32 = input.iter().sum();
        assert_eq!(read::<f32>(&bfs, 1)[0], sum, "{}", r.target);
        assert_eq!(read::<f64>(&bds, 1)[0], sum as f64 * 0.5, "{}", r.target);
        let u: Vec<u64> = read(&bu, 4);
        let nn = n as u64;
        assert_eq!(u[0], (0..nn).map(|i| i << 20).sum::<u64>(), "{}", r.target);
        assert_eq!(u[1], (nn - 1) * 0x1_0000_0001, "{}", r.target);
        assert_eq!(u[2], u64::MAX, "{}", r.target);
        assert_eq!(u[3], 3 * nn, "{} CAS loop", r.target);
    }
}

#[test]
fn mfma_matrix_multiply() {
    for r in Rig::all() {
        let m = r.module(MIX);
        let a: Vec<f32> = rand(256, 5)
            .iter()
            .map(|&x| (x % 17) as f32 - 8.0)
            .collect();
        let b: Vec<f32> = rand(256, 6)
            .iter()
            .map(|&x| (x % 11) as f32 - 5.0)
            .collect();
        let (ba, bb, bd) = (r.buf(&a), r.buf(&b), r.zeros(1024));
        r.run(&m, "mfma", 1, 64, 0, |x| {
            x.buffer(&ba)?.buffer(&bb)?.buffer(&bd)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let d: Vec<f32> = read(&bd, 256);
        for i in 0..16 {
            for j in 0..16 {
                let want: f32 = (0..16).map(|k| a[i * 16 + k] * b[k * 16 + j]).sum();
                assert_eq!(d[i * 16 + j], want, "{} D[{i}][{j}]", r.target);
            }
        }
    }
}

#[test]
fn private_array_indexed_at_run_time_in_scratch() {
    for r in Rig::all() {
        let m = r.module(MIX);
        let k = m.kernel("private_array").unwrap();
        assert!(k.attributes().private_size_bytes >= 160, "{}", r.target);
        let n = 320u32;
        let input: Vec<i32> = rand(n as usize, 7)
            .iter()
            .map(|&x| (x % 5000) as i32)
            .collect();
        let (bi, bo) = (r.buf(&input), r.zeros(4 * n as usize));
        r.run(&m, "private_array", n.div_ceil(64), 64, 0, |a| {
            a.buffer(&bi)?.buffer(&bo)?.arg(&n)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let out: Vec<i32> = read(&bo, n as usize);
        for i in 0..n as usize {
            let arr: Vec<i32> = (0..40)
                .map(|k| input[(i + k) % n as usize] ^ k as i32)
                .collect();
            let mut s = 0i32;
            for k in 0..40usize {
                s = s
                    .wrapping_mul(3)
                    .wrapping_add(arr[(k * 7 + input[i] as usize) % 40]);
            }
            assert_eq!(out[i], s, "{} out[{i}]", r.target);
        }
    }
}

#[test]
fn a_long_kernel_does_not_hold_up_other_queues() {
    for r in Rig::all() {
        let m = r.module("cl/spin.cl");
        let k = m.kernel("spin_until").unwrap();
        let flag = r.zeros(4);
        let out = r.zeros(16);
        // Streams with a CU mask get queues of their own.
        let long = r.dev.create_stream_with_cu_mask(0, &[u32::MAX; 4]).unwrap();
        let other = r.dev.create_stream_with_cu_mask(0, &[u32::MAX; 4]).unwrap();
        assert_ne!(long.hw_queue_id(), other.hw_queue_id());
        r.launch(&long, &k, 2, 64, 0, |a| {
            // Bounded (~2^24 polls), so a failing test cannot leave a kernel spinning.
            a.buffer(&flag)?.buffer(&out)?.arg(&(1u32 << 24))?;
            Ok(())
        });
        // Ordered after the kernel on its own queue: must not land while it spins.
        let after = r.zeros(4);
        long.write_value32(after.va(), 7, kfdrt::WriteValueFlags::DEFAULT)
            .unwrap();
        // The other queue's packets (a value write, a kernel, a value write) complete while
        // the long kernel spins.
        let marks = r.zeros(8);
        let vm = r.module("hip/isa_mix.hip");
        let branchy = vm.kernel("branchy").unwrap();
        let input: Vec<u32> = (0..64).collect();
        let (bi, bo) = (r.buf(&input), r.zeros(512));
        other
            .write_value32(marks.va(), 1, kfdrt::WriteValueFlags::DEFAULT)
            .unwrap();
        r.launch(&other, &branchy, 1, 64, 0, |a| {
            a.buffer(&bi)?.buffer(&bo)?;
            Ok(())
        });
        other
            .write_value32(marks.va() + 4, 2, kfdrt::WriteValueFlags::DEFAULT)
            .unwrap();
        r.wait(&other)
            .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        assert_eq!(read::<u32>(&marks, 2), vec![1, 2], "{}", r.target);
        assert_eq!(read::<u32>(&bo, 2)[1], mix(0, 1), "{}", r.target);
        assert_eq!(
            long.query().unwrap_err().kind(),
            ErrorKind::NotReady,
            "{}: the long kernel finished before the host released it",
            r.target
        );
        assert_eq!(read::<u32>(&out, 2), vec![0, 0], "{}", r.target);
        assert_eq!(
            read::<u32>(&after, 1),
            vec![0],
            "{}: ran past the kernel",
            r.target
        );
        // Release it: both work-groups saw the flag.
        flag.write(0, &1u32.to_le_bytes()).unwrap();
        r.wait(&long)
            .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        assert_eq!(read::<u32>(&out, 2), vec![1, 1], "{}", r.target);
        assert_eq!(read::<u32>(&after, 1), vec![7], "{}", r.target);
    }
}

#[test]
fn unimplemented_instruction_and_out_of_bounds_store_fault_and_the_device_stays_usable() {
    for r in Rig::all() {
        let n = 256u32;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let (ba, bc) = (r.buf(&a), r.zeros(4 * n as usize));
        // s_sendmsg is not modelled: the stream faults naming the instruction and address.
        let sm = r.module("cl/isa/sendmsg.cl");
        let e = r
            .run(&sm, "sendmsg", n / 64, 64, 0, |x| {
                x.buffer(&ba)?.buffer(&ba)?.buffer(&bc)?;
                Ok(())
            })
            .expect_err("s_sendmsg must fault");
        assert!(e.contains("not implemented"), "{}: {e}", r.target);
        assert!(
            e.contains("s_sendmsg") && e.contains(" at 0x"),
            "{}: {e}",
            r.target
        );

        // A store to an address nothing is mapped at: a VM fault naming the store. Below
        // the kernel's mmap_min_addr, so no host mapping (an SVM range such as a queue's
        // context-save area lives at host addresses) can ever cover it.
        let vm = r.module("cl/vadd.cl");
        let bad = 0x2000u64;
        let e = r
            .run(&vm, "vadd", n / 64, 64, 0, |x| {
                x.buffer(&ba)?.buffer(&ba)?.ptr(bad)?.arg(&n)?;
                Ok(())
            })
            .expect_err("the store must fault");
        assert!(e.contains("global_store_dword"), "{}: {e}", r.target);
        assert!(e.contains("write fault at va=0x2"), "{}: {e}", r.target);
        assert!(e.contains(" at 0x"), "{}: {e}", r.target);

        // The device still runs kernels.
        r.run(&vm, "vadd", n / 64, 64, 0, |x| {
            x.buffer(&ba)?.buffer(&ba)?.buffer(&bc)?.arg(&n)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", r.target));
        let c: Vec<f32> = read(&bc, n as usize);
        assert_eq!(
            c,
            a.iter().map(|x| x + x).collect::<Vec<_>>(),
            "{}",
            r.target
        );
    }
}

/// A naturally aligned 64-bit load (`global_load_dwordx2`, what a 64-bit atomic load
/// lowers to) is one access: while the host flips the cell between two values with whole
/// 64-bit stores, no lane ever sees half of one and half of the other.
#[test]
fn aligned_64_bit_loads_are_never_torn() {
    use std::sync::atomic::{AtomicBool, Ordering};
    const A: u64 = 0x1111_1111_2222_2222;
    const B: u64 = 0xeeee_eeee_dddd_dddd;
    for r in Rig::all() {
        let m = r.module("cl/torn64.cl");
        let cell = r
            .dev
            .alloc(kfdrt::MemoryKind::Signal, 0, 4096)
            .expect("signal memory");
        let c = cell.atomic_u64(0).unwrap();
        c.store(A, Ordering::Relaxed);
        let out = r.zeros(4 * 64);
        let stop = AtomicBool::new(false);
        std::thread::scope(|t| {
            t.spawn(|| {
                let mut flip = false;
                while !stop.load(Ordering::Relaxed) {
                    c.store(if flip { A } else { B }, Ordering::Relaxed);
                    flip = !flip;
                }
            });
            let res = r.run(&m, "torn64", 1, 64, 0, |x| {
                x.ptr(cell.va())?
                    .buffer(&out)?
                    .arg(&A)?
                    .arg(&B)?
                    .arg(&4000u32)?;
                Ok(())
            });
            stop.store(true, Ordering::Relaxed);
            res.unwrap_or_else(|e| panic!("{}: {e}", r.target));
        });
        let torn: Vec<u32> = read(&out, 64);
        assert_eq!(
            torn,
            vec![0u32; 64],
            "{}: torn 64-bit loads per lane",
            r.target
        );
    }
}
