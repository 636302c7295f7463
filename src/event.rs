//! HIP events: a recorded completion point on a stream timeline, optionally with GPU
//! timestamps for elapsed time.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::device::{Device, DeviceInner};
use crate::error::{Error, ErrorKind, Result, StaticError};
use crate::signal::Signal;
use crate::stream::{Point, Stream};
use crate::sync::lock;
use crate::types::EventFlags;

/// `hipEventBlockingSync` ([`EventFlags::BLOCKING_SYNC`]).
pub(crate) const EVENT_BLOCKING_SYNC: u32 = EventFlags::BLOCKING_SYNC.bits();
/// `hipEventDisableTiming` ([`EventFlags::DISABLE_TIMING`]).
pub(crate) const EVENT_DISABLE_TIMING: u32 = EventFlags::DISABLE_TIMING.bits();

/// GPU timestamp frequency: the 100 MHz reference clock gfx9+ timestamps count
/// (`amdgpu_amdkfd_get_gpu_clock_counter`; ROCr reports 100 MHz; see firmware-notes).
pub const GPU_TIMESTAMP_HZ: u64 = 100_000_000;

/// How an error names a device: its backend and the address of its state (two
/// `Device::open` calls give two distinct names).
pub(crate) fn device_name(dev: &Arc<DeviceInner>) -> String {
    let gpus: Vec<String> = dev
        .gpus
        .iter()
        .map(|g| format!("{:#x}", g.gpu_id))
        .collect();
    format!(
        "{:?}@{:p} (gpus {})",
        dev.backend.kind(),
        Arc::as_ptr(dev),
        gpus.join(",")
    )
}

/// What a record keeps alive: the timeline the recorded point is on, and the timestamp
/// cell. The point's count and queue are in the event's [`RecordCell`] (a re-record on the
/// same timeline changes only those).
struct Recorded {
    timeline: Arc<Signal>,
    gpu_index: usize,
    /// Cell the CP writes the GPU clock into (timing events).
    ts: Option<Arc<Signal>>,
}

impl Recorded {
    /// Let the record's signals go, `target` being its point's count. The timestamp cell
    /// is written by a packet of the recording stream (before the point), by address: if
    /// the point is not reached, the device keeps the cell until it is, or its slot could
    /// go to another event's cell first and that packet overwrite its timestamp.
    fn release(self, dev: &DeviceInner, target: u64) {
        if let Some(ts) = self.ts {
            let p = Point {
                timeline: self.timeline,
                target,
                queue_id: 0,
                gpu_index: self.gpu_index,
            };
            dev.pools.keep_until(p, ts);
        }
    }
}

impl Drop for Event {
    /// `hipEventDestroy`: the record's timestamp cell outlives a pending timestamp packet
    /// (`Recorded::release`).
    fn drop(&mut self) {
        let rec = self.rec.get_mut().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(r) = rec {
            r.release(&self.dev, *self.cell.target.get_mut());
        }
    }
}

/// The words of an event's last record, readable without a lock: a sequence lock
/// (`seq` odd while a writer changes them; a reader retries when it moved). Every
/// writer takes `seq` (compare-exchange to odd); a writer that changes the timeline
/// (`serial`, `handle`) also holds the event's `rec` lock and replaces the `Arc` there
/// under `seq`, so while `serial` names a timeline, `rec` keeps that timeline alive.
/// A re-record on the same timeline (the common case: an event recorded again and
/// again on one stream) stores the count and queue only: no lock, no `Arc` count.
struct RecordCell {
    seq: AtomicU64,
    /// [`Signal::serial`] of the timeline (never 0), or 0: never recorded.
    serial: AtomicU64,
    /// [`Signal::handle`] of the timeline.
    handle: AtomicU64,
    /// The stream's packet count at the record ([`Point::target`]).
    target: AtomicU64,
    /// Queue of the stream's last packet then ([`Point::queue_id`]).
    queue_id: AtomicU32,
}

/// A consistent copy of an event's [`RecordCell`] (a recorded event's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecordWords {
    /// The timeline's [`Signal::serial`].
    pub(crate) serial: u64,
    /// The timeline's [`Signal::handle`].
    pub(crate) handle: u64,
    /// The recorded packet count.
    pub(crate) target: u64,
    /// The queue of the recording stream's last packet.
    pub(crate) queue_id: u32,
    /// The recorded work had completed when the words were read.
    pub(crate) done: bool,
}

impl RecordWords {
    /// [`Point::threshold`] of the recorded point.
    #[inline(always)]
    pub(crate) fn threshold(&self) -> i64 {
        crate::stream::TIMELINE_BASE - self.target as i64
    }
}

impl RecordCell {
    const fn new() -> Self {
        RecordCell {
            seq: AtomicU64::new(0),
            serial: AtomicU64::new(0),
            handle: AtomicU64::new(0),
            target: AtomicU64::new(0),
            queue_id: AtomicU32::new(0),
        }
    }

    /// Take the write side: returns the even sequence number it held. Writers hold it
    /// for a few stores, so a busy one is waited for (spinning, then yielding).
    #[inline(always)]
    fn write_lock(&self) -> u64 {
        match self.try_write_lock() {
            Some(s) => s,
            None => self.write_lock_slow(),
        }
    }

    /// One attempt at the write side: the even sequence number it held, or None while
    /// another writer holds it.
    #[inline(always)]
    fn try_write_lock(&self) -> Option<u64> {
        let s = self.seq.load(Ordering::Relaxed);
        if s & 1 == 0
            && self
                .seq
                .compare_exchange(s, s + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        {
            // The stores that follow must not become visible before the odd `seq`.
            std::sync::atomic::fence(Ordering::Release);
            return Some(s);
        }
        None
    }

    #[cold]
    #[inline(never)]
    fn write_lock_slow(&self) -> u64 {
        let mut spins = 0u32;
        loop {
            if let Some(s) = self.try_write_lock() {
                return s;
            }
            spins += 1;
            if spins < 100 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }

    /// Release the write side taken at `s`; `changed`: the words were written (readers
    /// that overlapped must retry).
    #[inline(always)]
    fn write_unlock(&self, s: u64, changed: bool) {
        self.seq
            .store(if changed { s + 2 } else { s }, Ordering::Release);
    }

    /// A consistent copy of the words, with whether the recorded work had completed
    /// (read inside the section: the timeline was the record's, so alive, meanwhile).
    /// None: never recorded.
    #[inline(always)]
    fn read(&self) -> Option<RecordWords> {
        loop {
            let s = self.seq.load(Ordering::Acquire);
            let serial = self.serial.load(Ordering::Relaxed);
            let handle = self.handle.load(Ordering::Relaxed);
            let target = self.target.load(Ordering::Relaxed);
            let queue_id = self.queue_id.load(Ordering::Relaxed);
            // `handle`, not `serial`: a torn read may pair a new serial with the initial
            // handle 0, which is no signal.
            let done = handle != 0 && {
                // SAFETY: while `seq` stays at `s` (checked below before the value is
                // used), `handle` is the `amd_signal_t` of the timeline the event's `rec`
                // keeps alive; and any signal handle stays mapped signal memory for the
                // life of the device's signal pool, which the event's device holds.
                let v = unsafe { crate::signal::load_value_at(handle) };
                v <= crate::stream::TIMELINE_BASE - target as i64
            };
            std::sync::atomic::fence(Ordering::Acquire);
            if s & 1 == 0 && self.seq.load(Ordering::Relaxed) == s {
                return (serial != 0).then_some(RecordWords {
                    serial,
                    handle,
                    target,
                    queue_id,
                    done,
                });
            }
            std::hint::spin_loop();
        }
    }

    /// Store the count and queue of a record on the timeline already named (the writer
    /// holds the write side).
    #[inline(always)]
    fn store_point(&self, target: u64, queue_id: u32) {
        self.target.store(target, Ordering::Relaxed);
        self.queue_id.store(queue_id, Ordering::Relaxed);
    }
}

/// A HIP event.
///
/// # Example
///
/// ```
/// use kfdrt::EventFlags;
/// use kfdrt::{Device, ErrorKind, Event, MemoryKind};
///
/// # fn main() -> kfdrt::Result<()> {
/// let dev = Device::open()?;
/// let (a, b) = (dev.create_stream(0)?, dev.create_stream(0)?);
/// let buf = dev.alloc(MemoryKind::Device, 0, 1 << 16)?;
/// let (start, stop) = (dev.create_event(EventFlags::DEFAULT)?, dev.create_event(EventFlags::DEFAULT)?);
/// start.record(&a)?;
/// a.memset(buf.va(), 1, 1 << 16)?;
/// stop.record(&a)?;
/// // Stream b waits for a's memset without blocking the host.
/// let ready = dev.create_event(EventFlags::DISABLE_TIMING)?;
/// ready.record(&a)?;
/// b.wait_event(&ready, 0)?;
/// b.synchronize()?;
/// assert!(stop.query().is_ok());
/// let ms = Event::elapsed_ms(&start, &stop)?;
/// assert!(ms >= 0.0);
/// // A non-timing event has no timestamps.
/// let e = Event::elapsed_ms(&start, &ready).unwrap_err();
/// assert_ne!(e.kind(), ErrorKind::NotReady);
/// # Ok(())
/// # }
/// ```
pub struct Event {
    dev: Arc<DeviceInner>,
    flags: u32,
    /// The record's timeline and timestamp cell (see [`RecordCell`] for the rest).
    rec: Mutex<Option<Recorded>>,
    cell: RecordCell,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = lock(&self.rec);
        write!(f, "Event(flags={:#x} recorded={})", self.flags, r.is_some())
    }
}

impl Device {
    /// `hipEventCreateWithFlags`: [`EventFlags::DEFAULT`], or
    /// [`EventFlags::BLOCKING_SYNC`] and/or [`EventFlags::DISABLE_TIMING`];
    /// [`EventFlags::INTERPROCESS`] is NotSupported (no IPC events).
    pub fn create_event(&self, flags: EventFlags) -> Result<Event> {
        if flags.contains(EventFlags::INTERPROCESS) {
            return Err(Error::new(
                ErrorKind::NotSupported,
                "hipEventCreateWithFlags",
                "hipEventInterprocess: kfdrt has no interprocess events",
            ));
        }
        let flags = flags.bits();
        Ok(Event {
            dev: self.inner.clone(),
            flags,
            rec: Mutex::new(None),
            cell: RecordCell::new(),
        })
    }
}

impl Event {
    /// The creation flags.
    pub fn flags(&self) -> EventFlags {
        EventFlags::from_bits_retain(self.flags)
    }

    fn timing(&self) -> bool {
        self.flags & EVENT_DISABLE_TIMING == 0
    }

    /// `hipEventRecord`: capture the stream's work so far. A timing event adds one packet
    /// that writes the GPU clock at that point; otherwise no packet is submitted.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        if !Arc::ptr_eq(&self.dev, &stream.inner.dev) {
            return Err(Error::new(
                ErrorKind::InvalidHandle,
                "hipEventRecord",
                "event and stream belong to different devices",
            ));
        }
        // Fast path: no packet to submit (no timestamp) and the event's record already on
        // this stream's timeline: store the new count and queue, nothing else changes.
        if !self.timing() {
            // A write side another thread holds goes to the slow path (which waits for
            // it): the fast path makes no call but its tail call, so it needs no frame.
            if let Some((target, queue_id)) = stream.record_fast() {
                let c = &self.cell;
                if let Some(s) = c.try_write_lock() {
                    let same = c.serial.load(Ordering::Relaxed) == stream.inner.timeline.serial();
                    if same {
                        c.store_point(target, queue_id);
                    }
                    c.write_unlock(s, same);
                    if same {
                        return Ok(());
                    }
                }
            }
        }
        self.record_slow(stream)
    }

    #[cold]
    #[inline(never)]
    fn record_slow(&self, stream: &Stream) -> Result<()> {
        let ts = if self.timing() {
            Some(Arc::new(Signal::new(&self.dev.signals, 0)?))
        } else {
            None
        };
        let addr = ts
            .as_ref()
            .map(|s| s.handle() + crate::hsa::SIGNAL_END_TS_OFFSET);
        let point = stream.record(addr)?;
        let old = {
            let mut rec = lock(&self.rec);
            let c = &self.cell;
            let s = c.write_lock();
            let old_target = c.target.load(Ordering::Relaxed);
            c.serial.store(point.timeline.serial(), Ordering::Relaxed);
            c.handle.store(point.timeline.handle(), Ordering::Relaxed);
            c.store_point(point.target, point.queue_id);
            let old = rec.replace(Recorded {
                timeline: point.timeline,
                gpu_index: point.gpu_index,
                ts,
            });
            c.write_unlock(s, true);
            old.map(|o| (o, old_target))
        };
        // The previous record's signals go back to their pool outside the locks.
        if let Some((o, target)) = old {
            o.release(&self.dev, target);
        }
        Ok(())
    }

    pub(crate) fn on_device(&self, dev: &Arc<DeviceInner>) -> bool {
        Arc::ptr_eq(&self.dev, dev)
    }

    pub(crate) fn device_name(&self) -> String {
        device_name(&self.dev)
    }

    /// The last record as a point (its timeline kept alive by the clone).
    pub(crate) fn recorded_point(&self) -> Option<Point> {
        let rec = lock(&self.rec);
        let r = rec.as_ref()?;
        // `rec` held: the timeline cannot change, only the count and queue (a re-record
        // on it), read consistently from the cell.
        let w = self.cell.read()?;
        Some(Point {
            timeline: r.timeline.clone(),
            target: w.target,
            queue_id: w.queue_id,
            gpu_index: r.gpu_index,
        })
    }

    /// The last record's words without a lock or a reference count (the
    /// hipStreamWaitEvent hot path), with whether it had completed; None: never recorded.
    #[inline(always)]
    pub(crate) fn recorded_words(&self) -> Option<RecordWords> {
        self.cell.read()
    }

    /// `hipEventQuery`: Ok when the recorded work completed (or never recorded), else
    /// NotReady.
    pub fn query(&self) -> Result<()> {
        match self.cell.read() {
            Some(w) if !w.done => {
                // A polling call: the answer allocates nothing.
                static PENDING: StaticError = StaticError::new(
                    ErrorKind::NotReady,
                    "hipEventQuery",
                    "recorded work pending",
                );
                Err(Error::from_static(&PENDING))
            }
            _ => Ok(()),
        }
    }

    /// `hipEventSynchronize`: wait for the recorded work (immediately Ok if never
    /// recorded). A `hipEventBlockingSync` event sleeps at once instead of spinning first.
    pub fn synchronize(&self) -> Result<()> {
        self.host_wait(None)
    }

    /// [`Event::synchronize`] with a deadline (a Rust extension; HIP has none): NotReady
    /// when the recorded work has not completed within `timeout`, LaunchFailure on a
    /// GPU fault, Ok once complete (or never recorded).
    pub fn wait_timeout(&self, timeout: std::time::Duration) -> Result<()> {
        self.host_wait(std::time::Instant::now().checked_add(timeout))
            .map_err(|e| match e.kind() {
                ErrorKind::NotReady => Error::new(
                    ErrorKind::NotReady,
                    "Event::wait_timeout",
                    "the deadline passed before the recorded work completed",
                ),
                _ => e,
            })
    }

    /// The recorded point through the device's one host-wait path; a
    /// `hipEventBlockingSync` event sleeps at once instead of spinning first.
    fn host_wait(&self, deadline: Option<std::time::Instant>) -> Result<()> {
        let Some(p) = self.recorded_point() else {
            return Ok(());
        };
        let spin = if self.flags & EVENT_BLOCKING_SYNC != 0 {
            std::time::Duration::ZERO
        } else {
            self.dev.wait_spin()
        };
        self.dev.host_synchronize([p], None, spin, deadline)
    }

    /// InvalidHandle unless the event was recorded with timing.
    fn timed_record(&self, call: &'static str) -> Result<()> {
        match lock(&self.rec).as_ref() {
            Some(rec) if rec.ts.is_some() => Ok(()),
            Some(_) => Err(Error::new(
                ErrorKind::InvalidHandle,
                call,
                "event created with hipEventDisableTiming",
            )),
            None => Err(Error::new(
                ErrorKind::InvalidHandle,
                call,
                "event was never recorded",
            )),
        }
    }

    fn timestamp(&self, call: &'static str) -> Result<u64> {
        let r = lock(&self.rec);
        let Some(rec) = r.as_ref() else {
            return Err(Error::new(
                ErrorKind::InvalidHandle,
                call,
                "event was never recorded",
            ));
        };
        let Some(ts) = &rec.ts else {
            return Err(Error::new(
                ErrorKind::InvalidHandle,
                call,
                "event created with hipEventDisableTiming",
            ));
        };
        // `rec` held: the words are this record's.
        if !self.cell.read().is_some_and(|w| w.done) {
            return Err(Error::new(ErrorKind::NotReady, call, "event not complete"));
        }
        Ok(ts.timestamps().1)
    }

    /// `hipEventElapsedTime`: milliseconds between two completed timing events, from the
    /// GPU timestamps the CP wrote.
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        let call = "hipEventElapsedTime";
        // Both records are checked before either's completion (as CLR): an unrecorded or
        // untimed event is InvalidHandle even while the other is still pending.
        start.timed_record(call)?;
        end.timed_record(call)?;
        let a = start.timestamp(call)?;
        let b = end.timestamp(call)?;
        Ok(((b as f64 - a as f64) * 1000.0 / GPU_TIMESTAMP_HZ as f64) as f32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;

    /// Sets the flag when dropped: a failed assertion of the reading thread stops the
    /// writers too (the scope joins them), instead of hanging the test.
    struct StopOnDrop<'a>(&'a AtomicBool);

    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }

    /// Two writers alternate the cell between two timelines, each with counts of its own
    /// parity (and the queue id equal to the count): a reader never sees one timeline's
    /// serial with the other's handle or count, or a count with another write's queue.
    #[test]
    fn record_words_are_never_torn() {
        let dev = crate::Device::open_for_test("emu:mi300x");
        let sigs = [
            Signal::new(&dev.inner.signals, 0).unwrap(),
            Signal::new(&dev.inner.signals, 0).unwrap(),
        ];
        let cell = RecordCell::new();
        let stop = AtomicBool::new(false);
        let mut seen = [0u64; 2];
        std::thread::scope(|t| {
            for (parity, sig) in sigs.iter().enumerate() {
                let (cell, stop) = (&cell, &stop);
                t.spawn(move || {
                    let mut i = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let target = 2 * i + parity as u64;
                        let s = cell.write_lock();
                        cell.serial.store(sig.serial(), Ordering::Relaxed);
                        cell.handle.store(sig.handle(), Ordering::Relaxed);
                        cell.store_point(target, target as u32);
                        cell.write_unlock(s, true);
                        i += 1;
                    }
                });
            }
            let _stop = StopOnDrop(&stop);
            for _ in 0..1_000_000 {
                let Some(w) = cell.read() else { continue };
                let k = (w.target % 2) as usize;
                assert_eq!(w.serial, sigs[k].serial(), "serial of {w:?}");
                assert_eq!(w.handle, sigs[k].handle(), "handle of {w:?}");
                assert_eq!(w.queue_id, w.target as u32, "queue of {w:?}");
                // Value 0 is below every threshold.
                assert!(w.done);
                seen[k] += 1;
            }
        });
        assert!(
            seen.iter().sum::<u64>() > 0,
            "the reader saw records: {seen:?}"
        );
    }

    /// Records of one event racing on two streams (each record on the stream its last one
    /// was on takes the lock-free path; a switch takes the lock): the point read by a
    /// waiter is always one stream's timeline with that stream's queue and a count it
    /// reached.
    #[test]
    fn concurrent_records_on_two_streams_give_consistent_points() {
        let dev = crate::Device::open_for_test("emu:mi300x");
        let mem = dev
            .alloc(crate::MemoryKind::Signal, 0, 4096)
            .expect("signal memory");
        let streams = [dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap()];
        for (i, s) in streams.iter().enumerate() {
            s.write_value32(mem.va() + 4 * i as u64, 1, crate::WriteValueFlags::DEFAULT)
                .unwrap();
        }
        let ids: Vec<(u64, u32)> = streams
            .iter()
            .map(|s| (s.inner.timeline.serial(), s.hw_queue_id()))
            .collect();
        assert_ne!(ids[0].1, ids[1].1, "two shared queues");
        let ev = dev.create_event(crate::EventFlags::DISABLE_TIMING).unwrap();
        let stop = AtomicBool::new(false);
        std::thread::scope(|t| {
            for (i, s) in streams.iter().enumerate() {
                let (ev, stop, mem) = (&ev, &stop, &mem);
                t.spawn(move || {
                    let mut n = 0u32;
                    while !stop.load(Ordering::Relaxed) {
                        // Two records per write: the second takes the lock-free path
                        // unless the other thread switched the event in between.
                        s.write_value32(
                            mem.va() + 4 * i as u64,
                            n,
                            crate::WriteValueFlags::DEFAULT,
                        )
                        .unwrap();
                        ev.record(s).unwrap();
                        ev.record(s).unwrap();
                        n += 1;
                        if n % 256 == 0 {
                            s.synchronize_timeout(std::time::Duration::from_secs(20))
                                .unwrap();
                        }
                    }
                });
            }
            let _stop = StopOnDrop(&stop);
            for _ in 0..20_000 {
                let Some(p) = ev.recorded_point() else {
                    continue;
                };
                let k = ids
                    .iter()
                    .position(|&(serial, _)| serial == p.timeline.serial())
                    .expect("one of the streams' timelines");
                assert_eq!(p.queue_id, ids[k].1, "stream {k}'s queue");
                let submitted = streams[k].inner.point().target;
                assert!(
                    p.target >= 1 && p.target <= submitted,
                    "count {} of {submitted}",
                    p.target
                );
            }
        });
        for s in &streams {
            s.synchronize_timeout(std::time::Duration::from_secs(20))
                .unwrap();
        }
    }
}
