//! Streams: HIP's in-order work queues on KFD AQL queues.
//!
//! # The path of a command
//! [`Stream::write_value32`] (like every enqueue) goes one way, straight line, with no
//! call back from the queue into the stream:
//! 1. stream: the command is encoded completely (`cmdbuf`: WRITE_DATA from the pm4
//!    encoders' words, under PRED_EXEC on a multi-XCC GPU, every per-family choice made
//!    there) — into a `SmallIb` on the hot path, a `CmdBuf` otherwise;
//! 2. stream: a ring slot of the stream's queue is reserved (`Stream::reserve_fast`:
//!    `AqlQueue::try_reserve_one` -> `ring::UserQueue::try_reserve`, taking the queue's
//!    producer lock when it is free and the ring has room; otherwise the slow path,
//!    which waits), and the stream checks under the lock that it has not moved;
//! 3. queue (`AqlQueue`/`OneSlot::publish_ib`): the words are copied into the slot's IB
//!    area, the PM4-IB packet written into the slot with its header last (release store);
//! 4. ring (`Reservation::publish_locked`): release store of the write pointer, HDP
//!    flush if needed, doorbell store; it returns a `ring::Published` that still holds
//!    the producer lock;
//! 5. stream: counts the packet (`Stream::account`: the count, the queue id, the idle
//!    bound), then drops the `Published`, which releases the producer lock and notifies
//!    the backend (`kfd::Backend::doorbell_written`, a no-op on hardware).
//!
//! Counting under the producer lock keeps the counts of threads sharing a stream, and of
//! streams sharing a queue, in ring order. Nothing is written to the ring before every
//! command of the submission is encoded (so an encoding error never leaves a half-written
//! ring). With dependencies to collect or a queue move to make, `Stream::submit` does
//! the same under the stream's lock with a `CmdBuf` (waits first, in packets of their
//! own): `AqlQueue::submit` returns the packet count and the `Published`. The gfx9
//! event wait (`Stream::wait_event`) encodes its whole BARRIER_VALUE packet before
//! reserving; a kernel launch (`Stream::submit_packet`, `crate::launch`) builds its
//! dispatch packet in the reserved slot (it needs the queue's kernarg ring, guarded by
//! that lock) and is counted the same way.
//!
//! # Model
//! Every stream owns a *timeline*: an `amd_signal_t` that starts at [`TIMELINE_BASE`] and
//! is the completion signal of every packet the stream submits, so the CP decrements it
//! once per packet. The stream counts the packets it submitted; packet *k* is complete
//! when `timeline <= TIMELINE_BASE - k`. Completion points are therefore just numbers:
//! an event record captures `(timeline, k)` and needs no packet unless it takes a
//! timestamp; a query is two atomic loads.
//!
//! A wait on another stream's point is a packet that names that stream's timeline by
//! address and reads it whenever the CP gets to it. So the waiter keeps the timeline
//! until its wait has run: a destroyed event and stream (destroyed while busy, a stream
//! lives until its work completes, then its timeline's slot goes back to the signal pool,
//! to be reset to TIMELINE_BASE by the next `Signal::new`) must not leave a queued wait
//! watching a new stream's counter. The timelines in the waiter's waited-list slots are
//! kept for the waiter's life (the lock-free event wait takes no reference), the others
//! until the waiter's timeline passes its waits (`StreamState::holds`).
//!
//! # Hardware queues and blocking commands
//! Streams share a pool of at most `KFDRT_MAX_HW_QUEUES` (default 4) AQL queues per GPU
//! and priority, assigned round robin, as CLR multiplexes streams. A hardware queue runs
//! in order, so a packet that may wait for something outside its own queue (a
//! wait-value, a wait on another queue's timeline, the hold behind a callback, an
//! implicit null-stream dependency) would stall every stream behind it. kfdrt therefore
//! never puts such a packet in a shared queue: the first time a stream needs one, it
//! moves to a *dedicated* queue of its own (the first packet there waits for the stream's
//! own earlier work on the shared queue), and stays there. Packets in shared queues then
//! depend only on earlier packets of the same queue, which depend on nothing outside it,
//! so every shared queue drains; a dedicated queue only ever stalls its own stream.
//! This holds for any stream-to-queue mapping, including `KFDRT_MAX_HW_QUEUES=1`, and
//! relies on KFD's scheduler running more queues than hardware slots (oversubscription).
//! A stream with a CU mask always has its own queue (SET_CU_MASK applies per queue).
//!
//! KFD allows 127 queues per process and GPU: once a dedicated queue cannot be created,
//! a stream that needs one stays on its shared queue (as every CLR stream does), where
//! its waits may delay the other streams of that queue until they are satisfied.

use std::marker::PhantomPinned;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::atomic::{
    AtomicBool, AtomicI64, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering,
};
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use crate::callback::{MARKS_QUERY, MARK_CLOSED, MARK_FAILED, MARK_HOLD_PENDING, MARK_NULL_WAITS};
use crate::cmd::{self, WaitCondition};
use crate::cmdbuf::{Cmd, CmdBuf, MemWait, SmallIb, Target};
use crate::device::{Device, DeviceInner};
use crate::error::{Error, ErrorKind, Result, StaticError};
use crate::queue::{AqlQueue, OneSlot, DEFAULT_RING_PACKETS};
use crate::ring::Published;
use crate::signal::Signal;
use crate::sync::lock;
use crate::types::{StreamFlags, WaitCompare, WriteValueFlags};
use pm4::pkt3::CompareFn;

/// Initial value of a stream timeline.
pub const TIMELINE_BASE: i64 = 1 << 62;

/// `hipStreamDefault` ([`StreamFlags::DEFAULT`]).
pub(crate) const STREAM_DEFAULT: u32 = StreamFlags::DEFAULT.bits();
/// `hipStreamNonBlocking` ([`StreamFlags::NON_BLOCKING`]).
pub(crate) const STREAM_NON_BLOCKING: u32 = StreamFlags::NON_BLOCKING.bits();

/// HIP's least (lowest) stream priority, as CLR reports it.
pub const PRIORITY_LEAST: i32 = 1;
/// HIP's greatest (highest) stream priority, as CLR reports it.
pub const PRIORITY_GREATEST: i32 = -1;

/// KFD queue priority for a HIP priority (clamped): low 0, normal 7, high 11. ROCr maps
/// HSA_AMD_QUEUE_PRIORITY_{LOW,NORMAL,HIGH} to HSA_QUEUE_PRIORITY_{MINIMUM,NORMAL,HIGH}
/// (core/runtime/counted_queue_manager.cpp), and libhsakmt's `priority_map`
/// {0,3,5,7,9,11,15} turns those (-3, 0, 2) into KFD priorities 0, 7, 11 — the low,
/// medium and high pipe priority bands of the kernel (see firmware-notes/runtime.md).
fn kfd_priority(p: i32) -> u32 {
    match p.clamp(PRIORITY_GREATEST, PRIORITY_LEAST) {
        1 => 0,
        0 => 7,
        _ => 11,
    }
}

/// How many shared AQL queues a GPU gets per priority (`KFDRT_MAX_HW_QUEUES`, default 4).
pub fn max_hw_queues() -> usize {
    std::env::var("KFDRT_MAX_HW_QUEUES")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .filter(|&n| n > 0)
        .unwrap_or(4)
}

/// A completion point on a stream timeline.
#[derive(Clone)]
pub(crate) struct Point {
    pub(crate) timeline: Arc<Signal>,
    pub(crate) target: u64,
    pub(crate) queue_id: u32,
    pub(crate) gpu_index: usize,
}

impl Point {
    pub(crate) fn threshold(&self) -> i64 {
        TIMELINE_BASE - self.target as i64
    }
    pub(crate) fn done(&self) -> bool {
        self.timeline.load() <= self.threshold()
    }
}

/// The shared queues of one GPU and priority: (gpu, KFD priority, queues, round-robin
/// cursor).
type SharedPool = (usize, u32, Vec<Arc<AqlQueue>>, usize);

/// Shared hardware queues of one device, per GPU and KFD priority.
pub(crate) struct QueuePools {
    pools: Mutex<Vec<SharedPool>>,
    /// Streams that synchronise with the null stream (for the legacy default stream).
    pub(crate) blocking: Mutex<Vec<Weak<StreamInner>>>,
    /// How many of them are alive (any GPU): while none is, the null stream's idle
    /// synchronize skips the walk of `blocking` and its lock.
    blocking_live: AtomicUsize,
    /// Serialises the updates of the null streams' [`MARK_NULL_WAITS`]
    /// (`DeviceInner::sync_null_marks`).
    null_marks: Mutex<()>,
    /// The null stream of each GPU, once created.
    pub(crate) null: Mutex<Vec<(usize, Weak<StreamInner>)>>,
    /// Set once any null stream exists: until then blocking streams skip the lookup.
    pub(crate) null_used: AtomicBool,
    /// Streams destroyed while busy, kept until their work completes.
    pub(crate) graveyard: Mutex<Vec<Arc<StreamInner>>>,
    /// Memory a queued packet may still read or write, released by its owner early (a
    /// timing event's timestamp cell, re-recorded or destroyed before its record's work
    /// ran; an interprocess event's block, `crate::ipc`), each with the point after that
    /// packet: kept until it is reached ([`QueuePools::keep_until`]), so it goes to no
    /// other owner before.
    kept: Mutex<Vec<(Point, Kept)>>,
    /// `kept` is not empty (`reap` skips its lock otherwise).
    has_kept: AtomicBool,
    /// Set by the fault watcher once a fault is recorded (read by `poll_faults`).
    faulted: AtomicBool,
    /// Whether the device's fault watcher thread was started.
    watcher: AtomicBool,
}

impl QueuePools {
    pub(crate) fn new() -> Self {
        QueuePools {
            pools: Mutex::new(Vec::new()),
            blocking: Mutex::new(Vec::new()),
            blocking_live: AtomicUsize::new(0),
            null_marks: Mutex::new(()),
            null: Mutex::new(Vec::new()),
            null_used: AtomicBool::new(false),
            graveyard: Mutex::new(Vec::new()),
            kept: Mutex::new(Vec::new()),
            has_kept: AtomicBool::new(false),
            faulted: AtomicBool::new(false),
            watcher: AtomicBool::new(false),
        }
    }

    fn shared(&self, dev: &Arc<DeviceInner>, gpu: usize, prio: u32) -> Result<Arc<AqlQueue>> {
        let max = max_hw_queues();
        let mut pools = lock(&self.pools);
        let idx = match pools
            .iter()
            .position(|(g, p, _, _)| *g == gpu && *p == prio)
        {
            Some(i) => i,
            None => {
                pools.push((gpu, prio, Vec::new(), 0));
                pools.len() - 1
            }
        };
        let (_, _, qs, rr) = &mut pools[idx];
        if qs.len() < max {
            let q = Arc::new(AqlQueue::new(dev, gpu, prio, DEFAULT_RING_PACKETS)?);
            qs.push(q.clone());
            return Ok(q);
        }
        *rr = (*rr + 1) % qs.len();
        Ok(qs[*rr].clone())
    }

    /// Drop destroyed streams whose work has completed, and the memory kept for packets
    /// that have run.
    pub(crate) fn reap(&self) {
        let mut g = lock(&self.graveyard);
        g.retain(|s| !s.idle());
        drop(g);
        self.reap_kept();
    }

    /// The `kept` part of [`QueuePools::reap`] (one load when nothing is kept): also after
    /// a busy synchronize, so memory kept for a destroyed event or stream is freed in a
    /// program whose streams live on.
    pub(crate) fn reap_kept(&self) {
        if self.has_kept.load(Ordering::Acquire) {
            let mut k = lock(&self.kept);
            let done = take_done(&mut k);
            self.has_kept.store(!k.is_empty(), Ordering::Release);
            drop(k);
            // Freed outside the lock: a block's free is system calls.
            drop(done);
        }
    }

    /// Keep `mem` until `p` is reached (a packet before `p` may still use it; see `kept`);
    /// at once when `p` has been.
    pub(crate) fn keep_until(&self, p: Point, mem: Kept) {
        if p.done() {
            return;
        }
        let mut k = lock(&self.kept);
        let done = take_done(&mut k);
        k.push((p, mem));
        self.has_kept.store(true, Ordering::Release);
        drop(k);
        drop(done);
    }

    /// The furthest point not yet reached that `kept` holds on timeline `serial`: where a
    /// stream destroyed after a GPU fault (which keeps its timeline there until its last
    /// point, see `Drop for Stream`) may still run packets. None when nothing is pending.
    pub(crate) fn kept_point(&self, serial: u64) -> Option<Point> {
        // Always under the lock, no `has_kept` shortcut: the caller learnt that the stream
        // is gone from a failed `Weak::upgrade`, which orders nothing after the dropping
        // thread's `keep_until` (a stale `false` here would free memory a packet names).
        lock(&self.kept)
            .iter()
            .filter(|(p, _)| p.timeline.serial() == serial && !p.done())
            .max_by_key(|(p, _)| p.target)
            .map(|(p, _)| p.clone())
    }
}

/// The entries of `kept` whose point has been reached, taken out (for the caller to drop
/// after it unlocks `kept`).
fn take_done(k: &mut Vec<(Point, Kept)>) -> Vec<(Point, Kept)> {
    let mut done = Vec::new();
    let mut i = 0;
    while i < k.len() {
        if k[i].0.done() {
            done.push(k.swap_remove(i));
        } else {
            i += 1;
        }
    }
    done
}

/// Something [`QueuePools::keep_until`] keeps alive: a signal, or another owner of memory
/// queued packets name (dropped when the point is reached).
pub(crate) type Kept = Arc<dyn Send + Sync>;

pub(crate) struct StreamState {
    queue: Arc<AqlQueue>,
    dedicated: bool,
    /// Needed a dedicated queue but KFD's queue limit was reached: stays shared.
    overflow: bool,
    /// The shared queue the stream left for its dedicated one: kept alive for
    /// [`StreamInner::cur`] readers that loaded it before the move.
    retired: Option<Arc<AqlQueue>>,
    /// Other timelines this stream's queued waits read that its waited list's slots do
    /// not keep ([`WaitedList`]), each with the stream's packet count when the waits were
    /// in the ring: kept until the stream's timeline reaches that count
    /// ([`Stream::hold_waited`]). A wait packet reads its signal by address whenever the
    /// CP gets to it, and a dropped signal's slot goes to the next `Signal::new`, reset to
    /// its new owner's value: a wait still queued would then watch another stream's
    /// counter (never reaching the threshold: a hang; or reaching it at an unrelated
    /// moment).
    holds: Vec<(Arc<Signal>, u64)>,
}

/// The state behind a [`Stream`] handle.
pub(crate) struct StreamInner {
    pub(crate) dev: Arc<DeviceInner>,
    pub(crate) gpu_index: usize,
    pub(crate) family: Target,
    flags: u32,
    priority: i32,
    cu_mask: Option<Vec<u32>>,
    is_null: bool,
    pub(crate) timeline: Arc<Signal>,
    /// `timeline`'s value word's address ([`Signal::value_addr`]): the idle check loads it
    /// without walking from the `Arc` to the signal's slot.
    timeline_value: usize,
    /// Packets submitted (written under `state`, read lock-free).
    submitted: AtomicU64,
    /// The address of the device's allocator flag (`mempool::release_pending_flag`: the
    /// idle synchronize predicate's, one load closer than through `dev`).
    release_pending: usize,
    /// `TIMELINE_BASE - submitted + 1`: every submitted packet is complete once the
    /// timeline's value is below it, stored with `submitted` (the idle predicate compares
    /// the value with it, no subtraction). Strictly below, so that an all-zero
    /// [`IdleSlot`], whose value and bound are one word, is never idle.
    complete_below: AtomicI64,
    /// Queue id of the last submitted packet (stored before `submitted`).
    queue_id: AtomicU32,
    /// The sticky error is not a GPU fault (a callback panicked): the queue still drains.
    soft_failed: AtomicBool,
    /// For each other timeline this stream has ordered itself after (event waits,
    /// implicit null-stream waits, explicit point waits): the furthest point. Used by the
    /// stream-ordered allocator's ReuseFollowEventDependencies. Keyed on the timeline's
    /// [`Signal::serial`] (its address is recycled as soon as the timeline is dropped, and
    /// another stream's timeline must never inherit this ordering); the weak reference
    /// lets entries of dropped timelines be pruned (nothing can ask about them then).
    waited: WaitedList,
    error: Mutex<Option<String>>,
    pub(crate) state: Mutex<StreamState>,
    /// `state.queue`, readable without the lock (the single-command hot path): stored
    /// under the lock, and a queue it ever pointed to lives as long as the stream
    /// (`state.queue` or `state.retired`). Changes at most once (shared -> dedicated).
    cur: AtomicPtr<AqlQueue>,
    /// `state.dedicated` (set once, never cleared), readable without the lock.
    on_dedicated: AtomicBool,
    /// Callbacks and their lazy hold (`crate::callback`).
    pub(crate) cb: crate::callback::StreamCallbacks,
    /// The stream's SDMA queue and ordering words, created with its first large copy.
    pub(crate) sdma: Mutex<Option<crate::sdma::SdmaLink>>,
    /// The gfx9 wait kernel, once a wait needed it (`crate::waitkernel`).
    pub(crate) wait_kernel: crate::waitkernel::StreamSlot,
}

/// Timelines of a [`WaitedList`] kept in lock-free slots.
const WAITED_SLOTS: usize = 8;

/// A stream's waited list (`StreamInner::waited`): per other timeline (keyed on its
/// [`Signal::serial`]), the furthest packet count the stream ordered itself after.
///
/// The first [`WAITED_SLOTS`] timelines get a slot each, read and raised without a lock
/// (the event-wait hot path raises a known timeline's count under its queue's producer
/// lock, not the stream's state lock); further timelines go to `more`, under its lock,
/// pruned of dropped timelines as before. A slot is filled once (count, then serial with
/// a release store) by a writer holding the stream's state lock, and never freed or
/// reused: a writer that read a serial earlier could otherwise raise another timeline's
/// count.
///
/// A slot also keeps its timeline's [`Signal`] alive (`kept`) for the stream's life (a
/// stream destroyed while busy lives until its work is complete): the wait packets the
/// lock-free event wait publishes (`Stream::wait_words_fast`, only for a timeline with a
/// slot) name the signal by address, and a wait still queued when the waited stream and
/// event are destroyed must read that signal, not the next owner of its slot (reset to
/// TIMELINE_BASE). So the hot path takes no reference and the CP never reads a recycled
/// slot; the cost is at most [`WAITED_SLOTS`] signals per stream outliving their streams.
/// Timelines in `more` are only weakly referenced: their waits are held by the stream's
/// `StreamState::holds` until the stream is past them.
struct WaitedList {
    /// (serial, count); serial 0: free (filled in order, so the first free slot ends
    /// the used ones).
    slots: [(AtomicU64, AtomicU64); WAITED_SLOTS],
    more: Mutex<Vec<(u64, u64, Weak<Signal>)>>,
    /// `more` holds entries (readers skip its lock otherwise).
    has_more: AtomicBool,
    /// The timelines of the filled slots, kept alive (see above); touched only when a
    /// slot is filled.
    kept: Mutex<Vec<Arc<Signal>>>,
}

impl WaitedList {
    fn new() -> Self {
        WaitedList {
            slots: std::array::from_fn(|_| (AtomicU64::new(0), AtomicU64::new(0))),
            more: Mutex::new(Vec::new()),
            has_more: AtomicBool::new(false),
            kept: Mutex::new(Vec::new()),
        }
    }

    /// The slot of timeline `serial`, if it has one.
    #[inline(always)]
    fn slot(&self, serial: u64) -> Option<&AtomicU64> {
        for (t, target) in &self.slots {
            let t = t.load(Ordering::Acquire);
            if t == serial {
                return Some(target);
            }
            if t == 0 {
                break;
            }
        }
        None
    }

    /// Raise timeline `serial`'s count to `target` if it has a slot (any thread): false
    /// when it has none (the caller takes [`WaitedList::note`]).
    #[inline(always)]
    fn raise_slot(&self, serial: u64, target: u64) -> bool {
        match self.slot(serial) {
            Some(t) => {
                t.fetch_max(target, Ordering::AcqRel);
                true
            }
            None => false,
        }
    }

    /// Whether timeline `serial` has a slot (then the list keeps it alive).
    fn keeps(&self, serial: u64) -> bool {
        self.slot(serial).is_some()
    }

    /// Note `target` on `timeline`; the caller holds the stream's state lock (the one
    /// writer that fills slots or touches `more`).
    fn note(&self, timeline: &Arc<Signal>, target: u64) {
        let id = timeline.serial();
        if self.raise_slot(id, target) {
            return;
        }
        if self.has_more.load(Ordering::Relaxed) {
            let mut w = lock(&self.more);
            if let Some(e) = w.iter_mut().find(|(t, _, _)| *t == id) {
                e.1 = e.1.max(target);
                return;
            }
        }
        // A free slot (slots fill in order and are never freed: once all are used, new
        // timelines go to `more` and an entry is only ever in one of the two).
        if let Some((t, c)) = self
            .slots
            .iter()
            .find(|(t, _)| t.load(Ordering::Relaxed) == 0)
        {
            // Kept before the serial is published: a lock-free waiter that finds the
            // serial relies on the slot keeping its signal.
            lock(&self.kept).push(timeline.clone());
            c.store(target, Ordering::Relaxed);
            t.store(id, Ordering::Release);
            return;
        }
        let mut w = lock(&self.more);
        if w.len() >= 16 {
            w.retain(|(_, _, tl)| tl.strong_count() > 0);
        }
        w.push((id, target, Arc::downgrade(timeline)));
        self.has_more.store(true, Ordering::Release);
    }

    /// Whether the count noted on timeline `serial` is at least `target`.
    fn covers(&self, serial: u64, target: u64) -> bool {
        if let Some(t) = self.slot(serial) {
            return t.load(Ordering::Acquire) >= target;
        }
        self.has_more.load(Ordering::Acquire)
            && lock(&self.more)
                .iter()
                .any(|&(t, c, _)| t == serial && c >= target)
    }
}

/// The x86 compares of the idle predicates ([`StreamInner::quiescent`],
/// [`StreamInner::synchronize_is_noop`], [`IdleSlot`]'s), one `asm!` that returns false
/// from the enclosing function when the stream is busy: the timeline's value in `{v}` is
/// below the `complete_below` word at `[at]`, the marks word at its distance from it has
/// none of `mask` set, and with `release` the pool release flag (its address at its
/// distance from `complete_below`) is clear. The compares take their memory operands
/// directly (LLVM does not fold an atomic load into a compare: a load, and a test, each);
/// x86 loads are acquire loads (TSO), as the atomic loads of the portable versions.
/// `[SLOT_LOADS]`: first load `{v}` and `{c}` through an [`IdleSlot`] at `{b}`; `inner
/// s, value`: the words of `StreamInner` `s`, with the timeline's value `value`; `slot
/// b`: through the [`IdleSlot`] at `b`. The caller's `unsafe` block says why the words
/// read are live.
#[cfg(target_arch = "x86_64")]
macro_rules! idle_compares {
    (slot $b:expr, mask = $mask:expr $(, $release:ident)?) => {
        idle_compares!(
            [SLOT_LOADS], at = "{b} + {c}", mask = $mask $(, $release)?;
            b = in(reg) $b,
            v = out(reg) _,
            c = out(reg) _,
        )
    };
    (inner $s:expr, $value:expr, mask = $mask:expr $(, $release:ident)?) => {
        idle_compares!(
            [], at = "{s} + {complete}", mask = $mask $(, $release)?;
            v = inout(reg) $value => _,
            s = in(reg) $s,
            complete = const std::mem::offset_of!(StreamInner, complete_below),
        )
    };
    ([$($loads:ident)?], at = $at:literal, mask = $mask:expr $(, $release:ident)?;
     $($operands:tt)*) => {
        std::arch::asm!(
            $(idle_compares!(@$loads),)?
            concat!("cmp {v}, qword ptr [", $at, "]"),
            "jge {busy}",
            concat!("test dword ptr [", $at, " + {marks}], {mask}"),
            "jne {busy}",
            $(idle_compares!(@$release $at),)?
            $($operands)*
            marks = const MARKS_FROM_COMPLETE,
            mask = const $mask,
            $(release = const idle_compares!(@@$release),)?
            busy = label { return false; },
            options(readonly, nostack),
        )
    };
    // The slot's two offsets, then the value through the first (read before the bound).
    (@SLOT_LOADS) => {
        "mov {v}, qword ptr [{b}]\nmov {c}, qword ptr [{b} + 8]\nmov {v}, qword ptr [{b} + {v}]"
    };
    (@release $at:literal) => {
        concat!("mov {v}, qword ptr [", $at, " + {release}]\ncmp byte ptr [{v}], 0\njne {busy}")
    };
    (@@release) => {
        RELEASE_FROM_COMPLETE
    };
}

/// Every mark ([`Stream::synchronize_is_noop`]: none may be set).
const MARKS_ANY: u32 = u32::MAX;

/// The marks that send an enqueue to its slow path: a sticky error to return, a callback
/// hold to emit first.
const MARKS_SLOW: u32 = MARK_FAILED | MARK_HOLD_PENDING;

impl StreamInner {
    pub(crate) fn point(&self) -> Point {
        let target = self.submitted.load(Ordering::Acquire);
        let queue_id = self.queue_id.load(Ordering::Acquire);
        Point {
            timeline: self.timeline.clone(),
            target,
            queue_id,
            gpu_index: self.gpu_index,
        }
    }

    pub(crate) fn idle(&self) -> bool {
        let target = self.submitted.load(Ordering::Acquire);
        self.timeline.load() <= TIMELINE_BASE - target as i64 && self.cb.idle()
    }

    /// No sticky error, every submitted packet complete, no callback hold pending and the
    /// idle predicates not closed: a query answers Ok. The timeline's value (reached
    /// through `timeline_value`, no pointer walk) against `complete_below`, and the marks
    /// word, leaf code. Stricter than `idle`: a hold whose callbacks have all returned
    /// answers false (the full paths decide; a synchronize retires such a hold).
    ///
    /// The value is read before `complete_below`: both only decrease, so a value below a
    /// later `complete_below` still means every packet counted there had completed.
    #[inline(always)]
    fn quiescent(&self) -> bool {
        let value = self.timeline_now();
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: reads two words of `self` (live).
            unsafe { idle_compares!(inner self, value, mask = MARKS_QUERY) };
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            value < self.complete_below.load(Ordering::Acquire)
                && self.cb.marks() & MARKS_QUERY == 0
        }
    }

    /// The timeline's value (the word `timeline_value` points at: no pointer walk).
    #[inline(always)]
    fn timeline_now(&self) -> i64 {
        // SAFETY: the value word of `self.timeline`, which lives as long as `self`.
        unsafe { AtomicI64::from_ptr(self.timeline_value as *mut i64) }.load(Ordering::Acquire)
    }

    /// [`Stream::synchronize_is_noop`]: [`StreamInner::quiescent`], no mark at all (on the
    /// null stream [`MARK_NULL_WAITS`]: no blocking stream alive on the device, whose work
    /// would count) and no stream-ordered-allocator release pending (read through
    /// `release_pending`).
    #[inline(always)]
    fn synchronize_is_noop(&self) -> bool {
        let value = self.timeline_now();
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: as `quiescent`, and reads `self.release_pending`, the address of the
            // device's flag, and the flag, which lives as long as `self` (it holds the
            // device).
            unsafe { idle_compares!(inner self, value, mask = MARKS_ANY, release) };
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            value < self.complete_below.load(Ordering::Acquire)
                && self.cb.marks() == 0
                && !crate::mempool::release_pending_flag(&self.dev).load(Ordering::Relaxed)
        }
    }

    /// Whether the stream has a sticky error.
    #[inline(always)]
    fn failed(&self) -> bool {
        self.cb.marks() & MARK_FAILED != 0
    }

    /// Whether the stream synchronises with the null stream (a blocking, non-null stream).
    fn is_blocking(&self) -> bool {
        self.flags & STREAM_NON_BLOCKING == 0 && !self.is_null
    }

    #[inline]
    pub(crate) fn sticky_error(&self) -> Option<Error> {
        if !self.failed() {
            return None;
        }
        self.sticky_error_slow()
    }

    #[cold]
    #[inline(never)]
    fn sticky_error_slow(&self) -> Option<Error> {
        let msg = lock(&self.error).clone().unwrap_or_default();
        Some(Error::new(ErrorKind::LaunchFailure, "stream", msg))
    }

    /// A sticky error that is not a GPU fault: the stream's queue keeps draining its
    /// submitted work (so a destroy while busy still waits for it).
    pub(crate) fn fail_soft(&self, why: String) {
        if !self.failed() {
            self.soft_failed.store(true, Ordering::Release);
        }
        self.fail(why);
    }

    pub(crate) fn fail(&self, why: String) {
        let mut e = lock(&self.error);
        if e.is_none() {
            *e = Some(why);
        }
        self.cb.set_mark(MARK_FAILED);
    }
}

/// [`Stream::query_is_ok`] and [`Stream::synchronize_is_noop`] of a stream, reached
/// without its handle: one pointer to the stream's state, for a C layer's cache of its
/// hot stream (the predicates' loads are one load closer than through a `Stream`, whose
/// state sits behind its reference count). Valid while the stream it was taken from
/// ([`Stream::idle_probe`]) lives: the caller keeps that `Stream` alive.
///
/// # Example
///
/// ```
/// # fn main() -> kfdrt::Result<()> {
/// let dev = kfdrt::Device::open()?;
/// let s = dev.create_stream(0)?;
/// let probe = s.idle_probe();
/// let mem = dev.alloc(kfdrt::MemoryKind::Device, 0, 4096)?;
/// s.memset_d32(mem.va(), 7, 1024)?;
/// s.synchronize()?;
/// // SAFETY: `s`, the stream the probe was taken from, is alive.
/// assert!(unsafe { probe.query_is_ok() && probe.synchronize_is_noop() });
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug)]
pub struct IdleProbe(NonNull<StreamInner>);

impl IdleProbe {
    /// [`Stream::query_is_ok`] of the stream.
    ///
    /// # Safety
    /// The `Stream` this probe was taken from is still alive.
    #[inline(always)]
    pub unsafe fn query_is_ok(self) -> bool {
        // SAFETY: the caller keeps the stream, which owns this state, alive.
        unsafe { self.0.as_ref() }.quiescent()
    }

    /// [`Stream::synchronize_is_noop`] of the stream.
    ///
    /// # Safety
    /// The `Stream` this probe was taken from is still alive.
    #[inline(always)]
    pub unsafe fn synchronize_is_noop(self) -> bool {
        // SAFETY: as `query_is_ok`.
        unsafe { self.0.as_ref() }.synchronize_is_noop()
    }
}

/// [`Stream::query_is_ok`] and [`Stream::synchronize_is_noop`] of one stream, cached
/// self-relatively for a C layer's per-thread slot: the addresses of the stream's timeline
/// value and of its completion bound, each as an offset from the slot's own address. The
/// predicates are then three loads from the slot's base (no pointer to the stream's state
/// in between), and the all-zero slot ([`IdleSlot::EMPTY`], a thread-local slot at thread
/// start) is a valid one that is never idle: both offsets name the slot's first word,
/// and a value is never below itself.
///
/// The offsets hold only at the address [`IdleSlot::set`] / [`IdleSlot::set_from`] wrote
/// them at: those take a pinned slot (`IdleSlot` is `!Unpin`), so a set slot does not
/// move (an `IdleSlot::EMPTY` written over one is still a valid, empty slot).
///
/// # Example
///
/// ```
/// use std::pin::pin;
///
/// use kfdrt::stream::IdleSlot;
///
/// # fn main() -> kfdrt::Result<()> {
/// let dev = kfdrt::Device::open()?;
/// let s = dev.create_stream(0)?;
/// let mut slot = pin!(IdleSlot::EMPTY);
/// // SAFETY: an empty slot names no stream.
/// assert!(!unsafe { slot.query_is_ok() });
/// slot.as_mut().set(&s);
/// s.synchronize()?;
/// // SAFETY: set at this address from `s`, which is alive.
/// assert!(unsafe { slot.query_is_ok() && slot.synchronize_is_noop() });
/// // Another slot takes the stream, rebased to its own address.
/// let mut other = pin!(IdleSlot::EMPTY);
/// other.as_mut().set_from(&slot);
/// // SAFETY: as above, for `other`'s address.
/// assert!(unsafe { other.query_is_ok() });
/// other.as_mut().clear();
/// // SAFETY: empty again.
/// assert!(!unsafe { other.synchronize_is_noop() });
/// # Ok(()) }
/// ```
#[repr(C)]
#[derive(Debug)]
pub struct IdleSlot {
    /// Timeline value word's address minus the slot's.
    value: isize,
    /// `StreamInner::complete_below`'s address minus the slot's (the marks word and the
    /// pool release flag's address at fixed distances from it).
    complete: isize,
    /// The offsets hold only where they were written: [`IdleSlot::set`] and
    /// [`IdleSlot::set_from`] take a pinned slot.
    _pinned: PhantomPinned,
}

impl IdleSlot {
    /// No stream: never idle.
    pub const EMPTY: IdleSlot = IdleSlot {
        value: 0,
        complete: 0,
        _pinned: PhantomPinned,
    };

    /// Cache `stream`'s predicates here (at this address, which the pin keeps).
    pub fn set(self: Pin<&mut Self>, stream: &Stream) {
        // SAFETY: only the offsets are written, in place; the slot is not moved.
        let this = unsafe { self.get_unchecked_mut() };
        let base = this as *mut IdleSlot as isize;
        let s = &*stream.inner;
        this.value = (s.timeline_value as isize).wrapping_sub(base);
        this.complete = (&s.complete_below as *const AtomicI64 as isize).wrapping_sub(base);
    }

    /// Take `other`'s stream (or emptiness), rebased to this slot's address.
    pub fn set_from(self: Pin<&mut Self>, other: &IdleSlot) {
        // SAFETY: as in `set`.
        let this = unsafe { self.get_unchecked_mut() };
        if other.value == 0 && other.complete == 0 {
            *this = IdleSlot::EMPTY;
            return;
        }
        let shift =
            (other as *const IdleSlot as isize).wrapping_sub(this as *mut IdleSlot as isize);
        this.value = other.value.wrapping_add(shift);
        this.complete = other.complete.wrapping_add(shift);
    }

    /// Forget the stream.
    pub fn clear(mut self: Pin<&mut Self>) {
        Pin::set(&mut self, IdleSlot::EMPTY);
    }

    /// [`Stream::query_is_ok`] of the cached stream; false when empty.
    ///
    /// # Safety
    /// The slot is empty, or was set at this address and the `Stream` it was set from is
    /// still alive.
    #[inline(always)]
    pub unsafe fn query_is_ok(&self) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.idle::<false>() }
    }

    /// [`Stream::synchronize_is_noop`] of the cached stream; false when empty.
    ///
    /// # Safety
    /// As [`IdleSlot::query_is_ok`].
    #[inline(always)]
    pub unsafe fn synchronize_is_noop(&self) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.idle::<true>() }
    }

    /// [`IdleSlot::query_is_ok`], or with `FULL` [`IdleSlot::synchronize_is_noop`] (no
    /// mark at all and the pool release flag clear too).
    ///
    /// # Safety
    /// As [`IdleSlot::query_is_ok`].
    #[inline(always)]
    unsafe fn idle<const FULL: bool>(&self) -> bool {
        let base = self as *const IdleSlot as *const u8;
        #[cfg(target_arch = "x86_64")]
        {
            // SAFETY: the caller's contract: `base + value` is the live stream's timeline
            // value word and `base + complete` its `complete_below` (or both the slot's
            // first word). The value is read first (see `StreamInner::quiescent`); the
            // release flag's address is read only once the slot is known to name a
            // stream, whose device holds the flag.
            unsafe {
                if FULL {
                    idle_compares!(slot base, mask = MARKS_ANY, release);
                } else {
                    idle_compares!(slot base, mask = MARKS_QUERY);
                }
            }
            true
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: as above.
            unsafe {
                let (value, complete) = self.words(base);
                let mask = if FULL { MARKS_ANY } else { MARKS_QUERY };
                if value >= complete.load(Ordering::Acquire)
                    || Self::marks(complete).load(Ordering::Acquire) & mask != 0
                {
                    return false;
                }
                if !FULL {
                    return true;
                }
                let r = *((complete as *const AtomicI64 as *const u8).offset(RELEASE_FROM_COMPLETE)
                    as *const usize);
                !(*(r as *const AtomicBool)).load(Ordering::Relaxed)
            }
        }
    }

    /// The timeline's value (read first) and the bound word.
    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn words<'a>(&self, base: *const u8) -> (i64, &'a AtomicI64) {
        // SAFETY: the caller's contract (see `query_is_ok`).
        unsafe {
            let v = (*(base.offset(self.value) as *const AtomicI64)).load(Ordering::Acquire);
            (v, &*(base.offset(self.complete) as *const AtomicI64))
        }
    }

    /// The marks word of the stream whose `complete_below` is `complete`.
    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn marks<'a>(complete: &AtomicI64) -> &'a AtomicU32 {
        // SAFETY: the caller's contract (a live `StreamInner`).
        unsafe {
            &*((complete as *const AtomicI64 as *const u8).offset(MARKS_FROM_COMPLETE)
                as *const AtomicU32)
        }
    }
}

/// The marks word's distance from `complete_below` in `StreamInner`.
const MARKS_FROM_COMPLETE: isize = std::mem::offset_of!(StreamInner, cb.marks) as isize
    - std::mem::offset_of!(StreamInner, complete_below) as isize;
/// The pool release flag address's distance from `complete_below` in `StreamInner`.
const RELEASE_FROM_COMPLETE: isize = std::mem::offset_of!(StreamInner, release_pending) as isize
    - std::mem::offset_of!(StreamInner, complete_below) as isize;

/// A HIP stream. Dropping it is `hipStreamDestroy`: it returns at once, and the stream's
/// resources go when its outstanding work has completed.
///
/// # Example
///
/// ```
/// use kfdrt::{Device, MemoryKind, StreamFlags, WaitCompare, WriteValueFlags};
///
/// # fn main() -> kfdrt::Result<()> {
/// let dev = Device::open()?;
/// let s = dev.create_stream_with_flags(0, StreamFlags::NON_BLOCKING)?;
/// let mem = dev.alloc(MemoryKind::Signal, 0, 4096)?;
/// // Work runs in order: the wait sees the write before it.
/// s.write_value64(mem.va(), 7, WriteValueFlags::DEFAULT)?;
/// s.wait_value64(mem.va(), 7, WaitCompare::Eq, u64::MAX)?;
/// s.memset_d32(mem.va() + 64, 0xdead_beef, 4)?;
/// s.synchronize()?;
/// assert!(s.query().is_ok());
/// let mut w = [0u8; 4];
/// mem.read(64 + 12, &mut w)?;
/// assert_eq!(u32::from_le_bytes(w), 0xdead_beef);
/// # Ok(())
/// # }
/// ```
pub struct Stream {
    pub(crate) inner: Arc<StreamInner>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stream(gpu={} flags={} priority={} submitted={})",
            self.inner.gpu_index,
            self.inner.flags,
            self.inner.priority,
            self.inner.submitted.load(Ordering::Relaxed)
        )
    }
}

/// What a blocking-aware submission needs before its own packets.
enum Deps {
    None,
    One(Point),
    Many(Vec<Point>),
}

impl Deps {
    fn push(&mut self, p: Point) {
        *self = match std::mem::replace(self, Deps::None) {
            Deps::None => Deps::One(p),
            Deps::One(a) => Deps::Many(vec![a, p]),
            Deps::Many(mut v) => {
                v.push(p);
                Deps::Many(v)
            }
        }
    }
    fn as_slice(&self) -> &[Point] {
        match self {
            Deps::None => &[],
            Deps::One(p) => core::slice::from_ref(p),
            Deps::Many(v) => v,
        }
    }
}

impl Device {
    /// The HIP stream priority range `(least, greatest)` = `(1, -1)`, as CLR reports it
    /// (`hipDeviceGetStreamPriorityRange`); 0 is the default priority.
    pub fn stream_priority_range(&self) -> (i32, i32) {
        (PRIORITY_LEAST, PRIORITY_GREATEST)
    }

    /// `hipStreamCreate` on GPU `gpu`: a blocking stream of default priority.
    pub fn create_stream(&self, gpu: usize) -> Result<Stream> {
        self.create_stream_with_priority(gpu, StreamFlags::DEFAULT, 0)
    }

    /// `hipStreamCreateWithFlags`: `flags` is [`StreamFlags::DEFAULT`] or
    /// [`StreamFlags::NON_BLOCKING`].
    pub fn create_stream_with_flags(&self, gpu: usize, flags: StreamFlags) -> Result<Stream> {
        self.create_stream_with_priority(gpu, flags, 0)
    }

    /// `hipStreamCreateWithPriority`: the priority is clamped to
    /// [`Device::stream_priority_range`] (lower numbers are higher priorities).
    pub fn create_stream_with_priority(
        &self,
        gpu: usize,
        flags: StreamFlags,
        priority: i32,
    ) -> Result<Stream> {
        Stream::create(&self.inner, gpu, flags.bits(), priority, None, false)
    }

    /// `hipExtStreamCreateWithCUMask`: a stream whose queue may use only the CUs set in
    /// `cu_mask` (32 CUs per word). Words beyond the GPU's CU count are ignored, as the
    /// HIP documents; an empty mask or one selecting no existing CU is InvalidValue. The
    /// stream gets its own hardware queue (SET_CU_MASK is per queue).
    pub fn create_stream_with_cu_mask(&self, gpu: usize, cu_mask: &[u32]) -> Result<Stream> {
        let call = "hipExtStreamCreateWithCUMask";
        let g = self.inner.gpu(gpu)?;
        let cus = g.cu_count() as usize;
        let words = cus.div_ceil(32);
        let mut mask: Vec<u32> = cu_mask.iter().copied().take(words).collect();
        if let Some(last) = mask
            .last_mut()
            .filter(|_| cu_mask.len() >= words && cus % 32 != 0)
        {
            *last &= (1u32 << (cus % 32)) - 1;
        }
        if mask.iter().all(|&w| w == 0) {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("mask selects none of the {cus} CUs"),
            ));
        }
        Stream::create(&self.inner, gpu, STREAM_DEFAULT, 0, Some(mask), false)
    }

    /// The null (legacy default) stream of GPU `gpu`: it waits for all prior work of the
    /// GPU's blocking streams, and they wait for its prior work.
    pub fn null_stream(&self, gpu: usize) -> Result<Stream> {
        self.inner.gpu(gpu)?;
        let nulls = lock(&self.inner.pools.null);
        if let Some(s) = nulls
            .iter()
            .find(|(g, _)| *g == gpu)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(Stream { inner: s });
        }
        drop(nulls);
        let s = Stream::create(&self.inner, gpu, STREAM_DEFAULT, 0, None, true)?;
        let mut nulls = lock(&self.inner.pools.null);
        // Another thread's creation won the race: one null stream per GPU (every one in
        // use is in the list, so `sync_null_marks` reaches it). Ours has no work.
        if let Some(won) = nulls
            .iter()
            .find(|(g, _)| *g == gpu)
            .and_then(|(_, w)| w.upgrade())
        {
            drop(nulls);
            drop(s);
            return Ok(Stream { inner: won });
        }
        nulls.retain(|(g, _)| *g != gpu);
        nulls.push((gpu, Arc::downgrade(&s.inner)));
        self.inner.pools.null_used.store(true, Ordering::Release);
        drop(nulls);
        self.inner.sync_null_marks();
        Ok(s)
    }
}

impl Stream {
    fn create(
        dev: &Arc<DeviceInner>,
        gpu: usize,
        flags: u32,
        priority: i32,
        cu_mask: Option<Vec<u32>>,
        is_null: bool,
    ) -> Result<Stream> {
        let call = "hipStreamCreateWithFlags";
        dev.gpu(gpu)?;
        if flags & !STREAM_NON_BLOCKING != 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!(
                    "flags {flags:#x}: expected hipStreamDefault (0) or hipStreamNonBlocking (1)"
                ),
            ));
        }
        let priority = priority.clamp(PRIORITY_GREATEST, PRIORITY_LEAST);
        let kprio = kfd_priority(priority);
        let (queue, dedicated) = match &cu_mask {
            Some(mask) => {
                let q = Arc::new(AqlQueue::new(dev, gpu, kprio, DEFAULT_RING_PACKETS)?);
                kfd::ioctl::set_cu_mask(dev.backend.as_ref(), q.queue_id(), mask)
                    .map_err(|e| Error::from_kfd("hipExtStreamCreateWithCUMask", e))?;
                (q, true)
            }
            None => (dev.pools.shared(dev, gpu, kprio)?, false),
        };
        let timeline = Arc::new(Signal::new(&dev.signals, TIMELINE_BASE)?);
        let inner = Arc::new(StreamInner {
            dev: dev.clone(),
            gpu_index: gpu,
            family: Target::of(dev.gpu(gpu)?),
            flags,
            priority,
            cu_mask,
            is_null,
            timeline_value: timeline.value_addr(),
            timeline,
            submitted: AtomicU64::new(0),
            complete_below: AtomicI64::new(TIMELINE_BASE + 1),
            release_pending: crate::mempool::release_pending_flag(dev) as *const AtomicBool
                as usize,
            queue_id: AtomicU32::new(queue.queue_id()),
            soft_failed: AtomicBool::new(false),
            waited: WaitedList::new(),
            error: Mutex::new(None),
            cur: AtomicPtr::new(Arc::as_ptr(&queue).cast_mut()),
            on_dedicated: AtomicBool::new(dedicated),
            state: Mutex::new(StreamState {
                queue,
                dedicated,
                overflow: false,
                retired: None,
                holds: Vec::new(),
            }),
            sdma: Mutex::new(None),
            wait_kernel: Default::default(),
            cb: crate::callback::StreamCallbacks::new(),
        });
        if inner.is_blocking() {
            let mut b = lock(&dev.pools.blocking);
            b.retain(|w| w.strong_count() > 0);
            b.push(Arc::downgrade(&inner));
            dev.pools.blocking_live.fetch_add(1, Ordering::AcqRel);
            drop(b);
            dev.sync_null_marks();
        }
        dev.pools.reap();
        start_fault_watcher(dev);
        Ok(Stream { inner })
    }

    /// `hipStreamGetFlags`.
    pub fn flags(&self) -> StreamFlags {
        StreamFlags::from_bits_retain(self.inner.flags)
    }

    /// `hipStreamGetPriority`: the clamped priority.
    pub fn priority(&self) -> i32 {
        self.inner.priority
    }

    /// `hipExtStreamGetCUMask`: fills `out` with the mask (all CUs set for a stream
    /// created without one); `out` must hold the GPU's CU count in bits.
    pub fn cu_mask(&self, out: &mut [u32]) -> Result<()> {
        let call = "hipExtStreamGetCUMask";
        let cus = self.inner.dev.gpu(self.inner.gpu_index)?.cu_count() as usize;
        let words = cus.div_ceil(32);
        if out.len() < words {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!(
                    "buffer of {} words, the GPU has {cus} CUs ({words} words)",
                    out.len()
                ),
            ));
        }
        out.fill(0);
        match &self.inner.cu_mask {
            Some(m) => out[..m.len()].copy_from_slice(m),
            None => {
                for (i, w) in out.iter_mut().take(words).enumerate() {
                    let bits = (cus - i * 32).min(32);
                    *w = if bits == 32 {
                        u32::MAX
                    } else {
                        (1u32 << bits) - 1
                    };
                }
            }
        }
        Ok(())
    }

    /// GPU index the stream runs on.
    pub fn gpu_index(&self) -> usize {
        self.inner.gpu_index
    }

    /// Whether this is a null stream.
    pub fn is_null(&self) -> bool {
        self.inner.is_null
    }

    /// Whether the stream has moved to a dedicated hardware queue (false for a stream
    /// that needed one after KFD's queue limit was reached: it stays shared).
    pub fn has_dedicated_queue(&self) -> bool {
        let st = lock(&self.inner.state);
        st.dedicated && !st.overflow
    }

    /// KFD queue id of the hardware queue the stream currently submits to.
    pub fn hw_queue_id(&self) -> u32 {
        self.inner.queue_id.load(Ordering::Acquire)
    }

    /// `hipStreamQuery`: Ok when all work has completed, NotReady otherwise, or the
    /// stream's sticky error — including a GPU fault that stopped its work, seen without
    /// a synchronize: the device's fault watcher thread records faults and sets a flag
    /// that a query of a busy stream reads (no system call on any query path).
    pub fn query(&self) -> Result<()> {
        if let Some(e) = self.inner.sticky_error() {
            return Err(e);
        }
        if self.inner.idle() {
            Ok(())
        } else if let Some(f) = self.inner.dev.poll_faults(self.inner.gpu_index) {
            // The work may have completed since the check above.
            if self.inner.idle() {
                return Ok(());
            }
            self.inner.fail(f);
            Err(self.inner.sticky_error().unwrap_or_else(|| {
                Error::new(ErrorKind::LaunchFailure, "hipStreamQuery", "GPU fault")
            }))
        } else {
            // A polling call: the answer allocates nothing.
            static PENDING: StaticError =
                StaticError::new(ErrorKind::NotReady, "hipStreamQuery", "work pending");
            Err(Error::from_static(&PENDING))
        }
    }

    /// Whether [`Stream::query`] answers Ok now with nothing else to do: no sticky error,
    /// every submitted command complete, no callback hold pending (after callbacks this
    /// holds again once a synchronize or a later command retired their hold), and not
    /// closed ([`Stream::close_idle_predicates`]). Three atomic loads (no lock, no system
    /// call) for a C layer's `hipStreamQuery` fast path; false only means "call
    /// [`Stream::query`]", which applies every rule.
    #[inline]
    pub fn query_is_ok(&self) -> bool {
        self.inner.quiescent()
    }

    /// The stream's idle predicates without its handle ([`IdleProbe`]).
    ///
    /// ```
    /// # fn main() -> kfdrt::Result<()> {
    /// let dev = kfdrt::Device::open()?;
    /// let s = dev.create_stream(0)?;
    /// s.synchronize()?;
    /// let probe = s.idle_probe();
    /// // SAFETY: `s` is alive.
    /// assert_eq!(unsafe { probe.query_is_ok() }, s.query_is_ok());
    /// # Ok(()) }
    /// ```
    #[inline]
    pub fn idle_probe(&self) -> IdleProbe {
        IdleProbe(NonNull::from(&*self.inner))
    }

    /// Make [`Stream::query_is_ok`] and [`Stream::synchronize_is_noop`] answer false from
    /// now on, on every thread (one atomic OR, never undone): for a C layer whose cached
    /// fast path keeps using this stream without checking its handle, when the handle is
    /// destroyed, so that such a cache falls back to its full path, which rejects the
    /// handle. Nothing else changes: the stream's commands, [`Stream::query`] and
    /// [`Stream::synchronize`] work as before.
    ///
    /// ```
    /// # fn main() -> kfdrt::Result<()> {
    /// let dev = kfdrt::Device::open()?;
    /// let s = dev.create_stream(0)?;
    /// s.synchronize()?;
    /// assert!(s.query_is_ok());
    /// s.close_idle_predicates();
    /// assert!(!s.query_is_ok() && !s.synchronize_is_noop());
    /// // The full paths answer as before.
    /// assert!(s.query().is_ok());
    /// s.synchronize()?;
    /// # Ok(()) }
    /// ```
    pub fn close_idle_predicates(&self) {
        self.inner.cb.set_mark(MARK_CLOSED);
    }

    /// Whether [`Stream::synchronize`] returns Ok at once with nothing to do:
    /// [`Stream::query_is_ok`], on the null stream no blocking stream alive on the device
    /// (otherwise their work counts), and no stream-ordered-allocator release pending
    /// (synchronize trims the pools then). Atomic loads only, for a C layer's
    /// `hipStreamSynchronize` fast path; false only means "call [`Stream::synchronize`]".
    #[inline]
    pub fn synchronize_is_noop(&self) -> bool {
        self.inner.synchronize_is_noop()
    }

    /// `hipStreamSynchronize`: block until all work has completed (spinning briefly, then
    /// sleeping on the timeline's interrupt). On the null stream this also waits for the
    /// GPU's blocking streams (null-stream semantics). Returns the sticky error if a queue
    /// fault stopped the stream.
    pub fn synchronize(&self) -> Result<()> {
        self.host_synchronize(None)
    }

    /// [`Stream::synchronize`] with a deadline (a Rust extension; HIP has none): NotReady
    /// when the stream's work has not completed within `timeout` (the work stays
    /// enqueued and the stream usable), the sticky error on a fault, Ok otherwise.
    /// `Duration::ZERO` checks once, like [`Stream::query`] but reporting faults.
    pub fn synchronize_timeout(&self, timeout: std::time::Duration) -> Result<()> {
        self.host_synchronize(Instant::now().checked_add(timeout))
    }

    /// The stream's work and, on the null stream, the GPU's blocking streams' work
    /// (null-stream semantics), through the device's one host-wait path.
    #[inline]
    fn host_synchronize(&self, deadline: Option<Instant>) -> Result<()> {
        let s = &*self.inner;
        // Idle fast path: nothing submitted since the last completed point, no sticky
        // error, and on the null stream no blocking stream of the GPU with work. The
        // general path would wait for no point either (so hand on no callback role):
        // only the allocator's release check remains (one load when it has nothing).
        if !s.failed() && s.idle() && (!s.is_null || s.dev.blocking_idle(s.gpu_index)) {
            // Callbacks that all returned leave their hold pending until the next command:
            // retire it (no packet), so that the idle predicates hold again.
            if s.cb.hold_pending() {
                self.flush_hold()?;
            }
            crate::mempool::on_synchronize(&s.dev);
            return Ok(());
        }
        self.host_synchronize_busy(deadline)
    }

    /// [`Stream::host_synchronize`] with work to wait for or a sticky error to return.
    #[inline(never)]
    fn host_synchronize_busy(&self, deadline: Option<Instant>) -> Result<()> {
        let s = &self.inner;
        let dev = &s.dev;
        self.flush_hold()?;
        let own = (!s.idle()).then(|| s.point());
        let busy = own.is_some();
        let others = if s.is_null {
            dev.blocking_streams(s.gpu_index)
        } else {
            Vec::new()
        };
        let points = own.into_iter().chain(
            others
                .iter()
                .flat_map(|o| [Some(o.point()), o.cb.pending_point(o.gpu_index)])
                .flatten(),
        );
        dev.host_synchronize(points, Some(s), dev.wait_spin(), deadline)?;
        if busy {
            // The work done: the next batch's lines (`AqlQueue::warm_next`).
            let qp = s.cur.load(Ordering::Acquire).map_addr(|a| a & !1);
            // SAFETY: a queue `cur` pointed to lives as long as the stream (see `cur`).
            if let Some(q) = unsafe { qp.as_ref() } {
                q.warm_next();
            }
        }
        match s.sticky_error() {
            Some(e) => Err(e),
            None => {
                self.kernargs_drained(s.cur.load(Ordering::Acquire));
                dev.pools.reap_kept();
                Ok(())
            }
        }
    }

    /// Submit the commands of `cmds` (already encoded) after the stream's dependencies:
    /// collect them (`extra` and the implicit null-stream ones), move to a dedicated
    /// queue when a command or a dependency may wait outside the queue, encode the
    /// dependency waits, publish everything in one ring reservation, and advance the
    /// stream's packet count. Returns the stream's point after the commands.
    pub(crate) fn submit(&self, cmds: &CmdBuf, place: Place, extra: Option<Point>) -> Result<u64> {
        self.submit_inner(place, extra, |_| Ok(None), Some(cmds))
    }

    /// Whether a submission without an explicit dependency has none at all: no sticky
    /// error to return, and no implicit null-stream dependency to collect (a non-null
    /// stream that is non-blocking, or blocking while no null stream exists).
    #[inline]
    fn no_implicit_deps(&self) -> bool {
        !self.inner.failed() && self.no_null_deps()
    }

    /// [`Stream::no_implicit_deps`] without the sticky error: no implicit null-stream
    /// dependency to collect. The enqueue fast paths read the marks word once for the
    /// sticky error and the callback hold together ([`MARKS_SLOW`]).
    #[inline]
    fn no_null_deps(&self) -> bool {
        let s = &*self.inner;
        !s.is_null
            && (s.flags & STREAM_NON_BLOCKING != 0
                || !s.dev.pools.null_used.load(Ordering::Acquire))
    }

    /// The lock-free part of a single-command enqueue: a slot of the stream's current queue,
    /// reserved (its producer lock held) and checked to still be the stream's queue, or
    /// None when the submission must take the slow path (a dependency to collect, a move
    /// to make or under way, a sticky error, the producer lock busy or the ring full: the
    /// slow path waits for those, so that this one makes no call).
    #[inline(always)]
    fn reserve_fast(&self, place: Place) -> Option<OneSlot<'_>> {
        let s = &*self.inner;
        if !(self.no_null_deps() && (place == Place::Any || s.on_dedicated.load(Ordering::Acquire)))
        {
            return None;
        }
        let qp = s.cur.load(Ordering::Acquire);
        // Tagged: a move to a dedicated queue is under way (`make_dedicated`).
        if qp.addr() & 1 != 0 {
            return None;
        }
        // SAFETY: a queue `cur` pointed to lives as long as the stream (see `cur`).
        let q = unsafe { &*qp };
        let slot = q.try_reserve_one()?;
        // Still the stream's queue under its producer lock (a move tags `cur`, then waits
        // for this lock), no sticky error and no callback hold to emit first (checked
        // under the lock, see `enqueue_callback`; one load of the marks word): publish.
        // Otherwise drop the slot (nothing published).
        (s.cur.load(Ordering::Relaxed) == qp && s.cb.marks() & MARKS_SLOW == 0).then_some(slot)
    }

    #[cold]
    #[inline(never)]
    fn submit_cmd_slow(&self, cmd: &Cmd, place: Place) -> Result<u64> {
        self.submit(&CmdBuf::of(self.inner.family, *cmd), place, None)
    }

    /// Order later work after `p` (not complete, on another timeline): a submission of
    /// no commands with `p` as its dependency. Where the wait is one packet (gfx9's
    /// BARRIER_VALUE) and nothing else is to be collected, the dependency is recorded,
    /// the stream placed, and the wait published with [`AqlQueue::submit_one`].
    fn submit_wait(&self, p: Point) -> Result<()> {
        let s = &*self.inner;
        let single = Cmd::wait_point(s.family, p.timeline.handle(), p.threshold());
        let Some(cmd) = single.filter(|_| self.no_implicit_deps()) else {
            return self
                .submit(&CmdBuf::new(s.family), Place::Any, Some(p))
                .map(|_| ());
        };
        let mut st = lock(&s.state);
        if s.cb.hold_pending() {
            self.emit_hold(&mut st)?;
        }
        self.note_waited(&p);
        if !st.dedicated && p.queue_id != st.queue.queue_id() && !p.done() {
            self.make_dedicated(&mut st)?;
        }
        let q = &*st.queue;
        let qid = q.queue_id();
        if p.queue_id == qid || p.done() {
            return Ok(());
        }
        let fault = || s.dev.poll_faults(s.gpu_index);
        let r = match q.submit_one(&cmd, s.timeline.handle(), &fault) {
            Ok(published) => {
                self.account(qid, 1, published);
                Ok(())
            }
            Err(e) => Err(self.publish_failed(e)),
        };
        self.hold_waited(&mut st, Deps::One(p), qid);
        r
    }

    /// Submit one complete AQL packet that `build` makes once the queue is chosen and its
    /// ring slot reserved (a kernel dispatch names its queue and uses the queue's scratch
    /// and kernarg ring, which the queue's producer lock held here serialises); `build`
    /// is also given the stream's timeline and the packet count the packet completes at
    /// (exact: counted under that lock). `build` returning `None` submits nothing.
    /// Published without a [`CmdBuf`]; waits on other queues' work, when there are any,
    /// go first in packets of their own. Without dependencies this takes no stream lock
    /// (as `reserve_fast`). Returns whether a packet was submitted.
    #[inline]
    pub(crate) fn submit_packet(
        &self,
        build: impl FnOnce(&mut OneSlot<'_>, &Arc<Signal>, u64) -> Result<Option<u32>>,
    ) -> Result<bool> {
        match self.reserve_fast(Place::Any) {
            Some(slot) => self.build_and_publish(slot, build),
            None => self.submit_packet_slow(build),
        }
    }

    /// The rest of [`Stream::submit_packet`] once `slot` is reserved on `q`, the stream's
    /// queue: build with the exact completion count, publish and count.
    #[inline(always)]
    fn build_and_publish(
        &self,
        mut slot: OneSlot<'_>,
        build: impl FnOnce(&mut OneSlot<'_>, &Arc<Signal>, u64) -> Result<Option<u32>>,
    ) -> Result<bool> {
        let s = &*self.inner;
        // Counted only under the producer lock, which the slot holds.
        let target = s.submitted.load(Ordering::Relaxed) + 1;
        let Some(header) = build(&mut slot, &s.timeline, target)? else {
            return Ok(false);
        };
        let qid = slot.queue_id();
        let published = slot.publish_header(header, s.timeline.handle());
        self.account(qid, 1, published);
        Ok(true)
    }

    /// The fast path of [`Stream::submit_packet`] for a caller that builds the packet
    /// itself (no closure, so that everything inlines into the launch): the reserved
    /// slot and the packet count it completes at, or None for the slow path.
    #[inline(always)]
    pub(crate) fn packet_slot_fast(&self) -> Option<OneSlot<'_>> {
        self.reserve_fast(Place::Any)
    }

    /// The packet count the packet of `_slot` (reserved by [`Stream::packet_slot_fast`])
    /// completes at: counted only under the producer lock, which the slot holds.
    #[inline(always)]
    pub(crate) fn slot_target(&self, _slot: &OneSlot<'_>) -> u64 {
        self.inner.submitted.load(Ordering::Relaxed) + 1
    }

    /// The stream's timeline (the completion signal of its packets).
    #[inline(always)]
    pub(crate) fn timeline(&self) -> &Arc<Signal> {
        &self.inner.timeline
    }

    /// Publish the packet built in `slot` (from [`Stream::packet_slot_fast`]) at `p`
    /// (its [`OneSlot::packet_ptr`]) with dword 0 `header` and count it.
    #[inline(always)]
    pub(crate) fn publish_built(&self, slot: OneSlot<'_>, p: *mut u32, header: u32) {
        let qid = slot.queue_id();
        let published = slot.publish_header_at(p, header, self.inner.timeline.handle());
        self.account(qid, 1, published);
    }

    #[cold]
    #[inline(never)]
    pub(crate) fn submit_packet_slow(
        &self,
        build: impl FnOnce(&mut OneSlot<'_>, &Arc<Signal>, u64) -> Result<Option<u32>>,
    ) -> Result<bool> {
        let s = &*self.inner;
        if let Some(e) = s.sticky_error() {
            return Err(e);
        }
        let mut st = lock(&s.state);
        if s.cb.hold_pending() {
            self.emit_hold(&mut st)?;
        }
        let deps = if self.no_implicit_deps() {
            Deps::None
        } else {
            self.collect_deps(None)
        };
        if !st.dedicated && !matches!(deps, Deps::None) {
            self.place(&mut st, Place::Any, &deps)?;
        }
        if !matches!(deps, Deps::None) {
            let qid = st.queue.queue_id();
            let waits = self.publish_waits(&st.queue, &deps, None);
            self.hold_waited(&mut st, deps, qid);
            waits?;
        }
        let q = &st.queue;
        let fault = || s.dev.poll_faults(s.gpu_index);
        let slot = match q.reserve_one(fault) {
            Ok(r) => r,
            Err(e) => return Err(self.publish_failed(e)),
        };
        self.build_and_publish(slot, build)
    }

    fn submit_inner(
        &self,
        place: Place,
        extra: Option<Point>,
        encode: impl FnOnce(&AqlQueue) -> Result<Option<CmdBuf>>,
        cmds: Option<&CmdBuf>,
    ) -> Result<u64> {
        let s = &*self.inner;
        if let Some(e) = s.sticky_error() {
            return Err(e);
        }
        let mut st = lock(&s.state);
        if s.cb.hold_pending() {
            self.emit_hold(&mut st)?;
        }
        // Fast path (no extra dependency, a non-blocking stream): nothing to collect.
        let deps = if extra.is_none() && s.flags & STREAM_NON_BLOCKING != 0 {
            Deps::None
        } else {
            self.collect_deps(extra)
        };
        // Only a dedicated placement or a dependency can move the stream.
        if !st.dedicated && (place == Place::Dedicated || !matches!(deps, Deps::None)) {
            self.place(&mut st, place, &deps)?;
        }
        let q = &st.queue;
        let qid = q.queue_id();
        let built = encode(q)?;
        let empty;
        let cmds = match (built.as_ref(), cmds) {
            (Some(b), _) | (None, Some(b)) => b,
            (None, None) => {
                empty = CmdBuf::new(s.family);
                &empty
            }
        };
        if matches!(deps, Deps::None) {
            let fault = || s.dev.poll_faults(s.gpu_index);
            return self.publish(q, &[cmds], &fault);
        }
        let r = self.publish_waits(q, &deps, Some(cmds));
        self.hold_waited(&mut st, deps, qid);
        r
    }

    /// Publish a wait on `q` for each point of `deps` outside `q`'s order and not complete
    /// (several packets when they do not fit one), followed by `cmds` if given (with the
    /// last waits, in one reservation). Returns the stream's packet count after them.
    /// The caller holds the state lock and then calls [`Stream::hold_waited`], whatever
    /// the outcome (a failure may come after some waits were published).
    fn publish_waits(&self, q: &AqlQueue, deps: &Deps, cmds: Option<&CmdBuf>) -> Result<u64> {
        let s = &*self.inner;
        let qid = q.queue_id();
        let fault = || s.dev.poll_faults(s.gpu_index);
        let waits = deps
            .as_slice()
            .iter()
            .filter(|p| p.queue_id != qid && !p.done());
        let mut wbuf = CmdBuf::new(s.family);
        for p in waits {
            if wbuf.is_full() {
                self.publish(q, &[&wbuf], &fault)?;
                wbuf = CmdBuf::new(s.family);
            }
            crate::callback::note_line_wait(&s.dev, p, qid);
            wbuf.wait_point(p.timeline.handle(), p.threshold())?;
        }
        match cmds {
            Some(c) => self.publish(q, &[&wbuf, c], &fault),
            None if !wbuf.is_empty() => self.publish(q, &[&wbuf], &fault),
            None => Ok(s.submitted.load(Ordering::Relaxed)),
        }
    }

    /// Keep the timelines of `deps` that this stream's queue `qid` may have queued waits
    /// on (every point outside `qid`'s order: a point complete now may still be read by a
    /// wait published while it was not) until the stream's timeline reaches its packet
    /// count now, which covers those waits (published under the state lock the caller
    /// holds); timelines the waited list keeps for the stream's life need no hold. Entries
    /// the stream is past are dropped first, so the list holds at most the waits in
    /// flight. See `StreamState::holds` for why.
    fn hold_waited(&self, st: &mut StreamState, deps: Deps, qid: u32) {
        let s = &*self.inner;
        // Read at the first wait to hold: the stream's packet count (counted under the
        // producer lock after the waits were published; concurrent lock-free submissions
        // only raise it), after dropping the entries the stream is past.
        let mut until = None;
        let mut keep = |p: Point| {
            if p.queue_id == qid || s.waited.keeps(p.timeline.serial()) {
                return;
            }
            let n = *until.get_or_insert_with(|| {
                let n = s.submitted.load(Ordering::Acquire);
                let done = (TIMELINE_BASE - s.timeline.load()) as u64;
                st.holds.retain(|&(_, m)| m > done);
                n
            });
            st.holds.push((p.timeline, n));
        };
        match deps {
            Deps::None => {}
            Deps::One(p) => keep(p),
            Deps::Many(v) => v.into_iter().for_each(keep),
        }
    }

    /// Dependencies of the next submission: `extra` and the implicit null-stream ones,
    /// remembered for [`Stream::ordered_after`].
    fn collect_deps(&self, extra: Option<Point>) -> Deps {
        let s = &*self.inner;
        let mut deps = Deps::None;
        if let Some(p) = extra {
            deps.push(p);
        }
        s.dev.implicit_deps(s, &mut deps);
        for p in deps.as_slice() {
            self.note_waited(p);
        }
        deps
    }

    /// [`Stream::note_waited`] for the recorded point `w` when its timeline has a slot in
    /// the stream's waited list: raise the slot's count, true (no lock). False (nothing
    /// noted): the note needs the stream's state lock and the timeline's `Arc`.
    #[inline(always)]
    fn note_waited_known(&self, w: &crate::event::RecordWords) -> bool {
        self.inner.waited.raise_slot(w.serial, w.target)
    }

    /// Remember that later work is ordered after `p` (for [`Stream::ordered_after`]);
    /// the caller holds the stream's state lock.
    fn note_waited(&self, p: &Point) {
        self.inner.waited.note(&p.timeline, p.target);
    }

    /// Move the stream to a dedicated queue when the commands may wait on something
    /// outside their queue or a dependency lies in another queue (see the module docs).
    fn place(&self, st: &mut StreamState, place: Place, deps: &Deps) -> Result<()> {
        if st.dedicated {
            return Ok(());
        }
        let qid = st.queue.queue_id();
        let needs_wait = deps
            .as_slice()
            .iter()
            .any(|p| p.queue_id != qid && !p.done());
        if place == Place::Dedicated || needs_wait {
            self.make_dedicated(st)?;
        }
        Ok(())
    }

    /// Publish to `q` with the stream's timeline as every packet's completion signal and
    /// count the packets (under the queue's producer lock); returns the stream's packet
    /// count after them. A fault that keeps the ring full becomes the stream's sticky
    /// error.
    fn publish(
        &self,
        q: &AqlQueue,
        bufs: &[&CmdBuf],
        fault: &dyn Fn() -> Option<String>,
    ) -> Result<u64> {
        let s = &*self.inner;
        let qid = q.queue_id();
        match q.submit(bufs, s.timeline.handle(), fault) {
            Ok((n, Some(published))) => Ok(self.account(qid, n, published)),
            Ok((_, None)) => Ok(s.submitted.load(Ordering::Relaxed)),
            Err(e) => Err(self.publish_failed(e)),
        }
    }

    /// A publication failed: a fault that keeps the ring full becomes the stream's
    /// sticky error.
    #[cold]
    #[inline(never)]
    fn publish_failed(&self, e: Error) -> Error {
        if e.kind() == ErrorKind::LaunchFailure {
            self.inner.fail(e.to_string());
        }
        e
    }

    /// Count `n` packets just published on queue `qid` while `published` still holds the
    /// queue's producer lock (so the counts of streams sharing a queue, and of threads
    /// sharing a stream, follow the ring order), then release it (which notifies the
    /// backend). Returns the new packet count.
    #[inline(always)]
    fn account(&self, qid: u32, n: u64, published: Published<'_>) -> u64 {
        let new = self.advance(qid, n);
        drop(published);
        new
    }

    /// Account `n` (> 0) published packets on queue `qid` (under the queue's producer
    /// lock); returns the new packet count.
    #[inline(always)]
    fn advance(&self, qid: u32, n: u64) -> u64 {
        let s = &*self.inner;
        s.queue_id.store(qid, Ordering::Release);
        let new = s.submitted.load(Ordering::Relaxed) + n;
        s.submitted.store(new, Ordering::Release);
        s.complete_below
            .store(TIMELINE_BASE - new as i64 + 1, Ordering::Release);
        new
    }

    fn point_at(&self, target: u64) -> Point {
        let s = &*self.inner;
        Point {
            timeline: s.timeline.clone(),
            target,
            queue_id: s.queue_id.load(Ordering::Acquire),
            gpu_index: s.gpu_index,
        }
    }

    fn make_dedicated(&self, st: &mut StreamState) -> Result<()> {
        let s = &*self.inner;
        let q = match AqlQueue::new(
            &s.dev,
            s.gpu_index,
            kfd_priority(s.priority),
            DEFAULT_RING_PACKETS,
        ) {
            Ok(q) => Arc::new(q),
            Err(e) if e.kind() == ErrorKind::OutOfMemory => {
                // KFD's queue limit (127 per process and GPU, the HWS limit in
                // pqm_create_queue) or memory is exhausted: stay on the shared queue, as
                // CLR's streams always do. Waits there still complete (every wait targets
                // work submitted before it, or the host), but may delay the queue's other
                // streams until they are satisfied. Not retried for this stream.
                st.dedicated = true;
                st.overflow = true;
                s.on_dedicated.store(true, Ordering::Release);
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        // Stop the lock-free path on the old queue (`cur` tagged: `reserve_fast` sends to the
        // slow path, which waits for this lock), and let the publications already past
        // their check finish: then the stream's point covers all its work there.
        let old_ptr = Arc::as_ptr(&st.queue).cast_mut();
        s.cur.store(old_ptr.map_addr(|a| a | 1), Ordering::Release);
        st.queue.fence_producers();
        let before = s.point();
        if !before.done() {
            // The first packet on the new queue waits for the stream's own earlier work
            // (no other producer sees the new queue before `cur` names it).
            let mut c = CmdBuf::new(s.family);
            if let Err(e) = c
                .wait_point(before.timeline.handle(), before.threshold())
                .and_then(|_| self.publish(&q, &[&c], &|| s.dev.poll_faults(s.gpu_index)))
            {
                s.cur.store(old_ptr, Ordering::Release);
                return Err(e);
            }
        }
        s.cur.store(Arc::as_ptr(&q).cast_mut(), Ordering::Release);
        let old = std::mem::replace(&mut st.queue, q);
        st.retired = Some(old);
        st.dedicated = true;
        s.on_dedicated.store(true, Ordering::Release);
        Ok(())
    }

    /// `hipStreamWriteValue32`: after earlier work, write `value` to `addr` (4-byte
    /// aligned, in an allocation of the device: [`crate::Device::allocation_at`], which
    /// includes pinned and registered host memory; any other address is InvalidValue at
    /// once and the stream stays usable, as CLR's `ihipStreamOperation` refuses an address
    /// with no memory object; under XNACK any address is left to the GPU).
    ///
    /// `flags` is reserved and ignored, as HIP documents it ("reserved, ignored for now,
    /// will be used in future releases"). The one bit CUDA defines,
    /// [`WriteValueFlags::NO_MEMORY_BARRIER`], only relaxes ordering; kfdrt keeps the
    /// write ordered after all earlier writes of the stream whatever the flags: every
    /// write-value runs in a PM4-IB packet whose AQL header has system-scope acquire and
    /// release fences.
    pub fn write_value32(&self, addr: u64, value: u32, flags: WriteValueFlags) -> Result<()> {
        // Reserved flags are ignored, as HIP documents; see WriteValueFlags.
        let _ = flags;
        // The hot path: the address's allocation check (a few loads when it hits the
        // registry's last range), WRITE_DATA encoded, then a slot reserved and published.
        // Everything else (the address's errors included) is in `write_value`.
        if addr != 0 && addr % 4 == 0 && self.inner.dev.gpu_addr_cached(addr) {
            if let Some(slot) = self.reserve_fast(Place::Any) {
                // Encoded under the producer lock (it cannot fail): fewer values live
                // across the reservation, so the path needs no callee-saved register.
                let ib = SmallIb::write_data32(self.inner.family, addr, value);
                let qid = slot.queue_id();
                let published = slot.publish_ib(self.inner.timeline.handle(), &ib);
                self.account(qid, 1, published);
                return Ok(());
            }
        }
        self.write_value(addr, value as u64, 32)
    }

    /// `hipStreamWriteValue64` (8-byte aligned address); `flags` as for
    /// [`Stream::write_value32`] (reserved, ignored).
    pub fn write_value64(&self, addr: u64, value: u64, flags: WriteValueFlags) -> Result<()> {
        let _ = flags;
        self.write_value(addr, value, 64)
    }

    /// A write of `bits` (32 or 64) off the 32-bit hot path: the address checked, then the
    /// single-command slow submission, or a `CmdBuf` where the write is not one command.
    #[inline(never)]
    fn write_value(&self, addr: u64, value: u64, bits: u32) -> Result<()> {
        let call = if bits == 32 {
            "hipStreamWriteValue32"
        } else {
            "hipStreamWriteValue64"
        };
        check_addr(call, addr, bits, 0)?;
        self.inner.dev.check_gpu_addr(call, addr)?;
        if bits == 32 {
            if let Some(c) = Cmd::write_mem32(self.inner.family, addr, value as u32) {
                return self.submit_cmd_slow(&c, Place::Any).map(|_| ());
            }
        }
        let mut c = CmdBuf::new(self.inner.family);
        c.write_mem(addr, value, bits)?;
        self.submit(&c, Place::Any, None)?;
        Ok(())
    }

    /// `hipStreamWaitValue32`: later work waits until the comparison `cmp` (HIP's
    /// `flags`; see [`WaitCompare`] for the exact tests) holds for the 32-bit value at
    /// `addr` under `mask` (HIP's default mask is `u32::MAX`). The wait runs in the CP
    /// (WAIT_REG_MEM); the stream moves to a dedicated queue so the wait never stalls
    /// another stream. `addr` is checked as for [`Stream::write_value32`].
    pub fn wait_value32(&self, addr: u64, value: u32, cmp: WaitCompare, mask: u32) -> Result<()> {
        check_addr("hipStreamWaitValue32", addr, 32, 0)?;
        self.inner
            .dev
            .check_gpu_addr("hipStreamWaitValue32", addr)?;
        // The condition decoded from the typed comparison (no unknown flags to reject),
        // as `cmd::wait_condition` does for 32 bits.
        let (function, reference, mask) = match cmp {
            WaitCompare::Gte => (CompareFn::GreaterEqual, value, mask),
            WaitCompare::Eq => (CompareFn::Equal, value, mask),
            WaitCompare::And => (CompareFn::NotEqual, 0, mask & value),
            WaitCompare::Nor if mask != u32::MAX => return Ok(()),
            WaitCompare::Nor => (CompareFn::NotEqual, !value, !value),
        };
        // The hot path: WAIT_REG_MEM encoded, then a slot reserved and published.
        let ib = SmallIb::wait_reg_mem32(function, addr, reference, mask);
        if let Some(slot) = self.reserve_fast(Place::Dedicated) {
            let qid = slot.queue_id();
            let published = slot.publish_ib(self.inner.timeline.handle(), &ib);
            self.account(qid, 1, published);
            return Ok(());
        }
        self.wait_value32_slow(addr, value, cmp, mask)
    }

    #[cold]
    #[inline(never)]
    fn wait_value32_slow(&self, addr: u64, value: u32, cmp: WaitCompare, mask: u32) -> Result<()> {
        self.wait_value(addr, value as u64, cmp.raw(), mask as u64, 32)
    }

    /// `hipStreamWaitValue64` (8-byte aligned address; WAIT_REG_MEM64 where the family has
    /// it, else the AQL BARRIER_VALUE packet).
    pub fn wait_value64(&self, addr: u64, value: u64, cmp: WaitCompare, mask: u64) -> Result<()> {
        self.wait_value(addr, value, cmp.raw(), mask, 64)
    }

    // Inlined into each width's entry point so `bits` is a constant there.
    #[inline(always)]
    fn wait_value(&self, addr: u64, value: u64, flags: u32, mask: u64, bits: u32) -> Result<()> {
        let call = if bits == 32 {
            "hipStreamWaitValue32"
        } else {
            "hipStreamWaitValue64"
        };
        check_addr(call, addr, bits, 0)?;
        self.inner.dev.check_gpu_addr(call, addr)?;
        let c = cmd::wait_condition(flags, value, mask, bits)
            .map_err(|e| Error::new(e.kind(), call, e.to_string()).with_source(e))?;
        if c == WaitCondition::AlwaysTrue {
            return Ok(());
        }
        if bits == 32 {
            if let WaitCondition::Poll {
                function,
                reference,
                mask,
            } = c
            {
                // The hot path: WAIT_REG_MEM encoded, then a slot reserved and published.
                let ib = SmallIb::wait_reg_mem32(function, addr, reference as u32, mask as u32);
                if let Some(slot) = self.reserve_fast(Place::Dedicated) {
                    let qid = slot.queue_id();
                    let published = slot.publish_ib(self.inner.timeline.handle(), &ib);
                    self.account(qid, 1, published);
                    return Ok(());
                }
            }
            if let Some(w) = Cmd::wait_mem32(addr, c) {
                return self.submit_cmd_slow(&w, Place::Dedicated).map(|_| ());
            }
        }
        let mut cb = CmdBuf::new(self.inner.family);
        let how = cb
            .wait_mem(addr, bits, c)
            .map_err(|e| Error::new(e.kind(), call, e.to_string()).with_source(e))?;
        match how {
            MemWait::Encoded => self.submit(&cb, Place::Dedicated, None).map(|_| ()),
            MemWait::WaitKernel => self
                .wait_mem64_kernel(addr, c)
                .map_err(|e| Error::new(e.kind(), call, e.to_string()).with_source(e)),
        }
    }

    /// `hipStreamWaitEvent`: later work waits for the event's most recent record *as of
    /// this call*; an event never recorded makes this a no-op (HIP's rules). `flags` must
    /// be 0. Works across streams and across GPUs of one [`Device`] (the CP polls the
    /// other stream's timeline in system memory).
    ///
    /// An event of another [`Device`] (a second `Device::open`: another KFD connection,
    /// whose timelines this stream's queues cannot see) is refused with InvalidValue
    /// naming both devices; the dependency is never silently dropped. Wait for it on the
    /// host ([`crate::Event::synchronize`]) instead.
    pub fn wait_event(&self, event: &crate::event::Event, flags: u32) -> Result<()> {
        if flags != 0 || !event.on_device(&self.inner.dev) {
            return self.wait_event_refused(event, flags);
        }
        // The record's words, read without a lock or a reference count.
        let Some(w) = event.recorded_words() else {
            return Ok(());
        };
        if w.done {
            return Ok(());
        }
        if let Some(r) = self.wait_words_fast(&w) {
            return r;
        }
        self.wait_event_slow(event)
    }

    /// [`Stream::wait_event`]'s errors: flags, or an event of another [`Device`].
    #[cold]
    #[inline(never)]
    fn wait_event_refused(&self, event: &crate::event::Event, flags: u32) -> Result<()> {
        if flags != 0 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "hipStreamWaitEvent",
                format!("flags {flags:#x} must be 0"),
            ));
        }
        Err(Error::new(
            ErrorKind::InvalidValue,
            "hipStreamWaitEvent",
            format!(
                "the event belongs to device {}, the stream to device {}: a stream can \
                 wait only for events of its own Device (synchronize the event on the \
                 host instead)",
                event.device_name(),
                crate::event::device_name(&self.inner.dev)
            ),
        ))
    }

    /// [`Stream::wait_event`] through the point (its timeline kept alive by a clone): the
    /// record read again (this is the call's moment of capture when the fast path
    /// declined, as it published and noted nothing).
    #[cold]
    #[inline(never)]
    fn wait_event_slow(&self, event: &crate::event::Event) -> Result<()> {
        let Some(p) = event.recorded_point() else {
            return Ok(());
        };
        if p.done() {
            return Ok(());
        }
        self.submit_wait(p)
    }

    /// The wait for a recorded point (not complete when read) without the stream's lock
    /// or the timeline's `Arc`, where it is that simple: the stream on its dedicated queue
    /// already (nothing to move), no implicit dependency, no callback hold to emit, the
    /// wait one BARRIER_VALUE packet (gfx9) and the timeline with a slot in the stream's
    /// waited list (its count raised without a lock; a new entry needs the state lock and
    /// the timeline's `Arc`). The packet is encoded whole (`cmdbuf`) before the slot is
    /// reserved. None: nothing done, take the general path.
    #[inline(always)]
    fn wait_words_fast(&self, w: &crate::event::RecordWords) -> Option<Result<()>> {
        let s = &*self.inner;
        if s.family.has_wait_reg_mem64() {
            return None;
        }
        // On its dedicated queue (`on_dedicated` checked by `reserve_fast`), `cur` is final.
        let qp = s.cur.load(Ordering::Acquire);
        // SAFETY: a queue `cur` pointed to lives as long as the stream (see `cur`); a
        // tagged pointer is only read for its queue id here (the tag is bit 0).
        let qid = unsafe { &*qp.map_addr(|a| a & !1) }.queue_id();
        if w.queue_id == qid {
            // In this queue's order already (as `submit_wait` decides, after noting it).
            if !(s.on_dedicated.load(Ordering::Acquire) && self.note_waited_known(w)) {
                return None;
            }
            return Some(Ok(()));
        }
        // Encoded whole before the slot is reserved.
        let packet =
            crate::cmdbuf::barrier_value_point_packet(w.handle, w.threshold(), s.timeline.handle());
        let slot = self.reserve_fast(Place::Dedicated)?;
        if slot.queue_id() != qid || !self.note_waited_known(w) {
            // Dropped: nothing published.
            return None;
        }
        let published = slot.publish_packet(&packet);
        self.account(qid, 1, published);
        Some(Ok(()))
    }

    /// The stream's completion point now: all work enqueued so far.
    pub(crate) fn point_now(&self) -> Point {
        if self.inner.cb.hold_pending() {
            self.flush_hold_or_fail();
        }
        self.inner.point()
    }

    /// `(target, queue_id)` of [`Stream::point_now`] without cloning the timeline (the
    /// allocator's freeAsync hot path).
    pub(crate) fn point_parts(&self) -> (u64, u32) {
        if self.inner.cb.hold_pending() {
            self.flush_hold_or_fail();
        }
        let target = self.inner.submitted.load(Ordering::Acquire);
        (target, self.inner.queue_id.load(Ordering::Acquire))
    }

    /// Order later work of this stream after `p` (a point of any stream or GPU of the
    /// device); nothing is submitted when `p` is complete or already in this queue's order.
    pub(crate) fn wait_for_point(&self, p: Point) -> Result<()> {
        if p.timeline.serial() == self.inner.timeline.serial() {
            return Ok(());
        }
        self.submit_wait(p)
    }

    /// Whether this stream's later work is already ordered after `p`: `p` is on this
    /// stream, or the stream waited (event / null-stream / point wait) for a point at or
    /// past `p` on `p`'s timeline. Completion of `p` is not considered here.
    pub(crate) fn ordered_after(&self, p: &Point) -> bool {
        let id = p.timeline.serial();
        if id == self.inner.timeline.serial() {
            return true;
        }
        self.inner.waited.covers(id, p.target)
    }

    /// The point an event record captures when it needs no packet (no timestamp, no
    /// implicit null-stream wait to place, no callback hold to emit, no sticky error):
    /// the stream's packet count and last queue, two loads. None: take
    /// [`Stream::record`].
    #[inline(always)]
    pub(crate) fn record_fast(&self) -> Option<(u64, u32)> {
        let s = &*self.inner;
        if !self.no_null_deps() || s.cb.marks() & MARKS_SLOW != 0 {
            return None;
        }
        let target = s.submitted.load(Ordering::Acquire);
        let queue_id = s.queue_id.load(Ordering::Acquire);
        Some((target, queue_id))
    }

    /// Record a completion point (what an event captures), with an optional timestamp
    /// written by the CP at the end of the stream's earlier work to `ts_addr`.
    pub(crate) fn record(&self, ts_addr: Option<u64>) -> Result<Point> {
        let s = &*self.inner;
        // Fast path: without a timestamp and without implicit null-stream waits to place,
        // the record is the stream's current point (two atomic loads, no lock).
        if ts_addr.is_none()
            && (s.flags & STREAM_NON_BLOCKING != 0
                || !s.dev.pools.null_used.load(Ordering::Acquire))
            && !s.is_null
            && !s.cb.hold_pending()
        {
            if let Some(e) = s.sticky_error() {
                return Err(e);
            }
            return Ok(s.point());
        }
        let mut c = CmdBuf::new(s.family);
        if let Some(addr) = ts_addr {
            c.timestamp(addr)?;
        }
        let target = self.submit(&c, Place::Any, None)?;
        Ok(self.point_at(target))
    }

    /// Place a callback among the stream's commands: under the stream's lock, mark a
    /// hold pending and call `f` with the stream's packet count (the callback's start).
    /// The lock-free single-command paths check the mark under the queue's producer lock,
    /// so the first callback after a command waits for producers publishing now (their
    /// packets are then in the count); later ones find the mark already set.
    pub(crate) fn enqueue_callback<R>(&self, f: impl FnOnce(u64) -> R) -> R {
        let s = &*self.inner;
        let st = lock(&s.state);
        if !s.cb.hold_pending() {
            s.cb.set_hold_pending();
            st.queue.fence_producers();
        }
        f(s.submitted.load(Ordering::Acquire))
    }

    /// Emit the hold that orders later work after the stream's callbacks (one wait on
    /// their line, on a dedicated queue; none when they all returned), under the state
    /// lock: the callback hook of every submit path (`crate::callback`).
    #[cold]
    #[inline(never)]
    fn emit_hold(&self, st: &mut StreamState) -> Result<()> {
        let s = &*self.inner;
        let Some(p) = s.cb.take_hold(s.gpu_index) else {
            return Ok(());
        };
        let r = (|| {
            if !st.dedicated {
                self.make_dedicated(st)?;
            }
            let mut c = CmdBuf::new(s.family);
            c.wait_point(p.timeline.handle(), p.threshold())?;
            let q = &st.queue;
            crate::callback::note_line_wait(&s.dev, &p, q.queue_id());
            // Counted by `publish` (under the queue's producer lock).
            self.publish(q, &[&c], &|| s.dev.poll_faults(s.gpu_index))?;
            Ok(())
        })();
        if r.is_ok() {
            s.cb.hold_published();
        }
        r
    }

    /// Emit a pending callback hold, so the stream's point covers its callbacks.
    pub(crate) fn flush_hold(&self) -> Result<()> {
        if !self.inner.cb.hold_pending() {
            return Ok(());
        }
        let mut st = lock(&self.inner.state);
        if self.inner.cb.hold_pending() {
            self.emit_hold(&mut st)?;
        }
        Ok(())
    }

    /// [`Stream::flush_hold`] for callers that take the point without a Result: a hold
    /// that cannot be published fails the stream (its point would not cover them).
    #[cold]
    #[inline(never)]
    fn flush_hold_or_fail(&self) {
        if let Err(e) = self.flush_hold() {
            self.inner.fail(format!(
                "the hold behind the stream's callbacks failed: {e}"
            ));
        }
    }

    /// The hardware queue the stream submits to now.
    #[cfg(test)]
    pub(crate) fn current_queue(&self) -> Arc<AqlQueue> {
        lock(&self.inner.state).queue.clone()
    }

    /// The stream's command target (family and XCC count).
    pub(crate) fn target(&self) -> Target {
        self.inner.family
    }
}

/// Where a submission may run: `Dedicated` for commands that may wait on something
/// outside their queue (the stream moves to a queue of its own first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// The stream's current queue, shared or not.
    Any,
    /// A dedicated queue.
    Dedicated,
}

#[inline]
fn check_addr(call: &'static str, addr: u64, bits: u32, flags: u32) -> Result<()> {
    if flags == 0 && addr != 0 && addr % (bits as u64 / 8) == 0 {
        return Ok(());
    }
    bad_addr(call, addr, bits, flags)
}

#[cold]
#[inline(never)]
fn bad_addr(call: &'static str, addr: u64, bits: u32, flags: u32) -> Result<()> {
    if flags != 0 {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            call,
            format!("flags {flags:#x} must be 0"),
        ));
    }
    if addr == 0 || addr % (bits as u64 / 8) != 0 {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            call,
            format!(
                "address {addr:#x} must be non-null and {}-byte aligned",
                bits / 8
            ),
        ));
    }
    Ok(())
}

impl Drop for Stream {
    fn drop(&mut self) {
        let s = &self.inner;
        // The null stream too: the device holds it weakly (`pools.null`), so the last
        // handle dropped while it is busy would free its timeline, and the memory its
        // queued packets name, under those packets. Kept, `Device::null_stream` hands the
        // same stream (and its ordering) out again until its work completes.
        if !s.idle() {
            if !s.failed() || s.soft_failed.load(Ordering::Acquire) {
                // Destroy while busy: return at once; keep the stream (its timeline and
                // dedicated queue) until its work completes.
                lock(&s.dev.pools.graveyard).push(s.clone());
            } else {
                // Failed by a GPU fault: its work may never complete, so the stream is not
                // kept. But the fault may have been another queue's: a shared queue that
                // did not fault still runs the stream's packets, each decrementing the
                // timeline as it completes, so the timeline (not its slot's next owner)
                // is kept until they have (for the device's life if they never do); so are
                // the other timelines its queued waits read (`holds`, the waited list's).
                let p = s.point();
                s.dev.pools.keep_until(p.clone(), s.timeline.clone());
                let held: Vec<Arc<Signal>> = lock(&s.state)
                    .holds
                    .drain(..)
                    .map(|(sig, _)| sig)
                    .chain(lock(&s.waited.kept).drain(..))
                    .collect();
                for sig in held {
                    s.dev.pools.keep_until(p.clone(), sig);
                }
            }
        }
        s.dev.pools.reap();
    }
}

impl Drop for StreamInner {
    /// The last reference went: one blocking stream fewer for the null stream's fast path.
    fn drop(&mut self) {
        if self.is_blocking() {
            self.dev.pools.blocking_live.fetch_sub(1, Ordering::AcqRel);
            self.dev.sync_null_marks();
        }
    }
}

/// Start the device's fault watcher once: a thread that sleeps in WAIT_EVENTS on its own
/// MEMORY and HW_EXCEPTION events (KFD signals every event of the type, so the device's
/// own exception events still fire for `check_faults`), records the fault and sets the
/// flag `poll_faults` reads, so query and ring-space waits see a fault without a system
/// call. It holds the device only weakly (and the backend for at most one 50 ms wait
/// after the device goes), as ROCr's exception thread waits on the memory event.
fn start_fault_watcher(dev: &Arc<DeviceInner>) {
    if dev.exception_events.is_empty() || dev.pools.watcher.swap(true, Ordering::AcqRel) {
        return;
    }
    let backend = dev.backend.clone();
    let ids: Vec<u32> = crate::device::create_exception_events(backend.as_ref())
        .into_iter()
        .map(|(_, id)| id)
        .collect();
    if ids.is_empty() {
        return;
    }
    let weak = Arc::downgrade(dev);
    let watch = move || {
        let mut evs: Vec<kfd::abi::EventData> = ids
            .iter()
            .map(|&id| kfd::abi::EventData {
                event_id: id,
                ..Default::default()
            })
            .collect();
        loop {
            let r = kfd::ioctl::wait_events(backend.as_ref(), &mut evs, false, 50);
            let Some(dev) = weak.upgrade() else { break };
            if r.as_ref()
                .is_ok_and(|&r| r == kfd::abi::KFD_IOC_WAIT_RESULT_COMPLETE)
            {
                for g in 0..dev.gpus.len() {
                    if dev.check_faults(g).is_some() {
                        dev.pools.faulted.store(true, Ordering::Release);
                    }
                }
            } else if r.is_err() {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        for &id in &ids {
            let _ = kfd::ioctl::destroy_event(backend.as_ref(), id);
        }
    };
    if std::thread::Builder::new()
        .name("kfdrt-faults".into())
        .spawn(watch)
        .is_err()
    {
        dev.pools.watcher.store(false, Ordering::Release);
    }
}

impl DeviceInner {
    pub(crate) fn blocking_streams(&self, gpu: usize) -> Vec<Arc<StreamInner>> {
        let b = lock(&self.pools.blocking);
        b.iter()
            .filter_map(|w| w.upgrade())
            .filter(|s| s.gpu_index == gpu)
            .collect()
    }

    /// Set [`MARK_NULL_WAITS`] on the device's null streams while blocking streams live,
    /// clear it otherwise: after every change of `blocking_live` and at a null stream's
    /// creation, under `null_marks` (so the last update sees the last count). Lock order:
    /// `blocking` (a blocking stream's last reference may go under it), then `null_marks`,
    /// then `null`; neither of the last two is held where a blocking stream is dropped.
    pub(crate) fn sync_null_marks(&self) {
        let _g = lock(&self.pools.null_marks);
        let waits = self.pools.blocking_live.load(Ordering::Acquire) > 0;
        // Null streams are not blocking: dropping a reference here never comes back.
        for n in lock(&self.pools.null)
            .iter()
            .filter_map(|(_, w)| w.upgrade())
        {
            if waits {
                n.cb.set_mark(MARK_NULL_WAITS);
            } else {
                n.cb.clear_mark(MARK_NULL_WAITS);
            }
        }
    }

    /// Whether every blocking stream of GPU `gpu` is idle (the null stream's synchronize
    /// fast path): a walk of the list under its lock, allocating nothing.
    pub(crate) fn blocking_idle(&self, gpu: usize) -> bool {
        if self.pools.blocking_live.load(Ordering::Acquire) == 0 {
            return true;
        }
        let b = lock(&self.pools.blocking);
        b.iter()
            .filter_map(|w| w.upgrade())
            .all(|s| s.gpu_index != gpu || s.idle())
    }

    /// Null-stream semantics: work on the null stream waits for the GPU's blocking
    /// streams; work on a blocking stream waits for the null stream.
    fn implicit_deps(&self, s: &StreamInner, deps: &mut Deps) {
        if s.flags & STREAM_NON_BLOCKING != 0 {
            return;
        }
        if s.is_null {
            let b = lock(&self.pools.blocking);
            for o in b.iter().filter_map(|w| w.upgrade()) {
                if o.gpu_index == s.gpu_index && !o.idle() {
                    deps.push(o.point());
                    if let Some(p) = o.cb.pending_point(o.gpu_index) {
                        deps.push(p);
                    }
                }
            }
        } else if self.pools.null_used.load(Ordering::Acquire) {
            let nulls = lock(&self.pools.null);
            if let Some(n) = nulls
                .iter()
                .find(|(g, _)| *g == s.gpu_index)
                .and_then(|(_, w)| w.upgrade())
            {
                if !n.idle() {
                    deps.push(n.point());
                    if let Some(p) = n.cb.pending_point(n.gpu_index) {
                        deps.push(p);
                    }
                }
            }
        }
    }

    /// A fault of GPU `gpu_index`, for callers that must not sleep or make system calls
    /// (query, waits for ring space): an atomic flag the device's fault watcher sets,
    /// then the recorded faults.
    pub(crate) fn poll_faults(&self, gpu_index: usize) -> Option<String> {
        if !self.pools.faulted.load(Ordering::Acquire) {
            return None;
        }
        let gpu_id = self.gpus.get(gpu_index)?.gpu_id;
        let f = lock(&self.faults);
        f.iter().find(|(g, _)| *g == gpu_id).map(|(_, d)| d.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::MemoryKind;
    use crate::types::EventFlags;

    /// The waited list: the first timelines in lock-free slots (raised in place, any
    /// number of times), the rest in the locked overflow, pruned of dropped timelines;
    /// counts only rise, and no timeline answers for another.
    #[test]
    fn waited_list_slots_and_overflow() {
        let dev = Device::open_for_test("emu:mi300x");
        let sig = || Arc::new(Signal::new(&dev.inner.signals, 0).unwrap());
        let w = WaitedList::new();
        let mut tls: Vec<Arc<Signal>> = (0..WAITED_SLOTS + 12).map(|_| sig()).collect();
        for (i, t) in tls.iter().enumerate() {
            w.note(t, 10 + i as u64);
        }
        for (i, t) in tls.iter().enumerate() {
            let id = t.serial();
            assert!(
                w.covers(id, 10 + i as u64) && !w.covers(id, 11 + i as u64),
                "{i}"
            );
            // Lock-free raise only for the slotted timelines.
            assert_eq!(w.raise_slot(id, 5), i < WAITED_SLOTS, "{i}");
            // Never lowered.
            assert!(w.covers(id, 10 + i as u64), "{i} after a lower raise");
            w.note(t, 100 + i as u64);
            assert!(w.covers(id, 100 + i as u64), "{i} raised");
        }
        assert!(!w.covers(sig().serial(), 0), "an unknown timeline");
        // Drop the overflow's timelines; new ones prune them instead of growing the list.
        let kept = tls.split_off(WAITED_SLOTS);
        let dropped: Vec<u64> = kept.iter().map(|t| t.serial()).collect();
        drop(kept);
        let fresh: Vec<Arc<Signal>> = (0..20).map(|_| sig()).collect();
        for t in &fresh {
            w.note(t, 7);
        }
        assert!(lock(&w.more).len() <= 20, "pruned: {}", lock(&w.more).len());
        assert!(fresh.iter().all(|t| w.covers(t.serial(), 7)));
        assert!(dropped.iter().all(|&id| !w.covers(id, 0)), "pruned entries");
        assert!(tls.iter().all(|t| w.covers(t.serial(), 100)));
    }

    /// Word `i` of `mem` (gates and outputs of the timeline-reuse tests).
    fn word(mem: &crate::memory::Buffer, i: usize) -> &std::sync::atomic::AtomicU32 {
        mem.atomic_u32(4 * i).unwrap()
    }

    /// Reap destroyed streams until none is left (their work is complete or about to be).
    fn reap_all(dev: &Device) {
        let t = Instant::now();
        loop {
            dev.inner.pools.reap();
            if lock(&dev.inner.pools.graveyard).is_empty() {
                return;
            }
            assert!(
                t.elapsed().as_secs() < 20,
                "a destroyed stream never finished"
            );
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }

    /// One round of the timeline-reuse hazard on `b`: stream `a` (held by gate word `ga`)
    /// writes 1 to word `out` and records an event; `b` (held by gate word `gb`) waits for
    /// it, then writes 2 to word `out + 1`. The event and `a` are destroyed while `b`'s
    /// wait is pending; `a`'s work completes and `a` is reaped; a new stream `c` is
    /// created (the signal pool hands out the slot freed last first). Then `b` runs: its
    /// wait must still be on `a`'s (completed) timeline, not on `c`'s counter, which
    /// starts again at TIMELINE_BASE (a wait on it never passes: `b` would hang).
    fn destroyed_waited_timeline_round(
        dev: &Device,
        b: &Stream,
        mem: &crate::memory::Buffer,
        ga: usize,
        gb: usize,
        out: usize,
    ) {
        let t = std::time::Duration::from_secs(10);
        let va = |i: usize| mem.va() + 4 * i as u64;
        let a = dev.create_stream(0).unwrap();
        a.wait_value32(va(ga), 1, WaitCompare::Gte, u32::MAX)
            .unwrap();
        a.write_value32(va(out), 1, WriteValueFlags::DEFAULT)
            .unwrap();
        let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
        ev.record(&a).unwrap();
        b.wait_value32(va(gb), 1, WaitCompare::Gte, u32::MAX)
            .unwrap();
        b.wait_event(&ev, 0).unwrap();
        b.write_value32(va(out + 1), 2, WriteValueFlags::DEFAULT)
            .unwrap();
        let a_slot = a.timeline().handle();
        let serial = a.timeline().serial();
        assert!(
            b.inner.waited.keeps(serial)
                || lock(&b.inner.state)
                    .holds
                    .iter()
                    .any(|(t, _)| t.serial() == serial),
            "b keeps a's timeline"
        );
        // hipEventDestroy, hipStreamDestroy (busy: returns at once, the work still runs).
        drop(ev);
        drop(a);
        word(mem, ga).store(1, Ordering::Release);
        reap_all(dev);
        assert_eq!(word(mem, out).load(Ordering::Acquire), 1, "a's work ran");
        let c = dev.create_stream(0).unwrap();
        let reused = c.timeline().handle() == a_slot;
        assert_eq!(word(mem, out + 1).load(Ordering::Acquire), 0, "b is held");
        word(mem, gb).store(1, Ordering::Release);
        let r = b.synchronize_timeout(t);
        assert!(
            r.is_ok(),
            "b's wait on the destroyed stream's completed work never passed ({r:?}); the \
             new stream's timeline took its signal slot: {reused}"
        );
        assert_eq!(
            word(mem, out + 1).load(Ordering::Acquire),
            2,
            "b ran after a"
        );
        assert!(
            !reused,
            "a's timeline slot was reused while b's wait on it was queued"
        );
        c.synchronize_timeout(t).unwrap();
    }

    /// A queued wait on another stream's timeline keeps that timeline's signal slot from
    /// being reused until the waiter is past it: the event and the stream destroyed while
    /// the wait is queued behind a gate, a new stream created before it runs. First for a
    /// timeline the waiter keeps in its waited list's lock-free slots, then, with those all
    /// taken, for one in the overflow (held only until the waiter's timeline passes it).
    #[test]
    fn a_queued_wait_keeps_a_destroyed_streams_timeline() {
        let dev = Device::open_for_test("emu:mi300x");
        let mem = dev.alloc(MemoryKind::Signal, 0, 4096).unwrap();
        let b = dev.create_stream(0).unwrap();
        destroyed_waited_timeline_round(&dev, &b, &mem, 0, 1, 2);
        // Fill the rest of b's waited slots (pending records: a complete one is no wait).
        let held: Vec<Stream> = (1..WAITED_SLOTS)
            .map(|_| {
                let x = dev.create_stream(0).unwrap();
                x.wait_value32(mem.va() + 4 * 10, 1, WaitCompare::Gte, u32::MAX)
                    .unwrap();
                let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
                ev.record(&x).unwrap();
                b.wait_event(&ev, 0).unwrap();
                x
            })
            .collect();
        assert!(b
            .inner
            .waited
            .slots
            .iter()
            .all(|(t, _)| t.load(Ordering::Acquire) != 0));
        word(&mem, 10).store(1, Ordering::Release);
        for x in &held {
            x.synchronize_timeout(std::time::Duration::from_secs(10))
                .unwrap();
        }
        destroyed_waited_timeline_round(&dev, &b, &mem, 20, 21, 22);
        destroyed_waited_timeline_round(&dev, &b, &mem, 30, 31, 32);
        // The overflow rounds' holds: the first one's, which b is past, went when the
        // second was added.
        let holds = lock(&b.inner.state).holds.len();
        assert_eq!(holds, 1, "holds b is past are dropped");
    }

    /// The legacy null stream's implicit wait on a blocking stream keeps that stream's
    /// timeline as an event wait does: the null stream's wait on blocking stream `x` is
    /// queued behind its wait for a gated non-blocking stream `y`; `x` is destroyed, its
    /// work completes and it is reaped, and a new stream is created before the null stream
    /// reaches the wait.
    #[test]
    fn a_null_stream_implicit_wait_keeps_a_destroyed_streams_timeline() {
        let dev = Device::open_for_test("emu:mi300x");
        let mem = dev.alloc(MemoryKind::Signal, 0, 4096).unwrap();
        let t = std::time::Duration::from_secs(10);
        let va = |i: usize| mem.va() + 4 * i as u64;
        let n = dev.null_stream(0).unwrap();
        let x = dev.create_stream(0).unwrap();
        let y = dev
            .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
            .unwrap();
        x.wait_value32(va(0), 1, WaitCompare::Gte, u32::MAX)
            .unwrap();
        x.write_value32(va(2), 1, WriteValueFlags::DEFAULT).unwrap();
        y.wait_value32(va(1), 1, WaitCompare::Gte, u32::MAX)
            .unwrap();
        let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
        ev.record(&y).unwrap();
        // The null stream's waits: y's record (the explicit one, first), then x's work.
        n.wait_event(&ev, 0).unwrap();
        n.write_value32(va(3), 2, WriteValueFlags::DEFAULT).unwrap();
        let x_slot = x.timeline().handle();
        drop(x);
        word(&mem, 0).store(1, Ordering::Release);
        reap_all(&dev);
        assert_eq!(word(&mem, 2).load(Ordering::Acquire), 1, "x's work ran");
        let c = dev
            .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
            .unwrap();
        let reused = c.timeline().handle() == x_slot;
        word(&mem, 1).store(1, Ordering::Release);
        let r = n.synchronize_timeout(t);
        assert!(
            r.is_ok(),
            "the null stream's wait on the destroyed stream's completed work never passed \
             ({r:?}); the new stream's timeline took its signal slot: {reused}"
        );
        assert_eq!(
            word(&mem, 3).load(Ordering::Acquire),
            2,
            "the null stream ran"
        );
        assert!(
            !reused,
            "x's timeline slot was reused while a wait on it was queued"
        );
    }

    /// A stream failed by a GPU fault elsewhere on its GPU and destroyed while busy is not
    /// kept (its work may never complete), but its shared queue did not fault and still
    /// runs its packets, each decrementing the stream's timeline as it completes: the
    /// timeline's slot must not go to a new stream before they have (the new stream's
    /// counter would start below TIMELINE_BASE: its points complete early).
    #[test]
    #[cfg(feature = "emulator")]
    fn a_failed_streams_timeline_outlives_its_queued_packets() {
        let b = Arc::new(kfd_emu::EmuBackend::from_spec("emu:mi210*2").unwrap());
        let dev = Device::with_backend(b.clone()).unwrap();
        let mem = dev.alloc(MemoryKind::Signal, 0, 4096).unwrap();
        // GPU 1's VRAM, not mapped on GPU 0 (no peer access): a write to it from GPU 0
        // faults on the GPU (an address in no allocation is refused before it).
        let far = dev.alloc(MemoryKind::Device, 1, 4096).unwrap();
        let t = std::time::Duration::from_secs(10);
        let x = dev.create_stream(0).unwrap();
        let f = dev.create_stream(0).unwrap();
        assert_ne!(x.hw_queue_id(), f.hw_queue_id());
        // f's queue faults (x's does not).
        f.write_value32(far.va(), 1, WriteValueFlags::DEFAULT)
            .unwrap();
        let t0 = Instant::now();
        while !matches!(f.query(), Err(e) if e.kind() == ErrorKind::LaunchFailure) {
            assert!(t0.elapsed() < t, "the fault was never seen");
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        // x's work stays queued on its shared queue while the engines are paused.
        b.pause_engines();
        x.write_value32(mem.va(), 1, WriteValueFlags::DEFAULT)
            .unwrap();
        x.write_value32(mem.va() + 4, 2, WriteValueFlags::DEFAULT)
            .unwrap();
        assert!(!x.has_dedicated_queue());
        let e = x.query().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
        let (x_slot, x_queue) = (x.timeline().handle(), x.hw_queue_id());
        drop(x);
        let c = dev
            .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
            .unwrap();
        let reused = c.timeline().handle() == x_slot;
        // A stream behind x's packets on x's queue: once it is done, so are they.
        let y = (0..8)
            .map(|_| dev.create_stream(0).unwrap())
            .find(|y| y.hw_queue_id() == x_queue)
            .expect("a stream on x's shared queue");
        y.write_value32(mem.va() + 8, 3, WriteValueFlags::DEFAULT)
            .unwrap();
        b.resume_engines();
        y.synchronize_timeout(t).unwrap();
        assert_eq!(word(&mem, 1).load(Ordering::Acquire), 2, "x's work ran");
        assert_eq!(
            c.timeline().load(),
            TIMELINE_BASE,
            "the new stream's timeline is its own (x's slot reused: {reused})"
        );
        assert!(!reused);
    }

    /// A stream failed by a GPU fault elsewhere on its GPU and destroyed while a wait on
    /// another stream's timeline is still queued on its shared queue (KFD's queue limit
    /// reached: no dedicated queue for its waits) keeps that timeline until its own
    /// timeline passes the wait, like its own: the waited stream destroyed and reaped
    /// meanwhile, the slot must not go to a new signal (reset to TIMELINE_BASE, a wait on
    /// it never passes). With `overflow`, the waited list's slots are taken first, so the
    /// timeline is in the stream's `holds` rather than a slot.
    fn failed_waiter_round(overflow: bool) {
        let dev = Device::open_for_test("emu:mi210*2");
        let mem = dev.alloc(MemoryKind::Signal, 0, 4096).unwrap();
        // GPU 1's VRAM, not mapped on GPU 0: a write to it from GPU 0 faults on the GPU.
        let far = dev.alloc(MemoryKind::Device, 1, 4096).unwrap();
        let t = std::time::Duration::from_secs(10);
        let va = |i: usize| mem.va() + 4 * i as u64;
        // a: held by word 0, then writes word 2 and records ev (on a dedicated queue).
        let a = dev.create_stream(0).unwrap();
        a.wait_value32(va(0), 1, WaitCompare::Gte, u32::MAX)
            .unwrap();
        a.write_value32(va(2), 1, WriteValueFlags::DEFAULT).unwrap();
        let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
        ev.record(&a).unwrap();
        // Pending records (held by word 10) to fill x's waited slots with.
        let fill: Vec<(Stream, crate::Event)> = (0..if overflow { WAITED_SLOTS } else { 0 })
            .map(|_| {
                let y = dev.create_stream(0).unwrap();
                y.wait_value32(va(10), 1, WaitCompare::Gte, u32::MAX)
                    .unwrap();
                let e = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
                e.record(&y).unwrap();
                (y, e)
            })
            .collect();
        let x = dev.create_stream(0).unwrap();
        let f = dev.create_stream(0).unwrap();
        assert!(!Arc::ptr_eq(
            &lock(&x.inner.state).queue,
            &lock(&f.inner.state).queue
        ));
        // GPU 0's queues up to KFD's limit: x's waits stay on its shared queue.
        let mut queues = Vec::new();
        loop {
            match AqlQueue::new(&dev.inner, 0, kfd_priority(0), 64) {
                Ok(q) => queues.push(q),
                Err(e) => {
                    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
                    break;
                }
            }
            assert!(queues.len() < 1000, "no queue limit");
        }
        x.wait_value32(va(1), 1, WaitCompare::Gte, u32::MAX)
            .unwrap();
        for (_, e) in &fill {
            x.wait_event(e, 0).unwrap();
        }
        x.wait_event(&ev, 0).unwrap();
        x.write_value32(va(3), 2, WriteValueFlags::DEFAULT).unwrap();
        assert!(!x.has_dedicated_queue(), "x stays on its shared queue");
        let serial = a.timeline().serial();
        let held = lock(&x.inner.state)
            .holds
            .iter()
            .any(|(t, _)| t.serial() == serial);
        assert_eq!(x.inner.waited.keeps(serial), !overflow, "in a slot");
        assert_eq!(held, overflow, "in holds");
        // f's queue faults, x's does not; x sees the fault (busy) and fails.
        f.write_value32(far.va(), 1, WriteValueFlags::DEFAULT)
            .unwrap();
        let t0 = Instant::now();
        while !matches!(x.query(), Err(e) if e.kind() == ErrorKind::LaunchFailure) {
            assert!(t0.elapsed() < t, "the fault was never seen");
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        let a_slot = a.timeline().handle();
        drop(ev);
        drop(a);
        word(&mem, 0).store(1, Ordering::Release);
        word(&mem, 10).store(1, Ordering::Release);
        reap_all(&dev);
        assert_eq!(word(&mem, 2).load(Ordering::Acquire), 1, "a's work ran");
        drop(fill);
        reap_all(&dev);
        drop(x);
        // The signal pool hands out the slot freed last first.
        let c = Signal::new(&dev.inner.signals, TIMELINE_BASE).unwrap();
        let reused = c.handle() == a_slot;
        word(&mem, 1).store(1, Ordering::Release);
        let t0 = Instant::now();
        while word(&mem, 3).load(Ordering::Acquire) != 2 {
            assert!(
                t0.elapsed() < t,
                "x's wait on a's completed work never passed (overflow: {overflow}); a \
                 new signal took a's timeline slot: {reused}"
            );
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        assert!(
            !reused,
            "a's slot was reused while x's wait on it was queued"
        );
    }

    /// [`failed_waiter_round`] for a timeline in a slot, then for one in `holds` (one
    /// device at a time: each fills its GPU's queues).
    #[test]
    fn a_failed_streams_queued_wait_keeps_the_waited_timeline() {
        failed_waiter_round(false);
        failed_waiter_round(true);
    }

    /// The lock-free event wait keeps the stream's waited list current, as
    /// `ordered_after` (the stream-ordered allocator's ReuseFollowEventDependencies) needs:
    /// after each wait for a later record of the same stream, the waiter is ordered after
    /// that record, and not after the recording stream's work enqueued since.
    #[test]
    fn fast_event_waits_are_remembered_for_ordered_after() {
        let dev = Device::open_for_test("emu:mi300x");
        let mem = dev.alloc(MemoryKind::Signal, 0, 4096).unwrap();
        let gate = mem.atomic_u32(0).unwrap();
        let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
        let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
        let t = std::time::Duration::from_secs(20);
        for round in 0..4u32 {
            // Held: the record is pending when b waits (a complete one is no wait).
            a.wait_value32(mem.va(), round + 1, WaitCompare::Gte, u32::MAX)
                .unwrap();
            ev.record(&a).unwrap();
            let p = a.point_now();
            assert!(!b.ordered_after(&p), "round {round}: not yet");
            b.wait_event(&ev, 0).unwrap();
            assert!(b.ordered_after(&p), "round {round}: after the wait");
            a.write_value32(mem.va() + 4, round, WriteValueFlags::DEFAULT)
                .unwrap();
            assert!(
                !b.ordered_after(&a.point_now()),
                "round {round}: a's later work"
            );
            gate.store(round + 1, Ordering::Release);
            a.synchronize_timeout(t).unwrap();
            b.synchronize_timeout(t).unwrap();
        }
        assert!(b.has_dedicated_queue());
    }
}
