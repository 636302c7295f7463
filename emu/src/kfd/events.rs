//! Events: signal events with their event page slots, hardware-exception and memory
//! events, SET/RESET, and WAIT_EVENTS with the KFD 1.14 event age. Engines raise
//! interrupts through the [`Interrupts`] implementation here.
//!
//! Kernel rules modelled here are listed, with their sources, in
//! `firmware-notes/kfd-events.md`.
//!
//! # State and locking
//!
//! Each event's `signaled` flag, event age, auto-reset flag, liveness and two waiter bits
//! live in one atomic state word. The words of signal (and debug) events, whose ids are
//! their event page slots, are a fixed table of `KFD_SIGNAL_EVENT_LIMIT` words indexed
//! by id; other events (ids from `KFD_FIRST_NONSIGNAL_EVENT_ID`) keep theirs in their
//! [`Event`]. The events mutex guards the rest: the id map, each event's list of
//! waiters, the waiters' flags, the exception data, the page bookkeeping. The waiter bits
//! change only under the mutex: `WAITERS` is set while the event's waiter list is
//! non-empty (KFD's `waitqueue_active(&ev->wq)`), `PENDING` whenever a waiter on that
//! list has not yet been activated for this event.
//!
//! A set (an interrupt, SET_EVENT, a queue error) is `set_event` of kfd_events.c applied
//! to the word by compare-and-swap: age + 1, `signaled = !auto_reset || !WAITERS`. When
//! the word it read has no `PENDING` bit, that CAS is the whole set and no lock is
//! taken: there is no waiter to activate (none registered, or all already activated and
//! woken by an earlier set, as while a host sleeps in a synchronize that many
//! completions end). When it has the bit, the setter takes the mutex and does the set
//! there (the same CAS, re-read under the lock, clearing `PENDING`), activates every
//! waiter of the event and notifies each whose flag it flipped after unlocking. Each
//! WAIT_EVENTS call sleeps on its own condition variable (KFD's per-event wait queues:
//! `wake_up_all(&ev->wq)` wakes only the waiters of the event set, not every sleeper of
//! the process).
//!
//! # Why no wake-up is lost
//!
//! A waiter registers on an event under the mutex with one atomic read-modify-write of
//! the word: it reads `signaled` and the age (consuming an auto-reset signal) and, unless
//! that activated it, sets `WAITERS | PENDING` in the same RMW; it then pushes itself
//! onto the waiter list and keeps the mutex until it sleeps on its condition variable
//! (which releases the mutex atomically). A set is also one RMW of the same word. RMWs of
//! one atomic location are totally ordered (its modification order; every RMW reads the
//! value written by the one just before it), so for a registration R and a set S:
//!
//! - S before R: R reads S's new age and `signaled`, so R is activated at once (its age
//!   differs from `last_event_age`, or the event is signaled) and does not sleep. (When
//!   another waiter consumed an auto-reset signal in between and R checks no age, R is
//!   not activated, exactly as in kfd_events.c: that other waiter took the signal.)
//! - R before S: S reads `PENDING` (set by R, cleared only by a set under the mutex that
//!   activated R, or when R left), so S does not finish lock-free; it takes the mutex,
//!   which it gets only once the waiter sleeps on its condition variable (or left), sets
//!   the waiter's flag under the mutex and notifies it after unlocking; the waiter
//!   re-tests its flags under the mutex whenever it wakes, so the set is seen.
//!
//! Hence a lock-free set never passes a waiter whose flag for the event is unset. Plain
//! loads or stores of the bits in place of the RMWs (check, then register) would open
//! the window in which a set lands between the check and the registration. Destroying an
//! event zeroes its word under the mutex (a racing lock-free set then finds it not live
//! and does nothing, as a KFD interrupt that finds no event in the IDR) and fails its
//! waiters. Tests: `interrupts_racing_registrations_lose_no_wakeup`,
//! `concurrent_sets_count_exactly_and_only_their_event` here, and
//! `tests/kfd_events.rs` `many_waiters_many_setters_no_lost_wakeup`.
//!
//! The age is kept in the word's upper 58 bits (KFD: a `u64`), so it wraps back to 2
//! after 2^58 - 1 sets instead of 2^64 - 1 (9 years at one set per nanosecond); user
//! space only compares ages for equality.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use kfd::abi::{
    self, EventData, HsaHwExceptionData, HsaMemoryExceptionData, MemoryExceptionFailure,
};
use rustix::io::Errno;

use crate::engine::{Interrupts, PendingWakes, QueueFault};
use crate::gpumem::FaultKind;
use crate::kfd::hostmem::Backing;

/// The value of an unsignaled event slot (`UNSIGNALED_EVENT_SLOT` in kfd_events.c).
pub const UNSIGNALED_EVENT_SLOT: u64 = u64::MAX;
/// First id of non-signal events (`KFD_FIRST_NONSIGNAL_EVENT_ID`).
pub const KFD_FIRST_NONSIGNAL_EVENT_ID: u32 = 0x8000_0000;
/// Event page bytes (`KFD_SIGNAL_EVENT_LIMIT * 8`).
const PAGE_BYTES: u64 = abi::KFD_SIGNAL_EVENT_LIMIT as u64 * 8;

/// State word: `ev->signaled`.
const W_SIGNALED: u64 = 1;
/// State word: the event's waiter list is non-empty (changed only under the mutex).
const W_WAITERS: u64 = 1 << 1;
/// State word: an event exists (a zero word is no event).
const W_LIVE: u64 = 1 << 2;
/// State word: SET/RESET may change it (`event_can_be_cpu_signaled`: a SIGNAL event).
const W_CPU: u64 = 1 << 3;
/// State word: `ev->auto_reset`.
const W_AUTO_RESET: u64 = 1 << 4;
/// State word: a registered waiter's flag for this event is not yet set (changed only
/// under the mutex): a set must activate and wake it.
const W_PENDING: u64 = 1 << 5;
/// State word: the event age is the bits from here up.
const AGE_SHIFT: u32 = 6;
/// The largest age a state word holds; the next one is 2.
const AGE_MAX: u64 = u64::MAX >> AGE_SHIFT;

/// The event age in state word `w`.
fn word_age(w: u64) -> u64 {
    w >> AGE_SHIFT
}

/// A new event's state word (age 1, unsignaled, no waiter).
fn new_word(ty: u32, auto_reset: bool) -> u64 {
    let mut w = W_LIVE | (1 << AGE_SHIFT);
    if can_cpu_signal(ty) {
        w |= W_CPU;
    }
    if auto_reset {
        w |= W_AUTO_RESET;
    }
    w
}

/// `set_event` applied to state word `w`: `signaled = !auto_reset || no waiter`, age + 1
/// (wrapping back to 2, never 0 or 1).
fn set_word(w: u64) -> u64 {
    let age = match word_age(w) {
        AGE_MAX => 2,
        a => a + 1,
    };
    let signaled = w & W_AUTO_RESET == 0 || w & W_WAITERS == 0;
    (w & (W_WAITERS | W_PENDING | W_LIVE | W_CPU | W_AUTO_RESET))
        | (age << AGE_SHIFT)
        | if signaled { W_SIGNALED } else { 0 }
}

/// What a set without the mutex did.
#[derive(Debug, PartialEq, Eq)]
enum TrySet {
    /// Set: the event has no waiter to activate.
    Done,
    /// Not set: the event has a waiter to activate; set it under the mutex.
    Waiters,
    /// No live event with the `need` bits.
    Absent,
}

/// A set of the event whose state word is `word` without the mutex (see the module docs):
/// done only when the word has no `PENDING` bit and has every bit of `need`.
#[inline]
fn try_set(word: &AtomicU64, need: u64) -> TrySet {
    let need = need | W_LIVE;
    let mut w = word.load(Ordering::Acquire);
    loop {
        if w & need != need {
            return TrySet::Absent;
        }
        if w & W_PENDING != 0 {
            return TrySet::Waiters;
        }
        match word.compare_exchange_weak(w, set_word(w), Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return TrySet::Done,
            Err(cur) => w = cur,
        }
    }
}

#[derive(Debug)]
struct Event {
    ty: u32,
    /// The state word of a non-signal event (signal events use [`Events::words`]).
    word: AtomicU64,
    /// (waiter id, index of this event in the waiter's list).
    waiters: Vec<(u64, usize)>,
    mem: HsaMemoryExceptionData,
    hw: HsaHwExceptionData,
}

#[derive(Debug)]
struct Waiter {
    activated: Vec<bool>,
    destroyed: Vec<bool>,
    /// Where this waiter sleeps: notified by whoever sets one of its flags.
    cv: Arc<Condvar>,
}

/// Waiters to notify once the events mutex is released: the first inline (a completion
/// interrupt activates one sleeper, and its wake-up should not cost an allocation), any
/// more in a vector.
#[derive(Default)]
struct Wake {
    first: Option<Arc<Condvar>>,
    more: Vec<Arc<Condvar>>,
}

impl Wake {
    fn new() -> Self {
        Self::default()
    }
}

/// Where a state change puts the waiters it must notify: a [`Wake`] notified after the
/// events mutex is released, or an engine's [`PendingWakes`] (an interrupt raised by an
/// engine thread goes straight there, without an intermediate list).
trait WakeSink {
    fn push(&mut self, cv: Arc<Condvar>);
}

impl WakeSink for Wake {
    fn push(&mut self, cv: Arc<Condvar>) {
        if self.first.is_none() {
            self.first = Some(cv);
        } else {
            self.more.push(cv);
        }
    }
}

impl WakeSink for PendingWakes {
    fn push(&mut self, cv: Arc<Condvar>) {
        PendingWakes::push(self, cv);
    }
}

fn notify(wake: Wake) {
    for cv in wake.first.iter().chain(&wake.more) {
        cv.notify_all();
    }
}

#[derive(Debug)]
struct EvState {
    events: BTreeMap<u32, Event>,
    signal_handle: Option<u64>,
    mapped_size: u64,
    signal_count: u32,
    waiters: BTreeMap<u64, Waiter>,
    next_waiter: u64,
}

/// The process's events.
pub(crate) struct Events {
    gpu_ids: Vec<u32>,
    /// The event page: set once (the first signal event, or a user page), never cleared,
    /// so interrupts read it without the mutex.
    page: OnceLock<Arc<Backing>>,
    /// The state words of signal events, by id (`KFD_SIGNAL_EVENT_LIMIT` of them).
    words: Box<[AtomicU64]>,
    st: Mutex<EvState>,
}

fn can_cpu_signal(ty: u32) -> bool {
    ty == abi::KFD_IOC_EVENT_SIGNAL
}
fn can_gpu_signal(ty: u32) -> bool {
    ty == abi::KFD_IOC_EVENT_SIGNAL || ty == abi::KFD_IOC_EVENT_DEBUG_EVENT
}

/// Event `id`'s slot in the event page, when the page holds it.
fn page_slot(page: &Backing, id: u32) -> Option<&AtomicU64> {
    let off = u64::from(id) * 8;
    if off + 8 > page.len() as u64 {
        return None;
    }
    // SAFETY: in bounds of the alias mapping (8-byte aligned: the mapping is page
    // aligned), which lives as long as `page`; shared memory is only accessed
    // atomically here.
    Some(unsafe { AtomicU64::from_ptr(page.ptr().as_ptr().add(off as usize).cast()) })
}

/// Event `id`'s state word: the table's for signal-page ids (only signal and debug
/// events have those), else the event's own.
fn word_of<'a>(words: &'a [AtomicU64], id: u32, ev: &'a Event) -> &'a AtomicU64 {
    words.get(id as usize).unwrap_or(&ev.word)
}

impl EvState {
    /// `set_event` of event `id` under the mutex (the word's CAS, then every current
    /// waiter activated). Each waiter whose flag this flips goes into `wake` (only then
    /// may a sleeper's wait condition have changed; a flag already set was notified by
    /// whoever set it). Nothing when `id` names no event.
    fn set_locked(&mut self, words: &[AtomicU64], id: u32, wake: &mut impl WakeSink) {
        let EvState {
            events, waiters, ..
        } = self;
        let Some(ev) = events.get(&id) else {
            return;
        };
        let word = word_of(words, id, ev);
        // Every waiter on the list is activated below: none is pending any more.
        if word
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                (w & W_LIVE != 0).then(|| set_word(w) & !W_PENDING)
            })
            .is_err()
        {
            return;
        }
        for &(w, i) in &ev.waiters {
            if let Some(w) = waiters.get_mut(&w) {
                if let Some(a) = w.activated.get_mut(i) {
                    if !*a {
                        *a = true;
                        wake.push(w.cv.clone());
                    }
                }
            }
        }
    }
}

impl Events {
    pub(crate) fn new(gpu_ids: Vec<u32>) -> Self {
        Events {
            gpu_ids,
            page: OnceLock::new(),
            words: (0..abi::KFD_SIGNAL_EVENT_LIMIT)
                .map(|_| AtomicU64::new(0))
                .collect(),
            st: Mutex::new(EvState {
                events: BTreeMap::new(),
                signal_handle: None,
                mapped_size: 0,
                // Event id 0 is reserved (kfd_event_init_process).
                signal_count: 1,
                waiters: BTreeMap::new(),
                next_waiter: 1,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, EvState> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Event `id`'s slot in the event page, when there is a page holding it.
    fn slot(&self, id: u32) -> Option<&AtomicU64> {
        page_slot(self.page.get()?, id)
    }

    /// The signal-page state word of `id` (`None` above the page's slots).
    fn signal_word(&self, id: u32) -> Option<&AtomicU64> {
        self.words.get(id as usize)
    }

    /// The BO handle of a user-provided event page (FREE refuses it with EPERM).
    pub(crate) fn signal_handle(&self) -> Option<u64> {
        self.lock().signal_handle
    }

    /// The event page, for `/dev/kfd` mmaps at the EVENTS offset.
    pub(crate) fn page(&self) -> Option<Arc<Backing>> {
        self.page.get().cloned()
    }

    /// After a successful mmap of the event page: slots usable = mapped bytes / 8.
    pub(crate) fn set_mapped_size(&self, len: u64) {
        let mut st = self.lock();
        if self.page.get().is_some() {
            st.mapped_size = len.min(PAGE_BYTES);
        }
    }

    /// `kfd_kmap_event_page` after the BO was found: use `page` (a GTT BO's memory).
    pub(crate) fn set_user_page(&self, page: Arc<Backing>, handle: u64) -> Result<(), Errno> {
        let mut st = self.lock();
        if self.page.get().is_some() {
            return Err(Errno::INVAL);
        }
        let len = (page.len() as u64).min(PAGE_BYTES);
        // SAFETY: `len` is within the alias mapping.
        unsafe { core::ptr::write_bytes(page.ptr().as_ptr(), 0xff, len as usize) };
        // Under the mutex, after the check above: nobody else sets it.
        self.page.set(page).map_err(|_| Errno::INVAL)?;
        st.mapped_size = len;
        st.signal_handle = Some(handle);
        Ok(())
    }

    /// Whether a user event page is already set.
    pub(crate) fn has_page(&self) -> bool {
        self.page.get().is_some()
    }

    /// `kfd_event_create`: returns (event_id, trigger data, page offset, slot index).
    pub(crate) fn create(&self, ty: u32, auto_reset: bool) -> Result<(u32, u64, u32), Errno> {
        let mut st = self.lock();
        let (id, page_offset, slot_index) = if can_gpu_signal(ty) {
            if st.mapped_size != 0 && u64::from(st.signal_count) == st.mapped_size / 8 {
                return Err(Errno::NOSPC);
            }
            if self.page.get().is_none() {
                let page = Backing::new("kfd-emu-event-page", PAGE_BYTES)?;
                page.fill(0xff);
                // Under the mutex, after the check above: nobody else sets it.
                let _ = self.page.set(Arc::new(page));
                // "Oldest user mode expects 256 event slots" until the page is mmapped.
                st.mapped_size = 256 * 8;
            }
            let limit = (st.mapped_size / 8) as u32;
            let id = (1..limit)
                .find(|i| !st.events.contains_key(i))
                .ok_or(Errno::NOSPC)?;
            if let Some(s) = self.slot(id) {
                s.store(UNSIGNALED_EVENT_SLOT, Ordering::Release);
            }
            st.signal_count += 1;
            (id, abi::KFD_MMAP_TYPE_EVENTS, id)
        } else {
            let id = (KFD_FIRST_NONSIGNAL_EVENT_ID..=u32::MAX)
                .find(|i| !st.events.contains_key(i))
                .ok_or(Errno::NOSPC)?;
            (id, 0, 0)
        };
        let word = new_word(ty, auto_reset);
        // A signal event's word goes live in the table (under the mutex, with the map
        // entry below); another event keeps its word.
        if let Some(w) = self.signal_word(id) {
            w.store(word, Ordering::Release);
        }
        st.events.insert(
            id,
            Event {
                ty,
                word: AtomicU64::new(word),
                waiters: Vec::new(),
                mem: HsaMemoryExceptionData::default(),
                hw: HsaHwExceptionData::default(),
            },
        );
        Ok((id, page_offset, slot_index))
    }

    /// DESTROY_EVENT.
    pub(crate) fn destroy(&self, id: u32) -> Result<(), Errno> {
        let mut st = self.lock();
        let ev = st.events.remove(&id).ok_or(Errno::INVAL)?;
        // Not live any more: a racing lock-free set finds no event.
        if let Some(w) = self.signal_word(id) {
            w.store(0, Ordering::Release);
        }
        let mut wake = Wake::new();
        for (w, i) in ev.waiters {
            if let Some(w) = st.waiters.get_mut(&w) {
                if let Some(d) = w.destroyed.get_mut(i) {
                    *d = true;
                    wake.push(w.cv.clone());
                }
            }
        }
        if can_gpu_signal(ev.ty) {
            st.signal_count -= 1;
        }
        drop(st);
        notify(wake);
        Ok(())
    }

    /// Sets event `id` if its word has the `need` bits: lock-free when it has no waiter,
    /// else under the mutex, with the activated waiters put into `wake`. False when
    /// there is no such event.
    #[inline]
    fn set_by_id(&self, id: u32, need: u64, wake: &mut impl WakeSink) -> bool {
        match self.signal_word(id).map(|w| try_set(w, need)) {
            Some(TrySet::Done) => true,
            Some(TrySet::Absent) => false,
            Some(TrySet::Waiters) => {
                self.set_with_waiters(id, wake);
                true
            }
            // Not a signal-page id: no signal (or debug) event has it.
            None => false,
        }
    }

    /// The set of an event with a waiter to activate, under the mutex (kept out of line:
    /// the lock-free path stays small).
    #[cold]
    #[inline(never)]
    fn set_with_waiters(&self, id: u32, wake: &mut impl WakeSink) {
        self.lock().set_locked(&self.words, id, wake);
    }

    /// SET_EVENT (`kfd_set_event`: no process-wide lock there either).
    pub(crate) fn set_from_cpu(&self, id: u32) -> Result<(), Errno> {
        // Only SIGNAL events may be set by the CPU, and they all have signal-page ids:
        // any other id is an unknown event or one the CPU may not set, EINVAL both.
        let mut wake = Wake::new();
        if !self.set_by_id(id, W_CPU, &mut wake) {
            return Err(Errno::INVAL);
        }
        notify(wake);
        Ok(())
    }

    /// RESET_EVENT.
    pub(crate) fn reset(&self, id: u32) -> Result<(), Errno> {
        let w = self.signal_word(id).ok_or(Errno::INVAL)?;
        w.fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
            (w & (W_LIVE | W_CPU) == W_LIVE | W_CPU).then_some(w & !W_SIGNALED)
        })
        .map(|_| ())
        .map_err(|_| Errno::INVAL)
    }

    /// WAIT_EVENTS.
    pub(crate) fn wait(
        &self,
        args: &mut abi::WaitEventsArgs,
        data: &mut [EventData],
    ) -> Result<(), Errno> {
        let r = self.wait_inner(args, data);
        if r.is_err() {
            args.wait_result = abi::KFD_IOC_WAIT_RESULT_FAIL;
        }
        r
    }

    fn wait_inner(
        &self,
        args: &mut abi::WaitEventsArgs,
        data: &mut [EventData],
    ) -> Result<(), Errno> {
        let n = args.num_events as usize;
        if data.len() < n {
            return Err(Errno::FAULT);
        }
        let all = args.wait_for_all != 0;
        let deadline = match args.timeout {
            0 => Some(Instant::now()),
            abi::KFD_EVENT_TIMEOUT_INFINITE => None,
            ms => Instant::now().checked_add(Duration::from_millis(u64::from(ms.min(0x7fff_ffff)))),
        };
        let mut st = self.lock();
        let wid = st.next_waiter;
        st.next_waiter += 1;
        let cv = Arc::new(Condvar::new());
        st.waiters.insert(
            wid,
            Waiter {
                activated: vec![false; n],
                destroyed: vec![false; n],
                cv: cv.clone(),
            },
        );
        let mut age_enabled = vec![false; n];
        let mut registered: Vec<u32> = Vec::with_capacity(n);
        let mut result = Ok(());
        for (i, d) in data.iter().take(n).enumerate() {
            let Some(ev) = st.events.get_mut(&d.event_id) else {
                result = Err(Errno::INVAL);
                break;
            };
            // init_event_waiter in one RMW of the word (see the module docs): activated
            // if signaled (an auto-reset signal is consumed) or, with an age check, if
            // the age moved; otherwise registered (`WAITERS`) in the same RMW.
            let last_age = d.signal().last_event_age;
            let age_check = ev.ty == abi::KFD_IOC_EVENT_SIGNAL && last_age != 0;
            age_enabled[i] = age_check;
            let is_activated =
                |w: u64| w & W_SIGNALED != 0 || (age_check && word_age(w) != last_age);
            let word = word_of(&self.words, d.event_id, ev);
            let prev = word
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |w| {
                    let mut n = w;
                    if w & (W_SIGNALED | W_AUTO_RESET) == W_SIGNALED | W_AUTO_RESET {
                        n &= !W_SIGNALED;
                    }
                    if !is_activated(w) {
                        n |= W_WAITERS | W_PENDING;
                    }
                    Some(n)
                })
                .unwrap_or_else(|w| w);
            let activated = is_activated(prev);
            if !activated {
                ev.waiters.push((wid, i));
                registered.push(d.event_id);
            }
            if let Some(w) = st.waiters.get_mut(&wid) {
                w.activated[i] = activated;
            }
        }
        if result.is_ok() {
            loop {
                let cond = Self::test(&st, wid, all);
                args.wait_result = cond;
                if cond != abi::KFD_IOC_WAIT_RESULT_TIMEOUT {
                    break;
                }
                match deadline {
                    None => st = cv.wait(st).unwrap_or_else(|e| e.into_inner()),
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            break;
                        }
                        st = cv
                            .wait_timeout(st, d - now)
                            .unwrap_or_else(|e| e.into_inner())
                            .0;
                    }
                }
            }
            if args.wait_result == abi::KFD_IOC_WAIT_RESULT_COMPLETE {
                self.copy_data(&st, wid, &age_enabled, &mut data[..n]);
            } else if args.wait_result == abi::KFD_IOC_WAIT_RESULT_FAIL {
                result = Err(Errno::IO);
            }
        }
        for id in registered {
            if let Some(ev) = st.events.get_mut(&id) {
                ev.waiters.retain(|(w, _)| *w != wid);
                if ev.waiters.is_empty() {
                    // The last waiter left.
                    word_of(&self.words, id, ev)
                        .fetch_and(!(W_WAITERS | W_PENDING), Ordering::AcqRel);
                }
            }
        }
        st.waiters.remove(&wid);
        result
    }

    fn test(st: &EvState, wid: u64, all: bool) -> u32 {
        let Some(w) = st.waiters.get(&wid) else {
            return abi::KFD_IOC_WAIT_RESULT_FAIL;
        };
        let mut count = 0;
        for (a, d) in w.activated.iter().zip(&w.destroyed) {
            if *d {
                return abi::KFD_IOC_WAIT_RESULT_FAIL;
            }
            if *a {
                if !all {
                    return abi::KFD_IOC_WAIT_RESULT_COMPLETE;
                }
                count += 1;
            }
        }
        if count == w.activated.len() {
            abi::KFD_IOC_WAIT_RESULT_COMPLETE
        } else {
            abi::KFD_IOC_WAIT_RESULT_TIMEOUT
        }
    }

    /// `copy_signaled_event_data`.
    fn copy_data(&self, st: &EvState, wid: u64, age_enabled: &[bool], data: &mut [EventData]) {
        let Some(w) = st.waiters.get(&wid) else {
            return;
        };
        for (i, d) in data.iter_mut().enumerate() {
            if !w.activated.get(i).copied().unwrap_or(false) {
                continue;
            }
            let Some(ev) = st.events.get(&d.event_id) else {
                continue;
            };
            match ev.ty {
                abi::KFD_IOC_EVENT_MEMORY => d.set_memory_exception(ev.mem),
                abi::KFD_IOC_EVENT_HW_EXCEPTION => {
                    // Copied over the start of the union, the rest left as it was.
                    let mut bytes = [0u8; 32];
                    for (k, w) in d.payload.iter().enumerate() {
                        bytes[k * 8..k * 8 + 8].copy_from_slice(&w.to_le_bytes());
                    }
                    let hw = [
                        ev.hw.reset_type,
                        ev.hw.reset_cause,
                        ev.hw.memory_lost,
                        ev.hw.gpu_id,
                    ];
                    for (k, v) in hw.iter().enumerate() {
                        bytes[k * 4..k * 4 + 4].copy_from_slice(&v.to_le_bytes());
                    }
                    for (k, w) in d.payload.iter_mut().enumerate() {
                        let mut b = [0u8; 8];
                        b.copy_from_slice(&bytes[k * 8..k * 8 + 8]);
                        *w = u64::from_le_bytes(b);
                    }
                }
                abi::KFD_IOC_EVENT_SIGNAL if age_enabled.get(i).copied().unwrap_or(false) => {
                    d.payload[0] =
                        word_age(word_of(&self.words, d.event_id, ev).load(Ordering::Acquire));
                }
                _ => {}
            }
        }
    }

    /// Signal every event of `ty` (`lookup_events_by_type_and_signal`), storing `mem` in
    /// memory events.
    fn signal_type(
        &self,
        ty: u32,
        mem: Option<HsaMemoryExceptionData>,
        hw: Option<HsaHwExceptionData>,
    ) {
        let mut st = self.lock();
        let ids: Vec<u32> = st
            .events
            .iter()
            .filter(|(_, e)| e.ty == ty)
            .map(|(id, _)| *id)
            .collect();
        let mut wake = Wake::new();
        for id in ids {
            if let Some(ev) = st.events.get_mut(&id) {
                if let Some(m) = mem {
                    ev.mem = m;
                }
                if let Some(h) = hw {
                    ev.hw = h;
                }
            }
            st.set_locked(&self.words, id, &mut wake);
        }
        drop(st);
        notify(wake);
    }
}

impl Events {
    /// `set_event_from_interrupt`: acknowledges event `id`'s slot and sets the event
    /// (lock-free unless it has waiters, who go into `wake`). False when `id` names no
    /// GPU-signalable event.
    #[inline]
    fn set_from_interrupt(&self, id: u32, wake: &mut impl WakeSink) -> bool {
        // Every live event with a signal-page id is a signal or debug event, both
        // GPU-signalable.
        if self
            .signal_word(id)
            .is_none_or(|w| w.load(Ordering::Acquire) & W_LIVE == 0)
        {
            return false;
        }
        if let Some(s) = self.slot(id) {
            s.store(UNSIGNALED_EVENT_SLOT, Ordering::Release);
        }
        self.set_by_id(id, 0, wake)
    }

    /// Whether event `id`'s page slot is signaled (not all ones).
    fn slot_signaled(&self, id: u32) -> bool {
        self.slot(id)
            .is_some_and(|s| s.load(Ordering::Acquire) != UNSIGNALED_EVENT_SLOT)
    }

    /// `kfd_signal_event_interrupt`: sets the events the interrupt names and puts the
    /// waiters to wake into `wake`. Without the mutex unless an event set has waiters
    /// (or the interrupt names no event whose slot is signaled: then the ids to scan
    /// are read under it).
    #[inline]
    fn signal_interrupt(&self, context_id: Option<u32>, wake: &mut impl WakeSink) {
        let Some(page) = self.page.get() else {
            return;
        };
        // kfd_signal_event_interrupt: a full-width id is looked up directly when its
        // slot is signaled; otherwise every signaled slot is scanned.
        if let Some(id) = context_id {
            // (`words` covers the page's ids: the check keeps ids past it out.)
            if let (Some(slot), Some(word)) = (page_slot(page, id), self.signal_word(id)) {
                // Every live event with a signal-page id is a signal or debug event,
                // both GPU-signalable (`set_event_from_interrupt`).
                if slot.load(Ordering::Acquire) != UNSIGNALED_EVENT_SLOT
                    && word.load(Ordering::Acquire) & W_LIVE != 0
                {
                    // acknowledge_signal, then set_event.
                    slot.store(UNSIGNALED_EVENT_SLOT, Ordering::Release);
                    match try_set(word, 0) {
                        TrySet::Done => return,
                        TrySet::Waiters => return self.set_with_waiters(id, wake),
                        // Destroyed meanwhile: scan, as for an id naming no event.
                        TrySet::Absent => {}
                    }
                }
            }
        }
        self.scan_interrupt(wake);
    }

    /// The slow half of `kfd_signal_event_interrupt`: every event whose slot is
    /// signaled is set.
    #[cold]
    #[inline(never)]
    fn scan_interrupt(&self, wake: &mut impl WakeSink) {
        let ids: Vec<u32> = self
            .lock()
            .events
            .range(..abi::KFD_SIGNAL_EVENT_LIMIT)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if self.slot_signaled(id) {
                self.set_from_interrupt(id, wake);
            }
        }
        // Only the waiters whose flags this interrupt set are woken: with none, no futex
        // wake-up at all (a syscall on every completion interrupt otherwise), and a
        // sleeper on other events (a fault watcher) is not woken for nothing.
    }
}

impl Interrupts for Events {
    fn event_interrupt(&self, _gpu_id: u32, context_id: Option<u32>) {
        let mut wake = Wake::new();
        self.signal_interrupt(context_id, &mut wake);
        notify(wake);
    }

    fn event_interrupt_batched(
        &self,
        _gpu_id: u32,
        context_id: Option<u32>,
        wakes: &mut PendingWakes,
    ) {
        // The mutex (when taken) is released before the engine issues the wake-ups (at
        // its flush).
        self.signal_interrupt(context_id, wakes);
    }

    fn queue_fault(&self, gpu_id: u32, fault: &QueueFault) {
        let gpu_id = if self.gpu_ids.contains(&gpu_id) {
            gpu_id
        } else {
            0
        };
        // A packet error is no GPU reset: KFD raises no HW_EXCEPTION event for it; it is
        // reported through the queue's context save area header (see `engine::sched`),
        // or not at all when the runtime left the header empty.
        if let Some(f) = &fault.fault {
            // kfd_signal_vm_fault_event: the page address and the failure kind.
            let data = HsaMemoryExceptionData {
                failure: MemoryExceptionFailure {
                    not_present: u32::from(f.kind == FaultKind::NotMapped),
                    read_only: u32::from(f.kind == FaultKind::ReadOnly),
                    no_execute: 0,
                    imprecise: 0,
                },
                va: f.va & !0xfff,
                gpu_id,
                error_type: abi::KFD_MEM_ERR_NO_RAS,
            };
            self.signal_type(abi::KFD_IOC_EVENT_MEMORY, Some(data), None);
        }
    }

    fn queue_error(&self, _gpu_id: u32, event_id: u32) {
        let mut wake = Wake::new();
        self.set_from_interrupt(event_id, &mut wake);
        notify(wake);
    }
}

/// Keep `Arc<Events>` usable as `Arc<dyn Interrupts>`.
pub(crate) fn as_interrupts(e: &Arc<Events>) -> Arc<dyn Interrupts> {
    e.clone()
}

impl crate::kfd::process::Emu {
    /// CREATE_EVENT, including the first call's user event page (`kfd_kmap_event_page`).
    pub(crate) fn create_event(&self, a: &mut abi::CreateEventArgs) -> Result<(), Errno> {
        if a.event_page_offset != 0 {
            let handle = a.event_page_offset;
            let st = self.lock();
            if self.events.has_page() {
                return Err(Errno::INVAL);
            }
            let idx = self.gpu_idx((handle >> 32) as u32).ok_or(Errno::INVAL)?;
            Self::bind(&st, idx)?;
            let bo = st.bos.get(&handle).ok_or(Errno::INVAL)?;
            // amdgpu_amdkfd_gpuvm_map_gtt_bo_to_kernel: userptr BOs cannot be mapped to
            // the kernel and the BO is pinned in GTT.
            match &bo.mem {
                crate::kfd::memory::BoMem::Pages(b)
                    if bo.flags & abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT != 0 =>
                {
                    self.events.set_user_page(b.clone(), handle)?;
                }
                _ => return Err(Errno::INVAL),
            }
        }
        let (id, page_offset, slot) = self.events.create(a.event_type, a.auto_reset != 0)?;
        a.event_id = id;
        a.event_trigger_data = id;
        a.event_page_offset = page_offset;
        if page_offset != 0 {
            a.event_slot_index = slot;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    /// A sleeper on `id` (forever), reporting its result on the returned channel.
    fn sleeper(ev: &Arc<Events>, id: u32) -> mpsc::Receiver<u32> {
        let (tx, rx) = mpsc::channel();
        let ev = ev.clone();
        std::thread::spawn(move || {
            let mut data = [EventData::for_signal(id, 0)];
            let mut args = abi::WaitEventsArgs {
                num_events: 1,
                timeout: abi::KFD_EVENT_TIMEOUT_INFINITE,
                ..Default::default()
            };
            let _ = ev.wait(&mut args, &mut data);
            let _ = tx.send(args.wait_result);
        });
        rx
    }

    /// Waits until `id` has a registered waiter (bounded).
    fn until_waiting(ev: &Events, id: u32) {
        for _ in 0..20_000 {
            if ev
                .lock()
                .events
                .get(&id)
                .is_some_and(|e| !e.waiters.is_empty())
            {
                return;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        panic!("the sleeper never registered");
    }

    /// An interrupt raised by a busy engine sets the event at once (a poll sees it) and
    /// leaves the sleeper's wake-up in the engine's batch: the sleeper completes when the
    /// batch is flushed, once WAKE_BATCH has passed (`flush_due`), or when it drops (an
    /// engine thread ending).
    #[test]
    fn batched_interrupt_sets_now_and_wakes_on_flush_or_drop() {
        let ev = Arc::new(Events::new(vec![1]));
        for how in ["flush", "due", "drop"] {
            let (id, _, _) = ev.create(abi::KFD_IOC_EVENT_SIGNAL, false).unwrap();
            let rx = sleeper(&ev, id);
            until_waiting(&ev, id);
            // The CP's mailbox write, then its interrupt.
            if let Some(s) = ev.slot(id) {
                s.store(u64::from(id), Ordering::Release);
            }
            let mut wakes = PendingWakes::default();
            ev.event_interrupt_batched(1, Some(id), &mut wakes);
            assert!(
                !wakes.is_empty(),
                "the activated sleeper's wake-up is batched"
            );
            assert!(ev.words[id as usize].load(Ordering::Acquire) & W_SIGNALED != 0);
            match how {
                "flush" => {
                    wakes.flush();
                    assert!(wakes.is_empty());
                }
                "due" => {
                    std::thread::sleep(crate::engine::WAKE_BATCH * 2);
                    wakes.flush_due();
                    assert!(wakes.is_empty(), "due after WAKE_BATCH");
                }
                _ => drop(wakes),
            }
            let r = rx
                .recv_timeout(Duration::from_secs(20))
                .expect("the sleeper was never woken");
            assert_eq!(r, abi::KFD_IOC_WAIT_RESULT_COMPLETE);
            ev.destroy(id).unwrap();
        }
    }

    /// An interrupt for another event batches no wake-up for a sleeper.
    #[test]
    fn interrupt_for_another_event_batches_nothing() {
        let ev = Arc::new(Events::new(vec![1]));
        let (a, _, _) = ev.create(abi::KFD_IOC_EVENT_SIGNAL, false).unwrap();
        let (b, _, _) = ev.create(abi::KFD_IOC_EVENT_SIGNAL, false).unwrap();
        let rx = sleeper(&ev, a);
        until_waiting(&ev, a);
        if let Some(s) = ev.slot(b) {
            s.store(u64::from(b), Ordering::Release);
        }
        let mut wakes = PendingWakes::default();
        ev.event_interrupt_batched(1, Some(b), &mut wakes);
        assert!(wakes.is_empty());
        ev.set_from_cpu(a).unwrap();
        let r = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the sleeper was never woken");
        assert_eq!(r, abi::KFD_IOC_WAIT_RESULT_COMPLETE);
    }

    /// The CP's end-of-pipe sequence for event `id`: the mailbox write into its page
    /// slot, then the interrupt carrying the id.
    fn cp_interrupt(ev: &Events, id: u32) {
        ev.slot(id)
            .expect("the event page holds the slot")
            .store(u64::from(id), Ordering::Release);
        ev.event_interrupt(1, Some(id));
    }

    /// WAIT_EVENTS on one event with `last_event_age` `age`: (result, age returned).
    fn wait_one(ev: &Events, id: u32, age: u64, timeout_ms: u32) -> (u32, u64) {
        let mut data = [EventData::for_signal(id, age)];
        let mut args = abi::WaitEventsArgs {
            num_events: 1,
            timeout: timeout_ms,
            ..Default::default()
        };
        let _ = ev.wait(&mut args, &mut data);
        (args.wait_result, data[0].signal().last_event_age)
    }

    /// Spins (yielding) until `cond` holds; panics with `what` after 30 s.
    fn until(what: &str, cond: impl Fn() -> bool) {
        let end = Instant::now() + Duration::from_secs(30);
        while !cond() {
            assert!(Instant::now() < end, "timed out waiting for {what}");
            std::thread::yield_now();
        }
    }

    /// One interrupt per round races one WAIT_EVENTS registration on an auto-reset event
    /// without an age check: whichever comes first, the wait completes (the interrupt
    /// either left the event signaled for the registration to consume, or found the
    /// waiter registered and woke it). An interrupt that took the lock-free path past a
    /// registered waiter would leave the wait asleep until its 20 s timeout; an interrupt
    /// counted twice or lost would show in the age and in a signal left over.
    #[test]
    fn interrupts_racing_registrations_lose_no_wakeup() {
        const ROUNDS: u64 = 10_000;
        let ev = Arc::new(Events::new(vec![1]));
        let (id, _, _) = ev.create(abi::KFD_IOC_EVENT_SIGNAL, true).unwrap();
        let ready = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicU64::new(0));
        let consumer = {
            let (ev, ready, done) = (ev.clone(), ready.clone(), done.clone());
            std::thread::spawn(move || {
                for round in 1..=ROUNDS {
                    ready.store(round, Ordering::SeqCst);
                    let (r, _) = wait_one(&ev, id, 0, 20_000);
                    assert_eq!(
                        r,
                        abi::KFD_IOC_WAIT_RESULT_COMPLETE,
                        "round {round}: the interrupt's wake-up was lost"
                    );
                    done.store(round, Ordering::SeqCst);
                }
            })
        };
        for round in 1..=ROUNDS {
            until("the consumer to start a wait", || {
                ready.load(Ordering::SeqCst) == round
            });
            // Vary where in the registration the interrupt lands.
            for _ in 0..(round % 61) * 8 {
                std::hint::spin_loop();
            }
            cp_interrupt(&ev, id);
            until("the consumer's wait to complete", || {
                done.load(Ordering::SeqCst) == round || consumer.is_finished()
            });
        }
        consumer.join().expect("the consumer failed");
        // Every interrupt set the event exactly once, and every signal was consumed.
        assert_eq!(
            wait_one(&ev, id, 1, 0),
            (abi::KFD_IOC_WAIT_RESULT_COMPLETE, 1 + ROUNDS)
        );
        assert_eq!(wait_one(&ev, id, 0, 0).0, abi::KFD_IOC_WAIT_RESULT_TIMEOUT);
        assert_eq!(ev.words[id as usize].load(Ordering::Acquire) & W_WAITERS, 0);
    }

    /// Interrupts for two events from two threads and CPU sets of a third, while a
    /// fourth thread keeps registering on all of them (so sets alternate between the
    /// lock-free and the locked path): each event's age counts exactly its own sets, and
    /// an event nobody set stays at age 1, unsignaled.
    #[test]
    fn concurrent_sets_count_exactly_and_only_their_event() {
        const SETS: u64 = 3000;
        let ev = Arc::new(Events::new(vec![1]));
        let ids: Vec<u32> = (0..4)
            .map(|_| ev.create(abi::KFD_IOC_EVENT_SIGNAL, false).unwrap().0)
            .collect();
        let stop = Arc::new(AtomicU64::new(0));
        let started = Arc::new(AtomicU64::new(0));
        let watcher = {
            let (ev, stop, ids) = (ev.clone(), stop.clone(), ids.clone());
            let started = started.clone();
            std::thread::spawn(move || {
                let mut waits = 0u64;
                while stop.load(Ordering::SeqCst) == 0 {
                    // Age-checked waits that sleep until one of the events moves.
                    let mut data: Vec<EventData> = ids
                        .iter()
                        .map(|&id| EventData::for_signal(id, u64::MAX))
                        .collect();
                    for d in &mut data {
                        let cur = ev.words[d.event_id as usize].load(Ordering::Acquire);
                        *d = EventData::for_signal(d.event_id, word_age(cur));
                    }
                    let mut args = abi::WaitEventsArgs {
                        num_events: data.len() as u32,
                        timeout: 1,
                        ..Default::default()
                    };
                    ev.wait(&mut args, &mut data).unwrap();
                    waits += 1;
                    started.store(waits, Ordering::SeqCst);
                }
            })
        };
        // The watcher is in its loop before the first set.
        until("the watcher's first wait", || {
            started.load(Ordering::SeqCst) > 0
        });
        let interrupter = |id: u32| {
            let ev = ev.clone();
            std::thread::spawn(move || {
                for _ in 0..SETS {
                    cp_interrupt(&ev, id);
                }
            })
        };
        let (a, b) = (interrupter(ids[0]), interrupter(ids[1]));
        for _ in 0..SETS {
            ev.set_from_cpu(ids[2]).unwrap();
        }
        a.join().unwrap();
        b.join().unwrap();
        stop.store(1, Ordering::SeqCst);
        watcher.join().expect("the watcher failed");
        for &id in &ids[..3] {
            assert_eq!(
                wait_one(&ev, id, 1, 0),
                (abi::KFD_IOC_WAIT_RESULT_COMPLETE, 1 + SETS),
                "event {id}"
            );
        }
        assert_eq!(
            wait_one(&ev, ids[3], 1, 0),
            (abi::KFD_IOC_WAIT_RESULT_TIMEOUT, 1)
        );
        assert_eq!(
            wait_one(&ev, ids[3], 0, 0).0,
            abi::KFD_IOC_WAIT_RESULT_TIMEOUT
        );
        for &id in &ids {
            assert_eq!(ev.words[id as usize].load(Ordering::Acquire) & W_WAITERS, 0);
        }
    }

    /// A destroyed event's id is not live: an interrupt for it sets nothing and a new
    /// event given the same id starts at age 1, unsignaled. SET/RESET refuse a debug
    /// event (not CPU-signalable), which an interrupt still sets.
    #[test]
    fn destroyed_and_debug_events_on_the_lock_free_path() {
        let ev = Arc::new(Events::new(vec![1]));
        let (id, _, _) = ev.create(abi::KFD_IOC_EVENT_SIGNAL, false).unwrap();
        cp_interrupt(&ev, id);
        ev.destroy(id).unwrap();
        cp_interrupt(&ev, id);
        assert_eq!(ev.words[id as usize].load(Ordering::Acquire), 0);
        assert_eq!(ev.set_from_cpu(id), Err(Errno::INVAL));
        assert_eq!(ev.reset(id), Err(Errno::INVAL));
        let (again, _, _) = ev.create(abi::KFD_IOC_EVENT_SIGNAL, false).unwrap();
        assert_eq!(again, id, "the lowest free id is reused");
        assert_eq!(
            wait_one(&ev, id, 1, 0),
            (abi::KFD_IOC_WAIT_RESULT_TIMEOUT, 1)
        );
        let (dbg, _, _) = ev.create(abi::KFD_IOC_EVENT_DEBUG_EVENT, false).unwrap();
        assert_eq!(ev.set_from_cpu(dbg), Err(Errno::INVAL));
        assert_eq!(ev.reset(dbg), Err(Errno::INVAL));
        cp_interrupt(&ev, dbg);
        assert_eq!(
            wait_one(&ev, dbg, 0, 0).0,
            abi::KFD_IOC_WAIT_RESULT_COMPLETE
        );
        // The slot was acknowledged back to unsignaled.
        assert_eq!(
            ev.slot(dbg).unwrap().load(Ordering::Acquire),
            UNSIGNALED_EVENT_SLOT
        );
    }

    /// A sleeper whose flag a set already flipped (its wake-up still in the engine's
    /// batch, as while a host sleeps in a synchronize that many completions end) is not
    /// pending any more: later sets of its event are lock-free and batch no second
    /// wake-up; every set still counts in the age.
    #[test]
    fn sets_after_the_waiter_was_activated_are_lock_free() {
        let ev = Arc::new(Events::new(vec![1]));
        let (id, _, _) = ev.create(abi::KFD_IOC_EVENT_SIGNAL, true).unwrap();
        let word = &ev.words[id as usize];
        let rx = sleeper(&ev, id);
        until_waiting(&ev, id);
        assert_ne!(word.load(Ordering::Acquire) & W_PENDING, 0);
        assert_eq!(
            try_set(word, 0),
            TrySet::Waiters,
            "a pending waiter needs the lock"
        );
        let mut first = PendingWakes::default();
        let mut later = PendingWakes::default();
        for i in 0..3 {
            ev.slot(id).unwrap().store(u64::from(id), Ordering::Release);
            let wakes = if i == 0 { &mut first } else { &mut later };
            ev.event_interrupt_batched(1, Some(id), wakes);
            assert_eq!(word.load(Ordering::Acquire) & W_PENDING, 0);
        }
        assert_eq!(try_set(word, 0), TrySet::Done);
        assert!(!first.is_empty(), "the first set wakes the sleeper");
        assert!(later.is_empty(), "no second wake-up for the same sleeper");
        first.flush();
        let r = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("the sleeper was never woken");
        assert_eq!(r, abi::KFD_IOC_WAIT_RESULT_COMPLETE);
        assert_eq!(
            wait_one(&ev, id, 1, 0),
            (abi::KFD_IOC_WAIT_RESULT_COMPLETE, 5),
            "age 1 + 4 sets"
        );
    }
}
