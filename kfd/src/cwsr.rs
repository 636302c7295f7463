//! Queue buffer sizes the kernel requires: the context save/restore (CWSR) area, its
//! control stack and debugger area, and the EOP buffer, as
//! `kfd_queue_ctx_save_restore_size` (drivers/gpu/drm/amd/amdkfd/kfd_queue.c) computes
//! them from the topology. Since Linux 6.12-rc1 (the "validate user queue buffers"
//! series, 2024-07; tinygrad PR #7765 hit it as EINVAL) CREATE_QUEUE checks the sizes
//! against the node's and that the CWSR buffer object is exactly
//! `ALIGN((ctx_save_restore_size + debug_memory_size) * num_xcc, PAGE_SIZE)` bytes.
//! Whether a kernel also publishes `cwsr_size` / `ctl_stack_size` in the node's sysfs
//! properties depends on its version, and libhsakmt reads them only since late 2025
//! (ROCm/rocm-systems PR #2200, "Expose and use CWSR and Control stack sizes"), falling
//! back to its own computation: so do we. Published values win; absent ones (older
//! kernels) are computed here exactly as the kernel does.

use crate::topology::NodeProperties;

const PAGE: u64 = 4096;

fn align_up(v: u64, a: u64) -> u64 {
    v.div_ceil(a) * a
}

/// CWSR-related sizes of one GPU (per XCC unless stated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueSizes {
    /// Control stack bytes (`ctl_stack_size`; CREATE_QUEUE passes exactly this).
    pub ctl_stack_size: u32,
    /// Save area bytes = control stack + workgroup data (`cwsr_size`).
    pub cwsr_size: u32,
    /// Debugger bytes appended per XCC (`debug_memory_size`, not in sysfs).
    pub debug_memory_size: u32,
    /// EOP buffer bytes for compute queues.
    pub eop_buffer_size: u32,
    /// XCC count.
    pub num_xcc: u32,
}

impl QueueSizes {
    /// Bytes of the CWSR buffer object for a queue created with `ctx_save_restore_size`:
    /// `ALIGN((ctx_save_restore_size + debug_memory_size) * num_xcc, PAGE_SIZE)`
    /// (`kfd_queue_acquire_buffers`).
    pub fn cwsr_bo_size(&self, ctx_save_restore_size: u32) -> u64 {
        let per_xcc = u64::from(ctx_save_restore_size) + u64::from(self.debug_memory_size);
        align_up(per_xcc * u64::from(self.num_xcc.max(1)), PAGE)
    }

    /// [`QueueSizes::cwsr_bo_size`] for the minimum `ctx_save_restore_size` (`cwsr_size`).
    pub fn default_cwsr_bo_size(&self) -> u64 {
        self.cwsr_bo_size(self.cwsr_size)
    }
}

/// VGPR save bytes per CU (`kfd_queue.c`'s table by gfx version).
fn vgpr_size_per_cu(gfxv: u32) -> u64 {
    match gfxv {
        90402 | 90010 | 90008 | 90500 => 0x80000,
        110000 | 110001 | 120000 | 120001 => 0x60000,
        _ => 0x40000,
    }
}

/// The sizes for a GPU node, computed as the kernel does; where the topology publishes
/// `cwsr_size` / `ctl_stack_size` those values win (they are what the kernel checks).
/// `None` for a CPU node (gfx_target_version 0) or a GPU older than gfx8.0.1.
pub fn queue_sizes(p: &NodeProperties) -> Option<QueueSizes> {
    let gfxv = p.gfx_target_version;
    if gfxv < 80001 {
        return None;
    }
    let num_xcc = p.num_xcc.unwrap_or(1).max(1);
    let cu_num = p.simd_count.checked_div(p.simd_per_cu).unwrap_or(0) / num_xcc;
    let wave_num: u64 = if gfxv < 100100 {
        let se = p
            .array_count
            .checked_div(p.simd_arrays_per_engine)
            .unwrap_or(0);
        (u64::from(cu_num) * 40).min(u64::from(se) * 512)
    } else {
        u64::from(cu_num) * 32
    };
    let lds = if gfxv == 90500 {
        u64::from(p.lds_size_in_kb) << 10
    } else {
        0x10000
    };
    let wg_data_size = align_up(
        u64::from(cu_num) * (vgpr_size_per_cu(gfxv) + 0x4000 + lds + 0x1000),
        PAGE,
    );
    let bytes_per_wave: u64 = if gfxv >= 100100 { 12 } else { 8 };
    let mut ctl = align_up(40 + wave_num * bytes_per_wave + 8, PAGE);
    if gfxv / 10000 * 10000 == 100000 {
        ctl = ctl.min(0x7000);
    }
    let clamp = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
    let ctl_stack_size = p.ctl_stack_size.filter(|&v| v > 0).unwrap_or(clamp(ctl));
    let cwsr_size = p
        .cwsr_size
        .filter(|&v| v > 0)
        .unwrap_or(clamp(ctl + wg_data_size));
    Some(QueueSizes {
        ctl_stack_size,
        cwsr_size,
        debug_memory_size: clamp(align_up(wave_num * 32, 64)),
        eop_buffer_size: if gfxv == 80002 { 0x8000 } else { 4096 },
        num_xcc,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mi300x_matches_what_its_kernel_publishes() {
        // MI300X SPX numbers from a published topology dump (shared/data/topology):
        // cwsr_size 23203840, ctl_stack_size 12288.
        let p = NodeProperties {
            gfx_target_version: 90402,
            simd_count: 1216,
            simd_per_cu: 4,
            array_count: 32,
            simd_arrays_per_engine: 1,
            num_xcc: Some(8),
            lds_size_in_kb: 64,
            ..Default::default()
        };
        let s = queue_sizes(&p).unwrap();
        assert_eq!((s.cwsr_size, s.ctl_stack_size), (23203840, 12288));
        assert_eq!(s.num_xcc, 8);
        // 38 CUs per XCC, 1520 waves: 48640 debugger bytes per XCC.
        assert_eq!(s.debug_memory_size, 48640);
        assert_eq!(
            s.cwsr_bo_size(s.cwsr_size),
            ((23203840u64 + 48640) * 8).div_ceil(4096) * 4096
        );
    }

    #[test]
    fn rx9070xt_matches_what_its_kernel_publishes() {
        let p = NodeProperties {
            gfx_target_version: 120001,
            simd_count: 128,
            simd_per_cu: 2,
            array_count: 8,
            simd_arrays_per_engine: 2,
            lds_size_in_kb: 64,
            ..Default::default()
        };
        let s = queue_sizes(&p).unwrap();
        assert_eq!((s.cwsr_size, s.ctl_stack_size), (30699520, 28672));
    }

    #[test]
    fn published_values_win_and_cpu_nodes_have_none() {
        let p = NodeProperties {
            gfx_target_version: 90010,
            simd_count: 416,
            simd_per_cu: 4,
            array_count: 8,
            simd_arrays_per_engine: 1,
            cwsr_size: Some(0x123000),
            ctl_stack_size: Some(0x5000),
            ..Default::default()
        };
        let s = queue_sizes(&p).unwrap();
        assert_eq!((s.cwsr_size, s.ctl_stack_size), (0x123000, 0x5000));
        assert!(
            queue_sizes(&NodeProperties::default()).is_none(),
            "CPU node"
        );
    }
}
