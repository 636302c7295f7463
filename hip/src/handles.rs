//! Handle registries: a C handle is a token `generation << 32 | index << 4 | kind` naming
//! a slot of a slab, never a pointer to freed memory, so a destroyed handle (its slot's
//! generation moved on) or a foreign one (another kind, or no slot) is rejected without
//! touching freed memory.
//!
//! Lookups take no lock: a slot's state is one atomic word, read with a plain load, and
//! equal to the token while the slot holds it (so a check is one compare with the token):
//! `generation << 32 | index << 4 | kind`, with kind 0 (no token has it) while the slot
//! is free, the generation being the one its next token gets. The object itself is an `Arc` in the slot behind a per-slot
//! mutex, taken only on a thread's first lookup of a handle: [`Cache`] keeps the thread's
//! recent `(token, Arc)` pairs and a hit only re-reads the slot's state, so repeated calls
//! on one stream or event do no atomic read-modify-write at all.

use std::cell::{Ref, RefCell};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Slots per segment.
const SEG: usize = 256;
/// Segments per registry: at most `SEG * NSEG` (1 Mi) live handles of one kind.
const NSEG: usize = 4096;

struct Slot<T> {
    /// The live token, or the next one with kind 0 while free; the generation moves on at
    /// every removal.
    state: AtomicU64,
    value: Mutex<Option<Arc<T>>>,
}

struct Segment<T> {
    slots: [Slot<T>; SEG],
}

/// Free slot indices and the next never-used one.
struct FreeList {
    free: Vec<u32>,
    next: u32,
}

/// A slab of live handles of one kind.
pub struct Registry<T> {
    /// 1..=15, in the token's low bits: a token of another kind is foreign.
    kind: u64,
    segs: [AtomicPtr<Segment<T>>; NSEG],
    free: Mutex<FreeList>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Generations start at 1, so every token is at least `1 << 32`: HIP's special streams
/// (0, 1, 2) are never tokens.
const FIRST_GENERATION: u64 = 1;

/// The token's index field (above the kind's 4 bits, below the generation's 32).
const INDEX_MASK: u64 = 0x0fff_ffff;

/// The free state after `token` is removed: the next generation (wrapping to
/// [`FIRST_GENERATION`], never 0), kind 0.
fn next_free(token: u64) -> u64 {
    let generation = match (token >> 32).wrapping_add(1) & 0xffff_ffff {
        0 => FIRST_GENERATION,
        g => g,
    };
    generation << 32 | (token & (INDEX_MASK << 4))
}

impl<T> Registry<T> {
    /// An empty registry of kind `kind` (1..=15, one per handle type; const, for statics).
    pub const fn new(kind: u8) -> Self {
        assert!(kind >= 1 && kind <= 15);
        Registry {
            kind: kind as u64,
            segs: [const { AtomicPtr::new(std::ptr::null_mut()) }; NSEG],
            free: Mutex::new(FreeList {
                free: Vec::new(),
                next: 0,
            }),
        }
    }

    fn slot(&self, index: usize) -> Option<&Slot<T>> {
        let seg = self.segs.get(index / SEG)?.load(Ordering::Acquire);
        // SAFETY: segments are allocated once, published with Release and never freed
        // (registries are statics), so a non-null pointer is a live segment.
        let seg = unsafe { seg.as_ref() }?;
        Some(&seg.slots[index % SEG])
    }

    /// The slot and expected state (the token itself) of `token`, if it is of this kind
    /// and in range.
    fn decode(&self, token: usize) -> Option<(&Slot<T>, u64)> {
        let t = token as u64;
        if t & 15 != self.kind {
            return None;
        }
        let index = (t >> 4 & INDEX_MASK) as usize;
        Some((self.slot(index)?, t))
    }

    /// Whether `token` names a live object of this registry (one atomic load).
    #[inline]
    pub fn is_live(&self, token: usize) -> bool {
        self.decode(token)
            .is_some_and(|(s, want)| s.state.load(Ordering::Acquire) == want)
    }

    /// Register `v`; its token. `None` when the registry is full.
    pub fn insert(&self, v: T) -> Option<usize> {
        let mut fl = lock(&self.free);
        let index = match fl.free.pop() {
            Some(i) => i as usize,
            None => {
                let i = fl.next as usize;
                if i >= SEG * NSEG {
                    return None;
                }
                if i % SEG == 0 {
                    let seg = Box::new(Segment {
                        slots: std::array::from_fn(|j| Slot {
                            state: AtomicU64::new(FIRST_GENERATION << 32 | ((i + j) as u64) << 4),
                            value: Mutex::new(None),
                        }),
                    });
                    self.segs[i / SEG].store(Box::into_raw(seg), Ordering::Release);
                }
                fl.next += 1;
                i
            }
        };
        drop(fl);
        let slot = self.slot(index)?;
        *lock(&slot.value) = Some(Arc::new(v));
        let token = slot.state.load(Ordering::Relaxed) | self.kind;
        slot.state.store(token, Ordering::Release);
        Some(token as usize)
    }

    /// The live object of `token`.
    pub fn get(&self, token: usize) -> Option<Arc<T>> {
        let (slot, want) = self.decode(token)?;
        let v = lock(&slot.value);
        // Checked under the slot's lock: a removal clears the value under it.
        if slot.state.load(Ordering::Acquire) != want {
            return None;
        }
        v.clone()
    }

    /// Unregister `token`; the object (dropped when the last user lets go).
    pub fn remove(&self, token: usize) -> Option<Arc<T>> {
        let (slot, want) = self.decode(token)?;
        let v = {
            let mut v = lock(&slot.value);
            if slot
                .state
                .compare_exchange(want, next_free(want), Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return None;
            }
            v.take()
        };
        lock(&self.free)
            .free
            .push((token as u64 >> 4 & INDEX_MASK) as u32);
        v
    }

    /// The tokens and objects of every live handle.
    fn live(&self) -> Vec<(usize, Arc<T>)> {
        let n = lock(&self.free).next as usize;
        let mut all = Vec::new();
        for index in 0..n {
            let Some(slot) = self.slot(index) else {
                continue;
            };
            let v = lock(&slot.value);
            let state = slot.state.load(Ordering::Acquire);
            if let (Some(a), true) = (v.as_ref(), state & 15 != 0) {
                all.push((state as usize, a.clone()));
            }
        }
        all
    }

    /// Unregister every object `keep` rejects.
    pub fn retain(&self, mut keep: impl FnMut(&T) -> bool) {
        for (t, a) in self.live() {
            if !keep(&a) {
                self.remove(t);
            }
        }
    }

    /// The token of the first live object `pred` accepts.
    pub fn find(&self, mut pred: impl FnMut(&T) -> bool) -> Option<usize> {
        self.live()
            .into_iter()
            .find(|(_, a)| pred(a))
            .map(|(t, _)| t)
    }

    /// Every live object.
    pub fn all(&self) -> Vec<Arc<T>> {
        self.live().into_iter().map(|(_, a)| a).collect()
    }
}

/// Entries of a thread's [`Cache`].
const WAYS: usize = 4;

/// One cached lookup: the token, its slot's state word (equal to the token while it is
/// live), the object.
type Way<T> = (usize, &'static AtomicU64, Arc<T>);

/// A thread's recent lookups of one registry. A hit costs one load of the slot's state
/// (kept as a reference: segments are never freed); the `Arc` held here keeps the object
/// alive while it is used, even if another thread removes the handle meanwhile.
pub struct Cache<T> {
    ways: [Option<Way<T>>; WAYS],
    next: usize,
}

impl<T> Default for Cache<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T> Cache<T> {
    /// An empty cache (const, for thread-locals).
    pub const fn new() -> Self {
        Cache {
            ways: [const { None }; WAYS],
            next: 0,
        }
    }

    /// Forget `token` (the calling thread removed it: drop our reference now).
    pub fn forget(&mut self, token: usize) {
        for w in &mut self.ways {
            if w.as_ref().is_some_and(|(t, ..)| *t == token) {
                *w = None;
            }
        }
    }
}

/// Run `f` on the live object of `token`, looked up through the thread's `cache` first.
/// `None` when `token` is not a live handle of `reg`.
#[inline(always)]
pub fn with<T, R>(
    cache: &RefCell<Cache<T>>,
    reg: &'static Registry<T>,
    token: usize,
    f: impl FnOnce(&Arc<T>) -> R,
) -> Option<R> {
    if let Ok(c) = cache.try_borrow() {
        let hit = c
            .ways
            .iter()
            .flatten()
            .find(|(t, st, _)| *t == token && st.load(Ordering::Acquire) == token as u64);
        if let Some((.., a)) = hit {
            // `c` stays borrowed (shared: `f` may look up other handles) while `f` runs.
            return Some(f(a));
        }
    }
    miss(cache, reg, token, f)
}

/// The thread's cached object of `token`, borrowed from `cache` (the guard keeps the
/// cache shared while it is used: a nested lookup may read it but not evict). `None` on a
/// miss: then [`with`] looks it up.
#[inline(always)]
pub fn hit<T>(cache: &RefCell<Cache<T>>, token: usize) -> Option<Ref<'_, Arc<T>>> {
    let c = cache.try_borrow().ok()?;
    Ref::filter_map(c, |c| {
        c.ways
            .iter()
            .flatten()
            .find(|(t, st, _)| *t == token && st.load(Ordering::Acquire) == token as u64)
            .map(|(.., a)| a)
    })
    .ok()
}

/// The cached entry of `token`, if the thread's `cache` holds it live: its slot's state
/// word (equal to `token` while it is live) and the object (kept alive by the cache until
/// the entry is replaced, forgotten or the cache dropped).
pub fn cached<T>(
    cache: &RefCell<Cache<T>>,
    token: usize,
) -> Option<(&'static AtomicU64, *const T)> {
    let c = cache.try_borrow().ok()?;
    c.ways
        .iter()
        .flatten()
        .find(|(t, st, _)| *t == token && st.load(Ordering::Acquire) == token as u64)
        .map(|(_, st, a)| (*st, Arc::as_ptr(a)))
}

#[cold]
#[inline(never)]
fn miss<T, R>(
    cache: &RefCell<Cache<T>>,
    reg: &'static Registry<T>,
    token: usize,
    f: impl FnOnce(&Arc<T>) -> R,
) -> Option<R> {
    let a = reg.get(token)?;
    let (slot, want) = reg.decode(token)?;
    if let Ok(mut c) = cache.try_borrow_mut() {
        // Drop what is no longer live (removed by another thread), then take a way.
        for w in &mut c.ways {
            if w.as_ref()
                .is_some_and(|(t, st, _)| st.load(Ordering::Acquire) != *t as u64)
            {
                *w = None;
            }
        }
        let i = match c.ways.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                let i = c.next;
                c.next = (i + 1) % WAYS;
                i
            }
        };
        debug_assert_eq!(want, token as u64);
        c.ways[i] = Some((token, &slot.state, a.clone()));
    }
    Some(f(&a))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removed_and_foreign_tokens_are_unknown() {
        static A: Registry<u32> = Registry::new(1);
        static B: Registry<u32> = Registry::new(2);
        let ta = A.insert(1).unwrap();
        let tb = B.insert(2).unwrap();
        assert_ne!(ta, tb);
        assert!(ta > 2 && tb > 2, "0, 1, 2 are HIP's special streams");
        assert_eq!(A.get(ta).as_deref(), Some(&1));
        assert!(A.get(tb).is_none(), "a token of another kind is foreign");
        assert!(A.get(0xdead).is_none());
        assert!(A.get(usize::MAX).is_none());
        assert_eq!(A.remove(ta).as_deref(), Some(&1));
        assert!(A.get(ta).is_none() && A.remove(ta).is_none());
        // The slot is reused under a new generation: the old token stays dead.
        let ta2 = A.insert(3).unwrap();
        assert_ne!(ta, ta2);
        assert!(A.get(ta).is_none());
        assert_eq!(A.get(ta2).as_deref(), Some(&3));
        assert_eq!(B.all().len(), 1);
        B.retain(|v| *v != 2);
        assert!(B.get(tb).is_none() && B.all().is_empty());
    }

    #[test]
    fn slot_state_equals_the_live_token_only() {
        static R: Registry<u8> = Registry::new(5);
        let t = R.insert(1).unwrap();
        let (slot, want) = R.decode(t).unwrap();
        assert_eq!(want, t as u64);
        assert_eq!(
            slot.state.load(Ordering::Acquire),
            t as u64,
            "live: the token"
        );
        R.remove(t).unwrap();
        let free = slot.state.load(Ordering::Acquire);
        assert_eq!(free & 15, 0, "free: kind 0, equal to no token");
        assert_eq!(free >> 32, (t as u64 >> 32) + 1, "the next generation");
        let t2 = R.insert(2).unwrap();
        assert_eq!(t2 as u64 & !15, free, "reused under the next generation");
        // The generation wraps past 0 (0, 1 and 2 are HIP's special streams).
        let last = 0xffff_ffffu64 << 32 | 7 << 4 | 5;
        assert_eq!(next_free(last), FIRST_GENERATION << 32 | 7 << 4);
    }

    #[test]
    fn cache_sees_removal_by_another_thread() {
        static R: Registry<String> = Registry::new(3);
        let cache = RefCell::new(Cache::new());
        let t = R.insert("s".into()).unwrap();
        assert_eq!(with(&cache, &R, t, |s| s.to_string()).as_deref(), Some("s"));
        assert_eq!(with(&cache, &R, t, |s| s.len()), Some(1), "hit");
        std::thread::spawn(move || assert!(R.remove(t).is_some()))
            .join()
            .unwrap();
        assert_eq!(with(&cache, &R, t, |s| s.len()), None, "removed elsewhere");
        // More handles than ways: every one still resolves, and nested lookups work.
        let ts: Vec<usize> = (0..9).map(|i| R.insert(i.to_string()).unwrap()).collect();
        for (i, t) in ts.iter().enumerate() {
            let nested = with(&cache, &R, *t, |s| {
                with(&cache, &R, ts[0], |z| format!("{s}{z}"))
            });
            assert_eq!(nested.flatten(), Some(format!("{i}0")));
        }
        assert_eq!(R.all().len(), 9);
    }
}
