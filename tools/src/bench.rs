//! `kfdrt bench`: host-side cost and round-trip latency of the runtime's stream, event and
//! callback calls, with the names of `shared/anchors/cuda_h200.txt` so the two compare
//! line by line. Every figure is a median over repeats.
//!
//! Enqueue figures time batches of [`ENQUEUE_BATCH`] calls, well below a queue's ring
//! size, and synchronize between batches outside the timed region: they measure what
//! the host spends per call, not how fast the device drains the ring.
//!
//! Instruction counts ([`insn_figures`]) do not drift with machine load: each operation
//! runs in a child process under `valgrind --tool=callgrind`, collecting only inside a
//! probe function that wraps the call (on the calling thread), divided by the calls.
//! The floor is the same count for a bare 64-byte ring write (block copy of the body,
//! release store of the header, as every submission writes a slot), release store of
//! the write pointer, doorbell store and the backend's doorbell notification (a no-op on
//! hardware, the emulator's CP wake-up) on a raw AQL queue: what any enqueue must do.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use kfdrt::{
    AttachFlags, Device, EventFlags, MemoryKind, StreamFlags, WaitCompare, WriteValueFlags,
};

/// Calls per timed enqueue batch (a quarter of a stream queue's 1024-slot ring).
pub const ENQUEUE_BATCH: usize = 256;

/// One reported figure.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Name as in the CUDA anchor file.
    pub name: &'static str,
    /// Median value.
    pub value: f64,
    /// Unit (`ns/op`, `ns`, ...).
    pub unit: &'static str,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn ns(t0: Instant) -> f64 {
    t0.elapsed().as_nanos() as f64
}

/// Median over `rep` repeats of the per-call time of `n` calls of `op(i)`, timed in
/// batches of [`ENQUEUE_BATCH`] with `between()` (untimed) after each batch.
fn batched(
    n: usize,
    rep: usize,
    mut op: impl FnMut(usize) -> Result<(), kfdrt::Error>,
    mut between: impl FnMut() -> Result<(), kfdrt::Error>,
) -> Result<f64, kfdrt::Error> {
    let mut v = Vec::new();
    for _ in 0..rep {
        let mut t = 0.0;
        let mut done = 0;
        while done < n {
            let b = ENQUEUE_BATCH.min(n - done);
            let t0 = Instant::now();
            for i in 0..b {
                op(i)?;
            }
            t += ns(t0);
            done += b;
            between()?;
        }
        v.push(t / n as f64);
    }
    Ok(median(v))
}

/// Sizes of a run (small for tests, full for reports).
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    /// Operations per timed batch.
    pub n: usize,
    /// Timed repeats.
    pub rep: usize,
    /// Samples for latency figures.
    pub samples: usize,
}

impl Scale {
    /// The figures `kfdrt bench` reports.
    pub const FULL: Scale = Scale {
        n: 20_000,
        rep: 7,
        samples: 2000,
    };
    /// A quick pass (`--quick`, tests).
    pub const QUICK: Scale = Scale {
        n: 500,
        rep: 3,
        samples: 50,
    };
}

/// Run the benchmarks whose name contains `filter`; `progress` is told each name first.
pub fn run(
    dev: &Device,
    scale: Scale,
    filter: Option<&str>,
    mut progress: impl FnMut(&str),
) -> Result<Vec<Figure>, kfdrt::Error> {
    let want = |name: &str| filter.is_none_or(|f| name.contains(f));
    let mut out = Vec::new();
    let Scale { n, rep, samples } = scale;
    let s = dev.create_stream_with_flags(0, StreamFlags::NON_BLOCKING)?;
    let s2 = dev.create_stream_with_flags(0, StreamFlags::NON_BLOCKING)?;
    let mem = dev.alloc(MemoryKind::Signal, 0, 4096)?;
    let flag = mem.atomic_u32(0)?;
    let back = mem.atomic_u32(64)?;
    let va = mem.va();
    let mut fig = |name: &'static str, value: f64, unit: &'static str| {
        debug_assert!(NAMES.contains(&name), "{name} missing from bench::NAMES");
        out.push(Figure { name, value, unit })
    };

    let name = "writeValue32 enqueue";
    if want(name) {
        progress(name);
        let v = batched(
            n,
            rep,
            |i| s.write_value32(va + 128, i as u32, WriteValueFlags::DEFAULT),
            || s.synchronize(),
        )?;
        fig(name, v, "ns/op");
    }
    let name = "waitValue32 enqueue (true)";
    if want(name) {
        progress(name);
        s.write_value32(va + 128, 5, WriteValueFlags::DEFAULT)?;
        s.synchronize()?;
        let v = batched(
            n,
            rep,
            |_| s.wait_value32(va + 128, 5, WaitCompare::Gte, u32::MAX),
            || s.synchronize(),
        )?;
        fig(name, v, "ns/op");
    }
    let name = "writeValue32 round trip (host spin)";
    if want(name) {
        progress(name);
        let mut v = Vec::new();
        for i in 1..=samples as u32 {
            let t0 = Instant::now();
            s.write_value32(va, i, WriteValueFlags::DEFAULT)?;
            while flag.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            v.push(ns(t0));
        }
        fig(name, median(v), "ns");
    }
    let name = "host->waitValue32->writeValue32 ping";
    if want(name) {
        progress(name);
        flag.store(0, Ordering::Release);
        back.store(0, Ordering::Release);
        let mut v = Vec::new();
        for i in 1..=samples as u32 {
            s.wait_value32(va, i, WaitCompare::Gte, u32::MAX)?;
            s.write_value32(va + 64, i, WriteValueFlags::DEFAULT)?;
            let t0 = Instant::now();
            flag.store(i, Ordering::Release);
            while back.load(Ordering::Acquire) != i {
                std::hint::spin_loop();
            }
            v.push(ns(t0));
        }
        fig(name, median(v), "ns");
    }
    let e = dev.create_event(EventFlags::DISABLE_TIMING)?;
    let name = "eventRecord+eventSynchronize idle";
    if want(name) {
        progress(name);
        s.synchronize()?;
        let mut v = Vec::new();
        for _ in 0..samples {
            let t0 = Instant::now();
            e.record(&s)?;
            e.synchronize()?;
            v.push(ns(t0));
        }
        fig(name, median(v), "ns");
    }
    let name = "eventRecord+eventSynchronize blocking";
    if want(name) {
        progress(name);
        let eb = dev.create_event(EventFlags::BLOCKING_SYNC | EventFlags::DISABLE_TIMING)?;
        let mut v = Vec::new();
        for _ in 0..samples {
            let t0 = Instant::now();
            eb.record(&s)?;
            eb.synchronize()?;
            v.push(ns(t0));
        }
        fig(name, median(v), "ns");
    }
    let name = "eventRecord enqueue";
    if want(name) {
        progress(name);
        // Timed in batches: a clock read costs about as much as the call itself.
        let v = batched(n, rep, |_| e.record(&s), || Ok(()))?;
        fig(name, v, "ns");
        s.synchronize()?;
    }
    let name = "record/waitEvent ping-pong (2 streams)";
    if want(name) {
        progress(name);
        let e1 = dev.create_event(EventFlags::DISABLE_TIMING)?;
        let e2 = dev.create_event(EventFlags::DISABLE_TIMING)?;
        let rounds = (samples / 2).max(10);
        let mut v = Vec::new();
        for _ in 0..rep {
            let t0 = Instant::now();
            for i in 0..rounds {
                // A write on each side gives every record a real packet to follow.
                s.write_value32(va + 192, i as u32, WriteValueFlags::DEFAULT)?;
                e1.record(&s)?;
                s2.wait_event(&e1, 0)?;
                s2.write_value32(va + 196, i as u32, WriteValueFlags::DEFAULT)?;
                e2.record(&s2)?;
                s.wait_event(&e2, 0)?;
            }
            s.synchronize()?;
            v.push(ns(t0) / rounds as f64);
        }
        fig(name, median(v), "ns/round");
    }
    let name = "streamQuery idle";
    if want(name) {
        progress(name);
        s.synchronize()?;
        let mut v = Vec::new();
        for _ in 0..rep {
            let t0 = Instant::now();
            for _ in 0..n {
                s.query()?;
            }
            v.push(ns(t0) / n as f64);
        }
        fig(name, median(v), "ns/op");
    }
    let name = "streamSynchronize idle";
    if want(name) {
        progress(name);
        let mut v = Vec::new();
        for _ in 0..rep {
            let t0 = Instant::now();
            for _ in 0..n {
                s.synchronize()?;
            }
            v.push(ns(t0) / n as f64);
        }
        fig(name, median(v), "ns/op");
    }
    let name = "addCallback enqueue->run latency";
    if want(name) {
        progress(name);
        let epoch = Instant::now();
        let ran = Arc::new(AtomicU64::new(0));
        let mut v = Vec::new();
        for i in 1..=samples as u64 {
            let r = ran.clone();
            let t0 = epoch.elapsed().as_nanos() as u64;
            s.add_callback(
                move |_| {
                    r.store(
                        epoch.elapsed().as_nanos() as u64 | 1 << 63,
                        Ordering::Release,
                    );
                },
                0,
            )?;
            let mut t;
            loop {
                t = ran.swap(0, Ordering::AcqRel);
                if t != 0 {
                    break;
                }
                std::hint::spin_loop();
            }
            let _ = i;
            v.push(((t & !(1 << 63)).saturating_sub(t0)) as f64);
        }
        fig(name, median(v), "ns");
    }
    let name = "addCallback throughput";
    if want(name) {
        progress(name);
        let count = Arc::new(AtomicU64::new(0));
        let per = (samples * 2).max(20);
        let mut v = Vec::new();
        for _ in 0..3 {
            let c0 = count.load(Ordering::Acquire);
            let t0 = Instant::now();
            for _ in 0..per {
                let c = count.clone();
                s.add_callback(
                    move |_| {
                        c.fetch_add(1, Ordering::AcqRel);
                    },
                    0,
                )?;
            }
            s.synchronize()?;
            while count.load(Ordering::Acquire) - c0 != per as u64 {
                std::thread::yield_now();
            }
            v.push(ns(t0) / per as f64);
        }
        fig(name, median(v), "ns/callback");
    }
    let name = "streamCreate+Destroy";
    if want(name) {
        progress(name);
        let (_, hi) = dev.stream_priority_range();
        let pairs = (samples / 2).max(10);
        let mut v = Vec::new();
        for _ in 0..rep {
            let t0 = Instant::now();
            for _ in 0..pairs {
                let t = dev.create_stream_with_priority(0, StreamFlags::NON_BLOCKING, hi)?;
                drop(t);
            }
            v.push(ns(t0) / pairs as f64);
        }
        fig(name, median(v), "ns/pair");
    }
    // Stream-ordered allocator, as cuda_streamops.cu section 9 (default pool, threshold 0).
    let name = "mallocAsync+freeAsync 1MiB same stream";
    if want(name) {
        progress(name);
        let p = s.malloc_async(1 << 20)?;
        p.free_async(&s)?;
        s.synchronize()?;
        let mut v = Vec::new();
        for _ in 0..rep {
            let t0 = Instant::now();
            for _ in 0..n {
                let p = s.malloc_async(1 << 20)?;
                p.free_async(&s)?;
            }
            v.push(ns(t0) / n as f64);
            s.synchronize()?;
        }
        fig(name, median(v), "ns/pair");
    }
    let name = "mallocAsync/freeAsync mixed 64 live";
    if want(name) {
        progress(name);
        let sizes = [256usize, 4096, 65536, 1 << 20, 8 << 20];
        let iters = (n / 50).max(8);
        let mut ps: [Option<kfdrt::PoolAlloc>; 64] = std::array::from_fn(|_| None);
        let mut v = Vec::new();
        for _ in 0..rep {
            let t0 = Instant::now();
            for i in 0..iters {
                for (k, p) in ps.iter_mut().enumerate() {
                    *p = Some(s.malloc_async(sizes[(k * 7 + i) % 5])?);
                }
                // Free in a scattered order (13 is coprime with 64: each slot once).
                for k in 0..64 {
                    if let Some(p) = ps[(k * 13) % 64].take() {
                        p.free_async(&s)?;
                    }
                }
            }
            v.push(ns(t0) / (iters * 64) as f64);
            s.synchronize()?;
        }
        fig(name, median(v), "ns/pair");
    }
    crate::bench_kernels::run(dev, scale, &want, &mut progress, &mut out)?;
    crate::bench_kernels::shader(dev, scale, &want, &mut progress, &mut out)?;
    managed_vmm(dev, scale, &want, &mut progress, &mut out)?;
    Ok(out)
}

/// Every figure `run` can produce, in run order (`--filter` is checked against these
/// before the device is opened).
pub const NAMES: &[&str] = &[
    "writeValue32 enqueue",
    "waitValue32 enqueue (true)",
    "writeValue32 round trip (host spin)",
    "host->waitValue32->writeValue32 ping",
    "eventRecord+eventSynchronize idle",
    "eventRecord+eventSynchronize blocking",
    "eventRecord enqueue",
    "record/waitEvent ping-pong (2 streams)",
    "streamQuery idle",
    "streamSynchronize idle",
    "addCallback enqueue->run latency",
    "addCallback throughput",
    "streamCreate+Destroy",
    "mallocAsync+freeAsync 1MiB same stream",
    "mallocAsync/freeAsync mixed 64 live",
    "vmm addressReserve 2MiB",
    "vmm memCreate 2MiB",
    "vmm memMap 2MiB",
    "vmm setAccess 2MiB",
    "vmm unmap+release+free 2MiB",
    "memAdvise preferredLocation 256MiB",
    "memRangeGetAttribute 256MiB",
    "prefetch host->device 256MiB",
    "prefetch device->host 256MiB",
    "host memcpy 256MiB",
    "streamAttachMemAsync single + sync",
];

/// Whether `filter` selects at least one figure.
pub fn filter_matches(filter: &str) -> bool {
    NAMES
        .iter()
        .chain(crate::bench_kernels::SHADER_NAMES)
        .chain(&crate::bench_kernels::KERNEL_NAMES)
        .any(|n| n.contains(filter))
        || INSN.iter().any(|(n, _)| n.contains(filter))
}

/// Figures the CUDA anchor has that this build does not measure yet (reported as such).
pub const NOT_YET: &[&str] = &[];

/// Parse an anchor file (`NAME   VALUE UNIT` lines) into (name, value, unit).
pub fn parse_anchor(text: &str) -> Vec<(String, f64, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let toks: Vec<&str> = line.split_whitespace().collect();
        if toks.len() < 3 {
            continue;
        }
        // VALUE is the second-to-last token and must be a number.
        let Ok(v) = toks[toks.len() - 2].parse::<f64>() else {
            continue;
        };
        let name = toks[..toks.len() - 2].join(" ");
        out.push((name, v, toks[toks.len() - 1].to_string()));
    }
    out
}

/// Managed-memory and virtual-memory-management figures, named as in the CUDA
/// anchor. Prefetch bandwidth is reported with the host memcpy bandwidth of the same
/// size beside it ("host memcpy 256MiB"), so the fraction can be read off. On the
/// emulator a migration copies the range into (or out of) emulated VRAM and remaps it at
/// the same address (firmware-notes/kfd-svm.md), so the figures measure those copies.
fn managed_vmm(
    dev: &Device,
    scale: Scale,
    want: &dyn Fn(&str) -> bool,
    progress: &mut dyn FnMut(&str),
    out: &mut Vec<Figure>,
) -> Result<(), kfdrt::Error> {
    use kfdrt::{AccessDesc, AccessFlags, HandleType, Location};
    use kfdrt::{MemAllocationProp, MemRangeAttribute, MemoryAdvise};
    const MIB: usize = 1 << 20;
    let mut fig = |name: &'static str, value: f64, unit: &'static str| {
        debug_assert!(NAMES.contains(&name), "{name} missing from bench::NAMES");
        out.push(Figure { name, value, unit })
    };

    let vmm_names = [
        "vmm addressReserve 2MiB",
        "vmm memCreate 2MiB",
        "vmm memMap 2MiB",
        "vmm setAccess 2MiB",
        "vmm unmap+release+free 2MiB",
    ];
    if vmm_names.iter().any(|n| want(n)) {
        progress("vmm 2MiB cycle");
        let prop = MemAllocationProp::device(0, HandleType::None);
        let desc = [AccessDesc::new(Location::Gpu(0), AccessFlags::ReadWrite)];
        let iters = (scale.samples / 4).max(10);
        let mut t: [Vec<f64>; 5] = Default::default();
        for _ in 0..iters {
            let t0 = Instant::now();
            let va = dev.mem_address_reserve(2 * MIB, 0, 0, 0)?;
            t[0].push(ns(t0));
            let t0 = Instant::now();
            let h = dev.mem_create(2 * MIB, &prop, 0)?;
            t[1].push(ns(t0));
            let t0 = Instant::now();
            dev.mem_map(va, 2 * MIB, 0, h, 0)?;
            t[2].push(ns(t0));
            let t0 = Instant::now();
            dev.mem_set_access(va, 2 * MIB, &desc)?;
            t[3].push(ns(t0));
            let t0 = Instant::now();
            dev.mem_unmap(va, 2 * MIB)?;
            dev.mem_release(h)?;
            dev.mem_address_free(va, 2 * MIB)?;
            t[4].push(ns(t0));
        }
        for (name, v) in vmm_names.into_iter().zip(t) {
            if want(name) {
                fig(name, median(v), "ns");
            }
        }
    }

    let managed_names = [
        "memAdvise preferredLocation 256MiB",
        "memRangeGetAttribute 256MiB",
        "prefetch host->device 256MiB",
        "prefetch device->host 256MiB",
        "streamAttachMemAsync single + sync",
    ];
    if !managed_names.iter().any(|n| want(n)) {
        return Ok(());
    }
    let size = 256 * MIB;
    let m = dev.malloc_managed(size, AttachFlags::GLOBAL)?;
    let ones = vec![1u8; size];
    m.write(0, &ones)?; // touch every page
    let s = dev.create_stream_with_flags(0, StreamFlags::NON_BLOCKING)?;
    let name = "memAdvise preferredLocation 256MiB";
    if want(name) {
        progress(name);
        let mut v = Vec::new();
        for i in 0..(scale.samples / 4).max(10) {
            let loc = if i % 2 == 0 {
                Location::Gpu(0)
            } else {
                Location::Host
            };
            let t0 = Instant::now();
            dev.mem_advise(m.ptr(), size, MemoryAdvise::SetPreferredLocation, loc)?;
            v.push(ns(t0));
        }
        fig(name, median(v), "ns");
    }
    let name = "memRangeGetAttribute 256MiB";
    if want(name) {
        progress(name);
        let mut v = Vec::new();
        let mut data = [0u8; 4];
        for _ in 0..scale.samples {
            let t0 = Instant::now();
            dev.mem_range_get_attribute(
                &mut data,
                MemRangeAttribute::PreferredLocation,
                m.ptr(),
                size,
            )?;
            v.push(ns(t0));
        }
        fig(name, median(v), "ns");
    }
    let gbs = |t: f64| size as f64 / t; // bytes per ns = GB/s
    if want("prefetch host->device 256MiB") || want("prefetch device->host 256MiB") {
        progress("prefetch 256MiB");
        let (mut h2d, mut d2h) = (Vec::new(), Vec::new());
        for _ in 0..scale.rep.max(3) {
            let t0 = Instant::now();
            dev.mem_prefetch_async(m.ptr(), size, Location::Gpu(0), &s)?;
            s.synchronize()?;
            h2d.push(gbs(ns(t0)));
            let t0 = Instant::now();
            dev.mem_prefetch_async(m.ptr(), size, Location::Host, &s)?;
            s.synchronize()?;
            d2h.push(gbs(ns(t0)));
        }
        let mut dst = vec![0u8; size];
        let mut hm = Vec::new();
        for _ in 0..3 {
            let t0 = Instant::now();
            dst.copy_from_slice(std::hint::black_box(&ones));
            hm.push(gbs(ns(t0)));
        }
        std::hint::black_box(&dst);
        for (name, v) in [
            ("prefetch host->device 256MiB", h2d),
            ("prefetch device->host 256MiB", d2h),
        ] {
            if want(name) {
                fig(name, median(v), "GB/s");
            }
        }
        fig("host memcpy 256MiB", median(hm), "GB/s");
    }
    let name = "streamAttachMemAsync single + sync";
    if want(name) {
        progress(name);
        let mut v = Vec::new();
        for _ in 0..scale.samples {
            let t0 = Instant::now();
            s.attach_mem_async(m.ptr(), 0, AttachFlags::SINGLE)?;
            s.synchronize()?;
            v.push(ns(t0));
        }
        fig(name, median(v), "ns");
    }
    Ok(())
}

/// The instruction-count figures: (name, probe operation).
pub const INSN: &[(&str, &str)] = &[
    ("instructions/call writeValue32 enqueue", "write_value32"),
    (
        "instructions/call waitValue32 enqueue (true)",
        "wait_value32",
    ),
    ("instructions/call eventRecord enqueue", "event_record"),
    (
        "instructions/round record/waitEvent ping-pong (2 streams)",
        "ping_pong",
    ),
    ("instructions/call addCallback enqueue", "add_callback"),
    (
        "instructions/call kernel launch enqueue (empty kernel)",
        "launch",
    ),
    (
        "instructions/call kernel launch enqueue (vadd: 4 arguments + hidden)",
        "launch_args",
    ),
    (
        "instructions/call floor: 64-byte ring write + release store + doorbell store",
        "floor",
    ),
];

/// Calls (rounds) a probe child makes.
const INSN_CALLS: usize = 1024;

/// An instruction-count figure: the count per call, or why it is unavailable.
#[derive(Debug, Clone)]
pub struct InsnFigure {
    /// Name (see [`INSN`]).
    pub name: &'static str,
    /// Instructions retired per call, or the reason there is no count.
    pub value: Result<f64, String>,
}

/// Measure [`INSN`] (those `want` selects) with callgrind, running this executable's
/// `bench-insn` subcommand on device `spec`. Without valgrind every figure says so.
pub fn insn_figures(
    spec: &str,
    want: &dyn Fn(&str) -> bool,
    progress: &mut dyn FnMut(&str),
) -> Vec<InsnFigure> {
    let mut out = Vec::new();
    let have = std::process::Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    let exe = std::env::current_exe();
    for &(name, op) in INSN {
        if !want(name) {
            continue;
        }
        progress(name);
        let value = match (&exe, have) {
            (_, false) => Err("unavailable: valgrind is not installed".to_string()),
            (Err(e), _) => Err(format!("unavailable: no path to this executable: {e}")),
            (Ok(exe), true) => callgrind_count(exe, spec, op),
        };
        out.push(InsnFigure { name, value });
    }
    out
}

fn callgrind_count(exe: &std::path::Path, spec: &str, op: &str) -> Result<f64, String> {
    let dir = std::env::temp_dir().join(format!("kfdrt-bench-insn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("unavailable: {}: {e}", dir.display()))?;
    let file = dir.join("cg.out");
    let r = std::process::Command::new("valgrind")
        .arg("--tool=callgrind")
        .arg("--separate-threads=yes")
        .arg("--toggle-collect=*insn_probe*")
        .arg(format!("--callgrind-out-file={}", file.display()))
        .arg(exe)
        .args(["bench-insn", "--device", spec, op])
        .arg(INSN_CALLS.to_string())
        .output();
    // With --separate-threads the calling (main) thread's counts are in "-01".
    let main = dir.join("cg.out-01");
    let text = std::fs::read_to_string(&main);
    let _ = std::fs::remove_dir_all(&dir);
    let o = r.map_err(|e| format!("unavailable: running valgrind: {e}"))?;
    if !o.status.success() {
        return Err(format!(
            "unavailable: the probe failed: {}",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
        ));
    }
    let text = text.map_err(|e| format!("unavailable: no callgrind output: {e}"))?;
    let total = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("totals:")
                .or_else(|| l.strip_prefix("summary:"))
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .ok_or("unavailable: no totals line in the callgrind output")?;
    Ok(total / INSN_CALLS as f64)
}

/// The `bench-insn` child: `calls` calls of `op` on `dev`, each through a probe
/// function (the only code callgrind collects in), with synchronization between
/// batches outside the probes.
pub fn insn_child(dev: &Device, op: &str, calls: usize) -> Result<(), String> {
    let e = |e: kfdrt::Error| e.to_string();
    let s = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .map_err(e)?;
    let s2 = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .map_err(e)?;
    let mem = dev.alloc(MemoryKind::Signal, 0, 4096).map_err(e)?;
    let va = mem.va();
    let batch = |s: &kfdrt::Stream, i: usize| -> Result<(), String> {
        if (i + 1) % ENQUEUE_BATCH == 0 {
            s.synchronize().map_err(e)?;
        }
        Ok(())
    };
    match op {
        "write_value32" => {
            s.write_value32(va, 0, WriteValueFlags::DEFAULT)
                .map_err(e)?;
            s.synchronize().map_err(e)?;
            for i in 0..calls {
                probe_write_value32(&s, va, i as u32).map_err(e)?;
                batch(&s, i)?;
            }
        }
        "wait_value32" => {
            s.wait_value32(va, 0, WaitCompare::Gte, u32::MAX)
                .map_err(e)?;
            s.synchronize().map_err(e)?;
            for i in 0..calls {
                probe_wait_value32(&s, va).map_err(e)?;
                batch(&s, i)?;
            }
        }
        "event_record" => {
            let ev = dev.create_event(EventFlags::DISABLE_TIMING).map_err(e)?;
            ev.record(&s).map_err(e)?;
            for _ in 0..calls {
                probe_event_record(&ev, &s).map_err(e)?;
            }
        }
        "ping_pong" => {
            let e1 = dev.create_event(EventFlags::DISABLE_TIMING).map_err(e)?;
            let e2 = dev.create_event(EventFlags::DISABLE_TIMING).map_err(e)?;
            // Rounds outside the probes until both streams waited for the other: the
            // first cross-stream wait moves a stream to a dedicated queue (a one-time
            // queue creation, not an enqueue cost). A wait for completed work is no wait,
            // hence the (bounded) loop.
            for _ in 0..1000 {
                if s.has_dedicated_queue() && s2.has_dedicated_queue() {
                    break;
                }
                s.write_value32(va + 192, 0, WriteValueFlags::DEFAULT)
                    .map_err(e)?;
                e1.record(&s).map_err(e)?;
                s2.wait_event(&e1, 0).map_err(e)?;
                s2.write_value32(va + 196, 0, WriteValueFlags::DEFAULT)
                    .map_err(e)?;
                e2.record(&s2).map_err(e)?;
                s.wait_event(&e2, 0).map_err(e)?;
            }
            s.synchronize().map_err(e)?;
            for i in 0..calls {
                probe_ping_pong(&s, &s2, &e1, &e2, va, i as u32).map_err(e)?;
                if (i + 1) % 64 == 0 {
                    s.synchronize().map_err(e)?;
                }
            }
        }
        "add_callback" => {
            // Warm up outside the probe: the stream's dedicated queue and the gate pool
            // (as many gates as a batch keeps in flight) exist after this.
            for _ in 0..ENQUEUE_BATCH {
                s.add_callback(|_| {}, 0).map_err(e)?;
            }
            s.synchronize().map_err(e)?;
            for i in 0..calls {
                probe_add_callback(&s).map_err(e)?;
                batch(&s, i)?;
            }
        }
        "launch" => {
            let gfx = dev.gpu(0).map_err(e)?.gfx_name();
            let elf = crate::check::kernels::embedded("cl/empty.cl", &gfx)?;
            let m = dev.load_module(0, elf).map_err(e)?;
            let k = m.kernel("empty").map_err(e)?;
            let args = k.args();
            // The first launch sets up the queue's kernarg ring (outside the probes).
            s.launch(&k, 1, 64, 0, &args).map_err(e)?;
            s.synchronize().map_err(e)?;
            for i in 0..calls {
                probe_launch(&s, &k, &args).map_err(e)?;
                batch(&s, i)?;
            }
            // The module must outlive its dispatches.
            s.synchronize().map_err(e)?;
        }
        "launch_args" => {
            let gfx = dev.gpu(0).map_err(e)?.gfx_name();
            let elf = crate::check::kernels::embedded("cl/vadd.cl", &gfx)?;
            let m = dev.load_module(0, elf).map_err(e)?;
            let k = m.kernel("vadd").map_err(e)?;
            let buf = dev.alloc(MemoryKind::Device, 0, 4096).map_err(e)?;
            let args = crate::bench_kernels::vadd_args(&k, buf.va()).map_err(e)?;
            // The first launch sets up the queue's kernarg ring (outside the probes).
            s.launch(&k, 1, 64, 0, &args).map_err(e)?;
            s.synchronize().map_err(e)?;
            for i in 0..calls {
                probe_launch(&s, &k, &args).map_err(e)?;
                batch(&s, i)?;
            }
            s.synchronize().map_err(e)?;
        }
        "floor" => {
            let q = crate::check::raw::RawAql::new(dev, 0, 1024)?;
            // A barrier-AND without dependencies or completion signal.
            let pkt = pm4::aql::AqlPacket::barrier_and([0; 5], 0).encode();
            // At most one ring's worth: a bare publish never checks for space, and the CP
            // consumes (and may still read) the packets once notified.
            for i in 0..calls.min(1024) as u64 {
                probe_floor(&q, i, &pkt);
            }
        }
        "sync_idle" | "sync_idle_null" => {
            // Synchronize of an idle stream (after completed work); on the null stream
            // with one idle blocking stream of the GPU to look at.
            let blocking = dev.create_stream(0).map_err(e)?;
            let null;
            let t = if op == "sync_idle" {
                &s
            } else {
                null = dev.null_stream(0).map_err(e)?;
                &null
            };
            t.write_value32(va, 0, WriteValueFlags::DEFAULT)
                .map_err(e)?;
            blocking
                .write_value32(va + 4, 0, WriteValueFlags::DEFAULT)
                .map_err(e)?;
            t.synchronize().map_err(e)?;
            blocking.synchronize().map_err(e)?;
            for _ in 0..calls {
                probe_synchronize(t).map_err(e)?;
            }
        }
        other => return Err(format!("unknown probe {other:?}")),
    }
    s.synchronize().map_err(e)?;
    s2.synchronize().map_err(e)?;
    Ok(())
}

#[inline(never)]
fn insn_probe_synchronize(s: &kfdrt::Stream) -> kfdrt::Result<()> {
    s.synchronize()
}
fn probe_synchronize(s: &kfdrt::Stream) -> kfdrt::Result<()> {
    insn_probe_synchronize(std::hint::black_box(s))
}

#[inline(never)]
fn insn_probe_write_value32(s: &kfdrt::Stream, va: u64, v: u32) -> kfdrt::Result<()> {
    s.write_value32(va, v, WriteValueFlags::DEFAULT)
}
fn probe_write_value32(s: &kfdrt::Stream, va: u64, v: u32) -> kfdrt::Result<()> {
    insn_probe_write_value32(std::hint::black_box(s), va, v)
}

#[inline(never)]
fn insn_probe_wait_value32(s: &kfdrt::Stream, va: u64) -> kfdrt::Result<()> {
    s.wait_value32(va, 0, WaitCompare::Gte, u32::MAX)
}
fn probe_wait_value32(s: &kfdrt::Stream, va: u64) -> kfdrt::Result<()> {
    insn_probe_wait_value32(std::hint::black_box(s), va)
}

#[inline(never)]
fn insn_probe_event_record(ev: &kfdrt::Event, s: &kfdrt::Stream) -> kfdrt::Result<()> {
    ev.record(s)
}
fn probe_event_record(ev: &kfdrt::Event, s: &kfdrt::Stream) -> kfdrt::Result<()> {
    insn_probe_event_record(std::hint::black_box(ev), s)
}

#[inline(never)]
fn insn_probe_ping_pong(
    s: &kfdrt::Stream,
    s2: &kfdrt::Stream,
    e1: &kfdrt::Event,
    e2: &kfdrt::Event,
    va: u64,
    i: u32,
) -> kfdrt::Result<()> {
    s.write_value32(va + 192, i, WriteValueFlags::DEFAULT)?;
    e1.record(s)?;
    s2.wait_event(e1, 0)?;
    s2.write_value32(va + 196, i, WriteValueFlags::DEFAULT)?;
    e2.record(s2)?;
    s.wait_event(e2, 0)
}
fn probe_ping_pong(
    s: &kfdrt::Stream,
    s2: &kfdrt::Stream,
    e1: &kfdrt::Event,
    e2: &kfdrt::Event,
    va: u64,
    i: u32,
) -> kfdrt::Result<()> {
    insn_probe_ping_pong(std::hint::black_box(s), s2, e1, e2, va, i)
}

#[inline(never)]
fn insn_probe_add_callback(s: &kfdrt::Stream) -> kfdrt::Result<()> {
    s.add_callback(|_| {}, 0)
}
fn probe_add_callback(s: &kfdrt::Stream) -> kfdrt::Result<()> {
    insn_probe_add_callback(std::hint::black_box(s))
}

#[inline(never)]
fn insn_probe_launch(
    s: &kfdrt::Stream,
    k: &kfdrt::Kernel,
    args: &kfdrt::KernelArgs,
) -> kfdrt::Result<()> {
    s.launch(k, 1, 64, 0, args)
}
fn probe_launch(
    s: &kfdrt::Stream,
    k: &kfdrt::Kernel,
    args: &kfdrt::KernelArgs,
) -> kfdrt::Result<()> {
    insn_probe_launch(std::hint::black_box(s), k, args)
}

#[inline(never)]
fn insn_probe_floor(q: &crate::check::raw::RawAql, index: u64, pkt: &[u32; 16]) {
    q.bare_publish(index, pkt)
}
fn probe_floor(q: &crate::check::raw::RawAql, index: u64, pkt: &[u32; 16]) {
    insn_probe_floor(std::hint::black_box(q), index, pkt)
}
