//! [`EmuBackend`]: the emulated KFD behind [`kfd::Backend`].

use core::ffi::c_void;
use core::ptr::NonNull;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kfd::topology::Topology;
use kfd::{Backend, BackendKind, Ioctl, MmapFile, Prot};
use rustix::fs::MemfdFlags;
use rustix::io::Errno;

use crate::engine::{EngineConfig, GpuEngines, QueueStatus};
use crate::kfd::events::Events;
use crate::kfd::hostmem::{Backing, PAGE};
use crate::kfd::memory::GpuVm;
use crate::kfd::process::{file_id, Emu, Gpu, Pdd, Proc, RenderNode, DOORBELL_SLICE};
use crate::kfd::queues::MAX_QUEUES_PER_PROCESS;
use crate::kfd::topology as kfd_topology;
use crate::presets::Preset;
use crate::spec::{self, GpuSpec, SpecError};

/// Why an emulated device could not be created.
#[derive(Debug, thiserror::Error)]
pub enum EmuError {
    /// The device string is malformed.
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// `xnack=on` was asked for on a board that cannot enable XNACK.
    #[error("xnack=on is not supported by {0} (only gfx90a/gfx942-class boards support per-process XNACK)")]
    XnackUnsupported(&'static str),
    /// A preset the engines cannot run (unknown GPU family).
    #[error("preset {0} has an unsupported gfx_target_version")]
    UnsupportedPreset(&'static str),
    /// Serving the topology or creating host memory failed.
    #[error("emulator setup failed: {0}")]
    Setup(String),
}

/// The emulated KFD: one instance is one process's `/dev/kfd` with its GPUs.
///
/// Created from a device string ([`EmuBackend::from_spec`], grammar in [`crate::spec`])
/// or from presets ([`EmuBackend::new`]). It serves its topology as a sysfs tree held
/// in memory ([`EmuBackend::sysfs_tree`]; nothing is written to disk), parsed back by
/// `kfd::topology` like the real one; render nodes are memfds named `renderD<minor>`.
pub struct EmuBackend {
    emu: Emu,
    /// Queue id -> its GPU in `emu.gpus` (null = no queue), for doorbell notifications
    /// without taking the process lock, an index or a bounds check: `emu.gpus` is built
    /// before this table and never changes (its elements stay where they are).
    queue_gpu: Box<[AtomicPtr<Gpu>]>,
    /// `host_signal_written` notifications received (introspection for tests).
    host_signals: AtomicU64,
}

impl std::fmt::Debug for EmuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmuBackend")
            .field(
                "gpus",
                &self
                    .emu
                    .gpus
                    .iter()
                    .map(|g| (g.preset.name, g.gpu_id))
                    .collect::<Vec<_>>(),
            )
            .field("sysfs_files", &self.emu.sysfs.files().count())
            .finish()
    }
}

impl EmuBackend {
    /// An emulated device from a device string such as `emu`, `emu:mi300x*2,rx7900xtx`
    /// or `emu:mi210[vram=64M]` (see [`crate::spec`]).
    pub fn from_spec(spec_str: &str) -> Result<Self, EmuError> {
        let gpus = spec::parse(spec_str)?;
        Self::with_gpus(&gpus)
    }

    /// An emulated device with one GPU per preset, in order.
    pub fn new(presets: &[Preset]) -> Result<Self, EmuError> {
        let gpus: Vec<GpuSpec> = presets.iter().cloned().map(GpuSpec::from).collect();
        Self::with_gpus(&gpus)
    }

    /// An emulated device from parsed GPU specs (presets with options).
    pub fn with_gpus(specs: &[GpuSpec]) -> Result<Self, EmuError> {
        if specs.len() > spec::MAX_GPUS {
            return Err(SpecError::TooManyGpus(specs.len()).into());
        }
        let xnack = specs.iter().any(|s| s.xnack == Some(true));
        if xnack {
            if let Some(s) = specs.iter().find(|s| !s.preset.xnack_capable) {
                return Err(EmuError::XnackUnsupported(s.preset.name));
            }
        }
        let presets: Vec<Preset> = specs.iter().map(|s| s.preset.clone()).collect();
        let (topo, placements) = kfd_topology::build(&presets);
        let (sysfs, topology) =
            kfd_topology::serve(&topo).map_err(|e| EmuError::Setup(e.to_string()))?;
        let gpu_ids: Vec<u32> = placements.iter().map(|p| p.gpu_id).collect();
        let vm = Arc::new(GpuVm::new(gpu_ids.clone()));
        let events = Arc::new(Events::new(gpu_ids));
        let mut gpus = Vec::new();
        for (idx, (p, place)) in presets.iter().zip(&placements).enumerate() {
            let family = p.family().ok_or(EmuError::UnsupportedPreset(p.name))?;
            let sdma_version = p
                .sdma_version()
                .ok_or(EmuError::UnsupportedPreset(p.name))?;
            let setup = |e: Errno| EmuError::Setup(format!("memfd: {e}"));
            let doorbell =
                Arc::new(Backing::new("kfd-emu-doorbell", DOORBELL_SLICE).map_err(setup)?);
            let mmio = Arc::new(Backing::new("kfd-emu-mmio", PAGE).map_err(setup)?);
            hdp_reg(&mmio).store(HDP_IDLE, Ordering::Release);
            let cfg = EngineConfig {
                gpu_id: place.gpu_id,
                family,
                sdma_version,
                num_sdma_engines: p.num_sdma_engines + p.num_sdma_xgmi_engines,
                clock_hz: p.gpu_clock_hz,
                num_xcc: p.num_xcc,
                gfx_target_version: p.gfx_target_version,
                sramecc: p.sramecc(),
            };
            let engines =
                GpuEngines::new(cfg, vm.clone(), crate::kfd::events::as_interrupts(&events));
            gpus.push(Gpu {
                idx,
                gpu_id: place.gpu_id,
                render_minor: place.render_minor,
                preset: p.clone(),
                cwsr: p.cwsr(),
                doorbell,
                mmio,
                engines,
                hdp: HdpCounters::default(),
            });
        }
        let state = Proc {
            pdds: gpus.iter().map(|_| Pdd::default()).collect(),
            xnack,
            ..Default::default()
        };
        let host = topology
            .cpu_nodes()
            .flat_map(|n| n.mem_banks.iter())
            .map(|b| b.size_in_bytes)
            .sum::<u64>();
        let emu = Emu {
            gpus,
            topology,
            sysfs,
            state: Mutex::new(state),
            vm,
            events,
            system_limit: host / 16 * 15,
        };
        let queue_gpu = (0..MAX_QUEUES_PER_PROCESS)
            .map(|_| AtomicPtr::new(std::ptr::null_mut()))
            .collect();
        Ok(EmuBackend {
            emu,
            queue_gpu,
            host_signals: AtomicU64::new(0),
        })
    }

    /// The emulated sysfs topology tree (the equivalent of
    /// `/sys/devices/virtual/kfd/kfd/topology`), held in memory: list its directories and
    /// read its files with [`kfd::topology::SysfsTree`], or parse it with
    /// `Topology::from_source(tree, Path::new(""))`.
    pub fn sysfs_tree(&self) -> &kfd::topology::SysfsTree {
        &self.emu.sysfs
    }

    /// The gpu_ids of the emulated GPUs, in node order.
    pub fn gpu_ids(&self) -> Vec<u32> {
        self.emu.gpus.iter().map(|g| g.gpu_id).collect()
    }

    /// The preset of the GPU with `gpu_id` (with the spec's options applied).
    pub fn preset(&self, gpu_id: u32) -> Option<&Preset> {
        self.emu.gpu_idx(gpu_id).map(|i| &self.emu.gpus[i].preset)
    }

    /// The emulated GPUs' page tables, as the engines see them: resolve a GPU VA of a GPU
    /// to a [`crate::gpumem::MemWindow`] over the emulator's own alias of the memory.
    pub fn gpu_memory(&self) -> Arc<dyn crate::gpumem::GpuMemory> {
        self.emu.vm.clone()
    }

    /// Emulator introspection: where the SVM range holding `addr` resides: `Some(0)` for
    /// system memory, `Some(gpu_id)` for that GPU's VRAM, `None` when `addr` is in no SVM
    /// range.
    pub fn svm_location(&self, addr: u64) -> Option<u32> {
        self.emu.lock().svm.location(addr)
    }

    /// The render-node mmap offset of BO `handle` (what ALLOC_MEMORY_OF_GPU returns as
    /// `mmap_offset`; 0 for a BO without one), or `None` for an unknown handle. ROCm's
    /// out-of-tree IPC import ioctl returns it for the BO it creates; the preload library
    /// serves that ioctl over IMPORT_DMABUF.
    pub fn bo_mmap_offset(&self, handle: u64) -> Option<u64> {
        self.emu.lock().bos.get(&handle).map(|b| b.drm_offset)
    }

    /// Emulator introspection: the number of SVM ranges (after splits and merges).
    pub fn svm_range_count(&self) -> usize {
        self.emu.lock().svm.len()
    }

    /// Emulator introspection: HDP flushes of GPU `gpu_id` as (doorbells rung, doorbells
    /// that a write to HDP_MEM_FLUSH_CNTL preceded), or None for an unknown GPU. The
    /// doorbell count is exact for doorbells rung from one thread at a time (it is not
    /// an atomic increment); the flush count is exact.
    pub fn hdp_stats(&self, gpu_id: u32) -> Option<(u64, u64)> {
        let g = self.emu.gpus.iter().find(|g| g.gpu_id == gpu_id)?;
        Some((
            g.hdp.doorbells.load(Ordering::Acquire),
            g.hdp.flushes.load(Ordering::Acquire),
        ))
    }

    /// Start recording every packet the engines execute and every engine event, on all
    /// GPUs ([`crate::trace`]). Costs nothing until called.
    pub fn enable_trace(&self) {
        for g in &self.emu.gpus {
            g.engines.trace().set_enabled(true);
        }
    }

    /// Worker threads each kernel dispatch uses on every GPU (0: one per host core); see
    /// [`crate::engine::GpuEngines::set_shader_threads`].
    pub fn set_shader_threads(&self, n: usize) {
        for g in &self.emu.gpus {
            g.engines.set_shader_threads(n);
        }
    }

    /// Stop recording (what was recorded stays until [`EmuBackend::take_trace`]).
    pub fn disable_trace(&self) {
        for g in &self.emu.gpus {
            g.engines.trace().set_enabled(false);
        }
    }

    /// Everything recorded so far on all GPUs, sorted by start time (host clock); the
    /// buffers are emptied. Waits until every engine is between packets, so the packets
    /// of work the caller saw complete are included.
    pub fn take_trace(&self) -> Vec<crate::trace::TraceEvent> {
        let mut all = Vec::new();
        for g in &self.emu.gpus {
            all.extend(g.engines.take_trace());
        }
        all.sort_by_key(|e| (e.start_ns, std::cmp::Reverse(e.end_ns)));
        all
    }

    /// Whether blocked queues are re-polled on the engines' own timer, on every GPU
    /// (the default; see [`crate::engine::GpuEngines::set_blocked_repoll`]). A test hook:
    /// with `false` a blocked queue resumes only on a doorbell or a
    /// [`Backend::host_signal_written`] notification, which makes a missing notification
    /// a hang a bounded test can see.
    pub fn set_blocked_repoll(&self, on: bool) {
        for g in &self.emu.gpus {
            g.engines.set_blocked_repoll(on);
        }
    }

    /// Stop executing packets on every engine of every GPU, as a queue eviction does
    /// ([`crate::engine::GpuEngines::pause`]; doorbells are remembered) until
    /// [`EmuBackend::resume_engines`]. A test hook: work stays queued, deterministically,
    /// while the test rearranges the runtime around it.
    pub fn pause_engines(&self) {
        for g in &self.emu.gpus {
            g.engines.pause();
        }
    }

    /// Undo [`EmuBackend::pause_engines`].
    pub fn resume_engines(&self) {
        for g in &self.emu.gpus {
            g.engines.resume();
        }
    }

    /// How many [`Backend::host_signal_written`] notifications the device received.
    pub fn host_signal_notifications(&self) -> u64 {
        self.host_signals.load(Ordering::Relaxed)
    }

    /// The scheduling state of a queue, from its engine (`None` for an unknown queue).
    pub fn queue_status(&self, queue_id: u32) -> Option<QueueStatus> {
        let gpu = self.queue_gpu(queue_id)?;
        gpu.engines.queue_status(queue_id)
    }

    /// The GPU of queue `queue_id` (None: no such queue).
    #[inline(always)]
    fn queue_gpu(&self, queue_id: u32) -> Option<&Gpu> {
        let p = self
            .queue_gpu
            .get(queue_id as usize)?
            .load(Ordering::Acquire);
        // SAFETY: a non-null entry points into `emu.gpus`, which lives as long as `self`
        // and never changes (see `queue_gpu`).
        unsafe { p.as_ref() }
    }

    fn track_queues(&self, req_kind: QueueTrack) {
        match req_kind {
            QueueTrack::Created(qid, gpu_id) => {
                if let (Some(slot), Some(gpu)) = (
                    self.queue_gpu.get(qid as usize),
                    self.emu.gpu_idx(gpu_id).and_then(|i| self.emu.gpus.get(i)),
                ) {
                    slot.store((gpu as *const Gpu).cast_mut(), Ordering::Release);
                }
            }
            QueueTrack::Destroyed(qid) => {
                if let Some(slot) = self.queue_gpu.get(qid as usize) {
                    slot.store(std::ptr::null_mut(), Ordering::Release);
                }
            }
        }
    }
}

enum QueueTrack {
    Created(u32, u32),
    Destroyed(u32),
}

impl Drop for EmuBackend {
    fn drop(&mut self) {
        self.emu.destroy_all_queues();
    }
}

impl Backend for EmuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Emulated
    }

    fn topology(&self) -> &Topology {
        &self.emu.topology
    }

    fn ioctl(&self, req: Ioctl<'_>) -> Result<(), Errno> {
        match req {
            Ioctl::CreateQueue(a) => {
                let r = self.emu.ioctl(Ioctl::CreateQueue(a));
                if r.is_ok() {
                    self.track_queues(QueueTrack::Created(a.queue_id, a.gpu_id));
                }
                r
            }
            Ioctl::DestroyQueue(a) => {
                let r = self.emu.ioctl(Ioctl::DestroyQueue(a));
                if r.is_ok() {
                    self.track_queues(QueueTrack::Destroyed(a.queue_id));
                }
                r
            }
            other => self.emu.ioctl(other),
        }
    }

    fn open_render_node(&self, minor: u32) -> Result<OwnedFd, Errno> {
        let gpu = self
            .emu
            .gpus
            .iter()
            .find(|g| g.render_minor == minor)
            .ok_or(Errno::NOENT)?;
        let fd = rustix::fs::memfd_create(format!("renderD{minor}"), MemfdFlags::CLOEXEC)?;
        use std::os::fd::AsRawFd;
        let file = file_id(fd.as_raw_fd())?;
        self.emu.lock().render_nodes.push(RenderNode {
            gpu_idx: gpu.idx,
            file,
        });
        Ok(fd)
    }

    unsafe fn mmap(
        &self,
        file: MmapFile<'_>,
        offset: u64,
        len: usize,
        fixed_addr: Option<NonNull<c_void>>,
        prot: Prot,
    ) -> Result<NonNull<c_void>, Errno> {
        // SAFETY: the caller upholds `Backend::mmap`'s contract, which `Emu::mmap` forwards.
        unsafe { self.emu.mmap(file, offset, len, fixed_addr, prot) }
    }

    unsafe fn munmap(&self, addr: NonNull<c_void>, len: usize) -> Result<(), Errno> {
        // SAFETY: the caller guarantees nothing references the range any more.
        unsafe { rustix::mm::munmap(addr.as_ptr(), len) }
    }

    fn doorbell_written(&self, queue_id: u32) {
        if let Some(gpu) = self.queue_gpu(queue_id) {
            // A write to HDP_MEM_FLUSH_CNTL since the last doorbell: the flush precedes
            // this doorbell (any value written triggers a flush; the page rests at
            // HDP_IDLE between flushes).
            let reg = hdp_reg(&gpu.mmio);
            if reg.load(Ordering::Acquire) != HDP_IDLE {
                reg.store(HDP_IDLE, Ordering::Release);
                gpu.hdp.flushes.fetch_add(1, Ordering::AcqRel);
            }
            // A plain increment, not an atomic read-modify-write (which would drain the
            // producer's store buffer a second time on every doorbell): doorbells of
            // one queue are serialised by its producer, and the count is introspection
            // (`hdp_stats`), exact for one producer thread, possibly short under racing
            // ones.
            let n = gpu.hdp.doorbells.load(Ordering::Relaxed);
            gpu.hdp.doorbells.store(n + 1, Ordering::Relaxed);
            gpu.engines.doorbell(queue_id);
        }
    }

    fn host_signal_written(&self, queue_id: u32) {
        self.host_signals.fetch_add(1, Ordering::Relaxed);
        // Re-poll the queue's barrier dependencies now: no doorbell value changed, so the
        // engine is woken through its counter (it may watch doorbell values only).
        if let Some(gpu) = self.queue_gpu(queue_id) {
            gpu.engines.repoll(queue_id);
        }
    }

    unsafe fn release_svm_mapping(
        &self,
        addr: core::ptr::NonNull<core::ffi::c_void>,
        len: usize,
    ) -> Result<(), Errno> {
        // The emulated KFD cannot observe munmap, so its SVM range outlives the memory: keep
        // the addresses reserved (PROT_NONE, no pages) so no later buffer lands on the stale
        // range (README, emulator limitations).
        // SAFETY: the caller's own mapping, referenced by nothing afterwards (trait contract);
        // MAP_FIXED replaces exactly that range.
        unsafe {
            rustix::mm::mmap_anonymous(
                addr.as_ptr(),
                len,
                rustix::mm::ProtFlags::empty(),
                rustix::mm::MapFlags::PRIVATE
                    | rustix::mm::MapFlags::NORESERVE
                    | rustix::mm::MapFlags::FIXED,
            )
        }
        .map(|_| ())
    }
}

/// The value HDP_MEM_FLUSH_CNTL (offset 0 of the MMIO remap page,
/// `KFD_MMIO_REMAP_HDP_MEM_FLUSH_CNTL`) rests at between flushes: any write changes it.
pub const HDP_IDLE: u32 = 0xFFFF_FFFF;

fn hdp_reg(mmio: &Backing) -> &std::sync::atomic::AtomicU32 {
    // SAFETY: the MMIO page is a live, page-aligned shared mapping owned by `mmio`; the
    // register is its first 4 bytes, accessed only atomically.
    unsafe { std::sync::atomic::AtomicU32::from_ptr(mmio.ptr().as_ptr().cast()) }
}

/// HDP flush counters of one emulated GPU.
#[derive(Debug, Default)]
pub(crate) struct HdpCounters {
    /// Doorbells rung.
    pub(crate) doorbells: std::sync::atomic::AtomicU64,
    /// Doorbells preceded by a write to HDP_MEM_FLUSH_CNTL.
    pub(crate) flushes: std::sync::atomic::AtomicU64,
}
