//! Issue 11: recycled timelines, callback panics, huge lengths, faults seen by query,
//! cross-device waits, stream-memory-op flags, deadlines. Each test failed on the code
//! before its fix.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{emu, signal_mem, vram_gpu0_cannot_reach, wait_until};
use kfdrt::{ErrorKind, EventFlags, StreamFlags, WaitCompare, WriteValueFlags};

/// Defect 1: X waited on an event of Y; Y and the event are gone, Z reuses Y's timeline
/// slot and frees a block while blocked. X must not be handed Z's block (X has no
/// dependency on Z).
#[test]
fn recycled_timeline_slot_does_not_leak_ordering_to_another_stream() {
    let dev = emu("emu:mi210");
    let mem = signal_mem(&dev, 4096);
    let x = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    let y = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    // Y is busy (held by a wait), with many packets so its point is far along.
    y.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    for i in 0..16 {
        y.write_value32(mem.va() + 64, i, WriteValueFlags::DEFAULT)
            .unwrap();
    }
    let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    ev.record(&y).unwrap();
    x.wait_event(&ev, 0).unwrap();
    mem.atomic_u32(0).unwrap().store(1, Ordering::Release);
    y.synchronize().unwrap();
    x.synchronize().unwrap();
    drop(ev);
    drop(y);
    // Z gets the recycled slot, is blocked, and frees a block it filled.
    let z = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    z.wait_value32(mem.va() + 128, 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    let p = z.malloc_async(4096).unwrap().into_raw();
    z.memset(p, 0xaa, 4096).unwrap();
    z.free_ptr_async(p).unwrap();
    let q = x.malloc_async(4096).unwrap().into_raw();
    assert_ne!(
        q, p,
        "X was handed the block Z frees only after its blocked work"
    );
    mem.atomic_u32(128).unwrap().store(1, Ordering::Release);
    z.synchronize().unwrap();
    x.free_ptr_async(q).unwrap();
    x.synchronize().unwrap();
}

/// Defect 2: a panicking callback gives its stream a sticky error naming the panic, and
/// every other callback (of this and other streams) still runs exactly once.
#[test]
fn panicking_callback_fails_its_stream_and_others_still_run() {
    let dev = emu("emu:mi210");
    let a = dev.create_stream(0).unwrap();
    let b = dev.create_stream(0).unwrap();
    let ran = Arc::new(AtomicU32::new(0));
    a.add_callback(|_| panic!("boom from a callback"), 0)
        .unwrap();
    let r = ran.clone();
    a.add_callback(
        move |st| {
            // Runs after the panic with the stream's sticky error.
            assert!(st.is_err());
            r.fetch_add(1, Ordering::AcqRel);
        },
        0,
    )
    .unwrap();
    for _ in 0..4 {
        let r = ran.clone();
        b.add_callback(
            move |st| {
                st.unwrap();
                r.fetch_add(10, Ordering::AcqRel);
            },
            0,
        )
        .unwrap();
    }
    wait_until("every other callback", || ran.load(Ordering::Acquire) == 41);
    b.synchronize().unwrap();
    let e = a.synchronize().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
    let msg = e.to_string();
    assert!(msg.contains("boom from a callback"), "{msg}");
    assert!(msg.contains("callback"), "{msg}");
    assert_eq!(a.query().unwrap_err().kind(), ErrorKind::LaunchFailure);
    // Later callbacks on the healthy stream still run once.
    let r = ran.clone();
    b.add_callback(
        move |_| {
            r.fetch_add(100, Ordering::AcqRel);
        },
        0,
    )
    .unwrap();
    wait_until("a later callback", || ran.load(Ordering::Acquire) == 141);
    settle_more();
    assert_eq!(ran.load(Ordering::Acquire), 141);
}

fn settle_more() {
    std::thread::sleep(Duration::from_millis(30));
}

/// Defect 3: lengths beyond the allocation are InvalidValue, at once and without a host
/// allocation of that size.
#[test]
fn huge_lengths_are_invalid_value_not_hangs() {
    let dev = emu("emu:mi210");
    let b = dev.alloc(kfdrt::MemoryKind::Device, 0, 4096).unwrap();
    let s = dev.create_stream(0).unwrap();
    for len in [4097u64, 1 << 40, 1 << 62] {
        let e = s.memcpy(b.va(), b.va() + 8, len).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue, "memcpy {len:#x}: {e}");
        let e = s.memset(b.va(), 0, len).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue, "memset {len:#x}: {e}");
        let e = s.memset_d32(b.va(), 0, len.div_ceil(4)).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue, "memsetD32 {len:#x}: {e}");
    }
    // Exactly the allocation is fine.
    s.memset(b.va(), 7, 4096).unwrap();
    s.memcpy(b.va() + 2048, b.va(), 2048).unwrap();
    s.synchronize().unwrap();
    let mut out = vec![0u8; 4096];
    b.read(0, &mut out).unwrap();
    assert!(out.iter().all(|&x| x == 7));
}

/// Defect 3: a wait for ring space watches the queue's fault: a long run of fills into
/// unmapped memory fills the ring behind a faulted packet and must end in an error.
#[test]
fn ring_full_behind_a_fault_returns_an_error() {
    let dev = emu("emu:mi210*2");
    let s = dev.create_stream(0).unwrap();
    let far = vram_gpu0_cannot_reach(&dev);
    let mut r = Ok(());
    // Not mapped on GPU 0: the first packet faults; keep submitting past the ring size.
    for _ in 0..4096 {
        r = s.write_value32(far.va(), 1, WriteValueFlags::DEFAULT);
        if r.is_err() {
            break;
        }
    }
    let e = r.err().or_else(|| s.synchronize().err()).unwrap();
    assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
}

/// Defect 4: query reports the fault (without anyone synchronizing).
#[test]
fn query_reports_a_gpu_fault() {
    let dev = emu("emu:mi210*2");
    let s = dev.create_stream(0).unwrap();
    let far = vram_gpu0_cannot_reach(&dev);
    s.write_value32(far.va(), 1, WriteValueFlags::DEFAULT)
        .unwrap();
    wait_until(
        "query to report the fault",
        || !matches!(s.query(), Err(e) if e.kind() == ErrorKind::NotReady),
    );
    let e = s.query().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
}

/// Defect 5: waiting on an event of another device is refused, naming both.
#[test]
fn wait_event_of_another_device_is_refused() {
    let d1 = emu("emu:mi210");
    let d2 = emu("emu:mi210");
    let mem = signal_mem(&d2, 4096);
    let s2 = d2.create_stream(0).unwrap();
    s2.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    let ev = d2.create_event(EventFlags::DEFAULT).unwrap();
    ev.record(&s2).unwrap();
    let s1 = d1.create_stream(0).unwrap();
    let e = s1.wait_event(&ev, 0).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e}");
    assert!(e.to_string().contains("device"), "{e}");
    mem.atomic_u32(0).unwrap().store(1, Ordering::Release);
    s2.synchronize().unwrap();
}

/// Defect 9: write_value flags are reserved and ignored (seed rule), including CUDA's
/// NO_MEMORY_BARRIER (0x1).
#[test]
fn write_value_accepts_reserved_flags() {
    let dev = emu("emu:mi210");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    s.write_value32(mem.va(), 11, WriteValueFlags::NO_MEMORY_BARRIER)
        .unwrap();
    s.write_value64(
        mem.va() + 8,
        22,
        WriteValueFlags::from_bits_retain(0x8000_0000),
    )
    .unwrap();
    s.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 11);
    assert_eq!(mem.atomic_u64(8).unwrap().load(Ordering::Acquire), 22);
}

/// Issue 13 item 7: waits with a deadline return NotReady at the deadline, and Ok once
/// the work completes.
#[test]
fn synchronize_timeout_and_event_wait_timeout() {
    let dev = emu("emu:mi210");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    s.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    let ev = dev.create_event(EventFlags::DEFAULT).unwrap();
    ev.record(&s).unwrap();
    let e = s
        .synchronize_timeout(Duration::from_millis(20))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotReady, "{e}");
    let e = ev.wait_timeout(Duration::ZERO).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NotReady, "{e}");
    mem.atomic_u32(0).unwrap().store(1, Ordering::Release);
    ev.wait_timeout(Duration::from_secs(20)).unwrap();
    s.synchronize_timeout(Duration::from_secs(20)).unwrap();
}
