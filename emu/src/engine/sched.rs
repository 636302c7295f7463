//! Engine threads and their scheduler.
//!
//! Each engine (the CP, or one SDMA engine) is a thread that owns the execution state of
//! its queues ([`QueueExec`]). The API side shares with it a queue list guarded by a
//! mutex plus a generation counter: the thread snapshots the list only when the
//! generation changed and acknowledges every generation it has seen at a point where it
//! is between packets, which is how `remove_queue` and `pause` wait for the engine to let
//! go of a queue without ever waiting for a blocked packet to finish.
//!
//! Doorbells bump a counter and unpark the thread only when it is parked. Lost wake-ups:
//! the engine stores `parked` (non-zero), issues a `SeqCst` fence, then re-reads the
//! doorbell counter before `park()`; a doorbell increments the counter, then reads
//! `parked`, both `SeqCst`. So at least one side sees the other: either the engine sees the
//! new count and does not park, or the doorbell sees `parked` and unparks
//! (`Thread::unpark` keeps a token, so an unpark that lands before `park()` is not lost
//! either).
//!
//! The CP watches its queues' doorbells themselves (as a CP sees the doorbell writes, not
//! an emulator counter) when the process can issue expedited memory barriers
//! (`membarrier(2)`, [`doorbell_watch_available`]): a doorbell on a queue that was rung
//! before then only reads `parked` (a plain load, no read-modify-write: a locked
//! instruction on a line the engine polls costs the submitting thread a cross-core round
//! trip on every doorbell). The engine's change check is the counter plus the sum of its
//! queues' doorbell values (each only grows while its queue lives; a queue list change
//! bumps the list generation, which is checked beside it). Lost wake-ups: the engine
//! stores `parked`, issues `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` (every running
//! thread of the process executes a full barrier before it returns), then re-reads the
//! doorbells; a submitter stores the doorbell, then reads `parked`. If the submitter's read
//! saw 0, the barrier on its CPU came after that read, so its earlier doorbell store is
//! visible to the engine's re-read; otherwise it unparks the engine. (The asymmetric
//! fence of liburcu and folly: the cost sits on the rare side, the park.) Without
//! membarrier (an old kernel, a seccomp filter) every doorbell takes the counter path.
//! Between parks the engine reads the doorbells of queues it found empty or blocked inside
//! a packet only every [`DORMANT_SAMPLE`] (they share cache lines with the busy queues'
//! doorbells); the re-read before a park, like the idle spin, reads every doorbell.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use super::memio::MemCache;
use super::queue::{QueueExec, RunState};
use super::{Inner, QueueDesc, QueueFault, QueueStatus};
use crate::gpumem::Fault;
use crate::trace::{EngineId, TraceKind};

/// Packets a queue at percentage 100 may execute before the scheduler looks again.
pub(crate) const BASE_QUANTUM: u32 = 256;
/// After its last runnable queue went idle, an engine polls its doorbell counter (with
/// `spin_loop` hints) this long before parking its thread. A doorbell inside the window
/// costs no futex wake-up (a parked thread takes ~5-10 us to wake), which is what
/// back-to-back submissions and callback round trips hit; after the window an idle
/// engine uses no CPU. 20 us is a few futex wake-ups' worth: long enough to cover a host
/// thread's enqueue-to-enqueue gap, short enough that an engine spins only 20 us after
/// each burst. The window adapts (see `idle_spin_after_wake`): shorter while the
/// submitter shares the engine's CPU, 100 us on the CP while it does not.
pub const IDLE_SPIN: Duration = Duration::from_micros(20);
/// The shortest idle spin: the window halves down to this while every park is followed
/// at once by a doorbell rung from the engine's own CPU (the spin only delayed a submitter
/// sharing that CPU), and doubles back to [`IDLE_SPIN`] when a spin catches a doorbell.
const IDLE_SPIN_MIN: Duration = Duration::from_micros(1);
/// The CP's idle spin after a park that a doorbell rung from another CPU ended within
/// this long: the submitter then runs beside the CP rather than on its CPU, so the spin
/// costs it nothing, while each park costs it a cross-CPU wake-up. Long enough to cover
/// a host thread that slept in a synchronize and was woken by the completion interrupt (a
/// sleeping vCPU of a 2-vCPU KVM guest takes tens of us to run it again); a CP left idle
/// after a burst still spins only 0.1 ms, and a park that lasts longer than this brings
/// the window back to [`IDLE_SPIN`]. The CP only: SDMA engines keep [`IDLE_SPIN`] at most,
/// so a CP and an SDMA engine never both spin 0.1 ms on a two-CPU machine while the host
/// waits for a core.
const IDLE_SPIN_APART: Duration = Duration::from_micros(100);
/// Sweeps over the queues one scheduler pass makes while they progress (see
/// `engine_main`): bounds the time between two looks at the queue list and doorbells.
const MAX_SWEEPS: u32 = 64;
/// While the engine has other work (a queue to run, a blocked one to re-poll), the
/// doorbell of a queue it found empty, or of one blocked inside a packet it fetched, is
/// read this long after the queue's last run, not on every round (an empty queue is then
/// polled too, unless the engine's counter moved first). Doorbells of one process share
/// cache lines (KFD hands out consecutive 8-byte doorbells), so reading such a queue's
/// doorbell on every round pulls in the line the submitter is writing a busy queue's
/// doorbell to, and each of its enqueues then waits for that copy to be invalidated. A
/// doorbell seen on a blocked queue re-polls the engine's blocked queues, as any doorbell
/// does, within this time. The engine's idle spin and its parks read every doorbell.
const DORMANT_SAMPLE: Duration = Duration::from_nanos(250);
/// Blocked queues are re-polled at once (yielding in between) for this long...
const SPIN: Duration = Duration::from_micros(50);
/// ...then with a backoff starting here...
const BACKOFF_MIN: Duration = Duration::from_micros(20);
/// ...doubling up to this.
const BACKOFF_MAX: Duration = Duration::from_millis(1);
/// After [`SPIN`], a queue waiting for its dispatch on the shader core is re-polled when
/// the dispatch ends (the dispatch pool kicks the CP), else only this often: polling it at
/// the backoff
/// woke the CP ~1000 times a second during every long dispatch, each wake-up taking a core
/// from the shader's worker threads (bench-results/2026-11-24-s7-shader-scaling.txt).
const DISPATCH_POLL: Duration = Duration::from_millis(100);

/// `EngineShared::parked` while the thread waits for a blocked queue's next poll.
const PARKED_TIMED: u8 = 1;
/// `EngineShared::parked` while the thread is idle (no deadline).
const PARKED_IDLE: u8 = 2;

/// A queue as both sides see it.
pub(crate) struct QueueShared {
    pub(crate) id: u32,
    pub(crate) desc: Mutex<QueueDesc>,
    /// Bumped by `update_queue`; the engine reloads the ring when it changes.
    pub(crate) cfg_gen: AtomicU64,
    pub(crate) priority: AtomicU32,
    pub(crate) percentage: AtomicU32,
    pub(crate) faulted: AtomicBool,
    fault: Mutex<Option<QueueFault>>,
    /// Set by the first doorbell: from then on the doorbell value is a write pointer.
    pub(crate) doorbell_rung: AtomicBool,
    pub(crate) cu_mask: Mutex<Vec<u32>>,
}

impl QueueShared {
    pub(crate) fn new(desc: QueueDesc) -> Self {
        QueueShared {
            id: desc.queue_id,
            priority: AtomicU32::new(desc.priority),
            percentage: AtomicU32::new(desc.percentage),
            desc: Mutex::new(desc),
            cfg_gen: AtomicU64::new(0),
            faulted: AtomicBool::new(false),
            fault: Mutex::new(None),
            doorbell_rung: AtomicBool::new(false),
            cu_mask: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn desc(&self) -> QueueDesc {
        self.desc.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    pub(crate) fn update(&self, ring_va: u64, ring_size: u32, priority: u32, percentage: u32) {
        {
            let mut d = self.desc.lock().unwrap_or_else(|e| e.into_inner());
            d.ring_va = ring_va;
            d.ring_size = ring_size;
            d.priority = priority;
            d.percentage = percentage;
        }
        self.priority.store(priority, Ordering::Release);
        self.percentage.store(percentage, Ordering::Release);
        self.cfg_gen.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn status(&self) -> QueueStatus {
        match &*self.fault.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(f) => QueueStatus::Faulted(f.clone()),
            None => QueueStatus::Active,
        }
    }

    /// Stops the queue and reports the fault (once).
    pub(crate) fn set_fault(
        &self,
        inner: &Inner,
        packet_offset: u64,
        fault: Option<Fault>,
        reason: String,
    ) {
        let f = QueueFault {
            queue_id: self.id,
            packet_offset,
            fault,
            reason,
        };
        {
            let mut slot = self.fault.lock().unwrap_or_else(|e| e.into_inner());
            if slot.is_some() {
                return;
            }
            *slot = Some(f.clone());
        }
        self.faulted.store(true, Ordering::Release);
        if f.fault.is_none() {
            self.report_queue_error(inner, &f);
        }
        inner.irq.queue_fault(inner.cfg.gpu_id, &f);
    }

    /// A packet error (not a VM fault): OR `KFD_EC_MASK(code)` into the error payload the
    /// context save area header names and signal its error event, as the firmware / KFD
    /// do once the runtime enabled exception delivery (RUNTIME_ENABLE). A header left
    /// empty reports nothing: the queue just stops.
    fn report_queue_error(&self, inner: &Inner, f: &QueueFault) {
        use kfd::abi;
        let base = self.desc().ctx_save_va;
        if base == 0 {
            return;
        }
        let gpu = inner.cfg.gpu_id;
        let Ok(hdr) = inner.mem.resolve(gpu, base, 40) else {
            return;
        };
        let (Ok(payload), Ok(event)) = (
            hdr.load_u64(base + abi::CWSR_HEADER_ERR_PAYLOAD_ADDR),
            hdr.load_u32(base + abi::CWSR_HEADER_ERR_EVENT_ID),
        ) else {
            return;
        };
        if payload == 0 || payload % 8 != 0 {
            return;
        }
        let code = super::firmware::queue_exception(&f.reason);
        if let Ok(w) = inner.mem.resolve(gpu, payload, 8) {
            let old = w.load_u64(payload).unwrap_or(0);
            let _ = w.store_u64(payload, old | abi::ec::mask(code));
        }
        if event != 0 {
            inner.irq.queue_error(gpu, event);
        }
    }
}

/// What the API side shares with one engine thread.
pub(crate) struct EngineShared {
    name: String,
    queues: Mutex<Vec<Arc<QueueShared>>>,
    list_gen: AtomicU64,
    ack: Mutex<u64>,
    ack_cv: Condvar,
    doorbells: AtomicU64,
    /// The engine watches its queues' doorbell values (see the module docs): a doorbell
    /// of a queue rung before takes [`EngineShared::kick_doorbell`]'s plain path. Set
    /// before the engine's first queue is added ([`GpuEngines::set_doorbell_watch`]);
    /// cleared for good if a park's memory barrier ever fails.
    ///
    /// [`GpuEngines::set_doorbell_watch`]: super::GpuEngines::set_doorbell_watch
    pub(crate) watch: AtomicBool,
    /// A park's memory barrier failed (it should not, once registered; see
    /// [`UNFENCED_PARK`]): the engine keeps reading its doorbell values for submitters that
    /// read `watch` before it was cleared, and caps every park.
    unfenced: AtomicBool,
    /// Non-zero while the thread is parked or about to park (see the module docs):
    /// [`PARKED_TIMED`] waiting for a blocked queue's next poll, [`PARKED_IDLE`] idle.
    parked: AtomicU8,
    /// The host CPU of the last thread that unparked this one (-1: none or unknown),
    /// written only on that rare path: the idle window rule compares it with the CPU
    /// the engine wakes on.
    kicker_cpu: AtomicI32,
    paused: AtomicBool,
    shutdown: AtomicBool,
    /// Set when the engine thread panicked (an emulator bug).
    pub(crate) crashed: AtomicBool,
    thread: OnceLock<Thread>,
    join: Mutex<Option<JoinHandle<()>>>,
}

impl EngineShared {
    pub(crate) fn new(name: String) -> Self {
        EngineShared {
            name,
            queues: Mutex::new(Vec::new()),
            list_gen: AtomicU64::new(0),
            ack: Mutex::new(0),
            ack_cv: Condvar::new(),
            doorbells: AtomicU64::new(0),
            watch: AtomicBool::new(false),
            unfenced: AtomicBool::new(false),
            parked: AtomicU8::new(0),
            kicker_cpu: AtomicI32::new(-1),
            paused: AtomicBool::new(false),
            shutdown: AtomicBool::new(false),
            crashed: AtomicBool::new(false),
            thread: OnceLock::new(),
            join: Mutex::new(None),
        }
    }

    /// Starts the thread if it is not running yet.
    pub(crate) fn ensure_started(self: &Arc<Self>, inner: &Arc<Inner>, index: usize) {
        let mut j = self.join.lock().unwrap_or_else(|e| e.into_inner());
        if j.is_some() || self.shutdown.load(Ordering::Acquire) {
            return;
        }
        let me = self.clone();
        let inner2 = inner.clone();
        match std::thread::Builder::new()
            .name(self.name.clone())
            .spawn(move || {
                let run =
                    std::panic::AssertUnwindSafe(|| engine_main(me.clone(), inner2.clone(), index));
                if std::panic::catch_unwind(run).is_err() {
                    // An emulator bug: stop this engine's queues visibly instead of hanging.
                    me.crashed.store(true, Ordering::Release);
                    let list = me.queues.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    for q in list {
                        q.set_fault(
                            &inner2,
                            0,
                            None,
                            "internal error in the emulated engine".into(),
                        );
                    }
                    let mut a = me.ack.lock().unwrap_or_else(|e| e.into_inner());
                    *a = u64::MAX;
                    me.ack_cv.notify_all();
                }
            }) {
            Ok(h) => {
                let _ = self.thread.set(h.thread().clone());
                *j = Some(h);
            }
            Err(_) => {
                // No thread: the engine's queues never run. Report it on each queue so the
                // runtime sees a fault instead of a hang.
                for q in self.queues.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                    q.set_fault(
                        inner,
                        0,
                        None,
                        "the emulator could not start an engine thread".into(),
                    );
                }
            }
        }
    }

    /// Wakes the thread (a doorbell or a configuration change): bumps the doorbell
    /// counter and unparks the thread if it is parked.
    #[inline]
    pub(crate) fn kick(&self) {
        self.doorbells.fetch_add(1, Ordering::SeqCst);
        let parked = self.parked.load(Ordering::SeqCst);
        if parked != 0 {
            self.unpark(parked);
        }
    }

    /// A doorbell whose value the caller has just stored in a queue's doorbell cell (a
    /// queue rung before, so the engine knows the cell): when the engine watches its
    /// doorbells, it sees the store itself and only a parked engine needs waking (see the
    /// module docs for why the plain load of `parked` cannot miss a park); otherwise
    /// [`EngineShared::kick`].
    #[inline]
    pub(crate) fn kick_doorbell(&self) {
        if !self.watch.load(Ordering::Relaxed) {
            return self.kick();
        }
        // The doorbell store comes first in program order; the engine's barrier orders it.
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        let parked = self.parked.load(Ordering::Relaxed);
        if parked != 0 {
            self.unpark(parked);
        }
    }

    /// Whether the engine's thread was started (its first queue was added).
    pub(crate) fn started(&self) -> bool {
        self.thread.get().is_some()
    }

    /// The doorbell counter (see [`super::GpuEngines::doorbell_counter`]).
    pub(crate) fn doorbell_count(&self) -> u64 {
        self.doorbells.load(Ordering::Relaxed)
    }

    /// Unparks the thread, which stored `parked` (non-zero).
    #[cold]
    fn unpark(&self, parked: u8) {
        if let Some(t) = self.thread.get() {
            if parked == PARKED_IDLE {
                // Read by the engine's idle window rule after `park` returns (unpark
                // orders the store); a timed park has no window to adapt.
                self.kicker_cpu
                    .store(super::pin::current_cpu(), Ordering::Relaxed);
            }
            t.unpark();
        }
    }

    /// Returns when the thread is between packets with its trace buffer flushed (or is
    /// not running).
    pub(crate) fn sync(&self) {
        let gen = {
            let _l = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            self.list_gen.fetch_add(1, Ordering::AcqRel) + 1
        };
        self.wait_ack(gen);
    }

    pub(crate) fn add(&self, q: Arc<QueueShared>) {
        let mut l = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        l.push(q);
        self.list_gen.fetch_add(1, Ordering::AcqRel);
    }

    /// Removes a queue and waits until the thread no longer uses it.
    pub(crate) fn remove(&self, id: u32) {
        let gen = {
            let mut l = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            l.retain(|q| q.id != id);
            self.list_gen.fetch_add(1, Ordering::AcqRel) + 1
        };
        self.wait_ack(gen);
    }

    pub(crate) fn set_paused(&self, p: bool) {
        self.paused.store(p, Ordering::Release);
        let gen = {
            let _l = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            self.list_gen.fetch_add(1, Ordering::AcqRel) + 1
        };
        if p {
            self.wait_ack(gen);
        } else {
            self.kick();
        }
    }

    /// Asks the thread to acknowledge a new list generation (as [`Self::sync`] does)
    /// without waiting: returns the generation to pass to [`Self::wait_ack`].
    pub(crate) fn request_ack(&self) -> u64 {
        let gen = {
            let _l = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            self.list_gen.fetch_add(1, Ordering::AcqRel) + 1
        };
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
        gen
    }

    /// Whether the calling thread is this engine's thread.
    pub(crate) fn is_current(&self) -> bool {
        self.thread
            .get()
            .is_some_and(|t| t.id() == std::thread::current().id())
    }

    pub(crate) fn wait_ack(&self, gen: u64) {
        let Some(t) = self.thread.get() else { return };
        if std::thread::current().id() == t.id() {
            // Called from an interrupt callback on this engine: it will see the new list
            // before it executes another packet.
            return;
        }
        t.unpark();
        let mut a = self.ack.lock().unwrap_or_else(|e| e.into_inner());
        while *a < gen {
            let finished = match self.join.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
                Some(h) => h.is_finished(),
                None => true,
            };
            if finished {
                return;
            }
            t.unpark();
            a = match self.ack_cv.wait_timeout(a, Duration::from_millis(10)) {
                Ok((g, _)) => g,
                Err(e) => e.into_inner().0,
            };
        }
    }

    pub(crate) fn shutdown(&self) {
        self.shutdown.store(true, Ordering::Release);
        let h = self.join.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = h {
            h.thread().unpark();
            if std::thread::current().id() != h.thread().id() {
                let _ = h.join();
            }
        }
    }
}

struct Slot {
    exec: QueueExec,
    /// A Block event was traced and no Unblock yet.
    traced_block: bool,
    /// Next time a blocked queue is polled, and the current backoff.
    /// While the queue blocks: the end of its immediate re-poll window (when it blocked
    /// plus [`SPIN`]).
    spin_until: Option<Instant>,
    next_poll: Instant,
    delay: Duration,
    /// AQL: the engine's doorbell count read before a run that found the ring empty
    /// (`None` after any other outcome). Later sweeps skip the queue while the count (as
    /// last read) is unchanged: a producer publishes with a doorbell, and a write index
    /// moved without one is seen when the queue is polled at its `sample_at` (an idle
    /// engine sees such a write only after a doorbell anyway).
    idle_db: Option<u64>,
    /// [`DORMANT_SAMPLE`] after the queue's last run: from then on an empty or quiet
    /// queue's doorbell is read again, and an empty queue polled.
    sample_at: Instant,
    /// The queue blocked inside a packet it fetched (an indirect buffer's wait, a running
    /// dispatch): packets behind it cannot run until it moves, so the engine reads its
    /// doorbell only at `sample_at` (the producer's later doorbells stay in its core's
    /// cache meanwhile); its re-polls follow the blocked schedule, and a run that moves it
    /// reads the write index afresh.
    quiet: bool,
    /// The queue's doorbell value as last read, used in the engine's doorbell state while
    /// the value is not read (quiet or idle, before `sample_at`).
    cell_seen: u64,
}

impl Slot {
    /// Whether the engine reads the queue's doorbell value at `now` outside its idle spin
    /// and parks (see [`Slot::quiet`] and [`DORMANT_SAMPLE`]).
    fn sampled_at(&self, now: Instant) -> bool {
        reads_doorbell(self.quiet, self.idle_db.is_some(), now, self.sample_at)
    }
}

/// [`Slot::sampled_at`]'s rule: while the queue blocks inside a packet (`quiet`) or is
/// idle, only from `sample_at` on; always otherwise.
fn reads_doorbell(quiet: bool, idle: bool, now: Instant, sample_at: Instant) -> bool {
    !(quiet || idle) || now >= sample_at
}

/// Whether this process can have its engines watch doorbells: registered once for
/// `MEMBARRIER_CMD_PRIVATE_EXPEDITED` (Linux 4.14), unless `KFDRT_EMU_DOORBELL_WATCH=0`.
pub(crate) fn doorbell_watch_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        use rustix::thread::{membarrier, membarrier_query, MembarrierCommand, MembarrierQuery};
        std::env::var_os(DOORBELL_WATCH_ENV).is_none_or(|v| v != "0")
            && membarrier_query().contains(MembarrierQuery::PRIVATE_EXPEDITED)
            && membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok()
    })
}

/// `KFDRT_EMU_DOORBELL_WATCH=0`: every doorbell bumps the emulated CP's wake-up counter
/// (for comparisons; read once per process). By default the CP watches its queues'
/// doorbell values where `membarrier(2)` allows ([`super::GpuEngines::doorbell_watch`]).
pub const DOORBELL_WATCH_ENV: &str = "KFDRT_EMU_DOORBELL_WATCH";

/// The longest an engine parks once a park's memory barrier failed: the watch is then off
/// for later doorbells, but one that read `watch` before may still skip the counter, and
/// without the barrier its store may be missed by the check before a park.
const UNFENCED_PARK: Duration = Duration::from_millis(1);

impl EngineShared {
    /// Whether the engine's doorbell check reads its queues' doorbell values (it watches
    /// them, or did until a barrier failed).
    #[inline]
    fn reads_doorbells(&self) -> bool {
        self.watch.load(Ordering::Relaxed) || self.unfenced.load(Ordering::Relaxed)
    }
}

/// What the engine compares to notice doorbells: its counter, plus the sum of its queues'
/// doorbell values when it watches them (each only grows while its queue is listed). The
/// values are read afresh where [`Slot::sampled_at`] `now` says so (every one with `now`
/// None: the idle spin and parks), the others as last read.
#[inline]
fn doorbell_state(me: &EngineShared, slots: &mut [Slot], watch: bool, now: Option<Instant>) -> u64 {
    let mut v = me.doorbells.load(Ordering::Acquire);
    if watch {
        for s in slots {
            if now.is_none_or(|t| s.sampled_at(t)) {
                s.cell_seen = s.exec.doorbell_raw();
            }
            v = v.wrapping_add(s.cell_seen);
        }
    }
    v
}

/// Parks the thread (until `deadline`, if any) unless a doorbell arrived since `seen_db`
/// (the engine's [`doorbell_state`] over `slots`).
#[allow(clippy::too_many_arguments)]
fn park(
    me: &EngineShared,
    mem: &mut MemCache,
    inner: &Inner,
    index: usize,
    seen_db: u64,
    deadline: Option<Instant>,
    slots: &mut [Slot],
) {
    if mem.tr.on {
        let t = inner.stamp();
        mem.tr.queue = None;
        mem.tr.push(
            t,
            t,
            TraceKind::Park {
                timed: deadline.is_some(),
            },
        );
        inner.trace.append(index, &mut mem.tr.buf);
    }
    let how = if deadline.is_some() {
        PARKED_TIMED
    } else {
        PARKED_IDLE
    };
    me.parked.store(how, Ordering::SeqCst);
    // Orders the store before the counter's re-read below (an Acquire load alone may pass
    // it on some targets): the counter side of the module docs' argument.
    std::sync::atomic::fence(Ordering::SeqCst);
    let reads = me.reads_doorbells();
    let mut deadline = deadline;
    if me.watch.load(Ordering::Relaxed) {
        use rustix::thread::{membarrier, MembarrierCommand};
        if membarrier(MembarrierCommand::PrivateExpedited).is_err() {
            me.unfenced.store(true, Ordering::SeqCst);
            me.watch.store(false, Ordering::SeqCst);
        }
    }
    if me.unfenced.load(Ordering::Relaxed) {
        let cap = Instant::now() + UNFENCED_PARK;
        deadline = Some(deadline.map_or(cap, |d| d.min(cap)));
    }
    if doorbell_state(me, slots, reads, None) == seen_db && !me.shutdown.load(Ordering::Acquire) {
        match deadline {
            Some(t) => std::thread::park_timeout(t.saturating_duration_since(Instant::now())),
            None => std::thread::park(),
        }
    }
    me.parked.store(0, Ordering::Relaxed);
    if mem.tr.on {
        let t = inner.stamp();
        mem.tr.push(t, t, TraceKind::Wake);
    }
}

fn engine_main(me: Arc<EngineShared>, inner: Arc<Inner>, index: usize) {
    let mut mem = MemCache::new(inner.clone());
    mem.tr.engine = EngineId::from_index(index);
    let mut slots: Vec<Slot> = Vec::new();
    let mut order: Vec<usize> = Vec::new();
    let mut seen_gen = u64::MAX;
    let mut seen_tlb = inner.tlb_gen.load(Ordering::Acquire);
    let mut seen_db = me.doorbells.load(Ordering::Acquire);
    let mut rr: usize = 0;
    // KFDRT_EMU_CP_CPU: pinned, this engine has its CPU to itself, as a GPU's CP does.
    let pinned = super::pin::pin_engine_thread().is_some();
    // The idle spin window, adapted between IDLE_SPIN_MIN and IDLE_SPIN, or
    // IDLE_SPIN_APART on the CP (fixed at IDLE_SPIN when pinned: shrinking only helps a
    // submitter sharing this core).
    let mut idle_spin = IDLE_SPIN;
    let is_sdma = index > 0;
    // Interrupts raised by this thread hold back their sleeper wake-ups while it stays
    // busy: issued once WAKE_BATCH passed since the first one (checked after every
    // quantum run), and always before the thread yields, spins idle or parks (and when
    // `mem` drops).
    mem.batch_wakes = true;
    loop {
        if me.shutdown.load(Ordering::Acquire) {
            mem.wakes.flush();
            return;
        }
        // One relaxed load per round when tracing is off.
        mem.tr.on = inner.trace.enabled();
        if !mem.tr.buf.is_empty() {
            inner.trace.append(index, &mut mem.tr.buf);
        }
        let gen = me.list_gen.load(Ordering::Acquire);
        if gen != seen_gen {
            // `release_windows` bumps the list generation after a `flush_tlb` bumped the
            // memory-map generation, and waits for the acknowledgement below: every window
            // of the old map is let go first, so unmapped memory is released then, not at
            // a queue's next access (a check here, between packets, not on the access
            // path).
            let tlb = inner.tlb_gen.load(Ordering::Acquire);
            if tlb != seen_tlb {
                seen_tlb = tlb;
                mem.drop_stale();
                for s in &mut slots {
                    s.exec.release_windows();
                }
                crate::shader::drop_kept_port();
            }
            let list = me.queues.lock().unwrap_or_else(|e| e.into_inner()).clone();
            let mut old = std::mem::take(&mut slots);
            for q in list {
                if let Some(pos) = old.iter().position(|s| Arc::ptr_eq(s.exec.shared(), &q)) {
                    slots.push(old.swap_remove(pos));
                } else {
                    let exec = QueueExec::new(q, &mut mem, &inner, is_sdma);
                    slots.push(Slot {
                        exec,
                        traced_block: false,
                        spin_until: None,
                        next_poll: Instant::now(),
                        delay: Duration::ZERO,
                        idle_db: None,
                        sample_at: Instant::now(),
                        quiet: false,
                        cell_seen: 0,
                    });
                }
            }
            drop(old);
            seen_gen = gen;
            let mut a = me.ack.lock().unwrap_or_else(|e| e.into_inner());
            *a = gen;
            me.ack_cv.notify_all();
        }
        if me.paused.load(Ordering::Acquire) {
            mem.wakes.flush();
            let db = doorbell_state(&me, &mut slots, me.reads_doorbells(), None);
            park(&me, &mut mem, &inner, index, db, None, &mut slots);
            continue;
        }

        // Read once per round (`park` may switch the watch off; the engine reads the
        // doorbell values from then on all the same).
        let watch = me.reads_doorbells();
        let now = Instant::now();
        let db = doorbell_state(&me, &mut slots, watch, Some(now));
        let kicked = db != seen_db;
        seen_db = db;

        // Priority order, round-robin among equals.
        order.clear();
        let n = slots.len().max(1);
        let prio = |s: &Slot| s.exec.shared().priority.load(Ordering::Relaxed);
        let first = slots.first().map_or(0, prio);
        if slots.iter().all(|s| prio(s) == first) {
            // One priority (the common case): the sort below is the rotation by `rr`.
            let start = rr % n;
            order.extend((start..slots.len()).chain(0..start.min(slots.len())));
        } else {
            order.extend(0..slots.len());
            order.sort_by_key(|&i| {
                let p = slots.get(i).map_or(0, prio);
                (std::cmp::Reverse(p), (i + n - rr % n) % n)
            });
        }
        rr = rr.wrapping_add(1);

        // The end of an immediate re-poll window opened in this round (one addition per
        // round, not one per blocked run).
        let spin_end = now + SPIN;
        let mut progressed = false;
        let mut wake_at: Option<Instant>;
        // Sweeps over the queues in `order` while one makes progress: a queue whose
        // packet blocked on memory another queue just wrote (a barrier on a signal the
        // other queue completed) runs again in this pass, at once, instead of after the
        // round's bookkeeping (rotation, clock read, list/doorbell checks) or a yield. A
        // sweep ends the pass when nothing moved, a queue used its quantum (priorities
        // are served afresh), after MAX_SWEEPS, or when the API side changed the queue
        // list, paused the engine or shuts it down (it waits for an acknowledgement
        // between packets, given at the top of the loop).
        let mut sweeps = 0u32;
        'pass: loop {
            sweeps += 1;
            let mut moved = false;
            wake_at = None;
            // A doorbell re-polls every blocked queue once (the first sweep); later sweeps
            // follow each queue's poll time.
            let kicked = kicked && sweeps == 1;
            for &i in order.iter() {
                let Some(s) = slots.get_mut(i) else { continue };
                let sh = s.exec.shared();
                if sh.faulted.load(Ordering::Acquire) {
                    continue;
                }
                let pct = sh.percentage.load(Ordering::Relaxed).min(100);
                if pct == 0 {
                    continue;
                }
                if s.spin_until.is_some() && !kicked && s.next_poll > now {
                    wake_at = Some(wake_at.map_or(s.next_poll, |w| w.min(s.next_poll)));
                    continue;
                }
                let counter = me.doorbells.load(Ordering::Relaxed);
                if let Some(v) = s.idle_db {
                    // Found empty last time: skipped while no doorbell was seen since, on
                    // the first sweep too until its sample time.
                    let seen = counter.wrapping_add(if watch { s.cell_seen } else { 0 });
                    if seen == v && (sweeps > 1 || now < s.sample_at) {
                        continue;
                    }
                }
                // The counter, plus this queue's own doorbell when the engine watches them.
                // A quiet queue's as last read (re-read on every re-poll, it would pull the
                // line in each round); a stale value costs one more poll, never a doorbell.
                let db_before = counter.wrapping_add(if !watch {
                    0
                } else if s.quiet {
                    s.cell_seen
                } else {
                    s.cell_seen = s.exec.doorbell_raw();
                    s.cell_seen
                });
                let quantum = (BASE_QUANTUM * pct / 100).max(1);
                if mem.tr.on {
                    mem.tr.queue = Some((sh.id, s.exec.kind));
                }
                let out = s.exec.run(&mut mem, &inner, quantum);
                s.idle_db = (out.state == RunState::Idle && s.exec.kind == super::QueueKind::Aql)
                    .then_some(db_before);
                s.sample_at = now + DORMANT_SAMPLE;
                s.quiet = out.state == RunState::Blocked && s.exec.waits_in_packet();
                // A round runs up to MAX_SWEEPS sweeps of quanta: the batch bound is kept
                // per quantum, not per round.
                mem.wakes.flush_due();
                if out.executed > 0 {
                    progressed = true;
                    moved = true;
                }
                if mem.tr.on {
                    trace_run(&mut mem, &inner, s, out.executed, out.state);
                }
                match out.state {
                    RunState::Blocked => {
                        if out.executed > 0 || s.spin_until.is_none() {
                            s.spin_until = Some(spin_end);
                            s.delay = Duration::ZERO;
                        }
                        if !inner.repoll.load(Ordering::Relaxed) {
                            // Test hook (`set_blocked_repoll`): only a doorbell re-polls it.
                            s.next_poll = now + Duration::from_secs(3600);
                            continue;
                        }
                        // Within SPIN of blocking (an Instant compare, not a subtraction).
                        if s.spin_until.is_some_and(|t| now < t) {
                            s.next_poll = now;
                        } else if s.exec.dispatching() {
                            // A short dispatch ended within the spin; a long one kicks the
                            // CP when it ends: no backoff polling meanwhile.
                            s.next_poll = now + DISPATCH_POLL;
                        } else {
                            s.delay = if s.delay.is_zero() {
                                BACKOFF_MIN
                            } else {
                                (s.delay * 2).min(BACKOFF_MAX)
                            };
                            s.next_poll = now + s.delay;
                        }
                        wake_at = Some(wake_at.map_or(s.next_poll, |w| w.min(s.next_poll)));
                    }
                    RunState::Idle | RunState::Faulted => s.spin_until = None,
                    RunState::Budget => {
                        s.spin_until = None;
                        // Serve higher priorities again before lower ones.
                        break 'pass;
                    }
                }
            }
            if !moved
                || sweeps >= MAX_SWEEPS
                || me.list_gen.load(Ordering::Relaxed) != seen_gen
                || me.paused.load(Ordering::Relaxed)
                || me.shutdown.load(Ordering::Relaxed)
            {
                break;
            }
        }
        if progressed {
            continue;
        }
        // Not progressing: nothing holds the wake-ups back any longer.
        mem.wakes.flush();
        if doorbell_state(&me, &mut slots, watch, Some(now)) != seen_db
            || me.list_gen.load(Ordering::Acquire) != seen_gen
        {
            continue;
        }
        match wake_at {
            Some(t) => {
                let now = Instant::now();
                if t <= now {
                    std::thread::yield_now();
                } else {
                    park(&me, &mut mem, &inner, index, seen_db, Some(t), &mut slots);
                }
            }
            None => {
                // Idle: poll the doorbell counter for IDLE_SPIN before parking. No
                // `yield_now` in the loop: on a loaded host a yield gives the core away
                // for whole time slices (milliseconds), the opposite of the point.
                let t0 = Instant::now();
                let mut woke = false;
                'spin: while t0.elapsed() < idle_spin {
                    for _ in 0..64 {
                        if doorbell_state(&me, &mut slots, watch, None) != seen_db
                            || me.list_gen.load(Ordering::Relaxed) != seen_gen
                            || me.shutdown.load(Ordering::Relaxed)
                        {
                            woke = true;
                            break 'spin;
                        }
                        std::hint::spin_loop();
                    }
                }
                if woke {
                    idle_spin = idle_spin_after_catch(idle_spin);
                } else {
                    let parked = Instant::now();
                    me.kicker_cpu.store(-1, Ordering::Relaxed);
                    park(&me, &mut mem, &inner, index, seen_db, None, &mut slots);
                    let slept = parked.elapsed();
                    if !pinned {
                        let w = Waker {
                            cpu: me.kicker_cpu.load(Ordering::Relaxed),
                            woke_on: super::pin::current_cpu(),
                            apart_allowed: !is_sdma,
                        };
                        idle_spin = idle_spin_after_wake(idle_spin, slept, w);
                        if !is_sdma {
                            super::pin::step_aside(w.cpu, w.woke_on);
                        }
                    }
                }
            }
        }
    }
}

/// Who ended an idle park, for [`idle_spin_after_wake`].
#[derive(Clone, Copy)]
struct Waker {
    /// The CPU the doorbell was rung from (-1: unknown, or not a doorbell).
    cpu: i32,
    /// The CPU the engine woke on (-1: unknown).
    woke_on: i32,
    /// Whether this engine may take [`IDLE_SPIN_APART`] (the CP, not an SDMA engine).
    apart_allowed: bool,
}

/// The idle spin window after a spin that caught a doorbell: double back towards
/// [`IDLE_SPIN`]; a longer window ([`IDLE_SPIN_APART`]) is kept, it just did its job.
fn idle_spin_after_catch(idle_spin: Duration) -> Duration {
    idle_spin.max((idle_spin * 2).min(IDLE_SPIN))
}

/// The idle spin window after an untimed park that ended `slept` later.
///
/// Longer than [`IDLE_SPIN_APART`]: the submitter went quiet; a window above
/// [`IDLE_SPIN`] goes back to it, a shorter one stays. Else, a doorbell from another CPU
/// than the one the CP woke on: the spin cost the submitter nothing and the park cost it a
/// cross-CPU wake-up (5-15 us on a 2-vCPU guest, against ~60 ns for a launch the spin
/// catches), so spin [`IDLE_SPIN_APART`]. Same CPU (or unknown, or an SDMA engine), within
/// [`IDLE_SPIN`]: the spin ran out just before the doorbell, typically because the
/// submitter shares this core and could not run while the engine spun, so spin less (a
/// sleeping engine is woken with priority; a spinning one holds the core the submitter
/// needs). Halving on separate CPUs too kept the window at its minimum on an idle
/// two-CPU machine and made every batch of launches pay that wake-up
/// (bench-results/2026-11-24-s9-launch-row.txt).
fn idle_spin_after_wake(idle_spin: Duration, slept: Duration, w: Waker) -> Duration {
    if slept >= IDLE_SPIN_APART {
        idle_spin.min(IDLE_SPIN)
    } else if w.apart_allowed && w.cpu >= 0 && w.woke_on >= 0 && w.cpu != w.woke_on {
        IDLE_SPIN_APART
    } else if slept < IDLE_SPIN {
        (idle_spin / 2).max(IDLE_SPIN_MIN)
    } else {
        idle_spin
    }
}

/// Trace events of one `run` of a queue: a fault, a queue blocking, or a blocked queue
/// moving again.
fn trace_run(mem: &mut MemCache, inner: &Inner, s: &mut Slot, executed: u32, state: RunState) {
    let t = inner.stamp();
    if s.traced_block && executed > 0 {
        s.traced_block = false;
        mem.tr.push(t, t, TraceKind::Unblock);
    }
    match state {
        RunState::Blocked if !s.traced_block => {
            s.traced_block = true;
            mem.tr.push(t, t, TraceKind::Block);
        }
        RunState::Faulted => {
            if let QueueStatus::Faulted(f) = s.exec.shared().status() {
                mem.tr.push(t, t, TraceKind::Fault { reason: f.reason });
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doorbells_of_blocked_and_idle_queues_are_read_from_their_sample_time() {
        let t = Instant::now();
        let later = t + DORMANT_SAMPLE;
        // Running (neither quiet nor idle): every round.
        assert!(reads_doorbell(false, false, t, later));
        // Blocked inside a packet, or idle: from the sample time on.
        assert!(!reads_doorbell(true, false, t, later));
        assert!(reads_doorbell(true, false, later, later));
        assert!(!reads_doorbell(false, true, t, later));
        assert!(reads_doorbell(false, true, later, later));
    }

    fn cp(cpu: i32, woke_on: i32) -> Waker {
        Waker {
            cpu,
            woke_on,
            apart_allowed: true,
        }
    }

    #[test]
    fn idle_window_shrinks_only_when_the_doorbell_came_from_the_engines_cpu() {
        let w = Duration::from_micros(8);
        let soon = Duration::from_micros(3);
        let later = Duration::from_micros(50);
        let quiet = IDLE_SPIN_APART + Duration::from_micros(1);
        let after = idle_spin_after_wake;
        // Shared CPU, woken soon: halve, down to the minimum.
        assert_eq!(after(w, soon, cp(1, 1)), Duration::from_micros(4));
        assert_eq!(after(IDLE_SPIN_MIN, soon, cp(0, 0)), IDLE_SPIN_MIN);
        // Shared CPU, woken after IDLE_SPIN: unchanged.
        assert_eq!(after(w, later, cp(1, 1)), w);
        // Unknown on either side: the shared rule.
        assert_eq!(after(w, soon, cp(-1, 1)), Duration::from_micros(4));
        assert_eq!(after(w, soon, cp(1, -1)), Duration::from_micros(4));
        // Separate CPUs: the long window, from any width, soon or later.
        assert_eq!(after(IDLE_SPIN_MIN, soon, cp(0, 1)), IDLE_SPIN_APART);
        assert_eq!(after(w, later, cp(1, 0)), IDLE_SPIN_APART);
        // ...but not on an SDMA engine: the shared rule.
        let sdma = Waker {
            apart_allowed: false,
            ..cp(0, 1)
        };
        assert_eq!(after(w, soon, sdma), Duration::from_micros(4));
        // A park longer than IDLE_SPIN_APART: the long window decays to IDLE_SPIN, a
        // short one stays, whoever rang.
        assert_eq!(after(IDLE_SPIN_APART, quiet, cp(0, 1)), IDLE_SPIN);
        assert_eq!(after(w, quiet, cp(0, 1)), w);
        assert_eq!(after(w, quiet, cp(1, 1)), w);
    }

    #[test]
    fn a_caught_doorbell_grows_a_short_window_and_keeps_a_long_one() {
        assert_eq!(idle_spin_after_catch(IDLE_SPIN_MIN), IDLE_SPIN_MIN * 2);
        assert_eq!(idle_spin_after_catch(Duration::from_micros(16)), IDLE_SPIN);
        assert_eq!(idle_spin_after_catch(IDLE_SPIN), IDLE_SPIN);
        assert_eq!(idle_spin_after_catch(IDLE_SPIN_APART), IDLE_SPIN_APART);
    }
}
