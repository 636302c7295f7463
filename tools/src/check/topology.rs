//! topology: the KFD version, GPU nodes, apertures and clock counters.

use std::collections::HashSet;

use super::{ensure, pass_with, Check, CheckResult, Ctx, OrFail};

/// The topology checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "topology.kfd_version",
            what: "GET_VERSION reports 1.x with x >= 5 and matches what the runtime opened",
            run: kfd_version,
        },
        Check {
            name: "topology.gpu_nodes",
            what: "every GPU node has a unique non-zero gpu_id, a gfx9..gfx12 target, CUs, SIMDs, wave size and VRAM",
            run: gpu_nodes,
        },
        Check {
            name: "topology.apertures",
            what: "GET_PROCESS_APERTURES_NEW has one entry per GPU with ordered, non-empty LDS/scratch/GPUVM ranges",
            run: apertures,
        },
        Check {
            name: "topology.clock_counters",
            what: "GET_CLOCK_COUNTERS: GPU and system counters advance monotonically; system clock at 1 GHz",
            run: clock_counters,
        },
    ]
}

fn kfd_version(ctx: &Ctx) -> CheckResult {
    let v = kfd::ioctl::get_version(ctx.backend()).or_fail("GET_VERSION")?;
    ensure!(
        v.major_version == 1,
        "major version {} (want 1)",
        v.major_version
    );
    ensure!(
        v.minor_version >= kfdrt::raw::MIN_KFD_MINOR,
        "minor version {} < {}",
        v.minor_version,
        kfdrt::raw::MIN_KFD_MINOR
    );
    ensure!(
        (v.major_version, v.minor_version) == ctx.dev.kfd_version(),
        "GET_VERSION {}.{} differs from the runtime's {:?}",
        v.major_version,
        v.minor_version,
        ctx.dev.kfd_version()
    );
    pass_with(format!("KFD {}.{}", v.major_version, v.minor_version))
}

fn gpu_nodes(ctx: &Ctx) -> CheckResult {
    let topo = ctx.backend().topology();
    let nodes: Vec<_> = topo.gpu_nodes().collect();
    ensure!(!nodes.is_empty(), "the topology has no GPU node");
    ensure!(
        nodes.len() == ctx.dev.gpus().len(),
        "{} GPU nodes but the runtime opened {} GPUs",
        nodes.len(),
        ctx.dev.gpus().len()
    );
    let mut ids = HashSet::new();
    for n in &nodes {
        let p = &n.properties;
        ensure!(n.gpu_id != 0, "a GPU node has gpu_id 0");
        ensure!(ids.insert(n.gpu_id), "gpu_id {:#x} appears twice", n.gpu_id);
        ensure!(
            pm4::GfxFamily::from_gfx_target_version(p.gfx_target_version).is_some(),
            "gpu {:#x}: gfx_target_version {} is not gfx9..gfx12",
            n.gpu_id,
            p.gfx_target_version
        );
        ensure!(n.cu_count() > 0, "gpu {:#x}: no compute units", n.gpu_id);
        ensure!(
            p.simd_count >= n.cu_count() && p.simd_per_cu > 0,
            "gpu {:#x}: simd_count {} < CUs {}",
            n.gpu_id,
            p.simd_count,
            n.cu_count()
        );
        ensure!(
            matches!(p.wave_front_size, 32 | 64),
            "gpu {:#x}: wave size {}",
            n.gpu_id,
            p.wave_front_size
        );
        ensure!(
            matches!(n.doorbell_size(), 4 | 8),
            "gpu {:#x}: doorbell size {}",
            n.gpu_id,
            n.doorbell_size()
        );
        ensure!(n.vram_size() > 0, "gpu {:#x}: no VRAM bank", n.gpu_id);
    }
    pass_with(format!("{} GPU(s)", nodes.len()))
}

fn apertures(ctx: &Ctx) -> CheckResult {
    let ap = kfd::ioctl::get_process_apertures_new(ctx.backend())
        .or_fail("GET_PROCESS_APERTURES_NEW")?;
    ensure!(
        ap.len() == ctx.dev.gpus().len(),
        "{} aperture entries for {} GPUs",
        ap.len(),
        ctx.dev.gpus().len()
    );
    for g in ctx.dev.gpus() {
        let a = ap
            .iter()
            .find(|a| a.gpu_id == g.gpu_id)
            .ok_or_else(|| format!("no aperture entry for gpu {:#x}", g.gpu_id))?;
        for (what, base, limit) in [
            ("LDS", a.lds_base, a.lds_limit),
            ("scratch", a.scratch_base, a.scratch_limit),
            ("GPUVM", a.gpuvm_base, a.gpuvm_limit),
        ] {
            ensure!(
                base < limit,
                "gpu {:#x}: {what} aperture {base:#x}..{limit:#x} is empty",
                g.gpu_id
            );
        }
        ensure!(
            a.gpuvm_limit >= (1 << 40),
            "gpu {:#x}: GPUVM limit {:#x} below 1 TiB",
            g.gpu_id,
            a.gpuvm_limit
        );
    }
    pass_with(format!("{} entries", ap.len()))
}

fn clock_counters(ctx: &Ctx) -> CheckResult {
    for g in ctx.dev.gpus() {
        let a = kfd::ioctl::get_clock_counters(ctx.backend(), g.gpu_id)
            .or_fail("GET_CLOCK_COUNTERS")?;
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = kfd::ioctl::get_clock_counters(ctx.backend(), g.gpu_id)
            .or_fail("GET_CLOCK_COUNTERS")?;
        ensure!(
            a.system_clock_freq == 1_000_000_000,
            "system_clock_freq {} (want 1 GHz)",
            a.system_clock_freq
        );
        ensure!(
            b.gpu_clock_counter > a.gpu_clock_counter,
            "gpu {:#x}: GPU counter did not advance in 2 ms ({} -> {})",
            g.gpu_id,
            a.gpu_clock_counter,
            b.gpu_clock_counter
        );
        let dsys = b
            .system_clock_counter
            .saturating_sub(a.system_clock_counter);
        ensure!(
            dsys >= 2_000_000,
            "gpu {:#x}: system counter advanced {dsys} ns over a 2 ms sleep",
            g.gpu_id
        );
    }
    pass_with(format!("{} GPU(s)", ctx.dev.gpus().len()))
}
