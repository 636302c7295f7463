//! firmware: the per-family firmware rules of `firmware-notes/firmware-rules.md`, checked on
//! the device itself: every packet kfdrt emits for this family runs, side effects on a
//! multi-XCC GPU happen once under PRED_EXEC, and a packet error reaches the runtime
//! through the context save area header instead of hanging.

use std::sync::atomic::Ordering;

use kfd::abi::{self, CreateEventArgs, EventData};
use kfdrt::raw::Target;
use kfdrt::{EventFlags, MemoryKind, WaitCompare, WriteValueFlags};
use pm4::aql::AqlPacket;
use pm4::pkt3::{AtomicMem, PredExec};

use super::pm4::Ib;
use super::raw::{RawAql, RawSignals, Scratch};
use super::{
    ensure, pass_with, require, settle, wait_for, Check, CheckResult, Ctx, Drain, OrFail, WAIT,
};

/// The firmware-rule checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "firmware.packet_support",
            what: "every packet kfdrt emits for this family runs: 64-bit waitValue (BARRIER_VALUE on gfx9, WAIT_REG_MEM64 on gfx10+), 64-bit writeValue, CP DMA in family-sized chunks, clock timestamps",
            run: packet_support,
        },
        Check {
            name: "firmware.wait64_unsigned_over_bit_63",
            what: "a 64-bit GEQ waitValue over bit 63 with a value that is not a power of two compares unsigned (gfx9: the wait kernel, no packet is exact; gfx10+: WAIT_REG_MEM64)",
            run: wait64_unsigned_over_bit_63,
        },
        Check {
            name: "firmware.xcc_predication",
            what: "an ATOMIC_MEM add in an indirect buffer lands once per XCC; under PRED_EXEC(XCC 0) exactly once",
            run: xcc_predication,
        },
        Check {
            name: "firmware.hdp_flush",
            what: "the MMIO remap page (HDP flush register) is mapped; VRAM the CPU wrote is read correctly by the next copy",
            run: hdp_flush,
        },
        Check {
            name: "firmware.queue_error_reported",
            what: "an unsupported vendor AQL packet ORs KFD_EC_MASK(EC_QUEUE_PACKET_VENDOR_UNSUPPORTED) into the CWSR header's error payload and signals its event",
            run: queue_error_reported,
        },
    ]
}

fn wait64_unsigned_over_bit_63(ctx: &Ctx) -> CheckResult {
    let dev = &ctx.dev;
    let m = Scratch::new(dev, MemoryKind::Signal, 0, 4096)?;
    let s = dev.create_stream(0).or_fail("create_stream")?;
    let reference = (1u64 << 63) + 5;
    let _drain = Drain::streams(&[&s]).open(|| m.u64(0).store(reference + 1, Ordering::Release));
    s.wait_value64(m.va(0), reference, WaitCompare::Gte, u64::MAX)
        .or_fail("wait_value64")?;
    s.write_value32(m.va(8), 1, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    // Values below the reference unsigned; the first is above it signed.
    for v in [0x7fff_ffff_ffff_ffff, reference - 1] {
        m.u64(0).store(v, Ordering::Release);
        settle();
        ensure!(
            m.u32(8).load(Ordering::Acquire) == 0,
            "the write after waitValue64(GEQ {reference:#x}) ran while memory held {v:#x}"
        );
    }
    m.u64(0).store(reference + 1, Ordering::Release);
    s.synchronize().or_fail("synchronize after waitValue64")?;
    ensure!(
        m.u32(8).load(Ordering::Acquire) == 1,
        "the write after the wait did not land"
    );
    pass_with(format!(
        "held at {:#x} and {:#x}, released at {:#x}",
        0x7fff_ffff_ffff_ffffu64,
        reference - 1,
        reference + 1
    ))
}

fn packet_support(ctx: &Ctx) -> CheckResult {
    let dev = &ctx.dev;
    let t = Target::of(&dev.gpus()[0]);
    let m = Scratch::new(dev, MemoryKind::Signal, 0, 4096)?;
    // CP DMA: more than one gfx11+ chunk, below the SDMA threshold.
    let len = 100_000usize;
    let src = Scratch::new(dev, MemoryKind::HostPinned, 0, len)?;
    let dst = Scratch::new(dev, MemoryKind::HostPinned, 0, len)?;
    // Clock timestamps around the copies.
    let (e0, e1) = (
        dev.create_event(EventFlags::DEFAULT)
            .or_fail("create_event")?,
        dev.create_event(EventFlags::DEFAULT)
            .or_fail("create_event")?,
    );
    let s = dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]).open(|| m.u64(0).store(1 << 33, Ordering::Release));
    // 64-bit wait: held until the host writes, released by a value above 2^32.
    s.wait_value64(m.va(0), 1 << 33, WaitCompare::Gte, u64::MAX)
        .or_fail("wait_value64")?;
    s.write_value64(m.va(8), 0x1122_3344_5566_7788, WriteValueFlags::DEFAULT)
        .or_fail("write_value64")?;
    settle();
    ensure!(
        m.u64(8).load(Ordering::Acquire) == 0,
        "the write after waitValue64 ran before the wait held"
    );
    m.u64(0).store(1 << 33, Ordering::Release);
    s.synchronize().or_fail("synchronize after waitValue64")?;
    ensure!(
        m.u64(8).load(Ordering::Acquire) == 0x1122_3344_5566_7788,
        "writeValue64 wrote {:#x}",
        m.u64(8).load(Ordering::Acquire)
    );
    let data: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
    src.write(0, &data);
    s.memcpy(dst.va(0), src.va(0), len as u64)
        .or_fail("memcpy")?;
    s.memset(dst.va(0) + 1, 0x5A, 70_001).or_fail("memset")?;
    e0.record(&s).or_fail("record")?;
    s.memcpy(dst.va(0), dst.va(0), 0).or_fail("memcpy 0")?;
    e1.record(&s).or_fail("record")?;
    s.synchronize().or_fail("synchronize after the copies")?;
    let got = dst.read(0, len);
    let mut want = data;
    want[1..70_002].fill(0x5A);
    ensure!(got == want, "memcpy + memset result differs");
    let ms = kfdrt::Event::elapsed_ms(&e0, &e1).or_fail("elapsed")?;
    let ordered = ms >= 0.0;
    ensure!(ordered, "elapsed time {ms} ms is negative or NaN");
    pass_with(format!(
        "{:?}, {} XCC(s): 64-bit wait by {}, DMA chunk {} bytes",
        t.family,
        t.num_xcc,
        if t.has_wait_reg_mem64() {
            "WAIT_REG_MEM64"
        } else {
            "BARRIER_VALUE"
        },
        t.dma_max_bytes()
    ))
}

fn xcc_predication(ctx: &Ctx) -> CheckResult {
    let dev = &ctx.dev;
    let t = Target::of(&dev.gpus()[0]);
    let sig = RawSignals::new(dev)?;
    let mem = Scratch::new(dev, MemoryKind::Signal, 0, 4096)?;
    let mut ib = Ib::new(dev, 0)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawAql::new(dev, 0, 64)?;
    let add = |addr: u64| AtomicMem::add_rtn_64(addr, 1);
    let (va, n) = ib.put(|f, w| {
        let mut k = add(mem.va(0)).encode(f, w)?;
        k += PredExec {
            exec_count: AtomicMem::DWORDS as u16,
            xcc_mask: 1,
        }
        .encode(f, &mut w[k..])?;
        k += add(mem.va(8)).encode(f, &mut w[k..])?;
        Ok(k)
    })?;
    let s0 = sig.init(0, 1, None);
    q.submit(&[AqlPacket::pm4_ib(va, n, s0)])?;
    wait_for("the PM4-IB packet", WAIT, || {
        sig.value(0).load(Ordering::Acquire) == 0
    })?;
    let (all, one) = (
        mem.u64(0).load(Ordering::Acquire),
        mem.u64(8).load(Ordering::Acquire),
    );
    ensure!(
        all == t.num_xcc as u64,
        "unpredicated add landed {all} times on {} XCC(s)",
        t.num_xcc
    );
    ensure!(one == 1, "PRED_EXEC(XCC 0) add landed {one} times");
    ensure!(
        sig.value(0).load(Ordering::Acquire) == 0,
        "completion signal went below 0: decremented per XCC"
    );
    pass_with(format!("{all} unpredicated, {one} predicated"))
}

fn queue_error_reported(ctx: &Ctx) -> CheckResult {
    let dev = match ctx.private_device() {
        Ok(d) => d,
        Err(super::Outcome::Skip(_)) => ctx.dev.clone(),
        Err(o) => return Ok(o),
    };
    // A runtime stream first: it creates the process's event page, which a raw signal
    // event needs.
    let s = dev.create_stream(0).or_fail("create_stream")?;
    s.synchronize().or_fail("synchronize")?;
    let mut ev = CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_SIGNAL,
        auto_reset: 0,
        ..Default::default()
    };
    kfd::ioctl::create_event(dev.backend().as_ref(), &mut ev).or_fail("CREATE_EVENT")?;
    let payload = Scratch::new(&dev, MemoryKind::Signal, 0, 4096)?;
    let mut q = RawAql::new(&dev, 0, 64)?;
    let hdr = abi::ContextSaveAreaHeader {
        err_payload_addr: payload.va(0),
        err_event_id: ev.event_id,
        ..Default::default()
    };
    q.cwsr()
        .write(0, zerocopy::IntoBytes::as_bytes(&hdr))
        .or_fail("CWSR header")?;
    let mut words = [0u32; 16];
    words[0] = 0x0100 | (7 << 16); // vendor type, barrier bit, AMD format 7
    let r = q.submit(&[AqlPacket::Unknown { words }]);
    let seen = wait_for("the error payload", WAIT, || {
        payload.u64(0).load(Ordering::Acquire) != 0
    });
    let mut evs = [EventData {
        event_id: ev.event_id,
        ..Default::default()
    }];
    let waited = kfd::ioctl::wait_events(dev.backend().as_ref(), &mut evs, false, 1000);
    let _ = kfd::ioctl::destroy_event(dev.backend().as_ref(), ev.event_id);
    r?;
    seen?;
    let p = payload.u64(0).load(Ordering::Acquire);
    let want = abi::ec::mask(abi::ec::QUEUE_PACKET_VENDOR_UNSUPPORTED);
    ensure!(
        p & want != 0,
        "payload {p:#x} ({}) lacks {want:#x}",
        abi::ec::describe(p)
    );
    ensure!(
        waited.or_fail("WAIT_EVENTS")? == abi::KFD_IOC_WAIT_RESULT_COMPLETE,
        "the error event was not signalled"
    );
    pass_with(abi::ec::describe(p))
}

fn hdp_flush(ctx: &Ctx) -> CheckResult {
    let dev = &ctx.dev;
    let mut mapped = 0;
    for g in 0..dev.gpus().len() {
        if dev.has_hdp_flush(g) {
            mapped += 1;
        }
    }
    ensure!(
        mapped == dev.gpus().len(),
        "MMIO remap page mapped on {mapped} of {} GPUs (ALLOC_MEMORY_OF_GPU with MMIO_REMAP + mmap of /dev/kfd)",
        dev.gpus().len()
    );
    // The rest is about a CPU write to VRAM through the BAR reaching the GPU.
    require!(ctx.need_large_bar(0));
    let vram = Scratch::new(dev, MemoryKind::Device, 0, 4096)?;
    let host = Scratch::new(dev, MemoryKind::HostPinned, 0, 4096)?;
    let s = dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    let data: Vec<u8> = (0..256u32).map(|i| (i * 13 + 1) as u8).collect();
    vram.write(0, &data);
    s.memcpy(host.va(0), vram.va(0), data.len() as u64)
        .or_fail("memcpy")?;
    s.synchronize().or_fail("synchronize")?;
    ensure!(
        host.read(0, data.len()) == data,
        "the copy read stale VRAM after a CPU write"
    );
    pass_with(format!("{mapped} GPU(s) with an HDP flush register"))
}
