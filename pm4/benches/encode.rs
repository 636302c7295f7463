//! Encoding costs: an AQL barrier into an AQL ring (body relaxed, header
//! release), and a WAIT_REG_MEM into a PM4 ring (plain slice and atomics).
use std::hint::black_box;
use std::sync::atomic::AtomicU32;

use criterion::{criterion_group, criterion_main, Criterion};
use pm4::aql::{AqlPacket, AqlRingWriter, Barrier, PacketControl};
use pm4::pkt3::{CompareFn, Pm4Packet, Pm4RingWriter, WaitRegMem};
use pm4::sdma::{self, SdmaPacket, SdmaRingWriter};
use pm4::{GfxFamily, SdmaVersion};

fn bench(c: &mut Criterion) {
    let aql_ring: Vec<AtomicU32> = (0..256 * 16).map(|_| AtomicU32::new(0)).collect();
    pm4::aql::init_invalid(&aql_ring);
    let w = AqlRingWriter::new(&aql_ring).unwrap();
    let mut idx = 0u64;
    c.bench_function("aql_barrier_and_ring_write", |b| {
        b.iter(|| {
            let pkt = AqlPacket::BarrierAnd(Barrier {
                control: PacketControl::SYSTEM_BARRIER,
                dep_signals: [black_box(0x7F00_0000_1000), 0, 0, 0, 0],
                completion_signal: black_box(0x7F00_0000_2000),
            });
            idx = w.write(idx + 1, &pkt);
            idx
        })
    });

    let mut ring = vec![0u32; 4096];
    let mut off = 0usize;
    c.bench_function("wait_reg_mem_encode_slice", |b| {
        b.iter(|| {
            let p = WaitRegMem::memory(
                CompareFn::GreaterEqual,
                black_box(0x7F00_0000_1000),
                black_box(5),
                !0,
                4,
            );
            off = (off + WaitRegMem::DWORDS) & 4095;
            if off + WaitRegMem::DWORDS > 4096 {
                off = 0;
            }
            p.encode(GfxFamily::Gfx9, &mut ring[off..]).unwrap()
        })
    });

    let pm4_ring: Vec<AtomicU32> = (0..4096).map(|_| AtomicU32::new(0)).collect();
    let pw = Pm4RingWriter::new(&pm4_ring, GfxFamily::Gfx11).unwrap();
    let mut wptr = 0u64;
    c.bench_function("wait_reg_mem_pm4_ring_write", |b| {
        b.iter(|| {
            let p = Pm4Packet::WaitRegMem(WaitRegMem::memory(
                CompareFn::GreaterEqual,
                black_box(0x7F00_0000_1000),
                black_box(5),
                !0,
                4,
            ));
            wptr = pw.write(wptr, &p).unwrap();
            wptr
        })
    });

    let sdma_ring: Vec<AtomicU32> = (0..4096).map(|_| AtomicU32::new(0)).collect();
    let sw = SdmaRingWriter::new(&sdma_ring, SdmaVersion::V6).unwrap();
    let mut swptr = 0u64;
    c.bench_function("sdma_copy_linear_ring_write", |b| {
        b.iter(|| {
            let p = SdmaPacket::CopyLinear(sdma::CopyLinear {
                src: black_box(0x1000),
                dst: black_box(0x2000),
                bytes: 4096,
                tmz: false,
                parameter: 0,
            });
            swptr = sw.write(swptr, &p).unwrap();
            swptr
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
