//! End-to-end tests of the `kfdrt` binary: output and exit codes.

mod common;

use common::{disasm, kfdrt, stderr, stdout, tmp};

#[test]
fn no_command_is_a_usage_error() {
    let o = kfdrt(&[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("USAGE"));
}

#[test]
fn unknown_command_names_it() {
    let o = kfdrt(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown command \"frobnicate\""));
}

#[test]
fn help_lists_commands_and_examples() {
    let o = kfdrt(&["help"]);
    assert_eq!(o.status.code(), Some(0));
    let s = stdout(&o);
    for c in ["info", "disasm", "EXIT CODES"] {
        assert!(s.contains(c), "help lacks {c}: {s}");
    }
    let o = kfdrt(&["disasm", "--help"]);
    assert!(stdout(&o).contains("EXAMPLES"));
}

#[test]
fn disasm_hex_pm4_decodes_and_flags_truncation() {
    let d = tmp("disasm");
    // WAIT_REG_MEM GEQ on memory (encoded with pm4 so the bytes are the real ones).
    let mut w = [0u32; 16];
    let n = pm4::pkt3::WaitRegMem::memory(
        pm4::pkt3::CompareFn::GreaterEqual,
        0x7f00_0000_1000,
        5,
        0xffff_ffff,
        4,
    )
    .encode(pm4::GfxFamily::Gfx9, &mut w)
    .unwrap();
    let mut text: String = w[..n].iter().map(|x| format!("{x:08x} ")).collect();
    text.push('\n');
    std::fs::write(d.join("ok.txt"), &text).unwrap();
    let o = disasm(
        "pm4",
        "gfx942",
        &["--hex", d.join("ok.txt").to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(
        s.starts_with(
            "0x0000 WAIT_REG_MEM function=GEQ mem_space=memory addr=0x7f0000001000 reference=0x5"
        ),
        "{s}"
    );

    // The same words, then a header promising more dwords than the file has.
    std::fs::write(d.join("bad.txt"), format!("{text} c0ff9900\n")).unwrap();
    let o = disasm(
        "pm4",
        "gfx942",
        &["--hex", d.join("bad.txt").to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(1));
    let s = stdout(&o);
    assert!(
        s.contains("WAIT_REG_MEM") && s.contains("0x001c TRUNCATED"),
        "{s}"
    );

    // JSON form parses and carries the same packet.
    let o = disasm(
        "pm4",
        "gfx90a",
        &["--hex", "--json", d.join("ok.txt").to_str().unwrap()],
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert_eq!(v[0]["name"], "WAIT_REG_MEM");
    assert_eq!(v[0]["fields"]["function"], "GEQ");
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn disasm_binary_aql_and_bad_input() {
    let d = tmp("aql");
    let pkt = pm4::aql::AqlPacket::BarrierAnd(pm4::aql::Barrier {
        control: pm4::aql::PacketControl::SYSTEM_BARRIER,
        dep_signals: [0x1000, 0, 0, 0, 0],
        completion_signal: 0x2000,
    });
    let bytes = pkt.encode_bytes();
    std::fs::write(d.join("a.bin"), bytes).unwrap();
    let o = disasm("aql", "gfx1100", &[d.join("a.bin").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("BARRIER_AND"), "{}", stdout(&o));

    std::fs::write(d.join("odd.bin"), [1u8, 2, 3]).unwrap();
    let o = disasm("sdma", "gfx90a", &[d.join("odd.bin").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not a whole number of dwords"));

    let o = disasm("pm4", "gfx7000", &[d.join("a.bin").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown gfx target"));

    let o = disasm("pm4", "gfx942", &["/nonexistent/file"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("/nonexistent/file"));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn info_on_a_sysfs_tree() {
    use kfd::topology::{MemBank, Node, Topology};
    let d = tmp("sysfs");
    let cpu = Node {
        id: 0,
        name: String::new(),
        ..Default::default()
    };
    let mut gpu = Node {
        id: 1,
        gpu_id: 0x3f2a,
        name: "gfx90a".into(),
        ..Default::default()
    };
    let p = &mut gpu.properties;
    p.simd_count = 416;
    p.simd_per_cu = 4;
    p.gfx_target_version = 90010;
    p.wave_front_size = 64;
    p.num_sdma_engines = 2;
    p.num_sdma_xgmi_engines = 3;
    p.num_sdma_queues_per_engine = 8;
    p.num_cp_queues = 24;
    p.drm_render_minor = 128;
    p.array_count = 8;
    p.cu_per_simd_array = 14;
    p.simd_arrays_per_engine = 1;
    p.mem_banks_count = 1;
    gpu.mem_banks.push(MemBank {
        heap_type: 1,
        size_in_bytes: 64 << 30,
        ..Default::default()
    });
    let topo = Topology {
        nodes: vec![cpu, gpu],
        ..Default::default()
    };
    topo.to_sysfs(&d).unwrap();

    let o = kfdrt(&["info", "--sysfs", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let s = stdout(&o);
    assert!(s.contains("gfx target:          gfx90a"), "{s}");
    assert!(s.contains("compute units:       104"), "{s}");
    assert!(s.contains("64.0 GiB"), "{s}");
    assert!(s.contains("n/a (topology only)"), "{s}");

    let o = kfdrt(&["info", "--sysfs", d.to_str().unwrap(), "--json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["agents"][0]["compute_units"], 104);
    assert_eq!(v["agents"][0]["gfx_target"], "gfx90a");

    // A malformed properties file: exit 3 and the file is named.
    std::fs::write(d.join("nodes/1/properties"), "simd_count banana\n").unwrap();
    let o = kfdrt(&["info", "--sysfs", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("nodes/1/properties"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn info_rejects_bad_options_and_device_specs() {
    let o = kfdrt(&["info", "--bogus"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown option --bogus"));
    let o = kfdrt(&["info", "--device", "gpu0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown device spec"), "{}", stderr(&o));
}
