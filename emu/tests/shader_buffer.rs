//! MUBUF buffer atomics and MTBUF typed loads/stores on the emulated gfx942 and gfx90a:
//! kernels build buffer resources and issue the instructions as inline asm
//! (`test-kernels/cl/isa_buffer_ops.cl`); results are checked against the CPU.

// Lane-indexed comparisons against CPU references.
#![allow(clippy::needless_range_loop)]

mod shader_common;
use shader_common::*;

/// The values a lane saw (`old`, with what it added) must chain: sorted by `old`, each
/// old value is the previous one plus the previous lane's addend, from `init`.
fn chained(mut seen: Vec<(u64, u64)>, init: u64, what: &str) -> u64 {
    seen.sort();
    let mut cur = init;
    for (old, add) in seen {
        assert_eq!(old, cur, "{what}: returned pre-op values do not chain");
        cur = cur.wrapping_add(add);
    }
    cur
}

#[test]
fn buffer_atomics_return_the_pre_op_value_and_are_range_checked() {
    let n = 256usize;
    let n_bytes = 96u32; // 24 dwords in range
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_buffer_ops.cl");
        let mut init = vec![0u32; 64];
        init[12] = 0x7FFF_FFFF; // smin cell
        init[20] = 0xFFFF_FFFF; // and cell
        for c in 24..28 {
            init[c] = 1000 + c as u32; // just past num_records
        }
        let (wb, wo) = (dev.upload(&init), dev.alloc(6 * n * 4));
        let args = Args::default().ptr(&wb).ptr(&wo).u32(n_bytes);
        dev.run_ok(
            &mut q,
            &m,
            "buf_atomics",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let b: Vec<u32> = dev.download(&wb, 64);
        let o: Vec<u32> = dev.download(&wo, 6 * n);
        let t = dev.target;
        for c in 0..8 {
            let seen = (0..n)
                .filter(|i| i % 8 == c)
                .map(|i| (o[6 * i] as u64, i as u64 + 1))
                .collect();
            let fin = chained(seen, 0, &format!("{t} add cell {c}"));
            assert_eq!(b[c] as u64, fin, "{t} add cell {c}");
        }
        for c in 0..4 {
            let want = (0..n)
                .filter(|i| i % 4 == c)
                .map(|i| (i as u32).wrapping_mul(2654435761))
                .max()
                .unwrap();
            assert_eq!(b[8 + c], want, "{t} umax cell {c}");
        }
        let smin: Vec<i32> = (0..n)
            .map(|i| (i as u32).wrapping_mul(40503) as i32 - 1_000_000)
            .collect();
        assert_eq!(b[12] as i32, *smin.iter().min().unwrap(), "{t} smin");
        for i in 0..n {
            // Each lane's returned value is the cell before its own min: the initial
            // value or some lane's value, never below the final minimum.
            let r = o[6 * i + 1] as i32;
            assert!(
                (r == i32::MAX || smin.contains(&r)) && r >= b[12] as i32,
                "{t} smin return lane {i}: {r}"
            );
        }
        let winners: Vec<usize> = (0..n).filter(|&i| o[6 * i + 2] == 0).collect();
        assert_eq!(winners.len(), 1, "{t} one 32-bit cmpswap wins");
        assert_eq!(b[13], winners[0] as u32 + 1, "{t} cmpswap value");
        for i in 0..n {
            assert!(
                o[6 * i + 2] == 0 || o[6 * i + 2] == b[13],
                "{t} cmpswap lane {i} returned {}",
                o[6 * i + 2]
            );
        }
        let step = (1u64 << 32) | 1;
        let seen = (0..n)
            .map(|i| (o[6 * i + 3] as u64 | (o[6 * i + 4] as u64) << 32, step))
            .collect();
        let fin = chained(seen, 0, &format!("{t} add_x2"));
        assert_eq!(b[16] as u64 | (b[17] as u64) << 32, fin, "{t} add_x2");
        let w64 = b[18] as u64 | (b[19] as u64) << 32;
        let winners: Vec<usize> = (0..n).filter(|&i| o[6 * i + 5] == 0).collect();
        assert_eq!(winners.len(), 1, "{t} one 64-bit cmpswap wins");
        assert_eq!(w64, winners[0] as u64 + 1, "{t} cmpswap_x2 value");
        assert_eq!(b[20], 0, "{t} and of every bit cleared");
        for c in 24..28 {
            assert_eq!(b[c], 1000 + c as u32, "{t} out-of-range atomic dropped");
        }
    }
}

#[test]
fn typed_buffer_loads_and_stores() {
    let n = 128usize;
    let valid = 100u32; // elements in range per view
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_buffer_ops.cl");
        // Random words, with the halves of the 16_16 FLOAT view made finite f16 values.
        let mut src = rand_u32(3 * n, 0x7B0F);
        for i in 0..n {
            let h = |x: u32| half::f16::from_f32((x % 2001) as f32 / 8.0 - 125.0).to_bits() as u32;
            src[i] = h(src[i]) | h(src[i] >> 11) << 16;
        }
        let (ws, wo) = (dev.upload(&src), dev.alloc(14 * n * 4));
        let args = Args::default().ptr(&ws).ptr(&wo).u32(valid);
        dev.run_ok(
            &mut q,
            &m,
            "tbuf_loads",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let o: Vec<u32> = dev.download(&wo, 14 * n);
        let bytes: Vec<u8> = src.iter().flat_map(|w| w.to_le_bytes()).collect();
        let t = dev.target;
        for i in 0..n {
            let ok = (i as u32) < valid;
            let g = |k: usize| o[14 * i + k];
            for c in 0..4 {
                let want = if ok {
                    bytes[4 * i + c] as i8 as i32 as u32
                } else {
                    0
                };
                assert_eq!(g(c), want, "{t} 8_8_8_8 SINT elem {i}.{c}");
            }
            for c in 0..2 {
                let h = u16::from_le_bytes([bytes[4 * i + 2 * c], bytes[4 * i + 2 * c + 1]]);
                let want = if ok {
                    half::f16::from_bits(h).to_f32()
                } else {
                    0.0
                };
                assert_eq!(
                    f32::from_bits(g(4 + c)),
                    want,
                    "{t} 16_16 FLOAT elem {i}.{c}"
                );
            }
            let h = u16::from_le_bytes([bytes[2 * i], bytes[2 * i + 1]]);
            let want = if ok { h as f32 } else { 0.0 };
            assert_eq!(f32::from_bits(g(6)), want, "{t} 16 USCALED elem {i}");
            for c in 0..3 {
                let want = if ok { src[3 * i + c] } else { 0 };
                assert_eq!(g(7 + c), want, "{t} 32_32_32 UINT elem {i}.{c}");
            }
            for c in 0..2 {
                let want = if ok {
                    bytes[4 * i + c] as i8 as f32
                } else {
                    0.0
                };
                assert_eq!(
                    f32::from_bits(g(10 + c)),
                    want,
                    "{t} 8_8_8_8 SSCALED {i}.{c}"
                );
            }
        }

        // Stores: dst element i = (src[2i + 1], src[2i]) for i < valid, the rest untouched.
        let f: Vec<f32> = (0..2 * n).map(|i| i as f32 * 1.5 - 7.0).collect();
        let (wf, wd) = (dev.upload(&f), dev.upload(&vec![-1.0f32; 2 * n]));
        let args = Args::default().ptr(&wf).ptr(&wd).u32(valid);
        dev.run_ok(
            &mut q,
            &m,
            "tbuf_store",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let d: Vec<f32> = dev.download(&wd, 2 * n);
        for i in 0..n {
            let want = if (i as u32) < valid {
                [f[2 * i + 1], f[2 * i]]
            } else {
                [-1.0, -1.0]
            };
            assert_eq!(
                [d[2 * i], d[2 * i + 1]],
                want,
                "{t} 32_32 FLOAT store elem {i}"
            );
        }

        // buffer_*_format with the V#'s formats and DST_SEL.
        let dst0 = vec![0xABCD_0123u32; 2 * 1024 + 4 * n];
        let (wsrc, wdst) = (dev.upload(&src), dev.upload(&dst0));
        let args = Args::default().ptr(&wsrc).ptr(&wdst).u32(valid);
        dev.run_ok(
            &mut q,
            &m,
            "buf_format",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let d: Vec<u32> = dev.download(&wdst, 2 * 1024 + 4 * n);
        for i in 0..n {
            let ok = (i as u32) < valid;
            let sb = |c: usize| {
                if ok {
                    bytes[4 * i + c] as i8 as i32 as u32
                } else {
                    0
                }
            };
            let v = [sb(1), sb(0), 0, sb(3)];
            assert_eq!(
                &d[2048 + 4 * i..2048 + 4 * i + 4],
                &v,
                "{t} load_format elem {i}"
            );
            let want = if ok {
                [v[0].wrapping_add(7), v[3] ^ i as u32]
            } else {
                [0xABCD_0123; 2]
            };
            assert_eq!([d[2 * i], d[2 * i + 1]], want, "{t} store_format elem {i}");
        }

        // UNORM is not modelled: the queue faults naming the instruction.
        let f = dev
            .run(&mut q, &m, "tbuf_unorm", [64, 1, 1], [64, 1, 1], 0, &{
                Args::default().ptr(&ws).ptr(&wo).0
            })
            .expect_err("UNORM must fault");
        assert!(
            f.reason.contains("tbuffer_load_format_x") && f.reason.contains("not modelled"),
            "{t}: {}",
            f.reason
        );
    }
}

/// An unsigned `width`-bit float (5-bit exponent, bias 15; Vulkan "Unsigned 11-Bit
/// Floating-Point Numbers") computed in f64.
fn ufloat(v: u32, width: u32) -> f32 {
    let mb = width - 5;
    let (e, m) = ((v >> mb) & 0x1F, v & ((1 << mb) - 1));
    match e {
        0 => (m as f64 * 2f64.powi(-14 - mb as i32)) as f32,
        31 if m == 0 => f32::INFINITY,
        31 => f32::NAN,
        _ => ((1 << mb | m) as f64 * 2f64.powi(e as i32 - 15 - mb as i32)) as f32,
    }
}

/// Packed formats (10_11_11 FLOAT, 2_10_10_10 SINT/USCALED) and D16 forms (8_8 SINT and
/// 16_16_16_16 FLOAT loads, a 16_16 UINT store) of MTBUF, range-checked per element.
#[test]
fn packed_and_d16_typed_forms() {
    let n = 128usize;
    let valid = 100u32;
    for dev in devices() {
        let mut q = dev.queue();
        let m = dev.load("cl/isa_buffer_ops.cl");
        let src = rand_u32(2 * n, 0x10_11_11);
        let dst0 = vec![0x5A5A_A5A5u32; n];
        let (ws, wo, wd) = (dev.upload(&src), dev.alloc(14 * n * 4), dev.upload(&dst0));
        let args = Args::default().ptr(&ws).ptr(&wo).ptr(&wd).u32(valid);
        dev.run_ok(
            &mut q,
            &m,
            "tbuf_packed_d16",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        let o: Vec<u32> = dev.download(&wo, 14 * n);
        let d: Vec<u32> = dev.download(&wd, n);
        let bytes: Vec<u8> = src.iter().flat_map(|w| w.to_le_bytes()).collect();
        let t = dev.target;
        for i in 0..n {
            let ok = (i as u32) < valid;
            let g = |k: usize| o[14 * i + k];
            let w = if ok { src[i] } else { 0 };
            let fl = [
                ufloat(w & 0x7FF, 11),
                ufloat(w >> 11 & 0x7FF, 11),
                ufloat(w >> 22, 10),
            ];
            for c in 0..3 {
                let got = f32::from_bits(g(c));
                assert!(
                    got.to_bits() == fl[c].to_bits() || (got.is_nan() && fl[c].is_nan()),
                    "{t} 10_11_11 FLOAT elem {i}.{c}: {got} want {}",
                    fl[c]
                );
            }
            let field = |sh: u32, bits: u32| (w >> sh) & ((1 << bits) - 1);
            let sx = |v: u32, bits: u32| ((v << (32 - bits)) as i32) >> (32 - bits);
            let parts = [(0, 10), (10, 10), (20, 10), (30, 2)];
            for (c, &(sh, b)) in parts.iter().enumerate() {
                let v = field(sh, b);
                assert_eq!(g(3 + c), sx(v, b) as u32, "{t} 2_10_10_10 SINT {i}.{c}");
                assert_eq!(f32::from_bits(g(7 + c)), v as f32, "{t} USCALED {i}.{c}");
            }
            let h = |k: usize| bytes[2 * i + k] as i8 as i16 as u16 as u32;
            let want = if ok { h(0) | h(1) << 16 } else { 0 };
            assert_eq!(g(11), want, "{t} 8_8 SINT D16 elem {i}");
            let want = if ok {
                [src[2 * i], src[2 * i + 1]]
            } else {
                [0, 0]
            };
            assert_eq!([g(12), g(13)], want, "{t} 16_16_16_16 FLOAT D16 elem {i}");
            let want = if ok {
                src[i].rotate_left(16)
            } else {
                0x5A5A_A5A5
            };
            assert_eq!(d[i], want, "{t} 16_16 UINT D16 store elem {i}");
        }
    }
}
