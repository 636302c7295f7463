//! Issue 11 item 6: 512 streams that each wait on a value, on one emulated MI300X, all
//! complete. Context-save areas are pageable SVM memory (only touched pages cost memory),
//! and streams beyond KFD's 127 queues per GPU stay on shared queues.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::emu;
use kfdrt::{MemoryKind, WaitCompare, WriteValueFlags};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

#[test]
fn five_hundred_twelve_waiting_streams_all_complete() {
    const N: usize = 512;
    let dev = emu("emu:mi300x");
    let flags = dev.alloc(MemoryKind::Signal, 0, N * 8).unwrap();
    let out = dev.alloc(MemoryKind::Signal, 0, N * 8).unwrap();
    let before = rss_kib();
    let streams: Vec<_> = (0..N)
        .map(|i| {
            let s = dev.create_stream(0).unwrap();
            s.wait_value32(flags.va() + 8 * i as u64, 1, WaitCompare::Eq, u32::MAX)
                .unwrap_or_else(|e| panic!("stream {i}: {e}"));
            s.write_value32(
                out.va() + 8 * i as u64,
                i as u32 + 1,
                WriteValueFlags::DEFAULT,
            )
            .unwrap();
            s
        })
        .collect();
    let after = rss_kib();
    let dedicated = streams.iter().filter(|s| s.has_dedicated_queue()).count();
    eprintln!(
        "512 waiting streams: {dedicated} dedicated queues, RSS {} MiB -> {} MiB (+{} MiB)",
        before / 1024,
        after / 1024,
        after.saturating_sub(before) / 1024
    );
    assert!(dedicated >= 100, "{dedicated} dedicated queues");
    for (i, s) in streams.iter().enumerate() {
        assert_eq!(
            out.atomic_u32(8 * i).unwrap().load(Ordering::Acquire),
            0,
            "stream {i} ran before its value"
        );
        assert_eq!(
            s.query().unwrap_err().kind(),
            kfdrt::ErrorKind::NotReady,
            "stream {i}"
        );
    }
    for i in 0..N {
        flags.atomic_u32(8 * i).unwrap().store(1, Ordering::Release);
    }
    for (i, s) in streams.iter().enumerate() {
        s.synchronize_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("stream {i}: {e}"));
        assert_eq!(
            out.atomic_u32(8 * i).unwrap().load(Ordering::Acquire),
            i as u32 + 1
        );
    }
}
