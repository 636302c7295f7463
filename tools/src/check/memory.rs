//! memory: buffers through the runtime, KFD memory ioctls with the kernel's errno, SVM
//! attributes, and peer access between GPUs.

use std::sync::atomic::Ordering;

use kfd::abi::{self, AllocFlags, AllocMemoryOfGpuArgs, SvmAttribute};
use kfd::Errno;
use kfdrt::raw::VaReservation;
use kfdrt::{MemoryKind, WriteValueFlags};

use super::raw::Scratch;
use super::{
    ensure, pass, pass_with, pattern, require, skip, Check, CheckResult, Ctx, Drain, OrFail,
};

/// The memory checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "memory.cpu_roundtrip",
            what: "VRAM (public), GTT and signal buffers read back exactly what the CPU wrote",
            run: cpu_roundtrip,
        },
        Check {
            name: "memory.available_tracks_vram",
            what: "AVAILABLE_MEMORY drops by at least the size of a 64 MiB VRAM buffer and recovers after free",
            run: available_tracks_vram,
        },
        Check {
            name: "memory.vram_oversize_enomem",
            what: "ALLOC_MEMORY_OF_GPU of more VRAM than available fails with ENOMEM",
            run: vram_oversize_enomem,
        },
        Check {
            name: "memory.map_bad_gpu_einval",
            what: "MAP_MEMORY_TO_GPU on an unknown gpu_id fails with EINVAL and maps nothing",
            run: map_bad_gpu_einval,
        },
        Check {
            name: "memory.double_free_einval",
            what: "FREE_MEMORY_OF_GPU succeeds once, then fails with EINVAL for the stale handle",
            run: double_free_einval,
        },
        Check {
            name: "memory.userptr_gpu_write",
            what: "registered host memory (USERPTR) receives a value a stream writes",
            run: userptr_gpu_write,
        },
        Check {
            name: "memory.svm_attr_roundtrip",
            what: "SVM SET_ATTR/GET_ATTR round trip; mixed preferred locations read back as undefined",
            run: svm_attr_roundtrip,
        },
        Check {
            name: "memory.peer_vram_write",
            what: "with peer access enabled (hipDeviceEnablePeerAccess), a stream on each GPU writes into the other GPU's VRAM (multi-GPU)",
            run: peer_vram_write,
        },
    ]
}

fn cpu_roundtrip(ctx: &Ctx) -> CheckResult {
    // The check is about CPU access to every kind, VRAM included.
    require!(ctx.need_large_bar(0));
    for (i, kind) in [
        MemoryKind::Device,
        MemoryKind::HostPinned,
        MemoryKind::Signal,
    ]
    .into_iter()
    .enumerate()
    {
        let b = ctx.dev.alloc(kind, 0, 1 << 20).or_fail("alloc")?;
        ensure!(
            b.va() % 4096 == 0,
            "{kind:?} buffer at unaligned {:#x}",
            b.va()
        );
        let data = pattern(b.len(), 7 + i as u32);
        b.write(0, &data).or_fail("write")?;
        let mut back = vec![0; b.len()];
        b.read(0, &mut back).or_fail("read")?;
        if let Some(off) = data.iter().zip(&back).position(|(a, b)| a != b) {
            return Err(format!(
                "{kind:?}: byte {off:#x} reads {:#x}, wrote {:#x}",
                back[off], data[off]
            ));
        }
    }
    pass()
}

fn available_tracks_vram(ctx: &Ctx) -> CheckResult {
    let id = ctx.gpu_id(0);
    let size = 64 << 20;
    let before = kfd::ioctl::available_memory(ctx.backend(), id).or_fail("AVAILABLE_MEMORY")?;
    if before < 2 * size as u64 {
        return skip(format!("only {before} bytes of VRAM available"));
    }
    let b = ctx
        .dev
        .alloc(MemoryKind::Device, 0, size)
        .or_fail("alloc 64 MiB VRAM")?;
    let during = kfd::ioctl::available_memory(ctx.backend(), id).or_fail("AVAILABLE_MEMORY")?;
    drop(b);
    let after = kfd::ioctl::available_memory(ctx.backend(), id).or_fail("AVAILABLE_MEMORY")?;
    ensure!(
        during + size as u64 <= before,
        "available {before} -> {during} after a {size}-byte VRAM alloc (want a drop of >= {size})"
    );
    ensure!(
        after >= during + size as u64,
        "available {during} -> {after} after freeing {size} bytes (want a rise of >= {size})"
    );
    pass_with(format!("{before} -> {during} -> {after}"))
}

fn raw_alloc(ctx: &Ctx, va: u64, size: u64, flags: AllocFlags) -> Result<u64, kfd::KfdError> {
    let mut a = AllocMemoryOfGpuArgs {
        va_addr: va,
        size,
        gpu_id: ctx.gpu_id(0),
        flags: (flags | AllocFlags::NO_SUBSTITUTE | AllocFlags::WRITABLE).bits(),
        ..Default::default()
    };
    kfd::ioctl::alloc_memory_of_gpu(ctx.backend(), &mut a).map(|()| a.handle)
}

fn vram_oversize_enomem(ctx: &Ctx) -> CheckResult {
    let avail =
        kfd::ioctl::available_memory(ctx.backend(), ctx.gpu_id(0)).or_fail("AVAILABLE_MEMORY")?;
    // AVAILABLE_MEMORY rounds each VRAM BO up to 2 MiB while the allocation limit counts
    // exact sizes (amdgpu_amdkfd_get_available_memory vs amdgpu_amdkfd_reserve_mem_limit),
    // so "available + a little" may legitimately fit: ask for more than the whole VRAM.
    let vram = ctx.dev.gpus()[0].node.vram_size();
    let size = (avail.max(vram) + (64 << 20)).next_multiple_of(2 << 20);
    let res = VaReservation::new(size as usize, 2 << 20).or_fail("reserve address space")?;
    match raw_alloc(ctx, res.addr(), size, AllocFlags::VRAM) {
        Ok(h) => {
            let _ = kfd::ioctl::free_memory_of_gpu(ctx.backend(), h);
            Err(format!(
                "a {size}-byte VRAM alloc succeeded ({vram} bytes of VRAM, {avail} available)"
            ))
        }
        Err(e) if e.errno == Errno::NOMEM => pass_with(format!("{size} bytes: ENOMEM")),
        Err(e) => Err(format!("want ENOMEM, got {e}")),
    }
}

fn map_bad_gpu_einval(ctx: &Ctx) -> CheckResult {
    let b = ctx
        .dev
        .alloc(MemoryKind::HostPinned, 0, 4096)
        .or_fail("alloc")?;
    let ids = ctx.dev.gpus().iter().map(|g| g.gpu_id).max().unwrap_or(0);
    let bad = [ids.wrapping_add(0x1357) | 1];
    let mut n = 0;
    match kfd::ioctl::map_memory_to_gpu(ctx.backend(), b.handle(), &bad, &mut n) {
        Ok(()) => Err(format!("mapping on gpu_id {:#x} succeeded", bad[0])),
        Err(e) if e.errno == Errno::INVAL => {
            ensure!(n == 0, "n_success = {n} after a failed map of one device");
            pass()
        }
        Err(e) => Err(format!("want EINVAL, got {e}")),
    }
}

fn double_free_einval(ctx: &Ctx) -> CheckResult {
    let res = VaReservation::new(1 << 16, 4096).or_fail("reserve address space")?;
    let h = raw_alloc(ctx, res.addr(), 1 << 16, AllocFlags::GTT).or_fail("ALLOC (GTT)")?;
    kfd::ioctl::free_memory_of_gpu(ctx.backend(), h).or_fail("first FREE")?;
    match kfd::ioctl::free_memory_of_gpu(ctx.backend(), h) {
        Ok(()) => Err(format!("second FREE of handle {h:#x} succeeded")),
        Err(e) if e.errno == Errno::INVAL => pass(),
        Err(e) => Err(format!("want EINVAL, got {e}")),
    }
}

/// Page-aligned heap memory freed on drop.
struct HostPages {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl HostPages {
    fn new(len: usize) -> Result<HostPages, String> {
        let layout = std::alloc::Layout::from_size_align(len, 4096).or_fail("layout")?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        ensure!(!ptr.is_null(), "host allocation of {len} bytes failed");
        Ok(HostPages { ptr, layout })
    }
    fn u32(&self, off: usize) -> &std::sync::atomic::AtomicU32 {
        assert!(off % 4 == 0 && off + 4 <= self.layout.size());
        // SAFETY: aligned, in bounds, lives as long as `self`.
        unsafe { std::sync::atomic::AtomicU32::from_ptr(self.ptr.add(off).cast()) }
    }
}

impl Drop for HostPages {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) };
    }
}

fn userptr_gpu_write(ctx: &Ctx) -> CheckResult {
    let host = HostPages::new(1 << 16)?;
    // SAFETY: `host` is page-aligned and outlives `b` (declared after it: dropped first).
    let b = unsafe { ctx.dev.register_host_memory(host.ptr, 1 << 16) }
        .or_fail("register_host_memory")?;
    ensure!(
        b.va() == host.ptr as u64,
        "USERPTR va {:#x} != host address",
        b.va()
    );
    let s = ctx.dev.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    s.write_value32(b.va() + 0x8000, 0x5eed_cafe, WriteValueFlags::DEFAULT)
        .or_fail("write_value32")?;
    s.synchronize().or_fail("synchronize")?;
    let v = host.u32(0x8000).load(Ordering::Acquire);
    ensure!(
        v == 0x5eed_cafe,
        "host memory holds {v:#x}, want 0x5eedcafe"
    );
    pass()
}

fn svm_get(dev: &kfdrt::Device, start: u64, size: u64, types: &[u32]) -> Result<Vec<u32>, String> {
    let mut attrs: Vec<SvmAttribute> = types
        .iter()
        .map(|&t| SvmAttribute { type_: t, value: 0 })
        .collect();
    kfd::ioctl::svm(
        dev.backend().as_ref(),
        abi::KFD_IOCTL_SVM_OP_GET_ATTR,
        start,
        size,
        &mut attrs,
    )
    .or_fail("SVM GET_ATTR")?;
    Ok(attrs.iter().map(|a| a.value).collect())
}

fn svm_attr_roundtrip(ctx: &Ctx) -> CheckResult {
    if !ctx.dev.gpus()[0].node.properties.svm_supported() {
        return skip("the GPU does not report SVM support");
    }
    // The emulator keeps SVM ranges until process exit: use a private device there.
    let dev = match ctx.private_device() {
        Ok(d) => d,
        Err(super::Outcome::Skip(_)) => ctx.dev.clone(),
        Err(o) => return Ok(o),
    };
    let len = 1 << 16;
    let host = HostPages::new(len)?;
    let (start, size) = (host.ptr as u64, len as u64);
    let gpu = dev.gpus()[0].gpu_id;
    let mut set = [
        SvmAttribute {
            type_: abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
            value: gpu,
        },
        SvmAttribute {
            type_: abi::KFD_IOCTL_SVM_ATTR_GRANULARITY,
            value: 4,
        },
        SvmAttribute {
            type_: abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
            value: abi::KFD_IOCTL_SVM_FLAG_GPU_RO,
        },
    ];
    kfd::ioctl::svm(
        dev.backend().as_ref(),
        abi::KFD_IOCTL_SVM_OP_SET_ATTR,
        start,
        size,
        &mut set,
    )
    .or_fail("SVM SET_ATTR")?;
    let got = svm_get(
        &dev,
        start,
        size,
        &[
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
            abi::KFD_IOCTL_SVM_ATTR_GRANULARITY,
            abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
        ],
    )?;
    ensure!(
        got[0] == gpu,
        "preferred location {:#x}, want {gpu:#x}",
        got[0]
    );
    ensure!(got[1] == 4, "granularity {}, want 4", got[1]);
    ensure!(
        got[2] & abi::KFD_IOCTL_SVM_FLAG_GPU_RO != 0,
        "flags {:#x} lack GPU_RO",
        got[2]
    );
    // Second half to system memory: the whole range is then mixed = undefined.
    let mut half = [SvmAttribute {
        type_: abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
        value: abi::KFD_IOCTL_SVM_LOCATION_SYSMEM,
    }];
    kfd::ioctl::svm(
        dev.backend().as_ref(),
        abi::KFD_IOCTL_SVM_OP_SET_ATTR,
        start + size / 2,
        size / 2,
        &mut half,
    )
    .or_fail("SVM SET_ATTR (second half)")?;
    let whole = svm_get(&dev, start, size, &[abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC])?;
    let first = svm_get(
        &dev,
        start,
        size / 2,
        &[abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC],
    )?;
    ensure!(
        whole[0] == abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED,
        "mixed range reads preferred location {:#x}, want undefined",
        whole[0]
    );
    ensure!(
        first[0] == gpu,
        "first half reads {:#x}, want {gpu:#x}",
        first[0]
    );
    drop(dev);
    drop(host);
    pass()
}

fn peer_vram_write(ctx: &Ctx) -> CheckResult {
    require!(ctx.need_gpus(2));
    let n = ctx.dev.gpus().len();
    for (from, to) in [(0, 1), (1, 0), (n - 1, 0)] {
        let vram = Scratch::new(&ctx.dev, MemoryKind::Device, to, 4096)?;
        // hipDeviceEnablePeerAccess: device memory reaches another GPU only through it.
        ctx.dev
            .enable_peer_access(from, to)
            .or_fail("enable_peer_access")?;
        let s = ctx.dev.create_stream(from).or_fail("create_stream")?;
        let _drain = Drain::streams(&[&s]);
        let v = 0xabc0_0000_0000_0000u64 | (from as u64) << 8 | to as u64;
        s.write_value64(vram.va(64), v, WriteValueFlags::DEFAULT)
            .or_fail("write_value64")?;
        s.synchronize().or_fail("synchronize")?;
        ctx.dev
            .disable_peer_access(from, to)
            .or_fail("disable_peer_access")?;
        let got = vram.u64(64).load(Ordering::Acquire);
        ensure!(
            got == v,
            "GPU {from} wrote {v:#x} into GPU {to}'s VRAM, read back {got:#x}"
        );
    }
    pass_with(format!("{n} GPUs"))
}
