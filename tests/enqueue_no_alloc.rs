//! The enqueue path of an uncontended stream allocates nothing: a counting global
//! allocator sees zero allocations on this thread across a warmed-up burst of stream
//! memory ops, event records and queries.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

#[test]
fn enqueue_path_does_not_allocate() {
    let dev = common::emu("emu:mi300x");
    let mem = common::signal_mem(&dev, 4096);
    let s = dev
        .create_stream_with_flags(0, kfdrt::stream::STREAM_NON_BLOCKING)
        .unwrap();
    let ev = dev
        .create_event(kfdrt::event::EVENT_DISABLE_TIMING)
        .unwrap();
    // Warm up: the stream's queue, pools and any lazy state exist after this.
    for i in 0..64 {
        s.write_value32(mem.va(), i, 0).unwrap();
        s.wait_value32(mem.va(), 0, kfdrt::cmd::WAIT_VALUE_GTE, 0)
            .unwrap();
        ev.record(&s).unwrap();
    }
    s.synchronize().unwrap();
    let before = ALLOCS.with(|c| c.get());
    for i in 0..500u32 {
        s.write_value32(mem.va(), i, 0).unwrap();
        s.write_value64(mem.va() + 8, i as u64, 0).unwrap();
        s.wait_value32(mem.va() + 8, 0, kfdrt::cmd::WAIT_VALUE_GTE, u32::MAX)
            .unwrap();
        ev.record(&s).unwrap();
        let _ = s.query();
    }
    let after = ALLOCS.with(|c| c.get());
    assert_eq!(after - before, 0, "allocations on the enqueue path");
    s.synchronize().unwrap();
}
