//! Sub-allocation policy of the stream-ordered allocator: size classes, backing chunk
//! sizes, and the range allocator that carves chunks out of a fixed IPC backing.
//!
//! # Size classes
//! A request is rounded up to [`MIN_ALIGN`] (256 bytes, HIP's minimum alignment of
//! device allocations), then to a *size class*: 256, 512, 768 and 1024 bytes, and above
//! 1 KiB four classes per power of two (`5/4`, `6/4`, `7/4`, `8/4` of the octave's base).
//! Consecutive classes differ by at most 25 %, so a block wastes at most 20 % of its bytes
//! to rounding (internal fragmentation).
//!
//! # Backing chunks
//! - Classes up to [`SLAB_MAX_CLASS`] (1 MiB) are *slab* classes: blocks are carved from
//!   slabs of `max(2 MiB, 4 × class)` bytes rounded up to 2 MiB (so 2 MiB for classes up to
//!   512 KiB, 4 MiB for 640 KiB – 1 MiB), each slab serving one class.
//! - Larger classes get a *dedicated* chunk of exactly the class size (a page multiple).
//!
//! A block never moves between classes and free blocks are never merged, so every free
//! block keeps the stream-order mark of its own free. External fragmentation is bounded
//! per class: a slab is returned to the OS (trim / release threshold) as soon as none of
//! its blocks is live and every free in it has completed; new blocks are carved from the
//! free lists first (most recently freed first), then from slabs that still have unused
//! space, and only then from a new slab.

/// Minimum alignment and granule of pool allocations.
pub const MIN_ALIGN: usize = 256;
/// Largest class served from shared slabs; larger classes get dedicated chunks.
pub const SLAB_MAX_CLASS: usize = 1 << 20;
/// Minimum slab size (the GPU's 2 MiB fragment size).
pub const SLAB_MIN: usize = 2 << 20;
/// Largest request the allocator accepts (64 TiB); larger ones are OutOfMemory.
pub const MAX_REQUEST: usize = 1 << 46;
/// Number of size classes up to [`MAX_REQUEST`].
pub const NUM_CLASSES: usize = class_index(MAX_REQUEST) + 1;

/// Size class index of a request of `size` bytes (1 ..= [`MAX_REQUEST`]).
pub const fn class_index(size: usize) -> usize {
    let s = if size == 0 {
        MIN_ALIGN
    } else {
        size.div_ceil(MIN_ALIGN) * MIN_ALIGN
    };
    if s <= 1024 {
        return s / MIN_ALIGN - 1;
    }
    let o = (usize::BITS - 1 - (s - 1).leading_zeros()) as usize;
    let step = 1usize << (o - 2);
    let m = s.div_ceil(step);
    4 + (o - 10) * 4 + (m - 5)
}

/// Bytes of a block of class `idx`.
pub const fn class_size(idx: usize) -> usize {
    if idx < 4 {
        return (idx + 1) * MIN_ALIGN;
    }
    let o = 10 + (idx - 4) / 4;
    let m = 5 + (idx - 4) % 4;
    m << (o - 2)
}

/// What a request of `size` bytes occupies in a pool (its class size); this is what
/// `UsedMemCurrent` counts per allocation.
pub const fn rounded_size(size: usize) -> usize {
    class_size(class_index(size))
}

/// Whether class `idx` is served from shared slabs.
pub const fn is_slab_class(idx: usize) -> bool {
    class_size(idx) <= SLAB_MAX_CLASS
}

/// Bytes of the backing chunk a new block of class `idx` needs: a slab for slab classes,
/// the class size for dedicated chunks.
pub const fn chunk_bytes(idx: usize) -> usize {
    let c = class_size(idx);
    if c <= SLAB_MAX_CLASS {
        let want = if 4 * c > SLAB_MIN { 4 * c } else { SLAB_MIN };
        want.div_ceil(SLAB_MIN) * SLAB_MIN
    } else {
        c
    }
}

/// First-fit range allocator with coalescing over `[start, end)` (offsets into a fixed
/// backing). Used only when a chunk is created or released, never per allocation.
#[derive(Debug, Clone)]
pub(crate) struct RangeAlloc {
    /// Free ranges `(offset, len)`, sorted by offset, never adjacent.
    free: Vec<(u64, u64)>,
}

impl RangeAlloc {
    pub(crate) fn new(start: u64, end: u64) -> Self {
        RangeAlloc {
            free: if end > start {
                vec![(start, end - start)]
            } else {
                Vec::new()
            },
        }
    }

    /// Take `len` bytes aligned to `align` (a power of two).
    pub(crate) fn alloc(&mut self, len: u64, align: u64) -> Option<u64> {
        for i in 0..self.free.len() {
            let (off, flen) = self.free[i];
            let a = off.next_multiple_of(align);
            let pad = a - off;
            if flen < pad + len {
                continue;
            }
            let tail = flen - pad - len;
            let mut repl = Vec::with_capacity(2);
            if pad > 0 {
                repl.push((off, pad));
            }
            if tail > 0 {
                repl.push((a + len, tail));
            }
            self.free.splice(i..=i, repl);
            return Some(a);
        }
        None
    }

    /// Return `[off, off+len)`.
    pub(crate) fn free(&mut self, off: u64, len: u64) {
        let i = self.free.partition_point(|&(o, _)| o < off);
        self.free.insert(i, (off, len));
        // Merge with the next, then with the previous.
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
    }

    /// Total free bytes.
    #[cfg(test)]
    pub(crate) fn free_bytes(&self) -> u64 {
        self.free.iter().map(|r| r.1).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_monotonic_and_tight() {
        assert_eq!(class_size(class_index(1)), 256);
        assert_eq!(class_size(class_index(256)), 256);
        assert_eq!(class_size(class_index(257)), 512);
        assert_eq!(class_size(class_index(1025)), 1280);
        assert_eq!(class_size(class_index(2048)), 2048);
        assert_eq!(class_size(class_index(2049)), 2560);
        assert_eq!(class_size(class_index(1 << 20)), 1 << 20);
        assert_eq!(class_size(class_index(3 << 20)), 3 << 20);
        assert_eq!(class_size(class_index(MAX_REQUEST)), MAX_REQUEST);
        let mut prev = 0;
        for i in 0..NUM_CLASSES {
            let c = class_size(i);
            assert!(c > prev);
            assert_eq!(class_index(c), i);
            assert_eq!(class_index(prev + 1), i);
            // At most 25 % more than the smallest request of the class.
            assert!((c as f64) <= (prev + 1).max(MIN_ALIGN) as f64 * 1.25 + 256.0);
            prev = c;
        }
    }

    #[test]
    fn chunk_policy() {
        assert_eq!(chunk_bytes(class_index(256)), 2 << 20);
        assert_eq!(chunk_bytes(class_index(512 << 10)), 2 << 20);
        assert_eq!(chunk_bytes(class_index(640 << 10)), 4 << 20);
        assert_eq!(chunk_bytes(class_index(1 << 20)), 4 << 20);
        assert_eq!(chunk_bytes(class_index((1 << 20) + 1)), 1280 << 10);
        assert_eq!(chunk_bytes(class_index(8 << 20)), 8 << 20);
        assert!(is_slab_class(class_index(1 << 20)));
        assert!(!is_slab_class(class_index((1 << 20) + 1)));
    }

    #[test]
    fn range_alloc_coalesces() {
        let mut r = RangeAlloc::new(0x1000, 0x10000);
        let a = r.alloc(0x2000, 0x1000).unwrap();
        let b = r.alloc(0x2000, 0x4000).unwrap();
        assert_eq!(a, 0x1000);
        assert_eq!(b, 0x4000);
        assert_eq!(r.free_bytes(), 0xf000 - 0x4000);
        assert!(r.alloc(0x10000, 0x1000).is_none());
        r.free(b, 0x2000);
        r.free(a, 0x2000);
        assert_eq!(r.free_bytes(), 0xf000);
        assert_eq!(r.free, vec![(0x1000, 0xf000)]);
    }
}
