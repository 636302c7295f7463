//! What the tests of the `kfdrt` binary share: running it, its output as text, and
//! scratch directories.
// Each test crate includes this module and uses a part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The binary, with no `KFDRT_DEVICE` from the environment.
pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kfdrt"));
    c.env_remove("KFDRT_DEVICE");
    c
}

/// Run `kfdrt ARGS` to completion.
pub fn kfdrt(args: &[&str]) -> Output {
    bin().args(args).output().expect("run kfdrt")
}

/// Standard output as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Standard error as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A fresh, empty directory `name` of this test process under cargo's temporary
/// directory for integration tests (the test removes it when done).
pub fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("kfdrt-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `kfdrt ARGS`, a `bench ... --json` run that must succeed: its figures and its output.
pub fn bench_figures(args: &[&str]) -> (Vec<serde_json::Value>, String) {
    let o = kfdrt(args);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let figs = v["figures"].as_array().expect("figures").clone();
    (figs, out)
}

/// `kfdrt disasm --engine ENGINE --gfx GFX ARGS`.
pub fn disasm(engine: &str, gfx: &str, args: &[&str]) -> Output {
    let mut all = vec!["disasm", "--engine", engine, "--gfx", gfx];
    all.extend_from_slice(args);
    kfdrt(&all)
}
