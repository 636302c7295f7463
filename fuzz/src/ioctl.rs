//! The `kfd_ioctl` target: arbitrary sequences of [`kfd::Ioctl`] calls with arbitrary
//! arguments against the emulator backend. Errors are fine; a panic or a hang is not.
//!
//! Each call's argument struct is either all input bytes ("raw"), or input bytes with the
//! fields that name objects (GPU ids, handles, queue and event ids, addresses) replaced
//! by ones the session created, so calls get past the first checks and reach deeper code.
//! Blocking is bounded: WAIT_EVENTS timeouts are cut to a few milliseconds.

use std::os::fd::{FromRawFd, OwnedFd};

use kfd::abi::*;
use kfd::{Backend, Ioctl};
use zerocopy::{FromBytes, IntoBytes};

use crate::input::Src;

/// Calls one input may make.
pub const MAX_CALLS: usize = 64;
/// Longest WAIT_EVENTS timeout, in milliseconds.
pub const MAX_WAIT_MS: u32 = 2;

/// Host memory the session owns, for USERPTR allocations and SVM ranges.
const HOST_BYTES: usize = 4 << 20;

struct Session<'a> {
    src: Src<'a>,
    dev: kfd_emu::EmuBackend,
    gpus: Vec<u32>,
    minors: Vec<u32>,
    gpuvm_base: u64,
    handles: Vec<u64>,
    vas: Vec<u64>,
    queues: Vec<u32>,
    events: Vec<u32>,
    dmabufs: Vec<OwnedFd>,
    drm_fds: Vec<OwnedFd>,
    host: Vec<u64>,
    stats: Stats,
}

/// What one [`run`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Calls made.
    pub calls: usize,
    /// Calls that succeeded.
    pub ok: usize,
}

fn raw_fd(v: u32) -> Option<OwnedFd> {
    let fd = v as i32;
    if fd < 0 {
        return None;
    }
    // SAFETY: the backend just returned this descriptor to us (EXPORT_DMABUF), so we own it
    // and close it exactly once, when the OwnedFd drops.
    Some(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Session<'_> {
    fn io(&mut self, req: Ioctl<'_>) -> bool {
        let ok = self.dev.ioctl(req).is_ok();
        self.stats.ok += ok as usize;
        ok
    }

    fn pick<T: Copy>(&mut self, pool: &[T], fallback: T) -> T {
        if pool.is_empty() {
            return fallback;
        }
        let i = self.src.u8() as usize % pool.len();
        pool.get(i).copied().unwrap_or(fallback)
    }

    fn gpu(&mut self) -> u32 {
        let gpus = self.gpus.clone();
        match self.src.u8() % 8 {
            0 => self.src.u32(),
            _ => self.pick(&gpus, 0),
        }
    }

    fn handle(&mut self) -> u64 {
        let h = self.handles.clone();
        match self.src.u8() % 8 {
            0 => self.src.u64(),
            _ => self.pick(&h, 0),
        }
    }

    fn queue(&mut self) -> u32 {
        let q = self.queues.clone();
        match self.src.u8() % 8 {
            0 => self.src.u32() % 2048,
            _ => self.pick(&q, 0),
        }
    }

    fn event(&mut self) -> u32 {
        let e = self.events.clone();
        match self.src.u8() % 8 {
            0 => self.src.u32() % 8192,
            _ => self.pick(&e, 0),
        }
    }

    /// An address: inside a BO the session allocated, in the GPUVM aperture, in the
    /// session's host memory, or anything.
    fn va(&mut self) -> u64 {
        let vas = self.vas.clone();
        let off = (self.src.u16() as u64) << 4;
        match self.src.u8() % 6 {
            0 | 1 => self.pick(&vas, self.gpuvm_base) + off,
            2 => self.gpuvm_base + ((self.src.u16() as u64) << 12),
            3 => self.host_addr() + (off & 0xF_FFFF),
            4 => self.pick(&vas, self.gpuvm_base),
            _ => self.src.u64(),
        }
    }

    fn host_addr(&self) -> u64 {
        let p = self.host.as_ptr() as u64;
        (p + 0xFFF) & !0xFFF
    }

    fn size(&mut self) -> u64 {
        match self.src.u8() % 6 {
            0..=3 => ((self.src.u8() as u64) + 1) << 12,
            4 => self.src.u32() as u64,
            _ => self.src.u64(),
        }
    }

    /// The argument struct: every byte from the input, then (unless raw) the object fields
    /// patched by `fix`.
    fn args<T: FromBytes + IntoBytes + Default>(
        &mut self,
        fix: impl FnOnce(&mut Self, &mut T),
    ) -> T {
        let raw = self.src.u8().is_multiple_of(8);
        let mut t = T::default();
        for b in t.as_mut_bytes().iter_mut() {
            *b = if raw { self.src.u8() } else { 0 };
        }
        if !raw {
            fix(self, &mut t);
        }
        t
    }

    fn call(&mut self) {
        match self.src.u8() % 28 {
            0 => {
                let mut a = GetVersionArgs::default();
                let _ = self.io(Ioctl::GetVersion(&mut a));
            }
            1 => {
                let mut a = self.args::<CreateQueueArgs>(|s, a| {
                    a.queue_type = s.src.u8() as u32 % 6;
                    a.gpu_id = s.gpu();
                    a.ring_base_address = s.va();
                    a.ring_size = 1 << (s.src.u8() % 24);
                    a.write_pointer_address = s.va();
                    a.read_pointer_address = s.va();
                    a.queue_percentage = s.src.u8() as u32 % 110;
                    a.queue_priority = s.src.u8() as u32 % 17;
                    if s.src.bool() {
                        a.eop_buffer_address = s.va();
                        a.eop_buffer_size = s.size();
                        a.ctx_save_restore_address = s.va();
                        a.ctx_save_restore_size = s.src.u32();
                        a.ctl_stack_size = s.src.u32();
                    }
                    a.sdma_engine_id = s.src.u8() as u32 % 20;
                });
                if self.io(Ioctl::CreateQueue(&mut a)) {
                    self.queues.push(a.queue_id);
                }
            }
            2 => {
                let mut a = self.args::<DestroyQueueArgs>(|s, a| a.queue_id = s.queue());
                if self.io(Ioctl::DestroyQueue(&mut a)) {
                    self.queues.retain(|q| *q != a.queue_id);
                }
            }
            3 => {
                let mut a = self.args::<UpdateQueueArgs>(|s, a| {
                    a.queue_id = s.queue();
                    a.ring_base_address = s.va();
                    a.ring_size = 1 << (s.src.u8() % 24);
                    a.queue_percentage = s.src.u8() as u32 % 110;
                    a.queue_priority = s.src.u8() as u32 % 17;
                });
                let _ = self.io(Ioctl::UpdateQueue(&mut a));
            }
            4 => {
                let n = self.src.below(8) as usize;
                let mask: Vec<u32> = (0..n).map(|_| self.src.u32()).collect();
                let mut a = self.args::<SetCuMaskArgs>(|s, a| {
                    a.queue_id = s.queue();
                    a.num_cu_mask = n as u32 * 32;
                });
                // The variant carries the words; the header must agree for a valid call.
                let _ = self.io(Ioctl::SetCuMask {
                    args: &mut a,
                    mask: &mask,
                });
            }
            5 => {
                let mut a = self.args::<GetQueueWaveStateArgs>(|s, a| {
                    a.queue_id = s.queue();
                    a.ctl_stack_address = s.va();
                });
                let _ = self.io(Ioctl::GetQueueWaveState(&mut a));
            }
            6 => {
                let mut a = self.args::<SetMemoryPolicyArgs>(|s, a| {
                    a.gpu_id = s.gpu();
                    a.default_policy = s.src.u8() as u32 % 3;
                    a.alternate_policy = s.src.u8() as u32 % 3;
                    a.alternate_aperture_base = s.va();
                    a.alternate_aperture_size = s.size();
                });
                let _ = self.io(Ioctl::SetMemoryPolicy(&mut a));
            }
            7 => {
                let mut a = self.args::<GetClockCountersArgs>(|s, a| a.gpu_id = s.gpu());
                let _ = self.io(Ioctl::GetClockCounters(&mut a));
            }
            8 => {
                let mut a = GetProcessAperturesArgs::default();
                let _ = self.io(Ioctl::GetProcessApertures(&mut a));
            }
            9 => {
                let n = self.src.below(10) as usize;
                let mut ap = vec![ProcessDeviceApertures::default(); n];
                let mut a =
                    self.args::<GetProcessAperturesNewArgs>(|_, a| a.num_of_nodes = n as u32);
                let _ = self.io(Ioctl::GetProcessAperturesNew {
                    args: &mut a,
                    apertures: &mut ap,
                });
            }
            10 => {
                let mut a = self.args::<CreateEventArgs>(|s, a| {
                    a.event_type = s.src.u8() as u32 % 10;
                    a.auto_reset = s.src.u8() as u32 % 2;
                    a.node_id = s.src.u8() as u32 % 4;
                    if s.src.bool() {
                        a.event_page_offset = s.handle();
                    }
                });
                if self.io(Ioctl::CreateEvent(&mut a)) {
                    self.events.push(a.event_id);
                }
            }
            11 => {
                let mut a = self.args::<DestroyEventArgs>(|s, a| a.event_id = s.event());
                if self.io(Ioctl::DestroyEvent(&mut a)) {
                    self.events.retain(|e| *e != a.event_id);
                }
            }
            12 => {
                let mut a = self.args::<SetEventArgs>(|s, a| a.event_id = s.event());
                let _ = self.io(Ioctl::SetEvent(&mut a));
            }
            13 => {
                let mut a = self.args::<ResetEventArgs>(|s, a| a.event_id = s.event());
                let _ = self.io(Ioctl::ResetEvent(&mut a));
            }
            14 => {
                let n = self.src.below(6) as usize;
                let mut evs = vec![EventData::default(); n];
                for e in evs.iter_mut() {
                    e.event_id = self.event();
                }
                let mut a = self.args::<WaitEventsArgs>(|s, a| {
                    a.num_events = n as u32;
                    a.wait_for_all = s.src.u8() as u32 % 2;
                });
                // A wait that times out is not a hang: keep it short.
                a.timeout = a.timeout.min(MAX_WAIT_MS);
                let _ = self.io(Ioctl::WaitEvents {
                    args: &mut a,
                    events: &mut evs,
                });
            }
            15 => {
                let mut a = self.args::<SetScratchBackingVaArgs>(|s, a| {
                    a.gpu_id = s.gpu();
                    a.va_addr = s.va();
                });
                let _ = self.io(Ioctl::SetScratchBackingVa(&mut a));
            }
            16 => {
                let mut a = self.args::<SetTrapHandlerArgs>(|s, a| {
                    a.gpu_id = s.gpu();
                    a.tba_addr = s.va();
                    a.tma_addr = s.va();
                });
                let _ = self.io(Ioctl::SetTrapHandler(&mut a));
            }
            17 => {
                let minors = self.minors.clone();
                let minor = self.pick(&minors, 128);
                if let Ok(fd) = self.dev.open_render_node(minor) {
                    use std::os::fd::AsRawFd;
                    let raw = fd.as_raw_fd() as u32;
                    self.drm_fds.push(fd);
                    let mut a = self.args::<AcquireVmArgs>(|s, a| {
                        a.gpu_id = s.gpu();
                        a.drm_fd = raw;
                    });
                    let _ = self.io(Ioctl::AcquireVm(&mut a));
                }
            }
            18 | 27 => {
                let mut a = self.args::<AllocMemoryOfGpuArgs>(|s, a| {
                    a.gpu_id = s.gpu();
                    let kind = [
                        KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
                        KFD_IOC_ALLOC_MEM_FLAGS_GTT,
                        KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
                        KFD_IOC_ALLOC_MEM_FLAGS_DOORBELL,
                        KFD_IOC_ALLOC_MEM_FLAGS_MMIO_REMAP,
                    ];
                    let k = kind[(s.src.u8() % 5) as usize];
                    a.flags = k | (s.src.u32() & 0xFF80_0000);
                    a.va_addr = s.gpuvm_base + ((s.src.u16() as u64) << 16);
                    a.size = s.size();
                    if k == KFD_IOC_ALLOC_MEM_FLAGS_USERPTR {
                        a.mmap_offset = s.host_addr() + ((s.src.u8() as u64) << 12);
                        a.size = a.size.min(HOST_BYTES as u64 / 2);
                    }
                });
                if self.io(Ioctl::AllocMemoryOfGpu(&mut a)) {
                    self.handles.push(a.handle);
                    self.vas.push(a.va_addr);
                }
            }
            19 => {
                let mut a = self.args::<FreeMemoryOfGpuArgs>(|s, a| a.handle = s.handle());
                if self.io(Ioctl::FreeMemoryOfGpu(&mut a)) {
                    self.handles.retain(|h| *h != a.handle);
                }
            }
            20 | 21 => {
                let map = self.src.u8().is_multiple_of(2);
                let n = self.src.below(4) as usize;
                let ids: Vec<u32> = (0..n).map(|_| self.gpu()).collect();
                let mut a = self.args::<MapMemoryToGpuArgs>(|s, a| {
                    a.handle = s.handle();
                    a.n_devices = n as u32;
                    a.n_success = s.src.u8() as u32 % 2;
                });
                if map {
                    let _ = self.io(Ioctl::MapMemoryToGpu {
                        args: &mut a,
                        gpu_ids: &ids,
                    });
                } else {
                    let mut u = UnmapMemoryFromGpuArgs {
                        handle: a.handle,
                        device_ids_array_ptr: a.device_ids_array_ptr,
                        n_devices: a.n_devices,
                        n_success: a.n_success,
                    };
                    let _ = self.io(Ioctl::UnmapMemoryFromGpu {
                        args: &mut u,
                        gpu_ids: &ids,
                    });
                }
            }
            22 => {
                let mut a = self.args::<ExportDmabufArgs>(|s, a| {
                    a.handle = s.handle();
                    a.flags = 0x80002; // O_RDWR | O_CLOEXEC
                });
                if self.io(Ioctl::ExportDmabuf(&mut a)) {
                    if let Some(fd) = raw_fd(a.dmabuf_fd) {
                        self.dmabufs.push(fd);
                    }
                }
            }
            23 => {
                use std::os::fd::AsRawFd;
                let fds: Vec<u32> = self.dmabufs.iter().map(|f| f.as_raw_fd() as u32).collect();
                let fd = self.pick(&fds, u32::MAX);
                let info = self.src.bool();
                if info {
                    let mut a = self.args::<GetDmabufInfoArgs>(|s, a| {
                        a.dmabuf_fd = fd;
                        a.gpu_id = s.gpu();
                    });
                    // No metadata buffer: the pointer would be a host address.
                    a.metadata_ptr = 0;
                    a.metadata_size = 0;
                    let _ = self.io(Ioctl::GetDmabufInfo(&mut a));
                } else {
                    let mut a = self.args::<ImportDmabufArgs>(|s, a| {
                        a.dmabuf_fd = fd;
                        a.gpu_id = s.gpu();
                        a.va_addr = s.gpuvm_base + ((s.src.u16() as u64) << 16);
                    });
                    if self.io(Ioctl::ImportDmabuf(&mut a)) {
                        self.handles.push(a.handle);
                        self.vas.push(a.va_addr);
                    }
                }
            }
            24 => {
                let n = self.src.below(6) as usize;
                let mut attrs: Vec<SvmAttribute> = (0..n)
                    .map(|_| SvmAttribute {
                        type_: self.src.u8() as u32 % 9,
                        value: match self.src.u8() % 3 {
                            0 => self.gpu(),
                            1 => self.src.u8() as u32,
                            _ => self.src.u32(),
                        },
                    })
                    .collect();
                let host = self.host_addr();
                let mut a = self.args::<SvmArgs>(|s, a| {
                    a.op = s.src.u8() as u32 % 3;
                    a.start_addr = host + ((s.src.u8() as u64 % 64) << 12);
                    a.size = ((s.src.u8() as u64 % 64) + 1) << 12;
                    a.nattr = n as u32;
                });
                // SVM ranges are the process's own memory: stay inside the session's
                // host buffer (anything else would hand the fuzzer's heap to the device).
                let end = host + (HOST_BYTES as u64 - 4096);
                if a.start_addr < host || a.start_addr > end {
                    a.start_addr = host;
                }
                a.size = a.size.min(end - a.start_addr);
                let _ = self.io(Ioctl::Svm {
                    args: &mut a,
                    attrs: &mut attrs,
                });
            }
            25 => {
                let mut a = self.args::<SetXnackModeArgs>(|s, a| {
                    a.xnack_enabled = s.src.u8() as i32 % 3 - 1;
                });
                let _ = self.io(Ioctl::SetXnackMode(&mut a));
            }
            _ => {
                if self.src.bool() {
                    let mut a = self.args::<GetAvailableMemoryArgs>(|s, a| a.gpu_id = s.gpu());
                    let _ = self.io(Ioctl::AvailableMemory(&mut a));
                } else if self.src.bool() {
                    let mut a = self.args::<RuntimeEnableArgs>(|s, a| {
                        a.mode_mask = s.src.u8() as u32 & 3;
                    });
                    a.r_debug = 0;
                    let _ = self.io(Ioctl::RuntimeEnable(&mut a));
                } else {
                    let q = self.queue();
                    self.dev.doorbell_written(q);
                }
            }
        }
    }
}

/// Runs one input. Never panics except on an emulator bug.
pub fn run(data: &[u8]) -> Stats {
    let mut src = Src::new(data);
    let spec = match src.u8() % 4 {
        0 => "emu:mi300x",
        1 => "emu:rx7900xtx",
        2 => "emu:mi250x,rx9070xt",
        _ => "emu:mi210",
    };
    let Ok(dev) = kfd_emu::EmuBackend::from_spec(spec) else {
        return Stats::default();
    };
    let gpus: Vec<u32> = dev.topology().gpu_nodes().map(|n| n.gpu_id).collect();
    let minors: Vec<u32> = dev
        .topology()
        .gpu_nodes()
        .map(|n| n.properties.drm_render_minor)
        .collect();
    let mut s = Session {
        src,
        dev,
        gpus,
        minors,
        gpuvm_base: 0,
        handles: Vec::new(),
        vas: Vec::new(),
        queues: Vec::new(),
        events: Vec::new(),
        dmabufs: Vec::new(),
        drm_fds: Vec::new(),
        host: vec![0u64; HOST_BYTES / 8],
        stats: Stats::default(),
    };
    // Learn the GPUVM aperture as a runtime does first.
    let mut ap = vec![ProcessDeviceApertures::default(); s.gpus.len()];
    let mut a = GetProcessAperturesNewArgs {
        num_of_nodes: ap.len() as u32,
        ..Default::default()
    };
    if s.dev
        .ioctl(Ioctl::GetProcessAperturesNew {
            args: &mut a,
            apertures: &mut ap,
        })
        .is_ok()
    {
        s.gpuvm_base = ap.first().map_or(0, |x| x.gpuvm_base.max(1 << 21));
    }
    while !s.src.is_empty() && s.stats.calls < MAX_CALLS {
        s.call();
        s.stats.calls += 1;
    }
    // Tear down as a process exit does: queues, then the device.
    for q in std::mem::take(&mut s.queues) {
        let mut a = DestroyQueueArgs {
            queue_id: q,
            pad: 0,
        };
        let _ = s.dev.ioctl(Ioctl::DestroyQueue(&mut a));
    }
    s.stats
}
