//! Fuzz entry point: arbitrary bytes as ring contents for every queue kind.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{EngineConfig, GpuEngines, Interrupts, QueueDesc, QueueFault, QueueKind, QueueStatus};
use crate::gpumem::{HeapMemory, MemWindow};

const GPU: u32 = 0xF0F0;
const RING_BYTES: usize = 4096;
const AQL_RING: u64 = 0x10_0000;
const PM4_RING: u64 = 0x10_1000;
const SDMA_RING: u64 = 0x10_2000;
const QUEUE_MEM: u64 = 0x20_0000;
const AQL_WPTR: u64 = QUEUE_MEM + 56;
const AQL_RPTR: u64 = QUEUE_MEM + 128;
const PM4_RPTR: u64 = QUEUE_MEM + 0x400;
const PM4_WPTR: u64 = QUEUE_MEM + 0x408;
const SDMA_RPTR: u64 = QUEUE_MEM + 0x800;
const SDMA_WPTR: u64 = QUEUE_MEM + 0x808;
/// Mapped scratch memory (filled with the input too) that packets may address.
pub const FUZZ_DATA_VA: u64 = 0x30_0000;
const DATA_BYTES: usize = 64 * 1024;
const DOORBELLS: u64 = 0x40_0000;
/// How long one input may run.
const DEADLINE: Duration = Duration::from_millis(40);

/// Interrupts that are only counted (fuzz rigs: no KFD behind the engines).
#[derive(Debug, Default)]
pub struct CountingInterrupts {
    events: AtomicU64,
    faults: AtomicU64,
}

impl CountingInterrupts {
    /// Event interrupts raised so far.
    pub fn events(&self) -> u64 {
        self.events.load(Ordering::Relaxed)
    }

    /// Queue faults reported so far.
    pub fn faults(&self) -> u64 {
        self.faults.load(Ordering::Relaxed)
    }
}

impl Interrupts for CountingInterrupts {
    fn event_interrupt(&self, _gpu_id: u32, _context_id: Option<u32>) {
        self.events.fetch_add(1, Ordering::Relaxed);
    }
    fn queue_fault(&self, _gpu_id: u32, _fault: &QueueFault) {
        self.faults.fetch_add(1, Ordering::Relaxed);
    }
}

/// What one [`fuzz_ring_report`] run did, per queue (AQL, PM4, SDMA).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FuzzReport {
    /// Read pointer reached by each queue.
    pub rptr: [u64; 3],
    /// Write pointer submitted to each queue.
    pub wptr: [u64; 3],
    /// Whether each queue faulted.
    pub faulted: [bool; 3],
    /// Event interrupts raised.
    pub events: u64,
}

/// [`fuzz_ring_report`] without the report.
pub fn fuzz_ring(data: &[u8]) {
    let _ = fuzz_ring_report(data);
}

/// Writes `data` (after a selector byte that picks the GPU family and SDMA version) into
/// the rings of an AQL, a PM4 and an SDMA queue on a [`HeapMemory`] GPU, submits it all
/// and runs the engines until every queue is idle or faulted, or a ~40 ms deadline passes
/// (a packet may legitimately wait forever). Used by the proptest in
/// `tests/engines.rs` (the libFuzzer targets in `fuzz/` drive one engine each with typed
/// packet streams instead). Must never panic or hang.
pub fn fuzz_ring_report(data: &[u8]) -> FuzzReport {
    let (sel, body) = match data.split_first() {
        Some((s, b)) => (*s, b),
        None => (0, data),
    };
    let family = pm4::GfxFamily::ALL[(sel & 3) as usize];
    let sdma_version = pm4::SdmaVersion::ALL[((sel >> 2) & 3) as usize];
    let body = body.get(..RING_BYTES).unwrap_or(body);

    let mem = Arc::new(HeapMemory::new());
    let rings = mem.add_region(AQL_RING, 3 * RING_BYTES);
    let qmem = mem.add_region(QUEUE_MEM, 4096);
    let scratch = mem.add_region(FUZZ_DATA_VA, DATA_BYTES);
    let doorbells: Vec<MemWindow> = (0..3)
        .map(|i| mem.add_region(DOORBELLS + i * 4096, 8))
        .collect();

    let _ = scratch.write(FUZZ_DATA_VA, body);
    // AQL slots start INVALID; the input overwrites whole slots.
    for slot in 0..(RING_BYTES / 64) as u64 {
        let _ = rings.store_u32(AQL_RING + slot * 64, pm4::aql::packet_type::INVALID as u32);
    }
    let aql_packets = (body.len() / 64) as u64;
    let _ = rings.write(
        AQL_RING,
        body.get(..aql_packets as usize * 64).unwrap_or(&[]),
    );
    let _ = rings.write(PM4_RING, body);
    let _ = rings.write(SDMA_RING, body);
    let dwords = (body.len() / 4) as u64;

    let _ = qmem.store_u64(AQL_WPTR, aql_packets);
    let _ = qmem.store_u64(PM4_WPTR, dwords);
    let _ = qmem.store_u64(SDMA_WPTR, dwords * 4);
    let db_values = [aql_packets.saturating_sub(1), dwords, dwords * 4];

    let irq = Arc::new(CountingInterrupts::default());
    let cfg = EngineConfig {
        gpu_id: GPU,
        family,
        sdma_version,
        num_sdma_engines: 1,
        clock_hz: 0,
        num_xcc: 1,
        gfx_target_version: 0,
        sramecc: false,
    };
    let engines = GpuEngines::new(cfg, mem.clone(), irq.clone());
    let kinds = [
        (QueueKind::Aql, AQL_RING, AQL_RPTR, AQL_WPTR),
        (QueueKind::Pm4, PM4_RING, PM4_RPTR, PM4_WPTR),
        (
            QueueKind::Sdma { engine: 0 },
            SDMA_RING,
            SDMA_RPTR,
            SDMA_WPTR,
        ),
    ];
    for (i, ((kind, ring_va, rptr_va, wptr_va), db)) in
        kinds.iter().zip(doorbells.iter()).enumerate()
    {
        let _ = db.store_u64(db.va(), db_values.get(i).copied().unwrap_or(0));
        engines.add_queue(QueueDesc {
            queue_id: i as u32 + 1,
            gpu_id: GPU,
            kind: *kind,
            ring_va: *ring_va,
            ring_size: RING_BYTES as u32,
            rptr_va: *rptr_va,
            wptr_va: *wptr_va,
            doorbell: db.clone(),
            priority: 7,
            percentage: 100,
            eop_va: *ring_va,
            ctx_save_va: 0,
        });
        if i % 2 == 0 {
            engines.doorbell(i as u32 + 1);
        }
    }

    let start = Instant::now();
    let targets = [
        (AQL_RPTR, aql_packets),
        (PM4_RPTR, dwords),
        (SDMA_RPTR, dwords * 4),
    ];
    while start.elapsed() < DEADLINE {
        let done = targets.iter().enumerate().all(|(i, (rptr_va, target))| {
            let faulted = matches!(
                engines.queue_status(i as u32 + 1),
                Some(QueueStatus::Faulted(_))
            );
            faulted || qmem.load_u64(*rptr_va).is_ok_and(|r| r >= *target)
        });
        if done {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    // Surface an engine-thread panic as a panic of the caller (the fuzzer's crash).
    assert!(
        !engines.engine_crashed(),
        "an emulated engine thread panicked"
    );
    let mut report = FuzzReport {
        rptr: [0; 3],
        wptr: [0; 3],
        faulted: [false; 3],
        events: 0,
    };
    for (i, (rptr_va, target)) in targets.iter().enumerate() {
        let id = i as u32 + 1;
        if let (Some(r), Some(w), Some(f)) = (
            report.rptr.get_mut(i),
            report.wptr.get_mut(i),
            report.faulted.get_mut(i),
        ) {
            *f = matches!(engines.queue_status(id), Some(QueueStatus::Faulted(_)));
            engines.remove_queue(id);
            *r = qmem.load_u64(*rptr_va).unwrap_or(0);
            *w = *target;
        }
    }
    drop(engines);
    report.events = irq.events();
    report
}
