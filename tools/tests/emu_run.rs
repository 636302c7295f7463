//! `kfdrt emu-run` runs Debian's unmodified `rocminfo` (ROCr 5.2 + libhsakmt) on the
//! emulated device through the kfdrt-preload library.

use std::path::PathBuf;
use std::process::Command;
use std::sync::Once;

/// Build the cdylibs (not dependencies of the CLI, so `cargo test` does not build them):
/// the preload library and kfdrt's libamdhip64.
fn build_libs() -> PathBuf {
    static BUILD: Once = Once::new();
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_kfdrt"));
    let dir = exe.parent().unwrap().to_path_buf();
    BUILD.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut c = Command::new(cargo);
        c.args(["build", "-q", "-p", "kfdrt-preload", "-p", "kfdrt-hip"]);
        if !cfg!(debug_assertions) {
            c.arg("--release");
        }
        let st = c.status().expect("run cargo build");
        assert!(
            st.success(),
            "cargo build -p kfdrt-preload -p kfdrt-hip failed"
        );
    });
    dir
}

/// The preload library.
fn preload_lib() -> PathBuf {
    let lib = build_libs().join("libkfdrt_preload.so");
    assert!(lib.is_file(), "{} was not built", lib.display());
    lib
}

/// What a program run under `kfdrt emu-run` left behind.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    /// stdout and stderr, for failure messages.
    fn all(&self) -> String {
        format!("stdout:\n{}\nstderr:\n{}", self.stdout, self.stderr)
    }

    /// The names of the program's `ok NAME ...` lines, in order.
    fn oks(&self) -> Vec<&str> {
        self.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("ok "))
            .map(|l| l.split_whitespace().next().unwrap_or(""))
            .collect()
    }

    /// Asserts exit 0 and the `ok` lines `want`, in order.
    fn expect_oks(&self, what: &str, want: &[&str]) {
        // timeout(1) exits 124 on a hang: the run must end by itself.
        assert_ne!(self.code, Some(124), "{what} hung\n{}", self.all());
        assert_eq!(self.oks(), want, "{what}\n{}", self.all());
        assert_eq!(self.code, Some(0), "{what} failed\n{}", self.all());
    }
}

/// Run `kfdrt emu-run --device SPEC -- timeout SECS PROGRAM ARGS...`.
fn emu_run(spec: &str, secs: u32, program: &std::ffi::OsStr, args: &[&std::ffi::OsStr]) -> Run {
    let lib = preload_lib();
    let out = Command::new(env!("CARGO_BIN_EXE_kfdrt"))
        .args([
            "emu-run",
            "--device",
            spec,
            "--",
            "timeout",
            &secs.to_string(),
        ])
        .arg(program)
        .args(args)
        .env("KFDRT_PRELOAD_LIB", &lib)
        .output()
        .expect("run kfdrt emu-run");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `kfdrt emu-run --device SPEC -- rocminfo`; returns (exit code, stdout, stderr).
fn rocminfo(spec: &str) -> (i32, String, String) {
    let r = emu_run(spec, 120, "rocminfo".as_ref(), &[]);
    (r.code.unwrap_or(-1), r.stdout, r.stderr)
}

/// The agents rocminfo printed: each agent's lines.
fn agents(stdout: &str) -> Vec<String> {
    let body = stdout.split("HSA Agents").nth(1).unwrap_or("");
    body.split("*******")
        .map(str::trim)
        .filter(|s| s.contains("Name:"))
        .map(str::to_owned)
        .collect()
}

fn field<'a>(agent: &'a str, key: &str) -> Option<&'a str> {
    agent
        .lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim_start_matches(':').trim())
}

#[test]
fn rocminfo_lists_two_mi250x_gcds() {
    let (code, out, err) = rocminfo("emu:mi250x*2");
    assert_eq!(code, 0, "rocminfo failed\nstdout:\n{out}\nstderr:\n{err}");
    assert!(out.contains("ROCk module is loaded"), "{out}");
    let a = agents(&out);
    assert_eq!(a.len(), 3, "expected CPU + 2 GPU agents:\n{out}");
    assert_eq!(field(&a[0], "Device Type"), Some("CPU"), "{}", a[0]);
    for gpu in &a[1..] {
        assert_eq!(field(gpu, "Name"), Some("gfx90a"), "{gpu}");
        assert_eq!(field(gpu, "Device Type"), Some("GPU"), "{gpu}");
        assert_eq!(field(gpu, "Compute Unit"), Some("110"), "{gpu}");
        assert_eq!(field(gpu, "SIMDs per CU"), Some("4"), "{gpu}");
        assert_eq!(field(gpu, "Wavefront Size"), Some("64(0x40)"), "{gpu}");
        assert_eq!(field(gpu, "Chip ID"), Some("29708(0x740c)"), "{gpu}");
        assert_eq!(field(gpu, "L1"), Some("16(0x10) KB"), "{gpu}");
        assert_eq!(field(gpu, "L2"), Some("8192(0x2000) KB"), "{gpu}");
        // The VRAM pool: 64 GiB coarse-grained, allocatable.
        assert!(
            gpu.contains("GLOBAL; FLAGS: COARSE GRAINED") && gpu.contains("67108864(0x4000000) KB"),
            "{gpu}"
        );
        assert!(
            gpu.contains("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-"),
            "{gpu}"
        );
    }
    // The two GCDs are distinct nodes.
    assert_ne!(field(&a[1], "Uuid"), field(&a[2], "Uuid"));
}

/// ROCr 5.2 (Debian 12) predates gfx942 and gfx1100: its ISA table
/// (`IsaRegistry::GetSupportedIsas` in src/core/runtime/isa.cpp, tag rocm-5.2.3) ends at
/// gfx90c / gfx1035, so `GpuAgent`'s constructor (amd_gpu_agent.cpp) throws "unrecognized
/// id" after the node's topology was read, and rocminfo lists the CPU agent. The emulated
/// side is served completely: the run reaches agent creation and exits 0.
#[test]
fn rocminfo_on_gfx942_and_gfx1100_reaches_agent_creation() {
    for spec in ["emu:mi300x", "emu:rx7900xtx"] {
        let (code, out, err) = rocminfo(spec);
        assert_eq!(
            code, 0,
            "{spec}: rocminfo failed\nstdout:\n{out}\nstderr:\n{err}"
        );
        let a = agents(&out);
        assert_eq!(field(&a[0], "Device Type"), Some("CPU"), "{spec}: {out}");
        let all = format!("{out}{err}");
        assert!(
            all.contains("The GPU node has an unrecognized id"),
            "{spec}: ROCr 5.2 was expected to reject the gfx target:\n{all}"
        );
    }
}

/// Compile `tests/foreign/FILE` with `compiler` (cc for C, g++ for C++ against Debian's
/// HIP headers) into cargo's per-test temporary directory.
fn compile(file: &str, compiler: &str, flags: &[&str], libs: &[&str]) -> PathBuf {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/foreign")
        .join(file);
    let stem = file.split('.').next().unwrap_or(file);
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(stem);
    let st = Command::new(compiler)
        .args(["-O1", "-Wall", "-Werror"])
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .args(libs)
        .status()
        .unwrap_or_else(|e| panic!("run {compiler}: {e}"));
    assert!(st.success(), "{compiler} {} failed", src.display());
    out
}

/// Compile `tests/foreign/NAME.c` (with `libs`).
fn compile_c(name: &str, libs: &[&str]) -> PathBuf {
    compile(&format!("{name}.c"), "cc", &[], libs)
}

/// Compile `tests/foreign/NAME.cpp` against Debian's HIP headers and `libamdhip64`.
fn compile_hip(name: &str) -> PathBuf {
    compile(
        &format!("{name}.cpp"),
        "g++",
        &["-D__HIP_PLATFORM_AMD__"],
        &["-lamdhip64"],
    )
}

/// A ROCr program of ours (tests/foreign/hsa_basic.c) on the emulated MI250X, one GCD and
/// two: every check prints `ok NAME` in order; the process exits 0. Device-to-device
/// copies and fills on one GPU run ROCr's blit kernels on the emulated shader core; between
/// the two GCDs ROCr copies with SDMA.
#[test]
fn hsa_runtime_program_runs_on_emulated_mi250x() {
    let exe = compile_c("hsa_basic", &["-lhsa-runtime64"]);
    for spec in ["emu:mi250x", "emu:mi250x*2"] {
        let r = emu_run(spec, 300, exe.as_os_str(), &[]);
        let mut want = vec![
            "agents",
            "pools",
            "queue_create",
            "barrier_and",
            "barrier_or",
            "async_handler",
            "doorbell_latency",
            "cu_set_mask",
            "async_copy",
            "d2d_copy_and_fill",
        ];
        if spec.ends_with("*2") {
            want.push("peer_copy");
        }
        want.extend(["svm_attributes", "shut_down"]);
        r.expect_oks(&format!("hsa_basic on {spec}"), &want);
        assert!(
            r.stdout.contains("name=gfx90a cus=110 wave=64"),
            "{}",
            r.all()
        );
    }
}

/// A kernel dispatched through ROCr: Debian's ROCr 5.2 loads a clang-19 code object for
/// gfx90a (hsa_code_object_reader + hsa_executable), the program writes an AQL
/// KERNEL_DISPATCH packet on an HSA queue, and the emulated shader core runs it; every
/// output element is checked. Code object v4 and v5 both load (ROCr 5.2 accepts ELF ABI
/// versions 2 and 3); v5 takes its work-group size from hidden arguments the program fills.
#[test]
fn kernel_dispatched_through_rocr_runs() {
    let exe = compile_c("hsa_dispatch", &["-lhsa-runtime64"]);
    for cov in ["4", "5"] {
        let elf = test_kernels::build_with(
            "cl/vadd.cl",
            "gfx90a",
            &[&format!("-mcode-object-version={cov}")],
        )
        .expect("build vadd for gfx90a");
        let co = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("vadd_v{cov}.co"));
        std::fs::write(&co, elf).expect("write the code object");
        let r = emu_run("emu:mi250x", 300, exe.as_os_str(), &[co.as_os_str()]);
        r.expect_oks(
            &format!("hsa_dispatch (code object v{cov})"),
            &["load", "dispatch", "result", "shut_down"],
        );
    }
}

/// IPC memory between two processes through ROCr (tests/foreign/hsa_ipc.c): the parent
/// exports 2 MiB of VRAM with hsa_amd_ipc_memory_create, an exec'd child attaches the
/// handle, reads the parent's bytes and writes its own, and the parent reads the child's
/// bytes from its allocation. libhsakmt 5.2 uses ROCm's out-of-tree IPC ioctls (0x80/0x81),
/// served by the preload over the emulator's dmabufs (preload/src/ipc.rs).
#[test]
fn ipc_memory_is_shared_between_two_processes() {
    let exe = compile_c("hsa_ipc", &["-lhsa-runtime64"]);
    let r = emu_run("emu:mi250x", 300, exe.as_os_str(), &[]);
    r.expect_oks(
        "hsa_ipc",
        &[
            "ipc_create",
            "child_attach",
            "child_read",
            "child_write",
            "parent_sees_child_writes",
            "shut_down",
        ],
    );
}

/// Debian's CLR (libamdhip64 5.2) on the emulated MI250X runs a HIP program to the end:
/// device discovery and properties from the emulated topology, streams with priorities,
/// events, a callback, stream memory ops (CLR's 64-bit wait is one of ROCclr's internal
/// blit kernels, executed by the emulated shader core), hipMemcpy and hipMemset. The
/// program checks every result itself and exits 1 at the first failure.
#[test]
fn hip_program_runs_to_the_end_on_clr() {
    let exe = compile_hip("hip_basic");
    let r = emu_run("emu:mi250x", 300, exe.as_os_str(), &[]);
    assert!(
        r.stdout
            .contains("ok device count=1 name=gfx90a:sramecc+:xnack- cus=110 warp=64"),
        "{}",
        r.all()
    );
    r.expect_oks(
        "hip_basic",
        &[
            "device",
            "streams",
            "events",
            "callback",
            "stream_memops",
            "memcpy",
            "memset",
            "done",
        ],
    );
}

/// HIP's memory APIs beyond hipMalloc on Debian's CLR (tests/foreign/hip_memory.cpp):
/// the stream-ordered allocator (default pool and a pool of our own: memset, H2D, D2D and
/// D2H copies through pool memory, release threshold, used-memory attribute, trim,
/// destroy) and managed memory (advice read back with hipMemRangeGetAttribute, prefetch
/// to the GPU, GPU memset on the range, prefetch back, data intact). VMM is a stub in CLR
/// 5.2 (hip_vm.cpp: hipMemAddressReserve succeeds without an address): the program says
/// so and the test holds it to that, so a CLR that implements it shows up here.
#[test]
fn hip_pools_and_managed_memory_run_on_clr() {
    let exe = compile_hip("hip_memory");
    let r = emu_run("emu:mi250x", 300, exe.as_os_str(), &[]);
    r.expect_oks("hip_memory", &["pools", "managed", "done"]);
    // CLR 5.2 answers hipDeviceAttributeMemoryPoolsSupported from HIP_MEM_POOL_SUPPORT
    // (default false); two live 1 MiB blocks are counted as used.
    assert!(
        r.stdout.contains("ok pools attr=0 used_with_two=2097152"),
        "{}",
        r.all()
    );
    assert!(
        r.stdout
            .contains("stub vmm hipMemAddressReserve returned hipSuccess and no address"),
        "{}",
        r.all()
    );
}

/// Raw KFD/DRM calls with bad arguments get the kernel's errno and never crash the
/// program; dup/close/fstat of the emulated fds behave; sysfs is served from memory; a
/// forked child gets EBADF on the parent's KFD fd and a device of its own on open.
#[test]
fn bad_arguments_get_kernel_errnos_and_fork_is_handled() {
    let exe = compile_c("kfd_abuse", &[]);
    let r = emu_run("emu:mi250x", 120, exe.as_os_str(), &[]);
    r.expect_oks(
        "kfd_abuse",
        &[
            "open", "efault", "einval", "dbg_trap", "mmap", "dup", "render", "sysfs", "fork",
        ],
    );
    assert!(r.stdout.contains("ok open version=1.22"), "{}", r.all());
}

#[test]
fn emu_run_usage_errors() {
    let lib = preload_lib();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kfdrt"))
            .args(args)
            .env("KFDRT_PRELOAD_LIB", &lib)
            .output()
            .expect("run kfdrt")
    };
    let o = run(&["emu-run", "--device", "emu:nosuch", "--", "true"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown preset"));
    let o = run(&["emu-run"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("no PROGRAM"));
    // The program's exit status comes back; 128+N for a signal.
    let o = run(&["emu-run", "--", "sh", "-c", "exit 7"]);
    assert_eq!(o.status.code(), Some(7));
    let o = run(&["emu-run", "--", "sh", "-c", "kill -TERM $$"]);
    assert_eq!(o.status.code(), Some(128 + 15));
    let o = run(&["help", "emu-run"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains("LD_PRELOAD"));
}

/// The `diff FUNCTION ERROR CHECK` lines of tests/foreign/hip_diff.cpp as (function,
/// cell): `ok`, the error's name, `wrong: WHAT`, or `skipped`.
fn diff_rows(stdout: &str) -> Vec<(String, String)> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("diff "))
        .filter(|l| *l != "end")
        .filter_map(|l| {
            let mut p = l.splitn(3, ' ');
            let (f, err, check) = (p.next()?, p.next()?, p.next().unwrap_or(""));
            let cell = match (err, check) {
                (_, "ok") => "ok".to_owned(),
                (_, "skipped") => "skipped".to_owned(),
                ("hipSuccess", c) => match c.strip_prefix("wrong:") {
                    Some(w) => format!("wrong: {w}"),
                    None => c.to_owned(),
                },
                (e, _) => e.to_owned(),
            };
            Some((f.to_owned(), cell))
        })
        .collect()
}

/// The same HIP program (tests/foreign/hip_diff.cpp, linked against Debian's
/// libamdhip64.so.5) under Debian's CLR on the emulated MI250X (`kfdrt emu-run`) and under
/// kfdrt's libamdhip64 (crate hip/, found first through LD_LIBRARY_PATH) on the same
/// emulated GPU, function by function. Prints the README's differential table
/// (`-- --nocapture`). Both runs must end by themselves; CLR must pass every row except the
/// virtual-memory ones, which CLR 5.2 leaves unimplemented (hip_vm.cpp).
#[test]
fn hip_differential_clr_and_kfdrt() {
    let exe = compile_hip("hip_diff");
    let clr = emu_run("emu:mi250x", 300, exe.as_os_str(), &[]);
    let libdir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kfdrt-libamdhip64");
    std::fs::create_dir_all(&libdir).expect("mkdir");
    let link = libdir.join("libamdhip64.so.5");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(build_libs().join("libamdhip64.so"), &link).expect("symlink");
    let out = Command::new("timeout")
        .arg("300")
        .arg(&exe)
        .env("LD_LIBRARY_PATH", &libdir)
        .env("KFDRT_DEVICE", "emu:mi250x")
        .output()
        .expect("run hip_diff on kfdrt");
    let ours = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    for (who, r) in [("CLR", &clr), ("kfdrt", &ours)] {
        assert_eq!(r.code, Some(0), "hip_diff on {who}\n{}", r.all());
        assert!(
            r.stdout.contains("diff end"),
            "hip_diff on {who}\n{}",
            r.all()
        );
    }
    let (a, b) = (diff_rows(&clr.stdout), diff_rows(&ours.stdout));
    let mut names: Vec<&str> = a.iter().map(|(f, _)| f.as_str()).collect();
    for (f, _) in &b {
        if !names.contains(&f.as_str()) {
            names.push(f);
        }
    }
    let cell = |rows: &[(String, String)], f: &str| {
        rows.iter()
            .find(|(g, _)| g == f)
            .map_or("(no line)".to_owned(), |(_, c)| c.clone())
    };
    let mut table = String::from(
        "| function | CLR 5.2 (Debian) on emu:mi250x | kfdrt libamdhip64 on emu:mi250x |\n|---|---|---|\n",
    );
    for f in &names {
        table += &format!("| `{f}` | {} | {} |\n", cell(&a, f), cell(&b, f));
    }
    println!("{table}");
    let clr_not_ok: Vec<&str> = a
        .iter()
        .filter(|(_, c)| c.starts_with("hipError") || c.starts_with("wrong") || c == "skipped")
        .map(|(f, _)| f.as_str())
        .collect();
    assert_eq!(
        clr_not_ok,
        [
            "hipMemAddressReserve",
            "hipMemMap",
            "hipMemSetAccess",
            "hipMemcpy(VMM)",
            "hipMemUnmap",
            "hipMemRelease",
            "hipMemAddressFree"
        ],
        "{table}\n{}",
        clr.all()
    );
    assert!(
        table.contains("| `hipMemAddressReserve` | wrong: no address |"),
        "{table}"
    );
    // kfdrt's library answers every call of the program right, VMM included, and prints a
    // line for every call CLR does.
    let ours_not_ok: Vec<&str> = b
        .iter()
        .filter(|(_, c)| c.starts_with("hipError") || c.starts_with("wrong") || c == "skipped")
        .map(|(f, _)| f.as_str())
        .collect();
    assert!(ours_not_ok.is_empty(), "{table}\n{}", ours.all());
    assert!(!table.contains("(no line)"), "{table}");
}
