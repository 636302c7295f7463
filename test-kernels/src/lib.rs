//! Test kernels for kfdrt, built from source at test time.
//!
//! The kernel sources live next to this crate (`cl/*.cl`: OpenCL C using
//! `__builtin_amdgcn_*` intrinsics; `hip/*.hip`: HIP device code). [`build`] compiles one
//! of them for a target with Debian's `clang-19` and links it with `ld.lld-19` into a
//! loadable AMDGPU code object (an ELF shared object), exactly as a user's toolchain would.
//! Compiled binaries are never committed: the sources are the only copy.
//!
//! Flags (see `../shared/design.md`, "Compilers here"):
//! - OpenCL C: `-x cl -cl-std=CL2.0 -target amdgcn-amd-amdhsa -mcpu=T -nogpulib -O2`
//!   (Debian's device libraries stop at gfx90a, so no device library is linked).
//! - HIP: `-x hip --offload-device-only --no-gpu-bundle-output -nogpulib -nogpuinc
//!   --offload-arch=T -O2` (kernels declare what they need themselves).
//!
//! Results are cached per process, keyed by (source, target, extra flags).
//!
//! ```no_run
//! let elf = test_kernels::build("cl/vadd.cl", "gfx942").expect("clang-19 builds vadd");
//! assert_eq!(&elf[..4], b"\x7fELF");
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// The compiler driver used (Debian package `clang-19`).
pub const CLANG: &str = "clang-19";
/// The linker used (Debian package `lld-19`).
pub const LLD: &str = "ld.lld-19";

/// Why a kernel could not be built.
#[derive(Debug, Clone)]
pub struct BuildError(pub String);

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for BuildError {}

/// Directory holding the kernel sources (`cl/`, `hip/`).
pub fn source_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// True when `clang-19` and `ld.lld-19` can be run.
pub fn toolchain_available() -> bool {
    [CLANG, LLD].iter().all(|t| {
        Command::new(t)
            .arg("--version")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    })
}

/// Builds `rel` (a path under [`source_dir`], `.cl` or `.hip`) for `mcpu` (for example
/// `gfx942`, `gfx90a`, `gfx942:xnack-`) into a code object.
pub fn build(rel: &str, mcpu: &str) -> Result<Vec<u8>, BuildError> {
    build_with(rel, mcpu, &[])
}

/// [`build`] with extra compiler flags (for example `-DTILE=16` or `-O0`).
pub fn build_with(rel: &str, mcpu: &str, extra: &[&str]) -> Result<Vec<u8>, BuildError> {
    type Key = (String, String, Vec<String>);
    static CACHE: OnceLock<Mutex<HashMap<Key, Vec<u8>>>> = OnceLock::new();
    let key = (
        rel.to_string(),
        mcpu.to_string(),
        extra.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some(v) = cache.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(v.clone());
    }
    let src = source_dir().join(rel);
    let elf = compile_file(&src, mcpu, extra)?;
    cache
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, elf.clone());
    Ok(elf)
}

/// Compiles source text (`lang` is `"cl"` or `"hip"`) for `mcpu`.
pub fn build_source(text: &str, lang: &str, mcpu: &str) -> Result<Vec<u8>, BuildError> {
    let dir = TempDir::new()?;
    let src = dir.0.join(format!("k.{lang}"));
    std::fs::write(&src, text).map_err(|e| BuildError(format!("write {}: {e}", src.display())))?;
    compile_file(&src, mcpu, &[])
}

fn compile_file(src: &Path, mcpu: &str, extra: &[&str]) -> Result<Vec<u8>, BuildError> {
    if !toolchain_available() {
        return Err(BuildError(format!(
            "test kernels need {CLANG} and {LLD} (Debian packages clang-19, lld-19; \
             `bash .ci/run` installs them)"
        )));
    }
    let dir = TempDir::new()?;
    let obj = dir.0.join("k.o");
    let out = dir.0.join("k.co");
    let mut cc = Command::new(CLANG);
    match src.extension().and_then(|e| e.to_str()) {
        Some("cl") => {
            cc.args(["-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa"])
                .arg(format!("-mcpu={mcpu}"))
                .args(["-nogpulib", "-O2", "-c"]);
        }
        Some("hip") => {
            cc.args([
                "-x",
                "hip",
                "--offload-device-only",
                "--no-gpu-bundle-output",
                "-nogpulib",
                "-nogpuinc",
                "-O2",
                "-c",
            ])
            .arg(format!("--offload-arch={mcpu}"));
        }
        _ => {
            return Err(BuildError(format!(
                "{}: unknown kernel language (want .cl or .hip)",
                src.display()
            )))
        }
    }
    cc.args(extra).arg(src).arg("-o").arg(&obj);
    run(cc, src)?;
    let mut ld = Command::new(LLD);
    ld.arg("-shared").arg(&obj).arg("-o").arg(&out);
    run(ld, src)?;
    std::fs::read(&out).map_err(|e| BuildError(format!("read {}: {e}", out.display())))
}

fn run(mut cmd: Command, src: &Path) -> Result<(), BuildError> {
    let o = cmd
        .output()
        .map_err(|e| BuildError(format!("{cmd:?}: {e}")))?;
    if o.status.success() {
        Ok(())
    } else {
        Err(BuildError(format!(
            "building {} failed ({:?}):\n{}",
            src.display(),
            cmd,
            String::from_utf8_lossy(&o.stderr)
        )))
    }
}

/// A temporary directory removed on drop (no leftovers in the temp directory).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<Self, BuildError> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static N: AtomicU64 = AtomicU64::new(0);
        let p = std::env::temp_dir().join(format!(
            "kfdrt-test-kernel-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&p)
            .map_err(|e| BuildError(format!("mkdir {}: {e}", p.display())))?;
        Ok(Self(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vadd_builds_for_cdna_targets() {
        for t in ["gfx90a", "gfx942"] {
            let elf = build("cl/vadd.cl", t).unwrap();
            assert_eq!(&elf[..4], b"\x7fELF", "{t}");
            // EM_AMDGPU = 224 at e_machine (offset 18, little endian).
            assert_eq!(u16::from_le_bytes([elf[18], elf[19]]), 224, "{t}");
        }
    }

    #[test]
    fn bad_source_names_the_file() {
        let e = build_source("this is not C", "cl", "gfx942").unwrap_err();
        assert!(e.0.contains("k.cl"), "{e}");
    }
}
