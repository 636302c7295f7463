//! `kfdrt bench` kernel figures: the host cost of enqueueing an empty kernel and the
//! launch-to-completion latency, with the empty kernel embedded at build time.

use std::time::Instant;

use kfdrt::{Device, Error, ErrorKind, StreamFlags};

use crate::bench::{Figure, Scale};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

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
    let names = [
        "kernel launch enqueue (empty kernel)",
        "kernel launch->completion (empty kernel, host spin)",
    ];
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
    Ok(())
}
