//! The emulated topology: a CPU node 0 and one GPU node per preset, served as an in-memory sysfs
//! tree and parsed back by `kfd::topology` (the same code that reads real hardware).

use std::collections::HashSet;
use std::path::Path;

use kfd::topology::{
    Cache, IoLink, MemBank, Node, NodeProperties, SysfsTree, SystemProperties, Topology,
    HEAP_TYPE_FB_PRIVATE, HEAP_TYPE_FB_PUBLIC, HEAP_TYPE_SYSTEM, IOLINK_TYPE_PCIEXPRESS,
};

use crate::presets::Preset;

/// What the topology builder decided for one GPU.
#[derive(Debug, Clone)]
pub(crate) struct GpuPlacement {
    pub(crate) gpu_id: u32,
    pub(crate) render_minor: u32,
}

/// CRC-16 as the kernel's `crc16()` (poly 0x8005, reflected, init 0).
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in data {
        crc ^= u16::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xa001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

fn host_memory_bytes() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                let rest = l.strip_prefix("MemTotal:")?;
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(64 << 30)
}

/// Build the topology for `presets`, returning it with the per-GPU placements.
pub(crate) fn build(presets: &[Preset]) -> (Topology, Vec<GpuPlacement>) {
    let mut used_ids = HashSet::new();
    let mut used_locations = HashSet::new();
    let mut placements = Vec::new();
    let mut nodes = Vec::new();
    let cpu_cores = std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1);

    for (i, p) in presets.iter().enumerate() {
        let node_id = i as u32 + 1;
        let mut location_id = p.location_id.wrapping_add((i as u32) << 8) & 0xffff;
        while !used_locations.insert(location_id) {
            location_id = location_id.wrapping_add(0x100) & 0xffff;
        }
        // The kernel hashes PCI and geometry facts into a 16-bit id (kfd_topology.c
        // kfd_generate_gpu_id), avoiding 0 and ids already in use.
        let mut buf = Vec::new();
        for v in [location_id, p.device_id, p.simd_count, p.num_xcc, node_id] {
            buf.extend_from_slice(&v.to_le_bytes());
        }
        buf.extend_from_slice(&p.vram_size.to_le_bytes());
        let mut gpu_id = u32::from(crc16(&buf));
        while gpu_id == 0 || used_ids.contains(&gpu_id) {
            gpu_id = (gpu_id + 1) & 0xffff;
        }
        used_ids.insert(gpu_id);
        let render_minor = 128 + i as u32;
        let cwsr = p.cwsr();
        let unique_id = {
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in buf.iter().chain(p.name.as_bytes()) {
                h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
            }
            h
        };
        let properties = NodeProperties {
            cpu_cores_count: 0,
            simd_count: p.simd_count,
            mem_banks_count: 1,
            caches_count: gpu_caches(p, 0).len() as u32,
            io_links_count: 1,
            p2p_links_count: Some(0),
            cpu_core_id_base: 0,
            simd_id_base: p.simd_id_base.wrapping_add((i as u32) << 8),
            max_waves_per_simd: p.max_waves_per_simd,
            lds_size_in_kb: p.lds_size_in_kb,
            gds_size_in_kb: 0,
            num_gws: 64,
            wave_front_size: p.wave_front_size,
            array_count: p.array_count,
            simd_arrays_per_engine: p.simd_arrays_per_engine,
            cu_per_simd_array: p.cu_per_simd_array,
            simd_per_cu: p.simd_per_cu,
            max_slots_scratch_cu: 32,
            gfx_target_version: p.gfx_target_version,
            vendor_id: 0x1002,
            device_id: p.device_id,
            location_id,
            domain: 0,
            drm_render_minor: render_minor,
            hive_id: 0,
            num_sdma_engines: p.num_sdma_engines,
            num_sdma_xgmi_engines: p.num_sdma_xgmi_engines,
            num_sdma_queues_per_engine: p.num_sdma_queues_per_engine,
            num_cp_queues: p.num_cp_queues,
            cwsr_size: cwsr.map(|c| c.cwsr_size),
            ctl_stack_size: cwsr.map(|c| c.ctl_stack_size),
            max_engine_clk_fcompute: Some(p.max_engine_clk_fcompute),
            local_mem_size: Some(0),
            fw_version: Some(p.fw_version),
            capability: Some(p.capability),
            capability2: p.capability2,
            debug_prop: Some(p.debug_prop),
            sdma_fw_version: Some(p.sdma_fw_version),
            unique_id: Some(unique_id),
            num_xcc: Some(p.num_xcc),
            family_id: None,
            max_engine_clk_ccompute: 2400,
            extra: Vec::new(),
        };
        nodes.push(Node {
            id: node_id,
            gpu_id,
            name: p.marketing_name.to_owned(),
            properties,
            mem_banks: vec![MemBank {
                // kfd_crat.c: FB_PUBLIC when all VRAM is CPU-visible
                // (`local_mem_size_private == 0`), else FB_PRIVATE (small BAR).
                heap_type: if p.is_small_bar() {
                    HEAP_TYPE_FB_PRIVATE
                } else {
                    HEAP_TYPE_FB_PUBLIC
                },
                size_in_bytes: p.vram_size,
                flags: 0,
                width: p.vram_width,
                mem_clk_max: p.mem_clk_max,
                extra: Vec::new(),
                used_memory: Some(0),
            }],
            caches: gpu_caches(p, p.simd_id_base.wrapping_add((i as u32) << 8)),
            io_links: vec![pcie_link(node_id, 0, p.num_sdma_engines)],
            p2p_links: Vec::new(),
        });
        placements.push(GpuPlacement {
            gpu_id,
            render_minor,
        });
    }

    let cpu = Node {
        id: 0,
        gpu_id: 0,
        name: String::new(),
        properties: NodeProperties {
            cpu_cores_count: cpu_cores,
            mem_banks_count: 1,
            io_links_count: presets.len() as u32,
            p2p_links_count: Some(0),
            max_engine_clk_ccompute: 2400,
            ..Default::default()
        },
        mem_banks: vec![MemBank {
            heap_type: HEAP_TYPE_SYSTEM,
            size_in_bytes: host_memory_bytes(),
            flags: 0,
            width: 64,
            mem_clk_max: 0,
            extra: Vec::new(),
            used_memory: None,
        }],
        caches: Vec::new(),
        io_links: presets
            .iter()
            .enumerate()
            .map(|(i, p)| pcie_link(0, i as u32 + 1, p.num_sdma_engines))
            .collect(),
        p2p_links: Vec::new(),
    };
    nodes.insert(0, cpu);
    let topo = Topology {
        generation_id: 1,
        system: SystemProperties::default(),
        nodes,
        inaccessible_nodes: Vec::new(),
    };
    (topo, placements)
}

/// The GPU's data caches as KFD publishes them under `caches/N/properties` (one entry
/// per level here; the kernel publishes one per group of CUs sharing the cache). Sizes
/// from kfd_crat.c (`aldebaran_cache_info` for gfx90a; gfx942/gfx11/gfx12 come from the
/// IP discovery gfx config: TCP, GL2, MALL) and AMD's published specifications. ROCr
/// asserts a GPU node has caches (amd_gpu_agent.cpp "GPU cache info missing").
fn gpu_caches(p: &Preset, simd_id_base: u32) -> Vec<Cache> {
    // (level, size KiB, line bytes); type = DATA | HSACU (kfd_crat.h HSA_CACHE_TYPE_*).
    let levels: &[(u32, u32, u32)] = match p.gfx_target_version / 100 {
        904 => &[(1, 16, 128), (2, 4096, 128), (3, 262_144, 64)],
        900 => &[(1, 16, 64), (2, 8192, 128)],
        1100 => &[(1, 32, 128), (2, 6144, 128), (3, 98_304, 64)],
        1200 => &[(1, 32, 128), (2, 8192, 128), (3, 65_536, 64)],
        _ => &[],
    };
    levels
        .iter()
        .map(|&(level, size, line)| Cache {
            processor_id_low: simd_id_base,
            level,
            size,
            cache_line_size: line,
            cache_lines_per_tag: 1,
            association: 16,
            latency: 1,
            cache_type: 0x9,
            sibling_map: String::new(),
            extra: Vec::new(),
        })
        .collect()
}

fn pcie_link(from: u32, to: u32, sdma: u32) -> IoLink {
    IoLink {
        link_type: IOLINK_TYPE_PCIEXPRESS,
        version_major: 0,
        version_minor: 0,
        node_from: from,
        node_to: to,
        weight: 20,
        min_latency: 0,
        max_latency: 0,
        min_bandwidth: 312,
        max_bandwidth: 32000,
        recommended_transfer_size: 0,
        recommended_sdma_engine_id_mask: Some((1u32 << sdma.min(31)) - 1),
        flags: 1,
        extra: Vec::new(),
    }
}

/// Render `topo` as an in-memory sysfs tree (nothing is written to disk, so nothing is
/// left behind by a panic, a kill or an abort) and parse it back with
/// `Topology::from_source`, as a real tree is parsed.
pub(crate) fn serve(topo: &Topology) -> std::io::Result<(SysfsTree, Topology)> {
    let tree = topo.to_tree()?;
    let parsed = Topology::from_source(&tree, Path::new(""))
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
    Ok((tree, parsed))
}
