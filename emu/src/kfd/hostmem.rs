//! Host memory behind emulated GPU memory: sealed memfds with the emulator's own alias
//! mapping, and registered ranges of the application's memory (USERPTR, SVM).
//!
//! Every buffer object that has pages of its own (VRAM, GTT, doorbell, MMIO remap, event
//! page) is a memfd. The emulator maps it once, MAP_SHARED, for its engines (the "alias");
//! the application maps the same memfd at the BO's VA through `Backend::mmap`, so the CPU
//! and the engines see the same bytes. The memfd is sealed against growing and shrinking
//! (a buffer object's at its first dmabuf export, see `Backing::new_unsealed`),
//! so no mapping of it can ever SIGBUS, even when the memfd is exported as a dmabuf to
//! another process.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, MsyncFlags, ProtFlags};

/// The page size the emulator models (x86-64 and the GPU's 4 KiB pages).
pub(crate) const PAGE: u64 = 4096;

/// Prefix of the memfd names of buffer objects; an imported fd must carry it.
pub(crate) const BO_MEMFD_PREFIX: &str = "kfd-emu-bo";

pub(crate) fn page_align(v: u64) -> Option<u64> {
    v.checked_add(PAGE - 1).map(|x| x & !(PAGE - 1))
}

/// A sealed memfd plus the emulator's read-write alias mapping of all of it.
pub(crate) struct Backing {
    fd: OwnedFd,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the alias mapping is shared memory owned by this value; it is only accessed
// through atomics and raw copies (MemWindow), never through Rust references.
unsafe impl Send for Backing {}
// SAFETY: as above.
unsafe impl Sync for Backing {}

impl std::fmt::Debug for Backing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Backing({:p}+{:#x})", self.ptr, self.len)
    }
}

impl Backing {
    /// A new zero-filled memfd of `len` bytes (a multiple of the page size, > 0), named
    /// `name`, sealed against resizing, with its alias mapping.
    pub(crate) fn new(name: &str, len: u64) -> Result<Self, Errno> {
        let b = Self::new_unsealed(name, len)?;
        b.seal()?;
        Ok(b)
    }

    /// Like [`Backing::new`], but not sealed yet: for buffer objects, whose memfd no other
    /// process can reach until it is exported as a dmabuf, where [`Backing::seal`] is
    /// called first. Saves one system call per ALLOC_MEMORY_OF_GPU (the stream-ordered
    /// pool's regrowth after a release is one).
    pub(crate) fn new_unsealed(name: &str, len: u64) -> Result<Self, Errno> {
        if len == 0 || len % PAGE != 0 {
            return Err(Errno::INVAL);
        }
        let fd = rustix::fs::memfd_create(name, MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        rustix::fs::ftruncate(&fd, len)?;
        Self::map(fd, len)
    }

    /// Seal the memfd against growing and shrinking (idempotent): after this no mapping of
    /// it, in this process or an importer's, can SIGBUS.
    pub(crate) fn seal(&self) -> Result<(), Errno> {
        rustix::fs::fcntl_add_seals(&self.fd, SealFlags::SHRINK | SealFlags::GROW)
    }

    /// Adopt an imported fd: it must be a memfd made by [`Backing::new`] (sealed against
    /// resizing, so mapping it can never fault), of a page-multiple size.
    pub(crate) fn import(fd: OwnedFd) -> Result<Self, Errno> {
        let seals = rustix::fs::fcntl_get_seals(&fd).map_err(|_| Errno::INVAL)?;
        if !seals.contains(SealFlags::SHRINK | SealFlags::GROW) {
            return Err(Errno::INVAL);
        }
        if !memfd_name(fd.as_fd()).is_some_and(|n| n.starts_with(BO_MEMFD_PREFIX)) {
            return Err(Errno::INVAL);
        }
        let st = rustix::fs::fstat(&fd)?;
        let len = u64::try_from(st.st_size).map_err(|_| Errno::INVAL)?;
        if len == 0 || len % PAGE != 0 {
            return Err(Errno::INVAL);
        }
        Self::map(fd, len)
    }

    fn map(fd: OwnedFd, len: u64) -> Result<Self, Errno> {
        let ulen = usize::try_from(len).map_err(|_| Errno::NOMEM)?;
        // SAFETY: a fresh shared mapping chosen by the kernel; it overlaps nothing.
        let p = unsafe {
            rustix::mm::mmap(
                core::ptr::null_mut(),
                ulen,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::NORESERVE,
                &fd,
                0,
            )
        }?;
        let ptr = NonNull::new(p.cast::<u8>()).ok_or(Errno::NOMEM)?;
        Ok(Backing { fd, ptr, len: ulen })
    }

    /// The alias address.
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }
    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
    /// The memfd.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Give every page back (FALLOC_FL_PUNCH_HOLE over the whole memfd, size kept): the
    /// memory is free again and every mapping of the memfd reads zeros afterwards.
    pub(crate) fn punch_all(&self) -> Result<(), Errno> {
        use rustix::fs::FallocateFlags;
        rustix::fs::fallocate(
            &self.fd,
            FallocateFlags::PUNCH_HOLE | FallocateFlags::KEEP_SIZE,
            0,
            self.len as u64,
        )
    }

    /// Fill the whole alias with `byte`.
    pub(crate) fn fill(&self, byte: u8) {
        // SAFETY: the alias is mapped read-write for `len` bytes; no Rust reference
        // aliases it.
        unsafe { core::ptr::write_bytes(self.ptr.as_ptr(), byte, self.len) };
    }

    /// Map `len` bytes of the memfd from offset 0 for the application, shared, at
    /// `fixed` (MAP_FIXED) or where the kernel chooses.
    ///
    /// # Safety
    /// With `fixed`, the caller owns the range being replaced (see `Backend::mmap`).
    pub(crate) unsafe fn map_for_app(
        &self,
        len: usize,
        fixed: Option<NonNull<c_void>>,
        prot: ProtFlags,
    ) -> Result<NonNull<c_void>, Errno> {
        if len == 0 || len > self.len {
            return Err(Errno::INVAL);
        }
        let (addr, flags) = match fixed {
            Some(a) => (a.as_ptr(), MapFlags::SHARED | MapFlags::FIXED),
            None => (core::ptr::null_mut(), MapFlags::SHARED),
        };
        // SAFETY: the caller guarantees it owns the fixed range; otherwise the kernel picks
        // a free range. The memfd is sealed, so the mapping never outgrows the file.
        let p = unsafe { rustix::mm::mmap(addr, len, prot, flags, &self.fd, 0) }?;
        NonNull::new(p).ok_or(Errno::NOMEM)
    }
}

impl Drop for Backing {
    fn drop(&mut self) {
        // SAFETY: the alias was mapped by `map` and nothing references it any more (every
        // MemWindow over it holds an Arc to this value).
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

/// The name of a memfd (`/memfd:NAME (deleted)` in /proc/self/fd), if `fd` is one.
pub(crate) fn memfd_name(fd: BorrowedFd<'_>) -> Option<String> {
    use std::os::fd::AsRawFd;
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    let s = link.to_str()?;
    let name = s.strip_prefix("/memfd:")?;
    Some(name.strip_suffix(" (deleted)").unwrap_or(name).to_owned())
}

/// A range of the application's own memory registered with the emulated KFD (a USERPTR
/// BO or an SVM range). The engines reach it through a window at its CPU address; the
/// application must keep it mapped while it is registered, as the real kernel's pinning of
/// user pages assumes.
#[derive(Debug)]
pub(crate) struct UserRange {
    pub(crate) addr: u64,
    pub(crate) len: u64,
}

/// Check that `[addr, addr+len)` is entirely mapped in this process right now
/// (msync fails with ENOMEM on any unmapped page). Returns EFAULT otherwise.
pub(crate) fn check_user_range(addr: u64, len: u64) -> Result<(), Errno> {
    if len == 0 || addr % PAGE != 0 || len % PAGE != 0 {
        return Err(Errno::INVAL);
    }
    let end = addr.checked_add(len).ok_or(Errno::FAULT)?;
    if addr == 0 || end > USER_VA_END {
        return Err(Errno::FAULT);
    }
    let ulen = usize::try_from(len).map_err(|_| Errno::FAULT)?;
    // SAFETY: MS_ASYNC on an address range only asks the kernel about the mappings there
    // (it schedules nothing for anonymous memory); it neither reads nor writes the bytes.
    match unsafe { rustix::mm::msync(addr as *mut c_void, ulen, MsyncFlags::ASYNC) } {
        Ok(()) => Ok(()),
        Err(_) => Err(Errno::FAULT),
    }
}

/// True when every page of `[addr, addr+len)` is mapped readable and writable right now
/// (from /proc/self/maps). The engines only get windows over such user memory, so they
/// never touch a PROT_NONE or read-only page.
pub(crate) fn user_range_rw(addr: u64, len: u64) -> bool {
    maps_cover(addr, len, |m| m.perms.starts_with("rw"))
}

/// One line of /proc/self/maps.
pub(crate) struct MapsLine<'a> {
    pub(crate) lo: u64,
    pub(crate) hi: u64,
    pub(crate) perms: &'a str,
    pub(crate) offset: u64,
    pub(crate) inode: u64,
    pub(crate) path: &'a str,
}

/// True when every page of `[addr, addr+len)` is mapped, by lines that all satisfy `ok`.
pub(crate) fn maps_cover(addr: u64, len: u64, ok: impl Fn(&MapsLine<'_>) -> bool) -> bool {
    let Some(end) = addr.checked_add(len) else {
        return false;
    };
    let Ok(maps) = std::fs::read_to_string("/proc/self/maps") else {
        return false;
    };
    let mut cur = addr;
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (Some(range), Some(perms), Some(offset), Some(_dev), Some(inode)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let path = f.next().unwrap_or("");
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (Ok(lo), Ok(hi), Ok(offset), Ok(inode)) = (
            u64::from_str_radix(lo, 16),
            u64::from_str_radix(hi, 16),
            u64::from_str_radix(offset, 16),
            inode.parse::<u64>(),
        ) else {
            continue;
        };
        if hi <= cur {
            continue;
        }
        let m = MapsLine {
            lo,
            hi,
            perms,
            offset,
            inode,
            path,
        };
        if lo > cur || !ok(&m) {
            return false;
        }
        cur = hi;
        if cur >= end {
            return true;
        }
    }
    false
}

/// End of the user address space the emulator accepts (x86-64 4-level paging:
/// `TASK_SIZE_MAX` = 0x7fff_ffff_f000).
pub(crate) const USER_VA_END: u64 = 0x7fff_ffff_f000;

/// The kernel's `access_ok(addr, size)` for a user pointer on x86-64.
pub(crate) fn access_ok(addr: u64, size: u64) -> bool {
    addr.checked_add(size).is_some_and(|e| e <= USER_VA_END)
}
