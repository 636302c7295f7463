//! Device, host-pinned, signal and registered memory; device open and errors.

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::emu;
use kfdrt::{Device, DeviceSpec, ErrorKind, EventFlags, MemoryKind, WaitCompare, WriteValueFlags};

#[test]
fn every_kind_is_cpu_and_gpu_visible_and_freed_on_drop() {
    let dev = emu("emu:mi210*2");
    let s = dev.create_stream(1).unwrap();
    // Device memory reaches another GPU only through peer access (hipMalloc +
    // hipDeviceEnablePeerAccess); system memory is mapped on every GPU.
    dev.enable_peer_access(1, 0).unwrap();
    for kind in [
        MemoryKind::Device,
        MemoryKind::HostPinned,
        MemoryKind::Signal,
    ] {
        let b = dev.alloc(kind, 0, 10_000).unwrap();
        assert_eq!(b.len(), 12_288, "rounded to pages");
        assert_eq!(b.va() % 4096, 0);
        b.write(100, b"hello").unwrap();
        // GPU 1 writes into memory owned by GPU 0.
        s.write_value32(b.va() + 200, 0xabcd, WriteValueFlags::DEFAULT)
            .unwrap();
        s.synchronize().unwrap();
        let mut out = [0u8; 5];
        b.read(100, &mut out).unwrap();
        assert_eq!(&out, b"hello");
        assert_eq!(
            b.atomic_u32(200).unwrap().load(Ordering::Acquire),
            0xabcd,
            "{kind:?}"
        );
        assert_eq!(
            b.read(12_288 - 2, &mut out).unwrap_err().kind(),
            ErrorKind::InvalidValue
        );
        assert_eq!(b.atomic_u64(4).unwrap_err().kind(), ErrorKind::InvalidValue);
    }
    assert_eq!(
        dev.alloc(MemoryKind::Device, 0, 0).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        dev.alloc(MemoryKind::Device, 5, 4096).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        dev.alloc(MemoryKind::Userptr, 0, 4096).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
}

#[test]
fn vram_exhaustion_is_out_of_memory_and_memory_comes_back_after_drop() {
    let dev = emu("emu:rx7900xtx");
    let avail = kfd::ioctl::available_memory(dev.backend().as_ref(), dev.gpus()[0].gpu_id).unwrap();
    // Device::available_memory (hipMemGetInfo's free figure) is KFD's, within the VRAM.
    assert_eq!(dev.available_memory(0).unwrap(), avail);
    assert!(avail <= dev.gpus()[0].node.vram_size());
    let e = dev
        .alloc(MemoryKind::Device, 0, avail as usize + (1 << 30))
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfMemory, "{e}");
    assert!(
        e.to_string().contains("AMDKFD_IOC_ALLOC_MEMORY_OF_GPU"),
        "{e}"
    );
    let b = dev.alloc(MemoryKind::Device, 0, 64 << 20).unwrap();
    let during =
        kfd::ioctl::available_memory(dev.backend().as_ref(), dev.gpus()[0].gpu_id).unwrap();
    assert!(during <= avail - (64 << 20), "{during} vs {avail}");
    assert_eq!(dev.available_memory(0).unwrap(), during);
    drop(b);
    let after = kfd::ioctl::available_memory(dev.backend().as_ref(), dev.gpus()[0].gpu_id).unwrap();
    assert_eq!(after, avail);
}

#[test]
fn registered_host_memory_is_written_by_the_gpu() {
    let dev = emu("emu:mi300x");
    let layout = std::alloc::Layout::from_size_align(8192, 4096).unwrap();
    // SAFETY: a fresh page-aligned allocation, freed after the buffer is dropped.
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    assert!(!ptr.is_null());
    {
        // SAFETY: `ptr` is 8 KiB of page-aligned memory that outlives `reg`.
        let reg = unsafe { dev.register_host_memory(ptr, 8192) }.unwrap();
        assert_eq!(reg.kind(), MemoryKind::Userptr);
        let s = dev.create_stream(0).unwrap();
        s.write_value64(
            reg.va() + 4096,
            0x1122_3344_5566_7788,
            WriteValueFlags::DEFAULT,
        )
        .unwrap();
        s.synchronize().unwrap();
        // SAFETY: reading our own allocation.
        let v = unsafe { core::ptr::read_volatile(ptr.add(4096) as *const u64) };
        assert_eq!(v, 0x1122_3344_5566_7788);
        // Any pointer and length: whole pages are registered (here: inside the first
        // registration, whose buffer object is shared), the caller's range is recorded.
        // SAFETY: inside the allocation above, which outlives `sub`.
        let sub = unsafe { dev.register_host_memory(ptr.add(1), 4096) }.unwrap();
        assert_eq!(
            (sub.va(), sub.len(), sub.handle()),
            (reg.va(), 8192, reg.handle())
        );
        assert_eq!((sub.base(), sub.requested_len()), (reg.va() + 1, 4096));
    }
    // SAFETY: allocated above with the same layout; the registration is gone.
    unsafe { std::alloc::dealloc(ptr, layout) };
}

#[test]
fn device_open_errors_name_the_cause() {
    let e = DeviceSpec::parse("gpu9").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidDevice);
    assert!(e.to_string().contains("gpu9"));
    let e = Device::open_spec(&DeviceSpec::parse("emu:nosuchboard").unwrap()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidDevice);
    assert!(e.to_string().contains("nosuchboard"), "{e}");
    let dev = emu("emu:mi300x*2,rx9070xt");
    assert_eq!(dev.gpus().len(), 3);
    assert_eq!(dev.gpus()[2].gfx_name(), "gfx1201");
    assert_eq!(dev.kfd_version(), (1, 22));
    dev.set_wait_spin(Duration::ZERO);
    assert_eq!(dev.wait_spin(), Duration::ZERO);
}

#[test]
fn dropping_the_device_releases_queues_memory_and_events() {
    use std::sync::Arc;
    let emu_backend: Arc<dyn kfd::Backend> =
        Arc::new(kfd_emu::EmuBackend::from_spec("emu:mi210").unwrap());
    let dev = Device::with_backend(emu_backend.clone()).unwrap();
    let gpu_id = dev.gpus()[0].gpu_id;
    let avail = || kfd::ioctl::available_memory(emu_backend.as_ref(), gpu_id).unwrap();
    let initial = avail();
    {
        let mem = dev.alloc(MemoryKind::Device, 0, 8 << 20).unwrap();
        let host = dev.alloc(MemoryKind::HostPinned, 0, 8 << 20).unwrap();
        let s = dev.create_stream(0).unwrap();
        let t = dev.create_stream_with_cu_mask(0, &[0xff]).unwrap();
        let e = dev.create_event(EventFlags::DEFAULT).unwrap();
        s.memcpy(mem.va(), host.va(), 4 << 20).unwrap(); // SDMA queue
        s.wait_value32(host.va(), 0, WaitCompare::Eq, u32::MAX)
            .unwrap(); // dedicated queue
        e.record(&s).unwrap();
        t.wait_event(&e, 0).unwrap();
        s.add_callback(|_| {}, 0).unwrap();
        t.synchronize().unwrap();
        s.synchronize().unwrap();
        assert!(avail() < initial, "VRAM in use while the objects live");
    }
    drop(dev);
    // The callback thread may hold the device for one more loop turn.
    common::wait_until("device teardown", || avail() == initial);
}

/// The old behaviour mapped every device buffer on every GPU; now a GPU that was not given
/// peer access faults on another GPU's VRAM (the emulator's per-GPU page tables), as a
/// `hipMalloc` buffer of device 0 is unreachable from device 1 until
/// `hipDeviceEnablePeerAccess`.
#[test]
fn device_memory_of_another_gpu_faults_without_peer_access() {
    let dev = emu("emu:mi300x*2");
    let v0 = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    assert_eq!(v0.mapped_gpu_ids(), vec![dev.gpus()[0].gpu_id]);
    let s1 = dev.create_stream(1).unwrap();
    // The access the old runtime allowed: a CP write on GPU 1 into GPU 0's VRAM.
    s1.write_value32(v0.va(), 7, WriteValueFlags::DEFAULT)
        .unwrap();
    let e = s1.synchronize().unwrap_err();
    assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
    assert!(e.to_string().contains("fault"), "{e}");
    let mut out = [0u8; 4];
    v0.read(0, &mut out).unwrap();
    assert_eq!(out, [0; 4], "the faulting write did not land");
}

#[test]
fn peer_access_maps_existing_and_later_buffers_and_disable_unmaps() {
    let dev = emu("emu:mi300x*2");
    let (id0, id1) = (dev.gpus()[0].gpu_id, dev.gpus()[1].gpu_id);
    assert!(dev.can_access_peer(1, 0).unwrap());
    assert!(!dev.can_access_peer(0, 0).unwrap());
    assert_eq!(
        dev.can_access_peer(0, 2).unwrap_err().kind(),
        ErrorKind::InvalidDevice
    );
    let before = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    let own1 = dev.alloc(MemoryKind::Device, 1, 4096).unwrap();
    dev.enable_peer_access(1, 0).unwrap();
    assert_eq!(
        dev.enable_peer_access(1, 0).unwrap_err().kind(),
        ErrorKind::PeerAccessAlreadyEnabled
    );
    assert_eq!(
        dev.enable_peer_access(0, 0).unwrap_err().kind(),
        ErrorKind::InvalidDevice
    );
    assert_eq!(
        dev.enable_peer_access(0, 5).unwrap_err().kind(),
        ErrorKind::InvalidDevice
    );
    let after = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    assert_eq!(before.mapped_gpu_ids(), vec![id0, id1]);
    assert_eq!(after.mapped_gpu_ids(), vec![id0, id1]);
    // Access is one-way: GPU 0 still has no access to GPU 1's memory.
    assert_eq!(own1.mapped_gpu_ids(), vec![id1]);

    let s1 = dev.create_stream(1).unwrap();
    s1.write_value32(before.va() + 8, 0x11, WriteValueFlags::DEFAULT)
        .unwrap();
    s1.write_value32(after.va() + 8, 0x22, WriteValueFlags::DEFAULT)
        .unwrap();
    s1.synchronize().unwrap();
    assert_eq!(before.atomic_u32(8).unwrap().load(Ordering::Acquire), 0x11);
    assert_eq!(after.atomic_u32(8).unwrap().load(Ordering::Acquire), 0x22);

    dev.disable_peer_access(1, 0).unwrap();
    assert_eq!(
        dev.disable_peer_access(1, 0).unwrap_err().kind(),
        ErrorKind::PeerAccessNotEnabled
    );
    // A GPU and itself never have peer access: InvalidDevice (as CLR), not "not enabled".
    assert_eq!(
        dev.disable_peer_access(1, 1).unwrap_err().kind(),
        ErrorKind::InvalidDevice
    );
    assert_eq!(before.mapped_gpu_ids(), vec![id0]);
    assert_eq!(after.mapped_gpu_ids(), vec![id0]);
    let later = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    assert_eq!(later.mapped_gpu_ids(), vec![id0]);
    // After disabling, GPU 1's access faults again.
    let s1b = dev.create_stream(1).unwrap();
    s1b.write_value32(before.va() + 8, 0x33, WriteValueFlags::DEFAULT)
        .unwrap();
    assert_eq!(
        s1b.synchronize().unwrap_err().kind(),
        ErrorKind::LaunchFailure
    );
    assert_eq!(before.atomic_u32(8).unwrap().load(Ordering::Acquire), 0x11);
    // Host memory stays mapped everywhere, with or without peer access.
    let host = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    assert_eq!(host.mapped_gpu_ids(), vec![id0, id1]);
}

/// An emulated MI210 without resizable BAR (`[smallbar]`: the CPU sees 256 MiB of its
/// VRAM, KFD reports the VRAM heap FRAME_BUFFER_PRIVATE and refuses CPU-visible VRAM).
fn small_bar_mi210() -> Device {
    let spec = kfdrt::DeviceSpec::parse("emu:mi210[smallbar]").unwrap();
    let dev = Device::open_spec(&spec).unwrap();
    let gpu = dev.gpu(0).unwrap();
    assert!(gpu
        .node
        .mem_banks
        .iter()
        .all(|b| b.heap_type == kfd::topology::HEAP_TYPE_FB_PRIVATE));
    dev
}

/// hipMalloc memory is CPU-visible only on a large-BAR board (ROCr: `HostAccess` unless
/// the heap is FRAME_BUFFER_PRIVATE). On a small-BAR board kfdrt allocates VRAM without
/// `PUBLIC` (the emulated KFD refuses a CPU mapping of such a BO, EPERM, as amdgpu does)
/// and the buffer is GPU-only; on a large-BAR board it is CPU-visible.
#[test]
fn device_memory_is_cpu_visible_only_on_large_bar_boards() {
    let dev = small_bar_mi210();
    let v = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    assert!(!v.is_cpu_visible());
    let mut out = [0u8; 8];
    let e = v.read(0, &mut out).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue);
    assert!(e.to_string().contains("not CPU-visible"), "{e}");
    // The GPU still reaches it: write there, copy to host memory, read on the CPU.
    let host = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    let s = dev.create_stream(0).unwrap();
    s.write_value32(v.va() + 16, 0x5eed, WriteValueFlags::DEFAULT)
        .unwrap();
    s.memcpy(host.va(), v.va(), 64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(host.atomic_u32(16).unwrap().load(Ordering::Acquire), 0x5eed);

    // The large-BAR emulated board: the same allocation is CPU-visible.
    let dev = emu("emu:mi210");
    let v = dev.alloc(MemoryKind::Device, 0, 4096).unwrap();
    assert!(v.is_cpu_visible());
    v.write(0, b"visible!").unwrap();
    v.read(0, &mut out).unwrap();
    assert_eq!(&out, b"visible!");
}

/// A code object on a small-BAR board: the loader cannot write the VRAM image from the
/// CPU, so it goes through the pinned staging buffers and a GPU copy; the kernel then runs
/// from that image.
#[test]
fn code_object_loads_into_vram_the_cpu_cannot_see() {
    let dev = small_bar_mi210();
    // Initialised globals and a relocated pointer reach VRAM through the staged copy.
    let elf = test_kernels::build("cl/globals.cl", "gfx90a").unwrap();
    let g = dev.load_module(0, &elf).unwrap();
    assert!(g.staged(), "the image went through GTT staging");
    assert_eq!(g.memory_kind(), MemoryKind::Device);
    let bump = g.kernel("bump").unwrap();
    let gout = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
    let mut gargs = bump.args();
    gargs.buffer(&gout).unwrap();
    let s = dev.create_stream(0).unwrap();
    s.launch(&bump, 1, 64, 0, &gargs).unwrap();
    s.synchronize().unwrap();
    let (counter, _) = g.global("counter").unwrap();
    let word = |i: usize| gout.atomic_u32(4 * i).unwrap().load(Ordering::Acquire);
    assert_eq!(word(0), 42, "counter = 41 + 1");
    assert_eq!(u64::from(word(1)) | u64::from(word(2)) << 32, counter);
    // The large-BAR board writes the image through the BAR.
    let m = emu("emu:mi210").load_module(0, &elf).unwrap();
    assert!(!m.staged());

    let elf = test_kernels::build("cl/vadd.cl", "gfx90a").unwrap();
    let m = dev.load_module(0, &elf).unwrap();
    assert!(m.staged());
    let k = m.kernel("vadd").unwrap();
    let n = 300u32;
    let bytes = 4 * n as usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.25).collect();
    let b: Vec<f32> = (0..n).map(|i| 7.0 - i as f32).collect();
    let pinned = |v: &[f32]| {
        let buf = dev.alloc(MemoryKind::HostPinned, 0, bytes).unwrap();
        buf.write(0, zerocopy::IntoBytes::as_bytes(v)).unwrap();
        buf
    };
    let (ba, bb, bc) = (pinned(&a), pinned(&b), pinned(&vec![0.0; n as usize]));
    let mut args = k.args();
    args.buffer(&ba)
        .and_then(|x| x.buffer(&bb))
        .and_then(|x| x.buffer(&bc))
        .and_then(|x| x.arg(&n))
        .unwrap();
    s.launch(&k, n.div_ceil(64), 64, 0, &args).unwrap();
    s.synchronize().unwrap();
    let mut out = vec![0u8; bytes];
    bc.read(0, &mut out).unwrap();
    let got: Vec<f32> = out
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(got, want);
}
