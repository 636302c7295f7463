//! Memory-pool IPC between two real processes: the parent exports an IPC pool (a dmabuf
//! fd inherited by a child process) and pointers; the child imports them, reads what the
//! parent wrote, writes back with its own GPU, and fails cleanly on a freed pointer.

mod common;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use kfdrt::{ErrorKind, HandleType, PoolAttr, PoolProps, PtrExportData, WriteValueFlags};

const CHILD_ENV: &str = "KFDRT_MEMPOOL_IPC_CHILD";

fn hex(d: &PtrExportData) -> String {
    d.reserved.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> PtrExportData {
    let mut reserved = [0u8; 64];
    for (i, r) in reserved.iter_mut().enumerate() {
        *r = u8::from_str_radix(&s[i * 2..i * 2 + 2], 16).unwrap();
    }
    PtrExportData { reserved }
}

fn cell(addr: u64) -> &'static AtomicU32 {
    // SAFETY: `addr` is a live, CPU-mapped, 4-byte aligned pool allocation kept alive by
    // the caller while the reference is used.
    unsafe { AtomicU32::from_ptr(addr as *mut u32) }
}

/// Child mode: import the pool from the inherited fd and check the pointers.
fn child(spec: String) {
    let mut it = spec.split(',');
    let fd: i32 = it.next().unwrap().parse().unwrap();
    let live = unhex(it.next().unwrap());
    let freed = unhex(it.next().unwrap());
    let dev = common::emu("emu:mi210");
    // SAFETY: the parent passed this fd number, inherited open across exec.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    let pool = dev
        .import_mem_pool(fd, HandleType::PosixFileDescriptor, 0)
        .unwrap();
    assert!(pool.is_imported().unwrap());
    let s = dev.create_stream(0).unwrap();
    assert_eq!(
        s.malloc_from_pool_async(256, &pool).unwrap_err().kind(),
        ErrorKind::InvalidValue,
        "imported pools cannot allocate"
    );
    assert_eq!(
        dev.set_mem_pool(0, &pool).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    let e = pool.import_pointer(&freed).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidValue, "freed pointer: {e}");
    let p = pool.import_pointer(&live).unwrap().into_raw();
    assert_eq!(cell(p).load(Ordering::Acquire), 0xC0FFEE, "parent's data");
    // Our GPU writes into the shared memory.
    s.write_value32(p + 4, 0xBEEF, WriteValueFlags::DEFAULT)
        .unwrap();
    s.synchronize().unwrap();
    s.free_ptr_async(p).unwrap();
    s.synchronize().unwrap();
    pool.destroy().unwrap();
    println!("CHILD-OK");
}

#[test]
fn ipc_pool_between_two_processes() {
    if let Ok(spec) = std::env::var(CHILD_ENV) {
        child(spec);
        return;
    }
    let dev = common::emu("emu:mi210");
    let s = dev.create_stream(0).unwrap();
    // A non-IPC pool cannot be exported.
    let plain = dev.create_mem_pool(&PoolProps::device(0)).unwrap();
    assert_eq!(
        plain
            .export_to_shareable_handle(HandleType::PosixFileDescriptor, 0)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
    let a0 = s.malloc_from_pool_async(256, &plain).unwrap().into_raw();
    assert_eq!(
        dev.mem_pool_export_pointer(a0).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    s.free_ptr_async(a0).unwrap();

    let pool = dev
        .create_mem_pool(&PoolProps {
            handle_type: HandleType::PosixFileDescriptor,
            max_size: 8 << 20,
            ..PoolProps::device(0)
        })
        .unwrap();
    assert_eq!(
        pool.attribute(PoolAttr::ReservedMemCurrent).unwrap(),
        8 << 20
    );
    let a = s.malloc_from_pool_async(4096, &pool).unwrap().into_raw();
    let b = s.malloc_from_pool_async(4096, &pool).unwrap().into_raw();
    s.write_value32(a, 0xC0FFEE, WriteValueFlags::DEFAULT)
        .unwrap();
    s.synchronize().unwrap();
    let live = dev.mem_pool_export_pointer(a).unwrap();
    assert_eq!(dev.mem_pool_export_pointer(a).unwrap(), live, "stable");
    let freed = dev.mem_pool_export_pointer(b).unwrap();
    s.free_ptr_async(b).unwrap();
    let fd = pool
        .export_to_shareable_handle(HandleType::PosixFileDescriptor, 0)
        .unwrap();
    // Let the child inherit the fd.
    rustix::io::fcntl_setfd(fd.as_fd(), rustix::io::FdFlags::empty()).unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "ipc_pool_between_two_processes", "--nocapture"])
        .env(
            CHILD_ENV,
            format!("{},{},{}", fd.as_raw_fd(), hex(&live), hex(&freed)),
        )
        .env("KFDRT_DEVICE", "emu:mi210")
        .output()
        .unwrap();
    drop(fd);
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(
        text.contains("CHILD-OK"),
        "child did not run its checks:\n{text}"
    );
    assert_eq!(
        cell(a + 4).load(Ordering::Acquire),
        0xBEEF,
        "child's GPU write"
    );
    s.free_ptr_async(a).unwrap();
    s.synchronize().unwrap();
    pool.destroy().unwrap();
    s.synchronize().unwrap();
    assert_eq!(dev.mem_pool_backing_bytes(), 0);
}
