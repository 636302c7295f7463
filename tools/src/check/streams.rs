//! streams: order, query/synchronize, null-stream semantics, destroy while busy, and
//! independence of streams sharing hardware queues.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use kfdrt::{ErrorKind, MemoryKind, StreamFlags, WriteValueFlags};

use super::raw::Scratch;
use super::{
    ensure, hold, pass, pass_with, settle, wait_for, Check, CheckResult, Ctx, Drain, OrFail, WAIT,
};

/// The stream checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "streams.write_order",
            what: "200 writes to one address on a stream land in order (the last value wins)",
            run: write_order,
        },
        Check {
            name: "streams.query_synchronize",
            what: "query is NotReady while a wait holds the stream, Ok after synchronize; flags read back",
            run: query_synchronize,
        },
        Check {
            name: "streams.null_stream_semantics",
            what: "null-stream work waits for blocking streams but not for non-blocking ones",
            run: null_stream,
        },
        Check {
            name: "streams.destroy_while_busy",
            what: "dropping a busy stream returns at once and its work still completes",
            run: destroy_while_busy,
        },
        Check {
            name: "streams.blocked_stream_isolated",
            what: "with one of 12 streams blocked in a wait, the other 11 complete (no false sharing of queues)",
            run: blocked_isolated,
        },
    ]
}

fn mem(ctx: &Ctx) -> Result<Scratch, String> {
    Scratch::new(&ctx.dev, MemoryKind::Signal, 0, 4096)
}

fn write_order(ctx: &Ctx) -> CheckResult {
    let m = mem(ctx)?;
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    for i in 1..=200u32 {
        s.write_value32(m.va(0), i, WriteValueFlags::DEFAULT)
            .or_fail("write_value32")?;
        if i % 50 == 0 {
            s.write_value32(m.va(4 * (i / 50) as usize), i, WriteValueFlags::DEFAULT)
                .or_fail("write_value32")?;
        }
    }
    s.synchronize().or_fail("synchronize")?;
    let got = m.u32(0).load(Ordering::Acquire);
    ensure!(got == 200, "cell holds {got}, want 200 (the last write)");
    for k in 1..=4u32 {
        let got = m.u32(4 * k as usize).load(Ordering::Acquire);
        ensure!(got == 50 * k, "marker {k} = {got}, want {}", 50 * k);
    }
    pass()
}

fn query_synchronize(ctx: &Ctx) -> CheckResult {
    let m = mem(ctx)?;
    let s = ctx
        .dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .or_fail("create_stream_with_flags")?;
    let _drain = Drain::streams(&[&s]).open(|| m.u32(0).store(1, Ordering::Release));
    ensure!(
        s.flags() == StreamFlags::NON_BLOCKING,
        "flags read back {:#x}",
        s.flags()
    );
    // Undefined flag bits have no StreamFlags value (the C ABI's InvalidValue).
    ensure!(
        StreamFlags::from_bits(0x8).is_none(),
        "stream flags 0x8 were accepted"
    );
    s.query().or_fail("query of an idle stream")?;
    hold(&s, m.va(0))?;
    s.write_value32(m.va(64), 9, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    settle();
    match s.query() {
        Err(e) if e.kind() == ErrorKind::NotReady => {}
        other => {
            return Err(format!(
                "query of a held stream: want NotReady, got {other:?}"
            ))
        }
    }
    m.u32(0).store(1, Ordering::Release);
    s.synchronize().or_fail("synchronize")?;
    ensure!(
        m.u32(64).load(Ordering::Acquire) == 9,
        "write not landed after synchronize"
    );
    s.query().or_fail("query after synchronize")?;
    pass()
}

fn null_stream(ctx: &Ctx) -> CheckResult {
    let m = mem(ctx)?;
    let blocking = ctx
        .dev
        .create_stream_with_flags(0, StreamFlags::DEFAULT)
        .or_fail("create blocking stream")?;
    let nonblocking = ctx
        .dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .or_fail("create non-blocking stream")?;
    let null = ctx.dev.null_stream(0).or_fail("null_stream")?;
    let _drain = Drain::streams(&[&blocking, &nonblocking, &null])
        .open(|| m.u32(0).store(1, Ordering::Release));
    ensure!(null.is_null(), "null_stream() is not a null stream");
    hold(&blocking, m.va(0))?;
    null.write_value32(m.va(64), 1, WriteValueFlags::DEFAULT)
        .or_fail("null write")?;
    nonblocking
        .write_value32(m.va(128), 1, WriteValueFlags::DEFAULT)
        .or_fail("non-blocking write")?;
    nonblocking
        .synchronize()
        .or_fail("non-blocking synchronize")?;
    settle();
    ensure!(
        m.u32(128).load(Ordering::Acquire) == 1,
        "non-blocking stream's write did not land"
    );
    ensure!(
        m.u32(64).load(Ordering::Acquire) == 0,
        "null-stream write ran before the blocking stream's earlier work"
    );
    m.u32(0).store(1, Ordering::Release);
    null.synchronize().or_fail("null synchronize")?;
    ensure!(
        m.u32(64).load(Ordering::Acquire) == 1,
        "null-stream write lost"
    );
    blocking.synchronize().or_fail("blocking synchronize")?;
    pass()
}

fn destroy_while_busy(ctx: &Ctx) -> CheckResult {
    let m = mem(ctx)?;
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let queueing = Drain::streams(&[&s]).open(|| m.u32(0).store(1, Ordering::Release));
    hold(&s, m.va(0))?;
    s.write_value32(m.va(64), 5, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    queueing.disarm();
    // From here the stream is gone: its last write landing is its drain (the buffer
    // stays until it lands, as in Drain).
    let _drain = Drain::streams(&[]).open(|| {
        m.u32(0).store(1, Ordering::Release);
        while wait_for("the destroyed stream's write", WAIT, || {
            m.u32(64).load(Ordering::Acquire) == 5
        })
        .is_err()
        {}
    });
    let t = Instant::now();
    drop(s);
    let dt = t.elapsed();
    ensure!(
        dt < Duration::from_millis(500),
        "dropping a busy stream blocked for {dt:?}"
    );
    settle();
    ensure!(
        m.u32(64).load(Ordering::Acquire) == 0,
        "write ran past the wait"
    );
    m.u32(0).store(1, Ordering::Release);
    wait_for("the destroyed stream's write", WAIT, || {
        m.u32(64).load(Ordering::Acquire) == 5
    })?;
    pass()
}

fn blocked_isolated(ctx: &Ctx) -> CheckResult {
    let m = mem(ctx)?;
    let streams = (0..12)
        .map(|_| {
            ctx.dev
                .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        })
        .collect::<Result<Vec<_>, _>>()
        .or_fail("create streams")?;
    let _drain = Drain::streams(&streams.iter().collect::<Vec<_>>())
        .open(|| m.u32(0).store(1, Ordering::Release));
    hold(&streams[0], m.va(0))?;
    streams[0]
        .write_value32(m.va(4), 100, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    for (i, s) in streams.iter().enumerate().skip(1) {
        s.write_value32(m.va(64 + 4 * i), i as u32, WriteValueFlags::DEFAULT)
            .or_fail("write_value32")?;
    }
    for (i, s) in streams.iter().enumerate().skip(1) {
        s.synchronize()
            .map_err(|e| format!("stream {i} (unrelated to the blocked one): {e}"))?;
        let got = m.u32(64 + 4 * i).load(Ordering::Acquire);
        ensure!(got == i as u32, "stream {i} wrote {got}");
    }
    ensure!(
        m.u32(4).load(Ordering::Acquire) == 0,
        "blocked stream's write ran"
    );
    m.u32(0).store(1, Ordering::Release);
    streams[0]
        .synchronize()
        .or_fail("blocked stream synchronize")?;
    ensure!(
        m.u32(4).load(Ordering::Acquire) == 100,
        "blocked stream's write lost"
    );
    let queues: std::collections::HashSet<u32> = streams.iter().map(|s| s.hw_queue_id()).collect();
    pass_with(format!("{} hardware queues for 12 streams", queues.len()))
}
