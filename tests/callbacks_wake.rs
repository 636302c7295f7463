//! A queue blocked on a callback line resumes because the dispatcher tells the device
//! (`kfd::Backend::host_signal_written`) when the line reaches the wait's target, not
//! because of the emulator's periodic re-poll: the re-poll is switched off
//! (`EmuBackend::set_blocked_repoll(false)`), so a missing notification is a hang that
//! the bounded waits below turn into a failure naming it.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::Duration;

use common::{signal_mem, wait_until};
use kfd_emu::trace::TraceKind;
use kfd_emu::EmuBackend;
use kfdrt::{Device, WriteValueFlags};

/// How long a woken queue may take to finish (never reached when the wake works).
const BOUND: Duration = Duration::from_secs(20);

/// A device on the emulator `spec` with the periodic re-poll of blocked queues off and
/// tracing on.
fn device_without_repoll(spec: &str) -> (Device, Arc<EmuBackend>) {
    let b = Arc::new(EmuBackend::from_spec(spec).expect("emu spec"));
    let dev = Device::with_backend(b.clone()).expect("open the emulated device");
    b.set_blocked_repoll(false);
    b.enable_trace();
    (dev, b)
}

/// A callback that says it started, then waits for the test's release (bounded).
fn gated(started: &Arc<AtomicU32>, id: u32) -> (impl FnOnce(kfdrt::Result<()>) + Send, Sender<()>) {
    let (tx, rx): (Sender<()>, Receiver<()>) = channel();
    let started = started.clone();
    let f = move |st: kfdrt::Result<()>| {
        assert!(st.is_ok());
        started.store(id, Ordering::Release);
        rx.recv_timeout(BOUND)
            .expect("the test releases the callback");
    };
    (f, tx)
}

/// Wait (bounded) until some queue of the device blocked on a wait packet.
fn wait_for_block(b: &EmuBackend) {
    wait_until("a queue to block on the callback line", || {
        b.take_trace()
            .iter()
            .any(|e| matches!(e.kind, TraceKind::Block))
    });
}

/// The legacy null stream's write waits on a blocking stream's callback line (no hold
/// is emitted on that stream). It resumes when the callback returns, through the
/// notification alone.
#[test]
fn null_stream_blocked_on_a_callback_line_is_woken_by_the_notification() {
    for spec in ["emu:mi300x", "emu:rx7900xtx"] {
        let (dev, b) = device_without_repoll(spec);
        let mem = signal_mem(&dev, 4096);
        let s = dev.create_stream(0).unwrap();
        let null = dev.null_stream(0).unwrap();
        let started = Arc::new(AtomicU32::new(0));
        let (f, release) = gated(&started, 1);
        s.add_callback(f, 0).unwrap();
        wait_until("the callback to start", || {
            started.load(Ordering::Acquire) == 1
        });
        null.write_value32(mem.va(), 7, WriteValueFlags::DEFAULT)
            .unwrap();
        wait_for_block(&b);
        let told = b.host_signal_notifications();
        release.send(()).unwrap();
        null.synchronize_timeout(BOUND).unwrap_or_else(|e| {
            panic!(
                "{spec}: the null stream's wait on the callback line did not resume within \
                 {BOUND:?} with the periodic re-poll off: the device was not told that the \
                 line moved ({e})"
            )
        });
        assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 7);
        assert_eq!(
            b.host_signal_notifications(),
            told + 1,
            "{spec}: one notification, for the one queue waiting on the line"
        );
        let unblocked = b
            .take_trace()
            .iter()
            .any(|e| matches!(e.kind, TraceKind::Unblock));
        assert!(unblocked, "{spec}: the blocked queue moved again");
    }
}

/// The stream's own hold (the command after its callbacks) resumes through the
/// notification, on gfx9 (BARRIER_VALUE) and gfx11 (WAIT_REG_MEM64).
#[test]
fn own_hold_is_woken_by_the_notification() {
    for spec in ["emu:mi300x", "emu:rx7900xtx"] {
        let (dev, b) = device_without_repoll(spec);
        let mem = signal_mem(&dev, 4096);
        let s = dev.create_stream(0).unwrap();
        let started = Arc::new(AtomicU32::new(0));
        let (f, release) = gated(&started, 1);
        s.add_callback(f, 0).unwrap();
        wait_until("the callback to start", || {
            started.load(Ordering::Acquire) == 1
        });
        s.write_value32(mem.va(), 5, WriteValueFlags::DEFAULT)
            .unwrap();
        wait_for_block(&b);
        release.send(()).unwrap();
        s.synchronize_timeout(BOUND).unwrap_or_else(|e| {
            panic!(
                "{spec}: the hold behind the callback did not resume within {BOUND:?} with \
                 the periodic re-poll off ({e})"
            )
        });
        assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 5);
    }
}

/// The null stream waits for callback 1 of a blocking stream; callback 2 is enqueued
/// after that wait and directly follows callback 1 (the dispatcher runs them as one
/// run). The null stream's write must land when callback 1 returns, while callback 2
/// is still running: the notification is per callback, not per run.
#[test]
fn wait_for_a_callback_inside_a_run_is_woken_when_that_callback_returns() {
    let (dev, b) = device_without_repoll("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    let null = dev.null_stream(0).unwrap();
    let started = Arc::new(AtomicU32::new(0));
    let (f1, release1) = gated(&started, 1);
    s.add_callback(f1, 0).unwrap();
    wait_until("callback 1 to start", || {
        started.load(Ordering::Acquire) == 1
    });
    null.write_value32(mem.va(), 3, WriteValueFlags::DEFAULT)
        .unwrap();
    let (f2, release2) = gated(&started, 2);
    s.add_callback(f2, 0).unwrap();
    wait_for_block(&b);
    release1.send(()).unwrap();
    wait_until("callback 2 to start", || {
        started.load(Ordering::Acquire) == 2
    });
    wait_until(
        "the null stream's write after callback 1, while callback 2 runs (a wait for \
         callback 1 must be woken when callback 1 returns)",
        || mem.atomic_u32(0).unwrap().load(Ordering::Acquire) == 3,
    );
    release2.send(()).unwrap();
    s.synchronize_timeout(BOUND).unwrap();
    null.synchronize_timeout(BOUND).unwrap();
}
