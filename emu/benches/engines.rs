//! Engine benchmarks: packet rates of AQL barrier-AND and PM4 WRITE_DATA on one queue,
//! doorbell-to-first-packet wake-up latency of an idle (parked) CP, and SDMA COPY_LINEAR
//! bandwidth next to a host memcpy of the same size.
//!
//! Packet-rate benches fill the ring while the engines are paused and time from resume
//! to the last packet, so only engine work is measured.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use kfd_emu::engine::{EngineConfig, GpuEngines, Interrupts, QueueDesc, QueueFault, QueueKind};
use kfd_emu::gpumem::{HeapMemory, MemWindow};
use pm4::aql::{AqlPacket, Barrier, PacketControl};
use pm4::pkt3::{CachePolicy, Pm4Packet, WriteData, WriteDataDst};
use pm4::sdma::{self, SdmaPacket};
use pm4::{GfxFamily, SdmaVersion};

/// A queue's EOP buffer: 64 bytes at the end of its pointer page (the engines only need
/// it to be present; end-of-pipe RELEASE_MEM faults on a queue without one).
fn eop_va(ptrs: &MemWindow) -> u64 {
    ptrs.va() + 192
}

struct NoIrq;
impl Interrupts for NoIrq {
    fn event_interrupt(&self, _: u32, _: Option<u32>) {}
    fn queue_fault(&self, _: u32, f: &QueueFault) {
        panic!("unexpected queue fault: {f:?}");
    }
}

static NEXT_ID: AtomicU32 = AtomicU32::new(1);

struct Setup {
    mem: Arc<HeapMemory>,
    eng: GpuEngines,
    next: u64,
}

impl Setup {
    fn new() -> Setup {
        let mem = Arc::new(HeapMemory::new());
        let cfg = EngineConfig {
            gpu_id: 0xBE00 + NEXT_ID.fetch_add(1, Ordering::Relaxed),
            family: GfxFamily::Gfx9,
            sdma_version: SdmaVersion::V4,
            num_sdma_engines: 1,
            clock_hz: 0,
            num_xcc: 1,
            gfx_target_version: 0,
            sramecc: false,
        };
        let eng = GpuEngines::new(cfg, mem.clone(), Arc::new(NoIrq));
        Setup {
            mem,
            eng,
            next: 0x1_0000_0000,
        }
    }
    fn alloc(&mut self, len: usize) -> MemWindow {
        let va = self.next;
        self.next += (len as u64).div_ceil(1 << 21) * (1 << 21) + (1 << 21);
        self.mem.add_region(va, len)
    }
    /// A queue; returns (id, ring, ptrs, rptr_va, wptr_va, doorbell).
    fn queue(&mut self, kind: QueueKind, ring_size: usize) -> Q {
        let ring = self.alloc(ring_size);
        let ptrs = self.alloc(256);
        let db = self.alloc(8);
        let (rptr_va, wptr_va) = match kind {
            QueueKind::Aql => (ptrs.va() + 128, ptrs.va() + 56),
            _ => (ptrs.va(), ptrs.va() + 8),
        };
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        self.eng.add_queue(QueueDesc {
            queue_id: id,
            gpu_id: self.eng.config().gpu_id,
            kind,
            ring_va: ring.va(),
            ring_size: ring_size as u32,
            rptr_va,
            wptr_va,
            doorbell: db.clone(),
            priority: 7,
            percentage: 100,
            eop_va: eop_va(&ptrs),
            ctx_save_va: 0,
        });
        Q {
            id,
            ring,
            ptrs,
            rptr_va,
            wptr_va,
            db,
            wptr: 0,
        }
    }
}

struct Q {
    id: u32,
    ring: MemWindow,
    ptrs: MemWindow,
    rptr_va: u64,
    wptr_va: u64,
    db: MemWindow,
    wptr: u64,
}

impl Q {
    fn publish(&self, eng: &GpuEngines, db_value: u64) {
        self.ptrs.store_u64(self.wptr_va, self.wptr).unwrap();
        self.db.store_u64(self.db.va(), db_value).unwrap();
        eng.doorbell(self.id);
    }
    /// Waits without taking a core from the engine (the machine may have two).
    fn wait_rptr(&self, target: u64) {
        while self.ptrs.load_u64(self.rptr_va).unwrap() < target {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

fn bench_packet_rates(c: &mut Criterion) {
    let mut g = c.benchmark_group("packet_rate");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));

    // AQL barrier-AND with two satisfied dependencies and a completion signal.
    {
        const SLOTS: u64 = 1 << 16;
        let mut s = Setup::new();
        let sigs = s.alloc(4096);
        let (a, b, done) = (sigs.va(), sigs.va() + 64, sigs.va() + 128);
        let mut q = s.queue(QueueKind::Aql, (SLOTS * 64) as usize);
        let mut deps = [0u64; 5];
        deps[0] = a;
        deps[1] = b;
        let words = AqlPacket::BarrierAnd(Barrier {
            control: PacketControl::SYSTEM_BARRIER,
            dep_signals: deps,
            completion_signal: done,
        })
        .encode();
        g.throughput(Throughput::Elements(SLOTS));
        g.bench_function(BenchmarkId::new("aql_barrier_and", SLOTS), |bch| {
            bch.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    s.eng.pause();
                    for i in 0..SLOTS {
                        let va = q.ring.va() + ((q.wptr + i) % SLOTS) * 64;
                        for (k, w) in words.iter().enumerate().skip(1) {
                            q.ring.store_u32(va + 4 * k as u64, *w).unwrap();
                        }
                        q.ring.store_u32(va, words[0]).unwrap();
                    }
                    q.wptr += SLOTS;
                    q.publish(&s.eng, q.wptr - 1);
                    let t = Instant::now();
                    s.eng.resume();
                    q.wait_rptr(q.wptr);
                    total += t.elapsed();
                }
                total
            })
        });
    }

    // PM4 WRITE_DATA of one dword.
    {
        const RING: usize = 1 << 20;
        let mut s = Setup::new();
        let data = s.alloc(4096);
        let mut q = s.queue(QueueKind::Pm4, RING);
        let mut pkt = [0u32; 5];
        Pm4Packet::WriteData(WriteData {
            dst_sel: WriteDataDst::Memory,
            addr_incr: true,
            wr_confirm: true,
            cache_policy: CachePolicy::Lru,
            engine_sel: 0,
            addr: data.va(),
            data: &[7],
        })
        .encode(GfxFamily::Gfx9, &mut pkt)
        .unwrap();
        let per_batch = (RING / 4 / 5) as u64 - 1;
        g.throughput(Throughput::Elements(per_batch));
        g.bench_function(BenchmarkId::new("pm4_write_data", per_batch), |bch| {
            bch.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let ring_dw = (RING / 4) as u64;
                for _ in 0..iters {
                    s.eng.pause();
                    for _ in 0..per_batch {
                        for w in pkt {
                            q.ring
                                .store_u32(q.ring.va() + (q.wptr % ring_dw) * 4, w)
                                .unwrap();
                            q.wptr += 1;
                        }
                    }
                    q.publish(&s.eng, q.wptr);
                    let t = Instant::now();
                    s.eng.resume();
                    q.wait_rptr(q.wptr);
                    total += t.elapsed();
                }
                total
            })
        });
    }
    g.finish();
}

fn bench_wakeup(c: &mut Criterion) {
    let mut g = c.benchmark_group("wakeup");
    g.sample_size(20)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    let mut s = Setup::new();
    let data = s.alloc(4096);
    let mut q = s.queue(QueueKind::Pm4, 1 << 16);
    let ring_dw = (1u64 << 16) / 4;
    let mut n = 0u32;
    g.bench_function("doorbell_to_first_packet", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                // Let the CP go idle and park.
                std::thread::sleep(Duration::from_micros(300));
                n = n.wrapping_add(1);
                let mut pkt = [0u32; 5];
                Pm4Packet::WriteData(WriteData {
                    dst_sel: WriteDataDst::Memory,
                    addr_incr: true,
                    wr_confirm: true,
                    cache_policy: CachePolicy::Lru,
                    engine_sel: 0,
                    addr: data.va(),
                    data: &[n],
                })
                .encode(GfxFamily::Gfx9, &mut pkt)
                .unwrap();
                for w in pkt {
                    q.ring
                        .store_u32(q.ring.va() + (q.wptr % ring_dw) * 4, w)
                        .unwrap();
                    q.wptr += 1;
                }
                let t = Instant::now();
                q.publish(&s.eng, q.wptr);
                while data.load_u32(data.va()).unwrap() != n {
                    std::hint::spin_loop();
                }
                total += t.elapsed();
            }
            total
        })
    });
    // Back-to-back: the next doorbell arrives while the CP is still in its post-idle
    // spin window (or, without one, just after it parked).
    g.bench_function("doorbell_back_to_back", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_micros(5) {
                    std::hint::spin_loop();
                }
                n = n.wrapping_add(1);
                let mut pkt = [0u32; 5];
                Pm4Packet::WriteData(WriteData {
                    dst_sel: WriteDataDst::Memory,
                    addr_incr: true,
                    wr_confirm: true,
                    cache_policy: CachePolicy::Lru,
                    engine_sel: 0,
                    addr: data.va(),
                    data: &[n],
                })
                .encode(GfxFamily::Gfx9, &mut pkt)
                .unwrap();
                for w in pkt {
                    q.ring
                        .store_u32(q.ring.va() + (q.wptr % ring_dw) * 4, w)
                        .unwrap();
                    q.wptr += 1;
                }
                let t = Instant::now();
                q.publish(&s.eng, q.wptr);
                while data.load_u32(data.va()).unwrap() != n {
                    std::hint::spin_loop();
                }
                total += t.elapsed();
            }
            total
        })
    });
    // The host-side cost of `GpuEngines::doorbell` on a queue with no new work.
    g.bench_function("doorbell_call", |bch| {
        bch.iter(|| s.eng.doorbell(std::hint::black_box(q.id)))
    });
    g.finish();
}

fn bench_sdma_copy(c: &mut Criterion) {
    const LEN: usize = 64 << 20;
    let mut g = c.benchmark_group("copy_64MiB");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Bytes(LEN as u64));
    let mut s = Setup::new();
    let src = s.alloc(LEN);
    let dst = s.alloc(LEN);
    let fence = s.alloc(64);
    let buf = vec![0x5Au8; 1 << 20];
    for i in 0..(LEN >> 20) as u64 {
        src.write(src.va() + (i << 20), &buf).unwrap();
        dst.write(dst.va() + (i << 20), &buf).unwrap();
    }
    let mut q = s.queue(QueueKind::Sdma { engine: 0 }, 1 << 16);
    let ring_dw = (1u64 << 16) / 4;
    let mut seq = 0u32;
    g.bench_function("sdma_copy_linear", |bch| {
        bch.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                seq = seq.wrapping_add(1);
                let mut words = Vec::new();
                for p in sdma::copy_linear_split(src.va(), dst.va(), LEN as u64, SdmaVersion::V4) {
                    let mut w = [0u32; 7];
                    SdmaPacket::CopyLinear(p)
                        .encode(SdmaVersion::V4, &mut w)
                        .unwrap();
                    words.extend(w);
                }
                let mut w = [0u32; 4];
                SdmaPacket::Fence(sdma::Fence::new(fence.va(), seq))
                    .encode(SdmaVersion::V4, &mut w)
                    .unwrap();
                words.extend(w);
                // Pad so no packet straddles the ring end.
                if (q.wptr / 4) % ring_dw + words.len() as u64 > ring_dw {
                    while (q.wptr / 4) % ring_dw != 0 {
                        q.ring
                            .store_u32(q.ring.va() + ((q.wptr / 4) % ring_dw) * 4, 0)
                            .unwrap();
                        q.wptr += 4;
                    }
                }
                for x in &words {
                    q.ring
                        .store_u32(q.ring.va() + ((q.wptr / 4) % ring_dw) * 4, *x)
                        .unwrap();
                    q.wptr += 4;
                }
                let t = Instant::now();
                q.publish(&s.eng, q.wptr);
                while fence.load_u32(fence.va()).unwrap() != seq {
                    std::thread::sleep(Duration::from_micros(20));
                }
                total += t.elapsed();
            }
            total
        })
    });
    let a = vec![1u8; LEN];
    let mut b = vec![0u8; LEN];
    g.bench_function("host_memcpy", |bch| {
        bch.iter(|| {
            b.copy_from_slice(std::hint::black_box(&a));
            std::hint::black_box(&b);
        })
    });
    g.finish();
}

criterion_group!(benches, bench_packet_rates, bench_wakeup, bench_sdma_copy);
criterion_main!(benches);
