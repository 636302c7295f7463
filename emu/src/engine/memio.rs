//! Engine-side memory access: a small translation cache of [`MemWindow`]s in front of
//! [`GpuMemory::resolve`], and typed accessors that turn every failure into a [`Fault`]
//! carrying the GPU, address, length and direction.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::gpumem::{Fault, FaultKind, GpuMemory, MemWindow};
use pm4::pkt3::CompareFn;

/// Cached windows per engine thread (ring, queue descriptor, signals, destinations).
const ENTRIES: usize = 16;

/// Why an access failed: a memory fault, or a misaligned address (no VM fault kind).
#[derive(Debug, Clone)]
pub(crate) enum AccessError {
    /// Not mapped / read-only.
    Fault(Fault),
    /// The address is not aligned to the access size.
    Misaligned {
        /// Address.
        va: u64,
        /// Access size.
        size: u64,
    },
}

impl From<Fault> for AccessError {
    fn from(f: Fault) -> Self {
        AccessError::Fault(f)
    }
}

pub(crate) type Access<T> = Result<T, AccessError>;

/// A per-thread translation cache (and the engine thread's trace recorder, since every
/// packet's execution reaches it).
pub(crate) struct MemCache {
    /// The engine thread's trace recorder.
    pub(crate) tr: crate::trace::Tracer,
    /// Set on an engine's own thread (`sched::engine_main`), which flushes `wakes`:
    /// interrupts raised through this cache may batch their sleeper wake-ups there.
    pub(crate) batch_wakes: bool,
    /// Sleeper wake-ups held back by interrupts (see `Interrupts::event_interrupt_batched`).
    pub(crate) wakes: crate::engine::PendingWakes,
    gpu_id: u32,
    mem: Arc<dyn GpuMemory>,
    tlb: Arc<crate::engine::Inner>,
    gen: u64,
    entries: Vec<MemWindow>,
    next: usize,
    last: usize,
    /// Direct-mapped page tags in front of `entries`: slot `tag_slot(page)` holds a page
    /// number and the entry last found to hold it. A tag is only a hint (the entry is
    /// re-checked with `contains`), so a stale tag after an entry was replaced costs a
    /// scan, never a wrong translation; all tags drop with the entries on a generation
    /// change (unmap).
    tags: [(u64, u8); TAGS],
}

/// Page tags (a power of two).
const TAGS: usize = 256;
/// The tag slot of page number `page`: a multiplicative hash, because buffer objects sit
/// at large power-of-two aligned addresses (their low page bits are all zero), so the low
/// bits alone would put most objects' first pages in one slot.
#[inline(always)]
fn tag_slot(page: u64) -> usize {
    (page.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - TAGS.trailing_zeros())) as usize
}

/// No page (an impossible page number: addresses are below 2^64).
const NO_PAGE: u64 = u64::MAX;

impl MemCache {
    pub(crate) fn new(inner: Arc<crate::engine::Inner>) -> Self {
        MemCache {
            tr: crate::trace::Tracer::new(inner.cfg.gpu_id, crate::trace::EngineId::Cp),
            batch_wakes: false,
            wakes: crate::engine::PendingWakes::default(),
            gpu_id: inner.cfg.gpu_id,
            mem: inner.mem.clone(),
            gen: inner.tlb_gen.load(Ordering::Acquire),
            tlb: inner,
            entries: Vec::with_capacity(ENTRIES),
            next: 0,
            last: 0,
            tags: [(NO_PAGE, 0); TAGS],
        }
    }

    /// The engines' shared state.
    pub(crate) fn inner(&self) -> &crate::engine::Inner {
        &self.tlb
    }

    /// The engines' shared state, owned (to hand to a dispatch thread).
    pub(crate) fn inner_arc(&self) -> &Arc<crate::engine::Inner> {
        &self.tlb
    }

    fn fault(&self, va: u64, len: u64, write: bool, kind: FaultKind) -> AccessError {
        AccessError::Fault(Fault {
            gpu_id: self.gpu_id,
            va,
            len,
            write,
            kind,
        })
    }

    /// The window holding `[va, va+len)`, writable when `write`. The fast path (same
    /// memory-map generation, the entry used last or the page's tag) is inlined into
    /// every accessor.
    #[inline(always)]
    pub(crate) fn window(&mut self, va: u64, len: u64, write: bool) -> Access<&MemWindow> {
        let ok = |w: &MemWindow| w.contains(va, len) && (!write || w.writable());
        let mut idx = usize::MAX;
        if self.tlb.tlb_gen.load(Ordering::Acquire) == self.gen {
            if self.entries.get(self.last).is_some_and(ok) {
                idx = self.last;
            } else if let Some(&(p, i)) = self.tags.get(tag_slot(va >> 12)) {
                if p == va >> 12 && self.entries.get(i as usize).is_some_and(ok) {
                    idx = i as usize;
                    self.last = idx;
                }
            }
        }
        if idx == usize::MAX {
            idx = self.window_slow(va, len, write)?;
        }
        match self.entries.get(idx) {
            Some(w) => Ok(w),
            None => Err(self.fault(va, len, write, FaultKind::NotMapped)),
        }
    }

    /// [`Self::window`] past the last-used entry: drop everything on a new memory-map
    /// generation (an unmap), then the page tags, a scan, the memory map.
    #[inline(never)]
    fn window_slow(&mut self, va: u64, len: u64, write: bool) -> Access<usize> {
        self.drop_stale();
        let idx = match self.lookup(va, len) {
            Some(i) => i,
            None => self.resolve_fill(va, len, write)?,
        };
        self.last = idx;
        if write && !self.entries.get(idx).is_some_and(|w| w.writable()) {
            return Err(AccessError::Fault(Fault {
                gpu_id: self.gpu_id,
                va,
                len,
                write,
                kind: FaultKind::ReadOnly,
            }));
        }
        Ok(idx)
    }

    /// Drops every entry when the memory map changed since they were translated (an
    /// unmap): on the miss path here, and from the engine loop when asked
    /// (`GpuEngines::release_windows`), so no entry keeps freed memory alive.
    pub(crate) fn drop_stale(&mut self) {
        let g = self.tlb.tlb_gen.load(Ordering::Acquire);
        if g != self.gen {
            self.entries.clear();
            self.next = 0;
            self.last = 0;
            self.tags = [(NO_PAGE, 0); TAGS];
            self.gen = g;
        }
    }

    /// The cached entry holding `[va, va+len)`: the last one used, then the page's tag,
    /// then a scan (which re-tags the page).
    #[inline]
    fn lookup(&mut self, va: u64, len: u64) -> Option<usize> {
        if self
            .entries
            .get(self.last)
            .is_some_and(|w| w.contains(va, len))
        {
            return Some(self.last);
        }
        let page = va >> 12;
        let t = tag_slot(page);
        if let Some(&(p, i)) = self.tags.get(t) {
            if p == page
                && self
                    .entries
                    .get(i as usize)
                    .is_some_and(|w| w.contains(va, len))
            {
                return Some(i as usize);
            }
        }
        let i = self.entries.iter().position(|w| w.contains(va, len))?;
        if let Some(tag) = self.tags.get_mut(t) {
            *tag = (page, i as u8);
        }
        Some(i)
    }

    /// Resolves `[va, va+len)` through the memory map into a cache entry.
    #[cold]
    fn resolve_fill(&mut self, va: u64, len: u64, write: bool) -> Access<usize> {
        let w = match self.mem.resolve(self.gpu_id, va, len) {
            Ok(w) if w.contains(va, len) => w,
            Ok(_) | Err(_) => return Err(self.fault(va, len, write, FaultKind::NotMapped)),
        };
        let i = if self.entries.len() < ENTRIES {
            self.entries.push(w);
            self.entries.len() - 1
        } else {
            let i = self.next % ENTRIES;
            self.next = self.next.wrapping_add(1);
            if let Some(slot) = self.entries.get_mut(i) {
                *slot = w;
            }
            i
        };
        if let Some(tag) = self.tags.get_mut(tag_slot(va >> 12)) {
            *tag = (va >> 12, i as u8);
        }
        Ok(i)
    }

    fn aligned(&self, va: u64, size: u64) -> Access<()> {
        if va % size != 0 {
            Err(AccessError::Misaligned { va, size })
        } else {
            Ok(())
        }
    }

    fn retag(&self, r: Result<(), Fault>, va: u64, len: u64, write: bool) -> Access<()> {
        r.map_err(|f| self.fault(va, len, write, f.kind))
    }

    /// The host address of `[va, va+len)` when the inlined fast path of [`Self::window`]
    /// finds it (same memory-map generation, the last-used entry or the page's tag) and
    /// `va` is `align`-aligned; `None` sends the caller to its out-of-line path, which
    /// does (and reports) everything exactly as before.
    #[inline(always)]
    fn fast_ptr(&mut self, va: u64, len: u64, write: bool, align: u64) -> Option<*mut u8> {
        if va % align != 0 || self.tlb.tlb_gen.load(Ordering::Acquire) != self.gen {
            return None;
        }
        // `host_ptr` is the window check (inside, and writable for a write): one check
        // per candidate entry, not a check and then the same check again.
        if let Some(p) = self
            .entries
            .get(self.last)
            .and_then(|w| w.host_ptr(va, len, write).ok())
        {
            return Some(p);
        }
        let &(page, i) = self.tags.get(tag_slot(va >> 12))?;
        if page != va >> 12 {
            return None;
        }
        let p = self
            .entries
            .get(i as usize)?
            .host_ptr(va, len, write)
            .ok()?;
        self.last = i as usize;
        Some(p)
    }

    #[inline]
    pub(crate) fn load_u32(&mut self, va: u64) -> Access<u32> {
        match self.fast_ptr(va, 4, false, 4) {
            // SAFETY: a 4-aligned cell inside a live window; shared memory is accessed
            // atomically.
            Some(p) => Ok(unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Acquire)),
            None => self.load_u32_slow(va),
        }
    }

    #[inline(never)]
    fn load_u32_slow(&mut self, va: u64) -> Access<u32> {
        self.aligned(va, 4)?;
        let gpu_id = self.gpu_id;
        let w = self.window(va, 4, false)?;
        w.load_u32(va).map_err(tag(gpu_id, false))
    }

    #[inline]
    pub(crate) fn load_u64(&mut self, va: u64) -> Access<u64> {
        match self.fast_ptr(va, 8, false, 8) {
            // SAFETY: as in `load_u32`.
            Some(p) => Ok(unsafe { AtomicU64::from_ptr(p.cast()) }.load(Ordering::Acquire)),
            None => self.load_u64_slow(va),
        }
    }

    #[inline(never)]
    fn load_u64_slow(&mut self, va: u64) -> Access<u64> {
        self.aligned(va, 8)?;
        let gpu_id = self.gpu_id;
        let w = self.window(va, 8, false)?;
        w.load_u64(va).map_err(tag(gpu_id, false))
    }

    /// A memory poll (PM4 WAIT_REG_MEM / WAIT_REG_MEM64, SDMA POLL_REGMEM): whether
    /// `func` holds now for the dword (qword when `qword`) at `va`.
    pub(crate) fn poll(
        &mut self,
        va: u64,
        qword: bool,
        func: CompareFn,
        mask: u64,
        reference: u64,
    ) -> Access<bool> {
        let v = if qword {
            self.load_u64(va)?
        } else {
            u64::from(self.load_u32(va)?)
        };
        Ok(func.test(v, mask, reference))
    }

    #[inline]
    pub(crate) fn store_u32(&mut self, va: u64, v: u32) -> Access<()> {
        self.store(va, v)
    }

    #[inline]
    pub(crate) fn store_u64(&mut self, va: u64, v: u64) -> Access<()> {
        self.store(va, v)
    }

    /// An aligned atomic store of a dword or qword.
    #[inline(always)]
    fn store<T: Word>(&mut self, va: u64, v: T) -> Access<()> {
        match self.fast_ptr(va, T::SIZE, true, T::SIZE) {
            Some(p) => {
                // SAFETY: `p` is a `T::SIZE`-aligned cell inside a live writable window.
                unsafe { T::store_at(p, v) };
                Ok(())
            }
            None => self.store_slow(va, v),
        }
    }

    #[inline(never)]
    fn store_slow<T: Word>(&mut self, va: u64, v: T) -> Access<()> {
        self.aligned(va, T::SIZE)?;
        let w = self.window(va, T::SIZE, true)?;
        let r = T::store_in(w, va, v);
        self.retag(r, va, T::SIZE, true)
    }

    /// A 64-bit value at a 4-byte aligned address: one atomic store when 8-aligned, else
    /// two dword stores (low first), as the CP writes unaligned qwords.
    pub(crate) fn store_u64_dw(&mut self, va: u64, v: u64) -> Access<()> {
        if va % 8 == 0 {
            self.store_u64(va, v)
        } else {
            self.aligned(va, 4)?;
            self.window(va, 8, true)?;
            self.store_u32(va, v as u32)?;
            self.store_u32(va + 4, (v >> 32) as u32)
        }
    }

    #[inline]
    pub(crate) fn atomic_u64(&mut self, va: u64) -> Access<&AtomicU64> {
        match self.fast_ptr(va, 8, true, 8) {
            // SAFETY: as in `load_u32`; the cell lives as long as the window, which the
            // cache keeps until `self` is next borrowed mutably.
            Some(p) => Ok(unsafe { AtomicU64::from_ptr(p.cast()) }),
            None => self.atomic_u64_slow(va),
        }
    }

    #[inline(never)]
    fn atomic_u64_slow(&mut self, va: u64) -> Access<&AtomicU64> {
        self.aligned(va, 8)?;
        let gpu_id = self.gpu_id;
        let w = self.window(va, 8, true)?;
        w.atomic_u64(va).map_err(tag(gpu_id, true))
    }

    pub(crate) fn atomic_u32(&mut self, va: u64) -> Access<&AtomicU32> {
        self.aligned(va, 4)?;
        let gpu_id = self.gpu_id;
        let w = self.window(va, 4, true)?;
        w.atomic_u32(va).map_err(tag(gpu_id, true))
    }

    /// Reads `out.len()` bytes at `va` (one object).
    #[inline]
    pub(crate) fn read(&mut self, va: u64, out: &mut [u8]) -> Access<()> {
        match self.fast_ptr(va, out.len() as u64, false, 1) {
            Some(p) => {
                // SAFETY: `[va, va+len)` lies in a live window; `out` is a distinct Rust
                // buffer.
                unsafe { core::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
                Ok(())
            }
            None => self.read_slow(va, out),
        }
    }

    #[inline(never)]
    fn read_slow(&mut self, va: u64, out: &mut [u8]) -> Access<()> {
        let len = out.len() as u64;
        let w = self.window(va, len, false)?;
        let r = w.read(va, out);
        self.retag(r, va, len, false)
    }

    /// Reads dwords at `va` into `out` (one object).
    #[inline]
    pub(crate) fn read_dwords(&mut self, va: u64, out: &mut [u32]) -> Access<()> {
        self.read(va, bytemuck::cast_slice_mut(out))
    }

    /// [`Self::write`] of one dword: an atomic store when the inlined fast path of
    /// [`Self::window`] holds the 4-aligned dword (the same bytes land as the copy would
    /// put there, without a `memcpy` call), else exactly [`Self::write`] (which may write
    /// a dword straddling two objects, or fault, as it always did).
    #[inline]
    pub(crate) fn write_dword(&mut self, va: u64, v: u32) -> Access<()> {
        match self.fast_ptr(va, 4, true, 4) {
            Some(p) => {
                // SAFETY: `p` is a 4-aligned cell inside a live writable window.
                unsafe { u32::store_at(p, v) };
                Ok(())
            }
            None => self.write(va, &v.to_ne_bytes()),
        }
    }

    /// Writes `data` at `va`, possibly across several objects.
    #[inline]
    pub(crate) fn write(&mut self, va: u64, data: &[u8]) -> Access<()> {
        match self.fast_ptr(va, data.len() as u64, true, 1) {
            Some(p) => {
                // SAFETY: `[va, va+len)` lies in a live writable window; `data` is a
                // distinct Rust buffer.
                unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
                Ok(())
            }
            None => self.write_slow(va, data),
        }
    }

    #[inline(never)]
    fn write_slow(&mut self, va: u64, data: &[u8]) -> Access<()> {
        if let Ok(w) = self.window(va, data.len() as u64, true) {
            let r = w.write(va, data);
            return self.retag(r, va, data.len() as u64, true);
        }
        let mut done = 0usize;
        while done < data.len() {
            let cur = va
                .checked_add(done as u64)
                .ok_or_else(|| self.fault(va, data.len() as u64, true, FaultKind::NotMapped))?;
            let n = self.span(cur, (data.len() - done) as u64, true)?;
            let Some(chunk) = data.get(done..done + n as usize) else {
                break;
            };
            let w = self.window(cur, n, true)?;
            let r = w.write(cur, chunk);
            self.retag(r, cur, n, true)?;
            done += n as usize;
        }
        Ok(())
    }

    /// How many bytes from `va` (at most `len`) lie in the object holding `va`.
    fn span(&mut self, va: u64, len: u64, write: bool) -> Access<u64> {
        let w = self.window(va, 1, write).map_err(|e| match e {
            AccessError::Fault(f) => AccessError::Fault(Fault { len, ..f }),
            e => e,
        })?;
        let end = w.va() + w.len() as u64;
        Ok(len.min(end - va))
    }

    /// Copies `len` bytes from `src` to `dst` (memmove semantics inside one object pair),
    /// splitting at object boundaries.
    pub(crate) fn copy(&mut self, dst: u64, src: u64, len: u64) -> Access<()> {
        let mut done = 0u64;
        while done < len {
            let (Some(d), Some(s)) = (dst.checked_add(done), src.checked_add(done)) else {
                return Err(self.fault(dst, len, true, FaultKind::NotMapped));
            };
            let n = self.span(s, len - done, false)?;
            let n = self.span(d, n, true)?;
            let sw = self.window(s, n, false)?.clone();
            let dw = self.window(d, n, true)?;
            let r = dw.copy_from(d, &sw, s, n);
            self.retag(r, d, n, true)?;
            done += n;
        }
        Ok(())
    }

    /// Fills `len` bytes at `dst` with the little-endian repetition of `pattern`
    /// (the pattern phase restarts at `dst`), splitting at object boundaries.
    pub(crate) fn fill(&mut self, dst: u64, len: u64, pattern: u32) -> Access<()> {
        let mut done = 0u64;
        let bytes = pattern.to_le_bytes();
        while done < len {
            let Some(d) = dst.checked_add(done) else {
                return Err(self.fault(dst, len, true, FaultKind::NotMapped));
            };
            let n = self.span(d, len - done, true)?;
            // Keep the pattern phase: rotate it by the bytes already written.
            let rot = (done % 4) as u32;
            let pat = pattern.rotate_right(8 * rot);
            let whole = n & !3;
            if whole > 0 {
                let w = self.window(d, whole, true)?;
                let r = w.fill_u32(d, whole, pat);
                self.retag(r, d, whole, true)?;
            }
            let tail = n - whole;
            if tail > 0 {
                let mut t = [0u8; 4];
                for (i, b) in t.iter_mut().enumerate().take(tail as usize) {
                    *b = bytes
                        .get(((done + whole + i as u64) % 4) as usize)
                        .copied()
                        .unwrap_or(0);
                }
                let slice = t.get(..tail as usize).unwrap_or(&[]);
                let w = self.window(d + whole, tail, true)?;
                let r = w.write(d + whole, slice);
                self.retag(r, d + whole, tail, true)?;
            }
            done += n;
        }
        Ok(())
    }

    /// Checks that `[va, va+len)` is mapped (readable), possibly across objects.
    pub(crate) fn probe(&mut self, va: u64, len: u64, write: bool) -> Access<()> {
        if self.fast_ptr(va, len.max(1), write, 1).is_some() {
            // One cached window holds it all: the loop below would find just that.
            return Ok(());
        }
        let mut done = 0u64;
        while done < len.max(1) {
            let Some(cur) = va.checked_add(done) else {
                return Err(self.fault(va, len, write, FaultKind::NotMapped));
            };
            let n = self.span(cur, len.max(1) - done, write)?;
            done += n.max(1);
        }
        Ok(())
    }
}

/// No memory-map generation (generations count up from 0 and never reach it).
const NO_GEN: u64 = u64::MAX;

/// The smallest window a [`Pinned`] keeps (and the largest access it checks): every
/// access through it is at most this long, so the bounds check is one compare.
const MIN_PIN: u64 = 64;

/// One object the engine touches on every packet of a queue (its ring, read and write
/// index, the signals its packets complete), held outside the shared cache: the window
/// found for it last, re-checked for every access, tagged with the memory-map generation
/// it was translated in. An unmap (`GpuEngines::flush_tlb`) bumps the generation, so the
/// next access translates afresh through [`MemCache`] (and faults there exactly as an
/// uncached access would); a miss of any kind returns `None` and the caller takes its
/// [`MemCache`] path, which does and reports everything as before. The window's hold on
/// unmapped memory ends at that access, or earlier when `GpuEngines::release_windows`
/// has the engine thread [`Pinned::clear`] every pin between packets (a free does).
pub(crate) struct Pinned {
    /// The memory-map generation the window was translated in (`NO_GEN`: nothing
    /// pinned), for reads; for writes the same when the window is writable, else
    /// `NO_GEN` (so that a write's check is the same one compare).
    gen: u64,
    wgen: u64,
    /// The window's first GPU address, length (0: nothing pinned; at least
    /// [`MIN_PIN`] while pinned), host address and writability, copied out of `win` so
    /// that the check per access is two compares.
    base: u64,
    span: u64,
    host: *mut u8,
    writable: bool,
    /// Keeps the memory behind `host` alive.
    win: Option<MemWindow>,
}

impl std::fmt::Debug for Pinned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pinned")
            .field("gen", &self.gen)
            .field("wgen", &self.wgen)
            .field("base", &self.base)
            .field("span", &self.span)
            .field("writable", &self.writable)
            .finish_non_exhaustive()
    }
}

impl Default for Pinned {
    fn default() -> Self {
        Pinned {
            gen: NO_GEN,
            wgen: NO_GEN,
            base: 0,
            span: 0,
            host: core::ptr::null_mut(),
            writable: false,
            win: None,
        }
    }
}

impl Pinned {
    /// The host address of `[va, va+len)` (`va` `align`-aligned, writable when `write`)
    /// through the pinned window, re-pinned from `mem` when the memory map changed or
    /// the window does not hold it; `None` when `mem` does not translate it either (the
    /// caller's [`MemCache`] access reports the fault).
    #[inline(always)]
    pub(crate) fn ptr(
        &mut self,
        mem: &mut MemCache,
        va: u64,
        len: u64,
        write: bool,
        align: u64,
    ) -> Option<*mut u8> {
        if va % align != 0 {
            return None;
        }
        let gen = mem.tlb.tlb_gen.load(Ordering::Acquire);
        // A matching generation means a pinned window (writable for a write), so
        // `span >= MIN_PIN >= len`: `off <= span - len` is `off + len <= span` without
        // overflow, and rejects `va` below `base` (the subtraction wraps). A 0-byte
        // access is checked as a 1-byte one (`off < span`).
        debug_assert!(len <= MIN_PIN);
        let off = va.wrapping_sub(self.base);
        let want = if write { self.wgen } else { self.gen };
        if gen == want && off <= self.span.wrapping_sub(len.max(1)) {
            // SAFETY: `off + len <= span`: inside the pinned window's memory.
            return Some(unsafe { self.host.add(off as usize) });
        }
        self.repin(mem, va, len, write, gen)
    }

    /// [`Self::ptr`] past the pinned window: the generation is read before the
    /// translation, so a flush racing with it is seen at the next access.
    #[inline(never)]
    fn repin(
        &mut self,
        mem: &mut MemCache,
        va: u64,
        len: u64,
        write: bool,
        gen: u64,
    ) -> Option<*mut u8> {
        self.clear();
        let w = mem.window(va, len, write).ok()?.clone();
        let host = w.host_ptr(w.va(), 0, false).ok()?;
        let p = w.host_ptr(va, len, write).ok()?;
        if (w.len() as u64) < MIN_PIN {
            // Too small for the one-compare bounds check: this access only.
            return Some(p);
        }
        self.base = w.va();
        self.span = w.len() as u64;
        self.host = host;
        self.writable = w.writable();
        self.gen = gen;
        self.wgen = if self.writable { gen } else { NO_GEN };
        self.win = Some(w);
        Some(p)
    }

    /// Whether the pinned window holds `[va, va+len)`. It does not check the memory-map
    /// generation: only meaningful right after [`Self::ptr`] returned `Some` (which did).
    #[inline(always)]
    pub(crate) fn holds(&self, va: u64, len: u64) -> bool {
        let off = va.wrapping_sub(self.base);
        off < self.span && len <= self.span - off
    }

    /// [`MemCache::write_dword`] through the pinned window.
    #[inline(always)]
    pub(crate) fn write_dword(&mut self, mem: &mut MemCache, va: u64, v: u32) -> Access<()> {
        match self.ptr(mem, va, 4, true, 4) {
            Some(p) => {
                // SAFETY: `p` is a 4-aligned cell inside a live writable window.
                unsafe { u32::store_at(p, v) };
                Ok(())
            }
            None => mem.write_dword(va, v),
        }
    }

    /// Drops the window (the object moved, e.g. the ring was reconfigured).
    pub(crate) fn clear(&mut self) {
        self.gen = NO_GEN;
        self.wgen = NO_GEN;
        self.span = 0;
        self.host = core::ptr::null_mut();
        self.win = None;
    }

    /// [`MemCache::load_u64`] through the pinned window.
    #[inline(always)]
    pub(crate) fn load_u64(&mut self, mem: &mut MemCache, va: u64) -> Access<u64> {
        match self.ptr(mem, va, 8, false, 8) {
            // SAFETY: as in `load_u32`.
            Some(p) => Ok(unsafe { AtomicU64::from_ptr(p.cast()) }.load(Ordering::Acquire)),
            None => mem.load_u64(va),
        }
    }

    /// [`MemCache::store_u32`] through the pinned window.
    #[inline(always)]
    pub(crate) fn store_u32(&mut self, mem: &mut MemCache, va: u64, v: u32) -> Access<()> {
        self.store(mem, va, v)
    }

    /// [`MemCache::store_u64`] through the pinned window.
    #[inline(always)]
    pub(crate) fn store_u64(&mut self, mem: &mut MemCache, va: u64, v: u64) -> Access<()> {
        self.store(mem, va, v)
    }

    #[inline(always)]
    fn store<T: Word>(&mut self, mem: &mut MemCache, va: u64, v: T) -> Access<()> {
        match self.ptr(mem, va, T::SIZE, true, T::SIZE) {
            Some(p) => {
                // SAFETY: `p` is a `T::SIZE`-aligned cell inside a live writable window.
                unsafe { T::store_at(p, v) };
                Ok(())
            }
            None => mem.store(va, v),
        }
    }
}

/// One fixed cell a queue touches on every packet (`write_dispatch_id`,
/// `read_dispatch_id`, `queue_properties`: the same address each time), `LEN` bytes,
/// writable when `WRITE`: its host address, found once per memory-map generation. The
/// check per access is the generation and the address (no bounds or alignment: both
/// were checked when the cell was pinned, for exactly this address). Like [`Pinned`],
/// an unmap bumps the generation, so the next access translates afresh through
/// [`MemCache`] and a miss of any kind takes the caller's [`MemCache`] path, which does
/// and reports everything as before.
pub(crate) struct PinnedCell<const LEN: u64, const WRITE: bool> {
    /// The memory-map generation `host` was translated in (`NO_GEN`: none).
    gen: u64,
    /// The cell's GPU address.
    va: u64,
    /// The cell's host address.
    host: *mut u8,
    /// Keeps the memory behind `host` alive.
    win: Option<MemWindow>,
}

impl<const LEN: u64, const WRITE: bool> std::fmt::Debug for PinnedCell<LEN, WRITE> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedCell")
            .field("gen", &self.gen)
            .field("va", &self.va)
            .finish_non_exhaustive()
    }
}

impl<const LEN: u64, const WRITE: bool> Default for PinnedCell<LEN, WRITE> {
    fn default() -> Self {
        PinnedCell {
            gen: NO_GEN,
            va: 0,
            host: core::ptr::null_mut(),
            win: None,
        }
    }
}

impl<const LEN: u64, const WRITE: bool> PinnedCell<LEN, WRITE> {
    /// The host address of the `LEN`-byte cell at `va` (`LEN`-aligned, writable when
    /// `WRITE`), re-pinned from `mem` when the memory map changed or `va` is not the
    /// pinned cell; `None` when `mem` does not translate it either.
    #[inline(always)]
    fn ptr(&mut self, mem: &mut MemCache, va: u64) -> Option<*mut u8> {
        let gen = mem.tlb.tlb_gen.load(Ordering::Acquire);
        if gen == self.gen && va == self.va {
            return Some(self.host);
        }
        self.repin(mem, va, gen)
    }

    /// [`Self::ptr`] past the pinned cell: the generation is read before the
    /// translation, so a flush racing with it is seen at the next access.
    #[inline(never)]
    fn repin(&mut self, mem: &mut MemCache, va: u64, gen: u64) -> Option<*mut u8> {
        self.clear();
        if va % LEN != 0 {
            return None;
        }
        let w = mem.window(va, LEN, WRITE).ok()?.clone();
        let p = w.host_ptr(va, LEN, WRITE).ok()?;
        self.va = va;
        self.host = p;
        self.gen = gen;
        self.win = Some(w);
        Some(p)
    }

    /// Drops the cell's window.
    pub(crate) fn clear(&mut self) {
        self.gen = NO_GEN;
        self.host = core::ptr::null_mut();
        self.win = None;
    }
}

impl PinnedCell<4, false> {
    /// [`MemCache::load_u32`] through the pinned cell.
    #[inline(always)]
    pub(crate) fn load_u32(&mut self, mem: &mut MemCache, va: u64) -> Access<u32> {
        match self.ptr(mem, va) {
            // SAFETY: a 4-aligned cell inside a live window; shared memory is accessed
            // atomically.
            Some(p) => Ok(unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Acquire)),
            None => mem.load_u32(va),
        }
    }
}

impl PinnedCell<8, false> {
    /// [`MemCache::load_u64`] through the pinned cell.
    #[inline(always)]
    pub(crate) fn load_u64(&mut self, mem: &mut MemCache, va: u64) -> Access<u64> {
        match self.ptr(mem, va) {
            // SAFETY: an 8-aligned cell inside a live window; shared memory is accessed
            // atomically.
            Some(p) => Ok(unsafe { AtomicU64::from_ptr(p.cast()) }.load(Ordering::Acquire)),
            None => mem.load_u64(va),
        }
    }
}

impl PinnedCell<8, true> {
    /// [`MemCache::store_u64`] through the pinned cell.
    #[inline(always)]
    pub(crate) fn store_u64(&mut self, mem: &mut MemCache, va: u64, v: u64) -> Access<()> {
        match self.ptr(mem, va) {
            Some(p) => {
                // SAFETY: `p` is an 8-aligned cell inside a live writable window.
                unsafe { u64::store_at(p, v) };
                Ok(())
            }
            None => mem.store(va, v),
        }
    }
}

/// The dword and qword the engines store atomically (release): one store path for both.
trait Word: Copy {
    /// Size and alignment in bytes.
    const SIZE: u64;
    /// Stores `v` at `p`.
    ///
    /// # Safety
    /// `p` is a `SIZE`-aligned cell of shared memory that stays mapped for the call.
    unsafe fn store_at(p: *mut u8, v: Self);
    /// Stores `v` at `va` through `w` (which checks the window).
    fn store_in(w: &MemWindow, va: u64, v: Self) -> Result<(), Fault>;
}

/// [`Word`] for the dword and the qword: the same code over their atomics.
macro_rules! impl_word {
    ($t:ty, $atomic:ty, $store:ident) => {
        impl Word for $t {
            const SIZE: u64 = core::mem::size_of::<$t>() as u64;
            #[inline(always)]
            unsafe fn store_at(p: *mut u8, v: $t) {
                // SAFETY: the caller's contract; shared memory is accessed atomically.
                unsafe { <$atomic>::from_ptr(p.cast()) }.store(v, Ordering::Release);
            }
            fn store_in(w: &MemWindow, va: u64, v: $t) -> Result<(), Fault> {
                w.$store(va, v)
            }
        }
    };
}
impl_word!(u32, AtomicU32, store_u32);
impl_word!(u64, AtomicU64, store_u64);

/// A window's fault as the engine reports it: on its GPU, a read or a write.
fn tag(gpu_id: u32, write: bool) -> impl Fn(Fault) -> AccessError {
    move |f| AccessError::Fault(Fault { gpu_id, write, ..f })
}

#[cfg(test)]
mod tests {
    //! [`Pinned`]'s one-compare checks: a read-only window pinned by a read is never
    //! written through, a window smaller than [`MIN_PIN`] is used for its access but not
    //! kept, and an unmap (a new generation) is seen at the next access.

    use super::*;
    use crate::engine::{CountingInterrupts, EngineConfig, GpuEngines};
    use crate::gpumem::{HeapMemory, MemWindow};
    use std::ptr::NonNull;

    const RO_VA: u64 = 0x10_0000;
    const SMALL_VA: u64 = 0x20_0000;

    /// A [`HeapMemory`] plus a read-only page at `RO_VA` and a 16-byte object at
    /// `SMALL_VA`.
    struct TestMemory {
        heap: HeapMemory,
        ro: Arc<Box<[AtomicU64]>>,
        small: Arc<Box<[AtomicU64]>>,
    }

    impl GpuMemory for TestMemory {
        fn resolve(&self, gpu_id: u32, va: u64, len: u64) -> Result<MemWindow, Fault> {
            for (base, buf, writable) in [(RO_VA, &self.ro, false), (SMALL_VA, &self.small, true)] {
                let size = buf.len() as u64 * 8;
                if va >= base && va.saturating_add(len) <= base + size {
                    let ptr = NonNull::new(buf.as_ptr() as *mut u8).unwrap_or(NonNull::dangling());
                    // SAFETY: the buffer lives as long as its Arc, which the window owns;
                    // it is only accessed through atomics and raw copies.
                    return Ok(unsafe {
                        MemWindow::new(base, ptr, size as usize, writable, buf.clone())
                    });
                }
            }
            self.heap.resolve(gpu_id, va, len)
        }
    }

    fn cache(mem: Arc<TestMemory>) -> (GpuEngines, MemCache) {
        let cfg = EngineConfig::for_unit_test(pm4::GfxFamily::Gfx9, 1);
        let engines = GpuEngines::new(cfg, mem, Arc::new(CountingInterrupts::default()));
        let mc = MemCache::new(engines.inner.clone());
        (engines, mc)
    }

    fn words(n: usize) -> Arc<Box<[AtomicU64]>> {
        Arc::new((0..n).map(|_| AtomicU64::new(0)).collect())
    }

    #[test]
    fn pinned_checks_writability_size_and_generation() {
        let mem = Arc::new(TestMemory {
            heap: HeapMemory::new(),
            ro: words(512),
            small: words(2),
        });
        mem.ro[1].store(5, Ordering::Relaxed);
        let (engines, mut mc) = cache(mem.clone());

        // A read pins the read-only page; a write through the same pin is refused and
        // faults (read-only) through the cache, leaving the memory as it was.
        let mut pin = Pinned::default();
        assert!(pin.ptr(&mut mc, RO_VA + 8, 8, false, 8).is_some());
        assert!(pin.holds(RO_VA + 8, 8), "pinned");
        assert_eq!(pin.load_u64(&mut mc, RO_VA + 8).unwrap(), 5);
        assert!(pin.ptr(&mut mc, RO_VA + 8, 8, true, 8).is_none());
        match pin.store_u64(&mut mc, RO_VA + 8, 9) {
            Err(AccessError::Fault(f)) => assert_eq!(f.kind, FaultKind::ReadOnly),
            r => panic!("a write to a read-only page: {r:?}"),
        }
        assert_eq!(mem.ro[1].load(Ordering::Relaxed), 5);

        // A 16-byte object: used for the access, not kept; beyond it, no window.
        let mut pin = Pinned::default();
        pin.store_u64(&mut mc, SMALL_VA + 8, 3).unwrap();
        assert_eq!(mem.small[1].load(Ordering::Relaxed), 3);
        assert!(!pin.holds(SMALL_VA + 8, 8), "too small to keep");
        assert!(pin.ptr(&mut mc, SMALL_VA + 12, 8, false, 4).is_none());

        // A writable heap object, pinned; unmapped (a new generation): the next access
        // faults instead of using the old window.
        let heap = mem.heap.add_region(0x40_0000, 4096);
        let mut pin = Pinned::default();
        pin.store_u32(&mut mc, 0x40_0010, 7).unwrap();
        assert_eq!(heap.load_u32(0x40_0010).unwrap(), 7);
        assert!(mem.heap.remove_region(0x40_0000));
        engines.flush_tlb();
        assert!(pin.store_u32(&mut mc, 0x40_0010, 8).is_err());
        assert_eq!(heap.load_u32(0x40_0010).unwrap(), 7);
    }
}
