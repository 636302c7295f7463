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
