//! memops: stream memory operations (writeValue / waitValue, 32 and 64 bit).

use std::sync::atomic::Ordering;

use kfdrt::{ErrorKind, MemoryKind, WaitCompare, WriteValueFlags};

use super::raw::Scratch;
use super::{ensure, pass, settle, wait_for, Check, CheckResult, Ctx, Drain, OrFail, WAIT};

/// The stream memory-op checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "memops.write_value_widths",
            what: "writeValue32 writes 4 bytes and writeValue64 8 bytes (above 2^32) without touching neighbours",
            run: write_widths,
        },
        Check {
            name: "memops.wait_value32_gte_holds",
            what: "waitValue32 GEQ holds later work at 4 < 5 and releases it at 7",
            run: wait32_gte,
        },
        Check {
            name: "memops.wait_value64_eq_and_nor",
            what: "waitValue64 EQ (masked), AND and NOR release in turn as memory changes",
            run: wait64_conditions,
        },
        Check {
            name: "memops.invalid_args_rejected",
            what: "bad wait flags and unaligned addresses are InvalidValue; reserved write flags are ignored; a NOR with a partial mask never waits",
            run: invalid_args,
        },
    ]
}

fn write_widths(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    m.write(0, &[0xaa; 64]);
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    s.write_value32(m.va(4), 0x1234_5678, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    s.write_value64(m.va(16), 0x0123_4567_89ab_cdef, WriteValueFlags::DEFAULT)
        .or_fail("write_value64")?;
    s.synchronize().or_fail("synchronize")?;
    let got = m.read(0, 64);
    let mut want = [0xaa; 64];
    want[4..8].copy_from_slice(&0x1234_5678u32.to_le_bytes());
    want[16..24].copy_from_slice(&0x0123_4567_89ab_cdefu64.to_le_bytes());
    if let Some(i) = (0..64).find(|&i| got[i] != want[i]) {
        return Err(format!("byte {i} = {:#x}, want {:#x}", got[i], want[i]));
    }
    pass()
}

fn wait32_gte(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]).open(|| m.u32(0).store(7, Ordering::Release));
    s.wait_value32(m.va(0), 5, WaitCompare::Gte, u32::MAX)
        .or_fail("wait_value32")?;
    s.write_value32(m.va(64), 1, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    settle();
    ensure!(
        m.u32(64).load(Ordering::Acquire) == 0,
        "write ran with memory 0 < 5"
    );
    m.u32(0).store(4, Ordering::Release);
    settle();
    ensure!(
        m.u32(64).load(Ordering::Acquire) == 0,
        "write ran with memory 4 < 5"
    );
    m.u32(0).store(7, Ordering::Release);
    s.synchronize().or_fail("synchronize")?;
    ensure!(
        m.u32(64).load(Ordering::Acquire) == 1,
        "write missing after 7 >= 5"
    );
    pass()
}

/// Each condition waits on a cell of its own, so that the drain can release all three
/// at once whatever the check reached.
fn wait64_conditions(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let (eq, and, nor, out) = (m.u64(0), m.u64(8), m.u64(16), m.u64(64));
    let (eq_open, and_open, nor_open) = (0x5_0000_0000, u64::MAX, 0xffff_ffff_ffff_fffe);
    // NOR releases when some bit outside the reference is clear: all ones holds it.
    nor.store(u64::MAX, Ordering::Release);
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]).open(|| {
        eq.store(eq_open, Ordering::Release);
        and.store(and_open, Ordering::Release);
        nor.store(nor_open, Ordering::Release);
    });
    let big = 0x5_0000_0001u64;
    s.wait_value64(m.va(0), eq_open, WaitCompare::Eq, 0xffff_ffff_0000_0000)
        .or_fail("wait EQ")?;
    s.write_value64(m.va(64), big, WriteValueFlags::DEFAULT)
        .or_fail("write")?;
    s.wait_value64(m.va(8), 0x8_0000_0000, WaitCompare::And, u64::MAX)
        .or_fail("wait AND")?;
    s.write_value64(m.va(64), big + 1, WriteValueFlags::DEFAULT)
        .or_fail("write")?;
    s.wait_value64(m.va(16), nor_open, WaitCompare::Nor, u64::MAX)
        .or_fail("wait NOR")?;
    s.write_value64(m.va(64), big + 2, WriteValueFlags::DEFAULT)
        .or_fail("write")?;
    eq.store(0x4_ffff_ffff, Ordering::Release);
    settle();
    ensure!(
        out.load(Ordering::Acquire) == 0,
        "EQ released with high word 4"
    );
    eq.store(0x5_1234_5678, Ordering::Release);
    wait_for("the write after EQ", WAIT, || {
        out.load(Ordering::Acquire) == big
    })?;
    and.store(!0x8_0000_0000, Ordering::Release);
    settle();
    ensure!(
        out.load(Ordering::Acquire) == big,
        "AND released with bit 35 clear"
    );
    and.store(and_open, Ordering::Release);
    wait_for("the write after AND", WAIT, || {
        out.load(Ordering::Acquire) == big + 1
    })?;
    settle();
    ensure!(
        out.load(Ordering::Acquire) == big + 1,
        "NOR released with memory all ones"
    );
    nor.store(nor_open, Ordering::Release);
    s.synchronize().or_fail("synchronize")?;
    ensure!(
        out.load(Ordering::Acquire) == big + 2,
        "write after NOR missing"
    );
    pass()
}

fn invalid_args(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    // Were the NOR below to wait after all, memory 0 releases it.
    let _drain = Drain::streams(&[&s]).open(|| m.u32(0).store(0, Ordering::Release));
    // An undefined comparison has no WaitCompare value (the C ABI's InvalidValue).
    ensure!(
        WaitCompare::from_raw(4).is_none(),
        "wait flags 4 decoded as a comparison"
    );
    let cases: [(&str, kfdrt::Result<()>); 3] = [
        (
            "write32 at +2",
            s.write_value32(m.va(2), 0, WriteValueFlags::DEFAULT),
        ),
        (
            "write64 at +4",
            s.write_value64(m.va(4), 0, WriteValueFlags::DEFAULT),
        ),
        (
            "wait64 at +4",
            s.wait_value64(m.va(4), 0, WaitCompare::Gte, u64::MAX),
        ),
    ];
    for (what, r) in cases {
        match r {
            Err(e) if e.kind() == ErrorKind::InvalidValue => {}
            other => return Err(format!("{what}: want InvalidValue, got {other:?}")),
        }
    }
    // NOR with a partial mask holds for every value: the write after it lands at once
    // even with memory all ones.
    m.u32(0).store(u32::MAX, Ordering::Release);
    s.wait_value32(m.va(0), 0, WaitCompare::Nor, 0xff)
        .or_fail("wait NOR partial mask")?;
    s.write_value32(m.va(8), 5, WriteValueFlags::DEFAULT)
        .or_fail("write")?;
    // Write flags are reserved and ignored (HIP seed), CUDA's NO_MEMORY_BARRIER included.
    s.write_value32(m.va(12), 6, WriteValueFlags::NO_MEMORY_BARRIER)
        .or_fail("write with flags 1")?;
    s.synchronize().or_fail("synchronize")?;
    ensure!(
        m.u32(8).load(Ordering::Acquire) == 5,
        "write after the no-op NOR missing"
    );
    ensure!(
        m.u32(12).load(Ordering::Acquire) == 6,
        "write with reserved flags missing"
    );
    pass()
}
