//! Builds the C/C++ programs under `tests/c/` with gcc/g++ against Debian's HIP 5.2 headers
//! and library, then runs them on kfdrt's `libamdhip64.so.5` (LD_LIBRARY_PATH) on the
//! emulator. Needs Debian's `libamdhip64-dev` (installed by `.ci/run`).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{lib_dir, our_lib, output_within};

fn compile(compiler: &str, src: &str, out: &Path, libs: &[&str]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let src = dir.join(src);
    let o = Command::new(compiler)
        .args(["-Wall", "-Werror", "-O1", "-D__HIP_PLATFORM_AMD__"])
        // The shared check.h.
        .arg("-I")
        .arg(&dir)
        .arg(&src)
        .arg("-o")
        .arg(out)
        .args(libs)
        .output()
        .unwrap_or_else(|e| panic!("{compiler}: {e}"));
    assert!(
        o.status.success(),
        "{compiler} {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Run with a bound; stdout and stderr.
fn run(mut cmd: Command, limit: Duration) -> (bool, String, String) {
    let o = output_within(&mut cmd, limit);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn struct_layouts_and_enum_values_match_debian_header() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-layout");
    compile("gcc", "layout.c", &exe, &["-ldl"]);
    let mut cmd = Command::new(&exe);
    cmd.arg(our_lib());
    let (ok, out, err) = run(cmd, Duration::from_secs(60));
    assert!(ok, "layout check failed:\n{out}{err}");
    assert!(out.contains(" 0 bad"), "{out}");
    println!("{out}");
}

#[test]
fn debian_linked_program_runs_on_kfdrt_library() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-api");
    // Linked against Debian's libamdhip64.so.5, run on ours.
    compile("g++", "api.cpp", &exe, &["-lamdhip64", "-ldl"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu");
    let (ok, out, err) = run(cmd, Duration::from_secs(300));
    assert!(ok, "api program failed:\n{out}{err}");
    assert!(out.contains("checks passed"), "{out}");
    // Symbol versions match Debian's: the loader prints no "no version information" warning.
    assert!(err.is_empty(), "stderr not empty:\n{err}");
}

#[test]
fn peer_access_memory_info_reset_and_ipc_through_the_c_api() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-device");
    compile("g++", "device.cpp", &exe, &["-lamdhip64"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x*2");
    let (ok, out, err) = run(cmd, Duration::from_secs(120));
    assert!(ok, "device program failed:\n{out}{err}");
    assert!(out.contains("allocated_64MiB_drop=1"), "{out}");
    assert!(out.contains("device checks passed: 47"), "{out}");
    assert!(err.is_empty(), "stderr not empty:\n{err}");
}

#[test]
fn ipc_memory_and_pool_handles_between_two_processes() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-ipc");
    compile("g++", "ipc.cpp", &exe, &["-lamdhip64"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x");
    let (ok, out, err) = run(cmd, Duration::from_secs(240));
    assert!(ok, "ipc program failed:\n{out}{err}");
    assert!(out.contains("child checks passed:"), "{out}");
    assert!(out.contains("parent checks passed:"), "{out}");
    assert!(err.is_empty(), "stderr not empty:\n{err}");
}

/// `tests/c/idle.cpp`: the idle query/synchronize fast path keeps handle validation
/// (destroyed after being cached, on this thread or another, also while a thread queries
/// it; foreign; another kind), HIP 5.2's last error, pending callbacks, the null stream's
/// wait for busy blocking streams, the current device's null stream and sticky errors.
#[test]
fn idle_query_and_synchronize_fast_path_keeps_every_rule() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-idle");
    compile("g++", "idle.cpp", &exe, &["-lamdhip64", "-lpthread"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x*2");
    let (ok, out, err) = run(cmd, Duration::from_secs(180));
    assert!(ok, "idle program failed:\n{out}{err}");
    assert!(out.contains("idle checks passed: "), "{out}");
    assert!(err.is_empty(), "stderr not empty:\n{err}");
}

#[test]
fn per_thread_default_stream_through_the_spt_entry_points() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-spt");
    compile("g++", "spt.cpp", &exe, &["-lamdhip64", "-lpthread"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x");
    let (ok, out, err) = run(cmd, Duration::from_secs(180));
    assert!(ok, "spt program failed:\n{out}{err}");
    assert!(out.contains("spt checks passed: "), "{out}");
    assert!(err.is_empty(), "stderr not empty:\n{err}");
}

/// `tests/c/memcheck.cpp`: fills, copies and stream memory operations refuse addresses in
/// no allocation (the stream stays usable), check sizes against the size asked for and
/// hipMemcpy's kind as CLR 5.2 does; hipHostRegister takes any pointer and size. The
/// program passes on Debian's CLR 5.2 under `kfdrt emu-run` too.
#[test]
fn memory_checks_of_copies_fills_and_stream_memory_operations() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-memcheck");
    compile("g++", "memcheck.cpp", &exe, &["-lamdhip64"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x");
    let (ok, out, err) = run(cmd, Duration::from_secs(180));
    assert!(ok, "memcheck program failed:\n{out}{err}");
    assert!(out.contains("memcheck checks passed: "), "{out}");
    assert!(err.is_empty(), "stderr not empty:\n{err}");
}

/// `tests/c/driver_api.cpp`: hipMemcpyHtoD/DtoH/DtoD (and Async), hipMemcpyWithStream,
/// hipMemsetD8/D16/D32, hipMemGetAddressRange, hipInit, hipDeviceGetName/TotalMem/
/// ComputeCapability and hipModuleLoadDataEx are exported and do the wrapped call's work.
#[test]
fn driver_style_copies_fills_and_device_queries() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-driver-api");
    compile("g++", "driver_api.cpp", &exe, &["-lamdhip64"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x");
    let (ok, out, err) = run(cmd, Duration::from_secs(180));
    assert!(ok, "driver_api program failed:\n{out}{err}");
    assert!(out.contains("driver_api checks passed: "), "{out}");
    assert!(err.is_empty(), "stderr not empty:\n{err}");
}

#[test]
fn vmm_shareable_handles_in_process_and_across_fork() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-vmm");
    compile("g++", "vmm.cpp", &exe, &["-lamdhip64"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x");
    let (ok, out, err) = run(cmd, Duration::from_secs(180));
    assert!(ok, "vmm program failed:\n{out}{err}");
    assert!(out.contains("child checks passed: "), "{out}");
    assert!(out.contains("parent checks passed: "), "{out}");
    assert!(err.is_empty(), "stderr not empty:\n{err}");
}

/// `tests/c/clr_parity.cpp` on this library prints what Debian's CLR 5.2 printed
/// (`abi/clr_parity.txt`, measured under `kfdrt emu-run`), except the deliberate
/// differences: `hipHostMallocNumaUser` is NotSupported (KFD's GTT pages follow no process
/// NUMA policy), `hipHostGetFlags` returns Coherent/NonCoherent (CLR 5.2 loses bits >= 16),
/// fine-grained VRAM is NotSupported (CLR fails it with OutOfMemory on the emulator); and
/// `hipDeviceGetAttribute` answers listed in `attributes` below.
#[test]
fn answers_match_clr_5_2_measured() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-clr-parity");
    compile("g++", "clr_parity.cpp", &exe, &["-lamdhip64"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x");
    let (ok, out, err) = run(cmd, Duration::from_secs(120));
    assert!(ok, "clr_parity failed:\n{out}{err}");
    let clr =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("abi/clr_parity.txt"))
            .expect("abi/clr_parity.txt");
    let differences = [
        (
            "hipHostMalloc(&p, 4096, hipHostMallocNumaUser)                         hipSuccess",
            "hipHostMalloc(&p, 4096, hipHostMallocNumaUser)                         hipErrorNotSupported",
        ),
        (
            "hostMalloc 0x40000000 -> hipSuccess, getFlags hipSuccess 0x0",
            "hostMalloc 0x40000000 -> hipSuccess, getFlags hipSuccess 0x40000000",
        ),
        (
            "hostMalloc 0x80000000 -> hipSuccess, getFlags hipSuccess 0x0",
            "hostMalloc 0x80000000 -> hipSuccess, getFlags hipSuccess 0x80000000",
        ),
        (
            "hipExtMallocWithFlags(&p, 4096, hipDeviceMallocFinegrained)            hipErrorOutOfMemory",
            "hipExtMallocWithFlags(&p, 4096, hipDeviceMallocFinegrained)            hipErrorNotSupported",
        ),
    ];
    // hipDeviceGetAttribute(attribute) answers that differ from CLR 5.2's: no cooperative
    // launches (CLR: 1); no textures, and no ASIC revision in the topology (CLR answers);
    // values for attributes CLR 5.2 did not implement (PciDomainID, TotalGlobalMem,
    // IsLargeBar: InvalidValue there); memory pools implemented (CLR 5.2: 0); no images.
    let coop = "hipSuccess 0";
    let none = "hipErrorNotSupported -7";
    let attributes = [
        (10, coop),
        (11, coop),
        (10007, coop),
        (10008, coop),
        (10009, coop),
        (10010, coop),
        (39, none),
        (43, none),
        (44, none),
        (49, none),
        (50, none),
        (51, none),
        (81, none),
        (82, none),
        (10012, none),
        (69, "hipSuccess 0"),
        (84, "hipSuccess 2147483647"),
        (10011, "hipSuccess 1"),
        (88, "hipSuccess 1"),
        (10014, "hipSuccess 0"),
    ];
    let attribute = |l: &str| {
        let n: i32 = l
            .strip_prefix("attribute ")?
            .split(' ')
            .next()?
            .parse()
            .ok()?;
        let (_, ours) = attributes.iter().find(|(a, _)| *a == n)?;
        Some(format!("attribute {n} {ours}"))
    };
    let want: Vec<String> = clr
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            differences
                .iter()
                .find(|(c, _)| *c == l)
                .map(|(_, o)| (*o).to_owned())
                .or_else(|| attribute(l))
                .unwrap_or_else(|| l.to_owned())
        })
        .collect();
    let got: Vec<&str> = out.lines().collect();
    assert_eq!(got, want, "stderr:\n{err}");
    assert_eq!(want.len(), 167);
}

/// `tests/c/exit_calls.cpp`: HIP calls from a global object's destructor and from a
/// worker thread's `thread_local` object's destructor, both run after this library's
/// thread-local state was destroyed, return what CLR 5.2 returned (hipSuccess for each,
/// on the GPU the thread had set; measured under `kfdrt emu-run --device emu:mi250x*2`)
/// and the program exits 0 (it aborted on a Rust thread-local access panic before).
#[test]
fn calls_after_thread_local_destruction_succeed() {
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-exit-calls");
    compile("g++", "exit_calls.cpp", &exe, &["-lamdhip64", "-lpthread"]);
    let mut cmd = Command::new(&exe);
    cmd.env("LD_LIBRARY_PATH", lib_dir(tmp))
        .env("KFDRT_DEVICE", "emu:mi250x*2");
    let (ok, out, err) = run(cmd, Duration::from_secs(120));
    assert!(ok, "exit_calls failed:\n{out}{err}");
    assert_eq!(
        out, "thread make 0 0 0 0\nsetDevice 0\nglobal make 0 0 0 0\n",
        "stderr:\n{err}"
    );
    let calls = [
        "record",
        "sync",
        "memcpy",
        "evdestroy",
        "devsync",
        "sdestroy",
        "free",
        "lasterror",
    ];
    let run = |who: &str| {
        calls
            .iter()
            .map(move |c| format!("{who} {c} 0"))
            .chain([format!("{who} done")])
            .collect::<Vec<_>>()
    };
    let want: Vec<String> = run("thread")
        .into_iter()
        .chain(["device1 getDevice 0 1 malloc 0 attributes 0 device 1 free 0".to_owned()])
        .chain(run("global"))
        .collect();
    let got: Vec<&str> = err.lines().collect();
    assert_eq!(got, want);
}

#[test]
fn exports_carry_debian_version_nodes() {
    let o = Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(our_lib())
        .output()
        .expect("readelf");
    let syms = String::from_utf8_lossy(&o.stdout);
    let table = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("abi/libamdhip64.so.5.symbols"),
    )
    .expect("symbol table");
    let mut checked = 0;
    for line in syms.lines() {
        let Some(sym) = line.split_whitespace().nth(7) else {
            continue;
        };
        let Some((name, node)) = sym.split_once("@@") else {
            continue;
        };
        if !node.starts_with("hip_") {
            continue;
        }
        let want = table
            .lines()
            .find_map(|l| l.strip_prefix(name).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("{name} not in Debian's table"));
        assert_eq!(node, want, "{name}");
        checked += 1;
    }
    assert!(checked >= 90, "only {checked} versioned exports");
    for (name, node) in [
        ("hipMalloc", "hip_4.2"),
        ("hipMallocAsync", "hip_5.1"),
        ("hipStreamWaitValue32", "hip_4.4"),
        ("hipMemcpyHtoD", "hip_4.2"),
        ("hipModuleLoadDataEx", "hip_4.2"),
    ] {
        assert!(syms.contains(&format!("{name}@@{node}")), "{name}@@{node}");
    }
    let o = Command::new("readelf")
        .arg("-d")
        .arg(our_lib())
        .output()
        .expect("readelf");
    assert!(String::from_utf8_lossy(&o.stdout).contains("[libamdhip64.so.5]"));
}

/// Every function exported as not implemented (`amdhip64::unsupported`) is in the library
/// under its Debian version node, returns hipErrorNotSupported and leaves it as the
/// thread's last error: a program referencing one loads and gets a clear error.
#[test]
fn unimplemented_functions_are_exported_and_not_supported() {
    let names = amdhip64::unsupported::NOT_SUPPORTED;
    assert!(names.len() > 50, "{} names", names.len());
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let exe = tmp.join("hip-not-supported");
    compile("gcc", "not_supported.c", &exe, &["-ldl"]);
    let mut cmd = Command::new(&exe);
    cmd.arg(our_lib()).args(names).env("KFDRT_DEVICE", "emu");
    let (ok, out, err) = run(cmd, Duration::from_secs(120));
    assert!(ok, "not-supported check failed:\n{out}{err}");
    assert!(
        out.contains(&format!("{} functions, 0 bad", names.len())),
        "{out}"
    );
    // Each is in Debian's table, with the node readelf shows for it (checked for every
    // versioned export by `exports_carry_debian_version_nodes`).
    let table = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("abi/libamdhip64.so.5.symbols"),
    )
    .expect("symbol table");
    for n in names {
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().next() == Some(n)),
            "{n} is not a Debian HIP 5.2 function"
        );
    }
}
