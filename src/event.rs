//! HIP events: a recorded completion point on a stream timeline, optionally with GPU
//! timestamps for elapsed time.

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

struct Recorded {
    point: Point,
    /// Cell the CP writes the GPU clock into (timing events).
    ts: Option<Arc<Signal>>,
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
    rec: Mutex<Option<Recorded>>,
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
        let ts = if self.timing() {
            Some(Arc::new(Signal::new(&self.dev.signals, 0)?))
        } else {
            None
        };
        let addr = ts
            .as_ref()
            .map(|s| s.handle() + crate::hsa::SIGNAL_END_TS_OFFSET);
        let point = stream.record(addr)?;
        *lock(&self.rec) = Some(Recorded { point, ts });
        Ok(())
    }

    pub(crate) fn on_device(&self, dev: &Arc<DeviceInner>) -> bool {
        Arc::ptr_eq(&self.dev, dev)
    }

    pub(crate) fn device_name(&self) -> String {
        device_name(&self.dev)
    }

    pub(crate) fn recorded_point(&self) -> Option<Point> {
        lock(&self.rec).as_ref().map(|r| r.point.clone())
    }

    /// `hipEventQuery`: Ok when the recorded work completed (or never recorded), else
    /// NotReady.
    pub fn query(&self) -> Result<()> {
        match self.recorded_point() {
            Some(p) if !p.done() => {
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
        if !rec.point.done() {
            return Err(Error::new(ErrorKind::NotReady, call, "event not complete"));
        }
        Ok(ts.timestamps().1)
    }

    /// `hipEventElapsedTime`: milliseconds between two completed timing events, from the
    /// GPU timestamps the CP wrote.
    pub fn elapsed_ms(start: &Event, end: &Event) -> Result<f32> {
        let call = "hipEventElapsedTime";
        let a = start.timestamp(call)?;
        let b = end.timestamp(call)?;
        Ok(((b as f64 - a as f64) * 1000.0 / GPU_TIMESTAMP_HZ as f64) as f32)
    }
}
