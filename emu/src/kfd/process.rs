//! The emulated KFD process: per-GPU process data (`kfd_process_device`), the process
//! lock, ioctl dispatch and the process-wide ioctls (version, VM, apertures, clocks,
//! policies, XNACK, runtime enable, available memory).
//!
//! Kernel rules modelled here are listed, with their sources, in
//! `firmware-notes/kfd-process.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::BorrowedFd;
use std::sync::{Arc, Mutex, MutexGuard};

use kfd::abi::{self, ProcessDeviceApertures};
use kfd::topology::Topology;
use kfd::Ioctl;
use rustix::io::Errno;

use crate::engine::GpuEngines;
use crate::kfd::events::Events;
use crate::kfd::hostmem::Backing;
use crate::kfd::memory::{Bo, GpuVm};
use crate::kfd::queues::QueueState;
use crate::kfd::svm::Svm;
use crate::presets::{CwsrSizes, Preset};

/// Bytes of one process's doorbell slice on one GPU: 1024 doorbells of 8 bytes
/// (`kfd_doorbell_process_slice`: KFD_MAX_NUM_OF_QUEUES_PER_PROCESS * doorbell size,
/// rounded to a page; "2 pages" on SOC15).
pub(crate) const DOORBELL_SLICE: u64 = 8192;
/// Doorbells per slice.
pub(crate) const DOORBELLS_PER_SLICE: u32 = 1024;

/// One emulated GPU (the `kfd_node` plus what the emulator keeps per device).
pub(crate) struct Gpu {
    pub(crate) idx: usize,
    pub(crate) gpu_id: u32,
    pub(crate) render_minor: u32,
    pub(crate) preset: Preset,
    pub(crate) cwsr: Option<CwsrSizes>,
    /// This process's doorbell slice on this GPU (what `/dev/kfd` maps at the doorbell
    /// offset, and what DOORBELL BOs alias).
    pub(crate) doorbell: Arc<Backing>,
    /// The MMIO remap page (HDP flush registers), for `/dev/kfd` MMIO mmaps and
    /// MMIO_REMAP BOs.
    pub(crate) mmio: Arc<Backing>,
    pub(crate) engines: GpuEngines,
    /// HDP flushes seen through the MMIO remap page.
    pub(crate) hdp: crate::backend::HdpCounters,
}

/// Identity of an open file: (st_dev, st_ino).
pub(crate) type FileId = (u64, u64);

/// A render node returned by `open_render_node`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RenderNode {
    pub(crate) gpu_idx: usize,
    pub(crate) file: FileId,
}

/// Per-GPU process data (`struct kfd_process_device`).
#[derive(Debug, Default)]
pub(crate) struct Pdd {
    /// The render node whose VM was acquired (`pdd->drm_file`).
    pub(crate) vm: Option<FileId>,
    /// VRAM charged to this process, page-aligned sizes.
    pub(crate) vram_used: u64,
    /// VRAM charged in 2 MiB granules (`vram_used_aligned`), for AVAILABLE_MEMORY.
    pub(crate) vram_used_aligned: u64,
    /// Next BO ids are the lowest free ids (`idr_alloc(.., 0, 0)`).
    pub(crate) bo_ids: BTreeSet<u32>,
    /// Allocated doorbell slots (index in the slice).
    pub(crate) doorbells: BTreeSet<u32>,
    /// Queues of this process on this GPU.
    pub(crate) queue_count: u32,
    /// SET_SCRATCH_BACKING_VA.
    pub(crate) scratch_va: u64,
    /// SET_TRAP_HANDLER.
    pub(crate) tba: u64,
    /// SET_TRAP_HANDLER.
    pub(crate) tma: u64,
    /// SET_MEMORY_POLICY (default, alternate).
    pub(crate) cache_policy: (u32, u32),
}

/// Everything behind the process mutex (`p->mutex`).
#[derive(Default)]
pub(crate) struct Proc {
    pub(crate) pdds: Vec<Pdd>,
    pub(crate) render_nodes: Vec<RenderNode>,
    /// Buffer objects by handle (`gpu_id << 32 | idr id`).
    pub(crate) bos: BTreeMap<u64, Bo>,
    /// Render-node mmap offsets (DRM fake offsets) to BO handles.
    pub(crate) drm_offsets: BTreeMap<u64, u64>,
    /// Next free DRM fake offset, in pages.
    pub(crate) next_drm_pgoff: u64,
    /// Pages of freed VRAM/GTT BOs kept for a new BO at the same GPU VA
    /// (`memory.rs`, `Emu::recycle`): emptied memfds, newest last.
    pub(crate) recycled: Vec<crate::kfd::memory::Recycled>,
    /// System memory charged to GTT and USERPTR BOs.
    pub(crate) system_used: u64,
    pub(crate) queues: BTreeMap<u32, QueueState>,
    pub(crate) xnack: bool,
    pub(crate) runtime_enabled: bool,
    pub(crate) svm: Svm,
    /// AMDKFD_IOC_CREATE_PROCESS replaced the fd's primary process (KFD 1.19).
    pub(crate) secondary: bool,
}

impl Proc {
    /// The render node opened as `file` (amdgpu_file_to_fpriv): another file is EINVAL.
    pub(crate) fn render_node(&self, file: FileId) -> Result<RenderNode, Errno> {
        self.render_nodes
            .iter()
            .find(|r| r.file == file)
            .copied()
            .ok_or(Errno::INVAL)
    }
}

/// The emulated KFD with its devices: one instance is one process's `/dev/kfd`.
pub(crate) struct Emu {
    pub(crate) gpus: Vec<Gpu>,
    pub(crate) topology: Topology,
    pub(crate) sysfs: kfd::topology::SysfsTree,
    pub(crate) state: Mutex<Proc>,
    pub(crate) vm: Arc<GpuVm>,
    pub(crate) events: Arc<Events>,
    pub(crate) system_limit: u64,
}

/// `DRM_FILE_PAGE_OFFSET_START` on 64-bit: fake offsets start at 4 GiB.
pub(crate) const DRM_FILE_PAGE_OFFSET_START: u64 = (0xffff_ffff >> 12) + 1;

/// `AMDGPU_VA_RESERVED_BOTTOM`: the GPUVM aperture starts at 2 MiB.
pub(crate) const GPUVM_BASE: u64 = 1 << 21;
/// `AMDGPU_GMC_HOLE_START`: the 48-bit GPUVM aperture ends below the canonical hole.
pub(crate) const GPUVM_END: u64 = 1 << 47;

impl Emu {
    pub(crate) fn lock(&self) -> MutexGuard<'_, Proc> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Index of the GPU with `gpu_id` (`kfd_process_device_data_by_id`).
    pub(crate) fn gpu_idx(&self, gpu_id: u32) -> Option<usize> {
        if gpu_id == 0 {
            return None;
        }
        self.gpus.iter().position(|g| g.gpu_id == gpu_id)
    }

    /// `kfd_bind_process_to_device`: fails (ENODEV) until ACQUIRE_VM was done for the GPU.
    pub(crate) fn bind(st: &Proc, idx: usize) -> Result<(), Errno> {
        match st.pdds.get(idx) {
            Some(p) if p.vm.is_some() => Ok(()),
            _ => Err(Errno::NODEV),
        }
    }

    /// Perform one ioctl.
    pub(crate) fn ioctl(&self, req: Ioctl<'_>) -> Result<(), Errno> {
        match req {
            Ioctl::GetVersion(a) => {
                a.major_version = abi::KFD_IOCTL_MAJOR_VERSION;
                a.minor_version = abi::KFD_IOCTL_MINOR_VERSION;
                Ok(())
            }
            Ioctl::AcquireVm(a) => self.acquire_vm(a),
            Ioctl::GetProcessApertures(a) => {
                let n = self.gpus.len().min(abi::NUM_OF_SUPPORTED_GPUS);
                a.num_of_nodes = n as u32;
                for (slot, g) in a.process_apertures.iter_mut().zip(&self.gpus) {
                    *slot = self.apertures(g);
                }
                Ok(())
            }
            Ioctl::GetProcessAperturesNew { args, apertures } => {
                if args.num_of_nodes == 0 {
                    args.num_of_nodes = self.gpus.len() as u32;
                    return Ok(());
                }
                let n = (args.num_of_nodes as usize).min(self.gpus.len());
                if apertures.len() < n {
                    return Err(Errno::FAULT);
                }
                for (slot, g) in apertures.iter_mut().zip(&self.gpus).take(n) {
                    *slot = self.apertures(g);
                }
                args.num_of_nodes = n as u32;
                Ok(())
            }
            Ioctl::GetClockCounters(a) => {
                a.gpu_clock_counter = match self.gpu_idx(a.gpu_id) {
                    Some(i) => self.gpus[i].engines.gpu_clock(),
                    None => 0,
                };
                a.cpu_clock_counter = ns(rustix::time::ClockId::MonotonicRaw);
                a.system_clock_counter = ns(rustix::time::ClockId::Boottime);
                a.system_clock_freq = 1_000_000_000;
                Ok(())
            }
            Ioctl::SetMemoryPolicy(a) => {
                let ok = |p| {
                    p == abi::KFD_IOC_CACHE_POLICY_COHERENT
                        || p == abi::KFD_IOC_CACHE_POLICY_NONCOHERENT
                };
                if !ok(a.default_policy) || !ok(a.alternate_policy) {
                    return Err(Errno::INVAL);
                }
                let idx = self.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
                let mut st = self.lock();
                Self::bind(&st, idx).map_err(|_| Errno::SRCH)?;
                st.pdds[idx].cache_policy = (a.default_policy, a.alternate_policy);
                Ok(())
            }
            Ioctl::SetScratchBackingVa(a) => {
                let idx = self.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
                let mut st = self.lock();
                Self::bind(&st, idx)?;
                st.pdds[idx].scratch_va = a.va_addr;
                Ok(())
            }
            Ioctl::SetTrapHandler(a) => {
                let idx = self.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
                let mut st = self.lock();
                Self::bind(&st, idx).map_err(|_| Errno::SRCH)?;
                st.pdds[idx].tba = a.tba_addr;
                st.pdds[idx].tma = a.tma_addr;
                Ok(())
            }
            Ioctl::SetXnackMode(a) => self.set_xnack(a),
            Ioctl::RuntimeEnable(a) => {
                let mut st = self.lock();
                if a.mode_mask & abi::KFD_RUNTIME_ENABLE_MODE_ENABLE_MASK != 0 {
                    if st.runtime_enabled {
                        return Err(Errno::BUSY);
                    }
                    if st.pdds.iter().any(|p| p.queue_count > 0) {
                        return Err(Errno::EXIST);
                    }
                    st.runtime_enabled = true;
                } else {
                    st.runtime_enabled = false;
                }
                Ok(())
            }
            Ioctl::CreateProcess => {
                // kfd_chardev.c kfd_ioctl_create_process: "Each FD owns only one
                // kfd_process" (EINVAL on a secondary), else the fd gets a new, empty
                // secondary process. The emulator has one process per backend, so it can
                // only swap in an empty one for an fd that has created nothing yet.
                let mut st = self.lock();
                if st.secondary {
                    return Err(Errno::INVAL);
                }
                let fresh = st.pdds.iter().all(|p| p.vm.is_none())
                    && st.bos.is_empty()
                    && st.queues.is_empty()
                    && !st.runtime_enabled
                    && !self.events.has_page();
                if !fresh {
                    // Not modelled: a secondary process next to a primary with resources.
                    return Err(Errno::OPNOTSUPP);
                }
                st.secondary = true;
                Ok(())
            }
            Ioctl::AvailableMemory(a) => {
                let idx = self.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
                let st = self.lock();
                let cap = self.gpus[idx].preset.vram_size;
                let free = cap.saturating_sub(st.pdds[idx].vram_used_aligned);
                a.available = free & !(VRAM_AVAILABILITY_ALIGN - 1);
                Ok(())
            }
            Ioctl::AllocMemoryOfGpu(a) => self.alloc_memory(a),
            Ioctl::FreeMemoryOfGpu(a) => self.free_memory(a.handle),
            Ioctl::MapMemoryToGpu { args, gpu_ids } => {
                let n = (args.n_devices, &mut args.n_success);
                self.for_each_peer(args.handle, n, gpu_ids, true, Self::map_on)
            }
            Ioctl::UnmapMemoryFromGpu { args, gpu_ids } => {
                let n = (args.n_devices, &mut args.n_success);
                self.for_each_peer(args.handle, n, gpu_ids, false, Self::unmap_on)
            }
            Ioctl::GetDmabufInfo(a) => self.get_dmabuf_info(a),
            Ioctl::ImportDmabuf(a) => self.import_dmabuf(a),
            Ioctl::ExportDmabuf(a) => self.export_dmabuf(a),
            Ioctl::CreateEvent(a) => self.create_event(a),
            Ioctl::DestroyEvent(a) => self.events.destroy(a.event_id),
            Ioctl::SetEvent(a) => self.events.set_from_cpu(a.event_id),
            Ioctl::ResetEvent(a) => self.events.reset(a.event_id),
            Ioctl::WaitEvents { args, events } => self.events.wait(args, events),
            Ioctl::CreateQueue(a) => self.create_queue(a),
            Ioctl::DestroyQueue(a) => self.destroy_queue(a.queue_id),
            Ioctl::UpdateQueue(a) => self.update_queue(a),
            Ioctl::SetCuMask { args, mask } => self.set_cu_mask(args, mask),
            Ioctl::GetQueueWaveState(a) => self.get_queue_wave_state(a),
            Ioctl::Svm { args, attrs } => self.svm_ioctl(args, attrs),
            Ioctl::DbgTrap { args, .. } => self.dbg_trap(args),
        }
    }

    /// `AMDKFD_IOC_DBG_TRAP` as kfd_chardev.c `kfd_ioctl_set_debug_trap` answers a process
    /// that is not being debugged. The emulator has no debugger, so no process is ever
    /// debug-enabled and ENABLE fails as on a device without debug support.
    fn dbg_trap(&self, a: &abi::DbgTrapArgs) -> Result<(), Errno> {
        // Only the primary KFD process may use the debugger (EOPNOTSUPP).
        if self.lock().secondary {
            return Err(Errno::OPNOTSUPP);
        }
        // The emulated device knows one KFD process, the caller's: any other pid has no
        // kfd_process here (kfd_lookup_process_by_pid fails: ESRCH).
        if a.pid != std::process::id() {
            return Err(Errno::SRCH);
        }
        // "PID %i not debug enabled for op %i": every op but ENABLE, unknown ones included
        // (this check precedes the op switch).
        if a.op != abi::KFD_IOC_DBG_TRAP_ENABLE {
            return Err(Errno::INVAL);
        }
        // Not modelled: the debugger itself. kfd_debug.c kfd_dbg_trap_enable answers a
        // device without debug support (`!KFD_IS_SOC15`) with ENODEV.
        Err(Errno::NODEV)
    }

    fn apertures(&self, g: &Gpu) -> ProcessDeviceApertures {
        // kfd_flat_memory.c kfd_init_apertures_v9: LDS at 1 << 48, scratch at 2 << 48,
        // each a 4 GiB window; GPUVM from AMDGPU_VA_RESERVED_BOTTOM to gpuvm_size - 1.
        let lds_base = 1u64 << 48;
        let scratch_base = 2u64 << 48;
        ProcessDeviceApertures {
            lds_base,
            lds_limit: (lds_base & 0xffff_ffff_0000_0000) | 0xffff_ffff,
            scratch_base,
            scratch_limit: (scratch_base & 0xffff_ffff_0000_0000) | 0xffff_ffff,
            gpuvm_base: GPUVM_BASE,
            gpuvm_limit: GPUVM_END - 1,
            gpu_id: g.gpu_id,
            pad: 0,
        }
    }

    fn acquire_vm(&self, a: &mut abi::AcquireVmArgs) -> Result<(), Errno> {
        // fget() failing is EINVAL in kfd_ioctl_acquire_vm.
        let file = file_id(a.drm_fd as i32).map_err(|_| Errno::INVAL)?;
        let idx = self.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
        let mut st = self.lock();
        if let Some(cur) = st.pdds[idx].vm {
            return if cur == file {
                Ok(())
            } else {
                Err(Errno::BUSY)
            };
        }
        // amdgpu_file_to_fpriv rejects files that are not amdgpu render nodes; the emulator
        // also rejects a render node of another GPU (whose VM belongs to that device).
        let node = st.render_node(file)?;
        if node.gpu_idx != idx {
            return Err(Errno::INVAL);
        }
        st.pdds[idx].vm = Some(file);
        Ok(())
    }

    fn set_xnack(&self, a: &mut abi::SetXnackModeArgs) -> Result<(), Errno> {
        let mut st = self.lock();
        if a.xnack_enabled < 0 {
            a.xnack_enabled = i32::from(st.xnack);
            return Ok(());
        }
        if !st.queues.is_empty() {
            return Err(Errno::BUSY);
        }
        let want = a.xnack_enabled != 0;
        if want == st.xnack {
            return Ok(());
        }
        if want && !self.gpus.iter().all(|g| g.preset.xnack_capable) {
            return Err(Errno::PERM);
        }
        st.xnack = want;
        self.refresh_svm_windows(&st);
        Ok(())
    }
}

/// `VRAM_AVAILABLITY_ALIGN` (amdgpu_amdkfd_gpuvm.c): availability is reported in 2 MiB
/// granules and each VRAM allocation is charged rounded up to one.
pub(crate) const VRAM_AVAILABILITY_ALIGN: u64 = 1 << 21;

fn ns(clock: rustix::time::ClockId) -> u64 {
    let t = rustix::time::clock_gettime(clock);
    (t.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(t.tv_nsec as u64)
}

/// (st_dev, st_ino) of the open file `fd`. EBADF for a negative or closed fd.
pub(crate) fn file_id(fd: i32) -> Result<FileId, Errno> {
    if fd < 0 {
        return Err(Errno::BADF);
    }
    // SAFETY: the fd number is only passed to fstat, which does not act on the file; a
    // number that is not open makes fstat fail with EBADF, and no ownership is taken.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let st = rustix::fs::fstat(borrowed)?;
    Ok((st.st_dev, st.st_ino))
}
