//! `kfdrt bench` kernel figures: the host cost of enqueueing an empty kernel and the
//! launch-to-completion latency, with the empty kernel embedded at build time.

use std::time::Instant;

use kfdrt::{Device, Error, ErrorKind, StreamFlags};

use crate::bench::{Figure, Scale};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The kernel figures, in run order.
pub const KERNEL_NAMES: [&str; 3] = [
    "kernel launch enqueue (empty kernel)",
    "kernel launch->completion (empty kernel, host spin)",
    "kernel launch enqueue (vadd: 4 arguments + hidden)",
];

/// Launches per timed batch: within one AQL ring (1024 slots) and the kernarg ring, so
/// the batch measures enqueueing, not waiting for space.
const BATCH: usize = 500;

/// Measure the kernel figures `want` selects; prints why when the device cannot run
/// them (no embedded kernel for its target, or no ISA execution on the emulator).
pub fn run(
    dev: &Device,
    scale: Scale,
    want: &dyn Fn(&str) -> bool,
    progress: &mut dyn FnMut(&str),
    out: &mut Vec<Figure>,
) -> Result<(), Error> {
    let names = KERNEL_NAMES;
    if !names.iter().any(|n| want(n)) {
        return Ok(());
    }
    let gfx = dev.gpu(0)?.gfx_name();
    let elf = match crate::check::kernels::embedded("cl/empty.cl", &gfx) {
        Ok(b) => b,
        Err(why) => {
            eprintln!("bench: kernel figures not measured: {why}");
            return Ok(());
        }
    };
    let m = dev.load_module(0, elf)?;
    let k = m.kernel("empty")?;
    let args = k.args();
    // A kernel with explicit and hidden arguments: each launch takes a kernarg segment.
    let vm = match crate::check::kernels::embedded("cl/vadd.cl", &gfx) {
        Ok(b) => Some(dev.load_module(0, b)?),
        Err(why) => {
            eprintln!("bench: {} not measured: {why}", names[2]);
            None
        }
    };
    // A probe on a stream of its own queue: a device that cannot execute the kernel
    // faults only that queue.
    let probe = dev.create_stream_with_cu_mask(0, &[u32::MAX; 4])?;
    probe.launch(&k, 1, 64, 0, &args)?;
    if let Err(e) = probe.synchronize() {
        eprintln!(
            "bench: kernel figures not measured: the device did not run an empty kernel: {e}"
        );
        return Ok(());
    }
    drop(probe);
    let s = dev.create_stream_with_flags(0, StreamFlags::NON_BLOCKING)?;
    s.launch(&k, 1, 64, 0, &args)?;
    s.synchronize()?;
    if want(names[0]) {
        progress(names[0]);
        let n = scale.n.clamp(1, BATCH);
        let mut v = Vec::new();
        for _ in 0..scale.rep.max(3) * 4 {
            let t0 = Instant::now();
            for _ in 0..n {
                s.launch(&k, 1, 64, 0, &args)?;
            }
            v.push(t0.elapsed().as_nanos() as f64 / n as f64);
            s.synchronize()?;
        }
        out.push(Figure {
            name: names[0],
            value: median(v),
            unit: "ns/op",
        });
    }
    if want(names[1]) {
        progress(names[1]);
        let mut v = Vec::new();
        for _ in 0..scale.samples.min(2000) {
            let t0 = Instant::now();
            s.launch(&k, 1, 64, 0, &args)?;
            loop {
                match s.query() {
                    Ok(()) => break,
                    Err(e) if e.kind() == ErrorKind::NotReady => std::hint::spin_loop(),
                    Err(e) => return Err(e),
                }
            }
            v.push(t0.elapsed().as_nanos() as f64);
        }
        out.push(Figure {
            name: names[1],
            value: median(v),
            unit: "ns",
        });
    }
    if let Some(vm) = vm.as_ref().filter(|_| want(names[2])) {
        progress(names[2]);
        let vk = vm.kernel("vadd")?;
        let buf = dev.alloc(kfdrt::MemoryKind::Device, 0, 4096)?;
        let vargs = vadd_args(&vk, buf.va())?;
        s.launch(&vk, 1, 64, 0, &vargs)?;
        s.synchronize()?;
        let n = scale.n.clamp(1, BATCH);
        let mut v = Vec::new();
        for _ in 0..scale.rep.max(3) * 4 {
            let t0 = Instant::now();
            for _ in 0..n {
                s.launch(&vk, 1, 64, 0, &vargs)?;
            }
            v.push(t0.elapsed().as_nanos() as f64 / n as f64);
            s.synchronize()?;
        }
        out.push(Figure {
            name: names[2],
            value: median(v),
            unit: "ns/op",
        });
    }
    Ok(())
}

/// `vadd`'s arguments for the launch figures: a, b, c at `va` (one workgroup of 64
/// floats each), n = 64.
pub fn vadd_args(k: &kfdrt::Kernel, va: u64) -> Result<kfdrt::KernelArgs, Error> {
    let mut a = k.args();
    a.ptr(va)?.ptr(va + 256)?.ptr(va + 512)?.arg(&64u32)?;
    Ok(a)
}

/// The shader-core figures: for each kernel, the time with one worker thread, the
/// lane-instructions per second per core (one worker), the speed-up on all host cores,
/// the emulator's time (one worker) over the same computation in plain Rust on one
/// host core, and the process CPU time of a run on all cores over a one-worker run (1.0
/// when the workers add no work of their own, as contention would: unlike the speed-up,
/// it does not depend on how much CPU other processes leave).
pub const SHADER_NAMES: &[&str] = &[
    "shader saxpy 16M: 1 worker",
    "shader saxpy 16M: lane-instructions/s per core",
    "shader saxpy 16M: speed-up on all cores",
    "shader saxpy 16M: emulator/host Rust time",
    "shader saxpy 16M: CPU time on all cores / 1 worker",
    "shader sgemm 512^3 tiled: 1 worker",
    "shader sgemm 512^3 tiled: lane-instructions/s per core",
    "shader sgemm 512^3 tiled: speed-up on all cores",
    "shader sgemm 512^3 tiled: emulator/host Rust time",
    "shader sgemm 512^3 tiled: CPU time on all cores / 1 worker",
    "shader LDS reduction 16M: 1 worker",
    "shader LDS reduction 16M: lane-instructions/s per core",
    "shader LDS reduction 16M: speed-up on all cores",
    "shader LDS reduction 16M: emulator/host Rust time",
    "shader LDS reduction 16M: CPU time on all cores / 1 worker",
    "shader FMA chain 1M x 1024 (ALU-bound): 1 worker",
    "shader FMA chain 1M x 1024 (ALU-bound): lane-instructions/s per core",
    "shader FMA chain 1M x 1024 (ALU-bound): speed-up on all cores",
    "shader FMA chain 1M x 1024 (ALU-bound): emulator/host Rust time",
    "shader FMA chain 1M x 1024 (ALU-bound): CPU time on all cores / 1 worker",
];

/// One shader workload: launches on `s` and waits (returns after completion).
type Launch<'a> = Box<dyn FnMut(&kfdrt::Stream) -> Result<(), Error> + 'a>;

/// Measure the shader figures `want` selects on a private emulated MI300X (gfx942): the
/// interpreter is what they measure, so a hardware device skips them. `--quick` runs
/// 1/16 of the sizes (1M-element saxpy and reduction, 128^3 sgemm).
pub fn shader(
    dev: &Device,
    scale: Scale,
    want: &dyn Fn(&str) -> bool,
    progress: &mut dyn FnMut(&str),
    out: &mut Vec<Figure>,
) -> Result<(), Error> {
    if !SHADER_NAMES.iter().any(|n| want(n)) {
        return Ok(());
    }
    if dev.backend().kind() != kfd::BackendKind::Emulated {
        eprintln!("bench: shader figures measure the emulator's interpreter; not on hardware");
        return Ok(());
    }
    let code = |src: &str| crate::check::kernels::embedded(src, "gfx942");
    let (saxpy, matmul, reduce, fma) = match (
        code("cl/isa/saxpy.cl"),
        code("cl/isa/matmul.cl"),
        code("cl/isa/reduce.cl"),
        code("cl/isa/fma_chain.cl"),
    ) {
        (Ok(a), Ok(b), Ok(c), Ok(d)) => (a, b, c, d),
        (Err(e), _, _, _) | (_, Err(e), _, _) | (_, _, Err(e), _) | (_, _, _, Err(e)) => {
            eprintln!("bench: shader figures not measured: {e}");
            return Ok(());
        }
    };
    let eb = std::sync::Arc::new(
        kfd_emu::EmuBackend::from_spec("emu:mi300x")
            .map_err(|e| Error::new(ErrorKind::NotSupported, "bench", e.to_string()))?,
    );
    let d = Device::with_backend(eb.clone())?;
    let quick = scale.n < Scale::FULL.n;
    let div = if quick { 16 } else { 1 };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let reps = if quick { 1 } else { 5 };
    let buf = |bytes: &[u8]| -> Result<kfdrt::Buffer, Error> {
        let b = d.alloc(kfdrt::MemoryKind::HostPinned, 0, bytes.len())?;
        b.write(0, bytes)?;
        Ok(b)
    };
    let f32s = |v: &[f32]| buf(zerocopy::IntoBytes::as_bytes(v));

    // saxpy
    let n = (16usize << 20) / div;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| (i % 77) as f32).collect();
    let (bx, by) = (f32s(&x)?, f32s(&y)?);
    let m = d.load_module(0, saxpy)?;
    let k = m.kernel("saxpy")?;
    let mut hy = y.clone();
    let run: Launch = Box::new(|s| {
        let mut a = k.args();
        a.arg(&2.0f32)?.buffer(&bx)?.buffer(&by)?.arg(&(n as u32))?;
        s.launch(&k, (n / 256) as u32, 256, 0, &a)?;
        s.synchronize()
    });
    let host = || {
        for (o, &a) in hy.iter_mut().zip(&x) {
            *o += 2.0f32 * a;
        }
        std::hint::black_box(&hy);
    };
    let names = &SHADER_NAMES[0..5];
    measure(&d, &eb, names, run, host, cores, reps, want, progress, out)?;

    // sgemm, 16x16 LDS tiles
    let n = 512usize / if quick { 4 } else { 1 };
    let a: Vec<f32> = (0..n * n).map(|i| (i % 17) as f32).collect();
    let b: Vec<f32> = (0..n * n).map(|i| (i % 13) as f32).collect();
    let (ba, bb, bc) = (f32s(&a)?, f32s(&b)?, f32s(&vec![0f32; n * n])?);
    let m = d.load_module(0, matmul)?;
    let k = m.kernel("matmul")?;
    let mut hc = vec![0f32; n * n];
    let run: Launch = Box::new(|s| {
        let mut x = k.args();
        x.buffer(&ba)?.buffer(&bb)?.buffer(&bc)?.arg(&(n as u32))?;
        s.launch(&k, ((n / 16) as u32, (n / 16) as u32), (16, 16), 0, &x)?;
        s.synchronize()
    });
    let host = || {
        for r in 0..n {
            for c in 0..n {
                let mut acc = 0f32;
                for i in 0..n {
                    acc += a[r * n + i] * b[i * n + c];
                }
                hc[r * n + c] = acc;
            }
        }
        std::hint::black_box(&hc);
    };
    let names = &SHADER_NAMES[5..10];
    measure(&d, &eb, names, run, host, cores, reps, want, progress, out)?;

    // LDS reduction in groups of 256
    let n = (16usize << 20) / div;
    let input: Vec<u32> = (0..n as u32).map(|i| i % 1000).collect();
    let bi = buf(zerocopy::IntoBytes::as_bytes(&input[..]))?;
    let bo = buf(&vec![0u8; n / 256 * 4])?;
    let m = d.load_module(0, reduce)?;
    let k = m.kernel("reduce")?;
    let mut ho = vec![0u32; n / 256];
    let run: Launch = Box::new(|s| {
        let mut x = k.args();
        x.buffer(&bi)?.buffer(&bo)?;
        s.launch(&k, (n / 256) as u32, 256, 0, &x)?;
        s.synchronize()
    });
    let host = || {
        for (o, c) in ho.iter_mut().zip(input.chunks(256)) {
            *o = c.iter().sum();
        }
        std::hint::black_box(&ho);
    };
    let names = &SHADER_NAMES[10..15];
    measure(&d, &eb, names, run, host, cores, reps, want, progress, out)?;

    // ALU-bound: each work-item a chain of 64 x `iters` dependent FMAs, one store
    let n = (1usize << 20) / div;
    let iters = 16u32;
    let (fa, fb) = (0.5f32, 0.25f32);
    let bo = buf(&vec![0u8; n * 4])?;
    let m = d.load_module(0, fma)?;
    let k = m.kernel("fma_chain")?;
    let mut ho = vec![0f32; n];
    let run: Launch = Box::new(|s| {
        let mut x = k.args();
        x.buffer(&bo)?.arg(&fa)?.arg(&fb)?.arg(&iters)?;
        s.launch(&k, (n / 256) as u32, 256, 0, &x)?;
        s.synchronize()
    });
    let host = || {
        for (i, o) in ho.iter_mut().enumerate() {
            *o = fma_chain(i as u32, fa, fb, iters);
        }
        std::hint::black_box(&ho);
    };
    let names = &SHADER_NAMES[15..20];
    measure(&d, &eb, names, run, host, cores, reps, want, progress, out)?;
    if names.iter().any(|n| want(n)) {
        // The figures count only if the interpreter computed the host's result.
        let mut got = vec![0u8; n * 4];
        bo.read(0, &mut got)?;
        let bad = got
            .chunks_exact(4)
            .enumerate()
            .find(|(i, c)| {
                let g = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                g != fma_chain(*i as u32, fa, fb, iters).to_bits()
            })
            .map(|(i, _)| i);
        if let Some(i) = bad {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "bench",
                format!("fma_chain: work-item {i} differs from the host's result"),
            ));
        }
    }
    Ok(())
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

/// CPU time (user + system) this process used so far, in seconds, from
/// `/proc/self/stat` (fields 14 and 15, in clock ticks of 1/100 s); NaN when unreadable.
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the command name (which may hold spaces) in parentheses; utime is the
    // 14th field, the 12th after the ')'.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    match (f.get(11), f.get(12)) {
        (Some(u), Some(s)) => match (u.parse::<f64>(), s.parse::<f64>()) {
            (Ok(u), Ok(s)) => (u + s) / 100.0,
            _ => f64::NAN,
        },
        _ => f64::NAN,
    }
}

/// Lane-instructions the dispatches recorded since the last call (from the trace).
fn lane_instructions(eb: &kfd_emu::EmuBackend) -> u64 {
    eb.take_trace()
        .iter()
        .map(|e| match e.kind {
            kfd_emu::trace::TraceKind::Dispatch {
                lane_instructions, ..
            } => lane_instructions,
            _ => 0,
        })
        .sum()
}

/// Times `run` with one worker and with `cores` workers (`reps` alternating pairs:
/// the one-worker median, the median of the pairs' ratios), and `host`.
#[allow(clippy::too_many_arguments)]
fn measure(
    d: &Device,
    eb: &kfd_emu::EmuBackend,
    names: &[&'static str],
    mut run: Launch<'_>,
    mut host: impl FnMut(),
    cores: usize,
    reps: usize,
    want: &dyn Fn(&str) -> bool,
    progress: &mut dyn FnMut(&str),
    out: &mut Vec<Figure>,
) -> Result<(), Error> {
    if !names.iter().any(|n| want(n)) {
        return Ok(());
    }
    progress(names[0]);
    let s = d.create_stream_with_flags(0, kfdrt::StreamFlags::NON_BLOCKING)?;
    eb.enable_trace();
    let mut once = |threads: usize| -> Result<(f64, u64, f64), Error> {
        eb.set_shader_threads(threads);
        lane_instructions(eb);
        let c0 = process_cpu_seconds();
        let t0 = Instant::now();
        run(&s)?;
        let t = t0.elapsed().as_secs_f64();
        let cpu = process_cpu_seconds() - c0;
        Ok((t, lane_instructions(eb), cpu))
    };
    // One worker and all cores alternate, and the speed-up is the median of each pair's
    // ratio: a pair runs back to back, under about the same load from other processes
    // (a block of one-worker runs, then a block of all-core runs, measures load changes).
    let (mut v1, mut ratios, mut lanes) = (Vec::new(), Vec::new(), 0);
    let (mut cpu1, mut cpun) = (0.0, 0.0);
    for _ in 0..reps {
        let (a, l, c1) = once(1)?;
        let (b, _, cn) = once(cores)?;
        v1.push(a);
        ratios.push(a / b);
        lanes = l;
        cpu1 += c1;
        cpun += cn;
    }
    let t1 = median(v1);
    let speedup = median(ratios);
    eb.set_shader_threads(0);
    eb.disable_trace();
    let mut h = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        host();
        h.push(t0.elapsed().as_secs_f64());
    }
    let th = median(h);
    let figs = [
        (t1 * 1e3, "ms"),
        (lanes as f64 / t1 / 1e6, "M lane-instr/s"),
        (speedup, "x"),
        // One core each: the interpreter with one worker, the host loop on one thread.
        (t1 / th, "x"),
        // Summed over the runs: the clock ticks at 100 Hz, so a short (--quick) run may
        // have none to compare (then the figure is left out).
        (cpun / cpu1, "x"),
    ];
    for (name, (value, unit)) in names.iter().zip(figs) {
        if want(name) && value.is_finite() {
            out.push(Figure { name, value, unit });
        }
    }
    Ok(())
}
