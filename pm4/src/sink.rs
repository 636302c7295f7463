//! Where encoders put dwords: a plain slice or a ring of atomics.
use core::sync::atomic::{AtomicU32, Ordering};

/// A destination for encoded dwords, indexed from the start of the packet.
pub(crate) trait Sink {
    fn put(&mut self, i: usize, w: u32);
}

impl Sink for [u32] {
    #[inline(always)]
    fn put(&mut self, i: usize, w: u32) {
        self[i] = w;
    }
}

/// A packet written into a ring of atomics starting at dword `start`, wrapping
/// at the end of the ring. Stores are relaxed; publication is the caller's job.
pub(crate) struct RingSink<'a> {
    pub ring: &'a [AtomicU32],
    pub start: usize,
}

impl Sink for RingSink<'_> {
    #[inline(always)]
    fn put(&mut self, i: usize, w: u32) {
        let mut idx = self.start + i;
        if idx >= self.ring.len() {
            idx -= self.ring.len();
        }
        self.ring[idx].store(w, Ordering::Relaxed);
    }
}

/// Splits a u64 into (low, high) dwords.
#[inline(always)]
pub(crate) const fn lo(v: u64) -> u32 {
    v as u32
}

/// High dword of a u64.
#[inline(always)]
pub(crate) const fn hi(v: u64) -> u32 {
    (v >> 32) as u32
}

/// Joins two dwords.
#[inline(always)]
pub(crate) const fn join(lo: u32, hi: u32) -> u64 {
    (lo as u64) | ((hi as u64) << 32)
}
