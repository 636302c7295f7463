//! Stream semantics on the emulated device: every test asserts order or values.

mod common;

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use common::{emu, settle, signal_mem, vram_gpu0_cannot_reach, wait_until};
use kfdrt::{ErrorKind, StreamFlags, WaitCompare, WriteValueFlags};

#[test]
fn write_value_lands_after_synchronize() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    s.write_value32(mem.va(), 0xdead_beef, WriteValueFlags::DEFAULT)
        .unwrap();
    s.write_value64(
        mem.va() + 8,
        0x1234_5678_9abc_def0,
        WriteValueFlags::DEFAULT,
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        mem.atomic_u32(0).unwrap().load(Ordering::Acquire),
        0xdead_beef
    );
    assert_eq!(
        mem.atomic_u64(8).unwrap().load(Ordering::Acquire),
        0x1234_5678_9abc_def0
    );
    s.query().unwrap();
}

#[test]
fn wait_value_holds_later_write_until_host_releases() {
    let dev = emu("emu:mi210");
    let mem = signal_mem(&dev, 4096);
    let flag = mem.atomic_u32(0).unwrap();
    let out = mem.atomic_u32(64).unwrap();
    let s = dev.create_stream(0).unwrap();
    s.wait_value32(mem.va(), 5, WaitCompare::Gte, 0xffff_ffff)
        .unwrap();
    s.write_value32(mem.va() + 64, 1, WriteValueFlags::DEFAULT)
        .unwrap();
    assert!(
        s.has_dedicated_queue(),
        "a stream that waits moves to its own queue"
    );
    settle();
    assert_eq!(
        out.load(Ordering::Acquire),
        0,
        "write must stay behind the wait"
    );
    assert_eq!(s.query().unwrap_err().kind(), ErrorKind::NotReady);
    flag.store(4, Ordering::Release);
    settle();
    assert_eq!(out.load(Ordering::Acquire), 0, "4 < 5: still waiting");
    flag.store(7, Ordering::Release);
    s.synchronize().unwrap();
    assert_eq!(out.load(Ordering::Acquire), 1);
}

#[test]
fn wait_value_conditions_eq_and_nor_64bit_above_2_pow_32() {
    let dev = emu("emu:rx7900xtx");
    let mem = signal_mem(&dev, 4096);
    let cell = mem.atomic_u64(0).unwrap();
    let out = mem.atomic_u64(64).unwrap();
    let s = dev.create_stream(0).unwrap();
    let big = 0x5_0000_0001u64;
    // EQ with a mask that keeps the high word only.
    s.wait_value64(
        mem.va(),
        0x5_0000_0000,
        WaitCompare::Eq,
        0xffff_ffff_0000_0000,
    )
    .unwrap();
    s.write_value64(mem.va() + 64, big, WriteValueFlags::DEFAULT)
        .unwrap();
    // AND: some bit of 0x8_0000_0000 set.
    s.wait_value64(mem.va(), 0x8_0000_0000, WaitCompare::And, u64::MAX)
        .unwrap();
    s.write_value64(mem.va() + 64, big + 1, WriteValueFlags::DEFAULT)
        .unwrap();
    // NOR with a full mask: some bit clear in both memory and value.
    s.wait_value64(mem.va(), 0xffff_ffff_ffff_fffe, WaitCompare::Nor, u64::MAX)
        .unwrap();
    s.write_value64(mem.va() + 64, big + 2, WriteValueFlags::DEFAULT)
        .unwrap();

    cell.store(0x4_ffff_ffff, Ordering::Release);
    settle();
    assert_eq!(out.load(Ordering::Acquire), 0);
    cell.store(0x5_1234_5678, Ordering::Release); // EQ passes (high word 5)
    wait_until("first write", || out.load(Ordering::Acquire) == big);
    settle();
    assert_eq!(
        out.load(Ordering::Acquire),
        big,
        "AND must still wait (bit 35 clear)"
    );
    cell.store(0xffff_ffff_ffff_ffff, Ordering::Release); // AND passes; NOR fails (no bit clear in both)
    wait_until("second write", || out.load(Ordering::Acquire) == big + 1);
    settle();
    assert_eq!(
        out.load(Ordering::Acquire),
        big + 1,
        "NOR must wait while memory is all ones"
    );
    cell.store(0xffff_ffff_ffff_fffe, Ordering::Release); // bit 0 clear in both
    s.synchronize().unwrap();
    assert_eq!(out.load(Ordering::Acquire), big + 2);
}

#[test]
fn nor_with_partial_mask_is_always_true_and_bad_flags_are_rejected() {
    let dev = emu("emu:mi210");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    // ~((x & m) | (v & m)) has ones outside m: never waits, memory is all ones.
    mem.atomic_u32(0)
        .unwrap()
        .store(u32::MAX, Ordering::Release);
    s.wait_value32(mem.va(), u32::MAX, WaitCompare::Nor, 0xff)
        .unwrap();
    s.write_value32(mem.va() + 4, 9, WriteValueFlags::DEFAULT)
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 9);
    assert_eq!(WaitCompare::from_raw(7), None); // the C ABI's InvalidValue
    assert_eq!(
        s.write_value32(mem.va() + 2, 0, WriteValueFlags::DEFAULT)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
    // Non-zero write flags are reserved and ignored (seed rule; tests/robustness.rs).
    assert_eq!(
        s.write_value64(0, 0, WriteValueFlags::DEFAULT)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
}

#[test]
fn callback_runs_once_in_order_and_holds_later_work() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let out = mem.atomic_u32(0).unwrap();
    let s = dev.create_stream(0).unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    s.write_value32(mem.va(), 1, WriteValueFlags::DEFAULT)
        .unwrap();
    {
        let log = log.clone();
        let va = mem.va();
        s.add_callback(
            move |st| {
                // Earlier work is complete when the callback runs.
                // SAFETY: `va` is the start of `mem`, a live signal-memory buffer that
                // outlives the callback (the test synchronizes before dropping it).
                let v = unsafe { core::ptr::read_volatile(va as *const u32) };
                log.lock()
                    .unwrap()
                    .push(format!("cb1 status={} seen={v}", st.is_ok()));
                rx.recv().unwrap(); // hold until the test releases
            },
            0,
        )
        .unwrap();
    }
    s.write_value32(mem.va(), 2, WriteValueFlags::DEFAULT)
        .unwrap();
    {
        let log = log.clone();
        s.add_callback(move |_| log.lock().unwrap().push("cb2".into()), 0)
            .unwrap();
    }
    wait_until("cb1 to start", || !log.lock().unwrap().is_empty());
    settle();
    assert_eq!(
        out.load(Ordering::Acquire),
        1,
        "the write after the callback is held"
    );
    assert_eq!(log.lock().unwrap().len(), 1);
    tx.send(()).unwrap();
    s.synchronize().unwrap();
    wait_until("cb2", || log.lock().unwrap().len() == 2);
    assert_eq!(out.load(Ordering::Acquire), 2);
    assert_eq!(
        *log.lock().unwrap(),
        vec!["cb1 status=true seen=1".to_string(), "cb2".to_string()]
    );
    assert_eq!(
        s.add_callback(|_| {}, 1).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
}

#[test]
fn callback_may_use_other_streams() {
    let dev = emu("emu:mi210");
    let mem = signal_mem(&dev, 4096);
    let a = dev.create_stream(0).unwrap();
    let b = Arc::new(dev.create_stream(0).unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    let b2 = b.clone();
    let va = mem.va();
    a.add_callback(
        move |_| {
            b2.write_value32(va, 77, WriteValueFlags::DEFAULT).unwrap();
            b2.synchronize().unwrap();
            tx.send(()).unwrap();
        },
        0,
    )
    .unwrap();
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("callback finished");
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 77);
    a.synchronize().unwrap();
}

#[test]
fn null_stream_blocks_default_streams_but_not_non_blocking_ones() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let flag = mem.atomic_u32(0).unwrap();
    let null = dev.null_stream(0).unwrap();
    let blocking = dev
        .create_stream_with_flags(0, StreamFlags::DEFAULT)
        .unwrap();
    let nonblocking = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    assert_eq!(blocking.flags(), StreamFlags::DEFAULT);
    assert_eq!(nonblocking.flags(), StreamFlags::NON_BLOCKING);
    null.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    blocking
        .write_value32(mem.va() + 4, 10, WriteValueFlags::DEFAULT)
        .unwrap();
    nonblocking
        .write_value32(mem.va() + 8, 20, WriteValueFlags::DEFAULT)
        .unwrap();
    nonblocking.synchronize().unwrap();
    assert_eq!(
        mem.atomic_u32(8).unwrap().load(Ordering::Acquire),
        20,
        "non-blocking stream ran"
    );
    settle();
    assert_eq!(
        mem.atomic_u32(4).unwrap().load(Ordering::Acquire),
        0,
        "blocking stream waits for the null stream"
    );
    flag.store(1, Ordering::Release);
    blocking.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 10);

    // And the other direction: null-stream work waits for a blocking stream.
    blocking
        .wait_value32(mem.va(), 2, WaitCompare::Eq, u32::MAX)
        .unwrap();
    null.write_value32(mem.va() + 12, 30, WriteValueFlags::DEFAULT)
        .unwrap();
    settle();
    assert_eq!(
        mem.atomic_u32(12).unwrap().load(Ordering::Acquire),
        0,
        "null stream waits for blocking streams"
    );
    flag.store(2, Ordering::Release);
    null.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(12).unwrap().load(Ordering::Acquire), 30);
}

#[test]
fn priority_is_clamped_and_cu_mask_round_trips() {
    // MI210's CU count is part of the expectations.
    let dev = common::emu_exact("emu:mi210");
    assert_eq!(dev.stream_priority_range(), (1, -1));
    assert_eq!(
        dev.create_stream_with_priority(0, StreamFlags::DEFAULT, -7)
            .unwrap()
            .priority(),
        -1
    );
    assert_eq!(
        dev.create_stream_with_priority(0, StreamFlags::DEFAULT, 9)
            .unwrap()
            .priority(),
        1
    );
    assert_eq!(
        dev.create_stream_with_priority(0, StreamFlags::DEFAULT, 0)
            .unwrap()
            .priority(),
        0
    );
    assert_eq!(StreamFlags::from_bits(4), None); // the C ABI's InvalidValue

    // MI210: 104 CUs = 4 words; the extra word and bits past CU 103 are ignored.
    let s = dev
        .create_stream_with_cu_mask(0, &[0xffff_0000, 0x1, 0, 0xffff_ffff, 0xdead])
        .unwrap();
    let mut out = [0u32; 4];
    s.cu_mask(&mut out).unwrap();
    assert_eq!(out, [0xffff_0000, 0x1, 0, 0xff]);
    assert_eq!(
        s.cu_mask(&mut [0u32; 3]).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    assert!(s.has_dedicated_queue());
    let plain = dev.create_stream(0).unwrap();
    plain.cu_mask(&mut out).unwrap();
    assert_eq!(out, [u32::MAX, u32::MAX, u32::MAX, 0xff]);
    assert_eq!(
        dev.create_stream_with_cu_mask(0, &[0, 0, 0, 0])
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
    // Work still runs on the CU-masked queue.
    let mem = signal_mem(&dev, 4096);
    s.write_value32(mem.va(), 3, WriteValueFlags::DEFAULT)
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 3);
}

#[test]
fn destroy_while_busy_returns_at_once_and_work_completes() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    s.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    s.write_value32(mem.va() + 4, 5, WriteValueFlags::DEFAULT)
        .unwrap();
    drop(s); // returns at once
    settle();
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 0);
    mem.atomic_u32(0).unwrap().store(1, Ordering::Release);
    wait_until("work of a destroyed stream", || {
        mem.atomic_u32(4).unwrap().load(Ordering::Acquire) == 5
    });
}

#[test]
fn queue_fault_gives_a_sticky_error_instead_of_a_hang() {
    let dev = emu("emu:mi210*2");
    let mem = signal_mem(&dev, 4096);
    let far = vram_gpu0_cannot_reach(&dev);
    let bad = dev.create_stream(0).unwrap();
    let good = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    // Not mapped on GPU 0: the CP faults on the WRITE_DATA.
    bad.write_value32(far.va(), 1, WriteValueFlags::DEFAULT)
        .unwrap();
    let e = bad.synchronize().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
    assert_eq!(bad.query().unwrap_err().kind(), ErrorKind::LaunchFailure);
    assert_eq!(
        bad.write_value32(mem.va(), 1, WriteValueFlags::DEFAULT)
            .unwrap_err()
            .kind(),
        ErrorKind::LaunchFailure
    );
    let _ = good;
}

/// The idle synchronize fast path keeps HIP's semantics: an idle stream (and an idle null
/// stream whose blocking streams are idle) returns Ok at once, but the null stream still
/// waits for a busy blocking stream of its GPU even with no work of its own, and not for a
/// busy non-blocking one.
#[test]
fn idle_synchronize_returns_at_once_but_null_stream_waits_for_busy_blocking_streams() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let flag = mem.atomic_u32(0).unwrap();
    let null = dev.null_stream(0).unwrap();
    let blocking = dev.create_stream(0).unwrap();
    let nonblocking = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    for s in [&null, &blocking, &nonblocking] {
        s.synchronize().unwrap();
        s.query().unwrap();
    }
    // A busy non-blocking stream does not hold the null stream's synchronize.
    nonblocking
        .wait_value32(mem.va(), 3, WaitCompare::Eq, u32::MAX)
        .unwrap();
    null.synchronize_timeout(std::time::Duration::from_millis(20))
        .unwrap();
    // A busy blocking stream does, although the null stream submitted nothing.
    blocking
        .wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    blocking
        .write_value32(mem.va() + 4, 7, WriteValueFlags::DEFAULT)
        .unwrap();
    let e = null
        .synchronize_timeout(std::time::Duration::from_millis(20))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotReady, "{e}");
    assert_eq!(blocking.query().unwrap_err().kind(), ErrorKind::NotReady);
    flag.store(1, Ordering::Release);
    null.synchronize().unwrap();
    // The null stream's synchronize returned after the blocking stream's work.
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 7);
    blocking.query().unwrap();
    // Idle again: every synchronize is Ok (the non-blocking stream still waits).
    null.synchronize().unwrap();
    blocking.synchronize().unwrap();
    assert_eq!(nonblocking.query().unwrap_err().kind(), ErrorKind::NotReady);
    flag.store(3, Ordering::Release);
    nonblocking.synchronize().unwrap();
    null.synchronize().unwrap();
}

/// A sticky error is returned by every synchronize and query of a stream whose work has
/// drained (the idle fast path must not hide it).
#[test]
fn idle_stream_with_a_sticky_error_still_reports_it() {
    let dev = emu("emu:mi210");
    let s = dev.create_stream(0).unwrap();
    s.add_callback(|_| panic!("sticky from a callback"), 0)
        .unwrap();
    // The queue drains (the error is not a GPU fault): the stream becomes idle.
    let e = s.synchronize().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
    for _ in 0..3 {
        let e = s.synchronize().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
        assert!(e.to_string().contains("sticky from a callback"), "{e}");
        assert_eq!(s.query().unwrap_err().kind(), ErrorKind::LaunchFailure);
    }
    // Other streams are unaffected.
    let t = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    t.synchronize().unwrap();
}

/// waitValue32's conditions (decoded on the enqueue path from the typed comparison):
/// And holds until a masked bit is set, Gte until the value reaches the reference, Nor
/// with a partial mask is always true (no wait), Eq compares under the mask.
#[test]
fn wait_value32_and_gte_eq_nor_hold_until_their_condition() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let flag = mem.atomic_u32(0).unwrap();
    let out = mem.atomic_u32(64).unwrap();
    let s = dev.create_stream(0).unwrap();
    // Nor with a partial mask: no wait at all.
    s.wait_value32(mem.va(), 0, WaitCompare::Nor, 0xff).unwrap();
    s.write_value32(mem.va() + 64, 1, WriteValueFlags::DEFAULT)
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(out.load(Ordering::Acquire), 1);
    // And 0x4: (*ptr & 0x4) != 0.
    s.wait_value32(mem.va(), 0x4, WaitCompare::And, u32::MAX)
        .unwrap();
    s.write_value32(mem.va() + 64, 2, WriteValueFlags::DEFAULT)
        .unwrap();
    flag.store(0x3, Ordering::Release);
    settle();
    assert_eq!(
        out.load(Ordering::Acquire),
        1,
        "0x3 & 0x4 == 0: still waiting"
    );
    flag.store(0x6, Ordering::Release);
    s.synchronize().unwrap();
    assert_eq!(out.load(Ordering::Acquire), 2);
    // Gte 0x10.
    s.wait_value32(mem.va(), 0x10, WaitCompare::Gte, u32::MAX)
        .unwrap();
    s.write_value32(mem.va() + 64, 3, WriteValueFlags::DEFAULT)
        .unwrap();
    settle();
    assert_eq!(out.load(Ordering::Acquire), 2, "6 < 0x10: still waiting");
    // Eq 0x5 under mask 0xf: 0x25 & 0xf == 0x5.
    s.wait_value32(mem.va(), 0x5, WaitCompare::Eq, 0xf).unwrap();
    s.write_value32(mem.va() + 64, 4, WriteValueFlags::DEFAULT)
        .unwrap();
    flag.store(0x10, Ordering::Release);
    wait_until("the Gte wait to pass", || out.load(Ordering::Acquire) == 3);
    settle();
    assert_eq!(
        out.load(Ordering::Acquire),
        3,
        "0x10 & 0xf != 5: still waiting"
    );
    flag.store(0x25, Ordering::Release);
    s.synchronize().unwrap();
    assert_eq!(out.load(Ordering::Acquire), 4);
}

/// Writes past a full ring: the stream's queue is held by a wait-value while one thread
/// enqueues three rings' worth of writes (the lock-free path finds the ring full and the
/// slow path waits for room); another thread opens the gate. Every write lands, in order.
#[test]
fn writes_past_a_full_ring_land_in_order() {
    let dev = emu("emu:mi300x");
    let mem = Arc::new(signal_mem(&dev, 4096));
    let s = dev.create_stream(0).unwrap();
    s.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    let gate = {
        let mem = mem.clone();
        std::thread::spawn(move || {
            settle();
            mem.atomic_u32(0).unwrap().store(1, Ordering::Release);
        })
    };
    // Three rings of 1024 packets (the default ring size).
    let n = 3 * 1024;
    for i in 0..n {
        let cell = 4 + (i % 8) as u64 * 4;
        s.write_value32(mem.va() + cell, i, WriteValueFlags::DEFAULT)
            .unwrap();
    }
    s.synchronize().unwrap();
    gate.join().unwrap();
    for c in 0..8u32 {
        let last = n - 8 + c;
        let v = mem.atomic_u32(4 + c as usize * 4).unwrap();
        assert_eq!(v.load(Ordering::Acquire), last, "cell {c}");
    }
}
