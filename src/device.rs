//! [`Device`]: an opened KFD device (all its GPU agents) and the KFD init sequence.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex};

use kfd::abi::ProcessDeviceApertures;
use kfd::topology::Node;
use kfd::Backend;

use crate::device_select::{open_backend, DeviceSpec};
use crate::error::{Error, ErrorKind, Result};
use crate::sync::lock;

/// Lowest KFD minor version kfdrt runs on: 1.5 brings SVM and the queue/memory ioctls
/// of this ABI (older kernels are missing too much to emulate HIP's semantics).
pub const MIN_KFD_MINOR: u32 = 5;

/// One GPU agent of a [`Device`].
#[derive(Debug)]
pub struct Gpu {
    /// Index among the device's GPUs (HIP device ordinal).
    pub index: usize,
    /// KFD gpu_id.
    pub gpu_id: u32,
    /// The topology node.
    pub node: Node,
    /// PM4/AQL packet family.
    pub family: pm4::GfxFamily,
    /// SDMA packet version.
    pub sdma_version: pm4::SdmaVersion,
    /// Apertures from GET_PROCESS_APERTURES_NEW.
    pub apertures: ProcessDeviceApertures,
    /// The render node (kept open: buffer objects are mmapped through it).
    pub(crate) render: OwnedFd,
}

impl Gpu {
    /// gfx target name, e.g. `gfx942`.
    pub fn gfx_name(&self) -> String {
        self.node
            .gfx_target_name()
            .unwrap_or_else(|| "unknown".into())
    }
    /// Number of compute units.
    pub fn cu_count(&self) -> u32 {
        self.node.cu_count()
    }
}

/// The KFD connection and the GPUs: what buffer objects need to free themselves.
/// Dropped after the last [`crate::Buffer`]: render fds close, then the backend.
pub(crate) struct DeviceCore {
    pub(crate) backend: Arc<dyn Backend>,
    pub(crate) kfd_version: (u32, u32),
    pub(crate) gpus: Vec<Gpu>,
    /// Doorbell pages mapped so far (per GPU); unmapped when the last queue is gone.
    pub(crate) doorbells: Mutex<Vec<(usize, crate::ring::DoorbellPage)>>,
    /// The signal event every queue's context save area header names for queue errors.
    /// Created with the first queue (a signal event needs the event page first).
    pub(crate) queue_error_event: std::sync::OnceLock<u32>,
    /// The error payloads of live queues.
    pub(crate) queue_errors: crate::queue_error::Registry,
    /// Per GPU: the MMIO remap page (HDP flush) and whether the CPU wrote its VRAM.
    pub(crate) hdp: Vec<crate::hdp::Hdp>,
    /// Peer access between GPUs and the device buffers it maps.
    pub(crate) peers: crate::memory::Peers,
    /// Address ranges of the live buffer objects (length checks of copies and fills).
    pub(crate) extents: crate::memory::Extents,
    /// SVM context-save areas of destroyed queues, for reuse: (gpu index, address,
    /// length). Unmapped when the device goes.
    pub(crate) cwsr_free: Mutex<Vec<(usize, u64, usize)>>,
}

impl Drop for DeviceCore {
    fn drop(&mut self) {
        for h in &mut self.hdp {
            h.close(self.backend.as_ref());
        }
        if let Some(&e) = self.queue_error_event.get() {
            let _ = kfd::ioctl::destroy_event(self.backend.as_ref(), e);
        }
        // Queues hold the core, so none is left: unmap the doorbell pages.
        let areas = std::mem::take(self.cwsr_free.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (_, addr, len) in areas {
            // SAFETY: an SVM context-save area this device mapped; no queue uses it now.
            let _ = unsafe { rustix::mm::munmap(addr as *mut core::ffi::c_void, len) };
        }
        let pages = std::mem::take(self.doorbells.get_mut().unwrap_or_else(|e| e.into_inner()));
        for (_, p) in pages {
            if let Some(nn) = core::ptr::NonNull::new(p.base.cast()) {
                // SAFETY: the page was mapped by `doorbell_slot` and no queue uses it now.
                let _ = unsafe { self.backend.munmap(nn, p.len) };
            }
        }
    }
}

/// The runtime's per-device state (event page, signal pool, queue pools). Streams,
/// events and signals hold it; its own buffers hold only the [`DeviceCore`], so there is
/// no reference cycle: when the last user object goes, its pools free their buffers.
pub(crate) struct DeviceInner {
    pub(crate) core: Arc<DeviceCore>,
    pub(crate) events: Mutex<Option<Arc<crate::signal::EventPage>>>,
    pub(crate) signals: crate::signal::SignalPool,
    pub(crate) pools: crate::stream::QueuePools,
    pub(crate) callbacks: crate::callback::Callbacks,
    /// KFD memory-exception and hw-exception events that could be created, as
    /// (event type, event id): their data is read by type, never by position.
    pub(crate) exception_events: Vec<(u32, u32)>,
    /// Faults reported so far: (gpu_id, description). Sticky.
    pub(crate) faults: Mutex<Vec<(u32, String)>>,
    /// Managed-memory bookkeeping (`crate::managed`).
    pub(crate) managed: crate::managed::Registry,
    /// Virtual-memory-management state (`crate::vmm`).
    pub(crate) vmm: crate::vmm::Registry,
    /// How long host waits spin before sleeping, in ns.
    pub(crate) spin_ns: std::sync::atomic::AtomicU64,
    /// Stream-ordered allocator state: memory pools, current pool per GPU.
    pub(crate) mempools: crate::mempool::DevicePools,
    /// The gfx9 wait kernel's module per GPU, loaded on first use (`crate::waitkernel`).
    pub(crate) wait_kernels: crate::waitkernel::DeviceCache,
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // Streams and signals hold this struct, so they are gone: destroy the pooled
        // signals' events and the exception events. The pools' queues and buffers drop
        // with the fields, and the core (render fds, doorbell pages) after them.
        self.signals.destroy_events(self.core.backend.as_ref());
        for &(_, e) in &self.exception_events {
            let _ = kfd::ioctl::destroy_event(self.core.backend.as_ref(), e);
        }
    }
}

impl std::ops::Deref for DeviceInner {
    type Target = DeviceCore;
    fn deref(&self) -> &DeviceCore {
        &self.core
    }
}

/// An opened device: every GPU agent of the selected backend, initialised as libhsakmt
/// and ROCr do (version check, topology, render nodes, ACQUIRE_VM, apertures).
///
/// Cloning is cheap; the device is released when the last clone and every object
/// created from it are dropped.
///
/// # Example
///
/// ```
/// use kfdrt::{Device, DeviceSpec};
///
/// # fn main() -> kfdrt::Result<()> {
/// // The default device (KFDRT_DEVICE, else /dev/kfd, else the emulator) ...
/// let dev = Device::open()?;
/// println!("{} GPU(s), KFD {:?}", dev.gpus().len(), dev.kfd_version());
/// // ... or a chosen one: two emulated MI250X GPUs.
/// let two = Device::open_spec(&DeviceSpec::parse("emu:mi250x*2")?)?;
/// assert_eq!(two.gpus().len(), 2);
/// assert_eq!(two.gpus()[1].gfx_name(), "gfx90a");
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("kind", &self.inner.backend.kind())
            .field("kfd_version", &self.inner.kfd_version)
            .field(
                "gpus",
                &self
                    .inner
                    .gpus
                    .iter()
                    .map(|g| (g.gpu_id, g.gfx_name()))
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Device {
    /// Open the device `KFDRT_DEVICE` selects (default `auto`).
    pub fn open() -> Result<Device> {
        Self::open_spec(&DeviceSpec::from_env()?)
    }

    /// Open the device a spec selects.
    pub fn open_spec(spec: &DeviceSpec) -> Result<Device> {
        Self::with_backend(open_backend(spec)?)
    }

    /// Initialise a device over an already opened backend.
    ///
    /// Sequence: GET_VERSION (major 1, minor >= [`MIN_KFD_MINOR`]); the GPU nodes of the
    /// topology (non-zero gpu_id); for each, open `/dev/dri/renderD<drm_render_minor>`
    /// and ACQUIRE_VM with it; GET_PROCESS_APERTURES_NEW.
    pub fn with_backend(backend: Arc<dyn Backend>) -> Result<Device> {
        let call = "Device::open";
        let v = kfd::ioctl::get_version(backend.as_ref()).map_err(|e| Error::from_kfd(call, e))?;
        if v.major_version != 1 || v.minor_version < MIN_KFD_MINOR {
            return Err(Error::new(
                ErrorKind::NotSupported,
                call,
                format!(
                    "KFD interface {}.{} is not supported: kfdrt needs 1.{} or newer",
                    v.major_version, v.minor_version, MIN_KFD_MINOR
                ),
            ));
        }
        let nodes: Vec<Node> = backend.topology().gpu_nodes().cloned().collect();
        if nodes.is_empty() {
            return Err(Error::new(
                ErrorKind::NoDevice,
                call,
                "the KFD topology has no GPU node",
            ));
        }
        let apertures = kfd::ioctl::get_process_apertures_new(backend.as_ref())
            .map_err(|e| Error::from_kfd(call, e))?;
        let mut gpus = Vec::with_capacity(nodes.len());
        for (index, node) in nodes.into_iter().enumerate() {
            let gpu_id = node.gpu_id;
            let tv = node.properties.gfx_target_version;
            let family = pm4::GfxFamily::from_gfx_target_version(tv).ok_or_else(|| {
                Error::new(
                    ErrorKind::NotSupported,
                    call,
                    format!("GPU {gpu_id:#x}: gfx_target_version {tv} is not a supported family (gfx9..gfx12)"),
                )
            })?;
            let minor = node.properties.drm_render_minor;
            let render = backend.open_render_node(minor).map_err(|e| {
                Error::new(
                    ErrorKind::NoDevice,
                    call,
                    format!("GPU {gpu_id:#x}: opening /dev/dri/renderD{minor}: {e} (add the user to the render group)"),
                )
            })?;
            kfd::ioctl::acquire_vm(backend.as_ref(), gpu_id, render.as_raw_fd())
                .map_err(|e| Error::from_kfd(call, e))?;
            let ap = apertures
                .iter()
                .find(|a| a.gpu_id == gpu_id)
                .copied()
                .ok_or_else(|| {
                    Error::new(
                        ErrorKind::Driver,
                        call,
                        format!("GPU {gpu_id:#x} has no aperture entry"),
                    )
                })?;
            gpus.push(Gpu {
                index,
                gpu_id,
                family,
                sdma_version: pm4::SdmaVersion::for_family(family),
                apertures: ap,
                render,
                node,
            });
        }
        // Exception events: KFD signals MEMORY on GPU VM faults and HW_EXCEPTION on GPU
        // resets / hangs; waits poll them so a fault ends a wait instead of hanging it.
        // Queue exceptions reach the runtime through the context save area header once
        // runtime exception delivery is enabled, which KFD allows only before the first
        // queue (KFD 1.13 RUNTIME_ENABLE; EEXIST later). Older kernels lack the ioctl,
        // and a second device of the same process finds it enabled (EBUSY): both fine.
        let _ = kfd::ioctl::runtime_enable(
            backend.as_ref(),
            0,
            kfd::abi::KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK
                | kfd::abi::KFD_RUNTIME_ENABLE_MODE_TTMP_SAVE_MASK,
        );
        let exception_events = create_exception_events(backend.as_ref());
        Ok(Device {
            inner: Arc::new(DeviceInner {
                core: Arc::new(DeviceCore {
                    doorbells: Mutex::new(Vec::new()),
                    queue_error_event: std::sync::OnceLock::new(),
                    queue_errors: Default::default(),
                    peers: Default::default(),
                    hdp: gpus
                        .iter()
                        .map(|g| crate::hdp::Hdp::open(backend.as_ref(), g.gpu_id))
                        .collect(),
                    extents: crate::memory::Extents::default(),
                    cwsr_free: Mutex::new(Vec::new()),
                    backend,
                    kfd_version: (v.major_version, v.minor_version),
                    gpus,
                }),
                events: Mutex::new(None),
                signals: crate::signal::SignalPool::new(),
                pools: crate::stream::QueuePools::new(),
                callbacks: crate::callback::Callbacks::new(),
                exception_events,
                faults: Mutex::new(Vec::new()),
                managed: crate::managed::Registry::new(),
                vmm: crate::vmm::Registry::new(),
                spin_ns: std::sync::atomic::AtomicU64::new(
                    crate::signal::DEFAULT_SPIN.as_nanos() as u64
                ),
                mempools: crate::mempool::DevicePools::new(),
                wait_kernels: Default::default(),
            }),
        })
    }

    /// The GPU agents, in topology order.
    pub fn gpus(&self) -> &[Gpu] {
        &self.inner.gpus
    }

    /// GPU `index`, or InvalidValue naming the range.
    pub fn gpu(&self, index: usize) -> Result<&Gpu> {
        self.inner.gpu(index)
    }

    /// The KFD interface version (major, minor).
    pub fn kfd_version(&self) -> (u32, u32) {
        self.inner.kfd_version
    }

    /// How long host waits (synchronize calls) spin on the signal before sleeping in
    /// WAIT_EVENTS until the CP's interrupt. Default 20 µs (`signal::DEFAULT_SPIN`);
    /// zero sleeps at once (what `hipEventBlockingSync` / `hipDeviceScheduleBlockingSync`
    /// ask for).
    pub fn set_wait_spin(&self, spin: std::time::Duration) {
        self.inner.spin_ns.store(
            spin.as_nanos().min(u64::MAX as u128) as u64,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The current spin time of host waits.
    pub fn wait_spin(&self) -> std::time::Duration {
        self.inner.wait_spin()
    }

    /// The backend (for tools that issue raw ioctls).
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }
}

/// The KFD memory-exception and hw-exception events (auto-reset) that could be created,
/// as (event type, event id); a kernel without one of the types just lacks that entry.
pub(crate) fn create_exception_events(backend: &dyn Backend) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for ty in [
        kfd::abi::KFD_IOC_EVENT_MEMORY,
        kfd::abi::KFD_IOC_EVENT_HW_EXCEPTION,
    ] {
        let mut a = kfd::abi::CreateEventArgs {
            event_type: ty,
            auto_reset: 1,
            ..Default::default()
        };
        if kfd::ioctl::create_event(backend, &mut a).is_ok() {
            out.push((ty, a.event_id));
        }
    }
    out
}

impl DeviceInner {
    pub(crate) fn wait_spin(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.spin_ns.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Poll the exception events (no sleep) and return the first recorded fault of GPU
    /// `gpu_index`, if any. Faults are sticky.
    pub(crate) fn check_faults(&self, gpu_index: usize) -> Option<String> {
        let gpu_id = self.gpus.get(gpu_index)?.gpu_id;
        if !self.exception_events.is_empty() {
            let mut evs: Vec<kfd::abi::EventData> = self
                .exception_events
                .iter()
                .map(|&(_, id)| kfd::abi::EventData {
                    event_id: id,
                    ..Default::default()
                })
                .collect();
            if let Ok(r) = kfd::ioctl::wait_events(self.backend.as_ref(), &mut evs, false, 0) {
                if r == kfd::abi::KFD_IOC_WAIT_RESULT_COMPLETE {
                    let mut f = lock(&self.faults);
                    // Each event's data is decoded as its own type (either may be
                    // missing when its creation failed).
                    for (&(ty, _), e) in self.exception_events.iter().zip(&evs) {
                        if ty == kfd::abi::KFD_IOC_EVENT_MEMORY {
                            let m = e.memory_exception();
                            if m.gpu_id != 0 {
                                f.push((
                                    m.gpu_id,
                                    format!("GPU {:#x} memory fault at va={:#x}", m.gpu_id, m.va),
                                ));
                            }
                        } else if ty == kfd::abi::KFD_IOC_EVENT_HW_EXCEPTION {
                            let h = e.hw_exception();
                            if h.gpu_id != 0 {
                                f.push((
                                    h.gpu_id,
                                    format!(
                                        "GPU {:#x} hardware exception (reset_cause={})",
                                        h.gpu_id, h.reset_cause
                                    ),
                                ));
                            }
                        }
                    }
                }
            }
        }
        if let Some((qid, payload)) = self.queue_errors.poll(gpu_index) {
            let d = crate::queue_error::describe(gpu_id, qid, payload);
            let mut f = lock(&self.faults);
            if !f.iter().any(|(g, x)| *g == gpu_id && *x == d) {
                f.push((gpu_id, d));
            }
        }
        let f = lock(&self.faults);
        f.iter().find(|(g, _)| *g == gpu_id).map(|(_, d)| d.clone())
    }
}

impl Device {
    /// Whether GPU `gpu`'s MMIO remap page (the HDP flush register) is mapped: kfdrt then
    /// flushes the HDP after CPU writes to that GPU's VRAM, before the next submission.
    pub fn has_hdp_flush(&self, gpu: usize) -> bool {
        self.inner.core.hdp.get(gpu).is_some_and(|h| h.available())
    }
}

impl DeviceCore {
    /// Flush the HDP of every GPU whose VRAM the CPU wrote since the last flush: call
    /// before a doorbell (or a release of waiting GPU work).
    pub(crate) fn hdp_flush_dirty(&self) {
        for h in &self.hdp {
            h.flush_if_dirty();
        }
    }

    pub(crate) fn gpu(&self, index: usize) -> Result<&Gpu> {
        self.gpus.get(index).ok_or_else(|| {
            Error::new(
                ErrorKind::InvalidValue,
                "Device::gpu",
                format!(
                    "GPU index {index} out of range (device has {})",
                    self.gpus.len()
                ),
            )
        })
    }
    pub(crate) fn gpu_ids(&self) -> Vec<u32> {
        self.gpus.iter().map(|g| g.gpu_id).collect()
    }
}
