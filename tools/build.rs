//! Embeds the kernels of the `kernels` check group: builds test-kernels sources for gfx90a
//! and gfx942 with clang-19 when it is installed; otherwise the checks skip, naming why.

use std::fmt::Write as _;
use std::path::PathBuf;

const SOURCES: [&str; 9] = [
    "cl/vadd.cl",
    "cl/isa/saxpy.cl",
    "cl/isa/fma_chain.cl",
    "cl/isa/matmul.cl",
    "cl/isa/reduce.cl",
    "cl/reduce.cl",
    "cl/private_array.cl",
    "cl/empty.cl",
    "hip/dims.hip",
];
const TARGETS: [&str; 2] = ["gfx90a", "gfx942"];

fn main() {
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let src_dir = test_kernels::source_dir();
    println!("cargo:rerun-if-changed=build.rs");
    for s in SOURCES {
        println!("cargo:rerun-if-changed={}", src_dir.join(s).display());
    }
    let mut code = String::new();
    let mut entries = String::new();
    let mut error: Option<String> = None;
    'all: for s in SOURCES {
        for t in TARGETS {
            match test_kernels::build(s, t) {
                Ok(elf) => {
                    let file = out.join(format!("{}-{t}.co", s.replace('/', "_")));
                    std::fs::write(&file, elf).expect("write embedded kernel");
                    let _ = writeln!(
                        entries,
                        "    ({s:?}, {t:?}, include_bytes!({:?})),",
                        file.display().to_string()
                    );
                }
                Err(e) => {
                    error = Some(e.0.lines().next().unwrap_or("build failed").to_string());
                    entries.clear();
                    break 'all;
                }
            }
        }
    }
    let _ = writeln!(
        code,
        "/// Why no kernels are embedded (clang-19/ld.lld-19 missing or a build failure).\n\
         pub const BUILD_ERROR: Option<&str> = {error:?};\n\
         /// (source, target, code object) of every embedded kernel.\n\
         pub const KERNELS: &[(&str, &str, &[u8])] = &[\n{entries}];"
    );
    std::fs::write(out.join("embedded_kernels.rs"), code).expect("write embedded_kernels.rs");
}
