//! Helpers shared by the `kfd_*` tests: open an emulated device the way the runtime does
//! (render nodes, ACQUIRE_VM), reserve VA, allocate + CPU-map + GPU-map BOs. Every call
//! goes through the `kfd::ioctl` wrappers on `&dyn Backend`.
#![allow(dead_code)]

use core::ffi::c_void;
use core::ptr::NonNull;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

use kfd::abi::{self, AllocMemoryOfGpuArgs};
use kfd::{ioctl, Backend, Errno, KfdError, MmapFile, Prot};
use kfd_emu::EmuBackend;

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
