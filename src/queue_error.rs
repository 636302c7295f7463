//! Queue exceptions reported through the context save area header
//! (`kfd_context_save_area_header`, see `firmware-notes/firmware-rules.md`).
//!
//! At device open kfdrt enables runtime exception delivery (RUNTIME_ENABLE, KFD 1.13,
//! before any queue exists) and creates one signal event for queue errors. Each AQL
//! queue gets a 64-bit error payload in its `amd_queue_t` page; its context save area
//! header (one per XCC) names the payload and the event, as libhsakmt's
//! `fill_cwsr_header` does. On a packet error the firmware / KFD OR `KFD_EC_MASK(code)`
//! into the payload and signal the event; [`Registry::poll`] turns a non-zero payload
//! into a fault that names the exception, which the waiting stream makes sticky.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use kfd::abi;

use crate::sync::lock;

/// Offset of the error payload in a queue's 4 KiB `amd_queue_t` buffer (past the
/// 256-byte `amd_queue_t`).
pub(crate) const PAYLOAD_OFFSET: u64 = 0x800;

/// The error payloads of the device's live queues.
#[derive(Default)]
pub(crate) struct Registry {
    /// (GPU index, queue id, CPU address of the payload).
    queues: Mutex<Vec<(usize, u32, u64)>>,
}

impl Registry {
    /// Registers a queue's payload (`payload` is CPU-mapped and 8-byte aligned, and stays
    /// valid until [`Registry::remove`]).
    pub(crate) fn add(&self, gpu_index: usize, queue_id: u32, payload: u64) {
        let mut q = lock(&self.queues);
        q.push((gpu_index, queue_id, payload));
    }

    /// Forgets a queue (before its memory is freed).
    pub(crate) fn remove(&self, queue_id: u32) {
        let mut q = lock(&self.queues);
        q.retain(|&(_, id, _)| id != queue_id);
    }

    /// The first queue error reported on GPU `gpu_index`: "queue N: EC_..." or None.
    pub(crate) fn poll(&self, gpu_index: usize) -> Option<(u32, u64)> {
        let q = lock(&self.queues);
        q.iter()
            .filter(|e| e.0 == gpu_index)
            .find_map(|&(_, id, p)| {
                // SAFETY: registered payloads are live, CPU-mapped, 8-byte aligned cells
                // (removed under this lock before the queue's memory is freed).
                let v = unsafe { AtomicU64::from_ptr(p as *mut u64) }.load(Ordering::Acquire);
                (v != 0).then_some((id, v))
            })
    }
}

/// The description of a queue error payload.
pub(crate) fn describe(gpu_id: u32, queue_id: u32, payload: u64) -> String {
    format!(
        "GPU {gpu_id:#x} queue {queue_id} stopped on a queue exception: {} (payload {payload:#x})",
        abi::ec::describe(payload)
    )
}

/// The context save area headers of a queue: `num_xcc` headers, `stride` bytes apart,
/// each naming the error payload and event.
pub(crate) fn cwsr_headers(
    num_xcc: u32,
    stride: u64,
    payload_va: u64,
    event_id: u32,
) -> Vec<(u64, abi::ContextSaveAreaHeader)> {
    (0..num_xcc.max(1) as u64)
        .map(|i| {
            (
                i * stride,
                abi::ContextSaveAreaHeader {
                    err_payload_addr: payload_va,
                    err_event_id: event_id,
                    ..Default::default()
                },
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use pm4::aql::AqlPacket;

    use crate::cmdbuf::CmdBuf;
    use crate::stream::Place;
    use crate::{Device, DeviceSpec, ErrorKind};

    /// Runs `f` on a thread; a hang (the old behaviour: nothing reported the queue
    /// error) fails after 20 s instead of blocking the test run.
    fn bounded<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(f());
        });
        rx.recv_timeout(Duration::from_secs(20))
            .expect("the queue error was never reported: the stream hangs")
    }

    fn open(preset: &str) -> Device {
        Device::open_spec(&DeviceSpec::parse(preset).unwrap()).unwrap()
    }

    /// kfdrt enables runtime exception delivery at open, before any queue: a second
    /// RUNTIME_ENABLE then finds it enabled (EBUSY), where a late first call would have
    /// failed with EEXIST (queues exist; `kfd_chardev.c` `runtime_enable`).
    #[test]
    fn runtime_enable_precedes_the_first_queue() {
        let dev = open("emu:mi210");
        let _s = dev.create_stream(0).unwrap();
        let en = kfd::abi::KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK;
        let e = kfd::ioctl::runtime_enable(dev.backend().as_ref(), 0, en).unwrap_err();
        assert_eq!(e.errno, rustix::io::Errno::BUSY, "{e}");
        // The kernel's answer to a late first call: disable, then enable with a queue.
        kfd::ioctl::runtime_enable(dev.backend().as_ref(), 0, 0).unwrap();
        let e = kfd::ioctl::runtime_enable(dev.backend().as_ref(), 0, en).unwrap_err();
        assert_eq!(e.errno, rustix::io::Errno::EXIST, "{e}");
    }

    /// An AMD vendor AQL packet of an unknown format: the CP stops the queue with
    /// EC_QUEUE_PACKET_VENDOR_UNSUPPORTED, which reaches the stream as a sticky error.
    #[test]
    fn unsupported_vendor_packet_is_a_sticky_error_not_a_hang() {
        let dev = open("emu:mi300x");
        let s = dev.create_stream(0).unwrap();
        let mut words = [0u32; 16];
        // Vendor-specific type (0), barrier bit, format 7 in byte 2.
        words[0] = 0x0100 | (7 << 16);
        let mut c = CmdBuf::new(s.target());
        c.raw_packet(AqlPacket::Unknown { words }).unwrap();
        s.submit(&c, Place::Any, None).unwrap();
        let (r, s) = bounded(move || (s.synchronize(), s));
        let e = r.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
        assert!(
            e.to_string().contains("EC_QUEUE_PACKET_VENDOR_UNSUPPORTED"),
            "{e}"
        );
        let e = s.query().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::LaunchFailure, "{e}");
    }

    /// The old gfx9 wait (WAIT_REG_MEM64, 0x93) on an MI300X: an unknown opcode, reported
    /// as EC_QUEUE_PACKET_UNSUPPORTED.
    #[test]
    fn wait_reg_mem64_on_gfx9_reports_packet_unsupported() {
        let dev = open("emu:mi300x");
        let s = dev.create_stream(0).unwrap();
        let cell = dev
            .alloc(crate::MemoryKind::Signal, 0, 4096)
            .expect("signal memory");
        let va = cell.va();
        let mut c = CmdBuf::new(s.target());
        {
            let w = pm4::pkt3::WaitRegMem64 {
                function: pm4::pkt3::CompareFn::Equal,
                mem_space: pm4::pkt3::MemSpace::Memory,
                operation: pm4::pkt3::WaitOperation::WaitRegMem,
                engine: 0,
                cache_policy: pm4::pkt3::CachePolicy::Lru,
                addr: va,
                reference: 0,
                mask: u64::MAX,
                poll_interval: 4,
            };
            let mut words = [0u32; 16];
            let n = w.encode(pm4::GfxFamily::Gfx9, &mut words).unwrap();
            c.raw_pm4(&words[..n]).unwrap();
        }
        s.submit(&c, Place::Any, None).unwrap();
        let e = bounded(move || s.synchronize()).unwrap_err();
        assert!(e.to_string().contains("EC_QUEUE_PACKET_UNSUPPORTED"), "{e}");
        drop(cell);
    }
}
