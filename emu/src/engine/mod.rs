//! The emulated GPU's engines: one command-processor (CP) thread per GPU that schedules
//! its AQL and PM4 compute queues, and one thread per SDMA engine. They execute the
//! packets that `pm4` decodes, from ring memory reached through [`GpuMemory`].
//!
//! INTERFACE CONTRACT (the KFD model in `crate::kfd` codes against this):
//! - [`GpuEngines::new`] creates the engines of one GPU (threads start lazily and sleep
//!   when idle).
//! - [`GpuEngines::add_queue`] after the KFD model validated CREATE_QUEUE;
//!   [`GpuEngines::remove_queue`] returns only when no engine touches the queue any more.
//! - [`GpuEngines::doorbell`] is called from `Backend::doorbell_written` (and may be
//!   called spuriously); engines also read the doorbell value from [`QueueDesc::doorbell`].
//! - Engines report interrupts and faults through [`Interrupts`]. The callbacks run on an
//!   engine thread: they must not block on the engines (calling [`GpuEngines`] methods,
//!   including `remove_queue`, from a callback is allowed and does not deadlock).
//! - [`GpuEngines::flush_tlb`] must be called after a GPU mapping is removed (unmap, free,
//!   SVM change): engines cache resolved [`MemWindow`]s, as the GPU caches translations.
//! - [`GpuEngines::pause`] / [`GpuEngines::resume`] stop and restart all scheduling
//!   (queue eviction, as KFD's `evict_process_queues` / `restore_process_queues`).
//!
//! # Model
//!
//! * **Threads.** One CP thread (all AQL and PM4 queues of the GPU) and one thread per SDMA
//!   engine (its SDMA queues), each started when its first queue is added. An engine whose
//!   queues are all idle keeps polling its doorbell counter for up to [`IDLE_SPIN`] (so
//!   back-to-back submissions never pay a futex wake-up), then parks its thread until a
//!   doorbell: an idle device uses no CPU after that window. The window halves (to 1 us)
//!   while each park is followed at once by a doorbell rung from the engine's own CPU (the
//!   submitter shares the engine's core and could not run during the spin) and doubles
//!   back when a spin catches one; on the CP, a park ended within 100 us by a doorbell from
//!   another CPU sets it to 100 us (the spin costs that submitter nothing, a park costs it
//!   a cross-CPU wake-up), and a park longer than that brings it back to [`IDLE_SPIN`].
//! * **Doorbells** ([`GpuEngines::doorbell`]) are lock-free for queue ids below
//!   [`DOORBELL_TABLE`] (a fixed table indexed by queue id; larger ids take a locked
//!   lookup): they bump the engine's doorbell counter and unpark the thread only when it is
//!   parked (a "parked" flag the engine sets before parking and re-checks the counter
//!   after; both sides use sequentially consistent operations, so a doorbell is never lost).
//! * **Scheduling** (see `sched.rs`): each round visits the active queues in descending KFD
//!   priority (0..=15), round-robin among equal priorities. A queue runs for a quantum of
//!   `256 * percentage / 100` packets (at least 1); when it used its whole quantum the round
//!   restarts from the highest priority, so a runnable higher-priority queue is always
//!   served before a lower one (strict priority, as the CP's HQD arbitration). Within a
//!   round the queues are swept again while one progresses; an AQL queue found empty is
//!   left out of the later sweeps of that round until a doorbell. Percentage 0
//!   (or a zero ring size or address) means the queue is not scheduled.
//! * **Blocking packets** (WAIT_REG_MEM, barriers, SDMA POLL_REGMEM, a not yet published
//!   AQL slot) leave the packet unconsumed. The queue is re-polled immediately for ~50 us
//!   (yielding the core between polls), then with an exponential backoff from 20 us to
//!   1 ms; any doorbell on the engine re-polls every blocked queue at once.
//! * **Clock** ([`GpuEngines::gpu_clock`]): a counter at [`EngineConfig::clock_hz`]
//!   (100 MHz when 0, the rate of gfx9's "GPU clock counter" / SOC reference clock that
//!   RELEASE_MEM, COPY_DATA and SDMA TIMESTAMP report) counted from engine creation on
//!   the host's monotonic clock.
//! * **Pointers.** AQL: the engine owns `read_dispatch_id` (at [`QueueDesc::rptr_va`]) and
//!   processes slots while it is below `write_dispatch_id` (at [`QueueDesc::wptr_va`]) or
//!   the last doorbell value + 1. PM4 (dwords) and SDMA (bytes): the write pointer is the
//!   larger of the 64-bit doorbell value (what the MEC/SDMA latch as `*_RB_WPTR` from a
//!   doorbell write, once a doorbell was rung) and the 64-bit value at `wptr_va` (the
//!   firmware's "wptr poll" address on gfx9+). The engine writes the read pointer as a
//!   monotonically growing 64-bit count (ring offset = pointer modulo ring size).
//! * **Faults.** A bad packet or an access to memory not mapped for the GPU stops the queue
//!   ([`QueueStatus::Faulted`]) and calls [`Interrupts::queue_fault`]; nothing after it runs.
//!
//! The behaviours and their public sources are listed in `firmware-notes/cp-engine.md` and
//! `firmware-notes/sdma-engine.md`.

mod aql;
mod clock;
mod dispatch;
mod firmware;
mod fuzz;
mod memio;
pub(crate) mod pin;
mod pm4exec;
mod queue;
mod sched;
mod sdma;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, RwLock};

pub use fuzz::{fuzz_ring, fuzz_ring_report, CountingInterrupts, FuzzReport, FUZZ_DATA_VA};

use crate::gpumem::{Fault, GpuMemory, MemWindow};
pub(crate) use clock::GpuClock;
use memio::MemCache;
use sched::{EngineShared, QueueShared};

pub use pin::CP_CPU_ENV;
pub use sched::{DOORBELL_WATCH_ENV, IDLE_SPIN};

/// Queue ids below this have a slot in the lock-free doorbell table (KFD's queue ids are
/// below `MAX_QUEUES_PER_PROCESS` = 1024).
pub const DOORBELL_TABLE: usize = 1024;

/// One queue id's doorbell route: the engine (null = no queue) and whether a doorbell
/// was rung since the queue was added. The engine is named by the address of its
/// [`EngineShared`] in [`Inner::engines`] (a doorbell then needs no index and no bounds
/// check): those are created with the table and live as long as it (both in [`Inner`]).
pub(crate) struct DoorbellSlot {
    engine: AtomicPtr<EngineShared>,
    pub(crate) rung: AtomicBool,
    /// The engine can read the queue's doorbell value (its window holds an aligned
    /// qword): only then may a doorbell skip the engine's counter.
    watchable: AtomicBool,
}

/// What kind of ring a queue is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueKind {
    /// AQL (64-byte packets; rptr/wptr are `amd_queue_t` dispatch ids, in packets).
    Aql,
    /// PM4 compute (wptr/rptr in dwords).
    Pm4,
    /// SDMA on engine `engine` (wptr/rptr in bytes).
    Sdma {
        /// SDMA engine index.
        engine: u32,
    },
}

/// A hardware queue as the CP / SDMA firmware sees it (the MQD, in effect).
#[derive(Debug, Clone)]
pub struct QueueDesc {
    /// KFD queue id (process-wide unique).
    pub queue_id: u32,
    /// GPU the queue runs on.
    pub gpu_id: u32,
    /// Ring kind.
    pub kind: QueueKind,
    /// GPU VA of the ring.
    pub ring_va: u64,
    /// Ring size in bytes (power of two).
    pub ring_size: u32,
    /// GPU VA of the read pointer (the engine writes it).
    pub rptr_va: u64,
    /// GPU VA of the write pointer (the runtime writes it).
    pub wptr_va: u64,
    /// The queue's 64-bit doorbell slot in the emulator's doorbell page.
    pub doorbell: MemWindow,
    /// KFD priority 0..=15.
    pub priority: u32,
    /// Percentage 0..=100 (0 = the queue is not scheduled).
    pub percentage: u32,
    /// GPU VA of the compute queue's EOP buffer (0: created without one). The CP
    /// delivers end-of-pipe RELEASE_MEM events through it.
    pub eop_va: u64,
    /// GPU VA of the queue's context save area (0: none). Its header
    /// (`kfd_context_save_area_header`) names the error payload and event through which
    /// queue exceptions are reported.
    pub ctx_save_va: u64,
}

/// Why a queue stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFault {
    /// Queue that stopped.
    pub queue_id: u32,
    /// Byte offset in the ring of the packet that faulted.
    pub packet_offset: u64,
    /// The memory fault, when the cause was an access.
    pub fault: Option<Fault>,
    /// Human-readable cause ("unknown PM4 opcode 0x99", "ISA execution not supported ...").
    pub reason: String,
}

/// Scheduling state of a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QueueStatus {
    /// Runnable or idle.
    Active,
    /// Stopped by a fault; the runtime must destroy it.
    Faulted(QueueFault),
}

/// How engines raise interrupts to the emulated KFD.
pub trait Interrupts: Send + Sync + 'static {
    /// An end-of-pipe / trap interrupt with the packet's context id (for signal events
    /// the event id, or `None` when the packet carried none). The KFD model then checks
    /// the event page slots, as `kfd_signal_event_interrupt` does.
    fn event_interrupt(&self, gpu_id: u32, context_id: Option<u32>);
    /// A queue stopped on a fault (memory or hardware exception).
    fn queue_fault(&self, gpu_id: u32, fault: &QueueFault);
    /// A queue exception was written to the error payload named by the queue's context
    /// save area header; signal its error event `event_id` (KFD sets it by id).
    fn queue_error(&self, gpu_id: u32, event_id: u32) {
        self.event_interrupt(gpu_id, Some(event_id));
    }
    /// [`Self::event_interrupt`] raised by an engine thread that goes on executing: the
    /// event state changes now, but the wake-ups of host threads sleeping on it may be
    /// left in `wakes`, which the engine issues within [`WAKE_BATCH`] and always before
    /// it sleeps (as KFD wakes waiters from its interrupt work queue, after the CP moved
    /// on). The default wakes at once.
    fn event_interrupt_batched(
        &self,
        gpu_id: u32,
        context_id: Option<u32>,
        wakes: &mut PendingWakes,
    ) {
        let _ = wakes;
        self.event_interrupt(gpu_id, context_id);
    }
}

/// Longest time an engine thread that keeps executing holds back the wake-ups of host
/// threads its interrupts activated (see [`Interrupts::event_interrupt_batched`]).
pub const WAKE_BATCH: std::time::Duration = std::time::Duration::from_micros(20);

/// Wake-ups of sleeping WAIT_EVENTS callers an engine thread collected from its
/// interrupts, issued together (one futex wake per sleeper per batch instead of one per
/// completion while the engine stays busy).
#[derive(Debug, Default)]
pub struct PendingWakes {
    cvs: Vec<Arc<std::sync::Condvar>>,
    /// [`WAKE_BATCH`] after the oldest pending wake-up was pushed (`None` when none is
    /// pending): a deadline, so that the check per quantum is one clock read.
    due: Option<std::time::Instant>,
}

impl PendingWakes {
    /// Adds a sleeper's condition variable.
    pub(crate) fn push(&mut self, cv: Arc<std::sync::Condvar>) {
        if self.cvs.is_empty() {
            self.due = Some(std::time::Instant::now() + WAKE_BATCH);
        }
        self.cvs.push(cv);
    }

    /// Wakes every collected sleeper once [`WAKE_BATCH`] has passed since the oldest was
    /// pushed. Reads the clock only when a wake-up is pending.
    pub fn flush_due(&mut self) {
        if self.due.is_some_and(|t| std::time::Instant::now() >= t) {
            self.flush();
        }
    }

    /// Whether no wake-up is pending.
    pub fn is_empty(&self) -> bool {
        self.cvs.is_empty()
    }

    /// Wakes every collected sleeper.
    pub fn flush(&mut self) {
        self.due = None;
        for cv in self.cvs.drain(..) {
            cv.notify_all();
        }
    }
}

impl Drop for PendingWakes {
    /// An engine thread that ends (shutdown, or an emulator bug unwinding it) still wakes
    /// the sleepers its last interrupts activated.
    fn drop(&mut self) {
        self.flush();
    }
}

/// Static facts about the GPU the engines belong to.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The GPU.
    pub gpu_id: u32,
    /// Packet family.
    pub family: pm4::GfxFamily,
    /// SDMA packet version.
    pub sdma_version: pm4::SdmaVersion,
    /// Number of SDMA engines.
    pub num_sdma_engines: u32,
    /// GPU timestamp counter rate in Hz (documented per preset; 0 means 100 MHz).
    pub clock_hz: u64,
    /// XCCs in the partition (MI300X: 8); each executes the PM4 of an indirect buffer.
    /// 0 is read as 1.
    pub num_xcc: u32,
    /// KFD `gfx_target_version` (90010 = gfx90a, 90402 = gfx942; 0 = unknown): selects the
    /// shader core's instruction set. Kernel dispatches on a target without a shader model
    /// fault with [`ISA_NOT_SUPPORTED`].
    pub gfx_target_version: u32,
    /// SRAM ECC is enabled (topology capability `HSA_CAP_SRAM_EDCSUPPORTED`, the target
    /// ID's `sramecc+`): D16 loads then zero the unused half of their VGPR instead of
    /// keeping it (firmware-notes/isa-gfx9.md "D16 loads and SRAMECC").
    pub sramecc: bool,
}

#[cfg(test)]
impl EngineConfig {
    /// The configuration the engine's unit tests use: GPU 7, one SDMA engine of the
    /// first version, the default clock, no shader model.
    pub(crate) fn for_unit_test(family: pm4::GfxFamily, num_xcc: u32) -> EngineConfig {
        EngineConfig {
            gpu_id: 7,
            family,
            sdma_version: pm4::SdmaVersion::ALL[0],
            num_sdma_engines: 1,
            clock_hz: 0,
            num_xcc,
            gfx_target_version: 0,
            sramecc: false,
        }
    }
}

/// The reason a kernel dispatch faults its queue on a GPU without a shader model (the
/// shader core, `crate::shader`, runs gfx90a and gfx942; other targets fault with this).
pub const ISA_NOT_SUPPORTED: &str = "ISA execution not supported by the emulator";

/// The state every engine thread shares with the API side.
pub(crate) struct Inner {
    pub(crate) cfg: EngineConfig,
    pub(crate) mem: Arc<dyn GpuMemory>,
    pub(crate) irq: Arc<dyn Interrupts>,
    pub(crate) clock: GpuClock,
    /// Bumped by [`GpuEngines::flush_tlb`]; engines drop cached windows when it changes.
    pub(crate) tlb_gen: std::sync::atomic::AtomicU64,
    /// Engine 0 is the CP, engine 1 + i is SDMA engine i.
    pub(crate) engines: Vec<Arc<EngineShared>>,
    /// Doorbell routes by queue id (ids below [`DOORBELL_TABLE`]).
    pub(crate) doorbells: Box<[DoorbellSlot]>,
    /// Opt-in packet and event recording.
    pub(crate) trace: crate::trace::TraceSink,
    /// The shader core's decoded programs, by kernel entry address.
    pub(crate) programs: crate::shader::ProgramCache,
    /// Threads that run kernel dispatches off the CP thread.
    pub(crate) dispatches: dispatch::Pool,
    /// Worker threads per dispatch (0: the shader core's default, one per host core).
    pub(crate) shader_threads: std::sync::atomic::AtomicUsize,
    /// Blocked queues are re-polled on the engine's own timer (see
    /// [`GpuEngines::set_blocked_repoll`]).
    pub(crate) repoll: AtomicBool,
}

impl Inner {
    /// Now on the trace clocks: (host ns, GPU clock ticks).
    pub(crate) fn stamp(&self) -> (u64, u64) {
        (crate::trace::host_ns(), self.clock.now())
    }

    /// Raises an event interrupt from the engine thread that owns `mem` (recorded in the
    /// trace when tracing).
    ///
    /// Without tracing it only picks the delivery, each a tail call: no frame, no saved
    /// registers (the trace record, with its clock reads, is out of line).
    pub(crate) fn interrupt(&self, mem: &mut MemCache, context_id: Option<u32>) {
        if mem.tr.on {
            return self.interrupt_traced(mem, context_id);
        }
        self.deliver_interrupt(mem, context_id)
    }

    /// [`Inner::interrupt`] when tracing: recorded, then delivered.
    #[cold]
    #[inline(never)]
    fn interrupt_traced(&self, mem: &mut MemCache, context_id: Option<u32>) {
        let t = self.stamp();
        mem.tr
            .push(t, t, crate::trace::TraceKind::Interrupt { context_id });
        self.deliver_interrupt(mem, context_id)
    }

    /// Delivers an event interrupt to the emulated KFD: its wake-ups batched in `mem`
    /// when the engine batches them.
    #[inline(always)]
    fn deliver_interrupt(&self, mem: &mut MemCache, context_id: Option<u32>) {
        if mem.batch_wakes {
            self.irq
                .event_interrupt_batched(self.cfg.gpu_id, context_id, &mut mem.wakes);
        } else {
            self.irq.event_interrupt(self.cfg.gpu_id, context_id);
        }
    }
}

/// The engines of one emulated GPU.
pub struct GpuEngines {
    inner: Arc<Inner>,
    queues: RwLock<HashMap<u32, (Arc<QueueShared>, usize)>>,
}

impl std::fmt::Debug for GpuEngines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuEngines")
            .field("cfg", &self.inner.cfg)
            .finish_non_exhaustive()
    }
}

impl GpuEngines {
    /// Create the engines of one GPU.
    pub fn new(cfg: EngineConfig, mem: Arc<dyn GpuMemory>, irq: Arc<dyn Interrupts>) -> Self {
        let n = 1 + cfg.num_sdma_engines as usize;
        let engines = (0..n)
            .map(|i| {
                let name = if i == 0 {
                    format!("kfd-emu-cp-{:x}", cfg.gpu_id)
                } else {
                    format!("kfd-emu-sdma{}-{:x}", i - 1, cfg.gpu_id)
                };
                let e = EngineShared::new(name);
                // The CP watches its doorbells where the process can (sched.rs docs).
                if i == 0 {
                    e.watch
                        .store(sched::doorbell_watch_available(), Ordering::Relaxed);
                }
                Arc::new(e)
            })
            .collect();
        let clock = GpuClock::new(cfg.clock_hz);
        let doorbells = (0..DOORBELL_TABLE)
            .map(|_| DoorbellSlot {
                engine: AtomicPtr::new(std::ptr::null_mut()),
                rung: AtomicBool::new(false),
                watchable: AtomicBool::new(false),
            })
            .collect();
        GpuEngines {
            inner: Arc::new(Inner {
                cfg,
                mem,
                irq,
                clock,
                tlb_gen: Default::default(),
                engines,
                doorbells,
                trace: crate::trace::TraceSink::new(n),
                programs: crate::shader::ProgramCache::default(),
                dispatches: dispatch::Pool::default(),
                shader_threads: Default::default(),
                repoll: AtomicBool::new(true),
            }),
            queues: RwLock::new(HashMap::new()),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.cfg
    }

    fn engine_index(&self, kind: QueueKind) -> Option<usize> {
        match kind {
            QueueKind::Aql | QueueKind::Pm4 => Some(0),
            QueueKind::Sdma { engine } => {
                let i = 1 + engine as usize;
                (i < self.inner.engines.len()).then_some(i)
            }
        }
    }

    fn lookup(&self, queue_id: u32) -> Option<(Arc<QueueShared>, usize)> {
        let map = self.queues.read().unwrap_or_else(|e| e.into_inner());
        map.get(&queue_id).map(|(q, e)| (q.clone(), *e))
    }

    /// Start scheduling a queue. A queue on an SDMA engine the GPU does not have, or
    /// with an id already in use, is reported as faulted at once (the KFD model
    /// validates CREATE_QUEUE before, so this only happens on a model bug).
    pub fn add_queue(&self, desc: QueueDesc) {
        let id = desc.queue_id;
        let engine = self.engine_index(desc.kind);
        let watchable = queue::doorbell_cell(&desc.doorbell).is_some();
        let q = Arc::new(QueueShared::new(desc));
        let Some(ei) = engine else {
            q.set_fault(
                &self.inner,
                0,
                None,
                "queue on an SDMA engine this GPU does not have".into(),
            );
            let mut map = self.queues.write().unwrap_or_else(|e| e.into_inner());
            map.insert(id, (q, 0));
            return;
        };
        {
            let mut map = self.queues.write().unwrap_or_else(|e| e.into_inner());
            if map.contains_key(&id) {
                return;
            }
            map.insert(id, (q.clone(), ei));
        }
        let Some(eng) = self.inner.engines.get(ei) else {
            return;
        };
        if let Some(slot) = self.inner.doorbells.get(id as usize) {
            slot.rung.store(false, Ordering::SeqCst);
            slot.watchable.store(watchable, Ordering::Relaxed);
            slot.engine
                .store(Arc::as_ptr(eng).cast_mut(), Ordering::Release);
        }
        eng.add(q);
        eng.ensure_started(&self.inner, ei);
        eng.kick();
    }

    /// Stop scheduling a queue; returns when no engine touches it any more (also when
    /// the queue is blocked in a wait).
    pub fn remove_queue(&self, queue_id: u32) {
        let entry = {
            let mut map = self.queues.write().unwrap_or_else(|e| e.into_inner());
            map.remove(&queue_id)
        };
        let Some((_, ei)) = entry else { return };
        if let Some(slot) = self.inner.doorbells.get(queue_id as usize) {
            slot.engine.store(std::ptr::null_mut(), Ordering::Release);
        }
        if let Some(eng) = self.inner.engines.get(ei) {
            eng.remove(queue_id);
        }
        // A kernel the queue dispatched may still run on the shader core.
        self.inner.dispatches.wait_idle(Some(queue_id));
    }

    /// Change a queue's ring, priority or percentage (UPDATE_QUEUE). The read pointer is
    /// kept; a zero ring size or address, or percentage 0, deactivates the queue.
    pub fn update_queue(
        &self,
        queue_id: u32,
        ring_va: u64,
        ring_size: u32,
        priority: u32,
        percentage: u32,
    ) {
        let Some((q, ei)) = self.lookup(queue_id) else {
            return;
        };
        q.update(ring_va, ring_size, priority, percentage);
        if let Some(eng) = self.inner.engines.get(ei) {
            eng.kick();
        }
    }

    /// Restrict a queue to CUs (SET_CU_MASK); engines record it (no ISA runs).
    pub fn set_cu_mask(&self, queue_id: u32, mask: &[u32]) {
        if let Some((q, _)) = self.lookup(queue_id) {
            let mut m = q.cu_mask.lock().unwrap_or_else(|e| e.into_inner());
            m.clear();
            m.extend_from_slice(mask);
        }
    }

    /// The CU mask last set with [`GpuEngines::set_cu_mask`] (empty = all CUs).
    pub fn cu_mask(&self, queue_id: u32) -> Option<Vec<u32>> {
        self.lookup(queue_id)
            .map(|(q, _)| q.cu_mask.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// A doorbell was written for `queue_id` (its new value already stored in the
    /// queue's doorbell): wake its engine. Lock-free for ids below [`DOORBELL_TABLE`]: a
    /// queue's first doorbell marks it rung and bumps the engine's counter; later ones,
    /// on an engine that watches its doorbells, only read whether the engine is parked
    /// (no store, no read-modify-write), else bump the counter; an unpark only when the
    /// engine thread is parked. A watching engine notices a doorbell by its value: one
    /// that repeats the queue's current value re-polls nothing (use
    /// [`GpuEngines::repoll`] to have blocked queues polled again).
    #[inline]
    pub fn doorbell(&self, queue_id: u32) {
        if let Some(slot) = self.inner.doorbells.get(queue_id as usize) {
            let e = slot.engine.load(Ordering::Acquire);
            // SAFETY: a non-null route points at an engine of `inner.engines`, which lives
            // as long as the table (see `DoorbellSlot`).
            if let Some(eng) = unsafe { e.as_ref() } {
                if slot.rung.load(Ordering::Relaxed) && slot.watchable.load(Ordering::Relaxed) {
                    eng.kick_doorbell();
                } else {
                    slot.rung.store(true, Ordering::Release);
                    eng.kick();
                }
            }
            return;
        }
        self.doorbell_untabled(queue_id);
    }

    /// Wake `queue_id`'s engine to poll its queues again without a new doorbell value
    /// (the host wrote memory a blocked packet may wait on): always through the engine's
    /// counter, which it checks whether or not it watches doorbells.
    pub fn repoll(&self, queue_id: u32) {
        if let Some((_, ei)) = self.lookup(queue_id) {
            if let Some(eng) = self.inner.engines.get(ei) {
                eng.kick();
            }
        }
    }

    /// Whether the CP watches its queues' doorbell values, so that a doorbell costs the
    /// submitter no atomic read-modify-write (see the `sched` module: needs
    /// `membarrier(2)`; off with `KFDRT_EMU_DOORBELL_WATCH=0`).
    pub fn doorbell_watch(&self) -> bool {
        self.inner
            .engines
            .first()
            .is_some_and(|e| e.watch.load(Ordering::Relaxed))
    }

    /// Turn the CP's doorbell watch off (or back on where the process supports it) before
    /// the CP's first queue is added; returns whether it is on. Once the CP runs the call
    /// changes nothing (a submitter that read the old setting could otherwise ring
    /// unnoticed). For comparisons and tests.
    pub fn set_doorbell_watch(&self, on: bool) -> bool {
        let Some(e) = self.inner.engines.first() else {
            return false;
        };
        if !e.started() {
            e.watch
                .store(on && sched::doorbell_watch_available(), Ordering::SeqCst);
        }
        e.watch.load(Ordering::SeqCst)
    }

    /// How many times the CP's doorbell counter was bumped (queue list, pause and
    /// re-poll requests, first doorbells, and every doorbell when it does not watch
    /// them): introspection for tests and comparisons.
    pub fn doorbell_counter(&self) -> u64 {
        self.inner.engines.first().map_or(0, |e| e.doorbell_count())
    }

    /// [`GpuEngines::doorbell`] of a queue id past [`DOORBELL_TABLE`] (out of line: the
    /// table's path then needs no frame of its own).
    #[cold]
    #[inline(never)]
    fn doorbell_untabled(&self, queue_id: u32) {
        let map = self.queues.read().unwrap_or_else(|e| e.into_inner());
        if let Some((q, ei)) = map.get(&queue_id) {
            q.doorbell_rung.store(true, Ordering::Release);
            if let Some(eng) = self.inner.engines.get(*ei) {
                eng.kick();
            }
        }
    }

    /// The queue's scheduling state (None for an unknown queue).
    pub fn queue_status(&self, queue_id: u32) -> Option<QueueStatus> {
        self.lookup(queue_id).map(|(q, _)| q.status())
    }

    /// The GPU timestamp counter now.
    pub fn gpu_clock(&self) -> u64 {
        self.inner.clock.now()
    }

    /// The rate of [`GpuEngines::gpu_clock`] in Hz.
    pub fn gpu_clock_hz(&self) -> u64 {
        self.inner.clock.hz()
    }

    /// True when an engine thread of this GPU stopped on an internal error (an emulator
    /// bug; its queues were faulted with "internal error in the emulated engine").
    pub fn engine_crashed(&self) -> bool {
        self.inner
            .engines
            .iter()
            .any(|e| e.crashed.load(Ordering::Acquire))
    }

    /// Invalidate the engines' cached translations (call after unmapping GPU memory).
    /// Accesses that start after this returns resolve addresses again. The engines let
    /// go of the old windows lazily (at their next access, or [`Self::release_windows`]).
    pub fn flush_tlb(&self) {
        self.inner.tlb_gen.fetch_add(1, Ordering::AcqRel);
    }

    /// Returns when no engine thread holds a window translated before the last
    /// [`Self::flush_tlb`] (each lets go between packets and acknowledges, as for
    /// [`Self::remove_queue`]), so memory unmapped before it is no longer kept alive by an
    /// engine's cache or a queue's pinned windows. A round trip to every running engine:
    /// for a free that wants the memory back, not for every unmap. On an engine thread
    /// (an interrupt callback) it does not wait: the engines let go before their next
    /// packet.
    pub fn release_windows(&self) {
        let engines = &self.inner.engines;
        let gens: Vec<u64> = engines.iter().map(|e| e.request_ack()).collect();
        if engines.iter().any(|e| e.is_current()) {
            return;
        }
        for (e, gen) in engines.iter().zip(gens) {
            e.wait_ack(gen);
        }
    }

    /// Stop executing packets on every engine of the GPU (queue eviction). Returns when no
    /// engine is inside a packet any more. Doorbells are remembered.
    pub fn pause(&self) {
        for e in &self.inner.engines {
            e.set_paused(true);
        }
        // Running kernels finish first (the CP starts no new one while paused).
        self.inner.dispatches.wait_idle(None);
    }

    /// The GPU's trace recorder ([`crate::trace`]); off until enabled.
    pub fn trace(&self) -> &crate::trace::TraceSink {
        &self.inner.trace
    }

    /// Everything the engines recorded so far. Waits until every running engine is
    /// between packets, so packets whose effects the caller already observed are included.
    pub fn take_trace(&self) -> Vec<crate::trace::TraceEvent> {
        for e in &self.inner.engines {
            e.sync();
        }
        self.inner.trace.take()
    }

    /// Worker threads each kernel dispatch spreads its work-groups over, from the next
    /// dispatch on (0: one per host core, or `KFD_EMU_SHADER_THREADS`). For speed-up
    /// measurements (`kfdrt bench`).
    pub fn set_shader_threads(&self, n: usize) {
        self.inner.shader_threads.store(n, Ordering::Relaxed);
    }

    /// Whether blocked queues are re-polled on the engines' own timer (the default).
    /// A test hook: with `false`, a blocked queue is polled again only when a doorbell
    /// with a new value, a [`GpuEngines::repoll`] (`Backend::host_signal_written`) or a
    /// queue-list change reaches its engine, so a test can show that a
    /// wait resumed because the host notified the device, not because of the periodic
    /// re-poll. A wait whose condition nobody notifies then never resumes.
    pub fn set_blocked_repoll(&self, on: bool) {
        self.inner.repoll.store(on, Ordering::Release);
        for e in &self.inner.engines {
            e.kick();
        }
    }

    /// Whether a small loop-free kernel dispatch runs on the CP's own thread (the
    /// default; `engine::dispatch::Pool::start`). A test hook: with `false` every dispatch
    /// runs on a dispatch thread, so a test can compare both paths.
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use kfd_emu::engine::{EngineConfig, GpuEngines, Interrupts, QueueFault};
    /// use kfd_emu::gpumem::HeapMemory;
    /// use pm4::{GfxFamily, SdmaVersion};
    ///
    /// struct NoIrq;
    /// impl Interrupts for NoIrq {
    ///     fn event_interrupt(&self, _: u32, _: Option<u32>) {}
    ///     fn queue_fault(&self, _: u32, _: &QueueFault) {}
    /// }
    /// let cfg = EngineConfig {
    ///     gpu_id: 1,
    ///     family: GfxFamily::Gfx9,
    ///     sdma_version: SdmaVersion::V4,
    ///     num_sdma_engines: 1,
    ///     clock_hz: 0,
    ///     gfx_target_version: 90010,
    ///     num_xcc: 1,
    ///     sramecc: true,
    /// };
    /// let eng = GpuEngines::new(cfg, Arc::new(HeapMemory::new()), Arc::new(NoIrq));
    /// eng.set_inline_dispatch(false); // every dispatch on a dispatch thread
    /// assert_eq!(eng.inline_dispatches(), 0);
    /// ```
    pub fn set_inline_dispatch(&self, on: bool) {
        self.inner.dispatches.set_inline(on);
    }

    /// Kernel dispatches the CP ran on its own thread so far (see the example of
    /// [`GpuEngines::set_inline_dispatch`]; emu/tests/shader_inline.rs counts them per run).
    pub fn inline_dispatches(&self) -> u64 {
        self.inner.dispatches.inlined()
    }

    /// Undo [`GpuEngines::pause`].
    pub fn resume(&self) {
        for e in &self.inner.engines {
            e.set_paused(false);
        }
    }
}

impl Drop for GpuEngines {
    fn drop(&mut self) {
        for e in &self.inner.engines {
            e.shutdown();
        }
        self.inner.dispatches.shutdown();
    }
}
