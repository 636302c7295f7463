//! kernels: code objects built from the repository's sources (embedded at build time)
//! loaded, launched and checked exactly against host references; argument, block and LDS
//! errors; scratch; ordering with stream memory ops and events. The same checks run on
//! hardware (gfx90a, gfx942) and on the emulator.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use kfdrt::{Buffer, Device, ErrorKind, Kernel, KernelArgs, MemoryKind, Module, Stream};

use super::raw::Scratch;
use super::{
    ensure, hold, pass, pass_with, settle, Check, CheckResult, Ctx, Drain, OrFail, Outcome,
};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_kernels.rs"));
}

/// The kernel checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "kernels.load",
            what: "code objects load; a truncated ELF, a wrong target and an unknown kernel name are InvalidValue errors naming the problem",
            run: load,
        },
        Check {
            name: "kernels.args",
            what: "arguments checked against the metadata (count, size, kind); a block over the kernel's maximum and LDS over the device limit are refused",
            run: args,
        },
        Check {
            name: "kernels.launch",
            what: "vector add over 1000 floats equals the host sum exactly",
            run: launch_vadd,
        },
        Check {
            name: "kernels.lds",
            what: "workgroup reduction through LDS with barriers equals the host sums",
            run: lds_reduce,
        },
        Check {
            name: "kernels.scratch",
            what: "a private array indexed at run time (scratch) gives the host result",
            run: scratch,
        },
        Check {
            name: "kernels.hidden_args",
            what: "a HIP kernel reads blockDim/gridDim from the hidden arguments",
            run: hidden_args,
        },
        Check {
            name: "kernels.ordering",
            what: "a kernel after waitValue waits for the host; an event after it completes after it",
            run: ordering,
        },
    ]
}

/// The embedded code object built from `src` for `gfx`, or why there is none.
pub fn embedded(src: &str, gfx: &str) -> Result<&'static [u8], String> {
    if let Some(e) = embedded::BUILD_ERROR {
        return Err(format!("no kernels embedded at build time: {e}"));
    }
    embedded::KERNELS
        .iter()
        .find(|(s, t, _)| *s == src && *t == gfx)
        .map(|(_, _, b)| *b)
        .ok_or_else(|| format!("no embedded {src} for {gfx} (built for gfx90a, gfx942)"))
}

fn code_object(ctx: &Ctx, src: &str) -> Result<(&'static [u8], String), Outcome> {
    let gfx = ctx.dev.gpu(0).map(|g| g.gfx_name()).unwrap_or_default();
    embedded(src, &gfx).map(|b| (b, gfx)).map_err(Outcome::Skip)
}

/// The device a launch check runs on: on the emulator a private one whose backend we
/// hold (to read a faulted queue's reason); on hardware the device under test.
fn device(ctx: &Ctx) -> Result<(Device, Option<Arc<kfd_emu::EmuBackend>>), String> {
    match &ctx.private_spec {
        Some(kfdrt::DeviceSpec::Emulated(s)) => {
            let b = Arc::new(kfd_emu::EmuBackend::from_spec(s).or_fail("emulator")?);
            Ok((Device::with_backend(b.clone()).or_fail("open")?, Some(b)))
        }
        _ => Ok((ctx.dev.clone(), None)),
    }
}

fn module(dev: &Device, bytes: &[u8]) -> Result<Module, String> {
    dev.load_module(0, bytes).or_fail("load_module")
}

fn buf<T: zerocopy::IntoBytes + zerocopy::Immutable>(
    dev: &Device,
    v: &[T],
) -> Result<Buffer, String> {
    let b = zerocopy::IntoBytes::as_bytes(v);
    let m = dev
        .alloc(MemoryKind::HostPinned, 0, b.len().max(4))
        .or_fail("alloc")?;
    m.write(0, b).or_fail("write")?;
    Ok(m)
}

fn words(b: &Buffer, n: usize) -> Result<Vec<u32>, String> {
    let mut v = vec![0u8; n * 4];
    b.read(0, &mut v).or_fail("read")?;
    Ok(v.chunks(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// Synchronize; `Ok(None)` when it ran, `Ok(Some(skip))` when the emulator cannot execute
/// ISA (the launch itself was checked up to the device), `Err` on any other failure.
fn finish(s: &Stream, emu: &Option<Arc<kfd_emu::EmuBackend>>) -> Result<Option<Outcome>, String> {
    match s.synchronize() {
        Ok(()) => Ok(None),
        Err(e) => {
            if let Some(b) = emu {
                if let Some(kfd_emu::engine::QueueStatus::Faulted(f)) =
                    b.queue_status(s.hw_queue_id())
                {
                    if f.reason.contains(kfd_emu::engine::ISA_NOT_SUPPORTED)
                        || f.reason.contains("not implemented by the emulator")
                    {
                        return Ok(Some(Outcome::Skip(format!(
                            "the emulated device cannot execute this kernel yet ({})",
                            f.reason
                        ))));
                    }
                    return Err(format!("{e}: {}", f.reason));
                }
            }
            Err(e.to_string())
        }
    }
}

fn load(ctx: &Ctx) -> CheckResult {
    let (elf, gfx) = match code_object(ctx, "cl/vadd.cl") {
        Ok(x) => x,
        Err(o) => return Ok(o),
    };
    let m = module(&ctx.dev, elf)?;
    let k = m.kernel("vadd").or_fail("kernel vadd")?;
    ensure!(
        k.kernel_object() % 64 == 0,
        "kernel object {:#x} not 64-byte aligned",
        k.kernel_object()
    );
    let e = ctx.dev.load_module(0, &elf[..elf.len() / 2]).err();
    ensure!(
        e.as_ref()
            .is_some_and(|e| e.kind() == ErrorKind::InvalidValue),
        "truncated ELF: {e:?}"
    );
    let other = if gfx == "gfx942" { "gfx90a" } else { "gfx942" };
    if let Some((_, _, b)) = embedded::KERNELS
        .iter()
        .find(|(s, t, _)| *s == "cl/vadd.cl" && *t == other)
    {
        let e = ctx
            .dev
            .load_module(0, b)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        ensure!(
            e.contains(other) && e.contains(&gfx),
            "wrong target error: {e:?}"
        );
    }
    let e = m
        .kernel("vsub")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(
        e.contains("vsub") && e.contains("vadd"),
        "unknown kernel error: {e:?}"
    );
    pass()
}

fn args(ctx: &Ctx) -> CheckResult {
    let (elf, _) = match code_object(ctx, "cl/vadd.cl") {
        Ok(x) => x,
        Err(o) => return Ok(o),
    };
    let m = module(&ctx.dev, elf)?;
    let k = m.kernel("vadd").or_fail("kernel")?;
    let b = buf(&ctx.dev, &[0f32; 4])?;
    let mut a = k.args();
    let e = a
        .arg(&1u64)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(e.contains("argument 0"), "value for a pointer: {e:?}");
    a.buffer(&b)
        .or_fail("arg 0")?
        .buffer(&b)
        .or_fail("arg 1")?
        .buffer(&b)
        .or_fail("arg 2")?;
    let e = a
        .arg(&1u64)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(
        e.contains("argument 3") && e.contains("8 bytes"),
        "wrong size: {e:?}"
    );
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    let e = s
        .launch(&k, 1, 64, 0, &a)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(e.contains("missing"), "too few arguments: {e:?}");
    a.arg(&4u32).or_fail("arg 3")?;
    let max = k.attributes().max_threads_per_block;
    let e = s
        .launch(&k, 1, max * 2, 0, &a)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(e.contains("maximum"), "block over the maximum: {e:?}");
    let lim = ctx.dev.gpu(0).or_fail("gpu")?.lds_limit();
    let e = s
        .launch(&k, 1, 64, lim + 1, &a)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    ensure!(e.contains("LDS"), "LDS over the limit: {e:?}");
    s.synchronize().or_fail("synchronize (nothing submitted)")?;
    pass_with(format!("max block {max}, LDS limit {lim}"))
}

/// A launch check's kernel: loaded on the device the check runs on.
struct Launch {
    dev: Device,
    emu: Option<Arc<kfd_emu::EmuBackend>>,
    k: Kernel,
}

impl Launch {
    /// `kernel` of the embedded `src` on the check's device; `Err(Ok(outcome))` when the
    /// check cannot run (no code object for the device).
    fn new(ctx: &Ctx, src: &str, kernel: &str) -> Result<Launch, CheckResult> {
        let (elf, _) = code_object(ctx, src).map_err(Ok)?;
        let (dev, emu) = device(ctx).map_err(Err)?;
        let m = module(&dev, elf).map_err(Err)?;
        let k = m.kernel(kernel).or_fail("kernel").map_err(Err)?;
        Ok(Launch { dev, emu, k })
    }

    fn buf<T: zerocopy::IntoBytes + zerocopy::Immutable>(&self, v: &[T]) -> Result<Buffer, String> {
        buf(&self.dev, v)
    }

    /// Pushes the arguments and launches on `s`.
    fn launch(
        &self,
        s: &Stream,
        grid: impl Into<kfdrt::Dim3>,
        block: impl Into<kfdrt::Dim3>,
        push: impl FnOnce(&mut KernelArgs) -> kfdrt::Result<()>,
    ) -> Result<(), String> {
        let mut args = self.k.args();
        push(&mut args).or_fail("arguments")?;
        s.launch(&self.k, grid, block, 0, &args).or_fail("launch")
    }

    /// Launches on a new stream and waits: `Ok(None)` when it ran, `Ok(Some(skip))` when
    /// the emulator cannot execute it.
    fn run(
        &self,
        grid: impl Into<kfdrt::Dim3>,
        block: impl Into<kfdrt::Dim3>,
        push: impl FnOnce(&mut KernelArgs) -> kfdrt::Result<()>,
    ) -> Result<Option<Outcome>, String> {
        let s = self.dev.create_stream(0).or_fail("create_stream")?;
        let _drain = Drain::streams(&[&s]);
        self.launch(&s, grid, block, push)?;
        finish(&s, &self.emu)
    }
}

fn launch_vadd(ctx: &Ctx) -> CheckResult {
    let l = match Launch::new(ctx, "cl/vadd.cl", "vadd") {
        Ok(l) => l,
        Err(r) => return r,
    };
    let n = 1000u32;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let b: Vec<f32> = (0..n).map(|i| 7.0 - i as f32).collect();
    let (ba, bb, bc) = (l.buf(&a)?, l.buf(&b)?, l.buf(&vec![0f32; n as usize])?);
    if let Some(o) = l.run(n.div_ceil(256), 256, |x| {
        x.buffer(&ba)?.buffer(&bb)?.buffer(&bc)?.arg(&n)?;
        Ok(())
    })? {
        return Ok(o);
    }
    let got = words(&bc, n as usize)?;
    for i in 0..n as usize {
        ensure!(
            got[i] == (a[i] + b[i]).to_bits(),
            "c[{i}] = {} want {}",
            f32::from_bits(got[i]),
            a[i] + b[i]
        );
    }
    pass()
}

fn lds_reduce(ctx: &Ctx) -> CheckResult {
    let l = match Launch::new(ctx, "cl/reduce.cl", "reduce") {
        Ok(l) => l,
        Err(r) => return r,
    };
    let n = 256 * 5 + 17;
    let input: Vec<u32> = (0..n as u32)
        .map(|i| i.wrapping_mul(2654435761) % 1000)
        .collect();
    let groups = (n as u32).div_ceil(256);
    let (bi, bo) = (l.buf(&input)?, l.buf(&vec![0u32; groups as usize])?);
    if let Some(o) = l.run(groups, 256, |x| {
        x.buffer(&bi)?.buffer(&bo)?.arg(&(n as u32))?;
        Ok(())
    })? {
        return Ok(o);
    }
    let want: Vec<u32> = input.chunks(256).map(|c| c.iter().sum()).collect();
    let got = words(&bo, groups as usize)?;
    ensure!(got == want, "sums {got:?} want {want:?}");
    pass()
}

fn scratch(ctx: &Ctx) -> CheckResult {
    let l = match Launch::new(ctx, "cl/private_array.cl", "private_array") {
        Ok(l) => l,
        Err(r) => return r,
    };
    let n = 300u32;
    let idx: Vec<u32> = (0..n).map(|i| i.wrapping_mul(40503) ^ 0x55).collect();
    let (bi, bo) = (l.buf(&idx)?, l.buf(&vec![0u32; n as usize])?);
    if let Some(o) = l.run(n.div_ceil(64), 64, |x| {
        x.buffer(&bi)?.buffer(&bo)?.arg(&n)?;
        Ok(())
    })? {
        return Ok(o);
    }
    let got = words(&bo, n as usize)?;
    for i in 0..n {
        let want = i.wrapping_mul(idx[i as usize] % 256).wrapping_add(7);
        ensure!(
            got[i as usize] == want,
            "out[{i}] = {} want {want}",
            got[i as usize]
        );
    }
    pass_with(format!(
        "{} scratch bytes per work-item",
        l.k.attributes().private_size_bytes
    ))
}

fn hidden_args(ctx: &Ctx) -> CheckResult {
    let l = match Launch::new(ctx, "hip/dims.hip", "dims") {
        Ok(l) => l,
        Err(r) => return r,
    };
    let (gx, gy, bx, by) = (3u32, 2u32, 8u32, 4u32);
    let total = (gx * gy * bx * by) as usize;
    let (bo, bi) = (l.buf(&vec![0u32; total])?, l.buf(&[u32::MAX; 4])?);
    if let Some(o) = l.run((gx, gy), (bx, by), |x| {
        x.buffer(&bo)?.buffer(&bi)?;
        Ok(())
    })? {
        return Ok(o);
    }
    let v = bx | by << 8 | gx << 16 | gy << 24;
    let got = words(&bo, total)?;
    ensure!(
        got.iter().all(|&g| g == v),
        "blockDim/gridDim words {got:?} want all {v:#x}"
    );
    let info = words(&bi, 4)?;
    ensure!(
        info == vec![0, 0, 2, 1],
        "remainders, grid dims, block count z = {info:?}"
    );
    pass()
}

fn ordering(ctx: &Ctx) -> CheckResult {
    let l = match Launch::new(ctx, "cl/vadd.cl", "vadd") {
        Ok(l) => l,
        Err(r) => return r,
    };
    let flag = Scratch::new(&l.dev, MemoryKind::Signal, 0, 4096)?;
    let n = 64u32;
    let (ba, bc) = (
        l.buf(&vec![2f32; n as usize])?,
        l.buf(&vec![0f32; n as usize])?,
    );
    let s = l.dev.create_stream(0).or_fail("create_stream")?;
    let ev = l
        .dev
        .create_event(kfdrt::EventFlags::DEFAULT)
        .or_fail("create_event")?;
    let _drain = Drain::streams(&[&s]).open(|| flag.u32(0).store(1, Ordering::Release));
    hold(&s, flag.va(0))?;
    l.launch(&s, 1, 64, |x| {
        x.buffer(&ba)?.buffer(&ba)?.buffer(&bc)?.arg(&n)?;
        Ok(())
    })?;
    ev.record(&s).or_fail("record")?;
    settle();
    ensure!(
        ev.query().err().map(|e| e.kind()) == Some(ErrorKind::NotReady),
        "event after a held kernel completed early"
    );
    ensure!(
        words(&bc, 1)?[0] == 0,
        "kernel ran before the host released the wait"
    );
    flag.u32(0).store(1, Ordering::Release);
    if let Some(o) = finish(&s, &l.emu)? {
        return Ok(o);
    }
    ev.synchronize().or_fail("event synchronize")?;
    let got = words(&bc, n as usize)?;
    ensure!(got.iter().all(|&w| w == 4f32.to_bits()), "c = {got:?}");
    pass()
}
