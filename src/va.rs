//! GPU virtual address space: on gfx9+ a GPU VA is the same number as the CPU VA, so a
//! buffer's address is reserved in the process with an inaccessible anonymous mapping
//! first (as libhsakmt's `fmm.c` does), and the BO is then placed at that address.

use core::ffi::c_void;
use core::ptr::NonNull;

use rustix::mm::{MapFlags, ProtFlags};

use crate::error::{Error, ErrorKind, Result};

/// An address range reserved `PROT_NONE` in this process; unmapped on drop.
#[derive(Debug)]
pub struct VaReservation {
    addr: NonNull<c_void>,
    len: usize,
    /// Bytes of guard on each side (part of the reservation, see [`VaReservation::isolated`]).
    guard: usize,
}

// SAFETY: the reservation is an address range owned by this value; nothing is accessed
// through the pointer here.
unsafe impl Send for VaReservation {}
// SAFETY: as above.
unsafe impl Sync for VaReservation {}

/// Page size the runtime works in.
pub const PAGE: usize = 4096;
/// Alignment of large reservations (the GPU's 2 MiB fragment size).
pub const HUGE: usize = 2 << 20;

impl VaReservation {
    /// Reserve `len` bytes aligned to `align` (a power of two, at least a page).
    pub fn new(len: usize, align: usize) -> Result<Self> {
        let call = "VaReservation::new";
        if len == 0 || !align.is_power_of_two() || align < PAGE {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("len={len:#x} align={align:#x}"),
            ));
        }
        let len = len.next_multiple_of(PAGE);
        let total = len.checked_add(align).ok_or_else(|| {
            Error::new(
                ErrorKind::OutOfMemory,
                call,
                format!("len={len:#x} too large"),
            )
        })?;
        // SAFETY: a fresh anonymous PROT_NONE mapping at a kernel-chosen address.
        let base = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                total,
                ProtFlags::empty(),
                MapFlags::PRIVATE | MapFlags::NORESERVE,
            )
        }
        .map_err(|e| {
            Error::new(
                ErrorKind::OutOfMemory,
                call,
                format!("mmap {total:#x} bytes: {e}"),
            )
        })?;
        let start = (base as usize).next_multiple_of(align);
        let head = start - base as usize;
        let tail = total - head - len;
        // SAFETY: trimming the unaligned head and tail of the mapping we just made.
        unsafe {
            if head > 0 {
                let _ = rustix::mm::munmap(base, head);
            }
            if tail > 0 {
                let _ = rustix::mm::munmap((start + len) as *mut c_void, tail);
            }
        }
        let addr = NonNull::new(start as *mut c_void)
            .ok_or_else(|| Error::new(ErrorKind::OutOfMemory, call, "null"))?;
        Ok(VaReservation {
            addr,
            len,
            guard: 0,
        })
    }

    /// Like [`VaReservation::new`], with a guard page on each side that the kernel never
    /// merges with the range: the range stays a mapping of its own whatever is reserved next
    /// to it, so placing a BO over all of it (MAP_FIXED) and putting PROT_NONE back replace
    /// one whole mapping. Inside a larger merged PROT_NONE mapping both would split it
    /// (measured ~2 us more per mmap on the 2-core VM). For ranges that are kept and
    /// filled again many times (the stream-ordered pool's chunks).
    pub fn isolated(len: usize, align: usize) -> Result<Self> {
        let call = "VaReservation::isolated";
        let inner = Self::new(
            len.checked_add(2 * align.max(PAGE)).ok_or_else(|| {
                Error::new(
                    ErrorKind::OutOfMemory,
                    call,
                    format!("len={len:#x} too large"),
                )
            })?,
            align,
        )?;
        // The range starts one `align` in, so it keeps the alignment; the page before it and
        // the page after it are the guards, the rest is trimmed.
        let base = inner.addr() as usize;
        let total = inner.len;
        std::mem::forget(inner);
        let start = base + align.max(PAGE);
        let (lo, hi) = (start - PAGE, start + len.next_multiple_of(PAGE) + PAGE);
        // SAFETY: trimming and marking parts of the reservation just made, which nothing else
        // references.
        unsafe {
            if lo > base {
                let _ = rustix::mm::munmap(base as *mut c_void, lo - base);
            }
            if base + total > hi {
                let _ = rustix::mm::munmap(hi as *mut c_void, base + total - hi);
            }
            // VM_DONTDUMP on the guards only: mappings whose flags differ never merge
            // (mm/vma.c `is_mergeable_vma`), so the range is never merged with a neighbour.
            for g in [lo, hi - PAGE] {
                let _ =
                    rustix::mm::madvise(g as *mut c_void, PAGE, rustix::mm::Advice::LinuxDontDump);
            }
        }
        let addr = NonNull::new(start as *mut c_void)
            .ok_or_else(|| Error::new(ErrorKind::OutOfMemory, call, "null"))?;
        Ok(VaReservation {
            addr,
            len: len.next_multiple_of(PAGE),
            guard: PAGE,
        })
    }

    /// First address.
    pub fn addr(&self) -> u64 {
        self.addr.as_ptr() as u64
    }
    /// The address as a pointer (for MAP_FIXED placement).
    pub fn ptr(&self) -> NonNull<c_void> {
        self.addr
    }
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for an empty reservation (never: construction requires `len > 0`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for VaReservation {
    fn drop(&mut self) {
        // SAFETY: the range is ours; whatever was placed over it (a BO mapping) has been
        // released by its owner before the reservation drops.
        let _ = unsafe {
            rustix::mm::munmap(
                (self.addr.as_ptr() as usize - self.guard) as *mut c_void,
                self.len + 2 * self.guard,
            )
        };
    }
}

/// `(start, len)` of the range of `ranges` (keyed by start address, `len` giving each
/// one's length) that holds `addr`. Ranges must not overlap.
pub(crate) fn range_containing<T>(
    ranges: &std::collections::BTreeMap<u64, T>,
    addr: u64,
    len: impl Fn(&T) -> u64,
) -> Option<(u64, u64)> {
    let (&start, r) = ranges.range(..=addr).next_back()?;
    let n = len(r);
    (addr - start < n).then_some((start, n))
}

#[cfg(test)]
mod tests {
    use super::range_containing;
    use std::collections::BTreeMap;

    #[test]
    fn range_containing_finds_the_holder_and_stops_at_its_end() {
        let m = BTreeMap::from([(0x1000u64, 0x1000u64), (0x4000, 0x2000)]);
        let f = |a| range_containing(&m, a, |&n| n);
        assert_eq!(f(0xfff), None);
        assert_eq!(f(0x1000), Some((0x1000, 0x1000)));
        assert_eq!(f(0x1fff), Some((0x1000, 0x1000)));
        assert_eq!(f(0x2000), None);
        assert_eq!(f(0x5fff), Some((0x4000, 0x2000)));
        assert_eq!(f(0x6000), None);
    }
}
