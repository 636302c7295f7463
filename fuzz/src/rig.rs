//! One emulated GPU over heap memory with a single queue, driven segment by segment.
//!
//! Memory map (all mapped for the GPU, all read-write):
//!
//! | region | VA | size | use |
//! | --- | --- | --- | --- |
//! | ring | [`RING_VA`] | 16 KiB | the queue's ring (the ring size is chosen per input) |
//! | queue | [`QMEM_VA`] | 4 KiB | read / write pointers |
//! | data | [`DATA_VA`] | 64 KiB | packet sources and destinations |
//! | big | [`BIG_VA`] | 1 MiB | above 4 GiB: 64-bit addresses, long copies |
//! | ib | [`IB_VA`] | 64 KiB | indirect buffers |
//! | signals | [`SIG_VA`] | 4 KiB | 64 `amd_signal_t` slots (AQL) |
//!
//! Blocking packets cost no fixed delay: the rig watches the engine's trace, and when the
//! engine parks with a blocked queue it applies the input's pending host writes one at a
//! time (and rings the doorbell, which re-polls blocked queues at once). A queue still
//! blocked when no host write is left stays blocked (a wait that never completes is legal).
//! An engine that executes more than [`PACKET_BUDGET`] packets for one submission runs a
//! program that loops (e.g. an IB chain back to itself, which hangs a real CP as well): the
//! rig stops feeding it and removes the queue (which must still work). An engine that
//! neither parks nor gets through that many packets within [`TIME_BUDGET`] is a livelock
//! (busy without progress, e.g. spinning inside a packet or never parking while idle): the
//! rig panics.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kfd_emu::engine::{
    CountingInterrupts, EngineConfig, GpuEngines, QueueDesc, QueueKind, QueueStatus,
};
use kfd_emu::gpumem::{GpuMemory, HeapMemory, MemWindow};
use kfd_emu::trace::TraceKind;

/// GPU id of the rig.
pub const GPU: u32 = 0xF0F0;
/// Ring region.
pub const RING_VA: u64 = 0x10_0000;
/// Ring region size (the largest ring).
pub const RING_MAX: u64 = 16 << 10;
/// Queue pointers region.
pub const QMEM_VA: u64 = 0x20_0000;
/// Read pointer.
pub const RPTR_VA: u64 = QMEM_VA + 128;
/// Write pointer (AQL `write_dispatch_id` is at offset 56 of `amd_queue_t`).
pub const WPTR_VA: u64 = QMEM_VA + 56;
/// Data region.
pub const DATA_VA: u64 = 0x30_0000;
/// Data region size.
pub const DATA_LEN: u64 = 64 << 10;
/// Region above 4 GiB.
pub const BIG_VA: u64 = 0x1_0000_0000;
/// Its size.
pub const BIG_LEN: u64 = 1 << 20;
/// Indirect-buffer region.
pub const IB_VA: u64 = 0x40_0000;
/// Its size.
pub const IB_LEN: u64 = 64 << 10;
/// Signal region: 64 slots of 64 bytes.
pub const SIG_VA: u64 = 0x50_0000;
/// Number of signal slots.
pub const SIG_SLOTS: u64 = 64;
const DOORBELL_VA: u64 = 0x60_0000;
const QID: u32 = 1;

/// Packets one submission may execute before the rig stops it as a runaway program (an
/// indirect-buffer chain that loops runs forever on the CP too: that is the input's doing,
/// not an engine fault; the rig then checks the queue can still be removed).
pub const PACKET_BUDGET: u64 = 100_000;
/// Wall time one submission may take before the engine must park (generous: the host
/// is a loaded 2-core VM).
pub const TIME_BUDGET: Duration = Duration::from_secs(10);

/// Which engine a rig drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// An AQL queue on the CP.
    Aql,
    /// A PM4 compute queue on the CP.
    Pm4,
    /// An SDMA queue on SDMA engine 0.
    Sdma,
}

/// A host write applied while the queue is blocked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostWrite {
    /// Address.
    pub va: u64,
    /// Value.
    pub value: u64,
    /// 8-byte store (else 4).
    pub wide: bool,
}

/// How the engine settled after a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// No work left.
    Idle,
    /// A queue waits for memory to change.
    Blocked,
}

/// What a rig run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Packets the engine executed (ring and indirect buffers).
    pub packets: u64,
    /// Segments submitted.
    pub submits: u32,
    /// Host writes applied to unblock the queue.
    pub host_writes: u32,
    /// Event interrupts raised.
    pub interrupts: u64,
    /// The queue's fault, if it faulted.
    pub fault: Option<String>,
    /// Whether a submission ran past [`PACKET_BUDGET`] packets (a looping program).
    pub runaway: bool,
    /// Whether the queue was still blocked at the end.
    pub blocked: bool,
    /// Final read pointer.
    pub rptr: u64,
    /// Final write pointer.
    pub wptr: u64,
}

/// One GPU, its memory and one queue.
pub struct Rig {
    mem: Arc<HeapMemory>,
    engines: GpuEngines,
    irq: Arc<CountingInterrupts>,
    db: MemWindow,
    engine: Engine,
    /// Ring size in bytes.
    ring_size: u64,
    /// Write pointer in the queue's units (AQL packets, PM4 dwords, SDMA bytes).
    wptr: u64,
    /// Pending host writes, applied when the queue blocks.
    pub pending: VecDeque<HostWrite>,
    /// What happened so far.
    pub report: Report,
    /// How the engine settled last.
    last: Settled,
    /// False once a submission did not fit or the queue faulted: later ones are dropped.
    pub alive: bool,
}

impl Rig {
    /// A GPU of `family` / SDMA `version` with one queue of `engine` kind and a ring of
    /// `ring_size` bytes (a power of two, 256..=16 KiB). The data regions hold a pattern
    /// (so copies move non-zero bytes), the signals start at value 1.
    pub fn new(
        engine: Engine,
        family: pm4::GfxFamily,
        version: pm4::SdmaVersion,
        ring_size: u64,
    ) -> Rig {
        let ring_size = ring_size.clamp(256, RING_MAX).next_power_of_two();
        let mem = Arc::new(HeapMemory::new());
        mem.add_region(RING_VA, RING_MAX as usize);
        mem.add_region(QMEM_VA, 4096);
        let data = mem.add_region(DATA_VA, DATA_LEN as usize);
        mem.add_region(BIG_VA, BIG_LEN as usize);
        mem.add_region(IB_VA, IB_LEN as usize);
        let sig = mem.add_region(SIG_VA, (SIG_SLOTS * 64) as usize);
        let db = mem.add_region(DOORBELL_VA, 8);
        let pattern: Vec<u8> = (0..DATA_LEN).map(|i| (i * 7 + 3) as u8).collect();
        let _ = data.write(DATA_VA, &pattern);
        for s in 0..SIG_SLOTS {
            let _ = sig.store_u64(SIG_VA + s * 64, 1); // kind: user signal
            let _ = sig.store_u64(SIG_VA + s * 64 + 8, 1); // value
        }
        if engine == Engine::Aql {
            let ring = Self::window(&mem, RING_VA);
            for slot in 0..RING_MAX / 64 {
                let _ = ring.store_u32(RING_VA + slot * 64, pm4::aql::packet_type::INVALID as u32);
            }
        }
        let irq = Arc::new(CountingInterrupts::default());
        let cfg = EngineConfig {
            gpu_id: GPU,
            family,
            sdma_version: version,
            num_sdma_engines: 1,
            clock_hz: 0,
            // No shader model: a kernel dispatch faults at once (the shader core needs a
            // target of its own to fuzz; arbitrary code may loop for ever).
            gfx_target_version: 0,
            num_xcc: 1,
            sramecc: false,
        };
        let engines = GpuEngines::new(cfg, mem.clone(), irq.clone());
        engines.trace().set_enabled(true);
        engines.add_queue(QueueDesc {
            queue_id: QID,
            gpu_id: GPU,
            kind: match engine {
                Engine::Aql => QueueKind::Aql,
                Engine::Pm4 => QueueKind::Pm4,
                Engine::Sdma => QueueKind::Sdma { engine: 0 },
            },
            ring_va: RING_VA,
            ring_size: ring_size as u32,
            rptr_va: RPTR_VA,
            wptr_va: WPTR_VA,
            doorbell: db.clone(),
            priority: 7,
            percentage: 100,
            // An EOP buffer, so end-of-pipe RELEASE_MEM runs instead of faulting at once.
            eop_va: DATA_VA,
            ctx_save_va: 0,
        });
        Rig {
            mem,
            engines,
            irq,
            db,
            engine,
            ring_size,
            wptr: 0,
            pending: VecDeque::new(),
            report: Report::default(),
            alive: true,
            last: Settled::Idle,
        }
    }

    fn window(mem: &HeapMemory, va: u64) -> MemWindow {
        match mem.resolve(GPU, va, 1) {
            Ok(w) => w,
            Err(f) => panic!("rig memory not mapped: {f}"),
        }
    }

    /// Stores into rig memory (ignored when `va` is not mapped).
    pub fn poke(&self, w: HostWrite) {
        let len = if w.wide { 8 } else { 4 };
        if let Ok(win) = self.mem.resolve(GPU, w.va, len) {
            let _ = if w.wide {
                win.store_u64(w.va, w.value)
            } else {
                win.store_u32(w.va, w.value as u32)
            };
        }
    }

    /// Writes bytes into rig memory (ignored when not mapped).
    pub fn write(&self, va: u64, bytes: &[u8]) {
        if let Ok(win) = self.mem.resolve(GPU, va, bytes.len() as u64) {
            let _ = win.write(va, bytes);
        }
    }

    fn rptr(&self) -> u64 {
        Self::window(&self.mem, QMEM_VA)
            .load_u64(RPTR_VA)
            .unwrap_or(0)
    }

    fn fault(&self) -> Option<String> {
        match self.engines.queue_status(QID) {
            Some(QueueStatus::Faulted(f)) => Some(f.reason),
            _ => None,
        }
    }

    /// Submits one segment: PM4/SDMA ring dwords, or AQL packets (16 dwords each, header
    /// first in each). Waits until the engine settles, resolving blocks with pending host
    /// writes. Returns false (and stops the rig) when the segment does not fit the ring
    /// space the engine left free, or the queue faulted.
    pub fn submit(&mut self, words: &[u32]) -> bool {
        if !self.alive || words.is_empty() {
            return self.alive;
        }
        let (units, unit_bytes) = match self.engine {
            Engine::Aql => ((words.len() / 16) as u64, 64u64),
            Engine::Pm4 => (words.len() as u64, 4),
            Engine::Sdma => (words.len() as u64 * 4, 1),
        };
        let cap = match self.engine {
            Engine::Aql => self.ring_size / 64,
            Engine::Pm4 => self.ring_size / 4,
            Engine::Sdma => self.ring_size,
        };
        let used = self.wptr.wrapping_sub(self.rptr());
        if units == 0 || used.saturating_add(units) > cap {
            self.alive = false;
            return false;
        }
        let ring = Self::window(&self.mem, RING_VA);
        match self.engine {
            Engine::Aql => {
                for (i, pkt) in words.chunks_exact(16).enumerate() {
                    let slot = (self.wptr + i as u64) % cap;
                    let base = RING_VA + slot * 64;
                    for (j, w) in pkt.iter().enumerate().skip(1) {
                        let _ = ring.store_u32(base + j as u64 * 4, *w);
                    }
                    let _ = ring.store_u32(base, pkt[0]);
                }
            }
            Engine::Pm4 | Engine::Sdma => {
                let ring_dw = self.ring_size / 4;
                let first_dw = self.wptr * unit_bytes / 4;
                for (i, w) in words.iter().enumerate() {
                    let pos = (first_dw + i as u64) % ring_dw;
                    let _ = ring.store_u32(RING_VA + pos * 4, *w);
                }
            }
        }
        self.wptr += units;
        let qmem = Self::window(&self.mem, QMEM_VA);
        let _ = qmem.store_u64(WPTR_VA, self.wptr);
        let db_value = match self.engine {
            Engine::Aql => self.wptr - 1,
            _ => self.wptr,
        };
        let _ = self.db.store_u64(self.db.va(), db_value);
        self.report.submits += 1;
        self.kick_and_settle();
        self.alive
    }

    /// Rings the doorbell and waits until the engine parks; while it parks blocked and
    /// host writes are pending, applies one and rings again.
    fn kick_and_settle(&mut self) {
        loop {
            let settled = self.ring_and_wait();
            if self.fault().is_some() || !self.alive {
                self.alive = false;
                return;
            }
            match settled {
                Settled::Idle => return,
                Settled::Blocked => match self.pending.pop_front() {
                    Some(w) => {
                        self.poke(w);
                        self.report.host_writes += 1;
                    }
                    None => return,
                },
            }
        }
    }

    /// Rings the doorbell, then watches the trace until the engine parks after it.
    /// Panics when the engine keeps running past the budgets (a livelock).
    fn ring_and_wait(&mut self) -> Settled {
        // Drop what was recorded before this doorbell.
        let _ = self.engines.trace().take();
        let t_db = kfd_emu::trace::host_ns();
        self.engines.doorbell(QID);
        // The doorbell's value is unchanged after a host write: a CP watching doorbell
        // values would not re-poll the blocked queue for it; the host's write is a re-poll
        // request (`Backend::host_signal_written` in the emulated KFD).
        self.engines.repoll(QID);
        let start = Instant::now();
        let mut packets = 0u64;
        let mut spins = 0u32;
        // The last Park stamped after the doorbell and not followed by a Wake. Events reach
        // the sink at each scheduling round and at each park, so a Wake that follows a Park
        // shows up at the next poll: a Park is trusted once a second poll saw nothing after.
        let mut parked: Option<bool> = None;
        loop {
            let mut saw = false;
            for e in self.engines.trace().take() {
                saw = true;
                match e.kind {
                    TraceKind::Packet { .. } => packets += 1,
                    TraceKind::Park { timed } if e.start_ns >= t_db => parked = Some(timed),
                    TraceKind::Park { .. } => {}
                    _ => parked = None,
                }
            }
            if let (Some(timed), false) = (parked, saw) {
                self.report.packets += packets;
                self.last = if timed {
                    Settled::Blocked
                } else {
                    Settled::Idle
                };
                return self.last;
            }
            if self.fault().is_some() {
                self.report.packets += packets;
                self.last = Settled::Idle;
                return self.last;
            }
            if packets > PACKET_BUDGET {
                self.report.packets += packets;
                self.report.runaway = true;
                self.alive = false;
                self.last = Settled::Idle;
                return self.last;
            }
            let elapsed = start.elapsed();
            assert!(
                elapsed <= TIME_BUDGET,
                "livelock: the {:?} engine is still busy after {packets} packets and {elapsed:?} \
                 of one submission (rptr {:#x}, wptr {:#x})",
                self.engine,
                self.rptr(),
                self.wptr
            );
            spins += 1;
            if spins < 20 {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(20));
            }
        }
    }

    /// Ends the run: checks the engine did not crash and no fault names an internal
    /// error, removes the queue and returns the report.
    pub fn finish(mut self) -> Report {
        assert!(
            !self.engines.engine_crashed(),
            "an emulated engine thread panicked"
        );
        let fault = self.fault();
        if let Some(f) = &fault {
            assert!(
                !f.contains("internal"),
                "the emulated engine reported an internal error: {f}"
            );
        }
        self.report.blocked = fault.is_none() && self.last == Settled::Blocked;
        self.report.fault = fault;
        self.report.rptr = self.rptr();
        self.report.wptr = self.wptr;
        self.engines.remove_queue(QID);
        self.report.interrupts = self.irq.events();
        self.report.clone()
    }
}
