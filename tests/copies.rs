//! Stream-ordered and synchronous copies and fills, checked byte for byte.

mod common;

use std::sync::atomic::Ordering;

use common::{emu, pattern, settle, signal_mem};
use kfdrt::{MemoryKind, WaitCompare, WriteValueFlags};

#[test]
fn host_to_device_to_host_roundtrip_including_multi_chunk() {
    let dev = emu("emu:mi300x");
    let len = 80 << 20; // more than two 32 MiB CP DMA chunks
    let host = dev.alloc(MemoryKind::HostPinned, 0, len).unwrap();
    let vram = dev.alloc(MemoryKind::Device, 0, len).unwrap();
    let back = dev.alloc(MemoryKind::HostPinned, 0, len).unwrap();
    let data = pattern(len, 7);
    host.write(0, &data).unwrap();
    let s = dev.create_stream(0).unwrap();
    s.memcpy(vram.va(), host.va(), len as u64).unwrap();
    s.memcpy(back.va(), vram.va(), len as u64).unwrap();
    s.synchronize().unwrap();
    let mut out = vec![0u8; len];
    back.read(0, &mut out).unwrap();
    assert!(out == data, "round trip differs");
    let mut mid = vec![0u8; 4096];
    vram.read(len - 4096, &mut mid).unwrap();
    assert_eq!(&mid[..], &data[len - 4096..]);
}

#[test]
fn unaligned_copies_and_fills() {
    let dev = emu("emu:rx7900xtx");
    let a = dev.alloc(MemoryKind::HostPinned, 0, 1 << 16).unwrap();
    let b = dev.alloc(MemoryKind::Device, 0, 1 << 16).unwrap();
    let data = pattern(1 << 16, 3);
    a.write(0, &data).unwrap();
    let s = dev.create_stream(0).unwrap();
    b.write(0, &vec![0xee; 1 << 16]).unwrap();
    s.memcpy(b.va() + 3, a.va() + 5, 1001).unwrap();
    // memset with unaligned head and tail: bytes [7, 7+23) set to 0x5a.
    s.memset(a.va() + 7, 0x5a, 23).unwrap();
    // memset of 2 bytes inside one dword, and a dword fill.
    s.memset(a.va() + 101, 0x11, 2).unwrap();
    s.memset_d32(a.va() + 1024, 0xdead_beef, 16).unwrap();
    s.synchronize().unwrap();
    let mut out = vec![0u8; 1 << 16];
    b.read(0, &mut out).unwrap();
    assert_eq!(&out[..3], &[0xee; 3]);
    assert_eq!(&out[3..1004], &data[5..1006]);
    assert_eq!(out[1004], 0xee);
    a.read(0, &mut out).unwrap();
    assert_eq!(&out[..7], &data[..7]);
    assert!(out[7..30].iter().all(|&x| x == 0x5a), "{:x?}", &out[..32]);
    assert_eq!(&out[30..101], &data[30..101]);
    assert_eq!(&out[101..103], &[0x11, 0x11]);
    assert_eq!(out[103], data[103]);
    for i in 0..16 {
        assert_eq!(
            u32::from_ne_bytes(out[1024 + i * 4..1028 + i * 4].try_into().unwrap()),
            0xdead_beef
        );
    }
    assert_eq!(&out[1088..1100], &data[1088..1100]);
    assert_eq!(
        s.memset_d32(a.va() + 2, 0, 4).unwrap_err().kind(),
        kfdrt::ErrorKind::InvalidValue
    );
    assert_eq!(
        s.memcpy(0, a.va(), 4).unwrap_err().kind(),
        kfdrt::ErrorKind::InvalidValue
    );
    s.memcpy(a.va(), b.va(), 0).unwrap();
}

#[test]
fn copy_waits_for_earlier_work_in_its_stream() {
    let dev = emu("emu:mi210");
    let flags = signal_mem(&dev, 4096);
    let src = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    let dst = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    src.write(0, &[9u8; 4096]).unwrap();
    let s = dev.create_stream(0).unwrap();
    s.wait_value32(flags.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    s.memcpy(dst.va(), src.va(), 4096).unwrap();
    settle();
    let mut out = [0u8; 16];
    dst.read(0, &mut out).unwrap();
    assert_eq!(out, [0u8; 16], "copy held behind the wait");
    flags.atomic_u32(0).unwrap().store(1, Ordering::Release);
    s.synchronize().unwrap();
    dst.read(0, &mut out).unwrap();
    assert_eq!(out, [9u8; 16]);
}

#[test]
fn device_to_device_between_two_gpus_and_synchronous_copy() {
    let dev = emu("emu:mi250x*2");
    let len = 3 << 20;
    let v0 = dev.alloc(MemoryKind::Device, 0, len).unwrap();
    let v1 = dev.alloc(MemoryKind::Device, 1, len).unwrap();
    let host = dev.alloc(MemoryKind::HostPinned, 0, len).unwrap();
    let data = pattern(len, 11);
    host.write(0, &data).unwrap();
    dev.memcpy(0, v0.va(), host.va(), len as u64).unwrap();
    // A stream on GPU 1 reads GPU 0's VRAM into its own without peer access: as
    // hipMemcpy between devices in HIP, the copy maps the source for GPU 1's copy engine.
    assert!(
        v0.mapped_gpu_ids().len() == 1,
        "no peer mapping before the copy"
    );
    let s1 = dev.create_stream(1).unwrap();
    s1.memcpy(v1.va(), v0.va(), len as u64).unwrap();
    s1.synchronize().unwrap();
    let mut out = vec![0u8; len];
    v1.read(0, &mut out).unwrap();
    assert!(out == data, "GPU1 copy differs");
    dev.memset(1, v1.va(), 0, len as u64).unwrap();
    v1.read(0, &mut out).unwrap();
    assert!(out.iter().all(|&b| b == 0));
}

#[test]
fn large_copies_use_sdma_ordered_both_ways_with_compute_work() {
    let dev = emu("emu:mi210");
    let flags = signal_mem(&dev, 4096);
    let len = 4 << 20;
    let src = dev.alloc(MemoryKind::HostPinned, 0, len).unwrap();
    let dst = dev.alloc(MemoryKind::Device, 0, len).unwrap();
    let data = pattern(len, 5);
    src.write(0, &data).unwrap();
    let s = dev.create_stream(0).unwrap();
    s.memcpy(dst.va(), src.va(), 4096).unwrap(); // small: CP DMA
    s.synchronize().unwrap();
    assert!(s.sdma_queue_id().is_none(), "small copies stay on CP DMA");
    // Copy held behind a wait; a write after the copy follows it.
    s.wait_value32(flags.va(), 1, WaitCompare::Eq, u32::MAX)
        .unwrap();
    s.memcpy(dst.va(), src.va(), len as u64).unwrap();
    s.write_value32(flags.va() + 8, 42, WriteValueFlags::DEFAULT)
        .unwrap();
    assert!(s.sdma_queue_id().is_some(), "a 4 MiB copy goes to SDMA");
    settle();
    let mut tail = vec![0u8; 64];
    dst.read(len - 64, &mut tail).unwrap();
    assert_eq!(
        tail,
        vec![0u8; 64],
        "SDMA copy waits for the stream's earlier work"
    );
    assert_eq!(flags.atomic_u32(8).unwrap().load(Ordering::Acquire), 0);
    flags.atomic_u32(0).unwrap().store(1, Ordering::Release);
    s.synchronize().unwrap();
    assert_eq!(flags.atomic_u32(8).unwrap().load(Ordering::Acquire), 42);
    let mut out = vec![0u8; len];
    dst.read(0, &mut out).unwrap();
    assert!(out == data, "SDMA copy differs");
}

/// Copies between GPUs need no peer access (hipMemcpy between devices works without
/// hipDeviceEnablePeerAccess): the copying GPU gets the other GPU's buffer mapped, for CP
/// DMA (small) and SDMA (large) copies, source or destination on the other GPU.
#[test]
fn cross_gpu_copies_work_without_peer_access_on_both_engines() {
    let dev = emu("emu:mi300x*2");
    let (id0, id1) = (dev.gpus()[0].gpu_id, dev.gpus()[1].gpu_id);
    for len in [4096usize, 2 << 20] {
        let v0 = dev.alloc(MemoryKind::Device, 0, len).unwrap();
        let v1 = dev.alloc(MemoryKind::Device, 1, len).unwrap();
        let back = dev.alloc(MemoryKind::Device, 1, len).unwrap();
        let data = pattern(len, len as u32 ^ 0x5a);
        v0.write(0, &data).unwrap();
        assert_eq!(v0.mapped_gpu_ids(), vec![id0]);
        let s1 = dev.create_stream(1).unwrap();
        // Source on GPU 0, copied by GPU 1.
        s1.memcpy(v1.va(), v0.va(), len as u64).unwrap();
        s1.synchronize().unwrap();
        let mut out = vec![0u8; len];
        v1.read(0, &mut out).unwrap();
        assert!(out == data, "{len}: GPU 1 pulled GPU 0's VRAM");
        assert_eq!(v0.mapped_gpu_ids(), vec![id0, id1], "mapped for the copy");
        // Source and destination on GPU 1, copied by GPU 0.
        let s0 = dev.create_stream(0).unwrap();
        s0.memset(v0.va(), 0, len as u64).unwrap();
        s0.memcpy(back.va(), v1.va(), len as u64).unwrap();
        s0.synchronize().unwrap();
        back.read(0, &mut out).unwrap();
        assert!(out == data, "{len}: GPU 0 pushed into GPU 1's VRAM");
    }
}
