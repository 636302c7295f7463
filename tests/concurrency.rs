//! Several host threads enqueue onto shared and separate streams: every write lands
//! exactly once and every callback runs exactly once.

mod common;

use kfdrt::WriteValueFlags;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{emu, signal_mem};

#[test]
fn threads_enqueue_writes_and_callbacks() {
    let dev = emu("emu:mi300x");
    const THREADS: usize = 4;
    const SLOTS: usize = 512; // 32-bit cells per thread
    let mem = Arc::new(signal_mem(&dev, THREADS * SLOTS * 4));
    let shared = Arc::new(dev.create_stream(0).unwrap());
    let counters: Arc<Vec<AtomicU32>> = Arc::new((0..THREADS).map(|_| AtomicU32::new(0)).collect());
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut handles = Vec::new();
    for t in 0..THREADS {
        let dev = dev.clone();
        let mem = mem.clone();
        let shared = shared.clone();
        let counters = counters.clone();
        handles.push(std::thread::spawn(move || {
            let own = dev.create_stream(0).unwrap();
            let mut round = 0u32;
            let mut callbacks = 0u32;
            while Instant::now() < deadline || round == 0 {
                round += 1;
                for i in 0..SLOTS {
                    let s = if i % 2 == 0 { &own } else { &*shared };
                    let va = mem.va() + ((t * SLOTS + i) * 4) as u64;
                    s.write_value32(va, round, WriteValueFlags::DEFAULT)
                        .unwrap();
                }
                let c = counters.clone();
                own.add_callback(
                    move |st| {
                        assert!(st.is_ok());
                        c[t].fetch_add(1, Ordering::AcqRel);
                    },
                    0,
                )
                .unwrap();
                callbacks += 1;
                own.synchronize().unwrap();
                shared.synchronize().unwrap();
                for i in 0..SLOTS {
                    let v = mem
                        .atomic_u32((t * SLOTS + i) * 4)
                        .unwrap()
                        .load(Ordering::Acquire);
                    assert_eq!(v, round, "thread {t} slot {i}");
                }
            }
            (round, callbacks)
        }));
    }
    for (t, h) in handles.into_iter().enumerate() {
        let (rounds, callbacks) = h.join().unwrap();
        assert!(rounds >= 1);
        common::wait_until("callbacks", || {
            counters[t].load(Ordering::Acquire) == callbacks
        });
        // Exactly once: no extra runs show up later.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(counters[t].load(Ordering::Acquire), callbacks);
    }
}

/// Writers on one stream race the stream's move from its shared queue to a dedicated one
/// (its first wait-value, issued by another thread while they enqueue without the
/// stream's lock): a write enqueued after the wait returned stays behind the wait until
/// the gate opens, and each writer's writes land in its order (the last one wins).
#[test]
fn writers_race_a_move_to_a_dedicated_queue() {
    use std::sync::atomic::AtomicBool;
    let dev = emu("emu:mi300x");
    const WRITERS: usize = 3;
    const WRITES: u32 = 300;
    const AFTER: u32 = 1 << 31; // marks a value written after the wait was enqueued
    let mem = signal_mem(&dev, 4096);
    for round in 0..8 {
        let s = dev.create_stream(0).unwrap();
        let gate = common::Gate::new(&dev);
        let waited = AtomicBool::new(false);
        let last: Vec<AtomicU32> = (0..WRITERS).map(|_| AtomicU32::new(0)).collect();
        std::thread::scope(|sc| {
            for (t, last) in last.iter().enumerate() {
                let (s, waited, mem) = (&s, &waited, &mem);
                sc.spawn(move || {
                    let va = mem.va() + (t * 64) as u64;
                    for i in 1..=WRITES {
                        let v = if waited.load(Ordering::Acquire) {
                            AFTER | i
                        } else {
                            i
                        };
                        s.write_value32(va, v, WriteValueFlags::DEFAULT).unwrap();
                        last.store(v, Ordering::Relaxed);
                    }
                });
            }
            let (s, waited, gate) = (&s, &waited, &gate);
            sc.spawn(move || {
                for _ in 0..(round * 20) {
                    std::thread::yield_now();
                }
                gate.hold(s);
                waited.store(true, Ordering::Release);
            });
        });
        assert!(
            s.has_dedicated_queue(),
            "round {round}: the wait moved the stream"
        );
        common::settle();
        for t in 0..WRITERS {
            let v = mem.atomic_u32(t * 64).unwrap().load(Ordering::Acquire);
            assert_eq!(
                v & AFTER,
                0,
                "round {round} writer {t}: {v:#x} ran before the gate opened"
            );
        }
        gate.open();
        s.synchronize_timeout(Duration::from_secs(20)).unwrap();
        for (t, last) in last.iter().enumerate() {
            let v = mem.atomic_u32(t * 64).unwrap().load(Ordering::Acquire);
            assert_eq!(v, last.load(Ordering::Relaxed), "round {round} writer {t}");
        }
    }
}
