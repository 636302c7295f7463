//! aql: AQL barrier packets, completion signals and dispatch ids on a raw AQL queue.

use std::sync::atomic::Ordering;

use pm4::aql::AqlPacket;

use super::raw::{RawAql, RawSignals};
use super::{ensure, pass, settle, wait_for, Check, CheckResult, Ctx, WAIT};

/// The AQL checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "aql.barrier_and_waits_for_all",
            what: "barrier-AND completes only after every dependency reaches 0, and holds the next packet",
            run: barrier_and,
        },
        Check {
            name: "aql.barrier_or_waits_for_any",
            what: "barrier-OR completes as soon as one dependency reaches 0",
            run: barrier_or,
        },
        Check {
            name: "aql.completion_count_ring_wrap",
            what: "150 packets through a 64-slot ring decrement their completion signal 150 times; read_dispatch_id = 150",
            run: completion_count,
        },
    ]
}

fn barrier_and(ctx: &Ctx) -> CheckResult {
    let s = RawSignals::new(&ctx.dev)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawAql::new(&ctx.dev, 0, 64)?;
    let (d0, d1) = (s.init(0, 1, None), s.init(1, 1, None));
    let (c, next) = (s.init(2, 1, None), s.init(3, 1, None));
    q.submit(&[
        AqlPacket::barrier_and([d0, d1, 0, 0, 0], c),
        AqlPacket::barrier_and([0, 0, 0, 0, 0], next),
    ])?;
    settle();
    ensure!(
        s.value(2).load(Ordering::Acquire) == 1,
        "completed with both deps at 1"
    );
    s.value(0).store(0, Ordering::Release);
    settle();
    ensure!(
        s.value(2).load(Ordering::Acquire) == 1,
        "completed with one dep still at 1"
    );
    ensure!(
        s.value(3).load(Ordering::Acquire) == 1,
        "the next packet ran while the barrier waited"
    );
    s.value(1).store(0, Ordering::Release);
    wait_for("the barrier-AND completion", WAIT, || {
        s.value(2).load(Ordering::Acquire) == 0 && s.value(3).load(Ordering::Acquire) == 0
    })?;
    pass()
}

fn barrier_or(ctx: &Ctx) -> CheckResult {
    let s = RawSignals::new(&ctx.dev)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawAql::new(&ctx.dev, 0, 64)?;
    let (d0, d1, c) = (s.init(0, 1, None), s.init(1, 1, None), s.init(2, 1, None));
    q.submit(&[AqlPacket::barrier_or([d0, d1, 0, 0, 0], c)])?;
    settle();
    ensure!(
        s.value(2).load(Ordering::Acquire) == 1,
        "completed with no dep at 0"
    );
    s.value(1).store(0, Ordering::Release);
    wait_for("the barrier-OR completion", WAIT, || {
        s.value(2).load(Ordering::Acquire) == 0
    })?;
    ensure!(
        s.value(0).load(Ordering::Acquire) == 1,
        "a dependency was modified"
    );
    pass()
}

fn completion_count(ctx: &Ctx) -> CheckResult {
    let s = RawSignals::new(&ctx.dev)?;
    // Declared after the memory its packets name: destroyed first (see Drain).
    let mut q = RawAql::new(&ctx.dev, 0, 64)?;
    let c = s.init(0, 150, None);
    for _ in 0..3 {
        let pkts: Vec<_> = (0..50)
            .map(|_| AqlPacket::barrier_and([0, 0, 0, 0, 0], c))
            .collect();
        q.submit(&pkts)?;
    }
    wait_for("150 completions", WAIT, || {
        s.value(0).load(Ordering::Acquire) == 0
    })?;
    q.wait_consumed()?;
    settle();
    ensure!(
        s.value(0).load(Ordering::Acquire) == 0,
        "signal went to {} (decremented more than once per packet)",
        s.value(0).load(Ordering::Acquire)
    );
    ensure!(q.read_index() == 150, "read_dispatch_id {}", q.read_index());
    pass()
}
