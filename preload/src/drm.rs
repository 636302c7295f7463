//! DRM ioctls on an emulated render node: what libdrm and libdrm_amdgpu issue when
//! libhsakmt calls `amdgpu_device_initialize` (for the marketing name).
//!
//! Sources: drm_ioctl.c `drm_version`/`drm_copy_field`; amdgpu_kms.c
//! `amdgpu_info_ioctl`; the layouts of include/uapi/drm/{drm,amdgpu_drm}.h.

use kfd::abi::ioc_size;
use kfd::Backend;
use rustix::io::Errno;

use crate::state::{GpuInfo, State};
use crate::uaccess::{copy_from_user, copy_to_user};

/// `struct drm_version` (64 bytes on 64-bit).
const DRM_VERSION_SIZE: usize = 64;
/// `DRM_COMMAND_BASE + DRM_AMDGPU_INFO`.
const NR_AMDGPU_INFO: u32 = 0x40 + 0x05;
/// `struct drm_amdgpu_info` (32 bytes).
const DRM_AMDGPU_INFO_SIZE: usize = 32;

/// amdgpu's KMS interface version: 3.49 (Linux 6.1's KMS_DRIVER_MAJOR/MINOR in
/// amdgpu_drv.c); libdrm_amdgpu requires major 3.
const KMS_MAJOR: i32 = 3;
const KMS_MINOR: i32 = 49;

// AMDGPU_INFO_* queries (amdgpu_drm.h).
const INFO_ACCEL_WORKING: u32 = 0x00;
const INFO_HW_IP_COUNT: u32 = 0x03;
const INFO_TIMESTAMP: u32 = 0x05;
const INFO_FW_VERSION: u32 = 0x0e;
const INFO_VRAM_USAGE: u32 = 0x10;
const INFO_GTT_USAGE: u32 = 0x11;
const INFO_VRAM_GTT: u32 = 0x14;
const INFO_READ_MMR_REG: u32 = 0x15;
const INFO_DEV_INFO: u32 = 0x16;
const INFO_VIS_VRAM_USAGE: u32 = 0x17;
const INFO_MEMORY: u32 = 0x19;
const INFO_VRAM_LOST_COUNTER: u32 = 0x1F;

// AMDGPU_INFO_FW_* types.
const FW_GFX_MEC: u32 = 0x08;
const FW_SDMA: u32 = 0x0b;

// AMDGPU_HW_IP_* types.
const HW_IP_GFX: u32 = 0;
const HW_IP_COMPUTE: u32 = 1;
const HW_IP_DMA: u32 = 2;

/// GB_ADDR_CONFIG's dword offset, the register libdrm's `amdgpu_query_gpu_info_init`
/// reads on every family.
const MM_GB_ADDR_CONFIG: u32 = 0x263e;

/// Serve one ioctl on the render node of GPU `idx`.
pub(crate) fn ioctl(st: &State, idx: usize, req: u32, arg: u64) -> Result<(), Errno> {
    let gpu = st.gpus.get(idx).ok_or(Errno::NODEV)?;
    match req & 0xff {
        0x00 if ioc_size(req) as usize >= DRM_VERSION_SIZE => version(arg),
        NR_AMDGPU_INFO if ioc_size(req) as usize >= DRM_AMDGPU_INFO_SIZE => info(st, gpu, arg),
        nr => {
            crate::trace(format_args!(
                "drm ioctl nr {nr:#x} (req {req:#x}) on renderD{} is not modelled: EINVAL",
                gpu.render_minor
            ));
            Err(Errno::INVAL)
        }
    }
}

fn rd_u64(b: &[u8], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_ne_bytes(x)
}

fn rd_u32(b: &[u8], off: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(x)
}

/// `DRM_IOCTL_VERSION`: `drm_copy_field` copies at most the caller's length and always
/// reports the full length.
fn version(arg: u64) -> Result<(), Errno> {
    let mut v = [0u8; DRM_VERSION_SIZE];
    copy_from_user(arg, &mut v)?;
    v[0..4].copy_from_slice(&KMS_MAJOR.to_ne_bytes());
    v[4..8].copy_from_slice(&KMS_MINOR.to_ne_bytes());
    v[8..12].copy_from_slice(&0i32.to_ne_bytes());
    for (off, text) in [(16, "amdgpu"), (32, "20150101"), (48, "AMD GPU")] {
        let user_len = rd_u64(&v, off) as usize;
        let ptr = rd_u64(&v, off + 8);
        let n = user_len.min(text.len());
        if n > 0 && ptr != 0 {
            copy_to_user(ptr, &text.as_bytes()[..n])?;
        }
        v[off..off + 8].copy_from_slice(&(text.len() as u64).to_ne_bytes());
    }
    copy_to_user(arg, &v)
}

struct Out(Vec<u8>);

impl Out {
    fn new(len: usize) -> Self {
        Out(vec![0; len])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
}

fn host_memory() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, size) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64) * (size.max(0) as u64)
}

/// VRAM in use: capacity minus what `AMDKFD_IOC_AVAILABLE_MEMORY` reports.
fn vram_used(st: &State, gpu: &GpuInfo) -> u64 {
    let mut a = kfd::abi::GetAvailableMemoryArgs {
        gpu_id: gpu.gpu_id,
        ..Default::default()
    };
    match st.emu.ioctl(kfd::Ioctl::AvailableMemory(&mut a)) {
        Ok(()) => gpu.preset.vram_size.saturating_sub(a.available),
        Err(_) => 0,
    }
}

/// `DRM_IOCTL_AMDGPU_INFO` (amdgpu_kms.c `amdgpu_info_ioctl`): the answer is copied to
/// `return_pointer`, at most `return_size` bytes; an unknown query is `EINVAL`.
fn info(st: &State, gpu: &GpuInfo, arg: u64) -> Result<(), Errno> {
    let mut req = [0u8; DRM_AMDGPU_INFO_SIZE];
    copy_from_user(arg, &mut req)?;
    let ret_ptr = rd_u64(&req, 0);
    let ret_size = rd_u32(&req, 8) as usize;
    let query = rd_u32(&req, 12);
    crate::trace(format_args!("AMDGPU_INFO query {query:#x} size {ret_size}"));
    let p = &gpu.preset;
    let gtt = host_memory() / 2;
    let out = match query {
        INFO_ACCEL_WORKING => Out::new(4).u32(0, 1).0.clone(),
        INFO_HW_IP_COUNT => {
            let count = match rd_u32(&req, 16) {
                HW_IP_GFX | HW_IP_COMPUTE => 1,
                HW_IP_DMA => p.num_sdma_engines + p.num_sdma_xgmi_engines,
                _ => 0,
            };
            Out::new(4).u32(0, count).0.clone()
        }
        INFO_TIMESTAMP => {
            let ns = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            let ticks = ns * u128::from(p.gpu_clock_hz) / 1_000_000_000;
            Out::new(8).u64(0, ticks as u64).0.clone()
        }
        INFO_FW_VERSION => {
            let ver = match rd_u32(&req, 16) {
                FW_GFX_MEC => p.fw_version,
                FW_SDMA => p.sdma_fw_version,
                _ => 0,
            };
            Out::new(8).u32(0, ver).0.clone()
        }
        INFO_VRAM_USAGE | INFO_VIS_VRAM_USAGE => Out::new(8).u64(0, vram_used(st, gpu)).0.clone(),
        INFO_GTT_USAGE | INFO_VRAM_LOST_COUNTER => Out::new(8).0,
        INFO_VRAM_GTT => Out::new(24)
            .u64(0, p.vram_size)
            .u64(8, p.vram_size)
            .u64(16, gtt)
            .0
            .clone(),
        INFO_MEMORY => {
            // Three drm_amdgpu_heap_info {total, usable, usage, max_allocation}: vram,
            // cpu_accessible_vram (all of it: large BAR), gtt.
            let used = vram_used(st, gpu);
            let mut o = Out::new(96);
            for h in 0..2 {
                o.u64(h * 32, p.vram_size)
                    .u64(h * 32 + 8, p.vram_size)
                    .u64(h * 32 + 16, used)
                    .u64(h * 32 + 24, p.vram_size / 4 * 3);
            }
            o.u64(64, gtt).u64(72, gtt).u64(88, gtt / 4 * 3);
            o.0
        }
        INFO_READ_MMR_REG => {
            // amdgpu_kms.c: at most 128 registers, only whitelisted ones; the emulator
            // models GB_ADDR_CONFIG (as 0) and nothing else.
            let (reg, count) = (rd_u32(&req, 16), rd_u32(&req, 20));
            if reg != MM_GB_ADDR_CONFIG || count != 1 {
                crate::trace(format_args!(
                    "AMDGPU_INFO_READ_MMR_REG {reg:#x} x{count} is not modelled: EINVAL"
                ));
                return Err(Errno::INVAL);
            }
            Out::new(4).0
        }
        INFO_DEV_INFO => dev_info(gpu),
        q => {
            crate::trace(format_args!(
                "AMDGPU_INFO query {q:#x} is not modelled: EINVAL"
            ));
            return Err(Errno::INVAL);
        }
    };
    let n = ret_size.min(out.len());
    copy_to_user(ret_ptr, &out[..n])
}

/// `struct drm_amdgpu_info_device` up to `min_memory_clock` (384 bytes), filled as
/// amdgpu_kms.c does from the preset.
fn dev_info(gpu: &GpuInfo) -> Vec<u8> {
    let p = &gpu.preset;
    let major = p.gfx_target_version / 10000;
    // amdgpu_drm.h AMDGPU_FAMILY_*: AI (gfx9) 141, NV (gfx10) 143, GC_11_0_0 145,
    // GC_12_0_0 152.
    let family = match major {
        9 => 141,
        10 => 143,
        11 => 145,
        12 => 152,
        _ => 0,
    };
    // AMDGPU_VRAM_TYPE_HBM 6 for the Instinct boards, GDDR6 9 for the Radeons.
    let vram_type = if major == 9 { 6 } else { 9 };
    let se = (p.array_count / p.simd_arrays_per_engine.max(1)).max(1);
    let mut o = Out::new(384);
    o.u32(0, p.device_id)
        .u32(16, family)
        .u32(20, se)
        .u32(24, p.simd_arrays_per_engine)
        .u32(28, (p.gpu_clock_hz / 1000) as u32)
        .u64(32, u64::from(p.max_engine_clk_fcompute) * 1000)
        .u64(40, u64::from(p.mem_clk_max) * 1000)
        .u32(48, p.cu_count())
        // virtual_address_offset = AMDGPU_VA_RESERVED_SIZE (2 MiB), _max = the GMC hole
        // start (2^47), alignment = page, pte_fragment_size = 2 MiB, gart page = 4 KiB.
        .u64(144, 2 << 20)
        .u64(152, 1 << 47)
        .u32(160, 4096)
        .u32(164, 2 << 20)
        .u32(168, 4096)
        .u32(176, vram_type)
        .u32(180, p.vram_width)
        .u32(240, p.wave_front_size)
        .u32(244, 256)
        .u32(248, p.cu_per_simd_array)
        // high_va_offset = AMDGPU_GMC_HOLE_END, high_va_max = HOLE_END | 2^47.
        .u64(336, 0xffff_8000_0000_0000)
        .u64(344, 0xffff_8000_0000_0000 | (1 << 47))
        .u64(368, u64::from(p.max_engine_clk_fcompute) * 1000 / 4)
        .u64(376, u64::from(p.mem_clk_max) * 1000 / 4);
    o.0
}
