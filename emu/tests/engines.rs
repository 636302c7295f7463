//! Engine tests: real packet bytes built with the `pm4` encoders, executed by the emulated
//! CP and SDMA engines on [`HeapMemory`]. Timeouts only turn hangs into failures.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kfd_emu::engine::{
    EngineConfig, GpuEngines, Interrupts, QueueDesc, QueueFault, QueueKind, QueueStatus,
    ISA_NOT_SUPPORTED,
};
use kfd_emu::gpumem::{FaultKind, HeapMemory, MemWindow};
use pm4::aql::{
    self, AqlPacket, Barrier, BarrierValue, KernelDispatch, PacketControl, SignalCondition,
    VendorPm4Ib,
};
use pm4::pkt3::{
    self, tc_op, AtomicMem, CachePolicy, CompareFn, CopyData, DataSel, DmaData, IndirectBuffer,
    IntSel, MemSpace, Nop, Pm4Packet, ReleaseMem, WaitOperation, WaitRegMem, WaitRegMem64,
    WriteData,
};
use pm4::sdma::{self, SdmaPacket};
use pm4::{GfxFamily, SdmaVersion};

const FAM: GfxFamily = GfxFamily::Gfx9;
const SDMA: SdmaVersion = SdmaVersion::V4;
const LONG: Duration = Duration::from_secs(20);

static NEXT_GPU: AtomicU32 = AtomicU32::new(0x1000);

/// A queue's EOP buffer: 64 bytes at the end of its pointer page (the engines only need
/// it to be present; end-of-pipe RELEASE_MEM faults on a queue without one).
fn eop_va(ptrs: &MemWindow) -> u64 {
    ptrs.va() + 192
}

#[derive(Default)]
struct Rec {
    events: Mutex<Vec<Option<u32>>>,
    faults: Mutex<Vec<QueueFault>>,
}

impl Interrupts for Rec {
    fn event_interrupt(&self, _gpu_id: u32, context_id: Option<u32>) {
        self.events.lock().unwrap().push(context_id);
    }
    fn queue_fault(&self, _gpu_id: u32, fault: &QueueFault) {
        self.faults.lock().unwrap().push(fault.clone());
    }
}

fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < LONG {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    f()
}

struct Gpu {
    id: u32,
    mem: Arc<HeapMemory>,
    irq: Arc<Rec>,
    eng: GpuEngines,
    next_va: Mutex<u64>,
}

impl Gpu {
    fn new() -> Gpu {
        Gpu::with(FAM, 1)
    }

    /// A GPU of `family` with `num_xcc` XCCs.
    fn with(family: GfxFamily, num_xcc: u32) -> Gpu {
        let id = NEXT_GPU.fetch_add(1, Ordering::Relaxed);
        let mem = Arc::new(HeapMemory::new());
        let irq = Arc::new(Rec::default());
        let cfg = EngineConfig {
            gpu_id: id,
            family,
            sdma_version: SDMA,
            num_sdma_engines: 2,
            clock_hz: 0,
            num_xcc,
            gfx_target_version: 0,
            sramecc: false,
        };
        let eng = GpuEngines::new(cfg, mem.clone(), irq.clone());
        Gpu {
            id,
            mem,
            irq,
            eng,
            next_va: Mutex::new(0x1_0000_0000),
        }
    }

    /// A new region (2 MiB aligned VAs with a hole between regions).
    fn alloc(&self, len: usize) -> MemWindow {
        let mut n = self.next_va.lock().unwrap();
        let va = *n;
        *n += (len as u64).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
        self.mem.add_region(va, len)
    }

    /// [`Gpu::alloc`] of a region starting 4 bytes past its 2 MiB-aligned address.
    fn alloc_misaligned(&self, len: usize) -> MemWindow {
        let mut n = self.next_va.lock().unwrap();
        let va = *n + 4;
        *n += (len as u64 + 4).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
        self.mem.add_region(va, len)
    }

    fn status(&self, q: &Queue) -> QueueStatus {
        self.eng.queue_status(q.id).unwrap()
    }

    fn faulted(&self, q: &Queue) -> QueueFault {
        assert!(
            wait_until(|| matches!(self.status(q), QueueStatus::Faulted(_))),
            "queue did not fault"
        );
        match self.status(q) {
            QueueStatus::Faulted(f) => f,
            QueueStatus::Active => unreachable!(),
        }
    }
}

struct Queue {
    id: u32,
    kind: QueueKind,
    ring: MemWindow,
    size: u64,
    ptrs: MemWindow,
    rptr_va: u64,
    wptr_va: u64,
    db: MemWindow,
    wptr: u64,
}

static NEXT_Q: AtomicU32 = AtomicU32::new(1);

impl Queue {
    fn new(gpu: &Gpu, kind: QueueKind, ring_size: usize, priority: u32, percentage: u32) -> Queue {
        Queue::create(gpu, kind, ring_size, priority, percentage, true)
    }

    fn create(
        gpu: &Gpu,
        kind: QueueKind,
        ring_size: usize,
        priority: u32,
        percentage: u32,
        with_eop: bool,
    ) -> Queue {
        Queue::with_doorbell(gpu, kind, ring_size, priority, percentage, with_eop, 8)
    }

    /// [`Queue::create`] with a doorbell window of `db_len` bytes at an 8-aligned address,
    /// or (`db_len` 4) of 4 bytes at an address 4 past one: a window the engine cannot
    /// read a 64-bit doorbell value from.
    fn with_doorbell(
        gpu: &Gpu,
        kind: QueueKind,
        ring_size: usize,
        priority: u32,
        percentage: u32,
        with_eop: bool,
        db_len: usize,
    ) -> Queue {
        let ring = gpu.alloc(ring_size);
        let ptrs = gpu.alloc(256);
        let db = if db_len < 8 {
            gpu.alloc_misaligned(db_len)
        } else {
            gpu.alloc(db_len)
        };
        let (rptr_va, wptr_va) = match kind {
            QueueKind::Aql => (ptrs.va() + 128, ptrs.va() + 56),
            _ => (ptrs.va(), ptrs.va() + 8),
        };
        if kind == QueueKind::Aql {
            for s in 0..ring_size as u64 / 64 {
                ring.store_u32(ring.va() + s * 64, aql::packet_type::INVALID as u32)
                    .unwrap();
            }
        }
        let id = NEXT_Q.fetch_add(1, Ordering::Relaxed);
        gpu.eng.add_queue(QueueDesc {
            queue_id: id,
            gpu_id: gpu.id,
            kind,
            ring_va: ring.va(),
            ring_size: ring_size as u32,
            rptr_va,
            wptr_va,
            doorbell: db.clone(),
            priority,
            percentage,
            eop_va: if with_eop { eop_va(&ptrs) } else { 0 },
            ctx_save_va: 0,
        });
        Queue {
            id,
            kind,
            ring,
            size: ring_size as u64,
            ptrs,
            rptr_va,
            wptr_va,
            db,
            wptr: 0,
        }
    }

    fn rptr(&self) -> u64 {
        self.ptrs.load_u64(self.rptr_va).unwrap()
    }

    fn ring_doorbell(&self, gpu: &Gpu, value: u64) {
        if self.db.va() % 8 == 0 {
            self.db.store_u64(self.db.va(), value).unwrap();
        } else {
            self.db.store_u32(self.db.va(), value as u32).unwrap();
        }
        gpu.eng.doorbell(self.id);
    }

    /// PM4 (dword pointers) or SDMA (byte pointers): writes `words` at the write pointer
    /// (wrapping), waiting for ring space, then publishes.
    fn submit(&mut self, gpu: &Gpu, words: &[u32]) {
        let unit = if self.kind == QueueKind::Pm4 { 1 } else { 4 };
        let ring_dw = self.size / 4;
        assert!((words.len() as u64) < ring_dw);
        assert!(wait_until(|| (self.wptr - self.rptr()) / unit
            + words.len() as u64
            <= ring_dw));
        let mut pos = (self.wptr / unit) % ring_dw;
        for &w in words {
            self.ring.store_u32(self.ring.va() + pos * 4, w).unwrap();
            pos = (pos + 1) % ring_dw;
        }
        self.wptr += words.len() as u64 * unit;
        self.ptrs.store_u64(self.wptr_va, self.wptr).unwrap();
        self.ring_doorbell(gpu, self.wptr);
    }

    /// SDMA: like `submit` but pads with NOPs so no packet straddles the ring end.
    fn submit_sdma(&mut self, gpu: &Gpu, pkt: &SdmaPacket<'_>) {
        let w = sdma_words(pkt);
        let ring_dw = self.size / 4;
        let pos = (self.wptr / 4) % ring_dw;
        if pos + w.len() as u64 > ring_dw {
            let pad = vec![0u32; (ring_dw - pos) as usize];
            self.submit(gpu, &pad);
        }
        self.submit(gpu, &w);
    }

    /// AQL: writes the packet body, then the header, bumps write_dispatch_id and rings.
    fn submit_aql(&mut self, gpu: &Gpu, pkt: &AqlPacket) {
        let slots = self.size / 64;
        assert!(wait_until(|| self.wptr - self.rptr() < slots));
        let va = self.ring.va() + (self.wptr % slots) * 64;
        let w = pkt.encode();
        for (i, d) in w.iter().enumerate().skip(1) {
            self.ring.store_u32(va + 4 * i as u64, *d).unwrap();
        }
        self.ptrs.store_u64(self.wptr_va, self.wptr + 1).unwrap();
        self.ring.store_u32(va, w[0]).unwrap();
        self.ring_doorbell(gpu, self.wptr);
        self.wptr += 1;
    }

    fn wait_idle(&self) {
        assert!(
            wait_until(|| self.rptr() == self.wptr),
            "queue {} did not drain",
            self.id
        );
    }
}

fn enc(p: Pm4Packet<'_>) -> Vec<u32> {
    let mut v = vec![0; p.dwords(FAM)];
    p.encode(FAM, &mut v).unwrap();
    v
}

fn sdma_words(p: &SdmaPacket<'_>) -> Vec<u32> {
    let mut v = vec![0; p.dwords(SDMA)];
    p.encode(SDMA, &mut v).unwrap();
    v
}

fn write_data(addr: u64, data: &[u32]) -> Vec<u32> {
    enc(Pm4Packet::WriteData(WriteData::memory(addr, data)))
}

fn release_mem(data_sel: DataSel, int_sel: IntSel, addr: u64, data: u64, ctx: u32) -> Vec<u32> {
    enc(Pm4Packet::ReleaseMem(
        ReleaseMem::end_of_pipe(data_sel, addr, data).with_interrupt(int_sel, ctx),
    ))
}

fn wait_mem(addr: u64, func: CompareFn, reference: u32) -> Vec<u32> {
    enc(Pm4Packet::WaitRegMem(WaitRegMem::memory(
        func,
        addr,
        reference,
        0xFFFF_FFFF,
        4,
    )))
}

fn copy_data(src_sel: u8, src: u64, dst: u64, wide: bool) -> Vec<u32> {
    enc(Pm4Packet::CopyData(CopyData::to_memory(
        src_sel, src, dst, wide,
    )))
}

fn atomic(op: u8, addr: u64, src: u64, cmp: u64) -> Vec<u32> {
    enc(Pm4Packet::AtomicMem(AtomicMem::single_pass(
        op, addr, src, cmp,
    )))
}

/// A 64-byte amd_signal_t with `value`, optionally with an event mailbox.
fn signal(win: &MemWindow, index: u64, value: i64, mailbox: Option<(u64, u32)>) -> u64 {
    let va = win.va() + index * 64;
    win.store_u64(va, 1).unwrap();
    win.store_u64(va + 8, value as u64).unwrap();
    let (mb, id) = mailbox.unwrap_or((0, 0));
    win.store_u64(va + 16, mb).unwrap();
    win.store_u32(va + 24, id).unwrap();
    va
}

fn sig_value(win: &MemWindow, sig: u64) -> i64 {
    win.load_u64(sig + 8).unwrap() as i64
}

fn barrier_and(deps: &[u64], completion: u64) -> AqlPacket {
    let mut d = [0u64; 5];
    d[..deps.len()].copy_from_slice(deps);
    AqlPacket::BarrierAnd(Barrier {
        control: PacketControl::SYSTEM_BARRIER,
        dep_signals: d,
        completion_signal: completion,
    })
}

// ---------------------------------------------------------------------------

#[test]
fn pm4_packets_execute_in_order() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 4096, 7, 100);
    let mut words = Vec::new();
    words.extend(write_data(d, &[1]));
    words.extend(copy_data(pkt3::copy_sel::MEMORY, d, d + 8, false)); // [8] = 1
    words.extend(write_data(d, &[2]));
    words.extend(copy_data(pkt3::copy_sel::MEMORY, d, d + 12, false)); // [12] = 2
    words.extend(enc(Pm4Packet::Nop(Nop { dwords: 1 })));
    words.extend(enc(Pm4Packet::Nop(Nop { dwords: 7 })));
    words.extend(write_data(d + 16, &[10, 11, 12, 13]));
    words.extend(atomic(tc_op::ADD_RTN_64, d + 32, 5, 0));
    words.extend(atomic(tc_op::ADD_RTN_64, d + 32, 7, 0));
    words.extend(copy_data(
        pkt3::copy_sel::ATOMIC_RETURN_DATA,
        0,
        d + 40,
        true,
    )); // = 5
    words.extend(atomic(tc_op::CMPSWAP_32, d + 48, 9, 0)); // 0 == 0 -> 9
    words.extend(atomic(tc_op::CMPSWAP_32, d + 48, 3, 1)); // 9 != 1 -> unchanged
    words.extend(copy_data(
        pkt3::copy_sel::IMMEDIATE_OR_DST_MEMORY,
        0xABCD,
        d + 56,
        false,
    ));
    words.extend(enc(Pm4Packet::DmaData(DmaData::fill(
        d + 256,
        0x5A5A_5A5A,
        64,
    ))));
    words.extend(enc(Pm4Packet::DmaData(DmaData::copy(d + 16, d + 512, 16))));
    words.extend(enc(Pm4Packet::AcquireMem(pkt3::AcquireMem::full_range(
        FAM, 0, 0, 10,
    ))));
    words.extend(write_data(d + 1024, &[0xD0E]));
    q.submit(&gpu, &words);
    q.wait_idle();
    let r = |o: u64| data.load_u32(d + o).unwrap();
    assert_eq!(r(0), 2);
    assert_eq!(r(8), 1);
    assert_eq!(r(12), 2);
    assert_eq!([r(16), r(20), r(24), r(28)], [10, 11, 12, 13]);
    assert_eq!(data.load_u64(d + 32).unwrap(), 12);
    assert_eq!(data.load_u64(d + 40).unwrap(), 5);
    assert_eq!(r(48), 9);
    assert_eq!(r(56), 0xABCD);
    assert!((0..16).all(|i| r(256 + 4 * i) == 0x5A5A_5A5A));
    assert_eq!(r(260 + 64), 0);
    assert_eq!([r(512), r(516), r(520), r(524)], [10, 11, 12, 13]);
    assert_eq!(r(1024), 0xD0E);
    assert_eq!(gpu.status(&q), QueueStatus::Active);
}

#[test]
fn wait_reg_mem_waits_for_host_write() {
    let gpu = Gpu::with(GfxFamily::Gfx11, 1);
    let data = gpu.alloc(4096);
    let (flag, flag64, marker, marker2) =
        (data.va(), data.va() + 8, data.va() + 64, data.va() + 72);
    // WAIT_REG_MEM64 exists from gfx10 (nvd.h); the words are the same on every family.
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 4096, 7, 100);
    let mut words = wait_mem(flag, CompareFn::GreaterEqual, 3);
    words.extend(write_data(marker, &[1]));
    words.extend(enc(Pm4Packet::WaitRegMem64(WaitRegMem64 {
        function: CompareFn::Equal,
        mem_space: MemSpace::Memory,
        operation: WaitOperation::WaitRegMem,
        engine: 0,
        cache_policy: CachePolicy::Lru,
        addr: flag64,
        reference: 0x1_0000_0000,
        mask: u64::MAX,
        poll_interval: 4,
    })));
    words.extend(write_data(marker2, &[1]));
    q.submit(&gpu, &words);
    std::thread::sleep(Duration::from_millis(30));
    data.store_u32(flag, 2).unwrap(); // not enough
    std::thread::sleep(Duration::from_millis(120));
    assert_eq!(
        data.load_u32(marker).unwrap(),
        0,
        "passed the wait before the host write"
    );
    assert_eq!(q.rptr(), 0);
    // The host writes the flag; no doorbell.
    data.store_u32(flag, 3).unwrap();
    assert!(wait_until(|| data.load_u32(marker).unwrap() == 1));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(data.load_u32(marker2).unwrap(), 0);
    data.store_u64(flag64, 0xFFFF_FFFF).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(data.load_u32(marker2).unwrap(), 0);
    data.store_u64(flag64, 0x1_0000_0000).unwrap();
    assert!(wait_until(|| data.load_u32(marker2).unwrap() == 1));
    q.wait_idle();
}

#[test]
fn release_mem_writes_and_interrupts() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 4096, 7, 100);
    let before = gpu.eng.gpu_clock();
    let mut words = release_mem(
        DataSel::Value32,
        IntSel::SendInterruptAfterWriteConfirm,
        d,
        0x1234,
        77,
    );
    words.extend(release_mem(
        DataSel::Value64,
        IntSel::None,
        d + 8,
        0x1_0000_0005,
        0,
    ));
    words.extend(release_mem(DataSel::GpuClock, IntSel::None, d + 16, 0, 0));
    words.extend(release_mem(
        DataSel::None,
        IntSel::SendInterruptOnly,
        0,
        0,
        78,
    ));
    q.submit(&gpu, &words);
    q.wait_idle();
    let after = gpu.eng.gpu_clock();
    assert_eq!(data.load_u32(d).unwrap(), 0x1234);
    assert_eq!(data.load_u64(d + 8).unwrap(), 0x1_0000_0005);
    let ts = data.load_u64(d + 16).unwrap();
    assert!(before <= ts && ts <= after, "{before} <= {ts} <= {after}");
    assert_eq!(*gpu.irq.events.lock().unwrap(), vec![Some(77), Some(78)]);
    assert_eq!(gpu.eng.gpu_clock_hz(), 100_000_000);
}

#[test]
fn aql_barriers_and_completion_signals() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let mbox = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 100);
    let dep_a = signal(&sigs, 0, 1, None);
    let dep_b = signal(&sigs, 1, 1, None);
    let done1 = signal(&sigs, 2, 1, Some((mbox.va() + 8, 42)));
    let done2 = signal(&sigs, 3, 2, None);
    let done3 = signal(&sigs, 4, 1, None);
    // barrier-AND on a and b, then barrier-OR on a and b, then barrier-value b == 5.
    q.submit_aql(&gpu, &barrier_and(&[dep_a, 0, dep_b], done1));
    let mut deps = [0u64; 5];
    deps[1] = dep_a;
    deps[4] = dep_b;
    q.submit_aql(
        &gpu,
        &AqlPacket::BarrierOr(Barrier {
            control: PacketControl::SYSTEM_BARRIER,
            dep_signals: deps,
            completion_signal: done2,
        }),
    );
    q.submit_aql(
        &gpu,
        &AqlPacket::BarrierValue(BarrierValue {
            control: PacketControl::SYSTEM_BARRIER,
            signal: dep_b,
            value: 5,
            mask: 0xFF,
            cond: SignalCondition::Eq,
            completion_signal: done3,
        }),
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(q.rptr(), 0);
    sigs.store_u64(dep_a + 8, 0).unwrap(); // AND still waits for b
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(q.rptr(), 0);
    assert_eq!(sig_value(&sigs, done1), 1);
    sigs.store_u64(dep_b + 8, 0x105).unwrap();
    // b = 0x105: AND waits (b != 0)...
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(q.rptr(), 0);
    sigs.store_u64(dep_b + 8, 0).unwrap();
    assert!(wait_until(|| q.rptr() >= 2));
    assert_eq!(sig_value(&sigs, done1), 0);
    assert_eq!(sig_value(&sigs, done2), 1);
    assert_eq!(mbox.load_u64(mbox.va() + 8).unwrap(), 42);
    assert_eq!(*gpu.irq.events.lock().unwrap(), vec![Some(42)]);
    // Consumed slots are INVALID again.
    assert_eq!(
        q.ring.load_u32(q.ring.va()).unwrap() & 0xFF,
        aql::packet_type::INVALID as u32
    );
    // barrier-value: (0x105 & 0xFF) == 5 holds once b is 0x105 again.
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(q.rptr(), 2);
    sigs.store_u64(dep_b + 8, 0x105).unwrap();
    q.wait_idle();
    assert_eq!(sig_value(&sigs, done3), 0);
    assert_eq!(gpu.status(&q), QueueStatus::Active);
}

/// A blocked barrier is re-polled from the decoding made when it was fetched: the slot
/// is the packet processor's until the read index passes it, so a body rewritten under
/// an unchanged header is not seen; a changed header is fetched and decoded afresh.
#[test]
fn aql_blocked_barrier_polls_its_fetched_decoding() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let mut qa = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let mut qb = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let s1 = signal(&sigs, 0, 1, None);
    let s2 = signal(&sigs, 1, 0, None);
    let done = signal(&sigs, 2, 1, None);
    let x = signal(&sigs, 3, 1, None);
    let wait_on = |sig: u64, control: PacketControl| {
        AqlPacket::BarrierValue(BarrierValue {
            control,
            signal: sig,
            value: 0,
            mask: -1,
            cond: SignalCondition::Eq,
            completion_signal: done,
        })
    };
    let slot1 = qa.ring.va() + 64;
    let on_s2 = wait_on(s2, PacketControl::SYSTEM_BARRIER).encode();
    // Queue B, once x is 0, rewrites the body of queue A's slot 1 to wait for s2
    // (satisfied), leaving its header.
    let ib = gpu.alloc(4096);
    let wd = write_data(slot1 + 4, &on_s2[1..]);
    for (i, w) in wd.iter().enumerate() {
        ib.store_u32(ib.va() + 4 * i as u64, *w).unwrap();
    }
    qb.submit_aql(&gpu, &barrier_and(&[x], 0));
    qb.submit_aql(
        &gpu,
        &AqlPacket::VendorPm4Ib(VendorPm4Ib {
            control: PacketControl::SYSTEM_BARRIER,
            ib: IndirectBuffer::new(ib.va(), wd.len() as u32),
            completion_signal: 0,
        }),
    );
    // Queue A: slot 0 completes x, slot 1 waits for s1. Both are published at once (slot
    // 1 whole, then slot 0's header), so the run that completes slot 0 fetches slot 1
    // and blocks on it before it returns, and only then can the CP (one thread for both
    // queues) run queue B.
    let p1 = wait_on(s1, PacketControl::SYSTEM_BARRIER).encode();
    for (i, d) in p1.iter().enumerate().rev() {
        qa.ring.store_u32(slot1 + 4 * i as u64, *d).unwrap();
    }
    let p0 = barrier_and(&[], x).encode();
    for (i, d) in p0.iter().enumerate().skip(1) {
        qa.ring.store_u32(qa.ring.va() + 4 * i as u64, *d).unwrap();
    }
    qa.ptrs.store_u64(qa.wptr_va, 2).unwrap();
    qa.ring.store_u32(qa.ring.va(), p0[0]).unwrap();
    qa.ring_doorbell(&gpu, 1);
    qa.wptr = 2;
    qb.wait_idle();
    assert_eq!(
        qa.ring.load_u32(slot1 + 8).unwrap(),
        on_s2[2],
        "body rewritten"
    );
    // Re-polls (every ~1 ms while blocked) keep waiting for s1.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(qa.rptr(), 1, "re-polled from the fetched decoding (s1)");
    assert_eq!(sig_value(&sigs, done), 1);
    // A different header (agent-scope acquire): fetched afresh, it waits for s2.
    let control = PacketControl {
        acquire: aql::FenceScope::Agent,
        ..PacketControl::SYSTEM_BARRIER
    };
    let hdr = wait_on(s2, control).encode()[0];
    assert_ne!(hdr, on_s2[0]);
    qa.ring.store_u32(slot1, hdr).unwrap();
    qa.wait_idle();
    assert_eq!(sig_value(&sigs, done), 0);
    assert_eq!(sig_value(&sigs, s1), 1, "s1 never changed");
    assert_eq!(gpu.status(&qa), QueueStatus::Active);
}

/// `amd_queue_t` replaced at the same address (unmapped, mapped anew): the CP reads
/// `write_dispatch_id` and writes `read_dispatch_id` in the new memory, never through
/// the cells it pinned in the old.
#[test]
fn aql_queue_indexes_follow_unmap() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let done = signal(&sigs, 0, 2, None);
    q.submit_aql(&gpu, &barrier_and(&[], done));
    q.wait_idle();
    let old = q.ptrs.clone();
    assert_eq!(old.load_u64(q.rptr_va).unwrap(), 1);
    assert!(gpu.mem.remove_region(old.va()));
    gpu.eng.flush_tlb();
    q.ptrs = gpu.mem.add_region(old.va(), 256);
    q.submit_aql(&gpu, &barrier_and(&[], done));
    q.wait_idle();
    assert_eq!(
        q.rptr(),
        2,
        "read_dispatch_id written in the new amd_queue_t"
    );
    assert_eq!(
        old.load_u64(q.rptr_va).unwrap(),
        1,
        "not through a stale cell"
    );
    assert_eq!(sig_value(&sigs, done), 0);
    assert_eq!(gpu.status(&q), QueueStatus::Active);
}

/// The ring unmapped while a barrier blocks: the next poll re-reads the slot's header
/// and faults there (a read at the slot), as a fresh fetch would.
#[test]
fn aql_blocked_barrier_faults_when_its_ring_is_unmapped() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let dep = signal(&sigs, 0, 1, None);
    let done = signal(&sigs, 1, 1, None);
    q.submit_aql(&gpu, &barrier_and(&[dep], done));
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(q.rptr(), 0, "blocked");
    let ring_va = q.ring.va();
    assert!(gpu.mem.remove_region(ring_va));
    gpu.eng.flush_tlb();
    let f = gpu.faulted(&q);
    assert_eq!(f.packet_offset, 0);
    let mf = f.fault.expect("a memory fault");
    assert_eq!((mf.va, mf.write), (ring_va, false));
    assert_eq!(mf.kind, FaultKind::NotMapped);
    assert_eq!(sig_value(&sigs, done), 1, "the barrier did not complete");
}

/// Memory a queue's packets used, unmapped, is released when `release_windows` returns:
/// the engine's translation cache and the queue's pinned windows (completion signal,
/// barrier dependency, event mailbox) let go of it then, not at the queue's next access.
#[test]
fn release_windows_lets_go_of_unmapped_memory() {
    let gpu = Gpu::new();
    let bo = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let dep = signal(&bo, 0, 0, None);
    let done = signal(&bo, 1, 1, Some((bo.va() + 512, 7)));
    q.submit_aql(&gpu, &barrier_and(&[dep], done));
    q.wait_idle();
    assert_eq!(sig_value(&bo, done), 0);
    assert_eq!(bo.load_u64(bo.va() + 512).unwrap(), 7);
    // This window, the memory map's and the engine's.
    let held = bo.holders();
    assert!(
        held > 2,
        "the engine holds no window of the BO ({held} holders)"
    );
    assert!(gpu.mem.remove_region(bo.va()));
    gpu.eng.flush_tlb();
    gpu.eng.release_windows();
    assert_eq!(
        bo.holders(),
        1,
        "the engine still holds the unmapped BO after release_windows"
    );
    // The queue runs on, translating afresh.
    let sigs = gpu.alloc(4096);
    let done2 = signal(&sigs, 0, 1, None);
    q.submit_aql(&gpu, &barrier_and(&[], done2));
    q.wait_idle();
    assert_eq!(sig_value(&sigs, done2), 0);
    assert_eq!(gpu.status(&q), QueueStatus::Active);
}

/// The PM4-IB path keeps a window on the buffer it reads and on the last one-dword
/// WRITE_DATA destination: `release_windows` must let go of those too, so an unmapped
/// buffer and destination are released then (their memfds recycled at the free), not at
/// the queue's next indirect buffer.
#[test]
fn release_windows_lets_go_of_pm4_ib_windows() {
    let gpu = Gpu::new();
    let ib = gpu.alloc(4096);
    let data = gpu.alloc(4096);
    let (ib_va, d) = (ib.va(), data.va());
    let mut q = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let words = write_data(d + 4, &[11]);
    for (i, w) in words.iter().enumerate() {
        ib.store_u32(ib_va + 4 * i as u64, *w).unwrap();
    }
    q.submit_aql(
        &gpu,
        &AqlPacket::VendorPm4Ib(VendorPm4Ib {
            control: PacketControl::SYSTEM_BARRIER,
            ib: IndirectBuffer::new(ib_va, words.len() as u32),
            completion_signal: 0,
        }),
    );
    q.wait_idle();
    assert_eq!(data.load_u32(d + 4).unwrap(), 11);
    assert!(gpu.mem.remove_region(ib_va) && gpu.mem.remove_region(d));
    gpu.eng.flush_tlb();
    gpu.eng.release_windows();
    assert_eq!(
        ib.holders(),
        1,
        "the engine still holds the unmapped IB buffer"
    );
    assert_eq!(
        data.holders(),
        1,
        "the engine still holds the unmapped WRITE_DATA target"
    );
    assert_eq!(gpu.status(&q), QueueStatus::Active);
}

/// Two AQL queues whose barrier-value packets each wait for the other queue's last
/// completion (a record/waitEvent ping-pong): all rounds enqueued up front, they must
/// complete strictly alternating (the completion interrupts say in which order), with
/// both signals counted down to 0 and both queues drained and active.
#[test]
fn aql_cross_queue_barrier_ping_pong_alternates() {
    const ROUNDS: i64 = 300;
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let mbox = gpu.alloc(4096);
    let mut qa = Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 100);
    let mut qb = Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 100);
    let a = signal(&sigs, 0, ROUNDS, Some((mbox.va(), 1)));
    let b = signal(&sigs, 1, ROUNDS, Some((mbox.va() + 8, 2)));
    let wait = |on: u64, value: i64, done: u64| {
        AqlPacket::BarrierValue(BarrierValue {
            control: PacketControl::SYSTEM_BARRIER,
            signal: on,
            value,
            mask: -1,
            cond: SignalCondition::Eq,
            completion_signal: done,
        })
    };
    for i in 0..ROUNDS {
        // A: once B completed round i - 1 (b == ROUNDS - i), complete a (-> ROUNDS-i-1).
        qa.submit_aql(&gpu, &wait(b, ROUNDS - i, a));
        // B: once A completed round i (a == ROUNDS - i - 1), complete b.
        qb.submit_aql(&gpu, &wait(a, ROUNDS - i - 1, b));
    }
    qa.wait_idle();
    qb.wait_idle();
    assert_eq!(sig_value(&sigs, a), 0);
    assert_eq!(sig_value(&sigs, b), 0);
    let order = gpu.irq.events.lock().unwrap().clone();
    let want: Vec<Option<u32>> = (0..ROUNDS).flat_map(|_| [Some(1), Some(2)]).collect();
    assert_eq!(order, want);
    assert_eq!(gpu.status(&qa), QueueStatus::Active);
    assert_eq!(gpu.status(&qb), QueueStatus::Active);
}

#[test]
fn aql_pm4_ib_runs_the_indirect_buffer() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let data = gpu.alloc(4096);
    let ib = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let d = data.va();
    let mut words = wait_mem(d + 100 * 4, CompareFn::Equal, 1);
    words.extend(write_data(d, &[7, 8]));
    words.extend(release_mem(
        DataSel::Value32,
        IntSel::SendInterruptAfterWriteConfirm,
        d + 8,
        9,
        5,
    ));
    for (i, w) in words.iter().enumerate() {
        ib.store_u32(ib.va() + 4 * i as u64, *w).unwrap();
    }
    let done = signal(&sigs, 0, 1, None);
    let pkt = AqlPacket::VendorPm4Ib(VendorPm4Ib {
        control: PacketControl::SYSTEM_BARRIER,
        ib: IndirectBuffer::new(ib.va(), words.len() as u32),
        completion_signal: done,
    });
    q.submit_aql(&gpu, &pkt);
    let after = signal(&sigs, 1, 1, None);
    q.submit_aql(&gpu, &barrier_and(&[], after));
    std::thread::sleep(Duration::from_millis(40));
    assert_eq!(
        q.rptr(),
        0,
        "the PM4-IB packet completed before its WAIT_REG_MEM passed"
    );
    assert_eq!(sig_value(&sigs, done), 1);
    data.store_u32(d + 400, 1).unwrap();
    q.wait_idle();
    assert_eq!(
        [
            data.load_u32(d).unwrap(),
            data.load_u32(d + 4).unwrap(),
            data.load_u32(d + 8).unwrap()
        ],
        [7, 8, 9]
    );
    assert_eq!(sig_value(&sigs, done), 0);
    assert_eq!(sig_value(&sigs, after), 0);
    assert_eq!(*gpu.irq.events.lock().unwrap(), vec![Some(5)]);
}

#[test]
fn pm4_indirect_buffers_nest_and_chain() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let ibs = gpu.alloc(3 * 4096);
    let d = data.va();
    let (ib1, ib2, ib3) = (ibs.va(), ibs.va() + 4096, ibs.va() + 8192);
    let put = |va: u64, w: &[u32]| {
        for (i, x) in w.iter().enumerate() {
            ibs.store_u32(va + 4 * i as u64, *x).unwrap();
        }
    };
    // ib2: write 2. ib3 (chained from ib1): write 3. ib1: write 1, IB ib2, chain ib3.
    let w2 = write_data(d + 4, &[2]);
    put(ib2, &w2);
    let w3 = write_data(d + 8, &[3]);
    put(ib3, &w3);
    let mut w1 = write_data(d, &[1]);
    w1.extend(enc(Pm4Packet::IndirectBuffer(IndirectBuffer::new(
        ib2,
        w2.len() as u32,
    ))));
    let mut chain = IndirectBuffer::new(ib3, w3.len() as u32);
    chain.chain = true;
    w1.extend(enc(Pm4Packet::IndirectBuffer(chain)));
    w1.extend(write_data(d + 12, &[99])); // skipped: the chain replaced ib1
    put(ib1, &w1);
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 1024, 7, 100);
    let mut words = enc(Pm4Packet::IndirectBuffer(IndirectBuffer::new(
        ib1,
        w1.len() as u32,
    )));
    words.extend(write_data(d + 16, &[4]));
    q.submit(&gpu, &words);
    q.wait_idle();
    assert!(wait_until(|| data.load_u32(d + 16).unwrap() == 4));
    let v: Vec<u32> = (0..5).map(|i| data.load_u32(d + 4 * i).unwrap()).collect();
    assert_eq!(v, [1, 2, 3, 0, 4]);

    // IB3 level: ring -> ib(a) -> ib(b) -> ib(c) faults.
    let nest = gpu.alloc(4096);
    let (a, b, c) = (nest.va(), nest.va() + 1024, nest.va() + 2048);
    let wc = write_data(d + 20, &[5]);
    let wb = enc(Pm4Packet::IndirectBuffer(IndirectBuffer::new(
        c,
        wc.len() as u32,
    )));
    let wa = enc(Pm4Packet::IndirectBuffer(IndirectBuffer::new(
        b,
        wb.len() as u32,
    )));
    for (va, w) in [(a, &wa), (b, &wb), (c, &wc)] {
        for (i, x) in w.iter().enumerate() {
            nest.store_u32(va + 4 * i as u64, *x).unwrap();
        }
    }
    let at = q.wptr * 4;
    q.submit(
        &gpu,
        &enc(Pm4Packet::IndirectBuffer(IndirectBuffer::new(
            a,
            wa.len() as u32,
        ))),
    );
    let f = gpu.faulted(&q);
    assert!(f.reason.contains("nested deeper"), "{}", f.reason);
    assert_eq!(f.packet_offset, at % 1024);
    assert_eq!(data.load_u32(d + 20).unwrap(), 0);
}

#[test]
fn bad_address_faults_the_queue() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 4096, 7, 100);
    let bad = 0xDEAD_0000u64;
    let first = write_data(d, &[1]);
    let mut words = first.clone();
    words.extend(write_data(bad, &[2]));
    words.extend(write_data(d + 4, &[3]));
    q.submit(&gpu, &words);
    let f = gpu.faulted(&q);
    assert_eq!(f.queue_id, q.id);
    assert_eq!(f.packet_offset, first.len() as u64 * 4);
    let mf = f.fault.expect("a memory fault");
    assert_eq!(mf.va, bad);
    assert!(mf.write);
    assert_eq!(mf.kind, FaultKind::NotMapped);
    assert_eq!(mf.gpu_id, gpu.id);
    assert_eq!(data.load_u32(d).unwrap(), 1);
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        data.load_u32(d + 4).unwrap(),
        0,
        "a packet after the fault ran"
    );
    assert_eq!(
        gpu.irq.faults.lock().unwrap().as_slice(),
        std::slice::from_ref(&f)
    );
    // More doorbells do not restart it.
    q.submit(&gpu, &write_data(d + 8, &[4]));
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(data.load_u32(d + 8).unwrap(), 0);
    assert_eq!(gpu.irq.faults.lock().unwrap().len(), 1);

    // An AQL barrier on an unmapped signal faults too.
    let mut aq = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    aq.submit_aql(&gpu, &barrier_and(&[], 0));
    aq.submit_aql(&gpu, &barrier_and(&[0x7777_0000], 0));
    let f = gpu.faulted(&aq);
    assert_eq!(f.packet_offset, 64);
    assert_eq!(f.fault.map(|x| x.va), Some(0x7777_0008));
    assert_eq!(aq.rptr(), 1);

    // SDMA copy from an unmapped source.
    let mut sq = Queue::new(&gpu, QueueKind::Sdma { engine: 1 }, 4096, 7, 100);
    sq.submit_sdma(&gpu, &SdmaPacket::Fence(sdma::Fence::new(d + 64, 1)));
    sq.submit_sdma(
        &gpu,
        &SdmaPacket::CopyLinear(sdma::CopyLinear {
            src: bad,
            dst: d,
            bytes: 64,
            tmz: false,
            parameter: 0,
        }),
    );
    sq.submit_sdma(&gpu, &SdmaPacket::Fence(sdma::Fence::new(d + 68, 1)));
    let f = gpu.faulted(&sq);
    assert_eq!(f.packet_offset, 16);
    assert_eq!(f.fault.map(|x| (x.va, x.write)), Some((bad, false)));
    assert_eq!(data.load_u32(d + 64).unwrap(), 1);
    assert_eq!(data.load_u32(d + 68).unwrap(), 0);
}

#[test]
fn unknown_opcodes_fault() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 4096, 7, 100);
    let mut words = write_data(d, &[1]);
    words.extend([pkt3::packet3(0x99, 1), 0, 0]);
    words.extend(write_data(d + 4, &[1]));
    q.submit(&gpu, &words);
    let f = gpu.faulted(&q);
    assert!(f.reason.contains("unknown PM4 opcode 0x99"), "{}", f.reason);
    assert_eq!(f.packet_offset, 5 * 4);
    assert_eq!(f.fault, None);
    assert_eq!(data.load_u32(d + 4).unwrap(), 0);

    // A type-2 header is malformed on a PM4 queue.
    let mut q2 = Queue::new(&gpu, QueueKind::Pm4, 4096, 7, 100);
    q2.submit(&gpu, &[0x8000_0000]);
    assert!(gpu.faulted(&q2).reason.contains("malformed"));

    // SDMA: unknown opcode 0x3F.
    let mut sq = Queue::new(&gpu, QueueKind::Sdma { engine: 0 }, 4096, 7, 100);
    sq.submit(&gpu, &[0x3F, 0, 0, 0]);
    let f = gpu.faulted(&sq);
    assert!(f.reason.contains("unknown SDMA opcode 63"), "{}", f.reason);
    assert_eq!(f.packet_offset, 0);

    // AQL: agent dispatch packets are not processed by the CP.
    let mut aq = Queue::new(&gpu, QueueKind::Aql, 4 * 64, 7, 100);
    let mut w = [0u32; 16];
    w[0] = aql::packet_type::AGENT_DISPATCH as u32;
    aq.submit_aql(&gpu, &AqlPacket::Unknown { words: w });
    assert!(gpu
        .faulted(&aq)
        .reason
        .contains("unsupported AQL packet type 4"));
}

#[test]
fn aql_kernel_dispatch_faults_isa_not_supported() {
    let gpu = Gpu::new();
    let code = gpu.alloc(4096);
    let sigs = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 8 * 64, 7, 100);
    let done = signal(&sigs, 0, 1, None);
    let k = KernelDispatch {
        control: PacketControl::SYSTEM_BARRIER,
        dimensions: 1,
        workgroup_size: [64, 1, 1],
        grid_size: [1024, 1, 1],
        private_segment_size: 0,
        group_segment_size: 0,
        kernel_object: code.va(),
        kernarg_address: code.va() + 1024,
        completion_signal: done,
    };
    q.submit_aql(&gpu, &AqlPacket::KernelDispatch(k));
    let f = gpu.faulted(&q);
    assert!(f.reason.starts_with(ISA_NOT_SUPPORTED), "{}", f.reason);
    assert_eq!(f.packet_offset, 0);
    assert_eq!(
        sig_value(&sigs, done),
        1,
        "a faulted dispatch must not complete its signal"
    );

    // An unmapped kernel object is reported as such.
    let mut q2 = Queue::new(&gpu, QueueKind::Aql, 8 * 64, 7, 100);
    q2.submit_aql(
        &gpu,
        &AqlPacket::KernelDispatch(KernelDispatch {
            kernel_object: 0x4000_0000,
            ..k
        }),
    );
    let f = gpu.faulted(&q2);
    assert!(
        f.reason.contains("kernel descriptor not mapped"),
        "{}",
        f.reason
    );
    assert_eq!(f.fault.map(|x| x.va), Some(0x4000_0000));

    // Work-group too large.
    let mut q3 = Queue::new(&gpu, QueueKind::Aql, 8 * 64, 7, 100);
    q3.submit_aql(
        &gpu,
        &AqlPacket::KernelDispatch(KernelDispatch {
            workgroup_size: [2048, 1, 1],
            ..k
        }),
    );
    assert!(gpu.faulted(&q3).reason.contains("exceeds 1024"));

    // PM4 DISPATCH_DIRECT likewise.
    let mut q4 = Queue::new(&gpu, QueueKind::Pm4, 1024, 7, 100);
    q4.submit(
        &gpu,
        &enc(Pm4Packet::DispatchDirect(pkt3::DispatchDirect {
            dim_x: 1,
            dim_y: 1,
            dim_z: 1,
            dispatch_initiator: 1,
        })),
    );
    assert!(gpu.faulted(&q4).reason.contains(ISA_NOT_SUPPORTED));
}

#[test]
fn remove_queue_while_blocked_in_a_wait() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 1024, 7, 100);
    let mut words = wait_mem(d, CompareFn::Equal, 1);
    words.extend(write_data(d + 4, &[1]));
    q.submit(&gpu, &words);
    let mut aq = Queue::new(&gpu, QueueKind::Aql, 4 * 64, 7, 100);
    let sigs = gpu.alloc(4096);
    let dep = signal(&sigs, 0, 1, None);
    aq.submit_aql(&gpu, &barrier_and(&[dep], 0));
    let mut sq = Queue::new(&gpu, QueueKind::Sdma { engine: 0 }, 1024, 7, 100);
    sq.submit_sdma(
        &gpu,
        &SdmaPacket::PollRegmem(sdma::PollRegmem {
            func: CompareFn::Equal,
            mem_poll: true,
            hdp_flush: false,
            addr: d,
            reference: 1,
            mask: !0,
            interval: 10,
            retry_count: 0xFFF,
        }),
    );
    sq.submit_sdma(&gpu, &SdmaPacket::Fence(sdma::Fence::new(d + 8, 1)));
    std::thread::sleep(Duration::from_millis(50));
    let start = Instant::now();
    gpu.eng.remove_queue(q.id);
    gpu.eng.remove_queue(aq.id);
    gpu.eng.remove_queue(sq.id);
    assert!(start.elapsed() < LONG);
    assert_eq!(gpu.eng.queue_status(q.id), None);
    data.store_u32(d, 1).unwrap();
    sigs.store_u64(dep + 8, 0).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        data.load_u32(d + 4).unwrap(),
        0,
        "a removed queue executed a packet"
    );
    assert_eq!(data.load_u32(d + 8).unwrap(), 0);
    assert_eq!(aq.rptr(), 0);
}

#[test]
fn rings_wrap_many_times() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    // PM4: 64-dword ring, 5-dword packets straddle the end; 20000 dwords = ~300 wraps.
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 256, 7, 100);
    for i in 0..4000u32 {
        q.submit(&gpu, &write_data(d, &[i]));
        // The value trails the submission in order.
        if i % 997 == 0 {
            q.wait_idle();
            assert_eq!(data.load_u32(d).unwrap(), i);
        }
    }
    q.wait_idle();
    assert_eq!(data.load_u32(d).unwrap(), 3999);
    assert_eq!(q.rptr(), 4000 * 5);

    // AQL: 4 slots, 1000 barriers with completion signals.
    let sigs = gpu.alloc(4096);
    let s = signal(&sigs, 0, 1000, None);
    let mut aq = Queue::new(&gpu, QueueKind::Aql, 4 * 64, 7, 100);
    for _ in 0..1000 {
        aq.submit_aql(&gpu, &barrier_and(&[], s));
    }
    aq.wait_idle();
    assert_eq!(sig_value(&sigs, s), 0);

    // SDMA: 256-byte ring, WRITE packets of 5 dwords with NOP padding at the end.
    let mut sq = Queue::new(&gpu, QueueKind::Sdma { engine: 1 }, 256, 7, 100);
    for i in 0..3000u32 {
        sq.submit_sdma(
            &gpu,
            &SdmaPacket::Write(sdma::Write {
                dst: d + 16,
                data: &[i],
            }),
        );
    }
    sq.wait_idle();
    assert_eq!(data.load_u32(d + 16).unwrap(), 2999);
    assert_eq!(gpu.status(&sq), QueueStatus::Active);
}

#[test]
fn higher_priority_queue_runs_first() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    let counter = d;
    gpu.eng.pause();
    let mut lo = Queue::new(&gpu, QueueKind::Pm4, 4096, 2, 100);
    let mut hi = Queue::new(&gpu, QueueKind::Pm4, 4096, 13, 100);
    // Each queue: 50 times { log[counter] ordering via COPY_DATA, counter += 1 }.
    let prog = |slot: u64| {
        let mut w = Vec::new();
        for i in 0..50u64 {
            w.extend(copy_data(
                pkt3::copy_sel::MEMORY,
                counter,
                slot + 4 * i,
                false,
            ));
            w.extend(atomic(tc_op::ADD_RTN_32, counter, 1, 0));
        }
        w
    };
    // Submit the low-priority work first.
    lo.submit(&gpu, &prog(d + 1024));
    hi.submit(&gpu, &prog(d + 2048));
    gpu.eng.resume();
    lo.wait_idle();
    hi.wait_idle();
    let lo_seen: Vec<u32> = (0..50)
        .map(|i| data.load_u32(d + 1024 + 4 * i).unwrap())
        .collect();
    let hi_seen: Vec<u32> = (0..50)
        .map(|i| data.load_u32(d + 2048 + 4 * i).unwrap())
        .collect();
    assert_eq!(hi_seen, (0..50).collect::<Vec<_>>());
    assert_eq!(lo_seen, (50..100).collect::<Vec<_>>());

    // Percentage 0: not scheduled until updated.
    let mut off = Queue::new(&gpu, QueueKind::Pm4, 4096, 7, 0);
    off.submit(&gpu, &write_data(d + 8, &[1]));
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(data.load_u32(d + 8).unwrap(), 0);
    gpu.eng
        .update_queue(off.id, off.ring.va(), off.size as u32, 7, 50);
    off.wait_idle();
    assert_eq!(data.load_u32(d + 8).unwrap(), 1);

    // A blocked high-priority queue does not hold up a lower one.
    let mut hi2 = Queue::new(&gpu, QueueKind::Pm4, 4096, 15, 100);
    hi2.submit(&gpu, &wait_mem(d + 12, CompareFn::Equal, 1));
    lo.submit(&gpu, &write_data(d + 16, &[1]));
    lo.wait_idle();
    assert_eq!(hi2.rptr(), 0);
    data.store_u32(d + 12, 1).unwrap();
    hi2.wait_idle();
}

#[test]
fn sdma_packets() {
    let gpu = Gpu::new();
    let data = gpu.alloc(64 * 1024);
    let ib = gpu.alloc(4096);
    let d = data.va();
    let mut q = Queue::new(&gpu, QueueKind::Sdma { engine: 0 }, 4096, 7, 100);
    for i in 0..64u64 {
        data.store_u32(d + 4 * i, i as u32 * 3).unwrap();
    }
    let before = gpu.eng.gpu_clock();
    q.submit_sdma(
        &gpu,
        &SdmaPacket::CopyLinear(sdma::CopyLinear {
            src: d,
            dst: d + 4096,
            bytes: 253,
            tmz: false,
            parameter: 0,
        }),
    );
    q.submit_sdma(
        &gpu,
        &SdmaPacket::ConstFill(sdma::ConstFill {
            dst: d + 8192,
            data: 0xA1B2_C3D4,
            bytes: 64,
            fill_size: 2,
        }),
    );
    q.submit_sdma(
        &gpu,
        &SdmaPacket::ConstFill(sdma::ConstFill {
            dst: d + 8192 + 64,
            data: 0x77,
            bytes: 7,
            fill_size: 0,
        }),
    );
    q.submit_sdma(
        &gpu,
        &SdmaPacket::Write(sdma::Write {
            dst: d + 12288,
            data: &[5, 6, 7],
        }),
    );
    q.submit_sdma(
        &gpu,
        &SdmaPacket::Timestamp(sdma::Timestamp {
            kind: sdma::TimestampKind::GetGlobal,
            value: d + 12800,
        }),
    );
    q.submit_sdma(
        &gpu,
        &SdmaPacket::Timestamp(sdma::Timestamp {
            kind: sdma::TimestampKind::SetLocal,
            value: 1 << 40,
        }),
    );
    q.submit_sdma(
        &gpu,
        &SdmaPacket::Timestamp(sdma::Timestamp {
            kind: sdma::TimestampKind::GetLocal,
            value: d + 12808,
        }),
    );
    // An IB with a FENCE and a TRAP.
    let mut w = sdma_words(&SdmaPacket::Fence(sdma::Fence::new(d + 13000, 0xFE)));
    w.extend(sdma_words(&SdmaPacket::Trap(sdma::Trap { int_context: 9 })));
    for (i, x) in w.iter().enumerate() {
        ib.store_u32(ib.va() + 4 * i as u64, *x).unwrap();
    }
    q.submit_sdma(
        &gpu,
        &SdmaPacket::Indirect(sdma::Indirect {
            vmid: 0,
            ib_addr: ib.va(),
            ib_dwords: w.len() as u32,
            csa_addr: 0,
        }),
    );
    q.submit_sdma(&gpu, &SdmaPacket::Nop(sdma::Nop { count: 3 }));
    q.submit_sdma(&gpu, &SdmaPacket::Trap(sdma::Trap { int_context: 10 }));
    q.wait_idle();
    let after = gpu.eng.gpu_clock();
    let mut src = vec![0u8; 253];
    let mut dst = vec![0u8; 256];
    data.read(d, &mut src).unwrap();
    data.read(d + 4096, &mut dst).unwrap();
    assert_eq!(&dst[..253], &src[..]);
    assert_eq!(&dst[253..], &[0, 0, 0]);
    assert!((0..16).all(|i| data.load_u32(d + 8192 + 4 * i).unwrap() == 0xA1B2_C3D4));
    let mut f = [0u8; 8];
    data.read(d + 8192 + 64, &mut f).unwrap();
    assert_eq!(f, [0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0x77, 0]);
    assert_eq!(
        (0..3)
            .map(|i| data.load_u32(d + 12288 + 4 * i).unwrap())
            .collect::<Vec<_>>(),
        [5, 6, 7]
    );
    let ts = data.load_u64(d + 12800).unwrap();
    assert!(before <= ts && ts <= after);
    let local = data.load_u64(d + 12808).unwrap();
    assert!(local >= 1 << 40 && local - (1 << 40) <= after - before + 1);
    assert_eq!(data.load_u32(d + 13000).unwrap(), 0xFE);
    assert_eq!(*gpu.irq.events.lock().unwrap(), vec![Some(9), Some(10)]);
}

/// Fills `w` (at `va`, `len` bytes) with a position-dependent pattern.
fn fill_pattern(w: &MemWindow, len: usize, seed: u32) {
    let chunk = 1 << 20;
    let mut buf = vec![0u8; chunk];
    for c in 0..len / chunk {
        for (i, b) in buf.chunks_exact_mut(4).enumerate() {
            let x = ((c * chunk / 4 + i) as u32)
                .wrapping_mul(2_654_435_761)
                .wrapping_add(seed);
            b.copy_from_slice(&x.to_le_bytes());
        }
        w.write(w.va() + (c * chunk) as u64, &buf).unwrap();
    }
}

#[test]
fn sdma_copy_and_fill_256_mib() {
    const LEN: usize = 256 << 20;
    let gpu = Gpu::new();
    let src = gpu.alloc(LEN);
    let dst = gpu.alloc(LEN);
    fill_pattern(&src, LEN, 0x1234);
    let mut q = Queue::new(&gpu, QueueKind::Sdma { engine: 1 }, 64 * 1024, 7, 100);
    let fence = gpu.alloc(64);
    for p in sdma::copy_linear_split(src.va(), dst.va(), LEN as u64, SDMA) {
        q.submit_sdma(&gpu, &SdmaPacket::CopyLinear(p));
    }
    q.submit_sdma(&gpu, &SdmaPacket::Fence(sdma::Fence::new(fence.va(), 1)));
    assert!(wait_until(|| fence.load_u32(fence.va()).unwrap() == 1));
    let chunk = 4 << 20;
    let (mut a, mut b) = (vec![0u8; chunk], vec![0u8; chunk]);
    for c in 0..LEN / chunk {
        let o = (c * chunk) as u64;
        src.read(src.va() + o, &mut a).unwrap();
        dst.read(dst.va() + o, &mut b).unwrap();
        assert!(a == b, "copy differs in chunk {c}");
    }
    // Fill the whole destination with a dword pattern, in packets of at most 4 MiB.
    let mut off = 0u64;
    while off < LEN as u64 {
        let n = (LEN as u64 - off).min(SDMA.copy_chunk_bytes() as u64 & !3) as u32;
        q.submit_sdma(
            &gpu,
            &SdmaPacket::ConstFill(sdma::ConstFill {
                dst: dst.va() + off,
                data: 0xC0FF_EE11,
                bytes: n,
                fill_size: 2,
            }),
        );
        off += n as u64;
    }
    q.submit_sdma(&gpu, &SdmaPacket::Fence(sdma::Fence::new(fence.va(), 2)));
    assert!(wait_until(|| fence.load_u32(fence.va()).unwrap() == 2));
    let expect: Vec<u8> = (0..chunk)
        .map(|i| 0xC0FF_EE11u32.to_le_bytes()[i % 4])
        .collect();
    for c in 0..LEN / chunk {
        dst.read(dst.va() + (c * chunk) as u64, &mut b).unwrap();
        assert!(b == expect, "fill differs in chunk {c}");
    }
    assert_eq!(gpu.status(&q), QueueStatus::Active);
}

fn thread_cpu_ticks(name: &str) -> Option<u64> {
    // Threads of tests running beside this one come and go while the directory is read:
    // skip a task that vanished instead of giving up on the search.
    for t in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(t) = t else { continue };
        let p = t.path();
        let Ok(comm) = std::fs::read_to_string(p.join("comm")) else {
            continue;
        };
        if comm.trim() == name {
            let stat = std::fs::read_to_string(p.join("stat")).ok()?;
            let rest = stat.rsplit_once(')')?.1;
            let f: Vec<&str> = rest.split_whitespace().collect();
            // Fields after the command: state(0) ... utime(11) stime(12).
            return Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?);
        }
    }
    None
}

#[test]
fn idle_and_blocked_engines_do_not_spin() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    let mut q = Queue::new(&gpu, QueueKind::Pm4, 1024, 7, 100);
    q.submit(&gpu, &write_data(d, &[1]));
    q.wait_idle();
    // Thread names are truncated to 15 bytes by the kernel.
    let name: String = format!("kfd-emu-cp-{:x}", gpu.id)
        .chars()
        .take(15)
        .collect();
    let t0 = thread_cpu_ticks(&name).expect("CP thread");
    std::thread::sleep(Duration::from_millis(500));
    let idle = thread_cpu_ticks(&name).unwrap() - t0;
    assert!(idle <= 3, "idle CP used {idle} ticks in 500 ms");
    // Blocked in a wait: bounded polling, far from a full core (50 ticks in 500 ms).
    q.submit(&gpu, &wait_mem(d + 4, CompareFn::Equal, 1));
    std::thread::sleep(Duration::from_millis(100));
    let t1 = thread_cpu_ticks(&name).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let blocked = thread_cpu_ticks(&name).unwrap() - t1;
    assert!(blocked <= 15, "blocked CP used {blocked} ticks in 500 ms");
    data.store_u32(d + 4, 1).unwrap();
    q.wait_idle();
}

#[test]
fn remove_and_drop_from_many_threads_never_hang() {
    for _ in 0..20 {
        let gpu = Gpu::new();
        let data = gpu.alloc(4096);
        let mut qs: Vec<Queue> = (0..3)
            .map(|i| Queue::new(&gpu, QueueKind::Pm4, 1024, i * 5, 100))
            .collect();
        for q in qs.iter_mut() {
            let mut w = Vec::new();
            for _ in 0..20 {
                w.extend(write_data(data.va(), &[1]));
            }
            w.extend(wait_mem(data.va() + 8, CompareFn::Equal, 1));
            q.submit(&gpu, &w);
        }
        gpu.eng.remove_queue(qs[1].id);
        drop(gpu);
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 24, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b66_6472_7400_0001), .. Default::default() })]
    #[test]
    fn fuzz_ring_never_panics(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..1024)) {
        kfd_emu::engine::fuzz_ring(&data);
    }
}

#[test]
fn fuzz_ring_on_valid_packets() {
    // A valid PM4 stream (all writes go to the fuzz data region) runs to completion.
    let va = kfd_emu::engine::FUZZ_DATA_VA;
    let mut bytes = vec![0u8];
    for i in 0..10u32 {
        for w in write_data(va + 4 * i as u64, &[i]) {
            bytes.extend(w.to_le_bytes());
        }
    }
    let r = kfd_emu::engine::fuzz_ring_report(&bytes);
    assert!(!r.faulted[1]);
    assert_eq!(r.rptr[1], 50);
    assert_eq!(r.wptr[1], 50);
    // The same bytes as SDMA packets: opcode 0 sub-op 0x37 is unknown.
    assert!(r.faulted[2]);
    let r = kfd_emu::engine::fuzz_ring_report(&[]);
    assert_eq!(r.rptr, [0, 0, 0]);
    assert_eq!(r.faulted, [false, false, false]);
}

#[test]
fn aql_profiling_writes_signal_timestamps() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 8 * 64, 7, 100);
    let plain = signal(&sigs, 0, 1, None);
    q.submit_aql(&gpu, &barrier_and(&[], plain));
    q.wait_idle();
    assert_eq!(
        sigs.load_u64(plain + 32).unwrap(),
        0,
        "no timestamps without profiling"
    );
    // amd_queue_t.queue_properties (offset 180) |= AMD_QUEUE_PROPERTIES_ENABLE_PROFILING.
    q.ptrs.store_u32(q.ptrs.va() + 180, 1 << 3).unwrap();
    let dep = signal(&sigs, 1, 1, None);
    let timed = signal(&sigs, 2, 1, None);
    let before = gpu.eng.gpu_clock();
    q.submit_aql(&gpu, &barrier_and(&[dep], timed));
    std::thread::sleep(Duration::from_millis(20));
    sigs.store_u64(dep + 8, 0).unwrap();
    q.wait_idle();
    let after = gpu.eng.gpu_clock();
    assert_eq!(sig_value(&sigs, timed), 0);
    let (start, end) = (
        sigs.load_u64(timed + 32).unwrap(),
        sigs.load_u64(timed + 40).unwrap(),
    );
    assert!(
        before <= start && start <= end && end <= after,
        "{before} {start} {end} {after}"
    );
    // The barrier waited ~20 ms = 2,000,000 ticks at 100 MHz: start_ts is the fetch, not
    // the completion — unless a loaded host kept the engine from fetching it for half the
    // hold, which the second clause accepts (an order fact, not a timing race).
    assert!(
        end - start >= 1_000_000 || start - before >= 1_000_000,
        "start-before={} end-start={}",
        start - before,
        end - start
    );
}

// --------------------------------------------------------------------------- firmware rules

/// Runs `words` as the indirect buffer of one AQL PM4-IB packet on `gpu`; returns the
/// queue, its completion signal and the signal window.
fn run_ib(gpu: &Gpu, words: &[u32], with_eop: bool) -> (Queue, u64, MemWindow) {
    let sigs = gpu.alloc(4096);
    let ib = gpu.alloc(4096);
    for (i, w) in words.iter().enumerate() {
        ib.store_u32(ib.va() + 4 * i as u64, *w).unwrap();
    }
    let mut q = Queue::create(gpu, QueueKind::Aql, 16 * 64, 7, 100, with_eop);
    let done = signal(&sigs, 0, 1, None);
    q.submit_aql(
        gpu,
        &AqlPacket::VendorPm4Ib(VendorPm4Ib {
            control: PacketControl::SYSTEM_BARRIER,
            ib: IndirectBuffer::new(ib.va(), words.len() as u32),
            completion_signal: done,
        }),
    );
    (q, done, sigs)
}

fn wait64(addr: u64) -> Vec<u32> {
    enc(Pm4Packet::WaitRegMem64(WaitRegMem64 {
        function: CompareFn::Equal,
        mem_space: MemSpace::Memory,
        operation: WaitOperation::WaitRegMem,
        engine: 0,
        cache_policy: CachePolicy::Lru,
        addr,
        reference: 0,
        mask: u64::MAX,
        poll_interval: 4,
    }))
}

/// kernel soc15d.h has no PACKET3_WAIT_REG_MEM64; nvd.h (gfx10+) has it (0x93).
#[test]
fn wait_reg_mem64_is_an_unknown_opcode_on_gfx9() {
    let gpu = Gpu::with(GfxFamily::Gfx9, 1);
    let data = gpu.alloc(4096);
    let (q, done, sigs) = run_ib(&gpu, &wait64(data.va()), true);
    let f = gpu.faulted(&q);
    assert!(f.reason.contains("unknown PM4 opcode 0x93"), "{}", f.reason);
    assert_eq!(sig_value(&sigs, done), 1);
    let gpu = Gpu::with(GfxFamily::Gfx10, 1);
    let data = gpu.alloc(4096);
    let (q, done, sigs) = run_ib(&gpu, &wait64(data.va()), true);
    q.wait_idle();
    assert_eq!(sig_value(&sigs, done), 0);
}

/// Mesa cp_dma_max_byte_count: 32767 bytes per DMA_DATA on gfx11+.
#[test]
fn dma_data_above_32767_bytes_faults_on_gfx11() {
    for (fam, ok) in [(GfxFamily::Gfx9, true), (GfxFamily::Gfx11, false)] {
        let gpu = Gpu::with(fam, 1);
        let data = gpu.alloc(1 << 17);
        let mut v = vec![0; 7];
        let d = DmaData::fill(data.va(), 0xAB, 32768);
        d.encode(fam, &mut v).unwrap();
        let (q, done, sigs) = run_ib(&gpu, &v, true);
        if ok {
            q.wait_idle();
            assert_eq!(sig_value(&sigs, done), 0);
            assert_eq!(data.load_u32(data.va() + 32764).unwrap(), 0xAB);
        } else {
            let f = gpu.faulted(&q);
            assert!(f.reason.contains("at most 32767 bytes"), "{}", f.reason);
            assert_eq!(data.load_u32(data.va()).unwrap(), 0);
        }
    }
}

/// tinygrad ops_amd.py: RELEASE_MEM needs an EOP buffer "or it will NULL pointer".
#[test]
fn end_of_pipe_release_mem_without_eop_buffer_faults() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let words = release_mem(DataSel::GpuClock, IntSel::None, data.va(), 0, 0);
    let (q, _, _) = run_ib(&gpu, &words, false);
    let f = gpu.faulted(&q);
    assert_eq!(f.fault.map(|f| f.va), Some(0), "{}", f.reason);
    assert!(f.reason.contains("without an EOP buffer"), "{}", f.reason);
    assert_eq!(data.load_u64(data.va()).unwrap(), 0);
    // With an EOP buffer the same packet writes the clock.
    let (q, _, _) = run_ib(&gpu, &words, true);
    q.wait_idle();
    assert_ne!(data.load_u64(data.va()).unwrap(), 0);
}

/// Every XCC runs the indirect buffer: an unpredicated ATOMIC_MEM add lands once per XCC,
/// one under PRED_EXEC(xcc_mask = 1) once; the completion signal drops once.
#[test]
fn multi_xcc_runs_the_ib_per_xcc_and_honours_pred_exec() {
    let gpu = Gpu::with(GfxFamily::Gfx9, 8);
    let data = gpu.alloc(4096);
    let (a, b) = (data.va(), data.va() + 8);
    let mut words = atomic(tc_op::ADD_RTN_64, a, 1, 0); // every XCC
    let pred = atomic(tc_op::ADD_RTN_64, b, 1, 0);
    words.extend(enc(Pm4Packet::PredExec(pkt3::PredExec {
        exec_count: pred.len() as u16,
        xcc_mask: 1,
    })));
    words.extend(pred);
    let (q, done, sigs) = run_ib(&gpu, &words, true);
    q.wait_idle();
    assert_eq!(data.load_u64(a).unwrap(), 8);
    assert_eq!(data.load_u64(b).unwrap(), 1);
    assert_eq!(sig_value(&sigs, done), 0);
}

/// An IB made only of PRED_EXEC-guarded packets: each XCC runs exactly what its masks
/// select (the passes of XCCs no mask selects do nothing), in order, and the completion
/// signal drops once after the last XCC.
#[test]
fn multi_xcc_pred_exec_only_ib_runs_the_selected_xccs() {
    let gpu = Gpu::with(GfxFamily::Gfx9, 8);
    let data = gpu.alloc(4096);
    let (a, b, c) = (data.va(), data.va() + 8, data.va() + 16);
    let mut words = Vec::new();
    for (addr, xcc_mask) in [(a, 1u8 << 5), (b, 1), (c, 0b1000_0100), (c, 0)] {
        let pred = atomic(tc_op::ADD_RTN_64, addr, 1, 0);
        words.extend(enc(Pm4Packet::PredExec(pkt3::PredExec {
            exec_count: pred.len() as u16,
            xcc_mask,
        })));
        words.extend(pred);
    }
    // Twice in a row, so the second IB starts after the first one's skipped passes.
    for round in 1..=2u64 {
        let (q, done, sigs) = run_ib(&gpu, &words, true);
        q.wait_idle();
        assert_eq!(sig_value(&sigs, done), 0);
        assert_eq!(data.load_u64(a).unwrap(), round, "XCC 5 only");
        assert_eq!(data.load_u64(b).unwrap(), round, "XCC 0 only");
        assert_eq!(data.load_u64(c).unwrap(), 2 * round, "XCCs 2 and 7");
    }
}

/// A packet only a later XCC's PRED_EXEC selects is decoded on that XCC: a malformed one
/// there stops the queue although XCC 0 skipped it, and the completion signal stays up.
#[test]
fn multi_xcc_pred_exec_fault_on_a_later_xcc() {
    let gpu = Gpu::with(GfxFamily::Gfx9, 8);
    let data = gpu.alloc(4096);
    let mut words = enc(Pm4Packet::PredExec(pkt3::PredExec {
        exec_count: 3,
        xcc_mask: 1 << 6,
    }));
    // Type-3 header of 3 dwords with an opcode no firmware knows.
    words.extend([0xC001_9900, 0, 0]);
    let pred = atomic(tc_op::ADD_RTN_64, data.va(), 1, 0);
    words.extend(enc(Pm4Packet::PredExec(pkt3::PredExec {
        exec_count: pred.len() as u16,
        xcc_mask: 1,
    })));
    words.extend(pred);
    let (q, done, sigs) = run_ib(&gpu, &words, true);
    let f = gpu.faulted(&q);
    assert!(f.reason.contains("0x99"), "{}", f.reason);
    assert_eq!(
        data.load_u64(data.va()).unwrap(),
        1,
        "XCC 0 ran before XCC 6 faulted"
    );
    assert_eq!(sig_value(&sigs, done), 1);
}

/// The trace shows the duplication: one WRITE_DATA in an IB is executed (and recorded)
/// once per XCC; under PRED_EXEC(XCC 0) the others skip it.
#[test]
fn multi_xcc_trace_counts_ib_packets_per_xcc() {
    use kfd_emu::trace::TraceKind;
    let gpu = Gpu::with(GfxFamily::Gfx9, 4);
    let data = gpu.alloc(4096);
    let mut words = write_data(data.va(), &[1]);
    let pred = write_data(data.va() + 8, &[2]);
    words.extend(enc(Pm4Packet::PredExec(pkt3::PredExec {
        exec_count: pred.len() as u16,
        xcc_mask: 1,
    })));
    words.extend(pred);
    gpu.eng.trace().set_enabled(true);
    let (q, done, sigs) = run_ib(&gpu, &words, true);
    q.wait_idle();
    assert_eq!(sig_value(&sigs, done), 0);
    let ev = gpu.eng.take_trace();
    let count = |name: &str, depth: u8| {
        ev.iter()
            .filter(|e| {
                matches!(&e.kind, TraceKind::Packet { name: n, ib_depth, .. }
                    if *n == name && *ib_depth == depth)
            })
            .count()
    };
    // Each XCC runs the IB: 4 PRED_EXECs, 4 + 1 WRITE_DATAs (the predicated one once).
    assert_eq!(count("PRED_EXEC", 1), 4);
    assert_eq!(count("WRITE_DATA", 1), 5);
    assert_eq!(data.load_u32(data.va() + 8).unwrap(), 2);
}

/// What ROCr's SDMA blits end with (blit_sdma.cpp): its HDP-flush template, a
/// POLL_REGMEM on a register with compare function "always", passes at once; an ATOMIC
/// ADD64 of u64::MAX decrements the completion signal; other atomic operations fault.
#[test]
fn sdma_rocr_hdp_flush_and_atomic_decrement() {
    let gpu = Gpu::new();
    let data = gpu.alloc(4096);
    let d = data.va();
    data.store_u64(d, 5).unwrap();
    let mut q = Queue::new(&gpu, QueueKind::Sdma { engine: 0 }, 4096, 7, 100);
    // The template's words: {0x8, 0, 0x80000000, 0, 0, 0}.
    let (pkt, n) =
        pm4::sdma::decode_sdma(&[0x8, 0, 0x8000_0000, 0, 0, 0], pm4::SdmaVersion::V4).unwrap();
    assert_eq!(n, 6);
    q.submit_sdma(&gpu, &pkt);
    let atomic = sdma::Atomic {
        atomic_op: sdma::ATOMIC_ADD64,
        loop_: false,
        tmz: false,
        addr: d,
        src_data: u64::MAX,
        cmp_data: 0,
        loop_interval: 0,
    };
    // Round trip through the encoder and decoder.
    let w = sdma_words(&SdmaPacket::Atomic(atomic));
    assert_eq!(w.len(), 8);
    assert_eq!(w[0], 10 | (47 << 25));
    let (back, _) = pm4::sdma::decode_sdma(&w, pm4::SdmaVersion::V4).unwrap();
    assert_eq!(back, SdmaPacket::Atomic(atomic));
    q.submit_sdma(&gpu, &SdmaPacket::Atomic(atomic));
    q.submit_sdma(&gpu, &SdmaPacket::Fence(sdma::Fence::new(d + 8, 1)));
    assert!(wait_until(|| data.load_u32(d + 8).unwrap() == 1));
    assert_eq!(data.load_u64(d).unwrap(), 4);
    // A compare-swap (not modelled) stops the queue with a message naming it.
    q.submit_sdma(
        &gpu,
        &SdmaPacket::Atomic(sdma::Atomic {
            atomic_op: 40,
            ..atomic
        }),
    );
    let f = gpu.faulted(&q);
    assert!(f.reason.contains("ATOMIC operation 40"), "{}", f.reason);
    assert_eq!(data.load_u64(d).unwrap(), 4);
}

/// Two busy AQL queues of one priority at percentage 2 (a quantum of 5 packets) take
/// turns, 5 packets each, the first-added queue first: every PM4 packet of a PM4-IB's
/// buffer counts (once per XCC pass that runs it), the AQL packet itself counts when it
/// completes, and a quantum may end inside a buffer (the next turn goes on from there).
/// Each buffer logs the order of its ATOMIC_MEM among all queues (COPY_DATA of the
/// atomic's return value); the log must equal the turn-taking model's, on one XCC and on
/// eight.
#[test]
fn aql_busy_queues_take_turns_by_quantum() {
    for num_xcc in [1, 8] {
        let gpu = Gpu::with(GfxFamily::Gfx9, num_xcc);
        let data = gpu.alloc(4096);
        let ibs = gpu.alloc(64 * 1024);
        let counter = data.va();
        gpu.eng.pause();
        let mut qs = [
            Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 2),
            Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 2),
        ];
        // Per queue, in order: 1 = PM4-IB (atomic + copy), 2 = PM4-IB of one WRITE_DATA
        // (the CP completes it in the pass that ran its buffer when budget is left), 0 = a
        // barrier without dependencies.
        let shapes: [&[u8]; 2] = [
            &[1, 0, 2, 1, 1, 0, 2, 1, 1, 2, 1, 2, 2, 0, 1],
            &[0, 2, 1, 1, 0, 2, 0, 1, 1, 2, 2, 0, 2, 1, 0],
        ];
        // The model: each queue's packet units in execution order, `Some(log index)` for
        // an ATOMIC_MEM whose return value lands at that log index.
        let mut units: [Vec<Option<usize>>; 2] = [Vec::new(), Vec::new()];
        let mut next_ib = ibs.va();
        let mut logs = 0usize;
        for (qi, shape) in shapes.iter().enumerate() {
            for &kind in shape.iter() {
                // Writes the buffer at `next_ib` and submits it on queue `qi`.
                let mut submit_ib = |w: &[u32], next_ib: &mut u64| {
                    for (i, d) in w.iter().enumerate() {
                        ibs.store_u32(*next_ib + 4 * i as u64, *d).unwrap();
                    }
                    qs[qi].submit_aql(
                        &gpu,
                        &AqlPacket::VendorPm4Ib(VendorPm4Ib {
                            control: PacketControl::SYSTEM_BARRIER,
                            ib: IndirectBuffer::new(*next_ib, w.len() as u32),
                            completion_signal: 0,
                        }),
                    );
                    *next_ib += 256;
                };
                if kind == 2 {
                    submit_ib(&write_data(data.va() + 2048, &[7]), &mut next_ib);
                    for _ in 0..num_xcc {
                        units[qi].push(None);
                    }
                } else if kind == 1 {
                    let log = data.va() + 64 + 4 * logs as u64;
                    let mut w = atomic(15, counter, 1, 0); // ADD_RTN_32
                    w.extend(copy_data(pkt3::copy_sel::ATOMIC_RETURN_DATA, 0, log, false));
                    assert!(w.len() <= 16, "the buffer stays on the one-read path");
                    submit_ib(&w, &mut next_ib);
                    for _ in 0..num_xcc {
                        units[qi].push(Some(logs));
                        units[qi].push(None);
                    }
                    logs += 1;
                } else {
                    qs[qi].submit_aql(&gpu, &barrier_and(&[], 0));
                }
                units[qi].push(None);
            }
        }
        // Turns of 5 units, queue 0 first, until both ran out.
        let mut expect = vec![0u32; logs];
        let (mut pos, mut turn, mut count) = ([0usize; 2], 0usize, 0u32);
        while pos[0] < units[0].len() || pos[1] < units[1].len() {
            for _ in 0..5 {
                let Some(u) = units[turn].get(pos[turn]) else {
                    break;
                };
                if let Some(log) = u {
                    expect[*log] = count;
                    count += 1;
                }
                pos[turn] += 1;
            }
            turn ^= 1;
        }
        gpu.eng.resume();
        for q in &qs {
            q.wait_idle();
        }
        let seen: Vec<u32> = (0..logs as u64)
            .map(|i| data.load_u32(data.va() + 64 + 4 * i).unwrap())
            .collect();
        assert_eq!(seen, expect, "{num_xcc} XCC(s)");
        assert_eq!(data.load_u32(counter).unwrap(), count);
    }
}

/// A PM4-IB packet whose buffer faults reports the AQL slot's ring offset, whether the
/// bad packet is the buffer's first (run with the push) or a later one, and the packets
/// before it ran.
#[test]
fn aql_pm4_ib_fault_reports_the_slot_offset() {
    for bad_first in [true, false] {
        let gpu = Gpu::new();
        let data = gpu.alloc(4096);
        let ib = gpu.alloc(4096);
        let mut q = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
        q.submit_aql(&gpu, &barrier_and(&[], 0));
        q.submit_aql(&gpu, &barrier_and(&[], 0));
        q.wait_idle();
        let mut words = if bad_first {
            Vec::new()
        } else {
            write_data(data.va(), &[5])
        };
        words.extend([pkt3::packet3(0x99, 1), 0, 0]);
        for (i, w) in words.iter().enumerate() {
            ib.store_u32(ib.va() + 4 * i as u64, *w).unwrap();
        }
        q.submit_aql(
            &gpu,
            &AqlPacket::VendorPm4Ib(VendorPm4Ib {
                control: PacketControl::SYSTEM_BARRIER,
                ib: IndirectBuffer::new(ib.va(), words.len() as u32),
                completion_signal: 0,
            }),
        );
        let f = gpu.faulted(&q);
        assert_eq!(f.packet_offset, 2 * 64, "{f:?}");
        assert!(f.reason.contains("0x99"), "{}", f.reason);
        assert_eq!(q.rptr(), 2);
        let expect = if bad_first { 0 } else { 5 };
        assert_eq!(data.load_u32(data.va()).unwrap(), expect);
    }
}

/// The indirect buffer and the one-dword WRITE_DATA destination of PM4-IB packets are
/// reached through windows the queue keeps: after an unmap (`flush_tlb`) the next packet
/// translates afresh. A buffer remapped at the same address runs its new contents into
/// the new destination object; an unmapped destination or buffer faults the queue at the
/// packet's slot with the memory fault, and nothing is written through a stale window.
#[test]
fn aql_pm4_ib_windows_follow_unmap() {
    let gpu = Gpu::new();
    let ib = gpu.alloc(4096);
    let data = gpu.alloc(4096);
    let (ib_va, d) = (ib.va(), data.va());
    let mut q = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let pm4_ib = |len: usize| {
        AqlPacket::VendorPm4Ib(VendorPm4Ib {
            control: PacketControl::SYSTEM_BARRIER,
            ib: IndirectBuffer::new(ib_va, len as u32),
            completion_signal: 0,
        })
    };
    let put = |win: &MemWindow, words: &[u32]| {
        for (i, w) in words.iter().enumerate() {
            win.store_u32(win.va() + 4 * i as u64, *w).unwrap();
        }
    };
    let w1 = write_data(d + 4, &[11]);
    put(&ib, &w1);
    q.submit_aql(&gpu, &pm4_ib(w1.len()));
    q.wait_idle();
    assert_eq!(data.load_u32(d + 4).unwrap(), 11);

    // Both objects replaced at the same addresses: the new buffer, the new destination.
    assert!(gpu.mem.remove_region(ib_va) && gpu.mem.remove_region(d));
    gpu.eng.flush_tlb();
    let (ib2, data2) = (gpu.mem.add_region(ib_va, 4096), gpu.mem.add_region(d, 4096));
    let w2 = write_data(d + 4, &[22]);
    put(&ib2, &w2);
    q.submit_aql(&gpu, &pm4_ib(w2.len()));
    q.wait_idle();
    assert_eq!(data2.load_u32(d + 4).unwrap(), 22);
    assert_eq!(
        data.load_u32(d + 4).unwrap(),
        11,
        "written through a stale window"
    );

    // The destination unmapped: a write fault at the packet's slot (3rd packet).
    assert!(gpu.mem.remove_region(d));
    gpu.eng.flush_tlb();
    q.submit_aql(&gpu, &pm4_ib(w2.len()));
    let f = gpu.faulted(&q);
    assert_eq!(f.packet_offset, 2 * 64);
    let mf = f.fault.expect("a memory fault");
    assert_eq!((mf.va, mf.len, mf.write), (d + 4, 4, true));
    assert_eq!(mf.kind, FaultKind::NotMapped);
    assert_eq!(data2.load_u32(d + 4).unwrap(), 22);

    // The buffer unmapped: a read fault on a fresh queue.
    let data3 = gpu.mem.add_region(d, 4096);
    let mut q2 = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    q2.submit_aql(&gpu, &pm4_ib(w2.len()));
    q2.wait_idle();
    assert_eq!(data3.load_u32(d + 4).unwrap(), 22);
    assert!(gpu.mem.remove_region(ib_va));
    gpu.eng.flush_tlb();
    data3.store_u32(d + 4, 0).unwrap();
    q2.submit_aql(&gpu, &pm4_ib(w2.len()));
    let f = gpu.faulted(&q2);
    assert_eq!(f.packet_offset, 64);
    let mf = f.fault.expect("a memory fault");
    assert_eq!((mf.va, mf.write), (ib_va, false));
    assert_eq!(data3.load_u32(d + 4).unwrap(), 0);
}

#[test]
fn aql_pm4_ib_slot_is_released_from_its_fetched_header() {
    // The packet processor owns a published slot until the read index passes it: the
    // header it releases (INVALID, upper 16 bits kept) comes from the packet as
    // fetched, even when the packet's own indirect buffer wrote over the slot meanwhile.
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let ib = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 16 * 64, 7, 100);
    let slot_va = q.ring.va();
    let done = signal(&sigs, 0, 1, None);
    let pkt = AqlPacket::VendorPm4Ib(VendorPm4Ib {
        control: PacketControl::SYSTEM_BARRIER,
        ib: IndirectBuffer::new(ib.va(), 0),
        completion_signal: done,
    });
    let fetched = pkt.encode()[0];
    let scribble = 0x5a5a_0000 | (fetched & 0xffff);
    assert_ne!(scribble, fetched);
    let words = write_data(slot_va, &[scribble]);
    for (i, w) in words.iter().enumerate() {
        ib.store_u32(ib.va() + 4 * i as u64, *w).unwrap();
    }
    let pkt = AqlPacket::VendorPm4Ib(VendorPm4Ib {
        control: PacketControl::SYSTEM_BARRIER,
        ib: IndirectBuffer::new(ib.va(), words.len() as u32),
        completion_signal: done,
    });
    assert_eq!(pkt.encode()[0], fetched, "the IB size is not in the header");
    q.submit_aql(&gpu, &pkt);
    q.wait_idle();
    assert_eq!(sig_value(&sigs, done), 0);
    assert_eq!(
        q.ring.load_u32(slot_va).unwrap(),
        (fetched & 0xffff_0000) | u32::from(pm4::aql::packet_type::INVALID),
        "released from the fetched header, not the IB's write"
    );
}

/// Submits `n` barrier packets one at a time, each waited for, with gaps that cross the
/// CP's idle spin windows (so it is spinning, parked, or just parking when a doorbell
/// arrives); returns the CP's doorbell counter before and after the loop.
fn doorbells_across_parks(gpu: &Gpu, n: usize, db_len: usize) -> (u64, u64) {
    let sigs = gpu.alloc(4096);
    let mut q = Queue::with_doorbell(gpu, QueueKind::Aql, 64 * 64, 7, 100, true, db_len);
    // The queue's first doorbell goes through the counter (the engine learns the cell).
    q.submit_aql(gpu, &barrier_and(&[], 0));
    q.wait_idle();
    let before = gpu.eng.doorbell_counter();
    let gaps = [0u64, 3, 30, 150, 2_000];
    for i in 0..n {
        let done = signal(&sigs, (i % 64) as u64, 1, None);
        q.submit_aql(gpu, &barrier_and(&[], done));
        assert!(
            wait_until(|| sig_value(&sigs, done) == 0),
            "doorbell {i} was not seen"
        );
        std::thread::sleep(Duration::from_micros(gaps[i % gaps.len()]));
    }
    q.wait_idle();
    (before, gpu.eng.doorbell_counter())
}

/// Where the process can issue expedited memory barriers, the CP watches its queues'
/// doorbell values: no doorbell after a queue's first one touches the engine's counter,
/// and none is lost whether the CP is running, spinning or parked when it arrives.
#[test]
fn watched_doorbells_wake_the_cp_without_its_counter() {
    let gpu = Gpu::new();
    let (before, after) = doorbells_across_parks(&gpu, 100, 8);
    if gpu.eng.doorbell_watch() {
        assert_eq!(after, before, "a watched doorbell bumped the counter");
    } else {
        // No membarrier here: every doorbell takes the counter.
        assert!(after >= before + 100, "counter {before} -> {after}");
    }
}

/// With the watch off every doorbell bumps the counter, and none is lost either.
#[test]
fn unwatched_doorbells_bump_the_counter() {
    let gpu = Gpu::new();
    assert!(!gpu.eng.set_doorbell_watch(false));
    assert!(!gpu.eng.doorbell_watch());
    let (before, after) = doorbells_across_parks(&gpu, 40, 8);
    assert!(after >= before + 40, "counter {before} -> {after}");
}

/// A re-poll request (the host wrote memory a blocked packet waits on; no doorbell value
/// changed) reaches a CP that watches doorbells: with the periodic re-poll off, only the
/// request resumes the blocked barrier.
#[test]
fn repoll_resumes_a_blocked_barrier_without_a_doorbell() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 100);
    let dep = signal(&sigs, 0, 1, None);
    let done = signal(&sigs, 1, 1, None);
    q.submit_aql(&gpu, &barrier_and(&[dep], done));
    std::thread::sleep(Duration::from_millis(20));
    gpu.eng.set_blocked_repoll(false);
    // The switch itself kicks the engine once: let that re-poll pass first.
    std::thread::sleep(Duration::from_millis(20));
    sigs.store_u64(dep + 8, 0).unwrap();
    // Long enough for the CP to park: nothing re-polls the barrier on its own now.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        sig_value(&sigs, done),
        1,
        "resumed without a re-poll request"
    );
    gpu.eng.repoll(q.id);
    assert!(wait_until(|| sig_value(&sigs, done) == 0));
    gpu.eng.set_blocked_repoll(true);
    q.wait_idle();
}

/// Publishes on `q` a PM4-IB packet completing on `completion` whose indirect buffer (in
/// `ib`) is one WAIT_REG_MEM for the dword at `gate` to equal 1: the queue then blocks
/// inside that packet until the host stores 1 there.
fn submit_gated_ib(gpu: &Gpu, q: &mut Queue, ib: &MemWindow, gate: u64, completion: u64) {
    let words = wait_mem(gate, CompareFn::Equal, 1);
    for (i, w) in words.iter().enumerate() {
        ib.store_u32(ib.va() + 4 * i as u64, *w).unwrap();
    }
    q.submit_aql(
        gpu,
        &AqlPacket::VendorPm4Ib(VendorPm4Ib {
            control: PacketControl::SYSTEM_BARRIER,
            ib: IndirectBuffer::new(ib.va(), words.len() as u32),
            completion_signal: completion,
        }),
    );
}

/// While it has other work, the CP reads the doorbells of a queue blocked inside a packet
/// it fetched (a PM4-IB's WAIT_REG_MEM) and of idle queues only every 250 ns: no packet
/// is lost either way. Packets queued behind the wait
/// with their doorbells run once the host releases the wait (a plain memory write, no
/// doorbell), and an idle queue rung meanwhile, again and again, runs each packet while
/// the wait still blocks.
#[test]
fn doorbells_of_blocked_and_idle_queues_are_not_lost() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let data = gpu.alloc(4096);
    let ib = gpu.alloc(4096);
    let mut blocked = Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 100);
    let mut idle = Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 100);
    let gate = data.va();
    let waited = signal(&sigs, 0, 1, None);
    submit_gated_ib(&gpu, &mut blocked, &ib, gate, waited);
    // Behind the wait: each with a doorbell the CP does not need to read.
    let behind: Vec<u64> = (0..20).map(|i| signal(&sigs, 1 + i, 1, None)).collect();
    for &sig in &behind {
        blocked.submit_aql(&gpu, &barrier_and(&[], sig));
    }
    // The idle queue, rung while the wait blocks: each packet runs on its own.
    for i in 0..20 {
        let sig = signal(&sigs, 40 + i, 1, None);
        idle.submit_aql(&gpu, &barrier_and(&[], sig));
        assert!(
            wait_until(|| sig_value(&sigs, sig) == 0),
            "idle queue's packet {i} did not run while the other queue blocked"
        );
    }
    assert_eq!(
        blocked.rptr(),
        0,
        "the wait passed before its memory was written"
    );
    assert_eq!(sig_value(&sigs, waited), 1);
    assert!(behind.iter().all(|&s| sig_value(&sigs, s) == 1));
    data.store_u32(gate, 1).unwrap();
    blocked.wait_idle();
    assert_eq!(sig_value(&sigs, waited), 0);
    for (i, &s) in behind.iter().enumerate() {
        assert_eq!(sig_value(&sigs, s), 0, "packet {i} behind the wait");
    }
    idle.wait_idle();
}

/// A doorbell on a queue blocked inside a packet re-polls it: with the periodic re-poll
/// off, a host that stores the value a PM4-IB's WAIT_REG_MEM waits for and then publishes
/// another packet on that queue (ringing its doorbell) resumes the wait. (The engine reads
/// a blocked queue's doorbell only now and then while busy; it must still see this one.)
#[test]
fn a_doorbell_on_a_queue_blocked_in_a_packet_re_polls_it() {
    let gpu = Gpu::new();
    let sigs = gpu.alloc(4096);
    let data = gpu.alloc(4096);
    let ib = gpu.alloc(4096);
    let mut q = Queue::new(&gpu, QueueKind::Aql, 64 * 64, 7, 100);
    let gate = data.va();
    let waited = signal(&sigs, 0, 1, None);
    submit_gated_ib(&gpu, &mut q, &ib, gate, waited);
    std::thread::sleep(Duration::from_millis(20));
    gpu.eng.set_blocked_repoll(false);
    // The switch itself kicks the engine once: let that re-poll pass first.
    std::thread::sleep(Duration::from_millis(20));
    data.store_u32(gate, 1).unwrap();
    // Long enough for the CP to park: nothing re-polls the wait on its own now.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(sig_value(&sigs, waited), 1, "resumed without a doorbell");
    let after = signal(&sigs, 1, 1, None);
    q.submit_aql(&gpu, &barrier_and(&[], after));
    assert!(
        wait_until(|| sig_value(&sigs, after) == 0),
        "the doorbell on the blocked queue did not re-poll its wait"
    );
    assert_eq!(sig_value(&sigs, waited), 0);
    gpu.eng.set_blocked_repoll(true);
    q.wait_idle();
}

/// A queue whose doorbell window holds no readable 64-bit value (4 bytes here) is not
/// watched: its doorbells bump the counter even on a CP that watches doorbells, and none
/// is lost.
#[test]
fn doorbells_the_cp_cannot_read_bump_the_counter() {
    let gpu = Gpu::new();
    let (before, after) = doorbells_across_parks(&gpu, 40, 4);
    assert!(after >= before + 40, "counter {before} -> {after}");
}
