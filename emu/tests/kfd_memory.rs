//! Memory objects: ALLOC/FREE/MAP/UNMAP with the kernel's errno values, render-node and
//! `/dev/kfd` mmaps, CPU and GPU views of the same bytes, USERPTR, DOORBELL, MMIO.

mod kfd_common;

use std::os::fd::AsFd;

use kfd::abi::{self, AllocMemoryOfGpuArgs};
use kfd::{ioctl, Errno, MmapFile, Prot};
use kfd_common::{alloc, cpu_map, errno, gpu_map, gtt, open, vram, Reservation};

const GTT: u32 = abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
const VRAM: u32 = abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
const MIB: u64 = 1 << 20;

fn gpu_read_u64(dev: &kfd_common::Dev, gpu: usize, va: u64) -> Result<u64, kfd_emu::gpumem::Fault> {
    let mem = dev.emu.gpu_memory();
    mem.resolve(dev.gpus[gpu], va, 8)?.load_u64(va)
}

#[test]
fn cpu_and_gpu_see_the_same_bytes() {
    let dev = open("emu:mi300x");
    let r = Reservation::new(8 * MIB as usize, 2 * MIB as usize);
    let (_h, p) = gtt(&dev, 0, r.base, 2 * MIB);
    let (_hv, pv) = vram(&dev, 0, r.base + 2 * MIB, 2 * MIB);
    // SAFETY: both BOs are mapped read-write at these addresses.
    unsafe {
        p.cast::<u64>().add(3).write_volatile(0x1122_3344_5566_7788);
        pv.cast::<u64>().write_volatile(42);
    }
    assert_eq!(
        gpu_read_u64(&dev, 0, r.base + 24).unwrap(),
        0x1122_3344_5566_7788
    );
    assert_eq!(gpu_read_u64(&dev, 0, r.base + 2 * MIB).unwrap(), 42);
    // The GPU writes, the CPU reads.
    let mem = dev.emu.gpu_memory();
    let w = mem.resolve(dev.gpus[0], r.base + 64, 8).unwrap();
    w.store_u64(r.base + 64, 0xfeed).unwrap();
    // SAFETY: mapped.
    assert_eq!(unsafe { p.cast::<u64>().add(8).read_volatile() }, 0xfeed);
    // Nothing is mapped in the gap or past the end.
    assert!(mem.resolve(dev.gpus[0], r.base + 4 * MIB, 8).is_err());
    assert!(
        mem.resolve(dev.gpus[0], r.base + 2 * MIB - 4, 8).is_err(),
        "straddles two BOs"
    );
}

#[test]
fn alloc_errors() {
    let dev = open("emu:mi210[vram=64M]");
    let b = dev.b();
    let g = dev.gpus[0];
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: 0x4000_0000,
        size: 0,
        gpu_id: g,
        flags: GTT,
        ..Default::default()
    };
    assert_eq!(
        errno(ioctl::alloc_memory_of_gpu(b, &mut a)),
        Errno::INVAL,
        "size 0"
    );
    a.size = 4096;
    a.gpu_id = 0x4321;
    assert_eq!(
        errno(ioctl::alloc_memory_of_gpu(b, &mut a)),
        Errno::INVAL,
        "unknown GPU"
    );
    a.gpu_id = g;
    a.flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    assert_eq!(
        errno(ioctl::alloc_memory_of_gpu(b, &mut a)),
        Errno::INVAL,
        "no domain"
    );
    a.flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL;
    assert_eq!(
        errno(ioctl::alloc_memory_of_gpu(b, &mut a)),
        Errno::INVAL,
        "doorbell size != slice"
    );
    a.flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP;
    a.size = 8192;
    assert_eq!(
        errno(ioctl::alloc_memory_of_gpu(b, &mut a)),
        Errno::INVAL,
        "mmio size != page"
    );
    a.flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_USERPTR;
    a.mmap_offset = 0;
    assert_eq!(
        errno(ioctl::alloc_memory_of_gpu(b, &mut a)),
        Errno::INVAL,
        "userptr without address"
    );
    // VRAM capacity: 64 MiB.
    let big = alloc(&dev, 0, 0x4000_0000, 60 * MIB, VRAM).unwrap();
    assert_eq!(
        errno(alloc(&dev, 0, 0x8000_0000, 8 * MIB, VRAM)),
        Errno::NOMEM
    );
    let small = alloc(&dev, 0, 0x8000_0000, 4 * MIB, VRAM).unwrap();
    assert_eq!(errno(alloc(&dev, 0, 0x9000_0000, 4096, VRAM)), Errno::NOMEM);
    // A page-aligned size near 2^64: ENOMEM, not an overflow in the charge's alignment.
    assert_eq!(
        errno(alloc(&dev, 0, 0x9000_0000, u64::MAX - 0xfff, VRAM)),
        Errno::NOMEM
    );
    ioctl::free_memory_of_gpu(b, big.handle).unwrap();
    alloc(&dev, 0, 0x9000_0000, 4096, VRAM).unwrap();
    ioctl::free_memory_of_gpu(b, small.handle).unwrap();
}

#[test]
fn handles_and_offsets() {
    let dev = open("emu:mi210*2");
    let a = alloc(&dev, 0, 0x4000_0000, 4096, GTT).unwrap();
    let b2 = alloc(&dev, 0, 0x4000_1000, 8192, GTT).unwrap();
    let c = alloc(&dev, 1, 0x4000_4000, 4096, VRAM).unwrap();
    assert_eq!(a.handle >> 32, u64::from(dev.gpus[0]));
    assert_eq!(c.handle >> 32, u64::from(dev.gpus[1]));
    assert_ne!(a.handle, b2.handle);
    // DRM-style fake offsets: page aligned, at or above 4 GiB, distinct.
    for x in [&a, &b2, &c] {
        assert_eq!(x.mmap_offset % 4096, 0);
        assert!(x.mmap_offset >= 1 << 32);
        assert_eq!(x.mmap_offset >> 62, 0);
    }
    assert!(b2.mmap_offset >= a.mmap_offset + 4096);
    assert_ne!(c.mmap_offset, b2.mmap_offset);
    // Freed ids are reused, lowest first.
    ioctl::free_memory_of_gpu(dev.b(), a.handle).unwrap();
    let d = alloc(&dev, 0, 0x4000_0000, 4096, GTT).unwrap();
    assert_eq!(d.handle, a.handle);
    // MMIO: a /dev/kfd offset with the MMIO type and the gpu_id.
    let m = alloc(
        &dev,
        1,
        0x5000_0000,
        4096,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
    )
    .unwrap();
    assert_eq!(
        m.mmap_offset,
        abi::KFD_MMAP_TYPE_MMIO | abi::kfd_mmap_gpu_id(dev.gpus[1])
    );
}

#[test]
fn free_rules() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let r = Reservation::new(4 * MIB as usize, 2 * MIB as usize);
    let (h, _) = gtt(&dev, 0, r.base, MIB);
    // Still mapped: EBUSY.
    assert_eq!(errno(ioctl::free_memory_of_gpu(b, h)), Errno::BUSY);
    let mut n = 0;
    ioctl::unmap_memory_from_gpu(b, h, &[dev.gpus[0]], &mut n).unwrap();
    ioctl::free_memory_of_gpu(b, h).unwrap();
    assert_eq!(
        errno(ioctl::free_memory_of_gpu(b, h)),
        Errno::INVAL,
        "already freed"
    );
    assert_eq!(
        errno(ioctl::free_memory_of_gpu(b, 0x1234_0000_0000)),
        Errno::INVAL,
        "unknown GPU"
    );
    assert_eq!(errno(ioctl::free_memory_of_gpu(b, 0)), Errno::INVAL);
}

#[test]
fn map_unmap_with_n_success() {
    let dev = open("emu:mi210*3");
    let b = dev.b();
    let r = Reservation::new(4 * MIB as usize, 2 * MIB as usize);
    let a = alloc(&dev, 0, r.base, MIB, GTT).unwrap();
    let ids = [dev.gpus[0], dev.gpus[1], 0xbad, dev.gpus[2]];
    let mut n = 0;
    assert_eq!(
        errno(ioctl::map_memory_to_gpu(b, a.handle, &ids, &mut n)),
        Errno::INVAL
    );
    assert_eq!(n, 2, "two GPUs mapped before the bad id");
    // Resume past the bad entry.
    n = 3;
    ioctl::map_memory_to_gpu(b, a.handle, &ids, &mut n).unwrap();
    assert_eq!(n, 4);
    for i in 0..3 {
        assert!(
            dev.emu.gpu_memory().resolve(dev.gpus[i], r.base, 8).is_ok(),
            "mapped on GPU {i}"
        );
    }
    // n_success > n_devices, no devices.
    n = 5;
    assert_eq!(
        errno(ioctl::map_memory_to_gpu(b, a.handle, &ids, &mut n)),
        Errno::INVAL
    );
    n = 0;
    assert_eq!(
        errno(ioctl::map_memory_to_gpu(b, a.handle, &[], &mut n)),
        Errno::INVAL
    );
    // Unknown handle on a known GPU: ENOMEM (kfd_ioctl_map_memory_to_gpu).
    let bad = (u64::from(dev.gpus[0]) << 32) | 77;
    assert_eq!(
        errno(ioctl::map_memory_to_gpu(b, bad, &ids[..1], &mut n)),
        Errno::NOMEM
    );
    assert_eq!(
        errno(ioctl::unmap_memory_from_gpu(b, bad, &ids[..1], &mut n)),
        Errno::NOMEM
    );
    // Mapping twice is harmless.
    ioctl::map_memory_to_gpu(b, a.handle, &ids[..1], &mut n).unwrap();
    // Unmap with the same resumption rules.
    n = 0;
    assert_eq!(
        errno(ioctl::unmap_memory_from_gpu(b, a.handle, &ids, &mut n)),
        Errno::INVAL
    );
    assert_eq!(n, 2);
    n = 3;
    ioctl::unmap_memory_from_gpu(b, a.handle, &ids, &mut n).unwrap();
    for i in 0..3 {
        assert!(
            dev.emu
                .gpu_memory()
                .resolve(dev.gpus[i], r.base, 8)
                .is_err(),
            "unmapped on GPU {i}"
        );
    }
    // Unmapping again, or from a GPU the BO was never mapped on, is EINVAL.
    n = 0;
    assert_eq!(
        errno(ioctl::unmap_memory_from_gpu(b, a.handle, &ids[..2], &mut n)),
        Errno::INVAL
    );
    assert_eq!(n, 0);
    let c = alloc(&dev, 0, r.base + 2 * MIB, 4096, GTT).unwrap();
    n = 0;
    assert_eq!(
        errno(ioctl::unmap_memory_from_gpu(b, c.handle, &ids[..1], &mut n)),
        Errno::INVAL
    );
    ioctl::free_memory_of_gpu(b, a.handle).unwrap();
}

#[test]
fn map_checks_the_va() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let mut n = 0;
    let ids = [dev.gpus[0]];
    // Below the GPUVM aperture, unaligned, past the end: EINVAL.
    for va in [0x1000u64, 0x4000_0100, (1 << 47) - 4096] {
        let a = alloc(&dev, 0, va, 8192, GTT).unwrap();
        n = 0;
        assert_eq!(
            errno(ioctl::map_memory_to_gpu(b, a.handle, &ids, &mut n)),
            Errno::INVAL,
            "{va:#x}"
        );
    }
    // Overlapping another mapping: EINVAL.
    let a = alloc(&dev, 0, 0x5000_0000, 8192, GTT).unwrap();
    let c = alloc(&dev, 0, 0x5000_1000, 8192, GTT).unwrap();
    ioctl::map_memory_to_gpu(b, a.handle, &ids, &mut n).unwrap();
    n = 0;
    assert_eq!(
        errno(ioctl::map_memory_to_gpu(b, c.handle, &ids, &mut n)),
        Errno::INVAL
    );
}

#[test]
fn render_node_mmap_rules() {
    let dev = open("emu:mi210*2");
    let b = dev.b();
    let r = Reservation::new(8 * MIB as usize, 2 * MIB as usize);
    // VRAM without PUBLIC is mappable: KFD never sets NO_CPU_ACCESS (libhsakmt maps
    // every VRAM BO, PROT_NONE when the BO has no host access).
    let private = alloc(&dev, 0, r.base, MIB, VRAM).unwrap();
    cpu_map(&dev, 0, &private).expect("VRAM without PUBLIC maps");
    let a = alloc(&dev, 0, r.base + 2 * MIB, MIB, GTT).unwrap();
    // Another GPU's render node: EACCES.
    assert_eq!(cpu_map(&dev, 1, &a).unwrap_err(), Errno::ACCESS);
    // A length past the BO, an offset that is not a BO's start.
    // SAFETY: invalid requests map nothing.
    unsafe {
        let f = MmapFile::Render(dev.render[0].as_fd());
        assert_eq!(
            b.mmap(f, a.mmap_offset, 2 * MIB as usize, None, Prot::READ)
                .unwrap_err(),
            Errno::INVAL
        );
        assert_eq!(
            b.mmap(f, a.mmap_offset + 4096, 4096, None, Prot::READ)
                .unwrap_err(),
            Errno::INVAL
        );
        assert_eq!(
            b.mmap(f, 0, 4096, None, Prot::READ).unwrap_err(),
            Errno::INVAL
        );
        // Without a fixed address the kernel picks one; the bytes are the BO's.
        let p = b
            .mmap(f, a.mmap_offset, 4096, None, Prot::READ | Prot::WRITE)
            .unwrap();
        let q = cpu_map(&dev, 0, &a).unwrap();
        p.as_ptr().cast::<u32>().write_volatile(0x5a5a);
        assert_eq!(q.cast::<u32>().read_volatile(), 0x5a5a);
        b.munmap(p, 4096).unwrap();
    }
    // A file that is not a render node.
    let f = std::fs::File::open("/proc/self/stat").unwrap();
    // SAFETY: nothing is mapped.
    let e = unsafe {
        b.mmap(
            MmapFile::Render(f.as_fd()),
            a.mmap_offset,
            4096,
            None,
            Prot::READ,
        )
    };
    assert_eq!(e.unwrap_err(), Errno::INVAL);
}

#[test]
fn doorbell_and_mmio_mmaps() {
    let dev = open("emu:mi300x");
    let b = dev.b();
    let g = dev.gpus[0];
    let off = abi::KFD_MMAP_TYPE_DOORBELL | abi::kfd_mmap_gpu_id(g);
    // SAFETY: the mappings are fresh (no fixed address) and unmapped below.
    unsafe {
        assert_eq!(
            b.mmap(MmapFile::Kfd, off, 4096, None, Prot::WRITE)
                .unwrap_err(),
            Errno::INVAL
        );
        let bad = abi::KFD_MMAP_TYPE_DOORBELL | abi::kfd_mmap_gpu_id(0x77);
        assert_eq!(
            b.mmap(MmapFile::Kfd, bad, 8192, None, Prot::WRITE)
                .unwrap_err(),
            Errno::NODEV
        );
        let db = b
            .mmap(MmapFile::Kfd, off, 8192, None, Prot::READ | Prot::WRITE)
            .unwrap();
        // A DOORBELL BO aliases the same page.
        let r = Reservation::new(2 * MIB as usize, 2 * MIB as usize);
        let a = alloc(
            &dev,
            0,
            r.base,
            8192,
            abi::KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        )
        .unwrap();
        let p = cpu_map(&dev, 0, &a).unwrap();
        db.as_ptr().cast::<u64>().add(5).write_volatile(99);
        assert_eq!(p.cast::<u64>().add(5).read_volatile(), 99);
        b.munmap(db, 8192).unwrap();

        let mmio = abi::KFD_MMAP_TYPE_MMIO | abi::kfd_mmap_gpu_id(g);
        assert_eq!(
            b.mmap(MmapFile::Kfd, mmio, 8192, None, Prot::READ)
                .unwrap_err(),
            Errno::INVAL
        );
        assert_eq!(
            b.mmap(
                MmapFile::Kfd,
                abi::KFD_MMAP_TYPE_MMIO,
                4096,
                None,
                Prot::READ
            )
            .unwrap_err(),
            Errno::NODEV
        );
        let m = b
            .mmap(MmapFile::Kfd, mmio, 4096, None, Prot::READ | Prot::WRITE)
            .unwrap();
        b.munmap(m, 4096).unwrap();
        // The event page does not exist before the first signal event.
        assert_eq!(
            b.mmap(
                MmapFile::Kfd,
                abi::KFD_MMAP_TYPE_EVENTS,
                32768,
                None,
                Prot::READ
            )
            .unwrap_err(),
            Errno::INVAL
        );
    }
}

#[test]
fn userptr() {
    let dev = open("emu:mi210");
    let b = dev.b();
    let len = 3 * 4096;
    let mut buf = vec![0u8; len + 4096];
    let addr = (buf.as_mut_ptr() as u64).div_ceil(4096) * 4096;
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: addr,
        size: len as u64,
        mmap_offset: addr,
        gpu_id: dev.gpus[0],
        flags: abi::KFD_IOC_ALLOC_MEM_FLAGS_USERPTR | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE,
        ..Default::default()
    };
    ioctl::alloc_memory_of_gpu(b, &mut a).unwrap();
    gpu_map(&dev, a.handle, &[0]).unwrap();
    // SAFETY: `addr..addr+len` is inside `buf`.
    unsafe { (addr as *mut u64).add(100).write_volatile(7) };
    assert_eq!(gpu_read_u64(&dev, 0, addr + 800).unwrap(), 7);
    let w = dev
        .emu
        .gpu_memory()
        .resolve(dev.gpus[0], addr + 8, 8)
        .unwrap();
    w.store_u64(addr + 8, 0xabc).unwrap();
    // SAFETY: as above.
    assert_eq!(
        unsafe { (addr as *const u64).add(1).read_volatile() },
        0xabc
    );
    // USERPTR BOs cannot be mmapped through the render node.
    assert_eq!(cpu_map(&dev, 0, &a).unwrap_err(), Errno::PERM);
    // Nor exported.
    assert_eq!(errno(ioctl::export_dmabuf(b, a.handle, 0)), Errno::PERM);
    let mut n = 0;
    ioctl::unmap_memory_from_gpu(b, a.handle, &dev.gpus[..1], &mut n).unwrap();
    ioctl::free_memory_of_gpu(b, a.handle).unwrap();
    drop(buf);

    // Unmapped user memory: EFAULT. Unaligned: EINVAL.
    let r = Reservation::new(2 * MIB as usize, 2 * MIB as usize);
    let mut u = AllocMemoryOfGpuArgs {
        va_addr: r.base,
        size: 4096,
        mmap_offset: r.base,
        gpu_id: dev.gpus[0],
        flags: abi::KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
        ..Default::default()
    };
    // A PROT_NONE reservation is mapped but not accessible: EFAULT, like a hole.
    assert_eq!(errno(ioctl::alloc_memory_of_gpu(b, &mut u)), Errno::FAULT);
    let hole = r.base + 8 * MIB * 1024;
    u.va_addr = hole;
    u.mmap_offset = hole;
    assert_eq!(errno(ioctl::alloc_memory_of_gpu(b, &mut u)), Errno::FAULT);
    u.mmap_offset = r.base + 12;
    assert_eq!(errno(ioctl::alloc_memory_of_gpu(b, &mut u)), Errno::INVAL);
}

#[test]
fn gtt_bo_fixed_mapping_over_reservation() {
    let dev = open("emu:rx7900xtx");
    let r = Reservation::new(4 * MIB as usize, 2 * MIB as usize);
    let a = alloc(&dev, 0, r.base, 3 * 4096, GTT).unwrap();
    let p = cpu_map(&dev, 0, &a).unwrap();
    assert_eq!(p as u64, r.base, "GPU VA == CPU VA");
    // SAFETY: mapped.
    unsafe {
        let s = std::slice::from_raw_parts(p, 3 * 4096);
        assert!(s.iter().all(|b| *b == 0), "new BOs are zeroed");
    }
}

/// Free a BO the way the runtime does: GPU unmap, CPU mapping replaced by the reservation's
/// PROT_NONE pages, FREE.
fn release(dev: &kfd_common::Dev, handle: u64, va: u64, size: u64) {
    let mut n = 0;
    ioctl::unmap_memory_from_gpu(dev.b(), handle, &[dev.gpus[0]], &mut n).unwrap();
    // SAFETY: the range is the test's own reservation, mapped by the BO until now.
    unsafe {
        rustix::mm::mmap_anonymous(
            va as *mut core::ffi::c_void,
            size as usize,
            rustix::mm::ProtFlags::empty(),
            rustix::mm::MapFlags::PRIVATE
                | rustix::mm::MapFlags::NORESERVE
                | rustix::mm::MapFlags::FIXED,
        )
        .unwrap();
    }
    ioctl::free_memory_of_gpu(dev.b(), handle).unwrap();
}

/// A BO freed and allocated again at the same VA (a stream-ordered pool's release and
/// regrowth) gets fresh memory: zeros for the CPU and the GPU, the old bytes gone, and the
/// charge given back at FREE. An exported BO's pages stay with the dmabuf.
#[test]
fn realloc_at_the_same_va_is_fresh_and_exports_keep_their_pages() {
    let dev = open("emu:mi250x");
    let size = 4 * MIB;
    let r = Reservation::new(size as usize, 2 * MIB as usize);
    let avail = || ioctl::available_memory(dev.b(), dev.gpus[0]).unwrap();
    let before = avail();
    for round in 0..3u64 {
        let (h, p) = vram(&dev, 0, r.base, size);
        assert_eq!(before - avail(), size, "round {round}: charged");
        assert_eq!(
            gpu_read_u64(&dev, 0, r.base + 8).unwrap(),
            0,
            "round {round}"
        );
        // SAFETY: mapped read-write.
        assert_eq!(unsafe { p.cast::<u64>().add(1).read_volatile() }, 0);
        // SAFETY: as above.
        unsafe { p.cast::<u64>().add(1).write_volatile(0xabc0 + round) };
        assert_eq!(gpu_read_u64(&dev, 0, r.base + 8).unwrap(), 0xabc0 + round);
        release(&dev, h, r.base, size);
        assert_eq!(avail(), before, "round {round}: FREE gave the charge back");
    }
    // Exported: the dmabuf keeps the BO's pages after FREE; the next BO at the VA does not
    // share them.
    let (h, p) = vram(&dev, 0, r.base, size);
    // SAFETY: mapped read-write.
    unsafe { p.cast::<u64>().write_volatile(0x5eed) };
    let raw = ioctl::export_dmabuf(dev.b(), h, 0o2000000).unwrap();
    // SAFETY: the fd was just created for us.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(raw) };
    release(&dev, h, r.base, size);
    let (h2, p2) = vram(&dev, 0, r.base, size);
    // SAFETY: mapped read-write.
    assert_eq!(unsafe { p2.cast::<u64>().read_volatile() }, 0);
    // SAFETY: as above.
    unsafe { p2.cast::<u64>().write_volatile(0x7777) };
    // SAFETY: a fresh shared read-only mapping of the exported memfd, unmapped below.
    let q = unsafe {
        rustix::mm::mmap(
            core::ptr::null_mut(),
            4096,
            rustix::mm::ProtFlags::READ,
            rustix::mm::MapFlags::SHARED,
            &fd,
            0,
        )
    }
    .unwrap();
    // SAFETY: mapped above.
    assert_eq!(unsafe { q.cast::<u64>().read_volatile() }, 0x5eed);
    // SAFETY: our own mapping.
    unsafe { rustix::mm::munmap(q, 4096) }.unwrap();
    release(&dev, h2, r.base, size);
}

/// A BO also CPU-mapped at a second address (render-node mmap without a fixed address): that
/// mapping outlives FREE, so the next BO at the same VA must not get the same memfd — its
/// writes do not show through the old mapping, and the old mapping's bytes not in it.
#[test]
fn a_second_cpu_mapping_does_not_alias_the_next_bo_at_the_va() {
    let dev = open("emu:mi250x");
    let size = 2 * MIB;
    let r = Reservation::new(size as usize, 2 * MIB as usize);
    let flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    let a = alloc(&dev, 0, r.base, size, flags).expect("alloc");
    let p = cpu_map(&dev, 0, &a).expect("cpu map");
    gpu_map(&dev, a.handle, &[0]).expect("gpu map");
    // SAFETY: a mapping of the BO wherever the kernel puts it, unmapped below.
    let second = unsafe {
        dev.b().mmap(
            MmapFile::Render(dev.render[0].as_fd()),
            a.mmap_offset,
            size as usize,
            None,
            Prot::READ | Prot::WRITE,
        )
    }
    .expect("second mapping")
    .as_ptr()
    .cast::<u64>();
    assert_ne!(second as u64, r.base);
    // SAFETY: both map the BO read-write.
    unsafe { p.cast::<u64>().write_volatile(0x1111) };
    // SAFETY: as above.
    assert_eq!(unsafe { second.read_volatile() }, 0x1111);
    release(&dev, a.handle, r.base, size);
    let (h2, p2) = vram(&dev, 0, r.base, size);
    // SAFETY: mapped read-write.
    assert_eq!(
        unsafe { p2.cast::<u64>().read_volatile() },
        0,
        "new BO is fresh"
    );
    // SAFETY: as above.
    unsafe { p2.cast::<u64>().write_volatile(0x2222) };
    assert_eq!(gpu_read_u64(&dev, 0, r.base).unwrap(), 0x2222);
    // SAFETY: the second mapping still maps the freed BO's memfd.
    assert_eq!(
        unsafe { second.read_volatile() },
        0x1111,
        "the old mapping aliases the new BO"
    );
    // SAFETY: our own mapping of the freed BO.
    unsafe { rustix::mm::munmap(second.cast(), size as usize) }.unwrap();
    release(&dev, h2, r.base, size);
}
