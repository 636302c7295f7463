//! Helpers shared by the tests that run C/C++ and HIP programs on kfdrt's
//! `libamdhip64.so.5`: finding the library cargo just built, a directory to put on
//! LD_LIBRARY_PATH, and running a program with a time bound.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Our cdylib, built by cargo before the tests. `deps/` holds the fresh one: `cargo test`
/// does not refresh the copy in `target/<profile>/`.
pub fn our_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test exe");
    let deps = exe.parent().expect("deps dir");
    for p in [deps.join("libamdhip64.so"), deps.join("../libamdhip64.so")] {
        if p.exists() {
            return p.canonicalize().expect("canonical path");
        }
    }
    panic!("libamdhip64.so not found next to {}", deps.display());
}

/// Cargo's scratch directory for this package's integration tests (under target/).
pub fn tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// `hip-lib-<test binary>` in `tmp`, holding `libamdhip64.so.5` -> our library, for
/// LD_LIBRARY_PATH. The tests of a binary run in parallel: the link is made under a lock.
pub fn lib_dir(tmp: &Path) -> PathBuf {
    static MAKING: Mutex<()> = Mutex::new(());
    let _g = MAKING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tmp.join(concat!("hip-lib-", env!("CARGO_CRATE_NAME")));
    std::fs::create_dir_all(&dir).expect("mkdir");
    let link = dir.join("libamdhip64.so.5");
    let lib = our_lib();
    if std::fs::read_link(&link).ok() != Some(lib.clone()) {
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(lib, &link).expect("symlink");
    }
    dir
}

/// Runs `cmd` to its end with stdout and stderr captured; kills it and fails the test
/// (showing both streams) when it runs longer than `limit`.
pub fn output_within(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().expect("output");
            panic!(
                "{cmd:?} timed out after {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}
