//! Stream callbacks (`hipStreamAddCallback`): each runs exactly once on a host thread
//! after all earlier work of its stream, in enqueue order per stream, and holds later work
//! of the stream until it returns. It receives the stream's error status.
//!
//! Mechanism: the callback's start point is the stream's timeline point at enqueue (no
//! packet); the hold is a barrier-AND packet whose dependency is a *gate* signal the
//! dispatcher sets to 0 after the callback returns (the stream is on a dedicated queue,
//! so the hold stalls only that stream). One dispatcher thread per device runs callbacks
//! whose start point is reached, whichever stream they belong to, and sleeps on the
//! timelines' interrupts otherwise. If a callback blocks inside a kfdrt call (say, a
//! synchronize on another stream), the waiting call hands the dispatcher role to a new
//! thread first, so other streams' callbacks keep running. A callback that panics is
//! caught: its stream gets a sticky LaunchFailure naming the stream and the panic
//! message, its hold still opens, and every other callback still runs exactly once.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Duration;

use crate::device::DeviceInner;
use crate::error::{Error, ErrorKind, Result};
use crate::signal::Signal;
use crate::stream::{Point, Stream, StreamInner};
use crate::sync::lock;

/// A callback: receives the stream's status (Ok, or its sticky error).
pub type Callback = Box<dyn FnOnce(Result<()>) + Send + 'static>;

struct Pending {
    stream: Arc<StreamInner>,
    start: Point,
    /// The gate of the callback right before this one when nothing was enqueued in
    /// between: once it opens (that callback returned), all earlier work is complete.
    prev_gate: Option<Arc<Signal>>,
    gate: Arc<Signal>,
    hold: Point,
    f: Callback,
}

impl Pending {
    fn ready(&self) -> bool {
        self.start.done()
            || self.prev_gate.as_ref().is_some_and(|g| g.load() == 0)
            || self.stream.sticky_error().is_some()
    }
}

/// Per-device callback state.
pub(crate) struct Callbacks {
    queue: Mutex<VecDeque<Pending>>,
    cv: Condvar,
    /// Threads currently holding or waiting for the dispatcher role.
    running: AtomicBool,
    threads: AtomicUsize,
    /// Callbacks ever added (the idle dispatcher spins on this before sleeping).
    added: AtomicUsize,
    /// Gates of callbacks that returned, kept until their hold packet completed.
    retired: Mutex<Vec<(Arc<Signal>, Point)>>,
}

/// How long an idle dispatcher spins for new callbacks before sleeping.
const IDLE_SPIN: Duration = Duration::from_micros(10);

thread_local! {
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
}

impl Callbacks {
    pub(crate) fn new() -> Self {
        Callbacks {
            queue: Mutex::new(VecDeque::new()),
            cv: Condvar::new(),
            running: AtomicBool::new(false),
            threads: AtomicUsize::new(0),
            added: AtomicUsize::new(0),
            retired: Mutex::new(Vec::new()),
        }
    }
}

impl Stream {
    /// `hipStreamAddCallback`: `f` runs exactly once on a host thread after all work
    /// enqueued so far, and work enqueued later waits until it returns. `flags` must be 0.
    /// `f` may call kfdrt APIs that do not synchronize on this stream.
    pub fn add_callback(
        &self,
        f: impl FnOnce(Result<()>) + Send + 'static,
        flags: u32,
    ) -> Result<()> {
        if flags != 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "hipStreamAddCallback",
                format!("flags {flags:#x} must be 0"),
            ));
        }
        let s = &self.inner;
        let gate = Arc::new(Signal::new(&s.dev, 1)?);
        let mut last = lock(&s.last_hold);
        let start = s.point();
        let prev_gate = last
            .as_ref()
            .filter(|(t, _)| *t == start.target)
            .map(|(_, g)| g.clone());
        let hold = self.hold_until(&gate)?;
        *last = Some((hold.target, gate.clone()));
        drop(last);
        let dev = s.dev.clone();
        {
            let mut q = lock(&dev.callbacks.queue);
            dev.callbacks.added.fetch_add(1, Ordering::AcqRel);
            q.push_back(Pending {
                stream: s.clone(),
                start,
                prev_gate,
                gate,
                hold,
                f: Box::new(f),
            });
        }
        dev.callbacks.cv.notify_one();
        ensure_dispatcher(&dev);
        Ok(())
    }
}

fn ensure_dispatcher(dev: &Arc<DeviceInner>) {
    if dev.callbacks.running.swap(true, Ordering::AcqRel) {
        return;
    }
    let weak = Arc::downgrade(dev);
    dev.callbacks.threads.fetch_add(1, Ordering::AcqRel);
    let spawned = std::thread::Builder::new()
        .name("kfdrt-callbacks".into())
        .spawn(move || dispatcher(weak));
    if spawned.is_err() {
        dev.callbacks.threads.fetch_sub(1, Ordering::AcqRel);
        dev.callbacks.running.store(false, Ordering::Release);
    }
}

/// Called by blocking kfdrt calls: when the current thread is running a callback, hand the
/// dispatcher role to a new thread so other callbacks are not held up by this wait.
pub(crate) fn before_blocking(dev: &Arc<DeviceInner>) {
    if IN_CALLBACK.with(|c| c.get()) && dev.callbacks.running.swap(false, Ordering::AcqRel) {
        ensure_dispatcher(dev);
    }
}

fn dispatcher(weak: Weak<DeviceInner>) {
    loop {
        let Some(dev) = weak.upgrade() else { return };
        let cb = &dev.callbacks;
        if !cb.running.load(Ordering::Acquire) {
            // Our role was handed on while a callback blocked: exit.
            cb.threads.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        // Retire gates whose hold packet completed.
        lock(&cb.retired).retain(|(_, p)| !p.done());
        dev.pools.reap();

        // Pick the first pending callback (per-stream order: only a stream's oldest).
        let ready = {
            let mut q = lock(&cb.queue);
            let mut seen: Vec<*const StreamInner> = Vec::new();
            let mut pick = None;
            for (i, p) in q.iter().enumerate() {
                let key = Arc::as_ptr(&p.stream);
                if seen.contains(&key) {
                    continue;
                }
                seen.push(key);
                if p.ready() {
                    pick = Some(i);
                    break;
                }
            }
            match pick {
                Some(i) => q.remove(i),
                None => {
                    if q.is_empty() {
                        // Idle: spin briefly (a callback right after another runs without
                        // a futex wake-up), then sleep until one arrives (bounded, to
                        // notice exit).
                        drop(q);
                        let seen = cb.added.load(Ordering::Acquire);
                        let t0 = std::time::Instant::now();
                        while cb.added.load(Ordering::Acquire) == seen && t0.elapsed() < IDLE_SPIN {
                            std::hint::spin_loop();
                        }
                        if cb.added.load(Ordering::Acquire) != seen {
                            drop(dev);
                            continue;
                        }
                        let q = lock(&cb.queue);
                        if !q.is_empty() {
                            drop(q);
                            drop(dev);
                            continue;
                        }
                        let (g, _) = cb
                            .cv
                            .wait_timeout(q, Duration::from_millis(100))
                            .unwrap_or_else(|e| e.into_inner());
                        drop(g);
                        drop(dev);
                        continue;
                    }
                    None
                }
            }
        };
        match ready {
            Some(p) => {
                let status = match p.stream.sticky_error() {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
                IN_CALLBACK.with(|c| c.set(true));
                // A panic must not kill the dispatcher (every other stream's callbacks
                // would stop): it becomes the stream's sticky error.
                let f = p.f;
                let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f(status)));
                IN_CALLBACK.with(|c| c.set(false));
                // The callback may have written VRAM that the held work reads.
                dev.core.hdp_flush_dirty();
                if let Err(payload) = r {
                    let what = payload
                        .downcast_ref::<&str>()
                        .map(|m| m.to_string())
                        .or_else(|| payload.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "a non-string payload".into());
                    p.stream.fail_soft(format!(
                        "a callback on stream #{} (GPU {}) panicked: {what}",
                        p.stream.timeline.serial(),
                        p.stream.gpu_index
                    ));
                }
                p.gate.store_relaxed(0);
                dev.backend.host_signal_written(p.hold.queue_id);
                lock(&cb.retired).push((p.gate, p.hold));
            }
            None => {
                // Something is pending but not ready: sleep on the oldest's timeline.
                let first = {
                    let q = lock(&cb.queue);
                    q.front().map(|p| p.start.clone())
                };
                if let Some(pt) = first {
                    let th = pt.threshold();
                    let _ = pt.timeline.wait(
                        |v| v <= th,
                        Duration::ZERO,
                        Some(std::time::Instant::now() + Duration::from_millis(2)),
                    );
                    if let Some(f) = dev.check_faults(pt.gpu_index) {
                        let q = lock(&cb.queue);
                        for p in q.iter().filter(|p| !p.start.done()) {
                            p.stream.fail(f.clone());
                        }
                    }
                }
            }
        }
    }
}
