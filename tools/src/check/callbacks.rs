//! callbacks: exactly once, in order, after earlier work, holding later work.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kfdrt::{MemoryKind, WriteValueFlags};

use super::raw::Scratch;
use super::{ensure, pass, settle, Check, CheckResult, Ctx, Drain, OrFail};

/// The callback checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "callbacks.once_in_order",
            what: "three callbacks run once each, in order, each seeing exactly the writes enqueued before it, with Ok status",
            run: once_in_order,
        },
        Check {
            name: "callbacks.hold_later_work",
            what: "work enqueued after a callback waits until the callback returns",
            run: hold_later_work,
        },
    ]
}

fn once_in_order(ctx: &Ctx) -> CheckResult {
    let m = Arc::new(Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?);
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    let log = Arc::new(Mutex::new(Vec::new()));
    for k in 1..=3u32 {
        s.write_value32(m.va(0), k, WriteValueFlags::DEFAULT)
            .or_fail("write_value32")?;
        let (l, mm) = (log.clone(), m.clone());
        s.add_callback(
            move |st| {
                let seen = mm.u32(0).load(Ordering::Acquire);
                l.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((k, seen, st.is_ok()));
            },
            0,
        )
        .or_fail("add_callback")?;
    }
    s.write_value32(m.va(0), 4, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    s.synchronize().or_fail("synchronize")?;
    // The last callback may still be finishing its bookkeeping after the hold released.
    let got = log.lock().unwrap_or_else(|e| e.into_inner()).clone();
    ensure!(
        got == vec![(1, 1, true), (2, 2, true), (3, 3, true)],
        "callback log (index, value seen, status ok) = {got:?}"
    );
    ensure!(m.u32(0).load(Ordering::Acquire) == 4, "final write missing");
    pass()
}

fn hold_later_work(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (ran_tx, ran_rx) = std::sync::mpsc::channel::<()>();
    // The callback holds the stream until it hears from the host.
    let _drain = Drain::streams(&[&s]).open(|| {
        let _ = tx.send(());
    });
    s.add_callback(
        move |_| {
            let _ = ran_tx.send(());
            let _ = rx.recv_timeout(Duration::from_secs(10));
        },
        0,
    )
    .or_fail("add_callback")?;
    s.write_value32(m.va(0), 1, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    ran_rx
        .recv_timeout(Duration::from_secs(5))
        .map_err(|_| "the callback did not start within 5 s".to_string())?;
    settle();
    ensure!(
        m.u32(0).load(Ordering::Acquire) == 0,
        "work after the callback ran while the callback was still running"
    );
    tx.send(()).map_err(|_| "callback gone".to_string())?;
    s.synchronize().or_fail("synchronize")?;
    ensure!(m.u32(0).load(Ordering::Acquire) == 1, "later write missing");
    pass()
}
