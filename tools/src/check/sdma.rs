//! sdma: SDMA packets on a raw SDMA queue, checked byte for byte.

use std::sync::atomic::Ordering;

use kfdrt::MemoryKind;
use pm4::pkt3::CompareFn;
use pm4::sdma::{ConstFill, CopyLinear, Fence, PollRegmem, SdmaPacket, Write};

use super::raw::{RawSdma, Scratch};
use super::{ensure, pass, pass_with, pattern, settle, wait_for, Check, CheckResult, Ctx, WAIT};

/// The SDMA checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "sdma.copy_linear_bytes",
            what: "COPY_LINEAR of 12345 bytes between unaligned offsets copies exactly those bytes",
            run: copy_linear,
        },
        Check {
            name: "sdma.const_fill",
            what: "CONST_FILL writes its dword pattern over exactly the requested range",
            run: const_fill,
        },
        Check {
            name: "sdma.fence_after_copy",
            what:
                "a FENCE after a 4 MiB VRAM-to-VRAM copy is written only once the whole copy landed",
            run: fence_after_copy,
        },
        Check {
            name: "sdma.poll_regmem_holds",
            what: "POLL_REGMEM (==, masked) holds a later FENCE until memory matches",
            run: poll_regmem,
        },
        Check {
            name: "sdma.ring_wrap",
            what: "400 WRITE packets through a 4 KiB ring (NOP-padded at the end) land in order",
            run: ring_wrap,
        },
    ]
}

fn copy(src: u64, dst: u64, bytes: u32) -> SdmaPacket<'static> {
    SdmaPacket::CopyLinear(CopyLinear {
        src,
        dst,
        bytes,
        tmz: false,
        parameter: 0,
    })
}

fn copy_linear(ctx: &Ctx) -> CheckResult {
    let src = Scratch::new(&ctx.dev, MemoryKind::HostPinned, 0, 1 << 16)?;
    let dst = Scratch::new(&ctx.dev, MemoryKind::Device, 0, 1 << 16)?;
    let fence = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawSdma::new(&ctx.dev, 0, 4096)?;
    let data = pattern(1 << 16, 1);
    src.write(0, &data);
    dst.write(0, &vec![0xee; 1 << 16]);
    let n = 12345usize;
    q.submit(&[
        copy(src.va(3), dst.va(5), n as u32),
        SdmaPacket::Fence(Fence::new(fence.va(0), 1)),
    ])?;
    wait_for("the fence after the copy", WAIT, || {
        fence.u32(0).load(Ordering::Acquire) == 1
    })?;
    let got = dst.read(0, 1 << 16);
    ensure!(
        got[..5].iter().all(|&b| b == 0xee),
        "bytes before the copy changed"
    );
    if let Some(i) = (0..n).find(|&i| got[5 + i] != data[3 + i]) {
        return Err(format!(
            "dst byte {} = {:#x}, want src byte {} = {:#x}",
            5 + i,
            got[5 + i],
            3 + i,
            data[3 + i]
        ));
    }
    ensure!(
        got[5 + n..].iter().all(|&b| b == 0xee),
        "bytes after the copy changed"
    );
    pass()
}

fn const_fill(ctx: &Ctx) -> CheckResult {
    let dst = Scratch::new(&ctx.dev, MemoryKind::HostPinned, 0, 1 << 14)?;
    let fence = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawSdma::new(&ctx.dev, 0, 4096)?;
    dst.write(0, &vec![0x11; 1 << 14]);
    let len = 4096 + 12;
    q.submit(&[
        SdmaPacket::ConstFill(ConstFill {
            dst: dst.va(16),
            data: 0xdead_beef,
            bytes: len as u32,
            fill_size: 2,
        }),
        SdmaPacket::Fence(Fence::new(fence.va(0), 7)),
    ])?;
    wait_for("the fence after the fill", WAIT, || {
        fence.u32(0).load(Ordering::Acquire) == 7
    })?;
    let got = dst.read(0, 1 << 14);
    ensure!(
        got[..16].iter().all(|&b| b == 0x11),
        "bytes before the fill changed"
    );
    for (i, w) in got[16..16 + len].chunks(4).enumerate() {
        let v = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        ensure!(v == 0xdead_beef, "dword {i} of the fill = {v:#x}");
    }
    ensure!(
        got[16 + len..].iter().all(|&b| b == 0x11),
        "bytes after the fill changed"
    );
    pass()
}

fn fence_after_copy(ctx: &Ctx) -> CheckResult {
    let len = 4 << 20;
    let src = Scratch::new(&ctx.dev, MemoryKind::Device, 0, len)?;
    let dst = Scratch::new(&ctx.dev, MemoryKind::Device, 0, len)?;
    let fence = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawSdma::new(&ctx.dev, 0, 4096)?;
    let data = pattern(len, 9);
    src.write(0, &data);
    let ver = ctx.dev.gpus()[0].sdma_version;
    let mut pkts: Vec<SdmaPacket<'_>> =
        pm4::sdma::copy_linear_split(src.va(0), dst.va(0), len as u64, ver)
            .map(SdmaPacket::CopyLinear)
            .collect();
    let n = pkts.len();
    pkts.push(SdmaPacket::Fence(Fence::new(fence.va(0), 0xf00d)));
    q.submit(&pkts)?;
    wait_for("the fence", WAIT, || {
        fence.u32(0).load(Ordering::Acquire) == 0xf00d
    })?;
    let got = dst.read(0, len);
    if let Some(i) = (0..len).find(|&i| got[i] != data[i]) {
        return Err(format!("byte {i:#x} not copied when the fence was written"));
    }
    pass_with(format!("{n} COPY_LINEAR packet(s)"))
}

fn poll_regmem(ctx: &Ctx) -> CheckResult {
    let mem = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawSdma::new(&ctx.dev, 0, 4096)?;
    q.submit(&[
        SdmaPacket::PollRegmem(PollRegmem {
            func: CompareFn::Equal,
            mem_poll: true,
            hdp_flush: false,
            addr: mem.va(0),
            reference: 0x07,
            mask: 0xff,
            interval: 10,
            retry_count: 0xfff,
        }),
        SdmaPacket::Fence(Fence::new(mem.va(64), 1)),
    ])?;
    settle();
    ensure!(
        mem.u32(64).load(Ordering::Acquire) == 0,
        "fence written before the poll matched"
    );
    mem.u32(0).store(0x106, Ordering::Release);
    settle();
    ensure!(
        mem.u32(64).load(Ordering::Acquire) == 0,
        "fence written with (0x106 & 0xff) != 7"
    );
    mem.u32(0).store(0x307, Ordering::Release);
    wait_for("the fence after the poll", WAIT, || {
        mem.u32(64).load(Ordering::Acquire) == 1
    })?;
    pass()
}

fn ring_wrap(ctx: &Ctx) -> CheckResult {
    let mem = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawSdma::new(&ctx.dev, 0, 4096)?;
    let vals: Vec<[u32; 1]> = (0..400u32).map(|i| [i + 1]).collect();
    for chunk in vals.chunks(50).enumerate() {
        let pkts: Vec<SdmaPacket<'_>> = chunk
            .1
            .iter()
            .enumerate()
            .map(|(k, v)| {
                let i = chunk.0 * 50 + k;
                SdmaPacket::Write(Write {
                    dst: mem.va((i % 32) * 4),
                    data: v,
                })
            })
            .collect();
        q.submit(&pkts)?;
    }
    q.wait_idle()?;
    for c in 0..32u32 {
        let want = (0..400u32).filter(|i| i % 32 == c).max().unwrap_or(0) + 1;
        let got = mem.u32((c * 4) as usize).load(Ordering::Acquire);
        ensure!(got == want, "cell {c} = {got}, want {want}");
    }
    pass_with(format!("read pointer {} bytes", q.rptr()))
}
