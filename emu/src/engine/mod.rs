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
//! - Engines report interrupts and faults through [`Interrupts`].

use std::sync::Arc;

use crate::gpumem::{Fault, GpuMemory, MemWindow};

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
    /// GPU timestamp counter rate in Hz (documented per preset).
    pub clock_hz: u64,
}

/// The engines of one emulated GPU.
pub struct GpuEngines {
    cfg: EngineConfig,
    _mem: Arc<dyn GpuMemory>,
    _irq: Arc<dyn Interrupts>,
}

impl GpuEngines {
    /// Create the engines of one GPU.
    pub fn new(cfg: EngineConfig, mem: Arc<dyn GpuMemory>, irq: Arc<dyn Interrupts>) -> Self {
        GpuEngines { cfg, _mem: mem, _irq: irq }
    }
    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// Start scheduling a queue.
    pub fn add_queue(&self, _desc: QueueDesc) {
        todo!("engine helper")
    }
    /// Stop scheduling a queue; returns when no engine touches it any more.
    pub fn remove_queue(&self, _queue_id: u32) {
        todo!("engine helper")
    }
    /// Change a queue's ring, priority or percentage (UPDATE_QUEUE).
    pub fn update_queue(&self, _queue_id: u32, _ring_va: u64, _ring_size: u32, _priority: u32, _percentage: u32) {
        todo!("engine helper")
    }
    /// Restrict a queue to CUs (SET_CU_MASK); engines record it (no ISA runs).
    pub fn set_cu_mask(&self, _queue_id: u32, _mask: &[u32]) {
        todo!("engine helper")
    }
    /// A doorbell was written for `queue_id`: wake its engine.
    pub fn doorbell(&self, _queue_id: u32) {
        todo!("engine helper")
    }
    /// The queue's scheduling state (None for an unknown queue).
    pub fn queue_status(&self, _queue_id: u32) -> Option<QueueStatus> {
        todo!("engine helper")
    }
    /// The GPU timestamp counter now.
    pub fn gpu_clock(&self) -> u64 {
        todo!("engine helper")
    }
}
