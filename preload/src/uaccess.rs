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
    // SAFETY: `buf` is our own writable buffer of `buf.len()` bytes.
    unsafe { process_vm_copy(addr, buf.as_mut_ptr(), buf.len(), false) }
}

/// Copy `buf` to the program's address `addr`; `EFAULT` if any byte is not writable.
pub(crate) fn copy_to_user(addr: u64, buf: &[u8]) -> Result<(), Errno> {
    // SAFETY: `buf` is our own buffer of `buf.len()` bytes, only read when `to_user`.
    unsafe { process_vm_copy(addr, buf.as_ptr().cast_mut(), buf.len(), true) }
}

/// `len` bytes between our buffer at `local` and the program's address `addr`:
/// `process_vm_writev` when `to_user`, else `process_vm_readv`; `EFAULT` unless every byte
/// moved.
///
/// # Safety
/// `local` is `len` bytes of our own memory, writable unless `to_user`.
unsafe fn process_vm_copy(
    addr: u64,
    local: *mut u8,
    len: usize,
    to_user: bool,
) -> Result<(), Errno> {
    if len == 0 {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: local.cast::<c_void>(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut c_void,
        iov_len: len,
    };
    // SAFETY: `local` is ours (caller's contract); the kernel validates the remote range
    // and returns an error (never faults) for unmapped or unwritable addresses.
    let n = unsafe {
        if to_user {
            libc::process_vm_writev(libc::getpid(), &local, 1, &remote, 1, 0)
        } else {
            libc::process_vm_readv(libc::getpid(), &local, 1, &remote, 1, 0)
        }
    };
    if n >= 0 && n as usize == len {
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
