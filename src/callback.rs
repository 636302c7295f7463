//! Stream callbacks (`hipStreamAddCallback`).
//!
//! # Semantics (HIP's and CUDA's)
//! - A callback runs exactly once on a host thread, after all work enqueued before it on
//!   its stream has completed; it receives the stream's status (Ok, or its sticky error).
//! - Work enqueued on the stream after it does not start until it returns.
//! - Stream synchronize and query, and events recorded after it, account for it: a
//!   synchronize returns only after it returned, a query reports NotReady until then, an
//!   event recorded after it completes after it.
//! - Callbacks of one stream run in enqueue order, one at a time.
//! - A callback may enqueue work on other streams (and on its own; it must not
//!   synchronize its own stream, which waits for the callback itself).
//! - Destroying a stream with pending callbacks returns at once; they still run.
//!
//! # Mechanism: lazy holds
//! Each stream numbers its callbacks (1, 2, ...) and owns a *callback line*: an
//! event-less `amd_signal_t`, allocated with its first callback, holding
//! `TIMELINE_BASE - n` once callbacks 1..=n returned (the dispatcher stores it after each
//! callback). An enqueue submits no packet: it records the stream's timeline point (all
//! earlier work), the callback's number, pushes the callback to the device's dispatcher
//! and sets the stream's *hold pending* flag.
//!
//! A *hold* is emitted only when something must be ordered after the callbacks: the next
//! non-callback command on the stream (the submit path's one flag check, made under the
//! queue's producer lock on the lock-free single-command path, which the first callback
//! after a command fences: `Stream::enqueue_callback`), an event
//! record, a synchronize, and anything that takes the stream's point (stream-ordered
//! frees, prefetches). It is one wait packet on the callback line for the stream's last
//! callback (BARRIER_VALUE on gfx9, WAIT_REG_MEM64 where the family has it), on the
//! stream's dedicated queue (so it stalls only this stream), and none at all when every
//! callback already returned. A run of back-to-back callbacks therefore costs no packet,
//! and at most one hold in front of the work that follows it. Work of the legacy null
//! stream (or of a blocking stream after it) that must wait for another stream's
//! callbacks waits on that stream's callback line directly.
//!
//! One dispatcher thread per device runs callbacks whose start point is reached and whose
//! predecessor on the stream returned, whichever stream they belong to. Each wake-up
//! drains a stream's whole run of consecutive callbacks (nothing enqueued in between: each
//! may start as soon as the previous one returned). With nothing ready it sleeps through
//! the host-wait path (`crate::wait`) on the oldest pending callback's start point, or on
//! a condition variable when idle.
//!
//! # Waking the queues that wait on a line
//! The CP polls a blocked wait's memory by itself, but the device may want to hear about
//! a host store that releases one (`kfd::Backend::host_signal_written`: a no-op on
//! hardware, the emulator re-polls the queue at once instead of at its next poll tick).
//! Every wait packet published on a line, the stream's own hold or another stream's
//! implicit wait (the legacy null stream's), is first registered with the device's
//! callbacks as (line, queue, target) by [`note_line_wait`]; after storing the line, the
//! dispatcher notifies exactly the queues whose registered target the new value reaches,
//! once each, and forgets those registrations. Lost notifications are ruled out as for
//! doorbells: the registration and the line store are each followed by a SeqCst fence
//! before the other side's check, so either the dispatcher sees the registration or the
//! wait's first poll sees the stored line.
//!
//! If a callback blocks inside a kfdrt call (say, a synchronize on another stream), the
//! waiting call hands the dispatcher role to a new thread first, so other streams'
//! callbacks keep running. A callback that panics is caught: its stream gets a sticky
//! LaunchFailure naming the stream and the panic message, the line still advances past
//! it, and every other callback still runs exactly once.

use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use crate::device::DeviceInner;
use crate::error::{Error, ErrorKind, Result};
use crate::signal::Signal;
use crate::stream::{Point, Stream, StreamInner, TIMELINE_BASE};
use crate::sync::lock;

/// A callback: receives the stream's status (Ok, or its sticky error).
pub type Callback = Box<dyn FnOnce(Result<()>) + Send + 'static>;

/// `Point::queue_id` of a callback-line point: no queue's packets complete it.
const NO_QUEUE: u32 = u32::MAX;

/// A stream's callback state (in `StreamInner`). `enqueued` and `hold_pending` are
/// written under the stream's state lock, so the submit path reads them in order with
/// the commands it publishes.
/// [`StreamCallbacks::marks`]: a callback hold is pending.
pub(crate) const MARK_HOLD_PENDING: u32 = 1;
/// [`StreamCallbacks::marks`]: the stream has a sticky error.
pub(crate) const MARK_FAILED: u32 = 2;
/// [`StreamCallbacks::marks`]: the stream's idle predicates were closed (its C handle is
/// being destroyed).
pub(crate) const MARK_CLOSED: u32 = 4;
/// [`StreamCallbacks::marks`], on a null stream: blocking streams live on the device (a
/// synchronize of the null stream waits for them; its query does not look at them).
pub(crate) const MARK_NULL_WAITS: u32 = 8;
/// The marks that make a query take its full path (all but [`MARK_NULL_WAITS`]).
pub(crate) const MARKS_QUERY: u32 = MARK_HOLD_PENDING | MARK_FAILED | MARK_CLOSED;

pub(crate) struct StreamCallbacks {
    /// The stream's marks that keep its idle predicates false, in one word so that
    /// `Stream::query_is_ok` reads them with one load: [`MARK_HOLD_PENDING`] (a callback
    /// was enqueued after the stream's last hold: the next command, or anything that
    /// takes the stream's point, emits one first), [`MARK_FAILED`] (the sticky error,
    /// `StreamInner::fail`), [`MARK_CLOSED`] (`Stream::close_idle_predicates`) and
    /// [`MARK_NULL_WAITS`] (`DeviceInner::sync_null_marks`). Only read-modify-writes
    /// change it (its writers hold different locks, or none).
    pub(crate) marks: AtomicU32,
    /// Callbacks enqueued (the number of the last one).
    enqueued: AtomicU64,
    /// `TIMELINE_BASE - n` once callbacks 1..=n returned; made with the first callback.
    line: OnceLock<Arc<Signal>>,
}

impl StreamCallbacks {
    pub(crate) fn new() -> Self {
        StreamCallbacks {
            marks: AtomicU32::new(0),
            enqueued: AtomicU64::new(0),
            line: OnceLock::new(),
        }
    }

    /// Whether a hold must be emitted before the stream's next command (the submit
    /// path's check, under the stream's state lock).
    #[inline(always)]
    pub(crate) fn hold_pending(&self) -> bool {
        self.marks.load(Ordering::Acquire) & MARK_HOLD_PENDING != 0
    }

    /// Mark a hold pending (the stream's `enqueue_callback`, under its lock).
    pub(crate) fn set_hold_pending(&self) {
        self.marks.fetch_or(MARK_HOLD_PENDING, Ordering::SeqCst);
    }

    /// Clear the pending hold mark.
    fn clear_hold_pending(&self) {
        self.marks.fetch_and(!MARK_HOLD_PENDING, Ordering::Release);
    }

    /// The stream's marks ([`MARK_HOLD_PENDING`], [`MARK_FAILED`], [`MARK_CLOSED`]).
    #[inline(always)]
    pub(crate) fn marks(&self) -> u32 {
        self.marks.load(Ordering::Acquire)
    }

    /// Set `mark` ([`MARK_FAILED`] or [`MARK_CLOSED`]: never cleared; or
    /// [`MARK_NULL_WAITS`]).
    pub(crate) fn set_mark(&self, mark: u32) {
        self.marks.fetch_or(mark, Ordering::SeqCst);
    }

    /// Clear `mark` ([`MARK_NULL_WAITS`]).
    pub(crate) fn clear_mark(&self, mark: u32) {
        self.marks.fetch_and(!mark, Ordering::SeqCst);
    }

    /// Callbacks that returned.
    fn returned(&self) -> u64 {
        self.line
            .get()
            .map_or(0, |l| (TIMELINE_BASE - l.load()) as u64)
    }

    /// Whether no callback awaits a hold: with the stream's timeline complete, the
    /// stream is idle.
    #[inline]
    pub(crate) fn idle(&self) -> bool {
        !self.hold_pending() || self.returned() >= self.enqueued.load(Ordering::Acquire)
    }

    /// Take the pending hold (under the stream's state lock): the line point the hold
    /// packet waits for, or None when every callback already returned (no packet; the
    /// mark is cleared). The caller registers the packet's queue with
    /// [`note_line_wait`], publishes it, then calls [`StreamCallbacks::hold_published`].
    pub(crate) fn take_hold(&self, gpu_index: usize) -> Option<Point> {
        let n = self.enqueued.load(Ordering::Acquire);
        let Some(line) = self.line.get() else {
            self.clear_hold_pending();
            return None;
        };
        if (TIMELINE_BASE - line.load()) as u64 >= n {
            self.clear_hold_pending();
            return None;
        }
        Some(Point {
            timeline: line.clone(),
            target: n,
            queue_id: NO_QUEUE,
            gpu_index,
        })
    }

    /// The hold taken by [`StreamCallbacks::take_hold`] is in the ring (still under the
    /// stream's state lock): clear the mark. Not earlier: the lock-free single-command
    /// path checks the mark under the queue's producer lock only, so a mark cleared
    /// before the hold was published would let another thread's command into the ring
    /// ahead of the hold, to run before the callbacks (and the null stream would stop
    /// waiting on the line while the stream's point does not cover the callbacks yet).
    pub(crate) fn hold_published(&self) {
        self.clear_hold_pending();
    }

    /// The line point of callbacks no hold covers yet (for another stream that must
    /// wait for this one's work: the legacy null stream's implicit dependencies). A queue
    /// that publishes a wait on it registers first ([`note_line_wait`]).
    pub(crate) fn pending_point(&self, gpu_index: usize) -> Option<Point> {
        if !self.hold_pending() {
            return None;
        }
        let n = self.enqueued.load(Ordering::Acquire);
        let line = self.line.get()?;
        (((TIMELINE_BASE - line.load()) as u64) < n).then(|| Point {
            timeline: line.clone(),
            target: n,
            queue_id: NO_QUEUE,
            gpu_index,
        })
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
    /// Stream timeline target of all GPU work before the callback.
    start: u64,
    /// The callback's number on its stream (1, 2, ...).
    seq: u64,
    f: Slot,
}

fn reached(s: &StreamInner, target: u64) -> bool {
    s.timeline.load() <= TIMELINE_BASE - target as i64
}

impl Pending {
    /// The previous callback of the stream returned, and the GPU work before this one
    /// completed (or the stream failed: the callback then gets the error).
    fn ready(&self) -> bool {
        self.stream.cb.returned() + 1 >= self.seq
            && (reached(&self.stream, self.start) || self.stream.sticky_error().is_some())
    }

    /// Whether this callback directly follows `prev` on its stream with nothing enqueued
    /// in between: it may start as soon as `prev` returned.
    fn chained_after(&self, prev: &Pending) -> bool {
        prev.seq + 1 == self.seq
            && prev.start == self.start
            && Arc::ptr_eq(&prev.stream, &self.stream)
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
    /// Waits published (or being published) on callback lines, not yet notified.
    line_waits: Mutex<Vec<LineWait>>,
    /// The smallest target in `line_waits` (u64::MAX when empty), read without the lock
    /// after each callback: a callback numbered below it releases no registered wait.
    line_waits_min: AtomicU64,
}

/// A queue's wait on a callback line, registered by [`note_line_wait`].
#[derive(Clone, Copy, PartialEq, Eq)]
struct LineWait {
    /// The line's [`Signal::serial`].
    line: u64,
    queue_id: u32,
    /// The callback number the wait needs returned.
    target: u64,
}

/// Register that `queue_id` is about to publish a wait on `p` (a no-op unless `p` is a
/// callback-line point: see the module docs), so that the dispatcher tells the backend
/// when the line reaches it. Called before the wait packet is published.
pub(crate) fn note_line_wait(dev: &DeviceInner, p: &Point, queue_id: u32) {
    if p.queue_id != NO_QUEUE {
        return;
    }
    let cb = &dev.callbacks;
    let line = p.timeline.serial();
    {
        let mut w = lock(&cb.line_waits);
        w.push(LineWait {
            line,
            queue_id,
            target: p.target,
        });
        cb.line_waits_min.fetch_min(p.target, Ordering::SeqCst);
    }
    // Pairs with the fence after the line store in `run_one`: either the dispatcher sees
    // this registration, or this check (and the packet's first poll) sees the store.
    std::sync::atomic::fence(Ordering::SeqCst);
    if p.done() {
        // Reached already: the dispatcher may never store this line again.
        let returned = (TIMELINE_BASE - p.timeline.load()) as u64;
        let mut w = lock(&cb.line_waits);
        w.retain(|e| e.line != line || e.target > returned);
        cb.store_min(&w);
    }
}

impl Callbacks {
    /// After callback `seq` of the line `line` returned (and the line was stored):
    /// notify each queue registered for a target it reaches, once, and forget them.
    fn notify_line_waits(&self, dev: &DeviceInner, line: u64, seq: u64) {
        // Queues notified in this pass (a wake re-polls every wait of the queue); past
        // its capacity a queue may hear twice, which is harmless.
        let mut told = [u32::MAX; 8];
        let mut n_told = 0;
        let mut w = lock(&self.line_waits);
        w.retain(|e| {
            if e.line != line || e.target > seq {
                return true;
            }
            if !told[..n_told].contains(&e.queue_id) {
                dev.backend.host_signal_written(e.queue_id);
                if let Some(t) = told.get_mut(n_told) {
                    *t = e.queue_id;
                    n_told += 1;
                }
            }
            false
        });
        self.store_min(&w);
    }

    /// Recompute [`Callbacks::line_waits_min`] (with the `line_waits` lock held).
    fn store_min(&self, w: &[LineWait]) {
        let min = w.iter().map(|e| e.target).min().unwrap_or(u64::MAX);
        self.line_waits_min.store(min, Ordering::SeqCst);
    }
}

struct Queue {
    pending: VecDeque<Pending>,
    /// Dispatchers asleep on the condition variable (enqueue notifies only then).
    sleepers: usize,
    /// Notifications sent and not yet taken by a sleeper waking up: an enqueue wakes a
    /// sleeper once, not once per callback until it runs (each is a futex system call).
    woken: usize,
}

/// One blocked dispatcher in [`Callbacks::roles`].
const BLOCKED_ONE: u64 = 1 << 32;

/// How long an idle dispatcher spins for new callbacks before sleeping.
const IDLE_SPIN: Duration = Duration::from_micros(10);
/// Longest sleep of a dispatcher: it re-checks the device's life.
const IDLE_SLEEP: Duration = Duration::from_millis(100);
/// Longest sleep on a pending callback's start point (a callback of another stream
/// added meanwhile, or a blocked predecessor returning, does not wake that sleep).
const START_SLEEP: Duration = Duration::from_millis(2);

thread_local! {
    static IN_CALLBACK: Cell<bool> = const { Cell::new(false) };
    /// Whether the running callback blocked and handed the dispatcher role on.
    static HANDED_ON: Cell<bool> = const { Cell::new(false) };
}

impl Callbacks {
    pub(crate) fn new() -> Self {
        Callbacks {
            queue: Mutex::new(Queue {
                pending: VecDeque::new(),
                sleepers: 0,
                woken: 0,
            }),
            cv: Condvar::new(),
            roles: AtomicU64::new(0),
            added: AtomicUsize::new(0),
            line_waits: Mutex::new(Vec::new()),
            line_waits_min: AtomicU64::new(u64::MAX),
        }
    }
}

impl Stream {
    /// `hipStreamAddCallback` / `cudaStreamAddCallback`: `f` runs exactly once on a host
    /// thread after all work enqueued on this stream so far has completed, and work
    /// enqueued later does not start until it returns. It receives the stream's status
    /// (its sticky error, if any). Callbacks of one stream run in order; synchronize,
    /// query and events recorded afterwards account for it. `flags` must be 0.
    ///
    /// `f` may enqueue work on any stream, and call kfdrt APIs that do not synchronize on
    /// this stream. The enqueue submits no packet (see the module docs: the hold is
    /// emitted when later work needs it).
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
        if s.cb.line.get().is_none() {
            let line = Signal::new(&dev.signals, TIMELINE_BASE)?;
            // Another thread's first callback may have won: its line is as good.
            let _ = s.cb.line.set(Arc::new(line));
        }
        let f = Slot::new(f);
        let cb = &dev.callbacks;
        let wake = self.enqueue_callback(|start| {
            let seq = s.cb.enqueued.load(Ordering::Relaxed) + 1;
            let p = Pending {
                stream: s.clone(),
                start,
                seq,
                f,
            };
            let mut q = lock(&cb.queue);
            q.pending.push_back(p);
            s.cb.enqueued.store(seq, Ordering::Release);
            let wake = q.sleepers > q.woken;
            q.woken += usize::from(wake);
            wake
        });
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
            let chained = run.last().is_some_and(|prev| p.chained_after(prev));
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

/// Run one callback and advance its stream's callback line past it.
fn run_one(dev: &DeviceInner, p: Pending) {
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
    let handed_on = HANDED_ON.with(|c| c.replace(false));
    if handed_on {
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
    if let Some(line) = p.stream.cb.line.get() {
        // The CP polls the line; nobody sleeps on its event.
        line.store_relaxed(TIMELINE_BASE - p.seq as i64);
        // Pairs with the fence in `note_line_wait`. The queues whose wait this store
        // releases hear of it (a no-op on hardware; the emulator re-polls them now).
        std::sync::atomic::fence(Ordering::SeqCst);
        let cb = &dev.callbacks;
        if p.seq >= cb.line_waits_min.load(Ordering::SeqCst) {
            cb.notify_line_waits(dev, line.serial(), p.seq);
        }
    }
    if handed_on {
        // Another dispatcher may be waiting for this callback to return.
        let _q = lock(&dev.callbacks.queue);
        dev.callbacks.cv.notify_all();
    }
}

fn dispatcher(weak: Weak<DeviceInner>) {
    let mut run: Vec<Pending> = Vec::new();
    let mut blocked: Vec<*const StreamInner> = Vec::new();
    loop {
        let Some(dev) = weak.upgrade() else { return };
        let cb = &dev.callbacks;
        dev.pools.reap();

        let seen = cb.added.load(Ordering::Acquire);
        let first_blocked = {
            let mut q = lock(&cb.queue);
            take_run(&mut q.pending, &mut run, &mut blocked);
            if run.is_empty() && !q.pending.is_empty() {
                // The first callback waiting for GPU work, if any: the others wait for a
                // predecessor that blocked in another dispatcher thread.
                let p = q.pending.iter().find(|p| !reached(&p.stream, p.start));
                Some(p.map(|p| Point {
                    timeline: p.stream.timeline.clone(),
                    target: p.start,
                    queue_id: 0,
                    gpu_index: p.stream.gpu_index,
                }))
            } else {
                None
            }
        };
        if !run.is_empty() {
            for p in run.drain(..) {
                run_one(&dev, p);
            }
            continue;
        }
        match first_blocked {
            Some(None) => {
                // Only predecessors that blocked hold things up: sleep until one returns
                // (its thread notifies) or a callback is added.
                let mut q = lock(&cb.queue);
                q.sleepers += 1;
                let (mut g, _) = cb
                    .cv
                    .wait_timeout(q, START_SLEEP)
                    .unwrap_or_else(|e| e.into_inner());
                g.sleepers -= 1;
                g.woken = g.woken.min(g.sleepers);
            }
            Some(Some(pt)) => {
                // Something is pending but not ready: sleep on the oldest's start point
                // (bounded: it may be waiting for its predecessor to return instead).
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
                // futex wake-up), then sleep until one arrives (bounded, to notice exit).
                let t0 = Instant::now();
                while cb.added.load(Ordering::Acquire) == seen && t0.elapsed() < IDLE_SPIN {
                    std::hint::spin_loop();
                }
                if cb.added.load(Ordering::Acquire) != seen {
                    continue;
                }
                let mut q = lock(&cb.queue);
                if q.pending.is_empty() {
                    q.sleepers += 1;
                    let (mut g, _) = cb
                        .cv
                        .wait_timeout(q, IDLE_SLEEP)
                        .unwrap_or_else(|e| e.into_inner());
                    g.sleepers -= 1;
                    g.woken = g.woken.min(g.sleepers);
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
