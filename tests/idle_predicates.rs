//! `Stream::query_is_ok` and `Stream::synchronize_is_noop`, the idle predicates a C layer's
//! fast path answers from: true only where `query` / `synchronize` answer Ok with nothing
//! else to do, false for every case the full paths must decide.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{emu, signal_mem};
use kfdrt::{ErrorKind, StreamFlags, WaitCompare};

#[test]
fn idle_predicates_hold_only_where_query_and_synchronize_have_nothing_to_do() {
    let dev = emu("emu:mi250x");
    let mem = signal_mem(&dev, 4096);
    let flag = mem.atomic_u32(0).unwrap();
    let s = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    let null = dev.null_stream(0).unwrap();
    assert!(s.query_is_ok() && s.synchronize_is_noop());
    assert!(null.query_is_ok() && null.synchronize_is_noop());

    // Work pending: both false, query NotReady.
    s.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    assert!(!s.query_is_ok() && !s.synchronize_is_noop());
    assert_eq!(s.query().unwrap_err().kind(), ErrorKind::NotReady);
    flag.store(1, Ordering::Release);
    s.synchronize().unwrap();
    assert!(s.query_is_ok() && s.synchronize_is_noop());

    // A callback that has not returned: false (query is NotReady), true once it returned
    // and a synchronize took the hold.
    let go = Arc::new(AtomicBool::new(false));
    let g = go.clone();
    s.add_callback(
        move |_| {
            while !g.load(Ordering::Acquire) {
                std::thread::yield_now();
            }
        },
        0,
    )
    .unwrap();
    assert!(!s.query_is_ok() && !s.synchronize_is_noop());
    assert_eq!(s.query().unwrap_err().kind(), ErrorKind::NotReady);
    go.store(true, Ordering::Release);
    s.synchronize().unwrap();
    s.query().unwrap();
    assert!(s.query_is_ok() && s.synchronize_is_noop());
    // A callback that returned before any synchronize: query is Ok (its full path), the
    // predicates wait for a synchronize to retire the hold.
    s.add_callback(|_| {}, 0).unwrap();
    let mut n = 0;
    while s.query().is_err() {
        assert!(!s.query_is_ok());
        n += 1;
        assert!(n < 100_000, "the callback never returned");
        std::thread::sleep(std::time::Duration::from_micros(100));
    }
    s.synchronize().unwrap();
    assert!(s.query_is_ok() && s.synchronize_is_noop());

    // A live blocking stream (even idle) sends the null stream's synchronize to the full
    // path, which decides; the predicate of the blocking stream itself is unaffected.
    let b = dev.create_stream(0).unwrap();
    assert!(b.query_is_ok() && b.synchronize_is_noop());
    assert!(null.query_is_ok() && !null.synchronize_is_noop());
    null.synchronize().unwrap();
    drop(b);
    assert!(null.synchronize_is_noop());

    // A stream-ordered free leaves a release for the next synchronize to do.
    let p = s.malloc_async(1 << 20).unwrap();
    p.free_async(&s).unwrap();
    s.synchronize().unwrap();
    assert!(s.synchronize_is_noop() && s.query_is_ok());
    let p = s.malloc_async(1 << 20).unwrap();
    p.free_async(&s).unwrap();
    assert!(!s.synchronize_is_noop());
    s.synchronize().unwrap();
    assert!(s.synchronize_is_noop());
}

/// An idle stream with a sticky error (a panicking callback: the queue drains) is never
/// "ok": query and synchronize keep returning the error.
#[test]
fn idle_predicates_are_false_on_a_drained_stream_with_a_sticky_error() {
    let dev = emu("emu:mi250x");
    let s = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    s.add_callback(|_| panic!("sticky for the idle predicates"), 0)
        .unwrap();
    assert_eq!(
        s.synchronize().unwrap_err().kind(),
        ErrorKind::LaunchFailure
    );
    for _ in 0..3 {
        assert!(!s.query_is_ok() && !s.synchronize_is_noop());
        assert_eq!(s.query().unwrap_err().kind(), ErrorKind::LaunchFailure);
        assert_eq!(
            s.synchronize().unwrap_err().kind(),
            ErrorKind::LaunchFailure
        );
    }
}
