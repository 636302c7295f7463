//! The CLI a new user meets: a closed output pipe is a quiet exit on every command,
//! every exit code of the README's table, `--version`, `help`, and `info --sysfs` on
//! each public single-node topology dump (numbers copied into fixtures written here).

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

mod common;

use common::{bin, disasm, kfdrt, stderr, tmp};

/// Wait for `child` at most `limit`; kill it and fail naming `what` after that.
fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `kfdrt ARGS` with its standard output and error piped to this test.
fn spawn_piped(args: &[&str]) -> Child {
    bin()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The command `args` ends (within 300 s) with exit code 0 and no panic on stderr.
fn exits_quietly(child: &mut Child, args: &[&str]) {
    let err = read_stderr(child);
    let status = wait_bounded(child, Duration::from_secs(300), &args.join(" "));
    assert_eq!(status.code(), Some(0), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
}

fn read_stderr(child: &mut Child) -> String {
    let mut s = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut s);
    }
    s
}

/// A file of `n` PM4 NOPs of 2 dwords each (one disasm line per NOP).
fn nop_file(dir: &std::path::Path, n: usize) -> PathBuf {
    let p = dir.join("nops.bin");
    let nop = [0xC000_1000u32, 0]; // PACKET3(NOP, count 0): header + 1 dword
    let bytes: Vec<u8> = (0..n)
        .flat_map(|_| nop)
        .flat_map(u32::to_le_bytes)
        .collect();
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn a_closed_stdout_is_a_quiet_exit_on_every_command() {
    let d = tmp("epipe");
    let nops = nop_file(&d, 50_000);
    let trace_out = d.join("t.json");
    let cases: Vec<Vec<&str>> = vec![
        vec!["--version"],
        vec!["help"],
        vec!["help", "check"],
        vec!["check", "--help"],
        vec!["info"],
        vec!["info", "--json"],
        vec!["check", "--list"],
        vec!["check", "--list", "--json"],
        vec!["check", "--only", "topology.kfd_version"],
        vec!["check", "--only", "topology.kfd_version", "--json"],
        vec!["bench", "--quick", "--filter", "streamQuery idle"],
        vec![
            "disasm",
            "--engine",
            "pm4",
            "--gfx",
            "gfx942",
            nops.to_str().unwrap(),
        ],
        vec![
            "disasm",
            "--engine",
            "pm4",
            "--gfx",
            "gfx942",
            "--json",
            nops.to_str().unwrap(),
        ],
        vec!["trace", "--out", trace_out.to_str().unwrap()],
    ];
    for args in cases {
        // The read end is closed before the command writes anything: its first write
        // fails with EPIPE.
        let mut child = spawn_piped(&args);
        drop(child.stdout.take());
        exits_quietly(&mut child, &args);
    }
    let _ = std::fs::remove_dir_all(&d);
}

/// `| head -1`: the reader takes one line and goes away while the command still has
/// output to write.
#[test]
fn head_one_on_check_bench_and_disasm() {
    let d = tmp("head");
    let nops = nop_file(&d, 200_000);
    let cases: Vec<Vec<&str>> = vec![
        vec!["check", "--only", "topology,events"],
        vec!["bench", "--quick", "--filter", "idle"],
        vec![
            "disasm",
            "--engine",
            "pm4",
            "--gfx",
            "gfx942",
            nops.to_str().unwrap(),
        ],
    ];
    for args in cases {
        let mut child = spawn_piped(&args);
        let mut r = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        r.read_line(&mut first).unwrap();
        assert!(!first.is_empty(), "{args:?} printed nothing");
        drop(r);
        exits_quietly(&mut child, &args);
    }
    let _ = std::fs::remove_dir_all(&d);
}

#[test]
fn version_and_help() {
    for v in ["--version", "-V", "version"] {
        let o = kfdrt(&[v]);
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            format!("kfdrt {}\n", env!("CARGO_PKG_VERSION"))
        );
    }
    let h = String::from_utf8_lossy(&kfdrt(&["help"]).stdout).into_owned();
    for p in ["mi300x", "mi250x", "mi210", "rx7900xtx", "rx9070xt"] {
        assert!(
            h.contains(&format!("    {p}")),
            "help lacks preset {p}: {h}"
        );
    }
    assert!(h.contains("vram=SIZE") && h.contains("xnack=on|off"), "{h}");
    for g in [
        "topology",
        "memory",
        "queues",
        "pm4",
        "aql",
        "sdma",
        "events",
        "signals",
        "streams",
        "xstream",
        "callbacks",
        "memops",
        "faults",
        "copies",
        "managed",
        "vmm",
    ] {
        assert!(
            h.contains(&format!("    {g} ")),
            "help lacks group {g}: {h}"
        );
    }
    // Sizes: 1G and 1GiB mean the same.
    for size in ["1G", "1GiB", "1024M", "1024MiB"] {
        let o = kfdrt(&[
            "info",
            "--device",
            &format!("emu:mi300x[vram={size}]"),
            "--json",
        ]);
        assert_eq!(o.status.code(), Some(0), "{size}: {}", stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["agents"][0]["vram_bytes"], 1u64 << 30, "{size}");
    }
    let o = kfdrt(&["check", "--list", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON list");
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.len() >= 30);
    assert!(checks
        .iter()
        .any(|c| c["name"] == "sdma.copy_linear_bytes" && c["group"] == "sdma"));
}

/// Every row of the README's exit-code table, with the message naming what the user did.
#[test]
fn every_exit_code_of_the_readme() {
    let d = tmp("exits");
    let nops = nop_file(&d, 4);
    let empty = d.join("empty.bin");
    std::fs::write(&empty, b"").unwrap();
    let text = d.join("words.bin");
    std::fs::write(&text, b"c0001000 00000000\n").unwrap();
    let bad = d.join("bad.bin");
    std::fs::write(&bad, 0x8000_0000u32.to_le_bytes().repeat(2)).unwrap();
    let p = |p: &PathBuf| p.to_str().unwrap().to_string();
    #[rustfmt::skip]
    let cases: Vec<(Vec<String>, i32, &str)> = vec![
        // 0: success
        (vec!["disasm".into(), "--engine".into(), "pm4".into(), "--gfx".into(), "gfx942".into(), p(&nops)], 0, ""),
        // 1: a check failed
        (vec!["check".into(), "--only".into(), "selftest".into(), "--inject-fault".into()], 1, ""),
        // 1: input not decoded cleanly (PM4 type-2 headers), or empty
        (vec!["disasm".into(), "--engine".into(), "pm4".into(), "--gfx".into(), "gfx942".into(), p(&bad)], 1, ""),
        (vec!["disasm".into(), "--engine".into(), "sdma".into(), p(&empty)], 1, "is empty"),
        // 2: usage errors
        (vec!["check".into(), "--bogus".into()], 2, "unknown option --bogus"),
        (vec!["check".into(), "--repeat".into(), "x".into()], 2, "--repeat"),
        (vec!["check".into(), "--only".into(), "nothing-matches".into()], 2, "--only \"nothing-matches\" matches no check"),
        (vec!["bench".into(), "--filter".into(), "nothing-matches".into()], 2, "--filter \"nothing-matches\" matches no figure"),
        (vec!["info".into(), "--device".into(), "gpu0".into()], 2, "--device \"gpu0\": unknown device spec"),
        (vec!["check".into(), "--device".into(), "".into()], 2, "--device \"\" names no device"),
        (vec!["bench".into(), "--device".into(), "emu:nosuch".into()], 2, "--device \"emu:nosuch\": unknown preset"),
        (vec!["info".into(), "--device".into(), "emu:mi300x[vram=lots]".into()], 2, "bad option \"vram=lots\""),
        (vec!["trace".into(), "--device".into(), "gpu0".into()], 2, "--device \"gpu0\""),
        (vec!["info".into(), "--sysfs".into(), "/nonexistent-kfd-topology".into()], 2, "--sysfs \"/nonexistent-kfd-topology\""),
        (vec!["disasm".into(), "--engine".into(), "pm4".into(), "/nonexistent/file".into()], 2, "needs --gfx"),
        (vec!["disasm".into(), "--engine".into(), "aql".into(), "/nonexistent/file".into()], 2, "reading /nonexistent/file"),
        (vec!["bench".into(), "--compare".into(), "/nonexistent/anchor".into()], 2, "--compare \"/nonexistent/anchor\""),
        (vec!["trace".into(), "--out".into(), "/nonexistent-dir/t.json".into()], 2, "writing /nonexistent-dir/t.json"),
        (vec!["help".into(), "nosuch".into()], 2, "no such command"),
        // 3: the device could not be opened (no /dev/kfd here) / trace on hardware
        (vec!["info".into(), "--device".into(), "hw".into()], 3, "opening --device \"hw\""),
        (vec!["trace".into(), "--device".into(), "hw".into()], 3, "trace needs the emulated device"),
    ];
    let hw = std::path::Path::new("/dev/kfd").exists();
    for (args, code, msg) in cases {
        if hw && args.contains(&"hw".to_string()) && args[0] == "info" {
            continue; // a machine with a GPU opens it
        }
        let o = bin().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(code), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(msg), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
        // Messages start with what the user did, not internal function names.
        for internal in ["DeviceSpec::parse", "open_backend(", "InvalidDevice:"] {
            assert!(!stderr(&o).contains(internal), "{args:?}: {}", stderr(&o));
        }
    }
    // --progress reports on stderr (not a terminal here), ending with the totals.
    let o = disasm("pm4", "gfx942", &["--progress", &p(&nops)]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stderr(&o).ends_with("disasm: 0.0 MiB of 0.0 MiB (100%) decoded, 4 packets\n"),
        "{}",
        stderr(&o)
    );
    // Without it, and stderr not a terminal: no progress.
    let o = disasm("pm4", "gfx942", &[&p(&nops)]);
    assert_eq!(stderr(&o), "");
    // A binary input that is hex text gets a hint.
    let o = disasm("pm4", "gfx942", &[&p(&text)]);
    assert!(stderr(&o).contains("add --hex"), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// One public single-node dump (folder under shared/data/topology), as numbers copied
/// from its `properties` (and `mem_banks/0/properties` where the dump has it).
struct Dump {
    folder: &'static str,
    gfx_target_version: u32,
    simd_count: u32,
    simd_per_cu: u32,
    array_count: u32,
    cu_per_simd_array: u32,
    num_xcc: u32,
    wave_front_size: u32,
    num_sdma_engines: u32,
    num_sdma_xgmi_engines: u32,
    num_cp_queues: u32,
    /// `None`: the dump's `drm_render_minor` is a template placeholder.
    drm_render_minor: Option<u32>,
    vram: Option<u64>,
    gfx: &'static str,
    cus: u32,
}

#[rustfmt::skip]
const DUMPS: &[Dump] = &[
    Dump { folder: "mi300x_spx_gfx942_rocprofiler-sdk", gfx_target_version: 90402, simd_count: 1216, simd_per_cu: 4, array_count: 32, cu_per_simd_array: 10, num_xcc: 8, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 14, num_cp_queues: 24, drm_render_minor: Some(0), vram: Some(206141652992), gfx: "gfx942", cus: 304 },
    Dump { folder: "mi300x_spx_gfx942_gpuq", gfx_target_version: 90402, simd_count: 1216, simd_per_cu: 4, array_count: 32, cu_per_simd_array: 10, num_xcc: 8, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 14, num_cp_queues: 24, drm_render_minor: None, vram: None, gfx: "gfx942", cus: 304 },
    Dump { folder: "mi300x_cpx_gfx942_k8s-device-plugin", gfx_target_version: 90402, simd_count: 152, simd_per_cu: 4, array_count: 4, cu_per_simd_array: 10, num_xcc: 1, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 0, num_cp_queues: 24, drm_render_minor: Some(128), vram: None, gfx: "gfx942", cus: 38 },
    Dump { folder: "mi308x_cpx_gfx942_k8s-device-plugin", gfx_target_version: 90402, simd_count: 80, simd_per_cu: 4, array_count: 4, cu_per_simd_array: 10, num_xcc: 1, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 0, num_cp_queues: 24, drm_render_minor: Some(128), vram: Some(51539607552), gfx: "gfx942", cus: 20 },
    Dump { folder: "mi300a_gfx942_test-resources-readme", gfx_target_version: 90402, simd_count: 912, simd_per_cu: 4, array_count: 24, cu_per_simd_array: 10, num_xcc: 6, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 10, num_cp_queues: 24, drm_render_minor: Some(128), vram: None, gfx: "gfx942", cus: 228 },
    Dump { folder: "mi350x_gfx950_rocprofiler-sdk", gfx_target_version: 90500, simd_count: 1024, simd_per_cu: 4, array_count: 32, cu_per_simd_array: 9, num_xcc: 8, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 14, num_cp_queues: 24, drm_render_minor: Some(0), vram: Some(309220868096), gfx: "gfx950", cus: 256 },
    Dump { folder: "mi210_gfx90a_k8s-device-plugin", gfx_target_version: 90010, simd_count: 416, simd_per_cu: 4, array_count: 8, cu_per_simd_array: 14, num_xcc: 1, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 3, num_cp_queues: 24, drm_render_minor: Some(128), vram: None, gfx: "gfx90a", cus: 104 },
    Dump { folder: "mi100_gfx908_rocmi", gfx_target_version: 90008, simd_count: 480, simd_per_cu: 4, array_count: 8, cu_per_simd_array: 16, num_xcc: 1, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 6, num_cp_queues: 24, drm_render_minor: Some(128), vram: None, gfx: "gfx908", cus: 120 },
    Dump { folder: "radeonvii_gfx906_rocprofiler-sdk", gfx_target_version: 90006, simd_count: 240, simd_per_cu: 4, array_count: 4, cu_per_simd_array: 16, num_xcc: 1, wave_front_size: 64, num_sdma_engines: 2, num_sdma_xgmi_engines: 0, num_cp_queues: 24, drm_render_minor: Some(0), vram: Some(17163091968), gfx: "gfx906", cus: 60 },
    Dump { folder: "rx7900xtx_gfx1100_tinygrad", gfx_target_version: 110000, simd_count: 192, simd_per_cu: 2, array_count: 12, cu_per_simd_array: 8, num_xcc: 1, wave_front_size: 32, num_sdma_engines: 2, num_sdma_xgmi_engines: 0, num_cp_queues: 8, drm_render_minor: None, vram: None, gfx: "gfx1100", cus: 96 },
    Dump { folder: "w7500_gfx1102_rocprofiler-sdk", gfx_target_version: 110002, simd_count: 56, simd_per_cu: 2, array_count: 4, cu_per_simd_array: 8, num_xcc: 1, wave_front_size: 32, num_sdma_engines: 2, num_sdma_xgmi_engines: 0, num_cp_queues: 8, drm_render_minor: Some(0), vram: Some(8573157376), gfx: "gfx1102", cus: 28 },
    Dump { folder: "navi23-0x73ef_gfx1032_rocprofiler-sdk", gfx_target_version: 100302, simd_count: 64, simd_per_cu: 2, array_count: 4, cu_per_simd_array: 8, num_xcc: 1, wave_front_size: 32, num_sdma_engines: 2, num_sdma_xgmi_engines: 0, num_cp_queues: 8, drm_render_minor: Some(0), vram: Some(8573157376), gfx: "gfx1032", cus: 32 },
    Dump { folder: "rx9070xt_gfx1201_rocprofiler-sdk", gfx_target_version: 120001, simd_count: 128, simd_per_cu: 2, array_count: 8, cu_per_simd_array: 8, num_xcc: 1, wave_front_size: 32, num_sdma_engines: 2, num_sdma_xgmi_engines: 0, num_cp_queues: 4, drm_render_minor: Some(0), vram: Some(17095983104), gfx: "gfx1201", cus: 64 },
    Dump { folder: "_unverified/rx7900xtx_gfx1100_unknown-repo-test", gfx_target_version: 110000, simd_count: 192, simd_per_cu: 2, array_count: 12, cu_per_simd_array: 8, num_xcc: 1, wave_front_size: 32, num_sdma_engines: 2, num_sdma_xgmi_engines: 0, num_cp_queues: 8, drm_render_minor: Some(128), vram: None, gfx: "gfx1100", cus: 96 },
];

/// `info --sysfs NODE_DIR` on a directory laid out like each dump: `properties` (with
/// the dump's placeholder where it has one), `mem_banks/0/properties` where it has VRAM.
/// Only the numbers above are written: missing keys are reported as notes.
#[test]
fn info_reads_each_single_node_dump() {
    let d = tmp("nodes");
    for (i, dump) in DUMPS.iter().enumerate() {
        let node = d.join(format!("{i}"));
        std::fs::create_dir_all(&node).unwrap();
        let minor = match dump.drm_render_minor {
            Some(m) => m.to_string(),
            None => "{}".into(),
        };
        let props = format!(
            "simd_count {}\nmem_banks_count 1\nmax_waves_per_simd 8\nwave_front_size {}\n\
             array_count {}\nsimd_arrays_per_engine 1\ncu_per_simd_array {}\nsimd_per_cu {}\n\
             gfx_target_version {}\nvendor_id 4098\ndrm_render_minor {minor}\n\
             num_sdma_engines {}\nnum_sdma_xgmi_engines {}\nnum_sdma_queues_per_engine 8\n\
             num_cp_queues {}\nnum_xcc {}\n",
            dump.simd_count,
            dump.wave_front_size,
            dump.array_count,
            dump.cu_per_simd_array,
            dump.simd_per_cu,
            dump.gfx_target_version,
            dump.num_sdma_engines,
            dump.num_sdma_xgmi_engines,
            dump.num_cp_queues,
            dump.num_xcc,
        );
        std::fs::write(node.join("properties"), props).unwrap();
        if let Some(v) = dump.vram {
            std::fs::create_dir_all(node.join("mem_banks/0")).unwrap();
            std::fs::write(
                node.join("mem_banks/0/properties"),
                format!("heap_type 1\nsize_in_bytes {v}\nflags 0\nwidth 4096\nmem_clk_max 1300\n"),
            )
            .unwrap();
        }
        let o = kfdrt(&["info", "--sysfs", node.to_str().unwrap(), "--json"]);
        assert_eq!(o.status.code(), Some(0), "{}: {}", dump.folder, stderr(&o));
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let a = &v["agents"][0];
        assert_eq!(v["agents"].as_array().unwrap().len(), 1, "{}", dump.folder);
        assert_eq!(a["gfx_target"], dump.gfx, "{}", dump.folder);
        assert_eq!(a["compute_units"], dump.cus, "{}", dump.folder);
        assert_eq!(a["num_xcc"], dump.num_xcc, "{}", dump.folder);
        assert_eq!(
            a["wave_front_size"], dump.wave_front_size,
            "{}",
            dump.folder
        );
        assert_eq!(a["num_cp_queues"], dump.num_cp_queues, "{}", dump.folder);
        // Dumps without mem_banks/: VRAM unknown (null), not 0.
        assert_eq!(
            a["vram_bytes"],
            serde_json::json!(dump.vram),
            "{}",
            dump.folder
        );
        let err = stderr(&o);
        assert_eq!(
            err.contains("\"drm_render_minor {}\" is not a number"),
            dump.drm_render_minor.is_none(),
            "{}: {err}",
            dump.folder
        );
        assert!(err.contains("no gpu_id file"), "{}: {err}", dump.folder);
        // The text form too.
        let o = kfdrt(&["info", "--sysfs", node.to_str().unwrap()]);
        let s = String::from_utf8_lossy(&o.stdout);
        assert!(
            s.contains(&format!("gfx target:          {}", dump.gfx))
                && s.contains("one node, as posted"),
            "{}: {s}",
            dump.folder
        );
    }
    // A directory with neither a tree nor a node's properties.
    let o = kfdrt(&["info", "--sysfs", d.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let _ = std::fs::remove_dir_all(&d);
}

/// `check` prints each row when its check finishes: the first row arrives while the
/// run (10000 repeats) is far from done, and an interrupt (Ctrl-C) keeps the rows so far.
#[test]
fn check_rows_arrive_as_checks_finish() {
    let mut child = bin()
        .args([
            "check",
            "--only",
            "topology.kfd_version",
            "--repeat",
            "10000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut r = BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    while lines.len() < 3 {
        let mut l = String::new();
        assert!(r.read_line(&mut l).unwrap() > 0, "output ended: {lines:?}");
        lines.push(l);
    }
    assert!(lines[0].starts_with("# device"), "{lines:?}");
    assert!(lines[1].starts_with("RUN CHECK"), "{lines:?}");
    assert!(
        lines[2].starts_with("1   topology.kfd_version") && lines[2].contains("PASS"),
        "{lines:?}"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "a row arrived only after the whole run"
    );
    // Ctrl-C: the rows printed so far stay printed.
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = wait_bounded(&mut child, Duration::from_secs(60), "check after SIGINT");
    assert!(!status.success());
}
