//! Seed inputs: the packet streams the engine tests submit (writes, fences, interrupts,
//! waits released by the host, indirect buffers, copies, barriers on signals), written as
//! the choices the [`gen`](crate::gen) decoder reads, plus ioctl sessions and decoder
//! inputs. `cargo test` checks the committed files under `fuzz/seeds/` are current;
//! `KFDRT_FUZZ_WRITE_SEEDS=1 cargo test` rewrites them.

use crate::input::Enc;
use crate::rig::{DATA_VA, IB_VA, SIG_VA};

/// An address in the data region (selector 0: data + offset).
fn data(e: &mut Enc, off: u32) {
    e.u8(0).u32(off);
}

/// An address in the big region above 4 GiB.
fn big(e: &mut Enc, off: u32) {
    e.u8(5).u32(off);
}

/// Signal slot `k` (selector 2: slot = (26 + byte) % 64).
fn signal(e: &mut Enc, k: u8) {
    e.u8(2).u8((k + 64 - 26) % 64);
}

fn no_signal(e: &mut Enc) {
    e.u8(0);
}

fn words(e: &mut Enc, w: &[u32]) {
    e.u8(w.len() as u8 - 1);
    for x in w {
        e.u32(*x);
    }
}

mod pm4op {
    use super::*;
    pub fn write_data(e: &mut Enc, off: u32, w: &[u32]) {
        e.u8(2).u8(4).u8(0);
        data(e, off);
        words(e, w);
    }
    /// WAIT_REG_MEM equal on data+off, released by a host write.
    pub fn wait_eq(e: &mut Enc, off: u32, reference: u32, host_release: bool) {
        e.u8(3).u8(3).u8(if host_release { 0 } else { 2 });
        data(e, off);
        e.u32(reference).u8(4);
    }
    /// RELEASE_MEM (end of pipe, 32-bit value, interrupt after write confirm).
    pub fn release_mem(e: &mut Enc, off: u32, value: u64, ctxid: u32) {
        e.u8(5).u8(0).u8(2 | (1 << 2));
        data(e, off);
        e.u64(value).u32(ctxid);
    }
    pub fn copy_data(e: &mut Enc, src: u32, dst: u32) {
        e.u8(9).u8(0).u8(0);
        data(e, src);
        data(e, dst);
    }
    pub fn dma_data(e: &mut Enc, src: u32, dst: u32, len: u8) {
        e.u8(10).u8(0).u8(0);
        data(e, src);
        data(e, dst);
        e.u8(0).u8(len - 1);
    }
    pub fn atomic_add(e: &mut Enc, off: u32, v: u64) {
        e.u8(11).u8(0x2F).u8(0);
        data(e, off & !7);
        e.u64(v).u64(0);
    }
    pub fn nop(e: &mut Enc, dwords: u8) {
        e.u8(1).u8(dwords - 1);
    }
    /// INDIRECT_BUFFER around the operations `body` writes (then the real size).
    pub fn ib(e: &mut Enc, body: impl FnOnce(&mut Enc)) {
        e.u8(7).u8(0);
        body(e);
        e.u8(0).u8(7);
    }
    pub fn end(e: &mut Enc) {
        e.u8(0);
    }
}

mod sdmaop {
    use super::*;
    pub fn copy(e: &mut Enc, src: u32, dst_big: u32, len: u16) {
        e.u8(2);
        data(e, src);
        big(e, dst_big);
        e.u8(5).u16(len - 1);
    }
    pub fn fill(e: &mut Enc, off: u32, value: u32, len: u8) {
        e.u8(3);
        data(e, off);
        e.u32(value).u8(0).u8(len - 1).u8(2);
    }
    pub fn fence(e: &mut Enc, off: u32, value: u32) {
        e.u8(4);
        data(e, off);
        e.u32(value).u8(0);
    }
    pub fn poll_eq(e: &mut Enc, off: u32, reference: u32) {
        e.u8(5).u8(3).u8(0);
        data(e, off);
        e.u32(reference);
    }
    pub fn trap(e: &mut Enc, ctx: u32) {
        e.u8(6).u32(ctx);
    }
    pub fn timestamp(e: &mut Enc, off: u32) {
        e.u8(7).u8(2);
        data(e, off);
    }
    pub fn write(e: &mut Enc, off: u32, w: &[u32]) {
        e.u8(8);
        data(e, off);
        words(e, w);
    }
    pub fn ib(e: &mut Enc, body: impl FnOnce(&mut Enc)) {
        e.u8(9);
        body(e);
        e.u8(0).u8(7);
    }
}

mod aqlop {
    use super::*;
    /// BARRIER_AND on `deps` (each released by the host when `release`), completing
    /// signal `done`.
    pub fn barrier_and(e: &mut Enc, deps: &[u8], release: bool, done: Option<u8>) {
        e.u8(1).u8(1).u8(deps.len() as u8);
        for d in deps {
            signal(e, *d);
            e.bool(release);
        }
        match done {
            Some(k) => signal(e, k),
            None => no_signal(e),
        }
        e.bool(true);
    }
    /// A vendor PM4-IB packet around the PM4 operations `body` writes.
    pub fn pm4_ib(e: &mut Enc, body: impl FnOnce(&mut Enc), done: Option<u8>) {
        e.u8(3).u8(1 | (2 << 1) | (2 << 4));
        body(e);
        e.u8(0).u8(7);
        match done {
            Some(k) => signal(e, k),
            None => no_signal(e),
        }
    }
    /// BARRIER_VALUE: waits until signal `k` equals 0 (released by the host).
    pub fn barrier_value_eq0(e: &mut Enc, k: u8, done: Option<u8>) {
        e.u8(4).u8(0);
        signal(e, k);
        e.u64(0).bool(true).u8(0).bool(true);
        match done {
            Some(k) => signal(e, k),
            None => no_signal(e),
        }
    }
}

/// Header byte: family index, SDMA version index, ring size selector.
fn header(family: u8, version: u8, ring: u8) -> u8 {
    (family & 3) | ((version & 3) << 2) | ((ring % 7) << 4)
}

/// Seeds of the `engine_pm4` target: (name, bytes).
pub fn pm4() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for fam in 0..4u8 {
        let mut e = Enc::new();
        e.u8(header(fam, 0, 2));
        pm4op::write_data(&mut e, 0x100, &[1, 2, 3, 4]);
        pm4op::release_mem(&mut e, 0x200, 0x1234_5678, 7);
        pm4op::copy_data(&mut e, 0x100, 0x300);
        pm4op::end(&mut e);
        pm4op::wait_eq(&mut e, 0x400, 5, true);
        pm4op::write_data(&mut e, 0x408, &[9]);
        pm4op::end(&mut e);
        pm4op::ib(&mut e, |e| {
            pm4op::write_data(e, 0x500, &[0xAA; 8]);
            pm4op::dma_data(e, 0x500, 0x600, 32);
            pm4op::atomic_add(e, 0x700, 3);
        });
        pm4op::nop(&mut e, 3);
        out.push((format!("ring-ib-wait-f{fam}"), e.bytes));
    }
    let mut e = Enc::new();
    e.u8(header(2, 0, 0));
    for i in 0..24 {
        pm4op::write_data(&mut e, 0x40 * i, &[i]);
        if i % 3 == 2 {
            pm4op::end(&mut e);
        }
    }
    out.push(("ring-wrap".into(), e.bytes));
    let mut e = Enc::new();
    e.u8(header(0, 0, 3));
    pm4op::wait_eq(&mut e, 0x800, 1, false);
    out.push(("wait-forever".into(), e.bytes));
    out
}

/// Seeds of the `engine_sdma` target.
pub fn sdma() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for ver in 0..4u8 {
        let mut e = Enc::new();
        e.u8(header(0, ver, 2));
        sdmaop::write(&mut e, 0x100, &[5, 6, 7, 8]);
        sdmaop::copy(&mut e, 0x100, 0x1000, 4096);
        sdmaop::fill(&mut e, 0x2000, 0xDEAD_BEEF, 64);
        sdmaop::fence(&mut e, 0x3000, 42);
        sdmaop::trap(&mut e, 9);
        e.u8(0);
        sdmaop::poll_eq(&mut e, 0x3100, 77);
        sdmaop::timestamp(&mut e, 0x3200);
        e.u8(0);
        sdmaop::ib(&mut e, |e| {
            sdmaop::write(e, 0x3300, &[1]);
            sdmaop::fence(e, 0x3304, 2);
        });
        out.push((format!("copy-fill-poll-ib-v{ver}"), e.bytes));
    }
    out
}

/// Seeds of the `engine_aql` target.
pub fn aql() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for fam in 0..4u8 {
        let mut e = Enc::new();
        e.u8(header(fam, 0, 1));
        aqlop::pm4_ib(
            &mut e,
            |e| {
                pm4op::write_data(e, 0x100, &[1, 2]);
                pm4op::release_mem(e, 0x200, 3, 4);
            },
            Some(1),
        );
        aqlop::barrier_and(&mut e, &[1], false, Some(2));
        e.u8(0);
        aqlop::barrier_and(&mut e, &[10, 11], true, Some(3));
        aqlop::barrier_value_eq0(&mut e, 12, Some(4));
        e.u8(0);
        aqlop::pm4_ib(&mut e, |e| pm4op::wait_eq(e, 0x900, 2, true), None);
        out.push((format!("ib-barriers-f{fam}"), e.bytes));
    }
    out
}

/// Seeds of the `pm4_decode` target: the engine seeds' packets as bytes.
pub fn decode() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut w = [0u32; 64];
    let fam = pm4::GfxFamily::ALL[0];
    let mut words = Vec::new();
    let d = [1u32, 2, 3];
    for p in [
        pm4::pkt3::Pm4Packet::Nop(pm4::pkt3::Nop { dwords: 2 }),
        pm4::pkt3::Pm4Packet::WriteData(pm4::pkt3::WriteData {
            dst_sel: pm4::pkt3::WriteDataDst::Memory,
            addr_incr: true,
            wr_confirm: true,
            cache_policy: pm4::pkt3::CachePolicy::Lru,
            engine_sel: 0,
            addr: DATA_VA,
            data: &d,
        }),
        pm4::pkt3::Pm4Packet::IndirectBuffer(pm4::pkt3::IndirectBuffer::new(IB_VA, 16)),
    ] {
        if let Ok(n) = p.encode(fam, &mut w) {
            words.extend_from_slice(&w[..n]);
        }
    }
    let bytes: Vec<u8> = words.iter().flat_map(|x| x.to_le_bytes()).collect();
    for sel in [0u8, 1, 2, 3] {
        let mut b = vec![sel];
        b.extend_from_slice(&bytes);
        out.push((format!("pm4-f{sel}"), b));
    }
    let mut words = Vec::new();
    for p in [
        pm4::sdma::SdmaPacket::CopyLinear(pm4::sdma::CopyLinear {
            src: DATA_VA,
            dst: DATA_VA + 0x100,
            bytes: 64,
            tmz: false,
            parameter: 0,
        }),
        pm4::sdma::SdmaPacket::Fence(pm4::sdma::Fence {
            addr: SIG_VA,
            data: 1,
            mtype: 0,
            gcc: false,
            sys: false,
            snp: false,
            gpa: false,
            l2_policy: 0,
        }),
    ] {
        if let Ok(n) = p.encode(pm4::SdmaVersion::ALL[0], &mut w) {
            words.extend_from_slice(&w[..n]);
        }
    }
    let mut b = vec![0x10u8];
    b.extend(words.iter().flat_map(|x| x.to_le_bytes()));
    out.push(("sdma".into(), b));
    let barrier = pm4::aql::AqlPacket::BarrierAnd(pm4::aql::Barrier {
        control: Default::default(),
        dep_signals: [SIG_VA, 0, 0, 0, 0],
        completion_signal: SIG_VA + 64,
    });
    let mut b = vec![0x20u8];
    b.extend_from_slice(&barrier.encode_bytes());
    out.push(("aql".into(), b));
    out
}

/// Seeds of the `kfd_ioctl` target: acquire the VM, allocate and map, events, an SDMA
/// queue, a doorbell, destroy, free.
pub fn ioctl() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for preset in 0..4u8 {
        let mut e = Enc::new();
        e.u8(preset);
        // ACQUIRE_VM on the first render node (allocations need the VM).
        e.u8(17).u8(0).u8(1).u8(1).u8(0);
        // Three one-page GTT BOs (ring, write pointer, read pointer: KFD wants each
        // queue buffer to be a whole BO), each mapped on the first GPU.
        for (i, va) in [4u16, 5, 6].into_iter().enumerate() {
            e.u8(18)
                .u8(1)
                .u8(1)
                .u8(0)
                .u8(1)
                .u32(0x8000_0000)
                .u16(va)
                .u8(0)
                .u8(0);
            e.u8(20)
                .u8(0)
                .u8(1)
                .u8(1)
                .u8(0)
                .u8(1)
                .u8(1)
                .u8(i as u8)
                .u8(0);
        }
        // CREATE_EVENT (signal, auto reset), SET_EVENT, WAIT_EVENTS on it.
        e.u8(10).u8(1).u8(0).u8(1).u8(0).u8(0);
        e.u8(12).u8(1).u8(1).u8(0);
        e.u8(14).u8(1).u8(1).u8(0).u8(1).u8(1);
        // CREATE_QUEUE (SDMA: no CWSR area needed) on those BOs.
        e.u8(1).u8(1).u8(1).u8(1).u8(0);
        e.u16(0).u8(0).u8(0).u8(12);
        e.u16(0).u8(0).u8(1);
        e.u16(0).u8(0).u8(2);
        e.u8(100).u8(7).u8(0).u8(0);
        // A doorbell, DESTROY_QUEUE, FREE_MEMORY_OF_GPU.
        e.u8(26).u8(0).u8(0).u8(1).u8(0);
        e.u8(2).u8(1).u8(1).u8(0);
        e.u8(19).u8(1).u8(1).u8(0);
        out.push((format!("session-{preset}"), e.bytes));
    }
    out
}

/// Every target's seeds: (target, name, bytes).
pub fn all() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut v = Vec::new();
    for (t, seeds) in [
        ("engine_pm4", pm4()),
        ("engine_sdma", sdma()),
        ("engine_aql", aql()),
        ("pm4_decode", decode()),
        ("kfd_ioctl", ioctl()),
    ] {
        for (n, b) in seeds {
            v.push((t, n, b));
        }
    }
    v
}
