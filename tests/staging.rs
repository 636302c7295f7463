//! Copies from and to pageable host memory (`src/staging.rs`): chunked through pinned
//! staging buffers, ordered after the stream's earlier work, complete on return.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{emu, pattern, signal_mem};
use kfdrt::staging::STAGING_CHUNK;
use kfdrt::MemoryKind;
use kfdrt::WaitCompare;

#[test]
fn pageable_roundtrip_through_vram_in_several_chunks() {
    let dev = emu("emu:mi250x");
    // Two full chunks and an odd tail, at an odd offset in the Vec.
    let len = 2 * STAGING_CHUNK + 12345;
    let data = pattern(len + 3, 11);
    let vram = dev.alloc(MemoryKind::Device, 0, len).unwrap();
    let s = dev.create_stream(0).unwrap();
    assert!(s.is_pageable(data.as_ptr() as u64));
    assert!(!s.is_pageable(vram.va()));
    let src = data[3..].as_ptr() as u64;
    // SAFETY: `data[3..]` holds `len` readable bytes and is not touched during the call.
    unsafe { s.memcpy_staged(vram.va(), src, len as u64) }.unwrap();
    let mut back = vec![0u8; len + 5];
    let dst = back[5..].as_mut_ptr() as u64;
    // SAFETY: `back[5..]` holds `len` writable bytes owned by this test.
    unsafe { dev.memcpy_staged(0, dst, vram.va(), len as u64) }.unwrap();
    assert!(back[5..] == data[3..], "round trip differs");
    assert_eq!(&back[..5], &[0; 5], "nothing written before dst");
}

#[test]
fn staged_copy_waits_for_earlier_work_and_completes_before_returning() {
    let dev = emu("emu:mi250x");
    let flag = signal_mem(&dev, 64);
    flag.atomic_u32(0).unwrap().store(0, Ordering::Release);
    let vram = dev.alloc(MemoryKind::Device, 0, 3 * STAGING_CHUNK).unwrap();
    let s = dev.create_stream(0).unwrap();
    // Gate the stream on the host flag, then fill the VRAM behind the gate.
    s.wait_value32(flag.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    s.memset(vram.va(), 0x5a, vram.len() as u64).unwrap();
    let gate = flag.atomic_u32(0).unwrap();
    let mut host = vec![0u8; vram.len()];
    std::thread::scope(|sc| {
        sc.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            gate.store(1, Ordering::Release);
        });
        // SAFETY: `host` is this test's buffer of the copied length.
        unsafe { s.memcpy_staged(host.as_mut_ptr() as u64, vram.va(), host.len() as u64) }.unwrap();
        // It returned only after the gate opened and the fill behind it ran.
        assert_eq!(gate.load(Ordering::Acquire), 1);
    });
    assert!(host.iter().all(|&b| b == 0x5a), "copy saw the fill");
    s.query().unwrap();
}

#[test]
fn pinned_sides_stay_asynchronous_and_host_to_host_is_a_host_copy() {
    let dev = emu("emu:mi250x");
    let pinned = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    let vram = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    pinned.write(0, &pattern(4096, 3)).unwrap();
    let s = dev.create_stream(0).unwrap();
    // Both sides GPU-mapped: the ordinary stream copy.
    // SAFETY: no pageable side.
    unsafe { s.memcpy_staged(vram.va(), pinned.va(), 4096) }.unwrap();
    let mut out = vec![0u8; 4096];
    // SAFETY: `out` is this test's 4096-byte buffer.
    unsafe { s.memcpy_staged(out.as_mut_ptr() as u64, vram.va(), 4096) }.unwrap();
    assert_eq!(out, pattern(4096, 3));
    // Both sides pageable.
    let a = pattern(777, 9);
    let mut b = vec![0u8; 777];
    // SAFETY: both are this test's buffers of 777 bytes.
    unsafe { s.memcpy_staged(b.as_mut_ptr() as u64, a.as_ptr() as u64, 777) }.unwrap();
    assert_eq!(a, b);
    // Null addresses are InvalidValue; zero bytes are a no-op.
    // SAFETY: nothing is dereferenced.
    let e = unsafe { s.memcpy_staged(0, vram.va(), 16) }.unwrap_err();
    assert_eq!(e.kind(), kfdrt::ErrorKind::InvalidValue);
    // SAFETY: zero bytes.
    unsafe { s.memcpy_staged(vram.va(), b.as_ptr() as u64, 0) }.unwrap();
}
