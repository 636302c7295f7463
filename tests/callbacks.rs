//! Stream callbacks in bulk: runs of back-to-back callbacks on several streams (the
//! dispatcher drains a run per wake-up and recycles its gates) keep HIP's order and
//! hold semantics.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{emu, signal_mem, wait_until};
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
