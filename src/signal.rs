//! Signals: `amd_signal_t` in signal memory, each with a KFD signal event so the command
//! processor can interrupt a sleeping host waiter (event mailbox = the event's slot in the
//! event page). Host waits spin briefly, then sleep in WAIT_EVENTS with the event age
//! (KFD >= 1.14) so a wake-up between the value check and the sleep is never lost.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kfd::abi;

use crate::devcore::DeviceCore;
use crate::error::{Error, ErrorKind, Result};
use crate::hsa::{AmdSignal, AMD_SIGNAL_KIND_USER};
use crate::memory::{Buffer, MemoryKind};
use crate::sync::lock;

/// Default time a host waiter spins before sleeping in WAIT_EVENTS.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(20);

/// WAIT_EVENTS sleeps are this short until the waiter's mailbox has been armed this long,
/// because of a real race: the mailbox is armed lazily (only while a host thread sleeps,
/// so the CP does not interrupt on every decrement), and arming is a store of the mailbox
/// then a load of the value on the host against a decrement of the value then a load of
/// the mailbox on the CP. Nothing orders the CP's pair (no documented ordering on hardware;
/// the emulator's is acquire/release, not sequentially consistent), so both sides may read
/// the old word: the CP raises no event and the re-check missed the decrement. The short
/// sleep bounds that lost wake-up.
const ARMING_SLEEP: Duration = Duration::from_millis(10);
/// Later sleeps: by then the armed mailbox is visible to the CP, so every decrement raises
/// the event, and the event age covers a decrement between the check and the sleep. No CPU
/// store to a waited-on signal skips SET_EVENT (`Signal::store` sets it; the callback lines
/// written with `store_relaxed` are polled by the CP, never slept on). So this timeout is
/// only a safety net for a lost interrupt: as long as the CP's own fallback poll of a
/// blocked queue (100 ms). ROCr's interrupt signals (always armed) sleep for the whole
/// remaining timeout.
const SAFETY_SLEEP: Duration = Duration::from_millis(100);

/// The process's event page: a GTT buffer of `KFD_SIGNAL_EVENT_LIMIT` 8-byte slots,
/// handed to KFD with the first CREATE_EVENT (libhsakmt's dGPU path), GPU-mapped so the
/// CP can write mailboxes.
pub(crate) struct EventPage {
    buf: Buffer,
}

impl EventPage {
    fn slot_va(&self, slot: u32) -> u64 {
        self.buf.va() + slot as u64 * 8
    }
}

/// Signals ready for reuse, with their events (creating an event is a syscall), and the
/// process's event page. Signals hold their pool (not the runtime's device state), so
/// the pool goes, destroying the pooled signals' events, after the last signal.
pub(crate) struct SignalPool {
    core: Arc<DeviceCore>,
    /// The event page, created with the first signal event.
    events: Mutex<Option<Arc<EventPage>>>,
    free: Mutex<Vec<SignalSlot>>,
    chunks: Mutex<Vec<Buffer>>,
}

#[derive(Debug, Clone, Copy)]
struct SignalSlot {
    va: u64,
    event_id: u32,
    trigger: u32,
    mailbox: u64,
}

/// Signals per signal-memory chunk.
const CHUNK_SIGNALS: usize = 64;

impl SignalPool {
    pub(crate) fn new(core: Arc<DeviceCore>) -> Self {
        SignalPool {
            core,
            events: Mutex::new(None),
            free: Mutex::new(Vec::new()),
            chunks: Mutex::new(Vec::new()),
        }
    }
}

impl Drop for SignalPool {
    /// DESTROY_EVENT for every pooled signal's event (no signal is left).
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut().unwrap_or_else(|e| e.into_inner()));
        for s in free.iter().filter(|s| s.mailbox != 0) {
            let _ = kfd::ioctl::destroy_event(self.core.backend.as_ref(), s.event_id);
        }
    }
}

/// CREATE_EVENT for a signal event. The first one hands KFD the event page (a GPU-mapped
/// signal-memory BO) through `event_page_offset`; KFD rejects a second page with EINVAL
/// (kfd_chardev.c `kfd_ioctl_create_event`), so later calls pass 0. The pool's event
/// lock serialises this.
pub(crate) fn create_signal_event(pool: &SignalPool) -> Result<(u32, u32, u64)> {
    let call = "Signal::new";
    let dev = pool;
    let mut g = lock(&dev.events);
    let (page, first) = match g.as_ref() {
        Some(p) => (p.clone(), false),
        None => {
            let buf = Buffer::alloc(
                &dev.core,
                MemoryKind::Signal,
                0,
                abi::KFD_SIGNAL_EVENT_LIMIT as usize * 8,
            )?;
            (Arc::new(EventPage { buf }), true)
        }
    };
    let mut args = abi::CreateEventArgs {
        event_type: abi::KFD_IOC_EVENT_SIGNAL,
        auto_reset: 1,
        event_page_offset: if first { page.buf.handle() } else { 0 },
        ..Default::default()
    };
    kfd::ioctl::create_event(dev.core.backend.as_ref(), &mut args)
        .map_err(|e| Error::from_kfd(call, e))?;
    if first {
        *g = Some(page.clone());
    }
    Ok((
        args.event_id,
        args.event_trigger_data,
        page.slot_va(args.event_slot_index),
    ))
}

/// The value of the signal whose handle is `handle` (an acquire load, as [`Signal::load`]),
/// for a reader that holds the handle but not the [`Signal`].
///
/// # Safety
/// `handle` is the [`Signal::handle`] of a signal of a pool that is still alive. The
/// signal itself may have been dropped: its slot stays mapped signal memory until the
/// pool goes (the value read is then a later owner's, which the caller must detect).
#[inline(always)]
pub(crate) unsafe fn load_value_at(handle: u64) -> i64 {
    // SAFETY: per the contract, an 8-aligned i64 of mapped signal memory (the value word
    // of a 64-byte `amd_signal_t` slot), shared with the GPU, hence atomic.
    unsafe { AtomicI64::from_ptr((handle + 8) as *mut i64) }.load(Ordering::Acquire)
}

/// An `amd_signal_t` with an interrupt-capable KFD event. The handle the CP takes is
/// [`Signal::handle`]. Returned to the device's pool on drop.
pub struct Signal {
    pool: Arc<SignalPool>,
    slot: SignalSlot,
    /// Process-wide serial, never reused (the slot address is, at once): what remembers a
    /// signal's identity (timeline waits) keys on this.
    serial: u64,
    sleepers: Mutex<u32>,
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Signal({:#x} value={} event={})",
            self.slot.va,
            self.load(),
            self.slot.event_id
        )
    }
}

impl Signal {
    /// A signal with initial `value`.
    pub(crate) fn new(pool: &Arc<SignalPool>, value: i64) -> Result<Signal> {
        let popped = lock(&pool.free).pop();
        let slot = match popped {
            Some(s) => s,
            None => {
                // Carve a new chunk; give every slot its event lazily as it is first used.
                let buf = Buffer::alloc(&pool.core, MemoryKind::Signal, 0, CHUNK_SIGNALS * 64)?;
                let base = buf.va();
                lock(&pool.chunks).push(buf);
                let (event_id, trigger, mailbox) = create_signal_event(pool)?;
                let mut free = lock(&pool.free);
                for i in 1..CHUNK_SIGNALS {
                    free.push(SignalSlot {
                        va: base + (i * 64) as u64,
                        event_id: 0,
                        trigger: 0,
                        mailbox: 0,
                    });
                }
                SignalSlot {
                    va: base,
                    event_id,
                    trigger,
                    mailbox,
                }
            }
        };
        let slot = if slot.mailbox == 0 {
            let (event_id, trigger, mailbox) = create_signal_event(pool)?;
            SignalSlot {
                event_id,
                trigger,
                mailbox,
                ..slot
            }
        } else {
            slot
        };
        static SERIAL: AtomicU64 = AtomicU64::new(1);
        let s = Signal {
            pool: pool.clone(),
            slot,
            serial: SERIAL.fetch_add(1, Ordering::Relaxed),
            sleepers: Mutex::new(0),
        };
        s.init(value);
        Ok(s)
    }

    fn init(&self, value: i64) {
        let sig = AmdSignal {
            kind: AMD_SIGNAL_KIND_USER,
            value,
            // Interrupts are armed only while a host thread sleeps on the signal
            // (`wait`), so the CP raises none for work nobody is waiting on.
            event_mailbox_ptr: 0,
            event_id: self.slot.trigger,
            ..Default::default()
        };
        // SAFETY: the slot is 64 bytes of signal memory owned by this Signal, aligned to 64.
        unsafe { core::ptr::write_volatile(self.slot.va as *mut AmdSignal, sig) };
        std::sync::atomic::fence(Ordering::Release);
    }

    /// The signal handle (the address of its `amd_signal_t`). The address is reused by
    /// a later signal once this one is dropped; [`Signal::serial`] never is.
    pub fn handle(&self) -> u64 {
        self.slot.va
    }

    /// A process-wide identity of this signal that is never reused.
    pub fn serial(&self) -> u64 {
        self.serial
    }

    #[inline]
    fn value_cell(&self) -> &AtomicI64 {
        // SAFETY: 8-byte aligned i64 inside our 64-byte slot, shared with the GPU.
        unsafe { AtomicI64::from_ptr((self.slot.va + 8) as *mut i64) }
    }

    fn ts_cell(&self, offset: u64) -> &AtomicU64 {
        // SAFETY: 8-byte aligned u64 inside our slot.
        unsafe { AtomicU64::from_ptr((self.slot.va + offset) as *mut u64) }
    }

    /// The address of the value word (for a holder that keeps the signal alive and
    /// loads it without the pointer walk: a stream's idle check).
    #[inline]
    pub(crate) fn value_addr(&self) -> usize {
        self.value_cell() as *const AtomicI64 as usize
    }

    /// Current value.
    #[inline]
    pub fn load(&self) -> i64 {
        self.value_cell().load(Ordering::Acquire)
    }

    /// Store a value and wake any host waiter sleeping on the signal's event.
    pub fn store(&self, v: i64) {
        self.value_cell().store(v, Ordering::Release);
        let _ = kfd::ioctl::set_event(self.pool.core.backend.as_ref(), self.slot.event_id);
    }

    /// Store a value without waking waiters (the CP reads it by polling).
    pub fn store_relaxed(&self, v: i64) {
        self.value_cell().store(v, Ordering::Release);
    }

    /// (start_ts, end_ts) GPU timestamps written by the CP.
    pub fn timestamps(&self) -> (u64, u64) {
        (
            self.ts_cell(crate::hsa::SIGNAL_START_TS_OFFSET)
                .load(Ordering::Acquire),
            self.ts_cell(crate::hsa::SIGNAL_END_TS_OFFSET)
                .load(Ordering::Acquire),
        )
    }

    /// Wait until `cond(value)` holds: spin for `spin`, then sleep in WAIT_EVENTS (the CP
    /// raises the event when it decrements the signal). `deadline` None waits forever.
    /// Returns the value that satisfied the condition, or NotReady at the deadline.
    pub fn wait(
        &self,
        cond: impl Fn(i64) -> bool,
        spin: Duration,
        deadline: Option<Instant>,
    ) -> Result<i64> {
        let start = Instant::now();
        loop {
            let v = self.load();
            if cond(v) {
                return Ok(v);
            }
            if start.elapsed() < spin {
                std::hint::spin_loop();
                continue;
            }
            break;
        }
        self.arm(true);
        let r = self.sleep_until(&cond, deadline);
        self.arm(false);
        r
    }

    /// Point the signal's mailbox at its event slot while any host thread sleeps on it
    /// (the CP then writes the slot and interrupts on every decrement), and clear it when
    /// the last sleeper leaves.
    fn arm(&self, on: bool) {
        let mut n = lock(&self.sleepers);
        let before = *n;
        *n = if on {
            before + 1
        } else {
            before.saturating_sub(1)
        };
        let ptr = if *n > 0 { self.slot.mailbox } else { 0 };
        if (before == 0) != (*n == 0) {
            // SAFETY: 8-byte aligned field of our signal slot, shared with the CP.
            let cell = unsafe {
                AtomicU64::from_ptr((self.slot.va + crate::hsa::SIGNAL_MAILBOX_OFFSET) as *mut u64)
            };
            cell.store(ptr, Ordering::SeqCst);
        }
    }

    fn sleep_until(&self, cond: &impl Fn(i64) -> bool, deadline: Option<Instant>) -> Result<i64> {
        let mut age = 0u64;
        let armed = Instant::now();
        loop {
            // Re-checked after arming: a decrement before the mailbox was armed is seen
            // here; one after it raises the event.
            let v = self.load();
            if cond(v) {
                return Ok(v);
            }
            let mut timeout_ms = if armed.elapsed() < ARMING_SLEEP {
                ARMING_SLEEP.as_millis() as u32
            } else {
                SAFETY_SLEEP.as_millis() as u32
            };
            if let Some(d) = deadline {
                let now = Instant::now();
                if now >= d {
                    return Err(Error::new(
                        ErrorKind::NotReady,
                        "Signal::wait",
                        "deadline reached",
                    ));
                }
                timeout_ms = timeout_ms.min((d - now).as_millis().max(1) as u32);
            }
            let mut ev = [abi::EventData::for_signal(self.slot.event_id, age)];
            kfd::ioctl::wait_events(self.pool.core.backend.as_ref(), &mut ev, true, timeout_ms)
                .map_err(|e| Error::from_kfd("Signal::wait", e))?;
            age = ev[0].signal().last_event_age;
        }
    }
}

impl Drop for Signal {
    fn drop(&mut self) {
        let mut free = lock(&self.pool.free);
        free.push(self.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A waiter asleep in WAIT_EVENTS wakes for a store with SET_EVENT, and still sees a
    /// store without one (the safety-net timeout), also past the arming window's short
    /// sleeps. (The sleeps before the stores only make the waiter likely to be asleep;
    /// either way it must return the stored value.)
    #[test]
    fn a_sleeping_waiter_sees_stores_with_and_without_an_event() {
        let dev = crate::Device::open_for_test("emu:mi250x");
        let sig = Signal::new(&dev.inner.signals, 1).unwrap();
        let deadline = Some(Instant::now() + Duration::from_secs(20));
        std::thread::scope(|s| {
            let w = s.spawn(|| sig.wait(|v| v == 0, Duration::ZERO, deadline));
            std::thread::sleep(ARMING_SLEEP * 3);
            sig.store(0);
            assert_eq!(w.join().unwrap().unwrap(), 0);
            let w = s.spawn(|| sig.wait(|v| v == 5, Duration::ZERO, deadline));
            std::thread::sleep(ARMING_SLEEP * 3);
            sig.store_relaxed(5);
            assert_eq!(w.join().unwrap().unwrap(), 5);
        });
    }
}
