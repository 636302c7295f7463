//! `Device::allocation_at` and the checks built on it (`src/device.rs`, `src/copy.rs`,
//! `src/staging.rs`, `src/memory.rs`): allocations as asked for (requested length,
//! registrations at any pointer, sub-ranges sharing a registration), and copies, fills and
//! stream memory operations refusing addresses in no allocation with the stream usable.

mod common;

use std::sync::atomic::Ordering;

use common::emu;
use kfdrt::{AllocationKind, ErrorKind, MemoryKind, WaitCompare, WriteValueFlags};

#[test]
fn allocations_have_the_length_asked_for() {
    let dev = emu("emu:mi250x");
    let b = dev.alloc(MemoryKind::Device, 0, 100).unwrap();
    assert_eq!(b.len(), 4096);
    assert_eq!((b.base(), b.requested_len()), (b.va(), 100));
    let a = dev.allocation_at(b.va() + 99).unwrap();
    assert_eq!((a.base, a.len, a.gpu), (b.va(), 100, 0));
    assert_eq!(a.kind, AllocationKind::Buffer(MemoryKind::Device));
    assert_eq!(a.room_at(b.va() + 60), 40);
    assert_eq!(dev.allocation_at(b.va() + 100), None);
    let s = dev.create_stream(0).unwrap();
    let e = s.memset(b.va(), 1, 101).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue);
    let e = s.memset_d32(b.va(), 1, 26).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue);
    s.memset_d32(b.va(), 0x0101_0101, 25).unwrap();
    s.synchronize().unwrap();
    let mut out = [0u8; 100];
    b.read(0, &mut out).unwrap();
    assert_eq!(out, [1u8; 100]);
    let va = b.va();
    drop(b);
    assert_eq!(dev.allocation_at(va), None);
}

#[test]
fn unknown_addresses_are_refused_and_the_stream_stays_usable() {
    let dev = emu("emu:mi250x");
    let s = dev.create_stream(0).unwrap();
    let stack = [0u32; 4];
    let on_stack = stack.as_ptr() as u64;
    assert_eq!(dev.allocation_at(on_stack), None);
    let none = WriteValueFlags::empty();
    for r in [
        s.write_value32(on_stack, 5, none),
        s.write_value64(0x1000, 5, none),
        s.wait_value32(on_stack, 1, WaitCompare::Eq, u32::MAX),
        s.wait_value64(0x1000, 1, WaitCompare::Gte, u64::MAX),
        s.memset(on_stack, 1, 16),
        s.memset_d32(0x1000, 1, 4),
        s.memcpy(on_stack, on_stack + 8, 8),
    ] {
        assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidValue);
    }
    assert_eq!(stack, [0; 4]);
    // Zero lengths succeed whatever the address (CLR checks the size first).
    s.memset(0, 1, 0).unwrap();
    s.memset_d32(0, 1, 0).unwrap();
    s.memcpy(0, 0, 0).unwrap();
    // The stream runs later work.
    let b = dev.alloc(MemoryKind::HostPinned, 0, 64).unwrap();
    s.write_value32(b.va() + 4, 0xabc, none).unwrap();
    s.memset(b.va() + 8, 7, 4).unwrap();
    s.synchronize().unwrap();
    assert_eq!(b.atomic_u32(4).unwrap().load(Ordering::Acquire), 0xabc);
    assert_eq!(
        b.atomic_u32(8).unwrap().load(Ordering::Acquire),
        0x0707_0707
    );
}

#[test]
fn staged_copy_checks_the_device_side_before_reading_the_host() {
    let dev = emu("emu:mi250x");
    let s = dev.create_stream(0).unwrap();
    let small = dev.alloc(MemoryKind::Device, 0, 100).unwrap();
    let host = [0x5au8; 64];
    // 4 MiB "from" a 64-byte host buffer: refused before any host byte past it is read.
    // SAFETY: refused before the host side is touched (the call under test); the 64 bytes
    // would be readable anyway.
    let r = unsafe { s.memcpy_staged(small.va(), host.as_ptr() as u64, 4 << 20) };
    assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidValue);
    let mut back = [0u8; 64];
    // SAFETY: as above, for the destination.
    let r = unsafe { s.memcpy_staged(back.as_mut_ptr() as u64, small.va(), 4 << 20) };
    assert_eq!(r.unwrap_err().kind(), ErrorKind::InvalidValue);
    // SAFETY: 64 readable and writable bytes on each side.
    unsafe {
        s.memcpy_staged(small.va(), host.as_ptr() as u64, 64)
            .unwrap();
        s.memcpy_staged(back.as_mut_ptr() as u64, small.va(), 64)
            .unwrap();
    }
    assert_eq!(back, host);
}

#[test]
fn registration_of_any_range_and_of_ranges_inside_one() {
    let dev = emu("emu:mi250x");
    let s = dev.create_stream(0).unwrap();
    let mut mem = vec![0u8; 5 * 4096];
    let page = (mem.as_mut_ptr() as u64).next_multiple_of(4096);
    let p = page + 8;
    // SAFETY: `mem` outlives every registration below (dropped first) and holds the
    // pages from `page`.
    let r = unsafe { dev.register_host_memory(p as *mut u8, 4000) }.unwrap();
    assert_eq!((r.va(), r.len()), (page, 4096));
    assert_eq!((r.base(), r.requested_len()), (p, 4000));
    let a = dev.allocation_at(p + 3999).unwrap();
    assert_eq!((a.base, a.len), (p, 4000));
    assert_eq!(a.kind, AllocationKind::Buffer(MemoryKind::Userptr));
    assert_eq!(
        dev.allocation_at(page + 4),
        None,
        "before the caller's bytes"
    );
    assert_eq!(dev.allocation_at(p + 4000), None, "after them");
    s.write_value32(p + 4, 0x77, WriteValueFlags::empty())
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(mem[(p + 4 - mem.as_ptr() as u64) as usize], 0x77);
    drop(r);
    assert_eq!(dev.allocation_at(p), None);

    // A range inside a registration shares its buffer object; it lives until the last.
    // SAFETY: as above.
    let whole = unsafe { dev.register_host_memory(page as *mut u8, 3 * 4096) }.unwrap();
    // SAFETY: as above.
    let inner = unsafe { dev.register_host_memory((page + 4096) as *mut u8, 100) }.unwrap();
    assert_eq!(inner.handle(), whole.handle());
    assert_eq!((inner.va(), inner.base()), (page, page + 4096));
    drop(whole);
    assert_eq!(dev.allocation_at(page), None);
    assert_eq!(dev.allocation_at(page + 4096).map(|a| a.len), Some(100));
    s.write_value32(page + 4096, 0x99, WriteValueFlags::empty())
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(mem[(page + 4096 - mem.as_ptr() as u64) as usize], 0x99);
    drop(inner);
    assert_eq!(dev.allocation_at(page + 4096), None);
    // Null, empty and overflowing ranges are refused.
    for (ptr, len) in [(0u64, 16usize), (page, 0), (u64::MAX - 8, 100)] {
        // SAFETY: each is refused before anything is registered.
        let e = unsafe { dev.register_host_memory(ptr as *mut u8, len) }.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue);
    }
}
