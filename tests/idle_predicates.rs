//! `Stream::query_is_ok` and `Stream::synchronize_is_noop`, the idle predicates a C layer's
//! fast path answers from: true only where `query` / `synchronize` answer Ok with nothing
//! else to do, false for every case the full paths must decide.

mod common;

use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::{emu, non_blocking, signal_mem};
use kfdrt::stream::IdleSlot;
use kfdrt::{ErrorKind, Stream, WaitCompare};

/// A 1 MiB stream-ordered allocation freed at once on `s`: the pool's release of its
/// slab is left for `s`'s next synchronize (release threshold 0).
fn malloc_free_1mib(s: &Stream) {
    let p = s.malloc_async(1 << 20).unwrap();
    p.free_async(s).unwrap();
}

#[test]
fn idle_predicates_hold_only_where_query_and_synchronize_have_nothing_to_do() {
    let dev = emu("emu:mi250x");
    let mem = signal_mem(&dev, 4096);
    let flag = mem.atomic_u32(0).unwrap();
    let s = non_blocking(&dev, 0);
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
    malloc_free_1mib(&s);
    s.synchronize().unwrap();
    assert!(s.synchronize_is_noop() && s.query_is_ok());
    malloc_free_1mib(&s);
    assert!(!s.synchronize_is_noop());
    s.synchronize().unwrap();
    assert!(s.synchronize_is_noop());
}

/// An idle stream with a sticky error (a panicking callback: the queue drains) is never
/// "ok": query and synchronize keep returning the error.
#[test]
fn idle_predicates_are_false_on_a_drained_stream_with_a_sticky_error() {
    let dev = emu("emu:mi250x");
    let s = non_blocking(&dev, 0);
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

/// The marks word: a hold pending, a sticky error and closed predicates each keep the
/// predicates false, and clearing one (a synchronize retiring the hold) leaves the others.
/// `Stream::idle_probe` answers as the stream's own predicates throughout.
#[test]
fn idle_marks_are_independent_and_the_probe_agrees() {
    let dev = emu("emu:mi250x");
    let mem = signal_mem(&dev, 4096);
    let flag = mem.atomic_u32(0).unwrap();
    let s = non_blocking(&dev, 0);
    let probe = s.idle_probe();
    // The self-relative slot, set in one place and rebased into another.
    let mut slot = pin!(IdleSlot::EMPTY);
    slot.as_mut().set(&s);
    let mut moved = Box::pin(IdleSlot::EMPTY);
    moved.as_mut().set_from(&slot);
    // SAFETY (every probe and slot call below): `s` is alive until the end of the test,
    // and neither slot moves after it was set.
    let agree = |q: bool, y: bool| {
        assert_eq!(s.query_is_ok(), q);
        assert_eq!(s.synchronize_is_noop(), y);
        assert_eq!(unsafe { probe.query_is_ok() }, q);
        assert_eq!(unsafe { probe.synchronize_is_noop() }, y);
        for sl in [&*slot, &*moved] {
            assert_eq!(unsafe { sl.query_is_ok() }, q);
            assert_eq!(unsafe { sl.synchronize_is_noop() }, y);
        }
    };
    agree(true, true);

    // Several packets in one submission: the completion value moves with the count.
    s.wait_value32(mem.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    s.memset_d32(mem.va() + 64, 7, 16).unwrap();
    s.memset_d32(mem.va() + 128, 9, 16).unwrap();
    agree(false, false);
    flag.store(1, Ordering::Release);
    s.synchronize().unwrap();
    agree(true, true);

    // Closed: false from now on, while the stream works as before.
    s.close_idle_predicates();
    agree(false, false);
    s.query().unwrap();
    s.synchronize().unwrap();
    s.memset_d32(mem.va() + 64, 3, 16).unwrap();
    s.synchronize().unwrap();
    s.query().unwrap();
    agree(false, false);
    // A callback's hold set and retired: the closed mark stays.
    s.add_callback(|_| {}, 0).unwrap();
    s.synchronize().unwrap();
    agree(false, false);

    // A sticky error set while a hold is pending stays after the hold is retired.
    let t = non_blocking(&dev, 0);
    let tp = t.idle_probe();
    t.add_callback(|_| panic!("sticky while a hold is pending"), 0)
        .unwrap();
    assert!(!t.query_is_ok() && !unsafe { tp.query_is_ok() });
    assert_eq!(
        t.synchronize().unwrap_err().kind(),
        ErrorKind::LaunchFailure
    );
    assert!(t.synchronize().is_err());
    assert!(!t.query_is_ok() && !unsafe { tp.query_is_ok() });
    assert!(!t.synchronize_is_noop() && !unsafe { tp.synchronize_is_noop() });
    assert_eq!(t.query().unwrap_err().kind(), ErrorKind::LaunchFailure);

    // The null stream's probe sees live blocking streams and a pending pool release.
    let null = dev.null_stream(0).unwrap();
    let np = null.idle_probe();
    let mut ns = pin!(IdleSlot::EMPTY);
    ns.as_mut().set(&null);
    null.synchronize().unwrap();
    assert!(unsafe { np.query_is_ok() && np.synchronize_is_noop() });
    assert!(unsafe { ns.query_is_ok() && ns.synchronize_is_noop() });
    let b = dev.create_stream(0).unwrap();
    assert!(unsafe { np.query_is_ok() } && !unsafe { np.synchronize_is_noop() });
    assert!(unsafe { ns.query_is_ok() } && !unsafe { ns.synchronize_is_noop() });
    drop(b);
    assert!(unsafe { np.synchronize_is_noop() && ns.synchronize_is_noop() });
    let u = non_blocking(&dev, 0);
    malloc_free_1mib(&u);
    u.synchronize().unwrap();
    malloc_free_1mib(&u);
    assert!(
        !unsafe { np.synchronize_is_noop() } && !unsafe { u.idle_probe().synchronize_is_noop() }
    );
    assert!(!unsafe { ns.synchronize_is_noop() });
    u.synchronize().unwrap();
    assert!(unsafe { np.synchronize_is_noop() && ns.synchronize_is_noop() });
    // Cleared, or rebased from an empty slot: never idle, on an idle stream.
    ns.as_mut().clear();
    slot.as_mut().set_from(&ns);
    assert!(unsafe { !ns.query_is_ok() && !ns.synchronize_is_noop() });
    assert!(unsafe { !slot.query_is_ok() && !slot.synchronize_is_noop() });
}

/// An all-zero `IdleSlot` (a thread-local slot at thread start) is a valid slot that
/// is never idle, and a slot set from a stream follows its completion bound one packet
/// at a time (the bound is strict: the value at `TIMELINE_BASE - submitted` is idle).
#[test]
fn idle_slot_all_zero_is_never_idle_and_set_follows_the_stream() {
    // SAFETY: an all-zero IdleSlot is its EMPTY value (two integers).
    let zero: IdleSlot = unsafe { std::mem::zeroed() };
    assert!(unsafe { !zero.query_is_ok() && !zero.synchronize_is_noop() });
    let dev = emu("emu:mi250x");
    let mem = signal_mem(&dev, 4096);
    let flag = mem.atomic_u32(0).unwrap();
    let s = non_blocking(&dev, 0);
    let mut slot = pin!(IdleSlot::EMPTY);
    slot.as_mut().set(&s);
    // SAFETY (below): `s` outlives the slot, which does not move.
    assert!(unsafe { slot.query_is_ok() && slot.synchronize_is_noop() });
    for round in 1..=3u32 {
        s.wait_value32(mem.va(), round, WaitCompare::Eq, u32::MAX)
            .unwrap();
        assert!(unsafe { !slot.query_is_ok() && !slot.synchronize_is_noop() });
        flag.store(round, Ordering::Release);
        s.synchronize().unwrap();
        assert!(unsafe { slot.query_is_ok() && slot.synchronize_is_noop() });
    }
}

/// The null stream's synchronize predicate follows the live blocking streams of the
/// device: created before or after the null stream, dropped one by one; null streams
/// created by racing threads are one stream, and each handle sees the mark.
#[test]
fn null_stream_synchronize_predicate_follows_blocking_streams() {
    let dev = emu("emu:mi250x*2");
    let b1 = dev.create_stream(0).unwrap();
    let null = dev.null_stream(0).unwrap();
    assert!(null.query_is_ok() && !null.synchronize_is_noop());
    null.synchronize().unwrap();
    assert!(!null.synchronize_is_noop(), "b1 still lives");
    let b2 = dev.create_stream(0).unwrap();
    drop(b1);
    assert!(null.query_is_ok() && !null.synchronize_is_noop());
    drop(b2);
    assert!(null.query_is_ok() && null.synchronize_is_noop());

    // GPU 1's null stream, asked for by four threads at once.
    let nulls: Vec<kfdrt::Stream> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|_| sc.spawn(|| dev.null_stream(1).unwrap()))
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(nulls.iter().all(|n| n.synchronize_is_noop()));
    let b = dev.create_stream(1).unwrap();
    assert!(nulls
        .iter()
        .all(|n| n.query_is_ok() && !n.synchronize_is_noop()));
    assert!(
        !null.synchronize_is_noop(),
        "blocking streams of any GPU count"
    );
    drop(b);
    assert!(nulls.iter().all(|n| n.synchronize_is_noop()));
    assert!(null.synchronize_is_noop());
}
