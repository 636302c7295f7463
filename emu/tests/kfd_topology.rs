//! Presets, device strings and the emulated topology, parsed back from its sysfs tree.

mod kfd_common;

use std::collections::HashSet;
use std::path::Path;

use kfd::topology::Topology;
use kfd::Backend;
use kfd_emu::spec::{self, SpecError};
use kfd_emu::{cwsr_sizes, EmuBackend, Preset};

#[test]
fn every_preset_round_trips_through_sysfs() {
    // (name, gfx, CUs, XCCs, wave size, VRAM bytes, SDMA engines, doorbell size)
    let expect: [(&str, u32, u32, u32, u32, u64, u32); 5] = [
        ("mi300x", 90402, 304, 8, 64, 206_141_652_992, 2),
        ("mi250x", 90010, 110, 1, 64, 64 << 30, 2),
        ("mi210", 90010, 104, 1, 64, 64 << 30, 2),
        ("rx7900xtx", 110000, 96, 1, 32, 24 << 30, 2),
        ("rx9070xt", 120001, 64, 1, 32, 17_095_983_104, 2),
    ];
    for (name, gfx, cus, xcc, wave, vram, sdma) in expect {
        let emu = EmuBackend::from_spec(&format!("emu:{name}")).unwrap();
        let topo = emu.topology();
        // The served tree parses to the same value the backend reports.
        let reparsed = Topology::from_source(emu.sysfs_tree(), Path::new("")).unwrap();
        assert_eq!(&reparsed, topo, "{name}");
        assert_eq!(topo.cpu_nodes().count(), 1);
        assert_eq!(topo.nodes[0].id, 0);
        assert!(!topo.nodes[0].is_gpu());
        let gpus: Vec<_> = topo.gpu_nodes().collect();
        assert_eq!(gpus.len(), 1);
        let n = gpus[0];
        assert_eq!(n.properties.gfx_target_version, gfx, "{name}");
        assert_eq!(n.cu_count(), cus, "{name}");
        assert_eq!(n.properties.xcc_count(), xcc, "{name}");
        assert_eq!(n.properties.wave_front_size, wave, "{name}");
        assert_eq!(n.vram_size(), vram, "{name}");
        assert_eq!(n.properties.num_sdma_engines, sdma, "{name}");
        assert_eq!(n.doorbell_size(), 8, "{name}: SOC15 64-bit doorbells");
        assert_eq!(n.properties.drm_render_minor, 128);
        assert!(n.properties.svm_supported(), "{name}");
        assert_ne!(n.gpu_id, 0);
        assert!(n.gpu_id <= 0xffff);
        let c = Preset::by_name(name).unwrap().cwsr().unwrap();
        assert_eq!(n.properties.cwsr_size, Some(c.cwsr_size));
        assert_eq!(n.properties.ctl_stack_size, Some(c.ctl_stack_size));
        assert!(n.gfx_target_name().unwrap().starts_with("gfx"));
    }
}

#[test]
fn cwsr_sizes_match_the_kernels_published_values() {
    // MI300X and RX 9070 XT dumps carry cwsr_size / ctl_stack_size from the kernel.
    let mi300x = Preset::MI300X.cwsr().unwrap();
    assert_eq!(
        (mi300x.cwsr_size, mi300x.ctl_stack_size),
        (23_203_840, 12_288)
    );
    assert_eq!(mi300x.eop_buffer_size, 4096);
    let rx9070 = Preset::RX9070XT.cwsr().unwrap();
    assert_eq!(
        (rx9070.cwsr_size, rx9070.ctl_stack_size),
        (30_699_520, 28_672)
    );
    // The per-XCC size times 8 plus the debugger area, page aligned.
    let wave_num = 38 * 40; // min(cu * 40, SEs * 512) on gfx9
    let dbg = (wave_num * 32u64).div_ceil(64) * 64;
    assert_eq!(mi300x.debug_memory_size as u64, dbg);
    assert_eq!(
        mi300x.default_cwsr_bo_size(),
        ((23_203_840 + dbg) * 8).div_ceil(4096) * 4096
    );
    // gfx10.x caps the control stack at 0x7000.
    let navi = cwsr_sizes(100302, 1, 64 * 2, 2, 4, 2, 64).unwrap();
    assert!(navi.ctl_stack_size <= 0x7000);
    // Before Carrizo nothing is computed.
    assert_eq!(cwsr_sizes(70002, 1, 32, 4, 4, 1, 64), None);
    // Degenerate inputs do not panic.
    assert!(cwsr_sizes(90402, 0, 0, 0, 0, 0, 0).is_some());
    assert!(cwsr_sizes(u32::MAX, u32::MAX, u32::MAX, 1, u32::MAX, 1, u32::MAX).is_some());
}

#[test]
fn multi_gpu_spec_has_distinct_ids_and_render_minors() {
    let emu = EmuBackend::from_spec("emu:mi300x*2,rx7900xtx").unwrap();
    let topo = emu.topology();
    let gpus: Vec<_> = topo.gpu_nodes().collect();
    assert_eq!(gpus.len(), 3);
    let ids: HashSet<u32> = gpus.iter().map(|n| n.gpu_id).collect();
    assert_eq!(ids.len(), 3);
    assert!(!ids.contains(&0));
    let minors: Vec<u32> = gpus.iter().map(|n| n.properties.drm_render_minor).collect();
    assert_eq!(minors, vec![128, 129, 130]);
    let node_ids: Vec<u32> = gpus.iter().map(|n| n.id).collect();
    assert_eq!(node_ids, vec![1, 2, 3]);
    assert_eq!(gpus[2].properties.gfx_target_version, 110000);
    assert_eq!(topo.nodes[0].io_links.len(), 3);
    assert_eq!(
        emu.gpu_ids(),
        gpus.iter().map(|n| n.gpu_id).collect::<Vec<_>>()
    );
    // Deterministic: the same spec gives the same ids.
    let again = EmuBackend::from_spec("emu:mi300x*2,rx7900xtx").unwrap();
    assert_eq!(again.gpu_ids(), emu.gpu_ids());
    // The same spec serves the same tree.
    assert_eq!(again.sysfs_tree(), emu.sysfs_tree());
}

/// The tree is served from memory: listing and reading it gives the kernel's layout.
#[test]
fn sysfs_tree_lists_and_reads_like_the_kernel_tree() {
    let emu = EmuBackend::from_spec("emu:mi300x,rx7900xtx").unwrap();
    let t = emu.sysfs_tree();
    assert_eq!(
        t.list_dir(Path::new("")).unwrap(),
        vec!["generation_id", "nodes", "system_properties"]
    );
    assert_eq!(t.list_dir(Path::new("nodes")).unwrap(), vec!["0", "1", "2"]);
    let gpu = &emu.topology().nodes[2];
    assert_eq!(
        t.read_file(Path::new("nodes/2/gpu_id")).unwrap(),
        format!("{}\n", gpu.gpu_id).as_bytes()
    );
    let props = String::from_utf8(
        t.read_file(Path::new("/nodes/2/properties"))
            .unwrap()
            .to_vec(),
    )
    .unwrap();
    assert!(props.contains("gfx_target_version 110000\n"), "{props}");
    assert!(t.list_dir(Path::new("nodes/2/mem_banks")).is_some());
    assert!(t.read_file(Path::new("nodes/9/gpu_id")).is_none());
    assert!(t.list_dir(Path::new("nodes/9")).is_none());
}

fn emu_dirs_of(pid: u32) -> Vec<String> {
    let prefix = format!("kfd-emu-{pid}-");
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Issue 11 item 7: no `kfd-emu-*` directory is written, so none is left by a drop, a
/// panic in a thread holding a device, or an aborted process.
#[test]
fn no_topology_directory_is_written_or_left_behind() {
    const CHILD: &str = "KFD_EMU_TEST_ABORT_CHILD";
    if std::env::var_os(CHILD).is_some() {
        let _emu = EmuBackend::from_spec("emu:mi210").unwrap();
        std::process::abort();
    }
    let me = std::process::id();
    {
        let _emu = EmuBackend::from_spec("emu:mi300x*2").unwrap();
        assert_eq!(emu_dirs_of(me), Vec::<String>::new(), "while alive");
    }
    let r = std::thread::spawn(|| {
        let _emu = EmuBackend::from_spec("emu:mi210").unwrap();
        panic!("dies holding a device");
    })
    .join();
    assert!(r.is_err());
    assert_eq!(
        emu_dirs_of(me),
        Vec::<String>::new(),
        "after drop and panic"
    );
    // A process that aborts while holding a device.
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "no_topology_directory_is_written_or_left_behind",
            "--exact",
            "--test-threads=1",
        ])
        .env(CHILD, "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(!out.status.success(), "the child aborts");
    assert_eq!(emu_dirs_of(pid), Vec::<String>::new(), "after an abort");
}

#[test]
fn plain_emu_is_one_mi300x() {
    let gpus = spec::parse("emu").unwrap();
    assert_eq!(gpus.len(), 1);
    assert_eq!(gpus[0].preset.name, "mi300x");
    let emu = EmuBackend::from_spec("emu").unwrap();
    assert_eq!(emu.topology().gpu_nodes().count(), 1);
}

#[test]
fn spec_grammar() {
    let g = spec::parse("emu:mi250x*2,rx7900xtx").unwrap();
    assert_eq!(
        g.iter().map(|s| s.preset.name).collect::<Vec<_>>(),
        ["mi250x", "mi250x", "rx7900xtx"]
    );
    let g = spec::parse(" EMU:MI210[vram=64M]*2 , rx9070xt ").unwrap();
    assert_eq!(g.len(), 3);
    assert_eq!(g[0].preset.vram_size, 64 << 20);
    assert_eq!(g[1].preset.vram_size, 64 << 20);
    assert_eq!(g[2].preset.vram_size, Preset::RX9070XT.vram_size);
    let g = spec::parse("emu:mi210*2[vram=1G,xnack=on]").unwrap();
    assert_eq!(g[1].preset.vram_size, 1 << 30);
    assert_eq!(g[1].xnack, Some(true));
    assert_eq!(spec::parse_size("4K"), Some(4096));
    assert_eq!(spec::parse_size("3T"), Some(3 << 40));
    assert_eq!(spec::parse_size("99999999999999999999T"), None);

    assert!(matches!(spec::parse("hw"), Err(SpecError::NotEmu(_))));
    assert!(matches!(spec::parse("emux"), Err(SpecError::NotEmu(_))));
    assert!(matches!(spec::parse("emu:"), Err(SpecError::EmptyItem(_))));
    assert!(matches!(
        spec::parse("emu:mi300x,,mi210"),
        Err(SpecError::EmptyItem(_))
    ));
    let e = spec::parse("emu:mi400").unwrap_err();
    assert!(matches!(&e, SpecError::UnknownPreset { name, .. } if name == "mi400"));
    assert!(
        e.to_string().contains("mi300x"),
        "the error lists the known presets: {e}"
    );
    for bad in [
        "emu:mi300x*0",
        "emu:mi300x*",
        "emu:mi300x*x",
        "emu:mi210*2*2",
        "emu:mi300x*65",
        "emu:mi300x*-1",
    ] {
        assert!(
            matches!(spec::parse(bad), Err(SpecError::BadCount { .. })),
            "{bad}"
        );
    }
    assert!(matches!(
        spec::parse("emu:mi300x*40,mi210*40"),
        Err(SpecError::TooManyGpus(80))
    ));
    for bad in [
        "emu:mi210[vram=12]",
        "emu:mi210[vram=1000K]",
        "emu:mi210[foo=1]",
        "emu:mi210[vram]",
        "emu:mi210[xnack=maybe]",
    ] {
        assert!(
            matches!(spec::parse(bad), Err(SpecError::BadOption { .. })),
            "{bad}"
        );
    }
    for bad in [
        "emu:mi210[vram=64M",
        "emu:mi210]",
        "emu:mi210[vram=64M][vram=64M]",
    ] {
        assert!(
            matches!(spec::parse(bad), Err(SpecError::Malformed(_))),
            "{bad}"
        );
    }
}

#[test]
fn vram_option_is_published_and_xnack_option_checked() {
    let emu = EmuBackend::from_spec("emu:mi210[vram=64M]").unwrap();
    let n = emu.topology().gpu_nodes().next().unwrap();
    assert_eq!(n.vram_size(), 64 << 20);
    assert!(EmuBackend::from_spec("emu:rx7900xtx[xnack=on]").is_err());
    let dev = kfd_common::open("emu:mi300x[xnack=on]");
    assert_eq!(kfd::ioctl::set_xnack_mode(dev.b(), -1).unwrap(), 1);
}

#[test]
fn open_render_node_gives_a_named_fd_per_gpu() {
    use std::os::fd::AsRawFd;
    let emu = EmuBackend::from_spec("emu:mi210*2").unwrap();
    let b: &dyn Backend = &emu;
    let fd = b.open_render_node(129).unwrap();
    let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).unwrap();
    assert!(link.to_string_lossy().contains("renderD129"), "{link:?}");
    assert_eq!(b.open_render_node(130).unwrap_err(), kfd::Errno::NOENT);
    assert_eq!(b.open_render_node(0).unwrap_err(), kfd::Errno::NOENT);
    assert_eq!(b.kind(), kfd::BackendKind::Emulated);
}
