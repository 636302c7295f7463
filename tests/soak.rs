//! Issue 11: the soak workload (`kfdrt::soak`, also `kfdrt soak --minutes N`) for about
//! 20 s: threads x streams mixing every stream command, the allocator and busy-stream
//! destruction; every write, callback and allocation's bytes are checked at each
//! checkpoint.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::emu;
use kfdrt::raw::soak::{self, Config, Counts};

#[test]
fn soak_mixed_streams_for_twenty_seconds() {
    let dev = emu("emu:mi210");
    let cfg = Config {
        threads: 4,
        streams: 8,
        duration: Duration::from_secs(20),
        gpu: 0,
        seed: 0x5eed,
    };
    let counts = Arc::new(Counts::default());
    let r = soak::run(&dev, &cfg, &counts);
    eprintln!("soak: {counts}");
    r.unwrap();
    use std::sync::atomic::Ordering::Relaxed;
    assert!(counts.checkpoints.load(Relaxed) >= cfg.threads as u64);
    assert!(counts.writes.load(Relaxed) > 0 && counts.copies.load(Relaxed) > 0);
}
