//! xstream: events across streams and GPUs.

use std::sync::atomic::Ordering;

use kfdrt::{ErrorKind, Event, EventFlags, MemoryKind, Stream, StreamFlags, WriteValueFlags};

use super::raw::Scratch;
use super::{
    ensure, hold, pass, pass_with, require, settle, Check, CheckResult, Ctx, Drain, OrFail,
};

/// The cross-stream event checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "xstream.wait_event_orders",
            what: "a stream waiting on another stream's event runs its later work only after that event",
            run: wait_event_orders,
        },
        Check {
            name: "xstream.unrecorded_event_noop",
            what: "waiting on a never-recorded event is a no-op; its query and synchronize succeed",
            run: unrecorded_noop,
        },
        Check {
            name: "xstream.rerecord_only_call_time_counts",
            what: "re-recording an event after a wait does not change what the wait waits for",
            run: rerecord,
        },
        Check {
            name: "xstream.elapsed_time",
            what: "elapsed time between timing events spans a 20 ms hold; disable-timing events refuse it",
            run: elapsed_time,
        },
        Check {
            name: "xstream.cross_gpu_wait_event",
            what: "a stream on GPU 1 waits for an event recorded on GPU 0 (multi-GPU)",
            run: cross_gpu,
        },
    ]
}

fn nb(ctx: &Ctx, gpu: usize) -> Result<Stream, String> {
    ctx.dev
        .create_stream_with_flags(gpu, StreamFlags::NON_BLOCKING)
        .or_fail("create_stream")
}

fn held_by_event(ctx: &Ctx, a_gpu: usize, b_gpu: usize) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let (a, b) = (nb(ctx, a_gpu)?, nb(ctx, b_gpu)?);
    let e = ctx
        .dev
        .create_event(EventFlags::DISABLE_TIMING)
        .or_fail("create_event")?;
    let _drain = Drain::streams(&[&a, &b]).open(|| m.u32(0).store(1, Ordering::Release));
    hold(&a, m.va(0))?;
    a.write_value32(m.va(4), 1, WriteValueFlags::DEFAULT)
        .or_fail("write A")?;
    e.record(&a).or_fail("record")?;
    b.wait_event(&e, 0).or_fail("wait_event")?;
    b.write_value32(m.va(8), 2, WriteValueFlags::DEFAULT)
        .or_fail("write B")?;
    settle();
    ensure!(
        m.u32(8).load(Ordering::Acquire) == 0,
        "B's write ran before A's recorded work"
    );
    match e.query() {
        Err(x) if x.kind() == ErrorKind::NotReady => {}
        other => return Err(format!("event query while pending: {other:?}")),
    }
    m.u32(0).store(1, Ordering::Release);
    b.synchronize().or_fail("synchronize B")?;
    ensure!(
        m.u32(4).load(Ordering::Acquire) == 1 && m.u32(8).load(Ordering::Acquire) == 2,
        "writes missing after synchronize"
    );
    e.query().or_fail("event query after completion")?;
    pass()
}

fn wait_event_orders(ctx: &Ctx) -> CheckResult {
    held_by_event(ctx, 0, 0)
}

fn unrecorded_noop(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let b = nb(ctx, 0)?;
    let e = ctx
        .dev
        .create_event(EventFlags::DEFAULT)
        .or_fail("create_event")?;
    let _drain = Drain::streams(&[&b]);
    e.query().or_fail("query of an unrecorded event")?;
    e.synchronize()
        .or_fail("synchronize of an unrecorded event")?;
    b.wait_event(&e, 0).or_fail("wait_event")?;
    b.write_value32(m.va(0), 3, WriteValueFlags::DEFAULT)
        .or_fail("write")?;
    b.synchronize().or_fail("synchronize")?;
    ensure!(
        m.u32(0).load(Ordering::Acquire) == 3,
        "write after the no-op wait missing"
    );
    ensure!(
        !b.has_dedicated_queue(),
        "a no-op wait moved the stream to a dedicated queue"
    );
    pass()
}

fn rerecord(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let (a, b, c) = (nb(ctx, 0)?, nb(ctx, 0)?, nb(ctx, 0)?);
    let e = ctx
        .dev
        .create_event(EventFlags::DISABLE_TIMING)
        .or_fail("create_event")?;
    let _drain = Drain::streams(&[&a, &b, &c]).open(|| m.u32(0).store(1, Ordering::Release));
    hold(&a, m.va(0))?;
    e.record(&a).or_fail("record on A")?;
    b.wait_event(&e, 0).or_fail("wait_event")?;
    e.record(&c).or_fail("re-record on idle C")?;
    b.write_value32(m.va(8), 2, WriteValueFlags::DEFAULT)
        .or_fail("write B")?;
    c.synchronize().or_fail("synchronize C")?;
    e.synchronize()
        .or_fail("synchronize the re-recorded event")?;
    settle();
    ensure!(
        m.u32(8).load(Ordering::Acquire) == 0,
        "B's wait followed the later record (on idle C) instead of the one at call time"
    );
    m.u32(0).store(1, Ordering::Release);
    b.synchronize().or_fail("synchronize B")?;
    ensure!(m.u32(8).load(Ordering::Acquire) == 2, "B's write lost");
    pass()
}

fn elapsed_time(ctx: &Ctx) -> CheckResult {
    let m = Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)?;
    let s = nb(ctx, 0)?;
    let (start, end) = (
        ctx.dev
            .create_event(EventFlags::DEFAULT)
            .or_fail("create_event")?,
        ctx.dev
            .create_event(EventFlags::DEFAULT)
            .or_fail("create_event")?,
    );
    let nt = ctx
        .dev
        .create_event(EventFlags::DISABLE_TIMING)
        .or_fail("create_event")?;
    let _drain = Drain::streams(&[&s]).open(|| m.u32(0).store(1, Ordering::Release));
    start.record(&s).or_fail("record start")?;
    hold(&s, m.va(0))?;
    end.record(&s).or_fail("record end")?;
    // The start timestamp exists before the hold begins, the end one only after the
    // release: the difference is at least the hold, whatever the load.
    start.synchronize().or_fail("synchronize start")?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    m.u32(0).store(1, Ordering::Release);
    end.synchronize().or_fail("synchronize end")?;
    let ms = Event::elapsed_ms(&start, &end).or_fail("elapsed_ms")?;
    ensure!(
        (19.9..10_000.0).contains(&ms),
        "elapsed {ms} ms across a 20 ms hold"
    );
    let back = Event::elapsed_ms(&end, &start).or_fail("elapsed_ms reversed")?;
    ensure!(
        back.partial_cmp(&0.0) == Some(std::cmp::Ordering::Less),
        "reversed elapsed time {back} is not negative"
    );
    nt.record(&s).or_fail("record")?;
    nt.synchronize().or_fail("synchronize")?;
    match Event::elapsed_ms(&start, &nt) {
        Err(e) if e.kind() == ErrorKind::InvalidHandle => pass_with(format!("{ms:.2} ms")),
        other => Err(format!("elapsed with a disable-timing event: {other:?}")),
    }
}

fn cross_gpu(ctx: &Ctx) -> CheckResult {
    require!(ctx.need_gpus(2));
    held_by_event(ctx, 0, 1)
}
