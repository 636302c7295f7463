//! faults: a provoked queue fault must be reported correctly and never hang. These
//! checks PASS when the device reports the fault as required. On the emulator they run
//! on a KFD process of their own, so a fault cannot disturb other checks.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kfd::abi::{self, CreateEventArgs, EventData};
use kfdrt::{Device, ErrorKind, MemoryKind, Stream, WaitCompare, WriteValueFlags};
use pm4::sdma::{CopyLinear, SdmaPacket};

use super::raw::{RawSdma, Scratch};
use super::{ensure, pass_with, Check, CheckResult, Ctx, OrFail, Outcome};

/// An address no GPU maps (the first pages are never GPU-mapped): the raw SDMA check's
/// source. (A stream refuses it at enqueue: it is in no allocation.)
const UNMAPPED: u64 = 0x1000;

/// Queue a stream write that faults on the GPU: the stream waits on a gate while the
/// write's buffer is freed, then the gate opens (the address passed the enqueue's check,
/// which refuses addresses in no allocation; when the write runs, nothing maps it).
/// Returns the gate, which must live until the stream is done with it.
fn queue_faulting_write(dev: &Device, s: &Stream) -> Result<Scratch, String> {
    let gate = Scratch::new(dev, MemoryKind::Signal, 0, 4096)?;
    let victim = dev
        .alloc(MemoryKind::Signal, 0, 4096)
        .or_fail("the write's buffer")?;
    s.wait_value32(gate.va(0), 1, WaitCompare::Eq, u32::MAX)
        .or_fail("wait_value32")?;
    s.write_value32(victim.va(), 1, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    drop(victim);
    gate.u32(0).store(1, Ordering::Release);
    Ok(gate)
}

/// The fault checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "faults.stream_fault_sticky",
            what: "a stream write that faults on the GPU (its buffer freed before it ran) gives a sticky LaunchFailure (sync, query, later calls) without hanging",
            run: stream_fault_sticky,
        },
        Check {
            name: "faults.callback_gets_error",
            what: "a callback after a faulting write runs once and receives LaunchFailure",
            run: callback_gets_error,
        },
        Check {
            name: "faults.sdma_memory_exception",
            what: "an SDMA copy from an unmapped address raises the KFD memory event with the GPU and page",
            run: sdma_memory_exception,
        },
    ]
}

/// The self-test added by `--inject-fault`: it provokes a queue fault but expects a
/// fault-free run, so it always fails (proving that failures are reported and counted).
pub const INJECTED: Check = Check {
    name: "selftest.injected_fault",
    what: "checker self-test: provokes a queue fault but expects a fault-free run, so it must FAIL",
    run: injected,
};

/// The private device on the emulator; the device under test on hardware (faults run
/// last there).
fn fault_device(ctx: &Ctx) -> Result<Device, Outcome> {
    match ctx.private_device() {
        Ok(d) => Ok(d),
        Err(Outcome::Skip(_)) => Ok(ctx.dev.clone()),
        Err(o) => Err(o),
    }
}

fn stream_fault_sticky(ctx: &Ctx) -> CheckResult {
    let dev = super::require!(fault_device(ctx));
    let m = Scratch::new(&dev, MemoryKind::Signal, 0, 4096)?;
    let s = dev.create_stream(0).or_fail("create_stream")?;
    let _gate = queue_faulting_write(&dev, &s)?;
    let t = Instant::now();
    let e = match s.synchronize() {
        Ok(()) => return Err("synchronize succeeded after a write to freed memory".into()),
        Err(e) => e,
    };
    let dt = t.elapsed();
    ensure!(
        e.kind() == ErrorKind::LaunchFailure,
        "synchronize: want LaunchFailure, got {e}"
    );
    match s.query() {
        Err(q) if q.kind() == ErrorKind::LaunchFailure => {}
        other => {
            return Err(format!(
                "query after the fault: want LaunchFailure, got {other:?}"
            ))
        }
    }
    match s.write_value32(m.va(0), 1, WriteValueFlags::DEFAULT) {
        Err(w) if w.kind() == ErrorKind::LaunchFailure => {}
        other => {
            return Err(format!(
                "submission after the fault: want LaunchFailure, got {other:?}"
            ))
        }
    }
    ensure!(
        m.u32(0).load(Ordering::Acquire) == 0,
        "work after the fault ran"
    );
    pass_with(format!(
        "reported after {:.1} ms: {e}",
        dt.as_secs_f64() * 1e3
    ))
}

fn callback_gets_error(ctx: &Ctx) -> CheckResult {
    let dev = super::require!(fault_device(ctx));
    let s = dev.create_stream(0).or_fail("create_stream")?;
    let _gate = queue_faulting_write(&dev, &s)?;
    let log = Arc::new(Mutex::new(Vec::new()));
    let l = log.clone();
    s.add_callback(
        move |st| {
            l.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(st.map_err(|e| e.kind()));
        },
        0,
    )
    .or_fail("add_callback")?;
    let _ = s.synchronize();
    super::wait_for("the callback", Duration::from_secs(5), || {
        !log.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    })?;
    super::settle();
    let got = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    ensure!(
        got == vec![Err(ErrorKind::LaunchFailure)],
        "callback statuses {got:?}, want one LaunchFailure"
    );
    Ok(Outcome::Pass(None))
}

fn sdma_memory_exception(ctx: &Ctx) -> CheckResult {
    let dev = super::require!(fault_device(ctx));
    let b = dev.backend().as_ref();
    let mut a = CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_MEMORY,
        auto_reset: 1,
        ..Default::default()
    };
    kfd::ioctl::create_event(b, &mut a).or_fail("CREATE_EVENT (memory)")?;
    let dst = Scratch::new(&dev, MemoryKind::HostPinned, 0, 4096)?;
    let mut q = RawSdma::new(&dev, 0, 4096)?;
    q.submit(&[SdmaPacket::CopyLinear(CopyLinear {
        src: UNMAPPED + 0x10,
        dst: dst.va(0),
        bytes: 64,
        tmz: false,
        parameter: 0,
    })])?;
    let mut ev = [EventData {
        event_id: a.event_id,
        ..Default::default()
    }];
    let r = kfd::ioctl::wait_events(b, &mut ev, false, 5000).or_fail("WAIT_EVENTS");
    let _ = kfd::ioctl::destroy_event(b, a.event_id);
    let r = r?;
    ensure!(
        r == abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "no memory event within 5 s (WAIT_EVENTS returned {r})"
    );
    let m = ev[0].memory_exception();
    let gpu = dev.gpus()[0].gpu_id;
    ensure!(
        m.gpu_id == gpu,
        "memory exception names gpu {:#x}, want {gpu:#x}",
        m.gpu_id
    );
    ensure!(
        m.va == UNMAPPED,
        "memory exception va {:#x}, want page {UNMAPPED:#x}",
        m.va
    );
    ensure!(
        m.failure.not_present == 1,
        "failure {:?}: want not_present",
        m.failure
    );
    drop(q);
    pass_with(format!("va {:#x} on gpu {:#x}", m.va, m.gpu_id))
}

fn injected(ctx: &Ctx) -> CheckResult {
    let dev = super::require!(fault_device(ctx));
    let s = dev.create_stream(0).or_fail("create_stream")?;
    let _gate = queue_faulting_write(&dev, &s)?;
    s.synchronize()
        .or_fail("injected fault (expected a fault-free run, by design of --inject-fault)")?;
    Err("the injected queue fault was not reported: the device missed a fault".into())
}
