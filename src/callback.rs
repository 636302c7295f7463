//! Stream callbacks (`hipStreamAddCallback`): each runs exactly once on a host thread
//! after all earlier work of its stream, in enqueue order per stream, and holds later work
//! of the stream until it returns. It receives the stream's error status.
//!
//! Mechanism: the callback's start point is the stream's timeline point at enqueue (no
//! packet); the hold is a barrier-AND packet whose dependency is a *gate*, an
//! `amd_signal_t` without a KFD event (the CP polls it; nobody sleeps on it) that the
//! dispatcher sets to 0 after the callback returns (the stream is on a dedicated queue,
//! so the hold stalls only that stream). Gates come from a recycled pool, so an enqueue
//! makes no system call: it encodes the hold, pushes the callback and wakes the
//! dispatcher only when it sleeps.
//!
//! One dispatcher thread per device runs callbacks whose start point is reached,
//! whichever stream they belong to. Each wake-up drains a stream's whole run of
//! consecutive callbacks (a callback enqueued right after another may start as soon as
//! the previous one returned), and tells the backend about the opened gates once per
//! run. With nothing ready it sleeps through the host-wait path (`crate::wait`) on the
//! oldest pending callback's start point, or on a condition variable when idle.
//!
//! If a callback blocks inside a kfdrt call (say, a synchronize on another stream), the
//! waiting call hands the dispatcher role to a new thread first, so other streams'
//! callbacks keep running. A callback that panics is caught: its stream gets a sticky
//! LaunchFailure naming the stream and the panic message, its hold still opens, and
//! every other callback still runs exactly once.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::device::{DeviceCore, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::hsa::{AmdSignal, AMD_SIGNAL_KIND_USER};
use crate::memory::{Buffer, MemoryKind};
use crate::signal::Signal;
use crate::stream::{Point, Stream, StreamInner, TIMELINE_BASE};
use crate::sync::lock;

/// A callback: receives the stream's status (Ok, or its sticky error).
pub type Callback = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// The hold's dependency: a 64-byte `amd_signal_t` slot in a [`GatePool`] chunk, 1 while
/// the callback has not returned, 0 after. Valid while the device's callback state lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Gate {
    va: u64,
}

impl Gate {
    /// The signal handle the barrier-AND packet names.
    pub(crate) fn handle(self) -> u64 {
        self.va
    }

    fn value(&self) -> &AtomicI64 {
        // SAFETY: the 8-byte aligned value field of a 64-byte slot in signal memory the
        // device's gate pool keeps mapped for as long as any gate of it can be used.
        unsafe { AtomicI64::from_ptr((self.va + 8) as *mut i64) }
    }

    fn is_open(self) -> bool {
        self.value().load(Ordering::Acquire) == 0
    }

    fn open(self) {
        self.value().store(0, Ordering::Release);
    }

    fn close(self) {
        let sig = AmdSignal {
            kind: AMD_SIGNAL_KIND_USER,
            value: 1,
            ..Default::default()
        };
        // SAFETY: a 64-byte, 64-aligned slot of signal memory owned by the gate pool and
        // handed to no one else now (it is off the free list).
        unsafe { core::ptr::write_volatile(self.va as *mut AmdSignal, sig) };
        std::sync::atomic::fence(Ordering::Release);
    }
}

/// Gates ready for reuse and the signal memory they live in.
struct GatePool {
    free: Vec<Gate>,
    chunks: Vec<Buffer>,
}

/// Gates per signal-memory chunk (one page).
const CHUNK_GATES: usize = 64;

impl GatePool {
    fn take(&mut self, core: &Arc<DeviceCore>) -> Result<Gate> {
        if self.free.is_empty() {
            let buf = Buffer::alloc(core, MemoryKind::Signal, 0, CHUNK_GATES * 64)?;
            let base = buf.va();
            self.chunks.push(buf);
            self.free.extend(
                (0..CHUNK_GATES as u64)
                    .rev()
                    .map(|i| Gate { va: base + i * 64 }),
            );
        }
        let g = self.free.pop().ok_or_else(|| {
            Error::new(
                ErrorKind::OutOfMemory,
                "hipStreamAddCallback",
                "no gate signal",
            )
        })?;
        g.close();
        Ok(g)
    }
}

/// A callback's closure: stored inline when it is small (most capture an `Arc` or two),
/// so an enqueue allocates nothing; boxed otherwise.
enum Slot {
    Inline(InlineFn),
    Boxed(Callback),
}

/// Words of inline closure storage.
const INLINE_WORDS: usize = 4;

/// A type-erased `FnOnce(Result<()>) + Send` of at most [`INLINE_WORDS`] words and
/// alignment 8, with the two functions that know its type.
struct InlineFn {
    data: core::mem::MaybeUninit<[u64; INLINE_WORDS]>,
    /// Moves the closure out of `data` and calls it (`data` is then dead).
    call: unsafe fn(*mut u64, Result<()>),
    /// Drops the closure in `data` without calling it.
    drop: unsafe fn(*mut u64),
    live: bool,
}

// SAFETY: built only from closures that are Send (`Slot::new`'s bound).
unsafe impl Send for InlineFn {}

impl Slot {
    fn new<F: FnOnce(Result<()>) + Send + 'static>(f: F) -> Slot {
        if core::mem::size_of::<F>() > core::mem::size_of::<[u64; INLINE_WORDS]>()
            || core::mem::align_of::<F>() > core::mem::align_of::<u64>()
        {
            return Slot::Boxed(Box::new(f));
        }
        /// # Safety
        /// `p` holds a live `F` written by `Slot::new`, read at most once.
        unsafe fn call<F: FnOnce(Result<()>)>(p: *mut u64, r: Result<()>) {
            // SAFETY: the caller's contract: a live F, moved out exactly once.
            let f = unsafe { core::ptr::read(p.cast::<F>()) };
            f(r)
        }
        /// # Safety
        /// `p` holds a live `F` written by `Slot::new`, never read.
        unsafe fn drop_fn<F>(p: *mut u64) {
            // SAFETY: the caller's contract: a live F, dropped exactly once.
            unsafe { core::ptr::drop_in_place(p.cast::<F>()) }
        }
        let mut data = core::mem::MaybeUninit::<[u64; INLINE_WORDS]>::uninit();
        // SAFETY: F fits in `data` and needs no stricter alignment than u64 (checked
        // above); ownership of `f` moves into the buffer.
        unsafe { core::ptr::write(data.as_mut_ptr().cast::<F>(), f) };
        Slot::Inline(InlineFn {
            data,
            call: call::<F>,
            drop: drop_fn::<F>,
            live: true,
        })
    }

    fn run(self, r: Result<()>) {
        match self {
            Slot::Boxed(f) => f(r),
            Slot::Inline(mut i) => {
                i.live = false;
                // SAFETY: `data` holds the live closure `call` was made for; `live` is
                // cleared first, so Drop does not drop it again (even if it panics).
                unsafe { (i.call)(i.data.as_mut_ptr().cast(), r) }
            }
        }
    }
}

impl Drop for InlineFn {
    fn drop(&mut self) {
        if self.live {
            // SAFETY: a closure that was never called is still in `data`.
            unsafe { (self.drop)(self.data.as_mut_ptr().cast()) }
        }
    }
}

struct Pending {
    stream: Arc<StreamInner>,
    /// Stream timeline target of all work before the callback.
    start: u64,
    /// The gate of the callback right before this one when nothing was enqueued in
    /// between: once it opens (that callback returned), all earlier work is complete.
    prev_gate: Option<Gate>,
    gate: Gate,
    /// Target and queue of the hold packet.
    hold: u64,
    hold_queue: u32,
    f: Slot,
}

fn reached(s: &StreamInner, target: u64) -> bool {
    timeline_reached(&s.timeline, target)
}

fn timeline_reached(timeline: &Signal, target: u64) -> bool {
    timeline.load() <= TIMELINE_BASE - target as i64
}

impl Pending {
    fn ready(&self) -> bool {
        reached(&self.stream, self.start)
            || self.prev_gate.is_some_and(|g| g.is_open())
            || self.stream.sticky_error().is_some()
    }
}

/// Per-device callback state.
pub(crate) struct Callbacks {
    queue: Mutex<Queue>,
    cv: Condvar,
    /// Dispatcher threads (low 32 bits) and how many of them are blocked inside a
    /// callback that handed the role on (high 32 bits): more than one thread only while
    /// a callback blocks, and never none that is free while any exists.
    roles: AtomicU64,
    /// Callbacks ever added (the idle dispatcher spins on this before sleeping).
    added: AtomicUsize,
    gates: Mutex<GatePool>,
    /// Gates of callbacks that returned, kept until their hold packet completed, with
    /// the stream's timeline and the hold's target. (The timeline, not the stream: a
    /// signal holds only its pool, so a hold that never completes keeps no device alive.)
    retired: Mutex<VecDeque<(Gate, Arc<Signal>, u64)>>,
}

struct Queue {
    pending: VecDeque<Pending>,
    /// Dispatchers asleep on the condition variable (enqueue notifies only then).
    sleepers: usize,
}

/// One blocked dispatcher in [`Callbacks::roles`].
const BLOCKED_ONE: u64 = 1 << 32;

/// How long an idle dispatcher spins for new callbacks before sleeping.
const IDLE_SPIN: Duration = Duration::from_micros(10);
/// Longest sleep of a dispatcher: it re-checks retired gates and the device's life.
const IDLE_SLEEP: Duration = Duration::from_millis(100);
/// Longest sleep on a pending callback's start point (a callback of another stream
/// added meanwhile does not wake that sleep).
const START_SLEEP: Duration = Duration::from_millis(2);

thread_local! {
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
    /// Whether the running callback blocked and handed the dispatcher role on.
    static HANDED_ON: Cell<bool> = const { Cell::new(false) };
    /// Queue whose opened gate the running dispatcher has not told the backend about yet
    /// (told before the current callback blocks, or after its run).
    static UNTOLD: Cell<Option<u32>> = const { Cell::new(None) };
}

impl Callbacks {
    pub(crate) fn new() -> Self {
        Callbacks {
            queue: Mutex::new(Queue {
                pending: VecDeque::new(),
                sleepers: 0,
            }),
            cv: Condvar::new(),
            roles: AtomicU64::new(0),
            added: AtomicUsize::new(0),
            gates: Mutex::new(GatePool {
                free: Vec::new(),
                chunks: Vec::new(),
            }),
            retired: Mutex::new(VecDeque::new()),
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
        let dev = &s.dev;
        let gate = lock(&dev.callbacks.gates).take(&dev.core)?;
        let mut last = lock(&s.last_hold);
        let start = s.point();
        let prev_gate = last
            .as_ref()
            .filter(|(t, _)| *t == start.target)
            .map(|&(_, g)| g);
        let hold = match self.hold_until(gate.handle()) {
            Ok(h) => h,
            Err(e) => {
                drop(last);
                lock(&dev.callbacks.gates).free.push(gate);
                return Err(e);
            }
        };
        *last = Some((hold.target, gate));
        drop(last);
        let cb = &dev.callbacks;
        let p = Pending {
            stream: s.clone(),
            start: start.target,
            prev_gate,
            gate,
            hold: hold.target,
            hold_queue: hold.queue_id,
            f: Slot::new(f),
        };
        let wake = {
            let mut q = lock(&cb.queue);
            q.pending.push_back(p);
            q.sleepers > 0
        };
        cb.added.fetch_add(1, Ordering::Release);
        if wake {
            cb.cv.notify_one();
        }
        if cb.roles.load(Ordering::Acquire) == 0 {
            ensure_dispatcher(dev);
        }
        Ok(())
    }
}

/// Start a dispatcher thread unless one holds the role.
fn ensure_dispatcher(dev: &Arc<DeviceInner>) {
    if dev
        .callbacks
        .roles
        .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return;
    }
    spawn_dispatcher(dev);
}

fn spawn_dispatcher(dev: &Arc<DeviceInner>) {
    let weak = Arc::downgrade(dev);
    let spawned = std::thread::Builder::new()
        .name("kfdrt-callbacks".into())
        .spawn(move || dispatcher(weak));
    if spawned.is_err() {
        dev.callbacks.roles.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Called by blocking kfdrt calls: when the current thread is running a callback, hand the
/// dispatcher role to a new thread so other callbacks are not held up by this wait (this
/// thread goes on dispatching after its callback returns, until it next idles).
pub(crate) fn before_blocking(dev: &Arc<DeviceInner>) {
    if !IN_CALLBACK.with(|c| c.get()) {
        return;
    }
    if let Some(q) = UNTOLD.with(|u| u.take()) {
        dev.backend.host_signal_written(q);
    }
    IN_CALLBACK.with(|c| c.set(false));
    HANDED_ON.with(|c| c.set(true));
    // One more dispatcher, this one blocked.
    dev.callbacks
        .roles
        .fetch_add(1 | BLOCKED_ONE, Ordering::AcqRel);
    spawn_dispatcher(dev);
}

/// Take the next run of callbacks: the first stream (in enqueue order) whose oldest
/// pending callback is ready, with the callbacks that directly follow it on that stream
/// (each becomes ready when its predecessor returns). `blocked` is scratch space.
fn take_run(
    q: &mut VecDeque<Pending>,
    run: &mut Vec<Pending>,
    blocked: &mut Vec<*const StreamInner>,
) {
    blocked.clear();
    let mut i = 0;
    let mut key: *const StreamInner = core::ptr::null();
    while i < q.len() {
        let p = &q[i];
        let k = Arc::as_ptr(&p.stream);
        if key.is_null() {
            if blocked.contains(&k) {
                i += 1;
                continue;
            }
            if !p.ready() {
                blocked.push(k);
                i += 1;
                continue;
            }
            key = k;
        } else if k != key {
            i += 1;
            continue;
        } else {
            let chained = run
                .last()
                .is_some_and(|prev| p.prev_gate == Some(prev.gate));
            if !chained && !p.ready() {
                break;
            }
        }
        let taken = if i == 0 { q.pop_front() } else { q.remove(i) };
        if let Some(p) = taken {
            run.push(p);
        }
    }
}

/// Run one callback, open its hold, and retire its gate.
fn run_one(dev: &DeviceInner, p: Pending, next_chained: bool) {
    let status = match p.stream.sticky_error() {
        Some(e) => Err(e),
        None => Ok(()),
    };
    IN_CALLBACK.with(|c| c.set(true));
    // A panic must not kill the dispatcher (every other stream's callbacks would stop):
    // it becomes the stream's sticky error.
    let f = p.f;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || f.run(status)));
    IN_CALLBACK.with(|c| c.set(false));
    if HANDED_ON.with(|c| c.replace(false)) {
        dev.callbacks.roles.fetch_sub(BLOCKED_ONE, Ordering::AcqRel);
    }
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
    p.gate.open();
    // The next callback of the run is held by this one's hold packet anyway: the backend
    // hears about both gates after it (a no-op on hardware; the emulator re-polls then).
    UNTOLD.with(|u| u.set(None));
    if next_chained {
        UNTOLD.with(|u| u.set(Some(p.hold_queue)));
    } else {
        dev.backend.host_signal_written(p.hold_queue);
    }
    let timeline = p.stream.timeline.clone();
    drop(p.stream);
    lock(&dev.callbacks.retired).push_back((p.gate, timeline, p.hold));
}

/// Give back the gates whose hold packet completed, oldest first (holds of one stream
/// complete in order; a later stream's wait for an earlier one's is short-lived). With
/// `all`, the whole list is scanned (before an idle sleep).
fn recycle(cb: &Callbacks, all: bool) {
    // Lock order: retired, then gates (nothing takes them the other way round).
    let mut r = lock(&cb.retired);
    if r.is_empty() {
        return;
    }
    let mut gates = lock(&cb.gates);
    while let Some((g, s, hold)) = r.front() {
        if !timeline_reached(s, *hold) {
            break;
        }
        gates.free.push(*g);
        r.pop_front();
    }
    if all {
        r.retain(|(g, s, hold)| {
            let done = timeline_reached(s, *hold);
            if done {
                gates.free.push(*g);
            }
            !done
        });
    }
}

fn dispatcher(weak: Weak<DeviceInner>) {
    let mut run: Vec<Pending> = Vec::new();
    let mut blocked: Vec<*const StreamInner> = Vec::new();
    loop {
        let Some(dev) = weak.upgrade() else { return };
        let cb = &dev.callbacks;
        recycle(cb, false);
        dev.pools.reap();

        let seen = cb.added.load(Ordering::Acquire);
        let first_blocked = {
            let mut q = lock(&cb.queue);
            take_run(&mut q.pending, &mut run, &mut blocked);
            if run.is_empty() {
                q.pending.front().map(|p| Point {
                    timeline: p.stream.timeline.clone(),
                    target: p.start,
                    queue_id: 0,
                    gpu_index: p.stream.gpu_index,
                })
            } else {
                None
            }
        };
        if !run.is_empty() {
            let n = run.len();
            for (i, p) in run.drain(..).enumerate() {
                run_one(&dev, p, i + 1 < n);
            }
            continue;
        }
        match first_blocked {
            Some(pt) => {
                // Something is pending but not ready: sleep on the oldest's start point.
                let r = dev.wait_point_until(
                    &pt,
                    None,
                    Duration::ZERO,
                    Some(Instant::now() + START_SLEEP),
                );
                if let Err(e) = r {
                    if e.kind() == ErrorKind::LaunchFailure {
                        if let Some(f) = dev.check_faults(pt.gpu_index) {
                            let q = lock(&cb.queue);
                            for p in q.pending.iter().filter(|p| !reached(&p.stream, p.start)) {
                                p.stream.fail(f.clone());
                            }
                        }
                    }
                }
            }
            None => {
                // A callback blocked and the role was handed on: extra dispatchers leave
                // once idle (never the last one, so a callback pushed meanwhile is seen).
                if cb
                    .roles
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |r| {
                        let (threads, blocked) = (r & 0xffff_ffff, r >> 32);
                        (threads - blocked > 1).then(|| r - 1)
                    })
                    .is_ok()
                {
                    return;
                }
                // Idle: spin briefly (a callback right after another runs without a
                // futex wake-up), then sleep until one arrives (bounded, to notice exit
                // and recycle gates).
                let t0 = Instant::now();
                while cb.added.load(Ordering::Acquire) == seen && t0.elapsed() < IDLE_SPIN {
                    std::hint::spin_loop();
                }
                if cb.added.load(Ordering::Acquire) != seen {
                    continue;
                }
                recycle(cb, true);
                let mut q = lock(&cb.queue);
                if q.pending.is_empty() {
                    q.sleepers += 1;
                    let (mut g, _) = cb
                        .cv
                        .wait_timeout(q, IDLE_SLEEP)
                        .unwrap_or_else(|e| e.into_inner());
                    g.sleepers -= 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// Counts drops of the value a closure captures.
    struct Tracked(Arc<AtomicU32>);
    impl Drop for Tracked {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }

    #[test]
    fn small_closures_are_inline_large_ones_boxed_and_each_runs_or_drops_once() {
        let drops = Arc::new(AtomicU32::new(0));
        let calls = Arc::new(AtomicU32::new(0));
        // Small: runs once, its capture is dropped once.
        let (t, c) = (Tracked(drops.clone()), calls.clone());
        let s = Slot::new(move |r: Result<()>| {
            assert!(r.is_ok());
            let _keep = &t;
            c.fetch_add(1, Ordering::AcqRel);
        });
        assert!(matches!(s, Slot::Inline(_)));
        s.run(Ok(()));
        assert_eq!(
            (calls.load(Ordering::Acquire), drops.load(Ordering::Acquire)),
            (1, 1)
        );
        // Small, never run: dropped once.
        let t = Tracked(drops.clone());
        let s = Slot::new(move |_| {
            let _keep = &t;
        });
        drop(s);
        assert_eq!(drops.load(Ordering::Acquire), 2);
        // Large (64 bytes of capture): boxed, gets the status.
        let (big, c) = ([7u64; 8], calls.clone());
        let s = Slot::new(move |r: Result<()>| {
            assert_eq!(r.unwrap_err().kind(), ErrorKind::LaunchFailure);
            c.fetch_add(big.iter().sum::<u64>() as u32, Ordering::AcqRel);
        });
        assert!(matches!(s, Slot::Boxed(_)));
        s.run(Err(Error::new(ErrorKind::LaunchFailure, "t", "x")));
        assert_eq!(calls.load(Ordering::Acquire), 1 + 56);
        // A panicking inline closure drops its capture exactly once.
        let t = Tracked(drops.clone());
        let s = Slot::new(move |_| {
            let _keep = &t;
            panic!("boom");
        });
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.run(Ok(()))));
        assert!(r.is_err());
        assert_eq!(drops.load(Ordering::Acquire), 3);
    }
}
