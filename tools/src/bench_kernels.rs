//! `kfdrt bench` kernel figures: the host cost of enqueueing an empty kernel and the
//! launch-to-completion latency, with the empty kernel embedded at build time.

use std::sync::atomic::{AtomicU32, Ordering};
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
/// lane-instructions per second per core (one worker), the speed-up on all host cores
/// (median time with one worker over median time on all cores, from interleaved pairs of
/// runs), the emulator's time (one worker) over the same computation in plain Rust on one
/// host core, the process CPU time of a run on all cores over a one-worker run (medians;
/// 1.0 when the workers add no work of their own, as contention would: unlike the
/// speed-up, it does not depend on how much CPU other processes leave), the time on
/// all cores, the machine's own ceiling (the same kind of work in plain Rust split over
/// 1 and all host threads: its speed-up), the emulator's speed-up over that ceiling, the
/// parallel efficiency (all-core runs over one-worker runs, see `efficiency`), the per-CPU
/// rate ratio (see `Rates`) and
/// the speed-up at equal CPU speeds (cores x efficiency x rate ratio: the speed-up without
/// the part that depends on which host CPU the one-worker runs landed on).
pub const SHADER_NAMES: &[&str] = &[
    "shader saxpy 16M: 1 worker",
    "shader saxpy 16M: lane-instructions/s per core",
    "shader saxpy 16M: speed-up on all cores",
    "shader saxpy 16M: emulator/host Rust time",
    "shader saxpy 16M: CPU time on all cores / 1 worker",
    "shader saxpy 16M: all cores",
    "shader saxpy 16M: native speed-up on all cores (machine ceiling)",
    "shader saxpy 16M: speed-up / native speed-up",
    "shader saxpy 16M: parallel efficiency (all cores / 1 worker)",
    "shader saxpy 16M: per-CPU rate, all cores / 1 worker",
    "shader saxpy 16M: speed-up at equal CPU speeds",
    "shader sgemm 512^3 tiled: 1 worker",
    "shader sgemm 512^3 tiled: lane-instructions/s per core",
    "shader sgemm 512^3 tiled: speed-up on all cores",
    "shader sgemm 512^3 tiled: emulator/host Rust time",
    "shader sgemm 512^3 tiled: CPU time on all cores / 1 worker",
    "shader sgemm 512^3 tiled: all cores",
    "shader sgemm 512^3 tiled: native speed-up on all cores (machine ceiling)",
    "shader sgemm 512^3 tiled: speed-up / native speed-up",
    "shader sgemm 512^3 tiled: parallel efficiency (all cores / 1 worker)",
    "shader sgemm 512^3 tiled: per-CPU rate, all cores / 1 worker",
    "shader sgemm 512^3 tiled: speed-up at equal CPU speeds",
    "shader LDS reduction 16M: 1 worker",
    "shader LDS reduction 16M: lane-instructions/s per core",
    "shader LDS reduction 16M: speed-up on all cores",
    "shader LDS reduction 16M: emulator/host Rust time",
    "shader LDS reduction 16M: CPU time on all cores / 1 worker",
    "shader LDS reduction 16M: all cores",
    "shader LDS reduction 16M: native speed-up on all cores (machine ceiling)",
    "shader LDS reduction 16M: speed-up / native speed-up",
    "shader LDS reduction 16M: parallel efficiency (all cores / 1 worker)",
    "shader LDS reduction 16M: per-CPU rate, all cores / 1 worker",
    "shader LDS reduction 16M: speed-up at equal CPU speeds",
    "shader FMA chain 1M x 1024 (ALU-bound): 1 worker",
    "shader FMA chain 1M x 1024 (ALU-bound): lane-instructions/s per core",
    "shader FMA chain 1M x 1024 (ALU-bound): speed-up on all cores",
    "shader FMA chain 1M x 1024 (ALU-bound): emulator/host Rust time",
    "shader FMA chain 1M x 1024 (ALU-bound): CPU time on all cores / 1 worker",
    "shader FMA chain 1M x 1024 (ALU-bound): all cores",
    "shader FMA chain 1M x 1024 (ALU-bound): native speed-up on all cores (machine ceiling)",
    "shader FMA chain 1M x 1024 (ALU-bound): speed-up / native speed-up",
    "shader FMA chain 1M x 1024 (ALU-bound): parallel efficiency (all cores / 1 worker)",
    "shader FMA chain 1M x 1024 (ALU-bound): per-CPU rate, all cores / 1 worker",
    "shader FMA chain 1M x 1024 (ALU-bound): speed-up at equal CPU speeds",
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
    // Pairs of runs (1 worker, all cores), interleaved.
    let reps = if quick { 2 } else { 5 };
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
    // The ceiling: the same streaming work on 1 and all threads (each a contiguous part,
    // stored lane by lane through relaxed atomics as the interpreter's memory port does),
    // 8 times over for a run of ~50 ms.
    let ny = atomic_f32s(n);
    let native = |t: usize, parts: usize| {
        for _ in 0..8 {
            for i in part(n, t, parts) {
                ny[i].store((2.0f32 * x[i] + y[i]).to_bits(), Ordering::Relaxed);
            }
        }
    };
    let names = &SHADER_NAMES[0..11];
    measure(
        &d, &eb, names, run, host, &native, cores, reps, want, progress, out,
    )?;

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
    // The ceiling: the host's loop over a part of the rows on each thread (every thread
    // reads all of `b`: the working set is the SGEMM's).
    let nc = atomic_f32s(n * n);
    let native = |t: usize, parts: usize| {
        for r in part(n, t, parts) {
            for c in 0..n {
                let mut acc = 0f32;
                for i in 0..n {
                    acc += a[r * n + i] * b[i * n + c];
                }
                nc[r * n + c].store(acc.to_bits(), Ordering::Relaxed);
            }
        }
    };
    let names = &SHADER_NAMES[11..22];
    measure(
        &d, &eb, names, run, host, &native, cores, reps, want, progress, out,
    )?;

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
    // The ceiling: the kernel's algorithm for a part of the groups on each thread (each
    // group copied to a 256-word local array, the LDS, and summed pairwise in halving
    // strides), 16 times over for ~100 ms.
    let no = atomic_f32s(n / 256);
    let native = |t: usize, parts: usize| {
        let mut lds = [0u32; 256];
        for _ in 0..16 {
            for g in part(n / 256, t, parts) {
                lds.copy_from_slice(&input[g * 256..(g + 1) * 256]);
                let mut w = 128;
                while w > 0 {
                    for l in 0..w {
                        lds[l] = lds[l].wrapping_add(lds[l + w]);
                    }
                    w >>= 1;
                }
                no[g].store(std::hint::black_box(lds[0]), Ordering::Relaxed);
            }
        }
    };
    let names = &SHADER_NAMES[22..33];
    measure(
        &d, &eb, names, run, host, &native, cores, reps, want, progress, out,
    )?;

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
    // The ceiling: the host's chain for a sixteenth of the work-items (~250 ms on one
    // thread: `f32::mul_add` is a libm call on an x86-64 baseline build, still ALU-bound).
    let nf = atomic_f32s(n / 16);
    let native = |t: usize, parts: usize| {
        for i in part(n / 16, t, parts) {
            nf[i].store(
                fma_chain(i as u32, fa, fb, iters).to_bits(),
                Ordering::Relaxed,
            );
        }
    };
    let names = &SHADER_NAMES[33..44];
    measure(
        &d, &eb, names, run, host, &native, cores, reps, want, progress, out,
    )?;
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

/// Part `t` of `parts` of `0..n` (contiguous, the parts together cover it once).
fn part(n: usize, t: usize, parts: usize) -> std::ops::Range<usize> {
    let parts = parts.max(1);
    n * t / parts..n * (t + 1) / parts
}

/// `n` words the native ceiling's threads store their results to.
fn atomic_f32s(n: usize) -> Vec<AtomicU32> {
    (0..n).map(|_| AtomicU32::new(0)).collect()
}

/// The host CPUs this process may run on (empty when unknown).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity writes at most
    // its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is valid and writable for the size passed.
    if unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) } != 0
    {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: `c` is below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Binds the calling thread to host CPU `cpu` (best effort: left unbound on failure).
fn pin_to(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` comes from `allowed_cpus`, below CPU_SETSIZE; `set` is a valid set of
    // the size passed.
    unsafe {
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Runs `work(t, threads)` for every part `t` on a new thread of its own, bound to the
/// process's allowed CPU number `first + t` (modulo their count): a new unbound thread
/// starts on its parent's CPU and waits for the load balancer to move it, which on a
/// loaded 2-CPU VM costs the native runs a large part of their speed-up (measured: 1.1-1.6x
/// unbound against 1.9-2.0x bound for the same loop). `first` rotates the one-thread runs
/// over the CPUs, as the host's CPUs need not run equally fast. Returns the wall-clock
/// seconds until every part finished.
fn on_threads(threads: usize, first: usize, work: &(dyn Fn(usize, usize) + Sync)) -> f64 {
    let cpus = allowed_cpus();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let cpu = (!cpus.is_empty()).then(|| cpus[(first + t) % cpus.len()]);
            s.spawn(move || {
                if let Some(c) = cpu {
                    pin_to(c);
                }
                work(t, threads)
            });
        }
    });
    t0.elapsed().as_secs_f64()
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

/// CPU time (user + system) this process used so far, in seconds
/// (CLOCK_PROCESS_CPUTIME_ID: nanoseconds, where `/proc/self/stat` counts 10 ms ticks).
fn process_cpu_seconds() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec; glibc's clock_gettime (not a raw vDSO
    // call, which valgrind's bench-insn-style runs cannot follow) fills it.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) } != 0 {
        return f64::NAN;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
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

/// One thread's scheduler figures (`/proc/self/task/TID/schedstat` and `status`).
#[derive(Debug, Clone, Default)]
struct TaskStat {
    comm: String,
    /// Time on a CPU and time runnable but waiting for one (ns).
    run_ns: u64,
    wait_ns: u64,
    voluntary: u64,
    involuntary: u64,
    /// Page faults that needed no I/O (`stat` field 10): first touches of a mapping.
    minflt: u64,
}

/// Every thread of this process by id (empty where /proc is not readable).
fn task_stats() -> std::collections::HashMap<u32, TaskStat> {
    let mut out = std::collections::HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(tid) = e.file_name().to_str().and_then(|t| t.parse::<u32>().ok()) else {
            continue;
        };
        let path = e.path();
        let read = |f: &str| std::fs::read_to_string(path.join(f)).unwrap_or_default();
        let sched: Vec<u64> = read("schedstat")
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        let status = read("status");
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0)
        };
        out.insert(
            tid,
            TaskStat {
                comm: read("comm").trim().to_string(),
                run_ns: sched.first().copied().unwrap_or(0),
                wait_ns: sched.get(1).copied().unwrap_or(0),
                voluntary: field("voluntary_ctxt_switches:"),
                involuntary: field("nonvoluntary_ctxt_switches:"),
                minflt: minflt(&read("stat")),
            },
        );
    }
    out
}

/// `minflt` (field 10) of a `/proc/.../stat` line; the command name (field 2) may hold
/// spaces, so the fields are counted after its closing parenthesis.
fn minflt(stat: &str) -> u64 {
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(7))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// What each thread of the process did between two [`task_stats`] snapshots (threads
/// that did not run are left out).
fn task_delta(
    before: &std::collections::HashMap<u32, TaskStat>,
    after: &std::collections::HashMap<u32, TaskStat>,
) -> Vec<TaskStat> {
    let mut v: Vec<TaskStat> = after
        .iter()
        .map(|(tid, a)| {
            let b = before.get(tid).cloned().unwrap_or_default();
            TaskStat {
                comm: a.comm.clone(),
                run_ns: a.run_ns.saturating_sub(b.run_ns),
                wait_ns: a.wait_ns.saturating_sub(b.wait_ns),
                voluntary: a.voluntary.saturating_sub(b.voluntary),
                involuntary: a.involuntary.saturating_sub(b.involuntary),
                minflt: a.minflt.saturating_sub(b.minflt),
            }
        })
        .filter(|t| t.run_ns > 0 || t.wait_ns > 0)
        .collect();
    v.sort_by_key(|t| std::cmp::Reverse(t.run_ns));
    v
}

/// One timed run of a shader workload.
struct Run {
    wall: f64,
    cpu: f64,
    lanes: u64,
    /// The run's dispatch profiles.
    prof: Vec<kfd_emu::shader_profile::DispatchProfile>,
}

/// A dispatch's parallel efficiency: the work-groups it ran per ms of its wall time over
/// the capacity of its wanted workers, each counted at the mean of the working threads'
/// own rates (work-groups per ms of each thread's CPU time): 1.0 when every wanted worker
/// worked for the whole dispatch; less for a worker that never joined or claimed nothing,
/// and for the time threads spent joining late, idle at the tail, or preempted (on a loaded machine: the share of a CPU
/// each got). Unlike the speed-up, it does not depend on
/// how fast each host CPU runs (the rates are each thread's own). `None` for an empty
/// dispatch.
fn efficiency(p: &kfd_emu::shader_profile::DispatchProfile) -> Option<f64> {
    // Every wanted worker counts at the mean rate of those that worked: one that claimed
    // nothing or never joined is capacity the dispatch did not use, not capacity it lacked.
    let rates: Vec<f64> = p
        .threads
        .iter()
        .filter(|t| t.cpu_ns > 0)
        .map(|t| t.workgroups as f64 / t.cpu_ns as f64)
        .collect();
    let wanted = p.threads_wanted.max(rates.len());
    let capacity = rates.iter().sum::<f64>() / rates.len().max(1) as f64 * wanted as f64;
    (capacity > 0.0 && p.wall_ns > 0).then(|| p.workgroups as f64 / p.wall_ns as f64 / capacity)
}

/// Work-groups per CPU ms of the all-core run's thread on the CPU the one-worker run
/// (`one`) stayed on, over the one-worker run's: `None` when the one-worker thread moved or
/// no all-core thread stayed on its CPU.
fn pair_rate_ratio(
    one: &[kfd_emu::shader_profile::DispatchProfile],
    all: &[kfd_emu::shader_profile::DispatchProfile],
) -> Option<f64> {
    let rate = |t: &kfd_emu::shader_profile::ThreadProfile| {
        (t.cpu_ns > 0).then(|| t.workgroups as f64 / t.cpu_ns as f64)
    };
    let t1 = one.first()?.threads.first()?;
    if t1.cpus.0 != t1.cpus.1 || t1.cpus.0 < 0 {
        return None;
    }
    let tn = all.first()?.threads.iter().find(|t| t.cpus == t1.cpus)?;
    Some(rate(tn)? / rate(t1)?)
}

/// Work-groups per CPU ms of each host CPU, in one-worker and all-core runs (threads that
/// moved between CPUs under -1): the host CPUs of a VM need not run equally fast, and a
/// slowdown that only running together causes (shared cache lines, memory bandwidth) shows
/// as a lower rate with all cores on the same CPU.
#[derive(Default)]
struct Rates {
    /// (host CPU, all cores?) -> rates.
    by_cpu: std::collections::BTreeMap<(i32, bool), Vec<f64>>,
}

impl Rates {
    fn add(&mut self, prof: &[kfd_emu::shader_profile::DispatchProfile], all: bool) {
        for t in prof.iter().flat_map(|p| &p.threads) {
            if t.cpu_ns > 0 {
                // -1: the thread moved between CPUs (or the CPU is unknown).
                let cpu = if t.cpus.0 == t.cpus.1 {
                    t.cpus.0.max(-1)
                } else {
                    -1
                };
                let rate = t.workgroups as f64 / (t.cpu_ns as f64 * 1e-6);
                self.by_cpu.entry((cpu, all)).or_default().push(rate);
            }
        }
    }

    fn med(&self, cpu: i32, all: bool) -> Option<f64> {
        self.by_cpu.get(&(cpu, all)).map(|v| median(v.clone()))
    }

    /// The median over host CPUs of (median all-core rate / median one-worker rate) on it;
    /// over all CPUs together when no CPU ran both (every one-worker run migrated).
    fn ratio(&self) -> f64 {
        let r: Vec<f64> = self
            .by_cpu
            .keys()
            .filter(|&&(cpu, all)| !all && cpu >= 0)
            .filter_map(|&(cpu, _)| Some(self.med(cpu, true)? / self.med(cpu, false)?))
            .collect();
        if !r.is_empty() {
            return median(r);
        }
        let all = |a: bool| {
            median(
                self.by_cpu
                    .iter()
                    .filter(|((_, x), _)| *x == a)
                    .flat_map(|(_, v)| v.iter().copied())
                    .collect(),
            )
        };
        all(true) / all(false)
    }

    fn describe(&self) -> String {
        let mut s = String::from("work-groups per CPU ms (median; 1 worker / all cores):");
        let cpus: std::collections::BTreeSet<i32> = self.by_cpu.keys().map(|k| k.0).collect();
        for cpu in cpus {
            let f = |all| self.med(cpu, all).map_or("-".into(), |v| format!("{v:.1}"));
            s += &format!(" CPU {cpu} {} / {}", f(false), f(true));
        }
        s
    }
}

/// Describes a run on stderr: the dispatch's threads (when each joined and left, its CPU
/// time, work-groups, claims and the last claim's size; the time the last one ran alone)
/// and every thread of the process that ran meanwhile (CPU time, time it waited for a
/// CPU, voluntary/involuntary context switches, minor page faults).
fn describe(
    label: &str,
    r: &Run,
    prof: &[kfd_emu::shader_profile::DispatchProfile],
    tasks: &[TaskStat],
) {
    let ms = |ns: u64| ns as f64 * 1e-6;
    let mut line = format!(
        "bench:   {label}: {:.1} ms, process CPU {:.1} ms",
        r.wall * 1e3,
        r.cpu * 1e3
    );
    for p in prof {
        let first = p.threads.iter().map(|t| t.left_ns).min().unwrap_or(0);
        let last = p.threads.iter().map(|t| t.left_ns).max().unwrap_or(0);
        line += &format!(
            "; dispatch {} groups on {}/{} threads, {:.1} ms, last thread alone {:.2} ms:",
            p.workgroups,
            p.threads.len(),
            p.threads_wanted,
            ms(p.wall_ns),
            ms(last - first)
        );
        for t in &p.threads {
            line += &format!(
                " [{:.2}-{:.1} ms cpu {:.1} {} wg/{} claims, last {}, on CPU {}->{}, {:.1} wg/cpu-ms]",
                ms(t.joined_ns),
                ms(t.left_ns),
                ms(t.cpu_ns),
                t.workgroups,
                t.claims,
                t.last_claim,
                t.cpus.0,
                t.cpus.1,
                t.workgroups as f64 / ms(t.cpu_ns).max(1e-3)
            );
        }
    }
    line += "; threads (cpu/wait ms, vol/invol cs, minor faults):";
    for t in tasks {
        line += &format!(
            " {} {:.1}/{:.1} {}/{} {}",
            t.comm,
            ms(t.run_ns),
            ms(t.wait_ns),
            t.voluntary,
            t.involuntary,
            t.minflt
        );
    }
    eprintln!("{line}");
}

/// Times `run` with one worker and with `cores` workers: `reps` pairs, interleaved (1, N,
/// N, 1, 1, N, ...: both see the same drift in other processes' load), each run
/// described on stderr. The figures are the median of each and the ratio of the medians
/// (the speed-up), and the median process CPU time with N workers over the one with one
/// worker (the work the extra workers add; unlike the speed-up, it does not depend on how
/// much CPU other processes leave); `host`, the same computation in plain Rust; and
/// `native(t, threads)` (part `t` of the same kind of work in plain Rust) on 1 and `cores`
/// threads, `reps` interleaved pairs: the speed-up the machine itself gives that work,
/// the ceiling the emulator's speed-up is compared with.
#[allow(clippy::too_many_arguments)]
fn measure(
    d: &Device,
    eb: &kfd_emu::EmuBackend,
    names: &[&'static str],
    mut run: Launch<'_>,
    mut host: impl FnMut(),
    native: &(dyn Fn(usize, usize) + Sync),
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
    eprintln!(
        "bench:   {reps} interleaved pairs of runs on 1 and {cores} worker threads; \
         figures: medians, speed-up = median(1) / median({cores})"
    );
    let s = d.create_stream_with_flags(0, kfdrt::StreamFlags::NON_BLOCKING)?;
    eb.enable_trace();
    kfd_emu::shader_profile::set_profiling(true);
    kfd_emu::shader_profile::take_profiles();
    let mut once = |threads: usize| -> Result<Run, Error> {
        eb.set_shader_threads(threads);
        lane_instructions(eb);
        let tasks0 = task_stats();
        let c0 = process_cpu_seconds();
        let t0 = Instant::now();
        run(&s)?;
        let wall = t0.elapsed().as_secs_f64();
        let cpu = process_cpu_seconds() - c0;
        let tasks = task_delta(&tasks0, &task_stats());
        let r = Run {
            wall,
            cpu,
            lanes: lane_instructions(eb),
            prof: kfd_emu::shader_profile::take_profiles(),
        };
        let label = if threads == 1 {
            "1 worker".to_string()
        } else {
            format!("{threads} workers")
        };
        describe(&label, &r, &r.prof, &tasks);
        Ok(r)
    };
    // The machine's ceiling: the same kind of work in plain Rust on 1 and `cores` threads
    // (bound to CPUs; the one-thread runs rotate over them), in the same interleaved pairs
    // as the emulator's runs (both see the same drift in the machine: its load and how
    // fast each host CPU runs at the time).
    let native_once = |threads: usize, first: usize| {
        let c0 = process_cpu_seconds();
        let t = on_threads(threads, first, native);
        (t, process_cpu_seconds() - c0)
    };
    let (mut t1, mut tn, mut c1, mut cn, mut lanes) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), 0);
    let (mut n1, mut nn, mut nc1, mut ncn) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut eff1, mut effn, mut rates) = (Vec::new(), Vec::new(), Rates::default());
    let mut pair_ratios = Vec::new();
    for i in 0..reps {
        let (a, b, na, nb) = if i % 2 == 0 {
            let a = once(1)?;
            let b = once(cores)?;
            let na = native_once(1, i);
            (a, b, na, native_once(cores, 0))
        } else {
            let b = once(cores)?;
            let a = once(1)?;
            let nb = native_once(cores, 0);
            (a, b, native_once(1, i), nb)
        };
        lanes = a.lanes;
        t1.push(a.wall);
        c1.push(a.cpu);
        tn.push(b.wall);
        cn.push(b.cpu);
        n1.push(na.0);
        nc1.push(na.1);
        nn.push(nb.0);
        ncn.push(nb.1);
        rates.add(&a.prof, false);
        rates.add(&b.prof, true);
        pair_ratios.extend(pair_rate_ratio(&a.prof, &b.prof));
        eff1.extend(a.prof.iter().filter_map(efficiency));
        effn.extend(b.prof.iter().filter_map(efficiency));
    }
    kfd_emu::shader_profile::set_profiling(false);
    let t1 = median(t1);
    let tn = median(tn);
    let speedup = t1 / tn;
    let cpu_ratio = median(cn) / median(c1);
    eb.set_shader_threads(0);
    eb.disable_trace();
    let mut h = Vec::new();
    for _ in 0..reps {
        let t0 = Instant::now();
        host();
        h.push(t0.elapsed().as_secs_f64());
    }
    let th = median(h);
    let (n1, nn) = (median(n1), median(nn));
    let native_speedup = n1 / nn;
    // Relative to the one-worker runs': on an idle machine those are ~1.0; on a loaded
    // one both are the share of a CPU the workers got (with sched_autogroup a process gets
    // one share however many threads it runs, so all cores get no more CPU than one).
    let (e1, en) = (median(eff1), median(effn));
    let efficiency = en / e1;
    // From the pairs (runs next to each other in time: the host CPUs' speeds drift), else
    // from the per-CPU medians of all runs.
    let rate_ratio = if pair_ratios.is_empty() {
        rates.ratio()
    } else {
        median(pair_ratios)
    };
    eprintln!(
        "bench:   native ceiling (plain Rust, the same kind of work): 1 thread {:.1} ms, \
         {cores} threads {:.1} ms: speed-up {native_speedup:.2}x, CPU time {cores} threads / 1 \
         thread {:.2}x; emulator speed-up {speedup:.2}x = {:.2} of the ceiling; parallel \
         efficiency {en:.3} (1 worker {e1:.3}); per-CPU rate all cores / 1 worker {rate_ratio:.3}; \
         speed-up at equal CPU speeds {:.2}x; {}",
        n1 * 1e3,
        nn * 1e3,
        median(ncn) / median(nc1),
        speedup / native_speedup,
        cores as f64 * efficiency * rate_ratio,
        rates.describe()
    );
    let figs = [
        (t1 * 1e3, "ms"),
        (lanes as f64 / t1 / 1e6, "M lane-instr/s"),
        (speedup, "x"),
        // One core each: the interpreter with one worker, the host loop on one thread.
        (t1 / th, "x"),
        // Left out if the clock was unreadable.
        (cpu_ratio, "x"),
        (tn * 1e3, "ms"),
        (native_speedup, "x"),
        (speedup / native_speedup, "x"),
        (efficiency, "x"),
        (rate_ratio, "x"),
        // What the speed-up would be if every host CPU ran as fast as the one the
        // one-worker runs had: what the emulator loses (idle, late joins, the tail,
        // slowing each other down), without which CPU a one-worker run landed on.
        (cores as f64 * efficiency * rate_ratio, "x"),
    ];
    for (name, (value, unit)) in names.iter().zip(figs) {
        if want(name) && value.is_finite() {
            out.push(Figure { name, value, unit });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kfd_emu::shader_profile::{DispatchProfile, ThreadProfile};

    fn thread(workgroups: u64, cpu_ns: u64, cpus: (i32, i32)) -> ThreadProfile {
        ThreadProfile {
            workgroups,
            cpu_ns,
            cpus,
            left_ns: cpu_ns,
            ..Default::default()
        }
    }

    fn dispatch(wall_ns: u64, threads: Vec<ThreadProfile>) -> DispatchProfile {
        DispatchProfile {
            workgroups: threads.iter().map(|t| t.workgroups).sum(),
            threads_wanted: threads.len(),
            wall_ns,
            threads,
        }
    }

    #[test]
    fn efficiency_is_work_per_wall_time_over_the_workers_own_rates() {
        // Two workers busy the whole 100 ms, one twice as fast: nothing lost.
        let p = dispatch(
            100,
            vec![thread(200, 100, (0, 0)), thread(100, 100, (1, 1))],
        );
        assert!((efficiency(&p).unwrap() - 1.0).abs() < 1e-9);
        // One worker ran only half the dispatch: a quarter of the capacity unused.
        let p = dispatch(100, vec![thread(100, 100, (0, 0)), thread(50, 50, (1, 1))]);
        assert!((efficiency(&p).unwrap() - 0.75).abs() < 1e-9);
        // The second of two wanted workers never joined (or joined and claimed nothing):
        // half the capacity unused, not an efficiency of 1.
        let mut p = dispatch(100, vec![thread(100, 100, (0, 0))]);
        p.threads_wanted = 2;
        assert!((efficiency(&p).unwrap() - 0.5).abs() < 1e-9);
        let p = dispatch(100, vec![thread(100, 100, (0, 0)), thread(0, 0, (1, 1))]);
        assert!((efficiency(&p).unwrap() - 0.5).abs() < 1e-9);
        // An empty dispatch has none.
        assert_eq!(efficiency(&dispatch(0, vec![])), None);
    }

    #[test]
    fn the_pair_rate_ratio_compares_the_same_cpu_only() {
        let one = [dispatch(100, vec![thread(100, 100, (1, 1))])];
        // The all-core thread on CPU 1 ran at 0.8 of the one-worker rate; CPU 0's does
        // not count.
        let all = [dispatch(
            100,
            vec![thread(300, 100, (0, 0)), thread(80, 100, (1, 1))],
        )];
        assert!((pair_rate_ratio(&one, &all).unwrap() - 0.8).abs() < 1e-9);
        // A one-worker thread that moved between CPUs, or no all-core thread on its
        // CPU: no ratio.
        let moved = [dispatch(100, vec![thread(100, 100, (0, 1))])];
        assert_eq!(pair_rate_ratio(&moved, &all), None);
        let elsewhere = [dispatch(100, vec![thread(100, 100, (2, 2))])];
        assert_eq!(pair_rate_ratio(&elsewhere, &all), None);
    }

    #[test]
    fn native_parts_cover_the_range_once() {
        for n in [0usize, 1, 7, 1000] {
            for parts in 1..4 {
                let mut covered = vec![0u32; n];
                for t in 0..parts {
                    for i in part(n, t, parts) {
                        covered[i] += 1;
                    }
                }
                assert!(covered.iter().all(|&c| c == 1), "{n} {parts}");
            }
        }
    }
}
