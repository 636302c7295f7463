//! Helpers shared by the `kfd_*` tests: open an emulated device the way the runtime does
//! (render nodes, ACQUIRE_VM), reserve VA, allocate + CPU-map + GPU-map BOs. Every call
//! goes through the `kfd::ioctl` wrappers on `&dyn Backend`.
#![allow(dead_code)]

use core::ffi::c_void;
use core::ptr::NonNull;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use std::time::{Duration, Instant};

use kfd::abi::{self, AllocMemoryOfGpuArgs, CreateQueueArgs};
use kfd::{ioctl, Backend, Errno, KfdError, MmapFile, Prot};
use kfd_emu::{cwsr_sizes, CwsrSizes, EmuBackend};
use pm4::sdma::SdmaPacket;

/// An emulated device with its VMs acquired.
pub struct Dev {
    pub emu: EmuBackend,
    pub gpus: Vec<u32>,
    pub render: Vec<OwnedFd>,
}

impl Dev {
    pub fn b(&self) -> &dyn Backend {
        &self.emu
    }
}

/// Open `spec` and ACQUIRE_VM on every GPU.
pub fn open(spec: &str) -> Dev {
    let emu = EmuBackend::from_spec(spec).expect("spec");
    let b: &dyn Backend = &emu;
    let nodes: Vec<(u32, u32)> = b
        .topology()
        .gpu_nodes()
        .map(|n| (n.gpu_id, n.properties.drm_render_minor))
        .collect();
    let mut render = Vec::new();
    let mut gpus = Vec::new();
    for (gpu_id, minor) in nodes {
        let fd = b.open_render_node(minor).expect("render node");
        ioctl::acquire_vm(b, gpu_id, fd.as_raw_fd()).expect("acquire vm");
        render.push(fd);
        gpus.push(gpu_id);
    }
    Dev { emu, gpus, render }
}

pub fn errno(r: Result<impl std::fmt::Debug, KfdError>) -> Errno {
    match r {
        Ok(v) => panic!("expected an error, got Ok({v:?})"),
        Err(e) => e.errno,
    }
}

/// A PROT_NONE reservation of `len` bytes aligned to `align`, as runtimes make for GPUVM.
pub struct Reservation {
    pub base: u64,
    pub len: usize,
    raw: *mut c_void,
    raw_len: usize,
}

unsafe impl Send for Reservation {}
unsafe impl Sync for Reservation {}

impl Reservation {
    pub fn new(len: usize, align: usize) -> Self {
        let raw_len = len + align;
        // SAFETY: a fresh anonymous reservation.
        let raw = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                raw_len,
                rustix::mm::ProtFlags::empty(),
                rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::NORESERVE,
            )
        }
        .expect("reserve");
        let base = (raw as usize).div_ceil(align) * align;
        Reservation {
            base: base as u64,
            len,
            raw,
            raw_len,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        // SAFETY: the reservation is ours.
        unsafe {
            let _ = rustix::mm::munmap(self.raw, self.raw_len);
        }
    }
}

/// Allocate a BO at `va` (no CPU or GPU mapping).
pub fn alloc(
    dev: &Dev,
    gpu: usize,
    va: u64,
    size: u64,
    flags: u32,
) -> Result<AllocMemoryOfGpuArgs, KfdError> {
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: va,
        size,
        gpu_id: dev.gpus[gpu],
        flags: flags | abi::KFD_IOC_ALLOC_MEM_FLAGS_NO_SUBSTITUTE,
        ..Default::default()
    };
    ioctl::alloc_memory_of_gpu(dev.b(), &mut a)?;
    Ok(a)
}

/// mmap a BO through its GPU's render node at its VA (fixed).
pub fn cpu_map(dev: &Dev, gpu: usize, a: &AllocMemoryOfGpuArgs) -> Result<*mut u8, Errno> {
    // SAFETY: the tests only map BOs over their own reservations.
    let p = unsafe {
        dev.b().mmap(
            MmapFile::Render(dev.render[gpu].as_fd()),
            a.mmap_offset,
            a.size as usize,
            NonNull::new(a.va_addr as *mut c_void),
            Prot::READ | Prot::WRITE,
        )
    }?;
    Ok(p.as_ptr().cast())
}

/// GPU-map a BO on `gpus` (indices).
pub fn gpu_map(dev: &Dev, handle: u64, gpus: &[usize]) -> Result<(), KfdError> {
    let ids: Vec<u32> = gpus.iter().map(|i| dev.gpus[*i]).collect();
    let mut n = 0;
    ioctl::map_memory_to_gpu(dev.b(), handle, &ids, &mut n)
}

/// A GTT BO, CPU-mapped and GPU-mapped on GPU `gpu`.
pub fn gtt(dev: &Dev, gpu: usize, va: u64, size: u64) -> (u64, *mut u8) {
    let flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_COHERENT
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_UNCACHED;
    let a = alloc(dev, gpu, va, size, flags).expect("alloc gtt");
    let p = cpu_map(dev, gpu, &a).expect("cpu map");
    gpu_map(dev, a.handle, &[gpu]).expect("gpu map");
    (a.handle, p)
}

/// A VRAM BO (PUBLIC), CPU-mapped and GPU-mapped on GPU `gpu`.
pub fn vram(dev: &Dev, gpu: usize, va: u64, size: u64) -> (u64, *mut u8) {
    let flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_EXECUTABLE
        | abi::KFD_IOC_ALLOC_MEM_FLAGS_PUBLIC;
    let a = alloc(dev, gpu, va, size, flags).expect("alloc vram");
    let p = cpu_map(dev, gpu, &a).expect("cpu map");
    gpu_map(dev, a.handle, &[gpu]).expect("gpu map");
    (a.handle, p)
}

// ---- Queue helpers: buffers for a queue of each kind, and SDMA submission. ----

const MIB: u64 = 1 << 20;

pub const RING: u64 = 64 * 1024;

/// Queue buffers laid out in one reservation: ring (GTT, exact size), a 4 KiB GTT page
/// holding the read/write pointers, a 4 KiB VRAM EOP buffer and the CWSR area (VRAM) of
/// the size the kernel computes.
pub struct Bufs {
    _r: Reservation,
    pub ring: u64,
    pub ring_ptr: *mut u8,
    pub ptrs: u64,
    pub ptrs_ptr: *mut u8,
    pub eop: u64,
    pub cwsr: u64,
    pub sizes: CwsrSizes,
    pub next: u64,
}

pub fn sizes_of(dev: &Dev, gpu: usize) -> CwsrSizes {
    let n = dev.b().topology().node_by_gpu_id(dev.gpus[gpu]).unwrap();
    let p = &n.properties;
    let s = cwsr_sizes(
        p.gfx_target_version,
        p.xcc_count(),
        p.simd_count,
        p.simd_per_cu,
        p.array_count,
        p.simd_arrays_per_engine,
        p.lds_size_in_kb,
    )
    .unwrap();
    // The runtime takes the sizes from the topology; they agree with the computation.
    assert_eq!(p.cwsr_size, Some(s.cwsr_size));
    assert_eq!(p.ctl_stack_size, Some(s.ctl_stack_size));
    s
}

pub fn bufs(dev: &Dev, gpu: usize) -> Bufs {
    let sizes = sizes_of(dev, gpu);
    let cwsr_len = sizes.default_cwsr_bo_size();
    let r = Reservation::new((16 * MIB + cwsr_len + 64 * MIB) as usize, 2 * MIB as usize);
    let (_, ring_ptr) = gtt(dev, gpu, r.base, RING);
    let (_, ptrs_ptr) = gtt(dev, gpu, r.base + 2 * MIB, 4096);
    vram(dev, gpu, r.base + 4 * MIB, 4096);
    let cwsr = r.base + 6 * MIB;
    let flags = abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM | abi::KFD_IOC_ALLOC_MEM_FLAGS_WRITABLE;
    let c = alloc(dev, gpu, cwsr, cwsr_len, flags).unwrap();
    gpu_map(dev, c.handle, &[gpu]).unwrap();
    let next = (cwsr + cwsr_len).div_ceil(2 * MIB) * 2 * MIB;
    Bufs {
        ring: r.base,
        ring_ptr,
        ptrs: r.base + 2 * MIB,
        ptrs_ptr,
        eop: r.base + 4 * MIB,
        cwsr,
        sizes,
        next,
        _r: r,
    }
}

pub fn sdma_args(dev: &Dev, gpu: usize, b: &Bufs) -> CreateQueueArgs {
    CreateQueueArgs {
        ring_base_address: b.ring,
        write_pointer_address: b.ptrs,
        read_pointer_address: b.ptrs + 8,
        ring_size: RING as u32,
        gpu_id: dev.gpus[gpu],
        queue_type: abi::KFD_IOC_QUEUE_TYPE_SDMA,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    }
}

/// CREATE_QUEUE with `q`, then a fresh mapping of the queue's 8 KiB doorbell slice:
/// returns the slice's CPU address.
pub fn create_with_doorbell(dev: &Dev, q: &mut CreateQueueArgs) -> *mut u64 {
    let d = dev.b();
    ioctl::create_queue(d, q).unwrap();
    // SAFETY: a fresh mapping of the doorbell slice.
    unsafe {
        d.mmap(
            MmapFile::Kfd,
            q.doorbell_offset & !0x1fff,
            8192,
            None,
            Prot::READ | Prot::WRITE,
        )
    }
    .unwrap()
    .as_ptr()
    .cast::<u64>()
}

pub fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(20) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    f()
}

/// Write SDMA packets into the ring at byte offset `wptr`, publish the write pointer,
/// ring the doorbell. Returns the new write pointer.
pub fn submit_sdma(
    dev: &Dev,
    b: &Bufs,
    db: *mut u64,
    q: &CreateQueueArgs,
    mut wptr: u64,
    pkts: &[SdmaPacket<'_>],
) -> u64 {
    let v = pm4::SdmaVersion::V4;
    for p in pkts {
        let mut w = vec![0u32; p.dwords(v)];
        p.encode(v, &mut w).unwrap();
        for x in w {
            // SAFETY: the ring BO is mapped; offsets wrap inside it.
            unsafe {
                b.ring_ptr
                    .add((wptr % RING) as usize)
                    .cast::<u32>()
                    .write_volatile(x)
            };
            wptr += 4;
        }
    }
    // SAFETY: the pointer page is mapped; the doorbell slice is mapped.
    unsafe {
        b.ptrs_ptr.cast::<u64>().write_volatile(wptr);
        let slot = (q.doorbell_offset & 0x1fff) as usize / 8;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        db.add(slot).write_volatile(wptr);
    }
    dev.b().doorbell_written(q.queue_id);
    wptr
}
