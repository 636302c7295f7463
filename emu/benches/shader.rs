//! Shader-core throughput: saxpy over 16M elements, a tiled SGEMM 512x512x512, an ALU-bound
//! FMA chain (1M work-items x 1024 FMAs) and an LDS reduction over 16M uints on the emulated gfx942, against the same computation in plain
//! Rust on the host. Prints lane-instructions per second (active lanes of each vector
//! instruction, 1 per scalar instruction, counted by the shader core) per worker thread.
//! Set `KFD_EMU_SHADER_THREADS=1` / `=2` to compare worker counts (median of 5 runs).
//! `KFD_EMU_BENCH_SMALL=1` shrinks every problem 16x (sgemm 4x per side) and runs it once: a
//! size for `valgrind --tool=callgrind`, whose instruction counts do not depend on the load
//! of the machine (`KFD_EMU_BENCH_ONLY=saxpy` runs the lines whose name contains it).

#[path = "../tests/shader_common/mod.rs"]
mod shader_common;

use std::time::Instant;

use shader_common::*;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn lane_instrs(dev: &Dev) -> u64 {
    dev.eng
        .take_trace()
        .iter()
        .filter_map(|e| match &e.kind {
            kfd_emu::trace::TraceKind::Packet {
                name: "DISPATCH",
                disasm,
                ..
            } => disasm
                .split_whitespace()
                .find_map(|f| f.strip_prefix("lane_instructions="))
                .and_then(|v| v.parse::<u64>().ok()),
            _ => None,
        })
        .sum()
}

fn bench(
    name: &str,
    dev: &Dev,
    mut run: impl FnMut() -> u64,
    mut host: impl FnMut(),
    threads: usize,
) {
    if let Some(only) = std::env::var_os("KFD_EMU_BENCH_ONLY") {
        if !name.contains(only.to_str().unwrap_or("")) {
            return;
        }
    }
    let mut times = Vec::new();
    let mut lanes = 0;
    let runs = if small() { 1 } else { 5 };
    for _ in 0..runs {
        let t = Instant::now();
        lanes = run();
        times.push(t.elapsed().as_secs_f64());
    }
    let mut htimes = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        host();
        htimes.push(t.elapsed().as_secs_f64());
    }
    let (t, h) = (median(times), median(htimes));
    let _ = dev;
    if small() {
        println!("{name}: {lanes} lane-instructions");
    }
    println!(
        "{name:<22} {:>8.1} ms  {:>7.3} G lane-instr/s ({threads} worker(s), {:.3} per worker)  host Rust {:>7.2} ms  emu/host {:>6.1}x",
        t * 1e3,
        lanes as f64 / t / 1e9,
        lanes as f64 / t / 1e9 / threads as f64,
        h * 1e3,
        t / h
    );
}

fn small() -> bool {
    std::env::var_os("KFD_EMU_BENCH_SMALL").is_some()
}

fn main() {
    let div = if small() { 16 } else { 1 };
    let threads: usize = std::env::var("KFD_EMU_SHADER_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        });
    let dev = Dev::new("gfx942", 90402);
    dev.eng.trace().set_enabled(true);
    let mut q = dev.queue();

    // saxpy, 16M elements
    let n = (16 << 20) / div;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 77) as f32).collect();
    let (wx, wy) = (dev.upload(&x), dev.upload(&y));
    let m = dev.load("cl/isa/saxpy.cl");
    let args = Args::default().f32(2.0).ptr(&wx).ptr(&wy).u32(n as u32);
    let mut hy = y.clone();
    bench(
        "saxpy 16M",
        &dev,
        || {
            dev.run(
                &mut q,
                &m,
                "saxpy",
                [n as u32, 1, 1],
                [256, 1, 1],
                0,
                &args.0,
            )
            .expect("saxpy");
            lane_instrs(&dev)
        },
        || {
            for (o, &a) in hy.iter_mut().zip(&x) {
                *o = 2.0f32.mul_add(a, *o);
            }
            std::hint::black_box(&hy);
        },
        threads,
    );

    // SGEMM 512^3, 16x16 LDS tiles
    let n = if small() { 128usize } else { 512 };
    let a: Vec<f32> = (0..n * n).map(|i| (i % 17) as f32).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 13) as f32).collect();
    let (wa, wb, wc) = (dev.upload(&a), dev.upload(&b), dev.alloc(n * n * 4));
    let m = dev.load("cl/isa/matmul.cl");
    let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc).u32(n as u32);
    let mut hc = vec![0f32; n * n];
    bench(
        "sgemm 512^3 (tiled)",
        &dev,
        || {
            dev.run(
                &mut q,
                &m,
                "matmul",
                [n as u32, n as u32, 1],
                [16, 16, 1],
                0,
                &args.0,
            )
            .expect("matmul");
            lane_instrs(&dev)
        },
        || {
            for r in 0..n {
                for c in 0..n {
                    let mut acc = 0f32;
                    for k in 0..n {
                        acc = a[r * n + k].mul_add(b[k * n + c], acc);
                    }
                    hc[r * n + c] = acc;
                }
            }
            std::hint::black_box(&hc);
        },
        threads,
    );

    // ALU-bound: 1M work-items, each a chain of 64 x `iters` dependent FMAs
    let n = (1 << 20) / div;
    let iters = 16u32;
    let (a, b) = (0.5f32, 0.25f32);
    let wo = dev.alloc(n * 4);
    let m = dev.load("cl/isa/fma_chain.cl");
    let args = Args::default().ptr(&wo).f32(a).f32(b).u32(iters);
    let mut ho = vec![0f32; n];
    let ran = std::cell::Cell::new(false);
    bench(
        "FMA chain 1M x 1024",
        &dev,
        || {
            ran.set(true);
            dev.run(
                &mut q,
                &m,
                "fma_chain",
                [n as u32, 1, 1],
                [256, 1, 1],
                0,
                &args.0,
            )
            .expect("fma_chain");
            lane_instrs(&dev)
        },
        || {
            for (i, o) in ho.iter_mut().enumerate() {
                *o = fma_chain(i as u32, a, b, iters);
            }
            std::hint::black_box(&ho);
        },
        threads,
    );
    let got: Vec<f32> = dev.download(&wo, n);
    assert!(
        !ran.get()
            || got
                .iter()
                .enumerate()
                .all(|(i, g)| g.to_bits() == fma_chain(i as u32, a, b, iters).to_bits()),
        "fma_chain: the emulator's result differs from the host's"
    );

    // LDS reduction, 16M uints in groups of 256
    let n = (16 << 20) / div;
    let input: Vec<u32> = (0..n as u32).map(|i| i % 1000).collect();
    let (wi, wo) = (dev.upload(&input), dev.alloc(n / 256 * 4));
    let m = dev.load("cl/isa/reduce.cl");
    let args = Args::default().ptr(&wi).ptr(&wo);
    let mut ho = vec![0u32; n / 256];
    bench(
        "LDS reduction 16M",
        &dev,
        || {
            dev.run(
                &mut q,
                &m,
                "reduce",
                [n as u32, 1, 1],
                [256, 1, 1],
                0,
                &args.0,
            )
            .expect("reduce");
            lane_instrs(&dev)
        },
        || {
            for (o, c) in ho.iter_mut().zip(input.chunks(256)) {
                *o = c.iter().sum();
            }
            std::hint::black_box(&ho);
        },
        threads,
    );
}

/// `test-kernels/cl/isa/fma_chain.cl` for work-item `i` on the host.
fn fma_chain(i: u32, a: f32, b: f32, iters: u32) -> f32 {
    let mut x0 = i as f32 * f32::from_bits(0x3380_0000);
    let (mut x1, mut x2, mut x3) = (x0 + 0.25, x0 + 0.5, x0 + 0.75);
    for _ in 0..iters * 16 {
        x0 = x0.mul_add(a, b);
        x1 = x1.mul_add(a, x0);
        x2 = x2.mul_add(a, x1);
        x3 = x3.mul_add(a, x2);
    }
    x0 + x1 + x2 + x3
}
