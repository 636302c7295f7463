//! pm4: PM4 type-3 packets executed by the CP, in indirect buffers launched by AQL
//! PM4-IB packets and in a PM4 compute queue's ring.

use std::sync::atomic::Ordering;

use kfdrt::{Device, MemoryKind};
use pm4::pkt3::{CompareFn, DataSel, ReleaseMem, WaitRegMem, WriteData};
use pm4::GfxFamily;

use pm4::aql::AqlPacket;

use super::raw::{RawAql, RawPm4, RawSignals, Scratch};
use super::{ensure, pass, pass_with, settle, wait_for, Check, CheckResult, Ctx, OrFail, WAIT};

/// The PM4 checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "pm4.write_data",
            what: "WRITE_DATA in a PM4-IB writes exactly its dwords; the completion signal drops to 0",
            run: write_data,
        },
        Check {
            name: "pm4.wait_reg_mem_holds",
            what: "WAIT_REG_MEM (>=) holds a later WRITE_DATA until memory satisfies it",
            run: wait_reg_mem_holds,
        },
        Check {
            name: "pm4.release_mem_timestamps",
            what: "RELEASE_MEM GPU-clock writes (on a queue with an EOP buffer) are ordered and lie between two GET_CLOCK_COUNTERS reads",
            run: release_mem_timestamps,
        },
        Check {
            name: "pm4.compute_queue_ring_wrap",
            what: "a PM4 compute queue executes 300 WRITE_DATA packets across its ring end in order",
            run: compute_queue,
        },
    ]
}

/// An indirect-buffer area: sequential PM4 packets in host memory.
pub(crate) struct Ib {
    mem: Scratch,
    fam: GfxFamily,
    used: usize,
}

impl Ib {
    pub(crate) fn new(dev: &Device, gpu: usize) -> Result<Ib, String> {
        Ok(Ib {
            mem: Scratch::new(dev, MemoryKind::HostPinned, gpu, 4096)?,
            fam: dev.gpus()[gpu].family,
            used: 0,
        })
    }
    /// Append packets built by `f` (which encodes into the slice and returns dwords);
    /// returns (va, dwords) of what was appended.
    pub(crate) fn put(
        &mut self,
        f: impl FnOnce(GfxFamily, &mut [u32]) -> Result<usize, pm4::EncodeError>,
    ) -> Result<(u64, u32), String> {
        let mut w = [0u32; 64];
        let n = f(self.fam, &mut w).or_fail("encode")?;
        let start = self.used;
        ensure!(start + n * 4 <= 4096, "indirect buffer full");
        let bytes: Vec<u8> = w[..n].iter().flat_map(|d| d.to_le_bytes()).collect();
        self.mem.write(start, &bytes);
        self.used += n * 4;
        Ok((self.mem.va(start), n as u32))
    }
}

pub(crate) fn write_data_pkt(addr: u64, data: &[u32]) -> WriteData<'_> {
    WriteData::memory(addr, data)
}

fn clock_pkt(addr: u64) -> ReleaseMem {
    ReleaseMem::end_of_pipe(DataSel::GpuClock, addr, 0)
}

fn write_data(ctx: &Ctx) -> CheckResult {
    let sig = RawSignals::new(&ctx.dev)?;
    let out = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let mut ib = Ib::new(&ctx.dev, 0)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawAql::new(&ctx.dev, 0, 64)?;
    let data = [0x1111_1111, 0x2222_2222, 0x3333_3333, 0x4444_4444];
    let (va, n) = ib.put(|f, w| write_data_pkt(out.va(16), &data).encode(f, w))?;
    let done = sig.init(0, 1, None);
    q.submit(&[AqlPacket::pm4_ib(va, n, done)])?;
    wait_for("the PM4-IB completion signal", WAIT, || {
        sig.value(0).load(Ordering::Acquire) == 0
    })?;
    for (i, d) in data.iter().enumerate() {
        let got = out.u32(16 + 4 * i).load(Ordering::Acquire);
        ensure!(got == *d, "dword {i} = {got:#x}, want {d:#x}");
    }
    for off in [12, 32] {
        let got = out.u32(off).load(Ordering::Acquire);
        ensure!(got == 0, "byte {off} outside the write changed to {got:#x}");
    }
    q.wait_consumed()?;
    ensure!(q.read_index() == 1, "read_dispatch_id {}", q.read_index());
    pass()
}

fn wait_reg_mem_holds(ctx: &Ctx) -> CheckResult {
    let sig = RawSignals::new(&ctx.dev)?;
    let mem = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let mut ib = Ib::new(&ctx.dev, 0)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawAql::new(&ctx.dev, 0, 64)?;
    let (wva, wn) = ib.put(|f, w| {
        WaitRegMem::memory(CompareFn::GreaterEqual, mem.va(0), 5, 0xffff_ffff, 4).encode(f, w)
    })?;
    let (dva, dn) = ib.put(|f, w| write_data_pkt(mem.va(64), &[1]).encode(f, w))?;
    let s_wait = sig.init(0, 1, None);
    let s_write = sig.init(1, 1, None);
    q.submit(&[
        AqlPacket::pm4_ib(wva, wn, s_wait),
        AqlPacket::pm4_ib(dva, dn, s_write),
    ])?;
    settle();
    ensure!(
        mem.u32(64).load(Ordering::Acquire) == 0,
        "WRITE_DATA ran before the wait was satisfied (memory 0 < 5)"
    );
    mem.u32(0).store(4, Ordering::Release);
    settle();
    ensure!(
        mem.u32(64).load(Ordering::Acquire) == 0 && sig.value(0).load(Ordering::Acquire) == 1,
        "the wait passed with memory 4 < 5"
    );
    mem.u32(0).store(5, Ordering::Release);
    wait_for("the write after the wait", WAIT, || {
        mem.u32(64).load(Ordering::Acquire) == 1
    })?;
    wait_for("both completion signals", WAIT, || {
        sig.value(0).load(Ordering::Acquire) == 0 && sig.value(1).load(Ordering::Acquire) == 0
    })?;
    pass()
}

fn release_mem_timestamps(ctx: &Ctx) -> CheckResult {
    let gpu_id = ctx.gpu_id(0);
    let sig = RawSignals::new(&ctx.dev)?;
    let mem = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let mut ib = Ib::new(&ctx.dev, 0)?;
    // Declared after the memory its packets name: destroyed first (see Drain). An
    // end-of-pipe event goes through the queue's EOP buffer: give it one even on gfx94x,
    // whose AQL queues libhsakmt creates without (tinygrad ops_amd.py does too).
    let mut q = RawAql::with_eop(&ctx.dev, 0, 64, true)?;
    let (a, an) = ib.put(|f, w| clock_pkt(mem.va(0)).encode(f, w))?;
    let (b, bn) = ib.put(|f, w| clock_pkt(mem.va(8)).encode(f, w))?;
    let before = kfd::ioctl::get_clock_counters(ctx.backend(), gpu_id)
        .or_fail("GET_CLOCK_COUNTERS")?
        .gpu_clock_counter;
    let s0 = sig.init(0, 1, None);
    let s1 = sig.init(1, 1, None);
    q.submit(&[AqlPacket::pm4_ib(a, an, s0)])?;
    wait_for("the first RELEASE_MEM", WAIT, || {
        sig.value(0).load(Ordering::Acquire) == 0
    })?;
    std::thread::sleep(std::time::Duration::from_millis(1));
    q.submit(&[AqlPacket::pm4_ib(b, bn, s1)])?;
    wait_for("the second RELEASE_MEM", WAIT, || {
        sig.value(1).load(Ordering::Acquire) == 0
    })?;
    let after = kfd::ioctl::get_clock_counters(ctx.backend(), gpu_id)
        .or_fail("GET_CLOCK_COUNTERS")?
        .gpu_clock_counter;
    let t0 = mem.u64(0).load(Ordering::Acquire);
    let t1 = mem.u64(8).load(Ordering::Acquire);
    ensure!(t0 != 0 && t1 != 0, "timestamps not written: {t0} {t1}");
    ensure!(
        t1 > t0,
        "second timestamp {t1} not after the first {t0} (1 ms apart)"
    );
    ensure!(
        before <= t0 && t1 <= after,
        "timestamps {t0}..{t1} outside the GET_CLOCK_COUNTERS window {before}..{after}"
    );
    pass_with(format!("{} ticks over ~1 ms", t1 - t0))
}

fn compute_queue(ctx: &Ctx) -> CheckResult {
    let mem = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawPm4::new(&ctx.dev, 0)?;
    let fam = ctx.dev.gpus()[0].family;
    // 300 packets of 5 dwords = 1500 dwords through a 1024-dword ring: cell i % 16 gets
    // i + 1, then the sequence counter at byte 128 gets the packet number.
    for chunk in 0..6u32 {
        let mut words = Vec::new();
        for k in 0..50u32 {
            let i = chunk * 50 + k;
            let mut w = [0u32; 8];
            let n = write_data_pkt(mem.va(((i % 16) * 4) as usize), &[i + 1])
                .encode(fam, &mut w)
                .or_fail("encode")?;
            words.extend_from_slice(&w[..n]);
        }
        q.submit(&words)?;
    }
    q.wait_idle()?;
    for c in 0..16u32 {
        let want = (0..300u32).filter(|i| i % 16 == c).max().unwrap_or(0) + 1;
        let got = mem.u32((c * 4) as usize).load(Ordering::Acquire);
        ensure!(
            got == want,
            "cell {c} = {got}, want {want} (the last write to it)"
        );
    }
    ensure!(
        q.rptr() == 1500,
        "read pointer {} dwords, want 1500",
        q.rptr()
    );
    pass()
}
