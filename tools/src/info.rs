//! `kfdrt info`: what rocminfo prints that matters, per GPU agent.

use std::fmt::Write as _;
use std::path::Path;

use kfd::topology::{Node, Topology};

/// What `info` reports about the device as a whole.
pub struct InfoSource {
    /// "hardware", "emulated" or "sysfs DIR".
    pub origin: String,
    /// The KFD interface version, when a device was opened.
    pub kfd_version: Option<(u32, u32)>,
    /// The topology.
    pub topology: Topology,
}

impl InfoSource {
    /// Read only a sysfs-format topology tree (no KFD calls).
    pub fn from_sysfs(dir: &Path) -> Result<Self, String> {
        let topology = Topology::from_sysfs(dir).map_err(|e| format!("reading topology: {e}"))?;
        Ok(InfoSource {
            origin: format!("sysfs {}", dir.display()),
            kfd_version: None,
            topology,
        })
    }

    /// Ask an opened device.
    pub fn from_backend(b: &dyn kfd::Backend) -> Result<Self, String> {
        let v = kfd::ioctl::get_version(b).map_err(|e| e.to_string())?;
        let origin = match b.kind() {
            kfd::BackendKind::Hardware => "hardware (/dev/kfd)".to_string(),
            kfd::BackendKind::Emulated => "emulated device (kfd-emu)".to_string(),
        };
        Ok(InfoSource {
            origin,
            kfd_version: Some((v.major_version, v.minor_version)),
            topology: b.topology().clone(),
        })
    }
}

fn gib(bytes: u64) -> String {
    format!(
        "{:.1} GiB ({} bytes)",
        bytes as f64 / (1u64 << 30) as f64,
        bytes
    )
}

fn agent_text(out: &mut String, n: &Node) {
    let p = &n.properties;
    let _ = writeln!(
        out,
        "Agent {} (node {}, gpu_id {:#06x})",
        n.name, n.id, n.gpu_id
    );
    let _ = writeln!(
        out,
        "  gfx target:          {}",
        n.gfx_target_name().unwrap_or_else(|| "unknown".into())
    );
    let _ = writeln!(out, "  gfx_target_version:  {}", p.gfx_target_version);
    let _ = writeln!(
        out,
        "  device id:           {:#06x} (vendor {:#06x})",
        p.device_id, p.vendor_id
    );
    let _ = writeln!(out, "  compute units:       {}", n.cu_count());
    let _ = writeln!(
        out,
        "  SIMDs:               {} ({} per CU)",
        p.simd_count, p.simd_per_cu
    );
    let _ = writeln!(out, "  wavefront size:      {}", p.wave_front_size);
    let _ = writeln!(out, "  max waves per SIMD:  {}", p.max_waves_per_simd);
    let _ = writeln!(out, "  XCCs:                {}", p.xcc_count());
    let _ = writeln!(
        out,
        "  shader arrays:       {} ({} per engine, {} CU slots each)",
        p.array_count, p.simd_arrays_per_engine, p.cu_per_simd_array
    );
    let _ = writeln!(out, "  LDS:                 {} KiB", p.lds_size_in_kb);
    let _ = writeln!(out, "  VRAM:                {}", gib(n.vram_size()));
    let _ = writeln!(
        out,
        "  SDMA engines:        {} PCIe + {} XGMI, {} queues each",
        p.num_sdma_engines, p.num_sdma_xgmi_engines, p.num_sdma_queues_per_engine
    );
    let _ = writeln!(out, "  CP queues:           {}", p.num_cp_queues);
    let _ = writeln!(
        out,
        "  doorbells:           {:?}, {} bytes each",
        p.doorbell_type(),
        p.doorbell_size()
    );
    let cwsr = match (p.cwsr_size, p.ctl_stack_size) {
        (Some(c), Some(s)) => format!("{c:#x} bytes, control stack {s:#x}"),
        _ => "not reported by this kernel".into(),
    };
    let _ = writeln!(out, "  CWSR area:           {cwsr}");
    let _ = writeln!(
        out,
        "  SVM:                 {}",
        if p.svm_supported() {
            "supported"
        } else {
            "not supported"
        }
    );
    if let (Some(mec), Some(sdma)) = (p.mec_ucode_version(), p.sdma_ucode_version()) {
        let _ = writeln!(out, "  firmware:            MEC {mec}, SDMA {sdma}");
    }
    let _ = writeln!(
        out,
        "  PCI location:        domain {:#x} location {:#x}",
        p.domain, p.location_id
    );
    let _ = writeln!(
        out,
        "  render node:         /dev/dri/renderD{}",
        p.drm_render_minor
    );
    let _ = writeln!(out, "  hive id:             {:#x}", p.hive_id);
}

/// Human-readable report.
pub fn render_text(src: &InfoSource) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Device source:         {}", src.origin);
    match src.kfd_version {
        Some((a, b)) => {
            let _ = writeln!(out, "KFD interface version: {a}.{b}");
        }
        None => {
            let _ = writeln!(out, "KFD interface version: n/a (topology only)");
        }
    }
    let gpus: Vec<&Node> = src.topology.gpu_nodes().collect();
    let _ = writeln!(
        out,
        "Nodes:                 {} ({} CPU, {} GPU)",
        src.topology.nodes.len(),
        src.topology.nodes.len() - gpus.len(),
        gpus.len()
    );
    for n in gpus {
        out.push('\n');
        agent_text(&mut out, n);
    }
    out
}

/// JSON report for scripts.
pub fn render_json(src: &InfoSource) -> String {
    let agents: Vec<serde_json::Value> = src
        .topology
        .gpu_nodes()
        .map(|n| {
            let p = &n.properties;
            serde_json::json!({
                "node": n.id,
                "gpu_id": n.gpu_id,
                "name": n.name,
                "gfx_target": n.gfx_target_name(),
                "gfx_target_version": p.gfx_target_version,
                "device_id": p.device_id,
                "compute_units": n.cu_count(),
                "simd_count": p.simd_count,
                "simd_per_cu": p.simd_per_cu,
                "wave_front_size": p.wave_front_size,
                "num_xcc": p.xcc_count(),
                "vram_bytes": n.vram_size(),
                "lds_kib": p.lds_size_in_kb,
                "num_sdma_engines": p.num_sdma_engines,
                "num_sdma_xgmi_engines": p.num_sdma_xgmi_engines,
                "num_sdma_queues_per_engine": p.num_sdma_queues_per_engine,
                "num_cp_queues": p.num_cp_queues,
                "doorbell_size": p.doorbell_size(),
                "cwsr_size": p.cwsr_size,
                "ctl_stack_size": p.ctl_stack_size,
                "svm_supported": p.svm_supported(),
                "drm_render_minor": p.drm_render_minor,
            })
        })
        .collect();
    let v = serde_json::json!({
        "source": src.origin,
        "kfd_version": src.kfd_version.map(|(a, b)| format!("{a}.{b}")),
        "agents": agents,
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}
