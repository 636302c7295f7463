//! Events: record, query, synchronize, elapsed time, wait across streams and GPUs.

mod common;

use std::sync::atomic::Ordering;

use common::{emu, settle, signal_mem};
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
