//! [`Device`]: an opened KFD device (all its GPU agents) and the KFD init sequence.

use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

use kfd::topology::Node;
use kfd::Backend;

use crate::device_select::{open_backend, DeviceSpec};
use crate::error::{Error, ErrorKind, Result};
use crate::sync::lock;

pub(crate) use crate::devcore::DeviceCore;
pub use crate::devcore::Gpu;
use crate::devcore::{map_handle, unmap_handle, PeerBuf};
use crate::memory::{Allocation, AllocationKind, Buffer, MemoryKind};

/// Lowest KFD minor version kfdrt runs on: 1.5 brings SVM and the queue/memory ioctls
/// of this ABI (older kernels are missing too much to emulate HIP's semantics).
pub const MIN_KFD_MINOR: u32 = 5;

/// The runtime's per-device state (event page, signal pool, queue pools). Streams,
/// events and signals hold it; its own buffers hold only the [`DeviceCore`], so there is
/// no reference cycle: when the last user object goes, its pools free their buffers.
pub(crate) struct DeviceInner {
    pub(crate) core: Arc<DeviceCore>,
    pub(crate) signals: Arc<crate::signal::SignalPool>,
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
        // Streams hold this struct, so they are gone: destroy the exception events. The
        // pools' queues and buffers drop with the fields, the signal pool (and its
        // events) with its last signal, and the core (render fds, doorbell pages) last.
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
        let core = Arc::new(DeviceCore {
            doorbells: Mutex::new(Vec::new()),
            queue_error_event: std::sync::OnceLock::new(),
            queue_errors: Default::default(),
            peers: Default::default(),
            hdp_dirty: Default::default(),
            hdp: gpus
                .iter()
                .map(|g| crate::hdp::Hdp::open(backend.as_ref(), g.gpu_id))
                .collect(),
            extents: crate::devcore::Extents::default(),
            userptrs: Mutex::default(),
            cwsr_free: Mutex::new(Vec::new()),
            backend,
            kfd_version: (v.major_version, v.minor_version),
            gpus,
        });
        Ok(Device {
            inner: Arc::new(DeviceInner {
                core: core.clone(),
                signals: Arc::new(crate::signal::SignalPool::new(core)),
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

    /// `hipMemGetInfo`'s free figure: the bytes of GPU `gpu`'s VRAM this process can still
    /// allocate (KFD `AMDKFD_IOC_AVAILABLE_MEMORY`, what ROCr reports to CLR as
    /// `HSA_AMD_AGENT_INFO_MEMORY_AVAIL`), at most the VRAM's size.
    ///
    /// ```no_run
    /// # fn main() -> kfdrt::Result<()> {
    /// let dev = kfdrt::Device::open()?;
    /// assert!(dev.available_memory(0)? <= dev.gpu(0)?.node.vram_size());
    /// # Ok(()) }
    /// ```
    pub fn available_memory(&self, gpu: usize) -> Result<u64> {
        let g = self.inner.gpu(gpu)?;
        let free = kfd::ioctl::available_memory(self.inner.backend.as_ref(), g.gpu_id)
            .map_err(|e| Error::from_kfd("hipMemGetInfo", e))?;
        Ok(free.min(g.node.vram_size()))
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

impl Device {
    /// Allocate `size` bytes of `kind` memory owned by GPU `gpu_index` (for VRAM, the GPU
    /// whose memory it is). System memory is mapped on every GPU of the device; device
    /// memory on its GPU and on the GPUs with peer access to it (see [`MemoryKind::Device`]).
    pub fn alloc(&self, kind: MemoryKind, gpu_index: usize, size: usize) -> Result<Buffer> {
        Buffer::alloc(&self.inner.core, kind, gpu_index, size)
    }

    /// Register `len` bytes of existing host memory at `ptr` (page-aligned) with KFD and
    /// map it on every GPU (`USERPTR`). The memory must outlive the returned buffer.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid, page-aligned host memory that stays allocated until the
    /// returned [`Buffer`] is dropped; the GPUs may read and write it meanwhile.
    pub unsafe fn register_host_memory(&self, ptr: *mut u8, len: usize) -> Result<Buffer> {
        Buffer::userptr(&self.inner.core, ptr as u64, len)
    }

    /// The allocation of this device that holds `addr`, as its creator asked for it (see
    /// [`Allocation`]): a buffer object (`hipMalloc`, `hipHostMalloc`, signal memory,
    /// stream-ordered pool chunks, `hipHostRegister`ed memory), another process's buffer
    /// opened here (IPC), managed memory, or a VMM mapping. None for any other address:
    /// plain host memory (stack, `malloc`), freed memory, a VMM reservation where
    /// nothing is mapped, a registration's page outside the caller's range. What CLR's
    /// `getMemoryObject` answers: `hipPointerGetAttributes`, `hipHostGetDevicePointer`,
    /// `hipIpcGetMemHandle`, and the checks of copies, fills and stream memory operations
    /// ([`crate::Stream::memcpy`], [`crate::Stream::write_value32`]) use it.
    ///
    /// ```
    /// use kfdrt::{AllocationKind, Device, MemoryKind};
    /// let dev = Device::open()?;
    /// let b = dev.alloc(MemoryKind::Device, 0, 100)?;
    /// let a = dev.allocation_at(b.va() + 10).unwrap();
    /// assert_eq!((a.base, a.len), (b.va(), 100));
    /// assert_eq!(a.kind, AllocationKind::Buffer(MemoryKind::Device));
    /// assert_eq!(dev.allocation_at(b.va() + 100), None); // past the 100 bytes asked for
    /// let x = 0u32;
    /// assert_eq!(dev.allocation_at(&x as *const u32 as u64), None);
    /// # Ok::<(), kfdrt::Error>(())
    /// ```
    pub fn allocation_at(&self, addr: u64) -> Option<Allocation> {
        self.inner.allocation_at(addr)
    }
}

impl DeviceInner {
    /// [`Device::allocation_at`].
    pub(crate) fn allocation_at(&self, addr: u64) -> Option<Allocation> {
        if let Some((base, e)) = self.extents.containing(addr) {
            return Some(Allocation {
                base,
                len: e.len,
                kind: e.kind,
                gpu: e.gpu,
            });
        }
        if let Some((base, len)) = self.managed.extent_of(addr) {
            return Some(Allocation {
                base,
                len,
                kind: AllocationKind::Managed,
                gpu: 0,
            });
        }
        let (base, len, gpu) = self.vmm.mapped_extent(addr)?;
        Some(Allocation {
            base,
            len,
            kind: AllocationKind::Vmm,
            gpu,
        })
    }

    /// The checks of a GPU access of `len` bytes at `addr` by a copy, fill or stream
    /// memory operation, as CLR makes them (`ihipMemcpy_validate`, `ihipMemset_validate`,
    /// `ihipStreamOperation`): the range must lie in one allocation ([`Device::allocation_at`],
    /// InvalidValue past its end). An address in no allocation is InvalidValue too (CLR:
    /// `getMemoryObject` finds nothing), unless the process runs with XNACK on, where the
    /// GPU can fault in any host page (HMM) and the address is left to it.
    #[inline(never)]
    pub(crate) fn check_gpu_range(&self, call: &'static str, addr: u64, len: u64) -> Result<()> {
        match self.allocation_at(addr) {
            Some(a) if len <= a.room_at(addr) => Ok(()),
            Some(a) => Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!(
                    "{len:#x} bytes at {addr:#x} run past the end of the allocation \
                     [{:#x}, {:#x}) ({:#x} bytes left)",
                    a.base,
                    a.base + a.len,
                    a.room_at(addr)
                ),
            )),
            None if self.xnack_enabled() => Ok(()),
            None => Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!("{addr:#x} is in no allocation of this device (nor registered)"),
            )),
        }
    }

    /// [`DeviceInner::check_gpu_addr`]'s fast answer: `addr` is in the registry's last
    /// range found (then it passes); false means "look it up", not "refuse".
    #[inline(always)]
    pub(crate) fn gpu_addr_cached(&self, addr: u64) -> bool {
        self.extents.cached_holds(addr)
    }

    /// The check of a stream memory operation's address (`hipStreamWriteValue*`,
    /// `hipStreamWaitValue*`): inside an allocation, as [`DeviceInner::check_gpu_range`]
    /// with no length, since CLR's `ihipStreamOperation` checks no size (measured: an
    /// 8-byte write at byte 96 of `hipMalloc(100)` succeeds). The aligned 4 or 8 bytes stay
    /// inside the allocation's page-rounded buffer object.
    #[inline(always)]
    pub(crate) fn check_gpu_addr(&self, call: &'static str, addr: u64) -> Result<()> {
        if self.gpu_addr_cached(addr) {
            return Ok(());
        }
        self.check_gpu_range(call, addr, 1)
    }
}

impl Device {
    fn peer_pair(&self, call: &'static str, gpu: usize, peer: usize) -> Result<()> {
        let n = self.inner.gpus.len();
        if gpu >= n || peer >= n {
            return Err(Error::new(
                ErrorKind::InvalidDevice,
                call,
                format!("GPU index {gpu} or {peer} out of range (device has {n})"),
            ));
        }
        Ok(())
    }

    /// `hipDeviceCanAccessPeer(&can, gpu, peer)`: whether GPU `gpu` can be given access to
    /// GPU `peer`'s device memory. False for `gpu == peer` (HIP answers 0 for the same
    /// device). True when the topology has a link from `gpu` to `peer` (XGMI or a
    /// `p2p_links` path), or when `peer`'s VRAM is large-BAR: KFD and ROCr allow PCIe
    /// peer access to a GPU whose whole VRAM is in its BAR (amdgpu
    /// `amdgpu_device_is_peer_accessible`). Errors: an index out of range is
    /// `InvalidDevice` (`hipErrorInvalidDevice`).
    pub fn can_access_peer(&self, gpu: usize, peer: usize) -> Result<bool> {
        self.peer_pair("hipDeviceCanAccessPeer", gpu, peer)?;
        if gpu == peer {
            return Ok(false);
        }
        let (g, p) = (&self.inner.gpus[gpu], &self.inner.gpus[peer]);
        let linked = g
            .node
            .io_links
            .iter()
            .chain(&g.node.p2p_links)
            .any(|l| l.node_to == p.node.id);
        let large_bar = p
            .node
            .mem_banks
            .iter()
            .any(|b| b.heap_type == kfd::topology::HEAP_TYPE_FB_PUBLIC);
        Ok(linked || large_bar)
    }

    /// `hipSetDevice(gpu); hipDeviceEnablePeerAccess(peer, 0)`: GPU `gpu` may access GPU
    /// `peer`'s device memory from now on. Every live [`MemoryKind::Device`] buffer of
    /// `peer` is mapped on `gpu` (MAP_MEMORY_TO_GPU with `gpu`'s gpu_id), and so is every
    /// later one, as CLR's `Device::enableP2P` (`MemObjMap::UpdateAccess`) and
    /// `Device::deviceAllowAccess` do (`rocclr/device/rocm/rocdevice.cpp`; the HIP entry
    /// point is `hipamd/src/hip_peer.cpp`).
    ///
    /// Errors as HIP: `InvalidDevice` (`hipErrorInvalidDevice`) for an index out of range,
    /// `gpu == peer`, or a pair [`Device::can_access_peer`] refuses;
    /// `PeerAccessAlreadyEnabled` (`hipErrorPeerAccessAlreadyEnabled`) when enabled
    /// already. If a mapping fails, the ones this call made are undone and access stays
    /// disabled.
    pub fn enable_peer_access(&self, gpu: usize, peer: usize) -> Result<()> {
        let call = "hipDeviceEnablePeerAccess";
        if !self.can_access_peer(gpu, peer)? {
            return Err(Error::new(
                ErrorKind::InvalidDevice,
                call,
                format!("GPU {gpu} cannot access GPU {peer}'s memory"),
            ));
        }
        let core = &self.inner.core;
        let mut st = lock(&core.peers.state);
        if st.enabled.contains(&(gpu, peer)) {
            return Err(Error::new(
                ErrorKind::PeerAccessAlreadyEnabled,
                call,
                format!("GPU {gpu} already has access to GPU {peer}"),
            ));
        }
        let id = core.gpu(gpu)?.gpu_id;
        let mut done: Vec<&PeerBuf> = Vec::new();
        for b in st.bufs.values().filter(|b| b.owner == peer) {
            if lock(&b.mapped).contains(&id) {
                continue; // mapped for a copy already
            }
            if let Err(e) = map_handle(core, b.handle, &b.mapped, gpu, call) {
                for d in done {
                    let _ = unmap_handle(core, d.handle, &d.mapped, gpu, call);
                }
                return Err(e);
            }
            done.push(b);
        }
        st.enabled.insert((gpu, peer));
        Ok(())
    }

    /// `hipSetDevice(gpu); hipDeviceDisablePeerAccess(peer)`: GPU `gpu` loses access to
    /// GPU `peer`'s device memory; `peer`'s device buffers are unmapped from `gpu`
    /// (UNMAP_MEMORY_FROM_GPU), so a later access from `gpu` faults. (CLR's
    /// `Device::disableP2P` only drops the peer from the list used for new allocations;
    /// kfdrt also unmaps the existing ones, so that disabling is observable and the
    /// GPU's page tables match the access HIP grants.) Work of `gpu` still using that
    /// memory must have completed. Errors: `InvalidDevice` for an index out of range or a
    /// pair [`Device::can_access_peer`] refuses (`gpu == peer`); `PeerAccessNotEnabled`
    /// (`hipErrorPeerAccessNotEnabled`) when not enabled.
    pub fn disable_peer_access(&self, gpu: usize, peer: usize) -> Result<()> {
        let call = "hipDeviceDisablePeerAccess";
        // As enabling (and CLR): a pair that cannot have access, such as a GPU and itself,
        // is InvalidDevice rather than "not enabled".
        if !self.can_access_peer(gpu, peer)? {
            return Err(Error::new(
                ErrorKind::InvalidDevice,
                call,
                format!("GPU {gpu} cannot access GPU {peer}'s memory"),
            ));
        }
        let core = &self.inner.core;
        let mut st = lock(&core.peers.state);
        if !st.enabled.remove(&(gpu, peer)) {
            return Err(Error::new(
                ErrorKind::PeerAccessNotEnabled,
                call,
                format!("GPU {gpu} has no peer access to GPU {peer}"),
            ));
        }
        let mut first_err = None;
        for b in st.bufs.values().filter(|b| b.owner == peer) {
            if let Err(e) = unmap_handle(core, b.handle, &b.mapped, gpu, call) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
impl Device {
    /// Opens the device `spec` names (e.g. `"emu:mi300x"`) for a unit test; panics when it
    /// cannot.
    pub(crate) fn open_for_test(spec: &str) -> Device {
        Device::open_spec(&DeviceSpec::parse(spec).expect("device spec")).expect("open the device")
    }
}
