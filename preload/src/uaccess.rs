//! `copy_from_user` / `copy_to_user` for the foreign program's pointers.
//!
//! The program and the emulator share one address space, but a pointer inside an ioctl
//! argument is untrusted: dereferencing a bad one would crash the host process. Like the
//! kernel, every user pointer is copied through a primitive that fails with `EFAULT`
//! instead: `process_vm_readv`/`process_vm_writev` on our own pid.

use core::ffi::c_void;

use rustix::io::Errno;
use zerocopy::{FromBytes, Immutable, IntoBytes};

/// Copy `buf.len()` bytes from the program's address `addr`; `EFAULT` if any is unmapped.
pub(crate) fn copy_from_user(addr: u64, buf: &mut [u8]) -> Result<(), Errno> {
    if buf.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast::<c_void>(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes our own writable buffer; the remote side is checked by the
    // kernel, which returns an error (never faults) for unmapped addresses.
    let n = unsafe { libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n >= 0 && n as usize == buf.len() {
        Ok(())
    } else {
        Err(Errno::FAULT)
    }
}

/// Copy `buf` to the program's address `addr`; `EFAULT` if any byte is not writable.
pub(crate) fn copy_to_user(addr: u64, buf: &[u8]) -> Result<(), Errno> {
    if buf.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: buf.as_ptr() as *mut c_void,
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` is only read; the kernel validates the remote range.
    let n = unsafe { libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0) };
    if n >= 0 && n as usize == buf.len() {
        Ok(())
    } else {
        Err(Errno::FAULT)
    }
}

/// Read an array of `n` plain structs from the program.
pub(crate) fn read_array<T: FromBytes + IntoBytes + Immutable + Clone>(
    addr: u64,
    n: usize,
) -> Result<Vec<T>, Errno> {
    let mut v = vec![T::new_zeroed(); n];
    copy_from_user(addr, v.as_mut_bytes())?;
    Ok(v)
}
