//! What a check leaves on the device when it ends: [`Drain`] settles its streams before
//! its buffers are freed, on every way out of the check; [`FaultAudit`] lets the runner
//! see a GPU fault that leftover work raised anyway.

use kfd::abi::{self, CreateEventArgs, EventData};
use kfdrt::{ErrorKind, Stream};

use super::{note_step, WAIT};

/// Settles a check's streams before its buffers are freed, whatever ends the check: a
/// `?`, a failed `ensure!`, a panic. Its drop opens the host-held gates (`open`: the
/// stores that release the check's waitValue / callback holds), then synchronizes each
/// stream, bounded by [`WAIT`]. A stream still busy after that keeps the check thread,
/// and with it every buffer, until it drains (the runner's deadline then names this
/// step): memory is never freed under work the GPU may still run.
///
/// Declare it after the buffers and streams it names: locals drop in reverse order, so
/// it drops first. Raw KFD queues need none: declared after the memory their packets
/// name, they drop first, and DESTROY_QUEUE returns only once no engine touches the
/// queue (`firmware-notes/kfd-queues.md`).
pub struct Drain<'a, F: FnMut() = fn()> {
    streams: Vec<&'a Stream>,
    open: F,
    armed: bool,
}

impl<'a> Drain<'a> {
    /// Drain `streams` (their work needs no host action to finish).
    pub fn streams(streams: &[&'a Stream]) -> Drain<'a> {
        Drain {
            streams: streams.to_vec(),
            open: || {},
            armed: true,
        }
    }

    /// Run `open` first (the stores that release every host-held gate of the streams).
    pub fn open<G: FnMut()>(mut self, open: G) -> Drain<'a, G> {
        self.armed = false;
        Drain {
            streams: std::mem::take(&mut self.streams),
            open,
            armed: true,
        }
    }
}

impl<F: FnMut()> Drain<'_, F> {
    /// Do nothing on drop: the check hands its streams to another drain (e.g. before it
    /// destroys one of them while busy).
    pub fn disarm(mut self) {
        self.armed = false;
    }
}

impl<F: FnMut()> Drop for Drain<'_, F> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        (self.open)();
        for (i, s) in self.streams.iter().enumerate() {
            let busy = matches!(s.synchronize_timeout(WAIT),
                Err(e) if e.kind() == ErrorKind::NotReady);
            if busy {
                // A fault stops the queue (the sticky error): only a busy stream can still
                // touch the buffers, so it keeps them until it drains.
                note_step(format!(
                    "draining stream {i} of the check: still busy {WAIT:?} after its gates \
                     were opened (its buffers stay allocated until it drains)"
                ));
                let _ = s.synchronize();
            }
        }
    }
}

/// A MEMORY event of the runner's own on a device: KFD sets every MEMORY event of the
/// process on a GPU VM fault (`kfd_signal_vm_fault_event`, `firmware-notes/kfd-events.md`),
/// so the runner sees a fault whatever the runtime's own watcher did with it.
pub struct FaultAudit<'a> {
    b: &'a dyn kfd::Backend,
    id: Option<u32>,
}

impl<'a> FaultAudit<'a> {
    /// Create the event (auto-reset). Without it (CREATE_EVENT refused) nothing is seen.
    pub fn new(b: &'a dyn kfd::Backend) -> FaultAudit<'a> {
        let mut a = CreateEventArgs {
            event_type: abi::KFD_IOC_EVENT_MEMORY,
            auto_reset: 1,
            ..Default::default()
        };
        let id = kfd::ioctl::create_event(b, &mut a)
            .ok()
            .map(|()| a.event_id);
        FaultAudit { b, id }
    }

    /// The fault raised since the last call, if any, waiting at most `timeout_ms`.
    pub fn take(&self, timeout_ms: u32) -> Option<String> {
        let mut ev = [EventData {
            event_id: self.id?,
            ..Default::default()
        }];
        let r = kfd::ioctl::wait_events(self.b, &mut ev, false, timeout_ms).ok()?;
        (r == abi::KFD_IOC_WAIT_RESULT_COMPLETE).then(|| {
            let m = ev[0].memory_exception();
            format!("GPU {:#x} memory fault at page {:#x}", m.gpu_id, m.va)
        })
    }
}

impl Drop for FaultAudit<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            let _ = kfd::ioctl::destroy_event(self.b, id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;

    use kfdrt::{Device, DeviceSpec, MemoryKind, WriteValueFlags};

    use super::super::raw::Scratch;
    use super::super::{hold, settle};
    use super::*;

    fn held(dev: &Device) -> (Scratch, Stream) {
        let m = Scratch::new(dev, MemoryKind::Signal, 0, 4096).unwrap();
        let s = dev.create_stream(0).unwrap();
        hold(&s, m.va(0)).unwrap();
        s.write_value32(m.va(64), 7, WriteValueFlags::DEFAULT)
            .unwrap();
        (m, s)
    }

    #[test]
    fn drop_opens_the_gate_and_drains_the_stream() {
        let dev = Device::open_spec(&DeviceSpec::Emulated("emu".into())).unwrap();
        let (m, s) = held(&dev);
        {
            let _drain = Drain::streams(&[&s]).open(|| m.u32(0).store(1, Ordering::Release));
            settle();
            assert_eq!(m.u32(64).load(Ordering::Acquire), 0, "held");
        }
        // Nothing is left on the stream once the drain is gone: the write behind the
        // gate landed, so the buffer may go.
        assert_eq!(m.u32(64).load(Ordering::Acquire), 7);
        s.query().unwrap();
    }

    #[test]
    fn a_disarmed_drain_does_nothing() {
        let dev = Device::open_spec(&DeviceSpec::Emulated("emu".into())).unwrap();
        let (m, s) = held(&dev);
        Drain::streams(&[&s])
            .open(|| m.u32(0).store(1, Ordering::Release))
            .disarm();
        settle();
        assert_eq!(m.u32(0).load(Ordering::Acquire), 0, "the gate stayed shut");
        assert_eq!(m.u32(64).load(Ordering::Acquire), 0);
        m.u32(0).store(1, Ordering::Release);
        s.synchronize_timeout(WAIT).unwrap();
        assert_eq!(m.u32(64).load(Ordering::Acquire), 7);
    }

    #[test]
    fn the_audit_sees_a_fault_once() {
        let dev = Device::open_spec(&DeviceSpec::Emulated("emu".into())).unwrap();
        let audit = FaultAudit::new(dev.backend().as_ref());
        assert_eq!(audit.take(0), None);
        let (m, s) = held(&dev);
        let page = m.va(0);
        drop(m);
        let f = audit.take(5000).expect("a fault within 5 s");
        assert!(f.ends_with(&format!("page {page:#x}")), "{f}");
        // Auto-reset: seen once.
        assert_eq!(audit.take(0), None);
        drop(s);
    }
}
