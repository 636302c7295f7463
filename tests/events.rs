//! Events: record, query, synchronize, elapsed time, wait across streams and GPUs.

mod common;

use std::sync::atomic::Ordering;

use common::{emu, settle, signal_mem, Gate};
use kfdrt::{ErrorKind, Event, EventFlags, WaitCompare, WriteValueFlags};

#[test]
fn record_query_synchronize_elapsed() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    let e0 = dev.create_event(EventFlags::DEFAULT).unwrap();
    let e1 = dev.create_event(EventFlags::BLOCKING_SYNC).unwrap();
    // Never recorded: query succeeds, elapsed time is an error.
    e0.query().unwrap();
    assert_eq!(
        Event::elapsed_ms(&e0, &e1).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
    e0.record(&s).unwrap();
    s.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    e1.record(&s).unwrap();
    settle();
    assert_eq!(e1.query().unwrap_err().kind(), ErrorKind::NotReady);
    assert_eq!(
        Event::elapsed_ms(&e0, &e1).unwrap_err().kind(),
        ErrorKind::NotReady
    );
    // A pending start with a stop never recorded: InvalidHandle, as CLR checks both
    // records before either's completion.
    let unrecorded = dev.create_event(EventFlags::DEFAULT).unwrap();
    assert_eq!(
        Event::elapsed_ms(&e1, &unrecorded).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
    // e0's timestamp is written before the hold starts; e1's only after the release, so
    // the GPU clock difference is at least the hold (a causal bound, not a race).
    e0.synchronize().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    mem.atomic_u32(0).unwrap().store(1, Ordering::Release);
    e1.synchronize().unwrap();
    e1.query().unwrap();
    let ms = Event::elapsed_ms(&e0, &e1).unwrap();
    assert!(
        ms >= 19.9,
        "the GPU clock spans the host's 20 ms hold: {ms} ms"
    );
    let nt = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    nt.record(&s).unwrap();
    nt.synchronize().unwrap();
    assert_eq!(
        Event::elapsed_ms(&e0, &nt).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
    // Undefined flag bits have no EventFlags value (the C ABI reports InvalidValue);
    // the one defined flag kfdrt cannot honour is NotSupported.
    assert_eq!(EventFlags::from_bits(0x80), None);
    assert_eq!(
        dev.create_event(EventFlags::INTERPROCESS)
            .unwrap_err()
            .kind(),
        ErrorKind::NotSupported
    );
}

#[test]
fn stream_wait_event_across_streams_uses_the_record_at_call_time() {
    let dev = emu("emu:mi210");
    let mem = signal_mem(&dev, 4096);
    let gate = mem.atomic_u32(0).unwrap();
    let a = dev.create_stream(0).unwrap();
    let b = dev.create_stream(0).unwrap();
    let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();

    // Unrecorded event: no-op.
    b.wait_event(&ev, 0).unwrap();
    b.write_value32(mem.va() + 4, 1, WriteValueFlags::DEFAULT)
        .unwrap();
    b.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 1);

    // b waits for a's record, which sits behind a's wait on the gate.
    a.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    ev.record(&a).unwrap();
    b.wait_event(&ev, 0).unwrap();
    b.write_value32(mem.va() + 4, 2, WriteValueFlags::DEFAULT)
        .unwrap();
    // Re-recording later does not change what b already waits for.
    a.wait_value32(mem.va(), 2, WaitCompare::Eq, u32::MAX)
        .unwrap();
    ev.record(&a).unwrap();
    settle();
    assert_eq!(
        mem.atomic_u32(4).unwrap().load(Ordering::Acquire),
        1,
        "b waits for a"
    );
    gate.store(1, Ordering::Release);
    b.synchronize().unwrap();
    assert_eq!(
        mem.atomic_u32(4).unwrap().load(Ordering::Acquire),
        2,
        "only the first record counted"
    );
    assert_eq!(
        ev.query().unwrap_err().kind(),
        ErrorKind::NotReady,
        "second record still pending"
    );
    gate.store(2, Ordering::Release);
    ev.synchronize().unwrap();
    assert_eq!(
        b.wait_event(&ev, 3).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
}

#[test]
fn events_across_two_emulated_gpus() {
    let dev = emu("emu:mi250x*2");
    assert_eq!(dev.gpus().len(), 2);
    let mem = signal_mem(&dev, 4096);
    let s0 = dev.create_stream(0).unwrap();
    let s1 = dev.create_stream(1).unwrap();
    let ev = dev.create_event(EventFlags::DEFAULT).unwrap();
    s0.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    s0.write_value32(mem.va() + 4, 11, WriteValueFlags::DEFAULT)
        .unwrap();
    ev.record(&s0).unwrap();
    s1.wait_event(&ev, 0).unwrap();
    s1.write_value32(mem.va() + 8, 22, WriteValueFlags::DEFAULT)
        .unwrap();
    settle();
    assert_eq!(
        mem.atomic_u32(8).unwrap().load(Ordering::Acquire),
        0,
        "GPU 1 waits for GPU 0"
    );
    mem.atomic_u32(0).unwrap().store(1, Ordering::Release);
    s1.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 11);
    assert_eq!(mem.atomic_u32(8).unwrap().load(Ordering::Acquire), 22);
}

/// Bound for a synchronize that must finish (a hang becomes a failure).
const SYNC: std::time::Duration = std::time::Duration::from_secs(20);

/// b's later work waits for one round of a's work through `ev`: a held by a gate, `ev`
/// recorded on a, b waits for it and writes `v` to `out` (offset in `mem`). Returns the gate.
fn round(
    dev: &kfdrt::Device,
    a: &kfdrt::Stream,
    b: &kfdrt::Stream,
    ev: &Event,
    mem: &kfdrt::Buffer,
    out: usize,
    v: u32,
) -> Gate {
    let g = Gate::new(dev);
    g.hold(a);
    ev.record(a).unwrap();
    b.wait_event(ev, 0).unwrap();
    b.write_value32(mem.va() + out as u64, v, WriteValueFlags::DEFAULT)
        .unwrap();
    g
}

fn word(mem: &kfdrt::Buffer, at: usize) -> u32 {
    mem.atomic_u32(at).unwrap().load(Ordering::Acquire)
}

/// The enqueue hot paths keep no stale copy of a record: a re-record on the same stream
/// (which updates only the record's count) is what the next wait waits for, and a
/// re-record after a wait does not change that wait. The first round moves b to its
/// dedicated queue and makes a's timeline known to it, so the later rounds take the
/// lock-free record and wait paths.
#[test]
fn re_record_on_the_same_stream_between_two_waits() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let a = dev.create_stream(0).unwrap();
    let b = dev.create_stream(0).unwrap();
    let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    let g0 = round(&dev, &a, &b, &ev, &mem, 0, 1);
    g0.open();
    b.synchronize_timeout(SYNC).unwrap();
    assert_eq!(word(&mem, 0), 1);
    assert!(b.has_dedicated_queue());
    for i in 2..6u32 {
        // The previous record is complete: a wait for it would not hold b.
        let g = round(&dev, &a, &b, &ev, &mem, 0, i);
        // Recorded again behind another gate after b's wait: not what b waits for.
        let later = Gate::new(&dev);
        later.hold(&a);
        ev.record(&a).unwrap();
        settle();
        assert_eq!(
            word(&mem, 0),
            i - 1,
            "round {i}: b waits for a's new record"
        );
        g.open();
        b.synchronize_timeout(SYNC).unwrap();
        assert_eq!(
            word(&mem, 0),
            i,
            "round {i}: only the record before the wait held b"
        );
        assert_eq!(ev.query().unwrap_err().kind(), ErrorKind::NotReady);
        later.open();
        ev.wait_timeout(SYNC).unwrap();
        ev.query().unwrap();
    }
}

/// A re-record on another stream (another timeline) is what the next wait waits for,
/// both when the waiting stream has not waited on that timeline before and when it has
/// (the lock-free wait path only for the latter), and back on the first stream again.
#[test]
fn re_record_on_another_stream_between_two_waits() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let a = dev.create_stream(0).unwrap();
    let c = dev.create_stream(0).unwrap();
    let b = dev.create_stream(0).unwrap();
    let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    let g = round(&dev, &a, &b, &ev, &mem, 0, 1);
    g.open();
    b.synchronize_timeout(SYNC).unwrap();
    for i in 0..3u32 {
        let v = 10 * (i + 1);
        // On c (new to b the first time), then on a again; both held until their gates
        // open, c's first.
        let gc = round(&dev, &c, &b, &ev, &mem, 0, v);
        let ga = round(&dev, &a, &b, &ev, &mem, 0, v + 1);
        settle();
        assert_eq!(word(&mem, 0), v - 9, "b waits for c");
        gc.open();
        wait_for_word(&mem, 0, v);
        settle();
        assert_eq!(word(&mem, 0), v, "then for a");
        ga.open();
        b.synchronize_timeout(SYNC).unwrap();
        assert_eq!(word(&mem, 0), v + 1);
    }
}

fn wait_for_word(mem: &kfdrt::Buffer, at: usize, v: u32) {
    common::wait_until(&format!("word {at} == {v}"), || word(mem, at) == v);
}

/// A record outlives its stream: a wait on an event recorded on a stream destroyed
/// since (with work still pending) still waits for that work, on the lock-free paths
/// too (the stream's timeline known to the waiter, the event re-recorded on it).
#[test]
fn wait_on_a_record_of_a_destroyed_stream() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let b = dev.create_stream(0).unwrap();
    let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    for i in 1..4u32 {
        let a = dev.create_stream(0).unwrap();
        let g = round(&dev, &a, &b, &ev, &mem, 0, 2 * i);
        g.open();
        b.synchronize_timeout(SYNC).unwrap();
        // a's timeline is known to b now; the next record on a takes the fast path.
        let g = Gate::new(&dev);
        g.hold(&a);
        ev.record(&a).unwrap();
        drop(a);
        b.wait_event(&ev, 0).unwrap();
        b.write_value32(mem.va(), 2 * i + 1, WriteValueFlags::DEFAULT)
            .unwrap();
        settle();
        assert_eq!(
            word(&mem, 0),
            2 * i,
            "b waits for the destroyed stream's work"
        );
        g.open();
        b.synchronize_timeout(SYNC).unwrap();
        assert_eq!(word(&mem, 0), 2 * i + 1);
        ev.wait_timeout(SYNC).unwrap();
    }
}

/// A timing event's timestamp cell outlives a record whose timestamp packet is still
/// queued: the event re-recorded elsewhere, or destroyed, must not hand the cell to the
/// next event while the packet can still write it (it would overwrite that event's
/// timestamp with a later one). The next timing records take the cell freed last.
#[test]
fn a_queued_timestamp_keeps_its_cell() {
    let dev = emu("emu:mi300x");
    let (a, b) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
    for destroy in [false, true] {
        let g = Gate::new(&dev);
        g.hold(&a);
        let e1 = dev.create_event(EventFlags::DEFAULT).unwrap();
        e1.record(&a).unwrap();
        if destroy {
            drop(e1);
        } else {
            e1.record(&b).unwrap();
        }
        let (e2, e3) = (
            dev.create_event(EventFlags::DEFAULT).unwrap(),
            dev.create_event(EventFlags::DEFAULT).unwrap(),
        );
        e2.record(&b).unwrap();
        e3.record(&b).unwrap();
        b.synchronize_timeout(SYNC).unwrap();
        let before = Event::elapsed_ms(&e2, &e3).unwrap();
        assert!(before >= 0.0, "{before}");
        g.open();
        a.synchronize_timeout(SYNC).unwrap();
        assert_eq!(
            Event::elapsed_ms(&e2, &e3).unwrap(),
            before,
            "e2's timestamp stays (destroyed: {destroy})"
        );
    }
}
