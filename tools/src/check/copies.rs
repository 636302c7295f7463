//! copies: the runtime's stream-ordered memcpy / memset (CP DMA and SDMA paths), checked
//! byte for byte.

use std::sync::atomic::Ordering;

use kfdrt::{MemoryKind, WaitCompare, WriteValueFlags};

use super::raw::Scratch;
use super::{ensure, pass, pass_with, pattern, settle, Check, CheckResult, Ctx, Drain, OrFail};

/// The copy checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "copies.cp_dma_unaligned",
            what: "a small unaligned host->VRAM->host copy (CP DMA) reproduces every byte and leaves neighbours alone",
            run: cp_dma_unaligned,
        },
        Check {
            name: "copies.memset_edges",
            what: "memset with unaligned head and tail sets exactly the asked bytes; memsetD32 fills dwords",
            run: memset_edges,
        },
        Check {
            name: "copies.large_copy_ordered",
            what: "a 4 MiB copy goes to the stream's SDMA queue, waits for earlier work, and later work waits for it",
            run: sdma_ordered,
        },
    ]
}

fn cp_dma_unaligned(ctx: &Ctx) -> CheckResult {
    let host = Scratch::new(&ctx.dev, MemoryKind::HostPinned, 0, 1 << 16)?;
    let vram = Scratch::new(&ctx.dev, MemoryKind::Device, 0, 1 << 16)?;
    let back = Scratch::new(&ctx.dev, MemoryKind::HostPinned, 0, 1 << 16)?;
    let data = pattern(1 << 16, 0);
    host.write(0, &data);
    vram.write(0, &vec![0xee; 1 << 16]);
    back.write(0, &vec![0xdd; 1 << 16]);
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    s.memcpy(vram.va(3), host.va(5), 40_001).or_fail("memcpy")?;
    s.memcpy(back.va(1), vram.va(3), 40_001).or_fail("memcpy")?;
    s.synchronize().or_fail("synchronize")?;
    let out = back.read(0, 40_003);
    ensure!(
        out[0] == 0xdd && out[40_002] == 0xdd,
        "bytes around the copy changed"
    );
    ensure!(out[1..40_002] == data[5..40_006], "copied bytes differ");
    ensure!(
        vram.read(2, 1)[0] == 0xee,
        "byte before the VRAM destination changed"
    );
    pass()
}

fn memset_edges(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Device, 0, 8192)?;
    m.write(0, &[0x77; 8192]);
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    s.memset(m.va(6), 0x5a, 1001).or_fail("memset")?;
    s.memset_d32(m.va(4096), 0xcafe_f00d, 8)
        .or_fail("memset_d32")?;
    s.synchronize().or_fail("synchronize")?;
    let b = m.read(0, 8192);
    ensure!(
        b[..6].iter().all(|&x| x == 0x77),
        "bytes before the memset changed"
    );
    ensure!(b[6..1007].iter().all(|&x| x == 0x5a), "memset bytes wrong");
    ensure!(b[1007] == 0x77, "byte after the memset changed");
    let dword = |i: usize| u32::from_le_bytes(b[4096 + 4 * i..][..4].try_into().unwrap_or([0; 4]));
    for i in 0..8 {
        ensure!(dword(i) == 0xcafe_f00d, "memsetD32 dword {i}");
    }
    ensure!(dword(8) == 0x7777_7777, "memsetD32 overran");
    pass()
}

fn sdma_ordered(ctx: &Ctx) -> CheckResult {
    let len = 4 << 20;
    let flags = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let src = Scratch::new(&ctx.dev, MemoryKind::HostPinned, 0, len)?;
    let dst = Scratch::new(&ctx.dev, MemoryKind::Device, 0, len)?;
    let data = pattern(len, 0);
    src.write(0, &data);
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]).open(|| flags.u32(0).store(1, Ordering::Release));
    s.wait_value32(flags.va(0), 1, WaitCompare::Eq, u32::MAX)
        .or_fail("wait_value32")?;
    s.memcpy(dst.va(0), src.va(0), len as u64)
        .or_fail("memcpy")?;
    s.write_value32(flags.va(8), 9, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    let Some(qid) = s.sdma_queue_id() else {
        return Err("the 4 MiB copy did not use an SDMA queue".into());
    };
    settle();
    ensure!(
        dst.read(len - 16, 16) != data[len - 16..],
        "the copy ran before the stream's earlier wait"
    );
    ensure!(
        flags.u32(8).load(Ordering::Acquire) == 0,
        "later work ran before the copy"
    );
    flags.u32(0).store(1, Ordering::Release);
    s.synchronize().or_fail("synchronize")?;
    ensure!(
        flags.u32(8).load(Ordering::Acquire) == 9,
        "write after the copy missing"
    );
    ensure!(dst.read(0, len) == data, "SDMA copy differs");
    pass_with(format!("SDMA queue {qid}"))
}
