//! Tests of `kfd::topology`: realistic trees (CPU, MI210 gfx90a, MI300X gfx942 SPX,
//! RX 7900 XTX gfx1100), typed values, unknown-key preservation, sysfs round trips,
//! every error kind, and no panics on arbitrary input.
//!
//! Fixture numbers come from public KFD sysfs dumps (ROCm k8s-device-plugin MI210
//! and MI308X test trees, rocprofiler-sdk's MI300X capture, tinygrad's RX 7900 XTX
//! mock, an MI300A host's CPU nodes); the trees are built here, in code.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use kfd::topology::*;
use proptest::prelude::*;

// ---------------------------------------------------------------------------------
// Temporary trees
// ---------------------------------------------------------------------------------

/// A unique directory under the system temp dir, removed on drop.
struct TempTree {
    root: PathBuf,
}

impl TempTree {
    fn new(tag: &str) -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!(
            "kfd-topology-test-{}-{tag}-{n}",
            std::process::id()
        ));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(&root).unwrap();
        TempTree { root }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn write(&self, rel: &str, contents: impl AsRef<[u8]>) {
        let p = self.path(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, contents).unwrap();
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

/// `key value` lines, each ending in a newline, as the kernel prints them.
fn text(pairs: &[(&str, u64)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
}

// ---------------------------------------------------------------------------------
// Fixture data
// ---------------------------------------------------------------------------------

const MI210_GPU_ID: u64 = 52712;
const MI300X_GPU_ID: u64 = 24248;
const RX7900XTX_GPU_ID: u64 = 7261;

fn cpu_node_props() -> Vec<(&'static str, u64)> {
    vec![
        ("cpu_cores_count", 48),
        ("simd_count", 0),
        ("mem_banks_count", 1),
        ("caches_count", 0),
        ("io_links_count", 3),
        ("p2p_links_count", 0),
        ("cpu_core_id_base", 0),
        ("simd_id_base", 0),
        ("max_waves_per_simd", 0),
        ("lds_size_in_kb", 0),
        ("gds_size_in_kb", 0),
        ("num_gws", 0),
        ("wave_front_size", 0),
        ("array_count", 0),
        ("simd_arrays_per_engine", 0),
        ("cu_per_simd_array", 0),
        ("simd_per_cu", 0),
        ("max_slots_scratch_cu", 0),
        ("gfx_target_version", 0),
        ("vendor_id", 0),
        ("device_id", 0),
        ("location_id", 0),
        ("domain", 0),
        ("drm_render_minor", 0),
        ("hive_id", 0),
        ("num_sdma_engines", 0),
        ("num_sdma_xgmi_engines", 0),
        ("num_sdma_queues_per_engine", 0),
        ("num_cp_queues", 0),
        ("max_engine_clk_ccompute", 3700),
    ]
}

fn mi210_props() -> Vec<(&'static str, u64)> {
    vec![
        ("cpu_cores_count", 0),
        ("simd_count", 416),
        ("mem_banks_count", 1),
        ("caches_count", 217),
        ("io_links_count", 4),
        ("p2p_links_count", 5),
        ("cpu_core_id_base", 0),
        ("simd_id_base", 2147487744),
        ("max_waves_per_simd", 8),
        ("lds_size_in_kb", 64),
        ("gds_size_in_kb", 0),
        ("num_gws", 64),
        ("wave_front_size", 64),
        ("array_count", 8),
        ("simd_arrays_per_engine", 1),
        ("cu_per_simd_array", 14),
        ("simd_per_cu", 4),
        ("max_slots_scratch_cu", 32),
        ("gfx_target_version", 90010),
        ("vendor_id", 4098),
        ("device_id", 29711),
        ("location_id", 25344),
        ("domain", 0),
        ("drm_render_minor", 128),
        ("hive_id", 12609507387757274807),
        ("num_sdma_engines", 2),
        ("num_sdma_xgmi_engines", 3),
        ("num_sdma_queues_per_engine", 8),
        ("num_cp_queues", 24),
        ("max_engine_clk_fcompute", 1700),
        ("local_mem_size", 0),
        ("fw_version", 92),
        ("capability", 746037888),
        ("debug_prop", 470),
        ("sdma_fw_version", 9),
        ("unique_id", 1801979520617338022),
        ("num_xcc", 1),
        ("max_engine_clk_ccompute", 2450),
    ]
}

/// MI300X SPX (rocprofiler-sdk capture, a kernel with cwsr_size, ctl_stack_size and
/// capability2), plus one key no kernel prints, to check preservation.
fn mi300x_props() -> Vec<(&'static str, u64)> {
    vec![
        ("cpu_cores_count", 0),
        ("simd_count", 1216),
        ("mem_banks_count", 1),
        ("caches_count", 4),
        ("io_links_count", 3),
        ("p2p_links_count", 1),
        ("cpu_core_id_base", 0),
        ("simd_id_base", 2147487784),
        ("max_waves_per_simd", 8),
        ("lds_size_in_kb", 64),
        ("gds_size_in_kb", 0),
        ("num_gws", 64),
        ("wave_front_size", 64),
        ("array_count", 32),
        ("simd_arrays_per_engine", 1),
        ("cu_per_simd_array", 10),
        ("simd_per_cu", 4),
        ("max_slots_scratch_cu", 32),
        ("gfx_target_version", 90402),
        ("vendor_id", 4098),
        ("device_id", 29857),
        ("location_id", 9728),
        ("domain", 0),
        ("drm_render_minor", 129),
        ("hive_id", 7773567030725891371),
        ("num_sdma_engines", 2),
        ("num_sdma_xgmi_engines", 14),
        ("num_sdma_queues_per_engine", 8),
        ("num_cp_queues", 24),
        ("cwsr_size", 23203840),
        ("ctl_stack_size", 12288),
        ("max_engine_clk_fcompute", 2100),
        ("local_mem_size", 0),
        ("fw_version", 192),
        ("capability", 2893521536),
        ("capability2", 1),
        ("debug_prop", 1511),
        ("sdma_fw_version", 25),
        ("unique_id", 5593906200782126851),
        ("num_xcc", 8),
        ("max_engine_clk_ccompute", 2400),
        ("future_prop", 42),
    ]
}

/// RX 7900 XTX (tinygrad's mock; its `drm_render_minor` was a placeholder, 130 here).
fn rx7900xtx_props() -> Vec<(&'static str, u64)> {
    vec![
        ("cpu_cores_count", 0),
        ("simd_count", 192),
        ("mem_banks_count", 1),
        ("caches_count", 206),
        ("io_links_count", 1),
        ("p2p_links_count", 5),
        ("cpu_core_id_base", 0),
        ("simd_id_base", 2147488032),
        ("max_waves_per_simd", 16),
        ("lds_size_in_kb", 64),
        ("gds_size_in_kb", 0),
        ("num_gws", 64),
        ("wave_front_size", 32),
        ("array_count", 12),
        ("simd_arrays_per_engine", 2),
        ("cu_per_simd_array", 8),
        ("simd_per_cu", 2),
        ("max_slots_scratch_cu", 32),
        ("gfx_target_version", 110000),
        ("vendor_id", 4098),
        ("device_id", 29772),
        ("location_id", 34304),
        ("domain", 0),
        ("drm_render_minor", 130),
        ("hive_id", 0),
        ("num_sdma_engines", 2),
        ("num_sdma_xgmi_engines", 0),
        ("num_sdma_queues_per_engine", 6),
        ("num_cp_queues", 8),
        ("max_engine_clk_fcompute", 2482),
        ("local_mem_size", 0),
        ("fw_version", 2140),
        ("capability", 671588992),
        ("debug_prop", 1495),
        ("sdma_fw_version", 20),
        ("unique_id", 11673270660693242239),
        ("num_xcc", 1),
        ("max_engine_clk_ccompute", 2400),
    ]
}

fn mem_bank(heap_type: u64, size: u64, width: u64, clk: u64) -> String {
    text(&[
        ("heap_type", heap_type),
        ("size_in_bytes", size),
        ("flags", 0),
        ("width", width),
        ("mem_clk_max", clk),
    ])
}

fn io_link(
    link_type: u64,
    from: u64,
    to: u64,
    weight: u64,
    bw: (u64, u64),
    mask: Option<u64>,
) -> String {
    let mut pairs = vec![
        ("type", link_type),
        ("version_major", 0),
        ("version_minor", 0),
        ("node_from", from),
        ("node_to", to),
        ("weight", weight),
        ("min_latency", 0),
        ("max_latency", 0),
        ("min_bandwidth", bw.0),
        ("max_bandwidth", bw.1),
        ("recommended_transfer_size", 0),
    ];
    if let Some(m) = mask {
        pairs.push(("recommended_sdma_engine_id_mask", m));
    }
    pairs.push(("flags", 1));
    text(&pairs)
}

fn sibling_map(len: usize, ones: &[usize]) -> String {
    (0..len)
        .map(|i| if ones.contains(&i) { "1" } else { "0" })
        .collect::<Vec<_>>()
        .join(",")
}

fn cache(processor_id_low: u64, level: u64, size: u64, cache_type: u64, siblings: &str) -> String {
    let mut s = text(&[
        ("processor_id_low", processor_id_low),
        ("level", level),
        ("size", size),
        ("cache_line_size", 0),
        ("cache_lines_per_tag", 0),
        ("association", 0),
        ("latency", 0),
        ("type", cache_type),
    ]);
    s.push_str(&format!("sibling_map {siblings}\n"));
    s
}

/// VRAM sizes. MI300X's is from its capture; the MI210 and 7900 XTX dumps carry no
/// mem_banks, so those are the boards' nominal 64 GiB and 24 GiB as KFD reports them.
const MI300X_VRAM: u64 = 206141652992;
const MI210_VRAM: u64 = 68719476736;
const RX7900XTX_VRAM: u64 = 25753026560;

/// A host with a CPU node 0 and GPU nodes 1 (MI210), 2 (MI300X), 3 (RX 7900 XTX).
fn write_host(t: &TempTree) {
    t.write("generation_id", "3\n");
    t.write(
        "system_properties",
        text(&[
            ("platform_oem", 2314885530279477313),
            ("platform_id", 77),
            ("platform_rev", 1),
        ]),
    );

    // Node 0: CPU.
    t.write("nodes/0/gpu_id", "0\n");
    t.write("nodes/0/name", "\n");
    t.write("nodes/0/properties", text(&cpu_node_props()));
    t.write(
        "nodes/0/mem_banks/0/properties",
        mem_bank(0, 540_805_885_952, 64, 4800),
    );
    for (i, to) in [1u64, 2, 3].iter().enumerate() {
        t.write(
            &format!("nodes/0/io_links/{i}/properties"),
            io_link(2, 0, *to, 20, (312, 32000), Some(0)),
        );
    }
    fs::create_dir_all(t.path("nodes/0/caches")).unwrap();
    fs::create_dir_all(t.path("nodes/0/p2p_links")).unwrap();

    // Node 1: MI210 (k8s-device-plugin tree: one PCIe link, three XGMI links, p2p).
    t.write("nodes/1/gpu_id", format!("{MI210_GPU_ID}\n"));
    t.write("nodes/1/name", "aldebaran\n");
    t.write("nodes/1/properties", text(&mi210_props()));
    t.write(
        "nodes/1/mem_banks/0/properties",
        mem_bank(1, MI210_VRAM, 4096, 1600),
    );
    t.write(
        "nodes/1/io_links/0/properties",
        io_link(2, 1, 0, 20, (312, 32000), Some(3)),
    );
    for (i, to) in [(1, 2u64), (2, 4), (3, 5)] {
        t.write(
            &format!("nodes/1/io_links/{i}/properties"),
            io_link(11, 1, to, 15, (50000, 50000), Some(28)),
        );
    }
    t.write(
        "nodes/1/p2p_links/0/properties",
        io_link(2, 1, 3, 52, (0, 0), Some(0)),
    );

    // Node 2: MI300X SPX, with gfx942 caches (MI308X tree) and a used_memory file.
    t.write("nodes/2/gpu_id", format!("{MI300X_GPU_ID}\n"));
    t.write("nodes/2/name", "ip discovery\n");
    t.write("nodes/2/properties", text(&mi300x_props()));
    let mut bank = mem_bank(1, MI300X_VRAM, 8192, 1300);
    bank.push_str("bank_future 5\n");
    t.write("nodes/2/mem_banks/0/properties", bank);
    t.write("nodes/2/mem_banks/0/used_memory", "1043775488\n");
    t.write(
        "nodes/2/caches/0/properties",
        cache(2147487747, 1, 32, 9, &sibling_map(32, &[0])),
    );
    t.write(
        "nodes/2/caches/1/properties",
        cache(2147487766, 1, 16, 9, &sibling_map(32, &[0, 1])),
    );
    t.write(
        "nodes/2/caches/2/properties",
        cache(2147487766, 1, 64, 10, &sibling_map(32, &[0, 1])),
    );
    let l2: Vec<usize> = [
        0, 1, 2, 3, 4, 32, 33, 34, 35, 36, 64, 65, 66, 67, 69, 96, 97, 98, 99, 100,
    ]
    .to_vec();
    t.write(
        "nodes/2/caches/3/properties",
        cache(2147487744, 2, 4096, 9, &sibling_map(128, &l2)),
    );
    // An older-kernel PCIe link (no recommended_sdma_engine_id_mask) and XGMI links.
    t.write(
        "nodes/2/io_links/0/properties",
        io_link(2, 2, 0, 20, (312, 64000), None),
    );
    let mut xgmi = io_link(11, 2, 1, 15, (64000, 64000), Some(16384));
    xgmi.push_str("link_future 9\n");
    t.write("nodes/2/io_links/1/properties", xgmi);
    t.write(
        "nodes/2/io_links/2/properties",
        io_link(11, 2, 3, 15, (64000, 64000), Some(32768)),
    );
    t.write(
        "nodes/2/p2p_links/0/properties",
        io_link(2, 2, 1, 41, (0, 0), None),
    );

    // Node 3: RX 7900 XTX; no name file (older trees), no caches directory.
    t.write("nodes/3/gpu_id", format!("{RX7900XTX_GPU_ID}\n"));
    t.write("nodes/3/properties", text(&rx7900xtx_props()));
    t.write(
        "nodes/3/mem_banks/0/properties",
        mem_bank(1, RX7900XTX_VRAM, 384, 1250),
    );
    t.write(
        "nodes/3/io_links/0/properties",
        io_link(2, 3, 0, 20, (312, 32000), Some(3)),
    );

    // Things a parser must skip: a non-numeric entry, the perf directory.
    t.write("nodes/README", "not a node\n");
    fs::create_dir_all(t.path("nodes/2/perf")).unwrap();
}

fn host() -> (TempTree, Topology) {
    let t = TempTree::new("host");
    write_host(&t);
    let topo = Topology::from_sysfs(&t.root).unwrap();
    (t, topo)
}

// ---------------------------------------------------------------------------------
// Realistic trees
// ---------------------------------------------------------------------------------

#[test]
fn host_tree_structure() {
    let (_t, topo) = host();
    assert_eq!(topo.generation_id, 3);
    assert_eq!(topo.system.platform_id, 77);
    assert_eq!(topo.system.platform_oem, 2314885530279477313);
    assert_eq!(topo.system.platform_rev, 1);
    assert!(topo.system.extra.is_empty());
    assert!(topo.inaccessible_nodes.is_empty());

    assert_eq!(
        topo.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    let gpus: Vec<u32> = topo.gpu_nodes().map(|n| n.gpu_id).collect();
    assert_eq!(gpus, [52712, 24248, 7261]);
    assert_eq!(topo.cpu_nodes().map(|n| n.id).collect::<Vec<_>>(), [0]);
    assert_eq!(topo.node_by_gpu_id(24248).unwrap().id, 2);
    assert!(topo.node_by_gpu_id(0).is_none());
    assert_eq!(topo.node(3).unwrap().gpu_id, 7261);
    assert!(topo.node(4).is_none());
}

#[test]
fn cpu_node() {
    let (_t, topo) = host();
    let cpu = topo.node(0).unwrap();
    assert!(!cpu.is_gpu());
    assert_eq!(cpu.name, "");
    let p = &cpu.properties;
    assert!(!p.has_gpu_cores());
    assert_eq!(p.cpu_cores_count, 48);
    assert_eq!(p.max_engine_clk_ccompute, 3700);
    assert_eq!(p.cu_count(), 0);
    assert_eq!(p.gfx_version(), None);
    assert_eq!(cpu.gfx_target_name(), None);
    // GPU-only keys are absent on CPU nodes.
    assert_eq!(p.capability, None);
    assert_eq!(p.fw_version, None);
    assert_eq!(p.num_xcc, None);
    assert_eq!(p.xcc_count(), 1);
    assert_eq!(p.capability_flags(), Capability::empty());
    assert_eq!(p.doorbell_type(), DoorbellType::Pre1_0);
    assert_eq!(cpu.doorbell_size(), 4);
    assert_eq!(p.p2p_links_count, Some(0));
    assert!(p.extra.is_empty());

    assert_eq!(cpu.mem_banks.len(), 1);
    assert_eq!(cpu.mem_banks[0].heap_type, HEAP_TYPE_SYSTEM);
    assert!(!cpu.mem_banks[0].is_vram());
    assert_eq!(cpu.vram_size(), 0);
    assert_eq!(cpu.io_links.len(), 3);
    assert_eq!(
        cpu.io_links.iter().map(|l| l.node_to).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert!(cpu.io_links.iter().all(|l| l.is_pcie() && l.node_from == 0));
    assert!(cpu.caches.is_empty());
    assert!(cpu.p2p_links.is_empty());
}

#[test]
fn mi210_gfx90a_node() {
    let (_t, topo) = host();
    let n = topo.node(1).unwrap();
    assert!(n.is_gpu());
    assert_eq!(n.name, "aldebaran");
    let p = &n.properties;
    assert_eq!(n.cu_count(), 104);
    assert_eq!(p.shader_engines(), 8);
    assert_eq!(p.wave_front_size, 64);
    assert_eq!(p.num_xcc, Some(1));
    assert_eq!(p.xcc_count(), 1);
    assert_eq!(
        p.gfx_version(),
        Some(GfxVersion {
            major: 9,
            minor: 0,
            stepping: 10
        })
    );
    assert_eq!(n.gfx_target_name().as_deref(), Some("gfx90a"));
    assert_eq!(p.device_id, 0x740F);
    assert_eq!(p.vendor_id, 0x1002);
    assert_eq!(p.drm_render_minor, 128);
    assert_eq!(p.hive_id, 12609507387757274807);
    assert_eq!(p.unique_id, Some(1801979520617338022));
    assert_eq!(p.local_mem_size, Some(0));
    // Older kernel: none of the newest keys.
    assert_eq!(p.cwsr_size, None);
    assert_eq!(p.ctl_stack_size, None);
    assert_eq!(p.capability2, None);
    assert_eq!(p.family_id, None);

    // capability 0x2C77A280.
    let cap = p.capability_flags();
    assert_eq!(cap.bits(), 0x2C77_A280);
    assert_eq!(cap.doorbell_type(), DoorbellType::V2_0);
    assert_eq!(n.doorbell_size(), 8);
    assert!(cap.svm_supported());
    assert!(p.svm_supported());
    assert!(cap.watch_points_supported());
    assert_eq!(cap.watch_points_total_bits(), 2);
    assert!(cap.trap_debug_supported());
    assert!(!cap.ats_present());
    assert_eq!(cap.asic_revision(), 1);
    assert!(cap.contains(Capability::TRAP_DEBUG_FIRMWARE_SUPPORTED));
    assert!(!cap.contains(Capability::PER_QUEUE_RESET_SUPPORTED));
    assert_eq!(p.mec_ucode_version(), Some(92));
    assert_eq!(p.sdma_ucode_version(), Some(9));

    assert_eq!(n.vram_size(), MI210_VRAM);
    assert_eq!(n.io_links.len(), 4);
    assert!(n.io_links[0].is_pcie());
    assert_eq!(n.io_links[0].node_to, 0);
    assert_eq!(n.io_links[0].recommended_sdma_engine_id_mask, Some(3));
    for l in &n.io_links[1..] {
        assert!(l.is_xgmi());
        assert_eq!(l.link_type, IOLINK_TYPE_XGMI);
        assert_eq!(l.max_bandwidth, 50000);
        assert_eq!(l.weight, 15);
        assert_eq!(l.recommended_sdma_engine_id_mask, Some(28));
        assert_eq!(l.link_flags(), IoLinkFlags::ENABLED);
    }
    assert_eq!(n.p2p_links.len(), 1);
    assert_eq!(n.p2p_links[0].weight, 52);
}

#[test]
fn mi300x_gfx942_node() {
    let (_t, topo) = host();
    let n = topo.node(2).unwrap();
    let p = &n.properties;
    assert_eq!(n.name, "ip discovery");
    assert_eq!(n.cu_count(), 304);
    assert_eq!(p.num_xcc, Some(8));
    assert_eq!(p.xcc_count(), 8);
    assert_eq!(p.shader_engines(), 32);
    assert_eq!(p.wave_front_size, 64);
    assert_eq!(n.gfx_target_name().as_deref(), Some("gfx942"));
    assert_eq!(p.cwsr_size, Some(23203840));
    assert_eq!(p.ctl_stack_size, Some(12288));
    assert_eq!(p.capability2, Some(1));
    assert_eq!(
        p.capability2_flags(),
        Capability2::PER_SDMA_QUEUE_RESET_SUPPORTED
    );
    assert_eq!(n.doorbell_size(), 8);
    let cap = p.capability_flags();
    assert_eq!(cap.bits(), 0xAC77_A280);
    assert!(cap.contains(Capability::PER_QUEUE_RESET_SUPPORTED));
    assert!(cap.contains(Capability::TRAP_DEBUG_FIRMWARE_SUPPORTED));
    assert!(cap.contains(Capability::SRAM_EDCSUPPORTED));
    assert!(!cap.contains(Capability::TRAP_DEBUG_PRECISE_ALU_OPERATIONS_SUPPORTED));

    // debug_prop 1511 = 0x5E7.
    let dbg = p.debug_flags();
    assert_eq!(dbg.watch_addr_mask_lo_bit(), 7);
    assert_eq!(dbg.watch_addr_mask_hi_bit(), 30);
    assert!(dbg.contains(DebugProperties::DISPATCH_INFO_ALWAYS_VALID));
    assert!(!dbg.contains(DebugProperties::WATCHPOINTS_EXCLUSIVE));

    // Unknown keys are kept in order.
    assert_eq!(p.extra, vec![("future_prop".to_string(), 42)]);
    assert_eq!(n.mem_banks[0].extra, vec![("bank_future".to_string(), 5)]);
    assert_eq!(n.io_links[1].extra, vec![("link_future".to_string(), 9)]);

    assert_eq!(n.vram_size(), MI300X_VRAM);
    let bank = &n.mem_banks[0];
    assert_eq!(bank.heap_type, HEAP_TYPE_FB_PUBLIC);
    assert_eq!(bank.width, 8192);
    assert_eq!(bank.mem_clk_max, 1300);
    assert_eq!(bank.used_memory, Some(1043775488));

    assert_eq!(n.caches.len(), 4);
    let l1 = &n.caches[1];
    assert_eq!(l1.level, 1);
    assert_eq!(l1.size, 16);
    assert_eq!(l1.processor_id_low, 2147487766);
    assert_eq!(l1.type_flags(), CacheType::DATA | CacheType::HSACU);
    assert_eq!(l1.siblings(), [0, 1]);
    assert_eq!(
        n.caches[2].type_flags(),
        CacheType::INSTRUCTION | CacheType::HSACU
    );
    let l2 = &n.caches[3];
    assert_eq!((l2.level, l2.size), (2, 4096));
    assert_eq!(l2.siblings().len(), 20);
    assert_eq!(l2.sibling_map.split(',').count(), 128);

    assert_eq!(n.io_links.len(), 3);
    assert_eq!(n.io_links[0].recommended_sdma_engine_id_mask, None);
    assert_eq!(n.io_links[1].max_bandwidth, 64000);
    assert_eq!(n.io_links[2].recommended_sdma_engine_id_mask, Some(32768));
    assert_eq!(n.p2p_links[0].weight, 41);
}

#[test]
fn rx7900xtx_gfx1100_node() {
    let (_t, topo) = host();
    let n = topo.node(3).unwrap();
    let p = &n.properties;
    assert_eq!(n.name, "", "absent name file reads as empty");
    assert_eq!(n.cu_count(), 96);
    assert_eq!(p.shader_engines(), 6);
    assert_eq!(p.wave_front_size, 32);
    assert_eq!(p.max_waves_per_simd, 16);
    assert_eq!(p.num_xcc, Some(1));
    assert_eq!(n.gfx_target_name().as_deref(), Some("gfx1100"));
    assert_eq!(p.device_id, 0x744C);
    assert_eq!(p.unique_id, Some(11673270660693242239));
    let cap = p.capability_flags();
    assert_eq!(cap.bits(), 0x2807_A280);
    assert_eq!(cap.doorbell_type(), DoorbellType::V2_0);
    assert_eq!(cap.asic_revision(), 0);
    assert_eq!(n.doorbell_size(), 8);
    assert_eq!(n.vram_size(), RX7900XTX_VRAM);
    assert!(n.caches.is_empty());
    assert!(n.p2p_links.is_empty());
}

#[test]
fn properties_text_matches_kernel_order() {
    // Fixture texts are in the kernel's print order, unknown keys last.
    for props in [
        cpu_node_props(),
        mi210_props(),
        mi300x_props(),
        rx7900xtx_props(),
    ] {
        let t = text(&props);
        let parsed = NodeProperties::parse(t.as_bytes(), Path::new("properties")).unwrap();
        assert_eq!(parsed.to_properties_text(), t);
    }
    let c = cache(5, 2, 4096, 9, "1,0,1");
    let parsed = Cache::parse(c.as_bytes(), Path::new("p")).unwrap();
    assert_eq!(parsed.siblings(), [0, 2]);
    assert_eq!(parsed.to_properties_text(), c);
}

#[test]
fn round_trip_to_sysfs_from_sysfs() {
    let (_t, topo) = host();
    let out = TempTree::new("roundtrip");
    let root = out.path("topology");
    topo.to_sysfs(&root).unwrap();
    let back = Topology::from_sysfs(&root).unwrap();
    assert_eq!(back, topo);
    // Written like the kernel: kernel-order text, name with newline, empty dirs.
    assert_eq!(
        fs::read_to_string(root.join("nodes/2/properties")).unwrap(),
        text(&mi300x_props())
    );
    assert_eq!(
        fs::read_to_string(root.join("nodes/2/name")).unwrap(),
        "ip discovery\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("nodes/1/gpu_id")).unwrap(),
        "52712\n"
    );
    assert_eq!(
        fs::read_to_string(root.join("generation_id")).unwrap(),
        "3\n"
    );
    assert!(root.join("nodes/3/caches").is_dir());
    assert_eq!(
        fs::read_to_string(root.join("nodes/2/mem_banks/0/used_memory")).unwrap(),
        "1043775488\n"
    );

    // A second write into the same root is refused rather than merged.
    let err = topo.to_sysfs(&root).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
}

#[test]
fn round_trip_built_value() {
    // A value built in code (as the emulator does) survives the trip too.
    let topo = Topology {
        generation_id: 1,
        system: SystemProperties::default(),
        nodes: vec![Node {
            id: 0,
            gpu_id: 4242,
            name: "emu".into(),
            properties: NodeProperties {
                simd_count: 8,
                simd_per_cu: 4,
                gfx_target_version: 120001,
                capability: Some(2 << 12),
                extra: vec![("zz".into(), 1), ("aa".into(), 2)],
                ..Default::default()
            },
            caches: vec![Cache {
                sibling_map: String::new(),
                ..Default::default()
            }],
            ..Default::default()
        }],
        inaccessible_nodes: vec![],
    };
    assert_eq!(topo.nodes[0].gfx_target_name().as_deref(), Some("gfx1201"));
    assert_eq!(topo.nodes[0].cu_count(), 2);
    let t = TempTree::new("built");
    topo.to_sysfs(&t.root).unwrap();
    // Empty sibling map: the kernel prints the bare key.
    let cache_text = fs::read_to_string(t.path("nodes/0/caches/0/properties")).unwrap();
    assert!(
        cache_text.ends_with("type 0\nsibling_map\n"),
        "{cache_text}"
    );
    assert_eq!(Topology::from_sysfs(&t.root).unwrap(), topo);
}

#[test]
fn to_sysfs_rejects_unrepresentable_values() {
    let mut topo = Topology::default();
    topo.nodes.push(Node::default());
    topo.nodes[0]
        .properties
        .extra
        .push(("simd_count".into(), 1));
    let t = TempTree::new("reject");
    let e = topo.to_sysfs(&t.path("a")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
    assert!(e.to_string().contains("simd_count"), "{e}");

    topo.nodes[0].properties.extra = vec![("two words".into(), 1)];
    assert!(topo.to_sysfs(&t.path("b")).is_err());
    topo.nodes[0].properties.extra.clear();
    topo.nodes[0].name = "a\nb".into();
    assert!(topo.to_sysfs(&t.path("c")).is_err());
    topo.nodes[0].name.clear();
    topo.nodes.push(Node::default());
    assert!(topo.to_sysfs(&t.path("d")).is_err(), "duplicate node ids");
    assert!(!t.path("d").exists(), "nothing written on invalid input");
}

#[test]
fn nodes_and_banks_sorted_numerically() {
    let t = TempTree::new("order");
    t.write("generation_id", "1\n");
    t.write(
        "system_properties",
        text(&[("platform_oem", 0), ("platform_id", 0), ("platform_rev", 0)]),
    );
    for id in 0..12u64 {
        let mut props = cpu_node_props();
        props[6] = ("cpu_core_id_base", id * 16);
        t.write(&format!("nodes/{id}/gpu_id"), "0\n");
        t.write(&format!("nodes/{id}/properties"), text(&props));
    }
    for i in 0..11u64 {
        t.write(
            &format!("nodes/0/mem_banks/{i}/properties"),
            mem_bank(0, i, 64, 0),
        );
    }
    let topo = Topology::from_sysfs(&t.root).unwrap();
    let ids: Vec<u32> = topo.nodes.iter().map(|n| n.id).collect();
    assert_eq!(ids, (0..12).collect::<Vec<_>>());
    let bases: Vec<u32> = topo
        .nodes
        .iter()
        .map(|n| n.properties.cpu_core_id_base)
        .collect();
    assert_eq!(bases, (0..12).map(|i| i * 16).collect::<Vec<_>>());
    let sizes: Vec<u64> = topo.nodes[0]
        .mem_banks
        .iter()
        .map(|b| b.size_in_bytes)
        .collect();
    assert_eq!(sizes, (0..11).collect::<Vec<_>>());
}

#[test]
fn lenient_whitespace_and_blank_lines() {
    let p = NodeProperties::parse(
        format!("\n  {}\n\n", text(&cpu_node_props()).replace(' ', "\t ")).as_bytes(),
        Path::new("x"),
    )
    .unwrap();
    assert_eq!(p.cpu_cores_count, 48);
}

#[test]
fn gfx_names() {
    let name = |v| GfxVersion::from_target_version(v).and_then(|g| g.name());
    assert_eq!(name(90010).as_deref(), Some("gfx90a"));
    assert_eq!(name(90402).as_deref(), Some("gfx942"));
    assert_eq!(name(90500).as_deref(), Some("gfx950"));
    assert_eq!(name(90008).as_deref(), Some("gfx908"));
    assert_eq!(name(90006).as_deref(), Some("gfx906"));
    assert_eq!(name(100302).as_deref(), Some("gfx1032"));
    assert_eq!(name(110000).as_deref(), Some("gfx1100"));
    assert_eq!(name(110002).as_deref(), Some("gfx1102"));
    assert_eq!(name(120001).as_deref(), Some("gfx1201"));
    assert_eq!(name(0), None);
    assert_eq!(name(91600), None, "minor 16 has no hex digit");
    let v = GfxVersion::from_target_version(90402).unwrap();
    assert_eq!(v.target_version(), 90402);
}

// ---------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------

/// Write the host tree, replace one file, and return the error reading it.
fn host_error(rel: &str, contents: Option<&[u8]>) -> (TempTree, TopologyError) {
    let t = TempTree::new("err");
    write_host(&t);
    match contents {
        Some(c) => t.write(rel, c),
        None => {
            let p = t.path(rel);
            if p.is_dir() {
                fs::remove_dir_all(p).unwrap();
            } else {
                fs::remove_file(p).unwrap();
            }
        }
    }
    let e = Topology::from_sysfs(&t.root).unwrap_err();
    (t, e)
}

fn assert_at(e: &TopologyError, path: &Path, line: usize) {
    assert_eq!(e.path(), path);
    assert_eq!(e.line(), Some(line));
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{}:{line}: ", path.display())),
        "{msg}"
    );
}

fn mi210_with_line(idx: usize, line: &str) -> String {
    let mut lines: Vec<String> = text(&mi210_props()).lines().map(String::from).collect();
    lines[idx] = line.to_string();
    lines.join("\n") + "\n"
}

#[test]
fn error_malformed_line() {
    let rel = "nodes/1/properties";
    for bad in ["simd_count", "simd_count 416 4", "simd_count: 416 x"] {
        let (t, e) = host_error(rel, Some(mi210_with_line(1, bad).as_bytes()));
        assert!(matches!(e, TopologyError::MalformedLine { .. }), "{e:?}");
        assert_at(&e, &t.path(rel), 2);
        assert!(e.to_string().contains("malformed line"), "{e}");
    }
    // Not UTF-8.
    let (t, e) = host_error(rel, Some(b"cpu_cores_count 0\nsimd\xff 1\n"));
    assert!(
        matches!(
            e,
            TopologyError::MalformedLine {
                reason: "not UTF-8",
                ..
            }
        ),
        "{e:?}"
    );
    assert_at(&e, &t.path(rel), 2);
}

#[test]
fn error_invalid_value() {
    let rel = "nodes/3/properties";
    let mut lines: Vec<String> = text(&rx7900xtx_props()).lines().map(String::from).collect();
    // tinygrad's unfilled template placeholder, line 24.
    lines[23] = "drm_render_minor {drm_render_minor}".into();
    let (t, e) = host_error(rel, Some((lines.join("\n") + "\n").as_bytes()));
    assert!(
        matches!(&e, TopologyError::InvalidValue { key, value, .. } if key == "drm_render_minor" && value == "{drm_render_minor}"),
        "{e:?}"
    );
    assert_at(&e, &t.path(rel), 24);
    assert!(e.to_string().contains("not a decimal u64"), "{e}");

    for bad in [
        "simd_count -1",
        "simd_count 0x1a0",
        "simd_count +416",
        "simd_count 18446744073709551616",
    ] {
        let rel = "nodes/1/properties";
        let (t, e) = host_error(rel, Some(mi210_with_line(1, bad).as_bytes()));
        assert!(
            matches!(e, TopologyError::InvalidValue { .. }),
            "{bad}: {e:?}"
        );
        assert_at(&e, &t.path(rel), 2);
    }

    // Unknown keys must carry u64 values too.
    let rel = "nodes/2/mem_banks/0/properties";
    let (t, e) = host_error(
        rel,
        Some(b"heap_type 1\nsize_in_bytes 1\nflags 0\nwidth 1\nmem_clk_max 1\nnew_key abc\n"),
    );
    assert!(matches!(e, TopologyError::InvalidValue { .. }), "{e:?}");
    assert_at(&e, &t.path(rel), 6);

    // Single-value files.
    let (t, e) = host_error("nodes/1/gpu_id", Some(b"gpu\n"));
    assert!(matches!(e, TopologyError::InvalidValue { .. }), "{e:?}");
    assert_at(&e, &t.path("nodes/1/gpu_id"), 1);
    let (t, e) = host_error("generation_id", Some(b""));
    assert_at(&e, &t.path("generation_id"), 1);
}

#[test]
fn error_value_out_of_range() {
    let rel = "nodes/1/properties";
    let (t, e) = host_error(
        rel,
        Some(mi210_with_line(1, "simd_count 4294967296").as_bytes()),
    );
    assert!(
        matches!(&e, TopologyError::ValueOutOfRange { key, value: 4294967296, bits: 32, .. } if key == "simd_count"),
        "{e:?}"
    );
    assert_at(&e, &t.path(rel), 2);
    // 64-bit keys take the full range.
    let (_t, topo) = host();
    assert_eq!(
        topo.node(3).unwrap().properties.unique_id,
        Some(11673270660693242239)
    );
    let (t, e) = host_error("nodes/2/gpu_id", Some(b"4294967296\n"));
    assert!(matches!(e, TopologyError::ValueOutOfRange { .. }), "{e:?}");
    assert_at(&e, &t.path("nodes/2/gpu_id"), 1);
}

#[test]
fn error_duplicate_key() {
    let rel = "nodes/2/caches/0/properties";
    let mut c = cache(1, 1, 16, 9, "1,0");
    c.push_str("level 2\n");
    let (t, e) = host_error(rel, Some(c.as_bytes()));
    assert!(
        matches!(&e, TopologyError::DuplicateKey { key, first_line: 2, .. } if key == "level"),
        "{e:?}"
    );
    assert_at(&e, &t.path(rel), 10);
    assert!(e.to_string().contains("first on line 2"), "{e}");
}

#[test]
fn error_missing_files() {
    for rel in [
        "nodes/1/properties",
        "nodes/2/gpu_id",
        "nodes/2/caches/3/properties",
        "nodes/0/io_links/1/properties",
        "generation_id",
        "system_properties",
        "nodes",
    ] {
        let (t, e) = host_error(rel, None);
        assert!(
            matches!(e, TopologyError::MissingFile { .. }),
            "{rel}: {e:?}"
        );
        assert_eq!(e.path(), t.path(rel));
        assert_eq!(e.line(), None);
        assert_eq!(
            e.to_string(),
            format!("{}: missing file", t.path(rel).display())
        );
    }
}

#[test]
fn error_missing_required_key() {
    let rel = "nodes/1/properties";
    let props: Vec<_> = mi210_props()
        .into_iter()
        .filter(|(k, _)| *k != "wave_front_size")
        .collect();
    let (t, e) = host_error(rel, Some(text(&props).as_bytes()));
    assert!(
        matches!(
            e,
            TopologyError::MissingKey {
                key: "wave_front_size",
                ..
            }
        ),
        "{e:?}"
    );
    assert_eq!(e.path(), t.path(rel));
    assert_eq!(
        e.to_string(),
        format!(
            "{}: missing required key `wave_front_size`",
            t.path(rel).display()
        )
    );
    // Cache without its sibling map; link without its type.
    let rel = "nodes/2/caches/0/properties";
    let (_t, e) = host_error(rel, Some(b"processor_id_low 1\nlevel 1\nsize 1\ncache_line_size 0\ncache_lines_per_tag 0\nassociation 0\nlatency 0\ntype 9\n"));
    assert!(
        matches!(
            e,
            TopologyError::MissingKey {
                key: "sibling_map",
                ..
            }
        ),
        "{e:?}"
    );
    let rel = "nodes/1/io_links/2/properties";
    let link = io_link(11, 1, 4, 15, (1, 1), None).replace("type 11\n", "");
    let (_t, e) = host_error(rel, Some(link.as_bytes()));
    assert!(
        matches!(e, TopologyError::MissingKey { key: "type", .. }),
        "{e:?}"
    );
}

#[test]
fn error_io_names_path() {
    // A properties "file" that is a directory cannot be read.
    let t = TempTree::new("io");
    write_host(&t);
    fs::remove_file(t.path("nodes/3/properties")).unwrap();
    fs::create_dir_all(t.path("nodes/3/properties")).unwrap();
    let e = Topology::from_sysfs(&t.root).unwrap_err();
    assert!(matches!(e, TopologyError::Io { .. }), "{e:?}");
    assert_eq!(e.path(), t.path("nodes/3/properties"));
    assert!(e
        .to_string()
        .starts_with(&t.path("nodes/3/properties").display().to_string()));
}

#[test]
fn sibling_map_only_in_caches() {
    let rel = "nodes/1/properties";
    let mut s = text(&mi210_props());
    s.push_str("sibling_map 1,0\n");
    let (_t, e) = host_error(rel, Some(s.as_bytes()));
    assert!(matches!(e, TopologyError::InvalidValue { .. }), "{e:?}");
}

#[test]
fn permission_denied_node_is_skipped() {
    use std::os::unix::fs::PermissionsExt;
    let t = TempTree::new("perm");
    write_host(&t);
    let gpu_id = t.path("nodes/3/gpu_id");
    fs::set_permissions(&gpu_id, fs::Permissions::from_mode(0o000)).unwrap();
    if fs::read(&gpu_id).is_ok() {
        // Running as root: permissions do not apply, nothing to observe.
        return;
    }
    let topo = Topology::from_sysfs(&t.root).unwrap();
    assert_eq!(topo.inaccessible_nodes, [3]);
    assert_eq!(
        topo.nodes.iter().map(|n| n.id).collect::<Vec<_>>(),
        [0, 1, 2]
    );
}

// ---------------------------------------------------------------------------------
// No panics on any input
// ---------------------------------------------------------------------------------

fn minimal_tree(t: &TempTree) {
    t.write("generation_id", "1\n");
    t.write(
        "system_properties",
        text(&[("platform_oem", 0), ("platform_id", 0), ("platform_rev", 0)]),
    );
    t.write("nodes/0/gpu_id", "0\n");
    t.write("nodes/0/properties", text(&cpu_node_props()));
    t.write("nodes/0/caches/0/properties", cache(0, 1, 32, 5, "1"));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b66_6472_7400_0001), ..ProptestConfig::default() })]

    /// Arbitrary bytes in any file of the tree: an error or a value, never a panic.
    #[test]
    fn arbitrary_file_bytes_never_panic(
        which in 0usize..5,
        bytes in proptest::collection::vec(any::<u8>(), 0..600),
    ) {
        let t = TempTree::new("prop");
        minimal_tree(&t);
        let rel = ["nodes/0/properties", "nodes/0/caches/0/properties", "nodes/0/gpu_id",
                   "generation_id", "system_properties"][which];
        t.write(rel, &bytes);
        if let Err(e) = Topology::from_sysfs(&t.root) {
            prop_assert!(e.path().starts_with(&t.root));
            let _ = e.to_string();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, failure_persistence: None, rng_seed: proptest::test_runner::RngSeed::Fixed(0x6b66_6472_7400_0001), ..ProptestConfig::default() })]

    /// Arbitrary bytes through every parser directly.
    #[test]
    fn arbitrary_bytes_parsers_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..800)) {
        let p = Path::new("f");
        let _ = NodeProperties::parse(&bytes, p).map(|v| v.to_properties_text());
        let _ = Cache::parse(&bytes, p).map(|v| v.to_properties_text());
        let _ = MemBank::parse(&bytes, p);
        let _ = IoLink::parse(&bytes, p);
        let _ = SystemProperties::parse(&bytes, p);
    }

    /// Line-shaped noise mixed into a real node: whatever parses writes back to text
    /// that parses to the same value.
    #[test]
    fn parsed_values_round_trip(
        noise in proptest::collection::vec(
            "(simd_count|num_xcc|capability|hive_id|cwsr_size|zz_[a-z]{1,6}|[a-z_]{1,12})[ \t]{1,2}[0-9]{1,21}",
            0..6),
        drop in proptest::collection::vec(0usize..38, 0..3),
    ) {
        let mut lines: Vec<String> = mi210_props()
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !drop.contains(i))
            .map(|(_, (k, v))| format!("{k} {v}"))
            .collect();
        lines.extend(noise);
        let src = lines.join("\n");
        if let Ok(v) = NodeProperties::parse(src.as_bytes(), Path::new("f")) {
            let again = NodeProperties::parse(v.to_properties_text().as_bytes(), Path::new("g"));
            prop_assert_eq!(again.unwrap(), v);
        }
    }
}
