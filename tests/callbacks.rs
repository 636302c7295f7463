//! Stream callbacks in bulk: runs of back-to-back callbacks on several streams (the
//! dispatcher drains a run per wake-up and recycles its gates) keep HIP's order and
//! hold semantics.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{emu, settle, signal_mem, wait_until};
use kfdrt::{EventFlags, WaitCompare, WriteValueFlags};

/// Per stream: (callback id, value the callback saw).
type Seen = Vec<(u32, u32)>;

/// Three streams, each with rounds of 100 back-to-back callbacks (more than a gate
/// chunk) between writes: every callback runs once, in its stream's order, sees the
/// write enqueued right before its run and none after it; the write after a run lands
/// only after the run's last callback; an event recorded after a run completes only
/// after the run. Large captures (boxed) and small ones (inline) are mixed.
#[test]
fn runs_of_callbacks_on_three_streams_keep_order_and_holds() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let streams: Vec<_> = (0..3).map(|_| dev.create_stream(0).unwrap()).collect();
    let log: Arc<Mutex<Vec<Seen>>> = Arc::new(Mutex::new(vec![Vec::new(); 3]));
    const ROUNDS: u32 = 3;
    const RUN: u32 = 100;
    let mut events = Vec::new();
    for round in 0..ROUNDS {
        for (si, s) in streams.iter().enumerate() {
            let va = mem.va() + 4 * si as u64;
            s.write_value32(va, round + 1, WriteValueFlags::DEFAULT)
                .unwrap();
            for k in 0..RUN {
                let log = log.clone();
                let id = round * RUN + k;
                if k % 2 == 0 {
                    s.add_callback(
                        move |st| {
                            assert!(st.is_ok());
                            // SAFETY: a word of `mem`, alive until the test ends.
                            let seen = unsafe { core::ptr::read_volatile(va as *const u32) };
                            log.lock().unwrap()[si].push((id, seen));
                        },
                        0,
                    )
                    .unwrap();
                } else {
                    let pad = [id as u64; 8];
                    s.add_callback(
                        move |st| {
                            assert!(st.is_ok());
                            // SAFETY: as above.
                            let seen = unsafe { core::ptr::read_volatile(va as *const u32) };
                            log.lock().unwrap()[si].push((pad[7] as u32, seen));
                        },
                        0,
                    )
                    .unwrap();
                }
            }
            let e = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
            e.record(s).unwrap();
            let n = (round + 1) * RUN;
            let l = log.clone();
            events.push((e, si, n, l));
        }
    }
    for (e, si, n, l) in &events {
        e.synchronize().unwrap();
        assert!(
            l.lock().unwrap()[*si].len() as u32 >= *n,
            "event after {n} callbacks of stream {si} completed before them"
        );
    }
    for s in &streams {
        s.synchronize().unwrap();
    }
    let log = log.lock().unwrap();
    for (si, l) in log.iter().enumerate() {
        let want: Vec<(u32, u32)> = (0..ROUNDS * RUN).map(|id| (id, id / RUN + 1)).collect();
        assert_eq!(
            *l, want,
            "stream {si}: order and the write each callback saw"
        );
    }
}

/// A callback that blocks in a kfdrt wait (on a third stream held by a flag the test
/// releases) holds its stream's later callbacks and writes, while another stream's
/// callbacks still run (the wait handed the dispatcher role on).
#[test]
fn a_blocked_callback_holds_only_its_own_stream() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let a = dev.create_stream(0).unwrap();
    let b = dev.create_stream(0).unwrap();
    let c = Arc::new(dev.create_stream(0).unwrap());
    c.wait_value32(mem.va() + 8, 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    let a_done = Arc::new(AtomicU32::new(0));
    let b_done = Arc::new(AtomicU32::new(0));
    let c2 = c.clone();
    a.add_callback(
        move |_| {
            c2.synchronize_timeout(Duration::from_secs(30))
                .expect("the test releases stream c");
        },
        0,
    )
    .unwrap();
    for _ in 0..10 {
        let d = a_done.clone();
        a.add_callback(
            move |_| {
                d.fetch_add(1, Ordering::AcqRel);
            },
            0,
        )
        .unwrap();
    }
    a.write_value32(mem.va(), 5, WriteValueFlags::DEFAULT)
        .unwrap();
    for _ in 0..10 {
        let d = b_done.clone();
        b.add_callback(
            move |_| {
                d.fetch_add(1, Ordering::AcqRel);
            },
            0,
        )
        .unwrap();
    }
    b.synchronize().unwrap();
    wait_until("stream b's callbacks", || {
        b_done.load(Ordering::Acquire) == 10
    });
    assert_eq!(
        a_done.load(Ordering::Acquire),
        0,
        "a's later callbacks wait"
    );
    assert_eq!(
        mem.atomic_u32(0).unwrap().load(Ordering::Acquire),
        0,
        "a's later write waits"
    );
    mem.atomic_u32(8).unwrap().store(1, Ordering::Release);
    a.synchronize().unwrap();
    assert_eq!(a_done.load(Ordering::Acquire), 10);
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 5);
}

/// Enqueue `n` callbacks on `s`, each adding one to `count` (after a yield when `yield_first`,
/// so the dispatcher interleaves with the enqueuer).
fn counting_callbacks(s: &kfdrt::Stream, count: &Arc<AtomicU32>, n: u32, yield_first: bool) {
    for _ in 0..n {
        let c = count.clone();
        s.add_callback(
            move |_| {
                if yield_first {
                    std::thread::yield_now();
                }
                c.fetch_add(1, Ordering::AcqRel);
            },
            0,
        )
        .unwrap();
    }
}

/// Packets the stream submitted so far (its Debug form's `submitted=`).
fn submitted(s: &kfdrt::Stream) -> u64 {
    let d = format!("{s:?}");
    let n = d
        .split("submitted=")
        .nth(1)
        .and_then(|t| t.trim_end_matches(')').parse().ok());
    n.unwrap_or_else(|| panic!("no packet count in {d}"))
}

/// A callback that waits for the test's release (bounded), then writes `value` to `va`.
fn blocked_writer(
    rx: std::sync::mpsc::Receiver<()>,
    started: Arc<AtomicU32>,
    va: u64,
    value: u32,
) -> impl FnOnce(kfdrt::Result<()>) + Send + 'static {
    move |st| {
        assert!(st.is_ok());
        started.store(1, Ordering::Release);
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the test releases the callback");
        // SAFETY: a word of the test's signal memory, alive until the test ends.
        unsafe { core::ptr::write_volatile(va as *mut u32, value) };
    }
}

/// Lazy holds: back-to-back callbacks submit no packet; the command after them gets one
/// hold in front. A write-value (the single-command path), a 64-bit write (command
/// buffer path) and a memset (copy path) after a callback land only after it returned:
/// each overwrites the word the callback writes last, so the final values prove the order.
#[test]
fn work_after_callbacks_waits_for_them_and_only_it_costs_a_packet() {
    work_after_callbacks("emu:mi300x");
}

/// As above on gfx11, where the hold is a WAIT_REG_MEM64 on the callback line (gfx9's is
/// an AQL BARRIER_VALUE).
#[test]
fn work_after_callbacks_waits_for_them_on_gfx11() {
    work_after_callbacks("emu:rx7900xtx");
}

fn work_after_callbacks(spec: &str) {
    let dev = emu(spec);
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Arc::new(AtomicU32::new(0));
    let before = submitted(&s);
    // The first callback blocks; it writes words 0, 8 and 16 when released.
    let va = mem.va();
    let st2 = started.clone();
    s.add_callback(
        move |st| {
            assert!(st.is_ok());
            st2.store(1, Ordering::Release);
            rx.recv_timeout(Duration::from_secs(20))
                .expect("the test releases the callback");
            for off in [0u64, 8, 16] {
                // SAFETY: words of `mem`, alive until the test ends.
                unsafe { core::ptr::write_volatile((va + off) as *mut u32, 0xcb) };
            }
        },
        0,
    )
    .unwrap();
    let count = Arc::new(AtomicU32::new(0));
    counting_callbacks(&s, &count, 50, false);
    assert_eq!(submitted(&s), before, "callbacks alone submit no packet");
    wait_until("the first callback to start", || {
        started.load(Ordering::Acquire) == 1
    });
    s.write_value32(mem.va(), 1, WriteValueFlags::DEFAULT)
        .unwrap();
    assert_eq!(
        submitted(&s),
        before + 2,
        "one hold in front of the write, then the write"
    );
    s.write_value64(mem.va() + 8, 2, WriteValueFlags::DEFAULT)
        .unwrap();
    s.memset_d32(mem.va() + 16, 3, 1).unwrap();
    assert_eq!(submitted(&s), before + 4, "no second hold");
    assert!(s.has_dedicated_queue(), "the hold stalls only this stream");
    settle();
    assert_eq!(count.load(Ordering::Acquire), 0, "later callbacks wait");
    for off in [0, 8, 16] {
        assert_eq!(
            mem.atomic_u32(off).unwrap().load(Ordering::Acquire),
            0,
            "work after a running callback is held (word {off})"
        );
    }
    assert_eq!(
        s.query().unwrap_err().kind(),
        kfdrt::ErrorKind::NotReady,
        "query accounts for the callback"
    );
    tx.send(()).unwrap();
    s.synchronize().unwrap();
    assert_eq!(count.load(Ordering::Acquire), 50);
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 1);
    assert_eq!(mem.atomic_u32(8).unwrap().load(Ordering::Acquire), 2);
    assert_eq!(mem.atomic_u32(16).unwrap().load(Ordering::Acquire), 3);
    s.query().unwrap();
}

/// An event recorded after many callbacks, and a synchronize, complete only after the
/// last of them returned; the stream's query reports NotReady until then. Another
/// stream waiting for that event holds its write until then too.
#[test]
fn event_and_synchronize_after_many_callbacks_wait_for_all() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    let other = dev.create_stream(0).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Arc::new(AtomicU32::new(0));
    s.add_callback(blocked_writer(rx, started.clone(), mem.va() + 4, 9), 0)
        .unwrap();
    const N: u32 = 300;
    let count = Arc::new(AtomicU32::new(0));
    counting_callbacks(&s, &count, N, true);
    let e = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    e.record(&s).unwrap();
    other.wait_event(&e, 0).unwrap();
    other
        .write_value32(mem.va(), 1, WriteValueFlags::DEFAULT)
        .unwrap();
    wait_until("the first callback to start", || {
        started.load(Ordering::Acquire) == 1
    });
    settle();
    assert_eq!(e.query().unwrap_err().kind(), kfdrt::ErrorKind::NotReady);
    assert_eq!(s.query().unwrap_err().kind(), kfdrt::ErrorKind::NotReady);
    assert_eq!(
        mem.atomic_u32(0).unwrap().load(Ordering::Acquire),
        0,
        "the other stream's write waits for the event"
    );
    tx.send(()).unwrap();
    e.synchronize().unwrap();
    assert_eq!(
        count.load(Ordering::Acquire),
        N,
        "the event completed after every callback before it"
    );
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 9);
    other.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 1);

    // Synchronize alone (no event, no later work) also waits for every callback.
    counting_callbacks(&s, &count, N, true);
    s.synchronize().unwrap();
    assert_eq!(count.load(Ordering::Acquire), 2 * N);
    s.query().unwrap();
}

/// Callbacks on two streams: a callback of stream a that blocks holds only a's later
/// callbacks and writes; b's callbacks and writes go on, and a callback of b enqueues a
/// write on a (ordered after a's held callback, as work enqueued then). Each stream's
/// callbacks run in order.
#[test]
fn callbacks_across_two_streams_hold_only_their_own_stream() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let a = Arc::new(dev.create_stream(0).unwrap());
    let b = dev.create_stream(0).unwrap();
    // a's first callback blocks in a kfdrt wait (which hands the dispatcher role on) for
    // stream c, held until the test stores the flag at word 64.
    let c = Arc::new(dev.create_stream(0).unwrap());
    c.wait_value32(mem.va() + 64, 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    let started = Arc::new(AtomicU32::new(0));
    let log: Arc<Mutex<Vec<(char, u32)>>> = Arc::new(Mutex::new(Vec::new()));
    let (c2, st2, va0) = (c.clone(), started.clone(), mem.va());
    a.add_callback(
        move |_| {
            st2.store(1, Ordering::Release);
            c2.synchronize_timeout(Duration::from_secs(20))
                .expect("the test releases stream c");
            // SAFETY: a word of the test's signal memory, alive until the test ends.
            unsafe { core::ptr::write_volatile(va0 as *mut u32, 7) };
        },
        0,
    )
    .unwrap();
    for i in 0..20 {
        let (la, lb) = (log.clone(), log.clone());
        a.add_callback(move |_| la.lock().unwrap().push(('a', i)), 0)
            .unwrap();
        b.add_callback(move |_| lb.lock().unwrap().push(('b', i)), 0)
            .unwrap();
    }
    let a2 = a.clone();
    let va = mem.va();
    b.add_callback(
        move |_| {
            a2.write_value32(va + 8, 5, WriteValueFlags::DEFAULT)
                .unwrap();
        },
        0,
    )
    .unwrap();
    b.write_value32(mem.va() + 4, 3, WriteValueFlags::DEFAULT)
        .unwrap();
    b.synchronize().unwrap();
    wait_until("a's first callback", || {
        started.load(Ordering::Acquire) == 1
    });
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 3);
    {
        let l = log.lock().unwrap();
        let bs: Vec<u32> = l.iter().filter(|e| e.0 == 'b').map(|e| e.1).collect();
        assert_eq!(bs, (0..20).collect::<Vec<_>>(), "b's callbacks, in order");
        assert!(l.iter().all(|e| e.0 == 'b'), "a's later callbacks wait");
    }
    settle();
    assert_eq!(
        mem.atomic_u32(8).unwrap().load(Ordering::Acquire),
        0,
        "the write b's callback put on a waits for a's callbacks"
    );
    mem.atomic_u32(64).unwrap().store(1, Ordering::Release);
    a.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 7);
    assert_eq!(mem.atomic_u32(8).unwrap().load(Ordering::Acquire), 5);
    let l = log.lock().unwrap();
    let as_: Vec<u32> = l.iter().filter(|e| e.0 == 'a').map(|e| e.1).collect();
    assert_eq!(as_, (0..20).collect::<Vec<_>>(), "a's callbacks, in order");
}

/// The legacy null stream waits for a blocking stream's callbacks (no hold was emitted
/// on that stream: the null stream waits on its callback line), also when the null
/// stream is first used after the callbacks were enqueued. Destroying a stream with
/// pending callbacks returns at once and they still run.
#[test]
fn null_stream_and_destroy_account_for_lazy_callbacks() {
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let started = Arc::new(AtomicU32::new(0));
    s.add_callback(blocked_writer(rx, started.clone(), mem.va(), 4), 0)
        .unwrap();
    let count = Arc::new(AtomicU32::new(0));
    counting_callbacks(&s, &count, 10, false);
    let before = submitted(&s);
    let null = dev.null_stream(0).unwrap();
    null.write_value32(mem.va(), 1, WriteValueFlags::DEFAULT)
        .unwrap();
    assert_eq!(submitted(&s), before, "no hold on the blocking stream");
    drop(s); // returns at once; its callbacks still run
    wait_until("the first callback to start", || {
        started.load(Ordering::Acquire) == 1
    });
    settle();
    assert_eq!(
        mem.atomic_u32(0).unwrap().load(Ordering::Acquire),
        0,
        "the null stream's write waits for the blocking stream's callbacks"
    );
    tx.send(()).unwrap();
    null.synchronize().unwrap();
    assert_eq!(count.load(Ordering::Acquire), 10);
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 1);
}
