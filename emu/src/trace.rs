//! Opt-in recording of what the emulated engines execute: every packet (with its decoded
//! `pm4::disasm` line, start and end time on the host and GPU clocks) and every engine
//! event (wake on a doorbell, park, a queue blocking and unblocking on a wait, a fault, an
//! interrupt).
//!
//! Off by default. Each GPU's engines own a [`TraceSink`]; [`crate::EmuBackend::enable_trace`]
//! switches them on and [`crate::EmuBackend::take_trace`] collects what they recorded. When
//! tracing is off an engine pays one relaxed atomic load per scheduling round; when it is on,
//! each engine thread appends to its own buffer and moves it into the sink once per round
//! (one uncontended lock), so engines never contend with each other.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use crate::engine::QueueKind;

/// Nanoseconds on the host's monotonic clock since the first use of the trace clock in
/// this process (shared by all GPUs, so their events share one time base).
pub fn host_ns() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// Which engine of a GPU recorded an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EngineId {
    /// The command processor (all AQL and PM4 compute queues).
    Cp,
    /// SDMA engine `n`.
    Sdma(u32),
}

impl EngineId {
    pub(crate) fn from_index(index: usize) -> Self {
        match index {
            0 => EngineId::Cp,
            i => EngineId::Sdma(i as u32 - 1),
        }
    }
}

impl std::fmt::Display for EngineId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineId::Cp => write!(f, "CP"),
            EngineId::Sdma(n) => write!(f, "SDMA{n}"),
        }
    }
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceKind {
    /// A packet executed (from its first fetch, including time blocked on its condition,
    /// to its completion). `offset` is the byte offset in the ring (AQL, PM4, SDMA rings)
    /// or in the indirect buffer at `ib_va` (`ib_depth` > 0).
    Packet {
        /// Byte offset in the ring, or in the indirect buffer.
        offset: u64,
        /// 0 for a ring packet, 1.. for packets of (nested) indirect buffers.
        ib_depth: u8,
        /// GPU VA of the indirect buffer (0 for ring packets).
        ib_va: u64,
        /// Packet name (`BARRIER_AND`, `WRITE_DATA`, `COPY_LINEAR`, ...).
        name: &'static str,
        /// The `pm4::disasm` line: `OFFSET NAME field=value ...`.
        disasm: String,
        /// The packet's dwords as the engine read them (an AQL slot's 16 dwords with
        /// the header it had before the engine reset it to INVALID), so a trace can be
        /// turned back into ring and IB bytes (`kfdrt trace --dump-rings`).
        words: Box<[u32]>,
    },
    /// The engine woke from a park (doorbell, configuration change or poll timer).
    Wake,
    /// The engine parked (no runnable work); `timed` when a blocked queue will be re-polled.
    Park {
        /// True when the park ends at a poll deadline.
        timed: bool,
    },
    /// A queue's next packet waits for memory to change.
    Block,
    /// A blocked queue made progress again.
    Unblock,
    /// The queue stopped on a fault.
    Fault {
        /// The fault's reason.
        reason: String,
    },
    /// The packet being executed raised an interrupt (context id, e.g. an event id).
    Interrupt {
        /// Interrupt context id.
        context_id: Option<u32>,
    },
    /// A kernel dispatch ran on the shader core, from the CP handing it over to the CP
    /// seeing it finish (recorded on the CP's own track: `queue` is `None`, the
    /// dispatching queue is `queue_id`).
    Dispatch {
        /// The queue whose packet (AQL KERNEL_DISPATCH or PM4 DISPATCH_DIRECT) it was.
        queue_id: u32,
        /// The packet kind: `"KERNEL_DISPATCH"` (AQL) or `"DISPATCH_DIRECT"` (PM4).
        packet: &'static str,
        /// Address of the kernel's first instruction.
        entry: u64,
        /// Work-groups run.
        workgroups: u64,
        /// Waves run.
        waves: u64,
        /// Instructions executed (per wave, summed).
        instructions: u64,
        /// Instructions times active lanes, summed.
        lane_instructions: u64,
        /// The fault that stopped it, if any.
        fault: Option<String>,
    },
}

/// One recorded event. Instant events have `start_ns == end_ns`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceEvent {
    /// The GPU.
    pub gpu_id: u32,
    /// The engine that recorded it.
    pub engine: EngineId,
    /// The queue (id and kind), when the event belongs to one.
    pub queue: Option<(u32, QueueKind)>,
    /// Start on [`host_ns`].
    pub start_ns: u64,
    /// End on [`host_ns`].
    pub end_ns: u64,
    /// Start on the GPU clock (`GpuEngines::gpu_clock` ticks).
    pub start_gpu: u64,
    /// End on the GPU clock.
    pub end_gpu: u64,
    /// What happened.
    pub kind: TraceKind,
}

/// The trace buffers of one GPU's engines.
#[derive(Debug)]
pub struct TraceSink {
    enabled: AtomicBool,
    bufs: Box<[Mutex<Vec<TraceEvent>>]>,
}

impl TraceSink {
    pub(crate) fn new(engines: usize) -> Self {
        TraceSink {
            enabled: AtomicBool::new(false),
            bufs: (0..engines).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// Start or stop recording (engines see the change at their next scheduling round).
    pub fn set_enabled(&self, on: bool) {
        if on {
            host_ns();
        }
        self.enabled.store(on, Ordering::Release);
    }

    /// Whether recording is on.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    pub(crate) fn append(&self, engine: usize, events: &mut Vec<TraceEvent>) {
        if let Some(b) = self.bufs.get(engine) {
            b.lock().unwrap_or_else(|e| e.into_inner()).append(events);
        } else {
            events.clear();
        }
    }

    /// Everything recorded so far (per engine in recording order), leaving the buffers empty.
    pub fn take(&self) -> Vec<TraceEvent> {
        let mut out = Vec::new();
        for b in self.bufs.iter() {
            out.append(&mut b.lock().unwrap_or_else(|e| e.into_inner()));
        }
        out
    }
}

/// The engine thread's recorder: its buffer and the context events are tagged with.
#[derive(Debug)]
pub(crate) struct Tracer {
    /// Copied from [`TraceSink::enabled`] once per scheduling round.
    pub(crate) on: bool,
    pub(crate) gpu_id: u32,
    pub(crate) engine: EngineId,
    /// The queue being run.
    pub(crate) queue: Option<(u32, QueueKind)>,
    pub(crate) buf: Vec<TraceEvent>,
}

impl Tracer {
    pub(crate) fn new(gpu_id: u32, engine: EngineId) -> Self {
        Tracer {
            on: false,
            gpu_id,
            engine,
            queue: None,
            buf: Vec::new(),
        }
    }

    /// Records an event of the current queue.
    pub(crate) fn push(&mut self, start: (u64, u64), end: (u64, u64), kind: TraceKind) {
        self.buf.push(TraceEvent {
            gpu_id: self.gpu_id,
            engine: self.engine,
            queue: self.queue,
            start_ns: start.0,
            end_ns: end.0,
            start_gpu: start.1,
            end_gpu: end.1,
            kind,
        });
    }
}
