//! dmabuf export/import/info, within one process and across two processes (the test
//! binary re-executes itself in a child mode, passing the dmabuf fd by inheritance).

mod kfd_common;

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;

use kfd::abi;
use kfd::{ioctl, Errno};
use kfd_common::{alloc, cpu_map, errno, gpu_map, open, Dev, Reservation};

const CHILD_ENV: &str = "KFD_EMU_DMABUF_CHILD_FD";
const SIZE: u64 = 1 << 20;
const O_CLOEXEC: u32 = 0o2000000;

fn pattern(i: u64) -> u64 {
    i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x0123_4567
}

#[test]
fn export_import_info_in_one_process() {
    let dev = open("emu:mi300x,mi210");
    let b = dev.b();
    let r = Reservation::new(8 << 20, 2 << 20);
    let flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let a = alloc(&dev, 0, r.base, SIZE, flags).unwrap();
    let p = cpu_map(&dev, 0, &a).unwrap();
    // SAFETY: mapped.
    unsafe { p.cast::<u64>().write_volatile(77) };
    let fd = ioctl::export_dmabuf(b, a.handle, O_CLOEXEC).unwrap();
    // SAFETY: the fd was just created for us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let flags_now = rustix::io::fcntl_getfd(&fd).unwrap();
    assert!(flags_now.contains(rustix::io::FdFlags::CLOEXEC));
    let info = ioctl::get_dmabuf_info(b, fd.as_raw_fd()).unwrap();
    assert_eq!(info.size, SIZE);
    assert_eq!(info.gpu_id, dev.gpus[0]);
    assert_eq!(
        info.flags,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC
    );
    // Import on the other GPU at another VA: the same pages.
    let h = ioctl::import_dmabuf(b, dev.gpus[1], fd.as_raw_fd(), r.base + (4 << 20)).unwrap();
    assert_eq!(h >> 32, u64::from(dev.gpus[1]));
    gpu_map(&dev, h, &[1]).unwrap();
    let w = dev
        .emu
        .gpu_memory()
        .resolve(dev.gpus[1], r.base + (4 << 20), 8)
        .unwrap();
    assert_eq!(w.load_u64(r.base + (4 << 20)).unwrap(), 77);
    w.store_u64(r.base + (4 << 20) + 8, 78).unwrap();
    // SAFETY: mapped.
    assert_eq!(unsafe { p.cast::<u64>().add(1).read_volatile() }, 78);

    // Errors.
    assert_eq!(
        errno(ioctl::export_dmabuf(b, 0x7777_0000_0000, 0)),
        Errno::INVAL,
        "unknown GPU"
    );
    assert_eq!(
        errno(ioctl::export_dmabuf(b, a.handle + 50, 0)),
        Errno::INVAL,
        "unknown handle"
    );
    assert_eq!(errno(ioctl::get_dmabuf_info(b, -1)), Errno::BADF);
    assert_eq!(errno(ioctl::get_dmabuf_info(b, 999_999)), Errno::BADF);
    let not_dmabuf = std::fs::File::open("/proc/self/stat").unwrap();
    assert_eq!(
        errno(ioctl::get_dmabuf_info(b, not_dmabuf.as_raw_fd())),
        Errno::INVAL
    );
    assert_eq!(
        errno(ioctl::import_dmabuf(
            b,
            dev.gpus[0],
            not_dmabuf.as_raw_fd(),
            0x7000_0000
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(ioctl::import_dmabuf(b, dev.gpus[0], 999_999, 0x7000_0000)),
        Errno::BADF
    );
    assert_eq!(
        errno(ioctl::import_dmabuf(b, 0x4242, fd.as_raw_fd(), 0x7000_0000)),
        Errno::INVAL
    );
    // A plain memfd is not a dmabuf either.
    let m = rustix::fs::memfd_create("x", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&m, 4096).unwrap();
    assert_eq!(
        errno(ioctl::get_dmabuf_info(b, m.as_raw_fd())),
        Errno::INVAL
    );
    // Import needs a VM.
    let fresh = kfd_emu::EmuBackend::from_spec("emu:mi300x").unwrap();
    let g = fresh.gpu_ids()[0];
    assert_eq!(
        errno(ioctl::import_dmabuf(&fresh, g, fd.as_raw_fd(), 0x7000_0000)),
        Errno::NODEV
    );
}

/// Parent: export a BO, spawn this test again as a child with the fd inherited; the child
/// imports, checks the bytes through its own GPU view and a CPU mmap of the dmabuf, and
/// writes a reply through its GPU view, which the parent then reads.
#[test]
fn dmabuf_across_processes() {
    if let Ok(fd) = std::env::var(CHILD_ENV) {
        child(fd.parse().expect("fd number"));
        return;
    }
    let dev = open("emu:mi210");
    let b = dev.b();
    let r = Reservation::new(4 << 20, 2 << 20);
    let flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let a = alloc(&dev, 0, r.base, SIZE, flags).unwrap();
    let p = cpu_map(&dev, 0, &a).unwrap().cast::<u64>();
    for i in 0..SIZE / 8 {
        // SAFETY: within the mapped BO.
        unsafe { p.add(i as usize).write_volatile(pattern(i)) };
    }
    // Without O_CLOEXEC the fd is inherited by the child.
    let raw = ioctl::export_dmabuf(b, a.handle, 0).unwrap();
    // SAFETY: the fd was just created for us.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "dmabuf_across_processes",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, raw.to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("CHILD-OK"), "{stdout}");
    drop(fd);
    // The child's reply, written through its GPU view of the imported BO.
    for i in 0..16u64 {
        // SAFETY: within the mapped BO.
        assert_eq!(
            unsafe { p.add(i as usize).read_volatile() },
            !pattern(i),
            "word {i}"
        );
    }
    // SAFETY: as above.
    assert_eq!(
        unsafe { p.add(16).read_volatile() },
        pattern(16),
        "untouched words keep their value"
    );
}

fn child(fd: i32) {
    let dev: Dev = open("emu:mi210");
    let b = dev.b();
    let info = ioctl::get_dmabuf_info(b, fd).unwrap();
    assert_eq!(info.size, SIZE);
    assert_eq!(info.gpu_id, dev.gpus[0], "same spec, same gpu_id");
    assert_eq!(
        info.flags & abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT
    );
    let r = Reservation::new(4 << 20, 2 << 20);
    let va = r.base + (2 << 20);
    let h = ioctl::import_dmabuf(b, dev.gpus[0], fd, va).unwrap();
    gpu_map(&dev, h, &[0]).unwrap();
    let w = dev.emu.gpu_memory().resolve(dev.gpus[0], va, SIZE).unwrap();
    for i in 0..SIZE / 8 {
        assert_eq!(
            w.load_u64(va + i * 8).unwrap(),
            pattern(i),
            "GPU view, word {i}"
        );
    }
    // The CPU maps the dmabuf itself.
    // SAFETY: a fresh shared mapping of the inherited fd.
    let cpu = unsafe {
        let borrowed = std::os::fd::BorrowedFd::borrow_raw(fd);
        rustix::mm::mmap(
            core::ptr::null_mut(),
            SIZE as usize,
            rustix::mm::ProtFlags::READ,
            rustix::mm::MapFlags::SHARED,
            borrowed,
            0,
        )
    }
    .unwrap()
    .cast::<u64>();
    // SAFETY: mapped above.
    assert_eq!(unsafe { cpu.add(1000).read_volatile() }, pattern(1000));
    for i in 0..16u64 {
        w.store_u64(va + i * 8, !pattern(i)).unwrap();
    }
    // SAFETY: the CPU mapping sees the GPU's write.
    assert_eq!(unsafe { cpu.read_volatile() }, !pattern(0));
    println!("CHILD-OK size={} gpu={:#x}", info.size, info.gpu_id);
}
