//! `kfdrt info`: what rocminfo prints that matters, per GPU agent.

use std::fmt::Write as _;
use std::path::Path;

use kfd::topology::{MemBank, Node, NodeProperties, Topology, TopologyError};

/// What `info` reports about the device as a whole.
pub struct InfoSource {
    /// "hardware", "emulated" or "sysfs DIR".
    pub origin: String,
    /// The KFD interface version, when a device was opened.
    pub kfd_version: Option<(u32, u32)>,
    /// The topology.
    pub topology: Topology,
    /// What the reader skipped or could not know (printed on stderr).
    pub notes: Vec<String>,
}

/// Why `--sysfs DIR` could not be read.
#[derive(Debug)]
pub enum SysfsError {
    /// DIR or a file in it is missing or unreadable (exit 2: a bad input path).
    Unreadable(String),
    /// A file is there but its contents are malformed (exit 3).
    Malformed(String),
}

impl SysfsError {
    fn from_topology(e: TopologyError) -> Self {
        match e {
            TopologyError::MissingFile { .. } | TopologyError::Io { .. } => {
                SysfsError::Unreadable(e.to_string())
            }
            _ => SysfsError::Malformed(e.to_string()),
        }
    }
}

impl InfoSource {
    /// Read sysfs-format topology (no KFD calls): a whole tree (`system_properties`,
    /// `nodes/N/`) or a single node directory as posted in bug reports (`properties`,
    /// optionally `name`, `gpu_id`, `mem_banks/M/properties` or a flat
    /// `mem_banks_0_properties`).
    pub fn from_sysfs(dir: &Path) -> Result<Self, SysfsError> {
        let meta = std::fs::metadata(dir)
            .map_err(|e| SysfsError::Unreadable(format!("cannot read it: {e}")))?;
        if !meta.is_dir() {
            return Err(SysfsError::Unreadable(
                "not a directory (give the topology directory or one node's directory)".into(),
            ));
        }
        if !dir.join("system_properties").exists() && dir.join("properties").is_file() {
            return read_node_dir(dir);
        }
        let topology = Topology::from_sysfs(dir).map_err(SysfsError::from_topology)?;
        Ok(InfoSource {
            origin: format!("sysfs {}", dir.display()),
            kfd_version: None,
            topology,
            notes: Vec::new(),
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
            notes: Vec::new(),
        })
    }
}

/// Keep the `key value` lines whose value is a decimal number; the others (template
/// placeholders such as `drm_render_minor {}` in posted dumps) become notes.
fn numeric_lines(text: &str, file: &Path, notes: &mut Vec<String>) -> String {
    let mut out = String::new();
    for (i, line) in text.lines().enumerate() {
        let mut f = line.split_ascii_whitespace();
        match (f.next(), f.next(), f.next()) {
            (None, ..) => continue,
            (Some(_), Some(v), None) if v.bytes().all(|b| b.is_ascii_digit()) => {
                out.push_str(line.trim());
                out.push('\n');
            }
            (Some(k), Some(_), None) => {
                notes.push(format!(
                    "{}:{}: {:?} is not a number (a template placeholder?): shown as 0",
                    file.display(),
                    i + 1,
                    line.trim()
                ));
                out.push_str(k);
                out.push_str(" 0\n");
            }
            _ => notes.push(format!(
                "{}:{}: ignored {:?}: not `key value`",
                file.display(),
                i + 1,
                line.trim()
            )),
        }
    }
    out
}

fn read_text(path: &Path) -> Result<Option<String>, SysfsError> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(SysfsError::Unreadable(format!(
            "{}: cannot read it: {e}",
            path.display()
        ))),
    }
}

/// One node directory as posted in bug reports.
fn read_node_dir(dir: &Path) -> Result<InfoSource, SysfsError> {
    let mut notes = Vec::new();
    let props_path = dir.join("properties");
    let text = read_text(&props_path)?.unwrap_or_default();
    let mut numeric = numeric_lines(&text, &props_path, &mut notes);
    // Posted dumps are often partial: a missing key is shown as 0, with a note.
    let properties = loop {
        match NodeProperties::parse(numeric.as_bytes(), &props_path) {
            Ok(p) => break p,
            Err(TopologyError::MissingKey { key, .. })
                if notes.len() <= NodeProperties::KEYS.len() =>
            {
                notes.push(format!(
                    "{}: no `{key}` line: shown as 0",
                    props_path.display()
                ));
                numeric.push_str(&format!("{key} 0\n"));
            }
            Err(e) => return Err(SysfsError::from_topology(e)),
        }
    };
    let name = read_text(&dir.join("name"))?
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let gpu_id = match read_text(&dir.join("gpu_id"))? {
        Some(t) => t.trim().parse().map_err(|_| {
            SysfsError::Malformed(format!(
                "{}: {:?} is not a number",
                dir.join("gpu_id").display(),
                t.trim()
            ))
        })?,
        None => {
            notes.push("no gpu_id file: gpu_id shown as 0".into());
            0
        }
    };
    let mut mem_banks = Vec::new();
    let mut bank_files: Vec<(u32, std::path::PathBuf)> = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir.join("mem_banks")) {
        for e in rd.flatten() {
            if let Ok(i) = e.file_name().to_string_lossy().parse::<u32>() {
                bank_files.push((i, e.path().join("properties")));
            }
        }
    }
    if bank_files.is_empty() && dir.join("mem_banks_0_properties").is_file() {
        bank_files.push((0, dir.join("mem_banks_0_properties")));
    }
    bank_files.sort();
    for (_, f) in &bank_files {
        if let Some(t) = read_text(f)? {
            let numeric = numeric_lines(&t, f, &mut notes);
            mem_banks
                .push(MemBank::parse(numeric.as_bytes(), f).map_err(SysfsError::from_topology)?);
        }
    }
    if mem_banks.is_empty() && properties.mem_banks_count > 0 {
        notes.push(format!(
            "properties lists {} memory bank(s) but the directory has no mem_banks/: VRAM unknown",
            properties.mem_banks_count
        ));
    }
    let node = Node {
        id: dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        gpu_id,
        name,
        properties,
        mem_banks,
        ..Default::default()
    };
    if !node.properties.has_gpu_cores() {
        notes.push("the node has no GPU cores (simd_count 0): a CPU node".into());
    }
    Ok(InfoSource {
        origin: format!(
            "sysfs node directory {} (one node, as posted)",
            dir.display()
        ),
        kfd_version: None,
        topology: Topology {
            nodes: vec![node],
            ..Default::default()
        },
        notes,
    })
}

/// VRAM bytes, `None` when the node lists memory banks that were not read (a posted
/// node directory without `mem_banks/`).
fn vram_bytes(n: &Node) -> Option<u64> {
    (n.mem_banks.len() as u64 >= u64::from(n.properties.mem_banks_count)).then(|| n.vram_size())
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
    let vram = match vram_bytes(n) {
        Some(b) => gib(b),
        None => "unknown (the node lists memory banks the input does not have)".into(),
    };
    let _ = writeln!(out, "  VRAM:                {vram}");
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

/// The nodes to report: GPU nodes, and in a single node directory without a `gpu_id`
/// file, the node when it has GPU cores.
fn agents(src: &InfoSource) -> Vec<&Node> {
    src.topology
        .nodes
        .iter()
        .filter(|n| n.is_gpu() || n.properties.has_gpu_cores())
        .collect()
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
    let gpus = agents(src);
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
    let agents: Vec<serde_json::Value> = agents(src)
        .into_iter()
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
                "vram_bytes": vram_bytes(n),
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
