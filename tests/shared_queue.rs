//! Streams forced onto one hardware queue (`KFDRT_MAX_HW_QUEUES=1`) never deadlock.

mod common;

use kfdrt::{WaitCompare, WriteValueFlags};
use std::sync::atomic::Ordering;

use common::{emu, signal_mem};

#[test]
fn waiter_and_writer_sharing_one_queue_both_complete() {
    // Only this test binary sets the variable, before any device exists.
    std::env::set_var("KFDRT_MAX_HW_QUEUES", "1");
    let dev = emu("emu:mi210");
    let mem = signal_mem(&dev, 4096);
    let a = dev.create_stream(0).unwrap();
    let b = dev.create_stream(0).unwrap();
    let c = dev.create_stream(0).unwrap();
    assert_eq!(a.hw_queue_id(), b.hw_queue_id(), "one shared queue");
    assert_eq!(b.hw_queue_id(), c.hw_queue_id());
    // a waits for a value b writes afterwards.
    a.wait_value32(mem.va(), 1, WaitCompare::Gte, u32::MAX)
        .unwrap();
    a.write_value32(mem.va() + 4, 2, WriteValueFlags::DEFAULT)
        .unwrap();
    b.write_value32(mem.va(), 1, WriteValueFlags::DEFAULT)
        .unwrap();
    // An unrelated stream on the shared queue is not held up by a's wait either.
    c.write_value32(mem.va() + 8, 3, WriteValueFlags::DEFAULT)
        .unwrap();
    c.synchronize().unwrap();
    b.synchronize().unwrap();
    a.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(4).unwrap().load(Ordering::Acquire), 2);
    assert_eq!(mem.atomic_u32(8).unwrap().load(Ordering::Acquire), 3);
    assert_ne!(
        a.hw_queue_id(),
        b.hw_queue_id(),
        "the waiting stream moved to its own queue"
    );
}
