//! End-to-end tests of `kfdrt check` on the emulator: output, JSON and exit codes.

mod common;

use common::{kfdrt, stderr, stdout};

/// (passed, failed, skipped) from the summary line.
fn summary(out: &str) -> (usize, usize, usize) {
    let line = out
        .lines()
        .find(|l| l.contains(" passed, ") && l.contains(" failed, ") && l.contains(" skipped"))
        .unwrap_or_else(|| panic!("no summary line in:\n{out}"));
    let n: Vec<usize> = line
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .take(3)
        .map(|s| s.parse().unwrap())
        .collect();
    (n[0], n[1], n[2])
}

#[test]
fn default_device_passes_every_check() {
    let o = kfdrt(&["check", "--device", "emu"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    let (p, f, s) = summary(&out);
    assert_eq!(f, 0, "{out}");
    assert!(p >= 30, "at least 30 checks pass: {out}");
    // Single GPU: the multi-GPU checks are skipped with the reason, never passed. A kernel
    // check may skip only while the emulator's interpreter lacks an instruction it needs.
    let kernel_skips = out
        .lines()
        .filter(|l| l.starts_with("kernels.") && l.contains("SKIP"))
        .inspect(|l| assert!(l.contains("cannot execute this kernel yet"), "{l}"))
        .count();
    assert_eq!(s - kernel_skips, 2, "{out}");
    for name in ["memory.peer_vram_write", "xstream.cross_gpu_wait_event"] {
        let row = out.lines().find(|l| l.starts_with(name)).unwrap();
        assert!(
            row.contains("SKIP") && row.contains("needs 2 GPUs"),
            "{row}"
        );
    }
    for group in [
        "topology.",
        "memory.",
        "queues.",
        "pm4.",
        "aql.",
        "sdma.",
        "events.",
        "signals.",
        "streams.",
        "xstream.",
        "callbacks.",
        "memops.",
        "kernels.",
        "faults.",
    ] {
        assert!(
            out.lines()
                .any(|l| l.starts_with(group) && l.contains("PASS")),
            "group {group} has no passing check:\n{out}"
        );
    }
    assert!(out.starts_with("# device Emulated"), "{out}");
    // Progress goes to stderr, one line per check.
    let err = stderr(&o);
    assert!(
        err.contains("[1/") && err.contains("] topology.kfd_version ..."),
        "{err}"
    );
    assert_eq!(err.lines().filter(|l| l.starts_with('[')).count(), p + s);
}

#[test]
fn only_filters_by_name_and_group() {
    let o = kfdrt(&[
        "check",
        "--device",
        "emu:mi210",
        "--only",
        "sdma,topology.kfd",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let rows: Vec<&str> = out
        .lines()
        .filter(|l| l.contains(" PASS ") || l.contains(" FAIL ") || l.contains(" SKIP "))
        .collect();
    // "sdma" matches the sdma group and, as a name substring, faults.sdma_memory_exception.
    assert_eq!(rows.len(), 7, "{out}");
    assert!(rows.iter().all(|r| r.starts_with("sdma.")
        || r.starts_with("topology.kfd_version")
        || r.starts_with("faults.sdma_memory_exception")));
    assert_eq!(summary(&out), (7, 0, 0));
}

#[test]
fn json_report_parses_and_repeat_doubles_the_count() {
    let one = kfdrt(&["check", "--only", "streams", "--json"]);
    assert_eq!(one.status.code(), Some(0), "{}", stderr(&one));
    let v: serde_json::Value = serde_json::from_slice(&one.stdout).expect("JSON report");
    let n = v["results"].as_array().unwrap().len();
    assert_eq!(n, 5);
    assert_eq!(v["summary"]["passed"], 5);
    assert_eq!(v["summary"]["failed"], 0);
    for r in v["results"].as_array().unwrap() {
        assert_eq!(r["group"], "streams");
        assert_eq!(r["result"], "pass");
        assert!(r["name"].as_str().unwrap().starts_with("streams."));
        assert!(r["time_ms"].as_f64().unwrap() >= 0.0);
    }
    let two = kfdrt(&["check", "--only", "streams", "--json", "--repeat", "2"]);
    assert_eq!(two.status.code(), Some(0), "{}", stderr(&two));
    let v2: serde_json::Value = serde_json::from_slice(&two.stdout).unwrap();
    let res = v2["results"].as_array().unwrap();
    assert_eq!(res.len(), 2 * n);
    assert_eq!(v2["repeat"], 2);
    assert_eq!(res[0]["run"], 1);
    assert_eq!(res[n]["run"], 2);
    assert_eq!(res[0]["name"], res[n]["name"]);
    // The table form numbers the runs too.
    let t = kfdrt(&["check", "--only", "topology", "--repeat", "2"]);
    assert_eq!(summary(&stdout(&t)), (8, 0, 0));
}

/// A small-BAR board (VRAM not CPU-visible): every check passes through the GPU, except
/// the ones about CPU access to VRAM, which skip with the reason.
#[test]
fn small_bar_board_passes_or_skips_with_the_reason() {
    let o = kfdrt(&["check", "--device", "emu:mi210[smallbar]"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    let (p, f, s) = summary(&out);
    assert_eq!(f, 0, "{out}");
    assert!(p >= 30, "{out}");
    for name in ["memory.cpu_roundtrip", "firmware.hdp_flush"] {
        let row = out.lines().find(|l| l.starts_with(name)).unwrap();
        assert!(
            row.contains("SKIP") && row.contains("VRAM not CPU-visible: small BAR"),
            "{row}"
        );
    }
    let small_bar_skips = out.lines().filter(|l| l.contains("small BAR")).count();
    assert_eq!(small_bar_skips, 2, "{out}");
    assert_eq!(s, 4, "two small-BAR and two 2-GPU skips: {out}");
    for name in [
        "sdma.copy_linear_bytes",
        "copies.large_copy_ordered",
        "managed.prefetch_roundtrip",
        "managed.prefetch_stream_order",
        "vmm.alias_two_mappings",
        "vmm.export_import",
    ] {
        let row = out.lines().find(|l| l.starts_with(name)).unwrap();
        assert!(row.contains("PASS"), "{row}");
    }
}

#[test]
fn multi_gpu_spec_runs_cross_gpu_checks() {
    let o = kfdrt(&[
        "check",
        "--device",
        "emu:mi250x*2",
        "--only",
        "peer,cross_gpu,topology.gpu_nodes",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    for name in [
        "memory.peer_vram_write",
        "xstream.cross_gpu_wait_event",
        "topology.gpu_nodes",
    ] {
        let row = out
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{out}"));
        assert!(row.contains("PASS"), "{row}");
    }
    assert_eq!(summary(&out), (3, 0, 0));
}

#[test]
fn injected_fault_fails_and_is_named() {
    let o = kfdrt(&["check", "--inject-fault", "--only", "faults,selftest"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", stderr(&o));
    let row = out
        .lines()
        .find(|l| l.starts_with("selftest.injected_fault"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        row.contains("FAIL") && row.contains("LaunchFailure"),
        "{row}"
    );
    // The genuine fault checks still pass: the device reported the fault correctly. The
    // cleanup self-tests: two fail by design, one passes.
    assert_eq!(summary(&out), (4, 3, 0), "{out}");
    assert!(out.contains("FAILED: selftest.injected_fault"), "{out}");
    let j = kfdrt(&["check", "--inject-fault", "--only", "selftest", "--json"]);
    assert_eq!(j.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&j.stdout).unwrap();
    assert_eq!(v["results"][0]["result"], "fail");
    assert!(v["results"][0]["detail"]
        .as_str()
        .unwrap()
        .contains("fault"));
}

/// The row of `name` in run `run` (`--repeat` tables start with the run number).
fn row<'a>(out: &'a str, run: u32, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.starts_with(&format!("{run:<3} {name} ")))
        .unwrap_or_else(|| panic!("no row for run {run} of {name}:\n{out}"))
}

/// A check that ends early (a returned failure, a panic) while its stream waits on a word
/// in its own buffer: its Drain releases the wait and drains the stream before the buffer
/// is freed, so no GPU fault follows it (the runner's fault audit would name one, as
/// `selftest.freed_under_queue_is_seen` shows it does when a buffer is freed under a held
/// stream), and the check after it passes.
#[test]
fn a_check_ending_early_while_its_stream_waits_leaves_no_fault() {
    let o = kfdrt(&[
        "check",
        "--inject-fault",
        "--only",
        "selftest.early_exit_while_held,selftest.panic_while_held,\
         selftest.freed_under_queue_is_seen,memops.wait_value32_gte_holds",
        "--repeat",
        "2",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}\n{}", stderr(&o));
    for run in [1, 2] {
        let early = row(&out, run, "selftest.early_exit_while_held");
        assert!(
            early.contains("FAIL")
                && early.ends_with("injected early failure while the stream waits on its buffer"),
            "{early}"
        );
        let panicked = row(&out, run, "selftest.panic_while_held");
        assert!(
            panicked.contains("FAIL  ")
                && panicked.contains("panicked at tools/src/check/selftest.rs:")
                && panicked.ends_with(": injected panic while the stream waits on its buffer"),
            "{panicked}"
        );
        // The audit's probe: freeing under a held stream is seen, naming the page.
        let seen = row(&out, run, "selftest.freed_under_queue_is_seen");
        assert!(seen.contains("PASS"), "{seen}");
        // Run 2's first check follows run 1's early exit and panic.
        let next = row(&out, run, "memops.wait_value32_gte_holds");
        assert!(next.contains("PASS"), "{next}");
    }
    assert!(!out.contains("memory fault"), "{out}");
    // The panic is reported in its row only, not printed by the panic hook.
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_eq!(summary(&out), (4, 4, 0), "{out}");
}

#[test]
fn a_hang_becomes_a_timeout_failure() {
    // events.wait_timeout sleeps 30 ms in WAIT_EVENTS: a 5 ms deadline expires first.
    let o = kfdrt(&[
        "check",
        "--only",
        "events.wait_timeout",
        "--timeout",
        "0.005",
    ]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    let row = out
        .lines()
        .find(|l| l.starts_with("events.wait_timeout"))
        .unwrap();
    assert!(row.contains("FAIL") && row.contains("timeout"), "{row}");
}

#[test]
fn list_help_and_usage_errors() {
    let l = kfdrt(&["check", "--list"]);
    assert_eq!(l.status.code(), Some(0));
    let s = stdout(&l);
    assert!(
        s.contains("faults.stream_fault_sticky") && s.contains("sdma:"),
        "{s}"
    );
    assert!(
        !s.contains("selftest"),
        "self-test listed without --inject-fault"
    );
    let h = kfdrt(&["check", "--help"]);
    assert_eq!(h.status.code(), Some(0));
    assert!(stdout(&h).contains("EXAMPLES") && stdout(&h).contains("--inject-fault"));
    assert!(stdout(&kfdrt(&["help", "check"])).contains("--repeat N"));
    assert!(stdout(&kfdrt(&["help"])).contains("check"));
    for bad in [
        &["check", "--bogus"][..],
        &["check", "--repeat", "0"],
        &["check", "--repeat", "x"],
        &["check", "--timeout", "-1"],
        &["check", "--only", "no-such-check"],
        &["check", "extra"],
    ] {
        let o = kfdrt(bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("kfdrt check:"),
            "{bad:?}: {}",
            stderr(&o)
        );
    }
    let o = kfdrt(&["check", "--device", "emu:nosuchgpu"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unknown preset"), "{}", stderr(&o));
}
