//! Callbacks, writes and event records enqueued on one stream from three host threads at
//! once, on a blocking stream and on the legacy null stream. The stream order of two
//! enqueues from different threads is unknown, but bounds on it are not: an enqueue
//! that returned before another began precedes it. Each thread writes its own word
//! with 1, 2, 3, ... and publishes how many of its writes have begun (`begun`) and
//! returned (`done`); a callback enqueued by thread t must see
//! - t's word equal to t's last write before it (t's later writes follow it),
//! - u's word between u's `done` read before the enqueue and u's `begun` read after it,
//!
//! and in the order the callbacks ran (the stream's), every word only grows. An event
//! recorded by a thread completes after that thread's writes and callbacks before it,
//! and after the other threads' writes that returned before the record began; the
//! final synchronize returns after every callback.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use common::{emu, signal_mem};
use kfdrt::{EventFlags, Stream, WriteValueFlags};

const THREADS: usize = 3;
/// Operations per thread.
const OPS: u32 = 120;
const BOUND: Duration = Duration::from_secs(30);

/// One callback as it ran: (thread, its index among the thread's callbacks, words seen).
type Ran = (usize, u32, [u32; THREADS]);

/// What a thread knew around one callback's enqueue: (index, own word, lower bounds,
/// upper bounds) of the words it must see.
type Bounds = (u32, u32, [u32; THREADS], [u32; THREADS]);

struct Shared {
    /// Writes of each thread that began (counted before the enqueue starts).
    begun: [AtomicU32; THREADS],
    /// Writes of each thread whose enqueue returned.
    done: [AtomicU32; THREADS],
    /// Callbacks in the order they ran.
    ran: Mutex<Vec<Ran>>,
}

fn snapshot(a: &[AtomicU32; THREADS]) -> [u32; THREADS] {
    core::array::from_fn(|u| a[u].load(Ordering::SeqCst))
}

/// Thread `t`'s operations on `s`: a write each step, a callback every 2nd or 3rd step
/// (the pattern differs per thread so the interleavings differ), and every 17th step an
/// event record that the thread then waits for and checks.
fn worker(
    t: usize,
    dev: kfdrt::Device,
    s: Arc<Stream>,
    base: u64,
    sh: Arc<Shared>,
    start: Arc<Barrier>,
) -> Vec<Bounds> {
    let mut bounds = Vec::new();
    let mut cb_index = 0u32;
    let ran_by_me = Arc::new(AtomicU32::new(0));
    let event = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    start.wait();
    for k in 1..=OPS {
        sh.begun[t].store(k, Ordering::SeqCst);
        s.write_value32(base + 4 * t as u64, k, WriteValueFlags::DEFAULT)
            .unwrap();
        sh.done[t].store(k, Ordering::SeqCst);
        if k % (2 + t as u32 % 2) == 0 {
            let lo = snapshot(&sh.done);
            let (sh2, mine) = (sh.clone(), ran_by_me.clone());
            let idx = cb_index;
            s.add_callback(
                move |st| {
                    let seen: [u32; THREADS] = core::array::from_fn(|u| {
                        // SAFETY: words of the test's signal memory, alive until every
                        // stream was synchronized.
                        unsafe { core::ptr::read_volatile((base + 4 * u as u64) as *const u32) }
                    });
                    // Checked by the test thread (a panic here would only fail the stream).
                    let ok = if st.is_ok() {
                        seen
                    } else {
                        [u32::MAX; THREADS]
                    };
                    sh2.ran.lock().unwrap().push((t, idx, ok));
                    mine.fetch_add(1, Ordering::SeqCst);
                },
                0,
            )
            .unwrap();
            let hi = snapshot(&sh.begun);
            bounds.push((idx, k, lo, hi));
            cb_index += 1;
        }
        if k % 17 == 0 {
            let lo = snapshot(&sh.done);
            event.record(&s).unwrap();
            event
                .wait_timeout(BOUND)
                .unwrap_or_else(|e| panic!("thread {t}: event after write {k}: {e}"));
            assert_eq!(
                ran_by_me.load(Ordering::SeqCst),
                cb_index,
                "thread {t}: the event after write {k} completed before a callback of this \
                 thread enqueued before it returned"
            );
            for (u, &l) in lo.iter().enumerate() {
                // SAFETY: as above.
                let v = unsafe { core::ptr::read_volatile((base + 4 * u as u64) as *const u32) };
                if u == t {
                    assert_eq!(v, k, "thread {t}: the event completed before its write {k}");
                } else {
                    assert!(
                        v >= l,
                        "thread {t}: the event after write {k} completed before thread {u}'s \
                         write {l} (word is {v})"
                    );
                }
            }
        }
    }
    bounds
}

fn callbacks_and_writes_from_three_threads(dev: kfdrt::Device, s: Stream) {
    let mem = signal_mem(&dev, 4096);
    let base = mem.va();
    let s = Arc::new(s);
    let sh = Arc::new(Shared {
        begun: Default::default(),
        done: Default::default(),
        ran: Mutex::new(Vec::new()),
    });
    let start = Arc::new(Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (dev, s, sh, start) = (dev.clone(), s.clone(), sh.clone(), start.clone());
            std::thread::spawn(move || worker(t, dev, s, base, sh, start))
        })
        .collect();
    let bounds: Vec<Vec<Bounds>> = handles
        .into_iter()
        .map(|h| h.join().expect("worker thread"))
        .collect();
    s.synchronize_timeout(BOUND)
        .unwrap_or_else(|e| panic!("synchronize after all callbacks: {e}"));
    let ran = sh.ran.lock().unwrap().clone();
    let expected: usize = bounds.iter().map(Vec::len).sum();
    assert_eq!(
        ran.len(),
        expected,
        "synchronize returned after every callback, each ran once"
    );
    let mut next = [0u32; THREADS];
    let mut last = [0u32; THREADS];
    for &(t, idx, seen) in &ran {
        assert_ne!(seen, [u32::MAX; THREADS], "callback {t}/{idx} got an error");
        assert_eq!(
            idx, next[t],
            "thread {t}'s callbacks run in its enqueue order"
        );
        next[t] += 1;
        let (_, own, lo, hi) = bounds[t][idx as usize];
        for u in 0..THREADS {
            if u == t {
                assert_eq!(
                    seen[u], own,
                    "callback {t}/{idx} sees its thread's write {own}, none later"
                );
            } else {
                assert!(
                    lo[u] <= seen[u] && seen[u] <= hi[u],
                    "callback {t}/{idx} sees thread {u}'s word {} outside [{}, {}]: a write \
                     before it missing or one after it visible",
                    seen[u],
                    lo[u],
                    hi[u]
                );
            }
            assert!(
                seen[u] >= last[u],
                "callback {t}/{idx} sees thread {u}'s word go back from {} to {}: writes or \
                 callbacks out of stream order",
                last[u],
                seen[u]
            );
        }
        last = seen;
    }
    for u in 0..THREADS {
        assert_eq!(
            mem.atomic_u32(4 * u).unwrap().load(Ordering::Acquire),
            OPS,
            "thread {u}'s last write landed last"
        );
    }
}

#[test]
fn callbacks_writes_and_records_from_three_threads_on_one_stream() {
    let dev = emu("emu:mi300x");
    let s = dev.create_stream(0).unwrap();
    callbacks_and_writes_from_three_threads(dev, s);
}

#[test]
fn callbacks_writes_and_records_from_three_threads_on_the_null_stream() {
    let dev = emu("emu:mi300x");
    // A blocking stream with pending callbacks of its own: the null stream's work also
    // waits on its callback line.
    let other = dev.create_stream(0).unwrap();
    let count = Arc::new(AtomicU32::new(0));
    for _ in 0..20 {
        let c = count.clone();
        other
            .add_callback(
                move |_| {
                    c.fetch_add(1, Ordering::SeqCst);
                },
                0,
            )
            .unwrap();
    }
    let null = dev.null_stream(0).unwrap();
    callbacks_and_writes_from_three_threads(dev, null);
    assert_eq!(
        count.load(Ordering::SeqCst),
        20,
        "the null stream's work waited for the blocking stream's callbacks"
    );
}

#[test]
fn callbacks_writes_and_records_from_three_threads_on_gfx11() {
    let dev = emu("emu:rx7900xtx");
    let s = dev.create_stream(0).unwrap();
    callbacks_and_writes_from_three_threads(dev, s);
}
