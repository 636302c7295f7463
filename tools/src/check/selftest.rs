//! Self-tests of the checker's cleanup (only with `--inject-fault`): a check that ends
//! early, or panics, while its stream waits on a word in its own buffer must leave no
//! work behind that touches freed memory, and must not disturb the next check.

use std::sync::atomic::Ordering;

use kfdrt::{Device, MemoryKind, WriteValueFlags};

use super::raw::Scratch;
use super::{
    ensure, hold, pass_with, require, settle, Check, CheckResult, Ctx, Drain, FaultAudit, OrFail,
    WAIT,
};

/// The cleanup self-tests.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "selftest.early_exit_while_held",
            what: "checker self-test: returns a failure while its stream waits on its buffer; must FAIL with no GPU fault after it",
            run: early_exit_while_held,
        },
        Check {
            name: "selftest.panic_while_held",
            what: "checker self-test: panics while its stream waits on its buffer; must FAIL as a panic with no GPU fault after it",
            run: panic_while_held,
        },
        Check {
            name: "selftest.freed_under_queue_is_seen",
            what: "checker self-test: a buffer freed under a held stream (no Drain) raises the GPU fault the runner's audit looks for",
            run: freed_under_queue_is_seen,
        },
    ]
}

/// A buffer with a stream held on its word 0 and a write into its word 64 queued behind.
fn held(dev: &Device) -> Result<(Scratch, kfdrt::Stream), String> {
    let m = Scratch::new(dev, MemoryKind::Signal, 0, 4096)?;
    let s = dev.create_stream(0).or_fail("create_stream")?;
    Ok((m, s))
}

fn queue_behind_gate(m: &Scratch, s: &kfdrt::Stream) -> Result<(), String> {
    hold(s, m.va(0))?;
    s.write_value32(m.va(64), 7, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    settle();
    ensure!(
        m.u32(64).load(Ordering::Acquire) == 0,
        "the write ran past the held wait"
    );
    Ok(())
}

fn early_exit_while_held(ctx: &Ctx) -> CheckResult {
    let (m, s) = held(&ctx.dev)?;
    let _drain = Drain::streams(&[&s]).open(|| m.u32(0).store(1, Ordering::Release));
    queue_behind_gate(&m, &s)?;
    Err("injected early failure while the stream waits on its buffer".into())
}

fn panic_while_held(ctx: &Ctx) -> CheckResult {
    let (m, s) = held(&ctx.dev)?;
    let _drain = Drain::streams(&[&s]).open(|| m.u32(0).store(1, Ordering::Release));
    queue_behind_gate(&m, &s)?;
    panic!("injected panic while the stream waits on its buffer");
}

/// What the [`Drain`] prevents, on a device of its own: the fault must be seen (else the
/// audit after every check proves nothing).
fn freed_under_queue_is_seen(ctx: &Ctx) -> CheckResult {
    let dev = require!(ctx.private_device());
    let audit = FaultAudit::new(dev.backend().as_ref());
    let (m, s) = held(&dev)?;
    queue_behind_gate(&m, &s)?;
    let page = m.va(0);
    drop(m);
    let mut seen = None;
    let t = std::time::Instant::now();
    while seen.is_none() && t.elapsed() < WAIT {
        seen = audit.take(50);
    }
    let f = seen.ok_or("no GPU fault within 5 s of freeing a buffer under a held stream")?;
    ensure!(
        f.ends_with(&format!("page {page:#x}")),
        "the fault names another page than the freed buffer's {page:#x}: {f}"
    );
    drop(s);
    pass_with(f)
}
