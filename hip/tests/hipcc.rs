//! HIP programs with kernels, compiled at test time by Debian's `hipcc --offload-arch=gfx90a`
//! (`tests/hip/*.hip`), run on the emulated MI250X through kfdrt's `libamdhip64.so.5`
//! (LD_LIBRARY_PATH): the fat binary registration path, `<<<>>>`, shared memory and
//! barriers, streams/events/callbacks around kernels, `hipMallocAsync` memory and managed
//! memory used by kernels, pageable `hipMemcpy`, and the module API. Each program checks
//! itself and prints its values; the tests assert the printed lines. Needs Debian's
//! `hipcc` (installed by `.ci/run`).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::{lib_dir, output_within, tmp};

const DEVICE: &str = "emu:mi250x";

fn src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/hip")
        .join(name)
}

/// `hipcc --offload-arch=gfx90a [extra] SRC -o OUT`.
fn hipcc(name: &str, extra: &[&str], out: &Path) {
    // hipcc leaves an empty `<stem>-XXXXXX` directory in TMPDIR per compile: keep it in target/.
    let o = Command::new("hipcc")
        .env("TMPDIR", tmp())
        .arg("--offload-arch=gfx90a")
        .args(extra)
        .arg(src(name))
        .arg("-o")
        .arg(out)
        .output()
        .unwrap_or_else(|e| panic!("hipcc (Debian package `hipcc`): {e}"));
    assert!(
        o.status.success(),
        "hipcc {name}:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `exe args` on our library with a bound; its stdout (the test fails on a non-zero
/// exit or anything on stderr).
fn run(exe: &Path, args: &[&Path]) -> String {
    let o = output_within(
        Command::new(exe)
            .args(args)
            .env("LD_LIBRARY_PATH", lib_dir(tmp()))
            .env("KFDRT_DEVICE", DEVICE),
        Duration::from_secs(300),
    );
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert!(
        o.status.success(),
        "{} failed ({}):\n{out}{err}",
        exe.display(),
        o.status
    );
    assert!(err.is_empty(), "stderr:\n{err}");
    out
}

fn build_and_run(name: &str) -> String {
    let exe = tmp().join(format!("hipcc-{}", name.trim_end_matches(".hip")));
    hipcc(name, &[], &exe);
    run(&exe, &[])
}

fn lines(out: &str) -> Vec<&str> {
    out.lines().collect()
}

#[test]
fn vector_add_with_triple_chevrons_and_pageable_copies() {
    let out = build_and_run("vadd.hip");
    assert_eq!(
        lines(&out),
        [
            "vadd n=3000 bad=0 c[0]=0.5 c[1]=3.5 c[2999]=8997.5 sum=13497000.0",
            "staged bytes=5242957 equal=1",
        ]
    );
}

#[test]
fn relaunch_with_same_and_changed_arguments_and_nested_configurations() {
    let out = build_and_run("relaunch.hip");
    assert_eq!(
        lines(&out),
        [
            "relaunch x=54 y=36 bad=0",
            "unknown hipErrorInvalidDeviceFunction last hipErrorInvalidDeviceFunction then x=55",
            "empty pop hipErrorInvalidConfiguration last hipErrorInvalidConfiguration",
            "null out hipErrorInvalidValue then hipErrorInvalidConfiguration",
        ]
    );
}

#[test]
fn arguments_of_mixed_sizes_and_alignments_and_a_null_argument_pointer() {
    let out = build_and_run("launch_args.hip");
    assert_eq!(
        lines(&out),
        [
            "mixed bad=0",
            "null arg hipErrorInvalidValue last hipErrorInvalidValue then bad=0",
            "block 2048x1x1 <<<>>> hipErrorInvalidConfiguration launch hipErrorInvalidConfiguration last hipErrorInvalidConfiguration out[0]=0",
            "block 1025x1x1 <<<>>> hipErrorInvalidConfiguration launch hipErrorInvalidConfiguration last hipErrorInvalidConfiguration out[0]=0",
            "block 1x1x2048 <<<>>> hipErrorInvalidConfiguration launch hipErrorInvalidConfiguration last hipErrorInvalidConfiguration out[0]=0",
            "block 64x32x1 <<<>>> hipErrorInvalidConfiguration launch hipErrorInvalidConfiguration last hipErrorInvalidConfiguration out[0]=0",
            "block 0 hipErrorInvalidValue",
            "after bad=0",
        ]
    );
}

#[test]
fn shared_memory_and_syncthreads() {
    let out = build_and_run("shared.hip");
    assert_eq!(
        lines(&out),
        [
            "shared sums 115480 122232 129744 bad=0",
            "attributes sharedSizeBytes=1024 maxThreadsPerBlock=1024",
        ]
    );
}

#[test]
fn streams_events_and_callbacks_around_kernels() {
    let out = build_and_run("streams.hip");
    assert_eq!(
        lines(&out),
        [
            "gated: callbacks=0 x0=-1 y0=-1",
            // Callbacks in order, each seeing the output of the kernel before it.
            "callbacks=3 order=1,2,3 seen=611,1833,518",
            "x[0]=100 x[511]=611 y[511]=518 elapsed_ok=1",
        ]
    );
}

#[test]
fn malloc_async_memory_used_by_kernels() {
    let out = build_and_run("mallocasync.hip");
    assert_eq!(
        lines(&out),
        [
            "mallocasync h[0]=1005 h[1]=1007 h[999]=1997007 bad=0",
            "reuse c[2]=5",
        ]
    );
}

#[test]
fn managed_memory_touched_by_kernels_after_prefetch() {
    let out = build_and_run("managed.hip");
    assert_eq!(
        lines(&out),
        [
            "managed p[0]=1 p[1]=3 p[4095]=8191 sum=16777216 bad=0",
            "again p[3]=14",
        ]
    );
}

#[test]
fn frees_wait_for_the_kernels_still_queued_on_the_memory() {
    let out = build_and_run("free_sync.hip");
    assert_eq!(
        lines(&out),
        ["device done=8", "host done=12", "managed done=16", "ok"]
    );
}

#[test]
fn module_api_on_a_genco_code_object() {
    let co = tmp().join("hipcc-axpy.co");
    hipcc("axpy_kernel.hip", &["--genco"], &co);
    let exe = tmp().join("hipcc-module");
    hipcc("module.hip", &[], &exe);
    let out = run(&exe, &[&co]);
    assert_eq!(
        lines(&out),
        [
            "params y[0]=1 y[1]=4 y[299]=898",
            "extra y[0]=1 y[1]=6 y[299]=1496",
            "loaddata y[1]=7",
            "stale hipErrorInvalidHandle then y[1]=8",
            "block 1x1x2048 hipErrorInvalidConfiguration last hipErrorInvalidConfiguration",
        ]
    );
}

#[test]
fn warm_launches_follow_kernels_and_streams_and_see_destroyed_unregistered_and_reset() {
    let co = tmp().join("hipcc-warm-axpy.co");
    hipcc("axpy_kernel.hip", &["--genco"], &co);
    let exe = tmp().join("hipcc-warm");
    hipcc("warm.hip", &[], &exe);
    let out = run(&exe, &[&co]);
    assert_eq!(
        lines(&out),
        [
            "alternating p[0]=410 p[63]=410",
            "shapes big hipErrorInvalidConfiguration p[0]=411 p[63]=410",
            "destroyed hipErrorInvalidHandle last hipErrorInvalidHandle then p[0]=414",
            "registered y[1]=5 y[63]=315",
            "unregistered hipErrorInvalidDeviceFunction last hipErrorInvalidDeviceFunction y[1]=5 then p[0]=415",
            "after reset p[0]=106 p[63]=106",
        ]
    );
}

#[test]
fn symbol_api_and_by_value_arguments_above_512_bytes() {
    let out = build_and_run("symbols.hip");
    assert_eq!(
        lines(&out),
        [
            "symbols table[0]=1.0 table[199]=598.0 table[200]=200.0 counter=400 coeffs=3,1,7,9 bad=0",
            "by-value sizes 1200 3000 sums 104550 764136 expected 104550 764136",
        ]
    );
}

#[test]
fn per_thread_default_stream_launches_and_symbol_copies() {
    let exe = tmp().join("hipcc-spt");
    hipcc("spt.hip", &["-fgpu-default-stream=per-thread"], &exe);
    // The stubs and the header's mapping reach the `_spt` entry points.
    let o = Command::new("nm")
        .args(["-D", "--undefined-only"])
        .arg(&exe)
        .output()
        .expect("nm");
    let syms = String::from_utf8_lossy(&o.stdout);
    for name in [
        "hipLaunchKernel_spt",
        "hipMemcpyToSymbol_spt",
        "hipMemcpyFromSymbol_spt",
        "hipStreamSynchronize_spt",
        "hipStreamQuery_spt",
    ] {
        assert!(syms.contains(name), "{name} not referenced:\n{syms}");
    }
    let out = run(&exe, &[]);
    assert_eq!(
        lines(&out),
        ["b out=11,12,13,14 back=3,4 a_mark_meanwhile=0", "a mark=42"]
    );
}

#[test]
fn hipbench_runs_on_this_library_and_every_launch_executes() {
    // tools/hipbench/hipbench.hip, the program tools/hipbench/run.sh races against CLR.
    let exe = tmp().join("hipcc-hipbench");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/hipbench/hipbench.hip");
    let o = Command::new("hipcc")
        .env("TMPDIR", tmp())
        .args(["--offload-arch=gfx90a", "-O2"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("hipcc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let iters = Path::new("64");
    let out = run(&exe, &[iters]);
    let ops: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("op "))
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    assert_eq!(
        ops,
        [
            "writeValue32_enqueue",
            "eventRecord_enqueue",
            "streamQuery_idle",
            "streamSynchronize_idle",
            "writeValue32+sync_roundtrip",
            "callback_enqueue_to_run",
            "mallocAsync+freeAsync_1MiB",
            "mallocAsync+freeAsync_1MiB_kept",
            "kernelLaunch_enqueue",
            "writeValue32_enqueue_gated",
            "kernelLaunch_enqueue_gated",
        ]
    );
    // 1 warm-up launch, 3 batches of 32 ungated and 3 gated: every one ran.
    assert!(out.contains("kernel_count 193 expected 193"), "{out}");
    assert!(out.contains("hip-lib-hipcc/libamdhip64.so.5"), "{out}");
}
