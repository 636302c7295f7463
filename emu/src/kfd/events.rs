//! Events: signal events with their event page slots, hardware-exception and memory
//! events, SET/RESET, and WAIT_EVENTS with the KFD 1.14 event age. Engines raise
//! interrupts through the [`Interrupts`] implementation here.
//!
//! Kernel rules modelled here are listed, with their sources, in
//! `firmware-notes/kfd-events.md`. Each WAIT_EVENTS call sleeps on its own condition
//! variable (KFD's per-event wait queues: `wake_up_all(&ev->wq)` wakes only the waiters of
//! the event set, not every sleeper of the process); every state change happens under the
//! one events mutex, and whoever flips a waiter's flag notifies that waiter after
//! unlocking, so no wake-up can be lost.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
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

#[derive(Debug)]
struct Event {
    ty: u32,
    auto_reset: bool,
    signaled: bool,
    age: u64,
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
    page: Option<Arc<Backing>>,
    signal_handle: Option<u64>,
    mapped_size: u64,
    signal_count: u32,
    waiters: BTreeMap<u64, Waiter>,
    next_waiter: u64,
}

/// The process's events.
pub(crate) struct Events {
    gpu_ids: Vec<u32>,
    st: Mutex<EvState>,
}

fn can_cpu_signal(ty: u32) -> bool {
    ty == abi::KFD_IOC_EVENT_SIGNAL
}
fn can_gpu_signal(ty: u32) -> bool {
    ty == abi::KFD_IOC_EVENT_SIGNAL || ty == abi::KFD_IOC_EVENT_DEBUG_EVENT
}

/// Event `id`'s slot in the event page, when the page holds it.
fn page_slot(page: Option<&Arc<Backing>>, id: u32) -> Option<&AtomicU64> {
    let page = page?;
    let off = u64::from(id) * 8;
    if off + 8 > page.len() as u64 {
        return None;
    }
    // SAFETY: in bounds of the alias mapping (8-byte aligned: the mapping is page
    // aligned), which lives as long as `page`; shared memory is only accessed
    // atomically here.
    Some(unsafe { AtomicU64::from_ptr(page.ptr().as_ptr().add(off as usize).cast()) })
}

impl EvState {
    fn slot(&self, id: u32) -> Option<&AtomicU64> {
        page_slot(self.page.as_ref(), id)
    }

    /// `set_event` in kfd_events.c.
    fn set_event(&mut self, id: u32, wake: &mut impl WakeSink) {
        if let Some(ev) = self.events.get_mut(&id) {
            Self::set(&mut self.waiters, ev, wake);
        }
    }

    /// [`Self::set_event`] on an event already looked up. Each waiter whose flag this
    /// flips goes into `wake` (only then may a sleeper's wait condition have changed; a
    /// flag already set was notified by whoever set it).
    fn set(waiters: &mut BTreeMap<u64, Waiter>, ev: &mut Event, wake: &mut impl WakeSink) {
        ev.signaled = !ev.auto_reset || ev.waiters.is_empty();
        ev.age = ev.age.wrapping_add(1);
        if ev.age == 0 {
            ev.age = 2;
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

    /// Sets GPU-signalable event `id` from an interrupt: `None` when there is no such
    /// event.
    fn set_from_interrupt(&mut self, id: u32, wake: &mut impl WakeSink) -> Option<()> {
        // One look-up: the slot comes from the page directly while the event is borrowed.
        let EvState {
            events,
            page,
            waiters,
            ..
        } = self;
        match events.get_mut(&id) {
            Some(ev) if can_gpu_signal(ev.ty) => {
                if let Some(s) = page_slot(page.as_ref(), id) {
                    s.store(UNSIGNALED_EVENT_SLOT, Ordering::Release);
                }
                Self::set(waiters, ev, wake);
                Some(())
            }
            _ => None,
        }
    }
}

impl Events {
    pub(crate) fn new(gpu_ids: Vec<u32>) -> Self {
        Events {
            gpu_ids,
            st: Mutex::new(EvState {
                events: BTreeMap::new(),
                page: None,
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

    /// The BO handle of a user-provided event page (FREE refuses it with EPERM).
    pub(crate) fn signal_handle(&self) -> Option<u64> {
        self.lock().signal_handle
    }

    /// The event page, for `/dev/kfd` mmaps at the EVENTS offset.
    pub(crate) fn page(&self) -> Option<Arc<Backing>> {
        self.lock().page.clone()
    }

    /// After a successful mmap of the event page: slots usable = mapped bytes / 8.
    pub(crate) fn set_mapped_size(&self, len: u64) {
        let mut st = self.lock();
        if st.page.is_some() {
            st.mapped_size = len.min(PAGE_BYTES);
        }
    }

    /// `kfd_kmap_event_page` after the BO was found: use `page` (a GTT BO's memory).
    pub(crate) fn set_user_page(&self, page: Arc<Backing>, handle: u64) -> Result<(), Errno> {
        let mut st = self.lock();
        if st.page.is_some() {
            return Err(Errno::INVAL);
        }
        let len = (page.len() as u64).min(PAGE_BYTES);
        // SAFETY: `len` is within the alias mapping.
        unsafe { core::ptr::write_bytes(page.ptr().as_ptr(), 0xff, len as usize) };
        st.page = Some(page);
        st.mapped_size = len;
        st.signal_handle = Some(handle);
        Ok(())
    }

    /// Whether a user event page is already set.
    pub(crate) fn has_page(&self) -> bool {
        self.lock().page.is_some()
    }

    /// `kfd_event_create`: returns (event_id, trigger data, page offset, slot index).
    pub(crate) fn create(&self, ty: u32, auto_reset: bool) -> Result<(u32, u64, u32), Errno> {
        let mut st = self.lock();
        let (id, page_offset, slot_index) = if can_gpu_signal(ty) {
            if st.mapped_size != 0 && u64::from(st.signal_count) == st.mapped_size / 8 {
                return Err(Errno::NOSPC);
            }
            if st.page.is_none() {
                let page = Backing::new("kfd-emu-event-page", PAGE_BYTES)?;
                page.fill(0xff);
                st.page = Some(Arc::new(page));
                // "Oldest user mode expects 256 event slots" until the page is mmapped.
                st.mapped_size = 256 * 8;
            }
            let limit = (st.mapped_size / 8) as u32;
            let id = (1..limit)
                .find(|i| !st.events.contains_key(i))
                .ok_or(Errno::NOSPC)?;
            if let Some(s) = st.slot(id) {
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
        st.events.insert(
            id,
            Event {
                ty,
                auto_reset,
                signaled: false,
                age: 1,
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

    /// SET_EVENT.
    pub(crate) fn set_from_cpu(&self, id: u32) -> Result<(), Errno> {
        let mut st = self.lock();
        let ev = st.events.get(&id).ok_or(Errno::INVAL)?;
        if !can_cpu_signal(ev.ty) {
            return Err(Errno::INVAL);
        }
        let mut wake = Wake::new();
        st.set_event(id, &mut wake);
        drop(st);
        notify(wake);
        Ok(())
    }

    /// RESET_EVENT.
    pub(crate) fn reset(&self, id: u32) -> Result<(), Errno> {
        let mut st = self.lock();
        let ev = st.events.get_mut(&id).ok_or(Errno::INVAL)?;
        if !can_cpu_signal(ev.ty) {
            return Err(Errno::INVAL);
        }
        ev.signaled = false;
        Ok(())
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
            let mut activated = ev.signaled;
            ev.signaled = ev.signaled && !ev.auto_reset;
            let last_age = d.signal().last_event_age;
            if ev.ty == abi::KFD_IOC_EVENT_SIGNAL && last_age != 0 {
                age_enabled[i] = true;
                if ev.age != last_age {
                    activated = true;
                }
            }
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
                Self::copy_data(&st, wid, &age_enabled, &mut data[..n]);
            } else if args.wait_result == abi::KFD_IOC_WAIT_RESULT_FAIL {
                result = Err(Errno::IO);
            }
        }
        for id in registered {
            if let Some(ev) = st.events.get_mut(&id) {
                ev.waiters.retain(|(w, _)| *w != wid);
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
    fn copy_data(st: &EvState, wid: u64, age_enabled: &[bool], data: &mut [EventData]) {
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
                    d.payload[0] = ev.age;
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
            st.set_event(id, &mut wake);
        }
        drop(st);
        notify(wake);
    }
}

impl Events {
    /// `kfd_signal_event_interrupt`: sets the events the interrupt names and puts the
    /// waiters to wake into `wake`.
    fn signal_interrupt(&self, context_id: Option<u32>, wake: &mut impl WakeSink) {
        let mut st = self.lock();
        if st.page.is_none() {
            return;
        }
        // kfd_signal_event_interrupt: a full-width id is looked up directly when its
        // slot is signaled; otherwise every signaled slot is scanned.
        let direct = context_id
            .filter(|&id| {
                id < abi::KFD_SIGNAL_EVENT_LIMIT
                    && st
                        .slot(id)
                        .is_some_and(|s| s.load(Ordering::Acquire) != UNSIGNALED_EVENT_SLOT)
            })
            .and_then(|id| st.set_from_interrupt(id, wake));
        if direct.is_none() {
            let ids: Vec<u32> = st
                .events
                .range(..abi::KFD_SIGNAL_EVENT_LIMIT)
                .map(|(id, _)| *id)
                .collect();
            for id in ids {
                if st
                    .slot(id)
                    .is_some_and(|s| s.load(Ordering::Acquire) != UNSIGNALED_EVENT_SLOT)
                {
                    st.set_from_interrupt(id, wake);
                }
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
        // The mutex is released before the engine issues the wake-ups (at its flush).
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
        let mut st = self.lock();
        let mut wake = Wake::new();
        st.set_from_interrupt(event_id, &mut wake);
        drop(st);
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
            if let Some(s) = ev.lock().slot(id) {
                s.store(u64::from(id), Ordering::Release);
            }
            let mut wakes = PendingWakes::default();
            ev.event_interrupt_batched(1, Some(id), &mut wakes);
            assert!(
                !wakes.is_empty(),
                "the activated sleeper's wake-up is batched"
            );
            assert!(ev.lock().events.get(&id).is_some_and(|e| e.signaled));
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
        if let Some(s) = ev.lock().slot(b) {
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
}
